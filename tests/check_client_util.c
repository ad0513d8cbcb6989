/* check_client_util.c: daemon start/stop and subprocess helpers of the end-to-end suites
 * (see check_client_util.h). The daemon runs in the foreground as a child of the test
 * process with its stderr in a log file; readiness is a successful connect + handshake. */
#include "check_client_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "tileatom.h"

#ifndef TILEATOMD_PATH
#define TILEATOMD_PATH "tileatomd"
#endif
#ifndef TILEATOM_CLI_PATH
#define TILEATOM_CLI_PATH "tileatom-cli"
#endif

const char *tcu_daemon_path(void)
{
	const char *p = getenv("TILEATOMD");
	return p && *p ? p : TILEATOMD_PATH;
}

const char *tcu_cli_path(void)
{
	const char *p = getenv("TILEATOM_CLI");
	return p && *p ? p : TILEATOM_CLI_PATH;
}

const char *tcu_backend(void)
{
	const char *b = getenv("TA_TEST_BACKEND");
	return b && *b ? b : "cpu";
}

const char *tcu_loops(void)
{
	const char *v = getenv("TA_TEST_LOOPS");
	return v && *v ? v : NULL;
}

const char *tcu_busy_poll(void)
{
	const char *v = getenv("TA_TEST_BUSY_POLL");
	return v && *v ? v : NULL;
}

const char *tcu_async(void)
{
	const char *v = getenv("TA_TEST_ASYNC");
	return v && *v ? v : NULL;
}

const char *tcu_async_poll(void)
{
	const char *v = getenv("TA_TEST_ASYNC_POLL");
	return v && *v ? v : NULL;
}

const char *tcu_devices(void)
{
	const char *v = getenv("TA_TEST_DEVICES");
	return v && *v ? v : NULL;
}

const char *tcu_placement(void)
{
	const char *v = getenv("TA_TEST_PLACEMENT");
	return v && *v ? v : NULL;
}

bool tcu_slow(void)
{
	const char *v = getenv("TA_UNDER_VALGRIND");
	return v && *v && strcmp(v, "0") != 0;
}

/* Milliseconds of a monotonic clock. */
static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps ms milliseconds. */
static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Waits for pid up to timeout_ms; returns the decoded status or -1 on timeout. */
static int wait_exit(pid_t pid, int timeout_ms)
{
	int64_t end = mono_ms() + timeout_ms;
	for (;;) {
		int st;
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			if (WIFEXITED(st))
				return WEXITSTATUS(st);
			if (WIFSIGNALED(st))
				return 128 + WTERMSIG(st);
			return -1;
		}
		if (w < 0 && errno != EINTR)
			return -1;
		if (mono_ms() >= end)
			return -1;
		sleep_ms(5);
	}
}

bool tcu_daemon_start(tcu_daemon *d, const char *const *extra)
{
	memset(d, 0, sizeof(*d));
	const char *tmp = getenv("TMPDIR");
	snprintf(d->dir, sizeof(d->dir), "%s/tileatom-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(d->dir)) {
		fprintf(stderr, "mkdtemp %s: %s\n", d->dir, strerror(errno));
		return false;
	}
	snprintf(d->socket, sizeof(d->socket), "%s/tileatomd.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/tileatomd.log", d->dir);
	const char *argv[32];
	int n = 0;
	argv[n++] = tcu_daemon_path();
	argv[n++] = "--socket";
	argv[n++] = d->socket;
	argv[n++] = "--backend";
	argv[n++] = tcu_backend();
	argv[n++] = "--foreground";
	argv[n++] = "--log-level";
	argv[n++] = "info";
	const char *loops = tcu_loops();
	if (loops) {
		argv[n++] = "--loops";
		argv[n++] = loops;
	}
	const char *spin = tcu_busy_poll();
	if (spin) {
		argv[n++] = "--busy-poll";
		argv[n++] = spin;
	}
	const char *async = tcu_async();
	if (async) {
		argv[n++] = "--async-apply";
		argv[n++] = async;
	}
	const char *async_poll = tcu_async_poll();
	if (async_poll) {
		argv[n++] = "--async-poll";
		argv[n++] = async_poll;
	}
	const char *devices = tcu_devices(), *placement = tcu_placement();
	if (devices) {
		argv[n++] = "--devices";
		argv[n++] = devices;
	}
	if (placement) {
		argv[n++] = "--placement";
		argv[n++] = placement;
	}
	for (int i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "fork: %s\n", strerror(errno));
		return false;
	}
	if (pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nul = open("/dev/null", O_RDONLY);
		if (fd < 0 || nul < 0)
			_exit(126);
		dup2(fd, STDERR_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(nul, STDIN_FILENO);
		unsetenv("NOTIFY_SOCKET");
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	d->pid = pid;
	int64_t end = mono_ms() + 30000;
	while (mono_ms() < end) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			d->pid = 0;
			fprintf(stderr, "tileatomd exited during start-up (status 0x%x)\n", st);
			tcu_daemon_dump_log(d);
			return false;
		}
		tileatom_client *c = NULL;
		if (access(d->socket, F_OK) == 0 &&
		    tileatom_connect(d->socket, 1000, &c, NULL) == TILEATOM_OK) {
			tileatom_close(c);
			return true;
		}
		sleep_ms(10);
	}
	fprintf(stderr, "tileatomd did not accept connections on %s within 30 s\n", d->socket);
	tcu_daemon_dump_log(d);
	tcu_daemon_stop(d, 5000);
	return false;
}

