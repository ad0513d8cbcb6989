/* ta_test_util.c: test helpers (see ta_test_util.h). The float encoding, rounding and
 * reference arithmetic here are deliberately written without ta_types.c's conversions, so
 * that a mistake there or in a backend shows up as a mismatch instead of agreeing with
 * itself. */
#include "ta_test_util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exponent and mantissa widths of a float dtype; false for other dtypes. */
static bool float_format(ta_dtype dt, int *ebits, int *mbits)
{
	switch (dt) {
	case TA_DTYPE_F16:
		*ebits = 5;
		*mbits = 10;
		return true;
	case TA_DTYPE_BF16:
		*ebits = 8;
		*mbits = 7;
		return true;
	case TA_DTYPE_F32:
		*ebits = 8;
		*mbits = 23;
		return true;
	case TA_DTYPE_F64:
		*ebits = 11;
		*mbits = 52;
		return true;
	default:
		return false;
	}
}

/* All-ones mask of dt's width. */
static uint64_t width_mask(ta_dtype dt)
{
	size_t es = ta_dtype_size(dt);
	return es >= 8 ? UINT64_MAX : (UINT64_C(1) << (es * 8)) - 1;
}

/* Sign bit of dt's width. */
static uint64_t sign_of(ta_dtype dt)
{
	return UINT64_C(1) << (ta_dtype_size(dt) * 8 - 1);
}

bool ta_tu_is_nan(ta_dtype dt, uint64_t bits)
{
	int eb, mb;
	if (!float_format(dt, &eb, &mb))
		return false;
	uint64_t emax = (UINT64_C(1) << eb) - 1;
	uint64_t exp = (bits >> mb) & emax;
	uint64_t mant = bits & ((UINT64_C(1) << mb) - 1);
	return exp == emax && mant != 0;
}

uint64_t ta_tu_canonical_nan(ta_dtype dt)
{
	return width_mask(dt) >> 1;
}

double ta_tu_decode(ta_dtype dt, uint64_t bits)
{
	int eb, mb;
	if (!float_format(dt, &eb, &mb)) {
		if (ta_dtype_is_signed_int(dt)) {
			size_t es = ta_dtype_size(dt);
			int shift = 64 - (int)es * 8;
			return (double)((int64_t)(bits << shift) >> shift);
		}
		return (double)bits;
	}
	int bias = (1 << (eb - 1)) - 1;
	uint64_t emax = (UINT64_C(1) << eb) - 1;
	uint64_t exp = (bits >> mb) & emax;
	uint64_t mant = bits & ((UINT64_C(1) << mb) - 1);
	bool neg = (bits >> (eb + mb)) & 1;
	double v;
	if (exp == emax)
		v = mant ? NAN : INFINITY;
	else if (exp == 0)
		v = ldexp((double)mant, 1 - bias - mb);
	else
		v = ldexp((double)(mant | (UINT64_C(1) << mb)), (int)exp - bias - mb);
	return neg ? -v : v;
}

uint64_t ta_tu_round(ta_dtype dt, double d)
{
	int eb, mb;
	if (!float_format(dt, &eb, &mb))
		return 0;
	uint64_t sign = signbit(d) ? UINT64_C(1) << (eb + mb) : 0;
	uint64_t emax = (UINT64_C(1) << eb) - 1;
	if (isnan(d))
		return ta_tu_canonical_nan(dt);
	if (isinf(d))
		return sign | (emax << mb);
	double a = fabs(d);
	if (a == 0)
		return sign;
	int bias = (1 << (eb - 1)) - 1, emin = 1 - bias, e;
	frexp(a, &e);
	int E = e - 1; /* a in [2^E, 2^(E+1)) */
	if (E < emin)
		E = emin;
	double r = nearbyint(ldexp(a, mb - E)); /* round to nearest even */
	if (r >= ldexp(1.0, mb + 1)) {
		r = ldexp(r, -1);
		E++;
	}
	if ((int64_t)E + bias >= (int64_t)emax)
		return sign | (emax << mb);
	uint64_t q = (uint64_t)r;
	if (q < (UINT64_C(1) << mb))
		return sign | q; /* subnormal (or zero) */
	return sign | ((uint64_t)(E + bias) << mb) | (q - (UINT64_C(1) << mb));
}

