/* conn.h: one client connection. Input goes through a ta_frame_reader (a length over
 * max_frame is answered RESOURCE_EXHAUSTED before anything is allocated, then the
 * connection closes). A small request (at most host->inline_max elements) of a connection
 * with nothing waiting runs at once on the loop thread, straight from the read buffer; a
 * larger one goes to the executor and the requests behind it wait in a FIFO, so responses
 * leave in request order and large requests never stall other connections. A read that
 * brings at least host->batch_min whole frames (a pipelining client) goes to one worker job
 * as a batch, so that busy connections spread over the cores; with host->async (a backend
 * with apply_async, --async-apply) the loop runs the batch itself, handing its small plans
 * to the backend without waiting (ta_async_run) and answering them when the completion
 * comes back through the loop's executor port; the rest of a batch from its first request
 * that is not a small plan goes to a worker. One item of a connection is in flight at a time.
 * Responses go to one output buffer per connection and leave in one write once the loop is
 * done with the input (uv_try_write, else one uv_write in flight at a time).
 * Backpressure: reading pauses while the FIFO (max_pending requests, max_frame bytes) or
 * the unsent responses (max_write_queue bytes) are over their bounds, and queued requests
 * wait while the unsent responses are; both resume as the client takes its responses.
 *
 * End: EOF means "no more requests": the queued ones are still answered, then the
 * connection shuts down and closes. A read or write error closes at once, dropping the
 * queue. A running request always completes (its response dropped when the connection is
 * gone); the struct is freed in the close callback once no request of it runs.
 *
 * Life cycle: conn->state (ta_conn_state), changed only by conn.c's one transition
 * function, which refuses (and logs at error level as a bug) any transition not in this table:
 *
 *   from             to             when
 *   NEW              PAUSED         ta_conn_start (then on to READING at once)
 *   READING          PAUSED         a bound is reached: FIFO full or responses unsent
 *   PAUSED           READING        every bound is clear again (uv_read_start succeeded)
 *   NEW, READING,    DRAINING       EOF, a frame over max_frame, out of memory for a
 *    PAUSED                          frame, a reply with close_after, ta_conn_reject
 *                                    (NEW: one error response, then the end), or
 *                                    ta_conn_drain (server shutdown)
 *   DRAINING         SHUTTING_DOWN  FIFO empty and nothing running (last response queued)
 *   NEW, READING,    CLOSING        ta_conn_close: read or write error, out of memory,
 *    PAUSED,                         uv_read_start or uv_shutdown failed, the shutdown
 *    DRAINING,                       callback (from SHUTTING_DOWN), accept failed or the
 *    SHUTTING_DOWN                   server already draining (from NEW), forced shutdown
 *   CLOSING          CLOSED         the uv_close callback
 *
 * uv_read_start is in effect only in READING (leaving it calls uv_read_stop). `counted`
 * (a max_connections slot, fixed by the server at accept) is given back (host->release) as
 * soon as the connection enters CLOSING, even while a request of it runs, so that peers
 * that are gone never keep others out; a refused connection runs through the same states
 * uncounted.
 *
 * Input budget: what all connections of every loop hold (partial frames, queued requests)
 * is bounded by host->budget (atomic reservations). A partial frame reserves its announced
 * length when it starts, a queued request its payload; when that does not fit, the
 * connection keeps the bytes already read (in rbuf), stops reading (budget_wait) and goes on
 * once memory frees (ta_conn_resume_input), so that reservations held can always finish.
 * Timeouts (ta_conn_check_timeouts, from the server's sweep): a partial frame held longer
 * than frame_timeout (the clock waits while the daemon holds the connection up), a wait for
 * input memory longer than twice frame_timeout, or idle_timeout without a byte sent or
 * taken, is answered UNAVAILABLE and closed.
 *
 * The handshake (Hello, and Auth on TCP to a daemon with a secret): until the loop has seen
 * it finished (conn->handshaken), a frame may announce at most TA_CONN_HANDSHAKE_FRAME_MAX
 * bytes (a larger one is answered RESOURCE_EXHAUSTED and closes the connection before
 * anything is reserved), frames do not go to workers in batches, and handshake_timeout
 * after the accept the connection is answered UNAVAILABLE and closed. host->handshaken
 * tells the server (max_unauthenticated); ta_conn_stalled_since tells it which connection
 * to close when a newcomer finds every slot taken. */
#ifndef TA_DAEMON_CONN_H
#define TA_DAEMON_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "conf.h"
#include "dispatch.h"
#include "shmbuf.h"
#include "executor.h"
#include "ta_frame.h"

typedef struct ta_conn ta_conn;

/* The input all connections of every event loop may hold together (max_input_total):
 * shared by the loops, so atomics. */
