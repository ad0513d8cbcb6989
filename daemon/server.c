/* server.c: listeners, accepting, the event loops, signals and shutdown (see server.h).
 *
 * Startup: the executor, the event loops (loops 1.. get a libuv loop and a thread each),
 * the Unix socket (parent directory created; a stale socket file removed, a live one an
 * error; the umask tightened around bind so that the socket never has a wider mode than
 * 0600 / 0660), TCP when asked (loopback only unless allow_remote), the signal handlers.
 *
 * Accepting: the main loop accepts every connection and hands them round-robin to the
 * loops (another loop gets a dup of the socket through its wake handle), so that a burst
 * of clients connecting at once is spread evenly. Over a limit the connection stays on
 * loop 0, which makes room (make_room) or refuses it (RESOURCE_EXHAUSTED, logged at most
 * once per 10 s).
 *
 * Shared by the loops: the connection counts (atomics), the input budget, the executor (a
 * port per loop) and the data log (its durability callback runs on the main loop, which
 * tells the others).
 *
 * Shutdown: a draining loop with no connection left closes its handles and tells the main
 * loop, which stops the executor and closes its own handles once every loop is done, so
 * uv_run returns; ta_server_free joins the threads. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include "server.h"

#include <stddef.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <netdb.h>
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

/* The loop a host belongs to. */
static ta_server_loop *host_loop(ta_conn_host *host)
{
	return (ta_server_loop *)((char *)host - offsetof(ta_server_loop, host));
}

/* True when this thread may act on loop l directly: loop 0, or one whose thread never ran. */
static bool loop_is_direct(const ta_server_loop *l)
{
	return l->index == 0 || !l->thread_started;
}

/* Asks loop l (another thread's) for the TA_LOOP_WAKE_* bits in flags, and to adopt the
 * socket h when not NULL (queued even if the loop has finished: ta_server_free closes it). */
static void loop_wake(ta_server_loop *l, unsigned flags, ta_server_handoff *h)
{
	pthread_mutex_lock(&l->lock);
	if (h) {
		*l->handoff_tail = h;
		l->handoff_tail = &h->next;
	}
	if (l->wake_open) {
		l->wake_flags |= flags;
		int rc = uv_async_send(&l->wake);
		if (rc != 0)
			ta_log(TA_LOG_ERR, "loop %u: uv_async_send failed: %s", l->index,
			       uv_strerror(rc));
	}
	pthread_mutex_unlock(&l->lock);
}

/* ta_conn_host.submit: to the executor, whose done callback comes back to host's loop. */
static void host_submit(ta_conn_host *host, ta_job *job)
{
	ta_executor_submit_to(&host_loop(host)->srv->executor, host->port, job);
}

/* Counts a connection of the transport (tcp) against the limits (delta 1: in its
 * handshake), or gives its slots back (delta -1; pending: it was still in its handshake). */
static void slots_move(ta_server *srv, bool tcp, bool pending, int delta)
{
	atomic_fetch_add(&srv->nactive, (unsigned)delta);
	atomic_fetch_add(&srv->svc->connections, (unsigned)delta);
	if (tcp)
		atomic_fetch_add(&srv->ntcp, (unsigned)delta);
	if (pending)
		atomic_fetch_add(&srv->npending[tcp], (unsigned)delta);
}

/* ta_conn_host.release: a closing connection gives its slots back (once: it is uncounted). */
static void host_release(ta_conn_host *host, ta_conn *conn)
{
	if (!conn->counted)
		return;
	conn->counted = false;
	slots_move(host_loop(host)->srv, conn->tcp, conn->pending, -1);
	conn->pending = false;
}

/* ta_conn_host.handshaken: the connection leaves the count of those in their handshake. */
static void host_handshaken(ta_conn_host *host, ta_conn *conn)
{
	if (!conn->counted || !conn->pending)
		return;
	conn->pending = false;
	atomic_fetch_sub(&host_loop(host)->srv->npending[conn->tcp], 1);
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
			loop_wake(l, TA_LOOP_WAKE_RESUME, NULL);
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

/* spin_idle's callback: nothing (an active idle handle makes the loop poll without sleeping). */
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
		int rc = uv_idle_start(&l->spin_idle, on_spin_idle); /* 0 when already active */
		if (rc != 0)
			ta_log(TA_LOG_WARNING, "loop %u: cannot busy-poll: %s", l->index,
			       uv_strerror(rc));
	} else if (uv_is_active((uv_handle_t *)&l->spin_idle) && uv_hrtime() >= l->spin_until_ns) {
		uv_idle_stop(&l->spin_idle);
	}
}

