/* tac_split.c: requests larger than the daemon's frame limit. tileatom_indexed hands a
 * request whose frame would exceed the max_frame the daemon stated in its Hello to
 * tac_split_indexed, which cuts its 1-D operands into consecutive parts that fit and sends
 * them one after the other; the rules (atomicity, reject-whole bounds checked for the whole
 * request before any part is sent, old values, errors) are stated in tileatom.h at
 * tileatom_indexed.
 *
 * Failure modes: operands that are not 1-D over one element count, an old-values buffer
 * too small, or (check_bounds false) any unmasked index outside the region fail the call
 * before anything is sent; a failed part stops the call with a message naming the part and
 * the elements already applied. */
#include "tac_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Bytes a part's request leaves for framing, the tile name, region and options. */
#define TAC_SPLIT_OVERHEAD 1024u
/* Largest operand bytes of one part, even under a larger frame limit: frames of tens of
 * megabytes cost fresh pages and copies on both sides (a 64 MiB part ran 5 times slower
 * per key than 4 MiB requests; docs/PERFORMANCE.md, issue 10). */
#define TAC_SPLIT_PART_BYTES (4u << 20)

bool tac_frame_too_large(const tileatom_client *c, tac_msg *m)
{
	size_t packed = protobuf_c_message_get_packed_size(&m->req.base);
	return packed > (size_t)c->max_frame;
}

/* The element count of a 1-D operand (rank 1), 1 for a scalar (rank 0), -1 otherwise. */
static int64_t split_len(const tileatom_array *a)
{
	if (!a)
		return 1;
	if (a->rank == 0)
		return 1;
	return a->rank == 1 ? a->shape[0] : -1;
}

/* Part [k0, k0 + n) of operand a (a scalar stays whole). */
static tileatom_array split_part(const tileatom_array *a, int64_t k0, int64_t n)
{
	tileatom_array p = *a;
	if (a->rank == 1) {
		p.shape[0] = n;
		p.data = (const uint8_t *)a->data + (size_t)k0 * tileatom_dtype_size(a->dtype);
	}
	return p;
}

/* Index k of a 1-D or scalar index array (INT32 / INT64). */
static int64_t split_index(const tileatom_array *a, int64_t k)
{
	int64_t at = a->rank == 0 ? 0 : k;
	if (a->dtype == TILEATOM_INT32) {
		int32_t v;
		memcpy(&v, (const uint8_t *)a->data + at * 4, 4);
		return v;
	}
	int64_t v;
	memcpy(&v, (const uint8_t *)a->data + at * 8, 8);
	return v;
}

/* The reject-whole check: every unmasked element's index (indices, n_index of them, over n
 * elements) against the region the request addresses (region, or the whole tile as
 * tileatom_describe says). TILEATOM_OK or TILEATOM_E_OUT_OF_RANGE naming the first one. */
static int split_check_bounds(tileatom_client *c, const char *tile, const tileatom_region *region,
                              int n_index, const tileatom_array *indices, bool flat,
                              const tileatom_array *mask, int64_t n, int nparts,
                              tileatom_error *err)
{
	tileatom_tile_info info;
	tac_msg dm; /* tileatom_describe, from the layers below the public calls */
	int rc = tac_build_describe(&dm, tile, err);
	if (rc == TILEATOM_OK)
		rc = tac_roundtrip(c, &dm, err);
	if (rc == TILEATOM_OK)
		rc = tac_tile_info_from_wire(&info, c->last->tile, err);
	if (rc != TILEATOM_OK)
		return rc;
	int rank = region ? region->rank : info.rank;
	const int64_t *extent = region ? region->shape : info.shape;
	int64_t region_count = 1;
	for (int a = 0; a < rank; a++)
		region_count *= extent[a];
	for (int64_t k = 0; k < n; k++) {
		if (mask) {
			uint8_t m;
			memcpy(&m, (const uint8_t *)mask->data + (mask->rank == 0 ? 0 : k), 1);
			if (!m)
				continue;
		}
		for (int a = 0; a < (flat ? 1 : n_index); a++) {
			int64_t x = split_index(&indices[a], k);
			int64_t limit = flat ? region_count : a < rank ? extent[a] : 0;
			if (x < 0 || x >= limit)
				return tac_err(
				    err, TILEATOM_E_OUT_OF_RANGE,
				    "index %" PRId64 " of element %" PRId64
				    " is outside [0, %" PRId64 ")%s of tile '%s' (check_bounds "
				    "is off; the request would have been split into %d parts: "
				    "nothing was applied)",
				    x, k, limit, flat ? "" : " along its axis", tile, nparts);
		}
	}
	return TILEATOM_OK;
}

