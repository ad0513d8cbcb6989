/* ta_float.h: the float arithmetic rules of tileatom (ta_plan.h states them), written once
 * on bit patterns for both backends: the CPU backend compiles them as C (static inline),
 * the CUDA kernels as device code (__host__ __device__ __forceinline__).
 *
 * Only the primitives at the top differ between host and device (__CUDA_ARCH__): bit
 * casts, one IEEE add rounded to nearest even, and the exact sum of two float16 (bfloat16)
 * values rounded once. For the latter the host adds in double (exact) and rounds once with
 * ta_f64_to_f16; the device adds in float and rounds with cvt.rn: float's 24 bits are at
 * least 2p + 2 for both 16-bit formats, so that double rounding gives the same bits.
 * Everything else (flushing, NaN canonicalisation and propagation, the -0.0 < +0.0 order
 * of min/max, negation for sub, the identities) is one definition, used as is by both. */
#ifndef TA_FLOAT_H
#define TA_FLOAT_H

#include <stdint.h>
#include <string.h>

#include "ta_types.h"

#ifdef __CUDACC__
#define TA_FLOAT_FN __host__ __device__ __forceinline__
#else
#define TA_FLOAT_FN static inline
#endif

/* Bit patterns of each float format: the sign bit, +infinity (also the exponent mask), and
 * the NaN that an add stores when its result is a NaN (float64: only when neither operand
 * is a NaN, as for inf - inf; a NaN operand's bits propagate). */
#define TA_F32_SIGN  0x80000000u
#define TA_F32_INF   0x7f800000u
#define TA_F32_NAN   0x7fffffffu
#define TA_F64_SIGN  UINT64_C(0x8000000000000000)
#define TA_F64_INF   UINT64_C(0x7ff0000000000000)
#define TA_F64_NAN   UINT64_C(0xfff8000000000000)
#define TA_F16_SIGN  ((uint16_t)0x8000)
#define TA_F16_INF   ((uint16_t)0x7c00)
#define TA_F16_NAN   ((uint16_t)0x7fff)
#define TA_BF16_SIGN ((uint16_t)0x8000)
#define TA_BF16_INF  ((uint16_t)0x7f80)
#define TA_BF16_NAN  ((uint16_t)0x7fff)

/* X(ID, F, T, SIGN, INF, NAN) for every float dtype: TA_DTYPE_ID, the prefix of its
 * functions (ta_F_...), its bit container and its bit patterns. */
#define TA_FLOAT_FORMATS(X)                                                                        \
	X(F32, f32, uint32_t, TA_F32_SIGN, TA_F32_INF, TA_F32_NAN)                                 \
	X(F64, f64, uint64_t, TA_F64_SIGN, TA_F64_INF, TA_F64_NAN)                                 \
	X(F16, f16, uint16_t, TA_F16_SIGN, TA_F16_INF, TA_F16_NAN)                                 \
	X(BF16, bf16, uint16_t, TA_BF16_SIGN, TA_BF16_INF, TA_BF16_NAN)

/* ---- primitives: the only host / device differences ---------------------------------- */

/* float32 of bits. */
TA_FLOAT_FN float ta_fp_f32(uint32_t b)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(b);
#else
	float f;
	memcpy(&f, &b, 4);
	return f;
#endif
}

/* Bits of a float32. */
TA_FLOAT_FN uint32_t ta_fp_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
#endif
}

/* float64 of bits. */
TA_FLOAT_FN double ta_fp_f64(uint64_t b)
{
#ifdef __CUDA_ARCH__
	return __longlong_as_double((long long)b);
#else
	double d;
	memcpy(&d, &b, 8);
	return d;
#endif
}

/* Bits of a float64. */
TA_FLOAT_FN uint64_t ta_fp_f64_bits(double d)
{
#ifdef __CUDA_ARCH__
	return (uint64_t)__double_as_longlong(d);
#else
	uint64_t b;
	memcpy(&b, &d, 8);
	return b;
#endif
}

/* a + b in float32, rounded to nearest even (the host assumes the default floating-point
 * environment). */
TA_FLOAT_FN float ta_fp_add_f32(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fadd_rn(a, b);
#else
	return a + b;
#endif
}

/* a + b in float64, rounded to nearest even. */
TA_FLOAT_FN double ta_fp_add_f64(double a, double b)
{
#ifdef __CUDA_ARCH__
	return __dadd_rn(a, b);
#else
	return a + b;
#endif
}

/* The exact sum of two float16 values rounded once to nearest even, as float16 bits
 * (subnormals kept; a NaN sum gives some NaN). */
