/* handlers.c: the request handlers, one per row of the table (tacore/ta_ops.def), and the
 * one order of checks every request passes (handle): its kind, the session's handshake, the
 * mutation lock (--data-dir) and the tile, the handler, the log record. A data-plane
 * handler turns the request as sent (codec.h) into a ta_request, every check in one order,
 * then builds, validates and runs its plan and fills the response (see reqctx.h); a
 * control-plane handler works on protobuf-c's structures. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "reqctx.h"
#include "shmbuf.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "ta_auth.h"

/* The connection's shared buffers (NULL: none, e.g. TCP or an in-process caller). */
static inline ta_shm_table *rc_shm(const resp_ctx *rc)
{
	return rc->session ? rc->session->shm : NULL;
}

/* Hands the request, of which nothing was applied, to a worker (rc->deferred: the caller
 * hands it on; the worker runs it from the start). */
static ta_status defer(resp_ctx *rc)
{
	rc->deferred = true;
	return TA_OK;
}

/* Converts an optional Array as sent into a view (present = false when absent). v must be
 * all zero (a view of a ta_request_init'ed request): only what a present Array gives is
 * written. Data whose bytes are 8-byte aligned in the payload is used where it lies, other
 * data is copied into the arena (the backends read whole elements). */
static ta_status view_from_wire(resp_ctx *rc, const ta_wire_array *a, const char *what,
                                ta_array_view *v)
{
	if (!a->present)
		return TA_OK;
	if (a->n_shape > TA_MAX_RANK)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "%s: rank %zu is over the limit of %d", what, a->n_shape,
		                    TA_MAX_RANK);
	v->present = true;
	v->dtype = (ta_dtype)a->dtype;
	v->rank = (int)a->n_shape;
	for (size_t i = 0; i < a->n_shape; i++)
		v->shape[i] = a->shape[i];
	v->data = a->data;
	v->nbytes = a->len;
	if (a->len && ((uintptr_t)a->data & 7u) != 0) {
		void *copy = ta_arena_alloc_inline(rc->arena, a->len);
		if (!copy)
			return ta_error_set(&rc->err, TA_RESOURCE_EXHAUSTED,
			                    "%s: out of memory for %zu bytes", what, a->len);
		memcpy(copy, a->data, a->len);
		v->data = copy;
	}
	if (a->shared.present) {
		/* the elements lie in a shared buffer of this connection (shmbuf.h; one that
		 * resolves holds length bytes, so length fits a size_t) */
		if (a->len != 0)
			return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
			                    "%s: gives both inline data and a shared buffer", what);
		void *ptr = NULL;
		ta_status st = ta_shm_resolve(rc_shm(rc), a->shared.buffer_id, a->shared.offset,
		                              a->shared.length, what, &ptr, &v->device, &rc->err);
		v->data = ptr;
		v->nbytes = (size_t)a->shared.length;
		return st;
	}
	return TA_OK;
}

/* Copies a Region as sent into req, a ta_request_init'ed one (empty: the whole tile).
 * Origin without shape reaches to the end of the tile; shape without origin starts at 0. */
static ta_status region_into(resp_ctx *rc, const ta_wire_region *r, const char *what,
                             const ta_tile_shape *tile, ta_request *req)
{
	if (r->n_origin == 0 && r->n_shape == 0)
		return TA_OK;
	size_t n = r->n_origin ? r->n_origin : r->n_shape;
	if (r->n_origin && r->n_shape && r->n_origin != r->n_shape)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "%s: origin has %zu entries but shape has %zu", what,
		                    r->n_origin, r->n_shape);
	if (n > TA_MAX_RANK)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "%s: rank %zu is over the limit of %d", what, n, TA_MAX_RANK);
	req->has_region = true;
	req->region_rank = (int)n;
	for (size_t a = 0; a < n; a++) {
		int64_t o = r->n_origin ? r->origin[a] : 0;
		bool inside = (int)a < tile->rank && o >= 0 && o < tile->shape[a];
		req->region_origin[a] = o;
		/* a bad origin without shape: 0 (ta_plan_build names the origin) */
		req->region_shape[a] = r->n_shape ? r->shape[a] : inside ? tile->shape[a] - o : 0;
	}
	return TA_OK;
}

