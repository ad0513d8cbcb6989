/* ta_plan.c: validation of decoded requests against a tile and the legality table, and
 * their resolution into a ta_plan (see ta_plan.h for the element semantics).
 *
 * Every rejection names the problem: which operand, which axis, which extent. A request
 * that fails here has touched nothing. With bounds checking off the indices are scanned
 * here, so a backend never sees an out-of-range element it would have to reject. */
#include "ta_plan.h"

#include "ta_addr.h"

#include <stdio.h>
#include <string.h>

/* Largest element count of any request or tile (2^40): keeps offset arithmetic far from
 * int64 overflow whatever the strides. */
#define TA_MAX_ELEMENTS (INT64_C(1) << 40)
/* Most elements one request may address through broadcasting (2^32), unless its region
 * itself is larger: tiny index arrays must not make one request run for hours. */
#define TA_MAX_BROADCAST (INT64_C(1) << 32)

void ta_request_init(ta_request *req)
{
	memset(req, 0, sizeof(*req));
	req->sem = TA_SEM_RELAXED;
	req->scope = TA_SCOPE_GPU;
	req->space = TA_SPACE_GLOBAL;
	req->check_bounds = true;
}

void ta_request_region(ta_request *req, ta_family family, ta_op op)
{
	ta_request_init(req);
	req->family = family;
	req->op = op;
	req->addr = TA_ADDR_REGION;
}

uint64_t ta_tile_bytes(const ta_tile_shape *tile)
{
	uint64_t n = ta_dtype_size(tile->dtype);
	if (n == 0 || tile->rank < 1 || tile->rank > TA_MAX_RANK)
		return 0;
	for (int a = 0; a < tile->rank; a++) {
		if (tile->shape[a] < 1 || (uint64_t)tile->shape[a] > (uint64_t)TA_MAX_ELEMENTS)
			return 0;
		n *= (uint64_t)tile->shape[a];
		if (n > (uint64_t)TA_MAX_ELEMENTS * 8u)
			return 0;
	}
	return n;
}

ta_status ta_array_view_check(const ta_array_view *v, const char *what, ta_error *err)
{
	if (!v->present)
		return TA_OK;
	size_t es = ta_dtype_size(v->dtype);
	if (es == 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: unknown or missing dtype", what);
	if (v->rank < 0 || v->rank > TA_MAX_RANK)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: rank %d is over the limit of %d",
		                    what, v->rank, TA_MAX_RANK);
	int64_t n = 1;
	for (int a = 0; a < v->rank; a++) {
		if (v->shape[a] < 1)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "%s: extent %lld along axis %d must be at least 1",
			                    what, (long long)v->shape[a], a);
		if (v->shape[a] > TA_MAX_ELEMENTS || n > TA_MAX_ELEMENTS / v->shape[a])
			return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: too many elements",
			                    what);
		n *= v->shape[a];
	}
	if ((uint64_t)v->nbytes != (uint64_t)n * es || (n > 0 && v->data == NULL))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s: %zu bytes of data do not match %lld elements of %s (%llu "
		                    "bytes expected)",
		                    what, v->nbytes, (long long)n, ta_dtype_name(v->dtype),
		                    (unsigned long long)((uint64_t)n * es));
	return TA_OK;
}

/* Formats a shape as "(2, 3)" into buf. */
static const char *shape_str(const int64_t *shape, int rank, char *buf, size_t n)
{
	size_t used = 0;
	used += (size_t)snprintf(buf + used, n - used, "(");
	for (int a = 0; a < rank && used < n; a++)
		used += (size_t)snprintf(buf + used, n - used, "%s%lld", a ? ", " : "",
		                         (long long)shape[a]);
	if (used < n)
		snprintf(buf + used, n - used, rank == 1 ? ",)" : ")");
	return buf;
}

/* Sets the operand's strides so that view broadcasts (numpy rules, trailing axes aligned)
 * to the iteration shape without extending it. op is all zero (ta_plan_build cleared the
 * plan): only the strides of the view's axes are written. */
