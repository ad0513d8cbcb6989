/* tileatom.h: the public C API of libtileatom-client, the client library of tileatomd (the
 * GPU atomics service). This is the library's only installed header.
 *
 * A daemon holds named, typed n-d "tiles" in GPU (or CPU) memory and applies atomic ops to
 * them. A client connects (Unix socket path or host:port), then creates, reads, writes and
 * updates tiles. Element data always travels as packed little-endian bytes of the tile's
 * dtype (or of the operand's own dtype for indices and masks), row-major.
 *
 * Return values: every call that can fail returns a tileatom_status (TILEATOM_OK = 0) and,
 * when err is not NULL, fills *err with the same code and a message naming the problem
 * (the daemon's message for errors it reports). Codes 1..9 are the daemon's wire statuses;
 * codes from 100 up are raised by the library itself.
 *
 * After an I/O, timeout or protocol error the connection is broken: every later call on
 * that handle returns TILEATOM_E_IO until tileatom_close(). Daemon errors (codes 1..9)
 * leave the connection usable.
 *
 * Thread safety: a tileatom_client handle may be used by one thread at a time (calls on one
 * handle must be serialised by the caller; none of them block on other handles). Distinct
 * handles are fully independent and may be used concurrently from different threads. The
 * free functions (tileatom_strerror, tileatom_dtype_*, tileatom_value_*, ...) are
 * thread-safe. The library never raises SIGPIPE (it sends with MSG_NOSIGNAL).
 *
 * Pipelining: tileatom_submit_* encode one request into the connection's output buffer and
 * return its id without waiting; tileatom_collect() returns the responses, which come back
 * strictly in submission order. Submitted bytes leave in few send()s: the buffer is written
 * out when it reaches 64 KiB (a request at least that large goes out at once, behind the
 * buffered ones), when tileatom_collect() is called (everything buffered, before it waits
 * for the first response), by tileatom_flush() and by tileatom_close(); until then the
 * daemon has not seen the request, so call one of them rather than waiting for a
 * pipelined request to take effect (a thread driving several connections flushes each
 * before it collects from any). A write error breaks the connection and is reported by
 * the call that wrote (a submit or a collect) and by every later call. The synchronous
 * calls send their request at once, and refuse to run (TILEATOM_E_STATE) while submitted
 * responses are still uncollected. Writing never deadlocks against a daemon that stops
 * reading: while a write would block, responses already arriving are buffered for
 * tileatom_collect(). An atomic submit over the daemon's frame limit is split into parts
 * and collected as one response (see "pipelined calls" below). */
#ifndef TILEATOM_H
#define TILEATOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the symbols the shared library exports (everything else is hidden). */
#ifndef TA_API
#if defined(__GNUC__) && __GNUC__ >= 4
#define TA_API __attribute__((visibility("default")))
#else
#define TA_API
#endif
#endif

/* Highest tile (and operand) rank. */
#define TILEATOM_MAX_RANK 4
/* Longest tile name in bytes, excluding the terminating NUL. */
#define TILEATOM_NAME_MAX 64
/* Room for an error message, NUL included. */
#define TILEATOM_MSG_MAX 256
/* Protocol version this library speaks. */
#define TILEATOM_PROTOCOL_VERSION 1

/* Status codes: 0..9 equal the wire enum Status; 100 and up are client-side. */
typedef enum tileatom_status {
	TILEATOM_OK = 0,                   /* success */
	TILEATOM_E_INVALID_ARGUMENT = 1,   /* the request is malformed or illegal */
	TILEATOM_E_NOT_FOUND = 2,          /* no such tile */
	TILEATOM_E_ALREADY_EXISTS = 3,     /* a tile of that name exists */
	TILEATOM_E_OUT_OF_RANGE = 4,       /* an index or region lies outside the tile */
	TILEATOM_E_RESOURCE_EXHAUSTED = 5, /* a daemon limit (memory, frame size, ...) */
	TILEATOM_E_UNIMPLEMENTED = 6,      /* the backend does not implement this */
	TILEATOM_E_UNAVAILABLE = 7,        /* the daemon is shutting down or busy */
	TILEATOM_E_PERMISSION_DENIED = 8,  /* not allowed */
	TILEATOM_E_INTERNAL = 9,           /* a daemon bug or device failure */
	TILEATOM_E_IO = 100,               /* socket error, or the daemon closed the connection */
	TILEATOM_E_TIMEOUT = 101,          /* the connect or I/O timeout expired */
	TILEATOM_E_PROTOCOL = 102,         /* malformed / unexpected response, version mismatch */
	TILEATOM_E_NOMEM = 103,            /* the client ran out of memory */
	TILEATOM_E_STATE = 104             /* not allowed now (e.g. uncollected responses) */
} tileatom_status;

/* An error: code plus message. Zero-initialise it or leave it to the library. */
typedef struct tileatom_error {
	int code;                       /* a tileatom_status */
	char message[TILEATOM_MSG_MAX]; /* NUL-terminated; names the problem */
} tileatom_error;

/* Element types (values equal the wire enum DType). BOOL is for masks only. */
typedef enum tileatom_dtype {
	TILEATOM_DTYPE_NONE = 0, /* unspecified / invalid */
	TILEATOM_INT32 = 1,      /* int32_t */
	TILEATOM_UINT32 = 2,     /* uint32_t */
	TILEATOM_INT64 = 3,      /* int64_t */
	TILEATOM_UINT64 = 4,     /* uint64_t */
	TILEATOM_FLOAT32 = 5,    /* IEEE binary32 */
	TILEATOM_FLOAT64 = 6,    /* IEEE binary64 */
	TILEATOM_FLOAT16 = 7,    /* IEEE binary16, as uint16_t bits */
	TILEATOM_BFLOAT16 = 8,   /* bfloat16, as uint16_t bits */
	TILEATOM_BOOL = 9        /* one byte: 0 off, anything else on (masks) */
} tileatom_dtype;

/* Atomic operations (values equal the wire enum Op). */
typedef enum tileatom_op {
	TILEATOM_OP_NONE = 0, /* unspecified */
	TILEATOM_OP_ADD = 1,  /* x += v */
	TILEATOM_OP_SUB = 2,  /* x -= v */
	TILEATOM_OP_MIN = 3,  /* x = min(x, v) */
	TILEATOM_OP_MAX = 4,  /* x = max(x, v) */
	TILEATOM_OP_EXCH = 5, /* x = v */
	TILEATOM_OP_CAS = 6,  /* if x == compare (bitwise): x = v */
	TILEATOM_OP_AND = 7,  /* x &= v (integers) */
	TILEATOM_OP_OR = 8,   /* x |= v (integers) */
	TILEATOM_OP_XOR = 9   /* x ^= v (integers) */
} tileatom_op;

/* Memory-ordering semantics (values equal the wire enum Sem). */
typedef enum tileatom_sem {
	TILEATOM_SEM_RELAXED = 0, /* no ordering */
	TILEATOM_SEM_ACQUIRE = 1, /* acquire (RMW ops and loads) */
	TILEATOM_SEM_RELEASE = 2, /* release (RMW ops and stores) */
	TILEATOM_SEM_ACQ_REL = 3  /* both (RMW ops) */
} tileatom_sem;

