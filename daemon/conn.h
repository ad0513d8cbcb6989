/* conn.h: one client connection. Input goes through a ta_frame_reader (a length over
 * max_frame is answered with RESOURCE_EXHAUSTED before anything is allocated, then the
 * connection closes); whole frames wait in a FIFO; at most one request of a connection
 * is on the executor at a time, so responses leave in request order while different
 * connections run in parallel. Backpressure: reading pauses while the FIFO (max_pending
 * requests, max_frame bytes) or the unsent responses (max_write_queue bytes) are over their
 * bounds, and queued requests wait while the unsent responses are over theirs; both resume
 * as the client takes its responses.
 *
 * End of a connection: EOF means "no more requests": the queued ones still run and are
 * answered, then the connection shuts down and closes. A read or write error closes at
 * once, dropping queued requests. A request already running always completes; when the
 * connection is gone by then, its response is dropped. The struct is freed only in the
 * close callback, and only when no request of it is running. */
#ifndef TA_DAEMON_CONN_H
#define TA_DAEMON_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "dispatch.h"
#include "executor.h"
#include "ta_frame.h"

struct ta_server;

/* Bytes of the per-connection read buffer handed to libuv. */
#define TA_CONN_READ_BUFFER 65536

/* One request waiting for or running on the executor. */
typedef struct ta_conn_item {
	ta_job job;                /* executor job (work on a worker, done on the loop) */
	struct ta_conn_item *next; /* next item in the connection's FIFO */
	struct ta_conn *conn;      /* owning connection */
	uint8_t *payload;          /* the frame's payload (NULL for a synthetic error) */
	uint32_t len;              /* payload bytes */
	bool synthetic;            /* answer with code/msg instead of decoding a payload */
	ta_status code;            /* synthetic: the status */
	char msg[256];             /* synthetic: the message */
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
	struct ta_server *srv;             /* the server */
	struct ta_conn *prev, *next;       /* server's connection list */
	uint64_t serial;                   /* connection number, for logs */
	ta_frame_reader reader;            /* incremental frame decoder */
	uint8_t rbuf[TA_CONN_READ_BUFFER]; /* libuv reads land here */
	ta_conn_item *q_head;              /* oldest queued request */
	ta_conn_item *q_tail;              /* newest queued request */
	unsigned q_len;                    /* requests queued (in flight excluded) */
	uint64_t q_bytes;                  /* payload bytes queued */
	ta_conn_item *inflight;            /* the request on the executor, or NULL */
	unsigned writes_pending;           /* uv_write requests not yet completed */
	uv_shutdown_t shutdown_req;        /* shutdown after the last response */
	bool counted;                      /* counted in nactive / service connections */
	bool reading;                      /* uv_read_start is in effect */
	bool read_done;                    /* no more requests will be read (EOF, error, limit) */
	bool shutdown_sent;                /* uv_shutdown issued */
	bool closing;                      /* uv_close issued */
	bool handle_closed;                /* the close callback ran */
};

/* Allocates a connection of the server's listener type (tcp: true for TCP) and
 * initialises its handle. Returns NULL when memory is short or libuv fails. */
struct ta_conn *ta_conn_new(struct ta_server *srv, bool tcp);
/* Starts serving an accepted connection. */
void ta_conn_start(struct ta_conn *conn);
/* Answers an accepted connection with one error response and closes it (limits). */
void ta_conn_reject(struct ta_conn *conn, ta_status code, const char *msg);
/* Closes the connection at once (queued requests are dropped; a running one completes). */
void ta_conn_close(struct ta_conn *conn);
/* Server shutdown: stop reading, finish queued requests, then shut down and close. */
void ta_conn_drain(struct ta_conn *conn);

#endif /* TA_DAEMON_CONN_H */
