/* check_cuda.c: Check suite of the CUDA backend.
 *
 *  - vectors: every backend-neutral vector of tests/ta_vectors.h, the reference sweep of
 *    every op and the large shared-space cases, on the CUDA backend;
 *  - diff: thousands of random requests (random ops, dtypes, regions, masks, broadcast,
 *    duplicate and out-of-range indices, sems, scopes, spaces, outputs) applied to the CPU
 *    and the CUDA backend: identical statuses, counts, tiles and outputs (float add with
 *    several updates of one element: within a bound that their order explains; outputs
 *    and exch/cas/store results of elements updated more than once are order-dependent
 *    and not compared; everything else bit for bit);
 *  - large: element-wise ops over 2^20 + 3 elements, histograms of 2^22 + 1 keys (the
 *    fast loops with their tails, the shared window) and windows too large for one block
 *    against the CPU backend;
 *  - cluster: windows too large for one block (split over a cluster's blocks), on
 *    their own so that compute-sanitizer can run them alone (CK_RUN_CASE=cluster);
 *  - bulk: element-wise integer ops through TMA bulk reductions (sm_90): heads, tails,
 *    aligned and unaligned regions, scalar values against the CPU backend; concurrent
 *    requests on the same elements (bulk beside red); which requests take the path
 *    (CK_RUN_CASE=bulk runs them alone);
 *  - runtime: info, allocation failure (RESOURCE_EXHAUSTED, then the backend goes on),
 *    concurrent callers, the loops' lanes (threads that attach and poll, exact old values
 *    while holds stop their kernels), kernel path choice, a merge-out (scratch zeroed, histogram
 * run, rows added into other tiles, exact), a sticky device error (INTERNAL, then every later call
 * reports it).
 *
 * Without a usable GPU (CI: nvcc but no GPU; or a build without CUDA) the program prints
 * the reason and exits 77, which automake counts as a skip. The GPU is probed in a child
 * process so that the parent never initialises CUDA and Check can fork each test.
 * TA_CUDA_DEVICE picks the device (default 0); TA_DIFF_CASES the number of random
 * requests (default 3000). */
#include "config.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ta_backend.h"
#include "ta_test_util.h"
#include "ta_vectors.h"

#ifdef TA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "ta_cuda_private.h"
#endif

/* The device under test (TA_CUDA_DEVICE). */
static int g_device;
/* TA_CHECK_CUDA_HARNESS=1: a second CPU backend stands in for the CUDA one, to check this
 * program's own logic on a machine without a GPU (the GPU-only tests are left out). */
static bool g_harness;
/* Backends of the current test (created by the fixture). */
static ta_backend *g_cuda, *g_cpu;

/* Reads an integer environment variable, or def when unset. */
static long env_long(const char *name, long def)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 10) : def;
}

/* Fixture: creates the CUDA and CPU backends. */
static void setup(void)
{
	ta_error err = {0};
	g_cuda = g_harness ? ta_cpu_backend_new(3, &err) : ta_cuda_backend_new(g_device, &err);
	ck_assert_msg(g_cuda != NULL, "CUDA backend: %s", err.msg);
	g_cpu = ta_cpu_backend_new(4, &err);
	ck_assert_msg(g_cpu != NULL, "CPU backend: %s", err.msg);
}

/* Fixture: destroys both backends. */
static void teardown(void)
{
	ta_backend_destroy(g_cuda);
	ta_backend_destroy(g_cpu);
	g_cuda = g_cpu = NULL;
}

/* ---- vectors -----------------------------------------------------------------------------*/

START_TEST(test_info)
{
	ta_backend_info info;
	ta_backend_info_get(g_cuda, &info);
	printf("cuda backend: device %d: %s, %.1f GiB, compute capability %s, %d streams\n",
	       g_device, info.device, info.device_memory / (1024.0 * 1024 * 1024),
	       info.compute_capability, info.workers);
	ck_assert_str_eq(info.name, "cuda");
	ck_assert(info.device[0] != '\0');
	ck_assert(info.device_memory > 0);
	int major = 0, minor = -1;
	ck_assert_int_eq(sscanf(info.compute_capability, "%d.%d", &major, &minor), 2);
	ck_assert_int_ge(major, 7);
	ck_assert_int_eq(info.workers, 4);
}
END_TEST

START_TEST(test_vectors)
{
	int failed = ta_vectors_run(g_cuda, stdout);
	printf("vectors: %zu run on cuda, %d failed\n", ta_vectors_count(), failed);
	ck_assert_int_eq(failed, 0);
}
END_TEST

START_TEST(test_sweep)
{
	int failed = ta_vectors_sweep(g_cuda, TA_OP_NONE, 0x5eed0000u + (uint64_t)_i, stdout);
	printf("sweep seed %d: %d failed\n", _i, failed);
	ck_assert_int_eq(failed, 0);
}
END_TEST