/* Scope (values equal the wire enum Scope). */
typedef enum tileatom_scope {
	TILEATOM_SCOPE_GPU = 0,     /* the whole device (default) */
	TILEATOM_SCOPE_CTA = 1,     /* one thread block */
	TILEATOM_SCOPE_CLUSTER = 2, /* one block cluster */
	TILEATOM_SCOPE_SYS = 3      /* device and host */
} tileatom_scope;

/* Where an op accumulates (values equal the wire enum Space). */
typedef enum tileatom_space {
	TILEATOM_SPACE_GLOBAL = 0, /* every element updates the tile directly (default) */
	TILEATOM_SPACE_SHARED = 1  /* private per-block accumulation, one atomic per element */
} tileatom_space;

/* A dense operand: dtype, row-major shape (rank 0 = a scalar of one element) and packed
 * little-endian data of prod(shape) * dtype-size bytes, owned by the caller. */
typedef struct tileatom_array {
	tileatom_dtype dtype;             /* element type */
	int rank;                         /* 0..TILEATOM_MAX_RANK */
	int64_t shape[TILEATOM_MAX_RANK]; /* extents, rank entries used */
	const void *data;                 /* the elements */
} tileatom_array;

/* A box inside a tile: origin and shape have the tile's rank. A NULL region pointer means
 * the whole tile. */
typedef struct tileatom_region {
	int rank;                          /* entries used in origin and shape */
	int64_t origin[TILEATOM_MAX_RANK]; /* first coordinate along each axis */
	int64_t shape[TILEATOM_MAX_RANK];  /* extent along each axis */
} tileatom_region;

/* How a memory op (gather, scatter store, atomic load/store) addresses the tile. */
typedef enum tileatom_addr_kind {
	TILEATOM_ADDR_REGION = 0,  /* element-wise over `region` (NULL: the window) */
	TILEATOM_ADDR_SCATTER = 1, /* torch.scatter_ rules: index[0] addresses axis `dim` */
	TILEATOM_ADDR_INDEXED = 2, /* one index array per tile axis, broadcast together */
	TILEATOM_ADDR_FLAT = 3     /* index[0] holds row-major offsets into the window */
} tileatom_addr_kind;

/* Addressing of a memory op. Index arrays are INT32 or INT64. */
typedef struct tileatom_addr {
	tileatom_addr_kind kind;       /* which form */
	const tileatom_region *region; /* REGION: the box (NULL: the window or whole tile) */
	int dim;                       /* SCATTER: the axis the indices address */
	int n_index;                   /* INDEXED: the tile rank; SCATTER and FLAT: 1 */
	const tileatom_array *index;   /* n_index index arrays */
} tileatom_addr;

/* Options shared by the atomic and memory ops. Initialise with tileatom_op_options_init()
 * or TILEATOM_OP_OPTIONS_INIT (a NULL options pointer means the same defaults). */
typedef struct tileatom_op_options {
	tileatom_sem sem;           /* memory order (default relaxed) */
	tileatom_scope scope;       /* scope (default gpu) */
	tileatom_space space;       /* global (default) or shared accumulation */
	const tileatom_array *mask; /* optional BOOL mask broadcast to the element shape */
	bool check_bounds;          /* default true: out-of-range elements are skipped and
	                               counted; false: any out-of-range index fails the request */
	bool want_old;              /* return the pre-RMW values into old_out (masked-off
	                               and skipped elements: CAS's expected value, else 0) */
	void *old_out;              /* synchronous calls (and pipelined ones that are split):
	                               receives the old values (dtype of the tile, element
	                               shape, packed) when want_old */
	size_t old_out_size;        /* bytes available at old_out */
} tileatom_op_options;

/* Default options: relaxed, gpu, global, no mask, bounds checking on, no old values. */
#define TILEATOM_OP_OPTIONS_INIT                                                                   \
	{                                                                                          \
		TILEATOM_SEM_RELAXED, TILEATOM_SCOPE_GPU, TILEATOM_SPACE_GLOBAL, NULL, true,       \
		    false, NULL, 0                                                                 \
	}

/* What an atomic or memory op did. */
typedef struct tileatom_op_result {
	uint64_t skipped;                     /* elements skipped as out of range */
	uint64_t applied;                     /* elements applied (not masked, not skipped) */
	int old_rank;                         /* rank of the returned old/loaded values */
	int64_t old_shape[TILEATOM_MAX_RANK]; /* their shape */
	size_t old_bytes;                     /* their size in bytes (copied when it fits) */
} tileatom_op_result;

/* What a tile is. */
typedef struct tileatom_tile_info {
	char name[TILEATOM_NAME_MAX + 1]; /* tile name */
	tileatom_dtype dtype;             /* element type */
	int rank;                         /* 1..TILEATOM_MAX_RANK */
	int64_t shape[TILEATOM_MAX_RANK]; /* extents */
	uint64_t bytes;                   /* bytes of tile memory */
	bool private_tile;                /* private to its creator (TILEATOM_CREATE_PRIVATE) */
} tileatom_tile_info;

/* Flags of tileatom_create_ex. */
enum {
	/* the tile is private to the creator's identity: the uid of a Unix-socket client, or
	 * the holder of the daemon's auth secret over TCP; every other client gets
	 * TILEATOM_E_PERMISSION_DENIED and does not see it in tileatom_list */
	TILEATOM_CREATE_PRIVATE = 1
};

/* Options of tileatom_connect_opts; initialise with tileatom_connect_options_init. */
typedef struct tileatom_connect_options {
	int timeout_ms;        /* bounds the connect and the handshake (<= 0: no limit) */
	const char *auth_file; /* the daemon's secret, for TCP daemons that require Auth;
	                          NULL: $TILEATOM_AUTH_FILE when set. The file must not be
	                          readable by group or others. */
} tileatom_connect_options;

/* Daemon statistics (tileatom_stats). */
typedef struct tileatom_stats_info {
	char backend[32];            /* "cpu" or "cuda" */
	char device[128];            /* device name or CPU description */
	uint64_t device_memory;      /* bytes, 0 when not applicable */
	char compute_capability[16]; /* e.g. "9.0"; empty on the CPU backend */
	uint32_t tiles;              /* tiles held */
	uint64_t tile_bytes;         /* bytes held by tiles */
	uint64_t requests;           /* requests served */
	uint64_t errors;             /* requests that failed */
	uint32_t connections;        /* open connections */
	uint64_t elements;           /* elements processed by atomic / memory ops */
} tileatom_stats_info;

/* One device of the daemon (tileatom_stats_devices): a GPU, or a CPU memory pool of
 * tileatomd --devices N. */
typedef struct tileatom_device_stats {
	uint32_t device;       /* its ordinal in the daemon (placement's numbering) */
	uint64_t memory_used;  /* bytes of its memory in use (CUDA: total - free; CPU: tiles) */
	uint64_t memory_total; /* bytes of its memory (0 for a CPU pool) */
	uint32_t tiles;        /* tiles with a part there (a sharded tile counts on each) */
	uint64_t tile_bytes;   /* bytes of those parts */
	uint64_t requests;     /* requests (or parts of requests) it has run */
	bool failed;           /* it can no longer serve (sticky GPU error; TILEATOM_FAIL_DEVICE
	                          drill): requests touching it answer UNAVAILABLE */
	char failure[160];     /* why, when failed (else empty; truncated to fit) */
} tileatom_device_stats;

