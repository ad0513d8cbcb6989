/* ta_types.h: the core vocabulary of tileatom: dtypes, ops, sems, scopes, spaces,
 * addressing forms, request families, statuses and request kinds, generated from the
 * table ta_ops.def, with the questions code asks of the table (legality, families,
 * outputs, operands, PTX names, messages that list what is allowed); errors; float16 and
 * bfloat16 conversion. The numeric values equal the wire enums of proto/tileatom.proto and
 * the public header client/tileatom.h (proto/ta_wire_enums.h and client/tac_util.c assert
 * it at compile time). Plain C, no dependencies: included by the daemon, the client
 * library, the backends, the CUDA kernels (as C++) and the tests. */
#ifndef TA_TYPES_H
#define TA_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The table every X-macro expansion of this header includes: tacore/ta_ops.def, or the
 * mutant copy a test build names (tests/table.mk), so that the inline questions below follow
 * the same table as ta_types.c. */
#ifndef TA_OPS_DEF
#define TA_OPS_DEF "ta_ops.def"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Highest tile rank (and highest rank of any operand or broadcast shape). */
#define TA_MAX_RANK 4
/* Longest tile name, in bytes, excluding the terminating NUL. */
#define TA_NAME_MAX 64
/* Protocol version spoken by this build (see proto/tileatom.proto). */
#define TA_PROTOCOL_VERSION 1

/* Element types, from the TA_DTYPE rows. TA_DTYPE_NONE (0) is "unspecified"; BOOL is
 * for masks only. */
typedef enum ta_dtype {
	TA_DTYPE_NONE = 0,
#define TA_DTYPE(id, wire, name, size, kind, sgn, bits, add, minmax, exch) TA_DTYPE_##id,
#include TA_OPS_DEF
#undef TA_DTYPE
	TA_DTYPE_COUNT
} ta_dtype;

/* Operations, from the TA_OP rows: the RMW ops first (wire values 1..9), then LOAD and
 * STORE, the memory ops (gather / atomic load, scatter store / atomic store). */
typedef enum ta_op {
	TA_OP_NONE = 0,
#define TA_OP(id, ...) TA_OP_##id,
#include TA_OPS_DEF
#undef TA_OP
	TA_OP_COUNT
} ta_op;

/* Memory-ordering semantics of an op, from the TA_SEM rows. */
typedef enum ta_sem {
#define TA_SEM(id, ...) TA_SEM_##id,
#include TA_OPS_DEF
#undef TA_SEM
	TA_SEM_COUNT
} ta_sem;

/* Scope of an op (the set of threads it is atomic with respect to), from TA_SCOPE. */
typedef enum ta_scope {
#define TA_SCOPE(id, ...) TA_SCOPE_##id,
#include TA_OPS_DEF
#undef TA_SCOPE
	TA_SCOPE_COUNT
} ta_scope;

/* Where an op accumulates, from the TA_SPACE rows. */
typedef enum ta_space {
#define TA_SPACE(id, ...) TA_SPACE_##id,
#include TA_OPS_DEF
#undef TA_SPACE
	TA_SPACE_COUNT
} ta_space;

/* How destinations are addressed, from the TA_ADDR rows (ta_plan.h gives the rules). */
typedef enum ta_addr {
#define TA_ADDR(id, ...) TA_ADDR_##id,
#include TA_OPS_DEF
#undef TA_ADDR
	TA_ADDR_COUNT
} ta_addr;

/* Request families (which ops and addressing forms a request kind allows), from the
 * TA_FAMILY rows. TA_FAMILY_NONE marks requests that are no atomic or memory op. */
typedef enum ta_family {
#define TA_FAMILY(id, ...) TA_FAMILY_##id,
#include TA_OPS_DEF
#undef TA_FAMILY
	TA_FAMILY_COUNT,
	TA_FAMILY_NONE = TA_FAMILY_COUNT
} ta_family;

