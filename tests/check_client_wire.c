/* check_client_wire.c: conformance of client/tac_wire.c to protobuf-c. Random data-plane
 * requests made by the library's own builders (every kind, op, dtype, addressing form,
 * option, mask, region and window, shared-buffer operands and old_into) must be written
 * byte for byte as protobuf_c_message_pack packs the same description, and unpack to it; a
 * call that matches a kept template must be written as the writer writes it. Random
 * data-plane responses packed by protobuf-c must decode to what tileatom__response__unpack
 * gives, and whatever the decoder takes of them mutated, protobuf-c takes the same way. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tac_internal.h"

/* The test's random numbers (xorshift64*, fixed seed: runs are reproducible). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}
/* A random number in 0..n-1. */
static uint64_t rn(uint64_t n)
{
	return rnd() % n;
}
/* A random int64 of a random size (small ones most often, negative ones too). */
static int64_t rnd_i64(void)
{
	switch (rn(5)) {
	case 0:
		return 0;
	case 1:
		return (int64_t)rn(128);
	case 2:
		return (int64_t)rn(1u << 20);
	case 3:
		return -(int64_t)rn(1000) - 1;
	default:
		return (int64_t)rnd();
	}
}

/* The public arguments of one random data-plane call and the memory they point to. */
typedef struct call {
	tileatom_request_kind kind;              /* the request (INDEXED also for atomic_at) */
	bool at;                                 /* atomic_at */
	char tile[TILEATOM_NAME_MAX + 1];        /* the tile */
	tileatom_op op;                          /* RMW kinds: the op */
	bool has_region, has_compare;            /* region (or window) given; compare given */
	tileatom_region region;                  /* region or window */
	tileatom_region addr_region;             /* memory ops: the addressing's region */
	tileatom_addr addr;                      /* memory ops: the addressing */
	int n_index;                             /* index arrays */
	bool flat;                               /* flat offsets */
	int dim;                                 /* scatter: the axis */
	tileatom_array index[TILEATOM_MAX_RANK]; /* index arrays */
	tileatom_array values, compare, mask;    /* operands */
	tileatom_op_options opts;                /* options */
	int64_t at_index;                        /* atomic_at: the index */
	uint8_t data[8][64];                     /* the arrays' bytes */
} call;

/* A random public array over buf: a dtype, rank 0..2, extents 1..3 (small data). */
static tileatom_array rand_array(uint8_t *buf, tileatom_dtype dtype)
{
	tileatom_array a = {dtype, (int)rn(3), {0}, buf};
	for (int i = 0; i < a.rank; i++)
		a.shape[i] = 1 + (int64_t)rn(3);
	for (int i = 0; i < 64; i++)
		buf[i] = (uint8_t)rnd();
	return a;
}

/* A random dtype (an unknown one at times: the builder rejects it). */
static tileatom_dtype rand_dtype(void)
{
	return (tileatom_dtype)(rn(50) ? 1 + rn(11) : 77);
}

/* A random region of rank 1..4 (origin >= 0, extents >= 1). */
static void rand_region(tileatom_region *r)
{
	r->rank = 1 + (int)rn(4);
	for (int i = 0; i < r->rank; i++) {
		r->origin[i] = rn(3) ? (int64_t)rn(8) : (int64_t)rn(1u << 30);
		r->shape[i] = 1 + (int64_t)(rn(3) ? rn(4) : rn(1u << 20));
	}
}

