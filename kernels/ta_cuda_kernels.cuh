/* ta_cuda_kernels.cuh: the prebuilt device kernels of the CUDA backend (included once, by
 * ta_cuda.cu).
 *
 * One kernel template per (dtype, op, space, loop): k_global<DT, KOP, MODE> updates the
 * tile directly, k_shared<DT, KOP, MODE> accumulates into a block-private copy of the
 * touched window in shared memory and merges it with one global red/atom per touched
 * element, and k_cluster<DT, KOP, MODE> does the same with a window too large for one
 * block, split by slot range over the blocks of a thread-block cluster (the host uses 2
 * blocks): every block of the cluster reads the same elements and applies those of its own
 * part with atom/red.shared in its own shared memory. sem and scope
 * are not template parameters: every instruction site is a warp-uniform switch over the 16
 * (sem, scope) pairs (in one out-of-line function per (dtype, op), apply_global_rt), each
 * case one inline PTX instruction carrying both qualifiers, so the instruction executed is
 * exactly the one ta_lower.c names; the fast loops also get sem relaxed + scope gpu
 * compiled in. SUB runs the ADD kernels with the operand negated (kargs.negate).
 *
 * Element semantics mirror ta_plan_resolve (ta_plan.h): masks first, then addressing and
 * bounds (out-of-range elements are skipped and counted), then the op; outputs of masked
 * or skipped elements are the compare value (CAS), the padding (LOAD) or zero. Whatever
 * the plan says, an offset outside [0, tile_elems) is never accessed (it is counted
 * apart and reported).
 *
 * The loops (MODE): general (unravel the element index, strided operands, any
 * addressing); REGION (a contiguous region: element k at tile offset base + k, operands
 * contiguous or scalar; a warp covers consecutive elements, so its loads and atomics are
 * coalesced; float add without output adds 16-byte groups with sm_90's packed
 * red.add.v4.f32 / .v8.f16 / .v8.bf16, see vec_lanes); FLAT32 / FLAT64 (int32 / int64 flat
 * offsets into a contiguous region: 16-byte loads of 4 offsets and operands, no division);
 * COUNT32 / COUNT64 (k_shared of integer dtypes only, see block_count: the FLAT plans of a
 * histogram, one scalar operand for every key, in a kernel of their own).
 * k_bulk<DT, KOP> (sm_90) applies the integer ops of the table's TA_BULK rows over a
 * contiguous region with TMA bulk reductions of operand chunks staged in shared memory. */
#ifndef TA_CUDA_KERNELS_CUH
#define TA_CUDA_KERNELS_CUH

#include <stdint.h>

#include "ta_float.h"
#include "ta_plan.h"

namespace ta
{

/* Everything a kernel needs, passed by value. */
struct kargs {
	ta_plan p;                    /* the plan; every pointer in it is device memory */
	void *tile;                   /* tile base (device) */
	unsigned long long *counters; /* device: [0] skipped, [1] applied, [2] outside the tile */
	int64_t tile_elems;           /* elements in the tile: no access outside */
	int64_t base;                 /* fast loop: tile offset of the region's element 0 */
	int64_t lo;                   /* shared kernels: tile offset of the window start */
	int64_t win;                  /* shared kernels: window length in elements */
	int cl_shift;                 /* cluster kernels: log2 of the cluster size C */
	int ss;                       /* ss_of(sem, scope) (ta_sem, ta_scope values) */
	int mode;                     /* the loop (kmode) */
	int negate;                   /* 1: add the negated operand (SUB) */
	int vals_vec;                 /* fast loops: values contiguous (1) or scalar (0) */
	int cmp_vec;                  /* fast loops: compare contiguous (1) or scalar (0) */
	int mask_vec;                 /* fast loops: mask contiguous (1) or scalar (0) */
};

/* Where the loops accumulate (their SH template parameter). */
enum kspace {
	S_GLOBAL = 0, /* straight into the tile */
	S_BLOCK = 1,  /* a block-private window in the block's shared memory */
	S_CLUSTER = 2 /* a cluster-private window split by range over the cluster's blocks */
};

/* Kernel-side op codes: the ta_op values, from ta_ops.def (K_SUB is never a kernel: SUB
 * runs the K_ADD kernels with the operand negated). */
enum kop {
#define TA_OP(id, ...) K_##id = TA_OP_##id,
#include "ta_ops.def"
#undef TA_OP
};

/* The bit container of an element of SIZE bytes. */
template <int SIZE> struct bits_of;
template <> struct bits_of<1> {
	typedef unsigned char B;
};
template <> struct bits_of<2> {
	typedef unsigned short B;
};
template <> struct bits_of<4> {
	typedef uint32_t B;
};
template <> struct bits_of<8> {
	typedef uint64_t B;
};

/* Values of the kind column of TA_DTYPE. */
enum dt_kind { DK_INT, DK_FLOAT, DK_MASK };

/* Per-dtype facts, from ta_ops.def: the bit container B, float or not, signed or not. */
template <int DT> struct dt_traits;
#define TA_DTYPE(id, wire, name, size, kind, sgn, bits, add, minmax, exch)                         \
	template <> struct dt_traits<TA_DTYPE_##id> {                                              \
		typedef bits_of<size>::B B;                                                        \
		static constexpr bool is_float = DK_##kind == DK_FLOAT, is_signed = sgn;           \
	};
#include "ta_ops.def"
#undef TA_DTYPE

/* The float rules of a float dtype DT, the ones the CPU backend follows too: the bit
 * patterns and functions of tacore/ta_float.h (ta_f32_add, ...) under one name per dtype. */
