/* tac_codec.c: builds protobuf-c Request messages from the public argument structs and
 * converts a tile description that comes back (responses are checked beside their decoder,
 * tac_wire.c). Requests borrow the caller's operand memory (the only copy made is when the
 * message is packed into a frame). Before anything is sent, what can be checked without the
 * tile is checked against the core's table with the daemon's own function
 * (ta_check_variant: op in family, sem, scope, space, output), and the encoding's needs
 * (known dtypes, ranks, byte counts, names); the daemon validates the rest against the tile. */
#include "tac_internal.h"

#include <stdlib.h>
#include <string.h>

#include "ta_types.h"

/* Checks a tile name argument (the daemon checks the character set). */
static int check_name(const char *name, const char *what, tileatom_error *err)
{
	if (!name || !*name)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: no tile name given", what);
	if (strlen(name) > TILEATOM_NAME_MAX)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s: tile name is longer than %d bytes", what, TILEATOM_NAME_MAX);
	return TILEATOM_OK;
}

/* Converts a public array into a wire Array that borrows its data; what names it in
 * messages. Checks dtype, rank, extents and the byte count. */
static int build_array(Tileatom__Array *dst, const tileatom_array *src, const char *what,
                       tileatom_error *err)
{
	*dst = (Tileatom__Array)TILEATOM__ARRAY__INIT; /* inline, not a call and a copy */
	size_t es = ta_dtype_size((ta_dtype)src->dtype);
	if (es == 0)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: unknown dtype %d", what,
		               (int)src->dtype);
	if (src->rank < 0 || src->rank > TILEATOM_MAX_RANK)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: rank %d is not in 0..%d",
		               what, src->rank, TILEATOM_MAX_RANK);
	size_t bytes = es;
	for (int a = 0; a < src->rank; a++) {
		if (src->shape[a] < 1)
			return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
			               "%s: extent %lld along axis %d must be at least 1", what,
			               (long long)src->shape[a], a);
		if ((uint64_t)src->shape[a] > (uint64_t)(SIZE_MAX / bytes))
			return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: too many elements",
			               what);
		bytes *= (size_t)src->shape[a];
	}
	if (!src->data)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: no data given", what);
	dst->dtype = (Tileatom__DType)src->dtype;
	dst->n_shape = (size_t)src->rank;
	dst->shape = (int64_t *)src->shape;
	dst->data.len = bytes;
	dst->data.data = (uint8_t *)src->data;
	return TILEATOM_OK;
}

/* Converts the optional public region src (rank 1..4, extents >= 1) into the wire Region
 * dst; *out gets dst, or NULL when src is NULL. */
static int build_region(Tileatom__Region *dst, Tileatom__Region **out, const tileatom_region *src,
                        const char *what, tileatom_error *err)
{
	*out = NULL;
	if (!src)
		return TILEATOM_OK;
	tileatom__region__init(dst);
	if (src->rank < 1 || src->rank > TILEATOM_MAX_RANK)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: rank %d is not in 1..%d",
		               what, src->rank, TILEATOM_MAX_RANK);
	for (int a = 0; a < src->rank; a++)
		if (src->origin[a] < 0 || src->shape[a] < 1)
			return tac_err(
			    err, TILEATOM_E_INVALID_ARGUMENT,
			    "%s: axis %d has origin %lld and extent %lld (need origin >= "
			    "0, extent >= 1)",
			    what, a, (long long)src->origin[a], (long long)src->shape[a]);
	dst->n_origin = (size_t)src->rank;
	dst->origin = (int64_t *)src->origin;
	dst->n_shape = (size_t)src->rank;
	dst->shape = (int64_t *)src->shape;
	*out = dst;
	return TILEATOM_OK;
}

/* ta_check_variant for a request of kind (its family), with its error in the daemon's
 * words; out of line, so that its 256-byte error (and the stack guard that comes with it)
 * costs only when it runs. */