START_TEST(test_shared_large)
{
	int failed = ta_vectors_shared_large(g_cuda, stdout);
	printf("shared large: %d failed\n", failed);
	ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- the differential test ----------------------------------------------------------------*/

/* Mantissa bits (with the implicit one) of a float dtype. */
static int mant_bits(ta_dtype dt)
{
	switch (dt) {
	case TA_DTYPE_F32:
		return 24;
	case TA_DTYPE_F64:
		return 53;
	case TA_DTYPE_F16:
		return 11;
	default:
		return 8;
	}
}

/* A random element of dt. for_add: floats of magnitude at most 100 (no overflow in any
 * order), one NaN pattern; otherwise any bits, specials included. */
static uint64_t rand_elem(ta_dtype dt, bool for_add, uint64_t *rng)
{
	uint64_t r = ta_tu_rand(rng);
	if (ta_dtype_is_int(dt)) {
		switch (r % 4) {
		case 0:
			return ta_tu_rand(rng) % 7; /* small: collisions and successes for cas */
		case 1:
			return (uint64_t) - (int64_t)(ta_tu_rand(rng) % 5);
		default: {
			uint64_t bits = ta_tu_rand(rng);
			return ta_dtype_size(dt) == 4 ? (bits & 0xffffffffu) : bits;
		}
		}
	}
	uint64_t bits = 0;
	unsigned pick = (unsigned)(r % 16);
	double d;
	switch (pick) {
	case 0:
		ta_tu_encode(dt, 0.0, &bits);
		return bits;
	case 1:
		ta_tu_encode(dt, -0.0, &bits);
		return bits;
	case 2:
		ta_tu_encode(dt, NAN, &bits);
		return bits;
	case 3:
		ta_tu_encode(dt, (r >> 8) & 1 ? INFINITY : -INFINITY, &bits);
		return bits;
	case 4: /* a subnormal */
		bits = 1 + ta_tu_rand(rng) % 5;
		if ((r >> 9) & 1)
			bits |= (uint64_t)1 << (ta_dtype_size(dt) * 8 - 1);
		return bits;
	case 5:
		if (!for_add) { /* any bits: NaN payloads, huge values */
			bits = ta_tu_rand(rng);
			if (ta_dtype_size(dt) < 8)
				bits &= ((uint64_t)1 << (ta_dtype_size(dt) * 8)) - 1;
			return bits;
		}
		/* fall through */
	case 6:
	case 7:
	case 8:
		d = (double)((int64_t)(ta_tu_rand(rng) % 17) - 8);
		ta_tu_encode(dt, d, &bits);
		return bits;
	default:
		d = ((double)(ta_tu_rand(rng) % 2000001) - 1000000.0) / 10000.0;
		return ta_tu_round(dt, d);
	}
}

/* One random operand: its buffer and view. */
typedef struct rand_operand {
	void *data;         /* packed elements (malloc'd) */
	ta_array_view view; /* view for the request */
} rand_operand;

/* Fills o with a random operand of dt broadcastable to shape (rank): the full shape, a
 * scalar, or the full shape with some axes reduced to 1. */
static void rand_operand_make(rand_operand *o, ta_dtype dt, const int64_t *shape, int rank,
                              bool for_add, bool is_mask, uint64_t *rng)
{
	int64_t s[TA_MAX_RANK];
	int r = rank;
	unsigned form = (unsigned)ta_tu_rand_below(rng, 10);
	if (form < 3) {
		r = 0;
	} else {
		for (int a = 0; a < rank; a++)
			s[a] = (form < 5 && ta_tu_rand_below(rng, 2)) ? 1 : shape[a];
		if (form >= 5 && form < 6 && rank > 1) { /* drop leading axes */
			int drop = 1;
			r = rank - drop;
			memmove(s, s + drop, sizeof(int64_t) * (size_t)r);
		}
	}
	int64_t n = ta_tu_count(r, s);
	uint64_t *bits = malloc(sizeof(uint64_t) * (size_t)n);
	ck_assert_ptr_nonnull(bits);
	for (int64_t i = 0; i < n; i++) {
		if (is_mask) {
			uint64_t m = ta_tu_rand_below(rng, 8);
			bits[i] = m < 3 ? 0 : m < 7 ? 1 : 2 + ta_tu_rand_below(rng, 250);
		} else {
			bits[i] = rand_elem(dt, for_add, rng);
		}
	}
	o->data = ta_tu_pack(dt, bits, (size_t)n);
	ck_assert_ptr_nonnull(o->data);
	free(bits);
	o->view = ta_tu_view(dt, r, s, o->data);
}

/* Fills an index array of shape (rank) with values in [lo, hi] (mostly in range). */
static void rand_index_make(rand_operand *o, ta_dtype dt, const int64_t *shape, int rank,
                            int64_t lo, int64_t hi, uint64_t *rng)
{
	int64_t n = ta_tu_count(rank, shape);
	uint64_t *bits = malloc(sizeof(uint64_t) * (size_t)n);
	ck_assert_ptr_nonnull(bits);
	for (int64_t i = 0; i < n; i++) {
		int64_t v = lo + (int64_t)ta_tu_rand_below(rng, (uint64_t)(hi - lo + 1));
		bits[i] = dt == TA_DTYPE_I32 ? (uint64_t)(uint32_t)(int32_t)v : (uint64_t)v;
	}
	o->data = ta_tu_pack(dt, bits, (size_t)n);
	ck_assert_ptr_nonnull(o->data);
	free(bits);
	o->view = ta_tu_view(dt, rank, shape, o->data);
}

/* A float add result a (GPU) against b (CPU) for an element with nterms updates whose
 * absolute values sum to mag (init included): equal bits, or both finite and within the
 * reordering bound. */
static bool float_close(ta_dtype dt, uint64_t a, uint64_t b, int nterms, double mag)
{
	if (a == b)
		return true;
	if (ta_tu_is_nan(dt, a) || ta_tu_is_nan(dt, b))
		return false;
	double x = ta_tu_decode(dt, a), y = ta_tu_decode(dt, b);
	if (isinf(x) || isinf(y))
		return false;
	double tol = 2.0 * (nterms + 1) * ldexp(mag, -mant_bits(dt)) +
	             nterms * (dt == TA_DTYPE_F32 ? ldexp(1, -126) : ldexp(1, -1000));
	return fabs(x - y) <= tol;
}

/* Counters of the differential test. */
typedef struct diff_stats {
	int cases;     /* requests generated */
	int applied;   /* requests both backends applied */
	int rejected;  /* requests the plan builder rejected (nothing applied) */
	int failures;  /* mismatches */
	long elements; /* elements compared */
} diff_stats;

/* Runs one random request on both backends and compares; false on a mismatch (printed). */
static bool diff_case(uint64_t *rng, int case_no, diff_stats *st)
{
	static const ta_dtype dts[] = {TA_DTYPE_I32, TA_DTYPE_U32, TA_DTYPE_I64, TA_DTYPE_U64,
	                               TA_DTYPE_F32, TA_DTYPE_F64, TA_DTYPE_F16, TA_DTYPE_BF16};
	ta_tile_shape t;
	memset(&t, 0, sizeof t);
	t.dtype = dts[ta_tu_rand_below(rng, 8)];
	t.rank = 1 + (int)ta_tu_rand_below(rng, 3);
	for (int a = 0; a < t.rank; a++)
		t.shape[a] = 1 + (int64_t)ta_tu_rand_below(rng, t.rank == 1 ? 40 : 8);
	int64_t tile_n = ta_tu_count(t.rank, t.shape);
	size_t es = ta_dtype_size(t.dtype);
	size_t bytes = (size_t)tile_n * es;

	/* the request */
	ta_request req;
	ta_request_init(&req);
	unsigned fam = (unsigned)ta_tu_rand_below(rng, 4);
	req.family = (ta_family)fam;
	static const ta_op scatter_ops[] = {TA_OP_ADD, TA_OP_SUB, TA_OP_MIN, TA_OP_MAX};
	do {
		if (fam == TA_FAMILY_MEMORY)
			req.op = ta_tu_rand_below(rng, 2) ? TA_OP_LOAD : TA_OP_STORE;
		else if (fam == TA_FAMILY_SCATTER)
			req.op = scatter_ops[ta_tu_rand_below(rng, 4)];
		else
			req.op = (ta_op)(1 + ta_tu_rand_below(rng, 9));
	} while (!ta_op_accepts_dtype(req.op, t.dtype));
	switch (req.family) {
	case TA_FAMILY_ELEMENTWISE:
		req.addr = TA_ADDR_REGION;
		break;
	case TA_FAMILY_SCATTER:
		req.addr = TA_ADDR_SCATTER;
		break;
	case TA_FAMILY_INDEXED:
		req.addr = ta_tu_rand_below(rng, 2) ? TA_ADDR_INDEXED : TA_ADDR_FLAT;
		break;
	default:
		req.addr = (ta_addr)ta_tu_rand_below(rng, 4);
		break;
	}
	/* region */
	int64_t extent[TA_MAX_RANK];
	if (ta_tu_rand_below(rng, 2)) {
		req.has_region = true;
		req.region_rank = t.rank;
		for (int a = 0; a < t.rank; a++) {
			req.region_origin[a] = (int64_t)ta_tu_rand_below(rng, (uint64_t)t.shape[a]);
			req.region_shape[a] =
			    1 + (int64_t)ta_tu_rand_below(
			            rng, (uint64_t)(t.shape[a] - req.region_origin[a]));
			extent[a] = req.region_shape[a];
		}
	} else {
		for (int a = 0; a < t.rank; a++)
			extent[a] = t.shape[a];
	}
	int64_t region_n = ta_tu_count(t.rank, extent);
	/* addressing operands and the iteration shape */
	rand_operand idx[TA_MAX_RANK];
	memset(idx, 0, sizeof idx);
	int it_rank = t.rank;
	int64_t it_shape[TA_MAX_RANK];
	ta_dtype ixdt = ta_tu_rand_below(rng, 2) ? TA_DTYPE_I32 : TA_DTYPE_I64;
	if (req.addr == TA_ADDR_REGION) {
		memcpy(it_shape, extent, sizeof it_shape);
	} else if (req.addr == TA_ADDR_SCATTER) {
		req.scatter_dim = (int)ta_tu_rand_below(rng, (uint64_t)t.rank);
		for (int a = 0; a < t.rank; a++)
			it_shape[a] = a == req.scatter_dim
			                  ? 1 + (int64_t)ta_tu_rand_below(rng, 12)
			                  : 1 + (int64_t)ta_tu_rand_below(rng, (uint64_t)extent[a]);
		req.n_index = 1;
		rand_index_make(&idx[0], ixdt, it_shape, t.rank, -1, extent[req.scatter_dim], rng);
	} else {
		it_rank = 1 + (int)ta_tu_rand_below(rng, 2);
		for (int a = 0; a < it_rank; a++)
			it_shape[a] = 1 + (int64_t)ta_tu_rand_below(rng, it_rank == 1 ? 48 : 7);
		req.n_index = req.addr == TA_ADDR_FLAT ? 1 : t.rank;
		for (int i = 0; i < req.n_index; i++) {
			int64_t s[TA_MAX_RANK];
			for (int a = 0; a < it_rank; a++) /* broadcast: some axes of 1 */
				s[a] = ta_tu_rand_below(rng, 4) == 0 ? 1 : it_shape[a];
			int64_t hi = req.addr == TA_ADDR_FLAT ? region_n : extent[i];
			rand_index_make(&idx[i], ixdt, s, it_rank, -2, hi, rng);
		}
		/* the iteration shape is the broadcast of the index shapes */
		for (int a = 0; a < it_rank; a++) {
			it_shape[a] = 1;
			for (int i = 0; i < req.n_index; i++)
				if (idx[i].view.shape[a] > 1)
					it_shape[a] = idx[i].view.shape[a];
		}
	}
	for (int i = 0; i < req.n_index; i++)
		req.index[i] = idx[i].view;
	/* options */
	bool is_add = req.op == TA_OP_ADD || req.op == TA_OP_SUB;
	/* operands of add/sub/min/max: one NaN pattern (which of several NaN payloads wins
	 * depends on the order), no overflow */
	bool tame = is_add || req.op == TA_OP_MIN || req.op == TA_OP_MAX;
	do
		req.sem = (ta_sem)ta_tu_rand_below(rng, 4);
	while (!ta_op_sem_ok(req.op, req.sem));
	req.scope = (ta_scope)ta_tu_rand_below(rng, 4);
	req.want_old = req.op == TA_OP_LOAD || (req.op != TA_OP_STORE && ta_tu_rand_below(rng, 2));
	if (ta_op_shared_ok(req.op) && !req.want_old && ta_tu_rand_below(rng, 2))
		req.space = TA_SPACE_SHARED;
	req.check_bounds = ta_tu_rand_below(rng, 8) != 0;
	rand_operand vals = {0}, cmp = {0}, mask = {0}, pad = {0};
	if (req.op != TA_OP_LOAD) {
		rand_operand_make(&vals, t.dtype, it_shape, it_rank, tame, false, rng);
		req.values = vals.view;
	}
	if (req.op == TA_OP_CAS) {
		rand_operand_make(&cmp, t.dtype, it_shape, it_rank, false, false, rng);
		req.compare = cmp.view;
	}
	if (ta_tu_rand_below(rng, 2)) {
		rand_operand_make(&mask, TA_DTYPE_BOOL, it_shape, it_rank, false, true, rng);
		req.mask = mask.view;
	}
	if (req.op == TA_OP_LOAD && ta_tu_rand_below(rng, 2)) {
		uint64_t b = rand_elem(t.dtype, false, rng);
		pad.data = ta_tu_pack(t.dtype, &b, 1);
		pad.view = ta_tu_view(t.dtype, 0, NULL, pad.data);
		req.padding = pad.view;
	}
	/* initial tile */
	uint64_t *init_bits = malloc(sizeof(uint64_t) * (size_t)tile_n);
	ck_assert_ptr_nonnull(init_bits);
	for (int64_t i = 0; i < tile_n; i++)
		init_bits[i] = rand_elem(t.dtype, is_add, rng);
	void *init = ta_tu_pack(t.dtype, init_bits, (size_t)tile_n);
	ck_assert_ptr_nonnull(init);

	bool ok = true;
	char why[1024] = "";
	ta_error err = {0};
	ta_plan plan;
	ta_status bst = ta_plan_build(&plan, &t, &req, &err);
	st->cases++;
	void *mem_gpu = NULL, *mem_cpu = NULL;
	void *old_gpu = NULL, *old_cpu = NULL, *after_gpu = NULL, *after_cpu = NULL;
	int *hits = NULL;
	double *mag = NULL;
	if (bst != TA_OK) {
		ck_assert_msg(bst == TA_OUT_OF_RANGE || bst == TA_INVALID_ARGUMENT,
		              "case %d: plan build: %s", case_no, err.msg);
		st->rejected++;
		goto done;
	}
	/* make some CAS succeed: compare = the current value of the element's target */
	if (req.op == TA_OP_CAS && ta_tu_count(cmp.view.rank, cmp.view.shape) == plan.count) {
		for (int64_t k = 0; k < plan.count; k++) {
			int64_t off;
			plan.mask.data = NULL; /* resolve ignoring the mask */
			int r = ta_plan_resolve(&plan, k, &off);
			plan.mask.data = mask.data ? mask.view.data : NULL;
			if (r > 0 && ta_tu_rand_below(rng, 2))
				ta_tu_set(t.dtype, cmp.data, (size_t)k, init_bits[off]);
		}
	}
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mem_gpu, &err), TA_OK);
	ck_assert_int_eq(ta_backend_tile_alloc(g_cpu, bytes, &mem_cpu, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_write(g_cuda, mem_gpu, bytes, &t, init, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_write(g_cpu, mem_cpu, bytes, &t, init, &err), TA_OK);
	size_t old_bytes = (size_t)(plan.count ? plan.count : 1) * es;
	old_gpu = calloc(1, old_bytes);
	old_cpu = calloc(1, old_bytes);
	after_gpu = malloc(bytes);
	after_cpu = malloc(bytes);
	hits = calloc((size_t)tile_n, sizeof(int));
	mag = calloc((size_t)tile_n, sizeof(double));
	ck_assert(old_gpu && old_cpu && after_gpu && after_cpu && hits && mag);
	memset(old_gpu, 0xa5, old_bytes); /* poison: every output must be written */
	memset(old_cpu, 0x5a, old_bytes);
	ta_plan pg = plan, pc = plan;
	pg.old_out = plan.want_old ? old_gpu : NULL;
	pc.old_out = plan.want_old ? old_cpu : NULL;
	ta_result rg = {0}, rc = {0};
	ta_error eg = {0}, ec = {0};
	ta_status sg = ta_backend_apply(g_cuda, mem_gpu, bytes, &pg, &rg, &eg);
	ta_status sc = ta_backend_apply(g_cpu, mem_cpu, bytes, &pc, &rc, &ec);
	if (sg != sc || sg != TA_OK) {
		snprintf(why, sizeof why, "status cuda %s (%s), cpu %s (%s)", ta_status_name(sg),
		         eg.msg, ta_status_name(sc), ec.msg);
		ok = false;
		goto report;
	}
	st->applied++;
	if (rg.applied != rc.applied || rg.skipped != rc.skipped) {
		snprintf(why, sizeof why, "counts cuda %llu applied %llu skipped, cpu %llu / %llu",
		         (unsigned long long)rg.applied, (unsigned long long)rg.skipped,
		         (unsigned long long)rc.applied, (unsigned long long)rc.skipped);
		ok = false;
		goto report;
	}
	ck_assert_int_eq(ta_tu_tile_read(g_cuda, mem_gpu, bytes, &t, after_gpu, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_read(g_cpu, mem_cpu, bytes, &t, after_cpu, &err), TA_OK);
	/* updates per tile element and their magnitudes */
	for (int64_t k = 0; k < plan.count; k++) {
		int64_t off;
		if (ta_plan_resolve(&plan, k, &off) > 0) {
			hits[off]++;
			if (is_add && ta_dtype_is_float(t.dtype))
				mag[off] += fabs(
				    ta_tu_decode(t.dtype, ta_operand_bits(&plan, &plan.values, k)));
		}
	}
	bool order_free = req.op != TA_OP_EXCH && req.op != TA_OP_CAS && req.op != TA_OP_STORE;
	for (int64_t i = 0; i < tile_n && ok; i++) {
		uint64_t a = ta_tu_get(t.dtype, after_gpu, (size_t)i);
		uint64_t b = ta_tu_get(t.dtype, after_cpu, (size_t)i);
		st->elements++;
		if (a == b)
			continue;
		if (hits[i] > 1 && !order_free)
			continue; /* several exch/cas/store on one element: any order is right */
		if (hits[i] > 1 && is_add && ta_dtype_is_float(t.dtype) &&
		    float_close(t.dtype, a, b, hits[i],
		                mag[i] + fabs(ta_tu_decode(t.dtype, init_bits[i]))))
			continue;
		char fa[64], fb[64], fi[64];
		snprintf(why, sizeof why,
		         "tile element %lld (%d updates): cuda %s, cpu %s, init %s", (long long)i,
		         hits[i], ta_tu_fmt(t.dtype, a, fa, sizeof fa),
		         ta_tu_fmt(t.dtype, b, fb, sizeof fb),
		         ta_tu_fmt(t.dtype, init_bits[i], fi, sizeof fi));
		ok = false;
	}
	if (ok && plan.want_old) {
		for (int64_t k = 0; k < plan.count && ok; k++) {
			uint64_t a = ta_tu_get(t.dtype, old_gpu, (size_t)k);
			uint64_t b = ta_tu_get(t.dtype, old_cpu, (size_t)k);
			st->elements++;
			if (a == b)
				continue;
			int64_t off;
			int r = ta_plan_resolve(&plan, k, &off);
			if (r > 0 && hits[off] > 1 && req.op != TA_OP_LOAD)
				continue; /* the value seen depends on the order of the updates */
			char fa[64], fb[64];
			snprintf(why, sizeof why, "output %lld (resolve %d): cuda %s, cpu %s",
			         (long long)k, r, ta_tu_fmt(t.dtype, a, fa, sizeof fa),
			         ta_tu_fmt(t.dtype, b, fb, sizeof fb));
			ok = false;
		}
	}
report:
	if (!ok) {
		st->failures++;
		printf(
		    "diff case %d: %s %s %s on %s tile rank %d, addr %d, sem %s, scope %s, space "
		    "%s, old %d, bounds %d, count %lld: %s\n",
		    case_no, ta_op_name(req.op), ta_dtype_name(t.dtype),
		    req.has_region ? "(region)" : "(whole)", ta_dtype_name(t.dtype), t.rank,
		    (int)req.addr, ta_sem_name(req.sem), ta_scope_name(req.scope),
		    ta_space_name(req.space), req.want_old, req.check_bounds, (long long)plan.count,
		    why);
	}
done:
	if (mem_gpu)
		ta_backend_tile_free(g_cuda, mem_gpu);
	if (mem_cpu)
		ta_backend_tile_free(g_cpu, mem_cpu);
	free(old_gpu);
	free(old_cpu);
	free(after_gpu);
	free(after_cpu);
	free(hits);
	free(mag);
	free(init);
	free(init_bits);
	for (int i = 0; i < TA_MAX_RANK; i++)
		free(idx[i].data);
	free(vals.data);
	free(cmp.data);
	free(mask.data);
	free(pad.data);
	return ok;
}

START_TEST(test_diff)
{
	long n = env_long("TA_DIFF_CASES", 3000);
	uint64_t rng = 0xd1ffull + (uint64_t)env_long("TA_DIFF_SEED", 0);
	diff_stats st = {0};
	for (long i = 0; i < n; i++)
		diff_case(&rng, (int)i, &st);
	printf("diff: %d requests, %d applied on both backends, %d rejected by the plan builder, "
	       "%ld elements compared, %d mismatches\n",
	       st.cases, st.applied, st.rejected, st.elements, st.failures);
	ck_assert_int_eq(st.failures, 0);
	ck_assert_int_gt(st.applied, st.cases / 2);
}
END_TEST

/* ---- large plans: fast loops and shared windows ---------------------------------------------*/

/* Applies one request to fresh tiles on both backends (initialised with init) and compares
 * tiles, outputs and counts bit for bit; returns the number of mismatching elements. */
static long run_both(const ta_tile_shape *t, const void *init, ta_request *req, const char *what)
{
	size_t bytes = (size_t)ta_tile_bytes(t);
	size_t es = ta_dtype_size(t->dtype);
	ta_error err = {0};
	ta_plan plan;
	ck_assert_msg(ta_plan_build(&plan, t, req, &err) == TA_OK, "%s: %s", what, err.msg);
	void *mg, *mc;
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mg, &err), TA_OK);
	ck_assert_int_eq(ta_backend_tile_alloc(g_cpu, bytes, &mc, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_write(g_cuda, mg, bytes, t, init, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_write(g_cpu, mc, bytes, t, init, &err), TA_OK);
	size_t ob = (size_t)plan.count * es;
	void *og = malloc(ob ? ob : 1), *oc = malloc(ob ? ob : 1);
	void *ag = malloc(bytes), *ac = malloc(bytes);
	ck_assert(og && oc && ag && ac);
	memset(og, 0xa5, ob);
	memset(oc, 0x5a, ob);
	ta_plan pg = plan, pc = plan;
	pg.old_out = plan.want_old ? og : NULL;
	pc.old_out = plan.want_old ? oc : NULL;
	ta_result rg, rc;
	ck_assert_msg(ta_backend_apply(g_cuda, mg, bytes, &pg, &rg, &err) == TA_OK, "%s: cuda: %s",
	              what, err.msg);
	ck_assert_msg(ta_backend_apply(g_cpu, mc, bytes, &pc, &rc, &err) == TA_OK, "%s: cpu: %s",
	              what, err.msg);
	ck_assert_msg(rg.applied == rc.applied && rg.skipped == rc.skipped,
	              "%s: counts cuda %llu/%llu cpu %llu/%llu", what,
	              (unsigned long long)rg.applied, (unsigned long long)rg.skipped,
	              (unsigned long long)rc.applied, (unsigned long long)rc.skipped);
	ck_assert_int_eq(ta_tu_tile_read(g_cuda, mg, bytes, t, ag, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_read(g_cpu, mc, bytes, t, ac, &err), TA_OK);
	long bad = 0;
	int64_t n = (int64_t)(bytes / es);
	for (int64_t i = 0; i < n; i++)
		if (ta_tu_get(t->dtype, ag, (size_t)i) != ta_tu_get(t->dtype, ac, (size_t)i)) {
			if (bad++ < 3) {
				char fa[64], fb[64];
				printf("%s: tile %lld: cuda %s cpu %s\n", what, (long long)i,
				       ta_tu_fmt(t->dtype, ta_tu_get(t->dtype, ag, (size_t)i), fa,
				                 sizeof fa),
				       ta_tu_fmt(t->dtype, ta_tu_get(t->dtype, ac, (size_t)i), fb,
				                 sizeof fb));
			}
		}
	if (plan.want_old)
		for (int64_t k = 0; k < plan.count; k++)
			if (ta_tu_get(t->dtype, og, (size_t)k) !=
			    ta_tu_get(t->dtype, oc, (size_t)k)) {
				if (bad++ < 3)
					printf("%s: output %lld differs\n", what, (long long)k);
			}
	ta_backend_tile_free(g_cuda, mg);
	ta_backend_tile_free(g_cpu, mc);
	free(og);
	free(oc);
	free(ag);
	free(ac);
	return bad;
}

START_TEST(test_large_elementwise)
{
	static const ta_dtype dts[] = {TA_DTYPE_I32, TA_DTYPE_U32, TA_DTYPE_I64, TA_DTYPE_U64,
	                               TA_DTYPE_F32, TA_DTYPE_F64, TA_DTYPE_F16, TA_DTYPE_BF16};
	static const ta_op ops[] = {TA_OP_ADD,  TA_OP_SUB,  TA_OP_MIN,  TA_OP_MAX,
	                            TA_OP_EXCH, TA_OP_CAS,  TA_OP_AND,  TA_OP_OR,
	                            TA_OP_XOR,  TA_OP_LOAD, TA_OP_STORE};
	const int64_t n = (1 << 20) + 3;
	uint64_t rng = 42;
	long bad = 0;
	int runs = 0;
	for (size_t d = 0; d < 8; d++) {
		ta_dtype dt = dts[d];
		ta_tile_shape t = {dt, 1, {n}};
		uint64_t *bits = malloc(sizeof(uint64_t) * (size_t)n);
		ck_assert_ptr_nonnull(bits);
		for (int64_t i = 0; i < n; i++)
			bits[i] = rand_elem(dt, false, &rng);
		void *init = ta_tu_pack(dt, bits, (size_t)n);
		for (int64_t i = 0; i < n; i++)
			bits[i] = i % 3 == 0 ? ta_tu_get(dt, init, (size_t)i)
			                     : rand_elem(dt, false, &rng);
		void *vals = ta_tu_pack(dt, bits, (size_t)n);
		uint8_t *maskb = malloc((size_t)n);
		ck_assert(init && vals && maskb);
		for (int64_t i = 0; i < n; i++)
			maskb[i] = (uint8_t)(ta_tu_rand_below(&rng, 5) != 0);
		for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
			if (!ta_op_accepts_dtype(ops[o], dt))
				continue;
			for (int variant = 0; variant < 3; variant++) {
				ta_request req;
				ta_request_region(&req,
				                  ops[o] == TA_OP_LOAD || ops[o] == TA_OP_STORE
				                      ? TA_FAMILY_MEMORY
				                      : TA_FAMILY_ELEMENTWISE,
				                  ops[o]);
				int64_t shp[1] = {n};
				if (ops[o] != TA_OP_LOAD)
					req.values = ta_tu_view(dt, 1, shp, vals);
				if (ops[o] == TA_OP_CAS)
					req.compare =
					    ta_tu_view(dt, 1, shp, init); /* all succeed */
				req.want_old =
				    ops[o] == TA_OP_LOAD || (variant != 1 && ops[o] != TA_OP_STORE);
				if (variant == 2) {
					req.mask = ta_tu_view(TA_DTYPE_BOOL, 1, shp, maskb);
					req.sem = ops[o] == TA_OP_LOAD    ? TA_SEM_ACQUIRE
					          : ops[o] == TA_OP_STORE ? TA_SEM_RELEASE
					                                  : TA_SEM_ACQ_REL;
					req.scope = TA_SCOPE_SYS;
				}
				char what[96];
				snprintf(what, sizeof what, "large %s %s variant %d",
				         ta_op_name(ops[o]), ta_dtype_name(dt), variant);
				long b = run_both(&t, init, &req, what);
				bad += b;
				runs++;
			}
		}
		free(bits);
		free(init);
		free(vals);
		free(maskb);
	}
	printf("large element-wise: %d runs of %lld elements, %ld mismatches\n", runs, (long long)n,
	       bad);
	ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_large_histogram)
{
	/* 2^22 + 1 flat keys (int32 and int64, some out of range, a mask) into 256, 1000 and
	 * 70000 bins; global and shared space; int32 and uint64 and float32 (min) tiles; then
	 * the counting loop's other forms (a scalar operand, no mask or a scalar one): a
	 * scalar mask true and false, sub 2 on int32, max 5 on int64, xor 0x5a on uint32 */
	const int64_t n = (1 << 22) + 1;
	static const int64_t bins[] = {256, 1000, 70000};
	uint64_t rng = 7;
	long bad = 0;
	int runs = 0;
	int32_t *k32 = malloc(sizeof(int32_t) * (size_t)n);
	int64_t *k64 = malloc(sizeof(int64_t) * (size_t)n);
	uint8_t *maskb = malloc((size_t)n);
	ck_assert(k32 && k64 && maskb);
	for (size_t b = 0; b < 3; b++) {
		for (int64_t i = 0; i < n; i++) {
			int64_t v = (int64_t)ta_tu_rand_below(&rng, (uint64_t)bins[b] + 2) - 1;
			k32[i] = (int32_t)v;
			k64[i] = v;
			maskb[i] = (uint8_t)(ta_tu_rand_below(&rng, 7) != 0);
		}
		for (int cfg = 0; cfg < 13; cfg++) {
			static const ta_dtype more_dt[] = {TA_DTYPE_I32, TA_DTYPE_I32, TA_DTYPE_I32,
			                                   TA_DTYPE_I64, TA_DTYPE_U32};
			static const ta_op more_op[] = {TA_OP_ADD, TA_OP_ADD, TA_OP_SUB, TA_OP_MAX,
			                                TA_OP_XOR};
			static const uint64_t more_val[] = {1, 1, 2, 5, 0x5a};
			ta_dtype dt = cfg < 4   ? TA_DTYPE_I32
			              : cfg < 6 ? TA_DTYPE_U64
			              : cfg < 8 ? TA_DTYPE_F32
			                        : more_dt[cfg - 8];
			ta_op op = cfg < 6 ? TA_OP_ADD : cfg < 8 ? TA_OP_MIN : more_op[cfg - 8];
			ta_tile_shape t = {dt, 1, {bins[b]}};
			void *init = calloc((size_t)bins[b], ta_dtype_size(dt));
			/* uint64 adds 3: the counting loop's form for an operand other than 1 */
			uint64_t one = dt == TA_DTYPE_F32   ? 0x3f800000u
			               : cfg >= 8           ? more_val[cfg - 8]
			               : dt == TA_DTYPE_U64 ? 3
			                                    : 1;
			bool mask_scalar = cfg == 8 || cfg == 9, mask_on = cfg == 8;
			void *vals = ta_tu_pack(dt, &one, 1);
			void *fvals = NULL;
			ta_request req;
			ta_request_init(&req);
			req.family = TA_FAMILY_INDEXED;
			req.op = op;
			req.addr = TA_ADDR_FLAT;
			req.n_index = 1;
			int64_t shp[1] = {n};
			req.index[0] = (cfg & 1) ? ta_tu_view(TA_DTYPE_I64, 1, shp, k64)
			                         : ta_tu_view(TA_DTYPE_I32, 1, shp, k32);
			req.values = ta_tu_view(dt, 0, NULL, vals);
			if (op == TA_OP_MIN) { /* per-key values: -(key % 97) */
				uint64_t *fb = malloc(sizeof(uint64_t) * (size_t)n);
				ck_assert_ptr_nonnull(fb);
				for (int64_t i = 0; i < n; i++)
					ta_tu_encode(dt, -(double)(k64[i] > 0 ? k64[i] % 97 : 0),
					             &fb[i]);
				fvals = ta_tu_pack(dt, fb, (size_t)n);
				free(fb);
				req.values = ta_tu_view(dt, 1, shp, fvals);
			}
			uint8_t mask1 = mask_on;
			if (cfg < 8 && (cfg & 2))
				req.mask = ta_tu_view(TA_DTYPE_BOOL, 1, shp, maskb);
			else if (mask_scalar)
				req.mask = ta_tu_view(TA_DTYPE_BOOL, 0, NULL, &mask1);
			if (cfg >= 8 && (cfg & 1)) /* int64 keys for half of them */
				req.index[0] = ta_tu_view(TA_DTYPE_I64, 1, shp, k64);
			req.space = (cfg == 2 || cfg == 5 || cfg == 9 || cfg == 11)
			                ? TA_SPACE_SHARED
			                : TA_SPACE_GLOBAL;
			char what[96];
			snprintf(what, sizeof what, "histogram %lld bins %s %s cfg %d",
			         (long long)bins[b], ta_dtype_name(dt), ta_op_name(op), cfg);
			bad += run_both(&t, init, &req, what);
			runs++;
			free(init);
			free(vals);
			free(fvals);
		}
	}
	free(k32);
	free(k64);
	free(maskb);
	printf("large histograms: %d runs of %lld keys, %ld mismatches\n", runs, (long long)n, bad);
	ck_assert_int_eq(bad, 0);
}
END_TEST

/* One cluster-window case: op and tile dtype, bins, scatter (general loop) or flat keys. */
typedef struct cluster_case {
	ta_op op;     /* the op */
	ta_dtype dt;  /* tile dtype */
	int64_t bins; /* tile extent: the window */
	bool scatter; /* scatter family (general loop), else flat int32 keys (fast loop) */
	int scalar;   /* 0: a value per key; else this one value for every key (unmasked: the
	               * counting loop, with 1 its aggregated form) */
} cluster_case;

START_TEST(test_cluster)
{
	/* windows too large for one block's shared memory (96 KB), requested in space
	 * shared: split by range over the shared memory of a 2-block cluster (up to 454 KB),
	 * every op with a private form, every dtype (16-bit and float ones through CAS
	 * loops), flat keys (fast loop, its counting loop) and scatter (general loop), masks
	 * and out-of-range keys; bit-exact against the CPU backend. Float min/max operands
	 * carry no NaN: which of several NaN payloads wins depends on the order. */
	static const cluster_case cases[] = {
	    {TA_OP_ADD, TA_DTYPE_I32, 65536, false, 0},
	    {TA_OP_ADD, TA_DTYPE_I32, 100001, true, 0},
	    {TA_OP_XOR, TA_DTYPE_U32, 70000, false, 0},
	    {TA_OP_MIN, TA_DTYPE_U32, 70000, false, 0},
	    {TA_OP_MAX, TA_DTYPE_I32, 70000, true, 0},
	    {TA_OP_AND, TA_DTYPE_U32, 70000, false, 0},
	    {TA_OP_SUB, TA_DTYPE_U64, 40000, true, 0},
	    {TA_OP_ADD, TA_DTYPE_U64, 40000, false, 0},
	    {TA_OP_MIN, TA_DTYPE_I64, 30000, false, 0},
	    {TA_OP_MIN, TA_DTYPE_I64, 30000, true, 0},
	    {TA_OP_XOR, TA_DTYPE_U64, 30001, false, 0},
	    {TA_OP_MAX, TA_DTYPE_U64, 20000, false, 0},
	    {TA_OP_OR, TA_DTYPE_I64, 30000, false, 0},
	    {TA_OP_MAX, TA_DTYPE_F32, 70000, true, 0},
	    {TA_OP_MIN, TA_DTYPE_F64, 30000, false, 0},
	    {TA_OP_ADD, TA_DTYPE_F32, 70000, false, 0},
	    {TA_OP_ADD, TA_DTYPE_F64, 30000, true, 0},
	    {TA_OP_ADD, TA_DTYPE_F16, 70000, true, 0},
	    {TA_OP_MIN, TA_DTYPE_BF16, 130000, false, 0},
	    {TA_OP_MAX, TA_DTYPE_F16, 200001, false, 0},
	    {TA_OP_ADD, TA_DTYPE_I32, 65536, false, 1},
	    {TA_OP_ADD, TA_DTYPE_U64, 40001, false, 3},
	    {TA_OP_SUB, TA_DTYPE_I32, 70001, false, 2},
	    {TA_OP_MAX, TA_DTYPE_I32, 70000, false, 5},
	};
	const int64_t n = (1 << 20) + 5;
	uint64_t rng = 11;
	long bad = 0;
	int runs = 0;
	int32_t *keys = malloc(sizeof(int32_t) * (size_t)n);
	uint64_t *bits = malloc(sizeof(uint64_t) * (size_t)n);
	uint8_t *maskb = malloc((size_t)n);
	ck_assert(keys && bits && maskb);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const cluster_case *cc = &cases[c];
		/* float add: small integers, so that the order of the additions cannot show */
		bool small = ta_dtype_is_float(cc->dt) && cc->op == TA_OP_ADD;
		for (int64_t i = 0; i < n; i++) {
			keys[i] = (int32_t)ta_tu_rand_below(&rng, (uint64_t)cc->bins + 2) - 1;
			maskb[i] = (uint8_t)(ta_tu_rand_below(&rng, 9) != 0);
			if (small)
				ta_tu_encode(cc->dt, (double)ta_tu_rand_below(&rng, 7) - 3.0,
				             &bits[i]);
			else
				do
					bits[i] = rand_elem(cc->dt, false, &rng);
				while (ta_tu_is_nan(cc->dt, bits[i]));
		}
		if (cc->scalar)
			ta_tu_encode(cc->dt, (double)cc->scalar, &bits[0]);
		void *vals = ta_tu_pack(cc->dt, bits, cc->scalar ? 1 : (size_t)n);
		for (int64_t i = 0; i < cc->bins; i++)
			if (small)
				ta_tu_encode(cc->dt, (double)(i % 5), &bits[i]);
			else
				bits[i] = rand_elem(cc->dt, false, &rng);
		void *init = ta_tu_pack(cc->dt, bits, (size_t)cc->bins);
		ck_assert(vals && init);
		ta_tile_shape t = {cc->dt, 1, {cc->bins}};
		for (int masked = 0; masked < 2; masked++) {
			ta_request req;
			ta_request_init(&req);
			req.family = cc->scatter ? TA_FAMILY_SCATTER : TA_FAMILY_INDEXED;
			req.addr = cc->scatter ? TA_ADDR_SCATTER : TA_ADDR_FLAT;
			req.op = cc->op;
			req.n_index = 1;
			int64_t shp[1] = {n};
			req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, shp, keys);
			req.values = cc->scalar ? ta_tu_view(cc->dt, 0, NULL, vals)
			                        : ta_tu_view(cc->dt, 1, shp, vals);
			if (masked)
				req.mask = ta_tu_view(TA_DTYPE_BOOL, 1, shp, maskb);
			req.space = TA_SPACE_SHARED;
			char what[96];
			snprintf(what, sizeof what, "cluster %s %s %lld bins%s%s%s",
			         ta_op_name(cc->op), ta_dtype_name(cc->dt), (long long)cc->bins,
			         cc->scatter ? " scatter" : " flat", cc->scalar ? " scalar" : "",
			         masked ? " masked" : "");
			long b = run_both(&t, init, &req, what);
			if (b)
				printf("%s: %ld mismatches\n", what, b);
			bad += b;
			runs++;
		}
		free(vals);
		free(init);
	}
	free(keys);
	free(bits);
	free(maskb);
	printf("cluster windows: %d runs of %lld keys, %ld mismatches\n", runs, (long long)n, bad);
	ck_assert_int_eq(bad, 0);
}
END_TEST

