/* check_codec.c: the daemon's one data-plane codec (daemon/codec.c) against protobuf-c.
 * Every seed of the fuzz corpus (tests/fuzz_seeds.c, included here: the requests the suites
 * send) and thousands of random requests (ping, element-wise, scatter, indexed), each also
 * mutated with the fuzz dictionary's tokens (tests/fuzz_dispatch.dict) and byte edits, are
 * decoded both ways and must give the same request (tests/codec_check.h), and run through a
 * service and one that re-checks every plan, one by one and as pipelined runs against one by
 * one: the reply bytes and every tile afterwards must be identical. A connection's repeated
 * requests (daemon/codec.c) must answer as the same requests without the kept plan.
 * Random responses must encode to the bytes protobuf_c_message_pack gives. One request is
 * also checked field by field and end to end with exact values. TA_UNDER_VALGRIND=1
 * shrinks the counts. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TA_FUZZ_SEEDS_NO_MAIN
#include "fuzz_seeds.c"

#include "codec_check.h"
#include "log.h"

/* Next value of a xorshift64 generator. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* A value below n. */
static uint64_t below(uint64_t *s, uint64_t n)
{
	return rnd(s) % n;
}

/* How many times the random tests run (fewer under valgrind). */
static int scale(int n)
{
	const char *vg = getenv("TA_UNDER_VALGRIND");
	return vg && *vg == '1' ? n / 20 : n;
}

/* The backend and the two services every test uses. */
static ta_backend *backend;
static cc_world world;

static void setup(void)
{
	ta_log_set_level(TA_LOG_ERR);
	ta_error err = {0};
	backend = ta_cpu_backend_new(2, &err);
	ck_assert_msg(backend != NULL, "%s", err.msg);
	cc_init(&world, backend);
}

static void teardown(void)
{
	cc_free(&world);
	ta_backend_destroy(backend);
}

/* ---- the fuzz dictionary ------------------------------------------------------------- */

/* Tokens of tests/fuzz_dispatch.dict. */
#define MAX_TOKENS 128
static uint8_t tokens[MAX_TOKENS][64];
static size_t token_len[MAX_TOKENS];
static size_t n_tokens;

/* Reads the dictionary (lines "..." or name="..." with \xHH, \\ and \" escapes). */
static void load_dict(void)
{
	n_tokens = 0;
	FILE *f = fopen(TA_SRCDIR "/tests/fuzz_dispatch.dict", "r");
	ck_assert_msg(f != NULL, "cannot open the fuzz dictionary");
	char line[512];
	while (fgets(line, sizeof(line), f) && n_tokens < MAX_TOKENS) {
		char *q = strchr(line, '"');
		if (line[0] == '#' || !q)
			continue;
		size_t n = 0;
		for (char *p = q + 1; *p && *p != '"' && n < sizeof(tokens[0]); p++) {
			if (*p == '\\' && p[1] == 'x') {
				unsigned v = 0;
				ck_assert_int_eq(sscanf(p + 2, "%2x", &v), 1);
				tokens[n_tokens][n++] = (uint8_t)v;
				p += 3;
			} else if (*p == '\\' && p[1]) {
				tokens[n_tokens][n++] = (uint8_t)p[1];
				p++;
			} else {
				tokens[n_tokens][n++] = (uint8_t)*p;
			}
		}
		token_len[n_tokens++] = n;
	}
	fclose(f);
	ck_assert_uint_gt(n_tokens, 20);
}

/* ---- random hot requests ------------------------------------------------------------- */

/* Storage for one generated request's nested messages. */
typedef struct gen {
	Tileatom__Request req;
	Tileatom__ElementwiseAtomicRequest e;
	Tileatom__ScatterAtomicRequest sc;
	Tileatom__IndexedAtomicRequest x;
	Tileatom__PingRequest ping;
	Tileatom__Region region;
	int64_t origin[4], rshape[4];
	Tileatom__ScatterAddr sa;
	Tileatom__IndexedAddr ia;
	Tileatom__Array idx[5];
	Tileatom__Array *idxp[5];
	int64_t idx_shape[5][2];
	uint8_t idx_data[5][64];
	Tileatom__Array values, compare, mask;
	int64_t vshape[3], cshape[3], mshape[3];
	uint8_t vdata[256], cdata[256], mdata[64];
	Tileatom__Options options;
	char name[4];
} gen;

/* Bytes of one element of wire dtype d (0: unknown). */
static size_t dsize(int d)
{
	return ta_dtype_size((ta_dtype)d);
}

