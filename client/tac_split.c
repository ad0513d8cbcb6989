/* tac_split.c: requests larger than the daemon's frame limit. tileatom_elementwise,
 * tileatom_scatter and tileatom_indexed hand a request whose frame would still exceed the
 * daemon's max_frame after shared-memory staging to tac_split, which cuts its element shape
 * along the first axis into consecutive parts that fit and sends them one after the other:
 * operands along that axis are cut into slabs of whole rows, operands broadcast along it
 * repeat in every part, and the region of an element-wise request (and of a scatter along
 * another axis than 0) moves with the part. The rules (atomicity, bounds checked for the
 * whole request before any part is sent, old values, errors) are in tileatom.h at
 * tileatom_indexed. Pipelined submits over the limit (tac_split_submit) queue every part
 * (a window of them unanswered at once) and leave a record from which tac_split_collect
 * merges the parts' responses into the one that tileatom_collect returns.
 *
 * Failure modes: whatever makes a request unsplittable (what ta_plan_build, the daemon's own
 * check, refuses of the whole request: a region outside the tile, operands that do not
 * broadcast, an index out of bounds with check_bounds off; a row or the repeated operands
 * too large for a frame, a small old-values buffer) fails it before any part is sent. A failed part
 * stops a synchronous call with a message naming the part and the rows applied; a pipelined part
 * that fails is reported at collect, after the later parts ran; a failure after some parts were
 * queued breaks the connection. */
#include "tac_internal.h"
#include "ta_plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes a part's request leaves for framing, the tile name, region and options. */
#define TAC_SPLIT_OVERHEAD 1024u
/* Largest operand bytes of one part under any frame limit (larger frames run slower per
 * key: docs/PERFORMANCE.md). */
#define TAC_SPLIT_PART_BYTES (4u << 20)
/* Bytes a response leaves for framing besides old values (RESPONSE_OVERHEAD, daemon). */
#define TAC_SPLIT_RESPONSE_OVERHEAD 256u
/* Request bytes of a split submit's parts unanswered at once (2 to TAC_SPLIT_WINDOW_PARTS
 * parts), so that one request does not fill the daemon's queue (max_pending). */
#define TAC_SPLIT_WINDOW_BYTES (16u << 20)
/* Most parts of a split submit unanswered at once. */
#define TAC_SPLIT_WINDOW_PARTS 64u
/* Operands of one request: 4 index arrays, values, compare, mask. */
#define TAC_SPLIT_MAX_OPERANDS (TILEATOM_MAX_RANK + 3)

/* Bytes a request of an atomic or memory call can take besides its operands' data (id,
 * tile name, region, the arrays' headers and shapes, options, buffer references: well
 * under 2 KiB), twice that for a margin. */
#define TAC_FRAME_FIXED_MAX 4096

bool tac_frame_too_large(const tileatom_client *c, tac_msg *m)
{
	/* the common, small request stops here, without sizing the message */
	size_t data = m->values.data.len + m->compare.data.len + m->mask.data.len +
	              m->padding.data.len + m->fill.data.len;
	for (int i = 0; i < TILEATOM_MAX_RANK; i++)
		data += m->index[i].data.len;
	if (data <= (size_t)c->max_frame && (size_t)c->max_frame - data >= TAC_FRAME_FIXED_MAX)
		return false;
	size_t packed = tac_request_size(m);
	return packed > (size_t)c->max_frame;
}

/* tileatom_describe of tile into *info; pipelined: behind the pending requests, whose
 * responses stay queued for tileatom_collect. */
static int split_describe(tileatom_client *c, const char *tile, bool pipelined,
                          tileatom_tile_info *info, tileatom_error *err)
{
	tac_msg dm;
	int rc = tac_build_named(&dm, TILEATOM_REQ_DESCRIBE, tile, err);
	tileatom_request_kind kind;
	if (!pipelined)
		rc = tac_roundtrip(c, &dm, rc, err);
	if (pipelined && rc == TILEATOM_OK)
		rc = tac_conn_submit(c, &dm, true, -1, NULL, err);
	if (pipelined && rc == TILEATOM_OK)
		rc = tac_conn_receive_newest(c, &kind, err);
	if (pipelined && rc == TILEATOM_OK)
		rc = tac_check_response(c->last, kind, err);
	return rc == TILEATOM_OK ? tac_tile_info_from_wire(info, c->last->tile, err) : rc;
}