/* Sweep timer: timeouts of the loop's connections, then (loop 0) the held-back log counts. */
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

/* True when an embedded handle was initialised and is not closing: the server's structs
 * start zeroed, so a handle's type is UV_UNKNOWN_HANDLE until its uv_*_init. */
static bool handle_open(const void *handle)
{
	const uv_handle_t *h = handle;
	return h->type != UV_UNKNOWN_HANDLE && !uv_is_closing(h);
}

/* Closes an embedded handle (closing stops it) unless it is not open (handle_open). */
static void close_handle(void *handle)
{
	if (handle_open(handle))
		uv_close((uv_handle_t *)handle, NULL);
}

/* Closes the signal handles and the executor when shutdown has nothing left to wait on
 * (the listeners closed and every loop finished). Main loop thread. */
static void server_check_done(ta_server *srv)
{
	if (!srv->draining || handle_open(&srv->unix_listener) || handle_open(&srv->tcp_listener))
		return;
	pthread_mutex_lock(&srv->lock);
	bool all = srv->loops_finished >= srv->nloops_ready;
	pthread_mutex_unlock(&srv->lock);
	if (!all)
		return;
	close_handle(&srv->main_wake);
	close_handle(&srv->shutdown_timer);
	close_handle(&srv->sig_term);
	close_handle(&srv->sig_int);
	if (srv->executor_started) {
		srv->executor_started = false; /* stopped once */
		ta_executor_stop(&srv->executor, NULL);
	}
}

/* A draining loop with no connection left finishes: closes its handles (its thread's uv_run
 * then returns) and tells the main loop. On l's thread (the main one for a direct loop). */
static void loop_check_done(ta_server_loop *l)
{
	if (!l->draining || l->conns || l->finished)
		return;
	ta_server *srv = l->srv;
	l->finished = true;
	close_handle(&l->sweep_timer);
	close_handle(&l->resume_check);
	close_handle(&l->spin_idle);
	close_handle(&l->spin_check);
	close_handle(&l->busy_timer);
	if (l->host.port == &l->port)
		ta_executor_port_close(&l->port);
	pthread_mutex_lock(&l->lock);
	l->wake_open = false; /* other threads send to it no more */
	pthread_mutex_unlock(&l->lock);
	close_handle(&l->wake);
	ta_dispatch_scratch_free(&l->scratch); /* no connection is left to use it */
	pthread_mutex_lock(&srv->lock);
	srv->loops_finished++;
	if (!loop_is_direct(l)) { /* a thread ran: main_wake is open until every loop is done */
		int rc = uv_async_send(&srv->main_wake);
		if (rc != 0)
			ta_log(TA_LOG_ERR, "loop %u: uv_async_send failed: %s", l->index,
			       uv_strerror(rc));
	}
	pthread_mutex_unlock(&srv->lock);
	if (loop_is_direct(l))
		server_check_done(srv);
}

/* ta_conn_host.gone: a connection about to be freed leaves its loop's list and the
 * counters; a shutdown may then have nothing left to wait on. */
static void host_gone(ta_conn_host *host, ta_conn *conn)
{
	ta_server_loop *l = host_loop(host);
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		l->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	atomic_fetch_sub(&l->srv->nconns, 1);
	host_release(host, conn);
	loop_check_done(l);
}

/* Calls fn on each of loop l's connections (fn may close one: a connection is freed only
 * later, in its close callback). */
static void loop_each(ta_server_loop *l, void (*fn)(ta_conn *))
{
	for (ta_conn *c = l->conns, *next; c; c = next) {
		next = c->next;
		fn(c);
	}
}

/* Shutdown reached loop l: its connections finish what they were sent, then close; with
 * force (a second signal or the shutdown timeout) they close at once. */
static void loop_stop(ta_server_loop *l, bool force)
{
	bool *done = force ? &l->forced : &l->draining;
	if (*done)
		return;
	*done = true;
	loop_each(l, force ? ta_conn_close : ta_conn_drain);
	loop_check_done(l);
}