/* Scatter (form SCATTER: one index array, along dim) or indexed (form INDEXED: one index
 * array per tile axis, or one with flat) addressing into req. */
static ta_status indices_into(resp_ctx *rc, const ta_wire_request *w, ta_wire_form form,
                              ta_request *req)
{
	bool scatter = form == TA_FORM_SCATTER;
	if (w->form != form || w->n_indices == 0)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT, "%s",
		                    scatter ? "scatter addressing needs dim and indices"
		                            : "indexed addressing needs index arrays (one per tile "
		                              "axis, or one with flat)");
	if (w->n_indices > TA_MAX_RANK) /* indexed only: the decoder gives scatter one */
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "indexed addressing: %zu index arrays, over the limit of %d",
		                    w->n_indices, TA_MAX_RANK);
	req->addr = scatter ? TA_ADDR_SCATTER : w->flat ? TA_ADDR_FLAT : TA_ADDR_INDEXED;
	req->scatter_dim = w->dim; /* as sent (scatter): ta_plan names it when out of range */
	req->n_index = (int)w->n_indices;
	static const char *const names[TA_MAX_RANK] = {"indices[0]", "indices[1]", "indices[2]",
	                                               "indices[3]"};
	_Static_assert(TA_MAX_RANK == 4, "one name per index array");
	for (size_t i = 0; i < w->n_indices; i++) {
		ta_status st = view_from_wire(rc, &w->index[i], scatter ? "indices" : names[i],
		                              &req->index[i]);
		if (st != TA_OK)
			return st;
	}
	return TA_OK;
}

/* Copies the Options as sent into req (absent: the defaults ta_request_init set), and
 * notes where old values go (old_into). */
static ta_status options_into(resp_ctx *rc, const ta_wire_request *w, ta_request *req)
{
	if (!w->has_options)
		return TA_OK;
	req->sem = (ta_sem)w->sem;
	req->scope = (ta_scope)w->scope;
	req->space = (ta_space)w->space;
	req->check_bounds = !w->no_bounds_check;
	req->want_old = w->want_old;
	rc->old_into = w->old_into.present ? &w->old_into : NULL;
	return view_from_wire(rc, &w->mask, "mask", &req->mask);
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
	/* the loop keeps what costs it little: few elements to move on the host (a plan whose
	 * operands the GPU reads in place moves none; doc/GPU-RESULTS.md has the figures) */
	if (rc->inline_max >= 0 && ta_plan_host_elements(&plan) > rc->inline_max)
		return defer(rc);
	uint64_t old_bytes = plan.want_old ? (uint64_t)plan.count * ta_dtype_size(plan.dtype) : 0;
	if (plan.want_old && rc->old_into) {
		/* old values go straight into the client's shared buffer */
		if (rc->old_into->length < old_bytes)
			return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
			                    "old_into: names %" PRIu64
			                    " bytes, fewer than the %" PRId64
			                    " old values take %" PRIu64 " (nothing was applied)",
			                    rc->old_into->length, plan.count, old_bytes);
		st = ta_shm_resolve(rc_shm(rc), rc->old_into->buffer_id, rc->old_into->offset,
		                    old_bytes, "old_into", &plan.old_out, &plan.old_out_device,
		                    &rc->err);
		if (st != TA_OK)
			return st;
	} else if (rc->old_into) {
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "old_into is given but the request returns no values");
	} else if (plan.want_old) {
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
		bool async = rc->group->async;
		if (plan.count <= TA_DISPATCH_GROUP_PLAN_MAX && plan.space == TA_SPACE_GLOBAL &&
		    (!async || ta_plan_async_ok(&plan))) {
			rc->collected = true; /* group_flush applies and answers it */
			rc->plan = plan;
			rc->kind = kind;
			rc->held = tile;
			rc->held_shared = false;
			/* kept for the connection's next requests (an asynchronous group's: its
			 * plan is proven, its outcome depends on no operand byte but the holes) */
			if (rc->record && plan.count == 1 && plan.check_bounds && !plan.mask.data)
				(void)ta_repeat_record(rc->record, rc->payload, rc->payload_len,
				                       rc->wire, req, &plan, rc->tiles, tile);
			return TA_OK;
		}
		if (async)
			return defer(rc); /* the loop never blocks */
		group_flush(rc->group);   /* the requests before this one go first */
	}
	ta_result result = {0, 0};
	st = ta_backend_apply(svc->backend, tile->mem, (size_t)tile->bytes, &plan, &result,
	                      &rc->err);
	ta_counter_add(&ta_service_my_totals(svc)->elements, (uint64_t)plan.count);
	rc->elements = (uint64_t)plan.count;
	if (st != TA_OK)
		return st;
	if (rc->record && plan.count == 1 && plan.check_bounds && !plan.mask.data)
		(void)ta_repeat_record(rc->record, rc->payload, rc->payload_len, rc->wire, req,
		                       &plan, rc->tiles, tile);
	plan_body(rc, &plan, &result, kind);
	return TA_OK;
}

