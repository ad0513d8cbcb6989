/* codec_check.h: the conformance check of the daemon's one data-plane codec
 * (daemon/codec.c) against protobuf-c, shared by tests/check_codec.c and the libFuzzer
 * harness tests/fuzz_dispatch.c (static functions: include it once).
 *
 * The decoder: every payload is decoded by ta_codec_decode and by protobuf-c's unpack, whose
 * Request is converted into the same ta_wire_request by a conversion written here from
 * protobuf-c's structures (cc_oracle); the two must be equal field by field, and the
 * outcomes must agree: what protobuf-c refuses the codec refuses and the other way round
 * (but for a message field given twice, which it answers as a problem where protobuf-c
 * merges), what the codec calls a bad string
 * wirecheck.c names with the same message, and a problem of a field given twice is one
 * (cc_twice walks the bytes with the descriptors). The writer: every ta_reply_msg must
 * encode to the bytes protobuf-c packs for the same Response (cc_encode_check).
 *
 * The runs: two services over one CPU backend and two registries holding the same base
 * tiles; the second re-checks every plan in full (recheck_plans). Every payload goes through
 * both and the replies and then every tile (names, shapes and bytes) must be identical; a
 * pipelined run (ta_dispatch_run_batch: grouped plans) on the first must answer as the
 * same payloads one by one on the second. */
#ifndef TA_TESTS_CODEC_CHECK_H
#define TA_TESTS_CODEC_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "dispatch.h"
#include "codec.h"
#include "registry.h"
#include "ta_backend.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"
#include "wirecheck.h"

/* Limits of the compared services: small, so that no input can exhaust memory. */
#define CC_MAX_TILE_BYTES  (1u << 20)
#define CC_MAX_TOTAL_BYTES (8u << 20)
#define CC_MAX_FRAME       (64u << 10)

/* One tile that exists at the start of every input (the fuzz corpus's tiles). */
typedef struct cc_tile {
	const char *name;           /* tile name */
	ta_dtype dtype;             /* element type */
	int rank;                   /* rank */
	int64_t shape[TA_MAX_RANK]; /* extents */
} cc_tile;

/* The base tiles: every tile dtype, ranks 1 to 4 (tests/fuzz_seeds.c names them). */
static const cc_tile cc_tiles[] = {
    {"a", TA_DTYPE_I32, 1, {16}},          {"b", TA_DTYPE_F16, 2, {4, 6}},
    {"c", TA_DTYPE_U64, 3, {2, 3, 4}},     {"d", TA_DTYPE_F32, 2, {8, 8}},
    {"e", TA_DTYPE_BF16, 4, {2, 3, 2, 2}}, {"f", TA_DTYPE_I64, 1, {32}},
    {"g", TA_DTYPE_F64, 2, {5, 3}},        {"h", TA_DTYPE_U32, 3, {4, 4, 2}},
};
#define CC_NTILES (sizeof(cc_tiles) / sizeof(cc_tiles[0]))

/* The two services compared. */
typedef struct cc_world {
	ta_registry *reg[2]; /* [0]: plans prechecked, [1]: re-checked in full */
	ta_service svc[2];   /* the services over them */
	uint64_t data_taken; /* payloads the codec decoded as data-plane requests */
	uint64_t payloads;   /* payloads compared */
} cc_world;

/* Reports a difference and stops (a test failure, or a libFuzzer crash). */
_Noreturn static void cc_fail(const char *what, const uint8_t *payload, size_t len)
{
	fprintf(stderr, "codec conformance check: %s; payload (%zu bytes):", what, len);
	for (size_t i = 0; i < len && i < 256; i++)
		fprintf(stderr, " %02x", payload[i]);
	fprintf(stderr, "\n");
	abort();
}

