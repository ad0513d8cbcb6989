/* ta_lower.c: the CUDA backend's lowering rules (see ta_lower.h), derived from the
 * table tacore/ta_ops.def: legality, PTX mnemonics and types, which (op, dtype) pairs are
 * emulated, sem and scope qualifiers all come from its rows. Plain C, no CUDA: the daemon's
 * --list-kernels prints the table, and the PTX test checks that every instruction named here is
 * present in the compiled kernels. */
#include "ta_lower.h"

#include <string.h>

bool ta_lower_legal(const ta_variant *v)
{
	return ta_variant_legal(v->op, v->dtype, v->sem, v->scope, v->space, v->want_old);
}

bool ta_lower_uses_red(ta_op op, ta_sem sem, bool want_old)
{
	/* red returns nothing and has no acquire part */
	return ta_op_is_rmw(op) && ta_op_has_red(op) && !want_old && !ta_sem_acquires(sem);
}

bool ta_lower_uses_bulk(ta_op op, ta_dtype dtype, ta_sem sem, ta_scope scope, bool want_old)
{
	/* "Each reduction operation performed by the cp.reduce.async.bulk has individually
	 * .relaxed.gpu memory ordering semantics" (PTX ISA, cp.reduce.async.bulk): atomic per
	 * element at gpu scope, which covers cta and cluster; nothing for sys, no ordering for
	 * release/acquire, no old values */
	return ta_op_bulk_ok(op, dtype) && sem == TA_SEM_RELAXED && scope != TA_SCOPE_SYS &&
	       !want_old;
}

bool ta_lower_emulated(ta_op op, ta_dtype dtype)
{
	return ta_op_accepts_dtype(op, dtype) && ta_op_ptx_type(op, dtype)[0] == '\0';
}

/* The PTX .bN type of dtype (cas, and/or/xor, loads and stores; the CAS loops). */
static const char *ptx_bits(ta_dtype dtype)
{
	return ta_op_ptx_type(TA_OP_CAS, dtype);
}

/* Writes the global-memory instruction of an RMW op into buf (packed: with the packed form
 * of the REGION loop where there is one; not for the merge of a private copy). */
