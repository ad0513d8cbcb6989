/* ta_addr.h: element addressing of a plan (the rules in ta_plan.h), defined once for the
 * plan builder (ta_plan_resolve, the reference; ta_operand_bits; the bounds scan with
 * check_bounds off) and the CPU backend's element loop. static inline so that the CPU
 * backend's hot loop compiles it in place; that loop steps the iteration coordinates with
 * ta_addr_step instead of unravelling every element. Plain C. The CUDA kernels keep their
 * own form of it, unrolled over TA_MAX_RANK (kernels/ta_cuda_kernels.cuh); the tests hold
 * it to ta_plan_resolve. */
#ifndef TA_ADDR_H
#define TA_ADDR_H

#include <stdint.h>
#include <string.h>

#include "ta_plan.h"

/* Unravels element k (row-major over p->shape) into iteration coordinates e. */
static inline void ta_addr_unravel(const ta_plan *p, int64_t k, int64_t *e)
{
	for (int a = p->rank - 1; a >= 0; a--) {
		e[a] = k % p->shape[a];
		k /= p->shape[a];
	}
}

/* Steps iteration coordinates e to the next element in row-major order, without a
 * division (after the last element e is all zeros again). */
static inline void ta_addr_step(const ta_plan *p, int64_t *e)
{
	for (int a = p->rank - 1; a >= 0; a--) {
		if (++e[a] < p->shape[a])
			break;
		e[a] = 0;
	}
}

/* Element offset of operand op at iteration coordinates e. */
static inline int64_t ta_addr_operand_offset(const ta_plan *p, const ta_operand *op,
                                             const int64_t *e)
{
	int64_t off = 0;
	for (int a = 0; a < p->rank; a++)
		off += e[a] * op->stride[a];
	return off;
}

/* Index operand i (int32 or int64) at iteration coordinates e, as a signed value. */
static inline int64_t ta_addr_index(const ta_plan *p, int i, const int64_t *e)
{
	const ta_operand *op = &p->index[i];
	const char *data = (const char *)op->data;
	int64_t off = ta_addr_operand_offset(p, op, e);
	if (op->dtype == TA_DTYPE_I32) {
		int32_t v;
		memcpy(&v, data + off * 4, 4);
		return v;
	}
	int64_t v;
	memcpy(&v, data + off * 8, 8);
	return v;
}

/* Unravels f, a row-major offset inside the region (0 <= f < region_count), into region
 * coordinates r. What is left for the first axis is already below its extent, so it takes
 * no division (a 1-D region none at all). */
static inline void ta_addr_region_coords(const ta_plan *p, int64_t f, int64_t *r)
{
	for (int a = p->tile_rank - 1; a > 0; a--) {
		r[a] = f % p->extent[a];
		f /= p->extent[a];
	}
	r[0] = f;
}

/* Resolves the element at iteration coordinates e into region coordinates r (relative to
 * the region origin, one per tile axis): the mask first, then the addressing form, then the
 * bounds. Returns 1 when the element is to be applied, 0 when it is masked off, -1 when an
 * index lies outside the region (skipped) or the form is unknown; r is complete only for 1. */
static inline int ta_addr_resolve(const ta_plan *p, const int64_t *e, int64_t *r)
{
	if (p->mask.data &&
	    ((const uint8_t *)p->mask.data)[ta_addr_operand_offset(p, &p->mask, e)] == 0)
		return 0;
	switch (p->addr) {
	case TA_ADDR_REGION:
		for (int a = 0; a < p->tile_rank; a++)
			r[a] = e[a];
		return 1;
	case TA_ADDR_SCATTER: {
		int d = p->scatter_dim;
		for (int a = 0; a < p->tile_rank; a++)
			r[a] = e[a];
		r[d] = ta_addr_index(p, 0, e);
		return r[d] >= 0 && r[d] < p->extent[d] ? 1 : -1;
	}
	case TA_ADDR_INDEXED:
		for (int a = 0; a < p->tile_rank; a++) {
			r[a] = ta_addr_index(p, a, e);
			if (r[a] < 0 || r[a] >= p->extent[a])
				return -1;
		}
		return 1;
	case TA_ADDR_FLAT: {
		int64_t f = ta_addr_index(p, 0, e);
		if (f < 0 || f >= p->region_count)
			return -1;
		ta_addr_region_coords(p, f, r);
		return 1;
	}
	default:
		return -1;
	}
}

#endif /* TA_ADDR_H */
