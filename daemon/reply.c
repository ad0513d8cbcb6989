/* reply.c: a request's answer: the response of an applied plan (plan_body), appended to the
 * output (the data plane and every error through codec.c's writer, control-plane bodies
 * through protobuf-c, a short RESOURCE_EXHAUSTED when it cannot be), counted (metrics, or
 * in a pipelined run the held counts of the scratch, published together at the run's end:
 * ta_dispatch_begin_run / end_run); and a pipelined run's collected plans applied together
 * and answered in order, their OK answers counted together (group_flush, group_answer).
 * Below handlers.c and pipeline.c, which both answer. */
#include "reqctx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ta_frame.h"

void plan_body(resp_ctx *rc, const ta_plan *plan, const ta_result *result, out_kind kind)
{
	ta_reply_msg *m = &rc->msg;
	bool old_shared = plan->want_old && rc->old_into; /* written into a shared buffer */
	m->status = TA_OK;
	m->message = NULL;
	m->body = kind == OUT_OP ? TA_BODY_OP : TA_BODY_DATA;
	m->has_old = plan->want_old;
	m->dtype = plan->want_old ? (int32_t)plan->dtype : 0;
	m->rank = plan->want_old ? (size_t)plan->rank : 0;
	for (size_t a = 0; a < m->rank; a++)
		rc->data_shape[a] = plan->shape[a];
	m->shape = rc->data_shape;
	m->data = old_shared ? NULL : rc->old_buf;
	m->len = plan->want_old && !old_shared
	             ? (size_t)((uint64_t)plan->count * ta_dtype_size(plan->dtype))
	             : 0;
	m->skipped = kind == OUT_OP ? result->skipped : 0;
	m->applied = kind == OUT_OP ? result->applied : 0;
}

/* Appends the short RESOURCE_EXHAUSTED answer of request id to out when its response could
 * not be appended (r: -1, over the frame limit, size bytes; -2: out of memory); was_ok:
 * the response was an OK one (one more error). Returns close_after, or true when not even
 * that could be appended. */
static bool append_fallback(ta_service *svc, uint64_t id, int r, size_t size, bool was_ok,
                            bool close_after, ta_frame_buf *out)
{
	char msg[256];
	if (r == -1)
		snprintf(msg, sizeof(msg),
		         "the response needs %zu bytes, over the frame limit of %" PRIu32
		         " bytes (max_frame)",
		         size, svc->max_frame);
	else
		snprintf(msg, sizeof(msg), "out of memory encoding a response of %zu bytes", size);
	ta_reply_msg small = {.id = id, .status = TA_RESOURCE_EXHAUSTED, .message = msg};
	if (was_ok) /* an answer that became an error */
		ta_counter_add(&ta_service_my_totals(svc)->errors, 1);
	if (ta_codec_append(&small, svc->max_frame, out, NULL) != 0) {
		ta_log(TA_LOG_ERR, "cannot encode a response: out of memory");
		return true;
	}
	return close_after;
}

/* Appends m through the codec to out (the fallback when it cannot be); returns close_after,
 * or true when nothing could be appended. Inlined: every answer takes it. */
static inline __attribute__((always_inline)) bool append_msg(ta_service *svc, const ta_reply_msg *m,
                                                             bool close_after, ta_frame_buf *out)
{
	size_t size = 0;
	int r = ta_codec_append(m, svc->max_frame, out, &size);
	return r == 0 ? close_after
	              : append_fallback(svc, m->id, r, size, m->status == TA_OK, close_after, out);
}

bool ta_dispatch_error_append(ta_service *svc, uint64_t id, ta_status code, const char *msg,
                              bool close_after, ta_frame_buf *out)
{
	ta_reply_msg m = {.id = id, .status = (int32_t)code, .message = msg};
	ta_counter_add(&ta_service_my_totals(svc)->errors, 1);
	return append_msg(svc, &m, close_after, out);
}

/* Publishes the counts h holds into the metrics, and into the service's totals too when
 * totals (a run's kept requests, which nothing else counted); empties h. */
static void held_publish(ta_service *svc, ta_metrics_held *h, bool totals)
{
	if (h->requests == 0)
		return;
	if (totals) {
		ta_service_totals *t = ta_service_my_totals(svc);
		ta_counter_add(&t->requests, h->requests);
		ta_counter_add(&t->elements, h->elements);
	}
	ta_metrics_add_held(&svc->metrics, h);
}

/* Counts rc's answer (outcome st, bytes_out bytes appended): an OK answer into h when h is
 * non-NULL (after publishing, with totals as held_publish, what h holds of another kind),
 * anything else recorded at once. h is for untimed requests only. */
static inline __attribute__((always_inline)) void count_answer(ta_service *svc, const resp_ctx *rc,
                                                               ta_status st, size_t bytes_out,
                                                               ta_metrics_held *h, bool totals)
{
	if (h && st == TA_OK) {
		if (h->requests && h->kind != rc->req_kind)
			held_publish(svc, h, totals);
		h->kind = rc->req_kind;
		h->requests++;
		h->elements += rc->elements;
		h->bytes_in += rc->bytes_in;
		h->bytes_out += bytes_out;
	} else {
		ta_metrics_record(&svc->metrics, rc->req_kind, st != TA_OK, rc->elements,
		                  rc->bytes_in, bytes_out,
		                  ta_metrics_since(svc->time_requests, &rc->t0));
	}
}

