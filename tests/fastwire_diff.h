/* fastwire_diff.h: the differential check of daemon/fastwire.c, shared by
 * tests/check_fastwire.c and the libFuzzer harness tests/fuzz_dispatch.c (static functions:
 * include it once). Two services over one CPU backend and two registries holding the same
 * base tiles, one with the fast wire path on and one with it off (protobuf-c's generic
 * unpack and pack, wirecheck.c's string check): every payload goes through both, and the
 * reply bytes, close_after and then every tile (names, shapes and bytes) must be identical.
 * fwd_decode_check also checks the decoder alone: whatever it takes, protobuf-c must take
 * too, with the same fields (the two decoded messages re-encode to the same bytes), and
 * whatever ta_fastwire_decode_atomic takes, ta_fastwire_decode_request takes too, with the
 * same fields as dispatch converts them. */
#ifndef TA_TESTS_FASTWIRE_DIFF_H
#define TA_TESTS_FASTWIRE_DIFF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "dispatch.h"
#include "fastwire.h"
#include "registry.h"
#include "ta_backend.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"
#include "wirecheck.h"

/* Limits of the compared services: small, so that no input can exhaust memory. */
#define FWD_MAX_TILE_BYTES  (1u << 20)
#define FWD_MAX_TOTAL_BYTES (8u << 20)
#define FWD_MAX_FRAME       (64u << 10)

/* One tile that exists at the start of every input (the fuzz corpus's tiles). */
typedef struct fwd_tile {
	const char *name;           /* tile name */
	ta_dtype dtype;             /* element type */
	int rank;                   /* rank */
	int64_t shape[TA_MAX_RANK]; /* extents */
} fwd_tile;

/* The base tiles: every tile dtype, ranks 1 to 4 (tests/fuzz_seeds.c names them). */
static const fwd_tile fwd_tiles[] = {
    {"a", TA_DTYPE_I32, 1, {16}},          {"b", TA_DTYPE_F16, 2, {4, 6}},
    {"c", TA_DTYPE_U64, 3, {2, 3, 4}},     {"d", TA_DTYPE_F32, 2, {8, 8}},
    {"e", TA_DTYPE_BF16, 4, {2, 3, 2, 2}}, {"f", TA_DTYPE_I64, 1, {32}},
    {"g", TA_DTYPE_F64, 2, {5, 3}},        {"h", TA_DTYPE_U32, 3, {4, 4, 2}},
};
#define FWD_NTILES (sizeof(fwd_tiles) / sizeof(fwd_tiles[0]))

/* The two services compared. */
typedef struct fwd_world {
	ta_registry *reg[2];   /* [0]: fast path on, [1]: off */
	ta_service svc[2];     /* the services over them */
	uint64_t fast_taken;   /* payloads the fast decoder took */
	uint64_t atomic_taken; /* payloads ta_fastwire_decode_atomic took */
	uint64_t payloads;     /* payloads compared */
} fwd_world;

/* Reports a difference and stops (a test failure, or a libFuzzer crash). */
_Noreturn static void fwd_fail(const char *what, const uint8_t *payload, size_t len)
{
	fprintf(stderr, "fastwire differential check: %s; payload (%zu bytes):", what, len);
	for (size_t i = 0; i < len && i < 256; i++)
		fprintf(stderr, " %02x", payload[i]);
	fprintf(stderr, "\n");
	abort();
}

/* Creates the base tiles in reg, each filled with the same byte pattern every time. */
static void fwd_create_tiles(ta_registry *reg)
{
	for (size_t i = 0; i < FWD_NTILES; i++) {
		ta_tile_shape shape;
		memset(&shape, 0, sizeof(shape));
		shape.dtype = fwd_tiles[i].dtype;
		shape.rank = fwd_tiles[i].rank;
		memcpy(shape.shape, fwd_tiles[i].shape, sizeof(shape.shape));
		ta_tile *tile = NULL;
		ta_error err = {0};
		if (ta_registry_create(reg, fwd_tiles[i].name, &shape, &tile, &err) != TA_OK)
			fwd_fail("cannot create a base tile", NULL, 0);
		uint8_t *mem = tile->mem; /* CPU backend: host memory */
		for (uint64_t k = 0; k < tile->bytes; k++)
			mem[k] = (uint8_t)(k * 37u + i * 11u + 1u);
		ta_registry_publish(tile);
		ta_tile_unref(tile);
	}
}

