/* check_multi.c: the multi-device layer (kernels/ta_multi.c) on the CPU backend's memory
 * pools. Differential: every request form (element-wise region, scatter, indexed, flat,
 * loads and stores), every op and tile dtype, with masks, broadcasting, skipped and
 * rejected out-of-range indices, runs on a tile sharded over 1, 2 and 3 pools with uneven
 * splits and on the same tile on one plain CPU backend; status, counts, old values (in
 * request order) and the tile contents afterwards must be identical bit for bit. Plus
 * placement: by device, auto, shard over a given count, errors, where a tile lives, and
 * that a sharded tile's rows really live in separate pools. And the concurrency: batches
 * (apply_many) over tiles on several pools give what one call after another gives, and
 * threads whose requests span every part of a sharded tile (run by the pools' helpers at
 * the same time) lose no update; a thread that attaches runs its asynchronous calls in its
 * own polls on every device (the lanes). Histograms through the partial-tile path with one scratch
 * (one apply with a merge-out on the keys' pool) give exact bins, and the CPU backend's
 * merge-out itself is checked element by element. */
#include "ta_backend.h"
#include "ta_test_util.h"

#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Makes a multi-device backend over n CPU pools with default placement dflt. */
static ta_backend *multi_new(int n, ta_placement dflt)
{
	ta_backend *devs[TA_MAX_DEVICES];
	ta_error err = {0};
	for (int d = 0; d < n; d++) {
		devs[d] = ta_cpu_backend_new(2, &err);
		ck_assert_msg(devs[d] != NULL, "%s", err.msg);
	}
	ta_backend *be = ta_multi_backend_new(devs, n, &dflt, &err);
	ck_assert_msg(be != NULL, "%s", err.msg);
	return be;
}

/* The tile shapes of the differential test: first axes that split unevenly over 2 and 3. */
static const struct {
	int rank;
	int64_t shape[3];
} shapes[] = {{1, {10}}, {2, {7, 5}}, {3, {5, 2, 3}}, {2, {2, 4}}};

/* The tile dtypes. */
static const ta_dtype dtypes[] = {TA_DTYPE_I32, TA_DTYPE_U32, TA_DTYPE_I64, TA_DTYPE_U64,
                                  TA_DTYPE_F32, TA_DTYPE_F64, TA_DTYPE_F16, TA_DTYPE_BF16};

/* A small value of dt (bits): integers and exactly representable floats, so that CAS
 * compares sometimes match and min/max/and/or see ties. */
static uint64_t small_value(ta_dtype dt, uint64_t *rng)
{
	static const double pick[] = {0, 1, 2, 3, -1, -0.0, 0.5, 7};
	double d = pick[ta_tu_rand_below(rng, 8)];
	if (!ta_dtype_is_float(dt) && (d < 0 || d != (double)(int64_t)d))
		d = 5;
	if (!ta_dtype_is_float(dt) && d == 0 && ta_tu_rand_below(rng, 4) == 0)
		return ta_tu_rand(rng) & (ta_dtype_size(dt) == 8 ? UINT64_MAX : 0xffffffffu);
	uint64_t b = 0;
	ck_assert(ta_tu_encode(dt, d, &b));
	return b;
}

/* Operand storage of one generated request. */
typedef struct gen_req {
	ta_request req;                /* the request */
	void *values, *compare, *mask; /* packed operands (malloc'd or NULL) */
	void *index[TA_MAX_RANK];      /* packed index arrays */
	uint64_t padding;              /* LOAD padding bits */
} gen_req;

/* Frees a generated request's operands. */
static void gen_free(gen_req *g)
{
	free(g->values);
	free(g->compare);
	free(g->mask);
	for (int i = 0; i < TA_MAX_RANK; i++)
		free(g->index[i]);
	memset(g, 0, sizeof(*g));
}

/* An index value along an axis of extent ext: mostly in range, sometimes just outside
 * (when out is set), negative too. */
static int64_t gen_index(uint64_t *rng, int64_t ext, bool out)
{
	if (out && ta_tu_rand_below(rng, 6) == 0)
		return ta_tu_rand_below(rng, 2) ? ext + (int64_t)ta_tu_rand_below(rng, 3) : -1;
	return (int64_t)ta_tu_rand_below(rng, (uint64_t)ext);
}

/* Packs an operand of it_rank/it_shape (or a scalar, when scalar) filled by fill. */
static void *gen_operand(ta_array_view *view, ta_dtype dt, int rank, const int64_t *shape,
                         bool scalar, uint64_t *rng, int kind)
{
	int64_t n = scalar ? 1 : ta_tu_count(rank, shape);
	void *data = calloc((size_t)n, ta_dtype_size(dt) ? ta_dtype_size(dt) : 1);
	ck_assert(data != NULL);
	for (int64_t i = 0; i < n; i++) {
		uint64_t v = kind == 1 ? (ta_tu_rand_below(rng, 4) != 0) : small_value(dt, rng);
		ta_tu_set(dt, data, (size_t)i, v);
	}
	*view = ta_tu_view(dt, scalar ? 0 : rank, shape, data);
	return data;
}