bool ta_tu_encode(ta_dtype dt, double d, uint64_t *bits)
{
	int eb, mb;
	if (float_format(dt, &eb, &mb)) {
		if (isnan(d)) {
			*bits = (signbit(d) ? sign_of(dt) : 0) |
			        ((width_mask(dt) >> 1) & ~((UINT64_C(1) << (mb - 1)) - 1));
			return true;
		}
		uint64_t b = ta_tu_round(dt, d);
		double back = ta_tu_decode(dt, b);
		if (back != d || signbit(back) != signbit(d))
			return false;
		*bits = b;
		return true;
	}
	if (d != floor(d))
		return false;
	switch (dt) {
	case TA_DTYPE_I32:
		if (d < -2147483648.0 || d > 2147483647.0)
			return false;
		*bits = (uint64_t)(int64_t)d & 0xffffffffu;
		return true;
	case TA_DTYPE_U32:
		if (d < 0 || d > 4294967295.0)
			return false;
		*bits = (uint64_t)d;
		return true;
	case TA_DTYPE_I64:
		if (d < -9223372036854775808.0 || d >= 9223372036854775808.0)
			return false;
		*bits = (uint64_t)(int64_t)d;
		return true;
	case TA_DTYPE_U64:
		if (d < 0 || d >= 18446744073709551616.0)
			return false;
		*bits = (uint64_t)d;
		return true;
	case TA_DTYPE_BOOL:
		if (d < 0 || d > 255)
			return false;
		*bits = (uint64_t)d;
		return true;
	default:
		return false;
	}
}

/* Parses one integer token of dt into *bits. */
static bool parse_int(ta_dtype dt, const char *tok, uint64_t *bits)
{
	uint64_t mask = width_mask(dt);
	char *end;
	errno = 0;
	if (tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X')) {
		unsigned long long u = strtoull(tok, &end, 16);
		if (errno || *end || u > mask)
			return false;
		*bits = u;
		return true;
	}
	bool is_signed = ta_dtype_is_signed_int(dt);
	if (is_signed) {
		long long s = strtoll(tok, &end, 10);
		if (errno || *end)
			return false;
		int64_t lo = -(int64_t)(mask >> 1) - 1, hi = (int64_t)(mask >> 1);
		if (s < lo || s > hi)
			return false;
		*bits = (uint64_t)s & mask;
		return true;
	}
	if (tok[0] == '-')
		return false;
	unsigned long long u = strtoull(tok, &end, 10);
	if (errno || *end || u > mask)
		return false;
	*bits = u;
	return true;
}

/* Parses one token of dt into *bits. */
static bool parse_token(ta_dtype dt, const char *tok, uint64_t *bits)
{
	if (tok[0] == '#') {
		char *end;
		errno = 0;
		unsigned long long u = strtoull(tok + 1, &end, 16);
		if (errno || *end || tok[1] == '\0' || u > width_mask(dt))
			return false;
		*bits = u;
		return true;
	}
	if (!ta_dtype_is_float(dt))
		return parse_int(dt, tok, bits);
	if (strcmp(tok, "cnan") == 0) {
		*bits = ta_tu_canonical_nan(dt);
		return true;
	}
	if (strcmp(tok, "nan") == 0 || strcmp(tok, "-nan") == 0)
		return ta_tu_encode(dt, tok[0] == '-' ? -NAN : NAN, bits);
	char *end;
	errno = 0;
	double d = strtod(tok, &end);
	if (*end || end == tok || isnan(d))
		return false;
	return ta_tu_encode(dt, d, bits);
}

bool ta_tu_parse(ta_dtype dt, const char *text, uint64_t **bits, size_t *n, char *msg,
                 size_t msglen)
{
	size_t cap = 16, count = 0;
	uint64_t *out = malloc(cap * sizeof(*out));
	*bits = NULL;
	*n = 0;
	if (!out) {
		snprintf(msg, msglen, "out of memory");
		return false;
	}
	const char *p = text ? text : "";
	for (;;) {
		while (*p && (isspace((unsigned char)*p) || strchr(",[]()", *p)))
			p++;
		if (!*p)
			break;
		char tok[96];
		size_t len = 0;
		while (p[len] && !isspace((unsigned char)p[len]) && !strchr(",[]()", p[len]))
			len++;
		if (len >= sizeof(tok)) {
			snprintf(msg, msglen, "token too long in \"%s\"", text);
			free(out);
			return false;
		}
		memcpy(tok, p, len);
		tok[len] = '\0';
		p += len;
		uint64_t b;
		if (!parse_token(dt, tok, &b)) {
			snprintf(msg, msglen, "\"%s\" is not an exact %s element", tok,
			         ta_dtype_name(dt));
			free(out);
			return false;
		}
		if (count == cap) {
			uint64_t *grown = realloc(out, 2 * cap * sizeof(*out));
			if (!grown) {
				snprintf(msg, msglen, "out of memory");
				free(out);
				return false;
			}
			out = grown;
			cap *= 2;
		}
		out[count++] = b;
	}
	*bits = out;
	*n = count;
	return true;
}

