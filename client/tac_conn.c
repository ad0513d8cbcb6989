/* tac_conn.c: the client's socket. tac_conn_open connects (Unix path or TCP, non-blocking,
 * bounded by a timeout); tac_conn_submit packs a request as one frame at the end of the
 * output buffer (tac_conn_submit_template writes a template's bytes there) and queues its
 * id as pending; the buffer is written out by a synchronous call, before a receive waits,
 * or once it holds TAC_FLUSH_THRESHOLD bytes. tac_conn_receive reads frames into a queue,
 * decodes the oldest and checks its id against the oldest pending one; for split submits,
 * tac_conn_receive_newest takes the newest request's response off the queue's tail and
 * tac_conn_wait_window reads until few enough requests are unanswered.
 *
 * Failure modes: a write that would block polls for readability too and parses what
 * arrives into the frame queue, so a pipelining client never deadlocks against a daemon
 * that stops reading until its responses are drained. EOF, socket errors, timeouts,
 * oversized or undecodable frames and mismatched ids break the connection: the first error
 * is kept and every later call reports it. */
#include "tac_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Nanoseconds on the monotonic clock. */
static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A deadline (monotonic milliseconds) timeout_ms from now; -1 when there is none. */
static int64_t deadline_from(int timeout_ms)
{
	return timeout_ms > 0 ? now_ns() / 1000000 + timeout_ms : -1;
}

/* Milliseconds left until deadline as a poll() timeout (-1: forever, 0: expired). */
static int remaining_ms(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t left = deadline - now_ns() / 1000000;
	if (left <= 0)
		return 0;
	return left > 1000000000 ? 1000000000 : (int)left;
}

/* Waits until fd has one of events; returns its revents (ready), 0 (deadline passed) or -1
 * (poll failed, errno set). */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};
	int n;
	while ((n = poll(&p, 1, remaining_ms(deadline))) < 0 && errno == EINTR)
		;
	return n > 0 ? p.revents : n;
}

/* Formats the connect failure for address and errno e. */
static int connect_error(const char *address, int e, tileatom_error *err)
{
	return tac_err(err, TILEATOM_E_IO, "cannot connect to %s: %s%s", address, strerror(e),
	               e == ENOENT || e == ECONNREFUSED ? " (is tileatomd running?)" : "");
}

/* Connects a new non-blocking socket of family (type, protocol) to sa by deadline into *out. */
static int connect_one(int family, int type, int protocol, const struct sockaddr *sa, socklen_t len,
                       const char *address, int64_t deadline, int *out, tileatom_error *err)
{
	int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
	if (fd < 0)
		return tac_err(err, TILEATOM_E_IO, "cannot create a socket: %s", strerror(errno));
	int rc, soerr = 0;
	do
		rc = connect(fd, sa, len);
	while (rc < 0 && errno == EINTR);
	socklen_t sl = sizeof(soerr);
	if (rc == 0)
		rc = TILEATOM_OK;
	else if (errno != EINPROGRESS && errno != EAGAIN)
		rc = connect_error(address, errno, err);
	else if ((rc = wait_fd(fd, POLLOUT, deadline)) == 0)
		rc = tac_err(err, TILEATOM_E_TIMEOUT, "cannot connect to %s: timed out", address);
	else if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		rc = connect_error(address, errno, err);
	else
		rc = soerr != 0 ? connect_error(address, soerr, err) : TILEATOM_OK;
	if (rc == TILEATOM_OK)
		*out = fd;
	else
		close(fd);
	return rc;
}

/* Connects to a Unix socket path. */
static int open_unix(const char *path, int64_t deadline, int *out, tileatom_error *err)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sun.sun_path))
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "socket path %s is longer than %zu bytes", path,
		               sizeof(sun.sun_path) - 1);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	return connect_one(AF_UNIX, SOCK_STREAM, 0, (const struct sockaddr *)&sun, sizeof(sun),
	                   path, deadline, out, err);
}

