/* ta_types.c: the table ta_ops.def as lookup arrays, and every question code asks of it
 * (names, sizes, legality, families, outputs, operands, PTX names, lists of what is
 * allowed for messages, request kinds); errors; float16/bfloat16 conversion with a single
 * round-to-nearest-even. Pure C with no dependencies. */
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

enum { DT_ANY, DT_INT, DT_NONE };
enum { PTX_BITS, PTX_ADD, PTX_MINMAX, PTX_EXCH, PTX_TYPES };

/* One row of the dtype table. */
typedef struct dtype_row {
	const char *name;           /* wire / CLI name */
	int is_signed;              /* 1 for signed integers and floats */
	const char *ptx[PTX_TYPES]; /* PTX type per instruction class, "" when emulated */
} dtype_row;

static const dtype_row dtype_rows[TA_DTYPE_COUNT] = {
    [TA_DTYPE_NONE] = {"none", 0, {"", "", "", ""}},
#define TA_DTYPE(id, wire, nm, sz, kind, sgn, bits, add, minmax, exch)                             \
	[TA_DTYPE_##id] = {nm, sgn, {bits, add, minmax, exch}},
#include "ta_ops.def"
#undef TA_DTYPE
};

/* One row of the op table. */
typedef struct op_row {
	const char *name;     /* wire / CLI name */
	ta_op_kind kind;      /* RMW, LOAD or STORE */
	int dtypes;           /* DT_ANY or DT_INT */
	unsigned families;    /* bit set of the families that take it */
	int shared;           /* space=shared defined */
	int red;              /* PTX has red.* */
	unsigned sems;        /* bit set of legal sems */
	ta_output output;     /* whether it returns what it saw */
	ta_operands operands; /* which operands it takes */
	int exact;            /* DT_ANY, DT_INT or DT_NONE: dtypes where order does not matter */
	const char *ptx;      /* PTX mnemonic */
	int ptx_type;         /* PTX_* column of the dtype table giving its type */
} op_row;

static const op_row op_rows[TA_OP_COUNT] = {
    [TA_OP_NONE] = {"none", 0, DT_NONE, 0, 0, 0, 0, 0, 0, DT_NONE, "", PTX_BITS},
#define TA_OP(id, nm, kind, dt, fams, sh, rd, sm, out, opnds, exact, ptx, ptxty)                   \
	[TA_OP_##id] = {nm,                                                                        \
	                TA_KIND_##kind,                                                            \
	                DT_##dt,                                                                   \
	                fams,                                                                      \
	                sh,                                                                        \
	                rd,                                                                        \
	                sm,                                                                        \
	                TA_OUTPUT_##out,                                                           \
	                TA_OPERANDS_##opnds,                                                       \
	                DT_##exact,                                                                \
	                ptx,                                                                       \
	                PTX_##ptxty},
#include "ta_ops.def"
#undef TA_OP
};

/* One row of the sem table. */
typedef struct sem_row {
	const char *name; /* wire / CLI name */
	bool acquires;    /* has an acquire part */
	bool releases;    /* has a release part */
	const char *ptx;  /* PTX .sem qualifier */
} sem_row;

static const sem_row sem_rows[TA_SEM_COUNT] = {
#define TA_SEM(id, nm, acq, rel, ptx) [TA_SEM_##id] = {nm, acq, rel, ptx},
#include "ta_ops.def"
#undef TA_SEM
};

/* Names and PTX qualifiers of the scopes. */
static const char *const scope_names[TA_SCOPE_COUNT] = {
#define TA_SCOPE(id, nm, ptx) [TA_SCOPE_##id] = nm,
#include "ta_ops.def"
#undef TA_SCOPE
};
static const char *const scope_ptx[TA_SCOPE_COUNT] = {
#define TA_SCOPE(id, nm, ptx) [TA_SCOPE_##id] = ptx,
#include "ta_ops.def"
#undef TA_SCOPE
};

static const char *const space_names[TA_SPACE_COUNT] = {
#define TA_SPACE(id, nm) [TA_SPACE_##id] = nm,
#include "ta_ops.def"
#undef TA_SPACE
};

static const char *const addr_names[TA_ADDR_COUNT] = {
#define TA_ADDR(id, nm) [TA_ADDR_##id] = nm,
#include "ta_ops.def"
#undef TA_ADDR
};

/* One row of the family table. */
typedef struct family_row {
	const char *noun; /* "an element-wise atomic" */
	unsigned addrs;   /* bit set of addressing forms */
} family_row;

static const family_row family_rows[TA_FAMILY_COUNT] = {
#define TA_FAMILY(id, noun, addrs) [TA_FAMILY_##id] = {noun, addrs},
#include "ta_ops.def"
#undef TA_FAMILY
};

static const char *const status_names[TA_STATUS_COUNT] = {
#define TA_STATUS(id, pub) [TA_##id] = #id,
#include "ta_ops.def"
#undef TA_STATUS
};

/* One row of the request-kind table. */
typedef struct req_row {
	const char *name;    /* Request field name; NULL for numbers that are no kind */
	bool tile;           /* names a tile */
	ta_family family;    /* request family, or TA_FAMILY_NONE */
	ta_op op;            /* memory requests: LOAD / STORE */
	bool reply_optional; /* success may come back without its body */
	bool mutates;        /* success may change tiles */
} req_row;

static const req_row req_rows[TA_REQ_END] = {
#define TA_REQUEST(id, field, number, tile, fam, op, reply, optional, mutates)                     \
	[TA_REQ_##id] = {#field, tile, TA_FAMILY_##fam, TA_OP_##op, optional, mutates},
#include "ta_ops.def"
#undef TA_REQUEST
};

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

/* True when a dtypes / exact column value (DT_*) covers tile dtype d. */
static bool dt_covers(int column, ta_dtype d)
{
	return column == DT_ANY || (column == DT_INT && ta_dtype_is_int(d));
}

bool ta_op_accepts_dtype(ta_op op, ta_dtype d)
{
	return op_valid(op) && ta_dtype_is_tile(d) && dt_covers(op_rows[op].dtypes, d);
}

bool ta_op_shared_ok(ta_op op)
{
	return op_valid(op) && op_rows[op].shared;
}

bool ta_op_has_red(ta_op op)
{
	return op_valid(op) && op_rows[op].red;
}

bool ta_op_bulk_ok(ta_op op, ta_dtype d)
{
	bool row = false;
#define TA_BULK(id) row = row || op == TA_OP_##id;
#include "ta_ops.def"
#undef TA_BULK
	return row && ta_op_accepts_dtype(op, d) && !ta_dtype_is_float(d) &&
	       (ta_dtype_size(d) == 4 || ta_dtype_size(d) == 8);
}

bool ta_op_order_independent(ta_op op, ta_dtype d)
{
	return ta_op_accepts_dtype(op, d) && dt_covers(op_rows[op].exact, d);
}

const char *ta_op_ptx(ta_op op)
{
	return op_valid(op) ? op_rows[op].ptx : "";
}

const char *ta_op_ptx_type(ta_op op, ta_dtype d)
{
	if (!ta_op_accepts_dtype(op, d))
		return "";
	return dtype_rows[d].ptx[op_rows[op].ptx_type];
}

/* The one statement of the variant rules: ta_check_variant with the family, and
 * ta_variant_legal (any_family: the op's families are not asked) without. */
static ta_status check_variant(ta_family family, bool any_family, ta_op op, ta_sem sem,
                               ta_scope scope, ta_space space, bool want_old, ta_error *err)
{
	char allowed[128];
	if (!op_valid(op))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown or missing op (%d)",
		                    (int)op);
	if (!any_family && (unsigned)family >= TA_FAMILY_COUNT)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown request family %d",
		                    (int)family);
	if (!any_family && !ta_op_in_family(op, family))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "op %s is not %s (those are %s)",
		                    op_rows[op].name, ta_family_noun(family),
		                    ta_family_ops_text(family, allowed, sizeof(allowed)));
	if ((unsigned)sem >= TA_SEM_COUNT)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown sem %d", (int)sem);
	if (!ta_op_sem_ok(op, sem))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "sem %s is not valid for %s (use %s)",
		                    ta_sem_name(sem), op_rows[op].name,
		                    ta_op_sems_text(op, allowed, sizeof(allowed)));
	if ((unsigned)scope >= TA_SCOPE_COUNT)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown scope %d", (int)scope);
	if ((unsigned)space >= TA_SPACE_COUNT)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown space %d", (int)space);
	if (space == TA_SPACE_SHARED) {
		if (!ta_op_shared_ok(op))
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "space shared is not defined for %s (only %s accumulate "
			    "privately)",
			    op_rows[op].name, ta_shared_ops_text(allowed, sizeof(allowed)));
		if (want_old)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "space shared cannot return pre-RMW values (the private "
			    "copy hides them); use space global");
	}
	if (want_old && ta_op_output(op) == TA_OUTPUT_NEVER)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s returns no old values (use exch for that)",
		                    op_rows[op].name);
	return TA_OK;
}