typedef struct ta_input_budget {
	uint64_t max;               /* bytes all connections may hold (0: unlimited) */
	atomic_uint_least64_t held; /* bytes reserved now */
	atomic_uint waiters;        /* connections of every loop waiting for budget */
} ta_input_budget;

/* What a connection needs from the event loop that owns it, handed over at creation: the
 * server fills one per loop and keeps it alive while connections live. Connections know
 * nothing else of the server (conn.c does not include server.h). That loop's thread
 * only, except svc, which workers use too, budget, shared by the loops, and
 * input_waiters, which other loops read. */
typedef struct ta_conn_host {
	uv_loop_t *loop;              /* the loop connection handles are initialised on */
	const ta_config *cfg;         /* limits: max_frame, max_pending, max_write_queue */
	ta_service *svc;              /* shared request state handed to dispatch */
	ta_dispatch_scratch *scratch; /* the loop thread's dispatch memory (inline requests) */
	int64_t inline_max;           /* most elements of a request run on the loop (-1: none) */
	unsigned batch_min;           /* frames of one read that make a worker's batch (0: never) */
	/* hands a request job to the executor (its done callback runs later on the loop) */
	void (*submit)(struct ta_conn_host *host, ta_job *job);
	/* a connection is about to be freed: the server forgets it (list, counts, shutdown) */
	void (*gone)(struct ta_conn_host *host, struct ta_conn *conn);
	/* a connection entered CLOSING: the server takes its max_connections slot back */
	void (*release)(struct ta_conn_host *host, struct ta_conn *conn);
	/* budget came back while connections wait: the server resumes them soon, not in here */
	void (*input_freed)(struct ta_conn_host *host);
	/* the connection finished its handshake (the server's count of those in theirs) */
	void (*handshaken)(struct ta_conn_host *host, struct ta_conn *conn);
	ta_input_budget *budget;   /* input all connections may hold (shared by the loops) */
	atomic_uint input_waiters; /* connections of this loop waiting for input budget */
	uint64_t budget_seen;      /* budget->held when a take of this loop last failed */
	bool input_seen;           /* bytes read since the loop's busy-poll check last looked */
	bool async;                /* batches run on the loop through apply_async (--async-apply) */
	ta_executor_port *port;    /* where this loop's completions come back (async) */
} ta_conn_host;

/* Bytes of the per-connection read buffer handed to libuv. */
#define TA_CONN_READ_BUFFER 65536
/* Largest frame payload a connection may announce before its handshake is finished. */
#define TA_CONN_HANDSHAKE_FRAME_MAX 4096u
/* Whole frames one read must bring for them to go to a worker as one batch job. */
#define TA_CONN_BATCH_MIN 4
/* Largest request payload tried on the loop thread: a larger one carries enough data to
 * be worth a worker, and is not decoded twice. */
#define TA_CONN_INLINE_PAYLOAD_MAX 65536

/* Life cycle of a connection, in the order it runs through (the table at the top). */
typedef enum ta_conn_state {
	TA_CONN_NEW,           /* handle initialised, not started; nothing read yet */
	TA_CONN_READING,       /* reads allowed and uv_read_start in effect */
	TA_CONN_PAUSED,        /* reads allowed but stopped: a bound is reached (backpressure) */
	TA_CONN_DRAINING,      /* no more reads, ever; queued requests still run and are answered */
	TA_CONN_SHUTTING_DOWN, /* all answered; uv_shutdown issued, awaiting its callback */
	TA_CONN_CLOSING,       /* uv_close issued; queue dropped; a running request completes */
	TA_CONN_CLOSED         /* the close callback ran; freed once no request of it runs */
} ta_conn_state;

/* One request waiting for or running on the executor. */
typedef struct ta_conn_item {
	ta_job job;                /* executor job (work on a worker, done on the loop) */
	struct ta_conn_item *next; /* next item in the connection's FIFO */
	struct ta_conn *conn;      /* owning connection */
	uint8_t *payload;          /* payload (queued NULL: answer code/msg); batch: whole frames */
	uint32_t len;              /* payload bytes */
	bool batch;                /* a run of nframes small frames for one worker job */
	uint32_t nframes;          /* requests in the item (1, or a batch's count) not run yet */
	uint32_t async_off;        /* a batch: the bytes before this ran (async: plans point in) */
	uint64_t reserved;         /* bytes of the input budget the item holds */
	ta_status code;            /* no payload: the status to answer */
	char msg[256];             /* no payload: the message to answer */
	ta_reply reply;            /* the response, filled by the worker */
} ta_conn_item;

