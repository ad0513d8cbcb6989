/* check_daemon.c: unit tests of tileatomd's parts that run without sockets: settings
 * (sizes, keys, INI files, command line, default socket path), the tile registry (names,
 * limits, counted references, pending tiles), dispatch (every request body through
 * ta_dispatch_frame on the CPU backend, with exact values), the sd_notify datagram and
 * the executor (done callbacks on the loop thread). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "conf.h"
#include "dispatch.h"
#include "executor.h"
#include "log.h"
#include "notify.h"
#include "registry.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"

/* What the registry counts for a CPU-backend tile of b bytes: the record and hash share,
 * and the heap chunk. */
#define TILE_COST(b) (TA_TILE_BOOKKEEPING + TA_CPU_TILE_FOOTPRINT(b))

/* ---- settings ------------------------------------------------------------------------ */

START_TEST(test_parse_size)
{
	uint64_t v = 0;
	ck_assert_int_eq(ta_config_parse_size("0", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(ta_config_parse_size("1234", &v), 0);
	ck_assert_uint_eq(v, 1234);
	ck_assert_int_eq(ta_config_parse_size("1K", &v), 0);
	ck_assert_uint_eq(v, 1024);
	ck_assert_int_eq(ta_config_parse_size("64M", &v), 0);
	ck_assert_uint_eq(v, 67108864);
	ck_assert_int_eq(ta_config_parse_size("64MiB", &v), 0);
	ck_assert_uint_eq(v, 67108864);
	ck_assert_int_eq(ta_config_parse_size("2g", &v), 0);
	ck_assert_uint_eq(v, UINT64_C(2147483648));
	ck_assert_int_eq(ta_config_parse_size("1T", &v), 0);
	ck_assert_uint_eq(v, UINT64_C(1099511627776));
	ck_assert_int_eq(ta_config_parse_size("", &v), -1);
	ck_assert_int_eq(ta_config_parse_size("-1", &v), -1);
	ck_assert_int_eq(ta_config_parse_size(" -1", &v), -1); /* not 2^64 - 1 */
	ck_assert_int_eq(ta_config_parse_size(" 5", &v), -1);
	ck_assert_int_eq(ta_config_parse_size("12x", &v), -1);
	ck_assert_int_eq(ta_config_parse_size("M", &v), -1);
	ck_assert_int_eq(ta_config_parse_size("16777216T", &v), -1); /* 2^64: overflow */
	ck_assert_int_eq(ta_config_parse_size("99999999999999999999", &v), -1);
}
END_TEST

START_TEST(test_config_defaults_and_set)
{
	ta_config cfg;
	ta_config_init(&cfg);
	ck_assert_uint_eq(cfg.max_frame, 64u * 1024u * 1024u);
	ck_assert_int_eq(cfg.backend, TA_BACKEND_AUTO);
	ck_assert_int_eq(cfg.log_level, TA_LOG_NOTICE);
	ck_assert_ptr_null(cfg.socket_path);
	ta_error err = {0};
	ck_assert_int_eq(ta_config_set(&cfg, "max-frame", "1M", &err), TA_OK);
	ck_assert_uint_eq(cfg.max_frame, 1048576);
	ck_assert_int_eq(ta_config_set(&cfg, "backend", "cpu", &err), TA_OK);
	ck_assert_int_eq(cfg.backend, TA_BACKEND_CPU);
	ck_assert_int_eq(ta_config_set(&cfg, "allow_remote", "yes", &err), TA_OK);
	ck_assert(cfg.allow_remote);
	ck_assert_int_eq(ta_config_set(&cfg, "log_level", "debug", &err), TA_OK);
	ck_assert_int_eq(cfg.log_level, TA_LOG_DEBUG);
	ck_assert_int_eq(ta_config_set(&cfg, "socket", "/tmp/x.sock", &err), TA_OK);
	ck_assert_str_eq(cfg.socket_path, "/tmp/x.sock");
	ck_assert_int_eq(ta_config_set(&cfg, "max_total_bytes", "0", &err), TA_OK);
	ck_assert_uint_eq(cfg.max_total_bytes, 0);

	ck_assert_int_eq(ta_config_set(&cfg, "max_frame", "100", &err), TA_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "max_frame"));
	ck_assert_int_eq(ta_config_set(&cfg, "backend", "gpu", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "backend: 'gpu' is not auto, cpu or cuda");
	ck_assert_int_eq(ta_config_set(&cfg, "workers", "0", &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(ta_config_set(&cfg, "workers", "3x", &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(ta_config_set(&cfg, "allow_remote", "maybe", &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(ta_config_set(&cfg, "listen", "localhost", &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(ta_config_set(&cfg, "colour", "blue", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "unknown setting 'colour'");
	/* Failed sets leave the previous values. */
	ck_assert_uint_eq(cfg.max_frame, 1048576);
	ck_assert_int_eq(cfg.backend, TA_BACKEND_CPU);
	ck_assert_int_eq(cfg.workers, TA_CONFIG_WORKERS_AUTO);
	ck_assert_int_eq(ta_config_workers(&cfg, "cpu"), 4);
	ck_assert_int_eq(ta_config_workers(&cfg, "cuda"), 64);
	ck_assert_int_eq(ta_config_set(&cfg, "workers", "3", &err), TA_OK);
	ck_assert_int_eq(ta_config_workers(&cfg, "cuda"), 3);
	ck_assert_int_eq(ta_config_set(&cfg, "workers", "auto", &err), TA_OK);
	ck_assert_int_eq(ta_config_workers(&cfg, "cpu"), 4);
	/* loops: auto is 1 below 4 CPUs and on CUDA without async applies, else half the CPUs
	 * up to 8; a count is taken as is */
	ck_assert_int_eq(cfg.loops, TA_CONFIG_LOOPS_AUTO);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 1, false, 1), 1);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 2, false, 1), 1);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 3, false, 1), 1);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 4, false, 1), 2);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 6, false, 1), 3);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 16, false, 1), 8);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 128, true, 1), 8);
	/* over several devices up to 8 each: 2 GPUs on 32 CPUs as two daemons would; at most
	 * 16 in all over GPUs, 64 over CPU pools */
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 32, true, 2), 16);
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 16, true, 2), 8);
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 64, true, 4), 16);
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 256, true, 16), 16);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 64, false, 4), 32);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 256, false, 16), 64);
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 32, false, 2), 1);
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 16, false, 1), 1); /* the workers batch */
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 16, true, 1), 8);  /* loops apply async */
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 3, true, 1), 1);
	/* async_apply: auto is on where the backend has apply_async, but not on the CPU
	 * backend; never with a data log */
	ck_assert_int_eq(cfg.async_apply, TA_CONFIG_ASYNC_AUTO);
	ck_assert(ta_config_async(&cfg, "cuda", true, false));
	ck_assert(!ta_config_async(&cfg, "cuda", false, false));
	ck_assert(!ta_config_async(&cfg, "cuda", true, true));
	ck_assert(!ta_config_async(&cfg, "cpu", true, false));
	ck_assert_int_eq(ta_config_set(&cfg, "async_apply", "1", &err), TA_OK);
	ck_assert(ta_config_async(&cfg, "cpu", true, false));
	ck_assert(!ta_config_async(&cfg, "cpu", true, true));
	ck_assert(!ta_config_async(&cfg, "cpu", false, false));
	ck_assert_int_eq(ta_config_set(&cfg, "async_apply", "0", &err), TA_OK);
	ck_assert(!ta_config_async(&cfg, "cuda", true, false));
	ck_assert_int_eq(ta_config_set(&cfg, "async_apply", "on", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg,
	                 "async_apply: 'on' is not auto or a switch (0..1, 0 = off, 1 = on)");
	ck_assert_int_eq(ta_config_set(&cfg, "async_apply", "auto", &err), TA_OK);
	ck_assert_int_eq(cfg.async_apply, TA_CONFIG_ASYNC_AUTO);
	ck_assert_int_eq(ta_config_set(&cfg, "loops", "3", &err), TA_OK);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 2, false, 1), 3);
	ck_assert_int_eq(ta_config_loops(&cfg, "cpu", 16, false, 1), 3);
	ck_assert_int_eq(ta_config_loops(&cfg, "cuda", 16, false, 1), 3);
	ck_assert_int_eq(ta_config_set(&cfg, "loops", "0", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "loops: '0' is not auto or a count (1..64)");
	ck_assert_int_eq(ta_config_set(&cfg, "loops", "65", &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(ta_config_set(&cfg, "loops", "two", &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(cfg.loops, 3);
	ck_assert_int_eq(ta_config_set(&cfg, "loops", "auto", &err), TA_OK);
	ck_assert_int_eq(cfg.loops, TA_CONFIG_LOOPS_AUTO);
	ck_assert_int_eq(ta_config_set(&cfg, "batch_window", "250", &err), TA_OK);
	ck_assert_int_eq(cfg.batch_window_us, 250);
	ck_assert_int_eq(ta_config_set(&cfg, "batch_window", "-1", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "batch_window: '-1' is not a time in microseconds (0..1000000)");
	ck_assert_int_eq(cfg.batch_window_us, 250);
	/* busy_poll: off by default, microseconds 0..1000000 */
	ck_assert_int_eq(cfg.busy_poll_us, 0);
	ck_assert_int_eq(ta_config_set(&cfg, "busy_poll", "50", &err), TA_OK);
	ck_assert_int_eq(cfg.busy_poll_us, 50);
	ck_assert_int_eq(ta_config_set(&cfg, "busy_poll", "1000001", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg,
	                 "busy_poll: '1000001' is not a time in microseconds (0..1000000)");
	ck_assert_int_eq(ta_config_set(&cfg, "busy_poll", "50us", &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(cfg.busy_poll_us, 50);
	ck_assert_int_eq(ta_config_set(&cfg, "busy_poll", "0", &err), TA_OK);
	ck_assert_int_eq(cfg.busy_poll_us, 0);
	/* async_poll: auto polls 1 ms where the loops and two threads a device busy at most
	 * half the CPUs (8 loops, one GPU: 20 CPUs), else not at all; a number is kept */
	ck_assert_int_eq(cfg.async_poll_us, TA_CONFIG_ASYNC_POLL_AUTO);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 16, 8, 1), 0);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 19, 8, 1), 0);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 20, 8, 1), 1000);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 32, 8, 1), 1000);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 32, 16, 2), 0);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 40, 16, 2), 1000);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 2, 1, 1), 0);
	ck_assert_int_eq(ta_config_set(&cfg, "async_poll", "250", &err), TA_OK);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 2, 1, 1), 250);
	ck_assert_int_eq(ta_config_set(&cfg, "async_poll", "0", &err), TA_OK);
	ck_assert_int_eq(ta_config_async_poll(&cfg, 64, 8, 1), 0);
	ck_assert_int_eq(ta_config_set(&cfg, "async_poll", "1000001", &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(ta_config_set(&cfg, "async_poll", "auto", &err), TA_OK);
	ck_assert_int_eq(cfg.async_poll_us, TA_CONFIG_ASYNC_POLL_AUTO);
	ta_config_free(&cfg);
}
END_TEST

/* Writes text to a fresh temporary file; returns its malloc'd path. */
static char *write_temp(const char *text)
{
	char *path = strdup("/tmp/check_daemon_XXXXXX");
	ck_assert_ptr_nonnull(path);
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	size_t n = strlen(text);
	ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
	close(fd);
	return path;
}

START_TEST(test_config_file)
{
	char *path = write_temp("; a comment\n"
	                        "max_frame = 2M\n"
	                        "[tileatomd]\n"
	                        "backend = cpu\n"
	                        "socket = /tmp/from-file.sock\n"
	                        "max_connections = 7\n");
	ta_config cfg;
	ta_config_init(&cfg);
	ta_error err = {0};
	ck_assert_int_eq(ta_config_load_file(&cfg, path, &err), TA_OK);
	ck_assert_uint_eq(cfg.max_frame, 2u * 1024u * 1024u);
	ck_assert_int_eq(cfg.backend, TA_BACKEND_CPU);
	ck_assert_str_eq(cfg.socket_path, "/tmp/from-file.sock");
	ck_assert_int_eq(cfg.max_connections, 7);
	ck_assert_str_eq(cfg.config_file, path);
	ta_config_free(&cfg);
	unlink(path);
	free(path);

	path = write_temp("backend = cpu\nworkers = lots\n");
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_load_file(&cfg, path, &err), TA_INVALID_ARGUMENT);
	char want[256];
	snprintf(want, sizeof(want), "%s:2: workers: 'lots' is not auto or a thread count (1..256)",
	         path);
	ck_assert_str_eq(err.msg, want);
	ta_config_free(&cfg);
	unlink(path);
	free(path);

	path = write_temp("[other]\nbackend = cpu\n");
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_load_file(&cfg, path, &err), TA_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(err.msg, ":2: unknown section [other]"));
	ta_config_free(&cfg);
	unlink(path);
	free(path);

	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_load_file(&cfg, "/nonexistent/tileatomd.conf", &err),
	                 TA_NOT_FOUND);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/tileatomd.conf"));
	ta_config_free(&cfg);
}
END_TEST