/* Fills c with a random call of a random data-plane kind (small: see small). */
static void rand_call(call *c, bool small)
{
	static const tileatom_request_kind kinds[] = {
	    TILEATOM_REQ_PING,        TILEATOM_REQ_READ,          TILEATOM_REQ_WRITE,
	    TILEATOM_REQ_ELEMENTWISE, TILEATOM_REQ_SCATTER,       TILEATOM_REQ_INDEXED,
	    TILEATOM_REQ_GATHER,      TILEATOM_REQ_SCATTER_STORE, TILEATOM_REQ_ATOMIC_LOAD,
	    TILEATOM_REQ_ATOMIC_STORE};
	memset(c, 0, sizeof(*c));
	c->kind = kinds[rn(sizeof(kinds) / sizeof(kinds[0]))];
	if (small) /* the template's kinds, over the whole tile, without a mask */
		c->kind = rn(2) ? TILEATOM_REQ_ELEMENTWISE : TILEATOM_REQ_INDEXED;
	c->at = c->kind == TILEATOM_REQ_INDEXED && rn(3) == 0;
	size_t len = 1 + rn(rn(4) ? 12 : TILEATOM_NAME_MAX);
	for (size_t i = 0; i < len; i++)
		c->tile[i] = (char)('a' + rn(26));
	c->op = (tileatom_op)(1 + rn(9));
	tileatom_dtype dt = rand_dtype();
	c->values = rand_array(c->data[0], dt);
	c->compare = rand_array(c->data[1], rn(8) ? dt : rand_dtype());
	c->has_compare = c->op == TILEATOM_OP_CAS ? rn(30) != 0 : rn(30) == 0;
	c->has_region = !small && rn(2);
	rand_region(&c->region);
	c->n_index = 1 + (int)rn(TILEATOM_MAX_RANK);
	c->flat = rn(2);
	if (c->flat || c->at)
		c->n_index = 1;
	c->dim = (int)rn(TILEATOM_MAX_RANK);
	for (int i = 0; i < TILEATOM_MAX_RANK; i++)
		c->index[i] = rand_array(c->data[2 + i], rn(2) ? TILEATOM_INT64 : TILEATOM_INT32);
	c->mask = rand_array(c->data[6], TILEATOM_BOOL);
	c->at_index = rnd_i64();
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	if (rn(2)) {
		o.sem = (tileatom_sem)rn(4);
		o.scope = (tileatom_scope)rn(4);
		o.space = (tileatom_space)rn(2);
	}
	o.want_old = rn(2);
	o.check_bounds = rn(2);
	o.mask = !small && rn(4) == 0 ? &c->mask : NULL;
	c->opts = o;
	rand_region(&c->addr_region);
	c->addr.kind = (tileatom_addr_kind)rn(4);
	c->addr.region = rn(2) ? &c->addr_region : NULL;
	c->addr.dim = c->dim;
	c->addr.n_index = c->addr.kind == TILEATOM_ADDR_SCATTER ? 1 : c->n_index;
	c->addr.index = c->index;
}

/* The options c's request travels with (atomic_at: want_old forced, as the call does). */
static tileatom_op_options call_opts(const call *c)
{
	return c->at ? tac_atomic_at_options(&c->opts) : c->opts;
}

/* Builds c into *m with the library's builder; the builder's verdict. */
static int build_call(tac_msg *m, call *c)
{
	tileatom_error err;
	const tileatom_region *region = c->has_region ? &c->region : NULL;
	const tileatom_array *compare = c->has_compare ? &c->compare : NULL;
	tileatom_array va, ca;
	switch (c->kind) {
	case TILEATOM_REQ_PING:
		return tac_build_empty(m, TILEATOM_REQ_PING);
	case TILEATOM_REQ_READ:
		return tac_build_read(m, c->tile, region, &err);
	case TILEATOM_REQ_WRITE:
		return tac_build_write(m, c->tile, region, &c->values, &err);
	case TILEATOM_REQ_ELEMENTWISE:
		return tac_build_atomic(m,
		                        &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
		                                         .tile = c->tile,
		                                         .op = c->op,
		                                         .region = region,
		                                         .values = &c->values,
		                                         .compare = compare,
		                                         .opts = &c->opts},
		                        &err);
	case TILEATOM_REQ_SCATTER:
		return tac_build_atomic(m,
		                        &(tac_split_req){.kind = TILEATOM_REQ_SCATTER,
		                                         .tile = c->tile,
		                                         .op = c->op,
		                                         .region = region,
		                                         .dim = c->dim,
		                                         .n_index = 1,
		                                         .indices = c->index,
		                                         .values = &c->values,
		                                         .opts = &c->opts},
		                        &err);
	case TILEATOM_REQ_INDEXED:
		if (c->at)
			return tac_build_atomic_at(m, c->tile, c->op, c->at_index, c->values.dtype,
			                           c->values.data, c->compare.data, &c->opts, &va,
			                           &ca, &err);
		return tac_build_atomic(m,
		                        &(tac_split_req){.kind = TILEATOM_REQ_INDEXED,
		                                         .tile = c->tile,
		                                         .op = c->op,
		                                         .region = region,
		                                         .n_index = c->n_index,
		                                         .indices = c->index,
		                                         .flat = c->flat,
		                                         .values = &c->values,
		                                         .compare = compare,
		                                         .opts = &c->opts},
		                        &err);
	default:
		return tac_build_memory(m, c->kind, c->tile, region, &c->addr,
		                        c->kind == TILEATOM_REQ_ATOMIC_LOAD ? NULL : &c->values,
		                        &c->opts, &err);
	}
}