/* Fills an Array of a random (mostly matching) dtype, small shape and data. */
static Tileatom__Array *gen_array(uint64_t *s, Tileatom__Array *a, int64_t *shape, uint8_t *data,
                                  size_t cap, int dtype)
{
	tileatom__array__init(a);
	a->dtype = (Tileatom__DType)(below(s, 8) == 0 ? (int)below(s, 11) : dtype);
	size_t rank = (size_t)below(s, 3), n = 1;
	for (size_t i = 0; i < rank; i++) {
		shape[i] = 1 + (int64_t)below(s, 3);
		if (below(s, 30) == 0)
			shape[i] = -1 - (int64_t)below(s, 2);
		n *= shape[i] > 0 ? (size_t)shape[i] : 1;
	}
	a->n_shape = rank;
	a->shape = rank ? shape : NULL;
	size_t es = dsize(a->dtype) ? dsize(a->dtype) : 4;
	size_t nb = n * es;
	if (below(s, 20) == 0)
		nb = (size_t)below(s, 9);
	if (nb > cap)
		nb = cap;
	for (size_t i = 0; i < nb; i++)
		data[i] = (uint8_t)(i % es == 0 ? below(s, 5) : (below(s, 8) == 0 ? 0xff : 0));
	a->data.len = nb;
	a->data.data = nb ? data : NULL;
	return a;
}

/* Fills an index Array for an axis of extent ext (INT32 or INT64, k entries). */
static Tileatom__Array *gen_index(uint64_t *s, Tileatom__Array *a, int64_t *shape, uint8_t *data,
                                  size_t k, int64_t ext)
{
	tileatom__array__init(a);
	bool i64 = below(s, 2);
	a->dtype = i64 ? TILEATOM__DTYPE__INT64 : TILEATOM__DTYPE__INT32;
	shape[0] = (int64_t)k;
	a->n_shape = below(s, 10) == 0 ? 0 : 1;
	a->shape = a->n_shape ? shape : NULL;
	size_t es = i64 ? 8 : 4;
	for (size_t i = 0; i < k; i++) {
		int64_t v = (int64_t)below(s, (uint64_t)ext + 2) - (below(s, 10) == 0 ? 1 : 0);
		memcpy(data + i * es, &v, es); /* little-endian */
	}
	a->data.len = k * es;
	a->data.data = data;
	return a;
}

/* Builds a random hot-shape request in g. */
static void gen_request(uint64_t *s, gen *g)
{
	memset(g, 0, sizeof(*g));
	tileatom__request__init(&g->req);
	static const uint64_t ids[] = {0, 1, 127, 128, 300, UINT32_MAX, UINT64_MAX};
	g->req.id = below(s, 4) == 0 ? ids[below(s, 7)] : 1 + below(s, 100000);
	unsigned kind = (unsigned)below(s, 20);
	if (kind < 2) {
		tileatom__ping_request__init(&g->ping);
		g->req.body_case = TILEATOM__REQUEST__BODY_PING;
		g->req.ping = &g->ping;
		return;
	}
	size_t t = (size_t)below(s, CC_NTILES);
	const cc_tile *tile = &cc_tiles[t];
	snprintf(g->name, sizeof(g->name), "%s", below(s, 25) == 0 ? "n" : tile->name);
	if (below(s, 40) == 0)
		g->name[0] = '\0';
	int dt = (int)tile->dtype;
	Tileatom__Op op = (Tileatom__Op)(below(s, 12) == 0 ? below(s, 11) : 1 + below(s, 9));
	Tileatom__Region *region = NULL;
	if (below(s, 4) == 0) {
		tileatom__region__init(&g->region);
		size_t rank = (size_t)below(s, (uint64_t)tile->rank + 1);
		for (size_t i = 0; i < rank; i++) {
			g->origin[i] = (int64_t)below(s, (uint64_t)tile->shape[i] + 1);
			g->rshape[i] = (int64_t)below(s, 3);
		}
		g->region.n_origin = below(s, 3) ? rank : 0;
		g->region.origin = g->region.n_origin ? g->origin : NULL;
		g->region.n_shape = below(s, 3) ? rank : 0;
		g->region.shape = g->region.n_shape ? g->rshape : NULL;
		region = &g->region;
	}
	Tileatom__Array *values =
	    below(s, 15) ? gen_array(s, &g->values, g->vshape, g->vdata, sizeof(g->vdata), dt)
	                 : NULL;
	Tileatom__Array *compare =
	    op == TILEATOM__OP__CAS || below(s, 20) == 0
	        ? gen_array(s, &g->compare, g->cshape, g->cdata, sizeof(g->cdata), dt)
	        : NULL;
	Tileatom__Options *o = NULL;
	if (below(s, 2)) {
		tileatom__options__init(&g->options);
		g->options.sem = (Tileatom__Sem)(below(s, 4) ? 0 : below(s, 5));
		g->options.scope = (Tileatom__Scope)(below(s, 4) ? 0 : below(s, 5));
		g->options.space = (Tileatom__Space)(below(s, 6) ? 0 : below(s, 3));
		g->options.no_bounds_check = below(s, 8) == 0;
		g->options.want_old = below(s, 4) != 0;
		if (below(s, 8) == 0) {
			g->options.mask = gen_array(s, &g->mask, g->mshape, g->mdata,
			                            sizeof(g->mdata), TILEATOM__DTYPE__BOOL);
		}
		o = &g->options;
	}
	size_t k = 1 + (size_t)below(s, 4);
	if (kind < 8) {
		tileatom__elementwise_atomic_request__init(&g->e);
		g->e.tile = g->name;
		g->e.op = op;
		g->e.region = region;
		g->e.values = values;
		g->e.compare = compare;
		g->e.options = o;
		g->req.body_case = TILEATOM__REQUEST__BODY_ELEMENTWISE;
		g->req.elementwise = &g->e;
	} else if (kind < 12) {
		tileatom__scatter_addr__init(&g->sa);
		g->sa.dim = (uint32_t)below(s, (uint64_t)tile->rank + 1);
		if (below(s, 10))
			g->sa.indices = gen_index(
			    s, &g->idx[0], g->idx_shape[0], g->idx_data[0], k,
			    tile->shape[g->sa.dim < (uint32_t)tile->rank ? g->sa.dim : 0]);
		tileatom__scatter_atomic_request__init(&g->sc);
		g->sc.tile = g->name;
		g->sc.op = op;
		g->sc.region = region;
		g->sc.addr = below(s, 20) ? &g->sa : NULL;
		g->sc.values = values;
		g->sc.options = o;
		g->req.body_case = TILEATOM__REQUEST__BODY_SCATTER;
		g->req.scatter = &g->sc;
	} else {
		tileatom__indexed_addr__init(&g->ia);
		bool flat = below(s, 3) == 0;
		size_t n = flat ? 1 : (size_t)tile->rank;
		if (below(s, 15) == 0)
			n = (size_t)below(s, 6);
		int64_t total = 1;
		for (int i = 0; i < tile->rank; i++)
			total *= tile->shape[i];
		for (size_t i = 0; i < n; i++) {
			int64_t ext = flat ? total : tile->shape[i < (size_t)tile->rank ? i : 0];
			g->idxp[i] =
			    gen_index(s, &g->idx[i], g->idx_shape[i], g->idx_data[i], k, ext);
		}
		g->ia.n_indices = n;
		g->ia.indices = n ? g->idxp : NULL;
		g->ia.flat = flat;
		tileatom__indexed_atomic_request__init(&g->x);
		g->x.tile = g->name;
		g->x.op = op;
		g->x.region = region;
		g->x.addr = below(s, 20) ? &g->ia : NULL;
		g->x.values = values;
		g->x.compare = compare;
		g->x.options = o;
		g->req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
		g->req.indexed = &g->x;
	}
}

