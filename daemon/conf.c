/* conf.c: defaults, the key table, INI loading (libinih) and command-line parsing
 * (getopt_long) for tileatomd. Every value, from the file or the command line, is checked
 * by ta_config_set; a bad value is an error naming the key, never silently ignored.
 * Order: defaults, then the --config file, then the other flags (so flags override). */
#include "conf.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"
#include "persist.h"

void ta_config_init(ta_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->backend = TA_BACKEND_AUTO;
	cfg->device = 0;
	cfg->workers = TA_CONFIG_WORKERS_AUTO;
	cfg->cpu_threads = 0;
	cfg->log_level = TA_LOG_NOTICE;
	cfg->max_frame = TA_CONFIG_DEFAULT_MAX_FRAME;
	cfg->max_connections = 256;
	cfg->max_tile_bytes = TA_CONFIG_DEFAULT_MAX_TILE_BYTES;
	cfg->max_total_bytes = TA_CONFIG_DEFAULT_MAX_TOTAL_BYTES;
	cfg->max_pending = 1024;
	cfg->inline_max = TA_CONFIG_INLINE_AUTO;
	cfg->batch_min = TA_CONFIG_BATCH_AUTO;
	cfg->loops = TA_CONFIG_LOOPS_AUTO;
	cfg->max_write_queue = UINT64_C(16) << 20;
	cfg->shutdown_timeout = 10;
	cfg->frame_timeout_ms = TA_CONFIG_DEFAULT_FRAME_TIMEOUT_MS;
	cfg->max_input_total = TA_CONFIG_DEFAULT_MAX_INPUT_TOTAL;
	cfg->handshake_timeout_ms = TA_CONFIG_DEFAULT_HANDSHAKE_TIMEOUT_MS;
	cfg->max_unauthenticated = TA_CONFIG_DEFAULT_MAX_UNAUTHENTICATED;
	cfg->unix_reserve = TA_CONFIG_DEFAULT_UNIX_RESERVE;
	cfg->fsync_mode = TA_FSYNC_EVERYSEC;
	cfg->compact_size = TA_CONFIG_DEFAULT_COMPACT_SIZE;
	cfg->max_log_buffer = TA_PERSIST_DEFAULT_BUFFER_MAX;
}

void ta_config_free(ta_config *cfg)
{
	free(cfg->socket_path);
	free(cfg->socket_group);
	free(cfg->listen);
	free(cfg->metrics);
	free(cfg->config_file);
	free(cfg->auth_file);
	free(cfg->data_dir);
	ta_config_init(cfg);
}

int ta_config_parse_size(const char *text, uint64_t *out)
{
	/* A digit first: strtoull would also take leading blanks and a sign, and turn
	 * " -1" into 2^64 - 1. */
	if (!text || *text < '0' || *text > '9')
		return -1;
	errno = 0;
	char *end = NULL;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno != 0 || end == text)
		return -1;
	unsigned shift = 0;
	if (*end) {
		switch (*end) {
		case 'k':
		case 'K':
			shift = 10;
			break;
		case 'm':
		case 'M':
			shift = 20;
			break;
		case 'g':
		case 'G':
			shift = 30;
			break;
		case 't':
		case 'T':
			shift = 40;
			break;
		default:
			return -1;
		}
		end++;
		if (strcasecmp(end, "ib") == 0 || strcasecmp(end, "b") == 0)
			end += strlen(end);
		if (*end)
			return -1;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int ta_config_parse_duration(const char *text, uint64_t *out)
{
	if (!text || *text < '0' || *text > '9')
		return -1;
	errno = 0;
	char *end = NULL;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno != 0 || end == text)
		return -1;
	uint64_t unit;
	if (!*end || strcmp(end, "s") == 0)
		unit = 1000;
	else if (strcmp(end, "ms") == 0)
		unit = 1;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		unit = 60000;
	else if (strcmp(end, "h") == 0)
		unit = 3600000;
	else
		return -1;
	if (v > UINT64_MAX / unit)
		return -1;
	*out = (uint64_t)v * unit;
	return 0;
}