/* Creates the base tiles in reg, each filled with the same byte pattern every time. */
static void cc_create_tiles(ta_registry *reg)
{
	for (size_t i = 0; i < CC_NTILES; i++) {
		ta_tile_shape shape;
		memset(&shape, 0, sizeof(shape));
		shape.dtype = cc_tiles[i].dtype;
		shape.rank = cc_tiles[i].rank;
		memcpy(shape.shape, cc_tiles[i].shape, sizeof(shape.shape));
		ta_tile *tile = NULL;
		ta_error err = {0};
		if (ta_registry_create(reg, cc_tiles[i].name, &shape, &tile, &err) != TA_OK)
			cc_fail("cannot create a base tile", NULL, 0);
		uint8_t *mem = tile->mem; /* CPU backend: host memory */
		for (uint64_t k = 0; k < tile->bytes; k++)
			mem[k] = (uint8_t)(k * 37u + i * 11u + 1u);
		ta_registry_publish(tile);
		ta_tile_unref(tile);
	}
}

/* Sets both services up over backend (the CPU backend). */
static void cc_init(cc_world *w, ta_backend *backend)
{
	memset(w, 0, sizeof(*w));
	for (int i = 0; i < 2; i++) {
		ta_error err = {0};
		w->reg[i] = ta_registry_new(backend, CC_MAX_TILE_BYTES, CC_MAX_TOTAL_BYTES, &err);
		if (!w->reg[i])
			cc_fail("cannot create a registry", NULL, 0);
		ta_service_init(&w->svc[i], backend, w->reg[i], CC_MAX_FRAME);
		/* the second service's backend re-checks every plan in full: a plan that
		 * ta_plan_check refused would answer differently */
		w->svc[i].recheck_plans = i == 1;
		cc_create_tiles(w->reg[i]);
	}
}

/* Removes every tile of reg. */
static void cc_clear(ta_registry *reg)
{
	ta_tile_info *infos = NULL;
	size_t n = 0;
	ta_error err = {0};
	if (ta_registry_list(reg, &infos, &n, &err) != TA_OK)
		cc_fail("cannot list tiles", NULL, 0);
	for (size_t i = 0; i < n; i++)
		if (ta_registry_remove(reg, infos[i].name, NULL, &err) != TA_OK)
			cc_fail("cannot remove a listed tile", NULL, 0);
	free(infos);
}

/* Puts both services back to the base tiles. */
static void cc_reset(cc_world *w)
{
	for (int i = 0; i < 2; i++) {
		cc_clear(w->reg[i]);
		cc_create_tiles(w->reg[i]);
	}
}

/* Frees both services' registries. */
static void cc_free(cc_world *w)
{
	for (int i = 0; i < 2; i++) {
		cc_clear(w->reg[i]);
		ta_registry_free(w->reg[i]);
	}
}

/* Checks that both registries hold the same tiles with the same bytes (payload: for the
 * report). */
static void cc_compare_tiles(cc_world *w, const uint8_t *payload, size_t len)
{
	ta_tile_info *info[2] = {NULL, NULL};
	size_t n[2] = {0, 0};
	for (int i = 0; i < 2; i++) {
		ta_error err = {0};
		if (ta_registry_list(w->reg[i], &info[i], &n[i], &err) != TA_OK)
			cc_fail("cannot list tiles", payload, len);
	}
	if (n[0] != n[1])
		cc_fail("the two services left different numbers of tiles", payload, len);
	for (size_t k = 0; k < n[0]; k++) {
		if (strcmp(info[0][k].name, info[1][k].name) != 0 ||
		    memcmp(&info[0][k].shape, &info[1][k].shape, sizeof(info[0][k].shape)) != 0 ||
		    info[0][k].bytes != info[1][k].bytes)
			cc_fail("the two services left different tiles", payload, len);
		ta_tile *t[2] = {NULL, NULL};
		for (int i = 0; i < 2; i++) {
			ta_error err = {0};
			if (ta_registry_get(w->reg[i], info[i][k].name, &t[i], &err) != TA_OK)
				cc_fail("a listed tile cannot be looked up", payload, len);
		}
		if (memcmp(t[0]->mem, t[1]->mem, (size_t)t[0]->bytes) != 0)
			cc_fail("the two services left different tile contents", payload, len);
		ta_tile_unref(t[0]);
		ta_tile_unref(t[1]);
	}
	free(info[0]);
	free(info[1]);
}