/* Elements of the index arrays of rq broadcast together (numpy rules), or -1 where they do
 * not broadcast (the split path reports it). */
static int64_t index_count(const tac_split_req *rq)
{
	int rank = 0;
	int64_t shape[TILEATOM_MAX_RANK], count = 1;
	for (int i = 0; i < rq->n_index; i++)
		if (rq->indices[i].rank > rank)
			rank = rq->indices[i].rank;
	for (int a = 0; a < rank; a++)
		shape[a] = 1;
	for (int i = 0; i < rq->n_index; i++) {
		const tileatom_array *ix = &rq->indices[i];
		for (int k = 0; k < ix->rank; k++) {
			int axis = rank - ix->rank + k;
			if (shape[axis] == 1)
				shape[axis] = ix->shape[k];
			else if (ix->shape[k] != 1 && ix->shape[k] != shape[axis])
				return -1;
		}
	}
	for (int a = 0; a < rank; a++)
		count *= shape[a];
	return count;
}

bool tac_split_old_fit(tileatom_client *c, const tac_split_req *rq)
{
	if (!rq->returns_old || !rq->values)
		return true;
	tileatom_tile_info info;
	const tileatom_region *box = rq->region;
	int64_t count = -1; /* stays so on an error, which the split path reports */
	if (rq->kind != TILEATOM_REQ_ELEMENTWISE) {
		count = index_count(rq);
	} else if (box || split_describe(c, rq->tile, false, &info, NULL) == TILEATOM_OK) {
		count = 1;
		for (int a = 0; a < (box ? box->rank : info.rank); a++)
			count *= box ? box->shape[a] : info.shape[a];
	}
	uint64_t bytes = (uint64_t)count * tileatom_dtype_size(rq->values->dtype);
	return count >= 0 && bytes + TAC_SPLIT_RESPONSE_OVERHEAD <= c->max_frame;
}

/* One operand of a split request. */
typedef struct split_operand {
	const tileatom_array *array; /* the caller's array */
	bool cut;                    /* runs along the first axis: each part gets its rows */
	size_t bytes;                /* all its bytes */
} split_operand;

/* What tac_split works out before sending anything. */
typedef struct split_plan {
	tileatom_tile_info info; /* the tile (tileatom_describe) */
	ta_plan core; /* the whole request checked as the daemon would (ta_plan_build): its
	                 region, element shape (parts cut shape[0]) and operand strides */
	split_operand ops[TAC_SPLIT_MAX_OPERANDS]; /* indices..., values, compare, mask */
	int nops;                                  /* entries used in ops */
	int64_t part_rows;                         /* rows of the element shape per part */
	int nparts;                                /* parts in all */
	size_t old_row;                            /* bytes of old values per row */
} split_plan;

/* The refusal of a request that cannot be split: TILEATOM_E_INVALID_ARGUMENT naming why. */
static __attribute__((format(printf, 3, 4))) int
split_refuse(const tileatom_client *c, tileatom_error *err, const char *fmt, ...)
{
	char why[TILEATOM_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
	               "the request exceeds the daemon's frame limit of %" PRIu32
	               " bytes and cannot be split: %s; nothing was applied",
	               c->max_frame, why);
}

/* The view ta_plan_build takes of operand a (NULL: absent), device memory when it lies in a
 * device buffer. */
static ta_array_view split_view(const tileatom_client *c, const tileatom_array *a)
{
	ta_array_view v = {.present = a != NULL};
	if (!a)
		return v;
	v.dtype = (ta_dtype)a->dtype;
	v.rank = a->rank;
	memcpy(v.shape, a->shape, sizeof(v.shape));
	v.data = a->data;
	v.nbytes = tileatom_array_bytes(a); /* (0 where a is not valid: the check says why) */
	v.device = tileatom_buffer_is_device(tac_shm_ref_buffer(c, a->data, v.nbytes));
	return v;
}

