/* conn.c: a client connection (its design, bounds and life cycle: conn.h).
 *
 * on_alloc hands libuv conn->rbuf; on_read passes the bytes to conn_consume, which takes
 * whole frames out (no copy when one is whole in rbuf) and runs each at once on the loop
 * (conn_run_inline) while nothing of the connection waits; a request too large for the loop,
 * and every one behind it, becomes an item of the FIFO that conn_pump runs in order;
 * conn_settle then hands conn->out to the socket (conn_flush). */
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>

#include "log.h"
#include "persist.h"

static void conn_settle(ta_conn *conn);

/* The bit of state TA_CONN_s in a set of states. */
#define TO(s) (1u << TA_CONN_##s)

/* Each state's name (logs) and the set of states it may move to (conn.h's table). */
static const struct {
	const char *name;
	unsigned next;
} states[] = {
    [TA_CONN_NEW] = {"new", TO(PAUSED) | TO(DRAINING) | TO(CLOSING)},
    [TA_CONN_READING] = {"reading", TO(PAUSED) | TO(DRAINING) | TO(CLOSING)},
    [TA_CONN_PAUSED] = {"paused", TO(READING) | TO(DRAINING) | TO(CLOSING)},
    [TA_CONN_DRAINING] = {"draining", TO(SHUTTING_DOWN) | TO(CLOSING)},
    [TA_CONN_SHUTTING_DOWN] = {"shutting down", TO(CLOSING)},
    [TA_CONN_CLOSING] = {"closing", TO(CLOSED)},
    [TA_CONN_CLOSED] = {"closed", 0},
};
/* Whether s is a state of the table. */
#define STATE_KNOWN(s) ((unsigned)(s) < sizeof(states) / sizeof(states[0]))

/* The one place conn->state changes; leaving READING stops reading. An illegal transition
 * is a bug: it is logged at error level and refused (the state stays; false is returned);
 * built with -DTA_DEBUG it aborts. */
static bool conn_transition(ta_conn *conn, ta_conn_state to)
{
	ta_conn_state from = conn->state;
	if (STATE_KNOWN(from) && STATE_KNOWN(to) && (states[from].next & (1u << to))) {
		if (from == TA_CONN_READING)
			uv_read_stop(&conn->h.stream);
		conn->state = to;
		return true;
	}
	ta_log(TA_LOG_ERR, "connection %" PRIu64 ": bug: illegal state transition %s -> %s",
	       conn->serial, STATE_KNOWN(from) ? states[from].name : "invalid",
	       STATE_KNOWN(to) ? states[to].name : "invalid");
#ifdef TA_DEBUG
	abort();
#endif
	return false;
}

/* True once uv_close was issued: nothing more is read, run or written (enum order). */
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
	if (conn_may_read(conn))
		conn_transition(conn, TA_CONN_DRAINING);
}

