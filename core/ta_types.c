/* ta_types.c: names, sizes and legality lookups generated from ta_ops.def; errors;
 * float16/bfloat16 conversion with a single round-to-nearest-even; element parsing and
 * formatting. Pure C with no dependencies, so the client library compiles it too. */
#include "ta_types.h"

#include <errno.h>
#include <fenv.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { KIND_INT, KIND_FLOAT, KIND_MASK };
enum { DT_ANY, DT_INT };

/* One row of the dtype table. */
typedef struct dtype_row {
	const char *name; /* wire / CLI name */
	size_t size;      /* bytes per element */
	int kind;         /* KIND_INT, KIND_FLOAT or KIND_MASK */
	int is_signed;    /* 1 for signed integers and floats */
} dtype_row;

static const dtype_row dtype_rows[TA_DTYPE_COUNT] = {
    [TA_DTYPE_NONE] = {"none", 0, KIND_MASK, 0},
#define TA_DTYPE(id, nm, sz, kind, sgn, bits, arith) [TA_DTYPE_##id] = {nm, sz, KIND_##kind, sgn},
#include "ta_ops.def"
#undef TA_DTYPE
};

/* One row of the op table. */
typedef struct op_row {
	const char *name; /* wire / CLI name */
	int dtypes;       /* DT_ANY or DT_INT */
	int scatter;      /* scatter family accepts it */
	int shared;       /* space=shared defined */
	int red;          /* PTX has red.* */
	unsigned sems;    /* bit set of legal sems */
} op_row;

static const op_row op_rows[TA_OP_COUNT] = {
    [TA_OP_NONE] = {"none", DT_ANY, 0, 0, 0, 0},
#define TA_OP(id, nm, dt, sc, sh, rd, sm) [TA_OP_##id] = {nm, DT_##dt, sc, sh, rd, sm},
#include "ta_ops.def"
#undef TA_OP
};

static const char *const sem_names[TA_SEM_COUNT] = {
#define TA_SEM(id, nm, c11) [TA_SEM_##id] = nm,
#include "ta_ops.def"
#undef TA_SEM
};

static const char *const scope_names[TA_SCOPE_COUNT] = {
#define TA_SCOPE(id, nm, ptx) [TA_SCOPE_##id] = nm,
#include "ta_ops.def"
#undef TA_SCOPE
};

static const char *const space_names[TA_SPACE_COUNT] = {"global", "shared"};

static const char *const status_names[TA_STATUS_COUNT] = {"OK",
                                                          "INVALID_ARGUMENT",
                                                          "NOT_FOUND",
                                                          "ALREADY_EXISTS",
                                                          "OUT_OF_RANGE",
                                                          "RESOURCE_EXHAUSTED",
                                                          "UNIMPLEMENTED",
                                                          "UNAVAILABLE",
                                                          "PERMISSION_DENIED",
                                                          "INTERNAL"};

ta_status ta_error_set(ta_error *err, ta_status code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

const char *ta_status_name(ta_status code)
{
	if ((unsigned)code >= TA_STATUS_COUNT)
		return "UNKNOWN";
	return status_names[code];
}

static bool dtype_valid(ta_dtype d)
{
	return d > TA_DTYPE_NONE && d < TA_DTYPE_COUNT;
}

size_t ta_dtype_size(ta_dtype d)
{
	return dtype_valid(d) ? dtype_rows[d].size : 0;
}

const char *ta_dtype_name(ta_dtype d)
{
	return dtype_valid(d) ? dtype_rows[d].name : "?";
}

ta_dtype ta_dtype_parse(const char *name)
{
	for (int d = 1; d < TA_DTYPE_COUNT; d++)
		if (strcmp(name, dtype_rows[d].name) == 0)
			return (ta_dtype)d;
	/* Common short spellings. */
	static const struct {
		const char *alias;
		ta_dtype dtype;
	} aliases[] = {{"i32", TA_DTYPE_I32},   {"u32", TA_DTYPE_U32},   {"i64", TA_DTYPE_I64},
	               {"u64", TA_DTYPE_U64},   {"f32", TA_DTYPE_F32},   {"f64", TA_DTYPE_F64},
	               {"f16", TA_DTYPE_F16},   {"half", TA_DTYPE_F16},  {"bf16", TA_DTYPE_BF16},
	               {"float", TA_DTYPE_F32}, {"double", TA_DTYPE_F64}};
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(name, aliases[i].alias) == 0)
			return aliases[i].dtype;
	return TA_DTYPE_NONE;
}

