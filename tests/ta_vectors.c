/* ta_vectors.c: the semantic test vectors, their runner, the reference sweep and the large
 * global-versus-shared comparison (see ta_vectors.h). Expected values in the table are
 * written out by hand from the rules in ta_plan.h; the sweep's come from the sequential
 * reference in ta_test_util.c. Float results that differ between CPUs and GPUs in
 * practice are pinned down: f32 add flushes subnormal inputs and results (checked against
 * sm_90's atom.global.add.f32, which gives the same bits), NaN results of float32 and
 * 16-bit add are the canonical NaN (float64 propagates NaN bits as atom.add.f64 does),
 * and 16-bit adds round once to nearest even. */
#include "ta_vectors.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ta_test_util.h"

/* Operand shorthands: S scalar, A1..A3 arrays of the default dtype, L1 int64 indices. */
// clang-format off
#define S(txt) {txt, TA_DTYPE_NONE, 0, {0}}
#define A1(txt, a) {txt, TA_DTYPE_NONE, 1, {a}}
#define A2(txt, a, b) {txt, TA_DTYPE_NONE, 2, {a, b}}
#define A3(txt, a, b, c) {txt, TA_DTYPE_NONE, 3, {a, b, c}}
#define L1(txt, a) {txt, TA_DTYPE_I64, 1, {a}}
// clang-format on

/* Float min/max vectors for one float dtype (dtype-neutral element text). */
#define FLOAT_MINMAX(DT, DN)                                                                       \
	{.name = DN " min: -0.0 < +0.0",                                                           \
	 .dtype = DT,                                                                              \
	 .rank = 1,                                                                                \
	 .shape = {4},                                                                             \
	 .init = "0 -0 0 -0",                                                                      \
	 .op = TA_OP_MIN,                                                                          \
	 .values = A1("-0 0 0 -0", 4),                                                             \
	 .want_old = true,                                                                         \
	 .tile = "-0 -0 0 -0",                                                                     \
	 .old = "0 -0 0 -0"},                                                                      \
	    {.name = DN " max: -0.0 < +0.0",                                                       \
	     .dtype = DT,                                                                          \
	     .rank = 1,                                                                            \
	     .shape = {4},                                                                         \
	     .init = "0 -0 0 -0",                                                                  \
	     .op = TA_OP_MAX,                                                                      \
	     .values = A1("-0 0 0 -0", 4),                                                         \
	     .want_old = true,                                                                     \
	     .tile = "0 0 0 -0",                                                                   \
	     .old = "0 -0 0 -0"},                                                                  \
	    {.name = DN " min: a NaN in the tile stays, else a NaN operand's bits are stored",     \
	     .dtype = DT,                                                                          \
	     .rank = 1,                                                                            \
	     .shape = {5},                                                                         \
	     .init = "nan 1 1 -inf nan",                                                           \
	     .op = TA_OP_MIN,                                                                      \
	     .values = A1("1 -nan -inf nan -nan", 5),                                              \
	     .want_old = true,                                                                     \
	     .tile = "nan -nan -inf nan nan",                                                      \
	     .old = "nan 1 1 -inf nan"},                                                           \
	    {.name = DN " max: a NaN in the tile stays, else a NaN operand's bits are stored",     \
	     .dtype = DT,                                                                          \
	     .rank = 1,                                                                            \
	     .shape = {5},                                                                         \
	     .init = "nan 1 1 -inf nan",                                                           \
	     .op = TA_OP_MAX,                                                                      \
	     .values = A1("1 -nan -inf nan -nan", 5),                                              \
	     .want_old = true,                                                                     \
	     .tile = "nan -nan 1 nan nan",                                                         \
	     .old = "nan 1 1 -inf nan"},                                                           \
	    {.name = DN " min: ordinary values and infinities",                                    \
	     .dtype = DT,                                                                          \
	     .rank = 1,                                                                            \
	     .shape = {5},                                                                         \
	     .init = "1.5 -2 0.25 inf -inf",                                                       \
	     .op = TA_OP_MIN,                                                                      \
	     .values = A1("-1 -3 0.5 1 1", 5),                                                     \
	     .tile = "-1 -3 0.25 1 -inf"},                                                         \
	{                                                                                          \
		.name = DN " max: ordinary values and infinities", .dtype = DT, .rank = 1,         \
		.shape = {5}, .init = "1.5 -2 0.25 inf -inf", .op = TA_OP_MAX,                     \
		.values = A1("-1 -3 0.5 1 1", 5), .tile = "1.5 -2 0.5 inf 1"                       \
	}

/* Float exch / cas vectors for one float dtype (bit patterns, -0.0 and NaN). */
#define FLOAT_EXCH_CAS(DT, DN)                                                                     \
	{.name = DN " exch stores bit patterns and returns the old ones",                          \
	 .dtype = DT,                                                                              \
	 .rank = 1,                                                                                \
	 .shape = {4},                                                                             \
	 .init = "1 -0 nan 2",                                                                     \
	 .op = TA_OP_EXCH,                                                                         \
	 .values = A1("-nan 0 -2 nan", 4),                                                         \
	 .want_old = true,                                                                         \
	 .tile = "-nan 0 -2 nan",                                                                  \
	 .old = "1 -0 nan 2"},                                                                     \
	{                                                                                          \
		.name = DN " cas compares bits: -0.0 != +0.0, identical NaN bits are equal",       \
		.dtype = DT, .rank = 1, .shape = {4}, .init = "0 -0 nan nan", .op = TA_OP_CAS,     \
		.compare = A1("-0 -0 nan -nan", 4), .values = A1("1 1 1 1", 4), .want_old = true,  \
		.tile = "0 1 1 nan", .old = "0 -0 nan nan"                                         \
	}

