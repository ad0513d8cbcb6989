/* persist.h: durability of tileatomd's tiles (--data-dir). The data directory holds a
 * snapshot of every tile and where it lived, append-only logs of the mutating requests
 * applied since and a logmark (how much of the current log is known durable); persist_int.h
 * gives the formats. persist.c starts and closes the whole; the log is persist_log.c,
 * snapshots persist_snapshot.c, the logmark persist_mark.c, and startup recovery (replay,
 * and what a damaged or cut directory refuses) persist_load.c.
 *
 * Ordering: a mutating request takes one of TA_PERSIST_STRIPES locks, chosen by its tile's
 * name, before it looks the tile up and keeps it until its record is appended, so that the
 * records of one tile are in the order of application. Requests of one op whose result does
 * not depend on their order (ta_op_order_independent: integer add, sub, min, max, and, or,
 * xor) share it with requests of the same op (an add and a max do not commute); every other
 * mutation, and a snapshot (every stripe), holds it alone. A pipelined run (ta_persist_run)
 * keeps the lock between requests that need the same one, and appends their records
 * together before releasing it.
 *
 * The writer thread writes the records in sequence order; with --fsync always the loop
 * holds responses until their records are durable (ta_persist_durable); persist_log.c says
 * how each mode syncs and what happens when writing fails. */
#ifndef TA_DAEMON_PERSIST_H
#define TA_DAEMON_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "registry.h"
#include "ta_backend.h"
#include "ta_types.h"

struct ta_service;

/* Default bound on the log bytes waiting for the writer (ta_persist_set_buffer_max). */
#define TA_PERSIST_DEFAULT_BUFFER_MAX (UINT64_C(64) << 20)

/* Mutation locks (a power of two). */
#define TA_PERSIST_STRIPES 64

/* When the log is flushed to stable storage (Redis's appendfsync). */
typedef enum ta_fsync_mode {
	TA_FSYNC_NO = 0,       /* never fsync; the kernel writes back when it likes */
	TA_FSYNC_EVERYSEC = 1, /* fdatasync once a second (the default) */
	TA_FSYNC_ALWAYS = 2    /* acknowledge a mutation only once its record is durable */
} ta_fsync_mode;

typedef struct ta_persist ta_persist;

/* A held mutation lock (from ta_persist_run_lock). */
typedef struct ta_persist_hold {
	int stripe;                 /* the stripe held, or -1 for all of them */
	int kind;                   /* shared with requests of this kind (>= 0), or -1: alone */
	bool held;                  /* a lock is held */
	bool kept;                  /* it is the lock run kept from a request before */
	struct ta_persist_run *run; /* the run that keeps the lock and takes the record (NULL:
	                               released and appended at once) */
} ta_persist_hold;

/* The sequence number ta_persist_run_end gives for a run whose records could not all be
 * buffered (out of memory): its responses must not leave (ta_persist_durable says -1). */
#define TA_PERSIST_SEQ_LOST UINT64_MAX

/* Most bytes of records a run keeps before giving them to the log (a larger record goes
 * to the log alone). */
#define TA_PERSIST_RUN_BYTES (64u * 1024u)

/* One thread's pipelined run (one read of a connection, or a worker's batch): the lock it
 * keeps, and its records waiting to go to the log together before that lock is released.
 * Nothing of it may be acknowledged before ta_persist_run_end. One thread at a time. */
typedef struct ta_persist_run {
	ta_persist_hold hold;       /* the lock kept between requests (hold.held: one is) */
	char name[TA_NAME_MAX + 1]; /* a tile name of hold's stripe ("": none known) */
	const void *checked;        /* the tile last found order independent for hold.kind
	                               under hold (the caller's note; reset on release) */
	int shared_op;              /* the caller's note: an op found order independent on
	                               integer tiles (0: none yet) */
	uint8_t *buf;               /* records without their sequence numbers (malloc'd) */
	size_t len;                 /* bytes at buf */
	size_t cap;                 /* bytes allocated at buf */
	uint64_t last_seq;          /* the highest sequence number given to its records */
	bool lost;                  /* records could not be buffered: see TA_PERSIST_SEQ_LOST */
} ta_persist_run;

/* What a snapshot wrote. */
typedef struct ta_persist_snapinfo {
	uint32_t tiles;       /* tiles in the snapshot */
	uint64_t bytes;       /* bytes of the snapshot file */
	uint64_t seq;         /* sequence number of the last record it includes */
	uint64_t log_removed; /* bytes of log files removed */
} ta_persist_snapinfo;

/* Parses "always", "everysec" or "no"; returns 0 or -1. */
int ta_fsync_mode_parse(const char *text, ta_fsync_mode *out);
/* Name of a mode. */
const char *ta_fsync_mode_name(ta_fsync_mode mode);

/* How a data directory is kept (ta_persist_open). */
typedef struct ta_persist_settings {
	ta_fsync_mode mode;    /* when the log is fsynced */
	uint64_t compact_size; /* log bytes after which a snapshot compacts the log (0: never) */
	bool accept_log_loss;  /* start although records once durable are missing (saying what
	                          was lost, then writing a snapshot) instead of refusing */
} ta_persist_settings;

/* Opens (creating, mode 0700) and locks the data directory dir, loads its snapshot into svc's
 * registry, replays its logs through svc's dispatch (not counted in svc's statistics) and
 * starts the threads; call before svc->persist is set. TA_OK with *out set, or an error
 * naming the file and offset or what was lost (the caller exits). */
