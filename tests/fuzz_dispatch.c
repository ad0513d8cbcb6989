/* fuzz_dispatch.c: libFuzzer harness of tileatomd's request path (`make fuzz`, see
 * tests/fuzz.mk). One input is a sequence of request payloads, each preceded by its
 * length as 2 little-endian bytes (a short last payload takes what is left); each goes
 * through ta_dispatch_frame (or ta_dispatch_frame_owned_session) on a CPU backend with small
 * limits, in order, so that a create can be followed by ops on the new tile.
 *
 * Besides ASan/UBSan/leaks, every reply is checked: a well-formed frame within max_frame,
 * a Response that decodes and echoes the request id, a non-OK status always with a
 * message, no INTERNAL status and no "plan:" / "cpu backend:" refusal (the backend's
 * defence-in-depth checks, run in full here (recheck_plans), must never refuse a plan that
 * ta_plan_build accepted). After each
 * input every tile is removed and the base tiles are recreated with the same contents, and
 * the registry must then hold exactly the base bytes (a missed unref would show here).
 *
 * Half of the mutations are structure-aware (LLVMFuzzerCustomMutator): a payload is
 * decoded, one to three fields anywhere in it (found through the protobuf-c descriptors)
 * get an edge value, an element more or less, a new or dropped sub-message, a new shape
 * with matching data (operand arrays), changed bytes or another tile name, and the Request
 * is re-encoded; or a whole payload is duplicated or dropped. Byte-level mutation alone rarely
 * produces a valid 9-byte varint inside nested length-prefixed messages.
 *
 * Each input also runs through the conformance check of the daemon's one data-plane codec
 * (tests/codec_check.h): every payload decoded by daemon/codec.c and by protobuf-c must give
 * the same request; and two more services on the same base tiles (the second re-checking
 * every plan) run it payload by payload, then as one pipelined run against one by one; the
 * reply bytes and every tile must be identical. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "log.h"
#include "registry.h"
#include "ta_backend.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"

#include "codec_check.h"

/* Limits of the fuzzed service: small, so that no input can exhaust memory. */
#define FUZZ_MAX_TILE_BYTES  (1u << 20)
#define FUZZ_MAX_TOTAL_BYTES (8u << 20)
#define FUZZ_MAX_FRAME       (64u << 10)
/* Most payloads one input may hold. */
#define FUZZ_MAX_REQUESTS 16

/* One tile that exists at the start of every input. */
typedef struct base_tile {
	const char *name;           /* tile name */
	ta_dtype dtype;             /* element type */
	int rank;                   /* rank */
	int64_t shape[TA_MAX_RANK]; /* extents */
} base_tile;

/* The base tiles: every tile dtype, ranks 1 to 4 (names kept short for the mutator). */
static const base_tile base_tiles[] = {
    {"a", TA_DTYPE_I32, 1, {16}},          {"b", TA_DTYPE_F16, 2, {4, 6}},
    {"c", TA_DTYPE_U64, 3, {2, 3, 4}},     {"d", TA_DTYPE_F32, 2, {8, 8}},
    {"e", TA_DTYPE_BF16, 4, {2, 3, 2, 2}}, {"f", TA_DTYPE_I64, 1, {32}},
    {"g", TA_DTYPE_F64, 2, {5, 3}},        {"h", TA_DTYPE_U32, 3, {4, 4, 2}},
};
#define N_BASE (sizeof(base_tiles) / sizeof(base_tiles[0]))

/* The service every input runs against (set up once). */
static ta_backend *backend;
static ta_registry *registry;
static ta_service service;
static uint64_t base_bytes; /* bytes of all base tiles together */
static cc_world diff;       /* the codec's conformance check and its two services */

/* Stops the run with a message: libFuzzer records the input as a crash. */
static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_dispatch: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	abort();
}