/* finish_reply without the counting: appends rc's answer (outcome st) to out; returns
 * close_after. Inlined into its two callers (every answer takes it). */
static inline __attribute__((always_inline)) bool append_reply(ta_service *svc, resp_ctx *rc,
                                                               ta_status st, ta_frame_buf *out)
{
	if (st != TA_OK) {
		if (rc->err.code == TA_OK) /* a path that forgot its message */
			ta_error_set(&rc->err, st, "%s failed", ta_status_name(st));
		ta_counter_add(&ta_service_my_totals(svc)->errors, 1);
		ta_log(TA_LOG_DEBUG, "request %" PRIu64 " (%s): %s: %s", rc->id,
		       ta_req_name(rc->req_kind), ta_status_name(st), rc->err.msg);
		if (rc->ctl && rc->ctl->resp.body_case == TILEATOM__RESPONSE__BODY_HELLO) {
			/* a refused Hello still says which version the daemon speaks */
			rc->ctl->resp.status = (Tileatom__Status)st;
			rc->ctl->resp.message = rc->err.msg;
		} else {
			resp_ctx_free(rc); /* a body built before the error (a list) goes */
			rc->ctl = NULL;
			rc->msg = (ta_reply_msg){
			    .id = rc->id, .status = (int32_t)st, .message = rc->err.msg};
		}
	}
	rc->msg.id = rc->id;
	/* a control-plane body through protobuf-c, anything else through the codec */
	bool close_after = rc->close_after;
	if (!rc->ctl)
		return append_msg(svc, &rc->msg, close_after, out);
	int r = ta_frame_append(&rc->ctl->resp.base, svc->max_frame, out);
	if (r != 0)
		close_after = append_fallback(
		    svc, rc->id, r, protobuf_c_message_get_packed_size(&rc->ctl->resp.base),
		    rc->ctl->resp.status == TILEATOM__STATUS__OK, close_after, out);
	return close_after;
}

bool finish_reply(ta_service *svc, resp_ctx *rc, ta_status st, ta_frame_buf *out)
{
	size_t out_before = out->len;
	bool close_after = append_reply(svc, rc, st, out);
	/* held in the scratch: a run's kept requests, counted at its end, totals included */
	count_answer(svc, rc, st, out->len - out_before, rc->hold_in ? &rc->hold_in->held : NULL,
	             true);
	resp_ctx_free(rc);
	return close_after;
}

void group_calls(dispatch_group *g)
{
	for (int i = 0; i < g->n; i++) {
		resp_ctx *rc = &g->rcs[i];
		g->calls[i] = (ta_apply_call){rc->held->mem, (size_t)rc->held->bytes,
		                              &rc->plan,     &g->results[i],
		                              &rc->err,      TA_OK};
	}
}

void group_flush(dispatch_group *g)
{
	if (g->n == 0)
		return;
	group_calls(g);
	ta_backend_apply_many(g->svc->backend, g->calls, (size_t)g->n);
	group_answer(g);
}

void group_answer(dispatch_group *g)
{
	ta_service *svc = g->svc;
	uint64_t elements = 0;
	/* untimed OK answers counted into the metrics together, at kind changes and at the end
	 * (the group's paths count the totals themselves) */
	ta_metrics_held held = {0};
	ta_metrics_held *hold = svc->time_requests ? NULL : &held;
	for (int i = 0; i < g->n; i++) {
		resp_ctx *rc = &g->rcs[i];
		ta_status st = g->calls[i].status;
		elements += (uint64_t)rc->plan.count;
		rc->elements = (uint64_t)rc->plan.count;
		if (st == TA_OK)
			plan_body(rc, &rc->plan, &g->results[i], rc->kind);
		if (!rc->held_shared)
			ta_tile_unref(rc->held);
		size_t out_before = g->out->len;
		if (append_reply(svc, rc, st, g->out))
			g->close_after = true;
		count_answer(svc, rc, st, g->out->len - out_before, hold, false);
		resp_ctx_free(rc);
	}
	held_publish(svc, &held, false);
	if (elements) /* one add a group */
		ta_counter_add(&ta_service_my_totals(svc)->elements, elements);
	g->n = 0;
}

void resp_ctx_free(resp_ctx *rc)
{
	if (!rc->ctl)
		return;
	free(rc->ctl->list_items);
	free(rc->ctl->list_ptrs);
	free(rc->ctl->list_infos);
	rc->ctl->list_items = NULL;
	rc->ctl->list_ptrs = NULL;
	rc->ctl->list_infos = NULL;
}

void held_flush(ta_service *svc, ta_dispatch_scratch *scratch)
{
	held_publish(svc, &scratch->held, true);
}

void ta_dispatch_begin_run(ta_service *svc, ta_dispatch_scratch *scratch)
{
	scratch->hold_metrics = !svc->time_requests;
	scratch->pinning = true;
	if (svc->persist)
		scratch->in_run = true;
}

uint64_t ta_dispatch_end_run(ta_service *svc, ta_dispatch_scratch *scratch)
{
	held_flush(svc, scratch);
	scratch->hold_metrics = false;
	scratch->pinning = false;
	ta_tile_unref(scratch->pin); /* a destroyed tile's memory goes now */
	scratch->pin = NULL;
	if (!scratch->in_run)
		return 0;
	scratch->in_run = false;
	return ta_persist_run_end(svc->persist, &scratch->run);
}
