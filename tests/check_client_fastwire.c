/* check_client_fastwire.c: proves client/tac_fastwire.c equal to protobuf-c. Random hot
 * requests (raw structures with every field varied, and requests made by the library's own
 * builders) must encode to protobuf_c_message_pack's bytes, and what the encoder must
 * decline (shared buffers, old_into, unknown fields, negative enums, other bodies) is
 * declined; the direct writer and its template path (a call of the previous one's shape)
 * give the same bytes. Random responses, clean and then mutated byte by byte, must decode to what
 * tileatom__response__unpack gives, or be declined; whatever the fast decoder takes,
 * protobuf-c takes with the same fields. */
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

/* Storage of one random request. */
typedef struct rand_req {
	Tileatom__Request req;
	Tileatom__PingRequest ping;
	Tileatom__ElementwiseAtomicRequest ew;
	Tileatom__ScatterAtomicRequest sc;
	Tileatom__IndexedAtomicRequest ix;
	Tileatom__Region region;
	Tileatom__ScatterAddr saddr;
	Tileatom__IndexedAddr iaddr;
	Tileatom__Options options;
	Tileatom__Array arrays[12];  /* values, compare, mask, index arrays */
	Tileatom__Array *idx_ptr[8]; /* the index arrays of iaddr */
	int64_t ints[12][6];         /* shapes of the arrays */
	int64_t origin[6], shape[6]; /* the region */
	uint8_t data[12][40];        /* bytes of the arrays */
	char tile[48];               /* the tile name */
} rand_req;

/* A random Array in a[k] (dtype, shape and data of random sizes, each may be empty). */
static Tileatom__Array *rand_array(rand_req *r, int k)
{
	Tileatom__Array *a = &r->arrays[k];
	tileatom__array__init(a);
	a->dtype = (Tileatom__DType)rn(12);
	a->n_shape = rn(6);
	for (size_t i = 0; i < a->n_shape; i++)
		r->ints[k][i] = rnd_i64();
	a->shape = a->n_shape ? r->ints[k] : NULL;
	a->data.len = rn(41);
	for (size_t i = 0; i < a->data.len; i++)
		r->data[k][i] = (uint8_t)rnd();
	a->data.data = a->data.len ? r->data[k] : NULL;
	return a;
}

/* Fills r with a random hot request (every optional part present or not). */
static void rand_request(rand_req *r)
{
	memset(r, 0, sizeof(*r));
	tileatom__request__init(&r->req);
	r->req.id = rn(3) == 0 ? 0 : (rn(2) ? rn(1000) : rnd());
	int kind = (int)rn(4);
	if (kind == 0) {
		tileatom__ping_request__init(&r->ping);
		r->req.body_case = TILEATOM__REQUEST__BODY_PING;
		r->req.ping = &r->ping;
		return;
	}
	size_t tl = rn(4) == 0 ? 0 : rn(sizeof(r->tile));
	for (size_t i = 0; i < tl; i++)
		r->tile[i] = (char)('a' + rn(26));
	char *tile = rn(8) == 0 ? NULL : r->tile;
	Tileatom__Op op = (Tileatom__Op)rn(20);
	Tileatom__Region *region = NULL;
	if (rn(3)) {
		region = &r->region;
		tileatom__region__init(region);
		region->n_origin = rn(6);
		region->n_shape = rn(6);
		for (size_t i = 0; i < 6; i++) {
			r->origin[i] = rnd_i64();
			r->shape[i] = rnd_i64();
		}
		region->origin = region->n_origin ? r->origin : NULL;
		region->shape = region->n_shape ? r->shape : NULL;
	}
	Tileatom__Array *values = rn(6) ? rand_array(r, 0) : NULL;
	Tileatom__Array *compare = rn(3) == 0 ? rand_array(r, 1) : NULL;
	Tileatom__Options *options = NULL;
	if (rn(4)) {
		options = &r->options;
		tileatom__options__init(options);
		options->sem = (Tileatom__Sem)rn(5);
		options->scope = (Tileatom__Scope)rn(4);
		options->space = (Tileatom__Space)rn(3);
		options->no_bounds_check = rn(2);
		options->want_old = rn(2);
		options->mask = rn(4) == 0 ? rand_array(r, 2) : NULL;
	}
	if (kind == 1) {
		Tileatom__ElementwiseAtomicRequest *b = &r->ew;
		tileatom__elementwise_atomic_request__init(b);
		b->tile = tile;
		b->op = op;
		b->region = region;
		b->values = values;
		b->compare = compare;
		b->options = options;
		r->req.body_case = TILEATOM__REQUEST__BODY_ELEMENTWISE;
		r->req.elementwise = b;
	} else if (kind == 2) {
		Tileatom__ScatterAtomicRequest *b = &r->sc;
		tileatom__scatter_atomic_request__init(b);
		b->tile = tile;
		b->op = op;
		b->region = region;
		b->values = values;
		b->options = options;
		if (rn(5)) {
			tileatom__scatter_addr__init(&r->saddr);
			r->saddr.dim = rn(2) ? (uint32_t)rn(5) : (uint32_t)rnd();
			r->saddr.indices = rn(5) ? rand_array(r, 3) : NULL;
			b->addr = &r->saddr;
		}
		r->req.body_case = TILEATOM__REQUEST__BODY_SCATTER;
		r->req.scatter = b;
	} else {
		Tileatom__IndexedAtomicRequest *b = &r->ix;
		tileatom__indexed_atomic_request__init(b);
		b->tile = tile;
		b->op = op;
		b->region = region;
		b->values = values;
		b->compare = compare;
		b->options = options;
		if (rn(5)) {
			tileatom__indexed_addr__init(&r->iaddr);
			r->iaddr.n_indices = rn(9);
			for (size_t i = 0; i < r->iaddr.n_indices; i++)
				r->idx_ptr[i] = rand_array(r, 3 + (int)i);
			r->iaddr.indices = r->iaddr.n_indices ? r->idx_ptr : NULL;
			r->iaddr.flat = rn(2);
			b->addr = &r->iaddr;
		}
		r->req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
		r->req.indexed = b;
	}
}

