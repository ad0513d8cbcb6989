/* tac_fastwire.c: the client library's hot-path wire codec (see tac_fastwire.h).
 *
 * Encoding: tac_fastwire_plan sizes every nested message once (Arrays, Region, addressing,
 * Options, the body, the Request), declining what it does not write (another body, unknown
 * fields, a shared buffer, Options.old_into, a negative enum, more than TAC_FW_MAX_INDICES
 * index arrays); tac_fastwire_write then writes the fields in field-number order (the order
 * of proto/ta_wireschema.c's table, checked at init), skipping zero scalars, NULL or empty
 * strings, empty bytes and empty packed fields, and writing every non-NULL message, as
 * protobuf_c_message_pack does for proto3 fields. A request of at most 127 bytes
 * (tac_fastwire_write_small, and tac_fastwire_write_atomic from the public arguments) is
 * written in one pass instead: every length prefix is then one byte, written as a
 * placeholder and filled in when its message ends. The last request written from public
 * arguments is kept as a template (tac_fw_template: its bytes after the id field, where its
 * data lie, and every argument the bytes depend on as its key), so that the next call with
 * the same key is written as its id, the template's bytes and its own data, skipping the
 * checks and the writing.
 *
 * Decoding: a straight pass for the common OpResponse laid out as the daemon writes it
 * (dec_straight), else one pass per message with the shared tables; declined (so that protobuf-c
 * answers exactly as before) are an unknown field or wire type, a singular field given
 * twice or a second body, a message string (only errors have one), a non-empty ping body,
 * a shared buffer, a non-packed shape, more than TAC_FW_MAX_SHAPE extents, a varint of
 * more than 10 bytes or whose 10th byte is over 1, and an enum beyond INT32_MAX or longer
 * than 5 bytes. Empty bytes get data NULL and an empty packed shape a NULL array, as
 * protobuf-c gives them. */
#include "tac_fastwire.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* True once the shared tables are filled (schema_ready). */
static bool schema_filled;
/* True when every key dec_straight compares is one byte (field numbers below 16), so that
 * a byte equal to it is that key (set by fill_keys). */
static bool straight_keys;

/* The one-byte key of each slot of each message, [msg][slot][0] with the varint wire
 * type and [1] length-delimited; 0 when the field number is 16 or more, or the slot is not
 * in the message (filled by fill_keys before schema_filled is set). */
static uint8_t small_keys[FW_M_COUNT][FW_SLOTS][2];

/* Fills the shared tables (ta_wireschema_init), small_keys and straight_keys; run once
 * per process (pthread_once in schema_ready). */
static void fill_keys(void)
{
	ta_wireschema_init();
	for (int m = 0; m < FW_M_COUNT; m++)
		for (int sl = 1; sl < FW_SLOTS; sl++) {
			unsigned number = fw_tables[m].number[sl];
			if (number > 0 && number < 16) {
				small_keys[m][sl][0] = (uint8_t)(number << 3 | FW_VARINT);
				small_keys[m][sl][1] = (uint8_t)(number << 3 | FW_LEN);
			}
		}
	static const fw_slot keyed[] = {FW_RESP_ID,     FW_RESP_STATUS, FW_RESP_OP,
	                                FW_OPR_OLD,     FW_OPR_SKIPPED, FW_OPR_APPLIED,
	                                FW_ARRAY_DTYPE, FW_ARRAY_SHAPE, FW_ARRAY_DATA};
	bool all = true;
	for (size_t i = 0; i < sizeof(keyed) / sizeof(keyed[0]); i++)
		all = all && fw_key1[keyed[i]] != 0;
	straight_keys = all;
}

/* fill_keys once per process, then one load per call instead of a pthread_once: the tables
 * never change once filled, and a thread that sees the flag unset goes through the
 * pthread_once, which orders the filling before its return. */
static inline void schema_ready(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	if (__atomic_load_n(&schema_filled, __ATOMIC_ACQUIRE))
		return;
	if (pthread_once(&once, fill_keys) != 0)
		abort();
	__atomic_store_n(&schema_filled, true, __ATOMIC_RELEASE);
}

/* ---- encoding ------------------------------------------------------------------------ */

/* The tag (key) of slot s in message table t with wire type w. */
static inline uint64_t mtag(const fw_table *t, fw_slot s, unsigned w)
{
	return ((uint64_t)t->number[s] << 3) | w;
}

/* Bytes of a length-delimited field of slot s in t holding n bytes. */
static inline size_t mlen_field(const fw_table *t, fw_slot s, size_t n)
{
	return vsize(mtag(t, s, FW_LEN)) + vsize(n) + n;
}

/* Bytes of a varint field of slot s in t holding v (0: omitted). */
static inline size_t mvar_field(const fw_table *t, fw_slot s, uint64_t v)
{
	return v ? vsize(mtag(t, s, FW_VARINT)) + vsize(v) : 0;
}

/* Writes a varint field (nothing when v is 0). */
static inline uint8_t *mwr_var(uint8_t *p, const fw_table *t, fw_slot s, uint64_t v)
{
	if (!v)
		return p;
	p = wr_varint(p, mtag(t, s, FW_VARINT));
	return wr_varint(p, v);
}

/* Writes the tag and length of a length-delimited field. */
static inline uint8_t *mwr_head(uint8_t *p, const fw_table *t, fw_slot s, size_t n)
{
	p = wr_varint(p, mtag(t, s, FW_LEN));
	return wr_varint(p, n);
}

