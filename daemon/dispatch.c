/* dispatch.c: one Request in, one Response out (see dispatch.h).
 *
 * Happy path of an atomic or memory op: unpack the Request; look the tile up (a counted
 * reference, so a concurrent destroy cannot free the memory under us); convert the wire
 * Region / Array / Options / addressing into a ta_request whose operand views borrow the
 * unpacked message's bytes; ta_plan_build validates it; allocate old_out when the plan
 * returns values (after checking that they fit in one response frame, so that an op is
 * never applied and then unanswerable); ta_backend_apply; build an OpResponse (or the
 * `data` body for read) and encode it.
 *
 * Failure modes: a payload that does not unpack gets id 0, INVALID_ARGUMENT and a request
 * to close the connection; every other failure is a Response with the request's id, a
 * status code and a message naming the problem, and the connection goes on (a failed Auth
 * closes it too).
 *
 * Before decoding, every string field is checked (wirecheck.c): a NUL or invalid UTF-8 is
 * INVALID_ARGUMENT naming the field. The hot requests (ping, the atomic families) and
 * responses go through fastwire.c's one-pass decoder and encoder instead, which give the
 * same structures and bytes and hand anything unusual back to protobuf-c. Without
 * --data-dir, a plain atomic request run alone is decoded straight into its ta_request
 * (ta_fastwire_decode_atomic, handle_atomic) and its OK answer written straight from the
 * plan's results (ta_fastwire_append_op). A connection's request run on its event loop
 * that repeats the connection's last one-element atomic request but for its id and operand
 * bytes runs from the plan kept for that one (repeat.h: no decoding, no planning). The
 * plans built here are marked prechecked: the backend does not validate them a second time
 * (recheck_plans: it does).
 *
 * With a session (a client connection): Hello first, then Auth where the session needs it,
 * then every tile is looked up, listed, created and destroyed as the session's identity
 * (private tiles, registry.h). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "dispatch.h"
#include "fastwire.h"
#include "shmbuf.h"

#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "log.h"
#include "persist.h"
#include "ta_auth.h"
#include "ta_frame.h"
#include "ta_wire_enums.h"
#include "tileatom.pb-c.h"
#include "wirecheck.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/* Bytes a response needs besides the element data (ids, status, shape, counters). */
#define RESPONSE_OVERHEAD 256u

/* Where the values a plan returns go in the response. */
typedef enum out_kind {
	OUT_OP = 0,  /* OpResponse.old (atomics, gather, stores, write) */
	OUT_DATA = 1 /* Response.data (read) */
} out_kind;

typedef struct dispatch_group dispatch_group;

/* One response being built, with storage for every body it may point to. */
typedef struct resp_ctx {
	ta_service *svc;                     /* the service */
	Tileatom__Response resp;             /* the response message */
	Tileatom__TileInfo *list_items;      /* malloc'd list entries */
	Tileatom__TileInfo **list_ptrs;      /* malloc'd pointers to list_items */
	ta_tile_info *list_infos;            /* malloc'd storage behind list_items */
	void *old_buf;                       /* values returned by a plan (arena memory) */
	ta_arena *arena;                     /* where this request's memory comes from */
	ta_tile_cache *tiles;                /* the thread's last tile lookup (the scratch's) */
	int64_t inline_max;                  /* >= 0: defer requests of more elements */
	bool deferred;                       /* the request was left for a worker: no reply */
	dispatch_group *group;               /* non-NULL: small plans join this group */
	bool collected;                      /* the plan joined the group: not applied yet */
	out_kind kind;                       /* collected: where its values go */
	ta_tile *held;                       /* collected: the tile (a reference) */
	ta_req_kind req_kind;                /* the request's kind (for the log and metrics) */
	uint64_t elements;                   /* elements the backend processed (metrics) */
	size_t bytes_in;                     /* the request's payload bytes (metrics) */
	struct timespec t0;                  /* when it was decoded, if timed (metrics) */
	ta_session *session;                 /* the connection's session (NULL: in-process) */
	ta_owner who;                        /* the identity requests act for */
	bool close_after;                    /* close the connection after this answer */
	const Tileatom__BufferRef *old_into; /* want_old: the shared-buffer range for them */
	const uint8_t *payload;              /* the request's bytes (its log record) */
	size_t payload_len;                  /* bytes at payload */
	bool payload_plain;                  /* the request names no shared buffer: payload is
	                                        its log record as it stands */
	uint64_t log_seq;                    /* the record appended for it (0: none) */
	ta_persist_run *run;                 /* the pipelined run it belongs to, or NULL */
	bool op_direct;                      /* the OpResponse body is in fop only (op_body_fill
	                                        makes the message when it is needed) */
	ta_repeat *record;                   /* non-NULL: keep the request there when its plan
	                                        ran (ta_repeat_record) */
	const ta_fw_atomic *record_atomic;   /* record: the request as decoded */
	ta_dispatch_scratch *hold_in;        /* non-NULL: an OK answer's metrics and totals
	                                        count into this scratch's held counts */
	/* From here on, storage that resp_ctx_start leaves as it is (about 1.8 KB a request
	 * need not clear): err is set up there, each body by the handler that fills it. */
	ta_error err;                     /* status and message when not OK */
	Tileatom__HelloResponse hello;    /* hello body */
	Tileatom__PingResponse ping;      /* ping body */
	Tileatom__TileInfo tile;          /* create / describe body */
	ta_tile_info tile_info;           /* storage behind tile */
	Tileatom__ListTilesResponse list; /* list body */
	Tileatom__Array data;             /* read body, or OpResponse.old */
	Tileatom__OpResponse op;          /* op body */
	Tileatom__StatsResponse stats;    /* stats body */
	ta_backend_info stats_info;       /* storage behind stats strings */
	int64_t data_shape[TA_MAX_RANK];  /* shape behind data */
	ta_plan plan;                     /* collected: the plan */
	Tileatom__AuthResponse auth;      /* auth body */
	uint8_t sproof[TA_AUTH_PROOF];    /* storage behind auth (the daemon's proof) */
	Tileatom__BufferResponse buffer;  /* register_buffer body */
	Tileatom__SnapshotResponse snap;  /* snapshot body */
	ta_fw_op fop;                     /* op body as ta_fastwire_append_op writes it */
} resp_ctx;

/* Clears the part of rc before err (every field a request may read before writing it),
 * and sets err to OK with an empty message. */
static void resp_ctx_start(resp_ctx *rc)
{
	memset(rc, 0, offsetof(resp_ctx, err));
	rc->err.code = TA_OK;
	rc->err.msg[0] = '\0';
}

/* Plans of at most this many elements (global space) join a group. */
#define TA_DISPATCH_GROUP_PLAN_MAX 1024
/* Requests a group holds before it is applied. */
#define TA_DISPATCH_GROUP 64

/* Requests of one pipelined run whose plans are applied together (ta_backend_apply_many,
 * in their order) and answered in their order, before any other request of the run. */
struct dispatch_group {
	ta_service *svc;                        /* the service */
	ta_frame_buf *out;                      /* where the responses go */
	ta_session *session;                    /* the connection's session (NULL: none) */
	bool close_after;                       /* a response asked to close */
	int n;                                  /* collected requests */
	resp_ctx rcs[TA_DISPATCH_GROUP];        /* their responses being built */
	ta_apply_call calls[TA_DISPATCH_GROUP]; /* their plans for apply_many */
	ta_result results[TA_DISPATCH_GROUP];   /* their counts */
};

static void group_flush(dispatch_group *g);

void ta_service_init(ta_service *svc, ta_backend *backend, ta_registry *registry,
                     uint32_t max_frame)
{
	memset(svc, 0, sizeof(*svc));
	svc->backend = backend;
	svc->registry = registry;
	svc->max_frame = max_frame;
	if (backend)
		ta_backend_info_get(backend, &svc->info);
	ta_service_reset_totals(svc);
	atomic_init(&svc->connections, 0);
	ta_metrics_init(&svc->metrics);
	svc->auth = NULL;
	svc->auth_log = (ta_log_limit)TA_LOG_LIMIT_INIT(10, "authentication failures");
	svc->fast_wire = true;
	ta_fastwire_init(); /* checks the schema once, at start */
}

void ta_service_read_totals(const ta_service *svc, uint64_t *requests, uint64_t *errors,
                            uint64_t *elements)
{
	uint64_t r = 0, e = 0, n = 0;
	for (int i = 0; i < TA_METRICS_SHARDS; i++) {
		r += atomic_load_explicit(&svc->totals[i].requests, memory_order_relaxed);
		e += atomic_load_explicit(&svc->totals[i].errors, memory_order_relaxed);
		n += atomic_load_explicit(&svc->totals[i].elements, memory_order_relaxed);
	}
	*requests = r;
	*errors = e;
	*elements = n;
}

void ta_service_reset_totals(ta_service *svc)
{
	for (int i = 0; i < TA_METRICS_SHARDS; i++) {
		atomic_store(&svc->totals[i].requests, 0);
		atomic_store(&svc->totals[i].errors, 0);
		atomic_store(&svc->totals[i].elements, 0);
	}
}

ta_status ta_session_init(ta_session *s, const ta_service *svc, bool tcp, ta_owner identity,
                          uint64_t serial, ta_error *err)
{
	memset(s, 0, sizeof(*s));
	s->identity = identity;
	s->serial = serial;
	s->auth_needed = tcp && svc->auth;
	if (s->auth_needed && ta_auth_random(s->nonce, sizeof(s->nonce)) != 0)
		return ta_error_set(err, TA_INTERNAL, "no random bytes for an auth nonce");
	return TA_OK;
}

ta_owner ta_session_who(const ta_session *s)
{
	if (!s)
		return TA_OWNER_ANY;
	return s->authenticated ? TA_OWNER_SECRET : s->identity;
}

/* Converts an optional wire Array into a borrowed view (present = false when absent). v
 * must be all zero (a view of a ta_request_init'ed request): only what a present Array
 * gives is written. */
