/* tac_text.c: one element of a tile as text and back, for applications and tileatom-cli
 * (tileatom_value_parse, tileatom_value_format), and as a double (tileatom_value_to_double).
 * Integers parse exactly (decimal or 0x hex, range-checked, no trailing garbage); floats go through
 * strtod and, for float16/bfloat16, the core's single round-to-nearest-even; floats format with
 * enough digits to round-trip. Client-only: the daemon never turns values into text. */
#include "tac_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ta_types.h"

/* Parses an integer (decimal or 0x hex; a sign, '-' only when sgn) within [-hi - 1, hi]
 * when sgn, else [0, hi]. *out gets its two's-complement bits. */
static int parse_int(const char *text, bool sgn, uint64_t hi, uint64_t *out, const char *dname,
                     tileatom_error *err)
{
	const char *p = text;
	while (*p == ' ' || *p == '\t')
		p++;
	bool neg = false;
	if (*p == '+' || (sgn && *p == '-'))
		neg = *p++ == '-';
	int base = (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) ? 16 : 10;
	p += base == 16 ? 2 : 0;
	bool digit = base == 16 ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p);
	char *end = NULL;
	errno = 0;
	unsigned long long mag = digit ? strtoull(p, &end, base) : 0;
	if (!digit || *end != '\0')
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "'%s' is not a valid %s", text,
		               dname);
	if (errno == ERANGE || mag > hi + neg) /* (a negative one may reach hi + 1) */
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "'%s' is out of range for %s",
		               text, dname);
	*out = neg ? 0 - (uint64_t)mag : mag;
	return TILEATOM_OK;
}

/* One element of any dtype, to move a value's bytes without aliasing. */
typedef union value_bits {
	int32_t i32;  /* INT32 */
	uint32_t u32; /* UINT32 */
	int64_t i64;  /* INT64 */
	uint64_t u64; /* UINT64, and an integer's bits as parse_int gives them */
	float f32;    /* FLOAT32 */
	double f64;   /* FLOAT64 */
	uint16_t u16; /* FLOAT16, BFLOAT16 */
	uint8_t u8;   /* BOOL */
} value_bits;

int tileatom_value_parse(tileatom_dtype dtype, const char *text, void *out, tileatom_error *err)
{
	if (!text || !out)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "no value text or output given");
	const char *dn = tileatom_dtype_name(dtype);
	value_bits v = {.u64 = 0};
	int st = TILEATOM_OK;
	uint64_t bits = 0;
	switch (dtype) {
	case TILEATOM_INT32:
	case TILEATOM_UINT32: /* the low 32 bits of the two's complement */
		st = parse_int(text, dtype == TILEATOM_INT32,
		               dtype == TILEATOM_INT32 ? INT32_MAX : UINT32_MAX, &bits, dn, err);
		v.u32 = (uint32_t)bits;
		break;
	case TILEATOM_INT64:
	case TILEATOM_UINT64:
		st = parse_int(text, dtype == TILEATOM_INT64,
		               dtype == TILEATOM_INT64 ? INT64_MAX : UINT64_MAX, &v.u64, dn, err);
		break;
	case TILEATOM_BOOL:
		if (strcmp(text, "1") == 0 || strcasecmp(text, "true") == 0)
			v.u8 = 1;
		else if (strcmp(text, "0") != 0 && strcasecmp(text, "false") != 0)
			return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "'%s' is not a valid bool",
			               text);
		break;
	case TILEATOM_FLOAT32:
	case TILEATOM_FLOAT64:
	case TILEATOM_FLOAT16:
	case TILEATOM_BFLOAT16: {
		char *end;
		errno = 0;
		double d = strtod(text, &end);
		if (end == text || *end != '\0')
			return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "'%s' is not a valid %s",
			               text, dn);
		if (dtype == TILEATOM_FLOAT64)
			v.f64 = d;
		else if (dtype == TILEATOM_FLOAT32)
			v.f32 = (float)d;
		else
			v.u16 = dtype == TILEATOM_FLOAT16 ? ta_f64_to_f16(d) : ta_f64_to_bf16(d);
		break;
	}
	default:
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "unknown dtype %d", (int)dtype);
	}
	if (st == TILEATOM_OK)
		memcpy(out, &v, tileatom_dtype_size(dtype));
	return st;
}

int tileatom_value_format(tileatom_dtype dtype, const void *in, char *buf, size_t n)
{
	/* significant digits that read each float dtype back exactly */
	static const int float_digits[] = {[TILEATOM_FLOAT32] = 9,
	                                   [TILEATOM_FLOAT64] = 17,
	                                   [TILEATOM_FLOAT16] = 5,
	                                   [TILEATOM_BFLOAT16] = 4};
	value_bits v;
	size_t size = tileatom_dtype_size(dtype);
	if (!in || size == 0)
		return snprintf(buf, n, "?");
	memcpy(&v, in, size);
	switch (dtype) {
	case TILEATOM_INT32:
		return snprintf(buf, n, "%" PRId32, v.i32);
	case TILEATOM_UINT32:
		return snprintf(buf, n, "%" PRIu32, v.u32);
	case TILEATOM_INT64:
		return snprintf(buf, n, "%" PRId64, v.i64);
	case TILEATOM_UINT64:
		return snprintf(buf, n, "%" PRIu64, v.u64);
	case TILEATOM_BOOL:
		return snprintf(buf, n, "%d", v.u8 ? 1 : 0);
	default: { /* the floats; NaN and infinities spelt portably */
		double d = tileatom_value_to_double(dtype, in);
		if (isnan(d))
			return snprintf(buf, n, "%snan", signbit(d) ? "-" : "");
		if (isinf(d))
			return snprintf(buf, n, "%sinf", d < 0 ? "-" : "");
		return snprintf(buf, n, "%.*g", float_digits[dtype], d);
	}
	}
}

double tileatom_value_to_double(tileatom_dtype dtype, const void *in)
{
	value_bits v;
	size_t size = tileatom_dtype_size(dtype);
	if (!in || size == 0)
		return 0.0;
	memcpy(&v, in, size);
	switch (dtype) {
	case TILEATOM_INT32:
		return (double)v.i32;
	case TILEATOM_UINT32:
		return (double)v.u32;
	case TILEATOM_INT64:
		return (double)v.i64;
	case TILEATOM_UINT64:
		return (double)v.u64;
	case TILEATOM_FLOAT32:
		return (double)v.f32;
	case TILEATOM_FLOAT64:
		return v.f64;
	case TILEATOM_FLOAT16:
		return (double)ta_f16_to_f32(v.u16);
	case TILEATOM_BFLOAT16:
		return (double)ta_bf16_to_f32(v.u16);
	default:
		return v.u8 ? 1.0 : 0.0;
	}
}
