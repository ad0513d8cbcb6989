/* check_fastpath.c: holds the CPU backend's fast paths (flat 1-D and contiguous plans,
 * kernels/ta_cpu.c) to its generic element loop and to the sequential reference
 * (ta_tu_ref_apply), bit for bit. Every legal op x dtype x sem runs on a FLAT request
 * (int32 and int64 indices, duplicates, indices outside the region, a mask, old values) and
 * on contiguous REGION requests (a 1-D sub-range, full rows of a 2-D tile); each result is
 * compared with the same elements addressed as an INDEXED request (which the fast paths
 * do not take, so the generic loop runs it) and with the reference: tile contents, old
 * values, applied and skipped counts. space=shared runs the dense private copies. A large
 * plan (split over the workers) checks counts and sums exactly. One-element plans, which
 * the backend applies without its loops, are held to the loops. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ta_backend.h"
#include "ta_test_util.h"

/* The backend under test (created per test by the fixture). */
static ta_backend *be;

/* Fixture: a CPU backend with 2 workers. */
static void setup(void)
{
	ta_error err = {TA_OK, ""};
	be = ta_cpu_backend_new(2, &err);
	ck_assert_msg(be != NULL, "ta_cpu_backend_new: %s", err.msg);
}

/* Fixture: destroys the backend. */
static void teardown(void)
{
	ta_backend_destroy(be);
	be = NULL;
}

/* The request forms of a case. */
typedef enum fp_form {
	FP_FLAT32,    /* FLAT, int32 indices, 1-D tile, sub-region [8, 56) */
	FP_FLAT64,    /* FLAT, int64 indices, whole 1-D tile */
	FP_REGION1,   /* REGION [5, 45) of a 1-D tile */
	FP_REGION2,   /* REGION rows 1..4 (all 8 columns) of a 6 x 8 tile */
	FP_FORM_COUNT /* number of forms */
} fp_form;

/* Elements of the 1-D tile; the 2-D tile is FP_ROWS x FP_COLS. */
#define FP_N    64
#define FP_ROWS 6
#define FP_COLS 8
/* Indices of a FLAT request. */
#define FP_FLAT_COUNT 300
/* Distinct bit patterns values, compare and tile elements are drawn from (so that cas
 * matches and min/max tie often). */
#define FP_POOL 5

/* One case, fully decided. */
typedef struct fp_case {
	ta_op op;       /* the op */
	ta_dtype dt;    /* the tile dtype */
	ta_sem sem;     /* the sem */
	fp_form form;   /* the request form */
	bool masked;    /* a mask with zeros */
	bool want_old;  /* old values (when the op has them) */
	bool scalar;    /* values (and compare) are one broadcast scalar */
	ta_space space; /* global or shared */
} fp_case;

/* Everything a run needs: the addressing of the fast request and its INDEXED twin. */
typedef struct fp_req {
	ta_tile_shape tile;     /* the tile */
	int64_t count;          /* elements of the request */
	int64_t origin[2];      /* region origin */
	int64_t extent[2];      /* region extents */
	int64_t *coord[2];      /* per element: region coordinates (or out of range) */
	void *flat_idx;         /* FLAT: the indices (int32 or int64) */
	uint8_t *mask;          /* mask (NULL when unmasked) */
	void *values;           /* values (count or 1 elements) */
	void *compare;          /* compare (CAS) */
	uint64_t padding;       /* LOAD padding */
	uint64_t init[FP_N];    /* initial tile contents */
	uint64_t pool[FP_POOL]; /* the bit patterns */
} fp_req;

/* Runs one request (fast when indexed_twin is false, else the INDEXED twin) on a tile
 * initialised from r->init; tile contents go to out_tile, old values to out_old (when
 * wanted), counts to *res. */
