/* server.c: listeners, accepting, the event loops, signals and shutdown (see server.h).
 *
 * Startup: executor, the event loops (loop 0 is the main loop; loops 1.. get a libuv loop
 * and a thread each, with their sweep, resume check, executor port and wake handle), then
 * the Unix socket (parent directory created; a stale socket file from a dead daemon is
 * removed, a live one is an error; the umask is tightened around bind so that the socket
 * never exists with a wider mode than 0600 / 0660), then TCP when asked (loopback only
 * unless allow_remote), then SIGTERM / SIGINT handlers.
 *
 * Accepting: the main loop accepts every connection and hands them round-robin to the
 * loops: loop 0 takes its own straight from the listener, as with one loop; for another
 * loop the socket is accepted, duplicated and queued on that loop, whose wake handle then
 * opens it in a connection of its own (uv_pipe_open / uv_tcp_open). Why not every loop
 * listening on the same socket: the loop that wakes first takes a whole burst of
 * connections (libuv accepts until EAGAIN), so a benchmark's clients, which connect at
 * once, would mostly land on one loop; round-robin spreads them evenly at the cost of a
 * dup and a wake-up per connection, which only a connection's first microseconds pay.
 * Over a limit (max_connections, the TCP share max_connections - unix_reserve, or
 * max_unauthenticated connections of the transport in their handshake; server.h) the
 * connection is accepted on loop 0, which first tries to make room by closing one of its
 * own connections that keeps others waiting (make_room: the oldest in its handshake, or the
 * one stalled longest, answered UNAVAILABLE); failing that the newcomer is answered with one
 * RESOURCE_EXHAUSTED response and closed, so that the client learns why; the refusals are
 * logged at most once per 10 s with a count. A connection gives its slot back as soon as it
 * starts closing (host_release), not when its last running request is done.
 *
 * What is server-wide and shared by the loops: the connection counts (atomics), the input
 * budget (max_input_total; conn.c reserves with atomics, and a loop that gives memory back
 * wakes the loops with waiters), the executor (each loop has its own port, so a large
 * request's done callback runs on the loop of its connection), the data log (its
 * durability callback runs on the main loop, which tells the other loops). Each loop has
 * its own dispatch scratch (arena, caches, pipelined persistence run) and, through the
 * thread, its own metrics shard.
 *
 * A periodic sweep per loop (sweep_timer, at most every second, more often for short
 * timeouts) applies handshake_timeout, frame_timeout and idle_timeout to that loop's
 * connections; loop 0's
 * also writes the counts of rate-limited log lines; resume_check wakes connections waiting
 * for input budget (max_input_total) in the loop turn after some was given back.
 *
 * Shutdown: ta_server_shutdown closes the listeners, removes the socket file and has every
 * loop drain its connections (loop 0 at once, the others through their wake handles);
 * each freed connection tells its loop (ta_conn_host.gone); a loop with none left closes
 * its handles (its thread's uv_run then returns) and tells the main loop, which stops the
 * executor and closes the signal handles once every loop is done, so uv_run returns;
 * ta_server_free joins the threads. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include "server.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "netaddr.h"
#include "persist.h"
#include "notify.h"

/* Listen backlog of both listeners. */
#define LISTEN_BACKLOG 128

static void server_check_done(ta_server *srv);
static void loop_check_done(ta_server_loop *l);

/* The loop a host belongs to. */
static ta_server_loop *host_loop(ta_conn_host *host)
{
	return (ta_server_loop *)((char *)host - offsetof(ta_server_loop, host));
}

/* True when the calling thread may act on loop l directly: the main loop, or a loop whose
 * thread never started. */
static bool loop_is_direct(const ta_server_loop *l)
{
	return l->index == 0 || !l->thread_started;
}

/* Asks loop l (another thread's) for the TA_LOOP_WAKE_* bits in flags. */
static void loop_wake(ta_server_loop *l, unsigned flags)
{
	pthread_mutex_lock(&l->lock);
	if (l->wake_open) {
		l->wake_flags |= flags;
		int rc = uv_async_send(&l->wake);
		if (rc != 0)
			ta_log(TA_LOG_ERR, "loop %u: uv_async_send failed: %s", l->index,
			       uv_strerror(rc));
	}
	pthread_mutex_unlock(&l->lock);
}

/* ta_conn_host.submit: a connection's large request goes to the executor; its done
 * callback comes back to the connection's loop. */
static void host_submit(ta_conn_host *host, ta_job *job)
{
	ta_executor_submit_to(&host_loop(host)->srv->executor, host->port, job);
}

/* Counts a connection of the transport (tcp) in its handshake against the limits. */
static void slots_add(ta_server *srv, bool tcp)
{
	atomic_fetch_add(&srv->nactive, 1);
	atomic_fetch_add(&srv->svc->connections, 1);
	if (tcp)
		atomic_fetch_add(&srv->ntcp, 1);
	atomic_fetch_add(&srv->npending[tcp], 1);
}

/* Gives back what slots_add took (pending: the connection was still in its handshake). */
static void slots_sub(ta_server *srv, bool tcp, bool pending)
{
	atomic_fetch_sub(&srv->nactive, 1);
	atomic_fetch_sub(&srv->svc->connections, 1);
	if (tcp)
		atomic_fetch_sub(&srv->ntcp, 1);
	if (pending)
		atomic_fetch_sub(&srv->npending[tcp], 1);
}

/* Gives conn's slots back (once: it is uncounted after). */
static void conn_unslot(ta_server *srv, ta_conn *conn)
{
	if (!conn->counted)
		return;
	conn->counted = false;
	slots_sub(srv, conn->tcp, conn->pending);
	conn->pending = false;
}

/* ta_conn_host.release: a closing connection gives its max_connections slot back. */
static void host_release(ta_conn_host *host, ta_conn *conn)
{
	conn_unslot(host_loop(host)->srv, conn);
}

/* ta_conn_host.handshaken: the connection leaves the count of those in their handshake. */
static void host_handshaken(ta_conn_host *host, ta_conn *conn)
{
	ta_server *srv = host_loop(host)->srv;
	if (!conn->counted || !conn->pending)
		return;
	conn->pending = false;
	atomic_fetch_sub(&srv->npending[conn->tcp], 1);
}

/* ta_conn_host.input_freed: wake the waiting connections after this loop turn, and the
 * other loops that have waiting connections. */
static void host_input_freed(ta_conn_host *host)
{
	ta_server_loop *me = host_loop(host);
	ta_server *srv = me->srv;
	me->resume_pending = true;
	for (unsigned i = 0; i < srv->nloops_ready; i++) {
		ta_server_loop *l = &srv->loops[i];
		if (l != me && atomic_load(&l->host.input_waiters))
			loop_wake(l, TA_LOOP_WAKE_RESUME);
	}
}

