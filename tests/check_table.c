/* check_table.c: the table tacore/ta_ops.def really decides. This suite is built twice: as
 * check_table against the real table, and as check_table_mutant against a copy of the
 * table in which one row is changed (tests/table.mk: xor loses the sem acq_rel) and
 * compiled into a copy of tacore/ta_types.c. The same assertions then expect the opposite
 * outcome, so the daemon's validation (ta_plan_build), the client library's pre-checks
 * (tac_build_*, tileatom_sem_allowed, which tileatom-cli's help reads) and the PTX
 * lowering (ta_lower_*) must all change with the one row, and nothing may restate it. It
 * also holds the sem columns to their intended C11 order and PTX qualifier. */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ta_lower.h"
#include "ta_plan.h"
#include "tac_internal.h"

#ifndef TA_TABLE_MUTANT
#define TA_TABLE_MUTANT 0
#endif

/* What the mutant row changes: is xor with acq_rel legal in this build? */
static const bool xor_acq_rel_legal = !TA_TABLE_MUTANT;

/* The message every layer gives for xor + acq_rel under the mutant table. */
#define MUTANT_MSG "sem acq_rel is not valid for xor (use relaxed, acquire or release)"

static int32_t ones[4] = {1, 1, 1, 1};

START_TEST(test_daemon_validation)
{
	ta_tile_shape t = {TA_DTYPE_I32, 1, {4}};
	ta_request r;
	ta_request_region(&r, TA_FAMILY_ELEMENTWISE, TA_OP_XOR);
	r.values.present = true;
	r.values.dtype = TA_DTYPE_I32;
	r.values.rank = 0;
	r.values.data = ones;
	r.values.nbytes = 4;
	r.sem = TA_SEM_ACQ_REL;
	ta_plan p;
	ta_error err = {TA_OK, ""};
	ta_status st = ta_plan_build(&p, &t, &r, &err);
	if (xor_acq_rel_legal) {
		ck_assert_msg(st == TA_OK, "%s", err.msg);
	} else {
		ck_assert_int_eq(st, TA_INVALID_ARGUMENT);
		ck_assert_str_eq(err.msg, MUTANT_MSG);
	}
	/* the neighbours of the row are untouched */
	r.sem = TA_SEM_RELEASE;
	ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err), TA_OK);
	r.op = TA_OP_OR;
	r.sem = TA_SEM_ACQ_REL;
	ck_assert_int_eq(ta_plan_build(&p, &t, &r, &err), TA_OK);
}
END_TEST

START_TEST(test_client_prechecks)
{
	tac_msg m;
	tileatom_error e = {0, ""};
	tileatom_array v = tileatom_scalar(TILEATOM_INT32, &ones[0]);
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	o.sem = TILEATOM_SEM_ACQ_REL;
	int rc = tac_build_atomic(&m,
	                          &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                           .tile = "t",
	                                           .op = TILEATOM_OP_XOR,
	                                           .values = &v,
	                                           .opts = &o},
	                          &e);
	if (xor_acq_rel_legal) {
		ck_assert_msg(rc == TILEATOM_OK, "%s", e.message);
	} else {
		ck_assert_int_eq(rc, TILEATOM_E_INVALID_ARGUMENT);
		ck_assert_str_eq(e.message, "elementwise: " MUTANT_MSG);
	}
	int64_t flat = 0;
	tileatom_array idx = tileatom_scalar(TILEATOM_INT64, &flat);
	rc = tac_build_atomic(&m,
	                      &(tac_split_req){.kind = TILEATOM_REQ_INDEXED,
	                                       .tile = "t",
	                                       .op = TILEATOM_OP_XOR,
	                                       .n_index = 1,
	                                       .indices = &idx,
	                                       .flat = true,
	                                       .values = &v,
	                                       .opts = &o},
	                      &e);
	ck_assert_int_eq(rc == TILEATOM_OK, xor_acq_rel_legal);
	/* what tileatom-cli's help lists */
	ck_assert_int_eq(
	    tileatom_sem_allowed(TILEATOM_REQ_INDEXED, TILEATOM_OP_XOR, TILEATOM_SEM_ACQ_REL),
	    xor_acq_rel_legal);
	ck_assert_int_eq(
	    tileatom_sem_allowed(TILEATOM_REQ_INDEXED, TILEATOM_OP_XOR, TILEATOM_SEM_RELEASE), 1);
	ck_assert_int_eq(
	    tileatom_sem_allowed(TILEATOM_REQ_INDEXED, TILEATOM_OP_OR, TILEATOM_SEM_ACQ_REL), 1);
	/* memory kinds take their op from the table */
	ck_assert_int_eq(
	    tileatom_sem_allowed(TILEATOM_REQ_ATOMIC_LOAD, TILEATOM_OP_NONE, TILEATOM_SEM_ACQUIRE),
	    1);
	ck_assert_int_eq(
	    tileatom_sem_allowed(TILEATOM_REQ_ATOMIC_LOAD, TILEATOM_OP_NONE, TILEATOM_SEM_RELEASE),
	    0);
}
END_TEST

/* ta_lower_foreach callback: counts xor variants with sem acq_rel into *(size_t *)ctx. */
static void count_xor_acq_rel(const ta_variant *v, const char *instr, void *ctx)
{
	(void)instr;
	if (v->op == TA_OP_XOR && v->sem == TA_SEM_ACQ_REL)
		(*(size_t *)ctx)++;
}

