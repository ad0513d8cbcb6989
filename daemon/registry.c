/* registry.c: named tiles with counted references (see registry.h). A chained hash table
 * (XXH3; doubled above one entry per bucket, halved below one per four) maps names to
 * tiles; one read-write lock guards it and the byte counters (lookups, on every request
 * from every loop and worker, only read-lock it). Backend allocation and freeing run
 * outside the lock. total_bytes counts each tile from create to its last unref as
 * tile->counted (TA_TILE_BOOKKEEPING and the backend's footprint, predicted at create,
 * exact at publish); live counts those tiles (max_tiles bounds it: destroyed tiles still
 * in use count until freed).
 *
 * Cached lookups (ta_registry_get_cached) take no lock: a thread remembers the name, the
 * tile record and the record's stamp, a value the registry hands out once (under the write
 * lock) whenever a record is linked into the table or leaves it. A cached tile is taken
 * with a reference only while its count is above zero (so a tile being freed is never
 * revived), and kept only when its stamp is still the remembered one after that (so a
 * tile removed in the meantime, or a record reused for another tile, is never handed
 * out). For that, tile records come from a type-stable pool (recpool.h): the tile memory
 * goes at once, the record's slot stays readable (its slab given back to the system with
 * madvise once all of it is free, reading as zeros) until the registry is freed.
 *
 * Every TA_REGISTRY_TRIM_BYTES of tiles freed, malloc_trim (glibc) gives the heaps' free
 * pages back; else a flood of small tiles leaves their chunks spread over kept pages.
 *
 * Paged listings pick, in one pass under the read lock, the first limit names after the
 * cursor (a bounded max-heap), so the cursor is just the last name given: nothing to keep
 * between pages, valid across any change. */
#include "registry.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "recpool.h"

/* Bytes of tiles freed (counted) between two malloc_trim calls. */
#define TA_REGISTRY_TRIM_BYTES ((uint64_t)16 << 20)

/* The registry proper. */
struct ta_registry {
	pthread_rwlock_t lock;    /* guards everything below: lookups, list and stats read
	                             (many event loops and workers at once), the rest writes */
	ta_backend *backend;      /* allocates and frees tile memory */
	uint64_t max_tile_bytes;  /* bytes of one tile (0: unlimited) */
	uint64_t max_total_bytes; /* bytes of all tiles (0: unlimited) */
	ta_tile **buckets;        /* hash buckets (chains through ta_tile.next) */
	size_t nbuckets;          /* number of buckets, a power of two */
	size_t entries;           /* tiles in the table, pending ones included */
	size_t published;         /* tiles in the table that are visible */
	uint64_t total_bytes;     /* bytes reserved or held by live tiles, bookkeeping included */
	uint64_t max_tiles;       /* tiles at once (0: unlimited) */
	uint64_t live;            /* tiles created and not yet freed */
	uint64_t serial;          /* this registry among all of the process (ta_tile_cache) */
	uint64_t next_stamp;      /* the last stamp handed out (ta_tile.stamp) */
	ta_recpool records;       /* where tile records live (type-stable) */
	uint64_t freed_untrimmed; /* bytes of tiles freed since the last malloc_trim */
};

/* Serials of the registries of the process (the first is 1: 0 marks an empty cache). */
static atomic_uint_fast64_t registry_serials;

/* Initial number of buckets. */
#define REGISTRY_INITIAL_BUCKETS 64

/* XXH3-64 hash of a NUL-terminated name (the table's bucket choice). */
static uint64_t name_hash(const char *name)
{
	return XXH3_64bits(name, strlen(name)); /* a few instructions for short names */
}

