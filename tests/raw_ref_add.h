/* raw_ref_add.h: for the suites that speak the wire format directly (check_integration.c,
 * check_cuda_ipc.c): a raw indexed flat add of the INT32 scalar 1 whose 8 INT32 indices are
 * a BufferRef into a registered buffer, the request the buffer range checks are tried
 * with. Header-only (the suites share no protocol code besides the generated one). */
#ifndef TA_TESTS_RAW_REF_ADD_H
#define TA_TESTS_RAW_REF_ADD_H

#include <stdint.h>

#include "tileatom.pb-c.h"

/* The request and every message it points into (it must not move once initialised). */
typedef struct raw_ref_add {
	Tileatom__Request req;             /* the request to send */
	Tileatom__IndexedAtomicRequest ix; /* its body; tests may set ix.options */
	Tileatom__IndexedAddr addr;        /* flat, one index array */
	Tileatom__Array index;             /* 8 INT32 indices, by reference */
	Tileatom__Array *index_ptr;        /* &index */
	Tileatom__Array values;            /* the scalar 1 */
	Tileatom__BufferRef ref;           /* where the indices are: tests edit it */
	int64_t shape;                     /* 8 */
	int32_t one;                       /* 1 */
} raw_ref_add;

/* Initialises a as request id adding 1 to tile at the indices in length bytes at offset of
 * buffer buffer_id. */
static inline void raw_ref_add_init(raw_ref_add *a, const char *tile, uint64_t id,
                                    uint64_t buffer_id, uint64_t offset, uint64_t length)
{
	tileatom__indexed_atomic_request__init(&a->ix);
	tileatom__indexed_addr__init(&a->addr);
	tileatom__array__init(&a->index);
	tileatom__array__init(&a->values);
	tileatom__buffer_ref__init(&a->ref);
	a->shape = 8;
	a->one = 1;
	a->index.dtype = TILEATOM__DTYPE__INT32;
	a->index.n_shape = 1;
	a->index.shape = &a->shape;
	a->index.shared = &a->ref;
	a->ref.buffer_id = buffer_id;
	a->ref.offset = offset;
	a->ref.length = length;
	a->values.dtype = TILEATOM__DTYPE__INT32;
	a->values.data.data = (uint8_t *)&a->one;
	a->values.data.len = sizeof(a->one);
	a->index_ptr = &a->index;
	a->addr.flat = true;
	a->addr.n_indices = 1;
	a->addr.indices = &a->index_ptr;
	a->ix.tile = (char *)tile;
	a->ix.op = TILEATOM__OP__ADD;
	a->ix.addr = &a->addr;
	a->ix.values = &a->values;
	tileatom__request__init(&a->req);
	a->req.id = id;
	a->req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
	a->req.indexed = &a->ix;
}

#endif /* TA_TESTS_RAW_REF_ADD_H */