static void fp_run(const fp_case *c, const fp_req *r, bool indexed_twin, void *out_tile,
                   void *out_old, ta_result *res)
{
	ta_error err = {TA_OK, ""};
	size_t es = ta_dtype_size(c->dt);
	int64_t tile_n = ta_tu_count(r->tile.rank, r->tile.shape);
	size_t bytes = (size_t)tile_n * es;
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, bytes, &mem, &err), TA_OK);
	void *packed = ta_tu_pack(c->dt, r->init, (size_t)tile_n);
	ck_assert_ptr_nonnull(packed);
	ck_assert_int_eq(ta_tu_tile_write(be, mem, bytes, &r->tile, packed, &err), TA_OK);
	free(packed);

	ta_request req;
	ta_request_init(&req);
	ta_op_kind kind = ta_op_kind_of(c->op);
	req.op = c->op;
	req.sem = c->sem;
	req.space = c->space;
	req.want_old = c->want_old;
	req.has_region = true;
	req.region_rank = r->tile.rank;
	for (int a = 0; a < r->tile.rank; a++) {
		req.region_origin[a] = r->origin[a];
		req.region_shape[a] = r->extent[a];
	}
	int64_t n = r->count;
	int64_t *twin_idx[2] = {NULL, NULL};
	if (indexed_twin) {
		req.family = kind == TA_KIND_RMW ? TA_FAMILY_INDEXED : TA_FAMILY_MEMORY;
		req.addr = TA_ADDR_INDEXED;
		req.n_index = r->tile.rank;
		for (int a = 0; a < r->tile.rank; a++) {
			twin_idx[a] = r->coord[a];
			req.index[a] = ta_tu_view(TA_DTYPE_I64, 1, &n, twin_idx[a]);
		}
	} else if (c->form == FP_FLAT32 || c->form == FP_FLAT64) {
		req.family = kind == TA_KIND_RMW ? TA_FAMILY_INDEXED : TA_FAMILY_MEMORY;
		req.addr = TA_ADDR_FLAT;
		req.n_index = 1;
		req.index[0] = ta_tu_view(c->form == FP_FLAT32 ? TA_DTYPE_I32 : TA_DTYPE_I64, 1, &n,
		                          r->flat_idx);
	} else {
		req.family = kind == TA_KIND_RMW ? TA_FAMILY_ELEMENTWISE : TA_FAMILY_MEMORY;
		req.addr = TA_ADDR_REGION;
	}
	/* operands: 1-D over the elements for FLAT and the twin; region-shaped for REGION */
	int rank = 1;
	int64_t shape[2] = {n, 0};
	if (!indexed_twin && (c->form == FP_REGION1 || c->form == FP_REGION2)) {
		rank = r->tile.rank;
		shape[0] = r->extent[0];
		shape[1] = r->extent[1];
	}
	if (r->mask)
		req.mask = ta_tu_view(TA_DTYPE_BOOL, rank, shape, r->mask);
	if (r->values)
		req.values = ta_tu_view(c->dt, c->scalar ? 0 : rank, shape, r->values);
	if (r->compare)
		req.compare = ta_tu_view(c->dt, c->scalar ? 0 : rank, shape, r->compare);
	uint64_t pad_storage = r->padding;
	if (c->op == TA_OP_LOAD)
		req.padding = ta_tu_view(c->dt, 0, shape, &pad_storage);

	ta_plan plan;
	ck_assert_msg(ta_plan_build(&plan, &r->tile, &req, &err) == TA_OK, "plan: %s", err.msg);
	if (plan.want_old)
		plan.old_out = out_old;
	ck_assert_msg(ta_backend_apply(be, mem, bytes, &plan, res, &err) == TA_OK, "apply: %s",
	              err.msg);
	ck_assert_int_eq(ta_tu_tile_read(be, mem, bytes, &r->tile, out_tile, &err), TA_OK);
	ta_backend_tile_free(be, mem);
}