/* Most latency buckets tileatom_kind_stats holds (the daemon sends fewer or as many). */
#define TILEATOM_LATENCY_BUCKETS_MAX 32

/* Counters of one request kind since the daemon started (tileatom_stats_kinds): the same
 * numbers tileatomd serves on its --metrics endpoint. */
typedef struct tileatom_kind_stats {
	char kind[32];       /* request kind ("indexed", "create", ...; "invalid": undecodable) */
	uint64_t requests;   /* requests answered */
	uint64_t errors;     /* of them, answered with an error status */
	uint64_t elements;   /* elements processed */
	uint64_t bytes_in;   /* request payload bytes */
	uint64_t bytes_out;  /* response frame bytes */
	uint64_t latency_ns; /* sum of the latencies (decode to encoded response) */
	int nbuckets;        /* latency buckets in use, the last one unbounded (+Inf) */
	uint64_t le_ns[TILEATOM_LATENCY_BUCKETS_MAX];  /* upper bound of each bucket, ns
	                                                  (UINT64_MAX for the last) */
	uint64_t bucket[TILEATOM_LATENCY_BUCKETS_MAX]; /* requests per bucket (not cumulative) */
} tileatom_kind_stats;
/* What a snapshot wrote (tileatom_snapshot). */
typedef struct tileatom_snapshot_info {
	uint32_t tiles;       /* tiles in the snapshot */
	uint64_t bytes;       /* bytes of the snapshot file */
	uint64_t seq;         /* sequence number of the last log record it includes */
	uint64_t log_removed; /* bytes of log files removed */
} tileatom_snapshot_info;

/* Which call a pipelined response answers (values equal the wire Request body numbers). */
typedef enum tileatom_request_kind {
	TILEATOM_REQ_NONE = 0,             /* nothing */
	TILEATOM_REQ_HELLO = 2,            /* handshake (internal) */
	TILEATOM_REQ_PING = 3,             /* tileatom_submit_ping */
	TILEATOM_REQ_CREATE = 4,           /* create a tile */
	TILEATOM_REQ_DESTROY = 5,          /* destroy a tile */
	TILEATOM_REQ_LIST = 6,             /* list tiles */
	TILEATOM_REQ_DESCRIBE = 7,         /* describe a tile */
	TILEATOM_REQ_WRITE = 8,            /* tileatom_submit_write */
	TILEATOM_REQ_READ = 9,             /* tileatom_submit_read */
	TILEATOM_REQ_ELEMENTWISE = 10,     /* tileatom_submit_elementwise */
	TILEATOM_REQ_SCATTER = 11,         /* tileatom_submit_scatter */
	TILEATOM_REQ_INDEXED = 12,         /* tileatom_submit_indexed / _atomic_at */
	TILEATOM_REQ_GATHER = 13,          /* tileatom_submit_gather */
	TILEATOM_REQ_SCATTER_STORE = 14,   /* tileatom_submit_scatter_store */
	TILEATOM_REQ_ATOMIC_LOAD = 15,     /* tileatom_submit_atomic_load */
	TILEATOM_REQ_ATOMIC_STORE = 16,    /* tileatom_submit_atomic_store */
	TILEATOM_REQ_STATS = 17,           /* statistics */
	TILEATOM_REQ_REGISTER_BUFFER = 18, /* tileatom_buffer_create */
	TILEATOM_REQ_AUTH = 19,            /* authentication (tileatom_connect_opts) */
	TILEATOM_REQ_SNAPSHOT = 20         /* snapshot and log compaction (--data-dir) */
} tileatom_request_kind;

/* One collected response of the pipelined API. Pointers stay valid until the next call on
 * the same client (or tileatom_close). */
typedef struct tileatom_response {
	uint64_t id;                      /* id of the request it answers */
	tileatom_request_kind kind;       /* which call that request was */
	int status;                       /* TILEATOM_OK or the daemon's error status */
	uint64_t skipped;                 /* op responses: elements skipped */
	uint64_t applied;                 /* op responses: elements applied */
	tileatom_dtype dtype;             /* dtype of data (old / loaded / read values) */
	int rank;                         /* rank of data */
	int64_t shape[TILEATOM_MAX_RANK]; /* shape of data */
	const void *data;                 /* old values, gathered / loaded or read data */
	size_t data_bytes;                /* bytes at data (0 when none) */
} tileatom_response;

/* Opaque connection handle. */
typedef struct tileatom_client tileatom_client;

/* A shared buffer (tileatom_buffer_create): memory this process and the daemon both map. */
typedef struct tileatom_buffer tileatom_buffer;

/* ---- errors and helpers --------------------------------------------------------------- */

/* Name of a status code ("OK", "NOT_FOUND", "IO", ...); never NULL. */
TA_API const char *tileatom_strerror(int code);
/* Version of this library ("0.1.0"). */
TA_API const char *tileatom_version(void);
/* Writes the default daemon socket path into buf (n bytes): $TILEATOM_SOCKET when set;
 * else the first that exists of the per-user daemon's
 * $XDG_RUNTIME_DIR/tileatom/tileatomd.sock and the system daemon's
 * /run/tileatom/tileatomd.sock (root tries the system one first); else the first of them.
 * Returns 0, or -1 when n is too small. */
TA_API int tileatom_default_socket(char *buf, size_t n);

/* Size in bytes of one element of dtype; 0 when invalid. */
TA_API size_t tileatom_dtype_size(tileatom_dtype dtype);
/* Lower-case name of dtype ("int32", ...); "?" when invalid. */
TA_API const char *tileatom_dtype_name(tileatom_dtype dtype);
/* Parses a dtype name; TILEATOM_DTYPE_NONE when unknown. */
TA_API tileatom_dtype tileatom_dtype_parse(const char *name);
/* True for int32/uint32/int64/uint64. */
TA_API bool tileatom_dtype_is_int(tileatom_dtype dtype);
/* True for float32/float64/float16/bfloat16. */
TA_API bool tileatom_dtype_is_float(tileatom_dtype dtype);
/* Name of an op ("add", ...); "?" when invalid. */
TA_API const char *tileatom_op_name(tileatom_op op);
/* Parses an op name ("xchg" is accepted for exch); TILEATOM_OP_NONE when unknown. */
TA_API tileatom_op tileatom_op_parse(const char *name);
/* Name of a sem ("relaxed", ...); "?" when invalid. */
TA_API const char *tileatom_sem_name(tileatom_sem sem);
/* Name of a scope ("gpu", ...); "?" when invalid. */
TA_API const char *tileatom_scope_name(tileatom_scope scope);
/* Name of a space ("global" or "shared"); "?" when invalid. */
TA_API const char *tileatom_space_name(tileatom_space space);
/* 1 when requests of kind accept sem (kind an atomic request: with op; a memory request:
 * op is ignored), as the daemon's legality table says; 0 otherwise. */
