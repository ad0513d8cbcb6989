/* server.h: the listeners and the life cycle of tileatomd's event loops: a Unix socket
 * (always) and a TCP socket (with --listen), the event loops (--loops: loop 0 on the main
 * thread, the others on threads of their own, each owning its connections), the
 * connection limits, the signal handlers, and the orderly shutdown: stop accepting, let
 * every connection finish the requests it has sent and flush the responses, close, remove
 * the socket file, stop the loops and the executor. A second SIGTERM/SIGINT closes
 * connections at once (running requests complete, their responses are dropped).
 *
 * Connections reach the server only through their loop's ta_conn_host (conn.h); the server
 * keeps their lists and counts in the fields of struct ta_conn it owns (prev/next, counted,
 * pending).
 *
 * Slots: max_connections in all; TCP at most max_connections - unix_reserve (local clients
 * always find room); at most max_unauthenticated per transport in their handshake (Hello,
 * and Auth where needed). A newcomer over a limit first makes room on the main loop: over
 * max_unauthenticated it closes the oldest connection of its transport still in its
 * handshake that has been polled for input at least once (a burst accepted in one loop turn
 * is admitted over the cap as far as the slots allow); over the other limits the one stalled
 * longest (in its handshake, holding a partial frame or waiting for input memory, for at
 * least TA_SERVER_STALL_MS; for a TCP newcomer a TCP one). Only when there is none is it
 * refused. */
#ifndef TA_DAEMON_SERVER_H
#define TA_DAEMON_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "conf.h"
#include "conn.h"
#include "dispatch.h"
#include "executor.h"

typedef struct ta_server ta_server;

/* How long a connection must have been stalled (ta_conn_stalled_since) before a newcomer
 * that finds every slot taken may close it to make room. */
#define TA_SERVER_STALL_MS 1000u

/* An accepted socket on its way from the main loop to the loop that will own it. */
typedef struct ta_server_handoff {
	struct ta_server_handoff *next; /* next in the receiving loop's queue */
	int fd;                         /* the socket (the receiving loop closes it on failure) */
	bool tcp;                       /* a TCP connection (else a Unix socket) */
	uint64_t serial;                /* connection number, for logs */
} ta_server_handoff;

/* What another thread asks of a loop (ta_server_loop.wake_flags). */
enum {
	TA_LOOP_WAKE_RESUME = 1u << 0,    /* input budget was given back: wake the waiters */
	TA_LOOP_WAKE_PERSISTED = 1u << 1, /* log records became durable */
	TA_LOOP_WAKE_DRAIN = 1u << 2,     /* shutdown: drain every connection */
	TA_LOOP_WAKE_FORCE = 1u << 3      /* second signal: close every connection now */
};

/* One event loop and the connections it owns (loop 0: the main loop, with the listeners and
 * the signals). Every field is that loop's thread only, except the ones lock guards. Its
 * handles start zeroed, and are open once initialised until closed (server.c's handle_open). */
typedef struct ta_server_loop {
	struct ta_server *srv;       /* the server */
	unsigned index;              /* 0: the main loop */
	uv_loop_t *loop;             /* its libuv loop (index 0: the server's) */
	uv_loop_t own_loop;          /* the loop of index > 0 (loop points here once initialised) */
	uv_pipe_t spare_probe;       /* index > 0: opened and closed at start, so that libuv
	                                takes the loop's spare fd (EMFILE) then, not later */
	pthread_t thread;            /* its thread (index > 0) */
	bool thread_started;         /* the thread runs (ta_server_free joins it) */
	ta_conn_host host;           /* what its connections get of the server (conn.h) */
	ta_dispatch_scratch scratch; /* its dispatch memory (inline requests) */
	ta_executor_port port;       /* index > 0: its large requests come back here (once open) */
	ta_conn *conns;              /* its connections (a doubly-linked list) */
	uv_timer_t sweep_timer;      /* periodic: timeouts of its connections */
	uv_check_t resume_check;     /* after each turn: wakes connections waiting for input */
	bool resume_pending;         /* input budget was given back while connections wait */
	uint64_t turn;               /* loop iterations so far (resume_check): a connection
	                                accepted in turn T has been polled by turn T + 2 */
	uv_check_t spin_check;       /* --busy-poll: keeps spin_idle active after input */
	uv_idle_t spin_idle;         /* --busy-poll: while active, the loop never sleeps */
	uint64_t spin_until_ns;      /* uv_hrtime() until which spin_idle stays active */
	uv_timer_t busy_timer;       /* counts the busy connections (inline_lone) */
	uv_async_t wake;             /* other threads' requests: handoffs, wake_flags */
	pthread_mutex_t lock;        /* guards wake_open, wake_flags and the handoff queue */
	bool wake_open;              /* wake is initialised and not closed (lock) */
	unsigned wake_flags;         /* TA_LOOP_WAKE_* asked and not yet done (lock) */
	ta_server_handoff *handoff_head, **handoff_tail; /* sockets to adopt, tail link (lock) */
	bool draining;                                   /* shutdown has reached this loop */
	bool forced;                                     /* its connections were closed at once */
	bool finished;                                   /* drained, its handles closed */
} ta_server_loop;

