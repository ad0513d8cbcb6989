/* ta_cpu.c: the CPU backend. Tiles live in zeroed, 64-byte aligned host memory; plans
 * (ta_plan.h) run with C11 atomics on that memory, so that this backend is the executable
 * definition of every op's semantics and the reference the CUDA kernels must match.
 *
 * Happy path: apply() checks the plan defensively (ta_plan_check: in full, or for a plan
 * marked prechecked what may have changed since ta_plan_build), then runs elements
 * [0, count): small plans (count < TA_CPU_PARALLEL_MIN) inline on the calling thread, with
 * plain counters; large ones are cut into
 * chunks that the calling thread and the worker pool claim through one atomic counter per
 * job, so concurrent updates to one element really contend. Several apply() calls may run
 * at once: each queues its own job and the workers help the job at the head of the queue.
 *
 * Semantics (bit for bit what the CUDA backend does; ta_plan.h states them too). Element
 * addressing is tacore/ta_addr.h (shared with ta_plan_resolve), the float rules are
 * tacore/ta_float.h (shared with the CUDA kernels), the memory orders tacore/ta_c11.h:
 *  - Integers: add/sub wrap (computed in unsigned); sub adds the negated operand; min/max
 *    are signed for int32/int64, unsigned for uint32/uint64; and/or/xor are integer only.
 *  - float32 add/sub flush subnormal inputs (the tile value and the operand) and subnormal
 *    results to a zero of the same sign, computed in float with round-to-nearest-even (the
 *    default floating-point environment of the process is assumed), like the GPU's
 *    atom.global.add.f32. float64 add is plain IEEE double. float16/bfloat16 add rounds the
 *    exact sum (computed in double) once to nearest even, no flushing (.noftz). A NaN
 *    result of float32/16-bit add/sub is stored as the canonical NaN (0x7fffffff, 0x7fff);
 *    float64 propagates NaN bits as sm_90's atom.add.f64 does (ta_plan.h). Float sub adds
 *    the operand with its sign bit flipped.
 *  - Float min/max (a CAS loop on the bit pattern): a NaN in the tile stays; otherwise a
 *    NaN operand's bits are stored; otherwise the comparison with -0.0 < +0.0 decides
 *    (min stores the operand when operand < current, max when current < operand),
 *    compared as order-preserving keys of the bit patterns.
 *  - exch/cas/load/store work on bit patterns with atomics of the element's width (16,
 *    32 or 64 bits); cas compares bits (-0.0 != +0.0, identical NaN bits are equal).
 *  - sem maps onto C11 memory orders (ta_sem_c11_order): RMW ops take both its parts (a
 *    CAS loop's failed compare only its acquire part); LOAD takes acquire for
 *    acquire/acq_rel and relaxed otherwise; STORE takes release for release/acq_rel and
 *    relaxed otherwise. CAS-loop ops (float add, 16-bit add, min/max) whose result equals
 *    the current value still write it back when sem has a release part, so that the
 *    release always happens.
 *  - scope changes nothing here: on a CPU every atomic is system-wide, which includes
 *    every narrower scope.
 *  - want_old: old_out[k] is the value seen before the update; masked-off or skipped
 *    elements give the compare value (CAS), the padding (LOAD) or zero bits. A STORE never
 *    has an output (ta_plan_check refuses it).
 *  - space SHARED: each participant (worker or caller) accumulates its chunks into a private
 *    copy of the region (lazily initialised to the op's identity: -0.0 for float add/sub,
 *    0 for integer add/sub/or/xor, all ones for and, +inf/-inf or the type's max/min for
 *    min/max), remembers the elements it touched, and merges them into the tile with one
 *    atomic per touched element (sub accumulates the negated operands and merges with
 *    add). float32 accumulation flushes like the global path. The private copy is skipped
 *    (global path, same results for every order-independent op) when it would exceed
 *    TA_CPU_PRIVATE_MAX bytes, when the region is much larger than the work
 *    (region_count > 4 * count + 65536), when want_old is set, or when allocating it fails.
 *  - merge-out (ta_plan.h, ta_merge_out; the multi-device layer's partial tiles on CPU
 *    pools): the tile memory is zeroed (memset) before the plan runs, and afterwards the
 *    calling thread adds each target's rows of it into the target with C11 atomic adds
 *    under the plan's sem (zeros skipped when relaxed), as the CUDA backend's merge kernel
 *    does with red/atom.
 *
 * Failure modes: a plan that contradicts itself or the tile (bad dtype, operand dtype,
 * rank, tile smaller than the plan's shape, missing old_out) is refused before anything is
 * touched (INVALID_ARGUMENT / INTERNAL). Every resolved offset is checked against the tile
 * once more; an element outside it is never applied and makes apply return INTERNAL.
 * Out of memory for tiles gives RESOURCE_EXHAUSTED; for private copies, the global path. */
#include "ta_addr.h"
#include "ta_async_thread.h"
#include "ta_backend.h"
#include "ta_c11.h"
#include "ta_float.h"
#include "ta_hostmem.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Plans with at least this many elements are split over the worker pool. */
#define TA_CPU_PARALLEL_MIN 16384
/* Smallest chunk of a split plan, in elements. */
#define TA_CPU_CHUNK_MIN 4096
/* Chunks per participant a split plan is cut into (for load balance). */
#define TA_CPU_CHUNKS_PER_PARTICIPANT 4
/* Largest private copy (values + touched bitmap) one participant allocates for space
 * shared; larger regions take the global path. */
#define TA_CPU_PRIVATE_MAX ((size_t)64 << 20)
/* Alignment of tile memory in bytes. */
#define TA_CPU_TILE_ALIGN 64
/* Most worker threads a backend starts. */
#define TA_CPU_MAX_WORKERS 256

/* How one element is applied to the tile (chosen once per plan). */
typedef enum cpu_kind {
	K_FETCH_ADD, /* integer add (sub: negated operand): fetch_add */
	K_FETCH_AND, /* integer and: fetch_and */
	K_FETCH_OR,  /* integer or: fetch_or */
	K_FETCH_XOR, /* integer xor: fetch_xor */
	K_LOOP,      /* CAS loop with combine(): float/16-bit add, min, max */
	K_EXCH,      /* exchange */
	K_CAS,       /* compare-and-swap */
	K_LOAD,      /* atomic load */
	K_STORE,     /* atomic store */
} cpu_kind;

struct cpu_apply;
struct cpu_private;

/* A fast-path element loop: runs elements [k0, k1) of a flat or contiguous plan (see
 * fast_prepare), adding to *skipped and *applied. */
typedef void (*cpu_fast_fn)(struct cpu_apply *ap, struct cpu_private *pv, int64_t k0, int64_t k1,
                            uint64_t *skipped, uint64_t *applied);

/* Everything a participant needs to run a plan; shared read-only plus atomic counters. */
typedef struct cpu_apply {
	const ta_plan *plan;                /* the plan */
	uint8_t *mem;                       /* tile memory */
	int64_t tile_elems;                 /* elements the tile memory holds */
	size_t esize;                       /* element size in bytes (2, 4 or 8) */
	uint64_t emask;                     /* all-ones mask of the element width */
	ta_op op;                           /* effective op (SUB becomes ADD with negation) */
	bool negate;                        /* negate operands (SUB) */
	cpu_kind kind;                      /* how elements are applied */
	bool use_private;                   /* space shared with private copies */
	int64_t region_stride[TA_MAX_RANK]; /* row-major strides of the region */
	int64_t origin_offset;              /* tile offset of the region origin */
	int64_t chunk;                      /* elements per chunk */
	int64_t nchunks;                    /* chunks in the plan */
	atomic_llong next_chunk;            /* next chunk to claim */
	atomic_ullong skipped;              /* elements skipped as out of range */
	atomic_ullong applied;              /* elements applied */
	atomic_ullong violations;           /* elements resolved outside the tile (never applied) */
	cpu_fast_fn fast;                   /* the fast-path loop, NULL: the generic loop */
	bool fast_flat;                     /* fast path: FLAT through index 0 (else REGION) */
	int64_t fast_vstride;               /* fast path: values step per element (0 or 1) */
	int64_t fast_cstride;               /* fast path: compare step per element (0 or 1) */
	int64_t fast_mstride;               /* fast path: mask step per element (0 or 1) */
	int64_t fast_istride;               /* fast path: index step per element (0 or 1) */
} cpu_apply;

