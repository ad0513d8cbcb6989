/* codec.c: the data plane's decoder and response writer, and the kept request recorded and
 * recognised in front of the decoder (see codec.h).
 *
 * Decoding is one pass over the bytes per message: read a key, find the field's slot in the
 * message's table (proto/ta_wireschema.c, filled from the descriptors), and store its value
 * into the ta_wire_request; a field the table does not know is skipped by its wire type. A
 * message field seen a second time is decoded aside (malformed bytes in it are still found)
 * and noted as a problem.
 *
 * The writer sizes the Array, then the OpResponse, then the Response once, and writes them in
 * field-number order as protobuf-c's pack does for proto3 fields (zero scalars and empty
 * fields left out, a oneof member written even when empty), each key one byte (field
 * numbers below 16: checked at init). */
#include "codec.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ta_wireschema.h"
#include "tileatom.pb-c.h"
#include "wirecheck.h"

/* Set (release) once ta_codec_init checked the schema: later calls return at once. */
static atomic_bool codec_ready;

void ta_codec_init(void)
{
	if (atomic_load_explicit(&codec_ready, memory_order_acquire))
		return;
	ta_wireschema_init();
	/* the response fields the writer writes, each with a one-byte key */
	static const fw_slot written[] = {FW_RESP_ID,     FW_RESP_STATUS, FW_RESP_MESSAGE,
	                                  FW_RESP_DATA,   FW_RESP_OP,     FW_OPR_OLD,
	                                  FW_OPR_SKIPPED, FW_OPR_APPLIED, FW_ARRAY_DTYPE,
	                                  FW_ARRAY_SHAPE, FW_ARRAY_DATA};
	for (size_t i = 0; i < sizeof(written) / sizeof(written[0]); i++)
		if (!fw_key1[written[i]]) {
			fprintf(stderr,
			        "tileatom: daemon/codec.c writes one-byte keys, but response "
			        "field %d has a number of 16 or more; update it\n",
			        (int)written[i]);
			abort();
		}
	atomic_store_explicit(&codec_ready, true, memory_order_release);
}

/* ---- decoding ------------------------------------------------------------------------ */

/* Inlined into the decoding loops (a call per field costs as much as the field). */
#define HOT static inline __attribute__((always_inline))

/* One message's reading state: the rest of its bytes and its table. */
typedef struct rd {
	const uint8_t *p;   /* next byte */
	const uint8_t *end; /* end of the message */
	const fw_table *t;  /* its table */
	uint64_t seen;      /* message fields seen (by slot) */
	unsigned wire;      /* the wire type of the field just read */
	uint32_t number;    /* its field number */
	bool unknown;       /* next_field stops at fields the table does not know too */
} rd;

/* Decoding state shared by a request's messages. */
typedef struct dec {
	ta_arena *arena;    /* where strings go */
	ta_wire_request *w; /* the request */
	int addressings;    /* Addressing fields decoded so far */
	bool addr_form_any; /* one of them named a form */
} dec;

/* Notes a problem (the first one is kept). */
static void problem(dec *d, const char *fmt, const char *a, const char *b)
{
	if (d->w->problem)
		return;
	d->w->problem = true;
	snprintf(d->w->problem_msg, sizeof(d->w->problem_msg), fmt, a, b);
}

/* Reads keys until one of a field the table knows (or any, with r->unknown: then *slot may
 * be FW_NONE), skipping the others: 1 with *slot set, 0 at the end of the message, -1 when
 * malformed (a key protobuf-c refuses, or a known field of another wire type: but a single
 * element of a packed field, and a bool, which protobuf-c reads from any wire type). */
