/* recpool.c: type-stable record slabs given back with madvise when empty (see recpool.h).
 * Each slab keeps its own free list (linked through a free record's first bytes) and a
 * count of records carved from it. Slabs with a free record in resident memory form a
 * stack (avail), slabs given back another (bare): records come from a resident slab when
 * there is one, then from a given-back one, then from a slab never used. A slab given back
 * while on avail moves to bare when it reaches the top. */
#include "recpool.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Under AddressSanitizer the leak checker scans the heap, not anonymous mappings: a record
 * here may hold the only pointer to a tile's memory, so each chunk is registered as a root
 * region (else every tile alive at exit would read as leaked). */
#if defined(__SANITIZE_ADDRESS__)
#define TA_RECPOOL_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TA_RECPOOL_LSAN 1
#endif
#endif
#ifdef TA_RECPOOL_LSAN
#include <sanitizer/lsan_interface.h>
#define LSAN_ROOT(p, n)   __lsan_register_root_region((p), (n))
#define LSAN_UNROOT(p, n) __lsan_unregister_root_region((p), (n))
#else
#define LSAN_ROOT(p, n)   ((void)(p), (void)(n))
#define LSAN_UNROOT(p, n) ((void)(p), (void)(n))
#endif

/* Which stack a slab is on. */
enum { ON_NONE, ON_AVAIL, ON_BARE };

/* One slab's state. */
struct ta_recpool_slab {
	void *free;          /* first free record (linked through its first bytes) */
	uint32_t used;       /* records handed out */
	uint32_t carved;     /* records carved from the slab's start since it was (re)used */
	uint32_t next_avail; /* index + 1 of the next slab of its stack (0: none) */
	uint8_t stack;       /* the stack it is on (ON_NONE, ON_AVAIL, ON_BARE) */
	bool resident_empty; /* empty and kept resident (counted in empty_resident) */
};

void ta_recpool_init(ta_recpool *pool, size_t record_bytes)
{
	memset(pool, 0, sizeof(*pool));
	pool->record_bytes = (record_bytes + 63) / 64 * 64;
	pool->per_slab = TA_RECPOOL_SLAB_BYTES / pool->record_bytes;
}

void ta_recpool_free(ta_recpool *pool)
{
	for (size_t c = 0; c < pool->nchunks; c++) {
		LSAN_UNROOT(pool->chunks[c], TA_RECPOOL_SLAB_BYTES * TA_RECPOOL_CHUNK_SLABS);
		munmap(pool->chunks[c], TA_RECPOOL_SLAB_BYTES * TA_RECPOOL_CHUNK_SLABS);
	}
	free(pool->chunks);
	free(pool->slabs);
	memset(pool, 0, sizeof(*pool));
}

/* Start of slab idx. */
static char *slab_base(const ta_recpool *pool, size_t idx)
{
	return pool->chunks[idx / TA_RECPOOL_CHUNK_SLABS] +
	       (idx % TA_RECPOOL_CHUNK_SLABS) * TA_RECPOOL_SLAB_BYTES;
}

/* Index of the slab holding record. */
static size_t slab_of(const ta_recpool *pool, const void *record)
{
	const char *p = record;
	size_t span = TA_RECPOOL_SLAB_BYTES * TA_RECPOOL_CHUNK_SLABS;
	for (size_t c = 0;; c++) /* record comes from this pool: some chunk holds it */
		if (p >= pool->chunks[c] && p < pool->chunks[c] + span)
			return c * TA_RECPOOL_CHUNK_SLABS +
			       (size_t)(p - pool->chunks[c]) / TA_RECPOOL_SLAB_BYTES;
}

/* Pushes slab idx (on no stack) on the avail or the bare stack (ON_AVAIL, ON_BARE). */
static void push(ta_recpool *pool, uint8_t stack, size_t idx)
{
	ta_recpool_slab *s = &pool->slabs[idx];
	uint32_t *top = stack == ON_AVAIL ? &pool->avail : &pool->bare;
	s->stack = stack;
	s->next_avail = *top;
	*top = (uint32_t)idx + 1;
}