/* Moves some of m's operand arrays into random shared-buffer references (as tac_shm.c
 * does: no data, a BufferRef) and sets old_into at times. */
static void rand_shared(tac_msg *m)
{
	Tileatom__Array *arrays[] = {&m->values,   &m->compare,  &m->mask,     &m->padding,
	                             &m->index[0], &m->index[1], &m->index[2], &m->index[3]};
	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
		Tileatom__Array *a = arrays[i];
		if (a->data.len == 0 || rn(4))
			continue;
		Tileatom__BufferRef *ref = &m->refs[i];
		tileatom__buffer_ref__init(ref);
		ref->buffer_id = rn(3) ? rn(100) : rnd();
		ref->offset = rn(2) ? rn(4096) : rnd();
		ref->length = a->data.len;
		a->data.len = 0;
		a->data.data = NULL;
		a->shared = ref;
	}
	if (m->kind != TILEATOM_REQ_PING && m->kind != TILEATOM_REQ_READ &&
	    m->kind != TILEATOM_REQ_WRITE && rn(4) == 0) {
		tileatom__buffer_ref__init(&m->old_ref);
		m->old_ref.buffer_id = rn(50);
		m->old_ref.offset = rnd_i64();
		m->old_ref.length = rn(100000);
		m->options.old_into = &m->old_ref;
	}
}

/* Writes m with the one writer into buf (cap bytes); returns its size. Fails unless the
 * bytes are protobuf_c_message_pack's for the same description and unpack to it. */
static size_t check_write(tac_msg *m, uint8_t *buf, size_t cap, tac_wire_marks *marks)
{
	static uint8_t ref[1 << 14];
	tac_wire_plan plan;
	size_t n = tac_wire_plan_request(m, &plan);
	ck_assert_uint_le(n, cap);
	ck_assert_uint_eq(n, tac_request_size(m));
	ck_assert_ptr_eq(tac_wire_write(m, &plan, buf, marks), buf + n);
	size_t want = protobuf_c_message_get_packed_size(&m->req.base);
	ck_assert_uint_eq(n, want);
	ck_assert_uint_le(want, sizeof(ref));
	ck_assert_uint_eq(protobuf_c_message_pack(&m->req.base, ref), want);
	ck_assert_mem_eq(buf, ref, n);
	Tileatom__Request *back = tileatom__request__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(back);
	ck_assert_uint_eq(back->id, m->req.id);
	ck_assert_int_eq(back->body_case, m->req.body_case);
	ck_assert_uint_eq(back->base.n_unknown_fields, 0);
	ck_assert_uint_eq(protobuf_c_message_get_packed_size(&back->base), n);
	ck_assert_uint_eq(protobuf_c_message_pack(&back->base, ref), n);
	ck_assert_mem_eq(buf, ref, n);
	tileatom__request__free_unpacked(back, NULL);
	return n;
}

