/* conn.c: a client connection (see conn.h).
 *
 * Happy path: alloc_cb hands libuv the connection's read buffer; read_cb feeds the bytes
 * to the frame reader; each whole frame becomes an item at the tail of the FIFO; pump()
 * sends the head item to the executor when nothing of this connection is running; the
 * done callback writes the encoded response (uv_write) and pumps the next item.
 *
 * Failure modes: a length prefix over max_frame or a failed payload allocation queues a
 * synthetic error (answered in order, after the requests before it) and stops reading; a
 * payload that does not decode is answered by the worker with close_after; in all three
 * cases the queue is dropped and the connection shuts down after the last response. Read
 * and write errors close at once. Memory is freed in the close callback, or later when
 * the running request completes.
 *
 * Life cycle: conn->state (conn.h's table) changes only in conn_transition, which checks
 * the table in legal_next. The server is reached only through server.h's functions. */
#include "conn.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
/* conn.c sees struct ta_server only through server.h's functions. */
#define TA_SERVER_OPAQUE
#include "server.h"

static void conn_update_reading(ta_conn *conn);
static void conn_maybe_finish(ta_conn *conn);
static void conn_pump(ta_conn *conn);

/* Bit of a state in a set of states. */
#define STATE_BIT(s) (1u << (s))

/* The legal transitions: for each state, the set of states it may move to (conn.h's table). */
static const unsigned legal_next[] = {
    [TA_CONN_NEW] =
        STATE_BIT(TA_CONN_PAUSED) | STATE_BIT(TA_CONN_DRAINING) | STATE_BIT(TA_CONN_CLOSING),
    [TA_CONN_READING] =
        STATE_BIT(TA_CONN_PAUSED) | STATE_BIT(TA_CONN_DRAINING) | STATE_BIT(TA_CONN_CLOSING),
    [TA_CONN_PAUSED] =
        STATE_BIT(TA_CONN_READING) | STATE_BIT(TA_CONN_DRAINING) | STATE_BIT(TA_CONN_CLOSING),
    [TA_CONN_DRAINING] = STATE_BIT(TA_CONN_SHUTTING_DOWN) | STATE_BIT(TA_CONN_CLOSING),
    [TA_CONN_SHUTTING_DOWN] = STATE_BIT(TA_CONN_CLOSING),
    [TA_CONN_CLOSING] = STATE_BIT(TA_CONN_CLOSED),
    [TA_CONN_CLOSED] = 0,
};

const char *ta_conn_state_name(ta_conn_state state)
{
	switch (state) {
	case TA_CONN_NEW:
		return "new";
	case TA_CONN_READING:
		return "reading";
	case TA_CONN_PAUSED:
		return "paused";
	case TA_CONN_DRAINING:
		return "draining";
	case TA_CONN_SHUTTING_DOWN:
		return "shutting down";
	case TA_CONN_CLOSING:
		return "closing";
	case TA_CONN_CLOSED:
		return "closed";
	}
	return "invalid";
}

/* The one place conn->state changes. An illegal transition is a bug: it is logged at error
 * level and refused (the state stays; false is returned); built with -DTA_DEBUG it aborts. */
static bool conn_transition(ta_conn *conn, ta_conn_state to)
{
	ta_conn_state from = conn->state;
	if ((unsigned)from < sizeof(legal_next) / sizeof(legal_next[0]) &&
	    (unsigned)to < sizeof(legal_next) / sizeof(legal_next[0]) &&
	    (legal_next[from] & STATE_BIT(to))) {
		conn->state = to;
		return true;
	}
	ta_log(TA_LOG_ERR, "connection %" PRIu64 ": bug: illegal state transition %s -> %s",
	       conn->serial, ta_conn_state_name(from), ta_conn_state_name(to));
#ifdef TA_DEBUG
	abort();
#endif
	return false;
}

/* True once uv_close was issued: nothing more is read, run or written (relies on the
 * enum's order). */
static bool conn_closing(const ta_conn *conn)
{
	return conn->state >= TA_CONN_CLOSING;
}

/* True while more requests may still be read: NEW, READING, PAUSED (enum order). */
static bool conn_may_read(const ta_conn *conn)
{
	return conn->state <= TA_CONN_PAUSED;
}

/* No more requests will be read (EOF, a bad frame, close_after, a refused connection,
 * server drain): stops reading and enters DRAINING; a no-op once reads already ended. */
