/* persist_log.c: the log of tileatomd's durability (see persist.h, and persist_int.h for
 * the files): mutation locks (stripes) and pipelined runs, appends, the writer thread (group
 * commit), the everysec fsync thread, failure handling, the listing of the log files and the
 * loop's wake-up.
 *
 * Records are appended to p->buf under p->mu and numbered then (a run's, together, when the
 * run is flushed). The writer takes the whole buffer, fills in the checksums (off the
 * threads that apply requests), writes it, fdatasyncs it (always) and wakes the loop. With
 * everysec / no the writer lets records gather GATHER_MS first, and with everysec a syncer
 * thread fdatasyncs once a second. A compaction asks the writer to start the next log.
 *
 * Failure (a full disk, a file size limit, an I/O error): a failed write is cut back to the
 * last whole record and persistence is marked failed: mutations are refused with UNAVAILABLE
 * naming the problem ("persistence log write failed: No space left on device"), reads go on;
 * the error is logged once, the refusals once per 10 s with a count.
 *   --fsync always: the records not yet written are dropped and the connections whose
 *     responses waited for them get one error response (id 0) and are closed: no request
 *     is acknowledged whose record is not durable. The failure lasts until a restart.
 *   everysec / no: the records (already acknowledged) stay in the buffer and the writer
 *     tries again once a second; when a write succeeds, mutations are accepted again.
 *   A failed fsync is not retried (the kernel may have dropped the pages): it lasts until a
 *   restart in every mode.
 *
 * Backpressure: an append that would pass the bound on the records waiting for the writer
 * (ta_persist_set_buffer_max) waits until the writer has taken the buffer, so that a disk
 * slower than the requests slows the requests instead of growing memory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "persist_int.h"

/* everysec / no: how long the writer lets records gather before one write (ms), unless
 * GATHER_BYTES wait: fewer system calls, for about this much more lost to a kill -9. */
#define GATHER_MS    2
#define GATHER_BYTES (1u << 20)

/* The fsync modes' names, by mode. */
static const char *const fsync_names[] = {
    [TA_FSYNC_ALWAYS] = "always", [TA_FSYNC_EVERYSEC] = "everysec", [TA_FSYNC_NO] = "no"};

int ta_fsync_mode_parse(const char *text, ta_fsync_mode *out)
{
	for (size_t m = 0; m < sizeof(fsync_names) / sizeof(fsync_names[0]); m++)
		if (strcmp(text, fsync_names[m]) == 0) {
			*out = (ta_fsync_mode)m;
			return 0;
		}
	return -1;
}

const char *ta_fsync_mode_name(ta_fsync_mode mode)
{
	return (unsigned)mode < sizeof(fsync_names) / sizeof(fsync_names[0]) ? fsync_names[mode]
	                                                                     : "?";
}

/* Writer: fills the checksums (the payload's, then the header's) of the records at
 * buf[0, n), off the threads that apply requests. */
static void seal_records(uint8_t *buf, size_t n)
{
	for (size_t off = 0; off + REC_HEADER <= n;) {
		uint8_t *h = buf + off;
		uint32_t len = get_u32(h);
		put_u32(h + 20, sum32(h + REC_HEADER, len));
		put_u32(h + 24, sum32(h, 24));
		off += REC_HEADER + (size_t)len;
	}
}

/* Waits on cond until ms from now (CLOCK_MONOTONIC; mu held). */
static void wait_ms(pthread_cond_t *cond, pthread_mutex_t *mu, uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + ms * 1000000u;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	pthread_cond_timedwait(cond, mu, &ts);
}

/* Wakes the loop (mu held). */
static void notify_loop(ta_persist *p)
{
	if (p->attached)
		uv_async_send(&p->async);
}

/* Refused mutations, logged at most once per 10 s with a count. */
static ta_log_limit refused_limit = TA_LOG_LIMIT_INIT(10, "mutations refused (persistence failed)");

