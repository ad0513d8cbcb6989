/* wirecheck.c: string fields of encoded messages (see wirecheck.h). The walk reads each
 * tag, skips varints and fixed-size values, and looks into length-delimited values: a string
 * field's bytes are checked, a message field is walked with its own descriptor, bytes and
 * packed fields are skipped. Anything malformed ends the walk as "nothing found": the
 * decoder that runs next rejects it with its own message. */
#include "wirecheck.h"

#include <stdio.h>
#include <string.h>

/* How deep nested messages are walked (the Request schema is 5 levels deep). */
#define WIRE_MAX_DEPTH 16

bool ta_utf8_valid_no_nul(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t extra;
		uint32_t cp;
		if (c >= 0xc2 && c <= 0xdf) {
			extra = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			extra = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			extra = 3;
			cp = c & 0x07;
		} else {
			return false; /* continuation byte first, overlong C0/C1, or F5..FF */
		}
		if (n - i - 1 < extra)
			return false;
		for (size_t k = 1; k <= extra; k++) {
			uint8_t cc = s[i + k];
			if ((cc & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (cc & 0x3f);
		}
		if ((extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += extra + 1;
	}
	return true;
}

/* Reads a varint at *pos; false when it runs past end or over 10 bytes. */
static bool read_varint(const uint8_t *data, size_t len, size_t *pos, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 70 && *pos < len; shift += 7) {
		uint8_t b = data[(*pos)++];
		v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 0);
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

/* Walks one message; path is the dotted field path so far (for the message). Returns false
 * with msg set when a bad string was found. */
static bool walk(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, int depth,
                 const char *path, char *msg, size_t msg_size)
{
	size_t pos = 0;
	while (pos < len) {
		uint64_t key;
		if (!read_varint(data, len, &pos, &key))
			return true;
		unsigned wire = (unsigned)(key & 7);
		uint64_t number = key >> 3;
		uint64_t v;
		switch (wire) {
		case 0: /* varint */
			if (!read_varint(data, len, &pos, &v))
				return true;
			continue;
		case 1: /* 64-bit */
			if (len - pos < 8)
				return true;
			pos += 8;
			continue;
		case 5: /* 32-bit */
			if (len - pos < 4)
				return true;
			pos += 4;
			continue;
		case 2: /* length-delimited */
			break;
		default:
			return true; /* groups and invalid wire types: the decoder refuses them */
		}
		if (!read_varint(data, len, &pos, &v) || v > len - pos)
			return true;
		const uint8_t *value = data + pos;
		size_t n = (size_t)v;
		pos += n;
		const ProtobufCFieldDescriptor *f =
		    number <= UINT32_MAX
		        ? protobuf_c_message_descriptor_get_field(desc, (unsigned)number)
		        : NULL;
		if (!f)
			continue; /* an unknown field: kept as bytes, never used as a string */
		char sub[160];
		if (f->type == PROTOBUF_C_TYPE_STRING) {
			if (!ta_utf8_valid_no_nul(value, n)) {
				snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "",
				         f->name);
				const uint8_t *nul = memchr(value, 0, n);
				if (nul)
					snprintf(msg, msg_size, "%s holds a NUL byte at offset %zu",
					         sub, (size_t)(nul - value));
				else
					snprintf(msg, msg_size, "%s is not valid UTF-8", sub);
				return false;
			}
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth < WIRE_MAX_DEPTH) {
			snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", f->name);
			if (!walk(f->descriptor, value, n, depth + 1, sub, msg, msg_size))
				return false;
		}
	}
	return true;
}

bool ta_wire_check_strings(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                           char *msg, size_t msg_size)
{
	return walk(desc, data, len, 0, "", msg, msg_size);
}
