/* repeat.c: keeping a connection's last one-element atomic request and recognising it
 * again (see repeat.h for why a kept plan is the plan of the repeated request). */
#include "repeat.h"

#include <string.h>

#include "ta_wireschema.h"

/* Splits the len bytes at payload, a Request, into its id (*id) and the bytes after the id
 * field (*rest) when the id field comes first or is absent (id 0); false when its varint
 * does not decode or there are no bytes. The descriptors were read (ta_codec_init) by the
 * decoder that took the kept request. */
static inline bool split_id(const uint8_t *payload, size_t len, uint64_t *id, const uint8_t **rest)
{
	const uint8_t *p = payload, *end = payload + len;
	*id = 0;
	if (len == 0)
		return false;
	if (*p == fw_key1[FW_REQ_ID]) {
		p++;
		if (!rd_varint(&p, end, id))
			return false;
	}
	*rest = p;
	return true;
}

/* One operand of a plan to be kept: its data in the plan, the view it came from. */
typedef struct repeat_operand {
	ta_operand *op;            /* the kept plan's operand */
	const ta_array_view *view; /* the decoded operand it points to */
	const uint8_t *wire;       /* where the view's bytes lie in the payload */
} repeat_operand;

/* Adds to r the hole of operand o (payload bytes from rest on, plan element size es);
 * false when its data is not one element of es bytes lying in the kept bytes. */
static bool add_hole(ta_repeat *r, const repeat_operand *o, const uint8_t *rest, size_t n,
                     size_t es)
{
	if (!o->view->present || o->op->data != o->view->data || !o->wire ||
	    o->view->nbytes != es || es > sizeof(uint64_t) || o->wire < rest ||
	    (size_t)(o->wire - rest) + es > n || r->n_holes == TA_REPEAT_HOLES)
		return false;
	int h = r->n_holes++;
	uint64_t *slot = &r->slots[h];
	*slot = 0;
	memcpy(slot, o->wire, es);
	o->op->data = slot;
	/* in order of offset */
	ta_repeat_hole hole = {(uint16_t)(o->wire - rest), (uint16_t)es, slot};
	while (h > 0 && r->holes[h - 1].at > hole.at) {
		r->holes[h] = r->holes[h - 1];
		h--;
	}
	r->holes[h] = hole;
	return true;
}

bool ta_repeat_record(ta_repeat *r, const uint8_t *payload, size_t len, const ta_wire_request *w,
                      const ta_request *req, const ta_plan *plan, const ta_tile_cache *cache,
                      ta_tile *tile)
{
	r->valid = false;
	uint64_t id = 0;
	const uint8_t *rest = NULL;
	if (!split_id(payload, len, &id, &rest) || id != w->id)
		return false; /* (an id after the body: split_id says 0) */
	size_t n = (size_t)(payload + len - rest);
	/* the plans that do not depend on their operands' bytes: one element, bounds checked
	 * (not scanned at build), no mask, host memory */
	if (n < TA_REPEAT_MIN_BYTES || n > TA_REPEAT_MAX_BYTES || plan->count != 1 ||
	    !plan->check_bounds || plan->mask.data || plan->old_out_device || cache->tile != tile)
		return false;
	size_t es = ta_dtype_size(plan->dtype);
	r->plan = *plan;
	r->n_holes = 0;
	for (int i = 0; i < plan->n_index; i++) {
		repeat_operand o = {&r->plan.index[i], &req->index[i], w->index[i].data};
		if (plan->index[i].device ||
		    !add_hole(r, &o, rest, n, ta_dtype_size(plan->index[i].dtype)))
			return false;
	}
	repeat_operand values = {&r->plan.values, &req->values, w->values.data};
	if (plan->values.data && (plan->values.device || !add_hole(r, &values, rest, n, es)))
		return false;
	repeat_operand compare = {&r->plan.compare, &req->compare, w->compare.data};
	if (plan->compare.data && (plan->compare.device || !add_hole(r, &compare, rest, n, es)))
		return false;
	for (int h = 1; h < r->n_holes; h++)
		if (r->holes[h - 1].at + r->holes[h - 1].len > r->holes[h].at)
			return false; /* one byte range for two operands */
	r->plan.old_out = plan->want_old ? &r->old : NULL;
	memset(r->body, 0, sizeof(r->body));
	memcpy(r->body, rest, n);
	memset(r->same, 0xff, sizeof(r->same));
	for (int h = 0; h < r->n_holes; h++)
		memset((uint8_t *)r->same + r->holes[h].at, 0, r->holes[h].len);
	memcpy(&r->last_body, (const uint8_t *)r->body + n - 8, 8);
	memcpy(&r->last_same, (const uint8_t *)r->same + n - 8, 8);
	r->len = (uint32_t)n;
	r->kind = w->kind;
	r->tile = tile;
	r->stamp = cache->stamp;
	r->tiles = *cache;
	memcpy(r->name, cache->name, sizeof(r->name));
	r->valid = true;
	return true;
}

bool ta_repeat_match(ta_repeat *r, const uint8_t *payload, size_t len, uint64_t *id)
{
	const uint8_t *rest = NULL;
	if (!r->valid || !split_id(payload, len, id, &rest) ||
	    (size_t)(payload + len - rest) != r->len)
		return false;
	/* word by word, the holes masked off; the last partial word compared as the last 8
	 * bytes (len >= 8) */
	uint64_t diff = 0, x;
	size_t words = r->len / 8;
	for (size_t w = 0; w < words; w++) {
		memcpy(&x, rest + 8 * w, 8);
		diff |= (x ^ r->body[w]) & r->same[w];
	}
	memcpy(&x, rest + r->len - 8, 8);
	diff |= (x ^ r->last_body) & r->last_same;
	if (diff != 0)
		return false;
	for (int h = 0; h < r->n_holes; h++)
		fw_copy_small((uint8_t *)r->holes[h].slot, rest + r->holes[h].at, r->holes[h].len);
	return true;
}
