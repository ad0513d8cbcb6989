/* tac_wire.h: libtileatom-client's one data-plane codec. The writer turns the description
 * of a data-plane request the builders fill and check (tac_msg, tac_internal.h: ping, read,
 * write, the element-wise, scatter and indexed atomics, gather, the stores, atomic load and
 * store, with shared-buffer and device-pointer operands and old_into) into its bytes, byte
 * for byte what protobuf_c_message_pack writes; the template (tac_tpl) is a cache in front
 * of it: the bytes it wrote for the last small atomic request, which a pipelined call of the
 * same key (tile, op, options, addressing form, dtypes, shapes) reuses with its own id and
 * data. The decoder reads every data-plane response (id, status, message, a ping, op or read
 * body) into the same structures tileatom__response__unpack builds. Control-plane requests
 * and responses (hello, auth, create, list, stats, register...) go through protobuf-c. Field
 * numbers come from the protobuf-c descriptors by name (proto/ta_wireschema.h), so
 * proto/tileatom.proto stays the one source of truth. Internal to the library. */
#ifndef TAC_WIRE_H
#define TAC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ta_types.h"
#include "ta_wireschema.h"
#include "tileatom.h"
#include "tileatom.pb-c.h"

struct tac_msg; /* the request description (tac_internal.h) */

/* ---- the writer ------------------------------------------------------------------------ */

/* Nested fields (messages and packed lists) one request may hold: the most a builder makes
 * (a body, two regions, four index arrays each with a shape and a buffer reference, values,
 * compare, options, mask, old_into) is 29. */
#define TAC_WIRE_NESTED 32

/* What tac_wire_plan works out for tac_wire_write: the payload's size and the length of
 * each nested field, in the order the writer opens them. */
typedef struct tac_wire_plan {
	size_t size;                 /* bytes of the whole Request payload */
	size_t len[TAC_WIRE_NESTED]; /* each nested field's length */
} tac_wire_plan;

/* Where tac_wire_write put what a template patches. */
typedef struct tac_wire_marks {
	const uint8_t *body;                        /* the end of the id field */
	const uint8_t *index_at[TILEATOM_MAX_RANK]; /* each index array's data (IndexedAddr) */
	const uint8_t *values_at;                   /* the values' data */
	const uint8_t *compare_at;                  /* the compare data */
} tac_wire_marks;

/* True when requests of kind are data-plane requests, which the writer writes and whose
 * responses tac_wire_decode_response reads (ping and the kinds that name a tile). */
static inline bool tac_wire_takes(tileatom_request_kind kind)
{
	return kind == TILEATOM_REQ_PING ||
	       (ta_req_valid((ta_req_kind)kind) && ta_req_has_tile((ta_req_kind)kind));
}

/* Sizes data-plane request m (tac_wire_takes(m->kind)) into *plan; returns plan->size. */
TA_WS_HIDDEN size_t tac_wire_plan_request(const struct tac_msg *m, tac_wire_plan *plan);

/* Writes m, planned by tac_wire_plan_request, at p (plan->size bytes); *marks (NULL: not
 * wanted) gets where its parts lie. Returns p + plan->size. */
TA_WS_HIDDEN uint8_t *tac_wire_write(const struct tac_msg *m, const tac_wire_plan *plan, uint8_t *p,
                                     tac_wire_marks *marks);

/* Points the body of data-plane request m (begun with its kind's default body) at its
 * fields, each where that body has it (the others: not in it): tile, op, region (or
 * window), addr (a ScatterAddr, IndexedAddr or Addressing), values (or padding), compare
 * and options. */
TA_WS_HIDDEN void tac_wire_set_body(struct tac_msg *m, const char *tile, int op, const void *region,
                                    const void *addr, const void *values, const void *compare,
                                    const Tileatom__Options *options);

/* ---- the template: a cache of the writer's bytes ------------------------------------------ */

/* Bytes of a template after its id field (the whole payload is at most 127). */
#define TAC_TPL_BYTES 128
/* Room tac_tpl_write needs at p: an id of up to 10 bytes and a key, then TAC_TPL_BYTES. */
#define TAC_TPL_ROOM (TAC_TPL_BYTES + 16)

