/* dispatch.h: from one request frame to one response frame, on a loop or a worker thread:
 * the state every request may use (ta_service), a connection's (ta_session: its handshake,
 * its kept request, its shared buffers), a thread's (ta_dispatch_scratch), and the entry
 * points. Behind them: pipeline.c (decode with codec.c or protobuf-c, hand over, reply),
 * handlers.c (the checks in one order, the handlers), reply.c (the answer and the held
 * metrics), logged.c (--data-dir), service.c. Nothing here touches libuv. */
#ifndef TA_DAEMON_DISPATCH_H
#define TA_DAEMON_DISPATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "codec.h"
#include "metrics.h"
#include "log.h"
#include "registry.h"
#include "ta_auth.h"
#include "ta_backend.h"
#include "persist.h"
#include "ta_frame.h"

/* The request totals that the threads of one metrics shard count, padded to a cache line
 * so that event loops and workers counting each request do not fight over one line (and
 * do not slow the reads of the service's other fields); readers add the shards up. */
typedef struct ta_service_totals {
	atomic_uint_least64_t requests; /* requests handled */
	atomic_uint_least64_t errors;   /* requests answered with a status other than OK */
	atomic_uint_least64_t elements; /* elements processed by atomic and memory ops */
	uint64_t pad[5];                /* to 64 bytes */
} ta_service_totals;

/* State every request may use; shared by all worker threads. */
typedef struct ta_service {
	ta_backend *backend;                         /* runs plans, owns tile memory */
	ta_backend_info info;                        /* the backend's description (immutable) */
	ta_registry *registry;                       /* the named tiles */
	uint32_t max_frame;                          /* largest response payload sent, bytes */
	ta_service_totals totals[TA_METRICS_SHARDS]; /* per shard; ta_service_read_totals adds up */
	atomic_uint connections;    /* open client connections (kept by the server) */
	ta_metrics metrics;         /* per-request-kind counters (stats, --metrics) */
	bool replaying;             /* replaying logs: creates on gone devices placed by default */
	bool time_requests;         /* time each request (histograms; --metrics: two clocks) */
	const ta_auth_secret *auth; /* the secret TCP clients prove (NULL: no auth) */
	ta_log_limit auth_log;      /* rate limit of the authentication failure lines */
	struct ta_persist *persist; /* durability (--data-dir, persist.h); NULL: none */
	bool recheck_plans; /* re-check built plans in full (tests, fuzz), else prechecked */
} ta_service;

/* Who is on a connection and how far its handshake went. One per connection, used by one
 * request at a time (a connection runs its requests in order), so it needs no lock. */
typedef struct ta_session {
	bool hello_done;              /* Hello was answered: other requests may follow */
	bool auth_needed;             /* TCP to a daemon with a secret: Auth must succeed */
	bool authenticated;           /* Auth succeeded */
	ta_owner identity;            /* the peer's uid (Unix), else TA_OWNER_PUBLIC */
	uint8_t nonce[TA_AUTH_NONCE]; /* the challenge of this connection (auth_needed) */
	uint64_t serial;              /* connection number, for logs */
	ta_repeat repeat;             /* the last one-element atomic, kept to rerun undecoded */
	struct ta_shm_table *shm;     /* its shared buffers (shmbuf.h; NULL: none, e.g. TCP) */
} ta_session;

/* One encoded response and what to do after sending it. */
typedef struct ta_reply {
	uint8_t *frame;   /* malloc'd frame (length prefix included); NULL: nothing to send */
	size_t len;       /* bytes at frame */
	bool close_after; /* close the connection once the frame is sent */
	uint64_t log_seq; /* highest log record behind the frame (0: none; persist.h) */
} ta_reply;

/* Bytes of a dispatcher's arena kept from one request to the next. */
#define TA_DISPATCH_ARENA_KEEP (64u * 1024u)