/* ---- runtime ------------------------------------------------------------------------------*/

START_TEST(test_alloc)
{
	ta_error err = {0};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, 0, &mem, &err), TA_INVALID_ARGUMENT);
	/* far more than any GPU has: RESOURCE_EXHAUSTED, and the backend goes on */
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, (size_t)1 << 50, &mem, &err),
	                 TA_RESOURCE_EXHAUSTED);
	ck_assert_ptr_null(mem);
	printf("huge allocation: %s\n", err.msg);
	ck_assert(strstr(err.msg, "out of") != NULL);
	/* a normal tile afterwards: zero-filled */
	ta_tile_shape t = {TA_DTYPE_I64, 2, {300, 7}};
	size_t bytes = (size_t)ta_tile_bytes(&t);
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mem, &err), TA_OK);
	int64_t *back = malloc(bytes);
	ck_assert_ptr_nonnull(back);
	memset(back, 0x77, bytes);
	ck_assert_int_eq(ta_tu_tile_read(g_cuda, mem, bytes, &t, back, &err), TA_OK);
	for (int i = 0; i < 300 * 7; i++)
		ck_assert_int_eq(back[i], 0);
	free(back);
	ta_backend_tile_free(g_cuda, mem);
	ta_backend_tile_free(g_cuda, NULL);
}
END_TEST