/* Sets both services up over backend (the CPU backend). */
static void fwd_init(fwd_world *w, ta_backend *backend)
{
	memset(w, 0, sizeof(*w));
	for (int i = 0; i < 2; i++) {
		ta_error err = {0};
		w->reg[i] = ta_registry_new(backend, FWD_MAX_TILE_BYTES, FWD_MAX_TOTAL_BYTES, &err);
		if (!w->reg[i])
			fwd_fail("cannot create a registry", NULL, 0);
		ta_service_init(&w->svc[i], backend, w->reg[i], FWD_MAX_FRAME);
		w->svc[i].fast_wire = i == 0;
		/* the generic service's backend re-checks every plan in full: a plan that
		 * ta_plan_check refused would answer differently */
		w->svc[i].recheck_plans = i == 1;
		fwd_create_tiles(w->reg[i]);
	}
}

/* Removes every tile of reg. */
static void fwd_clear(ta_registry *reg)
{
	ta_tile_info *infos = NULL;
	size_t n = 0;
	ta_error err = {0};
	if (ta_registry_list(reg, &infos, &n, &err) != TA_OK)
		fwd_fail("cannot list tiles", NULL, 0);
	for (size_t i = 0; i < n; i++)
		if (ta_registry_remove(reg, infos[i].name, NULL, &err) != TA_OK)
			fwd_fail("cannot remove a listed tile", NULL, 0);
	free(infos);
}

/* Puts both services back to the base tiles. */
static void fwd_reset(fwd_world *w)
{
	for (int i = 0; i < 2; i++) {
		fwd_clear(w->reg[i]);
		fwd_create_tiles(w->reg[i]);
	}
}

/* Frees both services' registries. */
static void fwd_free(fwd_world *w)
{
	for (int i = 0; i < 2; i++) {
		fwd_clear(w->reg[i]);
		ta_registry_free(w->reg[i]);
	}
}

/* Checks that both registries hold the same tiles with the same bytes (payload: for the
 * report). */
static void fwd_compare_tiles(fwd_world *w, const uint8_t *payload, size_t len)
{
	ta_tile_info *info[2] = {NULL, NULL};
	size_t n[2] = {0, 0};
	for (int i = 0; i < 2; i++) {
		ta_error err = {0};
		if (ta_registry_list(w->reg[i], &info[i], &n[i], &err) != TA_OK)
			fwd_fail("cannot list tiles", payload, len);
	}
	if (n[0] != n[1])
		fwd_fail("the two paths left different numbers of tiles", payload, len);
	for (size_t k = 0; k < n[0]; k++) {
		if (strcmp(info[0][k].name, info[1][k].name) != 0 ||
		    memcmp(&info[0][k].shape, &info[1][k].shape, sizeof(info[0][k].shape)) != 0 ||
		    info[0][k].bytes != info[1][k].bytes)
			fwd_fail("the two paths left different tiles", payload, len);
		ta_tile *t[2] = {NULL, NULL};
		for (int i = 0; i < 2; i++) {
			ta_error err = {0};
			if (ta_registry_get(w->reg[i], info[i][k].name, &t[i], &err) != TA_OK)
				fwd_fail("a listed tile cannot be looked up", payload, len);
		}
		if (memcmp(t[0]->mem, t[1]->mem, (size_t)t[0]->bytes) != 0)
			fwd_fail("the two paths left different tile contents", payload, len);
		ta_tile_unref(t[0]);
		ta_tile_unref(t[1]);
	}
	free(info[0]);
	free(info[1]);
}

/* True when view v is what dispatch's view_from_array makes of the optional Array a (which
 * ta_fastwire_decode_request decoded: no shared buffer). */
static bool fwd_view_same(const ta_array_view *v, const Tileatom__Array *a)
{
	if (!a)
		return !v->present && v->data == NULL && v->nbytes == 0 && v->rank == 0;
	if (!v->present || v->dtype != (ta_dtype)a->dtype || v->rank != (int)a->n_shape ||
	    v->nbytes != a->data.len || v->device || (v->data == NULL) != (a->data.data == NULL) ||
	    (a->data.len && memcmp(v->data, a->data.data, a->data.len) != 0))
		return false;
	for (size_t i = 0; i < a->n_shape; i++)
		if (v->shape[i] != a->shape[i])
			return false;
	return true;
}

/* Checks ta_fastwire_decode_atomic on one payload against ta_fastwire_decode_request and
 * dispatch's conversion (do_rmw: family, addressing, views, options; the op and the region
 * are kept as sent). Returns whether it took the payload. */
