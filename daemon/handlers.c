/* handlers.c: the request handlers, one per row of the table (tacore/ta_ops.def): the
 * conversion of a request's wire fields into a ta_request (every check in one order),
 * the plan built, validated and run, and the response body it fills (see reqctx.h). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "reqctx.h"
#include "shmbuf.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "ta_auth.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/* Converts an optional wire Array into a borrowed view (present = false when absent). v
 * must be all zero (a view of a ta_request_init'ed request): only what a present Array
 * gives is written. */
ta_status view_from_array(const Tileatom__Array *a, const char *what, ta_array_view *v,
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
	req->scatter_dim = sa->dim > (uint32_t)INT_MAX ? INT_MAX : (int)sa->dim;
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
void op_body_fill(resp_ctx *rc)
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
void plan_body(resp_ctx *rc, const ta_plan *plan, const ta_result *result, out_kind kind)
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
const char *request_tile(const Tileatom__Request *req)
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
ta_status handle(resp_ctx *rc, const Tileatom__Request *req)
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
ta_status handle_atomic(resp_ctx *rc, ta_fw_atomic *a)
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
void resp_ctx_free(resp_ctx *rc)
{
	if (!rc->list_items && !rc->list_ptrs && !rc->list_infos)
		return;
	free(rc->list_items);
	free(rc->list_ptrs);
	free(rc->list_infos);
}