/* Generates a random request of op on tile t into g (addressing form addr). */
static void gen_request(gen_req *g, const ta_tile_shape *t, ta_op op, ta_addr addr, uint64_t *rng)
{
	memset(g, 0, sizeof(*g));
	ta_request *r = &g->req;
	ta_request_init(r);
	r->op = op;
	r->addr = addr;
	r->family = op == TA_OP_LOAD || op == TA_OP_STORE ? TA_FAMILY_MEMORY
	            : addr == TA_ADDR_REGION              ? TA_FAMILY_ELEMENTWISE
	            : addr == TA_ADDR_SCATTER             ? TA_FAMILY_SCATTER
	                                                  : TA_FAMILY_INDEXED;
	r->check_bounds = ta_tu_rand_below(rng, 3) != 0;
	bool out = r->check_bounds; /* reject-whole requests get in-range indices here */
	r->sem = (ta_sem)ta_tu_rand_below(rng, TA_SEM_COUNT);
	r->scope = (ta_scope)ta_tu_rand_below(rng, TA_SCOPE_COUNT);
	r->space = ta_tu_rand_below(rng, 4) == 0 ? TA_SPACE_SHARED : TA_SPACE_GLOBAL;
	r->want_old = op == TA_OP_LOAD || (op != TA_OP_STORE && ta_tu_rand_below(rng, 2));
	/* a region: the whole tile or a random box */
	int64_t ext[TA_MAX_RANK];
	if (ta_tu_rand_below(rng, 2)) {
		r->has_region = true;
		r->region_rank = t->rank;
		for (int a = 0; a < t->rank; a++) {
			int64_t o = (int64_t)ta_tu_rand_below(rng, (uint64_t)t->shape[a]);
			int64_t s = 1 + (int64_t)ta_tu_rand_below(rng, (uint64_t)(t->shape[a] - o));
			r->region_origin[a] = o;
			r->region_shape[a] = s;
			ext[a] = s;
		}
	} else {
		for (int a = 0; a < t->rank; a++)
			ext[a] = t->shape[a];
	}
	int it_rank = 0;
	int64_t it[TA_MAX_RANK] = {0};
	if (addr == TA_ADDR_REGION) {
		it_rank = t->rank;
		memcpy(it, ext, sizeof(it));
	} else if (addr == TA_ADDR_SCATTER) {
		int dim = (int)ta_tu_rand_below(rng, (uint64_t)t->rank);
		r->scatter_dim = dim;
		it_rank = t->rank;
		for (int a = 0; a < t->rank; a++)
			it[a] = a == dim ? 1 + (int64_t)ta_tu_rand_below(rng, 6)
			                 : 1 + (int64_t)ta_tu_rand_below(rng, (uint64_t)ext[a]);
		r->n_index = 1;
		int64_t n = ta_tu_count(it_rank, it);
		int64_t *ix = malloc((size_t)n * sizeof(int64_t));
		ck_assert(ix != NULL);
		for (int64_t i = 0; i < n; i++)
			ix[i] = gen_index(rng, ext[dim], out);
		g->index[0] = ix;
		r->index[0] = ta_tu_view(TA_DTYPE_I64, it_rank, it, ix);
	} else {
		bool flat = addr == TA_ADDR_FLAT;
		int want = flat ? 1 : t->rank;
		it_rank = 1;
		it[0] = 1 + (int64_t)ta_tu_rand_below(rng, 24);
		r->n_index = want;
		int64_t rc = ta_tu_count(t->rank, ext);
		for (int i = 0; i < want; i++) {
			bool bcast = i > 0 && ta_tu_rand_below(rng, 4) == 0; /* a scalar index */
			int64_t n = bcast ? 1 : it[0];
			bool i32 = ta_tu_rand_below(rng, 2);
			void *ix = malloc((size_t)n * 8);
			ck_assert(ix != NULL);
			for (int64_t k = 0; k < n; k++) {
				int64_t v = gen_index(rng, flat ? rc : ext[i], out);
				if (i32)
					((int32_t *)ix)[k] = (int32_t)v;
				else
					((int64_t *)ix)[k] = v;
			}
			g->index[i] = ix;
			r->index[i] =
			    ta_tu_view(i32 ? TA_DTYPE_I32 : TA_DTYPE_I64, bcast ? 0 : 1, it, ix);
		}
	}
	ta_operands ops = ta_op_operands(op);
	bool scalar = ta_tu_rand_below(rng, 5) == 0;
	if (ops != TA_OPERANDS_PADDING)
		g->values = gen_operand(&r->values, t->dtype, it_rank, it, scalar, rng, 0);
	if (ops == TA_OPERANDS_VALUES_COMPARE)
		g->compare = gen_operand(&r->compare, t->dtype, it_rank, it,
		                         ta_tu_rand_below(rng, 5) == 0, rng, 0);
	if (ta_tu_rand_below(rng, 2))
		g->mask = gen_operand(&r->mask, TA_DTYPE_BOOL, it_rank, it,
		                      ta_tu_rand_below(rng, 8) == 0, rng, 1);
	if (op == TA_OP_LOAD && ta_tu_rand_below(rng, 2)) {
		g->padding = small_value(t->dtype, rng);
		r->padding = ta_tu_view(t->dtype, 0, it, &g->padding);
	}
}

/* Builds g's plan for t, relaxing the random variant until the table accepts it. */
static ta_status build(ta_plan *plan, const ta_tile_shape *t, gen_req *g, ta_error *err)
{
	ta_status st = ta_plan_build(plan, t, &g->req, err);
	if (st != TA_INVALID_ARGUMENT)
		return st;
	g->req.space = TA_SPACE_GLOBAL;
	g->req.scope = TA_SCOPE_GPU;
	st = ta_plan_build(plan, t, &g->req, err);
	if (st != TA_INVALID_ARGUMENT)
		return st;
	g->req.sem = TA_SEM_RELAXED;
	return ta_plan_build(plan, t, &g->req, err);
}

/* One differential round: random contents on both tiles, then nreq random requests of
 * every op and form, each applied to both and compared; returns the requests applied. */
static int differential(ta_backend *ref, ta_backend *multi, const ta_tile_shape *t,
                        ta_placement place, uint64_t seed)
{
	uint64_t rng = seed;
	size_t bytes = (size_t)ta_tile_bytes(t);
	size_t es = ta_dtype_size(t->dtype);
	int64_t n = (int64_t)(bytes / es);
	void *rmem = NULL, *mmem = NULL;
	ta_error err = {0};
	ck_assert_int_eq(ta_backend_tile_alloc(ref, bytes, &rmem, &err), TA_OK);
	ck_assert_msg(ta_backend_tile_alloc_placed(multi, t, bytes, &place, &mmem, &err) == TA_OK,
	              "%s", err.msg);
	void *init = malloc(bytes), *ra = malloc(bytes), *ma = malloc(bytes);
	ck_assert(init && ra && ma);
	for (int64_t i = 0; i < n; i++)
		ta_tu_set(t->dtype, init, (size_t)i, small_value(t->dtype, &rng));
	ck_assert_int_eq(ta_tu_tile_write(ref, rmem, bytes, t, init, &err), TA_OK);
	ck_assert_msg(ta_tu_tile_write(multi, mmem, bytes, t, init, &err) == TA_OK, "%s", err.msg);
	int applied = 0;
	for (int op = TA_OP_NONE + 1; op < TA_OP_COUNT; op++) {
		if (!ta_op_accepts_dtype((ta_op)op, t->dtype))
			continue;
		for (int addr = TA_ADDR_REGION; addr <= TA_ADDR_FLAT; addr++) {
			for (int rep = 0; rep < 3; rep++) {
				gen_req g;
				gen_request(&g, t, (ta_op)op, (ta_addr)addr, &rng);
				if (!ta_op_in_family((ta_op)op, g.req.family)) {
					gen_free(&g);
					continue;
				}
				ta_plan p1, p2;
				ta_error e1 = {0}, e2 = {0};
				ta_status s1 = build(&p1, t, &g, &e1);
				ta_status s2 = ta_plan_build(&p2, t, &g.req, &e2);
				ck_assert_int_eq(s1, s2);
				if (s1 != TA_OK) { /* reject-whole: nothing applied on either */
					ck_assert_msg(s1 == TA_OUT_OF_RANGE, "%s %s: %s",
					              ta_op_name((ta_op)op),
					              ta_dtype_name(t->dtype), e1.msg);
					gen_free(&g);
					continue;
				}
				void *o1 = calloc((size_t)p1.count + 1, es);
				void *o2 = calloc((size_t)p2.count + 1, es);
				ck_assert(o1 && o2);
				p1.old_out = p1.want_old ? o1 : NULL;
				p2.old_out = p2.want_old ? o2 : NULL;
				ta_result r1 = {0, 0}, r2 = {0, 0};
				s1 = ta_backend_apply(ref, rmem, bytes, &p1, &r1, &e1);
				s2 = ta_backend_apply(multi, mmem, bytes, &p2, &r2, &e2);
				ck_assert_msg(s1 == TA_OK, "%s", e1.msg);
				ck_assert_msg(s2 == TA_OK, "%s %s on %s: %s", ta_op_name((ta_op)op),
				              ta_dtype_name(t->dtype), "multi", e2.msg);
				ck_assert_uint_eq(r1.skipped, r2.skipped);
				ck_assert_uint_eq(r1.applied, r2.applied);
				if (p1.want_old)
					ck_assert_msg(memcmp(o1, o2, (size_t)p1.count * es) == 0,
					              "old values differ: %s %s addr %d",
					              ta_op_name((ta_op)op),
					              ta_dtype_name(t->dtype), addr);
				ck_assert_int_eq(ta_tu_tile_read(ref, rmem, bytes, t, ra, &err),
				                 TA_OK);
				ck_assert_int_eq(ta_tu_tile_read(multi, mmem, bytes, t, ma, &err),
				                 TA_OK);
				ck_assert_msg(memcmp(ra, ma, bytes) == 0,
				              "tiles differ after %s %s addr %d (space %d)",
				              ta_op_name((ta_op)op), ta_dtype_name(t->dtype), addr,
				              (int)p1.space);
				applied++;
				free(o1);
				free(o2);
				gen_free(&g);
			}
		}
	}
	free(init);
	free(ra);
	free(ma);
	ta_backend_tile_free(ref, rmem);
	ta_backend_tile_free(multi, mmem);
	return applied;
}