/* ---- the decoder against protobuf-c ------------------------------------------------- */

/* A BufferRef as the codec keeps it. */
static void cc_ref(const Tileatom__BufferRef *r, ta_wire_ref *o)
{
	*o = (ta_wire_ref){r != NULL, r ? r->buffer_id : 0, r ? r->offset : 0, r ? r->length : 0};
}

/* An Array as the codec keeps it; *refs set when it names a shared buffer. */
static void cc_array(const Tileatom__Array *a, ta_wire_array *o, bool *refs)
{
	memset(o, 0, sizeof(*o));
	o->present = a != NULL;
	if (!a)
		return;
	o->dtype = (int32_t)a->dtype;
	o->n_shape = a->n_shape;
	for (size_t i = 0; i < a->n_shape && i < TA_MAX_RANK; i++)
		o->shape[i] = a->shape[i];
	o->data = a->data.len ? a->data.data : NULL;
	o->len = a->data.len;
	cc_ref(a->shared, &o->shared);
	if (a->shared)
		*refs = true;
}

/* A Region as the codec keeps it (absent: empty). */
static void cc_region(const Tileatom__Region *r, ta_wire_region *o)
{
	memset(o, 0, sizeof(*o));
	if (!r)
		return;
	o->n_origin = r->n_origin;
	o->n_shape = r->n_shape;
	for (size_t i = 0; i < r->n_origin && i < TA_MAX_RANK; i++)
		o->origin[i] = r->origin[i];
	for (size_t i = 0; i < r->n_shape && i < TA_MAX_RANK; i++)
		o->shape[i] = r->shape[i];
}

/* Options into o. */
static void cc_options(const Tileatom__Options *op, ta_wire_request *o)
{
	o->has_options = op != NULL;
	cc_array(op ? op->mask : NULL, &o->mask, &o->refs);
	cc_ref(op ? op->old_into : NULL, &o->old_into);
	if (!op)
		return;
	o->sem = (int32_t)op->sem;
	o->scope = (int32_t)op->scope;
	o->space = (int32_t)op->space;
	o->no_bounds_check = op->no_bounds_check;
	o->want_old = op->want_old;
	if (op->old_into)
		o->refs = true;
}

/* A ScatterAddr into o. */
static void cc_saddr(const Tileatom__ScatterAddr *sa, ta_wire_request *o)
{
	o->form = TA_FORM_SCATTER;
	o->dim = sa->dim;
	if (sa->indices) {
		o->n_indices = 1;
		cc_array(sa->indices, &o->index[0], &o->refs);
	}
}

/* An IndexedAddr into o. */
static void cc_iaddr(const Tileatom__IndexedAddr *ia, ta_wire_request *o)
{
	o->form = TA_FORM_INDEXED;
	o->flat = ia->flat;
	o->n_indices = ia->n_indices;
	for (size_t i = 0; i < ia->n_indices; i++) {
		ta_wire_array spare;
		cc_array(ia->indices[i], i < TA_MAX_RANK ? &o->index[i] : &spare, &o->refs);
	}
}

/* An Addressing (memory requests) into o. */
static void cc_addressing(const Tileatom__Addressing *a, ta_wire_request *o)
{
	if (!a)
		return;
	if (a->form_case == TILEATOM__ADDRESSING__FORM_REGION) {
		o->form = TA_FORM_REGION;
		cc_region(a->region, &o->addr_region);
	} else if (a->form_case == TILEATOM__ADDRESSING__FORM_SCATTER) {
		cc_saddr(a->scatter, o);
	} else if (a->form_case == TILEATOM__ADDRESSING__FORM_INDEXED) {
		cc_iaddr(a->indexed, o);
	}
}

/* Converts protobuf-c's Request into the ta_wire_request the codec must give; false for a
 * control-plane body. */