/* Checks rq with options o against the tile p->info exactly as the daemon checks one
 * request (ta_plan_build: region, addressing, operands broadcast to the element shape,
 * with check_bounds off every unmasked index) into p->core. */
static int split_check(tileatom_client *c, const tac_split_req *rq, const tileatom_op_options *o,
                       split_plan *p, tileatom_error *err)
{
	ta_request r;
	ta_request_init(&r);
	r.family = ta_req_family((ta_req_kind)rq->kind);
	r.op = (ta_op)rq->op;
	r.addr = rq->kind == TILEATOM_REQ_ELEMENTWISE ? TA_ADDR_REGION
	         : rq->kind == TILEATOM_REQ_SCATTER   ? TA_ADDR_SCATTER
	         : rq->flat                           ? TA_ADDR_FLAT
	                                              : TA_ADDR_INDEXED;
	if ((r.has_region = rq->region != NULL)) {
		r.region_rank = rq->region->rank;
		memcpy(r.region_origin, rq->region->origin, sizeof(r.region_origin));
		memcpy(r.region_shape, rq->region->shape, sizeof(r.region_shape));
	}
	r.scatter_dim = rq->dim;
	r.n_index = rq->n_index;
	for (int i = 0; i < rq->n_index; i++)
		r.index[i] = split_view(c, &rq->indices[i]);
	r.values = split_view(c, rq->values);
	r.compare = split_view(c, rq->compare);
	r.mask = split_view(c, o->mask);
	r.sem = (ta_sem)o->sem;
	r.scope = (ta_scope)o->scope;
	r.space = (ta_space)o->space;
	r.check_bounds = o->check_bounds;
	r.want_old = o->want_old;
	ta_tile_shape t = {.dtype = (ta_dtype)p->info.dtype, .rank = p->info.rank};
	memcpy(t.shape, p->info.shape, sizeof(t.shape));
	ta_error terr = {TA_OK, ""};
	if (ta_plan_build(&p->core, &t, &r, &terr) == TA_OK)
		return TILEATOM_OK;
	if (terr.code == TA_INVALID_ARGUMENT)
		return split_refuse(c, err, "%s", terr.msg);
	return tac_err(err, (int)terr.code, "tile '%s', a request over the frame limit: %s",
	               rq->tile, terr.msg);
}

/* Adds operand a (NULL: none), bound to the element shape as op, to the operands of p. */
static void split_add_operand(split_plan *p, const tileatom_array *a, const ta_operand *op)
{
	if (a) /* (cut: the element shape has 2 rows or more) */
		p->ops[p->nops++] = (split_operand){a, op->stride[0] != 0, tileatom_array_bytes(a)};
}

/* Plans the split of rq into *p (and its options into *o) and checks everything a split
 * needs, the indices too when check_bounds is off. */
