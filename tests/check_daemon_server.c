/* check_daemon_server.c: the real tileatomd process (built in this tree, started as
 * `tileatomd --socket PATH --backend cpu --foreground`) driven over raw sockets with
 * hand-made frames: startup and clean SIGTERM exit (socket removed, nothing on stdout,
 * READY=1 / STOPPING=1 on NOTIFY_SOCKET), request order under pipelining, garbage /
 * oversized / truncated frames answered and closed while another client goes on, the
 * connection limit, a client vanishing mid-request, backpressure on a client that does
 * not read, pipelined small plans through the loops' asynchronous applies
 * (--async-apply 1), TCP on loopback (and refused elsewhere), stale socket files, SIGTERM
 * under load. Set TA_TEST_DAEMON to test another binary or a wrapper script (which may append
 * options), TA_TEST_BACKEND to run the daemon with another backend (e.g. cuda on a GPU
 * machine), TA_TEST_KEEP to keep the logs. */
#include <check.h>
#include <inttypes.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../daemon/server.h" /* TA_SERVER_STALL_MS */
#include "ta_auth.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"

#ifndef TA_TEST_DAEMON
#define TA_TEST_DAEMON "daemon/tileatomd"
#endif

/* A running daemon. */
typedef struct daemon_proc {
	pid_t pid;          /* process id */
	char dir[64];       /* temporary directory */
	char sock[128];     /* its Unix socket */
	char out_path[128]; /* its stdout */
	char err_path[128]; /* its stderr */
} daemon_proc;

/* Milliseconds on a monotonic clock. */
static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connects to a Unix socket without the Hello handshake; -1 on failure. Receives time out
 * after 20 s. */