/* Requests the one-pass writer (tac_fastwire_write_small) took, and requests of at most
 * 127 bytes it declined (only for its bounds: more extents than TAC_FW_SMALL_EXTENTS). */
static int small_taken, small_declined_short;

/* Encodes req with both paths (and the one-pass writer); fails unless the fast encoder takes it
 * (when must_take) and writes protobuf-c's bytes. Returns whether it took it. */
static bool check_encode(const Tileatom__Request *req, bool must_take)
{
	static uint8_t fast[1 << 14], slow[1 << 14];
	tac_fw_plan plan;
	bool taken = tac_fastwire_plan(req, &plan);
	ck_assert(taken || !must_take);
	if (!taken) {
		static uint8_t room[TAC_FW_SMALL_ROOM];
		ck_assert_uint_eq(tac_fastwire_write_small(req, room), 0); /* declined too */
		return false;
	}
	size_t n = protobuf_c_message_get_packed_size(&req->base);
	ck_assert_uint_eq(plan.size, n);
	ck_assert_uint_le(n, sizeof(fast));
	memset(fast, 0xa5, sizeof(fast));
	ck_assert_ptr_eq(tac_fastwire_write(req, &plan, fast), fast + n);
	ck_assert_uint_eq(protobuf_c_message_pack(&req->base, slow), n);
	ck_assert_mem_eq(fast, slow, n);
	ck_assert_uint_eq(fast[n], 0xa5); /* nothing past the end */
	/* the one-pass writer: the same bytes whenever it takes the request, and it takes
	 * every one of at most 127 bytes within its bounds */
	static uint8_t small[TAC_FW_SMALL_ROOM + 1];
	memset(small, 0xa5, sizeof(small));
	size_t sn = tac_fastwire_write_small(req, small);
	ck_assert_uint_eq(small[TAC_FW_SMALL_ROOM], 0xa5); /* within its room */
	if (sn) {
		ck_assert_uint_eq(sn, n);
		ck_assert_mem_eq(small, slow, n);
		small_taken++;
	} else if (n <= 127) {
		small_declined_short++;
	}
	return true;
}

