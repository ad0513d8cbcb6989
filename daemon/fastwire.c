/* fastwire.c: the hot requests' decoder and the hot responses' encoder (see fastwire.h).
 *
 * Decoding is one pass over the bytes per message: read a tag, find the field's slot in a
 * small table indexed by field number (proto/ta_wireschema.c's, shared with the client
 * library's codec and filled from the descriptors at init), check its
 * wire type, and store the value into the protobuf-c structure (initialised with its
 * generated _init, allocated from the request's arena). What protobuf-c accepts but this
 * decoder does not take, so that the generic path answers it exactly as before: a field
 * not in the tables (unknown ones, Array.shared, Options.old_into, every other request
 * body), a singular field given twice (protobuf-c keeps the last or merges), a repeated
 * integer field not packed, a varint of more than 10 bytes or whose 10th byte is over 1, an
 * enum or uint32 whose value does not fit (protobuf-c keeps its low bits), a bool other
 * than 0 or 1, a string that is not UTF-8 or holds a NUL (wirecheck.c's error). Empty bytes
 * fields get data NULL and empty packed fields NULL arrays, as protobuf-c gives them.
 *
 * ta_fastwire_decode_atomic reads the same bytes with the same tables and rules straight into
 * a ta_request (views instead of Array messages), and hands back, besides all that, what
 * dispatch's conversion of the messages would refuse with a message of its own.
 *
 * Encoding sizes each nested message once (Array, then OpResponse, then Response) and
 * writes the frame in field-number order, skipping zero scalars, empty strings, empty
 * bytes and NULL messages as protobuf_c_message_pack does for proto3 fields; an OK
 * OpResponse (ta_fastwire_append_op) with one-byte keys read from the descriptors. */
#include "fastwire.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ta_wireschema.h"
#include "wirecheck.h"

/* Index arrays of an IndexedAddr the decoder takes (more: the generic path). */
#define FW_MAX_INDICES 8

void ta_fastwire_init(void)
{
	ta_wireschema_init();
}

/* ---- decoding ------------------------------------------------------------------------ */

/* Allocates a message of n bytes and runs its init. */
#define NEW_MSG(arena, type, init) ((type *)fw_new((arena), sizeof(type), (void (*)(void *))(init)))
static inline void *fw_new(ta_arena *arena, size_t size, void (*init)(void *))
{
	void *m = ta_arena_alloc_inline(arena, size);
	if (m)
		init(m);
	return m;
}

/* Decodes a packed repeated int64 value of len bytes at p into *n / *out. */
static bool dec_packed_i64(ta_arena *arena, const uint8_t *p, size_t len, size_t *n, int64_t **out)
{
	const uint8_t *end = p + len;
	size_t count = 0;
	for (size_t i = 0; i < len; i++)
		count += p[i] < 0x80;
	if (count == 0) {
		if (len != 0)
			return false; /* an unterminated varint */
		*n = 0;
		*out = NULL;
		return true;
	}
	if (p[len - 1] >= 0x80)
		return false;
	int64_t *v = ta_arena_alloc_inline(arena, count * sizeof(int64_t));
	if (!v)
		return false;
	for (size_t i = 0; i < count; i++) {
		uint64_t x;
		if (!rd_varint(&p, end, &x))
			return false;
		v[i] = (int64_t)x;
	}
	*n = count;
	*out = v;
	return true;
}

/* Copies a string value into the arena; false when it is not UTF-8 without NUL (names are
 * mostly ASCII: the full check runs only when a byte is not). */
static bool dec_string(ta_arena *arena, const uint8_t *p, size_t len, char **out)
{
	if (!ascii_no_nul(p, len) && !ta_utf8_valid_no_nul(p, len))
		return false;
	char *s = ta_arena_alloc_inline(arena, len + 1);
	if (!s)
		return false;
	memcpy(s, p, len);
	s[len] = '\0';
	*out = s;
	return true;
}