static __attribute__((noinline)) int variant_check(tileatom_request_kind kind, ta_op op, ta_sem sem,
                                                   ta_scope scope, ta_space space, bool want_old,
                                                   tileatom_error *err)
{
	ta_error terr;
	terr.code = TA_OK;
	terr.msg[0] = '\0';
	if (ta_check_variant(ta_req_family((ta_req_kind)kind), op, sem, scope, space, want_old,
	                     &terr) != TA_OK)
		return tac_err(err, (int)terr.code, "%s: %s", ta_req_name((ta_req_kind)kind),
		               terr.msg);
	return TILEATOM_OK;
}

/* Fills the wire Options from opts (NULL: defaults) for a request of kind running op (RMW
 * kinds; memory kinds take theirs from the table), after checking them against the core's
 * table exactly as the daemon does (ta_check_variant); want_old is set for ops that always
 * return what they read. */
static int build_options(tac_msg *m, tileatom_request_kind kind, tileatom_op op,
                         const tileatom_op_options *opts, tileatom_error *err)
{
	tileatom_op_options defaults = TILEATOM_OP_OPTIONS_INIT;
	if (!opts)
		opts = &defaults;
	Tileatom__Options *o = &m->options;
	*o = (Tileatom__Options)TILEATOM__OPTIONS__INIT;
	/* the core's table decides, with the daemon's own words (ta_check_variant) */
	ta_op core_op = ta_req_op((ta_req_kind)kind);
	if (core_op == TA_OP_NONE)
		core_op = (ta_op)op;
	bool force_want_old = ta_op_output(core_op) == TA_OUTPUT_ALWAYS;
	/* The verdict is a function of the variant alone: the last legal one is remembered in
	 * one word (the kind and the variant, each below 256, and a valid bit; relaxed atomics,
	 * since any word a thread stored was legal), and a caller repeating one request shape
	 * skips the check (about 80 instructions of a pipelined add). */
	static uint64_t last_legal;
	uint64_t key = UINT64_C(1) << 63 | (uint64_t)(uint8_t)kind |
	               (uint64_t)(uint8_t)core_op << 8 | (uint64_t)(uint8_t)opts->sem << 16 |
	               (uint64_t)(uint8_t)opts->scope << 24 | (uint64_t)(uint8_t)opts->space << 32 |
	               (uint64_t)opts->want_old << 40;
	bool keyed = ((unsigned)kind | (unsigned)core_op | (unsigned)opts->sem |
	              (unsigned)opts->scope | (unsigned)opts->space) < 256;
	if (!keyed || __atomic_load_n(&last_legal, __ATOMIC_RELAXED) != key) {
		int rc = variant_check(kind, core_op, (ta_sem)opts->sem, (ta_scope)opts->scope,
		                       (ta_space)opts->space, opts->want_old, err);
		if (rc != TILEATOM_OK)
			return rc;
		if (keyed)
			__atomic_store_n(&last_legal, key, __ATOMIC_RELAXED);
	}
	o->sem = (Tileatom__Sem)opts->sem;
	o->scope = (Tileatom__Scope)opts->scope;
	o->space = (Tileatom__Space)opts->space;
	o->no_bounds_check = !opts->check_bounds;
	o->want_old = opts->want_old || force_want_old;
	m->want_old_asked = opts->want_old;
	if (opts->mask) {
		int rc = build_array(&m->mask, opts->mask, "mask", err);
		if (rc != TILEATOM_OK)
			return rc;
		o->mask = &m->mask;
	}
	return TILEATOM_OK;
}

/* Starts m as a request of kind: clears the fields before body, marks every array unused
 * (see tac_msg) and sets the body (the union in m) to protobuf-c's default, found from the
 * Request descriptor by the body's field number (the kind); returns the body. */
static void *msg_begin(tac_msg *m, tileatom_request_kind kind)
{
	memset(m, 0, offsetof(tac_msg, body));
#define UNUSED_ARRAY(a) ((a).data.len = 0, (a).data.data = NULL, (a).shared = NULL)
	UNUSED_ARRAY(m->values);
	UNUSED_ARRAY(m->compare);
	UNUSED_ARRAY(m->mask);
	UNUSED_ARRAY(m->padding);
	UNUSED_ARRAY(m->fill);
	for (int i = 0; i < TILEATOM_MAX_RANK; i++)
		UNUSED_ARRAY(m->index[i]);
#undef UNUSED_ARRAY
	m->req = (Tileatom__Request)TILEATOM__REQUEST__INIT;
	m->kind = kind;
	m->req.body_case = (Tileatom__Request__BodyCase)kind;
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field(&tileatom__request__descriptor, (unsigned)kind);
	void *body = &m->body;
	protobuf_c_message_init(f->descriptor, body);
	memcpy((uint8_t *)&m->req + f->offset, &body, sizeof(body)); /* the oneof's pointer */
	return body;
}