TA_API int tileatom_sem_allowed(tileatom_request_kind kind, tileatom_op op, tileatom_sem sem);
/* Parses a sem name into a tileatom_sem; -1 when unknown. */
TA_API int tileatom_sem_parse(const char *name);
/* Parses a scope name into a tileatom_scope; -1 when unknown. */
TA_API int tileatom_scope_parse(const char *name);
/* Parses a space name into a tileatom_space; -1 when unknown. */
TA_API int tileatom_space_parse(const char *name);
/* Parses text as one element of dtype into out (tileatom_dtype_size(dtype) bytes, little
 * endian): integers in decimal or 0x hex with range checks, floats rounded once. Returns
 * TILEATOM_OK or TILEATOM_E_INVALID_ARGUMENT with a message in err. */
TA_API int tileatom_value_parse(tileatom_dtype dtype, const char *text, void *out,
                                tileatom_error *err);
/* Formats one element of dtype as text: integers exactly, floats with enough digits to
 * round-trip, "nan" / "inf" / "-inf". Returns the length (snprintf semantics). */
TA_API int tileatom_value_format(tileatom_dtype dtype, const void *in, char *buf, size_t n);
/* Converts one element of dtype to a double (integers beyond 2^53 are rounded). */
TA_API double tileatom_value_to_double(tileatom_dtype dtype, const void *in);
/* Fills *opts with the defaults (see TILEATOM_OP_OPTIONS_INIT). */
TA_API void tileatom_op_options_init(tileatom_op_options *opts);
/* A scalar operand of dtype holding the element at value (which must stay valid). */
TA_API tileatom_array tileatom_scalar(tileatom_dtype dtype, const void *value);
/* A 1-D operand of n elements of dtype at data. */
TA_API tileatom_array tileatom_vector(tileatom_dtype dtype, int64_t n, const void *data);
/* Bytes of an array's data (prod(shape) * element size); 0 on an invalid array or overflow
 * (check the dtype and rank first if 0 elements are possible). */
TA_API size_t tileatom_array_bytes(const tileatom_array *array);
/* Frees memory the library allocated for the caller (tileatom_list, tileatom_read_alloc). */
TA_API void tileatom_free(void *ptr);

/* ---- connections ------------------------------------------------------------------------ */

/* Connects to a daemon and performs the Hello handshake. address is a Unix socket path (it
 * contains '/' or no ':') or "host:port" / "[v6addr]:port" for TCP; NULL means
 * tileatom_default_socket(). timeout_ms bounds the connect and the handshake (<= 0: no
 * limit). On success *out gets the handle; on failure *out is NULL and err says why (e.g.
 * "cannot connect to /run/x.sock: No such file or directory (is tileatomd running?)"). */
TA_API int tileatom_connect(const char *address, int timeout_ms, tileatom_client **out,
                            tileatom_error *err);
/* Default connect options: no timeout, auth file from $TILEATOM_AUTH_FILE. */
TA_API void tileatom_connect_options_init(tileatom_connect_options *opts);
/* tileatom_connect with options (NULL: the defaults). When the daemon's Hello says
 * auth_required (TCP to a daemon with --auth-file), authenticates with the secret of
 * opts->auth_file (or $TILEATOM_AUTH_FILE): the secret itself is never sent, and the
 * daemon's own proof is checked. Without a file such a daemon is refused with
 * TILEATOM_E_PERMISSION_DENIED; a wrong secret too. tileatom_connect is this with
 * timeout_ms and the defaults. */
TA_API int tileatom_connect_opts(const char *address, const tileatom_connect_options *opts,
                                 tileatom_client **out, tileatom_error *err);
/* Writes out submitted requests still buffered (best effort, within the timeout of
 * tileatom_set_timeout), closes the connection and frees the handle (NULL is accepted).
 * Uncollected responses are discarded. */
TA_API void tileatom_close(tileatom_client *client);
/* Sets the timeout of every later send / receive in milliseconds (<= 0: wait forever, the
 * default). An expired timeout breaks the connection (TILEATOM_E_TIMEOUT). */
TA_API void tileatom_set_timeout(tileatom_client *client, int timeout_ms);
/* Largest response payload accepted (default 1 GiB); larger ones break the connection. */
TA_API void tileatom_set_max_response(tileatom_client *client, uint32_t max_bytes);
/* Busy polling: a wait for a response first reads the socket without sleeping for up to
 * usec microseconds (at most 1000000), then sleeps in poll() as usual. A response that
 * comes within that time is taken without the wake-up of a sleeping thread (a few
 * microseconds on an idle machine), at the cost of one busy CPU while waiting; worth it
 * for one client doing synchronous calls on a machine with CPUs to spare (the daemon's
 * --busy-poll is the same on its side), harmful where clients and daemon share few CPUs.
 * 0 (the default) never spins. $TILEATOM_BUSY_POLL_US (a decimal count of microseconds)
 * sets it for new connections. */
TA_API void tileatom_set_busy_poll(tileatom_client *client, unsigned usec);
/* The daemon's version string from the handshake (never NULL). */
TA_API const char *tileatom_server_version(const tileatom_client *client);
/* The daemon's backend name from the handshake, "cpu" or "cuda" (never NULL). */
TA_API const char *tileatom_server_backend(const tileatom_client *client);
/* The daemon's frame limit from the handshake (its --max-frame, in bytes): synchronous
 * element-wise, scatter and indexed requests whose frame would be larger go by shared
 * memory or in parts (see tileatom_indexed), pipelined ones in parts (see "pipelined
 * calls"); other requests are refused by the daemon. */
TA_API uint32_t tileatom_server_max_frame(const tileatom_client *client);
/* The address the client connected to. */
TA_API const char *tileatom_address(const tileatom_client *client);

/* ---- shared buffers (Unix-socket connections) ---------------------------------------------
 * A shared buffer is a sealed memfd that the library maps and passes to the daemon once
 * (SCM_RIGHTS); the daemon maps the same pages until the connection closes. Any operand
 * array whose bytes lie inside a registered buffer (e.g. made with tileatom_buffer_array,
 * or any pointer into tileatom_buffer_data) is then sent as (buffer, offset, length)
 * instead of its bytes, and a synchronous call whose opts->old_out lies inside one gets its
 * old values written there by the daemon. The daemon reads the operands while the request
 * runs: do not change them before its response (pipelined: before collecting it); a
 * change in flight cannot harm the daemon, only that request's results. Independently,
 * synchronous calls on a Unix socket copy operands of 1 MiB or more into a buffer of the
 * library's own and send them by reference (old values still come back inline). */
/* Sets the operand bytes from which synchronous calls stage operands in the library's own
 * shared buffer (default 1 MiB; 0: never, so requests travel inline or split); pipelined
 * requests over the frame limit use it from the same size (see "pipelined calls"). */
TA_API void tileatom_set_shm_threshold(tileatom_client *client, size_t bytes);
/* Creates a shared buffer of size bytes (zero-filled) and registers it with the daemon.
 * Fails on a TCP connection (TILEATOM_E_INVALID_ARGUMENT) or when pipelined responses are
 * not collected (TILEATOM_E_STATE). */
TA_API int tileatom_buffer_create(tileatom_client *client, size_t size, tileatom_buffer **out,
                                  tileatom_error *err);
