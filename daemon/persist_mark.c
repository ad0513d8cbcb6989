/* persist_mark.c: the logmark of tileatomd's data directory (format in persist_int.h): what
 * of the current log is known durable, kept apart from the log so that startup recovery
 * (persist_load.c) can tell a log cut short or missing from a record torn by a crash; two
 * slots written in turn in place. Below it, the one way a durable file is made, which the
 * log's new files share. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "persist_int.h"

/* Encodes mark m with count into slot buffer b (MARK_SLOT bytes). */
static void mark_encode(uint8_t *b, const persist_mark *m)
{
	memset(b, 0, MARK_SLOT);
	memcpy(b, MARK_MAGIC, MAGIC_LEN);
	put_u64(b + 8, m->count);
	put_u64(b + 16, m->first);
	put_u64(b + 24, m->bytes);
	put_u64(b + 32, m->last);
	put_u32(b + 40, sum32(b, 40));
}

/* Decodes slot b into *m; false when it holds no whole mark. */
static bool mark_decode(const uint8_t *b, persist_mark *m)
{
	if (memcmp(b, MARK_MAGIC, MAGIC_LEN) != 0 || get_u32(b + 40) != sum32(b, 40))
		return false;
	m->count = get_u64(b + 8);
	m->first = get_u64(b + 16);
	m->bytes = get_u64(b + 24);
	m->last = get_u64(b + 32);
	return m->count > 0;
}

int persist_mark_read(ta_persist *p, persist_mark *out)
{
	memset(out, 0, sizeof(*out));
	int fd = openat(p->dir_fd, MARK_NAME, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	uint8_t file[MARK_STRIDE + MARK_SLOT]; /* both slots */
	ssize_t got = pread(fd, file, sizeof(file), 0);
	if (got < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	persist_mark m[2];
	bool ok[2];
	for (int i = 0; i < 2; i++)
		ok[i] = got >= i * MARK_STRIDE + MARK_SLOT &&
		        mark_decode(file + i * MARK_STRIDE, &m[i]);
	p->mark_fd = fd;
	if (!ok[0] && !ok[1])
		return 2;
	*out = ok[0] && (!ok[1] || m[0].count > m[1].count) ? m[0] : m[1];
	p->mark = *out;
	return 1;
}

/* Creates the logmark holding m in its slot (the other empty, the file at its full size)
 * through logmark.tmp (persist_new_file). 0 or an errno. */
static int mark_create(ta_persist *p, const persist_mark *m)
{
	static uint8_t file[MARK_STRIDE + MARK_SLOT];
	memset(file, 0, sizeof(file));
	mark_encode(file + (m->count & 1) * MARK_STRIDE, m); /* where write would put it */
	int fd = persist_new_file(p, MARK_TMP_NAME, MARK_NAME, O_RDWR, file, sizeof(file));
	if (fd < 0)
		return errno;
	p->mark_fd = fd;
	return 0;
}

int persist_mark_write(ta_persist *p, uint64_t first, uint64_t bytes, uint64_t last, bool force)
{
	pthread_mutex_lock(&p->mark_mu);
	persist_mark m = {p->mark.count + 1, first, bytes, last};
	bool older = first < p->mark.first || (first == p->mark.first && bytes <= p->mark.bytes);
	int e = 0;
	if (p->mark_fd < 0) {
		e = mark_create(p, &m);
	} else if (force || !older) {
		uint8_t b[MARK_SLOT];
		mark_encode(b, &m);
		ssize_t w = pwrite(p->mark_fd, b, MARK_SLOT, (off_t)(m.count & 1) * MARK_STRIDE);
		if (w != MARK_SLOT)
			e = w < 0 ? errno : EIO;
		if (e == 0 && fdatasync(p->mark_fd) != 0)
			e = errno;
	} else {
		m = p->mark; /* it says as much already (or more: a newer log's) */
	}
	if (e == 0)
		p->mark = m;
	pthread_mutex_unlock(&p->mark_mu);
	return e;
}

int persist_new_file(ta_persist *p, const char *tmp, const char *name, int flags, const void *data,
                     size_t n)
{
	const char *path = tmp ? tmp : name;
	int fd = openat(p->dir_fd, path, flags | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int e = ta_write_all(fd, data, n);
	if (e == 0 && fsync(fd) != 0)
		e = errno;
	if (e == 0 && tmp && renameat(p->dir_fd, tmp, p->dir_fd, name) != 0)
		e = errno;
	if (e == 0 && fsync(p->dir_fd) != 0)
		e = errno;
	if (e != 0) {
		close(fd);
		if (tmp)
			unlinkat(p->dir_fd, tmp, 0);
		errno = e;
		return -1;
	}
	return fd;
}