/* A participant's private state for space shared. */
typedef struct cpu_private {
	uint8_t *vals;    /* region_count elements of esize bytes, NULL when unused */
	bool dense;       /* fast path: vals starts as the identity everywhere and touched is
	                     one byte per region element; no list */
	uint8_t *touched; /* bitmap (dense: bytes) of touched region elements */
	int64_t *list;    /* region-relative indices touched, in order of first touch */
	size_t nlist;     /* entries in list */
	size_t caplist;   /* capacity of list */
} cpu_private;

/* One queued parallel job (lives on the stack of the apply() call that owns it). */
typedef struct cpu_job {
	struct cpu_job *next; /* queue link */
	cpu_apply *ap;        /* the work */
	int helpers;          /* workers running chunks of it (pool lock) */
	bool queued;          /* still in the queue (pool lock) */
} cpu_job;

/* The CPU backend object. */
typedef struct cpu_backend {
	ta_backend base;        /* vtable; must be first */
	int nworkers;           /* worker threads started */
	pthread_t *threads;     /* the workers */
	pthread_mutex_t lock;   /* guards the queue, helpers counts, stopping and async */
	pthread_cond_t work_cv; /* signalled when a job is queued or on shutdown */
	pthread_cond_t idle_cv; /* broadcast when a job's helpers count drops to 0 */
	cpu_job *head;          /* first queued job */
	cpu_job *tail;          /* last queued job */
	bool stopping;          /* destroy() asked the workers to exit */
	char device[128];       /* CPU description for info() */
	ta_hostmem hostmem;     /* the host memory budget of tile allocations */
	ta_async_thread *async; /* apply_async's completion thread (ta_async_thread.h), made
	                           with the first call (under lock); NULL before */
	int lanes;              /* threads that may attach (TILEATOM_CPU_LANES) */
} cpu_backend;

/* ---- element arithmetic ------------------------------------------------------------- */

/* The dtype facts of the TA_DTYPE rows as switches that fold when dt is a constant (the
 * fast paths instantiate every op x dtype; ta_types.c's functions are out of line). */
static inline __attribute__((always_inline)) size_t dt_size(ta_dtype dt)
{
	switch (dt) {
#define TA_DTYPE(id, wire, name, size, ...)                                                        \
	case TA_DTYPE_##id:                                                                        \
		return (size);
#include "ta_ops.def"
#undef TA_DTYPE
	default:
		return 0;
	}
}

/* True for a float dtype (kind FLOAT), folding for a constant dt. */
static inline __attribute__((always_inline)) bool dt_is_float(ta_dtype dt)
{
	switch (dt) {
#define TA_DTYPE(id, wire, name, size, kind, ...)                                                  \
	case TA_DTYPE_##id:                                                                        \
		return TA_KIND_IS_FLOAT_##kind;
#define TA_KIND_IS_FLOAT_INT   false
#define TA_KIND_IS_FLOAT_FLOAT true
#define TA_KIND_IS_FLOAT_MASK  false
#include "ta_ops.def"
#undef TA_DTYPE
	default:
		return false;
	}
}

/* True for a signed integer dtype (kind INT, signed 1), folding for a constant dt. */
static inline __attribute__((always_inline)) bool dt_is_signed_int(ta_dtype dt)
{
	switch (dt) {
#define TA_DTYPE(id, wire, name, size, kind, is_signed, ...)                                       \
	case TA_DTYPE_##id:                                                                        \
		return TA_KIND_IS_INT_##kind && (is_signed);
#define TA_KIND_IS_INT_INT   true
#define TA_KIND_IS_INT_FLOAT false
#define TA_KIND_IS_INT_MASK  false
#include "ta_ops.def"
#undef TA_DTYPE
	default:
		return false;
	}
}

/* Sign bit of an element of width esize. */
static inline uint64_t sign_bit(size_t esize)
{
	return (uint64_t)1 << (esize * 8 - 1);
}

/* Sign-extends an element of width esize. */
static inline int64_t sext(uint64_t b, size_t esize)
{
	if (esize == 8)
		return (int64_t)b;
	int shift = 64 - (int)esize * 8;
	return (int64_t)(b << shift) >> shift;
}

/* New value of an element holding cur after op with operand v (ADD, MIN, MAX, AND, OR,
 * XOR; ADD with an already negated operand for SUB); float add, min and max follow the
 * rules of ta_float.h. Pure: also used for private copies. */
static inline __attribute__((always_inline)) uint64_t combine(ta_op op, ta_dtype dt, uint64_t emask,
                                                              uint64_t cur, uint64_t v)
{
	size_t es = dt_size(dt);
	bool is_float = dt_is_float(dt);
	switch (op) {
	case TA_OP_ADD:
		if (is_float)
			return ta_float_add(dt, cur, v);
		return (cur + v) & emask;
	case TA_OP_MIN:
	case TA_OP_MAX: {
		bool take;
		if (is_float)
			return ta_float_minmax(dt, cur, v, op == TA_OP_MAX);
		if (dt_is_signed_int(dt)) {
			int64_t c = sext(cur, es), x = sext(v, es);
			take = op == TA_OP_MIN ? x < c : c < x;
		} else {
			take = op == TA_OP_MIN ? v < cur : cur < v;
		}
		return take ? v : cur;
	}
	case TA_OP_AND:
		return cur & v;
	case TA_OP_OR:
		return cur | v;
	case TA_OP_XOR:
		return cur ^ v;
	default:
		return cur;
	}
}

/* Identity of op for dtype: the initial value of a private copy element. */
static uint64_t identity(ta_op op, ta_dtype dt, uint64_t emask)
{
	size_t es = ta_dtype_size(dt);
	bool is_float = ta_dtype_is_float(dt);
	bool is_signed = ta_dtype_is_signed_int(dt);
	switch (op) {
	case TA_OP_ADD:
		return ta_float_sign(dt); /* float: -0.0 keeps -0.0 results; integer: 0 */
	case TA_OP_MIN:
		if (is_float)
			return ta_float_inf(dt);
		return is_signed ? emask >> 1 : emask;
	case TA_OP_MAX:
		if (is_float)
			return ta_float_sign(dt) | ta_float_inf(dt);
		return is_signed ? sign_bit(es) : 0;
	case TA_OP_AND:
		return emask;
	default: /* OR, XOR */
		return 0;
	}
}

/* The op a plan's elements combine with: SUB adds the negated operand. */
static inline __attribute__((always_inline)) ta_op effective_op(ta_op op)
{
	return op == TA_OP_SUB ? TA_OP_ADD : op;
}

/* How elements of op (effective_op) are applied on a dtype (int_dt: a 32/64-bit integer
 * one, which has fetch-and-op atomics); folds for constants. */
static inline __attribute__((always_inline)) cpu_kind kind_of(ta_op op, bool int_dt)
{
	switch (op) {
	case TA_OP_ADD:
		return int_dt ? K_FETCH_ADD : K_LOOP;
	case TA_OP_AND:
		return int_dt ? K_FETCH_AND : K_LOOP;
	case TA_OP_OR:
		return int_dt ? K_FETCH_OR : K_LOOP;
	case TA_OP_XOR:
		return int_dt ? K_FETCH_XOR : K_LOOP;
	case TA_OP_EXCH:
		return K_EXCH;
	case TA_OP_CAS:
		return K_CAS;
	case TA_OP_LOAD:
		return K_LOAD;
	case TA_OP_STORE:
		return K_STORE;
	default: /* MIN, MAX */
		return K_LOOP;
	}
}

/* ---- atomics ----------------------------------------------------------------------- */

/* Defines the atomic element function of one width W (bits) over type T: applies kind to
 * the element at p with operand v (and compare c) under sem (a constant after inlining: the
 * C11 orders come from ta_sem_c11_order); the CAS loop combines with op and dtype dt (both
 * constants in the fast paths, so combine() folds to one case); returns the old bits. */