/* Connects to host:port over TCP, trying every address getaddrinfo gives. */
static int open_tcp(const char *address, const char *host, const char *port, int64_t deadline,
                    int *out, tileatom_error *err)
{
	struct addrinfo *res = NULL;
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	int gai = getaddrinfo(host, port, &hints, &res);
	if (gai != 0)
		return tac_err(err, TILEATOM_E_IO, "cannot resolve %s: %s", address,
		               gai_strerror(gai));
	int rc = tac_err(err, TILEATOM_E_IO, "cannot connect to %s: no usable address", address);
	for (struct addrinfo *ai = res; ai && rc != TILEATOM_E_TIMEOUT && rc != TILEATOM_OK;
	     ai = ai->ai_next)
		rc = connect_one(ai->ai_family, ai->ai_socktype, ai->ai_protocol, ai->ai_addr,
		                 ai->ai_addrlen, address, deadline, out, err);
	freeaddrinfo(res);
	int one = 1;
	if (rc == TILEATOM_OK) /* small requests must not wait for Nagle; failure costs latency */
		(void)setsockopt(*out, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return rc;
}

/* Frees a decoded response r (NULL: nothing) unless it is c's fast-decoded one. */
static void release_response(tileatom_client *c, Tileatom__Response *r)
{
	if (r && r != &c->fast.resp)
		tileatom__response__free_unpacked(r, NULL);
}

int tac_conn_open(const char *address, int timeout_ms, tileatom_client **out, tileatom_error *err)
{
	bool is_unix;
	char *host = NULL, *port = NULL;
	*out = NULL;
	int rc = tac_parse_address(address, &is_unix, &host, &port, err);
	if (rc != TILEATOM_OK)
		return rc;
	int fd = -1;
	int64_t deadline = deadline_from(timeout_ms);
	rc = is_unix ? open_unix(address, deadline, &fd, err)
	             : open_tcp(address, host, port, deadline, &fd, err);
	free(host);
	free(port);
	if (rc != TILEATOM_OK)
		return rc;
	tileatom_client *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return tac_err(err, TILEATOM_E_NOMEM, "out of memory");
	}
	c->fd = fd;
	c->unix_socket = -1;
	c->stage_min = TAC_SHM_STAGE_MIN;
	c->address = strdup(address);
	c->rxbuf = malloc(TAC_RECV_CHUNK);
	c->pending_cap = 64;
	c->pending = malloc(c->pending_cap * sizeof(*c->pending));
	c->rxq_cap = 16;
	c->rxq = malloc(c->rxq_cap * sizeof(*c->rxq));
	ta_frame_reader_init(&c->reader, TAC_DEFAULT_MAX_RESPONSE);
	if (!c->address || !c->rxbuf || !c->pending || !c->rxq) {
		tac_client_free(c);
		return tac_err(err, TILEATOM_E_NOMEM, "out of memory");
	}
	*out = c;
	return TILEATOM_OK;
}

void tac_client_free(tileatom_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	for (size_t k = 0; c->rxq && k < c->rxq_count; k++)
		free(c->rxq[(c->rxq_head + k) & (c->rxq_cap - 1)].owned);
	ta_frame_reader_free(&c->reader);
	ta_frame_buf_free(&c->txbuf);
	release_response(c, c->last);
	tac_wire_response_free(&c->fast);
	free(c->rxq);
	free(c->pending);
	free(c->rxbuf);
	ta_frame_buf_free(&c->rxstore);
	free(c->address);
	free(c);
}

int tac_conn_break(tileatom_client *c, tileatom_error *err)
{
	if (!c->broken) {
		c->broken = true;
		if (err)
			c->broken_err = *err;
		else
			tac_err(&c->broken_err, TILEATOM_E_IO, "connection failed");
	}
	return c->broken_err.code;
}

/* Doubles a power-of-two ring of esize-byte elements, its entries moved to its start; -1
 * when memory is short. */