const char *ta_name_for_message(const char *name, char *buf, size_t size)
{
	size_t i = 0, limit = size > 4 ? size - 4 : 0;
	if (limit > TA_NAME_MAX)
		limit = TA_NAME_MAX;
	for (; i < limit && name[i]; i++)
		buf[i] = isprint((unsigned char)name[i]) ? name[i] : '?';
	if (name[i] && size >= 4) {
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	if (size > 0)
		buf[i < size ? i : size - 1] = '\0';
	return buf;
}

ta_registry *ta_registry_new(ta_backend *backend, uint64_t max_tile_bytes, uint64_t max_total_bytes,
                             ta_error *err)
{
	ta_registry *reg = calloc(1, sizeof(*reg));
	int rc = 0;
	if (!reg || !(reg->buckets = calloc(REGISTRY_INITIAL_BUCKETS, sizeof(*reg->buckets)))) {
		ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory for the tile registry");
	} else if ((rc = pthread_rwlock_init(&reg->lock, NULL)) != 0) {
		ta_error_set(err, TA_INTERNAL, "cannot create the registry lock: %s", strerror(rc));
	} else {
		reg->nbuckets = REGISTRY_INITIAL_BUCKETS;
		reg->serial = atomic_fetch_add(&registry_serials, 1) + 1;
		reg->backend = backend;
		reg->max_tile_bytes = max_tile_bytes;
		reg->max_total_bytes = max_total_bytes;
		ta_recpool_init(&reg->records, sizeof(ta_tile));
		return reg;
	}
	if (reg)
		free(reg->buckets);
	free(reg);
	return NULL;
}

void ta_registry_set_max_tiles(ta_registry *reg, uint64_t max_tiles)
{
	pthread_rwlock_wrlock(&reg->lock);
	reg->max_tiles = max_tiles;
	pthread_rwlock_unlock(&reg->lock);
}

/* Frees a tile whose last reference is gone and gives its bytes back (its record goes back
 * to the pool); every TA_REGISTRY_TRIM_BYTES freed, the heaps' free pages go back too. */
static void tile_destroy(ta_tile *tile)
{
	ta_registry *reg = tile->reg;
	if (tile->mem)
		ta_backend_tile_free(reg->backend, tile->mem);
	tile->mem = NULL;
	pthread_rwlock_wrlock(&reg->lock);
	reg->total_bytes -= tile->counted;
	reg->live--;
	reg->freed_untrimmed += tile->counted;
	bool trim = reg->freed_untrimmed >= TA_REGISTRY_TRIM_BYTES;
	if (trim)
		reg->freed_untrimmed = 0;
	atomic_store(&tile->stamp, ++reg->next_stamp); /* the record goes back to the pool */
	ta_recpool_release(&reg->records, tile);
	pthread_rwlock_unlock(&reg->lock);
#ifdef __GLIBC__
	if (trim)
		malloc_trim(0);
#else
	(void)trim;
#endif
}

void ta_registry_free(ta_registry *reg)
{
	if (!reg)
		return;
	for (size_t b = 0; b < reg->nbuckets; b++)
		for (ta_tile *t = reg->buckets[b], *next; t; t = next) {
			next = t->next;
			ta_tile_unref(t); /* the registry's reference: the last one */
		}
	ta_recpool_free(&reg->records);
	pthread_rwlock_destroy(&reg->lock);
	free(reg->buckets);
	free(reg);
}

/* Finds a tile (pending or published) by name; the lock is held. */
static ta_tile *find_locked(ta_registry *reg, const char *name, ta_tile ***link_out)
{
	ta_tile **link = &reg->buckets[name_hash(name) & (reg->nbuckets - 1)];
	for (; *link; link = &(*link)->next) {
		if (strcmp((*link)->name, name) == 0) {
			if (link_out)
				*link_out = link;
			return *link;
		}
	}
	return NULL;
}

/* Doubles the bucket array when entries exceed buckets, halves it when they are fewer than
 * a quarter of them (down to REGISTRY_INITIAL_BUCKETS); failure only keeps chains long or
 * the array large. The lock is held. */
static void maybe_resize_locked(ta_registry *reg)
{
	size_t n;
	if (reg->entries > reg->nbuckets)
		n = reg->nbuckets * 2;
	else if (reg->nbuckets > REGISTRY_INITIAL_BUCKETS && reg->entries < reg->nbuckets / 4)
		n = reg->nbuckets / 2;
	else
		return;
	ta_tile **nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (size_t b = 0; b < reg->nbuckets; b++)
		for (ta_tile *t = reg->buckets[b], *next; t; t = next) {
			next = t->next;
			size_t i = name_hash(t->name) & (n - 1);
			t->next = nb[i];
			nb[i] = t;
		}
	free(reg->buckets);
	reg->buckets = nb;
	reg->nbuckets = n;
}

ta_status ta_registry_create(ta_registry *reg, const char *name, const ta_tile_shape *shape,
                             ta_tile **out, ta_error *err)
{
	return ta_registry_create_placed(reg, name, shape, TA_OWNER_PUBLIC, NULL, out, err);
}

ta_status ta_registry_create_placed(ta_registry *reg, const char *name, const ta_tile_shape *shape,
                                    ta_owner owner, const ta_placement *place, ta_tile **out,
                                    ta_error *err)
{
	char shown[TA_NAME_MAX + 4];
	*out = NULL;
	if (!ta_name_valid(name))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "invalid tile name '%s': use 1 to %d characters of "
		                    "[A-Za-z0-9_.-]",
		                    ta_name_for_message(name, shown, sizeof(shown)), TA_NAME_MAX);
	if (!ta_dtype_is_tile(shape->dtype))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "tile '%s': dtype %s (%d) is not a tile dtype (int32, uint32, "
		                    "int64, uint64, float32, float64, float16, bfloat16)",
		                    name, ta_dtype_name(shape->dtype), (int)shape->dtype);
	if (shape->rank < 1 || shape->rank > TA_MAX_RANK)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "tile '%s': rank %d is not between 1 and %d", name, shape->rank,
		                    TA_MAX_RANK);
	for (int a = 0; a < shape->rank; a++)
		if (shape->shape[a] < 1)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "tile '%s': extent %" PRId64
			                    " along axis %d is not at least 1",
			                    name, shape->shape[a], a);
	uint64_t bytes = ta_tile_bytes(shape);
	if (bytes == 0 || bytes > (uint64_t)SIZE_MAX)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "tile '%s': the shape has too many elements", name);
	if (reg->max_tile_bytes && bytes > reg->max_tile_bytes)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "tile '%s' needs %" PRIu64
		                    " bytes, over the per-tile limit of %" PRIu64
		                    " bytes (max_tile_bytes)",
		                    name, bytes, reg->max_tile_bytes);

	uint64_t counted = ta_registry_tile_cost(reg, bytes); /* bytes <= SIZE_MAX: no overflow */
	pthread_rwlock_wrlock(&reg->lock);
	ta_status st = TA_OK;
	ta_tile *tile = NULL;
	if (find_locked(reg, name, NULL))
		st = ta_error_set(err, TA_ALREADY_EXISTS, "tile '%s' already exists", name);
	else if (reg->max_tiles && reg->live >= reg->max_tiles)
		st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                  "tile '%s': %" PRIu64 " tiles exist, the limit (max_tiles) is "
		                  "%" PRIu64,
		                  name, reg->live, reg->max_tiles);
	else if (reg->max_total_bytes && (counted > reg->max_total_bytes ||
	                                  reg->total_bytes > reg->max_total_bytes - counted))
		st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                  "tile '%s' needs %" PRIu64 " bytes (%" PRIu64
		                  " of elements, the rest allocator overhead and bookkeeping) "
		                  "but %" PRIu64 " of the %" PRIu64
		                  " bytes of tile memory allowed (max_total_bytes) are in use",
		                  name, counted, bytes, reg->total_bytes, reg->max_total_bytes);
	else if (!(tile = ta_recpool_alloc(&reg->records)))
		st = ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	if (st != TA_OK) { /* (the message is formatted under the lock: a refusal only) */
		pthread_rwlock_unlock(&reg->lock);
		return st;
	}
	/* a record of the pool: its count stays 0 until it is linked below (a stale cache
	 * never takes it before) */
	strcpy(tile->name, name);
	tile->shape = *shape;
	tile->bytes = bytes;
	tile->mem = NULL;
	tile->ready = false;
	tile->reg = reg;
	tile->owner = owner;
	tile->counted = counted;
	reg->total_bytes += counted;
	reg->live++;
	atomic_store(&tile->refs, 2); /* the registry's and the caller's */
	atomic_store(&tile->stamp, ++reg->next_stamp);
	size_t b = name_hash(name) & (reg->nbuckets - 1);
	tile->next = reg->buckets[b];
	reg->buckets[b] = tile;
	reg->entries++;
	maybe_resize_locked(reg);
	pthread_rwlock_unlock(&reg->lock);

	ta_error aerr = {0};
	st = ta_backend_tile_alloc_placed(reg->backend, shape, (size_t)bytes, place, &tile->mem,
	                                  &aerr);
	if (st != TA_OK) {
		tile->mem = NULL;
		ta_registry_discard(tile);
		ta_tile_unref(tile);
		return ta_error_set(err, st, "tile '%s': cannot allocate %" PRIu64 " bytes: %s",
		                    name, bytes, aerr.msg);
	}
	*out = tile;
	return TA_OK;
}