/* Bytes of n int64 values packed. */
static inline size_t packed_size(const int64_t *v, size_t n)
{
	size_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		bytes += vsize((uint64_t)v[i]);
	return bytes;
}

/* Writes n int64 values packed (their tag and length first); nothing when n is 0. */
static inline uint8_t *wr_packed(uint8_t *p, const fw_table *t, fw_slot s, const int64_t *v,
                                 size_t n, size_t bytes)
{
	if (!n)
		return p;
	p = mwr_head(p, t, s, bytes);
	for (size_t i = 0; i < n; i++)
		p = wr_varint(p, (uint64_t)v[i]);
	return p;
}

/* Sizes an Array; false when the encoder does not take it. */
static bool plan_array(const Tileatom__Array *a, tac_fw_array_size *sz)
{
	const fw_table *t = &fw_tables[FW_M_ARRAY];
	if (a->base.n_unknown_fields || a->shared || (int)a->dtype < 0 ||
	    (a->n_shape && !a->shape) || (a->data.len && !a->data.data))
		return false;
	sz->shape = packed_size(a->shape, a->n_shape);
	sz->msg = mvar_field(t, FW_ARRAY_DTYPE, (uint64_t)a->dtype) +
	          (a->n_shape ? mlen_field(t, FW_ARRAY_SHAPE, sz->shape) : 0) +
	          (a->data.len ? mlen_field(t, FW_ARRAY_DATA, a->data.len) : 0);
	return true;
}

/* Writes an Array sized by plan_array (its tag and length first, as field s of t). */
static uint8_t *wr_array(uint8_t *p, const fw_table *t, fw_slot s, const Tileatom__Array *a,
                         const tac_fw_array_size *sz)
{
	const fw_table *at = &fw_tables[FW_M_ARRAY];
	p = mwr_head(p, t, s, sz->msg);
	p = mwr_var(p, at, FW_ARRAY_DTYPE, (uint64_t)a->dtype);
	p = wr_packed(p, at, FW_ARRAY_SHAPE, a->shape, a->n_shape, sz->shape);
	if (a->data.len) {
		p = mwr_head(p, at, FW_ARRAY_DATA, a->data.len);
		memcpy(p, a->data.data, a->data.len);
		p += a->data.len;
	}
	return p;
}

/* The fields of the three atomic request bodies, in their field order. */
typedef struct body_view {
	fw_msg msg;                         /* which body message */
	const char *tile;                   /* tile */
	int op;                             /* op */
	const Tileatom__Region *region;     /* region (or NULL) */
	const Tileatom__ScatterAddr *saddr; /* scatter addressing (or NULL) */
	const Tileatom__IndexedAddr *iaddr; /* indexed addressing (or NULL) */
	const Tileatom__Array *values;      /* values (or NULL) */
	const Tileatom__Array *compare;     /* compare (or NULL) */
	const Tileatom__Options *options;   /* options (or NULL) */
	size_t tile_len;                    /* strlen(tile), 0 when NULL */
} body_view;

/* Reads req's body into *v; false for a body the encoder does not write. */
static bool view_body(const Tileatom__Request *req, body_view *v)
{
	const ProtobufCMessage *base;
	switch (req->body_case) {
	case TILEATOM__REQUEST__BODY_ELEMENTWISE: {
		const Tileatom__ElementwiseAtomicRequest *b = req->elementwise;
		if (!b)
			return false;
		base = &b->base;
		*v = (body_view){FW_M_ELEMENTWISE, b->tile,    (int)b->op, b->region, NULL, NULL,
		                 b->values,        b->compare, b->options, 0};
		break;
	}
	case TILEATOM__REQUEST__BODY_SCATTER: {
		const Tileatom__ScatterAtomicRequest *b = req->scatter;
		if (!b)
			return false;
		base = &b->base;
		*v = (body_view){FW_M_SCATTER, b->tile,   (int)b->op, b->region,  b->addr,
		                 NULL,         b->values, NULL,       b->options, 0};
		break;
	}
	case TILEATOM__REQUEST__BODY_INDEXED: {
		const Tileatom__IndexedAtomicRequest *b = req->indexed;
		if (!b)
			return false;
		base = &b->base;
		*v = (body_view){FW_M_INDEXED, b->tile,   (int)b->op, b->region,  NULL,
		                 b->addr,      b->values, b->compare, b->options, 0};
		break;
	}
	default:
		return false;
	}
	if (base->n_unknown_fields || v->op < 0)
		return false;
	v->tile_len = v->tile ? strlen(v->tile) : 0;
	return true;
}