static ta_status view_from_array(const Tileatom__Array *a, const char *what, ta_array_view *v,
                                 ta_error *err)
{
	if (!a)
		return TA_OK;
	if (a->n_shape > TA_MAX_RANK)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s: rank %zu is over the limit of %d", what, a->n_shape,
		                    TA_MAX_RANK);
	v->present = true;
	v->dtype = (ta_dtype)a->dtype;
	v->rank = (int)a->n_shape;
	for (size_t i = 0; i < a->n_shape; i++)
		v->shape[i] = a->shape[i];
	v->data = a->data.data;
	v->nbytes = a->data.len;
	if (a->shared) {
		/* the elements lie in a shared buffer of this connection (shmbuf.h) */
		if (a->data.len != 0)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "%s: gives both inline data and a shared buffer", what);
		void *ptr = NULL;
		ta_status st =
		    ta_shm_resolve(ta_shm_current(), a->shared->buffer_id, a->shared->offset,
		                   a->shared->length, what, &ptr, &v->device, err);
		if (st != TA_OK)
			return st;
		if (a->shared->length > SIZE_MAX)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: too long", what);
		v->data = ptr;
		v->nbytes = (size_t)a->shared->length;
	}
	return TA_OK;
}

/* Copies a region's origin (n_origin entries) and shape (n_shape) into req (both empty:
 * the whole tile). Origin without shape reaches to the end of the tile; shape without
 * origin starts at 0. */
static ta_status region_entries_into(const int64_t *origin, size_t n_origin, const int64_t *shape,
                                     size_t n_shape, const char *what, const ta_tile_shape *tile,
                                     ta_request *req, ta_error *err)
{
	req->has_region = false;
	req->region_rank = 0;
	if (n_origin == 0 && n_shape == 0)
		return TA_OK;
	size_t n = n_origin ? n_origin : n_shape;
	if (n_origin && n_shape && n_origin != n_shape)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s: origin has %zu entries but shape has %zu", what, n_origin,
		                    n_shape);
	if (n > TA_MAX_RANK)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s: rank %zu is over the limit of %d", what, n, TA_MAX_RANK);
	req->has_region = true;
	req->region_rank = (int)n;
	for (size_t a = 0; a < n; a++) {
		int64_t o = n_origin ? origin[a] : 0;
		int64_t s;
		if (n_shape)
			s = shape[a];
		else if ((int)a < tile->rank && o >= 0 && o < tile->shape[a])
			s = tile->shape[a] - o;
		else
			s = 0; /* ta_plan_build names the bad origin */
		req->region_origin[a] = o;
		req->region_shape[a] = s;
	}
	return TA_OK;
}

/* Copies a wire Region into req (absent or empty: the whole tile), as region_entries_into. */
static ta_status region_into(const Tileatom__Region *r, const char *what, const ta_tile_shape *tile,
                             ta_request *req, ta_error *err)
{
	if (!r)
		return region_entries_into(NULL, 0, NULL, 0, what, tile, req, err);
	return region_entries_into(r->origin, r->n_origin, r->shape, r->n_shape, what, tile, req,
	                           err);
}

/* Copies wire Options into req (absent: the defaults ta_request_init set). */
static ta_status options_into(const Tileatom__Options *o, ta_request *req, ta_error *err)
{
	if (!o)
		return TA_OK;
	req->sem = (ta_sem)o->sem;
	req->scope = (ta_scope)o->scope;
	req->space = (ta_space)o->space;
	req->check_bounds = !o->no_bounds_check;
	req->want_old = o->want_old;
	return view_from_array(o->mask, "mask", &req->mask, err);
}

/* The shared-buffer range old values go to (Options.old_into), or NULL. */
static const Tileatom__BufferRef *old_into(const Tileatom__Options *o)
{
	return o ? o->old_into : NULL;
}

/* Scatter addressing into req. */
static ta_status scatter_into(const Tileatom__ScatterAddr *sa, ta_request *req, ta_error *err)
{
	if (!sa || !sa->indices)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "scatter addressing needs dim and indices");
	req->addr = TA_ADDR_SCATTER;
	req->scatter_dim = sa->dim; /* as sent: ta_plan names it when out of range */
	req->n_index = 1;
	return view_from_array(sa->indices, "indices", &req->index[0], err);
}

/* Indexed (index tuple or flat) addressing into req. */
static ta_status indexed_into(const Tileatom__IndexedAddr *ia, ta_request *req, ta_error *err)
{
	if (!ia || ia->n_indices == 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "indexed addressing needs index arrays (one per tile axis, "
		                    "or one with flat)");
	if (ia->n_indices > TA_MAX_RANK)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "indexed addressing: %zu index arrays, over the limit of %d",
		                    ia->n_indices, TA_MAX_RANK);
	req->addr = ia->flat ? TA_ADDR_FLAT : TA_ADDR_INDEXED;
	req->n_index = (int)ia->n_indices;
	static const char *const names[TA_MAX_RANK] = {"indices[0]", "indices[1]", "indices[2]",
	                                               "indices[3]"};
	_Static_assert(TA_MAX_RANK == 4, "one name per index array");
	for (size_t i = 0; i < ia->n_indices; i++) {
		const char *what = names[i]; /* n_indices <= TA_MAX_RANK, checked above */
		if (!ia->indices[i])
			return ta_error_set(err, TA_INVALID_ARGUMENT, "%s is missing", what);
		ta_status st = view_from_array(ia->indices[i], what, &req->index[i], err);
		if (st != TA_OK)
			return st;
	}
	return TA_OK;
}

/* True when a wire Region holds no entries. */
static bool region_empty(const Tileatom__Region *r)
{
	return !r || (r->n_origin == 0 && r->n_shape == 0);
}

/* Addressing of the memory ops: window plus one of region / scatter / indexed. */
static ta_status addressing_into(const Tileatom__Region *window, const Tileatom__Addressing *a,
                                 const ta_tile_shape *tile, ta_request *req, ta_error *err)
{
	Tileatom__Addressing__FormCase form =
	    a ? a->form_case : TILEATOM__ADDRESSING__FORM__NOT_SET;
	switch (form) {
	case TILEATOM__ADDRESSING__FORM__NOT_SET:
		req->addr = TA_ADDR_REGION;
		return region_into(window, "window", tile, req, err);
	case TILEATOM__ADDRESSING__FORM_REGION:
		req->addr = TA_ADDR_REGION;
		if (!region_empty(window) && !region_empty(a->region))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "give the region either as window or as addr.region, "
			                    "not both");
		if (!region_empty(a->region))
			return region_into(a->region, "addr.region", tile, req, err);
		return region_into(window, "window", tile, req, err);
	case TILEATOM__ADDRESSING__FORM_SCATTER: {
		ta_status st = region_into(window, "window", tile, req, err);
		return st != TA_OK ? st : scatter_into(a->scatter, req, err);
	}
	case TILEATOM__ADDRESSING__FORM_INDEXED: {
		ta_status st = region_into(window, "window", tile, req, err);
		return st != TA_OK ? st : indexed_into(a->indexed, req, err);
	}
	default:
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown addressing form %d",
		                    (int)form);
	}
}

/* Checks that a wire op is one of the RMW ops of the table and returns it. */
static ta_status rmw_op(Tileatom__Op wire, ta_op *op, ta_error *err)
{
	if (!ta_op_is_rmw((ta_op)wire)) {
		char ops[128];
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown or missing op (%d): use %s",
		                    (int)wire, ta_kind_ops_text(TA_KIND_RMW, ops, sizeof(ops)));
	}
	*op = (ta_op)wire;
	return TA_OK;
}

/* Looks up the tile a request names (through the thread's cache of its last lookup). */
static ta_status get_tile(resp_ctx *rc, const char *name, ta_tile **tile)
{
	return ta_registry_get_cached(rc->svc->registry, rc->tiles, name, rc->who, tile, &rc->err);
}

static void plan_body(resp_ctx *rc, const ta_plan *p, const ta_result *result, out_kind kind);

/* Validates req against tile, runs it and fills the response body (kind). In a group, a
 * small global-space plan is only collected (rc->collected; group_flush runs it); a larger
 * one first flushes the group. */
static ta_status run_plan(resp_ctx *rc, ta_tile *tile, const ta_request *req, out_kind kind)
{
	ta_service *svc = rc->svc;
	ta_plan plan;
	ta_status st = ta_plan_build(&plan, &tile->shape, req, &rc->err);
	if (st != TA_OK)
		return st;
	/* only old_out changes below: the backend need not re-check what ta_plan_build proved */
	plan.prechecked = !svc->recheck_plans;
	if (rc->inline_max >= 0 && plan.count > rc->inline_max) {
		rc->deferred = true; /* nothing was applied: a worker runs it from the start */
		return TA_OK;
	}
	size_t es = ta_dtype_size(plan.dtype);
	uint64_t old_bytes = 0;
	bool old_shared = plan.want_old && rc->old_into;
	if (old_shared) {
		/* old values go straight into the client's shared buffer */
		old_bytes = (uint64_t)plan.count * es;
		if (rc->old_into->length < old_bytes)
			return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
			                    "old_into: names %" PRIu64
			                    " bytes, fewer than the %" PRId64
			                    " old values take %" PRIu64 " (nothing was applied)",
			                    rc->old_into->length, plan.count, old_bytes);
		void *ptr = NULL;
		st = ta_shm_resolve(ta_shm_current(), rc->old_into->buffer_id, rc->old_into->offset,
		                    old_bytes, "old_into", &ptr, &plan.old_out_device, &rc->err);
		if (st != TA_OK)
			return st;
		plan.old_out = ptr;
	} else if (rc->old_into) {
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "old_into is given but the request returns no values");
	} else if (plan.want_old) {
		old_bytes = (uint64_t)plan.count * es;
		if (old_bytes + RESPONSE_OVERHEAD > svc->max_frame)
			return ta_error_set(
			    &rc->err, TA_RESOURCE_EXHAUSTED,
			    "the response would carry %" PRIu64
			    " bytes of values, over the frame limit of %" PRIu32
			    " bytes (max_frame); address fewer elements per request "
			    "(nothing was applied)",
			    old_bytes, svc->max_frame);
		rc->old_buf = ta_arena_alloc_inline(rc->arena, old_bytes ? (size_t)old_bytes : 1);
		if (!rc->old_buf)
			return ta_error_set(&rc->err, TA_RESOURCE_EXHAUSTED,
			                    "out of memory for %" PRIu64 " bytes of values",
			                    old_bytes);
		plan.old_out = rc->old_buf;
	}
	if (rc->group) {
		if (plan.count <= TA_DISPATCH_GROUP_PLAN_MAX && plan.space == TA_SPACE_GLOBAL) {
			rc->collected = true; /* group_flush applies and answers it */
			rc->plan = plan;
			rc->kind = kind;
			rc->held = tile;
			return TA_OK;
		}
		group_flush(rc->group); /* the requests before this one go first */
	}
	ta_result result = {0, 0};
	st = ta_backend_apply(svc->backend, tile->mem, (size_t)tile->bytes, &plan, &result,
	                      &rc->err);
	atomic_fetch_add_explicit(&ta_service_my_totals(svc)->elements, (uint64_t)plan.count,
	                          memory_order_relaxed);
	rc->elements = (uint64_t)plan.count;
	if (st != TA_OK)
		return st;
	if (rc->record && plan.count == 1 && plan.check_bounds && !plan.mask.data)
		(void)ta_repeat_record(rc->record, rc->payload, rc->payload_len, rc->record_atomic,
		                       &plan, rc->tiles, tile);
	plan_body(rc, &plan, &result, kind);
	return TA_OK;
}

