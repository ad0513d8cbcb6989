/* fuzz_seeds.c: writes the seed corpus of tests/fuzz_dispatch.c into the folder given as
 * the only argument (`make fuzz` runs it). Each seed is one fuzz input: request payloads
 * (encoded tileatom.Request messages), each preceded by its length as 2 little-endian
 * bytes. The requests name the harness's base tiles (a: int32 [16], b: float16 [4, 6],
 * c: uint64 [2, 3, 4], d: float32 [8, 8], e: bfloat16 [2, 3, 2, 2], f: int64 [32],
 * g: float64 [5, 3], h: uint32 [4, 4, 2]) and cover every request body, every addressing
 * form, masks, padding, sems, scopes, space shared, want_old and bounds checking off. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tileatom.pb-c.h"

/* One seed being built. */
typedef struct seed {
	uint8_t buf[8192]; /* the input */
	size_t len;        /* bytes used */
	uint64_t next_id;  /* id of the next request */
} seed;

/* Folder the seeds go to. */
static const char *out_dir;
/* When set, each seed goes to this function instead of a file (tests/check_codec.c
 * includes this file with TA_FUZZ_SEEDS_NO_MAIN to run every seed). */
static void (*seed_sink)(const uint8_t *buf, size_t len, const char *name);
/* Seeds written so far. */
static int n_written;

/* Starts an empty seed. */
static void seed_init(seed *s)
{
	s->len = 0;
	s->next_id = 1;
}

/* Appends one request (its id set here) with its 2-byte length prefix. */
static void add(seed *s, Tileatom__Request *req)
{
	req->id = s->next_id++;
	size_t n = protobuf_c_message_get_packed_size(&req->base);
	if (n > 0xffff || s->len + 2 + n > sizeof(s->buf)) {
		fprintf(stderr, "fuzz_seeds: seed too large\n");
		exit(1);
	}
	s->buf[s->len++] = (uint8_t)(n & 0xff);
	s->buf[s->len++] = (uint8_t)(n >> 8);
	s->len += protobuf_c_message_pack(&req->base, s->buf + s->len);
}

