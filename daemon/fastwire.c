/* fastwire.c: the hot requests' decoder and the hot responses' encoder (see fastwire.h).
 *
 * Decoding is one pass over the bytes per message: read a tag, find the field's slot in a
 * small table indexed by field number (filled from the descriptors at init), check its
 * wire type, and store the value into the protobuf-c structure (initialised with its
 * generated _init, allocated from the request's arena). What protobuf-c accepts but this
 * decoder does not take, so that the generic path answers it exactly as before: a field
 * not in the tables (unknown ones, Array.shared, Options.old_into, every other request
 * body), a singular field given twice (protobuf-c keeps the last or merges), a repeated
 * integer field not packed, a varint of more than 10 bytes or whose 10th byte is over 1, an
 * enum or uint32 whose value does not fit (protobuf-c keeps its low bits), a bool other
 * than 0 or 1, a string that is not UTF-8 or holds a NUL (wirecheck.c's error). Empty bytes
 * fields get data NULL and empty packed fields NULL arrays, as protobuf-c gives them.
 *
 * Encoding sizes each nested message once (Array, then OpResponse, then Response) and
 * writes the frame in field-number order, skipping zero scalars, empty strings, empty
 * bytes and NULL messages as protobuf_c_message_pack does for proto3 fields. */
#include "fastwire.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wirecheck.h"

/* Field numbers the tables cover (every field of the hot messages is below this). */
#define FW_MAX_NUMBER 32
/* Index arrays of an IndexedAddr the decoder takes (more: the generic path). */
#define FW_MAX_INDICES 8

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
	FW_M_COUNT
} fw_msg;

/* A message's decoding table. */
typedef struct fw_table {
	const ProtobufCMessageDescriptor *desc; /* the message */
	uint8_t slot[FW_MAX_NUMBER];            /* field number -> fw_slot (FW_NONE: not taken) */
	uint8_t wire[FW_MAX_NUMBER];            /* field number -> the wire type it must have */
} fw_table;

/* One field the code below reads or writes, as the code expects it to be declared. */
typedef struct fw_spec {
	fw_msg msg;                            /* its message */
	fw_slot slot;                          /* its slot */
	const char *name;                      /* its name in the .proto */
	ProtobufCType type;                    /* its type */
	bool repeated;                         /* repeated (integers: packed) */
	bool oneof;                            /* a member of the message's oneof */
	size_t offset;                         /* the struct member the code uses */
	const ProtobufCMessageDescriptor *sub; /* a message field's type (else NULL) */
} fw_spec;

/* The messages' descriptors, by fw_msg. */
static const ProtobufCMessageDescriptor *const fw_descs[FW_M_COUNT] = {
    [FW_M_REQUEST] = &tileatom__request__descriptor,
    [FW_M_ELEMENTWISE] = &tileatom__elementwise_atomic_request__descriptor,
    [FW_M_SCATTER] = &tileatom__scatter_atomic_request__descriptor,
    [FW_M_INDEXED] = &tileatom__indexed_atomic_request__descriptor,
    [FW_M_REGION] = &tileatom__region__descriptor,
    [FW_M_ARRAY] = &tileatom__array__descriptor,
    [FW_M_OPTIONS] = &tileatom__options__descriptor,
    [FW_M_SADDR] = &tileatom__scatter_addr__descriptor,
    [FW_M_IADDR] = &tileatom__indexed_addr__descriptor,
    [FW_M_RESPONSE] = &tileatom__response__descriptor,
    [FW_M_OPRESPONSE] = &tileatom__op_response__descriptor,
};

#define T_U64             PROTOBUF_C_TYPE_UINT64
#define T_U32             PROTOBUF_C_TYPE_UINT32
#define T_I64             PROTOBUF_C_TYPE_INT64
#define T_ENUM            PROTOBUF_C_TYPE_ENUM
#define T_BOOL            PROTOBUF_C_TYPE_BOOL
#define T_STR             PROTOBUF_C_TYPE_STRING
#define T_BYTES           PROTOBUF_C_TYPE_BYTES
#define T_MSG             PROTOBUF_C_TYPE_MESSAGE
#define OFF(type, member) offsetof(type, member)
#define D(name)           (&tileatom__##name##__descriptor)