START_TEST(test_config_example_file)
{
	/* The shipped example loads and states the defaults. */
	ta_config cfg, def;
	ta_config_init(&cfg);
	ta_config_init(&def);
	ta_error err = {0};
	ck_assert_msg(ta_config_load_file(&cfg, TA_SRCDIR "/doc/tileatomd.conf.example", &err) ==
	                  TA_OK,
	              "%s", err.msg);
	ck_assert_int_eq(cfg.backend, def.backend);
	ck_assert_int_eq(cfg.workers, def.workers);
	ck_assert_int_eq(cfg.log_level, def.log_level);
	ck_assert_uint_eq(cfg.max_frame, def.max_frame);
	ck_assert_int_eq(cfg.max_connections, def.max_connections);
	ck_assert_uint_eq(cfg.max_tile_bytes, def.max_tile_bytes);
	ck_assert_uint_eq(cfg.max_total_bytes, def.max_total_bytes);
	ck_assert_int_eq(cfg.max_pending, def.max_pending);
	ck_assert_uint_eq(cfg.max_write_queue, def.max_write_queue);
	ck_assert_int_eq(cfg.shutdown_timeout, def.shutdown_timeout);
	ck_assert_ptr_null(cfg.socket_path);
	ta_config_free(&cfg);
}
END_TEST

START_TEST(test_config_args_override_file)
{
	char *path = write_temp("backend = cuda\nworkers = 2\nmax_frame = 2M\n");
	char *argv[] = {"tileatomd",
	                "--workers",
	                "6",
	                "--config",
	                path,
	                "--socket",
	                "/tmp/a.sock",
	                "--foreground",
	                "--max-frame",
	                "4096",
	                "--backend=cpu",
	                "--busy-poll",
	                "75",
	                NULL};
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
	ta_config cfg;
	ta_config_init(&cfg);
	ta_config_action action;
	ta_error err = {0};
	ck_assert_int_eq(ta_config_parse_args(&cfg, argc, argv, &action, &err), TA_OK);
	ck_assert_int_eq(action, TA_ACTION_RUN);
	ck_assert_int_eq(cfg.workers, 6);              /* flag over file */
	ck_assert_int_eq(cfg.backend, TA_BACKEND_CPU); /* flag over file */
	ck_assert_uint_eq(cfg.max_frame, 4096);
	ck_assert_str_eq(cfg.socket_path, "/tmp/a.sock");
	ck_assert(cfg.foreground);
	ck_assert_int_eq(cfg.busy_poll_us, 75);
	ta_config_free(&cfg);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_config_args_errors_and_actions)
{
	ta_config cfg;
	ta_config_action action;
	ta_error err = {0};

	char *a1[] = {"tileatomd", "--frobnicate", NULL};
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_parse_args(&cfg, 2, a1, &action, &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "unknown option --frobnicate");
	ta_config_free(&cfg);

	char *a2[] = {"tileatomd", "--workers", NULL};
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_parse_args(&cfg, 2, a2, &action, &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "option --workers needs a value");
	ta_config_free(&cfg);

	char *a3[] = {"tileatomd", "stray", NULL};
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_parse_args(&cfg, 2, a3, &action, &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "unexpected argument 'stray'");
	ta_config_free(&cfg);

	char *a4[] = {"tileatomd", "--max-connections", "0", NULL};
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_parse_args(&cfg, 3, a4, &action, &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "--max-connections: '0' is not a count (1..1000000)");
	ta_config_free(&cfg);

	char *a5[] = {"tileatomd", "--socket", "/x", "--help", NULL};
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_parse_args(&cfg, 4, a5, &action, &err), TA_OK);
	ck_assert_int_eq(action, TA_ACTION_HELP);
	ta_config_free(&cfg);

	char *a6[] = {"tileatomd", "-V", NULL};
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_parse_args(&cfg, 2, a6, &action, &err), TA_OK);
	ck_assert_int_eq(action, TA_ACTION_VERSION);
	ta_config_free(&cfg);

	char *a7[] = {"tileatomd", "--list-kernels", NULL};
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_parse_args(&cfg, 2, a7, &action, &err), TA_OK);
	ck_assert_int_eq(action, TA_ACTION_LIST_KERNELS);
	ta_config_free(&cfg);

	char *a8[] = {"tileatomd", "--config", "/nonexistent.conf", NULL};
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_parse_args(&cfg, 3, a8, &action, &err), TA_NOT_FOUND);
	ta_config_free(&cfg);
}
END_TEST

START_TEST(test_config_default_socket)
{
	ta_config cfg;
	ta_config_init(&cfg);
	ta_error err = {0};
	const char *old = getenv("XDG_RUNTIME_DIR");
	char *saved = old ? strdup(old) : NULL;
	setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
	ck_assert_int_eq(ta_config_finish(&cfg, &err), TA_OK);
	if (geteuid() == 0)
		ck_assert_str_eq(cfg.socket_path, "/run/tileatom/tileatomd.sock");
	else
		ck_assert_str_eq(cfg.socket_path, "/run/user/4242/tileatom/tileatomd.sock");
	ta_config_free(&cfg);
	/* An explicit socket is kept. */
	ta_config_init(&cfg);
	ck_assert_int_eq(ta_config_set(&cfg, "socket", "/tmp/s", &err), TA_OK);
	ck_assert_int_eq(ta_config_finish(&cfg, &err), TA_OK);
	ck_assert_str_eq(cfg.socket_path, "/tmp/s");
	ta_config_free(&cfg);
	if (saved) {
		setenv("XDG_RUNTIME_DIR", saved, 1);
		free(saved);
	} else {
		unsetenv("XDG_RUNTIME_DIR");
	}
}
END_TEST

START_TEST(test_log_levels)
{
	ck_assert_int_eq(ta_log_level_parse("err"), TA_LOG_ERR);
	ck_assert_int_eq(ta_log_level_parse("warning"), TA_LOG_WARNING);
	ck_assert_int_eq(ta_log_level_parse("notice"), TA_LOG_NOTICE);
	ck_assert_int_eq(ta_log_level_parse("INFO"), TA_LOG_INFO);
	ck_assert_int_eq(ta_log_level_parse("7"), TA_LOG_DEBUG);
	ck_assert_int_eq(ta_log_level_parse("loud"), -1);
	ta_log_set_level(TA_LOG_WARNING);
	ck_assert(ta_log_enabled(TA_LOG_ERR));
	ck_assert(ta_log_enabled(TA_LOG_WARNING));
	ck_assert(!ta_log_enabled(TA_LOG_NOTICE));
	ta_log_set_level(TA_LOG_NOTICE);
}
END_TEST

