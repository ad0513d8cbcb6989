/* metrics_http.h: tileatomd's optional Prometheus endpoint (--metrics HOST:PORT). A
 * libmicrohttpd daemon with its own thread serves GET /metrics in the Prometheus text
 * exposition format (version 0.0.4): the per-request-kind counters and latency histograms
 * of metrics.h, connections, tiles and tile memory, read on each scrape from the same
 * ta_service that the Stats request reads. Loopback addresses only unless allow_remote. */
#ifndef TA_DAEMON_METRICS_HTTP_H
#define TA_DAEMON_METRICS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"
#include "ta_types.h"

/* A running metrics endpoint. */
typedef struct ta_metrics_server ta_metrics_server;

/* Starts serving svc's metrics on spec ("HOST:PORT", "[V6]:PORT"; port 0 picks a free
 * one). Refuses a non-loopback address unless allow_remote (TA_PERMISSION_DENIED). On
 * success *out is the server and the address it listens on is logged. Returns TA_OK or
 * an error naming the address and the problem. */
ta_status ta_metrics_server_start(ta_metrics_server **out, const char *spec, bool allow_remote,
                                  ta_service *svc, uint64_t limit_bytes, ta_error *err);

/* Stops the server (waits for its thread) and frees it; NULL is a no-op. */
void ta_metrics_server_stop(ta_metrics_server *s);

#endif /* TA_DAEMON_METRICS_HTTP_H */
