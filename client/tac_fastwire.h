/* tac_fastwire.h: libtileatom-client's direct encoder of the hot requests and one-pass
 * decoder of their responses, the mirror image of daemon/fastwire.c, built on the field
 * table of proto/ta_wireschema.h. The encoder writes ping and the element-wise, scatter
 * and indexed atomic requests byte for byte as protobuf_c_message_pack does (from their
 * protobuf-c message, or for the hot pipelined submits from the public call's arguments:
 * tac_fastwire_write_atomic); the decoder
 * reads a Response holding an id, a status and a ping or OpResponse body (old values,
 * skipped, applied) into the same structures tileatom__response__unpack builds. Anything
 * else (another body, a shared buffer, Options.old_into, a message string, an unknown or
 * repeated field, an unusual varint) is declined and goes through protobuf-c as before.
 * Internal to the library. */
#ifndef TAC_FASTWIRE_H
#define TAC_FASTWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ta_wireschema.h"
#include "tileatom.h"
#include "tileatom.pb-c.h"

/* Index arrays of an IndexedAddr the encoder takes (more: protobuf-c). */
#define TAC_FW_MAX_INDICES 8
/* Extents of an old-values Array the decoder takes (more: protobuf-c). */
#define TAC_FW_MAX_SHAPE 8

/* Sizes of one Array message, worked out before writing it. */
typedef struct tac_fw_array_size {
	size_t msg;   /* bytes of the Array message */
	size_t shape; /* bytes of its packed shape */
} tac_fw_array_size;

/* The sizes of a request's nested messages, from tac_fastwire_plan for tac_fastwire_write. */
typedef struct tac_fw_plan {
	size_t size;                                 /* the whole Request payload's bytes */
	size_t body;                                 /* the body message's bytes */
	size_t region;                               /* Region's bytes */
	size_t region_origin;                        /* its packed origin's bytes */
	size_t region_shape;                         /* its packed shape's bytes */
	size_t addr;                                 /* ScatterAddr's / IndexedAddr's bytes */
	size_t options;                              /* Options' bytes */
	tac_fw_array_size values;                    /* the values Array */
	tac_fw_array_size compare;                   /* the compare Array */
	tac_fw_array_size mask;                      /* Options.mask */
	tac_fw_array_size index[TAC_FW_MAX_INDICES]; /* the index Arrays (ScatterAddr: [0]) */
} tac_fw_plan;

/* Storage of one response decoded by tac_fastwire_decode_response (one per client). */
typedef struct tac_fw_response {
	Tileatom__Response resp;             /* the decoded response (what c->last points to) */
	Tileatom__OpResponse op;             /* its op body */
	Tileatom__PingResponse ping;         /* its ping body */
	Tileatom__Array old;                 /* OpResponse.old */
	int64_t old_shape[TAC_FW_MAX_SHAPE]; /* old's extents */
	_Alignas(16) uint8_t old_small[16];  /* old's bytes when they fit (one element;
	                                        aligned as malloc's copy is) */
	uint8_t *old_data;                   /* malloc'd copy of old's bytes when larger
	                                        (aligned as protobuf-c's copy is) */
	size_t old_data_cap;                 /* bytes allocated at old_data */
} tac_fw_response;

/* True when the fast encoder takes req; *plan gets its sizes (plan->size: the payload). */
TA_WS_HIDDEN bool tac_fastwire_plan(const Tileatom__Request *req, tac_fw_plan *plan);

/* Writes req, planned by tac_fastwire_plan, at p (plan->size bytes); returns p + size. */
TA_WS_HIDDEN uint8_t *tac_fastwire_write(const Tileatom__Request *req, const tac_fw_plan *plan,
                                         uint8_t *p);

/* Extents of one packed field (an Array's shape, a Region's origin or shape) that
 * tac_fastwire_write_small takes (more: declined). */
#define TAC_FW_SMALL_EXTENTS 8
/* Bytes tac_fastwire_write_small may write at p before it knows whether it takes a request:
 * with its bounds (a tile name and each Array's data up to 127 bytes, TAC_FW_SMALL_EXTENTS
 * extents, TAC_FW_MAX_INDICES index arrays) a request cannot exceed about 2,900 bytes. */
#define TAC_FW_SMALL_ROOM 4096