/* main_wake callback: a loop finished its shutdown. */
static void on_main_wake(uv_async_t *handle)
{
	server_check_done(handle->data);
}

/* Counts conn as in its handshake (its slots were taken by slots_move) and starts it. */
static void conn_admit(ta_server_loop *l, ta_conn *conn)
{
	conn->counted = true;
	conn->pending = true;
	conn->accepted_turn = l->turn;
	ta_log(TA_LOG_DEBUG, "connection %" PRIu64 " accepted (%s, loop %u, %u open)", conn->serial,
	       conn->tcp ? "tcp" : "unix", l->index, atomic_load(&l->srv->nactive));
	ta_conn_start(conn);
}

/* Takes the pending connection off the listener's queue and drops it (memory is short);
 * without an accept libuv would stop watching the listener. */
static void drop_pending(ta_server *srv, uv_stream_t *listener, bool tcp)
{
	int fd = ta_conn_accept_fd(srv->loop, listener, tcp);
	if (fd >= 0)
		close(fd);
	else
		ta_log(TA_LOG_WARNING, "accept failed: %s", uv_strerror(fd));
}

/* Opens a connection on loop l: the socket pending on listener (loop 0), or else fd (which
 * the main loop accepted for l); TCP_NODELAY for TCP. Returns it in l's list, not counted
 * yet, or NULL (logged; the socket closed or dropped; closed at once while l drains). */
static ta_conn *conn_open(ta_server_loop *l, bool tcp, uint64_t serial, uv_stream_t *listener,
                          int fd)
{
	ta_conn *conn = ta_conn_new(&l->host, tcp, serial);
	if (!conn) {
		ta_log(TA_LOG_ERR, "loop %u: out of memory opening connection %" PRIu64, l->index,
		       serial);
		if (listener)
			drop_pending(l->srv, listener, tcp);
		else
			close(fd);
		return NULL;
	}
	conn->next = l->conns; /* first in l's list (host_gone takes it out) */
	if (l->conns)
		l->conns->prev = conn;
	l->conns = conn;
	atomic_fetch_add(&l->srv->nconns, 1);
	int rc = listener ? uv_accept(listener, &conn->h.stream)
	         : tcp    ? uv_tcp_open(&conn->h.tcp, fd)
	                  : uv_pipe_open(&conn->h.pipe, fd);
	if (rc != 0) {
		ta_log(TA_LOG_WARNING, "loop %u: cannot open connection %" PRIu64 ": %s", l->index,
		       serial, uv_strerror(rc));
		if (!listener)
			close(fd);
	} else if (tcp && (rc = uv_tcp_nodelay(&conn->h.tcp, 1)) != 0) {
		ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": cannot set TCP_NODELAY: %s", serial,
		       uv_strerror(rc));
		rc = 0;
	}
	if (rc != 0 || l->draining) {
		ta_conn_close(conn);
		return NULL;
	}
	return conn;
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
	for (ta_server_handoff *next; h; h = next) {
		next = h->next;
		ta_conn *conn = conn_open(l, h->tcp, h->serial, NULL, h->fd);
		if (conn)
			conn_admit(l, conn);
		else /* counted by the main loop when it handed the socket over */
			slots_move(l->srv, h->tcp, true, -1);
		free(h);
	}
	if (flags & TA_LOOP_WAKE_RESUME)
		l->resume_pending = true; /* resume_check runs after this turn's callbacks */
	if (flags & TA_LOOP_WAKE_PERSISTED)
		loop_each(l, ta_conn_persisted);
	if (flags & TA_LOOP_WAKE_DRAIN)
		loop_stop(l, false);
	if (flags & TA_LOOP_WAKE_FORCE)
		loop_stop(l, true);
}

/* Main loop: accepts a pending connection and queues its socket on loop l (index > 0). */
static void hand_off(ta_server *srv, uv_stream_t *listener, bool tcp, ta_server_loop *l)
{
	ta_server_handoff *h = malloc(sizeof(*h));
	int fd = h ? ta_conn_accept_fd(srv->loop, listener, tcp) : UV_ENOMEM;
	if (fd < 0) {
		ta_log(TA_LOG_WARNING, "cannot accept a connection: %s", uv_strerror(fd));
		free(h);
		if (fd == UV_ENOMEM) /* still pending: try once more to drop it */
			drop_pending(srv, listener, tcp);
		return;
	}
	*h = (ta_server_handoff){.fd = fd, .tcp = tcp, .serial = ++srv->next_serial};
	slots_move(srv, tcp, true, 1);
	loop_wake(l, 0, h);
}