/* Writes the seed as OUT_DIR/NAME. */
static void save(const seed *s, const char *name)
{
	if (seed_sink) {
		seed_sink(s->buf, s->len, name);
		n_written++;
		return;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", out_dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(s->buf, 1, s->len, f) != s->len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	n_written++;
}

/* Fills a wire Array over caller-owned shape and data. */
static Tileatom__Array *array(Tileatom__Array *a, Tileatom__DType dt, size_t rank, int64_t *shape,
                              const void *data, size_t nbytes)
{
	tileatom__array__init(a);
	a->dtype = dt;
	a->n_shape = rank;
	a->shape = shape;
	a->data.data = (uint8_t *)data;
	a->data.len = nbytes;
	return a;
}

/* Fills a wire Region (rank 0: an empty region, the whole tile). */
static Tileatom__Region *region(Tileatom__Region *r, size_t rank, int64_t *origin, int64_t *shape)
{
	tileatom__region__init(r);
	r->n_origin = origin ? rank : 0;
	r->origin = origin;
	r->n_shape = shape ? rank : 0;
	r->shape = shape;
	return r;
}

/* Fills wire Options. */
static Tileatom__Options *options(Tileatom__Options *o, Tileatom__Sem sem, Tileatom__Scope scope,
                                  Tileatom__Space space, bool no_bounds, bool want_old,
                                  Tileatom__Array *mask)
{
	tileatom__options__init(o);
	o->sem = sem;
	o->scope = scope;
	o->space = space;
	o->no_bounds_check = no_bounds;
	o->want_old = want_old;
	o->mask = mask;
	return o;
}

/* Appends the requests without a tile: hello, ping, list (whole and paged), stats. */
static void add_service(seed *s)
{
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	Tileatom__HelloRequest h = TILEATOM__HELLO_REQUEST__INIT;
	h.protocol_version = 1;
	h.client_name = (char *)"fuzz";
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &h;
	add(s, &req);
	Tileatom__PingRequest p = TILEATOM__PING_REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_PING;
	req.ping = &p;
	add(s, &req);
	Tileatom__ListTilesRequest l = TILEATOM__LIST_TILES_REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_LIST;
	req.list = &l;
	add(s, &req);
	l.paged = true; /* a page of 2 after a cursor */
	l.cursor = (char *)"a";
	l.limit = 2;
	add(s, &req);
	Tileatom__StatsRequest st = TILEATOM__STATS_REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_STATS;
	req.stats = &st;
	add(s, &req);
}

/* Appends create NAME (dtype, shape, optional scalar fill of fill_bytes). */
static void add_create(seed *s, const char *name, Tileatom__DType dt, size_t rank, int64_t *shape,
                       const void *fill, size_t fill_bytes)
{
	Tileatom__Array fa;
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = (char *)name;
	c.dtype = dt;
	c.n_shape = rank;
	c.shape = shape;
	if (fill)
		c.fill = array(&fa, dt, 0, NULL, fill, fill_bytes);
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	add(s, &req);
}

/* Appends describe NAME and destroy NAME (destroy only when asked). */
static void add_describe_destroy(seed *s, const char *name, bool destroy)
{
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	Tileatom__DescribeTileRequest d = TILEATOM__DESCRIBE_TILE_REQUEST__INIT;
	d.name = (char *)name;
	req.body_case = TILEATOM__REQUEST__BODY_DESCRIBE;
	req.describe = &d;
	add(s, &req);
	if (destroy) {
		Tileatom__DestroyTileRequest x = TILEATOM__DESTROY_TILE_REQUEST__INIT;
		x.name = (char *)name;
		req.body_case = TILEATOM__REQUEST__BODY_DESTROY;
		req.destroy = &x;
		add(s, &req);
	}
}

/* Appends read NAME over an optional region. */
static void add_read(seed *s, const char *name, Tileatom__Region *r)
{
	Tileatom__ReadRegionRequest rd = TILEATOM__READ_REGION_REQUEST__INIT;
	rd.tile = (char *)name;
	rd.region = r;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_READ;
	req.read = &rd;
	add(s, &req);
}

/* Appends write NAME over an optional region. */
static void add_write(seed *s, const char *name, Tileatom__Region *r, Tileatom__Array *values)
{
	Tileatom__WriteRegionRequest w = TILEATOM__WRITE_REGION_REQUEST__INIT;
	w.tile = (char *)name;
	w.region = r;
	w.values = values;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_WRITE;
	req.write = &w;
	add(s, &req);
}

/* Appends an element-wise atomic. */
static void add_elementwise(seed *s, const char *name, Tileatom__Op op, Tileatom__Region *r,
                            Tileatom__Array *values, Tileatom__Array *compare, Tileatom__Options *o)
{
	Tileatom__ElementwiseAtomicRequest e = TILEATOM__ELEMENTWISE_ATOMIC_REQUEST__INIT;
	e.tile = (char *)name;
	e.op = op;
	e.region = r;
	e.values = values;
	e.compare = compare;
	e.options = o;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_ELEMENTWISE;
	req.elementwise = &e;
	add(s, &req);
}

/* Appends a scatter atomic along dim. */
static void add_scatter(seed *s, const char *name, Tileatom__Op op, Tileatom__Region *r,
                        uint32_t dim, Tileatom__Array *indices, Tileatom__Array *values,
                        Tileatom__Options *o)
{
	Tileatom__ScatterAddr sa = TILEATOM__SCATTER_ADDR__INIT;
	sa.dim = dim;
	sa.indices = indices;
	Tileatom__ScatterAtomicRequest sc = TILEATOM__SCATTER_ATOMIC_REQUEST__INIT;
	sc.tile = (char *)name;
	sc.op = op;
	sc.region = r;
	sc.addr = &sa;
	sc.values = values;
	sc.options = o;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_SCATTER;
	req.scatter = &sc;
	add(s, &req);
}

/* Appends an indexed atomic with n index arrays (flat: one array of offsets). */
static void add_indexed(seed *s, const char *name, Tileatom__Op op, Tileatom__Region *r, size_t n,
                        Tileatom__Array **indices, bool flat, Tileatom__Array *values,
                        Tileatom__Array *compare, Tileatom__Options *o)
{
	Tileatom__IndexedAddr ia = TILEATOM__INDEXED_ADDR__INIT;
	ia.n_indices = n;
	ia.indices = indices;
	ia.flat = flat;
	Tileatom__IndexedAtomicRequest x = TILEATOM__INDEXED_ATOMIC_REQUEST__INIT;
	x.tile = (char *)name;
	x.op = op;
	x.region = r;
	x.addr = &ia;
	x.values = values;
	x.compare = compare;
	x.options = o;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
	req.indexed = &x;
	add(s, &req);
}

/* Memory op kinds for add_memory. */
typedef enum mem_kind { M_GATHER, M_SCATTER_STORE, M_ATOMIC_LOAD, M_ATOMIC_STORE } mem_kind;

/* Appends a gather, scatter store, atomic load or atomic store. */
static void add_memory(seed *s, mem_kind kind, const char *name, Tileatom__Region *window,
                       Tileatom__Addressing *addr, Tileatom__Array *values,
                       Tileatom__Array *padding, Tileatom__Options *o)
{
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	Tileatom__GatherRequest g = TILEATOM__GATHER_REQUEST__INIT;
	Tileatom__ScatterStoreRequest ss = TILEATOM__SCATTER_STORE_REQUEST__INIT;
	Tileatom__AtomicLoadRequest al = TILEATOM__ATOMIC_LOAD_REQUEST__INIT;
	Tileatom__AtomicStoreRequest as = TILEATOM__ATOMIC_STORE_REQUEST__INIT;
	switch (kind) {
	case M_GATHER:
		g.tile = (char *)name;
		g.window = window;
		g.addr = addr;
		g.padding = padding;
		g.options = o;
		req.body_case = TILEATOM__REQUEST__BODY_GATHER;
		req.gather = &g;
		break;
	case M_SCATTER_STORE:
		ss.tile = (char *)name;
		ss.window = window;
		ss.addr = addr;
		ss.values = values;
		ss.options = o;
		req.body_case = TILEATOM__REQUEST__BODY_SCATTER_STORE;
		req.scatter_store = &ss;
		break;
	case M_ATOMIC_LOAD:
		al.tile = (char *)name;
		al.window = window;
		al.addr = addr;
		al.options = o;
		req.body_case = TILEATOM__REQUEST__BODY_ATOMIC_LOAD;
		req.atomic_load = &al;
		break;
	case M_ATOMIC_STORE:
		as.tile = (char *)name;
		as.window = window;
		as.addr = addr;
		as.values = values;
		as.options = o;
		req.body_case = TILEATOM__REQUEST__BODY_ATOMIC_STORE;
		req.atomic_store = &as;
		break;
	}
	add(s, &req);
}

/* Writes every seed. */
static void write_seeds(void)
{
	seed s;
	Tileatom__Array va, ca, ia, ib, ic, id, ma, pa;
	Tileatom__Region ra, rb;
	Tileatom__Options o;

	/* hello, ping, list, stats; describe of a base tile */
	seed_init(&s);
	add_service(&s);
	add_describe_destroy(&s, "a", false);
	save(&s, "service");

	/* create int32 [8] filled with 7, add a vector over [2, 6) with want_old, read, destroy */
	seed_init(&s);
	int64_t n8[1] = {8}, o2[1] = {2}, s4[1] = {4};
	int32_t seven = 7, v4[4] = {1, -2, 3, 0x7fffffff};
	add_create(&s, "n", TILEATOM__DTYPE__INT32, 1, n8, &seven, 4);
	add_elementwise(&s, "n", TILEATOM__OP__ADD, region(&ra, 1, o2, s4),
	                array(&va, TILEATOM__DTYPE__INT32, 1, s4, v4, sizeof(v4)), NULL,
	                options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                        TILEATOM__SPACE__GLOBAL, false, true, NULL));
	add_read(&s, "n", NULL);
	add_describe_destroy(&s, "n", true);
	save(&s, "create_add_read_destroy");

	/* create with every dtype and rank 1..4, no fill; one with a float fill */
	seed_init(&s);
	int64_t sh4[4] = {2, 2, 3, 1};
	double one = 1.0;
	for (int dt = TILEATOM__DTYPE__INT32; dt <= TILEATOM__DTYPE__BFLOAT16; dt++) {
		char name[8];
		snprintf(name, sizeof(name), "t%d", dt);
		add_create(&s, name, (Tileatom__DType)dt, (size_t)(dt % 4) + 1, sh4, NULL, 0);
	}
	add_create(&s, "z", TILEATOM__DTYPE__FLOAT64, 2, sh4, &one, 8);
	add_read(&s, "z", NULL);
	save(&s, "create_dtypes");

	/* element-wise cas on a with a compare vector and want_old, acq_rel, cta */
	seed_init(&s);
	int64_t o0[1] = {0};
	int32_t cmp[4] = {0, 0x0, 0x12345678, 0}, des = 42;
	add_elementwise(&s, "a", TILEATOM__OP__CAS, region(&ra, 1, o0, s4),
	                array(&va, TILEATOM__DTYPE__INT32, 0, NULL, &des, 4),
	                array(&ca, TILEATOM__DTYPE__INT32, 1, s4, cmp, sizeof(cmp)),
	                options(&o, TILEATOM__SEM__ACQ_REL, TILEATOM__SCOPE__CTA,
	                        TILEATOM__SPACE__GLOBAL, false, true, NULL));
	add_read(&s, "a", NULL);
	save(&s, "elementwise_cas");

	/* element-wise min on b (float16 2-D) with a row vector, broadcast; sys scope */
	seed_init(&s);
	int64_t row6[1] = {6};
	uint16_t h6[6] = {0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e00, 0x8000};
	add_elementwise(&s, "b", TILEATOM__OP__MIN, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT16, 1, row6, h6, sizeof(h6)), NULL,
	                options(&o, TILEATOM__SEM__RELEASE, TILEATOM__SCOPE__SYS,
	                        TILEATOM__SPACE__GLOBAL, false, true, NULL));
	add_elementwise(&s, "b", TILEATOM__OP__ADD, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT16, 0, NULL, h6, 2), NULL,
	                options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__CLUSTER,
	                        TILEATOM__SPACE__SHARED, false, false, NULL));
	add_read(&s, "b", NULL);
	save(&s, "elementwise_f16");

	/* element-wise xor/and/or/exch on h (uint32 3-D) over a region, with a mask */
	seed_init(&s);
	int64_t ho[3] = {1, 0, 0}, hs[3] = {2, 4, 2}, ms[2] = {4, 2};
	uint8_t mask8[8] = {1, 0, 1, 1, 0, 0, 1, 1};
	uint32_t bits = 0xf0f0f0f0u;
	Tileatom__Op bitops[4] = {TILEATOM__OP__XOR, TILEATOM__OP__AND, TILEATOM__OP__OR,
	                          TILEATOM__OP__EXCH};
	for (int i = 0; i < 4; i++)
		add_elementwise(
		    &s, "h", bitops[i], region(&ra, 3, ho, hs),
		    array(&va, TILEATOM__DTYPE__UINT32, 0, NULL, &bits, 4), NULL,
		    options(&o, (Tileatom__Sem)i, TILEATOM__SCOPE__GPU, TILEATOM__SPACE__GLOBAL,
		            false, i % 2 == 0,
		            array(&ma, TILEATOM__DTYPE__BOOL, 2, ms, mask8, sizeof(mask8))));
	save(&s, "elementwise_bits_mask");

	/* scatter add along dim 1 of c (uint64 [2, 3, 4]) with duplicates and one out of range */
	seed_init(&s);
	int64_t cis[3] = {2, 2, 4};
	int64_t cidx[16] = {0, 2, 1, 1, 0, 0, 3, 2, 2, 1, 0, 0, 1, 1, 1, 2};
	uint64_t u1 = 1;
	add_scatter(&s, "c", TILEATOM__OP__ADD, NULL, 1,
	            array(&ia, TILEATOM__DTYPE__INT64, 3, cis, cidx, sizeof(cidx)),
	            array(&va, TILEATOM__DTYPE__UINT64, 0, NULL, &u1, 8),
	            options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                    TILEATOM__SPACE__SHARED, false, false, NULL));
	add_scatter(&s, "c", TILEATOM__OP__MAX, NULL, 2,
	            array(&ia, TILEATOM__DTYPE__INT64, 3, cis, cidx, sizeof(cidx)),
	            array(&va, TILEATOM__DTYPE__UINT64, 0, NULL, &u1, 8),
	            options(&o, TILEATOM__SEM__ACQUIRE, TILEATOM__SCOPE__GPU,
	                    TILEATOM__SPACE__GLOBAL, false, true, NULL));
	add_read(&s, "c", NULL);
	save(&s, "scatter_u64");

	/* scatter sub on f (int64 [32]) with int32 indices inside a region */
	seed_init(&s);
	int64_t fo[1] = {4}, fs[1] = {10}, fis[1] = {6};
	int32_t fidx[6] = {0, 9, 9, 3, 10, -1};
	int64_t fval[6] = {1, 2, 3, 4, 5, 6};
	add_scatter(&s, "f", TILEATOM__OP__SUB, region(&ra, 1, fo, fs), 0,
	            array(&ia, TILEATOM__DTYPE__INT32, 1, fis, fidx, sizeof(fidx)),
	            array(&va, TILEATOM__DTYPE__INT64, 1, fis, fval, sizeof(fval)),
	            options(&o, TILEATOM__SEM__ACQ_REL, TILEATOM__SCOPE__SYS,
	                    TILEATOM__SPACE__GLOBAL, false, true, NULL));
	save(&s, "scatter_i64_region");

	/* indexed cas on d (float32 [8, 8]): index arrays [3, 1] and [1, 2] broadcast */
	seed_init(&s);
	int64_t c31[2] = {3, 1}, c12[2] = {1, 2};
	int32_t rows[3] = {0, 7, 3}, cols[2] = {1, 6};
	float fz = 0.0f, fdes = 2.5f;
	Tileatom__Array *ind2[2] = {&ia, &ib};
	array(&ia, TILEATOM__DTYPE__INT32, 2, c31, rows, sizeof(rows));
	array(&ib, TILEATOM__DTYPE__INT32, 2, c12, cols, sizeof(cols));
	add_indexed(&s, "d", TILEATOM__OP__CAS, NULL, 2, ind2, false,
	            array(&va, TILEATOM__DTYPE__FLOAT32, 0, NULL, &fdes, 4),
	            array(&ca, TILEATOM__DTYPE__FLOAT32, 0, NULL, &fz, 4),
	            options(&o, TILEATOM__SEM__ACQUIRE, TILEATOM__SCOPE__CTA,
	                    TILEATOM__SPACE__GLOBAL, false, true, NULL));
	add_indexed(&s, "d", TILEATOM__OP__ADD, NULL, 2, ind2, false,
	            array(&va, TILEATOM__DTYPE__FLOAT32, 0, NULL, &fdes, 4), NULL,
	            options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                    TILEATOM__SPACE__SHARED, false, false, NULL));
	save(&s, "indexed_cas_f32");

	/* indexed add on a with bounds checking off and an out-of-range index: OUT_OF_RANGE;
	 * then the same with bounds checking on (skipped and counted) */
	seed_init(&s);
	int64_t i3[1] = {3};
	int64_t aidx[3] = {0, 15, 16};
	int32_t ten = 10;
	Tileatom__Array *ind1[1] = {&ia};
	array(&ia, TILEATOM__DTYPE__INT64, 1, i3, aidx, sizeof(aidx));
	add_indexed(&s, "a", TILEATOM__OP__ADD, NULL, 1, ind1, false,
	            array(&va, TILEATOM__DTYPE__INT32, 0, NULL, &ten, 4), NULL,
	            options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                    TILEATOM__SPACE__GLOBAL, true, true, NULL));
	add_indexed(&s, "a", TILEATOM__OP__ADD, NULL, 1, ind1, false,
	            array(&va, TILEATOM__DTYPE__INT32, 0, NULL, &ten, 4), NULL,
	            options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                    TILEATOM__SPACE__GLOBAL, false, true, NULL));
	save(&s, "indexed_bounds_off");

	/* indexed flat xor on h inside a window; flat max on e (bfloat16 rank 4) */
	seed_init(&s);
	int64_t hwo[3] = {1, 1, 0}, hws[3] = {2, 2, 2}, fl[1] = {5};
	int32_t flat[5] = {0, 7, 3, 8, 3};
	uint32_t xv = 0xffu;
	add_indexed(&s, "h", TILEATOM__OP__XOR, region(&ra, 3, hwo, hws), 1, ind1, true,
	            array(&va, TILEATOM__DTYPE__UINT32, 0, NULL, &xv, 4), NULL,
	            options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                    TILEATOM__SPACE__GLOBAL, false, false, NULL));
	ia.dtype = TILEATOM__DTYPE__INT32;
	ia.n_shape = 1;
	ia.shape = fl;
	ia.data.data = (uint8_t *)flat;
	ia.data.len = sizeof(flat);
	uint16_t bf = 0x4040;
	add_indexed(&s, "e", TILEATOM__OP__MAX, NULL, 1, ind1, true,
	            array(&va, TILEATOM__DTYPE__BFLOAT16, 0, NULL, &bf, 2), NULL,
	            options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                    TILEATOM__SPACE__GLOBAL, false, true, NULL));
	save(&s, "indexed_flat");

	/* indexed exch on e with four index arrays, one per axis */
	seed_init(&s);
	int64_t e2[1] = {2};
	int64_t x0[2] = {0, 1}, x1[2] = {2, 0}, x2[2] = {1, 1}, x3[2] = {0, 1};
	Tileatom__Array *ind4[4] = {&ia, &ib, &ic, &id};
	array(&ia, TILEATOM__DTYPE__INT64, 1, e2, x0, sizeof(x0));
	array(&ib, TILEATOM__DTYPE__INT64, 1, e2, x1, sizeof(x1));
	array(&ic, TILEATOM__DTYPE__INT64, 1, e2, x2, sizeof(x2));
	array(&id, TILEATOM__DTYPE__INT64, 1, e2, x3, sizeof(x3));
	uint16_t bfs[2] = {0x3f80, 0xbf80};
	add_indexed(&s, "e", TILEATOM__OP__EXCH, NULL, 4, ind4, false,
	            array(&va, TILEATOM__DTYPE__BFLOAT16, 1, e2, bfs, sizeof(bfs)), NULL,
	            options(&o, TILEATOM__SEM__ACQ_REL, TILEATOM__SCOPE__SYS,
	                    TILEATOM__SPACE__GLOBAL, false, true, NULL));
	save(&s, "indexed_rank4");

	/* gather from g (float64 [5, 3]) with a mask and padding; atomic load of a window */
	seed_init(&s);
	int64_t g2[1] = {3};
	int64_t gr[3] = {4, 0, 5}, gc[3] = {2, 1, 0};
	uint8_t gm[3] = {1, 0, 1};
	double pad = -1.0;
	Tileatom__Addressing ad = TILEATOM__ADDRESSING__INIT;
	Tileatom__IndexedAddr xa = TILEATOM__INDEXED_ADDR__INIT;
	array(&ia, TILEATOM__DTYPE__INT64, 1, g2, gr, sizeof(gr));
	array(&ib, TILEATOM__DTYPE__INT64, 1, g2, gc, sizeof(gc));
	xa.n_indices = 2;
	xa.indices = ind2;
	ad.form_case = TILEATOM__ADDRESSING__FORM_INDEXED;
	ad.indexed = &xa;
	add_memory(&s, M_GATHER, "g", NULL, &ad, NULL,
	           array(&pa, TILEATOM__DTYPE__FLOAT64, 0, NULL, &pad, 8),
	           options(&o, TILEATOM__SEM__ACQUIRE, TILEATOM__SCOPE__GPU,
	                   TILEATOM__SPACE__GLOBAL, false, false,
	                   array(&ma, TILEATOM__DTYPE__BOOL, 1, g2, gm, sizeof(gm))));
	int64_t wo[2] = {1, 1}, ws[2] = {3, 2};
	add_memory(&s, M_ATOMIC_LOAD, "g", region(&ra, 2, wo, ws), NULL, NULL, NULL,
	           options(&o, TILEATOM__SEM__ACQUIRE, TILEATOM__SCOPE__SYS,
	                   TILEATOM__SPACE__GLOBAL, false, false, NULL));
	save(&s, "gather_load");

	/* scatter store on f with flat offsets; atomic store (release) to d via addr.region;
	 * a scatter-addressed gather from c */
	seed_init(&s);
	int64_t so[2] = {31, 0}, sv[2] = {-5, 5}, s2[1] = {2};
	array(&ia, TILEATOM__DTYPE__INT64, 1, s2, so, sizeof(so));
	xa.n_indices = 1;
	xa.indices = ind1;
	xa.flat = true;
	add_memory(&s, M_SCATTER_STORE, "f", NULL, &ad,
	           array(&va, TILEATOM__DTYPE__INT64, 1, s2, sv, sizeof(sv)), NULL, NULL);
	Tileatom__Addressing adr = TILEATOM__ADDRESSING__INIT;
	int64_t dro[2] = {2, 2}, drs[2] = {2, 3};
	float dv = 9.0f;
	adr.form_case = TILEATOM__ADDRESSING__FORM_REGION;
	adr.region = region(&rb, 2, dro, drs);
	add_memory(&s, M_ATOMIC_STORE, "d", NULL, &adr,
	           array(&va, TILEATOM__DTYPE__FLOAT32, 0, NULL, &dv, 4), NULL,
	           options(&o, TILEATOM__SEM__RELEASE, TILEATOM__SCOPE__GPU,
	                   TILEATOM__SPACE__GLOBAL, false, false, NULL));
	Tileatom__Addressing ads = TILEATOM__ADDRESSING__INIT;
	Tileatom__ScatterAddr sa = TILEATOM__SCATTER_ADDR__INIT;
	int64_t ci1[3] = {1, 1, 2}, cdx[2] = {2, 0};
	sa.dim = 2;
	sa.indices = array(&ic, TILEATOM__DTYPE__INT64, 3, ci1, cdx, sizeof(cdx));
	ads.form_case = TILEATOM__ADDRESSING__FORM_SCATTER;
	ads.scatter = &sa;
	add_memory(&s, M_GATHER, "c", NULL, &ads, NULL, NULL, NULL);
	save(&s, "stores_scatter_gather");

	/* write a region of b, then read a region of b and all of d */
	seed_init(&s);
	int64_t bo[2] = {1, 2}, bs[2] = {2, 3};
	uint16_t bv[6] = {0x3c00, 0x4000, 0x4200, 0x0001, 0x8001, 0x7bff};
	add_write(&s, "b", region(&ra, 2, bo, bs),
	          array(&va, TILEATOM__DTYPE__FLOAT16, 2, bs, bv, sizeof(bv)));
	add_read(&s, "b", region(&rb, 2, bo, NULL));
	add_read(&s, "d", NULL);
	save(&s, "write_read");

	/* a new float32 tile: shared-space add of a broadcast row over it, then min with NaN */
	seed_init(&s);
	int64_t t2[2] = {16, 16}, r16[1] = {16};
	float row[16];
	for (int i = 0; i < 16; i++)
		row[i] = (float)i - 7.5f;
	add_create(&s, "m", TILEATOM__DTYPE__FLOAT32, 2, t2, NULL, 0);
	add_elementwise(&s, "m", TILEATOM__OP__ADD, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT32, 1, r16, row, sizeof(row)), NULL,
	                options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                        TILEATOM__SPACE__SHARED, false, false, NULL));
	uint32_t qnan = 0x7fc00001u;
	add_elementwise(&s, "m", TILEATOM__OP__MIN, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT32, 0, NULL, &qnan, 4), NULL,
	                options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                        TILEATOM__SPACE__GLOBAL, false, true, NULL));
	add_describe_destroy(&s, "m", true);
	save(&s, "create_shared");

	/* float64 add, sub and max on g, one with a NaN operand */
	seed_init(&s);
	double dvals[3] = {0.5, -1e308, 3.0};
	uint64_t dnan = UINT64_C(0x7ff8000000000123);
	int64_t g3[1] = {3};
	add_elementwise(&s, "g", TILEATOM__OP__ADD, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT64, 1, g3, dvals, sizeof(dvals)), NULL,
	                options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                        TILEATOM__SPACE__GLOBAL, false, true, NULL));
	add_elementwise(&s, "g", TILEATOM__OP__SUB, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT64, 0, NULL, &dnan, 8), NULL,
	                options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                        TILEATOM__SPACE__SHARED, false, false, NULL));
	add_elementwise(&s, "g", TILEATOM__OP__MAX, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT64, 1, g3, dvals, sizeof(dvals)), NULL,
	                options(&o, TILEATOM__SEM__ACQ_REL, TILEATOM__SCOPE__GPU,
	                        TILEATOM__SPACE__GLOBAL, false, false, NULL));
	save(&s, "float64");

	/* a large tile (float32 [160, 128]): requests big enough for the worker pool (whole
	 * tile add, shared-space add of a broadcast row, a 160 x 128 broadcast of two index
	 * arrays), a whole-tile read over max_frame, and a small read */
	seed_init(&s);
	int64_t l2[2] = {160, 128}, l1[1] = {128}, lc[2] = {160, 1}, lr[2] = {1, 128};
	static int32_t seq[160];
	static float lrow[128];
	for (int i = 0; i < 160; i++)
		seq[i] = i;
	for (int i = 0; i < 128; i++)
		lrow[i] = 0.25f * (float)i;
	float lone = 1.0f;
	add_create(&s, "L", TILEATOM__DTYPE__FLOAT32, 2, l2, &lone, 4);
	add_elementwise(&s, "L", TILEATOM__OP__ADD, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT32, 0, NULL, &lone, 4), NULL, NULL);
	add_elementwise(&s, "L", TILEATOM__OP__ADD, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT32, 1, l1, lrow, sizeof(lrow)), NULL,
	                options(&o, TILEATOM__SEM__RELEASE, TILEATOM__SCOPE__GPU,
	                        TILEATOM__SPACE__SHARED, false, false, NULL));
	array(&ia, TILEATOM__DTYPE__INT32, 2, lc, seq, 160 * 4);
	array(&ib, TILEATOM__DTYPE__INT32, 2, lr, seq, 128 * 4);
	add_indexed(&s, "L", TILEATOM__OP__MAX, NULL, 2, ind2, false,
	            array(&va, TILEATOM__DTYPE__FLOAT32, 1, l1, lrow, sizeof(lrow)), NULL,
	            options(&o, TILEATOM__SEM__RELAXED, TILEATOM__SCOPE__GPU,
	                    TILEATOM__SPACE__SHARED, false, false, NULL));
	add_read(&s, "L", NULL);
	int64_t lo[2] = {159, 120};
	add_read(&s, "L", region(&ra, 2, lo, NULL));
	save(&s, "large_tile");

	/* errors: unknown tile, bad op, region outside the tile, wrong dtype, junk bytes */
	seed_init(&s);
	int64_t big[1] = {100};
	add_elementwise(&s, "nope", TILEATOM__OP__ADD, NULL,
	                array(&va, TILEATOM__DTYPE__INT32, 0, NULL, &ten, 4), NULL, NULL);
	add_elementwise(&s, "a", (Tileatom__Op)12, NULL,
	                array(&va, TILEATOM__DTYPE__INT32, 0, NULL, &ten, 4), NULL, NULL);
	add_elementwise(&s, "a", TILEATOM__OP__ADD, region(&ra, 1, o2, big),
	                array(&va, TILEATOM__DTYPE__INT32, 0, NULL, &ten, 4), NULL, NULL);
	add_elementwise(&s, "a", TILEATOM__OP__ADD, NULL,
	                array(&va, TILEATOM__DTYPE__FLOAT32, 0, NULL, &ten, 4), NULL, NULL);
	s.buf[s.len++] = 3;
	s.buf[s.len++] = 0;
	s.buf[s.len++] = 0xff;
	s.buf[s.len++] = 0xff;
	s.buf[s.len++] = 0xff;
	save(&s, "errors");
}

#ifndef TA_FUZZ_SEEDS_NO_MAIN
/* Writes the seeds into argv[1]. */
int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	out_dir = argv[1];
	write_seeds();
	printf("fuzz_seeds: wrote %d seeds to %s\n", n_written, out_dir);
	return 0;
}
#endif
