/* server.c: listeners, accepting, signals and shutdown (see server.h).
 *
 * Startup: executor, then the Unix socket (parent directory created; a stale socket file
 * from a dead daemon is removed, a live one is an error; the umask is tightened around
 * bind so that the socket never exists with a wider mode than 0600 / 0660), then TCP when
 * asked (loopback only unless allow_remote), then SIGTERM / SIGINT handlers.
 *
 * Accepting over max_connections: the connection is accepted, answered with one
 * RESOURCE_EXHAUSTED response and closed, so that the client learns why; the refusals are
 * logged at most once per 10 s with a count. A connection gives its slot back as soon as it
 * starts closing (host_release), not when its last running request is done.
 *
 * A periodic sweep (sweep_timer, at most every second, more often for short timeouts)
 * applies frame_timeout and idle_timeout to every connection and writes the counts of
 * rate-limited log lines; resume_check wakes connections waiting for input budget
 * (max_input_total) in the loop turn after some was given back.
 *
 * Shutdown: ta_server_shutdown closes the listeners, removes the socket file and drains
 * every connection; each freed connection tells the server (ta_conn_host.gone), which stops the
 * executor and closes the signal handles once none is left, so uv_run returns. */
#include "server.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "netaddr.h"
#include "notify.h"

/* Listen backlog of both listeners. */
#define LISTEN_BACKLOG 128

static void server_check_done(ta_server *srv);

/* ta_conn_host.submit: a connection's large request goes to the executor. */
static void host_submit(ta_conn_host *host, ta_job *job)
{
	ta_server *srv = (ta_server *)((char *)host - offsetof(ta_server, host));
	ta_executor_submit(&srv->executor, job);
}

/* ta_conn_host.release: a closing connection gives its max_connections slot back. */
static void host_release(ta_conn_host *host, ta_conn *conn)
{
	ta_server *srv = (ta_server *)((char *)host - offsetof(ta_server, host));
	if (!conn->counted)
		return;
	conn->counted = false;
	srv->nactive--;
	atomic_fetch_sub(&srv->svc->connections, 1);
}

/* ta_conn_host.input_freed: wake the waiting connections after this loop turn. */
static void host_input_freed(ta_conn_host *host)
{
	ta_server *srv = (ta_server *)((char *)host - offsetof(ta_server, host));
	srv->resume_pending = true;
}

/* Check callback: input budget was given back; the waiting connections try again, oldest
 * connection last (the list is newest first, so the walk starts at its end). */
static void on_resume_check(uv_check_t *check)
{
	ta_server *srv = check->data;
	if (!srv->resume_pending)
		return;
	srv->resume_pending = false;
	ta_conn *last = srv->conns;
	while (last && last->next)
		last = last->next;
	for (ta_conn *c = last, *prev; c && srv->host.input_waiters; c = prev) {
		prev = c->prev; /* a resumed connection may close, never be freed here */
		if (c->budget_wait)
			ta_conn_resume_input(c);
	}
}

/* Sweep timer: timeouts of every connection, then the held-back log counts. */
static void on_sweep(uv_timer_t *timer)
{
	ta_server *srv = timer->data;
	uint64_t now = uv_now(srv->loop);
	for (ta_conn *c = srv->conns, *next; c; c = next) {
		next = c->next; /* closing frees only in the close callback */
		ta_conn_check_timeouts(c, now);
	}
	ta_log_limit_flush(&srv->refuse_log, TA_LOG_WARNING);
	ta_log_limit_flush(&srv->svc->auth_log, TA_LOG_WARNING);
}

/* busy_timer (CUDA, inline_max auto), every TA_SERVER_BUSY_MS: small requests run on the
 * loop while the connections that sent bytes since the last tick are few
 * (TA_SERVER_INLINE_CUDA_CONNS), on the workers otherwise. */
static void on_busy_timer(uv_timer_t *timer)
{
	ta_server *srv = timer->data;
	uint64_t now = uv_now(srv->loop);
	uint64_t since = now > TA_SERVER_BUSY_MS ? now - TA_SERVER_BUSY_MS : 0;
	unsigned busy = 0;
	for (ta_conn *c = srv->conns; c && busy <= TA_SERVER_INLINE_CUDA_CONNS; c = c->next)
		if (c->counted && c->last_read_ms >= since)
			busy++;
	srv->host.inline_max = busy <= TA_SERVER_INLINE_CUDA_CONNS ? TA_SERVER_INLINE_CUDA : 0;
}

/* ta_conn_host.gone: a connection about to be freed leaves the list and the counters; a
 * shutdown may then have nothing left to wait on. */
