/* dispatch.h: from one request frame to one response frame. Runs on a worker thread:
 * decode the Request, turn its body into registry operations or a ta_request, validate
 * it with ta_plan_build (its errors go straight back with their code and message), run it
 * on the backend, and encode the Response. Nothing here touches libuv. */
#ifndef TA_DAEMON_DISPATCH_H
#define TA_DAEMON_DISPATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry.h"
#include "ta_backend.h"

/* State every request may use; shared by all worker threads. */
typedef struct ta_service {
	ta_backend *backend;            /* runs plans, owns tile memory */
	ta_backend_info info;           /* the backend's description (immutable) */
	ta_registry *registry;          /* the named tiles */
	uint32_t max_frame;             /* largest response payload sent, bytes */
	atomic_uint_least64_t requests; /* requests handled */
	atomic_uint_least64_t errors;   /* requests answered with a status other than OK */
	atomic_uint_least64_t elements; /* elements processed by atomic and memory ops */
	atomic_uint connections;        /* open client connections (kept by the server) */
} ta_service;

/* One encoded response and what to do after sending it. */
typedef struct ta_reply {
	uint8_t *frame;   /* malloc'd frame (length prefix included); NULL: nothing to send */
	size_t len;       /* bytes at frame */
	bool close_after; /* close the connection once the frame is sent */
} ta_reply;

/* Initialises svc around a backend and a registry (counters zero). */
void ta_service_init(ta_service *svc, ta_backend *backend, ta_registry *registry,
                     uint32_t max_frame);

/* Handles one request payload (the bytes of one frame) and fills *out. A payload that
 * does not decode as a Request gets an INVALID_ARGUMENT response with id 0 and
 * close_after set. Thread-safe. */
void ta_dispatch_frame(ta_service *svc, const uint8_t *payload, size_t len, ta_reply *out);

/* Like ta_dispatch_frame, but takes ownership of a malloc'd payload and frees it as soon
 * as it is decoded (lowering the peak memory of large requests). */
void ta_dispatch_frame_owned(ta_service *svc, uint8_t *payload, size_t len, ta_reply *out);

/* Builds an error response for request id (0 when unknown) into *out. */
void ta_dispatch_error(ta_service *svc, uint64_t id, ta_status code, const char *msg,
                       bool close_after, ta_reply *out);

#endif /* TA_DAEMON_DISPATCH_H */
