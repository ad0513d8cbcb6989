/* ta_wireschema.h: what the wire codecs of the daemon (daemon/codec.c: every data-plane
 * request and response) and the client library (client/tac_wire.c) share, so that
 * proto/tileatom.proto stays the one source of truth: the fields of the data-plane messages
 * (the requests that name a tile, with their Region, Array, BufferRef, Options and
 * addressing; ping; Response with status, message, PingResponse, OpResponse and the data
 * body), their field numbers and wire types read from the
 * protobuf-c descriptors by name once (a schema change the codecs do not expect aborts with
 * the field's name), and the varint, tag and length helpers that read and write them exactly
 * as protobuf-c does. Internal to tileatom (not installed). */
#ifndef TA_PROTO_WIRESCHEMA_H
#define TA_PROTO_WIRESCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tileatom.pb-c.h"

/* Keeps the shared tables out of the client library's exported symbols. */
#define TA_WS_HIDDEN __attribute__((visibility("hidden")))

/* Field numbers the tables cover (every field of the hot messages is below this). */
#define FW_MAX_NUMBER 32

/* The two wire types the hot messages use (protobuf-c.h names them). */
enum fw_wire {
	FW_VARINT = PROTOBUF_C_WIRE_TYPE_VARINT,
	FW_LEN = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED
};

/* Every field the decoder or encoder handles, across the messages. */
typedef enum fw_slot {
	FW_NONE = 0,
	FW_REQ_ID,           /* Request.id */
	FW_REQ_PING,         /* Request.ping */
	FW_REQ_ELEMENTWISE,  /* Request.elementwise */
	FW_REQ_SCATTER,      /* Request.scatter */
	FW_REQ_INDEXED,      /* Request.indexed */
	FW_RMW_TILE,         /* <atomic request>.tile */
	FW_RMW_OP,           /* <atomic request>.op */
	FW_RMW_REGION,       /* <atomic request>.region */
	FW_RMW_SCATTER_ADDR, /* ScatterAtomicRequest.addr */
	FW_RMW_INDEXED_ADDR, /* IndexedAtomicRequest.addr */
	FW_RMW_VALUES,       /* <atomic request>.values */
	FW_RMW_COMPARE,      /* <atomic request>.compare */
	FW_RMW_OPTIONS,      /* <atomic request>.options */
	FW_REGION_ORIGIN,    /* Region.origin */
	FW_REGION_SHAPE,     /* Region.shape */
	FW_ARRAY_DTYPE,      /* Array.dtype */
	FW_ARRAY_SHAPE,      /* Array.shape */
	FW_ARRAY_DATA,       /* Array.data */
	FW_OPT_SEM,          /* Options.sem */
	FW_OPT_SCOPE,        /* Options.scope */
	FW_OPT_SPACE,        /* Options.space */
	FW_OPT_NO_BOUNDS,    /* Options.no_bounds_check */
	FW_OPT_WANT_OLD,     /* Options.want_old */
	FW_OPT_MASK,         /* Options.mask */
	FW_SADDR_DIM,        /* ScatterAddr.dim */
	FW_SADDR_INDICES,    /* ScatterAddr.indices */
	FW_IADDR_INDICES,    /* IndexedAddr.indices */
	FW_IADDR_FLAT,       /* IndexedAddr.flat */
	FW_RESP_ID,          /* Response.id */
	FW_RESP_STATUS,      /* Response.status */
	FW_RESP_MESSAGE,     /* Response.message */
	FW_RESP_PING,        /* Response.ping */
	FW_RESP_OP,          /* Response.op */
	FW_OPR_OLD,          /* OpResponse.old */
	FW_OPR_SKIPPED,      /* OpResponse.skipped */
	FW_OPR_APPLIED,      /* OpResponse.applied */
	/* the rest of the data plane (the daemon's decoder, daemon/codec.c) */
	FW_REQ_WRITE,         /* Request.write */
	FW_REQ_READ,          /* Request.read */
	FW_REQ_GATHER,        /* Request.gather */
	FW_REQ_SCATTER_STORE, /* Request.scatter_store */
	FW_REQ_ATOMIC_LOAD,   /* Request.atomic_load */
	FW_REQ_ATOMIC_STORE,  /* Request.atomic_store */
	FW_MEM_WINDOW,        /* <memory request>.window */
	FW_MEM_ADDR,          /* <memory request>.addr (Addressing) */
	FW_MEM_PADDING,       /* GatherRequest.padding */
	FW_ADDR_REGION,       /* Addressing.region */
	FW_ADDR_SCATTER,      /* Addressing.scatter */
	FW_ADDR_INDEXED,      /* Addressing.indexed */
	FW_ARRAY_SHARED,      /* Array.shared */
	FW_OPT_OLD_INTO,      /* Options.old_into */
	FW_REF_ID,            /* BufferRef.buffer_id */
	FW_REF_OFFSET,        /* BufferRef.offset */
	FW_REF_LENGTH,        /* BufferRef.length */
	FW_RESP_DATA,         /* Response.data (read) */
	FW_SLOTS
} fw_slot;
_Static_assert(FW_SLOTS <= 64, "a message's seen fields are one 64-bit mask");