/* Sizes the body of v (and everything in it) into plan->body; false when declined. */
static bool plan_body(const body_view *v, tac_fw_plan *plan)
{
	const fw_table *t = &fw_tables[v->msg];
	size_t n = (v->tile_len ? mlen_field(t, FW_RMW_TILE, v->tile_len) : 0) +
	           mvar_field(t, FW_RMW_OP, (uint64_t)v->op);
	if (v->region) {
		const Tileatom__Region *r = v->region;
		const fw_table *rt = &fw_tables[FW_M_REGION];
		if (r->base.n_unknown_fields || (r->n_origin && !r->origin) ||
		    (r->n_shape && !r->shape))
			return false;
		plan->region_origin = packed_size(r->origin, r->n_origin);
		plan->region_shape = packed_size(r->shape, r->n_shape);
		plan->region =
		    (r->n_origin ? mlen_field(rt, FW_REGION_ORIGIN, plan->region_origin) : 0) +
		    (r->n_shape ? mlen_field(rt, FW_REGION_SHAPE, plan->region_shape) : 0);
		n += mlen_field(t, FW_RMW_REGION, plan->region);
	}
	if (v->saddr) {
		const Tileatom__ScatterAddr *a = v->saddr;
		const fw_table *st = &fw_tables[FW_M_SADDR];
		if (a->base.n_unknown_fields)
			return false;
		plan->addr = mvar_field(st, FW_SADDR_DIM, a->dim);
		if (a->indices) {
			if (!plan_array(a->indices, &plan->index[0]))
				return false;
			plan->addr += mlen_field(st, FW_SADDR_INDICES, plan->index[0].msg);
		}
		n += mlen_field(t, FW_RMW_SCATTER_ADDR, plan->addr);
	}
	if (v->iaddr) {
		const Tileatom__IndexedAddr *a = v->iaddr;
		const fw_table *it = &fw_tables[FW_M_IADDR];
		if (a->base.n_unknown_fields || a->n_indices > TAC_FW_MAX_INDICES ||
		    (a->n_indices && !a->indices))
			return false;
		plan->addr = mvar_field(it, FW_IADDR_FLAT, a->flat != 0);
		for (size_t i = 0; i < a->n_indices; i++) {
			if (!a->indices[i] || !plan_array(a->indices[i], &plan->index[i]))
				return false;
			plan->addr += mlen_field(it, FW_IADDR_INDICES, plan->index[i].msg);
		}
		n += mlen_field(t, FW_RMW_INDEXED_ADDR, plan->addr);
	}
	if (v->values) {
		if (!plan_array(v->values, &plan->values))
			return false;
		n += mlen_field(t, FW_RMW_VALUES, plan->values.msg);
	}
	if (v->compare) {
		if (!plan_array(v->compare, &plan->compare))
			return false;
		n += mlen_field(t, FW_RMW_COMPARE, plan->compare.msg);
	}
	if (v->options) {
		const Tileatom__Options *o = v->options;
		const fw_table *ot = &fw_tables[FW_M_OPTIONS];
		if (o->base.n_unknown_fields || o->old_into || (int)o->sem < 0 ||
		    (int)o->scope < 0 || (int)o->space < 0)
			return false;
		plan->options = mvar_field(ot, FW_OPT_SEM, (uint64_t)o->sem) +
		                mvar_field(ot, FW_OPT_SCOPE, (uint64_t)o->scope) +
		                mvar_field(ot, FW_OPT_SPACE, (uint64_t)o->space) +
		                mvar_field(ot, FW_OPT_NO_BOUNDS, o->no_bounds_check != 0) +
		                mvar_field(ot, FW_OPT_WANT_OLD, o->want_old != 0);
		if (o->mask) {
			if (!plan_array(o->mask, &plan->mask))
				return false;
			plan->options += mlen_field(ot, FW_OPT_MASK, plan->mask.msg);
		}
		n += mlen_field(t, FW_RMW_OPTIONS, plan->options);
	}
	plan->body = n;
	return true;
}

bool tac_fastwire_plan(const Tileatom__Request *req, tac_fw_plan *plan)
{
	ta_wireschema_init();
	const fw_table *t = &fw_tables[FW_M_REQUEST];
	if (req->base.n_unknown_fields)
		return false;
	size_t size = mvar_field(t, FW_REQ_ID, req->id);
	if (req->body_case == TILEATOM__REQUEST__BODY_PING) {
		if (!req->ping || req->ping->base.n_unknown_fields)
			return false;
		plan->body = 0;
		plan->size = size + mlen_field(t, FW_REQ_PING, 0);
		return true;
	}
	body_view v;
	if (!view_body(req, &v) || !plan_body(&v, plan))
		return false;
	fw_slot s = v.msg == FW_M_ELEMENTWISE ? FW_REQ_ELEMENTWISE
	            : v.msg == FW_M_SCATTER   ? FW_REQ_SCATTER
	                                      : FW_REQ_INDEXED;
	plan->size = size + mlen_field(t, s, plan->body);
	return true;
}