/* Every field handled, checked against the descriptors by ta_fastwire_init. */
// clang-format off
static const fw_spec fw_specs[] = {
	{FW_M_REQUEST, FW_REQ_ID, "id", T_U64, false, false, OFF(Tileatom__Request, id), NULL},
	{FW_M_REQUEST, FW_REQ_PING, "ping", T_MSG, false, true, OFF(Tileatom__Request, ping), D(ping_request)},
	{FW_M_REQUEST, FW_REQ_ELEMENTWISE, "elementwise", T_MSG, false, true, OFF(Tileatom__Request, elementwise), D(elementwise_atomic_request)},
	{FW_M_REQUEST, FW_REQ_SCATTER, "scatter", T_MSG, false, true, OFF(Tileatom__Request, scatter), D(scatter_atomic_request)},
	{FW_M_REQUEST, FW_REQ_INDEXED, "indexed", T_MSG, false, true, OFF(Tileatom__Request, indexed), D(indexed_atomic_request)},

	{FW_M_ELEMENTWISE, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__ElementwiseAtomicRequest, tile), NULL},
	{FW_M_ELEMENTWISE, FW_RMW_OP, "op", T_ENUM, false, false, OFF(Tileatom__ElementwiseAtomicRequest, op), NULL},
	{FW_M_ELEMENTWISE, FW_RMW_REGION, "region", T_MSG, false, false, OFF(Tileatom__ElementwiseAtomicRequest, region), D(region)},
	{FW_M_ELEMENTWISE, FW_RMW_VALUES, "values", T_MSG, false, false, OFF(Tileatom__ElementwiseAtomicRequest, values), D(array)},
	{FW_M_ELEMENTWISE, FW_RMW_COMPARE, "compare", T_MSG, false, false, OFF(Tileatom__ElementwiseAtomicRequest, compare), D(array)},
	{FW_M_ELEMENTWISE, FW_RMW_OPTIONS, "options", T_MSG, false, false, OFF(Tileatom__ElementwiseAtomicRequest, options), D(options)},

	{FW_M_SCATTER, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__ScatterAtomicRequest, tile), NULL},
	{FW_M_SCATTER, FW_RMW_OP, "op", T_ENUM, false, false, OFF(Tileatom__ScatterAtomicRequest, op), NULL},
	{FW_M_SCATTER, FW_RMW_REGION, "region", T_MSG, false, false, OFF(Tileatom__ScatterAtomicRequest, region), D(region)},
	{FW_M_SCATTER, FW_RMW_SCATTER_ADDR, "addr", T_MSG, false, false, OFF(Tileatom__ScatterAtomicRequest, addr), D(scatter_addr)},
	{FW_M_SCATTER, FW_RMW_VALUES, "values", T_MSG, false, false, OFF(Tileatom__ScatterAtomicRequest, values), D(array)},
	{FW_M_SCATTER, FW_RMW_OPTIONS, "options", T_MSG, false, false, OFF(Tileatom__ScatterAtomicRequest, options), D(options)},

	{FW_M_INDEXED, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__IndexedAtomicRequest, tile), NULL},
	{FW_M_INDEXED, FW_RMW_OP, "op", T_ENUM, false, false, OFF(Tileatom__IndexedAtomicRequest, op), NULL},
	{FW_M_INDEXED, FW_RMW_REGION, "region", T_MSG, false, false, OFF(Tileatom__IndexedAtomicRequest, region), D(region)},
	{FW_M_INDEXED, FW_RMW_INDEXED_ADDR, "addr", T_MSG, false, false, OFF(Tileatom__IndexedAtomicRequest, addr), D(indexed_addr)},
	{FW_M_INDEXED, FW_RMW_VALUES, "values", T_MSG, false, false, OFF(Tileatom__IndexedAtomicRequest, values), D(array)},
	{FW_M_INDEXED, FW_RMW_COMPARE, "compare", T_MSG, false, false, OFF(Tileatom__IndexedAtomicRequest, compare), D(array)},
	{FW_M_INDEXED, FW_RMW_OPTIONS, "options", T_MSG, false, false, OFF(Tileatom__IndexedAtomicRequest, options), D(options)},

	{FW_M_REGION, FW_REGION_ORIGIN, "origin", T_I64, true, false, OFF(Tileatom__Region, origin), NULL},
	{FW_M_REGION, FW_REGION_SHAPE, "shape", T_I64, true, false, OFF(Tileatom__Region, shape), NULL},

	{FW_M_ARRAY, FW_ARRAY_DTYPE, "dtype", T_ENUM, false, false, OFF(Tileatom__Array, dtype), NULL},
	{FW_M_ARRAY, FW_ARRAY_SHAPE, "shape", T_I64, true, false, OFF(Tileatom__Array, shape), NULL},
	{FW_M_ARRAY, FW_ARRAY_DATA, "data", T_BYTES, false, false, OFF(Tileatom__Array, data), NULL},

	{FW_M_OPTIONS, FW_OPT_SEM, "sem", T_ENUM, false, false, OFF(Tileatom__Options, sem), NULL},
	{FW_M_OPTIONS, FW_OPT_SCOPE, "scope", T_ENUM, false, false, OFF(Tileatom__Options, scope), NULL},
	{FW_M_OPTIONS, FW_OPT_SPACE, "space", T_ENUM, false, false, OFF(Tileatom__Options, space), NULL},
	{FW_M_OPTIONS, FW_OPT_NO_BOUNDS, "no_bounds_check", T_BOOL, false, false, OFF(Tileatom__Options, no_bounds_check), NULL},
	{FW_M_OPTIONS, FW_OPT_WANT_OLD, "want_old", T_BOOL, false, false, OFF(Tileatom__Options, want_old), NULL},
	{FW_M_OPTIONS, FW_OPT_MASK, "mask", T_MSG, false, false, OFF(Tileatom__Options, mask), D(array)},

	{FW_M_SADDR, FW_SADDR_DIM, "dim", T_U32, false, false, OFF(Tileatom__ScatterAddr, dim), NULL},
	{FW_M_SADDR, FW_SADDR_INDICES, "indices", T_MSG, false, false, OFF(Tileatom__ScatterAddr, indices), D(array)},

	{FW_M_IADDR, FW_IADDR_INDICES, "indices", T_MSG, true, false, OFF(Tileatom__IndexedAddr, indices), D(array)},
	{FW_M_IADDR, FW_IADDR_FLAT, "flat", T_BOOL, false, false, OFF(Tileatom__IndexedAddr, flat), NULL},

	{FW_M_RESPONSE, FW_RESP_ID, "id", T_U64, false, false, OFF(Tileatom__Response, id), NULL},
	{FW_M_RESPONSE, FW_RESP_STATUS, "status", T_ENUM, false, false, OFF(Tileatom__Response, status), NULL},
	{FW_M_RESPONSE, FW_RESP_MESSAGE, "message", T_STR, false, false, OFF(Tileatom__Response, message), NULL},
	{FW_M_RESPONSE, FW_RESP_PING, "ping", T_MSG, false, true, OFF(Tileatom__Response, ping), D(ping_response)},
	{FW_M_RESPONSE, FW_RESP_OP, "op", T_MSG, false, true, OFF(Tileatom__Response, op), D(op_response)},

	{FW_M_OPRESPONSE, FW_OPR_OLD, "old", T_MSG, false, false, OFF(Tileatom__OpResponse, old), D(array)},
	{FW_M_OPRESPONSE, FW_OPR_SKIPPED, "skipped", T_U64, false, false, OFF(Tileatom__OpResponse, skipped), NULL},
	{FW_M_OPRESPONSE, FW_OPR_APPLIED, "applied", T_U64, false, false, OFF(Tileatom__OpResponse, applied), NULL},
};
// clang-format on
#define FW_NSPECS (sizeof(fw_specs) / sizeof(fw_specs[0]))