static int connect_unix_raw(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un addr;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
		close(fd);
		return -1;
	}
	struct timeval tv = {20, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int connect_unix(const char *path);

/* Starts the daemon with extra arguments (NULL-terminated) and waits until its socket
 * accepts connections. With expect_fail the daemon is expected to exit instead; then the
 * exit status is returned in *status. */
static void start_daemon_ex(daemon_proc *d, const char *const *extra, bool expect_fail, int *status)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/ta_srv_XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/run/tileatomd.sock", d->dir);
	snprintf(d->out_path, sizeof(d->out_path), "%s/stdout", d->dir);
	snprintf(d->err_path, sizeof(d->err_path), "%s/stderr", d->dir);
	const char *bin = getenv("TA_TEST_DAEMON");
	if (!bin)
		bin = TA_TEST_DAEMON;
	const char *argv[40];
	int argc = 0;
	argv[argc++] = bin;
	argv[argc++] = "--socket";
	argv[argc++] = d->sock;
	const char *backend = getenv("TA_TEST_BACKEND");
	argv[argc++] = "--backend";
	argv[argc++] = backend && *backend ? backend : "cpu";
	argv[argc++] = "--foreground";
	argv[argc++] = "--log-level";
	argv[argc++] = "debug";
	const char *loops = getenv("TA_TEST_LOOPS"); /* the suite again with --loops N */
	if (loops && *loops) {
		argv[argc++] = "--loops";
		argv[argc++] = loops;
	}
	const char *spin = getenv("TA_TEST_BUSY_POLL"); /* ... and with --busy-poll USEC */
	if (spin && *spin) {
		argv[argc++] = "--busy-poll";
		argv[argc++] = spin;
	}
	const char *async = getenv("TA_TEST_ASYNC"); /* ... and with --async-apply 1 */
	if (async && *async) {
		argv[argc++] = "--async-apply";
		argv[argc++] = async;
	}
	const char *async_poll = getenv("TA_TEST_ASYNC_POLL"); /* ... polling for completions */
	if (async_poll && *async_poll) {
		argv[argc++] = "--async-poll";
		argv[argc++] = async_poll;
	}
	for (int i = 0; extra && extra[i] && argc < 38; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	for (int i = 0; extra && extra[i] && extra[i + 1]; i++)
		if (strcmp(extra[i], "--socket") == 0) /* the last --socket wins */
			snprintf(d->sock, sizeof(d->sock), "%s", extra[i + 1]);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int out = open(d->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int err = open(d->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (out < 0 || err < 0)
			_exit(126);
		dup2(out, 1);
		dup2(err, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	d->pid = pid;
	long long deadline = now_ms() + 20000;
	while (now_ms() < deadline) {
		int st = 0;
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			d->pid = 0;
			ck_assert_msg(expect_fail, "tileatomd exited early (status %d)", st);
			*status = st;
			return;
		}
		if (!expect_fail) {
			int fd = connect_unix_raw(d->sock);
			if (fd >= 0) {
				close(fd);
				return;
			}
		}
		usleep(10000);
	}
	ck_abort_msg("tileatomd did not %s in time", expect_fail ? "exit" : "start");
}

/* Starts the daemon; it must come up. */
static void start_daemon(daemon_proc *d, const char *const *extra)
{
	start_daemon_ex(d, extra, false, NULL);
}

/* Sends SIGTERM and waits (up to 20 s) for the exit; returns the wait status. */
static int stop_daemon(daemon_proc *d)
{
	ck_assert_int_gt(d->pid, 0);
	ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
	long long deadline = now_ms() + 20000;
	int st = 0;
	while (now_ms() < deadline) {
		pid_t w = waitpid(d->pid, &st, WNOHANG);
		if (w == d->pid) {
			d->pid = 0;
			return st;
		}
		usleep(10000);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &st, 0);
	d->pid = 0;
	ck_abort_msg("tileatomd did not stop within 20 s of SIGTERM");
	return st;
}

/* Reads a whole file into a malloc'd string. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	size_t n;
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2) {
			cap *= 2;
			char *bigger = realloc(buf, cap);
			ck_assert_ptr_nonnull(bigger);
			buf = bigger;
		}
	}
	buf[len] = '\0';
	fclose(f);
	return buf;
}

/* Removes the daemon's temporary files. */
static void cleanup(daemon_proc *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
	}
	if (getenv("TA_TEST_KEEP")) { /* debugging: keep the daemon's logs */
		fprintf(stderr, "kept %s\n", d->dir);
		return;
	}
	unlink(d->out_path);
	unlink(d->err_path);
	char run[160];
	snprintf(run, sizeof(run), "%s/run/tileatomd.sock", d->dir);
	unlink(run);
	snprintf(run, sizeof(run), "%s/run", d->dir);
	rmdir(run);
	rmdir(d->dir);
}

/* Writes all bytes (MSG_NOSIGNAL); returns false when the peer is gone. */
static bool send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Reads exactly len bytes; returns false on EOF, error or timeout. */
static bool recv_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Sends one Request frame. */
static bool send_request(int fd, Tileatom__Request *req)
{
	uint8_t *frame = NULL;
	size_t len = 0;
	ck_assert_int_eq(ta_frame_encode(&req->base, TA_FRAME_DEFAULT_MAX, &frame, &len), 0);
	bool ok = send_all(fd, frame, len);
	free(frame);
	return ok;
}

/* Appends a ping frame with id to run (cap bytes, *used in use). */
static void append_ping(uint8_t *run, size_t cap, size_t *used, uint64_t id)
{
	Tileatom__PingRequest pr = TILEATOM__PING_REQUEST__INIT;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_PING;
	req.ping = &pr;
	uint8_t *frame = NULL;
	size_t len = 0;
	ck_assert_int_eq(ta_frame_encode(&req.base, TA_FRAME_DEFAULT_MAX, &frame, &len), 0);
	ck_assert_uint_le(*used + len, cap);
	memcpy(run + *used, frame, len);
	*used += len;
	free(frame);
}

/* Receives one Response; NULL on EOF or timeout. */
static Tileatom__Response *recv_response(int fd)
{
	uint8_t h[4];
	if (!recv_all(fd, h, 4))
		return NULL;
	uint32_t len = ta_frame_get_header(h);
	ck_assert_uint_le(len, TA_FRAME_DEFAULT_MAX);
	uint8_t *buf = malloc(len + 1);
	ck_assert_ptr_nonnull(buf);
	if (!recv_all(fd, buf, len)) {
		free(buf);
		return NULL;
	}
	Tileatom__Response *resp = tileatom__response__unpack(NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(resp);
	return resp;
}

/* Sends Hello (id 0) and reads its answer: true when it is an OK hello. The protocol
 * requires Hello first. */
static bool hello_ok(int fd)
{
	Tileatom__HelloRequest h = TILEATOM__HELLO_REQUEST__INIT;
	h.protocol_version = 1;
	h.client_name = (char *)"check_daemon_server";
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &h;
	if (!send_request(fd, &req))
		return false;
	Tileatom__Response *resp = recv_response(fd);
	bool ok = resp && resp->status == TILEATOM__STATUS__OK &&
	          resp->body_case == TILEATOM__RESPONSE__BODY_HELLO;
	if (resp)
		tileatom__response__free_unpacked(resp, NULL);
	return ok;
}

/* Connects to a Unix socket and says Hello; -1 on failure (a refused connection too). */
static int connect_unix(const char *path)
{
	int fd = connect_unix_raw(path);
	if (fd >= 0 && !hello_ok(fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* True when the daemon closed the connection (EOF within 20 s). */
static bool at_eof(int fd)
{
	char c;
	ssize_t n;
	do {
		n = recv(fd, &c, 1, 0);
	} while (n < 0 && errno == EINTR);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Sends a ping with id and checks the answer. */
static void ping_ok(int fd, uint64_t id)
{
	uint8_t frame[64];
	size_t used = 0;
	append_ping(frame, sizeof(frame), &used, id);
	ck_assert(send_all(fd, frame, used));
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, id);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_PING);
	tileatom__response__free_unpacked(resp, NULL);
}

/* Creates a 1-D tile of n elements (zero) of dtype. */
static void create_tile_dtype(int fd, const char *name, int64_t n, Tileatom__DType dtype)
{
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = (char *)name;
	c.dtype = dtype;
	c.n_shape = 1;
	c.shape = &n;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	ck_assert(send_request(fd, &req));
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_ptr_nonnull(resp);
	ck_assert_msg(resp->status == TILEATOM__STATUS__OK, "create: %s", resp->message);
	tileatom__response__free_unpacked(resp, NULL);
}

/* Creates a 1-D int32 tile of n elements. */
static void create_tile(int fd, const char *name, int64_t n)
{
	create_tile_dtype(fd, name, n, TILEATOM__DTYPE__INT32);
}

/* Sends an add of 1 to every element of an int32 tile, optionally wanting old values. */
static bool send_add(int fd, uint64_t id, const char *name, bool want_old)
{
	int32_t one = 1;
	Tileatom__Array va = TILEATOM__ARRAY__INIT;
	va.dtype = TILEATOM__DTYPE__INT32;
	va.data.data = (uint8_t *)&one;
	va.data.len = 4;
	Tileatom__Options opt = TILEATOM__OPTIONS__INIT;
	opt.want_old = want_old;
	Tileatom__ElementwiseAtomicRequest e = TILEATOM__ELEMENTWISE_ATOMIC_REQUEST__INIT;
	e.tile = (char *)name;
	e.op = TILEATOM__OP__ADD;
	e.values = &va;
	e.options = &opt;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_ELEMENTWISE;
	req.elementwise = &e;
	return send_request(fd, &req);
}

/* Asks for stats on fd. */
static Tileatom__Response *get_stats(int fd)
{
	Tileatom__StatsRequest s = TILEATOM__STATS_REQUEST__INIT;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 77;
	req.body_case = TILEATOM__REQUEST__BODY_STATS;
	req.stats = &s;
	ck_assert(send_request(fd, &req));
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_STATS);
	return resp;
}

START_TEST(test_start_ping_stop)
{
	daemon_proc d;
	start_daemon(&d, NULL);
	struct stat st;
	ck_assert_int_eq(stat(d.sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	int fd = connect_unix_raw(d.sock);
	ck_assert_int_ge(fd, 0);
	Tileatom__HelloRequest h = TILEATOM__HELLO_REQUEST__INIT;
	h.protocol_version = 1;
	h.client_name = (char *)"check_daemon_server";
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &h;
	ck_assert(send_request(fd, &req));
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->hello->protocol_version, 1);
	/* TA_TEST_BACKEND picks the backend the daemon runs (default cpu). */
	const char *backend = getenv("TA_TEST_BACKEND");
	ck_assert_str_eq(resp->hello->backend, backend && *backend ? backend : "cpu");
	tileatom__response__free_unpacked(resp, NULL);
	ping_ok(fd, 2);
	/* start_daemon's probe connection is counted until its loop has seen it close, which
	 * on a busy machine (or on another of several loops) may come after this request:
	 * ask again until only this connection is left (up to 20 s; each ask is a request) */
	resp = get_stats(fd);
	uint64_t asked = 1;
	for (long long until = now_ms() + 20000; resp->stats->connections > 1 && now_ms() < until;
	     asked++) {
		tileatom__response__free_unpacked(resp, NULL);
		usleep(10000);
		resp = get_stats(fd);
	}
	ck_assert_uint_eq(resp->stats->connections, 1);
	ck_assert_uint_eq(resp->stats->requests, 2 + asked);
	tileatom__response__free_unpacked(resp, NULL);

	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert(at_eof(fd));
	close(fd);
	ck_assert_int_eq(stat(d.sock, &st), -1); /* socket removed */
	char *out = slurp(d.out_path);
	ck_assert_str_eq(out, ""); /* nothing on stdout */
	free(out);
	char *err = slurp(d.err_path);
	ck_assert_ptr_nonnull(strstr(err, "<5>listening on unix:"));
	ck_assert_ptr_nonnull(strstr(err, "<5>received SIGTERM: shutting down"));
	ck_assert_ptr_nonnull(strstr(err, "<5>stopped"));
	free(err);
	cleanup(&d);
}
END_TEST

/* Writer thread of the pipelining test: sends n adds with ids 1..n. */
typedef struct writer_arg {
	int fd;           /* connection */
	int n;            /* requests to send */
	const char *tile; /* tile name */
	bool want_old;    /* ask for old values */
	bool ok;          /* all sent */
} writer_arg;

/* Thread body: sends the requests. */
static void *writer_main(void *p)
{
	writer_arg *w = p;
	w->ok = true;
	for (int i = 1; i <= w->n; i++)
		if (!send_add(w->fd, (uint64_t)i + 1000, w->tile, w->want_old)) {
			w->ok = false;
			break;
		}
	return NULL;
}

START_TEST(test_pipelined_order)
{
	daemon_proc d;
	start_daemon(&d, NULL);
	int fd = connect_unix(d.sock);
	ck_assert_int_ge(fd, 0);
	create_tile(fd, "p", 1);
	enum { N = 10000 };
	writer_arg w = {fd, N, "p", true, false};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, writer_main, &w), 0);
	for (int i = 1; i <= N; i++) {
		Tileatom__Response *resp = recv_response(fd);
		ck_assert_msg(resp != NULL, "response %d missing", i);
		ck_assert_uint_eq(resp->id, (uint64_t)i + 1000);
		ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
		int32_t old;
		ck_assert_uint_eq(resp->op->old->data.len, 4);
		memcpy(&old, resp->op->old->data.data, 4);
		ck_assert_int_eq(old, i - 1); /* in order: the i-th add saw i - 1 */
		tileatom__response__free_unpacked(resp, NULL);
	}
	pthread_join(th, NULL);
	ck_assert(w.ok);
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

/* Appends the frame of req to run (cap bytes, *used in use). */
static void append_request(uint8_t *run, size_t cap, size_t *used, Tileatom__Request *req)
{
	uint8_t *frame = NULL;
	size_t len = 0;
	ck_assert_int_eq(ta_frame_encode(&req->base, TA_FRAME_DEFAULT_MAX, &frame, &len), 0);
	ck_assert_uint_le(*used + len, cap);
	memcpy(run + *used, frame, len);
	*used += len;
	free(frame);
}

/* Appends a destroy of tile name. */
static void append_destroy(uint8_t *run, size_t cap, size_t *used, uint64_t id, const char *name)
{
	Tileatom__DestroyTileRequest ds = TILEATOM__DESTROY_TILE_REQUEST__INIT;
	ds.name = (char *)name;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_DESTROY;
	req.destroy = &ds;
	append_request(run, cap, used, &req);
}

/* Appends an int32 add of 1 to elements [0, n) of tile name (n 0: the whole tile). */
static void append_add(uint8_t *run, size_t cap, size_t *used, uint64_t id, const char *name,
                       int64_t n, bool want_old)
{
	int32_t one = 1;
	int64_t origin = 0;
	Tileatom__Array va = TILEATOM__ARRAY__INIT;
	va.dtype = TILEATOM__DTYPE__INT32;
	va.data.data = (uint8_t *)&one;
	va.data.len = 4;
	Tileatom__Options opt = TILEATOM__OPTIONS__INIT;
	opt.want_old = want_old;
	Tileatom__Region region = TILEATOM__REGION__INIT;
	region.n_origin = 1;
	region.origin = &origin;
	region.n_shape = 1;
	region.shape = &n;
	Tileatom__ElementwiseAtomicRequest e = TILEATOM__ELEMENTWISE_ATOMIC_REQUEST__INIT;
	e.tile = (char *)name;
	e.op = TILEATOM__OP__ADD;
	e.values = &va;
	e.options = &opt;
	e.region = n ? &region : NULL;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_ELEMENTWISE;
	req.elementwise = &e;
	append_request(run, cap, used, &req);
}

/* Appends an indexed add of value at flat index at of tile name (int32), returning the
 * old value when want_old: requests that differ only in id, index and value bytes (the
 * kept request's holes). */
static void append_indexed_add(uint8_t *run, size_t cap, size_t *used, uint64_t id,
                               const char *name, int32_t at, int32_t value, bool want_old)
{
	Tileatom__Array ix = TILEATOM__ARRAY__INIT;
	ix.dtype = TILEATOM__DTYPE__INT32;
	ix.data.data = (uint8_t *)&at;
	ix.data.len = 4;
	Tileatom__Array *ixs[1] = {&ix};
	Tileatom__IndexedAddr addr = TILEATOM__INDEXED_ADDR__INIT;
	addr.n_indices = 1;
	addr.indices = ixs;
	addr.flat = true;
	Tileatom__Array va = TILEATOM__ARRAY__INIT;
	va.dtype = TILEATOM__DTYPE__INT32;
	va.data.data = (uint8_t *)&value;
	va.data.len = 4;
	Tileatom__Options opt = TILEATOM__OPTIONS__INIT;
	opt.want_old = want_old;
	Tileatom__IndexedAtomicRequest e = TILEATOM__INDEXED_ATOMIC_REQUEST__INIT;
	e.tile = (char *)name;
	e.op = TILEATOM__OP__ADD;
	e.addr = &addr;
	e.values = &va;
	e.options = &opt;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
	req.indexed = &e;
	append_request(run, cap, used, &req);
}

/* Receives the next response: it must answer id with status. */
static Tileatom__Response *expect_response(int fd, uint64_t id, Tileatom__Status status)
{
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_msg(resp != NULL, "no response for request %llu", (unsigned long long)id);
	ck_assert_uint_eq(resp->id, id);
	ck_assert_msg(resp->status == status, "request %llu: status %d (%s)",
	              (unsigned long long)id, resp->status, resp->message ? resp->message : "");
	return resp;
}

/* Checks that an op response carries one int32 old value. */
static void expect_old(int fd, uint64_t id, int32_t want)
{
	Tileatom__Response *resp = expect_response(fd, id, TILEATOM__STATUS__OK);
	ck_assert_ptr_nonnull(resp->op);
	ck_assert_ptr_nonnull(resp->op->old);
	ck_assert_uint_eq(resp->op->old->data.len, 4);
	int32_t old;
	memcpy(&old, resp->op->old->data.data, 4);
	ck_assert_int_eq(old, want);
	tileatom__response__free_unpacked(resp, NULL);
}

START_TEST(test_grouped_run_order)
{
	/* One pipelined run that a worker takes as one batch (--batch-min 4), mixing small
	 * plans (collected into groups and applied together), a large plan (runs alone, after
	 * the ones before it) and requests without a plan (create, destroy, ping: the group
	 * before them is applied and answered first): every answer in request order, every
	 * value as if the requests ran one by one. */
	daemon_proc d;
	const char *const extra[] = {"--batch-min", "4", "--inline-max", "-1", NULL};
	start_daemon(&d, extra);
	int fd = connect_unix(d.sock);
	ck_assert_int_ge(fd, 0);
	static uint8_t run[4096];
	size_t used = 0;
	int64_t n = 2000;
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = "g";
	c.dtype = TILEATOM__DTYPE__INT32;
	c.n_shape = 1;
	c.shape = &n;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	append_request(run, sizeof(run), &used, &req);
	append_add(run, sizeof(run), &used, 2, "g", 1, true);  /* old 0 */
	append_add(run, sizeof(run), &used, 3, "g", 1, true);  /* old 1 */
	append_add(run, sizeof(run), &used, 4, "g", 0, false); /* all 2000: alone */
	append_add(run, sizeof(run), &used, 5, "g", 1, true);  /* old 3 */
	int64_t origin = 0, two = 2;
	Tileatom__Region region = TILEATOM__REGION__INIT;
	region.n_origin = 1;
	region.origin = &origin;
	region.n_shape = 1;
	region.shape = &two;
	Tileatom__ReadRegionRequest rd = TILEATOM__READ_REGION_REQUEST__INIT;
	rd.tile = "g";
	rd.region = &region;
	Tileatom__Request rreq = TILEATOM__REQUEST__INIT;
	rreq.id = 6;
	rreq.body_case = TILEATOM__REQUEST__BODY_READ;
	rreq.read = &rd;
	append_request(run, sizeof(run), &used, &rreq); /* [4, 1] */
	append_destroy(run, sizeof(run), &used, 7, "g");
	append_add(run, sizeof(run), &used, 8, "g", 1, true); /* NOT_FOUND */
	append_ping(run, sizeof(run), &used, 9);
	ck_assert(send_all(fd, run, used));

	Tileatom__Response *resp = expect_response(fd, 1, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	expect_old(fd, 2, 0);
	expect_old(fd, 3, 1);
	resp = expect_response(fd, 4, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, 2000);
	tileatom__response__free_unpacked(resp, NULL);
	expect_old(fd, 5, 3);
	resp = expect_response(fd, 6, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_DATA);
	ck_assert_uint_eq(resp->data->data.len, 8);
	int32_t vals[2];
	memcpy(vals, resp->data->data.data, 8);
	ck_assert_int_eq(vals[0], 4);
	ck_assert_int_eq(vals[1], 1);
	tileatom__response__free_unpacked(resp, NULL);
	resp = expect_response(fd, 7, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	resp = expect_response(fd, 8, TILEATOM__STATUS__NOT_FOUND);
	tileatom__response__free_unpacked(resp, NULL);
	resp = expect_response(fd, 9, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_PING);
	tileatom__response__free_unpacked(resp, NULL);
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

/* True when process pid has a thread named name (/proc/PID/task/TID/comm). */
static bool has_thread_named(pid_t pid, const char *name)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return false;
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char comm_path[400], comm[32] = "";
		snprintf(comm_path, sizeof(comm_path), "%s/%s/comm", path, e->d_name);
		FILE *f = fopen(comm_path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		found = strcmp(comm, name) == 0;
	}
	closedir(dir);
	return found;
}

/* test_async_run_order with the backend's lanes, and without (TILEATOM_CPU_LANES=0). */
static void async_run_order(bool lanes)
{
	/* --async-apply 1 on the CPU backend (its completion thread): a pipelined run's small
	 * plans go from the loop to apply_async in groups of at most 64, one group of a
	 * connection in flight at a time; a request answered without being collected (an add
	 * to a missing tile) comes after the plans before it; a ping runs on the loop; a large
	 * plan sends the rest of the run to a worker. Every answer in request order, every
	 * value as if the requests ran one by one; then a run of adds differing only in index
	 * and value, exact. With lanes each loop ran its groups itself (it says so at info,
	 * and the CPU backend never started its completion thread); without, the completion
	 * thread ran them. */
	if (!lanes)
		ck_assert_int_eq(setenv("TILEATOM_CPU_LANES", "0", 1),
		                 0); /* (this test's process) */
	daemon_proc d;
	const char *const extra[] = {"--async-apply", "1", "--loops", "2",
	                             "--inline-max",  "0", NULL};
	start_daemon(&d, extra);
	int fd = connect_unix(d.sock);
	ck_assert_int_ge(fd, 0);
	create_tile(fd, "a", 2000);
	static uint8_t run[65536];
	size_t used = 0;
	uint64_t id = 100;
	for (int i = 0; i < 150; i++) /* old values 0..149: three groups */
		append_add(run, sizeof(run), &used, id++, "a", 1, true);
	append_add(run, sizeof(run), &used, id++, "missing", 1, true); /* 250: NOT_FOUND */
	for (int i = 150; i < 160; i++)                                /* 251..260 */
		append_add(run, sizeof(run), &used, id++, "a", 1, true);
	append_ping(run, sizeof(run), &used, id++);               /* 261 */
	append_add(run, sizeof(run), &used, id++, "a", 0, false); /* 262: all 2000, a worker */
	append_add(run, sizeof(run), &used, id++, "a", 1, true);  /* 263: old 161 */
	ck_assert(send_all(fd, run, used));
	for (int i = 0; i < 150; i++)
		expect_old(fd, 100 + (uint64_t)i, i);
	Tileatom__Response *resp = expect_response(fd, 250, TILEATOM__STATUS__NOT_FOUND);
	tileatom__response__free_unpacked(resp, NULL);
	for (int i = 150; i < 160; i++)
		expect_old(fd, 101 + (uint64_t)i, i);
	resp = expect_response(fd, 261, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_PING);
	tileatom__response__free_unpacked(resp, NULL);
	resp = expect_response(fd, 262, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, 2000);
	tileatom__response__free_unpacked(resp, NULL);
	expect_old(fd, 263, 161);
	/* requests that repeat the first but for their index and value (the kept request runs
	 * them without decoding, each with its own copy of those bytes, also inside one group):
	 * element k of "h" gets k + 1, k + 8, ... in turn, each add answering the sum so far */
	create_tile(fd, "h", 7);
	used = 0;
	int32_t sum[7] = {0};
	for (int i = 0; i < 300; i++)
		append_indexed_add(run, sizeof(run), &used, 1000 + (uint64_t)i, "h", i % 7, i + 1,
		                   true);
	ck_assert(send_all(fd, run, used));
	for (int i = 0; i < 300; i++) {
		expect_old(fd, 1000 + (uint64_t)i, sum[i % 7]);
		sum[i % 7] += i + 1;
	}
	used = 0;
	append_indexed_add(run, sizeof(run), &used, 2000, "h", 3, 0, true);
	ck_assert(send_all(fd, run, used));
	expect_old(fd, 2000, sum[3]);
	/* the kept request changing between blocks of one run, "h" (7 elements) and "w" (11):
	 * each block's repeats run on a copy of its own kept plan (a copy made for the other
	 * tile would skip w's elements 7..10 as out of range) */
	create_tile(fd, "w", 11);
	int32_t wsum[11] = {0};
	used = 0;
	for (int i = 0; i < 240; i++) {
		bool to_w = (i / 40) % 2 == 1;
		int at = to_w ? i % 11 : i % 7;
		append_indexed_add(run, sizeof(run), &used, 3000 + (uint64_t)i, to_w ? "w" : "h",
		                   at, i + 1, true);
	}
	ck_assert(send_all(fd, run, used));
	for (int i = 0; i < 240; i++) {
		bool to_w = (i / 40) % 2 == 1;
		int32_t *s = to_w ? &wsum[i % 11] : &sum[i % 7];
		expect_old(fd, 3000 + (uint64_t)i, *s);
		*s += i + 1;
	}
	/* the CPU backend starts its completion thread with the first apply_async not in a
	 * lane (CUDA's lead thread runs from the start) */
	const char *backend = getenv("TA_TEST_BACKEND");
	bool cuda = backend && strcmp(backend, "cuda") == 0;
	if (cuda || !lanes)
		ck_assert_msg(has_thread_named(d.pid, cuda ? "ta-cuda-lead" : "ta-async"),
		              "no completion thread: the groups did not go to apply_async");
	else
		ck_assert_msg(!has_thread_named(d.pid, "ta-async"),
		              "the completion thread ran: the groups did not go to the lanes");
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char *err = slurp(d.err_path);
	ck_assert_ptr_nonnull(err);
	bool in_lane = strstr(err, "its asynchronous requests run in its own lane") != NULL;
	ck_assert_msg(in_lane == (lanes || cuda), "lanes %d, the log says %d", lanes, in_lane);
	free(err);
	cleanup(&d);
	if (!lanes)
		ck_assert_int_eq(unsetenv("TILEATOM_CPU_LANES"), 0);
}

START_TEST(test_async_run_order)
{
	async_run_order(true);
}
END_TEST

START_TEST(test_async_run_order_thread)
{
	async_run_order(false);
}
END_TEST

START_TEST(test_kept_tile_destroyed_in_run)
{
	/* One pipelined run: adds that repeat the kept request (run on the thread's pinned
	 * tile without a reference of their own), the tile destroyed and created again, the
	 * same adds: they go to the new tile (old values from 0 again); once that one is
	 * destroyed too, no memory of either is held (the run's pin ended with the run). */
	daemon_proc d;
	start_daemon(&d, NULL);
	int fd = connect_unix(d.sock);
	ck_assert_int_ge(fd, 0);
	create_tile(fd, "p", 5);
	static uint8_t run[16384];
	size_t used = 0;
	for (int i = 0; i < 20; i++)
		append_indexed_add(run, sizeof(run), &used, 100 + (uint64_t)i, "p", i % 5, 1, true);
	append_destroy(run, sizeof(run), &used, 200, "p");
	int64_t three = 3;
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = "p";
	c.dtype = TILEATOM__DTYPE__INT32;
	c.n_shape = 1;
	c.shape = &three;
	Tileatom__Request creq = TILEATOM__REQUEST__INIT;
	creq.id = 201;
	creq.body_case = TILEATOM__REQUEST__BODY_CREATE;
	creq.create = &c;
	append_request(run, sizeof(run), &used, &creq);
	for (int i = 0; i < 20; i++)
		append_indexed_add(run, sizeof(run), &used, 300 + (uint64_t)i, "p", i % 3, 1, true);
	ck_assert(send_all(fd, run, used));
	for (int i = 0; i < 20; i++)
		expect_old(fd, 100 + (uint64_t)i, i / 5);
	Tileatom__Response *resp = expect_response(fd, 200, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	resp = expect_response(fd, 201, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	for (int i = 0; i < 20; i++)
		expect_old(fd, 300 + (uint64_t)i, i / 3);
	used = 0;
	append_destroy(run, sizeof(run), &used, 400, "p");
	ck_assert(send_all(fd, run, used));
	resp = expect_response(fd, 400, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	resp = get_stats(fd);
	ck_assert_uint_eq(resp->stats->tiles, 0);
	ck_assert_uint_eq(resp->stats->tile_bytes, 0); /* neither tile is held any more */
	tileatom__response__free_unpacked(resp, NULL);
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

START_TEST(test_bad_frames_other_client_unharmed)
{
	daemon_proc d;
	/* --batch-min 4: the pipelined run below goes to a worker as one batch whatever the
	 * machine's CPUs */
	const char *const extra[] = {"--max-frame", "4096", "--batch-min", "4", NULL};
	start_daemon(&d, extra);
	int good = connect_unix(d.sock);
	ck_assert_int_ge(good, 0);
	ping_ok(good, 1);

	/* Garbage payload after a valid ping: the ping is answered, then id 0, then EOF. */
	int bad = connect_unix(d.sock);
	ping_ok(bad, 5);
	static const uint8_t garbage[] = {5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff};
	ck_assert(send_all(bad, garbage, sizeof(garbage)));
	Tileatom__Response *resp = recv_response(bad);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 0);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(resp->message, "malformed request"));
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(at_eof(bad));
	close(bad);
	ping_ok(good, 2);

	/* The same inside one pipelined run (one send of five frames, which the daemon hands
	 * to a worker as one batch): the pings before the garbage are answered in order, then
	 * id 0, then EOF; the pings after it are never run. */
	bad = connect_unix(d.sock);
	uint8_t run[512];
	size_t used = 0;
	for (int i = 0; i < 5; i++) {
		if (i == 2) {
			memcpy(run + used, garbage, sizeof(garbage));
			used += sizeof(garbage);
			continue;
		}
		append_ping(run, sizeof(run), &used, 7 + (uint64_t)i);
	}
	ck_assert(send_all(bad, run, used));
	for (uint64_t id = 7; id <= 8; id++) {
		resp = recv_response(bad);
		ck_assert_ptr_nonnull(resp);
		ck_assert_uint_eq(resp->id, id);
		ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
		tileatom__response__free_unpacked(resp, NULL);
	}
	resp = recv_response(bad);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 0);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(at_eof(bad));
	close(bad);
	ping_ok(good, 3);

	/* A length over --max-frame: RESOURCE_EXHAUSTED naming the limit, then EOF. */
	bad = connect_unix(d.sock);
	uint8_t huge[4];
	ta_frame_put_header(huge, 0xfffffff0u);
	ck_assert(send_all(bad, huge, 4));
	resp = recv_response(bad);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 0);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__RESOURCE_EXHAUSTED);
	ck_assert_str_eq(resp->message, "frame of 4294967280 bytes exceeds the limit of 4096 "
	                                "bytes (max_frame); closing the connection");
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(at_eof(bad));
	close(bad);
	ping_ok(good, 3);

	/* A truncated frame and a half-close: INVALID_ARGUMENT naming it, then EOF. */
	bad = connect_unix(d.sock);
	uint8_t partial[14];
	ta_frame_put_header(partial, 100);
	memset(partial + 4, 0, 10);
	ck_assert(send_all(bad, partial, sizeof(partial)));
	shutdown(bad, SHUT_WR);
	resp = recv_response(bad);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_str_eq(resp->message, "connection closed in the middle of a frame (4 of 4 "
	                                "prefix bytes, 10 of 100 payload bytes)");
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(at_eof(bad));
	close(bad);

	/* A truncated frame and a hard close: nothing to answer, nobody harmed. */
	bad = connect_unix(d.sock);
	ck_assert(send_all(bad, partial, sizeof(partial)));
	close(bad);
	ping_ok(good, 4);

	/* Requests then EOF: all still answered in order. */
	bad = connect_unix(d.sock);
	create_tile(bad, "e", 1);
	for (int i = 0; i < 50; i++)
		ck_assert(send_add(bad, (uint64_t)(100 + i), "e", true));
	shutdown(bad, SHUT_WR);
	for (int i = 0; i < 50; i++) {
		resp = recv_response(bad);
		ck_assert_ptr_nonnull(resp);
		ck_assert_uint_eq(resp->id, (uint64_t)(100 + i));
		int32_t old;
		memcpy(&old, resp->op->old->data.data, 4);
		ck_assert_int_eq(old, i);
		tileatom__response__free_unpacked(resp, NULL);
	}
	ck_assert(at_eof(bad));
	close(bad);

	ping_ok(good, 5);
	close(good);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

/* Sends n pings (ids first..first+n-1) in one write. */
static void send_pings(int fd, uint64_t first, int n)
{
	uint8_t run[64 * 32];
	size_t used = 0;
	ck_assert_int_le(n, 64);
	for (int i = 0; i < n; i++)
		append_ping(run, sizeof(run), &used, first + (uint64_t)i);
	ck_assert(send_all(fd, run, used));
}

/* A write bound smaller than one response: every request waits for the one before to be
 * written, and a write that goes out at once (no uv_write, so no write callback) must
 * still let the next one run. Pipelined pings, then a half-close: all are answered, in
 * order, then EOF; with the batch path (a worker job capped at the bound) too. */
START_TEST(test_tiny_write_queue_pipelined)
{
	const char *const modes[2][5] = {{"--max-write-queue", "1", "--batch-min", "0", NULL},
	                                 {"--max-write-queue", "1", "--batch-min", "4", NULL}};
	for (int m = 0; m < 2; m++) {
		daemon_proc d;
		start_daemon(&d, modes[m]);
		int fd = connect_unix(d.sock);
		ck_assert_int_ge(fd, 0);
		send_pings(fd, 1, 20);
		shutdown(fd, SHUT_WR);
		for (uint64_t id = 1; id <= 20; id++) {
			Tileatom__Response *resp = recv_response(fd);
			ck_assert_msg(resp != NULL, "mode %d: response %d missing", m, (int)id);
			ck_assert_uint_eq(resp->id, id);
			ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
			tileatom__response__free_unpacked(resp, NULL);
		}
		ck_assert(at_eof(fd));
		close(fd);
		int status = stop_daemon(&d);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		cleanup(&d);
	}
}
END_TEST

START_TEST(test_connection_limit)
{
	daemon_proc d;
	const char *const extra[] = {"--max-connections", "2", NULL};
	start_daemon(&d, extra);
	int a = connect_unix(d.sock);
	ping_ok(a, 1);
	/* Wait until start_daemon's probe connection is gone: a is the only one. */
	long long deadline = now_ms() + 20000;
	for (;;) {
		Tileatom__Response *st = get_stats(a);
		uint32_t open = st->stats->connections;
		tileatom__response__free_unpacked(st, NULL);
		if (open == 1)
			break;
		ck_assert_msg(now_ms() < deadline, "%u connections open", open);
		usleep(10000);
	}
	int b = connect_unix(d.sock);
	ping_ok(b, 1);
	int c = connect_unix_raw(d.sock);
	ck_assert_int_ge(c, 0);
	Tileatom__Response *resp = recv_response(c);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__RESOURCE_EXHAUSTED);
	ck_assert_str_eq(resp->message,
	                 "too many connections: the limit is 2 (max_connections); try again later");
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(at_eof(c));
	close(c);
	ping_ok(a, 2);
	close(a);
	/* Once a is gone a new client gets in (the close may take a moment to be seen). */
	bool in = false;
	for (int tries = 0; tries < 2000 && !in; tries++) { /* 20 s: for a busy machine */
		int e = connect_unix(d.sock);
		if (e < 0) {
			usleep(10000);
			continue;
		}
		Tileatom__PingRequest p = TILEATOM__PING_REQUEST__INIT;
		Tileatom__Request req = TILEATOM__REQUEST__INIT;
		req.id = 9;
		req.body_case = TILEATOM__REQUEST__BODY_PING;
		req.ping = &p;
		send_request(e, &req);
		resp = recv_response(e);
		if (resp && resp->status == TILEATOM__STATUS__OK && resp->id == 9)
			in = true;
		if (resp)
			tileatom__response__free_unpacked(resp, NULL);
		close(e);
		if (!in)
			usleep(10000);
	}
	ck_assert(in);
	close(b);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

START_TEST(test_disconnect_mid_request)
{
	daemon_proc d;
	start_daemon(&d, NULL);
	int keep = connect_unix(d.sock);
	create_tile(keep, "big", 4 * 1024 * 1024); /* 16 MiB */
	for (int round = 0; round < 5; round++) {
		int gone = connect_unix(d.sock);
		/* Large responses (16 MiB of old values), never read. */
		for (int i = 0; i < 3; i++)
			ck_assert(send_add(gone, (uint64_t)i, "big", true));
		close(gone);
	}
	ping_ok(keep, 1);
	/* Every add ran to completion although nobody read the answers. */
	long long deadline = now_ms() + 20000;
	uint64_t req = 0;
	while (now_ms() < deadline) {
		Tileatom__Response *resp = get_stats(keep);
		req = resp->stats->requests;
		uint32_t conns = resp->stats->connections;
		tileatom__response__free_unpacked(resp, NULL);
		if (conns == 1)
			break;
		usleep(20000);
	}
	ck_assert_uint_ge(req, 3);
	close(keep);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

START_TEST(test_backpressure)
{
	daemon_proc d;
	const char *const extra[] = {"--max-write-queue", "1M", NULL};
	start_daemon(&d, extra);
	int fd = connect_unix(d.sock);
	create_tile(fd, "bp", 16384); /* 64 KiB responses */
	enum { N = 2000 };
	writer_arg w = {fd, N, "bp", true, false};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, writer_main, &w), 0);
	usleep(1500000); /* the client does not read */
	int other = connect_unix(d.sock);
	Tileatom__Response *resp = get_stats(other);
	uint64_t handled = resp->stats->requests;
	tileatom__response__free_unpacked(resp, NULL);
	/* 1 MiB of queue + the socket buffers hold some dozens of 64 KiB answers, not 2000. */
	ck_assert_msg(handled < 400, "%llu requests handled for a client that does not read",
	              (unsigned long long)handled);
	for (int i = 1; i <= N; i++) {
		resp = recv_response(fd);
		ck_assert_msg(resp != NULL, "response %d missing", i);
		ck_assert_uint_eq(resp->id, (uint64_t)i + 1000);
		int32_t old;
		memcpy(&old, resp->op->old->data.data + 4 * 16383, 4);
		ck_assert_int_eq(old, i - 1);
		tileatom__response__free_unpacked(resp, NULL);
	}
	pthread_join(th, NULL);
	ck_assert(w.ok);
	ping_ok(other, 3);
	close(other);
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

/* A load client of the SIGTERM tests. */
typedef struct load_arg {
	const char *sock;      /* daemon socket */
	bool greedy;           /* pipeline 8 requests per response read (a client that lags), each
	                          answered with the 1024 old values (4 KiB), so that the unread
	                          answers fill the socket buffers however fast the daemon is */
	_Atomic long answered; /* responses received (read by the test while it runs) */
} load_arg;

/* Load thread: sends adds until the daemon goes away; responses come in order. */
static void *load_main(void *p)
{
	load_arg *a = p;
	int fd = connect_unix(a->sock);
	if (fd < 0)
		return NULL;
	for (uint64_t id = 1;; id++) {
		if (!send_add(fd, id, "load", a->greedy))
			break;
		if (a->greedy && id % 8 != 0)
			continue;
		Tileatom__Response *resp = recv_response(fd);
		if (!resp)
			break;
		a->answered++;
		bool in_order = resp->id == (uint64_t)a->answered;
		tileatom__response__free_unpacked(resp, NULL);
		if (!in_order) {
			a->answered = -1000000; /* fails the test's answered > 0 check */
			break;
		}
	}
	close(fd);
	return NULL;
}

/* Runs 4 load clients, SIGTERMs the daemon; returns the milliseconds the stop took. */
static long long sigterm_under_load(bool greedy, const char *timeout)
{
	daemon_proc d;
	const char *const extra[] = {"--shutdown-timeout", timeout, NULL};
	start_daemon(&d, extra);
	int fd = connect_unix(d.sock);
	create_tile(fd, "load", 1024);
	close(fd);
	pthread_t th[4];
	load_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (load_arg){d.sock, greedy, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, load_main, &args[i]), 0);
	}
	usleep(300000);
	/* every client under way (answered), and the greedy ones with answers left unread (16
	 * reads leave 16 x 7 answers of 4 KiB behind, more than the socket buffers hold),
	 * whatever the machine's speed: the fixed 300 ms alone left a client without an
	 * answer on a 2-CPU machine at load 19 */
	const long want = greedy ? 16 : 1;
	for (long long deadline = now_ms() + 20000; now_ms() < deadline;) {
		bool all = true;
		for (int i = 0; i < 4; i++)
			all = all && atomic_load(&args[i].answered) >= want;
		if (all)
			break;
		usleep(10000);
	}
	long long t0 = now_ms();
	int status = stop_daemon(&d);
	long long took = now_ms() - t0;
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_gt(args[i].answered, 0);
	}
	struct stat st;
	ck_assert_int_eq(stat(d.sock, &st), -1);
	char *err = slurp(d.err_path);
	ck_assert_ptr_nonnull(strstr(err, "<5>stopped"));
	bool timed_out = strstr(err, "still open") != NULL;
	free(err);
	cleanup(&d);
	ck_assert(timed_out == greedy);
	return took;
}

START_TEST(test_sigterm_under_load)
{
	/* Clients that read their answers: the daemon finishes what it has and exits at
	 * once, long before the 30 s shutdown timeout. */
	long long took = sigterm_under_load(false, "30");
	/* (the bounds tell "at once" from "waited for the 30 s timeout", with room for a
	 * loaded machine: a stop takes well under a second on an idle one) */
	ck_assert_msg(took < 20000, "stop took %lld ms", took);
	/* Clients that do not read: the 1 s shutdown timeout closes them. */
	took = sigterm_under_load(true, "1");
	ck_assert_msg(took >= 900 && took < 20000, "stop took %lld ms", took);
}
END_TEST

START_TEST(test_notify_ready_stopping)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/ta_srv_notify_%d", (int)getpid());
	unlink(path);
	int ns = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un addr;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	strcpy(addr.sun_path, path);
	ck_assert_int_eq(bind(ns, (struct sockaddr *)&addr, sizeof(addr)), 0);
	struct timeval tv = {20, 0};
	setsockopt(ns, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setenv("NOTIFY_SOCKET", path, 1);
	daemon_proc d;
	start_daemon(&d, NULL);
	unsetenv("NOTIFY_SOCKET");
	char buf[128];
	ssize_t n = recv(ns, buf, sizeof(buf) - 1, 0);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "READY=1\nSTATUS=serving");
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	n = recv(ns, buf, sizeof(buf) - 1, 0);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "STOPPING=1");
	close(ns);
	unlink(path);
	cleanup(&d);
}
END_TEST

START_TEST(test_tcp_loopback_and_refusal)
{
	daemon_proc d;
	const char *const extra[] = {"--listen", "127.0.0.1:0", NULL};
	start_daemon(&d, extra);
	/* The Unix socket comes up first: wait for the TCP line of the log. */
	char *err = NULL;
	const char *at = NULL;
	for (long long deadline = now_ms() + 20000; !at && now_ms() < deadline;) {
		free(err);
		err = slurp(d.err_path);
		at = strstr(err, "listening on tcp:127.0.0.1:");
		if (!at)
			usleep(10000);
	}
	ck_assert_ptr_nonnull(at);
	int port = atoi(at + strlen("listening on tcp:127.0.0.1:"));
	free(err);
	ck_assert_int_gt(port, 0);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in in;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons((uint16_t)port);
	in.sin_addr.s_addr = htonl(0x7f000001);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&in, sizeof(in)), 0);
	struct timeval tv = {20, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert(hello_ok(fd));
	ping_ok(fd, 1);
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);

	const char *const remote[] = {"--listen", "0.0.0.0:0", NULL};
	start_daemon_ex(&d, remote, true, &status);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 1);
	err = slurp(d.err_path);
	ck_assert_ptr_nonnull(strstr(err, "<3>refusing to listen on 0.0.0.0:0: not a loopback"));
	free(err);
	struct stat st;
	ck_assert_int_eq(stat(d.sock, &st), -1); /* nothing left behind */
	cleanup(&d);
}
END_TEST

