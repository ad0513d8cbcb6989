/* check_integration.c: end-to-end tests of libtileatom-client against a real tileatomd
 * (CPU backend) on a temporary socket: every call and op family with exact expected tile
 * contents, 8 concurrent clients adding to one element, a cas lock guarding a non-atomic
 * read-modify-write, 10,000 pipelined requests, malformed frames from raw sockets while
 * another client is served, and SIGTERM (idle and under load: exit 0, socket removed).
 * main() starts the shared daemon and at the end stops it with SIGTERM, failing unless it
 * exits 0 and removes its socket. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "check_client_util.h"
#include "raw_ref_add.h"
#include "ta_frame.h"
#include "tileatom.h"
#include "tileatom.pb-c.h"

/* The daemon shared by all tests but the SIGTERM ones. */
static tcu_daemon D;

/* Connects to the shared daemon (fails the test when it cannot). */
static tileatom_client *conn(void)
{
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	int rc = tileatom_connect(D.socket, 10000, &c, &e);
	ck_assert_msg(rc == TILEATOM_OK, "connect %s: %s", D.socket, e.message);
	return c;
}

/* Reads a whole int32 tile of n elements. */
static void read_i32(tileatom_client *c, const char *tile, int32_t *out, size_t n)
{
	tileatom_error e = {0, ""};
	size_t nb = 0;
	CK(tileatom_read(c, tile, NULL, out, n * sizeof(int32_t), &nb, &e), e);
	ck_assert_uint_eq(nb, n * sizeof(int32_t));
}

/* Reads a whole int64 tile of n elements. */
static void read_i64(tileatom_client *c, const char *tile, int64_t *out, size_t n)
{
	tileatom_error e = {0, ""};
	size_t nb = 0;
	CK(tileatom_read(c, tile, NULL, out, n * sizeof(int64_t), &nb, &e), e);
	ck_assert_uint_eq(nb, n * sizeof(int64_t));
}

/* Creates a 1-D tile of n elements (zeros). */
static void create_1d(tileatom_client *c, const char *name, tileatom_dtype dt, int64_t n)
{
	tileatom_error e = {0, ""};
	CK(tileatom_create(c, name, dt, 1, &n, NULL, NULL, &e), e);
}

/* Writes n int32 values to a whole 1-D tile. */
static void write_i32(tileatom_client *c, const char *tile, const int32_t *v, int64_t n)
{
	tileatom_error e = {0, ""};
	tileatom_array a = tileatom_vector(TILEATOM_INT32, n, v);
	CK(tileatom_write(c, tile, NULL, &a, &e), e);
}

START_TEST(test_hello_ping_stats)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	ck_assert_str_eq(tileatom_server_backend(c), tcu_backend());
	ck_assert_str_eq(tileatom_server_version(c), tileatom_version());
	ck_assert_str_eq(tileatom_address(c), D.socket);
	CK(tileatom_ping(c, &e), e);
	tileatom_stats_info s;
	CK(tileatom_stats(c, &s, &e), e);
	ck_assert_str_eq(s.backend, tcu_backend());
	ck_assert_uint_ge(s.connections, 1);
	ck_assert_uint_ge(s.requests, 2);
	tileatom_close(c);
}
END_TEST

/* The indexed counters of stats_kinds on c: requests, elements, bytes in and out. */
static void indexed_counts(tileatom_client *c, uint64_t out[4])
{
	tileatom_error e = {0, ""};
	tileatom_stats_info s;
	tileatom_kind_stats *kinds = NULL;
	size_t nk = 0;
	CK(tileatom_stats_kinds(c, &s, &kinds, &nk, &e), e);
	memset(out, 0, 4 * sizeof(out[0]));
	for (size_t i = 0; i < nk; i++)
		if (strcmp(kinds[i].kind, "indexed") == 0) {
			out[0] = kinds[i].requests;
			out[1] = kinds[i].elements;
			out[2] = kinds[i].bytes_in;
			out[3] = kinds[i].bytes_out;
		}
	tileatom_free(kinds);
}

/* Pipelined repeats of one request (run from the connection's kept plan, their counters
 * added up and published at the end of each read): once their responses are collected,
 * stats counts every one of them, on the same connection and on another; a request of
 * another shape in the middle of them changes nothing in that. */
START_TEST(test_stats_count_pipelined_repeats)
{
	tileatom_client *c = conn(), *other = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "repstats", TILEATOM_INT64, 64);
	uint64_t before[4], after[4], seen[4];
	indexed_counts(c, before);
	const int n = 300;
	int64_t one = 1;
	tileatom_array v = tileatom_scalar(TILEATOM_INT64, &one);
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	o.want_old = true;
	for (int i = 0; i < n; i++) {
		int64_t k = (i * 7) % 64, pair[2] = {k, (k + 1) % 64};
		tileatom_array idx = i == 150 ? tileatom_vector(TILEATOM_INT64, 2, pair)
		                              : tileatom_scalar(TILEATOM_INT64, &k);
		CK(tileatom_submit_indexed(c, "repstats", TILEATOM_OP_ADD, NULL, 1, &idx, true, &v,
		                           NULL, &o, NULL, &e),
		   e);
	}
	for (int i = 0; i < n; i++) {
		tileatom_response r;
		CK(tileatom_collect(c, &r, &e), e);
	}
	/* the other connection first: with several loops (check_loops.sh) it is another
	 * loop's, which publishes nothing of c's run */
	indexed_counts(other, seen);
	indexed_counts(c, after);
	ck_assert_uint_eq(after[0] - before[0], (uint64_t)n);
	ck_assert_uint_eq(after[1] - before[1], (uint64_t)n + 1); /* one request of two */
	ck_assert_uint_gt(after[2], before[2]);
	ck_assert_uint_gt(after[3], before[3]);
	ck_assert_uint_eq(seen[0], after[0]); /* the other connection saw the same */
	ck_assert_uint_eq(seen[1], after[1]);
	ck_assert_uint_eq(seen[2], after[2]);
	ck_assert_uint_eq(seen[3], after[3]);
	/* the tile holds every add */
	int64_t got[64];
	size_t nbytes = 0;
	CK(tileatom_read(c, "repstats", NULL, got, sizeof(got), &nbytes, &e), e);
	ck_assert_uint_eq(nbytes, sizeof(got));
	int64_t sum = 0;
	for (int i = 0; i < 64; i++)
		sum += got[i];
	ck_assert_int_eq(sum, n + 1);
	CK(tileatom_destroy(c, "repstats", &e), e);
	tileatom_close(other);
	tileatom_close(c);
}
END_TEST