/* Decodes an Array (shared buffers are not taken). */
static Tileatom__Array *dec_array(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__Array *a = NEW_MSG(arena, Tileatom__Array, tileatom__array__init);
	if (!a)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_ARRAY];
	uint64_t seen = 0, v;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		switch (s) {
		case FW_ARRAY_DTYPE:
			if (!rd_small(&p, end, INT32_MAX, &v))
				return NULL;
			a->dtype = (Tileatom__DType)v;
			break;
		case FW_ARRAY_SHAPE:
			if (!rd_len(&p, end, &n) ||
			    !dec_packed_i64(arena, p, n, &a->n_shape, &a->shape))
				return NULL;
			p += n;
			break;
		case FW_ARRAY_DATA:
			if (!rd_len(&p, end, &n))
				return NULL;
			a->data.len = n;
			if (n > 0) {
				a->data.data = ta_arena_alloc_inline(arena, n);
				if (!a->data.data)
					return NULL;
				memcpy(a->data.data, p, n);
			}
			p += n;
			break;
		default:
			return NULL;
		}
	}
	return a;
}

/* Decodes a Region. */
static Tileatom__Region *dec_region(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__Region *r = NEW_MSG(arena, Tileatom__Region, tileatom__region__init);
	if (!r)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_REGION];
	uint64_t seen = 0;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s) || !rd_len(&p, end, &n))
			return NULL;
		bool ok = s == FW_REGION_ORIGIN
		              ? dec_packed_i64(arena, p, n, &r->n_origin, &r->origin)
		              : dec_packed_i64(arena, p, n, &r->n_shape, &r->shape);
		if (!ok)
			return NULL;
		p += n;
	}
	return r;
}

/* Decodes an Options (old_into is not taken). */
static Tileatom__Options *dec_options(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__Options *o = NEW_MSG(arena, Tileatom__Options, tileatom__options__init);
	if (!o)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_OPTIONS];
	uint64_t seen = 0, v;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		switch (s) {
		case FW_OPT_SEM:
		case FW_OPT_SCOPE:
		case FW_OPT_SPACE:
			if (!rd_small(&p, end, INT32_MAX, &v))
				return NULL;
			if (s == FW_OPT_SEM)
				o->sem = (Tileatom__Sem)v;
			else if (s == FW_OPT_SCOPE)
				o->scope = (Tileatom__Scope)v;
			else
				o->space = (Tileatom__Space)v;
			break;
		case FW_OPT_NO_BOUNDS:
			if (!rd_bool(&p, end, &o->no_bounds_check))
				return NULL;
			break;
		case FW_OPT_WANT_OLD:
			if (!rd_bool(&p, end, &o->want_old))
				return NULL;
			break;
		case FW_OPT_MASK:
			if (!rd_len(&p, end, &n) || !(o->mask = dec_array(arena, p, n)))
				return NULL;
			p += n;
			break;
		default:
			return NULL;
		}
	}
	return o;
}

/* Decodes a ScatterAddr. */
static Tileatom__ScatterAddr *dec_saddr(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__ScatterAddr *sa =
	    NEW_MSG(arena, Tileatom__ScatterAddr, tileatom__scatter_addr__init);
	if (!sa)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_SADDR];
	uint64_t seen = 0, v;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		if (s == FW_SADDR_DIM) {
			if (!rd_small(&p, end, UINT32_MAX, &v))
				return NULL;
			sa->dim = (uint32_t)v;
		} else {
			if (!rd_len(&p, end, &n) || !(sa->indices = dec_array(arena, p, n)))
				return NULL;
			p += n;
		}
	}
	return sa;
}

/* Decodes an IndexedAddr (at most FW_MAX_INDICES index arrays). */
static Tileatom__IndexedAddr *dec_iaddr(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__IndexedAddr *ia =
	    NEW_MSG(arena, Tileatom__IndexedAddr, tileatom__indexed_addr__init);
	if (!ia)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_IADDR];
	uint64_t seen = 0;
	size_t n, count = 0;
	Tileatom__Array *idx[FW_MAX_INDICES];
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE)
			return NULL;
		if (s == FW_IADDR_FLAT) {
			if (!first_time(&seen, s) || !rd_bool(&p, end, &ia->flat))
				return NULL;
		} else {
			if (count == FW_MAX_INDICES || !rd_len(&p, end, &n) ||
			    !(idx[count++] = dec_array(arena, p, n)))
				return NULL;
			p += n;
		}
	}
	if (count > 0) {
		ia->indices = ta_arena_alloc_inline(arena, count * sizeof(*ia->indices));
		if (!ia->indices)
			return NULL;
		memcpy(ia->indices, idx, count * sizeof(*ia->indices));
		ia->n_indices = count;
	}
	return ia;
}