/* ---- registry ------------------------------------------------------------------------ */

/* The CPU backend shared by the registry and dispatch tests. */
static ta_backend *cpu_backend(void)
{
	ta_error err = {0};
	ta_backend *be = ta_cpu_backend_new(2, &err);
	ck_assert_msg(be != NULL, "cpu backend: %s", err.msg);
	return be;
}

/* A shape of rank 1 or 2. */
static ta_tile_shape shape_of(ta_dtype dt, int rank, int64_t d0, int64_t d1)
{
	ta_tile_shape s;
	memset(&s, 0, sizeof(s));
	s.dtype = dt;
	s.rank = rank;
	s.shape[0] = d0;
	s.shape[1] = d1;
	return s;
}

/* Creates and publishes a tile, dropping the caller's reference. */
static void create_published(ta_registry *reg, const char *name, ta_tile_shape s)
{
	ta_tile *t = NULL;
	ta_error err = {0};
	ck_assert_msg(ta_registry_create(reg, name, &s, &t, &err) == TA_OK, "%s", err.msg);
	ta_registry_publish(t);
	ta_tile_unref(t);
}

START_TEST(test_registry_basic)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	ta_registry *reg = ta_registry_new(be, 0, 0, &err);
	ck_assert_ptr_nonnull(reg);
	create_published(reg, "b", shape_of(TA_DTYPE_I32, 1, 10, 0));
	create_published(reg, "a", shape_of(TA_DTYPE_F64, 2, 3, 4));
	create_published(reg, "c.x-1_", shape_of(TA_DTYPE_U64, 1, 1, 0));

	ta_tile *t = NULL;
	ck_assert_int_eq(ta_registry_get(reg, "a", &t, &err), TA_OK);
	ck_assert_uint_eq(t->bytes, 96);
	ck_assert_int_eq(t->shape.rank, 2);
	ta_tile_unref(t);
	ck_assert_int_eq(ta_registry_get(reg, "zz", &t, &err), TA_NOT_FOUND);
	ck_assert_str_eq(err.msg, "no tile named 'zz'");
	ck_assert_ptr_null(t);

	ta_tile_shape s = shape_of(TA_DTYPE_I32, 1, 5, 0);
	ck_assert_int_eq(ta_registry_create(reg, "a", &s, &t, &err), TA_ALREADY_EXISTS);
	ck_assert_str_eq(err.msg, "tile 'a' already exists");

	ta_tile_info *infos = NULL;
	size_t n = 0;
	ck_assert_int_eq(ta_registry_list(reg, &infos, &n, &err), TA_OK);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(infos[0].name, "a");
	ck_assert_str_eq(infos[1].name, "b");
	ck_assert_str_eq(infos[2].name, "c.x-1_");
	ck_assert_uint_eq(infos[1].bytes, 40);
	free(infos);

	uint32_t tiles = 0;
	uint64_t bytes = 0;
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(tiles, 3);
	ck_assert_uint_eq(bytes,
	                  TILE_COST(96) + TILE_COST(40) + TILE_COST(8)); /* bookkeeping counted */

	ta_tile_info info;
	ck_assert_int_eq(ta_registry_remove(reg, "b", &info, &err), TA_OK);
	ck_assert_str_eq(info.name, "b");
	ck_assert_int_eq(ta_registry_remove(reg, "b", NULL, &err), TA_NOT_FOUND);
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(tiles, 2);
	ck_assert_uint_eq(bytes, TILE_COST(96) + TILE_COST(8));
	ta_registry_free(reg);
	ta_backend_destroy(be);
}
END_TEST

START_TEST(test_registry_many_tiles_grow)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	ta_registry *reg = ta_registry_new(be, 0, 0, &err);
	char name[32];
	for (int i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "t%03d", i);
		create_published(reg, name, shape_of(TA_DTYPE_I32, 1, 1, 0));
	}
	for (int i = 0; i < 500; i += 7) {
		ta_tile *t = NULL;
		snprintf(name, sizeof(name), "t%03d", i);
		ck_assert_int_eq(ta_registry_get(reg, name, &t, &err), TA_OK);
		ck_assert_str_eq(t->name, name);
		ta_tile_unref(t);
	}
	ta_tile_info *infos = NULL;
	size_t n = 0;
	ck_assert_int_eq(ta_registry_list(reg, &infos, &n, &err), TA_OK);
	ck_assert_uint_eq(n, 500);
	ck_assert_str_eq(infos[0].name, "t000");
	ck_assert_str_eq(infos[499].name, "t499");
	free(infos);
	ta_registry_free(reg);
	ta_backend_destroy(be);
}
END_TEST

START_TEST(test_registry_limits)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	/* the total counts each tile as the memory it takes (TILE_COST) */
	const uint64_t limit = TILE_COST(800) + TILE_COST(640);
	ta_registry *reg = ta_registry_new(be, 1000, limit, &err);
	ta_tile *t = NULL;
	ta_tile_shape s = shape_of(TA_DTYPE_I64, 1, 126, 0); /* 1008 bytes */
	ck_assert_int_eq(ta_registry_create(reg, "big", &s, &t, &err), TA_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(err.msg, "tile 'big' needs 1008 bytes, over the per-tile limit of "
	                          "1000 bytes (max_tile_bytes)");
	create_published(reg, "t1", shape_of(TA_DTYPE_I64, 1, 100, 0)); /* 800 */
	s = shape_of(TA_DTYPE_I64, 1, 88, 0);                           /* 704 */
	ck_assert_int_eq(ta_registry_create(reg, "t2", &s, &t, &err), TA_RESOURCE_EXHAUSTED);
	char want[256];
	snprintf(want, sizeof(want),
	         "tile 't2' needs %llu bytes (704 of elements, the rest allocator overhead and "
	         "bookkeeping) but %llu of the %llu bytes of tile memory allowed "
	         "(max_total_bytes) are in use",
	         (unsigned long long)TILE_COST(704), (unsigned long long)TILE_COST(800),
	         (unsigned long long)limit);
	ck_assert_str_eq(err.msg, want);
	s = shape_of(TA_DTYPE_I64, 1, 80, 0); /* 640: exactly the limit */
	ck_assert_int_eq(ta_registry_create(reg, "t2", &s, &t, &err), TA_OK);
	ta_registry_publish(t);
	ta_tile_unref(t);

	/* Destroy frees the budget. */
	ck_assert_int_eq(ta_registry_remove(reg, "t1", NULL, &err), TA_OK);
	s = shape_of(TA_DTYPE_I64, 1, 100, 0);
	ck_assert_int_eq(ta_registry_create(reg, "t3", &s, &t, &err), TA_OK);
	ta_registry_publish(t);
	ta_tile_unref(t);

	/* Bad names, dtypes, ranks, extents, overflow. */
	s = shape_of(TA_DTYPE_I32, 1, 1, 0);
	ck_assert_int_eq(ta_registry_create(reg, "", &s, &t, &err), TA_INVALID_ARGUMENT);
	ck_assert_int_eq(ta_registry_create(reg, "a b", &s, &t, &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg,
	                 "invalid tile name 'a b': use 1 to 64 characters of [A-Za-z0-9_.-]");
	ck_assert_int_eq(ta_registry_create(reg, "x\ty", &s, &t, &err), TA_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "'x?y'"));
	char longname[70];
	memset(longname, 'n', 65);
	longname[65] = '\0';
	ck_assert_int_eq(ta_registry_create(reg, longname, &s, &t, &err), TA_INVALID_ARGUMENT);
	s = shape_of(TA_DTYPE_BOOL, 1, 1, 0);
	ck_assert_int_eq(ta_registry_create(reg, "m", &s, &t, &err), TA_INVALID_ARGUMENT);
	s = shape_of(TA_DTYPE_I32, 1, 0, 0);
	ck_assert_int_eq(ta_registry_create(reg, "z", &s, &t, &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "tile 'z': extent 0 along axis 0 is not at least 1");
	s = shape_of(TA_DTYPE_I32, 0, 1, 0);
	ck_assert_int_eq(ta_registry_create(reg, "z", &s, &t, &err), TA_INVALID_ARGUMENT);
	s = shape_of(TA_DTYPE_I64, 2, INT64_C(1) << 40, INT64_C(1) << 40);
	ck_assert_int_eq(ta_registry_create(reg, "z", &s, &t, &err), TA_RESOURCE_EXHAUSTED);
	ta_registry_free(reg);
	ta_backend_destroy(be);
}
END_TEST

START_TEST(test_registry_refcount_and_pending)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	ta_registry *reg = ta_registry_new(be, 0, 0, &err);
	create_published(reg, "t", shape_of(TA_DTYPE_I32, 1, 256, 0));
	ta_tile *user = NULL;
	ck_assert_int_eq(ta_registry_get(reg, "t", &user, &err), TA_OK);
	/* Destroyed while in use: gone by name, memory still held and usable. */
	ck_assert_int_eq(ta_registry_remove(reg, "t", NULL, &err), TA_OK);
	ta_tile *again = NULL;
	ck_assert_int_eq(ta_registry_get(reg, "t", &again, &err), TA_NOT_FOUND);
	uint32_t tiles = 9;
	uint64_t bytes = 0;
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(tiles, 0);
	ck_assert_uint_eq(bytes, TILE_COST(1024));
	memset(user->mem, 0x5a, (size_t)user->bytes); /* still valid memory */
	/* The name is free again while the old memory lives. */
	create_published(reg, "t", shape_of(TA_DTYPE_I32, 1, 2, 0));
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(tiles, 1);
	ck_assert_uint_eq(bytes, TILE_COST(1024) + TILE_COST(8));
	ta_tile_unref(user); /* the last user frees */
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(bytes, TILE_COST(8));

	/* A pending tile is invisible but holds its name and bytes; discard frees both. */
	ta_tile *pending = NULL;
	ta_tile_shape s = shape_of(TA_DTYPE_F32, 1, 4, 0);
	ck_assert_int_eq(ta_registry_create(reg, "p", &s, &pending, &err), TA_OK);
	ck_assert_int_eq(ta_registry_get(reg, "p", &again, &err), TA_NOT_FOUND);
	ck_assert_int_eq(ta_registry_create(reg, "p", &s, &again, &err), TA_ALREADY_EXISTS);
	ck_assert_int_eq(ta_registry_remove(reg, "p", NULL, &err), TA_NOT_FOUND);
	ta_tile_info *infos = NULL;
	size_t n = 0;
	ck_assert_int_eq(ta_registry_list(reg, &infos, &n, &err), TA_OK);
	ck_assert_uint_eq(n, 1);
	free(infos);
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(tiles, 1);
	ck_assert_uint_eq(bytes, TILE_COST(8) + TILE_COST(16));
	ta_registry_discard(pending);
	ta_tile_unref(pending);
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(bytes, TILE_COST(8));
	ck_assert_int_eq(ta_registry_create(reg, "p", &s, &pending, &err), TA_OK);
	ta_registry_publish(pending);
	ta_tile_unref(pending);
	ck_assert_int_eq(ta_registry_get(reg, "p", &again, &err), TA_OK);
	ta_tile_unref(again);
	ta_registry_free(reg);
	ta_backend_destroy(be);
}
END_TEST