/* The decoding tables, by fw_msg (filled once). */
static fw_table fw_tables[FW_M_COUNT];
/* Field number of each slot (filled once). */
static unsigned fw_number[FW_SLOTS];
/* Guards the one filling of the tables. */
static pthread_once_t fw_once = PTHREAD_ONCE_INIT;

/* Stops the process: the schema changed in a way this file does not follow. */
static void fw_schema_fail(const fw_spec *s, const char *what)
{
	fprintf(stderr,
	        "tileatomd: daemon/fastwire.c does not match proto/tileatom.proto: %s.%s %s; "
	        "update fastwire.c's field table\n",
	        fw_descs[s->msg]->name, s->name, what);
	abort();
}

/* The wire type a field of type t is sent with (a packed repeated field: length-delimited). */
static unsigned fw_wire_of(ProtobufCType t, bool repeated)
{
	if (repeated || t == T_STR || t == T_BYTES || t == T_MSG)
		return FW_LEN;
	return FW_VARINT;
}

/* pthread_once routine: checks every spec against its descriptor and fills the tables. */
static void fw_fill(void)
{
	for (int m = 0; m < FW_M_COUNT; m++)
		fw_tables[m].desc = fw_descs[m];
	for (size_t i = 0; i < FW_NSPECS; i++) {
		const fw_spec *s = &fw_specs[i];
		const ProtobufCFieldDescriptor *f =
		    protobuf_c_message_descriptor_get_field_by_name(fw_descs[s->msg], s->name);
		if (!f)
			fw_schema_fail(s, "is gone");
		if (f->type != s->type)
			fw_schema_fail(s, "changed its type");
		if ((f->label == PROTOBUF_C_LABEL_REPEATED) != s->repeated)
			fw_schema_fail(s, "changed between singular and repeated");
		if (!s->repeated && f->label != PROTOBUF_C_LABEL_NONE)
			fw_schema_fail(s, "is no longer a plain proto3 field");
		if (s->repeated && s->type != T_MSG && !(f->flags & PROTOBUF_C_FIELD_FLAG_PACKED))
			fw_schema_fail(s, "is no longer packed");
		if (((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0) != s->oneof)
			fw_schema_fail(s, "moved into or out of a oneof");
		if (f->offset != s->offset)
			fw_schema_fail(s, "is not the struct member the code uses");
		if (s->sub && f->descriptor != s->sub)
			fw_schema_fail(s, "changed its message type");
		if (f->id == 0 || f->id >= FW_MAX_NUMBER)
			fw_schema_fail(s, "has a field number over fastwire.c's tables");
		fw_table *t = &fw_tables[s->msg];
		t->slot[f->id] = (uint8_t)s->slot;
		t->wire[f->id] = (uint8_t)fw_wire_of(s->type, s->repeated);
		fw_number[s->slot] = f->id;
	}
	/* the oneof cases are the field numbers (protobuf-c's rule): checked, then used */
	if (fw_number[FW_REQ_PING] != TILEATOM__REQUEST__BODY_PING ||
	    fw_number[FW_REQ_ELEMENTWISE] != TILEATOM__REQUEST__BODY_ELEMENTWISE ||
	    fw_number[FW_REQ_SCATTER] != TILEATOM__REQUEST__BODY_SCATTER ||
	    fw_number[FW_REQ_INDEXED] != TILEATOM__REQUEST__BODY_INDEXED ||
	    fw_number[FW_RESP_PING] != TILEATOM__RESPONSE__BODY_PING ||
	    fw_number[FW_RESP_OP] != TILEATOM__RESPONSE__BODY_OP)
		fw_schema_fail(&fw_specs[0], "oneof cases differ from the field numbers");
	/* the encoder writes Response, OpResponse and Array in this order: it must be the
	 * field-number order protobuf-c packs in, and it must know every field they have
	 * (Response's oneof members other than ping and op make it decline) */
	static const fw_slot resp_order[] = {FW_RESP_ID, FW_RESP_STATUS, FW_RESP_MESSAGE,
	                                     FW_RESP_PING};
	static const fw_slot resp_order2[] = {FW_RESP_MESSAGE, FW_RESP_OP};
	static const fw_slot opr_order[] = {FW_OPR_OLD, FW_OPR_SKIPPED, FW_OPR_APPLIED};
	static const fw_slot arr_order[] = {FW_ARRAY_DTYPE, FW_ARRAY_SHAPE, FW_ARRAY_DATA};
	for (size_t i = 1; i < 4; i++)
		if (fw_number[resp_order[i]] <= fw_number[resp_order[i - 1]])
			fw_schema_fail(&fw_specs[0], "Response fields out of the encoder's order");
	if (fw_number[resp_order2[1]] <= fw_number[resp_order2[0]])
		fw_schema_fail(&fw_specs[0], "Response fields out of the encoder's order");
	for (size_t i = 1; i < 3; i++) {
		if (fw_number[opr_order[i]] <= fw_number[opr_order[i - 1]] ||
		    fw_number[arr_order[i]] <= fw_number[arr_order[i - 1]])
			fw_schema_fail(&fw_specs[0], "OpResponse or Array fields out of order");
	}
	const ProtobufCMessageDescriptor *rd = &tileatom__response__descriptor;
	for (unsigned i = 0; i < rd->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &rd->fields[i];
		if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    (f->id >= FW_MAX_NUMBER || fw_tables[FW_M_RESPONSE].slot[f->id] == FW_NONE))
			fw_schema_fail(&fw_specs[0],
			               "Response has a field the encoder does not write");
	}
	if (tileatom__op_response__descriptor.n_fields != 3 ||
	    tileatom__ping_response__descriptor.n_fields != 0)
		fw_schema_fail(&fw_specs[0], "OpResponse or PingResponse has new fields");
	/* Array's fourth field (shared) is the one the encoder declines */
	if (tileatom__array__descriptor.n_fields != 4)
		fw_schema_fail(&fw_specs[0], "Array has new fields");
}