/* True when a newcomer of the transport (tcp) finds a limit reached now, with a message
 * naming it in msg; *handshakes tells whether it is the handshake cap (not looked at with
 * soft_handshakes). */
static bool over_limit(ta_server *srv, bool tcp, bool soft_handshakes, bool *handshakes, char *msg,
                       size_t size)
{
	const ta_config *cfg = srv->cfg;
	unsigned max = (unsigned)cfg->max_connections;
	unsigned reserve = (unsigned)cfg->unix_reserve;
	unsigned tcp_max = max > reserve ? max - reserve : 1;
	*handshakes = !soft_handshakes &&
	              atomic_load(&srv->npending[tcp]) >= (unsigned)cfg->max_unauthenticated;
	if (*handshakes)
		snprintf(msg, size,
		         "too many connections in their handshake: the limit is %d per transport "
		         "(max_unauthenticated); try again later",
		         cfg->max_unauthenticated);
	else if (atomic_load(&srv->nactive) >= max)
		snprintf(msg, size,
		         "too many connections: the limit is %d (max_connections); try again "
		         "later",
		         cfg->max_connections);
	else if (tcp && atomic_load(&srv->ntcp) >= tcp_max)
		snprintf(msg, size,
		         "too many TCP connections: the limit is %u (max_connections less "
		         "unix_reserve, kept for local clients); try again later",
		         tcp_max);
	else
		return false;
	return true;
}

/* A newcomer of the transport (tcp) found a limit reached (handshakes: the handshake cap):
 * closes the main loop's connection that server.h's Slots paragraph picks, if there is one.
 * Returns true when one was closed. */
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
		/* equal times (accepted in one loop turn): the older, later in the list */
		if (!victim || since <= victim_since) {
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
	bool handshakes, full = over_limit(srv, tcp, false, &handshakes, msg, sizeof(msg));
	ta_server_loop *l = &srv->loops[0];
	if (srv->nloops > 1 && !srv->draining && !full) { /* round-robin */
		l = &srv->loops[srv->next_loop];
		srv->next_loop = (srv->next_loop + 1) % srv->nloops;
	}
	if (l->index != 0) {
		hand_off(srv, listener, tcp, l);
		return;
	}
	ta_conn *conn = conn_open(l, tcp, ++srv->next_serial, listener, -1);
	if (!conn)
		return;
	/* over a limit: make room (each closing frees a slot at once) while it can; a handshake
	 * cap with no connection to close (a burst of clients accepted in this loop turn) lets
	 * the newcomer in as far as the slots allow; else it is refused */
	for (bool soft = false;
	     full && over_limit(srv, tcp, soft, &handshakes, msg, sizeof(msg));) {
		if (make_room(srv, tcp, handshakes))
			continue;
		if (!handshakes) {
			ta_log_limited(&srv->refuse_log, TA_LOG_WARNING,
			               "connection %" PRIu64 " refused: %s", conn->serial, msg);
			ta_conn_reject(conn, TA_RESOURCE_EXHAUSTED, msg);
			return;
		}
		soft = true;
	}
	slots_move(srv, tcp, true, 1);
	conn_admit(l, conn);
}

/* Creates the missing directories of path's parent (mkdir -p) with mode; path fits in a
 * sockaddr_un. Returns 0 or an errno value. */