/* ---- dispatch ------------------------------------------------------------------------ */

/* Backend, registry and service of one dispatch test. */
typedef struct fixture {
	ta_backend *be;   /* CPU backend */
	ta_registry *reg; /* registry */
	ta_service svc;   /* service */
	bool close_after; /* close_after of the last reply */
} fixture;

/* Sets a fixture up with limits. */
static void fx_init(fixture *fx, uint32_t max_frame, uint64_t max_tile, uint64_t max_total)
{
	ta_error err = {0};
	fx->be = cpu_backend();
	fx->reg = ta_registry_new(fx->be, max_tile, max_total, &err);
	ck_assert_ptr_nonnull(fx->reg);
	ta_service_init(&fx->svc, fx->be, fx->reg, max_frame);
}

/* Tears a fixture down. */
static void fx_free(fixture *fx)
{
	ta_registry_free(fx->reg);
	ta_backend_destroy(fx->be);
}

/* Runs raw payload bytes through dispatch; returns the decoded response. */
static Tileatom__Response *call_raw(fixture *fx, const uint8_t *payload, size_t len)
{
	ta_reply reply;
	ta_dispatch_frame(&fx->svc, payload, len, &reply);
	ck_assert_ptr_nonnull(reply.frame);
	ck_assert_uint_eq(ta_frame_get_header(reply.frame), reply.len - TA_FRAME_HEADER);
	fx->close_after = reply.close_after;
	Tileatom__Response *resp = tileatom__response__unpack(NULL, reply.len - TA_FRAME_HEADER,
	                                                      reply.frame + TA_FRAME_HEADER);
	free(reply.frame);
	ck_assert_ptr_nonnull(resp);
	return resp;
}

/* Packs a request, runs it; returns the decoded response. */
static Tileatom__Response *call(fixture *fx, Tileatom__Request *req)
{
	size_t n = protobuf_c_message_get_packed_size(&req->base);
	uint8_t *buf = malloc(n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(protobuf_c_message_pack(&req->base, buf), n);
	Tileatom__Response *resp = call_raw(fx, buf, n);
	free(buf);
	ck_assert_uint_eq(resp->id, req->id);
	return resp;
}

/* Asserts a response status (and that the message names something when not OK). */
static void expect_status(const Tileatom__Response *resp, Tileatom__Status want)
{
	ck_assert_msg(resp->status == want, "status %d (%s), wanted %d", resp->status,
	              resp->message, want);
	if (want != TILEATOM__STATUS__OK)
		ck_assert_msg(strlen(resp->message) > 0, "error without a message");
}

/* Fills a wire Array. */
static void array_set(Tileatom__Array *a, Tileatom__DType dt, size_t rank, int64_t *shape,
                      void *data, size_t nbytes)
{
	tileatom__array__init(a);
	a->dtype = dt;
	a->n_shape = rank;
	a->shape = shape;
	a->data.data = data;
	a->data.len = nbytes;
}

/* create NAME dtype [d0] with an optional int32/int64/float fill given as raw bytes. */
static Tileatom__Response *do_create(fixture *fx, uint64_t id, const char *name, Tileatom__DType dt,
                                     size_t rank, int64_t *shape, void *fill, size_t fill_bytes)
{
	Tileatom__Array fa;
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = (char *)name;
	c.dtype = dt;
	c.n_shape = rank;
	c.shape = shape;
	if (fill) {
		array_set(&fa, dt, 0, NULL, fill, fill_bytes);
		c.fill = &fa;
	}
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	return call(fx, &req);
}

/* Reads a whole tile; returns the response (data body). */
static Tileatom__Response *do_read(fixture *fx, uint64_t id, const char *name)
{
	Tileatom__ReadRegionRequest r = TILEATOM__READ_REGION_REQUEST__INIT;
	r.tile = (char *)name;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_READ;
	req.read = &r;
	return call(fx, &req);
}

/* Reads a whole int32 tile into out (n elements expected). */
static void read_i32(fixture *fx, const char *name, int32_t *out, size_t n)
{
	Tileatom__Response *resp = do_read(fx, 999, name);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_DATA);
	ck_assert_int_eq(resp->data->dtype, TILEATOM__DTYPE__INT32);
	ck_assert_uint_eq(resp->data->data.len, n * 4);
	memcpy(out, resp->data->data.data, n * 4);
	tileatom__response__free_unpacked(resp, NULL);
}

START_TEST(test_dispatch_hello_ping)
{
	fixture fx;
	fx_init(&fx, TA_FRAME_DEFAULT_MAX, 0, 0);
	Tileatom__HelloRequest h = TILEATOM__HELLO_REQUEST__INIT;
	h.protocol_version = 1;
	h.client_name = (char *)"test";
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &h;
	Tileatom__Response *resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_HELLO);
	ck_assert_uint_eq(resp->hello->protocol_version, 1);
	ck_assert_str_eq(resp->hello->backend, "cpu");
	ck_assert_str_eq(resp->hello->server_version, PACKAGE_VERSION);
	tileatom__response__free_unpacked(resp, NULL);

	h.protocol_version = 2;
	req.id = 2;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__UNIMPLEMENTED);
	ck_assert_str_eq(resp->message,
	                 "protocol version 2 is not supported: this daemon speaks version 1");
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_HELLO);
	ck_assert_uint_eq(resp->hello->protocol_version, 1);
	tileatom__response__free_unpacked(resp, NULL);

	Tileatom__PingRequest p = TILEATOM__PING_REQUEST__INIT;
	req.id = 3;
	req.body_case = TILEATOM__REQUEST__BODY_PING;
	req.ping = &p;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_PING);
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert(!fx.close_after);
	fx_free(&fx);
}
END_TEST

START_TEST(test_dispatch_create_read_describe_list_destroy)
{
	fixture fx;
	fx_init(&fx, TA_FRAME_DEFAULT_MAX, 0, 0);
	int64_t shape[1] = {4};
	int32_t five = 5;
	Tileatom__Response *resp =
	    do_create(&fx, 10, "h", TILEATOM__DTYPE__INT32, 1, shape, &five, 4);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_TILE);
	ck_assert_str_eq(resp->tile->name, "h");
	ck_assert_int_eq(resp->tile->dtype, TILEATOM__DTYPE__INT32);
	ck_assert_uint_eq(resp->tile->n_shape, 1);
	ck_assert_int_eq(resp->tile->shape[0], 4);
	ck_assert_uint_eq(resp->tile->bytes, 16);
	tileatom__response__free_unpacked(resp, NULL);

	int32_t got[4];
	read_i32(&fx, "h", got, 4);
	ck_assert_int_eq(got[0], 5);
	ck_assert_int_eq(got[3], 5);

	resp = do_create(&fx, 11, "h", TILEATOM__DTYPE__INT32, 1, shape, NULL, 0);
	expect_status(resp, TILEATOM__STATUS__ALREADY_EXISTS);
	ck_assert_str_eq(resp->message, "tile 'h' already exists");
	tileatom__response__free_unpacked(resp, NULL);

	/* A fill of the wrong dtype is refused and leaves no tile behind. */
	int64_t fshape[2] = {2, 2};
	double fill = 1.5;
	Tileatom__Array fa;
	array_set(&fa, TILEATOM__DTYPE__FLOAT64, 0, NULL, &fill, 8);
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = (char *)"f";
	c.dtype = TILEATOM__DTYPE__FLOAT32;
	c.n_shape = 2;
	c.shape = fshape;
	c.fill = &fa;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 12;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(resp->message, "fill"));
	tileatom__response__free_unpacked(resp, NULL);
	float ffill = 1.5f;
	array_set(&fa, TILEATOM__DTYPE__FLOAT32, 0, NULL, &ffill, 4);
	resp = call(&fx, &req); /* the name is free again */
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->tile->bytes, 16);
	tileatom__response__free_unpacked(resp, NULL);

	/* No shape / bad dtype. */
	resp = do_create(&fx, 13, "g", TILEATOM__DTYPE__INT32, 0, NULL, NULL, 0);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	tileatom__response__free_unpacked(resp, NULL);
	resp = do_create(&fx, 14, "g", TILEATOM__DTYPE__BOOL, 1, shape, NULL, 0);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	tileatom__response__free_unpacked(resp, NULL);

	Tileatom__DescribeTileRequest d = TILEATOM__DESCRIBE_TILE_REQUEST__INIT;
	d.name = (char *)"f";
	req.id = 15;
	req.body_case = TILEATOM__REQUEST__BODY_DESCRIBE;
	req.describe = &d;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_str_eq(resp->tile->name, "f");
	ck_assert_int_eq(resp->tile->dtype, TILEATOM__DTYPE__FLOAT32);
	ck_assert_uint_eq(resp->tile->n_shape, 2);
	tileatom__response__free_unpacked(resp, NULL);

	Tileatom__ListTilesRequest l = TILEATOM__LIST_TILES_REQUEST__INIT;
	req.id = 16;
	req.body_case = TILEATOM__REQUEST__BODY_LIST;
	req.list = &l;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_LIST);
	ck_assert_uint_eq(resp->list->n_tiles, 2);
	ck_assert_str_eq(resp->list->tiles[0]->name, "f");
	ck_assert_str_eq(resp->list->tiles[1]->name, "h");
	ck_assert_uint_eq(resp->list->tiles[1]->shape[0], 4);
	tileatom__response__free_unpacked(resp, NULL);

	Tileatom__DestroyTileRequest x = TILEATOM__DESTROY_TILE_REQUEST__INIT;
	x.name = (char *)"h";
	req.id = 17;
	req.body_case = TILEATOM__REQUEST__BODY_DESTROY;
	req.destroy = &x;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__NOT_FOUND);
	ck_assert_str_eq(resp->message, "no tile named 'h'");
	tileatom__response__free_unpacked(resp, NULL);
	resp = do_read(&fx, 18, "h");
	expect_status(resp, TILEATOM__STATUS__NOT_FOUND);
	tileatom__response__free_unpacked(resp, NULL);
	fx_free(&fx);
}
END_TEST