void *ta_tu_pack(ta_dtype dt, const uint64_t *bits, size_t n)
{
	size_t es = ta_dtype_size(dt);
	uint8_t *buf = malloc(n ? n * es : 1);
	if (!buf)
		return NULL;
	for (size_t i = 0; i < n; i++)
		ta_tu_set(dt, buf, i, bits[i]);
	return buf;
}

uint64_t ta_tu_get(ta_dtype dt, const void *data, size_t i)
{
	size_t es = ta_dtype_size(dt);
	const uint8_t *b = (const uint8_t *)data + i * es;
	uint64_t v = 0;
	for (size_t j = 0; j < es; j++) /* little endian, whatever the host */
		v |= (uint64_t)b[j] << (8 * j);
	return v;
}

void ta_tu_set(ta_dtype dt, void *data, size_t i, uint64_t v)
{
	size_t es = ta_dtype_size(dt);
	uint8_t *b = (uint8_t *)data + i * es;
	for (size_t j = 0; j < es; j++)
		b[j] = (uint8_t)(v >> (8 * j));
}

const char *ta_tu_fmt(ta_dtype dt, uint64_t bits, char *buf, size_t n)
{
	int digits = (int)ta_dtype_size(dt) * 2;
	if (ta_dtype_is_float(dt))
		snprintf(buf, n, "%.17g (0x%0*" PRIx64 ")", ta_tu_decode(dt, bits), digits, bits);
	else if (ta_dtype_is_signed_int(dt))
		snprintf(buf, n, "%" PRId64 " (0x%0*" PRIx64 ")",
		         dt == TA_DTYPE_I32 ? (int64_t)(int32_t)(uint32_t)bits : (int64_t)bits,
		         digits, bits);
	else
		snprintf(buf, n, "%" PRIu64 " (0x%0*" PRIx64 ")", bits, digits, bits);
	return buf;
}

/* Reference float add (ta_plan.h's rules), written with plain C arithmetic. */
static uint64_t ref_float_add(ta_dtype dt, uint64_t a, uint64_t b)
{
	if (dt == TA_DTYPE_F32) {
		float x, y;
		uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
		memcpy(&x, &ua, 4);
		memcpy(&y, &ub, 4);
		if (fpclassify(x) == FP_SUBNORMAL)
			x = copysignf(0.0f, x);
		if (fpclassify(y) == FP_SUBNORMAL)
			y = copysignf(0.0f, y);
		float r = x + y;
		if (isnan(r))
			return ta_tu_canonical_nan(dt);
		if (fpclassify(r) == FP_SUBNORMAL)
			r = copysignf(0.0f, r);
		uint32_t ur;
		memcpy(&ur, &r, 4);
		return ur;
	}
	if (dt == TA_DTYPE_F64) {
		/* sm_90 atom.add.f64: the operand's NaN bits, else the tile's, else inf - inf
		 * gives the negative default NaN. */
		if (ta_tu_is_nan(dt, b))
			return b;
		if (ta_tu_is_nan(dt, a))
			return a;
		double x = ta_tu_decode(dt, a) + ta_tu_decode(dt, b);
		if (isnan(x))
			return UINT64_C(0xfff8000000000000);
	}
	if (ta_tu_is_nan(dt, a) || ta_tu_is_nan(dt, b))
		return ta_tu_canonical_nan(dt);
	double r = ta_tu_decode(dt, a) + ta_tu_decode(dt, b);
	if (isnan(r))
		return ta_tu_canonical_nan(dt);
	if (dt == TA_DTYPE_F64) {
		uint64_t u;
		memcpy(&u, &r, 8);
		return u;
	}
	return ta_tu_round(dt, r);
}