#define TA_CPU_ATOMIC_ELEM(W, T)                                                                   \
	static inline __attribute__((always_inline))                                               \
	uint64_t atomic_elem##W(ta_op op, ta_dtype dt, uint64_t emask, cpu_kind kind, void *p,     \
	                        uint64_t v, uint64_t c, ta_sem sem)                                \
	{                                                                                          \
		_Atomic T *a = (_Atomic T *)p;                                                     \
		const memory_order mo = ta_sem_c11_order(sem, TA_ACCESS_RMW);                      \
		const memory_order mo_fail = ta_sem_c11_order(sem, TA_ACCESS_CAS_FAILURE);         \
		const memory_order mo_load = ta_sem_c11_order(sem, TA_ACCESS_LOAD);                \
		const memory_order mo_store = ta_sem_c11_order(sem, TA_ACCESS_STORE);              \
		switch (kind) {                                                                    \
		case K_FETCH_ADD:                                                                  \
			return atomic_fetch_add_explicit(a, (T)v, mo);                             \
		case K_FETCH_AND:                                                                  \
			return atomic_fetch_and_explicit(a, (T)v, mo);                             \
		case K_FETCH_OR:                                                                   \
			return atomic_fetch_or_explicit(a, (T)v, mo);                              \
		case K_FETCH_XOR:                                                                  \
			return atomic_fetch_xor_explicit(a, (T)v, mo);                             \
		case K_EXCH:                                                                       \
			return atomic_exchange_explicit(a, (T)v, mo);                              \
		case K_CAS: {                                                                      \
			T expected = (T)c;                                                         \
			atomic_compare_exchange_strong_explicit(a, &expected, (T)v, mo, mo_fail);  \
			return expected;                                                           \
		}                                                                                  \
		case K_LOAD:                                                                       \
			return atomic_load_explicit(a, mo_load);                                   \
		case K_STORE:                                                                      \
			atomic_store_explicit(a, (T)v, mo_store);                                  \
			return 0;                                                                  \
		case K_LOOP:                                                                       \
		default: {                                                                         \
			T cur = atomic_load_explicit(a, mo_load);                                  \
			for (;;) {                                                                 \
				T next = (T)combine(op, dt, emask, cur, v);                        \
				if (next == cur && mo_store == memory_order_relaxed)               \
					return cur; /* acquire came with the load */               \
				if (atomic_compare_exchange_weak_explicit(a, &cur, next, mo,       \
				                                          mo_fail))                \
					return cur;                                                \
			}                                                                          \
		}                                                                                  \
		}                                                                                  \
	}

TA_CPU_ATOMIC_ELEM(16, uint16_t)
TA_CPU_ATOMIC_ELEM(32, uint32_t)
TA_CPU_ATOMIC_ELEM(64, uint64_t)

/* Applies kind to the element at p (width from ap); returns the old bits. */
static inline __attribute__((always_inline)) uint64_t
atomic_elem(const cpu_apply *ap, cpu_kind kind, void *p, uint64_t v, uint64_t c, ta_sem sem)
{
	switch (ap->esize) {
	case 2:
		return atomic_elem16(ap->op, ap->plan->dtype, ap->emask, kind, p, v, c, sem);
	case 4:
		return atomic_elem32(ap->op, ap->plan->dtype, ap->emask, kind, p, v, c, sem);
	default:
		return atomic_elem64(ap->op, ap->plan->dtype, ap->emask, kind, p, v, c, sem);
	}
}

/* ---- operand access ---------------------------------------------------------------- */

/* Reads element bits (width es) at element offset off of data. */
static inline uint64_t read_bits(const void *data, int64_t off, size_t es)
{
	const uint8_t *b = (const uint8_t *)data + off * (int64_t)es;
	switch (es) {
	case 1:
		return b[0];
	case 2: {
		uint16_t v;
		memcpy(&v, b, 2);
		return v;
	}
	case 4: {
		uint32_t v;
		memcpy(&v, b, 4);
		return v;
	}
	default: {
		uint64_t v;
		memcpy(&v, b, 8);
		return v;
	}
	}
}

/* Writes element bits (width es) at element index k of data. */
static inline void write_bits(void *data, int64_t k, size_t es, uint64_t v)
{
	uint8_t *b = (uint8_t *)data + k * (int64_t)es;
	switch (es) {
	case 2: {
		uint16_t x = (uint16_t)v;
		memcpy(b, &x, 2);
		break;
	}
	case 4: {
		uint32_t x = (uint32_t)v;
		memcpy(b, &x, 4);
		break;
	}
	default:
		memcpy(b, &v, 8);
		break;
	}
}

/* Tile offset of region coordinates r, or -1 when r lies outside the region or the tile
 * memory (the defensive check: never reached for a plan from ta_plan_build). */
static inline int64_t tile_offset(const cpu_apply *ap, const int64_t *r)
{
	const ta_plan *p = ap->plan;
	int64_t off = ap->origin_offset;
	for (int a = 0; a < p->tile_rank; a++) {
		if (r[a] < 0 || r[a] >= p->extent[a])
			return -1;
		off += r[a] * p->tile_stride[a];
	}
	return off >= 0 && off < ap->tile_elems ? off : -1;
}

/* Region-relative row-major index of region coordinates r. */
static inline int64_t region_index(const cpu_apply *ap, const int64_t *r)
{
	int64_t rel = 0;
	for (int a = 0; a < ap->plan->tile_rank; a++)
		rel += r[a] * ap->region_stride[a];
	return rel;
}

/* Output bits for an element that was masked off or skipped. */
static inline uint64_t idle_output(const cpu_apply *ap, const int64_t *e)
{
	const ta_plan *p = ap->plan;
	if (p->op == TA_OP_CAS)
		return read_bits(p->compare.data, ta_addr_operand_offset(p, &p->compare, e),
		                 ap->esize);
	if (p->op == TA_OP_LOAD)
		return p->padding_bits & ap->emask;
	return 0;
}

/* ---- private copies (space shared) ------------------------------------------------- */

/* Allocates the private copy of the region; false (and nothing held) on failure. */
static bool private_init(const cpu_apply *ap, cpu_private *pv)
{
	int64_t n = ap->plan->region_count;
	memset(pv, 0, sizeof(*pv));
	pv->dense = ap->fast != NULL;
	pv->vals = malloc((size_t)n * ap->esize);
	pv->touched = calloc(pv->dense ? (size_t)n : (size_t)(n + 7) / 8, 1);
	if (!pv->vals || !pv->touched) {
		free(pv->vals);
		free(pv->touched);
		memset(pv, 0, sizeof(*pv));
		return false;
	}
	if (pv->dense) {
		uint64_t id = identity(ap->op, ap->plan->dtype, ap->emask);
		for (int64_t i = 0; i < n; i++)
			write_bits(pv->vals, i, ap->esize, id);
	}
	return true;
}

/* Records the first touch of rel; false when the list cannot grow (then the caller
 * applies that element to the tile directly). */
static bool private_touch(cpu_private *pv, int64_t rel)
{
	if (pv->nlist == pv->caplist) {
		size_t cap = pv->caplist ? pv->caplist * 2 : 1024;
		int64_t *list = realloc(pv->list, cap * sizeof(*list));
		if (!list)
			return false;
		pv->list = list;
		pv->caplist = cap;
	}
	pv->list[pv->nlist++] = rel;
	pv->touched[rel >> 3] |= (uint8_t)(1u << (rel & 7));
	return true;
}

/* Merges the touched private elements into the tile (one atomic each, under sem, a
 * constant after inlining) and frees pv. */
static inline __attribute__((always_inline)) void private_merge(cpu_apply *ap, cpu_private *pv,
                                                                ta_sem sem)
{
	const ta_plan *p = ap->plan;
	if (pv->dense) {
		/* fast_prepare made region element rel tile element origin_offset + rel */
		for (int64_t rel = 0; rel < p->region_count; rel++) {
			if (!pv->touched[rel])
				continue;
			uint64_t v = read_bits(pv->vals, rel, ap->esize);
			atomic_elem(ap, ap->kind,
			            ap->mem + (ap->origin_offset + rel) * (int64_t)ap->esize, v, 0,
			            sem);
		}
	}
	for (size_t i = 0; i < pv->nlist; i++) {
		int64_t rel = pv->list[i], r[TA_MAX_RANK];
		ta_addr_region_coords(p, rel, r);
		int64_t off = tile_offset(ap, r);
		uint64_t v = read_bits(pv->vals, rel, ap->esize);
		atomic_elem(ap, ap->kind, ap->mem + off * (int64_t)ap->esize, v, 0, sem);
	}
	free(pv->vals);
	free(pv->touched);
	free(pv->list);
	memset(pv, 0, sizeof(*pv));
}

/* ---- the element loop -------------------------------------------------------------- */

/* Runs elements [k0, k1) of the plan under sem (a constant after inlining), accumulating
 * into pv when it holds a private copy: addressing by ta_addr.h, the coordinates stepped
 * from element to element. Adds to *skipped, *applied and *violations. */
