/* check_semantics.c: the semantic suite of the CPU backend. Runs every table vector and the
 * reference sweep of tests/ta_vectors.c (every legal op x dtype on 1-D/2-D/3-D tiles and
 * sub-regions, exact bit patterns), the large global-versus-shared comparison (split over
 * the worker pool), and the backend's own contract: zeroed aligned tiles, info, and plans
 * that contradict the tile memory refused with the tile untouched. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ta_backend.h"
#include "ta_c11.h"
#include "ta_test_util.h"
#include "ta_vectors.h"

/* The backend under test (created per test by the fixture). */
static ta_backend *be;

/* Fixture: a CPU backend with 3 workers. */
static void setup(void)
{
	ta_error err = {TA_OK, ""};
	be = ta_cpu_backend_new(3, &err);
	ck_assert_msg(be != NULL, "ta_cpu_backend_new: %s", err.msg);
}

/* Fixture: destroys the backend. */
static void teardown(void)
{
	ta_backend_destroy(be);
	be = NULL;
}

START_TEST(test_vector)
{
	char msg[1024];
	const ta_vector *v = ta_vectors_get((size_t)_i);
	ck_assert_ptr_nonnull(v);
	ck_assert_msg(ta_vector_run(be, v, msg, sizeof(msg)), "%s", msg);
}
END_TEST

START_TEST(test_vector_names_unique)
{
	for (size_t i = 0; i < ta_vectors_count(); i++)
		for (size_t j = i + 1; j < ta_vectors_count(); j++)
			ck_assert_msg(strcmp(ta_vectors_get(i)->name, ta_vectors_get(j)->name) != 0,
			              "two vectors are named \"%s\"", ta_vectors_get(i)->name);
	ck_assert_ptr_null(ta_vectors_get(ta_vectors_count()));
}
END_TEST

START_TEST(test_sweep_op)
{
	ta_op op = (ta_op)_i;
	int failed = ta_vectors_sweep(be, op, UINT64_C(0x5eed0000) + (uint64_t)op, stderr);
	ck_assert_msg(failed == 0, "%d sweep case(s) of %s failed (listed on stderr)", failed,
	              ta_op_name(op));
}
END_TEST

START_TEST(test_shared_large)
{
	int failed = ta_vectors_shared_large(be, stderr);
	ck_assert_msg(failed == 0, "%d large case(s) failed (listed on stderr)", failed);
}
END_TEST

START_TEST(test_vectors_run_counts_failures)
{
	/* ta_vectors_run must report a failing vector: run one with a wrong expectation. */
	ta_vector bad = *ta_vectors_get(0);
	bad.tile = "0 0 0 0";
	char msg[1024];
	ck_assert(!ta_vector_run(be, &bad, msg, sizeof(msg)));
	ck_assert_msg(strstr(msg, "tile[0] is 11") != NULL, "message: %s", msg);
	ck_assert_int_eq(ta_vectors_run(be, NULL), 0);
}
END_TEST

START_TEST(test_tile_alloc)
{
	ta_error err = {TA_OK, ""};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 1000, &mem, &err), TA_OK);
	ck_assert_ptr_nonnull(mem);
	ck_assert_uint_eq((uintptr_t)mem % 16, 0);
	for (size_t i = 0; i < 1000; i++)
		ck_assert_uint_eq(((uint8_t *)mem)[i], 0);
	ta_backend_tile_free(be, mem);
	ta_backend_tile_free(be, NULL);

	mem = (void *)1;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 0, &mem, &err), TA_INVALID_ARGUMENT);
	ck_assert_ptr_null(mem);
	ck_assert(strstr(err.msg, "at least one byte") != NULL);

	ck_assert_int_eq(ta_backend_tile_alloc(be, SIZE_MAX - 8, &mem, &err),
	                 TA_RESOURCE_EXHAUSTED);
	ck_assert_ptr_null(mem);
}
END_TEST

START_TEST(test_info)
{
	ta_backend_info info;
	ta_backend_info_get(be, &info);
	ck_assert_str_eq(info.name, "cpu");
	ck_assert_int_eq(info.workers, 3);
	ck_assert_uint_eq(info.device_memory, 0);
	ck_assert_str_eq(info.compute_capability, "");
	ck_assert(strstr(info.device, "online CPUs") != NULL);
}
END_TEST

START_TEST(test_worker_counts)
{
	/* < 2 means 2; 0 means one per core (at least 2). */
	static const int asked[] = {-5, 1, 2, 0, 7};
	for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
		ta_error err = {TA_OK, ""};
		ta_backend *b = ta_cpu_backend_new(asked[i], &err);
		ck_assert_msg(b != NULL, "%s", err.msg);
		ta_backend_info info;
		ta_backend_info_get(b, &info);
		if (asked[i] == 7)
			ck_assert_int_eq(info.workers, 7);
		else if (asked[i] == 0)
			ck_assert_int_ge(info.workers, 2);
		else
			ck_assert_int_eq(info.workers, 2);
		ta_backend_destroy(b);
	}
}
END_TEST