static ta_status bind_operand(ta_operand *op, const ta_array_view *v, const int64_t *shape,
                              int rank, const char *what, ta_error *err)
{
	op->dtype = v->dtype;
	op->data = v->data;
	op->device = v->device;
	if (v->rank > rank) {
		char a[64], b[64];
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s shape %s does not broadcast to the element shape %s", what,
		                    shape_str(v->shape, v->rank, a, sizeof(a)),
		                    shape_str(shape, rank, b, sizeof(b)));
	}
	int64_t stride = 1;
	for (int i = v->rank - 1; i >= 0; i--) {
		int axis = rank - v->rank + i;
		if (v->shape[i] == shape[axis]) {
			op->stride[axis] = shape[axis] == 1 ? 0 : stride;
		} else if (v->shape[i] == 1) {
			op->stride[axis] = 0;
		} else {
			char a[64], b[64];
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "%s shape %s does not broadcast to the element shape %s (axis %d: %lld "
			    "vs %lld)",
			    what, shape_str(v->shape, v->rank, a, sizeof(a)),
			    shape_str(shape, rank, b, sizeof(b)), axis, (long long)v->shape[i],
			    (long long)shape[axis]);
		}
		stride *= v->shape[i];
	}
	return TA_OK;
}

/* ta_array_view_check, with the common present scalar that passes checked inline (anything
 * else, and every failure with its message, goes the full way). */
static inline ta_status view_check(const ta_array_view *v, const char *what, ta_error *err)
{
	if (v->present && v->rank == 0 && v->data != NULL && v->nbytes != 0 &&
	    v->nbytes == ta_dtype_size(v->dtype))
		return TA_OK;
	return ta_array_view_check(v, what, err);
}

/* Checks an operand that must carry the tile's dtype. */
static ta_status check_data_operand(const ta_array_view *v, ta_dtype dtype, const char *what,
                                    ta_error *err)
{
	ta_status st = view_check(v, what, err);
	if (st != TA_OK)
		return st;
	if (v->dtype != dtype)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s dtype %s does not match the tile dtype %s", what,
		                    ta_dtype_name(v->dtype), ta_dtype_name(dtype));
	return TA_OK;
}

/* Checks an index operand: present, INT32 or INT64, consistent. */
static ta_status check_index(const ta_array_view *v, int i, ta_error *err)
{
	/* the operand's name for messages, without formatting on the happy path */
	static const char *const names[TA_MAX_RANK] = {"indices[0]", "indices[1]", "indices[2]",
	                                               "indices[3]"};
	_Static_assert(TA_MAX_RANK == 4, "one name per index array");
	const char *what = i >= 0 && i < TA_MAX_RANK ? names[i] : "indices[?]";
	if (!v->present)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s is missing", what);
	ta_status st = view_check(v, what, err);
	if (st != TA_OK)
		return st;
	if (v->dtype != TA_DTYPE_I32 && v->dtype != TA_DTYPE_I64)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s dtype %s is not an index type (int32 or int64)", what,
		                    ta_dtype_name(v->dtype));
	return TA_OK;
}

/* Checks the request against the table: the variant (ta_check_variant), the family's
 * addressing forms and the tile's dtype. */
static ta_status check_legality(const ta_tile_shape *tile, const ta_request *r, ta_error *err)
{
	ta_status st =
	    ta_check_variant(r->family, r->op, r->sem, r->scope, r->space, r->want_old, err);
	if (st != TA_OK)
		return st;
	if (!ta_family_addr_ok(r->family, r->addr)) {
		char allowed[128];
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s takes %s addressing, not %s",
		                    ta_family_noun(r->family),
		                    ta_family_addrs_text(r->family, allowed, sizeof(allowed)),
		                    ta_addr_name(r->addr));
	}
	if (!ta_op_accepts_dtype(r->op, tile->dtype)) {
		const char *on = ta_op_name(r->op);
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "op %s is not defined for dtype %s (%s needs an integer dtype)",
		                    on, ta_dtype_name(tile->dtype), on);
	}
	return TA_OK;
}

/* Fills the region window of the plan from the request (or the whole tile). */
static ta_status bind_region(ta_plan *p, const ta_tile_shape *t, const ta_request *r, ta_error *err)
{
	p->region_count = 1;
	for (int a = 0; a < t->rank; a++) {
		p->origin[a] = 0;
		p->extent[a] = t->shape[a];
	}
	if (r->has_region) {
		if (r->region_rank != t->rank)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "region rank %d does not match the tile rank %d",
			                    r->region_rank, t->rank);
		for (int a = 0; a < t->rank; a++) {
			int64_t o = r->region_origin[a], s = r->region_shape[a], end;
			if (o < 0 || s < 1 || o > t->shape[a] || s > t->shape[a] - o) {
				/* the wire gives any int64: the end of the box may not fit */
				if (__builtin_add_overflow(o, s, &end))
					return ta_error_set(
					    err, TA_INVALID_ARGUMENT,
					    "region origin %lld, extent %lld along axis %d is "
					    "outside the tile extent %lld",
					    (long long)o, (long long)s, a, (long long)t->shape[a]);
				return ta_error_set(
				    err, TA_INVALID_ARGUMENT,
				    "region [%lld, %lld) along axis %d is outside the tile "
				    "extent %lld",
				    (long long)o, (long long)end, a, (long long)t->shape[a]);
			}
			p->origin[a] = o;
			p->extent[a] = s;
		}
	}
	for (int a = 0; a < t->rank; a++)
		p->region_count *= p->extent[a];
	return TA_OK;
}