static int ring_grow(void **buf, size_t *cap, size_t *head, size_t count, size_t esize)
{
	size_t ncap = *cap * 2;
	uint8_t *nb = malloc(ncap * esize);
	if (!nb)
		return -1;
	uint8_t *ob = *buf;
	for (size_t i = 0; i < count; i++)
		memcpy(nb + i * esize, ob + ((*head + i) & (*cap - 1)) * esize, esize);
	free(ob);
	*buf = nb;
	*cap = ncap;
	*head = 0;
	return 0;
}

/* The bytes of a queued frame. */
static const uint8_t *frame_data(const tileatom_client *c, const tac_frame *f)
{
	return f->owned ? f->owned : c->rxstore.data + f->off;
}

/* Queues a received frame: owned (a malloc'd payload taken over, freed on failure too), or
 * len bytes at data, copied into the receive store when small, else into an allocation. */
static int rxq_push(tileatom_client *c, uint8_t *owned, const uint8_t *data, uint32_t len,
                    tileatom_error *err)
{
	if (c->rxq_count == c->rxq_cap && ring_grow((void **)&c->rxq, &c->rxq_cap, &c->rxq_head,
	                                            c->rxq_count, sizeof(*c->rxq)) < 0) {
		free(owned);
		return tac_err(err, TILEATOM_E_NOMEM, "out of memory queueing a response");
	}
	/* the frame is written straight into its queue slot, counted once it is whole */
	tac_frame *f = &c->rxq[(c->rxq_head + c->rxq_count) & (c->rxq_cap - 1)];
	*f = (tac_frame){owned, c->rxstore.len, len};
	if (!owned) {
		bool alone = len > TAC_RXSTORE_FRAME_MAX; /* (so len > 0) */
		if (alone ? !(f->owned = malloc(len))
		          : c->rxstore.cap - c->rxstore.len < len &&
		                ta_frame_buf_reserve(&c->rxstore, len) != 0)
			return tac_err(err, TILEATOM_E_NOMEM,
			               "out of memory queueing a response of %u bytes", len);
		memcpy(alone ? f->owned : c->rxstore.data + f->off, data, len);
		c->rxstore.len += alone ? 0 : len;
	}
	c->rxq_count++;
	return TILEATOM_OK;
}

/* Releases frame f just taken off the queue (the oldest, or the newest: the end of the
 * store); the store starts over when the queue is empty, and drops its consumed start once
 * that is over half of it. */
static inline __attribute__((always_inline)) void rxq_release(tileatom_client *c,
                                                              const tac_frame *f, bool newest)
{
	if (f->owned)
		free(f->owned);
	else if (newest)
		c->rxstore.len = f->off;
	else if (f->off + f->len > c->rxstore_from)
		c->rxstore_from = f->off + f->len;
	if (c->rxq_count == 0) {
		c->rxstore.len = 0;
		c->rxstore_from = 0;
	} else if (c->rxstore_from >= TAC_RXSTORE_FRAME_MAX &&
	           c->rxstore_from > c->rxstore.len / 2) {
		size_t from = c->rxstore_from;
		memmove(c->rxstore.data, c->rxstore.data + from, c->rxstore.len - from);
		c->rxstore.len -= from;
		c->rxstore_from = 0;
		for (size_t k = 0; k < c->rxq_count; k++) {
			tac_frame *q = &c->rxq[(c->rxq_head + k) & (c->rxq_cap - 1)];
			if (!q->owned)
				q->off -= from;
		}
	}
}

/* Reads what the socket has (one recv) into frames; an error for EOF, socket errors and
 * bad frames. */
