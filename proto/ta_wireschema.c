/* ta_wireschema.c: the field table of the data-plane messages (see ta_wireschema.h) and its
 * check against the protobuf-c descriptors: every field the daemon's and the client's
 * codecs read or write, with the type, label, packedness, oneof membership, struct offset
 * and message type they assume, and the orders and field counts their encoders rely on. */
#include "ta_wireschema.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

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
    [FW_M_WRITE] = &tileatom__write_region_request__descriptor,
    [FW_M_READ] = &tileatom__read_region_request__descriptor,
    [FW_M_GATHER] = &tileatom__gather_request__descriptor,
    [FW_M_SCATTER_STORE] = &tileatom__scatter_store_request__descriptor,
    [FW_M_ATOMIC_LOAD] = &tileatom__atomic_load_request__descriptor,
    [FW_M_ATOMIC_STORE] = &tileatom__atomic_store_request__descriptor,
    [FW_M_ADDRESSING] = &tileatom__addressing__descriptor,
    [FW_M_BUFREF] = &tileatom__buffer_ref__descriptor,
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

/* Every field handled, checked against the descriptors by ta_wireschema_init. */
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

	/* the rest of the data plane: only the daemon's decoder (daemon/codec.c) reads these */
	{FW_M_REQUEST, FW_REQ_WRITE, "write", T_MSG, false, true, OFF(Tileatom__Request, write), D(write_region_request)},
	{FW_M_REQUEST, FW_REQ_READ, "read", T_MSG, false, true, OFF(Tileatom__Request, read), D(read_region_request)},
	{FW_M_REQUEST, FW_REQ_GATHER, "gather", T_MSG, false, true, OFF(Tileatom__Request, gather), D(gather_request)},
	{FW_M_REQUEST, FW_REQ_SCATTER_STORE, "scatter_store", T_MSG, false, true, OFF(Tileatom__Request, scatter_store), D(scatter_store_request)},
	{FW_M_REQUEST, FW_REQ_ATOMIC_LOAD, "atomic_load", T_MSG, false, true, OFF(Tileatom__Request, atomic_load), D(atomic_load_request)},
	{FW_M_REQUEST, FW_REQ_ATOMIC_STORE, "atomic_store", T_MSG, false, true, OFF(Tileatom__Request, atomic_store), D(atomic_store_request)},

	{FW_M_WRITE, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__WriteRegionRequest, tile), NULL},
	{FW_M_WRITE, FW_RMW_REGION, "region", T_MSG, false, false, OFF(Tileatom__WriteRegionRequest, region), D(region)},
	{FW_M_WRITE, FW_RMW_VALUES, "values", T_MSG, false, false, OFF(Tileatom__WriteRegionRequest, values), D(array)},

	{FW_M_READ, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__ReadRegionRequest, tile), NULL},
	{FW_M_READ, FW_RMW_REGION, "region", T_MSG, false, false, OFF(Tileatom__ReadRegionRequest, region), D(region)},

	{FW_M_GATHER, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__GatherRequest, tile), NULL},
	{FW_M_GATHER, FW_MEM_WINDOW, "window", T_MSG, false, false, OFF(Tileatom__GatherRequest, window), D(region)},
	{FW_M_GATHER, FW_MEM_ADDR, "addr", T_MSG, false, false, OFF(Tileatom__GatherRequest, addr), D(addressing)},
	{FW_M_GATHER, FW_MEM_PADDING, "padding", T_MSG, false, false, OFF(Tileatom__GatherRequest, padding), D(array)},
	{FW_M_GATHER, FW_RMW_OPTIONS, "options", T_MSG, false, false, OFF(Tileatom__GatherRequest, options), D(options)},

	{FW_M_SCATTER_STORE, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__ScatterStoreRequest, tile), NULL},
	{FW_M_SCATTER_STORE, FW_MEM_WINDOW, "window", T_MSG, false, false, OFF(Tileatom__ScatterStoreRequest, window), D(region)},
	{FW_M_SCATTER_STORE, FW_MEM_ADDR, "addr", T_MSG, false, false, OFF(Tileatom__ScatterStoreRequest, addr), D(addressing)},
	{FW_M_SCATTER_STORE, FW_RMW_VALUES, "values", T_MSG, false, false, OFF(Tileatom__ScatterStoreRequest, values), D(array)},
	{FW_M_SCATTER_STORE, FW_RMW_OPTIONS, "options", T_MSG, false, false, OFF(Tileatom__ScatterStoreRequest, options), D(options)},

	{FW_M_ATOMIC_LOAD, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__AtomicLoadRequest, tile), NULL},
	{FW_M_ATOMIC_LOAD, FW_MEM_WINDOW, "window", T_MSG, false, false, OFF(Tileatom__AtomicLoadRequest, window), D(region)},
	{FW_M_ATOMIC_LOAD, FW_MEM_ADDR, "addr", T_MSG, false, false, OFF(Tileatom__AtomicLoadRequest, addr), D(addressing)},
	{FW_M_ATOMIC_LOAD, FW_RMW_OPTIONS, "options", T_MSG, false, false, OFF(Tileatom__AtomicLoadRequest, options), D(options)},

	{FW_M_ATOMIC_STORE, FW_RMW_TILE, "tile", T_STR, false, false, OFF(Tileatom__AtomicStoreRequest, tile), NULL},
	{FW_M_ATOMIC_STORE, FW_MEM_WINDOW, "window", T_MSG, false, false, OFF(Tileatom__AtomicStoreRequest, window), D(region)},
	{FW_M_ATOMIC_STORE, FW_MEM_ADDR, "addr", T_MSG, false, false, OFF(Tileatom__AtomicStoreRequest, addr), D(addressing)},
	{FW_M_ATOMIC_STORE, FW_RMW_VALUES, "values", T_MSG, false, false, OFF(Tileatom__AtomicStoreRequest, values), D(array)},
	{FW_M_ATOMIC_STORE, FW_RMW_OPTIONS, "options", T_MSG, false, false, OFF(Tileatom__AtomicStoreRequest, options), D(options)},

	{FW_M_ADDRESSING, FW_ADDR_REGION, "region", T_MSG, false, true, OFF(Tileatom__Addressing, region), D(region)},
	{FW_M_ADDRESSING, FW_ADDR_SCATTER, "scatter", T_MSG, false, true, OFF(Tileatom__Addressing, scatter), D(scatter_addr)},
	{FW_M_ADDRESSING, FW_ADDR_INDEXED, "indexed", T_MSG, false, true, OFF(Tileatom__Addressing, indexed), D(indexed_addr)},

	{FW_M_BUFREF, FW_REF_ID, "buffer_id", T_U64, false, false, OFF(Tileatom__BufferRef, buffer_id), NULL},
	{FW_M_BUFREF, FW_REF_OFFSET, "offset", T_U64, false, false, OFF(Tileatom__BufferRef, offset), NULL},
	{FW_M_BUFREF, FW_REF_LENGTH, "length", T_U64, false, false, OFF(Tileatom__BufferRef, length), NULL},
	{FW_M_ARRAY, FW_ARRAY_SHARED, "shared", T_MSG, false, false, OFF(Tileatom__Array, shared), D(buffer_ref)},
	{FW_M_RESPONSE, FW_RESP_DATA, "data", T_MSG, false, true, OFF(Tileatom__Response, data), D(array)},
	{FW_M_OPTIONS, FW_OPT_OLD_INTO, "old_into", T_MSG, false, false, OFF(Tileatom__Options, old_into), D(buffer_ref)},
};
// clang-format on
#define FW_NSPECS (sizeof(fw_specs) / sizeof(fw_specs[0]))