/* Computes the iteration shape and binds the index operands. */
static ta_status bind_addressing(ta_plan *p, const ta_tile_shape *t, const ta_request *r,
                                 ta_error *err)
{
	ta_status st;
	switch (r->addr) {
	case TA_ADDR_REGION:
		p->rank = t->rank;
		for (int a = 0; a < t->rank; a++)
			p->shape[a] = p->extent[a];
		p->n_index = 0;
		return TA_OK;
	case TA_ADDR_SCATTER: {
		if (r->n_index != 1)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "scatter addressing takes one indices array, got %d",
			                    r->n_index);
		if ((st = check_index(&r->index[0], 0, err)) != TA_OK)
			return st;
		const ta_array_view *iv = &r->index[0];
		if (r->scatter_dim < 0 || r->scatter_dim >= t->rank)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "scatter dim %lld is out of range for a rank-%d tile",
			                    (long long)r->scatter_dim, t->rank);
		if (iv->rank != t->rank)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "scatter indices have rank %d, the tile has rank %d",
			                    iv->rank, t->rank);
		for (int a = 0; a < t->rank; a++) {
			if (a != r->scatter_dim && iv->shape[a] > p->extent[a])
				return ta_error_set(
				    err, TA_INVALID_ARGUMENT,
				    "scatter indices extent %lld along axis %d exceeds the "
				    "region extent %lld",
				    (long long)iv->shape[a], a, (long long)p->extent[a]);
		}
		p->scatter_dim = (int)r->scatter_dim; /* in 0..rank-1: checked above */
		p->rank = iv->rank;
		memcpy(p->shape, iv->shape, sizeof(p->shape));
		p->n_index = 1;
		return bind_operand(&p->index[0], iv, p->shape, p->rank, "scatter indices", err);
	}
	case TA_ADDR_FLAT:
	case TA_ADDR_INDEXED: {
		int want = r->addr == TA_ADDR_FLAT ? 1 : t->rank;
		if (r->n_index != want)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    r->addr == TA_ADDR_FLAT
			        ? "flat addressing takes one offsets array, got %d"
			        : "indexed addressing needs one index array per tile axis "
			          "(%d), got %d",
			    r->addr == TA_ADDR_FLAT ? r->n_index : want, r->n_index);
		/* numpy broadcasting of all index arrays to a common shape. */
		int rank = 0;
		for (int i = 0; i < want; i++) {
			if ((st = check_index(&r->index[i], i, err)) != TA_OK)
				return st;
			if (r->index[i].rank > rank)
				rank = r->index[i].rank;
		}
		int64_t shape[TA_MAX_RANK];
		for (int a = 0; a < rank; a++)
			shape[a] = 1;
		for (int i = 0; i < want; i++) {
			const ta_array_view *iv = &r->index[i];
			for (int k = 0; k < iv->rank; k++) {
				int axis = rank - iv->rank + k;
				if (shape[axis] == 1)
					shape[axis] = iv->shape[k];
				else if (iv->shape[k] != 1 && iv->shape[k] != shape[axis])
					return ta_error_set(
					    err, TA_INVALID_ARGUMENT,
					    "index arrays do not broadcast together: indices[%d] "
					    "has extent %lld on broadcast axis %d, others %lld",
					    i, (long long)iv->shape[k], axis,
					    (long long)shape[axis]);
			}
		}
		p->rank = rank;
		memcpy(p->shape, shape, sizeof(int64_t) * (size_t)rank);
		p->n_index = want;
		for (int i = 0; i < want; i++)
			if ((st = bind_operand(&p->index[i], &r->index[i], p->shape, p->rank,
			                       "indices", err)) != TA_OK)
				return st;
		return TA_OK;
	}
	default:
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown addressing form %d",
		                    (int)r->addr);
	}
}