/* The daemon's server: listeners, signals and the event loops (handles as in a loop). */
struct ta_server {
	uv_loop_t *loop;           /* the main event loop (loop 0's) */
	const ta_config *cfg;      /* settings (limits, paths) */
	ta_service *svc;           /* shared request state (registry, backend, counters) */
	ta_executor executor;      /* worker threads running requests */
	bool executor_started;     /* executor initialised and not stopped yet */
	uv_pipe_t unix_listener;   /* Unix socket listener */
	bool unix_bound;           /* we created cfg->socket_path (removed on shutdown) */
	uv_tcp_t tcp_listener;     /* TCP listener (--listen) */
	uv_signal_t sig_term;      /* SIGTERM handler */
	uv_signal_t sig_int;       /* SIGINT handler */
	uv_timer_t shutdown_timer; /* closes lingering connections (shutdown_timeout) */
	uv_async_t main_wake;      /* a loop finished its shutdown (tells the main loop) */
	pthread_mutex_t lock;      /* guards loops_finished (a loop sends main_wake under it) */
	bool lock_init;            /* lock initialised */
	unsigned loops_finished;   /* loops that finished their shutdown (lock) */
	ta_log_limit refuse_log;   /* rate limit of the "too many connections" lines */
	ta_input_budget budget;    /* input all connections may hold (max_input_total) */
	atomic_uint nactive;       /* connections counted against max_connections */
	atomic_uint ntcp;          /* of those, TCP connections (max_connections - unix_reserve) */
	atomic_uint npending[2];   /* of those, the ones in their handshake ([1]: TCP, [0]: Unix;
	                              max_unauthenticated each) */
	atomic_uint nconns;        /* connections of every loop, rejected ones included */
	uint64_t next_serial;      /* serial number of the next connection (for logs) */
	ta_server_loop *loops;     /* the event loops (loops[0]: the main loop) */
	unsigned nloops;           /* event loops asked for (--loops) */
	unsigned async_poll_us;    /* how long a loop polls for its completions (async_poll) */
	unsigned nloops_ready;     /* loops with their lock initialised (shut down and freed) */
	unsigned next_loop;        /* round-robin: the loop the next connection goes to */
	bool draining;             /* shutdown has begun */
	bool forced;               /* a second signal: close connections at once */
	bool inline_lone;          /* inline_max follows the busy connections (CUDA, auto) */
};

/* Starts the executor, the listeners and the signal handlers on loop. Returns TA_OK, or
 * an error naming what failed (the server is then stopped again: run the loop until it
 * is empty to release the handles). */
ta_status ta_server_start(ta_server *srv, uv_loop_t *loop, const ta_config *cfg, ta_service *svc,
                          ta_error *err);
/* Begins the orderly shutdown (idempotent; a second call closes connections at once).
 * Main loop thread. */
void ta_server_shutdown(ta_server *srv);
/* After uv_run of the main loop returned: joins the loop threads, closes their loops and
 * frees what ta_server_start allocated. */
void ta_server_free(ta_server *srv);

#endif /* TA_DAEMON_SERVER_H */
