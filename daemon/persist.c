/* persist.c: the start and close of tileatomd's durability (see persist.h): the state and
 * its locks, startup recovery (persist_load.c) replaying the logged requests through the
 * daemon's dispatch, the log's writer and fsync threads (persist_log.c) and the compactor
 * (persist_snapshot.c); at close, the threads stopped, the log synced and the logmark written
 * for a clean stop. The one file above the other persist_*.c files, and the only one that
 * depends on dispatch (which calls into them). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dispatch.h"
#include "log.h"
#include "persist_int.h"
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
	ta_session session = {.hello_done = true, .authenticated = who == TA_OWNER_SECRET};
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

/* Starts a thread of p running fn; *started tells ta_persist_close to join it. */
static ta_status start_thread(pthread_t *thread, void *(*fn)(void *), ta_persist *p, bool *started,
                              const char *what, ta_error *err)
{
	int rc = pthread_create(thread, NULL, fn, p);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "cannot start %s: %s", what, strerror(rc));
	*started = true;
	return TA_OK;
}

ta_status ta_persist_open(ta_persist **out, const char *dir, const ta_persist_settings *set,
                          ta_service *svc, ta_error *err)
{
	*out = NULL;
	ta_persist *p = calloc(1, sizeof(*p));
	if (!p)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	p->dir_fd = p->lock_fd = p->log_fd = p->mark_fd = -1;
	p->mode = set->mode;
	p->compact_size = set->compact_size;
	p->compact_at = set->compact_size;
	p->accept_log_loss = set->accept_log_loss;
	p->buf_max = TA_PERSIST_DEFAULT_BUFFER_MAX;
	p->registry = svc->registry;
	p->backend = svc->backend;
	p->dir = strdup(dir);
	pthread_condattr_t cattr; /* the timed waits (wake, sync_cond) measure CLOCK_MONOTONIC */
	bool ok = p->dir && pthread_condattr_init(&cattr) == 0 &&
	          pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC) == 0;
	for (int s = 0; ok && s < TA_PERSIST_STRIPES; s++)
		ok = pthread_mutex_init(&p->stripes[s].mu, NULL) == 0 &&
		     pthread_cond_init(&p->stripes[s].cond, NULL) == 0;
	pthread_mutex_t *mutexes[] = {&p->mu, &p->snap_mu, &p->mark_mu};
	pthread_cond_t *conds[] = {&p->wake, &p->rotated, &p->snap_cond, &p->drained,
	                           &p->sync_cond};
	for (size_t i = 0; ok && i < sizeof(mutexes) / sizeof(mutexes[0]); i++)
		ok = pthread_mutex_init(mutexes[i], NULL) == 0;
	for (size_t i = 0; ok && i < sizeof(conds) / sizeof(conds[0]); i++)
		ok = pthread_cond_init(conds[i], &cattr) == 0;
	if (!ok) {
		/* a failed start exits the daemon: the primitives are not torn down */
		free(p->dir);
		free(p);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "cannot initialise the persistence locks");
	}
	pthread_condattr_destroy(&cattr);
	replay_ctx ctx = {.svc = svc};
	ta_dispatch_scratch_init(&ctx.scratch);
	p->replay = replay_request;
	p->replay_arg = &ctx;
	svc->replaying = true;
	ta_status st = persist_recover(p, err);
	svc->replaying = false;
	ta_dispatch_scratch_free(&ctx.scratch);
	if (st == TA_OK)
		st = start_thread(&p->writer, persist_writer_main, p, &p->writer_started,
		                  "the log writer", err);
	if (st == TA_OK && p->mode != TA_FSYNC_NO)
		st = start_thread(&p->syncer, persist_syncer_main, p, &p->syncer_started,
		                  "the fsync thread", err);
	if (st == TA_OK && p->compact_size)
		st = start_thread(&p->compactor, persist_compactor_main, p, &p->compactor_started,
		                  "the compactor", err);
	if (st != TA_OK) {
		ta_persist_close(p);
		return st;
	}
	p->started = true;
	ta_service_reset_totals(svc); /* the replayed requests are not this run's */
	if (p->loss_accepted) {
		/* a snapshot now, so that the next start finds no loss to accept again */
		ta_persist_snapinfo info;
		ta_error serr = {0};
		if (ta_persist_snapshot(p, &info, &serr) != TA_OK)
			ta_log(
			    TA_LOG_ERR,
			    "data directory %s: the snapshot after the accepted loss failed: %s; "
			    "the next start will find the loss again",
			    p->dir, serr.msg);
	}
	*out = p;
	return TA_OK;
}

void ta_persist_close(ta_persist *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->wake);
	pthread_cond_broadcast(&p->snap_cond);
	pthread_cond_broadcast(&p->sync_cond);
	pthread_cond_broadcast(&p->drained);
	pthread_mutex_unlock(&p->mu);
	if (p->syncer_started)
		pthread_join(p->syncer, NULL);
	if (p->compactor_started)
		pthread_join(p->compactor, NULL);
	if (p->writer_started)
		pthread_join(p->writer, NULL);
	if (p->log_fd >= 0) {
		bool whole = p->started && !atomic_load(&p->failed);
		if (whole && fdatasync(p->log_fd) != 0) {
			ta_log(TA_LOG_ERR, "cannot fsync the log in %s: %s", p->dir,
			       strerror(errno));
			whole = false;
		}
		/* a clean stop: the logmark covers every record */
		int e =
		    whole ? persist_mark_write(p, p->log_first, p->log_bytes, p->written_seq, false)
		          : 0;
		if (e != 0)
			ta_log(TA_LOG_ERR, "cannot write the logmark in %s: %s", p->dir,
			       strerror(e));
		close(p->log_fd);
	}
	int fds[] = {p->mark_fd, p->lock_fd, p->dir_fd};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (int s = 0; s < TA_PERSIST_STRIPES; s++) {
		pthread_mutex_destroy(&p->stripes[s].mu);
		pthread_cond_destroy(&p->stripes[s].cond);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->snap_mu);
	pthread_mutex_destroy(&p->mark_mu);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->rotated);
	pthread_cond_destroy(&p->snap_cond);
	pthread_cond_destroy(&p->sync_cond);
	pthread_cond_destroy(&p->drained);
	free(p->buf);
	free(p->dir);
	free(p);
}