/* Writes req at p in one pass (no sizing walk first: each length prefix is a byte
 * placeholder filled in when its message ends) when the encoder takes it and its payload
 * is at most 127 bytes, so that every length prefix is one byte; returns the payload's
 * bytes, byte for byte what protobuf_c_message_pack writes, or 0 when declined (what
 * tac_fastwire_plan declines, or too large: the bytes at p are then garbage). p must have
 * TAC_FW_SMALL_ROOM bytes of room. */
TA_WS_HIDDEN size_t tac_fastwire_write_small(const Tileatom__Request *req, uint8_t *p);

/* An element-wise or indexed atomic request over the whole tile (no region, no mask)
 * described by the public call's arguments, already checked as the builders check them
 * (tac_direct_describe in tac_codec.c), for tac_fastwire_write_atomic: the hot pipelined
 * submits skip the protobuf-c message. */
typedef struct tac_fw_atomic {
	tileatom_request_kind kind;            /* TILEATOM_REQ_ELEMENTWISE or _INDEXED */
	const char *tile;                      /* the tile's name */
	size_t tile_len;                       /* strlen(tile) */
	tileatom_op op;                        /* the op */
	int n_index;                           /* INDEXED: index arrays (else 0) */
	const tileatom_array *indices;         /* INDEXED: the index arrays */
	size_t index_bytes[TILEATOM_MAX_RANK]; /* their data bytes */
	bool flat;                             /* INDEXED: flat offsets */
	const tileatom_array *values;          /* values (CAS: desired) */
	size_t values_bytes;                   /* their data bytes */
	const tileatom_array *compare;         /* CAS: expected values, else NULL */
	size_t compare_bytes;                  /* their data bytes */
	int sem, scope, space;                 /* Options.sem, .scope, .space */
	bool no_bounds_check;                  /* Options.no_bounds_check */
	bool want_old;                         /* Options.want_old (set for ops that always
	                                          return what they read) */
	bool want_old_asked;                   /* the caller's want_old (a template's key) */
} tac_fw_atomic;

/* Writes the request a describes with id at p, byte for byte what the builders'
 * (tac_build_elementwise / tac_build_indexed) message packs to, when its payload is at most
 * 127 bytes (a tile name and each array's data up to 127 bytes); returns the payload's
 * bytes, or 0 when it is larger (the bytes at p are then garbage). p must have
 * TAC_FW_SMALL_ROOM bytes of room. */
TA_WS_HIDDEN size_t tac_fastwire_write_atomic(const tac_fw_atomic *a, uint64_t id, uint8_t *p);

/* Bytes of a request template after its id field (the whole payload is at most 127). */
#define TAC_FW_TEMPLATE_BYTES 128

/* The shape of one public array as a template keys it (its data: any non-NULL pointer). */
typedef struct tac_fw_key_array {
	int dtype;                        /* tileatom_array.dtype */
	int rank;                         /* tileatom_array.rank (0..TILEATOM_MAX_RANK) */
	int64_t shape[TILEATOM_MAX_RANK]; /* its rank extents */
} tac_fw_key_array;

/* The last request one connection wrote by the direct path, kept so that the next one of
 * the same shape is written as its id plus these bytes with the operands' data patched in
 * (tac_fw_template_match, tac_fw_template_write). The key is every public argument the
 * bytes (or the direct path's checks) depend on; only the arrays' data may differ. */
typedef struct tac_fw_template {
	bool valid;                                /* the fields below hold a template */
	tileatom_request_kind kind;                /* key: TILEATOM_REQ_ELEMENTWISE or _INDEXED */
	tileatom_op op;                            /* key: the op */
	int n_index;                               /* key: INDEXED: index arrays (else 0) */
	bool flat;                                 /* key: INDEXED: flat offsets */
	bool has_compare;                          /* key: compare values given */
	int sem, scope, space;                     /* key: the options' sem, scope, space */
	bool check_bounds;                         /* key: the options' check_bounds */
	bool want_old;                             /* key: the options' want_old as given */
	tac_fw_key_array index[TILEATOM_MAX_RANK]; /* key: the index arrays' shapes */
	tac_fw_key_array values;                   /* key: the values' shape */
	tac_fw_key_array compare;                  /* key: the compare values' shape */
	char tile[TILEATOM_NAME_MAX + 1];          /* key: the tile's name */
	size_t index_bytes[TILEATOM_MAX_RANK];     /* data bytes of each index array */
	size_t values_bytes;                       /* data bytes of the values */
	size_t compare_bytes;                      /* data bytes of the compare values */
	size_t most;                               /* the largest of those (device pointers) */
	uint8_t index_at[TILEATOM_MAX_RANK];       /* where each index array's data lies in bytes */
	uint8_t values_at;                         /* where the values' data lies in bytes */
	uint8_t compare_at;                        /* where the compare data lies in bytes */
	uint8_t id_key;                            /* the one-byte key of Request.id */
	uint8_t len;                               /* bytes used */
	uint8_t bytes[TAC_FW_TEMPLATE_BYTES];      /* the payload after its id field */
} tac_fw_template;

