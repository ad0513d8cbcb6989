/* wirecheck.c: string fields of encoded messages (see wirecheck.h). The walk reads each
 * tag (with the codec's readers, ta_wireschema.h), skips varints and fixed-size values, and
 * looks into length-delimited values: a string
 * field's bytes are checked, a message field is walked with its own descriptor, bytes and
 * packed fields are skipped. Anything malformed ends the walk as "nothing found": the
 * decoder that runs next rejects it with its own message. It runs on the control plane's
 * requests (small, their strings one level down); the data plane's codec checks its tile
 * names itself (codec.c), with the same rule and message (ta_wire_string_problem). */
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

/* One step of the field path from the top message down to the one being walked: kept as a
 * chain on the stack and written out only for an error message. */
typedef struct wire_path {
	const char *name;           /* field name of this step */
	const struct wire_path *up; /* the step above (NULL: the top message) */
} wire_path;

/* Writes the dotted path of p (top first) into buf. */
static void path_text(const wire_path *p, char *buf, size_t size)
{
	const char *names[WIRE_MAX_DEPTH + 2];
	int n = 0;
	for (; p && n < WIRE_MAX_DEPTH + 2; p = p->up)
		names[n++] = p->name;
	size_t used = 0;
	buf[0] = '\0';
	while (n-- > 0 && used < size) {
		int w = snprintf(buf + used, size - used, "%s%s", used ? "." : "", names[n]);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/* Walks one message; path leads to it (NULL: the top message). Returns false with msg set
 * when a bad string was found. */
static bool walk(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, int depth,
                 const wire_path *path, char *msg, size_t msg_size)
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
		wire_path here = {f->name, path};
		if (f->type == PROTOBUF_C_TYPE_STRING) {
			if (!ta_utf8_valid_no_nul(value, n)) {
				char sub[160];
				path_text(&here, sub, sizeof(sub));
				ta_wire_string_problem(sub, value, n, msg, msg_size);
				return false;
			}
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth < WIRE_MAX_DEPTH) {
			if (!walk(f->descriptor, value, n, depth + 1, &here, msg, msg_size))
				return false;
		}
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
	return walk(desc, data, len, 0, NULL, msg, msg_size);
}