HOT int next_field(rd *r, fw_slot *slot)
{
	while (r->p < r->end) {
		uint8_t b = *r->p;
		if (b < 0x80) { /* a one-byte key (field numbers below 16) */
			if ((b & 0xf8) == 0)
				return -1; /* protobuf-c refuses a one-byte key of field 0 */
			r->p++;
			r->number = b >> 3;
			r->wire = b & 7;
		} else {
			uint64_t key;
			const uint8_t *start = r->p;
			if (!rd_varint(&r->p, r->end, &key) || r->p - start > 5)
				return -1;
			r->number = (uint32_t)(key >> 3);
			r->wire = (unsigned)(key & 7);
		}
		fw_slot s = r->number < FW_MAX_NUMBER ? (fw_slot)r->t->slot[r->number] : FW_NONE;
		*slot = s;
		if (s != FW_NONE && r->wire == r->t->wire[r->number])
			return 1;
		if (s == FW_NONE) {
			if (r->unknown)
				return 1;
			if (!rd_skip(&r->p, r->end, r->wire))
				return -1;
			continue;
		}
		bool single = r->wire == FW_VARINT && (s == FW_REGION_ORIGIN ||
		                                       s == FW_REGION_SHAPE || s == FW_ARRAY_SHAPE);
		bool flag = s == FW_OPT_NO_BOUNDS || s == FW_OPT_WANT_OLD || s == FW_IADDR_FLAT;
		return single || flag ? 1 : -1;
	}
	return 0;
}

/* Reads a 32-bit field's value (the low 32 bits of the varint, as protobuf-c keeps). */
HOT bool rd_i32(rd *r, int32_t *v)
{
	uint64_t x;
	if (!rd_varint(&r->p, r->end, &x))
		return false;
	*v = (int32_t)(uint32_t)x;
	return true;
}

/* Reads a bool field's value: the common one varint byte 0 or 1; else, whatever its wire
 * type, true when one of its bytes (a length prefix's too) has one of its low seven bits
 * set, as protobuf-c reads it. */
HOT bool rd_flag(rd *r, bool *b)
{
	if (r->wire == FW_VARINT && r->p < r->end && *r->p < 0x80) {
		*b = *r->p++ != 0;
		return true;
	}
	const uint8_t *start = r->p;
	if (!rd_skip(&r->p, r->end, r->wire))
		return false;
	*b = false;
	for (const uint8_t *q = start; q < r->p; q++)
		*b |= (*q & 0x7f) != 0;
	return true;
}

/* Opens the length-delimited value of the field just read as message table t. */
HOT bool open_msg(rd *r, fw_msg t, rd *sub)
{
	size_t n;
	if (!rd_len(&r->p, r->end, &n))
		return false;
	*sub = (rd){r->p, r->p + n, &fw_tables[t], 0, 0, 0, false};
	r->p += n;
	return true;
}

/* Appends the repeated integer field just read (packed, or one element) to the entries
 * counted at *count (the first TA_MAX_RANK kept in v). */
HOT bool rd_ints(rd *r, int64_t *v, size_t *count)
{
	uint64_t x;
	const uint8_t *q = r->p, *end = r->end;
	size_t n;
	if (r->wire == FW_LEN) {
		if (!rd_len(&r->p, r->end, &n))
			return false;
		q = r->p;
		end = r->p + n;
	}
	/* one element, or a packed run of any length (an empty one included: protobuf-c takes
	 * it as no elements) */
	bool more = r->wire != FW_LEN || q < end;
	while (more) {
		if (!rd_varint(&q, end, &x))
			return false;
		if (*count < TA_MAX_RANK)
			v[*count] = (int64_t)x;
		(*count)++;
		more = r->wire == FW_LEN && q < end;
	}
	r->p = r->wire == FW_LEN ? end : q;
	return true;
}

/* True the first time message slot s is seen in r; the second time notes the problem. */
HOT bool once(dec *d, rd *r, fw_slot s, const char *what)
{
	if (first_time(&r->seen, s))
		return true;
	problem(d, "%s.%s is given more than once (not supported)", ta_req_name(d->w->kind), what);
	return false;
}

static bool dec_msg(dec *d, rd r, fw_msg t, fw_slot s);

