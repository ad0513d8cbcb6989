/* pipeline.c: one request frame in, one response frame out (see dispatch.h): decode (the
 * data plane with codec.c, the control plane with wirecheck.c and protobuf-c), hand over
 * to handle (handlers.c), answer and count (reply.c); a pipelined run's small plans
 * collected into a group (applied together by reply.c's group_flush); a connection's
 * repeated request run (or collected into an asynchronous group) from its kept plan
 * (codec.h), a cache in front of the decoder. */
#include "reqctx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ta_frame.h"
#include "wirecheck.h"

void ta_dispatch_scratch_init(ta_dispatch_scratch *s)
{
	memset(s, 0, sizeof(*s)); /* no run, no pin, no tile looked up, nothing held */
	ta_arena_init(&s->arena, TA_DISPATCH_ARENA_KEEP);
	ta_persist_run_init(&s->run);
}

void ta_dispatch_scratch_free(ta_dispatch_scratch *s)
{
	ta_tile_unref(s->pin);
	s->pin = NULL;
	ta_arena_free(&s->arena);
	ta_persist_run_free(&s->run);
}

/* A small helper of the request path, inlined into its callers. */
#define HOT static inline __attribute__((always_inline))

/* A request payload after decoding. */
typedef struct decoded {
	ta_wire_outcome outcome; /* what the payload is (codec.h) */
	Tileatom__Request *req;  /* TA_WIRE_CONTROL: protobuf-c's unpack (arena memory) */
	struct timespec t0;      /* when it was read, if timed (metrics) */
} decoded;

/* Decodes len bytes at payload: the data plane into *w (codec.c), a control-plane request
 * with protobuf-c; counted (stats), when it was read noted (timed requests). */
HOT void decode_request(ta_service *svc, ta_dispatch_scratch *scratch, const uint8_t *payload,
                        size_t len, bool counted, ta_wire_request *w, decoded *d)
{
	d->t0 = (struct timespec){0, 0};
	if (counted && svc->time_requests)
		clock_gettime(CLOCK_MONOTONIC, &d->t0);
	if (counted)
		ta_counter_add(&ta_service_my_totals(svc)->requests, 1);
	d->req = NULL;
	d->outcome = ta_codec_decode(&scratch->arena, payload, len, w);
	if (d->outcome == TA_WIRE_CONTROL &&
	    !(d->req = tileatom__request__unpack(&scratch->arena.pb, len, payload)))
		d->outcome = TA_WIRE_MALFORMED;
}

/* Starts the metrics of a decoded request of payload_len bytes: its size, and the clock
 * when requests are timed. */
static void metrics_start(resp_ctx *rc, size_t payload_len)
{
	rc->bytes_in = payload_len;
	if (rc->svc->time_requests)
		clock_gettime(CLOCK_MONOTONIC, &rc->t0);
}

/* Starts rc for the len bytes at payload, a request of session run with scratch's memory. */
HOT void rc_begin(resp_ctx *rc, ta_service *svc, ta_dispatch_scratch *scratch, ta_session *session,
                  const uint8_t *payload, size_t len, int64_t inline_max)
{
	resp_ctx_start(rc);
	rc->svc = svc;
	rc->arena = &scratch->arena;
	rc->tiles = &scratch->tiles;
	rc->inline_max = inline_max;
	rc->session = session;
	rc->who = ta_session_who(session);
	rc->payload = payload;
	rc->payload_len = len;
	rc->run = scratch->in_run ? &scratch->run : NULL;
}

/* rc_begin for request w of group g (no element limit), its metrics started. */
HOT void rc_grouped(resp_ctx *rc, dispatch_group *g, ta_dispatch_scratch *scratch,
                    const uint8_t *payload, size_t len, const ta_wire_request *w)
{
	rc_begin(rc, g->svc, scratch, g->session, payload, len, -1);
	rc->group = g;
	rc->id = w->id;
	rc->req_kind = w->kind;
	rc->wire = w;
	metrics_start(rc, len);
}

/* Empties g (of svc; async: ta_async_run's) for the answers of session's requests, to go
 * to out. */
static void group_start(dispatch_group *g, ta_service *svc, bool async, ta_frame_buf *out,
                        ta_session *session)
{
	g->svc = svc;
	g->async = async;
	g->out = out;
	g->session = session;
	g->close_after = false;
	g->n = 0;
}