static int recv_some(tileatom_client *c, tileatom_error *err)
{
	ssize_t n;
	do
		n = recv(c->fd, c->rxbuf, TAC_RECV_CHUNK, 0);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return tac_err(err, TILEATOM_E_IO, "tileatomd at %s closed the connection",
		               c->address);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return TILEATOM_OK;
		return tac_err(err, TILEATOM_E_IO, "receiving from %s: %s", c->address,
		               strerror(errno));
	}
	const uint8_t *p = c->rxbuf;
	size_t left = (size_t)n;
	while (left > 0) {
		const uint8_t *payload;
		uint32_t len;
		uint8_t *owned;
		/* whole frames in rxbuf come without a copy; a frame across reads is gathered */
		ta_frame_status fs =
		    ta_frame_reader_next(&c->reader, &p, &left, &payload, &len, &owned);
		int rc = fs == TA_FRAME_READY ? rxq_push(c, owned, payload, len, err) : TILEATOM_OK;
		if (rc != TILEATOM_OK)
			return rc;
		if (fs == TA_FRAME_TOO_LARGE)
			return tac_err(err, TILEATOM_E_PROTOCOL,
			               "response frame of %u bytes exceeds the limit of %u bytes",
			               c->reader.payload_len, c->reader.max_payload);
		if (fs == TA_FRAME_NOMEM)
			return tac_err(err, TILEATOM_E_NOMEM,
			               "out of memory receiving a response of %u bytes",
			               c->reader.payload_len);
	}
	return TILEATOM_OK;
}

int tac_conn_poll(tileatom_client *c, tileatom_error *err)
{
	if (!c->broken && c->rxq_count < c->pending_count && recv_some(c, err) != TILEATOM_OK)
		tac_conn_break(c, err);
	if (c->broken) {
		if (err)
			*err = c->broken_err;
		return c->broken_err.code;
	}
	return TILEATOM_OK;
}

/* After a failed send: when the daemon explained why before closing (a queued response of
 * id 0, e.g. for a frame over its limit), err gets its status and message, the socket
 * error after it. Returns err's code. */
static int explain_send_failure(tileatom_client *c, tileatom_error *err)
{
	if (!err)
		return TILEATOM_E_IO;
	bool explained = false;
	for (size_t k = 0; k < c->rxq_count && !explained; k++) {
		const tac_frame *f = &c->rxq[(c->rxq_head + k) & (c->rxq_cap - 1)];
		Tileatom__Response *r = tileatom__response__unpack(NULL, f->len, frame_data(c, f));
		int code = r ? (int)r->status : 0;
		explained = r && r->id == 0 && code >= TILEATOM_E_INVALID_ARGUMENT &&
		            code <= TILEATOM_E_INTERNAL && r->message && *r->message;
		if (explained)
			tac_err(err, code, "tileatomd: %s (%s)", r->message, err->message);
		release_response(c, r);
	}
	return err->code;
}

/* Writes all of buf (with pass_fd >= 0 attached to its first byte: SCM_RIGHTS), draining
 * incoming responses whenever the socket is not writable. */
static int send_all(tileatom_client *c, const uint8_t *buf, size_t len, int pass_fd,
                    int64_t deadline, tileatom_error *err)
{
	while (len > 0) {
		ssize_t n = pass_fd >= 0 ? ta_frame_send_fd(c->fd, buf, len, pass_fd)
		                         : send(c->fd, buf, len, MSG_NOSIGNAL);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			pass_fd = -1;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int w = wait_fd(c->fd, POLLOUT | POLLIN, deadline);
			if (w == 0)
				return tac_err(err, TILEATOM_E_TIMEOUT, "sending to %s: timed out",
				               c->address);
			if (w < 0)
				return tac_err(err, TILEATOM_E_IO, "waiting for %s: %s", c->address,
				               strerror(errno));
			if ((w & (POLLIN | POLLHUP | POLLERR)) && recv_some(c, err) != TILEATOM_OK)
				return explain_send_failure(c, err);
			continue;
		}
		tac_err(err, TILEATOM_E_IO, "%s %s: %s",
		        pass_fd >= 0 ? "passing a file descriptor to" : "sending to", c->address,
		        n < 0 ? strerror(errno) : "nothing written");
		/* Pick up an explanation the daemon may have sent before closing. */
		(void)recv_some(c, NULL);
		return explain_send_failure(c, err);
	}
	return TILEATOM_OK;
}

/* The error for calls on a broken connection. */
static int broken_error(tileatom_client *c, tileatom_error *err)
{
	return tac_err(err, TILEATOM_E_IO, "connection to %s is broken: %s", c->address,
	               c->broken_err.message);
}

