/* check_contention.c: atomics under real contention on the CPU backend. Many threads add
 * into one element (integer fetch-add and float CAS loops) and must give the exact sum;
 * threads racing int32 max over shared elements with distinct, increasing values must
 * leave the exact maximum and pre-RMW values that form one unbroken chain of stored maxima
 * per element and round (a lost update shows as a wrong final value, a stale or repeated
 * pre-RMW value or a broken chain); a plan of 2^20 elements all adding into one element is
 * split over the worker pool and must count exactly, with every pre-RMW value seen exactly
 * once; several threads applying large plans at once share the pool; a cas-based counter
 * loses no update. TA_UNDER_VALGRIND=1 (set by make check-valgrind) shrinks the sizes. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ta_backend.h"
#include "ta_test_util.h"

/* The backend under test (created per test by the fixture). */
static ta_backend *be;

/* Scale divisor: 1 normally, larger under valgrind. */
static int scale = 1;

/* Fixture: a CPU backend with 4 workers. */
static void setup(void)
{
	ta_error err = {TA_OK, ""};
	const char *vg = getenv("TA_UNDER_VALGRIND");
	scale = vg && vg[0] == '1' ? 16 : 1;
	be = ta_cpu_backend_new(4, &err);
	ck_assert_msg(be != NULL, "ta_cpu_backend_new: %s", err.msg);
}

/* Fixture: destroys the backend. */
static void teardown(void)
{
	ta_backend_destroy(be);
	be = NULL;
}

/* What one hammering thread does. */
typedef struct hammer_arg {
	void *mem;       /* the tile (one element) */
	ta_dtype dtype;  /* tile dtype */
	ta_op op;        /* op applied */
	int rounds;      /* plans applied */
	int per_plan;    /* elements per plan (all at index 0) */
	const void *one; /* the scalar operand */
	ta_sem sem;      /* memory order */
	ta_status st;    /* first failure, TA_OK when none */
	char msg[256];   /* its message */
} hammer_arg;

/* Applies rounds indexed plans of per_plan elements, all into element 0. */
static void *hammer(void *p)
{
	hammer_arg *a = p;
	ta_tile_shape t = {.dtype = a->dtype, .rank = 1, .shape = {1}};
	int32_t *idx = calloc((size_t)a->per_plan, sizeof(int32_t));
	ta_error err = {TA_OK, ""};
	a->st = TA_OK;
	if (!idx) {
		a->st = TA_RESOURCE_EXHAUSTED;
		return NULL;
	}
	int64_t shape[1] = {a->per_plan};
	int64_t scalar[1] = {0};
	ta_request req;
	ta_request_init(&req);
	req.family = TA_FAMILY_INDEXED;
	req.op = a->op;
	req.addr = TA_ADDR_INDEXED;
	req.n_index = 1;
	req.sem = a->sem;
	req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, shape, idx);
	req.values = ta_tu_view(a->dtype, 0, scalar, a->one);
	ta_plan plan;
	for (int r = 0; r < a->rounds && a->st == TA_OK; r++) {
		ta_result res;
		a->st = ta_plan_build(&plan, &t, &req, &err);
		if (a->st == TA_OK)
			a->st = ta_backend_apply(be, a->mem, ta_dtype_size(a->dtype), &plan, &res,
			                         &err);
		if (a->st == TA_OK && res.applied != (uint64_t)a->per_plan) {
			a->st = TA_INTERNAL;
			snprintf(err.msg, sizeof(err.msg), "applied %llu",
			         (unsigned long long)res.applied);
		}
	}
	if (a->st != TA_OK)
		snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
	free(idx);
	return NULL;
}

/* Runs nthreads hammer threads on one element of dtype; returns the element's bits. */
static uint64_t run_hammers(ta_dtype dtype, ta_op op, const void *one, int nthreads, int rounds,
                            int per_plan, ta_sem sem)
{
	ta_error err = {TA_OK, ""};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, ta_dtype_size(dtype), &mem, &err), TA_OK);
	pthread_t th[16];
	hammer_arg args[16];
	ck_assert_int_le(nthreads, 16);
	for (int i = 0; i < nthreads; i++) {
		args[i] = (hammer_arg){.mem = mem,
		                       .dtype = dtype,
		                       .op = op,
		                       .rounds = rounds,
		                       .per_plan = per_plan,
		                       .one = one,
		                       .sem = sem};
		ck_assert_int_eq(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
	}
	for (int i = 0; i < nthreads; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_msg(args[i].st == TA_OK, "thread %d: %s: %s", i,
		              ta_status_name(args[i].st), args[i].msg);
	}
	ta_tile_shape t = {.dtype = dtype, .rank = 1, .shape = {1}};
	uint64_t out = 0;
	ck_assert_int_eq(ta_tu_tile_read(be, mem, ta_dtype_size(dtype), &t, &out, &err), TA_OK);
	ta_backend_tile_free(be, mem);
	return out;
}