/* Decodes the message field just read (slot s, table t) with dec_msg; when it was seen
 * already (what: its name in the problem), into the request and then puts the request back
 * as it was, but for the shared buffers it found: a message field given twice must still
 * decode, as protobuf-c decodes it. */
HOT bool dec_sub(dec *d, rd *r, fw_slot s, fw_msg t, const char *what)
{
	rd sub;
	if (!open_msg(r, t, &sub))
		return false;
	if (once(d, r, s, what))
		return dec_msg(d, sub, t, s);
	ta_wire_request keep = *d->w;
	bool ok = dec_msg(d, sub, t, s);
	bool refs = d->w->refs;
	*d->w = keep;
	d->w->refs |= refs;
	return ok;
}

/* Decodes the BufferRef field just read (slot field) into *ref, or aside when seen already
 * in in (what: its name in the problem); the request names shared buffers. */
static bool dec_ref(dec *d, rd *in, fw_slot field, const char *what, ta_wire_ref *ref)
{
	rd r;
	ta_wire_ref spare;
	d->w->refs = true;
	if (!open_msg(in, FW_M_BUFREF, &r))
		return false;
	if (!once(d, in, field, what))
		ref = &spare;
	fw_slot s;
	int k;
	*ref = (ta_wire_ref){true, 0, 0, 0};
	while ((k = next_field(&r, &s)) > 0)
		if (!rd_varint(&r.p, r.end,
		               s == FW_REF_ID       ? &ref->buffer_id
		               : s == FW_REF_OFFSET ? &ref->offset
		                                    : &ref->length))
			return false;
	return k == 0;
}

/* Decodes a Region into *g (entries appended to what g holds). */
static bool dec_region(rd r, ta_wire_region *g)
{
	fw_slot s;
	int k;
	while ((k = next_field(&r, &s)) > 0)
		if (!(s == FW_REGION_ORIGIN ? rd_ints(&r, g->origin, &g->n_origin)
		                            : rd_ints(&r, g->shape, &g->n_shape)))
			return false;
	return k == 0;
}

/* Decodes the Array field just read into *a (or aside when seen already in r). */
static bool dec_array(dec *d, rd *in, fw_slot field, const char *what, ta_wire_array *a)
{
	rd r;
	ta_wire_array spare;
	if (!open_msg(in, FW_M_ARRAY, &r))
		return false;
	if (!once(d, in, field, what))
		a = &spare;
	a->present = true;
	a->dtype = 0;
	a->n_shape = 0;
	a->data = NULL;
	a->len = 0;
	a->shared.present = false;
	/* the common shapes first, each key one byte: dtype (a one-byte value), for a short
	 * vector a shape of one one-byte entry, and data (a one-byte length): exactly what the
	 * loop below takes from these bytes */
	const uint8_t *p = r.p;
	size_t left = (size_t)(r.end - r.p);
	size_t at =
	    left >= 7 && p[2] == fw_key1[FW_ARRAY_SHAPE] && p[3] == 1 && p[4] < 0x80 ? 5 : 2;
	if (left >= 4 && p[0] == fw_key1[FW_ARRAY_DTYPE] && p[1] < 0x80 &&
	    p[at] == fw_key1[FW_ARRAY_DATA] && p[at + 1] < 0x80 && p[at + 1] + at + 2 == left) {
		a->dtype = p[1];
		a->n_shape = at == 5;
		a->shape[0] = p[at - 1]; /* (not an entry when there is no shape) */
		a->len = p[at + 1];
		a->data = a->len ? p + at + 2 : NULL;
		return true;
	}
	fw_slot s;
	int k;
	while ((k = next_field(&r, &s)) > 0) {
		size_t n;
		if (s == FW_ARRAY_DTYPE) {
			if (!rd_i32(&r, &a->dtype))
				return false;
		} else if (s == FW_ARRAY_SHAPE) {
			if (!rd_ints(&r, a->shape, &a->n_shape))
				return false;
		} else if (s == FW_ARRAY_DATA) {
			if (!rd_len(&r.p, r.end, &n))
				return false;
			a->data = n ? r.p : NULL;
			a->len = n;
			r.p += n;
		} else if (!dec_ref(d, &r, s, "shared", &a->shared)) { /* FW_ARRAY_SHARED */
			return false;
		}
	}
	return k == 0;
}