static int split_prepare(tileatom_client *c, const tac_split_req *rq, bool pipelined,
                         tileatom_op_options *o, split_plan *p, tileatom_error *err)
{
	if (rq->opts)
		*o = *rq->opts;
	else
		tileatom_op_options_init(o);
	if (pipelined && o->want_old && !o->old_out)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "the request exceeds the daemon's frame limit of %" PRIu32
		               " bytes and is split, and the old values of a split submit go to "
		               "opts->old_out, which is NULL; nothing was sent",
		               c->max_frame);
	memset(p, 0, sizeof(*p));
	int rc = split_describe(c, rq->tile, pipelined, &p->info, err);
	if (rc == TILEATOM_OK)
		rc = split_check(c, rq, o, p, err);
	if (rc != TILEATOM_OK)
		return rc;
	const ta_plan *e = &p->core;
	if (e->rank == 0 || e->shape[0] < 2)
		return split_refuse(c, err, "its element shape has %s",
		                    e->rank == 0 ? "no axis" : "one row along its first axis");
	for (int i = 0; i < rq->n_index; i++)
		split_add_operand(p, &rq->indices[i], &e->index[i]);
	split_add_operand(p, rq->values, &e->values);
	split_add_operand(p, rq->compare, &e->compare);
	split_add_operand(p, o->mask, &e->mask);
	/* a part: the repeated operands and the overhead, plus rows of the cut operands (and
	 * of old values in the response) */
	size_t fixed = TAC_SPLIT_OVERHEAD, row = 0;
	for (int i = 0; i < p->nops; i++) {
		if (p->ops[i].cut)
			row += p->ops[i].bytes / (size_t)e->shape[0];
		else
			fixed += p->ops[i].bytes;
	}
	p->old_row = (size_t)(e->count / e->shape[0]) * tileatom_dtype_size(p->info.dtype);
	if (rq->returns_old && p->old_row > row)
		row = p->old_row;
	if (fixed >= c->max_frame)
		return split_refuse(c, err,
		                    "the operands every part repeats (broadcast along the first "
		                    "axis) take %zu bytes with the request's framing",
		                    fixed);
	size_t room = c->max_frame - fixed;
	if (row > room)
		return split_refuse(c, err,
		                    "one row along the first axis of its element shape takes %zu "
		                    "bytes and a part has room for %zu",
		                    row, room);
	if (room > TAC_SPLIT_PART_BYTES) /* whole rows of at most 4 MiB, or one row */
		room = row > TAC_SPLIT_PART_BYTES ? row : TAC_SPLIT_PART_BYTES;
	p->part_rows = row == 0 ? e->shape[0] : (int64_t)(room / row);
	if (p->part_rows > e->shape[0])
		p->part_rows = e->shape[0];
	p->nparts = (int)((e->shape[0] + p->part_rows - 1) / p->part_rows);
	/* the old values of the parts are copied into old_out from the host */
	if (o->want_old &&
	    (rc = tac_cuptr_refuse(c, o->old_out, o->old_out_size, "old_out of a split request",
	                           err)) != TILEATOM_OK)
		return rc;
	size_t old_bytes = (size_t)e->count * tileatom_dtype_size(p->info.dtype);
	if (o->want_old && o->old_out_size < old_bytes)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "the output buffer has %zu bytes and the old values need %zu; "
		               "nothing was applied",
		               o->old_out_size, old_bytes);
	return TILEATOM_OK;
}

/* One part of a split request (split_build). */
typedef struct split_part {
	int64_t r0;                                 /* its first row */
	int64_t rows;                               /* its rows */
	tileatom_op_options po;                     /* its options (mask: its rows) */
	tileatom_array ops[TAC_SPLIT_MAX_OPERANDS]; /* its operands, as in split_plan.ops */
	tileatom_region moved;                      /* its region */
	tac_msg m;                                  /* its request (borrows the fields above) */
} split_part;

/* Builds part i of the request (o: its options) into *pt, checking that it fits a frame;
 * its old values come inline when pipelined, else into its rows of o->old_out. */
static int split_build(tileatom_client *c, const tac_split_req *rq, const split_plan *p,
                       const tileatom_op_options *o, int i, bool pipelined, split_part *pt,
                       tileatom_error *err)
{
	int64_t r0 = pt->r0 = (int64_t)i * p->part_rows, rows = p->core.shape[0] - r0;
	pt->rows = rows = rows < p->part_rows ? rows : p->part_rows;
	pt->po = *o;
	if (pipelined || o->want_old) {
		pt->po.old_out = pipelined ? NULL : (uint8_t *)o->old_out + (size_t)r0 * p->old_row;
		pt->po.old_out_size = pipelined ? 0 : (size_t)rows * p->old_row;
	}
	if (o->mask)
		pt->po.mask = &pt->ops[p->nops - 1];
	for (int k = 0; k < p->nops; k++) { /* a cut operand's rows; a repeated one whole */
		const split_operand *so = &p->ops[k];
		pt->ops[k] = *so->array;
		if (so->cut) {
			pt->ops[k].shape[0] = rows;
			pt->ops[k].data = (const uint8_t *)so->array->data +
			                  (size_t)r0 * (so->bytes / (size_t)p->core.shape[0]);
		}
	}
	int at = rq->n_index;
	tac_split_req part = *rq; /* the part's operands, options and region */
	part.indices = rq->n_index > 0 ? pt->ops : NULL;
	part.values = rq->values ? &pt->ops[at++] : NULL;
	part.compare = rq->compare ? &pt->ops[at++] : NULL;
	part.opts = &pt->po;
	/* the region moves with the part where the rows of the element shape are region rows */
	pt->moved.rank = p->core.tile_rank;
	memcpy(pt->moved.origin, p->core.origin, sizeof(pt->moved.origin));
	memcpy(pt->moved.shape, p->core.extent, sizeof(pt->moved.shape));
	pt->moved.origin[0] += r0;
	pt->moved.shape[0] = rows;
	if (rq->kind == TILEATOM_REQ_ELEMENTWISE ||
	    (rq->kind == TILEATOM_REQ_SCATTER && rq->dim != 0))
		part.region = &pt->moved;
	int rc = tac_build_atomic(&pt->m, &part, err);
	if (rc == TILEATOM_OK && tac_frame_too_large(c, &pt->m))
		rc = tac_err(err, TILEATOM_E_INTERNAL,
		             "part %d of the split request still exceeds the frame limit "
		             "of %" PRIu32 " bytes",
		             i + 1, c->max_frame);
	return rc;
}