/* Binds values, compare, mask and padding. */
static ta_status bind_data(ta_plan *p, const ta_tile_shape *t, const ta_request *r, ta_error *err)
{
	ta_status st;
	ta_operands operands = ta_op_operands(r->op);
	bool needs_values = operands != TA_OPERANDS_PADDING;
	if (needs_values && !r->values.present)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s needs values", ta_op_name(r->op));
	if (!needs_values && r->values.present)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s takes no values",
		                    ta_op_name(r->op));
	if (r->values.present) {
		if ((st = check_data_operand(&r->values, t->dtype, "values", err)) != TA_OK)
			return st;
		if ((st = bind_operand(&p->values, &r->values, p->shape, p->rank, "values", err)) !=
		    TA_OK)
			return st;
	}
	if (operands == TA_OPERANDS_VALUES_COMPARE) {
		if (!r->compare.present)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "%s needs compare (expected) values",
			                    ta_op_name(r->op));
		if ((st = check_data_operand(&r->compare, t->dtype, "compare", err)) != TA_OK)
			return st;
		if ((st = bind_operand(&p->compare, &r->compare, p->shape, p->rank, "compare",
		                       err)) != TA_OK)
			return st;
	} else if (r->compare.present) {
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "compare values are only used by cas, not %s",
		                    ta_op_name(r->op));
	}
	if (r->mask.present) {
		if ((st = ta_array_view_check(&r->mask, "mask", err)) != TA_OK)
			return st;
		if (r->mask.dtype != TA_DTYPE_BOOL)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "mask dtype %s must be bool",
			                    ta_dtype_name(r->mask.dtype));
		if ((st = bind_operand(&p->mask, &r->mask, p->shape, p->rank, "mask", err)) !=
		    TA_OK)
			return st;
	}
	p->padding_bits = 0;
	if (r->padding.present) {
		if (operands != TA_OPERANDS_PADDING)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "padding is only used by loads, not %s",
			                    ta_op_name(r->op));
		if ((st = check_data_operand(&r->padding, t->dtype, "padding", err)) != TA_OK)
			return st;
		if (r->padding.rank != 0)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "padding must be a scalar");
		if (r->padding.device)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "padding: a scalar in a device buffer cannot be read by the "
			    "daemon; send it inline");
		memcpy(&p->padding_bits, r->padding.data, ta_dtype_size(t->dtype));
	}
	return TA_OK;
}

/* Builds the OUT_OF_RANGE error for element k, naming the axis and the index value. */
static ta_status out_of_range_error(const ta_plan *p, int64_t k, ta_error *err)
{
	int64_t e[TA_MAX_RANK] = {0};
	ta_addr_unravel(p, k, e);
	for (int i = 0; i < p->n_index; i++) {
		int64_t v = ta_addr_index(p, i, e);
		int axis = p->addr == TA_ADDR_SCATTER ? p->scatter_dim : i;
		int64_t bound = p->addr == TA_ADDR_FLAT ? p->region_count : p->extent[axis];
		if (v >= 0 && v < bound)
			continue;
		if (p->addr == TA_ADDR_FLAT)
			return ta_error_set(err, TA_OUT_OF_RANGE,
			                    "flat offset %lld at element %lld is outside [0, %lld) "
			                    "(bounds checking is off, so nothing was applied)",
			                    (long long)v, (long long)k, (long long)bound);
		return ta_error_set(err, TA_OUT_OF_RANGE,
		                    "index %lld at element %lld is outside [0, %lld) along axis %d "
		                    "(bounds checking is off, so nothing was applied)",
		                    (long long)v, (long long)k, (long long)bound, axis);
	}
	return ta_error_set(err, TA_OUT_OF_RANGE, "element %lld is out of range", (long long)k);
}

/* True when v is a scalar operand that passes check_data_operand for a tile of dtype
 * (element size es): present, rank 0, of the tile's dtype, es bytes of data. */
static inline bool scalar_operand_ok(const ta_array_view *v, ta_dtype dtype, size_t es)
{
	return v->present && v->rank == 0 && v->dtype == dtype && v->data != NULL &&
	       v->nbytes == es;
}

/* Writes what every plan takes straight from the request r and the tile t: op, dtype, sem,
 * scope, space, addressing form, bounds rule, output, and the tile's rank, extents and
 * row-major strides (the rest of p as the caller left it). */