static bool dec_fields(dec *d, rd r);

/* Decodes an Addressing (memory requests) into the request: one of its forms. */
static bool dec_addressing(dec *d, rd r)
{
	fw_slot s;
	int k;
	bool form = false;
	while ((k = next_field(&r, &s)) > 0) {
		form = true;
		/* a oneof: its members share one "seen" bit */
		fw_msg t = s == FW_ADDR_REGION    ? FW_M_REGION
		           : s == FW_ADDR_SCATTER ? FW_M_SADDR
		                                  : FW_M_IADDR;
		if (!dec_sub(d, &r, FW_ADDR_REGION, t, "addr form"))
			return false;
	}
	if (k != 0)
		return false;
	/* protobuf-c (1.4.1) refuses to merge an Addressing given again when neither it nor
	 * the ones before named a form: the bytes are malformed, as it says */
	if (!form && d->addressings > 0 && !d->addr_form_any)
		return false;
	d->addressings++;
	d->addr_form_any = d->addr_form_any || form;
	return true;
}

/* Decodes the value of message field s (table t) into the request: a Region (region or
 * window; FW_ADDR_REGION: an Addressing's), an Addressing, an Options, a ScatterAddr (its
 * indices as index[0]) or an IndexedAddr (index arrays appended). */
static bool dec_msg(dec *d, rd r, fw_msg t, fw_slot s)
{
	ta_wire_request *w = d->w;
	if (t == FW_M_REGION && s != FW_ADDR_REGION)
		return dec_region(r, &w->region);
	if (t == FW_M_REGION) {
		w->form = TA_FORM_REGION;
		return dec_region(r, &w->addr_region);
	}
	if (t == FW_M_ADDRESSING)
		return dec_addressing(d, r);
	if (t == FW_M_OPTIONS)
		w->has_options = true; /* (its fields were zeroed with the request) */
	else
		w->form = t == FW_M_SADDR ? TA_FORM_SCATTER : TA_FORM_INDEXED;
	return dec_fields(d, r);
}

/* Decodes the tile name just read into the request: copied into the arena; a name that is
 * not UTF-8 or holds a NUL is a problem (wirecheck.c's message). */
static bool dec_tile(dec *d, rd *r)
{
	size_t n;
	if (!rd_len(&r->p, r->end, &n))
		return false;
	const uint8_t *b = r->p;
	r->p += n;
	if (!ascii_no_nul(b, n) && !ta_utf8_valid_no_nul(b, n)) {
		char field[64], what[120];
		snprintf(field, sizeof(field), "%s.tile", ta_req_name(d->w->kind));
		ta_wire_string_problem(field, b, n, what, sizeof(what));
		problem(d, TA_WIRE_BAD_STRING "%s", what, "");
	}
	char *name = ta_arena_alloc_inline(d->arena, n + 1);
	if (!name)
		return false;
	memcpy(name, b, n);
	name[n] = '\0';
	d->w->tile = name;
	return true;
}

/* Decodes the fields of a data-plane request's message into the request: its body, an
 * Options, a ScatterAddr or an IndexedAddr (each slot is of one of them). */