/* Encodes a random hot request into buf (cap bytes); returns its length. */
static size_t gen_payload(uint64_t *s, uint8_t *buf, size_t cap)
{
	static gen g;
	gen_request(s, &g);
	size_t n = protobuf_c_message_get_packed_size(&g.req.base);
	ck_assert_uint_le(n, cap);
	ck_assert_uint_eq(protobuf_c_message_pack(&g.req.base, buf), n);
	return n;
}

/* Applies 1 to 3 random edits to the n bytes at buf (cap bytes); returns the new length. */
static size_t mutate(uint64_t *s, uint8_t *buf, size_t n, size_t cap)
{
	int rounds = 1 + (int)below(s, 3);
	for (int r = 0; r < rounds; r++) {
		size_t at = n ? (size_t)below(s, n + 1) : 0;
		switch (below(s, 9)) {
		case 0: /* flip a bit */
			if (n)
				buf[at % n] ^= (uint8_t)(1u << below(s, 8));
			break;
		case 1: { /* an edge byte */
			static const uint8_t edge[] = {0x00, 0x01, 0x7f, 0x80,
			                               0xff, 0x08, 0x12, 0x1a};
			if (n)
				buf[at % n] = edge[below(s, sizeof(edge))];
			break;
		}
		case 2:   /* insert a dictionary token */
		case 3: { /* overwrite with one */
			size_t t = (size_t)below(s, n_tokens), len = token_len[t];
			if (n + len > cap)
				break;
			if (below(s, 2)) {
				memmove(buf + at + len, buf + at, n - at);
				n += len;
			} else if (at + len > n) {
				n = at + len;
			}
			memcpy(buf + at, tokens[t], len);
			break;
		}
		case 4: /* truncate */
			n = at;
			break;
		case 5: { /* delete a range */
			size_t len = (size_t)below(s, 8);
			if (at + len <= n) {
				memmove(buf + at, buf + at + len, n - at - len);
				n -= len;
			}
			break;
		}
		case 6: { /* duplicate a range */
			size_t len = (size_t)below(s, 12);
			if (at + len <= n && n + len <= cap) {
				memmove(buf + at + len, buf + at, n - at);
				n += len;
			}
			break;
		}
		case 7: { /* append a field: unknown number, a known one again, a wrong wire type */
			static const uint8_t fields[][4] = {
			    {2, 0x08, 0x05},       /* id again */
			    {3, 0xf8, 0x07, 0x01}, /* field 127, varint */
			    {2, 0x1a, 0x00},       /* ping, a second body */
			    {2, 0x62, 0x00},       /* an empty indexed body */
			    {2, 0x10, 0x01},       /* hello as a varint */
			    {3, 0x3a, 0x01, 0x00}, /* describe holding one byte */
			};
			const uint8_t *f = fields[below(s, sizeof(fields) / sizeof(fields[0]))];
			if (n + f[0] <= cap) {
				memcpy(buf + n, f + 1, f[0]);
				n += f[0];
			}
			break;
		}
		default: /* a random byte */
			if (n)
				buf[at % n] = (uint8_t)rnd(s);
			break;
		}
	}
	return n;
}

