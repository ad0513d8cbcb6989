/* check_litmus_multi.c: message passing across two devices through the public API
 * (issue 24, docs/MULTI-GPU.md). One tileatomd serves two devices (the CPU backend's
 * --devices 2 pools; on a GPU host TA_LITMUS_DEVICES=0,1 with TA_TEST_BACKEND=cuda); the
 * data tile lives wholly on device 0, the flag tile wholly on device 1. A writer
 * connection, pipelining (so that its requests reach the daemon together and may be run in
 * one batch), adds 1 to every element of data (relaxed; a large tile, so that this takes
 * long next to the flag store) and then stores the iteration number into the flag with
 * release; a reader connection acquire-loads the flag and then loads the data's last
 * element (relaxed), both pipelined too, and must never see a flag value above that data.
 * Bounded in iterations; no timing: the reader stops when it has seen the last flag value
 * or after a bounded number of rounds. Then the per-device stats (tileatom_stats_devices):
 * each tile counted on its device, both devices busy. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_client_util.h"
#include "tileatom.h"

/* Writer iterations (each: one relaxed add to all of data, one release store to the flag). */
#define LITMUS_ITERS 600
/* Elements of the data tile: the writer's add over all of it takes long next to the flag
 * store, so that a daemon running the two at the same time shows the flag early. */
#define LITMUS_DATA (1 << 16)
/* Writer requests in flight before it collects (pairs of requests). */
#define LITMUS_DEPTH 8
/* Reader rounds at most (each: an acquire load of the flag, a load of the data). */
#define LITMUS_MAX_ROUNDS 200000

/* What the two threads share. */
typedef struct litmus {
	const char *socket; /* the daemon's socket */
	int violations;     /* reader: rounds that saw flag > data */
	int first_flag;     /* reader: the flag of the first violation */
	int first_data;     /* reader: the data of the first violation */
	int rounds;         /* reader: rounds run */
	int last_flag;      /* reader: the last flag value seen */
	char failure[256];  /* a call that failed, "" when none */
} litmus;

/* Collects one response of client c; records a failure into l. */
static bool collect_one(tileatom_client *c, tileatom_response *r, litmus *l, const char *what)
{
	tileatom_error e = {0, ""};
	int rc = tileatom_collect(c, r, &e);
	if (rc != TILEATOM_OK || r->status != TILEATOM_OK) {
		snprintf(l->failure, sizeof l->failure, "%s: %s %s", what,
		         tileatom_strerror(rc != TILEATOM_OK ? rc : r->status), e.message);
		return false;
	}
	return true;
}

/* The writer: data += 1 (relaxed), then flag = i (release), pipelined. */
static void *writer_main(void *arg)
{
	litmus *l = arg;
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	if (tileatom_connect(l->socket, 10000, &c, &e) != TILEATOM_OK) {
		snprintf(l->failure, sizeof l->failure, "writer connect: %s", e.message);
		return NULL;
	}
	tileatom_op_options relaxed = TILEATOM_OP_OPTIONS_INIT, release = TILEATOM_OP_OPTIONS_INIT;
	release.sem = TILEATOM_SEM_RELEASE;
	int64_t zero = 0;
	tileatom_array idx = tileatom_vector(TILEATOM_INT64, 1, &zero);
	tileatom_addr flat = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &idx};
	int32_t one = 1;
	for (int i = 1; i <= LITMUS_ITERS && !l->failure[0]; i++) {
		uint64_t id;
		int32_t v = i;
		tileatom_array val = tileatom_scalar(TILEATOM_INT32, &v);
		tileatom_array ones = tileatom_scalar(TILEATOM_INT32, &one);
		if (tileatom_submit_elementwise(c, "litmus_data", TILEATOM_OP_ADD, NULL, &ones,
		                                NULL, &relaxed, &id, &e) != TILEATOM_OK ||
		    tileatom_submit_atomic_store(c, "litmus_flag", NULL, &flat, &val, &release, &id,
		                                 &e) != TILEATOM_OK) {
			snprintf(l->failure, sizeof l->failure, "writer submit: %s", e.message);
			break;
		}
		while (tileatom_pending(c) >= 2 * LITMUS_DEPTH) {
			tileatom_response r;
			if (!collect_one(c, &r, l, "writer"))
				break;
		}
	}
	while (tileatom_pending(c) > 0 && !l->failure[0]) {
		tileatom_response r;
		collect_one(c, &r, l, "writer");
	}
	tileatom_close(c);
	return NULL;
}