static bool dec_fields(dec *d, rd r)
{
	ta_wire_request *w = d->w;
	fw_slot s;
	int k;
	while ((k = next_field(&r, &s)) > 0) {
		bool ok;
		ta_wire_array spare;
		switch (s) {
		case FW_RMW_TILE:
			ok = dec_tile(d, &r);
			break;
		case FW_RMW_OP:
			ok = rd_i32(&r, &w->op);
			break;
		case FW_RMW_REGION:
		case FW_MEM_WINDOW:
			ok = dec_sub(d, &r, s, FW_M_REGION,
			             s == FW_RMW_REGION ? "region" : "window");
			break;
		case FW_RMW_SCATTER_ADDR:
		case FW_RMW_INDEXED_ADDR:
			ok = dec_sub(d, &r, s, s == FW_RMW_SCATTER_ADDR ? FW_M_SADDR : FW_M_IADDR,
			             "addr");
			break;
		case FW_MEM_ADDR:
			ok = dec_sub(d, &r, s, FW_M_ADDRESSING, "addr");
			break;
		case FW_RMW_VALUES:
			ok = dec_array(d, &r, s, "values", &w->values);
			break;
		case FW_RMW_COMPARE:
			ok = dec_array(d, &r, s, "compare", &w->compare);
			break;
		case FW_MEM_PADDING:
			ok = dec_array(d, &r, s, "padding", &w->padding);
			break;
		case FW_RMW_OPTIONS:
			ok = dec_sub(d, &r, s, FW_M_OPTIONS, "options");
			break;
		case FW_OPT_SEM:
		case FW_OPT_SCOPE:
		case FW_OPT_SPACE:
			ok = rd_i32(&r, s == FW_OPT_SEM     ? &w->sem
			                : s == FW_OPT_SCOPE ? &w->scope
			                                    : &w->space);
			break;
		case FW_OPT_NO_BOUNDS:
		case FW_OPT_WANT_OLD:
			ok = rd_flag(&r, s == FW_OPT_WANT_OLD ? &w->want_old : &w->no_bounds_check);
			break;
		case FW_OPT_MASK:
			ok = dec_array(d, &r, s, "options.mask", &w->mask);
			break;
		case FW_OPT_OLD_INTO:
			ok = dec_ref(d, &r, s, "options.old_into", &w->old_into);
			break;
		case FW_SADDR_DIM: /* a uint32: its low 32 bits as they came */
			ok = rd_i32(&r, (int32_t *)&w->dim);
			break;
		case FW_IADDR_FLAT:
			ok = rd_flag(&r, &w->flat);
			break;
		case FW_SADDR_INDICES:
			ok = dec_array(d, &r, s, "addr.indices", &w->index[0]);
			w->n_indices = 1;
			break;
		default: /* FW_IADDR_INDICES, repeated: every element is new */
			r.seen = 0;
			ok = dec_array(d, &r, s, "addr.indices",
			               w->n_indices < TA_MAX_RANK ? &w->index[w->n_indices]
			                                          : &spare);
			w->n_indices++;
			break;
		}
		if (!ok)
			return false;
	}
	return k == 0;
}

/* The message of each data-plane body, by its Request slot (FW_M_REQUEST: not one). Its
 * kind is its field number (ta_types.h). */
static const fw_msg body_msg[FW_SLOTS] = {[FW_REQ_ELEMENTWISE] = FW_M_ELEMENTWISE,
                                          [FW_REQ_SCATTER] = FW_M_SCATTER,
                                          [FW_REQ_INDEXED] = FW_M_INDEXED,
                                          [FW_REQ_WRITE] = FW_M_WRITE,
                                          [FW_REQ_READ] = FW_M_READ,
                                          [FW_REQ_GATHER] = FW_M_GATHER,
                                          [FW_REQ_SCATTER_STORE] = FW_M_SCATTER_STORE,
                                          [FW_REQ_ATOMIC_LOAD] = FW_M_ATOMIC_LOAD,
                                          [FW_REQ_ATOMIC_STORE] = FW_M_ATOMIC_STORE};

