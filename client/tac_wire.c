/* tac_wire.c: the client library's one data-plane codec (see tac_wire.h).
 *
 * Writing: one walk of the request description (walk) emits every field in field-number
 * order, leaving out zero scalars, empty strings and bytes and empty packed lists and
 * writing every message that is there, as protobuf_c_message_pack does for proto3 fields.
 * The walk runs twice from the same source: counting (tac_wire_plan_request: each nested
 * field's length, in the order it is opened) and writing (tac_wire_write: each length prefix
 * from that count); the compiler makes a copy of it for each (always_inline, the pass a
 * constant). The bodies of all data-plane requests share one layout (tile, op, region or
 * window, addressing, values or padding, compare, options, in this order in every body;
 * checked at start-up), so one walk writes them all.
 *
 * Decoding: one pass per message, each field's one-byte key looked up in the message's
 * table (built from the descriptors by name); unknown fields are skipped.
 *
 * Checking: tac_check_response holds a decoded response to the request it answers (its
 * status, the body the table's reply column names, the sizes of the arrays it carries). */
#include "tac_wire.h"

#include <stdio.h>
#include <stdlib.h>

#include "tac_internal.h"
#include "ta_types.h"

/* ---- field keys ----------------------------------------------------------------------- */

/* The fields of a data-plane body, in the order every body declares them. */
enum body_field { B_TILE, B_OP, B_REGION, B_ADDR, B_VALUES, B_COMPARE, B_OPTIONS, B_FIELDS };

/* Their names (a second name: the memory ops' window and gather's padding). */
static const char *const body_names[B_FIELDS][2] = {
    {"tile", NULL},        {"op", NULL},      {"region", "window"}, {"addr", NULL},
    {"values", "padding"}, {"compare", NULL}, {"options", NULL}};

/* Request kinds (tileatom_request_kind, the Request's body numbers) the tables cover. */
#define KINDS (TILEATOM_REQ_SNAPSHOT + 1)

/* The per-kind keys of the bodies, read from the descriptors by name (fill_tables); the
 * other keys the writer writes are the shared schema's (fw_key1, KEY). */
typedef struct wire_keys {
	uint32_t req_body[KINDS];           /* Request.<body> by kind */
	uint32_t body[KINDS][B_FIELDS];     /* each body's fields (0: not in it) */
	uint32_t body_off[KINDS][B_FIELDS]; /* where each is in the body's struct (0: not) */
	uint8_t family[KINDS];              /* each kind's family (its addr's type) */
} wire_keys;

static wire_keys keys;

/* The key of a field the shared schema names (FW_<slot>): one byte (fill_tables checks). */
#define KEY(slot) ((uint32_t)fw_key1[FW_##slot])
/* The slots KEY names and the decoder reads. */
static const fw_slot key_slots[] = {
    FW_REQ_ID,      FW_REGION_ORIGIN, FW_REGION_SHAPE, FW_ARRAY_DTYPE,   FW_ARRAY_SHAPE,
    FW_ARRAY_DATA,  FW_ARRAY_SHARED,  FW_REF_ID,       FW_REF_OFFSET,    FW_REF_LENGTH,
    FW_OPT_SEM,     FW_OPT_SCOPE,     FW_OPT_SPACE,    FW_OPT_NO_BOUNDS, FW_OPT_WANT_OLD,
    FW_OPT_MASK,    FW_OPT_OLD_INTO,  FW_SADDR_DIM,    FW_SADDR_INDICES, FW_IADDR_INDICES,
    FW_IADDR_FLAT,  FW_ADDR_REGION,   FW_ADDR_SCATTER, FW_ADDR_INDEXED,  FW_RESP_ID,
    FW_RESP_STATUS, FW_RESP_MESSAGE,  FW_RESP_PING,    FW_RESP_OP,       FW_RESP_DATA,
    FW_OPR_OLD,     FW_OPR_SKIPPED,   FW_OPR_APPLIED};

/* What the decoder does with a field, by its one-byte key (the tables below): the fw_slot
 * of a field it reads (FW_NONE: not in the message, skipped), or one of these. */
enum dec_slot {
	D_BAD = FW_SLOTS, /* in the message with another wire type, or not a data-plane field */
	D_SHAPE_ONE       /* Array.shape, one unpacked extent */
};

/* The decoder's tables: one-byte key -> fw_slot or enum dec_slot. */
static uint8_t resp_slots[128], op_slots[128], array_slots[128];

/* The key of desc's field name, which must be there. */
static uint32_t need_key(const ProtobufCMessageDescriptor *desc, const char *name)
{
	uint32_t k = ta_wireschema_key(desc, name);
	if (!k) {
		fprintf(stderr, "tileatom: the wire schema has no field %s.%s\n", desc->name, name);
		abort();
	}
	return k;
}