void ta_fastwire_init(void)
{
	if (pthread_once(&fw_once, fw_fill) != 0)
		abort();
}

/* ---- decoding ------------------------------------------------------------------------ */

/* Reads a varint at *p (before end) the way protobuf-c reads a 64-bit one; false when it
 * runs past end, is longer than 10 bytes, or its 10th byte holds bits past the 64th. */
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
		if (shift == 63 && b > 1)
			return false;
		v |= (uint64_t)(b & 0x7f) << shift;
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

/* Allocates a message of n bytes and runs its init. */
#define NEW_MSG(arena, type, init) ((type *)fw_new((arena), sizeof(type), (void (*)(void *))(init)))
static inline void *fw_new(ta_arena *arena, size_t size, void (*init)(void *))
{
	void *m = ta_arena_alloc_inline(arena, size);
	if (m)
		init(m);
	return m;
}

/* Decodes a packed repeated int64 value of len bytes at p into *n / *out. */
static bool dec_packed_i64(ta_arena *arena, const uint8_t *p, size_t len, size_t *n, int64_t **out)
{
	const uint8_t *end = p + len;
	size_t count = 0;
	for (size_t i = 0; i < len; i++)
		count += p[i] < 0x80;
	if (count == 0) {
		if (len != 0)
			return false; /* an unterminated varint */
		*n = 0;
		*out = NULL;
		return true;
	}
	if (p[len - 1] >= 0x80)
		return false;
	int64_t *v = ta_arena_alloc_inline(arena, count * sizeof(int64_t));
	if (!v)
		return false;
	for (size_t i = 0; i < count; i++) {
		uint64_t x;
		if (!rd_varint(&p, end, &x))
			return false;
		v[i] = (int64_t)x;
	}
	*n = count;
	*out = v;
	return true;
}

