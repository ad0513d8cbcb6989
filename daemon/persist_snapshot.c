/* persist_snapshot.c: snapshots of tileatomd's tiles (see persist.h; the file format is in
 * persist_int.h): writing one (ta_persist_snapshot), the compactor thread that writes one
 * whenever the log passes compact_size, and the tile data moved through the backend (also
 * used by persist_load.c to load one).
 *
 * A snapshot holds every stripe alone, so no mutation is half done, while the tiles are
 * read through the backend (on CUDA a copy from the device) into the temporary snapshot and
 * the writer closes the log and starts the next one at seq + 1; then the snapshot is
 * fsynced and renamed and older logs are removed. A crash at any point leaves either the
 * old snapshot and every log, or the new snapshot and logs it partly covers (skipped). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "persist_int.h"
#include "registry.h"
#include "ta_backend.h"

/* ---- tile data through the backend ---- */

/* Loads (LOAD, into buf) or stores (STORE) rows [row0, row0 + rows) of tile via the backend. */
static ta_status tile_rows(ta_backend *be, ta_tile *tile, int64_t row0, int64_t rows, ta_op op,
                           void *buf, size_t nbytes, ta_error *err)
{
	ta_request req;
	ta_request_region(&req, TA_FAMILY_MEMORY, op);
	req.has_region = true;
	req.region_rank = tile->shape.rank;
	for (int a = 0; a < tile->shape.rank; a++) {
		req.region_origin[a] = a == 0 ? row0 : 0;
		req.region_shape[a] = a == 0 ? rows : tile->shape.shape[a];
	}
	if (op == TA_OP_LOAD) {
		req.want_old = true;
	} else {
		req.values.present = true;
		req.values.dtype = tile->shape.dtype;
		req.values.rank = tile->shape.rank;
		for (int a = 0; a < tile->shape.rank; a++)
			req.values.shape[a] = req.region_shape[a];
		req.values.data = buf;
		req.values.nbytes = nbytes;
	}
	ta_plan plan;
	ta_status st = ta_plan_build(&plan, &tile->shape, &req, err);
	if (st != TA_OK)
		return st;
	if (op == TA_OP_LOAD)
		plan.old_out = buf;
	ta_result result = {0, 0};
	return ta_backend_apply(be, tile->mem, (size_t)tile->bytes, &plan, &result, err);
}

ta_status persist_tile_data(ta_backend *be, ta_tile *tile, ta_op op, uint8_t **chunk, size_t *cap,
                            bool (*io)(void *ctx, void *buf, size_t n), void *ctx, ta_error *err)
{
	int64_t extent = tile->shape.shape[0];
	uint64_t row_bytes = tile->bytes / (uint64_t)extent;
	int64_t step =
	    row_bytes && CHUNK_BYTES / row_bytes > 1 ? (int64_t)(CHUNK_BYTES / row_bytes) : 1;
	for (int64_t row = 0; row < extent; row += step) {
		int64_t rows = extent - row < step ? extent - row : step;
		size_t n = (size_t)((uint64_t)rows * row_bytes);
		if (!persist_grow(chunk, cap, n, n, 0))
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
			                    "out of memory for %zu bytes of tile '%s'", n,
			                    tile->name);
		if (op == TA_OP_STORE && !io(ctx, *chunk, n))
			return TA_OK;
		ta_status st = tile_rows(be, tile, row, rows, op, *chunk, n, err);
		if (st != TA_OK)
			return st;
		if (op == TA_OP_LOAD && !io(ctx, *chunk, n))
			return TA_OK;
	}
	return TA_OK;
}

/* ---- snapshot writing ---- */

/* A snapshot being written: the stream and its running checksum. */
typedef struct snap_out {
	FILE *f;          /* the temporary file */
	XXH3_state_t *hs; /* running checksum of the bytes so far */
	uint64_t bytes;   /* bytes so far */
	int err;          /* first errno, 0: none */
} snap_out;

/* Writes n bytes to the snapshot. */
static void snap_put(snap_out *o, const void *data, size_t n)
{
	if (o->err || n == 0)
		return;
	if (fwrite(data, 1, n, o->f) != n)
		o->err = errno ? errno : EIO;
	else if (XXH3_64bits_update(o->hs, data, n) != XXH_OK)
		o->err = ENOMEM;
	else
		o->bytes += n;
}