/* Takes n bytes of the input budget; false, with nothing taken, when they do not fit. */
static bool budget_take(ta_conn_host *host, uint64_t n)
{
	ta_input_budget *b = host->budget;
	if (!b->max) {
		atomic_fetch_add_explicit(&b->held, n, memory_order_relaxed);
		return true;
	}
	uint64_t held = atomic_load_explicit(&b->held, memory_order_relaxed);
	do {
		if (n > b->max || held > b->max - n) {
			host->budget_seen = held;
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(
	    &b->held, &held, held + n, memory_order_relaxed, memory_order_relaxed));
	return true;
}

/* Gives n bytes of the input budget back; the server wakes the waiters (of any loop). */
static void budget_give(ta_conn_host *host, uint64_t n)
{
	if (n == 0)
		return;
	atomic_fetch_sub_explicit(&host->budget->held, n, memory_order_seq_cst);
	if (atomic_load_explicit(&host->budget->waiters, memory_order_seq_cst))
		host->input_freed(host);
}

/* The connection starts (on) or stops waiting for input budget (budget_wait), counted
 * among the waiters of its loop and of all loops; nothing when it already does. */
static void budget_wait_set(ta_conn *conn, bool on)
{
	if (conn->budget_wait == on)
		return;
	conn->budget_wait = on;
	unsigned delta = on ? 1u : (unsigned)-1; /* -1 wraps: one fewer */
	atomic_fetch_add(&conn->host->input_waiters, delta);
	atomic_fetch_add(&conn->host->budget->waiters, delta);
}

/* Frees an item and whatever it still owns (its input budget too). */
static void item_free(ta_conn_item *item)
{
	budget_give(item->conn->host, item->reserved); /* nothing when 0 */
	free(item->payload);
	free(item->reply.frame);
	free(item);
}

/* Takes the head item off the FIFO. */
static ta_conn_item *conn_pop(ta_conn *conn)
{
	ta_conn_item *item = conn->q_head;
	conn->q_head = item->next;
	if (!conn->q_head)
		conn->q_tail = NULL;
	conn->q_len -= item->nframes;
	conn->q_bytes -= item->len;
	item->next = NULL;
	return item;
}

/* Frees every queued item (not the running one). */
static void conn_drop_queue(ta_conn *conn)
{
	while (conn->q_head)
		item_free(conn_pop(conn));
}

/* A response asked to close the connection: no more requests are read or run. */
static void conn_close_after(ta_conn *conn)
{
	conn_end_reads(conn);
	conn_drop_queue(conn);
}

/* Frees the connection once its handle is closed and no request of it is running. */
static void conn_maybe_free(ta_conn *conn)
{
	if (conn->state != TA_CONN_CLOSED || conn->inflight)
		return;
	conn_drop_queue(conn);
	ta_frame_reader_free(&conn->reader);
	budget_give(conn->host, conn->reader_reserved);
	ta_frame_buf_free(&conn->out);
	ta_frame_buf_free(&conn->sending);
	if (!conn->tcp)
		ta_shm_table_free(&conn->shm); /* unmaps the client's shared buffers */
	ta_async_run_free(conn->arun);
	conn->host->gone(conn->host, conn);
	free(conn);
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
	conn_transition(conn, TA_CONN_CLOSING);
	budget_wait_set(conn, false);
	if (conn->counted)
		conn->host->release(conn->host, conn); /* the slot is free at once */
	conn_drop_queue(conn);
	uv_close(&conn->h.handle, on_close);
}

/* Appends a new item of nframes requests to the FIFO: payload (len bytes, NULL for a
 * synthetic error) becomes the item's, reserved is the input budget it holds. NULL, with
 * nothing queued or taken over, when memory is short. */
static ta_conn_item *conn_enqueue(ta_conn *conn, uint8_t *payload, uint32_t len, uint32_t nframes,
                                  uint64_t reserved)
{
	ta_conn_item *item = malloc(sizeof(*item));
	if (!item)
		return NULL;
	*item = (ta_conn_item){
	    .conn = conn, .payload = payload, .len = len, .nframes = nframes, .reserved = reserved};
	if (conn->q_tail)
		conn->q_tail->next = item;
	else
		conn->q_head = item;
	conn->q_tail = item;
	conn->q_len += item->nframes;
	conn->q_bytes += item->len;
	return item;
}

/* Queues a synthetic error response (id 0) after which the connection closes; stops
 * reading. Closes the connection at once when even that cannot be allocated. */
static void conn_enqueue_error(ta_conn *conn, ta_status code, const char *msg)
{
	conn_end_reads(conn);
	ta_conn_item *item = conn_enqueue(conn, NULL, 0, 1, 0);
	if (!item) {
		ta_conn_close(conn);
		return;
	}
	item->code = code;
	snprintf(item->msg, sizeof(item->msg), "%s", msg);
}

/* Worker side of an item: decode, run, encode (only requests too large for the loop). */
static void item_work(ta_job *job)
{
	ta_conn_item *item = (ta_conn_item *)job;
	ta_service *svc = item->conn->host->svc;
	uint8_t *payload = item->payload;
	item->payload = NULL;
	/* the connection outlives its running item: its buffers stay mapped meanwhile */
	if (!item->batch) {
		ta_dispatch_frame_owned_session(svc, &item->conn->session, payload, item->len,
		                                &item->reply);
		return;
	}
	/* a batch: its frames in order, into one response buffer; a reply that closes the
	 * connection ends it (the requests after it are dropped, as from the FIFO). It also
	 * stops once its responses reach max_write_queue: item_done puts the frames not run
	 * back at the head of the FIFO, so that they wait for the client to read, as single
	 * requests do. */
	ta_dispatch_scratch scratch;
	ta_dispatch_scratch_init(&scratch);
	ta_frame_buf out = {NULL, 0, 0};
	bool close_after = false;
	uint32_t frames = 0;
	size_t done = ta_dispatch_run_batch(svc, &scratch, &item->conn->session, payload, item->len,
	                                    item->conn->host->cfg->max_write_queue, &out,
	                                    &close_after, &frames);
	item->reply = (ta_reply){out.data, out.data ? out.len : 0, close_after, scratch.log_seq};
	ta_dispatch_scratch_free(&scratch);
	item->nframes -= frames;
	item->async_off = (uint32_t)done; /* item_done queues the rest again (conn_requeue) */
	if (done < item->len && !close_after)
		item->payload = payload;
	else
		free(payload);
}

/* Unsent response bytes: those in conn->out and those of the write in flight. */
static uint64_t conn_unsent(const ta_conn *conn)
{
	return (uint64_t)conn->out.len + (conn->writing ? conn->sending.len : 0);
}

/* A write failed with rc: the connection closes. */
static void conn_write_failed(ta_conn *conn, int rc)
{
	ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": write failed: %s", conn->serial,
	       uv_strerror(rc));
	ta_conn_close(conn);
}

/* uv_write callback. */
static void on_write(uv_write_t *req, int status)
{
	ta_conn *conn = req->handle->data;
	conn->writing = false;
	conn->last_active_ms = uv_now(conn->host->loop);
	conn->sending.len = 0;
	if (conn_closing(conn))
		return;
	if (status < 0)
		conn_write_failed(conn, status);
	else
		conn_settle(conn);
}

/* Hands conn->out to the socket: as much as a non-blocking write takes at once, the rest
 * in one uv_write (when none is in flight; on_write flushes again). False when the
 * connection closed. */
