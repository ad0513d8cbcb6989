/* persist.c: snapshot, append-only log, replay and compaction of tileatomd's tiles (see
 * persist.h).
 *
 * Files (all integers little-endian; a checksum is the low 32 bits of xxHash's XXH3-64):
 *   snapshot.tas  "TASNAP03", u64 seq (last record included), u32 tile count, then per tile
 *                 u16 name length, name, i64 owner (ta_owner: TA_OWNER_PUBLIC or the
 *                 identity a private tile belongs to), u32 dtype, u32 rank, i64
 *                 extents[rank], u64 bytes, the elements (row-major); then u32 checksum of
 *                 everything before it. Written as snapshot.tas.tmp, fsynced, renamed,
 *                 directory fsynced.
 *   log-<16 hex digits>.tal  (the digits: the sequence number of its first record)
 *                 "TALOG003", then records: u32 payload length, u64 seq, i64 who (the
 *                 identity the request acted for: replay acts for it again, so that private
 *                 tiles keep their owner), u32 checksum of the payload, u32 checksum of the 24
 *                 bytes before it, the payload (the Request as it came on the wire, without
 *                 the frame's length prefix).
 *   lock          flock'ed while a daemon uses the directory.
 *
 * Happy path of a mutation: dispatch takes the stripe lock of its tile (ta_persist_lock),
 * applies the request, appends the record to p->buf under p->mu (sequence numbers are given
 * in append order), drops the lock. In a pipelined run (ta_persist_run) the lock is kept
 * while the next request needs the same one, and the records wait, without their sequence
 * numbers, in the run's buffer; they are copied to p->buf together, numbered there under
 * p->mu, before the lock is released (run_flush). The writer thread takes the whole buffer,
 * fills in the records' checksums (seal_records: off the threads that apply requests),
 * writes it, fdatasyncs it (always) and wakes the loop (uv_async_t), where held responses
 * leave. With everysec the writer only writes (letting records gather GATHER_MS first) and
 * a syncer thread fdatasyncs once a second.
 *
 * Compaction (a snapshot request, or the log passing compact_size): every stripe is held
 * alone, so no mutation is half done; the tiles are read through the backend (LOAD plans:
 * on CUDA a copy from the device) into the temporary snapshot; the writer is told to close
 * the log (after writing what it holds) and start the next one at seq + 1; the stripes are
 * released; the snapshot is fsynced and renamed; older logs are removed. A crash at any
 * point leaves either the old snapshot and every log, or the new snapshot and logs whose
 * records it partly covers (skipped on replay).
 *
 * Failure modes (a full disk, a file size limit, an I/O error): a failed write is cut back
 * (ftruncate) to the last whole record, so that the log never ends in a half record, and
 * persistence is marked failed: mutations are refused with UNAVAILABLE and a message naming
 * the problem ("persistence log write failed: No space left on device"), reads go on, the
 * error is logged once and the refusals once per 10 s with a count.
 *   --fsync always: the records not yet written are dropped and the connections whose
 *     responses waited for them get one error response (id 0) and are closed: no request
 *     is acknowledged whose record is not durable. The failure lasts until a restart.
 *   everysec / no: the records (already acknowledged) stay in the buffer and the writer
 *     tries again once a second; when a write succeeds, mutations are accepted again.
 *   An fsync failure is not retried (the kernel may have dropped the pages): it lasts
 *   until a restart in every mode.
 *
 * Backpressure: the records waiting for the writer are bounded (ta_persist_set_buffer_max):
 * an append that would pass the bound waits until the writer has taken the buffer, so
 * that a disk slower than the requests slows the requests instead of growing memory. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "persist.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "log.h"
#include "registry.h"
#include "ta_backend.h"

/* Magic at the start of a snapshot and of a log. */
#define SNAP_MAGIC "TASNAP03"
#define LOG_MAGIC  "TALOG003"
#define MAGIC_LEN  8
/* Bytes of a record header. */
#define REC_HEADER 28
/* File names in the data directory. */
#define SNAP_NAME     "snapshot.tas"
#define SNAP_TMP_NAME "snapshot.tas.tmp"
#define LOCK_NAME     "lock"
/* everysec / no: how long the writer lets records gather before one write (ms), unless
 * GATHER_BYTES are waiting: fewer wake-ups and system calls, at the price of what a kill -9
 * loses (records not yet written) growing to about this long. */
#define GATHER_MS    2
#define GATHER_BYTES (1u << 20)
/* Bytes of tile data moved per backend plan when saving or loading (about). */
#define CHUNK_BYTES (4u << 20)

/* One mutation lock: held alone, or shared by requests of one kind (the same op, whose
 * order does not matter among themselves; two different such ops, add and max say, do
 * not commute with each other). A waiter stops new sharers from entering, so that neither
 * an exclusive request nor another kind waits for ever behind a stream of one kind. */
typedef struct ta_stripe {
	pthread_mutex_t mu;  /* guards the fields below */
	pthread_cond_t cond; /* signalled when it is free, or taken by sharers */
	int holders;         /* requests holding it */
	int kind;            /* their kind (>= 0), or -1 when held alone */
	int waiting;         /* requests waiting to take it */
	uint64_t phase;      /* counts the times it was taken while free */
} ta_stripe;

struct ta_persist {
	char *dir;                             /* the data directory */
	int dir_fd;                            /* open directory (for fsync) */
	int lock_fd;                           /* the flock'ed lock file */
	ta_fsync_mode mode;                    /* when to fsync */
	uint64_t compact_size;                 /* log bytes that start a compaction (0: never) */
	ta_registry *registry;                 /* the tiles */
	ta_backend *backend;                   /* reads and writes their elements */
	ta_persist_replay_fn replay;           /* applies a logged request again (start) */
	void *replay_arg;                      /* its argument */
	ta_stripe stripes[TA_PERSIST_STRIPES]; /* mutation order per tile name */
	pthread_mutex_t mu;                    /* guards the fields below up to snap_cond */
	pthread_cond_t wake;                   /* wakes the writer */
	pthread_cond_t rotated;                /* a rotation finished */
	uint8_t *buf;                          /* records appended, not yet written */
	size_t len;                            /* bytes in buf */
	size_t cap;                            /* bytes allocated at buf */
	uint64_t next_seq;                     /* sequence number of the next record */
	bool writer_idle;                      /* the writer waits on wake */
	bool rotate;                           /* compaction: start the next log */
	bool stop;                             /* close: write everything and exit */
	uint64_t log_bytes;                    /* bytes of the current log */
	uint64_t compact_at;                   /* log_bytes that triggers the next compaction */
	bool snap_wanted;                      /* the compactor thread should run */
	uint64_t written_total;                /* bytes written to logs (everysec) */
	uint64_t synced_total;                 /* of them, bytes fdatasynced by the syncer */
	pthread_cond_t sync_cond;              /* wakes the syncer (stop) */
	pthread_cond_t snap_cond;              /* wakes the compactor */
	int log_fd;                            /* the current log (writer's) */
	uint64_t log_first;                    /* first sequence number of the current log */
	atomic_uint_least64_t durable_seq;     /* records up to here are durable (always) */
	atomic_bool failed;                    /* writing failed: mutations refused */
	bool fail_final;                       /* the failure lasts until a restart (no retry) */
	char fail_msg[160];                    /* what failed, e.g. "persistence log write
	                                          failed: File too large" (guarded by mu) */
	uint64_t buf_max;                      /* bound on len (0: none; backpressure) */
	uint64_t buf_high;                     /* highest len seen */
	uint64_t buf_waits;                    /* appends that waited for the bound */
	int drain_waiters;                     /* appends waiting for the writer now */
	pthread_cond_t drained;                /* the writer took the buffer, or writing failed */
	pthread_mutex_t snap_mu;               /* one snapshot at a time */
	pthread_t writer;                      /* the writer thread */
	bool writer_started;                   /* writer needs joining */
	pthread_t syncer;                      /* the everysec fsync thread */
	bool syncer_started;                   /* syncer needs joining */
	pthread_t compactor;                   /* the automatic compaction thread */
	bool compactor_started;                /* compactor needs joining */
	uv_async_t async;                      /* wakes the loop: records became durable */
	bool attached;                         /* async is initialised (guarded by mu) */
	void (*cb)(void *arg);                 /* the loop's callback */
	void *cb_arg;                          /* its argument */
};