void ta_registry_publish(ta_tile *tile)
{
	ta_registry *reg = tile->reg;
	/* the allocation's real footprint replaces the prediction counted at create */
	uint64_t exact =
	    TA_TILE_BOOKKEEPING + ta_backend_tile_footprint(reg->backend, tile->mem, tile->bytes);
	pthread_rwlock_wrlock(&reg->lock);
	if (!tile->ready) {
		tile->ready = true;
		reg->published++;
		reg->total_bytes = reg->total_bytes - tile->counted + exact;
		tile->counted = exact;
	}
	pthread_rwlock_unlock(&reg->lock);
}

/* Unlinks tile from the table; the lock is held. Returns true when it was linked. */
static bool unlink_locked(ta_registry *reg, ta_tile *tile)
{
	ta_tile **link = NULL;
	if (find_locked(reg, tile->name, &link) != tile)
		return false;
	*link = tile->next;
	tile->next = NULL;
	atomic_store(&tile->stamp, ++reg->next_stamp); /* cached lookups of it miss from now */
	reg->entries--;
	if (tile->ready)
		reg->published--;
	maybe_resize_locked(reg);
	return true;
}

void ta_registry_discard(ta_tile *tile)
{
	ta_registry *reg = tile->reg;
	pthread_rwlock_wrlock(&reg->lock);
	bool linked = unlink_locked(reg, tile);
	pthread_rwlock_unlock(&reg->lock);
	if (linked)
		ta_tile_unref(tile); /* the registry's reference */
}