START_TEST(test_stale_socket_and_bad_usage)
{
	/* A stale socket file (nobody listening) is replaced. */
	daemon_proc d;
	char dir[64], sock[128];
	snprintf(dir, sizeof(dir), "/tmp/ta_stale_XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un addr;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	strcpy(addr.sun_path, sock);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(fd);
	const char *const extra[] = {"--socket", sock, NULL};
	start_daemon_ex(&d, extra, false, NULL);
	/* The later --socket wins: the daemon listens on sock. */
	int c = connect_unix(sock);
	ck_assert_int_ge(c, 0);
	ping_ok(c, 1);
	/* A second daemon on the same socket refuses to start. */
	daemon_proc d2;
	int status = 0;
	start_daemon_ex(&d2, extra, true, &status);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	char *err = slurp(d2.err_path);
	ck_assert_ptr_nonnull(strstr(err, "another daemon is already listening on"));
	free(err);
	cleanup(&d2);
	ping_ok(c, 2);
	close(c);
	status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);

	/* A regular file is never removed. */
	FILE *f = fopen(sock, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	start_daemon_ex(&d, extra, true, &status);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	err = slurp(d.err_path);
	ck_assert_ptr_nonnull(strstr(err, "exists and is not a socket"));
	free(err);
	cleanup(&d);
	struct stat st;
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(unlink(sock), 0);
	rmdir(dir);

	/* Usage errors exit 2 with a message on stderr. */
	const char *const bad[] = {"--workers", "zero", NULL};
	start_daemon_ex(&d, bad, true, &status);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2);
	err = slurp(d.err_path);
	ck_assert_ptr_nonnull(strstr(err, "workers: 'zero' is not auto or a thread count"));
	free(err);
	cleanup(&d);
}
END_TEST