/* The buffer's memory in this process (size bytes, writable); NULL for a device buffer. */
TA_API void *tileatom_buffer_data(const tileatom_buffer *buffer);
/* The buffer's size in bytes. */
TA_API size_t tileatom_buffer_size(const tileatom_buffer *buffer);
/* An array of dtype and shape over the buffer's bytes from offset (the shared-buffer array
 * kind: requests refer to it instead of copying it). */
TA_API tileatom_array tileatom_buffer_array(const tileatom_buffer *buffer, tileatom_dtype dtype,
                                            int rank, const int64_t *shape, size_t offset);
/* Unmaps and frees the buffer in this process (the daemon keeps its mapping until the
 * connection closes). Buffers still held are freed by tileatom_close: call this only
 * before it. */
TA_API void tileatom_buffer_free(tileatom_buffer *buffer);

/* ---- device buffers (CUDA IPC; Unix-socket connections to a CUDA daemon) -----------------
 * Data that already lives on the GPU is passed by a CUDA IPC memory handle: the caller
 * allocates with cudaMalloc, gets the handle with cudaIpcGetMemHandle and registers it once
 * per connection with its size and its device address in this process (when the process
 * has loaded the CUDA driver, the library also sends the UUID of the GPU holding it, so that
 * a daemon over several GPUs works on it there). The daemon opens
 * it (cudaIpcOpenMemHandle; a size over the allocation is refused) and its kernels read
 * operands and write old values in place, with no copy. A device buffer is a
 * tileatom_buffer: tileatom_buffer_array makes arrays over it (the device-buffer array
 * kind), and any array or opts->old_out whose address lies in [device_ptr, device_ptr +
 * size) travels as (buffer, offset, length), with the same checks as shared buffers
 * (INVALID_ARGUMENT for bytes outside). The library itself needs no CUDA and never
 * dereferences a device address inside a registered device buffer (an array starting in
 * one always travels by reference; bytes past its end are the daemon's INVALID_ARGUMENT),
 * and device memory outside every registered buffer is handled as below ("raw device
 * pointers"). Finish the kernels that write the operands (e.g.
 * cudaDeviceSynchronize) before the request; old values are in device memory when the
 * call returns. Not allowed with check_bounds off, for a fill or padding scalar, or on a
 * daemon with --data-dir. The CPU backend refuses device buffers
 * (TILEATOM_E_UNIMPLEMENTED); the handle is closed when the connection closes. */
/* Bytes of a CUDA IPC memory handle (sizeof(cudaIpcMemHandle_t)). */
#define TILEATOM_IPC_HANDLE_SIZE 64
/* Registers a device buffer: ipc_handle points at the TILEATOM_IPC_HANDLE_SIZE bytes of a
 * cudaIpcMemHandle_t of a live allocation, size is the bytes to use from its start (at
 * most the allocation's), device_ptr the allocation's device address in this process.
 * Fails on a TCP connection (TILEATOM_E_INVALID_ARGUMENT), with the daemon's status when it
 * refuses (TILEATOM_E_UNIMPLEMENTED on the CPU backend, TILEATOM_E_INVALID_ARGUMENT for a
 * bad handle or size) or TILEATOM_E_STATE when pipelined responses are not collected.
 * Free it with tileatom_buffer_free (or tileatom_close). */
TA_API int tileatom_device_buffer_register(tileatom_client *client, const void *ipc_handle,
                                           size_t size, const void *device_ptr,
                                           tileatom_buffer **out, tileatom_error *err);
/* 1 when buffer is a device buffer (tileatom_buffer_data then returns NULL). */
TA_API int tileatom_buffer_is_device(const tileatom_buffer *buffer);

/* Waits for the work queued on a CUDA stream (a cudaStream_t or CUstream; NULL: the legacy
 * default stream of the calling thread's current context) through the driver the process
 * has loaded: cuStreamQuery, then cuStreamSynchronize only when work is still queued; for
 * callers that hold a stream but not the CUDA headers (language bindings), before a
 * request whose device operands work on that stream writes. 0 when done;
 * TILEATOM_E_UNIMPLEMENTED when the process has not loaded libcuda.so.1;
 * TILEATOM_E_INTERNAL naming the driver call and its error (e.g. CUDA_ERROR_INVALID_CONTEXT
 * for NULL in a thread with no current context). */
TA_API int tileatom_cuda_stream_sync(void *stream, tileatom_error *err);

/* ---- raw device pointers (transparent device buffers) ------------------------------------
 * A cudaMalloc'd pointer (or one into the middle of such an allocation) can be passed as
 * any operand array or as opts->old_out without registering anything: before a request is
 * sent, the library asks the CUDA driver (cuPointerGetAttributes) about each operand array
 * and old_out of at least the connection's threshold bytes (default 64 KiB), and about
 * every array inside an allocation it registered before, whatever its size. Device memory
 * (not managed) has its whole allocation registered once per connection as a device buffer
 * (cuIpcGetMemHandle; the same rules and checks as tileatom_device_buffer_register) and
 * travels by reference; an allocation freed and reallocated (another driver buffer id or
 * size at that address) is registered anew. The library does not link against CUDA: it
 * uses libcuda.so.1 only when the process has loaded it (a process that never did holds no
 * device memory), so without CUDA nothing changes and a request pays one cached check.
 * Limits: it needs a Unix-socket connection to a CUDA daemon (over TCP, device memory is
 * refused with TILEATOM_E_INVALID_ARGUMENT; the CPU backend refuses the registration with
 * TILEATOM_E_UNIMPLEMENTED); an array running past the end of its allocation, or memory
 * with no CUDA IPC handle (memory pools: cudaMallocAsync, VMM allocations) is
 * TILEATOM_E_INVALID_ARGUMENT; a pipelined submit that needs a new registration while
 * responses are outstanding is TILEATOM_E_STATE (collect first, or make one synchronous
 * call with the pointer); device memory smaller than the threshold, outside allocations
 * seen before, is still read as host memory (a crash: lower the threshold to 1 to ask
 * about every array); managed memory (cudaMallocManaged) and pinned host memory are host
 * memory here and are read by the CPU (inline or staged); the output buffers of
 * tileatom_read, tileatom_gather and tileatom_atomic_load must be host memory (device
 * memory there, asked about with the same threshold, is TILEATOM_E_INVALID_ARGUMENT).
 * Each allocation takes one of the daemon's 64 buffer slots of the connection, and the
 * daemon keeps its mapping until the connection closes (which may hold the memory after
 * the caller's cudaFree until then). $TILEATOM_DEVICE_POINTERS sets the threshold of new
 * connections in bytes ("off" or "no": never look; anything else that is not a decimal
 * count: the default). */
/* Sets the operand bytes from which the library asks the driver whether an array is device
 * memory (0: never; arrays in allocations registered before are looked up anyway). */
TA_API void tileatom_set_device_ptr_threshold(tileatom_client *client, size_t bytes);

/* ---- synchronous calls: each sends one request and waits for its response ---------------- */

/* Round trip with no effect. */
TA_API int tileatom_ping(tileatom_client *client, tileatom_error *err);
/* Daemon statistics. */
TA_API int tileatom_stats(tileatom_client *client, tileatom_stats_info *out, tileatom_error *err);
/* Daemon statistics with the per-request-kind counters, in one round trip: *kinds gets a
 * malloc'd array of *nkinds entries (free with tileatom_free). */