/* Builds an int32 add plan of 4 elements over a 1-D tile of 4 (values 1 2 3 4). */
static void small_plan(ta_plan *plan, const int32_t *vals)
{
	ta_tile_shape t = {.dtype = TA_DTYPE_I32, .rank = 1, .shape = {4}};
	ta_request req;
	ta_error err = {TA_OK, ""};
	ta_request_region(&req, TA_FAMILY_ELEMENTWISE, TA_OP_ADD);
	int64_t shape[1] = {4};
	req.values = ta_tu_view(TA_DTYPE_I32, 1, shape, vals);
	ck_assert_int_eq(ta_plan_build(plan, &t, &req, &err), TA_OK);
}

START_TEST(test_refuses_inconsistent_plans)
{
	static const int32_t vals[4] = {1, 2, 3, 4};
	ta_error err = {TA_OK, ""};
	ta_result res = {0, 0};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 16, &mem, &err), TA_OK);
	ta_plan plan;

	/* tile memory smaller than the plan's tile */
	small_plan(&plan, vals);
	ck_assert_int_eq(ta_backend_apply(be, mem, 12, &plan, &res, &err), TA_INVALID_ARGUMENT);
	ck_assert(strstr(err.msg, "tile memory holds 12 bytes") != NULL);

	/* values of another dtype */
	small_plan(&plan, vals);
	plan.values.dtype = TA_DTYPE_I64;
	ck_assert_int_eq(ta_backend_apply(be, mem, 16, &plan, &res, &err), TA_INVALID_ARGUMENT);
	ck_assert(strstr(err.msg, "values") != NULL);

	/* want_old without an output buffer */
	small_plan(&plan, vals);
	plan.want_old = true;
	ck_assert_int_eq(ta_backend_apply(be, mem, 16, &plan, &res, &err), TA_INVALID_ARGUMENT);
	ck_assert(strstr(err.msg, "old_out is NULL") != NULL);

	/* sizes that wrap: a 2^32 x 2^32 tile whose element count overflows to 0 (indexed,
	 * shared space, so a wrapped check would let the private copy be overrun) */
	{
		ta_tile_shape t2 = {.dtype = TA_DTYPE_I32, .rank = 2, .shape = {4, 4}};
		static const int32_t i0[1] = {0}, i1[1] = {3}, one[1] = {1};
		int64_t sh[1] = {1};
		ta_request req;
		ta_request_init(&req);
		req.family = TA_FAMILY_INDEXED;
		req.op = TA_OP_ADD;
		req.addr = TA_ADDR_INDEXED;
		req.space = TA_SPACE_SHARED;
		req.n_index = 2;
		req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, sh, i0);
		req.index[1] = ta_tu_view(TA_DTYPE_I32, 1, sh, i1);
		req.values = ta_tu_view(TA_DTYPE_I32, 1, sh, one);
		ck_assert_int_eq(ta_plan_build(&plan, &t2, &req, &err), TA_OK);
		plan.tile_shape[0] = plan.tile_shape[1] = INT64_C(1) << 32;
		plan.extent[0] = plan.extent[1] = INT64_C(1) << 32;
		plan.tile_stride[0] = INT64_C(1) << 32;
		plan.tile_stride[1] = 1;
		plan.region_count = 0;
		ck_assert_int_eq(ta_backend_apply(be, mem, 16, &plan, &res, &err),
		                 TA_INVALID_ARGUMENT);
		ck_assert_msg(strstr(err.msg, "too many elements") != NULL, "%s", err.msg);
	}

	/* region outside the tile */
	small_plan(&plan, vals);
	plan.origin[0] = 2;
	ck_assert_int_eq(ta_backend_apply(be, mem, 16, &plan, &res, &err), TA_INVALID_ARGUMENT);
	ck_assert(strstr(err.msg, "outside the tile") != NULL);

	/* an op the dtype does not accept */
	small_plan(&plan, vals);
	plan.dtype = TA_DTYPE_F32;
	plan.values.dtype = TA_DTYPE_F32;
	plan.op = TA_OP_XOR;
	ck_assert_int_eq(ta_backend_apply(be, mem, 16, &plan, &res, &err), TA_INVALID_ARGUMENT);

	/* count that does not match the shape */
	small_plan(&plan, vals);
	plan.count = 5;
	ck_assert_int_eq(ta_backend_apply(be, mem, 16, &plan, &res, &err), TA_INVALID_ARGUMENT);

	/* nothing was applied by any of them */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(((int32_t *)mem)[i], 0);

	/* and the untouched plan works */
	small_plan(&plan, vals);
	ck_assert_int_eq(ta_backend_apply(be, mem, 16, &plan, &res, &err), TA_OK);
	ck_assert_uint_eq(res.applied, 4);
	ck_assert_uint_eq(res.skipped, 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(((int32_t *)mem)[i], i + 1);
	ta_backend_tile_free(be, mem);
}
END_TEST