START_TEST(test_socket_group)
{
	char gid[32];
	snprintf(gid, sizeof(gid), "%u", (unsigned)getegid());
	const char *const extra[] = {"--socket-group", gid, NULL};
	daemon_proc d;
	start_daemon(&d, extra);
	struct stat st;
	ck_assert_int_eq(stat(d.sock, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0660);
	ck_assert_uint_eq(st.st_gid, getegid());
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);

	const char *const bad[] = {"--socket-group", "no-such-group-tileatom", NULL};
	start_daemon_ex(&d, bad, true, &status);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	char *err = slurp(d.err_path);
	ck_assert_ptr_nonnull(
	    strstr(err, "<3>socket_group: no group named 'no-such-group-tileatom'"));
	free(err);
	cleanup(&d);
}
END_TEST

/* ---- access and bounds ----------------------------------------------------------------- */

/* Connects over TCP to the port the daemon logged ("listening on tcp:127.0.0.1:PORT"). */
static int connect_tcp_logged(const daemon_proc *d)
{
	char *err = NULL;
	const char *at = NULL;
	for (int tries = 0; tries < 2000 && !at; tries++) { /* 20 s: for a busy machine */
		free(err);
		err = slurp(d->err_path);
		at = strstr(err, "listening on tcp:127.0.0.1:");
		if (!at)
			usleep(10000);
	}
	ck_assert_ptr_nonnull(at);
	int port = atoi(at + strlen("listening on tcp:127.0.0.1:"));
	free(err);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in in;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons((uint16_t)port);
	in.sin_addr.s_addr = htonl(0x7f000001);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&in, sizeof(in)), 0);
	struct timeval tv = {20, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Sends a ping and expects status (and msg when not NULL). */
static void ping_expect(int fd, uint64_t id, Tileatom__Status status, const char *msg)
{
	uint8_t frame[64];
	size_t used = 0;
	append_ping(frame, sizeof(frame), &used, id);
	ck_assert(send_all(fd, frame, used));
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, id);
	ck_assert_msg(resp->status == status, "status %d: %s", resp->status, resp->message);
	if (msg)
		ck_assert_str_eq(resp->message, msg);
	tileatom__response__free_unpacked(resp, NULL);
}

