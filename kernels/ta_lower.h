/* ta_lower.h: the lowering rules of the CUDA backend, in plain C (always compiled, also
 * without CUDA). For every legal variant (op, dtype, sem, scope, space, output) they give
 * the exact PTX instruction(s) the prebuilt kernels in ta_cuda_kernels.cuh execute; the
 * variants come from the legality table tacore/ta_ops.def.
 *
 * Rules (from the PTX ISA's atom, red, ld and st instructions; check_ptx holds the built
 * kernels to them):
 *  - red.* only for ops with a red form, sem relaxed or release, and no output wanted;
 *    otherwise atom.* (acquire / acq_rel without output: atom with the result discarded).
 *  - add on integers as .u32 / .u64 (two's complement: same bits for signed); sub is add
 *    of the negated operand; min/max keep signedness (.s32/.u32/.s64/.u64).
 *  - exch, cas, and, or, xor on .b16/.b32/.b64 whatever the signedness.
 *  - float16 / bfloat16 add with .noftz; float min/max and 16-bit exch through a CAS loop.
 *  - load: ld.relaxed / ld.acquire; store: st.relaxed / st.release; each with the scope.
 *  - space shared: a block-private copy in shared memory (shared-memory atomics, no sem
 *    or scope), merged into the tile with one global red/atom per touched element. */
#ifndef TA_LOWER_H
#define TA_LOWER_H

#include <stdio.h>

#include "ta_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One kernel variant: what decides the instruction. */
typedef struct ta_variant {
	ta_op op;       /* operation (ADD..XOR, LOAD, STORE) */
	ta_dtype dtype; /* tile dtype */
	ta_sem sem;     /* memory order */
	ta_scope scope; /* scope */
	ta_space space; /* global or shared accumulation */
	bool want_old;  /* pre-RMW (or loaded) values returned */
} ta_variant;

/* Longest instruction description ta_lower_instr writes, NUL included. */
#define TA_LOWER_INSTR_MAX 256

/* True when v is a legal variant: the op accepts the dtype and the sem, space shared only
 * for ops that allow it and without output, LOAD always with output, STORE never (as
 * ta_plan_build), LOAD and STORE only in space global. */
bool ta_lower_legal(const ta_variant *v);

/* True when an op with this sem and output lowers to red.* (has a red form, relaxed or
 * release, no output wanted). */
bool ta_lower_uses_red(ta_op op, ta_sem sem, bool want_old);

/* True when an element-wise request of op on dtype with this sem, scope and output may
 * lower to a TMA bulk reduction (cp.reduce.async.bulk, sm_90): a TA_BULK row of the table
 * (ta_op_bulk_ok), sem relaxed, scope cta, cluster or gpu, no output. Each element's
 * reduction is atomic with .relaxed.gpu semantics (PTX ISA 8.0), at least what such a
 * request asks for. */
bool ta_lower_uses_bulk(ta_op op, ta_dtype dtype, ta_sem sem, ta_scope scope, bool want_old);

/* True when (op, dtype) has no PTX instruction and runs as a CAS loop in global memory
 * (float min/max, 16-bit exch). */
bool ta_lower_emulated(ta_op op, ta_dtype dtype);

/* Writes the PTX instruction description of v into buf (TA_LOWER_INSTR_MAX bytes are
 * always enough), e.g. "red.relaxed.gpu.global.add.u32" or
 * "cas-loop(atom.relaxed.gpu.global.cas.b32)". Returns TA_OK, or TA_INVALID_ARGUMENT with
 * a message naming the illegal part of v (buf then holds ""). */
ta_status ta_lower_instr(const ta_variant *v, char *buf, size_t buflen, ta_error *err);

/* Callback of ta_lower_foreach: one legal variant and its instruction. */
typedef void (*ta_lower_fn)(const ta_variant *v, const char *instr, void *ctx);

/* Calls fn for every legal variant, ordered by op, dtype, space, output, sem, scope
 * (the order of ta_ops.def). Returns the number of variants. */
size_t ta_lower_foreach(ta_lower_fn fn, void *ctx);

/* Prints the variant table: a header line, then one line per legal variant with op,
 * dtype, sem, scope, space, output ("old" or "-") and instruction, separated by blanks. */
void ta_lower_print_table(FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* TA_LOWER_H */
