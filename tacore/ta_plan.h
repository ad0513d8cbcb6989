/* ta_plan.h: a validated, backend-neutral description of one atomic or memory request.
 *
 * The daemon decodes a wire request into a ta_request (borrowed views of the operand
 * bytes), and ta_plan_build() checks it against the tile and the legality table
 * (ta_ops.def) and resolves every addressing form into one shape:
 *
 *   for every element e of the iteration shape `shape` (row-major, `count` elements):
 *     if the mask is present and mask[e] == 0: nothing is read or written
 *     coordinates c[a] of the destination along each tile axis a:
 *        REGION : c[a] = origin[a] + e[a]
 *        SCATTER: c[a] = origin[a] + e[a] for a != dim; c[dim] = origin[dim] + index0[e]
 *        INDEXED: c[a] = origin[a] + index_a[e]
 *        FLAT   : the row-major offset index0[e] inside the region, unravelled
 *     an index outside [0, extent[a]) (FLAT: outside [0, region element count)) is out of
 *     range: the element is skipped and counted (check_bounds) -- with check_bounds off,
 *     ta_plan_build already rejected the request with TA_OUT_OF_RANGE
 *     destination offset = sum_a c[a] * tile_stride[a]
 *     apply op with values[e] (and compare[e]); old_out[e] = the value seen before
 *
 * Operands (values, compare, mask, indices) are read through per-axis element strides
 * over the iteration shape; a stride of 0 broadcasts. All pointers in a plan are host
 * memory owned by the caller, which a backend stages wherever it needs them, except operands
 * marked device (and old_out with old_out_device): device memory of a client's CUDA IPC
 * buffer, which only the CUDA backend reads and writes (in place); nothing on the host
 * dereferences them, so ta_plan_build refuses a device padding scalar and check_bounds off
 * (reject-whole) with device indices or mask.
 *
 * Output for elements that are masked off or skipped: the compare value for CAS, the
 * padding value for LOAD, and all-zero bits otherwise.
 *
 * Arithmetic rules every backend follows bit for bit:
 *  - integers: add/sub wrap (two's complement); sub is add of the negation; min/max are
 *    signed for int32/int64 and unsigned for uint32/uint64.
 *  - float32 add/sub flush subnormal inputs and results to a zero of the same sign (as the
 *    GPU's global atom.add.f32 does); float64 does not; float16/bfloat16 round the exact
 *    sum once to nearest even (.noftz). Sub adds the operand with its sign bit flipped.
 *    A NaN result of float32/16-bit add/sub is stored as the canonical NaN 0x7fffffff /
 *    0x7fff; float64 follows sm_90's atom.add.f64: a NaN operand's bits are stored, else a
 *    NaN tile value stays, else (inf - inf) 0xfff8000000000000.
 *  - float min/max: -0.0 < +0.0; a NaN in the tile stays; otherwise a NaN operand's bits
 *    are stored; otherwise the ordinary comparison decides.
 *  - exch/cas work on bit patterns (cas: -0.0 != +0.0; a NaN equals identical NaN bits).
 *  - negative indices are out of range (no Python-style wrap-around). */
#ifndef TA_PLAN_H
#define TA_PLAN_H

#include "ta_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ta_addr (the addressing forms) and ta_family (the request families) are table enums of
 * ta_types.h (TA_ADDR and TA_FAMILY rows of ta_ops.def). */

/* A borrowed, unvalidated view of one operand array as it came off the wire. */
typedef struct ta_array_view {
	bool present;               /* false: the operand was not given */
	ta_dtype dtype;             /* element type */
	int rank;                   /* 0 = scalar */
	int64_t shape[TA_MAX_RANK]; /* extents, rank entries */
	const void *data;           /* packed little-endian elements */
	size_t nbytes;              /* bytes at data (checked against shape x dtype) */
	bool device;                /* data is device memory (a client's CUDA IPC buffer) */
} ta_array_view;

/* What a tile is, as the plan builder needs it. */
typedef struct ta_tile_shape {
	ta_dtype dtype;             /* element type */
	int rank;                   /* 1..TA_MAX_RANK */
	int64_t shape[TA_MAX_RANK]; /* extents */
} ta_tile_shape;

/* A decoded request, before validation. */
typedef struct ta_request {
	ta_family family;                   /* request kind */
	ta_op op;                           /* operation */
	ta_addr addr;                       /* addressing form */
	bool has_region;                    /* false: the region is the whole tile */
	int region_rank;                    /* entries in region_origin/region_shape */
	int64_t region_origin[TA_MAX_RANK]; /* region origin in the tile */
	int64_t region_shape[TA_MAX_RANK];  /* region extents */
	int64_t scatter_dim;                /* SCATTER: the axis indices address (as sent) */
	int n_index;                        /* index arrays given (INDEXED: tile rank, else 1) */
	ta_array_view index[TA_MAX_RANK];   /* index arrays (INT32 / INT64) */
	ta_array_view values;               /* values (CAS: desired); STORE: the data */
	ta_array_view compare;              /* CAS: expected values */
	ta_array_view mask;                 /* BOOL mask, broadcast to the element shape */
	ta_array_view padding;              /* LOAD: scalar returned for masked / skipped */
	ta_sem sem;                         /* memory order */
	ta_scope scope;                     /* scope */
	ta_space space;                     /* global or shared accumulation */
	bool check_bounds;                  /* skip and count out-of-range (true) or reject */
	bool want_old;                      /* return pre-RMW / loaded values */
} ta_request;

