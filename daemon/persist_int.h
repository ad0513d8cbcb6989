/* persist_int.h: the state and the file formats shared by the parts of tileatomd's
 * durability, persist*.c (private to them; persist.h is the interface and lists them).
 *
 * Files (all integers little-endian; a checksum is the low 32 bits of xxHash's XXH3-64):
 *   snapshot.tas  "TASNAP04", u64 seq (last record included), u32 tile count, then per tile
 *                 u16 name length, name, i64 owner (ta_owner: TA_OWNER_PUBLIC or the
 *                 identity a private tile belongs to), u32 dtype, u32 rank, i64
 *                 extents[rank], u64 bytes, where it lived: u32 parts (1: wholly on one
 *                 device; 1..TA_MAX_DEVICES) and per part u32 device ordinal, i64 first row,
 *                 i64 end row (its rows [first, end) of the first axis; the parts in row
 *                 order cover them all), then the elements (row-major); then u32 checksum
 *                 of everything before it. Written as snapshot.tas.tmp, fsynced, renamed,
 *                 directory fsynced. Its seq is the log position it covers: the records
 *                 after it are in log-<seq + 1>.tal, made durable before the snapshot is
 *                 renamed into place, so a snapshot without that log means records lost.
 *                 "TASNAP03": the same without the parts (still loaded: its tiles are placed
 *                 by the default placement).
 *   log-<16 hex digits>.tal  (the digits: the sequence number of its first record)
 *                 "TALOG005", then records: u32 payload length, u64 seq, i64 who (the
 *                 identity the request acted for: replay acts for it again, so that private
 *                 tiles keep their owner), u32 checksum of the payload, u32 checksum of the 24
 *                 bytes before it, the payload (the Request as it came on the wire, without
 *                 the frame's length prefix; a create's placement field rewritten to where
 *                 the tile went, as ta_tile_where_format writes it: "1", "0:[0,3) 1:[3,5)",
 *                 which its replay puts it back on). Consecutive logs continue each other's
 *                 sequence numbers. Older formats are still replayed, never appended to
 *                 again (a TALOG005 log starts after them), so an older daemon refuses the
 *                 directory: "TALOG004", whose creates hold the placement the client asked
 *                 for (replayed as asked: "" by the default placement), and "TALOG003", the
 *                 same, written by a tileatomd that kept no logmark.
 *   logmark       what of the current log is known durable: two slots of MARK_SLOT bytes at
 *                 offsets 0 and MARK_STRIDE, written in turn in place (pwrite, fdatasync; a
 *                 write torn by a crash spoils one slot, the other stays whole): "TAMARK01",
 *                 u64 count (the whole slot with the higher count is the mark), u64 first
 *                 (the log: log-<first>.tal), u64 bytes (its length known durable), u64 last
 *                 (the sequence number of the last record within them; first - 1: none), u32
 *                 checksum of the 40 bytes before it, u32 zero. Created at its full size as
 *                 logmark.tmp, fsynced, renamed, directory fsynced. Written when a log is
 *                 started (before anything is appended to it), once a second while the
 *                 durable length grows (always: what the writer fdatasynced; everysec: what
 *                 the syncer did), at start and at a clean stop; never more than is durable,
 *                 so a crash never leaves a log shorter than its mark.
 *   lock          flock'ed while a daemon uses the directory. */
#ifndef TA_DAEMON_PERSIST_INT_H
#define TA_DAEMON_PERSIST_INT_H

#include <endian.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>
#include <xxhash.h>

#include "persist.h"

/* Applies one logged request again at start (replay), acting for who; TA_OK or an error
 * (the daemon's answer when it was not OK). */
typedef ta_status (*ta_persist_replay_fn)(void *arg, ta_owner who, const uint8_t *payload,
                                          size_t len, ta_error *err);

/* Magic at the start of a snapshot and of a log. */
#define SNAP_MAGIC    "TASNAP04"
#define SNAP_MAGIC_V3 "TASNAP03"
#define LOG_MAGIC     "TALOG005"
#define LOG_MAGIC_V4  "TALOG004"
#define LOG_MAGIC_V3  "TALOG003"
#define MARK_MAGIC    "TAMARK01"
#define MAGIC_LEN     8
/* Bytes of a logmark slot, and the distance between the two slots (a page apart, so that a
 * torn write of one, even of a whole 4 KiB sector, leaves the other alone). */
#define MARK_SLOT   48
#define MARK_STRIDE 4096
/* Bytes of a record header. */
#define REC_HEADER 28
/* File names in the data directory. */
#define SNAP_NAME     "snapshot.tas"
#define SNAP_TMP_NAME "snapshot.tas.tmp"
#define LOCK_NAME     "lock"
#define MARK_NAME     "logmark"
#define MARK_TMP_NAME "logmark.tmp"
/* printf format of a log's name, from its first sequence number (a uint64_t). */
#define LOG_NAME_FORMAT "log-%016" PRIx64 ".tal"
/* Bytes of tile data moved per backend plan when saving or loading (about). */
#define CHUNK_BYTES (4u << 20)

/* One mutation lock: held alone, or shared by requests of one kind (one op whose order
 * does not matter among themselves; add and max do not commute with each other). A waiter
 * stops new sharers from entering, so that no one waits for ever behind a stream of one. */
typedef struct ta_stripe {
	pthread_mutex_t mu;  /* guards the fields below */
	pthread_cond_t cond; /* signalled when it is free, or taken by sharers */
	int holders;         /* requests holding it */
	int kind;            /* their kind (>= 0), or -1 when held alone */
	int waiting;         /* requests waiting to take it */
	uint64_t phase;      /* counts the times it was taken while free */
} ta_stripe;