int tac_split_indexed(tileatom_client *c, const char *tile, tileatom_op op,
                      const tileatom_region *region, int n_index, const tileatom_array *indices,
                      bool flat, const tileatom_array *values, const tileatom_array *compare,
                      const tileatom_op_options *opts, tileatom_op_result *res, tileatom_error *err)
{
	tileatom_op_result local;
	if (!res)
		res = &local;
	memset(res, 0, sizeof(*res));
	tileatom_op_options o;
	if (opts)
		o = *opts;
	else
		tileatom_op_options_init(&o);
	const tileatom_array *mask = o.mask;
	/* the element count: every non-scalar operand is 1-D over the same n */
	int64_t n = 1;
	const tileatom_array *arrays[TILEATOM_MAX_RANK + 3];
	int narrays = 0;
	for (int a = 0; a < (flat ? 1 : n_index); a++)
		arrays[narrays++] = &indices[a];
	arrays[narrays++] = values;
	arrays[narrays++] = compare;
	arrays[narrays++] = mask;
	size_t per_elem = 0;
	for (int i = 0; i < narrays; i++) {
		int64_t len = split_len(arrays[i]);
		if (len < 0 || (len > 1 && n > 1 && len != n))
			return tac_err(
			    err, TILEATOM_E_INVALID_ARGUMENT,
			    "the request exceeds the daemon's frame limit of %" PRIu32
			    " bytes and cannot be split: the library splits requests whose "
			    "operands are 1-D over one element count (or scalars); send "
			    "smaller requests",
			    c->max_frame);
		if (len > 1) {
			n = len;
			per_elem += tileatom_dtype_size(arrays[i]->dtype);
		}
	}
	size_t es = values ? tileatom_dtype_size(values->dtype) : 0;
	if (o.want_old && es > per_elem)
		per_elem = es; /* the response carries the old values */
	if (per_elem == 0 || c->max_frame <= 2 * TAC_SPLIT_OVERHEAD)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "the request exceeds the daemon's frame limit of %" PRIu32
		               " bytes and cannot be split",
		               c->max_frame);
	size_t room = c->max_frame - TAC_SPLIT_OVERHEAD;
	if (room > TAC_SPLIT_PART_BYTES)
		room = TAC_SPLIT_PART_BYTES;
	int64_t part = (int64_t)(room / per_elem);
	if (part < 1)
		part = 1;
	int nparts = (int)((n + part - 1) / part);
	if (o.want_old && o.old_out_size < (size_t)n * es)
		return tac_err(
		    err, TILEATOM_E_INVALID_ARGUMENT,
		    "the output buffer has %zu bytes and the old values need %zu; nothing "
		    "was sent",
		    o.old_out_size, (size_t)n * es);
	if (!o.check_bounds) {
		int rc = split_check_bounds(c, tile, region, n_index, indices, flat, mask, n,
		                            nparts, err);
		if (rc != TILEATOM_OK)
			return rc;
	}
	for (int64_t k0 = 0, i = 0; k0 < n; k0 += part, i++) {
		int64_t len = n - k0 < part ? n - k0 : part;
		tileatom_array pidx[TILEATOM_MAX_RANK], pval, pcmp, pmask;
		for (int a = 0; a < (flat ? 1 : n_index); a++)
			pidx[a] = split_part(&indices[a], k0, len);
		tileatom_op_options po = o;
		if (values)
			pval = split_part(values, k0, len);
		if (compare)
			pcmp = split_part(compare, k0, len);
		if (mask) {
			pmask = split_part(mask, k0, len);
			po.mask = &pmask;
		}
		if (o.want_old) {
			po.old_out = (uint8_t *)o.old_out + (size_t)k0 * es;
			po.old_out_size = (size_t)len * es;
		}
		tac_msg m;
		int rc = tac_build_indexed(&m, tile, op, region, n_index, pidx, flat,
		                           values ? &pval : NULL, compare ? &pcmp : NULL, &po, err);
		if (rc == TILEATOM_OK && tac_frame_too_large(c, &m))
			rc =
			    tac_err(err, TILEATOM_E_INTERNAL,
			            "part %" PRId64 " of the split request still exceeds the frame "
			            "limit of %" PRIu32 " bytes",
			            i + 1, c->max_frame);
		if (rc == TILEATOM_OK)
			rc = tac_roundtrip(c, &m, err);
		const Tileatom__OpResponse *r = rc == TILEATOM_OK ? c->last->op : NULL;
		if (rc == TILEATOM_OK && !r)
			rc = tac_err(err, TILEATOM_E_PROTOCOL,
			             "tileatomd answered a part with no result");
		if (rc == TILEATOM_OK && o.want_old) {
			size_t got = r->old ? r->old->data.len : 0;
			if (got != (size_t)len * es)
				rc = tac_err(
				    err, TILEATOM_E_PROTOCOL,
				    "tileatomd returned %zu bytes of old values for %" PRId64
				    " elements",
				    got, len);
			else
				memcpy(po.old_out, r->old->data.data, got);
		}
		if (rc != TILEATOM_OK) {
			if (err && k0 > 0) {
				char first[sizeof(err->message)];
				snprintf(first, sizeof(first), "%s", err->message);
				tac_err(err, rc,
				        "part %" PRId64 " of %d (elements %" PRId64 "..%" PRId64
				        ") of a split request failed; elements 0..%" PRId64
				        " were applied: %s",
				        i + 1, nparts, k0, k0 + len - 1, k0 - 1, first);
			}
			return rc;
		}
		res->applied += r->applied;
		res->skipped += r->skipped;
	}
	if (o.want_old) {
		res->old_rank = 1;
		res->old_shape[0] = n;
		res->old_bytes = (size_t)n * es;
	}
	return TILEATOM_OK;
}