START_TEST(test_write_random_requests)
{
	tac_msg *m = malloc(sizeof(*m));
	call *c = malloc(sizeof(*c));
	static uint8_t buf[1 << 14];
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(c);
	int written = 0, by_kind[TILEATOM_REQ_SNAPSHOT + 1] = {0}, shared = 0, masked = 0;
	for (int i = 0; i < 40000; i++) {
		rand_call(c, false);
		if (build_call(m, c) != TILEATOM_OK)
			continue; /* the builder's checks are check_client_codec's */
		ck_assert(tac_wire_takes(m->kind));
		if (rn(3) == 0)
			rand_shared(m);
		shared += m->values.shared != NULL || m->options.old_into != NULL;
		masked += m->options.mask != NULL;
		m->req.id = rn(4) == 0 ? 0 : (rn(2) ? rn(200) : rnd());
		check_write(m, buf, sizeof(buf), NULL);
		written++;
		by_kind[m->kind]++;
	}
	printf("check_client_wire: %d requests written; ping %d read %d write %d elementwise %d "
	       "scatter %d indexed %d gather %d scatter_store %d atomic_load %d atomic_store %d; "
	       "%d with shared operands or old_into, %d with a mask\n",
	       written, by_kind[3], by_kind[9], by_kind[8], by_kind[10], by_kind[11], by_kind[12],
	       by_kind[13], by_kind[14], by_kind[15], by_kind[16], shared, masked);
	fflush(stdout);
	for (int k = TILEATOM_REQ_WRITE; k <= TILEATOM_REQ_ATOMIC_STORE; k++)
		ck_assert_int_gt(by_kind[k], 300);
	ck_assert_int_gt(by_kind[TILEATOM_REQ_PING], 300);
	ck_assert_int_gt(shared, 1000);
	ck_assert_int_gt(masked, 300);
	/* the control plane is not the writer's */
	ck_assert(!tac_wire_takes(TILEATOM_REQ_HELLO));
	ck_assert(!tac_wire_takes(TILEATOM_REQ_CREATE));
	ck_assert(!tac_wire_takes(TILEATOM_REQ_REGISTER_BUFFER));
	free(m);
	free(c);
}
END_TEST

/* A copy of c with its arrays' data redrawn (the same key). */
static void redraw_data(call *c)
{
	for (int k = 0; k < 8; k++)
		for (int i = 0; i < 64; i++)
			c->data[k][i] = (uint8_t)rnd();
	c->at_index = rnd_i64();
}

/* Changes one part of c's key at random. */
static void mutate_key(call *c)
{
	switch (rn(8)) {
	case 0:
		c->op = (tileatom_op)(1 + rn(9));
		break;
	case 1:
		c->tile[rn(strlen(c->tile))] = (char)('a' + rn(26));
		break;
	case 2:
		c->values.dtype = rand_dtype();
		break;
	case 3:
		c->values.rank = (int)rn(3);
		c->values.shape[0] = 1 + (int64_t)rn(3);
		break;
	case 4:
		c->opts.sem = (tileatom_sem)rn(4);
		break;
	case 5:
		c->opts.want_old = rn(2);
		break;
	case 6:
		c->index[0].dtype = rn(2) ? TILEATOM_INT64 : TILEATOM_INT32;
		break;
	default:
		c->opts.check_bounds = rn(2);
		break;
	}
}

