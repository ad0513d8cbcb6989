/* persist_load.c: startup recovery of tileatomd's tiles (see persist.h; the file format is
 * in persist_int.h): opens and locks the data directory, loads the snapshot, replays the logs
 * through the host's callback, and opens the newest log for appending; a restored tile goes
 * back where it lived, or where the default placement puts it when that cannot be met.
 * A partial record at the end of the newest log, past what the logmark records durable, is
 * a write cut by a crash: cut off with a log line. Records once durable that are gone (a log
 * cut short, missing or not continuing the one before, a logmark missing or damaged where
 * the logs were written with one) refuse the start saying what is lost, unless the operator
 * accepted that (--accept-log-loss). Other damage refuses it naming the file and offset. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
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

/* ---- placing a restored tile ---- */

ta_status ta_persist_create_restored(ta_registry *reg, const char *name, const ta_tile_shape *shape,
                                     ta_owner owner, const ta_placement *was, ta_tile **out,
                                     ta_error *err)
{
	ta_status st = ta_registry_create_placed(reg, name, shape, owner, was, out, err);
	if (st == TA_OK || !was || was->kind == TA_PLACE_DEFAULT ||
	    (st != TA_INVALID_ARGUMENT && st != TA_UNAVAILABLE && st != TA_RESOURCE_EXHAUSTED))
		return st;
	ta_error why = *err;
	ta_placement policy = {TA_PLACE_DEFAULT, 0, 0, NULL};
	ta_error_set(err, TA_OK, "%s", "");
	st = ta_registry_create_placed(reg, name, shape, owner, &policy, out, err);
	if (st != TA_OK)
		return st;
	ta_tile_where went;
	ta_tile_where_get(*out, &went);
	char was_text[TA_WHERE_TEXT_MAX], went_text[TA_WHERE_TEXT_MAX];
	ta_log(TA_LOG_WARNING,
	       "tile '%s' was on %s; placed by the default placement (--placement) on %s "
	       "instead: %s",
	       name, ta_placement_format(was, was_text, sizeof(was_text)),
	       ta_tile_where_format(&went, went_text, sizeof(went_text)), why.msg);
	return TA_OK;
}

/* ---- loading ---- */