/* Shared state of the concurrency test. */
typedef struct conc_arg {
	void *mem;    /* the tile */
	size_t bytes; /* its size */
	int rounds;   /* applies per thread */
	int thread;   /* thread number */
	int failures; /* failed applies */
} conc_arg;

/* Thread body: adds 1 to the whole tile (elementwise) and 2 to element thread (indexed),
 * rounds times. */
static void *conc_thread(void *p)
{
	conc_arg *c = p;
	ta_tile_shape t = {TA_DTYPE_U64, 1, {1024}};
	uint64_t one = 1, two = 2;
	int64_t at = c->thread;
	for (int r = 0; r < c->rounds; r++) {
		ta_request req;
		ta_request_region(&req, TA_FAMILY_ELEMENTWISE, TA_OP_ADD);
		req.values = ta_tu_view(TA_DTYPE_U64, 0, NULL, &one);
		ta_plan plan;
		ta_result res;
		ta_error err;
		if (ta_plan_build(&plan, &t, &req, &err) != TA_OK ||
		    ta_backend_apply(g_cuda, c->mem, c->bytes, &plan, &res, &err) != TA_OK ||
		    res.applied != 1024)
			c->failures++;
		ta_request_init(&req);
		req.family = TA_FAMILY_INDEXED;
		req.op = TA_OP_ADD;
		req.addr = TA_ADDR_INDEXED;
		req.n_index = 1;
		int64_t shp[1] = {1};
		req.index[0] = ta_tu_view(TA_DTYPE_I64, 1, shp, &at);
		req.values = ta_tu_view(TA_DTYPE_U64, 0, NULL, &two);
		req.want_old = true;
		uint64_t old;
		if (ta_plan_build(&plan, &t, &req, &err) != TA_OK) {
			c->failures++;
			continue;
		}
		plan.old_out = &old;
		if (ta_backend_apply(g_cuda, c->mem, c->bytes, &plan, &res, &err) != TA_OK ||
		    res.applied != 1)
			c->failures++;
	}
	return NULL;
}

START_TEST(test_concurrent)
{
	enum { THREADS = 8, ROUNDS = 100 };
	ta_tile_shape t = {TA_DTYPE_U64, 1, {1024}};
	size_t bytes = (size_t)ta_tile_bytes(&t);
	ta_error err;
	void *mem;
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mem, &err), TA_OK);
	pthread_t th[THREADS];
	conc_arg args[THREADS];
	for (int i = 0; i < THREADS; i++) {
		args[i] = (conc_arg){mem, bytes, ROUNDS, i, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, conc_thread, &args[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].failures, 0);
	}
	uint64_t *back = malloc(bytes);
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(ta_tu_tile_read(g_cuda, mem, bytes, &t, back, &err), TA_OK);
	for (int i = 0; i < 1024; i++)
		ck_assert_uint_eq(back[i], THREADS * ROUNDS + (i < THREADS ? 2 * ROUNDS : 0));
	free(back);
	ta_backend_tile_free(g_cuda, mem);
}
END_TEST

/* State of one thread of the batch test. */
typedef struct batch_arg {
	void *mem;     /* the tile: int64 [8] */
	size_t bytes;  /* its size */
	int rounds;    /* increments by CAS per thread */
	int thread;    /* thread number */
	int failures;  /* failed applies or wrong counts */
	long attempts; /* CAS requests sent (each retry too) */
	long adds;     /* add requests sent */
} batch_arg;

/* Thread body: increments element 0 by compare-and-swap loops (each CAS a request whose
 * old value decides the retry) and adds 1 to element 1 + thread % 7 after each success,
 * rounds times: single-element requests that the backend batches across threads. */
static void *batch_thread(void *p)
{
	batch_arg *c = p;
	ta_tile_shape t = {TA_DTYPE_I64, 1, {8}};
	int64_t guess = 0, at0 = 0, at1 = 1 + c->thread % 7, one = 1;
	int64_t shp[1] = {1};
	for (int r = 0; r < c->rounds; r++) {
		for (;;) {
			int64_t want = guess + 1, old = -1;
			ta_request req;
			ta_request_init(&req);
			req.family = TA_FAMILY_INDEXED;
			req.op = TA_OP_CAS;
			req.addr = TA_ADDR_INDEXED;
			req.n_index = 1;
			req.index[0] = ta_tu_view(TA_DTYPE_I64, 1, shp, &at0);
			req.values = ta_tu_view(TA_DTYPE_I64, 0, NULL, &want);
			req.compare = ta_tu_view(TA_DTYPE_I64, 0, NULL, &guess);
			req.sem = TA_SEM_ACQ_REL;
			req.want_old = true;
			ta_plan plan;
			ta_result res;
			ta_error err;
			if (ta_plan_build(&plan, &t, &req, &err) != TA_OK) {
				c->failures++;
				return NULL;
			}
			plan.old_out = &old;
			c->attempts++;
			if (ta_backend_apply(g_cuda, c->mem, c->bytes, &plan, &res, &err) !=
			        TA_OK ||
			    res.applied != 1) {
				c->failures++;
				return NULL;
			}
			if (old == guess) {
				guess = want;
				break;
			}
			guess = old;
		}
		ta_request req;
		ta_request_init(&req);
		req.family = TA_FAMILY_INDEXED;
		req.op = TA_OP_ADD;
		req.addr = TA_ADDR_INDEXED;
		req.n_index = 1;
		req.index[0] = ta_tu_view(TA_DTYPE_I64, 1, shp, &at1);
		req.values = ta_tu_view(TA_DTYPE_I64, 0, NULL, &one);
		ta_plan plan;
		ta_result res;
		ta_error err;
		c->adds++;
		if (ta_plan_build(&plan, &t, &req, &err) != TA_OK ||
		    ta_backend_apply(g_cuda, c->mem, c->bytes, &plan, &res, &err) != TA_OK ||
		    res.applied != 1)
			c->failures++;
	}
	return NULL;
}

START_TEST(test_batch)
{
	enum { THREADS = 16, ROUNDS = 50 };
	ta_tile_shape t = {TA_DTYPE_I64, 1, {8}};
	size_t bytes = (size_t)ta_tile_bytes(&t);
	ta_error err;
	void *mem;
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mem, &err), TA_OK);
#ifdef TA_HAVE_CUDA
	unsigned long long batches0 = 0, batched0 = 0, batches1 = 0, batched1 = 0;
	if (!g_harness) /* (a CPU backend stands in: no batcher) */
		ta_cuda_batch_counts(g_cuda, &batches0, &batched0);
#endif
	pthread_t th[THREADS];
	batch_arg args[THREADS];
	long requests = 0;
	for (int i = 0; i < THREADS; i++) {
		args[i] = (batch_arg){mem, bytes, ROUNDS, i, 0, 0, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, batch_thread, &args[i]), 0);
	}
	int64_t per_slot[8] = {0};
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].failures, 0);
		requests += args[i].attempts + args[i].adds;
		per_slot[1 + i % 7] += ROUNDS;
	}
	int64_t back[8];
	ck_assert_int_eq(ta_tu_tile_read(g_cuda, mem, bytes, &t, back, &err), TA_OK);
	ck_assert_int_eq(back[0], THREADS * ROUNDS);
	for (int i = 1; i < 8; i++)
		ck_assert_int_eq(back[i], per_slot[i]);