bool ta_dtype_is_int(ta_dtype d)
{
	return dtype_valid(d) && dtype_rows[d].kind == KIND_INT;
}

bool ta_dtype_is_float(ta_dtype d)
{
	return dtype_valid(d) && dtype_rows[d].kind == KIND_FLOAT;
}

bool ta_dtype_is_tile(ta_dtype d)
{
	return ta_dtype_is_int(d) || ta_dtype_is_float(d);
}

bool ta_dtype_is_signed_int(ta_dtype d)
{
	return ta_dtype_is_int(d) && dtype_rows[d].is_signed;
}

static bool op_valid(ta_op op)
{
	return op > TA_OP_NONE && op < TA_OP_COUNT;
}

const char *ta_op_name(ta_op op)
{
	return op_valid(op) ? op_rows[op].name : "?";
}

ta_op ta_op_parse(const char *name)
{
	if (strcmp(name, "xchg") == 0)
		return TA_OP_EXCH;
	for (int op = 1; op < TA_OP_COUNT; op++)
		if (strcmp(name, op_rows[op].name) == 0)
			return (ta_op)op;
	return TA_OP_NONE;
}

bool ta_op_is_rmw(ta_op op)
{
	return op >= TA_OP_ADD && op <= TA_OP_XOR;
}

bool ta_op_accepts_dtype(ta_op op, ta_dtype d)
{
	if (!op_valid(op) || !ta_dtype_is_tile(d))
		return false;
	return op_rows[op].dtypes == DT_ANY || ta_dtype_is_int(d);
}

bool ta_op_scatter_ok(ta_op op)
{
	return op_valid(op) && op_rows[op].scatter;
}

bool ta_op_shared_ok(ta_op op)
{
	return op_valid(op) && op_rows[op].shared;
}

bool ta_op_has_red(ta_op op)
{
	return op_valid(op) && op_rows[op].red;
}

bool ta_op_sem_ok(ta_op op, ta_sem sem)
{
	return op_valid(op) && (unsigned)sem < TA_SEM_COUNT && (op_rows[op].sems >> sem) & 1u;
}

bool ta_variant_legal(ta_op op, ta_dtype dtype, ta_sem sem, ta_scope scope, ta_space space,
                      bool want_old)
{
	if (!ta_op_accepts_dtype(op, dtype) || !ta_op_sem_ok(op, sem) ||
	    (unsigned)scope >= TA_SCOPE_COUNT || (unsigned)space >= TA_SPACE_COUNT)
		return false;
	if (space == TA_SPACE_SHARED && (!ta_op_shared_ok(op) || want_old))
		return false;
	if (op == TA_OP_LOAD)
		return want_old;
	if (op == TA_OP_STORE) /* a store returns nothing (exch does) */
		return !want_old;
	return true;
}

/* Looks name up in a table of n names; -1 when absent. */
static int parse_name(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcasecmp(name, names[i]) == 0)
			return i;
	return -1;
}

const char *ta_sem_name(ta_sem sem)
{
	return (unsigned)sem < TA_SEM_COUNT ? sem_names[sem] : "?";
}

int ta_sem_parse(const char *name)
{
	return parse_name(sem_names, TA_SEM_COUNT, name);
}

const char *ta_scope_name(ta_scope scope)
{
	return (unsigned)scope < TA_SCOPE_COUNT ? scope_names[scope] : "?";
}