static bool cc_oracle(const Tileatom__Request *q, ta_wire_request *o)
{
	memset(o, 0, sizeof(*o));
	o->id = q->id;
	o->kind = (ta_req_kind)q->body_case;
	o->tile = "";
	switch (q->body_case) {
	case TILEATOM__REQUEST__BODY__NOT_SET:
		o->kind = TA_REQ_NONE;
		return true;
	case TILEATOM__REQUEST__BODY_ELEMENTWISE: {
		const Tileatom__ElementwiseAtomicRequest *e = q->elementwise;
		o->tile = e->tile;
		o->op = (int32_t)e->op;
		cc_region(e->region, &o->region);
		cc_array(e->values, &o->values, &o->refs);
		cc_array(e->compare, &o->compare, &o->refs);
		cc_options(e->options, o);
		return true;
	}
	case TILEATOM__REQUEST__BODY_SCATTER: {
		const Tileatom__ScatterAtomicRequest *s = q->scatter;
		o->tile = s->tile;
		o->op = (int32_t)s->op;
		cc_region(s->region, &o->region);
		if (s->addr)
			cc_saddr(s->addr, o);
		cc_array(s->values, &o->values, &o->refs);
		cc_options(s->options, o);
		return true;
	}
	case TILEATOM__REQUEST__BODY_INDEXED: {
		const Tileatom__IndexedAtomicRequest *x = q->indexed;
		o->tile = x->tile;
		o->op = (int32_t)x->op;
		cc_region(x->region, &o->region);
		if (x->addr)
			cc_iaddr(x->addr, o);
		cc_array(x->values, &o->values, &o->refs);
		cc_array(x->compare, &o->compare, &o->refs);
		cc_options(x->options, o);
		return true;
	}
	case TILEATOM__REQUEST__BODY_WRITE:
		o->tile = q->write->tile;
		cc_region(q->write->region, &o->region);
		cc_array(q->write->values, &o->values, &o->refs);
		return true;
	case TILEATOM__REQUEST__BODY_READ:
		o->tile = q->read->tile;
		cc_region(q->read->region, &o->region);
		return true;
	case TILEATOM__REQUEST__BODY_GATHER:
		o->tile = q->gather->tile;
		cc_region(q->gather->window, &o->region);
		cc_addressing(q->gather->addr, o);
		cc_array(q->gather->padding, &o->padding, &o->refs);
		cc_options(q->gather->options, o);
		return true;
	case TILEATOM__REQUEST__BODY_SCATTER_STORE:
		o->tile = q->scatter_store->tile;
		cc_region(q->scatter_store->window, &o->region);
		cc_addressing(q->scatter_store->addr, o);
		cc_array(q->scatter_store->values, &o->values, &o->refs);
		cc_options(q->scatter_store->options, o);
		return true;
	case TILEATOM__REQUEST__BODY_ATOMIC_LOAD:
		o->tile = q->atomic_load->tile;
		cc_region(q->atomic_load->window, &o->region);
		cc_addressing(q->atomic_load->addr, o);
		cc_options(q->atomic_load->options, o);
		return true;
	case TILEATOM__REQUEST__BODY_ATOMIC_STORE:
		o->tile = q->atomic_store->tile;
		cc_region(q->atomic_store->window, &o->region);
		cc_addressing(q->atomic_store->addr, o);
		cc_array(q->atomic_store->values, &o->values, &o->refs);
		cc_options(q->atomic_store->options, o);
		return true;
	default:
		return false;
	}
}

/* The first field where two kept Arrays differ, or NULL. */
static const char *cc_array_diff(const ta_wire_array *a, const ta_wire_array *b)
{
	if (a->present != b->present)
		return "present";
	if (!a->present)
		return NULL;
	if (a->dtype != b->dtype || a->n_shape != b->n_shape)
		return "dtype or rank";
	for (size_t i = 0; i < a->n_shape && i < TA_MAX_RANK; i++)
		if (a->shape[i] != b->shape[i])
			return "shape";
	if (a->len != b->len || (a->data == NULL) != (b->data == NULL) ||
	    (a->len && memcmp(a->data, b->data, a->len) != 0))
		return "data";
	if (memcmp(&a->shared, &b->shared, sizeof(a->shared)) != 0 &&
	    (a->shared.present || b->shared.present))
		return "shared";
	return NULL;
}