/* True when the n bytes at s are ASCII without NUL (one comparison a byte: 0 wraps to 255). */
static inline bool ascii_no_nul(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((uint8_t)(s[i] - 1u) >= 0x7fu)
			return false;
	return true;
}

/* Copies a string value into the arena; false when it is not UTF-8 without NUL (names are
 * mostly ASCII: the full check runs only when a byte is not). */
static bool dec_string(ta_arena *arena, const uint8_t *p, size_t len, char **out)
{
	if (!ascii_no_nul(p, len) && !ta_utf8_valid_no_nul(p, len))
		return false;
	char *s = ta_arena_alloc_inline(arena, len + 1);
	if (!s)
		return false;
	memcpy(s, p, len);
	s[len] = '\0';
	*out = s;
	return true;
}

/* Decodes an Array (shared buffers are not taken). */
static Tileatom__Array *dec_array(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__Array *a = NEW_MSG(arena, Tileatom__Array, tileatom__array__init);
	if (!a)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_ARRAY];
	uint64_t seen = 0, v;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		switch (s) {
		case FW_ARRAY_DTYPE:
			if (!rd_small(&p, end, INT32_MAX, &v))
				return NULL;
			a->dtype = (Tileatom__DType)v;
			break;
		case FW_ARRAY_SHAPE:
			if (!rd_len(&p, end, &n) ||
			    !dec_packed_i64(arena, p, n, &a->n_shape, &a->shape))
				return NULL;
			p += n;
			break;
		case FW_ARRAY_DATA:
			if (!rd_len(&p, end, &n))
				return NULL;
			a->data.len = n;
			if (n > 0) {
				a->data.data = ta_arena_alloc_inline(arena, n);
				if (!a->data.data)
					return NULL;
				memcpy(a->data.data, p, n);
			}
			p += n;
			break;
		default:
			return NULL;
		}
	}
	return a;
}

/* Decodes a Region. */
static Tileatom__Region *dec_region(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__Region *r = NEW_MSG(arena, Tileatom__Region, tileatom__region__init);
	if (!r)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_REGION];
	uint64_t seen = 0;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s) || !rd_len(&p, end, &n))
			return NULL;
		bool ok = s == FW_REGION_ORIGIN
		              ? dec_packed_i64(arena, p, n, &r->n_origin, &r->origin)
		              : dec_packed_i64(arena, p, n, &r->n_shape, &r->shape);
		if (!ok)
			return NULL;
		p += n;
	}
	return r;
}

