/* reqctx.h: what the daemon's request files share (internal to dispatch): one request
 * being answered (resp_ctx), the group of small plans a pipelined run applies together,
 * and the functions the handlers (handlers.c), the pipeline (pipeline.c), the persistence
 * glue (logged.c) and the held metrics (reply.c) call across. */
#ifndef TA_DAEMON_REQCTX_H
#define TA_DAEMON_REQCTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "codec.h"
#include "dispatch.h"
#include "tileatom.pb-c.h"

/* Bytes a response needs besides the element data (ids, status, shape, counters). */
#define RESPONSE_OVERHEAD 256u

/* Where the values a plan returns go in the response. */
typedef enum out_kind {
	OUT_OP = 0,  /* OpResponse.old (atomics, gather, stores, write) */
	OUT_DATA = 1 /* Response.data (read) */
} out_kind;

typedef struct dispatch_group dispatch_group;

/* A control-plane response (protobuf-c's message) and the storage its bodies point to;
 * arena memory, only for control-plane requests. */
typedef struct ctl_reply {
	Tileatom__Response resp;          /* the response message */
	Tileatom__HelloResponse hello;    /* hello body */
	Tileatom__PingResponse ping;      /* ping body */
	Tileatom__TileInfo tile;          /* create / describe body */
	ta_tile_info tile_info;           /* storage behind tile */
	Tileatom__ListTilesResponse list; /* list body */
	Tileatom__TileInfo *list_items;   /* malloc'd list entries */
	Tileatom__TileInfo **list_ptrs;   /* malloc'd pointers to list_items */
	ta_tile_info *list_infos;         /* malloc'd storage behind list_items */
	Tileatom__StatsResponse stats;    /* stats body */
	ta_backend_info stats_info;       /* storage behind stats strings */
	Tileatom__AuthResponse auth;      /* auth body */
	uint8_t sproof[TA_AUTH_PROOF];    /* storage behind auth (the daemon's proof) */
	Tileatom__BufferResponse buffer;  /* register_buffer body */
	Tileatom__SnapshotResponse snap;  /* snapshot body */
} ctl_reply;

/* One request being answered. */
typedef struct resp_ctx {
	ta_service *svc;              /* the service */
	ta_session *session;          /* the connection's session (NULL: in-process) */
	ta_owner who;                 /* the identity requests act for */
	ta_arena *arena;              /* where this request's memory comes from */
	ta_tile_cache *tiles;         /* the thread's last tile lookup (the scratch's) */
	int64_t inline_max;           /* >= 0: defer requests of more elements */
	dispatch_group *group;        /* non-NULL: small plans join this group */
	ta_persist_run *run;          /* the pipelined run it belongs to, or NULL */
	ta_repeat *record;            /* non-NULL: keep the request there when its plan ran */
	ta_dispatch_scratch *hold_in; /* non-NULL: an OK answer counts into its held counts */
	uint64_t id;                  /* the request's id */
	ta_req_kind req_kind;         /* its kind (log, metrics) */
	const uint8_t *payload;       /* its bytes (its log record) */
	size_t payload_len;           /* bytes at payload */
	const ta_wire_request *wire;  /* a data-plane request as sent (NULL: control plane) */
	ctl_reply *ctl;               /* a control-plane request's response (else NULL) */
	const ta_wire_ref *old_into;  /* want_old: the shared-buffer range for them */
	bool deferred;                /* the request was left for a worker: no reply */
	bool collected;               /* the plan joined the group: not applied yet */
	bool close_after;             /* close the connection after this answer */
	out_kind kind;                /* collected: where its values go */
	ta_tile *held;                /* collected: the tile (a reference) */
	bool held_shared;             /* held is the previous request's reference: not given back */
	uint64_t elements;            /* elements the backend processed (metrics) */
	size_t bytes_in;              /* the request's payload bytes (metrics) */
	struct timespec t0;           /* when it was decoded, if timed (metrics) */
	uint64_t log_seq;             /* the record appended for it (0: none) */
	void *old_buf;                /* values returned by a plan (arena memory) */
	const ta_repeat *copy_of;     /* plan is a copy of this kept request's plan, its operands
	                                 and old value in repeat_slots (pipeline.c) */
	uint64_t copy_gen;            /* the kept request's gen when plan was copied */
	/* From here on, storage that resp_ctx_start leaves as it is: err is set up there, the
	 * rest by the code that fills it. */
	ta_error err;                               /* status and message when not OK */
	ta_reply_msg msg;                           /* a data-plane response (codec.h) */
	int64_t data_shape[TA_MAX_RANK];            /* shape behind msg */
	ta_plan plan;                               /* collected: the plan */
	uint64_t repeat_slots[TA_REPEAT_HOLES + 1]; /* a copied plan's operands, then its old
	                                               value (the kept request's layout) */
} resp_ctx;