/* The messages with a decoding table. */
typedef enum fw_msg {
	FW_M_REQUEST,
	FW_M_ELEMENTWISE,
	FW_M_SCATTER,
	FW_M_INDEXED,
	FW_M_REGION,
	FW_M_ARRAY,
	FW_M_OPTIONS,
	FW_M_SADDR,
	FW_M_IADDR,
	FW_M_RESPONSE,
	FW_M_OPRESPONSE,
	FW_M_WRITE,         /* WriteRegionRequest */
	FW_M_READ,          /* ReadRegionRequest */
	FW_M_GATHER,        /* GatherRequest */
	FW_M_SCATTER_STORE, /* ScatterStoreRequest */
	FW_M_ATOMIC_LOAD,   /* AtomicLoadRequest */
	FW_M_ATOMIC_STORE,  /* AtomicStoreRequest */
	FW_M_ADDRESSING,    /* Addressing */
	FW_M_BUFREF,        /* BufferRef */
	FW_M_COUNT
} fw_msg;

/* A message's decoding table. */
typedef struct fw_table {
	const ProtobufCMessageDescriptor *desc; /* the message */
	uint8_t slot[FW_MAX_NUMBER];            /* field number -> fw_slot (FW_NONE: not taken) */
	uint8_t wire[FW_MAX_NUMBER];            /* field number -> the wire type it must have */
	uint8_t number[FW_SLOTS];               /* fw_slot -> its field number in this message
	                                           (0: not in it; slots such as FW_RMW_OPTIONS
	                                           have a number per message) */
} fw_table;

/* The decoding tables, by fw_msg (filled by ta_wireschema_init). */
extern TA_WS_HIDDEN fw_table fw_tables[FW_M_COUNT];
/* Field number of each slot (filled by ta_wireschema_init). */
extern TA_WS_HIDDEN unsigned fw_number[FW_SLOTS];
/* Each slot's key (tag) with its own wire type when it is one byte (field number below
 * 16), else 0 (filled by ta_wireschema_init). */
extern TA_WS_HIDDEN uint8_t fw_key1[FW_SLOTS];

/* Checks the descriptors against the field table and fills fw_tables and fw_number (once
 * per process; later calls return at once). Aborts with a message naming the field when
 * the schema changed under the codecs. */
TA_WS_HIDDEN void ta_wireschema_init(void);

/* memcpy for the few bytes of a hot field (a scalar operand, an old value): the sizes of
 * one element are copied with a constant size (a move, not a call). The codecs of the
 * client and the daemon use it. */
static inline void fw_copy_small(uint8_t *dst, const uint8_t *src, size_t n)
{
	switch (n) {
	case 8:
		memcpy(dst, src, 8);
		break;
	case 4:
		memcpy(dst, src, 4);
		break;
	case 2:
		memcpy(dst, src, 2);
		break;
	case 1:
		*dst = *src;
		break;
	default:
		memcpy(dst, src, n);
	}
}

/* ---- reading ------------------------------------------------------------------------- */

/* Reads a varint at *p (before end) the way protobuf-c reads a 64-bit one: at most 10
 * bytes, the bits of a 10th byte past the 64th dropped; false when it runs past end or is
 * longer than 10 bytes. */
static inline bool rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	const uint8_t *q = *p;
	if (q < end && *q < 0x80) {
		*out = *q;
		*p = q + 1;
		return true;
	}
	uint64_t v = 0;
	for (unsigned shift = 0; q < end && shift < 70; shift += 7) {
		uint8_t b = *q++;
		v |= (uint64_t)(b & 0x7f) << shift; /* shift <= 63 */
		if (b < 0x80) {
			*out = v;
			*p = q;
			return true;
		}
	}
	return false;
}

/* Reads a length prefix (at most 5 bytes, as protobuf-c reads them) and checks it against
 * what is left; *len gets it. */
