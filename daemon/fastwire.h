/* fastwire.h: a one-pass decoder and encoder for the hot requests and responses (ping and
 * the atomic read-modify-write requests: element-wise, scatter, indexed; their responses:
 * status, message, OpResponse with the old values, PingResponse). They give exactly what
 * protobuf-c's generic unpack and pack give for the same bytes, at a fraction of the cost;
 * anything they do not fully understand (an unknown or repeated field, a shared buffer, an
 * unusual varint, a string that is not UTF-8 without NUL, another message) is "not mine"
 * and the caller uses protobuf-c (with wirecheck.c's string check). Field numbers and types
 * come from the protobuf-c descriptors (looked up by name once; a .proto change they do
 * not expect aborts the process with a message naming the field). */
#ifndef TA_DAEMON_FASTWIRE_H
#define TA_DAEMON_FASTWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"

/* Checks the descriptors against what the decoder and encoder expect (once per process;
 * later calls return at once). Aborts with a message when the schema changed under them. */
void ta_fastwire_init(void);

/* Decodes len bytes at data as a Request of a hot shape into arena memory (the same
 * structures tileatom__request__unpack would build, every string and bytes field copied,
 * every string valid UTF-8 without NUL). Returns NULL when the bytes are not a hot shape
 * this decoder takes (nothing else happened but arena allocations, freed at its reset). */
Tileatom__Request *ta_fastwire_decode_request(ta_arena *arena, const uint8_t *data, size_t len);

/* Appends resp as one frame to buf, byte for byte what ta_frame_append would append.
 * Returns 0 (appended), -1 (the payload is over max_payload: nothing appended), -2 (out of
 * memory), or 1 when resp is not a shape this encoder takes (nothing appended: use
 * ta_frame_append). */
int ta_fastwire_append_response(const Tileatom__Response *resp, uint32_t max_payload,
                                ta_frame_buf *buf);

#endif /* TA_DAEMON_FASTWIRE_H */