static bool fwd_atomic_check(const uint8_t *payload, size_t len)
{
	ta_arena arena;
	ta_arena_init(&arena, 4096);
	ta_fw_atomic a;
	bool took = ta_fastwire_decode_atomic(&arena, payload, len, &a);
	if (took) {
		Tileatom__Request *r = ta_fastwire_decode_request(&arena, payload, len);
		if (!r)
			fwd_fail("decode_atomic took bytes decode_request refuses", payload, len);
		const char *tile = NULL;
		Tileatom__Op op = 0;
		const Tileatom__Region *region = NULL;
		const Tileatom__Array *values = NULL, *compare = NULL;
		const Tileatom__Options *o = NULL;
		const Tileatom__Array *idx[TA_MAX_RANK] = {NULL};
		int n_idx = 0, addr = TA_ADDR_REGION, dim = 0;
		switch (r->body_case) {
		case TILEATOM__REQUEST__BODY_ELEMENTWISE:
			tile = r->elementwise->tile;
			op = r->elementwise->op;
			region = r->elementwise->region;
			values = r->elementwise->values;
			compare = r->elementwise->compare;
			o = r->elementwise->options;
			break;
		case TILEATOM__REQUEST__BODY_SCATTER:
			tile = r->scatter->tile;
			op = r->scatter->op;
			region = r->scatter->region;
			values = r->scatter->values;
			o = r->scatter->options;
			if (!r->scatter->addr || !r->scatter->addr->indices)
				fwd_fail("decode_atomic took a scatter without indices", payload,
				         len);
			addr = TA_ADDR_SCATTER;
			dim = r->scatter->addr->dim > INT32_MAX ? INT32_MAX
			                                        : (int)r->scatter->addr->dim;
			idx[0] = r->scatter->addr->indices;
			n_idx = 1;
			break;
		case TILEATOM__REQUEST__BODY_INDEXED:
			tile = r->indexed->tile;
			op = r->indexed->op;
			region = r->indexed->region;
			values = r->indexed->values;
			compare = r->indexed->compare;
			o = r->indexed->options;
			if (!r->indexed->addr || r->indexed->addr->n_indices == 0 ||
			    r->indexed->addr->n_indices > TA_MAX_RANK)
				fwd_fail("decode_atomic took indexed addressing it must hand back",
				         payload, len);
			addr = r->indexed->addr->flat ? TA_ADDR_FLAT : TA_ADDR_INDEXED;
			n_idx = (int)r->indexed->addr->n_indices;
			for (int i = 0; i < n_idx; i++)
				idx[i] = r->indexed->addr->indices[i];
			break;
		default:
			fwd_fail("decode_atomic took a request that is no atomic", payload, len);
		}
		const ta_request *q = &a.req;
		bool same = a.id == r->id && (int)a.kind == (int)r->body_case &&
		            strcmp(a.tile, tile) == 0 && a.op == (int32_t)op &&
		            q->family == ta_req_family(a.kind) && (int)q->addr == addr &&
		            q->n_index == n_idx &&
		            (addr != TA_ADDR_SCATTER || q->scatter_dim == dim);
		size_t no = region ? region->n_origin : 0, ns = region ? region->n_shape : 0;
		same = same && a.n_origin == no && a.n_shape == ns &&
		       (no == 0 || memcmp(a.origin, region->origin, no * sizeof(int64_t)) == 0) &&
		       (ns == 0 || memcmp(a.shape, region->shape, ns * sizeof(int64_t)) == 0);
		for (int i = 0; i < TA_MAX_RANK; i++)
			same = same && fwd_view_same(&q->index[i], i < n_idx ? idx[i] : NULL);
		same = same && fwd_view_same(&q->values, values) &&
		       fwd_view_same(&q->compare, compare) &&
		       fwd_view_same(&q->mask, o ? o->mask : NULL) &&
		       fwd_view_same(&q->padding, NULL);
		ta_request d;
		ta_request_init(&d);
		if (o) {
			d.sem = (ta_sem)o->sem;
			d.scope = (ta_scope)o->scope;
			d.space = (ta_space)o->space;
			d.check_bounds = !o->no_bounds_check;
			d.want_old = o->want_old;
			if (o->old_into)
				fwd_fail("decode_atomic took old_into", payload, len);
		}
		same = same && q->sem == d.sem && q->scope == d.scope && q->space == d.space &&
		       q->check_bounds == d.check_bounds && q->want_old == d.want_old;
		if (!same)
			fwd_fail("decode_atomic and decode_request decoded different fields",
			         payload, len);
	}
	ta_arena_free(&arena);
	return took;
}

/* Checks the decoder alone on one payload: what it takes, protobuf-c takes with the same
 * fields and without a bad string. Returns whether the fast decoder took it. */
