/* metrics_http.c: the Prometheus endpoint of metrics_http.h on libmicrohttpd. The
 * exposition text is built per scrape into an open_memstream buffer that libmicrohttpd
 * frees after sending; nothing here runs on the event loop or the request path.
 *
 * Failure modes: a bad or non-loopback address, or a port in use, fails the start (the
 * daemon then exits 1); a scrape that runs out of memory gets a 500; any path but
 * /metrics a 404; any method but GET and HEAD a 405.
 *
 * Bounds: one internal thread polls every connection (a slow peer blocks nobody); at most
 * METRICS_MAX_CONNECTIONS connections, METRICS_MAX_PER_ADDRESS of one address, each closed
 * after METRICS_IDLE_TIMEOUT seconds without a byte, so that peers trickling their headers
 * cannot keep scrapes out (docs/SECURITY.md has the figures). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "metrics_http.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "netaddr.h"

/* Connections served at the same time: room for scrapers beside a few that trickle. */
#define METRICS_MAX_CONNECTIONS 64
/* Connections from one address at the same time: one remote host never takes them all. */
#define METRICS_MAX_PER_ADDRESS 32
/* Seconds a connection may send and take nothing before it is closed: a scraper sends its
 * request at once, so a peer that trickles its header a byte at a time slower than this
 * loses its connection (and its slot) before the next byte. */
#define METRICS_IDLE_TIMEOUT 3

struct ta_metrics_server {
	struct MHD_Daemon *mhd; /* the HTTP server and its thread */
	ta_service *svc;        /* what is served */
	uint64_t limit_bytes;   /* the tile memory limit shown (0: unlimited) */
};