START_TEST(test_threads_int64_add)
{
	int64_t one = 1;
	int rounds = 2000 / scale;
	uint64_t got = run_hammers(TA_DTYPE_I64, TA_OP_ADD, &one, 8, rounds, 3, TA_SEM_RELAXED);
	ck_assert_uint_eq(got, (uint64_t)8 * rounds * 3);
}
END_TEST

START_TEST(test_threads_uint32_sub_acq_rel)
{
	uint32_t one = 1;
	int rounds = 2000 / scale;
	uint64_t got = run_hammers(TA_DTYPE_U32, TA_OP_SUB, &one, 8, rounds, 2, TA_SEM_ACQ_REL);
	ck_assert_uint_eq(got, (uint32_t)(0u - (uint32_t)(8 * rounds * 2)));
}
END_TEST

START_TEST(test_threads_float32_add)
{
	/* a CAS loop per element; 1.0 sums are exact below 2^24 */
	float one = 1.0f;
	int rounds = 1000 / scale;
	uint64_t bits = run_hammers(TA_DTYPE_F32, TA_OP_ADD, &one, 8, rounds, 2, TA_SEM_RELAXED);
	float got;
	uint32_t b32 = (uint32_t)bits;
	memcpy(&got, &b32, 4);
	ck_assert_float_eq(got, (float)(8 * rounds * 2));
}
END_TEST

START_TEST(test_threads_float16_add)
{
	/* 16-bit CAS loops; 2048 = 8 x 256 ones is still exact in float16 */
	uint16_t one = 0x3c00;
	uint64_t bits = run_hammers(TA_DTYPE_F16, TA_OP_ADD, &one, 8, 128, 2, TA_SEM_RELEASE);
	ck_assert_uint_eq(bits, 0x6800); /* 2048.0 */
}
END_TEST

/* The int32 max race (test_threads_int32_max): MR_THREADS threads, each applying per round
 * one plan of MR_COUNT elements that visits each of the tile's MR_ELEMS elements
 * MR_LAYERS times (plan element k addresses element k % MR_ELEMS in layer k / MR_ELEMS);
 * the plan is large enough to be split over the worker pool too. */
enum {
	MR_THREADS = 8,
	MR_ELEMS = 256,
	MR_LAYERS = 64,
	MR_COUNT = MR_ELEMS * MR_LAYERS,
	MR_PER_ROUND = MR_LAYERS * MR_THREADS /* values per element and round */
};

/* The smallest value any thread applies to element e in round r of rounds: the values of a
 * round lie above every value of the round before, and cross zero over the rounds (signed
 * comparison), shifted a little per element. */
static int32_t mr_base(int r, int e, int rounds)
{
	return r * MR_PER_ROUND + e % 13 - 6 - rounds * MR_PER_ROUND / 2;
}

/* Index (0 .. MR_PER_ROUND - 1) above mr_base of the value that thread t applies at plan
 * element k in round r: layer * MR_THREADS + rank, the rank a permutation of the threads
 * that changes with element, layer and round. So the values of one element in one round
 * are distinct, each thread's values on an element increase along its plan and from round
 * to round, and which thread holds the largest value changes from element to element. */
static int mr_index(int t, int r, int k)
{
	int e = k % MR_ELEMS, layer = k / MR_ELEMS;
	return layer * MR_THREADS + (t + r + e + layer) % MR_THREADS;
}

/* What one max-racing thread does. */
typedef struct maxrace_arg {
	void *mem;                /* the tile (MR_ELEMS int32) */
	int t;                    /* thread number */
	int rounds;               /* rounds */
	ta_sem sem;               /* memory order */
	pthread_barrier_t *start; /* every thread waits here before each round */
	int32_t *old;             /* rounds x MR_COUNT pre-RMW values */
	ta_status st;             /* first failure, TA_OK when none */
	char msg[256];            /* its message */
} maxrace_arg;