/* Marks in slots every key of desc's fields (any wire type) D_BAD, then the key of each
 * field of fields (ending with FW_NONE) with its slot, and the keys of field number 0
 * D_BAD. */
static void fill_slots(uint8_t *slots, const ProtobufCMessageDescriptor *desc,
                       const fw_slot *fields)
{
	memset(slots, D_BAD, 8); /* field number 0 */
	for (unsigned i = 0; i < desc->n_fields; i++)
		for (unsigned w = 0; w < 8 && desc->fields[i].id < 16; w++)
			slots[desc->fields[i].id << 3 | w] = D_BAD;
	for (int i = 0; fields[i] != FW_NONE; i++) {
		unsigned k = fw_key1[fields[i]]; /* one byte (key_slots has it) */
		slots[k] = (uint8_t)fields[i];
		if (fields[i] == FW_ARRAY_SHAPE) /* a repeated integer comes packed or one by one */
			slots[(k & ~7u) | FW_VARINT] = D_SHAPE_ONE;
	}
}

/* Reads every key from the descriptors, once, when the library is loaded (before any call:
 * the tables never change after). */
static __attribute__((constructor)) void fill_tables(void)
{
	ta_wireschema_init();
	for (size_t i = 0; i < sizeof(key_slots) / sizeof(key_slots[0]); i++)
		if (!fw_key1[key_slots[i]]) {
			fprintf(stderr,
			        "tileatom: client/tac_wire.c writes and reads one-byte keys, but "
			        "field %d has a number of 16 or more\n",
			        (int)key_slots[i]);
			abort();
		}
	const ProtobufCMessageDescriptor *req = &tileatom__request__descriptor;
#define TA_REQUEST(id, field, ...)                                                                 \
	if (tac_wire_takes((tileatom_request_kind)TA_REQ_##id)) {                                  \
		keys.req_body[TA_REQ_##id] = need_key(req, #field);                                \
		keys.family[TA_REQ_##id] = (uint8_t)ta_req_family(TA_REQ_##id);                    \
		const ProtobufCMessageDescriptor *b =                                              \
		    protobuf_c_message_descriptor_get_field_by_name(req, #field)->descriptor;      \
		uint32_t prev = 0;                                                                 \
		for (int f = 0; f < B_FIELDS; f++) {                                               \
			const ProtobufCFieldDescriptor *fd =                                       \
			    protobuf_c_message_descriptor_get_field_by_name(b, body_names[f][0]);  \
			if (!fd && body_names[f][1])                                               \
				fd = protobuf_c_message_descriptor_get_field_by_name(              \
				    b, body_names[f][1]);                                          \
			uint32_t k = fd ? ta_wireschema_key(b, fd->name) : 0;                      \
			keys.body_off[TA_REQ_##id][f] = fd ? fd->offset : 0;                       \
			if (k && k < prev) {                                                       \
				fprintf(stderr, "tileatom: %s declares its fields out of order\n", \
				        b->name);                                                  \
				abort();                                                           \
			}                                                                          \
			prev = k ? k : prev;                                                       \
			keys.body[TA_REQ_##id][f] = k;                                             \
		}                                                                                  \
	}
#include "ta_ops.def"
#undef TA_REQUEST
	static const fw_slot resp[] = {FW_RESP_ID, FW_RESP_STATUS, FW_RESP_MESSAGE, FW_RESP_PING,
	                               FW_RESP_OP, FW_RESP_DATA,   FW_NONE};
	static const fw_slot op[] = {FW_OPR_OLD, FW_OPR_SKIPPED, FW_OPR_APPLIED, FW_NONE};
	static const fw_slot arr[] = {FW_ARRAY_DTYPE, FW_ARRAY_SHAPE, FW_ARRAY_DATA, FW_NONE};
	fill_slots(resp_slots, &tileatom__response__descriptor, resp);
	fill_slots(op_slots, &tileatom__op_response__descriptor, op);
	fill_slots(array_slots, &tileatom__array__descriptor, arr);
}

/* ---- the writer ------------------------------------------------------------------------ */

#define AI static inline __attribute__((always_inline))

/* Nested fields open at once at the most (Request > body > Addressing > ScatterAddr >
 * Array > shape). */
#define DEPTH 8

/* The walk's state; count: the counting pass (else the writing one). */
typedef struct wctx {
	uint8_t *p;                /* writing: where the next byte goes */
	size_t n;                  /* counting: bytes so far */
	size_t *len;               /* the plan's nested lengths */
	unsigned next;             /* the next nested field's index in len */
	unsigned depth;            /* counting: fields open */
	unsigned open_slot[DEPTH]; /* counting: each open field's index in len */
	size_t open_at[DEPTH];     /* counting: where each open field's content starts */
	tac_wire_marks *mk;        /* writing: where the parts lie */
} wctx;

/* Appends varint v. */
AI void put_var(wctx *w, bool count, uint64_t v)
{
	if (count)
		w->n += vsize(v);
	else
		w->p = wr_varint(w->p, v);
}

/* Appends a varint field (nothing when v is 0). */
AI void put_field(wctx *w, bool count, uint32_t key, uint64_t v)
{
	if (v) {
		put_var(w, count, key);
		put_var(w, count, v);
	}
}

/* Appends an enum field (a negative value as protobuf-c writes it: ten bytes). */
AI void put_enum(wctx *w, bool count, uint32_t key, int v)
{
	put_field(w, count, key, (uint64_t)(int64_t)v);
}

/* Appends a bytes or string field of n bytes at src (nothing when n is 0); returns where
 * they went (writing), else NULL. */
AI uint8_t *put_bytes(wctx *w, bool count, uint32_t key, const void *src, size_t n)
{
	if (!n)
		return NULL;
	put_var(w, count, key);
	put_var(w, count, n);
	if (count) {
		w->n += n;
		return NULL;
	}
	uint8_t *at = w->p;
	fw_copy_small(at, src, n);
	w->p += n;
	return at;
}

/* Opens a nested field (a message or a packed list) with key: counting notes where its
 * content starts, writing writes the length counted for it. */
AI void open_field(wctx *w, bool count, uint32_t key)
{
	put_var(w, count, key);
	unsigned i = w->next++;
	if (count) {
		if (i >= TAC_WIRE_NESTED || w->depth == DEPTH)
			abort(); /* more than a builder makes: a bug in the library */
		w->open_slot[w->depth] = i;
		w->open_at[w->depth++] = w->n;
	} else {
		w->p = wr_varint(w->p, w->len[i]);
	}
}

/* Closes the field opened last (counting: its length is known now). */
AI void close_field(wctx *w, bool count)
{
	if (count) {
		unsigned d = --w->depth;
		size_t l = w->n - w->open_at[d];
		w->len[w->open_slot[d]] = l;
		w->n += vsize(l);
	}
}

/* Appends n int64 values as a packed field (nothing when n is 0). */
AI void put_packed(wctx *w, bool count, uint32_t key, const int64_t *v, size_t n)
{
	if (!n)
		return;
	open_field(w, count, key);
	for (size_t i = 0; i < n; i++)
		put_var(w, count, (uint64_t)v[i]);
	close_field(w, count);
}

/* Appends a Region field. */
AI void put_region(wctx *w, bool count, uint32_t key, const Tileatom__Region *r)
{
	open_field(w, count, key);
	put_packed(w, count, KEY(REGION_ORIGIN), r->origin, r->n_origin);
	put_packed(w, count, KEY(REGION_SHAPE), r->shape, r->n_shape);
	close_field(w, count);
}

/* Appends a BufferRef field. */
AI void put_ref(wctx *w, bool count, uint32_t key, const Tileatom__BufferRef *ref)
{
	open_field(w, count, key);
	put_field(w, count, KEY(REF_ID), ref->buffer_id);
	put_field(w, count, KEY(REF_OFFSET), ref->offset);
	put_field(w, count, KEY(REF_LENGTH), ref->length);
	close_field(w, count);
}

/* Appends an Array field; *data_at (writing; data_at NULL: not wanted) gets where its data
 * went. */
AI void put_array(wctx *w, bool count, uint32_t key, const Tileatom__Array *a,
                  const uint8_t **data_at)
{
	open_field(w, count, key);
	put_enum(w, count, KEY(ARRAY_DTYPE), (int)a->dtype);
	put_packed(w, count, KEY(ARRAY_SHAPE), a->shape, a->n_shape);
	uint8_t *at = put_bytes(w, count, KEY(ARRAY_DATA), a->data.data, a->data.len);
	if (!count && data_at)
		*data_at = at;
	if (a->shared)
		put_ref(w, count, KEY(ARRAY_SHARED), a->shared);
	close_field(w, count);
}

/* Appends a ScatterAddr field. */
AI void put_saddr(wctx *w, bool count, uint32_t key, const Tileatom__ScatterAddr *s)
{
	open_field(w, count, key);
	put_field(w, count, KEY(SADDR_DIM), s->dim);
	if (s->indices)
		put_array(w, count, KEY(SADDR_INDICES), s->indices, NULL);
	close_field(w, count);
}

/* Appends an IndexedAddr field. */
AI void put_iaddr(wctx *w, bool count, uint32_t key, const Tileatom__IndexedAddr *ia)
{
	open_field(w, count, key);
	for (size_t i = 0; i < ia->n_indices; i++)
		put_array(w, count, KEY(IADDR_INDICES), ia->indices[i],
		          i < TILEATOM_MAX_RANK ? &w->mk->index_at[i] : NULL);
	put_field(w, count, KEY(IADDR_FLAT), ia->flat != 0);
	close_field(w, count);
}

/* Appends an Addressing field (the memory ops). */
static void put_addressing(wctx *w, bool count, uint32_t key, const Tileatom__Addressing *a)
{
	open_field(w, count, key);
	if (a->form_case == TILEATOM__ADDRESSING__FORM_REGION)
		put_region(w, count, KEY(ADDR_REGION), a->region);
	else if (a->form_case == TILEATOM__ADDRESSING__FORM_SCATTER)
		put_saddr(w, count, KEY(ADDR_SCATTER), a->scatter);
	else if (a->form_case == TILEATOM__ADDRESSING__FORM_INDEXED)
		put_iaddr(w, count, KEY(ADDR_INDEXED), a->indexed);
	close_field(w, count);
}

/* Appends an Options field. */
AI void put_options(wctx *w, bool count, uint32_t key, const Tileatom__Options *o)
{
	open_field(w, count, key);
	put_enum(w, count, KEY(OPT_SEM), (int)o->sem);
	put_enum(w, count, KEY(OPT_SCOPE), (int)o->scope);
	put_enum(w, count, KEY(OPT_SPACE), (int)o->space);
	put_field(w, count, KEY(OPT_NO_BOUNDS), o->no_bounds_check != 0);
	put_field(w, count, KEY(OPT_WANT_OLD), o->want_old != 0);
	if (o->mask)
		put_array(w, count, KEY(OPT_MASK), o->mask, NULL);
	if (o->old_into)
		put_ref(w, count, KEY(OPT_OLD_INTO), o->old_into);
	close_field(w, count);
}

/* A data-plane body's fields, as the body of m's kind holds them (NULL: not there). */
typedef struct body_view {
	const char *tile;                       /* tile */
	int op;                                 /* op (0 in the bodies without one) */
	const Tileatom__Region *region;         /* region or window */
	const Tileatom__ScatterAddr *saddr;     /* addr of a scatter atomic */
	const Tileatom__IndexedAddr *iaddr;     /* addr of an indexed atomic */
	const Tileatom__Addressing *addressing; /* addr of a memory op */
	const Tileatom__Array *values;          /* values or padding */
	const Tileatom__Array *compare;         /* compare */
	const Tileatom__Options *options;       /* options */
} body_view;

/* Reads the body of data-plane request m (not ping) into *v, each field at its offset in
 * the body's struct (from the descriptors, fill_tables). */
AI void view_body(const struct tac_msg *m, body_view *v)
{
	const uint8_t *b = (const uint8_t *)m->req.ping; /* the oneof's pointer, any member */
	const uint32_t *off = keys.body_off[m->kind];
#define AT(type, f) (off[f] ? *(type const *)(b + off[f]) : NULL)
	*v = (body_view){.tile = AT(char *, B_TILE),
	                 .op = off[B_OP] ? (int)*(const Tileatom__Op *)(b + off[B_OP]) : 0,
	                 .region = AT(Tileatom__Region *, B_REGION),
	                 .values = AT(Tileatom__Array *, B_VALUES),
	                 .compare = AT(Tileatom__Array *, B_COMPARE),
	                 .options = AT(Tileatom__Options *, B_OPTIONS)};
	if (keys.family[m->kind] == TA_FAMILY_SCATTER)
		v->saddr = AT(Tileatom__ScatterAddr *, B_ADDR);
	else if (keys.family[m->kind] == TA_FAMILY_INDEXED)
		v->iaddr = AT(Tileatom__IndexedAddr *, B_ADDR);
	else
		v->addressing = AT(Tileatom__Addressing *, B_ADDR);
#undef AT
}

/* Walks data-plane request m once: counting or writing (count, a constant in each copy). */
AI void walk(wctx *w, const struct tac_msg *m, bool count)
{
	put_field(w, count, KEY(REQ_ID), m->req.id);
	if (!count)
		w->mk->body = w->p;
	open_field(w, count, keys.req_body[m->kind]);
	if (m->kind != TILEATOM_REQ_PING) {
		body_view v;
		view_body(m, &v);
		const uint32_t *bk = keys.body[m->kind];
		if (v.tile)
			put_bytes(w, count, bk[B_TILE], v.tile, strlen(v.tile));
		put_enum(w, count, bk[B_OP], v.op);
		if (v.region)
			put_region(w, count, bk[B_REGION], v.region);
		if (v.saddr)
			put_saddr(w, count, bk[B_ADDR], v.saddr);
		if (v.iaddr)
			put_iaddr(w, count, bk[B_ADDR], v.iaddr);
		if (v.addressing)
			put_addressing(w, count, bk[B_ADDR], v.addressing);
		if (v.values)
			put_array(w, count, bk[B_VALUES], v.values, &w->mk->values_at);
		if (v.compare)
			put_array(w, count, bk[B_COMPARE], v.compare, &w->mk->compare_at);
		if (v.options)
			put_options(w, count, bk[B_OPTIONS], v.options);
	}
	close_field(w, count);
}

void tac_wire_set_body(struct tac_msg *m, const char *tile, int op, const void *region,
                       const void *addr, const void *values, const void *compare,
                       const Tileatom__Options *options)
{
	uint8_t *b = (uint8_t *)m->req.ping; /* the oneof's pointer, any member */
	const uint32_t *off = keys.body_off[m->kind];
	const void *field[B_FIELDS] = {tile, NULL, region, addr, values, compare, options};
	for (int f = 0; f < B_FIELDS; f++)
		if (off[f] && f != B_OP)
			memcpy(b + off[f], &field[f], sizeof(field[f]));
	if (off[B_OP])
		*(Tileatom__Op *)(b + off[B_OP]) = (Tileatom__Op)op;
}

size_t tac_wire_plan_request(const struct tac_msg *m, tac_wire_plan *plan)
{
	tac_wire_marks unused = {0};
	wctx w = {.len = plan->len, .mk = &unused};
	walk(&w, m, true);
	plan->size = w.n;
	return w.n;
}

uint8_t *tac_wire_write(const struct tac_msg *m, const tac_wire_plan *plan, uint8_t *p,
                        tac_wire_marks *marks)
{
	tac_wire_marks unused = {0};
	wctx w = {.p = p, .len = (size_t *)plan->len, .mk = marks ? marks : &unused};
	walk(&w, m, false);
	if ((size_t)(w.p - p) != plan->size)
		abort(); /* the two passes disagree: a bug in this file */
	return w.p;
}

/* ---- templates -------------------------------------------------------------------------- */

/* Keeps the shape of wire array a as key k; false when a is not one a template patches
 * (data in a shared buffer, or none). */
static bool key_array(tac_tpl_array *k, const Tileatom__Array *a)
{
	if (a->shared || a->data.len == 0 || a->n_shape > TILEATOM_MAX_RANK)
		return false;
	memset(k, 0, sizeof(*k));
	k->dtype = (int)a->dtype;
	k->rank = (int)a->n_shape;
	for (size_t i = 0; i < a->n_shape; i++)
		k->shape[i] = a->shape[i];
	return true;
}

void tac_tpl_keep(tac_tpl *t, const struct tac_msg *m, const tac_wire_marks *mk, const uint8_t *end)
{
	if (m->kind != TILEATOM_REQ_ELEMENTWISE && m->kind != TILEATOM_REQ_INDEXED)
		return;
	body_view v;
	view_body(m, &v);
	size_t len = (size_t)(end - mk->body);
	if (v.region || !v.options || v.options->mask || v.options->old_into || !v.values ||
	    len > TAC_TPL_BYTES)
		return;
	size_t n_index = v.iaddr ? v.iaddr->n_indices : 0;
	if (n_index > TILEATOM_MAX_RANK)
		return;
	t->valid = false;
	t->values_bytes = v.values->data.len;
	t->compare_bytes = v.compare ? v.compare->data.len : 0;
	t->most = t->values_bytes > t->compare_bytes ? t->values_bytes : t->compare_bytes;
	for (size_t i = 0; i < n_index; i++) {
		const Tileatom__Array *a = v.iaddr->indices[i];
		if (!key_array(&t->index[i], a))
			return;
		t->index_bytes[i] = a->data.len;
		t->index_at[i] = (uint8_t)(mk->index_at[i] - mk->body);
		t->most = a->data.len > t->most ? a->data.len : t->most;
	}
	if (!key_array(&t->values, v.values) || (v.compare && !key_array(&t->compare, v.compare)))
		return;
	t->kind = m->kind;
	t->op = (tileatom_op)v.op;
	t->n_index = (int)n_index;
	t->flat = v.iaddr && v.iaddr->flat;
	t->has_compare = v.compare != NULL;
	t->sem = (int)v.options->sem;
	t->scope = (int)v.options->scope;
	t->space = (int)v.options->space;
	t->check_bounds = !v.options->no_bounds_check;
	t->want_old = m->want_old_asked;
	t->values_at = (uint8_t)(mk->values_at - mk->body);
	t->compare_at = v.compare ? (uint8_t)(mk->compare_at - mk->body) : 0;
	memcpy(t->tile, v.tile, strlen(v.tile) + 1); /* (the builder checked its length) */
	t->len = (uint8_t)len;
	memcpy(t->bytes, mk->body, len);
	t->valid = true;
}

/* ---- the decoder ----------------------------------------------------------------------- */

/* Reads a field's key at *p (before end, which the caller's loop checked) into *key: its
 * slot in slots (a field number of 16 or more: unknown). D_BAD for a malformed key or field
 * number 0 (the tables' first row). */
AI int next_slot(const uint8_t **p, const uint8_t *end, const uint8_t *slots, uint32_t *key)
{
	if (**p < 128) {
		*key = *(*p)++;
		return slots[*key];
	}
	uint64_t k; /* a longer key: an unknown field, or a known one written long */
	*key = 0;
	if (!rd_varint(p, end, &k) || k >> 32)
		return D_BAD;
	*key = (uint32_t)k;
	return k < 128 ? slots[k] : FW_NONE;
}

/* rd_len with the common one-byte length read inline. */
AI bool rd_size(const uint8_t **p, const uint8_t *end, size_t *n)
{
	if (*p < end && **p < 128) {
		*n = *(*p)++;
		return *n <= (size_t)(end - *p);
	}
	return rd_len(p, end, n);
}

/* Skips an unknown field with key at p; returns the byte after it, NULL when malformed
 * (p by value: the decoders' cursors stay in registers). */
static const uint8_t *skip_field(const uint8_t *p, const uint8_t *end, uint32_t key)
{
	return rd_skip(&p, end, key & 7u) ? p : NULL;
}

/* Reads an enum the way protobuf-c keeps it whole (at most 5 bytes, 0..INT32_MAX). */
AI bool rd_enum(const uint8_t **p, const uint8_t *end, int *out)
{
	if (*p < end && **p < 128) {
		*out = *(*p)++;
		return true;
	}
	uint64_t v;
	if (!rd_small(p, end, INT32_MAX, &v))
		return false;
	*out = (int)v;
	return true;
}

/* Copies the n bytes at src into out's array (its small room when they fit, else its
 * buffer, grown when short and given back when far too large). */
AI bool take_bytes(tac_wire_response *out, const uint8_t *src, size_t n)
{
	Tileatom__Array *a = &out->array;
	a->data.len = n;
	if (n == 0) {
		a->data.data = NULL;
		return true;
	}
	if (n <= sizeof(out->small)) {
		fw_copy_small(out->small, src, n);
		a->data.data = out->small;
		return true;
	}
	if (n > out->data_cap || (out->data_cap > (1u << 20) && n < out->data_cap / 4)) {
		free(out->data);
		out->data_cap = 0;
		out->data = malloc(n);
		if (!out->data)
			return false;
		out->data_cap = n;
	}
	memcpy(out->data, src, n);
	a->data.data = out->data;
	return true;
}

/* The rarer fields of an Array (its shape, packed or not; an unknown field) at p, with slot
 * and key read: returns the byte after the field, NULL when it is malformed or not taken (a
 * shared buffer: no response of the daemon carries one). Out of line, as the other rare
 * fields below: the common response keeps to the lines that read it. */
static __attribute__((noinline)) const uint8_t *dec_array_rare(tac_wire_response *out,
                                                               size_t *nshape, int slot,
                                                               uint32_t key, const uint8_t *p,
                                                               const uint8_t *end)
{
	uint64_t v;
	size_t n;
	const uint8_t *stop = end;
	if (slot == FW_NONE)
		return skip_field(p, end, key);
	if (slot == FW_ARRAY_SHAPE) {
		if (!rd_size(&p, end, &n))
			return NULL;
		stop = p + n;
	} else if (slot != D_SHAPE_ONE) {
		return NULL;
	}
	/* one extent (D_SHAPE_ONE), or each of the packed ones (none in an empty run, which
	 * protobuf-c takes too) */
	bool more = slot == D_SHAPE_ONE || p < stop;
	while (more) {
		if (*nshape == TAC_WIRE_MAX_SHAPE || !rd_varint(&p, stop, &v))
			return NULL;
		out->shape[(*nshape)++] = (int64_t)v;
		more = slot == FW_ARRAY_SHAPE && p < stop;
	}
	return p;
}

/* Decodes an Array message (end - p bytes) into out->array. */
AI bool dec_array(tac_wire_response *out, const uint8_t *p, const uint8_t *end)
{
	Tileatom__Array *a = &out->array;
	*a = (Tileatom__Array)TILEATOM__ARRAY__INIT;
	size_t nshape = 0, n;
	uint32_t key;
	int e;
	while (p < end) {
		int slot = next_slot(&p, end, array_slots, &key);
		if (slot == FW_ARRAY_DTYPE) {
			if (!rd_enum(&p, end, &e))
				return false;
			a->dtype = (Tileatom__DType)e;
		} else if (slot == FW_ARRAY_DATA) {
			if (!rd_size(&p, end, &n) || !take_bytes(out, p, n))
				return false;
			p += n;
		} else if (!(p = dec_array_rare(out, &nshape, slot, key, p, end))) {
			return false;
		}
	}
	a->n_shape = nshape;
	a->shape = nshape ? out->shape : NULL;
	return true;
}

/* Decodes an OpResponse message (end - p bytes) into out->op. */
AI bool dec_op(tac_wire_response *out, const uint8_t *p, const uint8_t *end)
{
	Tileatom__OpResponse *op = &out->op;
	*op = (Tileatom__OpResponse)TILEATOM__OP_RESPONSE__INIT;
	size_t n;
	uint32_t key;
	while (p < end) {
		int slot = next_slot(&p, end, op_slots, &key);
		if (slot == FW_OPR_OLD) {
			if (op->old || !rd_size(&p, end, &n) || !dec_array(out, p, p + n))
				return false;
			op->old = &out->array;
			p += n;
		} else if (slot == FW_OPR_APPLIED || slot == FW_OPR_SKIPPED) {
			if (!rd_varint(&p, end,
			               slot == FW_OPR_APPLIED ? &op->applied : &op->skipped))
				return false;
		} else if (slot != FW_NONE || !(p = skip_field(p, end, key))) {
			return false;
		}
	}
	return true;
}

/* The rarer fields of a Response (a message, a ping or read body, an unknown field) at p,
 * with slot and key read: returns the byte after the field, NULL when it is malformed or
 * not a data-plane response's. */
static __attribute__((noinline)) const uint8_t *dec_response_rare(tac_wire_response *out, int slot,
                                                                  uint32_t key, const uint8_t *p,
                                                                  const uint8_t *end)
{
	Tileatom__Response *r = &out->resp;
	size_t n;
	if (slot == FW_NONE)
		return skip_field(p, end, key);
	if ((slot != FW_RESP_MESSAGE && slot != FW_RESP_PING && slot != FW_RESP_DATA) ||
	    !rd_size(&p, end, &n))
		return NULL;
	if (slot == FW_RESP_MESSAGE) {
		if (n + 1 > out->text_cap) {
			char *t = realloc(out->text, n + 1);
			if (!t)
				return NULL;
			out->text = t;
			out->text_cap = n + 1;
		}
		memcpy(out->text, p, n);
		out->text[n] = '\0';
		r->message = out->text;
	} else if (r->body_case != TILEATOM__RESPONSE__BODY__NOT_SET) {
		return NULL; /* a second body */
	} else if (slot == FW_RESP_PING) {
		if (n != 0)
			return NULL;
		tileatom__ping_response__init(&out->ping);
		r->body_case = TILEATOM__RESPONSE__BODY_PING;
		r->ping = &out->ping;
	} else {
		if (!dec_array(out, p, p + n))
			return NULL;
		r->body_case = TILEATOM__RESPONSE__BODY_DATA;
		r->data = &out->array;
	}
	return p + n;
}

Tileatom__Response *tac_wire_decode_response(tac_wire_response *out, const uint8_t *data,
                                             size_t len)
{
	Tileatom__Response *r = &out->resp;
	*r = (Tileatom__Response)TILEATOM__RESPONSE__INIT;
	const uint8_t *p = data, *end = data + len;
	size_t n;
	uint32_t key;
	int e;
	while (p < end) {
		int slot = next_slot(&p, end, resp_slots, &key);
		if (slot == FW_RESP_ID) {
			if (!rd_varint(&p, end, &r->id))
				return NULL;
		} else if (slot == FW_RESP_OP) {
			if (r->body_case != TILEATOM__RESPONSE__BODY__NOT_SET ||
			    !rd_size(&p, end, &n) || !dec_op(out, p, p + n))
				return NULL;
			r->body_case = TILEATOM__RESPONSE__BODY_OP;
			r->op = &out->op;
			p += n;
		} else if (slot == FW_RESP_STATUS) {
			if (!rd_enum(&p, end, &e))
				return NULL;
			r->status = (Tileatom__Status)e;
		} else if (!(p = dec_response_rare(out, slot, key, p, end))) {
			return NULL;
		}
	}
	return r;
}

/* ---- checking a decoded response against its request ------------------------------------ */

/* Validates a wire Array from a response (dtype known, rank <= 4, byte count matching). */
static int check_wire_array(const Tileatom__Array *a, const char *what, tileatom_error *err)
{
	if (!a)
		return tac_err(err, TILEATOM_E_PROTOCOL, "%s: missing in the response", what);
	size_t es = ta_dtype_size((ta_dtype)a->dtype);
	if (es == 0)
		return tac_err(err, TILEATOM_E_PROTOCOL, "%s: unknown dtype %d in the response",
		               what, (int)a->dtype);
	if (a->n_shape > TILEATOM_MAX_RANK)
		return tac_err(err, TILEATOM_E_PROTOCOL, "%s: rank %zu in the response", what,
		               a->n_shape);
	if (a->n_shape == 0 && a->data.len == es) /* one element, the common old value */
		return TILEATOM_OK;
	uint64_t n = 1;
	for (size_t i = 0; i < a->n_shape; i++) {
		if (a->shape[i] < 0 || (uint64_t)a->shape[i] > (UINT64_C(1) << 40))
			return tac_err(err, TILEATOM_E_PROTOCOL, "%s: extent %lld in the response",
			               what, (long long)a->shape[i]);
		n *= (uint64_t)a->shape[i];
		if (n > (UINT64_C(1) << 40))
			return tac_err(err, TILEATOM_E_PROTOCOL, "%s: too many elements", what);
	}
	if ((uint64_t)a->data.len != n * es)
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "%s: %zu bytes in the response for %llu elements of %s", what,
		               a->data.len, (unsigned long long)n,
		               tileatom_dtype_name((tileatom_dtype)a->dtype));
	return TILEATOM_OK;
}

/* The Response body that answers a request kind (the reply column of TA_REQUEST). */
static Tileatom__Response__BodyCase expected_body(tileatom_request_kind kind)
{
	switch ((int)kind) {
#define TA_REQUEST(id, field, number, tile, fam, op, reply, ...)                                   \
	case TA_REQ_##id:                                                                          \
		return TILEATOM__RESPONSE__BODY_##reply;
#include "ta_ops.def"
#undef TA_REQUEST
	default:
		return TILEATOM__RESPONSE__BODY__NOT_SET;
	}
}

int tac_check_response(const Tileatom__Response *r, tileatom_request_kind kind, tileatom_error *err)
{
	if (r->status != TILEATOM__STATUS__OK) {
		int code = (int)r->status;
		if (code < 1 || code > TILEATOM_E_INTERNAL)
			return tac_err(err, TILEATOM_E_PROTOCOL,
			               "tileatomd answered with unknown status %d: %s", code,
			               r->message ? r->message : "");
		if (r->message && *r->message)
			return tac_err(err, code, "%s", r->message);
		return tac_err(err, code, "tileatomd answered %s", tileatom_strerror(code));
	}
	Tileatom__Response__BodyCase want = expected_body(kind);
	if (r->body_case != want) {
		/* some kinds (destroy, write) may come back with or without an (empty) body */
		if (!ta_req_reply_optional((ta_req_kind)kind))
			return tac_err(
			    err, TILEATOM_E_PROTOCOL,
			    "tileatomd answered request kind %d with body %d (expected %d)",
			    (int)kind, (int)r->body_case, (int)want);
		if (r->body_case != TILEATOM__RESPONSE__BODY__NOT_SET &&
		    r->body_case != TILEATOM__RESPONSE__BODY_OP)
			return tac_err(err, TILEATOM_E_PROTOCOL,
			               "tileatomd answered a %s request with body %d",
			               ta_req_name((ta_req_kind)kind), (int)r->body_case);
		return TILEATOM_OK;
	}
	if (want == TILEATOM__RESPONSE__BODY_DATA)
		return check_wire_array(r->data, "read data", err);
	/* old values without bytes were written into a shared buffer (Options.old_into); the
	 * call that asked for them checks their size (tac_api.c op_result) */
	if (want == TILEATOM__RESPONSE__BODY_OP && r->op && r->op->old && r->op->old->data.len > 0)
		return check_wire_array(r->op->old, "old values", err);
	return TILEATOM_OK;
}

void tac_wire_response_free(tac_wire_response *out)
{
	free(out->data);
	out->data = NULL;
	out->data_cap = 0;
	free(out->text);
	out->text = NULL;
	out->text_cap = 0;
}