/* Creates the base tiles, each filled with the same byte pattern every time. */
static void create_base_tiles(void)
{
	for (size_t i = 0; i < N_BASE; i++) {
		ta_tile_shape shape;
		memset(&shape, 0, sizeof(shape));
		shape.dtype = base_tiles[i].dtype;
		shape.rank = base_tiles[i].rank;
		memcpy(shape.shape, base_tiles[i].shape, sizeof(shape.shape));
		ta_tile *tile = NULL;
		ta_error err = {0};
		if (ta_registry_create(registry, base_tiles[i].name, &shape, &tile, &err) != TA_OK)
			fail("cannot create a base tile", err.msg);
		uint8_t *mem = tile->mem; /* CPU backend: host memory */
		for (uint64_t k = 0; k < tile->bytes; k++)
			mem[k] = (uint8_t)(k * 37u + i * 11u + 1u);
		ta_registry_publish(tile);
		ta_tile_unref(tile);
	}
}

/* Removes every tile, recreates the base tiles and checks that no bytes were left held. */
static void reset_tiles(void)
{
	ta_tile_info *infos = NULL;
	size_t n = 0;
	ta_error err = {0};
	if (ta_registry_list(registry, &infos, &n, &err) != TA_OK)
		fail("cannot list tiles", err.msg);
	for (size_t i = 0; i < n; i++)
		if (ta_registry_remove(registry, infos[i].name, NULL, &err) != TA_OK)
			fail("cannot remove a listed tile", err.msg);
	free(infos);
	uint32_t tiles = 0;
	uint64_t bytes = 0;
	ta_registry_stats(registry, &tiles, &bytes);
	if (tiles != 0 || bytes != 0)
		fail("tile memory still held after every tile was removed", "a missed unref");
	create_base_tiles();
}

/* True when an error message comes from a defence-in-depth check (never legitimate). */
static bool internal_refusal(const char *msg)
{
	if (strncmp(msg, "tile '", 6) == 0) { /* create: "tile 'NAME': fill: ..." */
		const char *p = strstr(msg, "': fill: ");
		if (p)
			msg = p + 9;
	}
	return strncmp(msg, "plan:", 5) == 0 || strncmp(msg, "cpu backend:", 12) == 0;
}

/* Checks that an Array's data length matches its shape and dtype. */
static void check_array(const Tileatom__Array *a, const char *what)
{
	size_t es = ta_dtype_size((ta_dtype)a->dtype);
	uint64_t n = 1;
	if (es == 0 || a->n_shape > TA_MAX_RANK)
		fail(what, "bad dtype or rank");
	for (size_t i = 0; i < a->n_shape; i++) {
		if (a->shape[i] < 1)
			fail(what, "extent below 1");
		n *= (uint64_t)a->shape[i];
	}
	if (a->data.len != n * es)
		fail(what, "data length does not match the shape");
}

/* Checks one reply against the request that produced it (req NULL: did not decode). */
static void check_reply(const ta_reply *reply, const Tileatom__Request *req)
{
	if (!reply->frame || reply->len < TA_FRAME_HEADER)
		fail("no reply frame", NULL);
	size_t plen = reply->len - TA_FRAME_HEADER;
	if (ta_frame_get_header(reply->frame) != plen)
		fail("reply length prefix does not match the frame", NULL);
	if (plen > FUZZ_MAX_FRAME)
		fail("reply over max_frame", NULL);
	Tileatom__Response *resp =
	    tileatom__response__unpack(NULL, plen, reply->frame + TA_FRAME_HEADER);
	if (!resp)
		fail("reply does not decode as a Response", NULL);
	if ((int)resp->status < 0 || (int)resp->status >= (int)TA_STATUS_COUNT)
		fail("unknown status", NULL);
	if (resp->status != TILEATOM__STATUS__OK && resp->message[0] == '\0')
		fail("error status without a message", NULL);
	if (resp->status == TILEATOM__STATUS__INTERNAL)
		fail("INTERNAL status", resp->message);
	if (resp->status != TILEATOM__STATUS__RESOURCE_EXHAUSTED && internal_refusal(resp->message))
		fail("a defence-in-depth check refused a request", resp->message);
	if (req && resp->id != req->id)
		fail("reply id does not echo the request id", NULL);
	if (reply->close_after != (req == NULL))
		fail("close_after set for a request that decoded (or not for one that did not)",
		     resp->message);
	if (resp->status == TILEATOM__STATUS__OK) {
		if (resp->body_case == TILEATOM__RESPONSE__BODY_DATA)
			check_array(resp->data, "read data");
		if (resp->body_case == TILEATOM__RESPONSE__BODY_OP && resp->op->old)
			check_array(resp->op->old, "old values");
	}
	tileatom__response__free_unpacked(resp, NULL);
}