START_TEST(test_encode_random)
{
	rand_req *r = malloc(sizeof(*r));
	ck_assert_ptr_nonnull(r);
	small_taken = small_declined_short = 0;
	for (int i = 0; i < 20000; i++) {
		rand_request(r);
		check_encode(&r->req, true);
	}
	/* the one-pass writer saw many requests of at most 127 bytes and took them all */
	ck_assert_int_gt(small_taken, 2000);
	ck_assert_int_eq(small_declined_short, 0);
	/* declined: a shared buffer, old_into, unknown fields, a negative enum, other bodies */
	int declined = 0;
	for (int i = 0; i < 2000; i++) {
		rand_request(r);
		if (r->req.body_case == TILEATOM__REQUEST__BODY_PING)
			continue;
		Tileatom__BufferRef ref = TILEATOM__BUFFER_REF__INIT;
		ProtobufCMessageUnknownField unk = {9, PROTOBUF_C_WIRE_TYPE_VARINT, 1,
		                                    (uint8_t *)"\1"};
		Tileatom__Array *a =
		    r->req.body_case == TILEATOM__REQUEST__BODY_ELEMENTWISE ? r->ew.values
		    : r->req.body_case == TILEATOM__REQUEST__BODY_SCATTER   ? r->sc.values
		                                                            : r->ix.values;
		switch (i % 4) {
		case 0:
			if (!a)
				continue;
			a->shared = &ref;
			break;
		case 1:
			if (r->req.body_case == TILEATOM__REQUEST__BODY_SCATTER   ? !r->sc.options
			    : r->req.body_case == TILEATOM__REQUEST__BODY_INDEXED ? !r->ix.options
			                                                          : !r->ew.options)
				continue;
			r->options.old_into = &ref;
			break;
		case 2:
			r->req.base.n_unknown_fields = 1;
			r->req.base.unknown_fields = &unk;
			break;
		default:
			if (r->req.body_case == TILEATOM__REQUEST__BODY_ELEMENTWISE)
				r->ew.op = (Tileatom__Op)-1;
			else if (r->req.body_case == TILEATOM__REQUEST__BODY_SCATTER)
				r->sc.op = (Tileatom__Op)-1;
			else
				r->ix.op = (Tileatom__Op)-1;
			break;
		}
		ck_assert(!check_encode(&r->req, false));
		declined++;
	}
	ck_assert_int_gt(declined, 1000);
	Tileatom__Request other = TILEATOM__REQUEST__INIT;
	Tileatom__ListTilesRequest list = TILEATOM__LIST_TILES_REQUEST__INIT;
	other.body_case = TILEATOM__REQUEST__BODY_LIST;
	other.list = &list;
	ck_assert(!check_encode(&other, false));
	free(r);
}
END_TEST

/* Requests made by the library's builders: all taken, all equal. */
START_TEST(test_encode_builders)
{
	tac_msg *m = malloc(sizeof(*m));
	ck_assert_ptr_nonnull(m);
	tileatom_error err;
	int taken = 0;
	small_taken = small_declined_short = 0;
	for (int i = 0; i < 3000; i++) {
		int64_t idx[4][3], vals[3] = {(int64_t)rnd(), -5, 7}, cmp[3] = {1, 2, 3};
		tileatom_array indices[4];
		for (int k = 0; k < 4; k++) {
			for (int j = 0; j < 3; j++)
				idx[k][j] = (int64_t)rn(1000);
			indices[k] = (tileatom_array){TILEATOM_INT64, 1, {3}, idx[k]};
		}
		tileatom_array values = {TILEATOM_INT64, 1, {3}, vals};
		tileatom_array compare = {TILEATOM_INT64, 1, {3}, cmp};
		tileatom_region region = {2, {(int64_t)rn(5), (int64_t)rn(70000)}, {1, 3}};
		tileatom_op_options opts = TILEATOM_OP_OPTIONS_INIT;
		opts.want_old = rn(2);
		opts.check_bounds = rn(2);
		int rc;
		uint64_t value = rnd();
		switch (i % 5) {
		case 0:
			rc = tac_build_ping(m);
			break;
		case 1:
			rc = tac_build_indexed(m, "counters", TILEATOM_OP_ADD, NULL, 1, indices,
			                       true, &values, NULL, &opts, &err);
			break;
		case 2:
			rc = tac_build_indexed(m, "grid", TILEATOM_OP_CAS, &region, 2, indices,
			                       false, &values, &compare, NULL, &err);
			break;
		case 3: {
			tileatom_array va, ca;
			rc = tac_build_atomic_at(m, "c", TILEATOM_OP_ADD, (int64_t)rn(1u << 30),
			                         TILEATOM_INT64, &value, NULL, &opts, &va, &ca,
			                         &err);
			m->req.id = rnd();
			ck_assert_int_eq(rc, TILEATOM_OK);
			taken += check_encode(&m->req, true);
			continue;
		}
		default:
			rc = tac_build_elementwise(m, "t", TILEATOM_OP_MAX, &region, &values, NULL,
			                           &opts, &err);
			break;
		}
		ck_assert_int_eq(rc, TILEATOM_OK);
		m->req.id = rn(2) ? rn(100) : rnd();
		taken += check_encode(&m->req, true);
	}
	ck_assert_int_eq(taken, 3000);
	ck_assert_int_gt(small_taken, 2000); /* the library's hot requests are small */
	ck_assert_int_eq(small_declined_short, 0);
	free(m);
}
END_TEST

/* A random public array: mostly valid (a known dtype, rank 0..2, extents 1..3, data),
 * sometimes not (an unknown dtype, rank 5, extent 0, no data), so that the direct path's
 * checks meet what the builders reject. */
static tileatom_array rand_pub_array(uint8_t *data)
{
	tileatom_array a = {(tileatom_dtype)rn(12), (int)rn(3), {0}, data};
	for (int i = 0; i < a.rank; i++)
		a.shape[i] = 1 + (int64_t)rn(3);
	for (int i = 0; i < 72; i++)
		data[i] = (uint8_t)rnd();
	switch (rn(40)) {
	case 0:
		a.dtype = (tileatom_dtype)(12 + rn(5));
		break;
	case 1:
		a.rank = 5;
		break;
	case 2:
		if (a.rank)
			a.shape[0] = 0;
		break;
	case 3:
		a.data = NULL;
		break;
	default:
		break;
	}
	return a;
}