int tac_build_empty(tac_msg *m, tileatom_request_kind kind)
{
	msg_begin(m, kind);
	return TILEATOM_OK;
}

int tac_build_create(tac_msg *m, const char *name, tileatom_dtype dtype, int rank,
                     const int64_t *shape, const void *fill, tileatom_error *err)
{
	Tileatom__CreateTileRequest *b = msg_begin(m, TILEATOM_REQ_CREATE);
	int rc = check_name(name, "create", err);
	if (rc != TILEATOM_OK)
		return rc;
	if (!ta_dtype_is_tile((ta_dtype)dtype))
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "create %s: %d is not a tile dtype", name, (int)dtype);
	if (rank < 1 || rank > TILEATOM_MAX_RANK || !shape)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "create %s: rank %d is not in 1..%d", name, rank, TILEATOM_MAX_RANK);
	for (int a = 0; a < rank; a++) {
		if (shape[a] < 1)
			return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
			               "create %s: extent %lld along axis %d must be at least 1",
			               name, (long long)shape[a], a);
		m->shape_copy[a] = shape[a];
	}
	b->name = (char *)name;
	b->dtype = (Tileatom__DType)dtype;
	b->n_shape = (size_t)rank;
	b->shape = m->shape_copy;
	if (fill) {
		tileatom__array__init(&m->fill);
		m->fill.dtype = (Tileatom__DType)dtype;
		m->fill.data.len = tileatom_dtype_size(dtype);
		m->fill.data.data = (uint8_t *)fill;
		b->fill = &m->fill;
	}
	return TILEATOM_OK;
}

int tac_build_named(tac_msg *m, tileatom_request_kind kind, const char *name, tileatom_error *err)
{
	/* destroy and describe: both bodies hold only the name */
	_Static_assert(offsetof(Tileatom__DestroyTileRequest, name) ==
	                   offsetof(Tileatom__DescribeTileRequest, name),
	               "one place for the name");
	Tileatom__DescribeTileRequest *b = msg_begin(m, kind);
	b->name = (char *)name;
	return check_name(name, ta_req_name((ta_req_kind)kind), err);
}

int tac_build_read(tac_msg *m, const char *tile, const tileatom_region *region, tileatom_error *err)
{
	Tileatom__ReadRegionRequest *b = msg_begin(m, TILEATOM_REQ_READ);
	b->tile = (char *)tile;
	int rc = check_name(tile, "read", err);
	return rc == TILEATOM_OK ? build_region(&m->region, &b->region, region, "read region", err)
	                         : rc;
}

int tac_build_write(tac_msg *m, const char *tile, const tileatom_region *region,
                    const tileatom_array *values, tileatom_error *err)
{
	Tileatom__WriteRegionRequest *b = msg_begin(m, TILEATOM_REQ_WRITE);
	b->tile = (char *)tile;
	b->values = &m->values;
	int rc = check_name(tile, "write", err);
	if (rc == TILEATOM_OK)
		rc = build_region(&m->region, &b->region, region, "write region", err);
	if (rc == TILEATOM_OK && !values)
		rc = tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "write: no values given");
	return rc == TILEATOM_OK ? build_array(&m->values, values, "values", err) : rc;
}

/* Builds the ScatterAddr of a request (what names it) along dim from n_index arrays (one). */
static int build_scatter_addr(tac_msg *m, const char *what, int dim, int n_index,
                              const tileatom_array *indices, tileatom_error *err)
{
	if (dim < 0 || dim >= TILEATOM_MAX_RANK)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s: scatter dim %d is not in 0..%d", what, dim,
		               TILEATOM_MAX_RANK - 1);
	if (!indices || n_index != 1)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s: scatter addressing takes one index array", what);
	m->scatter_addr = (Tileatom__ScatterAddr)TILEATOM__SCATTER_ADDR__INIT;
	m->scatter_addr.dim = (uint32_t)dim;
	m->scatter_addr.indices = &m->index[0];
	return build_array(&m->index[0], indices, "indices", err);
}