/* Makes rc->op (and rc->data, its old values) from rc->fop. */
static void op_body_fill(resp_ctx *rc)
{
	const ta_fw_op *f = &rc->fop;
	Tileatom__Array *arr = &rc->data;
	tileatom__array__init(arr);
	if (f->has_old) {
		arr->dtype = (Tileatom__DType)f->dtype;
		arr->n_shape = f->rank;
		arr->shape = rc->data_shape;
		arr->data.data = (uint8_t *)f->data;
		arr->data.len = f->len;
	}
	tileatom__op_response__init(&rc->op);
	rc->op.old = f->has_old ? arr : NULL;
	rc->op.skipped = f->skipped;
	rc->op.applied = f->applied;
	rc->op_direct = false;
}

/* Fills the response body of an applied plan (kind: where its values go). An OpResponse is
 * kept in rc->fop (op_direct) for ta_fastwire_append_op; finish_reply makes the message
 * when another encoder needs it. */
static void plan_body(resp_ctx *rc, const ta_plan *plan, const ta_result *result, out_kind kind)
{
	uint64_t old_bytes =
	    plan->want_old ? (uint64_t)plan->count * ta_dtype_size(plan->dtype) : 0;
	bool old_shared = plan->want_old && rc->old_into; /* written into a shared buffer */
	if (kind == OUT_OP) {
		ta_fw_op *f = &rc->fop;
		f->id = rc->resp.id;
		f->has_old = plan->want_old;
		f->dtype = (int32_t)plan->dtype;
		f->rank = plan->want_old ? (size_t)plan->rank : 0;
		for (size_t a = 0; a < f->rank; a++)
			rc->data_shape[a] = plan->shape[a];
		f->shape = rc->data_shape;
		f->data = old_shared ? NULL : rc->old_buf;
		f->len = old_shared ? 0 : (size_t)old_bytes;
		f->skipped = result->skipped;
		f->applied = result->applied;
		rc->op_direct = true;
		rc->resp.body_case = TILEATOM__RESPONSE__BODY_OP;
		rc->resp.op = &rc->op;
		return;
	}
	Tileatom__Array *arr = &rc->data;
	tileatom__array__init(arr);
	if (plan->want_old) {
		arr->dtype = (Tileatom__DType)plan->dtype;
		arr->n_shape = (size_t)plan->rank;
		for (int a = 0; a < plan->rank; a++)
			rc->data_shape[a] = plan->shape[a];
		arr->shape = rc->data_shape;
		arr->data.data = old_shared ? NULL : rc->old_buf;
		arr->data.len = old_shared ? 0 : (size_t)old_bytes;
	}
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_DATA;
	rc->resp.data = arr;
}

/* Fills rc->tile from an info (create, describe). */
static void set_tile_body(resp_ctx *rc, const ta_tile_info *info)
{
	rc->tile_info = *info;
	tileatom__tile_info__init(&rc->tile);
	rc->tile.name = rc->tile_info.name;
	rc->tile.dtype = (Tileatom__DType)rc->tile_info.shape.dtype;
	rc->tile.n_shape = (size_t)rc->tile_info.shape.rank;
	rc->tile.shape = rc->tile_info.shape.shape;
	rc->tile.bytes = rc->tile_info.bytes;
	rc->tile.private_tile = rc->tile_info.private_tile;
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_TILE;
	rc->resp.tile = &rc->tile;
}

/* hello: checks the protocol version; answers with ours either way. */
static ta_status on_hello(resp_ctx *rc, ta_tile *tile, const Tileatom__HelloRequest *h)
{
	(void)tile;
	tileatom__hello_response__init(&rc->hello);
	rc->hello.protocol_version = TA_PROTOCOL_VERSION;
	rc->hello.server_version = (char *)PACKAGE_VERSION;
	rc->hello.backend = rc->svc->info.name;
	rc->hello.max_frame = rc->svc->max_frame;
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_HELLO;
	rc->resp.hello = &rc->hello;
	if (rc->session && rc->session->auth_needed && !rc->session->authenticated) {
		rc->hello.auth_required = true;
		rc->hello.auth_nonce.data = rc->session->nonce;
		rc->hello.auth_nonce.len = sizeof(rc->session->nonce);
	}
	if (ta_log_enabled(TA_LOG_DEBUG)) {
		char shown[TA_NAME_MAX + 4];
		ta_log(TA_LOG_DEBUG, "hello from '%s' (protocol %" PRIu32 ")",
		       ta_name_for_message(h->client_name, shown, sizeof(shown)),
		       h->protocol_version);
	}
	if (h->protocol_version != TA_PROTOCOL_VERSION)
		return ta_error_set(&rc->err, TA_UNIMPLEMENTED,
		                    "protocol version %" PRIu32
		                    " is not supported: this daemon speaks version %d",
		                    h->protocol_version, TA_PROTOCOL_VERSION);
	if (rc->session)
		rc->session->hello_done = true;
	return TA_OK;
}

/* auth: checks the client's proof over this connection's nonce and its own, answers with
 * the daemon's proof; a wrong proof closes the connection. */
static ta_status on_auth(resp_ctx *rc, ta_tile *tile, const Tileatom__AuthRequest *a)
{
	(void)tile;
	ta_session *s = rc->session;
	const ta_auth_secret *secret = rc->svc->auth;
	if (!s || !s->auth_needed || !secret)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "this connection needs no Auth (Hello said auth_required "
		                    "false)");
	if (a->client_nonce.len < TA_AUTH_CLIENT_NONCE_MIN ||
	    a->client_nonce.len > TA_AUTH_CLIENT_NONCE_MAX || a->proof.len != TA_AUTH_PROOF) {
		rc->close_after = true;
		ta_log_limited(&rc->svc->auth_log, TA_LOG_WARNING,
		               "connection %" PRIu64 ": authentication failed: malformed Auth",
		               s->serial);
		return ta_error_set(&rc->err, TA_PERMISSION_DENIED,
		                    "authentication failed: Auth needs a client_nonce of %d to %d "
		                    "bytes and a proof of %d bytes; closing the connection",
		                    TA_AUTH_CLIENT_NONCE_MIN, TA_AUTH_CLIENT_NONCE_MAX,
		                    TA_AUTH_PROOF);
	}
	uint8_t expect[TA_AUTH_PROOF];
	if (ta_auth_proof(secret, TA_AUTH_CLIENT, s->nonce, a->client_nonce.data,
	                  a->client_nonce.len, expect) != 0 ||
	    ta_auth_proof(secret, TA_AUTH_SERVER, s->nonce, a->client_nonce.data,
	                  a->client_nonce.len, rc->sproof) != 0)
		return ta_error_set(&rc->err, TA_INTERNAL, "cannot compute an HMAC");
	if (!ta_auth_equal(expect, a->proof.data, TA_AUTH_PROOF)) {
		rc->close_after = true;
		ta_log_limited(&rc->svc->auth_log, TA_LOG_WARNING,
		               "connection %" PRIu64 ": authentication failed: wrong proof",
		               s->serial);
		return ta_error_set(&rc->err, TA_PERMISSION_DENIED,
		                    "authentication failed: the proof does not match the daemon's "
		                    "secret; closing the connection");
	}
	s->authenticated = true;
	rc->who = ta_session_who(s);
	ta_log(TA_LOG_INFO, "connection %" PRIu64 ": authenticated", s->serial);
	tileatom__auth_response__init(&rc->auth);
	rc->auth.server_proof.data = rc->sproof;
	rc->auth.server_proof.len = sizeof(rc->sproof);
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_AUTH;
	rc->resp.auth = &rc->auth;
	return TA_OK;
}

