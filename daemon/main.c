/* main.c: tileatomd's entry point. Parses the settings (defaults < --config file < flags),
 * loads the auth secret (auth_file; a file others may read is refused), picks the backend
 * (auto: CUDA when ta_cuda_backend_new succeeds, else CPU, the choice and the reason
 * logged), creates the tile registry, starts the metrics endpoint when asked (--metrics)
 * and the server (with its event loops, --loops), tells systemd it
 * is ready (READY=1 on $NOTIFY_SOCKET) and runs the event loop until a signal has drained
 * everything. Exit status: 0 after a clean shutdown (and for --help, --version,
 * --list-kernels), 1 when the daemon cannot start, 2 for a usage error. Nothing but
 * --help, --version and --list-kernels writes to stdout; logs go to stderr. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "conf.h"
#include "dispatch.h"
#include "log.h"
#include "metrics_http.h"
#include "notify.h"
#include "persist.h"
#include "registry.h"
#include "server.h"
#include "ta_auth.h"
#include "ta_backend.h"
#include "ta_lower.h"

/* Parses --devices for the backend named kind ("cpu" or "cuda") into the ordinals to open
 * (CPU: pools 0..N-1; "all": every CUDA device, one CPU pool). Returns the count, or 0
 * (logged) for a bad text or no device. */
static int parse_devices(const char *text, const char *kind, int *ords)
{
	bool all = strcmp(text, "all") == 0;
	char *end = NULL;
	int n = 0;
	if (strcmp(kind, "cpu") == 0) { /* one number: that many pools */
		errno = 0;
		long v = all ? 1 : *text >= '0' && *text <= '9' ? strtol(text, &end, 10) : 0;
		if (errno || (end && *end) || v < 1 || v > TA_MAX_DEVICES) {
			ta_log(
			    TA_LOG_ERR,
			    "devices: '%s' is not a pool count 1..64 (or all) for the CPU backend",
			    text);
			return 0;
		}
		for (n = 0; n < v; n++)
			ords[n] = n;
		return n;
	}
	if (all) {
		int count = ta_cuda_device_count();
		for (n = 0; n < count && n < TA_MAX_DEVICES; n++)
			ords[n] = n;
		if (n == 0)
			ta_log(TA_LOG_ERR, "devices: 'all' found no CUDA device");
		return n;
	}
	for (const char *p = text;; p = end + 1) {
		errno = 0;
		long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
		bool more = v >= 0 && *end == ',' && end[1] >= '0' && end[1] <= '9';
		if (v < 0 || errno || (*end && !more) || n >= TA_MAX_DEVICES ||
		    v >= TA_MAX_DEVICES) {
			ta_log(TA_LOG_ERR,
			       "devices: '%s' is not all or a list of distinct CUDA ordinals (0,1)",
			       text);
			return 0;
		}
		for (int i = 0; i < n; i++)
			if (ords[i] == (int)v) {
				ta_log(TA_LOG_ERR, "devices: '%s' names device %ld twice", text, v);
				return 0;
			}
		ords[n++] = (int)v;
		if (!more)
			return n;
	}
}

/* Enables peer access between every pair of the n GPUs ords[] that allows it, logs which
 * pairs have it, and tells the multi-device layer multi (device buffers go only to a GPU
 * that can read them). */
static void enable_peers(ta_backend *multi, const int *ords, int n)
{
	static unsigned char peer[TA_MAX_DEVICES * TA_MAX_DEVICES];
	int pairs = ta_cuda_enable_peer_access(ords, n, peer);
	char line[512] = "";
	size_t at = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			if (i == j)
				continue;
			int w = snprintf(line + at, sizeof line - at, "%s%d->%d %s", at ? ", " : "",
			                 ords[i], ords[j], peer[i * n + j] ? "yes" : "no");
			if (w < 0 || (size_t)w >= sizeof line - at) {
				at = sizeof line - 1;
				break;
			}
			at += (size_t)w;
		}
	ta_log(TA_LOG_NOTICE, "peer access: %d of %d ordered GPU pairs enabled (%s)", pairs,
	       n * (n - 1), line);
	ta_multi_set_peers(multi, ords, n, peer);
}

/* Puts one backend per device of --devices (first: the one already open, as kind) behind
 * the multi-device layer with --placement as its default. Takes first; returns NULL
 * (logged) when it cannot. */
