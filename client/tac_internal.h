/* tac_internal.h: private declarations of libtileatom-client (not installed). Its layers,
 * each calling only those below: tac_codec.c and tac_util.c (request messages borrowing the
 * caller's memory, response checks), tac_conn.c (the socket, framing, the output buffer,
 * the pending queue), tac_shm.c (shared and device buffers), tac_cuptr.c (raw CUDA device
 * pointers registered as device buffers), tac_call.c (synchronous round trips), tac_split.c
 * (requests over the frame limit in parts) and tac_api.c (the public calls). */
#ifndef TAC_INTERNAL_H
#define TAC_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tileatom.h"
#include "ta_auth.h"
#include "ta_frame.h"
#include "tac_wire.h"
#include "tileatom.pb-c.h"

/* Marks a function internal to the library (also without -fvisibility=hidden). */
#define TAC_HIDDEN __attribute__((visibility("hidden")))

/* Default largest response payload accepted (1 GiB). */
#define TAC_DEFAULT_MAX_RESPONSE (1u << 30)
/* The daemon's frame limit assumed when its Hello does not state one (its default). */
#define TAC_DEFAULT_MAX_FRAME (64u << 20)
/* Longest busy poll tileatom_set_busy_poll and $TILEATOM_BUSY_POLL_US accept (1 s). */
#define TAC_BUSY_POLL_MAX 1000000u
/* Bytes read from the socket per recv(). */
#define TAC_RECV_CHUNK 65536
/* Submitted request bytes buffered before they are written; a frame this large is written
 * at once from its own buffer. */
#define TAC_FLUSH_THRESHOLD 65536

/* A request awaiting its response. */
typedef struct tac_pending {
	uint64_t id;                /* the request id */
	tileatom_request_kind kind; /* what was asked */
	bool part;                  /* a part of a split submit (tac_split.c merges them) */
} tac_pending;

/* A split submit whose parts await tileatom_collect (tac_split.c). */
typedef struct tac_split_pending tac_split_pending;

/* Largest payload queued in the receive store; larger ones get their own allocation. */
#define TAC_RXSTORE_FRAME_MAX 65536

/* A complete frame payload received but not yet consumed. */
typedef struct tac_frame {
	uint8_t *owned; /* a malloc'd payload, or NULL: it lies in the receive store */
	size_t off;     /* owned NULL: its offset in the receive store */
	uint32_t len;   /* its length */
} tac_frame;

/* One connection to tileatomd. */
struct tileatom_client {
	int fd;                    /* connected, non-blocking stream socket */
	char *address;             /* what we connected to (for messages) */
	int io_timeout_ms;         /* per-call send/receive limit, <= 0: none */
	unsigned busy_poll_us;     /* a wait spins this long before sleeping (0: never) */
	bool broken;               /* an I/O or protocol error ended the connection */
	tileatom_error broken_err; /* the error that broke it */
	uint64_t last_id;          /* id of the last request sent (ids start at 1) */
	tac_pending *pending;      /* ring buffer of requests awaiting responses */
	size_t pending_cap;        /* its capacity (a power of two) */
	size_t pending_head;       /* index of the oldest entry */
	size_t pending_count;      /* entries in use */
	ta_frame_reader reader;    /* incremental frame parser for received bytes */
	tac_frame *rxq;            /* ring buffer of received, unconsumed frames */
	size_t rxq_cap;            /* its capacity (a power of two) */
	size_t rxq_head;           /* index of the oldest frame */
	size_t rxq_count;          /* frames queued */
	uint8_t *rxbuf;            /* TAC_RECV_CHUNK bytes of receive staging */
	ta_frame_buf rxstore;      /* queued small payloads (consumed ones included in len) */
	size_t rxstore_from;       /* bytes at the start of rxstore already consumed */
	ta_frame_buf txbuf;        /* framed requests submitted but not yet written */
	Tileatom__Response *last;  /* the last decoded response (kept for pointers) */
	tac_wire_response fast;    /* the data-plane responses' storage (last may be fast.resp) */
	tac_tpl tpl;               /* the last small atomic request, for its key's next call */
	char server_version[64];   /* from the handshake */
	char server_backend[32];   /* from the handshake */
	uint32_t max_frame;        /* the daemon's frame limit (handshake, else the default) */