/* Makes room for extra more bytes in the output buffer; 0, or -1 when memory is short. */
static inline int txbuf_reserve(tileatom_client *c, size_t extra)
{
	return c->txbuf.cap - c->txbuf.len >= extra ? 0 : ta_frame_buf_reserve(&c->txbuf, extra);
}

/* Writes the output buffer out by deadline and empties it; breaks the connection on
 * failure. */
static int flush_until(tileatom_client *c, int64_t deadline, tileatom_error *err)
{
	if (c->txbuf.len == 0)
		return TILEATOM_OK;
	tileatom_error local;
	if (!err)
		err = &local;
	int rc = send_all(c, c->txbuf.data, c->txbuf.len, -1, deadline, err);
	c->txbuf.len = 0;
	return rc == TILEATOM_OK ? TILEATOM_OK : tac_conn_break(c, err);
}

int tac_conn_flush(tileatom_client *c, tileatom_error *err)
{
	if (c->broken)
		return broken_error(c, err);
	return flush_until(c, deadline_from(c->io_timeout_ms), err);
}

/* Makes room for one more pending request; false when memory is short. */
static inline bool pending_room(tileatom_client *c)
{
	return c->pending_count < c->pending_cap ||
	       ring_grow((void **)&c->pending, &c->pending_cap, &c->pending_head, c->pending_count,
	                 sizeof(*c->pending)) == 0;
}

/* Queues the request of kind just framed with the next id as pending (the ring has room)
 * and gives its id to *id, after writing the buffer out when flush is set or it is full. */
static inline __attribute__((always_inline)) int queue_pending(tileatom_client *c,
                                                               tileatom_request_kind kind,
                                                               bool flush, uint64_t *id,
                                                               tileatom_error *err)
{
	if (flush || c->txbuf.len >= TAC_FLUSH_THRESHOLD) {
		int rc = flush_until(c, deadline_from(c->io_timeout_ms), err);
		if (rc != TILEATOM_OK)
			return rc;
	}
	c->last_id++;
	c->pending[(c->pending_head + c->pending_count) & (c->pending_cap - 1)] =
	    (tac_pending){c->last_id, kind, false};
	c->pending_count++;
	if (id)
		*id = c->last_id;
	return TILEATOM_OK;
}

int tac_none_pending(const tileatom_client *c, tileatom_error *err)
{
	if (c->pending_count == 0)
		return TILEATOM_OK;
	return tac_err(err, TILEATOM_E_STATE,
	               "%zu pipelined responses are not collected yet (call tileatom_collect "
	               "first)",
	               tac_pending_requests(c));
}

size_t tac_request_size(const tac_msg *m)
{
	tac_wire_plan plan;
	return tac_wire_takes(m->kind) ? tac_wire_plan_request(m, &plan)
	                               : protobuf_c_message_get_packed_size(&m->req.base);
}

