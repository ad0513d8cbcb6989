/* registry.h: the daemon's named tiles. A tile is looked up by name, used by a request
 * through a counted reference, and destroyed by name; its memory is freed only when the
 * last reference goes, so destroying a tile while requests use it is safe (they finish on
 * the old memory, new lookups see NOT_FOUND at once).
 *
 * Creation is two-step so that allocation and filling run outside the lock: create
 * reserves the name and the bytes (the tile is "pending": invisible to lookups, but its
 * name is taken), then publish makes it visible, or discard gives name and bytes back.
 *
 * Thread-safety: every function may be called from any thread; one read-write lock guards
 * the table and the byte counters (lookups read-lock it). A thread may keep its last lookup
 * in a ta_tile_cache (ta_registry_get_cached): the next lookup of the same name takes no
 * lock and hashes nothing, and still never hands out a tile that was removed since. Limits: bytes
 * per tile, bytes of all tiles together (each tile counted as the memory it really takes:
 * the backend's footprint of its allocation and TA_TILE_BOOKKEEPING) and the number of tiles
 * (RESOURCE_EXHAUSTED), duplicate names (ALREADY_EXISTS), unknown names (NOT_FOUND).
 *
 * Ownership: a tile is public (owner TA_OWNER_PUBLIC) or private to one identity (a uid, or
 * TA_OWNER_SECRET: the holder of the daemon's auth secret). The _as functions take the
 * caller's identity: a private tile of another identity is PERMISSION_DENIED to get and
 * remove and left out of list. The functions without _as act for TA_OWNER_ANY (the daemon
 * itself and in-process tools), which sees every tile. */
#ifndef TA_DAEMON_REGISTRY_H
#define TA_DAEMON_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ta_backend.h"
#include "ta_plan.h"

typedef struct ta_registry ta_registry;

/* An identity: a uid (0..UINT32_MAX), or one of the values below. */
typedef int64_t ta_owner;
/* Owner of a public tile; identity of a caller nobody vouches for (unauthenticated TCP). */
#define TA_OWNER_PUBLIC ((ta_owner)-1)
/* Caller identity that may use every tile (the daemon itself, in-process tools). */
#define TA_OWNER_ANY ((ta_owner)-2)
/* The holder of the daemon's auth secret (an authenticated TCP client). */
#define TA_OWNER_SECRET ((ta_owner)1 << 32)
/* Bytes of one tile record (its slot in the registry's record pool, recpool.h). */
#define TA_TILE_RECORD_BYTES (((uint64_t)sizeof(ta_tile) + 63) / 64 * 64)
/* The tile's share of the hash table: the table holds between 1 and 4 buckets (pointers)
 * per tile (doubled above 1, halved below 1/4); 2 is what it holds after a doubling. */
#define TA_TILE_HASH_BYTES ((uint64_t)2 * sizeof(void *))
/* Bookkeeping bytes counted for each tile besides its memory: the record (the name is in
 * it) and the hash table share. The memory itself counts as the backend's footprint of the
 * allocation (ta_backend_tile_footprint: the CPU backend's heap chunk with its alignment
 * slack, 192 bytes for a one-element tile), so that a one-element tile counts 464 bytes. */
#define TA_TILE_BOOKKEEPING (TA_TILE_RECORD_BYTES + TA_TILE_HASH_BYTES)

/* One tile. Fields other than refs and ready are immutable once created. */
typedef struct ta_tile {
	char name[TA_NAME_MAX + 1]; /* the tile's name */
	ta_tile_shape shape;        /* dtype, rank, extents */
	uint64_t bytes;             /* bytes of tile memory */
	void *mem;                  /* backend memory (host or device) */
	bool ready;                 /* published: visible to lookups (guarded by the lock) */
	ta_owner owner;             /* TA_OWNER_PUBLIC, or the identity it is private to */
	ta_registry *reg;           /* the registry that owns the tile */
	struct ta_tile *next;       /* next tile in the same hash bucket */
	atomic_uint_fast64_t stamp; /* a value of the registry's that no other state of any
	                               record ever had: a new one when the record is linked
	                               into the table and when it leaves it (ta_tile_cache) */
	uint8_t refs_gap[64];       /* keeps refs, written by every request of every thread, off
	                               the cache lines of the fields above, which they read */
	atomic_int refs;            /* the registry's reference (while named) + one per user */
	uint64_t counted;           /* bytes it adds to the registry's total (bookkeeping and
	                               footprint; guarded by the lock) */
} ta_tile;