/* persist_tile_data's io for a snapshot: writes n bytes; false once writing failed. */
static bool snap_io(void *o, void *buf, size_t n)
{
	snap_put(o, buf, n);
	return !((snap_out *)o)->err;
}

/* Writes the low n bytes of v (little-endian) to the snapshot. */
static void snap_le(snap_out *o, uint64_t v, size_t n)
{
	uint8_t b[8];
	put_u64(b, v);
	snap_put(o, b, n);
}

/* Writes one tile: its header, where it lives and its elements. */
static ta_status snap_tile(ta_persist *p, snap_out *o, ta_tile *tile, uint8_t **chunk, size_t *cap,
                           ta_error *err)
{
	size_t nl = strlen(tile->name);
	snap_le(o, nl, 2);
	snap_put(o, tile->name, nl);
	snap_le(o, (uint64_t)tile->owner, 8);
	snap_le(o, (uint32_t)tile->shape.dtype, 4);
	snap_le(o, (uint32_t)tile->shape.rank, 4);
	for (int a = 0; a < tile->shape.rank; a++)
		snap_le(o, (uint64_t)tile->shape.shape[a], 8);
	snap_le(o, tile->bytes, 8);
	ta_tile_where w;
	ta_tile_where_get(tile, &w);
	snap_le(o, (uint32_t)w.nparts, 4);
	for (int i = 0; i < w.nparts; i++) {
		snap_le(o, (uint32_t)w.part[i].device, 4);
		snap_le(o, (uint64_t)w.part[i].first, 8);
		snap_le(o, (uint64_t)w.part[i].end, 8);
	}
	return persist_tile_data(p->backend, tile, TA_OP_LOAD, chunk, cap, snap_io, o, err);
}

/* Writes every tile into the open temporary snapshot (every stripe held). */
static ta_status snap_write_tiles(ta_persist *p, snap_out *o, uint64_t seq, uint32_t *ntiles,
                                  ta_error *err)
{
	ta_tile_info *infos = NULL;
	size_t n = 0;
	ta_status st = ta_registry_list(p->registry, &infos, &n, err);
	if (st != TA_OK)
		return st;
	snap_put(o, SNAP_MAGIC, MAGIC_LEN);
	snap_le(o, seq, 8);
	snap_le(o, (uint32_t)n, 4);
	uint8_t *chunk = NULL;
	size_t cap = 0;
	for (size_t i = 0; i < n && st == TA_OK; i++) {
		ta_tile *tile = NULL;
		st = ta_registry_get(p->registry, infos[i].name, &tile, err);
		if (st != TA_OK)
			break;
		st = snap_tile(p, o, tile, &chunk, &cap, err);
		ta_tile_unref(tile);
	}
	free(chunk);
	free(infos);
	*ntiles = (uint32_t)n;
	return st;
}

/* Removes the logs that start before first (covered by the snapshot); returns their bytes. */
static uint64_t remove_old_logs(ta_persist *p, uint64_t first)
{
	uint64_t removed = 0;
	log_file *logs = NULL;
	size_t n = 0;
	ta_error err = {0};
	if (persist_list_logs(p, &logs, &n, &err) != TA_OK) {
		ta_log(TA_LOG_WARNING, "cannot remove old logs: %s", err.msg);
		return 0;
	}
	for (size_t i = 0; i < n && logs[i].first < first; i++) {
		struct stat sb;
		if (fstatat(p->dir_fd, logs[i].name, &sb, 0) == 0)
			removed += (uint64_t)sb.st_size;
		if (unlinkat(p->dir_fd, logs[i].name, 0) != 0)
			ta_log(TA_LOG_WARNING, "cannot remove %s/%s: %s", p->dir, logs[i].name,
			       strerror(errno));
	}
	free(logs);
	if (fsync(p->dir_fd) != 0)
		ta_log(TA_LOG_WARNING, "cannot fsync %s: %s", p->dir, strerror(errno));
	return removed;
}

bool ta_persist_may_snapshot(ta_owner who)
{
	return who == TA_OWNER_ANY || who == TA_OWNER_SECRET || who == 0 ||
	       who == (ta_owner)geteuid();
}