TA_API int tileatom_stats_kinds(tileatom_client *client, tileatom_stats_info *out,
                                tileatom_kind_stats **kinds, size_t *nkinds, tileatom_error *err);
/* Asks a daemon started with --data-dir to snapshot every tile and compact its log; out
 * (may be NULL) receives what was written. TILEATOM_E_UNAVAILABLE without --data-dir. */
/* The daemon's devices: *devices gets a malloc'd array of *count entries (free with
 * tileatom_free; NULL and 0 from a daemon too old to send them). */
TA_API int tileatom_stats_devices(tileatom_client *client, tileatom_device_stats **devices,
                                  size_t *count, tileatom_error *err);
TA_API int tileatom_snapshot(tileatom_client *client, tileatom_snapshot_info *out,
                             tileatom_error *err);
/* Creates tile name of dtype and shape (rank 1..4). fill: NULL (all zero bits) or one
 * element of dtype used for every element. info (may be NULL) receives the new tile. */
TA_API int tileatom_create(tileatom_client *client, const char *name, tileatom_dtype dtype,
                           int rank, const int64_t *shape, const void *fill,
                           tileatom_tile_info *info, tileatom_error *err);
/* tileatom_create with flags (TILEATOM_CREATE_PRIVATE; 0 is tileatom_create). */
TA_API int tileatom_create_ex(tileatom_client *client, const char *name, tileatom_dtype dtype,
                              int rank, const int64_t *shape, const void *fill, unsigned flags,
                              tileatom_tile_info *info, tileatom_error *err);
/* Bytes of a placement text (tileatom_tile_placement, tileatom_list_placements). */
#define TILEATOM_PLACEMENT_MAX 160
/* tileatom_create_ex placing the tile on a daemon that serves several devices (tileatomd
 * --devices): placement NULL or "" (the daemon's --placement), a device ordinal ("1"),
 * "auto" (the device with the most free memory), "shard" (the first axis split into
 * ranges over every device) or "shard:N" (over N devices). A daemon with one device takes
 * "0", "auto", "shard" and "shard:1"; a device it lacks is TILEATOM_E_INVALID_ARGUMENT. */
TA_API int tileatom_create_placed(tileatom_client *client, const char *name, tileatom_dtype dtype,
                                  int rank, const int64_t *shape, const void *fill, unsigned flags,
                                  const char *placement, tileatom_tile_info *info,
                                  tileatom_error *err);
/* Where tile name lives, into buf (n bytes, cut to fit): a device ordinal ("0"), or for a
 * sharded tile each part as DEVICE:[FIRST,END) of its first axis ("0:[0,4) 1:[4,7)"); ""
 * from a daemon too old to say. */
TA_API int tileatom_tile_placement(tileatom_client *client, const char *name, char *buf, size_t n,
                                   tileatom_error *err);
/* tileatom_list with where each tile lives: *places gets a malloc'd array of *count texts
 * of TILEATOM_PLACEMENT_MAX bytes, in the order of *tiles (free both with tileatom_free). */
TA_API int tileatom_list_placements(tileatom_client *client, tileatom_tile_info **tiles,
                                    char (**places)[TILEATOM_PLACEMENT_MAX], size_t *count,
                                    tileatom_error *err);
/* Destroys a tile. */
TA_API int tileatom_destroy(tileatom_client *client, const char *name, tileatom_error *err);
/* Lists the tiles, sorted by name: *tiles gets a malloc'd array of *count entries (free
 * with tileatom_free; NULL when there are none). Fetches page after page
 * (tileatom_list_page) until the listing is complete, so it holds every tile the scan
 * guarantees (see there) however many there are. */
TA_API int tileatom_list(tileatom_client *client, tileatom_tile_info **tiles, size_t *count,
                         tileatom_error *err);
/* Bytes of a listing cursor (tileatom_list_page), its NUL included. */
#define TILEATOM_LIST_CURSOR_MAX 80
/* One page of a listing, as Redis's SCAN: up to limit tiles (0: the daemon's page size,
 * which is also the most it gives: 65536, fewer under a small max_frame) whose names sort
 * after cursor ("" or NULL: from the first), sorted by name, into *tiles (malloc'd, free
 * with tileatom_free; NULL when none) of *count entries. next_cursor (at least
 * TILEATOM_LIST_CURSOR_MAX bytes; may be cursor's buffer) receives the cursor of the next
 * page: "" when the listing is complete (or on an error). Pages from "" until next_cursor is ""
 * list every tile that exists for the whole scan exactly once, in name order; tiles created or
 * destroyed between pages may or may not appear. A cursor is opaque and stays valid whatever
 * changes meanwhile. A daemon from before paging answers every tile at once with next_cursor "".
 * places, when not NULL, receives where each tile lives as tileatom_list_placements gives it
 * (malloc'd, in the order of *tiles; free with tileatom_free). */
TA_API int tileatom_list_page(tileatom_client *client, const char *cursor, uint32_t limit,
                              tileatom_tile_info **tiles, char (**places)[TILEATOM_PLACEMENT_MAX],
                              size_t *count, char *next_cursor, tileatom_error *err);
/* Describes one tile. */
TA_API int tileatom_describe(tileatom_client *client, const char *name, tileatom_tile_info *info,
                             tileatom_error *err);
/* Reads a region (NULL: the whole tile) into buf (buf_size bytes). *out_bytes (may be NULL)
 * gets the bytes the data has; a buffer too small gives TILEATOM_E_INVALID_ARGUMENT with
 * *out_bytes set to the size needed. */
TA_API int tileatom_read(tileatom_client *client, const char *tile, const tileatom_region *region,
                         void *buf, size_t buf_size, size_t *out_bytes, tileatom_error *err);
/* Reads a region into a malloc'd buffer (*data, free with tileatom_free; *nbytes bytes). */
TA_API int tileatom_read_alloc(tileatom_client *client, const char *tile,
                               const tileatom_region *region, void **data, size_t *nbytes,
                               tileatom_error *err);
/* Writes values (the region's shape, or a scalar broadcast to it; dtype of the tile) into a
 * region (NULL: the whole tile). Not atomic with respect to concurrent ops. */
TA_API int tileatom_write(tileatom_client *client, const char *tile, const tileatom_region *region,
                          const tileatom_array *values, tileatom_error *err);

/* Element-wise atomic op over region (NULL: the whole tile): values[k] (CAS: the desired
 * value; compare[k] the expected one) go to region element k; scalars broadcast. compare is
 * NULL except for CAS. opts may be NULL; res may be NULL. Over the daemon's frame limit the
 * request goes by shared memory or is split as tileatom_indexed states: the region is cut
 * along its first axis into slabs of whole rows (1-D: consecutive elements), each part
 * sending the rows of values, compare and mask that run along that axis and repeating
 * those broadcast along it; the old values of every part land in old_out in order. */
TA_API int tileatom_elementwise(tileatom_client *client, const char *tile, tileatom_op op,
                                const tileatom_region *region, const tileatom_array *values,
                                const tileatom_array *compare, const tileatom_op_options *opts,
                                tileatom_op_result *res, tileatom_error *err);
