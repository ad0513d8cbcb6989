/* ta_vectors.h: backend-neutral semantic test vectors. Every vector is a request against a
 * small tile with exact expected tile contents, pre-RMW values and counts (or an expected
 * rejection); the sweep runs every legal op x dtype over 1-D, 2-D and 3-D tiles and
 * sub-regions against the sequential reference of ta_test_util.h. Tiles are written and
 * read only through STORE / LOAD plans, so the same code runs on host or device memory.
 *
 * Entry points (check_semantics.c runs them on the CPU backend; check_cuda.c can run them
 * on the CUDA backend unchanged):
 *
 *   size_t ta_vectors_count(void);
 *   const ta_vector *ta_vectors_get(size_t i);
 *   bool ta_vector_run(ta_backend *be, const ta_vector *v, char *msg, size_t msglen);
 *       one vector; false with msg naming the vector and the first mismatch
 *   int ta_vectors_run(ta_backend *be, FILE *log);
 *       every vector; returns the number that failed, one line each on log (may be NULL)
 *   int ta_vectors_sweep(ta_backend *be, ta_op op, uint64_t seed, FILE *log);
 *       reference sweep of op (TA_OP_NONE: every op); returns failed cases
 *   int ta_vectors_shared_large(ta_backend *be, FILE *log);
 *       plans of 2^18 elements with many duplicates, global vs shared space vs reference
 *       (large enough for the CPU pool to split them); returns failed cases
 *
 * Typical use in a Check test:
 *   char msg[512];
 *   ck_assert_msg(ta_vector_run(be, ta_vectors_get(_i), msg, sizeof(msg)), "%s", msg);
 * with tcase_add_loop_test(tc, test_fn, 0, (int)ta_vectors_count()). */
#ifndef TA_VECTORS_H
#define TA_VECTORS_H

#include <stdio.h>

#include "ta_backend.h"

/* One operand of a vector. */
typedef struct ta_vec_operand {
	const char *data;           /* elements as text (ta_test_util.h); NULL = absent */
	ta_dtype dtype;             /* NONE: the tile dtype (bool for masks, int32 for indices) */
	int rank;                   /* 0 = scalar */
	int64_t shape[TA_MAX_RANK]; /* extents */
} ta_vec_operand;

/* One semantic test vector. Zero-initialised fields mean: whole tile, elementwise family,
 * region addressing, relaxed, global space, bounds checking on, status OK. */
typedef struct ta_vector {
	const char *name;                  /* what the vector shows */
	ta_dtype dtype;                    /* tile dtype */
	int rank;                          /* tile rank */
	int64_t shape[TA_MAX_RANK];        /* tile shape */
	const char *init;                  /* initial tile elements; NULL = all zero */
	ta_family family;                  /* request family */
	ta_op op;                          /* operation */
	ta_addr addr;                      /* addressing form */
	int region_rank;                   /* 0 = whole tile, else the tile rank */
	int64_t origin[TA_MAX_RANK];       /* region origin */
	int64_t extent[TA_MAX_RANK];       /* region shape */
	int dim;                           /* scatter dim */
	int n_index;                       /* index arrays given */
	ta_vec_operand index[TA_MAX_RANK]; /* index arrays */
	ta_vec_operand values;             /* values (CAS: desired; STORE: data) */
	ta_vec_operand compare;            /* CAS expected values */
	ta_vec_operand mask;               /* mask */
	ta_vec_operand padding;            /* LOAD padding scalar */
	ta_sem sem;                        /* memory order */
	ta_space space;                    /* global or shared */
	bool no_bounds;                    /* check_bounds off */
	bool want_old;                     /* ask for pre-RMW values */
	ta_status status;                  /* expected status */
	const char *message;               /* substring of the expected error message */
	const char *tile;                  /* expected tile after (status OK) */
	const char *old;                   /* expected old / loaded values; NULL: not checked */
	const char *counts;                /* "applied skipped"; NULL: all applied, 0 skipped */
} ta_vector;

/* Number of vectors in the table. */
size_t ta_vectors_count(void);

/* Vector i, or NULL when i is out of range. */
const ta_vector *ta_vectors_get(size_t i);

/* Runs v on be: allocates a tile, writes init, builds and applies the request, reads the
 * tile back and compares everything bit for bit. Returns true when it passed; otherwise
 * false with msg naming the vector and the first mismatch. */
bool ta_vector_run(ta_backend *be, const ta_vector *v, char *msg, size_t msglen);

/* Runs every vector; logs one line per failure to log (when not NULL); returns the
 * number of failed vectors. */
int ta_vectors_run(ta_backend *be, FILE *log);

/* Reference sweep: for op (TA_OP_NONE: every op) and every dtype it accepts, on 1-D, 2-D
 * and 3-D tiles, whole and sub-region, runs region, indexed, flat and (where legal)
 * scatter forms with masks, scalar values, sems, pre-RMW output, out-of-range indices and
 * space shared, with pseudo-random operands from seed, and compares with the sequential
 * reference bit for bit. Returns the number of failed cases (logged to log). */
int ta_vectors_sweep(ta_backend *be, ta_op op, uint64_t seed, FILE *log);

/* Large scatter plans (2^18 elements into 61 bins) run in global and in shared space must
 * both equal the reference (integer add/sub/min/max/and/or/xor, float min/max, float add of
 * small integers). Returns the number of failed cases (logged to log). */
int ta_vectors_shared_large(ta_backend *be, FILE *log);

#endif /* TA_VECTORS_H */