ta_status ta_persist_open(ta_persist **out, const char *dir, const ta_persist_settings *set,
                          struct ta_service *svc, ta_error *err);
/* ta_registry_create_placed for a tile that recovery restores where was says it lived
 * (TA_PLACE_DEFAULT or NULL: nothing recorded); when that cannot be met (a device lacking or
 * failed, out of memory) the default placement (--placement) places it instead, with a
 * warning naming the tile, where it was, where it went and why. */
ta_status ta_persist_create_restored(ta_registry *reg, const char *name, const ta_tile_shape *shape,
                                     ta_owner owner, const ta_placement *was, ta_tile **out,
                                     ta_error *err);
/* Stops the threads after writing and fsyncing every record, and frees p. */
void ta_persist_close(ta_persist *p);

/* Attaches the loop: cb(arg) runs on it whenever records became durable (or writing
 * failed). The handle does not keep the loop alive. Returns 0 or a libuv error. */
int ta_persist_attach(ta_persist *p, uv_loop_t *loop, void (*cb)(void *arg), void *arg);
/* Closes the loop handle (run the loop once more for the close to complete). */
void ta_persist_detach(ta_persist *p);

/* Takes the mutation lock of tile name (NULL: every stripe, alone) for a request of run
 * (NULL: none): shared with requests of the same kind >= 0 (one op that commutes with
 * itself), alone with kind -1. The lock run keeps serves when it is the one needed
 * (hold->kept); any other is released first, with the run's records. Fails with
 * UNAVAILABLE, naming the problem, while the log cannot be written. */
ta_status ta_persist_run_lock(ta_persist *p, ta_persist_run *run, const char *name, int kind,
                              ta_persist_hold *hold, ta_error *err);
/* Releases a lock from ta_persist_run_lock (no-op when none is held). With hold->run set, the
 * run keeps a stripe's lock for its next request (ta_persist_run_release lets it go). */
void ta_persist_unlock(ta_persist *p, ta_persist_hold *hold);
/* Appends the record of an applied request (its payload, and who: the identity it acted
 * for, which replay acts for again); call with its lock held. Returns its sequence number,
 * or 0 with err set when memory is short (persistence is then marked failed). */
uint64_t ta_persist_append(ta_persist *p, ta_owner who, const uint8_t *payload, size_t len,
                           ta_error *err);
/* Logs an applied request under hold (its lock held): with hold->run, into the run (*seq
 * 0: the number is given when the run's records go to the log), else ta_persist_append
 * (*seq: its number). TA_OK, or an error (err set) when memory is short. */
ta_status ta_persist_record(ta_persist *p, ta_persist_hold *hold, ta_owner who,
                            const uint8_t *payload, size_t len, uint64_t *seq, ta_error *err);

/* Prepares an empty run. */
void ta_persist_run_init(ta_persist_run *run);
/* Appends the run's records to the log and releases its lock (the run goes on). */
void ta_persist_run_release(ta_persist *p, ta_persist_run *run);
/* Ends a run: ta_persist_run_release, then returns the highest sequence number given to
 * its records (0: none), or TA_PERSIST_SEQ_LOST; the run is empty again. */
uint64_t ta_persist_run_end(ta_persist *p, ta_persist_run *run);
/* Frees a run's memory and empties it (after ta_persist_run_end). */
void ta_persist_run_free(ta_persist_run *run);

/* Marks persistence failed (what: the reason, logged once): mutations are refused from now
 * on. For a request applied whose record cannot be made. */
void ta_persist_fail(ta_persist *p, const char *what);
/* For the loop: 1 when the response of record seq may leave (durable, or the fsync mode does
 * not wait), 0 not yet, -1 when seq is TA_PERSIST_SEQ_LOST or (always) writing failed before
 * it became durable: the connection answers with an error and closes. */
int ta_persist_durable(ta_persist *p, uint64_t seq);

/* Copies what made persistence fail (e.g. "persistence log write failed: File too large")
 * into buf; "" when it has not failed. */
void ta_persist_failure(ta_persist *p, char *buf, size_t n);
/* Bounds the log bytes waiting for the writer (0: unbounded; the default is
 * TA_PERSIST_DEFAULT_BUFFER_MAX): an append that would pass it waits until the writer has
 * taken the buffer (a single larger record still goes in alone). */
void ta_persist_set_buffer_max(ta_persist *p, uint64_t bytes);
/* For tests and stats: the most log bytes that waited for the writer at once, and how many
 * appends waited for the bound. */
void ta_persist_buffer_stats(ta_persist *p, uint64_t *high, uint64_t *waits);

/* Whether who may ask for a snapshot (it stalls every mutation and rewrites the data
 * directory): the daemon's own user, root, the in-process callers (TA_OWNER_ANY) and an
 * authenticated TCP client (TA_OWNER_SECRET); not other users, nor unauthenticated ones. */
bool ta_persist_may_snapshot(ta_owner who);

/* Writes a snapshot of every tile and removes the logs it covers. Thread-safe (one at a
 * time); blocks mutations while the tiles are read. */
ta_status ta_persist_snapshot(ta_persist *p, ta_persist_snapinfo *info, ta_error *err);

#endif /* TA_DAEMON_PERSIST_H */
