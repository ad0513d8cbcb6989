/* notify.h: the systemd readiness protocol (sd_notify), written by hand so that the daemon
 * needs no libsystemd: one datagram such as "READY=1" sent to the AF_UNIX socket named by
 * $NOTIFY_SOCKET (a path, or an abstract name when it starts with '@'). Without
 * NOTIFY_SOCKET nothing is sent. */
#ifndef TA_DAEMON_NOTIFY_H
#define TA_DAEMON_NOTIFY_H

/* Sends state (e.g. "READY=1\nSTATUS=listening") to $NOTIFY_SOCKET. Returns 1 when sent,
 * 0 when NOTIFY_SOCKET is unset, or a negative errno value on failure. */
int ta_notify(const char *state);

#endif /* TA_DAEMON_NOTIFY_H */