int ta_fsync_mode_parse(const char *text, ta_fsync_mode *out)
{
	if (strcmp(text, "always") == 0)
		*out = TA_FSYNC_ALWAYS;
	else if (strcmp(text, "everysec") == 0)
		*out = TA_FSYNC_EVERYSEC;
	else if (strcmp(text, "no") == 0)
		*out = TA_FSYNC_NO;
	else
		return -1;
	return 0;
}

const char *ta_fsync_mode_name(ta_fsync_mode mode)
{
	switch (mode) {
	case TA_FSYNC_ALWAYS:
		return "always";
	case TA_FSYNC_EVERYSEC:
		return "everysec";
	case TA_FSYNC_NO:
		return "no";
	}
	return "?";
}

/* Little-endian encoders and decoders. */
static void put_u16(uint8_t *b, uint16_t v)
{
	v = htole16(v);
	memcpy(b, &v, sizeof(v));
}
static void put_u32(uint8_t *b, uint32_t v)
{
	v = htole32(v);
	memcpy(b, &v, sizeof(v));
}
static void put_u64(uint8_t *b, uint64_t v)
{
	v = htole64(v);
	memcpy(b, &v, sizeof(v));
}
static uint16_t get_u16(const uint8_t *b)
{
	uint16_t v;
	memcpy(&v, b, sizeof(v));
	return le16toh(v);
}
static uint32_t get_u32(const uint8_t *b)
{
	uint32_t v;
	memcpy(&v, b, sizeof(v));
	return le32toh(v);
}
static uint64_t get_u64(const uint8_t *b)
{
	uint64_t v;
	memcpy(&v, b, sizeof(v));
	return le64toh(v);
}

/* Checksum of n bytes: the low 32 bits of XXH3-64 (fast on the short records of the log). */
static uint32_t sum32(const void *data, size_t n)
{
	return (uint32_t)XXH3_64bits(data, n);
}

/* Writer: fills the checksums of the whole records at buf[0, n) (the payload's, then the
 * header's), before they are written: off the threads that apply requests, which only copy
 * them. */
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
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
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

/* Marks persistence failed (mu held): logged once per failure, the loop told. final: the
 * failure lasts until a restart (else the writer tries again). */
static void set_failed(ta_persist *p, const char *what, int errnum, bool final)
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

