/* ta_frame.c: length-prefixed framing (see ta_frame.h). The reader allocates a payload
 * buffer only after the prefix has passed the size check, so an oversized or hostile
 * length never causes an allocation, and then grows it as the bytes actually arrive, so
 * a peer that announces a large frame and sends little of it holds little memory. */
#include "ta_frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* First payload allocation: frames up to this size get their whole buffer at once. */
#define TA_FRAME_FIRST_ALLOC (64u * 1024u)

/* Makes room for at least need payload bytes (need <= payload_len); 0 or -1 when short. */
static int reserve(ta_frame_reader *r, size_t need)
{
	if (need + 1 <= r->payload_cap)
		return 0;
	size_t cap = r->payload_cap ? r->payload_cap * 2 : TA_FRAME_FIRST_ALLOC;
	if (cap < need + 1)
		cap = need + 1;
	if (cap > (size_t)r->payload_len + 1)
		cap = (size_t)r->payload_len + 1; /* never more than the frame needs */
	uint8_t *p = realloc(r->payload, cap);
	if (!p)
		return -1;
	r->payload = p;
	r->payload_cap = cap;
	return 0;
}

void ta_frame_put_header(uint8_t out[TA_FRAME_HEADER], uint32_t len)
{
	out[0] = (uint8_t)(len & 0xffu);
	out[1] = (uint8_t)((len >> 8) & 0xffu);
	out[2] = (uint8_t)((len >> 16) & 0xffu);
	out[3] = (uint8_t)((len >> 24) & 0xffu);
}

uint32_t ta_frame_get_header(const uint8_t in[TA_FRAME_HEADER])
{
	return (uint32_t)in[0] | ((uint32_t)in[1] << 8) | ((uint32_t)in[2] << 16) |
	       ((uint32_t)in[3] << 24);
}

int ta_frame_encode(const ProtobufCMessage *msg, uint32_t max_payload, uint8_t **out,
                    size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	size_t len = protobuf_c_message_get_packed_size(msg);
	if (len > max_payload)
		return -1;
	uint8_t *buf = malloc(TA_FRAME_HEADER + len);
	if (!buf)
		return -1;
	ta_frame_put_header(buf, (uint32_t)len);
	size_t packed = protobuf_c_message_pack(msg, buf + TA_FRAME_HEADER);
	if (packed != len) {
		free(buf);
		return -1;
	}
	*out = buf;
	*out_len = TA_FRAME_HEADER + len;
	return 0;
}

int ta_frame_buf_reserve(ta_frame_buf *buf, size_t n)
{
	if (buf->cap - buf->len >= n)
		return 0;
	if (n > SIZE_MAX / 2 - buf->len)
		return -1;
	size_t cap = buf->cap ? buf->cap * 2 : 4096;
	while (cap < buf->len + n)
		cap *= 2;
	uint8_t *p = realloc(buf->data, cap);
	if (!p)
		return -1;
	buf->data = p;
	buf->cap = cap;
	return 0;
}

int ta_frame_buf_open(ta_frame_buf *buf, size_t size, uint32_t max_payload, uint8_t **payload)
{
	if (size > max_payload)
		return -1;
	if (ta_frame_buf_reserve(buf, TA_FRAME_HEADER + size) != 0)
		return -2;
	ta_frame_put_header(buf->data + buf->len, (uint32_t)size);
	*payload = buf->data + buf->len + TA_FRAME_HEADER;
	return 0;
}

int ta_frame_append(const ProtobufCMessage *msg, uint32_t max_payload, ta_frame_buf *buf)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *at;
	int rc = ta_frame_buf_open(buf, len, max_payload, &at);
	if (rc != 0)
		return rc;
	if (protobuf_c_message_pack(msg, at) != len)
		return -2;
	buf->len += TA_FRAME_HEADER + len;
	return 0;
}

void ta_frame_buf_free(ta_frame_buf *buf)
{
	free(buf->data);
	buf->data = NULL;
	buf->len = 0;
	buf->cap = 0;
}