/* Counts the occurrences of needle in the file at path. */
static int count_in_file(const char *path, const char *needle)
{
	char *text = slurp(path);
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	free(text);
	return n;
}

/* Writes a secret file of mode into a new temporary directory (dir, path filled). */
static void make_secret(char *dir, size_t dsize, char *path, size_t psize, mode_t mode)
{
	snprintf(dir, dsize, "/tmp/ta_auth.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, psize, "%s/secret", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("5f0c3e9a1b7d4c2e8a6f0b3d9e1c7a42\n", f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

/* Sends Hello and returns its response (the caller frees it). */
static Tileatom__Response *hello_response(int fd)
{
	Tileatom__HelloRequest h = TILEATOM__HELLO_REQUEST__INIT;
	h.protocol_version = 1;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &h;
	ck_assert(send_request(fd, &req));
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	return resp;
}

/* Sends Auth with a proof of secret over nonce; returns the response and the proof the
 * daemon should answer with (server_proof). */
static Tileatom__Response *auth_response(int fd, const ta_auth_secret *secret, const uint8_t *nonce,
                                         uint8_t *server_proof)
{
	uint8_t cn[TA_AUTH_CLIENT_NONCE], proof[TA_AUTH_PROOF];
	ck_assert_int_eq(ta_auth_random(cn, sizeof(cn)), 0);
	ck_assert_int_eq(ta_auth_proof(secret, TA_AUTH_CLIENT, nonce, cn, sizeof(cn), proof), 0);
	ck_assert_int_eq(ta_auth_proof(secret, TA_AUTH_SERVER, nonce, cn, sizeof(cn), server_proof),
	                 0);
	Tileatom__AuthRequest a = TILEATOM__AUTH_REQUEST__INIT;
	a.client_nonce.data = cn;
	a.client_nonce.len = sizeof(cn);
	a.proof.data = proof;
	a.proof.len = sizeof(proof);
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 2;
	req.body_case = TILEATOM__REQUEST__BODY_AUTH;
	req.auth = &a;
	ck_assert(send_request(fd, &req));
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_ptr_nonnull(resp);
	return resp;
}

START_TEST(test_auth_tcp)
{
	char dir[64], path[128], msg[512];
	make_secret(dir, sizeof(dir), path, sizeof(path), 0600);
	ta_auth_secret secret, wrong;
	ck_assert_int_eq(ta_auth_load(path, &secret, msg, sizeof(msg)), 0);
	wrong = secret;
	wrong.bytes[0] ^= 1;
	daemon_proc d;
	const char *const extra[] = {"--listen", "127.0.0.1:0", "--auth-file", path, NULL};
	start_daemon(&d, extra);

	/* Hello first, then nothing but Auth */
	int fd = connect_tcp_logged(&d);
	ping_expect(fd, 3, TILEATOM__STATUS__INVALID_ARGUMENT,
	            "ping request before Hello: the protocol requires Hello as the first request "
	            "of a connection");
	Tileatom__Response *h = hello_response(fd);
	ck_assert(h->hello->auth_required);
	ck_assert_uint_eq(h->hello->auth_nonce.len, TA_AUTH_NONCE);
	uint8_t nonce[TA_AUTH_NONCE], sproof[TA_AUTH_PROOF];
	memcpy(nonce, h->hello->auth_nonce.data, TA_AUTH_NONCE);
	tileatom__response__free_unpacked(h, NULL);
	ping_expect(fd, 4, TILEATOM__STATUS__PERMISSION_DENIED,
	            "ping refused: this TCP connection must authenticate first (Auth with the "
	            "daemon's secret: tileatom-cli --auth-file FILE, or TILEATOM_AUTH_FILE)");
	Tileatom__Response *a = auth_response(fd, &secret, nonce, sproof);
	ck_assert_msg(a->status == TILEATOM__STATUS__OK, "%s", a->message);
	ck_assert_uint_eq(a->auth->server_proof.len, TA_AUTH_PROOF);
	ck_assert(ta_auth_equal(a->auth->server_proof.data, sproof, TA_AUTH_PROOF));
	tileatom__response__free_unpacked(a, NULL);
	ping_expect(fd, 5, TILEATOM__STATUS__OK, "");

	/* a wrong secret: PERMISSION_DENIED, then the connection closes */
	int bad = connect_tcp_logged(&d);
	h = hello_response(bad);
	uint8_t nonce2[TA_AUTH_NONCE];
	memcpy(nonce2, h->hello->auth_nonce.data, TA_AUTH_NONCE);
	tileatom__response__free_unpacked(h, NULL);
	a = auth_response(bad, &wrong, nonce2, sproof);
	ck_assert_int_eq(a->status, TILEATOM__STATUS__PERMISSION_DENIED);
	ck_assert_str_eq(a->message, "authentication failed: the proof does not match the "
	                             "daemon's secret; closing the connection");
	tileatom__response__free_unpacked(a, NULL);
	ck_assert(at_eof(bad));
	close(bad);
	/* a replayed proof (made for the first connection's nonce) fails the same way */
	bad = connect_tcp_logged(&d);
	h = hello_response(bad);
	tileatom__response__free_unpacked(h, NULL);
	a = auth_response(bad, &secret, nonce, sproof);
	ck_assert_int_eq(a->status, TILEATOM__STATUS__PERMISSION_DENIED);
	tileatom__response__free_unpacked(a, NULL);
	ck_assert(at_eof(bad));
	close(bad);
	ping_expect(fd, 6, TILEATOM__STATUS__OK, ""); /* the good client goes on */

	/* Unix clients need no Auth (their uid identifies them) */
	int u = connect_unix_raw(d.sock);
	h = hello_response(u);
	ck_assert(!h->hello->auth_required);
	tileatom__response__free_unpacked(h, NULL);
	ping_expect(u, 7, TILEATOM__STATUS__OK, "");
	close(u);
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* three refusals (a request before Auth, two failed Auths) within 10 s: one warning
	 * line, the others are counted for the next one */
	ck_assert_int_eq(count_in_file(d.err_path, "<4>"), 1);
	cleanup(&d);

	/* other hosts only with a secret: --allow-remote without one is refused, with one the
	 * daemon serves all addresses */
	const char *const remote_open[] = {"--listen", "0.0.0.0:0", "--allow-remote", NULL};
	start_daemon_ex(&d, remote_open, true, &status);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 1);
	ck_assert_int_eq(count_in_file(d.err_path,
	                               "<3>refusing to listen on 0.0.0.0:0 without authentication: "
	                               "other hosts may connect only to a daemon with auth_file "
	                               "(--auth-file)"),
	                 1);
	cleanup(&d);
	const char *const remote_auth[] = {"--listen",    "0.0.0.0:0", "--allow-remote",
	                                   "--auth-file", path,        NULL};
	start_daemon(&d, remote_auth);
	status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);

	/* a secret file that others may read: the daemon refuses to start */
	ck_assert_int_eq(chmod(path, 0644), 0);
	start_daemon_ex(&d, extra, true, &status);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 1);
	char want[512];
	snprintf(want, sizeof(want),
	         "<3>the auth file %s has mode 0644: group and others must have no access", path);
	ck_assert_int_eq(count_in_file(d.err_path, want), 1);
	cleanup(&d);
	/* a 0600 secret file owned by another user (only root can give one away): it chose
	 * the secret, so a daemon of another user refuses to start */
	if (geteuid() == 0) {
		ck_assert_int_eq(chmod(path, 0600), 0);
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		start_daemon_ex(&d, extra, true, &status);
		ck_assert(WIFEXITED(status));
		ck_assert_int_eq(WEXITSTATUS(status), 1);
		snprintf(want, sizeof(want),
		         "<3>the auth file %s belongs to uid 65534: it must belong to the user "
		         "running this program (uid 0) or to root (chown 0 %s)",
		         path, path);
		ck_assert_int_eq(count_in_file(d.err_path, want), 1);
		cleanup(&d);
	}
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_frame_and_idle_timeouts)
{
	daemon_proc d;
	const char *const extra[] = {"--frame-timeout", "300ms", "--idle-timeout", "1s", NULL};
	start_daemon(&d, extra);
	int good = connect_unix(d.sock);

	/* a partial frame: answered UNAVAILABLE and closed once 300 ms have passed */
	int slow = connect_unix(d.sock);
	uint8_t partial[14];
	ta_frame_put_header(partial, 100);
	memset(partial + 4, 0, 10);
	long long t0 = now_ms();
	ck_assert(send_all(slow, partial, sizeof(partial)));
	Tileatom__Response *resp = recv_response(slow);
	long long waited = now_ms() - t0;
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__UNAVAILABLE);
	ck_assert_str_eq(resp->message, "a partial frame (10 of 100 payload bytes) was held for "
	                                "more than 300 ms (frame_timeout); closing the "
	                                "connection");
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(at_eof(slow));
	close(slow);
	/* the upper bounds here only catch a timeout that never fires: generous, so that a
	 * slow or busy machine passes */
	ck_assert_msg(waited >= 300 && waited < 15000, "closed after %lld ms", waited);

	/* slowloris: a byte every 50 ms does not keep the frame alive */
	slow = connect_unix(d.sock);
	uint8_t hdr[4];
	ta_frame_put_header(hdr, 100);
	ck_assert(send_all(slow, hdr, 4));
	t0 = now_ms();
	bool closed = false;
	for (int i = 0; i < 100 && !closed; i++) {
		uint8_t zero = 0;
		usleep(50000);
		ping_ok(good, (uint64_t)(10 + i)); /* the other client is served meanwhile */
		struct pollfd pfd = {slow, POLLIN, 0};
		if (poll(&pfd, 1, 0) > 0)
			closed = true;
		else
			ck_assert(send_all(slow, &zero, 1));
	}
	waited = now_ms() - t0;
	ck_assert(closed);
	ck_assert_msg(waited >= 300 && waited < 15000, "slowloris closed after %lld ms", waited);
	resp = recv_response(slow);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__UNAVAILABLE);
	tileatom__response__free_unpacked(resp, NULL);
	close(slow);

	/* idle: a connection that sends nothing for 1 s is closed; one that keeps talking is
	 * not */
	int idle = connect_unix(d.sock);
	t0 = now_ms();
	for (int i = 0; i < 100; i++) { /* the good client keeps talking meanwhile */
		struct pollfd pfd = {idle, POLLIN, 0};
		if (poll(&pfd, 1, 100) > 0)
			break;
		ping_ok(good, (uint64_t)(200 + i));
	}
	waited = now_ms() - t0;
	resp = recv_response(idle);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__UNAVAILABLE);
	ck_assert_str_eq(resp->message, "nothing was sent or taken for 1000 ms (idle_timeout); "
	                                "closing the connection");
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(at_eof(idle));
	close(idle);
	ck_assert_msg(waited >= 900 && waited < 15000, "idle closed after %lld ms", waited);
	ping_ok(good, 500);
	close(good);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