static bool conn_flush(ta_conn *conn)
{
	if (conn_closing(conn) || conn->writing || conn->out.len == 0)
		return !conn_closing(conn);
	ta_persist *persist = conn->host->svc->persist;
	if (persist && conn->log_seq) {
		/* --fsync always: responses leave once the records behind them are durable
		 * (ta_conn_persisted flushes again) */
		int durable = ta_persist_durable(persist, conn->log_seq);
		if (durable < 0) {
			/* the held responses may not leave: one error (id 0) in their place,
			 * then the connection closes */
			char why[160], msg[400];
			ta_persist_failure(persist, why, sizeof(why));
			snprintf(msg, sizeof(msg),
			         "%s; the responses to this connection's requests that were not "
			         "durable yet are withheld (their updates are not in the log and "
			         "are lost at a restart); mutations are refused",
			         why);
			ta_log(TA_LOG_INFO, "connection %" PRIu64 ": %s", conn->serial, msg);
			conn->out.len = 0;
			conn->log_seq = 0;
			conn_close_after(conn);
			(void)ta_dispatch_error_append(conn->host->svc, 0, TA_UNAVAILABLE, msg,
			                               true, &conn->out);
		}
		if (durable == 0)
			return true;
	}
	uv_buf_t buf = uv_buf_init((char *)conn->out.data, (unsigned)conn->out.len);
	int rc = conn->out.len <= UINT32_MAX ? uv_try_write(&conn->h.stream, &buf, 1) : UV_EAGAIN;
	if (rc < 0 && rc != UV_EAGAIN && rc != UV_ENOSYS)
		goto failed;
	size_t done = rc > 0 ? (size_t)rc : 0;
	if (done == conn->out.len) {
		conn->out.len = 0;
		return true;
	}
	/* the rest goes out through libuv: the buffers swap, so that responses arriving in
	 * the meantime append to an empty conn->out */
	ta_frame_buf rest = conn->out;
	conn->out = conn->sending;
	conn->out.len = 0;
	conn->sending = rest;
	buf = uv_buf_init((char *)conn->sending.data + done, (unsigned)(conn->sending.len - done));
	rc = uv_write(&conn->write_req, &conn->h.stream, &buf, 1, on_write);
	if (rc == 0) {
		conn->writing = true;
		return true;
	}
failed:
	conn_write_failed(conn, rc);
	return false;
}

/* shutdown callback: the last response is out; close. */
static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	ta_conn_close(req->handle->data);
}

/* After requests of the connection ran (loop thread, nothing of it on a worker): their
 * responses wait for log record seq (0: none), the handshake is marked finished once Hello
 * (and Auth where needed) succeeded (the server is told), and a reply that asked to close
 * the connection (close_after) ends it. Inlined: conn_run_inline calls it for each request. */
static inline __attribute__((always_inline)) void conn_ran(ta_conn *conn, uint64_t seq,
                                                           bool close_after)
{
	if (seq > conn->log_seq)
		conn->log_seq = seq;
	const ta_session *s = &conn->session;
	if (!conn->handshaken && s->hello_done && (!s->auth_needed || s->authenticated)) {
		conn->handshaken = true;
		if (conn->host->handshaken)
			conn->host->handshaken(conn->host, conn);
	}
	if (close_after)
		conn_close_after(conn);
}

/* Runs one request on the loop thread, appending its response to conn->out, when it is
 * small enough (by payload, then by the elements its plan would process). Returns false,
 * with nothing done, when it must go to the executor. *closed (when given) tells whether
 * the request's answer asked to close the connection (its queue is dropped then). */
static bool conn_run_inline(ta_conn *conn, const uint8_t *payload, uint32_t len, bool *closed)
{
	int64_t inline_max = conn->host->inline_max;
	if (inline_max < 0 || len > TA_CONN_INLINE_PAYLOAD_MAX)
		return false;
	bool close_after = false;
	ta_dispatch_outcome o =
	    ta_dispatch_run_session(conn->host->svc, conn->host->scratch, &conn->session, payload,
	                            len, inline_max, &conn->out, &close_after);
	if (o == TA_DISPATCH_DEFER)
		return false;
	conn_ran(conn, conn->host->scratch->log_seq, close_after);
	if (closed)
		*closed = close_after;
	return true;
}

/* Cuts the bytes of item's frames that ran (async_off) off its payload. */
static void item_cut_run(ta_conn_item *item)
{
	if (!item->async_off)
		return;
	memmove(item->payload, item->payload + item->async_off, item->len - item->async_off);
	item->len -= item->async_off;
	item->async_off = 0;
}

/* Puts item back at the head of the FIFO (frames of it not run yet), its run bytes cut and
 * the response of what ran (already appended to conn->out) dropped. */
static void conn_requeue(ta_conn *conn, ta_conn_item *item)
{
	item_cut_run(item);
	free(item->reply.frame);
	item->reply = (ta_reply){0};
	item->next = conn->q_head;
	conn->q_head = item;
	if (!conn->q_tail)
		conn->q_tail = item;
	conn->q_len += item->nframes;
	conn->q_bytes += item->len;
}

/* The backend applied an item's group (any thread): item_async_done runs on the loop. */
static void item_applied(void *arg)
{
	ta_executor_complete((ta_job *)arg);
}

/* Loop side of an executor item: append the response, go on with the next request. */
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
	ta_reply reply = item->reply; /* the item may be freed before conn_ran */
	if (reply.frame) {
		if (conn->out.len == 0) { /* adopt the worker's buffer: no copy */
			ta_frame_buf_free(&conn->out);
			conn->out = (ta_frame_buf){reply.frame, reply.len, reply.len};
			item->reply.frame = NULL;
		} else if (ta_frame_buf_reserve(&conn->out, reply.len) == 0) {
			memcpy(conn->out.data + conn->out.len, reply.frame, reply.len);
			conn->out.len += reply.len;
		} else {
			ta_log(TA_LOG_ERR, "connection %" PRIu64 ": out of memory for a response",
			       conn->serial);
			item_free(item);
			ta_conn_close(conn);
			return;
		}
	}
	if (item->batch && item->payload && !reply.close_after)
		conn_requeue(conn, item); /* the frames a capped batch did not run */
	else
		item_free(item);
	conn_ran(conn, reply.log_seq, reply.close_after);
	conn_settle(conn);
}