/* Dispatches one payload from an exact-size heap copy (so that ASan sees any overread). */
static void run_one(const uint8_t *data, size_t n, bool owned)
{
	uint8_t *copy = malloc(n ? n : 1);
	if (!copy)
		fail("out of memory", NULL);
	if (n)
		memcpy(copy, data, n);
	Tileatom__Request *req = tileatom__request__unpack(NULL, n, data);
	ta_reply reply;
	if (owned) {
		ta_dispatch_frame_owned_session(&service, NULL, copy, n, &reply);
	} else {
		ta_dispatch_frame(&service, copy, n, &reply);
		free(copy);
	}
	check_reply(&reply, req);
	free(reply.frame);
	if (req)
		tileatom__request__free_unpacked(req, NULL);
}

/* ---- structure-aware mutation -------------------------------------------------------- */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Integer values on the edges that the request path checks. */
// clang-format off
static const int64_t edge_values[] = {
	0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 24, 31, 32, 33, 127, 128, 255, 256, 4096, 16384,
	16385, 65536, -1, -2, INT32_MAX, INT32_MIN, UINT32_MAX, INT64_C(1) << 32,
	(INT64_C(1) << 32) + 1, INT64_C(1) << 40, (INT64_C(1) << 40) + 1, INT64_C(1) << 62,
	INT64_MAX, INT64_MAX - 1, INT64_MIN,
};
// clang-format on
#define N_EDGE (sizeof(edge_values) / sizeof(edge_values[0]))

/* Tile names a mutated name field may get. */
static const char *const mutant_names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "n", "L", ""};
#define N_NAMES (sizeof(mutant_names) / sizeof(mutant_names[0]))

/* One field of a decoded message that a mutation may change. */
typedef struct leaf {
	ProtobufCMessage *msg;              /* the message holding the field */
	const ProtobufCFieldDescriptor *fd; /* the field */
} leaf;

/* Most fields one payload's mutation chooses from. */
#define MAX_LEAVES 256

/* Next value of a xorshift64 generator. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* Bytes of one element of an integer, bool or enum field; 0 for other types. */
static size_t scalar_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_BOOL:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	default:
		return 0;
	}
}