START_TEST(test_refusals_logged_once)
{
	daemon_proc d;
	const char *const extra[] = {"--max-connections", "1", NULL};
	start_daemon(&d, extra);
	int a = -1;
	for (int tries = 0; tries < 2000 && a < 0; tries++) { /* the start probe may linger */
		a = connect_unix(d.sock);
		if (a < 0)
			usleep(10000);
	}
	ck_assert_int_ge(a, 0);
	int before = count_in_file(d.err_path, "refused: too many connections");
	for (int i = 0; i < 30; i++) {
		int c = connect_unix_raw(d.sock);
		ck_assert_int_ge(c, 0);
		Tileatom__Response *resp = recv_response(c);
		ck_assert_ptr_nonnull(resp);
		ck_assert_int_eq(resp->status, TILEATOM__STATUS__RESOURCE_EXHAUSTED);
		tileatom__response__free_unpacked(resp, NULL);
		close(c);
	}
	ping_ok(a, 1);
	close(a);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* 30 refusals within 10 s: one line (none more when a refusal of the loop above
	 * already wrote it) */
	ck_assert_int_eq(count_in_file(d.err_path, "refused: too many connections") - before,
	                 before ? 0 : 1);
	cleanup(&d);
}
END_TEST

/* Sends an element-wise add of 1 over the first n elements of tile name, of dtype int32 or
 * float32 (the reply is not read). */
static void send_add_n_dtype(int fd, uint64_t id, const char *name, int64_t n,
                             Tileatom__DType dtype)
{
	/* 1 as int32 and as float32 bits */
	uint32_t one = dtype == TILEATOM__DTYPE__FLOAT32 ? 0x3f800000u : 1u;
	int64_t origin = 0;
	Tileatom__Region r = TILEATOM__REGION__INIT;
	r.n_origin = 1;
	r.origin = &origin;
	r.n_shape = 1;
	r.shape = &n;
	Tileatom__Array va = TILEATOM__ARRAY__INIT;
	va.dtype = dtype;
	va.data.data = (uint8_t *)&one;
	va.data.len = 4;
	Tileatom__ElementwiseAtomicRequest e = TILEATOM__ELEMENTWISE_ATOMIC_REQUEST__INIT;
	e.tile = (char *)name;
	e.op = TILEATOM__OP__ADD;
	e.region = &r;
	e.values = &va;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_ELEMENTWISE;
	req.elementwise = &e;
	ck_assert(send_request(fd, &req));
}

/* Sends an element-wise add of 1 over the first n elements of int32 tile name (the reply
 * is not read). */
static void send_add_n(int fd, uint64_t id, const char *name, int64_t n)
{
	send_add_n_dtype(fd, id, name, n, TILEATOM__DTYPE__INT32);
}

/* One try of test_slot_freed_while_request_runs with x's add over big int32 elements: checks
 * every outcome exactly and returns whether b got in while x's add still ran (the premise). */
static bool slot_freed_try(int64_t big)
{
	daemon_proc d;
	const char *const extra[] = {
	    "--max-connections", "2",   "--workers", "1", "--cpu-threads", "1", "--inline-max", "0",
	    "--backend",         "cpu", NULL};
	start_daemon(&d, extra);
	int x = connect_unix(d.sock);
	long long deadline = now_ms() + 20000;
	for (;;) { /* wait until the start probe is gone: x is the only one */
		Tileatom__Response *st = get_stats(x);
		uint32_t open = st->stats->connections;
		tileatom__response__free_unpacked(st, NULL);
		if (open == 1)
			break;
		ck_assert_msg(now_ms() < deadline, "%u connections open", open);
		usleep(10000);
	}
	create_tile(x, "big", big);
	int a = connect_unix(d.sock);
	ck_assert_int_ge(a, 0);
	send_add_n(x, 20, "big", big);
	usleep(20000); /* x's add is on the worker */
	send_add_n(a, 21, "big", 1000);
	usleep(20000); /* a's add waits for the worker */
	struct linger lg = {1, 0};
	setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(a); /* a reset: the peer is gone at once */
	/* a's slot is free although its request is still queued on the executor */
	int b = -1;
	for (int tries = 0; tries < 2000 && b < 0; tries++) { /* 10 s: for a busy machine */
		b = connect_unix(d.sock);
		if (b < 0)
			usleep(5000);
	}
	ck_assert_int_ge(b, 0);
	ping_ok(b, 30); /* pings run on the loop: served while the worker is busy */
	struct pollfd pfd = {x, POLLIN, 0};
	bool x_done = poll(&pfd, 1, 0) > 0;
	Tileatom__Response *resp = recv_response(x);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 20);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, (uint64_t)big);
	tileatom__response__free_unpacked(resp, NULL);
	close(b);
	close(x);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
	return !x_done;
}

START_TEST(test_slot_freed_while_request_runs)
{
	/* one worker, one thread per request: x's large add keeps the worker busy while a's
	 * request waits behind it on the executor (on the CPU backend whatever
	 * TA_TEST_BACKEND says: a GPU finishes the add in a few milliseconds). b must get in
	 * while x's add still runs, else the try proved nothing: a machine that starves the
	 * daemon's loop (heavy load, valgrind's one-thread-at-a-time) may finish the add first,
	 * so the add grows fourfold and the case runs again (128 MiB, then 512 MiB). */
	bool proved = false;
	for (int64_t big = INT64_C(32) << 20; !proved && big <= (INT64_C(128) << 20); big *= 4)
		proved = slot_freed_try(big);
	ck_assert_msg(proved, "x's add finished before b got in even at 512 MiB");
}
END_TEST

START_TEST(test_frame_clock_held_by_daemon)
{
	/* a partial frame behind requests that run longer than frame_timeout: the daemon
	 * holds the connection up, so its clock waits (CPU backend: on a GPU the adds are too
	 * quick to outlast the timeout). The frame is finished while the adds still run, twice
	 * the timeout after it began: a daemon whose clock ran would have closed the
	 * connection by then. Nothing here races the daemon's sweep after the adds end. */
	daemon_proc d;
	const char *const extra[] = {
	    "--frame-timeout", "50ms", "--workers", "1", "--cpu-threads", "1", "--inline-max", "0",
	    "--backend",       "cpu",  NULL};
	start_daemon(&d, extra);
	/* 4 adds over 256 MiB of float32 (a compare-and-swap loop per element): about 190 ms
	 * each on one thread of the 2-CPU machine, so they still run 100 ms in even on a
	 * machine several times faster */
	const int64_t big = INT64_C(64) << 20;
	const int adds = 4;
	int x = connect_unix(d.sock);
	create_tile_dtype(x, "big", big, TILEATOM__DTYPE__FLOAT32);
	uint8_t ping[64];
	size_t plen = 0;
	append_ping(ping, sizeof(ping), &plen, 40);
	for (int i = 0; i < adds; i++)
		send_add_n_dtype(x, 30 + (uint64_t)i, "big", big, TILEATOM__DTYPE__FLOAT32);
	ck_assert(send_all(x, ping, 5)); /* the ping's prefix and one byte */
	struct timespec wait = {0, 100 * 1000 * 1000};
	while (nanosleep(&wait, &wait) != 0 && errno == EINTR)
		;
	/* the adds must still run (no answer yet), else this proved nothing */
	struct pollfd pf = {.fd = x, .events = POLLIN};
	ck_assert_msg(poll(&pf, 1, 0) == 0, "the adds ended within 100 ms; make them larger");
	ck_assert(send_all(x, ping + 5, plen - 5));
	for (int i = 0; i < adds; i++) {
		Tileatom__Response *resp = recv_response(x);
		ck_assert_ptr_nonnull(resp);
		ck_assert_uint_eq(resp->id, 30 + (uint64_t)i);
		ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
		tileatom__response__free_unpacked(resp, NULL);
	}
	Tileatom__Response *resp = recv_response(x);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 40);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	close(x);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