/* Checks the response to a part of rows rows (unit: a row, in messages), copying its old
 * values to old_to (when not NULL); *r gets its result. */
static int split_part_result(tileatom_client *c, int64_t rows, const char *unit, uint8_t *old_to,
                             size_t old_row, const Tileatom__OpResponse **r, tileatom_error *err)
{
	*r = c->last->op;
	if (!*r)
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "tileatomd answered a part with no result");
	size_t want = (size_t)rows * old_row, got = (*r)->old ? (*r)->old->data.len : 0;
	if (old_to && got != want)
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "tileatomd returned %zu bytes of old values for %" PRId64
		               " %s (%zu expected)",
		               got, rows, unit, want);
	if (old_to && got)
		memcpy(old_to, (*r)->old->data.data, got);
	return TILEATOM_OK;
}

int tac_split(tileatom_client *c, const tac_split_req *rq, tileatom_op_result *res,
              tileatom_error *err)
{
	tileatom_op_result local;
	if (!res)
		res = &local;
	memset(res, 0, sizeof(*res));
	tileatom_op_options o;
	split_plan p;
	int rc = split_prepare(c, rq, false, &o, &p, err);
	if (rc != TILEATOM_OK)
		return rc;
	const char *unit = p.core.rank == 1 ? "elements" : "rows";
	for (int i = 0; i < p.nparts; i++) {
		split_part pt;
		rc = split_build(c, rq, &p, &o, i, false, &pt, err);
		rc = tac_roundtrip(c, &pt.m, rc, err);
		const Tileatom__OpResponse *r = NULL;
		int64_t r0 = pt.r0, rows = pt.rows;
		if (rc == TILEATOM_OK)
			rc = split_part_result(c, rows, unit, o.want_old ? pt.po.old_out : NULL,
			                       p.old_row, &r, err);
		if (rc != TILEATOM_OK) {
			if (err && r0 > 0)
				tac_err(err, rc,
				        "part %d of %d (%s %" PRId64 "..%" PRId64
				        ") of a split request failed; %s 0..%" PRId64
				        " were applied: %s",
				        i + 1, p.nparts, unit, r0, r0 + rows - 1, unit, r0 - 1,
				        err->message);
			return rc;
		}
		res->applied += r->applied;
		res->skipped += r->skipped;
	}
	if (o.want_old) {
		res->old_rank = p.core.rank;
		memcpy(res->old_shape, p.core.shape, sizeof(res->old_shape));
		res->old_bytes = (size_t)p.core.count * tileatom_dtype_size(p.info.dtype);
	}
	return TILEATOM_OK;
}

/* ---- pipelined: split submits ------------------------------------------------------------ */