static inline __attribute__((always_inline)) void
run_range_sem(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1, uint64_t *skipped,
              uint64_t *applied, uint64_t *violations, ta_sem sem)
{
	const ta_plan *p = ap->plan;
	const size_t es = ap->esize;
	const bool want_old = p->want_old && p->old_out != NULL;
	const bool has_values = p->values.data != NULL;
	const bool is_cas = p->op == TA_OP_CAS;
	const uint64_t neg_sign = ta_float_sign(p->dtype); /* float sub flips the sign */
	int64_t e[TA_MAX_RANK] = {0}, r[TA_MAX_RANK] = {0};
	ta_addr_unravel(p, k0, e);
	for (int64_t k = k0; k < k1; k++) {
		int how = ta_addr_resolve(p, e, r);
		int64_t off = how > 0 ? tile_offset(ap, r) : 0;
		if (how > 0 && off < 0) {
			(*violations)++;
			how = 0;
		}
		if (how <= 0) {
			if (how < 0)
				(*skipped)++;
			if (want_old)
				write_bits(p->old_out, k, es, idle_output(ap, e));
		} else {
			uint64_t v = 0, c = 0;
			if (has_values)
				v = read_bits(p->values.data,
				              ta_addr_operand_offset(p, &p->values, e), es);
			if (is_cas)
				c = read_bits(p->compare.data,
				              ta_addr_operand_offset(p, &p->compare, e), es);
			if (ap->negate)
				v = neg_sign ? v ^ neg_sign : (~v + 1) & ap->emask;
			(*applied)++;
			bool done = false;
			if (pv && pv->vals) {
				int64_t rel = region_index(ap, r);
				uint64_t cur;
				bool seen = (pv->touched[rel >> 3] >> (rel & 7)) & 1;
				if (seen) {
					cur = read_bits(pv->vals, rel, es);
					done = true;
				} else {
					cur = identity(ap->op, p->dtype, ap->emask);
					done = private_touch(pv, rel);
				}
				if (done)
					write_bits(pv->vals, rel, es,
					           combine(ap->op, p->dtype, ap->emask, cur, v));
			}
			if (!done) {
				uint64_t old = atomic_elem(ap, ap->kind,
				                           ap->mem + off * (int64_t)es, v, c, sem);
				if (want_old)
					write_bits(p->old_out, k, es, old);
			}
		}
		ta_addr_step(p, e);
	}
}

/* The plan's sem; relaxed for an invalid one (which ta_plan_check refuses first). */
static inline ta_sem plan_sem(const cpu_apply *ap)
{
	return (unsigned)ap->plan->sem < TA_SEM_COUNT ? ap->plan->sem : TA_SEM_RELAXED;
}

/* ---- fast paths -------------------------------------------------------------------- */

/* The fast paths run flat 1-D and contiguous plans (fast_prepare says which) without the
 * generic loop's per-element work: no coordinates, no division, no switch on op or dtype
 * per element. Each op x dtype of the table gets its own loop (fast_range below,
 * instantiated from the TA_OP and TA_DTYPE rows), with the plan's sem a constant (one
 * loop per TA_SEM row); element k reads its operands at k * stride (stride 0 broadcasts)
 * and addresses region element k (REGION) or index0[k] (FLAT), which is tile element
 * origin_offset + that. A private copy (space shared) is dense: every region element
 * starts as the op's identity, a touched byte marks it, and the merge walks the region.
 * The semantics are those of run_range_sem, element for element: masks, bounds (an index
 * outside [0, region_count) is skipped and counted; check_bounds off never reaches here
 * with one, ta_plan_build rejected it), old values (idle elements as idle_output) and the
 * C11 orders of the sem. */

/* Runs elements [k0, k1) of a fast plan with op, dtype dt (element size es), kind, sem
 * and index width ix (0: REGION, 4: int32 FLAT, 8: int64 FLAT) constants (ix a variable
 * on the atomic path). */
static inline __attribute__((always_inline)) void
fast_range(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1, uint64_t *skipped,
           uint64_t *applied, ta_op op, ta_dtype dt, size_t es, cpu_kind kind, ta_sem sem, int ix)
{
	const ta_plan *p = ap->plan;
	const bool want_old = p->want_old && p->old_out != NULL;
	const uint8_t *vals = p->values.data, *cmps = p->compare.data, *mask = p->mask.data;
	const uint8_t *index = p->index[0].data;
	const int64_t vs = ap->fast_vstride, cs = ap->fast_cstride, ms = ap->fast_mstride;
	const int64_t is = ap->fast_istride;
	const uint64_t emask = es == 8 ? UINT64_MAX : (UINT64_C(1) << (es * 8)) - 1;
	const bool negate = ap->negate;
	const uint64_t neg_sign = ta_float_sign(dt);
	const uint64_t nreg = (uint64_t)p->region_count;
	const uint64_t padding = p->padding_bits & emask;
	uint8_t *base = ap->mem + ap->origin_offset * (int64_t)es;
	uint8_t *pvals = pv && pv->vals ? pv->vals : NULL;
	uint8_t *touched = pvals ? pv->touched : NULL;
	uint64_t nskip = 0, napplied = 0;
	for (int64_t k = k0; k < k1; k++) {
		uint64_t rel;
		bool idle = mask && mask[k * ms] == 0;
		if (!idle) {
			if (ix == 0) {
				rel = (uint64_t)k;
			} else {
				int64_t f;
				if (ix == 4) {
					int32_t f32;
					memcpy(&f32, index + k * is * 4, 4);
					f = f32;
				} else {
					memcpy(&f, index + k * is * 8, 8);
				}
				rel = (uint64_t)f;
				if (rel >= nreg) { /* negative ones too */
					nskip++;
					idle = true;
				}
			}
		}
		if (idle) {
			if (want_old)
				write_bits(p->old_out, k, es,
				           op == TA_OP_CAS    ? read_bits(cmps, k * cs, es)
				           : op == TA_OP_LOAD ? padding
				                              : 0);
			continue;
		}
		uint64_t v = 0, c = 0;
		if (vals)
			v = read_bits(vals, k * vs, es);
		if (op == TA_OP_CAS)
			c = read_bits(cmps, k * cs, es);
		if (negate)
			v = neg_sign ? v ^ neg_sign : (~v + 1) & emask;
		napplied++;
		if (pvals) {
			write_bits(pvals, (int64_t)rel, es,
			           combine(op, dt, emask, read_bits(pvals, (int64_t)rel, es), v));
			touched[rel] = 1;
			continue;
		}
		void *at = base + (int64_t)rel * (int64_t)es;
		uint64_t old;
		if (es == 2)
			old = atomic_elem16(op, dt, emask, kind, at, v, c, sem);
		else if (es == 4)
			old = atomic_elem32(op, dt, emask, kind, at, v, c, sem);
		else
			old = atomic_elem64(op, dt, emask, kind, at, v, c, sem);
		if (want_old)
			write_bits(p->old_out, k, es, old);
	}
	*skipped += nskip;
	*applied += napplied;
}

/* The histogram loop: private accumulation of one scalar operand (negated once for SUB)
 * without a mask, indices contiguous; op, dt, es and ix are constants. */
static inline __attribute__((always_inline)) void
fast_private_scalar(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1, uint64_t *skipped,
                    uint64_t *applied, ta_op op, ta_dtype dt, size_t es, int ix)
{
	const ta_plan *p = ap->plan;
	const uint64_t emask = es == 8 ? UINT64_MAX : (UINT64_C(1) << (es * 8)) - 1;
	const uint64_t neg_sign = ta_float_sign(dt);
	const uint64_t nreg = (uint64_t)p->region_count;
	const uint8_t *index = p->index[0].data;
	uint64_t v = read_bits(p->values.data, 0, es);
	if (ap->negate)
		v = neg_sign ? v ^ neg_sign : (~v + 1) & emask;
	uint8_t *pvals = pv->vals, *touched = pv->touched;
	uint64_t nskip = 0;
	for (int64_t k = k0; k < k1; k++) {
		uint64_t rel;
		if (ix == 0) {
			rel = (uint64_t)k;
		} else if (ix == 4) {
			int32_t f32;
			memcpy(&f32, index + k * 4, 4);
			rel = (uint64_t)(int64_t)f32;
		} else {
			int64_t f;
			memcpy(&f, index + k * 8, 8);
			rel = (uint64_t)f;
		}
		if (rel >= nreg) { /* negative ones too */
			nskip++;
			continue;
		}
		write_bits(pvals, (int64_t)rel, es,
		           combine(op, dt, emask, read_bits(pvals, (int64_t)rel, es), v));
		touched[rel] = 1;
	}
	*skipped += nskip;
	*applied += (uint64_t)(k1 - k0) - nskip;
}

/* The fast loop of one op (ap->op: SUB runs as ADD) x dtype: picks the index width and
 * the sem, each a constant of its own loop. */