ta_status ta_registry_get(ta_registry *reg, const char *name, ta_tile **out, ta_error *err)
{
	return ta_registry_get_as(reg, name, TA_OWNER_ANY, out, err);
}

/* The published tile named name that who may use (the lock held), NULL when none; *allowed
 * is false when there is one that who may not use. */
static ta_tile *find_usable_locked(ta_registry *reg, const char *name, ta_owner who, bool *allowed)
{
	ta_tile *tile = find_locked(reg, name, NULL);
	*allowed = !tile || !tile->ready || ta_tile_allowed(tile, who);
	return tile && tile->ready && *allowed ? tile : NULL;
}

/* The error of a lookup of name that found no usable tile (allowed: none at all; else
 * another identity's private tile). */
static ta_status not_usable(const char *name, bool allowed, ta_error *err)
{
	char shown[TA_NAME_MAX + 4];
	ta_name_for_message(name, shown, sizeof(shown));
	if (!allowed)
		return ta_error_set(err, TA_PERMISSION_DENIED,
		                    "tile '%s' is private to another client", shown);
	return ta_error_set(err, TA_NOT_FOUND, "no tile named '%s'", shown);
}

/* ta_registry_get_as; on success *stamp gets the tile's stamp (read under the lock). */
static ta_status get_locked_lookup(ta_registry *reg, const char *name, ta_owner who, ta_tile **out,
                                   uint64_t *stamp, ta_error *err)
{
	*out = NULL;
	bool allowed;
	pthread_rwlock_rdlock(&reg->lock);
	ta_tile *tile = find_usable_locked(reg, name, who, &allowed);
	if (tile) {
		atomic_fetch_add(&tile->refs, 1);
		*stamp = atomic_load(&tile->stamp);
	}
	pthread_rwlock_unlock(&reg->lock);
	if (!tile)
		return not_usable(name, allowed, err);
	*out = tile;
	return TA_OK;
}