/* A file being read with a running checksum and offset. */
typedef struct rd_file {
	FILE *f;          /* the stream */
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

/* persist_tile_data's io for a snapshot: reads n bytes; false when the file ends first. */
static bool rd_io(void *r, void *buf, size_t n)
{
	return rd(r, buf, n) == n;
}

/* Loads the snapshot, if any (*found), into the registry; *seq: its last record. */
static ta_status load_snapshot(ta_persist *p, bool *found, uint64_t *seq, ta_error *err)
{
	*seq = 0;
	*found = false;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", p->dir, SNAP_NAME);
	int fd = openat(p->dir_fd, SNAP_NAME, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return TA_OK;
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s: %s", path,
		                    strerror(errno));
	}
	*found = true;
	rd_file r = {fdopen(fd, "rb"), 0, XXH3_createState()};
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
	uint8_t h[8 * TA_MAX_RANK + 20];
	uint8_t *chunk = NULL;
	size_t chunk_cap = 0;
	ta_tile *tile = NULL;
	bool v3 = false; /* TASNAP03: no parts recorded */
	if (rd(&r, h, 20) < 20 || (memcmp(h, SNAP_MAGIC, MAGIC_LEN) != 0 &&
	                           !(v3 = memcmp(h, SNAP_MAGIC_V3, MAGIC_LEN) == 0))) {
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: not a tileatom snapshot (bad or short header at offset 0)",
		                  path);
		goto out;
	}
	ta_tile_where was;
	ta_placement place = {v3 ? TA_PLACE_DEFAULT : TA_PLACE_PARTS, 0, 0, &was};
	if (v3)
		ta_log(TA_LOG_NOTICE,
		       "%s: a snapshot of an older format (%s, without where its tiles lived): its "
		       "tiles are placed by the default placement (--placement)",
		       path, SNAP_MAGIC_V3);
	*seq = get_u64(h + 8);
	uint32_t ntiles = get_u32(h + 16);
	for (uint32_t i = 0; i < ntiles; i++) {
		uint64_t at = r.off;
		char name[TA_NAME_MAX + 1];
		ta_tile_shape shape = {0};
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
		size_t fixed = 8 * (size_t)shape.rank + (v3 ? 8 : 12); /* extents, bytes, parts */
		if (rd(&r, h, fixed) < fixed)
			goto short_file;
		for (int a = 0; a < shape.rank; a++)
			shape.shape[a] = (int64_t)get_u64(h + 8 * a);
		uint64_t bytes = get_u64(h + 8 * shape.rank);
		if (!v3) {
			uint32_t nparts = get_u32(h + 8 * shape.rank + 8);
			was.nparts = nparts <= TA_MAX_DEVICES ? (int)nparts : 0;
			for (int k = 0; k < was.nparts; k++) {
				if (rd(&r, h, 20) < 20)
					goto short_file;
				uint32_t d = get_u32(h);
				was.part[k].device = d < TA_MAX_DEVICES ? (int)d : -1;
				was.part[k].first = (int64_t)get_u64(h + 4);
				was.part[k].end = (int64_t)get_u64(h + 12);
			}
			ta_error werr = {0};
			if (ta_tile_where_check(&was, shape.shape[0], &werr) != TA_OK) {
				char shown[TA_NAME_MAX + 4];
				st = ta_error_set(
				    err, TA_INTERNAL,
				    "%s: tile '%s' at offset %" PRIu64 ": %s (damaged file)", path,
				    ta_name_for_message(name, shown, sizeof(shown)), at, werr.msg);
				goto out;
			}
		}
		ta_error cerr = {0};
		st = ta_persist_create_restored(p->registry, name, &shape, owner, &place, &tile,
		                                &cerr);
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
		st = persist_tile_data(p->backend, tile, TA_OP_STORE, &chunk, &chunk_cap, rd_io, &r,
		                       err);
		if (st != TA_OK)
			goto out;
		if (feof(r.f) || ferror(r.f))
			goto short_file;
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
	if (fgetc(r.f) != EOF)
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: unexpected bytes after the checksum at offset %" PRIu64
		                  " (damaged file)",
		                  path, r.off);
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

/* What replaying one log found. */
typedef struct log_scan {
	uint64_t end;      /* offset after its last whole record (0: not even a whole header) */
	uint64_t size;     /* bytes read: past end, a torn tail */
	uint64_t last_seq; /* sequence number of its last whole record (first - 1: none) */
	uint64_t records;  /* whole records in it */
	const char *torn;  /* what its tail is when it ends in a partial record (NULL: none) */
	bool v3;           /* a TALOG003 log (written without a logmark) */
	const char *old;   /* the magic of a log of an older format (TALOG003, TALOG004;
	                      never appended to), NULL: the current one */
} log_scan;

/* Replays one log from its start. *expected: the next sequence number to apply (records
 * at or below snap_seq are skipped). last: the newest log, whose tail may be torn (a partial
 * record: reported in *scan, for persist_recover to judge and drop); in any other log that
 * is damage. */