/* Element-wise atomic request on an int32 tile; values / compare as int32 arrays or
 * scalars (count 0 = scalar). */
static Tileatom__Response *do_elementwise(fixture *fx, uint64_t id, const char *name,
                                          Tileatom__Op op, int64_t origin, int64_t extent,
                                          int32_t *values, size_t nvalues, int32_t *compare,
                                          size_t ncompare, bool want_old)
{
	int64_t vshape[1] = {(int64_t)nvalues}, cshape[1] = {(int64_t)ncompare};
	Tileatom__Array va, ca;
	Tileatom__Region region = TILEATOM__REGION__INIT;
	Tileatom__Options opt = TILEATOM__OPTIONS__INIT;
	Tileatom__ElementwiseAtomicRequest e = TILEATOM__ELEMENTWISE_ATOMIC_REQUEST__INIT;
	e.tile = (char *)name;
	e.op = op;
	if (extent > 0) {
		region.n_origin = 1;
		region.origin = &origin;
		region.n_shape = 1;
		region.shape = &extent;
		e.region = &region;
	}
	array_set(&va, TILEATOM__DTYPE__INT32, nvalues ? 1 : 0, vshape, values,
	          (nvalues ? nvalues : 1) * 4);
	e.values = &va;
	if (compare) {
		array_set(&ca, TILEATOM__DTYPE__INT32, ncompare ? 1 : 0, cshape, compare,
		          (ncompare ? ncompare : 1) * 4);
		e.compare = &ca;
	}
	opt.want_old = want_old;
	e.options = &opt;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_ELEMENTWISE;
	req.elementwise = &e;
	return call(fx, &req);
}

START_TEST(test_dispatch_elementwise_and_cas)
{
	fixture fx;
	fx_init(&fx, TA_FRAME_DEFAULT_MAX, 0, 0);
	int64_t shape[1] = {4};
	int32_t five = 5;
	Tileatom__Response *resp =
	    do_create(&fx, 1, "t", TILEATOM__DTYPE__INT32, 1, shape, &five, 4);
	tileatom__response__free_unpacked(resp, NULL);

	int32_t ten = 10;
	resp = do_elementwise(&fx, 2, "t", TILEATOM__OP__ADD, 1, 2, &ten, 0, NULL, 0, true);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_OP);
	ck_assert_uint_eq(resp->op->applied, 2);
	ck_assert_uint_eq(resp->op->skipped, 0);
	ck_assert_ptr_nonnull(resp->op->old);
	ck_assert_uint_eq(resp->op->old->n_shape, 1);
	ck_assert_int_eq(resp->op->old->shape[0], 2);
	ck_assert_uint_eq(resp->op->old->data.len, 8);
	int32_t old[4];
	memcpy(old, resp->op->old->data.data, 8);
	ck_assert_int_eq(old[0], 5);
	ck_assert_int_eq(old[1], 5);
	tileatom__response__free_unpacked(resp, NULL);
	int32_t got[4];
	read_i32(&fx, "t", got, 4);
	ck_assert_int_eq(got[0], 5);
	ck_assert_int_eq(got[1], 15);
	ck_assert_int_eq(got[2], 15);
	ck_assert_int_eq(got[3], 5);

	/* Without want_old: no old array. */
	int32_t vals[4] = {1, 2, 3, 4};
	resp = do_elementwise(&fx, 3, "t", TILEATOM__OP__SUB, 0, 0, vals, 4, NULL, 0, false);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_ptr_null(resp->op->old);
	ck_assert_uint_eq(resp->op->applied, 4);
	tileatom__response__free_unpacked(resp, NULL);
	read_i32(&fx, "t", got, 4); /* 4, 13, 12, 1 */
	ck_assert_int_eq(got[0], 4);
	ck_assert_int_eq(got[1], 13);
	ck_assert_int_eq(got[2], 12);
	ck_assert_int_eq(got[3], 1);

	/* CAS: expected [4, 0, 12, 0] -> 42 where equal. */
	int32_t expected[4] = {4, 0, 12, 0}, desired = 42;
	resp = do_elementwise(&fx, 4, "t", TILEATOM__OP__CAS, 0, 0, &desired, 0, expected, 4, true);
	expect_status(resp, TILEATOM__STATUS__OK);
	memcpy(old, resp->op->old->data.data, 16);
	ck_assert_int_eq(old[0], 4);
	ck_assert_int_eq(old[1], 13);
	ck_assert_int_eq(old[2], 12);
	ck_assert_int_eq(old[3], 1);
	tileatom__response__free_unpacked(resp, NULL);
	read_i32(&fx, "t", got, 4);
	ck_assert_int_eq(got[0], 42);
	ck_assert_int_eq(got[1], 13);
	ck_assert_int_eq(got[2], 42);
	ck_assert_int_eq(got[3], 1);

	/* Errors: missing op, region outside the tile, values of the wrong length. */
	resp = do_elementwise(&fx, 5, "t", TILEATOM__OP__OP_UNSPECIFIED, 0, 0, &ten, 0, NULL, 0,
	                      false);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(resp->message, "op"));
	tileatom__response__free_unpacked(resp, NULL);
	resp = do_elementwise(&fx, 6, "t", TILEATOM__OP__ADD, 3, 2, &ten, 0, NULL, 0, false);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	tileatom__response__free_unpacked(resp, NULL);
	resp = do_elementwise(&fx, 7, "t", TILEATOM__OP__ADD, 0, 0, vals, 3, NULL, 0, false);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	tileatom__response__free_unpacked(resp, NULL);
	resp = do_elementwise(&fx, 8, "nope", TILEATOM__OP__ADD, 0, 0, vals, 4, NULL, 0, false);
	expect_status(resp, TILEATOM__STATUS__NOT_FOUND);
	ck_assert_str_eq(resp->message, "no tile named 'nope'");
	tileatom__response__free_unpacked(resp, NULL);
	read_i32(&fx, "t", got, 4); /* unchanged by the failures */
	ck_assert_int_eq(got[0], 42);
	ck_assert_int_eq(got[1], 13);
	ck_assert_int_eq(got[2], 42);
	ck_assert_int_eq(got[3], 1);
	fx_free(&fx);
}
END_TEST