/* The first field where two kept Regions differ, or NULL. */
static const char *cc_region_diff(const ta_wire_region *a, const ta_wire_region *b)
{
	if (a->n_origin != b->n_origin || a->n_shape != b->n_shape)
		return "region counts";
	for (size_t i = 0; i < a->n_origin && i < TA_MAX_RANK; i++)
		if (a->origin[i] != b->origin[i])
			return "region origin";
	for (size_t i = 0; i < a->n_shape && i < TA_MAX_RANK; i++)
		if (a->shape[i] != b->shape[i])
			return "region shape";
	return NULL;
}

/* The first field where the codec's request a and the oracle's b differ, or NULL. */
static const char *cc_diff(const ta_wire_request *a, const ta_wire_request *b)
{
	const char *d;
	if (a->id != b->id || a->kind != b->kind)
		return "id or kind";
	if (a->kind == TA_REQ_NONE)
		return NULL;
	if (strcmp(a->tile, b->tile) != 0 || a->op != b->op)
		return "tile or op";
	if ((d = cc_region_diff(&a->region, &b->region)))
		return d;
	if (a->form != b->form || a->dim != b->dim || a->flat != b->flat ||
	    a->n_indices != b->n_indices)
		return "addressing";
	if (a->form == TA_FORM_REGION && (d = cc_region_diff(&a->addr_region, &b->addr_region)))
		return d;
	for (size_t i = 0; i < a->n_indices && i < TA_MAX_RANK; i++)
		if ((d = cc_array_diff(&a->index[i], &b->index[i])))
			return d;
	if ((d = cc_array_diff(&a->values, &b->values)) ||
	    (d = cc_array_diff(&a->compare, &b->compare)) ||
	    (d = cc_array_diff(&a->padding, &b->padding)))
		return d;
	if (a->has_options != b->has_options)
		return "options";
	if (a->has_options &&
	    (a->sem != b->sem || a->scope != b->scope || a->space != b->space ||
	     a->no_bounds_check != b->no_bounds_check || a->want_old != b->want_old))
		return "options' scalars";
	if ((d = cc_array_diff(&a->mask, &b->mask)))
		return d;
	if (a->old_into.present != b->old_into.present ||
	    (a->old_into.present && memcmp(&a->old_into, &b->old_into, sizeof(a->old_into))))
		return "old_into";
	if (a->refs != b->refs)
		return "refs";
	return NULL;
}

/* True when the message of desc in n bytes at p (well formed: protobuf-c took it or the
 * walk ends) gives a singular message field twice, or two members of a oneof, at any
 * depth: the one thing the codec answers as a problem where protobuf-c merges. */
static bool cc_twice(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n, int depth)
{
	const uint8_t *end = p + n;
	uint8_t seen[64] = {0};
	bool oneof = false;
	while (p < end && depth < 16) {
		uint64_t key = 0, v;
		int k = 0;
		while (p < end && k < 10) { /* the key */
			key |= (uint64_t)(*p & 0x7f) << (7 * k);
			k++;
			if (*p++ < 0x80)
				break;
		}
		unsigned wire = (unsigned)(key & 7);
		size_t len = 0;
		if (wire == 0) {
			while (p < end && *p++ >= 0x80) {
			}
			continue;
		}
		if (wire == 1 || wire == 5) {
			p += wire == 1 ? 8 : 4;
			continue;
		}
		if (wire != 2)
			return false;
		v = 0;
		k = 0;
		while (p < end && k < 10) {
			v |= (uint64_t)(*p & 0x7f) << (7 * k);
			k++;
			if (*p++ < 0x80)
				break;
		}
		if (v > (uint64_t)(end - p))
			return false;
		len = (size_t)v;
		const ProtobufCFieldDescriptor *f =
		    protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3));
		if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
			unsigned idx = (unsigned)(f - desc->fields);
			if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
				if (oneof)
					return true;
				oneof = true;
			} else if (f->label != PROTOBUF_C_LABEL_REPEATED && idx < 64) {
				if (seen[idx])
					return true;
				seen[idx] = 1;
			}
			if (cc_twice(f->descriptor, p, len, depth + 1))
				return true;
		}
		p += len;
	}
	return false;
}