/* Scatter atomic (torch.scatter_add_ rules; add, sub, min, max): for element e of indices,
 * the destination along `dim` is region.origin[dim] + indices[e] and along every other axis
 * region.origin[a] + e[a]; values broadcast to the shape of indices. Over the daemon's frame
 * limit the request goes by shared memory or is split as tileatom_indexed states: indices
 * (and the values and mask rows that run along it) are cut along axis 0; with dim 0 every
 * part keeps the region, with another dim the rows of a part address region rows from its
 * first row on, so its region starts there (an indices extent along axis 0 larger than the
 * region's is then refused before sending). With check_bounds false every unmasked index
 * of the whole request is checked against the region's extent along dim first. */
TA_API int tileatom_scatter(tileatom_client *client, const char *tile, tileatom_op op,
                            const tileatom_region *region, int dim, const tileatom_array *indices,
                            const tileatom_array *values, const tileatom_op_options *opts,
                            tileatom_op_result *res, tileatom_error *err);
/* Indexed atomic (cuTile atomic_* rules; every op): with flat false, n_index == tile rank
 * index arrays (one per axis, broadcast together) give the coordinates inside region (NULL:
 * the whole tile); with flat true, one array (n_index 1) gives row-major offsets into the
 * region. Duplicates all apply. compare only for CAS.
 *
 * Requests larger than the daemon's frame limit (tileatom_server_max_frame), of this call,
 * tileatom_elementwise and tileatom_scatter, go by shared memory on a Unix socket (see
 * tileatom_set_shm_threshold) when that makes the request fit and the old values it
 * returns (want_old, and always for CAS) fit one response frame; otherwise they are split.
 * A split cuts the request's element shape (here: the index arrays broadcast together;
 * element-wise: the region; scatter: the indices) along its first axis into consecutive
 * parts of whole rows (a 1-D shape: of elements), each at most max_frame bytes and 4 MiB
 * of operands (or one row, where a row is larger and fits a frame): an operand that runs
 * along that axis is cut with the rows, one broadcast along it (a scalar, a lower rank,
 * extent 1 there) is sent whole in every part. The parts go one after the other on this
 * connection; the call returns the summed counts, the old values of every part in order
 * (want_old: the element shape, row-major, as one request would) and the first error.
 * What a split means:
 *  - each element is applied atomically, exactly as in one request, but the request as a
 *    whole is not: other clients can see the parts already applied, and the parts run in
 *    order (part i is applied before part i+1 is sent);
 *  - with check_bounds false (reject the whole request), the library first reads the
 *    tile's shape (tileatom_describe) and checks every unmasked index of every part
 *    against the region: any index outside it fails the call with TILEATOM_E_OUT_OF_RANGE
 *    before any part is sent, so nothing is applied (the daemon checks each part again);
 *  - a part that fails (e.g. the tile was destroyed meanwhile) stops the call: its error
 *    comes back with a message naming the part and the rows (elements) already applied,
 *    which stay applied, and no later part is sent; res (when given) counts the parts
 *    that succeeded.
 * A request that cannot be split fails with TILEATOM_E_INVALID_ARGUMENT, naming why, before
 * any part is sent: a region outside the tile, operands that do not broadcast to the
 * element shape, a first axis of one row, or one row (or the operands every part repeats)
 * too large for a frame; want_old with old_out in device memory (the library copies the
 * parts' old values from the host) too. */
TA_API int tileatom_indexed(tileatom_client *client, const char *tile, tileatom_op op,
                            const tileatom_region *region, int n_index,
                            const tileatom_array *indices, bool flat, const tileatom_array *values,
                            const tileatom_array *compare, const tileatom_op_options *opts,
                            tileatom_op_result *res, tileatom_error *err);
/* Convenience single-element atomic: op on the element at row-major flat_index of the whole
 * tile with one value (and for CAS one expected value), each one element of the tile's
 * dtype. old_out (may be NULL) receives the old element. An index outside the tile gives
 * TILEATOM_E_OUT_OF_RANGE. opts->want_old / old_out are ignored. */
TA_API int tileatom_atomic_at(tileatom_client *client, const char *tile, tileatom_op op,
                              int64_t flat_index, tileatom_dtype dtype, const void *value,
                              const void *compare, const tileatom_op_options *opts, void *old_out,
                              tileatom_error *err);
/* Gather: loads the addressed elements (window: the box the indices address, NULL: the
 * whole tile) into out (out_size bytes, element shape, the tile's dtype); masked-off and
 * skipped elements get padding (a scalar; NULL: zero). */
TA_API int tileatom_gather(tileatom_client *client, const char *tile, const tileatom_region *window,
                           const tileatom_addr *addr, const tileatom_array *padding,
                           const tileatom_op_options *opts, void *out, size_t out_size,
                           tileatom_op_result *res, tileatom_error *err);
/* Non-atomic scatter store of values (broadcast to the element shape); with duplicate
 * destinations one of the writes wins. */
TA_API int tileatom_scatter_store(tileatom_client *client, const char *tile,
                                  const tileatom_region *window, const tileatom_addr *addr,
                                  const tileatom_array *values, const tileatom_op_options *opts,
                                  tileatom_op_result *res, tileatom_error *err);
/* Atomic load (sem relaxed or acquire) of the addressed elements into out. */
TA_API int tileatom_atomic_load(tileatom_client *client, const char *tile,
                                const tileatom_region *window, const tileatom_addr *addr,
                                const tileatom_op_options *opts, void *out, size_t out_size,
                                tileatom_op_result *res, tileatom_error *err);
/* Atomic store (sem relaxed or release) of values to the addressed elements. */
TA_API int tileatom_atomic_store(tileatom_client *client, const char *tile,
                                 const tileatom_region *window, const tileatom_addr *addr,
                                 const tileatom_array *values, const tileatom_op_options *opts,
                                 tileatom_op_result *res, tileatom_error *err);