/* True when slab s was given back and holds nothing (its pages read as zeros). */
static bool is_bare(const ta_recpool_slab *s)
{
	return s->used == 0 && s->carved == 0 && !s->resident_empty;
}

/* Reserves one more chunk of slabs. False when memory is short. */
static bool add_chunk(ta_recpool *pool)
{
	size_t span = TA_RECPOOL_SLAB_BYTES * TA_RECPOOL_CHUNK_SLABS;
	if ((pool->nchunks + 1) * TA_RECPOOL_CHUNK_SLABS > UINT32_MAX - 1)
		return false;
	char **chunks = realloc(pool->chunks, (pool->nchunks + 1) * sizeof(*chunks));
	if (!chunks)
		return false;
	pool->chunks = chunks;
	size_t nslabs = (pool->nchunks + 1) * TA_RECPOOL_CHUNK_SLABS;
	ta_recpool_slab *slabs = realloc(pool->slabs, nslabs * sizeof(*slabs));
	if (!slabs)
		return false;
	pool->slabs = slabs;
	memset(&slabs[pool->nchunks * TA_RECPOOL_CHUNK_SLABS], 0,
	       TA_RECPOOL_CHUNK_SLABS * sizeof(*slabs));
	void *map = mmap(NULL, span, PROT_READ | PROT_WRITE,
	                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED)
		return false;
	LSAN_ROOT(map, span);
	pool->chunks[pool->nchunks++] = map;
	return true;
}

void *ta_recpool_alloc(ta_recpool *pool)
{
	while (pool->avail) { /* full and given-back slabs off the top */
		size_t top = pool->avail - 1;
		ta_recpool_slab *s = &pool->slabs[top];
		if (s->used < pool->per_slab && !is_bare(s))
			break;
		s->stack = ON_NONE;
		pool->avail = s->next_avail;
		if (is_bare(s))
			push(pool, ON_BARE, top);
	}
	if (!pool->avail && pool->bare) {
		size_t idx = pool->bare - 1;
		pool->bare = pool->slabs[idx].next_avail;
		push(pool, ON_AVAIL, idx);
	} else if (!pool->avail) {
		if (pool->nslabs == pool->nchunks * TA_RECPOOL_CHUNK_SLABS && !add_chunk(pool))
			return NULL;
		push(pool, ON_AVAIL, pool->nslabs++);
	}
	size_t idx = pool->avail - 1;
	ta_recpool_slab *s = &pool->slabs[idx];
	void *record;
	if (s->free) {
		record = s->free;
		memcpy(&s->free, record, sizeof(void *));
	} else {
		if (is_bare(s))
			pool->resident++; /* its first page faults in now */
		record = slab_base(pool, idx) + (size_t)s->carved++ * pool->record_bytes;
	}
	if (s->resident_empty) {
		s->resident_empty = false;
		pool->empty_resident--;
	}
	s->used++;
	if (s->used == pool->per_slab) {
		s->stack = ON_NONE;
		pool->avail = s->next_avail;
	}
	return record;
}

void ta_recpool_release(ta_recpool *pool, void *record)
{
	size_t idx = slab_of(pool, record);
	ta_recpool_slab *s = &pool->slabs[idx];
	s->used--;
	if (s->used == 0 && pool->empty_resident >= TA_RECPOOL_KEEP_EMPTY &&
	    madvise(slab_base(pool, idx), TA_RECPOOL_SLAB_BYTES, MADV_DONTNEED) == 0) {
		s->free = NULL; /* the pages read as zeros now: carve afresh */
		s->carved = 0;
		pool->resident--;
		if (s->stack == ON_NONE)
			push(pool, ON_BARE, idx);
		return;
	}
	memcpy(record, &s->free, sizeof(void *));
	s->free = record;
	if (s->stack == ON_NONE)
		push(pool, ON_AVAIL, idx);
	if (s->used == 0) {
		s->resident_empty = true;
		pool->empty_resident++;
	}
}