/* Reads an integer field element of size sz at p. */
static int64_t scalar_get(const void *p, size_t sz)
{
	if (sz == 8) {
		int64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Writes v (truncated to sz bytes; 0/1 for bool) to an integer field element at p. */
static void scalar_set(void *p, size_t sz, ProtobufCType t, int64_t v)
{
	if (t == PROTOBUF_C_TYPE_BOOL)
		v = v & 1;
	if (sz == 8) {
		memcpy(p, &v, 8);
	} else {
		uint32_t w = (uint32_t)v;
		memcpy(p, &w, 4);
	}
}

/* A new value for an integer field that held old: an edge value, a step or random bits. */
static int64_t mutant_value(uint64_t *rng, int64_t old)
{
	switch (rng_next(rng) % 4) {
	case 0:
	case 1:
		return edge_values[rng_next(rng) % N_EDGE];
	case 2:
		return (int64_t)((uint64_t)old + (rng_next(rng) % 5) - 2);
	default:
		return (int64_t)rng_next(rng);
	}
}

/* Collects the fields of msg and of its present sub-messages into out[n..max). */
static size_t collect_leaves(ProtobufCMessage *msg, leaf *out, size_t n, size_t max)
{
	const ProtobufCMessageDescriptor *d = msg->descriptor;
	char *base = (char *)msg;
	for (unsigned i = 0; i < d->n_fields && n < max; i++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[i];
		if ((fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(uint32_t *)(base + fd->quantifier_offset) != fd->id)
			continue;
		out[n++] = (leaf){msg, fd};
		if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t cnt = *(size_t *)(base + fd->quantifier_offset);
			ProtobufCMessage **arr = *(ProtobufCMessage ***)(base + fd->offset);
			for (size_t k = 0; k < cnt && n < max; k++)
				n = collect_leaves(arr[k], out, n, max);
		} else {
			ProtobufCMessage *sub = *(ProtobufCMessage **)(base + fd->offset);
			if (sub)
				n = collect_leaves(sub, out, n, max);
		}
	}
	return n;
}

/* A new, empty message of descriptor d (malloc'd, as protobuf-c's default allocator). */
static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m = malloc(d->sizeof_message);
	if (m)
		protobuf_c_message_init(d, m);
	return m;
}

/* Changes a bytes field: a byte, an edge value written over some bytes, or its length. */
static void mutate_bytes(ProtobufCBinaryData *b, uint64_t *rng)
{
	unsigned what = (unsigned)(rng_next(rng) % 4);
	if (what <= 1 && b->len > 0) {
		size_t w = (size_t)1 << (rng_next(rng) % 4); /* 1, 2, 4 or 8 bytes */
		if (w > b->len)
			w = b->len;
		size_t at = (size_t)(rng_next(rng) % (b->len - w + 1));
		int64_t v =
		    what == 0 ? (int64_t)rng_next(rng) : edge_values[rng_next(rng) % N_EDGE];
		memcpy(b->data + at, &v, w); /* little-endian host */
		return;
	}
	size_t step = (size_t)1 << (rng_next(rng) % 4);
	if (what == 2 && b->len >= step) {
		b->len -= step;
		return;
	}
	uint8_t *p = malloc(b->len + step);
	if (!p)
		return;
	if (b->len)
		memcpy(p, b->data, b->len);
	memset(p + b->len, (int)(rng_next(rng) & 0xff), step);
	free(b->data);
	b->data = p;
	b->len += step;
}

/* Gives an Array a new shape (rank 0 to one over the limit, mostly small extents) with
 * matching data of small element values, sometimes another dtype; nothing when the data
 * would exceed 1 KiB. */
static void reshape_array(Tileatom__Array *a, uint64_t *rng)
{
	static const int64_t extents[] = {1, 1, 2, 2, 3, 4, 5, 6, 8, 16, 32, 64, 128, 256};
	size_t rank = (size_t)(rng_next(rng) % (TA_MAX_RANK + 2));
	int64_t shape[TA_MAX_RANK + 1];
	uint64_t n = 1;
	for (size_t i = 0; i < rank; i++) {
		shape[i] = extents[rng_next(rng) % (sizeof(extents) / sizeof(extents[0]))];
		n *= (uint64_t)shape[i];
	}
	if (rng_next(rng) % 4 == 0)
		a->dtype = (Tileatom__DType)(rng_next(rng) % (TA_DTYPE_COUNT + 1));
	size_t es = ta_dtype_size((ta_dtype)a->dtype);
	uint64_t bytes = n * (es ? es : 1);
	if (bytes > 1024)
		return;
	int64_t *new_shape = rank ? malloc(rank * sizeof(*new_shape)) : NULL;
	uint8_t *data = calloc((size_t)bytes, 1);
	if ((rank && !new_shape) || !data) {
		free(new_shape);
		free(data);
		return;
	}
	if (rank)
		memcpy(new_shape, shape, rank * sizeof(*new_shape));
	for (uint64_t k = 0; k < n; k++) /* small values: in-range indices, tiny numbers */
		data[k * (es ? es : 1)] = (uint8_t)(rng_next(rng) % 4);
	free(a->shape);
	free(a->data.data);
	a->shape = new_shape;
	a->n_shape = rank;
	a->data.data = data;
	a->data.len = (size_t)bytes;
}

/* Applies one structured mutation to field l. */
static void mutate_leaf(const leaf *l, uint64_t *rng)
{
	const ProtobufCFieldDescriptor *fd = l->fd;
	char *base = (char *)l->msg;
	void *member = base + fd->offset;
	size_t sz = scalar_size(fd->type);
	bool oneof = (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
	if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t *cnt = (size_t *)(base + fd->quantifier_offset);
		void **arr = (void **)member;
		size_t esz = sz ? sz : fd->type == PROTOBUF_C_TYPE_MESSAGE ? sizeof(void *) : 0;
		if (esz == 0)
			return;
		unsigned what = (unsigned)(rng_next(rng) % 4);
		if (what == 0 && *cnt > 0) { /* drop the last element */
			(*cnt)--;
			if (fd->type == PROTOBUF_C_TYPE_MESSAGE)
				protobuf_c_message_free_unpacked(((ProtobufCMessage **)*arr)[*cnt],
				                                 NULL);
			return;
		}
		if (what >= 2 && *cnt > 0 && fd->descriptor == &tileatom__array__descriptor) {
			reshape_array(((Tileatom__Array **)*arr)[rng_next(rng) % *cnt], rng);
			return;
		}
		if (what == 1 || *cnt == 0 || fd->type == PROTOBUF_C_TYPE_MESSAGE) {
			void *grown = realloc(*arr, (*cnt + 1) * esz);
			if (!grown)
				return;
			*arr = grown;
			if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
				ProtobufCMessage *m = new_message(fd->descriptor);
				if (!m)
					return;
				if (fd->descriptor == &tileatom__array__descriptor) {
					((Tileatom__Array *)m)->dtype = TILEATOM__DTYPE__INT32;
					reshape_array((Tileatom__Array *)m, rng);
				}
				((ProtobufCMessage **)grown)[*cnt] = m;
			} else {
				scalar_set((char *)grown + *cnt * esz, sz, fd->type,
				           mutant_value(rng, 1));
			}
			(*cnt)++;
			return;
		}
		char *p = (char *)*arr + (rng_next(rng) % *cnt) * esz;
		scalar_set(p, sz, fd->type, mutant_value(rng, scalar_get(p, sz)));
		return;
	}
	if (sz) {
		scalar_set(member, sz, fd->type, mutant_value(rng, scalar_get(member, sz)));
		return;
	}
	switch (fd->type) {
	case PROTOBUF_C_TYPE_BYTES:
		mutate_bytes((ProtobufCBinaryData *)member, rng);
		break;
	case PROTOBUF_C_TYPE_STRING: {
		char **str = (char **)member;
		char *name = strdup(mutant_names[rng_next(rng) % N_NAMES]);
		if (!name)
			break;
		if (*str && *str != fd->default_value)
			free(*str);
		*str = name;
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		ProtobufCMessage **sub = (ProtobufCMessage **)member;
		unsigned what = (unsigned)(rng_next(rng) % 4);
		if (!*sub) {
			*sub = new_message(fd->descriptor);
		} else if (fd->descriptor == &tileatom__array__descriptor && what < 2) {
			reshape_array((Tileatom__Array *)*sub, rng);
		} else if (!oneof && what == 2) {
			protobuf_c_message_free_unpacked(*sub, NULL);
			*sub = NULL;
		}
		break;
	}
	default:
		break;
	}
}