int tcu_daemon_stop(tcu_daemon *d, int timeout_ms)
{
	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	int st = wait_exit(d->pid, timeout_ms);
	if (st < 0) {
		kill(d->pid, SIGKILL);
		wait_exit(d->pid, 5000);
	}
	d->pid = 0;
	return st;
}

bool tcu_daemon_alive(tcu_daemon *d)
{
	if (d->pid <= 0)
		return false;
	int st;
	pid_t w = waitpid(d->pid, &st, WNOHANG);
	if (w == d->pid) {
		d->pid = 0;
		return false;
	}
	if (w == 0)
		return true;
	/* Not our child (a forked Check test asks about the suite's daemon): read its state
	 * from /proc, where an exited but unreaped daemon shows as a zombie. */
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)d->pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

void tcu_daemon_cleanup(tcu_daemon *d)
{
	if (d->pid > 0)
		tcu_daemon_stop(d, 5000);
	if (!d->dir[0])
		return;
	DIR *dir = opendir(d->dir);
	if (dir) {
		struct dirent *e;
		while ((e = readdir(dir)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			char path[600];
			snprintf(path, sizeof(path), "%s/%s", d->dir, e->d_name);
			unlink(path);
		}
		closedir(dir);
	}
	rmdir(d->dir);
	d->dir[0] = '\0';
}

void tcu_daemon_dump_log(const tcu_daemon *d)
{
	FILE *f = fopen(d->log, "r");
	if (!f)
		return;
	fprintf(stderr, "---- %s ----\n", d->log);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, stderr);
	fprintf(stderr, "---- end of log ----\n");
	fclose(f);
}

int tcu_daemon_tcp_port(const tcu_daemon *d)
{
	static const char tag[] = "listening on tcp:127.0.0.1:";
	for (int tries = 0; tries < 2000; tries++) { /* 20 s: for a busy machine */
		FILE *f = fopen(d->log, "r");
		char line[512];
		while (f && fgets(line, sizeof(line), f)) {
			const char *at = strstr(line, tag);
			if (at) {
				fclose(f);
				return atoi(at + strlen(tag));
			}
		}
		if (f)
			fclose(f);
		usleep(10000);
	}
	return 0;
}

bool tcu_write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return false;
	bool ok = fwrite(text, 1, len, f) == len;
	return fclose(f) == 0 && ok;
}

/* Reads a whole file into a malloc'd NUL-terminated string ("" when unreadable). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	if (!buf)
		abort();
	if (f) {
		size_t n;
		while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
			len += n;
			if (cap - len - 1 == 0) {
				cap *= 2;
				buf = realloc(buf, cap);
				if (!buf)
					abort();
			}
		}
		fclose(f);
	}
	buf[len] = '\0';
	return buf;
}

void tcu_run(const char *dir, const char *stdin_text, const char *const *argv, tcu_result *r)
{
	static int seq;
	char in_path[600], out_path[600], err_path[600];
	int k = seq++;
	snprintf(in_path, sizeof(in_path), "%s/run-%d-%d.in", dir, (int)getpid(), k);
	snprintf(out_path, sizeof(out_path), "%s/run-%d-%d.out", dir, (int)getpid(), k);
	snprintf(err_path, sizeof(err_path), "%s/run-%d-%d.err", dir, (int)getpid(), k);
	r->status = -1;
	const char *text = stdin_text ? stdin_text : "";
	if (!tcu_write_file(in_path, text, strlen(text))) {
		r->out = slurp("/nonexistent");
		r->err = slurp("/nonexistent");
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int in = open(in_path, O_RDONLY);
		int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (in < 0 || out < 0 || err < 0)
			_exit(126);
		dup2(in, STDIN_FILENO);
		dup2(out, STDOUT_FILENO);
		dup2(err, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (pid > 0) {
		r->status = wait_exit(pid, 120000);
		if (r->status < 0) {
			kill(pid, SIGKILL);
			wait_exit(pid, 5000);
		}
	}
	r->out = slurp(out_path);
	r->err = slurp(err_path);
	unlink(in_path);
	unlink(out_path);
	unlink(err_path);
}

void tcu_cli(const tcu_daemon *d, const char *stdin_text, const char *const *args, tcu_result *r)
{
	const char *argv[32];
	int n = 0;
	argv[n++] = tcu_cli_path();
	argv[n++] = "-s";
	argv[n++] = d->socket;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	tcu_run(d->dir, stdin_text, argv, r);
}

void tcu_result_free(tcu_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

uint64_t tcu_rand(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * UINT64_C(2685821657736338717);
}
