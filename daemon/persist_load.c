/* persist_load.c: startup recovery of tileatomd's tiles (see persist.h; the file format is
 * in persist_int.h): opens and locks the data directory, loads the snapshot, replays the logs
 * through the host's callback, drops a torn last record, and opens the newest log for
 * appending. Any other damage refuses the start with a message naming the file and the
 * offset. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "persist_int.h"
#include "registry.h"
#include "ta_backend.h"

/* ---- loading ---- */

/* A file being read with a running checksum and offset. */
typedef struct rd_file {
	FILE *f;          /* the stream */
	const char *path; /* its path, for messages */
	uint64_t off;     /* bytes read so far */
	XXH3_state_t *hs; /* running checksum of them (NULL: none kept) */
} rd_file;

/* Reads exactly n bytes; returns how many were read (n unless the file ends). */
static size_t rd(rd_file *r, void *buf, size_t n)
{
	size_t got = n ? fread(buf, 1, n, r->f) : 0;
	if (r->hs && got)
		(void)XXH3_64bits_update(r->hs, buf, got); /* fails only on bad arguments */
	r->off += got;
	return got;
}

/* Loads the snapshot (when there is one) into the registry; *seq: its last record. */
static ta_status load_snapshot(ta_persist *p, uint64_t *seq, ta_error *err)
{
	*seq = 0;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", p->dir, SNAP_NAME);
	int fd = openat(p->dir_fd, SNAP_NAME, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return TA_OK;
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s: %s", path,
		                    strerror(errno));
	}
	rd_file r = {fdopen(fd, "rb"), path, 0, XXH3_createState()};
	if (!r.f || !r.hs || XXH3_64bits_reset(r.hs) != XXH_OK) {
		int e = r.f ? ENOMEM : errno;
		if (r.f)
			fclose(r.f);
		else
			close(fd);
		XXH3_freeState(r.hs);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot read %s: %s", path, strerror(e));
	}
	ta_status st = TA_OK;
	uint8_t h[20];
	uint8_t *chunk = NULL;
	size_t chunk_cap = 0;
	ta_tile *tile = NULL;
	if (rd(&r, h, 20) < 20 || memcmp(h, SNAP_MAGIC, MAGIC_LEN) != 0) {
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: not a tileatom snapshot (bad or short header at offset 0)",
		                  path);
		goto out;
	}
	*seq = get_u64(h + 8);
	uint32_t ntiles = get_u32(h + 16);
	for (uint32_t i = 0; i < ntiles; i++) {
		uint64_t at = r.off;
		char name[TA_NAME_MAX + 1];
		ta_tile_shape shape;
		memset(&shape, 0, sizeof(shape));
		if (rd(&r, h, 2) < 2)
			goto short_file;
		uint16_t nl = get_u16(h);
		if (nl == 0 || nl > TA_NAME_MAX) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: tile %" PRIu32 " at offset %" PRIu64
			                  ": name length %u is impossible (damaged file)",
			                  path, i, at, nl);
			goto out;
		}
		if (rd(&r, name, nl) < nl || rd(&r, h, 16) < 16)
			goto short_file;
		name[nl] = '\0';
		ta_owner owner = (ta_owner)get_u64(h);
		shape.dtype = (ta_dtype)get_u32(h + 8);
		shape.rank = (int)get_u32(h + 12);
		if (shape.rank < 1 || shape.rank > TA_MAX_RANK) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: tile %" PRIu32 " at offset %" PRIu64
			                  ": rank %d is impossible (damaged file)",
			                  path, i, at, shape.rank);
			goto out;
		}
		for (int a = 0; a < shape.rank; a++) {
			if (rd(&r, h, 8) < 8)
				goto short_file;
			shape.shape[a] = (int64_t)get_u64(h);
		}
		if (rd(&r, h, 8) < 8)
			goto short_file;
		uint64_t bytes = get_u64(h);
		ta_error cerr = {0};
		st = ta_registry_create_as(p->registry, name, &shape, owner, &tile, &cerr);
		if (st != TA_OK) {
			st = ta_error_set(err, st, "%s: tile %" PRIu32 " at offset %" PRIu64 ": %s",
			                  path, i, at, cerr.msg);
			goto out;
		}
		if (tile->bytes != bytes) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: tile '%s' at offset %" PRIu64 ": %" PRIu64
			                  " bytes recorded, its shape holds %" PRIu64
			                  " (damaged file)",
			                  path, tile->name, at, bytes, tile->bytes);
			goto out;
		}
		int64_t step = persist_chunk_rows(tile);
		uint64_t row_bytes = tile->bytes / (uint64_t)tile->shape.shape[0];
		for (int64_t row = 0; row < tile->shape.shape[0]; row += step) {
			int64_t rows =
			    tile->shape.shape[0] - row < step ? tile->shape.shape[0] - row : step;
			size_t n = (size_t)((uint64_t)rows * row_bytes);
			if (n > chunk_cap) {
				uint8_t *nc = realloc(chunk, n);
				if (!nc) {
					st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
					                  "%s: out of memory loading tile '%s'",
					                  path, tile->name);
					goto out;
				}
				chunk = nc;
				chunk_cap = n;
			}
			if (rd(&r, chunk, n) < n)
				goto short_file;
			st = persist_tile_rows(p->backend, tile, row, rows, TA_OP_STORE, chunk, n,
			                       err);
			if (st != TA_OK)
				goto out;
		}
		ta_registry_publish(tile);
		ta_tile_unref(tile);
		tile = NULL;
	}
	uint32_t computed = (uint32_t)XXH3_64bits_digest(r.hs);
	uint64_t at = r.off;
	if (rd(&r, h, 4) < 4)
		goto short_file;
	if (get_u32(h) != computed) {
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: checksum mismatch at offset %" PRIu64 " (stored %08" PRIx32
		                  ", computed %08" PRIx32
		                  " over the bytes before it): the snapshot is damaged; "
		                  "refusing to start (move it away to start without it)",
		                  path, at, get_u32(h), computed);
		goto out;
	}
	if (fgetc(r.f) != EOF) {
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: unexpected bytes after the checksum at offset %" PRIu64
		                  " (damaged file)",
		                  path, r.off);
		goto out;
	}
	goto out;