/* Check callback: input budget was given back; the waiting connections try again, oldest
 * connection last (the list is newest first, so the walk starts at its end). */
static void on_resume_check(uv_check_t *check)
{
	ta_server_loop *l = check->data;
	l->turn++; /* a check runs once per loop iteration */
	if (!l->resume_pending)
		return;
	l->resume_pending = false;
	ta_conn *last = l->conns;
	while (last && last->next)
		last = last->next;
	for (ta_conn *c = last, *prev; c && atomic_load(&l->host.input_waiters); c = prev) {
		prev = c->prev; /* a resumed connection may close, never be freed here */
		if (c->budget_wait)
			ta_conn_resume_input(c);
	}
}

/* spin_idle's callback: nothing; an active idle handle alone makes the loop poll with a
 * zero timeout. */
static void on_spin_idle(uv_idle_t *idle)
{
	(void)idle;
}

/* spin_check (--busy-poll), after each loop turn: input in this turn keeps the loop
 * polling without sleeping for busy_poll_us more; once that long passed without any, the
 * loop sleeps in the poll again. */
static void on_spin_check(uv_check_t *check)
{
	ta_server_loop *l = check->data;
	if (l->host.input_seen) {
		l->host.input_seen = false;
		l->spin_until_ns = uv_hrtime() + (uint64_t)l->srv->cfg->busy_poll_us * 1000u;
		if (!uv_is_active((uv_handle_t *)&l->spin_idle)) {
			int rc = uv_idle_start(&l->spin_idle, on_spin_idle);
			if (rc != 0)
				ta_log(TA_LOG_WARNING, "loop %u: cannot busy-poll: %s", l->index,
				       uv_strerror(rc));
		}
	} else if (uv_is_active((uv_handle_t *)&l->spin_idle) && uv_hrtime() >= l->spin_until_ns) {
		uv_idle_stop(&l->spin_idle);
	}
}

/* Sweep timer: timeouts of the loop's connections, then (loop 0) the held-back log
 * counts. */
static void on_sweep(uv_timer_t *timer)
{
	ta_server_loop *l = timer->data;
	uint64_t now = uv_now(l->loop);
	for (ta_conn *c = l->conns, *next; c; c = next) {
		next = c->next; /* closing frees only in the close callback */
		ta_conn_check_timeouts(c, now);
	}
	if (l->index == 0) {
		ta_log_limit_flush(&l->srv->refuse_log, TA_LOG_WARNING);
		ta_log_limit_flush(&l->srv->svc->auth_log, TA_LOG_WARNING);
	}
}

/* busy_timer (CUDA, inline_max auto), every TA_SERVER_BUSY_MS: small requests run on the
 * loop while the loop's connections that sent bytes since the last tick are few
 * (TA_SERVER_INLINE_CUDA_CONNS), on the workers otherwise. */
static void on_busy_timer(uv_timer_t *timer)
{
	ta_server_loop *l = timer->data;
	uint64_t now = uv_now(l->loop);
	uint64_t since = now > TA_SERVER_BUSY_MS ? now - TA_SERVER_BUSY_MS : 0;
	unsigned busy = 0;
	for (ta_conn *c = l->conns; c && busy <= TA_SERVER_INLINE_CUDA_CONNS; c = c->next)
		if (c->counted && c->last_read_ms >= since)
			busy++;
	l->host.inline_max = busy <= TA_SERVER_INLINE_CUDA_CONNS ? TA_SERVER_INLINE_CUDA : 0;
}

/* ta_conn_host.gone: a connection about to be freed leaves its loop's list and the
 * counters; a shutdown may then have nothing left to wait on. */
static void host_gone(ta_conn_host *host, ta_conn *conn)
{
	ta_server_loop *l = host_loop(host);
	ta_server *srv = l->srv;
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		l->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	l->nconns--;
	atomic_fetch_sub(&srv->nconns, 1);
	conn_unslot(srv, conn);
	loop_check_done(l);
}

/* uv_close callback of a handle embedded in the server (nothing to free). */
static void on_handle_closed(uv_handle_t *handle)
{
	(void)handle;
}

/* uv_close callback of a malloc'd handle. */
static void on_handle_freed(uv_handle_t *handle)
{
	free(handle);
}

/* Closes an embedded handle marked open in *open (closing stops it) and marks it closed. */
static void close_open(bool *open, void *handle)
{
	if (!*open)
		return;
	*open = false;
	uv_close((uv_handle_t *)handle, on_handle_closed);
}

/* Adds conn to loop l's list. */
static void loop_link(ta_server_loop *l, ta_conn *conn)
{
	conn->next = l->conns;
	if (l->conns)
		l->conns->prev = conn;
	l->conns = conn;
	l->nconns++;
	atomic_fetch_add(&l->srv->nconns, 1);
}

/* Closes the handles of a drained loop (its thread's uv_run then returns) and tells the
 * main loop. The loop's thread (or the main thread for a direct loop). */
static void loop_finish(ta_server_loop *l)
{
	ta_server *srv = l->srv;
	l->finished = true;
	close_open(&l->sweep_open, &l->sweep_timer);
	close_open(&l->check_open, &l->resume_check);
	if (l->spin_open)
		uv_close((uv_handle_t *)&l->spin_idle, on_handle_closed);
	close_open(&l->spin_open, &l->spin_check);
	close_open(&l->busy_timer_open, &l->busy_timer);
	if (l->port_open) {
		l->port_open = false;
		ta_executor_port_close(&l->port);
	}
	if (l->lock_init) {
		pthread_mutex_lock(&l->lock);
		bool was = l->wake_open;
		l->wake_open = false;
		pthread_mutex_unlock(&l->lock);
		close_open(&was, &l->wake);
	}
	ta_dispatch_scratch_free(&l->scratch); /* no connection is left to use it */
	pthread_mutex_lock(&srv->lock);
	srv->loops_finished++;
	if (!loop_is_direct(l) && srv->main_wake_open) {
		int rc = uv_async_send(&srv->main_wake);
		if (rc != 0)
			ta_log(TA_LOG_ERR, "loop %u: uv_async_send failed: %s", l->index,
			       uv_strerror(rc));
	}
	pthread_mutex_unlock(&srv->lock);
	if (loop_is_direct(l))
		server_check_done(srv);
}

/* A draining loop with no connection left finishes. */
static void loop_check_done(ta_server_loop *l)
{
	if (!l->draining || l->conns || l->finished)
		return;
	loop_finish(l);
}

