/* tac_text.c: one element of a tile as text and back, for applications and tileatom-cli
 * (tileatom_value_parse, tileatom_value_format). Integers parse exactly (decimal or 0x hex,
 * range-checked, no trailing garbage); floats go through strtod and, for float16/bfloat16,
 * the core's single round-to-nearest-even; floats format with enough digits to round-trip.
 * Client-only: the daemon never turns values into text. */
#include "tac_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ta_types.h"

/* Parses a signed integer (decimal or 0x hex) within [lo, hi]. */
static ta_status parse_signed(const char *text, int64_t lo, int64_t hi, int64_t *out,
                              const char *dname, ta_error *err)
{
	const char *p = text;
	while (*p == ' ' || *p == '\t')
		p++;
	int neg = 0;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	int base = (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) ? 16 : 10;
	if (base == 16)
		p += 2;
	if (!((*p >= '0' && *p <= '9') || (base == 16 && strchr("abcdefABCDEF", *p) && *p)))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is not a valid %s", text,
		                    dname);
	errno = 0;
	char *end;
	unsigned long long mag = strtoull(p, &end, base);
	if (*end != '\0')
		return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is not a valid %s", text,
		                    dname);
	if (errno == ERANGE)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is out of range for %s", text,
		                    dname);
	if (neg) {
		if (mag > (unsigned long long)INT64_MAX + 1ull || (lo >= 0 && mag != 0) ||
		    (mag > 0 && -(int64_t)(mag - 1) - 1 < lo))
			return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is out of range for %s",
			                    text, dname);
		*out = mag == 0 ? 0 : -(int64_t)(mag - 1) - 1;
	} else {
		if (mag > (unsigned long long)hi)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is out of range for %s",
			                    text, dname);
		*out = (int64_t)mag;
	}
	return TA_OK;
}

/* Parses an unsigned integer (decimal or 0x hex) up to hi. */
static ta_status parse_unsigned(const char *text, uint64_t hi, uint64_t *out, const char *dname,
                                ta_error *err)
{
	const char *p = text;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '+')
		p++;
	int base = (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) ? 16 : 10;
	if (base == 16)
		p += 2;
	if (!((*p >= '0' && *p <= '9') || (base == 16 && *p && strchr("abcdefABCDEF", *p))))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is not a valid %s", text,
		                    dname);
	errno = 0;
	char *end;
	unsigned long long v = strtoull(p, &end, base);
	if (*end != '\0')
		return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is not a valid %s", text,
		                    dname);
	if (errno == ERANGE || v > hi)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is out of range for %s", text,
		                    dname);
	*out = v;
	return TA_OK;
}

/* Parses text as one element of dtype into out (little endian); see tileatom.h. */
static ta_status value_parse(ta_dtype dtype, const char *text, void *out, ta_error *err)
{
	const char *dn = ta_dtype_name(dtype);
	int64_t s;
	uint64_t u;
	ta_status st;
	switch (dtype) {
	case TA_DTYPE_I32:
		if ((st = parse_signed(text, INT32_MIN, INT32_MAX, &s, dn, err)) != TA_OK)
			return st;
		{
			int32_t v = (int32_t)s;
			memcpy(out, &v, 4);
		}
		return TA_OK;
	case TA_DTYPE_I64:
		if ((st = parse_signed(text, INT64_MIN, INT64_MAX, &s, dn, err)) != TA_OK)
			return st;
		memcpy(out, &s, 8);
		return TA_OK;
	case TA_DTYPE_U32:
		if ((st = parse_unsigned(text, UINT32_MAX, &u, dn, err)) != TA_OK)
			return st;
		{
			uint32_t v = (uint32_t)u;
			memcpy(out, &v, 4);
		}
		return TA_OK;
	case TA_DTYPE_U64:
		if ((st = parse_unsigned(text, UINT64_MAX, &u, dn, err)) != TA_OK)
			return st;
		memcpy(out, &u, 8);
		return TA_OK;
	case TA_DTYPE_BOOL:
		if (strcmp(text, "1") == 0 || strcasecmp(text, "true") == 0) {
			*(uint8_t *)out = 1;
			return TA_OK;
		}
		if (strcmp(text, "0") == 0 || strcasecmp(text, "false") == 0) {
			*(uint8_t *)out = 0;
			return TA_OK;
		}
		return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is not a valid bool", text);
	case TA_DTYPE_F32:
	case TA_DTYPE_F64:
	case TA_DTYPE_F16:
	case TA_DTYPE_BF16: {
		char *end;
		errno = 0;
		double d = strtod(text, &end);
		if (end == text || *end != '\0')
			return ta_error_set(err, TA_INVALID_ARGUMENT, "'%s' is not a valid %s",
			                    text, dn);
		if (dtype == TA_DTYPE_F64) {
			memcpy(out, &d, 8);
		} else if (dtype == TA_DTYPE_F32) {
			float f = (float)d;
			memcpy(out, &f, 4);
		} else {
			uint16_t h = dtype == TA_DTYPE_F16 ? ta_f64_to_f16(d) : ta_f64_to_bf16(d);
			memcpy(out, &h, 2);
		}
		return TA_OK;
	}
	default:
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown dtype %d", (int)dtype);
	}
}