START_TEST(test_template_is_a_cache)
{
	tac_msg *m = malloc(sizeof(*m));
	call *c = malloc(sizeof(*c));
	tac_tpl *t = calloc(1, sizeof(*t));
	static uint8_t buf[1 << 14], hit[TAC_TPL_ROOM];
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_nonnull(t);
	int kept = 0, matched = 0, mutants_matched = 0;
	for (int i = 0; i < 20000; i++) {
		rand_call(c, true);
		if (build_call(m, c) != TILEATOM_OK)
			continue;
		m->req.id = rn(2) ? rn(200) : rnd();
		tac_wire_marks marks;
		size_t n = check_write(m, buf, sizeof(buf), &marks);
		t->valid = false;
		tac_tpl_keep(t, m, &marks, buf + n);
		kept += t->valid;
		if (!t->valid)
			continue;
		/* the same key with other data (and sometimes another key) and another id */
		bool mutated = rn(3) == 0;
		redraw_data(c);
		if (mutated)
			mutate_key(c);
		tileatom_op_options o = call_opts(c);
		int64_t idx = c->at_index;
		tileatom_array index = tileatom_scalar(TILEATOM_INT64, &idx);
		tileatom_array va = tileatom_scalar(c->values.dtype, c->values.data);
		tileatom_array ca = tileatom_scalar(c->values.dtype, c->compare.data);
		bool cas = c->op == TILEATOM_OP_CAS;
		bool match = c->at ? tac_tpl_match(t, TILEATOM_REQ_INDEXED, c->tile, c->op, NULL, 1,
		                                   &index, true, &va, cas ? &ca : NULL, &o)
		                   : tac_tpl_match(t, c->kind, c->tile, c->op, NULL, c->n_index,
		                                   c->index, c->flat, &c->values,
		                                   c->has_compare ? &c->compare : NULL, &o);
		if (!match) {
			ck_assert(mutated);
			continue;
		}
		uint64_t id = rn(4) == 0 ? 0 : (rn(2) ? rn(200) : rnd());
		size_t hn = c->at ? tac_tpl_write(t, id, &index, &va, cas ? &ca : NULL, hit)
		                  : tac_tpl_write(t, id, c->index, &c->values,
		                                  c->has_compare ? &c->compare : NULL, hit);
		/* what building and writing the call gives */
		ck_assert_int_eq(build_call(m, c), TILEATOM_OK);
		m->req.id = id;
		size_t wn = check_write(m, buf, sizeof(buf), NULL);
		ck_assert_uint_eq(hn, wn);
		ck_assert_mem_eq(hit, buf, wn);
		matched++;
		mutants_matched += mutated;
	}
	printf("check_client_wire: %d templates kept, %d calls matched (%d after a change that "
	       "left the key)\n",
	       kept, matched, mutants_matched);
	fflush(stdout);
	ck_assert_int_gt(kept, 5000);
	ck_assert_int_gt(matched, 4000);
	free(m);
	free(c);
	free(t);
}
END_TEST

/* Storage of one random response. */
typedef struct rand_resp {
	Tileatom__Response resp;
	Tileatom__OpResponse op;
	Tileatom__PingResponse ping;
	Tileatom__Array arr;
	Tileatom__TileInfo tile;
	int64_t shape[10];
	uint8_t data[80];
	char message[32];
} rand_resp;

/* Fills r with a random response; *data_plane: one of a data-plane request's (which the
 * decoder must take). */
static void rand_response(rand_resp *r, bool *data_plane)
{
	memset(r, 0, sizeof(*r));
	tileatom__response__init(&r->resp);
	r->resp.id = rn(3) == 0 ? 0 : (rn(2) ? rn(1000) : rnd());
	r->resp.status = (Tileatom__Status)(rn(3) ? 0 : rn(110));
	if (rn(4) == 0) {
		snprintf(r->message, sizeof(r->message), "tile %llu not found",
		         (unsigned long long)rn(100));
		r->resp.message = r->message;
	}
	tileatom__array__init(&r->arr);
	r->arr.dtype = (Tileatom__DType)rn(12);
	r->arr.n_shape = rn(10);
	for (size_t i = 0; i < r->arr.n_shape; i++)
		r->shape[i] = rnd_i64();
	r->arr.shape = r->arr.n_shape ? r->shape : NULL;
	r->arr.data.len = rn(8) ? rn(17) : rn(81);
	for (size_t i = 0; i < r->arr.data.len; i++)
		r->data[i] = (uint8_t)rnd();
	r->arr.data.data = r->arr.data.len ? r->data : NULL;
	switch (rn(8)) {
	case 0:
		break;
	case 1:
		tileatom__ping_response__init(&r->ping);
		r->resp.body_case = TILEATOM__RESPONSE__BODY_PING;
		r->resp.ping = &r->ping;
		break;
	case 2:
		tileatom__tile_info__init(&r->tile);
		r->tile.name = (char *)"x";
		r->resp.body_case = TILEATOM__RESPONSE__BODY_TILE;
		r->resp.tile = &r->tile;
		break;
	case 3:
		r->resp.body_case = TILEATOM__RESPONSE__BODY_DATA;
		r->resp.data = &r->arr;
		break;
	default:
		tileatom__op_response__init(&r->op);
		r->op.skipped = rn(2) ? rn(4) : rnd();
		r->op.applied = rn(2) ? rn(4) : rnd();
		if (rn(4))
			r->op.old = &r->arr;
		r->resp.body_case = TILEATOM__RESPONSE__BODY_OP;
		r->resp.op = &r->op;
		break;
	}
	bool array = r->resp.body_case == TILEATOM__RESPONSE__BODY_DATA ||
	             (r->resp.body_case == TILEATOM__RESPONSE__BODY_OP && r->op.old);
	*data_plane = r->resp.body_case != TILEATOM__RESPONSE__BODY_TILE &&
	              (!array || r->arr.n_shape <= TAC_WIRE_MAX_SHAPE);
}