/* A data-plane request of kind, its checks in one order. The atomic families: op, region,
 * the family's addressing, values, compare (cas), options. The memory ops (write, read,
 * gather, scatter store, atomic load/store): addressing, options, values for stores,
 * padding for gathers (the decoder fills compare only for the atomic requests, padding only
 * for gathers); a read's values come back as the `data` body. */
static ta_status on_data(resp_ctx *rc, ta_tile *tile, ta_req_kind kind, const ta_wire_request *w)
{
	ta_family family = ta_req_family(kind);
	bool memory = family == TA_FAMILY_MEMORY || family == TA_FAMILY_NONE;
	ta_op op = ta_req_op(kind);
	ta_request req;
	ta_request_region(&req, memory ? TA_FAMILY_MEMORY : family, memory ? op : (ta_op)w->op);
	ta_status st;
	if (memory) {
		/* write and read: their region; the others: the window (or addr.region), then
		 * scatter or indexed addressing */
		bool plain = kind == TA_REQ_WRITE || kind == TA_REQ_READ;
		bool addr = !plain && w->form == TA_FORM_REGION &&
		            (w->addr_region.n_origin || w->addr_region.n_shape);
		const char *what = plain ? "region" : addr ? "addr.region" : "window";
		if (addr && (w->region.n_origin || w->region.n_shape))
			st = ta_error_set(
			    &rc->err, TA_INVALID_ARGUMENT,
			    "give the region either as window or as addr.region, not both");
		else
			st = region_into(rc, addr ? &w->addr_region : &w->region, what,
			                 &tile->shape, &req);
		if (st == TA_OK && !plain &&
		    (w->form == TA_FORM_SCATTER || w->form == TA_FORM_INDEXED))
			st = indices_into(rc, w, w->form, &req);
		if (st == TA_OK)
			st = options_into(rc, w, &req);
		if (st == TA_OK && op == TA_OP_STORE && !w->values.present)
			st = ta_error_set(&rc->err, TA_INVALID_ARGUMENT, "%s needs values",
			                  kind == TA_REQ_WRITE ? "write" : "a store");
	} else if (!ta_op_is_rmw(req.op)) { /* one of the RMW ops of the table */
		char ops[128];
		st = ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                  "unknown or missing op (%d): use %s", (int)w->op,
		                  ta_kind_ops_text(TA_KIND_RMW, ops, sizeof(ops)));
	} else {
		st = region_into(rc, &w->region, "region", &tile->shape, &req);
		ta_wire_form form = family == TA_FAMILY_SCATTER ? TA_FORM_SCATTER : TA_FORM_INDEXED;
		if (st == TA_OK && family != TA_FAMILY_ELEMENTWISE)
			st = indices_into(rc, w, form, &req);
	}
	if (st == TA_OK)
		st = view_from_wire(rc, &w->values, "values", &req.values);
	if (st == TA_OK)
		st = view_from_wire(rc, &w->compare, "compare", &req.compare);
	if (st == TA_OK)
		st = view_from_wire(rc, &w->padding, "padding", &req.padding);
	if (st == TA_OK && !memory)
		st = options_into(rc, w, &req);
	if (op == TA_OP_LOAD)
		req.want_old = true;
	return st != TA_OK ? st : run_plan(rc, tile, &req, kind == TA_REQ_READ ? OUT_DATA : OUT_OP);
}

