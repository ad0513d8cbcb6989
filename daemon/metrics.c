/* metrics.c: the per-request-kind counters of metrics.h. Recording is a handful of adds
 * (ta_counter_add) on the calling thread's shard of the kind's counters and a short scan
 * of the bucket bounds; reading adds the shards up (each counter is exact; the set is not
 * one atomic snapshot). */
#include "metrics.h"

#include <string.h>

/* The shard the next thread that counts gets. */
static atomic_uint next_shard = 0;
/* This thread's shard; -1 until it first counts. */
static _Thread_local int my_shard = -1;
_Thread_local bool ta_metrics_shard_owned = false;

const uint64_t ta_metrics_bucket_ns[TA_METRICS_BUCKETS] = {
    1000,   2500,   5000,    10000,   25000,    50000,     100000,
    250000, 500000, 1000000, 5000000, 25000000, 100000000, 1000000000,
};

unsigned ta_metrics_shard(void)
{
	if (my_shard < 0) {
		unsigned k = atomic_fetch_add_explicit(&next_shard, 1, memory_order_relaxed);
		ta_metrics_shard_owned = k < TA_METRICS_SHARDS - 1;
		my_shard = ta_metrics_shard_owned ? (int)k : TA_METRICS_SHARDS - 1;
	}
	return (unsigned)my_shard;
}

/* Adds to kind's counters (out-of-table kinds: TA_REQ_NONE's) in the calling thread's
 * shard; returns them. */
static inline ta_kind_metrics *count(ta_metrics *m, ta_req_kind kind, uint64_t requests,
                                     uint64_t errors, uint64_t elements, uint64_t bytes_in,
                                     uint64_t bytes_out)
{
	ta_kind_metrics *c = &m->shard[ta_metrics_shard()][ta_req_valid(kind) ? kind : TA_REQ_NONE];
	ta_counter_add(&c->requests, requests);
	if (errors)
		ta_counter_add(&c->errors, errors);
	if (elements)
		ta_counter_add(&c->elements, elements);
	ta_counter_add(&c->bytes_in, bytes_in);
	ta_counter_add(&c->bytes_out, bytes_out);
	return c;
}

void ta_metrics_record(ta_metrics *m, ta_req_kind kind, bool error, uint64_t elements,
                       uint64_t bytes_in, uint64_t bytes_out, uint64_t latency_ns)
{
	ta_kind_metrics *c = count(m, kind, 1, error, elements, bytes_in, bytes_out);
	if (latency_ns == TA_METRICS_UNTIMED)
		return;
	int b = 0;
	while (b < TA_METRICS_BUCKETS && latency_ns > ta_metrics_bucket_ns[b])
		b++;
	ta_counter_add(&c->latency_ns, latency_ns);
	ta_counter_add(&c->bucket[b], 1);
}

void ta_metrics_add_held(ta_metrics *m, ta_metrics_held *h)
{
	if (h->requests == 0)
		return;
	(void)count(m, h->kind, h->requests, 0, h->elements, h->bytes_in, h->bytes_out);
	*h = (ta_metrics_held){TA_REQ_NONE, 0, 0, 0, 0};
}

void ta_metrics_read(const ta_metrics *m, ta_req_kind kind, ta_kind_snapshot *out)
{
	memset(out, 0, sizeof(*out));
	if (kind != TA_REQ_NONE && !ta_req_valid(kind))
		return;
	for (int i = 0; i < TA_METRICS_SHARDS; i++) {
		/* atomic loads of const objects: C11 takes a non-const pointer */
		ta_kind_metrics *c = (ta_kind_metrics *)&m->shard[i][kind];
		out->requests += atomic_load_explicit(&c->requests, memory_order_relaxed);
		out->errors += atomic_load_explicit(&c->errors, memory_order_relaxed);
		out->elements += atomic_load_explicit(&c->elements, memory_order_relaxed);
		out->bytes_in += atomic_load_explicit(&c->bytes_in, memory_order_relaxed);
		out->bytes_out += atomic_load_explicit(&c->bytes_out, memory_order_relaxed);
		out->latency_ns += atomic_load_explicit(&c->latency_ns, memory_order_relaxed);
		for (int b = 0; b <= TA_METRICS_BUCKETS; b++)
			out->bucket[b] += atomic_load_explicit(&c->bucket[b], memory_order_relaxed);
	}
}

bool ta_metrics_fill_stats(const ta_metrics *m, ta_arena *arena, Tileatom__StatsResponse *s)
{
	size_t n = TA_REQ_END; /* at most: TA_REQ_NONE and the valid kinds */
	Tileatom__KindStats *items = ta_arena_alloc(arena, n * sizeof(*items));
	Tileatom__KindStats **ptrs = ta_arena_alloc(arena, n * sizeof(*ptrs));
	uint64_t *buckets = ta_arena_alloc(arena, n * (TA_METRICS_BUCKETS + 1) * sizeof(uint64_t));
	if (!items || !ptrs || !buckets)
		return false;
	size_t i = 0;
	for (int k = 0; k < TA_REQ_END; k++) {
		if (k != TA_REQ_NONE && !ta_req_valid((ta_req_kind)k))
			continue;
		ta_kind_snapshot snap;
		ta_metrics_read(m, (ta_req_kind)k, &snap);
		Tileatom__KindStats *it = &items[i];
		tileatom__kind_stats__init(it);
		it->kind = (char *)ta_metrics_kind_name((ta_req_kind)k);
		it->requests = snap.requests;
		it->errors = snap.errors;
		it->elements = snap.elements;
		it->bytes_in = snap.bytes_in;
		it->bytes_out = snap.bytes_out;
		it->latency_ns = snap.latency_ns;
		it->n_latency_buckets = TA_METRICS_BUCKETS + 1;
		it->latency_buckets = buckets + i * (TA_METRICS_BUCKETS + 1);
		memcpy(it->latency_buckets, snap.bucket, sizeof(snap.bucket));
		ptrs[i++] = it;
	}
	s->n_kinds = i;
	s->kinds = ptrs;
	s->n_latency_bounds_ns = TA_METRICS_BUCKETS;
	s->latency_bounds_ns = (uint64_t *)ta_metrics_bucket_ns;
	return true;
}

const char *ta_metrics_kind_name(ta_req_kind kind)
{
	return kind == TA_REQ_NONE ? "invalid" : ta_req_name(kind);
}
