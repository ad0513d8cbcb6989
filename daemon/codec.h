/* codec.h: the daemon's data-plane wire codec: the one decoder of every request that names a
 * tile (write, read, the element-wise, scatter and indexed atomics, gather, scatter store,
 * atomic load and store: the tile column of tacore/ta_ops.def), from the payload's bytes
 * into a ta_wire_request; and the one writer of their responses and of every error answer
 * (status, message, OpResponse or the data body). The control plane (hello, ping, auth,
 * create, destroy, list, describe, stats, register_buffer, snapshot) is decoded and
 * answered through protobuf-c.
 *
 * The decoder reads what protobuf-c's unpack reads, with the same field numbers and types
 * (proto/ta_wireschema.c reads them from the descriptors once): unknown fields are skipped,
 * a scalar given twice keeps its last value, repeated integers come packed or not, 32-bit
 * fields keep the low 32 bits of their varint, a bool is true for any non-zero varint.
 * Anything protobuf-c does not unpack is TA_WIRE_MALFORMED. Two things it answers with a
 * problem (an INVALID_ARGUMENT with the request's id) where protobuf-c would go on: a
 * string that is not UTF-8 or holds a NUL (wirecheck.c's rule and message), and a message
 * field, oneof or Request body given more than once in one message (protobuf-c merges or
 * replaces; no encoder sends that). The decoder converts nothing: ranks, counts and
 * references are kept as they came, and the handlers (handlers.c) check them, in one order,
 * while turning them into a ta_request.
 *
 * In front of the decoder, a connection's kept request (below): the same request again is
 * recognised from its bytes and runs from its kept plan, without being decoded or planned. */
#ifndef TA_DAEMON_CODEC_H
#define TA_DAEMON_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "registry.h"
#include "ta_frame.h"
#include "ta_plan.h"
#include "ta_types.h"

/* What the bytes of a payload are. */
typedef enum ta_wire_outcome {
	TA_WIRE_DATA = 0,     /* a data-plane request, or a Request with no body: in the output */
	TA_WIRE_CONTROL = 1,  /* a Request with one control-plane body: decode it with protobuf-c */
	TA_WIRE_MALFORMED = 2 /* not a Request protobuf-c would unpack */
} ta_wire_outcome;

/* A shared-buffer range (BufferRef) as sent. */
typedef struct ta_wire_ref {
	bool present;       /* the field was sent */
	uint64_t buffer_id; /* buffer_id */
	uint64_t offset;    /* offset */
	uint64_t length;    /* length */
} ta_wire_ref;

/* An Array as sent. */
typedef struct ta_wire_array {
	bool present;               /* the field was sent */
	int32_t dtype;              /* dtype */
	size_t n_shape;             /* shape entries sent (the first TA_MAX_RANK kept) */
	int64_t shape[TA_MAX_RANK]; /* shape */
	const uint8_t *data;        /* data: its bytes in the payload (NULL when empty) */
	size_t len;                 /* bytes at data */
	ta_wire_ref shared;         /* shared */
} ta_wire_array;

/* A Region as sent. */
typedef struct ta_wire_region {
	size_t n_origin;             /* origin entries sent (the first TA_MAX_RANK kept) */
	size_t n_shape;              /* shape entries sent (the first TA_MAX_RANK kept) */
	int64_t origin[TA_MAX_RANK]; /* origin */
	int64_t shape[TA_MAX_RANK];  /* shape */
} ta_wire_region;

/* Which addressing a request sent. */
typedef enum ta_wire_form {
	TA_FORM_NONE = 0,    /* none (the atomic element-wise request has no addr field) */
	TA_FORM_REGION = 1,  /* Addressing.region */
	TA_FORM_SCATTER = 2, /* a ScatterAddr (Addressing.scatter, ScatterAtomicRequest.addr) */
	TA_FORM_INDEXED = 3  /* an IndexedAddr (Addressing.indexed, IndexedAtomicRequest.addr) */
} ta_wire_form;

/* Bytes of a problem's message. */
#define TA_WIRE_PROBLEM_MAX 200