/* ---- tests --------------------------------------------------------------------------- */

/* One indexed add, decoded field by field, then run end to end with exact values. */
START_TEST(test_exact_values)
{
	int64_t idx = 7, one = 5;
	int64_t shape1[1] = {1};
	Tileatom__Array ia = TILEATOM__ARRAY__INIT, va = TILEATOM__ARRAY__INIT;
	ia.dtype = TILEATOM__DTYPE__INT64;
	ia.n_shape = 1;
	ia.shape = shape1;
	ia.data.len = 8;
	ia.data.data = (uint8_t *)&idx;
	va.dtype = TILEATOM__DTYPE__INT64;
	va.data.len = 8;
	va.data.data = (uint8_t *)&one;
	Tileatom__Array *ip[1] = {&ia};
	Tileatom__IndexedAddr addr = TILEATOM__INDEXED_ADDR__INIT;
	addr.n_indices = 1;
	addr.indices = ip;
	Tileatom__Options o = TILEATOM__OPTIONS__INIT;
	o.want_old = true;
	Tileatom__IndexedAtomicRequest x = TILEATOM__INDEXED_ATOMIC_REQUEST__INIT;
	x.tile = "f";
	x.op = TILEATOM__OP__ADD;
	x.addr = &addr;
	x.values = &va;
	x.options = &o;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 42;
	req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
	req.indexed = &x;
	uint8_t buf[256];
	size_t n = protobuf_c_message_pack(&req.base, buf);

	ta_arena arena;
	ta_arena_init(&arena, 4096);
	ta_wire_request w;
	ck_assert_int_eq(ta_codec_decode(&arena, buf, n, &w), TA_WIRE_DATA);
	ck_assert(!w.problem);
	ck_assert_uint_eq(w.id, 42);
	ck_assert_int_eq(w.kind, TA_REQ_INDEXED);
	ck_assert_str_eq(w.tile, "f");
	ck_assert_int_eq(w.op, TILEATOM__OP__ADD);
	ck_assert_uint_eq(w.region.n_origin + w.region.n_shape, 0);
	ck_assert_int_eq(w.form, TA_FORM_INDEXED);
	ck_assert_uint_eq(w.n_indices, 1);
	ck_assert(!w.flat);
	ck_assert_int_eq(w.index[0].dtype, TILEATOM__DTYPE__INT64);
	ck_assert_uint_eq(w.index[0].n_shape, 1);
	ck_assert_int_eq(w.index[0].shape[0], 1);
	ck_assert_uint_eq(w.index[0].len, 8);
	ck_assert_int_eq(memcmp(w.index[0].data, &idx, 8), 0);
	ck_assert(!w.index[0].shared.present);
	ck_assert(w.values.present);
	ck_assert_uint_eq(w.values.n_shape, 0);
	ck_assert_int_eq(memcmp(w.values.data, &one, 8), 0);
	ck_assert(!w.compare.present);
	ck_assert(w.has_options);
	ck_assert(w.want_old);
	ck_assert_int_eq(w.sem, 0);
	ck_assert(!w.old_into.present);
	ck_assert(!w.refs);
	/* a scalar field again keeps its last value; an unknown field is skipped; a message
	 * field again is a problem; bytes cut short do not decode */
	uint8_t bad[300];
	memcpy(bad, buf, n);
	bad[n] = 0x08; /* id again */
	bad[n + 1] = 0x01;
	ck_assert_int_eq(ta_codec_decode(&arena, bad, n + 2, &w), TA_WIRE_DATA);
	ck_assert_uint_eq(w.id, 1);
	ck_assert(!w.problem);
	bad[n] = 0xf8; /* field 31, varint 5: unknown */
	bad[n + 1] = 0x01;
	bad[n + 2] = 0x05;
	ck_assert_int_eq(ta_codec_decode(&arena, bad, n + 3, &w), TA_WIRE_DATA);
	ck_assert_uint_eq(w.id, 42);
	ck_assert(!w.problem);
	memcpy(bad + n, buf + 2, n - 2); /* the body again */
	ck_assert_int_eq(ta_codec_decode(&arena, bad, n + n - 2, &w), TA_WIRE_DATA);
	ck_assert(w.problem);
	ck_assert_str_eq(w.problem_msg, "the Request carries more than one body (not supported)");
	ck_assert_int_eq(ta_codec_decode(&arena, buf, n - 1, &w), TA_WIRE_MALFORMED);
	for (size_t k = 0; k < n + 2; k++)
		cc_decode_check(bad, k);
	/* a gather whose Addressing comes twice: protobuf-c (1.4.1) merges a form into an
	 * empty one or an empty one into a form, but refuses two empty ones (found by the
	 * fuzz target); the codec answers as it does */
	static const uint8_t addr_empty_twice[] = {0x08, 0x10, 0x6a, 0x07, 0x0a, 0x01,
	                                           0x63, 0x1a, 0x00, 0x1a, 0x00};
	static const uint8_t addr_region_then_empty[] = {0x08, 0x10, 0x6a, 0x09, 0x0a, 0x01, 0x63,
	                                                 0x1a, 0x02, 0x0a, 0x00, 0x1a, 0x00};
	static const uint8_t addr_empty_then_region[] = {0x08, 0x10, 0x6a, 0x09, 0x0a, 0x01, 0x63,
	                                                 0x1a, 0x00, 0x1a, 0x02, 0x0a, 0x00};
	ck_assert_ptr_null(
	    tileatom__request__unpack(NULL, sizeof(addr_empty_twice), addr_empty_twice));
	ck_assert_int_eq(ta_codec_decode(&arena, addr_empty_twice, sizeof(addr_empty_twice), &w),
	                 TA_WIRE_MALFORMED);
	ck_assert_int_eq(
	    ta_codec_decode(&arena, addr_region_then_empty, sizeof(addr_region_then_empty), &w),
	    TA_WIRE_DATA);
	ck_assert_str_eq(w.problem_msg, "gather.addr is given more than once (not supported)");
	ck_assert_int_eq(
	    ta_codec_decode(&arena, addr_empty_then_region, sizeof(addr_empty_then_region), &w),
	    TA_WIRE_DATA);
	ck_assert(w.problem);
	/* empty packed runs (a window's origin and shape sent as zero-length packed fields):
	 * no elements, as protobuf-c reads them (found by the fuzz target) */
	static const uint8_t empty_packed[] = {0x08, 0x10, 0x6a, 0x09, 0x0a, 0x01, 0x63,
	                                       0x12, 0x04, 0x0a, 0x00, 0x12, 0x00};
	Tileatom__Request *pb = tileatom__request__unpack(NULL, sizeof(empty_packed), empty_packed);
	ck_assert_ptr_nonnull(pb);
	tileatom__request__free_unpacked(pb, NULL);
	ck_assert_int_eq(ta_codec_decode(&arena, empty_packed, sizeof(empty_packed), &w),
	                 TA_WIRE_DATA);
	ck_assert(!w.problem);
	ck_assert_uint_eq(w.region.n_origin, 0);
	ck_assert_uint_eq(w.region.n_shape, 0);
	cc_decode_check(empty_packed, sizeof(empty_packed));
	cc_decode_check(addr_empty_twice, sizeof(addr_empty_twice));
	cc_decode_check(addr_region_then_empty, sizeof(addr_region_then_empty));
	cc_decode_check(addr_empty_then_region, sizeof(addr_empty_then_region));
	ta_arena_free(&arena);

	/* end to end, both paths: tile f element 7 starts as the fill pattern */
	ta_tile *t = NULL;
	ta_error err = {0};
	ck_assert_int_eq(ta_registry_get(world.reg[0], "f", &t, &err), TA_OK);
	int64_t before;
	memcpy(&before, (uint8_t *)t->mem + 7 * 8, 8);
	ta_tile_unref(t);
	cc_run_payload(&world, buf, n);
	ta_reply r;
	ta_dispatch_frame(&world.svc[0], buf, n, &r);
	Tileatom__Response *resp =
	    tileatom__response__unpack(NULL, r.len - TA_FRAME_HEADER, r.frame + TA_FRAME_HEADER);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 42);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_OP);
	ck_assert_uint_eq(resp->op->applied, 1);
	int64_t old;
	ck_assert_uint_eq(resp->op->old->data.len, 8);
	memcpy(&old, resp->op->old->data.data, 8);
	ck_assert_int_eq(old, before + 5); /* the first run (cc_run_payload) added 5 */
	tileatom__response__free_unpacked(resp, NULL);
	free(r.frame);
	ck_assert_int_eq(ta_registry_get(world.reg[0], "f", &t, &err), TA_OK);
	int64_t after;
	memcpy(&after, (uint8_t *)t->mem + 7 * 8, 8);
	ta_tile_unref(t);
	ck_assert_int_eq(after, before + 10);
}
END_TEST