/* The vector table. */
static const ta_vector vectors[] = {
    /* ---- integer arithmetic -------------------------------------------------------- */
    {.name = "int32 add returns old values",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "1 2 3 4",
     .op = TA_OP_ADD,
     .values = A1("10 20 30 40", 4),
     .want_old = true,
     .tile = "11 22 33 44",
     .old = "1 2 3 4"},
    {.name = "int32 add wraps around",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {2},
     .init = "2147483647 -2147483648",
     .op = TA_OP_ADD,
     .values = A1("1 -1", 2),
     .want_old = true,
     .tile = "-2147483648 2147483647",
     .old = "2147483647 -2147483648"},
    {.name = "int32 sub wraps around",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {2},
     .init = "5 -5",
     .op = TA_OP_SUB,
     .values = A1("7 -2147483648", 2),
     .tile = "-2 2147483643"},
    {.name = "uint32 sub wraps around",
     .dtype = TA_DTYPE_U32,
     .rank = 1,
     .shape = {2},
     .init = "0 5",
     .op = TA_OP_SUB,
     .values = A1("1 10", 2),
     .tile = "4294967295 4294967291"},
    {.name = "int64 add wraps around",
     .dtype = TA_DTYPE_I64,
     .rank = 1,
     .shape = {2},
     .init = "9223372036854775807 -9223372036854775808",
     .op = TA_OP_ADD,
     .values = A1("1 -1", 2),
     .want_old = true,
     .tile = "-9223372036854775808 9223372036854775807",
     .old = "9223372036854775807 -9223372036854775808"},
    {.name = "uint64 sub wraps around",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {2},
     .init = "0 1",
     .op = TA_OP_SUB,
     .values = A1("1 0xffffffffffffffff", 2),
     .tile = "18446744073709551615 2"},
    {.name = "int32 min is signed, also at the extremes",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "-1 5 -2147483648 2147483647",
     .op = TA_OP_MIN,
     .values = A1("0 -7 2147483647 -2147483648", 4),
     .want_old = true,
     .tile = "-1 -7 -2147483648 -2147483648",
     .old = "-1 5 -2147483648 2147483647"},
    {.name = "int32 max is signed, also at the extremes",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "-1 5 -2147483648 2147483647",
     .op = TA_OP_MAX,
     .values = A1("0 -7 2147483647 -2147483648", 4),
     .tile = "0 5 2147483647 2147483647"},
    {.name = "uint32 min is unsigned",
     .dtype = TA_DTYPE_U32,
     .rank = 1,
     .shape = {3},
     .init = "4294967295 1 2147483648",
     .op = TA_OP_MIN,
     .values = A1("1 0x80000000 2147483647", 3),
     .tile = "1 1 2147483647"},
    {.name = "uint32 max is unsigned",
     .dtype = TA_DTYPE_U32,
     .rank = 1,
     .shape = {3},
     .init = "4294967295 1 2147483648",
     .op = TA_OP_MAX,
     .values = A1("1 0x80000000 2147483647", 3),
     .tile = "4294967295 2147483648 2147483648"},
    {.name = "int64 min is signed (64-bit extremes)",
     .dtype = TA_DTYPE_I64,
     .rank = 1,
     .shape = {4},
     .init = "-9223372036854775808 9223372036854775807 -1 1",
     .op = TA_OP_MIN,
     .values = A1("9223372036854775807 -9223372036854775808 1 -1", 4),
     .want_old = true,
     .tile = "-9223372036854775808 -9223372036854775808 -1 -1",
     .old = "-9223372036854775808 9223372036854775807 -1 1"},
    {.name = "int64 max is signed (64-bit extremes)",
     .dtype = TA_DTYPE_I64,
     .rank = 1,
     .shape = {4},
     .init = "-9223372036854775808 9223372036854775807 -1 1",
     .op = TA_OP_MAX,
     .values = A1("9223372036854775807 -9223372036854775808 1 -1", 4),
     .tile = "9223372036854775807 9223372036854775807 1 1"},
    {.name = "uint64 min is unsigned",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {3},
     .init = "18446744073709551615 0 9223372036854775808",
     .op = TA_OP_MIN,
     .values = A1("9223372036854775807 1 9223372036854775807", 3),
     .tile = "9223372036854775807 0 9223372036854775807"},
    {.name = "uint64 max is unsigned",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {3},
     .init = "18446744073709551615 0 9223372036854775808",
     .op = TA_OP_MAX,
     .values = A1("9223372036854775807 1 9223372036854775807", 3),
     .tile = "18446744073709551615 1 9223372036854775808"},
    {.name = "int32 and",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {3},
     .init = "0x0ff0 -1 0",
     .op = TA_OP_AND,
     .values = A1("0x00ff 0x12345678 -1", 3),
     .want_old = true,
     .tile = "240 305419896 0",
     .old = "4080 -1 0"},
    {.name = "int32 or",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {3},
     .init = "0x0ff0 -1 0",
     .op = TA_OP_OR,
     .values = A1("0x00ff 0x12345678 -1", 3),
     .tile = "4095 -1 -1"},
    {.name = "int32 xor",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {3},
     .init = "0x0ff0 -1 0",
     .op = TA_OP_XOR,
     .values = A1("0x00ff 0x12345678 -1", 3),
     .tile = "3855 -305419897 -1"},
    {.name = "uint64 and",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {2},
     .init = "0xffff0000ffff0000 0",
     .op = TA_OP_AND,
     .values = A1("0x0f0f0f0f0f0f0f0f 0x8000000000000001", 2),
     .tile = "0x0f0f00000f0f0000 0"},
    {.name = "uint64 or",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {2},
     .init = "0xffff0000ffff0000 0",
     .op = TA_OP_OR,
     .values = A1("0x0f0f0f0f0f0f0f0f 0x8000000000000001", 2),
     .tile = "0xffff0f0fffff0f0f 0x8000000000000001"},
    {.name = "uint64 xor",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {2},
     .init = "0xffff0000ffff0000 0",
     .op = TA_OP_XOR,
     .values = A1("0x0f0f0f0f0f0f0f0f 0x8000000000000001", 2),
     .want_old = true,
     .tile = "0xf0f00f0ff0f00f0f 0x8000000000000001",
     .old = "0xffff0000ffff0000 0"},
    {.name = "uint64 exch keeps every bit",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {2},
     .init = "1 18446744073709551615",
     .op = TA_OP_EXCH,
     .values = A1("18446744073709551615 0", 2),
     .want_old = true,
     .tile = "18446744073709551615 0",
     .old = "1 18446744073709551615"},

    /* ---- float add / sub --------------------------------------------------------------- */
    {.name = "float32 add flushes subnormal inputs (tile and operand) and results",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {8},
     .init = "#00000001 #80000001 0 #80000000 #00800000 #00c00000 #80000000 #00000001",
     .op = TA_OP_ADD,
     .values = A1("0 0 #00000001 #80000001 #80000001 #80800000 0 #80000000", 8),
     .want_old = true,
     .tile = "0 0 0 -0 #00800000 0 0 0",
     .old = "#00000001 #80000001 0 #80000000 #00800000 #00c00000 #80000000 #00000001"},
    {.name = "float32 sub flushes a subnormal result to a zero of the same sign",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {3},
     .init = "#00800000 #00c00000 #80c00000",
     .op = TA_OP_SUB,
     .values = A1("#00000001 #00800000 #80800000", 3),
     .tile = "#00800000 0 -0"},
    {.name = "float32 add of NaN or inf - inf stores the canonical NaN",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {7},
     .init = "1 #7fc00001 #ffc00002 inf #7f800001 1 -inf",
     .op = TA_OP_ADD,
     .values = A1("#7fc00001 1 1 -inf 1 #ff800001 nan", 7),
     .tile = "cnan cnan cnan cnan cnan cnan cnan"},
    {.name = "float32 add rounds to nearest even and overflows to inf",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {4},
     .init = "1 0x1.000002p+0 #7f7fffff -0",
     .op = TA_OP_ADD,
     .values = A1("0x1p-24 0x1p-24 #7f7fffff -0", 4),
     .tile = "1 0x1.000004p+0 inf -0"},
    {.name = "float32 sub is add of the operand with its sign flipped (signed zeros)",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {4},
     .init = "1 -0 0 0",
     .op = TA_OP_SUB,
     .values = A1("0.5 0 0 -0", 4),
     .want_old = true,
     .tile = "0.5 -0 0 0",
     .old = "1 -0 0 0"},
    {.name = "float64 add keeps subnormals and rounds to nearest even",
     .dtype = TA_DTYPE_F64,
     .rank = 1,
     .shape = {4},
     .init = "#0000000000000001 1 0x1.0000000000001p+0 -0",
     .op = TA_OP_ADD,
     .values = A1("#0000000000000001 0x1p-53 0x1p-53 -0", 4),
     .tile = "#0000000000000002 1 0x1.0000000000002p+0 -0"},
    {.name = "float64 add: a NaN operand's bits, else the tile's NaN bits, propagate; "
             "inf - inf gives 0xfff8000000000000 (sm_90 atom.add.f64)",
     .dtype = TA_DTYPE_F64,
     .rank = 1,
     .shape = {3},
     .init = "1 #7ff8000000000001 inf",
     .op = TA_OP_ADD,
     .values = A1("#fff8000000000002 1 -inf", 3),
     .tile = "#fff8000000000002 #7ff8000000000001 #fff8000000000000"},
    {.name = "float64 sub",
     .dtype = TA_DTYPE_F64,
     .rank = 1,
     .shape = {3},
     .init = "1 -0 0.75",
     .op = TA_OP_SUB,
     .values = A1("0.25 0 1", 3),
     .tile = "0.75 -0 -0.25"},
    {.name = "float16 add: 1 + 2^-11 ties to even, 1.5 ulp rounds up, 65504 + 16 is inf",
     .dtype = TA_DTYPE_F16,
     .rank = 1,
     .shape = {6},
     .init = "1 0x1.004p+0 1 65504 65504 -65504",
     .op = TA_OP_ADD,
     .values = A1("0x1p-11 0x1p-11 0x1.8p-10 16 15 -16", 6),
     .want_old = true,
     .tile = "1 0x1.008p+0 0x1.008p+0 inf 65504 -inf",
     .old = "1 0x1.004p+0 1 65504 65504 -65504"},
    {.name = "float16 add keeps subnormals (.noftz), NaN results are 0x7fff",
     .dtype = TA_DTYPE_F16,
     .rank = 1,
     .shape = {7},
     .init = "#0001 #0001 #8000 #7e01 inf #3c00 #0400",
     .op = TA_OP_ADD,
     .values = A1("#0001 #8001 #8000 1 -inf #7d01 #8001", 7),
     .tile = "#0002 #0000 #8000 #7fff #7fff #7fff #03ff"},
    {.name = "float16 sub: 1 - 2^-11 is exact below 1",
     .dtype = TA_DTYPE_F16,
     .rank = 1,
     .shape = {3},
     .init = "1 -0 2",
     .op = TA_OP_SUB,
     .values = A1("0x1p-11 0 -0.5", 3),
     .tile = "0x1.ffcp-1 -0 2.5"},
    {.name = "bfloat16 add: 1 + 2^-8 ties to even, overflow to inf",
     .dtype = TA_DTYPE_BF16,
     .rank = 1,
     .shape = {4},
     .init = "1 0x1.02p+0 1 0x1.fep+127",
     .op = TA_OP_ADD,
     .values = A1("0x1p-8 0x1p-8 0x1.8p-7 0x1p+119", 4),
     .want_old = true,
     .tile = "1 0x1.04p+0 0x1.04p+0 inf",
     .old = "1 0x1.02p+0 1 0x1.fep+127"},
    {.name = "bfloat16 add keeps subnormals, NaN results are 0x7fff",
     .dtype = TA_DTYPE_BF16,
     .rank = 1,
     .shape = {5},
     .init = "#0001 #0001 #7fc1 #7f80 #0080",
     .op = TA_OP_ADD,
     .values = A1("#0001 #8001 1 #ff80 #8001", 5),
     .tile = "#0002 #0000 #7fff #7fff #007f"},
    {.name = "bfloat16 sub: 1 - 2^-8 is exact below 1",
     .dtype = TA_DTYPE_BF16,
     .rank = 1,
     .shape = {2},
     .init = "1 0",
     .op = TA_OP_SUB,
     .values = A1("0x1p-8 0", 2),
     .tile = "0x1.fep-1 0"},

    /* ---- float min / max, exch, cas ------------------------------------------------ */
    FLOAT_MINMAX(TA_DTYPE_F32, "float32"),
    FLOAT_MINMAX(TA_DTYPE_F64, "float64"),
    FLOAT_MINMAX(TA_DTYPE_F16, "float16"),
    FLOAT_MINMAX(TA_DTYPE_BF16, "bfloat16"),
    FLOAT_EXCH_CAS(TA_DTYPE_F32, "float32"),
    FLOAT_EXCH_CAS(TA_DTYPE_F64, "float64"),
    FLOAT_EXCH_CAS(TA_DTYPE_F16, "float16"),
    FLOAT_EXCH_CAS(TA_DTYPE_BF16, "bfloat16"),
    {.name = "float16 min compares subnormals and normals after conversion",
     .dtype = TA_DTYPE_F16,
     .rank = 1,
     .shape = {3},
     .init = "#0001 #0400 #8001",
     .op = TA_OP_MIN,
     .values = A1("#0002 #03ff #8002", 3),
     .tile = "#0001 #03ff #8002"},
    {.name = "float32 exch does not flush subnormals",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {2},
     .init = "#00000001 1",
     .op = TA_OP_EXCH,
     .values = A1("#80000001 #7fc00005", 2),
     .want_old = true,
     .tile = "#80000001 #7fc00005",
     .old = "#00000001 1"},
    {.name = "float32 min keeps subnormals (no flushing outside add)",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {2},
     .init = "#00000002 0",
     .op = TA_OP_MIN,
     .values = A1("#00000001 #80000001", 2),
     .tile = "#00000001 #80000001"},

    /* ---- cas --------------------------------------------------------------------------- */
    {.name = "cuTile atomic_cas example: [0,1,0,1], cas 0 -> 42 at 0..3",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "0 1 0 1",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_CAS,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("0 1 2 3", 4)},
     .compare = S("0"),
     .values = S("42"),
     .want_old = true,
     .tile = "42 1 42 1",
     .old = "0 1 0 1"},
    {.name = "int32 cas success and failure with old values",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {3},
     .init = "5 6 7",
     .op = TA_OP_CAS,
     .compare = A1("5 0 7", 3),
     .values = A1("50 60 70", 3),
     .want_old = true,
     .tile = "50 6 70",
     .old = "5 6 7"},
    {.name = "uint64 and int64 cas compare all 64 bits",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {3},
     .init = "18446744073709551615 0 0x100000000",
     .op = TA_OP_CAS,
     .compare = A1("18446744073709551615 1 0", 3),
     .values = A1("1 2 3", 3),
     .want_old = true,
     .tile = "1 0 0x100000000",
     .old = "18446744073709551615 0 0x100000000"},
    {.name = "masked cas: masked-off elements neither read nor write, old is the compare "
             "value",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "0 0 0 0",
     .op = TA_OP_CAS,
     .compare = A1("0 9 0 9", 4),
     .values = A1("7 7 7 7", 4),
     .mask = A1("1 0 1 0", 4),
     .want_old = true,
     .tile = "7 0 7 0",
     .old = "0 9 0 9",
     .counts = "2 0"},
    {.name = "int64 cas in a 2-D sub-region with broadcast compare",
     .dtype = TA_DTYPE_I64,
     .rank = 2,
     .shape = {3, 3},
     .init = "1 1 1 1 1 2 1 2 1",
     .op = TA_OP_CAS,
     .region_rank = 2,
     .origin = {1, 1},
     .extent = {2, 2},
     .compare = A2("1 2", 1, 2),
     .values = S("-5"),
     .want_old = true,
     .tile = "1 1 1 1 -5 -5 1 2 1",
     .old = "1 2 2 1"},

    /* ---- masks, broadcast, regions ----------------------------------------------------- */
    {.name = "masked add: masked-off elements are untouched and return zero bits",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "1 2 3 4",
     .op = TA_OP_ADD,
     .values = A1("10 10 10 10", 4),
     .mask = A1("0 1 1 0", 4),
     .want_old = true,
     .tile = "1 12 13 4",
     .old = "0 2 3 0",
     .counts = "2 0"},
    {.name = "mask broadcast along rows",
     .dtype = TA_DTYPE_U32,
     .rank = 2,
     .shape = {2, 3},
     .op = TA_OP_ADD,
     .values = S("1"),
     .mask = A2("1 0 1", 1, 3),
     .tile = "1 0 1 1 0 1",
     .counts = "4 0"},
    {.name = "scalar values broadcast over a 2-D tile",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {2, 3},
     .init = "0 1 2 3 4 5",
     .op = TA_OP_ADD,
     .values = S("5"),
     .tile = "5 6 7 8 9 10"},
    {.name = "values of shape (1, 3) broadcast over (2, 3)",
     .dtype = TA_DTYPE_I64,
     .rank = 2,
     .shape = {2, 3},
     .init = "0 1 2 3 4 5",
     .op = TA_OP_SUB,
     .values = A2("1 2 3", 1, 3),
     .tile = "-1 -1 -1 2 2 2"},
    {.name = "2-D sub-region",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {3, 4},
     .op = TA_OP_ADD,
     .region_rank = 2,
     .origin = {1, 1},
     .extent = {2, 2},
     .values = A2("1 2 3 4", 2, 2),
     .want_old = true,
     .tile = "0 0 0 0 0 1 2 0 0 3 4 0",
     .old = "0 0 0 0"},
    {.name = "3-D sub-region",
     .dtype = TA_DTYPE_U32,
     .rank = 3,
     .shape = {2, 3, 4},
     .op = TA_OP_OR,
     .region_rank = 3,
     .origin = {1, 1, 2},
     .extent = {1, 2, 2},
     .values = A3("1 2 3 4", 1, 2, 2),
     .tile = "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 2 0 0 3 4"},
    {.name = "float16 max in a column sub-region",
     .dtype = TA_DTYPE_F16,
     .rank = 2,
     .shape = {2, 2},
     .init = "1 2 3 4",
     .op = TA_OP_MAX,
     .region_rank = 2,
     .origin = {0, 1},
     .extent = {2, 1},
     .values = A2("5 -1", 2, 1),
     .want_old = true,
     .tile = "1 5 3 4",
     .old = "2 4"},
    {.name = "4-D tile, scalar xor over a sub-region",
     .dtype = TA_DTYPE_U64,
     .rank = 4,
     .shape = {2, 2, 2, 2},
     .op = TA_OP_XOR,
     .region_rank = 4,
     .origin = {1, 0, 1, 0},
     .extent = {1, 2, 1, 2},
     .values = S("0xff"),
     .tile = "0 0 0 0 0 0 0 0 0 0 255 255 0 0 255 255"},

    /* ---- scatter ------------------------------------------------------------------------ */
    {.name = "scatter add along dim 0 with duplicate indices",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {3, 2},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .dim = 0,
     .n_index = 1,
     .index = {A2("0 1 0 2 0 1", 3, 2)},
     .values = A2("1 2 3 4 5 6", 3, 2),
     .tile = "9 0 0 8 0 4"},
    {.name = "scatter add along dim 1 with duplicate indices",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {2, 3},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .dim = 1,
     .n_index = 1,
     .index = {A2("2 2 0 1 1 1", 2, 3)},
     .values = A2("1 2 3 4 5 6", 2, 3),
     .tile = "3 0 3 0 15 0"},
    {.name = "scatter min along dim 2 of a 3-D tile",
     .dtype = TA_DTYPE_I32,
     .rank = 3,
     .shape = {2, 2, 3},
     .init = "100 100 100 100 100 100 100 100 100 100 100 100",
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_MIN,
     .addr = TA_ADDR_SCATTER,
     .dim = 2,
     .n_index = 1,
     .index = {A3("0 0 1 2 2 2 0 1", 2, 2, 2)},
     .values = A3("5 3 9 -1 7 8 4 2", 2, 2, 2),
     .tile = "3 100 100 100 9 -1 100 100 7 4 2 100"},
    {.name = "scatter max along dim 0 inside a sub-region (indices are region-relative)",
     .dtype = TA_DTYPE_I64,
     .rank = 2,
     .shape = {4, 2},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_MAX,
     .addr = TA_ADDR_SCATTER,
     .region_rank = 2,
     .origin = {1, 0},
     .extent = {3, 2},
     .dim = 0,
     .n_index = 1,
     .index = {A2("2 0 2 2", 2, 2)},
     .values = A2("5 -3 7 9", 2, 2),
     .tile = "0 0 0 0 0 0 7 9"},
    {.name = "scatter indices narrower than the region along the other axis",
     .dtype = TA_DTYPE_U32,
     .rank = 2,
     .shape = {3, 3},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .dim = 0,
     .n_index = 1,
     .index = {A2("2 1", 1, 2)},
     .values = A2("1 1", 1, 2),
     .tile = "0 0 0 0 1 0 1 0 0"},
    {.name = "scatter with int64 indices and sub",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {2},
     .init = "10 10",
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_SUB,
     .addr = TA_ADDR_SCATTER,
     .n_index = 1,
     .index = {L1("0 0 1", 3)},
     .values = A1("1 2 3", 3),
     .tile = "7 7"},
    {.name = "scatter float32 add of duplicates is exact",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {3},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .n_index = 1,
     .index = {A1("1 1 1 2", 4)},
     .values = A1("0.5 0.25 0.125 -1", 4),
     .tile = "0 0.875 -1"},
    {.name = "scatter float32 add flushes a subnormal operand (result stays normal)",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {1},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .n_index = 1,
     .index = {A1("0 0", 2)},
     .values = A1("#00800000 #80000001", 2),
     .tile = "#00800000"},
    {.name = "scatter with out-of-range indices (bounds on): skipped and counted",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {3},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .n_index = 1,
     .index = {A1("0 3 -1 2", 4)},
     .values = A1("1 1 1 1", 4),
     .tile = "1 0 1",
     .counts = "2 2"},
    {.name = "scatter with an out-of-range index (bounds off): rejected, tile unchanged",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {3},
     .init = "5 6 7",
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .n_index = 1,
     .index = {A1("0 3 2", 3)},
     .values = A1("1 1 1", 3),
     .no_bounds = true,
     .status = TA_OUT_OF_RANGE,
     .message = "index 3 at element 1"},
    {.name = "scatter rejects cas",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {2},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_CAS,
     .addr = TA_ADDR_SCATTER,
     .n_index = 1,
     .index = {A1("0 1", 2)},
     .values = A1("1 1", 2),
     .compare = A1("0 0", 2),
     .status = TA_INVALID_ARGUMENT,
     .message = "op cas is not a scatter atomic (those are add, sub, min or max)"},
    {.name = "scatter rejects exch",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {2},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_EXCH,
     .addr = TA_ADDR_SCATTER,
     .n_index = 1,
     .index = {A1("0 1", 2)},
     .values = A1("1 1", 2),
     .status = TA_INVALID_ARGUMENT,
     .message = "op exch is not a scatter atomic (those are add, sub, min or max)"},

    /* ---- indexed ------------------------------------------------------------------------ */
    {.name = "indexed add with index tuples of shapes (3,1) and (1,4) broadcast to (3,4)",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {3, 4},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_INDEXED,
     .n_index = 2,
     .index = {A2("0 1 2", 3, 1), A2("0 1 2 3", 1, 4)},
     .values = A2("1 2 3 4 5 6 7 8 9 10 11 12", 3, 4),
     .tile = "1 2 3 4 5 6 7 8 9 10 11 12"},
    {.name = "indexed add with duplicates from broadcast tuples",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {3, 4},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_INDEXED,
     .n_index = 2,
     .index = {A2("0 0", 2, 1), A2("1 1 2", 1, 3)},
     .values = S("1"),
     .tile = "0 4 2 0 0 0 0 0 0 0 0 0"},
    {.name = "indexed exch with broadcast tuples returns the old values",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {3, 4},
     .init = "0 1 2 3 4 5 6 7 8 9 10 11",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_EXCH,
     .addr = TA_ADDR_INDEXED,
     .n_index = 2,
     .index = {A2("0 2", 2, 1), A2("1 3", 1, 2)},
     .values = A2("10 20 30 40", 2, 2),
     .want_old = true,
     .tile = "0 10 2 20 4 5 6 7 8 30 10 40",
     .old = "1 3 9 11"},
    {.name = "indexed cas with broadcast tuples and broadcast compare",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {2, 3},
     .init = "0 1 0 1 0 1",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_CAS,
     .addr = TA_ADDR_INDEXED,
     .n_index = 2,
     .index = {A2("0 1", 2, 1), A1("0 1 2", 3)},
     .compare = A1("0 1 1", 3),
     .values = S("9"),
     .want_old = true,
     .tile = "9 9 0 1 0 9",
     .old = "0 1 0 1 0 1"},
    {.name = "indexed cas with a mask and an out-of-range index: old is the compare value",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_CAS,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("0 1 7 3", 4)},
     .compare = A1("0 5 6 0", 4),
     .values = S("1"),
     .mask = A1("1 0 1 1", 4),
     .want_old = true,
     .tile = "1 0 0 1",
     .old = "0 5 6 0",
     .counts = "2 1"},
    {.name = "indexed add on a 3-D tile with int64 index arrays",
     .dtype = TA_DTYPE_U32,
     .rank = 3,
     .shape = {2, 2, 2},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_INDEXED,
     .n_index = 3,
     .index = {L1("0 1", 2), L1("1 0", 2), L1("1 1", 2)},
     .values = A1("3 4", 2),
     .tile = "0 0 0 3 0 4 0 0"},
    {.name = "indexed add inside a sub-region (indices are region-relative)",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {4, 4},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_INDEXED,
     .region_rank = 2,
     .origin = {1, 2},
     .extent = {2, 2},
     .n_index = 2,
     .index = {A1("0 1 1", 3), A1("1 0 1", 3)},
     .values = A1("1 2 3", 3),
     .tile = "0 0 0 0 0 0 0 1 0 0 2 3 0 0 0 0"},
    {.name = "indexed: an index outside the region (though inside the tile) is skipped",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {4, 4},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_INDEXED,
     .region_rank = 2,
     .origin = {1, 2},
     .extent = {2, 2},
     .n_index = 2,
     .index = {A1("0 2 -1", 3), A1("0 0 0", 3)},
     .values = S("1"),
     .want_old = true,
     .tile = "0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0",
     .old = "0 0 0",
     .counts = "1 2"},
    {.name = "indexed with bounds checking off and an out-of-range index: rejected, tile "
             "unchanged",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "1 2 3 4",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("0 1 -1 3", 4)},
     .values = S("100"),
     .no_bounds = true,
     .status = TA_OUT_OF_RANGE,
     .message = "index -1 at element 2"},
    {.name = "indexed with bounds checking off and valid indices applies",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "1 2 3 4",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("0 1 3", 3)},
     .values = S("100"),
     .no_bounds = true,
     .tile = "101 102 3 104"},
    {.name = "indexed out-of-range with bounds on: skipped, counted, old is zero bits",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "10 20 30 40",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("0 5 -1 2", 4)},
     .values = S("1"),
     .want_old = true,
     .tile = "11 20 31 40",
     .old = "10 0 0 30",
     .counts = "2 2"},
    {.name = "flat offsets into a region",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {2, 3},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_FLAT,
     .region_rank = 2,
     .origin = {0, 1},
     .extent = {2, 2},
     .n_index = 1,
     .index = {A1("0 3 3 1", 4)},
     .values = S("1"),
     .tile = "0 1 1 0 0 2"},
    {.name = "flat offsets out of the region are skipped",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {2, 3},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_FLAT,
     .region_rank = 2,
     .origin = {0, 1},
     .extent = {2, 2},
     .n_index = 1,
     .index = {L1("4 -1 0", 3)},
     .values = S("1"),
     .tile = "0 1 0 0 0 0",
     .counts = "1 2"},
    {.name = "flat offsets with bounds off: rejected, tile unchanged",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {2, 3},
     .init = "1 1 1 1 1 1",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_FLAT,
     .n_index = 1,
     .index = {A1("0 6", 2)},
     .values = S("1"),
     .no_bounds = true,
     .status = TA_OUT_OF_RANGE,
     .message = "flat offset 6"},
    {.name = "indexed uint64 xor with duplicates",
     .dtype = TA_DTYPE_U64,
     .rank = 1,
     .shape = {2},
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_XOR,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("0 0 1", 3)},
     .values = A1("0xff 0x0f 0x1", 3),
     .tile = "0xf0 1"},
    {.name = "indexed float16 max with old values",
     .dtype = TA_DTYPE_F16,
     .rank = 1,
     .shape = {3},
     .init = "1 -0 nan",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_MAX,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("2 1 0", 3)},
     .values = A1("5 0 2", 3),
     .want_old = true,
     .tile = "2 0 nan",
     .old = "nan -0 1"},
    {.name = "indexed bfloat16 exch (16-bit atomics next to each other)",
     .dtype = TA_DTYPE_BF16,
     .rank = 1,
     .shape = {4},
     .init = "1 2 3 4",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_EXCH,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("1 2", 2)},
     .values = A1("-nan #0001", 2),
     .want_old = true,
     .tile = "1 -nan #0001 4",
     .old = "2 3"},

    /* ---- memory ops: gather / load, scatter store / store -------------------------- */
    {.name = "masked load returns the padding for masked-off elements",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "1 2 3 4",
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_LOAD,
     .mask = A1("1 0 1 0", 4),
     .padding = S("-1"),
     .tile = "1 2 3 4",
     .old = "1 -1 3 -1",
     .counts = "2 0"},
    {.name = "load without padding returns zero bits for masked-off elements",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {2},
     .init = "1 2",
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_LOAD,
     .sem = TA_SEM_ACQUIRE,
     .mask = A1("0 1", 2),
     .tile = "1 2",
     .old = "0 2",
     .counts = "1 0"},
    {.name = "gather with an out-of-range index returns the padding",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {4},
     .init = "10 20 30 40",
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_LOAD,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("3 9 0", 3)},
     .padding = S("-7"),
     .tile = "10 20 30 40",
     .old = "40 -7 10",
     .counts = "2 1"},
    {.name = "gather float16 with a NaN padding keeps its bits",
     .dtype = TA_DTYPE_F16,
     .rank = 1,
     .shape = {2},
     .init = "1 #0001",
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_LOAD,
     .addr = TA_ADDR_FLAT,
     .n_index = 1,
     .index = {A1("1 2 0", 3)},
     .padding = S("-nan"),
     .tile = "1 #0001",
     .old = "#0001 -nan 1",
     .counts = "2 1"},
    {.name = "gather in scatter-dim form",
     .dtype = TA_DTYPE_I64,
     .rank = 2,
     .shape = {2, 2},
     .init = "1 2 3 4",
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_LOAD,
     .addr = TA_ADDR_SCATTER,
     .dim = 1,
     .n_index = 1,
     .index = {A2("1 1 0 1", 2, 2)},
     .tile = "1 2 3 4",
     .old = "2 2 3 4"},
    {.name = "store into a region",
     .dtype = TA_DTYPE_I32,
     .rank = 2,
     .shape = {2, 2},
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_STORE,
     .sem = TA_SEM_RELEASE,
     .region_rank = 2,
     .origin = {0, 1},
     .extent = {2, 1},
     .values = A2("5 6", 2, 1),
     .tile = "0 5 0 6"},
    {.name = "scatter store with a mask",
     .dtype = TA_DTYPE_U32,
     .rank = 1,
     .shape = {4},
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_STORE,
     .addr = TA_ADDR_INDEXED,
     .n_index = 1,
     .index = {A1("3 0 1 8", 4)},
     .values = A1("7 8 9 10", 4),
     .mask = A1("1 1 0 1", 4),
     .tile = "8 0 0 7",
     .counts = "2 1"},
    {.name = "store keeps float bit patterns (NaN payload, subnormal, -0.0)",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {3},
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_STORE,
     .values = A1("#ffc00123 #00000001 -0", 3),
     .tile = "#ffc00123 #00000001 -0"},
    {.name = "load with sem release is rejected",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {1},
     .family = TA_FAMILY_MEMORY,
     .op = TA_OP_LOAD,
     .sem = TA_SEM_RELEASE,
     .status = TA_INVALID_ARGUMENT,
     .message = "sem release is not valid for load"},

    /* ---- memory orders (same results; exercises every order) ---------------------- */
    {.name = "add with acq_rel",
     .dtype = TA_DTYPE_I64,
     .rank = 1,
     .shape = {2},
     .init = "1 2",
     .op = TA_OP_ADD,
     .sem = TA_SEM_ACQ_REL,
     .values = A1("3 4", 2),
     .want_old = true,
     .tile = "4 6",
     .old = "1 2"},
    {.name = "cas with acquire",
     .dtype = TA_DTYPE_U32,
     .rank = 1,
     .shape = {2},
     .init = "1 2",
     .op = TA_OP_CAS,
     .sem = TA_SEM_ACQUIRE,
     .compare = A1("1 1", 2),
     .values = A1("5 5", 2),
     .want_old = true,
     .tile = "5 2",
     .old = "1 2"},
    {.name = "float32 max with release writes back even when unchanged",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {2},
     .init = "3 -0",
     .op = TA_OP_MAX,
     .sem = TA_SEM_RELEASE,
     .values = A1("1 0", 2),
     .want_old = true,
     .tile = "3 0",
     .old = "3 -0"},
    {.name = "bfloat16 min with acq_rel",
     .dtype = TA_DTYPE_BF16,
     .rank = 1,
     .shape = {2},
     .init = "3 -0",
     .op = TA_OP_MIN,
     .sem = TA_SEM_ACQ_REL,
     .values = A1("1 0", 2),
     .tile = "1 -0"},
    {.name = "exch with acquire on int64",
     .dtype = TA_DTYPE_I64,
     .rank = 1,
     .shape = {1},
     .init = "-1",
     .op = TA_OP_EXCH,
     .sem = TA_SEM_ACQUIRE,
     .values = S("7"),
     .want_old = true,
     .tile = "7",
     .old = "-1"},

    /* ---- space shared ------------------------------------------------------------------ */
    {.name = "shared float32 add keeps -0.0 results (identity is -0.0)",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {2},
     .init = "-0 -0",
     .op = TA_OP_ADD,
     .space = TA_SPACE_SHARED,
     .values = A1("-0 0", 2),
     .tile = "-0 0"},
    {.name = "shared float32 scatter add flushes subnormal operands too",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {1},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .space = TA_SPACE_SHARED,
     .n_index = 1,
     .index = {A1("0 0", 2)},
     .values = A1("#00800000 #80000001", 2),
     .tile = "#00800000"},
    {.name = "shared float32 scatter min: -0.0 < +0.0",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {1},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_MIN,
     .addr = TA_ADDR_SCATTER,
     .space = TA_SPACE_SHARED,
     .n_index = 1,
     .index = {A1("0 0", 2)},
     .values = A1("-0 0", 2),
     .tile = "-0"},
    {.name = "shared bfloat16 max with a NaN operand stores the NaN",
     .dtype = TA_DTYPE_BF16,
     .rank = 1,
     .shape = {1},
     .init = "1",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_MAX,
     .addr = TA_ADDR_INDEXED,
     .space = TA_SPACE_SHARED,
     .n_index = 1,
     .index = {A1("0 0", 2)},
     .values = A1("nan 2", 2),
     .tile = "nan"},
    {.name = "shared and (identity all ones)",
     .dtype = TA_DTYPE_U32,
     .rank = 1,
     .shape = {1},
     .init = "0xff",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_AND,
     .addr = TA_ADDR_INDEXED,
     .space = TA_SPACE_SHARED,
     .n_index = 1,
     .index = {A1("0 0", 2)},
     .values = A1("0x0f 0x3c", 2),
     .tile = "0x0c"},
    {.name = "shared uint32 min (identity the type's max)",
     .dtype = TA_DTYPE_U32,
     .rank = 1,
     .shape = {1},
     .init = "100",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_MIN,
     .addr = TA_ADDR_INDEXED,
     .space = TA_SPACE_SHARED,
     .n_index = 1,
     .index = {A1("0 0", 2)},
     .values = A1("7 200", 2),
     .tile = "7"},
    {.name = "shared int32 max (identity the type's min)",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {1},
     .init = "-100",
     .family = TA_FAMILY_INDEXED,
     .op = TA_OP_MAX,
     .addr = TA_ADDR_INDEXED,
     .space = TA_SPACE_SHARED,
     .n_index = 1,
     .index = {A1("0 0", 2)},
     .values = A1("-50 -200", 2),
     .tile = "-50"},
    {.name = "shared int64 scatter add with duplicates in a sub-region, out of range skipped",
     .dtype = TA_DTYPE_I64,
     .rank = 2,
     .shape = {3, 3},
     .family = TA_FAMILY_SCATTER,
     .op = TA_OP_ADD,
     .addr = TA_ADDR_SCATTER,
     .space = TA_SPACE_SHARED,
     .region_rank = 2,
     .origin = {1, 1},
     .extent = {2, 2},
     .dim = 1,
     .n_index = 1,
     .index = {A2("0 0 1 1 2 0", 2, 3)},
     .values = A2("1 2 3 4 5 6", 2, 3),
     .tile = "0 0 0 0 3 3 0 6 4",
     .counts = "5 1"},
    {.name = "shared float16 sub",
     .dtype = TA_DTYPE_F16,
     .rank = 1,
     .shape = {2},
     .init = "1 -0",
     .op = TA_OP_SUB,
     .space = TA_SPACE_SHARED,
     .values = A1("0.5 0", 2),
     .tile = "0.5 -0"},
    {.name = "shared int32 xor with a mask",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {3},
     .init = "1 2 3",
     .op = TA_OP_XOR,
     .space = TA_SPACE_SHARED,
     .values = S("-1"),
     .mask = A1("1 0 1", 3),
     .tile = "-2 2 -4",
     .counts = "2 0"},
    {.name = "shared space with want_old is rejected",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {1},
     .op = TA_OP_ADD,
     .space = TA_SPACE_SHARED,
     .values = S("1"),
     .want_old = true,
     .status = TA_INVALID_ARGUMENT,
     .message = "space shared cannot return pre-RMW values"},
    {.name = "shared space with exch is rejected",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {1},
     .op = TA_OP_EXCH,
     .space = TA_SPACE_SHARED,
     .values = S("1"),
     .status = TA_INVALID_ARGUMENT,
     .message = "space shared is not defined for exch"},

    /* ---- rejections that leave the tile unchanged --------------------------------------- */
    {.name = "and on float32 is rejected",
     .dtype = TA_DTYPE_F32,
     .rank = 1,
     .shape = {2},
     .init = "1 2",
     .op = TA_OP_AND,
     .values = S("1"),
     .status = TA_INVALID_ARGUMENT,
     .message = "op and is not defined for dtype float32"},
    {.name = "values of the wrong dtype are rejected",
     .dtype = TA_DTYPE_I32,
     .rank = 1,
     .shape = {2},
     .init = "1 2",
     .op = TA_OP_ADD,
     .values = {"1 1", TA_DTYPE_I64, 1, {2}},
     .status = TA_INVALID_ARGUMENT,
     .message = "values dtype int64 does not match the tile dtype int32"},
};