/* The direct writer (tac_direct_describe + tac_fastwire_write_atomic) against the
 * builders: it describes exactly the calls the builder takes with no region and no mask,
 * and writes protobuf-c's bytes of the built message whenever it takes one. */
START_TEST(test_encode_direct)
{
	tac_msg *m = malloc(sizeof(*m));
	ck_assert_ptr_nonnull(m);
	static uint8_t room[TAC_FW_SMALL_ROOM + 1], slow[1 << 14];
	int described = 0, written = 0;
	for (int i = 0; i < 30000; i++) {
		uint8_t data[7][72];
		tileatom_array indices[4];
		for (int k = 0; k < 4; k++)
			indices[k] = rand_pub_array(data[k]);
		tileatom_array values = rand_pub_array(data[4]);
		tileatom_array compare = rand_pub_array(data[5]);
		tileatom_array mask = rand_pub_array(data[6]);
		tileatom_region region = {1, {0}, {1}};
		char tile[80];
		size_t tl = rn(10) == 0 ? rn(80) : 1 + rn(12);
		for (size_t k = 0; k < tl; k++)
			tile[k] = (char)('a' + rn(26));
		tile[tl] = '\0';
		tileatom_op op = rn(3) ? TILEATOM_OP_ADD : (tileatom_op)rn(24);
		tileatom_op_options opts = TILEATOM_OP_OPTIONS_INIT;
		if (rn(3) == 0) { /* the defaults most often, any variant sometimes */
			opts.sem = (tileatom_sem)rn(6);
			opts.scope = (tileatom_scope)rn(5);
			opts.space = (tileatom_space)rn(3);
		}
		opts.check_bounds = rn(2);
		opts.want_old = rn(2);
		opts.mask = rn(10) == 0 ? &mask : NULL;
		bool indexed = rn(3) != 0, flat = rn(2);
		int n_index = rn(10) == 0 ? (int)rn(6) : 1 + (int)rn(indexed && !flat ? 3 : 1);
		const tileatom_region *rg = rn(10) == 0 ? &region : NULL;
		const tileatom_array *cmp = rn(2) || op == TILEATOM_OP_CAS ? &compare : NULL;
		const tileatom_op_options *o = rn(8) == 0 ? NULL : &opts;
		const char *name = rn(30) == 0 ? NULL : tile;
		tileatom_request_kind kind =
		    indexed ? TILEATOM_REQ_INDEXED : TILEATOM_REQ_ELEMENTWISE;
		tileatom_error err;
		int rc = indexed ? tac_build_indexed(m, name, op, rg, n_index, indices, flat,
		                                     &values, cmp, o, &err)
		                 : tac_build_elementwise(m, name, op, rg, &values, cmp, o, &err);
		tac_fw_atomic d;
		bool took = tac_direct_describe(&d, kind, name, op, rg, n_index, indices, flat,
		                                &values, cmp, o);
		bool expect = rc == TILEATOM_OK && !rg && !(o && o->mask);
		ck_assert_msg(took == expect, "case %d: described %d, builder %d", i, took, rc);
		if (!took)
			continue;
		described++;
		uint64_t id = rn(2) ? 1 + rn(100) : 1 + rnd() / 2;
		m->req.id = id;
		size_t n = protobuf_c_message_get_packed_size(&m->req.base);
		ck_assert_uint_eq(protobuf_c_message_pack(&m->req.base, slow), n);
		memset(room, 0xa5, sizeof(room));
		size_t dn = tac_fastwire_write_atomic(&d, id, room);
		ck_assert_uint_eq(room[TAC_FW_SMALL_ROOM], 0xa5);
		if (dn) {
			ck_assert_uint_eq(dn, n);
			ck_assert_mem_eq(room, slow, n);
			written++;
		} else {
			ck_assert_uint_gt(n, 127); /* declined only for its size */
		}
	}
	printf("check_client_fastwire: direct path: %d of 30000 calls described, %d written\n",
	       described, written);
	ck_assert_int_gt(described, 3000);
	ck_assert_int_gt(written, 2000);
	free(m);
}
END_TEST

/* The arguments of one direct-path call, for the template test: kept whole so that the
 * next call can repeat it (new data) or change one thing. */
