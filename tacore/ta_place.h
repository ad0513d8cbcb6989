/* ta_place.h: where a tile lives when a backend has several devices (GPUs, or the CPU
 * backend's memory pools): the placement a create asks for (a device, `auto`, `shard`) and
 * the parts a tile ended up in (a device and a range of its first axis each), with the one
 * parser and the one formatter of both that the daemon, the library and the CLI share. */
#ifndef TA_PLACE_H
#define TA_PLACE_H

#include "ta_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most devices one backend composes (ta_multi_backend_new) and parts a tile has. */
#define TA_MAX_DEVICES 64

/* What a placement asks for. */
typedef enum ta_place_kind {
	TA_PLACE_DEFAULT = 0, /* the daemon's default placement (--placement) */
	TA_PLACE_DEVICE,      /* the whole tile on one device (ta_placement.device) */
	TA_PLACE_AUTO,        /* the whole tile on the device with the most free memory */
	TA_PLACE_SHARD,       /* split by ranges of the first axis over several devices */
	TA_PLACE_PARTS,       /* exactly the parts ta_placement.parts names (a tile restored
	                         where it lived, from a where text: ta_tile_where_parse) */
} ta_place_kind;

struct ta_tile_where;

/* A placement request. */
typedef struct ta_placement {
	ta_place_kind kind;                /* what is asked */
	int device;                        /* TA_PLACE_DEVICE: the device ordinal */
	int shards;                        /* TA_PLACE_SHARD: devices to split over, 0 = every
	                                      device */
	const struct ta_tile_where *parts; /* TA_PLACE_PARTS: the parts (not owned) */
} ta_placement;

/* One part of a placed tile: rows [first, end) of its first axis on one device. */
typedef struct ta_tile_part {
	int device;    /* device ordinal */
	int64_t first; /* first row (index of the first axis) held */
	int64_t end;   /* one past the last row held */
} ta_tile_part;

/* Where a tile lives: its parts in row order (one part: the whole tile on one device). */
typedef struct ta_tile_where {
	int nparts;                        /* parts in use, 1..TA_MAX_DEVICES */
	ta_tile_part part[TA_MAX_DEVICES]; /* the parts, rows ascending */
} ta_tile_where;

/* Parses a placement: "" or "default", "auto", "shard", "shard:N" (N >= 1 devices) or a
 * device ordinal "N" (0..TA_MAX_DEVICES-1). INVALID_ARGUMENT naming the text otherwise. */
ta_status ta_placement_parse(const char *text, ta_placement *out, ta_error *err);

/* Writes a placement as ta_placement_parse reads it ("default" for TA_PLACE_DEFAULT) into
 * buf (n bytes, NUL-terminated, truncated to fit). Returns buf. */
char *ta_placement_format(const ta_placement *p, char *buf, size_t n);

/* Writes where a tile lives: "0" for a tile wholly on device 0, "0:[0,3) 1:[3,5)" for a
 * sharded one (device:[first,end) per part), into buf (n bytes, NUL-terminated, truncated to
 * fit). Returns buf. */
char *ta_tile_where_format(const ta_tile_where *w, char *buf, size_t n);

/* Bytes that hold any text ta_tile_where_format writes, uncut (TA_MAX_DEVICES parts of
 * "DD:[F,E) ", at most 45 bytes each with 19-digit rows, and the NUL). */
#define TA_WHERE_TEXT_MAX (TA_MAX_DEVICES * 48)

/* Checks that w's parts are whole: 1..TA_MAX_DEVICES parts, each on a device ordinal
 * 0..TA_MAX_DEVICES-1 and at least one row long, in row order, together rows [0, rows)
 * exactly. INVALID_ARGUMENT naming the first problem otherwise. */
ta_status ta_tile_where_check(const ta_tile_where *w, int64_t rows, ta_error *err);

/* Parses what ta_tile_where_format writes, for a tile of rows rows (its first axis): a
 * device ordinal "N" (the whole tile there) or the parts "D:[F,E) D:[F,E) ...", which
 * ta_tile_where_check must accept. INVALID_ARGUMENT naming the text otherwise. */
ta_status ta_tile_where_parse(const char *text, int64_t rows, ta_tile_where *out, ta_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TA_PLACE_H */