/* Shutdown reached loop l: its connections finish what they were sent, then close; with
 * force (a second signal or the shutdown timeout) they close at once. */
static void loop_stop(ta_server_loop *l, bool force)
{
	bool *done = force ? &l->forced : &l->draining;
	if (*done)
		return;
	*done = true;
	for (ta_conn *c = l->conns, *next; c; c = next) {
		next = c->next; /* a close may free c only later, in its callback */
		if (force)
			ta_conn_close(c);
		else
			ta_conn_drain(c);
	}
	loop_check_done(l);
}

/* Closes the signal handles and the executor when shutdown has nothing left to wait on
 * (the listeners closed and every loop finished). Main loop thread. */
static void server_check_done(ta_server *srv)
{
	if (!srv->draining || srv->unix_open || srv->tcp_open)
		return;
	pthread_mutex_lock(&srv->lock);
	bool all = srv->loops_finished >= srv->nloops_ready;
	bool wake_was = srv->main_wake_open;
	if (all)
		srv->main_wake_open = false;
	pthread_mutex_unlock(&srv->lock);
	if (!all)
		return;
	close_open(&wake_was, &srv->main_wake);
	close_open(&srv->timer_open, &srv->shutdown_timer);
	if (srv->signals_open)
		uv_close((uv_handle_t *)&srv->sig_term, on_handle_closed);
	close_open(&srv->signals_open, &srv->sig_int);
	if (srv->executor_started && !srv->executor_stopping) {
		srv->executor_stopping = true;
		ta_executor_stop(&srv->executor, NULL);
	}
}

/* main_wake callback: a loop finished its shutdown. */
static void on_main_wake(uv_async_t *handle)
{
	server_check_done(handle->data);
}

/* Starts conn, counted against the limits by the caller. */
static void conn_admit(ta_server_loop *l, ta_conn *conn)
{
	ta_log(TA_LOG_DEBUG, "connection %" PRIu64 " accepted (%s, loop %u, %u open)", conn->serial,
	       conn->tcp ? "tcp" : "unix", l->index, atomic_load(&l->srv->nactive));
	ta_conn_start(conn);
}

/* A connection's socket is open on loop l: TCP_NODELAY for TCP; closes it when the loop
 * drains (false). */
static bool conn_opened(ta_server_loop *l, ta_conn *conn)
{
	int rc;
	if (conn->tcp && (rc = uv_tcp_nodelay(&conn->h.tcp, 1)) != 0)
		ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": cannot set TCP_NODELAY: %s",
		       conn->serial, uv_strerror(rc));
	if (l->draining)
		ta_conn_close(conn);
	return !l->draining;
}

/* Loop l's thread: opens a socket the main loop accepted for it in a connection. */
static void loop_adopt(ta_server_loop *l, ta_server_handoff *h)
{
	ta_server *srv = l->srv;
	ta_conn *conn = ta_conn_new(&l->host, h->tcp, h->serial);
	if (!conn) {
		ta_log(TA_LOG_ERR, "loop %u: out of memory opening connection %" PRIu64, l->index,
		       h->serial);
		close(h->fd);
		slots_sub(srv, h->tcp, true);
		return;
	}
	loop_link(l, conn);
	conn->counted = true; /* counted by the main loop when it handed the socket over */
	conn->pending = true;
	conn->accepted_turn = l->turn;
	int rc = h->tcp ? uv_tcp_open(&conn->h.tcp, h->fd) : uv_pipe_open(&conn->h.pipe, h->fd);
	if (rc != 0) {
		ta_log(TA_LOG_WARNING, "loop %u: cannot open connection %" PRIu64 ": %s", l->index,
		       h->serial, uv_strerror(rc));
		close(h->fd);
		ta_conn_close(conn);
		return;
	}
	if (conn_opened(l, conn))
		conn_admit(l, conn);
}

/* Log records became durable: loop l's connections send what waited for them. */
static void loop_persisted(ta_server_loop *l)
{
	for (ta_conn *c = l->conns, *next; c; c = next) {
		next = c->next; /* a failed log closes connections (freed later, in callbacks) */
		ta_conn_persisted(c);
	}
}

/* wake callback of loop l: sockets to adopt, then what other threads asked for. */
static void on_loop_wake(uv_async_t *handle)
{
	ta_server_loop *l = handle->data;
	pthread_mutex_lock(&l->lock);
	ta_server_handoff *h = l->handoff_head;
	l->handoff_head = NULL;
	l->handoff_tail = &l->handoff_head;
	unsigned flags = l->wake_flags;
	l->wake_flags = 0;
	pthread_mutex_unlock(&l->lock);
	while (h) {
		ta_server_handoff *next = h->next;
		loop_adopt(l, h);
		free(h);
		h = next;
	}
	if (flags & TA_LOOP_WAKE_RESUME)
		l->resume_pending = true; /* resume_check runs after this turn's callbacks */
	if (flags & TA_LOOP_WAKE_PERSISTED)
		loop_persisted(l);
	if (flags & TA_LOOP_WAKE_DRAIN)
		loop_stop(l, false);
	if (flags & TA_LOOP_WAKE_FORCE)
		loop_stop(l, true);
}

/* Accepts the pending connection of listener into a malloc'd handle of the main loop
 * (NULL when none could be made; *rc: the error of making or accepting, else 0). */
static uv_handle_t *accept_temp(ta_server *srv, uv_stream_t *listener, bool tcp, int *rc)
{
	uv_handle_t *tmp = malloc(tcp ? sizeof(uv_tcp_t) : sizeof(uv_pipe_t));
	*rc = !tmp  ? UV_ENOMEM
	      : tcp ? uv_tcp_init(srv->loop, (uv_tcp_t *)tmp)
	            : uv_pipe_init(srv->loop, (uv_pipe_t *)tmp, 0);
	if (*rc != 0) {
		free(tmp);
		return NULL;
	}
	*rc = uv_accept(listener, (uv_stream_t *)tmp);
	return tmp;
}

/* Takes the pending connection off the listener's queue and drops it (memory is short);
 * without an accept libuv would stop watching the listener. */
static void drop_pending(ta_server *srv, uv_stream_t *listener, bool tcp)
{
	int rc;
	uv_handle_t *tmp = accept_temp(srv, listener, tcp, &rc);
	if (tmp && rc != 0)
		ta_log(TA_LOG_WARNING, "accept failed: %s", uv_strerror(rc));
	if (tmp)
		uv_close(tmp, on_handle_freed);
}

/* Main loop: accepts a pending connection and queues its socket on loop l (index > 0);
 * on failure the connection is dropped (logged). */
