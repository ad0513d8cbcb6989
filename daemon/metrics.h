/* metrics.h: tileatomd's per-request-kind counters (requests, errors, elements, bytes in and
 * out, a latency histogram), kept with relaxed atomics so that the request path takes no
 * lock and allocates nothing. One snapshot function reads them for both places that show
 * them: the Stats response (tileatom-cli stats) and the Prometheus endpoint
 * (metrics_http.c), so that the two always agree. */
#ifndef TA_DAEMON_METRICS_H
#define TA_DAEMON_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "arena.h"
#include "ta_types.h"
#include "tileatom.pb-c.h"

/* Finite upper bounds of the latency histogram (the last bucket is +Inf). */
#define TA_METRICS_BUCKETS 14

/* Upper bounds (inclusive) of the latency buckets, nanoseconds, ascending. */
extern const uint64_t ta_metrics_bucket_ns[TA_METRICS_BUCKETS];

/* Counters of one request kind, padded to whole cache lines (no _Alignas: the service
 * holding them comes from malloc) so that two kinds' hot counters rarely share one. */
typedef struct ta_kind_metrics {
	atomic_uint_least64_t requests;   /* requests answered */
	atomic_uint_least64_t errors;     /* answered with a status other than OK */
	atomic_uint_least64_t elements;   /* elements processed by the backend */
	atomic_uint_least64_t bytes_in;   /* request payload bytes */
	atomic_uint_least64_t bytes_out;  /* response frame bytes */
	atomic_uint_least64_t latency_ns; /* sum of the latencies */
	atomic_uint_least64_t bucket[TA_METRICS_BUCKETS + 1];     /* requests per latency bucket
	                                                              (not cumulative; last: +Inf) */
	uint64_t pad[(8 - (6 + TA_METRICS_BUCKETS + 1) % 8) % 8]; /* to a multiple of 64 bytes */
} ta_kind_metrics;

/* Copies of the counters that threads add to: a thread always uses the same one, so that
 * threads counting requests of one kind do not fight over a cache line; readers add the
 * copies up. The first TA_METRICS_SHARDS - 1 threads that count each own one and add to it
 * with a plain load and store (ta_counter_add: no locked instruction, which would wait for
 * every store before it); later threads share the last one and add atomically. */
#define TA_METRICS_SHARDS 64

/* The counters of every request kind (index: ta_req_kind; TA_REQ_NONE counts requests
 * that did not decode or had no body), in TA_METRICS_SHARDS copies. */
typedef struct ta_metrics {
	ta_kind_metrics shard[TA_METRICS_SHARDS][TA_REQ_END]; /* per thread group, per kind */
} ta_metrics;

/* A plain copy of one kind's counters. */
typedef struct ta_kind_snapshot {
	uint64_t requests;                       /* requests answered */
	uint64_t errors;                         /* of them, answered with an error */
	uint64_t elements;                       /* elements processed */
	uint64_t bytes_in;                       /* request payload bytes */
	uint64_t bytes_out;                      /* response frame bytes */
	uint64_t latency_ns;                     /* sum of the latencies, ns */
	uint64_t bucket[TA_METRICS_BUCKETS + 1]; /* per bucket, not cumulative */
} ta_kind_snapshot;

/* A latency meaning "not timed": the request is counted but not put in the histogram. */
#define TA_METRICS_UNTIMED UINT64_MAX

/* Nanoseconds from t0 to t1 (0 when the clock went backwards). */
static inline uint64_t ta_elapsed_ns(const struct timespec *t0, const struct timespec *t1)
{
	int64_t ns = (int64_t)(t1->tv_sec - t0->tv_sec) * 1000000000 + (t1->tv_nsec - t0->tv_nsec);
	return ns > 0 ? (uint64_t)ns : 0;
}

/* The latency of a request that started at *t0 when timed (reads the clock now), else
 * TA_METRICS_UNTIMED (no clock reading: they cost more than the counters). */
static inline uint64_t ta_metrics_since(bool timed, const struct timespec *t0)
{
	if (!timed)
		return TA_METRICS_UNTIMED;
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return ta_elapsed_ns(t0, &t1);
}

/* The shard the calling thread counts in (0 .. TA_METRICS_SHARDS - 1; given at its first
 * call, then always the same). */
unsigned ta_metrics_shard(void);

/* Whether the calling thread owns its shard (set by its first ta_metrics_shard). */
extern _Thread_local bool ta_metrics_shard_owned;

/* Adds v to counter c of the calling thread's shard (taken with ta_metrics_shard): a
 * plain load and store when the thread owns the shard, else an atomic add. */
static inline void ta_counter_add(atomic_uint_least64_t *c, uint64_t v)
{
	if (ta_metrics_shard_owned)
		atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
		                      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* Counts of OK answers of one kind that a thread holds back during a pipelined run and
 * then adds to a ta_metrics at once (ta_metrics_add_held): a few atomic adds a run instead
 * of four a request. Untimed requests only. */
typedef struct ta_metrics_held {
	ta_req_kind kind;   /* the kind counted */
	uint64_t requests;  /* answers held (0: none) */
	uint64_t elements;  /* elements processed */
	uint64_t bytes_in;  /* request payload bytes */
	uint64_t bytes_out; /* response frame bytes */
} ta_metrics_held;

/* Adds the held counts to m (ta_metrics_record of each of them, untimed, at once) and
 * empties h. */
void ta_metrics_add_held(ta_metrics *m, ta_metrics_held *h);

/* Records one answered request of kind (out-of-table kinds count as TA_REQ_NONE); a
 * latency of TA_METRICS_UNTIMED leaves the histogram and the latency sum alone. Relaxed
 * atomic adds only; safe from any thread. */
void ta_metrics_record(ta_metrics *m, ta_req_kind kind, bool error, uint64_t elements,
                       uint64_t bytes_in, uint64_t bytes_out, uint64_t latency_ns);

/* Adds the counters of kind up over the shards into *out. */
void ta_metrics_read(const ta_metrics *m, ta_req_kind kind, ta_kind_snapshot *out);

/* Fills the per-kind part of a Stats response (kinds, latency_bounds_ns) from m, with
 * memory from arena (the request's). Returns false when the arena is out of memory. */
bool ta_metrics_fill_stats(const ta_metrics *m, ta_arena *arena, Tileatom__StatsResponse *s);

/* The name a kind is shown under (ta_req_name; "invalid" for TA_REQ_NONE). */
const char *ta_metrics_kind_name(ta_req_kind kind);

#endif /* TA_DAEMON_METRICS_H */