static int make_parent_dirs(const char *path, mode_t mode)
{
	char dir[sizeof(((struct sockaddr_un *)NULL)->sun_path)];
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = strchr(dir + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdir(dir, mode) != 0 && errno != EEXIST)
			return errno;
		*p = '/';
	}
	return 0;
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
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
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
	ta_status st = grouped ? lookup_group(srv->cfg->socket_group, &gid, err) : TA_OK;
	if (st != TA_OK)
		return st;
	int rc = make_parent_dirs(path, grouped ? 0755 : 0700);
	if (rc != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot create the directory of %s: %s",
		                    path, strerror(rc));
	st = clear_stale_socket(path, err);
	if (st != TA_OK)
		return st;
	rc = uv_pipe_init(srv->loop, &srv->unix_listener, 0);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "uv_pipe_init: %s", uv_strerror(rc));
	srv->unix_listener.data = srv;
	mode_t old_umask = umask(0777 & ~mode);
	rc = uv_pipe_bind(&srv->unix_listener, path);
	umask(old_umask);
	if (rc != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot bind %s: %s", path,
		                    uv_strerror(rc));
	srv->unix_bound = true; /* shutdown removes the file */
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
	int rc = uv_tcp_init(srv->loop, &srv->tcp_listener);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "uv_tcp_init: %s", uv_strerror(rc));
	srv->tcp_listener.data = srv;
	struct addrinfo *res = NULL;
	ta_status st = ta_net_resolve("listen", spec, &res, err);
	if (st != TA_OK)
		return st;
	const char *refused =
	    ta_net_is_loopback(res->ai_addr) ? NULL
	    : !srv->cfg->allow_remote ? ": not a loopback address (set allow_remote = true or "
	                                "--allow-remote to serve other hosts)"
	    : !srv->svc->auth         ? " without authentication: other hosts may connect "
	                                "only to a daemon with auth_file (--auth-file)"
	                              : NULL;
	if (!refused)
		rc = uv_tcp_bind(&srv->tcp_listener, res->ai_addr, 0);
	freeaddrinfo(res);
	if (refused)
		return ta_error_set(err, TA_PERMISSION_DENIED, "refusing to listen on %s%s", spec,
		                    refused);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&srv->tcp_listener, LISTEN_BACKLOG, on_connection);
	if (rc != 0)
		return ta_error_set(err, TA_UNAVAILABLE, "cannot listen on %s: %s", spec,
		                    uv_strerror(rc));
	struct sockaddr_storage bound = {0}; /* read below even when getsockname fails */
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
		loop_wake(&srv->loops[i], TA_LOOP_WAKE_PERSISTED, NULL);
	loop_each(&srv->loops[0], ta_conn_persisted);
}

/* The pump of a loop's port (ta_executor_port_pump): the backend's asynchronous calls of
 * the calling loop. */
static bool loop_pump(void *arg)
{
	return ta_backend_poll_async((ta_backend *)arg);
}

/* On loop l's own thread, before it runs: with asynchronous batches, the loop attaches to the
 * backend, and when the backend takes it up (the CUDA backend's lanes) its port drives them. */
static void loop_attach(ta_server_loop *l)
{
	ta_backend *be = l->host.svc->backend;
	if (l->host.async && ta_backend_async_attach(be)) {
		ta_executor_port_pump(l->host.port, loop_pump, be);
		ta_log(TA_LOG_INFO, "event loop %u: its asynchronous requests run in its own lane",
		       l->index);
	}
}

/* Thread of loop l (index > 0): runs it until its shutdown closed its handles. */
static void *loop_thread(void *arg)
{
	ta_server_loop *l = arg;
	char name[16]; /* shown by top -H and /proc/PID/task/TID/comm */
	snprintf(name, sizeof(name), "ta-loop%u", l->index);
	(void)pthread_setname_np(pthread_self(), name); /* a name is a convenience only */
	loop_attach(l);
	int rc = uv_run(l->loop, UV_RUN_DEFAULT);
	if (rc != 0)
		ta_log(TA_LOG_WARNING, "event loop %u ended with active handles", l->index);
	return NULL;
}

/* Initialises loop l with the settings of tmpl, on the main thread before l's thread runs.
 * Returns TA_OK or an error (the shutdown closes what was opened). */