static void conn_end_reads(ta_conn *conn)
{
	if (!conn_may_read(conn))
		return;
	if (conn->state == TA_CONN_READING)
		uv_read_stop(&conn->h.stream);
	conn_transition(conn, TA_CONN_DRAINING);
}

/* Frees an item and whatever it still owns. */
static void item_free(ta_conn_item *item)
{
	free(item->payload);
	free(item->reply.frame);
	free(item);
}

/* Frees every queued item (not the running one). */
static void conn_drop_queue(ta_conn *conn)
{
	ta_conn_item *item = conn->q_head;
	while (item) {
		ta_conn_item *next = item->next;
		item_free(item);
		item = next;
	}
	conn->q_head = conn->q_tail = NULL;
	conn->q_len = 0;
	conn->q_bytes = 0;
}

/* Frees the connection once its handle is closed and no request of it is running. */
static void conn_maybe_free(ta_conn *conn)
{
	if (conn->state != TA_CONN_CLOSED || conn->inflight)
		return;
	conn_drop_queue(conn);
	ta_frame_reader_free(&conn->reader);
	ta_server *srv = conn->srv;
	ta_server_conn_gone(srv, conn);
	free(conn);
	ta_server_check_done(srv);
}

/* uv_close callback. */
static void on_close(uv_handle_t *handle)
{
	ta_conn *conn = handle->data;
	conn_transition(conn, TA_CONN_CLOSED);
	ta_log(TA_LOG_DEBUG, "connection %" PRIu64 " closed", conn->serial);
	conn_maybe_free(conn);
}

void ta_conn_close(ta_conn *conn)
{
	if (conn_closing(conn))
		return;
	if (conn->state == TA_CONN_READING)
		uv_read_stop(&conn->h.stream);
	conn_transition(conn, TA_CONN_CLOSING);
	conn_drop_queue(conn);
	uv_close(&conn->h.handle, on_close);
}

/* Appends an item to the FIFO. */
static void conn_enqueue(ta_conn *conn, ta_conn_item *item)
{
	item->conn = conn;
	item->next = NULL;
	if (conn->q_tail)
		conn->q_tail->next = item;
	else
		conn->q_head = item;
	conn->q_tail = item;
	conn->q_len++;
	conn->q_bytes += item->len;
}

/* Queues a synthetic error response (id 0) after which the connection closes; stops
 * reading. Returns false when even that could not be allocated (the caller closes). */
static bool conn_enqueue_error(ta_conn *conn, ta_status code, const char *msg)
{
	conn_end_reads(conn);
	ta_conn_item *item = calloc(1, sizeof(*item));
	if (!item)
		return false;
	item->synthetic = true;
	item->code = code;
	snprintf(item->msg, sizeof(item->msg), "%s", msg);
	conn_enqueue(conn, item);
	return true;
}

/* Worker side of an item: decode, run, encode. */
static void item_work(ta_job *job)
{
	ta_conn_item *item = (ta_conn_item *)job;
	ta_service *svc = ta_server_service(item->conn->srv);
	if (item->synthetic) {
		ta_dispatch_error(svc, 0, item->code, item->msg, true, &item->reply);
	} else {
		uint8_t *payload = item->payload;
		item->payload = NULL;
		ta_dispatch_frame_owned(svc, payload, item->len, &item->reply);
	}
}

/* Carries one response buffer through uv_write. */
typedef struct conn_write {
	uv_write_t req; /* the libuv request (req.handle is the connection) */
	uint8_t *frame; /* the encoded frame, freed when written */
} conn_write;

/* uv_write callback. */
static void on_write(uv_write_t *req, int status)
{
	conn_write *w = (conn_write *)req;
	ta_conn *conn = req->handle->data;
	free(w->frame);
	free(w);
	conn->writes_pending--;
	if (status < 0) {
		if (!conn_closing(conn)) {
			ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": write failed: %s",
			       conn->serial, uv_strerror(status));
			ta_conn_close(conn);
		}
		return;
	}
	conn_pump(conn);
	conn_update_reading(conn);
	conn_maybe_finish(conn);
}