short_file:
	st = ta_error_set(err, TA_INTERNAL,
	                  "%s: the file ends at offset %" PRIu64
	                  " in the middle of its data (truncated snapshot)",
	                  path, r.off);
out:
	if (tile) {
		ta_registry_discard(tile);
		ta_tile_unref(tile);
	}
	free(chunk);
	XXH3_freeState(r.hs);
	fclose(r.f);
	return st;
}

/* One log file found in the directory. */
typedef struct log_file {
	uint64_t first; /* the sequence number in its name */
	char name[64];  /* its name in the directory */
} log_file;

/* qsort order of log files: by first sequence number. */
static int log_file_cmp(const void *a, const void *b)
{
	const log_file *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* Lists the logs of the directory sorted by their first record into *out (*n entries). */
static ta_status list_logs(ta_persist *p, log_file **out, size_t *n, ta_error *err)
{
	*out = NULL;
	*n = 0;
	int fd = dup(p->dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot list %s: %s", p->dir,
		                    strerror(errno));
	}
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		uint64_t s;
		char tail[8];
		if (sscanf(e->d_name, "log-%16" SCNx64 ".%3s", &s, tail) != 2 ||
		    strcmp(tail, "tal") != 0 || strlen(e->d_name) != 24)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			log_file *nl = realloc(*out, cap * sizeof(**out));
			if (!nl) {
				closedir(d);
				free(*out);
				*out = NULL;
				return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
			}
			*out = nl;
		}
		(*out)[*n].first = s;
		snprintf((*out)[*n].name, sizeof((*out)[*n].name), "%s", e->d_name);
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(*out, *n, sizeof(**out), log_file_cmp);
	return TA_OK;
}