/* Parses a decimal int in [lo, hi]; returns 0 or -1. */
static int parse_int(const char *text, long lo, long hi, int *out)
{
	if (!text || !*text)
		return -1;
	errno = 0;
	char *end = NULL;
	long v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/* Parses "auto" (giving auto_value) or an integer in [lo, hi] into *out; 0 or -1. */
static int parse_auto_int(const char *text, long lo, long hi, int auto_value, int *out)
{
	if (strcmp(text, "auto") == 0) {
		*out = auto_value;
		return 0;
	}
	return parse_int(text, lo, hi, out);
}

/* Parses true/false/yes/no/on/off/1/0; returns 0 or -1. */
static int parse_bool(const char *text, bool *out)
{
	static const char *yes[] = {"true", "yes", "on", "1"};
	static const char *no[] = {"false", "no", "off", "0"};
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(text, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(text, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/* Replaces *slot with a copy of value (an empty value clears it). Returns 0 or -1. */
static int set_string(char **slot, const char *value)
{
	char *copy = NULL;
	if (*value) {
		copy = strdup(value);
		if (!copy)
			return -1;
	}
	free(*slot);
	*slot = copy;
	return 0;
}

ta_status ta_config_set(ta_config *cfg, const char *key_in, const char *value, ta_error *err)
{
	char key[64];
	size_t kl = strlen(key_in);
	if (kl >= sizeof(key))
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown setting '%s'", key_in);
	for (size_t i = 0; i <= kl; i++)
		key[i] = key_in[i] == '-' ? '_' : key_in[i];
	if (!value)
		value = "";
	uint64_t size = 0;
	int iv = 0;
	bool bv = false;

	if (strcmp(key, "socket") == 0) {
		if (!*value)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "socket: empty path");
		if (set_string(&cfg->socket_path, value))
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	} else if (strcmp(key, "socket_group") == 0) {
		if (set_string(&cfg->socket_group, value))
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	} else if (strcmp(key, "listen") == 0) {
		if (*value && !strrchr(value, ':'))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "listen: '%s' is not HOST:PORT", value);
		if (set_string(&cfg->listen, value))
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	} else if (strcmp(key, "metrics") == 0) {
		if (*value && !strrchr(value, ':'))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "metrics: '%s' is not HOST:PORT", value);
		if (set_string(&cfg->metrics, value))
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	} else if (strcmp(key, "allow_remote") == 0) {
		if (parse_bool(value, &bv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "allow_remote: '%s' is not a boolean (true/false)",
			                    value);
		cfg->allow_remote = bv;
	} else if (strcmp(key, "backend") == 0) {
		if (strcmp(value, "auto") == 0)
			cfg->backend = TA_BACKEND_AUTO;
		else if (strcmp(value, "cpu") == 0)
			cfg->backend = TA_BACKEND_CPU;
		else if (strcmp(value, "cuda") == 0)
			cfg->backend = TA_BACKEND_CUDA;
		else
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "backend: '%s' is not auto, cpu or cuda", value);
	} else if (strcmp(key, "device") == 0) {
		if (parse_int(value, 0, 1023, &iv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "device: '%s' is not a device ordinal (0..1023)",
			                    value);
		cfg->device = iv;
	} else if (strcmp(key, "workers") == 0) {
		if (parse_auto_int(value, 1, 256, TA_CONFIG_WORKERS_AUTO, &cfg->workers))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "workers: '%s' is not auto or a thread count (1..256)",
			                    value);
	} else if (strcmp(key, "cpu_threads") == 0) {
		if (parse_int(value, 0, 1024, &iv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "cpu_threads: '%s' is not a thread count (0..1024, 0 = "
			                    "one per core)",
			                    value);
		cfg->cpu_threads = iv;
	} else if (strcmp(key, "log_level") == 0) {
		int lv = ta_log_level_parse(value);
		if (lv < 0)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "log_level: '%s' is not err, warning, notice, info or "
			                    "debug",
			                    value);
		cfg->log_level = lv;
	} else if (strcmp(key, "max_frame") == 0) {
		if (ta_config_parse_size(value, &size) || size < TA_CONFIG_MIN_FRAME ||
		    size > TA_CONFIG_MAX_FRAME_LIMIT)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "max_frame: '%s' is not a size between %u bytes and 1G",
			                    value, TA_CONFIG_MIN_FRAME);
		cfg->max_frame = (uint32_t)size;
	} else if (strcmp(key, "max_connections") == 0) {
		if (parse_int(value, 1, 1000000, &iv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "max_connections: '%s' is not a count (1..1000000)",
			                    value);
		cfg->max_connections = iv;
	} else if (strcmp(key, "max_tile_bytes") == 0) {
		if (ta_config_parse_size(value, &size))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "max_tile_bytes: '%s' is not a size (e.g. 1G; 0 = "
			                    "unlimited)",
			                    value);
		cfg->max_tile_bytes = size;
	} else if (strcmp(key, "max_total_bytes") == 0) {
		if (ta_config_parse_size(value, &size))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "max_total_bytes: '%s' is not a size (e.g. 8G; 0 = "
			                    "unlimited)",
			                    value);
		cfg->max_total_bytes = size;
	} else if (strcmp(key, "max_pending") == 0) {
		if (parse_int(value, 1, 1000000, &iv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "max_pending: '%s' is not a count (1..1000000)", value);
		cfg->max_pending = iv;
	} else if (strcmp(key, "batch_window") == 0) {
		if (parse_int(value, 0, 1000000, &iv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "batch_window: '%s' is not a time in microseconds "
			                    "(0..1000000)",
			                    value);
		cfg->batch_window_us = iv;
	} else if (strcmp(key, "busy_poll") == 0) {
		if (parse_int(value, 0, 1000000, &iv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "busy_poll: '%s' is not a time in microseconds "
			                    "(0..1000000)",
			                    value);
		cfg->busy_poll_us = iv;
	} else if (strcmp(key, "loops") == 0) {
		if (parse_auto_int(value, 1, TA_CONFIG_LOOPS_LIMIT, TA_CONFIG_LOOPS_AUTO,
		                   &cfg->loops))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "loops: '%s' is not auto or a count (1..%d)", value,
			                    TA_CONFIG_LOOPS_LIMIT);
	} else if (strcmp(key, "batch_min") == 0) {
		if (parse_auto_int(value, 0, 1000000, TA_CONFIG_BATCH_AUTO, &cfg->batch_min))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "batch_min: '%s' is not auto or a count (0..1000000)",
			                    value);
	} else if (strcmp(key, "inline_max") == 0) {
		if (parse_auto_int(value, -1, 1 << 30, TA_CONFIG_INLINE_AUTO, &cfg->inline_max))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "inline_max: '%s' is not auto or a count "
			                    "(-1..1073741824)",
			                    value);
	} else if (strcmp(key, "max_write_queue") == 0) {
		/* at most 1G: a connection's unsent bytes (this bound plus one response of at
		 * most max_frame) then always fit in one uv_buf_t */
		if (ta_config_parse_size(value, &size) || size < 1 || size > (UINT64_C(1) << 30))
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "max_write_queue: '%s' is not a size between 1 byte and 1G", value);
		cfg->max_write_queue = size;
	} else if (strcmp(key, "shutdown_timeout") == 0) {
		if (parse_int(value, 0, 86400, &iv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "shutdown_timeout: '%s' is not a number of seconds "
			                    "(0..86400, 0 = wait forever)",
			                    value);
		cfg->shutdown_timeout = iv;
	} else if (strcmp(key, "frame_timeout") == 0 || strcmp(key, "idle_timeout") == 0) {
		bool frame = key[0] == 'f';
		if (ta_config_parse_duration(value, &size) || size > UINT64_C(86400000) * 365)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "%s: '%s' is not a duration (e.g. 30, 30s, 500ms, 5m; 0 = "
			    "never)",
			    frame ? "frame_timeout" : "idle_timeout", value);
		if (frame)
			cfg->frame_timeout_ms = size;
		else
			cfg->idle_timeout_ms = size;
	} else if (strcmp(key, "handshake_timeout") == 0) {
		if (ta_config_parse_duration(value, &size) || size > UINT64_C(86400000))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "handshake_timeout: '%s' is not a duration up to a day "
			                    "(e.g. 5s, 500ms; 0 = never)",
			                    value);
		cfg->handshake_timeout_ms = size;
	} else if (strcmp(key, "max_unauthenticated") == 0 || strcmp(key, "unix_reserve") == 0) {
		bool unauth = key[0] == 'm';
		if (parse_int(value, unauth ? 1 : 0, 1000000, &iv))
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT, "%s: '%s' is not a count (%d..1000000)",
			    unauth ? "max_unauthenticated" : "unix_reserve", value, unauth ? 1 : 0);
		*(unauth ? &cfg->max_unauthenticated : &cfg->unix_reserve) = iv;
	} else if (strcmp(key, "max_input_total") == 0) {
		if (ta_config_parse_size(value, &size))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "max_input_total: '%s' is not a size (e.g. 1G; 0 = "
			                    "unlimited)",
			                    value);
		cfg->max_input_total = size;
	} else if (strcmp(key, "max_tiles") == 0) {
		if (ta_config_parse_size(value, &size))
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "max_tiles: '%s' is not a count (e.g. 100000 or 1M; 0 = "
			    "unlimited)",
			    value);
		cfg->max_tiles = size;
	} else if (strcmp(key, "auth_file") == 0) {
		if (set_string(&cfg->auth_file, value))
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	} else if (strcmp(key, "data_dir") == 0) {
		if (set_string(&cfg->data_dir, value))
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	} else if (strcmp(key, "fsync") == 0) {
		ta_fsync_mode mode;
		if (ta_fsync_mode_parse(value, &mode))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "fsync: '%s' is not always, everysec or no", value);
		cfg->fsync_mode = (int)mode;
	} else if (strcmp(key, "compact_size") == 0) {
		if (ta_config_parse_size(value, &size))
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "compact_size: '%s' is not a size (e.g. 64M; 0 = never)", value);
		cfg->compact_size = size;
	} else if (strcmp(key, "max_log_buffer") == 0) {
		if (ta_config_parse_size(value, &size))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "max_log_buffer: '%s' is not a size (e.g. 64M; 0 = "
			                    "unbounded)",
			                    value);
		cfg->max_log_buffer = size;
	} else if (strcmp(key, "foreground") == 0) {
		if (parse_bool(value, &bv))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "foreground: '%s' is not a boolean (true/false)",
			                    value);
		cfg->foreground = bv;
	} else {
		return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown setting '%s'", key_in);
	}
	return TA_OK;
}