/* The shape of one public array as a template keys it (its data: any non-NULL pointer). */
typedef struct tac_tpl_array {
	int dtype;                        /* tileatom_array.dtype */
	int rank;                         /* tileatom_array.rank (0..TILEATOM_MAX_RANK) */
	int64_t shape[TILEATOM_MAX_RANK]; /* its rank extents */
} tac_tpl_array;

/* The bytes the writer wrote for the last small element-wise or indexed request over a
 * whole tile (no region, mask, shared buffer or old_into) on one connection, with its key:
 * every argument of the public call those bytes depend on, so that only the arrays' data
 * may differ in a call that matches (tac_tpl_match); tac_tpl_write writes such a call as
 * its id, these bytes and its data. */
typedef struct tac_tpl {
	bool valid;                             /* the fields below hold a template */
	tileatom_request_kind kind;             /* key: TILEATOM_REQ_ELEMENTWISE or _INDEXED */
	tileatom_op op;                         /* key: the op */
	int n_index;                            /* key: INDEXED: index arrays (else 0) */
	bool flat;                              /* key: INDEXED: flat offsets */
	bool has_compare;                       /* key: compare values given */
	int sem, scope, space;                  /* key: the options' sem, scope, space */
	bool check_bounds;                      /* key: the options' check_bounds */
	bool want_old;                          /* key: the options' want_old as given */
	tac_tpl_array index[TILEATOM_MAX_RANK]; /* key: the index arrays' shapes */
	tac_tpl_array values;                   /* key: the values' shape */
	tac_tpl_array compare;                  /* key: the compare values' shape */
	char tile[TILEATOM_NAME_MAX + 1];       /* key: the tile's name */
	size_t index_bytes[TILEATOM_MAX_RANK];  /* data bytes of each index array */
	size_t values_bytes;                    /* data bytes of the values */
	size_t compare_bytes;                   /* data bytes of the compare values */
	size_t most;                            /* the largest of those (device pointers) */
	uint8_t index_at[TILEATOM_MAX_RANK];    /* where each index array's data lies in bytes */
	uint8_t values_at;                      /* where the values' data lies in bytes */
	uint8_t compare_at;                     /* where the compare data lies in bytes */
	uint8_t len;                            /* bytes used */
	uint8_t bytes[TAC_TPL_BYTES];           /* the payload after its id field */
} tac_tpl;

/* Keeps request m, which tac_wire_write just wrote (marks: where; end: the byte after it),
 * as *t when it is a template's kind of request: element-wise or indexed, no region, mask,
 * shared buffer or old_into, data in every array, at most TAC_TPL_BYTES after the id field
 * (else t keeps its template, or is emptied). */
TA_WS_HIDDEN void tac_tpl_keep(tac_tpl *t, const struct tac_msg *m, const tac_wire_marks *marks,
                               const uint8_t *end);

/* True when public array a has key k's shape and its data. */
static inline __attribute__((always_inline)) bool tac_tpl_array_eq(const tac_tpl_array *k,
                                                                   const tileatom_array *a)
{
	if ((int)a->dtype != k->dtype || a->rank != k->rank || !a->data)
		return false;
	for (int i = 0; i < k->rank; i++)
		if (a->shape[i] != k->shape[i])
			return false;
	return true;
}

/* True when t holds a template and the public call's arguments have its key: the same tile
 * name, op, options, addressing form, dtypes and shapes, no region and no mask, data given.
 * The builder takes such a call exactly as it took t's, so its bytes are tac_tpl_write's.
 * (Inline: the hot submits call it on every request.) */