size_t ta_vectors_count(void)
{
	return sizeof(vectors) / sizeof(vectors[0]);
}

const ta_vector *ta_vectors_get(size_t i)
{
	return i < ta_vectors_count() ? &vectors[i] : NULL;
}

/* ---- runner ------------------------------------------------------------------------ */

/* Parses operand o (default dtype def) into a packed buffer *packed and a view; an absent
 * operand gives a view with present == false. Returns false with why set. */
static bool make_operand(const ta_vec_operand *o, ta_dtype def, const char *what,
                         ta_array_view *view, void **packed, char *why, size_t whylen)
{
	memset(view, 0, sizeof(*view));
	*packed = NULL;
	if (!o->data)
		return true;
	ta_dtype dt = o->dtype != TA_DTYPE_NONE ? o->dtype : def;
	uint64_t *bits;
	size_t n;
	char perr[160];
	if (!ta_tu_parse(dt, o->data, &bits, &n, perr, sizeof(perr))) {
		snprintf(why, whylen, "%s: %s", what, perr);
		return false;
	}
	int64_t want = ta_tu_count(o->rank, o->shape);
	if ((int64_t)n != want) {
		snprintf(why, whylen, "%s has %zu elements, its shape needs %" PRId64, what, n,
		         want);
		free(bits);
		return false;
	}
	*packed = ta_tu_pack(dt, bits, n);
	free(bits);
	if (!*packed) {
		snprintf(why, whylen, "out of memory");
		return false;
	}
	*view = ta_tu_view(dt, o->rank, o->shape, *packed);
	return true;
}