static ta_status loop_init(ta_server *srv, ta_server_loop *l, unsigned index,
                           const ta_conn_host *tmpl, uint64_t sweep_ms, ta_error *err)
{
	int rc = pthread_mutex_init(&l->lock, NULL);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "pthread_mutex_init: %s", strerror(rc));
	srv->nloops_ready = index + 1; /* with its lock: shut down and freed from now on */
	l->srv = srv;
	l->index = index;
	l->handoff_tail = &l->handoff_head;
	ta_dispatch_scratch_init(&l->scratch);
	l->host = *tmpl;
	l->loop = srv->loop;
	l->host.port = &srv->executor.main; /* where async completions come back */
	if (index > 0) {
		if ((rc = uv_loop_init(&l->own_loop)) != 0)
			return ta_error_set(err, TA_INTERNAL, "cannot create event loop %u: %s",
			                    index, uv_strerror(rc));
		l->loop = &l->own_loop; /* ta_server_free closes it */
		/* libuv opens a loop's spare fd with the first stream initialised on it: take it
		 * now, so that the fds of a running daemon do not grow with the first connection
		 * of each loop (loop 0 took its own with the listeners) */
		if ((rc = uv_pipe_init(l->loop, &l->spare_probe, 0)) != 0)
			return ta_error_set(err, TA_INTERNAL, "uv_pipe_init: %s", uv_strerror(rc));
		uv_close((uv_handle_t *)&l->spare_probe, NULL);
		if ((rc = ta_executor_port_init(&l->port, l->loop)) != 0)
			return ta_error_set(err, TA_INTERNAL, "cannot create an executor port: %s",
			                    uv_strerror(rc));
		l->host.port = &l->port; /* loop_check_done closes it */
	}
	if (tmpl->async) /* the loop polls for its requests' completions on the backend */
		ta_executor_port_poll(l->host.port, srv->async_poll_us);
	l->host.loop = l->loop;
	l->host.scratch = &l->scratch; /* input_waiters is 0, from tmpl */
	l->wake.data = l;
	if ((rc = uv_async_init(l->loop, &l->wake, on_loop_wake)) != 0)
		return ta_error_set(err, TA_INTERNAL, "uv_async_init: %s", uv_strerror(rc));
	l->wake_open = true;
	l->sweep_timer.data = l; /* set before the inits: libuv never touches data */
	l->resume_check.data = l;
	l->spin_check.data = l;
	l->busy_timer.data = l;
	if ((rc = uv_timer_init(l->loop, &l->sweep_timer)) != 0 ||
	    (rc = uv_check_init(l->loop, &l->resume_check)) != 0 ||
	    (rc = uv_timer_start(&l->sweep_timer, on_sweep, sweep_ms, sweep_ms)) != 0 ||
	    (rc = uv_check_start(&l->resume_check, on_resume_check)) != 0)
		return ta_error_set(err, TA_INTERNAL, "cannot start the sweep: %s",
		                    uv_strerror(rc));
	if (srv->cfg->busy_poll_us > 0) {
		if ((rc = uv_idle_init(l->loop, &l->spin_idle)) != 0 ||
		    (rc = uv_check_init(l->loop, &l->spin_check)) != 0 ||
		    (rc = uv_check_start(&l->spin_check, on_spin_check)) != 0)
			return ta_error_set(err, TA_INTERNAL, "cannot start the busy poll: %s",
			                    uv_strerror(rc));
		uv_unref((uv_handle_t *)&l->spin_check); /* never keeps the loop alive */
		uv_unref((uv_handle_t *)&l->spin_idle);
	}
	if (srv->inline_lone) {
		if ((rc = uv_timer_init(l->loop, &l->busy_timer)) != 0 ||
		    (rc = uv_timer_start(&l->busy_timer, on_busy_timer, TA_SERVER_BUSY_MS,
		                         TA_SERVER_BUSY_MS)) != 0)
			return ta_error_set(err, TA_INTERNAL, "cannot start the busy timer: %s",
			                    uv_strerror(rc));
		uv_unref((uv_handle_t *)&l->busy_timer); /* never keeps the loop alive */
	}
	return TA_OK;
}

/* ta_server_start once srv's settings and lock are set: the executor, the loops and their
 * threads, the data log's callback, the signal handlers and the listeners. */