uint8_t *tac_fastwire_write(const Tileatom__Request *req, const tac_fw_plan *plan, uint8_t *p)
{
	const fw_table *t = &fw_tables[FW_M_REQUEST];
	uint8_t *start = p;
	p = mwr_var(p, t, FW_REQ_ID, req->id);
	if (req->body_case == TILEATOM__REQUEST__BODY_PING) {
		p = mwr_head(p, t, FW_REQ_PING, 0);
	} else {
		body_view v;
		if (!view_body(req, &v))
			abort(); /* planned, so taken: a bug in this file */
		fw_slot s = v.msg == FW_M_ELEMENTWISE ? FW_REQ_ELEMENTWISE
		            : v.msg == FW_M_SCATTER   ? FW_REQ_SCATTER
		                                      : FW_REQ_INDEXED;
		p = mwr_head(p, t, s, plan->body);
		const fw_table *bt = &fw_tables[v.msg];
		if (v.tile_len) {
			p = mwr_head(p, bt, FW_RMW_TILE, v.tile_len);
			memcpy(p, v.tile, v.tile_len);
			p += v.tile_len;
		}
		p = mwr_var(p, bt, FW_RMW_OP, (uint64_t)v.op);
		if (v.region) {
			const fw_table *rt = &fw_tables[FW_M_REGION];
			p = mwr_head(p, bt, FW_RMW_REGION, plan->region);
			p = wr_packed(p, rt, FW_REGION_ORIGIN, v.region->origin, v.region->n_origin,
			              plan->region_origin);
			p = wr_packed(p, rt, FW_REGION_SHAPE, v.region->shape, v.region->n_shape,
			              plan->region_shape);
		}
		if (v.saddr) {
			const fw_table *st = &fw_tables[FW_M_SADDR];
			p = mwr_head(p, bt, FW_RMW_SCATTER_ADDR, plan->addr);
			p = mwr_var(p, st, FW_SADDR_DIM, v.saddr->dim);
			if (v.saddr->indices)
				p = wr_array(p, st, FW_SADDR_INDICES, v.saddr->indices,
				             &plan->index[0]);
		}
		if (v.iaddr) {
			const fw_table *it = &fw_tables[FW_M_IADDR];
			p = mwr_head(p, bt, FW_RMW_INDEXED_ADDR, plan->addr);
			for (size_t i = 0; i < v.iaddr->n_indices; i++)
				p = wr_array(p, it, FW_IADDR_INDICES, v.iaddr->indices[i],
				             &plan->index[i]);
			p = mwr_var(p, it, FW_IADDR_FLAT, v.iaddr->flat != 0);
		}
		if (v.values)
			p = wr_array(p, bt, FW_RMW_VALUES, v.values, &plan->values);
		if (v.compare)
			p = wr_array(p, bt, FW_RMW_COMPARE, v.compare, &plan->compare);
		if (v.options) {
			const Tileatom__Options *o = v.options;
			const fw_table *ot = &fw_tables[FW_M_OPTIONS];
			p = mwr_head(p, bt, FW_RMW_OPTIONS, plan->options);
			p = mwr_var(p, ot, FW_OPT_SEM, (uint64_t)o->sem);
			p = mwr_var(p, ot, FW_OPT_SCOPE, (uint64_t)o->scope);
			p = mwr_var(p, ot, FW_OPT_SPACE, (uint64_t)o->space);
			p = mwr_var(p, ot, FW_OPT_NO_BOUNDS, o->no_bounds_check != 0);
			p = mwr_var(p, ot, FW_OPT_WANT_OLD, o->want_old != 0);
			if (o->mask)
				p = wr_array(p, ot, FW_OPT_MASK, o->mask, &plan->mask);
		}
	}
	if ((size_t)(p - start) != plan->size)
		abort(); /* the plan and the writes disagree: a bug in this file */
	return p;
}

/* ---- one pass for small requests -------------------------------------------------------- */

/* The largest payload whose every length prefix is one byte. */
#define SMALL_MAX 127

/* Writes the key of slot s of message msg with wire type w: one byte from small_keys
 * when it has one (field numbers below 16), else as a varint. */
static inline uint8_t *sm_key(uint8_t *p, fw_msg msg, fw_slot s, unsigned w)
{
	uint8_t k = small_keys[msg][s][w == FW_LEN];
	if (k) {
		*p = k;
		return p + 1;
	}
	return wr_varint(p, mtag(&fw_tables[msg], s, w));
}

/* Writes a varint field (nothing when v is 0). */
static inline uint8_t *sm_var(uint8_t *p, fw_msg msg, fw_slot s, uint64_t v)
{
	if (!v)
		return p;
	p = sm_key(p, msg, s, FW_VARINT);
	return wr_varint(p, v);
}

/* Writes the key and length of a length-delimited field of n bytes. */
static inline uint8_t *sm_head(uint8_t *p, fw_msg msg, fw_slot s, size_t n)
{
	p = sm_key(p, msg, s, FW_LEN);
	return wr_varint(p, n);
}

/* Opens a length-delimited field of slot s in msg whose length is not known yet: its key
 * and a one-byte placeholder for the length (*len_at), right when the whole payload ends
 * up at most SMALL_MAX bytes, since no nested message is longer than the payload. */
static inline uint8_t *sm_open(uint8_t *p, fw_msg msg, fw_slot s, uint8_t **len_at)
{
	p = sm_key(p, msg, s, FW_LEN);
	*len_at = p;
	return p + 1;
}

/* Closes a field opened by sm_open at len_at, now ending at p (a length of 128 or more is
 * cut here, and the payload then exceeds SMALL_MAX: tac_fastwire_write_small declines it). */
static inline void sm_close(uint8_t *len_at, const uint8_t *p)
{
	*len_at = (uint8_t)(p - len_at - 1);
}

/* Writes n int64 values packed (nothing when n is 0); NULL when n is over
 * TAC_FW_SMALL_EXTENTS (the room's bound). */
static inline uint8_t *sm_packed(uint8_t *p, fw_msg msg, fw_slot s, const int64_t *v, size_t n)
{
	if (!n)
		return p;
	if (n > TAC_FW_SMALL_EXTENTS || !v)
		return NULL;
	uint8_t *len_at;
	p = sm_open(p, msg, s, &len_at);
	for (size_t i = 0; i < n; i++)
		p = wr_varint(p, (uint64_t)v[i]);
	sm_close(len_at, p);
	return p;
}

/* Writes Array a as field s of msg in one pass; NULL when the encoder declines it (what
 * plan_array declines, or more than SMALL_MAX data bytes or TAC_FW_SMALL_EXTENTS extents). */
