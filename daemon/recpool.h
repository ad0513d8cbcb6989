/* recpool.h: a pool of fixed-size records whose memory stays readable for the life of the
 * pool (type-stable memory) and is still given back to the system.
 *
 * The registry's lock-free cached lookups read a tile record's reference count and stamp
 * after the tile may have gone, so a record's address must never become unmapped or be
 * handed to malloc for something else. Records therefore come from large anonymous
 * mappings, reserved (MAP_NORESERVE) in chunks of TA_RECPOOL_CHUNK_SLABS slabs of
 * TA_RECPOOL_SLAB_BYTES, never unmapped before the pool is freed. When every record of a
 * slab is free again, the slab's pages are given back with madvise(MADV_DONTNEED): they
 * read as zeros from then on (a zero reference count, which no cached lookup takes) and
 * cost no memory until records are carved from them again. Up to TA_RECPOOL_KEEP_EMPTY
 * empty slabs are kept without that, so that a create/destroy pair does not pay for a
 * madvise and page faults each time.
 *
 * Not thread-safe: the caller serialises every call (the registry holds its write lock). */
#ifndef TA_DAEMON_RECPOOL_H
#define TA_DAEMON_RECPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of one slab (a multiple of the page size). */
#define TA_RECPOOL_SLAB_BYTES ((size_t)64 << 10)
/* Slabs of one reserved mapping (16 MiB of address space). */
#define TA_RECPOOL_CHUNK_SLABS 256u
/* Empty slabs kept resident for reuse; more are given back at once. */
#define TA_RECPOOL_KEEP_EMPTY 2u

typedef struct ta_recpool_slab ta_recpool_slab;

/* A pool of records of one size. All zero, then ta_recpool_init. */
typedef struct ta_recpool {
	size_t record_bytes;     /* bytes of one record (a multiple of 64) */
	size_t per_slab;         /* records in a slab */
	char **chunks;           /* the reserved mappings (TA_RECPOOL_CHUNK_SLABS slabs each) */
	size_t nchunks;          /* entries of chunks */
	ta_recpool_slab *slabs;  /* every slab's state, chunk by chunk */
	size_t nslabs;           /* slabs handed out of the chunks so far */
	uint32_t avail;          /* index + 1 of the top slab with room in resident memory */
	uint32_t bare;           /* index + 1 of the top slab given back (0: none) */
	unsigned empty_resident; /* empty slabs kept resident (not given back) */
	uint64_t resident;       /* slabs with records carved from them and not given back */
} ta_recpool;

/* Prepares a pool of records of record_bytes (rounded up to 64 bytes). */
void ta_recpool_init(ta_recpool *pool, size_t record_bytes);
/* Unmaps everything; every record's memory goes. */
void ta_recpool_free(ta_recpool *pool);
/* A record (zeroed when it was never used or its slab was given back; otherwise as it was
 * freed). NULL when memory is short. */
void *ta_recpool_alloc(ta_recpool *pool);
/* Gives a record of this pool back; its memory stays readable, its first pointer-sized
 * bytes now hold the pool's link (the rest is left as it was, or zeros once its slab is
 * given back). */
void ta_recpool_release(ta_recpool *pool, void *record);

#endif /* TA_DAEMON_RECPOOL_H */
