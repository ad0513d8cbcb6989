/* persist_file.c: the durability files' lowest step: writing bytes whole and creating a
 * file of tileatomd's data directory durably (the log's new files, persist_log.c; the
 * logmark, persist_mark.c). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "persist_int.h"

int persist_write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *data = buf;
	while (n > 0) {
		ssize_t w = write(fd, data, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		data += w;
		n -= (size_t)w;
	}
	return 0;
}

int persist_new_file(ta_persist *p, const char *tmp, const char *name, int flags, const void *data,
                     size_t n)
{
	const char *path = tmp ? tmp : name;
	int fd = openat(p->dir_fd, path, flags | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int e = persist_write_all(fd, data, n);
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