static ta_status replay_log(ta_persist *p, const log_file *lf, bool last, uint64_t snap_seq,
                            uint64_t *expected, log_scan *scan, ta_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", p->dir, lf->name);
	memset(scan, 0, sizeof(*scan));
	scan->last_seq = lf->first - 1;
	int fd = openat(p->dir_fd, lf->name, O_RDONLY | O_CLOEXEC);
	rd_file r = {fd >= 0 ? fdopen(fd, "rb") : NULL, 0, NULL}; /* records carry checksums */
	if (!r.f) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot open %s: %s", path, strerror(e));
	}
	ta_status st = TA_OK;
	uint8_t h[REC_HEADER];
	uint8_t *payload = NULL;
	size_t cap = 0;
	uint64_t applied = 0, skipped = 0;
	char first_skip[300] = "";
	size_t got = rd(&r, h, MAGIC_LEN);
	scan->v3 = got == MAGIC_LEN && memcmp(h, LOG_MAGIC_V3, MAGIC_LEN) == 0;
	if (scan->v3)
		scan->old = LOG_MAGIC_V3;
	else if (got == MAGIC_LEN && memcmp(h, LOG_MAGIC_V4, MAGIC_LEN) == 0)
		scan->old = LOG_MAGIC_V4;
	if (got < MAGIC_LEN || (memcmp(h, LOG_MAGIC, MAGIC_LEN) != 0 && !scan->old)) {
		if (got < MAGIC_LEN && last && memcmp(h, LOG_MAGIC, got) == 0) {
			scan->torn = "a header cut short";
		} else {
			st = ta_error_set(err, TA_INTERNAL,
			                  "%s: not a tileatom log (bad header at offset 0)", path);
		}
		goto out;
	}
	scan->end = MAGIC_LEN;
	for (;;) {
		uint64_t at = r.off;
		got = rd(&r, h, REC_HEADER);
		if (got == 0)
			break;
		if (got < REC_HEADER) {
			scan->torn = "a record header cut short";
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
		if (!persist_grow(&payload, &cap, len, len, 0)) {
			st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
			                  "%s: out of memory for a record of %" PRIu32
			                  " bytes at offset %" PRIu64,
			                  path, len, at);
			goto out;
		}
		if (rd(&r, payload, len) < len) {
			scan->torn = "a record cut short";
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
			if (p->replay(p->replay_arg, who, payload, len, &rerr) == TA_OK) {
				applied++;
			} else if (p->loss_accepted) {
				/* it needed what was lost (a tile created in the part gone) */
				if (skipped++ == 0)
					snprintf(first_skip, sizeof(first_skip),
					         "record %" PRIu64 ": %s", seq, rerr.msg);
			} else {
				st = ta_error_set(err, TA_INTERNAL,
				                  "%s: replaying record %" PRIu64
				                  " at offset %" PRIu64 " failed: %s",
				                  path, seq, at, rerr.msg);
				goto out;
			}
			(*expected)++;
		}
		scan->end = r.off;
		scan->last_seq = seq;
		scan->records++;
	}
	if (scan->torn && !last)
		st = ta_error_set(err, TA_INTERNAL,
		                  "%s: %s at offset %" PRIu64
		                  " but newer logs follow (damaged log); refusing to start",
		                  path, scan->torn, scan->end);
out:
	scan->size = r.off;
	if (st == TA_OK)
		ta_log(TA_LOG_INFO, "%s: replayed %" PRIu64 " records", path, applied);
	if (st == TA_OK && skipped)
		ta_log(TA_LOG_ERR,
		       "%s: %" PRIu64 " records no longer apply after the accepted loss and were "
		       "skipped (the first, %s)",
		       path, skipped, first_skip);
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

/* A loss found at start (what: which file, what is gone, how much as far as can be
 * known): refused, with what in err, unless the operator accepted losses
 * (--accept-log-loss): then logged, and recovery goes on with what is left. */
static __attribute__((format(printf, 3, 4))) ta_status log_loss(ta_persist *p, ta_error *err,
                                                                const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (!p->accept_log_loss)
		return ta_error_set(err, TA_INTERNAL,
		                    "%s; refusing to start without --accept-log-loss", what);
	ta_log(TA_LOG_ERR, "%s; starting with what is left (--accept-log-loss)", what);
	p->loss_accepted = true;
	return TA_OK;
}

/* "s" unless n is 1 (for "record%s"). */
static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

/* Records numbered [from, to]: how many (0 when to < from). */
static uint64_t span(uint64_t from, uint64_t to)
{
	return to >= from ? to - from + 1 : 0;
}

/* The checks that need every log replayed: the log the snapshot or the logmark needs is
 * there, the newest log is as long as the logmark says was durable, and a logmark exists
 * where the logs were written with one (mark_state: persist_mark_read's answer, mark: its
 * mark). expected: the next sequence number after the records replayed. */