/* Status codes, from the TA_STATUS rows; equal to the wire enum Status. */
typedef enum ta_status {
#define TA_STATUS(id, pub) TA_##id,
#include TA_OPS_DEF
#undef TA_STATUS
	TA_STATUS_COUNT
} ta_status;

/* Request kinds, from the TA_REQUEST rows; values are the Request body's field numbers. */
typedef enum ta_req_kind {
	TA_REQ_NONE = 0,
#define TA_REQUEST(id, field, number, ...) TA_REQ_##id = number,
#include TA_OPS_DEF
#undef TA_REQUEST
	TA_REQ_END /* one past the highest kind */
} ta_req_kind;

/* What kind of operation an op is (the kind column of TA_OP). */
typedef enum ta_op_kind {
	TA_KIND_RMW = 1, /* read-modify-write atomic */
	TA_KIND_LOAD,    /* atomic load / gather */
	TA_KIND_STORE    /* atomic store / scatter store */
} ta_op_kind;

/* Whether an op returns the values it saw (the output column of TA_OP). */
typedef enum ta_output {
	TA_OUTPUT_OPTIONAL = 1, /* pre-RMW values when the request asks */
	TA_OUTPUT_ALWAYS,       /* always (loads) */
	TA_OUTPUT_NEVER         /* never (stores) */
} ta_output;

/* Which operands an op takes (the operands column of TA_OP). */
typedef enum ta_operands {
	TA_OPERANDS_VALUES = 1,     /* values */
	TA_OPERANDS_VALUES_COMPARE, /* values (desired) and compare (expected) */
	TA_OPERANDS_PADDING         /* no values; an optional padding scalar */
} ta_operands;

/* How an access uses a sem when it is mapped onto a C11 memory order. */
typedef enum ta_access {
	TA_ACCESS_RMW = 0,    /* a read-modify-write: both parts of the sem */
	TA_ACCESS_LOAD,       /* a load: only the acquire part */
	TA_ACCESS_STORE,      /* a store: only the release part */
	TA_ACCESS_CAS_FAILURE /* the load of a failed compare: only the acquire part */
} ta_access;

/* Bit sets the table writes: a family, a sem, an addressing form. */
#define TA_FAM(id)      (1u << TA_FAMILY_##id)
#define TA_SEM_BIT(id)  (1u << TA_SEM_##id)
#define TA_SEMS_ALL     ((1u << TA_SEM_COUNT) - 1u)
#define TA_ADDR_BIT(id) (1u << TA_ADDR_##id)
#define TA_ADDRS_ALL    ((1u << TA_ADDR_COUNT) - 1u)

/* An error: a status code and a message naming the problem. */
typedef struct ta_error {
	ta_status code; /* TA_OK when no error was recorded */
	char msg[256];  /* NUL-terminated human-readable message */
} ta_error;