ta_status ta_registry_get_as(ta_registry *reg, const char *name, ta_owner who, ta_tile **out,
                             ta_error *err)
{
	uint64_t stamp;
	return get_locked_lookup(reg, name, who, out, &stamp, err);
}

/* Takes a reference to the tile of cache when it is still the tile the table holds under
 * the cached name; NULL otherwise (nothing held). */
static ta_tile *cache_take(const ta_tile_cache *cache)
{
	ta_tile *tile = cache->tile;
	int refs = atomic_load_explicit(&tile->refs, memory_order_relaxed);
	do {
		if (refs <= 0) /* being freed, freed, or back in the pool */
			return NULL;
	} while (!atomic_compare_exchange_weak(&tile->refs, &refs, refs + 1));
	/* held now; a stamp unchanged since the lookup means never unlinked or reused since:
	 * every field below is the tile's */
	if (atomic_load(&tile->stamp) != cache->stamp) {
		ta_tile_unref(tile);
		return NULL;
	}
	return tile;
}

ta_status ta_registry_get_cached(ta_registry *reg, ta_tile_cache *cache, const char *name,
                                 ta_owner who, ta_tile **out, ta_error *err)
{
	if (cache->registry == reg->serial && strcmp(cache->name, name) == 0) {
		ta_tile *tile = cache_take(cache);
		if (tile && ta_tile_allowed(tile, who)) {
			*out = tile;
			return TA_OK;
		}
		if (tile)
			ta_tile_unref(tile); /* another identity's: the lookup below says so */
	}
	uint64_t stamp = 0;
	ta_status st = get_locked_lookup(reg, name, who, out, &stamp, err);
	if (st == TA_OK) {
		cache->registry = reg->serial;
		cache->tile = *out;
		cache->stamp = stamp;
		/* a name the table holds: at most TA_NAME_MAX characters */
		memcpy(cache->name, (*out)->name, sizeof(cache->name));
	}
	return st;
}

ta_status ta_registry_remove(ta_registry *reg, const char *name, ta_tile_info *info, ta_error *err)
{
	return ta_registry_remove_as(reg, name, TA_OWNER_ANY, info, err);
}

ta_status ta_registry_remove_as(ta_registry *reg, const char *name, ta_owner who,
                                ta_tile_info *info, ta_error *err)
{
	bool allowed;
	pthread_rwlock_wrlock(&reg->lock);
	ta_tile *tile = find_usable_locked(reg, name, who, &allowed);
	if (tile)
		unlink_locked(reg, tile);
	pthread_rwlock_unlock(&reg->lock);
	if (!tile)
		return not_usable(name, allowed, err);
	if (info)
		ta_tile_get_info(tile, info);
	ta_tile_unref(tile); /* the registry's reference */
	return TA_OK;
}

void ta_tile_unref(ta_tile *tile)
{
	if (tile && atomic_fetch_sub(&tile->refs, 1) == 1)
		tile_destroy(tile);
}

void ta_tile_get_info(const ta_tile *tile, ta_tile_info *info)
{
	memcpy(info->name, tile->name, sizeof(info->name));
	info->shape = tile->shape;
	info->bytes = tile->bytes;
	info->private_tile = tile->owner != TA_OWNER_PUBLIC;
	info->where[0] = '\0'; /* said only where there is a choice: several devices */
	if (tile->mem && ta_backend_device_count(tile->reg->backend) > 1) {
		ta_tile_where w;
		ta_tile_where_get(tile, &w);
		ta_tile_where_format(&w, info->where, sizeof(info->where));
	}
}

void ta_tile_where_get(const ta_tile *tile, ta_tile_where *w)
{
	ta_backend_tile_where(tile->reg->backend, tile->mem, &tile->shape, w);
}