/* A split submit whose parts await tileatom_collect (c->splits, oldest first). */
struct tac_split_pending {
	tac_split_pending *next;    /* the next younger split submit (NULL: none) */
	uint64_t id;                /* the id its submit returned (its first part's) */
	tileatom_request_kind kind; /* ELEMENTWISE, SCATTER or INDEXED */
	int nparts;                 /* parts queued */
	uint8_t *old_out;           /* where the old values go (want_old), else NULL */
	split_plan plan; /* its plan (shape, part rows, old values; ops no longer read) */
};

int tac_split_submit(tileatom_client *c, const tac_split_req *rq, uint64_t *id, tileatom_error *err)
{
	tileatom_op_options o;
	split_plan p;
	int rc = split_prepare(c, rq, true, &o, &p, err);
	if (rc != TILEATOM_OK)
		return rc;
	tac_split_pending *s = calloc(1, sizeof(*s));
	if (!s)
		return tac_err(err, TILEATOM_E_NOMEM, "out of memory; nothing was sent");
	s->kind = rq->kind;
	s->old_out = o.want_old ? o.old_out : NULL;
	s->plan = p;
	size_t window = 2; /* parts that may be unanswered at once (set at part 1) */
	for (int i = 0; i < p.nparts; i++) {
		split_part pt; /* the old values come inline, collect copies them */
		rc = split_build(c, rq, &p, &o, i, true, &pt, err);
		if (rc == TILEATOM_OK && i == 0) {
			size_t frame = tac_request_size(&pt.m);
			window = TAC_SPLIT_WINDOW_BYTES / (frame ? frame : 1);
			if (window < 2)
				window = 2;
			if (window > TAC_SPLIT_WINDOW_PARTS)
				window = TAC_SPLIT_WINDOW_PARTS;
		}
		if (rc == TILEATOM_OK && i > 0) /* at most `window` parts unanswered */
			rc = tac_conn_wait_window(c, window - 1, err);
		if (rc == TILEATOM_OK) {
			tac_shm_rewrite(c, &pt.m);
			/* a frame of 64 KiB or more is written at once, so at most one part is
			 * held in memory; smaller ones are buffered as any submit */
			rc = tac_conn_submit(c, &pt.m, false, -1, i == 0 ? &s->id : NULL, err);
		}
		if (rc != TILEATOM_OK && i == 0) {
			free(s); /* nothing of it was queued */
			return rc;
		}
		if (rc != TILEATOM_OK) {
			/* parts already queued cannot be taken back, and the rest cannot follow */
			if (!c->broken && err)
				tac_err(
				    err, rc,
				    "part %d of %d of a split request could not be queued (%s); "
				    "parts 1..%d were, so the connection is broken",
				    i + 1, p.nparts, err->message, i);
			return tac_conn_break(c, err);
		}
		/* the newest pending request (the part just queued) is a part */
		c->pending[(c->pending_head + c->pending_count - 1) & (c->pending_cap - 1)].part =
		    true;
		if (i > 0) {
			c->split_extra++;
		} else { /* s joins the end of the FIFO (few split submits are pending) */
			tac_split_pending **end = &c->splits;
			while (*end)
				end = &(*end)->next;
			*end = s;
		}
		s->nparts = i + 1;
	}
	if (id)
		*id = s->id;
	return TILEATOM_OK;
}

size_t tac_split_ready(const tileatom_client *c)
{
	size_t frames = c->rxq_count, ready = 0, i = 0;
	const tac_split_pending *s = c->splits;
	while (i < c->pending_count) {
		const tac_pending *p = &c->pending[(c->pending_head + i) & (c->pending_cap - 1)];
		size_t need = 1;
		if (p->part) { /* a split submit's parts are pending together, in FIFO order */
			if (!s)
				break;
			need = (size_t)s->nparts;
			s = s->next;
		}
		if (need == 0 || frames < need)
			break;
		frames -= need;
		i += need;
		ready++;
	}
	return ready;
}

/* The ranges of rows applied, as text ("0..48, 98..199"), for the messages of collect. */
typedef struct split_runs {
	char text[112]; /* the ranges so far */
	size_t len;     /* bytes used in text */
	bool full;      /* text ends in ", ..." */
	int64_t from;   /* the first row of the open run (-1: none) */
} split_runs;