typedef struct tpl_call {
	tileatom_request_kind kind; /* INDEXED or ELEMENTWISE */
	char tile[80];              /* the tile's name */
	bool no_tile;               /* pass NULL for the tile */
	tileatom_op op;             /* the op */
	bool region;                /* pass a region */
	int n_index;                /* index arrays passed */
	bool flat;                  /* flat offsets */
	tileatom_array arrays[7];   /* index 0..3, values, compare, mask */
	bool no_data[7];            /* that array's data is NULL */
	bool has_compare;           /* compare passed */
	tileatom_op_options opts;   /* the options (mask set by tpl_args) */
	bool has_mask;              /* opts.mask given */
	bool opts_null;             /* pass NULL options */
	uint8_t data[7][72];        /* the arrays' data */
} tpl_call;

/* Points c's arrays at its own data (after a copy) and draws new data bytes. */
static void tpl_refresh(tpl_call *c)
{
	for (int k = 0; k < 7; k++) {
		for (int i = 0; i < 72; i++)
			c->data[k][i] = (uint8_t)rnd();
		c->arrays[k].data = c->no_data[k] ? NULL : c->data[k];
	}
	c->opts.mask = c->has_mask ? &c->arrays[6] : NULL;
}

/* A fresh random call, mostly one the direct path takes. */
static void tpl_fresh(tpl_call *c)
{
	memset(c, 0, sizeof(*c));
	c->kind = rn(3) ? TILEATOM_REQ_INDEXED : TILEATOM_REQ_ELEMENTWISE;
	size_t tl = rn(20) == 0 ? rn(80) : 1 + rn(30);
	for (size_t k = 0; k < tl; k++)
		c->tile[k] = (char)('a' + rn(26));
	c->no_tile = rn(50) == 0;
	c->op = rn(3) ? TILEATOM_OP_ADD : rn(2) ? TILEATOM_OP_CAS : (tileatom_op)rn(24);
	c->region = rn(20) == 0;
	c->flat = rn(2);
	c->n_index = rn(20) == 0 ? (int)rn(6)
	                         : 1 + (int)rn(c->kind == TILEATOM_REQ_INDEXED && !c->flat ? 3 : 1);
	for (int k = 0; k < 7; k++) {
		do /* a valid array most often */
			c->arrays[k] = rand_pub_array(c->data[k]);
		while (rn(8) != 0 && tileatom_array_bytes(&c->arrays[k]) == 0);
		c->no_data[k] = c->arrays[k].data == NULL;
	}
	c->has_compare = c->op == TILEATOM_OP_CAS ? rn(20) != 0 : rn(20) == 0;
	c->opts = (tileatom_op_options)TILEATOM_OP_OPTIONS_INIT;
	if (rn(4) == 0) {
		c->opts.sem = (tileatom_sem)rn(6);
		c->opts.scope = (tileatom_scope)rn(5);
		c->opts.space = (tileatom_space)rn(3);
	}
	c->opts.check_bounds = rn(2);
	c->opts.want_old = rn(2);
	c->has_mask = rn(20) == 0;
	c->opts_null = rn(8) == 0;
	tpl_refresh(c);
}

/* Changes one thing of c that the template's key holds (or that must not matter to it). */
static void tpl_mutate(tpl_call *c)
{
	tileatom_array *a = &c->arrays[rn(6)];
	switch (rn(16)) {
	case 0: /* the same length, other bytes */
		if (c->tile[0])
			c->tile[rn(strlen(c->tile))] = (char)('a' + rn(26));
		break;
	case 1: /* one byte longer or shorter */
		if (rn(2) && c->tile[0])
			c->tile[strlen(c->tile) - 1] = '\0';
		else if (strlen(c->tile) < 70)
			strcat(c->tile, "x");
		break;
	case 2:
		c->op = rn(2) ? (c->op == TILEATOM_OP_ADD ? TILEATOM_OP_MAX : TILEATOM_OP_ADD)
		              : (tileatom_op)rn(24);
		break;
	case 3:
		c->kind = c->kind == TILEATOM_REQ_INDEXED ? TILEATOM_REQ_ELEMENTWISE
		                                          : TILEATOM_REQ_INDEXED;
		break;
	case 4:
		c->opts.check_bounds = !c->opts.check_bounds;
		break;
	case 5:
		c->opts.want_old = !c->opts.want_old;
		break;
	case 6:
		c->opts.sem = (tileatom_sem)rn(6);
		c->opts.scope = (tileatom_scope)rn(5);
		c->opts.space = (tileatom_space)rn(3);
		break;
	case 7:
		c->opts_null = !c->opts_null;
		break;
	case 8:
		c->has_mask = !c->has_mask;
		break;
	case 9:
		c->has_compare = !c->has_compare;
		break;
	case 10:
		c->flat = !c->flat;
		break;
	case 11:
		c->n_index = 1 + (int)rn(4);
		break;
	case 12: /* another dtype, same bytes or not */
		a->dtype = (tileatom_dtype)rn(12);
		break;
	case 13: /* the same number of elements in another shape, or another rank */
		if (a->rank == 1 && a->shape[0] % 2 == 0) {
			a->rank = 2;
			a->shape[1] = 2;
			a->shape[0] /= 2;
		} else {
			a->rank = (int)rn(3);
			for (int i = 0; i < a->rank; i++)
				a->shape[i] = 1 + (int64_t)rn(3);
		}
		break;
	case 14: /* (rank 5: an invalid array rand_pub_array made, left alone) */
		if (a->rank > 0 && a->rank <= TILEATOM_MAX_RANK)
			a->shape[rn((uint64_t)a->rank)] = 1 + (int64_t)rn(3);
		break;
	default:
		c->no_data[rn(6)] ^= true;
		break;
	}
	tpl_refresh(c);
}