static void hand_off(ta_server *srv, uv_stream_t *listener, bool tcp, ta_server_loop *l)
{
	ta_server_handoff *h = malloc(sizeof(*h));
	int rc = UV_ENOMEM;
	uv_handle_t *tmp = h ? accept_temp(srv, listener, tcp, &rc) : NULL;
	if (!tmp) {
		ta_log(TA_LOG_ERR, "cannot accept a connection: %s", uv_strerror(rc));
		free(h);
		drop_pending(srv, listener, tcp);
		return;
	}
	uv_os_fd_t fd = -1;
	if (rc == 0)
		rc = uv_fileno(tmp, &fd);
	int dup_fd = rc == 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (rc == 0 && dup_fd < 0)
		rc = uv_translate_sys_error(errno);
	uv_close(tmp, on_handle_freed); /* closes the accepted fd; dup_fd lives on */
	if (rc != 0) {
		ta_log(TA_LOG_WARNING, "accept failed: %s", uv_strerror(rc));
		free(h);
		return;
	}
	h->next = NULL;
	h->fd = dup_fd;
	h->tcp = tcp;
	h->serial = ++srv->next_serial;
	slots_add(srv, tcp);
	pthread_mutex_lock(&l->lock);
	*l->handoff_tail = h;
	l->handoff_tail = &h->next;
	rc = uv_async_send(&l->wake);
	pthread_mutex_unlock(&l->lock);
	if (rc != 0)
		ta_log(TA_LOG_ERR, "loop %u: uv_async_send failed: %s", l->index, uv_strerror(rc));
}

/* The limits a newcomer may find reached (over_limit). */
typedef enum server_limit {
	LIMIT_NONE = 0,    /* room for it */
	LIMIT_HANDSHAKES,  /* max_unauthenticated connections of its transport */
	LIMIT_CONNECTIONS, /* max_connections */
	LIMIT_TCP_SHARE    /* max_connections - unix_reserve TCP connections */
} server_limit;

/* Which limit a newcomer of the transport (tcp) finds reached now (the handshake cap is
 * not looked at with soft_handshakes), with a message naming it in msg. */
static server_limit over_limit(ta_server *srv, bool tcp, bool soft_handshakes, char *msg,
                               size_t size)
{
	const ta_config *cfg = srv->cfg;
	unsigned max = (unsigned)cfg->max_connections;
	unsigned reserve = (unsigned)cfg->unix_reserve;
	unsigned tcp_max = max > reserve ? max - reserve : 1;
	if (!soft_handshakes &&
	    atomic_load(&srv->npending[tcp]) >= (unsigned)cfg->max_unauthenticated) {
		snprintf(msg, size,
		         "too many connections in their handshake: the limit is %d per transport "
		         "(max_unauthenticated); try again later",
		         cfg->max_unauthenticated);
		return LIMIT_HANDSHAKES;
	}
	if (atomic_load(&srv->nactive) >= max) {
		snprintf(msg, size,
		         "too many connections: the limit is %d (max_connections); try again "
		         "later",
		         cfg->max_connections);
		return LIMIT_CONNECTIONS;
	}
	if (tcp && atomic_load(&srv->ntcp) >= tcp_max) {
		snprintf(msg, size,
		         "too many TCP connections: the limit is %u (max_connections less "
		         "unix_reserve, kept for local clients); try again later",
		         tcp_max);
		return LIMIT_TCP_SHARE;
	}
	return LIMIT_NONE;
}

/* A newcomer of the transport (tcp) found a limit reached: closes one connection of the
 * main loop to make room, when there is one to close: for the handshake cap (handshakes)
 * the oldest of the transport still in its handshake that has been polled for input at
 * least once; else the one stalled longest (at least TA_SERVER_STALL_MS; for a TCP
 * newcomer a TCP one). Returns true when one was closed. */
static bool make_room(ta_server *srv, bool tcp, bool handshakes)
{
	ta_server_loop *l = &srv->loops[0];
	uint64_t now = uv_now(l->loop);
	ta_conn *victim = NULL;
	uint64_t victim_since = 0;
	const char *victim_why = NULL;
	for (ta_conn *c = l->conns; c; c = c->next) {
		if (!c->counted || (tcp && !c->tcp))
			continue;
		if (handshakes && (!c->pending || c->tcp != tcp || c->accepted_turn + 2 > l->turn))
			continue;
		const char *why = NULL;
		uint64_t since = ta_conn_stalled_since(c, &why);
		if (since == 0 || (!handshakes && now - since < TA_SERVER_STALL_MS))
			continue;
		/* equal times (accepted in one loop turn): the older connection */
		if (!victim || since < victim_since ||
		    (since == victim_since && c->serial < victim->serial)) {
			victim = c;
			victim_since = since;
			victim_why = why;
		}
	}
	if (!victim)
		return false;
	char msg[240];
	snprintf(msg, sizeof(msg),
	         "closed to make room for a new connection: %s (%s) and this connection %s for "
	         "%" PRIu64 " ms",
	         handshakes ? "the connections in their handshake are at their limit"
	                    : "every connection slot is taken",
	         handshakes ? "max_unauthenticated" : "max_connections", victim_why,
	         now - victim_since);
	ta_conn_fail(victim, TA_UNAVAILABLE, msg); /* logs it at level info */
	return true;
}

/* Over a limit: makes room (each closing frees a slot at once) while it can. Returns the
 * limit still reached (LIMIT_NONE: the newcomer may be admitted), its message in msg. A
 * handshake cap with no connection to close (all accepted in this loop turn: a burst of
 * clients connecting at once) lets the newcomer in as far as the slots allow. */
static server_limit admit_or_make_room(ta_server *srv, bool tcp, char *msg, size_t size)
{
	bool soft_handshakes = false;
	for (;;) {
		server_limit lim = over_limit(srv, tcp, soft_handshakes, msg, size);
		if (lim == LIMIT_NONE)
			return LIMIT_NONE;
		if (make_room(srv, tcp, lim == LIMIT_HANDSHAKES))
			continue;
		if (lim != LIMIT_HANDSHAKES)
			return lim;
		soft_handshakes = true;
	}
}