	/* shared buffers (tac_shm.c) */
	int unix_socket;                 /* 1: a Unix socket (shared buffers work), 0: not, -1: ? */
	struct tileatom_buffer **bufs;   /* shared buffers registered by the caller */
	size_t nbufs;                    /* entries in bufs */
	size_t capbufs;                  /* capacity of bufs */
	struct tileatom_buffer *staging; /* the library's buffer for staged operands, or NULL */
	size_t stage_min;                /* operand bytes from which calls are staged (0: never) */
	const void *old_from;            /* where the last call's old values went (NULL: inline) */
	uint64_t staged_id;              /* the pipelined request holding staging (0: none) */

	/* split submits (tac_split.c) */
	tac_split_pending *splits; /* the split submits not collected, oldest first */
	size_t split_extra;        /* pending parts 2..n of split submits (not counted) */

	/* raw device pointers (tac_cuptr.c) */
	size_t cuptr_min;              /* array bytes from which the driver is asked (0: never) */
	struct tac_cuptr_entry *cuptr; /* allocations registered for raw device pointers */
	size_t ncuptr;                 /* entries in cuptr */
	size_t capcuptr;               /* capacity of cuptr */
};

/* Requests of c tileatom_collect has yet to answer (a split submit once): tileatom_pending. */
static inline size_t tac_pending_requests(const tileatom_client *c)
{
	return c->pending_count - c->split_extra;
}

/* Storage for one request message and every sub-message it may point to, built on the
 * stack by the tac_build_* functions (borrowing the caller's operands). The builders clear
 * only the fields before body (msg_begin, tac_codec.c); a later field is set before it is
 * read, except that an unused array of values..index[3] has only data.len 0, data.data
 * NULL and shared NULL set (what tac_cuptr.c, tac_shm.c and tac_split.c read of it). */
typedef struct tac_msg {
	Tileatom__Request req;      /* the top-level message */
	tileatom_request_kind kind; /* which body is set */
	Tileatom__Options options;  /* op options */
	int64_t scalar_index;       /* atomic_at: the flat index */
	void *old_out;              /* synchronous calls: where old values go */
	size_t old_out_size;        /* bytes at old_out */
	bool cuptr_done;            /* tac_cuptr_prepare has looked at the operands already */
	bool want_old_asked;        /* the caller's want_old (a template's key), as asked */

	/* ---- from here on not cleared by the builders (see above) ---- */
	union {
		Tileatom__HelloRequest hello;                    /* HELLO */
		Tileatom__PingRequest ping;                      /* PING */
		Tileatom__CreateTileRequest create;              /* CREATE */
		Tileatom__DestroyTileRequest destroy;            /* DESTROY */
		Tileatom__ListTilesRequest list;                 /* LIST */
		Tileatom__DescribeTileRequest describe;          /* DESCRIBE */
		Tileatom__WriteRegionRequest write;              /* WRITE */
		Tileatom__ReadRegionRequest read;                /* READ */
		Tileatom__ElementwiseAtomicRequest elementwise;  /* ELEMENTWISE */
		Tileatom__ScatterAtomicRequest scatter;          /* SCATTER */
		Tileatom__IndexedAtomicRequest indexed;          /* INDEXED */
		Tileatom__GatherRequest gather;                  /* GATHER */
		Tileatom__ScatterStoreRequest scatter_store;     /* SCATTER_STORE */
		Tileatom__AtomicLoadRequest atomic_load;         /* ATOMIC_LOAD */
		Tileatom__AtomicStoreRequest atomic_store;       /* ATOMIC_STORE */
		Tileatom__StatsRequest stats;                    /* STATS */
		Tileatom__AuthRequest auth;                      /* AUTH */
		Tileatom__RegisterBufferRequest register_buffer; /* REGISTER_BUFFER */
		Tileatom__SnapshotRequest snapshot;              /* SNAPSHOT */
	} body;
	Tileatom__Region region;                       /* region / window */
	Tileatom__Region addr_region;                  /* Addressing.region */
	Tileatom__Array values;                        /* values / desired / store data */
	Tileatom__Array compare;                       /* CAS expected values */
	Tileatom__Array mask;                          /* BOOL mask */
	Tileatom__Array padding;                       /* gather padding */
	Tileatom__Array fill;                          /* create fill scalar */
	Tileatom__Array index[TILEATOM_MAX_RANK];      /* index arrays */
	Tileatom__Array *index_ptr[TILEATOM_MAX_RANK]; /* pointers to them (repeated field) */
	Tileatom__ScatterAddr scatter_addr;            /* scatter addressing */
	Tileatom__IndexedAddr indexed_addr;            /* indexed addressing */
	Tileatom__Addressing addressing;               /* memory-op addressing */
	int64_t shape_copy[TILEATOM_MAX_RANK];         /* create: the tile shape */

	/* shared buffers (tac_shm.c) */
	Tileatom__BufferRef refs[TILEATOM_MAX_RANK + 4]; /* shared-buffer references of arrays */
	Tileatom__BufferRef old_ref;                     /* Options.old_into */
} tac_msg;