/* Decodes an Options (old_into is not taken). */
static Tileatom__Options *dec_options(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__Options *o = NEW_MSG(arena, Tileatom__Options, tileatom__options__init);
	if (!o)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_OPTIONS];
	uint64_t seen = 0, v;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		switch (s) {
		case FW_OPT_SEM:
		case FW_OPT_SCOPE:
		case FW_OPT_SPACE:
			if (!rd_small(&p, end, INT32_MAX, &v))
				return NULL;
			if (s == FW_OPT_SEM)
				o->sem = (Tileatom__Sem)v;
			else if (s == FW_OPT_SCOPE)
				o->scope = (Tileatom__Scope)v;
			else
				o->space = (Tileatom__Space)v;
			break;
		case FW_OPT_NO_BOUNDS:
			if (!rd_bool(&p, end, &o->no_bounds_check))
				return NULL;
			break;
		case FW_OPT_WANT_OLD:
			if (!rd_bool(&p, end, &o->want_old))
				return NULL;
			break;
		case FW_OPT_MASK:
			if (!rd_len(&p, end, &n) || !(o->mask = dec_array(arena, p, n)))
				return NULL;
			p += n;
			break;
		default:
			return NULL;
		}
	}
	return o;
}

/* Decodes a ScatterAddr. */
static Tileatom__ScatterAddr *dec_saddr(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__ScatterAddr *sa =
	    NEW_MSG(arena, Tileatom__ScatterAddr, tileatom__scatter_addr__init);
	if (!sa)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_SADDR];
	uint64_t seen = 0, v;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		if (s == FW_SADDR_DIM) {
			if (!rd_small(&p, end, UINT32_MAX, &v))
				return NULL;
			sa->dim = (uint32_t)v;
		} else {
			if (!rd_len(&p, end, &n) || !(sa->indices = dec_array(arena, p, n)))
				return NULL;
			p += n;
		}
	}
	return sa;
}

/* Decodes an IndexedAddr (at most FW_MAX_INDICES index arrays). */
static Tileatom__IndexedAddr *dec_iaddr(ta_arena *arena, const uint8_t *p, size_t len)
{
	Tileatom__IndexedAddr *ia =
	    NEW_MSG(arena, Tileatom__IndexedAddr, tileatom__indexed_addr__init);
	if (!ia)
		return NULL;
	const uint8_t *end = p + len;
	const fw_table *t = &fw_tables[FW_M_IADDR];
	uint64_t seen = 0;
	size_t n, count = 0;
	Tileatom__Array *idx[FW_MAX_INDICES];
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE)
			return NULL;
		if (s == FW_IADDR_FLAT) {
			if (!first_time(&seen, s) || !rd_bool(&p, end, &ia->flat))
				return NULL;
		} else {
			if (count == FW_MAX_INDICES || !rd_len(&p, end, &n) ||
			    !(idx[count++] = dec_array(arena, p, n)))
				return NULL;
			p += n;
		}
	}
	if (count > 0) {
		ia->indices = ta_arena_alloc_inline(arena, count * sizeof(*ia->indices));
		if (!ia->indices)
			return NULL;
		memcpy(ia->indices, idx, count * sizeof(*ia->indices));
		ia->n_indices = count;
	}
	return ia;
}

/* The fields of the three atomic request messages, decoded into one place. */
typedef struct fw_rmw {
	char *tile;                   /* tile */
	Tileatom__Op op;              /* op */
	Tileatom__Region *region;     /* region */
	Tileatom__ScatterAddr *saddr; /* addr (scatter) */
	Tileatom__IndexedAddr *iaddr; /* addr (indexed) */
	Tileatom__Array *values;      /* values */
	Tileatom__Array *compare;     /* compare */
	Tileatom__Options *options;   /* options */
} fw_rmw;