ta_wire_outcome ta_codec_decode(ta_arena *arena, const uint8_t *data, size_t len,
                                ta_wire_request *w)
{
	ta_codec_init();
	memset(w, 0, offsetof(ta_wire_request, region)); /* the scalars */
	w->tile = "";
	w->region.n_origin = w->region.n_shape = 0;
	w->addr_region.n_origin = w->addr_region.n_shape = 0;
	w->values.present = w->compare.present = w->padding.present = false;
	w->mask.present = w->old_into.present = false;
	dec d = {arena, w, 0, false};
	/* the Request: its id and its bodies (the oneof's members, a control-plane one too) */
	rd r = {data, data + len, &fw_tables[FW_M_REQUEST], 0, 0, 0, true};
	const ProtobufCMessageDescriptor *qd = &tileatom__request__descriptor;
	rd body = {NULL, NULL, NULL, 0, 0, 0, false};
	int nbodies = 0;
	fw_slot s;
	int k;
	while ((k = next_field(&r, &s)) > 0) {
		if (s == FW_REQ_ID) {
			if (!rd_varint(&r.p, r.end, &w->id))
				return TA_WIRE_MALFORMED;
			continue;
		}
		const ProtobufCFieldDescriptor *f =
		    s == FW_NONE ? protobuf_c_message_descriptor_get_field(qd, r.number) : NULL;
		if (s == FW_NONE && !(f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))) {
			if (!rd_skip(&r.p, r.end, r.wire)) /* an unknown field */
				return TA_WIRE_MALFORMED;
			continue;
		}
		if (r.wire != FW_LEN) /* a body that is not a message */
			return TA_WIRE_MALFORMED;
		nbodies++;
		/* ping and the control plane: TA_REQ_NONE (protobuf-c) */
		fw_msg t = body_msg[s];
		w->kind = t != FW_M_REQUEST ? (ta_req_kind)r.number : TA_REQ_NONE;
		if (t != FW_M_REQUEST ? !open_msg(&r, t, &body) : !rd_skip(&r.p, r.end, r.wire))
			return TA_WIRE_MALFORMED;
	}
	if (k < 0)
		return TA_WIRE_MALFORMED;
	if (nbodies > 1) {
		/* refused below; but bytes protobuf-c would not unpack are malformed first (the
		 * rare case is left to protobuf-c's unpack: a control-plane body may be one) */
		if (!tileatom__request__unpack(&arena->pb, len, data))
			return TA_WIRE_MALFORMED;
		w->kind = TA_REQ_NONE;
		problem(&d, "%s%s", "the Request carries more than one body (not supported)", "");
		return TA_WIRE_DATA;
	}
	if (nbodies == 1 && w->kind == TA_REQ_NONE)
		return TA_WIRE_CONTROL;
	if (nbodies == 0)
		return TA_WIRE_DATA;
	return dec_fields(&d, body) ? TA_WIRE_DATA : TA_WIRE_MALFORMED;
}

/* ---- the response writer -------------------------------------------------------------- */

/* Appends a one-byte key and a varint; returns the byte after them. */
static inline uint8_t *wr_key_var(uint8_t *p, uint8_t key, uint64_t v)
{
	*p++ = key;
	return wr_varint(p, v);
}