START_TEST(test_tile_lifecycle)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int64_t shape[2] = {4, 3};
	tileatom_tile_info info;
	CK(tileatom_create(c, "life", TILEATOM_INT32, 2, shape, NULL, &info, &e), e);
	ck_assert_str_eq(info.name, "life");
	ck_assert_int_eq(info.dtype, TILEATOM_INT32);
	ck_assert_int_eq(info.rank, 2);
	ck_assert_int_eq(info.shape[0], 4);
	ck_assert_int_eq(info.shape[1], 3);
	ck_assert_uint_eq(info.bytes, 48);

	ck_assert_int_eq(tileatom_create(c, "life", TILEATOM_INT32, 2, shape, NULL, NULL, &e),
	                 TILEATOM_E_ALREADY_EXISTS);
	ck_assert_int_eq(e.code, TILEATOM_E_ALREADY_EXISTS);
	ck_assert_msg(strstr(e.message, "life"), "message names the tile: %s", e.message);

	tileatom_tile_info d;
	CK(tileatom_describe(c, "life", &d, &e), e);
	ck_assert_str_eq(d.name, "life");
	ck_assert_int_eq(d.rank, 2);
	ck_assert_uint_eq(d.bytes, 48);

	tileatom_tile_info *tiles = NULL;
	size_t n = 0;
	CK(tileatom_list(c, &tiles, &n, &e), e);
	bool found = false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(tiles[i].name, "life") == 0) {
			found = true;
			ck_assert_int_eq(tiles[i].dtype, TILEATOM_INT32);
			ck_assert_int_eq(tiles[i].shape[1], 3);
		}
	tileatom_free(tiles);
	ck_assert(found);

	CK(tileatom_destroy(c, "life", &e), e);
	ck_assert_int_eq(tileatom_describe(c, "life", &d, &e), TILEATOM_E_NOT_FOUND);
	ck_assert_msg(strstr(e.message, "life"), "message names the tile: %s", e.message);
	ck_assert_int_eq(tileatom_destroy(c, "life", &e), TILEATOM_E_NOT_FOUND);

	/* Names and shapes the daemon or the library refuse. */
	ck_assert_int_eq(tileatom_create(c, "bad name!", TILEATOM_INT32, 1, shape, NULL, NULL, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	int64_t shape5[5] = {1, 1, 1, 1, 1};
	ck_assert_int_eq(tileatom_create(c, "r5", TILEATOM_INT32, 5, shape5, NULL, NULL, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_create(c, "mask", TILEATOM_BOOL, 1, shape, NULL, NULL, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);

	/* Fill value. */
	float fill = 2.5f;
	int64_t five = 5;
	CK(tileatom_create(c, "filled", TILEATOM_FLOAT32, 1, &five, &fill, NULL, &e), e);
	float back[5];
	size_t nb;
	CK(tileatom_read(c, "filled", NULL, back, sizeof(back), &nb, &e), e);
	ck_assert_uint_eq(nb, sizeof(back));
	for (int i = 0; i < 5; i++)
		ck_assert_float_eq(back[i], 2.5f);
	CK(tileatom_destroy(c, "filled", &e), e);
	tileatom_close(c);
}
END_TEST

START_TEST(test_read_write_region)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int64_t shape[2] = {4, 5};
	CK(tileatom_create(c, "rw", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	int32_t vals[6] = {1, 2, 3, 4, 5, 6};
	tileatom_region reg = {2, {1, 1}, {2, 3}};
	tileatom_array arr = {TILEATOM_INT32, 2, {2, 3}, vals};
	CK(tileatom_write(c, "rw", &reg, &arr, &e), e);
	int32_t nine = 9;
	tileatom_array s = tileatom_scalar(TILEATOM_INT32, &nine);
	tileatom_region row3 = {2, {3, 0}, {1, 5}};
	CK(tileatom_write(c, "rw", &row3, &s, &e), e);

	static const int32_t expect[20] = {0, 0, 0, 0, 0, 0, 1, 2, 3, 0,
	                                   0, 4, 5, 6, 0, 9, 9, 9, 9, 9};
	int32_t all[20];
	read_i32(c, "rw", all, 20);
	for (int i = 0; i < 20; i++)
		ck_assert_msg(all[i] == expect[i], "element %d: %d, expected %d", i, all[i],
		              expect[i]);
	int32_t sub[6];
	size_t nb = 0;
	CK(tileatom_read(c, "rw", &reg, sub, sizeof(sub), &nb, &e), e);
	ck_assert_uint_eq(nb, 24);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(sub[i], i + 1);

	/* A buffer too small reports the size needed. */
	ck_assert_int_eq(tileatom_read(c, "rw", NULL, all, 10, &nb, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_uint_eq(nb, 80);
	void *data = NULL;
	CK(tileatom_read_alloc(c, "rw", NULL, &data, &nb, &e), e);
	ck_assert_uint_eq(nb, 80);
	ck_assert_int_eq(memcmp(data, expect, 80), 0);
	tileatom_free(data);

	/* Wrong dtype, a region outside the tile. */
	float f = 1.0f;
	tileatom_array fs = tileatom_scalar(TILEATOM_FLOAT32, &f);
	ck_assert_int_eq(tileatom_write(c, "rw", NULL, &fs, &e), TILEATOM_E_INVALID_ARGUMENT);
	tileatom_region outside = {2, {3, 3}, {2, 3}};
	int rc = tileatom_read(c, "rw", &outside, all, sizeof(all), &nb, &e);
	ck_assert_msg(rc == TILEATOM_E_OUT_OF_RANGE || rc == TILEATOM_E_INVALID_ARGUMENT,
	              "region outside the tile: %s %s", tileatom_strerror(rc), e.message);
	/* The connection is still usable after errors. */
	CK(tileatom_ping(c, &e), e);
	CK(tileatom_destroy(c, "rw", &e), e);
	tileatom_close(c);
}
END_TEST

/* One element-wise op case: every element starts at a, gets operand v (and compare), and
 * must end at expect with old value a. */
typedef struct ew_case {
	tileatom_op op; /* the op */
	int32_t a;      /* initial value */
	int32_t v;      /* operand (CAS: desired) */
	int32_t expect; /* value after the op */
} ew_case;

START_TEST(test_elementwise_ops)
{
	static const ew_case cases[] = {
	    {TILEATOM_OP_ADD, 10, 3, 13},       {TILEATOM_OP_SUB, 10, 3, 7},
	    {TILEATOM_OP_MIN, 10, 3, 3},        {TILEATOM_OP_MAX, 10, 30, 30},
	    {TILEATOM_OP_EXCH, 10, 99, 99},     {TILEATOM_OP_AND, 0xF0, 0x3C, 0x30},
	    {TILEATOM_OP_OR, 0xF0, 0x0F, 0xFF}, {TILEATOM_OP_XOR, 0xF0, 0xFF, 0x0F},
	    {TILEATOM_OP_MIN, -5, 3, -5},       {TILEATOM_OP_MAX, -5, -7, -5},
	};
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "ew", TILEATOM_INT32, 4);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const ew_case *t = &cases[k];
		int32_t init[4] = {t->a, t->a, t->a, t->a};
		write_i32(c, "ew", init, 4);
		int32_t v[4] = {t->v, t->v, t->v, t->v};
		tileatom_array va = tileatom_vector(TILEATOM_INT32, 4, v);
		int32_t old[4] = {0};
		tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
		o.want_old = true;
		o.old_out = old;
		o.old_out_size = sizeof(old);
		o.sem = (tileatom_sem)(k % 4);
		o.scope = (tileatom_scope)((k / 2) % 4);
		tileatom_op_result res;
		CK(tileatom_elementwise(c, "ew", t->op, NULL, &va, NULL, &o, &res, &e), e);
		ck_assert_uint_eq(res.applied, 4);
		ck_assert_uint_eq(res.skipped, 0);
		ck_assert_uint_eq(res.old_bytes, 16);
		int32_t now[4];
		read_i32(c, "ew", now, 4);
		for (int i = 0; i < 4; i++) {
			ck_assert_msg(old[i] == t->a, "%s case %zu: old %d, expected %d",
			              tileatom_op_name(t->op), k, old[i], t->a);
			ck_assert_msg(now[i] == t->expect, "%s case %zu: %d, expected %d",
			              tileatom_op_name(t->op), k, now[i], t->expect);
		}
	}
	/* CAS: swaps where the expected value matches. */
	int32_t init[4] = {10, 10, 10, 10};
	write_i32(c, "ew", init, 4);
	int32_t desired = 77, cmp[4] = {10, 11, 10, 11}, old[4];
	tileatom_array da = tileatom_scalar(TILEATOM_INT32, &desired);
	tileatom_array ca = tileatom_vector(TILEATOM_INT32, 4, cmp);
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	o.want_old = true;
	o.old_out = old;
	o.old_out_size = sizeof(old);
	o.sem = TILEATOM_SEM_ACQ_REL;
	CK(tileatom_elementwise(c, "ew", TILEATOM_OP_CAS, NULL, &da, &ca, &o, NULL, &e), e);
	int32_t now[4];
	read_i32(c, "ew", now, 4);
	static const int32_t cas_expect[4] = {77, 10, 77, 10};
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(old[i], 10);
		ck_assert_int_eq(now[i], cas_expect[i]);
	}
	/* A region and a mask: masked-off elements are neither applied nor reported. */
	int32_t zeros[4] = {0, 0, 0, 0};
	write_i32(c, "ew", zeros, 4);
	uint8_t mask[3] = {1, 0, 1};
	tileatom_array ma = tileatom_vector(TILEATOM_BOOL, 3, mask);
	int32_t five = 5;
	tileatom_array fa = tileatom_scalar(TILEATOM_INT32, &five);
	tileatom_region reg = {1, {1}, {3}};
	tileatom_op_options mo = TILEATOM_OP_OPTIONS_INIT;
	mo.mask = &ma;
	tileatom_op_result res;
	CK(tileatom_elementwise(c, "ew", TILEATOM_OP_ADD, &reg, &fa, NULL, &mo, &res, &e), e);
	ck_assert_uint_eq(res.applied, 2);
	read_i32(c, "ew", now, 4);
	ck_assert_int_eq(now[0], 0);
	ck_assert_int_eq(now[1], 5);
	ck_assert_int_eq(now[2], 0);
	ck_assert_int_eq(now[3], 5);
	/* Bitwise ops need an integer tile; compare is only for CAS. */
	create_1d(c, "ewf", TILEATOM_FLOAT32, 3);
	float fv[3] = {1.5f, -2.0f, 0.25f}, half = 0.5f, fnow[3];
	tileatom_array fva = tileatom_vector(TILEATOM_FLOAT32, 3, fv);
	CK(tileatom_write(c, "ewf", NULL, &fva, &e), e);
	tileatom_array ha = tileatom_scalar(TILEATOM_FLOAT32, &half);
	CK(tileatom_elementwise(c, "ewf", TILEATOM_OP_ADD, NULL, &ha, NULL, NULL, NULL, &e), e);
	size_t nb;
	CK(tileatom_read(c, "ewf", NULL, fnow, sizeof(fnow), &nb, &e), e);
	ck_assert_float_eq(fnow[0], 2.0f);
	ck_assert_float_eq(fnow[1], -1.5f);
	ck_assert_float_eq(fnow[2], 0.75f);
	ck_assert_int_eq(
	    tileatom_elementwise(c, "ewf", TILEATOM_OP_AND, NULL, &ha, NULL, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(
	    tileatom_elementwise(c, "ew", TILEATOM_OP_ADD, NULL, &fa, &fa, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	CK(tileatom_destroy(c, "ew", &e), e);
	CK(tileatom_destroy(c, "ewf", &e), e);
	tileatom_close(c);
}
END_TEST

START_TEST(test_scatter)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	/* torch.zeros(3, 5).scatter_add_(0, index, torch.ones(2, 5)) */
	int64_t shape[2] = {3, 5};
	CK(tileatom_create(c, "sc", TILEATOM_INT32, 2, shape, NULL, NULL, &e), e);
	int64_t idx[10] = {0, 1, 2, 0, 0, 2, 0, 0, 1, 2};
	int32_t ones[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
	tileatom_array ia = {TILEATOM_INT64, 2, {2, 5}, idx};
	tileatom_array va = {TILEATOM_INT32, 2, {2, 5}, ones};
	tileatom_op_result res;
	CK(tileatom_scatter(c, "sc", TILEATOM_OP_ADD, NULL, 0, &ia, &va, NULL, &res, &e), e);
	ck_assert_uint_eq(res.applied, 10);
	static const int32_t expect[15] = {1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
	int32_t now[15];
	read_i32(c, "sc", now, 15);
	for (int i = 0; i < 15; i++)
		ck_assert_msg(now[i] == expect[i], "element %d: %d, expected %d", i, now[i],
		              expect[i]);
	/* 1-D with an out-of-range index: skipped and counted. */
	create_1d(c, "sc1", TILEATOM_INT64, 4);
	int32_t idx1[4] = {0, 1, 1, 7};
	int64_t one = 1;
	tileatom_array i1 = tileatom_vector(TILEATOM_INT32, 4, idx1);
	tileatom_array o1 = tileatom_scalar(TILEATOM_INT64, &one);
	CK(tileatom_scatter(c, "sc1", TILEATOM_OP_ADD, NULL, 0, &i1, &o1, NULL, &res, &e), e);
	ck_assert_uint_eq(res.applied, 3);
	ck_assert_uint_eq(res.skipped, 1);
	int64_t n1[4];
	read_i64(c, "sc1", n1, 4);
	ck_assert_int_eq(n1[0], 1);
	ck_assert_int_eq(n1[1], 2);
	ck_assert_int_eq(n1[2], 0);
	ck_assert_int_eq(n1[3], 0);
	/* max through scatter, and exch, which the scatter family does not take. */
	int64_t big = 40;
	tileatom_array b1 = tileatom_scalar(TILEATOM_INT64, &big);
	int32_t idx2[1] = {2};
	tileatom_array i2 = tileatom_vector(TILEATOM_INT32, 1, idx2);
	CK(tileatom_scatter(c, "sc1", TILEATOM_OP_MAX, NULL, 0, &i2, &b1, NULL, &res, &e), e);
	read_i64(c, "sc1", n1, 4);
	ck_assert_int_eq(n1[2], 40);
	ck_assert_int_eq(
	    tileatom_scatter(c, "sc1", TILEATOM_OP_EXCH, NULL, 0, &i2, &b1, NULL, &res, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	CK(tileatom_destroy(c, "sc", &e), e);
	CK(tileatom_destroy(c, "sc1", &e), e);
	tileatom_close(c);
}
END_TEST

START_TEST(test_indexed)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int64_t shape[2] = {4, 4};
	CK(tileatom_create(c, "ix", TILEATOM_INT64, 2, shape, NULL, NULL, &e), e);
	tileatom_op_result res;
	/* 1. index tuple: the anti-diagonal += 10 */
	int32_t rows[4] = {0, 1, 2, 3}, cols[4] = {3, 2, 1, 0};
	tileatom_array tuple[2] = {tileatom_vector(TILEATOM_INT32, 4, rows),
	                           tileatom_vector(TILEATOM_INT32, 4, cols)};
	int64_t ten = 10, one = 1, seven = 7;
	tileatom_array tena = tileatom_scalar(TILEATOM_INT64, &ten);
	tileatom_array onea = tileatom_scalar(TILEATOM_INT64, &one);
	tileatom_array sevena = tileatom_scalar(TILEATOM_INT64, &seven);
	CK(tileatom_indexed(c, "ix", TILEATOM_OP_ADD, NULL, 2, tuple, false, &tena, NULL, NULL,
	                    &res, &e),
	   e);
	ck_assert_uint_eq(res.applied, 4);
	/* 2. duplicates all apply */
	int64_t dup[3] = {5, 5, 5};
	tileatom_array dupa = tileatom_vector(TILEATOM_INT64, 3, dup);
	CK(tileatom_indexed(c, "ix", TILEATOM_OP_ADD, NULL, 1, &dupa, true, &onea, NULL, NULL, &res,
	                    &e),
	   e);
	/* 3. CAS 0 -> 42 at flat 0, with its old value */
	int64_t zero = 0, desired = 42, old = -1, flat0 = 0;
	tileatom_array f0 = tileatom_scalar(TILEATOM_INT64, &flat0);
	tileatom_array za = tileatom_scalar(TILEATOM_INT64, &zero);
	tileatom_array dsa = tileatom_scalar(TILEATOM_INT64, &desired);
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	o.want_old = true;
	o.old_out = &old;
	o.old_out_size = sizeof(old);
	CK(tileatom_indexed(c, "ix", TILEATOM_OP_CAS, NULL, 1, &f0, true, &dsa, &za, &o, &res, &e),
	   e);
	ck_assert_int_eq(old, 0);
	ck_assert_int_eq(res.old_rank, 0);
	/* 4. bounds checking on: the out-of-range index is skipped and counted */
	int64_t oob[2] = {1, 99};
	tileatom_array oa = tileatom_vector(TILEATOM_INT64, 2, oob);
	CK(tileatom_indexed(c, "ix", TILEATOM_OP_ADD, NULL, 1, &oa, true, &onea, NULL, NULL, &res,
	                    &e),
	   e);
	ck_assert_uint_eq(res.applied, 1);
	ck_assert_uint_eq(res.skipped, 1);
	/* 5. bounds checking off: the request fails and nothing is applied */
	int64_t oob2[2] = {2, 99};
	tileatom_array oa2 = tileatom_vector(TILEATOM_INT64, 2, oob2);
	tileatom_op_options nb = TILEATOM_OP_OPTIONS_INIT;
	nb.check_bounds = false;
	ck_assert_int_eq(tileatom_indexed(c, "ix", TILEATOM_OP_ADD, NULL, 1, &oa2, true, &onea,
	                                  NULL, &nb, &res, &e),
	                 TILEATOM_E_OUT_OF_RANGE);
	/* 6. flat offsets inside a window: (2,2) and (3,3) += 7 */
	tileatom_region win = {2, {2, 2}, {2, 2}};
	int64_t wf[2] = {0, 3};
	tileatom_array wfa = tileatom_vector(TILEATOM_INT64, 2, wf);
	CK(tileatom_indexed(c, "ix", TILEATOM_OP_ADD, &win, 1, &wfa, true, &sevena, NULL, NULL,
	                    &res, &e),
	   e);
	static const int64_t expect[16] = {42, 1, 0, 10, 0, 3, 10, 0, 0, 10, 7, 0, 10, 0, 0, 7};
	int64_t now[16];
	read_i64(c, "ix", now, 16);
	for (int i = 0; i < 16; i++)
		ck_assert_msg(now[i] == expect[i], "element %d: %lld, expected %lld", i,
		              (long long)now[i], (long long)expect[i]);
	CK(tileatom_destroy(c, "ix", &e), e);
	tileatom_close(c);
}
END_TEST

START_TEST(test_memory_ops)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "mem", TILEATOM_INT32, 6);
	int32_t init[6] = {0, 10, 20, 30, 40, 50};
	write_i32(c, "mem", init, 6);
	tileatom_op_result res;
	/* gather, flat, with an out-of-range index padded */
	int64_t gi[4] = {5, 0, 9, 2};
	tileatom_array gia = tileatom_vector(TILEATOM_INT64, 4, gi);
	tileatom_addr flat = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &gia};
	int32_t pad = -1, out[4];
	tileatom_array pada = tileatom_scalar(TILEATOM_INT32, &pad);
	CK(tileatom_gather(c, "mem", NULL, &flat, &pada, NULL, out, sizeof(out), &res, &e), e);
	ck_assert_uint_eq(res.applied, 3);
	ck_assert_uint_eq(res.skipped, 1);
	ck_assert_uint_eq(res.old_bytes, 16);
	ck_assert_int_eq(out[0], 50);
	ck_assert_int_eq(out[1], 0);
	ck_assert_int_eq(out[2], -1);
	ck_assert_int_eq(out[3], 20);
	/* gather of a region */
	tileatom_region r = {1, {2}, {3}};
	tileatom_addr ra = {TILEATOM_ADDR_REGION, &r, 0, 0, NULL};
	int32_t out3[3];
	CK(tileatom_gather(c, "mem", NULL, &ra, NULL, NULL, out3, sizeof(out3), &res, &e), e);
	ck_assert_int_eq(out3[0], 20);
	ck_assert_int_eq(out3[1], 30);
	ck_assert_int_eq(out3[2], 40);
	/* gather with a mask: masked-off elements get the padding */
	int64_t mi[4] = {5, 0, 1, 2};
	uint8_t mask[4] = {1, 0, 1, 1};
	tileatom_array mia = tileatom_vector(TILEATOM_INT64, 4, mi);
	tileatom_array maska = tileatom_vector(TILEATOM_BOOL, 4, mask);
	tileatom_addr mflat = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &mia};
	int32_t pad7 = -7;
	tileatom_array pad7a = tileatom_scalar(TILEATOM_INT32, &pad7);
	tileatom_op_options mo = TILEATOM_OP_OPTIONS_INIT;
	mo.mask = &maska;
	CK(tileatom_gather(c, "mem", NULL, &mflat, &pad7a, &mo, out, sizeof(out), &res, &e), e);
	ck_assert_int_eq(out[0], 50);
	ck_assert_int_eq(out[1], -7);
	ck_assert_int_eq(out[2], 10);
	ck_assert_int_eq(out[3], 20);
	/* atomic store (release) and load (acquire) */
	int64_t si[2] = {1, 3};
	int32_t sv[2] = {111, 333};
	tileatom_array sia = tileatom_vector(TILEATOM_INT64, 2, si);
	tileatom_array sva = tileatom_vector(TILEATOM_INT32, 2, sv);
	tileatom_addr sflat = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &sia};
	tileatom_op_options rel = TILEATOM_OP_OPTIONS_INIT;
	rel.sem = TILEATOM_SEM_RELEASE;
	CK(tileatom_atomic_store(c, "mem", NULL, &sflat, &sva, &rel, &res, &e), e);
	ck_assert_uint_eq(res.applied, 2);
	int64_t three = 3;
	tileatom_array th = tileatom_scalar(TILEATOM_INT64, &three);
	tileatom_addr one_flat = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &th};
	tileatom_op_options acq = TILEATOM_OP_OPTIONS_INIT;
	acq.sem = TILEATOM_SEM_ACQUIRE;
	int32_t loaded = 0;
	CK(tileatom_atomic_load(c, "mem", NULL, &one_flat, &acq, &loaded, sizeof(loaded), &res, &e),
	   e);
	ck_assert_int_eq(loaded, 333);
	/* a store with acquire semantics is illegal */
	ck_assert_int_eq(tileatom_atomic_store(c, "mem", NULL, &sflat, &sva, &acq, &res, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	/* non-atomic scatter store over a window */
	tileatom_region w = {1, {4}, {2}};
	int32_t wv[2] = {7, 8};
	tileatom_array wva = tileatom_vector(TILEATOM_INT32, 2, wv);
	CK(tileatom_scatter_store(c, "mem", &w, NULL, &wva, NULL, &res, &e), e);
	int32_t now[6];
	read_i32(c, "mem", now, 6);
	static const int32_t expect[6] = {0, 111, 20, 333, 7, 8};
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(now[i], expect[i]);
	/* gather with scatter addressing */
	int32_t sci[2] = {4, 1};
	tileatom_array scia = tileatom_vector(TILEATOM_INT32, 2, sci);
	tileatom_addr sc = {TILEATOM_ADDR_SCATTER, NULL, 0, 1, &scia};
	int32_t out2[2];
	CK(tileatom_gather(c, "mem", NULL, &sc, NULL, NULL, out2, sizeof(out2), &res, &e), e);
	ck_assert_int_eq(out2[0], 7);
	ck_assert_int_eq(out2[1], 111);
	CK(tileatom_destroy(c, "mem", &e), e);
	tileatom_close(c);
}
END_TEST

START_TEST(test_atomic_at)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "at", TILEATOM_INT32, 3);
	struct {
		tileatom_op op;
		int32_t v, cmp, old, now;
	} steps[] = {
	    {TILEATOM_OP_ADD, 5, 0, 0, 5},   {TILEATOM_OP_SUB, 2, 0, 5, 3},
	    {TILEATOM_OP_MIN, 1, 0, 3, 1},   {TILEATOM_OP_MAX, 10, 0, 1, 10},
	    {TILEATOM_OP_EXCH, 4, 0, 10, 4}, {TILEATOM_OP_AND, 6, 0, 4, 4},
	    {TILEATOM_OP_OR, 3, 0, 4, 7},    {TILEATOM_OP_XOR, 5, 0, 7, 2},
	    {TILEATOM_OP_CAS, 9, 2, 2, 9},   {TILEATOM_OP_CAS, 1, 2, 9, 9},
	};
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		int32_t old = -12345;
		CK(tileatom_atomic_at(c, "at", steps[k].op, 1, TILEATOM_INT32, &steps[k].v,
		                      &steps[k].cmp, NULL, &old, &e),
		   e);
		ck_assert_msg(old == steps[k].old, "step %zu (%s): old %d, expected %d", k,
		              tileatom_op_name(steps[k].op), old, steps[k].old);
		int32_t now[3];
		read_i32(c, "at", now, 3);
		ck_assert_msg(now[1] == steps[k].now, "step %zu (%s): %d, expected %d", k,
		              tileatom_op_name(steps[k].op), now[1], steps[k].now);
		ck_assert_int_eq(now[0], 0);
		ck_assert_int_eq(now[2], 0);
	}
	int32_t v = 1;
	ck_assert_int_eq(tileatom_atomic_at(c, "at", TILEATOM_OP_ADD, 3, TILEATOM_INT32, &v, NULL,
	                                    NULL, NULL, &e),
	                 TILEATOM_E_OUT_OF_RANGE);
	ck_assert_int_eq(tileatom_atomic_at(c, "at", TILEATOM_OP_ADD, -1, TILEATOM_INT32, &v, NULL,
	                                    NULL, NULL, &e),
	                 TILEATOM_E_OUT_OF_RANGE);
	/* float64 */
	create_1d(c, "atf", TILEATOM_FLOAT64, 2);
	double half = 0.5, fold = -1;
	CK(tileatom_atomic_at(c, "atf", TILEATOM_OP_ADD, 1, TILEATOM_FLOAT64, &half, NULL, NULL,
	                      &fold, &e),
	   e);
	ck_assert_double_eq(fold, 0.0);
	CK(tileatom_atomic_at(c, "atf", TILEATOM_OP_ADD, 1, TILEATOM_FLOAT64, &half, NULL, NULL,
	                      &fold, &e),
	   e);
	ck_assert_double_eq(fold, 0.5);
	double fnow[2];
	size_t nb;
	CK(tileatom_read(c, "atf", NULL, fnow, sizeof(fnow), &nb, &e), e);
	ck_assert_double_eq(fnow[0], 0.0);
	ck_assert_double_eq(fnow[1], 1.0);
	CK(tileatom_destroy(c, "at", &e), e);
	CK(tileatom_destroy(c, "atf", &e), e);
	tileatom_close(c);
}
END_TEST

START_TEST(test_errors)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int32_t v = 1, old;
	ck_assert_int_eq(tileatom_atomic_at(c, "no-such-tile", TILEATOM_OP_ADD, 0, TILEATOM_INT32,
	                                    &v, NULL, NULL, NULL, &e),
	                 TILEATOM_E_NOT_FOUND);
	ck_assert_msg(strstr(e.message, "no-such-tile"), "message: %s", e.message);
	/* Library-side argument checks. */
	tileatom_array va = tileatom_scalar(TILEATOM_INT32, &v);
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	o.want_old = true;
	ck_assert_int_eq(
	    tileatom_elementwise(c, "x", TILEATOM_OP_ADD, NULL, &va, NULL, &o, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(
	    tileatom_elementwise(c, "x", (tileatom_op)42, NULL, &va, NULL, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_ping(NULL, &e), TILEATOM_E_INVALID_ARGUMENT);
	/* Old values into a buffer that is too small: the op was applied, the error says so. */
	create_1d(c, "err", TILEATOM_INT32, 4);
	o.old_out = &old;
	o.old_out_size = sizeof(old);
	tileatom_op_result res;
	ck_assert_int_eq(
	    tileatom_elementwise(c, "err", TILEATOM_OP_ADD, NULL, &va, NULL, &o, &res, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "applied"), "message: %s", e.message);
	ck_assert_uint_eq(res.old_bytes, 16);
	ck_assert_uint_eq(res.applied, 4);
	/* Synchronous calls refuse to run while pipelined responses are uncollected. */
	uint64_t id = 0;
	CK(tileatom_submit_ping(c, &id, &e), e);
	ck_assert_uint_gt(id, 0);
	ck_assert_uint_eq(tileatom_pending(c), 1);
	ck_assert_int_eq(tileatom_ping(c, &e), TILEATOM_E_STATE);
	tileatom_response r;
	CK(tileatom_collect(c, &r, &e), e);
	ck_assert_uint_eq(r.id, id);
	ck_assert_int_eq(r.kind, TILEATOM_REQ_PING);
	ck_assert_int_eq(tileatom_collect(c, &r, &e), TILEATOM_E_STATE);
	/* A daemon error in a pipelined response leaves the connection usable. */
	CK(tileatom_submit_atomic_at(c, "no-such-tile", TILEATOM_OP_ADD, 0, TILEATOM_INT32, &v,
	                             NULL, NULL, &id, &e),
	   e);
	CK(tileatom_submit_ping(c, NULL, &e), e);
	ck_assert_int_eq(tileatom_collect(c, &r, &e), TILEATOM_E_NOT_FOUND);
	ck_assert_int_eq(r.status, TILEATOM_E_NOT_FOUND);
	ck_assert_uint_eq(r.id, id);
	CK(tileatom_collect(c, &r, &e), e);
	ck_assert_uint_eq(r.id, id + 1);
	CK(tileatom_ping(c, &e), e);
	CK(tileatom_destroy(c, "err", &e), e);
	tileatom_close(c);

	/* Connection failures name the address and the cause. */
	char path[400];
	snprintf(path, sizeof(path), "%s/nothing-here.sock", D.dir);
	tileatom_client *none = (tileatom_client *)&e;
	ck_assert_int_eq(tileatom_connect(path, 1000, &none, &e), TILEATOM_E_IO);
	ck_assert_ptr_null(none);
	ck_assert_msg(strstr(e.message, path) && strstr(e.message, "No such file") &&
	                  strstr(e.message, "is tileatomd running?"),
	              "message: %s", e.message);
	ck_assert_int_eq(tileatom_connect("localhost:notaport", 1000, &none, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_pipelined_10000)
{
	const int n = tcu_slow() ? 2000 : 10000;
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "pipe", TILEATOM_INT64, 1);
	uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)n);
	ck_assert_ptr_nonnull(ids);
	int64_t one = 1;
	for (int k = 0; k < n; k++) {
		CK(tileatom_submit_atomic_at(c, "pipe", TILEATOM_OP_ADD, 0, TILEATOM_INT64, &one,
		                             NULL, NULL, &ids[k], &e),
		   e);
		if (k > 0)
			ck_assert_uint_eq(ids[k], ids[k - 1] + 1);
	}
	ck_assert_uint_eq(tileatom_pending(c), (size_t)n);
	for (int k = 0; k < n; k++) {
		tileatom_response r;
		CK(tileatom_collect(c, &r, &e), e);
		ck_assert_uint_eq(r.id, ids[k]);
		ck_assert_int_eq(r.kind, TILEATOM_REQ_INDEXED);
		ck_assert_uint_eq(r.applied, 1);
		ck_assert_uint_eq(r.data_bytes, sizeof(int64_t));
		int64_t old;
		memcpy(&old, r.data, sizeof(old));
		/* In order: the k-th add saw k earlier adds. */
		ck_assert_int_eq(old, k);
	}
	ck_assert_uint_eq(tileatom_pending(c), 0);
	int64_t total;
	read_i64(c, "pipe", &total, 1);
	ck_assert_int_eq(total, n);
	/* Mixed kinds in one pipeline. */
	uint64_t id_read, id_ping;
	CK(tileatom_submit_read(c, "pipe", NULL, &id_read, &e), e);
	CK(tileatom_submit_ping(c, &id_ping, &e), e);
	tileatom_response r;
	CK(tileatom_collect(c, &r, &e), e);
	ck_assert_uint_eq(r.id, id_read);
	ck_assert_int_eq(r.kind, TILEATOM_REQ_READ);
	ck_assert_uint_eq(r.data_bytes, 8);
	ck_assert_int_eq(r.dtype, TILEATOM_INT64);
	ck_assert_int_eq(*(const int64_t *)r.data, n);
	CK(tileatom_collect(c, &r, &e), e);
	ck_assert_uint_eq(r.id, id_ping);
	free(ids);
	CK(tileatom_destroy(c, "pipe", &e), e);
	tileatom_close(c);
}
END_TEST

/* One pipelined request of test_pipelined_shapes and what it must answer. */
typedef struct shape_req {
	uint64_t id;      /* its id */
	int count;        /* elements addressed */
	bool returns_old; /* old values come back */
	int64_t old[2];   /* the old values expected */
	size_t esize;     /* bytes of one old value */
} shape_req;

/* Pipelined indexed requests whose shape repeats or changes from one to the next (the
 * library's template path and its fallback): two int64 tiles whose names differ in one
 * byte, an int32 tile and a 4x4 int64 tile addressed flat or by two index arrays; ops add,
 * sub, max and cas; want_old and check_bounds flipping; scalar or 2-element operands.
 * Every old value and the tiles' final contents must match a local model. */
START_TEST(test_pipelined_shapes)
{
	const int n = tcu_slow() ? 600 : 4000;
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	static const char *const names[4] = {"shape-a", "shape-b", "shape-c", "shape-d"};
	int64_t model[4][16] = {{0}};
	create_1d(c, names[0], TILEATOM_INT64, 16);
	create_1d(c, names[1], TILEATOM_INT64, 16);
	create_1d(c, names[2], TILEATOM_INT32, 16);
	int64_t dims[2] = {4, 4};
	CK(tileatom_create(c, names[3], TILEATOM_INT64, 2, dims, NULL, NULL, &e), e);
	shape_req *reqs = calloc((size_t)n, sizeof(*reqs));
	ck_assert_ptr_nonnull(reqs);
	uint64_t rng = 12345;
	int tile = 0, op_i = 0, count = 1;
	bool want_old = true, bounds = true, flat = true, scalar = true;
	int done = 0;
	for (int k = 0; k < n; k++) {
		rng = rng * 6364136223846793005u + 1442695040888963407u;
		uint64_t r = rng >> 20;
		if (r % 5 < 2) { /* a new shape: two of tile, op, options, form, count */
			for (int j = 0; j < 2; j++) {
				switch ((r >> (4 + 3 * j)) % 7) {
				case 0:
					tile = (tile + 1 + (int)((r >> 12) % 3)) % 4;
					break;
				case 1:
					op_i = (op_i + 1) % 4;
					break;
				case 2:
					want_old = !want_old;
					break;
				case 3:
					bounds = !bounds;
					break;
				case 4:
					flat = !flat;
					break;
				case 5:
					count = 3 - count;
					break;
				default:
					scalar = !scalar;
					break;
				}
			}
		}
		static const tileatom_op ops[4] = {TILEATOM_OP_ADD, TILEATOM_OP_SUB,
		                                   TILEATOM_OP_MAX, TILEATOM_OP_CAS};
		tileatom_op op = ops[op_i];
		bool two_d = tile == 3 && !flat;
		tileatom_dtype dt = tile == 2 ? TILEATOM_INT32 : TILEATOM_INT64;
		size_t es = tile == 2 ? 4 : 8;
		/* distinct elements (cas and max see one value each), new values every time */
		int64_t flat_ix[2];
		flat_ix[0] = (int64_t)((rng >> 40) % 16);
		flat_ix[1] = (flat_ix[0] + 1 + (int64_t)((rng >> 50) % 15)) % 16;
		int64_t rows[2] = {flat_ix[0] / 4, flat_ix[1] / 4};
		int64_t cols[2] = {flat_ix[0] % 4, flat_ix[1] % 4};
		int64_t v64[2] = {(int64_t)((rng >> 8) % 1000) - 300,
		                  (int64_t)((rng >> 24) % 1000)};
		int64_t c64[2];
		for (int i = 0; i < 2; i++) /* cas: the current value half of the time */
			c64[i] = (rng >> (30 + i)) & 1 ? model[tile][flat_ix[i]] : v64[i] + 1;
		int32_t v32[2] = {(int32_t)v64[0], (int32_t)v64[1]};
		int32_t c32[2] = {(int32_t)c64[0], (int32_t)c64[1]};
		const void *vals = tile == 2 ? (const void *)v32 : (const void *)v64;
		const void *cmps = tile == 2 ? (const void *)c32 : (const void *)c64;
		tileatom_array idx[2], values, compare;
		bool sc = scalar && count == 1;
		if (two_d) {
			idx[0] = sc ? tileatom_scalar(TILEATOM_INT64, rows)
			            : tileatom_vector(TILEATOM_INT64, count, rows);
			idx[1] = sc ? tileatom_scalar(TILEATOM_INT64, cols)
			            : tileatom_vector(TILEATOM_INT64, count, cols);
		} else {
			idx[0] = sc ? tileatom_scalar(TILEATOM_INT64, flat_ix)
			            : tileatom_vector(TILEATOM_INT64, count, flat_ix);
		}
		values = sc ? tileatom_scalar(dt, vals) : tileatom_vector(dt, count, vals);
		compare = sc ? tileatom_scalar(dt, cmps) : tileatom_vector(dt, count, cmps);
		tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
		o.want_old = want_old;
		o.check_bounds = bounds;
		shape_req *q = &reqs[k];
		CK(tileatom_submit_indexed(c, names[tile], op, NULL, two_d ? 2 : 1, idx, !two_d,
		                           &values, op == TILEATOM_OP_CAS ? &compare : NULL, &o,
		                           &q->id, &e),
		   e);
		q->count = count;
		q->esize = es;
		q->returns_old = want_old;
		for (int i = 0; i < count; i++) {
			int64_t *x = &model[tile][flat_ix[i]];
			int64_t v = tile == 2 ? v32[i] : v64[i];
			q->old[i] = *x;
			switch (op) {
			case TILEATOM_OP_ADD:
				*x += v;
				break;
			case TILEATOM_OP_SUB:
				*x -= v;
				break;
			case TILEATOM_OP_MAX:
				*x = *x > v ? *x : v;
				break;
			default:
				if (*x == (tile == 2 ? c32[i] : c64[i]))
					*x = v;
				break;
			}
		}
		/* collect in batches of 1 to 64 */
		if (k == n - 1 || (rng >> 56) % 64 == 0) {
			for (; done <= k; done++) {
				const shape_req *w = &reqs[done];
				tileatom_response rs;
				CK(tileatom_collect(c, &rs, &e), e);
				ck_assert_uint_eq(rs.id, w->id);
				ck_assert_uint_eq(rs.applied, (uint64_t)w->count);
				ck_assert_uint_eq(rs.data_bytes,
				                  w->returns_old ? (size_t)w->count * w->esize : 0);
				for (int i = 0; w->returns_old && i < w->count; i++) {
					int64_t got;
					if (w->esize == 4) {
						int32_t g32;
						memcpy(&g32, (const uint8_t *)rs.data + 4 * i, 4);
						got = g32;
					} else {
						memcpy(&got, (const uint8_t *)rs.data + 8 * i, 8);
					}
					ck_assert_msg(
					    got == w->old[i],
					    "request %d element %d: old %lld, expected %lld", done,
					    i, (long long)got, (long long)w->old[i]);
				}
			}
		}
	}
	for (int t = 0; t < 4; t++) {
		int64_t got[16];
		if (t == 2) {
			int32_t g32[16];
			read_i32(c, names[t], g32, 16);
			for (int i = 0; i < 16; i++)
				got[i] = g32[i];
		} else {
			read_i64(c, names[t], got, 16);
		}
		for (int i = 0; i < 16; i++)
			ck_assert_msg(got[i] == model[t][i], "%s[%d] = %lld, expected %lld",
			              names[t], i, (long long)got[i], (long long)model[t][i]);
		CK(tileatom_destroy(c, names[t], &e), e);
	}
	free(reqs);
	tileatom_close(c);
}
END_TEST

/* Collects the next response of a pipeline of single adds of 1 to one int64 element and
 * checks it: id *next_id, old value *expect (the k-th add saw k earlier ones). */
static void collect_next_add(tileatom_client *c, uint64_t *next_id, int64_t *expect)
{
	tileatom_error e = {0, ""};
	tileatom_response r;
	CK(tileatom_collect(c, &r, &e), e);
	ck_assert_uint_eq(r.id, *next_id);
	ck_assert_uint_eq(r.data_bytes, sizeof(int64_t));
	int64_t old;
	memcpy(&old, r.data, sizeof(old));
	ck_assert_int_eq(old, *expect);
	(*next_id)++;
	(*expect)++;
}

/* Busy polling on the client (tileatom_set_busy_poll): synchronous calls and a pipeline
 * give the same exact answers whether the response comes within the spin (1 s, past the
 * cap of 1 s: capped) or after it (1 us: the wait then sleeps in poll as without it). */
START_TEST(test_busy_poll_client)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "spin", TILEATOM_INT64, 4);
	const unsigned spins[] = {5000000u, 1u, 0u};
	int64_t expect = 0;
	for (size_t s = 0; s < sizeof(spins) / sizeof(spins[0]); s++) {
		tileatom_set_busy_poll(c, spins[s]);
		int64_t one = 1, old = -1;
		for (int k = 0; k < 50; k++) {
			CK(tileatom_atomic_at(c, "spin", TILEATOM_OP_ADD, 2, TILEATOM_INT64, &one,
			                      NULL, NULL, &old, &e),
			   e);
			ck_assert_int_eq(old, expect);
			expect++;
		}
		uint64_t first = 0, id = 0;
		for (int k = 0; k < 300; k++) {
			CK(tileatom_submit_atomic_at(c, "spin", TILEATOM_OP_ADD, 2, TILEATOM_INT64,
			                             &one, NULL, NULL, &id, &e),
			   e);
			if (k == 0)
				first = id;
		}
		for (int k = 0; k < 300; k++)
			collect_next_add(c, &first, &expect);
		CK(tileatom_ping(c, &e), e);
	}
	int64_t all[4];
	read_i64(c, "spin", all, 4);
	ck_assert_int_eq(all[0], 0);
	ck_assert_int_eq(all[1], 0);
	ck_assert_int_eq(all[2], 3 * 350);
	ck_assert_int_eq(all[3], 0);
	CK(tileatom_destroy(c, "spin", &e), e);
	tileatom_close(c);
}
END_TEST

/* A pipeline kept deep (20,000 in flight, then one submit and one collect 20,000 times):
 * the library's sends block while the daemon's answers pile up, so responses are queued
 * while older ones are consumed and the receive store drops its consumed start as it goes
 * (client/tac_conn.c, rxq_release). Every response comes in order with its exact old
 * value. */
START_TEST(test_pipeline_kept_deep)
{
	const int depth = tcu_slow() ? 4000 : 20000, rounds = 2 * depth;
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "deep", TILEATOM_INT64, 1);
	int64_t one = 1, expect = 0;
	uint64_t next_id = 0;
	for (int k = 0; k < rounds; k++) {
		uint64_t id;
		CK(tileatom_submit_atomic_at(c, "deep", TILEATOM_OP_ADD, 0, TILEATOM_INT64, &one,
		                             NULL, NULL, &id, &e),
		   e);
		if (k == 0)
			next_id = id;
		if (k >= depth)
			collect_next_add(c, &next_id, &expect);
	}
	while (tileatom_pending(c) > 0)
		collect_next_add(c, &next_id, &expect);
	ck_assert_int_eq(expect, rounds);
	int64_t total;
	read_i64(c, "deep", &total, 1);
	ck_assert_int_eq(total, rounds);
	CK(tileatom_destroy(c, "deep", &e), e);
	tileatom_close(c);
}
END_TEST