/* True when n bytes at p are all zero. */
static bool all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* create: reserve, allocate, fill, publish. */
static ta_status on_create(resp_ctx *rc, ta_tile *unused, const Tileatom__CreateTileRequest *c)
{
	(void)unused;
	ta_service *svc = rc->svc;
	char shown[TA_NAME_MAX + 4];
	ta_tile_shape shape;
	memset(&shape, 0, sizeof(shape));
	if (c->n_shape == 0 || c->n_shape > TA_MAX_RANK)
		return ta_error_set(
		    &rc->err, TA_INVALID_ARGUMENT, "tile '%s': rank %zu is not between 1 and %d",
		    ta_name_for_message(c->name, shown, sizeof(shown)), c->n_shape, TA_MAX_RANK);
	shape.dtype = (ta_dtype)c->dtype;
	shape.rank = (int)c->n_shape;
	for (size_t a = 0; a < c->n_shape; a++)
		shape.shape[a] = c->shape[a];

	if (rc->inline_max >= 0) {
		/* allocating (zeroing) and filling a large tile is a large request: leave it to a
		 * worker */
		int64_t n = 1;
		for (size_t a = 0; a < c->n_shape; a++)
			if (c->shape[a] > 0 && __builtin_mul_overflow(n, c->shape[a], &n))
				n = INT64_MAX;
		if (n > rc->inline_max) {
			rc->deferred = true;
			return TA_OK;
		}
	}
	ta_owner owner = TA_OWNER_PUBLIC;
	if (c->private_tile) {
		owner = rc->who == TA_OWNER_ANY ? (ta_owner)getuid() : rc->who;
		if (owner == TA_OWNER_PUBLIC)
			return ta_error_set(
			    &rc->err, TA_PERMISSION_DENIED,
			    "tile '%s': a private tile needs an identity: connect over the Unix "
			    "socket, or authenticate over TCP (the daemon's --auth-file)",
			    ta_name_for_message(c->name, shown, sizeof(shown)));
	}
	ta_tile *tile = NULL;
	ta_status st =
	    ta_registry_create_as(svc->registry, c->name, &shape, owner, &tile, &rc->err);
	if (st != TA_OK)
		return st;
	if (c->fill) {
		ta_request req;
		ta_request_region(&req, TA_FAMILY_MEMORY, TA_OP_STORE);
		st = view_from_array(c->fill, "fill", &req.values, &rc->err);
		if (st == TA_OK && req.values.device)
			st =
			    ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
			                 "the fill scalar lies in a device buffer; send it inline");
		ta_plan plan;
		if (st == TA_OK)
			st = ta_plan_build(&plan, &tile->shape, &req, &rc->err);
		if (st == TA_OK && !all_zero(req.values.data, req.values.nbytes)) {
			ta_result result;
			st = ta_backend_apply(svc->backend, tile->mem, (size_t)tile->bytes, &plan,
			                      &result, &rc->err);
		}
		if (st != TA_OK) {
			ta_error inner = rc->err;
			ta_error_set(&rc->err, st, "tile '%s': fill: %s", tile->name, inner.msg);
			ta_registry_discard(tile);
			ta_tile_unref(tile);
			return st;
		}
	}
	ta_registry_publish(tile);
	ta_tile_info info;
	ta_tile_get_info(tile, &info);
	ta_tile_unref(tile);
	set_tile_body(rc, &info);
	ta_log(TA_LOG_INFO, "created tile '%s' (%s, %" PRIu64 " bytes)", info.name,
	       ta_dtype_name(info.shape.dtype), info.bytes);
	return TA_OK;
}

/* destroy: unname the tile; its memory goes with the last user. */
static ta_status on_destroy(resp_ctx *rc, ta_tile *tile, const Tileatom__DestroyTileRequest *d)
{
	(void)tile;
	ta_tile_info info;
	ta_status st = ta_registry_remove_as(rc->svc->registry, d->name, rc->who, &info, &rc->err);
	if (st == TA_OK)
		ta_log(TA_LOG_INFO, "destroyed tile '%s'", info.name);
	return st;
}

/* describe: what one tile is. */
static ta_status on_describe(resp_ctx *rc, ta_tile *unused, const Tileatom__DescribeTileRequest *d)
{
	(void)unused;
	ta_tile *tile = NULL;
	ta_status st = get_tile(rc, d->name, &tile);
	if (st != TA_OK)
		return st;
	ta_tile_info info;
	ta_tile_get_info(tile, &info);
	ta_tile_unref(tile);
	set_tile_body(rc, &info);
	return TA_OK;
}

/* list: every published tile, sorted by name. */
static ta_status on_list(resp_ctx *rc, ta_tile *tile, const Tileatom__ListTilesRequest *l)
{
	(void)tile;
	(void)l;
	size_t n = 0;
	ta_status st =
	    ta_registry_list_as(rc->svc->registry, rc->who, &rc->list_infos, &n, &rc->err);
	if (st != TA_OK)
		return st;
	tileatom__list_tiles_response__init(&rc->list);
	if (n) {
		rc->list_items = calloc(n, sizeof(*rc->list_items));
		rc->list_ptrs = calloc(n, sizeof(*rc->list_ptrs));
		if (!rc->list_items || !rc->list_ptrs)
			return ta_error_set(&rc->err, TA_RESOURCE_EXHAUSTED,
			                    "out of memory listing %zu tiles", n);
		for (size_t i = 0; i < n; i++) {
			Tileatom__TileInfo *ti = &rc->list_items[i];
			tileatom__tile_info__init(ti);
			ti->name = rc->list_infos[i].name;
			ti->dtype = (Tileatom__DType)rc->list_infos[i].shape.dtype;
			ti->n_shape = (size_t)rc->list_infos[i].shape.rank;
			ti->shape = rc->list_infos[i].shape.shape;
			ti->bytes = rc->list_infos[i].bytes;
			ti->private_tile = rc->list_infos[i].private_tile;
			rc->list_ptrs[i] = ti;
		}
	}
	rc->list.n_tiles = n;
	rc->list.tiles = rc->list_ptrs;
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_LIST;
	rc->resp.list = &rc->list;
	return TA_OK;
}

/* write: STORE over a region. */
static ta_status on_write(resp_ctx *rc, ta_tile *tile, const Tileatom__WriteRegionRequest *w)
{
	ta_request req;
	ta_request_region(&req, TA_FAMILY_MEMORY, TA_OP_STORE);
	ta_status st = region_into(w->region, "region", &tile->shape, &req, &rc->err);
	if (st == TA_OK && !w->values)
		st = ta_error_set(&rc->err, TA_INVALID_ARGUMENT, "write needs values");
	if (st == TA_OK)
		st = view_from_array(w->values, "values", &req.values, &rc->err);
	return st != TA_OK ? st : run_plan(rc, tile, &req, OUT_OP);
}

/* read: LOAD over a region; the values come back as the `data` body. */
static ta_status on_read(resp_ctx *rc, ta_tile *tile, const Tileatom__ReadRegionRequest *r)
{
	ta_request req;
	ta_request_region(&req, TA_FAMILY_MEMORY, TA_OP_LOAD);
	req.want_old = true;
	ta_status st = region_into(r->region, "region", &tile->shape, &req, &rc->err);
	return st != TA_OK ? st : run_plan(rc, tile, &req, OUT_DATA);
}

/* The atomic families (element-wise, scatter, indexed): op, region, the family's
 * addressing (scatter for SCATTER, indexed for INDEXED, neither for ELEMENTWISE), values,
 * compare (cas; scatter has none) and options. */
static ta_status do_rmw(resp_ctx *rc, ta_tile *tile, ta_family family, Tileatom__Op op,
                        const Tileatom__Region *region, const Tileatom__ScatterAddr *scatter,
                        const Tileatom__IndexedAddr *indexed, const Tileatom__Array *values,
                        const Tileatom__Array *compare, const Tileatom__Options *options)
{
	ta_request req;
	ta_request_init(&req);
	req.family = family;
	req.addr = TA_ADDR_REGION;
	ta_status st = rmw_op(op, &req.op, &rc->err);
	if (st == TA_OK)
		st = region_into(region, "region", &tile->shape, &req, &rc->err);
	if (st == TA_OK && family == TA_FAMILY_SCATTER)
		st = scatter_into(scatter, &req, &rc->err);
	if (st == TA_OK && family == TA_FAMILY_INDEXED)
		st = indexed_into(indexed, &req, &rc->err);
	if (st == TA_OK)
		st = view_from_array(values, "values", &req.values, &rc->err);
	if (st == TA_OK)
		st = view_from_array(compare, "compare", &req.compare, &rc->err);
	if (st == TA_OK)
		st = options_into(options, &req, &rc->err);
	rc->old_into = old_into(options);
	return st != TA_OK ? st : run_plan(rc, tile, &req, OUT_OP);
}

/* The memory ops (gather, scatter store, atomic load/store): LOAD or STORE with any
 * addressing; values for stores, padding for gathers. */
static ta_status do_memory(resp_ctx *rc, ta_tile *tile, ta_op op, const Tileatom__Region *window,
                           const Tileatom__Addressing *addr, const Tileatom__Array *values,
                           const Tileatom__Array *padding, const Tileatom__Options *options)
{
	ta_request req;
	ta_request_init(&req);
	req.family = TA_FAMILY_MEMORY;
	req.op = op;
	ta_status st = addressing_into(window, addr, &tile->shape, &req, &rc->err);
	if (st == TA_OK)
		st = options_into(options, &req, &rc->err);
	if (st == TA_OK && op == TA_OP_STORE && !values)
		st = ta_error_set(&rc->err, TA_INVALID_ARGUMENT, "a store needs values");
	if (st == TA_OK)
		st = view_from_array(values, "values", &req.values, &rc->err);
	if (st == TA_OK)
		st = view_from_array(padding, "padding", &req.padding, &rc->err);
	if (op == TA_OP_LOAD)
		req.want_old = true;
	rc->old_into = old_into(options);
	return st != TA_OK ? st : run_plan(rc, tile, &req, OUT_OP);
}

/* stats: backend facts and counters. */
static ta_status on_stats(resp_ctx *rc, ta_tile *tile, const Tileatom__StatsRequest *m)
{
	(void)tile;
	(void)m;
	ta_service *svc = rc->svc;
	tileatom__stats_response__init(&rc->stats);
	ta_backend_info_get(svc->backend, &rc->stats_info);
	rc->stats.backend = rc->stats_info.name;
	rc->stats.device = rc->stats_info.device;
	rc->stats.device_memory = rc->stats_info.device_memory;
	rc->stats.compute_capability = rc->stats_info.compute_capability;
	ta_registry_stats(svc->registry, &rc->stats.tiles, &rc->stats.tile_bytes);
	uint64_t requests, errors, elements;
	ta_service_read_totals(svc, &requests, &errors, &elements);
	rc->stats.requests = requests;
	rc->stats.errors = errors;
	rc->stats.connections = atomic_load(&svc->connections);
	rc->stats.elements = elements;
	if (!ta_metrics_fill_stats(&svc->metrics, rc->arena, &rc->stats))
		return ta_error_set(&rc->err, TA_RESOURCE_EXHAUSTED,
		                    "out of memory for the per-kind statistics");
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_STATS;
	rc->resp.stats = &rc->stats;
	return TA_OK;
}

/* register_buffer: maps the memfd that came with the request, or opens the CUDA IPC handle
 * it carries (a device buffer; not with --data-dir, whose log could not hold the operands)
 * (shmbuf.h). */
