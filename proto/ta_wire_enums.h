/* ta_wire_enums.h: compile-time proof that the core's table enums (tacore/ta_types.h,
 * generated from tacore/ta_ops.def) equal the wire enums of proto/tileatom.proto, so that
 * values cross the wire with a plain cast. Every row of every table is checked, and so is
 * each enum's size. Included once by each side that crosses: the daemon's dispatch and
 * the client library (which also ties the public header to the core). */
#ifndef TA_WIRE_ENUMS_H
#define TA_WIRE_ENUMS_H

#include "ta_types.h"
#include "tileatom.pb-c.h"

/* Asserts that a core value equals a wire value. */
#define TA_WIRE_SAME(core, wire) _Static_assert((int)(core) == (int)(wire), #core " != " #wire)

/* dtypes: every row, and no wire value beyond the last. */
#define TA_DTYPE(id, wire, ...) TA_WIRE_SAME(TA_DTYPE_##id, TILEATOM__DTYPE__##wire);
#include "ta_ops.def"
#undef TA_DTYPE
TA_WIRE_SAME(TA_DTYPE_NONE, TILEATOM__DTYPE__DTYPE_UNSPECIFIED);
TA_WIRE_SAME(TA_DTYPE_COUNT, TILEATOM__DTYPE__BOOL + 1);

/* ops: the RMW rows are the wire enum Op; LOAD and STORE are no wire ops (the request kind
 * says which memory op runs). */
#define TA_WIRE_OP_RMW(id) TA_WIRE_SAME(TA_OP_##id, TILEATOM__OP__##id);
#define TA_WIRE_OP_LOAD(id)
#define TA_WIRE_OP_STORE(id)
#define TA_OP(id, name, kind, ...) TA_WIRE_OP_##kind(id)
#include "ta_ops.def"
#undef TA_OP
#undef TA_WIRE_OP_RMW
#undef TA_WIRE_OP_LOAD
#undef TA_WIRE_OP_STORE
TA_WIRE_SAME(TA_OP_NONE, TILEATOM__OP__OP_UNSPECIFIED);
TA_WIRE_SAME(TA_OP_LOAD, TILEATOM__OP__XOR + 1);

#define TA_SEM(id, ...) TA_WIRE_SAME(TA_SEM_##id, TILEATOM__SEM__##id);
#include "ta_ops.def"
#undef TA_SEM
TA_WIRE_SAME(TA_SEM_COUNT, TILEATOM__SEM__ACQ_REL + 1);

#define TA_SCOPE(id, ...) TA_WIRE_SAME(TA_SCOPE_##id, TILEATOM__SCOPE__##id);
#include "ta_ops.def"
#undef TA_SCOPE
TA_WIRE_SAME(TA_SCOPE_COUNT, TILEATOM__SCOPE__SYS + 1);

#define TA_SPACE(id, ...) TA_WIRE_SAME(TA_SPACE_##id, TILEATOM__SPACE__##id);
#include "ta_ops.def"
#undef TA_SPACE
TA_WIRE_SAME(TA_SPACE_COUNT, TILEATOM__SPACE__SHARED + 1);

#define TA_STATUS(id, pub) TA_WIRE_SAME(TA_##id, TILEATOM__STATUS__##id);
#include "ta_ops.def"
#undef TA_STATUS
TA_WIRE_SAME(TA_STATUS_COUNT, TILEATOM__STATUS__INTERNAL + 1);

/* request kinds: each row's number is its Request body case */
#define TA_REQUEST(id, ...) TA_WIRE_SAME(TA_REQ_##id, TILEATOM__REQUEST__BODY_##id);
#include "ta_ops.def"
#undef TA_REQUEST
TA_WIRE_SAME(TA_REQ_END, TILEATOM__REQUEST__BODY_AUTH + 1);

#undef TA_WIRE_SAME
#endif /* TA_WIRE_ENUMS_H */