TA_FLOAT_FN uint16_t ta_fp_f16_sum(uint16_t a, uint16_t b)
{
#ifdef __CUDA_ARCH__
	float fa, fb;
	asm("cvt.f32.f16 %0, %1;" : "=f"(fa) : "h"(a));
	asm("cvt.f32.f16 %0, %1;" : "=f"(fb) : "h"(b));
	float r = __fadd_rn(fa, fb);
	uint16_t rb;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(rb) : "f"(r));
	return rb;
#else
	return ta_f64_to_f16((double)ta_f16_to_f32(a) + (double)ta_f16_to_f32(b));
#endif
}

/* The exact sum of two bfloat16 values rounded once to nearest even, as bfloat16 bits. */
TA_FLOAT_FN uint16_t ta_fp_bf16_sum(uint16_t a, uint16_t b)
{
#ifdef __CUDA_ARCH__
	float r = __fadd_rn(__uint_as_float((uint32_t)a << 16), __uint_as_float((uint32_t)b << 16));
	uint16_t rb;
	asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(rb) : "f"(r));
	return rb;
#else
	return ta_f64_to_bf16((double)ta_bf16_to_f32(a) + (double)ta_bf16_to_f32(b));
#endif
}

/* ---- the rules every format shares ----------------------------------------------------
 * For format F with bits T, sign bit S and +infinity I, defines:
 *   ta_F_is_nan(b): b is a NaN;
 *   ta_F_finite(b): b is neither an infinity nor a NaN;
 *   ta_F_key(b): an unsigned key ordered like the values, with -0.0 < +0.0 (b not a NaN);
 *   ta_F_neg(b): b with its sign flipped (float sub adds the negated operand);
 *   ta_F_minmax(cur, v, is_max): what min (max) of tile value cur with operand v stores:
 *       a NaN in the tile stays; otherwise a NaN operand is stored; otherwise the operand
 *       when it is smaller (larger) than cur, with -0.0 < +0.0; otherwise cur. */
