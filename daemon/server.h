/* server.h: the listeners and the life cycle of tileatomd's event loop: a Unix socket
 * (always) and a TCP socket (with --listen), the connection list and its limit, the
 * signal handlers, and the orderly shutdown: stop accepting, let every connection finish
 * the requests it has already sent, flush the responses, close, remove the socket file,
 * stop the executor, and let uv_run return. A second SIGTERM/SIGINT closes connections
 * at once (requests already running still complete, their responses are dropped).
 *
 * Connections (conn.c) reach the server only through the ta_conn_host (conn.h) it fills
 * at start and hands to each connection; conn.c does not include this header, so the
 * arrows between the two point one way. The server keeps its connection list and counters
 * itself and may use conn.h's API and the fields of struct ta_conn it owns or reads
 * (prev/next, counted, the handle, serial). */
#ifndef TA_DAEMON_SERVER_H
#define TA_DAEMON_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "conf.h"
#include "conn.h"
#include "dispatch.h"
#include "executor.h"

typedef struct ta_server ta_server;

/* The daemon's loop-side state. */
struct ta_server {
	uv_loop_t *loop;             /* the event loop */
	const ta_config *cfg;        /* settings (limits, paths) */
	ta_service *svc;             /* shared request state (registry, backend, counters) */
	ta_executor executor;        /* worker threads running requests */
	bool executor_started;       /* executor initialised (needs stopping) */
	bool executor_stopping;      /* ta_executor_stop called */
	uv_pipe_t unix_listener;     /* Unix socket listener */
	bool unix_open;              /* unix_listener initialised and not yet closed */
	char *unix_path;             /* the socket file we created (removed on shutdown) */
	uv_tcp_t tcp_listener;       /* TCP listener (--listen) */
	bool tcp_open;               /* tcp_listener initialised and not yet closed */
	uv_signal_t sig_term;        /* SIGTERM handler */
	uv_signal_t sig_int;         /* SIGINT handler */
	bool signals_open;           /* the signal handles are initialised and not closed */
	uv_timer_t shutdown_timer;   /* closes lingering connections (shutdown_timeout) */
	bool timer_open;             /* shutdown_timer is initialised and not closed */
	uv_timer_t sweep_timer;      /* periodic: timeouts of connections, held-back log counts */
	bool sweep_open;             /* sweep_timer is initialised and not closed */
	uv_check_t resume_check;     /* after each loop turn: wakes connections waiting for input
	                                budget once some was given back */
	bool check_open;             /* resume_check is initialised and not closed */
	bool resume_pending;         /* input budget was given back while connections wait */
	ta_log_limit refuse_log;     /* rate limit of the "too many connections" lines */
	ta_conn *conns;              /* every connection (a doubly-linked list) */
	unsigned nconns;             /* connections in the list, rejected ones included */
	unsigned nactive;            /* connections counted against max_connections */
	uint64_t next_serial;        /* serial number of the next connection (for logs) */
	bool draining;               /* shutdown has begun */
	bool forced;                 /* a second signal: close connections at once */
	ta_dispatch_scratch scratch; /* the loop thread's dispatch memory (inline requests) */
	ta_conn_host host;           /* what connections get of the server (conn.h) */
	bool inline_lone;            /* inline_max follows the busy connections (CUDA, auto) */
	uv_timer_t busy_timer;       /* counts the busy connections (inline_lone) */
	bool busy_timer_open;        /* busy_timer is initialised and not closed */
};

/* Starts the executor, the listeners and the signal handlers on loop. Returns TA_OK, or
 * an error naming what failed (the server is then stopped again: run the loop until it
 * is empty to release the handles). */
ta_status ta_server_start(ta_server *srv, uv_loop_t *loop, const ta_config *cfg, ta_service *svc,
                          ta_error *err);
/* Begins the orderly shutdown (idempotent; a second call closes connections at once). */
void ta_server_shutdown(ta_server *srv);

#endif /* TA_DAEMON_SERVER_H */