/* Writes n bytes; 0 or an errno. */
static int write_all(int fd, const uint8_t *data, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, data, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		data += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Name of the log whose first record is first, into buf. */
static void log_name(uint64_t first, char *buf, size_t n)
{
	snprintf(buf, n, "log-%016" PRIx64 ".tal", first);
}

/* Creates (truncating) the log starting at first, writes its magic and makes it durable
 * with the directory entry. Returns the fd, or -1 with errno set. */
static int create_log(ta_persist *p, uint64_t first)
{
	char name[64];
	log_name(first, name, sizeof(name));
	int fd = openat(p->dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int e = write_all(fd, (const uint8_t *)LOG_MAGIC, MAGIC_LEN);
	if (e == 0 && fdatasync(fd) != 0)
		e = errno;
	if (e == 0 && fsync(p->dir_fd) != 0)
		e = errno;
	if (e != 0) {
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Writer: closes the current log after fsyncing it and starts the next one at
 * p->next_seq (mu held; every record is written). */
static void writer_rotate(ta_persist *p)
{
	uint64_t first = p->next_seq;
	pthread_mutex_unlock(&p->mu);
	int e = 0;
	if (p->log_fd >= 0 && fdatasync(p->log_fd) != 0)
		e = errno;
	int fd = -1;
	if (e == 0) {
		fd = create_log(p, first);
		if (fd < 0)
			e = errno;
	}
	pthread_mutex_lock(&p->mu);
	if (e != 0) {
		set_failed(p, "persistence log rotation failed", e, true);
		return;
	}
	if (p->log_fd >= 0)
		close(p->log_fd);
	p->log_fd = fd;
	p->log_first = first;
	p->log_bytes = MAGIC_LEN;
	p->compact_at = p->compact_size;
	atomic_store(&p->durable_seq, first - 1);
}

/* Writer, after a failed write of the n bytes at wbuf (mu held): cuts the log back to its
 * last whole record; with always drops the records (their responses become errors), else
 * puts them back at the head of the buffer for the next try. */
static void writer_failed(ta_persist *p, const char *what, int e, uint8_t **wbuf, size_t *wcap,
                          size_t n)
{
	if (p->log_fd >= 0 && ftruncate(p->log_fd, (off_t)p->log_bytes) != 0) {
		set_failed(p, "persistence log write failed and could not be cut back", errno,
		           true);
		return;
	}
	set_failed(p, what, e, p->mode == TA_FSYNC_ALWAYS);
	if (p->fail_final)
		return;
	if (*wcap - n < p->len) {
		uint8_t *nb = realloc(*wbuf, n + p->len);
		if (!nb) {
			set_failed(p, "out of memory for the log records to retry", ENOMEM, true);
			return;
		}
		*wbuf = nb;
		*wcap = n + p->len;
	}
	if (p->len)
		memcpy(*wbuf + n, p->buf, p->len);
	uint8_t *b = p->buf;
	size_t bcap = p->cap;
	p->buf = *wbuf;
	p->cap = *wcap;
	p->len += n;
	*wbuf = b;
	*wcap = bcap;
	if (p->len > p->buf_high)
		p->buf_high = p->len;
}

/* The writer thread: writes records as they come, fsyncs by the mode, rotates logs; after
 * a failed write (everysec, no) tries again once a second. */
static void *writer_main(void *arg)
{
	ta_persist *p = arg;
	uint8_t *wbuf = NULL;
	size_t wcap = 0;
	bool gathered = false;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		bool failed = atomic_load(&p->failed);
		if (p->rotate && failed) {
			/* no new log while writing fails: the snapshot reports the failure */
			p->rotate = false;
			pthread_cond_broadcast(&p->rotated);
			continue;
		}
		if (p->len > 0 && failed && !p->fail_final && !p->stop && !gathered) {
			gathered = true; /* wait a second before the next try */
			wait_ms(&p->wake, &p->mu, 1000);
			continue;
		}
		if (p->len > 0 && !gathered && p->mode != TA_FSYNC_ALWAYS && !p->stop &&
		    !p->rotate && p->len < GATHER_BYTES && p->drain_waiters == 0) {
			/* let more records come (appends do not signal while we are not idle) */
			gathered = true;
			wait_ms(&p->wake, &p->mu, GATHER_MS);
			continue;
		}
		if (p->len > 0) {
			gathered = false;
			/* take the whole buffer: every record appended so far */
			uint8_t *b = p->buf;
			size_t bcap = p->cap;
			size_t n = p->len;
			p->buf = wbuf;
			p->cap = wcap;
			p->len = 0;
			wbuf = b;
			wcap = bcap;
			pthread_cond_broadcast(&p->drained);
			uint64_t hi = p->next_seq - 1;
			bool drop = failed && p->fail_final;
			pthread_mutex_unlock(&p->mu);
			if (!drop)
				seal_records(wbuf, n);
			int e = drop ? 0 : write_all(p->log_fd, wbuf, n);
			const char *what = "persistence log write failed";
			if (e == 0 && !drop && p->mode == TA_FSYNC_ALWAYS) {
				if (fdatasync(p->log_fd) != 0) {
					e = errno;
					what = "persistence log fsync failed";
				}
			}
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
			} else if (e != 0) {
				if (strcmp(what, "persistence log fsync failed") == 0)
					set_failed(p, what, e, true);
				else
					writer_failed(p, what, e, &wbuf, &wcap, n);
			} else if (!drop) {
				if (failed && !p->fail_final) {
					atomic_store(&p->failed, false);
					ta_log(TA_LOG_NOTICE,
					       "data directory %s: the log is written again; "
					       "mutations "
					       "are accepted",
					       p->dir);
				}
				p->log_bytes += n;
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
		if (p->rotate) {
			writer_rotate(p);
			p->rotate = false;
			pthread_cond_broadcast(&p->rotated);
			continue;
		}
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

/* The syncer thread (everysec): once a second, fdatasyncs what the writer wrote since the
 * last time, on a duplicate of the log's descriptor (a rotation may close the original
 * meanwhile; it fsyncs the old log itself). Apart from the writer, so that a slow fsync
 * never holds records back in memory, where a kill -9 would lose them. */
static void *syncer_main(void *arg)
{
	ta_persist *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		wait_ms(&p->sync_cond, &p->mu, 1000);
		if (p->stop || atomic_load(&p->failed) || p->written_total == p->synced_total)
			continue;
		uint64_t target = p->written_total;
		int fd = dup(p->log_fd);
		pthread_mutex_unlock(&p->mu);
		int e = fd < 0 ? errno : fdatasync(fd) != 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		pthread_mutex_lock(&p->mu);
		if (e != 0)
			set_failed(p, "persistence log fsync failed", e, true);
		else
			p->synced_total = target;
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* The compactor thread: runs a snapshot whenever the writer finds the log over
 * compact_size. */
static void *compactor_main(void *arg)
{
	ta_persist *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->snap_wanted && !p->stop)
			pthread_cond_wait(&p->snap_cond, &p->mu);
		if (p->stop)
			break;
		p->snap_wanted = false;
		uint64_t size = p->log_bytes;
		pthread_mutex_unlock(&p->mu);
		ta_persist_snapinfo info;
		ta_error err = {0};
		if (ta_persist_snapshot(p, &info, &err) == TA_OK)
			ta_log(TA_LOG_NOTICE,
			       "log reached %" PRIu64
			       " bytes: compacted into a snapshot of %" PRIu32 " tiles (%" PRIu64
			       " bytes, through record %" PRIu64 ")",
			       size, info.tiles, info.bytes, info.seq);
		else
			ta_log(TA_LOG_ERR, "automatic compaction failed: %s", err.msg);
		pthread_mutex_lock(&p->mu);
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

/* Releases a stripe from stripe_lock. */
static void stripe_unlock(ta_stripe *st)
{
	pthread_mutex_lock(&st->mu);
	if (--st->holders == 0 && st->waiting > 0)
		pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->mu);
}

ta_status ta_persist_lock(ta_persist *p, const char *name, int kind, ta_persist_hold *hold,
                          ta_error *err)
{
	return ta_persist_run_lock(p, NULL, name, kind, hold, err);
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
	if (run) {
		size_t n = name ? strlen(name) : 0;
		if (n < sizeof(run->name))
			memcpy(run->name, name ? name : "", n + 1);
		else
			run->name[0] = '\0';
	}
	return TA_OK;
}

/* Releases the stripes of hold (no run involved). */
static void hold_release(ta_persist *p, ta_persist_hold *hold)
{
	int lo = hold->stripe >= 0 ? hold->stripe : 0;
	int hi = hold->stripe >= 0 ? hold->stripe : TA_PERSIST_STRIPES - 1;
	for (int s = hi; s >= lo; s--)
		stripe_unlock(&p->stripes[s]);
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
	if (p->cap - p->len < need) {
		size_t want = p->cap ? p->cap : 65536;
		while (want - p->len < need)
			want *= 2;
		uint8_t *nb = realloc(p->buf, want);
		if (!nb) {
			set_failed(p, "persistence log record could not be buffered", ENOMEM, true);
			return false;
		}
		p->buf = nb;
		p->cap = want;
	}
	return true;
}

/* Counts len more bytes of records in p->buf and wakes the writer when it waits (mu
 * held). */
static void buf_added(ta_persist *p, size_t len)
{
	p->len += len;
	if (p->len > p->buf_high)
		p->buf_high = p->len;
	if (p->writer_idle)
		pthread_cond_signal(&p->wake);
}

/* Fills the header of a record at h: its payload's length, seq and who; the checksums come
 * with the writer (seal_records). */
static void put_header(uint8_t *h, uint32_t len, uint64_t seq, ta_owner who)
{
	put_u32(h, len);
	put_u64(h + 4, seq);
	put_u64(h + 12, (uint64_t)who);
}

uint64_t ta_persist_append(ta_persist *p, ta_owner who, const uint8_t *payload, size_t len,
                           ta_error *err)
{
	if (len > UINT32_MAX) {
		ta_error_set(err, TA_INTERNAL, "a request of %zu bytes cannot be logged", len);
		return 0;
	}
	pthread_mutex_lock(&p->mu);
	if (!buf_make_room(p, REC_HEADER + len)) {
		pthread_mutex_unlock(&p->mu);
		ta_error_set(err, TA_INTERNAL,
		             "the request was applied but its log record could not be "
		             "buffered (out of memory); mutations are refused from now on");
		return 0;
	}
	uint64_t seq = p->next_seq++;
	uint8_t *h = p->buf + p->len;
	put_header(h, (uint32_t)len, seq, who);
	memcpy(h + REC_HEADER, payload, len);
	buf_added(p, REC_HEADER + len);
	pthread_mutex_unlock(&p->mu);
	return seq;
}

void ta_persist_run_init(ta_persist_run *run)
{
	memset(run, 0, sizeof(*run));
}

/* Bytes of records a run of p keeps at most: TA_PERSIST_RUN_BYTES, or the bound on the
 * log buffer when that is smaller (set before any request runs). */
static size_t run_limit(const ta_persist *p)
{
	return p->buf_max && p->buf_max < TA_PERSIST_RUN_BYTES ? (size_t)p->buf_max
	                                                       : TA_PERSIST_RUN_BYTES;
}

/* Appends the records of run to the log, in their order, giving them their sequence
 * numbers (one lock of the log for all of them); marks the run lost when memory is
 * short. */
static void run_flush(ta_persist *p, ta_persist_run *run)
{
	if (run->len == 0)
		return;
	pthread_mutex_lock(&p->mu);
	if (!buf_make_room(p, run->len)) {
		pthread_mutex_unlock(&p->mu);
		ta_log(TA_LOG_ERR,
		       "%zu bytes of log records of applied requests could not be buffered (out "
		       "of memory): their responses are withheld",
		       run->len);
		run->lost = true;
		run->len = 0;
		return;
	}
	uint8_t *dst = p->buf + p->len;
	memcpy(dst, run->buf, run->len);
	for (size_t off = 0; off < run->len;) {
		uint8_t *h = dst + off;
		put_u64(h + 4, p->next_seq++);
		off += REC_HEADER + (size_t)get_u32(h);
	}
	run->last_seq = p->next_seq - 1;
	buf_added(p, run->len);
	pthread_mutex_unlock(&p->mu);
	run->len = 0;
}

/* Keeps the record of a request (len bytes at payload, acting for who) in run, behind
 * those before it; false when it does not go in (too large, or memory is short). */
static bool run_add(ta_persist *p, ta_persist_run *run, ta_owner who, const uint8_t *payload,
                    size_t len)
{
	size_t limit = run_limit(p);
	if (len > limit || REC_HEADER + len > limit)
		return false;
	size_t need = REC_HEADER + len;
	if (run->len + need > limit)
		run_flush(p, run);
	if (run->cap - run->len < need) {
		size_t want = run->cap ? run->cap * 2 : 4096;
		while (want < run->len + need)
			want *= 2;
		if (want > limit)
			want = limit;
		uint8_t *nb = realloc(run->buf, want);
		if (!nb)
			return false;
		run->buf = nb;
		run->cap = want;
	}
	uint8_t *h = run->buf + run->len;
	/* the sequence number comes with run_flush, the checksums with the writer */
	put_u32(h, (uint32_t)len);
	put_u64(h + 12, (uint64_t)who);
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
	run->buf = NULL;
	run->cap = 0;
	run->len = 0;
}

void ta_persist_fail(ta_persist *p, const char *what)
{
	pthread_mutex_lock(&p->mu);
	set_failed(p, what, EIO, true);
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

/* ---- tile data through the backend ---- */

/* Rows of axis 0 moved per plan for a tile (at least one). */
static int64_t chunk_rows(const ta_tile *tile)
{
	uint64_t row = tile->bytes / (uint64_t)tile->shape.shape[0];
	int64_t rows = row ? (int64_t)(CHUNK_BYTES / row) : 1;
	return rows < 1 ? 1 : rows;
}

/* Loads (op LOAD, into buf) or stores (op STORE, from buf) rows [row0, row0 + rows) of
 * axis 0 of tile through the backend. */
static ta_status tile_rows(ta_backend *be, ta_tile *tile, int64_t row0, int64_t rows, ta_op op,
                           void *buf, size_t nbytes, ta_error *err)
{
	ta_request req;
	ta_request_region(&req, TA_FAMILY_MEMORY, op);
	req.has_region = true;
	req.region_rank = tile->shape.rank;
	for (int a = 0; a < tile->shape.rank; a++) {
		req.region_origin[a] = a == 0 ? row0 : 0;
		req.region_shape[a] = a == 0 ? rows : tile->shape.shape[a];
	}
	if (op == TA_OP_LOAD) {
		req.want_old = true;
	} else {
		req.values.present = true;
		req.values.dtype = tile->shape.dtype;
		req.values.rank = tile->shape.rank;
		for (int a = 0; a < tile->shape.rank; a++)
			req.values.shape[a] = req.region_shape[a];
		req.values.data = buf;
		req.values.nbytes = nbytes;
	}
	ta_plan plan;
	ta_status st = ta_plan_build(&plan, &tile->shape, &req, err);
	if (st != TA_OK)
		return st;
	if (op == TA_OP_LOAD)
		plan.old_out = buf;
	ta_result result = {0, 0};
	return ta_backend_apply(be, tile->mem, (size_t)tile->bytes, &plan, &result, err);
}

/* ---- snapshot writing ---- */

/* A snapshot being written: the stream and its running checksum. */
typedef struct snap_out {
	FILE *f;          /* the temporary file */
	XXH3_state_t *hs; /* running checksum of the bytes so far */
	uint64_t bytes;   /* bytes so far */
	int err;          /* first errno, 0: none */
} snap_out;

/* Writes n bytes to the snapshot. */
static void snap_put(snap_out *o, const void *data, size_t n)
{
	if (o->err)
		return;
	if (n && fwrite(data, 1, n, o->f) != n) {
		o->err = errno ? errno : EIO;
		return;
	}
	if (n && XXH3_64bits_update(o->hs, data, n) != XXH_OK) {
		o->err = ENOMEM;
		return;
	}
	o->bytes += n;
}

/* Writes one tile (its header and its elements read through the backend). */
static ta_status snap_tile(ta_persist *p, snap_out *o, ta_tile *tile, uint8_t *chunk, ta_error *err)
{
	uint8_t h[8];
	size_t nl = strlen(tile->name);
	put_u16(h, (uint16_t)nl);
	snap_put(o, h, 2);
	snap_put(o, tile->name, nl);
	put_u64(h, (uint64_t)tile->owner);
	snap_put(o, h, 8);
	put_u32(h, (uint32_t)tile->shape.dtype);
	snap_put(o, h, 4);
	put_u32(h, (uint32_t)tile->shape.rank);
	snap_put(o, h, 4);
	for (int a = 0; a < tile->shape.rank; a++) {
		put_u64(h, (uint64_t)tile->shape.shape[a]);
		snap_put(o, h, 8);
	}
	put_u64(h, tile->bytes);
	snap_put(o, h, 8);
	int64_t step = chunk_rows(tile);
	uint64_t row_bytes = tile->bytes / (uint64_t)tile->shape.shape[0];
	for (int64_t r = 0; r < tile->shape.shape[0] && !o->err; r += step) {
		int64_t rows = tile->shape.shape[0] - r < step ? tile->shape.shape[0] - r : step;
		size_t n = (size_t)((uint64_t)rows * row_bytes);
		ta_status st = tile_rows(p->backend, tile, r, rows, TA_OP_LOAD, chunk, n, err);
		if (st != TA_OK)
			return st;
		snap_put(o, chunk, n);
	}
	return TA_OK;
}

/* Writes every tile into the open temporary snapshot (every stripe held). */
static ta_status snap_write_tiles(ta_persist *p, snap_out *o, uint64_t seq, uint32_t *ntiles,
                                  ta_error *err)
{
	ta_tile_info *infos = NULL;
	size_t n = 0;
	ta_status st = ta_registry_list(p->registry, &infos, &n, err);
	if (st != TA_OK)
		return st;
	uint8_t h[12];
	memcpy(h, SNAP_MAGIC, MAGIC_LEN);
	snap_put(o, h, MAGIC_LEN);
	put_u64(h, seq);
	put_u32(h + 8, (uint32_t)n);
	snap_put(o, h, 12);
	uint64_t most = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t row = infos[i].bytes / (uint64_t)infos[i].shape.shape[0];
		uint64_t c = row > CHUNK_BYTES ? row : (CHUNK_BYTES / row) * row;
		if (c > infos[i].bytes)
			c = infos[i].bytes;
		most = c > most ? c : most;
	}
	uint8_t *chunk = malloc(most ? (size_t)most : 1);
	if (!chunk) {
		free(infos);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "out of memory for a snapshot buffer of %" PRIu64 " bytes",
		                    most);
	}
	for (size_t i = 0; i < n && st == TA_OK; i++) {
		ta_tile *tile = NULL;
		st = ta_registry_get(p->registry, infos[i].name, &tile, err);
		if (st != TA_OK)
			break;
		st = snap_tile(p, o, tile, chunk, err);
		ta_tile_unref(tile);
	}
	free(chunk);
	free(infos);
	*ntiles = (uint32_t)n;
	return st;
}

/* Removes the logs that start before first (covered by the snapshot); returns their bytes. */
static uint64_t remove_old_logs(ta_persist *p, uint64_t first)
{
	uint64_t removed = 0;
	int fd = dup(p->dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		ta_log(TA_LOG_WARNING, "cannot list %s to remove old logs: %s", p->dir,
		       strerror(errno));
		return 0;
	}
	rewinddir(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		uint64_t s;
		char tail[8];
		if (sscanf(e->d_name, "log-%16" SCNx64 ".%3s", &s, tail) != 2 ||
		    strcmp(tail, "tal") != 0 || s >= first)
			continue;
		struct stat sb;
		if (fstatat(p->dir_fd, e->d_name, &sb, 0) == 0)
			removed += (uint64_t)sb.st_size;
		if (unlinkat(p->dir_fd, e->d_name, 0) != 0)
			ta_log(TA_LOG_WARNING, "cannot remove %s/%s: %s", p->dir, e->d_name,
			       strerror(errno));
	}
	closedir(d);
	if (fsync(p->dir_fd) != 0)
		ta_log(TA_LOG_WARNING, "cannot fsync %s: %s", p->dir, strerror(errno));
	return removed;
}

ta_status ta_persist_snapshot(ta_persist *p, ta_persist_snapinfo *info, ta_error *err)
{
	memset(info, 0, sizeof(*info));
	pthread_mutex_lock(&p->snap_mu);
	ta_persist_hold hold;
	ta_status st = ta_persist_lock(p, NULL, -1, &hold, err);
	if (st != TA_OK) {
		pthread_mutex_unlock(&p->snap_mu);
		return st;
	}
	pthread_mutex_lock(&p->mu);
	uint64_t seq = p->next_seq - 1;
	pthread_mutex_unlock(&p->mu);

	snap_out o = {NULL, XXH3_createState(), 0, 0};
	if (!o.hs || XXH3_64bits_reset(o.hs) != XXH_OK) {
		XXH3_freeState(o.hs);
		ta_persist_unlock(p, &hold);
		pthread_mutex_unlock(&p->snap_mu);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory for a checksum");
	}
	int fd = openat(p->dir_fd, SNAP_TMP_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		o.f = fdopen(fd, "wb");
		if (!o.f)
			close(fd);
	}
	if (!o.f) {
		int e = errno;
		XXH3_freeState(o.hs);
		ta_persist_unlock(p, &hold);
		pthread_mutex_unlock(&p->snap_mu);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot create %s/%s: %s", p->dir,
		                    SNAP_TMP_NAME, strerror(e));
	}
	st = snap_write_tiles(p, &o, seq, &info->tiles, err);
	if (st == TA_OK) {
		/* the records up to seq are in the snapshot: the writer starts the next log */
		pthread_mutex_lock(&p->mu);
		p->rotate = true;
		pthread_cond_signal(&p->wake);
		while (p->rotate)
			pthread_cond_wait(&p->rotated, &p->mu);
		pthread_mutex_unlock(&p->mu);
		if (atomic_load(&p->failed))
			st = ta_error_set(err, TA_UNAVAILABLE, "the data log of %s failed", p->dir);
	}
	ta_persist_unlock(p, &hold);

	if (st == TA_OK) {
		uint8_t c[4];
		put_u32(c, (uint32_t)XXH3_64bits_digest(o.hs));
		snap_put(&o, c, 4);
		if (!o.err && fflush(o.f) != 0)
			o.err = errno;
		if (!o.err && fsync(fileno(o.f)) != 0)
			o.err = errno;
	}
	if (fclose(o.f) != 0 && !o.err)
		o.err = errno;
	XXH3_freeState(o.hs);
	if (st == TA_OK && !o.err && renameat(p->dir_fd, SNAP_TMP_NAME, p->dir_fd, SNAP_NAME) != 0)
		o.err = errno;
	if (st == TA_OK && !o.err && fsync(p->dir_fd) != 0)
		o.err = errno;
	if (st == TA_OK && o.err)
		st = ta_error_set(err, TA_UNAVAILABLE, "cannot write the snapshot %s/%s: %s",
		                  p->dir, SNAP_TMP_NAME, strerror(o.err));
	if (st != TA_OK) {
		unlinkat(p->dir_fd, SNAP_TMP_NAME, 0);
		pthread_mutex_unlock(&p->snap_mu);
		return st;
	}
	pthread_mutex_lock(&p->mu);
	uint64_t first = p->log_first;
	pthread_mutex_unlock(&p->mu);
	info->bytes = o.bytes;
	info->seq = seq;
	info->log_removed = remove_old_logs(p, first);
	pthread_mutex_unlock(&p->snap_mu);
	ta_log(TA_LOG_INFO,
	       "snapshot: %" PRIu32 " tiles, %" PRIu64 " bytes, through record %" PRIu64
	       "; %" PRIu64 " bytes of logs removed",
	       info->tiles, info->bytes, info->seq, info->log_removed);
	return TA_OK;
}

/* ---- loading ---- */

/* A file being read with a running checksum and offset. */
typedef struct rd_file {
	FILE *f;          /* the stream */
	const char *path; /* its path, for messages */
	uint64_t off;     /* bytes read so far */
	XXH3_state_t *hs; /* running checksum of them (NULL: none kept) */
} rd_file;

/* Reads exactly n bytes; returns how many were read (n unless the file ends). */
static size_t rd(rd_file *r, void *buf, size_t n)
{
	size_t got = n ? fread(buf, 1, n, r->f) : 0;
	if (r->hs && got)
		(void)XXH3_64bits_update(r->hs, buf, got); /* fails only on bad arguments */
	r->off += got;
	return got;
}

/* Loads the snapshot (when there is one) into the registry; *seq: its last record. */
static ta_status load_snapshot(ta_persist *p, uint64_t *seq, ta_error *err)
{
	*seq = 0;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", p->dir, SNAP_NAME);
	int fd = openat(p->dir_fd, SNAP_NAME, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return TA_OK;
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s: %s", path,
		                    strerror(errno));
	}
	rd_file r = {fdopen(fd, "rb"), path, 0, XXH3_createState()};
	if (!r.f || !r.hs || XXH3_64bits_reset(r.hs) != XXH_OK) {
		int e = r.f ? ENOMEM : errno;
		if (r.f)
			fclose(r.f);
		else
			close(fd);
		XXH3_freeState(r.hs);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot read %s: %s", path, strerror(e));
	}
	ta_status st = TA_OK;
	uint8_t h[20];
	uint8_t *chunk = NULL;
	size_t chunk_cap = 0;
	ta_tile *tile = NULL;
	if (rd(&r, h, 20) < 20 || memcmp(h, SNAP_MAGIC, MAGIC_LEN) != 0) {
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: not a tileatom snapshot (bad or short header at offset 0)",
		                  path);
		goto out;
	}
	*seq = get_u64(h + 8);
	uint32_t ntiles = get_u32(h + 16);
	for (uint32_t i = 0; i < ntiles; i++) {
		uint64_t at = r.off;
		char name[TA_NAME_MAX + 1];
		ta_tile_shape shape;
		memset(&shape, 0, sizeof(shape));
		if (rd(&r, h, 2) < 2)
			goto short_file;
		uint16_t nl = get_u16(h);
		if (nl == 0 || nl > TA_NAME_MAX) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: tile %" PRIu32 " at offset %" PRIu64
			                  ": name length %u is impossible (damaged file)",
			                  path, i, at, nl);
			goto out;
		}
		if (rd(&r, name, nl) < nl || rd(&r, h, 16) < 16)
			goto short_file;
		name[nl] = '\0';
		ta_owner owner = (ta_owner)get_u64(h);
		shape.dtype = (ta_dtype)get_u32(h + 8);
		shape.rank = (int)get_u32(h + 12);
		if (shape.rank < 1 || shape.rank > TA_MAX_RANK) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: tile %" PRIu32 " at offset %" PRIu64
			                  ": rank %d is impossible (damaged file)",
			                  path, i, at, shape.rank);
			goto out;
		}
		for (int a = 0; a < shape.rank; a++) {
			if (rd(&r, h, 8) < 8)
				goto short_file;
			shape.shape[a] = (int64_t)get_u64(h);
		}
		if (rd(&r, h, 8) < 8)
			goto short_file;
		uint64_t bytes = get_u64(h);
		ta_error cerr = {0};
		st = ta_registry_create_as(p->registry, name, &shape, owner, &tile, &cerr);
		if (st != TA_OK) {
			st = ta_error_set(err, st, "%s: tile %" PRIu32 " at offset %" PRIu64 ": %s",
			                  path, i, at, cerr.msg);
			goto out;
		}
		if (tile->bytes != bytes) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: tile '%s' at offset %" PRIu64 ": %" PRIu64
			                  " bytes recorded, its shape holds %" PRIu64
			                  " (damaged file)",
			                  path, tile->name, at, bytes, tile->bytes);
			goto out;
		}
		int64_t step = chunk_rows(tile);
		uint64_t row_bytes = tile->bytes / (uint64_t)tile->shape.shape[0];
		for (int64_t row = 0; row < tile->shape.shape[0]; row += step) {
			int64_t rows =
			    tile->shape.shape[0] - row < step ? tile->shape.shape[0] - row : step;
			size_t n = (size_t)((uint64_t)rows * row_bytes);
			if (n > chunk_cap) {
				uint8_t *nc = realloc(chunk, n);
				if (!nc) {
					st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
					                  "%s: out of memory loading tile '%s'",
					                  path, tile->name);
					goto out;
				}
				chunk = nc;
				chunk_cap = n;
			}
			if (rd(&r, chunk, n) < n)
				goto short_file;
			st = tile_rows(p->backend, tile, row, rows, TA_OP_STORE, chunk, n, err);
			if (st != TA_OK)
				goto out;
		}
		ta_registry_publish(tile);
		ta_tile_unref(tile);
		tile = NULL;
	}
	uint32_t computed = (uint32_t)XXH3_64bits_digest(r.hs);
	uint64_t at = r.off;
	if (rd(&r, h, 4) < 4)
		goto short_file;
	if (get_u32(h) != computed) {
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: checksum mismatch at offset %" PRIu64 " (stored %08" PRIx32
		                  ", computed %08" PRIx32
		                  " over the bytes before it): the snapshot is damaged; "
		                  "refusing to start (move it away to start without it)",
		                  path, at, get_u32(h), computed);
		goto out;
	}
	if (fgetc(r.f) != EOF) {
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: unexpected bytes after the checksum at offset %" PRIu64
		                  " (damaged file)",
		                  path, r.off);
		goto out;
	}
	goto out;