/* A client connection. */
struct ta_conn {
	union {
		uv_handle_t handle;        /* generic view */
		uv_stream_t stream;        /* stream view */
		uv_pipe_t pipe;            /* Unix socket connection */
		uv_tcp_t tcp;              /* TCP connection */
	} h;                               /* the libuv handle (first: handle.data points to us) */
	ta_conn_host *host;                /* what the owning server provides */
	struct ta_conn *prev, *next;       /* server's connection list */
	uint64_t serial;                   /* connection number, for logs */
	uint64_t last_read_ms;             /* uv_now of the last read that brought bytes */
	ta_frame_reader reader;            /* incremental frame decoder */
	uint8_t rbuf[TA_CONN_READ_BUFFER]; /* libuv reads land here */
	ta_conn_item *q_head;              /* oldest queued request */
	ta_conn_item *q_tail;              /* newest queued request */
	unsigned q_len;                    /* requests queued (in flight excluded) */
	uint64_t q_bytes;                  /* payload bytes queued */
	ta_conn_item *inflight;            /* the request on the executor, or NULL */
	ta_frame_buf out;                  /* responses not yet handed to libuv */
	ta_frame_buf sending;              /* the bytes of the uv_write in flight */
	uv_write_t write_req;              /* the one uv_write in flight */
	bool writing;                      /* write_req is in flight */
	uv_shutdown_t shutdown_req;        /* shutdown after the last response */
	ta_conn_state state;               /* life cycle (see the top of this file) */
	bool counted;                      /* holds a max_connections slot (server's, at accept) */
	bool tcp;                          /* a TCP connection (else a Unix socket) */
	ta_session session;                /* handshake state and identity, for dispatch */
	uint64_t reader_reserved;          /* input budget reserved for the partial frame */
	bool budget_wait;                  /* stopped until input budget frees */
	size_t stash_off;                  /* budget_wait: unconsumed bytes start at rbuf + this */
	size_t stash_len;                  /* budget_wait: bytes read but not consumed yet */
	uint64_t wait_since_ms;            /* budget_wait: loop time the wait began */
	uint64_t last_active_ms;           /* loop time of the last byte read or written */
	uint64_t frame_since_ms;           /* loop time the partial frame began (0: none) */
	bool frame_done;                   /* a frame was taken since the frame timer was set */
	ta_shm_table shm;                  /* Unix socket: the client's shared buffers (shmbuf.h) */
	uint64_t log_seq;                  /* out leaves once this record is durable (persist.h) */
	uint64_t accepted_ms;              /* loop time the connection was started */
	bool handshaken;                   /* the loop saw Hello (and Auth where needed) succeed */
	bool pending;                      /* counted among those in their handshake (server's) */
	uint64_t accepted_turn;            /* the owning loop's turn at the accept (server's) */
	ta_async_run *arun;                /* its batches' run on the loop (async; made lazily) */
};

/* Allocates connection number serial (for logs) of the listener type (tcp: true for TCP)
 * for host and initialises its handle. Returns NULL when memory is short or libuv fails. */
struct ta_conn *ta_conn_new(ta_conn_host *host, bool tcp, uint64_t serial);
/* Accepts what is pending on from (a connection, or an fd passed over an ipc pipe) into a
 * temporary handle and returns a duplicate of its descriptor (the handle closes with its
 * own), or a negative libuv error (UV_ENOMEM: still pending). */
int ta_conn_accept_fd(uv_loop_t *loop, uv_stream_t *from, bool tcp);
/* Starts serving an accepted connection. */
void ta_conn_start(struct ta_conn *conn);
/* Answers an accepted connection with one error response and closes it (limits). */
void ta_conn_reject(struct ta_conn *conn, ta_status code, const char *msg);
/* Closes the connection at once (queued requests are dropped; a running one completes). */
void ta_conn_close(struct ta_conn *conn);
/* Server shutdown: stop reading, finish queued requests, then shut down and close. */
void ta_conn_drain(struct ta_conn *conn);
/* Answers UNAVAILABLE and closes when one of the timeouts above ran out (now: loop time, ms). */
void ta_conn_check_timeouts(struct ta_conn *conn, uint64_t now);
/* Answers code / msg (id 0) as far as the socket takes it at once, then closes (for a peer
 * that may not be reading). */
void ta_conn_fail(struct ta_conn *conn, ta_status code, const char *msg);
/* The loop time (now: the loop's time in ms) since which the connection has kept others
 * waiting without doing its part: in its handshake since it was accepted, holding a partial
 * frame the peer has not finished, or waiting for input budget; 0 when it is none of these
 * (or closing, or a request of it is running). *why names which. */
uint64_t ta_conn_stalled_since(const struct ta_conn *conn, const char **why);
/* Input budget was freed: a connection waiting for it (budget_wait) tries again. */
void ta_conn_resume_input(struct ta_conn *conn);
/* Log records became durable (persist.h): sends the responses that waited for them. */
void ta_conn_persisted(struct ta_conn *conn);

#endif /* TA_DAEMON_CONN_H */