static void item_async_done(ta_job *job);

/* Runs the batch item (conn->inflight) on the loop (host->async): its groups of small plans
 * go to the backend without waiting (item_async_done goes on when one is applied); from its
 * first request that is not a small plan it goes to a worker; it goes back to the FIFO while
 * the unsent responses are over max_write_queue. */
static void conn_async_run(ta_conn *conn, ta_conn_item *item)
{
	if (!conn->arun && !(conn->arun = ta_async_run_new(conn->host->svc)))
		ta_log(TA_LOG_WARNING,
		       "connection %" PRIu64 ": out of memory for a run on the "
		       "loop; a worker runs it",
		       conn->serial);
	while (item->async_off < item->len) {
		if (conn_unsent(conn) >= conn->host->cfg->max_write_queue) {
			conn->inflight = NULL;
			conn_requeue(conn, item);
			return;
		}
		size_t used = 0;
		uint32_t nf = 0;
		bool close_after = false;
		ta_async_step step = TA_ASYNC_REST;
		item->job.done = item_async_done;
		item->job.port = conn->host->port; /* before the backend may complete it */
		if (conn->arun)
			step = ta_async_run_step(
			    conn->arun, &conn->session, item->payload + item->async_off,
			    item->len - item->async_off, &conn->out, &close_after, &used, &nf,
			    item_applied, &item->job);
		item->async_off += (uint32_t)used;
		item->nframes -= nf;
		if (step == TA_ASYNC_PENDING) {
			ta_executor_expect(conn->host->port, &item->job);
			return;
		}
		if (close_after) {
			conn_close_after(conn);
			break;
		}
		if (step != TA_ASYNC_REST)
			continue;
		/* a request that is not a small plan: here when it may run on the loop (a ping,
		 * or what a lone request may), else the rest, from it on, goes to a worker */
		const uint8_t *frame = item->payload + item->async_off;
		uint32_t left = item->len - item->async_off; /* whole frames (conn_take_batch) */
		uint32_t flen = left >= TA_FRAME_HEADER ? ta_frame_get_header(frame) : UINT32_MAX;
		bool closed = false;
		if (left >= TA_FRAME_HEADER && flen <= left - TA_FRAME_HEADER &&
		    conn_run_inline(conn, frame + TA_FRAME_HEADER, flen, &closed)) {
			item->async_off += TA_FRAME_HEADER + flen;
			item->nframes--;
			if (closed) /* the queue is dropped already */
				break;
			continue;
		}
		item_cut_run(item);
		item->job.done = item_done; /* its work is item_work already (conn_pump) */
		conn->host->submit(conn->host, &item->job);
		return;
	}
	conn->inflight = NULL;
	item_free(item);
}

/* Loop side of an item's applied group: its answers, then the rest of the item. */
static void item_async_done(ta_job *job)
{
	ta_conn_item *item = (ta_conn_item *)job;
	ta_conn *conn = item->conn;
	bool close_after = false;
	ta_async_run_finish(conn->arun, &close_after); /* gives the tiles back in any case */
	if (conn_closing(conn) || close_after) {
		conn->inflight = NULL;
		item_free(item);
		if (conn_closing(conn)) {
			conn_maybe_free(conn);
			return;
		}
		conn_close_after(conn);
	} else {
		conn_async_run(conn, item);
	}
	conn_settle(conn);
}

/* Runs the FIFO in order while nothing of this connection is on the executor: small
 * requests and synthetic errors here, the first large one on the executor. */
static void conn_pump(ta_conn *conn)
{
	while (!conn_closing(conn) && !conn->inflight && conn->q_head) {
		/* Backpressure: no new response while the unsent ones are over the bound;
		 * on_write pumps again as they drain. */
		if (conn_unsent(conn) >= conn->host->cfg->max_write_queue)
			return;
		ta_conn_item *item = conn->q_head;
		if (!item->payload) { /* an error: conn_close_after drops it with the queue */
			(void)ta_dispatch_error_append(conn->host->svc, 0, item->code, item->msg,
			                               true, &conn->out);
			conn_close_after(conn);
			return;
		}
		if (!item->batch && conn_run_inline(conn, item->payload, item->len, NULL)) {
			/* close_after may have dropped the queue, item included */
			if (conn->q_head == item)
				item_free(conn_pop(conn));
			continue;
		}
		conn->inflight = conn_pop(conn);
		item->job.work = item_work;
		item->job.done = item_done;
		if (item->batch && conn->host->async)
			conn_async_run(conn, item);
		else
			conn->host->submit(conn->host, &item->job);
	}
}

/* alloc_cb: libuv reads into the connection's buffer; the frame reader copies out. */
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
	ta_conn *conn = handle->data;
	(void)suggested;
	*buf = uv_buf_init((char *)conn->rbuf, sizeof(conn->rbuf));
}

/* When no partial frame is pending and the input starts with at least batch_min whole
 * frames, queues them as one batch item (one copy of their bytes) and advances past them.
 * Returns false, with nothing taken, otherwise (or when memory is short: the frames then
 * go one by one). */