/* Compares n packed elements at got with the bit patterns want; false with why naming the
 * first mismatch. */
static bool same_bits(ta_dtype dt, const char *what, const void *got, const uint64_t *want,
                      size_t n, char *why, size_t whylen)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t g = ta_tu_get(dt, got, i);
		if (g != want[i]) {
			char a[64], b[64];
			snprintf(why, whylen, "%s[%zu] is %s, expected %s", what, i,
			         ta_tu_fmt(dt, g, a, sizeof(a)),
			         ta_tu_fmt(dt, want[i], b, sizeof(b)));
			return false;
		}
	}
	return true;
}

/* Parses expected text of n elements of dt; false with why set. */
static bool expect_bits(ta_dtype dt, const char *what, const char *text, size_t n, uint64_t **bits,
                        char *why, size_t whylen)
{
	size_t got;
	char perr[160];
	if (!ta_tu_parse(dt, text, bits, &got, perr, sizeof(perr))) {
		snprintf(why, whylen, "expected %s: %s", what, perr);
		return false;
	}
	if (got != n) {
		snprintf(why, whylen, "expected %s has %zu elements, not %zu", what, got, n);
		free(*bits);
		*bits = NULL;
		return false;
	}
	return true;
}

bool ta_vector_run(ta_backend *be, const ta_vector *v, char *msg, size_t msglen)
{
	char why[512] = "";
	bool ok = false;
	void *mem = NULL, *initp = NULL, *readback = NULL, *old_out = NULL;
	void *packed[TA_MAX_RANK + 4] = {NULL};
	uint64_t *init_bits = NULL, *want_tile = NULL, *want_old = NULL;
	ta_error err = {TA_OK, ""};
	ta_tile_shape t;
	memset(&t, 0, sizeof(t));
	t.dtype = v->dtype;
	t.rank = v->rank;
	memcpy(t.shape, v->shape, sizeof(t.shape));
	size_t n = (size_t)ta_tu_count(v->rank, v->shape);
	size_t es = ta_dtype_size(v->dtype);
	size_t bytes = n * es;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		snprintf(why, sizeof(why), __VA_ARGS__);                                           \
		goto out;                                                                          \
	} while (0)

	if (!v->init) {
		init_bits = calloc(n, sizeof(*init_bits));
		if (!init_bits)
			FAIL("out of memory");
	} else if (!expect_bits(v->dtype, "init", v->init, n, &init_bits, why, sizeof(why))) {
		goto out;
	}
	initp = ta_tu_pack(v->dtype, init_bits, n);
	readback = malloc(bytes);
	if (!initp || !readback)
		FAIL("out of memory");

	ta_status st = ta_backend_tile_alloc(be, bytes, &mem, &err);
	if (st != TA_OK)
		FAIL("tile_alloc: %s: %s", ta_status_name(st), err.msg);
	if ((st = ta_tu_tile_read(be, mem, bytes, &t, readback, &err)) != TA_OK)
		FAIL("reading the new tile: %s: %s", ta_status_name(st), err.msg);
	for (size_t i = 0; i < bytes; i++)
		if (((uint8_t *)readback)[i] != 0)
			FAIL("a new tile is not zero-filled (byte %zu)", i);
	if (v->init && (st = ta_tu_tile_write(be, mem, bytes, &t, initp, &err)) != TA_OK)
		FAIL("writing the initial tile: %s: %s", ta_status_name(st), err.msg);

	ta_request req;
	ta_request_init(&req);
	req.family = v->family;
	req.op = v->op;
	req.addr = v->addr;
	req.has_region = v->region_rank > 0;
	req.region_rank = v->region_rank;
	memcpy(req.region_origin, v->origin, sizeof(req.region_origin));
	memcpy(req.region_shape, v->extent, sizeof(req.region_shape));
	req.scatter_dim = v->dim;
	req.n_index = v->n_index;
	req.sem = v->sem;
	req.space = v->space;
	req.check_bounds = !v->no_bounds;
	req.want_old = v->want_old;
	for (int i = 0; i < v->n_index && i < TA_MAX_RANK; i++) {
		char what[32];
		snprintf(what, sizeof(what), "index[%d]", i);
		if (!make_operand(&v->index[i], TA_DTYPE_I32, what, &req.index[i], &packed[i], why,
		                  sizeof(why)))
			goto out;
	}
	if (!make_operand(&v->values, v->dtype, "values", &req.values, &packed[TA_MAX_RANK], why,
	                  sizeof(why)) ||
	    !make_operand(&v->compare, v->dtype, "compare", &req.compare, &packed[TA_MAX_RANK + 1],
	                  why, sizeof(why)) ||
	    !make_operand(&v->mask, TA_DTYPE_BOOL, "mask", &req.mask, &packed[TA_MAX_RANK + 2], why,
	                  sizeof(why)) ||
	    !make_operand(&v->padding, v->dtype, "padding", &req.padding, &packed[TA_MAX_RANK + 3],
	                  why, sizeof(why)))
		goto out;

	ta_plan plan;
	st = ta_plan_build(&plan, &t, &req, &err);
	if (v->status != TA_OK) {
		if (st != v->status)
			FAIL("plan build gave %s (%s), expected %s", ta_status_name(st),
			     st == TA_OK ? "" : err.msg, ta_status_name(v->status));
		if (v->message && !strstr(err.msg, v->message))
			FAIL("error message \"%s\" does not contain \"%s\"", err.msg, v->message);
		if ((st = ta_tu_tile_read(be, mem, bytes, &t, readback, &err)) != TA_OK)
			FAIL("reading the tile: %s: %s", ta_status_name(st), err.msg);
		if (!same_bits(v->dtype, "tile (must be unchanged)", readback, init_bits, n, why,
		               sizeof(why)))
			goto out;
		ok = true;
		goto out;
	}
	if (st != TA_OK)
		FAIL("plan build failed: %s: %s", ta_status_name(st), err.msg);
	if (plan.want_old) {
		old_out = malloc(plan.count ? (size_t)plan.count * es : 1);
		if (!old_out)
			FAIL("out of memory");
		memset(old_out, 0xa5, plan.count ? (size_t)plan.count * es : 1);
		plan.old_out = old_out;
	}
	ta_result res = {UINT64_MAX, UINT64_MAX};
	st = ta_backend_apply(be, mem, bytes, &plan, &res, &err);
	if (st != TA_OK)
		FAIL("apply failed: %s: %s", ta_status_name(st), err.msg);
	long long want_applied = plan.count, want_skipped = 0;
	if (v->counts && sscanf(v->counts, "%lld %lld", &want_applied, &want_skipped) != 2)
		FAIL("bad counts text \"%s\"", v->counts);
	if (res.applied != (uint64_t)want_applied || res.skipped != (uint64_t)want_skipped)
		FAIL("applied %" PRIu64 " skipped %" PRIu64 ", expected %lld and %lld", res.applied,
		     res.skipped, want_applied, want_skipped);
	if (!v->tile)
		FAIL("the vector states no expected tile");
	if (!expect_bits(v->dtype, "tile", v->tile, n, &want_tile, why, sizeof(why)))
		goto out;
	if ((st = ta_tu_tile_read(be, mem, bytes, &t, readback, &err)) != TA_OK)
		FAIL("reading the tile: %s: %s", ta_status_name(st), err.msg);
	if (!same_bits(v->dtype, "tile", readback, want_tile, n, why, sizeof(why)))
		goto out;
	if (v->old) {
		if (!plan.want_old)
			FAIL("the vector expects old values but the plan has none");
		if (!expect_bits(v->dtype, "old", v->old, (size_t)plan.count, &want_old, why,
		                 sizeof(why)))
			goto out;
		if (!same_bits(v->dtype, "old", old_out, want_old, (size_t)plan.count, why,
		               sizeof(why)))
			goto out;
	}
	ok = true;