int ta_scope_parse(const char *name)
{
	int s = parse_name(scope_names, TA_SCOPE_COUNT, name);
	if (s < 0 && strcasecmp(name, "device") == 0)
		s = TA_SCOPE_GPU;
	if (s < 0 && strcasecmp(name, "block") == 0)
		s = TA_SCOPE_CTA;
	if (s < 0 && strcasecmp(name, "system") == 0)
		s = TA_SCOPE_SYS;
	return s;
}

const char *ta_space_name(ta_space space)
{
	return (unsigned)space < TA_SPACE_COUNT ? space_names[space] : "?";
}

int ta_space_parse(const char *name)
{
	return parse_name(space_names, TA_SPACE_COUNT, name);
}

/* ---- float16 / bfloat16 --------------------------------------------------------------*/

/* Rounds v once, to nearest even, into a binary format with mbits stored mantissa bits and
 * ebits exponent bits, returning its bit pattern. NaN becomes the canonical positive quiet
 * NaN with every mantissa bit set (what the GPU's half-precision units produce). */
static uint32_t round_to_small_float(double v, int mbits, int ebits)
{
	const uint32_t exp_mask = ((1u << ebits) - 1u) << mbits;
	const int bias = (1 << (ebits - 1)) - 1;
	const int emin = 1 - bias;
	if (isnan(v))
		return exp_mask | ((1u << mbits) - 1u);
	uint32_t sign = signbit(v) ? 1u << (mbits + ebits) : 0u;
	double a = fabs(v);
	if (isinf(a))
		return sign | exp_mask;
	if (a == 0.0)
		return sign;
	int e2;
	(void)frexp(a, &e2);
	int exp = e2 - 1; /* exponent of the leading bit */
	if (exp < emin)
		exp = emin; /* subnormal range: fixed quantum */
	/* Exact scaling by a power of two, then one rounding to an integer significand. */
	double scaled = ldexp(a, mbits - exp);
	int saved = fegetround();
	if (saved != FE_TONEAREST)
		fesetround(FE_TONEAREST);
	double rounded = nearbyint(scaled);
	if (saved != FE_TONEAREST)
		fesetround(saved);
	uint64_t m = (uint64_t)rounded;
	if (m >= (2ull << mbits)) { /* rounding carried into the next binade */
		m >>= 1;
		exp++;
	}
	if (exp > bias)
		return sign | exp_mask; /* overflow: infinity */
	if (m < (1ull << mbits))
		return sign | (uint32_t)m; /* subnormal (or the smallest normal reached below) */
	return sign | ((uint32_t)(exp + bias) << mbits) | (uint32_t)(m - (1ull << mbits));
}

/* Widens a small float (mbits mantissa, ebits exponent) exactly to double. */
static double widen_small_float(uint32_t bits, int mbits, int ebits)
{
	const int bias = (1 << (ebits - 1)) - 1;
	uint32_t e = (bits >> mbits) & ((1u << ebits) - 1u);
	uint32_t m = bits & ((1u << mbits) - 1u);
	int neg = (bits >> (mbits + ebits)) & 1u;
	double v;
	if (e == (1u << ebits) - 1u)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp((double)m, 1 - bias - mbits);
	else
		v = ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
	return neg ? -v : v;
}

float ta_f16_to_f32(uint16_t bits)
{
	return (float)widen_small_float(bits, 10, 5);
}

uint16_t ta_f64_to_f16(double value)
{
	return (uint16_t)round_to_small_float(value, 10, 5);
}

uint16_t ta_f32_to_f16(float value)
{
	return ta_f64_to_f16((double)value);
}

float ta_bf16_to_f32(uint16_t bits)
{
	uint32_t w = (uint32_t)bits << 16;
	float f;
	memcpy(&f, &w, sizeof(f));
	return f;
}

uint16_t ta_f64_to_bf16(double value)
{
	return (uint16_t)round_to_small_float(value, 7, 8);
}

uint16_t ta_f32_to_bf16(float value)
{
	return ta_f64_to_bf16((double)value);
}

bool ta_name_valid(const char *name)
{
	size_t len = strlen(name);
	if (len < 1 || len > TA_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}