static bool conn_take_batch(ta_conn *conn, const uint8_t **data, size_t *len)
{
	unsigned batch_min = conn->host->batch_min;
	if (batch_min == 0 || conn->reader.header_have != 0 || !conn->handshaken)
		return false;
	uint32_t max = conn->host->cfg->max_frame;
	size_t span = 0;
	uint32_t n = 0;
	while (*len - span >= TA_FRAME_HEADER) {
		uint32_t fl = ta_frame_get_header(*data + span);
		if (fl > max || fl > *len - span - TA_FRAME_HEADER || span > UINT32_MAX / 2)
			break;
		span += TA_FRAME_HEADER + (size_t)fl;
		n++;
	}
	/* with async batches, a lone frame runs at once on the loop when the loop runs small
	 * requests itself (a lone client's request: no hand-over at all) */
	if (n < batch_min || (n == 1 && conn->host->async && conn->host->inline_max > 0) ||
	    !budget_take(conn->host, span))
		return false;
	uint8_t *copy = malloc(span);
	ta_conn_item *item = copy ? conn_enqueue(conn, copy, (uint32_t)span, n, span) : NULL;
	if (!item) {
		free(copy);
		budget_give(conn->host, span);
		return false;
	}
	memcpy(copy, *data, span);
	item->batch = true;
	*data += span;
	*len -= span;
	return true;
}

/* The length a frame prefix announces when the reader's partial prefix and the input
 * (data, at least the prefix's missing bytes) complete it. */
static uint32_t peek_length(const ta_frame_reader *r, const uint8_t *data)
{
	uint8_t hdr[TA_FRAME_HEADER];
	memcpy(hdr, r->header, r->header_have);
	memcpy(hdr + r->header_have, data, TA_FRAME_HEADER - r->header_have);
	return ta_frame_get_header(hdr);
}

/* Before the reader gathers a frame that is not whole in the input (data, len), reserves
 * its announced length from the input budget. Returns false when it does not fit (nothing
 * consumed); true when reserved, already reserved, or nothing needs reserving (the header
 * is incomplete, the frame is whole in the input, or its length is refused anyway). */
static bool conn_reserve_frame(ta_conn *conn, const uint8_t *data, size_t len)
{
	ta_frame_reader *r = &conn->reader;
	if (conn->reader_reserved || r->error || r->header_have == TA_FRAME_HEADER ||
	    r->header_have + len < TA_FRAME_HEADER)
		return true;
	uint32_t n = peek_length(r, data);
	if (n > r->max_payload || (r->header_have == 0 && len - TA_FRAME_HEADER >= n))
		return true;
	if (!budget_take(conn->host, n ? n : 1))
		return false;
	conn->reader_reserved = n ? n : 1;
	ta_log(TA_LOG_DEBUG,
	       "connection %" PRIu64 ": %" PRIu32 " bytes of the input budget held for a frame",
	       conn->serial, n);
	return true;
}

/* The input budget ran out: keeps the len unconsumed bytes at data (inside rbuf) and stops
 * reading until ta_conn_resume_input. */
static void conn_wait_budget(ta_conn *conn, const uint8_t *data, size_t len)
{
	conn->stash_off = (size_t)(data - conn->rbuf);
	conn->stash_len = len;
	if (!conn->budget_wait)
		conn->wait_since_ms = uv_now(conn->host->loop);
	budget_wait_set(conn, true);
	/* another loop may have given budget back between the failed take and the count
	 * above, seeing no waiter: look again (both sides are sequentially consistent) */
	if (atomic_load(&conn->host->budget->held) != conn->host->budget_seen)
		conn->host->input_freed(conn->host);
	ta_log(TA_LOG_DEBUG,
	       "connection %" PRIu64 ": input budget (max_input_total) used up; reading paused",
	       conn->serial);
}

/* Answers msg (RESOURCE_EXHAUSTED, id 0; logged) after the requests before it, then closes. */
static void conn_refuse(ta_conn *conn, const char *msg)
{
	ta_log(TA_LOG_INFO, "connection %" PRIu64 ": %s", conn->serial, msg);
	conn_enqueue_error(conn, TA_RESOURCE_EXHAUSTED, msg);
}

/* Takes every whole frame out of the received bytes: runs it at once when it is small and
 * nothing of the connection waits, else queues it (with a copy of its payload). Stops and
 * keeps the rest when the input budget runs out (conn_wait_budget). The requests run here
 * are one pipelined run (ta_dispatch_begin_run): with --data-dir their mutation lock is
 * kept between them and their log records go to the log together, at the end, before any
 * of their responses can leave. Then sets the frame timer. */