START_TEST(test_dispatch_scatter_indexed)
{
	fixture fx;
	fx_init(&fx, TA_FRAME_DEFAULT_MAX, 0, 0);
	int64_t shape[1] = {3};
	Tileatom__Response *resp =
	    do_create(&fx, 1, "s", TILEATOM__DTYPE__INT32, 1, shape, NULL, 0);
	tileatom__response__free_unpacked(resp, NULL);

	/* scatter_add_ along dim 0 with duplicate indices: [0, 2, 0, 0] += 1 -> [3, 0, 1]. */
	int64_t idx[4] = {0, 2, 0, 0}, ishape[1] = {4};
	int32_t one = 1;
	Tileatom__Array ia, va;
	array_set(&ia, TILEATOM__DTYPE__INT64, 1, ishape, idx, sizeof(idx));
	array_set(&va, TILEATOM__DTYPE__INT32, 0, NULL, &one, 4);
	Tileatom__ScatterAddr sa = TILEATOM__SCATTER_ADDR__INIT;
	sa.dim = 0;
	sa.indices = &ia;
	Tileatom__ScatterAtomicRequest s = TILEATOM__SCATTER_ATOMIC_REQUEST__INIT;
	s.tile = (char *)"s";
	s.op = TILEATOM__OP__ADD;
	s.addr = &sa;
	s.values = &va;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 2;
	req.body_case = TILEATOM__REQUEST__BODY_SCATTER;
	req.scatter = &s;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, 4);
	tileatom__response__free_unpacked(resp, NULL);
	int32_t got[4];
	read_i32(&fx, "s", got, 3);
	ck_assert_int_eq(got[0], 3);
	ck_assert_int_eq(got[1], 0);
	ck_assert_int_eq(got[2], 1);

	/* exch is not a scatter op. */
	s.op = TILEATOM__OP__EXCH;
	req.id = 3;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	tileatom__response__free_unpacked(resp, NULL);
	/* No addressing at all. */
	s.op = TILEATOM__OP__ADD;
	s.addr = NULL;
	req.id = 4;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_str_eq(resp->message, "scatter addressing needs dim and indices");
	tileatom__response__free_unpacked(resp, NULL);

	/* cuTile's atomic_cas example: [0,1,0,1], cas 0 -> 42 at 0..3: old [0,1,0,1], tile
	 * [42,1,42,1]. */
	int64_t shape4[1] = {4};
	resp = do_create(&fx, 5, "c", TILEATOM__DTYPE__INT32, 1, shape4, NULL, 0);
	tileatom__response__free_unpacked(resp, NULL);
	int32_t init[4] = {0, 1, 0, 1};
	Tileatom__Array wa;
	array_set(&wa, TILEATOM__DTYPE__INT32, 1, shape4, init, sizeof(init));
	Tileatom__WriteRegionRequest w = TILEATOM__WRITE_REGION_REQUEST__INIT;
	w.tile = (char *)"c";
	w.values = &wa;
	req.id = 6;
	req.body_case = TILEATOM__REQUEST__BODY_WRITE;
	req.write = &w;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, 4);
	tileatom__response__free_unpacked(resp, NULL);

	int32_t cidx[4] = {0, 1, 2, 3}, zero = 0, ft = 42;
	Tileatom__Array cia, cva, cca;
	Tileatom__Array *indices[1] = {&cia};
	array_set(&cia, TILEATOM__DTYPE__INT32, 1, shape4, cidx, sizeof(cidx));
	array_set(&cva, TILEATOM__DTYPE__INT32, 0, NULL, &ft, 4);
	array_set(&cca, TILEATOM__DTYPE__INT32, 0, NULL, &zero, 4);
	Tileatom__IndexedAddr xa = TILEATOM__INDEXED_ADDR__INIT;
	xa.n_indices = 1;
	xa.indices = indices;
	Tileatom__Options opt = TILEATOM__OPTIONS__INIT;
	opt.want_old = true;
	Tileatom__IndexedAtomicRequest x = TILEATOM__INDEXED_ATOMIC_REQUEST__INIT;
	x.tile = (char *)"c";
	x.op = TILEATOM__OP__CAS;
	x.addr = &xa;
	x.values = &cva;
	x.compare = &cca;
	x.options = &opt;
	req.id = 7;
	req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
	req.indexed = &x;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	int32_t old[4];
	ck_assert_uint_eq(resp->op->old->data.len, 16);
	memcpy(old, resp->op->old->data.data, 16);
	ck_assert_int_eq(old[0], 0);
	ck_assert_int_eq(old[1], 1);
	ck_assert_int_eq(old[2], 0);
	ck_assert_int_eq(old[3], 1);
	tileatom__response__free_unpacked(resp, NULL);
	read_i32(&fx, "c", got, 4);
	ck_assert_int_eq(got[0], 42);
	ck_assert_int_eq(got[1], 1);
	ck_assert_int_eq(got[2], 42);
	ck_assert_int_eq(got[3], 1);

	/* Out of range with bounds checking off: rejected, nothing applied. */
	cidx[3] = 4;
	x.op = TILEATOM__OP__ADD;
	x.compare = NULL;
	opt.no_bounds_check = true;
	req.id = 8;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OUT_OF_RANGE);
	tileatom__response__free_unpacked(resp, NULL);
	/* With it on: skipped and counted. */
	opt.no_bounds_check = false;
	req.id = 9;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->skipped, 1);
	ck_assert_uint_eq(resp->op->applied, 3);
	tileatom__response__free_unpacked(resp, NULL);
	read_i32(&fx, "c", got, 4);
	ck_assert_int_eq(got[0], 84);
	ck_assert_int_eq(got[1], 43);
	ck_assert_int_eq(got[2], 84);
	ck_assert_int_eq(got[3], 1);
	fx_free(&fx);
}
END_TEST

START_TEST(test_dispatch_memory_ops)
{
	fixture fx;
	fx_init(&fx, TA_FRAME_DEFAULT_MAX, 0, 0);
	int64_t shape[1] = {4};
	Tileatom__Response *resp =
	    do_create(&fx, 1, "f", TILEATOM__DTYPE__FLOAT32, 1, shape, NULL, 0);
	tileatom__response__free_unpacked(resp, NULL);

	/* atomic_store (release) of [1, 2, 3, 4] over the whole tile via addr.region. */
	float vals[4] = {1, 2, 3, 4};
	Tileatom__Array va;
	array_set(&va, TILEATOM__DTYPE__FLOAT32, 1, shape, vals, sizeof(vals));
	Tileatom__Options opt = TILEATOM__OPTIONS__INIT;
	opt.sem = TILEATOM__SEM__RELEASE;
	Tileatom__AtomicStoreRequest st = TILEATOM__ATOMIC_STORE_REQUEST__INIT;
	st.tile = (char *)"f";
	st.values = &va;
	st.options = &opt;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 2;
	req.body_case = TILEATOM__REQUEST__BODY_ATOMIC_STORE;
	req.atomic_store = &st;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, 4);
	tileatom__response__free_unpacked(resp, NULL);
	/* A store with acquire is illegal. */
	opt.sem = TILEATOM__SEM__ACQUIRE;
	req.id = 3;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(resp->message, "acquire"));
	tileatom__response__free_unpacked(resp, NULL);

	/* gather: indices [3, 0, 9], mask [1, 0, 1], padding -1 -> [4, -1, -1], one skipped. */
	int64_t gidx[3] = {3, 0, 9}, gshape[1] = {3};
	uint8_t mask[3] = {1, 0, 1};
	float pad = -1;
	Tileatom__Array gia, gma, gpa;
	Tileatom__Array *gind[1] = {&gia};
	array_set(&gia, TILEATOM__DTYPE__INT64, 1, gshape, gidx, sizeof(gidx));
	array_set(&gma, TILEATOM__DTYPE__BOOL, 1, gshape, mask, sizeof(mask));
	array_set(&gpa, TILEATOM__DTYPE__FLOAT32, 0, NULL, &pad, 4);
	Tileatom__IndexedAddr ga = TILEATOM__INDEXED_ADDR__INIT;
	ga.n_indices = 1;
	ga.indices = gind;
	Tileatom__Addressing addr = TILEATOM__ADDRESSING__INIT;
	addr.form_case = TILEATOM__ADDRESSING__FORM_INDEXED;
	addr.indexed = &ga;
	Tileatom__Options gopt = TILEATOM__OPTIONS__INIT;
	gopt.mask = &gma;
	Tileatom__GatherRequest g = TILEATOM__GATHER_REQUEST__INIT;
	g.tile = (char *)"f";
	g.addr = &addr;
	g.padding = &gpa;
	g.options = &gopt;
	req.id = 4;
	req.body_case = TILEATOM__REQUEST__BODY_GATHER;
	req.gather = &g;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, 1);
	ck_assert_uint_eq(resp->op->skipped, 1);
	ck_assert_int_eq(resp->op->old->dtype, TILEATOM__DTYPE__FLOAT32);
	ck_assert_uint_eq(resp->op->old->data.len, 12);
	float out[3];
	memcpy(out, resp->op->old->data.data, 12);
	ck_assert(out[0] == 4.0f);
	ck_assert(out[1] == -1.0f);
	ck_assert(out[2] == -1.0f);
	tileatom__response__free_unpacked(resp, NULL);

	/* atomic_load (acquire) of the window [1, 3). */
	int64_t wo = 1, ws = 2;
	Tileatom__Region window = TILEATOM__REGION__INIT;
	window.n_origin = 1;
	window.origin = &wo;
	window.n_shape = 1;
	window.shape = &ws;
	Tileatom__Options lopt = TILEATOM__OPTIONS__INIT;
	lopt.sem = TILEATOM__SEM__ACQUIRE;
	Tileatom__AtomicLoadRequest ld = TILEATOM__ATOMIC_LOAD_REQUEST__INIT;
	ld.tile = (char *)"f";
	ld.window = &window;
	ld.options = &lopt;
	req.id = 5;
	req.body_case = TILEATOM__REQUEST__BODY_ATOMIC_LOAD;
	req.atomic_load = &ld;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->old->data.len, 8);
	memcpy(out, resp->op->old->data.data, 8);
	ck_assert(out[0] == 2.0f);
	ck_assert(out[1] == 3.0f);
	tileatom__response__free_unpacked(resp, NULL);

	/* Region both as window and as addr.region: refused. */
	Tileatom__Addressing raddr = TILEATOM__ADDRESSING__INIT;
	raddr.form_case = TILEATOM__ADDRESSING__FORM_REGION;
	raddr.region = &window;
	ld.addr = &raddr;
	req.id = 6;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_str_eq(resp->message,
	                 "give the region either as window or as addr.region, not both");
	tileatom__response__free_unpacked(resp, NULL);

	/* scatter_store with flat offsets [3, 0] of [9, 8]. */
	int64_t sidx[2] = {3, 0}, sshape[1] = {2};
	float svals[2] = {9, 8};
	Tileatom__Array sia, sva;
	Tileatom__Array *sind[1] = {&sia};
	array_set(&sia, TILEATOM__DTYPE__INT64, 1, sshape, sidx, sizeof(sidx));
	array_set(&sva, TILEATOM__DTYPE__FLOAT32, 1, sshape, svals, sizeof(svals));
	Tileatom__IndexedAddr fa = TILEATOM__INDEXED_ADDR__INIT;
	fa.n_indices = 1;
	fa.indices = sind;
	fa.flat = true;
	Tileatom__Addressing saddr = TILEATOM__ADDRESSING__INIT;
	saddr.form_case = TILEATOM__ADDRESSING__FORM_INDEXED;
	saddr.indexed = &fa;
	Tileatom__ScatterStoreRequest ss = TILEATOM__SCATTER_STORE_REQUEST__INIT;
	ss.tile = (char *)"f";
	ss.addr = &saddr;
	ss.values = &sva;
	req.id = 7;
	req.body_case = TILEATOM__REQUEST__BODY_SCATTER_STORE;
	req.scatter_store = &ss;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, 2);
	tileatom__response__free_unpacked(resp, NULL);
	resp = do_read(&fx, 8, "f");
	expect_status(resp, TILEATOM__STATUS__OK);
	memcpy(out, resp->data->data.data, 12);
	float last;
	memcpy(&last, resp->data->data.data + 12, 4);
	ck_assert(out[0] == 8.0f && out[1] == 2.0f && out[2] == 3.0f && last == 9.0f);
	tileatom__response__free_unpacked(resp, NULL);
	fx_free(&fx);
}
END_TEST