/* What the logmark says (a slot's fields). */
typedef struct persist_mark {
	uint64_t count; /* which write of the mark this is (0: none yet) */
	uint64_t first; /* the log it covers: log-<first>.tal */
	uint64_t bytes; /* bytes of that log known durable */
	uint64_t last;  /* sequence number of the last record within them (first - 1: none) */
} persist_mark;

struct ta_persist {
	char *dir;                             /* the data directory */
	int dir_fd;                            /* open directory (for fsync) */
	int lock_fd;                           /* the flock'ed lock file */
	ta_fsync_mode mode;                    /* when to fsync */
	uint64_t compact_size;                 /* log bytes that start a compaction (0: never) */
	bool accept_log_loss;                  /* start although durable records are missing */
	bool loss_accepted;                    /* recovery accepted a loss (a snapshot follows) */
	bool started;                          /* ta_persist_open succeeded */
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
	uint64_t written_seq;                  /* last record written to the current log */
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
	pthread_t syncer;                      /* the fsync and logmark thread (always, everysec) */
	bool syncer_started;                   /* syncer needs joining */
	pthread_t compactor;                   /* the automatic compaction thread */
	bool compactor_started;                /* compactor needs joining */
	uv_async_t async;                      /* wakes the loop: records became durable */
	bool attached;                         /* async is initialised (guarded by mu) */
	void (*cb)(void *arg);                 /* the loop's callback */
	void *cb_arg;                          /* its argument */
	pthread_mutex_t mark_mu;               /* one logmark write at a time; guards mark */
	int mark_fd;                           /* the logmark (-1: none yet) */
	persist_mark mark;                     /* what it says now */
};

/* Little-endian encoders put_uN and decoders get_uN of N-bit integers (N: 16, 32, 64). */
#define LE_CODEC(N)                                                                                \
	static inline void put_u##N(uint8_t *b, uint##N##_t v)                                     \
	{                                                                                          \
		v = htole##N(v);                                                                   \
		memcpy(b, &v, sizeof(v));                                                          \
	}                                                                                          \
	static inline uint##N##_t get_u##N(const uint8_t *b)                                       \
	{                                                                                          \
		uint##N##_t v;                                                                     \
		memcpy(&v, b, sizeof(v));                                                          \
		return le##N##toh(v);                                                              \
	}
LE_CODEC(16)
LE_CODEC(32)
LE_CODEC(64)

/* Checksum of n bytes: the low 32 bits of XXH3-64 (fast on the short records of the log). */
static inline uint32_t sum32(const void *data, size_t n)
{
	return (uint32_t)XXH3_64bits(data, n);
}

/* persist_log.c: marks persistence failed (p->mu held): logged once per failure, the loop
 * told. final: the failure lasts until a restart (else the writer tries again). */
void persist_set_failed(ta_persist *p, const char *what, int errnum, bool final);
/* persist_mark.c: creates (truncating; flags: the open mode) the file name of p's directory
 * holding the n bytes at data, durable with its directory entry; with tmp, written as tmp
 * and renamed (removed on failure). Returns the fd, or -1 with errno set. */
int persist_new_file(ta_persist *p, const char *tmp, const char *name, int flags, const void *data,
                     size_t n);
/* persist_log.c: grows *buf (*cap bytes allocated) to hold want bytes, doubling from *cap or
 * first, at most limit (0: none); false when memory is short. */
bool persist_grow(uint8_t **buf, size_t *cap, size_t want, size_t first, size_t limit);
/* persist_log.c: creates the log starting at first holding its magic (persist_new_file). */
int persist_create_log(ta_persist *p, uint64_t first);

/* persist_mark.c: reads the logmark into *out (kept open in p->mark_fd). Returns 1 (read),
 * 0 (there is none), 2 (neither slot is whole: damaged) or -errno. */
int persist_mark_read(ta_persist *p, persist_mark *out);
/* persist_mark.c: records that log-<first>.tal holds bytes durable through record last
 * (creating the logmark when there is none); unless force, only when that says more than
 * the mark does now (a later log, or more of the same). 0 or an errno. */
int persist_mark_write(ta_persist *p, uint64_t first, uint64_t bytes, uint64_t last, bool force);

/* persist_snapshot.c: moves tile's elements through the backend in chunks of whole rows
 * (about CHUNK_BYTES) at *chunk (grown as needed; *cap: its size): LOAD hands each to io,
 * STORE has io fill it. Stops early with TA_OK when io returns false (the caller knows why). */
ta_status persist_tile_data(ta_backend *be, ta_tile *tile, ta_op op, uint8_t **chunk, size_t *cap,
                            bool (*io)(void *ctx, void *buf, size_t n), void *ctx, ta_error *err);

/* persist_log.c: the writer thread (arg: p): writes the buffered records (always: and
 * fdatasyncs them), starts the next log when asked, retries a failed write once a second. */
void *persist_writer_main(void *arg);
/* persist_log.c: the everysec fsync thread (arg: p), which also keeps the logmark. */
void *persist_syncer_main(void *arg);

/* persist_snapshot.c: the compactor thread (arg: p): writes a snapshot whenever the writer
 * finds the log over compact_size. */
void *persist_compactor_main(void *arg);

/* One log file found in the directory. */
typedef struct log_file {
	uint64_t first; /* the sequence number in its name */
	char name[64];  /* its name in the directory */
} log_file;

/* persist_log.c: lists the logs sorted by their first record into *out (*n; free it). */
ta_status persist_list_logs(ta_persist *p, log_file **out, size_t *n, ta_error *err);

/* persist_load.c: opens and locks the data directory, loads the snapshot, replays the logs
 * and opens the newest log for appending (or starts one). */
ta_status persist_recover(ta_persist *p, ta_error *err);

#endif /* TA_DAEMON_PERSIST_INT_H */
