/* conf.h: tileatomd's settings. The table daemon/ta_conf.def names every key once, with
 * its type, default, bounds and help; from it conf.c reads the INI file (`key = value`,
 * optionally under a [tileatomd] section) and the command line (`--key-with-dashes VALUE`):
 * both go through ta_config_set, so that a value is checked the same way wherever it
 * comes from. Command-line flags override the file. */
#ifndef TA_DAEMON_CONF_H
#define TA_DAEMON_CONF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ta_types.h"

/* Which backend the daemon runs on. */
typedef enum ta_backend_choice {
	TA_BACKEND_AUTO = 0, /* CUDA when a GPU is usable, else CPU */
	TA_BACKEND_CPU = 1,  /* the C11-atomics host backend */
	TA_BACKEND_CUDA = 2  /* the CUDA backend; failing to start it is fatal */
} ta_backend_choice;

/* Largest accepted --max-frame: 1 GiB. */
#define TA_CONFIG_MAX_FRAME_LIMIT (1u << 30)
/* Smallest accepted --max-frame: room for any error response. */
#define TA_CONFIG_MIN_FRAME 1024u

/* The values stored for `auto` are one below the smallest count of the key's row in
 * ta_conf.def (type AUTO). */
/* workers: TA_SERVER_WORKERS_CPU on the CPU backend, TA_SERVER_WORKERS_CUDA on CUDA. */
#define TA_CONFIG_WORKERS_AUTO 0
/* Workers of the CPU backend (auto): each runs requests on the CPU. */
#define TA_SERVER_WORKERS_CPU 4
/* Workers of the CUDA backend (auto): each mostly waits for the GPU; callers fill batches. */
#define TA_SERVER_WORKERS_CUDA 64
/* batch_min: 4 with at least 2 workers and 4 CPUs unless several event loops run the CPU
 * backend, else 0 (never). */
#define TA_CONFIG_BATCH_AUTO (-1)
/* loops: by CPUs, devices and backend (ta_config_loops). */
#define TA_CONFIG_LOOPS_AUTO 0
/* async_apply: by backend (ta_config_async). */
#define TA_CONFIG_ASYNC_AUTO (-1)
/* async_poll: by CPUs, loops and devices (ta_config_async_poll). */
#define TA_CONFIG_ASYNC_POLL_AUTO (-1)
/* How long (us) a loop polls for its completions without one, where async_poll auto polls:
 * 1 ms, a hundred batches of the CUDA backend's resident kernel. */
#define TA_SERVER_ASYNC_POLL_US 1000
/* CPUs a machine needs for loops auto to run more than one event loop. */
#define TA_SERVER_LOOPS_MIN_CPUS 4
/* Most event loops loops auto starts per device of the backend. */
#define TA_SERVER_LOOPS_MAX 8
/* Most event loops loops auto starts in all on a GPU backend: on a 4 x H200 host 16 loops
 * ran 50x16 adds 1.07x-1.23x and 200x16 1.01x-1.26x what 32 did, with a tenth of the p99.9
 * (doc/GPU-RESULTS.md, "Several GPUs in one daemon"). */
#define TA_SERVER_LOOPS_GPU_MAX 16
/* Most event loops --loops accepts. */
#define TA_CONFIG_LOOPS_LIMIT 64
/* inline_max: by backend (TA_SERVER_INLINE_CPU; on CUDA TA_SERVER_INLINE_CUDA). */
#define TA_CONFIG_INLINE_AUTO (-2)
/* Elements a request may process to run on the loop thread of the CPU backend (auto). */
#define TA_SERVER_INLINE_CPU 4096
/* CUDA backend (auto): while at most TA_SERVER_INLINE_CUDA_CONNS connections of a loop are
 * busy (sent bytes in the last TA_SERVER_BUSY_MS), requests of up to TA_SERVER_INLINE_CUDA
 * elements run on the loop thread; else on the workers, whose GPU round trips overlap. */
#define TA_SERVER_INLINE_CUDA       1024
#define TA_SERVER_INLINE_CUDA_CONNS 1u
#define TA_SERVER_BUSY_MS           100u
/* The C type of a setting's field, by its type in ta_conf.def (TA_CONF_CTYPE_##type). */
#define TA_CONF_CTYPE_BOOL      bool
#define TA_CONF_CTYPE_INT       int
#define TA_CONF_CTYPE_AUTO      int
#define TA_CONF_CTYPE_SIZE      uint64_t
#define TA_CONF_CTYPE_SIZE32    uint32_t
#define TA_CONF_CTYPE_DURATION  uint64_t
#define TA_CONF_CTYPE_STRING    char *
#define TA_CONF_CTYPE_PATH      char *
#define TA_CONF_CTYPE_HOSTPORT  char *
#define TA_CONF_CTYPE_BACKEND   ta_backend_choice
#define TA_CONF_CTYPE_LOG_LEVEL int /* a ta_log_level */
#define TA_CONF_CTYPE_FSYNC     int /* a ta_fsync_mode (persist.h) */