/* The fields of the three atomic request messages, decoded into one place. */
typedef struct fw_rmw {
	char *tile;                   /* tile */
	Tileatom__Op op;              /* op */
	Tileatom__Region *region;     /* region */
	Tileatom__ScatterAddr *saddr; /* addr (scatter) */
	Tileatom__IndexedAddr *iaddr; /* addr (indexed) */
	Tileatom__Array *values;      /* values */
	Tileatom__Array *compare;     /* compare */
	Tileatom__Options *options;   /* options */
} fw_rmw;

/* Decodes an atomic request's fields with table t into *r. */
static bool dec_rmw(ta_arena *arena, const fw_table *t, const uint8_t *p, size_t len, fw_rmw *r)
{
	const uint8_t *end = p + len;
	uint64_t seen = 0, v;
	size_t n;
	memset(r, 0, sizeof(*r));
	r->tile = (char *)protobuf_c_empty_string;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		if (s == FW_RMW_OP) {
			if (!rd_small(&p, end, INT32_MAX, &v))
				return false;
			r->op = (Tileatom__Op)v;
			continue;
		}
		if (!rd_len(&p, end, &n))
			return false;
		bool ok;
		switch (s) {
		case FW_RMW_TILE:
			ok = dec_string(arena, p, n, &r->tile);
			break;
		case FW_RMW_REGION:
			ok = (r->region = dec_region(arena, p, n)) != NULL;
			break;
		case FW_RMW_SCATTER_ADDR:
			ok = (r->saddr = dec_saddr(arena, p, n)) != NULL;
			break;
		case FW_RMW_INDEXED_ADDR:
			ok = (r->iaddr = dec_iaddr(arena, p, n)) != NULL;
			break;
		case FW_RMW_VALUES:
			ok = (r->values = dec_array(arena, p, n)) != NULL;
			break;
		case FW_RMW_COMPARE:
			ok = (r->compare = dec_array(arena, p, n)) != NULL;
			break;
		case FW_RMW_OPTIONS:
			ok = (r->options = dec_options(arena, p, n)) != NULL;
			break;
		default:
			ok = false;
			break;
		}
		if (!ok)
			return false;
		p += n;
	}
	return true;
}

/* Decodes the body of a Request: the message of slot s, len bytes at p. */
static bool dec_body(ta_arena *arena, Tileatom__Request *req, fw_slot s, const uint8_t *p,
                     size_t len)
{
	fw_rmw r;
	switch (s) {
	case FW_REQ_PING:
		if (len != 0) /* PingRequest has no fields: anything in it is unknown */
			return false;
		req->ping = NEW_MSG(arena, Tileatom__PingRequest, tileatom__ping_request__init);
		return req->ping != NULL;
	case FW_REQ_ELEMENTWISE: {
		if (!dec_rmw(arena, &fw_tables[FW_M_ELEMENTWISE], p, len, &r))
			return false;
		Tileatom__ElementwiseAtomicRequest *e =
		    NEW_MSG(arena, Tileatom__ElementwiseAtomicRequest,
		            tileatom__elementwise_atomic_request__init);
		if (!e)
			return false;
		e->tile = r.tile;
		e->op = r.op;
		e->region = r.region;
		e->values = r.values;
		e->compare = r.compare;
		e->options = r.options;
		req->elementwise = e;
		return true;
	}
	case FW_REQ_SCATTER: {
		if (!dec_rmw(arena, &fw_tables[FW_M_SCATTER], p, len, &r))
			return false;
		Tileatom__ScatterAtomicRequest *sc = NEW_MSG(
		    arena, Tileatom__ScatterAtomicRequest, tileatom__scatter_atomic_request__init);
		if (!sc)
			return false;
		sc->tile = r.tile;
		sc->op = r.op;
		sc->region = r.region;
		sc->addr = r.saddr;
		sc->values = r.values;
		sc->options = r.options;
		req->scatter = sc;
		return true;
	}
	case FW_REQ_INDEXED: {
		if (!dec_rmw(arena, &fw_tables[FW_M_INDEXED], p, len, &r))
			return false;
		Tileatom__IndexedAtomicRequest *x = NEW_MSG(arena, Tileatom__IndexedAtomicRequest,
		                                            tileatom__indexed_atomic_request__init);
		if (!x)
			return false;
		x->tile = r.tile;
		x->op = r.op;
		x->region = r.region;
		x->addr = r.iaddr;
		x->values = r.values;
		x->compare = r.compare;
		x->options = r.options;
		req->indexed = x;
		return true;
	}
	default:
		return false;
	}
}