void ta_frame_reader_init(ta_frame_reader *r, uint32_t max_payload)
{
	memset(r, 0, sizeof(*r));
	r->max_payload = max_payload;
}

void ta_frame_reader_free(ta_frame_reader *r)
{
	free(r->payload);
	r->payload = NULL;
	r->payload_cap = 0;
	r->header_have = 0;
	r->payload_have = 0;
	r->payload_len = 0;
}

ta_frame_status ta_frame_reader_feed(ta_frame_reader *r, const uint8_t **data, size_t *len)
{
	if (r->error)
		return r->error == 1 ? TA_FRAME_TOO_LARGE : TA_FRAME_NOMEM;
	while (*len > 0 ||
	       (r->header_have == TA_FRAME_HEADER && r->payload_have == r->payload_len)) {
		if (r->header_have < TA_FRAME_HEADER) {
			size_t take = TA_FRAME_HEADER - r->header_have;
			if (take > *len)
				take = *len;
			memcpy(r->header + r->header_have, *data, take);
			r->header_have += take;
			*data += take;
			*len -= take;
			if (r->header_have < TA_FRAME_HEADER)
				return TA_FRAME_NEED_MORE;
			r->payload_len = ta_frame_get_header(r->header);
			r->payload_have = 0;
			if (r->payload_len > r->max_payload) {
				r->error = 1;
				return TA_FRAME_TOO_LARGE;
			}
			/* One extra byte so that an empty payload still has a buffer. */
			r->payload_cap = 0;
			if (reserve(r, r->payload_len < TA_FRAME_FIRST_ALLOC
			                   ? r->payload_len
			                   : TA_FRAME_FIRST_ALLOC) != 0) {
				r->error = 2;
				return TA_FRAME_NOMEM;
			}
		}
		size_t want = r->payload_len - r->payload_have;
		if (want > *len)
			want = *len;
		if (reserve(r, (size_t)r->payload_have + want) != 0) {
			r->error = 2;
			return TA_FRAME_NOMEM;
		}
		memcpy(r->payload + r->payload_have, *data, want);
		r->payload_have += (uint32_t)want;
		*data += want;
		*len -= want;
		if (r->payload_have == r->payload_len)
			return TA_FRAME_READY;
		return TA_FRAME_NEED_MORE;
	}
	return TA_FRAME_NEED_MORE;
}

uint8_t *ta_frame_reader_take(ta_frame_reader *r, uint32_t *len)
{
	uint8_t *p = r->payload;
	*len = r->payload_len;
	r->payload = NULL;
	r->payload_cap = 0;
	r->header_have = 0;
	r->payload_have = 0;
	r->payload_len = 0;
	return p;
}

ta_frame_status ta_frame_reader_next(ta_frame_reader *r, const uint8_t **data, size_t *len,
                                     const uint8_t **payload, uint32_t *payload_len,
                                     uint8_t **owned)
{
	*payload = NULL;
	*payload_len = 0;
	*owned = NULL;
	if (!r->error && r->header_have == 0 && *len >= TA_FRAME_HEADER) {
		uint32_t n = ta_frame_get_header(*data);
		if (n <= r->max_payload && *len - TA_FRAME_HEADER >= n) {
			*payload = *data + TA_FRAME_HEADER;
			*payload_len = n;
			*data += TA_FRAME_HEADER + (size_t)n;
			*len -= TA_FRAME_HEADER + (size_t)n;
			return TA_FRAME_READY;
		}
	}
	ta_frame_status st = ta_frame_reader_feed(r, data, len);
	if (st == TA_FRAME_READY) {
		*owned = ta_frame_reader_take(r, payload_len);
		*payload = *owned;
	}
	return st;
}

ssize_t ta_frame_send_fd(int sock, const void *buf, size_t len, int fd)
{
	struct iovec iov = {(void *)buf, len};
	union {
		char bytes[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	memset(&control, 0, sizeof(control));
	struct msghdr msg = {0};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = control.bytes;
	msg.msg_controllen = sizeof(control.bytes);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL);
}