/* Ids of the template test: runs crossing each varint length (127/128, 16383/16384, ...),
 * sometimes 0 (proto3 leaves it out) or the largest. */
static uint64_t tpl_next_id(uint64_t id)
{
	static const uint64_t starts[] = {1,
	                                  120,
	                                  16378,
	                                  (UINT64_C(1) << 21) - 3,
	                                  (UINT64_C(1) << 28) - 3,
	                                  (UINT64_C(1) << 35) - 3,
	                                  (UINT64_C(1) << 42) - 3,
	                                  (UINT64_C(1) << 49) - 3,
	                                  (UINT64_C(1) << 56) - 3,
	                                  (UINT64_C(1) << 63) - 3,
	                                  UINT64_MAX - 2};
	switch (rn(60)) {
	case 0:
		return starts[rn(sizeof(starts) / sizeof(starts[0]))];
	case 1:
		return 0;
	default:
		return id + 1;
	}
}

/* The template path (tac_fw_template_match + tac_fw_template_write) against the full
 * direct writer and protobuf-c over random call sequences: repeats with new data, one
 * change at a time (tile names of the same length with other bytes, ops, every option,
 * dtypes, ranks, shapes, masks, compare values, NULL data) and fresh calls, with ids
 * crossing every varint length. A matched call is one the direct path describes, and its
 * bytes are the full writer's; a repeat of a written call always matches. */
START_TEST(test_encode_template)
{
	tac_msg *m = malloc(sizeof(*m));
	tpl_call *prev = malloc(sizeof(*prev)), *cur = malloc(sizeof(*cur));
	tac_fw_template *t = calloc(1, sizeof(*t));
	ck_assert(m && prev && cur && t);
	static uint8_t full[TAC_FW_SMALL_ROOM + 1], tpl[TAC_FW_SMALL_ROOM + 1], slow[1 << 14];
	tileatom_region region = {1, {0}, {1}};
	uint64_t id = 1;
	bool prev_written = false;
	int matched = 0, repeats = 0, declined = 0, captured = 0;
	int lens[12] = {0}; /* matched writes by the bytes of their id field */
	tpl_fresh(prev);
	for (int i = 0; i < 60000; i++) {
		uint64_t r = rn(20);
		bool repeat = r < 10;
		if (repeat) {
			*cur = *prev;
			tpl_refresh(cur);
		} else if (r < 17) {
			*cur = *prev;
			tpl_mutate(cur);
		} else {
			tpl_fresh(cur);
		}
		id = tpl_next_id(id);
		const tpl_call *c = cur;
		const char *tile = c->no_tile ? NULL : c->tile;
		const tileatom_region *rg = c->region ? &region : NULL;
		const tileatom_array *cmp = c->has_compare ? &c->arrays[5] : NULL;
		const tileatom_op_options *o = c->opts_null ? NULL : &c->opts;
		bool indexed = c->kind == TILEATOM_REQ_INDEXED;
		bool hit = tac_fw_template_match(t, c->kind, tile, c->op, rg, c->n_index, c->arrays,
		                                 c->flat, &c->arrays[4], cmp, o);
		tac_fw_atomic d;
		bool took = tac_direct_describe(&d, c->kind, tile, c->op, rg, c->n_index, c->arrays,
		                                c->flat, &c->arrays[4], cmp, o);
		if (repeat && prev_written)
			ck_assert_msg(hit, "case %d: a repeat of a written call missed", i);
		if (hit) {
			ck_assert_msg(took, "case %d: matched a call the direct path declines", i);
			matched++;
			repeats += repeat;
			memset(full, 0xa5, sizeof(full));
			memset(tpl, 0x5a, sizeof(tpl));
			size_t fn = tac_fastwire_write_atomic(&d, id, full);
			size_t tn =
			    tac_fw_template_write(t, id, c->arrays, &c->arrays[4], cmp, tpl);
			ck_assert_uint_eq(tpl[TAC_FW_SMALL_ROOM], 0x5a);
			ck_assert_msg(tn == fn, "case %d: template %zu bytes, full writer %zu", i,
			              tn, fn);
			if (tn) {
				ck_assert_mem_eq(tpl, full, tn);
				lens[tn - t->len] += 1;
				/* and protobuf-c's bytes of the builder's message */
				tileatom_error err;
				int rc = indexed
				             ? tac_build_indexed(m, tile, c->op, rg, c->n_index,
				                                 c->arrays, c->flat, &c->arrays[4],
				                                 cmp, o, &err)
				             : tac_build_elementwise(m, tile, c->op, rg,
				                                     &c->arrays[4], cmp, o, &err);
				ck_assert_int_eq(rc, TILEATOM_OK);
				m->req.id = id;
				size_t n = protobuf_c_message_get_packed_size(&m->req.base);
				ck_assert_uint_eq(protobuf_c_message_pack(&m->req.base, slow), n);
				ck_assert_uint_eq(n, tn);
				ck_assert_mem_eq(tpl, slow, n);
			} else {
				declined++;
			}
			prev_written = tn > 0;
		} else if (took) {
			/* the full path, keeping the template as the library does */
			memset(full, 0xa5, sizeof(full));
			size_t fn = tac_fastwire_write_atomic(&d, id, full);
			size_t kn = tac_fastwire_write_atomic_template(&d, id, tpl, t);
			ck_assert_uint_eq(kn, fn);
			if (kn)
				ck_assert_mem_eq(tpl, full, kn);
			captured += kn > 0;
			prev_written = kn > 0;
		} else {
			prev_written = false;
		}
		tpl_call *swap = prev;
		prev = cur;
		cur = swap;
	}
	printf("check_client_fastwire: template: %d of 60000 calls matched (%d repeats, %d "
	       "too large), %d templates kept; by id field bytes 0, 2..11: %d %d %d %d %d %d %d %d "
	       "%d %d %d\n",
	       matched, repeats, declined, captured, lens[0], lens[2], lens[3], lens[4], lens[5],
	       lens[6], lens[7], lens[8], lens[9], lens[10], lens[11]);
	fflush(stdout);
	ck_assert_int_gt(matched, 10000);
	ck_assert_int_gt(captured, 5000);
	ck_assert_int_gt(lens[0], 50); /* id 0: no field; else its key and 1..10 bytes */
	for (int k = 2; k < 12; k++)
		ck_assert_int_gt(lens[k], 100);
	free(m);
	free(prev);
	free(cur);
	free(t);
}
END_TEST