/* Formats a double with prec significant digits, spelling NaN and infinities portably. */
static int format_float(double d, int prec, char *buf, size_t n)
{
	if (isnan(d))
		return snprintf(buf, n, "%snan", signbit(d) ? "-" : "");
	if (isinf(d))
		return snprintf(buf, n, "%sinf", d < 0 ? "-" : "");
	return snprintf(buf, n, "%.*g", prec, d);
}

/* Formats one element of dtype at in as text; see tileatom.h. */
static int value_format(ta_dtype dtype, const void *in, char *buf, size_t n)
{
	switch (dtype) {
	case TA_DTYPE_I32: {
		int32_t v;
		memcpy(&v, in, 4);
		return snprintf(buf, n, "%" PRId32, v);
	}
	case TA_DTYPE_U32: {
		uint32_t v;
		memcpy(&v, in, 4);
		return snprintf(buf, n, "%" PRIu32, v);
	}
	case TA_DTYPE_I64: {
		int64_t v;
		memcpy(&v, in, 8);
		return snprintf(buf, n, "%" PRId64, v);
	}
	case TA_DTYPE_U64: {
		uint64_t v;
		memcpy(&v, in, 8);
		return snprintf(buf, n, "%" PRIu64, v);
	}
	case TA_DTYPE_F32: {
		float v;
		memcpy(&v, in, 4);
		return format_float(v, 9, buf, n);
	}
	case TA_DTYPE_F64: {
		double v;
		memcpy(&v, in, 8);
		return format_float(v, 17, buf, n);
	}
	case TA_DTYPE_F16: {
		uint16_t h;
		memcpy(&h, in, 2);
		return format_float(ta_f16_to_f32(h), 5, buf, n);
	}
	case TA_DTYPE_BF16: {
		uint16_t h;
		memcpy(&h, in, 2);
		return format_float(ta_bf16_to_f32(h), 4, buf, n);
	}
	case TA_DTYPE_BOOL:
		return snprintf(buf, n, "%d", *(const uint8_t *)in ? 1 : 0);
	default:
		return snprintf(buf, n, "?");
	}
}

int tileatom_value_parse(tileatom_dtype dtype, const char *text, void *out, tileatom_error *err)
{
	if (!text || !out)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "no value text or output given");
	if (!ta_dtype_is_tile((ta_dtype)dtype) && dtype != TILEATOM_BOOL)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "unknown dtype %d", (int)dtype);
	ta_error terr = {TA_OK, ""};
	ta_status st = value_parse((ta_dtype)dtype, text, out, &terr);
	if (st != TA_OK)
		return tac_err(err, (int)st, "%s", terr.msg);
	return TILEATOM_OK;
}

int tileatom_value_format(tileatom_dtype dtype, const void *in, char *buf, size_t n)
{
	if (!in)
		return snprintf(buf, n, "?");
	return value_format((ta_dtype)dtype, in, buf, n);
}