Tileatom__Request *ta_fastwire_decode_request(ta_arena *arena, const uint8_t *data, size_t len)
{
	ta_fastwire_init();
	Tileatom__Request *req = NEW_MSG(arena, Tileatom__Request, tileatom__request__init);
	if (!req)
		return NULL;
	const uint8_t *p = data, *end = data + len;
	const fw_table *t = &fw_tables[FW_M_REQUEST];
	uint64_t seen = 0;
	bool have_body = false;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		if (s == FW_REQ_ID) {
			if (!rd_varint(&p, end, &req->id))
				return NULL;
			continue;
		}
		/* a body: only one (a second replaces the first in protobuf-c) */
		if (have_body || !rd_len(&p, end, &n) || !dec_body(arena, req, s, p, n))
			return NULL;
		have_body = true;
		req->body_case = (Tileatom__Request__BodyCase)fw_number[s];
		p += n;
	}
	return req;
}

/* ---- decoding straight into a ta_request --------------------------------------------- */

/* Decodes an Array into the view v (all zero before), as dispatch's view_from_array
 * would convert it, and sets *wire to where its data bytes lie in the input (NULL: none);
 * false when ta_fastwire_decode_request would not take it or its rank is over
 * TA_MAX_RANK. */
static bool dec_view(ta_arena *arena, const uint8_t *p, size_t len, ta_array_view *v,
                     const uint8_t **wire)
{
	*wire = NULL;
	/* the common scalar first: dtype (a one-byte value) and data (a one-byte length), no
	 * shape, each key one byte: exactly what the loop below decodes from these bytes */
	const uint8_t k_dtype = fw_key1[FW_ARRAY_DTYPE], k_data = fw_key1[FW_ARRAY_DATA];
	if (len >= 5 && k_dtype && k_data && p[0] == k_dtype && p[1] != 0 && p[1] < 0x80 &&
	    p[2] == k_data && p[3] < 0x80 && (size_t)p[3] + 4 == len) {
		size_t n = p[3];
		void *d = ta_arena_alloc_inline(arena, n);
		if (!d)
			return false;
		if (n == 8)
			memcpy(d, p + 4, 8);
		else
			memcpy(d, p + 4, n);
		v->dtype = (ta_dtype)(Tileatom__DType)p[1];
		v->data = d;
		v->nbytes = n;
		v->present = true;
		*wire = p + 4;
		return true;
	}
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_ARRAY];
	uint64_t seen = 0, x;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		switch (s) {
		case FW_ARRAY_DTYPE:
			if (!rd_small(&p, end, INT32_MAX, &x))
				return false;
			v->dtype = (ta_dtype)(Tileatom__DType)x;
			break;
		case FW_ARRAY_SHAPE: {
			if (!rd_len(&p, end, &n))
				return false;
			const uint8_t *q = p, *qend = p + n;
			int rank = 0;
			while (q < qend) {
				if (rank == TA_MAX_RANK || !rd_varint(&q, qend, &x))
					return false;
				v->shape[rank++] = (int64_t)x;
			}
			v->rank = rank;
			p += n;
			break;
		}
		case FW_ARRAY_DATA:
			if (!rd_len(&p, end, &n))
				return false;
			v->nbytes = n;
			*wire = p;
			if (n > 0) {
				void *d = ta_arena_alloc_inline(arena, n);
				if (!d)
					return false;
				if (n == 8)
					memcpy(d, p, 8); /* the common scalar: no call */
				else
					memcpy(d, p, n);
				v->data = d;
			}
			p += n;
			break;
		default:
			return false;
		}
	}
	v->present = true;
	return true;
}

