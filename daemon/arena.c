/* arena.c: the dispatcher's bump allocator (see arena.h). */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>

/* Allocates a chunk of at least size usable bytes after head; NULL when memory is short. */
static ta_arena_chunk *chunk_new(size_t size, ta_arena_chunk *next)
{
	if (size > SIZE_MAX - sizeof(ta_arena_chunk))
		return NULL;
	ta_arena_chunk *c = malloc(sizeof(ta_arena_chunk) + size);
	if (!c)
		return NULL;
	c->next = next;
	c->size = size;
	c->used = 0;
	return c;
}

/* protobuf-c's allocation hook. */
static void *pb_alloc(void *data, size_t n)
{
	return ta_arena_alloc((ta_arena *)data, n);
}

/* protobuf-c's free hook: arena memory goes at the next reset. */
static void pb_free(void *data, void *p)
{
	(void)data;
	(void)p;
}

void ta_arena_init(ta_arena *a, size_t keep)
{
	a->head = NULL;
	a->keep = keep;
	a->pb.alloc = pb_alloc;
	a->pb.free = pb_free;
	a->pb.allocator_data = a;
	a->high_water = 0;
}

void *ta_arena_alloc(ta_arena *a, size_t n)
{
	size_t need = (n + 15u) & ~(size_t)15u;
	if (need < n)
		return NULL;
	ta_arena_chunk *c = a->head;
	if (!c || c->size - c->used < need) {
		size_t size = need;
		if (!a->head && size < a->keep)
			size = a->keep; /* the first chunk is the one kept */
		else if (size < a->keep)
			size = a->keep;
		c = chunk_new(size, a->head);
		if (!c)
			return NULL;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += need;
	return p;
}

void ta_arena_reset(ta_arena *a)
{
	size_t used = 0;
	ta_arena_chunk *c = a->head, *first = NULL;
	while (c) {
		ta_arena_chunk *next = c->next;
		used += c->used;
		if (next == NULL && c->size == a->keep) {
			first = c; /* the oldest chunk of the kept size stays */
		} else {
			free(c);
		}
		c = next;
	}
	if (used > a->high_water)
		a->high_water = used;
	if (first)
		first->used = 0;
	a->head = first;
}

void ta_arena_free(ta_arena *a)
{
	ta_arena_chunk *c = a->head;
	while (c) {
		ta_arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	a->head = NULL;
}