/* ---- the control plane (protobuf-c's structures; no tile) ---------------------------- */

/* Makes rc->ctl->field (a Response.member, cleared by init) the response's body. */
#define CTL_BODY(rc, CASE, member, field, init)                                                    \
	(init(&(rc)->ctl->field), (rc)->ctl->resp.body_case = TILEATOM__RESPONSE__BODY_##CASE,     \
	 (rc)->ctl->resp.member = &(rc)->ctl->field)

/* Fills ti from info (pointing into it). */
static void tile_info_pb(Tileatom__TileInfo *ti, ta_tile_info *info)
{
	tileatom__tile_info__init(ti);
	ti->name = info->name;
	ti->dtype = (Tileatom__DType)info->shape.dtype;
	ti->n_shape = (size_t)info->shape.rank;
	ti->shape = info->shape.shape;
	ti->bytes = info->bytes;
	ti->private_tile = info->private_tile;
	ti->placement = info->where;
}

/* Makes what tile is the response's body (create, describe) and lets go of the tile. */
static void set_tile_body(resp_ctx *rc, ta_tile *tile)
{
	ta_tile_get_info(tile, &rc->ctl->tile_info);
	ta_tile_unref(tile);
	tile_info_pb(&rc->ctl->tile, &rc->ctl->tile_info);
	rc->ctl->resp.body_case = TILEATOM__RESPONSE__BODY_TILE;
	rc->ctl->resp.tile = &rc->ctl->tile;
}

/* hello: checks the protocol version; answers with ours either way. */
static ta_status on_hello(resp_ctx *rc, const Tileatom__HelloRequest *h)
{
	CTL_BODY(rc, HELLO, hello, hello, tileatom__hello_response__init);
	rc->ctl->hello.protocol_version = TA_PROTOCOL_VERSION;
	rc->ctl->hello.server_version = (char *)PACKAGE_VERSION;
	rc->ctl->hello.backend = rc->svc->info.name;
	rc->ctl->hello.max_frame = rc->svc->max_frame;
	if (rc->session && rc->session->auth_needed && !rc->session->authenticated) {
		rc->ctl->hello.auth_required = true;
		rc->ctl->hello.auth_nonce.data = rc->session->nonce;
		rc->ctl->hello.auth_nonce.len = sizeof(rc->session->nonce);
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
static ta_status on_auth(resp_ctx *rc, const Tileatom__AuthRequest *a)
{
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
	                  a->client_nonce.len, rc->ctl->sproof) != 0)
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
	CTL_BODY(rc, AUTH, auth, auth, tileatom__auth_response__init);
	rc->ctl->auth.server_proof.data = rc->ctl->sproof;
	rc->ctl->auth.server_proof.len = sizeof(rc->ctl->sproof);
	return TA_OK;
}