/* Accept callback shared by both listeners (main loop). */
static void on_connection(uv_stream_t *listener, int status)
{
	ta_server *srv = listener->data;
	if (status < 0) {
		ta_log(TA_LOG_WARNING, "accept failed: %s", uv_strerror(status));
		return;
	}
	bool tcp = listener == (uv_stream_t *)&srv->tcp_listener;
	char msg[200];
	bool full = over_limit(srv, tcp, false, msg, sizeof(msg)) != LIMIT_NONE;
	if (srv->nloops > 1 && !srv->draining && !full) {
		ta_server_loop *target = &srv->loops[srv->next_loop];
		srv->next_loop = (srv->next_loop + 1) % srv->nloops;
		if (target->index != 0) {
			hand_off(srv, listener, tcp, target);
			return;
		}
	}
	ta_server_loop *l = &srv->loops[0];
	ta_conn *conn = ta_conn_new(&l->host, tcp, ++srv->next_serial);
	if (!conn) {
		ta_log(TA_LOG_ERR, "out of memory accepting a connection");
		drop_pending(srv, listener, tcp);
		return;
	}
	loop_link(l, conn);
	int rc = uv_accept(listener, &conn->h.stream);
	if (rc != 0) {
		ta_log(TA_LOG_WARNING, "accept failed: %s", uv_strerror(rc));
		ta_conn_close(conn);
		return;
	}
	if (!conn_opened(l, conn))
		return;
	/* over a limit: make room, else refuse */
	if (full && admit_or_make_room(srv, tcp, msg, sizeof(msg)) != LIMIT_NONE) {
		ta_log_limited(&srv->refuse_log, TA_LOG_WARNING,
		               "connection %" PRIu64 " refused: %s", conn->serial, msg);
		ta_conn_reject(conn, TA_RESOURCE_EXHAUSTED, msg);
		return;
	}
	slots_add(srv, tcp);
	conn->counted = true;
	conn->pending = true;
	conn->accepted_turn = l->turn;
	conn_admit(l, conn);
}

/* Creates the missing directories of path's parent (mkdir -p) with mode. Returns 0 or
 * an errno value. */
static int make_parent_dirs(const char *path, mode_t mode)
{
	char *dir = strdup(path);
	if (!dir)
		return ENOMEM;
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir) {
		free(dir);
		return 0;
	}
	*slash = '\0';
	int rc = 0;
	for (char *p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(dir, mode) != 0 && errno != EEXIST) {
			rc = errno;
			break;
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
	free(dir);
	return rc;
}

/* Checks an existing file at path: removes a stale socket, refuses anything else. */
static ta_status clear_stale_socket(const char *path, ta_error *err)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return TA_OK;
		return ta_error_set(err, TA_UNAVAILABLE, "cannot inspect %s: %s", path,
		                    strerror(errno));
	}
	if (!S_ISSOCK(st.st_mode))
		return ta_error_set(err, TA_ALREADY_EXISTS,
		                    "%s exists and is not a socket; not removing it", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ta_error_set(err, TA_UNAVAILABLE, "socket: %s", strerror(errno));
	struct sockaddr_un addr;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	int rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
	int saved = errno;
	close(fd);
	if (rc == 0)
		return ta_error_set(err, TA_ALREADY_EXISTS,
		                    "another daemon is already listening on %s", path);
	if (saved != ECONNREFUSED && saved != ENOENT)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot probe %s: %s", path,
		                    strerror(saved));
	if (unlink(path) != 0 && errno != ENOENT)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot remove the stale socket %s: %s",
		                    path, strerror(errno));
	ta_log(TA_LOG_INFO, "removed the stale socket %s", path);
	return TA_OK;
}

/* Looks a group name (or a numeric gid) up. Returns TA_OK or NOT_FOUND. */
static ta_status lookup_group(const char *name, gid_t *gid, ta_error *err)
{
	char buf[16384];
	struct group grp, *res = NULL;
	int rc = getgrnam_r(name, &grp, buf, sizeof(buf), &res);
	if (rc == 0 && res) {
		*gid = res->gr_gid;
		return TA_OK;
	}
	char *end = NULL;
	errno = 0;
	unsigned long v = strtoul(name, &end, 10);
	if (errno == 0 && end != name && !*end) {
		*gid = (gid_t)v;
		return TA_OK;
	}
	return ta_error_set(err, TA_NOT_FOUND, "socket_group: no group named '%s'", name);
}

/* Creates, binds and listens on the Unix socket. */
static ta_status listen_unix(ta_server *srv, ta_error *err)
{
	const char *path = srv->cfg->socket_path;
	const bool grouped = srv->cfg->socket_group != NULL;
	const mode_t mode = grouped ? 0660 : 0600;
	struct sockaddr_un probe;
	if (strlen(path) >= sizeof(probe.sun_path))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "socket path %s is longer than %zu bytes", path,
		                    sizeof(probe.sun_path) - 1);
	gid_t gid = 0;
	if (grouped) {
		ta_status st = lookup_group(srv->cfg->socket_group, &gid, err);
		if (st != TA_OK)
			return st;
	}
	int rc = make_parent_dirs(path, grouped ? 0755 : 0700);
	if (rc != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot create the directory of %s: %s",
		                    path, strerror(rc));
	ta_status st = clear_stale_socket(path, err);
	if (st != TA_OK)
		return st;
	rc = uv_pipe_init(srv->loop, &srv->unix_listener, 0);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "uv_pipe_init: %s", uv_strerror(rc));
	srv->unix_listener.data = srv;
	srv->unix_open = true;
	mode_t old_umask = umask(0777 & ~mode);
	rc = uv_pipe_bind(&srv->unix_listener, path);
	umask(old_umask);
	if (rc != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot bind %s: %s", path,
		                    uv_strerror(rc));
	srv->unix_path = strdup(path);
	if (!srv->unix_path) {
		unlink(path); /* shutdown cannot remove a file it does not know of */
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	}
	if (chmod(path, mode) != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot set the mode of %s: %s", path,
		                    strerror(errno));
	if (grouped && chown(path, (uid_t)-1, gid) != 0)
		return ta_error_set(err, TA_PERMISSION_DENIED, "cannot give %s to group %s: %s",
		                    path, srv->cfg->socket_group, strerror(errno));
	rc = uv_listen((uv_stream_t *)&srv->unix_listener, LISTEN_BACKLOG, on_connection);
	if (rc != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot listen on %s: %s", path,
		                    uv_strerror(rc));
	ta_log(TA_LOG_NOTICE, "listening on unix:%s (mode %04o%s%s)", path, (unsigned)mode,
	       grouped ? ", group " : "", grouped ? srv->cfg->socket_group : "");
	return TA_OK;
}

