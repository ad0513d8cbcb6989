/* fastwire.h: a one-pass decoder and encoder for the hot requests and responses (ping and
 * the atomic read-modify-write requests: element-wise, scatter, indexed; their responses:
 * status, message, OpResponse with the old values, PingResponse). They give exactly what
 * protobuf-c's generic unpack and pack give for the same bytes, at a fraction of the cost;
 * anything they do not fully understand (an unknown or repeated field, a shared buffer, an
 * unusual varint, a string that is not UTF-8 without NUL, another message) is "not mine"
 * and the caller uses protobuf-c (with wirecheck.c's string check). Field numbers and types
 * come from the protobuf-c descriptors (proto/ta_wireschema.c, shared with the client
 * library's codec: looked up by name once; a .proto change they do not expect aborts the
 * process with a message naming the field). */
#ifndef TA_DAEMON_FASTWIRE_H
#define TA_DAEMON_FASTWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "ta_plan.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"

/* Checks the descriptors against what the decoder and encoder expect (ta_wireschema_init:
 * once per process; later calls return at once). Aborts with a message when the schema
 * changed under them. */
void ta_fastwire_init(void);

/* Decodes len bytes at data as a Request of a hot shape into arena memory (the same
 * structures tileatom__request__unpack would build, every string and bytes field copied,
 * every string valid UTF-8 without NUL). Returns NULL when the bytes are not a hot shape
 * this decoder takes (nothing else happened but arena allocations, freed at its reset). */
Tileatom__Request *ta_fastwire_decode_request(ta_arena *arena, const uint8_t *data, size_t len);

/* A hot atomic request (element-wise, scatter or indexed) decoded straight into the
 * ta_request that dispatch plans, with the parts that need the tile or a check of their
 * own (name, op, region) as they came. */
typedef struct ta_fw_atomic {
	uint64_t id;           /* Request.id */
	ta_req_kind kind;      /* TA_REQ_ELEMENTWISE, TA_REQ_SCATTER or TA_REQ_INDEXED */
	const char *tile;      /* the tile name (arena memory, NUL-terminated) */
	int32_t op;            /* op as sent (dispatch checks it against the table) */
	const int64_t *origin; /* Region.origin (arena memory), NULL when empty */
	size_t n_origin;       /* entries at origin */
	const int64_t *shape;  /* Region.shape (arena memory), NULL when empty */
	size_t n_shape;        /* entries at shape */
	ta_request req;        /* family, addressing with its index views, values, compare,
	                          options and mask; op and region still unset */
	const uint8_t *index_wire[TA_MAX_RANK]; /* where each index array's data bytes lie in
	                                           the decoded bytes (NULL: no data field) */
	const uint8_t *values_wire;             /* where the values' data bytes lie (NULL: none) */
	const uint8_t *compare_wire;            /* where the compare data bytes lie (NULL: none) */
} ta_fw_atomic;

/* Decodes len bytes at data as a hot atomic request straight into *out (operand bytes and
 * strings copied into arena memory), giving what dispatch's conversion of
 * ta_fastwire_decode_request's structures gives. Returns false, with only arena
 * allocations made, when ta_fastwire_decode_request would not take the bytes or when the
 * conversion could fail on something other than the op and the region (addressing
 * missing or with no or more than TA_MAX_RANK index arrays, an array of rank over
 * TA_MAX_RANK): the caller then takes that way, which answers as before. */
bool ta_fastwire_decode_atomic(ta_arena *arena, const uint8_t *data, size_t len, ta_fw_atomic *out);

/* A Response with status OK, no message and an OpResponse body, as
 * ta_fastwire_append_op takes it. */
typedef struct ta_fw_op {
	uint64_t id;          /* Response.id */
	bool has_old;         /* OpResponse.old is present */
	int32_t dtype;        /* old.dtype */
	size_t rank;          /* entries at shape */
	const int64_t *shape; /* old.shape */
	const void *data;     /* old.data (len bytes) */
	size_t len;           /* bytes at data */
	uint64_t skipped;     /* OpResponse.skipped */
	uint64_t applied;     /* OpResponse.applied */
} ta_fw_op;

/* Appends the Response op describes as one frame to buf, byte for byte what
 * ta_fastwire_append_response (and ta_frame_append) would append for it. Returns 0, -1
 * (over max_payload: nothing appended), -2 (out of memory) or 1 (a shape it does not take:
 * a negative dtype, or a field number too large for a one-byte key; nothing appended). */
int ta_fastwire_append_op(const ta_fw_op *op, uint32_t max_payload, ta_frame_buf *buf);

/* Appends resp as one frame to buf, byte for byte what ta_frame_append would append.
 * Returns 0 (appended), -1 (the payload is over max_payload: nothing appended), -2 (out of
 * memory), or 1 when resp is not a shape this encoder takes (nothing appended: use
 * ta_frame_append). */
int ta_fastwire_append_response(const Tileatom__Response *resp, uint32_t max_payload,
                                ta_frame_buf *buf);

#endif /* TA_DAEMON_FASTWIRE_H */