/* Applies one max plan per round, after the barrier; keeps meeting the barrier after a
 * failure so that the other threads do not wait forever. */
static void *max_racer(void *p)
{
	maxrace_arg *a = p;
	ta_tile_shape tile = {.dtype = TA_DTYPE_I32, .rank = 1, .shape = {MR_ELEMS}};
	int32_t *idx = malloc(MR_COUNT * sizeof(int32_t));
	int32_t *val = malloc(MR_COUNT * sizeof(int32_t));
	ta_error err = {TA_OK, ""};
	ta_plan plan;
	a->st = idx && val ? TA_OK : TA_RESOURCE_EXHAUSTED;
	if (a->st == TA_OK) {
		int64_t shape[1] = {MR_COUNT};
		ta_request req;
		ta_request_init(&req);
		req.family = TA_FAMILY_INDEXED;
		req.op = TA_OP_MAX;
		req.addr = TA_ADDR_INDEXED;
		req.n_index = 1;
		req.sem = a->sem;
		req.want_old = true;
		req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, shape, idx);
		req.values = ta_tu_view(TA_DTYPE_I32, 1, shape, val);
		for (int k = 0; k < MR_COUNT; k++)
			idx[k] = k % MR_ELEMS;
		a->st = ta_plan_build(&plan, &tile, &req, &err);
	}
	for (int r = 0; r < a->rounds; r++) {
		for (int k = 0; val && k < MR_COUNT; k++)
			val[k] = mr_base(r, k % MR_ELEMS, a->rounds) + mr_index(a->t, r, k);
		pthread_barrier_wait(a->start);
		if (a->st != TA_OK)
			continue;
		ta_result res;
		plan.old_out = a->old + (size_t)r * MR_COUNT;
		a->st = ta_backend_apply(be, a->mem, MR_ELEMS * sizeof(int32_t), &plan, &res, &err);
		if (a->st == TA_OK && res.applied != MR_COUNT) {
			a->st = TA_INTERNAL;
			snprintf(err.msg, sizeof(err.msg), "applied %llu",
			         (unsigned long long)res.applied);
		}
	}
	if (a->st != TA_OK)
		snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
	free(idx);
	free(val);
	return NULL;
}