/* The reader: f = flag (acquire), then d = data (relaxed), pipelined; f <= d always. */
static void *reader_main(void *arg)
{
	litmus *l = arg;
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	if (tileatom_connect(l->socket, 10000, &c, &e) != TILEATOM_OK) {
		snprintf(l->failure, sizeof l->failure, "reader connect: %s", e.message);
		return NULL;
	}
	tileatom_op_options relaxed = TILEATOM_OP_OPTIONS_INIT, acquire = TILEATOM_OP_OPTIONS_INIT;
	acquire.sem = TILEATOM_SEM_ACQUIRE;
	int64_t zero = 0, last = LITMUS_DATA - 1;
	tileatom_array idx = tileatom_vector(TILEATOM_INT64, 1, &zero);
	tileatom_addr flat = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &idx};
	tileatom_array idx_last = tileatom_vector(TILEATOM_INT64, 1, &last);
	tileatom_addr flat_last = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &idx_last};
	while (l->rounds < LITMUS_MAX_ROUNDS && l->last_flag < LITMUS_ITERS && !l->failure[0]) {
		uint64_t id_flag, id_data;
		if (tileatom_submit_atomic_load(c, "litmus_flag", NULL, &flat, &acquire, &id_flag,
		                                &e) != TILEATOM_OK ||
		    tileatom_submit_atomic_load(c, "litmus_data", NULL, &flat_last, &relaxed,
		                                &id_data, &e) != TILEATOM_OK) {
			snprintf(l->failure, sizeof l->failure, "reader submit: %s", e.message);
			break;
		}
		int32_t flag = -1, data = -1;
		for (int k = 0; k < 2; k++) {
			tileatom_response r;
			if (!collect_one(c, &r, l, "reader"))
				break;
			if (r.data_bytes != sizeof(int32_t)) {
				snprintf(l->failure, sizeof l->failure,
				         "reader: a load returned %zu bytes", r.data_bytes);
				break;
			}
			memcpy(r.id == id_flag ? &flag : &data, r.data, sizeof(int32_t));
		}
		if (l->failure[0])
			break;
		l->rounds++;
		l->last_flag = flag;
		if (flag > data && l->violations++ == 0) {
			l->first_flag = flag;
			l->first_data = data;
		}
	}
	tileatom_close(c);
	return NULL;
}

START_TEST(test_message_passing_across_devices)
{
	const char *devs = getenv("TA_LITMUS_DEVICES");
	bool cpu = strcmp(tcu_backend(), "cpu") == 0;
	if (!cpu && (!devs || !*devs)) {
		fprintf(stderr, "litmus: backend %s without TA_LITMUS_DEVICES: skipped\n",
		        tcu_backend());
		return;
	}
	const char *extra[] = {"--devices", devs && *devs ? devs : "2", NULL};
	tcu_daemon d;
	ck_assert(tcu_daemon_start(&d, extra));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(d.socket, 10000, &c, &e), e);
	int64_t shape[1] = {4}, data_shape[1] = {LITMUS_DATA};
	CK(tileatom_create_placed(c, "litmus_data", TILEATOM_INT32, 1, data_shape, NULL, 0, "0",
	                          NULL, &e),
	   e);
	CK(tileatom_create_placed(c, "litmus_flag", TILEATOM_INT32, 1, shape, NULL, 0, "1", NULL,
	                          &e),
	   e);
	char where[TILEATOM_PLACEMENT_MAX];
	CK(tileatom_tile_placement(c, "litmus_data", where, sizeof where, &e), e);
	ck_assert_str_eq(where, "0");
	CK(tileatom_tile_placement(c, "litmus_flag", where, sizeof where, &e), e);
	ck_assert_str_eq(where, "1");

	litmus l;
	memset(&l, 0, sizeof l);
	l.socket = d.socket;
	pthread_t w, r;
	ck_assert_int_eq(pthread_create(&r, NULL, reader_main, &l), 0);
	ck_assert_int_eq(pthread_create(&w, NULL, writer_main, &l), 0);
	ck_assert_int_eq(pthread_join(w, NULL), 0);
	ck_assert_int_eq(pthread_join(r, NULL), 0);
	ck_assert_msg(l.failure[0] == '\0', "%s", l.failure);
	ck_assert_msg(l.violations == 0,
	              "%d of %d rounds saw the flag without the data (first: flag %d, data %d)",
	              l.violations, l.rounds, l.first_flag, l.first_data);
	fprintf(stderr, "litmus: %d reader rounds, last flag %d, no violation\n", l.rounds,
	        l.last_flag);

	/* everything landed: data counted every iteration, the flag holds the last */
	int32_t *back = malloc(LITMUS_DATA * sizeof(int32_t));
	ck_assert_ptr_nonnull(back);
	CK(tileatom_read(c, "litmus_data", NULL, back, LITMUS_DATA * sizeof(int32_t), NULL, &e), e);
	for (int i = 0; i < LITMUS_DATA; i++)
		ck_assert_int_eq(back[i], LITMUS_ITERS);
	CK(tileatom_read(c, "litmus_flag", NULL, back, 4 * sizeof(int32_t), NULL, &e), e);
	ck_assert_int_eq(back[0], LITMUS_ITERS);
	free(back);

	/* the per-device stats: each tile on its device, both devices ran requests */
	tileatom_device_stats *ds = NULL;
	size_t nd = 0;
	CK(tileatom_stats_devices(c, &ds, &nd, &e), e);
	ck_assert_uint_ge(nd, 2);
	ck_assert_uint_eq(ds[0].device, 0);
	ck_assert_uint_eq(ds[1].device, 1);
	ck_assert_uint_eq(ds[0].tiles, 1);
	ck_assert_uint_eq(ds[1].tiles, 1);
	ck_assert_uint_eq(ds[0].tile_bytes, LITMUS_DATA * sizeof(int32_t));
	ck_assert_uint_eq(ds[1].tile_bytes, 4 * sizeof(int32_t));
	ck_assert_uint_ge(ds[0].requests, LITMUS_ITERS);
	ck_assert_uint_ge(ds[1].requests, LITMUS_ITERS);
	if (cpu) { /* a CPU pool: its memory is its tiles */
		ck_assert_uint_eq(ds[0].memory_total, 0);
		ck_assert_uint_eq(ds[0].memory_used, ds[0].tile_bytes);
	}
	tileatom_free(ds);
	tileatom_close(c);
	ck_assert_int_eq(tcu_daemon_stop(&d, 10000), 0);
	tcu_daemon_cleanup(&d);
}
END_TEST

/* The suite. */
static Suite *litmus_suite(void)
{
	Suite *s = suite_create("litmus_multi");
	TCase *tc = tcase_create("mp");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_message_passing_across_devices);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(litmus_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