/* Where request w may be kept (the session's kept request, codec.h) once it ran: an
 * atomic of a session whose operands are in the message (no shared-buffer references);
 * NULL for anything else. */
static inline ta_repeat *keep_in(ta_session *session, const ta_wire_request *w)
{
	if (!session || w->refs || ta_req_family(w->kind) == TA_FAMILY_MEMORY ||
	    ta_req_family(w->kind) == TA_FAMILY_NONE)
		return NULL;
	return &session->repeat;
}

/* run_one after decoding (d and w: the request, counted already), also for a request of a
 * grouped run that is not a plan. */
static ta_dispatch_outcome run_decoded(ta_service *svc, ta_dispatch_scratch *scratch,
                                       ta_session *session, const uint8_t *payload, size_t len,
                                       uint8_t *owned, int64_t inline_max, ta_frame_buf *out,
                                       bool *close_after, decoded *d, ta_wire_request *w)
{
	*close_after = false;
	scratch->log_seq = 0;
	bool control = d->outcome == TA_WIRE_CONTROL;
	char msg[200];
	bool unrun = true;
	if (d->outcome == TA_WIRE_MALFORMED) { /* id 0, and close */
		snprintf(msg, sizeof(msg),
		         "malformed request: %zu bytes that do not decode as a Request; closing "
		         "the connection",
		         len);
		ta_log(TA_LOG_INFO, "%s", msg);
		size_t out_before = out->len;
		*close_after =
		    ta_dispatch_error_append(svc, 0, TA_INVALID_ARGUMENT, msg, true, out);
		ta_metrics_record(&svc->metrics, TA_REQ_NONE, true, 0, len, out->len - out_before,
		                  ta_metrics_since(svc->time_requests, &d->t0));
	} else if (control && !ta_wire_check_strings(&tileatom__request__descriptor, payload, len,
	                                             msg, sizeof(msg))) {
		char answer[sizeof(msg) + 64];
		snprintf(answer, sizeof(answer), TA_WIRE_BAD_STRING, msg);
		*close_after = ta_dispatch_error_append(svc, d->req->id, TA_INVALID_ARGUMENT,
		                                        answer, false, out);
	} else if (!control && w->problem) { /* a bad tile name, a field given twice */
		*close_after = ta_dispatch_error_append(svc, w->id, TA_INVALID_ARGUMENT,
		                                        w->problem_msg, false, out);
	} else {
		unrun = false;
	}
	if (unrun) {
		free(owned);
		ta_arena_reset(&scratch->arena);
		return TA_DISPATCH_DONE;
	}
	resp_ctx rc;
	rc_begin(&rc, svc, scratch, session, payload, len, inline_max);
	rc.bytes_in = len;
	rc.t0 = d->t0;
	if (control) {
		rc.id = d->req->id;
		rc.req_kind = (ta_req_kind)d->req->body_case;
		rc.ctl = ta_arena_alloc_inline(&scratch->arena, sizeof(*rc.ctl));
		if (rc.ctl) {
			memset(rc.ctl, 0, sizeof(*rc.ctl));
			tileatom__response__init(&rc.ctl->resp);
			rc.ctl->resp.id = rc.id;
		}
	} else {
		rc.id = w->id;
		rc.req_kind = w->kind;
		rc.wire = w;
		if (inline_max >= 0 && !svc->persist) /* the loop's own requests (one at a time) */
			rc.record = keep_in(session, w);
	}
	ta_status st = control && !rc.ctl ? ta_error_set(&rc.err, TA_RESOURCE_EXHAUSTED,
	                                                 "out of memory for a response")
	                                  : handle(&rc, rc.wire, d->req);
	free(owned);
	scratch->log_seq = rc.log_seq;
	if (rc.deferred) {
		/* the worker counts it (adding 2^64 - 1 takes one away) */
		ta_counter_add(&ta_service_my_totals(svc)->requests, UINT64_MAX);
		resp_ctx_free(&rc);
	} else {
		*close_after = finish_reply(svc, &rc, st, out);
	}
	ta_arena_reset(&scratch->arena);
	return rc.deferred ? TA_DISPATCH_DEFER : TA_DISPATCH_DONE;
}