/* One operand resolved against the iteration shape. */
typedef struct ta_operand {
	const void *data;            /* NULL when absent */
	ta_dtype dtype;              /* element type */
	int64_t stride[TA_MAX_RANK]; /* element stride per iteration axis; 0 broadcasts */
	bool device; /* data is device memory (the CUDA backend reads it in place) */
} ta_operand;

/* Most targets a merge-out names (a sharded tile's parts: TA_MAX_DEVICES of ta_place.h). */
#define TA_MERGE_TARGETS_MAX 64

/* One memory a merge-out adds into (ta_merge_out). */
typedef struct ta_merge_target {
	void *mem;     /* elems elements of the plan's dtype: the backend's device memory, or
	                  (remote) another device's that the backend's device writes (CUDA: over
	                  peer access; CPU pools: host memory) */
	int64_t elem0; /* the tile element added into mem[0] */
	int64_t elems; /* elements: tile [elem0, elem0 + elems) is added into mem[0, elems) */
	bool remote;   /* mem is another device's memory: its adds are at scope sys */
} ta_merge_target;

/* Work around a plan whose tile memory is a private scratch (kernels/ta_multi.c: the
 * partial tile of a histogram into a sharded tile), done by the backend inside the one
 * apply call (the CUDA backend queues it all on one stream with one wait):
 *   1. zero_first: every byte of the tile memory is zeroed;
 *   2. the plan runs into the tile memory as without a merge-out (same counts);
 *   3. each target's elements get the tile's elements added, mem[i] += tile[elem0 + i],
 *      atomically (integer add, wrapping), with the plan's sem at the plan's scope (a
 *      remote target: scope sys); with sem relaxed a zero may be skipped (it changes
 *      nothing).
 * Legal only with an add or sub of a 32- or 64-bit integer dtype without old values; a plan
 * of no elements does nothing at all. A backend that fails after step 3 began may have
 * added into some targets. Never batched (ta_plan_async_ok is false); the CPU and CUDA
 * backends honour it; the multi-device layer hands it on with a tile wholly on one device
 * and refuses it on a sharded tile. The caller keeps the tile memory
 * to itself during the call (nothing else reads or writes it). */
typedef struct ta_merge_out {
	bool zero_first;               /* zero the tile memory before the plan runs */
	int n;                         /* targets, 0..TA_MERGE_TARGETS_MAX */
	const ta_merge_target *target; /* the targets (n of them) */
} ta_merge_out;

/* A validated request, ready for a backend. */
typedef struct ta_plan {
	ta_op op;                         /* operation */
	ta_dtype dtype;                   /* tile dtype */
	ta_sem sem;                       /* memory order */
	ta_scope scope;                   /* scope */
	ta_space space;                   /* global or shared */
	ta_addr addr;                     /* addressing form */
	bool check_bounds;                /* out-of-range: skip (true); never reached (false) */
	bool want_old;                    /* old_out is filled */
	int rank;                         /* rank of the iteration shape (0 = one element) */
	int64_t shape[TA_MAX_RANK];       /* iteration shape */
	int64_t count;                    /* elements in the iteration shape */
	int tile_rank;                    /* tile rank */
	int64_t tile_shape[TA_MAX_RANK];  /* tile extents */
	int64_t tile_stride[TA_MAX_RANK]; /* tile element strides (row-major) */
	int64_t origin[TA_MAX_RANK];      /* region origin in the tile */
	int64_t extent[TA_MAX_RANK];      /* region extents */
	int64_t region_count;             /* elements in the region */
	int scatter_dim;                  /* SCATTER: the indexed axis */
	int n_index;                      /* index operands in use */
	ta_operand index[TA_MAX_RANK];    /* index operands (INT32 / INT64) */
	ta_operand values;                /* values / desired / store data */
	ta_operand compare;               /* CAS expected values */
	ta_operand mask;                  /* BOOL mask, data NULL when absent */
	uint64_t padding_bits;            /* LOAD: bits returned for masked / skipped */
	void *old_out;                    /* want_old: count elements of dtype, contiguous */
	bool old_out_device;              /* old_out is device memory (a CUDA IPC buffer) */
	bool prechecked;                  /* set by a caller that built the plan with
	                                     ta_plan_build and changed nothing but old_out and
	                                     old_out_device since: ta_plan_check then checks
	                                     only those and the tile memory's size (false after
	                                     ta_plan_build) */
	const ta_merge_out *merge_out;    /* NULL (ta_plan_build's), or the zeroing before and
	                                     the adds into other memory after the plan that the
	                                     backend runs with it (ta_merge_out); checked by
	                                     ta_plan_check, prechecked or not */
} ta_plan;