/* The operand arrays of m that may be device memory, travel by reference or be staged. */
#define TAC_MSG_ARRAYS(m)                                                                          \
	{                                                                                          \
		&(m)->values, &(m)->compare, &(m)->mask, &(m)->padding, &(m)->index[0],            \
		    &(m)->index[1], &(m)->index[2], &(m)->index[3]                                 \
	}
/* Entries of TAC_MSG_ARRAYS. */
#define TAC_MSG_NARRAYS 8

/* ---- splitting (tac_split.c; used by tac_api.c, uses tac_shm.c and below) ------------- */
/* True when m's frame would exceed the daemon's frame limit (c->max_frame). */
TAC_HIDDEN bool tac_frame_too_large(const tileatom_client *c, tac_msg *m);
/* An atomic request (element-wise, scatter or indexed) as the public call got it. */
typedef struct tac_split_req {
	tileatom_request_kind kind;      /* ELEMENTWISE, SCATTER or INDEXED */
	const char *tile;                /* the tile's name */
	tileatom_op op;                  /* the op */
	const tileatom_region *region;   /* the region (NULL: the whole tile) */
	int dim;                         /* SCATTER: the axis the indices address */
	int n_index;                     /* index arrays: INDEXED n_index, SCATTER 1, else 0 */
	const tileatom_array *indices;   /* the index arrays (NULL for ELEMENTWISE) */
	bool flat;                       /* INDEXED: row-major offsets into the region */
	const tileatom_array *values;    /* values (CAS: desired) */
	const tileatom_array *compare;   /* CAS: expected values, else NULL */
	const tileatom_op_options *opts; /* the options (NULL: defaults) */
	bool returns_old;                /* the response carries old values (want_old or CAS) */
} tac_split_req;
/* False when the old values of the whole request (want_old, CAS) would not fit one response
 * frame, so that staging cannot send it whole (may describe the tile). */
TAC_HIDDEN bool tac_split_old_fit(tileatom_client *c, const tac_split_req *rq);
/* Sends a request over the frame limit in parts (the rules: tileatom.h, tileatom_indexed). */
TAC_HIDDEN int tac_split(tileatom_client *c, const tac_split_req *rq, tileatom_op_result *res,
                         tileatom_error *err);
/* The pipelined tac_split: queues the parts after the same checks and records them for
 * tac_split_collect; *id gets the first part's id. */
TAC_HIDDEN int tac_split_submit(tileatom_client *c, const tac_split_req *rq, uint64_t *id,
                                tileatom_error *err);
/* The pending requests, oldest first, whose responses (all parts) are queued whole. */
TAC_HIDDEN size_t tac_split_ready(const tileatom_client *c);
/* tileatom_collect for a split submit: merges its parts' responses into *out. */
TAC_HIDDEN int tac_split_collect(tileatom_client *c, tileatom_response *out, tileatom_error *err);
/* Frees c's records of split submits (tileatom_close, before tac_client_free). */
TAC_HIDDEN void tac_split_client_free(tileatom_client *c);

/* ---- shared buffers (tac_shm.c) ------------------------------------------------------- */
/* Arrays of m (and m->old_out) in a buffer of c become references to it. */
TAC_HIDDEN void tac_shm_rewrite(tileatom_client *c, tac_msg *m);
/* Copies m's inline operands of c->stage_min bytes or more (in all) into the staging buffer
 * (Unix sockets; best effort, true when copied). pipelined: only while that buffer is free,
 * made or grown only with nothing pending; the caller then sets c->staged_id. */
TAC_HIDDEN bool tac_shm_stage(tileatom_client *c, tac_msg *m, bool pipelined);
/* Frees c's buffers (tileatom_close, before tac_client_free). */
TAC_HIDDEN void tac_shm_client_free(tileatom_client *c);
/* Default operand bytes of a request from which tac_shm_stage stages it. */
#define TAC_SHM_STAGE_MIN (1u << 20)
/* The buffer of c holding [p, p + len) (else a device buffer holding p), or NULL. */
TAC_HIDDEN struct tileatom_buffer *tac_shm_ref_buffer(const tileatom_client *c, const void *p,
                                                      size_t len);