/* ta_dispatch_run_session, freeing owned (a malloc'd payload, or NULL) once the request ran. */
static ta_dispatch_outcome run_one(ta_service *svc, ta_dispatch_scratch *scratch,
                                   ta_session *session, const uint8_t *payload, size_t len,
                                   uint8_t *owned, int64_t inline_max, ta_frame_buf *out,
                                   bool *close_after)
{
	held_flush(svc, scratch); /* what ran before counts before this one (stats) */
	decoded d;
	ta_wire_request w;
	decode_request(svc, scratch, payload, len, true, &w, &d);
	return run_decoded(svc, scratch, session, payload, len, owned, inline_max, out, close_after,
	                   &d, &w);
}

/* ta_dispatch_run_session for a request of a run with a group: a small plan joins the group
 * (answered by group_flush), anything else runs after the group is flushed. */
static void run_grouped(dispatch_group *g, ta_dispatch_scratch *scratch, const uint8_t *payload,
                        size_t len)
{
	ta_service *svc = g->svc;
	decoded d;
	ta_wire_request *w = &g->wires[g->n];
	decode_request(svc, scratch, payload, len, true, w, &d);
	if (d.outcome != TA_WIRE_DATA || w->problem || !ta_req_has_tile(w->kind)) {
		/* not a plan (or a problem, or no Request at all): what came before runs
		 * first, then this one, decoded once */
		group_flush(g);
		bool close_after = false;
		(void)run_decoded(svc, scratch, g->session, payload, len, NULL, -1, g->out,
		                  &close_after, &d, w);
		if (close_after)
			g->close_after = true;
		return;
	}
	resp_ctx *rc = &g->rcs[g->n];
	rc_grouped(rc, g, scratch, payload, len, w);
	ta_status st = handle(rc, w, NULL);
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
	if (g)
		group_start(g, svc, false, out, session);
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

/* A connection's pipelined run on its event loop, its small plans applied through the
 * backend's apply_async (see dispatch.h). */
struct ta_async_run {
	ta_dispatch_scratch scratch; /* its arena (the requests in flight) and tile cache */
	int tail;                    /* >= 0: g.rcs[tail], not collected, answered after g */
	ta_status tail_st;           /* that request's outcome */
	dispatch_group g;            /* the plans in flight */
};

ta_async_run *ta_async_run_new(ta_service *svc)
{
	ta_async_run *ar = malloc(sizeof(*ar));
	if (!ar)
		return NULL;
	ta_dispatch_scratch_init(&ar->scratch);
	for (int i = 0; i < TA_DISPATCH_GROUP; i++)
		ar->g.rcs[i].copy_of = NULL; /* no copy of a kept plan yet (repeat_collect) */
	ar->g.svc = svc;                     /* the rest is set by each step */
	return ar;
}

void ta_async_run_free(ta_async_run *ar)
{
	if (!ar)
		return;
	ta_dispatch_scratch_free(&ar->scratch);
	free(ar);
}

/* The kept request's tile, counting a hit: held itself when the caller already holds a
 * reference to held and it is that tile, unchanged (*borrowed: nothing taken); else a new
 * reference (*borrowed false); NULL, the kept request forgotten, when that tile is gone or
 * re-created. */
HOT ta_tile *repeat_tile_via(ta_service *svc, ta_session *session, const ta_tile *held,
                             bool *borrowed, ta_error *err)
{
	ta_repeat *r = &session->repeat;
	ta_owner who = ta_session_who(session);
	ta_tile *tile = NULL;
	*borrowed = held && held == r->tile && ta_tile_still(r->tile, r->stamp, who);
	if (!*borrowed &&
	    (ta_registry_get_cached(svc->registry, &r->tiles, r->name, who, &tile, err) != TA_OK ||
	     tile != r->tile || r->tiles.stamp != r->stamp)) {
		if (tile)
			ta_tile_unref(tile);
		ta_repeat_clear(r);
		return NULL;
	}
	r->hits++;
	return r->tile;
}

/* Operand i of plan p whose index arrays number n: index[i], then values, then compare. */
static inline ta_operand *plan_operand(ta_plan *p, int i, int n)
{
	return i < n ? &p->index[i] : i == n ? &p->values : &p->compare;
}

/* Makes rc->plan a copy of r's kept plan whose operands and old value live in
 * rc->repeat_slots (the layout of r->slots, then r->old), tagged with r's gen: it stays
 * valid for every later repeat of the same kept request that this rc carries. */
static void plan_copy(resp_ctx *rc, const ta_repeat *r)
{
	rc->plan = r->plan;
	int n = rc->plan.n_index < TA_MAX_RANK ? rc->plan.n_index : TA_MAX_RANK;
	for (int i = 0; i < n + 2; i++) { /* operands in the holes' slots: now in the copy's */
		ta_operand *to = plan_operand(&rc->plan, i, n);
		uintptr_t at = (uintptr_t)to->data - (uintptr_t)r->slots;
		if (to->data && at < sizeof(r->slots))
			to->data = (uint8_t *)rc->repeat_slots + at;
	}
	if (rc->plan.want_old)
		rc->plan.old_out = &rc->repeat_slots[TA_REPEAT_HOLES];
}

/* Collects payload into g's next request as the session's kept request again (codec.h)
 * when it is that request and its plan may join the asynchronous group: the operand bytes
 * written into the request's own slots, where its copy of the kept plan points (copied
 * once per kept request: a group's request i reuses the copy of the group before, see
 * plan_copy), the tile held (through the group's request before when that one holds the
 * same unchanged tile: no reference of its own), no decoding or planning. False, with
 * nothing done, when it is not (the tile replaced: the kept request is forgotten, and the
 * decoder answers). */
static bool repeat_collect(dispatch_group *g, ta_dispatch_scratch *scratch, const uint8_t *payload,
                           size_t len)
{
	ta_service *svc = g->svc;
	ta_session *session = g->session;
	ta_repeat *r = &session->repeat;
	resp_ctx *rc = &g->rcs[g->n];
	uint64_t id = 0;
	if (r->plan.space != TA_SPACE_GLOBAL || !ta_plan_async_ok(&r->plan))
		return false;
	bool copied = rc->copy_of == r && rc->copy_gen == r->gen; /* rc_begin clears the tag */
	if (!ta_repeat_match(r, payload, len, &id, rc->repeat_slots))
		return false;
	rc_begin(rc, svc, scratch, session, payload, len, -1);
	rc->group = g;
	bool shared;
	ta_tile *tile = repeat_tile_via(svc, session, g->n > 0 ? g->rcs[g->n - 1].held : NULL,
	                                &shared, &rc->err);
	if (!tile)
		return false;
	if (!copied)
		plan_copy(rc, r);
	rc->copy_of = r;
	rc->copy_gen = r->gen;
	if (rc->plan.want_old)
		rc->old_buf = rc->plan.old_out;
	rc->id = id;
	rc->req_kind = r->kind;
	rc->kind = OUT_OP;
	rc->held = tile;
	rc->held_shared = shared;
	rc->collected = true;
	metrics_start(rc, len);
	return true;
}

ta_async_step ta_async_run_step(ta_async_run *ar, ta_session *session, const uint8_t *frames,
                                size_t len, ta_frame_buf *out, bool *close_after, size_t *used,
                                uint32_t *nframes, void (*done)(void *arg), void *arg)
{
	dispatch_group *g = &ar->g;
	ta_service *svc = g->svc;
	ta_dispatch_scratch *scratch = &ar->scratch;
	group_start(g, svc, true, out, session);
	ar->tail = -1;
	*close_after = false;
	size_t off = 0;
	uint32_t nf = 0;
	/* logged requests keep their order and acknowledgement through the workers
	 * (repeat_collect relies on it) */
	while (!svc->persist && len - off >= TA_FRAME_HEADER && g->n < TA_DISPATCH_GROUP) {
		uint32_t n = ta_frame_get_header(frames + off);
		if (n > len - off - TA_FRAME_HEADER)
			break; /* a partial frame: the caller cut whole ones */
		const uint8_t *payload = frames + off + TA_FRAME_HEADER;
		resp_ctx *rc = &g->rcs[g->n];
		ta_status st = TA_OK;
		if (!session || !session->repeat.valid || !repeat_collect(g, scratch, payload, n)) {
			decoded d;
			ta_wire_request *w = &g->wires[g->n];
			decode_request(svc, scratch, payload, n, false, w, &d);
			if (d.outcome != TA_WIRE_DATA || w->problem || !ta_req_has_tile(w->kind))
				break; /* not a plan: the caller runs it (decoding it again) */
			rc_grouped(rc, g, scratch, payload, n, w);
			rc->record = keep_in(session, w); /* kept once collected (run_plan) */
			st = handle(rc, w, NULL);
			if (rc->deferred)
				break; /* not for a group: nothing happened, the caller runs it */
		}
		off += TA_FRAME_HEADER + (size_t)n;
		nf++;
		if (rc->collected) {
			g->n++;
			continue;
		}
		if (g->n > 0) { /* answered (an error): after the plans before it */
			ar->tail = g->n;
			ar->tail_st = st;
			break;
		}
		*close_after = finish_reply(svc, rc, st, out);
		ta_arena_reset(&scratch->arena);
		if (*close_after)
			break;
	}
	*used = off;
	*nframes = nf;
	if (nf > 0) /* one add a step */
		ta_counter_add(&ta_service_my_totals(svc)->requests, nf);
	if (g->n == 0) {
		ta_arena_reset(&scratch->arena);
		return off > 0 || *close_after ? TA_ASYNC_RAN : TA_ASYNC_REST;
	}
	group_calls(g);
	ta_backend_apply_async(svc->backend, g->calls, (size_t)g->n, done, arg);
	return TA_ASYNC_PENDING;
}

void ta_async_run_finish(ta_async_run *ar, bool *close_after)
{
	dispatch_group *g = &ar->g;
	group_answer(g);
	if (ar->tail >= 0) {
		if (finish_reply(g->svc, &g->rcs[ar->tail], ar->tail_st, g->out))
			g->close_after = true;
		ar->tail = -1;
	}
	*close_after = g->close_after;
	ta_arena_reset(&ar->scratch.arena);
}

/* Runs payload as the session's kept request again (codec.h) when it is that request
 * and may run here: the checks and the answer of run_one for it, without decoding or
 * planning. Returns false, with nothing done, when it is not (or the tile is no longer the
 * one the request ran on: the kept request is forgotten, and the ordinary way answers). */
static bool repeat_run(ta_service *svc, ta_dispatch_scratch *scratch, ta_session *session,
                       const uint8_t *payload, size_t len, int64_t inline_max, ta_frame_buf *out,
                       bool *close_after)
{
	ta_repeat *r = &session->repeat;
	uint64_t id = 0;
	if (svc->persist || r->plan.count > inline_max ||
	    !ta_repeat_match(r, payload, len, &id, r->slots))
		return false;
	resp_ctx rc;
	resp_ctx_start(&rc);
	rc.svc = svc;
	/* within a run, the tile the thread pinned (scratch->pin) when it is still the kept
	 * request's, taking nothing; else a new reference, pinned for the rest of the run (the
	 * one pinned before given back), or given back below outside a run */
	bool borrowed;
	ta_tile *tile = repeat_tile_via(svc, session, scratch->pin, &borrowed, &rc.err);
	if (!tile)
		return false;
	if (!borrowed && scratch->pinning) {
		ta_tile_unref(scratch->pin);
		scratch->pin = tile;
	}
	rc.req_kind = r->kind;
	metrics_start(&rc, len);
	rc.id = id;
	scratch->log_seq = 0;
	ta_result result = {0, 0};
	ta_status st = ta_backend_apply(svc->backend, tile->mem, (size_t)tile->bytes, &r->plan,
	                                &result, &rc.err);
	if (tile != scratch->pin)
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
		ta_counter_add(&totals->requests, 1);
		ta_counter_add(&totals->elements, 1);
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
	*out = (ta_reply){buf.data, buf.data ? buf.len : 0, close_after, scratch.log_seq};
	ta_dispatch_scratch_free(&scratch);
}

void ta_dispatch_frame(ta_service *svc, const uint8_t *payload, size_t len, ta_reply *out)
{
	dispatch_alone(svc, NULL, payload, len, NULL, out);
}

void ta_dispatch_frame_owned_session(ta_service *svc, ta_session *session, uint8_t *payload,
                                     size_t len, ta_reply *out)
{
	dispatch_alone(svc, session, payload, len, payload, out);
}