/* Fails unless arrays x and y hold the same fields. */
static void same_array(const Tileatom__Array *x, const Tileatom__Array *y)
{
	ck_assert_int_eq(x->dtype, y->dtype);
	ck_assert_uint_eq(x->n_shape, y->n_shape);
	ck_assert_int_eq(x->shape == NULL, y->shape == NULL);
	if (x->n_shape)
		ck_assert_mem_eq(x->shape, y->shape, x->n_shape * sizeof(int64_t));
	ck_assert_uint_eq(x->data.len, y->data.len);
	ck_assert_int_eq(x->data.data == NULL, y->data.data == NULL);
	if (x->data.len)
		ck_assert_mem_eq(x->data.data, y->data.data, x->data.len);
	ck_assert_ptr_null(x->shared);
	ck_assert_ptr_null(y->shared);
}

/* Decodes len bytes at p with the one decoder and protobuf-c; fails when the decoder takes
 * what protobuf-c rejects or gives other fields. Returns whether the decoder took it. */
static bool check_decode(tac_wire_response *w, const uint8_t *p, size_t len)
{
	Tileatom__Response *got = tac_wire_decode_response(w, p, len);
	Tileatom__Response *want = tileatom__response__unpack(NULL, len, p);
	if (!got) {
		if (want)
			tileatom__response__free_unpacked(want, NULL);
		return false;
	}
	if (!want) /* the bytes, for the failure's report */
		for (size_t i = 0; i < len; i++)
			fprintf(stderr, "%02x%s", p[i], i + 1 < len ? " " : "\n");
	ck_assert_msg(want != NULL, "the decoder took %zu bytes protobuf-c rejects", len);
	ck_assert_uint_eq(got->id, want->id);
	ck_assert_int_eq(got->status, want->status);
	ck_assert_str_eq(got->message, want->message);
	ck_assert_int_eq(got->body_case, want->body_case);
	if (got->body_case == TILEATOM__RESPONSE__BODY_OP) {
		ck_assert_uint_eq(got->op->skipped, want->op->skipped);
		ck_assert_uint_eq(got->op->applied, want->op->applied);
		ck_assert_int_eq(got->op->old == NULL, want->op->old == NULL);
		if (got->op->old)
			same_array(got->op->old, want->op->old);
	} else if (got->body_case == TILEATOM__RESPONSE__BODY_DATA) {
		same_array(got->data, want->data);
	}
	tileatom__response__free_unpacked(want, NULL);
	return true;
}