/* Records code and a printf-style message in err (when err is not NULL); returns code. */
ta_status ta_error_set(ta_error *err, ta_status code, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Name of a status code ("OK", "INVALID_ARGUMENT", ...); "UNKNOWN" when invalid. */
const char *ta_status_name(ta_status code);

/* The kind column of the TA_DTYPE rows. */
typedef enum ta_dtype_kind {
	TA_DTYPE_KIND_INT,   /* integers: tiles and indices */
	TA_DTYPE_KIND_FLOAT, /* floats: tiles */
	TA_DTYPE_KIND_MASK   /* bool: masks only */
} ta_dtype_kind;

/* Size in bytes of one element of dtype; 0 for TA_DTYPE_NONE or an out-of-range value.
 * Inline (a switch generated from the TA_DTYPE rows): the request path asks it often. */
static inline size_t ta_dtype_size(ta_dtype dtype)
{
	switch (dtype) {
#define TA_DTYPE(id, wire, name, size, kind, sgn, bits, add, minmax, exch)                         \
	case TA_DTYPE_##id:                                                                        \
		return size;
#include TA_OPS_DEF
#undef TA_DTYPE
	default:
		return 0;
	}
}
/* Lower-case name of dtype ("int32", ...); "?" when invalid. */
const char *ta_dtype_name(ta_dtype dtype);
/* Parses a dtype name (or a short spelling: i32, f16, half, float, ...); returns
 * TA_DTYPE_NONE when unknown. */
ta_dtype ta_dtype_parse(const char *name);
/* True for the integer dtypes (kind INT). Inline, from the TA_DTYPE rows. */
static inline bool ta_dtype_is_int(ta_dtype dtype)
{
	switch (dtype) {
#define TA_DTYPE(id, wire, name, size, kind, sgn, bits, add, minmax, exch)                         \
	case TA_DTYPE_##id:                                                                        \
		return TA_DTYPE_KIND_##kind == TA_DTYPE_KIND_INT;
#include TA_OPS_DEF
#undef TA_DTYPE
	default:
		return false;
	}
}
/* True for the float dtypes (kind FLOAT). Inline, from the TA_DTYPE rows. */
static inline bool ta_dtype_is_float(ta_dtype dtype)
{
	switch (dtype) {
#define TA_DTYPE(id, wire, name, size, kind, sgn, bits, add, minmax, exch)                         \
	case TA_DTYPE_##id:                                                                        \
		return TA_DTYPE_KIND_##kind == TA_DTYPE_KIND_FLOAT;
#include TA_OPS_DEF
#undef TA_DTYPE
	default:
		return false;
	}
}
/* True for dtypes a tile may have (kind INT or FLOAT). */
static inline bool ta_dtype_is_tile(ta_dtype dtype)
{
	return ta_dtype_is_int(dtype) || ta_dtype_is_float(dtype);
}
/* True for signed integer dtypes (int32, int64). */
bool ta_dtype_is_signed_int(ta_dtype dtype);

/* Name of an op ("add", ...), or "?" when invalid. */
const char *ta_op_name(ta_op op);
/* Parses an op name (also "xchg" for exch); returns TA_OP_NONE when unknown. */
ta_op ta_op_parse(const char *name);
/* The kind of op (RMW, LOAD, STORE); 0 when op is invalid. Inline, like the op questions
 * below that the request path asks (a switch generated from the TA_OP rows). */
static inline ta_op_kind ta_op_kind_of(ta_op op)
{
	switch (op) {
#define TA_OP(id, nm, kind, ...)                                                                   \
	case TA_OP_##id:                                                                           \
		return TA_KIND_##kind;
#include TA_OPS_DEF
#undef TA_OP
	default:
		return (ta_op_kind)0;
	}
}
/* True for the read-modify-write ops (kind RMW). */
static inline bool ta_op_is_rmw(ta_op op)
{
	return ta_op_kind_of(op) == TA_KIND_RMW;
}
/* True when op accepts dtype (the dtypes column). */
bool ta_op_accepts_dtype(ta_op op, ta_dtype dtype);
/* True when the request family takes op (the families column). */
static inline bool ta_op_in_family(ta_op op, ta_family family)
{
	if ((unsigned)family >= TA_FAMILY_COUNT)
		return false;
	switch (op) {
#define TA_OP(id, nm, kind, dt, fams, ...)                                                         \
	case TA_OP_##id:                                                                           \
		return ((fams) >> family) & 1u;
#include TA_OPS_DEF
#undef TA_OP
	default:
		return false;
	}
}
/* True when space=shared is defined for op. */
bool ta_op_shared_ok(ta_op op);
/* True when PTX has a red.* form of op. */
bool ta_op_has_red(ta_op op);
/* True when op's element-wise requests on dtype may lower to a TMA bulk reduction (a
 * TA_BULK row, an integer dtype of 4 or 8 bytes that op accepts). */
bool ta_op_bulk_ok(ta_op op, ta_dtype dtype);
/* True when op accepts sem. */
static inline bool ta_op_sem_ok(ta_op op, ta_sem sem)
{
	if ((unsigned)sem >= TA_SEM_COUNT)
		return false;
	switch (op) {
#define TA_OP(id, nm, kind, dt, fams, sh, rd, sm, ...)                                             \
	case TA_OP_##id:                                                                           \
		return ((sm) >> sem) & 1u;
#include TA_OPS_DEF
#undef TA_OP
	default:
		return false;
	}
}
/* Whether op returns the values it saw (0 when op is invalid). */
static inline ta_output ta_op_output(ta_op op)
{
	switch (op) {
#define TA_OP(id, nm, kind, dt, fams, sh, rd, sm, out, ...)                                        \
	case TA_OP_##id:                                                                           \
		return TA_OUTPUT_##out;
#include TA_OPS_DEF
#undef TA_OP
	default:
		return (ta_output)0;
	}
}
/* Which operands op takes (0 when op is invalid). */
static inline ta_operands ta_op_operands(ta_op op)
{
	switch (op) {
#define TA_OP(id, nm, kind, dt, fams, sh, rd, sm, out, opnds, ...)                                 \
	case TA_OP_##id:                                                                           \
		return TA_OPERANDS_##opnds;
#include TA_OPS_DEF
#undef TA_OP
	default:
		return (ta_operands)0;
	}
}
/* True when applying op on dtype in any order (or privately, then merged) gives the same
 * bits (the exact column). */
bool ta_op_order_independent(ta_op op, ta_dtype dtype);
/* PTX mnemonic of op ("add" for add and sub, "ld", "st", ...); "" when invalid. */
const char *ta_op_ptx(ta_op op);
/* PTX type suffix of op's native instruction on dtype ("u32", "noftz.f16", "b64", ...);
 * "" when PTX has none and the kernels emulate it (or the pair is illegal). */
const char *ta_op_ptx_type(ta_op op, ta_dtype dtype);

/* True when the variant (op, dtype, sem, scope, space, with or without pre-RMW output) is
 * legal: the table's dtypes and sems columns, space shared only for ops that define it
 * and without output, and the output column. The one combined rule that the plan
 * builder, the PTX lowering table and the backends' plan checks read. */
bool ta_variant_legal(ta_op op, ta_dtype dtype, ta_sem sem, ta_scope scope, ta_space space,
                      bool want_old);

/* Checks everything about a request that does not need its tile: op in family, sem,
 * scope, space, output against the table. Returns TA_OK, or TA_INVALID_ARGUMENT with a
 * message naming the problem and what is allowed. The plan builder (daemon) and the
 * client library's pre-checks both call it, so they say the same. */
ta_status ta_check_variant(ta_family family, ta_op op, ta_sem sem, ta_scope scope, ta_space space,
                           bool want_old, ta_error *err);
/* The ops a family takes as text ("add, sub, min or max"). */
const char *ta_family_ops_text(ta_family family, char *buf, size_t n);
/* The sems op accepts as text ("relaxed or acquire"). */
const char *ta_op_sems_text(ta_op op, char *buf, size_t n);
/* The ops of one kind as text ("add, sub, ... or xor" for TA_KIND_RMW). */
const char *ta_kind_ops_text(ta_op_kind kind, char *buf, size_t n);
/* The ops for which space=shared is defined, as text. */
const char *ta_shared_ops_text(char *buf, size_t n);

/* The noun phrase of a family in messages ("an element-wise atomic"); "?" when invalid. */
const char *ta_family_noun(ta_family family);
/* True when family takes addressing form addr. */
static inline bool ta_family_addr_ok(ta_family family, ta_addr addr)
{
	if ((unsigned)addr >= TA_ADDR_COUNT)
		return false;
	switch (family) {
#define TA_FAMILY(id, noun, addrs)                                                                 \
	case TA_FAMILY_##id:                                                                       \
		return ((addrs) >> addr) & 1u;
#include TA_OPS_DEF
#undef TA_FAMILY
	default:
		return false;
	}
}
/* The addressing forms family takes as text ("indexed or flat"). */
const char *ta_family_addrs_text(ta_family family, char *buf, size_t n);
/* Name of an addressing form ("region", ...); "?" when invalid. */
const char *ta_addr_name(ta_addr addr);

/* True for a request kind of the table. */
static inline bool ta_req_valid(ta_req_kind kind)
{
	switch (kind) {
#define TA_REQUEST(id, ...)                                                                        \
	case TA_REQ_##id:                                                                          \
		return true;
#include TA_OPS_DEF
#undef TA_REQUEST
	default:
		return false;
	}
}
/* Short name of a request kind (the Request field: "scatter_store"); "empty" for NONE and
 * unknown values. */
const char *ta_req_name(ta_req_kind kind);
/* True when the request kind names a tile and runs against it. */
static inline bool ta_req_has_tile(ta_req_kind kind)
{
	switch (kind) {
#define TA_REQUEST(id, field, number, tile, ...)                                                   \
	case TA_REQ_##id:                                                                          \
		return tile;
#include TA_OPS_DEF
#undef TA_REQUEST
	default:
		return false;
	}
}
/* The request family of a kind (TA_FAMILY_NONE for requests that are no op). */
static inline ta_family ta_req_family(ta_req_kind kind)
{
	switch (kind) {
#define TA_REQUEST(id, field, number, tile, fam, ...)                                              \
	case TA_REQ_##id:                                                                          \
		return TA_FAMILY_##fam;
#include TA_OPS_DEF
#undef TA_REQUEST
	default:
		return TA_FAMILY_NONE;
	}
}
/* The op a memory request kind runs (LOAD / STORE); TA_OP_NONE for the others. */
static inline ta_op ta_req_op(ta_req_kind kind)
{
	switch (kind) {
#define TA_REQUEST(id, field, number, tile, fam, op, ...)                                          \
	case TA_REQ_##id:                                                                          \
		return TA_OP_##op;
#include TA_OPS_DEF
#undef TA_REQUEST
	default:
		return TA_OP_NONE;
	}
}
/* True when a success of kind may come back without its body (or with an empty OpResponse). */
bool ta_req_reply_optional(ta_req_kind kind);
/* True when a success of kind may change tile contents or the set of tiles. */
static inline bool ta_req_mutates(ta_req_kind kind)
{
	switch (kind) {
#define TA_REQUEST(id, field, number, tile, fam, op, reply, optional, mutates)                     \
	case TA_REQ_##id:                                                                          \
		return mutates;
#include TA_OPS_DEF
#undef TA_REQUEST
	default:
		return false;
	}
}

/* Name of a sem ("relaxed", ...); parse returns -1 when unknown. */
const char *ta_sem_name(ta_sem sem);
int ta_sem_parse(const char *name);
/* PTX .sem qualifier of sem ("relaxed", "acquire", ...); "" when invalid. */
const char *ta_sem_ptx(ta_sem sem);
/* True when sem has an acquire part / a release part. */
bool ta_sem_acquires(ta_sem sem);
bool ta_sem_releases(ta_sem sem);
/* Name of a scope ("gpu", ...); parse returns -1 when unknown. */
const char *ta_scope_name(ta_scope scope);
int ta_scope_parse(const char *name);
/* PTX .scope qualifier of scope ("gpu", "cta", ...); "" when invalid. */
const char *ta_scope_ptx(ta_scope scope);
/* Name of a space ("global", "shared"); parse returns -1 when unknown. */
const char *ta_space_name(ta_space space);
int ta_space_parse(const char *name);

/* float16 / bfloat16 bit patterns <-> float, rounding to nearest even. */
float ta_f16_to_f32(uint16_t bits);
uint16_t ta_f32_to_f16(float value);
/* Rounds a double to float16 with a single rounding (nearest even). */
uint16_t ta_f64_to_f16(double value);
float ta_bf16_to_f32(uint16_t bits);
uint16_t ta_f32_to_bf16(float value);
/* Rounds a double to bfloat16 with a single rounding (nearest even). */
uint16_t ta_f64_to_bf16(double value);

/* Checks a tile name: 1 to TA_NAME_MAX characters of [A-Za-z0-9_.-]. */
bool ta_name_valid(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* TA_TYPES_H */