/* Every op and form on tiles sharded over _i + 1 pools (1, 2, 3) against one backend. */
START_TEST(test_sharded_matches_one_device)
{
	int pools = _i + 1;
	ta_placement shard = {TA_PLACE_SHARD, 0, 0, NULL};
	ta_backend *multi = multi_new(pools, shard);
	ta_error err = {0};
	ta_backend *ref = ta_cpu_backend_new(2, &err);
	ck_assert(ref != NULL);
	int total = 0;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
			ta_tile_shape t = {dtypes[d], shapes[s].rank, {0}};
			memcpy(t.shape, shapes[s].shape, sizeof(shapes[s].shape));
			for (uint64_t seed = 1; seed <= 4; seed++)
				total += differential(ref, multi, &t, shard,
				                      seed * 1000 + s * 10 + d + (uint64_t)pools);
		}
	/* 4 shapes x 8 dtypes x 4 seeds, each with at least 8 ops x 3 requests that the
	 * table accepts: a generator that lost its forms would fall far below */
	ck_assert_int_ge(total, 4 * 8 * 4 * 8 * 3);
	ta_backend_destroy(ref);
	ta_backend_destroy(multi);
}
END_TEST

/* Reads where a tile lives and its text. */
static void where_text(ta_backend *be, void *mem, const ta_tile_shape *t, char *buf, size_t n)
{
	ta_tile_where w;
	ta_backend_tile_where(be, mem, t, &w);
	ta_tile_where_format(&w, buf, n);
}

/* Uneven splits: 7 rows over 3 pools are 3, 2, 2; over 2 are 4, 3; 2 rows over 3 pools use
 * 2 of them; each part's rows really live in its own pool (a whole-tile store routes each
 * row to one pool, a load of one row reads only it). */
START_TEST(test_shard_ranges)
{
	ta_placement shard = {TA_PLACE_SHARD, 0, 0, NULL};
	ta_backend *be = multi_new(3, shard);
	ta_error err = {0};
	char buf[256];
	ta_tile_shape t = {TA_DTYPE_I32, 2, {7, 5}};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 140, NULL, &mem, &err), TA_OK);
	where_text(be, mem, &t, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0:[0,3) 1:[3,5) 2:[5,7)");
	int32_t vals[35], back[35];
	for (int i = 0; i < 35; i++)
		vals[i] = 100 + i;
	ck_assert_int_eq(ta_tu_tile_write(be, mem, 140, &t, vals, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_read(be, mem, 140, &t, back, &err), TA_OK);
	ck_assert_mem_eq(vals, back, sizeof(vals));
	ta_backend_tile_free(be, mem);

	ta_placement two = {TA_PLACE_SHARD, 0, 2, NULL};
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 140, &two, &mem, &err), TA_OK);
	where_text(be, mem, &t, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0:[0,4) 1:[4,7)");
	ta_backend_tile_free(be, mem);

	ta_tile_shape small = {TA_DTYPE_F64, 2, {2, 3}};
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &small, 48, NULL, &mem, &err), TA_OK);
	where_text(be, mem, &small, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0:[0,1) 1:[1,2)");
	ta_backend_tile_free(be, mem);

	ta_placement four = {TA_PLACE_SHARD, 0, 4, NULL};
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 140, &four, &mem, &err),
	                 TA_INVALID_ARGUMENT);
	ck_assert_ptr_null(mem);
	ck_assert_msg(strstr(err.msg, "cannot shard over 4 devices") != NULL, "%s", err.msg);
	ta_backend_destroy(be);
}
END_TEST

/* Placement by device and auto: auto takes the pool with the fewest bytes placed (ties:
 * the lowest ordinal); a device out of range is INVALID_ARGUMENT; tile_alloc without a
 * shape follows the default. */