START_TEST(test_lowering)
{
	ta_variant v = {TA_OP_XOR,    TA_DTYPE_I32,    TA_SEM_ACQ_REL,
	                TA_SCOPE_GPU, TA_SPACE_GLOBAL, true};
	char instr[TA_LOWER_INSTR_MAX];
	ta_error err = {TA_OK, ""};
	ta_status st = ta_lower_instr(&v, instr, sizeof instr, &err);
	if (xor_acq_rel_legal) {
		ck_assert_int_eq(st, TA_OK);
		ck_assert_str_eq(instr, "atom.acq_rel.gpu.global.xor.b32");
	} else {
		ck_assert_int_eq(st, TA_INVALID_ARGUMENT);
		ck_assert_str_eq(instr, "");
	}
	/* 4 integer dtypes x 4 scopes x (global with and without output, shared without) */
	size_t n = 0;
	ta_lower_foreach(count_xor_acq_rel, &n);
	ck_assert_uint_eq(n, xor_acq_rel_legal ? 48 : 0);
}
END_TEST

/* The sem columns: each sem's acquire/release parts, its C11 order per access and its PTX
 * qualifier, stated here once more on purpose (x86 cannot show a wrong order at run
 * time, so this is the guard). */
START_TEST(test_sem_mapping)
{
	static const struct {
		ta_sem sem;
		const char *name, *ptx;
		bool acquires, releases;
	} rows[] = {{TA_SEM_RELAXED, "relaxed", "relaxed", false, false},
	            {TA_SEM_ACQUIRE, "acquire", "acquire", true, false},
	            {TA_SEM_RELEASE, "release", "release", false, true},
	            {TA_SEM_ACQ_REL, "acq_rel", "acq_rel", true, true}};
	ck_assert_int_eq(TA_SEM_COUNT, 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_str_eq(ta_sem_name(rows[i].sem), rows[i].name);
		ck_assert_str_eq(ta_sem_ptx(rows[i].sem), rows[i].ptx);
		ck_assert_int_eq(ta_sem_acquires(rows[i].sem), rows[i].acquires);
		ck_assert_int_eq(ta_sem_releases(rows[i].sem), rows[i].releases);
	}
	/* the lowering writes the sem's PTX qualifier: an RMW with output uses atom.<sem>,
	 * a load ld.<sem>, a store st.<sem> */
	char instr[TA_LOWER_INSTR_MAX];
	for (int i = 0; i < 4; i++) {
		char want[64];
		ta_variant add = {TA_OP_ADD,    TA_DTYPE_U32,    rows[i].sem,
		                  TA_SCOPE_SYS, TA_SPACE_GLOBAL, true};
		ck_assert_int_eq(ta_lower_instr(&add, instr, sizeof instr, NULL), TA_OK);
		snprintf(want, sizeof want, "atom.%s.sys.global.add.u32", rows[i].ptx);
		ck_assert_str_eq(instr, want);
		/* without output: red where there is no acquire part */
		add.want_old = false;
		ck_assert_int_eq(ta_lower_instr(&add, instr, sizeof instr, NULL), TA_OK);
		snprintf(want, sizeof want, "%s.%s.sys.global.add.u32",
		         rows[i].acquires ? "atom" : "red", rows[i].ptx);
		ck_assert_str_eq(instr, want);
	}
	ta_variant ld = {TA_OP_LOAD,   TA_DTYPE_F64,    TA_SEM_ACQUIRE,
	                 TA_SCOPE_CTA, TA_SPACE_GLOBAL, true};
	ck_assert_int_eq(ta_lower_instr(&ld, instr, sizeof instr, NULL), TA_OK);
	ck_assert_str_eq(instr, "ld.acquire.cta.global.b64");
	ta_variant st = {TA_OP_STORE,  TA_DTYPE_F16,    TA_SEM_RELEASE,
	                 TA_SCOPE_GPU, TA_SPACE_GLOBAL, false};
	ck_assert_int_eq(ta_lower_instr(&st, instr, sizeof instr, NULL), TA_OK);
	ck_assert_str_eq(instr, "st.release.gpu.global.b16");
}
END_TEST

/* The emulated pairs follow from the empty PTX type columns. */
START_TEST(test_emulation)
{
	for (int dt = TA_DTYPE_NONE + 1; dt < TA_DTYPE_COUNT; dt++) {
		if (!ta_dtype_is_tile((ta_dtype)dt))
			continue;
		ck_assert_int_eq(ta_lower_emulated(TA_OP_MIN, (ta_dtype)dt),
		                 ta_dtype_is_float((ta_dtype)dt));
		ck_assert_int_eq(ta_lower_emulated(TA_OP_EXCH, (ta_dtype)dt),
		                 ta_dtype_size((ta_dtype)dt) == 2);
		ck_assert(!ta_lower_emulated(TA_OP_ADD, (ta_dtype)dt));
	}
	ck_assert_str_eq(ta_op_ptx_type(TA_OP_ADD, TA_DTYPE_F16), "noftz.f16");
	ck_assert_str_eq(ta_op_ptx_type(TA_OP_MIN, TA_DTYPE_I64), "s64");
	ck_assert_str_eq(ta_op_ptx_type(TA_OP_ADD, TA_DTYPE_I64), "u64");
}
END_TEST

/* The suite. */
static Suite *table_suite(void)
{
	Suite *s = suite_create(TA_TABLE_MUTANT ? "table (mutant: xor without acq_rel)" : "table");
	TCase *tc = tcase_create("decides");
	tcase_add_test(tc, test_daemon_validation);
	tcase_add_test(tc, test_client_prechecks);
	tcase_add_test(tc, test_lowering);
	tcase_add_test(tc, test_sem_mapping);
	tcase_add_test(tc, test_emulation);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(table_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