/* Builds the IndexedAddr from n_index arrays. */
static int build_indexed_addr(tac_msg *m, int n_index, const tileatom_array *indices, bool flat,
                              tileatom_error *err)
{
	if (!indices || n_index < 1 || n_index > TILEATOM_MAX_RANK)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "indexed: %d index arrays given (need 1..%d)", indices ? n_index : 0,
		               TILEATOM_MAX_RANK);
	if (flat && n_index != 1)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "indexed: flat addressing takes one index array, not %d", n_index);
	/* the names, not formatted per request (snprintf was 7% of a pipelined add's cost) */
	static const char *const what[TILEATOM_MAX_RANK] = {"index array 0", "index array 1",
	                                                    "index array 2", "index array 3"};
	_Static_assert(TILEATOM_MAX_RANK == 4, "one name per index array");
	for (int i = 0; i < n_index; i++) {
		int rc = build_array(&m->index[i], &indices[i], what[i], err);
		if (rc != TILEATOM_OK)
			return rc;
		m->index_ptr[i] = &m->index[i];
	}
	m->indexed_addr = (Tileatom__IndexedAddr)TILEATOM__INDEXED_ADDR__INIT;
	m->indexed_addr.n_indices = (size_t)n_index;
	m->indexed_addr.indices = m->index_ptr;
	m->indexed_addr.flat = flat;
	return TILEATOM_OK;
}

int tac_build_atomic(tac_msg *m, const tac_split_req *rq, tileatom_error *err)
{
	tileatom_request_kind kind = rq->kind;
	msg_begin(m, kind);
	Tileatom__Region *region = NULL;
	void *addr = kind == TILEATOM_REQ_SCATTER   ? (void *)&m->scatter_addr
	             : kind == TILEATOM_REQ_INDEXED ? (void *)&m->indexed_addr
	                                            : NULL;
	bool cas = ta_op_operands((ta_op)rq->op) == TA_OPERANDS_VALUES_COMPARE; /* and compare */
	int rc = check_name(rq->tile, ta_req_name((ta_req_kind)kind), err);
	if (rc == TILEATOM_OK && !ta_op_is_rmw((ta_op)rq->op))
		rc = tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "unknown atomic op %d", (int)rq->op);
	/* the op in the family and the options, in the daemon's words (ta_check_variant) */
	if (rc == TILEATOM_OK)
		rc = build_options(m, kind, rq->op, rq->opts, err);
	if (rc == TILEATOM_OK)
		rc = build_region(&m->region, &region, rq->region, "region", err);
	if (rc == TILEATOM_OK && kind == TILEATOM_REQ_INDEXED)
		rc = build_indexed_addr(m, rq->n_index, rq->indices, rq->flat, err);
	if (rc == TILEATOM_OK && kind == TILEATOM_REQ_SCATTER)
		rc = build_scatter_addr(m, "scatter", rq->dim, rq->indices ? 1 : 0, rq->indices,
		                        err);
	if (rc == TILEATOM_OK && !rq->values)
		rc = tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: no values given",
		             tileatom_op_name(rq->op));
	if (rc == TILEATOM_OK)
		rc = build_array(&m->values, rq->values, cas ? "desired" : "values", err);
	if (rc == TILEATOM_OK && cas != (rq->compare != NULL))
		rc = tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		             cas ? "%s: no expected (compare) values given"
		                 : "%s: compare values are only for cas",
		             tileatom_op_name(rq->op));
	if (rc == TILEATOM_OK && cas)
		rc = build_array(&m->compare, rq->compare, "expected", err);
	if (rc == TILEATOM_OK)
		tac_wire_set_body(m, rq->tile, (int)rq->op, region, addr, &m->values,
		                  cas ? &m->compare : NULL, &m->options);
	return rc;
}