static ta_backend *open_devices(const ta_config *cfg, ta_backend *first, const char *kind)
{
	ta_placement place = {TA_PLACE_DEFAULT, 0, 0, NULL};
	ta_error err = {0};
	if (cfg->placement && ta_placement_parse(cfg->placement, &place, &err) != TA_OK) {
		ta_log(TA_LOG_ERR, "placement: %s", err.msg);
		ta_backend_destroy(first);
		return NULL;
	}
	int ords[TA_MAX_DEVICES];
	int n = 1;
	ords[0] = cfg->device;
	if (cfg->devices && (n = parse_devices(cfg->devices, kind, ords)) == 0) {
		ta_backend_destroy(first);
		return NULL;
	}
	bool cpu = strcmp(kind, "cpu") == 0;
	if (n == 1 && place.kind == TA_PLACE_DEFAULT && (cpu || ords[0] == cfg->device))
		return first; /* one device as always: no layer */
	ta_backend *devs[TA_MAX_DEVICES];
	if (!cpu && ords[0] != cfg->device) { /* the list does not start with --device */
		ta_backend_destroy(first);
		first = NULL;
	}
	for (int i = 0; i < n; i++) {
		devs[i] = i == 0 && first ? first
		          : cpu           ? ta_cpu_backend_new(cfg->cpu_threads, &err)
		                          : ta_cuda_backend_new(ords[i], &err);
		if (!devs[i]) {
			ta_log(TA_LOG_ERR, "cannot start the %s backend on device %d: %s", kind,
			       ords[i], err.msg);
			while (i-- > 0)
				ta_backend_destroy(devs[i]);
			return NULL;
		}
	}
	ta_backend *multi = ta_multi_backend_new(devs, n, &place, &err);
	if (!multi) {
		ta_log(TA_LOG_ERR, "cannot serve %d device%s: %s", n, n == 1 ? "" : "s", err.msg);
		return NULL;
	}
	if (!cpu && n > 1)
		enable_peers(multi, ords, n);
	char text[32];
	ta_log(TA_LOG_NOTICE, "serving %d %s device%s, default placement %s", n, kind,
	       n == 1 ? "" : "s", ta_placement_format(&place, text, sizeof(text)));
	return multi;
}

/* Creates the backend cfg asks for; returns NULL (logged) when it cannot. */
static ta_backend *open_backend(const ta_config *cfg)
{
	ta_error err = {0};
	bool cuda = cfg->backend == TA_BACKEND_CUDA, any = cfg->backend == TA_BACKEND_AUTO;
	ta_backend *be = cuda || any ? ta_cuda_backend_new(cfg->device, &err) : NULL;
	if (cuda && !be)
		ta_log(TA_LOG_ERR, "cannot start the CUDA backend on device %d: %s", cfg->device,
		       err.msg);
	else if (any && be)
		ta_log(TA_LOG_NOTICE, "backend auto: CUDA device %d is usable", cfg->device);
	else if (any)
		ta_log(TA_LOG_NOTICE,
		       "backend auto: CUDA is not usable (%s); using the CPU backend", err.msg);
	if (!be && !cuda) { /* CPU, asked for or the fallback of auto */
		memset(&err, 0, sizeof(err));
		be = ta_cpu_backend_new(cfg->cpu_threads, &err);
		if (!be)
			ta_log(TA_LOG_ERR, "cannot start the CPU backend: %s", err.msg);
	}
	if (!be || (!cfg->devices && !cfg->placement))
		return be;
	ta_backend_info info;
	ta_backend_info_get(be, &info);
	return open_devices(cfg, be, info.name);
}