/* Packs a Hello whose client_name has name_len bytes into a malloc'd frame (*len). */
static uint8_t *big_hello_frame(uint64_t id, size_t name_len, size_t *len)
{
	char *name = malloc(name_len + 1);
	ck_assert_ptr_nonnull(name);
	memset(name, 'x', name_len);
	name[name_len] = '\0';
	Tileatom__HelloRequest h = TILEATOM__HELLO_REQUEST__INIT;
	h.protocol_version = 1;
	h.client_name = name;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &h;
	uint8_t *frame = NULL;
	ck_assert_int_eq(ta_frame_encode(&req.base, TA_FRAME_DEFAULT_MAX, &frame, len), 0);
	free(name);
	return frame;
}

/* The serial of the newest connection the daemon's log says it accepted (0: none). */
static uint64_t last_accepted(const daemon_proc *d)
{
	char *err = slurp(d->err_path);
	uint64_t serial = 0, s;
	for (const char *p = err; (p = strstr(p, "connection ")); p++) {
		int k = 0;
		if (sscanf(p, "connection %" SCNu64 "%n", &s, &k) == 1 &&
		    strncmp(p + k, " accepted", 9) == 0 && s > serial)
			serial = s;
	}
	free(err);
	return serial;
}

/* Waits (up to 20 s) until the daemon's log holds needle. */
static void wait_log(const daemon_proc *d, const char *needle)
{
	long long deadline = now_ms() + 20000;
	for (;;) {
		char *err = slurp(d->err_path);
		bool found = strstr(err, needle) != NULL;
		free(err);
		if (found)
			return;
		ck_assert_msg(now_ms() < deadline, "the daemon's log never said \"%s\"", needle);
		usleep(10000);
	}
}

/* Waits until the daemon holds payload bytes of input budget for connection serial's frame. */
static void wait_held(const daemon_proc *d, uint64_t serial, size_t payload)
{
	char needle[128];
	snprintf(needle, sizeof(needle),
	         "connection %" PRIu64 ": %zu bytes of the input budget held for a frame", serial,
	         payload);
	wait_log(d, needle);
}

START_TEST(test_input_total_bound)
{
	/* room for two 16000-byte frames in progress, not three */
	daemon_proc d;
	const char *const extra[] = {"--max-frame", "16K", "--max-input-total", "32K", NULL};
	start_daemon(&d, extra);
	size_t len = 0;
	uint8_t *frame[3];
	for (int i = 0; i < 3; i++)
		frame[i] = big_hello_frame((uint64_t)(100 + i), 15990, &len);
	ck_assert_uint_gt(len, 16000);
	ck_assert_uint_le(len, 16384 + TA_FRAME_HEADER);
	/* each connection's serial from the log (its Hello answered: its accept is logged) */
	int fa = connect_unix(d.sock);
	uint64_t sa = last_accepted(&d);
	int fb = connect_unix(d.sock);
	uint64_t sb = last_accepted(&d);
	int fc = connect_unix(d.sock);
	uint64_t sc = last_accepted(&d);
	ck_assert(sa < sb && sb < sc);
	/* a and b each start a frame: 2 x ~16000 bytes held (seen in the log before c sends) */
	ck_assert(send_all(fa, frame[0], 100));
	wait_held(&d, sa, len - TA_FRAME_HEADER);
	ck_assert(send_all(fb, frame[1], 100));
	wait_held(&d, sb, len - TA_FRAME_HEADER);
	/* c's frame does not fit: c is paused, its bytes wait */
	ck_assert(send_all(fc, frame[2], 100));
	char paused[96];
	snprintf(paused, sizeof(paused), "connection %" PRIu64 ": input budget", sc);
	wait_log(&d, paused);
	ck_assert(send_all(fc, frame[2] + 100, len - 100));
	/* other clients keep being served (whole small frames need no reservation) */
	int other = connect_unix(d.sock);
	ck_assert_int_ge(other, 0);
	ping_ok(other, 1);
	struct pollfd pfd = {fc, POLLIN, 0};
	ck_assert_int_eq(poll(&pfd, 1, 300), 0); /* no answer for c while a and b hold it */
	/* a finishes its frame: its reservation is given back, c goes on */
	ck_assert(send_all(fa, frame[0] + 100, len - 100));
	Tileatom__Response *resp = recv_response(fa);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 100);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	resp = recv_response(fc);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 102);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(send_all(fb, frame[1] + 100, len - 100));
	resp = recv_response(fb);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 101);
	tileatom__response__free_unpacked(resp, NULL);
	ping_ok(fc, 2); /* nobody was closed */
	for (int i = 0; i < 3; i++)
		free(frame[i]);
	close(fa);
	close(fb);
	close(fc);
	close(other);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

START_TEST(test_loops_spread)
{
	/* --loops 3: the main loop hands the connections to the three loops in turn, each
	 * answers its own, and SIGTERM stops them all (exit status 0) */
	daemon_proc d;
	const char *const extra[] = {"--loops", "3", NULL};
	start_daemon(&d, extra);
	int fd[6];
	for (int i = 0; i < 6; i++) {
		fd[i] = connect_unix(d.sock);
		ck_assert_int_ge(fd[i], 0);
	}
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 6; i++)
			ping_ok(fd[i], (uint64_t)(10 * round + i + 1));
	for (int i = 0; i < 6; i++)
		close(fd[i]);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char *err = slurp(d.err_path);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, ", 3 event loop(s)") != NULL, "%s", err);
	for (int l = 0; l < 3; l++) {
		char want[32];
		snprintf(want, sizeof(want), "(unix, loop %d, ", l);
		ck_assert_msg(strstr(err, want) != NULL, "no connection on loop %d:\n%s", l, err);
	}
	free(err);
	cleanup(&d);
}
END_TEST

/* State letter of thread tid of process pid (/proc/PID/task/TID/stat: R running or
 * runnable, S sleeping, ...), or '?' when it cannot be read. */
static char thread_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *close_paren = strrchr(buf, ')'); /* the name may hold anything but ')' */
	return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

/* Samples of the main thread's state, 10 ms apart, that read R (running or runnable). */
static int running_samples(pid_t pid, int samples)
{
	int running = 0;
	for (int i = 0; i < samples; i++) {
		if (thread_state(pid, pid) == 'R')
			running++;
		usleep(10000);
	}
	return running;
}