/* Builds the request of case c from seed. */
static void fp_build(const fp_case *c, fp_req *r, uint64_t seed)
{
	memset(r, 0, sizeof(*r));
	uint64_t st = seed;
	for (int i = 0; i < FP_POOL; i++)
		r->pool[i] =
		    ta_tu_rand(&st) & (c->dt == TA_DTYPE_F16 || c->dt == TA_DTYPE_BF16 ? 0xffff
		                       : ta_dtype_size(c->dt) == 4                     ? 0xffffffffu
		                                                   : UINT64_MAX);
	/* small integers among the patterns, so that adds and masks do ordinary things too */
	r->pool[0] = 0;
	r->pool[1] = c->dt == TA_DTYPE_F32    ? 0x3f800000u
	             : c->dt == TA_DTYPE_F64  ? UINT64_C(0x3ff0000000000000)
	             : c->dt == TA_DTYPE_F16  ? 0x3c00
	             : c->dt == TA_DTYPE_BF16 ? 0x3f80
	                                      : 1;
	if (c->form == FP_REGION2) {
		r->tile.rank = 2;
		r->tile.shape[0] = FP_ROWS;
		r->tile.shape[1] = FP_COLS;
		r->origin[0] = 1;
		r->extent[0] = 4;
		r->origin[1] = 0;
		r->extent[1] = FP_COLS;
	} else {
		r->tile.rank = 1;
		r->tile.shape[0] = FP_N;
		r->origin[0] = c->form == FP_FLAT32 ? 8 : c->form == FP_REGION1 ? 5 : 0;
		r->extent[0] = c->form == FP_FLAT32 ? 48 : c->form == FP_REGION1 ? 40 : FP_N;
	}
	r->tile.dtype = c->dt;
	int64_t tile_n = ta_tu_count(r->tile.rank, r->tile.shape);
	for (int64_t i = 0; i < tile_n; i++)
		r->init[i] = r->pool[ta_tu_rand_below(&st, FP_POOL)];
	int64_t region_n = r->extent[0] * (r->tile.rank == 2 ? r->extent[1] : 1);
	bool flat = c->form == FP_FLAT32 || c->form == FP_FLAT64;
	int64_t n = flat ? FP_FLAT_COUNT : region_n;
	r->count = n;
	for (int a = 0; a < r->tile.rank; a++) {
		r->coord[a] = calloc((size_t)n, sizeof(int64_t));
		ck_assert_ptr_nonnull(r->coord[a]);
	}
	if (flat) {
		r->flat_idx = calloc((size_t)n, 8);
		ck_assert_ptr_nonnull(r->flat_idx);
		for (int64_t k = 0; k < n; k++) {
			int64_t f = (int64_t)ta_tu_rand_below(&st, (uint64_t)region_n);
			uint64_t roll = ta_tu_rand_below(&st, 16);
			if (roll == 0)
				f = -1 - (int64_t)ta_tu_rand_below(&st, 3); /* negative: skipped */
			else if (roll == 1)
				f = region_n + (int64_t)ta_tu_rand_below(&st, 3); /* past the end */
			else if (roll == 2 && c->form == FP_FLAT64)
				f = INT64_C(1) << 40; /* far past the end */
			if (c->form == FP_FLAT32)
				((int32_t *)r->flat_idx)[k] = (int32_t)f;
			else
				((int64_t *)r->flat_idx)[k] = f;
			r->coord[0][k] = f; /* 1-D: the flat offset is the coordinate */
		}
	} else {
		for (int64_t k = 0; k < n; k++) {
			if (r->tile.rank == 2) {
				r->coord[0][k] = k / r->extent[1];
				r->coord[1][k] = k % r->extent[1];
			} else {
				r->coord[0][k] = k;
			}
		}
	}
	if (c->masked) {
		r->mask = malloc((size_t)n);
		ck_assert_ptr_nonnull(r->mask);
		for (int64_t k = 0; k < n; k++)
			r->mask[k] = ta_tu_rand_below(&st, 4) != 0;
	}
	int64_t nv = c->scalar ? 1 : n;
	uint64_t *vb = calloc((size_t)nv, sizeof(uint64_t));
	uint64_t *cb = calloc((size_t)nv, sizeof(uint64_t));
	ck_assert(vb && cb);
	for (int64_t k = 0; k < nv; k++) {
		vb[k] = r->pool[ta_tu_rand_below(&st, FP_POOL)];
		cb[k] = r->pool[ta_tu_rand_below(&st, FP_POOL)];
	}
	if (ta_op_operands(c->op) != TA_OPERANDS_PADDING)
		r->values = ta_tu_pack(c->dt, vb, (size_t)nv);
	if (c->op == TA_OP_CAS)
		r->compare = ta_tu_pack(c->dt, cb, (size_t)nv);
	r->padding = r->pool[2];
	free(vb);
	free(cb);
}