template <int DT> struct fl;
#define TA_FL(ID, F, T, S, I, N)                                                                   \
	template <> struct fl<TA_DTYPE_##ID> {                                                     \
		static_assert(sizeof(T) == sizeof(typename dt_traits<TA_DTYPE_##ID>::B),           \
		              "ta_float.h's bits of " #F " are the kernels' bit container");       \
		static constexpr T sign = S, inf = I; /* sign bit, +infinity */                    \
		/* b is a NaN */                                                                   \
		static __device__ __forceinline__ bool is_nan(T b)                                 \
		{                                                                                  \
			return ta_##F##_is_nan(b);                                                 \
		}                                                                                  \
		/* b is neither an infinity nor a NaN */                                           \
		static __device__ __forceinline__ bool finite(T b)                                 \
		{                                                                                  \
			return ta_##F##_finite(b);                                                 \
		}                                                                                  \
		/* b with its sign flipped (SUB) */                                                \
		static __device__ __forceinline__ T neg(T b)                                       \
		{                                                                                  \
			return ta_##F##_neg(b);                                                    \
		}                                                                                  \
		/* what an add stores for the raw result r */                                      \
		static __device__ __forceinline__ T canon(T r)                                     \
		{                                                                                  \
			return ta_##F##_canon(r);                                                  \
		}                                                                                  \
		/* tile value a plus operand b */                                                  \
		static __device__ __forceinline__ T add(T a, T b)                                  \
		{                                                                                  \
			return ta_##F##_add(a, b);                                                 \
		}                                                                                  \
		/* the new value of a min (max) of tile value cur with operand v */                \
		static __device__ __forceinline__ T minmax(T cur, T v, bool is_max)                \
		{                                                                                  \
			return ta_##F##_minmax(cur, v, is_max);                                    \
		}                                                                                  \
	};
TA_FLOAT_FORMATS(TA_FL)
#undef TA_FL

/* ---- (sem, scope) dispatch ------------------------------------------------------------
 * ss = ss_of(sem, scope) = sem * TA_SS_SCOPES + scope (the ta_sem / ta_scope values); the
 * kernels read the sem back as ss >> TA_SS_SHIFT and the scope as ss & (TA_SS_SCOPES - 1).
 * Every case label is ss_of(TA_SEM_x, TA_SCOPE_y), and the PTX qualifiers of its asm are
 * TA_PTX_SEM_x and TA_PTX_SCOPE_y, string literals checked against the table's ptx columns
 * at compile time: the instruction of each case is the one ta_lower.c names for that
 * (sem, scope). M(sem, scope, ...) is a macro that expands to one asm statement. */

/* Bits of ss that hold the scope. */
#define TA_SS_SHIFT 2
/* Scopes ss has room for. */
#define TA_SS_SCOPES (1 << TA_SS_SHIFT)
static_assert(TA_SCOPE_COUNT == TA_SS_SCOPES,
              "every ta_scope needs its case in TA_SS_SEM, and ss packs it in TA_SS_SHIFT bits");
static_assert(TA_SEM_COUNT == 4, "every ta_sem needs its cases in TA_SWITCH_ALL");

/* The ss of (sem, scope); ta_cuda.cu's check_plan sets kargs.ss with it. */
__host__ __device__ constexpr int ss_of(int sem, int scope)
{
	return sem * TA_SS_SCOPES + scope;
}
/* The (sem, scope) pair the fast loops compile in: relaxed, gpu. */
constexpr int SS_FAST = ss_of(TA_SEM_RELAXED, TA_SCOPE_GPU);
static_assert(SS_FAST == 0, "kargs zero-initialised (ss 0) means relaxed, gpu");

/* The PTX qualifiers as string literals (asm text is built from literals). */
#define TA_PTX_SEM_RELAXED   "relaxed"
#define TA_PTX_SEM_ACQUIRE   "acquire"
#define TA_PTX_SEM_RELEASE   "release"
#define TA_PTX_SEM_ACQ_REL   "acq_rel"
#define TA_PTX_SCOPE_GPU     "gpu"
#define TA_PTX_SCOPE_CTA     "cta"
#define TA_PTX_SCOPE_CLUSTER "cluster"
#define TA_PTX_SCOPE_SYS     "sys"

/* True when the strings a and b are equal (compile time). */
constexpr bool str_eq(const char *a, const char *b)
{
	return *a == *b && (*a == '\0' || str_eq(a + 1, b + 1));
}
/* Each literal above is the ptx column of its row of ta_ops.def. */
#define TA_SEM(id, name, acquires, releases, ptx)                                                  \
	static_assert(str_eq(TA_PTX_SEM_##id, ptx), "TA_PTX_SEM_" #id " is the table's PTX sem");
#include "ta_ops.def"
#undef TA_SEM
#define TA_SCOPE(id, name, ptx)                                                                    \
	static_assert(str_eq(TA_PTX_SCOPE_##id, ptx),                                              \
	              "TA_PTX_SCOPE_" #id " is the table's PTX scope");
#include "ta_ops.def"
#undef TA_SCOPE

/* The case of (sem SEM, scope SCOPE), both table ids (RELAXED, GPU, ...). */
#define TA_SS_CASE(SEM, SCOPE, M, ...)                                                             \
	case ss_of(TA_SEM_##SEM, TA_SCOPE_##SCOPE):                                                \
		M(TA_PTX_SEM_##SEM, TA_PTX_SCOPE_##SCOPE, __VA_ARGS__);                            \
		break;
/* The cases of sem SEM with every scope. */
#define TA_SS_SEM(SEM, M, ...)                                                                     \
	TA_SS_CASE(SEM, GPU, M, __VA_ARGS__)                                                       \
	TA_SS_CASE(SEM, CTA, M, __VA_ARGS__)                                                       \
	TA_SS_CASE(SEM, CLUSTER, M, __VA_ARGS__)                                                   \
	TA_SS_CASE(SEM, SYS, M, __VA_ARGS__)
/* All 16 pairs (atom, cas). */
#define TA_SWITCH_ALL(ss, M, ...)                                                                  \
	switch (ss) {                                                                              \
		TA_SS_SEM(RELAXED, M, __VA_ARGS__)                                                 \
		TA_SS_SEM(ACQUIRE, M, __VA_ARGS__)                                                 \
		TA_SS_SEM(RELEASE, M, __VA_ARGS__)                                                 \
		TA_SS_SEM(ACQ_REL, M, __VA_ARGS__)                                                 \
	}
/* The pairs red and st accept: relaxed and release. */
#define TA_SWITCH_RELREL(ss, M, ...)                                                               \
	switch (ss) {                                                                              \
		TA_SS_SEM(RELAXED, M, __VA_ARGS__)                                                 \
		TA_SS_SEM(RELEASE, M, __VA_ARGS__)                                                 \
	}
/* The pairs ld accepts: relaxed and acquire. */
#define TA_SWITCH_RELACQ(ss, M, ...)                                                               \
	switch (ss) {                                                                              \
		TA_SS_SEM(RELAXED, M, __VA_ARGS__)                                                 \
		TA_SS_SEM(ACQUIRE, M, __VA_ARGS__)                                                 \
	}

/* The acquires / releases columns of the table, for the assertions below. */
constexpr bool sem_acquires[] = {
#define TA_SEM(id, name, acquires, releases, ptx) acquires,
#include "ta_ops.def"
#undef TA_SEM
};
constexpr bool sem_releases[] = {
#define TA_SEM(id, name, acquires, releases, ptx) releases,
#include "ta_ops.def"
#undef TA_SEM
};
/* ss_red_ok, ss_loop_load and cas_loop decide by ranges and names of sems: they hold while
 * the sems are in this order with these parts. */
static_assert(TA_SEM_RELAXED == 0 && TA_SEM_ACQUIRE == 1 && TA_SEM_RELEASE == 2 &&
                  TA_SEM_ACQ_REL == 3,
              "the sem ranges of ss_red_ok");
static_assert(!sem_acquires[TA_SEM_RELAXED] && sem_acquires[TA_SEM_ACQUIRE] &&
                  !sem_acquires[TA_SEM_RELEASE] && sem_acquires[TA_SEM_ACQ_REL],
              "ss_red_ok and ss_loop_load: exactly acquire and acq_rel acquire");
static_assert(!sem_releases[TA_SEM_RELAXED] && !sem_releases[TA_SEM_ACQUIRE] &&
                  sem_releases[TA_SEM_RELEASE] && sem_releases[TA_SEM_ACQ_REL],
              "cas_loop: exactly release and acq_rel release");

/* One asm statement per instruction shape; S/C are the sem/scope strings, OPT the
 * operation and type ("add.u32"), CS the register constraint letter ("r"). */
#define TA_ASM_ATOM(S, C, OPT, CS)                                                                 \
	asm volatile("atom." S "." C ".global." OPT " %0, [%1], %2;"                               \
	             : "=" CS(old)                                                                 \
	             : "l"(addr), CS(v)                                                            \
	             : "memory")
#define TA_ASM_RED(S, C, OPT, CS)                                                                  \
	asm volatile("red." S "." C ".global." OPT " [%0], %1;" ::"l"(addr), CS(v) : "memory")
#define TA_ASM_CAS(S, C, OPT, CS)                                                                  \
	asm volatile("atom." S "." C ".global.cas." OPT " %0, [%1], %2, %3;"                       \
	             : "=" CS(old)                                                                 \
	             : "l"(addr), CS(cmp), CS(v)                                                   \
	             : "memory")
// clang-format off
#define TA_ASM_LD(S, C, OPT, CS)                                                                   \
	asm volatile("ld." S "." C ".global." OPT " %0, [%1];"                                     \
	             : "=" CS(old)                                                                 \
	             : "l"(addr)                                                                   \
	             : "memory")
// clang-format on
#define TA_ASM_ST(S, C, OPT, CS)                                                                   \
	asm volatile("st." S "." C ".global." OPT " [%0], %1;" ::"l"(addr), CS(v) : "memory")

/* True for the (sem, scope) pairs whose sem does not acquire, relaxed or release (red is
 * legal). */
__device__ __forceinline__ bool ss_red_ok(int ss)
{
	return ss < ss_of(TA_SEM_ACQUIRE, 0) ||
	       (ss >= ss_of(TA_SEM_RELEASE, 0) && ss < ss_of(TA_SEM_ACQ_REL, 0));
}

/* Defines NAME(addr, v, ss, want_old): the RMW OPT on global memory, returning the old
 * value; without an output and with sem relaxed/release it issues red (returns 0). */
#define TA_DEF_RMW(NAME, B, OPT, CS)                                                               \
	__device__ __forceinline__ B NAME(B *addr, B v, int ss, bool want_old)                     \
	{                                                                                          \
		B old = 0;                                                                         \
		if (!want_old && ss_red_ok(ss)) {                                                  \
			TA_SWITCH_RELREL(ss, TA_ASM_RED, OPT, CS)                                  \
			return 0;                                                                  \
		}                                                                                  \
		TA_SWITCH_ALL(ss, TA_ASM_ATOM, OPT, CS)                                            \
		return old;                                                                        \
	}
/* Defines NAME(addr, v, ss): an atom-only RMW (exch). */
#define TA_DEF_ATOM(NAME, B, OPT, CS)                                                              \
	__device__ __forceinline__ B NAME(B *addr, B v, int ss)                                    \
	{                                                                                          \
		B old = 0;                                                                         \
		TA_SWITCH_ALL(ss, TA_ASM_ATOM, OPT, CS)                                            \
		return old;                                                                        \
	}

TA_DEF_RMW(rmw_add_u32, uint32_t, "add.u32", "r")
TA_DEF_RMW(rmw_add_u64, uint64_t, "add.u64", "l")
TA_DEF_RMW(rmw_add_f32, uint32_t, "add.f32", "r")
TA_DEF_RMW(rmw_add_f64, uint64_t, "add.f64", "l")
TA_DEF_RMW(rmw_add_f16, unsigned short, "add.noftz.f16", "h")
TA_DEF_RMW(rmw_add_bf16, unsigned short, "add.noftz.bf16", "h")
TA_DEF_RMW(rmw_min_s32, uint32_t, "min.s32", "r")
TA_DEF_RMW(rmw_min_u32, uint32_t, "min.u32", "r")
TA_DEF_RMW(rmw_min_s64, uint64_t, "min.s64", "l")
TA_DEF_RMW(rmw_min_u64, uint64_t, "min.u64", "l")
TA_DEF_RMW(rmw_max_s32, uint32_t, "max.s32", "r")
TA_DEF_RMW(rmw_max_u32, uint32_t, "max.u32", "r")
TA_DEF_RMW(rmw_max_s64, uint64_t, "max.s64", "l")
TA_DEF_RMW(rmw_max_u64, uint64_t, "max.u64", "l")
TA_DEF_RMW(rmw_and_b32, uint32_t, "and.b32", "r")
TA_DEF_RMW(rmw_and_b64, uint64_t, "and.b64", "l")
TA_DEF_RMW(rmw_or_b32, uint32_t, "or.b32", "r")
TA_DEF_RMW(rmw_or_b64, uint64_t, "or.b64", "l")
TA_DEF_RMW(rmw_xor_b32, uint32_t, "xor.b32", "r")
TA_DEF_RMW(rmw_xor_b64, uint64_t, "xor.b64", "l")
TA_DEF_ATOM(atom_exch_b32, uint32_t, "exch.b32", "r")
TA_DEF_ATOM(atom_exch_b64, uint64_t, "exch.b64", "l")

/* atom.cas on 16/32/64 bits: returns the old value. */
__device__ __forceinline__ unsigned short atom_cas(unsigned short *addr, unsigned short cmp,
                                                   unsigned short v, int ss)
{
	unsigned short old = 0;
	TA_SWITCH_ALL(ss, TA_ASM_CAS, "b16", "h")
	return old;
}
__device__ __forceinline__ uint32_t atom_cas(uint32_t *addr, uint32_t cmp, uint32_t v, int ss)
{
	uint32_t old = 0;
	TA_SWITCH_ALL(ss, TA_ASM_CAS, "b32", "r")
	return old;
}
__device__ __forceinline__ uint64_t atom_cas(uint64_t *addr, uint64_t cmp, uint64_t v, int ss)
{
	uint64_t old = 0;
	TA_SWITCH_ALL(ss, TA_ASM_CAS, "b64", "l")
	return old;
}

/* ld.{relaxed,acquire}.scope (ss: sem relaxed or acquire). */
__device__ __forceinline__ unsigned short ld_scoped(const unsigned short *addr, int ss)
{
	unsigned short old = 0;
	TA_SWITCH_RELACQ(ss, TA_ASM_LD, "b16", "h")
	return old;
}
__device__ __forceinline__ uint32_t ld_scoped(const uint32_t *addr, int ss)
{
	uint32_t old = 0;
	TA_SWITCH_RELACQ(ss, TA_ASM_LD, "b32", "r")
	return old;
}
__device__ __forceinline__ uint64_t ld_scoped(const uint64_t *addr, int ss)
{
	uint64_t old = 0;
	TA_SWITCH_RELACQ(ss, TA_ASM_LD, "b64", "l")
	return old;
}

/* st.{relaxed,release}.scope (ss: sem relaxed or release). */
__device__ __forceinline__ void st_scoped(unsigned short *addr, unsigned short v, int ss){
    TA_SWITCH_RELREL(ss, TA_ASM_ST, "b16", "h")} __device__ __forceinline__
    void st_scoped(uint32_t *addr, uint32_t v,
                   int ss){TA_SWITCH_RELREL(ss, TA_ASM_ST, "b32", "r")} __device__ __forceinline__
    void st_scoped(uint64_t *addr, uint64_t v, int ss){TA_SWITCH_RELREL(ss, TA_ASM_ST, "b64", "l")}

/* The (sem, scope) pair of the first load of a CAS loop: acquire when the op's sem
 * acquires (acquire, acq_rel), else relaxed; same scope. */
__device__ __forceinline__ int ss_loop_load(int ss)
{
	int sem = ss >> TA_SS_SHIFT, scope = ss & (TA_SS_SCOPES - 1);
	return ((sem == TA_SEM_ACQUIRE || sem == TA_SEM_ACQ_REL) ? ss_of(TA_SEM_ACQUIRE, 0)
	                                                         : ss_of(TA_SEM_RELAXED, 0)) +
	       scope;
}

/* ---- float rules: tacore/ta_float.h, through fl<DT> ----------------------------------*/

/* The top bit of a bit container. */
template <typename B> __device__ __forceinline__ B top_bit()
{
	return (B)((B)1 << (sizeof(B) * 8 - 1));
}

/* Negation for SUB: two's complement for integers, the sign bit flipped for floats. */
template <int DT>
__device__ __forceinline__ typename dt_traits<DT>::B negate(typename dt_traits<DT>::B v)
{
	typedef typename dt_traits<DT>::B B;
	if constexpr (dt_traits<DT>::is_float)
		return fl<DT>::neg(v);
	else
		return (B)(0 - v);
}

/* A CAS loop on global memory: new = f(cur) until it sticks. When f(cur) == cur nothing
 * needs writing, but with a releasing sem (release, acq_rel) the value is still written
 * back by a CAS so that the release happens (as the CPU backend does). Returns the value
 * seen before the update. */
template <typename B, typename F> __device__ __forceinline__ B cas_loop(B *addr, int ss, F f)
{
	const bool releases =
	    (ss >> TA_SS_SHIFT) == TA_SEM_RELEASE || (ss >> TA_SS_SHIFT) == TA_SEM_ACQ_REL;
	B cur = ld_scoped(addr, ss_loop_load(ss));
	for (;;) {
		B nv = f(cur);
		if (nv == cur && !releases)
			return cur;
		B prev = atom_cas(addr, cur, nv, ss);
		if (prev == cur)
			return cur;
		cur = prev;
	}
}

/* Float add on global memory: the hardware atom/red for finite operands; a CAS loop with
 * the exact software rule for inf/NaN operands (so that NaN results are canonical). */
template <int DT>
__device__ __forceinline__ typename dt_traits<DT>::B
add_float_global(typename dt_traits<DT>::B *addr, typename dt_traits<DT>::B v, int ss,
                 bool want_old)
{
	typedef typename dt_traits<DT>::B B;
	if (!fl<DT>::finite(v))
		return cas_loop(addr, ss, [v](B cur) { return fl<DT>::add(cur, v); });
	if constexpr (DT == TA_DTYPE_F32)
		return rmw_add_f32(addr, v, ss, want_old);
	else if constexpr (DT == TA_DTYPE_F64)
		return rmw_add_f64(addr, v, ss, want_old);
	else if constexpr (DT == TA_DTYPE_F16)
		return rmw_add_f16(addr, v, ss, want_old);
	else
		return rmw_add_bf16(addr, v, ss, want_old);
}

/* Applies op KOP of dtype DT to one tile element in global memory with sem/scope ss;
 * returns the value seen before (0 when want_old is false and red was used, and for
 * STORE). v is the operand (already negated for SUB), cmp the CAS expected value. */
template <int DT, int KOP>
__device__ __forceinline__ typename dt_traits<DT>::B
apply_global(typename dt_traits<DT>::B *addr, typename dt_traits<DT>::B v,
             typename dt_traits<DT>::B cmp, int ss, bool want_old)
{
	typedef typename dt_traits<DT>::B B;
	constexpr bool F = dt_traits<DT>::is_float, S = dt_traits<DT>::is_signed;
	constexpr bool W64 = sizeof(B) == 8, W16 = sizeof(B) == 2;
	if constexpr (KOP == K_ADD) {
		if constexpr (F)
			return add_float_global<DT>(addr, v, ss, want_old);
		else if constexpr (W64)
			return rmw_add_u64(addr, v, ss, want_old);
		else
			return rmw_add_u32(addr, v, ss, want_old);
	} else if constexpr (KOP == K_MIN || KOP == K_MAX) {
		constexpr bool MX = KOP == K_MAX;
		if constexpr (F)
			return cas_loop(addr, ss,
			                [v](B cur) { return fl<DT>::minmax(cur, v, MX); });
		else if constexpr (W64 && S)
			return MX ? rmw_max_s64(addr, v, ss, want_old)
			          : rmw_min_s64(addr, v, ss, want_old);
		else if constexpr (W64)
			return MX ? rmw_max_u64(addr, v, ss, want_old)
			          : rmw_min_u64(addr, v, ss, want_old);
		else if constexpr (S)
			return MX ? rmw_max_s32(addr, v, ss, want_old)
			          : rmw_min_s32(addr, v, ss, want_old);
		else
			return MX ? rmw_max_u32(addr, v, ss, want_old)
			          : rmw_min_u32(addr, v, ss, want_old);
	} else if constexpr (KOP == K_EXCH) {
		if constexpr (W16)
			return cas_loop(addr, ss, [v](B) { return v; });
		else if constexpr (W64)
			return atom_exch_b64(addr, v, ss);
		else
			return atom_exch_b32(addr, v, ss);
	} else if constexpr (KOP == K_CAS) {
		return atom_cas(addr, cmp, v, ss);
	} else if constexpr (KOP == K_AND) {
		if constexpr (W64)
			return rmw_and_b64(addr, v, ss, want_old);
		else
			return rmw_and_b32(addr, v, ss, want_old);
	} else if constexpr (KOP == K_OR) {
		if constexpr (W64)
			return rmw_or_b64(addr, v, ss, want_old);
		else
			return rmw_or_b32(addr, v, ss, want_old);
	} else if constexpr (KOP == K_XOR) {
		if constexpr (W64)
			return rmw_xor_b64(addr, v, ss, want_old);
		else
			return rmw_xor_b32(addr, v, ss, want_old);
	} else if constexpr (KOP == K_LOAD) {
		return ld_scoped(addr, ss);
	} else { /* STORE (the plan builder refuses a store with want_old) */
		st_scoped(addr, v, ss);
		return 0;
	}
}

/* apply_global with a run-time (sem, scope): one out-of-line copy of the 16-way switch per
 * kernel instead of one per call site (keeps the PTX and the build time small). */
template <int DT, int KOP>
__device__ __noinline__ typename dt_traits<DT>::B
apply_global_rt(typename dt_traits<DT>::B *addr, typename dt_traits<DT>::B v,
                typename dt_traits<DT>::B cmp, int ss, bool want_old)
{
	return apply_global<DT, KOP>(addr, v, cmp, ss, want_old);
}

/* ---- shared-memory (block-private) accumulation ---------------------------------------*/

/* The value a private slot starts with; a slot still holding it at the end was not
 * changed and is not merged. Integer ops and float min/max: the op's identity (merging it
 * would change nothing). Float add: an all-ones NaN pattern that no private sum takes
 * (float32/16-bit private sums store canonical NaNs; float64 NaN operands bypass the
 * private copy and inf - inf gives 0xfff8000000000000), so every touched slot is merged. */
template <int DT, int KOP> __device__ __forceinline__ typename dt_traits<DT>::B shared_identity()
{
	typedef typename dt_traits<DT>::B B;
	constexpr bool F = dt_traits<DT>::is_float, S = dt_traits<DT>::is_signed;
	if constexpr (KOP == K_ADD) {
		return F ? (B) ~(B)0 : (B)0;
	} else if constexpr (F && KOP == K_MIN) {
		return (B)fl<DT>::inf;
	} else if constexpr (F && KOP == K_MAX) {
		return (B)(fl<DT>::sign | fl<DT>::inf);
	} else if constexpr (KOP == K_MIN) {
		return S ? (B)(top_bit<B>() - 1) : (B) ~(B)0;
	} else if constexpr (KOP == K_MAX) {
		return S ? top_bit<B>() : (B)0;
	} else if constexpr (KOP == K_AND) {
		return (B) ~(B)0;
	} else {
		return (B)0;
	}
}

/* Shared-memory address of a generic pointer into shared memory. */
__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* red.shared on one private slot at 32-bit shared address sa. */
#define TA_ASM_RED_SH(OPT, CS)                                                                     \
	asm volatile("red.shared." OPT " [%0], %1;" ::"r"(sa), CS(v) : "memory")

/* Inline-PTX accesses to a private slot at 32-bit shared address sa on W-bit data held in
 * registers of constraint C: a CAS (old, cmp, v in scope) and a volatile load (cur in
 * scope). */
#define TA_ASM_SH_CAS(W, C)                                                                        \
	asm volatile("atom.shared.cas.b" W " %0, [%1], %2, %3;"                                    \
	             : "=" C(old)                                                                  \
	             : "r"(sa), C(cmp), C(v)                                                       \
	             : "memory")
#define TA_ASM_SH_LOAD(W, C)                                                                       \
	asm volatile("ld.volatile.shared.b" W " %0, [%1];" : "=" C(cur) : "r"(sa) : "memory")

/* atom.shared.cas on one private slot of B (16, 32 or 64 bits). */
template <typename B> __device__ __forceinline__ B shared_cas(uint32_t sa, B cmp, B v)
{
	B old;
	if constexpr (sizeof(B) == 2)
		TA_ASM_SH_CAS("16", "h");
	else if constexpr (sizeof(B) == 4)
		TA_ASM_SH_CAS("32", "r");
	else
		TA_ASM_SH_CAS("64", "l");
	return old;
}

/* Volatile load of the private slot at sa. */
template <typename B> __device__ __forceinline__ B shared_load(uint32_t sa)
{
	B cur;
	if constexpr (sizeof(B) == 2)
		TA_ASM_SH_LOAD("16", "h");
	else if constexpr (sizeof(B) == 4)
		TA_ASM_SH_LOAD("32", "r");
	else
		TA_ASM_SH_LOAD("64", "l");
	return cur;
}

/* A CAS loop on the private slot at shared address sa. */
template <typename B, typename Fn>
__device__ __forceinline__ void shared_cas_loop(uint32_t sa, Fn f)
{
	B cur = shared_load<B>(sa);
	for (;;) {
		B nv = f(cur);
		if (nv == cur)
			return;
		B prev = shared_cas<B>(sa, cur, nv);
		if (prev == cur)
			return;
		cur = prev;
	}
}

/* Accumulates operand v (already negated for SUB) into the private slot at shared address
 * sa (always this block's own shared memory: a cluster window is split by slot range over
 * its blocks, see k_cluster). */
template <int DT, int KOP>
__device__ __forceinline__ void apply_shared(uint32_t sa, typename dt_traits<DT>::B v)
{
	typedef typename dt_traits<DT>::B B;
	constexpr bool F = dt_traits<DT>::is_float, S = dt_traits<DT>::is_signed;
	constexpr bool W64 = sizeof(B) == 8;
	if constexpr (F && KOP == K_ADD) {
		/* the first update of a slot stores the operand as an add stores it (canon:
		 * float32 flushed; a NaN canonical for float32/16-bit; float64 NaN operands
		 * never come here, see shared_bypass, the others are stored as they are),
		 * later ones add */
		const B ident = shared_identity<DT, KOP>();
		B first = v;
		if constexpr (DT != TA_DTYPE_F64)
			first = fl<DT>::canon(v);
		shared_cas_loop<B>(
		    sa, [=](B cur) { return cur == ident ? first : fl<DT>::add(cur, v); });
	} else if constexpr (F) {
		constexpr bool MX = KOP == K_MAX;
		shared_cas_loop<B>(sa, [v](B cur) { return fl<DT>::minmax(cur, v, MX); });
	} else if constexpr (KOP == K_ADD) {
		if constexpr (W64)
			TA_ASM_RED_SH("add.u64", "l");
		else
			TA_ASM_RED_SH("add.u32", "r");
	} else if constexpr (KOP == K_MIN) {
		if constexpr (W64 && S)
			TA_ASM_RED_SH("min.s64", "l");
		else if constexpr (W64)
			TA_ASM_RED_SH("min.u64", "l");
		else if constexpr (S)
			TA_ASM_RED_SH("min.s32", "r");
		else
			TA_ASM_RED_SH("min.u32", "r");
	} else if constexpr (KOP == K_MAX) {
		if constexpr (W64 && S)
			TA_ASM_RED_SH("max.s64", "l");
		else if constexpr (W64)
			TA_ASM_RED_SH("max.u64", "l");
		else if constexpr (S)
			TA_ASM_RED_SH("max.s32", "r");
		else
			TA_ASM_RED_SH("max.u32", "r");
	} else if constexpr (KOP == K_AND) {
		if constexpr (W64)
			TA_ASM_RED_SH("and.b64", "l");
		else
			TA_ASM_RED_SH("and.b32", "r");
	} else if constexpr (KOP == K_OR) {
		if constexpr (W64)
			TA_ASM_RED_SH("or.b64", "l");
		else
			TA_ASM_RED_SH("or.b32", "r");
	} else {
		if constexpr (W64)
			TA_ASM_RED_SH("xor.b64", "l");
		else
			TA_ASM_RED_SH("xor.b32", "r");
	}
}

/* The blocks a cluster window is split over: 2^cl_shift for S_CLUSTER, else 1. */
template <int SH> __device__ __forceinline__ int64_t window_split(const kargs &a)
{
	return SH == S_CLUSTER ? (int64_t)1 << a.cl_shift : 1;
}

/* The slots of the window this block holds, [*first, *first + *n): the whole window for
 * S_BLOCK; for S_CLUSTER part r of the window split by range into 2^cl_shift equal parts,
 * r the block's rank in its cluster (the last part may be shorter or empty). */
template <int SH>
__device__ __forceinline__ void own_part(const kargs &a, int64_t *first, int64_t *n)
{
	if constexpr (SH == S_CLUSTER) {
		const int64_t c = window_split<SH>(a);
		const int64_t part = (a.win + c - 1) >> a.cl_shift;
		*first = (int64_t)(blockIdx.x & (uint32_t)(c - 1)) * part;
		const int64_t left = a.win - *first;
		*n = left < 0 ? 0 : left < part ? left : part;
	} else {
		*first = 0;
		*n = a.win;
	}
}

/* True when private slot w (0 <= w < win) is this block's; *sa is then its 32-bit shared
 * address in the block's part at sbase. */
template <typename B, int SH>
__device__ __forceinline__ bool own_slot(const kargs &a, uint32_t sbase, int64_t w, uint32_t *sa)
{
	int64_t first, n;
	own_part<SH>(a, &first, &n);
	const int64_t s = w - first;
	*sa = sbase + (uint32_t)s * (uint32_t)sizeof(B);
	return SH != S_CLUSTER || (uint64_t)s < (uint64_t)n;
}

/* The block index and block count the loops stride with: the blocks of a cluster window
 * all take the same elements (each applies those falling into its part of the window; L2
 * serves the second read of the operands), so a cluster counts as one block. */
template <int SH> __device__ __forceinline__ int64_t loop_block(const kargs &a)
{
	return SH == S_CLUSTER ? (int64_t)(blockIdx.x >> a.cl_shift) : (int64_t)blockIdx.x;
}
template <int SH> __device__ __forceinline__ int64_t loop_blocks(const kargs &a)
{
	return SH == S_CLUSTER ? (int64_t)(gridDim.x >> a.cl_shift) : (int64_t)gridDim.x;
}

/* ---- element addressing ----------------------------------------------------------------*/

/* Unravels k into iteration coordinates e (row-major over p.shape). */
__device__ __forceinline__ void unravel(const ta_plan &p, int64_t k, int64_t *e)
{
#pragma unroll
	for (int a = TA_MAX_RANK - 1; a >= 1; a--) {
		e[a] = 0;
		if (a < p.rank) {
			e[a] = k % p.shape[a];
			k /= p.shape[a];
		}
	}
	e[0] = k;
}

/* Element offset of an operand at coordinates e. */
__device__ __forceinline__ int64_t operand_at(const ta_plan &p, const ta_operand &op,
                                              const int64_t *e)
{
	int64_t off = 0;
#pragma unroll
	for (int a = 0; a < TA_MAX_RANK; a++)
		if (a < p.rank)
			off += e[a] * op.stride[a];
	return off;
}

/* Index operand i at coordinates e, as int64. */
__device__ __forceinline__ int64_t index_at(const ta_plan &p, int i, const int64_t *e)
{
	const ta_operand &op = p.index[i];
	int64_t off = operand_at(p, op, e);
	if (op.dtype == TA_DTYPE_I32)
		return ((const int32_t *)op.data)[off];
	return ((const int64_t *)op.data)[off];
}

/* Mirrors ta_plan_resolve: 1 and *off for an element to apply, 0 when masked off, -1 when
 * out of range. */
__device__ __forceinline__ int resolve(const ta_plan &p, const int64_t *e, int64_t *off)
{
	if (p.mask.data && !((const uint8_t *)p.mask.data)[operand_at(p, p.mask, e)])
		return 0;
	int64_t o = 0;
	switch (p.addr) {
	case TA_ADDR_REGION:
#pragma unroll
		for (int a = 0; a < TA_MAX_RANK; a++)
			if (a < p.tile_rank)
				o += (p.origin[a] + e[a]) * p.tile_stride[a];
		break;
	case TA_ADDR_SCATTER:
#pragma unroll
		for (int a = 0; a < TA_MAX_RANK; a++)
			if (a < p.tile_rank) {
				int64_t c = e[a];
				if (a == p.scatter_dim) {
					c = index_at(p, 0, e);
					if (c < 0 || c >= p.extent[a])
						return -1;
				}
				o += (p.origin[a] + c) * p.tile_stride[a];
			}
		break;
	case TA_ADDR_INDEXED:
#pragma unroll
		for (int a = 0; a < TA_MAX_RANK; a++)
			if (a < p.tile_rank) {
				int64_t c = index_at(p, a, e);
				if (c < 0 || c >= p.extent[a])
					return -1;
				o += (p.origin[a] + c) * p.tile_stride[a];
			}
		break;
	case TA_ADDR_FLAT: {
		int64_t f = index_at(p, 0, e);
		if (f < 0 || f >= p.region_count)
			return -1;
#pragma unroll
		for (int a = TA_MAX_RANK - 1; a >= 0; a--)
			if (a < p.tile_rank) {
				o += (p.origin[a] + f % p.extent[a]) * p.tile_stride[a];
				f /= p.extent[a];
			}
		break;
	}
	default:
		return -1;
	}
	*off = o;
	return 1;
}

/* ---- the loops ---------------------------------------------------------------------------*/

/* Per-thread element counters; applied = visited - masked - skipped - outside. 32 bits:
 * the host launches enough threads that none handles 2^31 elements. */
struct tcount {
	uint32_t visited; /* elements this thread handled */
	uint32_t masked;  /* masked off */
	uint32_t skipped; /* out of range */
	uint32_t outside; /* resolved outside the tile (a plan bug): not applied */
};

/* The output of an element that is masked off or skipped. */
template <int DT, int KOP>
__device__ __forceinline__ typename dt_traits<DT>::B fill_value(const kargs &a,
                                                                typename dt_traits<DT>::B cmp)
{
	typedef typename dt_traits<DT>::B B;
	if constexpr (KOP == K_CAS)
		return cmp;
	else if constexpr (KOP == K_LOAD)
		return (B)a.p.padding_bits;
	else
		return (B)0;
}

/* The operand of an applied element: negated for SUB. */
template <int DT, int KOP>
__device__ __forceinline__ typename dt_traits<DT>::B operand(const kargs &a,
                                                             typename dt_traits<DT>::B v)
{
	if constexpr (KOP == K_ADD)
		return a.negate ? negate<DT>(v) : v;
	else
		return v;
}

/* True when operand v of a shared-space op must go to the tile directly instead of the
 * private copy: a float64 NaN operand of add, whose bits the float64 rule stores (and
 * which could equal the private copy's "untouched" pattern); applying it first changes
 * no result (the tile keeps a NaN whatever is merged after it). */
template <int DT, int KOP>
__device__ __forceinline__ bool shared_bypass(typename dt_traits<DT>::B v)
{
	if constexpr (DT == TA_DTYPE_F64 && KOP == K_ADD)
		return fl<DT>::is_nan(v);
	else
		return false;
}

/* The general loop: any addressing, strided or broadcast operands, one element a step.
 * SH (kspace): accumulate into the private window (at shared address sbase) where the
 * element falls into it (S_CLUSTER: into this block's part of it; the other parts' elements
 * are left to their blocks), else (never chosen so by the host) into the tile (S_CLUSTER:
 * by the cluster's first block only). */
template <int DT, int KOP, int SH>
__device__ __forceinline__ void general_loop(const kargs &a, uint32_t sbase, tcount &tc)
{
	typedef typename dt_traits<DT>::B B;
	const ta_plan &p = a.p;
	const B *vals = (const B *)p.values.data;
	const B *cmps = (const B *)p.compare.data;
	B *out = (B *)p.old_out;
	B *tile = (B *)a.tile;
	const int64_t step = loop_blocks<SH>(a) * blockDim.x;
	for (int64_t k = loop_block<SH>(a) * blockDim.x + threadIdx.x; k < p.count; k += step) {
		int64_t e[TA_MAX_RANK];
		unravel(p, k, e);
		B v = 0, c = 0, old;
		if (KOP != K_LOAD && vals)
			v = vals[operand_at(p, p.values, e)];
		if (KOP == K_CAS && cmps)
			c = cmps[operand_at(p, p.compare, e)];
		int64_t off = 0;
		int r = resolve(p, e, &off);
		tc.visited++;
		if (r == 0) {
			tc.masked++;
			old = fill_value<DT, KOP>(a, c);
		} else if (r < 0) {
			tc.skipped++;
			old = fill_value<DT, KOP>(a, c);
		} else if (off < 0 || off >= a.tile_elems) {
			tc.outside++;
			old = fill_value<DT, KOP>(a, c);
		} else {
			v = operand<DT, KOP>(a, v);
			int64_t w = off - a.lo;
			uint32_t sa = 0;
			bool in_win = SH && (uint64_t)w < (uint64_t)a.win;
			if (in_win && !own_slot<B, SH>(a, sbase, w, &sa)) {
				old = 0; /* another block's part of the cluster window */
			} else if (in_win && !shared_bypass<DT, KOP>(v)) {
				apply_shared<DT, KOP>(sa, v);
				old = 0;
			} else if (!in_win && SH == S_CLUSTER &&
			           (blockIdx.x & (uint32_t)(window_split<SH>(a) - 1))) {
				old = 0; /* the cluster's first block applies it */
			} else {
				old = apply_global_rt<DT, KOP>(tile + off, v, c, a.ss, p.want_old);
			}
		}
		if (p.want_old)
			out[k] = old;
	}
}

/* Applies an element of a fast loop at region element w (tile offset base + w; private
 * slot w when SH, a kspace, is not S_GLOBAL). FIX: sem relaxed and scope gpu inlined, else
 * the out-of-line switch. */
template <int DT, int KOP, int SH, bool FIX>
__device__ __forceinline__ typename dt_traits<DT>::B
fast_apply(const kargs &a, uint32_t sbase, int64_t w, typename dt_traits<DT>::B v,
           typename dt_traits<DT>::B c)
{
	typedef typename dt_traits<DT>::B B;
	v = operand<DT, KOP>(a, v);
	if constexpr (SH) {
		uint32_t sa;
		if (!own_slot<B, SH>(a, sbase, w, &sa)) /* another block's part */
			return 0;
		if (shared_bypass<DT, KOP>(v)) /* the window starts at base */
			apply_global_rt<DT, KOP>((B *)a.tile + a.base + w, v, c, a.ss, false);
		else
			apply_shared<DT, KOP>(sa, v);
		return 0;
	} else if constexpr (FIX) {
		return apply_global<DT, KOP>((B *)a.tile + a.base + w, v, c, SS_FAST, a.p.want_old);
	} else {
		return apply_global_rt<DT, KOP>((B *)a.tile + a.base + w, v, c, a.ss, a.p.want_old);
	}
}

/* Elements of one packed red of the REGION loop's vector path, 0 where (dtype DT, op KOP)
 * has none: sm_90 adds 16 bytes of float32 (red.add.v4.f32) or of float16 / bfloat16
 * (red.add.noftz.v8.f16 / .v8.bf16) in one instruction, each element atomically on its
 * own; there is no packed integer add, nor a float64 one. From the table's columns: float
 * add of 2- or 4-byte elements (none when the kernels are built for an older target). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define TA_VEC_RED 0
#else
#define TA_VEC_RED 1
#endif
template <int DT, int KOP> __host__ __device__ constexpr int vec_lanes()
{
	typedef typename dt_traits<DT>::B B;
	return TA_VEC_RED && KOP == K_ADD && dt_traits<DT>::is_float && sizeof(B) < 8
	           ? 16 / (int)sizeof(B)
	           : 0;
}

/* One packed red of a 16-byte group (S/C: sem/scope strings; X: the group's bits). */
#define TA_ASM_RED_V4F32(S, C, X)                                                                  \
	asm volatile("red." S "." C ".global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(addr),      \
	             "f"(__uint_as_float(X[0])), "f"(__uint_as_float(X[1])),                       \
	             "f"(__uint_as_float(X[2])), "f"(__uint_as_float(X[3]))                        \
	             : "memory")
#define TA_ASM_RED_V8H(S, C, T, X)                                                                 \
	asm volatile("red." S "." C ".global.add.noftz." T                                         \
	             " [%0], {%1, %2, %3, %4, %5, %6, %7, %8};" ::"l"(addr),                       \
	             "h"(X[0]), "h"(X[1]), "h"(X[2]), "h"(X[3]), "h"(X[4]), "h"(X[5]), "h"(X[6]),  \
	             "h"(X[7])                                                                     \
	             : "memory")

/* Adds the vec_lanes<DT, K_ADD>() operands x to the 16-byte aligned group at addr with one
 * packed red, sem/scope ss (relaxed or release): every element stays atomic on its own. */
template <int DT>
__device__ __forceinline__ void red_add_vec(typename dt_traits<DT>::B *addr,
                                            const typename dt_traits<DT>::B *x, int ss)
{
	if constexpr (DT == TA_DTYPE_F32)
		TA_SWITCH_RELREL(ss, TA_ASM_RED_V4F32, x)
	else if constexpr (DT == TA_DTYPE_F16)
		TA_SWITCH_RELREL(ss, TA_ASM_RED_V8H, "v8.f16", x)
	else if constexpr (DT == TA_DTYPE_BF16)
		TA_SWITCH_RELREL(ss, TA_ASM_RED_V8H, "v8.bf16", x)
}

/* The REGION loop's vector path (float add without output, red legal, no element masked
 * off, tile 16-byte aligned): thread t takes 16-byte groups t, t + T, ... of the region
 * (16-byte operand loads) and adds each with one packed red; a group with an inf or NaN
 * operand takes the scalar road (the exact software rule), as do the last count % lanes
 * elements. FIX: sem relaxed and scope gpu inlined. */
template <int DT, int KOP, bool FIX>
__device__ __forceinline__ void fast_region_vec(const kargs &a, tcount &tc)
{
	typedef typename dt_traits<DT>::B B;
	constexpr int W = vec_lanes<DT, KOP>();
	static_assert(W * sizeof(B) == 16, "a packed red covers 16 bytes");
	const ta_plan &p = a.p;
	const B *vals = (const B *)p.values.data;
	B *dst = (B *)a.tile + a.base;
	const int64_t n = p.count, groups = n / W;
	const int64_t T = (int64_t)gridDim.x * blockDim.x;
	const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int ss = FIX ? SS_FAST : a.ss;
	const B vs = a.vals_vec ? (B)0 : vals[0];
	for (int64_t g = tid; g < groups; g += T) {
		B x[W];
		if (a.vals_vec) {
			uint4 q = *(const uint4 *)(vals + g * W);
			memcpy(x, &q, 16);
		} else {
#pragma unroll
			for (int j = 0; j < W; j++)
				x[j] = vs;
		}
		bool finite = true;
#pragma unroll
		for (int j = 0; j < W; j++) {
			x[j] = operand<DT, KOP>(a, x[j]);
			finite = finite && fl<DT>::finite(x[j]);
		}
		tc.visited += W;
		if (finite) {
			red_add_vec<DT>(dst + g * W, x, ss);
		} else {
#pragma unroll 1
			for (int j = 0; j < W; j++) {
				if constexpr (FIX)
					apply_global<DT, KOP>(dst + g * W + j, x[j], (B)0, SS_FAST,
					                      false);
				else
					apply_global_rt<DT, KOP>(dst + g * W + j, x[j], (B)0, ss,
					                         false);
			}
		}
	}
	for (int64_t k = groups * W + tid; k < n; k += T) {
		tc.visited++;
		fast_apply<DT, KOP, S_GLOBAL, FIX>(a, 0, k, a.vals_vec ? vals[k] : vs, (B)0);
	}
}

/* Elements each thread takes per step of the REGION fast loop. */
template <typename B> __host__ __device__ constexpr int region_per_thread()
{
	return sizeof(B) == 8 ? 4 : 8;
}

/* The REGION fast loop: a contiguous region (element k at tile offset base + k, private
 * slot k), operands contiguous or scalar. Element k of a step goes to thread k mod T (T =
 * threads in the grid), so that a warp's loads and atomics cover consecutive addresses;
 * each thread loads all its elements of a step before applying any. */
template <int DT, int KOP, int SH, bool FIX>
__device__ __forceinline__ void fast_region(const kargs &a, uint32_t sbase, tcount &tc)
{
	typedef typename dt_traits<DT>::B B;
	constexpr int R = region_per_thread<B>();
	const ta_plan &p = a.p;
	const B *vals = (const B *)p.values.data;
	const B *cmps = (const B *)p.compare.data;
	const uint8_t *mask = (const uint8_t *)p.mask.data;
	B *out = (B *)p.old_out;
	const bool want = p.want_old;
	const int64_t n = p.count;
	const int64_t T = loop_blocks<SH>(a) * blockDim.x;
	const B vs = (KOP != K_LOAD && !a.vals_vec) ? vals[0] : (B)0;
	const B cs = (KOP == K_CAS && !a.cmp_vec) ? cmps[0] : (B)0;
	const bool mvec = mask && a.mask_vec;
	const uint8_t ms = (mask && !a.mask_vec) ? mask[0] : (uint8_t)1;
	if constexpr (SH == S_GLOBAL && vec_lanes<DT, KOP>() > 0) {
		/* no output, red legal, every element applied, the tile 16-byte aligned */
		if (!want && ss_red_ok(a.ss) && !mvec && ms &&
		    ((uintptr_t)((B *)a.tile + a.base) & 15u) == 0) {
			fast_region_vec<DT, KOP, FIX>(a, tc);
			return;
		}
	}
	for (int64_t k0 = loop_block<SH>(a) * blockDim.x + threadIdx.x; k0 < n;
	     k0 += (int64_t)R * T) {
		B v[R], c[R];
		uint32_t mw[R / 4];
#pragma unroll
		for (int q = 0; q < R / 4; q++)
			mw[q] = 0;
		int64_t k = k0;
#pragma unroll
		for (int q = 0; q < R; q++, k += T) {
			bool in = k < n;
			v[q] = (KOP != K_LOAD && a.vals_vec && in) ? vals[k] : vs;
			c[q] = (KOP == K_CAS && a.cmp_vec && in) ? cmps[k] : cs;
			uint32_t mb = mvec ? (in ? mask[k] : 0) : ms;
			mw[q / 4] |= (uint32_t)(mb != 0) << (8 * (q % 4));
		}
		k = k0;
#pragma unroll
		for (int q = 0; q < R; q++, k += T) {
			if (k >= n)
				break;
			B o;
			tc.visited++;
			if (!((mw[q / 4] >> (8 * (q % 4))) & 1u)) {
				tc.masked++;
				o = fill_value<DT, KOP>(a, c[q]);
			} else {
				o = fast_apply<DT, KOP, SH, FIX>(a, sbase, k, v[q], c[q]);
			}
			if (want)
				out[k] = o;
		}
	}
}

/* 4 consecutive elements (16-byte aligned base, k a multiple of 4). */
__device__ __forceinline__ void load4(const unsigned short *p, int64_t k, unsigned short *v)
{
	uint2 x = *(const uint2 *)(p + k);
	v[0] = (unsigned short)x.x;
	v[1] = (unsigned short)(x.x >> 16);
	v[2] = (unsigned short)x.y;
	v[3] = (unsigned short)(x.y >> 16);
}
__device__ __forceinline__ void load4(const uint32_t *p, int64_t k, uint32_t *v)
{
	uint4 x = *(const uint4 *)(p + k);
	v[0] = x.x;
	v[1] = x.y;
	v[2] = x.z;
	v[3] = x.w;
}
__device__ __forceinline__ void load4(const uint64_t *p, int64_t k, uint64_t *v)
{
	ulonglong2 x = *(const ulonglong2 *)(p + k);
	ulonglong2 y = *(const ulonglong2 *)(p + k + 2);
	v[0] = x.x;
	v[1] = x.y;
	v[2] = y.x;
	v[3] = y.y;
}
/* Stores 4 consecutive elements (aligned as load4). */
__device__ __forceinline__ void store4(unsigned short *p, int64_t k, const unsigned short *v)
{
	*(uint2 *)(p + k) = make_uint2((uint32_t)v[0] | ((uint32_t)v[1] << 16),
	                               (uint32_t)v[2] | ((uint32_t)v[3] << 16));
}
__device__ __forceinline__ void store4(uint32_t *p, int64_t k, const uint32_t *v)
{
	*(uint4 *)(p + k) = make_uint4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(uint64_t *p, int64_t k, const uint64_t *v)
{
	*(ulonglong2 *)(p + k) = make_ulonglong2(v[0], v[1]);
	*(ulonglong2 *)(p + k + 2) = make_ulonglong2(v[2], v[3]);
}

/* A flat offset of the FLAT fast loops as 32 bits: the offset when it lies in [0, n)
 * (the host takes these loops only for regions of fewer than 2^31 elements), else -1. */
__device__ __forceinline__ int32_t flat32(int64_t f, int64_t n)
{
	return (uint64_t)f < (uint64_t)n ? (int32_t)f : -1;
}
/* The same for an int32 offset: one 32-bit unsigned compare (a negative one is huge). */
__device__ __forceinline__ int32_t flat32(int32_t f, uint32_t n)
{
	return (uint32_t)f < n ? f : -1;
}

/* Loads 4 consecutive flat offsets (int64 when I64, else int32) as flat32 values. The
 * offsets are read-only for the kernel's lifetime (an operand is never the tile), so they
 * come through the non-coherent read-only path (ld.global.nc). */
template <bool I64>
__device__ __forceinline__ void load4_flat(const ta_operand &op, int64_t k, int64_t n, int32_t *v)
{
	if constexpr (!I64) {
		int4 x = __ldg((const int4 *)((const int32_t *)op.data + k));
		v[0] = flat32(x.x, (uint32_t)n);
		v[1] = flat32(x.y, (uint32_t)n);
		v[2] = flat32(x.z, (uint32_t)n);
		v[3] = flat32(x.w, (uint32_t)n);
	} else {
		const int64_t *q = (const int64_t *)op.data + k;
		longlong2 x = __ldg((const longlong2 *)q), y = __ldg((const longlong2 *)(q + 2));
		v[0] = flat32((int64_t)x.x, n);
		v[1] = flat32((int64_t)x.y, n);
		v[2] = flat32((int64_t)y.x, n);
		v[3] = flat32((int64_t)y.y, n);
	}
}

/* One flat offset of the FLAT fast loops' tails, as flat32. */
template <bool I64>
__device__ __forceinline__ int32_t load1_flat(const ta_operand &op, int64_t k, int64_t n)
{
	if constexpr (!I64)
		return flat32(__ldg((const int32_t *)op.data + k), (uint32_t)n);
	else
		return flat32((int64_t)__ldg((const long long *)op.data + k), n);
}

/* Chunks of 4 elements a thread of the FLAT fast loop loads before applying any (SH: the
 * kspace). */
template <int SH> __host__ __device__ constexpr int flat_unroll()
{
	return SH ? 2 : 4;
}

/* Applies one element of the FLAT fast loop (f: flat32 offset, m: mask byte). */
template <int DT, int KOP, int SH, bool FIX>
__device__ __forceinline__ typename dt_traits<DT>::B
flat_elem(const kargs &a, uint32_t sbase, typename dt_traits<DT>::B v, typename dt_traits<DT>::B c,
          uint32_t m, int32_t f, tcount &tc)
{
	if (!m) {
		tc.masked++;
		return fill_value<DT, KOP>(a, c);
	}
	if (f < 0) {
		tc.skipped++;
		return fill_value<DT, KOP>(a, c);
	}
	return fast_apply<DT, KOP, SH, FIX>(a, sbase, f, v, c);
}

/* Chunks of 4 offsets a thread of fast_flat_count loads before applying any: 2 in the
 * block-window kernel (32 registers a thread), 4 in the cluster kernel (64). */
template <int SH> __host__ __device__ constexpr int count_unroll()
{
	return SH == S_BLOCK ? 2 : 4;
}

/* The FLAT loop of a private window (SH: S_BLOCK or S_CLUSTER) when every element applies
 * the same operand (already negated for SUB): scalar values, no mask (or a true scalar
 * one), no output. A histogram: per offset one compare and one shared-memory atomic; only
 * the skipped elements are counted (see flush_skipped). ONE:
 * integer add of the constant 1 (ptxas turns red.shared.add of a known 1 into a
 * warp-aggregated increment, which keeps repeated keys cheap), else v. */
template <int DT, int KOP, int SH, bool I64, bool ONE>
__device__ __forceinline__ void fast_flat_count(const kargs &a, uint32_t sbase,
                                                typename dt_traits<DT>::B v_rt, tcount &tc)
{
	typedef typename dt_traits<DT>::B B;
	constexpr int U = count_unroll<SH>();
	const B v = ONE ? (B)1 : v_rt;
	const ta_plan &p = a.p;
	const int64_t n = p.count, nch = n >> 2;
	const int64_t T = loop_blocks<SH>(a) * blockDim.x;
	const int64_t tid = loop_block<SH>(a) * blockDim.x + threadIdx.x;
	/* this block's slots: [first, first + own) of the window, which is the region (fewer
	 * than 2^31 slots) */
	int64_t first, own;
	own_part<SH>(a, &first, &own);
	const uint32_t first32 = (uint32_t)first, own32 = (uint32_t)own;
	const uint32_t rc32 = (uint32_t)p.region_count;
	uint32_t skipped = 0;
	/* offset x (an int32 offset, or the flat32 of an int64 one): x - first lands in this
	 * block's part (one unsigned compare: a negative x wraps past every part), or x is
	 * another block's, or out of range (skipped) */
	auto apply1 = [&](int32_t x) {
		const uint32_t s = (uint32_t)x - first32;
		if (s < own32)
			apply_shared<DT, KOP>(sbase + s * (uint32_t)sizeof(B), v);
		else if ((uint32_t)x >= rc32)
			skipped++;
	};
	for (int64_t c0 = tid; c0 < nch; c0 += (int64_t)U * T) {
		int32_t f[U][4];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const int64_t k = (c0 + u * T) << 2;
			if (c0 + u * T >= nch)
				break;
			if constexpr (I64) {
				load4_flat<I64>(p.index[0], k, p.region_count, f[u]);
			} else {
				int4 x =
				    __ldg((const int4 *)((const int32_t *)p.index[0].data + k));
				f[u][0] = x.x;
				f[u][1] = x.y;
				f[u][2] = x.z;
				f[u][3] = x.w;
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			if (c0 + u * T >= nch)
				break;
#pragma unroll
			for (int j = 0; j < 4; j++)
				apply1(f[u][j]);
		}
	}
	for (int64_t k = (nch << 2) + tid; k < n; k += T)
		apply1(load1_flat<I64>(p.index[0], k, p.region_count));
	tc.skipped += skipped;
}

/* The FLAT fast loop: flat offsets (int64 when I64, else int32) into a contiguous region
 * (tile offset base + f, private slot f), offsets and operands contiguous (16-byte
 * aligned) or scalar. A thread takes chunks of 4 consecutive elements with 16-byte loads.
 * Returns true when it ran fast_flat_count (tc then holds only the skipped elements). */
template <int DT, int KOP, int SH, bool FIX, bool I64>
__device__ __forceinline__ bool fast_flat(const kargs &a, uint32_t sbase, tcount &tc)
{
	typedef typename dt_traits<DT>::B B;
	constexpr int U = flat_unroll<SH>();
	const ta_plan &p = a.p;
	const B *vals = (const B *)p.values.data;
	const B *cmps = (const B *)p.compare.data;
	const uint8_t *mask = (const uint8_t *)p.mask.data;
	B *out = (B *)p.old_out;
	const bool want = p.want_old;
	const int64_t n = p.count, nch = n >> 2, rc = p.region_count;
	const int64_t T = loop_blocks<SH>(a) * blockDim.x;
	const int64_t tid = loop_block<SH>(a) * blockDim.x + threadIdx.x;
	const B vs = (KOP != K_LOAD && !a.vals_vec) ? vals[0] : (B)0;
	const B cs = (KOP == K_CAS && !a.cmp_vec) ? cmps[0] : (B)0;
	/* a scalar or absent mask as a word of 4 mask bytes */
	const uint32_t ms = (mask && !a.mask_vec) ? (mask[0] ? 0x01010101u : 0u) : 0x01010101u;
	const bool mvec = mask && a.mask_vec;
	if constexpr (SH != S_GLOBAL && KOP != K_LOAD && KOP != K_CAS) {
		/* the same operand for every element, all applied, no output: count */
		if (!want && !mvec && ms && !a.vals_vec) {
			const B v = operand<DT, KOP>(a, vs);
			if (!dt_traits<DT>::is_float && KOP == K_ADD && v == (B)1) {
				fast_flat_count<DT, KOP, SH, I64, true>(a, sbase, v, tc);
				return true;
			}
			if (!shared_bypass<DT, KOP>(v)) {
				fast_flat_count<DT, KOP, SH, I64, false>(a, sbase, v, tc);
				return true;
			}
		}
	}
	for (int64_t c0 = tid; c0 < nch; c0 += (int64_t)U * T) {
		B v[U][4], c[U][4];
		uint32_t m[U];
		int32_t f[U][4];
#pragma unroll
		for (int u = 0; u < U; u++) {
			int64_t ch = c0 + u * T;
			int64_t k0 = ch << 2;
#pragma unroll
			for (int j = 0; j < 4; j++) {
				v[u][j] = vs;
				c[u][j] = cs;
				f[u][j] = -1;
			}
			m[u] = ms;
			if (ch >= nch)
				continue;
			if (KOP != K_LOAD && a.vals_vec)
				load4(vals, k0, v[u]);
			if (KOP == K_CAS && a.cmp_vec)
				load4(cmps, k0, c[u]);
			if (mvec)
				m[u] = *(const uint32_t *)(mask + k0);
			load4_flat<I64>(p.index[0], k0, rc, f[u]);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			int64_t ch = c0 + u * T;
			if (ch >= nch)
				continue;
			int64_t k0 = ch << 2;
			tc.visited += 4;
			B o[4];
#pragma unroll
			for (int j = 0; j < 4; j++)
				o[j] = flat_elem<DT, KOP, SH, FIX>(a, sbase, v[u][j], c[u][j],
				                                   (m[u] >> (8 * j)) & 0xffu,
				                                   f[u][j], tc);
			if (want)
				store4(out, k0, o);
		}
	}
	/* the last n % 4 elements */
	for (int64_t k = (nch << 2) + tid; k < n; k += T) {
		B v = (KOP != K_LOAD && a.vals_vec) ? vals[k] : vs;
		B c = (KOP == K_CAS && a.cmp_vec) ? cmps[k] : cs;
		uint32_t m = mvec ? mask[k] : (ms & 0xffu);
		tc.visited++;
		B o = flat_elem<DT, KOP, SH, FIX>(a, sbase, v, c, m,
		                                  load1_flat<I64>(p.index[0], k, rc), tc);
		if (want)
			out[k] = o;
	}
	return false;
}

/* Adds the block's counters to the device counters: one atomic per warp with any count. */
__device__ __forceinline__ void flush_counts(const kargs &a, tcount tc)
{
	unsigned long long applied = tc.visited - tc.masked - tc.skipped - tc.outside;
	unsigned long long skipped = tc.skipped, outside = tc.outside;
	/* (64-bit sums across the warp) */
#pragma unroll
	for (int d = 16; d > 0; d >>= 1) {
		skipped += __shfl_down_sync(0xffffffffu, skipped, d);
		applied += __shfl_down_sync(0xffffffffu, applied, d);
		outside += __shfl_down_sync(0xffffffffu, outside, d);
	}
	if ((threadIdx.x & 31) == 0) {
		if (skipped)
			atomicAdd(&a.counters[0], skipped);
		if (applied)
			atomicAdd(&a.counters[1], applied);
		if (outside)
			atomicAdd(&a.counters[2], outside);
	}
}

/* Adds the counters of a loop that applied every element but the skipped ones
 * (fast_flat_count; skipped: this thread's): the grid's first thread adds the plan's
 * count to applied, and each warp with skipped elements moves them from applied to
 * skipped (the counters are read after the kernel). One atomic per grid instead of one per
 * warp on the same address. */
__device__ __forceinline__ void flush_skipped(const kargs &a, uint32_t skipped)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		atomicAdd(&a.counters[1], (unsigned long long)a.p.count);
	if (!__any_sync(0xffffffffu, skipped != 0))
		return;
	unsigned long long s = skipped;
#pragma unroll
	for (int d = 16; d > 0; d >>= 1)
		s += __shfl_down_sync(0xffffffffu, s, d);
	if ((threadIdx.x & 31) == 0) {
		atomicAdd(&a.counters[0], s);
		atomicAdd(&a.counters[1], 0ull - s);
	}
}

/* True when the REGION loop applies every element (no mask, or a true scalar one): it
 * never skips, so its counters are the plan's count (flush_skipped with nothing skipped). */
__device__ __forceinline__ bool region_all_applied(const kargs &a)
{
	const uint8_t *mask = (const uint8_t *)a.p.mask.data;
	return !mask || (!a.mask_vec && mask[0]);
}

/* Threads per block of every kernel. */
#define TA_BLOCK 256

/* Kernel modes: the loop a kernel runs. */
enum kmode {
	M_GENERAL = 0, /* general_loop */
	M_REGION = 1,  /* fast_region */
	M_FLAT32 = 2,  /* fast_flat, int32 offsets */
	M_FLAT64 = 3,  /* fast_flat, int64 offsets */
	M_COUNT32 = 4, /* block_count, int32 offsets (k_shared of an integer dtype only) */
	M_COUNT64 = 5  /* block_count, int64 offsets (k_shared of an integer dtype only) */
};

/* True for the counting modes (block_count). */
__host__ __device__ constexpr bool count_mode(int mode)
{
	return mode == M_COUNT32 || mode == M_COUNT64;
}

/* Threads per block of the kernel of space SH (kspace) running loop MODE (kmode): 1024 for
 * the block-window counting loop over int32 offsets and 512 for the FLAT loop over them
 * (histograms; measured on an H200 with 2^26 keys into 256 bins: FLAT 950 G keys/s against
 * 894 with blocks of 256; a hand-written counting kernel 1047 with 1024 x 2 blocks an SM
 * against 1022 with 512 x 4: half the blocks, half the same-address atomics of the merge),
 * else TA_BLOCK. The host launches with the same function (block_count strides by it). */
__host__ __device__ constexpr int block_threads(int sh, int mode)
{
	return sh != S_BLOCK       ? TA_BLOCK
	       : mode == M_COUNT32 ? 1024
	       : mode == M_FLAT32  ? 512
	                           : TA_BLOCK;
}

/* Resident blocks per SM the register allocation of a kernel must allow: 2048 threads an
 * SM (32 registers a thread) for the block-window FLAT and counting loops over int32
 * offsets (histograms: occupancy hides the latency of the key loads), else 4 blocks (64
 * registers). */
template <int SH, int MODE> __host__ __device__ constexpr int min_blocks()
{
	return SH == S_BLOCK && (MODE == M_FLAT32 || MODE == M_COUNT32)
	           ? 2048 / block_threads(SH, MODE)
	           : 4;
}

/* Global-space kernel of (dtype DT, op KOP) running loop MODE: every element updates the
 * tile directly. The fast loops get sem relaxed + scope gpu compiled in; other pairs go
 * through the out-of-line switch. */
template <int DT, int KOP, int MODE>
__global__ void __launch_bounds__(TA_BLOCK, (min_blocks<S_GLOBAL, MODE>())) k_global(const kargs a)
{
	tcount tc = {0, 0, 0, 0};
	if constexpr (MODE == M_REGION) {
		if (a.ss == SS_FAST)
			fast_region<DT, KOP, S_GLOBAL, true>(a, 0, tc);
		else
			fast_region<DT, KOP, S_GLOBAL, false>(a, 0, tc);
		if (region_all_applied(a)) {
			flush_skipped(a, 0);
			return;
		}
	} else if constexpr (MODE == M_FLAT32 || MODE == M_FLAT64) {
		if (a.ss == SS_FAST)
			fast_flat<DT, KOP, S_GLOBAL, true, MODE == M_FLAT64>(a, 0, tc);
		else
			fast_flat<DT, KOP, S_GLOBAL, false, MODE == M_FLAT64>(a, 0, tc);
	} else {
		general_loop<DT, KOP, S_GLOBAL>(a, 0, tc);
	}
	flush_counts(a, tc);
}

/* Chunks of 4 keys a thread of block_count loads before applying any. */
#define TA_COUNT_UNROLL 2

/* Loads NC chunks of 4 keys at chunks c0, c0 + T, ... into f: an int32 key as it is
 * (block_count's compare skips a negative one), an int64 one through flat32 (16-byte
 * ld.global.nc). */
template <bool I64, int NC>
__device__ __forceinline__ void count_load(const kargs &a, int64_t c0, int64_t T,
                                           int32_t (&f)[NC][4])
{
#pragma unroll
	for (int u = 0; u < NC; u++) {
		const int64_t k = (c0 + u * T) << 2;
		if constexpr (I64) {
			load4_flat<I64>(a.p.index[0], k, a.p.region_count, f[u]);
		} else {
			const int4 x =
			    __ldg((const int4 *)((const int32_t *)a.p.index[0].data + k));
			f[u][0] = x.x;
			f[u][1] = x.y;
			f[u][2] = x.z;
			f[u][3] = x.w;
		}
	}
}

/* Counting loop of block_count over the keys of this thread (int64 offsets when I64;
 * TH threads a block; c0 its first chunk, T threads in the grid): full groups of
 * TA_COUNT_UNROLL chunks of 4 keys, the first group already in f (loaded by the caller
 * before the window's barrier), each group loaded before any of its keys is applied,
 * then the last chunks one by one and the last n % 4 keys; per key one unsigned compare
 * against the window (= the region: a negative or too large key is skipped) and one
 * red.shared. ONE: the operand is the constant 1 (integer add: ptxas aggregates
 * red.shared.add of a known 1 over the warp, which keeps repeated keys cheap) and the
 * skipped keys are not counted here (block_count derives them from the window's sum),
 * else operand v and the skipped keys are counted. Returns the skipped keys counted. */
template <int DT, int KOP, bool I64, bool ONE>
__device__ __forceinline__ uint32_t count_keys(const kargs &a, uint32_t sbase,
                                               typename dt_traits<DT>::B v_rt, int64_t c0,
                                               int64_t T, int32_t (&f)[TA_COUNT_UNROLL][4])
{
	typedef typename dt_traits<DT>::B B;
	constexpr int U = TA_COUNT_UNROLL;
	const B v = ONE ? (B)1 : v_rt;
	const int64_t nch = a.p.count >> 2;
	const uint32_t w32 = (uint32_t)a.win;
	uint32_t skipped = 0;
	auto apply1 = [&](int32_t x) {
		if ((uint32_t)x < w32)
			apply_shared<DT, KOP>(sbase + (uint32_t)x * (uint32_t)sizeof(B), v);
		else if (!ONE)
			skipped++;
	};
	while (c0 + (U - 1) * T < nch) {
#pragma unroll
		for (int u = 0; u < U; u++)
#pragma unroll
			for (int j = 0; j < 4; j++)
				apply1(f[u][j]);
		c0 += U * T;
		if (c0 + (U - 1) * T < nch)
			count_load<I64, U>(a, c0, T, f);
	}
	for (; c0 < nch; c0 += T) {
		int32_t g[1][4];
		count_load<I64, 1>(a, c0, T, g);
#pragma unroll
		for (int j = 0; j < 4; j++)
			apply1(g[0][j]);
	}
	return skipped;
}

/* Keys of the plan that block b of a count-mode grid (TH threads a block, T threads in
 * all) visits: its threads' chunks of 4 (chunk c goes to thread c mod T) and, for block 0,
 * the last n % 4 keys. */
__device__ __forceinline__ uint64_t count_block_keys(int64_t n, int64_t T, int TH, int64_t b)
{
	const int64_t nch = n >> 2, rem = nch % T, lo = b * TH;
	int64_t part = rem - lo;
	part = part < 0 ? 0 : part > TH ? TH : part;
	return (uint64_t)(4 * ((nch / T) * TH + part)) + (b == 0 ? (uint64_t)(n & 3) : 0);
}

/* The body of k_shared in the counting modes (M_COUNT32 / M_COUNT64; integer dtypes; TH
 * threads a block): a histogram-like plan (FLAT offsets into a contiguous region that is
 * the block's window, a scalar operand, no mask or a scalar one, no output), compiled
 * apart from the other loops so that its registers and code are its own. Before the
 * window's initialisation and barrier it issues the loads of the operand, of a scalar mask
 * and of its first keys, so that their latency overlaps them; a false scalar mask applies
 * nothing (every element masked: no counter changes). The merge compiles sem relaxed +
 * scope gpu in (other pairs: the out-of-line switch). Counters: block 0 adds the plan's
 * count to applied, and each block that skipped keys moves them from applied to skipped
 * with one atomic pair; with the operand 1 a block's applied keys are the sum of its window
 * (exact: the host gives no block 2^31 keys or more), its skipped keys the rest of those
 * it visited, so the key loop counts nothing. */
template <int DT, int KOP, int MODE, int TH = block_threads(S_BLOCK, MODE)>
__device__ __forceinline__ void block_count(const kargs &a, unsigned char *smem)
{
	typedef typename dt_traits<DT>::B B;
	static_assert(!dt_traits<DT>::is_float, "the counting modes serve integer dtypes");
	constexpr bool I64 = MODE == M_COUNT64;
	constexpr int U = TA_COUNT_UNROLL;
	__shared__ uint32_t sums[2]; /* the block's applied (operand 1) and skipped keys */
	const ta_plan &p = a.p;
	const B vs = __ldg((const B *)p.values.data);
	const unsigned char *mask = (const unsigned char *)p.mask.data;
	const bool on = !mask || __ldg(mask) != 0;
	const int64_t T = (int64_t)gridDim.x * TH, nch = p.count >> 2;
	const int64_t c0 = (int64_t)blockIdx.x * TH + threadIdx.x;
	int32_t f[U][4];
	if (on && c0 + (U - 1) * T < nch)
		count_load<I64, U>(a, c0, T, f);
	B *sh = (B *)smem;
	const uint32_t sbase = smem_addr(smem);
	const B ident = shared_identity<DT, KOP>();
	const int win = (int)a.win; /* a block's window: fewer than 2^16 slots */
	for (int i = threadIdx.x; i < win; i += TH)
		sh[i] = ident;
	if (threadIdx.x < 2)
		sums[threadIdx.x] = 0;
	const B v = operand<DT, KOP>(a, vs);
	const bool one = KOP == K_ADD && v == (B)1;
	__syncthreads();
	uint32_t skipped = 0;
	if (on) {
		if (one)
			count_keys<DT, KOP, I64, true>(a, sbase, v, c0, T, f);
		else
			skipped = count_keys<DT, KOP, I64, false>(a, sbase, v, c0, T, f);
		/* the last n % 4 keys */
		for (int64_t k = (nch << 2) + c0; k < p.count; k += T) {
			const int32_t x = load1_flat<I64>(p.index[0], k, p.region_count);
			if ((uint32_t)x < (uint32_t)win)
				apply_shared<DT, KOP>(sbase + (uint32_t)x * (uint32_t)sizeof(B), v);
			else
				skipped += !one;
		}
	}
	__syncthreads();
	B *tile = (B *)a.tile + a.lo;
	const bool fix = a.ss == SS_FAST;
	uint32_t applied = 0;
	for (int i = threadIdx.x; i < win; i += TH) {
		const B s = sh[i];
		if (s == ident)
			continue;
		applied += (uint32_t)s;
		if (fix)
			apply_global<DT, KOP>(tile + i, s, (B)0, SS_FAST, false);
		else
			apply_global_rt<DT, KOP>(tile + i, s, (B)0, a.ss, false);
	}
	if (!on)
		return;
	/* the block's skipped keys: counted (any operand) or derived (operand 1) */
	uint32_t x = one ? applied : skipped;
#pragma unroll
	for (int d = 16; d > 0; d >>= 1)
		x += __shfl_down_sync(0xffffffffu, x, d);
	if ((threadIdx.x & 31) == 0 && x)
		atomicAdd(&sums[one ? 0 : 1], x);
	__syncthreads();
	if (threadIdx.x == 0) {
		const uint64_t sk =
		    one ? count_block_keys(p.count, T, TH, blockIdx.x) - sums[0] : sums[1];
		if (blockIdx.x == 0)
			atomicAdd(&a.counters[1], (unsigned long long)p.count);
		if (sk) {
			atomicAdd(&a.counters[0], (unsigned long long)sk);
			atomicAdd(&a.counters[1], 0ull - (unsigned long long)sk);
		}
	}
}

/* The body of k_shared in the other modes: accumulate into a block-private copy of the
 * window [lo, lo + win) in dynamic shared memory (smem), then merge every changed slot
 * into the tile with one global op (sem/scope of the plan, never an output). For the fast
 * loops the window is the region (lo = base). */
template <int DT, int KOP, int MODE>
__device__ __forceinline__ void block_loops(const kargs &a, unsigned char *smem)
{
	typedef typename dt_traits<DT>::B B;
	B *sh = (B *)smem;
	const uint32_t sbase = smem_addr(smem);
	const B ident = shared_identity<DT, KOP>();
	for (int64_t i = threadIdx.x; i < a.win; i += blockDim.x)
		sh[i] = ident;
	__syncthreads();
	tcount tc = {0, 0, 0, 0};
	bool counted = false; /* fast_flat_count ran: tc holds the skipped elements only */
	if constexpr (MODE == M_REGION)
		fast_region<DT, KOP, S_BLOCK, false>(a, sbase, tc);
	else if constexpr (MODE == M_FLAT32 || MODE == M_FLAT64)
		counted = fast_flat<DT, KOP, S_BLOCK, false, MODE == M_FLAT64>(a, sbase, tc);
	else
		general_loop<DT, KOP, S_BLOCK>(a, sbase, tc);
	__syncthreads();
	B *tile = (B *)a.tile + a.lo;
	for (int64_t i = threadIdx.x; i < a.win; i += blockDim.x) {
		B s = sh[i];
		if (s != ident)
			apply_global_rt<DT, KOP>(tile + i, s, (B)0, a.ss, false);
	}
	if (counted)
		flush_skipped(a, tc.skipped);
	else
		flush_counts(a, tc);
}

/* Shared-space kernel of (dtype DT, op KOP) running loop MODE: a block-private window in
 * dynamic shared memory (block_count in the counting modes, else block_loops). */
template <int DT, int KOP, int MODE>
__global__ void __launch_bounds__(block_threads(S_BLOCK, MODE), (min_blocks<S_BLOCK, MODE>()))
    k_shared(const kargs a)
{
	extern __shared__ __align__(16) unsigned char ta_smem[];
	if constexpr (count_mode(MODE))
		block_count<DT, KOP, MODE>(a, ta_smem);
	else
		block_loops<DT, KOP, MODE>(a, ta_smem);
}

/* Threads per block of the cluster kernels: a block holds a large part of the window, so
 * one block per SM brings the SM's whole thread budget. */
#define TA_CLUSTER_BLOCK 1024

/* Cluster kernel of (dtype DT, op KOP) running loop MODE (not REGION): like k_shared, for
 * a window [lo, lo + win) too large for one block, split by slot range over the
 * 2^cl_shift blocks of a thread-block cluster (block r of a cluster holds part r, see
 * own_part). Every block of a cluster runs over the same elements (a cluster strides as
 * one block, see loop_block) and applies those that fall into its own part with
 * shared-memory atomics on its own shared memory; the host launches the blocks as a
 * cluster so that they run at the same time and the second read of the operands hits L2.
 * Measured on an H200, 2^26 keys into 65536 int32 bins: 505 G keys/s, where spreading the
 * window slot by slot over the cluster's distributed shared memory reached 160. Each block
 * merges its changed slots into the tile; the cluster's first block alone reports the
 * element counts (every block has seen every element of the cluster). */
template <int DT, int KOP, int MODE>
__global__ void __launch_bounds__(TA_CLUSTER_BLOCK, 1) k_cluster(const kargs a)
{
	static_assert(MODE != M_REGION, "no cluster kernel for the REGION loop");
	typedef typename dt_traits<DT>::B B;
	extern __shared__ __align__(16) unsigned char ta_smem[];
	B *sh = (B *)ta_smem;
	const uint32_t sbase = smem_addr(ta_smem);
	const B ident = shared_identity<DT, KOP>();
	int64_t first, part;
	own_part<S_CLUSTER>(a, &first, &part);
	for (int64_t i = threadIdx.x; i < part; i += blockDim.x)
		sh[i] = ident;
	__syncthreads();
	tcount tc = {0, 0, 0, 0};
	bool counted = false; /* fast_flat_count ran: tc holds the skipped elements only */
	if constexpr (MODE == M_FLAT32 || MODE == M_FLAT64)
		counted = fast_flat<DT, KOP, S_CLUSTER, false, MODE == M_FLAT64>(a, sbase, tc);
	else
		general_loop<DT, KOP, S_CLUSTER>(a, sbase, tc);
	__syncthreads();
	B *tile = (B *)a.tile + a.lo + first;
	for (int64_t i = threadIdx.x; i < part; i += blockDim.x) {
		B s = sh[i];
		if (s != ident)
			apply_global_rt<DT, KOP>(tile + i, s, (B)0, a.ss, false);
	}
	if (blockIdx.x & (uint32_t)(window_split<S_CLUSTER>(a) - 1))
		tc = tcount{0, 0, 0, 0}; /* counted by the cluster's first block */
	if (counted)
		flush_skipped(a, tc.skipped);
	else
		flush_counts(a, tc);
}

/* ---- TMA bulk reductions (sm_90): element-wise integer ops over a contiguous region ---- */

/* True when (dtype DT, kernel op KOP) has a bulk-reduction kernel: a TA_BULK row of the
 * table (ta_op_bulk_ok on the host), an integer dtype of 4 or 8 bytes. */
template <int DT, int KOP> __host__ __device__ constexpr bool bulk_ok()
{
	bool row = false;
#define TA_BULK(id) row = row || KOP == K_##id;
#include "ta_ops.def"
#undef TA_BULK
	return row && !dt_traits<DT>::is_float && DT != TA_DTYPE_BOOL &&
	       (sizeof(typename dt_traits<DT>::B) == 4 || sizeof(typename dt_traits<DT>::B) == 8);
}

/* Bytes of one chunk (one bulk load, one bulk reduction), chunks in flight per block
 * (buffers), threads and resident blocks per SM of the bulk kernel. Measured on an H200
 * (benchmarks/kernel-probe.cu, 2^26 int32 adds): 8 KB x 3 buffers x 8 blocks an SM with the
 * tile chunk prefetched into L2 and the operand loads marked evict_first: 321 G elements/s
 * (293 without the prefetch; red.add.u32 per element: 277; the non-atomic ld + add + st
 * ceiling: 336). */
#define TA_BULK_CHUNK   8192
#define TA_BULK_STAGES  3
#define TA_BULK_THREADS 32
#define TA_BULK_PER_SM  8

/* One bulk reduction of op OPT (a string: "add.u32", "min.s64", ...) of bytes from shared
 * address src into global dst, committed as its own bulk group. */
#define TA_ASM_BULK(OPT)                                                                           \
	asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group." OPT                     \
	             " [%0], [%1], %2;\n\t"                                                        \
	             "cp.async.bulk.commit_group;" ::"l"(dst),                                     \
	             "r"(src), "r"(bytes)                                                          \
	             : "memory")

/* Reduces bytes (a multiple of 16) of operands at shared address src into the tile at dst
 * (16-byte aligned) with KOP of dtype DT: every element atomically, .relaxed.gpu. The
 * PTX types are the table's (ADD: u32/u64; MIN/MAX: s/u by signedness; AND/OR/XOR: b). */
#define TA_BULK_W(O32, O64)                                                                        \
	do {                                                                                       \
		if constexpr (W64)                                                                 \
			TA_ASM_BULK(O64);                                                          \
		else                                                                               \
			TA_ASM_BULK(O32);                                                          \
	} while (0)
template <int DT, int KOP>
__device__ __forceinline__ void bulk_reduce(void *dst, uint32_t src, uint32_t bytes)
{
	constexpr bool W64 = sizeof(typename dt_traits<DT>::B) == 8;
	constexpr bool S = dt_traits<DT>::is_signed;
	if constexpr (KOP == K_ADD)
		TA_BULK_W("add.u32", "add.u64");
	else if constexpr (KOP == K_MIN && S)
		TA_BULK_W("min.s32", "min.s64");
	else if constexpr (KOP == K_MIN)
		TA_BULK_W("min.u32", "min.u64");
	else if constexpr (KOP == K_MAX && S)
		TA_BULK_W("max.s32", "max.s64");
	else if constexpr (KOP == K_MAX)
		TA_BULK_W("max.u32", "max.u64");
	else if constexpr (KOP == K_AND)
		TA_BULK_W("and.b32", "and.b64");
	else if constexpr (KOP == K_OR)
		TA_BULK_W("or.b32", "or.b64");
	else
		TA_BULK_W("xor.b32", "xor.b64");
}

/* Waits until the shared-memory mbarrier at mb has completed the phase of this parity. */
__device__ __forceinline__ void mbar_wait(uint32_t mb, uint32_t parity)
{
	asm volatile("{\n\t.reg .pred p;\n"
	             "TA_WAIT_%=:\n\t"
	             "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
	             "@!p bra TA_WAIT_%=;\n}" ::"r"(mb),
	             "r"(parity)
	             : "memory");
}

/* Bulk-reduction kernel of (dtype DT, kernel op KOP): the region's first count * size / 16
 * 16-byte groups (the tile 16-byte aligned at base, the values contiguous and aligned, or
 * scalar) in chunks of TA_BULK_CHUNK bytes, chunk c to block c mod grid. Thread 0 of each
 * block runs a pipeline of TA_BULK_STAGES buffers: a chunk's operands come in with one bulk
 * copy (evict_first in L2: read once) completing on the buffer's mbarrier while the tile
 * chunk is prefetched into L2, then one bulk reduction adds the buffer to the tile; the
 * buffer is refilled once that reduction has read it (wait_group.read). Scalar values:
 * the block fills one buffer with the operand once and every chunk reduces from it. The
 * last count % (16 / size) elements go through the tile's ordinary instruction (sem and
 * scope of the plan); the counts are the plan's (nothing is masked or skipped). */
template <int DT, int KOP> __global__ void __launch_bounds__(TA_BULK_THREADS) k_bulk(const kargs a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
	(void)a; /* no bulk copies before sm_90: the host never launches this kernel */
#else
	typedef typename dt_traits<DT>::B B;
	extern __shared__ __align__(128) unsigned char ta_bulk_smem[];
	__shared__ __align__(8) uint64_t mbar[TA_BULK_STAGES];
	const B *vals = (const B *)a.p.values.data;
	B *dst = (B *)a.tile + a.base;
	const int64_t n = a.p.count, head = n / (16 / (int64_t)sizeof(B)) * (16 / sizeof(B));
	const int64_t nbytes = head * (int64_t)sizeof(B);
	const uint32_t sb = smem_addr(ta_bulk_smem), mb0 = smem_addr(mbar);
	if (blockIdx.x == 0 && threadIdx.x == 0)
		atomicAdd(&a.counters[1], (unsigned long long)n);
	/* the tail, by block 0 */
	if (blockIdx.x == 0)
		for (int64_t k = head + threadIdx.x; k < n; k += blockDim.x)
			apply_global_rt<DT, KOP>(dst + k, vals[a.vals_vec ? k : 0], (B)0, a.ss,
			                         false);
	if (!a.vals_vec) {
		const B v = vals[0];
		for (int i = threadIdx.x; i < TA_BULK_CHUNK / (int)sizeof(B); i += blockDim.x)
			((B *)ta_bulk_smem)[i] = v;
		/* generic-proxy writes, read by the async proxy */
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		__syncthreads();
	}
	if (threadIdx.x != 0)
		return;
	for (int s = 0; s < TA_BULK_STAGES; s++)
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(mb0 + 8 * s)
		             : "memory");
	asm volatile("fence.mbarrier_init.release.cluster;\n\t"
	             "fence.proxy.async.shared::cta;" ::
	                 : "memory");
	uint64_t evict_first;
	asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(evict_first));
	const int64_t chunks = (nbytes + TA_BULK_CHUNK - 1) / TA_BULK_CHUNK;
	const int64_t mine =
	    chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
	/* chunk i of this block: its bytes, prefetch of the tile, the operand load */
	auto chunk_bytes = [&](int64_t i) {
		int64_t c = blockIdx.x + i * gridDim.x, left = nbytes - c * TA_BULK_CHUNK;
		return (uint32_t)(left < TA_BULK_CHUNK ? left : TA_BULK_CHUNK);
	};
	auto issue = [&](int64_t i) {
		const int64_t off = (blockIdx.x + i * gridDim.x) * TA_BULK_CHUNK;
		const uint32_t bytes = chunk_bytes(i);
		asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"((char *)dst + off),
		             "r"(bytes)
		             : "memory");
		if (a.vals_vec) {
			const uint32_t s = (uint32_t)(i % TA_BULK_STAGES), mb = mb0 + 8 * s;
			asm volatile(
			    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n\t"
			    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
			    ".L2::cache_hint [%2], [%3], %1, [%0], %4;" ::"r"(mb),
			    "r"(bytes), "r"(sb + s * TA_BULK_CHUNK), "l"((const char *)vals + off),
			    "l"(evict_first)
			    : "memory");
		}
	};
	for (int64_t i = 0; i < TA_BULK_STAGES - 1 && i < mine; i++)
		issue(i);
	for (int64_t i = 0; i < mine; i++) {
		const uint32_t s = a.vals_vec ? (uint32_t)(i % TA_BULK_STAGES) : 0;
		if (a.vals_vec)
			mbar_wait(mb0 + 8 * s, (uint32_t)((i / TA_BULK_STAGES) & 1));
		const int64_t off = (blockIdx.x + i * gridDim.x) * TA_BULK_CHUNK;
		bulk_reduce<DT, KOP>((char *)dst + off, sb + s * TA_BULK_CHUNK, chunk_bytes(i));
		if (i + TA_BULK_STAGES - 1 < mine) {
			/* the next load goes into the buffer of chunk i - 1: its reduction must
			 * have read it (all groups but the newest) */
			asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
			issue(i + TA_BULK_STAGES - 1);
		}
	}
	/* the shared memory must outlive the reads of every reduction */
	asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}
#undef TA_BULK_W
#undef TA_ASM_BULK

/* ---- merge-out: a scratch's rows added into other memory (ta_plan.h, ta_merge_out) ----- */

/* Most targets one launch of k_merge_out takes (one per blockIdx.y). */
#define TA_MERGE_LAUNCH_TARGETS 8

/* What one launch of k_merge_out adds: tile elements [elem0[t], elem0[t] + elems[t]) of src
 * into mem[t], for t < gridDim.y. */
struct merge_args {
	const void *src;                        /* the scratch (the plan's tile), device */
	void *mem[TA_MERGE_LAUNCH_TARGETS];     /* each target's memory (device or peer) */
	int64_t elem0[TA_MERGE_LAUNCH_TARGETS]; /* its first scratch element */
	int64_t elems[TA_MERGE_LAUNCH_TARGETS]; /* its elements */
	int ss[TA_MERGE_LAUNCH_TARGETS];        /* its adds' ss_of(sem, scope) */
};

/* The adds of a merge-out, B the 32- or 64-bit container of an integer dtype: target
 * blockIdx.y, grid-stride over its elements (coalesced reads of the scratch, red.add, or
 * atom.add for a sem that acquires, at the target's (sem, scope): rmw_add_u32/u64); zeros
 * are skipped under sem relaxed (they change nothing). */
template <typename B> __global__ void __launch_bounds__(TA_BLOCK) k_merge_out(const merge_args m)
{
	const int t = blockIdx.y;
	const B *src = (const B *)m.src + m.elem0[t];
	B *dst = (B *)m.mem[t];
	const int64_t n = m.elems[t];
	const int ss = m.ss[t];
	const bool skip_zero = (ss >> TA_SS_SHIFT) == TA_SEM_RELAXED;
	const int64_t step = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		const B v = src[i];
		if (v == 0 && skip_zero)
			continue;
		if constexpr (sizeof(B) == 8)
			rmw_add_u64(dst + i, v, ss, false);
		else
			rmw_add_u32(dst + i, v, ss, false);
	}
}

} /* namespace ta */
#endif /* TA_CUDA_KERNELS_CUH */