static ta_status server_open(ta_server *srv, ta_error *err)
{
	const ta_config *cfg = srv->cfg;
	ta_service *svc = srv->svc;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	/* with apply_async (CUDA by default) the loops hand their small plans to the backend and
	 * never wait for the device; the workers keep what blocks (large plans, creates) */
	bool async = ta_config_async(cfg, svc->info.name, ta_backend_has_apply_async(svc->backend),
	                             svc->persist != NULL);
	srv->nloops = (unsigned)ta_config_loops(cfg, svc->info.name, cpus, async,
	                                        ta_backend_device_count(svc->backend));
	srv->async_poll_us =
	    async ? (unsigned)ta_config_async_poll(cfg, cpus, srv->nloops,
	                                           ta_backend_device_count(svc->backend))
	          : 0u;
	srv->loops = calloc(srv->nloops, sizeof(*srv->loops));
	if (!srv->loops)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	bool cpu_backend = strcmp(svc->info.name, "cpu") == 0;
	int workers = ta_config_workers(cfg, svc->info.name);
	srv->inline_lone = cfg->inline_max < -1 && !cpu_backend;
	/* What every loop's connections get. Small requests run on their loop's thread (no trip
	 * through a worker): on the CPU backend up to TA_SERVER_INLINE_CPU elements, on CUDA
	 * only while few of the loop's connections are busy (inline_lone: a GPU round trip on
	 * the loop stalls the others). A read's pipelined frames go to a worker as one job
	 * (batch_min) where there are workers and cores to spread them over, unless several
	 * loops of the CPU backend run them themselves; with async they are one run on the
	 * loop. docs/PERFORMANCE.md and doc/GPU-RESULTS.md have the measurements. */
	ta_conn_host tmpl = {
	    .cfg = cfg,
	    .svc = svc,
	    .submit = host_submit,
	    .gone = host_gone,
	    .release = host_release,
	    .input_freed = host_input_freed,
	    .handshaken = host_handshaken,
	    .budget = &srv->budget,
	    .async = async,
	    .inline_max = cfg->inline_max >= -1 ? cfg->inline_max
	                  : cpu_backend         ? TA_SERVER_INLINE_CPU
	                                        : TA_SERVER_INLINE_CUDA,
	    .batch_min = cfg->batch_min != TA_CONFIG_BATCH_AUTO ? (unsigned)cfg->batch_min
	                 : async                                ? 1u
	                 : (srv->nloops == 1 || !cpu_backend) && workers >= 2 && cpus >= 4
	                     ? TA_CONN_BATCH_MIN
	                     : 0u,
	};
	ta_log(TA_LOG_NOTICE, "backend %s: %s%s%s, %d workers, %u event loop(s)%s%s",
	       svc->info.name, svc->info.device,
	       svc->info.compute_capability[0] ? ", compute capability " : "",
	       svc->info.compute_capability, workers, srv->nloops,
	       async ? ", small requests applied asynchronously from the loops" : "",
	       srv->async_poll_us ? ", which poll for their completions" : "");
	if (cfg->async_apply == 1 && !async)
		ta_log(TA_LOG_WARNING, "async_apply: %s; pipelined requests go to the workers",
		       svc->persist ? "not with --data-dir (logged requests keep their order "
		                      "through the workers)"
		                    : "the backend cannot apply without waiting");
	int rc = ta_executor_init(&srv->executor, srv->loop, workers);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "cannot start %d worker threads: %s", workers,
		                    strerror(-rc));
	srv->executor_started = true;
	srv->main_wake.data = srv;
	if ((rc = uv_async_init(srv->loop, &srv->main_wake, on_main_wake)) != 0)
		return ta_error_set(err, TA_INTERNAL, "uv_async_init: %s", uv_strerror(rc));
	/* the sweep runs at a quarter of the shortest timeout, between 10 ms and 1 s */
	uint64_t sweep_ms = 1000;
	const uint64_t timeouts[] = {cfg->frame_timeout_ms, cfg->idle_timeout_ms,
	                             cfg->handshake_timeout_ms};
	for (size_t i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++)
		if (timeouts[i] && timeouts[i] / 4 < sweep_ms)
			sweep_ms = timeouts[i] / 4;
	if (sweep_ms < 10)
		sweep_ms = 10;
	ta_status st = TA_OK;
	for (unsigned i = 0; i < srv->nloops && st == TA_OK; i++)
		st = loop_init(srv, &srv->loops[i], i, &tmpl, sweep_ms, err);
	for (unsigned i = 1; i < srv->nloops && st == TA_OK; i++) {
		ta_server_loop *l = &srv->loops[i];
		sigset_t old;
		ta_block_loop_signals(&old); /* the thread leaves the signals to the main loop */
		l->thread_started = true;    /* before the thread reads it */
		rc = pthread_create(&l->thread, NULL, loop_thread, l);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc != 0) {
			l->thread_started = false;
			st = ta_error_set(err, TA_INTERNAL,
			                  "cannot start the thread of event loop %u: %s", i,
			                  strerror(rc));
		}
	}
	if (st != TA_OK)
		return st;
	loop_attach(&srv->loops[0]); /* loop 0 runs on this thread */
	if (svc->persist &&
	    (rc = ta_persist_attach(svc->persist, srv->loop, on_persisted, srv)) != 0)
		return ta_error_set(err, TA_INTERNAL, "cannot watch the data log: %s",
		                    uv_strerror(rc));
	srv->shutdown_timer.data = srv;
	srv->sig_term.data = srv;
	srv->sig_int.data = srv;
	if ((rc = uv_signal_init(srv->loop, &srv->sig_term)) != 0 ||
	    (rc = uv_signal_init(srv->loop, &srv->sig_int)) != 0 ||
	    (rc = uv_timer_init(srv->loop, &srv->shutdown_timer)) != 0 ||
	    (rc = uv_signal_start(&srv->sig_term, on_signal, SIGTERM)) != 0 ||
	    (rc = uv_signal_start(&srv->sig_int, on_signal, SIGINT)) != 0)
		return ta_error_set(err, TA_INTERNAL, "cannot handle SIGTERM and SIGINT: %s",
		                    uv_strerror(rc));
	if ((st = listen_unix(srv, err)) == TA_OK && cfg->listen)
		st = listen_tcp(srv, err);
	return st;
}