short_file:
	st = ta_error_set(err, TA_INTERNAL,
	                  "%s: the file ends at offset %" PRIu64
	                  " in the middle of its data (truncated snapshot)",
	                  path, r.off);
out:
	if (tile) {
		ta_registry_discard(tile);
		ta_tile_unref(tile);
	}
	free(chunk);
	XXH3_freeState(r.hs);
	fclose(r.f);
	return st;
}

/* One log file found in the directory. */
typedef struct log_file {
	uint64_t first; /* the sequence number in its name */
	char name[64];  /* its name in the directory */
} log_file;

/* qsort order of log files: by first sequence number. */
static int log_file_cmp(const void *a, const void *b)
{
	const log_file *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* Lists the logs of the directory sorted by their first record into *out (*n entries). */
static ta_status list_logs(ta_persist *p, log_file **out, size_t *n, ta_error *err)
{
	*out = NULL;
	*n = 0;
	int fd = dup(p->dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot list %s: %s", p->dir,
		                    strerror(errno));
	}
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		uint64_t s;
		char tail[8];
		if (sscanf(e->d_name, "log-%16" SCNx64 ".%3s", &s, tail) != 2 ||
		    strcmp(tail, "tal") != 0 || strlen(e->d_name) != 24)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			log_file *nl = realloc(*out, cap * sizeof(**out));
			if (!nl) {
				closedir(d);
				free(*out);
				*out = NULL;
				return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
			}
			*out = nl;
		}
		(*out)[*n].first = s;
		snprintf((*out)[*n].name, sizeof((*out)[*n].name), "%s", e->d_name);
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(*out, *n, sizeof(**out), log_file_cmp);
	return TA_OK;
}