/* Arguments of one concurrent worker thread. */
typedef struct worker {
	int index;      /* 0..7 */
	int iterations; /* adds or critical sections */
	int64_t *olds;  /* adds: old values seen (iterations entries) */
	int failures;   /* calls that failed */
	int overlaps;   /* cas lock: times another holder was seen inside */
	char msg[256];  /* first failure */
} worker;

/* 8 x N adds of 1 to element 0 of "conc", recording the old values. */
static void *add_worker(void *arg)
{
	worker *w = arg;
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	if (tileatom_connect(D.socket, 10000, &c, &e) != TILEATOM_OK) {
		w->failures++;
		snprintf(w->msg, sizeof(w->msg), "%s", e.message);
		return NULL;
	}
	int64_t one = 1;
	for (int k = 0; k < w->iterations; k++) {
		if (tileatom_atomic_at(c, "conc", TILEATOM_OP_ADD, 0, TILEATOM_INT64, &one, NULL,
		                       NULL, &w->olds[k], &e) != TILEATOM_OK) {
			if (w->failures++ == 0)
				snprintf(w->msg, sizeof(w->msg), "%s", e.message);
		}
	}
	tileatom_close(c);
	return NULL;
}

START_TEST(test_concurrent_adds)
{
	const int threads = 8, n = tcu_slow() ? 300 : 10000;
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "conc", TILEATOM_INT64, 1);
	worker w[8];
	pthread_t th[8];
	for (int i = 0; i < threads; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].index = i;
		w[i].iterations = n;
		w[i].olds = calloc((size_t)n, sizeof(int64_t));
		ck_assert_ptr_nonnull(w[i].olds);
		ck_assert_int_eq(pthread_create(&th[i], NULL, add_worker, &w[i]), 0);
	}
	for (int i = 0; i < threads; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
	int64_t total;
	read_i64(c, "conc", &total, 1);
	ck_assert_int_eq(total, (int64_t)threads * n);
	/* Every add saw a distinct old value: together exactly 0 .. 8n-1. */
	uint8_t *seen = calloc((size_t)threads * (size_t)n, 1);
	ck_assert_ptr_nonnull(seen);
	for (int i = 0; i < threads; i++) {
		ck_assert_msg(w[i].failures == 0, "thread %d: %d failures: %s", i, w[i].failures,
		              w[i].msg);
		int64_t prev = -1;
		for (int k = 0; k < n; k++) {
			int64_t o = w[i].olds[k];
			ck_assert(o >= 0 && o < (int64_t)threads * n);
			ck_assert_msg(!seen[o], "old value %lld seen twice", (long long)o);
			seen[o] = 1;
			/* One client's adds are applied in the order it sent them. */
			ck_assert(o > prev);
			prev = o;
		}
		free(w[i].olds);
	}
	free(seen);
	CK(tileatom_destroy(c, "conc", &e), e);
	tileatom_close(c);
}
END_TEST