ta_status ta_registry_list(ta_registry *reg, ta_tile_info **out, size_t *n, ta_error *err)
{
	bool more;
	return ta_registry_list_page_as(reg, TA_OWNER_ANY, "", SIZE_MAX, out, n, &more, err);
}

uint64_t ta_registry_record_bytes(ta_registry *reg)
{
	pthread_rwlock_rdlock(&reg->lock);
	uint64_t bytes = reg->records.resident * TA_RECPOOL_SLAB_BYTES;
	pthread_rwlock_unlock(&reg->lock);
	return bytes;
}

uint64_t ta_registry_tile_cost(ta_registry *reg, uint64_t bytes)
{
	return TA_TILE_BOOKKEEPING + ta_backend_tile_footprint(reg->backend, NULL, (size_t)bytes);
}

/* Sifts the entry at i of the max-heap h (n entries, by name) down to its place. */
static void heap_sift_down(const ta_tile **h, size_t n, size_t i)
{
	for (;;) {
		size_t big = i, l = 2 * i + 1, r = l + 1;
		if (l < n && strcmp(h[l]->name, h[big]->name) > 0)
			big = l;
		if (r < n && strcmp(h[r]->name, h[big]->name) > 0)
			big = r;
		if (big == i)
			return;
		const ta_tile *t = h[i];
		h[i] = h[big];
		h[big] = t;
		i = big;
	}
}

/* Makes the n entries of h a max-heap (by name). */
static void heap_make(const ta_tile **h, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		heap_sift_down(h, n, i);
}

ta_status ta_registry_list_page_as(ta_registry *reg, ta_owner who, const char *after, size_t limit,
                                   ta_tile_info **out, size_t *n, bool *more, ta_error *err)
{
	*out = NULL;
	*n = 0;
	*more = false;
	if (!after)
		after = "";
	if (limit < 1)
		limit = 1;
	pthread_rwlock_rdlock(&reg->lock);
	size_t cap = reg->published < limit ? reg->published : limit;
	const ta_tile **heap = cap ? malloc(cap * sizeof(*heap)) : NULL;
	if (cap && !heap) {
		pthread_rwlock_unlock(&reg->lock);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory listing %zu tiles",
		                    cap);
	}
	/* the cap names after the cursor that sort first: a max-heap whose top is the one
	 * the next smaller name replaces */
	size_t k = 0;
	for (size_t b = 0; b < reg->nbuckets; b++)
		for (const ta_tile *t = reg->buckets[b]; t; t = t->next) {
			if (!t->ready || !ta_tile_allowed(t, who) || strcmp(t->name, after) <= 0)
				continue;
			if (k < cap) {
				heap[k++] = t;
				if (k == cap)
					heap_make(heap, k);
				continue;
			}
			*more = true;
			if (cap && strcmp(t->name, heap[0]->name) < 0) {
				heap[0] = t;
				heap_sift_down(heap, k, 0);
			}
		}
	heap_make(heap, k); /* (already one when k reached cap); then heapsort, by name */
	for (size_t i = k; i-- > 1;) {
		const ta_tile *t = heap[0];
		heap[0] = heap[i];
		heap[i] = t;
		heap_sift_down(heap, i, 0);
	}
	ta_tile_info *infos = k ? malloc(k * sizeof(*infos)) : NULL;
	for (size_t i = 0; infos && i < k; i++)
		ta_tile_get_info(heap[i], &infos[i]);
	pthread_rwlock_unlock(&reg->lock);
	free(heap);
	if (k && !infos) {
		*more = false;
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory listing %zu tiles",
		                    k);
	}
	*out = infos;
	*n = k;
	return TA_OK;
}

void ta_registry_stats(ta_registry *reg, uint32_t *tiles, uint64_t *bytes)
{
	pthread_rwlock_rdlock(&reg->lock);
	*tiles = (uint32_t)reg->published;
	*bytes = reg->total_bytes;
	pthread_rwlock_unlock(&reg->lock);
}