/* Seeds of the fuzz corpus, collected by seed_sink. */
#define MAX_SEEDS 256
static uint8_t *seed_bufs[MAX_SEEDS];
static size_t seed_lens[MAX_SEEDS];
static size_t n_seeds;

/* seed_sink of fuzz_seeds.c: keeps a copy of each seed. */
static void keep_seed(const uint8_t *buf, size_t len, const char *name)
{
	(void)name;
	ck_assert_uint_lt(n_seeds, MAX_SEEDS);
	seed_bufs[n_seeds] = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(seed_bufs[n_seeds]);
	memcpy(seed_bufs[n_seeds], buf, len);
	seed_lens[n_seeds++] = len;
}

/* Splits a fuzz input into payloads as tests/fuzz_dispatch.c does (2-byte lengths). */
static size_t split_input(const uint8_t *data, size_t size, const uint8_t **p, size_t *l,
                          size_t max)
{
	size_t n = 0, at = 0;
	while (n < max && size - at >= 2) {
		size_t len = (size_t)data[at] | ((size_t)data[at + 1] << 8);
		if (len > size - at - 2)
			len = size - at - 2;
		p[n] = data + at + 2;
		l[n++] = len;
		at += 2 + len;
	}
	return n;
}

/* Every seed of the fuzz corpus, payload by payload and as one pipelined run, and mutated. */
START_TEST(test_fuzz_seeds)
{
	n_seeds = 0;
	out_dir = "(none: seed_sink)";
	seed_sink = keep_seed;
	write_seeds();
	seed_sink = NULL;
	ck_assert_uint_gt(n_seeds, 10);
	uint64_t payloads = 0;
	for (size_t i = 0; i < n_seeds; i++) {
		const uint8_t *p[64];
		size_t l[64];
		size_t n = split_input(seed_bufs[i], seed_lens[i], p, l, 64);
		for (size_t k = 0; k < n; k++)
			cc_run_payload(&world, p[k], l[k]);
		payloads += n;
		cc_reset(&world);
		cc_run_batch(&world, p, l, n);
		cc_reset(&world);
	}
	/* each payload of each seed, mutated */
	uint64_t s = 0x5eed5eedULL;
	uint8_t buf[9000];
	int rounds = scale(200);
	for (size_t i = 0; i < n_seeds; i++) {
		const uint8_t *p[64];
		size_t l[64];
		size_t n = split_input(seed_bufs[i], seed_lens[i], p, l, 64);
		for (int r = 0; r < rounds; r++)
			for (size_t k = 0; k < n; k++) {
				if (l[k] > sizeof(buf) / 2)
					continue;
				memcpy(buf, p[k], l[k]);
				size_t m = mutate(&s, buf, l[k], sizeof(buf));
				cc_run_payload(&world, buf, m);
			}
		cc_reset(&world);
	}
	for (size_t i = 0; i < n_seeds; i++)
		free(seed_bufs[i]);
	printf("check_codec: %zu seeds, %" PRIu64 " payloads; %" PRIu64 " payloads compared, "
	       "%" PRIu64 " data-plane requests\n",
	       n_seeds, payloads, world.payloads, world.data_taken);
	ck_assert_uint_gt(world.data_taken, 50);
}
END_TEST