/* A thread's last successful lookup, for ta_registry_get_cached. It holds no reference:
 * the tile's memory still goes as soon as the tile is destroyed and unused (the record's
 * memory stays readable until the registry is freed, recpool.h, so that reading its stamp
 * stays safe). All zero: empty. One thread uses it at a time. */
typedef struct ta_tile_cache {
	uint64_t registry;          /* serial of the registry it was filled from (0: empty) */
	ta_tile *tile;              /* the tile that name gave */
	uint64_t stamp;             /* the tile's stamp then */
	char name[TA_NAME_MAX + 1]; /* the name looked up */
} ta_tile_cache;

/* Bytes of ta_tile_info.where (a longer text is cut). */
#define TA_WHERE_TEXT 160

/* What a tile is, copied out for list and describe. */
typedef struct ta_tile_info {
	char name[TA_NAME_MAX + 1]; /* the tile's name */
	ta_tile_shape shape;        /* dtype, rank, extents */
	uint64_t bytes;             /* bytes of tile memory */
	bool private_tile;          /* private to its creator */
	char where[TA_WHERE_TEXT];  /* where it lives (ta_tile_where_format): "0", or
	                               "0:[0,3) 1:[3,5)" for a sharded tile; "" on a
	                               backend with one device */
} ta_tile_info;

/* Creates an empty registry allocating from backend; a limit of 0 means unlimited.
 * Returns NULL with err set when memory is short. */
ta_registry *ta_registry_new(ta_backend *backend, uint64_t max_tile_bytes, uint64_t max_total_bytes,
                             ta_error *err);
/* Sets the most tiles the registry holds at once (0: unlimited, the default). */
void ta_registry_set_max_tiles(ta_registry *reg, uint64_t max_tiles);
/* Frees every tile and the registry. No reference may be held any more. */
void ta_registry_free(ta_registry *reg);

/* Checks name, dtype, shape and limits, reserves the name and the bytes, and allocates
 * zeroed tile memory. On success *out is a pending tile holding a reference for the
 * caller: fill it, then ta_registry_publish or ta_registry_discard, then ta_tile_unref.
 * Errors: INVALID_ARGUMENT (bad name, dtype, rank or extent), ALREADY_EXISTS,
 * RESOURCE_EXHAUSTED (a limit, or the backend is out of memory). */
ta_status ta_registry_create(ta_registry *reg, const char *name, const ta_tile_shape *shape,
                             ta_tile **out, ta_error *err);
/* ta_registry_create of a tile owned by owner (TA_OWNER_PUBLIC: a public tile), its memory
 * placed as place says (NULL or TA_PLACE_DEFAULT: the backend's default placement);
 * INVALID_ARGUMENT for a device the backend lacks. */
ta_status ta_registry_create_placed(ta_registry *reg, const char *name, const ta_tile_shape *shape,
                                    ta_owner owner, const ta_placement *place, ta_tile **out,
                                    ta_error *err);
/* Makes a pending tile visible to lookups. */
void ta_registry_publish(ta_tile *tile);
/* Removes a pending tile from the table (its name becomes free again); the caller still
 * drops its own reference with ta_tile_unref, which frees the memory. */
void ta_registry_discard(ta_tile *tile);

/* Looks a published tile up by name; on success *out holds a new reference (drop it with
 * ta_tile_unref). Returns TA_OK or TA_NOT_FOUND naming the tile. */
ta_status ta_registry_get(ta_registry *reg, const char *name, ta_tile **out, ta_error *err);
/* ta_registry_get for caller who: PERMISSION_DENIED for another identity's private tile. */
ta_status ta_registry_get_as(ta_registry *reg, const char *name, ta_owner who, ta_tile **out,
                             ta_error *err);
