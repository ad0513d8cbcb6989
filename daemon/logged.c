/* logged.c: the persistence glue of the request path (--data-dir): a mutating request's
 * mutation lock and tile lookup, and its log record once it was applied (persist.h). */
#include "reqctx.h"
#include "shmbuf.h"

/* The lock is shared with requests of the same op when its result does not depend on the
 * order (ta_op_order_independent for the tile's dtype): first guessed for an integer tile,
 * taken again alone for another dtype. A run notes the op it found order independent, and
 * the tile checked under the lock it keeps. */
ta_status persist_begin(resp_ctx *rc, const char *name, bool has_tile, ta_op op,
                        ta_persist_hold *hold, ta_tile **tile)
{
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

/* With --data-dir: turns every Array in a shared buffer in msg, or in a message inside it,
 * into inline bytes (the same range dispatch read) and drops every Options.old_into, so that
 * the request can be logged as it was applied (the buffers are gone after a restart).
 * Returns 1 when something was changed, 0 when nothing needed it, -1 with err set when a
 * range does not resolve. */
static int inline_refs(ta_shm_table *shm, ProtobufCMessage *msg, ta_error *err)
{
	const ProtobufCMessageDescriptor *d = msg->descriptor;
	if (d == &tileatom__array__descriptor) {
		Tileatom__Array *a = (Tileatom__Array *)msg;
		if (!a->shared)
			return 0;
		void *ptr = NULL;
		bool device = false;
		if (ta_shm_resolve(shm, a->shared->buffer_id, a->shared->offset, a->shared->length,
		                   "a shared operand", &ptr, &device, err) != TA_OK)
			return -1;
		if (device) { /* not reached: device buffers are refused with --data-dir */
			ta_error_set(err, TA_INTERNAL, "a device operand cannot be logged");
			return -1;
		}
		a->data.data = ptr;
		a->data.len = (size_t)a->shared->length; /* resolved: it fits (shmbuf.h) */
		a->shared = NULL;
		return 1;
	}
	int changed = 0;
	if (d == &tileatom__options__descriptor && ((Tileatom__Options *)msg)->old_into) {
		((Tileatom__Options *)msg)->old_into = NULL;
		changed = 1;
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
			int r = subs[k] ? inline_refs(shm, subs[k], err) : 0;
			if (r < 0)
				return -1;
			changed |= r;
		}
	}
	return changed;
}

/* A request naming shared buffers (a data-plane request's Array.shared or old_into, create's
 * fill) is logged re-encoded with their bytes inline and no old_into (the buffers are gone
 * at replay); a create, with where its tile went as its placement (persist_int.h). */
ta_status persist_record(resp_ctx *rc, ta_persist_hold *hold, Tileatom__Request *pb)
{
	const uint8_t *rec = rc->payload;
	size_t len = rc->payload_len;
	ta_shm_table *shm = rc->session ? rc->session->shm : NULL;
	/* a control-plane request is rewritten where protobuf-c unpacked it (arena memory); a
	 * data-plane one is unpacked for that, the rare case of shared buffers with --data-dir */
	int refs = rc->wire ? rc->wire->refs : inline_refs(shm, &pb->base, &rc->err);
	bool create = !rc->wire && pb->body_case == TILEATOM__REQUEST__BODY_CREATE;
	if (refs != 0 || create) {
		char where[TA_WHERE_TEXT_MAX]; /* the create's placement, until it is packed */
		Tileatom__Request *req =
		    rc->wire
		        ? tileatom__request__unpack(&rc->arena->pb, rc->payload_len, rc->payload)
		        : pb;
		const char *failed = NULL;
		ta_tile *tile = NULL;
		if (!req || refs < 0 || (rc->wire && inline_refs(shm, &req->base, &rc->err) < 0))
			failed = "a shared operand could not be logged";
		else if (create && ta_registry_get(rc->svc->registry, req->create->name, &tile,
		                                   &rc->err) != TA_OK)
			failed = "a created tile could not be logged";
		if (failed) {
			ta_persist_fail(rc->svc->persist, failed);
			return rc->err.code ? rc->err.code : TA_INTERNAL;
		}
		if (tile) { /* its replay puts the tile back where it went */
			ta_tile_where w;
			ta_tile_where_get(tile, &w);
			ta_tile_unref(tile);
			req->create->placement = ta_tile_where_format(&w, where, sizeof(where));
		}
		len = protobuf_c_message_get_packed_size(&req->base);
		uint8_t *packed = ta_arena_alloc(rc->arena, len ? len : 1); /* copied by the log */
		if (!packed) {
			ta_persist_fail(rc->svc->persist, "out of memory for a log record");
			return ta_error_set(
			    &rc->err, TA_INTERNAL,
			    "the request was applied but could not be logged (out of "
			    "memory); mutations are refused from now on");
		}
		protobuf_c_message_pack(&req->base, packed);
		rec = packed;
	}
	return ta_persist_record(rc->svc->persist, hold, rc->who, rec, len, &rc->log_seq, &rc->err);
}