/* Random requests: every clean one but ping decodes as a data-plane request; each clean and
 * mutated one decodes as protobuf-c decodes it and gives the same answer and tiles in both
 * services. */
START_TEST(test_random_requests)
{
	uint64_t s = 0x9e3779b97f4a7c15ULL;
	uint8_t buf[4096];
	int clean = scale(4000), mutated = scale(30000);
	uint64_t clean_taken = 0;
	for (int i = 0; i < clean; i++) {
		size_t n = gen_payload(&s, buf, sizeof(buf));
		uint64_t before = world.data_taken;
		cc_run_payload(&world, buf, n);
		clean_taken += world.data_taken - before;
		if (i % 64 == 63)
			cc_reset(&world);
	}
	/* the generator sends ping one time in 8 or so: the rest are data-plane requests */
	ck_assert_uint_gt(clean_taken, (uint64_t)clean * 3 / 4);
	uint64_t mutated_taken = world.data_taken;
	for (int i = 0; i < mutated; i++) {
		size_t n = gen_payload(&s, buf, sizeof(buf) / 2);
		n = mutate(&s, buf, n, sizeof(buf));
		cc_run_payload(&world, buf, n);
		if (i % 64 == 63)
			cc_reset(&world);
	}
	mutated_taken = world.data_taken - mutated_taken;
	printf("check_codec: %d clean requests (%" PRIu64 " data-plane), %d mutated (%" PRIu64
	       " still data-plane requests)\n",
	       clean, clean_taken, mutated, mutated_taken);
	/* both kinds occur: mutations that still decode and ones that do not */
	ck_assert_uint_gt(mutated_taken, (uint64_t)mutated / 10);
	ck_assert_uint_lt(mutated_taken, (uint64_t)mutated);
}
END_TEST