static void host_gone(ta_conn_host *host, ta_conn *conn)
{
	ta_server *srv = (ta_server *)((char *)host - offsetof(ta_server, host));
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		srv->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	srv->nconns--;
	if (conn->counted) {
		srv->nactive--;
		atomic_fetch_sub(&srv->svc->connections, 1);
	}
	server_check_done(srv);
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

/* Closes the signal handles and the executor when shutdown has nothing left to wait on. */
static void server_check_done(ta_server *srv)
{
	if (!srv->draining || srv->conns || srv->unix_open || srv->tcp_open)
		return;
	if (srv->timer_open) {
		srv->timer_open = false;
		uv_timer_stop(&srv->shutdown_timer);
		uv_close((uv_handle_t *)&srv->shutdown_timer, on_handle_closed);
	}
	if (srv->sweep_open) {
		srv->sweep_open = false;
		uv_timer_stop(&srv->sweep_timer);
		uv_close((uv_handle_t *)&srv->sweep_timer, on_handle_closed);
	}
	if (srv->check_open) {
		srv->check_open = false;
		uv_check_stop(&srv->resume_check);
		uv_close((uv_handle_t *)&srv->resume_check, on_handle_closed);
	}
	if (srv->busy_timer_open) {
		srv->busy_timer_open = false;
		uv_timer_stop(&srv->busy_timer);
		uv_close((uv_handle_t *)&srv->busy_timer, on_handle_closed);
	}
	if (srv->signals_open) {
		srv->signals_open = false;
		uv_close((uv_handle_t *)&srv->sig_term, on_handle_closed);
		uv_close((uv_handle_t *)&srv->sig_int, on_handle_closed);
	}
	if (srv->executor_started && !srv->executor_stopping) {
		srv->executor_stopping = true;
		ta_executor_stop(&srv->executor, NULL);
		ta_dispatch_scratch_free(&srv->scratch); /* no connection is left to use it */
	}
}

/* Accept callback shared by both listeners. */
static void on_connection(uv_stream_t *listener, int status)
{
	ta_server *srv = listener->data;
	if (status < 0) {
		ta_log(TA_LOG_WARNING, "accept failed: %s", uv_strerror(status));
		return;
	}
	bool tcp = listener == (uv_stream_t *)&srv->tcp_listener;
	ta_conn *conn = ta_conn_new(&srv->host, tcp, ++srv->next_serial);
	if (!conn) {
		/* Take the pending connection off the queue and drop it; without an accept
		 * libuv would stop watching the listener. */
		ta_log(TA_LOG_ERR, "out of memory accepting a connection");
		uv_handle_t *tmp = malloc(tcp ? sizeof(uv_tcp_t) : sizeof(uv_pipe_t));
		if (!tmp)
			return;
		int rc = tcp ? uv_tcp_init(srv->loop, (uv_tcp_t *)tmp)
		             : uv_pipe_init(srv->loop, (uv_pipe_t *)tmp, 0);
		if (rc != 0) {
			free(tmp);
			return;
		}
		rc = uv_accept(listener, (uv_stream_t *)tmp);
		if (rc != 0)
			ta_log(TA_LOG_WARNING, "accept failed: %s", uv_strerror(rc));
		uv_close(tmp, on_handle_freed);
		return;
	}
	conn->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = conn;
	srv->conns = conn;
	srv->nconns++;
	int rc = uv_accept(listener, &conn->h.stream);
	if (rc != 0) {
		ta_log(TA_LOG_WARNING, "accept failed: %s", uv_strerror(rc));
		ta_conn_close(conn);
		return;
	}
	if (tcp && (rc = uv_tcp_nodelay(&conn->h.tcp, 1)) != 0)
		ta_log(TA_LOG_DEBUG, "connection %" PRIu64 ": cannot set TCP_NODELAY: %s",
		       conn->serial, uv_strerror(rc));
	if (srv->draining) {
		ta_conn_close(conn);
		return;
	}
	if (srv->nactive >= (unsigned)srv->cfg->max_connections) {
		char msg[160];
		snprintf(msg, sizeof(msg),
		         "too many connections: the limit is %d (max_connections); try again "
		         "later",
		         srv->cfg->max_connections);
		ta_log_limited(&srv->refuse_log, TA_LOG_WARNING,
		               "connection %" PRIu64 " refused: %s", conn->serial, msg);
		ta_conn_reject(conn, TA_RESOURCE_EXHAUSTED, msg);
		return;
	}
	conn->counted = true;
	srv->nactive++;
	atomic_fetch_add(&srv->svc->connections, 1);
	ta_log(TA_LOG_DEBUG, "connection %" PRIu64 " accepted (%s, %u open)", conn->serial,
	       tcp ? "tcp" : "unix", srv->nactive);
	ta_conn_start(conn);
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

/* Splits "HOST:PORT" or "[V6]:PORT" into host and port (malloc'd copy in *buf). */
static ta_status split_host_port(const char *spec, char **buf, const char **host, const char **port,
                                 ta_error *err)
{
	*buf = strdup(spec);
	if (!*buf)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	char *s = *buf;
	char *colon;
	if (s[0] == '[') {
		char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "listen: '%s' is not [ADDRESS]:PORT", spec);
		*close = '\0';
		*host = s + 1;
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "listen: '%s' is not HOST:PORT", spec);
		*colon = '\0';
		*host = s;
	}
	*port = colon + 1;
	if (!**port)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "listen: '%s' has no port", spec);
	return TA_OK;
}