/* Replays one log from its start. *expected: the next sequence number to apply (records
 * at or below snap_seq are skipped). last: the newest log, where a torn tail is dropped
 * (truncated). *end: the offset after the last whole record. */
static ta_status replay_log(ta_persist *p, const log_file *lf, bool last, uint64_t snap_seq,
                            uint64_t *expected, uint64_t *end, ta_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", p->dir, lf->name);
	int fd = openat(p->dir_fd, lf->name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s: %s", path,
		                    strerror(errno));
	rd_file r = {fdopen(fd, "rb"), path, 0, NULL}; /* records carry their own checksums */
	if (!r.f) {
		close(fd);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s: %s", path,
		                    strerror(errno));
	}
	ta_status st = TA_OK;
	uint8_t h[REC_HEADER];
	uint8_t *payload = NULL;
	size_t cap = 0;
	uint64_t applied = 0;
	const char *torn = NULL;
	*end = 0;
	size_t got = rd(&r, h, MAGIC_LEN);
	if (got < MAGIC_LEN || memcmp(h, LOG_MAGIC, MAGIC_LEN) != 0) {
		if (got < MAGIC_LEN && last && memcmp(h, LOG_MAGIC, got) == 0) {
			torn = "a header cut short";
		} else {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: not a tileatom log (bad header at offset 0)", path);
		}
		goto out;
	}
	*end = MAGIC_LEN;
	for (;;) {
		uint64_t at = r.off;
		got = rd(&r, h, REC_HEADER);
		if (got == 0)
			break;
		if (got < REC_HEADER) {
			torn = "a record header cut short";
			break;
		}
		if (sum32(h, 24) != get_u32(h + 24)) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: record header checksum mismatch at offset %" PRIu64
			                  " (damaged log); refusing to start",
			                  path, at);
			goto out;
		}
		uint32_t len = get_u32(h);
		uint64_t seq = get_u64(h + 4);
		ta_owner who = (ta_owner)get_u64(h + 12);
		if (len > cap) {
			uint8_t *np = realloc(payload, len);
			if (!np) {
				st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
				                  "%s: out of memory for a record of %" PRIu32
				                  " bytes at offset %" PRIu64,
				                  path, len, at);
				goto out;
			}
			payload = np;
			cap = len;
		}
		if (rd(&r, payload, len) < len) {
			torn = "a record cut short";
			break;
		}
		if (sum32(payload, len) != get_u32(h + 20)) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: record %" PRIu64 " at offset %" PRIu64
			                  ": payload checksum mismatch (damaged log); refusing "
			                  "to start",
			                  path, seq, at);
			goto out;
		}
		if (seq > snap_seq) {
			if (seq != *expected) {
				st =
				    ta_error_set(err, TA_INTERNAL,
				                 "%s: record at offset %" PRIu64
				                 " has sequence %" PRIu64 " where %" PRIu64
				                 " was expected (records are missing); refusing to "
				                 "start",
				                 path, at, seq, *expected);
				goto out;
			}
			ta_error rerr = {0};
			if (p->replay(p->replay_arg, who, payload, len, &rerr) != TA_OK) {
				st = ta_error_set(err, TA_INTERNAL,
				                  "%s: replaying record %" PRIu64
				                  " at offset %" PRIu64 " failed: %s",
				                  path, seq, at, rerr.msg);
				goto out;
			}
			(*expected)++;
			applied++;
		}
		*end = r.off;
	}
	if (torn && !last)
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: %s at offset %" PRIu64
		                  " but newer logs follow (damaged log); refusing to start",
		                  path, torn, *end);