/* Replays one log from its start. *expected: the next sequence number to apply (records
 * at or below snap_seq are skipped). last: the newest log, where a torn tail is dropped
 * (truncated). *end: the offset after the last whole record. */
static ta_status replay_log(ta_persist *p, const log_file *lf, bool last, uint64_t snap_seq,
                            uint64_t *expected, uint64_t *end, ta_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", p->dir, lf->name);
	int fd = openat(p->dir_fd, lf->name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s: %s", path,
		                    strerror(errno));
	rd_file r = {fdopen(fd, "rb"), path, 0, NULL}; /* records carry their own checksums */
	if (!r.f) {
		close(fd);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s: %s", path,
		                    strerror(errno));
	}
	ta_status st = TA_OK;
	uint8_t h[REC_HEADER];
	uint8_t *payload = NULL;
	size_t cap = 0;
	uint64_t applied = 0;
	const char *torn = NULL;
	*end = 0;
	size_t got = rd(&r, h, MAGIC_LEN);
	if (got < MAGIC_LEN || memcmp(h, LOG_MAGIC, MAGIC_LEN) != 0) {
		if (got < MAGIC_LEN && last && memcmp(h, LOG_MAGIC, got) == 0) {
			torn = "a header cut short";
		} else {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: not a tileatom log (bad header at offset 0)", path);
		}
		goto out;
	}
	*end = MAGIC_LEN;
	for (;;) {
		uint64_t at = r.off;
		got = rd(&r, h, REC_HEADER);
		if (got == 0)
			break;
		if (got < REC_HEADER) {
			torn = "a record header cut short";
			break;
		}
		if (sum32(h, 24) != get_u32(h + 24)) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: record header checksum mismatch at offset %" PRIu64
			                  " (damaged log); refusing to start",
			                  path, at);
			goto out;
		}
		uint32_t len = get_u32(h);
		uint64_t seq = get_u64(h + 4);
		ta_owner who = (ta_owner)get_u64(h + 12);
		if (len > cap) {
			uint8_t *np = realloc(payload, len);
			if (!np) {
				st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
				                  "%s: out of memory for a record of %" PRIu32
				                  " bytes at offset %" PRIu64,
				                  path, len, at);
				goto out;
			}
			payload = np;
			cap = len;
		}
		if (rd(&r, payload, len) < len) {
			torn = "a record cut short";
			break;
		}
		if (sum32(payload, len) != get_u32(h + 20)) {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: record %" PRIu64 " at offset %" PRIu64
			                  ": payload checksum mismatch (damaged log); refusing "
			                  "to start",
			                  path, seq, at);
			goto out;
		}
		if (seq > snap_seq) {
			if (seq != *expected) {
				st =
				    ta_error_set(err, TA_INTERNAL,
				                 "%s: record at offset %" PRIu64
				                 " has sequence %" PRIu64 " where %" PRIu64
				                 " was expected (records are missing); refusing to "
				                 "start",
				                 path, at, seq, *expected);
				goto out;
			}
			ta_error rerr = {0};
			if (p->replay(p->replay_arg, who, payload, len, &rerr) != TA_OK) {
				st = ta_error_set(err, TA_INTERNAL,
				                  "%s: replaying record %" PRIu64
				                  " at offset %" PRIu64 " failed: %s",
				                  path, seq, at, rerr.msg);
				goto out;
			}
			(*expected)++;
			applied++;
		}
		*end = r.off;
	}
	if (torn && !last)
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: %s at offset %" PRIu64
		                  " but newer logs follow (damaged log); refusing to start",
		                  path, torn, *end);
out:
	if (st == TA_OK && torn && last)
		ta_log(TA_LOG_WARNING,
		       "%s: dropping a torn last record at offset %" PRIu64 " (%s, %" PRIu64
		       " bytes: a write interrupted by a crash); with --fsync always it was "
		       "never acknowledged",
		       path, *end, torn, r.off - *end);
	if (st == TA_OK)
		ta_log(TA_LOG_INFO, "%s: replayed %" PRIu64 " records", path, applied);
	free(payload);
	fclose(r.f);
	return st;
}