/* Runs the daemon with a parsed configuration; returns the exit status. */
static int run_daemon(ta_config *cfg)
{
	int status = 1;
	ta_error err = {0};
	ta_auth_secret *secret = NULL;
	ta_backend *be = NULL;
	ta_registry *reg = NULL;
	ta_service *svc = NULL;
	ta_server *srv = NULL;
	ta_persist *persist = NULL;
	ta_metrics_server *metrics = NULL;
	uv_loop_t loop;
	bool loop_open = false;
	int rc;
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		ta_log(TA_LOG_WARNING, "cannot ignore SIGPIPE: %s", strerror(errno));
	ta_log(TA_LOG_NOTICE, "tileatomd %s starting (protocol %d%s%s)", PACKAGE_VERSION,
	       TA_PROTOCOL_VERSION, cfg->config_file ? ", config " : "",
	       cfg->config_file ? cfg->config_file : "");

	if (cfg->auth_file) {
		char msg[512];
		secret = malloc(sizeof(*secret));
		if (!secret || ta_auth_load(cfg->auth_file, secret, msg, sizeof(msg)) != 0) {
			ta_log(TA_LOG_ERR, "%s", secret ? msg : "out of memory");
			goto done;
		}
	}
	if (cfg->listen && !secret)
		ta_log(TA_LOG_WARNING,
		       "TCP clients are not authenticated (no auth_file): every local user can "
		       "reach every public tile over %s",
		       cfg->listen);
	if (!(be = open_backend(cfg)))
		goto done;
	if (!(reg = ta_registry_new(be, cfg->max_tile_bytes, cfg->max_total_bytes, &err)))
		goto fail;
	ta_registry_set_max_tiles(reg, cfg->max_tiles);
	svc = malloc(sizeof(*svc));
	srv = malloc(sizeof(*srv));
	rc = svc && srv ? uv_loop_init(&loop) : UV_ENOMEM;
	if (rc != 0) {
		ta_log(TA_LOG_ERR, "cannot create the event loop: %s", uv_strerror(rc));
		goto done;
	}
	loop_open = true;
	ta_service_init(svc, be, reg, cfg->max_frame);
	svc->time_requests = cfg->metrics != NULL; /* latency histograms for the scrapes */
	svc->auth = secret;
	ta_backend_set_batch_window(be, (unsigned)cfg->batch_window_us);
	if (cfg->data_dir) {
		ta_persist_settings pset = {(ta_fsync_mode)cfg->fsync_mode, cfg->compact_size,
		                            cfg->accept_log_loss};
		if (ta_persist_open(&persist, cfg->data_dir, &pset, svc, &err) != TA_OK)
			goto fail;
		ta_persist_set_buffer_max(persist, cfg->max_log_buffer);
		svc->persist = persist;
	}
	/* The metrics endpoint first: a bad --metrics fails before anything is served. */
	if (cfg->metrics && ta_metrics_server_start(&metrics, cfg->metrics, cfg->allow_remote, svc,
	                                            cfg->max_total_bytes, &err) != TA_OK)
		goto fail;
	if (ta_server_start(srv, &loop, cfg, svc, &err) != TA_OK) {
		ta_log(TA_LOG_ERR, "%s", err.msg);
	} else {
		rc = ta_notify("READY=1\nSTATUS=serving");
		if (rc < 0)
			ta_log(TA_LOG_WARNING, "cannot notify the service manager: %s",
			       strerror(-rc));
		status = 0;
	}
	rc = uv_run(&loop, UV_RUN_DEFAULT);
	ta_metrics_server_stop(metrics);
	if (persist) { /* its handle does not keep the loop alive: close it now */
		ta_persist_detach(persist);
		rc = uv_run(&loop, UV_RUN_DEFAULT);
	}
	if (rc != 0)
		ta_log(TA_LOG_WARNING, "event loop ended with active handles");
	ta_server_free(srv); /* joins the other event loops' threads */
	goto done;
fail: /* err says why */
	ta_log(TA_LOG_ERR, "%s", err.msg);
done:
	if (loop_open && (rc = uv_loop_close(&loop)) != 0)
		ta_log(TA_LOG_WARNING, "cannot close the event loop: %s", uv_strerror(rc));
	ta_persist_close(persist); /* every record written and fsynced */
	ta_registry_free(reg);
	ta_backend_destroy(be);
	free(srv);
	free(svc);
	if (secret)
		ta_auth_wipe(secret);
	free(secret);
	if (status == 0)
		ta_log(TA_LOG_NOTICE, "stopped");
	return status;
}

int main(int argc, char **argv)
{
	const char *argv0 = argc > 0 && argv[0] ? argv[0] : "tileatomd";
	const char *slash = strrchr(argv0, '/');
	if (slash)
		argv0 = slash + 1;
	ta_config cfg;
	ta_config_init(&cfg);
	ta_config_action action = TA_ACTION_RUN;
	ta_error err = {0};
	if (ta_config_parse_args(&cfg, argc, argv, &action, &err) != TA_OK) {
		fprintf(stderr, "%s: %s\nTry '%s --help'.\n", argv0, err.msg, argv0);
		ta_config_free(&cfg);
		return err.code == TA_INVALID_ARGUMENT ? 2 : 1;
	}
	int status = 0;
	switch (action) {
	case TA_ACTION_HELP:
		ta_config_usage(stdout, argv0);
		break;
	case TA_ACTION_VERSION:
		printf("tileatomd %s (protocol %d)\n", PACKAGE_VERSION, TA_PROTOCOL_VERSION);
		break;
	case TA_ACTION_LIST_KERNELS:
		ta_lower_print_table(stdout);
		break;
	case TA_ACTION_RUN:
		ta_log_set_level((ta_log_level)cfg.log_level);
		if (ta_config_finish(&cfg, &err) != TA_OK) {
			/* no socket path: a socket problem, not a usage error */
			fprintf(stderr, "%s: %s\n", argv0, err.msg);
			status = 1;
			break;
		}
		status = run_daemon(&cfg);
		break;
	}
	if (fflush(stdout) != 0 && status == 0)
		status = 1;
	ta_config_free(&cfg);
	return status;
}