/* create: reserve, allocate, fill, publish. */
static ta_status on_create(resp_ctx *rc, const Tileatom__CreateTileRequest *c)
{
	ta_service *svc = rc->svc;
	char shown[TA_NAME_MAX + 4];
	const char *name = ta_name_for_message(c->name, shown, sizeof(shown)); /* for messages */
	ta_tile_shape shape = {.dtype = (ta_dtype)c->dtype, .rank = (int)c->n_shape};
	if (c->n_shape == 0 || c->n_shape > TA_MAX_RANK)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "tile '%s': rank %zu is not between 1 and %d", name, c->n_shape,
		                    TA_MAX_RANK);
	int64_t n = 1; /* elements, for the worker check */
	for (size_t a = 0; a < c->n_shape; a++) {
		shape.shape[a] = c->shape[a];
		if (c->shape[a] > 0 && __builtin_mul_overflow(n, c->shape[a], &n))
			n = INT64_MAX;
	}
	/* allocating (zeroing) and filling a large tile is a large request: leave it to a worker */
	if (rc->inline_max >= 0 && n > rc->inline_max)
		return defer(rc);
	ta_owner owner = TA_OWNER_PUBLIC;
	if (c->private_tile) {
		owner = rc->who == TA_OWNER_ANY ? (ta_owner)getuid() : rc->who;
		if (owner == TA_OWNER_PUBLIC)
			return ta_error_set(
			    &rc->err, TA_PERMISSION_DENIED,
			    "tile '%s': a private tile needs an identity: connect over the Unix "
			    "socket, or authenticate over TCP (the daemon's --auth-file)",
			    name);
	}
	/* the placement asked for (empty: the daemon's default); a replayed create may name the
	 * parts the tile had, as its log record holds them */
	ta_placement place;
	ta_tile_where was;
	ta_error perr = {0};
	if (svc->replaying &&
	    ta_tile_where_parse(c->placement, shape.shape[0], &was, NULL) == TA_OK)
		place = (ta_placement){TA_PLACE_PARTS, 0, 0, &was};
	else if (ta_placement_parse(c->placement, &place, &perr) != TA_OK)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT, "tile '%s': %s", name, perr.msg);
	ta_tile *tile = NULL;
	/* a logged create goes back where the tile was, if this run can place it there */
	ta_status st = (svc->replaying ? ta_persist_create_restored : ta_registry_create_placed)(
	    svc->registry, c->name, &shape, owner, &place, &tile, &rc->err);
	if (st != TA_OK)
		return st;
	if (c->fill) {
		ta_request req;
		ta_request_region(&req, TA_FAMILY_MEMORY, TA_OP_STORE);
		const Tileatom__Array *a = c->fill; /* taken as the data plane's Arrays are */
		ta_wire_array fill = {.present = true,
		                      .dtype = (int32_t)a->dtype,
		                      .n_shape = a->n_shape,
		                      .data = a->data.data,
		                      .len = a->data.len};
		for (size_t i = 0; i < a->n_shape && i < TA_MAX_RANK; i++)
			fill.shape[i] = a->shape[i];
		if (a->shared)
			fill.shared = (ta_wire_ref){true, a->shared->buffer_id, a->shared->offset,
			                            a->shared->length};
		st = view_from_wire(rc, &fill, "fill", &req.values);
		if (st == TA_OK && req.values.device)
			st =
			    ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
			                 "the fill scalar lies in a device buffer; send it inline");
		ta_plan plan;
		if (st == TA_OK)
			st = ta_plan_build(&plan, &tile->shape, &req, &rc->err);
		/* the tile starts zeroed: a zero fill (all bytes equal to a first zero) is done */
		const unsigned char *b = req.values.data;
		size_t len = req.values.nbytes;
		if (st == TA_OK && len && (b[0] || memcmp(b, b + 1, len - 1))) {
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
	set_tile_body(rc, tile);
	const ta_tile_info *info = &rc->ctl->tile_info;
	ta_log(TA_LOG_INFO, "created tile '%s' (%s, %" PRIu64 " bytes)", info->name,
	       ta_dtype_name(info->shape.dtype), info->bytes);
	return TA_OK;
}

/* destroy: unname the tile; its memory goes with the last user. */
static ta_status on_destroy(resp_ctx *rc, const Tileatom__DestroyTileRequest *d)
{
	ta_tile_info info;
	ta_status st = ta_registry_remove_as(rc->svc->registry, d->name, rc->who, &info, &rc->err);
	if (st == TA_OK)
		ta_log(TA_LOG_INFO, "destroyed tile '%s'", info.name);
	return st;
}