START_TEST(test_place_device_auto)
{
	ta_placement dflt = {TA_PLACE_AUTO, 0, 0, NULL};
	ta_backend *be = multi_new(3, dflt);
	ta_error err = {0};
	char buf[256];
	ck_assert_int_eq(ta_backend_device_count(be), 3);
	ta_tile_shape big = {TA_DTYPE_I64, 1, {100}}, small = {TA_DTYPE_I32, 1, {10}};
	void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
	ta_placement on2 = {TA_PLACE_DEVICE, 2, 0, NULL};
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &big, 800, &on2, &a, &err), TA_OK);
	where_text(be, a, &big, buf, sizeof(buf));
	ck_assert_str_eq(buf, "2");
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &small, 40, NULL, &b, &err), TA_OK);
	where_text(be, b, &small, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0"); /* pools 0 and 1 empty: the lower */
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &small, 40, NULL, &c, &err), TA_OK);
	where_text(be, c, &small, buf, sizeof(buf));
	ck_assert_str_eq(buf, "1");
	ck_assert_int_eq(ta_backend_tile_alloc(be, 40, &d, &err), TA_OK);
	where_text(be, d, &small, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0"); /* 40 bytes on 0 and 1, 800 on 2: the lower */
	ta_backend_tile_free(be, b);
	ta_backend_tile_free(be, d);
	ta_placement on3 = {TA_PLACE_DEVICE, 3, 0, NULL};
	void *e = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &small, 40, &on3, &e, &err),
	                 TA_INVALID_ARGUMENT);
	ck_assert_msg(strstr(err.msg, "device 3 does not exist") != NULL, "%s", err.msg);
	/* a tile on device 2 works like any other */
	int64_t vals[100], back[100];
	for (int i = 0; i < 100; i++)
		vals[i] = -i;
	ck_assert_int_eq(ta_tu_tile_write(be, a, 800, &big, vals, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_read(be, a, 800, &big, back, &err), TA_OK);
	ck_assert_mem_eq(vals, back, sizeof(vals));
	ta_backend_tile_free(be, a);
	ta_backend_tile_free(be, c);
	ta_backend_destroy(be);

	/* a one-device backend takes device 0, auto and shard, and refuses device 1 */
	ta_backend *one = ta_cpu_backend_new(2, &err);
	ck_assert(one != NULL);
	ta_placement on1 = {TA_PLACE_DEVICE, 1, 0, NULL};
	ck_assert_int_eq(ta_backend_tile_alloc_placed(one, &small, 40, &on1, &e, &err),
	                 TA_INVALID_ARGUMENT);
	ta_placement sh = {TA_PLACE_SHARD, 0, 0, NULL};
	ck_assert_int_eq(ta_backend_tile_alloc_placed(one, &small, 40, &sh, &e, &err), TA_OK);
	where_text(one, e, &small, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0");
	ta_backend_tile_free(one, e);
	ta_backend_destroy(one);

	/* a default device out of range fails the construction */
	ta_backend *devs[2] = {ta_cpu_backend_new(2, &err), ta_cpu_backend_new(2, &err)};
	ck_assert(devs[0] && devs[1]);
	ck_assert_ptr_null(ta_multi_backend_new(devs, 2, &on2, &err));
	ck_assert_int_eq(err.code, TA_INVALID_ARGUMENT);
}
END_TEST

/* Skip-and-count and reject-whole across a shard boundary, masks too; old values of
 * masked and skipped elements; CAS old values in request order across devices. */
START_TEST(test_bounds_and_order_across_shards)
{
	ta_placement shard = {TA_PLACE_SHARD, 0, 0, NULL};
	ta_backend *be = multi_new(2, shard);
	ta_error err = {0};
	ta_tile_shape t = {TA_DTYPE_I32, 1, {5}}; /* rows 0..2 on pool 0, 3..4 on pool 1 */
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 20, NULL, &mem, &err), TA_OK);
	int32_t init[5] = {10, 11, 12, 13, 14};
	ck_assert_int_eq(ta_tu_tile_write(be, mem, 20, &t, init, &err), TA_OK);

	/* CAS at 4, 0, 9 (out), 3, 2 (masked) with compare = current for 4 and 3 only */
	int64_t ix[5] = {4, 0, 9, 3, 2};
	int32_t desired[5] = {40, 50, 60, 30, 20}, expect[5] = {14, 99, 7, 13, 12};
	uint8_t mask[5] = {1, 1, 1, 1, 0};
	int64_t sh[1] = {5};
	ta_request r;
	ta_request_init(&r);
	r.family = TA_FAMILY_INDEXED;
	r.op = TA_OP_CAS;
	r.addr = TA_ADDR_INDEXED;
	r.n_index = 1;
	r.index[0] = ta_tu_view(TA_DTYPE_I64, 1, sh, ix);
	r.values = ta_tu_view(TA_DTYPE_I32, 1, sh, desired);
	r.compare = ta_tu_view(TA_DTYPE_I32, 1, sh, expect);
	r.mask = ta_tu_view(TA_DTYPE_BOOL, 1, sh, mask);
	r.want_old = true;
	ta_plan p;
	ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err), TA_OK);
	int32_t old[5] = {0};
	p.old_out = old;
	ta_result res;
	ck_assert_int_eq(ta_backend_apply(be, mem, 20, &p, &res, &err), TA_OK);
	ck_assert_uint_eq(res.skipped, 1);
	ck_assert_uint_eq(res.applied, 3);
	/* old values in request order: seen values for applied, compare for skipped/masked */
	int32_t want_old[5] = {14, 10, 7, 13, 12};
	ck_assert_mem_eq(old, want_old, sizeof(old));
	int32_t back[5], want_tile[5] = {10, 11, 12, 30, 40};
	ck_assert_int_eq(ta_tu_tile_read(be, mem, 20, &t, back, &err), TA_OK);
	ck_assert_mem_eq(back, want_tile, sizeof(back));

	/* reject-whole: an out-of-range index on pool 1's side rejects the request before
	 * pool 0's element is touched */
	r.op = TA_OP_ADD;
	r.compare.present = false;
	r.mask.present = false;
	r.check_bounds = false;
	int64_t ix2[2] = {0, 5};
	int64_t sh2[1] = {2};
	r.index[0] = ta_tu_view(TA_DTYPE_I64, 1, sh2, ix2);
	r.values = ta_tu_view(TA_DTYPE_I32, 1, sh2, desired);
	ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err), TA_OUT_OF_RANGE);
	ck_assert_int_eq(ta_tu_tile_read(be, mem, 20, &t, back, &err), TA_OK);
	ck_assert_mem_eq(back, want_tile, sizeof(back));

	/* LOAD with padding over both pools, index -1 skipped */
	int64_t ix3[4] = {3, -1, 1, 4};
	int64_t sh3[1] = {4};
	int32_t pad = -7;
	ta_request_init(&r);
	r.family = TA_FAMILY_MEMORY;
	r.op = TA_OP_LOAD;
	r.addr = TA_ADDR_INDEXED;
	r.n_index = 1;
	r.index[0] = ta_tu_view(TA_DTYPE_I64, 1, sh3, ix3);
	r.padding = ta_tu_view(TA_DTYPE_I32, 0, sh3, &pad);
	r.want_old = true;
	ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err), TA_OK);
	int32_t got[4];
	p.old_out = got;
	ck_assert_int_eq(ta_backend_apply(be, mem, 20, &p, &res, &err), TA_OK);
	int32_t want_got[4] = {30, -7, 11, 40};
	ck_assert_mem_eq(got, want_got, sizeof(got));
	ck_assert_uint_eq(res.skipped, 1);
	ck_assert_uint_eq(res.applied, 3);

	/* a large region fill routes in chunks and still lands exactly */
	ta_backend_tile_free(be, mem);
	ta_tile_shape big = {TA_DTYPE_U32, 1, {200003}};
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &big, 800012, NULL, &mem, &err), TA_OK);
	uint32_t *bv = malloc(800012), *bb = malloc(800012);
	ck_assert(bv && bb);
	for (uint32_t i = 0; i < 200003; i++)
		bv[i] = i * 2654435761u;
	ck_assert_int_eq(ta_tu_tile_write(be, mem, 800012, &big, bv, &err), TA_OK);
	ck_assert_int_eq(ta_tu_tile_read(be, mem, 800012, &big, bb, &err), TA_OK);
	ck_assert_mem_eq(bv, bb, 800012);
	free(bv);
	free(bb);
	ta_backend_tile_free(be, mem);
	ta_backend_destroy(be);
}
END_TEST

/* The placement texts: parse and format round trip; bad texts are named. */
START_TEST(test_placement_text)
{
	ta_placement p;
	ta_error err = {0};
	char buf[64];
	const char *good[] = {"auto", "shard", "shard:3", "0", "7", "default"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_int_eq(ta_placement_parse(good[i], &p, &err), TA_OK);
		ck_assert_str_eq(ta_placement_format(&p, buf, sizeof(buf)), good[i]);
	}
	ck_assert_int_eq(ta_placement_parse("", &p, &err), TA_OK);
	ck_assert_int_eq(p.kind, TA_PLACE_DEFAULT);
	const char *bad[] = {"shard:0", "shard:", "-1", "64", "gpu", "1x", "shard:65", " 1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(ta_placement_parse(bad[i], &p, &err), TA_INVALID_ARGUMENT);
		ck_assert_msg(strstr(err.msg, bad[i]) != NULL, "%s", err.msg);
	}
}
END_TEST

/* Where texts (what a logged create holds as its placement): what ta_tile_where_format
 * writes parses back to the same parts for a tile of that many rows;
 * texts that are not whole parts of it are named. */