int tac_conn_submit(tileatom_client *c, tac_msg *m, bool flush, int fd, uint64_t *id,
                    tileatom_error *err)
{
	if (c->broken)
		return broken_error(c, err);
	if (!pending_room(c))
		return tac_err(err, TILEATOM_E_NOMEM, "out of memory");
	m->req.id = c->last_id + 1;
	/* a data-plane request: the one writer (sized first); the control plane: protobuf-c */
	tac_wire_plan plan;
	bool data = tac_wire_takes(m->kind);
	size_t packed = data ? tac_wire_plan_request(m, &plan)
	                     : protobuf_c_message_get_packed_size(&m->req.base);
	if (packed > UINT32_MAX - TA_FRAME_HEADER)
		return tac_err(err, TILEATOM_E_RESOURCE_EXHAUSTED,
		               "request of %zu bytes is too large for one frame", packed);
	tileatom_error local;
	if (!err)
		err = &local;
	size_t frame_len = TA_FRAME_HEADER + packed;
	/* A large frame, or one that carries fd, is encoded on its own (before anything is
	 * written, so that a shortage of memory leaves the connection usable), then written
	 * after the buffered ones; the others at the end of the output buffer. */
	uint8_t *own = NULL, *at;
	if (frame_len >= TAC_FLUSH_THRESHOLD || fd >= 0) {
		at = own = malloc(frame_len);
		if (!own)
			return tac_err(err, TILEATOM_E_NOMEM,
			               "out of memory encoding a request of %zu bytes", packed);
	} else {
		if (txbuf_reserve(c, frame_len) < 0)
			return tac_err(err, TILEATOM_E_NOMEM,
			               "out of memory buffering a request of %zu bytes", packed);
		at = c->txbuf.data + c->txbuf.len;
	}
	ta_frame_put_header(at, (uint32_t)packed);
	if (data) {
		tac_wire_marks marks;
		uint8_t *end = tac_wire_write(m, &plan, at + TA_FRAME_HEADER, &marks);
		if (!own)
			tac_tpl_keep(&c->tpl, m, &marks, end);
	} else if (protobuf_c_message_pack(&m->req.base, at + TA_FRAME_HEADER) != packed) {
		free(own);
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "a request of %zu bytes packed to a different size", packed);
	}
	if (!own) {
		c->txbuf.len += frame_len;
		return queue_pending(c, m->kind, flush, id, err);
	}
	int64_t deadline = deadline_from(c->io_timeout_ms);
	int rc = flush_until(c, deadline, err);
	if (rc == TILEATOM_OK &&
	    (rc = send_all(c, own, frame_len, fd, deadline, err)) != TILEATOM_OK)
		rc = tac_conn_break(c, err);
	free(own);
	return rc == TILEATOM_OK ? queue_pending(c, m->kind, false, id, err) : rc;
}

int tac_conn_submit_template(tileatom_client *c, const tileatom_array *indices,
                             const tileatom_array *values, const tileatom_array *compare,
                             bool *taken, uint64_t *id, tileatom_error *err)
{
	*taken = false;
	if (c->broken || !pending_room(c) || txbuf_reserve(c, TA_FRAME_HEADER + TAC_TPL_ROOM) < 0)
		return TILEATOM_OK; /* the general way reports it */
	uint8_t *at = c->txbuf.data + c->txbuf.len;
	size_t n =
	    tac_tpl_write(&c->tpl, c->last_id + 1, indices, values, compare, at + TA_FRAME_HEADER);
	if (n == 0 || n > c->max_frame)
		return TILEATOM_OK;
	*taken = true;
	ta_frame_put_header(at, (uint32_t)n);
	c->txbuf.len += TA_FRAME_HEADER + n;
	return queue_pending(c, c->tpl.kind, false, id, err);
}

/* Writes the buffered requests out, then reads until need whole response frames are queued
 * (a timeout after io_timeout_ms for both, an error or EOF breaks the connection). */
static int wait_responses(tileatom_client *c, size_t need, tileatom_error *err)
{
	int64_t deadline = deadline_from(c->io_timeout_ms);
	int rc = flush_until(c, deadline, err);
	if (rc != TILEATOM_OK)
		return rc;
	if (c->rxq_count < need) {
		/* one read before the first poll (a pipelining caller often finds its responses
		 * there, and saves the poll), or with tileatom_set_busy_poll reads without
		 * sleeping (recv returns at once) until they are there or busy_poll_us passed */
		const int64_t until =
		    c->busy_poll_us ? now_ns() + (int64_t)c->busy_poll_us * 1000 : 0;
		do
			rc = recv_some(c, err);
		while (rc == TILEATOM_OK && c->rxq_count < need && until && now_ns() < until);
		if (rc != TILEATOM_OK)
			return tac_conn_break(c, err);
	}
	while (c->rxq_count < need) {
		int w = wait_fd(c->fd, POLLIN, deadline);
		if (w == 0)
			tac_err(err, TILEATOM_E_TIMEOUT,
			        "waiting for a response from %s: timed out", c->address);
		else if (w < 0)
			tac_err(err, TILEATOM_E_IO, "waiting for %s: %s", c->address,
			        strerror(errno));
		if ((w > 0 ? recv_some(c, err) : TILEATOM_E_IO) != TILEATOM_OK)
			return tac_conn_break(c, err);
	}
	return TILEATOM_OK;
}