/* Decodes an Options into req, as dispatch's options_into would convert it. */
static bool dec_options_into(ta_arena *arena, const uint8_t *p, size_t len, ta_request *req)
{
	const uint8_t *mask_wire;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_OPTIONS];
	uint64_t seen = 0, v;
	protobuf_c_boolean b;
	/* a present Options sets every field (zero when not sent) */
	req->sem = (ta_sem)0;
	req->scope = (ta_scope)0;
	req->space = (ta_space)0;
	req->check_bounds = true;
	req->want_old = false;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		switch (s) {
		case FW_OPT_SEM:
		case FW_OPT_SCOPE:
		case FW_OPT_SPACE:
			if (!rd_small(&p, end, INT32_MAX, &v))
				return false;
			if (s == FW_OPT_SEM)
				req->sem = (ta_sem)(Tileatom__Sem)v;
			else if (s == FW_OPT_SCOPE)
				req->scope = (ta_scope)(Tileatom__Scope)v;
			else
				req->space = (ta_space)(Tileatom__Space)v;
			break;
		case FW_OPT_NO_BOUNDS:
			if (!rd_bool(&p, end, &b))
				return false;
			req->check_bounds = !b;
			break;
		case FW_OPT_WANT_OLD:
			if (!rd_bool(&p, end, &b))
				return false;
			req->want_old = b;
			break;
		case FW_OPT_MASK:
			if (!rd_len(&p, end, &n) || !dec_view(arena, p, n, &req->mask, &mask_wire))
				return false;
			p += n;
			break;
		default:
			return false;
		}
	}
	return true;
}

/* Decodes a ScatterAddr into req (indices required, as scatter_into asks); wire as
 * dec_view's, for the index array. */
static bool dec_saddr_into(ta_arena *arena, const uint8_t *p, size_t len, ta_request *req,
                           const uint8_t **wire)
{
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_SADDR];
	uint64_t seen = 0, v;
	size_t n;
	uint32_t dim = 0;
	bool indices = false;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		if (s == FW_SADDR_DIM) {
			if (!rd_small(&p, end, UINT32_MAX, &v))
				return false;
			dim = (uint32_t)v;
		} else {
			if (!rd_len(&p, end, &n) || !dec_view(arena, p, n, &req->index[0], wire))
				return false;
			indices = true;
			p += n;
		}
	}
	req->addr = TA_ADDR_SCATTER;
	req->scatter_dim = dim; /* as sent: ta_plan names it when out of range */
	req->n_index = 1;
	return indices;
}

/* Decodes an IndexedAddr into req (1 to TA_MAX_RANK index arrays, as indexed_into takes);
 * wire as dec_view's, one per index array. */
static bool dec_iaddr_into(ta_arena *arena, const uint8_t *p, size_t len, ta_request *req,
                           const uint8_t **wire)
{
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_IADDR];
	uint64_t seen = 0;
	size_t n;
	int count = 0;
	protobuf_c_boolean flat = 0;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE)
			return false;
		if (s == FW_IADDR_FLAT) {
			if (!first_time(&seen, s) || !rd_bool(&p, end, &flat))
				return false;
		} else {
			if (count == TA_MAX_RANK || !rd_len(&p, end, &n) ||
			    !dec_view(arena, p, n, &req->index[count], &wire[count]))
				return false;
			count++;
			p += n;
		}
	}
	req->addr = flat ? TA_ADDR_FLAT : TA_ADDR_INDEXED;
	req->n_index = count;
	return count > 0;
}