START_TEST(test_where_text)
{
	ta_tile_where w;
	ta_error err = {0};
	char buf[TA_WHERE_TEXT_MAX];
	const char *good[] = {"0", "63", "0:[0,3) 1:[3,5) 2:[5,7)", "1:[0,3) 2:[3,7)",
	                      "0:[0,1) 5:[1,2) 9:[2,7)"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_msg(ta_tile_where_parse(good[i], 7, &w, &err) == TA_OK, "%s", err.msg);
		ck_assert_str_eq(ta_tile_where_format(&w, buf, sizeof(buf)), good[i]);
		ck_assert_int_eq(w.part[w.nparts - 1].end, 7);
	}
	ck_assert_int_eq(ta_tile_where_parse("2", 7, &w, &err), TA_OK);
	ck_assert_int_eq(w.nparts, 1);
	ck_assert_int_eq(w.part[0].device, 2);
	ck_assert_int_eq(w.part[0].first, 0);
	/* 64 parts of 19-digit rows, each on its own device: about the longest text, uncut */
	int64_t span = INT64_MAX / TA_MAX_DEVICES;
	for (int d = 0; d < TA_MAX_DEVICES; d++)
		w.part[d] = (ta_tile_part){d, d * span, (d + 1) * span};
	w.nparts = TA_MAX_DEVICES;
	ta_tile_where back;
	ta_tile_where_format(&w, buf, sizeof(buf));
	ck_assert_uint_lt(strlen(buf), sizeof(buf) - 1);
	ck_assert_msg(ta_tile_where_parse(buf, TA_MAX_DEVICES * span, &back, &err) == TA_OK, "%s",
	              err.msg);
	ck_assert_int_eq(back.nparts, TA_MAX_DEVICES);
	ck_assert_int_eq(back.part[63].first, w.part[63].first);
	struct {
		const char *text, *msg;
	} bad[] = {
	    {"", "placement '' is neither a device ordinal nor parts DEVICE:[FIRST,END) separated "
	         "by spaces"},
	    {"auto", "placement 'auto' is neither a device ordinal nor parts DEVICE:[FIRST,END) "
	             "separated by spaces"},
	    {"0:[0,3)  1:[3,7)", "placement '0:[0,3)  1:[3,7)' is neither a device ordinal nor "
	                         "parts DEVICE:[FIRST,END) separated by spaces"},
	    {"0:[0,3) 1:[3,7)x", "placement '0:[0,3) 1:[3,7)x': unexpected 'x' after the parts"},
	    {"0:[0,3) 1:[4,7)",
	     "placement '0:[0,3) 1:[4,7)': placement: part 1 holds rows [4,7) where rows from 3 on "
	     "come next"},
	    {"0:[0,3) 1:[3,6)",
	     "placement '0:[0,3) 1:[3,6)': placement: the parts hold rows [0,6) of a tile of 7 "
	     "rows"},
	    {"0:[0,0) 1:[0,7)", "placement '0:[0,0) 1:[0,7)': placement: part 0 holds rows [0,0) "
	                        "where rows from 0 on come next"},
	    {"64:[0,7)", "placement '64:[0,7)' is neither a device ordinal nor parts "
	                 "DEVICE:[FIRST,END) separated by spaces"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(ta_tile_where_parse(bad[i].text, 7, &w, &err),
		                 TA_INVALID_ARGUMENT);
		ck_assert_str_eq(err.msg, bad[i].msg);
	}
}
END_TEST

/* A tile placed on exactly the parts given (TA_PLACE_PARTS: a restored tile): there when
 * every device exists and the parts go on distinct ones in ascending order; refused,
 * naming the problem, otherwise. */
START_TEST(test_place_parts)
{
	ta_placement dflt = {TA_PLACE_DEFAULT, 0, 0, NULL};
	ta_backend *be = multi_new(3, dflt);
	ta_error err = {0};
	ta_tile_shape t = {TA_DTYPE_I32, 2, {7, 5}};
	ta_tile_where want, got;
	ck_assert_int_eq(ta_tile_where_parse("0:[0,1) 2:[1,7)", 7, &want, &err), TA_OK);
	ta_placement parts = {TA_PLACE_PARTS, 0, 0, &want};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 140, &parts, &mem, &err), TA_OK);
	ta_backend_tile_where(be, mem, &t, &got);
	char buf[TA_WHERE_TEXT_MAX];
	ck_assert_str_eq(ta_tile_where_format(&got, buf, sizeof(buf)), "0:[0,1) 2:[1,7)");
	ta_backend_tile_free(be, mem);
	ck_assert_int_eq(ta_tile_where_parse("0:[0,3) 3:[3,7)", 7, &want, &err), TA_OK);
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 140, &parts, &mem, &err),
	                 TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "placement: device 3 does not exist (devices 0..2)");
	ck_assert_int_eq(ta_tile_where_parse("2:[0,3) 1:[3,7)", 7, &want, &err), TA_OK);
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 140, &parts, &mem, &err),
	                 TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "placement: part 1 is on device 1 after device 2 (parts go on "
	                          "distinct devices, ordinals ascending with the rows)");
	ta_tile_shape six = {TA_DTYPE_I32, 2, {6, 5}};
	ck_assert_int_eq(ta_tile_where_parse("0:[0,3) 1:[3,7)", 7, &want, &err), TA_OK);
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &six, 120, &parts, &mem, &err),
	                 TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "placement: the parts hold rows [0,7) of a tile of 6 rows");
	ta_backend_destroy(be);
	/* one device without the layer: one part on device 0 only */
	ta_backend *one = ta_cpu_backend_new(2, &err);
	ck_assert_ptr_nonnull(one);
	ck_assert_int_eq(ta_tile_where_parse("0", 7, &want, &err), TA_OK);
	ck_assert_int_eq(ta_backend_tile_alloc_placed(one, &t, 140, &parts, &mem, &err), TA_OK);
	ta_backend_tile_free(one, mem);
	ck_assert_int_eq(ta_tile_where_parse("1", 7, &want, &err), TA_OK);
	ck_assert_int_eq(ta_backend_tile_alloc_placed(one, &t, 140, &parts, &mem, &err),
	                 TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg,
	                 "placement: device 1 does not exist (the backend serves one device, 0)");
	ta_backend_destroy(one);
}
END_TEST

/* The suite. */
/* Builds an indexed plan of op on the 1-d int32 tile t at the n flat indices ix with values
 * vals (want_old: old values into old). */
static void flat_plan(ta_plan *p, const ta_tile_shape *t, ta_op op, ta_sem sem, int n, int64_t *ix,
                      int32_t *vals, int32_t *old)
{
	int64_t sh[1] = {n};
	ta_request r;
	ta_request_init(&r);
	r.family = TA_FAMILY_INDEXED;
	r.op = op;
	r.addr = TA_ADDR_INDEXED;
	r.n_index = 1;
	r.index[0] = ta_tu_view(TA_DTYPE_I64, 1, sh, ix);
	if (vals)
		r.values = ta_tu_view(TA_DTYPE_I32, 1, sh, vals);
	r.sem = sem;
	r.want_old = old != NULL;
	ta_error err = {0};
	ck_assert_msg(ta_plan_build(p, t, &r, &err) == TA_OK, "%s", err.msg);
	p->old_out = old;
}

/* apply_many over tiles wholly on three pools and a sharded one, relaxed and release
 * acquire calls mixed: every call's status, old values and the tiles afterwards are those
 * of the calls one after another (a tile's calls keep their order; an exchange after an
 * add of the same batch sees it). */