void persist_set_failed(ta_persist *p, const char *what, int errnum, bool final)
{
	if (final)
		p->fail_final = true;
	if (!atomic_load(&p->failed)) {
		snprintf(p->fail_msg, sizeof(p->fail_msg), "%s: %s", what, strerror(errnum));
		atomic_store(&p->failed, true);
		ta_log(TA_LOG_ERR, "data directory %s: %s; mutations are refused %s", p->dir,
		       p->fail_msg,
		       p->fail_final ? "until the daemon is restarted"
		                     : "until a write succeeds again (tried once a second)");
	}
	pthread_cond_broadcast(&p->drained);
	notify_loop(p);
}

int persist_create_log(ta_persist *p, uint64_t first)
{
	char name[64];
	snprintf(name, sizeof(name), LOG_NAME_FORMAT, first);
	return persist_new_file(p, NULL, name, O_WRONLY | O_APPEND, LOG_MAGIC, MAGIC_LEN);
}

/* scandirat's filter: the logs' names, "log-<16 hex digits>.tal". */
static int is_log_name(const struct dirent *e)
{
	uint64_t s;
	char tail[8];
	return sscanf(e->d_name, "log-%16" SCNx64 ".%3s", &s, tail) == 2 &&
	       strcmp(tail, "tal") == 0 && strlen(e->d_name) == 24;
}