#define TA_FLOAT_RULES(ID, F, T, S, I, N)                                                          \
	TA_FLOAT_FN bool ta_##F##_is_nan(T b)                                                      \
	{                                                                                          \
		return (T)(b & (T) ~(T)(S)) > (T)(I);                                              \
	}                                                                                          \
	TA_FLOAT_FN bool ta_##F##_finite(T b)                                                      \
	{                                                                                          \
		return (T)(b & (T) ~(T)(S)) < (T)(I);                                              \
	}                                                                                          \
	TA_FLOAT_FN T ta_##F##_key(T b)                                                            \
	{                                                                                          \
		return (b & (T)(S)) ? (T)~b : (T)(b | (T)(S));                                     \
	}                                                                                          \
	TA_FLOAT_FN T ta_##F##_neg(T b)                                                            \
	{                                                                                          \
		return (T)(b ^ (T)(S));                                                            \
	}                                                                                          \
	TA_FLOAT_FN T ta_##F##_minmax(T cur, T v, bool is_max)                                     \
	{                                                                                          \
		if (ta_##F##_is_nan(cur))                                                          \
			return cur;                                                                \
		if (ta_##F##_is_nan(v))                                                            \
			return v;                                                                  \
		bool take = is_max ? ta_##F##_key(v) > ta_##F##_key(cur)                           \
		                   : ta_##F##_key(v) < ta_##F##_key(cur);                          \
		return take ? v : cur;                                                             \
	}
TA_FLOAT_FORMATS(TA_FLOAT_RULES)
#undef TA_FLOAT_RULES

/* ---- add ------------------------------------------------------------------------------
 * ta_F_canon(r): what an add of format F stores for the raw result r: float32 flushes a
 * subnormal to a zero of the same sign and stores a NaN as the canonical NaN; float16 and
 * bfloat16 store a NaN as the canonical NaN; float64 stores a NaN as TA_F64_NAN (its add
 * propagates NaN operands before it gets there).
 * ta_F_add(cur, v): the new value of a tile element holding cur after adding operand v. */

/* A float32 subnormal becomes a zero of the same sign; other values pass. */
TA_FLOAT_FN uint32_t ta_f32_flush(uint32_t b)
{
	return (b & TA_F32_INF) ? b : (b & TA_F32_SIGN);
}

/* What a float32 add stores for the raw sum r. */
TA_FLOAT_FN uint32_t ta_f32_canon(uint32_t r)
{
	uint32_t f = ta_f32_flush(r);
	return ta_f32_is_nan(f) ? TA_F32_NAN : f;
}

/* float32 add (the GPU's atom.global.add.f32): flushed inputs, one rounding, flushed
 * result, canonical NaN. */
TA_FLOAT_FN uint32_t ta_f32_add(uint32_t cur, uint32_t v)
{
	float r = ta_fp_add_f32(ta_fp_f32(ta_f32_flush(cur)), ta_fp_f32(ta_f32_flush(v)));
	return ta_f32_canon(ta_fp_f32_bits(r));
}

/* What a float64 add stores for a raw sum r of two non-NaN values. */
TA_FLOAT_FN uint64_t ta_f64_canon(uint64_t r)
{
	return ta_f64_is_nan(r) ? TA_F64_NAN : r;
}

/* float64 add as sm_90's atom.add.f64: a NaN operand's bits are stored, else a NaN tile
 * value stays, else the IEEE sum (inf - inf: TA_F64_NAN). */
TA_FLOAT_FN uint64_t ta_f64_add(uint64_t cur, uint64_t v)
{
	if (ta_f64_is_nan(v))
		return v;
	if (ta_f64_is_nan(cur))
		return cur;
	return ta_f64_canon(ta_fp_f64_bits(ta_fp_add_f64(ta_fp_f64(cur), ta_fp_f64(v))));
}

/* What a float16 add stores for the rounded sum r. */
TA_FLOAT_FN uint16_t ta_f16_canon(uint16_t r)
{
	return ta_f16_is_nan(r) ? TA_F16_NAN : r;
}

/* float16 add (.noftz): the exact sum rounded once, subnormals kept, canonical NaN. */
TA_FLOAT_FN uint16_t ta_f16_add(uint16_t cur, uint16_t v)
{
	return ta_f16_canon(ta_fp_f16_sum(cur, v));
}

/* What a bfloat16 add stores for the rounded sum r. */
TA_FLOAT_FN uint16_t ta_bf16_canon(uint16_t r)
{
	return ta_bf16_is_nan(r) ? TA_BF16_NAN : r;
}

/* bfloat16 add (.noftz): the exact sum rounded once, subnormals kept, canonical NaN. */
TA_FLOAT_FN uint16_t ta_bf16_add(uint16_t cur, uint16_t v)
{
	return ta_bf16_canon(ta_fp_bf16_sum(cur, v));
}

/* ---- by run-time dtype (the CPU backend): bits zero-extended to 64 ---------------------*/

/* The sign bit of a float dtype, 0 for any other: float sub flips it in the operand, and
 * alone it is -0.0, the identity of float add. */
TA_FLOAT_FN uint64_t ta_float_sign(ta_dtype dt)
{
	switch (dt) {
#define TA_FLOAT_SIGN_CASE(ID, F, T, S, I, N)                                                      \
	case TA_DTYPE_##ID:                                                                        \
		return S;
		TA_FLOAT_FORMATS(TA_FLOAT_SIGN_CASE)
#undef TA_FLOAT_SIGN_CASE
	default:
		return 0;
	}
}

/* +infinity of a float dtype (the identity of min; with the sign bit, of max), 0 for any
 * other. */
TA_FLOAT_FN uint64_t ta_float_inf(ta_dtype dt)
{
	switch (dt) {
#define TA_FLOAT_INF_CASE(ID, F, T, S, I, N)                                                       \
	case TA_DTYPE_##ID:                                                                        \
		return I;
		TA_FLOAT_FORMATS(TA_FLOAT_INF_CASE)
#undef TA_FLOAT_INF_CASE
	default:
		return 0;
	}
}

/* ta_F_add of the float dtype dt; cur for any other dtype. */
TA_FLOAT_FN uint64_t ta_float_add(ta_dtype dt, uint64_t cur, uint64_t v)
{
	switch (dt) {
#define TA_FLOAT_ADD_CASE(ID, F, T, S, I, N)                                                       \
	case TA_DTYPE_##ID:                                                                        \
		return ta_##F##_add((T)cur, (T)v);
		TA_FLOAT_FORMATS(TA_FLOAT_ADD_CASE)
#undef TA_FLOAT_ADD_CASE
	default:
		return cur;
	}
}

/* ta_F_minmax of the float dtype dt; cur for any other dtype. */
TA_FLOAT_FN uint64_t ta_float_minmax(ta_dtype dt, uint64_t cur, uint64_t v, bool is_max)
{
	switch (dt) {
#define TA_FLOAT_MINMAX_CASE(ID, F, T, S, I, N)                                                    \
	case TA_DTYPE_##ID:                                                                        \
		return ta_##F##_minmax((T)cur, (T)v, is_max);
		TA_FLOAT_FORMATS(TA_FLOAT_MINMAX_CASE)
#undef TA_FLOAT_MINMAX_CASE
	default:
		return cur;
	}
}

#endif /* TA_FLOAT_H */