tileatom_op_options tac_atomic_at_options(const tileatom_op_options *opts)
{
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	if (opts)
		o = *opts;
	o.want_old = true;
	o.old_out = NULL;
	o.old_out_size = 0;
	return o;
}

int tac_build_atomic_at(tac_msg *m, const char *tile, tileatom_op op, int64_t flat_index,
                        tileatom_dtype dtype, const void *value, const void *compare,
                        const tileatom_op_options *opts, tileatom_array *value_arr,
                        tileatom_array *compare_arr, tileatom_error *err)
{
	tileatom_op_options o = tac_atomic_at_options(opts);
	if (!value)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: no value given",
		               tileatom_op_name(op));
	*value_arr = (tileatom_array){.dtype = dtype, .rank = 0, .data = value};
	*compare_arr = (tileatom_array){.dtype = dtype, .rank = 0, .data = compare};
	/* the index lives in *m, which tac_build_atomic clears: set once it is built */
	tileatom_array index = {.dtype = TILEATOM_INT64, .rank = 0, .data = &m->scalar_index};
	bool cas = ta_op_operands((ta_op)op) == TA_OPERANDS_VALUES_COMPARE;
	tac_split_req rq = {.kind = TILEATOM_REQ_INDEXED,
	                    .tile = tile,
	                    .op = op,
	                    .n_index = 1,
	                    .indices = &index,
	                    .flat = true,
	                    .values = value_arr,
	                    .compare = cas ? compare_arr : NULL,
	                    .opts = &o};
	int rc = tac_build_atomic(m, &rq, err);
	if (rc != TILEATOM_OK)
		return rc;
	m->scalar_index = flat_index;
	m->index[0].shape = NULL; /* (it pointed into the local array; a scalar has none) */
	return TILEATOM_OK;
}

int tac_build_memory(tac_msg *m, tileatom_request_kind kind, const char *tile,
                     const tileatom_region *window, const tileatom_addr *addr,
                     const tileatom_array *operand, const tileatom_op_options *opts,
                     tileatom_error *err)
{
	if (ta_req_family((ta_req_kind)kind) != TA_FAMILY_MEMORY)
		return tac_err(err, TILEATOM_E_INTERNAL, "not a memory op: %d", (int)kind);
	msg_begin(m, kind);
	const char *what = ta_req_name((ta_req_kind)kind);
	ta_op mop = ta_req_op((ta_req_kind)kind);
	Tileatom__Region *win = NULL;
	int rc = check_name(tile, what, err);
	if (rc == TILEATOM_OK)
		rc = build_region(&m->region, &win, window, "window", err);
	if (rc != TILEATOM_OK)
		return rc;
	/* Addressing: NULL means element-wise over the whole tile. */
	tileatom_addr whole = {TILEATOM_ADDR_REGION, NULL, 0, 0, NULL};
	if (!addr)
		addr = &whole;
	tileatom__addressing__init(&m->addressing);
	switch (addr->kind) {
	case TILEATOM_ADDR_REGION:
		m->addressing.form_case = TILEATOM__ADDRESSING__FORM_REGION;
		tileatom__region__init(&m->addr_region);
		rc = build_region(&m->addr_region, &m->addressing.region, addr->region, "region",
		                  err);
		m->addressing.region = &m->addr_region; /* (empty without a region) */
		break;
	case TILEATOM_ADDR_SCATTER:
		m->addressing.form_case = TILEATOM__ADDRESSING__FORM_SCATTER;
		m->addressing.scatter = &m->scatter_addr;
		rc = build_scatter_addr(m, what, addr->dim, addr->n_index, addr->index, err);
		break;
	case TILEATOM_ADDR_INDEXED:
	case TILEATOM_ADDR_FLAT:
		m->addressing.form_case = TILEATOM__ADDRESSING__FORM_INDEXED;
		m->addressing.indexed = &m->indexed_addr;
		rc = build_indexed_addr(m, addr->n_index, addr->index,
		                        addr->kind == TILEATOM_ADDR_FLAT, err);
		break;
	default:
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: unknown addressing kind %d",
		               what, (int)addr->kind);
	}
	if (rc == TILEATOM_OK)
		rc = build_options(m, kind, TILEATOM_OP_NONE, opts, err);
	if (rc == TILEATOM_OK && operand && kind == TILEATOM_REQ_ATOMIC_LOAD)
		rc = tac_err(err, TILEATOM_E_INTERNAL, "atomic_load takes no operand");
	else if (rc == TILEATOM_OK && operand)
		rc = build_array(&m->values, operand,
		                 kind == TILEATOM_REQ_GATHER ? "padding" : "values", err);
	else if (rc == TILEATOM_OK && ta_op_operands(mop) == TA_OPERANDS_VALUES)
		rc = tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s: no values given", what);
	if (rc == TILEATOM_OK)
		tac_wire_set_body(m, tile, 0, win, &m->addressing, operand ? &m->values : NULL,
		                  NULL, &m->options);
	return rc;
}

