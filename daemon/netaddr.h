/* netaddr.h: facts about socket addresses that the daemon's listeners (the TCP listener of
 * server.c, the metrics endpoint of metrics_http.c) decide by, stated once, and the one
 * reading of their HOST:PORT settings. */
#ifndef TA_DAEMON_NETADDR_H
#define TA_DAEMON_NETADDR_H

#include <netdb.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "ta_types.h"

/* True when addr is a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104). */
bool ta_net_is_loopback(const struct sockaddr *addr);

/* Resolves "HOST:PORT" or "[V6]:PORT" ("*" or an empty host: every address) into *res, to
 * listen on (freeaddrinfo it); what names the setting in messages ("listen", "metrics"). */
ta_status ta_net_resolve(const char *what, const char *spec, struct addrinfo **res, ta_error *err);

#endif /* TA_DAEMON_NETADDR_H */