/* A data-plane request as sent (fields of its body that it does not have stay empty). */
typedef struct ta_wire_request {
	/* the scalars first (ta_codec_decode zeroes them at once) */
	uint64_t id;                /* Request.id */
	ta_req_kind kind;           /* the body (TA_REQ_NONE: none was sent) */
	const char *tile;           /* tile (arena memory, NUL-terminated; "" when not sent) */
	int32_t op;                 /* op (the atomic families) */
	ta_wire_form form;          /* the addressing sent */
	uint32_t dim;               /* ScatterAddr.dim */
	bool flat;                  /* IndexedAddr.flat */
	size_t n_indices;           /* index arrays sent (the first TA_MAX_RANK kept) */
	bool has_options;           /* options was sent */
	int32_t sem;                /* options.sem */
	int32_t scope;              /* options.scope */
	int32_t space;              /* options.space */
	bool no_bounds_check;       /* options.no_bounds_check */
	bool want_old;              /* options.want_old */
	bool refs;                  /* an Array.shared or an old_into was sent (logged inline) */
	bool problem;               /* answered with problem_msg, nothing runs */
	ta_wire_region region;      /* region (write, read, atomics) or window (memory ops) */
	ta_wire_region addr_region; /* Addressing.region (form REGION) */
	ta_wire_array index[TA_MAX_RANK];      /* ScatterAddr.indices, IndexedAddr.indices */
	ta_wire_array values;                  /* values */
	ta_wire_array compare;                 /* compare */
	ta_wire_array padding;                 /* padding (gather) */
	ta_wire_array mask;                    /* options.mask */
	ta_wire_ref old_into;                  /* options.old_into */
	char problem_msg[TA_WIRE_PROBLEM_MAX]; /* the first problem found */
} ta_wire_request;

/* Checks the descriptors the codec reads its field numbers from (once per process; later
 * calls return at once). Aborts with a message when the schema changed under it. */
void ta_codec_init(void);

/* Decodes the len bytes at data. TA_WIRE_DATA: *w holds the request (strings copied into
 * arena; array data pointing into data, which must outlive *w). TA_WIRE_CONTROL: only
 * w->id is set. TA_WIRE_MALFORMED: nothing (but arena allocations) happened. */
ta_wire_outcome ta_codec_decode(ta_arena *arena, const uint8_t *data, size_t len,
                                ta_wire_request *w);

/* The body of a data-plane response. */
typedef enum ta_reply_body {
	TA_BODY_NONE = 0, /* no body (an error) */
	TA_BODY_OP = 1,   /* OpResponse (old values, skipped, applied) */
	TA_BODY_DATA = 2  /* Response.data (read) */
} ta_reply_body;

/* A data-plane response, as ta_codec_append writes it. */
typedef struct ta_reply_msg {
	uint64_t id;          /* Response.id */
	int32_t status;       /* Response.status */
	const char *message;  /* Response.message (NULL or "": none) */
	ta_reply_body body;   /* the body */
	bool has_old;         /* OP: OpResponse.old is present; DATA: the array is */
	int32_t dtype;        /* the array's dtype */
	size_t rank;          /* entries at shape */
	const int64_t *shape; /* the array's shape */
	const void *data;     /* its data (len bytes) */
	size_t len;           /* bytes at data */
	uint64_t skipped;     /* OpResponse.skipped */
	uint64_t applied;     /* OpResponse.applied */
} ta_reply_msg;

/* Appends m as one frame to buf, byte for byte what protobuf_c_message_pack writes for the
 * same Response (fields in number order, zero scalars and empty fields left out); *need
 * (may be NULL) gets the payload's size. Returns 0, -1 (the payload is over max_payload:
 * nothing appended) or -2 (out of memory). */
int ta_codec_append(const ta_reply_msg *m, uint32_t max_payload, ta_frame_buf *buf, size_t *need);