#undef FAIL
out:
	if (mem)
		ta_backend_tile_free(be, mem);
	for (size_t i = 0; i < sizeof(packed) / sizeof(packed[0]); i++)
		free(packed[i]);
	free(init_bits);
	free(want_tile);
	free(want_old);
	free(initp);
	free(readback);
	free(old_out);
	if (!ok)
		snprintf(msg, msglen, "vector \"%s\": %s", v->name, why);
	else if (msglen)
		msg[0] = '\0';
	return ok;
}

int ta_vectors_run(ta_backend *be, FILE *log)
{
	int failed = 0;
	char msg[768];
	for (size_t i = 0; i < ta_vectors_count(); i++) {
		if (!ta_vector_run(be, &vectors[i], msg, sizeof(msg))) {
			failed++;
			if (log)
				fprintf(log, "%s\n", msg);
		}
	}
	return failed;
}

/* ---- reference sweep --------------------------------------------------------------- */

/* How random operand values are drawn. */
typedef enum value_mode {
	VM_ANY,      /* specials and random bit patterns */
	VM_NONAN,    /* like VM_ANY without NaNs */
	VM_SMALLINT, /* small integers in [-4, 4] (exact float sums in any order) */
} value_mode;

/* A random element of dt under mode. */
static uint64_t random_value(ta_dtype dt, value_mode mode, uint64_t *rng)
{
	uint64_t mask =
	    ta_dtype_size(dt) >= 8 ? UINT64_MAX : (UINT64_C(1) << (ta_dtype_size(dt) * 8)) - 1;
	if (mode == VM_SMALLINT) {
		uint64_t bits;
		double d = (double)ta_tu_rand_below(rng, 9) - 4.0;
		if (!ta_dtype_is_float(dt) && !ta_dtype_is_signed_int(dt))
			d = d < 0 ? -d : d;
		ta_tu_encode(dt, d, &bits);
		return bits;
	}
	for (;;) {
		uint64_t bits;
		if (ta_tu_rand_below(rng, 4) == 0) {
			static const double specials[] = {0.0,       -0.0,    1.0,    -1.0,
			                                  0.5,       1.5,     -2.75,  INFINITY,
			                                  -INFINITY, 65504.0, 3.0e38, NAN};
			uint64_t pick = ta_tu_rand_below(rng, 16);
			if (pick < 12 && ta_dtype_is_float(dt)) {
				if (!ta_tu_encode(dt, specials[pick], &bits))
					bits = ta_tu_rand(rng) & mask; /* not representable */
			} else if (pick < 12) {
				static const uint64_t ints[] = {0, 1, UINT64_MAX, 2, 0x7f, 0x80};
				bits = ints[pick % 6] & mask;
			} else if (pick == 12) {
				bits = mask >> 1; /* canonical NaN / INT_MAX */
			} else if (pick == 13) {
				bits = (mask >> 1) + 1; /* -0.0 / INT_MIN */
			} else if (pick == 14) {
				bits = 1; /* smallest subnormal */
			} else {
				bits = (mask >> 1) + 1 + 1; /* negative smallest subnormal */
			}
		} else {
			bits = ta_tu_rand(rng) & mask;
		}
		if (mode == VM_NONAN && ta_tu_is_nan(dt, bits))
			continue;
		return bits;
	}
}