static void global_rmw(char *buf, size_t len, ta_op op, ta_dtype dtype, ta_sem sem, ta_scope scope,
                       bool want_old, bool packed)
{
	const char *sem_name = ta_sem_ptx(sem);
	const char *scope_name = ta_scope_ptx(scope);
	if (ta_lower_emulated(op, dtype)) {
		snprintf(buf, len, "cas-loop(atom.%s.%s.global.cas.%s)", sem_name, scope_name,
		         ptx_bits(dtype));
		return;
	}
	const char *form = ta_lower_uses_red(op, sem, want_old) ? "red" : "atom";
	const char *wrap = op == TA_OP_SUB ? "add-negated(" : "";
	int n = snprintf(buf, len, "%s%s.%s.%s.global.%s.%s%s", wrap, form, sem_name, scope_name,
	                 ta_op_ptx(op), ta_op_ptx_type(op, dtype), op == TA_OP_SUB ? ")" : "");
	/* float add of an inf or NaN operand: the exact rule in software (canonical NaN) */
	if ((op == TA_OP_ADD || op == TA_OP_SUB) && ta_dtype_is_float(dtype) && n > 0 &&
	    (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n,
		              "|inf-nan-operand:cas-loop(atom.%s.%s.global.cas.%s)", sem_name,
		              scope_name, ptx_bits(dtype));
	/* float add with red over a contiguous region (sm_90): 16-byte groups with one packed
	 * red each (4 float32, 8 float16/bfloat16 elements), each element atomic on its own */
	size_t es = ta_dtype_size(dtype);
	if (packed && (op == TA_OP_ADD || op == TA_OP_SUB) && ta_dtype_is_float(dtype) && es < 8 &&
	    ta_lower_uses_red(op, sem, want_old) && n > 0 && (size_t)n < len) {
		/* the packed type: "v<lanes>." before the element type ("f32", "noftz.f16") */
		const char *type = ta_op_ptx_type(TA_OP_ADD, dtype);
		const char *dot = strrchr(type, '.');
		size_t pre = dot ? (size_t)(dot - type) + 1 : 0;
		snprintf(buf + n, len - (size_t)n, "|region:red.%s.%s.global.add.%.*sv%zu.%s",
		         sem_name, scope_name, (int)pre, type, 16 / es, type + pre);
	}
}

/* Writes the private-copy instruction of an RMW op into buf: .shared atomics on the
 * block's own shared memory (a window one block cannot hold is split by slot range over
 * the blocks of a cluster, each updating its own part with the same instruction). */
static void shared_rmw(char *buf, size_t len, ta_op op, ta_dtype dtype)
{
	/* floats: a CAS loop computing the core rule in software (float add: the exact
	 * rounding and flushing of the global instruction, canonical NaNs; min/max: -0.0 and
	 * NaN rules) */
	if (ta_dtype_is_float(dtype))
		snprintf(buf, len, "cas-loop(atom.shared.cas.%s)", ptx_bits(dtype));
	else
		snprintf(buf, len, "red.shared.%s.%s", ta_op_ptx(op), ta_op_ptx_type(op, dtype));
}

ta_status ta_lower_instr(const ta_variant *v, char *buf, size_t buflen, ta_error *err)
{
	if (buflen > 0)
		buf[0] = '\0';
	if (!ta_lower_legal(v))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "no kernel variant for op %s, dtype %s, sem %s, scope %s, "
		                    "space %s, output %s",
		                    ta_op_name(v->op), ta_dtype_name(v->dtype), ta_sem_name(v->sem),
		                    ta_scope_name(v->scope), ta_space_name(v->space),
		                    v->want_old ? "old" : "none");
	if (!ta_op_is_rmw(v->op)) { /* ld / st */
		snprintf(buf, buflen, "%s.%s.%s.global.%s", ta_op_ptx(v->op), ta_sem_ptx(v->sem),
		         ta_scope_ptx(v->scope), ta_op_ptx_type(v->op, v->dtype));
	} else if (v->space == TA_SPACE_SHARED) {
		char priv[TA_LOWER_INSTR_MAX], merge[TA_LOWER_INSTR_MAX];
		shared_rmw(priv, sizeof priv, v->op, v->dtype);
		/* the private copy of a sub holds the sum of the negated operands */
		ta_op merge_op = v->op == TA_OP_SUB ? TA_OP_ADD : v->op;
		global_rmw(merge, sizeof merge, merge_op, v->dtype, v->sem, v->scope, false, false);
		snprintf(buf, buflen, "shared-private(%s)+merge(%s)", priv, merge);
	} else {
		global_rmw(buf, buflen, v->op, v->dtype, v->sem, v->scope, v->want_old, true);
		/* over a contiguous, 16-byte aligned region of 64 KiB or more: TMA bulk
		 * reductions of operand chunks staged in shared memory (the tail: the above) */
		size_t n = strlen(buf);
		if (ta_lower_uses_bulk(v->op, v->dtype, v->sem, v->scope, v->want_old) &&
		    n < buflen)
			snprintf(buf + n, buflen - n,
			         "|region-bulk:cp.reduce.async.bulk.global.shared::cta.bulk_group."
			         "%s.%s",
			         ta_op_ptx(v->op), ta_op_ptx_type(v->op, v->dtype));
	}
	return TA_OK;
}

size_t ta_lower_foreach(ta_lower_fn fn, void *ctx)
{
	size_t n = 0;
	char instr[TA_LOWER_INSTR_MAX];
	for (int op = TA_OP_NONE + 1; op < TA_OP_COUNT; op++)
		for (int dt = TA_DTYPE_NONE + 1; dt < TA_DTYPE_COUNT; dt++)
			for (int space = 0; space < TA_SPACE_COUNT; space++)
				for (int old = 0; old < 2; old++)
					for (int sem = 0; sem < TA_SEM_COUNT; sem++)
						for (int sc = 0; sc < TA_SCOPE_COUNT; sc++) {
							ta_variant v = {
							    (ta_op)op,       (ta_dtype)dt,
							    (ta_sem)sem,     (ta_scope)sc,
							    (ta_space)space, old != 0};
							if (ta_lower_instr(&v, instr, sizeof instr,
							                   NULL) != TA_OK)
								continue;
							if (fn)
								fn(&v, instr, ctx);
							n++;
						}
	return n;
}

/* ta_lower_foreach callback of ta_lower_print_table: prints one row to the FILE in ctx. */
static void print_row(const ta_variant *v, const char *instr, void *ctx)
{
	fprintf((FILE *)ctx, "%-5s %-8s %-7s %-7s %-6s %-6s %s\n", ta_op_name(v->op),
	        ta_dtype_name(v->dtype), ta_sem_name(v->sem), ta_scope_name(v->scope),
	        ta_space_name(v->space), v->want_old ? "old" : "-", instr);
}

void ta_lower_print_table(FILE *out)
{
	fprintf(out, "%-5s %-8s %-7s %-7s %-6s %-6s %s\n", "op", "dtype", "sem", "scope", "space",
	        "output", "instruction");
	ta_lower_foreach(print_row, out);
}