static inline __attribute__((always_inline)) bool
tac_tpl_match(const tac_tpl *t, tileatom_request_kind kind, const char *tile, tileatom_op op,
              const tileatom_region *region, int n_index, const tileatom_array *indices, bool flat,
              const tileatom_array *values, const tileatom_array *compare,
              const tileatom_op_options *opts)
{
	static const tileatom_op_options defaults = TILEATOM_OP_OPTIONS_INIT;
	if (!t->valid || kind != t->kind || op != t->op || region || !tile || !values ||
	    (compare != NULL) != t->has_compare)
		return false;
	if (!opts)
		opts = &defaults;
	if (opts->mask || (int)opts->sem != t->sem || (int)opts->scope != t->scope ||
	    (int)opts->space != t->space || opts->check_bounds != t->check_bounds ||
	    opts->want_old != t->want_old)
		return false;
	if (kind == TILEATOM_REQ_INDEXED) {
		if (n_index != t->n_index || flat != t->flat || !indices)
			return false;
		for (int i = 0; i < n_index; i++)
			if (!tac_tpl_array_eq(&t->index[i], &indices[i]))
				return false;
	}
	if (!tac_tpl_array_eq(&t->values, values) ||
	    (compare && !tac_tpl_array_eq(&t->compare, compare)))
		return false;
	return strcmp(tile, t->tile) == 0;
}

/* Writes the request of a call t matched (its arrays indices, values, compare) with id at
 * p, which has TAC_TPL_ROOM bytes: what tac_wire_write writes for it; returns the payload's
 * bytes. */
static inline size_t tac_tpl_write(const tac_tpl *t, uint64_t id, const tileatom_array *indices,
                                   const tileatom_array *values, const tileatom_array *compare,
                                   uint8_t *p)
{
	uint8_t *start = p;
	if (id) {                          /* proto3: a zero id is left out */
		*p++ = fw_key1[FW_REQ_ID]; /* one byte (tac_wire.c checks) */
		p = wr_varint(p, id);
	}
	size_t n = (size_t)(p - start) + t->len;
	/* the whole array, a constant size (moves, not a call); the room holds it */
	memcpy(p, t->bytes, TAC_TPL_BYTES);
	for (int i = 0; i < t->n_index; i++)
		fw_copy_small(p + t->index_at[i], (const uint8_t *)indices[i].data,
		              t->index_bytes[i]);
	fw_copy_small(p + t->values_at, (const uint8_t *)values->data, t->values_bytes);
	if (t->has_compare)
		fw_copy_small(p + t->compare_at, (const uint8_t *)compare->data, t->compare_bytes);
	return n;
}

/* ---- the decoder ----------------------------------------------------------------------- */

/* Extents of an array the decoder takes (more: it declines). */
#define TAC_WIRE_MAX_SHAPE 8

/* Storage of the data-plane response tac_wire_decode_response decoded (one per client). */
typedef struct tac_wire_response {
	Tileatom__Response resp;           /* the decoded response (what c->last points to) */
	Tileatom__OpResponse op;           /* its op body */
	Tileatom__PingResponse ping;       /* its ping body */
	Tileatom__Array array;             /* OpResponse.old or the read body's data */
	int64_t shape[TAC_WIRE_MAX_SHAPE]; /* the array's extents */
	_Alignas(16) uint8_t small[16];    /* its bytes when they fit (aligned as malloc's) */
	uint8_t *data;                     /* malloc'd copy of its bytes when larger */
	size_t data_cap;                   /* bytes allocated at data */
	char *text;                        /* malloc'd copy of the message */
	size_t text_cap;                   /* bytes allocated at text */
} tac_wire_response;

/* Decodes len bytes at data, the response to a data-plane request, into *out (its storage
 * reused, its bytes copied); returns &out->resp, or NULL when they are not such a response
 * (a malformed field, a field of the wrong wire type, a message-typed field twice, another
 * body, more than TAC_WIRE_MAX_SHAPE extents, a buffer reference) or memory is short.
 * Unknown fields are skipped, as protobuf-c skips them. */
TA_WS_HIDDEN Tileatom__Response *tac_wire_decode_response(tac_wire_response *out,
                                                          const uint8_t *data, size_t len);

/* Frees out's allocations (not out itself). */
TA_WS_HIDDEN void tac_wire_response_free(tac_wire_response *out);

#endif /* TAC_WIRE_H */