START_TEST(test_dispatch_limits_and_malformed)
{
	fixture fx;
	fx_init(&fx, 1024, 4000, 0);
	int64_t shape[1] = {1000};
	Tileatom__Response *resp =
	    do_create(&fx, 1, "t", TILEATOM__DTYPE__INT32, 1, shape, NULL, 0);
	expect_status(resp, TILEATOM__STATUS__OK);
	tileatom__response__free_unpacked(resp, NULL);
	int64_t big[1] = {1001};
	resp = do_create(&fx, 2, "u", TILEATOM__DTYPE__INT32, 1, big, NULL, 0);
	expect_status(resp, TILEATOM__STATUS__RESOURCE_EXHAUSTED);
	ck_assert_str_eq(resp->message, "tile 'u' needs 4004 bytes, over the per-tile limit of "
	                                "4000 bytes (max_tile_bytes)");
	tileatom__response__free_unpacked(resp, NULL);

	/* Reading 4000 bytes does not fit a 1024-byte frame. */
	resp = do_read(&fx, 3, "t");
	expect_status(resp, TILEATOM__STATUS__RESOURCE_EXHAUSTED);
	ck_assert_ptr_nonnull(strstr(resp->message, "max_frame"));
	tileatom__response__free_unpacked(resp, NULL);
	/* An add with want_old over 1000 elements is refused before it is applied. */
	int32_t one = 1;
	resp = do_elementwise(&fx, 4, "t", TILEATOM__OP__ADD, 0, 0, &one, 0, NULL, 0, true);
	expect_status(resp, TILEATOM__STATUS__RESOURCE_EXHAUSTED);
	ck_assert_ptr_nonnull(strstr(resp->message, "nothing was applied"));
	tileatom__response__free_unpacked(resp, NULL);
	/* Without want_old it is fine; a small region read shows one add, not two. */
	resp = do_elementwise(&fx, 5, "t", TILEATOM__OP__ADD, 0, 0, &one, 0, NULL, 0, false);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->applied, 1000);
	tileatom__response__free_unpacked(resp, NULL);
	int64_t ro = 990, rs = 10;
	Tileatom__Region region = TILEATOM__REGION__INIT;
	region.n_origin = 1;
	region.origin = &ro;
	region.n_shape = 1;
	region.shape = &rs;
	Tileatom__ReadRegionRequest r = TILEATOM__READ_REGION_REQUEST__INIT;
	r.tile = (char *)"t";
	r.region = &region;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 6;
	req.body_case = TILEATOM__REQUEST__BODY_READ;
	req.read = &r;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->data->data.len, 40);
	int32_t got[10];
	memcpy(got, resp->data->data.data, 40);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(got[i], 1);
	ck_assert_int_eq(resp->data->shape[0], 10);
	tileatom__response__free_unpacked(resp, NULL);
	/* Origin alone reaches to the end of the tile. */
	region.n_shape = 0;
	ro = 995;
	req.id = 7;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->data->data.len, 20);
	tileatom__response__free_unpacked(resp, NULL);

	/* Malformed bytes: id 0, INVALID_ARGUMENT, close the connection. */
	static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x01};
	resp = call_raw(&fx, junk, sizeof(junk));
	ck_assert_uint_eq(resp->id, 0);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(resp->message, "malformed request"));
	ck_assert(fx.close_after);
	tileatom__response__free_unpacked(resp, NULL);
	/* An empty request: no body, but the connection stays. */
	resp = call_raw(&fx, junk, 0);
	expect_status(resp, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert(!fx.close_after);
	tileatom__response__free_unpacked(resp, NULL);

	/* stats counts all of the above. */
	Tileatom__StatsRequest s = TILEATOM__STATS_REQUEST__INIT;
	req.id = 8;
	req.body_case = TILEATOM__REQUEST__BODY_STATS;
	req.stats = &s;
	resp = call(&fx, &req);
	expect_status(resp, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_STATS);
	ck_assert_str_eq(resp->stats->backend, "cpu");
	ck_assert_uint_eq(resp->stats->tiles, 1);
	ck_assert_uint_eq(resp->stats->tile_bytes, TILE_COST(4000));
	ck_assert_uint_eq(resp->stats->requests, 10);
	ck_assert_uint_eq(resp->stats->errors, 5);
	ck_assert_uint_eq(resp->stats->elements, 1000 + 10 + 5);
	tileatom__response__free_unpacked(resp, NULL);
	fx_free(&fx);
}
END_TEST

/* ---- notify -------------------------------------------------------------------------- */

START_TEST(test_notify)
{
	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(ta_notify("READY=1"), 0);

	char path[64];
	snprintf(path, sizeof(path), "/tmp/check_daemon_notify_%d", (int)getpid());
	unlink(path);
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un addr;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	strcpy(addr.sun_path, path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	ck_assert_int_eq(ta_notify("READY=1"), 1);
	char buf[64];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
	ck_assert_int_eq(n, 7);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "READY=1");
	close(fd);
	unlink(path);

	/* Abstract namespace: '@' stands for the leading NUL. */
	char name[64];
	snprintf(name, sizeof(name), "@check_daemon_notify_%d", (int)getpid());
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	memcpy(addr.sun_path + 1, name + 1, strlen(name) - 1);
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, alen), 0);
	setenv("NOTIFY_SOCKET", name, 1);
	ck_assert_int_eq(ta_notify("STOPPING=1"), 1);
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	ck_assert_int_eq(n, 10);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "STOPPING=1");
	close(fd);

	setenv("NOTIFY_SOCKET", "relative/path", 1);
	ck_assert_int_lt(ta_notify("READY=1"), 0);
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

/* ---- executor ------------------------------------------------------------------------ */

/* One executor test job. */
typedef struct test_job {
	ta_job job;            /* executor job */
	int value;             /* input */
	int result;            /* value * 2, computed on a worker */
	pthread_t worker;      /* thread work ran on */
	int *done_count;       /* incremented by done */
	long *sum;             /* accumulates results in done */
	pthread_t loop_thread; /* the loop thread */
	bool *ok;              /* cleared when done runs elsewhere or work ran on the loop */
} test_job;

/* Worker side. */
static void test_work(ta_job *job)
{
	test_job *t = (test_job *)job;
	t->worker = pthread_self();
	t->result = t->value * 2;
}

/* Loop side. */
static void test_done(ta_job *job)
{
	test_job *t = (test_job *)job;
	if (!pthread_equal(pthread_self(), t->loop_thread) ||
	    pthread_equal(t->worker, t->loop_thread))
		*t->ok = false;
	(*t->done_count)++;
	*t->sum += t->result;
}

/* Sets up job t of value i, whose done callback counts into done and sum and clears ok
 * when it runs off the calling (loop) thread. */
static void test_job_init(test_job *t, int i, int *done, long *sum, bool *ok)
{
	t->job.done = test_done;
	t->value = i;
	t->done_count = done;
	t->sum = sum;
	t->loop_thread = pthread_self();
	t->ok = ok;
}

/* Counts executor close callbacks. */
static int executor_closed;

/* Executor close callback. */
static void on_executor_closed(ta_executor *ex)
{
	(void)ex;
	executor_closed++;
}

/* Idle callback: stops the executor once every job is done. */
static void stop_when_done(uv_idle_t *idle)
{
	ta_executor *ex = idle->data;
	if (ta_executor_running(ex) == 0) {
		uv_idle_stop(idle);
		uv_close((uv_handle_t *)idle, NULL);
		ta_executor_stop(ex, on_executor_closed);
	}
}

START_TEST(test_executor)
{
	uv_loop_t loop;
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ta_executor ex;
	ck_assert_int_eq(ta_executor_init(&ex, &loop, 3), 0);
	enum { N = 500 };
	test_job *jobs = calloc(N, sizeof(*jobs));
	int done = 0;
	long sum = 0;
	bool ok = true;
	for (int i = 0; i < N; i++) {
		test_job_init(&jobs[i], i, &done, &sum, &ok);
		jobs[i].job.work = test_work;
		ta_executor_submit(&ex, &jobs[i].job);
	}
	ck_assert_int_eq(ta_executor_running(&ex), N);
	uv_idle_t idle;
	uv_idle_init(&loop, &idle);
	idle.data = &ex;
	uv_idle_start(&idle, stop_when_done);
	executor_closed = 0;
	ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
	ck_assert_int_eq(done, N);
	ck_assert_int_eq(sum, (long)N * (N - 1)); /* sum of 2i */
	ck_assert(ok);
	ck_assert_int_eq(executor_closed, 1);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	free(jobs);
}
END_TEST