static inline __attribute__((always_inline)) uint8_t *sm_array(uint8_t *p, fw_msg msg, fw_slot s,
                                                               const Tileatom__Array *a)
{
	if (a->base.n_unknown_fields || a->shared || (int)a->dtype < 0 || a->data.len > SMALL_MAX ||
	    (a->data.len && !a->data.data))
		return NULL;
	uint8_t *len_at;
	p = sm_open(p, msg, s, &len_at);
	p = sm_var(p, FW_M_ARRAY, FW_ARRAY_DTYPE, (uint64_t)a->dtype);
	p = sm_packed(p, FW_M_ARRAY, FW_ARRAY_SHAPE, a->shape, a->n_shape);
	if (!p)
		return NULL;
	if (a->data.len) {
		p = sm_head(p, FW_M_ARRAY, FW_ARRAY_DATA, a->data.len);
		fw_copy_small(p, a->data.data, a->data.len);
		p += a->data.len;
	}
	sm_close(len_at, p);
	return p;
}

/* Writes the body of v (field s of the Request) in one pass; NULL when declined. */
static uint8_t *sm_body(uint8_t *p, fw_slot s, const body_view *v)
{
	const fw_msg bm = v->msg;
	uint8_t *body_at, *len_at;
	p = sm_open(p, FW_M_REQUEST, s, &body_at);
	if (v->tile_len) {
		if (v->tile_len > SMALL_MAX)
			return NULL;
		p = sm_head(p, bm, FW_RMW_TILE, v->tile_len);
		memcpy(p, v->tile, v->tile_len);
		p += v->tile_len;
	}
	p = sm_var(p, bm, FW_RMW_OP, (uint64_t)v->op);
	if (v->region) {
		const Tileatom__Region *r = v->region;
		if (r->base.n_unknown_fields)
			return NULL;
		p = sm_open(p, bm, FW_RMW_REGION, &len_at);
		p = sm_packed(p, FW_M_REGION, FW_REGION_ORIGIN, r->origin, r->n_origin);
		if (p)
			p = sm_packed(p, FW_M_REGION, FW_REGION_SHAPE, r->shape, r->n_shape);
		if (!p)
			return NULL;
		sm_close(len_at, p);
	}
	if (v->saddr) {
		const Tileatom__ScatterAddr *a = v->saddr;
		if (a->base.n_unknown_fields)
			return NULL;
		p = sm_open(p, bm, FW_RMW_SCATTER_ADDR, &len_at);
		p = sm_var(p, FW_M_SADDR, FW_SADDR_DIM, a->dim);
		if (a->indices && !(p = sm_array(p, FW_M_SADDR, FW_SADDR_INDICES, a->indices)))
			return NULL;
		sm_close(len_at, p);
	}
	if (v->iaddr) {
		const Tileatom__IndexedAddr *a = v->iaddr;
		if (a->base.n_unknown_fields || a->n_indices > TAC_FW_MAX_INDICES ||
		    (a->n_indices && !a->indices))
			return NULL;
		p = sm_open(p, bm, FW_RMW_INDEXED_ADDR, &len_at);
		for (size_t i = 0; i < a->n_indices; i++)
			if (!a->indices[i] ||
			    !(p = sm_array(p, FW_M_IADDR, FW_IADDR_INDICES, a->indices[i])))
				return NULL;
		p = sm_var(p, FW_M_IADDR, FW_IADDR_FLAT, a->flat != 0);
		sm_close(len_at, p);
	}
	if (v->values && !(p = sm_array(p, bm, FW_RMW_VALUES, v->values)))
		return NULL;
	if (v->compare && !(p = sm_array(p, bm, FW_RMW_COMPARE, v->compare)))
		return NULL;
	if (v->options) {
		const Tileatom__Options *o = v->options;
		if (o->base.n_unknown_fields || o->old_into || (int)o->sem < 0 ||
		    (int)o->scope < 0 || (int)o->space < 0)
			return NULL;
		p = sm_open(p, bm, FW_RMW_OPTIONS, &len_at);
		p = sm_var(p, FW_M_OPTIONS, FW_OPT_SEM, (uint64_t)o->sem);
		p = sm_var(p, FW_M_OPTIONS, FW_OPT_SCOPE, (uint64_t)o->scope);
		p = sm_var(p, FW_M_OPTIONS, FW_OPT_SPACE, (uint64_t)o->space);
		p = sm_var(p, FW_M_OPTIONS, FW_OPT_NO_BOUNDS, o->no_bounds_check != 0);
		p = sm_var(p, FW_M_OPTIONS, FW_OPT_WANT_OLD, o->want_old != 0);
		if (o->mask && !(p = sm_array(p, FW_M_OPTIONS, FW_OPT_MASK, o->mask)))
			return NULL;
		sm_close(len_at, p);
	}
	sm_close(body_at, p);
	return p;
}

size_t tac_fastwire_write_small(const Tileatom__Request *req, uint8_t *p)
{
	schema_ready();
	if (req->base.n_unknown_fields)
		return 0;
	uint8_t *start = p;
	p = sm_var(p, FW_M_REQUEST, FW_REQ_ID, req->id);
	if (req->body_case == TILEATOM__REQUEST__BODY_PING) {
		if (!req->ping || req->ping->base.n_unknown_fields)
			return 0;
		p = sm_head(p, FW_M_REQUEST, FW_REQ_PING, 0);
	} else {
		body_view v;
		if (!view_body(req, &v))
			return 0;
		fw_slot s = v.msg == FW_M_ELEMENTWISE ? FW_REQ_ELEMENTWISE
		            : v.msg == FW_M_SCATTER   ? FW_REQ_SCATTER
		                                      : FW_REQ_INDEXED;
		p = sm_body(p, s, &v);
		if (!p)
			return 0;
	}
	size_t n = (size_t)(p - start);
	if (n > TAC_FW_SMALL_ROOM)
		abort(); /* past the room the bounds above allow: a bug in this file */
	return n <= SMALL_MAX ? n : 0;
}