static ta_status on_register_buffer(resp_ctx *rc, ta_tile *tile,
                                    const Tileatom__RegisterBufferRequest *m)
{
	(void)tile;
	ta_shm_table *t = ta_shm_current();
	if (!t)
		return ta_error_set(
		    &rc->err, TA_INVALID_ARGUMENT,
		    "register_buffer: shared buffers need a Unix-socket connection");
	uint64_t id = 0;
	ta_status st;
	if (m->cuda_ipc_handle.len > 0) {
		if (rc->svc->persist)
			return ta_error_set(
			    &rc->err, TA_UNIMPLEMENTED,
			    "register_buffer: device buffers cannot be logged; this "
			    "daemon runs with --data-dir (send the operands inline or "
			    "in a shared buffer)");
		st = ta_shm_register_device(t, m->cuda_ipc_handle.data, m->cuda_ipc_handle.len,
		                            m->size, &id, &rc->err);
	} else {
		st = ta_shm_register(t, m->size, &id, &rc->err);
	}
	if (st != TA_OK)
		return st;
	tileatom__buffer_response__init(&rc->buffer);
	rc->buffer.buffer_id = id;
	rc->buffer.size = m->size;
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_BUFFER;
	rc->resp.buffer = &rc->buffer;
	return TA_OK;
}

/* ping: an empty answer. */
static ta_status on_ping(resp_ctx *rc, ta_tile *tile, const Tileatom__PingRequest *m)
{
	(void)tile;
	(void)m;
	tileatom__ping_response__init(&rc->ping);
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_PING;
	rc->resp.ping = &rc->ping;
	return TA_OK;
}

/* The atomic families: each request carries its op; the family comes from the table. */
static ta_status on_elementwise(resp_ctx *rc, ta_tile *tile,
                                const Tileatom__ElementwiseAtomicRequest *e)
{
	return do_rmw(rc, tile, ta_req_family(TA_REQ_ELEMENTWISE), e->op, e->region, NULL, NULL,
	              e->values, e->compare, e->options);
}
static ta_status on_scatter(resp_ctx *rc, ta_tile *tile, const Tileatom__ScatterAtomicRequest *sc)
{
	return do_rmw(rc, tile, ta_req_family(TA_REQ_SCATTER), sc->op, sc->region, sc->addr, NULL,
	              sc->values, NULL, sc->options);
}
static ta_status on_indexed(resp_ctx *rc, ta_tile *tile, const Tileatom__IndexedAtomicRequest *x)
{
	return do_rmw(rc, tile, ta_req_family(TA_REQ_INDEXED), x->op, x->region, NULL, x->addr,
	              x->values, x->compare, x->options);
}

/* The memory requests: the op (LOAD / STORE) comes from the table. */
static ta_status on_gather(resp_ctx *rc, ta_tile *tile, const Tileatom__GatherRequest *g)
{
	return do_memory(rc, tile, ta_req_op(TA_REQ_GATHER), g->window, g->addr, NULL, g->padding,
	                 g->options);
}
static ta_status on_scatter_store(resp_ctx *rc, ta_tile *tile,
                                  const Tileatom__ScatterStoreRequest *s)
{
	return do_memory(rc, tile, ta_req_op(TA_REQ_SCATTER_STORE), s->window, s->addr, s->values,
	                 NULL, s->options);
}
static ta_status on_atomic_load(resp_ctx *rc, ta_tile *tile, const Tileatom__AtomicLoadRequest *l)
{
	return do_memory(rc, tile, ta_req_op(TA_REQ_ATOMIC_LOAD), l->window, l->addr, NULL, NULL,
	                 l->options);
}
static ta_status on_atomic_store(resp_ctx *rc, ta_tile *tile, const Tileatom__AtomicStoreRequest *s)
{
	return do_memory(rc, tile, ta_req_op(TA_REQ_ATOMIC_STORE), s->window, s->addr, s->values,
	                 NULL, s->options);
}

/* snapshot: compacts the log into a snapshot of every tile (on a worker: it reads every
 * tile). */
static ta_status on_snapshot(resp_ctx *rc, ta_tile *tile, const Tileatom__SnapshotRequest *m)
{
	(void)tile;
	(void)m;
	if (!ta_persist_may_snapshot(rc->who))
		return ta_error_set(&rc->err, TA_PERMISSION_DENIED,
		                    "snapshot: only the daemon's user, root or an authenticated "
		                    "TCP client may ask for one");
	if (!rc->svc->persist)
		return ta_error_set(&rc->err, TA_UNAVAILABLE,
		                    "this daemon keeps no data (start it with --data-dir DIR)");
	if (rc->inline_max >= 0) {
		rc->deferred = true;
		return TA_OK;
	}
	ta_persist_snapinfo info;
	ta_status st = ta_persist_snapshot(rc->svc->persist, &info, &rc->err);
	if (st != TA_OK)
		return st;
	tileatom__snapshot_response__init(&rc->snap);
	rc->snap.tiles = info.tiles;
	rc->snap.bytes = info.bytes;
	rc->snap.seq = info.seq;
	rc->snap.log_removed = info.log_removed;
	rc->resp.body_case = TILEATOM__RESPONSE__BODY_SNAPSHOT;
	rc->resp.snapshot = &rc->snap;
	return TA_OK;
}

/* Name of the tile a request runs against (the tile column of TA_REQUEST), or NULL. */
static const char *request_tile(const Tileatom__Request *req)
{
#define TA_REQ_TILE_1(field) return req->field->tile;
#define TA_REQ_TILE_0(field) return NULL;
	switch (req->body_case) {
#define TA_REQUEST(id, field, number, tile, ...)                                                   \
	case TILEATOM__REQUEST__BODY_##id:                                                         \
		TA_REQ_TILE_##tile(field)
#include "ta_ops.def"
#undef TA_REQUEST
	default:
		return NULL;
	}
#undef TA_REQ_TILE_1
#undef TA_REQ_TILE_0
}

/* The op of an atomic request that carries one (NONE for the others). */
static ta_op request_rmw_op(const Tileatom__Request *req)
{
	Tileatom__Op op = TILEATOM__OP__OP_UNSPECIFIED;
	if (req->body_case == TILEATOM__REQUEST__BODY_ELEMENTWISE)
		op = req->elementwise->op;
	else if (req->body_case == TILEATOM__REQUEST__BODY_SCATTER)
		op = req->scatter->op;
	else if (req->body_case == TILEATOM__REQUEST__BODY_INDEXED)
		op = req->indexed->op;
	return ta_op_is_rmw((ta_op)op) ? (ta_op)op : TA_OP_NONE;
}

/* With --data-dir, a mutating request: takes its tile name's mutation lock (persist.h) and
 * then looks its tile up. The lock is shared with requests of the same op when the op's
 * result does not depend on the order (ta_op_order_independent for the tile's dtype), else
 * held alone. A request whose name is unknown here holds every stripe. */
static ta_status persist_begin(resp_ctx *rc, const Tileatom__Request *req, ta_req_kind kind,
                               ta_persist_hold *hold, ta_tile **tile)
{
	const char *name = NULL;
	bool has_tile = ta_req_has_tile(kind);
	if (has_tile)
		name = request_tile(req);
	else if (req->body_case == TILEATOM__REQUEST__BODY_CREATE)
		name = req->create->name;
	else if (req->body_case == TILEATOM__REQUEST__BODY_DESTROY)
		name = req->destroy->name;
	ta_op op = request_rmw_op(req);
	/* first guess an integer tile; a tile of another dtype takes the lock again alone. A
	 * run notes the op it found order independent, and the tile checked under the lock
	 * it keeps */
	ta_persist_run *run = rc->run;
	bool shared =
	    name && op != TA_OP_NONE &&
	    ((run && run->shared_op == (int)op) || ta_op_order_independent(op, TA_DTYPE_I64));
	if (shared && run)
		run->shared_op = (int)op;
	for (;;) {
		ta_status st = ta_persist_run_lock(rc->svc->persist, run, name,
		                                   shared ? (int)op : -1, hold, &rc->err);
		if (st != TA_OK || !has_tile)
			return st;
		st = get_tile(rc, name, tile);
		if (st != TA_OK) {
			ta_persist_unlock(rc->svc->persist, hold);
			return st;
		}
		if (!shared || (run && hold->kept && hold->kind >= 0 && run->checked == *tile) ||
		    ta_op_order_independent(op, (*tile)->shape.dtype)) {
			if (run && hold->kind >= 0)
				run->checked = *tile;
			return TA_OK;
		}
		ta_tile_unref(*tile);
		*tile = NULL;
		ta_persist_unlock(rc->svc->persist, hold);
		shared = false;
	}
}

/* With --data-dir: walks msg and every message inside it. With fix false, returns true as
 * soon as an Array in a shared buffer or an Options.old_into is found (a record that could
 * not be replayed: the buffers are gone after a restart). With fix true, turns every such
 * Array into inline bytes (the same range dispatch read) and drops every old_into, so that
 * the request can be logged as it was applied; returns false, with err set, when a range
 * does not resolve. */
static bool shared_refs(ProtobufCMessage *msg, bool fix, ta_error *err)
{
	const ProtobufCMessageDescriptor *d = msg->descriptor;
	if (d == &tileatom__array__descriptor) {
		Tileatom__Array *a = (Tileatom__Array *)msg;
		if (!a->shared)
			return fix; /* nothing found; nothing to fix */
		if (!fix)
			return true;
		void *ptr = NULL;
		bool device = false;
		if (ta_shm_resolve(ta_shm_current(), a->shared->buffer_id, a->shared->offset,
		                   a->shared->length, "a shared operand", &ptr, &device,
		                   err) != TA_OK ||
		    a->shared->length > SIZE_MAX)
			return false;
		if (device) { /* not reached: device buffers are refused with --data-dir */
			ta_error_set(err, TA_INTERNAL, "a device operand cannot be logged");
			return false;
		}
		a->data.data = ptr;
		a->data.len = (size_t)a->shared->length;
		a->shared = NULL;
		return true;
	}
	if (d == &tileatom__options__descriptor && ((Tileatom__Options *)msg)->old_into) {
		if (!fix)
			return true;
		((Tileatom__Options *)msg)->old_into = NULL;
	}
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		char *base = (char *)msg;
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)(base + f->quantifier_offset) != f->id)
			continue;
		size_t n = 1;
		ProtobufCMessage **subs = (ProtobufCMessage **)(base + f->offset);
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(const size_t *)(base + f->quantifier_offset);
			subs = *(ProtobufCMessage ***)(base + f->offset);
		}
		for (size_t k = 0; k < n; k++) {
			if (!subs[k])
				continue;
			bool r = shared_refs(subs[k], fix, err);
			if (!fix && r)
				return true;
			if (fix && !r)
				return false;
		}
	}
	return fix;
}