int ta_codec_append(const ta_reply_msg *m, uint32_t max_payload, ta_frame_buf *buf, size_t *need)
{
	ta_codec_init();
	const uint8_t *key = fw_key1;
	/* sizes, innermost first; zero scalars and empty fields are not written (an enum as
	 * protobuf-c writes it: a negative one as ten bytes) */
	uint64_t dtype = (uint64_t)(int64_t)m->dtype, status = (uint64_t)(int64_t)m->status;
	size_t shape_size = 0, arr_size = 0, body_size = 0;
	size_t msg_len = m->message ? strlen(m->message) : 0;
	bool arr = m->body == TA_BODY_DATA || (m->body == TA_BODY_OP && m->has_old);
	if (arr && m->has_old) {
		for (size_t i = 0; i < m->rank; i++)
			shape_size += vsize((uint64_t)m->shape[i]);
		arr_size = (dtype ? 1 + vsize(dtype) : 0) +
		           (m->rank ? 1 + vsize(shape_size) + shape_size : 0) +
		           (m->len ? 1 + vsize(m->len) + m->len : 0);
	}
	if (m->body == TA_BODY_OP)
		body_size = (m->has_old ? 1 + vsize(arr_size) + arr_size : 0) +
		            (m->skipped ? 1 + vsize(m->skipped) : 0) +
		            (m->applied ? 1 + vsize(m->applied) : 0);
	else if (m->body == TA_BODY_DATA)
		body_size = arr_size;
	size_t size = (m->id ? 1 + vsize(m->id) : 0) + (status ? 1 + vsize(status) : 0) +
	              (msg_len ? 1 + vsize(msg_len) + msg_len : 0) +
	              (m->body != TA_BODY_NONE ? 1 + vsize(body_size) + body_size : 0);
	if (need)
		*need = size;
	uint8_t *at, *p;
	int rc = ta_frame_buf_open(buf, size, max_payload, &at);
	if (rc != 0)
		return rc;
	p = at;
	if (m->id)
		p = wr_key_var(p, key[FW_RESP_ID], m->id);
	if (status)
		p = wr_key_var(p, key[FW_RESP_STATUS], status);
	if (msg_len) {
		p = wr_key_var(p, key[FW_RESP_MESSAGE], msg_len);
		memcpy(p, m->message, msg_len);
		p += msg_len;
	}
	if (m->body != TA_BODY_NONE) {
		uint8_t k = m->body == TA_BODY_OP ? key[FW_RESP_OP] : key[FW_RESP_DATA];
		p = wr_key_var(p, k, body_size);
		if (m->body == TA_BODY_OP && m->has_old)
			p = wr_key_var(p, key[FW_OPR_OLD], arr_size);
		if (arr && m->has_old) {
			if (dtype)
				p = wr_key_var(p, key[FW_ARRAY_DTYPE], dtype);
			if (m->rank) {
				p = wr_key_var(p, key[FW_ARRAY_SHAPE], shape_size);
				for (size_t i = 0; i < m->rank; i++)
					p = wr_varint(p, (uint64_t)m->shape[i]);
			}
			if (m->len) {
				p = wr_key_var(p, key[FW_ARRAY_DATA], m->len);
				fw_copy_small(p, m->data, m->len);
				p += m->len;
			}
		}
		if (m->body == TA_BODY_OP) {
			if (m->skipped)
				p = wr_key_var(p, key[FW_OPR_SKIPPED], m->skipped);
			if (m->applied)
				p = wr_key_var(p, key[FW_OPR_APPLIED], m->applied);
		}
	}
	if ((size_t)(p - at) != size)
		abort(); /* the sizes above and the writes here disagree: a bug in this file */
	buf->len += TA_FRAME_HEADER + size;
	return 0;
}

/* ---- the kept request (codec.h) ---- */

/* Splits the len bytes at payload, a Request, into its id (*id) and the bytes after the id
 * field (*rest) when the id field comes first or is absent (id 0); false when its varint
 * does not decode or there are no bytes. The descriptors were read (ta_codec_init) by the
 * decoder that took the kept request. */
static inline bool split_id(const uint8_t *payload, size_t len, uint64_t *id, const uint8_t **rest)
{
	const uint8_t *p = payload, *end = payload + len;
	*id = 0;
	if (len == 0)
		return false;
	if (*p == fw_key1[FW_REQ_ID]) {
		p++;
		if (!rd_varint(&p, end, id))
			return false;
	}
	*rest = p;
	return true;
}

/* Adds to r the hole of operand op of the kept plan, decoded as view from its bytes at wire
 * (the payload's n bytes from rest on); false when its data is not one element in host
 * memory lying in the kept bytes. */
