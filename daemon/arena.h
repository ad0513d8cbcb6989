/* arena.h: a bump allocator that a dispatcher reuses from request to request, so that
 * decoding a request (protobuf-c's unpack, through the ProtobufCAllocator it exposes) and
 * building its response allocate nothing from malloc in steady state. Allocations are
 * freed all at once by ta_arena_reset; the first chunk stays for the next request, larger
 * ones (a big request's) are returned to malloc. Not thread-safe: one arena per thread. */
#ifndef TA_DAEMON_ARENA_H
#define TA_DAEMON_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* One block of arena memory. */
typedef struct ta_arena_chunk {
	struct ta_arena_chunk *next;       /* the chunk allocated before this one */
	size_t size;                       /* usable bytes at data */
	size_t used;                       /* bytes handed out */
	_Alignas(16) unsigned char data[]; /* the memory */
} ta_arena_chunk;

/* The arena. */
typedef struct ta_arena {
	ta_arena_chunk *head;  /* newest chunk (allocations come from it) */
	size_t keep;           /* size of the chunk kept across resets */
	ProtobufCAllocator pb; /* protobuf-c allocator drawing from this arena */
} ta_arena;

/* Prepares an arena whose first chunk (kept across resets) has keep bytes. */
void ta_arena_init(ta_arena *a, size_t keep);
/* Returns n bytes aligned to 16, or NULL when memory is short. */
void *ta_arena_alloc(ta_arena *a, size_t n);
/* ta_arena_alloc with its common case inlined (the newest chunk has room): for hot paths
 * that allocate several small pieces per request (codec.c). */
static inline void *ta_arena_alloc_inline(ta_arena *a, size_t n)
{
	ta_arena_chunk *c = a->head;
	size_t need = (n + 15u) & ~(size_t)15u;
	if (c && need >= n && c->size - c->used >= need) {
		void *p = c->data + c->used;
		c->used += need;
		return p;
	}
	return ta_arena_alloc(a, n);
}
/* Frees every allocation at once; keeps the first chunk. */
void ta_arena_reset(ta_arena *a);
/* Frees the arena's memory. */
void ta_arena_free(ta_arena *a);

#endif /* TA_DAEMON_ARENA_H */