START_TEST(test_apply_many_across_devices)
{
	ta_placement shard = {TA_PLACE_SHARD, 0, 0, NULL};
	ta_backend *be = multi_new(3, shard);
	ta_error err = {0};
	ta_tile_shape t = {TA_DTYPE_I32, 1, {6}};
	void *mem[4] = {NULL};
	for (int d = 0; d < 3; d++) {
		ta_placement on = {TA_PLACE_DEVICE, d, 0, NULL};
		ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 24, &on, &mem[d], &err),
		                 TA_OK);
	}
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 24, NULL, &mem[3], &err), TA_OK);
	enum { CALLS = 48 };
	ta_plan plans[CALLS];
	ta_result results[CALLS];
	ta_error errs[CALLS];
	ta_apply_call calls[CALLS];
	int64_t ix[CALLS][2];
	int32_t vals[CALLS][2], olds[CALLS][2];
	int nel[CALLS];
	int32_t want[4][6] = {{0}};
	memset(errs, 0, sizeof errs);
	for (int c = 0; c < CALLS; c++) {
		int tile = c % 4;
		ix[c][0] = c % 6;
		ix[c][1] = (c * 5 + 1) % 6;
		vals[c][0] = c + 1;
		vals[c][1] = 2 * c + 1;
		ta_op op = c % 5 == 4 ? TA_OP_EXCH : TA_OP_ADD;
		ta_sem sem = c % 7 == 3    ? TA_SEM_RELEASE
		             : c % 11 == 5 ? TA_SEM_ACQUIRE
		                           : TA_SEM_RELAXED;
		/* some one-element calls on the sharded tile: routed to their part in the batch */
		nel[c] = tile == 3 && c % 3 != 0 ? 1 : 2;
		flat_plan(&plans[c], &t, op, sem, nel[c], ix[c], vals[c], olds[c]);
		calls[c] = (ta_apply_call){mem[tile], 24, &plans[c], &results[c], &errs[c], TA_OK};
	}
	ta_backend_apply_many(be, calls, CALLS);
	for (int c = 0; c < CALLS; c++) {
		int tile = c % 4;
		ck_assert_msg(calls[c].status == TA_OK, "call %d: %s", c, errs[c].msg);
		ck_assert_uint_eq(results[c].applied, (unsigned)nel[c]);
		/* the reference: one call after another */
		bool add = plans[c].op == TA_OP_ADD;
		for (int e = 0; e < nel[c]; e++) {
			int32_t o = want[tile][ix[c][e]];
			want[tile][ix[c][e]] = add ? o + vals[c][e] : vals[c][e];
			ck_assert_int_eq(olds[c][e], o);
		}
	}
	for (int k = 0; k < 4; k++) {
		int32_t back[6];
		ck_assert_int_eq(ta_tu_tile_read(be, mem[k], 24, &t, back, &err), TA_OK);
		ck_assert_mem_eq(back, want[k], sizeof back);
		ta_backend_tile_free(be, mem[k]);
	}
	ta_backend_destroy(be);
}
END_TEST

/* Threads hammering one tile sharded over 3 pools with requests that span every part (so
 * that the parts run on the pools' helpers at the same time): the totals are exact. */
enum { HAMMER_THREADS = 4, HAMMER_ROUNDS = 300, HAMMER_ELEMS = 7 };

/* What a hammer thread needs. */
typedef struct hammer_arg {
	ta_backend *be;         /* the multi backend */
	void *mem;              /* the sharded tile */
	const ta_tile_shape *t; /* its shape */
	int bad;                /* calls that failed */
} hammer_arg;

/* A hammer thread: HAMMER_ROUNDS adds of 1 to every element (indexed, over all parts). */
static void *hammer_main(void *arg)
{
	hammer_arg *h = arg;
	int64_t ix[HAMMER_ELEMS];
	int32_t ones[HAMMER_ELEMS];
	for (int i = 0; i < HAMMER_ELEMS; i++) {
		ix[i] = HAMMER_ELEMS - 1 - i;
		ones[i] = 1;
	}
	for (int r = 0; r < HAMMER_ROUNDS; r++) {
		ta_plan p;
		flat_plan(&p, h->t, TA_OP_ADD, TA_SEM_RELAXED, HAMMER_ELEMS, ix, ones, NULL);
		ta_result res;
		ta_error err = {0};
		if (ta_backend_apply(h->be, h->mem, HAMMER_ELEMS * 4, &p, &res, &err) != TA_OK ||
		    res.applied != HAMMER_ELEMS)
			h->bad++;
	}
	return NULL;
}

START_TEST(test_concurrent_requests_over_parts)
{
	ta_placement shard = {TA_PLACE_SHARD, 0, 0, NULL};
	ta_backend *be = multi_new(3, shard);
	ta_error err = {0};
	ta_tile_shape t = {TA_DTYPE_I32, 1, {HAMMER_ELEMS}};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, HAMMER_ELEMS * 4, NULL, &mem, &err),
	                 TA_OK);
	pthread_t th[HAMMER_THREADS];
	hammer_arg args[HAMMER_THREADS];
	for (int i = 0; i < HAMMER_THREADS; i++) {
		args[i] = (hammer_arg){be, mem, &t, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, hammer_main, &args[i]), 0);
	}
	for (int i = 0; i < HAMMER_THREADS; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_int_eq(args[i].bad, 0);
	}
	int32_t back[HAMMER_ELEMS];
	ck_assert_int_eq(ta_tu_tile_read(be, mem, HAMMER_ELEMS * 4, &t, back, &err), TA_OK);
	for (int i = 0; i < HAMMER_ELEMS; i++)
		ck_assert_int_eq(back[i], HAMMER_THREADS * HAMMER_ROUNDS);
	ta_backend_tile_free(be, mem);
	ta_backend_destroy(be);
}
END_TEST

/* A merge-out on the CPU backend (ta_plan.h, ta_merge_out), what a sharded histogram with
 * one scratch hands a pool: the scratch (holding garbage) is zeroed, the request runs into
 * it (skipped keys counted), and each target gets its rows of it added; again with another
 * sem over the previous results; plans that cannot carry a merge-out are refused before
 * anything changes. */