/* Sends one frame (ownership passes here). Returns false when the connection closed. */
static bool conn_write_frame(ta_conn *conn, uint8_t *frame, size_t len)
{
	conn_write *w = malloc(sizeof(*w));
	if (!w) {
		free(frame);
		ta_log(TA_LOG_ERR, "connection %" PRIu64 ": out of memory writing a response",
		       conn->serial);
		ta_conn_close(conn);
		return false;
	}
	w->frame = frame;
	uv_buf_t buf = uv_buf_init((char *)frame, (unsigned)len);
	int rc = uv_write(&w->req, &conn->h.stream, &buf, 1, on_write);
	if (rc != 0) {
		free(frame);
		free(w);
		ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": write failed: %s", conn->serial,
		       uv_strerror(rc));
		ta_conn_close(conn);
		return false;
	}
	conn->writes_pending++;
	return true;
}

static void item_done(ta_job *job);

/* Sends the head of the FIFO to the executor when nothing of this connection runs. */
static void conn_pump(ta_conn *conn)
{
	if (conn_closing(conn) || conn->inflight || !conn->q_head)
		return;
	/* Backpressure: no new response while the unsent ones are over the bound; on_write
	 * pumps again as they drain. */
	if (uv_stream_get_write_queue_size(&conn->h.stream) >=
	    ta_server_config(conn->srv)->max_write_queue)
		return;
	ta_conn_item *item = conn->q_head;
	conn->q_head = item->next;
	if (!conn->q_head)
		conn->q_tail = NULL;
	conn->q_len--;
	conn->q_bytes -= item->len;
	item->next = NULL;
	item->job.work = item_work;
	item->job.done = item_done;
	conn->inflight = item;
	ta_server_submit(conn->srv, &item->job);
}

/* Loop side of an item: write the response, go on with the next request. */
static void item_done(ta_job *job)
{
	ta_conn_item *item = (ta_conn_item *)job;
	ta_conn *conn = item->conn;
	conn->inflight = NULL;
	if (conn_closing(conn)) {
		item_free(item);
		conn_maybe_free(conn);
		return;
	}
	bool close_after = item->reply.close_after;
	uint8_t *frame = item->reply.frame;
	size_t len = item->reply.len;
	item->reply.frame = NULL;
	item_free(item);
	if (frame && !conn_write_frame(conn, frame, len))
		return;
	if (close_after) {
		conn_end_reads(conn);
		conn_drop_queue(conn);
	}
	conn_pump(conn);
	conn_update_reading(conn);
	conn_maybe_finish(conn);
}

/* alloc_cb: libuv reads into the connection's buffer; the frame reader copies out. */
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
	ta_conn *conn = handle->data;
	(void)suggested;
	*buf = uv_buf_init((char *)conn->rbuf, sizeof(conn->rbuf));
}

/* Feeds received bytes to the frame reader and queues every whole frame. */
static void conn_consume(ta_conn *conn, const uint8_t *data, size_t len)
{
	char msg[256];
	while (len > 0 && conn_may_read(conn)) {
		ta_frame_status st = ta_frame_reader_feed(&conn->reader, &data, &len);
		if (st == TA_FRAME_NEED_MORE)
			break;
		if (st == TA_FRAME_READY) {
			ta_conn_item *item = calloc(1, sizeof(*item));
			uint32_t plen = 0;
			uint8_t *payload = ta_frame_reader_take(&conn->reader, &plen);
			if (!item) {
				free(payload);
				snprintf(msg, sizeof(msg),
				         "out of memory queueing a request; closing the "
				         "connection");
				if (!conn_enqueue_error(conn, TA_RESOURCE_EXHAUSTED, msg))
					ta_conn_close(conn);
				break;
			}
			item->payload = payload;
			item->len = plen;
			conn_enqueue(conn, item);
			continue;
		}
		uint32_t announced = ta_frame_get_header(conn->reader.header);
		if (st == TA_FRAME_TOO_LARGE)
			snprintf(msg, sizeof(msg),
			         "frame of %" PRIu32 " bytes exceeds the limit of %" PRIu32
			         " bytes (max_frame); closing the connection",
			         announced, ta_server_config(conn->srv)->max_frame);
		else
			snprintf(msg, sizeof(msg),
			         "out of memory for a frame of %" PRIu32
			         " bytes; closing the connection",
			         announced);
		ta_log(TA_LOG_INFO, "connection %" PRIu64 ": %s", conn->serial, msg);
		if (!conn_enqueue_error(conn, TA_RESOURCE_EXHAUSTED, msg))
			ta_conn_close(conn);
		break;
	}
}