int tac_tile_info_from_wire(tileatom_tile_info *dst, const Tileatom__TileInfo *src,
                            tileatom_error *err)
{
	memset(dst, 0, sizeof(*dst));
	if (!src)
		return tac_err(err, TILEATOM_E_PROTOCOL, "tile info missing in the response");
	size_t len = src->name ? strlen(src->name) : 0;
	if (len > TILEATOM_NAME_MAX)
		return tac_err(err, TILEATOM_E_PROTOCOL, "tile name of %zu bytes in the response",
		               len);
	if (src->n_shape < 1 || src->n_shape > TILEATOM_MAX_RANK)
		return tac_err(err, TILEATOM_E_PROTOCOL, "tile rank %zu in the response",
		               src->n_shape);
	if (!ta_dtype_is_tile((ta_dtype)src->dtype))
		return tac_err(err, TILEATOM_E_PROTOCOL, "tile dtype %d in the response",
		               (int)src->dtype);
	/* Callers size buffers and loops from these extents: each is at least 1 and their
	 * product times the element size fits an int64_t. */
	uint64_t elements = 1;
	for (size_t i = 0; i < src->n_shape; i++) {
		if (src->shape[i] < 1 || (uint64_t)src->shape[i] > (UINT64_C(1) << 56) / elements)
			return tac_err(err, TILEATOM_E_PROTOCOL,
			               "tile extent %lld along axis %zu in the response",
			               (long long)src->shape[i], i);
		elements *= (uint64_t)src->shape[i];
		dst->shape[i] = src->shape[i];
	}
	if (len) /* (terminated: dst was cleared) */
		memcpy(dst->name, src->name, len);
	dst->dtype = (tileatom_dtype)src->dtype;
	dst->rank = (int)src->n_shape;
	dst->bytes = src->bytes;
	dst->private_tile = src->private_tile;
	return TILEATOM_OK;
}

int tac_parse_address(const char *address, bool *is_unix, char **host, char **port,
                      tileatom_error *err)
{
	*host = NULL;
	*port = NULL;
	*is_unix = false;
	if (!address || !*address)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "empty daemon address");
	const char *colon = strrchr(address, ':');
	if (strchr(address, '/') || !colon) {
		*is_unix = true;
		return TILEATOM_OK;
	}
	const char *h = address;
	size_t hlen = (size_t)(colon - address);
	if (address[0] == '[') {
		const char *close = strchr(address, ']');
		if (!close || close + 1 != colon)
			return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
			               "bad address '%s' (expected [v6addr]:port)", address);
		h = address + 1;
		hlen = (size_t)(close - h);
	}
	const char *p = colon + 1;
	if (hlen == 0 || !*p)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "bad address '%s' (expected a socket path or host:port)", address);
	for (const char *q = p; *q; q++)
		if (*q < '0' || *q > '9')
			return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
			               "bad port '%s' in address '%s'", p, address);
	long pv = strtol(p, NULL, 10);
	if (pv < 1 || pv > 65535)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "port %s is not in 1..65535", p);
	*host = strndup(h, hlen);
	*port = strdup(p);
	if (!*host || !*port) {
		free(*host);
		free(*port);
		*host = *port = NULL;
		return tac_err(err, TILEATOM_E_NOMEM, "out of memory");
	}
	return TILEATOM_OK;
}
