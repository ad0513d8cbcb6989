/* tac_internal.h: private declarations of libtileatom-client (not installed). The library
 * has layers, each calling only those below it: tac_codec.c and tac_util.c turn the public
 * argument structs into protobuf-c request messages (borrowing the caller's memory, no
 * copies) and check responses; tac_conn.c owns the socket (connect with timeout, framed
 * send/receive, the output buffer that coalesces submitted requests, the queue of
 * requests awaiting responses); tac_shm.c holds shared and device buffers and rewrites
 * requests to refer to them; tac_cuptr.c recognises raw CUDA device pointers among the
 * operands and registers their allocations as device buffers (through the public tac_shm.c
 * calls); tac_call.c makes synchronous round trips (tac_roundtrip) on top of those;
 * tac_split.c sends requests over the frame limit in parts; tac_api.c implements the public
 * calls on top of them all. */
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

/* Marks a function internal to the library even when it is compiled without
 * -fvisibility=hidden (the unit tests compile the sources directly). */
#define TAC_HIDDEN __attribute__((visibility("hidden")))

/* Default largest response payload accepted (1 GiB). */
#define TAC_DEFAULT_MAX_RESPONSE (1u << 30)
/* The daemon's frame limit assumed when its Hello does not state one (its default). */
#define TAC_DEFAULT_MAX_FRAME (64u << 20)
/* Bytes read from the socket per recv(). */
#define TAC_RECV_CHUNK 65536
/* Submitted request bytes buffered before tac_conn_submit writes them out; a frame at
 * least this large is written at once (from its own buffer, not copied). */
#define TAC_FLUSH_THRESHOLD 65536

/* A request awaiting its response. */
typedef struct tac_pending {
	uint64_t id;                /* the request id */
	tileatom_request_kind kind; /* what was asked */
	bool part;                  /* a part of a split submit (tac_split.c merges them) */
} tac_pending;

/* A split submit whose parts await tileatom_collect (tac_split.c). */
typedef struct tac_split_pending tac_split_pending;

/* Payloads up to this size are queued in the connection's receive store (no allocation
 * per response in steady state); larger ones get their own allocation. */
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
	unsigned busy_poll_us;     /* a response wait reads without sleeping this long first
	                              (tileatom_set_busy_poll; 0: never) */
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
	ta_frame_buf rxstore;      /* queued payloads of up to TAC_RXSTORE_FRAME_MAX bytes (len:
	                              consumed ones included) */
	size_t rxstore_from;       /* bytes at the start of rxstore already consumed */
	ta_frame_buf txbuf;        /* framed requests submitted but not yet written */
	Tileatom__Response *last;  /* the last decoded response (kept for pointers) */
	tac_wire_response fast;    /* storage of the data-plane responses (last may point to
	                              fast.resp; tac_wire.c) */
	tac_tpl tpl;               /* the writer's bytes of the last small atomic request, for
	                              the next call of its key (tac_tpl_match; tac_wire.h) */
	char server_version[64];   /* from the handshake */
	char server_backend[32];   /* from the handshake */
	uint32_t max_frame;        /* the daemon's frame limit from the handshake (or the
	                              default when it did not say) */

	/* shared buffers (tac_shm.c) */
	int unix_socket;                 /* 1: a Unix socket (shared buffers work), 0: not, -1: ? */
	struct tileatom_buffer **bufs;   /* shared buffers registered by the caller */
	size_t nbufs;                    /* entries in bufs */
	size_t capbufs;                  /* capacity of bufs */
	struct tileatom_buffer *staging; /* the library's own buffer for large synchronous
	                                    operands (NULL until needed) */
	size_t stage_min;                /* operand bytes from which synchronous calls stage them
	                                    in shared memory (0: never; tileatom_set_shm_threshold) */
	const void *old_from;            /* the last synchronous call's old values went to this
	                                    shared-buffer address (NULL: they came inline) */
	uint64_t staged_id;              /* the pipelined request whose operands the staging
	                                    buffer holds until it is collected (0: none) */

	/* split submits (tac_split.c) */
	tac_split_pending *splits;      /* the oldest split submit not collected (a FIFO) */
	tac_split_pending *splits_tail; /* the newest one */
	size_t split_extra;             /* pending entries beyond one per split submit (parts
	                                   2..n not yet received), which tileatom_pending omits */

	/* raw device pointers (tac_cuptr.c) */
	size_t cuptr_min;              /* operand bytes from which the driver is asked whether an
	                                  array is device memory (0: never) */
	struct tac_cuptr_entry *cuptr; /* allocations registered for raw device pointers */
	size_t ncuptr;                 /* entries in cuptr */
	size_t capcuptr;               /* capacity of cuptr */
};