/* Stops ex (its close callback counted once) and closes its loop, which nothing else holds. */
static void stop_and_close(ta_executor *ex, uv_loop_t *loop)
{
	executor_closed = 0;
	ta_executor_stop(ex, on_executor_closed);
	ck_assert_int_eq(uv_run(loop, UV_RUN_DEFAULT), 0);
	ck_assert_int_eq(executor_closed, 1);
	ck_assert_int_eq(uv_loop_close(loop), 0);
}

/* Marks n jobs (numbered 0..n-1, counting into done, sum and ok) as worked outside the
 * executor with port: ta_executor_expect each. */
static void expect_jobs(ta_executor_port *port, test_job *jobs, int n, int *done, long *sum,
                        bool *ok)
{
	for (int i = 0; i < n; i++) {
		test_job_init(&jobs[i], i, done, sum, ok);
		ta_executor_expect(port, &jobs[i].job);
	}
}

/* Jobs worked outside the executor (a backend's apply_async), completed by a thread of
 * the test: after delay_us, each in turn. */
typedef struct {
	test_job *jobs;    /* the jobs to complete */
	int n;             /* how many */
	unsigned delay_us; /* the wait before the first completion */
} outside_work;

/* Set by the completing thread just before its first completion. */
static atomic_bool completing;
/* What a repeating timer saw of the port before the first completion: polling, or not. */
static bool seen_polling, seen_sleeping;

/* The backend's thread: completes every job after the delay. */
static void *complete_outside(void *arg)
{
	outside_work *w = arg;
	usleep(w->delay_us);
	atomic_store(&completing, true);
	for (int i = 0; i < w->n; i++) {
		test_work(&w->jobs[i].job);
		ta_executor_complete(&w->jobs[i].job);
	}
	return NULL;
}

/* Timer callback (every 10 ms): notes whether the port polls, until completions begin. */
static void note_polling(uv_timer_t *timer)
{
	ta_executor_port *port = timer->data;
	if (atomic_load(&completing))
		return;
	if (port->polling && uv_is_active((uv_handle_t *)&port->poll_idle))
		seen_polling = true;
	else
		seen_sleeping = true;
}

/* Runs N expected jobs on a port polling poll_us, completed by another thread after
 * delay_us; checks that each done callback runs once on the loop thread and that the port
 * polls no more once they are done. The timer's notes are in seen_polling and
 * seen_sleeping. */
static void run_expected(unsigned poll_us, unsigned delay_us)
{
	enum { N = 64 };
	uv_loop_t loop;
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ta_executor ex;
	ck_assert_int_eq(ta_executor_init(&ex, &loop, 1), 0);
	ta_executor_port_poll(&ex.main, poll_us);
	test_job *jobs = calloc(N, sizeof(*jobs));
	ck_assert_ptr_nonnull(jobs);
	int done = 0;
	long sum = 0;
	bool ok = true;
	expect_jobs(&ex.main, jobs, N, &done, &sum, &ok);
	ck_assert_int_eq(ex.main.expected, N);
	ck_assert(ex.main.polling == (poll_us > 0));
	ck_assert(uv_is_active((uv_handle_t *)&ex.main.poll_idle) == (poll_us > 0));
	uv_timer_t timer;
	ck_assert_int_eq(uv_timer_init(&loop, &timer), 0);
	timer.data = &ex.main;
	ck_assert_int_eq(uv_timer_start(&timer, note_polling, 10, 10), 0);
	seen_polling = seen_sleeping = false;
	atomic_store(&completing, false);
	outside_work w = {jobs, N, delay_us};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, complete_outside, &w), 0);
	while (done < N) /* the async handle keeps the loop alive: run until all are done */
		ck_assert_int_ge(uv_run(&loop, UV_RUN_ONCE), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(done, N);
	ck_assert_int_eq(sum, (long)N * (N - 1));
	ck_assert(ok);
	ck_assert_int_eq(ex.main.expected, 0);
	ck_assert_int_eq(ta_executor_running(&ex), 0);
	uv_run(&loop, UV_RUN_NOWAIT); /* the turn after the last completion ends the poll */
	ck_assert(!ex.main.polling);
	ck_assert(!uv_is_active((uv_handle_t *)&ex.main.poll_idle));
	uv_close((uv_handle_t *)&timer, NULL);
	stop_and_close(&ex, &loop);
	free(jobs);
}

START_TEST(test_executor_expected_poll)
{
	/* a polling port: completions from another thread run on the loop (woken or not) */
	run_expected(1000000, 0);
	/* completions 300 ms late: a port polling 100 s polls on every tick before them */
	run_expected(100000000, 300000);
	ck_assert(seen_polling && !seen_sleeping);
	/* one polling 2 ms stops and sleeps; its loop is woken for them */
	run_expected(2000, 300000);
	ck_assert(seen_sleeping);
	/* one that never polls, too */
	run_expected(0, 300000);
	ck_assert(seen_sleeping && !seen_polling);
}
END_TEST

/* A backend whose asynchronous work runs in its caller's polls (a lane): the pump completes
 * one job a turn, on the loop's thread, then still reports work out for extra turns. */
typedef struct {
	test_job *jobs; /* the jobs it completes, in order */
	int n;          /* how many */
	int next;       /* the next to complete */
	int extra;      /* turns it still reports work out once all are completed */
	int calls;      /* pump calls */
	pthread_t loop; /* the loop's thread (every call must be on it) */
	bool off_loop;  /* a call came from another thread */
} lane_pump;

/* The pump (ta_executor_port_pump): true while work is out. */
static bool pump_lane(void *arg)
{
	lane_pump *p = arg;
	p->calls++;
	if (!pthread_equal(pthread_self(), p->loop))
		p->off_loop = true;
	if (p->next < p->n) { /* worked here, on the loop (test_work would name a worker) */
		p->jobs[p->next].result = p->jobs[p->next].value * 2;
		ta_executor_complete(&p->jobs[p->next++].job);
		return true;
	}
	return p->extra-- > 0;
}

START_TEST(test_executor_pump)
{
	/* a port with a pump polls while its jobs are out even where it would not poll
	 * (ta_executor_port_poll 0), calls the pump on every turn on the loop's thread, runs
	 * the done callbacks the pump's completions queue, and stops polling only once the
	 * pump has nothing out and no job is left */
	enum { N = 32, EXTRA = 5 };
	uv_loop_t loop;
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ta_executor ex;
	ck_assert_int_eq(ta_executor_init(&ex, &loop, 1), 0);
	ta_executor_port_poll(&ex.main, 0);
	test_job *jobs = calloc(N, sizeof(*jobs));
	ck_assert_ptr_nonnull(jobs);
	lane_pump pump = {jobs, N, 0, EXTRA, 0, pthread_self(), false};
	ta_executor_port_pump(&ex.main, pump_lane, &pump);
	int done = 0;
	long sum = 0;
	bool ok = true;
	expect_jobs(&ex.main, jobs, N, &done, &sum, &ok);
	ck_assert(ex.main.polling);
	ck_assert(uv_is_active((uv_handle_t *)&ex.main.poll_idle));
	while (done < N) /* the idle handle turns the loop without sleeping */
		ck_assert_int_ge(uv_run(&loop, UV_RUN_ONCE), 0);
	ck_assert_int_eq(sum, (long)N * (N - 1));
	ck_assert(ok);
	ck_assert_int_eq(ex.main.expected, 0);
	for (int i = 0; i < EXTRA; i++) { /* the pump still has work out: the port polls on */
		ck_assert(ex.main.polling);
		uv_run(&loop, UV_RUN_NOWAIT);
	}
	uv_run(&loop, UV_RUN_NOWAIT); /* the turn the pump reports nothing out ends the poll */
	ck_assert(!ex.main.polling);
	ck_assert(!uv_is_active((uv_handle_t *)&ex.main.poll_idle));
	ck_assert_int_eq(pump.calls, N + EXTRA + 1);
	ck_assert(!pump.off_loop);
	stop_and_close(&ex, &loop);
	free(jobs);
}
END_TEST

/* The suites. */
static Suite *daemon_suite(void)
{
	Suite *s = suite_create("daemon");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, test_parse_size);
	tcase_add_test(tc, test_config_defaults_and_set);
	tcase_add_test(tc, test_config_file);
	tcase_add_test(tc, test_config_example_file);
	tcase_add_test(tc, test_config_args_override_file);
	tcase_add_test(tc, test_config_args_errors_and_actions);
	tcase_add_test(tc, test_config_default_socket);
	tcase_add_test(tc, test_log_levels);
	suite_add_tcase(s, tc);
	tc = tcase_create("registry");
	tcase_add_test(tc, test_registry_basic);
	tcase_add_test(tc, test_registry_many_tiles_grow);
	tcase_add_test(tc, test_registry_limits);
	tcase_add_test(tc, test_registry_refcount_and_pending);
	suite_add_tcase(s, tc);
	tc = tcase_create("dispatch");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_dispatch_hello_ping);
	tcase_add_test(tc, test_dispatch_create_read_describe_list_destroy);
	tcase_add_test(tc, test_dispatch_elementwise_and_cas);
	tcase_add_test(tc, test_dispatch_scatter_indexed);
	tcase_add_test(tc, test_dispatch_memory_ops);
	tcase_add_test(tc, test_dispatch_limits_and_malformed);
	suite_add_tcase(s, tc);
	tc = tcase_create("notify_executor");
	tcase_add_test(tc, test_notify);
	tcase_add_test(tc, test_executor);
	tcase_add_test(tc, test_executor_expected_poll);
	tcase_add_test(tc, test_executor_pump);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(daemon_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