bool ta_fastwire_decode_atomic(ta_arena *arena, const uint8_t *data, size_t len, ta_fw_atomic *out)
{
	ta_fastwire_init();
	const uint8_t *p = data, *end = data + len;
	const uint8_t *body = NULL;
	size_t body_len = 0, n;
	fw_slot body_slot = FW_NONE;
	uint64_t seen = 0;
	out->id = 0;
	/* the Request: its id and one body, in either order */
	while (p < end) {
		fw_slot s = rd_tag(&p, end, &fw_tables[FW_M_REQUEST]);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		if (s == FW_REQ_ID) {
			if (!rd_varint(&p, end, &out->id))
				return false;
			continue;
		}
		if (body || !rd_len(&p, end, &n))
			return false;
		body = p;
		body_len = n;
		body_slot = s;
		p += n;
	}
	fw_msg m;
	switch (body_slot) {
	case FW_REQ_ELEMENTWISE:
		out->kind = TA_REQ_ELEMENTWISE;
		m = FW_M_ELEMENTWISE;
		break;
	case FW_REQ_SCATTER:
		out->kind = TA_REQ_SCATTER;
		m = FW_M_SCATTER;
		break;
	case FW_REQ_INDEXED:
		out->kind = TA_REQ_INDEXED;
		m = FW_M_INDEXED;
		break;
	default:
		return false; /* ping, another body or none */
	}
	ta_request *req = &out->req;
	ta_request_init(req);
	req->family = ta_req_family(out->kind);
	req->addr = TA_ADDR_REGION;
	out->tile = protobuf_c_empty_string;
	out->op = 0;
	out->origin = out->shape = NULL;
	out->n_origin = out->n_shape = 0;
	for (int i = 0; i < TA_MAX_RANK; i++)
		out->index_wire[i] = NULL;
	out->values_wire = out->compare_wire = NULL;
	bool addressed = out->kind == TA_REQ_ELEMENTWISE;
	const fw_table *t = &fw_tables[m];
	p = body;
	end = body + body_len;
	seen = 0;
	uint64_t v;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		if (s == FW_RMW_OP) {
			if (!rd_small(&p, end, INT32_MAX, &v))
				return false;
			out->op = (int32_t)v;
			continue;
		}
		if (!rd_len(&p, end, &n))
			return false;
		bool ok;
		switch (s) {
		case FW_RMW_TILE: {
			char *name = NULL;
			ok = dec_string(arena, p, n, &name);
			out->tile = name;
			break;
		}
		case FW_RMW_REGION: {
			Tileatom__Region *r = dec_region(arena, p, n);
			ok = r != NULL;
			if (ok) {
				out->origin = r->origin;
				out->n_origin = r->n_origin;
				out->shape = r->shape;
				out->n_shape = r->n_shape;
			}
			break;
		}
		case FW_RMW_SCATTER_ADDR:
			ok = addressed = dec_saddr_into(arena, p, n, req, &out->index_wire[0]);
			break;
		case FW_RMW_INDEXED_ADDR:
			ok = addressed = dec_iaddr_into(arena, p, n, req, out->index_wire);
			break;
		case FW_RMW_VALUES:
			ok = dec_view(arena, p, n, &req->values, &out->values_wire);
			break;
		case FW_RMW_COMPARE:
			ok = dec_view(arena, p, n, &req->compare, &out->compare_wire);
			break;
		case FW_RMW_OPTIONS:
			ok = dec_options_into(arena, p, n, req);
			break;
		default:
			ok = false;
			break;
		}
		if (!ok)
			return false;
		p += n;
	}
	return addressed;
}

/* ---- encoding ------------------------------------------------------------------------ */

/* Appends a one-byte key and a varint; returns the byte after them. */
static inline uint8_t *wr_key_var(uint8_t *p, uint8_t key, uint64_t v)
{
	*p++ = key;
	return wr_varint(p, v);
}