/* Writes s as a Prometheus label value (backslash, quote and newline escaped). */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '"')
			fputs("\\\"", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* Writes the HELP and TYPE lines of a metric family. */
static void put_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Writes the name and labels of a per-kind sample, name{backend="be",request="kind", for the
 * caller to close. */
static void put_kind_labels(FILE *f, const char *name, const char *be, const char *kind)
{
	fprintf(f, "%s{backend=\"", name);
	put_label(f, be);
	fprintf(f, "\",request=\"%s\"", kind);
}

/* Writes a gauge family of one sample. */
static void put_gauge(FILE *f, const char *name, const char *help, uint64_t v)
{
	put_head(f, name, "gauge", help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* A metric family: its name, type and help. */
typedef struct family {
	const char *name, *type, *help; /* metric name; "counter" or "gauge"; HELP text */
} family;

/* The per-kind counter families, in the order of the values render writes. */
static const family kind_families[] = {
    {"tileatom_requests_total", "counter", "Requests answered, by request kind."},
    {"tileatom_request_errors_total", "counter",
     "Requests answered with a status other than OK, by request kind."},
    {"tileatom_elements_total", "counter",
     "Tile elements processed by the backend, by request kind."},
    {"tileatom_request_bytes_total", "counter", "Request payload bytes received, by request kind."},
    {"tileatom_response_bytes_total", "counter", "Response frame bytes produced, by request kind."},
};

/* Writes the per-device gauges and counters (one series per device the daemon serves,
 * label device="N"). */
static void put_device_metrics(FILE *f, ta_service *svc)
{
	static const family fam[] = {
	    {"tileatom_device_memory_used_bytes", "gauge",
	     "Bytes of the device's memory in use (CUDA: total - free; CPU pools: tile bytes)."},
	    {"tileatom_device_memory_total_bytes", "gauge",
	     "Bytes of the device's memory (0 for a CPU pool)."},
	    {"tileatom_device_tiles", "gauge", "Tiles with a part on the device."},
	    {"tileatom_device_tile_bytes", "gauge", "Bytes of tile parts on the device."},
	    {"tileatom_device_requests_total", "counter",
	     "Requests (or parts of requests) the device has run."},
	    {"tileatom_device_failed", "gauge",
	     "1 when the device can no longer serve (its tiles answer UNAVAILABLE), else 0."},
	};
	int n = ta_backend_device_count(svc->backend);
	for (size_t k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
		put_head(f, fam[k].name, fam[k].type, fam[k].help);
		for (int d = 0; d < n; d++) {
			ta_device_stats ds;
			if (!ta_service_device_stats(svc, d, &ds))
				continue;
			uint64_t v[] = {ds.memory_used, ds.memory_total, ds.tiles,
			                ds.tile_bytes,  ds.requests,     ds.failed};
			fprintf(f, "%s{device=\"%d\"} %" PRIu64 "\n", fam[k].name, d, v[k]);
		}
	}
}

/* True for the kinds shown (the table's, plus the undecodable). */
static bool kind_shown(int k)
{
	return k == TA_REQ_NONE || ta_req_valid((ta_req_kind)k);
}

/* Renders the exposition text of svc (with limit_bytes, the tile memory limit, 0 when
 * unlimited). Returns a malloc'd NUL-terminated text (its length in *len), or NULL when
 * memory is short. Thread-safe. */
static char *render(ta_service *svc, uint64_t limit_bytes, size_t *len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return NULL;
	ta_kind_snapshot snap[TA_REQ_END];
	for (int k = 0; k < TA_REQ_END; k++)
		ta_metrics_read(&svc->metrics, (ta_req_kind)k, &snap[k]);
	const char *be = svc->info.name;

	put_head(f, "tileatom_info", "gauge",
	         "The daemon's version, backend and device (always 1).");
	fprintf(f, "tileatom_info{version=\"%s\",backend=\"", PACKAGE_VERSION);
	put_label(f, be);
	fputs("\",device=\"", f);
	put_label(f, svc->info.device);
	fputs("\"} 1\n", f);

	for (size_t i = 0; i < sizeof(kind_families) / sizeof(kind_families[0]); i++) {
		const family *fam = &kind_families[i];
		put_head(f, fam->name, fam->type, fam->help);
		for (int k = 0; k < TA_REQ_END; k++) {
			if (!kind_shown(k))
				continue;
			uint64_t v[] = {snap[k].requests, snap[k].errors, snap[k].elements,
			                snap[k].bytes_in, snap[k].bytes_out};
			put_kind_labels(f, fam->name, be, ta_metrics_kind_name((ta_req_kind)k));
			fprintf(f, "} %" PRIu64 "\n", v[i]);
		}
	}

	put_head(f, "tileatom_request_duration_seconds", "histogram",
	         "Time the daemon spent on a request, from decoding it to its encoded response "
	         "(not the time queued), by request kind.");
	for (int k = 0; k < TA_REQ_END; k++) {
		if (!kind_shown(k))
			continue;
		const char *kind = ta_metrics_kind_name((ta_req_kind)k);
		uint64_t cum = 0;
		for (int b = 0; b <= TA_METRICS_BUCKETS; b++) {
			cum += snap[k].bucket[b];
			put_kind_labels(f, "tileatom_request_duration_seconds_bucket", be, kind);
			if (b < TA_METRICS_BUCKETS)
				fprintf(f, ",le=\"%.9g\"} %" PRIu64 "\n",
				        (double)ta_metrics_bucket_ns[b] / 1e9, cum);
			else
				fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
		}
		put_kind_labels(f, "tileatom_request_duration_seconds_sum", be, kind);
		fprintf(f, "} %" PRIu64 ".%09" PRIu64 "\n", snap[k].latency_ns / 1000000000u,
		        snap[k].latency_ns % 1000000000u);
		put_kind_labels(f, "tileatom_request_duration_seconds_count", be, kind);
		fprintf(f, "} %" PRIu64 "\n", cum);
	}

	uint32_t tiles = 0;
	uint64_t tile_bytes = 0;
	ta_registry_stats(svc->registry, &tiles, &tile_bytes);
	put_gauge(f, "tileatom_connections", "Open client connections.",
	          atomic_load(&svc->connections));
	put_gauge(f, "tileatom_tiles", "Tiles held.", tiles);
	put_gauge(f, "tileatom_tile_bytes", "Bytes of tile memory held.", tile_bytes);
	if (limit_bytes)
		put_gauge(f, "tileatom_tile_bytes_limit",
		          "Most bytes all tiles may hold together (max_total_bytes).", limit_bytes);
	if (svc->info.device_memory)
		put_gauge(f, "tileatom_device_memory_bytes", "Memory of the GPU in use.",
		          svc->info.device_memory);
	put_device_metrics(f, svc);
	bool failed = ferror(f) != 0;
	if (fclose(f) != 0 || failed) {
		free(buf);
		return NULL;
	}
	*len = size;
	return buf;
}

/* libmicrohttpd's request handler: GET /metrics. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
	(void)version;
	(void)upload_data;
	ta_metrics_server *s = cls;
	if (*req_cls == NULL) { /* first call: headers only; answer on the next */
		*req_cls = s;
		return MHD_YES;
	}
	if (*upload_data_size != 0) {
		*upload_data_size = 0; /* a body is ignored */
		return MHD_YES;
	}
	unsigned code = MHD_HTTP_OK;
	const char *type = "text/plain; version=0.0.4; charset=utf-8";
	const char *msg = NULL; /* an error's text */
	char *text = NULL;
	size_t len = 0;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
		msg = "only GET /metrics is served\n";
	} else if (strcmp(url, "/metrics") != 0) {
		code = MHD_HTTP_NOT_FOUND;
		msg = "not found: the metrics are at /metrics\n";
	} else if (!(text = render(s->svc, s->limit_bytes, &len))) {
		code = MHD_HTTP_INTERNAL_SERVER_ERROR;
		msg = "out of memory rendering the metrics\n";
	}
	struct MHD_Response *resp;
	if (msg) {
		type = "text/plain; charset=utf-8";
		resp = MHD_create_response_from_buffer(strlen(msg), (void *)msg,
		                                       MHD_RESPMEM_PERSISTENT);
	} else if (!(resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE))) {
		free(text);
	}
	if (!resp)
		return MHD_NO;
	enum MHD_Result r = MHD_NO;
	if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_YES &&
	    (code != MHD_HTTP_METHOD_NOT_ALLOWED ||
	     MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") == MHD_YES))
		r = MHD_queue_response(conn, code, resp);
	MHD_destroy_response(resp);
	return r;
}

/* libmicrohttpd's error log, into the daemon's. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n > 0 && msg[n - 1] == '\n')
		msg[--n] = '\0';
	ta_log(TA_LOG_WARNING, "metrics: %s", msg);
}

ta_status ta_metrics_server_start(ta_metrics_server **out, const char *spec, bool allow_remote,
                                  ta_service *svc, uint64_t limit_bytes, ta_error *err)
{
	*out = NULL;
	struct addrinfo *res = NULL;
	ta_status st = ta_net_resolve("metrics", spec, &res, err);
	if (st != TA_OK)
		return st;
	if (!ta_net_is_loopback(res->ai_addr) && !allow_remote) {
		freeaddrinfo(res);
		return ta_error_set(err, TA_PERMISSION_DENIED,
		                    "refusing to serve metrics on %s: not a loopback address (set "
		                    "allow_remote = true or --allow-remote to serve other hosts)",
		                    spec);
	}
	ta_metrics_server *s = calloc(1, sizeof(*s));
	if (!s) {
		freeaddrinfo(res);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	}
	s->svc = svc;
	s->limit_bytes = limit_bytes;
	/* epoll or poll (not select, whose descriptor limit a busy daemon may pass) */
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	if (res->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* the logger first, so that libmicrohttpd's own messages go through it too */
	s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
	                          on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, res->ai_addr,
	                          MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_MAX_CONNECTIONS,
	                          MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	                          (unsigned)METRICS_MAX_PER_ADDRESS, MHD_OPTION_CONNECTION_TIMEOUT,
	                          (unsigned)METRICS_IDLE_TIMEOUT, MHD_OPTION_END);
	int start_errno = errno;
	freeaddrinfo(res);
	if (!s->mhd) {
		free(s);
		return ta_error_set(err, TA_UNAVAILABLE, "cannot serve metrics on %s: %s", spec,
		                    start_errno ? strerror(start_errno) : "libmicrohttpd failed");
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
	if (!info) {
		ta_metrics_server_stop(s);
		return ta_error_set(err, TA_INTERNAL, "metrics: cannot read the bound port");
	}
	ta_log(TA_LOG_NOTICE, "serving metrics on %s (port %u): GET /metrics", spec,
	       (unsigned)info->port);
	*out = s;
	return TA_OK;
}

void ta_metrics_server_stop(ta_metrics_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->mhd);
	free(s);
}