/* ---- the kept request: a connection's last one-element atomic request ----
 *
 * A pipelining client sends one request shape over and over: the same tile, op, options
 * and addressing, with only the id and the index and operand values changed. When the
 * bytes of a payload after its id field equal the kept request's except for the data bytes
 * of its index, values and compare arrays, the payload decodes to the same ta_request with
 * other operand bytes of the same sizes; and the plans kept here (one element, bounds
 * checked, no mask) do not depend on those bytes, only point to them. So the kept plan,
 * with the new bytes copied into the slots its operands point to, is the plan
 * ta_plan_build would build for the new payload. Dispatch records a request after it ran
 * its ordinary way (ta_repeat_record) and tries the next one against it first
 * (ta_repeat_match); anything else (other bytes, the tile removed or re-created, an error)
 * takes the ordinary way, which answers as before.
 *
 * One per connection (in its ta_session), used by one request at a time. */

/* Longest request payload kept (bytes after the id field). */
#define TA_REPEAT_MAX_BYTES 160
/* Shortest payload kept (bytes after the id field; whole words are compared). */
#define TA_REPEAT_MIN_BYTES 8
/* Operand arrays whose data may change: the index arrays, values and compare. */
#define TA_REPEAT_HOLES (TA_MAX_RANK + 2)

/* Bytes of the kept payload that may differ: one operand's data (one element). */
typedef struct ta_repeat_hole {
	uint16_t at;    /* offset in ta_repeat.body */
	uint16_t len;   /* bytes (one element of its dtype) */
	uint64_t *slot; /* where the kept plan reads them */
} ta_repeat_hole;

/* The kept request. */
typedef struct ta_repeat {
	bool valid;                             /* a request is kept */
	uint64_t gen;                           /* bumped by every ta_repeat_record: copies of
	                                           plan made before (pipeline.c) are stale */
	ta_req_kind kind;                       /* its kind (metrics) */
	uint32_t len;                           /* bytes at body */
	uint64_t body[TA_REPEAT_MAX_BYTES / 8]; /* its payload after the id field (zero after
	                                           len bytes) */
	uint64_t same[TA_REPEAT_MAX_BYTES / 8]; /* per byte of body, 0xff where a repeat must
	                                           have the same byte, 0 in the holes */
	uint64_t last_body;                     /* the last 8 bytes of body (len >= 8) */
	uint64_t last_same;                     /* same for them */
	int n_holes;                            /* entries in holes, in order of offset */
	ta_repeat_hole holes[TA_REPEAT_HOLES];  /* the operand data bytes in body */
	uint64_t slots[TA_REPEAT_HOLES];        /* operand storage the plan points to */
	uint64_t old;                           /* storage of the old value (plan.old_out) */
	ta_plan plan;                           /* its plan, operands pointing into slots */
	ta_tile *tile;                          /* the tile it ran on (no reference held) */
	uint64_t stamp;                         /* that tile's stamp then (ta_tile_cache) */
	ta_tile_cache tiles;                    /* a lookup cache of that tile */
	char name[TA_NAME_MAX + 1];             /* the tile's name */
	uint64_t hits;                          /* requests run as the kept one (tests) */
} ta_repeat;

/* Forgets the kept request. */
static inline void ta_repeat_clear(ta_repeat *r)
{
	r->valid = false;
}

/* Keeps the request of len bytes at payload, decoded as w (codec.h: its operands' bytes
 * lie in payload), converted into req and run successfully with plan on tile, which cache (the
 * lookup that found it) holds. Keeps nothing (and forgets what was kept) when it is not a request
 * kept here: more than one element, bounds not checked, a mask, an operand whose data bytes are not
 * one element in the payload, an id field that does not come first, a payload over
 * TA_REPEAT_MAX_BYTES. Returns whether it was kept. */
bool ta_repeat_record(ta_repeat *r, const uint8_t *payload, size_t len, const ta_wire_request *w,
                      const ta_request *req, const ta_plan *plan, const ta_tile_cache *cache,
                      ta_tile *tile);

/* True when the payload of len bytes is the kept request again but for its id and operand
 * data: then *id is its id and its operand data is in slots (r->slots, where the kept plan's
 * operands point, or storage of the same layout for a copy of the plan). */
bool ta_repeat_match(const ta_repeat *r, const uint8_t *payload, size_t len, uint64_t *id,
                     uint64_t *slots);

#endif /* TA_DAEMON_CODEC_H */