/* Writes public array a (bytes of data) as field s of msg, as tac_build_array's Array
 * packs: its dtype, its rank extents packed, its data (*data_at: where it starts);
 * NULL when over the bounds. */
static inline __attribute__((always_inline)) uint8_t *sm_pub_array(uint8_t *p, fw_msg msg,
                                                                   fw_slot s,
                                                                   const tileatom_array *a,
                                                                   size_t bytes, uint8_t **data_at)
{
	if (bytes > SMALL_MAX || a->rank < 0 || a->rank > TILEATOM_MAX_RANK)
		return NULL;
	uint8_t *len_at;
	p = sm_open(p, msg, s, &len_at);
	p = sm_var(p, FW_M_ARRAY, FW_ARRAY_DTYPE, (uint64_t)a->dtype);
	p = sm_packed(p, FW_M_ARRAY, FW_ARRAY_SHAPE, a->shape, (size_t)a->rank);
	if (bytes) {
		p = sm_head(p, FW_M_ARRAY, FW_ARRAY_DATA, bytes);
		*data_at = p;
		fw_copy_small(p, a->data, bytes);
		p += bytes;
	}
	sm_close(len_at, p);
	return p;
}

/* Where tac_fastwire_write_atomic wrote the parts a template patches. */
typedef struct atomic_marks {
	uint8_t *body;                         /* the end of the id field */
	uint8_t *index_at[TAC_FW_MAX_INDICES]; /* each index array's data */
	uint8_t *values_at;                    /* the values' data */
	uint8_t *compare_at;                   /* the compare data */
} atomic_marks;

/* tac_fastwire_write_atomic, noting in *mk where the id field ends and the data lie. */
static inline __attribute__((always_inline)) size_t
write_atomic(const tac_fw_atomic *a, uint64_t id, uint8_t *p, atomic_marks *mk)
{
	schema_ready();
	bool indexed = a->kind == TILEATOM_REQ_INDEXED;
	const fw_msg bm = indexed ? FW_M_INDEXED : FW_M_ELEMENTWISE;
	if (a->tile_len > SMALL_MAX || a->n_index > TAC_FW_MAX_INDICES || (int)a->op < 0 ||
	    a->sem < 0 || a->scope < 0 || a->space < 0)
		return 0;
	uint8_t *start = p, *body_at, *len_at;
	p = sm_var(p, FW_M_REQUEST, FW_REQ_ID, id);
	mk->body = p;
	p = sm_open(p, FW_M_REQUEST, indexed ? FW_REQ_INDEXED : FW_REQ_ELEMENTWISE, &body_at);
	if (a->tile_len) {
		p = sm_head(p, bm, FW_RMW_TILE, a->tile_len);
		memcpy(p, a->tile, a->tile_len);
		p += a->tile_len;
	}
	p = sm_var(p, bm, FW_RMW_OP, (uint64_t)a->op);
	if (indexed) {
		p = sm_open(p, bm, FW_RMW_INDEXED_ADDR, &len_at);
		for (int i = 0; i < a->n_index; i++)
			if (!(p = sm_pub_array(p, FW_M_IADDR, FW_IADDR_INDICES, &a->indices[i],
			                       a->index_bytes[i], &mk->index_at[i])))
				return 0;
		p = sm_var(p, FW_M_IADDR, FW_IADDR_FLAT, a->flat);
		sm_close(len_at, p);
	}
	if (!(p = sm_pub_array(p, bm, FW_RMW_VALUES, a->values, a->values_bytes, &mk->values_at)))
		return 0;
	if (a->compare && !(p = sm_pub_array(p, bm, FW_RMW_COMPARE, a->compare, a->compare_bytes,
	                                     &mk->compare_at)))
		return 0;
	p = sm_open(p, bm, FW_RMW_OPTIONS, &len_at);
	p = sm_var(p, FW_M_OPTIONS, FW_OPT_SEM, (uint64_t)a->sem);
	p = sm_var(p, FW_M_OPTIONS, FW_OPT_SCOPE, (uint64_t)a->scope);
	p = sm_var(p, FW_M_OPTIONS, FW_OPT_SPACE, (uint64_t)a->space);
	p = sm_var(p, FW_M_OPTIONS, FW_OPT_NO_BOUNDS, a->no_bounds_check);
	p = sm_var(p, FW_M_OPTIONS, FW_OPT_WANT_OLD, a->want_old);
	sm_close(len_at, p);
	sm_close(body_at, p);
	size_t n = (size_t)(p - start);
	if (n > TAC_FW_SMALL_ROOM)
		abort(); /* past the room the bounds above allow: a bug in this file */
	return n <= SMALL_MAX ? n : 0;
}

size_t tac_fastwire_write_atomic(const tac_fw_atomic *a, uint64_t id, uint8_t *p)
{
	atomic_marks mk;
	return write_atomic(a, id, p, &mk);
}

/* Keeps public array a's shape as key k. */
static void key_array_set(tac_fw_key_array *k, const tileatom_array *a)
{
	memset(k, 0, sizeof(*k));
	k->dtype = (int)a->dtype;
	k->rank = a->rank;
	for (int i = 0; i < a->rank; i++)
		k->shape[i] = a->shape[i];
}