/* Decodes an atomic request's fields with table t into *r. */
static bool dec_rmw(ta_arena *arena, const fw_table *t, const uint8_t *p, size_t len, fw_rmw *r)
{
	const uint8_t *end = p + len;
	uint64_t seen = 0, v;
	size_t n;
	memset(r, 0, sizeof(*r));
	r->tile = (char *)protobuf_c_empty_string;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return false;
		if (s == FW_RMW_OP) {
			if (!rd_small(&p, end, INT32_MAX, &v))
				return false;
			r->op = (Tileatom__Op)v;
			continue;
		}
		if (!rd_len(&p, end, &n))
			return false;
		bool ok;
		switch (s) {
		case FW_RMW_TILE:
			ok = dec_string(arena, p, n, &r->tile);
			break;
		case FW_RMW_REGION:
			ok = (r->region = dec_region(arena, p, n)) != NULL;
			break;
		case FW_RMW_SCATTER_ADDR:
			ok = (r->saddr = dec_saddr(arena, p, n)) != NULL;
			break;
		case FW_RMW_INDEXED_ADDR:
			ok = (r->iaddr = dec_iaddr(arena, p, n)) != NULL;
			break;
		case FW_RMW_VALUES:
			ok = (r->values = dec_array(arena, p, n)) != NULL;
			break;
		case FW_RMW_COMPARE:
			ok = (r->compare = dec_array(arena, p, n)) != NULL;
			break;
		case FW_RMW_OPTIONS:
			ok = (r->options = dec_options(arena, p, n)) != NULL;
			break;
		default:
			ok = false;
			break;
		}
		if (!ok)
			return false;
		p += n;
	}
	return true;
}

/* Decodes the body of a Request: the message of slot s, len bytes at p. */
static bool dec_body(ta_arena *arena, Tileatom__Request *req, fw_slot s, const uint8_t *p,
                     size_t len)
{
	fw_rmw r;
	switch (s) {
	case FW_REQ_PING:
		if (len != 0) /* PingRequest has no fields: anything in it is unknown */
			return false;
		req->ping = NEW_MSG(arena, Tileatom__PingRequest, tileatom__ping_request__init);
		return req->ping != NULL;
	case FW_REQ_ELEMENTWISE: {
		if (!dec_rmw(arena, &fw_tables[FW_M_ELEMENTWISE], p, len, &r))
			return false;
		Tileatom__ElementwiseAtomicRequest *e =
		    NEW_MSG(arena, Tileatom__ElementwiseAtomicRequest,
		            tileatom__elementwise_atomic_request__init);
		if (!e)
			return false;
		e->tile = r.tile;
		e->op = r.op;
		e->region = r.region;
		e->values = r.values;
		e->compare = r.compare;
		e->options = r.options;
		req->elementwise = e;
		return true;
	}
	case FW_REQ_SCATTER: {
		if (!dec_rmw(arena, &fw_tables[FW_M_SCATTER], p, len, &r))
			return false;
		Tileatom__ScatterAtomicRequest *sc = NEW_MSG(
		    arena, Tileatom__ScatterAtomicRequest, tileatom__scatter_atomic_request__init);
		if (!sc)
			return false;
		sc->tile = r.tile;
		sc->op = r.op;
		sc->region = r.region;
		sc->addr = r.saddr;
		sc->values = r.values;
		sc->options = r.options;
		req->scatter = sc;
		return true;
	}
	case FW_REQ_INDEXED: {
		if (!dec_rmw(arena, &fw_tables[FW_M_INDEXED], p, len, &r))
			return false;
		Tileatom__IndexedAtomicRequest *x = NEW_MSG(arena, Tileatom__IndexedAtomicRequest,
		                                            tileatom__indexed_atomic_request__init);
		if (!x)
			return false;
		x->tile = r.tile;
		x->op = r.op;
		x->region = r.region;
		x->addr = r.iaddr;
		x->values = r.values;
		x->compare = r.compare;
		x->options = r.options;
		req->indexed = x;
		return true;
	}
	default:
		return false;
	}
}

Tileatom__Request *ta_fastwire_decode_request(ta_arena *arena, const uint8_t *data, size_t len)
{
	ta_fastwire_init();
	Tileatom__Request *req = NEW_MSG(arena, Tileatom__Request, tileatom__request__init);
	if (!req)
		return NULL;
	const uint8_t *p = data, *end = data + len;
	const fw_table *t = &fw_tables[FW_M_REQUEST];
	uint64_t seen = 0;
	bool have_body = false;
	size_t n;
	while (p < end) {
		fw_slot s = rd_tag(&p, end, t);
		if (s == FW_NONE || !first_time(&seen, s))
			return NULL;
		if (s == FW_REQ_ID) {
			if (!rd_varint(&p, end, &req->id))
				return NULL;
			continue;
		}
		/* a body: only one (a second replaces the first in protobuf-c) */
		if (have_body || !rd_len(&p, end, &n) || !dec_body(arena, req, s, p, n))
			return NULL;
		have_body = true;
		req->body_case = (Tileatom__Request__BodyCase)fw_number[s];
		p += n;
	}
	return req;
}