static ta_status check_complete(ta_persist *p, const log_file *logs, const log_scan *scans,
                                size_t n, bool has_snap, uint64_t snap_seq, int mark_state,
                                const persist_mark *mark, uint64_t expected, ta_error *err)
{
	bool use_mark = mark_state == 1 && mark->first > snap_seq;
	uint64_t newest = n ? logs[n - 1].first : 0;
	if (use_mark && n && newest == mark->first && scans[n - 1].end < mark->bytes) {
		const log_scan *sc = &scans[n - 1];
		uint64_t lost = span(sc->last_seq + 1, mark->last);
		return log_loss(p, err,
		                "%s/%s: cut short at byte %" PRIu64 ", after record %" PRIu64
		                ", of %" PRIu64 " bytes durable through record %" PRIu64
		                ": at least %" PRIu64 " bytes, %" PRIu64 " record%s lost",
		                p->dir, logs[n - 1].name, sc->end, sc->last_seq, mark->bytes,
		                mark->last, mark->bytes - sc->end, lost, plural(lost));
	}
	if (use_mark && (!n || newest < mark->first)) {
		uint64_t lost = span(expected, mark->last);
		return log_loss(
		    p, err,
		    "%s/" LOG_NAME_FORMAT ": missing; %" PRIu64 " bytes through record %" PRIu64
		    " were durable: at least %" PRIu64 " bytes, %" PRIu64 " record%s lost",
		    p->dir, mark->first, mark->bytes, mark->last, mark->bytes, lost, plural(lost));
	}
	if (has_snap && (!n || newest <= snap_seq)) {
		return log_loss(p, err,
		                "%s/" LOG_NAME_FORMAT
		                ": missing, though the snapshot through record %" PRIu64
		                " needs it: the records after %" PRIu64 " are lost (how many is "
		                "unknown)",
		                p->dir, snap_seq + 1, snap_seq, snap_seq);
	}
	if (mark_state == 2)
		return log_loss(p, err,
		                "%s/%s: damaged (no whole slot): whether the log is complete is "
		                "unknown",
		                p->dir, MARK_NAME);
	for (size_t i = 0; mark_state == 0 && i < n; i++)
		if (!scans[i].v3 && scans[i].records > 0)
			return log_loss(
			    p, err,
			    "%s/%s: missing, though %s was written with one: whether the "
			    "log is complete is unknown",
			    p->dir, MARK_NAME, logs[i].name);
	return TA_OK;
}

/* Says what happens to the newest log's torn tail (a partial record after its last whole
 * one, which persist_recover cuts off): with a logmark, it lies past every byte recorded
 * durable (else check_complete reported a cut). */
static void report_torn(ta_persist *p, const log_file *lf, const log_scan *sc, int mark_state,
                        const persist_mark *mark)
{
	char known[160];
	if (mark_state == 1 && mark->first == lf->first && sc->end < mark->bytes)
		return; /* reported as a cut (and accepted) */
	if (mark_state == 1 && mark->first == lf->first)
		snprintf(known, sizeof(known),
		         "the log keeps the %" PRIu64 " bytes (through record %" PRIu64
		         ") recorded durable",
		         mark->bytes, mark->last);
	else
		snprintf(
		    known, sizeof(known),
		    "no logmark covers this log, so a cut here could not be told from a crash");
	ta_log(TA_LOG_WARNING,
	       "%s/%s: dropping a torn last record at offset %" PRIu64 " (%s, %" PRIu64
	       " bytes): the end of a write cut by a crash, never acknowledged with --fsync "
	       "always; %s",
	       p->dir, lf->name, sc->end, sc->torn, sc->size - sc->end, known);
}

/* Opens the newest log (lf, as scanned: sc) for appending after its last whole record,
 * cutting off a torn tail, or starts a new log at p->next_seq where there is none, where the
 * newest has no whole header, or where it is of an older format (TALOG003, TALOG004: kept,
 * and replayed again next time, until a snapshot covers it). */