/* Takes the lock tile "lock" (cas 0 -> 1, acquire), then a non-atomic read / +1 / write of
 * "guarded", checking through "inside" that nobody else holds the lock, then releases. */
static void *lock_worker(void *arg)
{
	worker *w = arg;
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	if (tileatom_connect(D.socket, 10000, &c, &e) != TILEATOM_OK) {
		w->failures++;
		snprintf(w->msg, sizeof(w->msg), "%s", e.message);
		return NULL;
	}
	int32_t zero = 0, one = 1, old;
	int64_t inc = 1, dec = 1, inside_old;
	tileatom_op_options acq = TILEATOM_OP_OPTIONS_INIT, rel = TILEATOM_OP_OPTIONS_INIT;
	acq.sem = TILEATOM_SEM_ACQUIRE;
	rel.sem = TILEATOM_SEM_RELEASE;
	for (int k = 0; k < w->iterations && w->failures == 0; k++) {
		for (;;) {
			if (tileatom_atomic_at(c, "lock", TILEATOM_OP_CAS, 0, TILEATOM_INT32, &one,
			                       &zero, &acq, &old, &e) != TILEATOM_OK)
				goto fail;
			if (old == 0)
				break;
			sched_yield();
		}
		if (tileatom_atomic_at(c, "inside", TILEATOM_OP_ADD, 0, TILEATOM_INT64, &inc, NULL,
		                       NULL, &inside_old, &e) != TILEATOM_OK)
			goto fail;
		if (inside_old != 0)
			w->overlaps++;
		int64_t value;
		size_t nb;
		if (tileatom_read(c, "guarded", NULL, &value, sizeof(value), &nb, &e) !=
		    TILEATOM_OK)
			goto fail;
		value += 1;
		tileatom_array va = tileatom_scalar(TILEATOM_INT64, &value);
		if (tileatom_write(c, "guarded", NULL, &va, &e) != TILEATOM_OK)
			goto fail;
		if (tileatom_atomic_at(c, "inside", TILEATOM_OP_SUB, 0, TILEATOM_INT64, &dec, NULL,
		                       NULL, &inside_old, &e) != TILEATOM_OK)
			goto fail;
		if (inside_old != 1)
			w->overlaps++;
		if (tileatom_atomic_at(c, "lock", TILEATOM_OP_EXCH, 0, TILEATOM_INT32, &zero, NULL,
		                       &rel, &old, &e) != TILEATOM_OK)
			goto fail;
		if (old != 1)
			w->overlaps++;
	}
	tileatom_close(c);
	return NULL;
fail:
	w->failures++;
	snprintf(w->msg, sizeof(w->msg), "%s", e.message);
	tileatom_close(c);
	return NULL;
}

