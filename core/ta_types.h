/* ta_types.h: the core vocabulary of tileatom (dtypes, ops, sems, scopes, spaces, status
 * codes, errors). Enumerations are generated from ta_ops.def; their numeric values equal
 * the wire enums of proto/tileatom.proto (the codec asserts this at compile time).
 * Plain C, no dependencies: included by the daemon, the backends, the CUDA kernels
 * (as C++) and the tests. */
#ifndef TA_TYPES_H
#define TA_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Highest tile rank (and highest rank of any operand or broadcast shape). */
#define TA_MAX_RANK 4
/* Longest tile name, in bytes, excluding the terminating NUL. */
#define TA_NAME_MAX 64
/* Protocol version spoken by this build (see proto/tileatom.proto). */
#define TA_PROTOCOL_VERSION 1

/* Element types. TA_DTYPE_NONE (0) is "unspecified"; BOOL is for masks only. */
typedef enum ta_dtype {
	TA_DTYPE_NONE = 0,
#define TA_DTYPE(id, name, size, kind, sgn, bits, arith) TA_DTYPE_##id,
#include "ta_ops.def"
#undef TA_DTYPE
	TA_DTYPE_COUNT
} ta_dtype;

/* Operations. The atomic ops are ADD..XOR (wire values 1..9); LOAD and STORE are the
 * memory ops (gather / atomic load, scatter store / atomic store). */
typedef enum ta_op {
	TA_OP_NONE = 0,
#define TA_OP(id, name, dtypes, scatter, shared, red, sems) TA_OP_##id,
#include "ta_ops.def"
#undef TA_OP
	TA_OP_COUNT
} ta_op;

/* Memory-ordering semantics of an op. */
typedef enum ta_sem {
#define TA_SEM(id, name, c11) TA_SEM_##id,
#include "ta_ops.def"
#undef TA_SEM
	TA_SEM_COUNT
} ta_sem;

/* Scope of an op (the set of threads it is atomic with respect to). */
typedef enum ta_scope {
#define TA_SCOPE(id, name, ptx) TA_SCOPE_##id,
#include "ta_ops.def"
#undef TA_SCOPE
	TA_SCOPE_COUNT
} ta_scope;

/* Where an op accumulates: directly in the tile, or in a private copy merged at the end. */
typedef enum ta_space { TA_SPACE_GLOBAL = 0, TA_SPACE_SHARED = 1, TA_SPACE_COUNT } ta_space;

/* Status codes, equal to the wire enum Status. */
typedef enum ta_status {
	TA_OK = 0,
	TA_INVALID_ARGUMENT = 1,
	TA_NOT_FOUND = 2,
	TA_ALREADY_EXISTS = 3,
	TA_OUT_OF_RANGE = 4,
	TA_RESOURCE_EXHAUSTED = 5,
	TA_UNIMPLEMENTED = 6,
	TA_UNAVAILABLE = 7,
	TA_PERMISSION_DENIED = 8,
	TA_INTERNAL = 9,
	TA_STATUS_COUNT
} ta_status;

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

/* Name of a status code ("OK", "INVALID_ARGUMENT", ...). */
const char *ta_status_name(ta_status code);

/* Size in bytes of one element of dtype; 0 for TA_DTYPE_NONE or an out-of-range value. */
size_t ta_dtype_size(ta_dtype dtype);
/* Lower-case name of dtype ("int32", ...); "?" when invalid. */
const char *ta_dtype_name(ta_dtype dtype);
/* Parses a dtype name; returns TA_DTYPE_NONE when unknown. */
ta_dtype ta_dtype_parse(const char *name);
/* True for int32/uint32/int64/uint64. */
bool ta_dtype_is_int(ta_dtype dtype);
/* True for float32/float64/float16/bfloat16. */
bool ta_dtype_is_float(ta_dtype dtype);
/* True for dtypes a tile may have (every dtype but NONE and BOOL). */
bool ta_dtype_is_tile(ta_dtype dtype);
/* True for signed integer dtypes (int32, int64). */
bool ta_dtype_is_signed_int(ta_dtype dtype);

/* Name of an op ("add", ...), or "?" when invalid. */
const char *ta_op_name(ta_op op);
/* Parses an op name (also "xchg" for exch); returns TA_OP_NONE when unknown. */
ta_op ta_op_parse(const char *name);
/* True for the read-modify-write ops ADD..XOR. */
bool ta_op_is_rmw(ta_op op);
/* True when op accepts dtype (the dtypes column of ta_ops.def). */
bool ta_op_accepts_dtype(ta_op op, ta_dtype dtype);
/* True when the scatter atomic family accepts op. */
bool ta_op_scatter_ok(ta_op op);
/* True when space=shared is defined for op. */
bool ta_op_shared_ok(ta_op op);
/* True when PTX has a red.* form of op. */
bool ta_op_has_red(ta_op op);
/* True when op accepts sem. */
bool ta_op_sem_ok(ta_op op, ta_sem sem);

/* True when the variant (op, dtype, sem, scope, space, with or without pre-RMW output) is
 * legal: the table's op x dtype and sem columns, space shared only for ops that define it
 * and without output, loads always with output, stores never. The one combined rule that
 * the PTX lowering table and the backends' plan checks read. */
bool ta_variant_legal(ta_op op, ta_dtype dtype, ta_sem sem, ta_scope scope, ta_space space,
                      bool want_old);

/* Name of a sem ("relaxed", ...); parse returns -1 when unknown. */
const char *ta_sem_name(ta_sem sem);
int ta_sem_parse(const char *name);
/* Name of a scope ("gpu", ...); parse returns -1 when unknown. */
const char *ta_scope_name(ta_scope scope);
int ta_scope_parse(const char *name);
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