START_TEST(test_threads_int32_max)
{
	/* MR_THREADS threads race max over the same MR_ELEMS elements, all starting each round
	 * at a barrier; every value of round r lies above every value of round r - 1, so the
	 * element holds exactly the largest value of round r - 1 (at first INT32_MIN + e) when
	 * round r starts, and the largest value of the last round at the end. Per element and
	 * round, in the order the RMWs took effect, the element goes through a chain of stored
	 * maxima: the previous round's largest value, then each value that was larger than the
	 * element (a "winner", old < value) in increasing order, ending at the round's largest
	 * value. So exactly one RMW of the round sees the previous round's largest value; each
	 * winner saw exactly the winner just below it; every other RMW saw a winner larger than
	 * its own value; no RMW ever sees a value from an older round (in particular not one
	 * below a value the same thread applied before). A max that is not atomic (load,
	 * compare, store) lets a smaller value overwrite a larger one: the larger one is lost
	 * and a chain, an old value or the final tile comes out wrong. */
	const int rounds = 32 / scale;
	const ta_sem sems[4] = {TA_SEM_RELAXED, TA_SEM_ACQUIRE, TA_SEM_RELEASE, TA_SEM_ACQ_REL};
	const size_t bytes = MR_ELEMS * sizeof(int32_t);
	ta_tile_shape tile = {.dtype = TA_DTYPE_I32, .rank = 1, .shape = {MR_ELEMS}};
	ta_error err = {TA_OK, ""};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, bytes, &mem, &err), TA_OK);
	int32_t init[MR_ELEMS], got[MR_ELEMS];
	for (int e = 0; e < MR_ELEMS; e++)
		init[e] = INT32_MIN + e;
	ck_assert_int_eq(ta_tu_tile_write(be, mem, bytes, &tile, init, &err), TA_OK);
	pthread_barrier_t start;
	ck_assert_int_eq(pthread_barrier_init(&start, NULL, MR_THREADS), 0);
	pthread_t th[MR_THREADS];
	maxrace_arg args[MR_THREADS];
	for (int t = 0; t < MR_THREADS; t++) {
		args[t] = (maxrace_arg){.mem = mem,
		                        .t = t,
		                        .rounds = rounds,
		                        .sem = sems[t % 4],
		                        .start = &start,
		                        .old = malloc((size_t)rounds * MR_COUNT * sizeof(int32_t))};
		ck_assert_ptr_nonnull(args[t].old);
	}
	for (int t = 0; t < MR_THREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, max_racer, &args[t]), 0);
	for (int t = 0; t < MR_THREADS; t++) {
		ck_assert_int_eq(pthread_join(th[t], NULL), 0);
		ck_assert_msg(args[t].st == TA_OK, "thread %d: %s: %s", t,
		              ta_status_name(args[t].st), args[t].msg);
	}
	pthread_barrier_destroy(&start);

	/* The final tile: the largest value of the last round, element by element. */
	ck_assert_int_eq(ta_tu_tile_read(be, mem, bytes, &tile, got, &err), TA_OK);
	for (int e = 0; e < MR_ELEMS; e++)
		ck_assert_msg(got[e] == mr_base(rounds - 1, e, rounds) + MR_PER_ROUND - 1,
		              "element %d: %d, expected %d", e, got[e],
		              mr_base(rounds - 1, e, rounds) + MR_PER_ROUND - 1);

	/* The pre-RMW values, per round and element. seen[i]: what the RMW applying value
	 * index i saw, as a value index of the round, or -1 for the previous round's largest.
	 * (Plain ifs around ck_abort_msg: each ck_assert call records a checkpoint, a system
	 * call in fork mode, and there are millions of RMWs to check.) */
	int seen[MR_PER_ROUND];
	bool won[MR_PER_ROUND];
	long long winners = 0;
	for (int r = 0; r < rounds; r++) {
		for (int e = 0; e < MR_ELEMS; e++) {
			int32_t base = mr_base(r, e, rounds);
			/* the element before the round: round r - 1's largest value */
			int32_t prev =
			    r == 0 ? INT32_MIN + e : mr_base(r - 1, e, rounds) + MR_PER_ROUND - 1;
			for (int t = 0; t < MR_THREADS; t++) {
				for (int k = e; k < MR_COUNT; k += MR_ELEMS) {
					int32_t o = args[t].old[(size_t)r * MR_COUNT + k];
					int i = mr_index(t, r, k);
					if (o != prev && (o < base || o >= base + MR_PER_ROUND))
						ck_abort_msg("round %d element %d: thread %d "
						             "applying %d saw %d, "
						             "neither %d (the element before the "
						             "round) nor a "
						             "value of this round (%d..%d)",
						             r, e, t, base + i, o, prev, base,
						             base + MR_PER_ROUND - 1);
					seen[i] = o == prev ? -1 : o - base;
				}
			}
			/* The winners in increasing order: each saw the one before. */
			int held = -1, firsts = 0;
			for (int i = 0; i < MR_PER_ROUND; i++) {
				firsts += seen[i] == -1;
				won[i] = seen[i] < i;
				if (!won[i])
					continue;
				if (seen[i] != held)
					ck_abort_msg(
					    "round %d element %d: %d replaced %d, but the last "
					    "larger value stored before it was %d (a lost update)",
					    r, e, base + i, seen[i] < 0 ? prev : base + seen[i],
					    held < 0 ? prev : base + held);
				held = i;
				winners++;
			}
			ck_assert_msg(firsts == 1, "round %d element %d: %d RMWs saw %d (one must)",
			              r, e, firsts, prev);
			ck_assert_msg(held == MR_PER_ROUND - 1,
			              "round %d element %d: the last value stored was %d, not %d",
			              r, e, base + held, base + MR_PER_ROUND - 1);
			/* Every other RMW saw a stored value larger than its own. */
			for (int i = 0; i < MR_PER_ROUND; i++)
				if (!won[i] && !(seen[i] > i && won[seen[i]]))
					ck_abort_msg(
					    "round %d element %d: %d saw %d, not a larger value "
					    "stored in this round",
					    r, e, base + i, base + seen[i]);
		}
	}
	fprintf(stderr, "int32 max: %lld RMWs, %lld stored a new maximum\n",
	        (long long)rounds * MR_THREADS * MR_COUNT, winners);
	for (int t = 0; t < MR_THREADS; t++)
		free(args[t].old);
	ta_backend_tile_free(be, mem);
}
END_TEST