START_TEST(test_cas_lock)
{
	const int threads = 8, n = tcu_slow() ? 15 : 250;
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	create_1d(c, "lock", TILEATOM_INT32, 1);
	create_1d(c, "inside", TILEATOM_INT64, 1);
	create_1d(c, "guarded", TILEATOM_INT64, 1);
	worker w[8];
	pthread_t th[8];
	for (int i = 0; i < threads; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].index = i;
		w[i].iterations = n;
		ck_assert_int_eq(pthread_create(&th[i], NULL, lock_worker, &w[i]), 0);
	}
	for (int i = 0; i < threads; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < threads; i++) {
		ck_assert_msg(w[i].failures == 0, "thread %d: %s", i, w[i].msg);
		ck_assert_msg(w[i].overlaps == 0, "thread %d saw the lock held twice", i);
	}
	int64_t guarded;
	read_i64(c, "guarded", &guarded, 1);
	ck_assert_int_eq(guarded, (int64_t)threads * n);
	int32_t lock;
	read_i32(c, "lock", &lock, 1);
	ck_assert_int_eq(lock, 0);
	CK(tileatom_destroy(c, "lock", &e), e);
	CK(tileatom_destroy(c, "inside", &e), e);
	CK(tileatom_destroy(c, "guarded", &e), e);
	tileatom_close(c);
}
END_TEST

/* A blocking raw connection to the shared daemon. */
static int raw_connect(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un sun;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(D.socket), sizeof(sun.sun_path));
	memcpy(sun.sun_path, D.socket, strlen(D.socket) + 1);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0, "connect: %s",
	              strerror(errno));
	return fd;
}

/* Writes all of buf (ignoring EPIPE: the daemon may close first). */
static void raw_send(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

/* Reads until EOF for up to timeout_ms into buf (cap bytes); returns the bytes read, or -1
 * when the connection stayed open. */
static ssize_t raw_read_to_eof(int fd, uint8_t *buf, size_t cap, int timeout_ms)
{
	size_t have = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = timeout_ms -
		            ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return -1;
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		uint8_t tmp[4096];
		ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
		if (n == 0)
			return (ssize_t)have;
		if (n < 0)
			return errno == ECONNRESET ? (ssize_t)have : -1;
		size_t take = (size_t)n < cap - have ? (size_t)n : cap - have;
		memcpy(buf + have, tmp, take);
		have += take;
	}
}

/* When bytes came back, they must be one frame holding an error Response. */
static void expect_error_frame(const uint8_t *buf, ssize_t n, const char *what)
{
	if (n <= 0)
		return;
	ck_assert_msg(n >= 4, "%s: %zd stray bytes", what, n);
	uint32_t len = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
	               (uint32_t)buf[3] << 24;
	ck_assert_msg((ssize_t)len + 4 <= n, "%s: truncated response frame", what);
	Tileatom__Response *r = tileatom__response__unpack(NULL, len, buf + 4);
	ck_assert_msg(r != NULL, "%s: undecodable response", what);
	ck_assert_msg(r->status != TILEATOM__STATUS__OK, "%s: status OK", what);
	ck_assert_msg(r->message && *r->message, "%s: no message", what);
	tileatom__response__free_unpacked(r, NULL);
}

/* The bystander client must be served normally. */
static void bystander_works(tileatom_client *b, int64_t *expect)
{
	tileatom_error e = {0, ""};
	int64_t one = 1, old = -1;
	CK(tileatom_ping(b, &e), e);
	CK(tileatom_atomic_at(b, "bystander", TILEATOM_OP_ADD, 0, TILEATOM_INT64, &one, NULL, NULL,
	                      &old, &e),
	   e);
	ck_assert_int_eq(old, *expect);
	(*expect)++;
}

START_TEST(test_malformed_frames)
{
	tileatom_client *b = conn();
	tileatom_error e = {0, ""};
	create_1d(b, "bystander", TILEATOM_INT64, 1);
	int64_t expect = 0;
	bystander_works(b, &expect);
	uint8_t buf[8192];

	/* 1. A frame of garbage: an error response (optional) and the connection closed. */
	int g = raw_connect();
	uint8_t garbage[4 + 64];
	garbage[0] = 64;
	garbage[1] = garbage[2] = garbage[3] = 0;
	memset(garbage + 4, 0xff, 64);
	raw_send(g, garbage, sizeof(garbage));
	ssize_t n = raw_read_to_eof(g, buf, sizeof(buf), 10000);
	ck_assert_msg(n >= 0, "garbage: the daemon kept the connection open");
	expect_error_frame(buf, n, "garbage");
	close(g);
	bystander_works(b, &expect);

	/* 2. A truncated frame held open: others are served meanwhile. */
	int t = raw_connect();
	uint8_t trunc[4 + 10] = {100, 0, 0, 0, 0x08, 0x01, 0x1a, 0x00};
	raw_send(t, trunc, sizeof(trunc));
	bystander_works(b, &expect);
	tileatom_client *fresh = conn();
	CK(tileatom_ping(fresh, &e), e);
	tileatom_close(fresh);
	close(t);
	bystander_works(b, &expect);

	/* 3. An oversized length: refused before any allocation, connection closed. */
	int o = raw_connect();
	uint8_t huge[8] = {0xf0, 0xff, 0xff, 0xff, 1, 2, 3, 4};
	raw_send(o, huge, sizeof(huge));
	n = raw_read_to_eof(o, buf, sizeof(buf), 10000);
	ck_assert_msg(n >= 0, "oversized: the daemon kept the connection open");
	expect_error_frame(buf, n, "oversized");
	close(o);
	bystander_works(b, &expect);

	/* 4. Raw random bytes with no sensible framing, then a hang-up mid-frame. */
	int r = raw_connect();
	uint64_t seed = 0x9e3779b97f4a7c15u;
	uint8_t rnd[512];
	for (size_t i = 0; i < sizeof(rnd); i++)
		rnd[i] = (uint8_t)tcu_rand(&seed);
	rnd[0] = 200; /* a plausible length, so the rest is parsed as one bad message */
	rnd[1] = rnd[2] = rnd[3] = 0;
	raw_send(r, rnd, sizeof(rnd));
	n = raw_read_to_eof(r, buf, sizeof(buf), 10000);
	ck_assert_msg(n >= 0, "random bytes: the daemon kept the connection open");
	close(r);
	int h = raw_connect();
	raw_send(h, trunc, 6);
	close(h);

	bystander_works(b, &expect);
	ck_assert(tcu_daemon_alive(&D));
	int64_t total;
	read_i64(b, "bystander", &total, 1);
	ck_assert_int_eq(total, expect);
	CK(tileatom_destroy(b, "bystander", &e), e);
	tileatom_close(b);
}
END_TEST

START_TEST(test_frame_limit)
{
	/* A request over the daemon's frame limit: the daemon answers RESOURCE_EXHAUSTED and
	 * closes; the client reports that status and message even though its send failed. */
	static const char *const extra[] = {"--max-frame", "1M", NULL};
	tcu_daemon d;
	ck_assert(tcu_daemon_start(&d, extra));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	int64_t n = 1 << 20;
	CK(tileatom_create(c, "w", TILEATOM_INT32, 1, &n, NULL, NULL, &e), e);
	int32_t *v = calloc((size_t)n, sizeof(int32_t));
	ck_assert_ptr_nonnull(v);
	tileatom_array a = tileatom_vector(TILEATOM_INT32, n, v);
	tileatom_set_shm_threshold(c, 0); /* inline: shared memory would make it fit */
	ck_assert_int_eq(tileatom_write(c, "w", NULL, &a, &e), TILEATOM_E_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(e.message, "exceeds the limit"), "message: %s", e.message);
	ck_assert_int_eq(tileatom_ping(c, &e), TILEATOM_E_IO);
	tileatom_close(c);
	free(v);
	/* A fresh connection works, and a write under the limit passes. */
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	int64_t small = 1000;
	CK(tileatom_create(c, "w2", TILEATOM_INT32, 1, &small, NULL, NULL, &e), e);
	int32_t seven = 7;
	tileatom_array s = tileatom_scalar(TILEATOM_INT32, &seven);
	CK(tileatom_write(c, "w2", NULL, &s, &e), e);
	tileatom_close(c);
	ck_assert_int_eq(tcu_daemon_stop(&d, 20000), 0);
	tcu_daemon_cleanup(&d);
}
END_TEST