/* Checks the codec's decoder on one payload against protobuf-c (see the top of this file).
 * Returns whether it decoded a data-plane request without a problem. */
static bool cc_decode_check(const uint8_t *payload, size_t len)
{
	ta_arena arena;
	ta_arena_init(&arena, 4096);
	ta_wire_request w;
	ta_wire_outcome out = ta_codec_decode(&arena, payload, len, &w);
	Tileatom__Request *slow = tileatom__request__unpack(NULL, len, payload);
	char bad[200];
	bool strings_ok =
	    ta_wire_check_strings(&tileatom__request__descriptor, payload, len, bad, sizeof(bad));
	bool twice = cc_twice(&tileatom__request__descriptor, payload, len, 0);
	bool data = false;
	if (out == TA_WIRE_MALFORMED) {
		if (slow)
			cc_fail("the codec refused bytes protobuf-c takes", payload, len);
	} else if (out == TA_WIRE_CONTROL) {
		if (slow && ta_req_has_tile((ta_req_kind)slow->body_case))
			cc_fail("the codec handed a data-plane request to protobuf-c", payload,
			        len);
	} else if (w.problem) {
		char want[300];
		snprintf(want, sizeof(want), TA_WIRE_BAD_STRING, bad);
		bool is_string = strncmp(w.problem_msg, "invalid string: ", 16) == 0;
		if (is_string && (strings_ok || strcmp(want, w.problem_msg) != 0) && !twice)
			cc_fail("the codec and wirecheck.c name different bad strings", payload,
			        len);
		if (!is_string && !twice)
			cc_fail("the codec saw a field twice that is not there twice", payload,
			        len);
		if (!slow)
			cc_fail("the codec took bytes protobuf-c refuses", payload, len);
	} else {
		ta_wire_request o;
		const char *d;
		if (!slow)
			cc_fail("the codec took bytes protobuf-c refuses", payload, len);
		if (!strings_ok)
			cc_fail("the codec took a bad string", payload, len);
		if (twice)
			cc_fail("the codec took a field given twice", payload, len);
		if (!cc_oracle(slow, &o))
			cc_fail("the codec decoded a control-plane request", payload, len);
		if ((d = cc_diff(&w, &o)) != NULL) {
			char what[120];
			snprintf(what, sizeof(what), "the codec and protobuf-c differ in %s", d);
			cc_fail(what, payload, len);
		}
		data = w.kind != TA_REQ_NONE;
	}
	if (slow)
		tileatom__request__free_unpacked(slow, NULL);
	ta_arena_free(&arena);
	return data;
}

/* ---- the writer against protobuf-c -------------------------------------------------- */

/* Encodes m with the codec and, as the same Response, with ta_frame_append under
 * max_payload, and checks that both give the same outcome and bytes. */
static void cc_encode_check(const ta_reply_msg *m, uint32_t max_payload)
{
	Tileatom__Response resp = TILEATOM__RESPONSE__INIT;
	Tileatom__OpResponse op = TILEATOM__OP_RESPONSE__INIT;
	Tileatom__Array arr = TILEATOM__ARRAY__INIT;
	resp.id = m->id;
	resp.status = (Tileatom__Status)m->status;
	resp.message = m->message ? (char *)m->message : (char *)"";
	if (m->has_old) {
		arr.dtype = (Tileatom__DType)m->dtype;
		arr.n_shape = m->rank;
		arr.shape = (int64_t *)m->shape;
		arr.data.data = (uint8_t *)m->data;
		arr.data.len = m->len;
	}
	if (m->body == TA_BODY_OP) {
		op.old = m->has_old ? &arr : NULL;
		op.skipped = m->skipped;
		op.applied = m->applied;
		resp.body_case = TILEATOM__RESPONSE__BODY_OP;
		resp.op = &op;
	} else if (m->body == TA_BODY_DATA) {
		resp.body_case = TILEATOM__RESPONSE__BODY_DATA;
		resp.data = &arr;
	}
	ta_frame_buf a = {NULL, 0, 0}, b = {NULL, 0, 0};
	size_t need = 0;
	int ra = ta_codec_append(m, max_payload, &a, &need);
	int rb = ta_frame_append(&resp.base, max_payload, &b);
	if (ra != rb || a.len != b.len || (a.len && memcmp(a.data, b.data, a.len)) ||
	    need != protobuf_c_message_get_packed_size(&resp.base))
		cc_fail("the codec and protobuf-c encoded a response differently", b.data, b.len);
	ta_frame_buf_free(&a);
	ta_frame_buf_free(&b);
}

