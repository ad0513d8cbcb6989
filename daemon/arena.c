/* arena.c: the dispatcher's bump allocator (see arena.h). */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>

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
}

void *ta_arena_alloc(ta_arena *a, size_t n)
{
	size_t need = (n + 15u) & ~(size_t)15u;
	if (need < n)
		return NULL;
	ta_arena_chunk *c = a->head;
	if (!c || c->size - c->used < need) {
		size_t size = need < a->keep ? a->keep : need; /* the first chunk is the one kept */
		if (size > SIZE_MAX - sizeof(ta_arena_chunk) ||
		    !(c = malloc(sizeof(ta_arena_chunk) + size)))
			return NULL;
		c->next = a->head;
		c->size = size;
		c->used = 0;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += need;
	return p;
}

void ta_arena_reset(ta_arena *a)
{
	ta_arena_chunk *c = a->head, *first = NULL;
	while (c) {
		ta_arena_chunk *next = c->next;
		if (next == NULL && c->size == a->keep)
			first = c; /* the oldest chunk of the kept size stays */
		else
			free(c);
		c = next;
	}
	if (first)
		first->used = 0;
	a->head = first;
}

void ta_arena_free(ta_arena *a)
{
	ta_arena_reset(a);
	free(a->head);
	a->head = NULL;
}
