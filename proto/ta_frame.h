/* ta_frame.h: stream framing of tileatom messages, shared by the daemon and the client
 * library. A frame is a 4-byte little-endian length N, then N bytes of one protobuf
 * message (Request or Response of proto/tileatom.proto). Lengths over the receiver's
 * limit are rejected before anything is allocated. */
#ifndef TA_FRAME_H
#define TA_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tileatom.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the length prefix. */
#define TA_FRAME_HEADER 4
/* Default maximum frame payload: 64 MiB. */
#define TA_FRAME_DEFAULT_MAX (64u * 1024u * 1024u)

/* Writes the 4-byte little-endian prefix for a payload of len bytes. */
void ta_frame_put_header(uint8_t out[TA_FRAME_HEADER], uint32_t len);
/* Reads a 4-byte little-endian prefix. */
uint32_t ta_frame_get_header(const uint8_t in[TA_FRAME_HEADER]);

/* Encodes msg (a Request or Response) as one frame into a malloc'd buffer: *out gets the
 * buffer, *out_len its length (prefix included). Returns 0, or -1 when the message is
 * larger than max_payload (*out left NULL) or memory is short. */
int ta_frame_encode(const ProtobufCMessage *msg, uint32_t max_payload, uint8_t **out,
                    size_t *out_len);

/* A growable byte buffer that frames are appended to (one connection's unsent output). */
typedef struct ta_frame_buf {
	uint8_t *data; /* the bytes, NULL until the first append */
	size_t len;    /* bytes in use */
	size_t cap;    /* bytes allocated */
} ta_frame_buf;

/* Appends msg as one frame (prefix + packed message) to buf, growing it. Returns 0, -1
 * when the message is larger than max_payload or -2 when memory is short (nothing is
 * appended either way). */
int ta_frame_append(const ProtobufCMessage *msg, uint32_t max_payload, ta_frame_buf *buf);
/* Makes room for n more bytes at buf->data + buf->len; 0, or -1 when memory is short. */
int ta_frame_buf_reserve(ta_frame_buf *buf, size_t n);
/* Makes room in buf for a frame of size payload bytes and writes its prefix; *payload: where
 * its bytes go (buf->len moves by TA_FRAME_HEADER + size once the caller wrote them).
 * Returns 0, -1 when size is over max_payload or -2 when memory is short. */
int ta_frame_buf_open(ta_frame_buf *buf, size_t size, uint32_t max_payload, uint8_t **payload);
/* Frees the buffer's memory and empties it. */
void ta_frame_buf_free(ta_frame_buf *buf);

/* Incremental frame reader: feed bytes as they arrive, take whole payloads out. */
typedef struct ta_frame_reader {
	uint32_t max_payload;            /* largest payload accepted */
	uint8_t header[TA_FRAME_HEADER]; /* prefix bytes gathered so far */
	size_t header_have;              /* bytes of header gathered */
	uint8_t *payload;                /* payload buffer, grown as the payload's bytes arrive */
	size_t payload_cap;              /* bytes allocated at payload */
	uint32_t payload_len;            /* expected payload length */
	uint32_t payload_have;           /* payload bytes gathered */
	int error; /* sticky: 1 after an oversized prefix or allocation failure */
} ta_frame_reader;

/* Result of ta_frame_reader_feed. */
typedef enum ta_frame_status {
	TA_FRAME_NEED_MORE = 0, /* all input consumed, no complete frame yet */
	TA_FRAME_READY = 1,     /* a payload is complete: take it with ta_frame_reader_take */
	TA_FRAME_TOO_LARGE = 2, /* the prefix announced more than max_payload */
	TA_FRAME_NOMEM = 3      /* the payload buffer could not be allocated */
} ta_frame_status;

/* Prepares a reader accepting payloads of at most max_payload bytes. */
void ta_frame_reader_init(ta_frame_reader *r, uint32_t max_payload);
/* Frees any partial payload. */
void ta_frame_reader_free(ta_frame_reader *r);
/* Consumes bytes from *data (advancing *data and *len) until a frame completes or the
 * input runs out. Call again with the remaining input after taking a ready frame. */
ta_frame_status ta_frame_reader_feed(ta_frame_reader *r, const uint8_t **data, size_t *len);
/* Hands over the completed payload (caller frees it with free()); resets for the next. */
uint8_t *ta_frame_reader_take(ta_frame_reader *r, uint32_t *len);
/* The next whole frame of the input, without a copy where possible: when no partial frame
 * is pending and the input holds a whole frame, *payload points into the input and *owned
 * is NULL; otherwise the bytes are gathered as ta_frame_reader_feed does and a completed
 * payload is handed over in *owned (the caller frees it; *payload == *owned). Advances
 * *data and *len past what it consumed. Returns TA_FRAME_READY with a payload, or
 * ta_frame_reader_feed's other statuses. */
ta_frame_status ta_frame_reader_next(ta_frame_reader *r, const uint8_t **data, size_t *len,
                                     const uint8_t **payload, uint32_t *payload_len,
                                     uint8_t **owned);

/* Sends len bytes at buf on stream socket sock with file descriptor fd attached to their
 * first byte (SCM_RIGHTS), in one sendmsg with MSG_NOSIGNAL; returns what sendmsg returns
 * (errno set on -1). Shared buffers travel this way (client/tac_conn.c, the tests). */
ssize_t ta_frame_send_fd(int sock, const void *buf, size_t len, int fd);

#ifdef __cplusplus
}
#endif
#endif /* TA_FRAME_H */