START_TEST(test_merge_out_cpu)
{
	ta_error err = {0};
	ta_backend *be = ta_cpu_backend_new(2, &err);
	ck_assert_msg(be != NULL, "%s", err.msg);
	ta_tile_shape t = {TA_DTYPE_I64, 1, {10}};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 80, &mem, &err), TA_OK);
	int64_t junk[10];
	for (int i = 0; i < 10; i++)
		junk[i] = 1000 + i;
	ck_assert_int_eq(ta_tu_tile_write(be, mem, 80, &t, junk, &err), TA_OK);

	/* sub of values 1..8 at keys 0, 3, 3, 9, 12 (out), -1 (out), 5, 3 */
	int64_t keys[8] = {0, 3, 3, 9, 12, -1, 5, 3}, vals[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	int64_t sh[1] = {8};
	ta_request r;
	ta_request_init(&r);
	r.family = TA_FAMILY_INDEXED;
	r.op = TA_OP_SUB;
	r.addr = TA_ADDR_FLAT;
	r.n_index = 1;
	r.index[0] = ta_tu_view(TA_DTYPE_I64, 1, sh, keys);
	r.values = ta_tu_view(TA_DTYPE_I64, 1, sh, vals);
	ta_plan p;
	ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err), TA_OK);
	/* rows 0..3 into a, rows 4..9 into b (remote: no difference on a CPU) */
	int64_t a[4] = {100, 101, 102, 103}, b[6] = {200, 201, 202, 203, 204, 205};
	ta_merge_target tg[2] = {{a, 0, 4, false}, {b, 4, 6, true}};
	ta_merge_out mo = {true, 2, tg};
	p.merge_out = &mo;
	ta_result res = {0, 0};
	ck_assert_msg(ta_backend_apply(be, mem, 80, &p, &res, &err) == TA_OK, "%s", err.msg);
	ck_assert_uint_eq(res.skipped, 2);
	ck_assert_uint_eq(res.applied, 6);
	int64_t want_scratch[10] = {-1, 0, 0, -13, 0, -7, 0, 0, 0, -4}, back[10];
	ck_assert_int_eq(ta_tu_tile_read(be, mem, 80, &t, back, &err), TA_OK);
	ck_assert_mem_eq(back, want_scratch, sizeof(back));
	int64_t want_a[4] = {99, 101, 102, 90}, want_b[6] = {200, 194, 202, 203, 204, 201};
	ck_assert_mem_eq(a, want_a, sizeof(a));
	ck_assert_mem_eq(b, want_b, sizeof(b));

	/* again, acq_rel (zeros added too), over the scratch the first one left */
	p.sem = TA_SEM_ACQ_REL;
	ck_assert_msg(ta_backend_apply(be, mem, 80, &p, &res, &err) == TA_OK, "%s", err.msg);
	ck_assert_uint_eq(res.skipped, 2);
	ck_assert_uint_eq(res.applied, 6);
	int64_t want_a2[4] = {98, 101, 102, 77}, want_b2[6] = {200, 187, 202, 203, 204, 197};
	ck_assert_mem_eq(a, want_a2, sizeof(a));
	ck_assert_mem_eq(b, want_b2, sizeof(b));

	/* refused, nothing changed: old values wanted, a target leaving the tile, too many
	 * targets, a target without memory, a float tile */
	ck_assert_int_eq(ta_tu_tile_write(be, mem, 80, &t, junk, &err), TA_OK);
	int64_t old[8];
	ta_plan q = p;
	q.want_old = true;
	q.old_out = old;
	ck_assert_int_eq(ta_backend_apply(be, mem, 80, &q, &res, &err), TA_INVALID_ARGUMENT);
	ck_assert_msg(strstr(err.msg, "merge-out") != NULL, "%s", err.msg);
	ta_merge_target far[2] = {{a, 0, 4, false}, {b, 5, 6, true}};
	ta_merge_out mo_far = {true, 2, far};
	q = p;
	q.merge_out = &mo_far;
	ck_assert_int_eq(ta_backend_apply(be, mem, 80, &q, &res, &err), TA_INVALID_ARGUMENT);
	ck_assert_msg(strstr(err.msg, "target 1") != NULL, "%s", err.msg);
	ta_merge_out mo_many = {true, TA_MERGE_TARGETS_MAX + 1, tg};
	q.merge_out = &mo_many;
	ck_assert_int_eq(ta_backend_apply(be, mem, 80, &q, &res, &err), TA_INVALID_ARGUMENT);
	ta_merge_target none[1] = {{NULL, 0, 4, false}};
	ta_merge_out mo_none = {true, 1, none};
	q.merge_out = &mo_none;
	q.prechecked = true; /* checked all the same */
	ck_assert_int_eq(ta_backend_apply(be, mem, 80, &q, &res, &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(ta_tu_tile_read(be, mem, 80, &t, back, &err), TA_OK);
	ck_assert_mem_eq(back, junk, sizeof(back));
	ck_assert_mem_eq(a, want_a2, sizeof(a));
	ck_assert_mem_eq(b, want_b2, sizeof(b));

	ta_tile_shape tf = {TA_DTYPE_F64, 1, {10}};
	double fv = 1.0;
	r.values = ta_tu_view(TA_DTYPE_F64, 0, sh, &fv);
	r.op = TA_OP_ADD;
	ck_assert_int_eq(ta_plan_build(&q, &tf, &r, &err), TA_OK);
	q.merge_out = &mo;
	ck_assert_int_eq(ta_backend_apply(be, mem, 80, &q, &res, &err), TA_INVALID_ARGUMENT);
	ck_assert_mem_eq(a, want_a2, sizeof(a));
	ta_backend_tile_free(be, mem);
	ta_backend_destroy(be);
}
END_TEST

/* Requests each pool of be has run (its device_stats). */
static void pool_requests(ta_backend *be, int n, uint64_t *out)
{
	for (int d = 0; d < n; d++) {
		ta_device_stats st;
		ck_assert(ta_backend_device_stats(be, d, &st));
		out[d] = st.requests;
	}
}

/* The histogram tiles of test_histogram_one_scratch: 256 bins, 1001 (uneven over 2 and 3
 * pools) and 37 x 7 (rows split 19/18 and 13/12/12). */
static const struct {
	int rank;
	int64_t shape[2];
} hist_shapes[] = {{1, {256}}, {1, {1001}}, {2, {37, 7}}};

/* Histograms (flat int32 keys, a scalar 1 added; a sub of a value vector) into tiles
 * sharded over 2 and 3 pools through the partial-tile path with one scratch
 * (TA_MULTI_PARTIALS=single: the path of GPU keys that live on one GPU): one apply on the
 * first part's pool (its request count alone grows, by one) zeroes the scratch, runs the
 * keys into it and adds every part's rows into the part. Exact bins after two requests
 * each (the second zeroes the kept scratch the first left), int32 (wrapping) and int64;
 * keys out of range skipped and counted; reject-whole refused before anything changes. */
START_TEST(test_histogram_one_scratch)
{
	const char *was = getenv("TA_MULTI_PARTIALS");
	char *saved = was ? strdup(was) : NULL;
	ck_assert_int_eq(setenv("TA_MULTI_PARTIALS", "single", 1), 0);
	ta_placement shard = {TA_PLACE_SHARD, 0, 0, NULL};
	uint64_t rng = 24;
	for (int pools = 2; pools <= 3; pools++) {
		ta_backend *be = multi_new(pools, shard);
		for (size_t si = 0; si < sizeof(hist_shapes) / sizeof(hist_shapes[0]); si++) {
			for (int di = 0; di < 2; di++) {
				for (int oi = 0; oi < 2; oi++) {
					ta_dtype dt = di ? TA_DTYPE_I64 : TA_DTYPE_I32;
					ta_op op = oi ? TA_OP_SUB : TA_OP_ADD;
					ta_tile_shape t = {dt, hist_shapes[si].rank, {0}};
					memcpy(t.shape, hist_shapes[si].shape,
					       sizeof(hist_shapes[si].shape));
					int64_t bins = ta_tu_count(t.rank, t.shape);
					size_t es = ta_dtype_size(dt), bytes = (size_t)bins * es;
					uint64_t wmask = es == 8 ? UINT64_MAX : 0xffffffffu;
					ta_error err = {0};
					void *mem = NULL;
					ck_assert_int_eq(ta_backend_tile_alloc_placed(
					                     be, &t, bytes, &shard, &mem, &err),
					                 TA_OK);
					ta_tile_where w;
					ta_backend_tile_where(be, mem, &t, &w);
					ck_assert_int_eq(w.nparts, pools);
					int home = w.part[0].device;
					/* start from values near the wrap: 0x7ffffff0 + 3i */
					uint64_t *want = malloc((size_t)bins * 8);
					void *init = malloc(bytes), *back = malloc(bytes);
					ck_assert(want && init && back);
					for (int64_t i = 0; i < bins; i++) {
						want[i] = (UINT64_C(0x7ffffff0) + 3 * (uint64_t)i) &
						          wmask;
						ta_tu_set(dt, init, (size_t)i, want[i]);
					}
					ck_assert_int_eq(
					    ta_tu_tile_write(be, mem, bytes, &t, init, &err),
					    TA_OK);
					for (int round = 0; round < 2; round++) {
						int64_t n = 3000 + round;
						int32_t *keys = malloc((size_t)n * 4);
						void *vals = malloc((size_t)n * es);
						ck_assert(keys && vals);
						uint64_t one = 1, skipped = 0;
						for (int64_t k = 0; k < n; k++) {
							int64_t key =
							    (int64_t)ta_tu_rand_below(
							        &rng,
							        (uint64_t)(bins + bins / 16 + 2)) -
							    1;
							keys[k] = (int32_t)key;
							uint64_t v = op == TA_OP_ADD
							                 ? 1
							                 : (uint64_t)(k % 5 + 1);
							ta_tu_set(dt, vals, (size_t)k, v);
							if (key < 0 || key >= bins) {
								skipped++;
								continue;
							}
							want[key] =
							    (op == TA_OP_ADD ? want[key] + v
							                     : want[key] - v) &
							    wmask;
						}
						int64_t sh[1] = {n};
						ta_request r;
						ta_request_init(&r);
						r.family = TA_FAMILY_INDEXED;
						r.op = op;
						r.addr = TA_ADDR_FLAT;
						r.n_index = 1;
						r.index[0] = ta_tu_view(TA_DTYPE_I32, 1, sh, keys);
						r.values = op == TA_OP_ADD
						               ? ta_tu_view(dt, 0, sh, &one)
						               : ta_tu_view(dt, 1, sh, vals);
						ta_plan p;
						ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err),
						                 TA_OK);
						uint64_t before[3], after[3];
						pool_requests(be, pools, before);
						ta_result res = {0, 0};
						ck_assert_msg(ta_backend_apply(be, mem, bytes, &p,
						                               &res, &err) == TA_OK,
						              "%s", err.msg);
						pool_requests(be, pools, after);
						for (int d = 0; d < pools; d++)
							ck_assert_uint_eq(after[d] - before[d],
							                  d == home ? 1 : 0);
						ck_assert_uint_eq(res.skipped, skipped);
						ck_assert_uint_eq(res.applied,
						                  (uint64_t)n - skipped);
						ck_assert_int_eq(
						    ta_tu_tile_read(be, mem, bytes, &t, back, &err),
						    TA_OK);
						for (int64_t i = 0; i < bins; i++)
							ck_assert_msg(
							    ta_tu_get(dt, back, (size_t)i) ==
							        want[i],
							    "%d pools, %lld bins, %s %s, round %d: "
							    "bin %lld",
							    pools, (long long)bins, ta_op_name(op),
							    ta_dtype_name(dt), round, (long long)i);
						/* reject-whole: one key out of range refuses it all
						 */
						r.check_bounds = false;
						keys[n / 2] = (int32_t)bins;
						ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err),
						                 TA_OUT_OF_RANGE);
						ck_assert_int_eq(
						    ta_tu_tile_read(be, mem, bytes, &t, back, &err),
						    TA_OK);
						for (int64_t i = 0; i < bins; i++)
							ck_assert(ta_tu_get(dt, back, (size_t)i) ==
							          want[i]);
						free(keys);
						free(vals);
					}
					free(want);
					free(init);
					free(back);
					ta_backend_tile_free(be, mem);
				}
			}
		}
		ta_backend_destroy(be);
	}
	if (saved) {
		ck_assert_int_eq(setenv("TA_MULTI_PARTIALS", saved, 1), 0);
		free(saved);
	} else {
		ck_assert_int_eq(unsetenv("TA_MULTI_PARTIALS"), 0);
	}
}
END_TEST