/* Closes the open run of runs at row `to` (inclusive). */
static void split_runs_close(split_runs *u, int64_t to)
{
	if (u->from >= 0 && !u->full) { /* a piece, or ", ..." once the next would not fit */
		char piece[48];
		snprintf(piece, sizeof(piece), "%s%" PRId64 "..%" PRId64, u->len ? ", " : "",
		         u->from, to);
		u->full = u->len + strlen(piece) + 6 >= sizeof(u->text);
		u->len += (size_t)snprintf(u->text + u->len, sizeof(u->text) - u->len, "%s",
		                           u->full ? ", ..." : piece);
	}
	u->from = -1;
}

int tac_split_collect(tileatom_client *c, tileatom_response *out, tileatom_error *err)
{
	tac_split_pending *s = c->splits;
	const split_plan *p = &s->plan;
	const int64_t n = p->core.shape[0];
	const char *unit = p->core.rank == 1 ? "elements" : "rows";
	out->id = s->id;
	out->kind = s->kind;
	split_runs runs = {"", 0, false, -1};
	int fail_part = 0, fail_rc = TILEATOM_OK, rc = TILEATOM_OK;
	int64_t fail_r0 = 0, fail_rows = 0;
	char fail_msg[TILEATOM_MSG_MAX] = "";
	for (int i = 0; i < s->nparts; i++) {
		int64_t r0 = (int64_t)i * p->part_rows;
		int64_t rows = n - r0 < p->part_rows ? n - r0 : p->part_rows;
		tileatom_request_kind kind;
		tileatom_error pe = {0, ""};
		rc = tac_conn_receive(c, &kind, &pe);
		if (rc != TILEATOM_OK) { /* the connection is broken: later parts are unknown */
			split_runs_close(&runs, r0 - 1);
			tac_err(err, rc,
			        "receiving part %d of %d of a split request: %s (%s %s were "
			        "applied; the later parts are unknown)",
			        i + 1, s->nparts, pe.message, unit, runs.len ? runs.text : "none");
			break;
		}
		if (i > 0 && c->split_extra > 0)
			c->split_extra--;
		int prc = tac_check_response(c->last, kind, &pe);
		const Tileatom__OpResponse *r = NULL;
		if (prc == TILEATOM_OK)
			prc = split_part_result(
			    c, rows, unit, s->old_out ? s->old_out + (size_t)r0 * p->old_row : NULL,
			    p->old_row, &r, &pe);
		if (prc == TILEATOM_OK) {
			out->applied += r->applied;
			out->skipped += r->skipped;
			if (runs.from < 0)
				runs.from = r0;
			continue;
		}
		split_runs_close(&runs, r0 - 1);
		if (fail_part == 0) {
			fail_part = i + 1;
			fail_rc = prc;
			fail_r0 = r0;
			fail_rows = rows;
			snprintf(fail_msg, sizeof(fail_msg), "%s", pe.message);
		}
	}
	if (rc == TILEATOM_OK) {
		split_runs_close(&runs, n - 1);
		rc = fail_rc;
		if (fail_part && runs.len == 0) /* nothing applied: the daemon's word alone */
			tac_err(err, rc, "%s", fail_msg);
		else if (fail_part)
			tac_err(err, rc,
			        "part %d of %d (%s %" PRId64 "..%" PRId64
			        ") of a split request failed; %s %s were applied: %s",
			        fail_part, s->nparts, unit, fail_r0, fail_r0 + fail_rows - 1, unit,
			        runs.text, fail_msg);
	}
	out->status = rc;
	if (rc == TILEATOM_OK && s->old_out) {
		out->dtype = p->info.dtype;
		out->rank = p->core.rank;
		memcpy(out->shape, p->core.shape, sizeof(out->shape));
		out->data = s->old_out;
		out->data_bytes = (size_t)n * p->old_row;
	}
	c->splits = s->next;
	free(s);
	return rc;
}

void tac_split_client_free(tileatom_client *c)
{
	while (c->splits) {
		tac_split_pending *next = c->splits->next;
		free(c->splits);
		c->splits = next;
	}
}
