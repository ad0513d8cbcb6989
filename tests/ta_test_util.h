/* ta_test_util.h: helpers shared by the core test suites and the backend vectors:
 * element text parsing with exact float encodings written independently of ta_types.c,
 * a sequential scalar reference of every op (the semantics of ta_plan.h, written plainly
 * and separately from the backends), whole-tile read/write through any backend (as LOAD /
 * STORE plans, so device memory works too), and a small deterministic RNG.
 *
 * Element text: tokens separated by blanks, commas, brackets or parentheses.
 *   integers (int32/uint32/int64/uint64/bool and index dtypes): decimal with optional sign,
 *     or 0x hex (the unsigned value, must fit the width);
 *   floats: any strtod literal (decimal, hex float such as 0x1p-149, inf, -inf) that the
 *     dtype represents exactly (anything else is a parse error, never a silent rounding);
 *     "nan" / "-nan" the default quiet NaN (0x7e00, 0x7fc0, 0x7fc00000,
 *     0x7ff8000000000000, sign set for -nan); "cnan" the canonical NaN that float32/16-bit add/sub
 * store (0x7fff, 0x7fffffff; float64: 0x7fffffffffffffff, unused by add); any dtype: "#hex" gives
 * the raw bit pattern. */
#ifndef TA_TEST_UTIL_H
#define TA_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ta_backend.h"

/* Parses text into elements of dt: *bits gets a malloc'd array (one zero-extended bit
 * pattern per element), *n the count. Returns false with msg set on a bad token. */
bool ta_tu_parse(ta_dtype dt, const char *text, uint64_t **bits, size_t *n, char *msg,
                 size_t msglen);

/* Packs n bit patterns into a malloc'd little-endian buffer of dt elements (NULL when out
 * of memory; a 1-byte allocation when n is 0). */
void *ta_tu_pack(ta_dtype dt, const uint64_t *bits, size_t n);

/* Element i of packed dt data, zero-extended. */
uint64_t ta_tu_get(ta_dtype dt, const void *data, size_t i);

/* Stores bit pattern v as element i of packed dt data. */
void ta_tu_set(ta_dtype dt, void *data, size_t i, uint64_t v);

/* Formats one element as "value (0xbits)" into buf; returns buf. */
const char *ta_tu_fmt(ta_dtype dt, uint64_t bits, char *buf, size_t n);

/* Encodes d exactly as dt (floats and integers); false when dt cannot hold it exactly.
 * NaN gives the default quiet NaN of dt with d's sign. */
bool ta_tu_encode(ta_dtype dt, double d, uint64_t *bits);

/* Value of a float element as a double (exact); integers as their (signed) value. */
double ta_tu_decode(ta_dtype dt, uint64_t bits);

/* Rounds d to nearest even in the float dtype dt (overflow to inf, gradual underflow; NaN
 * gives the canonical NaN). Independent of ta_f64_to_f16 and friends. */
uint64_t ta_tu_round(ta_dtype dt, double d);

/* True when the float element is a NaN. */
bool ta_tu_is_nan(ta_dtype dt, uint64_t bits);

/* The canonical NaN of a float dtype (what add/sub store for a NaN result). */
uint64_t ta_tu_canonical_nan(ta_dtype dt);

/* Sequential reference of one element: applies op (ADD..XOR, LOAD, STORE) with operand v
 * and compare cmp to an element holding cur; stores the value seen before into *old and
 * returns the element's new bits. */
uint64_t ta_tu_ref_apply(ta_op op, ta_dtype dt, uint64_t cur, uint64_t v, uint64_t cmp,
                         uint64_t *old);

/* A view of packed data (present, shape copied; nbytes from shape and dtype). */
ta_array_view ta_tu_view(ta_dtype dt, int rank, const int64_t *shape, const void *data);

/* Starts req as an indexed request of op over one index array (ta_request_init, then the
 * family, addressing, n_index 1, op and want_old set); the operands are the caller's. */
void ta_tu_indexed(ta_request *req, ta_op op, bool want_old);

/* Number of elements of a shape (1 for rank 0). */
int64_t ta_tu_count(int rank, const int64_t *shape);

/* Overwrites the whole tile at mem with data (packed elements of t->dtype) through a
 * STORE plan on be. */
ta_status ta_tu_tile_write(ta_backend *be, void *mem, size_t bytes, const ta_tile_shape *t,
                           const void *data, ta_error *err);

/* Reads the whole tile at mem into out (packed elements) through a LOAD plan on be. */
ta_status ta_tu_tile_read(ta_backend *be, void *mem, size_t bytes, const ta_tile_shape *t,
                          void *out, ta_error *err);

/* splitmix64: next pseudo-random 64-bit value of *state. */
uint64_t ta_tu_rand(uint64_t *state);

/* A pseudo-random value in [0, n). */
uint64_t ta_tu_rand_below(uint64_t *state, uint64_t n);

#endif /* TA_TEST_UTIL_H */