/* The done function of test_async_lanes: counts. */
static void lanes_done(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_RELEASE);
}

/* Builds an add of val at index at of a one-axis int32 tile t into p (old value wanted). */
static void lanes_add(ta_plan *p, const ta_tile_shape *t, int64_t *at, int32_t *val, int32_t *old)
{
	ta_error err = {0};
	ta_request req;
	ta_tu_indexed(&req, TA_OP_ADD, true);
	int64_t one = 1;
	req.index[0] = ta_tu_view(TA_DTYPE_I64, 1, &one, at);
	req.values = ta_tu_view(TA_DTYPE_I32, 0, NULL, val);
	ck_assert_msg(ta_plan_build(p, t, &req, &err) == TA_OK, "%s", err.msg);
	p->old_out = old;
}

/* A thread that attaches (a daemon's loop) runs its asynchronous calls in its own polls, on
 * each device of the multi-device layer (a tile sharded over two CPU pools): nothing runs
 * before the poll, everything in it, in order, exactly; with TILEATOM_CPU_LANES=0 it has
 * no lane and the completion thread runs them; a bad value refuses the backend. */
START_TEST(test_async_lanes)
{
	enum { CALLS = 40 };
	ta_tile_shape t = {TA_DTYPE_I32, 1, {8}};
	static ta_plan plans[CALLS];
	static ta_result res[CALLS];
	static ta_error errs[CALLS];
	static int64_t at[CALLS];
	static int32_t val[CALLS], old[CALLS];
	ta_apply_call calls[CALLS];
	for (int lanes = 1; lanes >= 0; lanes--) {
		if (!lanes)
			ck_assert_int_eq(setenv("TILEATOM_CPU_LANES", "0", 1), 0);
		ta_placement shard = {TA_PLACE_SHARD, 0, 0, NULL};
		ta_backend *be = multi_new(2, shard);
		ta_error err = {0};
		void *mem = NULL;
		ck_assert_int_eq(ta_backend_tile_alloc_placed(be, &t, 32, NULL, &mem, &err), TA_OK);
		ck_assert(ta_backend_async_attach(be) == (lanes == 1));
		int32_t model[8] = {0}, want[CALLS];
		for (int c = 0; c < CALLS; c++) {
			at[c] = (c * 3) % 8; /* both halves of the tile: both devices */
			val[c] = c + 1;
			want[c] = model[at[c]];
			model[at[c]] += val[c];
			lanes_add(&plans[c], &t, &at[c], &val[c], &old[c]);
			calls[c] = (ta_apply_call){mem, 32, &plans[c], &res[c], &errs[c], TA_OK};
		}
		int done = 0;
		ta_backend_apply_async(be, calls, CALLS, lanes_done, &done);
		if (lanes) {
			ck_assert_int_eq(done, 0); /* queued in the lanes: nothing ran yet */
			ck_assert(!ta_backend_poll_async(be)); /* ran here: nothing is out after */
			ck_assert_int_eq(done, 1);
		} else {
			while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) == 0)
				ck_assert(
				    !ta_backend_poll_async(be)); /* (no lane: nothing to drive) */
		}
		for (int c = 0; c < CALLS; c++) {
			ck_assert_msg(calls[c].status == TA_OK, "%s", errs[c].msg);
			ck_assert_int_eq(old[c], want[c]);
		}
		int32_t back[8];
		ck_assert_int_eq(ta_tu_tile_read(be, mem, 32, &t, back, &err), TA_OK);
		for (int i = 0; i < 8; i++)
			ck_assert_int_eq(back[i], model[i]);
		ta_backend_tile_free(be, mem);
		ta_backend_destroy(be);
	}
	static const char *const bad[] = {"x", "-1", "65", "2 "};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(setenv("TILEATOM_CPU_LANES", bad[i], 1), 0);
		ta_error err = {0};
		ck_assert_ptr_null(ta_cpu_backend_new(2, &err));
		ck_assert_int_eq(err.code, TA_INVALID_ARGUMENT);
		ck_assert_msg(strstr(err.msg, "TILEATOM_CPU_LANES") != NULL, "%s", err.msg);
	}
	ck_assert_int_eq(unsetenv("TILEATOM_CPU_LANES"), 0);
}
END_TEST

static Suite *multi_suite(void)
{
	Suite *s = suite_create("multi");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_sharded_matches_one_device, 0, 3);
	tcase_add_test(tc, test_shard_ranges);
	tcase_add_test(tc, test_place_device_auto);
	tcase_add_test(tc, test_bounds_and_order_across_shards);
	tcase_add_test(tc, test_placement_text);
	tcase_add_test(tc, test_where_text);
	tcase_add_test(tc, test_place_parts);
	tcase_add_test(tc, test_apply_many_across_devices);
	tcase_add_test(tc, test_async_lanes);
	tcase_add_test(tc, test_concurrent_requests_over_parts);
	tcase_add_test(tc, test_merge_out_cpu);
	tcase_add_test(tc, test_histogram_one_scratch);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(multi_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