/* The decoding tables, by fw_msg (filled once). */
fw_table fw_tables[FW_M_COUNT];
/* Field number of each slot (filled once). */
unsigned fw_number[FW_SLOTS];
/* Each slot's one-byte key, or 0 (filled once). */
uint8_t fw_key1[FW_SLOTS];
/* Guards the one filling of the tables. */
static pthread_once_t fw_once = PTHREAD_ONCE_INIT;
/* Set (release) once fw_fill has run: later calls skip pthread_once, which every hot request
 * would otherwise pay. */
static atomic_bool fw_ready;

/* Stops the process: the schema changed in a way this file does not follow. */
static void fw_schema_fail(const fw_spec *s, const char *what)
{
	fprintf(stderr,
	        "tileatom: the wire codecs (proto/ta_wireschema.c, daemon/codec.c, "
	        "client/tac_wire.c) do not match proto/tileatom.proto: %s.%s %s; update "
	        "them\n",
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
			fw_schema_fail(s, "has a field number over the codecs' tables");
		fw_table *t = &fw_tables[s->msg];
		t->slot[f->id] = (uint8_t)s->slot;
		t->wire[f->id] = (uint8_t)fw_wire_of(s->type, s->repeated);
		t->number[s->slot] = (uint8_t)f->id;
		fw_number[s->slot] = f->id;
		unsigned key = (f->id << 3) | fw_wire_of(s->type, s->repeated);
		fw_key1[s->slot] = key < 0x80 ? (uint8_t)key : 0;
	}
	/* the oneof cases are the field numbers (protobuf-c's rule): checked, then used */
	if (fw_number[FW_REQ_PING] != TILEATOM__REQUEST__BODY_PING ||
	    fw_number[FW_REQ_ELEMENTWISE] != TILEATOM__REQUEST__BODY_ELEMENTWISE ||
	    fw_number[FW_REQ_SCATTER] != TILEATOM__REQUEST__BODY_SCATTER ||
	    fw_number[FW_REQ_INDEXED] != TILEATOM__REQUEST__BODY_INDEXED ||
	    fw_number[FW_REQ_WRITE] != TILEATOM__REQUEST__BODY_WRITE ||
	    fw_number[FW_REQ_READ] != TILEATOM__REQUEST__BODY_READ ||
	    fw_number[FW_REQ_GATHER] != TILEATOM__REQUEST__BODY_GATHER ||
	    fw_number[FW_REQ_SCATTER_STORE] != TILEATOM__REQUEST__BODY_SCATTER_STORE ||
	    fw_number[FW_REQ_ATOMIC_LOAD] != TILEATOM__REQUEST__BODY_ATOMIC_LOAD ||
	    fw_number[FW_REQ_ATOMIC_STORE] != TILEATOM__REQUEST__BODY_ATOMIC_STORE ||
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
	/* the client's request encoder writes each message's fields in the order of fw_specs:
	 * it must be the field-number order, and the messages it writes must have no field it
	 * does not know (Options.old_into is the one it declines; Request's other oneof members
	 * are other bodies) */
	unsigned last_number[FW_M_COUNT] = {0};
	unsigned count[FW_M_COUNT] = {0};
	for (size_t i = 0; i < FW_NSPECS; i++) {
		const fw_spec *s = &fw_specs[i];
		if (s->msg >= FW_M_WRITE || s->slot >= FW_REQ_WRITE)
			continue; /* the daemon decoder's fields: the client's encoder does not
			             write them */
		unsigned number = fw_tables[s->msg].number[s->slot];
		if (number <= last_number[s->msg])
			fw_schema_fail(s, "is out of the field-number order of the table");
		last_number[s->msg] = number;
		count[s->msg]++;
	}
	static const struct {
		fw_msg msg;     /* a message the request encoder writes */
		unsigned extra; /* its fields the encoder declines (not in fw_specs) */
	} complete[] = {{FW_M_ELEMENTWISE, 0}, {FW_M_SCATTER, 0}, {FW_M_INDEXED, 0},
	                {FW_M_REGION, 0},      {FW_M_OPTIONS, 1}, {FW_M_SADDR, 0},
	                {FW_M_IADDR, 0}};
	for (size_t i = 0; i < sizeof(complete) / sizeof(complete[0]); i++)
		if (fw_descs[complete[i].msg]->n_fields !=
		    count[complete[i].msg] + complete[i].extra)
			fw_schema_fail(&fw_specs[0],
			               "a request message has fields the encoder does "
			               "not write");
	const ProtobufCMessageDescriptor *qd = &tileatom__request__descriptor;
	for (unsigned i = 0; i < qd->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &qd->fields[i];
		if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    (f->id >= FW_MAX_NUMBER || fw_tables[FW_M_REQUEST].slot[f->id] == FW_NONE))
			fw_schema_fail(&fw_specs[0],
			               "Request has a field the encoder does not write");
	}
	if (tileatom__ping_request__descriptor.n_fields != 0)
		fw_schema_fail(&fw_specs[0], "PingRequest has new fields");
	atomic_store_explicit(&fw_ready, true, memory_order_release);
}

void ta_wireschema_init(void)
{
	if (atomic_load_explicit(&fw_ready, memory_order_acquire))
		return;
	if (pthread_once(&fw_once, fw_fill) != 0)
		abort();
}

uint32_t ta_wireschema_key(const ProtobufCMessageDescriptor *desc, const char *name)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(desc, name);
	if (!f)
		return 0;
	unsigned wire;
	switch (f->type) {
	case PROTOBUF_C_TYPE_MESSAGE:
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
		wire = FW_LEN;
		break;
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_BOOL:
		wire = f->label == PROTOBUF_C_LABEL_REPEATED &&
		               (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED)
		           ? FW_LEN
		           : FW_VARINT;
		break;
	default:
		fprintf(stderr, "tileatom: field %s.%s has a type the wire codecs do not write\n",
		        desc->name, name);
		abort();
	}
	return f->id << 3 | wire;
}