#ifdef TA_HAVE_CUDA
	/* every request went through the batcher (the tile read is one more) */
	if (!g_harness)
		ta_cuda_batch_counts(g_cuda, &batches1, &batched1);
	if (!g_harness)
		ck_assert_uint_eq(batched1 - batched0, (unsigned long long)requests + 1);
	printf("batch: %ld requests from %d threads in %llu launches\n", requests, THREADS,
	       batches1 - batches0);
#endif
	ta_backend_tile_free(g_cuda, mem);
}
END_TEST

/* One caller's requests in one call (ta_backend_apply_many: one chain of the batcher), each
 * wanting its old value: runs of relaxed one-element requests (which the batch kernels
 * spread over a warp's lanes by address), a two-element request, an acq_rel one and
 * exch/cas between adds: every old value and the tile are exactly what applying them one
 * by one in order gives. */
START_TEST(test_batch_chain_order)
{
	enum { RUN = 40, CALLS = RUN + 6 };
	ta_tile_shape t = {TA_DTYPE_I64, 1, {64}};
	size_t bytes = (size_t)ta_tile_bytes(&t);
	ta_error err;
	void *mem;
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mem, &err), TA_OK);
	static int64_t at[CALLS][2], val[CALLS], cmp[CALLS], old[CALLS][2];
	static ta_plan plans[CALLS];
	static ta_result res[CALLS];
	static ta_error errs[CALLS];
	ta_apply_call calls[CALLS];
	int64_t want[CALLS][2];
	int64_t model[64] = {0};
	for (int k = 0; k < CALLS; k++) {
		ta_request req;
		ta_tu_indexed(&req, TA_OP_ADD, true);
		int64_t n = 1;
		at[k][0] = k < RUN ? (k * 13) % 5 : 0;
		val[k] = 1;
		if (k == RUN) { /* two elements: indices 0 and 1 */
			n = 2;
			at[k][1] = 1;
			val[k] = 100;
		} else if (k == RUN + 1) {
			at[k][0] = 2;
			req.sem = TA_SEM_ACQ_REL;
		} else if (k == RUN + 3) {
			req.op = TA_OP_EXCH;
			val[k] = 1000;
		} else if (k == RUN + 5) {
			req.op = TA_OP_CAS;
			cmp[k] = 1001;
			val[k] = 7;
			req.compare = ta_tu_view(TA_DTYPE_I64, 0, NULL, &cmp[k]);
		}
		int64_t shp[1] = {n};
		req.index[0] = ta_tu_view(TA_DTYPE_I64, 1, shp, at[k]);
		req.values = ta_tu_view(TA_DTYPE_I64, 0, NULL, &val[k]);
		ck_assert_int_eq(ta_plan_build(&plans[k], &t, &req, &err), TA_OK);
		plans[k].old_out = old[k];
		calls[k] = (ta_apply_call){mem, bytes, &plans[k], &res[k], &errs[k], TA_OK};
		for (int64_t e = 0; e < n; e++) { /* the model: one by one, in order */
			int64_t *m = &model[at[k][e]];
			want[k][e] = *m;
			if (req.op == TA_OP_EXCH)
				*m = val[k];
			else if (req.op == TA_OP_CAS)
				*m = *m == cmp[k] ? val[k] : *m;
			else
				*m += val[k];
		}
	}
	ta_backend_apply_many(g_cuda, calls, CALLS);
	for (int k = 0; k < CALLS; k++) {
		ck_assert_msg(calls[k].status == TA_OK, "call %d: %s", k, errs[k].msg);
		for (int64_t e = 0; e < plans[k].count; e++)
			ck_assert_msg(old[k][e] == want[k][e],
			              "call %d element %d: old %lld, want %lld", k, (int)e,
			              (long long)old[k][e], (long long)want[k][e]);
	}
	int64_t back[64];
	ck_assert_int_eq(ta_tu_tile_read(g_cuda, mem, bytes, &t, back, &err), TA_OK);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(back[i], model[i]);
	ck_assert_int_eq(back[0], 7); /* 8 + 100 + 1 by adds, exch 1000, add 1, cas 1001 -> 7 */
	ta_backend_tile_free(g_cuda, mem);
}
END_TEST

/* ---- lanes: a thread's own asynchronous calls (ta_backend_async_attach) ---- */

/* Requests of one group of test_lanes (one chain, in order). */
#define LANE_GROUP 16
/* Groups in flight per thread of test_lanes (its "connections", one group each). */
#define LANE_CONNS 4
/* Elements of each call of test_lanes' large group (three calls: more old values than a
 * mailbox area takes, so it goes through the lead). */
#define LANE_BIG 1024

/* One "connection" of test_lanes: its element, its group in flight and what it saw. */
typedef struct lane_conn {
	int64_t at;                      /* its element */
	int64_t one;                     /* the value each add adds (1) */
	int64_t old[LANE_GROUP];         /* old values of the group in flight */
	ta_plan plans[LANE_GROUP];       /* the group: LANE_GROUP adds of one at at */
	ta_result res[LANE_GROUP];       /* their results */
	ta_error errs[LANE_GROUP];       /* their errors */
	ta_apply_call calls[LANE_GROUP]; /* the calls handed to apply_async */
	volatile int done;               /* the group in flight is done (set by done) */
	int64_t seen;                    /* the element's value before the next group */
	int rounds;                      /* groups still to send */
	int failures;                    /* old values or statuses not as expected */
} lane_conn;

/* apply_async's done of test_lanes: the group is done. */
static void lane_done(void *arg)
{
	__atomic_store_n(&((lane_conn *)arg)->done, 1, __ATOMIC_RELEASE);
}

/* One thread of test_lanes. */
typedef struct lanes_arg {
	void *mem;                    /* the tile */
	size_t bytes;                 /* its bytes */
	int index;                    /* the thread's number */
	int rounds;                   /* groups per connection */
	bool big;                     /* also send the large group first */
	bool attached;                /* async_attach said true */
	bool out_after;               /* poll_async said true once everything was done (a bug) */
	int failures;                 /* what its connections saw wrong */
	int64_t big_old[3][LANE_BIG]; /* the large group's old values */
	int big_failures;             /* the large group's statuses and old values wrong */
} lanes_arg;

/* Builds an add of one (want_old) at *at into p. */
static void lane_plan(ta_plan *p, const ta_tile_shape *t, int64_t n, int64_t *at, int64_t *one)
{
	ta_error err;
	ta_request req;
	ta_tu_indexed(&req, TA_OP_ADD, true);
	int64_t shp[1] = {n};
	req.index[0] = ta_tu_view(TA_DTYPE_I64, 1, shp, at);
	req.values = ta_tu_view(TA_DTYPE_I64, 0, NULL, one);
	ck_assert_int_eq(ta_plan_build(p, t, &req, &err), TA_OK);
}

/* Sends connection c's next group. */
static void lane_send(lanes_arg *a, lane_conn *c)
{
	c->done = 0;
	for (int k = 0; k < LANE_GROUP; k++)
		c->calls[k] =
		    (ta_apply_call){a->mem, a->bytes, &c->plans[k], &c->res[k], &c->errs[k], TA_OK};
	c->rounds--;
	ta_backend_apply_async(g_cuda, c->calls, LANE_GROUP, lane_done, c);
}

/* A thread of test_lanes: attaches, keeps LANE_CONNS groups in flight (each connection's
 * next once its last is done) and polls until every one is done, checking each old value. */
static void *lanes_thread(void *p)
{
	lanes_arg *a = p;
	ta_tile_shape t = {TA_DTYPE_I64, 1, {(int64_t)(a->bytes / 8)}};
	static __thread lane_conn conns[LANE_CONNS];
	a->attached = ta_backend_async_attach(g_cuda);
	if (a->big) { /* 3 x 1024 adds at 3072..4095, each wanting its old value */
		static __thread int64_t at[LANE_BIG], one = 1;
		static __thread ta_plan plans[3];
		static __thread ta_result res[3];
		static __thread ta_error errs[3];
		ta_apply_call calls[3];
		static __thread lane_conn flag;
		for (int e = 0; e < LANE_BIG; e++)
			at[e] = 3072 + e;
		for (int k = 0; k < 3; k++) {
			lane_plan(&plans[k], &t, LANE_BIG, at, &one);
			plans[k].old_out = a->big_old[k];
			calls[k] =
			    (ta_apply_call){a->mem, a->bytes, &plans[k], &res[k], &errs[k], TA_OK};
		}
		flag.done = 0;
		ta_backend_apply_async(g_cuda, calls, 3, lane_done, &flag);
		while (!__atomic_load_n(&flag.done, __ATOMIC_ACQUIRE))
			(void)ta_backend_poll_async(g_cuda);
		for (int k = 0; k < 3; k++) {
			if (calls[k].status != TA_OK)
				a->big_failures++;
			for (int e = 0; e < LANE_BIG; e++)
				a->big_failures += a->big_old[k][e] != k;
		}
	}
	for (int i = 0; i < LANE_CONNS; i++) {
		lane_conn *c = &conns[i];
		memset(c, 0, sizeof(*c));
		c->at = a->index * LANE_CONNS + i;
		c->one = 1;
		c->rounds = a->rounds;
		for (int k = 0; k < LANE_GROUP; k++) {
			lane_plan(&c->plans[k], &t, 1, &c->at, &c->one);
			c->plans[k].old_out = &c->old[k];
		}
		lane_send(a, c);
	}
	for (int left = LANE_CONNS; left > 0;) {
		(void)ta_backend_poll_async(g_cuda);
		for (int i = 0; i < LANE_CONNS; i++) {
			lane_conn *c = &conns[i];
			if (__atomic_load_n(&c->done, __ATOMIC_ACQUIRE) != 1)
				continue;
			for (int k = 0; k < LANE_GROUP; k++) /* in order: exactly one more each */
				if (c->calls[k].status != TA_OK || c->old[k] != c->seen + k)
					c->failures++;
			c->seen += LANE_GROUP;
			c->done = 0;
			if (c->rounds > 0)
				lane_send(a, c);
			else {
				c->done = -1; /* (never 1 again) */
				left--;
			}
		}
	}
	a->out_after = ta_backend_poll_async(g_cuda);
	for (int i = 0; i < LANE_CONNS; i++)
		a->failures += conns[i].failures;
	return NULL;
}

/* Threads that attach (the daemon's loops) run their asynchronous calls through their own
 * lanes: four threads of four connections each, every connection's groups one after
 * another, while another thread allocates and frees large tiles (each a pk_hold that stops
 * the lanes' kernels) and one thread's first group is too large for a lane (it goes through
 * the lead): every old value is exactly the count before it, and the tile the total. */
START_TEST(test_lanes)
{
	enum { THREADS = 4, ROUNDS = 300 };
	ta_tile_shape t = {TA_DTYPE_I64, 1, {4096}};
	size_t bytes = (size_t)ta_tile_bytes(&t);
	ta_error err;
	void *mem;
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mem, &err), TA_OK);
	static lanes_arg args[THREADS];
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++) {
		args[i] = (lanes_arg){
		    .mem = mem, .bytes = bytes, .index = i, .rounds = ROUNDS, .big = i == 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, lanes_thread, &args[i]), 0);
	}
	for (int k = 0; k < 20; k++) { /* holds while the lanes run */
		void *big;
		ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, 64u << 20, &big, &err), TA_OK);
		ta_backend_tile_free(g_cuda, big);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].failures, 0);
		ck_assert(!args[i].out_after);
		ck_assert(args[i].attached); /* (the harness's CPU backend has lanes too) */
	}
	ck_assert_int_eq(args[0].big_failures, 0);
	int64_t back[4096];
	ck_assert_int_eq(ta_tu_tile_read(g_cuda, mem, bytes, &t, back, &err), TA_OK);
	for (int i = 0; i < 4096; i++)
		ck_assert_int_eq(back[i], i < THREADS * LANE_CONNS ? (int64_t)ROUNDS * LANE_GROUP
		                          : i >= 3072              ? 3
		                                                   : 0);
	ta_backend_tile_free(g_cuda, mem);
}
END_TEST

START_TEST(test_contention)
{
	/* 2^20 updates of one element: the sum is exact (int32, uint64, float32 of ones) */
	static const ta_dtype dts[] = {TA_DTYPE_I32, TA_DTYPE_U64, TA_DTYPE_F32};
	const int64_t n = 1 << 20;
	int64_t *zeros = calloc((size_t)n, sizeof(int64_t));
	ck_assert_ptr_nonnull(zeros);
	for (size_t d = 0; d < 3; d++)
		for (int sp = 0; sp < 2; sp++) {
			ta_dtype dt = dts[d];
			ta_tile_shape t = {dt, 1, {3}};
			size_t bytes = (size_t)ta_tile_bytes(&t);
			ta_error err;
			void *mem;
			ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mem, &err), TA_OK);
			uint64_t one = dt == TA_DTYPE_F32 ? 0x3f800000u : 1;
			void *v = ta_tu_pack(dt, &one, 1);
			ta_request req;
			ta_request_init(&req);
			req.family = TA_FAMILY_INDEXED;
			req.op = TA_OP_ADD;
			req.addr = TA_ADDR_INDEXED;
			req.n_index = 1;
			int64_t shp[1] = {n};
			req.index[0] = ta_tu_view(TA_DTYPE_I64, 1, shp, zeros);
			req.values = ta_tu_view(dt, 0, NULL, v);
			req.space = sp ? TA_SPACE_SHARED : TA_SPACE_GLOBAL;
			req.sem = sp ? TA_SEM_RELAXED : TA_SEM_ACQ_REL;
			ta_plan plan;
			ta_result res;
			ck_assert_int_eq(ta_plan_build(&plan, &t, &req, &err), TA_OK);
			ck_assert_int_eq(ta_backend_apply(g_cuda, mem, bytes, &plan, &res, &err),
			                 TA_OK);
			ck_assert_uint_eq(res.applied, (uint64_t)n);
			uint64_t back[3] = {0};
			void *raw = malloc(bytes);
			ck_assert_int_eq(ta_tu_tile_read(g_cuda, mem, bytes, &t, raw, &err), TA_OK);
			for (int i = 0; i < 3; i++)
				back[i] = ta_tu_get(dt, raw, (size_t)i);
			double got = ta_tu_decode(dt, back[0]);
			ck_assert_msg(got == (double)n, "%s space %d: %g", ta_dtype_name(dt), sp,
			              got);
			ck_assert_uint_eq(back[1], 0);
			ck_assert_uint_eq(back[2], 0);
			free(raw);
			free(v);
			ta_backend_tile_free(g_cuda, mem);
		}
	free(zeros);
}
END_TEST