out:
	if (st == TA_OK && torn && last)
		ta_log(TA_LOG_WARNING,
		       "%s: dropping a torn last record at offset %" PRIu64 " (%s, %" PRIu64
		       " bytes: a write interrupted by a crash); with --fsync always it was "
		       "never acknowledged",
		       path, *end, torn, r.off - *end);
	if (st == TA_OK)
		ta_log(TA_LOG_INFO, "%s: replayed %" PRIu64 " records", path, applied);
	free(payload);
	fclose(r.f);
	return st;
}

/* Opens (creating) the data directory and takes its lock. */
static ta_status open_dir(ta_persist *p, ta_error *err)
{
	if (mkdir(p->dir, 0700) != 0 && errno != EEXIST)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot create the data directory %s: %s",
		                    p->dir, strerror(errno));
	p->dir_fd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->dir_fd < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open the data directory %s: %s",
		                    p->dir, strerror(errno));
	p->lock_fd = openat(p->dir_fd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (p->lock_fd < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s/%s: %s", p->dir, LOCK_NAME,
		                    strerror(errno));
	if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0)
		return ta_error_set(err, TA_UNAVAILABLE,
		                    errno == EWOULDBLOCK
		                        ? "the data directory %s is in use by another tileatomd"
		                        : "cannot lock the data directory %s: %s",
		                    p->dir, strerror(errno));
	if (unlinkat(p->dir_fd, SNAP_TMP_NAME, 0) != 0 && errno != ENOENT)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot remove %s/%s: %s", p->dir,
		                    SNAP_TMP_NAME, strerror(errno));
	return TA_OK;
}