/* Frees what fp_build allocated. */
static void fp_free(fp_req *r)
{
	free(r->coord[0]);
	free(r->coord[1]);
	free(r->flat_idx);
	free(r->mask);
	free(r->values);
	free(r->compare);
}

/* The sequential reference of case c: the tile after it (tile_bits), old values and
 * counts. */
static void fp_reference(const fp_case *c, const fp_req *r, uint64_t *tile_bits, uint64_t *old,
                         ta_result *res)
{
	int64_t tile_n = ta_tu_count(r->tile.rank, r->tile.shape);
	memcpy(tile_bits, r->init, (size_t)tile_n * sizeof(uint64_t));
	res->applied = res->skipped = 0;
	for (int64_t k = 0; k < r->count; k++) {
		int64_t kv = c->scalar ? 0 : k;
		uint64_t v = r->values ? ta_tu_get(c->dt, r->values, (size_t)kv) : 0;
		uint64_t cmp = r->compare ? ta_tu_get(c->dt, r->compare, (size_t)kv) : 0;
		uint64_t idle = c->op == TA_OP_CAS ? cmp : c->op == TA_OP_LOAD ? r->padding : 0;
		if (r->mask && !r->mask[k]) {
			old[k] = idle;
			continue;
		}
		int64_t off = 0;
		bool inside = true;
		for (int a = 0; a < r->tile.rank; a++) {
			int64_t x = r->coord[a][k];
			inside = inside && x >= 0 && x < r->extent[a];
			off = off * r->tile.shape[a] + r->origin[a] + x;
		}
		if (!inside) {
			res->skipped++;
			old[k] = idle;
			continue;
		}
		res->applied++;
		tile_bits[off] = ta_tu_ref_apply(c->op, c->dt, tile_bits[off], v, cmp, &old[k]);
	}
}

/* Runs case c: fast request, INDEXED twin and (where the order cannot matter or the run is
 * sequential) the reference; fails with the case named on the first difference. */