#ifdef TA_HAVE_CUDA
/* Copies n bytes of host data to a new device buffer. */
static void *to_device(const void *src, size_t n)
{
	void *d = NULL;
	ck_assert_int_eq(cudaMalloc(&d, n), cudaSuccess);
	ck_assert_int_eq(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice), cudaSuccess);
	return d;
}

/* Launches an add of n ones (dones, device) at the int32 keys dkeys (device, all in
 * range) into a 65536-bin int32 tile, flat-indexed or (scatter) scatter-dim 0 (the
 * general loop), in space sp; checks the total and returns the path taken. */
static const char *cluster_path_of(const void *dkeys, const void *dones, int64_t n, bool scatter,
                                   ta_space sp)
{
	const int64_t bins = 65536;
	ta_tile_shape t = {TA_DTYPE_I32, 1, {bins}};
	void *dtile, *dcnt;
	ck_assert_int_eq(cudaMalloc(&dtile, (size_t)bins * 4), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&dcnt, 3 * sizeof(unsigned long long)), cudaSuccess);
	ck_assert_int_eq(cudaMemset(dtile, 0, (size_t)bins * 4), cudaSuccess);
	ck_assert_int_eq(cudaMemset(dcnt, 0, 3 * sizeof(unsigned long long)), cudaSuccess);
	ta_request req;
	ta_request_init(&req);
	req.family = scatter ? TA_FAMILY_SCATTER : TA_FAMILY_INDEXED;
	req.addr = scatter ? TA_ADDR_SCATTER : TA_ADDR_FLAT;
	req.op = TA_OP_ADD;
	req.n_index = 1;
	int64_t shp[1] = {n};
	/* device pointers in the views: the plan builder takes shapes, not data, with bounds
	 * checking on */
	req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, shp, dkeys);
	req.values = ta_tu_view(TA_DTYPE_I32, 1, shp, dones);
	req.space = sp;
	ta_plan plan;
	ta_error err;
	ck_assert_int_eq(ta_plan_build(&plan, &t, &req, &err), TA_OK);
	ta_cuda_path path;
	ck_assert_int_eq(
	    ta_cuda_launch_plan(&plan, dtile, (size_t)bins * 4, dcnt, NULL, &path, &err), TA_OK);
	unsigned long long cnt[3];
	ck_assert_int_eq(cudaMemcpy(cnt, dcnt, sizeof cnt, cudaMemcpyDeviceToHost), cudaSuccess);
	int32_t *h = malloc((size_t)bins * 4);
	ck_assert_ptr_nonnull(h);
	ck_assert_int_eq(cudaMemcpy(h, dtile, (size_t)bins * 4, cudaMemcpyDeviceToHost),
	                 cudaSuccess);
	int64_t total = 0;
	for (int64_t b = 0; b < bins; b++)
		total += h[b];
	ck_assert_int_eq(total, n); /* every key is in range */
	ck_assert_uint_eq(cnt[1], (uint64_t)n);
	free(h);
	cudaFree(dtile);
	cudaFree(dcnt);
	return ta_cuda_path_name(path);
}

/* The cluster paths: a 65536-bin window (256 KB) in space shared, flat keys and scatter;
 * chosen by itself in space global with 64 keys a bin, not with 32, not when automatic
 * windows are off. Without cluster support (a device or build before sm_90): the global
 * paths. */
static void check_cluster_paths(void)
{
	const bool cl = ta_cuda_cluster_windows() != 0;
	printf("cluster windows %s on this device\n", cl ? "usable" : "not usable");
	const int64_t n = (int64_t)64 * 65536;
	int32_t *keys = malloc(sizeof(int32_t) * (size_t)n);
	int32_t *ones = malloc(sizeof(int32_t) * (size_t)n);
	ck_assert(keys && ones);
	for (int64_t i = 0; i < n; i++) {
		keys[i] = (int32_t)((i * 2654435761u) & 65535u);
		ones[i] = 1;
	}
	void *dkeys = to_device(keys, sizeof(int32_t) * (size_t)n);
	void *dones = to_device(ones, sizeof(int32_t) * (size_t)n);
	ck_assert_str_eq(cluster_path_of(dkeys, dones, n, false, TA_SPACE_SHARED),
	                 cl ? "cluster-fast" : "global-fast");
	ck_assert_str_eq(cluster_path_of(dkeys, dones, n, true, TA_SPACE_SHARED),
	                 cl ? "cluster" : "global");
	ck_assert_str_eq(cluster_path_of(dkeys, dones, n, false, TA_SPACE_GLOBAL),
	                 cl ? "cluster-fast" : "global-fast");
	ck_assert_str_eq(cluster_path_of(dkeys, dones, n / 2, false, TA_SPACE_GLOBAL),
	                 "global-fast");
	ta_cuda_set_auto_window(0);
	ck_assert_str_eq(cluster_path_of(dkeys, dones, n, false, TA_SPACE_GLOBAL), "global-fast");
	ta_cuda_set_auto_window(1);
	cudaFree(dkeys);
	cudaFree(dones);
	free(keys);
	free(ones);
}

START_TEST(test_paths)
{
	/* the histogram of the performance floor: shared-fast, also when space is global;
	 * element-wise add: global-fast; scatter: global; the counts are right */
	ck_assert_int_eq(cudaSetDevice(g_device), cudaSuccess);
	const int64_t n = 1 << 16;
	int32_t *keys = malloc(sizeof(int32_t) * (size_t)n);
	ck_assert_ptr_nonnull(keys);
	for (int64_t i = 0; i < n; i++)
		keys[i] = (int32_t)((i * 2654435761u) % 258) - 1; /* 2 of 258 out of range */
	int32_t one = 1;
	ta_tile_shape t = {TA_DTYPE_I32, 1, {256}};
	void *dkeys = to_device(keys, sizeof(int32_t) * (size_t)n);
	void *done = to_device(&one, sizeof one);
	void *dtile, *dcnt;
	ck_assert_int_eq(cudaMalloc(&dtile, 256 * sizeof(int32_t)), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&dcnt, 3 * sizeof(unsigned long long)), cudaSuccess);
	for (int sp = 0; sp < 2; sp++) {
		ck_assert_int_eq(cudaMemset(dtile, 0, 256 * sizeof(int32_t)), cudaSuccess);
		ck_assert_int_eq(cudaMemset(dcnt, 0, 3 * sizeof(unsigned long long)), cudaSuccess);
		ta_request req;
		ta_request_init(&req);
		req.family = TA_FAMILY_INDEXED;
		req.op = TA_OP_ADD;
		req.addr = TA_ADDR_FLAT;
		req.n_index = 1;
		int64_t shp[1] = {n};
		req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, shp, keys);
		req.values = ta_tu_view(TA_DTYPE_I32, 0, NULL, &one);
		req.space = sp ? TA_SPACE_SHARED : TA_SPACE_GLOBAL;
		ta_plan plan;
		ta_error err;
		ck_assert_int_eq(ta_plan_build(&plan, &t, &req, &err), TA_OK);
		plan.index[0].data = dkeys;
		plan.values.data = done;
		ta_cuda_path path;
		ck_assert_int_eq(ta_cuda_launch_plan(&plan, dtile, 256 * sizeof(int32_t), dcnt,
		                                     NULL, &path, &err),
		                 TA_OK);
		ck_assert_str_eq(ta_cuda_path_name(path), "shared-fast");
		ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
		int32_t hist[256];
		unsigned long long cnt[3];
		ck_assert_int_eq(cudaMemcpy(hist, dtile, sizeof hist, cudaMemcpyDeviceToHost),
		                 cudaSuccess);
		ck_assert_int_eq(cudaMemcpy(cnt, dcnt, sizeof cnt, cudaMemcpyDeviceToHost),
		                 cudaSuccess);
		int64_t want[256] = {0}, skipped = 0;
		for (int64_t i = 0; i < n; i++) {
			if (keys[i] < 0 || keys[i] >= 256)
				skipped++;
			else
				want[keys[i]]++;
		}
		for (int b = 0; b < 256; b++)
			ck_assert_int_eq(hist[b], want[b]);
		ck_assert_uint_eq(cnt[0], (uint64_t)skipped);
		ck_assert_uint_eq(cnt[1], (uint64_t)(n - skipped));
		ck_assert_uint_eq(cnt[2], 0);
	}
	/* element-wise add over the whole tile: global-fast */
	ta_request req;
	ta_request_region(&req, TA_FAMILY_ELEMENTWISE, TA_OP_ADD);
	req.values = ta_tu_view(TA_DTYPE_I32, 0, NULL, &one);
	ta_plan plan;
	ta_error err;
	ck_assert_int_eq(ta_plan_build(&plan, &t, &req, &err), TA_OK);
	plan.values.data = done;
	ta_cuda_path path;
	ck_assert_int_eq(
	    ta_cuda_launch_plan(&plan, dtile, 256 * sizeof(int32_t), dcnt, NULL, &path, &err),
	    TA_OK);
	ck_assert_str_eq(ta_cuda_path_name(path), "global-fast");
	/* a plan larger than its tile is refused before any launch */
	ck_assert_int_eq(ta_cuda_launch_plan(&plan, dtile, 100, dcnt, NULL, &path, &err),
	                 TA_INVALID_ARGUMENT);
	ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
	ck_assert_int_gt(ta_cuda_kernel_count(), 200);
	check_cluster_paths();
	cudaFree(dkeys);
	cudaFree(done);
	cudaFree(dtile);
	cudaFree(dcnt);
	free(keys);
}
END_TEST
#endif

/* A merge-out (ta_plan.h, ta_merge_out: the multi-device layer's one apply for keys on one
 * GPU into a sharded tile): the scratch (holding junk, then the previous round's sums) is
 * zeroed on the stream, the histogram runs into it (int32: 2^16 + 3 keys into 256 bins,
 * the privatised path; int64: a sub of a value vector into 1001 bins), and its rows are
 * added into two other tiles of the backend (the second remote: scope sys), the second
 * round with sem release and, on a GPU, the keys in device memory. Exact targets, counts;
 * the plan never goes to the batcher (a one-key plan with a merge-out gives the same). */
START_TEST(test_merge_out)
{
	for (int di = 0; di < 2; di++) {
		ta_dtype dt = di ? TA_DTYPE_I64 : TA_DTYPE_I32;
		ta_op op = di ? TA_OP_SUB : TA_OP_ADD;
		int64_t bins = di ? 1001 : 256, split = di ? 400 : 100;
		int64_t n = di ? 5000 : (1 << 16) + 3;
		size_t es = ta_dtype_size(dt), bytes = (size_t)bins * es;
		uint64_t wmask = es == 8 ? UINT64_MAX : 0xffffffffu;
		ta_tile_shape t = {dt, 1, {bins}};
		ta_tile_shape ta = {dt, 1, {split}}, tb = {dt, 1, {bins - split}};
		ta_error err = {0};
		void *scratch = NULL, *ma = NULL, *mb = NULL;
		ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &scratch, &err), TA_OK);
		ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, (size_t)split * es, &ma, &err),
		                 TA_OK);
		ck_assert_int_eq(
		    ta_backend_tile_alloc(g_cuda, (size_t)(bins - split) * es, &mb, &err), TA_OK);
		uint64_t *want = malloc((size_t)bins * 8);
		void *buf = malloc(bytes), *vals = malloc((size_t)n * es);
		int32_t *keys = malloc((size_t)n * 4);
		ck_assert(want && buf && vals && keys);
		for (int64_t i = 0; i < bins; i++) {
			want[i] = ((uint64_t)i * 7 - 50) & wmask;
			ta_tu_set(dt, buf, (size_t)i, want[i]);
		}
		ck_assert_int_eq(ta_tu_tile_write(g_cuda, ma, (size_t)split * es, &ta, buf, &err),
		                 TA_OK);
		ck_assert_int_eq(ta_tu_tile_write(g_cuda, mb, (size_t)(bins - split) * es, &tb,
		                                  (char *)buf + (size_t)split * es, &err),
		                 TA_OK);
		for (int64_t i = 0; i < bins; i++)
			ta_tu_set(dt, buf, (size_t)i, 0x5a5a5a5a + (uint64_t)i); /* junk */
		ck_assert_int_eq(ta_tu_tile_write(g_cuda, scratch, bytes, &t, buf, &err), TA_OK);
		uint64_t rng = 77 + (uint64_t)di, one = 1;
		for (int round = 0; round < 2; round++) {
			uint64_t skipped = 0;
			for (int64_t k = 0; k < n; k++) {
				int64_t key =
				    (int64_t)ta_tu_rand_below(&rng, (uint64_t)bins + 3) - 1;
				keys[k] = (int32_t)key;
				uint64_t v = op == TA_OP_ADD ? 1 : (uint64_t)(k % 9 + 1);
				ta_tu_set(dt, vals, (size_t)k, v);
				if (key < 0 || key >= bins)
					skipped++;
				else
					want[key] =
					    (op == TA_OP_ADD ? want[key] + v : want[key] - v) &
					    wmask;
			}
			ta_request r;
			ta_request_init(&r);
			r.family = TA_FAMILY_INDEXED;
			r.op = op;
			r.addr = TA_ADDR_FLAT;
			r.n_index = 1;
			int64_t sh[1] = {n};
			r.index[0] = ta_tu_view(TA_DTYPE_I32, 1, sh, keys);
			r.values = op == TA_OP_ADD ? ta_tu_view(dt, 0, sh, &one)
			                           : ta_tu_view(dt, 1, sh, vals);
			r.sem = round ? TA_SEM_RELEASE : TA_SEM_RELAXED;
			ta_plan p;
			ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err), TA_OK);
			ta_merge_target tg[2] = {{ma, 0, split, false},
			                         {mb, split, bins - split, true}};
			ta_merge_out mo = {true, 2, tg};
			p.merge_out = &mo;
			void *dkeys = NULL; /* the keys in device memory (round 1 on a GPU) */
			(void)dkeys;        /* (unused without CUDA) */