/* Addressing forms the sweep runs. */
enum { F_REGION, F_INDEXED, F_FLAT, F_SCATTER, F_COUNT };

/* Names of the forms for messages. */
static const char *const form_names[F_COUNT] = {"region", "indexed", "flat", "scatter"};

/* One sweep case: what to run. */
typedef struct sweep_case {
	ta_op op;                   /* operation */
	ta_dtype dt;                /* tile dtype */
	int rank;                   /* tile rank */
	int64_t shape[TA_MAX_RANK]; /* tile shape */
	bool sub;                   /* sub-region (else the whole tile) */
	int form;                   /* F_* */
	int variant;                /* 0..2: operands, mask, sem, space */
} sweep_case;

/* Buffers of one sweep case, freed together. */
typedef struct sweep_bufs {
	uint64_t *init;              /* initial tile bits */
	uint64_t *expect;            /* expected tile bits */
	uint64_t *expect_old;        /* expected old bits (count) */
	int64_t *dest;               /* per element: tile offset, or -1 (out of range) */
	uint64_t *vals;              /* values bits (count, or 1 when scalar) */
	uint64_t *cmps;              /* compare bits */
	uint8_t *mask;               /* mask bytes or NULL */
	void *index[TA_MAX_RANK];    /* packed index arrays */
	void *pvals, *pcmps, *pinit; /* packed values, compare, init */
	void *readback, *old_out;    /* results */
} sweep_bufs;

/* Frees every buffer of b. */
static void sweep_bufs_free(sweep_bufs *b)
{
	free(b->init);
	free(b->expect);
	free(b->expect_old);
	free(b->dest);
	free(b->vals);
	free(b->cmps);
	free(b->mask);
	for (int i = 0; i < TA_MAX_RANK; i++)
		free(b->index[i]);
	free(b->pvals);
	free(b->pcmps);
	free(b->pinit);
	free(b->readback);
	free(b->old_out);
	memset(b, 0, sizeof(*b));
}