START_TEST(test_stray_index_never_escapes)
{
	/* A plan built with bounds checking off whose index is changed afterwards to point far
	 * outside the tile: the backend must skip it, not write outside the tile. */
	ta_tile_shape t = {.dtype = TA_DTYPE_I32, .rank = 1, .shape = {4}};
	int32_t idx[2] = {0, 1};
	int32_t vals[2] = {5, 6};
	int64_t shape[1] = {2};
	ta_request req;
	ta_plan plan;
	ta_result res;
	ta_error err = {TA_OK, ""};
	ta_request_init(&req);
	req.family = TA_FAMILY_INDEXED;
	req.op = TA_OP_ADD;
	req.addr = TA_ADDR_INDEXED;
	req.n_index = 1;
	req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, shape, idx);
	req.values = ta_tu_view(TA_DTYPE_I32, 1, shape, vals);
	req.check_bounds = false;
	ck_assert_int_eq(ta_plan_build(&plan, &t, &req, &err), TA_OK);
	idx[1] = 1000000;
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 16, &mem, &err), TA_OK);
	ck_assert_int_eq(ta_backend_apply(be, mem, 16, &plan, &res, &err), TA_OK);
	ck_assert_uint_eq(res.applied, 1);
	ck_assert_uint_eq(res.skipped, 1);
	ck_assert_int_eq(((int32_t *)mem)[0], 5);
	ck_assert_int_eq(((int32_t *)mem)[1], 0);
	ta_backend_tile_free(be, mem);
}
END_TEST

START_TEST(test_sem_c11_orders)
{
	/* The C11 order the CPU backend uses for every sem and kind of access. On x86 every
	 * atomic RMW is a full barrier and plain loads/stores already acquire/release, so a
	 * weaker order than intended passes every run-time test: this one pins them. */
	static const struct {
		ta_sem sem;
		memory_order rmw, load, store, cas_failure;
	} want[] = {
	    {TA_SEM_RELAXED, memory_order_relaxed, memory_order_relaxed, memory_order_relaxed,
	     memory_order_relaxed},
	    {TA_SEM_ACQUIRE, memory_order_acquire, memory_order_acquire, memory_order_relaxed,
	     memory_order_acquire},
	    {TA_SEM_RELEASE, memory_order_release, memory_order_relaxed, memory_order_release,
	     memory_order_relaxed},
	    {TA_SEM_ACQ_REL, memory_order_acq_rel, memory_order_acquire, memory_order_release,
	     memory_order_acquire},
	};
	/* a new sem in ta_ops.def needs its row here */
	ck_assert_int_eq(TA_SEM_COUNT, (int)(sizeof(want) / sizeof(want[0])));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ta_sem sem = want[i].sem;
		const char *sn = ta_sem_name(sem);
		ck_assert_msg(ta_sem_c11_order(sem, TA_ACCESS_RMW) == want[i].rmw, "%s rmw: %d", sn,
		              (int)ta_sem_c11_order(sem, TA_ACCESS_RMW));
		ck_assert_msg(ta_sem_c11_order(sem, TA_ACCESS_LOAD) == want[i].load, "%s load: %d",
		              sn, (int)ta_sem_c11_order(sem, TA_ACCESS_LOAD));
		ck_assert_msg(ta_sem_c11_order(sem, TA_ACCESS_STORE) == want[i].store,
		              "%s store: %d", sn, (int)ta_sem_c11_order(sem, TA_ACCESS_STORE));
		ck_assert_msg(ta_sem_c11_order(sem, TA_ACCESS_CAS_FAILURE) == want[i].cas_failure,
		              "%s cas failure: %d", sn,
		              (int)ta_sem_c11_order(sem, TA_ACCESS_CAS_FAILURE));
	}
	/* an invalid sem (ta_plan_check refuses it first) is relaxed */
	ck_assert(ta_sem_c11_order((ta_sem)TA_SEM_COUNT, TA_ACCESS_RMW) == memory_order_relaxed);
}
END_TEST

/* The semantic suite. */
static Suite *semantics_suite(void)
{
	Suite *s = suite_create("semantics");

	TCase *tc = tcase_create("vectors");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_vector, 0, (int)ta_vectors_count());
	tcase_add_test(tc, test_vector_names_unique);
	tcase_add_test(tc, test_vectors_run_counts_failures);
	suite_add_tcase(s, tc);

	tc = tcase_create("sweep");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_sweep_op, TA_OP_ADD, TA_OP_COUNT);
	tcase_add_test(tc, test_shared_large);
	suite_add_tcase(s, tc);

	tc = tcase_create("backend");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tile_alloc);
	tcase_add_test(tc, test_info);
	tcase_add_test(tc, test_worker_counts);
	tcase_add_test(tc, test_refuses_inconsistent_plans);
	tcase_add_test(tc, test_stray_index_never_escapes);
	tcase_add_test(tc, test_sem_c11_orders);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(semantics_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