static inline __attribute__((always_inline)) void
fast_dispatch(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1, uint64_t *skipped,
              uint64_t *applied, ta_op op, ta_dtype dt, size_t es, cpu_kind kind)
{
	int ix = !ap->fast_flat ? 0 : ap->plan->index[0].dtype == TA_DTYPE_I32 ? 4 : 8;
	if (pv && pv->vals && !ap->plan->mask.data && ap->fast_vstride == 0 &&
	    ap->fast_istride == 1) { /* a histogram: its own loop */
		if (ix == 4)
			fast_private_scalar(ap, pv, k0, k1, skipped, applied, op, dt, es, 4);
		else if (ix == 8)
			fast_private_scalar(ap, pv, k0, k1, skipped, applied, op, dt, es, 8);
		else
			fast_private_scalar(ap, pv, k0, k1, skipped, applied, op, dt, es, 0);
		return;
	}
	if (pv && pv->vals) { /* private accumulation: no atomics, so no sem */
		if (ix == 0)
			fast_range(ap, pv, k0, k1, skipped, applied, op, dt, es, kind,
			           TA_SEM_RELAXED, 0);
		else if (ix == 4)
			fast_range(ap, pv, k0, k1, skipped, applied, op, dt, es, kind,
			           TA_SEM_RELAXED, 4);
		else
			fast_range(ap, pv, k0, k1, skipped, applied, op, dt, es, kind,
			           TA_SEM_RELAXED, 8);
		return;
	}
	/* atomics: the index width stays a variable (a predictable branch beside the atomic) */
	switch (plan_sem(ap)) {
#define TA_SEM(id, ...)                                                                            \
	case TA_SEM_##id:                                                                          \
		fast_range(ap, NULL, k0, k1, skipped, applied, op, dt, es, kind, TA_SEM_##id, ix); \
		break;
#include "ta_ops.def"
#undef TA_SEM
	default:
		__builtin_unreachable();
	}
}

/* True when an op of the dtypes column takes a dtype (int_dt: an integer one). */
#define FAST_TAKES_ANY(int_dt) true
#define FAST_TAKES_INT(int_dt) (int_dt)

/* The fast loops of dtype dt (element size es; int_dt: an integer dtype), all constants:
 * one per TA_OP row that takes the dtype, chosen once per call. */
static inline __attribute__((always_inline)) void
fast_for_dtype(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1, uint64_t *skipped,
               uint64_t *applied, ta_dtype dt, size_t es, bool int_dt)
{
	switch (ap->plan->op) {
#define TA_OP(opid, name, okind, dtypes, ...)                                                      \
	case TA_OP_##opid:                                                                         \
		if (FAST_TAKES_##dtypes(int_dt))                                                   \
			fast_dispatch(ap, pv, k0, k1, skipped, applied,                            \
			              effective_op(TA_OP_##opid), dt, es,                          \
			              kind_of(effective_op(TA_OP_##opid), int_dt));                \
		break;
#include "ta_ops.def"
#undef TA_OP
	default:
		break;
	}
}

/* One fast function per tile dtype (the INT and FLOAT rows; the mask dtype has no tiles). */
#define FAST_DT_INT(id, size)                                                                      \
	static void fast_##id(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1,              \
	                      uint64_t *skipped, uint64_t *applied)                                \
	{                                                                                          \
		fast_for_dtype(ap, pv, k0, k1, skipped, applied, TA_DTYPE_##id, (size), true);     \
	}
#define FAST_DT_FLOAT(id, size)                                                                    \
	static void fast_##id(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1,              \
	                      uint64_t *skipped, uint64_t *applied)                                \
	{                                                                                          \
		fast_for_dtype(ap, pv, k0, k1, skipped, applied, TA_DTYPE_##id, (size), false);    \
	}
#define FAST_DT_MASK(id, size)
#define TA_DTYPE(id, wire, name, size, kind, ...) FAST_DT_##kind(id, size)
#include "ta_ops.def"
#undef TA_DTYPE

/* The fast function of a tile dtype; NULL for any other. */
static cpu_fast_fn fast_fn_of(ta_dtype dt)
{
	switch (dt) {
#define FAST_CASE_INT(id)                                                                          \
	case TA_DTYPE_##id:                                                                        \
		return fast_##id;
#define FAST_CASE_FLOAT(id) FAST_CASE_INT(id)
#define FAST_CASE_MASK(id)
#define TA_DTYPE(id, wire, name, size, kind, ...) FAST_CASE_##kind(id)
#include "ta_ops.def"
#undef TA_DTYPE
	default:
		return NULL;
	}
}

/* The per-element step (0: broadcast, 1: contiguous) of operand op over the iteration
 * shape of p, or -1 when it is neither. */
static int64_t fast_stride(const ta_plan *p, const ta_operand *op)
{
	bool zero = true, linear = true;
	int64_t expect = 1;
	for (int a = p->rank - 1; a >= 0; a--) {
		if (p->shape[a] != 1) {
			zero = zero && op->stride[a] == 0;
			linear = linear && op->stride[a] == expect;
		}
		expect *= p->shape[a];
	}
	return zero ? 0 : linear ? 1 : -1;
}

/* Decides whether plan p of ap takes a fast path and sets it up: REGION or FLAT addressing,
 * every operand contiguous or broadcast over the iteration shape, a region whose elements
 * are consecutive in the tile (each axis after the first one longer than 1 spans the tile)
 * and lies inside the tile memory, and for REGION an iteration shape of region_count
 * elements in the region's order. */
static void fast_prepare(cpu_apply *ap)
{
	const ta_plan *p = ap->plan;
	ap->fast = NULL;
	if (p->addr != TA_ADDR_REGION && p->addr != TA_ADDR_FLAT)
		return;
	bool outer = true; /* still on leading axes of extent 1 */
	bool first = true;
	for (int a = 0; a < p->tile_rank; a++) {
		if (outer && p->extent[a] == 1)
			continue;
		outer = false;
		if (!first && p->extent[a] != p->tile_shape[a])
			return;
		first = false;
	}
	if (ap->origin_offset < 0 || ap->origin_offset + p->region_count > ap->tile_elems)
		return;
	if (p->addr == TA_ADDR_REGION) {
		if (p->count != p->region_count || p->rank != p->tile_rank)
			return;
		for (int a = 0; a < p->rank; a++)
			if (p->shape[a] != p->extent[a])
				return;
	} else if (p->index[0].dtype != TA_DTYPE_I32 && p->index[0].dtype != TA_DTYPE_I64) {
		return;
	}
	int64_t vs = p->values.data ? fast_stride(p, &p->values) : 0;
	int64_t cs = p->compare.data ? fast_stride(p, &p->compare) : 0;
	int64_t ms = p->mask.data ? fast_stride(p, &p->mask) : 0;
	int64_t is = p->addr == TA_ADDR_FLAT ? fast_stride(p, &p->index[0]) : 0;
	if (vs < 0 || cs < 0 || ms < 0 || is < 0)
		return;
	ap->fast_flat = p->addr == TA_ADDR_FLAT;
	ap->fast_vstride = vs;
	ap->fast_cstride = cs;
	ap->fast_mstride = ms;
	ap->fast_istride = is;
	ap->fast = fast_fn_of(p->dtype);
}

/* Runs elements [k0, k1) with the plan's sem as a constant: one loop per TA_SEM row. */
static void run_range(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1, uint64_t *skipped,
                      uint64_t *applied, uint64_t *violations)
{
	switch (plan_sem(ap)) {
#define TA_SEM(id, ...)                                                                            \
	case TA_SEM_##id:                                                                          \
		run_range_sem(ap, pv, k0, k1, skipped, applied, violations, TA_SEM_##id);          \
		break;
#include "ta_ops.def"
#undef TA_SEM
	default:
		__builtin_unreachable();
	}
}

/* Merges pv into the tile with the plan's sem as a constant (as run_range). */
static void merge_private(cpu_apply *ap, cpu_private *pv)
{
	switch (plan_sem(ap)) {
#define TA_SEM(id, ...)                                                                            \
	case TA_SEM_##id:                                                                          \
		private_merge(ap, pv, TA_SEM_##id);                                                \
		break;
#include "ta_ops.def"
#undef TA_SEM
	default:
		__builtin_unreachable();
	}
}

/* Runs elements [k0, k1) of ap (with the private copy pv, or NULL) on the fast or the
 * generic loop, adding to the counters. */
static inline void run_chunk(cpu_apply *ap, cpu_private *pv, int64_t k0, int64_t k1,
                             uint64_t *skipped, uint64_t *applied, uint64_t *violations)
{
	if (ap->fast)
		ap->fast(ap, pv, k0, k1, skipped, applied);
	else
		run_range(ap, pv, k0, k1, skipped, applied, violations);
}

/* Runs every element of a plan that is not split (the caller's thread alone: no chunk
 * counter, no atomic counters), then merges a private copy. */
static void run_alone(cpu_apply *ap, uint64_t *skipped, uint64_t *applied, uint64_t *violations)
{
	if (ap->plan->count <= 0)
		return;
	cpu_private pv;
	bool have_private = ap->use_private && private_init(ap, &pv); /* else the global path */
	run_chunk(ap, have_private ? &pv : NULL, 0, ap->plan->count, skipped, applied, violations);
	if (have_private)
		merge_private(ap, &pv);
}

/* Claims and runs chunks of ap until none is left, then merges a private copy and adds
 * the counters. Called by the apply() caller and by every helping worker. */
static void participate(cpu_apply *ap)
{
	uint64_t skipped = 0, applied = 0, violations = 0;
	cpu_private pv;
	bool have_private = false;
	for (;;) {
		int64_t c = atomic_fetch_add_explicit(&ap->next_chunk, 1, memory_order_relaxed);
		if (c >= ap->nchunks)
			break;
		if (ap->use_private && !have_private)
			have_private = private_init(ap, &pv); /* on failure: the global path */
		int64_t k0 = c * ap->chunk;
		int64_t k1 = k0 + ap->chunk < ap->plan->count ? k0 + ap->chunk : ap->plan->count;
		run_chunk(ap, have_private ? &pv : NULL, k0, k1, &skipped, &applied, &violations);
	}
	if (have_private)
		merge_private(ap, &pv);
	atomic_fetch_add_explicit(&ap->skipped, skipped, memory_order_relaxed);
	atomic_fetch_add_explicit(&ap->applied, applied, memory_order_relaxed);
	atomic_fetch_add_explicit(&ap->violations, violations, memory_order_relaxed);
}

/* ---- the worker pool --------------------------------------------------------------- */

/* Removes job from the queue (pool lock held). */
static void queue_remove(cpu_backend *cb, cpu_job *job)
{
	cpu_job **pp = &cb->head, *prev = NULL;
	while (*pp && *pp != job) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp) {
		*pp = job->next;
		if (cb->tail == job)
			cb->tail = prev;
	}
	job->next = NULL;
	job->queued = false;
}

/* Worker thread: helps the job at the head of the queue until destroy() stops it. */
static void *worker_main(void *arg)
{
	cpu_backend *cb = arg;
	pthread_mutex_lock(&cb->lock);
	while (!cb->stopping) {
		cpu_job *job = cb->head;
		if (!job) {
			pthread_cond_wait(&cb->work_cv, &cb->lock);
			continue;
		}
		if (atomic_load_explicit(&job->ap->next_chunk, memory_order_relaxed) >=
		    job->ap->nchunks) {
			queue_remove(cb, job);
			continue;
		}
		job->helpers++;
		pthread_mutex_unlock(&cb->lock);
		participate(job->ap);
		pthread_mutex_lock(&cb->lock);
		if (job->queued)
			queue_remove(cb, job);
		if (--job->helpers == 0)
			pthread_cond_broadcast(&cb->idle_cv);
	}
	pthread_mutex_unlock(&cb->lock);
	return NULL;
}

/* Runs ap on the calling thread and the pool; returns when every chunk is done. */
static void run_parallel(cpu_backend *cb, cpu_apply *ap)
{
	cpu_job job = {.next = NULL, .ap = ap, .helpers = 0, .queued = true};
	pthread_mutex_lock(&cb->lock);
	/* job lives on this stack frame: it leaves the queue before this function returns. */
	if (cb->tail)
		cb->tail->next = &job;
	else
		cb->head = &job; // cppcheck-suppress autoVariables
	cb->tail = &job;         // cppcheck-suppress autoVariables
	pthread_cond_broadcast(&cb->work_cv);
	pthread_mutex_unlock(&cb->lock);

	participate(ap);

	pthread_mutex_lock(&cb->lock);
	if (job.queued)
		queue_remove(cb, &job);
	while (job.helpers > 0)
		pthread_cond_wait(&cb->idle_cv, &cb->lock);
	pthread_mutex_unlock(&cb->lock);
}

/* ---- the vtable -------------------------------------------------------------------- */

/* Element 0 of a checked plan of one element in global space under sem (a constant after
 * inlining): run_range_sem's body for k = 0 (iteration coordinates all zero, so every
 * operand is read at its first element), without the apply state and the loop set-up.
 * Returns the number of elements resolved outside the tile (0 or 1, never applied). */
static inline __attribute__((always_inline)) uint64_t
one_element_sem(const ta_plan *p, uint8_t *mem, int64_t tile_elems, ta_result *res, ta_sem sem)
{
	static const int64_t e[TA_MAX_RANK] = {0};
	const size_t es = ta_dtype_size(p->dtype);
	const uint64_t emask = es == 8 ? UINT64_MAX : (UINT64_C(1) << (es * 8)) - 1;
	const bool want_old = p->want_old && p->old_out != NULL;
	uint64_t violations = 0;
	int64_t r[TA_MAX_RANK] = {0};
	int how = ta_addr_resolve(p, e, r);
	int64_t off = 0;
	if (how > 0) { /* tile_offset: the defensive check of the region and the tile memory */
		for (int a = 0; a < p->tile_rank; a++) {
			if (r[a] < 0 || r[a] >= p->extent[a]) {
				off = -1;
				break;
			}
			off += (p->origin[a] + r[a]) * p->tile_stride[a];
		}
		if (off < 0 || off >= tile_elems) {
			violations = 1;
			how = 0;
		}
	}
	if (how <= 0) {
		if (how < 0)
			res->skipped = 1;
		if (want_old)
			write_bits(p->old_out, 0, es,
			           p->op == TA_OP_CAS    ? read_bits(p->compare.data, 0, es)
			           : p->op == TA_OP_LOAD ? p->padding_bits & emask
			                                 : 0);
		return violations;
	}
	ta_op op = effective_op(p->op);
	cpu_kind kind = kind_of(op, ta_dtype_is_int(p->dtype));
	uint64_t v = p->values.data ? read_bits(p->values.data, 0, es) : 0;
	uint64_t c = p->op == TA_OP_CAS ? read_bits(p->compare.data, 0, es) : 0;
	if (p->op == TA_OP_SUB) {
		uint64_t neg_sign = ta_float_sign(p->dtype); /* float sub flips the sign */
		v = neg_sign ? v ^ neg_sign : (~v + 1) & emask;
	}
	res->applied = 1;
	void *at = mem + off * (int64_t)es;
	uint64_t old;
	if (es == 2)
		old = atomic_elem16(op, p->dtype, emask, kind, at, v, c, sem);
	else if (es == 4)
		old = atomic_elem32(op, p->dtype, emask, kind, at, v, c, sem);
	else
		old = atomic_elem64(op, p->dtype, emask, kind, at, v, c, sem);
	if (want_old)
		write_bits(p->old_out, 0, es, old);
	return 0;
}

/* TA_OK, or the INTERNAL error for violations elements that resolved outside the tile
 * (never applied: a plan that lets that happen is a bug of the planner). */
static ta_status violations_status(uint64_t violations, ta_error *err)
{
	if (violations)
		return ta_error_set(err, TA_INTERNAL,
		                    "cpu backend: %llu element(s) resolved outside the tile and "
		                    "were not applied",
		                    (unsigned long long)violations);
	return TA_OK;
}

/* Applies a checked plan of one element in global space (a single add, CAS or load: most
 * small requests) as run_range would, element for element, without the set-up a longer
 * plan pays for (the apply state, the fast-path choice, the loop). */
static ta_status apply_one_element(const ta_plan *plan, void *mem, size_t tile_bytes,
                                   ta_result *result, ta_error *err)
{
	ta_result res = {0, 0};
	/* tile_bytes / size, by a shift: sizes are powers of two (ta_plan_check passed) */
	int64_t tile_elems = (int64_t)(tile_bytes >> __builtin_ctzll(ta_dtype_size(plan->dtype)));
	uint64_t violations = 0;
	switch ((unsigned)plan->sem < TA_SEM_COUNT ? plan->sem : TA_SEM_RELAXED) {
#define TA_SEM(id, ...)                                                                            \
	case TA_SEM_##id:                                                                          \
		violations = one_element_sem(plan, mem, tile_elems, &res, TA_SEM_##id);            \
		break;
#include "ta_ops.def"
#undef TA_SEM
	default:
		__builtin_unreachable();
	}
	if (result)
		*result = res;
	return violations_status(violations, err);
}

/* A merge-out's step 3 (ta_plan.h, ta_merge_out) after plan ran into mem: each target's
 * elements get mem's added, one atomic add each with the plan's sem (C11 atomics: other
 * threads may be applying other requests to a target meanwhile); with sem relaxed a zero
 * is skipped. Scope changes nothing on a CPU. */
static __attribute__((noinline, cold)) void merge_out_adds(const ta_plan *plan, const void *mem)
{
	const ta_merge_out *mo = plan->merge_out;
	const memory_order order = ta_sem_c11_order(plan->sem, TA_ACCESS_RMW);
	const bool skip_zero = plan->sem == TA_SEM_RELAXED;
	bool wide = ta_dtype_size(plan->dtype) == 8;
	for (int t = 0; t < mo->n; t++) {
		const ta_merge_target *tg = &mo->target[t];
		if (wide) {
			const uint64_t *src = (const uint64_t *)mem + tg->elem0;
			_Atomic uint64_t *dst = (_Atomic uint64_t *)tg->mem;
			for (int64_t i = 0; i < tg->elems; i++)
				if (src[i] != 0 || !skip_zero)
					atomic_fetch_add_explicit(&dst[i], src[i], order);
		} else {
			const uint32_t *src = (const uint32_t *)mem + tg->elem0;
			_Atomic uint32_t *dst = (_Atomic uint32_t *)tg->mem;
			for (int64_t i = 0; i < tg->elems; i++)
				if (src[i] != 0 || !skip_zero)
					atomic_fetch_add_explicit(&dst[i], src[i], order);
		}
	}
}

static inline __attribute__((always_inline)) ta_status
cpu_run_plan(cpu_backend *cb, void *mem, size_t tile_bytes, const ta_plan *plan, ta_result *result,
             ta_error *err);

/* vtable apply: see ta_backend.h; a merge-out (ta_plan.h) zeroes the tile memory first
 * and adds it into its targets after the plan ran. */
static ta_status cpu_apply_plan(ta_backend *be, void *mem, size_t tile_bytes, const ta_plan *plan,
                                ta_result *result, ta_error *err)
{
	cpu_backend *cb = (cpu_backend *)be;
	ta_result none = {0, 0};
	if (result)
		*result = none;
	if (!mem || !plan)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "cpu backend: no tile or no plan");
	ta_status st = ta_plan_check(plan, tile_bytes, NULL, err);
	if (st != TA_OK)
		return st;
	bool on_device = plan->old_out_device || plan->values.device || plan->compare.device ||
	                 plan->mask.device;
	for (int i = 0; i < plan->n_index && i < TA_MAX_RANK; i++) /* the index operands in use */
		on_device = on_device || plan->index[i].device;
	if (on_device)
		return ta_error_set(
		    err, TA_UNIMPLEMENTED,
		    "cpu backend: operands in device memory (CUDA IPC buffers) need "
		    "the CUDA backend");
	const ta_merge_out *mo = plan->merge_out;
	if (mo) {
		if (plan->count == 0) /* a merge-out of no elements does nothing */
			return TA_OK;
		if (mo->zero_first)
			memset(mem, 0, tile_bytes);
	}
	st = cpu_run_plan(cb, mem, tile_bytes, plan, result, err);
	if (st == TA_OK && mo)
		merge_out_adds(plan, mem);
	return st;
}

/* Runs a checked plan of host operands into mem (apply without the merge-out); inlined
 * into its one caller, so that the one-element path costs no call. */
static inline __attribute__((always_inline)) ta_status
cpu_run_plan(cpu_backend *cb, void *mem, size_t tile_bytes, const ta_plan *plan, ta_result *result,
             ta_error *err)
{
	if (plan->count == 1 && plan->space == TA_SPACE_GLOBAL)
		return apply_one_element(plan, mem, tile_bytes, result, err);

	/* a small plan runs on this thread alone: its state lives on the stack (no allocation
	 * per request); a split plan's is shared with the workers */
	cpu_apply local;
	bool inline_run = plan->count < TA_CPU_PARALLEL_MIN;
	cpu_apply *ap;
	if (inline_run) {
		memset(&local, 0, sizeof(local));
		ap = &local;
	} else {
		ap = calloc(1, sizeof(*ap));
		if (!ap)
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
			                    "cpu backend: out of memory for the apply state");
	}
	ap->plan = plan;
	ap->mem = mem;
	ap->esize = ta_dtype_size(plan->dtype);
	ap->tile_elems = (int64_t)(tile_bytes / ap->esize);
	ap->emask = ap->esize == 8 ? UINT64_MAX : (UINT64_C(1) << (ap->esize * 8)) - 1;
	ap->op = effective_op(plan->op);
	ap->negate = plan->op == TA_OP_SUB;
	ap->kind = kind_of(ap->op, ta_dtype_is_int(plan->dtype));
	int64_t stride = 1;
	for (int a = plan->tile_rank - 1; a >= 0; a--) {
		ap->region_stride[a] = stride;
		stride *= plan->extent[a];
		ap->origin_offset += plan->origin[a] * plan->tile_stride[a];
	}
	size_t private_bytes =
	    (size_t)plan->region_count * ap->esize + (size_t)(plan->region_count + 7) / 8;
	ap->use_private = plan->space == TA_SPACE_SHARED && ta_op_shared_ok(plan->op) &&
	                  !plan->want_old && private_bytes <= TA_CPU_PRIVATE_MAX &&
	                  plan->region_count <= 4 * plan->count + 65536;
	fast_prepare(ap);

	uint64_t skipped = 0, applied = 0, violations = 0;
	if (inline_run) {
		run_alone(ap, &skipped, &applied, &violations);
	} else {
		atomic_init(&ap->next_chunk, 0);
		atomic_init(&ap->skipped, 0);
		atomic_init(&ap->applied, 0);
		atomic_init(&ap->violations, 0);
		int64_t parts = (int64_t)(cb->nworkers + 1) * TA_CPU_CHUNKS_PER_PARTICIPANT;
		int64_t chunk = (plan->count + parts - 1) / parts;
		ap->chunk = chunk < TA_CPU_CHUNK_MIN ? TA_CPU_CHUNK_MIN : chunk;
		ap->nchunks = (plan->count + ap->chunk - 1) / ap->chunk;
		run_parallel(cb, ap);
		skipped = atomic_load(&ap->skipped);
		applied = atomic_load(&ap->applied);
		violations = atomic_load(&ap->violations);
		free(ap);
	}
	if (result) {
		result->skipped = skipped;
		result->applied = applied;
	}
	return violations_status(violations, err);
}

/* vtable tile_alloc: 64-byte aligned zeroed host memory. Every tile is first checked
 * against the memory really available (ta_hostmem.h): under overcommit posix_memalign
 * succeeds for memory that does not exist, and zeroing it would bring the OOM killer
 * instead of an error. The zeroing goes in chunks of TA_BACKEND_ZERO_CHUNK and stops with
 * UNAVAILABLE once ta_backend_cancel_allocs was called (the daemon's shutdown). */
static ta_status cpu_tile_alloc(ta_backend *be, size_t bytes, void **mem, ta_error *err)
{
	cpu_backend *cb = (cpu_backend *)be;
	*mem = NULL;
	if (bytes == 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "cpu backend: a tile needs at least one byte");
	size_t rounded = (bytes + TA_CPU_TILE_ALIGN - 1) / TA_CPU_TILE_ALIGN * TA_CPU_TILE_ALIGN;
	if (rounded < bytes)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "cpu backend: tile of %zu bytes is too large", bytes);
	if (ta_backend_allocs_cancelled(be))
		return ta_error_set(err, TA_UNAVAILABLE, "the daemon is shutting down");
	ta_error herr = {0};
	if (ta_hostmem_reserve(&cb->hostmem, rounded, &herr) != TA_OK)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "cpu backend: %s", herr.msg);
	void *p = NULL;
	int rc = posix_memalign(&p, TA_CPU_TILE_ALIGN, rounded);
	if (rc != 0 || !p)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "cpu backend: cannot allocate %zu bytes of tile memory: %s",
		                    bytes, strerror(rc ? rc : ENOMEM));
	for (size_t done = 0; done < rounded; done += TA_BACKEND_ZERO_CHUNK) {
		if (done && ta_backend_allocs_cancelled(be)) {
			free(p);
			return ta_error_set(err, TA_UNAVAILABLE,
			                    "the daemon is shutting down: the allocation of %zu "
			                    "bytes was cancelled after %zu",
			                    bytes, done);
		}
		size_t n =
		    rounded - done < TA_BACKEND_ZERO_CHUNK ? rounded - done : TA_BACKEND_ZERO_CHUNK;
		memset((char *)p + done, 0, n);
	}
	*mem = p;
	return TA_OK;
}

/* vtable tile_footprint: the heap chunk behind mem (malloc_usable_size plus the chunk
 * header, rounded up to the alignment) plus the alignment slack that an aligned allocation
 * leaves before the next one; TA_CPU_TILE_FOOTPRINT before the allocation (mem NULL) and
 * without glibc. */
static uint64_t cpu_tile_footprint(ta_backend *be, void *mem, size_t bytes)
{
	(void)be;
#ifdef __GLIBC__
	if (mem) {
		size_t chunk = malloc_usable_size(mem) + sizeof(size_t);
		return (chunk + TA_CPU_TILE_ALIGN - 1) / TA_CPU_TILE_ALIGN * TA_CPU_TILE_ALIGN +
		       TA_CPU_TILE_ALIGN;
	}
#else
	(void)mem;
#endif
	return TA_CPU_TILE_FOOTPRINT(bytes);
}

/* vtable tile_free. */
static void cpu_tile_free(ta_backend *be, void *mem)
{
	(void)be;
	free(mem);
}

/* vtable info. */
static void cpu_info(ta_backend *be, ta_backend_info *info)
{
	cpu_backend *cb = (cpu_backend *)be;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "cpu");
	snprintf(info->device, sizeof(info->device), "%s", cb->device);
	info->device_memory = 0;
	info->compute_capability[0] = '\0';
	info->workers = cb->nworkers;
}

/* Stops and joins the first n workers. */
static void stop_workers(cpu_backend *cb, int n)
{
	pthread_mutex_lock(&cb->lock);
	cb->stopping = true;
	pthread_cond_broadcast(&cb->work_cv);
	pthread_mutex_unlock(&cb->lock);
	for (int i = 0; i < n; i++)
		pthread_join(cb->threads[i], NULL);
}

/* vtable destroy. */
static void cpu_destroy(ta_backend *be)
{
	cpu_backend *cb = (cpu_backend *)be;
	if (cb->async) { /* its calls may still use the workers */
		ta_async_thread_destroy(cb->async);
		free(cb->async);
	}
	stop_workers(cb, cb->nworkers);
	ta_hostmem_destroy(&cb->hostmem);
	pthread_cond_destroy(&cb->idle_cv);
	pthread_cond_destroy(&cb->work_cv);
	pthread_mutex_destroy(&cb->lock);
	free(cb->threads);
	free(cb);
}

/* The backend's completion thread and lanes (ta_async_thread.h), made on first use; NULL
 * when there is no memory for it. */
static ta_async_thread *cpu_async(cpu_backend *cb)
{
	pthread_mutex_lock(&cb->lock);
	if (!cb->async) {
		ta_async_thread *t = malloc(sizeof(*t));
		if (t && ta_async_thread_init(t, &cb->base, cb->lanes) != 0) {
			free(t);
			t = NULL;
		}
		__atomic_store_n(&cb->async, t, __ATOMIC_RELEASE); /* (cpu_poll_async) */
	}
	ta_async_thread *t = cb->async;
	pthread_mutex_unlock(&cb->lock);
	return t;
}

/* vtable apply_async: the calls run in order in the caller's polls when it attached, else
 * on the backend's completion thread. */
static void cpu_apply_async(ta_backend *be, ta_apply_call *calls, size_t n, void (*done)(void *arg),
                            void *arg)
{
	ta_async_thread *t = cpu_async((cpu_backend *)be);
	if (!t) { /* no memory for it: correct, only not asynchronous */
		ta_backend_apply_many(be, calls, n);
		done(arg);
		return;
	}
	ta_async_thread_submit(t, calls, n, done, arg);
}

/* vtable async_attach: the calling thread takes a lane (TILEATOM_CPU_LANES of them). */
static bool cpu_async_attach(ta_backend *be)
{
	ta_async_thread *t = cpu_async((cpu_backend *)be);
	return t && ta_async_thread_attach(t);
}

/* vtable poll_async: runs the calling thread's queued calls. */
static bool cpu_poll_async(ta_backend *be)
{
	cpu_backend *cb = (cpu_backend *)be;
	/* made before the thread attached, and never changed until the backend goes */
	ta_async_thread *t = __atomic_load_n(&cb->async, __ATOMIC_ACQUIRE);
	return t && ta_async_thread_poll(t);
}

/* The CPU backend's operations. */
static const ta_backend_vtbl cpu_vtbl = {
    .destroy = cpu_destroy,
    .tile_alloc = cpu_tile_alloc,
    .tile_free = cpu_tile_free,
    .tile_footprint = cpu_tile_footprint,
    .apply = cpu_apply_plan,
    .info = cpu_info,
    .apply_async = cpu_apply_async,
    .async_attach = cpu_async_attach,
    .poll_async = cpu_poll_async,
};

/* Fills buf with the CPU model name from /proc/cpuinfo and the online CPU count. */
static void describe_cpu(char *buf, size_t n, long ncpu)
{
	char model[96] = "host CPU";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[256];
		while (fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':');
			if (strncmp(line, "model name", 10) == 0 && colon) {
				colon++;
				while (*colon == ' ' || *colon == '\t')
					colon++;
				colon[strcspn(colon, "\n")] = '\0';
				snprintf(model, sizeof(model), "%s", colon);
				break;
			}
		}
		fclose(f);
	}
	snprintf(buf, n, "%s (%ld online CPUs)", model, ncpu);
}