/* Builds a plan of n elements adding *one into element 0 of a 1-tile of dtype. */
static void one_element_plan(ta_plan *plan, ta_dtype dtype, int32_t *idx, int64_t n,
                             const void *one, ta_space space, bool want_old)
{
	ta_tile_shape t = {.dtype = dtype, .rank = 1, .shape = {1}};
	int64_t shape[1] = {n}, scalar[1] = {0};
	ta_request req;
	ta_error err = {TA_OK, ""};
	ta_request_init(&req);
	req.family = TA_FAMILY_SCATTER;
	req.op = TA_OP_ADD;
	req.addr = TA_ADDR_SCATTER;
	req.n_index = 1;
	req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, shape, idx);
	req.values = ta_tu_view(dtype, 0, scalar, one);
	req.space = space;
	req.want_old = want_old;
	ck_assert_msg(ta_plan_build(plan, &t, &req, &err) == TA_OK, "%s", err.msg);
}

START_TEST(test_large_plan_one_element)
{
	const int64_t n = (INT64_C(1) << 20) / scale;
	int32_t *idx = calloc((size_t)n, sizeof(int32_t));
	uint64_t *old = malloc((size_t)n * sizeof(uint64_t));
	uint8_t *seen = calloc((size_t)n, 1);
	ck_assert(idx && old && seen);
	ta_error err = {TA_OK, ""};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 8, &mem, &err), TA_OK);
	uint64_t one = 1;
	ta_plan plan;
	ta_result res;
	one_element_plan(&plan, TA_DTYPE_U64, idx, n, &one, TA_SPACE_GLOBAL, true);
	plan.old_out = old;
	ck_assert_int_eq(ta_backend_apply(be, mem, 8, &plan, &res, &err), TA_OK);
	ck_assert_uint_eq(res.applied, (uint64_t)n);
	ck_assert_uint_eq(res.skipped, 0);
	ck_assert_uint_eq(*(uint64_t *)mem, (uint64_t)n);
	/* every fetch-add saw a distinct old value: 0 .. n-1 each exactly once */
	for (int64_t k = 0; k < n; k++) {
		ck_assert_uint_lt(old[k], (uint64_t)n);
		ck_assert_msg(!seen[old[k]], "old value %llu seen twice",
		              (unsigned long long)old[k]);
		seen[old[k]] = 1;
	}
	/* the same in space shared (private copies merged once per participant) */
	one_element_plan(&plan, TA_DTYPE_U64, idx, n, &one, TA_SPACE_SHARED, false);
	ck_assert_int_eq(ta_backend_apply(be, mem, 8, &plan, &res, &err), TA_OK);
	ck_assert_uint_eq(*(uint64_t *)mem, 2 * (uint64_t)n);
	ta_backend_tile_free(be, mem);

	/* float32: 2^20 CAS-loop adds of 1.0 by the pool into one element */
	float onef = 1.0f;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 4, &mem, &err), TA_OK);
	one_element_plan(&plan, TA_DTYPE_F32, idx, n, &onef, TA_SPACE_GLOBAL, false);
	ck_assert_int_eq(ta_backend_apply(be, mem, 4, &plan, &res, &err), TA_OK);
	ck_assert_float_eq(*(float *)mem, (float)n);
	ta_backend_tile_free(be, mem);
	free(idx);
	free(old);
	free(seen);
}
END_TEST

/* What one large-plan thread does. */
typedef struct large_arg {
	const ta_plan *plan; /* the plan (shared, read-only) */
	void *mem;           /* the tile */
	int rounds;          /* applications */
	ta_status st;        /* first failure */
} large_arg;

/* Applies the plan rounds times. */
static void *apply_large(void *p)
{
	large_arg *a = p;
	ta_error err = {TA_OK, ""};
	a->st = TA_OK;
	for (int r = 0; r < a->rounds && a->st == TA_OK; r++) {
		ta_result res;
		a->st = ta_backend_apply(be, a->mem, 8, a->plan, &res, &err);
	}
	return NULL;
}

