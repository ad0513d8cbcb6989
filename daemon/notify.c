/* notify.c: sd_notify by hand (see notify.h). The socket is a datagram AF_UNIX socket;
 * '@' at the start of NOTIFY_SOCKET means the Linux abstract namespace (a leading NUL
 * byte in sun_path). Failures are returned, never fatal: a supervisor without the
 * protocol must not stop the daemon. */
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int ta_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !*path)
		return 0;
	size_t plen = strlen(path);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(addr.sun_path))
		return -EINVAL;
	memcpy(addr.sun_path, path, plen);
	if (path[0] == '@')
		addr.sun_path[0] = '\0';
	socklen_t alen =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + (path[0] == '@' ? 0 : 1));
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ssize_t sent;
	do {
		sent =
		    sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr, alen);
	} while (sent < 0 && errno == EINTR);
	int rc = sent < 0 ? -errno : 1;
	close(fd);
	return rc;
}