/* Every setting of the daemon: one field per TA_CONF row of ta_conf.def, whose help says
 * what it holds (a value `auto` is stored as in the TA_CONFIG_*_AUTO above). Strings are
 * malloc'd (NULL when unset); socket_path is NULL until ta_config_finish. */
typedef struct ta_config {
#define TA_CONF(key, sh, type, field, ...) TA_CONF_CTYPE_##type field;
#include "ta_conf.def"
#undef TA_CONF
	char *config_file; /* the file loaded, NULL when none */
} ta_config;

/* What main should do after parsing the command line. */
typedef enum ta_config_action {
	TA_ACTION_RUN = 0,         /* run the daemon */
	TA_ACTION_HELP = 1,        /* print --help and exit 0 */
	TA_ACTION_VERSION = 2,     /* print the version and exit 0 */
	TA_ACTION_LIST_KERNELS = 3 /* print the kernel variant table and exit 0 */
} ta_config_action;

/* Fills cfg with the defaults. */
void ta_config_init(ta_config *cfg);
/* Frees the strings cfg holds and resets it to the defaults' empty state. */
void ta_config_free(ta_config *cfg);

/* Sets one key (file spelling, e.g. "max_frame"; dashes are accepted for underscores)
 * from its text value. Returns TA_OK, or TA_INVALID_ARGUMENT with a message naming the
 * key and the problem. */
ta_status ta_config_set(ta_config *cfg, const char *key, const char *value, ta_error *err);

/* Loads an INI file into cfg. Returns TA_OK, TA_NOT_FOUND when the file cannot be opened,
 * or TA_INVALID_ARGUMENT naming the file, the line and the problem. */
ta_status ta_config_load_file(ta_config *cfg, const char *path, ta_error *err);

/* Parses argv: loads the --config file first, then applies every other flag on top.
 * Sets *action. Returns TA_OK or TA_INVALID_ARGUMENT (a usage error) with a message. */
ta_status ta_config_parse_args(ta_config *cfg, int argc, char **argv, ta_config_action *action,
                               ta_error *err);

/* Completes derived settings (the default socket path: $XDG_RUNTIME_DIR/tileatom/
 * tileatomd.sock, or /run/tileatom/tileatomd.sock for root) and checks that
 * max_input_total holds one max_frame. Returns TA_OK, TA_UNAVAILABLE (no default socket:
 * the daemon exits 1) or TA_INVALID_ARGUMENT (two settings disagree). */
ta_status ta_config_finish(ta_config *cfg, ta_error *err);

/* Parses a byte count: digits with an optional K, M, G or T suffix (powers of 1024, also
 * KiB/MiB/GiB/TiB). Returns 0 on success, -1 on a malformed or overflowing value. */
int ta_config_parse_size(const char *text, uint64_t *out);

/* Writes the --help text to out. */
void ta_config_usage(FILE *out, const char *argv0);

/* The worker count to start: cfg->workers, or for auto the default of the backend named
 * backend_name ("cpu", "cuda"). */
int ta_config_workers(const ta_config *cfg, const char *backend_name);
/* True when the event loops hand pipelined small plans to the backend's apply_async: the
 * backend named backend_name has one (has_async), there is no data log (persistent), and
 * async_apply is 1, or auto on a backend other than the CPU's. */
bool ta_config_async(const ta_config *cfg, const char *backend_name, bool has_async,
                     bool persistent);
/* The event loops to start for the backend named backend_name over devices devices with
 * cpus online CPUs. Auto, on the CPU backend or with async and TA_SERVER_LOOPS_MIN_CPUS
 * CPUs: half the CPUs, at most TA_SERVER_LOOPS_MAX per device, TA_CONFIG_LOOPS_LIMIT in
 * all (TA_SERVER_LOOPS_GPU_MAX on a backend other than the CPU's); else 1. */
int ta_config_loops(const ta_config *cfg, const char *backend_name, long cpus, bool async,
                    int devices);
/* The microseconds an event loop polls for its asynchronous completions: cfg->async_poll_us,
 * or for auto TA_SERVER_ASYNC_POLL_US where the loops and two threads per device (the CUDA
 * batcher's lead and completion threads) come to at most half the cpus, leaving the other
 * half to the clients, else 0. On a 16-CPU H200 host (8 loops) polling gained nothing and
 * took CPU from the clients; on a 32-CPU one it ran 50x16 adds 5% and 200x16 adds 10%
 * faster than the build before it, on average over 7 rounds (doc/GPU-RESULTS.md). */
int ta_config_async_poll(const ta_config *cfg, long cpus, unsigned loops, int devices);

#endif /* TA_DAEMON_CONF_H */
