/* ta_c11.h: the C11 memory order of every sem for every kind of access, derived from the
 * acquires / releases columns of the TA_SEM rows of ta_ops.def: the one mapping the CPU
 * backend's atomics use (tests/check_semantics.c pins each order, since x86 cannot show the
 * difference at run time). static inline, so that a constant sem folds to a constant order
 * in the backend's element loop. C only (<stdatomic.h>). */
#ifndef TA_C11_H
#define TA_C11_H

#include <stdatomic.h>
#include <stdbool.h>

#include "ta_types.h"

/* The C11 memory order of an access under sem: an RMW takes both parts of the sem (acquire,
 * release or acq_rel), a load and the load of a failed compare only its acquire part, a
 * store only its release part; relaxed when nothing is left (and for an invalid sem). */
static inline memory_order ta_sem_c11_order(ta_sem sem, ta_access access)
{
	bool acq = false, rel = false;
	switch (sem) {
#define TA_SEM(id, name, acquires, releases, ptx)                                                  \
	case TA_SEM_##id:                                                                          \
		acq = (acquires);                                                                  \
		rel = (releases);                                                                  \
		break;
#include "ta_ops.def"
#undef TA_SEM
	default:
		break;
	}
	if (access == TA_ACCESS_LOAD || access == TA_ACCESS_CAS_FAILURE)
		rel = false;
	else if (access == TA_ACCESS_STORE)
		acq = false;
	return acq && rel ? memory_order_acq_rel
	       : acq      ? memory_order_acquire
	       : rel      ? memory_order_release
	                  : memory_order_relaxed;
}

#endif /* TA_C11_H */