#ifdef TA_HAVE_CUDA
			if (round == 1 && !g_harness) {
				ck_assert_int_eq(cudaSetDevice(g_device), cudaSuccess);
				dkeys = to_device(keys, (size_t)n * 4);
				p.index[0].data = dkeys;
				p.index[0].device = true;
			}
#endif
			ta_result res = {0, 0};
			ck_assert_msg(ta_backend_apply(g_cuda, scratch, bytes, &p, &res, &err) ==
			                  TA_OK,
			              "%s", err.msg);
			ck_assert_uint_eq(res.skipped, skipped);
			ck_assert_uint_eq(res.applied, (uint64_t)n - skipped);
#ifdef TA_HAVE_CUDA
			if (dkeys)
				ck_assert_int_eq(cudaFree(dkeys), cudaSuccess);
#endif
			ck_assert_int_eq(
			    ta_tu_tile_read(g_cuda, ma, (size_t)split * es, &ta, buf, &err), TA_OK);
			ck_assert_int_eq(ta_tu_tile_read(g_cuda, mb, (size_t)(bins - split) * es,
			                                 &tb, (char *)buf + (size_t)split * es,
			                                 &err),
			                 TA_OK);
			for (int64_t i = 0; i < bins; i++)
				ck_assert_msg(ta_tu_get(dt, buf, (size_t)i) == want[i],
				              "%s round %d: bin %lld", ta_dtype_name(dt), round,
				              (long long)i);
		}
		/* one key (a batcher-sized plan): still zeroed, run and merged on its own */
		keys[0] = (int32_t)(bins - 1);
		ta_tu_set(dt, vals, 0, 5);
		want[bins - 1] =
		    (op == TA_OP_ADD ? want[bins - 1] + 1 : want[bins - 1] - 5) & wmask;
		ta_request r;
		ta_request_init(&r);
		r.family = TA_FAMILY_INDEXED;
		r.op = op;
		r.addr = TA_ADDR_FLAT;
		r.n_index = 1;
		int64_t sh1[1] = {1};
		r.index[0] = ta_tu_view(TA_DTYPE_I32, 1, sh1, keys);
		r.values =
		    op == TA_OP_ADD ? ta_tu_view(dt, 0, sh1, &one) : ta_tu_view(dt, 1, sh1, vals);
		ta_plan p;
		ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err), TA_OK);
		ta_merge_target tg[2] = {{ma, 0, split, false}, {mb, split, bins - split, true}};
		ta_merge_out mo = {true, 2, tg};
		p.merge_out = &mo;
		ck_assert(!ta_plan_async_ok(&p));
		ta_result res = {0, 0};
		ck_assert_msg(ta_backend_apply(g_cuda, scratch, bytes, &p, &res, &err) == TA_OK,
		              "%s", err.msg);
		ck_assert_uint_eq(res.applied, 1);
		ck_assert_int_eq(ta_tu_tile_read(g_cuda, mb, (size_t)(bins - split) * es, &tb,
		                                 (char *)buf + (size_t)split * es, &err),
		                 TA_OK);
		ck_assert(ta_tu_get(dt, buf, (size_t)(bins - 1)) == want[bins - 1]);
		ck_assert(ta_tu_get(dt, buf, (size_t)split) == want[split]);
		free(want);
		free(buf);
		free(vals);
		free(keys);
		ta_backend_tile_free(g_cuda, scratch);
		ta_backend_tile_free(g_cuda, ma);
		ta_backend_tile_free(g_cuda, mb);
	}
}
END_TEST

START_TEST(test_sticky)
{
	/* a tile pointer the device does not map: the kernel faults (illegal address), apply
	 * reports INTERNAL with the CUDA error, and every later call reports the lost
	 * context */
	ta_tile_shape t = {TA_DTYPE_I32, 1, {1 << 20}};
	size_t bytes = (size_t)ta_tile_bytes(&t);
	int32_t one = 1;
	ta_request req;
	ta_request_region(&req, TA_FAMILY_ELEMENTWISE, TA_OP_ADD);
	req.values = ta_tu_view(TA_DTYPE_I32, 0, NULL, &one);
	ta_plan plan;
	ta_result res;
	ta_error err = {0};
	ck_assert_int_eq(ta_plan_build(&plan, &t, &req, &err), TA_OK);
	void *bogus = (void *)(uintptr_t)0x100000;
	ck_assert_int_eq(ta_backend_apply(g_cuda, bogus, bytes, &plan, &res, &err), TA_INTERNAL);
	printf("sticky error: %s\n", err.msg);
	ck_assert(strstr(err.msg, "cudaError") != NULL);
	void *mem = NULL;
	ta_error err2 = {0};
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, 64, &mem, &err2), TA_INTERNAL);
	ck_assert(strstr(err2.msg, "unusable") != NULL);
	ck_assert_int_eq(ta_backend_apply(g_cuda, bogus, bytes, &plan, &res, &err2), TA_INTERNAL);
	ck_assert(strstr(err2.msg, "unusable") != NULL);
}
END_TEST

/* ---- main ------------------------------------------------------------------------------*/

/* Probes the GPU in a child process (the parent must not initialise CUDA before Check
 * forks). Returns true when the CUDA backend can be created; else false with the reason
 * in why. */
/* ---- bulk: TMA bulk reductions (sm_90) --------------------------------------------------*/

START_TEST(test_bulk_exact)
{
	/* element-wise integer ops that may take the bulk path (relaxed, no output, no mask):
	 * every TA_BULK op on 4- and 8-byte integers, over regions that start 16-byte aligned
	 * in the tile (origin 0 and 16 bytes in) and not (origin 1 element: the REGION loop),
	 * of lengths whose byte size is a multiple of 16, and 1 or 3 elements over (the tail
	 * through the ordinary instruction), from 64 KiB (the smallest bulk region) to several
	 * chunks a block; contiguous and scalar values, scopes gpu and cta; float32 and float16
	 * adds beside them (never bulk) and sub (never bulk). Bit-exact against the CPU
	 * backend. */
	static const ta_dtype dts[] = {TA_DTYPE_I32, TA_DTYPE_U32, TA_DTYPE_I64,
	                               TA_DTYPE_U64, TA_DTYPE_F32, TA_DTYPE_F16};
	static const ta_op ops[] = {TA_OP_ADD, TA_OP_MIN, TA_OP_MAX, TA_OP_AND,
	                            TA_OP_OR,  TA_OP_XOR, TA_OP_SUB};
	static const int64_t bytes_of[] = {64 * 1024, 64 * 1024 + 16, 3 * 8192 * 132 + 48,
	                                   (1 << 22) + 4096};
	uint64_t rng = 7;
	long bad = 0;
	int runs = 0;
	for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
		ta_dtype dt = dts[d];
		int64_t es = (int64_t)ta_dtype_size(dt);
		for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
			if (!ta_op_accepts_dtype(ops[o], dt))
				continue;
			if (ta_dtype_is_float(dt) && ops[o] != TA_OP_ADD)
				continue;
			for (int shape = 0; shape < 4; shape++) {
				int64_t n = bytes_of[shape] / es + (shape == 1   ? 1
				                                    : shape == 3 ? 3
				                                                 : 0);
				int64_t origin = (int64_t[]){0, 16 / es, 1, 0}[(runs + shape) % 4];
				int64_t len = n + 8;
				ta_tile_shape t = {dt, 1, {len}};
				uint64_t *bits = malloc(sizeof(uint64_t) * (size_t)len);
				ck_assert_ptr_nonnull(bits);
				for (int64_t i = 0; i < len; i++)
					bits[i] = rand_elem(dt, true, &rng);
				void *init = ta_tu_pack(dt, bits, (size_t)len);
				for (int64_t i = 0; i < n; i++)
					bits[i] = rand_elem(dt, true, &rng);
				void *vals = ta_tu_pack(dt, bits, (size_t)n);
				ck_assert(init && vals);
				ta_request req;
				ta_request_region(&req, TA_FAMILY_ELEMENTWISE, ops[o]);
				req.has_region = true;
				req.region_rank = 1;
				req.region_origin[0] = origin;
				req.region_shape[0] = n;
				int64_t shp[1] = {n};
				bool scalar = shape == 2;
				req.values = scalar ? ta_tu_view(dt, 0, NULL, vals)
				                    : ta_tu_view(dt, 1, shp, vals);
				req.scope = shape == 1 ? TA_SCOPE_CTA : TA_SCOPE_GPU;
				char what[128];
				snprintf(what, sizeof what,
				         "bulk %s %s n %lld origin %lld%s scope %s",
				         ta_op_name(ops[o]), ta_dtype_name(dt), (long long)n,
				         (long long)origin, scalar ? " scalar" : "",
				         ta_scope_name(req.scope));
				bad += run_both(&t, init, &req, what);
				runs++;
				free(bits);
				free(init);
				free(vals);
			}
		}
	}
	printf("bulk exact: %d runs, %ld mismatches\n", runs, bad);
	ck_assert_int_eq(bad, 0);
}
END_TEST

/* State of one thread of the concurrent bulk test. */
typedef struct bulk_conc_arg {
	void *mem;        /* the tile: uint32 [n + 4], shared by every thread */
	size_t bytes;     /* its size */
	int64_t n;        /* elements of each request (region from element 0) */
	const void *vals; /* the values: uint32 [n] */
	int rounds;       /* requests per thread */
	int kind;         /* 0: relaxed gpu (bulk where the GPU has it); 1: release (red);
	                   * 2: relaxed sys (red); 3: relaxed cta, scalar value 1 */
	int failures;     /* failed applies or wrong counts */
} bulk_conc_arg;

/* Thread body: adds the values (kind 3: 1) to elements [0, n) of the shared tile rounds
 * times. */
static void *bulk_conc_thread(void *p)
{
	bulk_conc_arg *c = p;
	ta_tile_shape t = {TA_DTYPE_U32, 1, {(int64_t)(c->bytes / 4)}};
	uint32_t one = 1;
	for (int r = 0; r < c->rounds; r++) {
		ta_request req;
		ta_request_region(&req, TA_FAMILY_ELEMENTWISE, TA_OP_ADD);
		req.has_region = true;
		req.region_rank = 1;
		req.region_origin[0] = 0;
		req.region_shape[0] = c->n;
		int64_t shp[1] = {c->n};
		req.values = c->kind == 3 ? ta_tu_view(TA_DTYPE_U32, 0, NULL, &one)
		                          : ta_tu_view(TA_DTYPE_U32, 1, shp, c->vals);
		req.sem = c->kind == 1 ? TA_SEM_RELEASE : TA_SEM_RELAXED;
		req.scope = c->kind == 2   ? TA_SCOPE_SYS
		            : c->kind == 3 ? TA_SCOPE_CTA
		                           : TA_SCOPE_GPU;
		ta_plan plan;
		ta_result res;
		ta_error err;
		if (ta_plan_build(&plan, &t, &req, &err) != TA_OK ||
		    ta_backend_apply(g_cuda, c->mem, c->bytes, &plan, &res, &err) != TA_OK ||
		    res.applied != (uint64_t)c->n || res.skipped != 0)
			c->failures++;
	}
	return NULL;
}