/* qsort order of log files: by first sequence number. */
static int log_file_cmp(const void *a, const void *b)
{
	const log_file *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

ta_status persist_list_logs(ta_persist *p, log_file **out, size_t *n, ta_error *err)
{
	struct dirent **names = NULL;
	int found = scandirat(p->dir_fd, ".", &names, is_log_name, NULL);
	if (found < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot list %s: %s", p->dir,
		                    strerror(errno));
	*n = 0;
	*out = calloc(found ? (size_t)found : 1, sizeof(**out));
	for (int i = 0; i < found; i++) {
		log_file *lf = *out ? &(*out)[*n] : NULL; /* the filter checked it: 24 bytes */
		if (lf && sscanf(names[i]->d_name, "log-%16" SCNx64, &lf->first) == 1) {
			memcpy(lf->name, names[i]->d_name, 25);
			(*n)++;
		}
		free(names[i]);
	}
	free(names);
	if (!*out)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	qsort(*out, *n, sizeof(**out), log_file_cmp);
	return TA_OK;
}

/* A logmark write failed (errno e; mu held): logged, at most once per 10 s. Not a failure
 * of persistence: the mark stays behind the log, which is never wrong (a mark only ever
 * says less than is durable), only less of a cut can be told at the next start. */
static ta_log_limit mark_limit = TA_LOG_LIMIT_INIT(10, "logmark writes failed");
static void mark_failed(ta_persist *p, int e)
{
	ta_log_limited(&mark_limit, TA_LOG_WARNING,
	               "data directory %s: cannot write the logmark: %s (a log cut short would "
	               "not be told from a crash until it is written again)",
	               p->dir, strerror(e));
}

/* Writer: fsyncs and closes the current log, starts the next at p->next_seq (mu held). */
static void writer_rotate(ta_persist *p)
{
	uint64_t first = p->next_seq;
	p->compact_at = p->compact_size;
	if (first == p->log_first)
		return; /* nothing was appended to the current log: it goes on */
	pthread_mutex_unlock(&p->mu);
	int fd = -1, e = 0;
	if (p->log_fd >= 0 && fdatasync(p->log_fd) != 0)
		e = errno;
	else if ((fd = persist_create_log(p, first)) < 0)
		e = errno;
	/* the logmark moves to the new log before anything is appended to it */
	int me = e == 0 ? persist_mark_write(p, first, MAGIC_LEN, first - 1, false) : 0;
	pthread_mutex_lock(&p->mu);
	if (e != 0) {
		persist_set_failed(p, "persistence log rotation failed", e, true);
		return;
	}
	if (me != 0)
		mark_failed(p, me);
	if (p->log_fd >= 0)
		close(p->log_fd);
	p->log_fd = fd;
	p->log_first = first;
	p->log_bytes = MAGIC_LEN;
	p->written_seq = first - 1;
	atomic_store(&p->durable_seq, first - 1);
}

/* Writer: swaps the log's buffer (p->buf, p->cap; mu held) with its own (*wbuf, *wcap). */
static void swap_buf(ta_persist *p, uint8_t **wbuf, size_t *wcap)
{
	uint8_t *b = p->buf;
	size_t cap = p->cap;
	p->buf = *wbuf;
	p->cap = *wcap;
	*wbuf = b;
	*wcap = cap;
}

bool persist_grow(uint8_t **buf, size_t *cap, size_t want, size_t first, size_t limit)
{
	if (*cap >= want)
		return true;
	size_t c = *cap ? *cap : first;
	while (c < want)
		c *= 2;
	if (limit && c > limit)
		c = limit;
	uint8_t *nb = realloc(*buf, c);
	if (!nb)
		return false;
	*buf = nb;
	*cap = c;
	return true;
}

/* Writer, after a failed write of the n bytes at wbuf (mu held): cuts the log back to its
 * last whole record; with always drops the records, else puts them back for the next try. */
static void writer_failed(ta_persist *p, const char *what, int e, uint8_t **wbuf, size_t *wcap,
                          size_t n)
{
	if (p->log_fd >= 0 && ftruncate(p->log_fd, (off_t)p->log_bytes) != 0) {
		persist_set_failed(p, "persistence log write failed and could not be cut back",
		                   errno, true);
		return;
	}
	persist_set_failed(p, what, e, p->mode == TA_FSYNC_ALWAYS);
	if (p->fail_final)
		return;
	if (!persist_grow(wbuf, wcap, n + p->len, 1, 0)) {
		persist_set_failed(p, "out of memory for the log records to retry", ENOMEM, true);
		return;
	}
	if (p->len)
		memcpy(*wbuf + n, p->buf, p->len);
	swap_buf(p, wbuf, wcap);
	p->len += n;
	if (p->len > p->buf_high)
		p->buf_high = p->len;
}

void *persist_writer_main(void *arg)
{
	ta_persist *p = arg;
	uint8_t *wbuf = NULL;
	size_t wcap = 0;
	bool gathered = false;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		bool failed = atomic_load(&p->failed);
		if (p->rotate && (failed || p->len == 0)) {
			/* every record written: the next log; none while writing fails (the
			 * snapshot reports the failure) */
			if (!failed)
				writer_rotate(p);
			gathered = false;
			p->rotate = false;
			pthread_cond_broadcast(&p->rotated);
			continue;
		}
		/* after a failed write, a second before the next try; else let more records come
		 * (appends do not signal while we are not idle) */
		bool retry = failed && !p->fail_final;
		if (p->len > 0 && !gathered && !p->stop &&
		    (retry || (p->mode != TA_FSYNC_ALWAYS && !p->rotate && p->len < GATHER_BYTES &&
		               p->drain_waiters == 0))) {
			gathered = true;
			wait_ms(&p->wake, &p->mu, retry ? 1000 : GATHER_MS);
			continue;
		}
		if (p->len > 0) {
			gathered = false;
			/* take the whole buffer: every record appended so far */
			size_t n = p->len;
			swap_buf(p, &wbuf, &wcap);
			p->len = 0;
			pthread_cond_broadcast(&p->drained);
			uint64_t hi = p->next_seq - 1;
			bool drop = failed && p->fail_final;
			pthread_mutex_unlock(&p->mu);
			if (!drop)
				seal_records(wbuf, n);
			int e = drop ? 0 : ta_write_all(p->log_fd, wbuf, n);
			bool sync_failed = e == 0 && !drop && p->mode == TA_FSYNC_ALWAYS &&
			                   fdatasync(p->log_fd) != 0;
			if (sync_failed)
				e = errno;
			const char *what = sync_failed ? "persistence log fsync failed"
			                               : "persistence log write failed";
			pthread_mutex_lock(&p->mu);
			if (e != 0 && p->stop && p->mode != TA_FSYNC_ALWAYS) {
				if (ftruncate(p->log_fd, (off_t)p->log_bytes) != 0)
					e = errno;
				ta_log(TA_LOG_ERR,
				       "data directory %s: %s: %s; stopping: %zu bytes of log "
				       "records (acknowledged with --fsync %s) are lost",
				       p->dir, what, strerror(e), n + p->len,
				       ta_fsync_mode_name(p->mode));
				p->len = 0;
			} else if (e != 0 && sync_failed) {
				persist_set_failed(p, what, e, true);
			} else if (e != 0) {
				writer_failed(p, what, e, &wbuf, &wcap, n);
			} else if (!drop) {
				if (failed && !p->fail_final) {
					atomic_store(&p->failed, false);
					ta_log(TA_LOG_NOTICE,
					       "data directory %s: the log is written again; "
					       "mutations are accepted",
					       p->dir);
				}
				p->log_bytes += n;
				p->written_seq = hi;
				p->written_total += n;
				if (p->mode == TA_FSYNC_ALWAYS) {
					atomic_store(&p->durable_seq, hi);
					notify_loop(p);
				}
				if (p->compact_size && p->log_bytes >= p->compact_at) {
					p->compact_at = p->log_bytes + p->compact_size;
					p->snap_wanted = true;
					pthread_cond_signal(&p->snap_cond);
				}
			}
			continue;
		}
		gathered = false;
		if (p->stop)
			break;
		p->writer_idle = true;
		pthread_cond_wait(&p->wake, &p->mu);
		p->writer_idle = false;
	}
	pthread_mutex_unlock(&p->mu);
	free(wbuf);
	return NULL;
}

