/* repeat.h: a connection's last one-element atomic request, kept so that the same request
 * again runs without being decoded or planned.
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
#ifndef TA_DAEMON_REPEAT_H
#define TA_DAEMON_REPEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "registry.h"
#include "ta_plan.h"

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
 * data: then *id is its id and the kept plan's operands hold its data. */
bool ta_repeat_match(ta_repeat *r, const uint8_t *payload, size_t len, uint64_t *id);

#endif /* TA_DAEMON_REPEAT_H */