static bool add_hole(ta_repeat *r, ta_operand *op, const ta_array_view *view, const uint8_t *wire,
                     const uint8_t *rest, size_t n)
{
	size_t es = ta_dtype_size(op->dtype);
	if (op->device || !view->present || op->data != view->data || !wire || view->nbytes != es ||
	    es > sizeof(uint64_t) || wire < rest || (size_t)(wire - rest) + es > n ||
	    r->n_holes == TA_REPEAT_HOLES)
		return false;
	int h = r->n_holes++;
	uint64_t *slot = &r->slots[h];
	*slot = 0;
	memcpy(slot, wire, es);
	op->data = slot;
	/* in order of offset */
	ta_repeat_hole hole = {(uint16_t)(wire - rest), (uint16_t)es, slot};
	while (h > 0 && r->holes[h - 1].at > hole.at) {
		r->holes[h] = r->holes[h - 1];
		h--;
	}
	r->holes[h] = hole;
	return true;
}

bool ta_repeat_record(ta_repeat *r, const uint8_t *payload, size_t len, const ta_wire_request *w,
                      const ta_request *req, const ta_plan *plan, const ta_tile_cache *cache,
                      ta_tile *tile)
{
	r->valid = false;
	r->gen++;
	uint64_t id = 0;
	const uint8_t *rest = NULL;
	if (!split_id(payload, len, &id, &rest) || id != w->id)
		return false; /* (an id after the body: split_id says 0) */
	size_t n = (size_t)(payload + len - rest);
	/* the plans that do not depend on their operands' bytes: one element, bounds checked
	 * (not scanned at build), no mask, host memory */
	if (n < TA_REPEAT_MIN_BYTES || n > TA_REPEAT_MAX_BYTES || plan->count != 1 ||
	    !plan->check_bounds || plan->mask.data || plan->old_out_device || cache->tile != tile)
		return false;
	r->plan = *plan;
	r->n_holes = 0;
	for (int i = 0; i < plan->n_index; i++)
		if (!add_hole(r, &r->plan.index[i], &req->index[i], w->index[i].data, rest, n))
			return false;
	if ((plan->values.data &&
	     !add_hole(r, &r->plan.values, &req->values, w->values.data, rest, n)) ||
	    (plan->compare.data &&
	     !add_hole(r, &r->plan.compare, &req->compare, w->compare.data, rest, n)))
		return false;
	for (int h = 1; h < r->n_holes; h++)
		if (r->holes[h - 1].at + r->holes[h - 1].len > r->holes[h].at)
			return false; /* one byte range for two operands */
	r->plan.old_out = plan->want_old ? &r->old : NULL;
	memset(r->body, 0, sizeof(r->body));
	memcpy(r->body, rest, n);
	memset(r->same, 0xff, sizeof(r->same));
	for (int h = 0; h < r->n_holes; h++)
		memset((uint8_t *)r->same + r->holes[h].at, 0, r->holes[h].len);
	memcpy(&r->last_body, (const uint8_t *)r->body + n - 8, 8);
	memcpy(&r->last_same, (const uint8_t *)r->same + n - 8, 8);
	r->len = (uint32_t)n;
	r->kind = w->kind;
	r->tile = tile;
	r->stamp = cache->stamp;
	r->tiles = *cache;
	memcpy(r->name, cache->name, sizeof(r->name));
	r->valid = true;
	return true;
}

bool ta_repeat_match(const ta_repeat *r, const uint8_t *payload, size_t len, uint64_t *id,
                     uint64_t *slots)
{
	const uint8_t *rest = NULL;
	if (!r->valid || !split_id(payload, len, id, &rest) ||
	    (size_t)(payload + len - rest) != r->len)
		return false;
	/* word by word, the holes masked off; the last partial word compared as the last 8
	 * bytes (len >= 8) */
	uint64_t diff = 0, x;
	size_t words = r->len / 8;
	for (size_t w = 0; w < words; w++) {
		memcpy(&x, rest + 8 * w, 8);
		diff |= (x ^ r->body[w]) & r->same[w];
	}
	memcpy(&x, rest + r->len - 8, 8);
	diff |= (x ^ r->last_body) & r->last_same;
	if (diff != 0)
		return false;
	for (int h = 0; h < r->n_holes; h++)
		fw_copy_small((uint8_t *)(slots + (r->holes[h].slot - r->slots)),
		              rest + r->holes[h].at, r->holes[h].len);
	return true;
}