/* State of one ini_parse run. */
typedef struct ini_ctx {
	ta_config *cfg; /* the configuration being filled */
	ta_error err;   /* first error seen (code TA_OK: none) */
} ini_ctx;

/* inih callback: one key = value line. Returns 1 to accept, 0 on error. */
static int conf_ini_line(void *user, const char *section, const char *name, const char *value)
{
	ini_ctx *ctx = user;
	ta_error e = {0};
	if (section[0] && strcmp(section, "tileatomd") != 0) {
		ta_error_set(&e, TA_INVALID_ARGUMENT,
		             "unknown section [%s] (settings go at the top or under [tileatomd])",
		             section);
	} else if (strcmp(name, "config") == 0) {
		ta_error_set(&e, TA_INVALID_ARGUMENT, "a configuration file cannot load another");
	} else {
		ta_config_set(ctx->cfg, name, value, &e);
	}
	if (e.code == TA_OK)
		return 1;
	if (ctx->err.code == TA_OK)
		ctx->err = e;
	return 0;
}

ta_status ta_config_load_file(ta_config *cfg, const char *path, ta_error *err)
{
	ini_ctx ctx = {.cfg = cfg};
	int rc = ini_parse(path, conf_ini_line, &ctx);
	if (rc == -1)
		return ta_error_set(err, TA_NOT_FOUND, "cannot open configuration file %s: %s",
		                    path, strerror(errno));
	if (rc == -2)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "out of memory reading configuration file %s", path);
	if (rc > 0) {
		if (ctx.err.code != TA_OK)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "%s:%d: %s", path, rc,
			                    ctx.err.msg);
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s:%d: syntax error (expected key = value or [section])", path,
		                    rc);
	}
	if (set_string(&cfg->config_file, path))
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	return TA_OK;
}