/* An offset into a template's bytes (below TAC_FW_TEMPLATE_BYTES: the payload is small). */
static inline uint8_t tpl_at(const atomic_marks *mk, const uint8_t *at)
{
	return (uint8_t)(at - mk->body);
}

size_t tac_fastwire_write_atomic_template(const tac_fw_atomic *a, uint64_t id, uint8_t *p,
                                          tac_fw_template *t)
{
	atomic_marks mk = {NULL, {NULL}, NULL, NULL};
	size_t n = write_atomic(a, id, p, &mk);
	/* (the direct path's calls always have data and at most TILEATOM_MAX_RANK indices) */
	bool keep = n > 0 && a->n_index <= TILEATOM_MAX_RANK && a->values_bytes > 0 &&
	            (!a->compare || a->compare_bytes > 0);
	for (int i = 0; keep && i < a->n_index; i++)
		keep = a->index_bytes[i] > 0;
	if (!keep)
		return n;
	t->valid = false;
	t->id_key = small_keys[FW_M_REQUEST][FW_REQ_ID][0];
	if (!t->id_key) /* (Request.id is field 1: its key is one byte) */
		return n;
	t->kind = a->kind;
	t->op = a->op;
	t->n_index = a->n_index;
	t->flat = a->flat;
	t->has_compare = a->compare != NULL;
	t->sem = a->sem;
	t->scope = a->scope;
	t->space = a->space;
	t->check_bounds = !a->no_bounds_check;
	t->want_old = a->want_old_asked;
	t->most = a->values_bytes > a->compare_bytes ? a->values_bytes : a->compare_bytes;
	for (int i = 0; i < a->n_index; i++) {
		key_array_set(&t->index[i], &a->indices[i]);
		t->index_bytes[i] = a->index_bytes[i];
		t->index_at[i] = tpl_at(&mk, mk.index_at[i]);
		if (a->index_bytes[i] > t->most)
			t->most = a->index_bytes[i];
	}
	key_array_set(&t->values, a->values);
	t->values_bytes = a->values_bytes;
	t->values_at = tpl_at(&mk, mk.values_at);
	if (a->compare) {
		key_array_set(&t->compare, a->compare);
		t->compare_bytes = a->compare_bytes;
		t->compare_at = tpl_at(&mk, mk.compare_at);
	} else {
		t->compare_bytes = 0;
	}
	memcpy(t->tile, a->tile, a->tile_len);
	t->tile[a->tile_len] = '\0';
	t->len = (uint8_t)(p + n - mk.body);
	memcpy(t->bytes, mk.body, t->len);
	t->valid = true;
	return n;
}

/* ---- decoding ------------------------------------------------------------------------ */

/* Reads an enum the way protobuf-c keeps it whole (at most 5 bytes, 0..INT32_MAX). */
static inline bool rd_enum(const uint8_t **p, const uint8_t *end, int *out)
{
	uint64_t v;
	if (!rd_small(p, end, INT32_MAX, &v))
		return false;
	*out = (int)v;
	return true;
}

/* Reads old's packed shape (at *p, before end) into out->old_shape. */
static bool dec_old_shape(tac_fw_response *out, const uint8_t **p, const uint8_t *end)
{
	Tileatom__Array *a = &out->old;
	size_t n;
	if (!rd_len(p, end, &n))
		return false;
	const uint8_t *q = *p, *qend = *p + n;
	size_t count = 0;
	while (q < qend) {
		uint64_t x;
		if (count == TAC_FW_MAX_SHAPE || !rd_varint(&q, qend, &x))
			return false;
		out->old_shape[count++] = (int64_t)x;
	}
	a->n_shape = count;
	a->shape = count ? out->old_shape : NULL;
	*p = qend;
	return true;
}

/* Reads old's data (at *p, before end) into out->old_small when it fits (one element of
 * any dtype: copied straight, a constant-size move), else into out->old_data (grown when
 * short). */
static inline __attribute__((always_inline)) bool
dec_old_data(tac_fw_response *out, const uint8_t **p, const uint8_t *end)
{
	Tileatom__Array *a = &out->old;
	size_t n;
	if (!rd_len(p, end, &n))
		return false;
	if (n && n <= sizeof(out->old_small)) {
		fw_copy_small(out->old_small, *p, n);
		a->data.data = out->old_small;
	} else if (n) {
		if (n > out->old_data_cap) {
			uint8_t *nd = malloc(n);
			if (!nd)
				return false;
			free(out->old_data);
			out->old_data = nd;
			out->old_data_cap = n;
		}
		fw_copy_small(out->old_data, *p, n);
		a->data.data = out->old_data;
	}
	a->data.len = n;
	*p += n;
	return true;
}

/* Decodes an old-values Array into out->old. */
static bool dec_old(tac_fw_response *out, const uint8_t *p, size_t len)
{
	Tileatom__Array *a = &out->old;
	tileatom__array__init(a);
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_ARRAY];
	uint64_t seen = 0;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		switch (s) {
		case FW_ARRAY_DTYPE: {
			int v;
			if (!rd_enum(&p, end, &v))
				return false;
			a->dtype = (Tileatom__DType)v;
			break;
		}
		case FW_ARRAY_SHAPE:
			if (!dec_old_shape(out, &p, end))
				return false;
			break;
		case FW_ARRAY_DATA:
			if (!dec_old_data(out, &p, end))
				return false;
			break;
		default:
			return false;
		}
	}
	return true;
}