/* Random pipelined runs of clean and mutated hot requests (grouped plans). */
START_TEST(test_random_batches)
{
	uint64_t s = 0x2545f4914f6cdd1dULL;
	static uint8_t bufs[16][2048];
	const uint8_t *p[16];
	size_t l[16];
	int runs = scale(1500);
	for (int r = 0; r < runs; r++) {
		size_t n = 1 + (size_t)below(&s, 16);
		for (size_t k = 0; k < n; k++) {
			l[k] = gen_payload(&s, bufs[k], sizeof(bufs[k]) / 2);
			if (below(&s, 6) == 0)
				l[k] = mutate(&s, bufs[k], l[k], sizeof(bufs[k]));
			p[k] = bufs[k];
		}
		cc_run_batch(&world, p, l, n);
		if (r % 32 == 31)
			cc_reset(&world);
	}
}
END_TEST

/* Makes a an operand of one element of its dtype, its bytes at data. */
static void make_scalar(Tileatom__Array *a, uint8_t *data)
{
	a->n_shape = 0;
	a->shape = NULL;
	size_t es = dsize(a->dtype);
	a->data.len = es ? es : 4;
	a->data.data = data;
}

/* gen_request, made a one-element request most of the time (scalar indices, values and
 * compare; masks mostly dropped): the requests a session keeps (daemon/codec.c). */
static void gen_one_element(uint64_t *s, gen *g)
{
	gen_request(s, g);
	if (g->req.body_case == TILEATOM__REQUEST__BODY_PING || below(s, 8) == 0)
		return;
	make_scalar(&g->values, g->vdata);
	make_scalar(&g->compare, g->cdata);
	for (int i = 0; i < 5; i++)
		make_scalar(&g->idx[i], g->idx_data[i]);
	if (g->options.mask && below(s, 4))
		g->options.mask = NULL;
}

/* ---- repeated requests (daemon/codec.c) ------------------------------------------------ */

/* Runs payload through both services: the first as a connection's request
 * (ta_dispatch_run_session on session: a request repeating the session's last one runs from
 * the kept plan), the second alone; the reply bytes and the tiles must be identical. */
static void run_on_session(ta_session *session, ta_dispatch_scratch *scratch,
                           const uint8_t *payload, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan sees an overread */
	ck_assert_ptr_nonnull(copy);
	if (len)
		memcpy(copy, payload, len);
	ta_frame_buf out = {NULL, 0, 0};
	bool close_after = false;
	ta_dispatch_outcome o = ta_dispatch_run_session(&world.svc[0], scratch, session, copy, len,
	                                                INT64_MAX, &out, &close_after);
	ck_assert_int_eq(o, TA_DISPATCH_DONE);
	ta_reply r;
	ta_dispatch_frame(&world.svc[1], copy, len, &r);
	free(copy);
	if (out.len != r.len || close_after != r.close_after ||
	    (out.len && memcmp(out.data, r.frame, out.len) != 0))
		cc_fail("a session's request and the same request alone answered differently",
		        payload, len);
	ta_frame_buf_free(&out);
	free(r.frame);
	cc_compare_tiles(&world, payload, len);
}

/* Replaces tile name in both services with one of another dtype and shape (a request kept
 * for the old tile must not run on it). */
static void recreate_other(const char *name)
{
	for (int i = 0; i < 2; i++) {
		ta_error err = {0};
		ck_assert_int_eq(ta_registry_remove(world.reg[i], name, NULL, &err), TA_OK);
		ta_tile_shape shape;
		memset(&shape, 0, sizeof(shape));
		shape.dtype = name[0] == 'f' ? TA_DTYPE_I32 : TA_DTYPE_I64;
		shape.rank = 1;
		shape.shape[0] = 3;
		ta_tile *tile = NULL;
		ck_assert_int_eq(ta_registry_create(world.reg[i], name, &shape, &tile, &err),
		                 TA_OK);
		memset(tile->mem, 0x5a, (size_t)tile->bytes);
		ta_registry_publish(tile);
		ta_tile_unref(tile);
	}
}

/* Random requests, each sent again several times on one session with other ids and other
 * index / values / compare bytes (out-of-range indices among them), sometimes edited
 * elsewhere, sometimes with its tile re-created in between: the session's answers and tiles
 * are those of the same requests alone, and many of the requests ran as repeats. */