static bool fwd_decode_check(const uint8_t *payload, size_t len)
{
	ta_arena arena;
	ta_arena_init(&arena, 4096);
	Tileatom__Request *fast = ta_fastwire_decode_request(&arena, payload, len);
	Tileatom__Request *slow = tileatom__request__unpack(NULL, len, payload);
	if (fast) {
		char bad[200];
		if (!slow)
			fwd_fail("the fast decoder took bytes protobuf-c refuses", payload, len);
		if (!ta_wire_check_strings(&tileatom__request__descriptor, payload, len, bad,
		                           sizeof(bad)))
			fwd_fail("the fast decoder took a bad string", payload, len);
		size_t nf = protobuf_c_message_get_packed_size(&fast->base);
		size_t ns = protobuf_c_message_get_packed_size(&slow->base);
		uint8_t *bf = malloc(nf ? nf : 1), *bs = malloc(ns ? ns : 1);
		if (!bf || !bs)
			fwd_fail("out of memory", payload, len);
		protobuf_c_message_pack(&fast->base, bf);
		protobuf_c_message_pack(&slow->base, bs);
		if (nf != ns || memcmp(bf, bs, nf) != 0)
			fwd_fail("the fast decoder and protobuf-c decoded different fields",
			         payload, len);
		free(bf);
		free(bs);
	}
	if (slow)
		tileatom__request__free_unpacked(slow, NULL);
	ta_arena_free(&arena);
	return fast != NULL;
}

/* Runs one payload through both services (ta_dispatch_frame) and compares the replies and
 * then the tiles. */
static void fwd_run_payload(fwd_world *w, const uint8_t *payload, size_t len)
{
	ta_reply r[2];
	for (int i = 0; i < 2; i++) {
		uint8_t *copy = calloc(len ? len : 1, 1); /* exact size: ASan sees an overread */
		if (!copy)
			fwd_fail("out of memory", payload, len);
		if (len)
			memcpy(copy, payload, len);
		ta_dispatch_frame(&w->svc[i], copy, len, &r[i]);
		free(copy);
	}
	w->payloads++;
	if (fwd_decode_check(payload, len))
		w->fast_taken++;
	if (fwd_atomic_check(payload, len))
		w->atomic_taken++;
	if (r[0].len != r[1].len || r[0].close_after != r[1].close_after ||
	    (r[0].len && memcmp(r[0].frame, r[1].frame, r[0].len) != 0))
		fwd_fail("the two paths answered with different bytes", payload, len);
	free(r[0].frame);
	free(r[1].frame);
	fwd_compare_tiles(w, payload, len);
}

/* Runs n payloads (payloads[i], lens[i]) as one pipelined run through both services
 * (ta_dispatch_run_batch: grouped plans) and compares the output bytes and the tiles. */
static void fwd_run_batch(fwd_world *w, const uint8_t *const *payloads, const size_t *lens,
                          size_t n)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += TA_FRAME_HEADER + lens[i];
	uint8_t *frames = malloc(total ? total : 1);
	if (!frames)
		fwd_fail("out of memory", NULL, 0);
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
	for (int i = 0; i < 2; i++) {
		ta_dispatch_scratch scratch;
		ta_dispatch_scratch_init(&scratch);
		done[i] = ta_dispatch_run_batch(&w->svc[i], &scratch, NULL, frames, total,
		                                UINT64_MAX, &out[i], &close_after[i], &nframes[i]);
		ta_dispatch_scratch_free(&scratch);
	}
	if (done[0] != done[1] || close_after[0] != close_after[1] || nframes[0] != nframes[1] ||
	    out[0].len != out[1].len ||
	    (out[0].len && memcmp(out[0].data, out[1].data, out[0].len)))
		fwd_fail("the two paths answered a pipelined run with different bytes", frames,
		         total);
	fwd_compare_tiles(w, frames, total);
	ta_frame_buf_free(&out[0]);
	ta_frame_buf_free(&out[1]);
	free(frames);
}

/* Encodes resp with fastwire.c and with ta_frame_append under max_payload and checks that
 * both give the same outcome and bytes. Returns whether fastwire.c took it. */
static bool fwd_encode_check(const Tileatom__Response *resp, uint32_t max_payload)
{
	ta_frame_buf a = {NULL, 0, 0}, b = {NULL, 0, 0};
	int ra = ta_fastwire_append_response(resp, max_payload, &a);
	int rb = ta_frame_append(&resp->base, max_payload, &b);
	if (ra != 1 && (ra != rb || a.len != b.len || (a.len && memcmp(a.data, b.data, a.len))))
		fwd_fail("the fast encoder and protobuf-c encoded a response differently", b.data,
		         b.len);
	ta_frame_buf_free(&a);
	ta_frame_buf_free(&b);
	return ra != 1;
}

#endif /* TA_TESTS_FASTWIRE_DIFF_H */