/* Loads the snapshot, replays the logs, and opens the newest log for appending. */
static ta_status recover(ta_persist *p, ta_error *err)
{
	uint64_t snap_seq = 0;
	ta_status st = load_snapshot(p, &snap_seq, err);
	if (st != TA_OK)
		return st;
	log_file *logs = NULL;
	size_t n = 0;
	st = list_logs(p, &logs, &n, err);
	if (st != TA_OK)
		return st;
	uint64_t expected = snap_seq + 1;
	uint64_t end = 0;
	for (size_t i = 0; i < n && st == TA_OK; i++)
		st = replay_log(p, &logs[i], i + 1 == n, snap_seq, &expected, &end, err);
	if (st == TA_OK && n > 0 && end >= MAGIC_LEN) {
		/* go on appending to the newest log, after its last whole record */
		const log_file *lf = &logs[n - 1];
		p->log_fd = openat(p->dir_fd, lf->name, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (p->log_fd < 0 || ftruncate(p->log_fd, (off_t)end) != 0 ||
		    fdatasync(p->log_fd) != 0)
			st =
			    ta_error_set(err, TA_UNAVAILABLE, "cannot open %s/%s for appending: %s",
			                 p->dir, lf->name, strerror(errno));
		p->log_first = lf->first;
		p->log_bytes = end;
	} else if (st == TA_OK) {
		/* no log yet (or only a torn header): start one */
		if (n > 0 && unlinkat(p->dir_fd, logs[n - 1].name, 0) != 0)
			st = ta_error_set(err, TA_UNAVAILABLE, "cannot remove %s/%s: %s", p->dir,
			                  logs[n - 1].name, strerror(errno));
		if (st == TA_OK) {
			p->log_fd = create_log(p, expected);
			if (p->log_fd < 0)
				st = ta_error_set(err, TA_UNAVAILABLE,
				                  "cannot create a log in %s: %s", p->dir,
				                  strerror(errno));
		}
		p->log_first = expected;
		p->log_bytes = MAGIC_LEN;
	}
	free(logs);
	if (st != TA_OK)
		return st;
	p->next_seq = expected;
	atomic_store(&p->durable_seq, expected - 1);
	uint32_t tiles = 0;
	uint64_t bytes = 0;
	ta_registry_stats(p->registry, &tiles, &bytes);
	ta_log(
	    TA_LOG_NOTICE,
	    "data directory %s: %" PRIu32 " tiles (%" PRIu64 " bytes) restored: snapshot through "
	    "record %" PRIu64 ", %" PRIu64 " records replayed; fsync %s",
	    p->dir, tiles, bytes, snap_seq, expected - 1 - snap_seq, ta_fsync_mode_name(p->mode));
	return TA_OK;
}

ta_status ta_persist_start(ta_persist **out, const char *dir, ta_fsync_mode mode,
                           uint64_t compact_size, const ta_persist_host *host, ta_error *err)
{
	*out = NULL;
	ta_persist *p = calloc(1, sizeof(*p));
	if (!p)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	p->dir_fd = p->lock_fd = p->log_fd = -1;
	p->mode = mode;
	p->compact_size = compact_size;
	p->compact_at = compact_size;
	p->buf_max = TA_PERSIST_DEFAULT_BUFFER_MAX;
	p->registry = host->registry;
	p->backend = host->backend;
	p->replay = host->replay;
	p->replay_arg = host->replay_arg;
	p->dir = strdup(dir);
	atomic_init(&p->durable_seq, 0);
	atomic_init(&p->failed, false);
	int rc = 0;
	for (int s = 0; rc == 0 && s < TA_PERSIST_STRIPES; s++)
		if (pthread_mutex_init(&p->stripes[s].mu, NULL) != 0 ||
		    pthread_cond_init(&p->stripes[s].cond, NULL) != 0)
			rc = -1;
	pthread_condattr_t cattr;
	bool cattr_ok = rc == 0 && pthread_condattr_init(&cattr) == 0 &&
	                pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC) == 0;
	if (!p->dir || !cattr_ok || pthread_mutex_init(&p->mu, NULL) != 0 ||
	    pthread_mutex_init(&p->snap_mu, NULL) != 0 ||
	    pthread_cond_init(&p->wake, &cattr) != 0 || pthread_cond_init(&p->rotated, NULL) != 0 ||
	    pthread_cond_init(&p->snap_cond, NULL) != 0 ||
	    pthread_cond_init(&p->drained, NULL) != 0 ||
	    pthread_cond_init(&p->sync_cond, &cattr) != 0) {
		/* a failed start exits the daemon: the primitives are not torn down */
		free(p->dir);
		free(p);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "cannot initialise the persistence locks");
	}
	pthread_condattr_destroy(&cattr);
	ta_status st = open_dir(p, err);
	if (st == TA_OK)
		st = recover(p, err);
	if (st == TA_OK) {
		rc = pthread_create(&p->writer, NULL, writer_main, p);
		if (rc == 0)
			p->writer_started = true;
		else
			st = ta_error_set(err, TA_INTERNAL, "cannot start the log writer: %s",
			                  strerror(rc));
	}
	if (st == TA_OK && mode == TA_FSYNC_EVERYSEC) {
		rc = pthread_create(&p->syncer, NULL, syncer_main, p);
		if (rc == 0)
			p->syncer_started = true;
		else
			st = ta_error_set(err, TA_INTERNAL, "cannot start the fsync thread: %s",
			                  strerror(rc));
	}
	if (st == TA_OK && compact_size) {
		rc = pthread_create(&p->compactor, NULL, compactor_main, p);
		if (rc == 0)
			p->compactor_started = true;
		else
			st = ta_error_set(err, TA_INTERNAL, "cannot start the compactor: %s",
			                  strerror(rc));
	}
	if (st != TA_OK) {
		ta_persist_close(p);
		return st;
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
		if (!atomic_load(&p->failed) && fdatasync(p->log_fd) != 0)
			ta_log(TA_LOG_ERR, "cannot fsync the log in %s: %s", p->dir,
			       strerror(errno));
		close(p->log_fd);
	}
	if (p->lock_fd >= 0)
		close(p->lock_fd);
	if (p->dir_fd >= 0)
		close(p->dir_fd);
	for (int s = 0; s < TA_PERSIST_STRIPES; s++) {
		pthread_mutex_destroy(&p->stripes[s].mu);
		pthread_cond_destroy(&p->stripes[s].cond);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->snap_mu);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->rotated);
	pthread_cond_destroy(&p->snap_cond);
	pthread_cond_destroy(&p->sync_cond);
	pthread_cond_destroy(&p->drained);
	free(p->buf);
	free(p->dir);
	free(p);
}