/* tac_fastwire_write_atomic that also keeps what it wrote as *t when it takes the request
 * (t unchanged when it declines). */
TA_WS_HIDDEN size_t tac_fastwire_write_atomic_template(const tac_fw_atomic *a, uint64_t id,
                                                       uint8_t *p, tac_fw_template *t);

/* True when public array a has key k's shape and its data. */
static inline __attribute__((always_inline)) bool tac_fw_key_array_eq(const tac_fw_key_array *k,
                                                                      const tileatom_array *a)
{
	if ((int)a->dtype != k->dtype || a->rank != k->rank || !a->data)
		return false;
	for (int i = 0; i < k->rank; i++)
		if (a->shape[i] != k->shape[i])
			return false;
	return true;
}

/* True when t holds a template and the public call's arguments (kind, tile, op, ... as
 * tac_direct_describe takes them) have its key: the same tile name, op, options, addressing
 * form, dtypes and shapes, no region and no mask, data given. Such a call is one
 * tac_direct_describe takes, and tac_fw_template_write writes its bytes. (Inline: the hot
 * submits call it on every request.) */
static inline __attribute__((always_inline)) bool
tac_fw_template_match(const tac_fw_template *t, tileatom_request_kind kind, const char *tile,
                      tileatom_op op, const tileatom_region *region, int n_index,
                      const tileatom_array *indices, bool flat, const tileatom_array *values,
                      const tileatom_array *compare, const tileatom_op_options *opts)
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
			if (!tac_fw_key_array_eq(&t->index[i], &indices[i]))
				return false;
	}
	if (!tac_fw_key_array_eq(&t->values, values) ||
	    (compare && !tac_fw_key_array_eq(&t->compare, compare)))
		return false;
	return strcmp(tile, t->tile) == 0;
}

/* Writes the request of a call t matched (its arrays indices, values, compare) with id at
 * p: byte for byte what tac_fastwire_write_atomic writes for it; returns the payload's
 * bytes, or 0 when they exceed 127 (as tac_fastwire_write_atomic declines). p must have
 * TAC_FW_SMALL_ROOM bytes of room. */
static inline size_t tac_fw_template_write(const tac_fw_template *t, uint64_t id,
                                           const tileatom_array *indices,
                                           const tileatom_array *values,
                                           const tileatom_array *compare, uint8_t *p)
{
	uint8_t *start = p;
	if (id) { /* proto3: a zero id is left out */
		*p++ = t->id_key;
		p = wr_varint(p, id);
	}
	size_t n = (size_t)(p - start) + t->len;
	if (n >= TAC_FW_TEMPLATE_BYTES) /* over 127 */
		return 0;
	/* the whole array, a constant size (moves, not a call); the room holds it */
	memcpy(p, t->bytes, TAC_FW_TEMPLATE_BYTES);
	for (int i = 0; i < t->n_index; i++)
		fw_copy_small(p + t->index_at[i], (const uint8_t *)indices[i].data,
		              t->index_bytes[i]);
	fw_copy_small(p + t->values_at, (const uint8_t *)values->data, t->values_bytes);
	if (t->has_compare)
		fw_copy_small(p + t->compare_at, (const uint8_t *)compare->data, t->compare_bytes);
	return n;
}

/* Decodes len bytes at data as a Response of a hot shape into *out (its storage reused,
 * its old values copied); returns &out->resp, or NULL when declined (out may then hold
 * anything: it is not a response). */
TA_WS_HIDDEN Tileatom__Response *tac_fastwire_decode_response(tac_fw_response *out,
                                                              const uint8_t *data, size_t len);

/* Frees out's allocations (not out itself). */
TA_WS_HIDDEN void tac_fastwire_response_free(tac_fw_response *out);

#endif /* TAC_FASTWIRE_H */