/* Re-encodes payload p (n bytes) after one structured mutation into out (cap bytes);
 * returns the new length, or 0 when it does not decode or does not fit. */
static size_t mutate_payload(const uint8_t *p, size_t n, uint8_t *out, size_t cap, uint64_t *rng)
{
	Tileatom__Request *req = tileatom__request__unpack(NULL, n, p);
	if (!req)
		return 0;
	static leaf leaves[MAX_LEAVES];
	size_t nl = collect_leaves(&req->base, leaves, 0, MAX_LEAVES);
	size_t rounds = 1 + (size_t)(rng_next(rng) % 3);
	for (size_t r = 0; r < rounds && nl > 0; r++) {
		mutate_leaf(&leaves[rng_next(rng) % nl], rng);
		nl = collect_leaves(&req->base, leaves, 0, MAX_LEAVES);
	}
	size_t len = protobuf_c_message_get_packed_size(&req->base);
	if (len == 0 || len > cap || len > 0xffff) {
		tileatom__request__free_unpacked(req, NULL);
		return 0;
	}
	protobuf_c_message_pack(&req->base, out);
	tileatom__request__free_unpacked(req, NULL);
	return len;
}

/* libFuzzer: half byte-level mutation, half structured (see the comment at the top). */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	uint64_t rng = (uint64_t)seed * UINT64_C(0x9e3779b97f4a7c15) + 1;
	if (rng_next(&rng) % 2 == 0)
		return LLVMFuzzerMutate(data, size, max_size);
	size_t off[FUZZ_MAX_REQUESTS], len[FUZZ_MAX_REQUESTS], n = 0, at = 0;
	while (n < FUZZ_MAX_REQUESTS && size - at >= 2) {
		size_t l = (size_t)data[at] | ((size_t)data[at + 1] << 8);
		if (l > size - at - 2)
			l = size - at - 2;
		off[n] = at + 2;
		len[n++] = l;
		at += 2 + l;
	}
	if (n == 0)
		return LLVMFuzzerMutate(data, size, max_size);
	uint8_t *out = malloc(max_size + 2);
	uint8_t *mut = malloc(max_size + 2);
	if (!out || !mut) {
		free(out);
		free(mut);
		return LLVMFuzzerMutate(data, size, max_size);
	}
	size_t pick = (size_t)(rng_next(&rng) % n), used = 0, mlen = 0;
	unsigned action = (unsigned)(rng_next(&rng) % 8); /* 0: duplicate, 1: drop, else mutate */
	if (action >= 2) {
		mlen = mutate_payload(data + off[pick], len[pick], mut, max_size, &rng);
		if (mlen == 0)
			action = 0;
	}
	for (size_t i = 0; i < n; i++) {
		const uint8_t *src = data + off[i];
		size_t l = len[i];
		if (i == pick && action == 1 && n > 1)
			continue;
		if (i == pick && action >= 2) {
			src = mut;
			l = mlen;
		}
		for (int copies = (i == pick && action == 0) ? 2 : 1; copies > 0; copies--) {
			if (used + 2 + l > max_size)
				break;
			out[used++] = (uint8_t)(l & 0xff);
			out[used++] = (uint8_t)(l >> 8);
			memcpy(out + used, src, l);
			used += l;
		}
	}
	size_t result;
	if (used == 0) {
		result = LLVMFuzzerMutate(data, size, max_size);
	} else {
		memcpy(data, out, used);
		result = used;
	}
	free(out);
	free(mut);
	return result;
}