static void plan_head(ta_plan *p, const ta_tile_shape *t, const ta_request *r)
{
	p->op = r->op;
	p->dtype = t->dtype;
	p->sem = r->sem;
	p->scope = r->scope;
	p->space = r->space;
	p->addr = r->addr;
	p->check_bounds = r->check_bounds;
	p->want_old = r->want_old || ta_op_output(r->op) == TA_OUTPUT_ALWAYS;
	p->tile_rank = t->rank;
	int64_t stride = 1;
	for (int a = t->rank - 1; a >= 0; a--) {
		p->tile_shape[a] = t->shape[a];
		p->tile_stride[a] = stride;
		stride *= t->shape[a];
	}
}

/* ta_plan_build's shortcut for the commonest small request, one element: FLAT or INDEXED
 * addressing with scalar index operands, scalar values (and compare for CAS), no mask, no
 * padding, space global, bounds checked, on a valid tile t. It only asks whether each
 * check of the full way would pass (the variant as ta_check_variant asks it, the family's
 * addressing, the op's dtypes, the region, the operands as check_index and
 * check_data_operand ask); when one would not, or the request is of another shape, it
 * returns false without touching p, and the full way runs and names the problem. Else it
 * fills p as the full way would, field for field (ta_plan_build_full; check_plan compares
 * the two). */
static bool plan_build_one(ta_plan *p, const ta_tile_shape *t, const ta_request *r)
{
	if ((r->addr != TA_ADDR_FLAT && r->addr != TA_ADDR_INDEXED) || !r->check_bounds ||
	    r->space != TA_SPACE_GLOBAL || r->mask.present || r->padding.present)
		return false;
	/* check_variant's questions for space global: op valid and in the family (in_family
	 * is false for an invalid op or family), sem, scope, output */
	if (!ta_op_in_family(r->op, r->family) || !ta_op_sem_ok(r->op, r->sem) ||
	    (unsigned)r->scope >= TA_SCOPE_COUNT ||
	    (r->want_old && ta_op_output(r->op) == TA_OUTPUT_NEVER) ||
	    !ta_family_addr_ok(r->family, r->addr) || !ta_op_accepts_dtype(r->op, t->dtype))
		return false;
	size_t es = ta_dtype_size(t->dtype);
	ta_operands operands = ta_op_operands(r->op);
	if (operands == TA_OPERANDS_VALUES_COMPARE) {
		if (!scalar_operand_ok(&r->compare, t->dtype, es))
			return false;
	} else if (operands != TA_OPERANDS_VALUES || r->compare.present) {
		return false;
	}
	if (!scalar_operand_ok(&r->values, t->dtype, es))
		return false;
	int want = r->addr == TA_ADDR_FLAT ? 1 : t->rank;
	if (r->n_index != want)
		return false;
	for (int i = 0; i < want; i++) {
		const ta_array_view *v = &r->index[i];
		if (!v->present || v->rank != 0 || v->data == NULL ||
		    (v->dtype != TA_DTYPE_I32 && v->dtype != TA_DTYPE_I64) ||
		    v->nbytes != ta_dtype_size(v->dtype))
			return false;
	}
	if (r->has_region) {
		if (r->region_rank != t->rank)
			return false;
		for (int a = 0; a < t->rank; a++) {
			int64_t o = r->region_origin[a], s = r->region_shape[a];
			if (o < 0 || s < 1 || o > t->shape[a] || s > t->shape[a] - o)
				return false;
		}
	}
	/* the plan, as ta_plan_build_full writes it: rank 0, one element */
	memset(p, 0, sizeof(*p));
	plan_head(p, t, r);
	int64_t region_count = 1;
	for (int a = t->rank - 1; a >= 0; a--) {
		p->origin[a] = r->has_region ? r->region_origin[a] : 0;
		p->extent[a] = r->has_region ? r->region_shape[a] : t->shape[a];
		region_count *= p->extent[a];
	}
	p->region_count = region_count;
	p->count = 1;
	p->n_index = want;
	for (int i = 0; i < want; i++) {
		p->index[i].data = r->index[i].data;
		p->index[i].dtype = r->index[i].dtype;
		p->index[i].device = r->index[i].device;
	}
	p->values.data = r->values.data;
	p->values.dtype = r->values.dtype;
	p->values.device = r->values.device;
	if (operands == TA_OPERANDS_VALUES_COMPARE) {
		p->compare.data = r->compare.data;
		p->compare.dtype = r->compare.dtype;
		p->compare.device = r->compare.device;
	}
	return true;
}

ta_status ta_plan_build(ta_plan *p, const ta_tile_shape *t, const ta_request *r, ta_error *err)
{
	if (ta_dtype_is_tile(t->dtype) && ta_tile_bytes(t) != 0 && plan_build_one(p, t, r))
		return TA_OK;
	return ta_plan_build_full(p, t, r, err);
}