/* Appends the log record of a request that was applied (its lock held): its payload, or,
 * when it used shared buffers, the request re-encoded with their bytes inline. */
static ta_status persist_record(resp_ctx *rc, Tileatom__Request *req, ta_persist_hold *hold)
{
	const uint8_t *rec = rc->payload;
	size_t len = rc->payload_len;
	uint8_t *inlined = NULL;
	/* the descriptor walk of shared_refs costs more than the rest of the logging: skipped
	 * when the decoder already knows there is no reference */
	if (!rc->payload_plain && shared_refs(&req->base, false, &rc->err)) {
		if (!shared_refs(&req->base, true, &rc->err)) {
			ta_persist_fail(rc->svc->persist, "a shared operand could not be logged");
			return rc->err.code ? rc->err.code : TA_INTERNAL;
		}
		len = protobuf_c_message_get_packed_size(&req->base);
		inlined = malloc(len ? len : 1);
		if (!inlined) {
			ta_persist_fail(rc->svc->persist, "out of memory for a log record");
			return ta_error_set(
			    &rc->err, TA_INTERNAL,
			    "the request was applied but could not be logged (out of "
			    "memory); mutations are refused from now on");
		}
		protobuf_c_message_pack(&req->base, inlined);
		rec = inlined;
	}
	ta_status st =
	    ta_persist_record(rc->svc->persist, hold, rc->who, rec, len, &rc->log_seq, &rc->err);
	free(inlined);
	return st;
}

/* Checks that the session may send a request of kind now (Hello first, Auth where it is
 * needed). */
static ta_status session_allows(resp_ctx *rc, ta_req_kind kind)
{
	ta_session *s = rc->session;
	if (s && !s->hello_done && kind != TA_REQ_HELLO)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "%s request before Hello: the protocol requires Hello as the "
		                    "first request of a connection",
		                    ta_req_name(kind));
	if (s && s->auth_needed && !s->authenticated && kind != TA_REQ_HELLO &&
	    kind != TA_REQ_AUTH) {
		ta_log_limited(&rc->svc->auth_log, TA_LOG_WARNING,
		               "connection %" PRIu64 ": %s request refused: not authenticated",
		               s->serial, ta_req_name(kind));
		return ta_error_set(&rc->err, TA_PERMISSION_DENIED,
		                    "%s refused: this TCP connection must authenticate first (Auth "
		                    "with the daemon's secret: tileatom-cli --auth-file FILE, or "
		                    "TILEATOM_AUTH_FILE)",
		                    ta_req_name(kind));
	}
	return TA_OK;
}

/* Runs one decoded request: looks its tile up when the table says it names one, then calls
 * the on_<field> handler of its kind; fills rc->resp's body or rc->err. With --data-dir, a
 * mutating request runs under its mutation lock and its record is appended to the log
 * before the lock is released, when it succeeded. */
static ta_status handle(resp_ctx *rc, const Tileatom__Request *req)
{
	ta_req_kind kind = (ta_req_kind)req->body_case;
	if (req->body_case == TILEATOM__REQUEST__BODY__NOT_SET)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "request %" PRIu64 " has no body (unknown request type?)",
		                    req->id);
	if (!ta_req_valid(kind))
		return ta_error_set(&rc->err, TA_UNIMPLEMENTED, "unknown request type %d",
		                    (int)req->body_case);
	ta_status st = session_allows(rc, kind);
	if (st != TA_OK)
		return st;
	ta_tile *tile = NULL;
	ta_persist_hold hold = {-1, -1, false, false, NULL};
	bool logged = rc->svc->persist && ta_req_mutates(kind);
	if (rc->run && !logged) /* a snapshot takes every lock */
		ta_persist_run_release(rc->svc->persist, rc->run);
	if (logged) {
		/* logged requests are applied here, under their lock, not collected into a
		 * group: the requests collected before it run first */
		if (rc->group) {
			group_flush(rc->group);
			rc->group = NULL;
		}
		if ((st = persist_begin(rc, req, kind, &hold, &tile)) != TA_OK)
			return st;
	} else if (ta_req_has_tile(kind) &&
	           (st = get_tile(rc, request_tile(req), &tile)) != TA_OK) {
		return st;
	}
	switch (req->body_case) {
#define TA_REQUEST(id, field, ...)                                                                 \
	case TILEATOM__REQUEST__BODY_##id:                                                         \
		st = on_##field(rc, tile, req->field);                                             \
		break;
#include "ta_ops.def"
#undef TA_REQUEST
	default:
		st = ta_error_set(&rc->err, TA_INTERNAL, "request type %d has no handler",
		                  (int)req->body_case);
		break;
	}
	if (tile && !rc->collected)
		ta_tile_unref(tile);
	if (hold.held) {
		if (st == TA_OK && !rc->deferred)
			/* the decoded request lives in the arena: persist_record may rewrite it */
			st = persist_record(rc, (Tileatom__Request *)req, &hold);
		ta_persist_unlock(rc->svc->persist, &hold);
	}
	return st;
}

/* handle for a hot atomic request that ta_fastwire_decode_atomic decoded (never with
 * --data-dir): the checks of handle and do_rmw in their order (the session, the tile, the
 * op, the region; the decoder converted the rest, taking only what converts without an
 * error), then run_plan. */
static ta_status handle_atomic(resp_ctx *rc, ta_fw_atomic *a)
{
	ta_status st = session_allows(rc, a->kind);
	if (st != TA_OK)
		return st;
	ta_tile *tile = NULL;
	if ((st = get_tile(rc, a->tile, &tile)) != TA_OK)
		return st;
	st = rmw_op((Tileatom__Op)a->op, &a->req.op, &rc->err);
	if (st == TA_OK)
		st = region_entries_into(a->origin, a->n_origin, a->shape, a->n_shape, "region",
		                         &tile->shape, &a->req, &rc->err);
	if (st == TA_OK)
		st = run_plan(rc, tile, &a->req, OUT_OP);
	if (!rc->collected)
		ta_tile_unref(tile);
	return st;
}

/* Frees what a resp_ctx allocated (only a list does). */
static void resp_ctx_free(resp_ctx *rc)
{
	if (!rc->list_items && !rc->list_ptrs && !rc->list_infos)
		return;
	free(rc->list_items);
	free(rc->list_ptrs);
	free(rc->list_infos);
}

/* Appends rc->resp to out; falls back to a short RESOURCE_EXHAUSTED error response when
 * the response does not fit in a frame or memory is short, and to nothing (close) when
 * even that fails. Returns close_after, or true when nothing could be appended. */
static bool append_reply(ta_service *svc, Tileatom__Response *resp, bool close_after,
                         ta_frame_buf *out)
{
	int rc = svc->fast_wire ? ta_fastwire_append_response(resp, svc->max_frame, out) : 1;
	if (rc == 1)
		rc = ta_frame_append(&resp->base, svc->max_frame, out);
	if (rc == 0)
		return close_after;
	size_t size = protobuf_c_message_get_packed_size(&resp->base);
	char msg[256];
	if (rc == -1)
		snprintf(msg, sizeof(msg),
		         "the response needs %zu bytes, over the frame limit of %" PRIu32
		         " bytes (max_frame)",
		         size, svc->max_frame);
	else
		snprintf(msg, sizeof(msg), "out of memory encoding a response of %zu bytes", size);
	Tileatom__Response small = TILEATOM__RESPONSE__INIT;
	small.id = resp->id;
	small.status = TILEATOM__STATUS__RESOURCE_EXHAUSTED;
	small.message = msg;
	if (resp->status == TILEATOM__STATUS__OK)
		atomic_fetch_add_explicit(
		    &ta_service_my_totals(svc)->errors, 1,
		    memory_order_relaxed); /* an answer that became an error */
	if (ta_frame_append(&small.base, svc->max_frame, out) != 0) {
		ta_log(TA_LOG_ERR, "cannot encode a response: out of memory");
		return true;
	}
	return close_after;
}

/* Hands the bytes of buf over to a ta_reply. */
static void reply_from_buf(ta_frame_buf *buf, bool close_after, ta_reply *out)
{
	out->frame = buf->data;
	out->len = buf->len;
	out->close_after = close_after;
	if (!out->frame)
		out->len = 0;
}

bool ta_dispatch_error_append(ta_service *svc, uint64_t id, ta_status code, const char *msg,
                              bool close_after, ta_frame_buf *out)
{
	Tileatom__Response resp = TILEATOM__RESPONSE__INIT;
	resp.id = id;
	resp.status = (Tileatom__Status)code;
	resp.message = (char *)msg;
	atomic_fetch_add_explicit(&ta_service_my_totals(svc)->errors, 1, memory_order_relaxed);
	return append_reply(svc, &resp, close_after, out);
}

void ta_dispatch_scratch_init(ta_dispatch_scratch *s)
{
	ta_arena_init(&s->arena, TA_DISPATCH_ARENA_KEEP);
	s->log_seq = 0;
	ta_persist_run_init(&s->run);
	s->in_run = false;
	memset(&s->tiles, 0, sizeof(s->tiles));
	s->hold_metrics = false;
	s->held = (ta_metrics_held){TA_REQ_NONE, 0, 0, 0, 0};
}

void ta_dispatch_scratch_free(ta_dispatch_scratch *s)
{
	ta_arena_free(&s->arena);
	ta_persist_run_free(&s->run);
}

/* Publishes the metrics and request totals scratch holds (nothing when none). */
static void held_flush(ta_service *svc, ta_dispatch_scratch *scratch)
{
	if (scratch->held.requests == 0)
		return;
	ta_service_totals *totals = ta_service_my_totals(svc);
	atomic_fetch_add_explicit(&totals->requests, scratch->held.requests, memory_order_relaxed);
	atomic_fetch_add_explicit(&totals->elements, scratch->held.elements, memory_order_relaxed);
	ta_metrics_add_held(&svc->metrics, &scratch->held);
}