/* True when c talks over a Unix socket (shared and device buffers work). */
TAC_HIDDEN bool tac_shm_unix(tileatom_client *c);
/* Bytes of a GPU's UUID (cuDeviceGetUuid). */
#define TAC_GPU_UUID_SIZE 16
/* tileatom_device_buffer_register, the buffer's GPU named by gpu_uuid (TAC_GPU_UUID_SIZE
 * bytes, or NULL: not said). */
TAC_HIDDEN int tac_shm_register_device(tileatom_client *client, const void *ipc_handle,
                                       const uint8_t *gpu_uuid, size_t size, const void *device_ptr,
                                       tileatom_buffer **out, tileatom_error *err);

/* ---- raw device pointers (tac_cuptr.c) ------------------------------------------------ */
/* Default of tileatom_set_device_ptr_threshold: arrays of 64 KiB or more are looked up. */
#define TAC_CUPTR_MIN (64u << 10)
/* Registers on c the allocation of every operand array of m (and m->old_out) that is CUDA
 * device memory, once, before m is staged, split or sent; TILEATOM_OK, or why it cannot. */
TAC_HIDDEN int tac_cuptr_prepare(tileatom_client *c, tac_msg *m, tileatom_error *err);
/* TILEATOM_E_INVALID_ARGUMENT when the output buffer [p, p + len) is device memory. */
TAC_HIDDEN int tac_cuptr_refuse(tileatom_client *c, const void *p, size_t len, const char *what,
                                tileatom_error *err);
/* The threshold from $TILEATOM_DEVICE_POINTERS ("off", "no": 0; bytes) or TAC_CUPTR_MIN. */
TAC_HIDDEN size_t tac_cuptr_default_min(void);
/* Whether the process has loaded libcuda.so.1 (the answer is cached; see tac_cuptr.c). */
TAC_HIDDEN bool tac_cuptr_driver_loaded(void);
/* For the tests: takes the driver from the dlopen handle handle (none found yet). */
TAC_HIDDEN bool tac_cuptr_load_from(void *handle);
/* How many times the driver was looked for with dlopen in this process (for the tests). */
TAC_HIDDEN unsigned long tac_cuptr_lookups(void);
/* Allocations registered on c for raw device pointers. */
TAC_HIDDEN size_t tac_cuptr_count(const tileatom_client *c);

/* ---- synchronous round trips (tac_call.c; uses tac_cuptr.c, tac_shm.c and below) ----- */
/* Sends m (its builder's rc: anything but TILEATOM_OK is returned at once), prepared for
 * device pointers and shared buffers, and waits for its response (c->last, its status). */
TAC_HIDDEN int tac_roundtrip(tileatom_client *c, tac_msg *m, int rc, tileatom_error *err);

