/* server.h: the listeners and the life cycle of tileatomd's event loop: a Unix socket
 * (always) and a TCP socket (with --listen), the connection list and its limit, the
 * signal handlers, and the orderly shutdown: stop accepting, let every connection finish
 * the requests it has already sent, flush the responses, close, remove the socket file,
 * stop the executor, and let uv_run return. A second SIGTERM/SIGINT closes connections
 * at once (requests already running still complete, their responses are dropped).
 *
 * Connections (conn.c) use the server only through the functions at the end of this
 * file; conn.c defines TA_SERVER_OPAQUE before including it, so struct ta_server's
 * fields are out of its sight (the struct stays complete elsewhere: main.c allocates it).
 * The server keeps its connection list and counters itself and may use conn.h's API and
 * the fields of struct ta_conn it owns or reads (prev/next, counted, the handle, serial). */
#ifndef TA_DAEMON_SERVER_H
#define TA_DAEMON_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "conf.h"
#include "dispatch.h"
#include "executor.h"

typedef struct ta_conn ta_conn;
typedef struct ta_server ta_server;

#ifndef TA_SERVER_OPAQUE
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
	ta_conn *conns;              /* every connection (a doubly-linked list) */
	unsigned nconns;             /* connections in the list, rejected ones included */
	unsigned nactive;            /* connections counted against max_connections */
	uint64_t next_serial;        /* serial number of the next connection (for logs) */
	bool draining;               /* shutdown has begun */
	bool forced;                 /* a second signal: close connections at once */
	ta_dispatch_scratch scratch; /* the loop thread's dispatch memory (inline requests) */
	int64_t inline_max;          /* requests of at most this many elements run on the loop */
};
#endif /* TA_SERVER_OPAQUE */

/* Starts the executor, the listeners and the signal handlers on loop. Returns TA_OK, or
 * an error naming what failed (the server is then stopped again: run the loop until it
 * is empty to release the handles). */
ta_status ta_server_start(ta_server *srv, uv_loop_t *loop, const ta_config *cfg, ta_service *svc,
                          ta_error *err);
/* Begins the orderly shutdown (idempotent; a second call closes connections at once). */
void ta_server_shutdown(ta_server *srv);

/* What a connection (conn.c) may ask of the server. Loop thread unless said otherwise. */

/* The event loop that connection handles are initialised on. */
uv_loop_t *ta_server_loop(const ta_server *srv);
/* The settings; a connection reads its limits there (max_frame, max_pending,
 * max_write_queue). Constant while the server runs. */
const ta_config *ta_server_config(const ta_server *srv);
/* The shared request state handed to dispatch. Constant while the server runs, so any
 * thread may call this (the executor's workers do). */
ta_service *ta_server_service(const ta_server *srv);
/* The loop thread's dispatch scratch, for requests run inline. */
ta_dispatch_scratch *ta_server_scratch(ta_server *srv);
/* Most elements a request may process to run inline on the loop thread (-1: none runs
 * there; 0: only requests without elements, such as ping, list or describe). */
int64_t ta_server_inline_max(const ta_server *srv);
/* Hands a request job to the executor (its done callback runs later on the loop). */
void ta_server_submit(ta_server *srv, ta_job *job);
/* Numbers a new connection (1, 2, ...; for logs). */
uint64_t ta_server_next_serial(ta_server *srv);
/* Called by a connection about to be freed: takes it off the list and the counters. */
void ta_server_conn_gone(ta_server *srv, ta_conn *conn);
/* Closes the server's handles once nothing is left running (shutdown). */
void ta_server_check_done(ta_server *srv);

#endif /* TA_DAEMON_SERVER_H */