ta_backend *ta_cpu_backend_new(int nthreads, ta_error *err)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	int n =
	    nthreads == 0 ? (int)(ncpu > TA_CPU_MAX_WORKERS ? TA_CPU_MAX_WORKERS : ncpu) : nthreads;
	if (n < 2)
		n = 2;
	if (n > TA_CPU_MAX_WORKERS)
		n = TA_CPU_MAX_WORKERS;

	long lanes = TA_ASYNC_LANES;
	const char *env = getenv("TILEATOM_CPU_LANES");
	if (env && *env && (!ta_env_count(env, &lanes) || lanes > TA_ASYNC_LANES)) {
		ta_error_set(err, TA_INVALID_ARGUMENT,
		             "TILEATOM_CPU_LANES='%s' is not a count of lanes from 0 to %d (0: the "
		             "loops' asynchronous calls go through the completion thread)",
		             env, TA_ASYNC_LANES);
		return NULL;
	}
	cpu_backend *cb = calloc(1, sizeof(*cb));
	if (!cb) {
		ta_error_set(err, TA_RESOURCE_EXHAUSTED, "cpu backend: out of memory");
		return NULL;
	}
	cb->lanes = (int)lanes;
	cb->base.vt = &cpu_vtbl;
	describe_cpu(cb->device, sizeof(cb->device), ncpu);
	cb->threads = calloc((size_t)n, sizeof(*cb->threads));
	if (!cb->threads) {
		free(cb);
		ta_error_set(err, TA_RESOURCE_EXHAUSTED, "cpu backend: out of memory");
		return NULL;
	}
	int rc = pthread_mutex_init(&cb->lock, NULL);
	if (rc == 0) {
		rc = pthread_cond_init(&cb->work_cv, NULL);
		if (rc == 0) {
			rc = pthread_cond_init(&cb->idle_cv, NULL);
			if (rc == 0) {
				rc = ta_hostmem_init(&cb->hostmem);
				if (rc != 0)
					pthread_cond_destroy(&cb->idle_cv);
			}
			if (rc != 0)
				pthread_cond_destroy(&cb->work_cv);
		}
		if (rc != 0)
			pthread_mutex_destroy(&cb->lock);
	}
	if (rc != 0) {
		free(cb->threads);
		free(cb);
		ta_error_set(err, TA_INTERNAL, "cpu backend: cannot initialise locks: %s",
		             strerror(rc));
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		rc = pthread_create(&cb->threads[i], NULL, worker_main, cb);
		if (rc != 0) {
			stop_workers(cb, i);
			ta_hostmem_destroy(&cb->hostmem);
			pthread_cond_destroy(&cb->idle_cv);
			pthread_cond_destroy(&cb->work_cv);
			pthread_mutex_destroy(&cb->lock);
			free(cb->threads);
			free(cb);
			ta_error_set(err, rc == EAGAIN ? TA_RESOURCE_EXHAUSTED : TA_INTERNAL,
			             "cpu backend: cannot start worker thread %d of %d: %s", i + 1,
			             n, strerror(rc));
			return NULL;
		}
	}
	cb->nworkers = n;
	return &cb->base;
}
