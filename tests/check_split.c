/* check_split.c: end-to-end tests of the library's split of atomic requests over the
 * daemon's frame limit (client/tac_split.c) against a real tileatomd started with
 * --max-frame 32K: element-wise (1-D and 2-D, masks, old values, CAS), scatter (dim 0 and
 * dim 1, duplicates, broadcast operands) and indexed with 2-D index arrays, sent in parts
 * with shared memory off, and staged whole in shared memory with it on (the daemon's
 * per-kind request counters tell the two apart; requests returning old values too large
 * for one response are split even then), each with exact tile contents; the reject-whole
 * bounds rule (a bad index in the last part: nothing applied); requests that cannot be
 * split (refused before anything is sent); and a part failing midway, made deterministic
 * by a frame-level proxy between the library and the daemon that renames the tile of one
 * part. The pipelined twins (split submits between ordinary ones, collected as one merged
 * response each; refusals at submit; a refused part and a lost connection through the
 * proxy; staging in shared memory while the library's buffer is free) close the file. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check_client_util.h"
#include "tileatom.h"
#include "tileatom.pb-c.h"

/* The frame limit of every daemon here. */
#define FRAME_LIMIT (32u << 10)

/* Starts a daemon with the small frame limit and connects to it (shm: stage operands in
 * shared memory from 1 byte on; otherwise never, so requests over the limit are split). */
static tileatom_client *start(tcu_daemon *d, bool shm)
{
	static const char *const extra[] = {"--max-frame", "32K", NULL};
	ck_assert(tcu_daemon_start(d, extra));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d->socket, 10000, &c, &e), e);
	ck_assert_uint_eq(tileatom_server_max_frame(c), FRAME_LIMIT);
	tileatom_set_shm_threshold(c, shm ? 1 : 0);
	return c;
}

/* Closes c and stops d, which must exit 0. */
static void stop(tcu_daemon *d, tileatom_client *c)
{
	tileatom_close(c);
	ck_assert_int_eq(tcu_daemon_stop(d, 20000), 0);
	tcu_daemon_cleanup(d);
}

/* Requests of kind ("elementwise", "scatter") the daemon has answered. */
static uint64_t kind_requests(tileatom_client *c, const char *kind)
{
	tileatom_error e = {0, ""};
	tileatom_stats_info st;
	tileatom_kind_stats *ks = NULL;
	size_t nk = 0;
	CK(tileatom_stats_kinds(c, &st, &ks, &nk, &e), e);
	uint64_t n = 0;
	for (size_t i = 0; i < nk; i++)
		if (strcmp(ks[i].kind, kind) == 0)
			n = ks[i].requests;
	tileatom_free(ks);
	return n;
}

/* Reads a whole tile of rank 1 or 2 and shape (es bytes an element) in reads that fit the
 * frame limit (whole rows, or pieces of a row where one row is too large). */
static void read_tile(tileatom_client *c, const char *tile, int rank, const int64_t *shape,
                      size_t es, void *out)
{
	tileatom_error e = {0, ""};
	int64_t width = rank == 2 ? shape[1] : 1;
	int64_t rows = (int64_t)(8192 / ((size_t)width * es));  /* rows per read */
	int64_t cols = rows > 0 ? width : (int64_t)(8192 / es); /* columns per read */
	if (rows == 0)
		rows = 1;
	for (int64_t r0 = 0; r0 < shape[0]; r0 += rows)
		for (int64_t c0 = 0; c0 < width; c0 += cols) {
			tileatom_region part = {rank, {r0, c0}, {0, 0}};
			part.shape[0] = shape[0] - r0 < rows ? shape[0] - r0 : rows;
			part.shape[1] = width - c0 < cols ? width - c0 : cols;
			size_t want =
			    (size_t)(part.shape[0] * (rank == 2 ? part.shape[1] : 1)) * es;
			uint8_t *buf = malloc(want);
			ck_assert_ptr_nonnull(buf);
			size_t nb = 0;
			CK(tileatom_read(c, tile, &part, buf, want, &nb, &e), e);
			ck_assert_uint_eq(nb, want);
			size_t line = (size_t)(rank == 2 ? part.shape[1] : part.shape[0]) * es;
			for (int64_t r = 0; r < (rank == 2 ? part.shape[0] : 1); r++)
				memcpy((uint8_t *)out + ((size_t)((r0 + r) * width + c0)) * es,
				       buf + (size_t)r * line, line);
			free(buf);
		}
}

/* When set, the helpers elementwise_1d, elementwise_2d and scatter_both make their atomic
 * calls pipelined: one submit, then its collect. */
static bool pipelined_calls;

/* Collects the response to the submit id (rc: the submit's status) into *res and, when
 * opts want old values that did not land in old_out already, copies them there. */
static int collect_as_sync(tileatom_client *c, int rc, uint64_t id, const tileatom_op_options *o,
                           tileatom_op_result *res, tileatom_error *e)
{
	if (rc != TILEATOM_OK)
		return rc;
	ck_assert_uint_eq(tileatom_pending(c), 1);
	tileatom_response r;
	rc = tileatom_collect(c, &r, e);
	ck_assert_uint_eq(r.id, id);
	memset(res, 0, sizeof(*res));
	res->applied = r.applied;
	res->skipped = r.skipped;
	res->old_rank = r.rank;
	memcpy(res->old_shape, r.shape, sizeof(res->old_shape));
	res->old_bytes = r.data_bytes;
	if (rc == TILEATOM_OK && o && o->want_old && r.data != o->old_out) {
		ck_assert_uint_le(r.data_bytes, o->old_out_size);
		memcpy(o->old_out, r.data, r.data_bytes);
	}
	return rc;
}

/* tileatom_elementwise, or its pipelined twin when pipelined_calls is set. */
static int elementwise_call(tileatom_client *c, const char *tile, tileatom_op op,
                            const tileatom_region *reg, const tileatom_array *va,
                            const tileatom_array *ca, const tileatom_op_options *o,
                            tileatom_op_result *res, tileatom_error *e)
{
	if (!pipelined_calls)
		return tileatom_elementwise(c, tile, op, reg, va, ca, o, res, e);
	uint64_t id = 0;
	int rc = tileatom_submit_elementwise(c, tile, op, reg, va, ca, o, &id, e);
	return collect_as_sync(c, rc, id, o, res, e);
}

/* tileatom_scatter, or its pipelined twin when pipelined_calls is set. */
static int scatter_call(tileatom_client *c, const char *tile, tileatom_op op,
                        const tileatom_region *reg, int dim, const tileatom_array *ia,
                        const tileatom_array *va, const tileatom_op_options *o,
                        tileatom_op_result *res, tileatom_error *e)
{
	if (!pipelined_calls)
		return tileatom_scatter(c, tile, op, reg, dim, ia, va, o, res, e);
	uint64_t id = 0;
	int rc = tileatom_submit_scatter(c, tile, op, reg, dim, ia, va, o, &id, e);
	return collect_as_sync(c, rc, id, o, res, e);
}

/* Element-wise over a 1-D region [1000, 31000) of a 40000-element int64 tile: a masked add
 * with old values (all zero), then a CAS whose compare is right for even elements, with
 * old values; exact tile contents and counts. Returns the elementwise requests sent. */