START_TEST(test_frame_limit_pipelined)
{
	/* The same refusal behind a pipelined request that failed on its own (NOT_FOUND): the
	 * send failure is explained by the daemon's connection error (id 0), not by the earlier
	 * response queued before it. */
	static const char *const extra[] = {"--max-frame", "1M", NULL};
	tcu_daemon d;
	ck_assert(tcu_daemon_start(&d, extra));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	int64_t n = 1 << 20;
	CK(tileatom_create(c, "w", TILEATOM_INT32, 1, &n, NULL, NULL, &e), e);
	int32_t *v = calloc((size_t)n, sizeof(int32_t));
	ck_assert_ptr_nonnull(v);
	tileatom_array a = tileatom_vector(TILEATOM_INT32, n, v);
	CK(tileatom_submit_read(c, "missing", NULL, NULL, &e), e);
	ck_assert_int_eq(tileatom_submit_write(c, "w", NULL, &a, NULL, &e),
	                 TILEATOM_E_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(e.message, "exceeds the limit"), "message: %s", e.message);
	tileatom_close(c);
	free(v);
	ck_assert_int_eq(tcu_daemon_stop(&d, 20000), 0);
	tcu_daemon_cleanup(&d);
}
END_TEST

/* Reads a 1-D int64 tile of n elements in reads of 20000 (under a small frame limit). */
static void read_i64_parts(tileatom_client *c, const char *tile, int64_t *out, int64_t n)
{
	tileatom_error e = {0, ""};
	for (int64_t k0 = 0; k0 < n; k0 += 20000) {
		int64_t len = n - k0 < 20000 ? n - k0 : 20000;
		tileatom_region part = {1, {k0}, {len}};
		size_t nb = 0;
		CK(tileatom_read(c, tile, &part, out + k0, (size_t)len * sizeof(int64_t), &nb, &e),
		   e);
		ck_assert_uint_eq(nb, (size_t)len * sizeof(int64_t));
	}
}

START_TEST(test_split_over_frame_limit)
{
	/* A request larger than --max-frame: tileatom_indexed splits it into parts that fit
	 * (the limit comes from Hello), with exact bins and counts, old values in order, and a
	 * reject-whole request whose only bad index lies in the last part applies nothing. */
	static const char *const extra[] = {"--max-frame", "256K", NULL};
	tcu_daemon d;
	ck_assert(tcu_daemon_start(&d, extra));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	ck_assert_uint_eq(tileatom_server_max_frame(c), 256u << 10);
	tileatom_set_shm_threshold(c, 0); /* split, do not stage in shared memory */
	int64_t bins = 1000, n = 300000;  /* 1.2 MB of int32 keys: 5 parts */
	CK(tileatom_create(c, "h", TILEATOM_INT32, 1, &bins, NULL, NULL, &e), e);
	int32_t *keys = malloc((size_t)n * sizeof(int32_t));
	ck_assert_ptr_nonnull(keys);
	int32_t expect[1000] = {0};
	for (int64_t k = 0; k < n; k++) {
		keys[k] = (int32_t)((k * 7919) % 1003) - 1; /* -1 and 1000, 1001 are outside */
		if (keys[k] >= 0 && keys[k] < 1000)
			expect[keys[k]]++;
	}
	int32_t one = 1;
	tileatom_array idx = tileatom_vector(TILEATOM_INT32, n, keys);
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	o.space = TILEATOM_SPACE_SHARED;
	tileatom_op_result r;
	CK(tileatom_indexed(c, "h", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL, &o, &r, &e),
	   e);
	int32_t got[1000];
	read_i32(c, "h", got, 1000);
	uint64_t inside = 0;
	for (int b = 0; b < 1000; b++) {
		ck_assert_int_eq(got[b], expect[b]);
		inside += (uint64_t)expect[b];
	}
	ck_assert_uint_eq(r.applied, inside);
	ck_assert_uint_eq(r.skipped, (uint64_t)n - inside);

	/* old values over parts: a permutation of a 100000-element int64 tile holding k * 3 */
	int64_t m = 100000;
	CK(tileatom_create(c, "p", TILEATOM_INT64, 1, &m, NULL, NULL, &e), e);
	int64_t *init = malloc((size_t)m * sizeof(int64_t));
	int64_t *perm = malloc((size_t)m * sizeof(int64_t));
	int64_t *addv = malloc((size_t)m * sizeof(int64_t));
	int64_t *old = malloc((size_t)m * sizeof(int64_t));
	ck_assert(init && perm && addv && old);
	for (int64_t k = 0; k < m; k++) {
		init[k] = k * 3;
		perm[k] = (k * 7919) % m; /* 7919 is prime and does not divide 100000 */
		addv[k] = k;
	}
	for (int64_t k0 = 0; k0 < m; k0 += 20000) { /* writes are not split: 160 KB each */
		tileatom_region part = {1, {k0}, {20000}};
		tileatom_array initv = tileatom_vector(TILEATOM_INT64, 20000, init + k0);
		CK(tileatom_write(c, "p", &part, &initv, &e), e);
	}
	tileatom_array pidx = tileatom_vector(TILEATOM_INT64, m, perm);
	tileatom_array pval = tileatom_vector(TILEATOM_INT64, m, addv);
	tileatom_op_options_init(&o);
	o.want_old = true;
	o.old_out = old;
	o.old_out_size = (size_t)m * sizeof(int64_t);
	CK(tileatom_indexed(c, "p", TILEATOM_OP_ADD, NULL, 1, &pidx, true, &pval, NULL, &o, &r, &e),
	   e);
	ck_assert_uint_eq(r.applied, (uint64_t)m);
	ck_assert_uint_eq(r.old_bytes, (size_t)m * sizeof(int64_t));
	for (int64_t k = 0; k < m; k++)
		ck_assert_int_eq(old[k], perm[k] * 3);
	int64_t *after = malloc((size_t)m * sizeof(int64_t));
	ck_assert_ptr_nonnull(after);
	read_i64_parts(c, "p", after, m);
	for (int64_t k = 0; k < m; k++)
		ck_assert_int_eq(after[perm[k]], perm[k] * 3 + k);

	/* reject-whole: the one bad index is the very last element (in the last part) */
	perm[m - 1] = m;
	tileatom_op_options_init(&o);
	o.check_bounds = false;
	ck_assert_int_eq(tileatom_indexed(c, "p", TILEATOM_OP_ADD, NULL, 1, &pidx, true, &pval,
	                                  NULL, &o, &r, &e),
	                 TILEATOM_E_OUT_OF_RANGE);
	ck_assert_msg(strstr(e.message, "nothing was applied"), "message: %s", e.message);
	int64_t *again = malloc((size_t)m * sizeof(int64_t));
	ck_assert_ptr_nonnull(again);
	read_i64_parts(c, "p", again, m);
	ck_assert_int_eq(memcmp(again, after, (size_t)m * sizeof(int64_t)), 0);
	/* the same index masked off is not checked, and the rest applies */
	uint8_t *mask = malloc((size_t)m);
	ck_assert_ptr_nonnull(mask);
	memset(mask, 1, (size_t)m);
	mask[m - 1] = 0;
	tileatom_array marr = tileatom_vector(TILEATOM_BOOL, m, mask);
	o.mask = &marr;
	CK(tileatom_indexed(c, "p", TILEATOM_OP_ADD, NULL, 1, &pidx, true, &pval, NULL, &o, &r, &e),
	   e);
	ck_assert_uint_eq(r.applied, (uint64_t)m - 1);
	read_i64_parts(c, "p", again, m);
	for (int64_t k = 0; k < m - 1; k++)
		ck_assert_int_eq(again[perm[k]], perm[k] * 3 + 2 * k);
	/* n-d operands over the limit cannot be split: refused before sending */
	tileatom_array idx2 = idx;
	idx2.rank = 2;
	idx2.shape[0] = 2;
	idx2.shape[1] = n / 2;
	ck_assert_int_eq(tileatom_indexed(c, "h", TILEATOM_OP_ADD, NULL, 1, &idx2, true, &val, NULL,
	                                  NULL, &r, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "cannot be split"), "message: %s", e.message);
	CK(tileatom_ping(c, &e), e);
	free(mask);
	free(again);
	free(after);
	free(init);
	free(perm);
	free(addv);
	free(old);
	free(keys);
	tileatom_close(c);
	ck_assert_int_eq(tcu_daemon_stop(&d, 20000), 0);
	tcu_daemon_cleanup(&d);
}
END_TEST

/* Number of open fds of process pid (from /proc). */
static int count_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Sends one request frame on raw socket fd, with passfd attached (SCM_RIGHTS) when >= 0. */
static void raw_request(int fd, Tileatom__Request *req, int passfd)
{
	size_t len = tileatom__request__get_packed_size(req);
	uint8_t *frame = malloc(len + 4);
	ck_assert_ptr_nonnull(frame);
	frame[0] = (uint8_t)len;
	frame[1] = (uint8_t)(len >> 8);
	frame[2] = (uint8_t)(len >> 16);
	frame[3] = (uint8_t)(len >> 24);
	tileatom__request__pack(req, frame + 4);
	if (passfd >= 0) {
		ck_assert_int_eq(ta_frame_send_fd(fd, frame, len + 4, passfd), (ssize_t)(len + 4));
	} else {
		raw_send(fd, frame, len + 4);
	}
	free(frame);
}

/* Reads one response frame from raw socket fd (10 s at most); free with
 * tileatom__response__free_unpacked. */
static Tileatom__Response *raw_response(int fd)
{
	struct timeval tv = {10, 0};
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	uint8_t hdr[4];
	size_t have = 0;
	while (have < 4) {
		ssize_t n = recv(fd, hdr + have, 4 - have, 0);
		ck_assert_msg(n > 0, "no response frame");
		have += (size_t)n;
	}
	size_t len = hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
	uint8_t *p = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(p);
	for (have = 0; have < len;) {
		ssize_t n = recv(fd, p + have, len - have, 0);
		ck_assert_msg(n > 0, "truncated response frame");
		have += (size_t)n;
	}
	Tileatom__Response *r = tileatom__response__unpack(NULL, len, p);
	free(p);
	ck_assert_ptr_nonnull(r);
	return r;
}