/* tac_conn_receive (newest false) and tac_conn_receive_newest: the response to the oldest
 * or the newest pending request. The previous response is released, and the requests still
 * buffered leave before the first wait (all of them, so the daemon has the whole batch). */
static inline __attribute__((always_inline)) int
receive(tileatom_client *c, bool newest, tileatom_request_kind *kind, tileatom_error *err)
{
	tileatom_error local;
	if (!err)
		err = &local;
	if (c->broken)
		return broken_error(c, err);
	if (c->pending_count == 0)
		return tac_err(err, TILEATOM_E_STATE, "no request is awaiting a response");
	release_response(c, c->last);
	c->last = NULL;
	/* responses come in order: the newest request's is the frame after the older ones';
	 * the clock is read only when something may wait (a write, or a response not here) */
	size_t need = newest ? c->pending_count : 1;
	int rc;
	if ((c->txbuf.len > 0 || c->rxq_count < need) &&
	    (rc = wait_responses(c, need, err)) != TILEATOM_OK)
		return rc;
	if (newest && c->rxq_count > c->pending_count) {
		tac_err(err, TILEATOM_E_PROTOCOL, "%s sent more responses than requests",
		        c->address);
		return tac_conn_break(c, err);
	}
	size_t back = newest ? c->pending_count - 1 : 0; /* the request's place in the queue */
	tac_frame f = c->rxq[(c->rxq_head + back) & (c->rxq_cap - 1)];
	if (!newest)
		c->rxq_head = (c->rxq_head + 1) & (c->rxq_cap - 1);
	c->rxq_count--;
	tac_pending p = c->pending[(c->pending_head + back) & (c->pending_cap - 1)];
	/* the one data-plane decoder (tac_wire.c) for a data-plane request, protobuf-c for the
	 * control plane (its bytes still in place) */
	const uint8_t *fdata = frame_data(c, &f);
	Tileatom__Response *r = tac_wire_takes(p.kind)
	                            ? tac_wire_decode_response(&c->fast, fdata, f.len)
	                            : tileatom__response__unpack(NULL, f.len, fdata);
	rxq_release(c, &f, newest); /* both decoders copied what they keep */
	if (!r) {
		tac_err(err, TILEATOM_E_PROTOCOL, "undecodable response of %u bytes from %s", f.len,
		        c->address);
		return tac_conn_break(c, err);
	}
	if (r->id != p.id) {
		if (r->status != TILEATOM__STATUS__OK && r->message && *r->message)
			tac_err(err, TILEATOM_E_PROTOCOL,
			        "tileatomd rejected the connection (response id %llu, expected "
			        "%llu): %s",
			        (unsigned long long)r->id, (unsigned long long)p.id, r->message);
		else
			tac_err(err, TILEATOM_E_PROTOCOL,
			        "response id %llu does not match the %s request id %llu",
			        (unsigned long long)r->id, newest ? "newest" : "oldest",
			        (unsigned long long)p.id);
		release_response(c, r);
		return tac_conn_break(c, err);
	}
	if (!newest)
		c->pending_head = (c->pending_head + 1) & (c->pending_cap - 1);
	c->pending_count--;
	c->last = r;
	*kind = p.kind;
	return TILEATOM_OK;
}

int tac_conn_receive(tileatom_client *c, tileatom_request_kind *kind, tileatom_error *err)
{
	return receive(c, false, kind, err);
}

int tac_conn_receive_newest(tileatom_client *c, tileatom_request_kind *kind, tileatom_error *err)
{
	return receive(c, true, kind, err);
}

int tac_conn_wait_window(tileatom_client *c, size_t max_unanswered, tileatom_error *err)
{
	if (c->broken)
		return broken_error(c, err);
	if (c->rxq_count + max_unanswered >= c->pending_count)
		return TILEATOM_OK;
	tileatom_error local;
	return wait_responses(c, c->pending_count - max_unanswered, err ? err : &local);
}