static uint64_t elementwise_1d(tileatom_client *c)
{
	tileatom_error e = {0, ""};
	int64_t n = 40000, len = 30000, at = 1000;
	CK(tileatom_create(c, "e1", TILEATOM_INT64, 1, &n, NULL, NULL, &e), e);
	int64_t *v = malloc((size_t)len * 8), *cmp = malloc((size_t)len * 8);
	int64_t *old = malloc((size_t)len * 8), *got = malloc((size_t)n * 8);
	uint8_t *mask = malloc((size_t)len);
	ck_assert(v && cmp && old && got && mask);
	uint64_t on = 0;
	for (int64_t k = 0; k < len; k++) {
		v[k] = 3 * k + 1;
		mask[k] = k % 7 != 0;
		on += mask[k];
		old[k] = -5;
	}
	uint64_t before = kind_requests(c, "elementwise");
	tileatom_region reg = {1, {at}, {len}};
	tileatom_array va = tileatom_vector(TILEATOM_INT64, len, v);
	tileatom_array ma = tileatom_vector(TILEATOM_BOOL, len, mask);
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	o.mask = &ma;
	o.want_old = true;
	o.old_out = old;
	o.old_out_size = (size_t)len * 8;
	tileatom_op_result r;
	CK(elementwise_call(c, "e1", TILEATOM_OP_ADD, &reg, &va, NULL, &o, &r, &e), e);
	ck_assert_uint_eq(r.applied, on);
	ck_assert_uint_eq(r.skipped, 0);
	ck_assert_int_eq(r.old_rank, 1);
	ck_assert_int_eq(r.old_shape[0], len);
	ck_assert_uint_eq(r.old_bytes, (size_t)len * 8);
	for (int64_t k = 0; k < len; k++)
		ck_assert_int_eq(old[k], 0);
	read_tile(c, "e1", 1, &n, 8, got);
	for (int64_t k = 0; k < n; k++) {
		int64_t in = k - at;
		int64_t want = in >= 0 && in < len && mask[in] ? 3 * in + 1 : 0;
		ck_assert_int_eq(got[k], want);
	}
	/* CAS: expected = the value for even elements, a wrong one for odd; desired -k */
	for (int64_t k = 0; k < len; k++) {
		cmp[k] = k % 2 == 0 ? got[at + k] : 12345;
		v[k] = -k;
	}
	tileatom_array ca = tileatom_vector(TILEATOM_INT64, len, cmp);
	o.mask = NULL;
	CK(elementwise_call(c, "e1", TILEATOM_OP_CAS, &reg, &va, &ca, &o, &r, &e), e);
	ck_assert_uint_eq(r.applied, (uint64_t)len);
	for (int64_t k = 0; k < len; k++)
		ck_assert_int_eq(old[k], got[at + k]);
	int64_t *after = malloc((size_t)n * 8);
	ck_assert_ptr_nonnull(after);
	read_tile(c, "e1", 1, &n, 8, after);
	for (int64_t k = 0; k < n; k++) {
		int64_t in = k - at;
		int64_t want = in >= 0 && in < len && in % 2 == 0 ? -in : got[k];
		ck_assert_int_eq(after[k], want);
	}
	uint64_t sent = kind_requests(c, "elementwise") - before;
	CK(tileatom_destroy(c, "e1", &e), e);
	free(after);
	free(v);
	free(cmp);
	free(old);
	free(got);
	free(mask);
	return sent;
}

/* Element-wise over the 2-D region origin [10, 5], shape [250, 90] of a [300, 100] int32
 * tile: an add of r * 1000 + c with a mask broadcast along rows (shape [90]: every part
 * repeats it) and old values, then a CAS with a scalar compare 0 and desired 7 (old
 * values: what each element held). Returns the elementwise requests sent. */