/* getopt codes of the options without a short form. */
enum {
	OPT_BASE = 256,
	OPT_SOCKET,
	OPT_SOCKET_GROUP,
	OPT_LISTEN,
	OPT_ALLOW_REMOTE,
	OPT_BACKEND,
	OPT_DEVICE,
	OPT_WORKERS,
	OPT_CPU_THREADS,
	OPT_CONFIG,
	OPT_LOG_LEVEL,
	OPT_FOREGROUND,
	OPT_MAX_FRAME,
	OPT_MAX_CONNECTIONS,
	OPT_MAX_TILE_BYTES,
	OPT_MAX_TOTAL_BYTES,
	OPT_MAX_PENDING,
	OPT_INLINE_MAX,
	OPT_BATCH_MIN,
	OPT_LOOPS,
	OPT_BATCH_WINDOW,
	OPT_BUSY_POLL,
	OPT_MAX_WRITE_QUEUE,
	OPT_SHUTDOWN_TIMEOUT,
	OPT_LIST_KERNELS,
	OPT_METRICS,
	OPT_FRAME_TIMEOUT,
	OPT_IDLE_TIMEOUT,
	OPT_MAX_INPUT_TOTAL,
	OPT_MAX_TILES,
	OPT_AUTH_FILE,
	OPT_DATA_DIR,
	OPT_FSYNC,
	OPT_COMPACT_SIZE,
	OPT_MAX_LOG_BUFFER,
	OPT_HANDSHAKE_TIMEOUT,
	OPT_MAX_UNAUTHENTICATED,
	OPT_UNIX_RESERVE,
};