/* A memfd of size bytes, sealed against resizing when sealed. */
static int make_memfd(size_t size, bool sealed)
{
	int fd = memfd_create("check-integration", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (sealed)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	return fd;
}

START_TEST(test_shared_buffers)
{
	/* Operands and old values through a shared buffer: exact results; the library's own
	 * staging of a large synchronous request; the buffer's fd released with the
	 * connection. */
	tcu_daemon d;
	ck_assert(tcu_daemon_start(&d, NULL));
	int fds_before = count_fds(d.pid);
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	int64_t n = 100000;
	CK(tileatom_create(c, "s", TILEATOM_INT64, 1, &n, NULL, NULL, &e), e);
	int fds_connected = count_fds(d.pid);
	tileatom_buffer *buf = NULL;
	size_t idx_off = 0, val_off = (size_t)n * 8, old_off = (size_t)n * 16;
	CK(tileatom_buffer_create(c, (size_t)n * 24, &buf, &e), e);
	ck_assert_uint_eq(tileatom_buffer_size(buf), (size_t)n * 24);
	int64_t *idx = (int64_t *)((uint8_t *)tileatom_buffer_data(buf) + idx_off);
	int64_t *val = (int64_t *)((uint8_t *)tileatom_buffer_data(buf) + val_off);
	int64_t *old = (int64_t *)((uint8_t *)tileatom_buffer_data(buf) + old_off);
	for (int64_t k = 0; k < n; k++) {
		idx[k] = (k * 7919) % n; /* a permutation */
		val[k] = k + 1;
	}
	tileatom_array ia = tileatom_buffer_array(buf, TILEATOM_INT64, 1, &n, idx_off);
	tileatom_array va = tileatom_buffer_array(buf, TILEATOM_INT64, 1, &n, val_off);
	tileatom_op_options o;
	tileatom_op_options_init(&o);
	tileatom_op_result r;
	CK(tileatom_indexed(c, "s", TILEATOM_OP_ADD, NULL, 1, &ia, true, &va, NULL, &o, &r, &e), e);
	ck_assert_uint_eq(r.applied, (uint64_t)n);
	/* again with old values written into the buffer by the daemon */
	o.want_old = true;
	o.old_out = old;
	o.old_out_size = (size_t)n * 8;
	CK(tileatom_indexed(c, "s", TILEATOM_OP_ADD, NULL, 1, &ia, true, &va, NULL, &o, &r, &e), e);
	ck_assert_uint_eq(r.old_bytes, (size_t)n * 8);
	for (int64_t k = 0; k < n; k++)
		ck_assert_int_eq(old[k], k + 1);
	int64_t *tile = malloc((size_t)n * 8);
	ck_assert_ptr_nonnull(tile);
	read_i64(c, "s", tile, (size_t)n);
	for (int64_t k = 0; k < n; k++)
		ck_assert_int_eq(tile[idx[k]], 2 * (k + 1));
	int fds_open = count_fds(d.pid);
	ck_assert_int_eq(fds_open, fds_connected + 1); /* the memfd */
	/* staging: an 800 KB inline write (over a threshold of 64 KiB) goes by the library's
	 * buffer */
	tileatom_set_shm_threshold(c, 64 << 10);
	int64_t *inl = malloc((size_t)n * 8);
	ck_assert_ptr_nonnull(inl);
	for (int64_t k = 0; k < n; k++)
		inl[k] = 3 * k - 7;
	tileatom_array wa = tileatom_vector(TILEATOM_INT64, n, inl);
	CK(tileatom_write(c, "s", NULL, &wa, &e), e);
	read_i64(c, "s", tile, (size_t)n);
	ck_assert_int_eq(memcmp(tile, inl, (size_t)n * 8), 0);
	ck_assert_int_gt(count_fds(d.pid), fds_open); /* the staging buffer is registered too */
	/* a pipelined request over the buffer: the response carries no bytes of operands */
	CK(tileatom_submit_indexed(c, "s", TILEATOM_OP_SUB, NULL, 1, &ia, true, &va, NULL, NULL,
	                           NULL, &e),
	   e);
	tileatom_response pr;
	CK(tileatom_collect(c, &pr, &e), e);
	ck_assert_int_eq(pr.status, TILEATOM_OK);
	ck_assert_uint_eq(pr.applied, (uint64_t)n);
	read_i64(c, "s", tile, (size_t)n);
	for (int64_t k = 0; k < n; k++)
		ck_assert_int_eq(tile[idx[k]], inl[idx[k]] - (k + 1));
	tileatom_buffer_free(buf);
	tileatom_close(c);
	/* the daemon's fds go back once the connection is gone */
	int fds_after = count_fds(d.pid);
	/* (fds_before may still count the start-up probe's connection: wait for both) */
	/* (up to 20 s: a bound for a busy machine, not a speed goal) */
	for (int i = 0; i < 1000 && (fds_after > fds_before || fds_after > fds_connected - 1);
	     i++) {
		usleep(20000);
		fds_after = count_fds(d.pid);
	}
	ck_assert_int_le(fds_after, fds_before);
	ck_assert_int_le(fds_after, fds_connected - 1); /* connection, memfd, staging: gone */
	free(inl);
	free(tile);
	ck_assert_int_eq(tcu_daemon_stop(&d, 20000), 0);
	tcu_daemon_cleanup(&d);
}
END_TEST

START_TEST(test_shared_buffer_refusals)
{
	/* Over the wire: an unsealed memfd is refused, references outside a buffer and wrong
	 * old_into lengths get INVALID_ARGUMENT, a register without an fd too; the connection
	 * and other clients go on. */
	tileatom_client *b = conn();
	create_1d(b, "shr", TILEATOM_INT32, 16);
	int s = raw_connect();
	Tileatom__Request req;
	Tileatom__RegisterBufferRequest reg;
	Tileatom__HelloRequest hello;
	tileatom__request__init(&req);
	tileatom__hello_request__init(&hello);
	hello.protocol_version = TILEATOM_PROTOCOL_VERSION;
	req.id = 100;
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &hello;
	raw_request(s, &req, -1); /* Hello first */
	Tileatom__Response *hr = raw_response(s);
	ck_assert_int_eq(hr->status, TILEATOM__STATUS__OK);
	ck_assert_uint_gt(hr->hello->max_frame, 0);
	tileatom__response__free_unpacked(hr, NULL);
	/* unsealed */
	int unsealed = make_memfd(4096, false);
	tileatom__request__init(&req);
	tileatom__register_buffer_request__init(&reg);
	reg.size = 4096;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_REGISTER_BUFFER;
	req.register_buffer = &reg;
	raw_request(s, &req, unsealed);
	close(unsealed);
	Tileatom__Response *r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__PERMISSION_DENIED);
	ck_assert_msg(strstr(r->message, "F_SEAL_SHRINK"), "message: %s", r->message);
	tileatom__response__free_unpacked(r, NULL);
	/* no fd at all */
	req.id = 2;
	raw_request(s, &req, -1);
	r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_msg(strstr(r->message, "no file descriptor"), "message: %s", r->message);
	tileatom__response__free_unpacked(r, NULL);
	/* a size that is not the file's */
	int sealed = make_memfd(4096, true);
	req.id = 3;
	reg.size = 8192;
	raw_request(s, &req, sealed);
	r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	tileatom__response__free_unpacked(r, NULL);
	/* a good one */
	req.id = 4;
	reg.size = 4096;
	raw_request(s, &req, sealed);
	close(sealed);
	r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__OK);
	ck_assert_int_eq(r->body_case, TILEATOM__RESPONSE__BODY_BUFFER);
	uint64_t id = r->buffer->buffer_id;
	ck_assert_uint_eq(r->buffer->size, 4096);
	tileatom__response__free_unpacked(r, NULL);
	/* indexed flat add whose indices lie past the end of the buffer */
	raw_ref_add a;
	raw_ref_add_init(&a, "shr", 5, id, 4096 - 16, 32);
	raw_request(s, &a.req, -1);
	r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_msg(strstr(r->message, "outside shared buffer"), "message: %s", r->message);
	tileatom__response__free_unpacked(r, NULL);
	/* an unknown buffer id */
	a.ref.offset = 0;
	a.ref.buffer_id = id + 7;
	a.req.id = 6;
	raw_request(s, &a.req, -1);
	r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_msg(strstr(r->message, "no shared buffer"), "message: %s", r->message);
	tileatom__response__free_unpacked(r, NULL);
	/* a good reference (zeros: index 0 eight times) with old_into of the wrong length */
	a.ref.buffer_id = id;
	Tileatom__Options opt;
	Tileatom__BufferRef oref;
	tileatom__options__init(&opt);
	tileatom__buffer_ref__init(&oref);
	opt.want_old = true;
	opt.old_into = &oref;
	oref.buffer_id = id;
	oref.offset = 64;
	oref.length = 16;
	a.ix.options = &opt;
	a.req.id = 7;
	raw_request(s, &a.req, -1);
	r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_msg(strstr(r->message, "old_into"), "message: %s", r->message);
	tileatom__response__free_unpacked(r, NULL);
	/* right length: applied, the old values land in the buffer, none in the response */
	oref.length = 32;
	a.req.id = 8;
	raw_request(s, &a.req, -1);
	r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(r->op->applied, 8);
	ck_assert_uint_eq(r->op->old->data.len, 0);
	tileatom__response__free_unpacked(r, NULL);
	close(s);
	int32_t got[16];
	read_i32(b, "shr", got, 16);
	ck_assert_int_eq(got[0], 8); /* only the last request applied */
	tileatom_error e = {0, ""};
	CK(tileatom_destroy(b, "shr", &e), e);
	tileatom_close(b);
}
END_TEST