int ta_fastwire_append_op(const ta_fw_op *op, uint32_t max_payload, ta_frame_buf *buf)
{
	ta_fastwire_init();
	const uint8_t k_id = fw_key1[FW_RESP_ID], k_op = fw_key1[FW_RESP_OP],
	              k_old = fw_key1[FW_OPR_OLD], k_dtype = fw_key1[FW_ARRAY_DTYPE],
	              k_shape = fw_key1[FW_ARRAY_SHAPE], k_data = fw_key1[FW_ARRAY_DATA],
	              k_skipped = fw_key1[FW_OPR_SKIPPED], k_applied = fw_key1[FW_OPR_APPLIED];
	if (!k_id || !k_op || !k_old || !k_dtype || !k_shape || !k_data || !k_skipped ||
	    !k_applied || op->dtype < 0)
		return 1;
	/* sizes, innermost first; zero scalars and empty fields are not written */
	size_t shape_size = 0, old_size = 0;
	if (op->has_old) {
		for (size_t i = 0; i < op->rank; i++)
			shape_size += vsize((uint64_t)op->shape[i]);
		old_size = (op->dtype ? 1 + vsize((uint64_t)op->dtype) : 0) +
		           (op->rank ? 1 + vsize(shape_size) + shape_size : 0) +
		           (op->len ? 1 + vsize(op->len) + op->len : 0);
	}
	size_t op_size = (op->has_old ? 1 + vsize(old_size) + old_size : 0) +
	                 (op->skipped ? 1 + vsize(op->skipped) : 0) +
	                 (op->applied ? 1 + vsize(op->applied) : 0);
	size_t size = (op->id ? 1 + vsize(op->id) : 0) + 1 + vsize(op_size) + op_size;
	if (size > max_payload)
		return -1;
	if (ta_frame_buf_reserve(buf, TA_FRAME_HEADER + size) != 0)
		return -2;
	uint8_t *at = buf->data + buf->len;
	ta_frame_put_header(at, (uint32_t)size);
	uint8_t *p = at + TA_FRAME_HEADER;
	if (op->id)
		p = wr_key_var(p, k_id, op->id);
	p = wr_key_var(p, k_op, op_size);
	if (op->has_old) {
		p = wr_key_var(p, k_old, old_size);
		if (op->dtype)
			p = wr_key_var(p, k_dtype, (uint64_t)op->dtype);
		if (op->rank) {
			p = wr_key_var(p, k_shape, shape_size);
			for (size_t i = 0; i < op->rank; i++)
				p = wr_varint(p, (uint64_t)op->shape[i]);
		}
		if (op->len) {
			p = wr_key_var(p, k_data, op->len);
			if (op->len == 8)
				memcpy(p, op->data, 8); /* one old value of 8 bytes: no call */
			else
				memcpy(p, op->data, op->len);
			p += op->len;
		}
	}
	if (op->skipped)
		p = wr_key_var(p, k_skipped, op->skipped);
	if (op->applied)
		p = wr_key_var(p, k_applied, op->applied);
	if ((size_t)(p - at) != TA_FRAME_HEADER + size)
		abort(); /* the sizes above and the writes here disagree: a bug in this file */
	buf->len += TA_FRAME_HEADER + size;
	return 0;
}