/* What one thread needs to dispatch requests without allocating in steady state. */
typedef struct ta_dispatch_scratch {
	ta_arena arena;      /* decoded request, values returned, reset after each request */
	uint64_t log_seq;    /* log record of the last request, or a batch's highest; 0: none */
	ta_persist_run run;  /* the pipelined run's lock and records (persist.h) */
	bool in_run;         /* between ta_dispatch_begin_run and ta_dispatch_end_run */
	ta_tile_cache tiles; /* the thread's last tile lookup (registry.h) */
	bool pinning;        /* in a run: a kept request run at once leaves its tile in pin */
	ta_tile *pin;        /* the run's held tile reference: its repeats take none (NULL: none) */
	bool hold_metrics;   /* in an untimed run: kept requests' OK answers count into held */
	ta_metrics_held held; /* those counts (also the request totals' requests and elements) */
} ta_dispatch_scratch;

/* Outcome of ta_dispatch_run_session. */
typedef enum ta_dispatch_outcome {
	TA_DISPATCH_DONE = 0, /* the request ran (or failed); its response was appended */
	TA_DISPATCH_DEFER = 1 /* too large to run here: nothing happened, nothing appended */
} ta_dispatch_outcome;

/* Prepares the session of connection serial: a TCP connection (tcp) needs Auth when svc
 * has a secret (a fresh nonce is drawn); identity is the peer's uid (Unix) or
 * TA_OWNER_PUBLIC. Returns TA_OK, or TA_INTERNAL when no random nonce can be had. */
ta_status ta_session_init(ta_session *s, const ta_service *svc, bool tcp, ta_owner identity,
                          uint64_t serial, ta_error *err);
/* The identity a session's requests act for: TA_OWNER_SECRET once authenticated, else
 * its peer identity; TA_OWNER_ANY without a session (in-process callers). */
static inline ta_owner ta_session_who(const ta_session *s)
{
	if (!s)
		return TA_OWNER_ANY;
	return s->authenticated ? TA_OWNER_SECRET : s->identity;
}

/* The calling thread's shard of svc's request totals. */
static inline ta_service_totals *ta_service_my_totals(ta_service *svc)
{
	return &svc->totals[ta_metrics_shard()];
}
/* Adds svc's request totals up over the shards (each exact; not one atomic snapshot). */
void ta_service_read_totals(const ta_service *svc, uint64_t *requests, uint64_t *errors,
                            uint64_t *elements);
/* Fills *out for device d of svc's backend (ta_backend_device_stats); for a backend of one
 * device without its own counts, the tiles and bytes of the registry and every request
 * answered. False when d does not exist. */
bool ta_service_device_stats(ta_service *svc, int d, ta_device_stats *out);
/* Zeroes svc's request totals. */
void ta_service_reset_totals(ta_service *svc);

/* Prepares / frees a scratch. */
void ta_dispatch_scratch_init(ta_dispatch_scratch *s);
void ta_dispatch_scratch_free(ta_dispatch_scratch *s);

/* Handles one request payload of a connection's session and appends its response frame to
 * out. With inline_max >= 0, a request that would process more than inline_max elements
 * (or fill a tile of more) is not run: TA_DISPATCH_DEFER, with no effect at all, so that
 * the caller can hand it to a worker (which calls again with inline_max -1). A payload that
 * does not decode gets an INVALID_ARGUMENT response with id 0 and *close_after set.
 * Hello must come first, a session that needs Auth gets PERMISSION_DENIED for everything
 * but Hello and Auth until Auth succeeds, and tiles are used as the session's identity
 * (private tiles). session NULL: no handshake, TA_OWNER_ANY (in-process callers).
 * Thread-safe with one scratch per thread. */
ta_dispatch_outcome ta_dispatch_run_session(ta_service *svc, ta_dispatch_scratch *scratch,
                                            ta_session *session, const uint8_t *payload, size_t len,
                                            int64_t inline_max, ta_frame_buf *out,
                                            bool *close_after);

/* Handles the whole frames (length prefix included) at frames[0, len) in order, appending
 * their responses to out, until one asks to close the connection or out holds out_bound
 * bytes or more; returns the bytes of the frames handled (*nframes of them) and sets
 * *close_after. Consecutive small plans are collected and applied together
 * (ta_backend_apply_many: on CUDA one chain of a batch), each still answered in its
 * place; any other request runs only after the ones before it. session: as
 * ta_dispatch_run_session (NULL: none). Worker threads. */