/* ---- encoding ------------------------------------------------------------------------ */

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

int ta_fastwire_append_response(const Tileatom__Response *resp, uint32_t max_payload,
                                ta_frame_buf *buf)
{
	ta_fastwire_init();
	if (resp->base.n_unknown_fields || (int)resp->status < 0)
		return 1;
	const Tileatom__OpResponse *op = NULL;
	const Tileatom__Array *old = NULL;
	size_t msg_len = resp->message ? strlen(resp->message) : 0;
	size_t size = var_field(FW_RESP_ID, resp->id) +
	              var_field(FW_RESP_STATUS, (uint64_t)resp->status) +
	              (msg_len ? len_field(FW_RESP_MESSAGE, msg_len) : 0);
	size_t op_size = 0, old_size = 0, shape_size = 0;
	switch (resp->body_case) {
	case TILEATOM__RESPONSE__BODY__NOT_SET:
		break;
	case TILEATOM__RESPONSE__BODY_PING:
		if (!resp->ping || resp->ping->base.n_unknown_fields)
			return 1;
		size += len_field(FW_RESP_PING, 0);
		break;
	case TILEATOM__RESPONSE__BODY_OP:
		op = resp->op;
		if (!op || op->base.n_unknown_fields)
			return 1;
		old = op->old;
		if (old) {
			if (old->shared || old->base.n_unknown_fields || (int)old->dtype < 0)
				return 1;
			for (size_t i = 0; i < old->n_shape; i++)
				shape_size += vsize((uint64_t)old->shape[i]);
			old_size = var_field(FW_ARRAY_DTYPE, (uint64_t)old->dtype) +
			           (old->n_shape ? len_field(FW_ARRAY_SHAPE, shape_size) : 0) +
			           (old->data.len ? len_field(FW_ARRAY_DATA, old->data.len) : 0);
			op_size += len_field(FW_OPR_OLD, old_size);
		}
		op_size +=
		    var_field(FW_OPR_SKIPPED, op->skipped) + var_field(FW_OPR_APPLIED, op->applied);
		size += len_field(FW_RESP_OP, op_size);
		break;
	default:
		return 1;
	}
	if (size > max_payload)
		return -1;
	if (ta_frame_buf_reserve(buf, TA_FRAME_HEADER + size) != 0)
		return -2;
	uint8_t *at = buf->data + buf->len;
	ta_frame_put_header(at, (uint32_t)size);
	uint8_t *p = at + TA_FRAME_HEADER;
	p = wr_var_field(p, FW_RESP_ID, resp->id);
	p = wr_var_field(p, FW_RESP_STATUS, (uint64_t)resp->status);
	if (msg_len) {
		p = wr_len_head(p, FW_RESP_MESSAGE, msg_len);
		memcpy(p, resp->message, msg_len);
		p += msg_len;
	}
	if (resp->body_case == TILEATOM__RESPONSE__BODY_PING) {
		p = wr_len_head(p, FW_RESP_PING, 0);
	} else if (op) {
		p = wr_len_head(p, FW_RESP_OP, op_size);
		if (old) {
			p = wr_len_head(p, FW_OPR_OLD, old_size);
			p = wr_var_field(p, FW_ARRAY_DTYPE, (uint64_t)old->dtype);
			if (old->n_shape) {
				p = wr_len_head(p, FW_ARRAY_SHAPE, shape_size);
				for (size_t i = 0; i < old->n_shape; i++)
					p = wr_varint(p, (uint64_t)old->shape[i]);
			}
			if (old->data.len) {
				p = wr_len_head(p, FW_ARRAY_DATA, old->data.len);
				memcpy(p, old->data.data, old->data.len);
				p += old->data.len;
			}
		}
		p = wr_var_field(p, FW_OPR_SKIPPED, op->skipped);
		p = wr_var_field(p, FW_OPR_APPLIED, op->applied);
	}
	if ((size_t)(p - at) != TA_FRAME_HEADER + size)
		abort(); /* the sizes above and the writes here disagree: a bug in this file */
	buf->len += TA_FRAME_HEADER + size;
	return 0;
}