START_TEST(test_decode_random_and_mutated)
{
	tac_wire_response w;
	memset(&w, 0, sizeof(w));
	rand_resp *r = malloc(sizeof(*r));
	ck_assert_ptr_nonnull(r);
	static uint8_t buf[1 << 12], mut[1 << 12];
	int clean_taken = 0, clean_data = 0, mut_taken = 0, mutants = 0;
	for (int i = 0; i < 20000; i++) {
		bool data_plane;
		rand_response(r, &data_plane);
		size_t n = protobuf_c_message_pack(&r->resp.base, buf);
		bool taken = check_decode(&w, buf, n);
		ck_assert_int_eq(taken, data_plane);
		clean_data += data_plane;
		clean_taken += taken;
		for (int k = 0; k < 6; k++) { /* mutations of the same bytes */
			size_t m = n;
			memcpy(mut, buf, n);
			switch (rn(6)) {
			case 0: /* bit flips */
				for (int f = 0; f < 1 + (int)rn(3) && m; f++)
					mut[rn(m)] ^= (uint8_t)(1u << rn(8));
				break;
			case 1: /* truncation */
				m = m ? rn(m) : 0;
				break;
			case 2: /* a byte deleted */
				if (m) {
					size_t at = rn(m);
					memmove(mut + at, mut + at + 1, m - at - 1);
					m--;
				}
				break;
			case 3: { /* a range duplicated */
				if (!m)
					break;
				size_t at = rn(m), len = 1 + rn(m - at);
				memmove(mut + at + len, mut + at, m - at);
				m += len;
				break;
			}
			case 4: { /* a field appended: a known or unknown key, random bytes */
				static const uint8_t keys[] = {0x08, 0x10, 0x1a, 0x2a, 0x4a, 0x42,
				                               0x22, 0x0a, 0x78, 0x7a, 0xa0};
				mut[m++] = keys[rn(sizeof(keys))];
				size_t extra = rn(12);
				for (size_t e = 0; e < extra; e++)
					mut[m++] = (uint8_t)rnd();
				break;
			}
			default: /* an over-long varint or a random byte somewhere */
				if (m)
					mut[rn(m)] = rn(2) ? 0xff : (uint8_t)rnd();
				break;
			}
			mutants++;
			mut_taken += check_decode(&w, mut, m);
		}
	}
	ck_assert_int_eq(clean_taken, clean_data);
	ck_assert_int_gt(clean_data, 15000);
	ck_assert_int_gt(mut_taken, 5000);
	printf("check_client_wire: %d clean responses (%d taken), %d mutated (%d taken)\n", 20000,
	       clean_taken, mutants, mut_taken);
	/* exact values, one by one: id 7, status OK, op with old int64 [2] = {5, -1}, applied 2 */
	static const uint8_t exact[] = {0x08, 0x07,       /* id 7 */
	                                0x4a, 0x1b,       /* op: 27 bytes */
	                                0x0a, 0x17,       /* old: 23 bytes */
	                                0x08, 0x03,       /* dtype 3 */
	                                0x12, 0x01, 0x02, /* shape [2] */
	                                0x1a, 0x10,       /* data: 16 bytes */
	                                5,    0,    0,    0,    0,    0,    0,    0,    /* 5 */
	                                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* -1 */
	                                0x18, 0x02}; /* applied 2 */
	Tileatom__Response *e = tac_wire_decode_response(&w, exact, sizeof(exact));
	ck_assert_ptr_eq(e, &w.resp);
	ck_assert_uint_eq(e->id, 7);
	ck_assert_int_eq(e->status, 0);
	ck_assert_int_eq(e->body_case, TILEATOM__RESPONSE__BODY_OP);
	ck_assert_uint_eq(e->op->applied, 2);
	ck_assert_uint_eq(e->op->skipped, 0);
	ck_assert_int_eq(e->op->old->dtype, 3);
	ck_assert_uint_eq(e->op->old->n_shape, 1);
	ck_assert_int_eq(e->op->old->shape[0], 2);
	int64_t got[2];
	ck_assert_uint_eq(e->op->old->data.len, 16);
	memcpy(got, e->op->old->data.data, 16);
	ck_assert_int_eq(got[0], 5);
	ck_assert_int_eq(got[1], -1);
	ck_assert(check_decode(&w, exact, sizeof(exact)));
	tac_wire_response_free(&w);
	free(r);
}
END_TEST

static Suite *wire_suite(void)
{
	Suite *s = suite_create("client_wire");
	TCase *tc = tcase_create("conformance");
	/* 80,000 random messages: about a second here; 120 s leaves room for a slow, busy
	 * machine (the work is fixed, not timed) */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_write_random_requests);
	tcase_add_test(tc, test_template_is_a_cache);
	tcase_add_test(tc, test_decode_random_and_mutated);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(wire_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