/* describe: what one tile is. */
static ta_status on_describe(resp_ctx *rc, const Tileatom__DescribeTileRequest *d)
{
	ta_tile *tile = NULL;
	ta_status st = get_tile(rc, d->name, &tile);
	if (st == TA_OK)
		set_tile_body(rc, tile);
	return st;
}

/* Most tiles in one page of a listing. */
#define LIST_PAGE_MAX 65536u
/* Most bytes one TileInfo takes in a ListTilesResponse: name 2 + 64, dtype 1 + 5, shape
 * 2 + 4 x 10, bytes 1 + 10, private_tile 2, and its own key and length 3. */
#define LIST_ENTRY_WIRE_MAX 130u

/* list: the published tiles sorted by name, one page (paged) or all of them. */
static ta_status on_list(resp_ctx *rc, const Tileatom__ListTilesRequest *l)
{
	ta_service *svc = rc->svc;
	char shown[TA_NAME_MAX + 4];
	size_t n = 0;
	bool more = false;
	if (rc->inline_max >= 0) { /* a page is a pass over every tile: many go to a worker */
		uint32_t tiles = 0;
		uint64_t bytes = 0;
		ta_registry_stats(svc->registry, &tiles, &bytes);
		if (tiles > rc->inline_max)
			return defer(rc);
	}
	size_t limit = SIZE_MAX; /* unpaged: every tile */
	if (l->paged) {
		if (l->cursor[0] && !ta_name_valid(l->cursor))
			return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
			                    "list: cursor '%s' is not one this daemon gives (a "
			                    "next_cursor, or \"\" to start)",
			                    ta_name_for_message(l->cursor, shown, sizeof(shown)));
		/* a page always fits in a frame, next_cursor included */
		size_t fit =
		    (svc->max_frame - RESPONSE_OVERHEAD - TA_NAME_MAX - 2) / LIST_ENTRY_WIRE_MAX;
		limit = l->limit && l->limit < LIST_PAGE_MAX ? l->limit : LIST_PAGE_MAX;
		limit = limit < fit ? limit : fit;
	}
	ta_status st = ta_registry_list_page_as(svc->registry, rc->who, l->paged ? l->cursor : "",
	                                        limit, &rc->ctl->list_infos, &n, &more, &rc->err);
	if (st != TA_OK)
		return st;
	CTL_BODY(rc, LIST, list, list, tileatom__list_tiles_response__init);
	if (n) {
		rc->ctl->list_items = calloc(n, sizeof(*rc->ctl->list_items));
		rc->ctl->list_ptrs = calloc(n, sizeof(*rc->ctl->list_ptrs));
		if (!rc->ctl->list_items || !rc->ctl->list_ptrs)
			return ta_error_set(&rc->err, TA_RESOURCE_EXHAUSTED,
			                    "out of memory listing %zu tiles", n);
		for (size_t i = 0; i < n; i++) {
			tile_info_pb(&rc->ctl->list_items[i], &rc->ctl->list_infos[i]);
			rc->ctl->list_ptrs[i] = &rc->ctl->list_items[i];
		}
	}
	rc->ctl->list.n_tiles = n;
	rc->ctl->list.tiles = rc->ctl->list_ptrs;
	if (more)
		rc->ctl->list.next_cursor = rc->ctl->list_infos[n - 1].name;
	if (!l->paged) {
		size_t size = tileatom__list_tiles_response__get_packed_size(&rc->ctl->list);
		if (size + RESPONSE_OVERHEAD > svc->max_frame)
			return ta_error_set(&rc->err, TA_RESOURCE_EXHAUSTED,
			                    "list: the %zu tiles need %zu bytes, over the frame "
			                    "limit of %" PRIu32 " bytes (max_frame): this client "
			                    "lists in one response; a client that pages listings "
			                    "(ListTilesRequest.paged) lists them all",
			                    n, size, svc->max_frame);
	}
	return TA_OK;
}

/* stats: backend facts, counters, and one entry per device the backend serves
 * (ta_service_device_stats). */