/* Binds and listens on the --listen TCP address. */
static ta_status listen_tcp(ta_server *srv, ta_error *err)
{
	const char *spec = srv->cfg->listen;
	char *buf = NULL;
	const char *host = NULL, *port = NULL;
	ta_status st = split_host_port(spec, &buf, &host, &port, err);
	if (st != TA_OK) {
		free(buf);
		return st;
	}
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	int rc = getaddrinfo(*host && strcmp(host, "*") != 0 ? host : NULL, port, &hints, &res);
	if (rc != 0) {
		st = ta_error_set(err, TA_INVALID_ARGUMENT, "listen: cannot resolve '%s': %s", spec,
		                  gai_strerror(rc));
		free(buf);
		return st;
	}
	free(buf);
	const struct addrinfo *ai = res;
	if (!ta_net_is_loopback(ai->ai_addr) && !srv->cfg->allow_remote) {
		freeaddrinfo(res);
		return ta_error_set(err, TA_PERMISSION_DENIED,
		                    "refusing to listen on %s: not a loopback address (set "
		                    "allow_remote = true or --allow-remote to serve other hosts)",
		                    spec);
	}
	if (!ta_net_is_loopback(ai->ai_addr) && !srv->svc->auth) {
		freeaddrinfo(res);
		return ta_error_set(err, TA_PERMISSION_DENIED,
		                    "refusing to listen on %s without authentication: other hosts "
		                    "may connect only to a daemon with auth_file (--auth-file)",
		                    spec);
	}
	rc = uv_tcp_init(srv->loop, &srv->tcp_listener);
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
	char shown[INET6_ADDRSTRLEN] = "?";
	int bport = 0;
	if (uv_tcp_getsockname(&srv->tcp_listener, (struct sockaddr *)&bound, &blen) == 0) {
		if (bound.ss_family == AF_INET6) {
			const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&bound;
			uv_ip6_name(in6, shown, sizeof(shown));
			bport = ntohs(in6->sin6_port);
		} else {
			const struct sockaddr_in *in = (const struct sockaddr_in *)&bound;
			uv_ip4_name(in, shown, sizeof(shown));
			bport = ntohs(in->sin_port);
		}
	}
	ta_log(TA_LOG_NOTICE, "listening on tcp:%s%s%s:%d", bound.ss_family == AF_INET6 ? "[" : "",
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
	       srv->nconns, srv->cfg->shutdown_timeout);
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

ta_status ta_server_start(ta_server *srv, uv_loop_t *loop, const ta_config *cfg, ta_service *svc,
                          ta_error *err)
{
	memset(srv, 0, sizeof(*srv));
	srv->loop = loop;
	srv->cfg = cfg;
	srv->svc = svc;
	ta_dispatch_scratch_init(&srv->scratch);
	/* Small requests run on the loop thread, which saves a trip through a worker; on the
	 * CPU backend up to TA_SERVER_INLINE_CPU elements (about a microsecond of atomics),
	 * on the CUDA backend only while one connection is open (a GPU round trip on the loop
	 * would stall every other connection; TA_SERVER_INLINE_CUDA). */
	srv->host.loop = loop;
	srv->host.cfg = cfg;
	srv->host.svc = svc;
	srv->host.scratch = &srv->scratch;
	srv->host.submit = host_submit;
	srv->host.gone = host_gone;
	srv->host.release = host_release;
	srv->host.input_freed = host_input_freed;
	srv->host.input_max = cfg->max_input_total;
	srv->refuse_log = (ta_log_limit)TA_LOG_LIMIT_INIT(10, "connections refused (too many "
	                                                      "connections, max_connections)");
	/* Pipelined runs go to the workers when there are several to spread them over and the
	 * cores to run them: on 2 CPUs shared with the clients the hand-over costs more than it
	 * spreads (measured: 178k against 237k adds/s at 50x16, docs/PERFORMANCE.md); on 16
	 * it more than doubles throughput (2.3M against 1.0M, doc/GPU-RESULTS.md). */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int workers = ta_config_workers(cfg, svc->info.name);
	if (cfg->batch_min != TA_CONFIG_BATCH_AUTO)
		srv->host.batch_min = (unsigned)cfg->batch_min;
	else
		srv->host.batch_min = workers >= 2 && cpus >= 4 ? TA_CONN_BATCH_MIN : 0;
	srv->host.inline_max = cfg->inline_max >= -1                ? cfg->inline_max
	                       : strcmp(svc->info.name, "cpu") == 0 ? TA_SERVER_INLINE_CPU
	                                                            : 0;
	srv->inline_lone = cfg->inline_max < -1 && strcmp(svc->info.name, "cpu") != 0;
	if (srv->inline_lone)
		srv->host.inline_max = TA_SERVER_INLINE_CUDA;
	int rc = ta_executor_init(&srv->executor, loop, workers);
	if (rc != 0)
		return ta_error_set(err, TA_INTERNAL, "cannot start %d worker threads: %s", workers,
		                    strerror(-rc));
	srv->executor_started = true;

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
	rc = uv_timer_init(loop, &srv->sweep_timer);
	if (rc != 0) {
		ta_error_set(err, TA_INTERNAL, "uv_timer_init: %s", uv_strerror(rc));
		goto fail;
	}
	srv->sweep_open = true;
	srv->sweep_timer.data = srv;
	rc = uv_check_init(loop, &srv->resume_check);
	if (rc != 0) {
		ta_error_set(err, TA_INTERNAL, "uv_check_init: %s", uv_strerror(rc));
		goto fail;
	}
	srv->check_open = true;
	srv->resume_check.data = srv;
	/* the sweep runs at a quarter of the shortest timeout, between 10 ms and 1 s */
	uint64_t sweep_ms = 1000;
	if (cfg->frame_timeout_ms && cfg->frame_timeout_ms / 4 < sweep_ms)
		sweep_ms = cfg->frame_timeout_ms / 4;
	if (cfg->idle_timeout_ms && cfg->idle_timeout_ms / 4 < sweep_ms)
		sweep_ms = cfg->idle_timeout_ms / 4;
	if (sweep_ms < 10)
		sweep_ms = 10;
	if ((rc = uv_timer_start(&srv->sweep_timer, on_sweep, sweep_ms, sweep_ms)) != 0 ||
	    (rc = uv_check_start(&srv->resume_check, on_resume_check)) != 0) {
		ta_error_set(err, TA_INTERNAL, "cannot start the sweep: %s", uv_strerror(rc));
		goto fail;
	}
	if (srv->inline_lone) {
		rc = uv_timer_init(loop, &srv->busy_timer);
		if (rc != 0) {
			ta_error_set(err, TA_INTERNAL, "uv_timer_init: %s", uv_strerror(rc));
			goto fail;
		}
		srv->busy_timer_open = true;
		srv->busy_timer.data = srv;
		rc = uv_timer_start(&srv->busy_timer, on_busy_timer, TA_SERVER_BUSY_MS,
		                    TA_SERVER_BUSY_MS);
		if (rc != 0) {
			ta_error_set(err, TA_INTERNAL, "uv_timer_start: %s", uv_strerror(rc));
			goto fail;
		}
		uv_unref((uv_handle_t *)&srv->busy_timer); /* never keeps the loop alive */
	}
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
	if (srv->draining) {
		if (srv->forced)
			return;
		srv->forced = true;
		for (ta_conn *c = srv->conns, *next; c; c = next) {
			next = c->next; /* a close may free c only later, in its callback */
			ta_conn_close(c);
		}
		return;
	}
	srv->draining = true;
	int rc = ta_notify("STOPPING=1");
	if (rc < 0)
		ta_log(TA_LOG_WARNING, "cannot notify the service manager: %s", strerror(-rc));
	if (srv->unix_open) {
		srv->unix_open = false;
		uv_close((uv_handle_t *)&srv->unix_listener, on_handle_closed);
	}
	if (srv->tcp_open) {
		srv->tcp_open = false;
		uv_close((uv_handle_t *)&srv->tcp_listener, on_handle_closed);
	}
	if (srv->unix_path) {
		if (unlink(srv->unix_path) != 0 && errno != ENOENT)
			ta_log(TA_LOG_WARNING, "cannot remove %s: %s", srv->unix_path,
			       strerror(errno));
		free(srv->unix_path);
		srv->unix_path = NULL;
	}
	for (ta_conn *c = srv->conns, *next; c; c = next) {
		next = c->next;
		ta_conn_drain(c);
	}
	if (srv->conns && srv->timer_open && srv->cfg->shutdown_timeout > 0) {
		int rc2 = uv_timer_start(&srv->shutdown_timer, on_shutdown_timeout,
		                         (uint64_t)srv->cfg->shutdown_timeout * 1000u, 0);
		if (rc2 != 0)
			ta_log(TA_LOG_WARNING, "cannot start the shutdown timer: %s",
			       uv_strerror(rc2));
	}
	server_check_done(srv);
}
