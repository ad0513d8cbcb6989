/* wirecheck.h: checks the string fields of an encoded protobuf message before it is
 * decoded. protobuf-c hands string fields over as NUL-terminated C strings without checking
 * their bytes, so a name holding a NUL would be cut silently ("victim\0x" would become
 * "victim") and one that is not UTF-8 would be taken as it is; proto3 says string fields are
 * UTF-8. ta_wire_check_strings walks the encoded bytes with the message descriptors and
 * names the first string field holding a NUL or invalid UTF-8. */
#ifndef TA_DAEMON_WIRECHECK_H
#define TA_DAEMON_WIRECHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* True when the n bytes at s are valid UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF) and hold no NUL. */
bool ta_utf8_valid_no_nul(const uint8_t *s, size_t n);

/* The answer to a request with a bad string: printf format of its message, the field and
 * its problem (ta_wire_string_problem) at %s. */
#define TA_WIRE_BAD_STRING "invalid string: %s (strings must be UTF-8 without NUL)"

/* Writes into msg what is wrong with the n bytes at s, the value of string field field
 * (dotted path), which ta_utf8_valid_no_nul refused: "F holds a NUL byte at offset N" or
 * "F is not valid UTF-8". */
void ta_wire_string_problem(const char *field, const uint8_t *s, size_t n, char *msg,
                            size_t msg_size);

/* Walks len encoded bytes of a message of desc (nested messages too, at most 16 deep).
 * Returns true when every string field is valid UTF-8 without NUL, or when the bytes are
 * malformed (the decoder then reports that); false with msg naming the field (e.g.
 * "create.name holds a NUL byte at offset 6") otherwise. */
bool ta_wire_check_strings(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                           char *msg, size_t msg_size);

#endif /* TA_DAEMON_WIRECHECK_H */