static void fp_check(const fp_case *c, uint64_t seed)
{
	fp_req r;
	fp_build(c, &r, seed);
	size_t es = ta_dtype_size(c->dt);
	int64_t tile_n = ta_tu_count(r.tile.rank, r.tile.shape);
	void *tile_fast = calloc((size_t)tile_n, es), *tile_twin = calloc((size_t)tile_n, es);
	void *old_fast = calloc((size_t)r.count, es), *old_twin = calloc((size_t)r.count, es);
	uint64_t *ref_tile = calloc((size_t)tile_n, sizeof(uint64_t));
	uint64_t *ref_old = calloc((size_t)r.count, sizeof(uint64_t));
	ck_assert(tile_fast && tile_twin && old_fast && old_twin && ref_tile && ref_old);
	ta_result rf, rt, rr;
	fp_run(c, &r, false, tile_fast, old_fast, &rf);
	fp_run(c, &r, true, tile_twin, old_twin, &rt);
	fp_reference(c, &r, ref_tile, ref_old, &rr);
	static const char *const forms[] = {"flat int32", "flat int64", "1-D region", "2-D rows"};
	char what[160];
	snprintf(what, sizeof(what), "%s %s sem %d, %s%s%s%s%s", ta_op_name(c->op),
	         ta_dtype_name(c->dt), (int)c->sem, forms[c->form], c->masked ? ", masked" : "",
	         c->want_old ? ", old values" : "", c->scalar ? ", scalar operand" : "",
	         c->space == TA_SPACE_SHARED ? ", shared" : "");
	ck_assert_msg(rf.applied == rt.applied && rf.skipped == rt.skipped,
	              "%s: fast applied %llu skipped %llu, generic %llu %llu", what,
	              (unsigned long long)rf.applied, (unsigned long long)rf.skipped,
	              (unsigned long long)rt.applied, (unsigned long long)rt.skipped);
	ck_assert_msg(rf.applied == rr.applied && rf.skipped == rr.skipped,
	              "%s: fast applied %llu skipped %llu, reference %llu %llu", what,
	              (unsigned long long)rf.applied, (unsigned long long)rf.skipped,
	              (unsigned long long)rr.applied, (unsigned long long)rr.skipped);
	/* space shared accumulates privately, then merges: the reference's order only gives
	 * the same bits for order-independent op x dtype */
	bool ref_exact = c->space == TA_SPACE_GLOBAL || ta_op_order_independent(c->op, c->dt);
	for (int64_t i = 0; i < tile_n; i++) {
		uint64_t f = ta_tu_get(c->dt, tile_fast, (size_t)i);
		uint64_t t = ta_tu_get(c->dt, tile_twin, (size_t)i);
		char b1[64], b2[64];
		ck_assert_msg(f == t, "%s: tile element %lld: fast %s, generic %s", what,
		              (long long)i, ta_tu_fmt(c->dt, f, b1, sizeof(b1)),
		              ta_tu_fmt(c->dt, t, b2, sizeof(b2)));
		if (ref_exact)
			ck_assert_msg(f == ref_tile[i],
			              "%s: tile element %lld: fast %s, reference %s", what,
			              (long long)i, ta_tu_fmt(c->dt, f, b1, sizeof(b1)),
			              ta_tu_fmt(c->dt, ref_tile[i], b2, sizeof(b2)));
	}
	if (c->want_old) {
		for (int64_t k = 0; k < r.count; k++) {
			uint64_t f = ta_tu_get(c->dt, old_fast, (size_t)k);
			uint64_t t = ta_tu_get(c->dt, old_twin, (size_t)k);
			ck_assert_msg(
			    f == t && f == ref_old[k],
			    "%s: old value %lld: fast %#llx, generic %#llx, reference %#llx", what,
			    (long long)k, (unsigned long long)f, (unsigned long long)t,
			    (unsigned long long)ref_old[k]);
		}
	}
	free(tile_fast);
	free(tile_twin);
	free(old_fast);
	free(old_twin);
	free(ref_tile);
	free(ref_old);
	fp_free(&r);
}

/* Every legal dtype x sem x form x option of op _i. */
START_TEST(test_fast_matches_generic)
{
	ta_op op = (ta_op)_i;
	int cases = 0;
	for (int d = 1; d < TA_DTYPE_COUNT; d++) {
		ta_dtype dt = (ta_dtype)d;
		if (!ta_dtype_is_tile(dt) || !ta_op_accepts_dtype(op, dt))
			continue;
		for (int s = 0; s < TA_SEM_COUNT; s++) {
			if (!ta_op_sem_ok(op, (ta_sem)s))
				continue;
			for (int f = 0; f < FP_FORM_COUNT; f++) {
				for (int opt = 0; opt < 8; opt++) {
					fp_case c = {.op = op,
					             .dt = dt,
					             .sem = (ta_sem)s,
					             .form = (fp_form)f,
					             .masked = opt & 1,
					             .want_old = (opt & 2) && ta_op_output(op) !=
					                                          TA_OUTPUT_NEVER,
					             .scalar = (opt & 4) && op != TA_OP_LOAD,
					             .space = TA_SPACE_GLOBAL};
					if (ta_op_output(op) == TA_OUTPUT_ALWAYS)
						c.want_old = true;
					fp_check(&c, UINT64_C(0xfa57) * (uint64_t)(cases + 1) +
					                 (uint64_t)op);
					if (ta_op_shared_ok(op) && !c.want_old) {
						c.space = TA_SPACE_SHARED;
						fp_check(&c, UINT64_C(0x5a4ed) + (uint64_t)cases);
					}
					cases++;
				}
			}
		}
	}
	ck_assert_int_gt(cases, 0);
}
END_TEST