static uint64_t elementwise_2d(tileatom_client *c)
{
	tileatom_error e = {0, ""};
	int64_t shape[2] = {300, 100};
	enum { R = 250, C = 90, O0 = 10, O1 = 5 };
	CK(tileatom_create(c, "e2", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	int32_t *v = malloc(sizeof(int32_t) * R * C), *old = malloc(sizeof(int32_t) * R * C);
	int32_t *got = malloc(sizeof(int32_t) * 300 * 100);
	uint8_t mask[C];
	ck_assert(v && old && got);
	for (int r = 0; r < R; r++)
		for (int k = 0; k < C; k++)
			v[r * C + k] = r * 1000 + k;
	for (int k = 0; k < C; k++)
		mask[k] = k % 3 != 0;
	uint64_t before = kind_requests(c, "elementwise");
	tileatom_region reg = {2, {O0, O1}, {R, C}};
	tileatom_array va = {TILEATOM_INT32, 2, {R, C}, v};
	tileatom_array ma = tileatom_vector(TILEATOM_BOOL, C, mask);
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	o.mask = &ma;
	o.want_old = true;
	o.old_out = old;
	o.old_out_size = sizeof(int32_t) * R * C;
	tileatom_op_result r;
	CK(elementwise_call(c, "e2", TILEATOM_OP_ADD, &reg, &va, NULL, &o, &r, &e), e);
	ck_assert_uint_eq(r.applied, (uint64_t)R * 60);
	ck_assert_int_eq(r.old_rank, 2);
	ck_assert_int_eq(r.old_shape[0], R);
	ck_assert_int_eq(r.old_shape[1], C);
	for (int k = 0; k < R * C; k++)
		ck_assert_int_eq(old[k], 0);
	read_tile(c, "e2", 2, shape, 4, got);
	/* per tile column: inside the region (0 / 1), and its mask bit there */
	uint8_t col_in[100] = {0}, col_on[100] = {0};
	for (int k = 0; k < C; k++) {
		col_in[O1 + k] = 1;
		col_on[O1 + k] = mask[k];
	}
	for (int y = 0; y < 300; y++)
		for (int x = 0; x < 100; x++) {
			int r0 = y - O0, k = x - O1;
			bool on = r0 >= 0 && r0 < R && col_on[x];
			ck_assert_int_eq(got[y * 100 + x], on ? r0 * 1000 + k : 0);
		}
	/* CAS with a broadcast compare 0 and desired 7: the masked-off (zero) elements */
	int32_t zero = 0;
	tileatom_array cz = tileatom_scalar(TILEATOM_INT32, &zero);
	tileatom_array va2 = va;
	for (int k = 0; k < R * C; k++)
		v[k] = 7;
	va2.data = v; /* a full operand, so that the request still exceeds the limit */
	o.mask = NULL;
	CK(elementwise_call(c, "e2", TILEATOM_OP_CAS, &reg, &va2, &cz, &o, &r, &e), e);
	ck_assert_uint_eq(r.applied, (uint64_t)R * C);
	int32_t *after = malloc(sizeof(int32_t) * 300 * 100);
	ck_assert_ptr_nonnull(after);
	read_tile(c, "e2", 2, shape, 4, after);
	for (int y = 0; y < 300; y++)
		for (int x = 0; x < 100; x++) {
			int r0 = y - O0, k = x - O1;
			bool in = r0 >= 0 && r0 < R && col_in[x];
			if (in)
				ck_assert_int_eq(old[r0 * C + k], got[y * 100 + x]);
			ck_assert_int_eq(after[y * 100 + x],
			                 in && !col_on[x] ? 7 : got[y * 100 + x]);
		}
	uint64_t sent = kind_requests(c, "elementwise") - before;
	CK(tileatom_destroy(c, "e2", &e), e);
	free(after);
	free(v);
	free(old);
	free(got);
	return sent;
}

/* Scatter along dim 0 of a [50, 40] int64 tile, region origin [2, 3] shape [45, 35]:
 * indices [600, 30] (duplicates, and -1 / 45 outside the region, skipped), values
 * [600, 30]; then along dim 1 of a [400, 20] int32 tile, region origin [50, 2] shape
 * [300, 16]: indices [280, 24] int64 with duplicates, values [280, 24], a mask [280, 1]
 * cut with the rows (the region moves with each part). Exact contents and counts.
 * Returns the scatter requests sent. */
static uint64_t scatter_both(tileatom_client *c)
{
	tileatom_error e = {0, ""};
	uint64_t before = kind_requests(c, "scatter");
	/* dim 0 */
	int64_t s0[2] = {50, 40};
	enum { N0 = 600, W0 = 30 };
	CK(tileatom_create(c, "s0", TILEATOM_INT64, 2, s0, NULL, NULL, &e), e);
	int64_t *idx = malloc(sizeof(int64_t) * N0 * W0), *val = malloc(sizeof(int64_t) * N0 * W0);
	ck_assert(idx && val);
	int64_t want0[50][40];
	memset(want0, 0, sizeof(want0));
	uint64_t in0 = 0;
	for (int i = 0; i < N0; i++)
		for (int j = 0; j < W0; j++) {
			int64_t x = (int64_t)((i * 31 + j * 7) % 47) - 1; /* -1..45: two outside */
			idx[i * W0 + j] = x;
			val[i * W0 + j] = i + 100 * j;
			if (x >= 0 && x < 45) {
				want0[2 + x][3 + j] += i + 100 * j;
				in0++;
			}
		}
	tileatom_region r0 = {2, {2, 3}, {45, 35}};
	tileatom_array ia = {TILEATOM_INT64, 2, {N0, W0}, idx};
	tileatom_array va = {TILEATOM_INT64, 2, {N0, W0}, val};
	tileatom_op_result r;
	CK(scatter_call(c, "s0", TILEATOM_OP_ADD, &r0, 0, &ia, &va, NULL, &r, &e), e);
	ck_assert_uint_eq(r.applied, in0);
	ck_assert_uint_eq(r.skipped, (uint64_t)N0 * W0 - in0);
	int64_t got0[50 * 40];
	read_tile(c, "s0", 2, s0, 8, got0);
	for (int y = 0; y < 50; y++)
		for (int x = 0; x < 40; x++)
			ck_assert_int_eq(got0[y * 40 + x], want0[y][x]);
	/* dim 1 */
	int64_t s1[2] = {400, 20};
	enum { N1 = 280, W1 = 24 };
	CK(tileatom_create(c, "s1", TILEATOM_INT32, 2, s1, NULL, NULL, &e), e);
	int32_t *val1 = malloc(sizeof(int32_t) * N1 * W1);
	uint8_t mask[N1];
	ck_assert_ptr_nonnull(val1);
	static int32_t want1[400][20];
	memset(want1, 0, sizeof(want1));
	uint64_t in1 = 0;
	for (int i = 0; i < N1; i++) {
		mask[i] = i % 4 != 1;
		for (int j = 0; j < W1; j++) {
			int64_t x = (i * 5 + j * 3) % 16; /* 24 columns onto 16: duplicates */
			idx[i * W1 + j] = x;
			val1[i * W1 + j] = (i * 7 + j) % 5 + 1;
			if (mask[i]) {
				want1[50 + i][2 + x] += (i * 7 + j) % 5 + 1;
				in1++;
			}
		}
	}
	tileatom_region r1 = {2, {50, 2}, {300, 16}};
	tileatom_array ia1 = {TILEATOM_INT64, 2, {N1, W1}, idx};
	tileatom_array va1 = {TILEATOM_INT32, 2, {N1, W1}, val1};
	tileatom_array ma1 = {TILEATOM_BOOL, 2, {N1, 1}, mask};
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	o.mask = &ma1;
	CK(scatter_call(c, "s1", TILEATOM_OP_ADD, &r1, 1, &ia1, &va1, &o, &r, &e), e);
	ck_assert_uint_eq(r.applied, in1);
	ck_assert_uint_eq(r.skipped, 0);
	int32_t *got1 = malloc(sizeof(int32_t) * 400 * 20);
	ck_assert_ptr_nonnull(got1);
	read_tile(c, "s1", 2, s1, 4, got1);
	for (int y = 0; y < 400; y++)
		for (int x = 0; x < 20; x++)
			ck_assert_int_eq(got1[y * 20 + x], want1[y][x]);
	uint64_t sent = kind_requests(c, "scatter") - before;
	CK(tileatom_destroy(c, "s0", &e), e);
	CK(tileatom_destroy(c, "s1", &e), e);
	free(idx);
	free(val);
	free(val1);
	free(got1);
	return sent;
}

START_TEST(test_split_parts)
{
	/* shared memory off: every request goes in several parts */
	tcu_daemon d;
	tileatom_client *c = start(&d, false);
	ck_assert_uint_gt(elementwise_1d(c), 2);
	ck_assert_uint_gt(elementwise_2d(c), 2);
	ck_assert_uint_gt(scatter_both(c), 4);
	stop(&d, c);
}
END_TEST

START_TEST(test_staged_whole)
{
	/* shared memory on: the same requests go whole, staged in the library's buffer */
	tcu_daemon d;
	tileatom_client *c = start(&d, true);
	ck_assert_uint_eq(scatter_both(c), 2);
	/* an element-wise add without old values: one request */
	tileatom_error e = {0, ""};
	int64_t shape[2] = {300, 100};
	CK(tileatom_create(c, "w", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	int32_t *v = malloc(sizeof(int32_t) * 300 * 100),
	        *got = malloc(sizeof(int32_t) * 300 * 100);
	ck_assert(v && got);
	for (int k = 0; k < 300 * 100; k++)
		v[k] = k * 3 - 7;
	uint64_t before = kind_requests(c, "elementwise");
	tileatom_array va = {TILEATOM_INT32, 2, {300, 100}, v};
	tileatom_op_result r;
	CK(tileatom_elementwise(c, "w", TILEATOM_OP_ADD, NULL, &va, NULL, NULL, &r, &e), e);
	ck_assert_uint_eq(r.applied, 300 * 100);
	ck_assert_uint_eq(kind_requests(c, "elementwise") - before, 1);
	read_tile(c, "w", 2, shape, 4, got);
	for (int k = 0; k < 300 * 100; k++)
		ck_assert_int_eq(got[k], k * 3 - 7);
	free(v);
	free(got);
	/* old values (want_old, CAS) would not fit one response frame: split even so */
	ck_assert_uint_gt(elementwise_1d(c), 2);
	ck_assert_uint_gt(elementwise_2d(c), 2);
	stop(&d, c);
}
END_TEST

START_TEST(test_reject_whole)
{
	/* check_bounds off: a scatter (dim 1, moving region) whose only bad index is the last
	 * element of the last part applies nothing; masked off, the rest applies */
	tcu_daemon d;
	tileatom_client *c = start(&d, false);
	tileatom_error e = {0, ""};
	int64_t shape[2] = {300, 20};
	CK(tileatom_create(c, "t", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	int32_t *init = malloc(sizeof(int32_t) * 300 * 20);
	ck_assert_ptr_nonnull(init);
	for (int k = 0; k < 300 * 20; k++)
		init[k] = k;
	for (int r0 = 0; r0 < 300; r0 += 100) {
		tileatom_region part = {2, {r0, 0}, {100, 20}};
		tileatom_array pa = {TILEATOM_INT32, 2, {100, 20}, init + r0 * 20};
		CK(tileatom_write(c, "t", &part, &pa, &e), e);
	}
	enum { N = 290, W = 40 };
	int32_t *idx = malloc(sizeof(int32_t) * N * W), *val = malloc(sizeof(int32_t) * N * W);
	ck_assert(idx && val);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < W; j++) {
			idx[i * W + j] = (i + j) % 18;
			val[i * W + j] = 1;
		}
	idx[N * W - 1] = 18; /* the region is 18 wide along dim 1 */
	tileatom_region reg = {2, {5, 1}, {295, 18}};
	tileatom_array ia = {TILEATOM_INT32, 2, {N, W}, idx};
	tileatom_array va = {TILEATOM_INT32, 2, {N, W}, val};
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	o.check_bounds = false;
	tileatom_op_result r;
	uint64_t before = kind_requests(c, "scatter");
	ck_assert_int_eq(tileatom_scatter(c, "t", TILEATOM_OP_ADD, &reg, 1, &ia, &va, &o, &r, &e),
	                 TILEATOM_E_OUT_OF_RANGE);
	ck_assert_msg(strstr(e.message, "tile 't', a request over the frame limit: index 18 at "
	                                "element 11599 is outside [0, 18) along axis 1"),
	              "message: %s", e.message);
	ck_assert_msg(strstr(e.message, "nothing was applied"), "message: %s", e.message);
	ck_assert_uint_eq(kind_requests(c, "scatter"), before);
	int32_t *got = malloc(sizeof(int32_t) * 300 * 20);
	ck_assert_ptr_nonnull(got);
	read_tile(c, "t", 2, shape, 4, got);
	ck_assert_int_eq(memcmp(got, init, sizeof(int32_t) * 300 * 20), 0);
	/* the bad element masked off: not checked, the rest applies */
	uint8_t *mask = malloc((size_t)N * W);
	ck_assert_ptr_nonnull(mask);
	memset(mask, 1, (size_t)N * W);
	mask[N * W - 1] = 0;
	tileatom_array ma = {TILEATOM_BOOL, 2, {N, W}, mask};
	o.mask = &ma;
	CK(tileatom_scatter(c, "t", TILEATOM_OP_ADD, &reg, 1, &ia, &va, &o, &r, &e), e);
	ck_assert_uint_eq(r.applied, (uint64_t)N * W - 1);
	ck_assert_uint_gt(kind_requests(c, "scatter") - before, 2);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < W; j++)
			if (i * W + j != N * W - 1)
				init[(5 + i) * 20 + 1 + idx[i * W + j]] += 1;
	read_tile(c, "t", 2, shape, 4, got);
	for (int k = 0; k < 300 * 20; k++)
		ck_assert_int_eq(got[k], init[k]);
	free(mask);
	free(got);
	free(idx);
	free(val);
	free(init);
	stop(&d, c);
}
END_TEST

START_TEST(test_cannot_split)
{
	/* refused before anything is sent, with the reason; the tile stays untouched */
	tcu_daemon d;
	tileatom_client *c = start(&d, false);
	tileatom_error e = {0, ""};
	int64_t shape[2] = {4, 20000};
	CK(tileatom_create(c, "u", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	int32_t *v = calloc(4 * 20000, sizeof(int32_t));
	ck_assert_ptr_nonnull(v);
	for (int k = 0; k < 4 * 20000; k++)
		v[k] = 1;
	uint64_t before = kind_requests(c, "elementwise") + kind_requests(c, "scatter");
	/* one row of 80000 bytes does not fit a 32 KiB frame */
	tileatom_array va = {TILEATOM_INT32, 2, {4, 20000}, v};
	ck_assert_int_eq(
	    tileatom_elementwise(c, "u", TILEATOM_OP_ADD, NULL, &va, NULL, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_str_eq(e.message,
	                 "the request exceeds the daemon's frame limit of 32768 bytes and cannot "
	                 "be split: one row along the first axis of its element shape takes "
	                 "80000 bytes and a part has room for 31744; nothing was applied");
	/* a region reaching past the tile: parts would land outside it */
	tileatom_region past = {2, {2, 0}, {3, 10000}};
	tileatom_array vb = {TILEATOM_INT32, 2, {3, 10000}, v};
	ck_assert_int_eq(
	    tileatom_elementwise(c, "u", TILEATOM_OP_ADD, &past, &vb, NULL, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "cannot be split: region [2, 5) along axis 0 is outside "
	                                "the tile extent 4"),
	              "message: %s", e.message);
	/* scatter along dim 1 with more index rows than the region has */
	tileatom_array ib = {TILEATOM_INT32, 2, {8, 5000}, v};
	ck_assert_int_eq(
	    tileatom_scatter(c, "u", TILEATOM_OP_ADD, NULL, 1, &ib, &ib, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "scatter indices extent 8 along axis 0 exceeds the region "
	                                "extent 4"),
	              "message: %s", e.message);
	/* values that do not broadcast to the region */
	tileatom_region two = {2, {0, 0}, {2, 20000}};
	tileatom_array vc = {TILEATOM_INT32, 2, {3, 20000}, v};
	ck_assert_int_eq(
	    tileatom_elementwise(c, "u", TILEATOM_OP_ADD, &two, &vc, NULL, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "values shape (3, 20000) does not broadcast to the "
	                                "element shape (2, 20000)"),
	              "message: %s", e.message);
	ck_assert_uint_eq(kind_requests(c, "elementwise") + kind_requests(c, "scatter"), before);
	int32_t *got = malloc(sizeof(int32_t) * 4 * 20000);
	ck_assert_ptr_nonnull(got);
	read_tile(c, "u", 2, shape, 4, got);
	for (int k = 0; k < 4 * 20000; k++)
		ck_assert_int_eq(got[k], 0);
	free(got);
	free(v);
	stop(&d, c);
}
END_TEST

START_TEST(test_indexed_nd)
{
	/* indexed with 2-D index arrays broadcast together: rows [400, 1] (cut with the rows,
	 * extent 1 along axis 1) and columns [400, 30], values [400, 30] with duplicates */
	tcu_daemon d;
	tileatom_client *c = start(&d, false);
	tileatom_error e = {0, ""};
	int64_t shape[2] = {50, 60};
	CK(tileatom_create(c, "x", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	enum { N = 400, W = 30 };
	int64_t rows[N], *cols = malloc(sizeof(int64_t) * N * W);
	int32_t *val = malloc(sizeof(int32_t) * N * W);
	ck_assert(cols && val);
	static int32_t want[50 * 60];
	memset(want, 0, sizeof(want));
	for (int i = 0; i < N; i++) {
		rows[i] = (i * 13) % 50;
		for (int j = 0; j < W; j++) {
			cols[i * W + j] = (i + j * 11) % 60;
			val[i * W + j] = i - j;
			want[rows[i] * 60 + cols[i * W + j]] += i - j;
		}
	}
	tileatom_array ix[2] = {{TILEATOM_INT64, 2, {N, 1}, rows},
	                        {TILEATOM_INT64, 2, {N, W}, cols}};
	tileatom_array va = {TILEATOM_INT32, 2, {N, W}, val};
	uint64_t before = kind_requests(c, "indexed");
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	o.check_bounds = false;
	tileatom_op_result r;
	CK(tileatom_indexed(c, "x", TILEATOM_OP_ADD, NULL, 2, ix, false, &va, NULL, &o, &r, &e), e);
	ck_assert_uint_eq(r.applied, (uint64_t)N * W);
	ck_assert_uint_gt(kind_requests(c, "indexed") - before, 2);
	int32_t got[50 * 60];
	read_tile(c, "x", 2, shape, 4, got);
	for (int k = 0; k < 50 * 60; k++)
		ck_assert_int_eq(got[k], want[k]);
	free(cols);
	free(val);
	stop(&d, c);
}
END_TEST

/* ---- a frame-level proxy that fails one part ------------------------------------------ */

/* A proxy between one client and the daemon, forwarding request and response frames one
 * for one; it renames the tile of the fail_at-th element-wise request to one that does not
 * exist, and records the region rows of each element-wise request. */
typedef struct proxy {
	char path[340];       /* the socket the client connects to */
	const char *upstream; /* the daemon's socket */
	int listen_fd;        /* the listening socket */
	int fail_at;          /* 1-based element-wise request to rename (0: none) */
	int close_at;         /* 1-based element-wise request at which both sides are closed
	                         instead (0: none): the connection is lost */
	int seen;             /* element-wise requests seen */
	int64_t rows[64];     /* region rows of each of them */
	pthread_t thread;     /* the forwarding thread */
	int lag_ms;           /* > 0: a second thread relays the responses, each lag_ms late,
	                         while requests flow on */
	int cfd, dfd;         /* the client's and the daemon's connection */
	pthread_mutex_t lock; /* guards the counts below (lagging proxy) */
	int forwarded;        /* requests forwarded to the daemon (lagging proxy) */
	int relayed;          /* responses relayed to the client (lagging proxy) */
	int max_unanswered;   /* most requests forwarded and not yet answered (lagging proxy) */
} proxy;

/* Reads exactly n bytes; false on EOF or error. */
static bool read_full(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

/* Writes exactly n bytes; false on error. */
static bool write_full(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Reads one frame (4-byte little-endian length, payload) into a malloc'd buffer. */
static uint8_t *read_frame(int fd, uint32_t *len)
{
	uint8_t h[4];
	if (!read_full(fd, h, 4))
		return NULL;
	*len = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
	uint8_t *p = malloc(*len ? *len : 1);
	if (p && !read_full(fd, p, *len)) {
		free(p);
		return NULL;
	}
	return p;
}

/* Writes one frame. */
static bool write_frame(int fd, const uint8_t *p, uint32_t len)
{
	uint8_t h[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
	                (uint8_t)(len >> 24)};
	return write_full(fd, h, 4) && write_full(fd, p, len);
}

/* Connects to a Unix socket path; -1 on failure. */
static int connect_unix(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Rewrites an element-wise request frame as the proxy says; returns the frame to send
 * (req itself, or a malloc'd one of *len bytes that replaces it). */
static uint8_t *proxy_rewrite(proxy *px, uint8_t *req, uint32_t *len)
{
	Tileatom__Request *m = tileatom__request__unpack(NULL, *len, req);
	ck_assert_ptr_nonnull(m);
	if (m->body_case != TILEATOM__REQUEST__BODY_ELEMENTWISE) {
		tileatom__request__free_unpacked(m, NULL);
		return req;
	}
	int k = px->seen++;
	ck_assert_int_lt(k, 64);
	ck_assert_ptr_nonnull(m->elementwise->region);
	px->rows[k] = m->elementwise->region->shape[0];
	if (k + 1 != px->fail_at) {
		tileatom__request__free_unpacked(m, NULL);
		return req;
	}
	char *name = m->elementwise->tile;
	m->elementwise->tile = (char *)"no-such-tile";
	size_t n = tileatom__request__get_packed_size(m);
	uint8_t *out = malloc(n);
	ck_assert_ptr_nonnull(out);
	tileatom__request__pack(m, out);
	m->elementwise->tile = name;
	tileatom__request__free_unpacked(m, NULL);
	free(req);
	*len = (uint32_t)n;
	return out;
}

/* The relay thread of a lagging proxy: each response from the daemon goes to the client
 * lag_ms after it arrived, until the daemon closes. */
static void *proxy_relay(void *arg)
{
	proxy *px = arg;
	for (;;) {
		uint32_t len;
		uint8_t *resp = read_frame(px->dfd, &len);
		if (!resp)
			break;
		usleep((useconds_t)px->lag_ms * 1000);
		/* counted before it is written: the client cannot have it earlier, so
		 * forwarded - relayed never exceeds what the client has unanswered */
		pthread_mutex_lock(&px->lock);
		px->relayed++;
		pthread_mutex_unlock(&px->lock);
		bool ok = write_frame(px->cfd, resp, len);
		free(resp);
		if (!ok)
			break;
	}
	return NULL;
}

/* A lagging proxy's forwarding loop: requests go on at once (counted) while proxy_relay
 * holds each response; on the client's EOF the daemon gets ours, and its last responses
 * are relayed before the relay thread ends. */
static void proxy_lagging(proxy *px)
{
	pthread_t relay;
	ck_assert_int_eq(pthread_create(&relay, NULL, proxy_relay, px), 0);
	for (;;) {
		uint32_t len;
		uint8_t *req = read_frame(px->cfd, &len);
		if (!req)
			break;
		ck_assert(write_frame(px->dfd, req, len));
		free(req);
		pthread_mutex_lock(&px->lock);
		px->forwarded++;
		if (px->forwarded - px->relayed > px->max_unanswered)
			px->max_unanswered = px->forwarded - px->relayed;
		pthread_mutex_unlock(&px->lock);
	}
	shutdown(px->dfd, SHUT_WR);
	ck_assert_int_eq(pthread_join(relay, NULL), 0);
}

/* The proxy thread: one client, requests and responses one for one (or lagging), until
 * the client closes. */
static void *proxy_main(void *arg)
{
	proxy *px = arg;
	int cfd = accept(px->listen_fd, NULL, NULL);
	ck_assert_int_ge(cfd, 0);
	int dfd = connect_unix(px->upstream);
	ck_assert_int_ge(dfd, 0);
	px->cfd = cfd;
	px->dfd = dfd;
	if (px->lag_ms > 0) {
		proxy_lagging(px);
		close(cfd);
		close(dfd);
		return NULL;
	}
	for (;;) {
		uint32_t len;
		uint8_t *req = read_frame(cfd, &len);
		if (!req)
			break;
		int seen = px->seen;
		req = proxy_rewrite(px, req, &len);
		if (px->close_at && px->seen != seen && px->seen == px->close_at) {
			free(req);
			break;
		}
		ck_assert(write_frame(dfd, req, len));
		free(req);
		uint8_t *resp = read_frame(dfd, &len);
		ck_assert_ptr_nonnull(resp);
		ck_assert(write_frame(cfd, resp, len));
		free(resp);
	}
	close(cfd);
	close(dfd);
	return NULL;
}

/* Starts a proxy to daemon d failing element-wise request fail_at (0: none), or closing
 * both sides at element-wise request close_at (0: none), or with lag_ms > 0 a lagging
 * one. */
static void proxy_open(proxy *px, const tcu_daemon *d, int fail_at, int close_at, int lag_ms)
{
	memset(px, 0, sizeof(*px));
	snprintf(px->path, sizeof(px->path), "%s/proxy.sock", d->dir);
	px->upstream = d->socket;
	px->fail_at = fail_at;
	px->close_at = close_at;
	px->lag_ms = lag_ms;
	ck_assert_int_eq(pthread_mutex_init(&px->lock, NULL), 0);
	px->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(px->listen_fd, 0);
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(px->path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, px->path, strlen(px->path) + 1);
	unlink(px->path);
	ck_assert_int_eq(bind(px->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(px->listen_fd, 1), 0);
	ck_assert_int_eq(pthread_create(&px->thread, NULL, proxy_main, px), 0);
}

/* Starts a proxy to daemon d failing element-wise request fail_at (0: none). */
static void proxy_start(proxy *px, const tcu_daemon *d, int fail_at)
{
	proxy_open(px, d, fail_at, 0, 0);
}

/* Waits for the proxy thread (after its client closed) and removes its socket. */
static void proxy_stop(proxy *px)
{
	ck_assert_int_eq(pthread_join(px->thread, NULL), 0);
	close(px->listen_fd);
	unlink(px->path);
	pthread_mutex_destroy(&px->lock);
}

/* Columns of the tile "f" of test_part_fails_midway: 640-byte rows, 49 to a part. */
#define FW 160

/* One element-wise add of 1 over the whole [200, FW] int32 tile "f" through a proxy
 * failing part fail_at (0: none); returns the call's status, err and the proxy's record. */
static int add_through_proxy(const tcu_daemon *d, int fail_at, proxy *px, tileatom_error *e)
{
	proxy_start(px, d, fail_at);
	tileatom_client *c = NULL;
	CK(tileatom_connect(px->path, 10000, &c, e), *e);
	tileatom_set_shm_threshold(c, 0);
	int32_t *ones = malloc(sizeof(int32_t) * 200 * FW);
	ck_assert_ptr_nonnull(ones);
	for (int k = 0; k < 200 * FW; k++)
		ones[k] = 1;
	tileatom_array va = {TILEATOM_INT32, 2, {200, FW}, ones};
	tileatom_op_result r;
	int rc = tileatom_elementwise(c, "f", TILEATOM_OP_ADD, NULL, &va, NULL, NULL, &r, e);
	if (rc == TILEATOM_OK)
		ck_assert_uint_eq(r.applied, 200 * FW);
	tileatom_close(c);
	proxy_stop(px);
	free(ones);
	return rc;
}

START_TEST(test_part_fails_midway)
{
	/* part 2 fails (its tile renamed on the way): the call returns the daemon's status with
	 * a message naming the part and the rows applied; exactly part 1's rows changed */
	tcu_daemon d;
	tileatom_client *c = start(&d, false);
	tileatom_error e = {0, ""};
	int64_t shape[2] = {200, FW};
	CK(tileatom_create(c, "f", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	proxy px;
	CK(add_through_proxy(&d, 0, &px, &e), e);
	int nparts = px.seen;
	int64_t rows = px.rows[0];
	ck_assert_int_ge(nparts, 3);
	int64_t total = 0;
	for (int i = 0; i < nparts; i++) {
		ck_assert_int_eq(px.rows[i], i + 1 < nparts ? rows : 200 - rows * (nparts - 1));
		total += px.rows[i];
	}
	ck_assert_int_eq(total, 200);
	int32_t *got = malloc(sizeof(int32_t) * 200 * FW);
	ck_assert_ptr_nonnull(got);
	read_tile(c, "f", 2, shape, 4, got);
	for (int k = 0; k < 200 * FW; k++)
		ck_assert_int_eq(got[k], 1);
	ck_assert_int_eq(add_through_proxy(&d, 2, &px, &e), TILEATOM_E_NOT_FOUND);
	ck_assert_int_eq(px.seen, 2); /* nothing after the failed part */
	char want[200];
	snprintf(want, sizeof(want),
	         "part 2 of %d (rows %lld..%lld) of a split request failed; rows 0..%lld were "
	         "applied: ",
	         nparts, (long long)rows, (long long)(2 * rows - 1), (long long)(rows - 1));
	ck_assert_msg(strncmp(e.message, want, strlen(want)) == 0, "message: %s", e.message);
	ck_assert_msg(strstr(e.message, "no-such-tile"), "message: %s", e.message);
	read_tile(c, "f", 2, shape, 4, got);
	for (int y = 0; y < 200; y++)
		for (int x = 0; x < FW; x++)
			ck_assert_int_eq(got[y * FW + x], y < rows ? 2 : 1);
	free(got);
	stop(&d, c);
}
END_TEST

/* ---- pipelined split submits ----------------------------------------------------------- */

/* Collects the next response, which must answer id, a request of kind, with TILEATOM_OK. */
static void collect_ok(tileatom_client *c, uint64_t id, tileatom_request_kind kind,
                       tileatom_response *r)
{
	tileatom_error e = {0, ""};
	CK(tileatom_collect(c, r, &e), e);
	ck_assert_uint_eq(r->id, id);
	ck_assert_int_eq(r->kind, kind);
	ck_assert_int_eq(r->status, TILEATOM_OK);
}

START_TEST(test_pipelined_helpers)
{
	/* the split tests' element-wise (masks, old values, CAS) and scatter (both dims)
	 * requests as pipelined submits, split (shared memory off) and staged (on) */
	for (int shm = 0; shm < 2; shm++) {
		tcu_daemon d;
		tileatom_client *c = start(&d, shm == 1);
		pipelined_calls = true;
		ck_assert_uint_gt(elementwise_1d(c), 2);
		ck_assert_uint_gt(elementwise_2d(c), 2);
		if (shm)
			ck_assert_uint_eq(scatter_both(c), 2);
		else
			ck_assert_uint_gt(scatter_both(c), 4);
		pipelined_calls = false;
		stop(&d, c);
	}
}
END_TEST

START_TEST(test_pipelined_split)
{
	/* split submits between ordinary ones: each is collected as one response, in order
	 * (an element-wise masked add with old values, an indexed flat add), exact contents */
	tcu_daemon d;
	tileatom_client *c = start(&d, false);
	tileatom_error e = {0, ""};
	enum { N = 40000, LEN = 30000, AT = 1000, NK = 20000 };
	int64_t n = N;
	CK(tileatom_create(c, "p", TILEATOM_INT64, 1, &n, NULL, NULL, &e), e);
	int64_t *v = malloc(sizeof(int64_t) * LEN), *old = malloc(sizeof(int64_t) * LEN);
	int64_t *keys = malloc(sizeof(int64_t) * NK), *want = calloc(N, sizeof(int64_t));
	int64_t *got = malloc(sizeof(int64_t) * N);
	uint8_t *mask = malloc(LEN);
	ck_assert(v && old && keys && want && got && mask);
	uint64_t on = 0;
	for (int k = 0; k < LEN; k++) {
		v[k] = 3 * k + 1;
		mask[k] = k % 7 != 0;
		on += mask[k];
		old[k] = -9;
	}
	for (int k = 0; k < NK; k++)
		keys[k] = ((int64_t)k * 7919) % N;
	uint64_t ew_before = kind_requests(c, "elementwise");
	uint64_t ix_before = kind_requests(c, "indexed");
	uint64_t id_ping, id_small, id_split, id_read, id_idx, id_ping2;
	CK(tileatom_submit_ping(c, &id_ping, &e), e);
	int64_t five = 5, one = 1;
	tileatom_region small = {1, {AT}, {100}};
	tileatom_array five_a = tileatom_scalar(TILEATOM_INT64, &five);
	CK(tileatom_submit_elementwise(c, "p", TILEATOM_OP_ADD, &small, &five_a, NULL, NULL,
	                               &id_small, &e),
	   e);
	tileatom_region reg = {1, {AT}, {LEN}};
	tileatom_array va = tileatom_vector(TILEATOM_INT64, LEN, v);
	tileatom_array ma = tileatom_vector(TILEATOM_BOOL, LEN, mask);
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	o.mask = &ma;
	o.want_old = true;
	o.old_out = old;
	o.old_out_size = sizeof(int64_t) * LEN;
	CK(tileatom_submit_elementwise(c, "p", TILEATOM_OP_ADD, &reg, &va, NULL, &o, &id_split, &e),
	   e);
	tileatom_region rd = {1, {AT}, {8}};
	CK(tileatom_submit_read(c, "p", &rd, &id_read, &e), e);
	tileatom_array ka = tileatom_vector(TILEATOM_INT64, NK, keys);
	tileatom_array one_a = tileatom_scalar(TILEATOM_INT64, &one);
	CK(tileatom_submit_indexed(c, "p", TILEATOM_OP_ADD, NULL, 1, &ka, true, &one_a, NULL, NULL,
	                           &id_idx, &e),
	   e);
	CK(tileatom_submit_ping(c, &id_ping2, &e), e);
	ck_assert_uint_eq(tileatom_pending(c), 6);
	ck_assert(id_ping < id_small && id_small < id_split && id_split < id_read &&
	          id_read < id_idx && id_idx < id_ping2);
	/* a synchronous call waits for the collects */
	ck_assert_int_eq(tileatom_ping(c, &e), TILEATOM_E_STATE);
	ck_assert_msg(strstr(e.message, "6 pipelined responses"), "message: %s", e.message);

	tileatom_response r;
	collect_ok(c, id_ping, TILEATOM_REQ_PING, &r);
	collect_ok(c, id_small, TILEATOM_REQ_ELEMENTWISE, &r);
	ck_assert_uint_eq(r.applied, 100);
	collect_ok(c, id_split, TILEATOM_REQ_ELEMENTWISE, &r);
	ck_assert_uint_eq(r.applied, on);
	ck_assert_uint_eq(r.skipped, 0);
	ck_assert_int_eq(r.dtype, TILEATOM_INT64);
	ck_assert_int_eq(r.rank, 1);
	ck_assert_int_eq(r.shape[0], LEN);
	ck_assert_ptr_eq(r.data, old);
	ck_assert_uint_eq(r.data_bytes, sizeof(int64_t) * LEN);
	for (int k = 0; k < LEN; k++) /* the small add ran first; masked off: 0 */
		ck_assert_int_eq(old[k], k < 100 && mask[k] ? 5 : 0);
	ck_assert_uint_eq(tileatom_pending(c), 3);
	collect_ok(c, id_read, TILEATOM_REQ_READ, &r);
	ck_assert_uint_eq(r.data_bytes, 8 * sizeof(int64_t));
	for (int k = 0; k < 8; k++) {
		int64_t x;
		memcpy(&x, (const uint8_t *)r.data + 8 * k, 8);
		ck_assert_int_eq(x, 5 + (mask[k] ? 3 * k + 1 : 0));
	}
	collect_ok(c, id_idx, TILEATOM_REQ_INDEXED, &r);
	ck_assert_uint_eq(r.applied, NK);
	ck_assert_uint_eq(r.data_bytes, 0);
	collect_ok(c, id_ping2, TILEATOM_REQ_PING, &r);
	ck_assert_uint_eq(tileatom_pending(c), 0);
	ck_assert_int_eq(tileatom_collect(c, &r, &e), TILEATOM_E_STATE);
	/* more parts than may be unanswered at once: the submit reads responses as it goes,
	 * and they wait for the collects */
	enum { NB = 1 << 20 };
	int32_t *big = malloc(sizeof(int32_t) * NB);
	ck_assert_ptr_nonnull(big);
	for (int k = 0; k < NB; k++)
		big[k] = (int32_t)(((int64_t)k * 7919) % N);
	tileatom_array ba = tileatom_vector(TILEATOM_INT32, NB, big);
	CK(tileatom_submit_ping(c, &id_ping, &e), e);
	CK(tileatom_submit_indexed(c, "p", TILEATOM_OP_ADD, NULL, 1, &ba, true, &one_a, NULL, NULL,
	                           &id_idx, &e),
	   e);
	CK(tileatom_submit_ping(c, &id_ping2, &e), e);
	ck_assert_uint_eq(tileatom_pending(c), 3);
	collect_ok(c, id_ping, TILEATOM_REQ_PING, &r);
	collect_ok(c, id_idx, TILEATOM_REQ_INDEXED, &r);
	ck_assert_uint_eq(r.applied, NB);
	collect_ok(c, id_ping2, TILEATOM_REQ_PING, &r);
	for (int k = 0; k < NB; k++)
		want[big[k]] += 1;
	free(big);
	ck_assert_uint_gt(kind_requests(c, "elementwise") - ew_before, 3);
	ck_assert_uint_gt(kind_requests(c, "indexed") - ix_before, 2 * 64);
	for (int k = 0; k < 100; k++)
		want[AT + k] += 5;
	for (int k = 0; k < LEN; k++)
		want[AT + k] += mask[k] ? 3 * k + 1 : 0;
	for (int k = 0; k < NK; k++)
		want[keys[k]] += 1;
	read_tile(c, "p", 1, &n, 8, got);
	for (int k = 0; k < N; k++)
		ck_assert_int_eq(got[k], want[k]);

	/* refused at submit, nothing queued, the connection usable: a bad index with
	 * check_bounds off (in the last element), want_old without old_out, old_out too
	 * small, a tile that does not exist */
	CK(tileatom_submit_ping(c, &id_ping, &e), e);
	keys[NK - 1] = N;
	o.mask = NULL;
	o.want_old = false;
	o.check_bounds = false;
	uint64_t id = 99;
	ck_assert_int_eq(tileatom_submit_indexed(c, "p", TILEATOM_OP_ADD, NULL, 1, &ka, true,
	                                         &one_a, NULL, &o, &id, &e),
	                 TILEATOM_E_OUT_OF_RANGE);
	ck_assert_uint_eq(id, 0);
	ck_assert_msg(strstr(e.message, "flat offset 40000 at element 19999 is outside [0, 40000)"),
	              "message: %s", e.message);
	ck_assert_msg(strstr(e.message, "nothing was applied"), "message: %s", e.message);
	o.check_bounds = true;
	o.want_old = true;
	o.old_out = NULL;
	ck_assert_int_eq(
	    tileatom_submit_elementwise(c, "p", TILEATOM_OP_ADD, &reg, &va, NULL, &o, &id, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "opts->old_out, which is NULL"), "message: %s", e.message);
	o.old_out = old;
	o.old_out_size = sizeof(int64_t) * LEN - 1;
	ck_assert_int_eq(
	    tileatom_submit_elementwise(c, "p", TILEATOM_OP_ADD, &reg, &va, NULL, &o, &id, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "the old values need 240000"), "message: %s", e.message);
	ck_assert_int_eq(
	    tileatom_submit_elementwise(c, "nope", TILEATOM_OP_ADD, &reg, &va, NULL, NULL, &id, &e),
	    TILEATOM_E_NOT_FOUND);
	ck_assert_uint_eq(tileatom_pending(c), 1);
	collect_ok(c, id_ping, TILEATOM_REQ_PING, &r);
	read_tile(c, "p", 1, &n, 8, got);
	for (int k = 0; k < N; k++)
		ck_assert_int_eq(got[k], want[k]);
	free(v);
	free(old);
	free(keys);
	free(want);
	free(got);
	free(mask);
	stop(&d, c);
}
END_TEST

START_TEST(test_pipelined_staged)
{
	/* shared memory on: a pipelined submit over the limit goes whole, staged in the
	 * library's buffer, while that buffer is free; one submitted while the first is not
	 * collected yet is split; once collected, the buffer serves again (also behind a
	 * pending request, being large enough already) */
	tcu_daemon d;
	tileatom_client *c = start(&d, true);
	tileatom_error e = {0, ""};
	int64_t shape[2] = {300, 100};
	CK(tileatom_create(c, "w", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	int32_t *v = malloc(sizeof(int32_t) * 300 * 100),
	        *got = malloc(sizeof(int32_t) * 300 * 100);
	ck_assert(v && got);
	for (int k = 0; k < 300 * 100; k++)
		v[k] = k * 3 - 7;
	tileatom_array va = {TILEATOM_INT32, 2, {300, 100}, v};
	uint64_t before = kind_requests(c, "elementwise");
	uint64_t id1, id2, id_ping, id3;
	CK(tileatom_submit_elementwise(c, "w", TILEATOM_OP_ADD, NULL, &va, NULL, NULL, &id1, &e),
	   e);
	for (int k = 0; k < 300 * 100; k++) /* the operands were copied: reusable at once */
		v[k] = 1;
	CK(tileatom_submit_elementwise(c, "w", TILEATOM_OP_ADD, NULL, &va, NULL, NULL, &id2, &e),
	   e);
	ck_assert_uint_eq(tileatom_pending(c), 2);
	tileatom_response r;
	collect_ok(c, id1, TILEATOM_REQ_ELEMENTWISE, &r);
	ck_assert_uint_eq(r.applied, 300 * 100);
	collect_ok(c, id2, TILEATOM_REQ_ELEMENTWISE, &r);
	ck_assert_uint_eq(r.applied, 300 * 100);
	ck_assert_uint_ge(kind_requests(c, "elementwise") - before, 1 + 4);
	before = kind_requests(c, "elementwise");
	for (int k = 0; k < 300 * 100; k++)
		v[k] = 2;
	CK(tileatom_submit_ping(c, &id_ping, &e), e);
	CK(tileatom_submit_elementwise(c, "w", TILEATOM_OP_ADD, NULL, &va, NULL, NULL, &id3, &e),
	   e);
	collect_ok(c, id_ping, TILEATOM_REQ_PING, &r);
	collect_ok(c, id3, TILEATOM_REQ_ELEMENTWISE, &r);
	ck_assert_uint_eq(r.applied, 300 * 100);
	ck_assert_uint_eq(kind_requests(c, "elementwise") - before, 1);
	read_tile(c, "w", 2, shape, 4, got);
	for (int k = 0; k < 300 * 100; k++)
		ck_assert_int_eq(got[k], k * 3 - 7 + 1 + 2);
	free(v);
	free(got);
	stop(&d, c);
}
END_TEST

/* Through a proxy failing (fail_at) or cutting (close_at) one element-wise request: a ping,
 * then a pipelined add of 1 over the whole [200, FW] int32 tile "f", then a ping; returns
 * the status of the submit (and then of the add's collect), the add's response in *out. */
static int padd_through_proxy(const tcu_daemon *d, int fail_at, int close_at, proxy *px,
                              tileatom_response *out, tileatom_error *e)
{
	memset(out, 0, sizeof(*out));
	proxy_open(px, d, fail_at, close_at, 0);
	tileatom_client *c = NULL;
	CK(tileatom_connect(px->path, 10000, &c, e), *e);
	tileatom_set_shm_threshold(c, 0);
	int32_t *ones = malloc(sizeof(int32_t) * 200 * FW);
	ck_assert_ptr_nonnull(ones);
	for (int k = 0; k < 200 * FW; k++)
		ones[k] = 1;
	tileatom_array va = {TILEATOM_INT32, 2, {200, FW}, ones};
	uint64_t id_ping, id, id_ping2;
	tileatom_response r;
	CK(tileatom_submit_ping(c, &id_ping, e), *e);
	int rc =
	    tileatom_submit_elementwise(c, "f", TILEATOM_OP_ADD, NULL, &va, NULL, NULL, &id, e);
	if (rc == TILEATOM_OK && close_at) {
		/* the loss shows at the first call that writes or reads past it: this ping's
		 * submit, the first collect (writing it), or the collect of the parts */
		tileatom_error e1 = {0, ""};
		(void)tileatom_submit_ping(c, &id_ping2, &e1);
		rc = tileatom_collect(c, &r, &e1);
		if (rc == TILEATOM_OK) {
			ck_assert_uint_eq(r.id, id_ping);
			rc = tileatom_collect(c, out, e);
			ck_assert_uint_eq(out->id, id);
			ck_assert_int_eq(out->status, rc);
		} else {
			*e = e1;
		}
	} else if (rc == TILEATOM_OK) {
		CK(tileatom_submit_ping(c, &id_ping2, e), *e);
		ck_assert_uint_eq(tileatom_pending(c), 3);
		collect_ok(c, id_ping, TILEATOM_REQ_PING, &r);
		rc = tileatom_collect(c, out, e);
		ck_assert_uint_eq(out->id, id);
		ck_assert_int_eq(out->kind, TILEATOM_REQ_ELEMENTWISE);
		ck_assert_int_eq(out->status, rc);
		collect_ok(c, id_ping2, TILEATOM_REQ_PING, &r);
		ck_assert_uint_eq(tileatom_pending(c), 0);
	}
	if (close_at) { /* the connection is broken for good */
		tileatom_error e2 = {0, ""};
		ck_assert_int_eq(tileatom_collect(c, &r, &e2), TILEATOM_E_IO);
		ck_assert_int_eq(tileatom_submit_ping(c, NULL, &e2), TILEATOM_E_IO);
	}
	tileatom_close(c);
	proxy_stop(px);
	free(ones);
	return rc;
}

/* Checks that the rows from..to of tile "f" hold base, the others base + 1. */
static void check_rows(tileatom_client *c, int32_t base, int64_t from, int64_t to)
{
	int64_t shape[2] = {200, FW};
	int32_t *got = malloc(sizeof(int32_t) * 200 * FW);
	ck_assert_ptr_nonnull(got);
	read_tile(c, "f", 2, shape, 4, got);
	for (int y = 0; y < 200; y++)
		for (int x = 0; x < FW; x++)
			ck_assert_int_eq(got[y * FW + x], base + (y >= from && y <= to ? 0 : 1));
	free(got);
}

START_TEST(test_pipelined_part_fails)
{
	/* a part of a pipelined split refused by the daemon: the later parts were sent with it
	 * and apply; collect returns the first failure naming every row applied */
	tcu_daemon d;
	tileatom_client *c = start(&d, false);
	tileatom_error e = {0, ""};
	int64_t shape[2] = {200, FW};
	CK(tileatom_create(c, "f", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	proxy px;
	tileatom_response r;
	ck_assert_int_eq(padd_through_proxy(&d, 2, 0, &px, &r, &e), TILEATOM_E_NOT_FOUND);
	int nparts = px.seen; /* every part was sent */
	int64_t rows = px.rows[0];
	ck_assert_int_ge(nparts, 3);
	for (int i = 0; i < nparts; i++)
		ck_assert_int_eq(px.rows[i], i + 1 < nparts ? rows : 200 - rows * (nparts - 1));
	ck_assert_uint_eq(r.applied, (uint64_t)(200 - rows) * FW);
	char want[200];
	snprintf(want, sizeof(want),
	         "part 2 of %d (rows %lld..%lld) of a split request failed; rows 0..%lld, "
	         "%lld..199 were applied: ",
	         nparts, (long long)rows, (long long)(2 * rows - 1), (long long)(rows - 1),
	         (long long)(2 * rows));
	ck_assert_msg(strncmp(e.message, want, strlen(want)) == 0, "message: %s", e.message);
	ck_assert_msg(strstr(e.message, "no-such-tile"), "message: %s", e.message);
	check_rows(c, 0, rows, 2 * rows - 1);
	/* the first part fails: the same wording, the rows after it applied */
	ck_assert_int_eq(padd_through_proxy(&d, 1, 0, &px, &r, &e), TILEATOM_E_NOT_FOUND);
	snprintf(want, sizeof(want),
	         "part 1 of %d (rows 0..%lld) of a split request failed; rows %lld..199 were "
	         "applied: ",
	         nparts, (long long)(rows - 1), (long long)rows);
	ck_assert_msg(strncmp(e.message, want, strlen(want)) == 0, "message: %s", e.message);
	ck_assert_uint_eq(r.applied, (uint64_t)(200 - rows) * FW);
	/* rows of part 2 got the second add only, part 1's the first only, the rest both */
	int32_t *got = malloc(sizeof(int32_t) * 200 * FW);
	ck_assert_ptr_nonnull(got);
	read_tile(c, "f", 2, shape, 4, got);
	for (int y = 0; y < 200; y++)
		for (int x = 0; x < FW; x++)
			ck_assert_int_eq(got[y * FW + x], y < 2 * rows ? 1 : 2);
	free(got);
	/* the connection is lost at part 2: collect (or the submit, when the loss came
	 * first) reports it; part 1 alone was applied */
	CK(tileatom_destroy(c, "f", &e), e);
	CK(tileatom_create(c, "f", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	int rc = padd_through_proxy(&d, 0, 2, &px, &r, &e);
	ck_assert_int_eq(rc, TILEATOM_E_IO);
	if (r.id != 0) {
		snprintf(want, sizeof(want), "receiving part 2 of %d of a split request: ", nparts);
		ck_assert_msg(strncmp(e.message, want, strlen(want)) == 0, "message: %s",
		              e.message);
		snprintf(want, sizeof(want),
		         "(rows 0..%lld were applied; the later parts are "
		         "unknown)",
		         (long long)(rows - 1));
		ck_assert_msg(strstr(e.message, want), "message: %s", e.message);
	}
	check_rows(c, 0, rows, 199);
	stop(&d, c);
}
END_TEST

START_TEST(test_pipelined_window)
{
	/* responses held back by a lagging proxy: a split submit of about 130 parts never has
	 * more than 64 requests unanswered (the submit waits for responses as it goes) */
	tcu_daemon d;
	tileatom_client *c = start(&d, false);
	tileatom_error e = {0, ""};
	int64_t nbins = 1000;
	CK(tileatom_create(c, "h", TILEATOM_INT32, 1, &nbins, NULL, NULL, &e), e);
	enum { NB = 1 << 20 };
	int32_t *keys = malloc(sizeof(int32_t) * NB), want[1000], got[1000];
	ck_assert_ptr_nonnull(keys);
	memset(want, 0, sizeof(want));
	for (int k = 0; k < NB; k++) {
		keys[k] = (int32_t)(((int64_t)k * 7919) % 1000);
		want[keys[k]]++;
	}
	proxy px;
	proxy_open(&px, &d, 0, 0, 3);
	tileatom_client *pc = NULL;
	CK(tileatom_connect(px.path, 10000, &pc, &e), e);
	tileatom_set_shm_threshold(pc, 0);
	int32_t one = 1;
	tileatom_array ka = tileatom_vector(TILEATOM_INT32, NB, keys);
	tileatom_array one_a = tileatom_scalar(TILEATOM_INT32, &one);
	uint64_t id_ping, id;
	CK(tileatom_submit_ping(pc, &id_ping, &e), e);
	CK(tileatom_submit_indexed(pc, "h", TILEATOM_OP_ADD, NULL, 1, &ka, true, &one_a, NULL, NULL,
	                           &id, &e),
	   e);
	tileatom_response r;
	collect_ok(pc, id_ping, TILEATOM_REQ_PING, &r);
	collect_ok(pc, id, TILEATOM_REQ_INDEXED, &r);
	ck_assert_uint_eq(r.applied, NB);
	tileatom_close(pc);
	proxy_stop(&px);
	ck_assert_int_gt(px.forwarded, 128);
	ck_assert_int_le(px.max_unanswered, 64);
	ck_assert_int_ge(px.max_unanswered, 8);
	CK(tileatom_read(c, "h", NULL, got, sizeof(got), NULL, &e), e);
	for (int b = 0; b < 1000; b++)
		ck_assert_int_eq(got[b], want[b]);
	free(keys);
	stop(&d, c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("split");
	TCase *tc = tcase_create("split");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_split_parts);
	tcase_add_test(tc, test_staged_whole);
	tcase_add_test(tc, test_reject_whole);
	tcase_add_test(tc, test_cannot_split);
	tcase_add_test(tc, test_indexed_nd);
	tcase_add_test(tc, test_part_fails_midway);
	tcase_add_test(tc, test_pipelined_helpers);
	tcase_add_test(tc, test_pipelined_split);
	tcase_add_test(tc, test_pipelined_part_fails);
	tcase_add_test(tc, test_pipelined_staged);
	tcase_add_test(tc, test_pipelined_window);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
