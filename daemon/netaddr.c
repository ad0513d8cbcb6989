/* netaddr.c: socket address facts (netaddr.h). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

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