/* ta_registry_get_as through cache (the calling thread's): when cache holds name, the tile
 * is still the one the table holds under it (its stamp unchanged) and who may use it, it is
 * handed out with a new reference without the lock; otherwise the lookup is
 * ta_registry_get_as's (same results, same errors) and a success refills cache. */
ta_status ta_registry_get_cached(ta_registry *reg, ta_tile_cache *cache, const char *name,
                                 ta_owner who, ta_tile **out, ta_error *err);
/* Removes a published tile by name; its memory goes when the last user is done. When
 * info is not NULL it receives what the tile was. Returns TA_OK or TA_NOT_FOUND. */
ta_status ta_registry_remove(ta_registry *reg, const char *name, ta_tile_info *info, ta_error *err);
/* ta_registry_remove for caller who: PERMISSION_DENIED for another identity's private tile. */
ta_status ta_registry_remove_as(ta_registry *reg, const char *name, ta_owner who,
                                ta_tile_info *info, ta_error *err);
/* True when who may use tile (a public tile, the identity it is private to, or any). */
static inline bool ta_tile_allowed(const ta_tile *tile, ta_owner who)
{
	return tile->owner == TA_OWNER_PUBLIC || who == TA_OWNER_ANY || who == tile->owner;
}
/* True when tile, which the caller holds a reference to, is still the record linked under
 * its name with stamp (nothing destroyed or re-created it since) and who may use it: the
 * caller may then use it for one more request without taking another reference (inline:
 * once a request of a run of repeats). */
static inline bool ta_tile_still(const ta_tile *tile, uint64_t stamp, ta_owner who)
{
	return atomic_load_explicit(&tile->stamp, memory_order_acquire) == stamp &&
	       ta_tile_allowed(tile, who);
}
/* Drops one reference; the last one frees the tile memory and gives its bytes back. */
void ta_tile_unref(ta_tile *tile);
/* Copies what a tile is into *info. */
void ta_tile_get_info(const ta_tile *tile, ta_tile_info *info);
/* Where an allocated tile's memory lives, in full (one part on device 0 on a backend with
 * one device). */
void ta_tile_where_get(const ta_tile *tile, ta_tile_where *w);

/* One page of a listing: the first (by name) limit (>= 1) of the published tiles caller
 * who may see whose names sort after after ("" or NULL: from the first), sorted by name,
 * into a malloc'd array (*out; NULL when there are none) of *n entries. *more is true when
 * such tiles remain after the last one given (the next page starts after its name). A
 * scan page after page sees every tile that exists from its first page to its last once
 * (names only grow from page to page: never twice); a tile created or destroyed meanwhile
 * may or may not be listed. Returns TA_OK or RESOURCE_EXHAUSTED. */
ta_status ta_registry_list_page_as(ta_registry *reg, ta_owner who, const char *after, size_t limit,
                                   ta_tile_info **out, size_t *n, bool *more, ta_error *err);
/* Lists the published tiles sorted by name into a malloc'd array (*out; NULL when there
 * are none) of *n entries. Returns TA_OK or RESOURCE_EXHAUSTED. */
ta_status ta_registry_list(ta_registry *reg, ta_tile_info **out, size_t *n, ta_error *err);
/* Reports the number of published tiles and the bytes of tile memory held, bookkeeping
 * included (tiles still in use after destroy included). */
void ta_registry_stats(ta_registry *reg, uint32_t *tiles, uint64_t *bytes);
/* Bytes of memory the tile records hold now (the record pool's resident slabs): what the
 * records of destroyed tiles keep is given back (recpool.h). */
uint64_t ta_registry_record_bytes(ta_registry *reg);
/* The bytes a published tile of bytes bytes counts (TA_TILE_BOOKKEEPING and the backend's
 * footprint of such an allocation, as predicted before it is made). */
uint64_t ta_registry_tile_cost(ta_registry *reg, uint64_t bytes);

/* Writes name into buf (size >= TA_NAME_MAX + 4) for messages: at most TA_NAME_MAX
 * characters, non-printable bytes as '?', "..." when cut. Returns buf. */
const char *ta_name_for_message(const char *name, char *buf, size_t size);

#endif /* TA_DAEMON_REGISTRY_H */