START_TEST(test_repeated_requests)
{
	uint64_t s = 0x6a09e667f3bcc908ULL;
	static gen g;
	static uint8_t buf[4096];
	ta_session session;
	ta_error err = {0};
	ck_assert_int_eq(ta_session_init(&session, &world.svc[0], false, (ta_owner)1000, 1, &err),
	                 TA_OK);
	session.hello_done = true;
	ta_dispatch_scratch scratch;
	ta_dispatch_scratch_init(&scratch);
	static const uint64_t ids[] = {0, 1, 127, 128, 16383, 16384, UINT64_MAX};
	int bases = scale(4000);
	uint64_t sent = 0;
	for (int b = 0; b < bases; b++) {
		gen_one_element(&s, &g);
		int again = 1;
		for (int k = 0; k < again; k++) {
			g.req.id = below(&s, 3) == 0 ? ids[below(&s, 7)] : below(&s, 1u << 20);
			for (int i = 0; i < 5; i++)
				for (size_t j = 0; j < 16; j++)
					g.idx_data[i][j] =
					    (uint8_t)(below(&s, 4) ? below(&s, 40) : rnd(&s));
			for (size_t j = 0; j < 32; j++) {
				g.vdata[j] = (uint8_t)rnd(&s);
				g.cdata[j] = (uint8_t)(below(&s, 2) ? 0 : rnd(&s));
			}
			size_t n = protobuf_c_message_get_packed_size(&g.req.base);
			ck_assert_uint_le(n, sizeof(buf));
			ck_assert_uint_eq(protobuf_c_message_pack(&g.req.base, buf), n);
			if (below(&s, 10) == 0)
				n = mutate(&s, buf, n, sizeof(buf));
			if (below(&s, 40) == 0)
				recreate_other(below(&s, 2) ? "f" : "a");
			if (k == 0)
				ta_repeat_clear(&session.repeat); /* kept below: this request */
			run_on_session(&session, &scratch, buf, n);
			sent++;
			if (k == 0 && session.repeat.valid) /* kept: send it again */
				again = 4 + (int)below(&s, 16);
		}
		if (b % 64 == 63)
			cc_reset(&world);
	}
	printf("check_codec: %" PRIu64 " of %" PRIu64 " session requests ran as repeats\n",
	       session.repeat.hits, sent);
	ck_assert_uint_gt(session.repeat.hits, sent / 4);
	ta_dispatch_scratch_free(&scratch);
}
END_TEST

/* Random data-plane responses (errors, OpResponses, data bodies; values at the varint
 * edges) encode to protobuf-c's bytes, and over the frame limit the codec refuses as
 * ta_frame_append does. */
START_TEST(test_encoder)
{
	uint64_t s = 0xdeadbeefcafeULL;
	static const uint64_t edges[] = {0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX};
	static const int64_t sedges[] = {0, 1, -1, 127, 128, INT64_MIN, INT64_MAX, 4};
	static const char *const msgs[] = {"", "x", "tile 'f': index 40 is out of range", NULL};
	int n = scale(20000);
	for (int i = 0; i < n; i++) {
		int64_t shape[4];
		uint8_t data[300];
		ta_reply_msg m = {0};
		m.id = below(&s, 2) ? edges[below(&s, 8)] : rnd(&s) >> below(&s, 64);
		m.status = (int32_t)(below(&s, 2) ? 0 : below(&s, 10));
		m.message = msgs[below(&s, 4)];
		unsigned body = (unsigned)below(&s, 4);
		m.body = body == 0 ? TA_BODY_NONE : body == 1 ? TA_BODY_DATA : TA_BODY_OP;
		if (m.body == TA_BODY_OP) {
			m.skipped = below(&s, 2) ? 0 : edges[below(&s, 8)];
			m.applied = below(&s, 2) ? 1 : edges[below(&s, 8)];
		}
		m.has_old = m.body != TA_BODY_NONE && below(&s, 4) != 0;
		if (m.has_old) {
			m.dtype = (int32_t)below(&s, 10);
			m.rank = (size_t)below(&s, 5);
			for (size_t k = 0; k < m.rank; k++)
				shape[k] = sedges[below(&s, 8)];
			m.shape = shape;
			m.len = (size_t)below(&s, sizeof(data) + 1);
			for (size_t k = 0; k < m.len; k++)
				data[k] = (uint8_t)rnd(&s);
			m.data = data;
		}
		uint32_t max = below(&s, 10) == 0 ? (uint32_t)below(&s, 64) : CC_MAX_FRAME;
		cc_encode_check(&m, max);
	}
}
END_TEST

static Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *tc = tcase_create("conformance");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_unchecked_fixture(tc, load_dict, NULL);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_exact_values);
	tcase_add_test(tc, test_fuzz_seeds);
	tcase_add_test(tc, test_random_requests);
	tcase_add_test(tc, test_random_batches);
	tcase_add_test(tc, test_encoder);
	tcase_add_test(tc, test_repeated_requests);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(codec_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