static void conn_consume(ta_conn *conn, const uint8_t *data, size_t len)
{
	ta_dispatch_begin_run(conn->host->svc, conn->host->scratch);
	char msg[256];
	const ta_config *cfg = conn->host->cfg;
	while (len > 0 && conn_may_read(conn)) {
		/* before the handshake is finished, a new frame announcing more than
		 * TA_CONN_HANDSHAKE_FRAME_MAX bytes is refused before anything is reserved */
		uint32_t early = 0;
		if (!conn->handshaken && conn->reader.header_have < TA_FRAME_HEADER &&
		    conn->reader.header_have + len >= TA_FRAME_HEADER &&
		    (early = peek_length(&conn->reader, data)) > TA_CONN_HANDSHAKE_FRAME_MAX) {
			snprintf(msg, sizeof(msg),
			         "frame of %" PRIu32
			         " bytes before the handshake: until it (Hello%s) "
			         "is finished a frame may have at most %u bytes; closing the "
			         "connection",
			         early, conn->session.auth_needed ? ", then Auth" : "",
			         TA_CONN_HANDSHAKE_FRAME_MAX);
			conn_refuse(conn, msg);
			break;
		}
		if (conn_take_batch(conn, &data, &len))
			continue;
		if (!conn_reserve_frame(conn, data, len)) {
			conn_wait_budget(conn, data, len);
			break;
		}
		const uint8_t *payload;
		uint32_t plen = 0;
		uint8_t *owned = NULL;
		const uint8_t *frame_at = data;
		size_t frame_left = len;
		ta_frame_status st =
		    ta_frame_reader_next(&conn->reader, &data, &len, &payload, &plen, &owned);
		if (st == TA_FRAME_NEED_MORE)
			break;
		if (st == TA_FRAME_READY) {
			conn->frame_done = true;
			uint64_t reserved = conn->reader_reserved; /* 0: whole in the input */
			conn->reader_reserved = 0;
			if (!conn->q_head && !conn->inflight &&
			    conn_unsent(conn) < cfg->max_write_queue &&
			    conn_run_inline(conn, payload, plen, NULL)) {
				free(owned);
				budget_give(conn->host, reserved);
				continue;
			}
			if (!owned) {
				if (!budget_take(conn->host, plen ? plen : 1)) {
					/* the frame stays in rbuf, read again once memory frees */
					conn_wait_budget(conn, frame_at, frame_left);
					break;
				}
				reserved = plen ? plen : 1;
				if ((owned = malloc(reserved)))
					memcpy(owned, payload, plen);
			}
			if (owned && conn_enqueue(conn, owned, plen, 1, reserved))
				continue;
			free(owned);
			budget_give(conn->host, reserved);
			conn_refuse(conn,
			            "out of memory queueing a request; closing the connection");
			break;
		}
		uint32_t announced = ta_frame_get_header(conn->reader.header);
		if (st == TA_FRAME_TOO_LARGE)
			snprintf(msg, sizeof(msg),
			         "frame of %" PRIu32 " bytes exceeds the limit of %" PRIu32
			         " bytes (max_frame); closing the connection",
			         announced, cfg->max_frame);
		else
			snprintf(msg, sizeof(msg),
			         "out of memory for a frame of %" PRIu32
			         " bytes; closing the connection",
			         announced);
		conn_refuse(conn, msg);
		break;
	}
	conn_ran(conn, ta_dispatch_end_run(conn->host->svc, conn->host->scratch), false);
	/* the frame timer runs while a partial frame is held: a frame gathered over several
	 * reads keeps the time of its first bytes, one begun in this read gets this read's */
	if (conn->reader.header_have == 0)
		conn->frame_since_ms = 0;
	else if (conn->frame_since_ms == 0 || conn->frame_done)
		conn->frame_since_ms = uv_now(conn->host->loop);
	conn->frame_done = false;
}

/* uv_close callback of a malloc'd handle. */
static void on_handle_freed(uv_handle_t *handle)
{
	free(handle);
}

int ta_conn_accept_fd(uv_loop_t *loop, uv_stream_t *from, bool tcp)
{
	uv_handle_t *tmp = malloc(tcp ? sizeof(uv_tcp_t) : sizeof(uv_pipe_t));
	int rc = !tmp  ? UV_ENOMEM
	         : tcp ? uv_tcp_init(loop, (uv_tcp_t *)tmp)
	               : uv_pipe_init(loop, (uv_pipe_t *)tmp, 0);
	if (rc != 0) {
		free(tmp);
		return rc;
	}
	uv_os_fd_t fd = -1;
	if ((rc = uv_accept(from, (uv_stream_t *)tmp)) == 0 && (rc = uv_fileno(tmp, &fd)) == 0 &&
	    (fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		rc = uv_translate_sys_error(errno);
	uv_close(tmp, on_handle_freed);
	return rc != 0 ? rc : fd;
}

/* Takes the fds that came with the bytes just read (libuv queued them on the ipc pipe) into
 * the connection's buffer table, oldest first (libuv hands them out only through uv_accept:
 * ta_conn_accept_fd). */
static void conn_take_fds(ta_conn *conn)
{
	while (!conn->tcp && uv_pipe_pending_count(&conn->h.pipe) > 0) {
		int fd = ta_conn_accept_fd(conn->host->loop, &conn->h.stream, false);
		if (fd < 0) { /* the next read tries again; a register meanwhile finds no fd */
			ta_log(TA_LOG_WARNING,
			       "connection %" PRIu64 ": cannot take a passed fd: %s", conn->serial,
			       uv_strerror(fd));
			return;
		}
		ta_shm_push_fd(&conn->shm, fd);
	}
}

/* At EOF: true when the peer closed both directions (POLLHUP: a Unix-socket peer that
 * closed, not one that only shut its writing side down), so that nobody can take the
 * answers of the queued requests any more. A TCP peer's close looks like a half-close
 * until a write fails. */
static bool conn_peer_gone(ta_conn *conn)
{
	uv_os_fd_t fd;
	if (uv_fileno(&conn->h.handle, &fd) != 0)
		return false;
	struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

/* read_cb: bytes, EOF or an error. */
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	ta_conn *conn = stream->data;
	(void)buf;
	if (nread == 0 || conn_closing(conn))
		return;
	if (nread == UV_EOF) {
		if ((conn->q_head || conn->inflight) && conn_peer_gone(conn)) {
			/* nobody will read the answers: drop the queue and the slot now (a
			 * running request completes, its answer is dropped) */
			ta_log(TA_LOG_DEBUG,
			       "connection %" PRIu64 ": peer gone with %u requests queued; closing",
			       conn->serial, conn->q_len);
			ta_conn_close(conn);
			return;
		}
		conn_end_reads(conn);
		if (conn->reader.header_have > 0) {
			char msg[256];
			snprintf(msg, sizeof(msg),
			         "connection closed in the middle of a frame (%zu of 4 prefix "
			         "bytes, %" PRIu32 " of %" PRIu32 " payload bytes)",
			         conn->reader.header_have, conn->reader.payload_have,
			         conn->reader.payload_len);
			ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": %s", conn->serial, msg);
			conn_enqueue_error(conn, TA_INVALID_ARGUMENT, msg);
		}
	} else if (nread < 0) {
		ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": read failed: %s", conn->serial,
		       uv_strerror((int)nread));
		ta_conn_close(conn);
		return;
	} else {
		conn_take_fds(conn);
		conn->host->input_seen = true;
		conn->last_active_ms = conn->last_read_ms = uv_now(conn->host->loop);
		conn_consume(conn, (const uint8_t *)conn->rbuf, (size_t)nread);
	}
	conn_settle(conn); /* nothing once the connection is closing */
}