/* Counts one OK answer of kind (its elements and bytes) into scratch's held counts, after
 * publishing those of another kind. */
static void held_add(ta_service *svc, ta_dispatch_scratch *scratch, ta_req_kind kind,
                     uint64_t elements, uint64_t bytes_in, uint64_t bytes_out)
{
	ta_metrics_held *h = &scratch->held;
	if (h->requests && h->kind != kind)
		held_flush(svc, scratch);
	h->kind = kind;
	h->requests++;
	h->elements += elements;
	h->bytes_in += bytes_in;
	h->bytes_out += bytes_out;
}

void ta_dispatch_begin_run(ta_service *svc, ta_dispatch_scratch *scratch)
{
	scratch->hold_metrics = !svc->time_requests;
	if (svc->persist)
		scratch->in_run = true;
}

uint64_t ta_dispatch_end_run(ta_service *svc, ta_dispatch_scratch *scratch)
{
	held_flush(svc, scratch);
	scratch->hold_metrics = false;
	if (!scratch->in_run)
		return 0;
	scratch->in_run = false;
	return ta_persist_run_end(svc->persist, &scratch->run);
}

/* Bytes of the message naming a bad string field (wirecheck.c). */
#define BAD_STRING_MSG 200

/* A request payload after decoding. */
typedef struct decoded {
	Tileatom__Request *req;   /* the request (arena memory), NULL: it does not decode or
	                             went into atomic */
	ta_fw_atomic *atomic;     /* non-NULL: a hot atomic request decoded straight into the
	                             form it runs in (ta_fastwire_decode_atomic; req is NULL) */
	bool strings_ok;          /* every string field is UTF-8 without NUL */
	bool no_buffer_refs;      /* decoded by fastwire.c, which takes no shared-buffer
	                             reference (Array.shared, Options.old_into) */
	char bad[BAD_STRING_MSG]; /* !strings_ok: the field and the problem */
	struct timespec t0;       /* when it was read, if timed (metrics) */
} decoded;

/* Decodes len bytes at payload into d: with atomic (storage for it, or NULL) and without
 * --data-dir a hot atomic request straight into *atomic, else a hot shape in one pass
 * (fastwire.c, its strings checked on the way), anything else with wirecheck.c's string
 * check and protobuf-c. */
static void decode_request(ta_service *svc, ta_dispatch_scratch *scratch, const uint8_t *payload,
                           size_t len, decoded *d, ta_fw_atomic *atomic)
{
	d->atomic = NULL;
	if (atomic && svc->fast_wire && !svc->persist &&
	    ta_fastwire_decode_atomic(&scratch->arena, payload, len, atomic)) {
		d->req = NULL;
		d->atomic = atomic;
		d->strings_ok = true;
		d->no_buffer_refs = true;
		return;
	}
	if (svc->fast_wire) {
		d->req = ta_fastwire_decode_request(&scratch->arena, payload, len);
		if (d->req) {
			d->strings_ok = true;
			d->no_buffer_refs = true;
			return;
		}
	}
	d->no_buffer_refs = false;
	d->strings_ok = ta_wire_check_strings(&tileatom__request__descriptor, payload, len, d->bad,
	                                      sizeof(d->bad));
	d->req = tileatom__request__unpack(&scratch->arena.pb, len, payload);
}

static ta_dispatch_outcome run_one(ta_service *svc, ta_dispatch_scratch *scratch,
                                   ta_session *session, const uint8_t *payload, size_t len,
                                   uint8_t *owned, int64_t inline_max, ta_frame_buf *out,
                                   bool *close_after);
static ta_dispatch_outcome run_decoded(ta_service *svc, ta_dispatch_scratch *scratch,
                                       ta_session *session, const uint8_t *payload, size_t len,
                                       uint8_t *owned, int64_t inline_max, ta_frame_buf *out,
                                       bool *close_after, decoded *d);

/* Starts the metrics of a decoded request of payload_len bytes: its size, and the clock
 * when requests are timed. */
static void metrics_start(resp_ctx *rc, size_t payload_len)
{
	rc->bytes_in = payload_len;
	if (rc->svc->time_requests)
		clock_gettime(CLOCK_MONOTONIC, &rc->t0);
}

/* Turns handle's outcome st into the response of rc (the error fields when st is not OK),
 * appends it to out, counts it (metrics) and frees rc's allocations; returns close_after. */
static bool finish_reply(ta_service *svc, resp_ctx *rc, ta_status st, ta_frame_buf *out)
{
	size_t out_before = out->len;
	if (st != TA_OK) {
		if (rc->err.code == TA_OK) /* a path that forgot its message */
			ta_error_set(&rc->err, st, "%s failed", ta_status_name(st));
		rc->resp.status = (Tileatom__Status)st;
		rc->resp.message = rc->err.msg;
		if (rc->resp.body_case != TILEATOM__RESPONSE__BODY_HELLO)
			rc->resp.body_case = TILEATOM__RESPONSE__BODY__NOT_SET;
		atomic_fetch_add_explicit(&ta_service_my_totals(svc)->errors, 1,
		                          memory_order_relaxed);
		ta_log(TA_LOG_DEBUG, "request %" PRIu64 " (%s): %s: %s", rc->resp.id,
		       ta_req_name(rc->req_kind), ta_status_name(st), rc->err.msg);
	}
	bool close_after = rc->close_after;
	/* an OK OpResponse goes straight from rc->fop; anything else (or an answer that does not
	 * fit) as a message */
	if (st != TA_OK || !rc->op_direct || !svc->fast_wire ||
	    ta_fastwire_append_op(&rc->fop, svc->max_frame, out) != 0) {
		if (rc->op_direct)
			op_body_fill(rc);
		close_after = append_reply(svc, &rc->resp, rc->close_after, out);
	}
	if (rc->hold_in && st == TA_OK)
		held_add(svc, rc->hold_in, rc->req_kind, rc->elements, rc->bytes_in,
		         out->len - out_before);
	else
		ta_metrics_record(&svc->metrics, rc->req_kind, st != TA_OK, rc->elements,
		                  rc->bytes_in, out->len - out_before,
		                  ta_metrics_since(svc->time_requests, &rc->t0));
	resp_ctx_free(rc);
	return close_after;
}

/* Applies the collected plans of g together and appends their responses in order. */
static void group_flush(dispatch_group *g)
{
	if (g->n == 0)
		return;
	ta_service *svc = g->svc;
	for (int i = 0; i < g->n; i++) {
		resp_ctx *rc = &g->rcs[i];
		g->calls[i] = (ta_apply_call){rc->held->mem, (size_t)rc->held->bytes,
		                              &rc->plan,     &g->results[i],
		                              &rc->err,      TA_OK};
	}
	ta_backend_apply_many(svc->backend, g->calls, (size_t)g->n);
	for (int i = 0; i < g->n; i++) {
		resp_ctx *rc = &g->rcs[i];
		ta_status st = g->calls[i].status;
		atomic_fetch_add_explicit(&ta_service_my_totals(svc)->elements,
		                          (uint64_t)rc->plan.count, memory_order_relaxed);
		rc->elements = (uint64_t)rc->plan.count;
		if (st == TA_OK)
			plan_body(rc, &rc->plan, &g->results[i], rc->kind);
		ta_tile_unref(rc->held);
		if (finish_reply(svc, rc, st, g->out))
			g->close_after = true;
	}
	g->n = 0;
}

/* ta_dispatch_run for a request of a run with a group: a small plan joins the group
 * (answered by group_flush), anything else runs after the group is flushed. */
static void run_grouped(dispatch_group *g, ta_dispatch_scratch *scratch, const uint8_t *payload,
                        size_t len)
{
	ta_service *svc = g->svc;
	decoded d;
	d.t0 = (struct timespec){0, 0};
	if (svc->time_requests)
		clock_gettime(CLOCK_MONOTONIC, &d.t0);
	atomic_fetch_add_explicit(&ta_service_my_totals(svc)->requests, 1, memory_order_relaxed);
	decode_request(svc, scratch, payload, len, &d, NULL);
	Tileatom__Request *req = d.req;
	if (!req || !d.strings_ok || !ta_req_has_tile((ta_req_kind)req->body_case)) {
		/* not a plan (or a bad string, or no Request at all): what came before runs
		 * first, then this one, decoded once */
		group_flush(g);
		bool close_after = false;
		(void)run_decoded(svc, scratch, g->session, payload, len, NULL, -1, g->out,
		                  &close_after, &d);
		if (close_after)
			g->close_after = true;
		return;
	}
	resp_ctx *rc = &g->rcs[g->n];
	resp_ctx_start(rc);
	rc->svc = svc;
	rc->arena = &scratch->arena;
	rc->tiles = &scratch->tiles;
	rc->inline_max = -1;
	rc->group = g;
	rc->session = g->session;
	rc->who = ta_session_who(g->session);
	rc->req_kind = (ta_req_kind)req->body_case;
	rc->payload = payload;
	rc->payload_len = len;
	rc->payload_plain = d.no_buffer_refs;
	rc->run = scratch->in_run ? &scratch->run : NULL;
	metrics_start(rc, len);
	tileatom__response__init(&rc->resp);
	rc->resp.id = req->id;
	ta_status st = handle(rc, req);
	scratch->log_seq = rc->log_seq;
	if (rc->collected) {
		if (++g->n == TA_DISPATCH_GROUP)
			group_flush(g);
	} else {
		group_flush(g); /* its answer comes after those before it */
		if (finish_reply(svc, rc, st, g->out))
			g->close_after = true;
	}
	if (g->n == 0)
		ta_arena_reset(&scratch->arena);
}