/* A large flat histogram split over the workers (global and shared): exact bins. */
START_TEST(test_fast_large_histogram)
{
	enum { N = 1 << 20, BINS = 256 };
	int32_t *keys = malloc(sizeof(int32_t) * N);
	ck_assert_ptr_nonnull(keys);
	uint64_t st = 77, expect[BINS] = {0}, outside = 0;
	for (int i = 0; i < N; i++) {
		keys[i] = (int32_t)ta_tu_rand_below(&st, BINS + 8) - 4;
		if (keys[i] >= 0 && keys[i] < BINS)
			expect[keys[i]]++;
		else
			outside++;
	}
	for (int space = 0; space < 2; space++) {
		ta_error err = {TA_OK, ""};
		ta_tile_shape tile = {.dtype = TA_DTYPE_I32, .rank = 1, .shape = {BINS}};
		void *mem = NULL;
		ck_assert_int_eq(ta_backend_tile_alloc(be, BINS * 4, &mem, &err), TA_OK);
		ta_request req;
		ta_request_init(&req);
		req.family = TA_FAMILY_INDEXED;
		req.op = TA_OP_ADD;
		req.addr = TA_ADDR_FLAT;
		req.space = space ? TA_SPACE_SHARED : TA_SPACE_GLOBAL;
		req.n_index = 1;
		int64_t n = N;
		req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, &n, keys);
		int32_t one = 1;
		req.values = ta_tu_view(TA_DTYPE_I32, 0, NULL, &one);
		ta_plan plan;
		ck_assert_msg(ta_plan_build(&plan, &tile, &req, &err) == TA_OK, "%s", err.msg);
		ta_result res;
		ck_assert_msg(ta_backend_apply(be, mem, BINS * 4, &plan, &res, &err) == TA_OK, "%s",
		              err.msg);
		ck_assert_uint_eq(res.applied, N - outside);
		ck_assert_uint_eq(res.skipped, outside);
		for (int b = 0; b < BINS; b++)
			ck_assert_int_eq(((int32_t *)mem)[b], (int32_t)expect[b]);
		ta_backend_tile_free(be, mem);
	}
	free(keys);
}
END_TEST

/* Runs a one-element request on a fresh tile of shape tile (contents init): form 0 FLAT
 * int64 and 1 FLAT int32 into region [8, 56) of a 1-D tile, 2 INDEXED into rows 1..4 of a
 * 2-D tile, 3 REGION [at, at + 1) of a 1-D tile (at = idx[0]); mask: -1 none, else the
 * scalar mask. With twin, the same element is element 0 of a two-element request whose
 * element 1 is masked off (so that the loops run it, not the one-element path). Tile
 * contents go to out_tile, the old value to *old, counts to *res; returns the status. */
