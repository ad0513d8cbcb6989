/* tac_call.c: the synchronous round trip of libtileatom-client's calls (tac_roundtrip),
 * above the layers it uses: raw device pointers among the operands are registered
 * (tac_cuptr.c), large inline operands staged in shared memory and arrays rewritten as
 * buffer references (tac_shm.c), then the request is sent and its response received and
 * checked (tac_conn.c, tac_wire.c). */
#include "tac_internal.h"

int tac_roundtrip(tileatom_client *c, tac_msg *m, int rc, tileatom_error *err)
{
	if (rc == TILEATOM_OK && !c->broken)
		rc = tac_none_pending(c, err);
	if (rc == TILEATOM_OK)
		rc = tac_cuptr_prepare(c, m, err);
	if (rc == TILEATOM_OK) {
		(void)tac_shm_stage(c, m, false);
		tac_shm_rewrite(c, m);
		rc = tac_conn_submit(c, m, true, -1, NULL, err);
	}
	tileatom_request_kind kind;
	if (rc == TILEATOM_OK)
		rc = tac_conn_receive(c, &kind, err);
	return rc == TILEATOM_OK ? tac_check_response(c->last, kind, err) : rc;
}