/* Storage of one random response. */
typedef struct rand_resp {
	Tileatom__Response resp;
	Tileatom__OpResponse op;
	Tileatom__PingResponse ping;
	Tileatom__Array old;
	Tileatom__TileInfo tile;
	int64_t shape[10];
	uint8_t data[64];
	char message[32];
} rand_resp;

/* Fills r with a random response; hot says whether it is one the fast decoder must take. */
static void rand_response(rand_resp *r, bool *hot)
{
	memset(r, 0, sizeof(*r));
	tileatom__response__init(&r->resp);
	*hot = true;
	r->resp.id = rn(3) == 0 ? 0 : (rn(2) ? rn(1000) : rnd());
	r->resp.status = (Tileatom__Status)(rn(3) ? 0 : rn(110));
	if (rn(6) == 0) {
		snprintf(r->message, sizeof(r->message), "tile %llu not found",
		         (unsigned long long)rn(100));
		r->resp.message = r->message;
		*hot = false;
	}
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
		*hot = false;
		break;
	default:
		tileatom__op_response__init(&r->op);
		r->op.skipped = rn(2) ? rn(4) : rnd();
		r->op.applied = rn(2) ? rn(4) : rnd();
		if (rn(4)) {
			tileatom__array__init(&r->old);
			r->old.dtype = (Tileatom__DType)rn(12);
			r->old.n_shape = rn(10);
			if (r->old.n_shape > TAC_FW_MAX_SHAPE)
				*hot = false;
			for (size_t i = 0; i < r->old.n_shape; i++)
				r->shape[i] = rnd_i64();
			r->old.shape = r->old.n_shape ? r->shape : NULL;
			r->old.data.len = rn(65);
			for (size_t i = 0; i < r->old.data.len; i++)
				r->data[i] = (uint8_t)rnd();
			r->old.data.data = r->old.data.len ? r->data : NULL;
			r->op.old = &r->old;
		}
		r->resp.body_case = TILEATOM__RESPONSE__BODY_OP;
		r->resp.op = &r->op;
		break;
	}
}

/* Decodes len bytes at p with both paths; fails when the fast decoder takes what protobuf-c
 * rejects or gives other fields. Returns whether the fast decoder took it. */