ta_status ta_plan_build_full(ta_plan *p, const ta_tile_shape *t, const ta_request *r, ta_error *err)
{
	ta_status st;
	memset(p, 0, sizeof(*p));
	if (!ta_dtype_is_tile(t->dtype) || ta_tile_bytes(t) == 0)
		return ta_error_set(err, TA_INTERNAL, "tile has an invalid dtype or shape");
	if ((st = check_legality(t, r, err)) != TA_OK)
		return st;
	plan_head(p, t, r);
	if ((st = bind_region(p, t, r, err)) != TA_OK)
		return st;
	if ((st = bind_addressing(p, t, r, err)) != TA_OK)
		return st;
	p->count = 1;
	for (int a = 0; a < p->rank; a++) {
		if (p->shape[a] > TA_MAX_ELEMENTS / p->count)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "too many elements");
		p->count *= p->shape[a];
	}
	if (p->count > TA_MAX_BROADCAST && p->count > p->region_count)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "the request addresses %lld elements, over the limit of %lld "
		                    "(2^32) for broadcast operands",
		                    (long long)p->count, (long long)TA_MAX_BROADCAST);
	if ((st = bind_data(p, t, r, err)) != TA_OK)
		return st;
	if (!p->check_bounds && p->addr != TA_ADDR_REGION) {
		bool on_device = p->mask.device;
		for (int i = 0; i < p->n_index; i++)
			on_device = on_device || p->index[i].device;
		if (on_device)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "check_bounds off (reject the whole request) needs the "
			    "indices and mask in host memory; these lie in a device "
			    "buffer: keep check_bounds on (out-of-range elements are "
			    "skipped and counted)");
		for (int64_t k = 0; k < p->count; k++) {
			int64_t off;
			if (ta_plan_resolve(p, k, &off) < 0)
				return out_of_range_error(p, k, err);
		}
	}
	return TA_OK;
}

/* True when an operand's strides are non-negative and the last element it reaches over
 * the iteration shape fits in int64. */
static bool operand_fits(const ta_plan *p, const ta_operand *op)
{
	int64_t span = 1;
	for (int a = 0; a < p->rank; a++) {
		int64_t s = op->stride[a], n = p->shape[a] - 1;
		if (s < 0 || (n > 0 && s > (INT64_MAX - span) / n))
			return false;
		span += n * s;
	}
	return true;
}

/* ta_plan_check of a prechecked plan: what may have changed since ta_plan_build (the tile
 * memory it is applied to, old_out); the messages are the full check's. */
static ta_status plan_check_prechecked(const ta_plan *p, size_t tile_bytes, int64_t *tile_elems,
                                       ta_error *err)
{
	int64_t n = 1;
	for (int a = 0; a < p->tile_rank; a++)
		n *= p->tile_shape[a]; /* ta_plan_build checked the product (ta_tile_bytes) */
	/* n > tile_bytes / size, without the division: n * size stays below 2^43 */
	if ((uint64_t)n * ta_dtype_size(p->dtype) > tile_bytes)
		return ta_error_set(
		    err, TA_INVALID_ARGUMENT,
		    "plan: the tile has %lld elements of %s but the tile memory holds "
		    "%zu bytes",
		    (long long)n, ta_dtype_name(p->dtype), tile_bytes);
	if (p->want_old && p->count > 0 && !p->old_out)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "plan: wants old values but old_out is NULL");
	if (p->merge_out) { /* (a call only for the rare plans that have one) */
		ta_status st = ta_plan_check_merge_out(p, n, err);
		if (st != TA_OK)
			return st;
	}
	if (tile_elems)
		*tile_elems = n;
	return TA_OK;
}