/* x < y with -0.0 < +0.0 (no NaNs). */
static bool ref_less(double x, double y)
{
	if (x == 0 && y == 0)
		return signbit(x) && !signbit(y);
	return x < y;
}

uint64_t ta_tu_ref_apply(ta_op op, ta_dtype dt, uint64_t cur, uint64_t v, uint64_t cmp,
                         uint64_t *old)
{
	uint64_t mask = width_mask(dt);
	bool is_float = ta_dtype_is_float(dt);
	*old = cur;
	switch (op) {
	case TA_OP_LOAD:
		return cur;
	case TA_OP_STORE:
	case TA_OP_EXCH:
		return v;
	case TA_OP_CAS:
		return cur == cmp ? v : cur;
	case TA_OP_ADD:
	case TA_OP_SUB:
		if (is_float)
			return ref_float_add(dt, cur, op == TA_OP_SUB ? v ^ sign_of(dt) : v);
		return op == TA_OP_SUB ? (cur - v) & mask : (cur + v) & mask;
	case TA_OP_MIN:
	case TA_OP_MAX: {
		bool take_v;
		if (is_float) {
			if (ta_tu_is_nan(dt, cur))
				return cur;
			if (ta_tu_is_nan(dt, v))
				return v;
			double x = ta_tu_decode(dt, cur), y = ta_tu_decode(dt, v);
			take_v = op == TA_OP_MIN ? ref_less(y, x) : ref_less(x, y);
		} else if (ta_dtype_is_signed_int(dt)) {
			/* exact signed values (not through double: int64 would lose bits) */
			int64_t sx =
			    dt == TA_DTYPE_I64 ? (int64_t)cur : (int64_t)(int32_t)(uint32_t)cur;
			int64_t sy =
			    dt == TA_DTYPE_I64 ? (int64_t)v : (int64_t)(int32_t)(uint32_t)v;
			take_v = op == TA_OP_MIN ? sy < sx : sx < sy;
		} else {
			take_v = op == TA_OP_MIN ? v < cur : cur < v;
		}
		return take_v ? v : cur;
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

void ta_tu_indexed(ta_request *req, ta_op op, bool want_old)
{
	ta_request_init(req);
	req->family = TA_FAMILY_INDEXED;
	req->addr = TA_ADDR_INDEXED;
	req->n_index = 1;
	req->op = op;
	req->want_old = want_old;
}

ta_array_view ta_tu_view(ta_dtype dt, int rank, const int64_t *shape, const void *data)
{
	ta_array_view v;
	memset(&v, 0, sizeof(v));
	v.present = true;
	v.dtype = dt;
	v.rank = rank;
	for (int a = 0; a < rank; a++)
		v.shape[a] = shape[a];
	v.data = data;
	v.nbytes = (size_t)ta_tu_count(rank, shape) * ta_dtype_size(dt);
	return v;
}

int64_t ta_tu_count(int rank, const int64_t *shape)
{
	int64_t n = 1;
	for (int a = 0; a < rank; a++)
		n *= shape[a];
	return n;
}

ta_status ta_tu_tile_write(ta_backend *be, void *mem, size_t bytes, const ta_tile_shape *t,
                           const void *data, ta_error *err)
{
	ta_request req;
	ta_plan plan;
	ta_result res;
	ta_request_region(&req, TA_FAMILY_MEMORY, TA_OP_STORE);
	req.values = ta_tu_view(t->dtype, t->rank, t->shape, data);
	ta_status st = ta_plan_build(&plan, t, &req, err);
	if (st != TA_OK)
		return st;
	return ta_backend_apply(be, mem, bytes, &plan, &res, err);
}

ta_status ta_tu_tile_read(ta_backend *be, void *mem, size_t bytes, const ta_tile_shape *t,
                          void *out, ta_error *err)
{
	ta_request req;
	ta_plan plan;
	ta_result res;
	ta_request_region(&req, TA_FAMILY_MEMORY, TA_OP_LOAD);
	ta_status st = ta_plan_build(&plan, t, &req, err);
	if (st != TA_OK)
		return st;
	plan.old_out = out;
	return ta_backend_apply(be, mem, bytes, &plan, &res, err);
}

uint64_t ta_tu_rand(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

uint64_t ta_tu_rand_below(uint64_t *state, uint64_t n)
{
	return n ? ta_tu_rand(state) % n : 0;
}