/* Binds and listens on the --listen TCP address. */
static ta_status listen_tcp(ta_server *srv, ta_error *err)
{
	const char *spec = srv->cfg->listen;
	struct addrinfo *res = NULL;
	ta_status st = ta_net_resolve("listen", spec, &res, err);
	if (st != TA_OK)
		return st;
	const struct addrinfo *ai = res;
	const char *refused =
	    ta_net_is_loopback(ai->ai_addr) ? NULL
	    : !srv->cfg->allow_remote ? ": not a loopback address (set allow_remote = true or "
	                                "--allow-remote to serve other hosts)"
	    : !srv->svc->auth         ? " without authentication: other hosts may connect "
	                                "only to a daemon with auth_file (--auth-file)"
	                              : NULL;
	if (refused) {
		freeaddrinfo(res);
		return ta_error_set(err, TA_PERMISSION_DENIED, "refusing to listen on %s%s", spec,
		                    refused);
	}
	int rc = uv_tcp_init(srv->loop, &srv->tcp_listener);
	if (rc != 0) {
		freeaddrinfo(res);
		return ta_error_set(err, TA_INTERNAL, "uv_tcp_init: %s", uv_strerror(rc));
	}
	srv->tcp_listener.data = srv;
	srv->tcp_open = true;
	rc = uv_tcp_bind(&srv->tcp_listener, ai->ai_addr, 0);
	freeaddrinfo(res);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&srv->tcp_listener, LISTEN_BACKLOG, on_connection);
	if (rc != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot listen on %s: %s", spec,
		                    uv_strerror(rc));
	struct sockaddr_storage bound;
	memset(&bound, 0, sizeof(bound)); /* read below even when getsockname fails */
	int blen = (int)sizeof(bound);
	char shown[NI_MAXHOST] = "?", bport[NI_MAXSERV] = "?";
	if (uv_tcp_getsockname(&srv->tcp_listener, (struct sockaddr *)&bound, &blen) == 0)
		(void)getnameinfo((struct sockaddr *)&bound, (socklen_t)blen, shown, sizeof(shown),
		                  bport, sizeof(bport), NI_NUMERICHOST | NI_NUMERICSERV);
	ta_log(TA_LOG_NOTICE, "listening on tcp:%s%s%s:%s", bound.ss_family == AF_INET6 ? "[" : "",
	       shown, bound.ss_family == AF_INET6 ? "]" : "", bport);
	return TA_OK;
}

/* Timer callback: the shutdown waited shutdown_timeout seconds; close what is left. */
static void on_shutdown_timeout(uv_timer_t *timer)
{
	ta_server *srv = timer->data;
	ta_log(TA_LOG_WARNING,
	       "%u connection(s) still open %d s after the shutdown began (clients not "
	       "taking their responses?); closing them",
	       atomic_load(&srv->nconns), srv->cfg->shutdown_timeout);
	ta_server_shutdown(srv);
}

/* Signal callback: SIGTERM / SIGINT. */
static void on_signal(uv_signal_t *handle, int signum)
{
	ta_server *srv = handle->data;
	ta_log(TA_LOG_NOTICE, "received %s%s", signum == SIGTERM ? "SIGTERM" : "SIGINT",
	       srv->draining ? " again: closing connections now" : ": shutting down");
	ta_server_shutdown(srv);
}

/* persist.h (main loop): log records became durable; connections send what waited for
 * them (loop 0's at once, the other loops' through their wake handles). */
static void on_persisted(void *arg)
{
	ta_server *srv = arg;
	for (unsigned i = 1; i < srv->nloops_ready; i++)
		loop_wake(&srv->loops[i], TA_LOOP_WAKE_PERSISTED);
	loop_persisted(&srv->loops[0]);
}

/* Thread of loop l (index > 0): runs it until its shutdown closed its handles. */
static void *loop_thread(void *arg)
{
	ta_server_loop *l = arg;
	char name[16]; /* shown by top -H and /proc/PID/task/TID/comm */
	snprintf(name, sizeof(name), "ta-loop%u", l->index);
	(void)pthread_setname_np(pthread_self(), name); /* a name is a convenience only */
	int rc = uv_run(l->loop, UV_RUN_DEFAULT);
	if (rc != 0)
		ta_log(TA_LOG_WARNING, "event loop %u ended with active handles", l->index);
	return NULL;
}

/* Initialises loop l's handles (on srv's main thread, before its thread runs). The host
 * template tmpl gives the settings every loop shares. Returns TA_OK or an error (what was
 * initialised is marked open for the shutdown to close). */
static ta_status loop_init(ta_server *srv, ta_server_loop *l, unsigned index,
                           const ta_conn_host *tmpl, uint64_t sweep_ms, ta_error *err)
{
	l->srv = srv;
	l->index = index;
	l->handoff_tail = &l->handoff_head;
	ta_dispatch_scratch_init(&l->scratch);
	int rc = pthread_mutex_init(&l->lock, NULL);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "pthread_mutex_init: %s", strerror(rc));
	l->lock_init = true;
	if (index == 0) {
		l->loop = srv->loop;
	} else {
		rc = uv_loop_init(&l->own_loop);
		if (rc != 0)
			return ta_error_set(err, TA_INTERNAL, "cannot create event loop %u: %s",
			                    index, uv_strerror(rc));
		l->own_loop_init = true;
		l->loop = &l->own_loop;
		/* libuv opens a loop's spare fd with the first stream initialised on it: take it
		 * now, so that the fds of a running daemon do not grow with the first connection
		 * of each loop (loop 0 took its own with the listeners) */
		if ((rc = uv_pipe_init(l->loop, &l->spare_probe, 0)) != 0)
			return ta_error_set(err, TA_INTERNAL, "uv_pipe_init: %s", uv_strerror(rc));
		uv_close((uv_handle_t *)&l->spare_probe, on_handle_closed);
	}
	l->host = *tmpl;
	l->host.loop = l->loop;
	l->host.scratch = &l->scratch;
	atomic_init(&l->host.input_waiters, 0);
	if ((rc = uv_async_init(l->loop, &l->wake, on_loop_wake)) != 0)
		return ta_error_set(err, TA_INTERNAL, "uv_async_init: %s", uv_strerror(rc));
	l->wake.data = l;
	l->wake_open = true;
	if (index > 0) {
		if ((rc = ta_executor_port_init(&l->port, l->loop)) != 0)
			return ta_error_set(err, TA_INTERNAL, "cannot create an executor port: %s",
			                    uv_strerror(rc));
		l->port_open = true;
	}
	l->host.port = index == 0 ? &srv->executor.main : &l->port; /* async completions */
	if ((rc = uv_timer_init(l->loop, &l->sweep_timer)) != 0)
		return ta_error_set(err, TA_INTERNAL, "uv_timer_init: %s", uv_strerror(rc));
	l->sweep_open = true;
	l->sweep_timer.data = l;
	if ((rc = uv_check_init(l->loop, &l->resume_check)) != 0)
		return ta_error_set(err, TA_INTERNAL, "uv_check_init: %s", uv_strerror(rc));
	l->check_open = true;
	l->resume_check.data = l;
	if ((rc = uv_timer_start(&l->sweep_timer, on_sweep, sweep_ms, sweep_ms)) != 0 ||
	    (rc = uv_check_start(&l->resume_check, on_resume_check)) != 0)
		return ta_error_set(err, TA_INTERNAL, "cannot start the sweep: %s",
		                    uv_strerror(rc));
	if (srv->cfg->busy_poll_us > 0) {
		if ((rc = uv_idle_init(l->loop, &l->spin_idle)) != 0)
			return ta_error_set(err, TA_INTERNAL, "uv_idle_init: %s", uv_strerror(rc));
		if ((rc = uv_check_init(l->loop, &l->spin_check)) != 0) {
			uv_close((uv_handle_t *)&l->spin_idle, on_handle_closed);
			return ta_error_set(err, TA_INTERNAL, "uv_check_init: %s", uv_strerror(rc));
		}
		l->spin_open = true;
		l->spin_idle.data = l;
		l->spin_check.data = l;
		if ((rc = uv_check_start(&l->spin_check, on_spin_check)) != 0)
			return ta_error_set(err, TA_INTERNAL, "cannot start the busy poll: %s",
			                    uv_strerror(rc));
		uv_unref((uv_handle_t *)&l->spin_check); /* never keeps the loop alive */
		uv_unref((uv_handle_t *)&l->spin_idle);
	}
	if (srv->inline_lone) {
		if ((rc = uv_timer_init(l->loop, &l->busy_timer)) != 0)
			return ta_error_set(err, TA_INTERNAL, "uv_timer_init: %s", uv_strerror(rc));
		l->busy_timer_open = true;
		l->busy_timer.data = l;
		rc = uv_timer_start(&l->busy_timer, on_busy_timer, TA_SERVER_BUSY_MS,
		                    TA_SERVER_BUSY_MS);
		if (rc != 0)
			return ta_error_set(err, TA_INTERNAL, "uv_timer_start: %s",
			                    uv_strerror(rc));
		uv_unref((uv_handle_t *)&l->busy_timer); /* never keeps the loop alive */
	}
	return TA_OK;
}