ta_status ta_server_start(ta_server *srv, uv_loop_t *loop, const ta_config *cfg, ta_service *svc,
                          ta_error *err)
{
	memset(srv, 0, sizeof(*srv));
	srv->loop = loop;
	srv->cfg = cfg;
	srv->svc = svc; /* the memset zeroed the counts: all-zero lock-free atomics are 0 */
	srv->budget.max = cfg->max_input_total;
	srv->refuse_log = (ta_log_limit)TA_LOG_LIMIT_INIT(10, "connections refused (too many "
	                                                      "connections, max_connections)");
	int rc = pthread_mutex_init(&srv->lock, NULL);
	if (rc != 0) /* before anything the shutdown would have to undo */
		return ta_error_set(err, TA_INTERNAL, "pthread_mutex_init: %s", strerror(rc));
	srv->lock_init = true;
	ta_status st = server_open(srv, err);
	if (st != TA_OK)
		ta_server_shutdown(srv); /* stops what was started */
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
		close_handle(&srv->unix_listener);
		close_handle(&srv->tcp_listener);
		const char *path = srv->cfg->socket_path;
		if (srv->unix_bound && unlink(path) != 0 && errno != ENOENT)
			ta_log(TA_LOG_WARNING, "cannot remove %s: %s", path, strerror(errno));
		if (atomic_load(&srv->nconns) && handle_open(&srv->shutdown_timer) &&
		    srv->cfg->shutdown_timeout > 0) {
			rc = uv_timer_start(&srv->shutdown_timer, on_shutdown_timeout,
			                    (uint64_t)srv->cfg->shutdown_timeout * 1000u, 0);
			if (rc != 0)
				ta_log(TA_LOG_WARNING, "cannot start the shutdown timer: %s",
				       uv_strerror(rc));
		}
	}
	for (unsigned i = 0; i < srv->nloops_ready; i++) {
		ta_server_loop *l = &srv->loops[i];
		if (loop_is_direct(l))
			loop_stop(l, force);
		else
			loop_wake(l, force ? TA_LOOP_WAKE_FORCE : TA_LOOP_WAKE_DRAIN, NULL);
	}
	server_check_done(srv);
}

void ta_server_free(ta_server *srv)
{
	for (unsigned i = 1; i < srv->nloops_ready; i++) {
		ta_server_loop *l = &srv->loops[i];
		int rc = l->thread_started ? pthread_join(l->thread, NULL) : 0;
		if (rc != 0)
			ta_log(TA_LOG_WARNING, "cannot join the thread of event loop %u: %s",
			       l->index, strerror(rc));
		if (l->loop == &l->own_loop) {
			if (!l->thread_started) /* its closes still have to complete */
				(void)uv_run(l->loop, UV_RUN_DEFAULT);
			if ((rc = uv_loop_close(l->loop)) != 0)
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
		pthread_mutex_destroy(&l->lock);
	}
	free(srv->loops);
	if (srv->lock_init)
		pthread_mutex_destroy(&srv->lock);
}
