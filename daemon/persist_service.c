/* persist_service.c: joins durability (persist_*.c) to the daemon's dispatch: opens a data
 * directory on a service's registry and backend and replays the logged requests through
 * dispatch, so that those files do not depend on dispatch (which calls into it). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdatomic.h>
#include <string.h>

#include "dispatch.h"
#include "persist.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"

/* The replay callback's state. */
typedef struct replay_ctx {
	ta_service *svc;             /* the service the requests run on */
	ta_dispatch_scratch scratch; /* dispatch's reusable buffers */
} replay_ctx;

/* Runs one logged request through dispatch, acting for who again (a session past its
 * handshake with that identity; none for TA_OWNER_ANY, the in-process callers); an answer
 * other than OK is an error. */
static ta_status replay_request(void *arg, ta_owner who, const uint8_t *payload, size_t len,
                                ta_error *err)
{
	replay_ctx *ctx = arg;
	ta_frame_buf out = {NULL, 0, 0};
	bool close_after = false;
	ta_session session;
	memset(&session, 0, sizeof(session));
	session.hello_done = true;
	session.authenticated = who == TA_OWNER_SECRET;
	session.identity = who == TA_OWNER_SECRET ? TA_OWNER_PUBLIC : who;
	(void)ta_dispatch_run_session(ctx->svc, &ctx->scratch,
	                              who == TA_OWNER_ANY ? NULL : &session, payload, len, -1, &out,
	                              &close_after);
	ta_status st = TA_OK;
	Tileatom__Response *resp = out.len > TA_FRAME_HEADER
	                               ? tileatom__response__unpack(NULL, out.len - TA_FRAME_HEADER,
	                                                            out.data + TA_FRAME_HEADER)
	                               : NULL;
	if (!resp)
		st = ta_error_set(err, TA_INTERNAL, "no answer could be decoded");
	else if (resp->status != TILEATOM__STATUS__OK)
		st = ta_error_set(err, (ta_status)resp->status, "%s: %s",
		                  ta_status_name((ta_status)resp->status), resp->message);
	if (resp)
		tileatom__response__free_unpacked(resp, NULL);
	ta_frame_buf_free(&out);
	return st;
}

ta_status ta_persist_open(ta_persist **out, const char *dir, const ta_persist_settings *set,
                          ta_service *svc, ta_error *err)
{
	replay_ctx ctx = {.svc = svc};
	ta_dispatch_scratch_init(&ctx.scratch);
	ta_persist_host host = {svc->registry, svc->backend, replay_request, &ctx};
	svc->replaying = true;
	ta_status st = ta_persist_start(out, dir, set, &host, err);
	svc->replaying = false;
	ta_dispatch_scratch_free(&ctx.scratch);
	if (st == TA_OK) {
		/* the replayed requests are not this run's */
		ta_service_reset_totals(svc);
	}
	return st;
}