/* Requests of c whose responses tileatom_collect has yet to return (a split submit counts
 * once): what tileatom_pending reports. */
static inline size_t tac_pending_requests(const tileatom_client *c)
{
	return c->pending_count - c->split_extra;
}

/* Storage for one request message and every sub-message it may point to. Built on the
 * stack by the tac_build_* functions; it borrows the caller's operand memory. The builders
 * clear only the fields before body (msg_begin in tac_codec.c: a whole clear was 200
 * instructions of a pipelined add); from body on, a field is set by the builder that uses
 * it before anything reads it, except the arrays values..index[3], of which an unused one
 * has only data.len 0, data.data NULL and shared NULL (what tac_cuptr.c, tac_shm.c and
 * tac_split.c read of every array). */
typedef struct tac_msg {
	Tileatom__Request req;      /* the top-level message */
	tileatom_request_kind kind; /* which body is set */
	Tileatom__Options options;  /* op options */
	int64_t scalar_index;       /* atomic_at: the flat index */
	void *old_out;              /* synchronous calls: where old values go */
	size_t old_out_size;        /* bytes at old_out */
	bool cuptr_done;            /* tac_cuptr_prepare has looked at the operands already */
	bool want_old_asked;        /* the caller's want_old (a template's key; options.want_old
	                               is also set for ops that always return what they read) */

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
/* A synchronous atomic request (element-wise, scatter or indexed) as the public call got
 * it, for tac_split. */
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
/* False when the old values the whole request returns (want_old, CAS) would not fit one
 * response frame, so that shared-memory staging cannot send it whole (may describe the tile
 * of an element-wise request over the whole tile). */
TAC_HIDDEN bool tac_split_old_fit(tileatom_client *c, const tac_split_req *rq);
/* Sends a request over the frame limit in parts along the first axis of its element shape,
 * after checking what a split needs (the rules are in tileatom.h at tileatom_indexed). */
TAC_HIDDEN int tac_split(tileatom_client *c, const tac_split_req *rq, tileatom_op_result *res,
                         tileatom_error *err);
/* The pipelined twin of tac_split: queues the parts of a request over the frame limit as
 * separate frames (written as the socket takes them) after the same checks, and records
 * them so that tileatom_collect merges their responses into one (tac_split_collect). *id
 * gets the first part's id. */
TAC_HIDDEN int tac_split_submit(tileatom_client *c, const tac_split_req *rq, uint64_t *id,
                                tileatom_error *err);
/* The pending requests, oldest first, whose responses (all parts of a split submit) are
 * whole in the frame queue (tileatom_poll). */
TAC_HIDDEN size_t tac_split_ready(const tileatom_client *c);
/* True when the oldest pending response belongs to a split submit. */
TAC_HIDDEN bool tac_split_due(const tileatom_client *c);
/* tileatom_collect for a split submit: receives every part's response and merges them into
 * *out (summed counts, old values in the caller's old_out, the first failure). */
TAC_HIDDEN int tac_split_collect(tileatom_client *c, tileatom_response *out, tileatom_error *err);
/* Frees c's records of split submits (tileatom_close, before tac_client_free). */
TAC_HIDDEN void tac_split_client_free(tileatom_client *c);

/* ---- shared buffers (tac_shm.c) ------------------------------------------------------- */
/* Arrays of m whose bytes lie in a shared buffer of c become references to it (and m's old
 * values, when m->old_out lies in one, are written there by the daemon). */
TAC_HIDDEN void tac_shm_rewrite(tileatom_client *c, tac_msg *m);
/* Synchronous calls on a Unix socket: copies operands of m above TAC_SHM_STAGE_MIN bytes
 * (in all) into the library's staging buffer so that they travel by reference; old values
 * too. Best effort: on any failure m is left inline. pipelined: for a pipelined request
 * over the frame limit, only while the staging buffer is free, created or grown only with
 * nothing pending (the caller then sets c->staged_id to its id once it is submitted). True
 * when m's operands were copied. */
TAC_HIDDEN bool tac_shm_stage(tileatom_client *c, tac_msg *m, bool pipelined);
/* The response to request id was collected: the staging buffer is free again if id held
 * it. */
TAC_HIDDEN void tac_shm_collected(tileatom_client *c, uint64_t id);
/* Frees c's buffers (tileatom_close, before tac_client_free). */
TAC_HIDDEN void tac_shm_client_free(tileatom_client *c);
/* Default operand bytes of one synchronous request from which tac_shm_stage uses shared
 * memory. */
#define TAC_SHM_STAGE_MIN (1u << 20)
/* The buffer of c an array at p (len bytes) would travel by reference in (one holding all
 * of it, else a device buffer holding its first byte), or NULL. */
TAC_HIDDEN struct tileatom_buffer *tac_shm_ref_buffer(const tileatom_client *c, const void *p,
                                                      size_t len);
/* True when c talks over a Unix socket (shared and device buffers work). */
TAC_HIDDEN bool tac_shm_unix(tileatom_client *c);

/* ---- raw device pointers (tac_cuptr.c) ------------------------------------------------ */
/* Longest busy poll tileatom_set_busy_poll and $TILEATOM_BUSY_POLL_US accept (1 s). */
#define TAC_BUSY_POLL_MAX 1000000u

/* Default of tileatom_set_device_ptr_threshold: arrays of 64 KiB or more are looked up. */
#define TAC_CUPTR_MIN (64u << 10)
/* Before m is staged, split or sent: every operand array of m (and m->old_out, when not
 * NULL) that is CUDA device memory gets its allocation registered on c as a device buffer
 * (once; see tac_cuptr.c for which arrays are looked up), so that it travels by reference.
 * Marks m done; TILEATOM_OK, or why such memory cannot be sent. */
TAC_HIDDEN int tac_cuptr_prepare(tileatom_client *c, tac_msg *m, tileatom_error *err);
/* TILEATOM_E_INVALID_ARGUMENT when the output buffer [p, p + len) (what names it), which the
 * library writes from the host, is device memory; else TILEATOM_OK. */
TAC_HIDDEN int tac_cuptr_refuse(tileatom_client *c, const void *p, size_t len, const char *what,
                                tileatom_error *err);
/* The threshold a new connection starts with: $TILEATOM_DEVICE_POINTERS ("off" or "no":
 * 0; a byte count) or TAC_CUPTR_MIN. */
TAC_HIDDEN size_t tac_cuptr_default_min(void);
/* Whether the process has loaded libcuda.so.1 (the answer is cached; see tac_cuptr.c). */
TAC_HIDDEN bool tac_cuptr_driver_loaded(void);
/* For the tests: takes the driver's entry points from the dlopen handle handle (e.g. a
 * fake driver in the test program) when none was found yet; false when one is missing. */
TAC_HIDDEN bool tac_cuptr_load_from(void *handle);
/* How many times the driver was looked for with dlopen in this process (for the tests). */
TAC_HIDDEN unsigned long tac_cuptr_lookups(void);
/* Allocations registered on c for raw device pointers. */
TAC_HIDDEN size_t tac_cuptr_count(const tileatom_client *c);
/* Frees c's cache (tac_shm_client_free; the buffers themselves are in c's list). */
TAC_HIDDEN void tac_cuptr_client_free(tileatom_client *c);

/* ---- synchronous round trips (tac_call.c; uses tac_cuptr.c, tac_shm.c and below) ----- */
/* Sends m, which its builder returned rc for (not TILEATOM_OK: returned at once), at once
 * (raw device pointers registered, staged and rewritten for shared buffers) and waits for
 * its response (c->last); returns its status. */
TAC_HIDDEN int tac_roundtrip(tileatom_client *c, tac_msg *m, int rc, tileatom_error *err);

/* ---- errors (tac_util.c) ------------------------------------------------------------- */

/* Records code and a printf-style message in err (when not NULL); returns code. */
TAC_HIDDEN int tac_err(tileatom_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- codec (tac_codec.c) ------------------------------------------------------------- */

/* Each builder initialises *m as one request (id 0: tac_conn_submit assigns it). */
TAC_HIDDEN int tac_build_hello(tac_msg *m, const char *client_name);
/* An Auth request borrowing the client nonce and the proof (n_len and TA_AUTH_PROOF bytes). */
TAC_HIDDEN int tac_build_auth(tac_msg *m, const uint8_t *client_nonce, size_t n_len,
                              const uint8_t *proof);
/* A request whose body has no fields set (ping, stats, snapshot; list before its paging). */
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

/* Checks a decoded response against the request kind it answers: a non-OK status becomes
 * the return value with the daemon's message in err; a body that does not fit the kind is
 * TILEATOM_E_PROTOCOL. */
TAC_HIDDEN int tac_check_response(const Tileatom__Response *r, tileatom_request_kind kind,
                                  tileatom_error *err);
/* Copies a wire TileInfo into the public struct, checking what callers rely on: name
 * length, a tile dtype, rank 1..4, extents >= 1 with a product up to 2^56. */
TAC_HIDDEN int tac_tile_info_from_wire(tileatom_tile_info *dst, const Tileatom__TileInfo *src,
                                       tileatom_error *err);
/* Parses an address: *is_unix set for a socket path; else host (malloc'd, brackets
 * stripped) and port. Returns TILEATOM_OK or TILEATOM_E_INVALID_ARGUMENT. */
TAC_HIDDEN int tac_parse_address(const char *address, bool *is_unix, char **host, char **port,
                                 tileatom_error *err);

/* ---- connection (tac_conn.c) ------------------------------------------------------------ */

/* Opens a non-blocking socket to address with a timeout (<= 0: none) and allocates *out, a
 * client around it. */
TAC_HIDDEN int tac_conn_open(const char *address, int timeout_ms, tileatom_client **out,
                             tileatom_error *err);
/* Frees a client and closes its socket. */
TAC_HIDDEN void tac_client_free(tileatom_client *c);
/* Assigns the next id to m, encodes it into the output buffer and queues it as pending.
 * The buffer is written out when flush is set (synchronous calls), when it reaches
 * TAC_FLUSH_THRESHOLD bytes, or when the frame alone is that large or carries fd (>= 0:
 * SCM_RIGHTS; it is then written after what is buffered, without a copy). Every call below
 * that writes or waits is bounded by c->io_timeout_ms (<= 0: none). A failed write breaks
 * the connection. */
TAC_HIDDEN int tac_conn_submit(tileatom_client *c, tac_msg *m, bool flush, int fd, uint64_t *id,
                               tileatom_error *err);
/* Writes every buffered request, reading responses that arrive meanwhile into the frame
 * queue whenever the socket is not writable. A failure breaks the connection. TILEATOM_OK
 * when nothing was buffered. */
TAC_HIDDEN int tac_conn_flush(tileatom_client *c, tileatom_error *err);
/* Receives the response to the oldest pending request, checks its id, pops it, and keeps it
 * in c->last (freeing the previous one); buffered requests are written out first, within
 * the same bound. *kind gets the request kind. Returns TILEATOM_OK or a client error (the
 * daemon's status is not examined here). */
TAC_HIDDEN int tac_conn_receive(tileatom_client *c, tileatom_request_kind *kind,
                                tileatom_error *err);
/* Receives the response to the newest pending request (just submitted), reading those of
 * the older pending requests into the frame queue, where they wait for tac_conn_receive;
 * pops it and keeps it in c->last. Returns TILEATOM_OK or a client error. */
TAC_HIDDEN int tac_conn_receive_newest(tileatom_client *c, tileatom_request_kind *kind,
                                       tileatom_error *err);
/* Writes out what is buffered and reads responses into the frame queue (where they wait
 * for tac_conn_receive) until at most max_unanswered pending requests have no response
 * yet; TILEATOM_OK at once when that holds already. A failure breaks the connection. */
TAC_HIDDEN int tac_conn_wait_window(tileatom_client *c, size_t max_unanswered, tileatom_error *err);
/* tac_conn_submit for a pipelined call c->tpl matched (tac_tpl_match: only the data of
 * indices, values and compare differ from the request it keeps), written by tac_tpl_write;
 * *taken false (and nothing done) when the pending ring or the output buffer cannot grow or
 * the frame limit is tiny: the caller then builds and submits it the general way. */
TAC_HIDDEN int tac_conn_submit_template(tileatom_client *c, const tileatom_array *indices,
                                        const tileatom_array *values, const tileatom_array *compare,
                                        bool *taken, uint64_t *id, tileatom_error *err);
/* The payload bytes of request m (its id included): the writer's count for a data-plane
 * request (tac_wire.c), protobuf-c's for the others. */
TAC_HIDDEN size_t tac_request_size(const tac_msg *m);
/* Marks the newest pending request as a part of a split submit. */
TAC_HIDDEN void tac_conn_mark_part(tileatom_client *c);
/* tileatom_poll's receive: one non-blocking read while responses are missing; OK, or the
 * broken connection's error (*err). */
TAC_HIDDEN int tac_conn_poll(tileatom_client *c, tileatom_error *err);
/* Marks the connection broken with err's code and message; returns the code. */
TAC_HIDDEN int tac_conn_break(tileatom_client *c, tileatom_error *err);

#endif /* TAC_INTERNAL_H */