/* Opens (creating) the data directory and takes its lock. */
static ta_status open_dir(ta_persist *p, ta_error *err)
{
	if (mkdir(p->dir, 0700) != 0 && errno != EEXIST)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot create the data directory %s: %s",
		                    p->dir, strerror(errno));
	p->dir_fd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->dir_fd < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open the data directory %s: %s",
		                    p->dir, strerror(errno));
	p->lock_fd = openat(p->dir_fd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (p->lock_fd < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s/%s: %s", p->dir, LOCK_NAME,
		                    strerror(errno));
	if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0)
		return ta_error_set(err, TA_UNAVAILABLE,
		                    errno == EWOULDBLOCK
		                        ? "the data directory %s is in use by another tileatomd"
		                        : "cannot lock the data directory %s: %s",
		                    p->dir, strerror(errno));
	if (unlinkat(p->dir_fd, SNAP_TMP_NAME, 0) != 0 && errno != ENOENT)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot remove %s/%s: %s", p->dir,
		                    SNAP_TMP_NAME, strerror(errno));
	return TA_OK;
}

ta_status persist_recover(ta_persist *p, ta_error *err)
{
	ta_status st = open_dir(p, err);
	if (st != TA_OK)
		return st;
	uint64_t snap_seq = 0;
	st = load_snapshot(p, &snap_seq, err);
	if (st != TA_OK)
		return st;
	log_file *logs = NULL;
	size_t n = 0;
	st = list_logs(p, &logs, &n, err);
	if (st != TA_OK)
		return st;
	uint64_t expected = snap_seq + 1;
	uint64_t end = 0;
	for (size_t i = 0; i < n && st == TA_OK; i++)
		st = replay_log(p, &logs[i], i + 1 == n, snap_seq, &expected, &end, err);
	if (st == TA_OK && n > 0 && end >= MAGIC_LEN) {
		/* go on appending to the newest log, after its last whole record */
		const log_file *lf = &logs[n - 1];
		p->log_fd = openat(p->dir_fd, lf->name, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (p->log_fd < 0 || ftruncate(p->log_fd, (off_t)end) != 0 ||
		    fdatasync(p->log_fd) != 0)
			st =
			    ta_error_set(err, TA_UNAVAILABLE, "cannot open %s/%s for appending: %s",
			                 p->dir, lf->name, strerror(errno));
		p->log_first = lf->first;
		p->log_bytes = end;
	} else if (st == TA_OK) {
		/* no log yet (or only a torn header): start one */
		if (n > 0 && unlinkat(p->dir_fd, logs[n - 1].name, 0) != 0)
			st = ta_error_set(err, TA_UNAVAILABLE, "cannot remove %s/%s: %s", p->dir,
			                  logs[n - 1].name, strerror(errno));
		if (st == TA_OK) {
			p->log_fd = persist_create_log(p, expected);
			if (p->log_fd < 0)
				st = ta_error_set(err, TA_UNAVAILABLE,
				                  "cannot create a log in %s: %s", p->dir,
				                  strerror(errno));
		}
		p->log_first = expected;
		p->log_bytes = MAGIC_LEN;
	}
	free(logs);
	if (st != TA_OK)
		return st;
	p->next_seq = expected;
	atomic_store(&p->durable_seq, expected - 1);
	uint32_t tiles = 0;
	uint64_t bytes = 0;
	ta_registry_stats(p->registry, &tiles, &bytes);
	ta_log(
	    TA_LOG_NOTICE,
	    "data directory %s: %" PRIu32 " tiles (%" PRIu64 " bytes) restored: snapshot through "
	    "record %" PRIu64 ", %" PRIu64 " records replayed; fsync %s",
	    p->dir, tiles, bytes, snap_seq, expected - 1 - snap_seq, ta_fsync_mode_name(p->mode));
	return TA_OK;
}