START_TEST(test_bulk_concurrent)
{
	/* the same elements updated by concurrent requests: 4 threads of bulk-eligible adds
	 * (two of contiguous values, one of a scalar 1 at scope cta, sharing the staging
	 * slots' streams) beside one of release adds and one of sys-scope adds (red, never
	 * bulk) on one uint32 tile; every update lands: the tile is the initial value plus
	 * the sum of all of them, exactly (uint32 wraps). n is 2^20 + 3: the last 3 elements
	 * are the bulk kernel's tail. */
	enum { THREADS = 6, ROUNDS = 12 };
	static const int kinds[THREADS] = {0, 0, 3, 3, 1, 2};
	const int64_t n = (1 << 20) + 3, len = n + 4;
	ta_tile_shape t = {TA_DTYPE_U32, 1, {len}};
	size_t bytes = (size_t)ta_tile_bytes(&t);
	uint32_t *init = malloc(bytes), *vals = malloc(sizeof(uint32_t) * (size_t)n);
	uint32_t *back = malloc(bytes);
	ck_assert(init && vals && back);
	uint64_t rng = 99;
	for (int64_t i = 0; i < len; i++)
		init[i] = (uint32_t)ta_tu_rand(&rng);
	for (int64_t i = 0; i < n; i++)
		vals[i] = (uint32_t)ta_tu_rand(&rng);
	ta_error err;
	void *mem;
	ck_assert_int_eq(ta_backend_tile_alloc(g_cuda, bytes, &mem, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_write(g_cuda, mem, bytes, &t, init, &err), TA_OK);
	pthread_t th[THREADS];
	bulk_conc_arg args[THREADS];
	for (int i = 0; i < THREADS; i++) {
		args[i] = (bulk_conc_arg){mem, bytes, n, vals, ROUNDS, kinds[i], 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, bulk_conc_thread, &args[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].failures, 0);
	}
	ck_assert_int_eq(ta_tu_tile_read(g_cuda, mem, bytes, &t, back, &err), TA_OK);
	long bad = 0;
	for (int64_t i = 0; i < len; i++) {
		uint32_t want = init[i];
		if (i < n)
			for (int k = 0; k < THREADS; k++)
				want += (uint32_t)ROUNDS * (kinds[k] == 3 ? 1u : vals[i]);
		if (back[i] != want && bad++ < 3)
			printf("bulk concurrent: element %lld is %u, expected %u\n", (long long)i,
			       back[i], want);
	}
	printf("bulk concurrent: %d threads x %d requests of %lld elements, %ld mismatches\n",
	       THREADS, ROUNDS, (long long)n, bad);
	ck_assert_int_eq(bad, 0);
	ta_backend_tile_free(g_cuda, mem);
	free(init);
	free(vals);
	free(back);
}
END_TEST

#ifdef TA_HAVE_CUDA
/* Launches an element-wise op of dt over n elements at element origin of a tile of n + 8
 * (device memory) with values (contiguous unless scalar) and the given sem, scope, output
 * and mask; checks the applied count and returns the path taken. */
static const char *bulk_path_of(ta_op op, ta_dtype dt, int64_t n, int64_t origin, bool scalar,
                                ta_sem sem, ta_scope scope, bool want_old, bool mask)
{
	size_t es = ta_dtype_size(dt);
	const int64_t len = n + 8;
	ta_tile_shape t = {dt, 1, {len}};
	void *dtile, *dvals, *dold, *dmask, *dcnt;
	ck_assert_int_eq(cudaMalloc(&dtile, (size_t)len * es), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&dvals, (size_t)n * es), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&dold, (size_t)n * es), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&dmask, (size_t)n), cudaSuccess);
	ck_assert_int_eq(cudaMalloc(&dcnt, 3 * sizeof(unsigned long long)), cudaSuccess);
	ck_assert_int_eq(cudaMemset(dtile, 0, (size_t)len * es), cudaSuccess);
	ck_assert_int_eq(cudaMemset(dvals, 1, (size_t)n * es), cudaSuccess);
	ck_assert_int_eq(cudaMemset(dmask, 1, (size_t)n), cudaSuccess);
	ck_assert_int_eq(cudaMemset(dcnt, 0, 3 * sizeof(unsigned long long)), cudaSuccess);
	ta_request req;
	ta_request_region(&req, TA_FAMILY_ELEMENTWISE, op);
	req.has_region = true;
	req.region_rank = 1;
	req.region_origin[0] = origin;
	req.region_shape[0] = n;
	int64_t shp[1] = {n};
	/* device pointers in the views: the plan builder takes shapes, not data */
	req.values = scalar ? ta_tu_view(dt, 0, NULL, dvals) : ta_tu_view(dt, 1, shp, dvals);
	if (mask)
		req.mask = ta_tu_view(TA_DTYPE_BOOL, 1, shp, dmask);
	req.sem = sem;
	req.scope = scope;
	req.want_old = want_old;
	ta_plan plan;
	ta_error err;
	ck_assert_int_eq(ta_plan_build(&plan, &t, &req, &err), TA_OK);
	plan.old_out = want_old ? dold : NULL;
	ta_cuda_path path;
	ck_assert_int_eq(
	    ta_cuda_launch_plan(&plan, dtile, (size_t)len * es, dcnt, NULL, &path, &err), TA_OK);
	unsigned long long cnt[3];
	ck_assert_int_eq(cudaMemcpy(cnt, dcnt, sizeof cnt, cudaMemcpyDeviceToHost), cudaSuccess);
	ck_assert_uint_eq(cnt[1], (uint64_t)n);
	ck_assert_uint_eq(cnt[0], 0);
	cudaFree(dtile);
	cudaFree(dvals);
	cudaFree(dold);
	cudaFree(dmask);
	cudaFree(dcnt);
	return ta_cuda_path_name(path);
}

START_TEST(test_bulk_paths)
{
	/* which element-wise requests take the bulk path (the lowering's conditions, an
	 * aligned region of at least 64 KiB, no mask), and that the others do not */
	ck_assert_int_eq(cudaSetDevice(g_device), cudaSuccess);
	const bool bk = ta_cuda_bulk_reductions() != 0;
	printf("bulk reductions %s on this device\n", bk ? "usable" : "not usable");
	const char *yes = bk ? "bulk" : "global-fast";
	const int64_t n = (1 << 20) + 3;
	const ta_sem R = TA_SEM_RELAXED;
	const ta_scope G = TA_SCOPE_GPU;
	ck_assert_str_eq(bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, n, 0, false, R, G, false, false),
	                 yes);
	ck_assert_str_eq(bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, n, 4, true, R, G, false, false),
	                 yes);
	ck_assert_str_eq(
	    bulk_path_of(TA_OP_MAX, TA_DTYPE_I64, n, 2, false, R, TA_SCOPE_CTA, false, false), yes);
	ck_assert_str_eq(
	    bulk_path_of(TA_OP_XOR, TA_DTYPE_U64, n, 0, false, R, TA_SCOPE_CLUSTER, false, false),
	    yes);
	ck_assert_str_eq(bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, 16384, 0, false, R, G, false, false),
	                 yes);
	/* not bulk: unaligned region, too small, sys, release, output, mask, sub, float, exch */
	ck_assert_str_eq(bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, n, 1, false, R, G, false, false),
	                 "global-fast");
	ck_assert_str_eq(bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, 16383, 0, false, R, G, false, false),
	                 "global-fast");
	ck_assert_str_eq(
	    bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, n, 0, false, R, TA_SCOPE_SYS, false, false),
	    "global-fast");
	ck_assert_str_eq(
	    bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, n, 0, false, TA_SEM_RELEASE, G, false, false),
	    "global-fast");
	ck_assert_str_eq(bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, n, 0, false, R, G, true, false),
	                 "global-fast");
	ck_assert_str_eq(bulk_path_of(TA_OP_ADD, TA_DTYPE_I32, n, 0, false, R, G, false, true),
	                 "global-fast");
	ck_assert_str_eq(bulk_path_of(TA_OP_SUB, TA_DTYPE_I32, n, 0, false, R, G, false, false),
	                 "global-fast");
	ck_assert_str_eq(bulk_path_of(TA_OP_ADD, TA_DTYPE_F32, n, 0, false, R, G, false, false),
	                 "global-fast");
	ck_assert_str_eq(bulk_path_of(TA_OP_EXCH, TA_DTYPE_I32, n, 0, false, R, G, false, false),
	                 "global-fast");
	ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
}
END_TEST
#endif

#ifdef TA_HAVE_CUDA
/* The batcher's environment variables: a value that is not what they take makes the
 * backend refuse to start, naming the variable; a good one starts it. */
START_TEST(test_env_refused)
{
	static const struct {
		const char *name, *value;
	} bad[] = {
	    {"TILEATOM_CUDA_DONE_SPIN_US", "x"},
	    {"TILEATOM_CUDA_DONE_SPIN_US", "-1"},
	    {"TILEATOM_CUDA_DONE_SPIN_US", "1000001"},
	    {"TILEATOM_CUDA_DONE_SPIN_US", "5us"},
	    {"TILEATOM_CUDA_PERSISTENT", "x"},
	    {"TILEATOM_CUDA_PERSISTENT", "-2"},
	    {"TILEATOM_CUDA_LANES", "x"},
	    {"TILEATOM_CUDA_LANES", "-1"},
	    {"TILEATOM_CUDA_LANES", "65"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(setenv(bad[i].name, bad[i].value, 1), 0);
		ta_error err = {0};
		ta_backend *be = ta_cuda_backend_new(g_device, &err);
		ck_assert_msg(be == NULL, "%s=%s accepted", bad[i].name, bad[i].value);
		ck_assert_int_eq(err.code, TA_INVALID_ARGUMENT);
		ck_assert_msg(strstr(err.msg, bad[i].name) != NULL, "%s", err.msg);
		ck_assert_int_eq(unsetenv(bad[i].name), 0);
	}
	ck_assert_int_eq(setenv("TILEATOM_CUDA_DONE_SPIN_US", "0", 1), 0);
	ta_error err = {0};
	ta_backend *be = ta_cuda_backend_new(g_device, &err);
	ck_assert_msg(be != NULL, "%s", err.msg);
	ck_assert(ta_backend_async_attach(be)); /* a lane by default */
	ta_backend_destroy(be);
	ck_assert_int_eq(unsetenv("TILEATOM_CUDA_DONE_SPIN_US"), 0);
	ck_assert_int_eq(setenv("TILEATOM_CUDA_LANES", "0", 1), 0); /* none: the lead */
	be = ta_cuda_backend_new(g_device, &err);
	ck_assert_msg(be != NULL, "%s", err.msg);
	ck_assert(!ta_backend_async_attach(be));
	ta_backend_destroy(be);
	ck_assert_int_eq(unsetenv("TILEATOM_CUDA_LANES"), 0);
}
END_TEST
#endif

static bool probe_gpu(char *why, size_t n)
{
	int fds[2];
	if (pipe(fds) != 0) {
		snprintf(why, n, "pipe failed");
		return false;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, n, "fork failed");
		return false;
	}
	if (pid == 0) {
		close(fds[0]);
		ta_error err = {0};
		ta_backend *be = ta_cuda_backend_new(g_device, &err);
		char msg[300];
		if (be) {
			ta_backend_info info;
			ta_backend_info_get(be, &info);
			snprintf(msg, sizeof msg, "%s (compute capability %s)", info.device,
			         info.compute_capability);
			ta_backend_destroy(be);
		} else {
			snprintf(msg, sizeof msg, "%s: %s", ta_status_name(err.code), err.msg);
		}
		ssize_t w = write(fds[1], msg, strlen(msg));
		(void)w;
		close(fds[1]);
		_exit(be ? 0 : 1);
	}
	close(fds[1]);
	ssize_t r = read(fds[0], why, n - 1);
	why[r > 0 ? r : 0] = '\0';
	close(fds[0]);
	int status = 0;
	if (waitpid(pid, &status, 0) < 0)
		return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void)
{
	/* forked tests that fail exit without flushing: keep nothing buffered */
	setvbuf(stdout, NULL, _IONBF, 0);
	g_device = (int)env_long("TA_CUDA_DEVICE", 0);
	g_harness = env_long("TA_CHECK_CUDA_HARNESS", 0) != 0;
	char why[320] = "harness self-test: a CPU backend stands in for CUDA";
	if (!g_harness && !probe_gpu(why, sizeof why)) {
		printf("SKIP: check_cuda: no usable GPU for the CUDA backend (device %d): %s\n",
		       g_device, why[0] ? why : "probe failed");
		return 77;
	}
	printf("check_cuda: device %d: %s\n", g_device, why);
	fflush(stdout);

	Suite *s = suite_create("cuda");
	TCase *tc = tcase_create("vectors");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 900);
	if (!g_harness)
		tcase_add_test(tc, test_info);
	tcase_add_test(tc, test_vectors);
	tcase_add_loop_test(tc, test_sweep, 0, 2);
	tcase_add_test(tc, test_shared_large);
	suite_add_tcase(s, tc);

	tc = tcase_create("diff");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_diff);
	suite_add_tcase(s, tc);

	tc = tcase_create("large");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_large_elementwise);
	suite_add_tcase(s, tc);

	tc = tcase_create("histogram");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_large_histogram);
	suite_add_tcase(s, tc);

	tc = tcase_create("cluster");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_cluster);
	suite_add_tcase(s, tc);

	tc = tcase_create("bulk");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_bulk_exact);
	tcase_add_test(tc, test_bulk_concurrent);
#ifdef TA_HAVE_CUDA
	if (!g_harness)
		tcase_add_test(tc, test_bulk_paths);
#endif
	suite_add_tcase(s, tc);

	tc = tcase_create("runtime");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	if (!g_harness)
		tcase_add_test(tc, test_alloc);
	tcase_add_test(tc, test_concurrent);
	tcase_add_test(tc, test_batch);
	tcase_add_test(tc, test_batch_chain_order);
	tcase_add_test(tc, test_lanes);
	tcase_add_test(tc, test_contention);
	tcase_add_test(tc, test_merge_out);
#ifdef TA_HAVE_CUDA
	if (!g_harness) {
		tcase_add_test(tc, test_paths);
		tcase_add_test(tc, test_env_refused);
	}
#endif
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);
	/* the sticky-error test loses the CUDA context: only in a forked test process */
	if (srunner_fork_status(sr) != CK_NOFORK && !g_harness) {
		tc = tcase_create("sticky");
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, test_sticky);
		suite_add_tcase(s, tc);
	}
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