/* ---- errors (tac_util.c) ------------------------------------------------------------- */
/* Records code and a printf-style message in err (when not NULL); returns code. */
TAC_HIDDEN int tac_err(tileatom_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- codec (tac_codec.c) ------------------------------------------------------------- */
/* Each builder initialises *m as one request (id 0: tac_conn_submit assigns it). */
/* A request whose body has no fields set (ping, stats, snapshot; the caller sets those of
 * hello, auth, list and register_buffer in m->body). */
TAC_HIDDEN int tac_build_empty(tac_msg *m, tileatom_request_kind kind);
TAC_HIDDEN int tac_build_create(tac_msg *m, const char *name, tileatom_dtype dtype, int rank,
                                const int64_t *shape, const void *fill, tileatom_error *err);
/* A request that names a tile and nothing else: DESTROY or DESCRIBE. */
TAC_HIDDEN int tac_build_named(tac_msg *m, tileatom_request_kind kind, const char *name,
                               tileatom_error *err);
TAC_HIDDEN int tac_build_read(tac_msg *m, const char *tile, const tileatom_region *region,
                              tileatom_error *err);
TAC_HIDDEN int tac_build_write(tac_msg *m, const char *tile, const tileatom_region *region,
                               const tileatom_array *values, tileatom_error *err);
/* An element-wise, scatter or indexed atomic request as rq describes it (returns_old is not
 * read). */
TAC_HIDDEN int tac_build_atomic(tac_msg *m, const tac_split_req *rq, tileatom_error *err);
/* The options an atomic_at request travels with: opts (NULL: the defaults) with want_old
 * forced on and no output buffer (the old value comes back in the response). */
TAC_HIDDEN tileatom_op_options tac_atomic_at_options(const tileatom_op_options *opts);
/* Single element at a flat index: an indexed flat request with scalar operands that point
 * into *value_arr / *compare_arr (which the caller keeps alive). want_old is forced on. */
TAC_HIDDEN int tac_build_atomic_at(tac_msg *m, const char *tile, tileatom_op op, int64_t flat_index,
                                   tileatom_dtype dtype, const void *value, const void *compare,
                                   const tileatom_op_options *opts, tileatom_array *value_arr,
                                   tileatom_array *compare_arr, tileatom_error *err);
/* Memory ops: kind is GATHER, SCATTER_STORE, ATOMIC_LOAD or ATOMIC_STORE; operand is the
 * padding (gather) or the values (stores), NULL for atomic load. */
TAC_HIDDEN int tac_build_memory(tac_msg *m, tileatom_request_kind kind, const char *tile,
                                const tileatom_region *window, const tileatom_addr *addr,
                                const tileatom_array *operand, const tileatom_op_options *opts,
                                tileatom_error *err);

/* Checks a response against the kind it answers: a non-OK status is returned with the
 * daemon's message in err; a body that does not fit the kind is TILEATOM_E_PROTOCOL. */
TAC_HIDDEN int tac_check_response(const Tileatom__Response *r, tileatom_request_kind kind,
                                  tileatom_error *err);
/* Copies a wire TileInfo into the public struct, checking what callers rely on: name
 * length, a tile dtype, rank 1..4, extents >= 1 with a product up to 2^56. */
TAC_HIDDEN int tac_tile_info_from_wire(tileatom_tile_info *dst, const Tileatom__TileInfo *src,
                                       tileatom_error *err);
/* Parses an address: *is_unix for a socket path, else host (malloc'd, brackets stripped)
 * and port. */
TAC_HIDDEN int tac_parse_address(const char *address, bool *is_unix, char **host, char **port,
                                 tileatom_error *err);

/* ---- connection (tac_conn.c) ------------------------------------------------------------ */
/* Opens a non-blocking socket to address with a timeout (<= 0: none) and allocates *out, a
 * client around it. */
TAC_HIDDEN int tac_conn_open(const char *address, int timeout_ms, tileatom_client **out,
                             tileatom_error *err);
/* Frees a client and closes its socket. */
TAC_HIDDEN void tac_client_free(tileatom_client *c);
/* Assigns the next id to m, encodes it into the output buffer and queues it as pending;
 * the buffer is written out when flush is set, at TAC_FLUSH_THRESHOLD bytes, or when the
 * frame alone is that large or carries fd (>= 0: SCM_RIGHTS). Every call below that writes
 * or waits is bounded by c->io_timeout_ms (<= 0: none); a failed write breaks c. */
TAC_HIDDEN int tac_conn_submit(tileatom_client *c, tac_msg *m, bool flush, int fd, uint64_t *id,
                               tileatom_error *err);
/* Writes every buffered request (queueing responses that arrive meanwhile). */
TAC_HIDDEN int tac_conn_flush(tileatom_client *c, tileatom_error *err);
/* Receives the response to the oldest pending request (after writing out the buffer),
 * checks its id and keeps it in c->last; *kind gets its kind. The status is not examined. */
TAC_HIDDEN int tac_conn_receive(tileatom_client *c, tileatom_request_kind *kind,
                                tileatom_error *err);
/* tac_conn_receive for the newest pending request; the older ones' responses stay queued. */
TAC_HIDDEN int tac_conn_receive_newest(tileatom_client *c, tileatom_request_kind *kind,
                                       tileatom_error *err);
/* Writes out the buffer and queues responses until at most max_unanswered pending requests
 * have none. */
TAC_HIDDEN int tac_conn_wait_window(tileatom_client *c, size_t max_unanswered, tileatom_error *err);
/* tac_conn_submit for a call c->tpl matched (tac_tpl_match), written by tac_tpl_write;
 * *taken false (nothing done) when it cannot be: the caller then builds it. */
TAC_HIDDEN int tac_conn_submit_template(tileatom_client *c, const tileatom_array *indices,
                                        const tileatom_array *values, const tileatom_array *compare,
                                        bool *taken, uint64_t *id, tileatom_error *err);
/* The payload bytes of request m (its id included). */
TAC_HIDDEN size_t tac_request_size(const tac_msg *m);
/* TILEATOM_E_STATE when c has pipelined responses not collected yet, else TILEATOM_OK. */
TAC_HIDDEN int tac_none_pending(const tileatom_client *c, tileatom_error *err);
/* tileatom_poll's receive: one non-blocking read while responses are missing. */
TAC_HIDDEN int tac_conn_poll(tileatom_client *c, tileatom_error *err);
/* Marks the connection broken with err's code and message; returns the code. */
TAC_HIDDEN int tac_conn_break(tileatom_client *c, tileatom_error *err);

#endif /* TAC_INTERNAL_H */