/* ---- runs ---------------------------------------------------------------------------- */

/* Checks the decoder on one payload, runs it through both services (ta_dispatch_frame) and
 * compares the replies and then the tiles. */
static void cc_run_payload(cc_world *w, const uint8_t *payload, size_t len)
{
	ta_reply r[2];
	for (int i = 0; i < 2; i++) {
		uint8_t *copy = calloc(len ? len : 1, 1); /* exact size: ASan sees an overread */
		if (!copy)
			cc_fail("out of memory", payload, len);
		if (len)
			memcpy(copy, payload, len);
		ta_dispatch_frame(&w->svc[i], copy, len, &r[i]);
		free(copy);
	}
	w->payloads++;
	if (cc_decode_check(payload, len))
		w->data_taken++;
	if (r[0].len != r[1].len || r[0].close_after != r[1].close_after ||
	    (r[0].len && memcmp(r[0].frame, r[1].frame, r[0].len) != 0))
		cc_fail("the two paths answered with different bytes", payload, len);
	free(r[0].frame);
	free(r[1].frame);
	cc_compare_tiles(w, payload, len);
}

/* Runs n payloads (payloads[i], lens[i]) as one pipelined run through the first service
 * (ta_dispatch_run_batch: grouped plans) and one by one through the second
 * (ta_dispatch_run_session, up to the frame that asks to close), and compares the output bytes and
 * the tiles. */
static void cc_run_batch(cc_world *w, const uint8_t *const *payloads, const size_t *lens, size_t n)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += TA_FRAME_HEADER + lens[i];
	uint8_t *frames = malloc(total ? total : 1);
	if (!frames)
		cc_fail("out of memory", NULL, 0);
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		ta_frame_put_header(frames + at, (uint32_t)lens[i]);
		if (lens[i])
			memcpy(frames + at + TA_FRAME_HEADER, payloads[i], lens[i]);
		at += TA_FRAME_HEADER + lens[i];
	}
	ta_frame_buf out[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
	size_t done[2];
	bool close_after[2];
	uint32_t nframes[2];
	ta_dispatch_scratch scratch;
	ta_dispatch_scratch_init(&scratch);
	done[0] = ta_dispatch_run_batch(&w->svc[0], &scratch, NULL, frames, total, UINT64_MAX,
	                                &out[0], &close_after[0], &nframes[0]);
	done[1] = 0;
	close_after[1] = false;
	nframes[1] = 0;
	for (size_t i = 0; i < n && !close_after[1]; i++) {
		(void)ta_dispatch_run_session(&w->svc[1], &scratch, NULL, payloads[i], lens[i], -1,
		                              &out[1], &close_after[1]);
		done[1] += TA_FRAME_HEADER + lens[i];
		nframes[1]++;
	}
	ta_dispatch_scratch_free(&scratch);
	if (done[0] != done[1] || close_after[0] != close_after[1] || nframes[0] != nframes[1] ||
	    out[0].len != out[1].len ||
	    (out[0].len && memcmp(out[0].data, out[1].data, out[0].len)))
		cc_fail("a pipelined run and its requests one by one answered with different bytes",
		        frames, total);
	cc_compare_tiles(w, frames, total);
	ta_frame_buf_free(&out[0]);
	ta_frame_buf_free(&out[1]);
	free(frames);
}

#endif /* TA_TESTS_CODEC_CHECK_H */