static inline bool rd_len(const uint8_t **p, const uint8_t *end, size_t *len)
{
	uint64_t v;
	const uint8_t *start = *p;
	if (!rd_varint(p, end, &v) || *p - start > 5 || v > (uint64_t)(end - *p))
		return false;
	*len = (size_t)v;
	return true;
}

/* Reads a varint that protobuf-c would keep whole in a 32-bit field: at most 5 bytes, value
 * at most max. */
static inline bool rd_small(const uint8_t **p, const uint8_t *end, uint64_t max, uint64_t *out)
{
	const uint8_t *start = *p;
	return rd_varint(p, end, out) && *p - start <= 5 && *out <= max;
}

/* Reads a bool sent as one byte 0 or 1. */
static inline bool rd_bool(const uint8_t **p, const uint8_t *end, protobuf_c_boolean *out)
{
	if (*p >= end || **p > 1)
		return false;
	*out = **p;
	(*p)++;
	return true;
}

/* Reads a field's tag (at most 5 bytes, as protobuf-c reads them): its slot in table t
 * (FW_NONE: not taken) once the wire type matched. */
static inline fw_slot rd_tag(const uint8_t **p, const uint8_t *end, const fw_table *t)
{
	uint64_t key;
	const uint8_t *start = *p;
	if (!rd_varint(p, end, &key) || *p - start > 5 || key >= (uint64_t)FW_MAX_NUMBER << 3)
		return FW_NONE;
	unsigned number = (unsigned)(key >> 3);
	if ((unsigned)(key & 7) != t->wire[number])
		return FW_NONE;
	return (fw_slot)t->slot[number];
}

/* Marks slot s seen in *seen; false when it was seen already (a singular field twice). */
static inline bool first_time(uint64_t *seen, fw_slot s)
{
	uint64_t bit = UINT64_C(1) << s;
	if (*seen & bit)
		return false;
	*seen |= bit;
	return true;
}

/* True when the n bytes at s are ASCII without NUL: eight bytes at a time (a byte 0 borrows
 * into its top bit when 1 is subtracted from it, a byte of 0x80 or more has it set; a byte
 * of 1 to 0x7f does neither), then one comparison a byte (0 wraps to 255). */
static inline bool ascii_no_nul(const uint8_t *s, size_t n)
{
	const uint64_t ones = UINT64_C(0x0101010101010101), tops = UINT64_C(0x8080808080808080);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		if (((w - ones) | w) & tops)
			return false;
	}
	for (; i < n; i++)
		if ((uint8_t)(s[i] - 1u) >= 0x7fu)
			return false;
	return true;
}

/* ---- writing ------------------------------------------------------------------------- */

/* Bytes of v as a varint. */
static inline size_t vsize(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Writes v as a varint at p; returns the byte after it. */
static inline uint8_t *wr_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* The tag (key) of slot s with wire type w. */
static inline uint64_t tag_of(fw_slot s, unsigned w)
{
	return ((uint64_t)fw_number[s] << 3) | w;
}

/* Bytes of a length-delimited field of slot s holding n bytes. */
static inline size_t len_field(fw_slot s, size_t n)
{
	return vsize(tag_of(s, FW_LEN)) + vsize(n) + n;
}

/* Bytes of a varint field of slot s holding v (0: omitted). */
static inline size_t var_field(fw_slot s, uint64_t v)
{
	return v ? vsize(tag_of(s, FW_VARINT)) + vsize(v) : 0;
}

/* Writes a varint field (nothing when v is 0). */
static inline uint8_t *wr_var_field(uint8_t *p, fw_slot s, uint64_t v)
{
	if (!v)
		return p;
	p = wr_varint(p, tag_of(s, FW_VARINT));
	return wr_varint(p, v);
}

/* Writes the tag and length of a length-delimited field. */
static inline uint8_t *wr_len_head(uint8_t *p, fw_slot s, size_t n)
{
	p = wr_varint(p, tag_of(s, FW_LEN));
	return wr_varint(p, n);
}

/* ---- by name --------------------------------------------------------------------------- */

/* The key (tag: field number << 3 | wire type) protobuf-c writes the field named name of
 * message desc with (length-delimited for messages, strings, bytes and packed repeated
 * scalars; varint for the other integer, enum and bool fields), or 0 when desc has no such
 * field; aborts naming it for a type written another way (fixed-size, floating point). For
 * codecs that take their field numbers from the descriptors (client/tac_wire.c). */
TA_WS_HIDDEN uint32_t ta_wireschema_key(const ProtobufCMessageDescriptor *desc, const char *name);

#endif /* TA_PROTO_WIRESCHEMA_H */