static ta_status one_run(ta_op op, ta_dtype dt, ta_sem sem, int form, const int64_t *idx, int mask,
                         bool want_old, uint64_t v, uint64_t cmp, const uint64_t *init, bool twin,
                         void *out_tile, uint64_t *old, ta_result *res)
{
	ta_error err = {TA_OK, ""};
	size_t es = ta_dtype_size(dt);
	ta_tile_shape tile = {.dtype = dt, .rank = form == 2 ? 2 : 1, .shape = {FP_N}};
	if (form == 2) {
		tile.shape[0] = FP_ROWS;
		tile.shape[1] = FP_COLS;
	}
	int64_t tile_n = ta_tu_count(tile.rank, tile.shape);
	size_t bytes = (size_t)tile_n * es;
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, bytes, &mem, &err), TA_OK);
	void *packed = ta_tu_pack(dt, init, (size_t)tile_n);
	ck_assert_ptr_nonnull(packed);
	ck_assert_int_eq(ta_tu_tile_write(be, mem, bytes, &tile, packed, &err), TA_OK);
	free(packed);
	ta_request req;
	ta_request_init(&req);
	bool rmw = ta_op_kind_of(op) == TA_KIND_RMW;
	req.op = op;
	req.sem = sem;
	req.want_old = want_old;
	int64_t two = 2;
	int64_t idx2[2][2] = {{idx[0], idx[0]}, {idx[1], idx[1]}};
	int32_t idx32[2] = {(int32_t)idx[0], (int32_t)idx[0]};
	uint8_t masks[2] = {(uint8_t)(mask != 0), 0};
	if (form == 3) {
		req.family = rmw ? TA_FAMILY_ELEMENTWISE : TA_FAMILY_MEMORY;
		req.addr = TA_ADDR_REGION;
		req.has_region = true;
		req.region_rank = 1;
		req.region_origin[0] = idx[0];
		req.region_shape[0] = twin ? 2 : 1;
	} else {
		req.family = rmw ? TA_FAMILY_INDEXED : TA_FAMILY_MEMORY;
		req.addr = form == 2 ? TA_ADDR_INDEXED : TA_ADDR_FLAT;
		req.has_region = true;
		req.region_rank = tile.rank;
		req.region_origin[0] = form == 2 ? 1 : 8;
		req.region_shape[0] = form == 2 ? 4 : 48;
		req.region_origin[1] = 0;
		req.region_shape[1] = FP_COLS;
		req.n_index = form == 2 ? 2 : 1;
		for (int i = 0; i < req.n_index; i++)
			req.index[i] = form == 1 ? ta_tu_view(TA_DTYPE_I32, twin, &two, idx32)
			                         : ta_tu_view(TA_DTYPE_I64, twin, &two, idx2[i]);
	}
	uint64_t vb[2] = {v, v}, cb[2] = {cmp, cmp};
	void *vp = ta_tu_pack(dt, vb, 2), *cp = ta_tu_pack(dt, cb, 2);
	ck_assert(vp && cp);
	if (ta_op_operands(op) != TA_OPERANDS_PADDING)
		req.values = ta_tu_view(dt, 0, NULL, vp);
	if (op == TA_OP_CAS)
		req.compare = ta_tu_view(dt, 0, NULL, cp);
	if (op == TA_OP_LOAD)
		req.padding = ta_tu_view(dt, 0, NULL, cp);
	if (twin)
		req.mask = ta_tu_view(TA_DTYPE_BOOL, 1, &two, masks);
	else if (mask >= 0)
		req.mask = ta_tu_view(TA_DTYPE_BOOL, 0, NULL, masks);
	ta_plan plan;
	ta_status st = ta_plan_build(&plan, &tile, &req, &err);
	uint64_t old_out[2] = {0, 0};
	if (st == TA_OK) {
		ck_assert_int_eq(plan.count, twin ? 2 : 1);
		if (plan.want_old)
			plan.old_out = old_out;
		st = ta_backend_apply(be, mem, bytes, &plan, res, &err);
		ck_assert_msg(st == TA_OK, "apply: %s", err.msg);
		*old = plan.want_old ? ta_tu_get(dt, old_out, 0) : 0;
	}
	ck_assert_int_eq(ta_tu_tile_read(be, mem, bytes, &tile, out_tile, &err), TA_OK);
	ta_backend_tile_free(be, mem);
	free(vp);
	free(cp);
	return st;
}

/* The CPU backend's one-element path (apply_one_element) against its loops: every legal
 * dtype x sem of op _i, each addressing form, indices inside and outside the region, no
 * mask, a mask of 1 and of 0, with and without old values: tile, old value and counts
 * equal to those of the same element run as element 0 of a two-element request. */