/* What a backend reports after applying a plan. */
typedef struct ta_result {
	uint64_t skipped; /* elements skipped as out of range */
	uint64_t applied; /* elements applied (not masked off, not skipped) */
} ta_result;

/* Validates req against tile and the legality table and fills plan (old_out NULL: the
 * caller allocates plan->count elements when plan->want_old). With check_bounds off,
 * every unmasked index is checked here and an out-of-range one gives TA_OUT_OF_RANGE.
 * Returns TA_OK, or an error (INVALID_ARGUMENT, OUT_OF_RANGE, RESOURCE_EXHAUSTED when index
 * arrays broadcast past 2^32 elements over a smaller region) with a message naming the
 * problem; on error nothing needs freeing. */
ta_status ta_plan_build(ta_plan *plan, const ta_tile_shape *tile, const ta_request *req,
                        ta_error *err);
/* ta_plan_build without its shortcut for one-element requests (FLAT or INDEXED with scalar
 * indices and scalar operands), which must give the same plan: the tests hold the two to
 * each other. */
ta_status ta_plan_build_full(ta_plan *plan, const ta_tile_shape *tile, const ta_request *req,
                             ta_error *err);

/* Re-checks a plan against tile memory of tile_bytes before a backend runs it: defence in
 * depth, since a plan from ta_plan_build always passes. A plan marked prechecked (the
 * daemon marks the plans it has just built) is only checked for what may have changed
 * since ta_plan_build: the tile memory holds the plan's tile, and old_out is given when
 * old values are wanted. Otherwise it refuses (INVALID_ARGUMENT, with a
 * message) any plan whose op, dtype, sem, scope or space is illegal, whose region leaves
 * the tile or whose sizes overflow, whose tile strides are not row-major, whose tile is
 * larger than the memory, whose counts do not match its shapes, whose addressing or
 * operands are inconsistent (missing, wrong dtype, negative or overflowing strides), or
 * that wants old values without an output; prechecked or not, it refuses a merge-out that
 * ta_plan_check_merge_out refuses. *tile_elems (may be NULL) gets the tile's
 * element count. Both backends call it first. */
ta_status ta_plan_check(const ta_plan *plan, size_t tile_bytes, int64_t *tile_elems, ta_error *err);
/* The merge-out part of ta_plan_check (it calls this whatever prechecked says): OK without
 * one; otherwise refuses (INVALID_ARGUMENT, with a message) a merge-out on anything but an
 * add or sub of a 32- or 64-bit integer dtype without old values, with more than
 * TA_MERGE_TARGETS_MAX targets or none given, a target without memory or whose elements
 * leave the tile's tile_elems, or whose adds (the plan's sem at its scope, sys when remote)
 * are not a legal variant of add. */
ta_status ta_plan_check_merge_out(const ta_plan *plan, int64_t tile_elems, ta_error *err);

/* The elements of a plan the host itself moves: the plan's count when every operand and
 * old_out are host memory (the host applies or stages them all); otherwise, with some
 * operand in device memory, the largest span of a host operand or the old values copied
 * back to the host, and at least 1 (the launch and its wait). The daemon compares it with
 * its inline limit: a request whose operands the GPU reads in place costs the event loop a
 * launch, not a copy. */
int64_t ta_plan_host_elements(const ta_plan *plan);

/* Checks that an operand view's byte count matches its shape and dtype and that its
 * shape is sane; what names the operand in messages. */
ta_status ta_array_view_check(const ta_array_view *view, const char *what, ta_error *err);

/* Initialises a request with the defaults (relaxed, gpu, global, check_bounds on). */
void ta_request_init(ta_request *req);

/* Fills req as a whole-tile (or region) element-wise op: a convenience for tests and the
 * daemon's read/write/fill paths. */
void ta_request_region(ta_request *req, ta_family family, ta_op op);

/* Element-wise helpers shared by backends -------------------------------------------*/

/* Resolves element k (row-major over plan->shape) to its tile element offset. Returns 1
 * and sets *offset when the element is to be applied, 0 when masked off, -1 when out of
 * range (skipped). The reference definition of addressing, built on ta_addr.h, which the
 * CPU backend shares (stepping coordinates instead of dividing); the CUDA kernels
 * implement it faster, and the tests hold them to it. */
int ta_plan_resolve(const ta_plan *plan, int64_t k, int64_t *offset);

/* Reads element k of an operand as raw bits (zero-extended), dtype size from plan. */
uint64_t ta_operand_bits(const ta_plan *plan, const ta_operand *op, int64_t k);

/* Bytes a tile of this shape occupies; 0 on overflow. */
uint64_t ta_tile_bytes(const ta_tile_shape *tile);

#ifdef __cplusplus
}
#endif
#endif /* TA_PLAN_H */