/* read_cb: bytes, EOF or an error. */
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	ta_conn *conn = stream->data;
	(void)buf;
	if (nread == 0 || conn_closing(conn))
		return;
	if (nread == UV_EOF) {
		conn_end_reads(conn);
		if (conn->reader.header_have > 0) {
			char msg[256];
			snprintf(msg, sizeof(msg),
			         "connection closed in the middle of a frame (%zu of 4 prefix "
			         "bytes, %" PRIu32 " of %" PRIu32 " payload bytes)",
			         conn->reader.header_have, conn->reader.payload_have,
			         conn->reader.payload_len);
			ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": %s", conn->serial, msg);
			if (!conn_enqueue_error(conn, TA_INVALID_ARGUMENT, msg)) {
				ta_conn_close(conn);
				return;
			}
		}
	} else if (nread < 0) {
		ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": read failed: %s", conn->serial,
		       uv_strerror((int)nread));
		ta_conn_close(conn);
		return;
	} else {
		conn_consume(conn, (const uint8_t *)conn->rbuf, (size_t)nread);
		if (conn_closing(conn))
			return;
	}
	conn_pump(conn);
	conn_update_reading(conn);
	conn_maybe_finish(conn);
}

/* Backpressure: READING <-> PAUSED according to the bounds (other states: nothing to do,
 * reads are already stopped for good). */
static void conn_update_reading(ta_conn *conn)
{
	if (conn->state != TA_CONN_READING && conn->state != TA_CONN_PAUSED)
		return;
	const ta_config *cfg = ta_server_config(conn->srv);
	bool want = conn->q_len < (unsigned)cfg->max_pending &&
	            conn->q_bytes < (uint64_t)cfg->max_frame &&
	            uv_stream_get_write_queue_size(&conn->h.stream) < cfg->max_write_queue;
	if (want && conn->state == TA_CONN_PAUSED) {
		int rc = uv_read_start(&conn->h.stream, on_alloc, on_read);
		if (rc != 0) {
			ta_log(TA_LOG_WARNING, "connection %" PRIu64 ": cannot read: %s",
			       conn->serial, uv_strerror(rc));
			ta_conn_close(conn);
			return;
		}
		conn_transition(conn, TA_CONN_READING);
	} else if (!want && conn->state == TA_CONN_READING) {
		uv_read_stop(&conn->h.stream);
		conn_transition(conn, TA_CONN_PAUSED);
	}
}

/* shutdown callback: the last response is out; close. */
static void on_shutdown(uv_shutdown_t *req, int status)
{
	ta_conn *conn = req->handle->data;
	(void)status;
	ta_conn_close(conn);
}

/* DRAINING -> SHUTTING_DOWN once no more requests will come and all are answered. */
static void conn_maybe_finish(ta_conn *conn)
{
	if (conn->state != TA_CONN_DRAINING || conn->q_head || conn->inflight)
		return;
	conn_transition(conn, TA_CONN_SHUTTING_DOWN);
	int rc = uv_shutdown(&conn->shutdown_req, &conn->h.stream, on_shutdown);
	if (rc != 0)
		ta_conn_close(conn);
}

ta_conn *ta_conn_new(ta_server *srv, bool tcp)
{
	ta_conn *conn = calloc(1, sizeof(*conn));
	if (!conn)
		return NULL;
	uv_loop_t *loop = ta_server_loop(srv);
	int rc = tcp ? uv_tcp_init(loop, &conn->h.tcp) : uv_pipe_init(loop, &conn->h.pipe, 0);
	if (rc != 0) {
		ta_log(TA_LOG_ERR, "cannot initialise a connection handle: %s", uv_strerror(rc));
		free(conn);
		return NULL;
	}
	conn->h.handle.data = conn;
	conn->srv = srv;
	conn->serial = ta_server_next_serial(srv);
	conn->state = TA_CONN_NEW;
	ta_frame_reader_init(&conn->reader, ta_server_config(srv)->max_frame);
	return conn;
}

void ta_conn_start(ta_conn *conn)
{
	if (conn_transition(conn, TA_CONN_PAUSED))
		conn_update_reading(conn);
}

void ta_conn_reject(ta_conn *conn, ta_status code, const char *msg)
{
	if (!conn_enqueue_error(conn, code, msg)) {
		ta_conn_close(conn);
		return;
	}
	conn_pump(conn);
}

void ta_conn_drain(ta_conn *conn)
{
	if (conn_closing(conn))
		return;
	conn_end_reads(conn);
	conn_maybe_finish(conn);
}