/* Starts the thread of loop l (index > 0) with the daemon's signals blocked (they go to
 * the main loop). */
static ta_status loop_start_thread(ta_server_loop *l, ta_error *err)
{
	sigset_t old;
	ta_block_loop_signals(&old);
	l->thread_started = true; /* before the thread reads it */
	int rc = pthread_create(&l->thread, NULL, loop_thread, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		l->thread_started = false;
		return ta_error_set(err, TA_INTERNAL,
		                    "cannot start the thread of event loop %u: %s", l->index,
		                    strerror(rc));
	}
	return TA_OK;
}

ta_status ta_server_start(ta_server *srv, uv_loop_t *loop, const ta_config *cfg, ta_service *svc,
                          ta_error *err)
{
	memset(srv, 0, sizeof(*srv));
	srv->loop = loop;
	srv->cfg = cfg;
	srv->svc = svc;
	atomic_init(&srv->nactive, 0);
	atomic_init(&srv->nconns, 0);
	atomic_init(&srv->ntcp, 0);
	atomic_init(&srv->npending[0], 0);
	atomic_init(&srv->npending[1], 0);
	srv->budget.max = cfg->max_input_total;
	atomic_init(&srv->budget.held, 0);
	atomic_init(&srv->budget.waiters, 0);
	srv->refuse_log = (ta_log_limit)TA_LOG_LIMIT_INIT(10, "connections refused (too many "
	                                                      "connections, max_connections)");
	int rc = pthread_mutex_init(&srv->lock, NULL);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "pthread_mutex_init: %s", strerror(rc));
	srv->lock_init = true;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	/* a backend with apply_async (CUDA by default): every loop hands its connections'
	 * pipelined small plans to it and answers them as they come back, so loops never wait
	 * for the device and the workers keep only what blocks (large plans, creates) */
	bool async = ta_config_async(cfg, svc->info.name, ta_backend_has_apply_async(svc->backend),
	                             svc->persist != NULL);
	srv->nloops = (unsigned)ta_config_loops(cfg, svc->info.name, cpus, async,
	                                        ta_backend_device_count(svc->backend));
	srv->loops = calloc(srv->nloops, sizeof(*srv->loops));
	if (!srv->loops) {
		srv->draining = true; /* nothing to shut down: uv_run finds the loop empty */
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	}
	/* What every loop's connections get; small requests run on their loop's thread, which
	 * saves a trip through a worker; on the CPU backend up to TA_SERVER_INLINE_CPU elements
	 * (about a microsecond of atomics), on the CUDA backend only while one connection of
	 * the loop is open (a GPU round trip on the loop would stall every other connection;
	 * TA_SERVER_INLINE_CUDA). */
	ta_conn_host tmpl;
	memset(&tmpl, 0, sizeof(tmpl));
	tmpl.cfg = cfg;
	tmpl.svc = svc;
	tmpl.submit = host_submit;
	tmpl.gone = host_gone;
	tmpl.release = host_release;
	tmpl.input_freed = host_input_freed;
	tmpl.handshaken = host_handshaken;
	tmpl.budget = &srv->budget;
	/* Pipelined runs go to the workers when there are several to spread them over and the
	 * cores to run them: on 2 CPUs shared with the clients the hand-over costs more than it
	 * spreads (measured: 178k against 237k adds/s at 50x16, docs/PERFORMANCE.md); on 16 it
	 * more than doubles one loop's throughput (2.3M against 1.0M, doc/GPU-RESULTS.md).
	 * Several loops on the CPU backend run their connections' requests themselves, which
	 * does better still (3.9M against 2.6M at 50x16 with 8 loops, "Several event loops"
	 * in doc/GPU-RESULTS.md). On CUDA a loop must never wait for the GPU (4 loops running
	 * batches themselves, blocking, fell to 0.16M): with async (the default there) every
	 * read's frames are one run on the loop whose small plans go to apply_async
	 * (batch_min 1); without it the workers are what overlaps the GPU round trips. */
	bool cpu_backend = strcmp(svc->info.name, "cpu") == 0;
	int workers = ta_config_workers(cfg, svc->info.name);
	tmpl.async = async;
	if (cfg->batch_min != TA_CONFIG_BATCH_AUTO)
		tmpl.batch_min = (unsigned)cfg->batch_min;
	else if (async) /* every read's whole frames: one run on the loop */
		tmpl.batch_min = 1;
	else
		tmpl.batch_min = (srv->nloops == 1 || !cpu_backend) && workers >= 2 && cpus >= 4
		                     ? TA_CONN_BATCH_MIN
		                     : 0;
	tmpl.inline_max = cfg->inline_max >= -1 ? cfg->inline_max
	                  : cpu_backend         ? TA_SERVER_INLINE_CPU
	                                        : 0;
	srv->inline_lone = cfg->inline_max < -1 && !cpu_backend;
	if (srv->inline_lone)
		tmpl.inline_max = TA_SERVER_INLINE_CUDA;
	rc = ta_executor_init(&srv->executor, loop, workers);
	if (rc != 0) {
		srv->draining = true;
		return ta_error_set(err, TA_INTERNAL, "cannot start %d worker threads: %s", workers,
		                    strerror(-rc));
	}
	srv->executor_started = true;
	rc = uv_async_init(loop, &srv->main_wake, on_main_wake);
	if (rc != 0) {
		ta_error_set(err, TA_INTERNAL, "uv_async_init: %s", uv_strerror(rc));
		goto fail;
	}
	srv->main_wake.data = srv;
	srv->main_wake_open = true;
	/* the sweep runs at a quarter of the shortest timeout, between 10 ms and 1 s */
	uint64_t sweep_ms = 1000;
	const uint64_t timeouts[] = {cfg->frame_timeout_ms, cfg->idle_timeout_ms,
	                             cfg->handshake_timeout_ms};
	for (size_t i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++)
		if (timeouts[i] && timeouts[i] / 4 < sweep_ms)
			sweep_ms = timeouts[i] / 4;
	if (sweep_ms < 10)
		sweep_ms = 10;
	for (unsigned i = 0; i < srv->nloops; i++) {
		srv->nloops_ready = i + 1;
		if (loop_init(srv, &srv->loops[i], i, &tmpl, sweep_ms, err) != TA_OK)
			goto fail;
	}
	for (unsigned i = 1; i < srv->nloops; i++)
		if (loop_start_thread(&srv->loops[i], err) != TA_OK)
			goto fail;
	if (svc->persist && (rc = ta_persist_attach(svc->persist, loop, on_persisted, srv)) != 0) {
		ta_error_set(err, TA_INTERNAL, "cannot watch the data log: %s", uv_strerror(rc));
		goto fail;
	}

	rc = uv_signal_init(loop, &srv->sig_term);
	if (rc == 0) {
		rc = uv_signal_init(loop, &srv->sig_int);
		if (rc != 0)
			uv_close((uv_handle_t *)&srv->sig_term, on_handle_closed);
	}
	if (rc != 0) {
		ta_error_set(err, TA_INTERNAL, "uv_signal_init: %s", uv_strerror(rc));
		goto fail;
	}
	srv->signals_open = true;
	rc = uv_timer_init(loop, &srv->shutdown_timer);
	if (rc != 0) {
		ta_error_set(err, TA_INTERNAL, "uv_timer_init: %s", uv_strerror(rc));
		goto fail;
	}
	srv->timer_open = true;
	srv->shutdown_timer.data = srv;
	srv->sig_term.data = srv;
	srv->sig_int.data = srv;
	if ((rc = uv_signal_start(&srv->sig_term, on_signal, SIGTERM)) != 0 ||
	    (rc = uv_signal_start(&srv->sig_int, on_signal, SIGINT)) != 0) {
		ta_error_set(err, TA_INTERNAL, "uv_signal_start: %s", uv_strerror(rc));
		goto fail;
	}
	if (listen_unix(srv, err) != TA_OK)
		goto fail;
	if (cfg->listen && listen_tcp(srv, err) != TA_OK)
		goto fail;
	return TA_OK;