static ta_status open_newest(ta_persist *p, const log_file *lf, const log_scan *sc, ta_error *err)
{
	if (lf && sc->end >= MAGIC_LEN) {
		int fd = openat(p->dir_fd, lf->name, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)sc->end) != 0 || fdatasync(fd) != 0) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			return ta_error_set(err, TA_UNAVAILABLE,
			                    "cannot open %s/%s for appending: %s", p->dir, lf->name,
			                    strerror(e));
		}
		if (!sc->old) {
			p->log_fd = fd;
			p->log_first = lf->first;
			p->log_bytes = sc->end;
			return TA_OK;
		}
		close(fd);
		ta_log(TA_LOG_NOTICE,
		       "%s/%s: a log of an older format (%s%s): kept until the next snapshot; new "
		       "records go to a new log",
		       p->dir, lf->name, sc->old,
		       sc->v3 ? ", without a logmark" : ", without where its tiles lived");
	}
	/* a new log (in place of a newest one without a whole header, or of an old format
	 * without records, both named by the same first record) */
	p->log_fd = persist_create_log(p, p->next_seq);
	if (p->log_fd < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot create a log in %s: %s", p->dir,
		                    strerror(errno));
	p->log_first = p->next_seq;
	p->log_bytes = MAGIC_LEN;
	if (lf && sc->end < MAGIC_LEN && lf->first != p->next_seq &&
	    unlinkat(p->dir_fd, lf->name, 0) != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot remove %s/%s: %s", p->dir,
		                    lf->name, strerror(errno));
	return TA_OK;
}

ta_status persist_recover(ta_persist *p, ta_error *err)
{
	ta_status st = open_dir(p, err);
	if (st != TA_OK)
		return st;
	bool has_snap = false;
	uint64_t snap_seq = 0;
	st = load_snapshot(p, &has_snap, &snap_seq, err);
	if (st != TA_OK)
		return st;
	persist_mark mark;
	int mark_state = persist_mark_read(p, &mark);
	if (mark_state < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot read %s/%s: %s", p->dir, MARK_NAME,
		                    strerror(-mark_state));
	log_file *logs = NULL;
	size_t n = 0;
	st = persist_list_logs(p, &logs, &n, err);
	if (st != TA_OK)
		return st;
	log_scan *scans = calloc(n ? n : 1, sizeof(*scans));
	if (!scans) {
		free(logs);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	}
	uint64_t expected = snap_seq + 1, replayed = 0;
	for (size_t i = 0; i < n && st == TA_OK; i++) {
		if (logs[i].first > expected) {
			/* each log starts where the one before it (or the snapshot) ended */
			uint64_t lost = logs[i].first - expected;
			st = log_loss(p, err,
			              "%s/%s: starts at record %" PRIu64
			              ", but no snapshot or earlier log holds records %" PRIu64
			              " to %" PRIu64 ": %" PRIu64 " record%s lost",
			              p->dir, logs[i].name, logs[i].first, expected,
			              logs[i].first - 1, lost, plural(lost));
			expected = logs[i].first;
			if (st != TA_OK)
				break;
		}
		uint64_t before = expected;
		st = replay_log(p, &logs[i], i + 1 == n, snap_seq, &expected, &scans[i], err);
		replayed += expected - before;
	}
	if (st == TA_OK)
		st = check_complete(p, logs, scans, n, has_snap, snap_seq, mark_state, &mark,
		                    expected, err);
	if (st == TA_OK && n > 0 && scans[n - 1].torn)
		report_torn(p, &logs[n - 1], &scans[n - 1], mark_state, &mark);
	p->next_seq = expected;
	if (st == TA_OK)
		st = open_newest(p, n ? &logs[n - 1] : NULL, n ? &scans[n - 1] : NULL, err);
	free(scans);
	free(logs);
	if (st != TA_OK)
		return st;
	p->written_seq = expected - 1;
	atomic_store(&p->durable_seq, expected - 1);
	/* from here on the logmark covers the log appended to */
	int e = persist_mark_write(p, p->log_first, p->log_bytes, expected - 1, true);
	if (e != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot write %s/%s: %s", p->dir,
		                    MARK_NAME, strerror(e));
	uint32_t tiles = 0;
	uint64_t bytes = 0;
	ta_registry_stats(p->registry, &tiles, &bytes);
	ta_log(TA_LOG_NOTICE,
	       "data directory %s: %" PRIu32 " tiles (%" PRIu64
	       " bytes) restored: snapshot through "
	       "record %" PRIu64 ", %" PRIu64 " records replayed; fsync %s",
	       p->dir, tiles, bytes, snap_seq, replayed, ta_fsync_mode_name(p->mode));
	return TA_OK;
}