START_TEST(test_concurrent_large_plans)
{
	/* 4 callers each apply a pool-split plan 3 times at once, global and shared */
	const int64_t n = (INT64_C(1) << 18) / scale;
	int32_t *idx = calloc((size_t)n, sizeof(int32_t));
	ck_assert_ptr_nonnull(idx);
	ta_error err = {TA_OK, ""};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 8, &mem, &err), TA_OK);
	int64_t one = 1;
	ta_plan global, shared;
	one_element_plan(&global, TA_DTYPE_I64, idx, n, &one, TA_SPACE_GLOBAL, false);
	one_element_plan(&shared, TA_DTYPE_I64, idx, n, &one, TA_SPACE_SHARED, false);
	pthread_t th[4];
	large_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (large_arg){.plan = i % 2 ? &shared : &global, .mem = mem, .rounds = 3};
		ck_assert_int_eq(pthread_create(&th[i], NULL, apply_large, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_int_eq(args[i].st, TA_OK);
	}
	ck_assert_int_eq(*(int64_t *)mem, 4 * 3 * n);
	ta_backend_tile_free(be, mem);
	free(idx);
}
END_TEST

/* What one cas-counter thread does. */
typedef struct counter_arg {
	void *mem;         /* the counter tile (one uint32) */
	int increments;    /* successful increments to make */
	long long retries; /* failed cas attempts */
	ta_status st;      /* first failure */
	char msg[256];     /* its message */
} counter_arg;

/* Increments the counter increments times with load + cas(old -> old + 1) retries. */
static void *cas_counter(void *p)
{
	counter_arg *a = p;
	ta_tile_shape t = {.dtype = TA_DTYPE_U32, .rank = 1, .shape = {1}};
	ta_error err = {TA_OK, ""};
	int64_t scalar[1] = {0};
	a->st = TA_OK;
	a->retries = 0;
	for (int i = 0; i < a->increments && a->st == TA_OK;) {
		ta_request req;
		ta_plan plan;
		ta_result res;
		uint32_t seen = 0, desired, old = 0;
		ta_request_region(&req, TA_FAMILY_MEMORY, TA_OP_LOAD);
		req.sem = TA_SEM_ACQUIRE;
		if ((a->st = ta_plan_build(&plan, &t, &req, &err)) != TA_OK)
			break;
		plan.old_out = &seen;
		if ((a->st = ta_backend_apply(be, a->mem, 4, &plan, &res, &err)) != TA_OK)
			break;
		desired = seen + 1;
		ta_request_region(&req, TA_FAMILY_ELEMENTWISE, TA_OP_CAS);
		req.sem = TA_SEM_ACQ_REL;
		req.want_old = true;
		req.compare = ta_tu_view(TA_DTYPE_U32, 0, scalar, &seen);
		req.values = ta_tu_view(TA_DTYPE_U32, 0, scalar, &desired);
		if ((a->st = ta_plan_build(&plan, &t, &req, &err)) != TA_OK)
			break;
		plan.old_out = &old;
		if ((a->st = ta_backend_apply(be, a->mem, 4, &plan, &res, &err)) != TA_OK)
			break;
		if (old == seen)
			i++;
		else
			a->retries++;
	}
	if (a->st != TA_OK)
		snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
	return NULL;
}

START_TEST(test_cas_counter)
{
	ta_error err = {TA_OK, ""};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 4, &mem, &err), TA_OK);
	enum { THREADS = 8 };
	int increments = 3000 / scale;
	pthread_t th[THREADS];
	counter_arg args[THREADS];
	for (int i = 0; i < THREADS; i++) {
		args[i] = (counter_arg){.mem = mem, .increments = increments};
		ck_assert_int_eq(pthread_create(&th[i], NULL, cas_counter, &args[i]), 0);
	}
	long long retries = 0;
	for (int i = 0; i < THREADS; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_msg(args[i].st == TA_OK, "thread %d: %s", i, args[i].msg);
		retries += args[i].retries;
	}
	ck_assert_uint_eq(*(uint32_t *)mem, (uint32_t)(THREADS * increments));
	fprintf(stderr, "cas counter: %d increments, %lld failed cas attempts\n",
	        THREADS * increments, retries);
	ta_backend_tile_free(be, mem);
}
END_TEST

/* The contention suite. */
static Suite *contention_suite(void)
{
	Suite *s = suite_create("contention");
	TCase *tc = tcase_create("one element");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_threads_int64_add);
	tcase_add_test(tc, test_threads_uint32_sub_acq_rel);
	tcase_add_test(tc, test_threads_float32_add);
	tcase_add_test(tc, test_threads_float16_add);
	tcase_add_test(tc, test_threads_int32_max);
	tcase_add_test(tc, test_large_plan_one_element);
	tcase_add_test(tc, test_concurrent_large_plans);
	tcase_add_test(tc, test_cas_counter);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(contention_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