ta_status ta_check_variant(ta_family family, ta_op op, ta_sem sem, ta_scope scope, ta_space space,
                           bool want_old, ta_error *err)
{
	return check_variant(family, false, op, sem, scope, space, want_old, err);
}

bool ta_variant_legal(ta_op op, ta_dtype dtype, ta_sem sem, ta_scope scope, ta_space space,
                      bool want_old)
{
	/* the request's rules, and a load's plan always carries its output (the planner sets
	 * want_old for it) */
	return ta_op_accepts_dtype(op, dtype) &&
	       check_variant(TA_FAMILY_NONE, true, op, sem, scope, space, want_old, NULL) ==
	           TA_OK &&
	       (ta_op_output(op) != TA_OUTPUT_ALWAYS || want_old);
}

/* A table set to write as text: the rows first .. first + count - 1 of a table, those
 * for which ok(row, arg) holds, named by name(row). */
typedef struct name_set {
	int first, count;             /* rows considered */
	bool (*ok)(int row, int arg); /* membership */
	int arg;                      /* second argument of ok */
	const char *(*name)(int row); /* a row's name */
} name_set;

/* Writes the names of a set as "a", "a or b", "a, b or c" into buf; returns buf. */
static const char *set_text(const name_set *set, char *buf, size_t n)
{
	int total = 0, i = 0;
	size_t used = 0;
	buf[0] = '\0';
	for (int r = set->first; r < set->first + set->count; r++)
		total += set->ok(r, set->arg);
	for (int r = set->first; r < set->first + set->count; r++) {
		if (!set->ok(r, set->arg))
			continue;
		const char *sep = i == 0 ? "" : i == total - 1 ? " or " : ", ";
		if (used < n)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", sep, set->name(r));
		i++;
	}
	return buf;
}