ta_status ta_plan_check_merge_out(const ta_plan *p, int64_t tile_elems, ta_error *err)
{
	const ta_merge_out *mo = p->merge_out;
	if (!mo)
		return TA_OK;
	size_t es = ta_dtype_size(p->dtype);
	if ((p->op != TA_OP_ADD && p->op != TA_OP_SUB) || !ta_dtype_is_int(p->dtype) ||
	    (es != 4 && es != 8) || p->want_old)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "plan: a merge-out needs an add or sub of a 32- or 64-bit "
		                    "integer dtype without old values (not %s of %s%s)",
		                    ta_op_name(p->op), ta_dtype_name(p->dtype),
		                    p->want_old ? " with old values" : "");
	if (mo->n < 0 || mo->n > TA_MERGE_TARGETS_MAX || (mo->n > 0 && !mo->target))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "plan: a merge-out of %d targets (0..%d, given)", mo->n,
		                    TA_MERGE_TARGETS_MAX);
	for (int i = 0; i < mo->n; i++) {
		const ta_merge_target *tg = &mo->target[i];
		if (!tg->mem || tg->elem0 < 0 || tg->elems < 0 ||
		    tg->elem0 > tile_elems - tg->elems)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "plan: merge-out target %d (%lld elements from %lld) has "
			    "no memory or leaves the tile's %lld elements",
			    i, (long long)tg->elems, (long long)tg->elem0, (long long)tile_elems);
		ta_scope scope = tg->remote ? TA_SCOPE_SYS : p->scope;
		if (!ta_variant_legal(TA_OP_ADD, p->dtype, p->sem, scope, TA_SPACE_GLOBAL, false))
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "plan: merge-out target %d: add with sem %s at scope %s is "
			    "not a legal variant",
			    i, ta_sem_name(p->sem), ta_scope_name(scope));
	}
	return TA_OK;
}

ta_status ta_plan_check(const ta_plan *p, size_t tile_bytes, int64_t *tile_elems, ta_error *err)
{
	if (p->prechecked)
		return plan_check_prechecked(p, tile_bytes, tile_elems, err);
	if (!ta_dtype_is_tile(p->dtype))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "plan: invalid tile dtype %d",
		                    (int)p->dtype);
	if (p->op <= TA_OP_NONE || p->op >= TA_OP_COUNT || !ta_op_accepts_dtype(p->op, p->dtype))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "plan: op %s is not defined for %s",
		                    ta_op_name(p->op), ta_dtype_name(p->dtype));
	if (!ta_variant_legal(p->op, p->dtype, p->sem, p->scope, p->space, p->want_old))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "plan: sem %d, scope %d, space %d, output %d is not a legal "
		                    "variant of %s",
		                    (int)p->sem, (int)p->scope, (int)p->space, (int)p->want_old,
		                    ta_op_name(p->op));
	if (p->tile_rank < 1 || p->tile_rank > TA_MAX_RANK || p->rank < 0 || p->rank > TA_MAX_RANK)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "plan: tile rank %d, rank %d",
		                    p->tile_rank, p->rank);
	/* Overflow-checked products: a wrapped size would let offsets past the tile pass. */
	int64_t n = 1, rn = 1;
	for (int a = p->tile_rank - 1; a >= 0; a--) {
		if (p->tile_shape[a] < 1 || p->extent[a] < 1 || p->origin[a] < 0 ||
		    p->origin[a] > p->tile_shape[a] - p->extent[a])
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "plan: region along axis %d is outside the tile", a);
		if (p->tile_stride[a] != n)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "plan: tile stride %lld along axis %d is not row-major",
			                    (long long)p->tile_stride[a], a);
		if (__builtin_mul_overflow(n, p->tile_shape[a], &n) ||
		    __builtin_mul_overflow(rn, p->extent[a], &rn))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "plan: the tile has too many elements");
	}
	if (rn != p->region_count)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "plan: region count %lld does not match its extents",
		                    (long long)p->region_count);
	if ((uint64_t)n > tile_bytes / ta_dtype_size(p->dtype))
		return ta_error_set(
		    err, TA_INVALID_ARGUMENT,
		    "plan: the tile has %lld elements of %s but the tile memory holds "
		    "%zu bytes",
		    (long long)n, ta_dtype_name(p->dtype), tile_bytes);
	int64_t cnt = 1;
	for (int a = 0; a < p->rank; a++)
		if (p->shape[a] < 1 || __builtin_mul_overflow(cnt, p->shape[a], &cnt))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "plan: bad iteration extent %lld on axis %d",
			                    (long long)p->shape[a], a);
	if (cnt != p->count)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "plan: count %lld does not match the iteration shape",
		                    (long long)p->count);
	int need_index = p->addr == TA_ADDR_REGION    ? 0
	                 : p->addr == TA_ADDR_INDEXED ? p->tile_rank
	                                              : 1;
	bool same_rank =
	    (p->addr != TA_ADDR_REGION && p->addr != TA_ADDR_SCATTER) || p->rank == p->tile_rank;
	if ((unsigned)p->addr > TA_ADDR_FLAT || p->n_index != need_index || !same_rank ||
	    (p->addr == TA_ADDR_SCATTER && (p->scatter_dim < 0 || p->scatter_dim >= p->tile_rank)))
		return ta_error_set(
		    err, TA_INVALID_ARGUMENT,
		    "plan: inconsistent addressing (form %d, %d index arrays, dim %d)",
		    (int)p->addr, p->n_index, p->scatter_dim);
	if (p->addr == TA_ADDR_REGION)
		for (int a = 0; a < p->rank; a++)
			if (p->shape[a] != p->extent[a])
				return ta_error_set(
				    err, TA_INVALID_ARGUMENT,
				    "plan: region shape does not match its extents");
	for (int i = 0; i < p->n_index; i++)
		if (!p->index[i].data ||
		    (p->index[i].dtype != TA_DTYPE_I32 && p->index[i].dtype != TA_DTYPE_I64) ||
		    !operand_fits(p, &p->index[i]))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "plan: index operand %d is missing, not int32/int64 or "
			                    "has strides that do not fit",
			                    i);
	/* values and compare are read as the tile dtype, the mask as bytes */
	const struct {
		const ta_operand *op;
		ta_dtype dtype;
		bool required;
		const char *name;
	} operands[3] = {
	    {&p->values, p->dtype, ta_op_operands(p->op) != TA_OPERANDS_PADDING, "values"},
	    {&p->compare, p->dtype, ta_op_operands(p->op) == TA_OPERANDS_VALUES_COMPARE, "compare"},
	    {&p->mask, TA_DTYPE_BOOL, false, "mask"}};
	for (int i = 0; i < 3; i++) {
		const ta_operand *op = operands[i].op;
		if ((operands[i].required && !op->data) ||
		    (op->data && (op->dtype != operands[i].dtype || !operand_fits(p, op))))
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "plan: %s operand is missing, of dtype %s or has strides "
			    "that do not fit",
			    operands[i].name, ta_dtype_name(op->dtype));
	}
	if (p->want_old && p->count > 0 && !p->old_out)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "plan: wants old values but old_out is NULL");
	if (p->merge_out) { /* (a call only for the rare plans that have one) */
		ta_status st = ta_plan_check_merge_out(p, n, err);
		if (st != TA_OK)
			return st;
	}
	if (tile_elems)
		*tile_elems = n;
	return TA_OK;
}

