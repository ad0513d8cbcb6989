/* netaddr.c: socket address facts (netaddr.h). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

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
	const char *port;
	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');
		if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof(host))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "%s: '%s' is not [ADDRESS]:PORT", what, spec);
		memcpy(host, spec + 1, (size_t)(close - spec - 1));
		host[close - spec - 1] = '\0';
		port = close + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		if (!colon || (size_t)(colon - spec) >= sizeof(host))
			return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: '%s' is not HOST:PORT",
			                    what, spec);
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		port = colon + 1;
	}
	if (!*port)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: '%s' has no port", what, spec);
	struct addrinfo hints;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	int rc = getaddrinfo(*host && strcmp(host, "*") != 0 ? host : NULL, port, &hints, res);
	if (rc != 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: cannot resolve '%s': %s", what,
		                    spec, gai_strerror(rc));
	return TA_OK;
}