fail:;
	ta_status st = err ? err->code : TA_INTERNAL;
	ta_server_shutdown(srv);
	return st;
}

void ta_server_shutdown(ta_server *srv)
{
	bool force = srv->draining; /* a second call closes the connections at once */
	if (force && srv->forced)
		return;
	srv->forced = force;
	if (!force) {
		srv->draining = true;
		ta_backend_cancel_allocs(srv->svc->backend); /* a create still zeroing stops */
		int rc = ta_notify("STOPPING=1");
		if (rc < 0)
			ta_log(TA_LOG_WARNING, "cannot notify the service manager: %s",
			       strerror(-rc));
		close_open(&srv->unix_open, &srv->unix_listener);
		close_open(&srv->tcp_open, &srv->tcp_listener);
		if (srv->unix_path) {
			if (unlink(srv->unix_path) != 0 && errno != ENOENT)
				ta_log(TA_LOG_WARNING, "cannot remove %s: %s", srv->unix_path,
				       strerror(errno));
			free(srv->unix_path);
			srv->unix_path = NULL;
		}
		if (atomic_load(&srv->nconns) && srv->timer_open &&
		    srv->cfg->shutdown_timeout > 0) {
			int rc2 = uv_timer_start(&srv->shutdown_timer, on_shutdown_timeout,
			                         (uint64_t)srv->cfg->shutdown_timeout * 1000u, 0);
			if (rc2 != 0)
				ta_log(TA_LOG_WARNING, "cannot start the shutdown timer: %s",
				       uv_strerror(rc2));
		}
	}
	for (unsigned i = 0; i < srv->nloops_ready; i++) {
		ta_server_loop *l = &srv->loops[i];
		if (loop_is_direct(l))
			loop_stop(l, force);
		else
			loop_wake(l, force ? TA_LOOP_WAKE_FORCE : TA_LOOP_WAKE_DRAIN);
	}
	server_check_done(srv);
}

void ta_server_free(ta_server *srv)
{
	for (unsigned i = 1; i < srv->nloops_ready; i++) {
		ta_server_loop *l = &srv->loops[i];
		if (l->thread_started) {
			int rc = pthread_join(l->thread, NULL);
			if (rc != 0)
				ta_log(TA_LOG_WARNING,
				       "cannot join the thread of event loop %u: %s", l->index,
				       strerror(rc));
		}
		if (l->own_loop_init) {
			if (!l->thread_started) /* its closes still have to complete */
				(void)uv_run(l->loop, UV_RUN_DEFAULT);
			int rc = uv_loop_close(l->loop);
			if (rc != 0)
				ta_log(TA_LOG_WARNING, "cannot close event loop %u: %s", l->index,
				       uv_strerror(rc));
		}
	}
	for (unsigned i = 0; i < srv->nloops_ready; i++) {
		ta_server_loop *l = &srv->loops[i];
		for (ta_server_handoff *h = l->handoff_head, *next; h; h = next) {
			next = h->next;
			close(h->fd);
			free(h);
		}
		if (l->lock_init)
			pthread_mutex_destroy(&l->lock);
	}
	free(srv->loops);
	srv->loops = NULL;
	if (srv->lock_init)
		pthread_mutex_destroy(&srv->lock);
	srv->lock_init = false;
}