/* Row names and membership tests of set_text. */
static const char *op_row_name(int op)
{
	return op_rows[op].name;
}
static const char *sem_row_name(int sem)
{
	return sem_rows[sem].name;
}
static const char *addr_row_name(int addr)
{
	return addr_names[addr];
}
static bool op_in_family_row(int op, int family)
{
	return ta_op_in_family((ta_op)op, (ta_family)family);
}
static bool op_shared_row(int op, int unused)
{
	(void)unused;
	return ta_op_shared_ok((ta_op)op);
}
static bool op_of_kind_row(int op, int kind)
{
	return ta_op_kind_of((ta_op)op) == (ta_op_kind)kind;
}
static bool sem_of_op_row(int sem, int op)
{
	return ta_op_sem_ok((ta_op)op, (ta_sem)sem);
}
static bool addr_of_family_row(int addr, int family)
{
	return ta_family_addr_ok((ta_family)family, (ta_addr)addr);
}

/* The ops set_text lists, for a membership test and its argument. */
static const char *ops_text(bool (*ok)(int, int), int arg, char *buf, size_t n)
{
	name_set set = {TA_OP_NONE + 1, TA_OP_COUNT - 1, ok, arg, op_row_name};
	return set_text(&set, buf, n);
}

const char *ta_kind_ops_text(ta_op_kind kind, char *buf, size_t n)
{
	return ops_text(op_of_kind_row, (int)kind, buf, n);
}

const char *ta_family_ops_text(ta_family family, char *buf, size_t n)
{
	return ops_text(op_in_family_row, (int)family, buf, n);
}

const char *ta_shared_ops_text(char *buf, size_t n)
{
	return ops_text(op_shared_row, 0, buf, n);
}

const char *ta_op_sems_text(ta_op op, char *buf, size_t n)
{
	name_set set = {0, TA_SEM_COUNT, sem_of_op_row, (int)op, sem_row_name};
	return set_text(&set, buf, n);
}

const char *ta_family_addrs_text(ta_family family, char *buf, size_t n)
{
	name_set set = {0, TA_ADDR_COUNT, addr_of_family_row, (int)family, addr_row_name};
	return set_text(&set, buf, n);
}

const char *ta_family_noun(ta_family family)
{
	return (unsigned)family < TA_FAMILY_COUNT ? family_rows[family].noun : "?";
}

const char *ta_addr_name(ta_addr addr)
{
	return (unsigned)addr < TA_ADDR_COUNT ? addr_names[addr] : "?";
}

const char *ta_req_name(ta_req_kind kind)
{
	return ta_req_valid(kind) ? req_rows[kind].name : "empty";
}

bool ta_req_reply_optional(ta_req_kind kind)
{
	return ta_req_valid(kind) && req_rows[kind].reply_optional;
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
	return (unsigned)sem < TA_SEM_COUNT ? sem_rows[sem].name : "?";
}

int ta_sem_parse(const char *name)
{
	for (int s = 0; s < TA_SEM_COUNT; s++)
		if (strcasecmp(name, sem_rows[s].name) == 0)
			return s;
	return -1;
}

const char *ta_sem_ptx(ta_sem sem)
{
	return (unsigned)sem < TA_SEM_COUNT ? sem_rows[sem].ptx : "";
}

bool ta_sem_acquires(ta_sem sem)
{
	return (unsigned)sem < TA_SEM_COUNT && sem_rows[sem].acquires;
}

bool ta_sem_releases(ta_sem sem)
{
	return (unsigned)sem < TA_SEM_COUNT && sem_rows[sem].releases;
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

const char *ta_scope_ptx(ta_scope scope)
{
	return (unsigned)scope < TA_SCOPE_COUNT ? scope_ptx[scope] : "";
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