static ta_status on_stats(resp_ctx *rc, const Tileatom__StatsRequest *m)
{
	(void)m;
	ta_service *svc = rc->svc;
	Tileatom__StatsResponse *s =
	    CTL_BODY(rc, STATS, stats, stats, tileatom__stats_response__init);
	ta_backend_info *bi = &rc->ctl->stats_info;
	ta_backend_info_get(svc->backend, bi);
	s->backend = bi->name;
	s->device = bi->device;
	s->device_memory = bi->device_memory;
	s->compute_capability = bi->compute_capability;
	ta_registry_stats(svc->registry, &s->tiles, &s->tile_bytes);
	ta_service_read_totals(svc, &s->requests, &s->errors, &s->elements);
	s->connections = atomic_load(&svc->connections);
	if (!ta_metrics_fill_stats(&svc->metrics, rc->arena, s))
		return ta_error_set(&rc->err, TA_RESOURCE_EXHAUSTED,
		                    "out of memory for the per-kind statistics");
	int n = ta_backend_device_count(svc->backend);
	Tileatom__DeviceStats *items = ta_arena_alloc(rc->arena, (size_t)n * sizeof(*items));
	Tileatom__DeviceStats **ptrs = ta_arena_alloc(rc->arena, (size_t)n * sizeof(*ptrs));
	ta_device_stats *all = ta_arena_alloc(rc->arena, (size_t)n * sizeof(*all)); /* causes */
	if (!items || !ptrs || !all)
		return ta_error_set(&rc->err, TA_RESOURCE_EXHAUSTED,
		                    "out of memory for the per-device statistics");
	for (int d = 0; d < n; d++) {
		ta_device_stats *ds = &all[d];
		if (!ta_service_device_stats(svc, d, ds))
			continue;
		Tileatom__DeviceStats *it = &items[s->n_devices];
		tileatom__device_stats__init(it);
		it->device = (uint32_t)d;
		it->memory_used = ds->memory_used;
		it->memory_total = ds->memory_total;
		it->tiles = (uint32_t)ds->tiles;
		it->tile_bytes = ds->tile_bytes;
		it->requests = ds->requests;
		it->failed = ds->failed;
		if (ds->failed)
			it->failure = ds->cause;
		ptrs[s->n_devices++] = it;
	}
	s->devices = ptrs;
	return TA_OK;
}

/* register_buffer: maps the memfd that came with the request, or opens the CUDA IPC handle
 * it carries (a device buffer; not with --data-dir, whose log could not hold the operands)
 * (shmbuf.h). */
static ta_status on_register_buffer(resp_ctx *rc, const Tileatom__RegisterBufferRequest *m)
{
	ta_shm_table *t = rc_shm(rc);
	if (!t)
		return ta_error_set(
		    &rc->err, TA_INVALID_ARGUMENT,
		    "register_buffer: shared buffers need a Unix-socket connection");
	bool device = m->cuda_ipc_handle.len > 0;
	if (device && rc->svc->persist)
		return ta_error_set(&rc->err, TA_UNIMPLEMENTED,
		                    "register_buffer: device buffers cannot be logged; this "
		                    "daemon runs with --data-dir (send the operands inline or "
		                    "in a shared buffer)");
	if (device && m->cuda_device_uuid.len != 0 && m->cuda_device_uuid.len != TA_GPU_UUID_BYTES)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "register_buffer: a GPU UUID has %d bytes, not %zu",
		                    TA_GPU_UUID_BYTES, m->cuda_device_uuid.len);
	uint64_t id = 0;
	ta_status st =
	    device
	        ? ta_shm_register_device(t, m->cuda_ipc_handle.data, m->cuda_ipc_handle.len,
	                                 m->cuda_device_uuid.len ? m->cuda_device_uuid.data : NULL,
	                                 m->size, &id, &rc->err)
	        : ta_shm_register(t, m->size, &id, &rc->err);
	if (st != TA_OK)
		return st;
	CTL_BODY(rc, BUFFER, buffer, buffer, tileatom__buffer_response__init);
	rc->ctl->buffer.buffer_id = id;
	rc->ctl->buffer.size = m->size;
	return TA_OK;
}