START_TEST(test_busy_poll_spins_then_sleeps)
{
	/* --busy-poll USEC: after input the event loop (here the main thread's, one loop)
	 * polls without sleeping, so its thread stays runnable, and once USEC passed with no
	 * input it sleeps in the poll again; requests are answered as always */
	daemon_proc d;
	const char *const extra[] = {"--busy-poll", "1000000", "--loops", "1", NULL};
	start_daemon(&d, extra);
	int fd = connect_unix(d.sock);
	ck_assert_int_ge(fd, 0);
	long long sent = now_ms();
	ping_ok(fd, 1);
	int spinning = running_samples(d.pid, 20); /* within 0.2 s of the 1 s */
	/* a spinning thread never blocks, so it reads R (running or waiting for a CPU) */
	ck_assert_msg(spinning >= 15 || now_ms() - sent > 900,
	              "the loop slept within its busy poll (%d of 20 samples runnable)", spinning);
	usleep(1300000); /* the busy poll ends 1 s after the last input */
	/* a sleeping thread still reads R now and then on a loaded machine (woken by a timer,
	 * waiting for a CPU), so it gets several windows of 0.2 s, up to 10 s: a loop that
	 * spins reads R in every one of them */
	int after = running_samples(d.pid, 20);
	for (int tries = 1; after > 2 && tries < 50; tries++)
		after = running_samples(d.pid, 20);
	ck_assert_msg(after <= 2, "the loop still runs 11 s after its last input (%d of 20)",
	              after);
	ping_ok(fd, 2);
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

/* Reads the one response the daemon sends a connection it closes and checks its status and
 * the start of its message (prefix), then EOF. */
static void expect_closed_with(int fd, Tileatom__Status status, const char *prefix)
{
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_msg(resp != NULL, "no answer before the connection ended (or 20 s passed)");
	ck_assert_msg(resp->status == status, "status %d: %s", resp->status, resp->message);
	ck_assert_msg(strncmp(resp->message, prefix, strlen(prefix)) == 0, "message: %s",
	              resp->message);
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(at_eof(fd));
}

/* Waits (up to 20 s) until the daemon's stats count want connections (seen from fd's). */
static void wait_connections(int fd, uint32_t want)
{
	long long deadline = now_ms() + 20000;
	for (;;) {
		Tileatom__Response *st = get_stats(fd);
		uint32_t open = st->stats->connections;
		tileatom__response__free_unpacked(st, NULL);
		if (open == want)
			return;
		ck_assert_msg(now_ms() < deadline, "%u connections open, waiting for %u", open,
		              want);
		usleep(10000);
	}
}

START_TEST(test_handshake_deadline)
{
	char dir[64], path[128];
	make_secret(dir, sizeof(dir), path, sizeof(path), 0600);
	daemon_proc d;
	const char *const extra[] = {
	    "--listen", "127.0.0.1:0", "--auth-file", path, "--handshake-timeout", "1s", NULL};
	start_daemon(&d, extra);
	int good = connect_unix(d.sock); /* finished its handshake: no deadline */
	int mute = connect_unix_raw(d.sock);
	ck_assert_int_ge(mute, 0);
	int tcp = connect_tcp_logged(&d);
	Tileatom__Response *h = hello_response(tcp); /* Hello, but never Auth */
	tileatom__response__free_unpacked(h, NULL);
	/* each is answered UNAVAILABLE and closed about a second after it was accepted (the
	 * receives give up after 20 s: only a daemon without the deadline gets there) */
	expect_closed_with(mute, TILEATOM__STATUS__UNAVAILABLE,
	                   "the handshake (Hello) was not finished within 1000 ms "
	                   "(handshake_timeout); closing the connection");
	expect_closed_with(tcp, TILEATOM__STATUS__UNAVAILABLE,
	                   "the handshake (Hello, then Auth) was not finished within 1000 ms "
	                   "(handshake_timeout); closing the connection");
	close(mute);
	close(tcp);
	ping_ok(good, 1);
	close(good);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_handshake_cap_and_unix_share)
{
	char dir[64], path[128];
	make_secret(dir, sizeof(dir), path, sizeof(path), 0600);
	daemon_proc d;
	/* no deadline: only the cap closes connections here; one loop: room is made on the
	 * main loop's connections (server.h) */
	const char *const extra[] = {"--listen",
	                             "127.0.0.1:0",
	                             "--auth-file",
	                             path,
	                             "--handshake-timeout",
	                             "0",
	                             "--max-unauthenticated",
	                             "2",
	                             "--max-connections",
	                             "8",
	                             "--unix-reserve",
	                             "3",
	                             "--loops",
	                             "1",
	                             NULL};
	start_daemon(&d, extra);
	int good = connect_unix(d.sock);
	wait_connections(good, 1); /* start_daemon's probe is gone */
	/* five TCP connections that say Hello but never authenticate (one after the other:
	 * each Hello answered before the next connects): at most two are kept, each newcomer
	 * closes the oldest */
	int t[5];
	for (int i = 0; i < 5; i++) {
		t[i] = connect_tcp_logged(&d);
		Tileatom__Response *h = hello_response(t[i]);
		tileatom__response__free_unpacked(h, NULL);
	}
	for (int i = 0; i < 3; i++) {
		expect_closed_with(t[i], TILEATOM__STATUS__UNAVAILABLE,
		                   "closed to make room for a new connection: the connections in "
		                   "their handshake are at their limit (max_unauthenticated) and "
		                   "this connection had not finished its handshake for ");
		close(t[i]);
	}
	wait_connections(good, 3);
	/* a fresh Unix client is served while the TCP handshake cap is full (the transports
	 * have a cap each) */
	int u = connect_unix(d.sock);
	ck_assert_int_ge(u, 0);
	ping_ok(u, 2);
	close(u);
	close(t[3]);
	close(t[4]);
	wait_connections(good, 1);

	/* TCP connections, authenticated or not, never take the last unix_reserve slots:
	 * 8 - 3 = 5 TCP connections at most */
	ta_auth_secret secret;
	char msg[256];
	ck_assert_int_eq(ta_auth_load(path, &secret, msg, sizeof(msg)), 0);
	int a[6];
	for (int i = 0; i < 5; i++) {
		a[i] = connect_tcp_logged(&d);
		Tileatom__Response *h = hello_response(a[i]);
		uint8_t nonce[TA_AUTH_NONCE], sproof[TA_AUTH_PROOF];
		memcpy(nonce, h->hello->auth_nonce.data, TA_AUTH_NONCE);
		tileatom__response__free_unpacked(h, NULL);
		Tileatom__Response *r = auth_response(a[i], &secret, nonce, sproof);
		ck_assert_msg(r->status == TILEATOM__STATUS__OK, "%s", r->message);
		tileatom__response__free_unpacked(r, NULL);
	}
	a[5] = connect_tcp_logged(&d);
	expect_closed_with(a[5], TILEATOM__STATUS__RESOURCE_EXHAUSTED,
	                   "too many TCP connections: the limit is 5 (max_connections less "
	                   "unix_reserve, kept for local clients); try again later");
	close(a[5]);
	/* the Unix share is still there: two more local clients (8 in all) */
	int u1 = connect_unix(d.sock), u2 = connect_unix(d.sock);
	ck_assert_int_ge(u1, 0);
	ck_assert_int_ge(u2, 0);
	ping_ok(u1, 3);
	ping_ok(u2, 4);
	for (int i = 0; i < 5; i++)
		ping_expect(a[i], 5, TILEATOM__STATUS__OK, "");
	for (int i = 0; i < 5; i++)
		close(a[i]);
	close(u1);
	close(u2);
	close(good);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_handshake_burst_admitted)
{
	/* clients that connect all at once, before the daemon could read any of them, are
	 * not closed for each other: the cap closes only connections polled at least once */
	daemon_proc d;
	const char *const extra[] = {"--max-unauthenticated", "2", NULL};
	start_daemon(&d, extra);
	int good = connect_unix(d.sock);
	wait_connections(good, 1); /* start_daemon's probe is gone */
	ck_assert_int_eq(kill(d.pid, SIGSTOP), 0);
	int c[6];
	uint8_t hello[64];
	size_t used = 0;
	{
		Tileatom__HelloRequest h = TILEATOM__HELLO_REQUEST__INIT;
		h.protocol_version = 1;
		Tileatom__Request req = TILEATOM__REQUEST__INIT;
		req.id = 1;
		req.body_case = TILEATOM__REQUEST__BODY_HELLO;
		req.hello = &h;
		append_request(hello, sizeof(hello), &used, &req);
	}
	for (int i = 0; i < 6; i++) { /* queued in the listen backlog, Hello in the socket */
		c[i] = connect_unix_raw(d.sock);
		ck_assert_int_ge(c[i], 0);
		ck_assert(send_all(c[i], hello, used));
	}
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	for (int i = 0; i < 6; i++) {
		Tileatom__Response *resp = recv_response(c[i]);
		ck_assert_ptr_nonnull(resp);
		ck_assert_msg(resp->status == TILEATOM__STATUS__OK, "client %d: %s", i,
		              resp->message);
		tileatom__response__free_unpacked(resp, NULL);
		ping_ok(c[i], 2);
		close(c[i]);
	}
	close(good);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

START_TEST(test_no_input_before_handshake)
{
	char dir[64], path[128];
	make_secret(dir, sizeof(dir), path, sizeof(path), 0600);
	daemon_proc d;
	/* the input budget holds one largest frame: a reservation by the unauthenticated
	 * connection would stall the Unix client's frame below */
	const char *const extra[] = {"--listen",    "127.0.0.1:0", "--auth-file",       path,
	                             "--max-frame", "1M",          "--max-input-total", "1M",
	                             NULL};
	start_daemon(&d, extra);
	int tcp = connect_tcp_logged(&d);
	Tileatom__Response *h = hello_response(tcp);
	tileatom__response__free_unpacked(h, NULL);
	uint8_t hdr[4 + 10];
	ta_frame_put_header(hdr, 1000000);
	memset(hdr + 4, 0, 10);
	ck_assert(send_all(tcp, hdr, sizeof(hdr)));
	expect_closed_with(tcp, TILEATOM__STATUS__RESOURCE_EXHAUSTED,
	                   "frame of 1000000 bytes before the handshake: until it (Hello, then "
	                   "Auth) is finished a frame may have at most 4096 bytes; closing the "
	                   "connection");
	close(tcp);
	/* before Hello on the Unix socket too; a frame of 4096 bytes is still taken */
	int raw = connect_unix_raw(d.sock);
	ta_frame_put_header(hdr, 4097);
	ck_assert(send_all(raw, hdr, 4));
	expect_closed_with(raw, TILEATOM__STATUS__RESOURCE_EXHAUSTED,
	                   "frame of 4097 bytes before the handshake: until it (Hello) is "
	                   "finished a frame may have at most 4096 bytes; closing the "
	                   "connection");
	close(raw);
	/* a Unix client that finished its handshake sends a frame needing the whole budget */
	int u = connect_unix(d.sock);
	size_t len = 0;
	uint8_t *big = big_hello_frame(9, 900000, &len);
	ck_assert(send_all(u, big, 100)); /* partial: the frame reserves its length */
	ck_assert(send_all(u, big + 100, len - 100));
	Tileatom__Response *resp = recv_response(u);
	ck_assert_ptr_nonnull(resp);
	ck_assert_uint_eq(resp->id, 9);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	free(big);
	close(u);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_stalled_connection_makes_room)
{
	daemon_proc d;
	const char *const extra[] = {
	    "--max-connections", "3", "--unix-reserve", "0", "--loops", "1", NULL};
	start_daemon(&d, extra);
	int a = connect_unix(d.sock);
	wait_connections(a, 1); /* start_daemon's probe is gone */
	int b = connect_unix(d.sock);
	int slow = connect_unix(d.sock);
	/* slow starts a frame it never finishes; a and b are idle (not stalled) */
	uint8_t partial[14];
	ta_frame_put_header(partial, 100);
	memset(partial + 4, 0, 10);
	ck_assert(send_all(slow, partial, sizeof(partial)));
	/* once it has been stalled for TA_SERVER_STALL_MS, a newcomer takes its slot */
	usleep((TA_SERVER_STALL_MS + 200) * 1000);
	int fresh = connect_unix(d.sock);
	ck_assert_int_ge(fresh, 0);
	ping_ok(fresh, 1);
	expect_closed_with(slow, TILEATOM__STATUS__UNAVAILABLE,
	                   "closed to make room for a new connection: every connection slot is "
	                   "taken (max_connections) and this connection held a partial frame "
	                   "for ");
	close(slow);
	/* idle connections are never closed for a newcomer: it is refused */
	int over = connect_unix_raw(d.sock);
	expect_closed_with(over, TILEATOM__STATUS__RESOURCE_EXHAUSTED,
	                   "too many connections: the limit is 3 (max_connections)");
	close(over);
	ping_ok(a, 2);
	ping_ok(b, 3);
	close(a);
	close(b);
	close(fresh);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

START_TEST(test_scatter_dim_as_sent)
{
	daemon_proc d;
	start_daemon(&d, NULL);
	int fd = connect_unix(d.sock);
	create_tile(fd, "sd", 4);
	int32_t zero = 0, one = 1;
	int64_t n1 = 1;
	Tileatom__Array idx = TILEATOM__ARRAY__INIT;
	idx.dtype = TILEATOM__DTYPE__INT32;
	idx.n_shape = 1;
	idx.shape = &n1;
	idx.data.data = (uint8_t *)&zero;
	idx.data.len = 4;
	Tileatom__Array va = TILEATOM__ARRAY__INIT;
	va.dtype = TILEATOM__DTYPE__INT32;
	va.data.data = (uint8_t *)&one;
	va.data.len = 4;
	Tileatom__ScatterAddr sa = TILEATOM__SCATTER_ADDR__INIT;
	sa.dim = UINT32_MAX;
	sa.indices = &idx;
	Tileatom__ScatterAtomicRequest sc = TILEATOM__SCATTER_ATOMIC_REQUEST__INIT;
	sc.tile = (char *)"sd";
	sc.op = TILEATOM__OP__ADD;
	sc.addr = &sa;
	sc.values = &va;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 7;
	req.body_case = TILEATOM__REQUEST__BODY_SCATTER;
	req.scatter = &sc;
	ck_assert(send_request(fd, &req));
	Tileatom__Response *resp = recv_response(fd);
	ck_assert_ptr_nonnull(resp);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_str_eq(resp->message, "scatter dim 4294967295 is out of range for a rank-1 tile");
	tileatom__response__free_unpacked(resp, NULL);
	close(fd);
	int status = stop_daemon(&d);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cleanup(&d);
}
END_TEST

/* The suite. */
static Suite *server_suite(void)
{
	Suite *s = suite_create("daemon_server");
	TCase *tc = tcase_create("process");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_start_ping_stop);
	tcase_add_test(tc, test_pipelined_order);
	tcase_add_test(tc, test_grouped_run_order);
	tcase_add_test(tc, test_async_run_order);
	tcase_add_test(tc, test_async_run_order_thread);
	tcase_add_test(tc, test_kept_tile_destroyed_in_run);
	tcase_add_test(tc, test_bad_frames_other_client_unharmed);
	tcase_add_test(tc, test_tiny_write_queue_pipelined);
	tcase_add_test(tc, test_connection_limit);
	tcase_add_test(tc, test_disconnect_mid_request);
	tcase_add_test(tc, test_backpressure);
	tcase_add_test(tc, test_sigterm_under_load);
	tcase_add_test(tc, test_notify_ready_stopping);
	tcase_add_test(tc, test_tcp_loopback_and_refusal);
	tcase_add_test(tc, test_stale_socket_and_bad_usage);
	tcase_add_test(tc, test_socket_group);
	tcase_add_test(tc, test_loops_spread);
	tcase_add_test(tc, test_busy_poll_spins_then_sleeps);
	suite_add_tcase(s, tc);
	tc = tcase_create("access_bounds");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_auth_tcp);
	tcase_add_test(tc, test_frame_and_idle_timeouts);
	tcase_add_test(tc, test_refusals_logged_once);
	tcase_add_test(tc, test_slot_freed_while_request_runs);
	tcase_add_test(tc, test_frame_clock_held_by_daemon);
	tcase_add_test(tc, test_input_total_bound);
	tcase_add_test(tc, test_handshake_deadline);
	tcase_add_test(tc, test_handshake_cap_and_unix_share);
	tcase_add_test(tc, test_handshake_burst_admitted);
	tcase_add_test(tc, test_no_input_before_handshake);
	tcase_add_test(tc, test_stalled_connection_makes_room);
	tcase_add_test(tc, test_scatter_dim_as_sent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	SRunner *sr = srunner_create(server_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