/* The syncer thread (always, everysec): once a second, with everysec, fdatasyncs what the
 * writer wrote, on a duplicate of the log's descriptor (a rotation may close the original;
 * it fsyncs the old log itself), so that a slow fsync never holds records back in memory.
 * Then records in the logmark the length of the log now durable. */
void *persist_syncer_main(void *arg)
{
	ta_persist *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		wait_ms(&p->sync_cond, &p->mu, 1000);
		if (p->stop || atomic_load(&p->failed))
			continue;
		uint64_t first = p->log_first, bytes = p->log_bytes, last = p->written_seq;
		if (p->mode == TA_FSYNC_EVERYSEC && p->written_total != p->synced_total) {
			uint64_t target = p->written_total;
			int fd = dup(p->log_fd);
			pthread_mutex_unlock(&p->mu);
			int e = fd < 0 ? errno : fdatasync(fd) != 0 ? errno : 0;
			if (fd >= 0)
				close(fd);
			pthread_mutex_lock(&p->mu);
			if (e != 0) {
				persist_set_failed(p, "persistence log fsync failed", e, true);
				continue;
			}
			p->synced_total = target;
		}
		pthread_mutex_unlock(&p->mu);
		/* a no-op unless it says more than the mark (a rotation may have moved it on) */
		int e = persist_mark_write(p, first, bytes, last, false);
		pthread_mutex_lock(&p->mu);
		if (e != 0)
			mark_failed(p, e);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Stripe of a tile name (FNV-1a). */
static int stripe_of(const char *name)
{
	uint32_t h = 2166136261u;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = (h ^ *c) * 16777619u;
	return (int)(h & (TA_PERSIST_STRIPES - 1));
}

/* Takes stripe st alone (kind < 0) or shared with holders of the same kind. */
static void stripe_lock(ta_stripe *st, int kind)
{
	pthread_mutex_lock(&st->mu);
	bool now = st->holders == 0 || (kind >= 0 && st->kind == kind && st->waiting == 0);
	if (!now) {
		/* wait for it to be free, or for sharers of our kind that took it after we
		 * began to wait (not before: those came before whoever waits ahead of us) */
		uint64_t since = st->phase;
		st->waiting++;
		while (st->holders > 0 && !(kind >= 0 && st->kind == kind && st->phase != since))
			pthread_cond_wait(&st->cond, &st->mu);
		st->waiting--;
	}
	if (st->holders++ == 0) {
		st->phase++;
		st->kind = kind;
		if (st->waiting > 0 && kind >= 0)
			pthread_cond_broadcast(&st->cond); /* waiters of our kind may join */
	}
	pthread_mutex_unlock(&st->mu);
}

ta_status ta_persist_run_lock(ta_persist *p, ta_persist_run *run, const char *name, int kind,
                              ta_persist_hold *hold, ta_error *err)
{
	hold->run = run;
	hold->held = false;
	hold->kept = false;
	if (atomic_load(&p->failed)) {
		char why[sizeof(p->fail_msg)];
		bool final;
		pthread_mutex_lock(&p->mu);
		snprintf(why, sizeof(why), "%s", p->fail_msg);
		final = p->fail_final;
		pthread_mutex_unlock(&p->mu);
		ta_log_limited(&refused_limit, TA_LOG_WARNING, "mutation refused: %s", why);
		return ta_error_set(err, TA_UNAVAILABLE,
		                    "%s (data directory %s); mutations are refused %s", why, p->dir,
		                    final ? "until the daemon is restarted"
		                          : "until the log can be written again");
	}
	hold->kind = name ? kind : -1;
	hold->stripe = -1;
	if (name) /* the run's name saves the hash of the name */
		hold->stripe = run && run->hold.held && run->name[0] && strcmp(run->name, name) == 0
		                   ? run->hold.stripe
		                   : stripe_of(name);
	if (run && run->hold.held) {
		/* the run's lock serves when it is this stripe's, held alone or shared with
		 * this kind; any other goes (with the records made under it) first */
		if (hold->stripe >= 0 && run->hold.stripe == hold->stripe &&
		    (run->hold.kind < 0 || run->hold.kind == hold->kind)) {
			hold->kind = run->hold.kind;
			hold->held = true;
			hold->kept = true;
			return TA_OK;
		}
		ta_persist_run_release(p, run);
	}
	int lo = name ? hold->stripe : 0;
	int hi = name ? hold->stripe : TA_PERSIST_STRIPES - 1;
	for (int s = lo; s <= hi; s++)
		stripe_lock(&p->stripes[s], hold->kind);
	hold->held = true;
	if (run) /* a longer name, cut short here, never matches the full one */
		snprintf(run->name, sizeof(run->name), "%s", name ? name : "");
	return TA_OK;
}

/* Releases the stripes of hold (no run involved), waking their waiters. */
static void hold_release(ta_persist *p, ta_persist_hold *hold)
{
	int lo = hold->stripe >= 0 ? hold->stripe : 0;
	int hi = hold->stripe >= 0 ? hold->stripe : TA_PERSIST_STRIPES - 1;
	for (int s = hi; s >= lo; s--) {
		ta_stripe *st = &p->stripes[s];
		pthread_mutex_lock(&st->mu);
		if (--st->holders == 0 && st->waiting > 0)
			pthread_cond_broadcast(&st->cond);
		pthread_mutex_unlock(&st->mu);
	}
	hold->held = false;
}

void ta_persist_unlock(ta_persist *p, ta_persist_hold *hold)
{
	if (!hold->held)
		return;
	ta_persist_run *run = hold->run;
	if (run && hold->stripe >= 0) {
		/* the run keeps it (it is the run's already, or the run held none) */
		run->hold = *hold;
		run->hold.run = NULL;
		hold->held = false;
		return;
	}
	if (run) /* every stripe: the records made under it go to the log first */
		ta_persist_run_release(p, run);
	hold_release(p, hold);
}

/* Makes room for need more bytes in p->buf (mu held): first waits, while the records
 * waiting would pass the bound, for the writer to take the buffer (not while writing
 * fails: the failure refuses new mutations, so only those already past the lock come
 * here). False when memory is short (persistence is then marked failed). */
static bool buf_make_room(ta_persist *p, size_t need)
{
	while (p->buf_max && p->len > 0 && p->len + need > p->buf_max && !atomic_load(&p->failed) &&
	       !p->stop) {
		p->buf_waits++;
		p->drain_waiters++;
		pthread_cond_signal(&p->wake);
		pthread_cond_wait(&p->drained, &p->mu);
		p->drain_waiters--;
	}
	if (persist_grow(&p->buf, &p->cap, p->len + need, 65536, 0))
		return true;
	persist_set_failed(p, "persistence log record could not be buffered", ENOMEM, true);
	return false;
}

/* Fills the header of a record at h but its sequence number (log_put) and checksums. */
static void put_header(uint8_t *h, uint32_t len, ta_owner who)
{
	put_u32(h, len);
	put_u64(h + 12, (uint64_t)who);
}

/* Copies whole records, without their sequence numbers (alen bytes at a, then blen at b),
 * to the log's buffer and numbers them; wakes the writer when it waits. Returns the last
 * one's number, or 0 when memory is short (persistence is then marked failed). */
static uint64_t log_put(ta_persist *p, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	pthread_mutex_lock(&p->mu);
	if (!buf_make_room(p, alen + blen)) {
		pthread_mutex_unlock(&p->mu);
		return 0;
	}
	uint8_t *dst = p->buf + p->len;
	memcpy(dst, a, alen);
	if (blen)
		memcpy(dst + alen, b, blen);
	for (size_t off = 0; off < alen + blen; off += REC_HEADER + (size_t)get_u32(dst + off))
		put_u64(dst + off + 4, p->next_seq++);
	p->len += alen + blen;
	if (p->len > p->buf_high)
		p->buf_high = p->len;
	if (p->writer_idle)
		pthread_cond_signal(&p->wake);
	uint64_t last = p->next_seq - 1;
	pthread_mutex_unlock(&p->mu);
	return last;
}

uint64_t ta_persist_append(ta_persist *p, ta_owner who, const uint8_t *payload, size_t len,
                           ta_error *err)
{
	if (len > UINT32_MAX) {
		ta_error_set(err, TA_INTERNAL, "a request of %zu bytes cannot be logged", len);
		return 0;
	}
	uint8_t h[REC_HEADER] = {0};
	put_header(h, (uint32_t)len, who);
	uint64_t seq = log_put(p, h, REC_HEADER, payload, len);
	if (seq == 0)
		ta_error_set(err, TA_INTERNAL,
		             "the request was applied but its log record could not be "
		             "buffered (out of memory); mutations are refused from now on");
	return seq;
}

void ta_persist_run_init(ta_persist_run *run)
{
	memset(run, 0, sizeof(*run));
}

/* Appends the records of run to the log, numbering them under one lock of the log; marks
 * the run lost when memory is short. */
static void run_flush(ta_persist *p, ta_persist_run *run)
{
	if (run->len == 0)
		return;
	uint64_t last = log_put(p, run->buf, run->len, NULL, 0);
	if (last == 0) {
		ta_log(TA_LOG_ERR,
		       "%zu bytes of log records of applied requests could not be buffered (out "
		       "of memory): their responses are withheld",
		       run->len);
		run->lost = true;
	} else {
		run->last_seq = last;
	}
	run->len = 0;
}

/* Keeps the record of a request (len bytes at payload, acting for who) in run, behind
 * those before it; false when it does not go in (too large, or memory is short). */
static bool run_add(ta_persist *p, ta_persist_run *run, ta_owner who, const uint8_t *payload,
                    size_t len)
{
	/* at most TA_PERSIST_RUN_BYTES, or the bound on the log buffer when that is smaller */
	size_t limit = p->buf_max && p->buf_max < TA_PERSIST_RUN_BYTES ? (size_t)p->buf_max
	                                                               : TA_PERSIST_RUN_BYTES;
	if (len > limit || REC_HEADER + len > limit)
		return false;
	size_t need = REC_HEADER + len;
	if (run->len + need > limit)
		run_flush(p, run);
	if (!persist_grow(&run->buf, &run->cap, run->len + need, 4096, limit))
		return false;
	uint8_t *h = run->buf + run->len;
	put_header(h, (uint32_t)len, who);
	memcpy(h + REC_HEADER, payload, len);
	run->len += need;
	return true;
}

ta_status ta_persist_record(ta_persist *p, ta_persist_hold *hold, ta_owner who,
                            const uint8_t *payload, size_t len, uint64_t *seq, ta_error *err)
{
	ta_persist_run *run = hold->run;
	*seq = 0;
	if (run && run_add(p, run, who, payload, len))
		return TA_OK;
	if (run)
		run_flush(p, run); /* the records before it go first */
	*seq = ta_persist_append(p, who, payload, len, err);
	if (*seq == 0)
		return err->code != TA_OK ? err->code : TA_INTERNAL;
	if (run && *seq > run->last_seq)
		run->last_seq = *seq;
	return TA_OK;
}

void ta_persist_run_release(ta_persist *p, ta_persist_run *run)
{
	run_flush(p, run);
	if (run->hold.held)
		hold_release(p, &run->hold);
	run->name[0] = '\0';
	run->checked = NULL;
}

uint64_t ta_persist_run_end(ta_persist *p, ta_persist_run *run)
{
	ta_persist_run_release(p, run);
	uint64_t seq = run->lost ? TA_PERSIST_SEQ_LOST : run->last_seq;
	run->lost = false;
	run->last_seq = 0;
	return seq;
}

void ta_persist_run_free(ta_persist_run *run)
{
	free(run->buf);
	ta_persist_run_init(run);
}

void ta_persist_fail(ta_persist *p, const char *what)
{
	pthread_mutex_lock(&p->mu);
	persist_set_failed(p, what, EIO, true);
	pthread_mutex_unlock(&p->mu);
}

int ta_persist_durable(ta_persist *p, uint64_t seq)
{
	if (seq == TA_PERSIST_SEQ_LOST)
		return -1; /* a run's records could not be buffered */
	if (p->mode != TA_FSYNC_ALWAYS)
		return 1; /* acknowledged at once; a failed write is retried */
	if (atomic_load(&p->durable_seq) >= seq)
		return 1;
	return atomic_load(&p->failed) ? -1 : 0;
}

void ta_persist_failure(ta_persist *p, char *buf, size_t n)
{
	pthread_mutex_lock(&p->mu);
	snprintf(buf, n, "%s", atomic_load(&p->failed) ? p->fail_msg : "");
	pthread_mutex_unlock(&p->mu);
}

void ta_persist_set_buffer_max(ta_persist *p, uint64_t bytes)
{
	pthread_mutex_lock(&p->mu);
	p->buf_max = bytes;
	pthread_mutex_unlock(&p->mu);
}

void ta_persist_buffer_stats(ta_persist *p, uint64_t *high, uint64_t *waits)
{
	pthread_mutex_lock(&p->mu);
	*high = p->buf_high;
	*waits = p->buf_waits;
	pthread_mutex_unlock(&p->mu);
}

/* uv_async callback: records became durable. */
static void on_async(uv_async_t *handle)
{
	ta_persist *p = handle->data;
	if (p->cb)
		p->cb(p->cb_arg);
}

int ta_persist_attach(ta_persist *p, uv_loop_t *loop, void (*cb)(void *arg), void *arg)
{
	p->cb = cb;
	p->cb_arg = arg;
	int rc = uv_async_init(loop, &p->async, on_async);
	if (rc != 0)
		return rc;
	p->async.data = p;
	uv_unref((uv_handle_t *)&p->async);
	pthread_mutex_lock(&p->mu);
	p->attached = true;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

void ta_persist_detach(ta_persist *p)
{
	pthread_mutex_lock(&p->mu);
	bool was = p->attached;
	p->attached = false;
	pthread_mutex_unlock(&p->mu);
	if (was)
		uv_close((uv_handle_t *)&p->async, NULL);
}