/* ping: an empty answer. */
static ta_status on_ping(resp_ctx *rc, const Tileatom__PingRequest *m)
{
	(void)m;
	CTL_BODY(rc, PING, ping, ping, tileatom__ping_response__init);
	return TA_OK;
}

/* snapshot: compacts the log into a snapshot of every tile (on a worker: it reads every
 * tile). */
static ta_status on_snapshot(resp_ctx *rc, const Tileatom__SnapshotRequest *m)
{
	(void)m;
	if (!ta_persist_may_snapshot(rc->who))
		return ta_error_set(&rc->err, TA_PERMISSION_DENIED,
		                    "snapshot: only the daemon's user, root or an authenticated "
		                    "TCP client may ask for one");
	if (!rc->svc->persist)
		return ta_error_set(&rc->err, TA_UNAVAILABLE,
		                    "this daemon keeps no data (start it with --data-dir DIR)");
	if (rc->inline_max >= 0)
		return defer(rc);
	ta_persist_snapinfo info;
	ta_status st = ta_persist_snapshot(rc->svc->persist, &info, &rc->err);
	if (st != TA_OK)
		return st;
	CTL_BODY(rc, SNAPSHOT, snapshot, snap, tileatom__snapshot_response__init);
	rc->ctl->snap.tiles = info.tiles;
	rc->ctl->snap.bytes = info.bytes;
	rc->ctl->snap.seq = info.seq;
	rc->ctl->snap.log_removed = info.log_removed;
	return TA_OK;
}

ta_status handle(resp_ctx *rc, const ta_wire_request *w, const Tileatom__Request *req)
{
	ta_req_kind kind = rc->req_kind;
	if (kind == TA_REQ_NONE)
		return ta_error_set(&rc->err, TA_INVALID_ARGUMENT,
		                    "request %" PRIu64 " has no body (unknown request type?)",
		                    rc->id);
	if (!ta_req_valid(kind))
		return ta_error_set(&rc->err, TA_UNIMPLEMENTED, "unknown request type %d",
		                    (int)kind);
	ta_session *s = rc->session; /* Hello first, Auth where it is needed */
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
	ta_status st;
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
		ta_op op = w && ta_op_is_rmw((ta_op)w->op) ? (ta_op)w->op : TA_OP_NONE;
		const char *name = w                        ? w->tile
		                   : kind == TA_REQ_CREATE  ? req->create->name
		                   : kind == TA_REQ_DESTROY ? req->destroy->name
		                                            : NULL; /* the lock's */
		if ((st = persist_begin(rc, name, ta_req_has_tile(kind), op, &hold, &tile)) !=
		    TA_OK)
			return st;
	} else if (ta_req_has_tile(kind) && (st = get_tile(rc, w->tile, &tile)) != TA_OK) {
		return st;
	}
	/* the handler: a data-plane one with its tile and the request as sent (w), a
	 * control-plane one with protobuf-c's message (req) */
#define TA_REQ_CALL_1(field) on_data(rc, tile, kind, w)
#define TA_REQ_CALL_0(field) on_##field(rc, req->field)
	switch (kind) {
#define TA_REQUEST(id, field, number, tile_col, ...)                                               \
	case TA_REQ_##id:                                                                          \
		st = TA_REQ_CALL_##tile_col(field);                                                \
		break;
#include "ta_ops.def"
#undef TA_REQUEST
	default:
		st = ta_error_set(&rc->err, TA_INTERNAL, "request type %d has no handler",
		                  (int)kind);
	}
#undef TA_REQ_CALL_1
#undef TA_REQ_CALL_0
	if (tile && !rc->collected)
		ta_tile_unref(tile);
	if (hold.held) {
		if (st == TA_OK && !rc->deferred)
			st = persist_record(rc, &hold, (Tileatom__Request *)req);
		ta_persist_unlock(rc->svc->persist, &hold);
	}
	return st;
}