/* Backpressure: READING <-> PAUSED by the bounds (other states: reads stopped for good). */
static void conn_update_reading(ta_conn *conn)
{
	if (conn->state != TA_CONN_READING && conn->state != TA_CONN_PAUSED)
		return;
	const ta_config *cfg = conn->host->cfg;
	bool want = !conn->budget_wait && conn->q_len < (unsigned)cfg->max_pending &&
	            conn->q_bytes < (uint64_t)cfg->max_frame &&
	            conn_unsent(conn) < cfg->max_write_queue;
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
		conn_transition(conn, TA_CONN_PAUSED);
	}
}

/* After a callback changed the connection: run what is queued, hand the responses to the
 * socket, adjust reading, and DRAINING -> SHUTTING_DOWN once no more requests will come
 * and all are answered. */
static void conn_settle(ta_conn *conn)
{
	/* a flush that wrote everything at once issues no uv_write, so no on_write will pump
	 * again: go on here while requests wait only for the output to drain */
	do {
		conn_pump(conn);
		if (!conn_flush(conn))
			return;
	} while (!conn->writing && !conn->inflight && conn->q_head && !conn_closing(conn) &&
	         conn_unsent(conn) < conn->host->cfg->max_write_queue);
	conn_update_reading(conn);
	if (conn->state != TA_CONN_DRAINING || conn->q_head || conn->inflight || conn->out.len)
		return;
	conn_transition(conn, TA_CONN_SHUTTING_DOWN);
	if (uv_shutdown(&conn->shutdown_req, &conn->h.stream, on_shutdown) != 0)
		ta_conn_close(conn);
}

ta_conn *ta_conn_new(ta_conn_host *host, bool tcp, uint64_t serial)
{
	ta_conn *conn = calloc(1, sizeof(*conn));
	if (!conn)
		return NULL;
	if (!tcp && !ta_shm_table_init(&conn->shm, host->svc->backend)) {
		ta_log(TA_LOG_ERR, "cannot initialise a connection's buffer table");
		free(conn);
		return NULL;
	}
	/* Unix sockets are ipc pipes: libuv reads them with recvmsg and queues the fds a client
	 * passes (shared buffers); on_read takes them before it parses the bytes they came with */
	int rc = tcp ? uv_tcp_init(host->loop, &conn->h.tcp)
	             : uv_pipe_init(host->loop, &conn->h.pipe, 1);
	if (rc != 0) {
		ta_log(TA_LOG_ERR, "cannot initialise a connection handle: %s", uv_strerror(rc));
		if (!tcp)
			ta_shm_table_free(&conn->shm);
		free(conn);
		return NULL;
	}
	conn->h.handle.data = conn;
	conn->host = host;
	conn->serial = serial;
	conn->tcp = tcp;
	conn->last_active_ms = uv_now(host->loop);
	conn->state = TA_CONN_NEW;
	ta_frame_reader_init(&conn->reader, host->cfg->max_frame);
	return conn;
}

/* A Unix-socket peer's uid (SO_PEERCRED); TA_OWNER_PUBLIC for TCP or unreadable credentials. */
static ta_owner conn_peer_identity(ta_conn *conn)
{
	if (conn->tcp)
		return TA_OWNER_PUBLIC;
	uv_os_fd_t fd;
	int rc = uv_fileno(&conn->h.handle, &fd);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
	    len == sizeof(cred))
		return (ta_owner)cred.uid;
	ta_log(TA_LOG_INFO, "connection %" PRIu64 ": cannot read the peer's credentials: %s",
	       conn->serial, rc != 0 ? uv_strerror(rc) : strerror(errno));
	return TA_OWNER_PUBLIC;
}

void ta_conn_start(ta_conn *conn)
{
	ta_error err = {0};
	if (ta_session_init(&conn->session, conn->host->svc, conn->tcp, conn_peer_identity(conn),
	                    conn->serial, &err) != TA_OK) {
		ta_log(TA_LOG_ERR, "connection %" PRIu64 ": %s", conn->serial, err.msg);
		ta_conn_close(conn);
		return;
	}
	conn->session.shm = conn->tcp ? NULL : &conn->shm;
	conn->accepted_ms = conn->last_active_ms = uv_now(conn->host->loop);
	if (conn_transition(conn, TA_CONN_PAUSED))
		conn_update_reading(conn);
}