/* Shuffles n int64 values in place. */
static void shuffle(int64_t *a, int64_t n, uint64_t *rng)
{
	for (int64_t i = n - 1; i > 0; i--) {
		int64_t j = (int64_t)ta_tu_rand_below(rng, (uint64_t)i + 1);
		int64_t t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

/* Runs one sweep case; false with why set on a mismatch or an unexpected error. */
static bool sweep_run(ta_backend *be, const sweep_case *sc, uint64_t *rng, char *why, size_t whylen)
{
	sweep_bufs b;
	memset(&b, 0, sizeof(b));
	bool ok = false;
	void *mem = NULL;
	ta_error err = {TA_OK, ""};
	const ta_dtype dt = sc->dt;
	const size_t es = ta_dtype_size(dt);
	const int rank = sc->rank;
	ta_tile_shape t;
	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.rank = rank;
	memcpy(t.shape, sc->shape, sizeof(t.shape));
	const int64_t n = ta_tu_count(rank, sc->shape);
	int64_t origin[TA_MAX_RANK] = {0}, extent[TA_MAX_RANK] = {0}, tstride[TA_MAX_RANK];
	int64_t s = 1;
	for (int a = rank - 1; a >= 0; a--) {
		tstride[a] = s;
		s *= sc->shape[a];
		origin[a] = sc->sub ? (sc->shape[a] > 2 ? 1 : 0) : 0;
		extent[a] =
		    sc->sub ? sc->shape[a] - origin[a] - (sc->shape[a] > 3 ? 1 : 0) : sc->shape[a];
	}
	const int64_t region_count = ta_tu_count(rank, extent);
	const bool is_rmw = ta_op_is_rmw(sc->op);
	const bool dups = sc->form == F_SCATTER;
	const bool shared = sc->variant == 2 && ta_op_shared_ok(sc->op) && sc->op != TA_OP_STORE &&
	                    sc->op != TA_OP_LOAD;
	const bool want_old =
	    sc->op == TA_OP_LOAD || (!dups && !shared && sc->variant < 2 && sc->op != TA_OP_STORE);
	const bool scalar_values = sc->variant == 1 && sc->op != TA_OP_LOAD;
	const bool masked = sc->variant >= 1;
	value_mode mode = VM_ANY;
	if (dups && ta_dtype_is_float(dt))
		mode = (sc->op == TA_OP_ADD || sc->op == TA_OP_SUB) ? VM_SMALLINT : VM_NONAN;

#define SFAIL(...)                                                                                 \
	do {                                                                                       \
		snprintf(why, whylen, __VA_ARGS__);                                                \
		goto out;                                                                          \
	} while (0)

	/* the tile */
	b.init = malloc((size_t)n * sizeof(uint64_t));
	b.expect = malloc((size_t)n * sizeof(uint64_t));
	if (!b.init || !b.expect)
		SFAIL("out of memory");
	for (int64_t i = 0; i < n; i++)
		b.init[i] = b.expect[i] = random_value(dt, mode, rng);

	/* the iteration shape and each element's destination */
	ta_request req;
	ta_request_init(&req);
	req.op = sc->op;
	req.has_region = sc->sub;
	req.region_rank = sc->sub ? rank : 0;
	memcpy(req.region_origin, origin, sizeof(origin));
	memcpy(req.region_shape, extent, sizeof(extent));
	int irank = 0;
	int64_t ishape[TA_MAX_RANK] = {0};
	int64_t count = 0;
	ta_dtype idt = sc->variant % 2 ? TA_DTYPE_I64 : TA_DTYPE_I32;
	if (sc->form == F_REGION) {
		req.family = is_rmw ? TA_FAMILY_ELEMENTWISE : TA_FAMILY_MEMORY;
		req.addr = TA_ADDR_REGION;
		irank = rank;
		memcpy(ishape, extent, sizeof(extent));
		count = region_count;
		b.dest = malloc((size_t)count * sizeof(int64_t));
		if (!b.dest)
			SFAIL("out of memory");
		for (int64_t k = 0; k < count; k++) {
			int64_t f = k, off = 0;
			for (int a = rank - 1; a >= 0; a--) {
				off += (origin[a] + f % extent[a]) * tstride[a];
				f /= extent[a];
			}
			b.dest[k] = off;
		}
	} else if (sc->form == F_INDEXED || sc->form == F_FLAT) {
		req.family = is_rmw ? TA_FAMILY_INDEXED : TA_FAMILY_MEMORY;
		req.addr = sc->form == F_FLAT ? TA_ADDR_FLAT : TA_ADDR_INDEXED;
		count = region_count + 3;
		irank = 1;
		ishape[0] = count;
		int nidx = sc->form == F_FLAT ? 1 : rank;
		req.n_index = nidx;
		int64_t *perm = malloc((size_t)count * sizeof(int64_t));
		b.dest = malloc((size_t)count * sizeof(int64_t));
		if (!perm || !b.dest) {
			free(perm);
			SFAIL("out of memory");
		}
		for (int64_t k = 0; k < count; k++)
			perm[k] = k < region_count ? k : -1; /* -1: out of range */
		shuffle(perm, count, rng);
		for (int i = 0; i < nidx; i++) {
			b.index[i] = malloc((size_t)count * ta_dtype_size(idt));
			if (!b.index[i]) {
				free(perm);
				SFAIL("out of memory");
			}
		}
		for (int64_t k = 0; k < count; k++) {
			int64_t r[TA_MAX_RANK], f = perm[k];
			if (f >= 0) {
				int64_t off = 0;
				for (int a = rank - 1; a >= 0; a--) {
					r[a] = f % extent[a];
					f /= extent[a];
					off += (origin[a] + r[a]) * tstride[a];
				}
				b.dest[k] = off;
				if (sc->form == F_FLAT)
					ta_tu_set(idt, b.index[0], (size_t)k, (uint64_t)perm[k]);
				else
					for (int a = 0; a < rank; a++)
						ta_tu_set(idt, b.index[a], (size_t)k,
						          (uint64_t)r[a]);
			} else {
				b.dest[k] = -1;
				int64_t bad_hi = ta_tu_rand_below(rng, 2);
				int64_t delta = (int64_t)ta_tu_rand_below(rng, 3);
				if (sc->form == F_FLAT) {
					int64_t v = bad_hi ? region_count + delta : -1 - delta;
					ta_tu_set(idt, b.index[0], (size_t)k, (uint64_t)v);
				} else {
					int bad = (int)ta_tu_rand_below(rng, (uint64_t)rank);
					for (int a = 0; a < rank; a++) {
						int64_t v = (int64_t)ta_tu_rand_below(
						    rng, (uint64_t)extent[a]);
						if (a == bad)
							v = bad_hi ? extent[a] + delta : -1 - delta;
						ta_tu_set(idt, b.index[a], (size_t)k, (uint64_t)v);
					}
				}
			}
		}
		free(perm);
		for (int i = 0; i < nidx; i++)
			req.index[i] = ta_tu_view(idt, 1, ishape, b.index[i]);
	} else { /* F_SCATTER */
		int dim = sc->variant % rank;
		req.family = is_rmw ? TA_FAMILY_SCATTER : TA_FAMILY_MEMORY;
		req.addr = TA_ADDR_SCATTER;
		req.scatter_dim = dim;
		req.n_index = 1;
		irank = rank;
		for (int a = 0; a < rank; a++)
			ishape[a] = a == dim ? extent[a] + 2
			                     : (extent[a] > 1 && sc->variant == 1 ? extent[a] - 1
			                                                          : extent[a]);
		count = ta_tu_count(rank, ishape);
		b.dest = malloc((size_t)count * sizeof(int64_t));
		b.index[0] = malloc((size_t)count * ta_dtype_size(idt));
		if (!b.dest || !b.index[0])
			SFAIL("out of memory");
		for (int64_t k = 0; k < count; k++) {
			int64_t e[TA_MAX_RANK], f = k;
			for (int a = rank - 1; a >= 0; a--) {
				e[a] = f % ishape[a];
				f /= ishape[a];
			}
			int64_t idx = (int64_t)ta_tu_rand_below(rng, (uint64_t)extent[dim]);
			if (ta_tu_rand_below(rng, 16) == 0)
				idx = ta_tu_rand_below(rng, 2) ? extent[dim] : -1;
			ta_tu_set(idt, b.index[0], (size_t)k, (uint64_t)idx);
			if (idx < 0 || idx >= extent[dim]) {
				b.dest[k] = -1;
				continue;
			}
			e[dim] = idx;
			int64_t off = 0;
			for (int a = 0; a < rank; a++)
				off += (origin[a] + e[a]) * tstride[a];
			b.dest[k] = off;
		}
		req.index[0] = ta_tu_view(idt, rank, ishape, b.index[0]);
	}

	/* operands */
	int64_t nvals = scalar_values ? 1 : count;
	b.vals = malloc((size_t)nvals * sizeof(uint64_t));
	b.cmps = malloc((size_t)nvals * sizeof(uint64_t));
	if (!b.vals || !b.cmps)
		SFAIL("out of memory");
	for (int64_t k = 0; k < nvals; k++) {
		b.vals[k] = random_value(dt, mode, rng);
		int64_t d = b.dest[k];
		b.cmps[k] =
		    (d >= 0 && ta_tu_rand_below(rng, 2)) ? b.init[d] : random_value(dt, mode, rng);
	}
	int64_t zero_shape[TA_MAX_RANK] = {0};
	if (sc->op != TA_OP_LOAD) {
		b.pvals = ta_tu_pack(dt, b.vals, (size_t)nvals);
		if (!b.pvals)
			SFAIL("out of memory");
		req.values = ta_tu_view(dt, scalar_values ? 0 : irank,
		                        scalar_values ? zero_shape : ishape, b.pvals);
	}
	if (sc->op == TA_OP_CAS) {
		b.pcmps = ta_tu_pack(dt, b.cmps, (size_t)nvals);
		if (!b.pcmps)
			SFAIL("out of memory");
		req.compare = ta_tu_view(dt, scalar_values ? 0 : irank,
		                         scalar_values ? zero_shape : ishape, b.pcmps);
	}
	if (masked) {
		b.mask = malloc((size_t)count);
		if (!b.mask)
			SFAIL("out of memory");
		for (int64_t k = 0; k < count; k++)
			b.mask[k] = ta_tu_rand_below(rng, 10) < 7;
		req.mask = ta_tu_view(TA_DTYPE_BOOL, irank, ishape, b.mask);
	}
	uint64_t padding = 0;
	if (sc->op == TA_OP_LOAD && sc->variant == 1) {
		padding = random_value(dt, VM_ANY, rng);
		b.pcmps = ta_tu_pack(dt, &padding, 1);
		if (!b.pcmps)
			SFAIL("out of memory");
		req.padding = ta_tu_view(dt, 0, zero_shape, b.pcmps);
	}
	req.want_old = want_old && sc->op != TA_OP_LOAD;
	req.space = shared ? TA_SPACE_SHARED : TA_SPACE_GLOBAL;
	if (sc->variant == 1)
		req.sem = sc->op == TA_OP_LOAD    ? TA_SEM_ACQUIRE
		          : sc->op == TA_OP_STORE ? TA_SEM_RELEASE
		                                  : TA_SEM_ACQ_REL;
	else if (sc->variant == 2)
		req.sem = sc->op == TA_OP_LOAD ? TA_SEM_RELAXED : TA_SEM_RELEASE;

	/* the reference */
	uint64_t ref_applied = 0, ref_skipped = 0;
	b.expect_old = calloc((size_t)count + 1, sizeof(uint64_t));
	if (!b.expect_old)
		SFAIL("out of memory");
	for (int64_t k = 0; k < count; k++) {
		uint64_t v = b.vals[scalar_values ? 0 : k];
		uint64_t c = b.cmps[scalar_values ? 0 : k];
		uint64_t idle = sc->op == TA_OP_CAS ? c : sc->op == TA_OP_LOAD ? padding : 0;
		if (b.mask && !b.mask[k]) {
			b.expect_old[k] = idle;
			continue;
		}
		if (b.dest[k] < 0) {
			ref_skipped++;
			b.expect_old[k] = idle;
			continue;
		}
		ref_applied++;
		uint64_t old;
		b.expect[b.dest[k]] = ta_tu_ref_apply(sc->op, dt, b.expect[b.dest[k]], v, c, &old);
		b.expect_old[k] = old;
	}

	/* run it */
	b.pinit = ta_tu_pack(dt, b.init, (size_t)n);
	b.readback = malloc((size_t)n * es);
	b.old_out = malloc((size_t)(count ? count : 1) * es);
	if (!b.pinit || !b.readback || !b.old_out)
		SFAIL("out of memory");
	ta_status st = ta_backend_tile_alloc(be, (size_t)n * es, &mem, &err);
	if (st != TA_OK)
		SFAIL("tile_alloc: %s", err.msg);
	if ((st = ta_tu_tile_write(be, mem, (size_t)n * es, &t, b.pinit, &err)) != TA_OK)
		SFAIL("writing the tile: %s", err.msg);
	ta_plan plan;
	if ((st = ta_plan_build(&plan, &t, &req, &err)) != TA_OK)
		SFAIL("plan build: %s: %s", ta_status_name(st), err.msg);
	if (plan.want_old)
		plan.old_out = b.old_out;
	ta_result res;
	if ((st = ta_backend_apply(be, mem, (size_t)n * es, &plan, &res, &err)) != TA_OK)
		SFAIL("apply: %s: %s", ta_status_name(st), err.msg);
	if (res.applied != ref_applied || res.skipped != ref_skipped)
		SFAIL("applied %" PRIu64 " skipped %" PRIu64 ", reference %" PRIu64 " and %" PRIu64,
		      res.applied, res.skipped, ref_applied, ref_skipped);
	if ((st = ta_tu_tile_read(be, mem, (size_t)n * es, &t, b.readback, &err)) != TA_OK)
		SFAIL("reading the tile: %s", err.msg);
	if (!same_bits(dt, "tile", b.readback, b.expect, (size_t)n, why, whylen))
		goto out;
	if (plan.want_old &&
	    !same_bits(dt, "old", b.old_out, b.expect_old, (size_t)count, why, whylen))
		goto out;
	ok = true;
#undef SFAIL
out:
	if (mem)
		ta_backend_tile_free(be, mem);
	sweep_bufs_free(&b);
	return ok;
}

/* Tile shapes of the sweep: 1-D, 2-D and 3-D. */
static const struct {
	int rank;                   /* tile rank */
	int64_t shape[TA_MAX_RANK]; /* tile shape */
} sweep_shapes[] = {{1, {37}}, {2, {5, 7}}, {3, {3, 4, 5}}};

int ta_vectors_sweep(ta_backend *be, ta_op only, uint64_t seed, FILE *log)
{
	int failed = 0;
	uint64_t rng = seed;
	char why[640];
	for (int op = TA_OP_ADD; op < TA_OP_COUNT; op++) {
		if (only != TA_OP_NONE && op != (int)only)
			continue;
		for (int dt = 1; dt < TA_DTYPE_COUNT; dt++) {
			if (!ta_dtype_is_tile((ta_dtype)dt) ||
			    !ta_op_accepts_dtype((ta_op)op, (ta_dtype)dt))
				continue;
			for (size_t si = 0; si < sizeof(sweep_shapes) / sizeof(sweep_shapes[0]);
			     si++) {
				for (int sub = 0; sub < 2; sub++) {
					for (int form = 0; form < F_COUNT; form++) {
						if (form == F_SCATTER &&
						    !ta_op_in_family((ta_op)op,
						                     TA_FAMILY_SCATTER) &&
						    op != TA_OP_LOAD)
							continue;
						for (int variant = 0; variant < 3; variant++) {
							sweep_case sc = {.op = (ta_op)op,
							                 .dt = (ta_dtype)dt,
							                 .rank =
							                     sweep_shapes[si].rank,
							                 .sub = sub,
							                 .form = form,
							                 .variant = variant};
							memcpy(sc.shape, sweep_shapes[si].shape,
							       sizeof(sc.shape));
							if (sweep_run(be, &sc, &rng, why,
							              sizeof(why)))
								continue;
							failed++;
							if (log)
								fprintf(
								    log,
								    "sweep %s %s rank %d %s "
								    "%s variant %d: %s\n",
								    ta_op_name(sc.op),
								    ta_dtype_name(sc.dt), sc.rank,
								    sub ? "sub-region"
								        : "whole tile",
								    form_names[form], variant, why);
						}
					}
				}
			}
		}
	}
	return failed;
}

/* ---- large global vs shared -------------------------------------------------------- */

/* One large comparison case. */
typedef struct large_case {
	ta_op op;    /* operation */
	ta_dtype dt; /* tile dtype */
} large_case;

/* Runs one large case in space sp; compares with the reference. */
static bool large_run(ta_backend *be, const large_case *lc, ta_space sp, uint64_t seed, char *why,
                      size_t whylen)
{
	enum { BINS = 61, COUNT = 1 << 18 };
	const ta_dtype dt = lc->dt;
	const size_t es = ta_dtype_size(dt);
	uint64_t rng = seed;
	bool ok = false;
	void *mem = NULL;
	ta_error err = {TA_OK, ""};
	value_mode mode =
	    ta_dtype_is_float(dt)
	        ? (lc->op == TA_OP_ADD || lc->op == TA_OP_SUB ? VM_SMALLINT : VM_NONAN)
	        : VM_ANY;
	uint64_t *init = malloc(BINS * sizeof(uint64_t));
	uint64_t *expect = malloc(BINS * sizeof(uint64_t));
	uint64_t *vals = malloc(COUNT * sizeof(uint64_t));
	int32_t *idx = malloc(COUNT * sizeof(int32_t));
	void *pinit = NULL, *pvals = NULL, *readback = malloc(BINS * es);
	if (!init || !expect || !vals || !idx || !readback) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	for (int i = 0; i < BINS; i++)
		init[i] = expect[i] = random_value(dt, mode, &rng);
	uint64_t skipped = 0;
	for (int k = 0; k < COUNT; k++) {
		idx[k] = (int32_t)ta_tu_rand_below(&rng, BINS);
		if (k % 4099 == 7)
			idx[k] = k % 2 ? BINS : -3; /* out of range */
		vals[k] = random_value(dt, mode, &rng);
		if (idx[k] < 0 || idx[k] >= BINS) {
			skipped++;
			continue;
		}
		uint64_t old;
		expect[idx[k]] = ta_tu_ref_apply(lc->op, dt, expect[idx[k]], vals[k], 0, &old);
	}
	pinit = ta_tu_pack(dt, init, BINS);
	pvals = ta_tu_pack(dt, vals, COUNT);
	if (!pinit || !pvals) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	ta_tile_shape t = {.dtype = dt, .rank = 1, .shape = {BINS}};
	ta_status st = ta_backend_tile_alloc(be, BINS * es, &mem, &err);
	if (st == TA_OK)
		st = ta_tu_tile_write(be, mem, BINS * es, &t, pinit, &err);
	if (st != TA_OK) {
		snprintf(why, whylen, "tile setup: %s", err.msg);
		goto out;
	}
	ta_request req;
	ta_request_init(&req);
	req.op = lc->op;
	bool scatter = ta_op_in_family(lc->op, TA_FAMILY_SCATTER);
	req.family = scatter ? TA_FAMILY_SCATTER : TA_FAMILY_INDEXED;
	req.addr = scatter ? TA_ADDR_SCATTER : TA_ADDR_INDEXED;
	req.n_index = 1;
	int64_t shape[1] = {COUNT};
	req.index[0] = ta_tu_view(TA_DTYPE_I32, 1, shape, idx);
	req.values = ta_tu_view(dt, 1, shape, pvals);
	req.space = sp;
	ta_plan plan;
	ta_result res;
	if ((st = ta_plan_build(&plan, &t, &req, &err)) != TA_OK ||
	    (st = ta_backend_apply(be, mem, BINS * es, &plan, &res, &err)) != TA_OK) {
		snprintf(why, whylen, "%s: %s", ta_status_name(st), err.msg);
		goto out;
	}
	if (res.skipped != skipped || res.applied != COUNT - skipped) {
		snprintf(why, whylen,
		         "applied %" PRIu64 " skipped %" PRIu64 ", expected %" PRIu64
		         " and %" PRIu64,
		         res.applied, res.skipped, (uint64_t)COUNT - skipped, skipped);
		goto out;
	}
	if ((st = ta_tu_tile_read(be, mem, BINS * es, &t, readback, &err)) != TA_OK) {
		snprintf(why, whylen, "reading the tile: %s", err.msg);
		goto out;
	}
	ok = same_bits(dt, "tile", readback, expect, BINS, why, whylen);
out:
	if (mem)
		ta_backend_tile_free(be, mem);
	free(init);
	free(expect);
	free(vals);
	free(idx);
	free(pinit);
	free(pvals);
	free(readback);
	return ok;
}

int ta_vectors_shared_large(ta_backend *be, FILE *log)
{
	static const large_case cases[] = {
	    {TA_OP_ADD, TA_DTYPE_I32}, {TA_OP_SUB, TA_DTYPE_U64}, {TA_OP_MIN, TA_DTYPE_I32},
	    {TA_OP_MAX, TA_DTYPE_I64}, {TA_OP_MIN, TA_DTYPE_U32}, {TA_OP_AND, TA_DTYPE_U32},
	    {TA_OP_OR, TA_DTYPE_I64},  {TA_OP_XOR, TA_DTYPE_U64}, {TA_OP_MAX, TA_DTYPE_F32},
	    {TA_OP_MIN, TA_DTYPE_F64}, {TA_OP_MAX, TA_DTYPE_F16}, {TA_OP_MIN, TA_DTYPE_BF16},
	    {TA_OP_ADD, TA_DTYPE_F32}, {TA_OP_SUB, TA_DTYPE_F64},
	};
	int failed = 0;
	char why[512];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int sp = 0; sp < TA_SPACE_COUNT; sp++) {
			if (large_run(be, &cases[i], (ta_space)sp, 1000 + i, why, sizeof(why)))
				continue;
			failed++;
			if (log)
				fprintf(log, "large %s %s space %s: %s\n", ta_op_name(cases[i].op),
				        ta_dtype_name(cases[i].dt), ta_space_name((ta_space)sp),
				        why);
		}
	}
	return failed;
}