/* ---- element addressing: ta_addr.h holds the one definition (shared with the CPU
 * backend). */

int ta_plan_resolve(const ta_plan *p, int64_t k, int64_t *offset)
{
	int64_t e[TA_MAX_RANK] = {0}, r[TA_MAX_RANK] = {0};
	ta_addr_unravel(p, k, e);
	int how = ta_addr_resolve(p, e, r);
	if (how <= 0)
		return how;
	int64_t off = 0;
	for (int a = 0; a < p->tile_rank; a++)
		off += (p->origin[a] + r[a]) * p->tile_stride[a];
	*offset = off;
	return 1;
}

uint64_t ta_operand_bits(const ta_plan *p, const ta_operand *op, int64_t k)
{
	int64_t e[TA_MAX_RANK] = {0};
	ta_addr_unravel(p, k, e);
	size_t es = ta_dtype_size(op->dtype);
	uint64_t v = 0;
	memcpy(&v, (const char *)op->data + ta_addr_operand_offset(p, op, e) * (int64_t)es, es);
	return v;
}

/* The elements of op the host reads over the iteration shape: 0 when absent or in device
 * memory, else its span (1 for a scalar). */
static int64_t host_span(const ta_plan *p, const ta_operand *op)
{
	if (!op->data || op->device)
		return 0;
	int64_t span = 1;
	for (int a = 0; a < p->rank; a++)
		span += (p->shape[a] - 1) * op->stride[a];
	return span;
}

int64_t ta_plan_host_elements(const ta_plan *plan)
{
	bool device = plan->want_old && plan->old_out_device;
	device = device || plan->values.device || plan->compare.device || plan->mask.device;
	for (int i = 0; i < plan->n_index; i++)
		device = device || plan->index[i].device;
	if (!device)
		return plan->count;
	int64_t most = plan->want_old && !plan->old_out_device ? plan->count : 1;
	const ta_operand *ops[TA_MAX_RANK + 3] = {&plan->values, &plan->compare, &plan->mask};
	int n = 3;
	for (int i = 0; i < plan->n_index; i++)
		ops[n++] = &plan->index[i];
	for (int i = 0; i < n; i++) {
		int64_t span = host_span(plan, ops[i]);
		if (span > most)
			most = span;
	}
	return most;
}