size_t ta_dispatch_run_batch(ta_service *svc, ta_dispatch_scratch *scratch, ta_session *session,
                             const uint8_t *frames, size_t len, uint64_t out_bound,
                             ta_frame_buf *out, bool *close_after, uint32_t *nframes);

/* A connection's pipelined run of small plans on its event loop, applied through the
 * backend's apply_async so that the loop never waits for a device (pipeline.c). */
typedef struct ta_async_run ta_async_run;
/* What ta_async_run_step did. */
typedef enum ta_async_step {
	TA_ASYNC_PENDING = 0, /* plans went to apply_async: ta_async_run_finish after done */
	TA_ASYNC_RAN = 1,     /* frames were answered, nothing is in flight */
	TA_ASYNC_REST = 2     /* the first frame is not a small plan: nothing done; the
	                         frames from it on go to a worker (ta_dispatch_run_batch) */
} ta_async_step;
/* A run for connections of svc's backend (one per connection, reused), or NULL when memory
 * is short. */
ta_async_run *ta_async_run_new(ta_service *svc);
/* Frees a run (none in flight; NULL: nothing). */
void ta_async_run_free(ta_async_run *ar);
/* Takes the whole frames at frames[0, len) of session in order: collects the consecutive
 * small plans (a group, at most TA_DISPATCH_GROUP) and starts them with apply_async, whose
 * done(arg) (any thread) means ta_async_run_finish may run; stops before the first frame
 * that is not a small plan (a worker runs it), and after the first request answered
 * without being collected (an error: answered after the group). *used bytes (*nframes
 * frames) were taken; answers not waiting for the group go to out now, *close_after when
 * one asks to close. The frames must stay unchanged while the group is in flight. Without
 * --data-dir only (with it: TA_ASYNC_REST). The loop thread. */
ta_async_step ta_async_run_step(ta_async_run *ar, ta_session *session, const uint8_t *frames,
                                size_t len, ta_frame_buf *out, bool *close_after, size_t *used,
                                uint32_t *nframes, void (*done)(void *arg), void *arg);
/* After the done of a TA_ASYNC_PENDING step: appends the group's answers in order (and the
 * answer held after them) to the step's out; sets *close_after when one asks to close. */
void ta_async_run_finish(ta_async_run *ar, bool *close_after);
/* Starts a pipelined run on scratch: the metrics of its repeated requests are added up and
 * published together by ta_dispatch_end_run (or before any other request); with
 * --data-dir (when no run is started), until ta_dispatch_end_run, the mutations run with
 * scratch keep their mutation lock between requests and give their log records to the log
 * together (ta_persist_run). ta_dispatch_run_batch makes its own run when none is
 * started. */
void ta_dispatch_begin_run(ta_service *svc, ta_dispatch_scratch *scratch);
/* Ends the run: its held metrics are published, its records go to the log and its lock is
 * released. Returns the highest log record behind its responses (0: none), or
 * TA_PERSIST_SEQ_LOST: they must not leave (ta_persist_durable). Call before any response
 * of the run can leave. */
uint64_t ta_dispatch_end_run(ta_service *svc, ta_dispatch_scratch *scratch);

/* Appends an error response for request id (0 when unknown) to out; returns close_after,
 * or true when not even that could be appended. */
bool ta_dispatch_error_append(ta_service *svc, uint64_t id, ta_status code, const char *msg,
                              bool close_after, ta_frame_buf *out);

/* Initialises svc around a backend and a registry (counters zero). */
void ta_service_init(ta_service *svc, ta_backend *backend, ta_registry *registry,
                     uint32_t max_frame);

/* Handles one request payload (the bytes of one frame) and fills *out. A payload that
 * does not decode as a Request gets an INVALID_ARGUMENT response with id 0 and
 * close_after set. Thread-safe. */
void ta_dispatch_frame(ta_service *svc, const uint8_t *payload, size_t len, ta_reply *out);

/* ta_dispatch_frame for a connection's session (see ta_dispatch_run_session; NULL: none),
 * taking ownership of a malloc'd payload, freed once the request ran. */
void ta_dispatch_frame_owned_session(ta_service *svc, ta_session *session, uint8_t *payload,
                                     size_t len, ta_reply *out);

#endif /* TA_DAEMON_DISPATCH_H */
