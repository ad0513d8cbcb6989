/* netaddr.c: socket address facts (netaddr.h). */
#include "netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

bool ta_net_is_loopback(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			return in6->sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

ta_status ta_net_resolve(const char *what, const char *spec, struct addrinfo **res, ta_error *err)
{
	char host[256];
	bool v6 = spec[0] == '['; /* [V6]:PORT */
	const char *start = spec + v6, *end = v6 ? strchr(spec, ']') : strrchr(spec, ':');
	if (!end || (v6 && end[1] != ':') || (size_t)(end - start) >= sizeof(host))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: '%s' is not %s:PORT", what, spec,
		                    v6 ? "[ADDRESS]" : "HOST");
	memcpy(host, start, (size_t)(end - start));
	host[end - start] = '\0';
	const char *port = end + 1 + v6;
	if (!*port)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: '%s' has no port", what, spec);
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	int rc = getaddrinfo(*host && strcmp(host, "*") != 0 ? host : NULL, port, &hints, res);
	if (rc != 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: cannot resolve '%s': %s", what,
		                    spec, gai_strerror(rc));
	return TA_OK;
}
