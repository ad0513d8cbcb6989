/* netaddr.h: facts about socket addresses that the daemon's listeners (the TCP listener of
 * server.c, the metrics endpoint of metrics_http.c) decide by, stated once. */
#ifndef TA_DAEMON_NETADDR_H
#define TA_DAEMON_NETADDR_H

#include <stdbool.h>
#include <sys/socket.h>

/* True when addr is a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104). */
bool ta_net_is_loopback(const struct sockaddr *addr);

#endif /* TA_DAEMON_NETADDR_H */