/* ---- pipelined calls ---------------------------------------------------------------------
 * Each tileatom_submit_* encodes one request with the same arguments as its synchronous
 * twin into the output buffer (written out as the header comment says: at 64 KiB, on
 * collect, flush or close), sets *id (may be NULL) to the request id and returns without waiting
 * for the response. opts->old_out is not used: old values arrive in the collected
 * response (except for a split submit, below). Operand memory may be reused as soon as the
 * call returns.
 *
 * Bulk submits over the frame limit: an element-wise, scatter or indexed submit whose frame
 * would exceed the daemon's frame limit (tileatom_server_max_frame), once operands lying in
 * registered shared buffers travel by reference, goes as a synchronous call would: on a
 * Unix socket, whole by shared memory when copying its operands into the library's own
 * buffer (tileatom_set_shm_threshold) makes it fit and its old values fit one response,
 * provided no other pipelined request holds that buffer (it stays reserved until this
 * request's response is collected, and is created or grown only with nothing pending);
 * that is an ordinary submit in every other respect. Otherwise it is split into parts
 * exactly as tileatom_indexed states for synchronous calls (the same parts, the same
 * refusals, the reject-whole bounds check with check_bounds off), all decided before any
 * part is queued. What differs from a synchronous split:
 *  - the submit describes the tile with a request of its own queued behind the pending
 *    ones (their responses wait for tileatom_collect), so what a split refuses (no such
 *    tile, an index outside the region with check_bounds off, a request that cannot be
 *    split, want_old without a large enough old_out) is returned by the submit, with
 *    nothing of the request queued;
 *  - the parts are queued back to back as frames of their own, in submission order with
 *    the other pipelined requests, with no round trip between them. A part of 64 KiB or
 *    more is written at once (the submit blocks as the socket takes it, reading responses
 *    that arrive meanwhile), so the library holds one part at a time, never the whole
 *    request; smaller parts are buffered like any submit. At most 16 MiB of parts (2 to
 *    64 parts) go unanswered: beyond that the submit waits for responses (kept for
 *    tileatom_collect) before it sends the next part, so that the daemon holds a few
 *    parts of a large request, not all of them. *id gets one id for the whole
 *    request; its parts use consecutive ids, so the next submit's id is larger by more
 *    than one;
 *  - tileatom_pending counts it once and one tileatom_collect answers it (its id and kind):
 *    applied and skipped summed over the parts that succeeded; with want_old, opts->old_out
 *    (required, host memory, old_out_size at least the element count times the tile's dtype
 *    size, valid and untouched until that collect) receives every part's old values in the caller's
 *    order, and the response's data points at it (a CAS without want_old returns none);
 *  - every part is sent before any response is read, so a part that fails does not stop
 *    the later ones: the collect returns the first failing part's status with the message
 *    "part i of n (rows a..b) of a split request failed; rows 0..x, y..z were applied:
 *    <the daemon's message>" (1-D: elements; the daemon's message alone when no part was
 *    applied), the counts of the parts applied, and their old values in old_out;
 *  - a connection lost while the parts are collected gives TILEATOM_E_IO naming the part
 *    and the rows applied before it; a failure after some parts were queued (a write
 *    error, out of memory) breaks the connection, since the other parts cannot follow.
 * tileatom_submit_atomic_at is one element and never split. */

/* Pipelined tileatom_ping. */
TA_API int tileatom_submit_ping(tileatom_client *client, uint64_t *id, tileatom_error *err);
/* Pipelined tileatom_read: the data arrives in the collected response. */
TA_API int tileatom_submit_read(tileatom_client *client, const char *tile,
                                const tileatom_region *region, uint64_t *id, tileatom_error *err);
/* Pipelined tileatom_write. */
TA_API int tileatom_submit_write(tileatom_client *client, const char *tile,
                                 const tileatom_region *region, const tileatom_array *values,
                                 uint64_t *id, tileatom_error *err);
/* Pipelined tileatom_elementwise. */
TA_API int tileatom_submit_elementwise(tileatom_client *client, const char *tile, tileatom_op op,
                                       const tileatom_region *region, const tileatom_array *values,
                                       const tileatom_array *compare,
                                       const tileatom_op_options *opts, uint64_t *id,
                                       tileatom_error *err);
/* Pipelined tileatom_scatter. */
TA_API int tileatom_submit_scatter(tileatom_client *client, const char *tile, tileatom_op op,
                                   const tileatom_region *region, int dim,
                                   const tileatom_array *indices, const tileatom_array *values,
                                   const tileatom_op_options *opts, uint64_t *id,
                                   tileatom_error *err);
/* Pipelined tileatom_indexed. */
TA_API int tileatom_submit_indexed(tileatom_client *client, const char *tile, tileatom_op op,
                                   const tileatom_region *region, int n_index,
                                   const tileatom_array *indices, bool flat,
                                   const tileatom_array *values, const tileatom_array *compare,
                                   const tileatom_op_options *opts, uint64_t *id,
                                   tileatom_error *err);
/* Pipelined tileatom_atomic_at: the old element arrives in the collected response. */
TA_API int tileatom_submit_atomic_at(tileatom_client *client, const char *tile, tileatom_op op,
                                     int64_t flat_index, tileatom_dtype dtype, const void *value,
                                     const void *compare, const tileatom_op_options *opts,
                                     uint64_t *id, tileatom_error *err);
/* Pipelined tileatom_gather: the gathered values arrive in the collected response. */
TA_API int tileatom_submit_gather(tileatom_client *client, const char *tile,
                                  const tileatom_region *window, const tileatom_addr *addr,
                                  const tileatom_array *padding, const tileatom_op_options *opts,
                                  uint64_t *id, tileatom_error *err);
/* Pipelined tileatom_scatter_store. */
TA_API int tileatom_submit_scatter_store(tileatom_client *client, const char *tile,
                                         const tileatom_region *window, const tileatom_addr *addr,
                                         const tileatom_array *values,
                                         const tileatom_op_options *opts, uint64_t *id,
                                         tileatom_error *err);
/* Pipelined tileatom_atomic_load: the loaded values arrive in the collected response. */
TA_API int tileatom_submit_atomic_load(tileatom_client *client, const char *tile,
                                       const tileatom_region *window, const tileatom_addr *addr,
                                       const tileatom_op_options *opts, uint64_t *id,
                                       tileatom_error *err);
/* Pipelined tileatom_atomic_store. */
TA_API int tileatom_submit_atomic_store(tileatom_client *client, const char *tile,
                                        const tileatom_region *window, const tileatom_addr *addr,
                                        const tileatom_array *values,
                                        const tileatom_op_options *opts, uint64_t *id,
                                        tileatom_error *err);
/* Writes out the requests still buffered, then waits for the next response (they arrive in
 * submission order; the timeout of tileatom_set_timeout covers both) and describes it in *out
 * (out->id is 0 only when nothing could be read); for a split submit, the merged response
 * of all its parts (the timeout applies to each). Returns the response's status (the
 * daemon's error, with its message in err) or a client error (TILEATOM_E_IO, ...); with
 * nothing outstanding it returns TILEATOM_E_STATE. */
TA_API int tileatom_collect(tileatom_client *client, tileatom_response *out, tileatom_error *err);
/* Writes out the submitted requests still buffered without waiting for any response (what
 * tileatom_collect does before it waits), within the timeout of tileatom_set_timeout.
 * Returns TILEATOM_OK (also when nothing was buffered) or the error that broke the
 * connection. */
TA_API int tileatom_flush(tileatom_client *client, tileatom_error *err);
/* Submitted requests whose responses have not been collected yet (a split submit counts
 * once). */
TA_API size_t tileatom_pending(const tileatom_client *client);
/* For an event loop: the connection's socket, to wait on for readability (then call
 * tileatom_poll); -1 for a NULL client. Do not read, write or close it. */
TA_API int tileatom_fd(const tileatom_client *client);
/* Reads without blocking what the socket holds (one receive, only while responses are
 * missing) and sets *ready to the pending requests, oldest first, whose tileatom_collect
 * returns without waiting (a split submit once all its parts are in). Returns TILEATOM_OK,
 * or the error that broke the connection (EOF, a socket or framing error; *ready is then
 * every pending request: each collect returns that error at once). Writes nothing: call
 * tileatom_flush after the submits. */
TA_API int tileatom_poll(tileatom_client *client, size_t *ready, tileatom_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TILEATOM_H */
