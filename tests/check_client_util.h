/* check_client_util.h: helpers of the end-to-end suites (check_integration.c,
 * check_client_cli.c): start a real tileatomd on a socket in a temporary directory and
 * stop it, run tileatom-cli (or any program) with captured output, and small utilities.
 * Paths of the binaries come from $TILEATOMD / $TILEATOM_CLI, else from the build tree
 * (compiled in by tests/service.mk). */
#ifndef CHECK_CLIENT_UTIL_H
#define CHECK_CLIENT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Asserts that a library call returned TILEATOM_OK; e is the tileatom_error it filled (the
 * suite includes check.h and tileatom.h). */
#define CK(call, e)                                                                                \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		ck_assert_msg(rc_ == TILEATOM_OK, "%s -> %s: %s", #call, tileatom_strerror(rc_),   \
		              (e).message);                                                        \
	} while (0)

/* A tileatomd started by a test. */
typedef struct tcu_daemon {
	pid_t pid;        /* daemon process, 0 when not running */
	char dir[256];    /* temporary directory holding the socket and the log */
	char socket[320]; /* socket path */
	char log[320];    /* the daemon's stderr */
} tcu_daemon;

/* Output of a program run by tcu_run. */
typedef struct tcu_result {
	int status; /* exit status, or 128 + signal, or -1 when it could not run */
	char *out;  /* captured stdout (NUL-terminated, malloc'd) */
	char *err;  /* captured stderr (NUL-terminated, malloc'd) */
} tcu_result;

/* Path of the tileatomd binary. */
const char *tcu_daemon_path(void);
/* Path of the tileatom-cli binary (may be a libtool wrapper script). */
const char *tcu_cli_path(void);
/* Backend the test daemon runs: $TA_TEST_BACKEND (e.g. "cuda" on a GPU machine), else "cpu". */
const char *tcu_backend(void);
/* The event loop count the daemon gets (--loops) from $TA_TEST_LOOPS, or NULL (its
 * default) when that is unset or empty. */
const char *tcu_loops(void);
/* The daemon's --busy-poll microseconds from $TA_TEST_BUSY_POLL, or NULL (off) when that
 * is unset or empty. */
const char *tcu_busy_poll(void);
/* The daemon's --async-apply from $TA_TEST_ASYNC (tests/check_async.sh sets 1), or NULL
 * (its default) when that is unset or empty. */
const char *tcu_async(void);
/* The daemon's --async-poll microseconds from $TA_TEST_ASYNC_POLL, or NULL (its default)
 * when that is unset or empty. */
const char *tcu_async_poll(void);
/* TA_TEST_DEVICES, or NULL: when set, daemons get --devices with it (tests/check_sharded.sh). */
const char *tcu_devices(void);
/* TA_TEST_PLACEMENT, or NULL: when set, daemons get --placement with it. */
const char *tcu_placement(void);
/* True when the suite runs under valgrind (TA_UNDER_VALGRIND set): loops shrink. */
bool tcu_slow(void);

/* Starts tileatomd --socket DIR/tileatomd.sock --backend cpu --foreground plus extra
 * (NULL-terminated, may be NULL) and waits until a client can connect (up to 30 s).
 * Returns false (with the log on stderr) when it does not come up. */
bool tcu_daemon_start(tcu_daemon *d, const char *const *extra);
/* Sends SIGTERM and waits up to timeout_ms for the exit; returns the exit status, 128 +
 * signal when killed by one, or -1 after a timeout (it is then killed with SIGKILL). */
int tcu_daemon_stop(tcu_daemon *d, int timeout_ms);
/* True while the daemon process is alive (not exited). */
bool tcu_daemon_alive(tcu_daemon *d);
/* Removes the directory and what is left in it. */
void tcu_daemon_cleanup(tcu_daemon *d);
/* Copies the daemon's log to stderr (for failure diagnosis). */
void tcu_daemon_dump_log(const tcu_daemon *d);
/* The port a daemon started with --listen 127.0.0.1:0 logged ("listening on
 * tcp:127.0.0.1:PORT"), waiting up to 5 s for it; 0 when absent. */
int tcu_daemon_tcp_port(const tcu_daemon *d);

/* Runs argv (argv[0] a path, NULL-terminated) with stdin from stdin_text (NULL: empty) and
 * stdout/stderr captured through files in dir; waits up to 120 s. */
void tcu_run(const char *dir, const char *stdin_text, const char *const *argv, tcu_result *r);
/* Runs tileatom-cli -s SOCKET ARGS... (args NULL-terminated) the same way. */
void tcu_cli(const tcu_daemon *d, const char *stdin_text, const char *const *args, tcu_result *r);
/* Frees the captured output. */
void tcu_result_free(tcu_result *r);

/* Writes text to path; false on failure. */
bool tcu_write_file(const char *path, const char *text, size_t len);

/* A small deterministic RNG (xorshift64*). */
uint64_t tcu_rand(uint64_t *state);

#endif /* CHECK_CLIENT_UTIL_H */