START_TEST(test_one_element_matches_loops)
{
	ta_op op = (ta_op)_i;
	uint64_t st = UINT64_C(0x0e1e) + (uint64_t)op;
	int cases = 0;
	for (int d = 1; d < TA_DTYPE_COUNT; d++) {
		ta_dtype dt = (ta_dtype)d;
		if (!ta_dtype_is_tile(dt) || !ta_op_accepts_dtype(op, dt))
			continue;
		size_t es = ta_dtype_size(dt);
		uint64_t emask = es == 8 ? UINT64_MAX : (UINT64_C(1) << (es * 8)) - 1;
		for (int s = 0; s < TA_SEM_COUNT; s++) {
			if (!ta_op_sem_ok(op, (ta_sem)s))
				continue;
			for (int form = 0; form < 4; form++) {
				for (int opt = 0; opt < 12; opt++) {
					uint64_t init[FP_N], pool[FP_POOL] = {0, 1, 0, 0, 0};
					for (int i = 2; i < FP_POOL; i++)
						pool[i] = ta_tu_rand(&st) & emask;
					for (int i = 0; i < FP_N; i++)
						init[i] = pool[ta_tu_rand_below(&st, FP_POOL)];
					int64_t ext0 = form == 2 ? 4 : form == 3 ? FP_N - 1 : 48;
					int64_t idx[2] = {
					    (int64_t)ta_tu_rand_below(&st, (uint64_t)ext0),
					    (int64_t)ta_tu_rand_below(&st, FP_COLS)};
					if (form != 3 && opt % 3 == 2)
						idx[ta_tu_rand_below(&st, 2)] =
						    ta_tu_rand_below(&st, 2) ? -1 : ext0 + FP_COLS;
					int mask = opt / 3 == 0   ? -1
					           : opt / 3 == 1 ? 1
					           : opt / 3 == 2 ? 0
					                          : -1;
					bool want_old =
					    (opt % 2 || ta_op_output(op) == TA_OUTPUT_ALWAYS) &&
					    ta_op_output(op) != TA_OUTPUT_NEVER;
					uint64_t v = pool[ta_tu_rand_below(&st, FP_POOL)];
					uint64_t cmp = pool[ta_tu_rand_below(&st, FP_POOL)];
					uint64_t t1[FP_N], t2[FP_N], o1 = 0, o2 = 0;
					ta_result r1 = {9, 9}, r2 = {9, 9};
					ta_status s1 =
					    one_run(op, dt, (ta_sem)s, form, idx, mask, want_old, v,
					            cmp, init, false, t1, &o1, &r1);
					ta_status s2 =
					    one_run(op, dt, (ta_sem)s, form, idx, mask, want_old, v,
					            cmp, init, true, t2, &o2, &r2);
					ck_assert_int_eq(s1, TA_OK);
					ck_assert_int_eq(s2, TA_OK);
					int64_t n = form == 2 ? FP_ROWS * FP_COLS : FP_N;
					char what[128];
					snprintf(what, sizeof(what), "%s %s sem %d form %d opt %d",
					         ta_op_name(op), ta_dtype_name(dt), s, form, opt);
					ck_assert_msg(memcmp(t1, t2, (size_t)n * es) == 0,
					              "%s: the tiles differ", what);
					ck_assert_msg(o1 == o2, "%s: old value %#llx, loops %#llx",
					              what, (unsigned long long)o1,
					              (unsigned long long)o2);
					ck_assert_msg(
					    r1.applied == r2.applied && r1.skipped == r2.skipped,
					    "%s: applied %llu skipped %llu, loops %llu %llu", what,
					    (unsigned long long)r1.applied,
					    (unsigned long long)r1.skipped,
					    (unsigned long long)r2.applied,
					    (unsigned long long)r2.skipped);
					cases++;
				}
			}
		}
	}
	ck_assert_int_gt(cases, 0);
}
END_TEST

/* The fast-path suite. */
static Suite *fastpath_suite(void)
{
	Suite *s = suite_create("fastpath");
	TCase *tc = tcase_create("fast");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	int first = 0, last = 0;
	for (int o = 0; o < TA_OP_COUNT; o++) {
		if (ta_op_kind_of((ta_op)o) == 0)
			continue;
		if (!first)
			first = o;
		last = o;
	}
	tcase_add_loop_test(tc, test_fast_matches_generic, first, last + 1);
	tcase_add_test(tc, test_fast_large_histogram);
	tcase_add_loop_test(tc, test_one_element_matches_loops, first, last + 1);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fastpath_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