static bool check_decode(tac_fw_response *fw, const uint8_t *p, size_t len)
{
	static uint8_t a[1 << 12], b[1 << 12];
	Tileatom__Response *fast = tac_fastwire_decode_response(fw, p, len);
	Tileatom__Response *slow = tileatom__response__unpack(NULL, len, p);
	if (!fast) {
		if (slow)
			tileatom__response__free_unpacked(slow, NULL);
		return false;
	}
	ck_assert_msg(slow != NULL, "the fast decoder took %zu bytes protobuf-c rejects", len);
	ck_assert_uint_eq(fast->id, slow->id);
	ck_assert_int_eq(fast->status, slow->status);
	ck_assert_str_eq(fast->message, slow->message);
	ck_assert_int_eq(fast->body_case, slow->body_case);
	ck_assert_uint_eq(fast->base.n_unknown_fields, slow->base.n_unknown_fields);
	if (fast->body_case == TILEATOM__RESPONSE__BODY_OP) {
		ck_assert_uint_eq(fast->op->skipped, slow->op->skipped);
		ck_assert_uint_eq(fast->op->applied, slow->op->applied);
		ck_assert_int_eq(fast->op->old == NULL, slow->op->old == NULL);
		if (fast->op->old) {
			const Tileatom__Array *x = fast->op->old, *y = slow->op->old;
			ck_assert_int_eq(x->dtype, y->dtype);
			ck_assert_uint_eq(x->n_shape, y->n_shape);
			ck_assert_int_eq(x->shape == NULL, y->shape == NULL);
			if (x->n_shape)
				ck_assert_mem_eq(x->shape, y->shape, x->n_shape * sizeof(int64_t));
			ck_assert_uint_eq(x->data.len, y->data.len);
			ck_assert_int_eq(x->data.data == NULL, y->data.data == NULL);
			if (x->data.len)
				ck_assert_mem_eq(x->data.data, y->data.data, x->data.len);
			ck_assert_ptr_null(y->shared);
		}
	}
	/* and, all together, the same message */
	size_t n = protobuf_c_message_get_packed_size(&slow->base);
	ck_assert_uint_le(n, sizeof(a));
	ck_assert_uint_eq(protobuf_c_message_get_packed_size(&fast->base), n);
	protobuf_c_message_pack(&slow->base, a);
	protobuf_c_message_pack(&fast->base, b);
	ck_assert_mem_eq(a, b, n);
	tileatom__response__free_unpacked(slow, NULL);
	return true;
}

START_TEST(test_decode_random_and_mutated)
{
	tac_fw_response fw;
	memset(&fw, 0, sizeof(fw));
	rand_resp *r = malloc(sizeof(*r));
	ck_assert_ptr_nonnull(r);
	static uint8_t buf[1 << 12], mut[1 << 12];
	int clean_taken = 0, clean_hot = 0, mut_taken = 0, mutants = 0;
	for (int i = 0; i < 20000; i++) {
		bool hot;
		rand_response(r, &hot);
		size_t n = protobuf_c_message_pack(&r->resp.base, buf);
		bool taken = check_decode(&fw, buf, n);
		ck_assert_int_eq(taken, hot);
		clean_hot += hot;
		clean_taken += taken;
		/* mutations of the same bytes */
		for (int k = 0; k < 6; k++) {
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
			case 4: { /* a field appended: a known tag with a random value */
				static const uint8_t tags[] = {0x08, 0x10, 0x1a, 0x2a,
				                               0x4a, 0x22, 0x0a};
				mut[m++] = tags[rn(sizeof(tags))];
				size_t extra = rn(12);
				for (size_t e = 0; e < extra; e++)
					mut[m++] = (uint8_t)rnd();
				break;
			}
			default: /* an over-long varint or a random byte somewhere */
				if (m) {
					size_t at = rn(m);
					mut[at] = rn(2) ? 0xff : (uint8_t)rnd();
				}
				break;
			}
			mutants++;
			mut_taken += check_decode(&fw, mut, m);
		}
	}
	ck_assert_int_eq(clean_taken, clean_hot);
	ck_assert_int_gt(clean_hot, 10000);
	ck_assert_int_gt(mut_taken, 1000);
	fprintf(stderr,
	        "check_client_fastwire: %d clean responses (%d taken), %d mutated (%d taken)\n",
	        20000, clean_taken, mutants, mut_taken);
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
	Tileatom__Response *e = tac_fastwire_decode_response(&fw, exact, sizeof(exact));
	ck_assert_ptr_eq(e, &fw.resp);
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
	ck_assert(check_decode(&fw, exact, sizeof(exact)));
	tac_fastwire_response_free(&fw);
	free(r);
}
END_TEST

static Suite *fastwire_suite(void)
{
	Suite *s = suite_create("client_fastwire");
	TCase *tc = tcase_create("equivalence");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_encode_random);
	tcase_add_test(tc, test_encode_builders);
	tcase_add_test(tc, test_encode_direct);
	tcase_add_test(tc, test_encode_template);
	tcase_add_test(tc, test_decode_random_and_mutated);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fastwire_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