/* Clears the part of rc before err (every field a request may read before writing it),
 * and sets err to OK with an empty message and msg to an answer with no body. */
static inline void resp_ctx_start(resp_ctx *rc)
{
	memset(rc, 0, offsetof(resp_ctx, err));
	rc->err.code = TA_OK;
	rc->err.msg[0] = '\0';
	rc->msg.body = TA_BODY_NONE;
}

/* Plans of at most this many elements (global space) join a group. */
#define TA_DISPATCH_GROUP_PLAN_MAX 1024
/* Requests a group holds before it is applied. */
#define TA_DISPATCH_GROUP 64

/* Requests of one pipelined run whose plans are applied together (ta_backend_apply_many,
 * in their order) and answered in their order, before any other request of the run. */
struct dispatch_group {
	ta_service *svc;                          /* the service */
	bool async;                               /* ta_async_run's: plans that cannot join defer */
	ta_frame_buf *out;                        /* where the responses go */
	ta_session *session;                      /* the connection's session (NULL: none) */
	bool close_after;                         /* a response asked to close */
	int n;                                    /* collected requests */
	resp_ctx rcs[TA_DISPATCH_GROUP];          /* their responses being built */
	ta_wire_request wires[TA_DISPATCH_GROUP]; /* their requests as sent */
	ta_apply_call calls[TA_DISPATCH_GROUP];   /* their plans for apply_many */
	ta_result results[TA_DISPATCH_GROUP];     /* their counts */
};

/* reply.c: applies the collected plans of g together and appends their responses in
 * order (group_calls, ta_backend_apply_many, group_answer). */
void group_flush(dispatch_group *g);
/* reply.c: fills g->calls from the collected plans. */
void group_calls(dispatch_group *g);
/* reply.c: after the backend applied g->calls: appends the responses in order, gives the
 * tiles back and empties the group. */
void group_answer(dispatch_group *g);
/* reply.c: turns handle's outcome st into the response of rc (the error fields when st is
 * not OK), appends it to out, counts it (metrics) and frees rc's allocations; returns
 * close_after. */
bool finish_reply(ta_service *svc, resp_ctx *rc, ta_status st, ta_frame_buf *out);

/* Looks up the tile a request names (through the thread's cache of its last lookup). */
static inline ta_status get_tile(resp_ctx *rc, const char *name, ta_tile **tile)
{
	return ta_registry_get_cached(rc->svc->registry, rc->tiles, name, rc->who, tile, &rc->err);
}

/* handlers.c: runs one request of kind rc->req_kind, a data-plane one as sent (w) or a
 * control-plane one as protobuf-c unpacked it (req), through the one order of checks: its
 * kind, the session's handshake, with --data-dir the mutation lock, the tile, the handler,
 * and the log record of a mutation that succeeded. Fills rc->msg (data plane), rc->ctl
 * (control plane) or rc->err. */
ta_status handle(resp_ctx *rc, const ta_wire_request *w, const Tileatom__Request *req);
/* reply.c: fills the response of an applied plan (kind: where its values go). */
void plan_body(resp_ctx *rc, const ta_plan *plan, const ta_result *result, out_kind kind);
/* reply.c: frees what a resp_ctx allocated (only a list does). */
void resp_ctx_free(resp_ctx *rc);

/* logged.c: with --data-dir, takes the mutation lock of name (NULL: every stripe) for a
 * request of rmw op (TA_OP_NONE: none), then (has_tile) looks the tile up. */
ta_status persist_begin(resp_ctx *rc, const char *name, bool has_tile, ta_op op,
                        ta_persist_hold *hold, ta_tile **tile);
/* logged.c: appends the log record of a request that was applied (its lock held): its
 * payload, or, when it names shared buffers, the request with their bytes inline (pb: a
 * control-plane request as protobuf-c unpacked it, else NULL). */
ta_status persist_record(resp_ctx *rc, ta_persist_hold *hold, Tileatom__Request *pb);

/* reply.c: publishes the metrics and request totals scratch holds (nothing when none). */
void held_flush(ta_service *svc, ta_dispatch_scratch *scratch);

#endif /* TA_DAEMON_REQCTX_H */