int ta_fastwire_append_response(const Tileatom__Response *resp, uint32_t max_payload,
                                ta_frame_buf *buf)
{
	ta_fastwire_init();
	if (resp->base.n_unknown_fields || (int)resp->status < 0)
		return 1;
	const Tileatom__OpResponse *op = NULL;
	const Tileatom__Array *old = NULL;
	size_t msg_len = resp->message && resp->message[0] ? strlen(resp->message) : 0;
	if (resp->body_case == TILEATOM__RESPONSE__BODY_OP && resp->status == 0 && !msg_len &&
	    resp->op && !resp->op->base.n_unknown_fields &&
	    (!resp->op->old || (!resp->op->old->shared && !resp->op->old->base.n_unknown_fields))) {
		/* an OK OpResponse: ta_fastwire_append_op's writer (the one dispatch uses) */
		const Tileatom__Array *o = resp->op->old;
		ta_fw_op f = {resp->id,
		              o != NULL,
		              o ? (int32_t)o->dtype : 0,
		              o ? o->n_shape : 0,
		              o ? o->shape : NULL,
		              o ? o->data.data : NULL,
		              o ? o->data.len : 0,
		              resp->op->skipped,
		              resp->op->applied};
		int r = ta_fastwire_append_op(&f, max_payload, buf);
		if (r != 1)
			return r;
	}
	size_t size = var_field(FW_RESP_ID, resp->id) +
	              var_field(FW_RESP_STATUS, (uint64_t)resp->status) +
	              (msg_len ? len_field(FW_RESP_MESSAGE, msg_len) : 0);
	size_t op_size = 0, old_size = 0, shape_size = 0;
	switch (resp->body_case) {
	case TILEATOM__RESPONSE__BODY__NOT_SET:
		break;
	case TILEATOM__RESPONSE__BODY_PING:
		if (!resp->ping || resp->ping->base.n_unknown_fields)
			return 1;
		size += len_field(FW_RESP_PING, 0);
		break;
	case TILEATOM__RESPONSE__BODY_OP:
		op = resp->op;
		if (!op || op->base.n_unknown_fields)
			return 1;
		old = op->old;
		if (old) {
			if (old->shared || old->base.n_unknown_fields || (int)old->dtype < 0)
				return 1;
			for (size_t i = 0; i < old->n_shape; i++)
				shape_size += vsize((uint64_t)old->shape[i]);
			old_size = var_field(FW_ARRAY_DTYPE, (uint64_t)old->dtype) +
			           (old->n_shape ? len_field(FW_ARRAY_SHAPE, shape_size) : 0) +
			           (old->data.len ? len_field(FW_ARRAY_DATA, old->data.len) : 0);
			op_size += len_field(FW_OPR_OLD, old_size);
		}
		op_size +=
		    var_field(FW_OPR_SKIPPED, op->skipped) + var_field(FW_OPR_APPLIED, op->applied);
		size += len_field(FW_RESP_OP, op_size);
		break;
	default:
		return 1;
	}
	if (size > max_payload)
		return -1;
	if (ta_frame_buf_reserve(buf, TA_FRAME_HEADER + size) != 0)
		return -2;
	uint8_t *at = buf->data + buf->len;
	ta_frame_put_header(at, (uint32_t)size);
	uint8_t *p = at + TA_FRAME_HEADER;
	p = wr_var_field(p, FW_RESP_ID, resp->id);
	p = wr_var_field(p, FW_RESP_STATUS, (uint64_t)resp->status);
	if (msg_len) {
		p = wr_len_head(p, FW_RESP_MESSAGE, msg_len);
		memcpy(p, resp->message, msg_len);
		p += msg_len;
	}
	if (resp->body_case == TILEATOM__RESPONSE__BODY_PING) {
		p = wr_len_head(p, FW_RESP_PING, 0);
	} else if (op) {
		p = wr_len_head(p, FW_RESP_OP, op_size);
		if (old) {
			p = wr_len_head(p, FW_OPR_OLD, old_size);
			p = wr_var_field(p, FW_ARRAY_DTYPE, (uint64_t)old->dtype);
			if (old->n_shape) {
				p = wr_len_head(p, FW_ARRAY_SHAPE, shape_size);
				for (size_t i = 0; i < old->n_shape; i++)
					p = wr_varint(p, (uint64_t)old->shape[i]);
			}
			if (old->data.len) {
				p = wr_len_head(p, FW_ARRAY_DATA, old->data.len);
				memcpy(p, old->data.data, old->data.len);
				p += old->data.len;
			}
		}
		p = wr_var_field(p, FW_OPR_SKIPPED, op->skipped);
		p = wr_var_field(p, FW_OPR_APPLIED, op->applied);
	}
	if ((size_t)(p - at) != TA_FRAME_HEADER + size)
		abort(); /* the sizes above and the writes here disagree: a bug in this file */
	buf->len += TA_FRAME_HEADER + size;
	return 0;
}