ta_status ta_persist_snapshot(ta_persist *p, ta_persist_snapinfo *info, ta_error *err)
{
	memset(info, 0, sizeof(*info));
	pthread_mutex_lock(&p->snap_mu);
	ta_persist_hold hold;
	ta_status st = ta_persist_run_lock(p, NULL, NULL, -1, &hold, err);
	if (st != TA_OK) {
		pthread_mutex_unlock(&p->snap_mu);
		return st;
	}
	pthread_mutex_lock(&p->mu);
	uint64_t seq = p->next_seq - 1;
	pthread_mutex_unlock(&p->mu);

	snap_out o = {NULL, XXH3_createState(), 0, 0};
	int fd = openat(p->dir_fd, SNAP_TMP_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	o.f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	if (!o.f) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		st = ta_error_set(err, TA_UNAVAILABLE, "cannot create %s/%s: %s", p->dir,
		                  SNAP_TMP_NAME, strerror(e));
	} else if (!o.hs || XXH3_64bits_reset(o.hs) != XXH_OK) {
		st = ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory for a checksum");
	} else {
		st = snap_write_tiles(p, &o, seq, &info->tiles, err);
	}
	if (st == TA_OK) {
		/* the records up to seq are in the snapshot: the writer starts the next log */
		pthread_mutex_lock(&p->mu);
		p->rotate = true;
		pthread_cond_signal(&p->wake);
		while (p->rotate)
			pthread_cond_wait(&p->rotated, &p->mu);
		pthread_mutex_unlock(&p->mu);
		if (atomic_load(&p->failed))
			st = ta_error_set(err, TA_UNAVAILABLE, "the data log of %s failed", p->dir);
	}
	ta_persist_unlock(p, &hold);

	if (st == TA_OK) {
		snap_le(&o, (uint32_t)XXH3_64bits_digest(o.hs), 4);
		if (!o.err && fflush(o.f) != 0)
			o.err = errno;
		if (!o.err && fsync(fileno(o.f)) != 0)
			o.err = errno;
	}
	if (o.f && fclose(o.f) != 0 && !o.err)
		o.err = errno;
	XXH3_freeState(o.hs);
	if (st == TA_OK && !o.err && renameat(p->dir_fd, SNAP_TMP_NAME, p->dir_fd, SNAP_NAME) != 0)
		o.err = errno;
	if (st == TA_OK && !o.err && fsync(p->dir_fd) != 0)
		o.err = errno;
	if (st == TA_OK && o.err)
		st = ta_error_set(err, TA_UNAVAILABLE, "cannot write the snapshot %s/%s: %s",
		                  p->dir, SNAP_TMP_NAME, strerror(o.err));
	if (st != TA_OK) {
		unlinkat(p->dir_fd, SNAP_TMP_NAME, 0);
		pthread_mutex_unlock(&p->snap_mu);
		return st;
	}
	pthread_mutex_lock(&p->mu);
	uint64_t first = p->log_first;
	pthread_mutex_unlock(&p->mu);
	info->bytes = o.bytes;
	info->seq = seq;
	info->log_removed = remove_old_logs(p, first);
	pthread_mutex_unlock(&p->snap_mu);
	ta_log(TA_LOG_INFO,
	       "snapshot: %" PRIu32 " tiles, %" PRIu64 " bytes, through record %" PRIu64
	       "; %" PRIu64 " bytes of logs removed",
	       info->tiles, info->bytes, info->seq, info->log_removed);
	return TA_OK;
}

void *persist_compactor_main(void *arg)
{
	ta_persist *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->snap_wanted && !p->stop)
			pthread_cond_wait(&p->snap_cond, &p->mu);
		if (p->stop)
			break;
		p->snap_wanted = false;
		uint64_t size = p->log_bytes;
		pthread_mutex_unlock(&p->mu);
		ta_persist_snapinfo info;
		ta_error err = {0};
		if (ta_persist_snapshot(p, &info, &err) == TA_OK)
			ta_log(TA_LOG_NOTICE,
			       "log reached %" PRIu64
			       " bytes: compacted into a snapshot of %" PRIu32 " tiles (%" PRIu64
			       " bytes, through record %" PRIu64 ")",
			       size, info.tiles, info.bytes, info.seq);
		else
			ta_log(TA_LOG_ERR, "automatic compaction failed: %s", err.msg);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}
