/* ta_hostmem.h: whether host memory for a new tile really exists. Under overcommit
 * malloc succeeds for memory that does not exist and zeroing it brings the OOM killer
 * instead of an error, so the CPU backend asks here before every tile allocation.
 *
 * The room is the smallest of: /proc/meminfo MemAvailable; for the process's cgroup and
 * each of its ancestors, cgroup v2 memory.max - memory.current and cgroup v1
 * memory.limit_in_bytes - memory.usage_in_bytes (v1 values of 2^60 and more mean "no
 * limit"). A tile must leave a margin free beside it: max(TA_HOSTMEM_MARGIN_MIN, 1/16 of
 * the total the binding room belongs to: MemTotal or the cgroup's limit).
 *
 * Reading those files for every one-element tile would cost more than the tile, so the
 * limits are read only when the budget left from the last reading cannot cover a tile:
 * each reading grants half of the room left after the tile that caused it, which the
 * following creates draw from (frees give nothing back: the next reading sees them).
 *
 * Tests: the environment variable TILEATOM_HOSTMEM_ROOT, when set, is a directory put in
 * front of every path read here (ROOT/proc/meminfo, ROOT/proc/self/cgroup,
 * ROOT/sys/fs/cgroup/...), so that a test can feed a fake cgroup v1 or v2 limit. Not for
 * production use. */
#ifndef TA_HOSTMEM_H
#define TA_HOSTMEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ta_types.h"

/* Smallest margin left free beside a new tile: the daemon's own needs and the kernel's. */
#define TA_HOSTMEM_MARGIN_MIN ((uint64_t)64 << 20)
/* The margin's share of the total the binding limit belongs to: 1/TA_HOSTMEM_MARGIN_DIV. */
#define TA_HOSTMEM_MARGIN_DIV 16u
/* cgroup v1 limits at or over this are "no limit" (the kernel writes 2^63 - page). */
#define TA_HOSTMEM_V1_UNLIMITED ((uint64_t)1 << 60)
/* Environment variable naming a directory in front of every /proc and /sys path (tests). */
#define TA_HOSTMEM_ROOT_ENV "TILEATOM_HOSTMEM_ROOT"

/* What one reading of the limits found. */
typedef struct ta_hostmem_reading {
	uint64_t room;  /* bytes that can still be committed (the smallest room found) */
	uint64_t total; /* the total that room belongs to (MemTotal, or the cgroup limit) */
	char what[160]; /* which bound gave room, e.g. "cgroup v1 /a memory.limit_in_bytes" */
} ta_hostmem_reading;

/* A budget of host memory for tiles (one per backend). */
typedef struct ta_hostmem {
	pthread_mutex_t lock; /* guards budget */
	uint64_t budget;      /* bytes creates may take before the limits are read again */
} ta_hostmem;

/* Initialises an empty budget (the first reserve reads the limits). Returns 0 or an errno. */
int ta_hostmem_init(ta_hostmem *hm);
/* Releases what ta_hostmem_init made. */
void ta_hostmem_destroy(ta_hostmem *hm);
/* Reads the limits now. False when no source could be read (then nothing is checked). */
bool ta_hostmem_read(ta_hostmem_reading *out);
/* The margin a tile leaves free beside it when room belongs to total. */
uint64_t ta_hostmem_margin(uint64_t total);
/* Takes bytes from the budget, reading the limits again when the budget does not cover
 * them. TA_OK, or RESOURCE_EXHAUSTED with a message naming the bytes, the room, its
 * source and the margin. */
ta_status ta_hostmem_reserve(ta_hostmem *hm, uint64_t bytes, ta_error *err);

#endif /* TA_HOSTMEM_H */