void ta_conn_fail(ta_conn *conn, ta_status code, const char *msg)
{
	if (conn_closing(conn))
		return;
	ta_log(TA_LOG_INFO, "connection %" PRIu64 ": %s", conn->serial, msg);
	if (!conn->writing)
		(void)ta_dispatch_error_append(conn->host->svc, 0, code, msg, true, &conn->out);
	(void)conn_flush(conn);
	ta_conn_close(conn);
}

void ta_conn_check_timeouts(ta_conn *conn, uint64_t now)
{
	if (conn_closing(conn))
		return;
	const ta_config *cfg = conn->host->cfg;
	char msg[200] = "";
	/* the frame's clock waits while the daemon holds the connection up (a request of it
	 * running, queued ones it can run, input memory awaited), not while the peer does
	 * (queued requests waiting for the peer to take its responses) */
	bool held_up = conn->inflight || conn->budget_wait ||
	               (conn->q_head && conn_unsent(conn) < cfg->max_write_queue);
	bool frame_open = cfg->frame_timeout_ms && conn->frame_since_ms && conn_may_read(conn);
	if (frame_open && held_up)
		conn->frame_since_ms = now;
	/* the handshake's deadline runs from the accept; a request of it on a worker (which
	 * may be the Hello or Auth that finishes it) is waited for */
	if (cfg->handshake_timeout_ms && !conn->handshaken && conn_may_read(conn) &&
	    !conn->inflight && now - conn->accepted_ms >= cfg->handshake_timeout_ms)
		snprintf(msg, sizeof(msg),
		         "the handshake (Hello%s) was not finished within %" PRIu64
		         " ms (handshake_timeout); closing the connection",
		         conn->session.auth_needed ? ", then Auth" : "", cfg->handshake_timeout_ms);
	else if (frame_open && !held_up && now - conn->frame_since_ms >= cfg->frame_timeout_ms)
		snprintf(msg, sizeof(msg),
		         "a partial frame (%" PRIu32 " of %" PRIu32
		         " payload bytes) was held for more than %" PRIu64
		         " ms (frame_timeout); closing the connection",
		         conn->reader.payload_have, conn->reader.payload_len,
		         cfg->frame_timeout_ms);
	/* a wait for input memory may last twice frame_timeout: by then every reservation
	 * that held the memory when the wait began has ended (its frame done or timed out) */
	else if (cfg->frame_timeout_ms && conn->budget_wait &&
	         now - conn->wait_since_ms >= 2 * cfg->frame_timeout_ms)
		snprintf(msg, sizeof(msg),
		         "waited more than %" PRIu64 " ms (twice frame_timeout) for input memory: "
		         "%" PRIu64 " of the %" PRIu64
		         " bytes all connections may hold (max_input_total) are taken; closing "
		         "the connection",
		         2 * cfg->frame_timeout_ms,
		         (uint64_t)atomic_load(&conn->host->budget->held), conn->host->budget->max);
	else if (cfg->idle_timeout_ms && !conn->inflight && !conn->budget_wait &&
	         now - conn->last_active_ms >= cfg->idle_timeout_ms)
		snprintf(msg, sizeof(msg),
		         "nothing was sent or taken for %" PRIu64
		         " ms (idle_timeout); closing the connection",
		         cfg->idle_timeout_ms);
	if (msg[0])
		ta_conn_fail(conn, TA_UNAVAILABLE, msg);
}

uint64_t ta_conn_stalled_since(const ta_conn *conn, const char **why)
{
	if (!conn_may_read(conn) || conn->inflight)
		return 0;
	if (!conn->handshaken) {
		*why = "had not finished its handshake";
		return conn->accepted_ms ? conn->accepted_ms : 1;
	}
	if (conn->budget_wait) {
		*why = "was waiting for input memory";
		return conn->wait_since_ms ? conn->wait_since_ms : 1;
	}
	if (conn->frame_since_ms && !conn->q_head) {
		*why = "held a partial frame";
		return conn->frame_since_ms;
	}
	return 0;
}

void ta_conn_resume_input(ta_conn *conn)
{
	if (!conn->budget_wait || conn_closing(conn))
		return;
	budget_wait_set(conn, false);
	size_t off = conn->stash_off, len = conn->stash_len;
	uint64_t since = conn->wait_since_ms;
	conn->stash_len = 0;
	conn->frame_since_ms = 0; /* the wait was not the peer's doing */
	if (len > 0) {
		conn_consume(conn, (const uint8_t *)conn->rbuf + off, len);
		/* still waiting (never when closed): the wait goes on, not anew */
		if (conn->budget_wait)
			conn->wait_since_ms = since;
	}
	conn_settle(conn);
}

void ta_conn_reject(ta_conn *conn, ta_status code, const char *msg)
{
	conn_enqueue_error(conn, code, msg);
	conn_settle(conn);
}

void ta_conn_persisted(ta_conn *conn)
{
	if (!conn_closing(conn) && conn->out.len && !conn->writing)
		conn_settle(conn);
}

void ta_conn_drain(ta_conn *conn)
{
	conn_end_reads(conn); /* closing: a no-op, as is conn_settle */
	conn_settle(conn);
}