/* True when the byte at *p (before end) is key, which it then passes. */
static inline bool take_key(const uint8_t **p, const uint8_t *end, uint8_t key)
{
	if (*p == end || **p != key)
		return false;
	(*p)++;
	return true;
}

/* The common response in one straight pass: an id, a status or none, and an OpResponse
 * (old values, skipped, applied, each optional) last, every field once, in field-number
 * order and with its one-byte key, as the daemon writes them. Whatever it takes, the
 * general pass below takes the same way (the same readers); NULL for anything else
 * (which the general pass then reads). */
static Tileatom__Response *dec_straight(tac_fw_response *out, const uint8_t *p, const uint8_t *end)
{
	Tileatom__Response *r = &out->resp;
	*r = (Tileatom__Response)TILEATOM__RESPONSE__INIT;
	if (!take_key(&p, end, fw_key1[FW_RESP_ID]) || !rd_varint(&p, end, &r->id))
		return NULL;
	int v;
	if (take_key(&p, end, fw_key1[FW_RESP_STATUS])) {
		if (!rd_enum(&p, end, &v))
			return NULL;
		r->status = (Tileatom__Status)v;
	}
	size_t n;
	if (!take_key(&p, end, fw_key1[FW_RESP_OP]) || !rd_len(&p, end, &n) ||
	    n != (size_t)(end - p))
		return NULL;
	Tileatom__OpResponse *op = &out->op;
	*op = (Tileatom__OpResponse)TILEATOM__OP_RESPONSE__INIT;
	if (take_key(&p, end, fw_key1[FW_OPR_OLD])) {
		if (!rd_len(&p, end, &n))
			return NULL;
		const uint8_t *oend = p + n;
		Tileatom__Array *a = &out->old;
		*a = (Tileatom__Array)TILEATOM__ARRAY__INIT;
		if (take_key(&p, oend, fw_key1[FW_ARRAY_DTYPE])) {
			if (!rd_enum(&p, oend, &v))
				return NULL;
			a->dtype = (Tileatom__DType)v;
		}
		if (take_key(&p, oend, fw_key1[FW_ARRAY_SHAPE]) && !dec_old_shape(out, &p, oend))
			return NULL;
		if (take_key(&p, oend, fw_key1[FW_ARRAY_DATA]) && !dec_old_data(out, &p, oend))
			return NULL;
		if (p != oend)
			return NULL;
		op->old = a;
	}
	if (take_key(&p, end, fw_key1[FW_OPR_SKIPPED]) && !rd_varint(&p, end, &op->skipped))
		return NULL;
	if (take_key(&p, end, fw_key1[FW_OPR_APPLIED]) && !rd_varint(&p, end, &op->applied))
		return NULL;
	if (p != end)
		return NULL;
	r->body_case = TILEATOM__RESPONSE__BODY_OP;
	r->op = op;
	return r;
}

/* Decodes an OpResponse into out->op. */
static bool dec_op(tac_fw_response *out, const uint8_t *p, size_t len)
{
	Tileatom__OpResponse *op = &out->op;
	tileatom__op_response__init(op);
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_OPRESPONSE];
	uint64_t seen = 0;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		switch (s) {
		case FW_OPR_OLD:
			if (!rd_len(&p, end, &n) || !dec_old(out, p, n))
				return false;
			op->old = &out->old;
			p += n;
			break;
		case FW_OPR_SKIPPED:
			if (!rd_varint(&p, end, &op->skipped))
				return false;
			break;
		case FW_OPR_APPLIED:
			if (!rd_varint(&p, end, &op->applied))
				return false;
			break;
		default:
			return false;
		}
	}
	return true;
}

Tileatom__Response *tac_fastwire_decode_response(tac_fw_response *out, const uint8_t *data,
                                                 size_t len)
{
	schema_ready();
	if (straight_keys) {
		Tileatom__Response *sr = dec_straight(out, data, data + len);
		if (sr)
			return sr;
	}
	Tileatom__Response *r = &out->resp;
	tileatom__response__init(r);
	const uint8_t *p = data, *end = data + len;
	const fw_table *t = &fw_tables[FW_M_RESPONSE];
	uint64_t seen = 0;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		switch (s) {
		case FW_RESP_ID:
			if (!rd_varint(&p, end, &r->id))
				return NULL;
			break;
		case FW_RESP_STATUS: {
			int v;
			if (!rd_enum(&p, end, &v))
				return NULL;
			r->status = (Tileatom__Status)v;
			break;
		}
		case FW_RESP_PING:
			if (r->body_case != TILEATOM__RESPONSE__BODY__NOT_SET ||
			    !rd_len(&p, end, &n) || n != 0)
				return NULL;
			tileatom__ping_response__init(&out->ping);
			r->body_case = TILEATOM__RESPONSE__BODY_PING;
			r->ping = &out->ping;
			break;
		case FW_RESP_OP:
			if (r->body_case != TILEATOM__RESPONSE__BODY__NOT_SET ||
			    !rd_len(&p, end, &n) || !dec_op(out, p, n))
				return NULL;
			r->body_case = TILEATOM__RESPONSE__BODY_OP;
			r->op = &out->op;
			p += n;
			break;
		default: /* the message (errors only) and anything else: protobuf-c */
			return NULL;
		}
	}
	return r;
}

void tac_fastwire_response_free(tac_fw_response *out)
{
	free(out->old_data);
	out->old_data = NULL;
	out->old_data_cap = 0;
}