/* libFuzzer: sets the service up once (backend, registry with small limits, base tiles). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ta_log_set_level(TA_LOG_ERR);
	ta_error err = {0};
	backend = ta_cpu_backend_new(2, &err);
	if (!backend)
		fail("cannot start the CPU backend", err.msg);
	registry = ta_registry_new(backend, FUZZ_MAX_TILE_BYTES, FUZZ_MAX_TOTAL_BYTES, &err);
	if (!registry)
		fail("cannot create the registry", err.msg);
	ta_service_init(&service, backend, registry, FUZZ_MAX_FRAME);
	service.recheck_plans = true; /* every plan meets the backend's full ta_plan_check */
	create_base_tiles();
	uint32_t tiles = 0;
	ta_registry_stats(registry, &tiles, &base_bytes);
	cc_init(&diff, backend);
	return 0;
}

/* libFuzzer: runs the payloads of one input in order, then restores the base state. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *payloads[FUZZ_MAX_REQUESTS];
	size_t lens[FUZZ_MAX_REQUESTS];
	size_t count = 0;
	for (int i = 0; i < FUZZ_MAX_REQUESTS && size >= 2; i++) {
		size_t n = (size_t)data[0] | ((size_t)data[1] << 8);
		data += 2;
		size -= 2;
		if (n > size)
			n = size;
		run_one(data, n, i % 2 == 1);
		payloads[count] = data;
		lens[count++] = n;
		data += n;
		size -= n;
	}
	for (size_t i = 0; i < count; i++)
		cc_run_payload(&diff, payloads[i], lens[i]);
	cc_reset(&diff);
	cc_run_batch(&diff, payloads, lens, count);
	cc_reset(&diff);
	reset_tiles();
	uint32_t tiles = 0;
	uint64_t bytes = 0;
	ta_registry_stats(registry, &tiles, &bytes);
	if (tiles != N_BASE || bytes != base_bytes)
		fail("the registry does not hold exactly the base tiles after a reset", NULL);
	return 0;
}