size_t ta_dispatch_run_batch(ta_service *svc, ta_dispatch_scratch *scratch, ta_session *session,
                             const uint8_t *frames, size_t len, uint64_t out_bound,
                             ta_frame_buf *out, bool *close_after, uint32_t *nframes)
{
	size_t done = 0;
	uint64_t log_seq = 0;
	*close_after = false;
	*nframes = 0;
	bool own_run = !scratch->in_run;
	if (own_run)
		ta_dispatch_begin_run(svc, scratch);
	dispatch_group *g = malloc(sizeof(*g)); /* NULL: one by one, as well */
	if (g) {
		g->svc = svc;
		g->out = out;
		g->session = session;
		g->close_after = false;
		g->n = 0;
	}
	while (len - done >= TA_FRAME_HEADER && !*close_after && out->len < out_bound) {
		uint32_t n = ta_frame_get_header(frames + done);
		if (n > len - done - TA_FRAME_HEADER)
			break; /* a partial frame: the caller cut whole ones */
		const uint8_t *payload = frames + done + TA_FRAME_HEADER;
		if (g) {
			run_grouped(g, scratch, payload, n);
			*close_after = g->close_after;
		} else {
			(void)run_one(svc, scratch, session, payload, n, NULL, -1, out,
			              close_after);
		}
		if (scratch->log_seq > log_seq)
			log_seq = scratch->log_seq;
		done += TA_FRAME_HEADER + (size_t)n;
		(*nframes)++;
	}
	if (g) {
		group_flush(g);
		*close_after = g->close_after;
		ta_arena_reset(&scratch->arena);
		free(g);
	}
	if (own_run) { /* before any of the responses can leave */
		uint64_t run_seq = ta_dispatch_end_run(svc, scratch);
		if (run_seq > log_seq)
			log_seq = run_seq;
	}
	scratch->log_seq = log_seq;
	return done;
}

/* ta_dispatch_run, freeing owned (a malloc'd payload, or NULL) right after decoding: the
 * decoded message holds its own copy of every field, so a large request does not keep both
 * for the whole run. */
static ta_dispatch_outcome run_one(ta_service *svc, ta_dispatch_scratch *scratch,
                                   ta_session *session, const uint8_t *payload, size_t len,
                                   uint8_t *owned, int64_t inline_max, ta_frame_buf *out,
                                   bool *close_after)
{
	held_flush(svc, scratch); /* what ran before counts before this one (stats) */
	decoded d;
	d.t0 = (struct timespec){0, 0};
	if (svc->time_requests)
		clock_gettime(CLOCK_MONOTONIC, &d.t0);
	atomic_fetch_add_explicit(&ta_service_my_totals(svc)->requests, 1,
	                          memory_order_relaxed); /* stats counts the request asking */
	ta_fw_atomic atomic;
	decode_request(svc, scratch, payload, len, &d, &atomic);
	return run_decoded(svc, scratch, session, payload, len, owned, inline_max, out, close_after,
	                   &d);
}

/* run_one after decoding (d: the request, counted already), also for a request of a
 * grouped run that is not a plan. */
static ta_dispatch_outcome run_decoded(ta_service *svc, ta_dispatch_scratch *scratch,
                                       ta_session *session, const uint8_t *payload, size_t len,
                                       uint8_t *owned, int64_t inline_max, ta_frame_buf *out,
                                       bool *close_after, decoded *d)
{
	*close_after = false;
	scratch->log_seq = 0;
	struct timespec t0 = d->t0;
	Tileatom__Request *req = d->req;
	ta_fw_atomic *atomic = d->atomic; /* decoded copies every field: owned may go */
	bool strings_ok = d->strings_ok;
	const char *bad = d->bad;
	if (owned && (!svc->persist || !req)) { /* with --data-dir the payload is the log
		                                     record */
		free(owned);
		owned = NULL;
	}
	if (req && !strings_ok) {
		/* it decodes, but a string is not UTF-8 or holds a NUL: answered with its id,
		 * nothing runs (one that does not decode at all is malformed, below) */
		uint64_t id = req->id;
		free(owned);
		ta_arena_reset(&scratch->arena);
		char msg[260];
		snprintf(msg, sizeof(msg), "invalid string: %s (strings must be UTF-8 without NUL)",
		         bad);
		*close_after =
		    ta_dispatch_error_append(svc, id, TA_INVALID_ARGUMENT, msg, false, out);
		return TA_DISPATCH_DONE;
	}
	if (!req && !atomic) {
		ta_arena_reset(&scratch->arena);
		char msg[160];
		snprintf(msg, sizeof(msg),
		         "malformed request: %zu bytes that do not decode as a Request; closing "
		         "the connection",
		         len);
		ta_log(TA_LOG_INFO, "%s", msg);
		size_t out_before = out->len;
		*close_after =
		    ta_dispatch_error_append(svc, 0, TA_INVALID_ARGUMENT, msg, true, out);
		ta_metrics_record(&svc->metrics, TA_REQ_NONE, true, 0, len, out->len - out_before,
		                  ta_metrics_since(svc->time_requests, &t0));
		return TA_DISPATCH_DONE;
	}
	resp_ctx rc;
	resp_ctx_start(&rc);
	rc.svc = svc;
	rc.arena = &scratch->arena;
	rc.tiles = &scratch->tiles;
	rc.inline_max = inline_max;
	rc.payload = payload;
	rc.payload_len = len;
	rc.payload_plain = d->no_buffer_refs;
	rc.run = scratch->in_run ? &scratch->run : NULL;
	rc.session = session;
	rc.who = ta_session_who(session);
	tileatom__response__init(&rc.resp);
	rc.resp.id = atomic ? atomic->id : req->id;
	rc.req_kind = atomic ? atomic->kind : (ta_req_kind)req->body_case;
	rc.bytes_in = len;
	rc.t0 = t0;
	if (atomic && session && inline_max >= 0) { /* the loop's own requests (one at a time) */
		rc.record = &session->repeat;
		rc.record_atomic = atomic;
	}
	ta_status st = atomic ? handle_atomic(&rc, atomic) : handle(&rc, req);
	if (owned)
		free(owned);
	scratch->log_seq = rc.log_seq;
	if (rc.deferred) {
		atomic_fetch_sub_explicit(&ta_service_my_totals(svc)->requests, 1,
		                          memory_order_relaxed); /* the worker counts it */
		resp_ctx_free(&rc);
		ta_arena_reset(&scratch->arena);
		return TA_DISPATCH_DEFER;
	}
	*close_after = finish_reply(svc, &rc, st, out);
	ta_arena_reset(&scratch->arena);
	return TA_DISPATCH_DONE;
}

ta_dispatch_outcome ta_dispatch_run(ta_service *svc, ta_dispatch_scratch *scratch,
                                    const uint8_t *payload, size_t len, int64_t inline_max,
                                    ta_frame_buf *out, bool *close_after)
{
	return run_one(svc, scratch, NULL, payload, len, NULL, inline_max, out, close_after);
}

/* Runs payload as the session's kept request again (repeat.h) when it is that request
 * and may run here: the checks and the answer of run_one for it, without decoding or
 * planning. Returns false, with nothing done, when it is not (or the tile is no longer the
 * one the request ran on: the kept request is forgotten, and the ordinary way answers). */
static bool repeat_run(ta_service *svc, ta_dispatch_scratch *scratch, ta_session *session,
                       const uint8_t *payload, size_t len, int64_t inline_max, ta_frame_buf *out,
                       bool *close_after)
{
	ta_repeat *r = &session->repeat;
	uint64_t id = 0;
	if (svc->persist || r->plan.count > inline_max || !ta_repeat_match(r, payload, len, &id))
		return false;
	resp_ctx rc;
	resp_ctx_start(&rc);
	rc.svc = svc;
	ta_tile *tile = NULL;
	if (ta_registry_get_cached(svc->registry, &r->tiles, r->name, ta_session_who(session),
	                           &tile, &rc.err) != TA_OK ||
	    tile != r->tile || r->tiles.stamp != r->stamp) {
		if (tile)
			ta_tile_unref(tile);
		ta_repeat_clear(r);
		return false;
	}
	r->hits++;
	rc.req_kind = r->kind;
	metrics_start(&rc, len);
	tileatom__response__init(&rc.resp);
	rc.resp.id = id;
	scratch->log_seq = 0;
	ta_result result = {0, 0};
	ta_status st = ta_backend_apply(svc->backend, tile->mem, (size_t)tile->bytes, &r->plan,
	                                &result, &rc.err);
	ta_tile_unref(tile);
	rc.elements = 1;
	if (st == TA_OK) {
		rc.old_buf = r->plan.old_out;
		plan_body(&rc, &r->plan, &result, OUT_OP);
		if (scratch->hold_metrics) /* counted at the run's end, totals included */
			rc.hold_in = scratch;
	}
	if (!rc.hold_in) {
		ta_service_totals *totals = ta_service_my_totals(svc);
		atomic_fetch_add_explicit(&totals->requests, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&totals->elements, 1, memory_order_relaxed);
	}
	*close_after = finish_reply(svc, &rc, st, out);
	return true;
}

ta_dispatch_outcome ta_dispatch_run_session(ta_service *svc, ta_dispatch_scratch *scratch,
                                            ta_session *session, const uint8_t *payload, size_t len,
                                            int64_t inline_max, ta_frame_buf *out,
                                            bool *close_after)
{
	if (session && session->repeat.valid &&
	    repeat_run(svc, scratch, session, payload, len, inline_max, out, close_after))
		return TA_DISPATCH_DONE;
	return run_one(svc, scratch, session, payload, len, NULL, inline_max, out, close_after);
}

/* Runs one payload to completion with a scratch of its own; frees owned once decoded. */
static void dispatch_alone(ta_service *svc, ta_session *session, const uint8_t *payload, size_t len,
                           uint8_t *owned, ta_reply *out)
{
	ta_dispatch_scratch scratch;
	ta_dispatch_scratch_init(&scratch);
	ta_frame_buf buf = {NULL, 0, 0};
	bool close_after = false;
	(void)run_one(svc, &scratch, session, payload, len, owned, -1, &buf, &close_after);
	uint64_t log_seq = scratch.log_seq;
	ta_dispatch_scratch_free(&scratch);
	reply_from_buf(&buf, close_after, out);
	out->log_seq = log_seq;
}

void ta_dispatch_frame(ta_service *svc, const uint8_t *payload, size_t len, ta_reply *out)
{
	dispatch_alone(svc, NULL, payload, len, NULL, out);
}

void ta_dispatch_frame_owned(ta_service *svc, uint8_t *payload, size_t len, ta_reply *out)
{
	dispatch_alone(svc, NULL, payload, len, payload, out);
}

void ta_dispatch_frame_owned_session(ta_service *svc, ta_session *session, uint8_t *payload,
                                     size_t len, ta_reply *out)
{
	dispatch_alone(svc, session, payload, len, payload, out);
}