/* The long options; the name is also the setting's key (dashes for underscores). */
static const struct option long_options[] = {
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"socket-group", required_argument, NULL, OPT_SOCKET_GROUP},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"allow-remote", no_argument, NULL, OPT_ALLOW_REMOTE},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"cpu-threads", required_argument, NULL, OPT_CPU_THREADS},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"foreground", no_argument, NULL, OPT_FOREGROUND},
    {"max-frame", required_argument, NULL, OPT_MAX_FRAME},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
    {"max-tile-bytes", required_argument, NULL, OPT_MAX_TILE_BYTES},
    {"max-total-bytes", required_argument, NULL, OPT_MAX_TOTAL_BYTES},
    {"max-pending", required_argument, NULL, OPT_MAX_PENDING},
    {"inline-max", required_argument, NULL, OPT_INLINE_MAX},
    {"batch-min", required_argument, NULL, OPT_BATCH_MIN},
    {"loops", required_argument, NULL, OPT_LOOPS},
    {"batch-window", required_argument, NULL, OPT_BATCH_WINDOW},
    {"busy-poll", required_argument, NULL, OPT_BUSY_POLL},
    {"max-write-queue", required_argument, NULL, OPT_MAX_WRITE_QUEUE},
    {"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN_TIMEOUT},
    {"list-kernels", no_argument, NULL, OPT_LIST_KERNELS},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"frame-timeout", required_argument, NULL, OPT_FRAME_TIMEOUT},
    {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
    {"max-input-total", required_argument, NULL, OPT_MAX_INPUT_TOTAL},
    {"max-tiles", required_argument, NULL, OPT_MAX_TILES},
    {"auth-file", required_argument, NULL, OPT_AUTH_FILE},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"fsync", required_argument, NULL, OPT_FSYNC},
    {"compact-size", required_argument, NULL, OPT_COMPACT_SIZE},
    {"max-log-buffer", required_argument, NULL, OPT_MAX_LOG_BUFFER},
    {"handshake-timeout", required_argument, NULL, OPT_HANDSHAKE_TIMEOUT},
    {"max-unauthenticated", required_argument, NULL, OPT_MAX_UNAUTHENTICATED},
    {"unix-reserve", required_argument, NULL, OPT_UNIX_RESERVE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* Returns the long option with getopt code val, or NULL. */
static const struct option *option_for(int val)
{
	for (const struct option *o = long_options; o->name; o++)
		if (o->val == val)
			return o;
	return NULL;
}

ta_status ta_config_parse_args(ta_config *cfg, int argc, char **argv, ta_config_action *action,
                               ta_error *err)
{
	/* Settings given on the command line, applied after the file: (key, value). */
	const char **keys = calloc((size_t)argc + 1, sizeof(*keys));
	const char **values = calloc((size_t)argc + 1, sizeof(*values));
	ta_status st = TA_OK;
	if (!keys || !values) {
		st = ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	int n = 0;
	const char *config_path = NULL;
	*action = TA_ACTION_RUN;
	opterr = 0;
	optind = 0; /* full re-initialisation (glibc), so that parsing can be repeated */
	for (;;) {
		int c = getopt_long(argc, argv, ":hV", long_options, NULL);
		if (c == -1)
			break;
		if (c == '?') {
			const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
			if (optopt && optopt < OPT_BASE)
				st = ta_error_set(err, TA_INVALID_ARGUMENT, "unknown option -%c",
				                  optopt);
			else
				st = ta_error_set(err, TA_INVALID_ARGUMENT, "unknown option %s",
				                  arg);
			goto out;
		}
		if (c == ':') {
			const struct option *o = option_for(optopt);
			st = ta_error_set(err, TA_INVALID_ARGUMENT, "option --%s needs a value",
			                  o ? o->name : "?");
			goto out;
		}
		if (c == 'h') {
			*action = TA_ACTION_HELP;
			continue;
		}
		if (c == 'V') {
			if (*action == TA_ACTION_RUN)
				*action = TA_ACTION_VERSION;
			continue;
		}
		if (c == OPT_LIST_KERNELS) {
			if (*action == TA_ACTION_RUN)
				*action = TA_ACTION_LIST_KERNELS;
			continue;
		}
		if (c == OPT_CONFIG) {
			config_path = optarg;
			continue;
		}
		const struct option *o = option_for(c);
		if (!o) {
			st = ta_error_set(err, TA_INTERNAL, "option code %d has no entry", c);
			goto out;
		}
		keys[n] = o->name;
		values[n] = o->has_arg == no_argument ? "true" : optarg;
		n++;
	}
	if (optind < argc) {
		st = ta_error_set(err, TA_INVALID_ARGUMENT, "unexpected argument '%s'",
		                  argv[optind]);
		goto out;
	}
	if (*action != TA_ACTION_RUN)
		goto out;
	if (config_path) {
		st = ta_config_load_file(cfg, config_path, err);
		if (st != TA_OK)
			goto out;
	}
	for (int i = 0; i < n; i++) {
		ta_error e = {0};
		st = ta_config_set(cfg, keys[i], values[i], &e);
		if (st != TA_OK) {
			/* the message starts with the setting's key: name the option as typed */
			for (char *c = e.msg; *c && *c != ':'; c++)
				if (*c == '_')
					*c = '-';
			ta_error_set(err, st, "--%s", e.msg);
			goto out;
		}
	}
out:
	free(keys);
	free(values);
	return st;
}

ta_status ta_config_finish(ta_config *cfg, ta_error *err)
{
	if (cfg->max_input_total && cfg->max_input_total < cfg->max_frame)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "max_input_total (%llu bytes) must hold at least one frame of "
		                    "max_frame (%u bytes)",
		                    (unsigned long long)cfg->max_input_total, cfg->max_frame);
	if (cfg->socket_path)
		return TA_OK;
	const char *base;
	if (geteuid() == 0) {
		base = "/run";
	} else {
		base = getenv("XDG_RUNTIME_DIR");
		if (!base || base[0] != '/')
			return ta_error_set(
			    err, TA_UNAVAILABLE,
			    "no socket path: XDG_RUNTIME_DIR is not set, so there is "
			    "no per-user default ($XDG_RUNTIME_DIR/tileatom/"
			    "tileatomd.sock), and /run/tileatom/tileatomd.sock is "
			    "root's; give --socket PATH (or socket = PATH in the "
			    "configuration file)");
	}
	size_t len = strlen(base) + sizeof("/tileatom/tileatomd.sock");
	cfg->socket_path = malloc(len);
	if (!cfg->socket_path)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	snprintf(cfg->socket_path, len, "%s/tileatom/tileatomd.sock", base);
	return TA_OK;
}

void ta_config_usage(FILE *out, const char *argv0)
{
	fprintf(out,
	        "Usage: %s [OPTION]...\n"
	        "tileatomd: a daemon holding named typed tiles in GPU (or CPU) memory and\n"
	        "applying atomic operations to them on behalf of its clients.\n"
	        "\n"
	        "  --socket PATH          Unix socket to listen on (default\n"
	        "                         $XDG_RUNTIME_DIR/tileatom/tileatomd.sock, or\n"
	        "                         /run/tileatom/tileatomd.sock for root)\n"
	        "  --socket-group GROUP   group owning the socket; mode 0660 (default: none, "
	        "0600)\n"
	        "  --listen HOST:PORT     also listen on TCP (loopback only unless allowed)\n"
	        "  --allow-remote         allow a non-loopback --listen or --metrics address\n"
	        "  --metrics HOST:PORT    serve Prometheus metrics over HTTP at /metrics\n"
	        "                         (loopback only unless allowed; port 0: any free)\n"
	        "  --backend B            auto, cpu or cuda (default auto: CUDA if usable)\n"
	        "  --device N             CUDA device ordinal (default 0)\n"
	        "  --workers N            threads running requests (default auto: 4 on the\n"
	        "                         CPU backend, 64 on CUDA, whose workers mostly wait)\n"
	        "  --cpu-threads N        CPU backend threads per request (default 0: one per "
	        "core)\n"
	        "  --config FILE          INI configuration file; flags override it\n"
	        "  --log-level L          err, warning, notice, info or debug (default notice)\n"
	        "  --foreground           stay in the foreground (tileatomd never forks)\n"
	        "  --max-frame BYTES      largest frame accepted or sent (default 64M)\n"
	        "  --max-connections N    simultaneous connections (default 256)\n"
	        "  --max-tile-bytes BYTES largest tile (default 1G; 0 = unlimited)\n"
	        "  --max-total-bytes BYTES  all tiles together (default 8G; 0 = unlimited)\n"
	        "  --max-pending N        queued requests per connection before reading pauses\n"
	        "                         (default 1024)\n"
	        "  --inline-max N         requests of at most N elements run on the event loop,\n"
	        "                         larger ones on the workers (-1: all on the workers;\n"
	        "                         default auto: 4096 on the CPU backend; on CUDA 1024\n"
	        "                         while one connection is busy, else 0)\n"
	        "  --loops N              event loop threads, each serving its share of the\n"
	        "                         connections (default auto: on the CPU backend with 4\n"
	        "                         or more CPUs half the CPUs, at most 8; else 1)\n"
	        "  --batch-min N          a read bringing N or more whole frames goes to a worker\n"
	        "                         as one job (0: never; default auto: 4 with 2 or more\n"
	        "                         workers and 4 or more CPUs, unless several event loops\n"
	        "                         run the CPU backend; else never)\n"
	        "  --batch-window USEC    CUDA: how long a batch of small requests waits for\n"
	        "                         more before its launch (default 0: it takes what is\n"
	        "                         queued)\n"
	        "  --busy-poll USEC       after input, each event loop polls its sockets without\n"
	        "                         sleeping for USEC microseconds: a lone client's next\n"
	        "                         request finds it awake, at the cost of a busy CPU per\n"
	        "                         loop (default 0: sleep at once)\n"
	        "  --max-write-queue BYTES  unsent response bytes per connection before reading\n"
	        "                         pauses (default 16M)\n"
	        "  --shutdown-timeout S   seconds a shutdown waits for clients to take their\n"
	        "                         responses before closing them (default 10; 0 = forever)\n"
	        "  --frame-timeout T      close a connection holding a partial frame longer\n"
	        "                         (default 30s; ms, s, m, h; 0 = never)\n"
	        "  --idle-timeout T       close a connection that sends and takes nothing for T\n"
	        "                         (default 0 = never)\n"
	        "  --handshake-timeout T  close a connection that has not finished Hello (and\n"
	        "                         Auth where needed) after T (default 5s; 0 = never)\n"
	        "  --max-unauthenticated N  connections of one transport (TCP, Unix) in their\n"
	        "                         handshake at once; a new one over it replaces the\n"
	        "                         oldest (default 32)\n"
	        "  --unix-reserve N       connection slots only Unix-socket clients may take\n"
	        "                         (default 32)\n"
	        "  --max-input-total BYTES  input all connections may hold together; reading\n"
	        "                         pauses beyond it (default 1G; 0 = unlimited)\n"
	        "  --max-tiles N          most tiles at once (default 0 = unlimited)\n"
	        "  --auth-file FILE       TCP clients must prove the secret in FILE (mode 0600)\n"
	        "  --data-dir DIR         keep tiles across restarts: a snapshot and a log of\n"
	        "                         the mutations in DIR (default: none, tiles are lost)\n"
	        "  --fsync MODE           always (acknowledge once durable), everysec or no\n"
	        "                         (default everysec)\n"
	        "  --compact-size BYTES   log size that starts an automatic snapshot\n"
	        "                         (default 64M; 0 = only on request)\n"
	        "  --max-log-buffer BYTES log records waiting for the disk before mutations\n"
	        "                         wait for it (default 64M; 0 = unbounded)\n"
	        "  --list-kernels         print the kernel variant table and exit\n"
	        "  -V, --version          print the version and exit\n"
	        "  -h, --help             print this help and exit\n"
	        "\n"
	        "Sizes take K, M, G or T suffixes (powers of 1024). Logs go to stderr with\n"
	        "journald priority prefixes. See tileatomd(8).\n",
	        argv0);
}

int ta_config_loops(const ta_config *cfg, const char *backend_name, long cpus)
{
	if (cfg->loops != TA_CONFIG_LOOPS_AUTO)
		return cfg->loops;
	if (cpus < TA_SERVER_LOOPS_MIN_CPUS || strcmp(backend_name, "cpu") != 0)
		return 1;
	return cpus / 2 < TA_SERVER_LOOPS_MAX ? (int)(cpus / 2) : TA_SERVER_LOOPS_MAX;
}

int ta_config_workers(const ta_config *cfg, const char *backend_name)
{
	if (cfg->workers != TA_CONFIG_WORKERS_AUTO)
		return cfg->workers;
	return strcmp(backend_name, "cuda") == 0 ? TA_SERVER_WORKERS_CUDA : TA_SERVER_WORKERS_CPU;
}
