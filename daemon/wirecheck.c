/* wirecheck.c: string fields of encoded messages (see wirecheck.h). The walk reads each
 * tag with the codec's readers (ta_wireschema.h), checks a string field's bytes, walks a
 * message field with its own descriptor and skips anything else; anything malformed ends
 * it as "nothing found" (the decoder that runs next rejects it). It runs on the control
 * plane's requests; the data plane's codec checks its tile names itself (codec.c), with the
 * same rule and message (ta_wire_string_problem). */
#include "wirecheck.h"

#include "ta_wireschema.h"
#include "tileatom.pb-c.h"

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
		if (c < 0xc2 || c > 0xf4)
			return false; /* continuation byte first, overlong C0/C1, or F5..FF */
		/* C2..DF: one continuation byte, E0..EF: two, F0..F4: three */
		size_t extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
		uint32_t cp = c & (0x3fu >> extra);
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

/* Walks one message at depth depth; names[0..depth) are the fields leading to it. Returns
 * false with msg set when a bad string was found. */
static bool walk(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, int depth,
                 const char **names, char *msg, size_t msg_size)
{
	const uint8_t *p = data, *end = data + len;
	while (p < end) {
		uint64_t key;
		size_t n;
		if (!rd_varint(&p, end, &key))
			return true;
		unsigned wire = (unsigned)(key & 7);
		uint64_t number = key >> 3;
		if (wire != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) {
			/* groups and invalid wire types: the decoder refuses them */
			if (!rd_skip(&p, end, wire))
				return true;
			continue;
		}
		if (!rd_len(&p, end, &n))
			return true;
		const uint8_t *value = p;
		p += n;
		const ProtobufCFieldDescriptor *f =
		    number <= UINT32_MAX
		        ? protobuf_c_message_descriptor_get_field(desc, (unsigned)number)
		        : NULL;
		if (!f)
			continue; /* an unknown field: kept as bytes, never used as a string */
		names[depth] = f->name;
		if (f->type == PROTOBUF_C_TYPE_STRING && !ta_utf8_valid_no_nul(value, n)) {
			char path[160] = "";
			for (int i = 0, used = 0; i <= depth && used < (int)sizeof(path); i++)
				used += snprintf(path + used, sizeof(path) - (size_t)used, "%s%s",
				                 i ? "." : "", names[i]);
			ta_wire_string_problem(path, value, n, msg, msg_size);
			return false;
		}
		if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth < WIRE_MAX_DEPTH &&
		    !walk(f->descriptor, value, n, depth + 1, names, msg, msg_size))
			return false;
	}
	return true;
}

void ta_wire_string_problem(const char *field, const uint8_t *s, size_t n, char *msg,
                            size_t msg_size)
{
	const uint8_t *nul = memchr(s, 0, n);
	if (nul)
		snprintf(msg, msg_size, "%s holds a NUL byte at offset %zu", field,
		         (size_t)(nul - s));
	else
		snprintf(msg, msg_size, "%s is not valid UTF-8", field);
}

bool ta_wire_check_strings(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                           char *msg, size_t msg_size)
{
	const char *names[WIRE_MAX_DEPTH + 1];
	return walk(desc, data, len, 0, names, msg, msg_size);
}