START_TEST(test_device_buffer_refusals)
{
	/* Device buffers (CUDA IPC handles): the CPU backend refuses them with UNIMPLEMENTED
	 * naming the CUDA backend; the CUDA backend refuses a handle that does not open and
	 * one of the wrong length with INVALID_ARGUMENT; the library checks its arguments;
	 * the connection goes on either way. */
	bool cuda = strcmp(tcu_backend(), "cuda") == 0;
	tileatom_client *c = conn();
	uint8_t handle[TILEATOM_IPC_HANDLE_SIZE];
	memset(handle, 0x5a, sizeof(handle)); /* no allocation has this handle */
	const void *devp = (const void *)(uintptr_t)0x7f0000000000ull;
	tileatom_buffer *buf = NULL;
	tileatom_error e = {0, ""};
	int rc = tileatom_device_buffer_register(c, handle, 4096, devp, &buf, &e);
	ck_assert_ptr_null(buf);
	if (cuda) {
		ck_assert_msg(rc == TILEATOM_E_INVALID_ARGUMENT, "%s: %s", tileatom_strerror(rc),
		              e.message);
		ck_assert_msg(strstr(e.message, "does not open"), "message: %s", e.message);
	} else {
		ck_assert_msg(rc == TILEATOM_E_UNIMPLEMENTED, "%s: %s", tileatom_strerror(rc),
		              e.message);
		ck_assert_msg(strstr(e.message, "need the CUDA backend"), "message: %s", e.message);
	}
	/* the library's own checks */
	ck_assert_int_eq(tileatom_device_buffer_register(c, NULL, 4096, devp, &buf, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_device_buffer_register(c, handle, 0, devp, &buf, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_device_buffer_register(c, handle, 4096, NULL, &buf, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_buffer_is_device(NULL), 0);
	/* the connection still works */
	CK(tileatom_ping(c, &e), e);
	tileatom_close(c);

	/* over the wire: a handle of the wrong length */
	int s = raw_connect();
	Tileatom__Request req;
	Tileatom__RegisterBufferRequest reg;
	Tileatom__HelloRequest hello;
	tileatom__request__init(&req);
	tileatom__hello_request__init(&hello);
	hello.protocol_version = TILEATOM_PROTOCOL_VERSION;
	req.id = 100;
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &hello;
	raw_request(s, &req, -1);
	Tileatom__Response *r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(r, NULL);
	tileatom__request__init(&req);
	tileatom__register_buffer_request__init(&reg);
	reg.size = 4096;
	reg.cuda_ipc_handle.data = handle;
	reg.cuda_ipc_handle.len = 10;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_REGISTER_BUFFER;
	req.register_buffer = &reg;
	raw_request(s, &req, -1);
	r = raw_response(s);
	if (cuda) {
		ck_assert_int_eq(r->status, TILEATOM__STATUS__INVALID_ARGUMENT);
		ck_assert_msg(strstr(r->message, "has 64 bytes, not 10"), "message: %s",
		              r->message);
	} else {
		ck_assert_int_eq(r->status, TILEATOM__STATUS__UNIMPLEMENTED);
		ck_assert_msg(strstr(r->message, "this daemon runs the cpu backend"), "message: %s",
		              r->message);
	}
	tileatom__response__free_unpacked(r, NULL);
	/* a reference to the buffer that was never registered */
	raw_ref_add a;
	raw_ref_add_init(&a, "devref", 2, 1, 0, 32);
	tileatom_client *b = conn();
	create_1d(b, "devref", TILEATOM_INT32, 16);
	raw_request(s, &a.req, -1);
	r = raw_response(s);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_msg(strstr(r->message, "no shared buffer 1"), "message: %s", r->message);
	tileatom__response__free_unpacked(r, NULL);
	close(s);
	CK(tileatom_destroy(b, "devref", &e), e);
	tileatom_close(b);
}
END_TEST

/* The socket file must be gone. */
static void assert_socket_removed(const char *path)
{
	struct stat st;
	ck_assert_msg(stat(path, &st) < 0 && errno == ENOENT, "socket %s still exists", path);
}

START_TEST(test_sigterm_idle)
{
	tcu_daemon d;
	ck_assert(tcu_daemon_start(&d, NULL));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	int st = tcu_daemon_stop(&d, 20000);
	if (st != 0)
		tcu_daemon_dump_log(&d);
	ck_assert_int_eq(st, 0);
	assert_socket_removed(d.socket);
	/* The connected client sees a clean I/O error, not a hang. */
	ck_assert_int_eq(tileatom_ping(c, &e), TILEATOM_E_IO);
	ck_assert_int_eq(tileatom_ping(c, &e), TILEATOM_E_IO);
	ck_assert_msg(strstr(e.message, "broken"), "message: %s", e.message);
	tileatom_close(c);
	tcu_daemon_cleanup(&d);
}
END_TEST

/* Arguments of a load thread for the SIGTERM test. */
typedef struct load_arg {
	const char *socket; /* daemon socket */
	volatile int *stop; /* set when the daemon is gone */
	long ok;            /* successful adds */
	int last_status;    /* the status that ended the loop */
} load_arg;

/* Pipelined adds until the daemon goes away. */
static void *load_worker(void *arg)
{
	load_arg *a = arg;
	tileatom_client *c = NULL;
	if (tileatom_connect(a->socket, 10000, &c, NULL) != TILEATOM_OK)
		return NULL;
	int64_t one = 1;
	while (!*a->stop) {
		int rc = TILEATOM_OK;
		for (int k = 0; k < 16 && rc == TILEATOM_OK; k++)
			rc =
			    tileatom_submit_atomic_at(c, "load", TILEATOM_OP_ADD, 0, TILEATOM_INT64,
			                              &one, NULL, NULL, NULL, NULL);
		while (rc == TILEATOM_OK && tileatom_pending(c) > 0) {
			tileatom_response r;
			rc = tileatom_collect(c, &r, NULL);
			if (rc == TILEATOM_OK)
				__atomic_add_fetch(&a->ok, 1, __ATOMIC_RELAXED);
		}
		if (rc != TILEATOM_OK) {
			a->last_status = rc;
			break;
		}
	}
	tileatom_close(c);
	return NULL;
}

START_TEST(test_sigterm_under_load)
{
	tcu_daemon d;
	ck_assert(tcu_daemon_start(&d, NULL));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	int64_t one = 1;
	CK(tileatom_create(c, "load", TILEATOM_INT64, 1, &one, NULL, NULL, &e), e);
	tileatom_close(c);
	volatile int stop = 0;
	load_arg args[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (load_arg){d.socket, &stop, 0, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, load_worker, &args[i]), 0);
	}
	/* Let the load run until every thread has completed some adds (at most 30 s). */
	for (int waited = 0; waited < 3000; waited++) {
		long least = -1;
		for (int i = 0; i < 4; i++) {
			long ok = __atomic_load_n(&args[i].ok, __ATOMIC_RELAXED);
			if (least < 0 || ok < least)
				least = ok;
		}
		if (least >= 50)
			break;
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	int st = tcu_daemon_stop(&d, 30000);
	stop = 1;
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
	if (st != 0)
		tcu_daemon_dump_log(&d);
	ck_assert_int_eq(st, 0);
	assert_socket_removed(d.socket);
	long total = 0;
	for (int i = 0; i < 4; i++) {
		total += args[i].ok;
		/* Each client ended with a clean error (I/O or UNAVAILABLE), never a hang. */
		ck_assert_msg(args[i].last_status == TILEATOM_E_IO ||
		                  args[i].last_status == TILEATOM_E_UNAVAILABLE ||
		                  args[i].last_status == 0,
		              "thread %d ended with %s", i, tileatom_strerror(args[i].last_status));
	}
	ck_assert_msg(total >= 200, "only %ld adds completed before SIGTERM", total);
	tcu_daemon_cleanup(&d);
}
END_TEST

/* Expects rc to be UNAVAILABLE with a message naming device 1 as failed by the drill. */
static void expect_device1_failed(int rc, const tileatom_error *e, const char *what)
{
	ck_assert_msg(rc == TILEATOM_E_UNAVAILABLE, "%s: %s (%s), expected UNAVAILABLE", what,
	              tileatom_strerror(rc), e->message);
	ck_assert_msg(strstr(e->message, "device 1 failed: fault injected by "
	                                 "TILEATOM_FAIL_DEVICE after 2 requests") != NULL,
	              "%s: message '%s' does not name device 1", what, e->message);
}

/* Faults per device (issue 24): a daemon of 2 CPU pools whose pool 1 fails after its 2nd
 * request (TILEATOM_FAIL_DEVICE=1:2). A tile on pool 0 keeps adding exactly; a tile on
 * pool 1 answers UNAVAILABLE naming device 1; on a tile sharded over both, a request whose
 * rows meet pool 1 is refused whole (pool 0's rows unchanged) while one meeting only pool
 * 0's rows runs; stats (library, CLI line and --json) say device 1 failed and device 0 not. */
START_TEST(test_device_fault_drill)
{
	ck_assert_int_eq(setenv("TILEATOM_FAIL_DEVICE", "1:2", 1), 0);
	tcu_daemon d;
	const char *const extra[] = {"--devices", "2", "--backend", "cpu", NULL};
	ck_assert(tcu_daemon_start(&d, extra));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	int64_t n4 = 4, sh[2] = {4, 2};
	CK(tileatom_create_placed(c, "p0", TILEATOM_INT32, 1, &n4, NULL, 0, "0", NULL, &e), e);
	CK(tileatom_create_placed(c, "p1", TILEATOM_INT32, 1, &n4, NULL, 0, "1", NULL, &e), e);
	CK(tileatom_create_placed(c, "s", TILEATOM_INT32, 2, sh, NULL, 0, "shard", NULL, &e), e);
	char where[TILEATOM_PLACEMENT_MAX];
	CK(tileatom_tile_placement(c, "s", where, sizeof(where), &e), e);
	ck_assert_str_eq(where, "0:[0,2) 1:[2,4)");
	/* pool 1's two requests: s's rows [2,4), then p1 */
	int32_t one_to_8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	tileatom_array all8 = {TILEATOM_INT32, 2, {4, 2}, one_to_8};
	CK(tileatom_write(c, "s", NULL, &all8, &e), e);
	int32_t five = 5, three = 3, ten = 10;
	tileatom_array s5 = tileatom_scalar(TILEATOM_INT32, &five);
	tileatom_array s3 = tileatom_scalar(TILEATOM_INT32, &three);
	tileatom_array s10 = tileatom_scalar(TILEATOM_INT32, &ten);
	CK(tileatom_write(c, "p1", NULL, &s5, &e), e);

	/* pool 0 keeps serving, exactly */
	for (int i = 0; i < 3; i++)
		CK(tileatom_elementwise(c, "p0", TILEATOM_OP_ADD, NULL, &s3, NULL, NULL, NULL, &e),
		   e);
	int32_t got[8];
	read_i32(c, "p0", got, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(got[i], 9);
	/* pool 1's tile: every request refused */
	int rc = tileatom_elementwise(c, "p1", TILEATOM_OP_ADD, NULL, &s3, NULL, NULL, NULL, &e);
	expect_device1_failed(rc, &e, "add to p1");
	size_t nb = 0;
	rc = tileatom_read(c, "p1", NULL, got, sizeof(got), &nb, &e);
	expect_device1_failed(rc, &e, "read of p1");
	int32_t old = 0;
	rc = tileatom_atomic_at(c, "p1", TILEATOM_OP_ADD, 0, TILEATOM_INT32, &three, NULL, NULL,
	                        &old, &e);
	expect_device1_failed(rc, &e, "one-element add to p1");
	/* the sharded tile: a request meeting pool 1's rows is refused whole */
	rc = tileatom_elementwise(c, "s", TILEATOM_OP_ADD, NULL, &s10, NULL, NULL, NULL, &e);
	expect_device1_failed(rc, &e, "add to all of s");
	tileatom_region rows13 = {2, {1, 0}, {2, 2}};
	rc = tileatom_elementwise(c, "s", TILEATOM_OP_ADD, &rows13, &s10, NULL, NULL, NULL, &e);
	expect_device1_failed(rc, &e, "add to rows 1..2 of s");
	tileatom_region rows01 = {2, {0, 0}, {2, 2}};
	CK(tileatom_read(c, "s", &rows01, got, sizeof(got), &nb, &e), e);
	ck_assert_uint_eq(nb, 16);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(got[i], i + 1); /* nothing of the refused adds landed */
	/* ... and one meeting only pool 0's rows runs */
	CK(tileatom_elementwise(c, "s", TILEATOM_OP_ADD, &rows01, &s10, NULL, NULL, NULL, &e), e);
	CK(tileatom_read(c, "s", &rows01, got, sizeof(got), &nb, &e), e);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(got[i], i + 11);
	/* a new tile on pool 1 is refused; auto places on pool 0 */
	rc = tileatom_create_placed(c, "q", TILEATOM_INT32, 1, &n4, NULL, 0, "1", NULL, &e);
	expect_device1_failed(rc, &e, "create on pool 1");
	CK(tileatom_create_placed(c, "q", TILEATOM_INT32, 1, &n4, NULL, 0, "auto", NULL, &e), e);
	CK(tileatom_tile_placement(c, "q", where, sizeof(where), &e), e);
	ck_assert_str_eq(where, "0");

	/* stats: the library, the CLI's line and --json */
	tileatom_device_stats *ds = NULL;
	size_t nd = 0;
	CK(tileatom_stats_devices(c, &ds, &nd, &e), e);
	ck_assert_uint_eq(nd, 2);
	ck_assert(!ds[0].failed);
	ck_assert_str_eq(ds[0].failure, "");
	ck_assert(ds[1].failed);
	ck_assert_str_eq(ds[1].failure, "fault injected by TILEATOM_FAIL_DEVICE after 2 requests");
	ck_assert_uint_eq(ds[1].requests, 2);
	tileatom_free(ds);
	const char *stats[] = {tcu_cli_path(), "-s", d.socket, "stats", NULL, NULL};
	tcu_result r;
	tcu_run(d.dir, NULL, stats, &r);
	ck_assert_msg(r.status == 0, "stats: %s", r.err);
	ck_assert_msg(strstr(r.out, " requests 2 failed 1 cause: fault injected by "
	                            "TILEATOM_FAIL_DEVICE after 2 requests\n") != NULL,
	              "stats: %s", r.out);
	ck_assert_msg(strstr(r.out, "device 0: ") != NULL && strstr(r.out, " failed 0\n") != NULL,
	              "stats: %s", r.out);
	tcu_result_free(&r);
	stats[4] = "--json";
	tcu_run(d.dir, NULL, stats, &r);
	ck_assert_msg(r.status == 0, "stats --json: %s", r.err);
	ck_assert_msg(strstr(r.out, "\"requests\":2,\"failed\":true,\"failure\":\"fault injected "
	                            "by TILEATOM_FAIL_DEVICE after 2 requests\"}") != NULL,
	              "stats --json: %s", r.out);
	ck_assert_msg(strstr(r.out, "\"failed\":false,\"failure\":\"\"}") != NULL,
	              "stats --json: %s", r.out);
	tcu_result_free(&r);
	tileatom_close(c);
	int st = tcu_daemon_stop(&d, 20000);
	if (st != 0)
		tcu_daemon_dump_log(&d);
	ck_assert_int_eq(st, 0);
	tcu_daemon_cleanup(&d);
}
END_TEST

static Suite *integration_suite(void)
{
	Suite *s = suite_create("integration");
	TCase *ops = tcase_create("ops");
	tcase_set_timeout(ops, 300);
	tcase_add_test(ops, test_hello_ping_stats);
	tcase_add_test(ops, test_stats_count_pipelined_repeats);
	tcase_add_test(ops, test_tile_lifecycle);
	tcase_add_test(ops, test_read_write_region);
	tcase_add_test(ops, test_elementwise_ops);
	tcase_add_test(ops, test_scatter);
	tcase_add_test(ops, test_indexed);
	tcase_add_test(ops, test_memory_ops);
	tcase_add_test(ops, test_atomic_at);
	tcase_add_test(ops, test_errors);
	suite_add_tcase(s, ops);
	TCase *load = tcase_create("load");
	tcase_set_timeout(load, 600);
	tcase_add_test(load, test_pipelined_10000);
	tcase_add_test(load, test_pipelined_shapes);
	tcase_add_test(load, test_pipeline_kept_deep);
	tcase_add_test(load, test_busy_poll_client);
	tcase_add_test(load, test_concurrent_adds);
	tcase_add_test(load, test_cas_lock);
	tcase_add_test(load, test_malformed_frames);
	tcase_add_test(load, test_shared_buffer_refusals);
	tcase_add_test(load, test_device_buffer_refusals);
	suite_add_tcase(s, load);
	TCase *sig = tcase_create("own_daemon");
	tcase_set_timeout(sig, 120);
	tcase_add_test(sig, test_sigterm_idle);
	tcase_add_test(sig, test_sigterm_under_load);
	tcase_add_test(sig, test_frame_limit);
	tcase_add_test(sig, test_frame_limit_pipelined);
	tcase_add_test(sig, test_split_over_frame_limit);
	tcase_add_test(sig, test_shared_buffers);
	tcase_add_test(sig, test_device_fault_drill);
	suite_add_tcase(s, sig);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (!tcu_daemon_start(&D, NULL)) {
		fprintf(stderr, "cannot start %s\n", tcu_daemon_path());
		return EXIT_FAILURE;
	}
	SRunner *sr = srunner_create(integration_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	/* The shared daemon: SIGTERM must give exit status 0 and remove the socket. */
	int st = tcu_daemon_stop(&D, 20000);
	struct stat sb;
	bool socket_left = stat(D.socket, &sb) == 0;
	if (st != 0 || socket_left) {
		fprintf(stderr, "shared tileatomd: exit status %d, socket %s\n", st,
		        socket_left ? "left behind" : "removed");
		tcu_daemon_dump_log(&D);
		failed++;
	}
	tcu_daemon_cleanup(&D);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
