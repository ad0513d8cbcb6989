/* ta_backend.h: the backend interface. A backend owns tile memory (host memory for the
 * CPU backend, device memory for CUDA) and applies validated plans (ta_plan.h) to it.
 *
 * Contract:
 *  - tile_alloc returns zero-filled memory of the given size or an error
 *    (RESOURCE_EXHAUSTED when memory is short); tile_free releases it. After
 *    ta_backend_cancel_allocs (the daemon's shutdown) it answers UNAVAILABLE, and an
 *    allocation still zeroing its memory stops soon (the CPU backend checks between
 *    chunks of TA_BACKEND_ZERO_CHUNK bytes).
 *  - apply runs one plan to completion before returning (the daemon calls it from a
 *    worker thread, never from the event loop). Every element is atomic on its own; the
 *    order among elements is unspecified. The plan's host arrays are only read during the
 *    call; old_out is written before it returns. apply may be called concurrently from
 *    several threads, on the same tile too. A backend may run concurrent calls together
 *    (the CUDA backend puts small requests from all callers into one launch); each call
 *    still returns only when its plan has run, and a thread's later call sees its earlier
 *    ones.
 *  - A backend never reads or writes outside [mem, mem + tile bytes), whatever the plan.
 *  - Read/write/fill of regions are plans too (LOAD / STORE over a region).
 *  - A plan with a merge-out (ta_plan.h, ta_merge_out: zero the tile memory, run, add it
 *    into other memory) is honoured by the device backends (CPU, CUDA) inside apply; the
 *    multi-device layer builds such plans for its device backends and refuses them on a
 *    sharded tile.
 *  - Tile memory is opaque to callers: they hand it back to apply and tile_free only (a
 *    composing backend's "memory" is its record of a tile's parts, kernels/ta_multi.c).
 *  - apply_async (optional) starts small plans without waiting for them: the backend calls
 *    the caller's done function from a thread of its own (or from inside the call) once
 *    every plan has its outcome. The daemon's event loops use it so that a loop never
 *    blocks on a device (daemon/pipeline.c, ta_async_run). A loop that polls may attach
 *    (async_attach): its calls then run and complete inside its own polls (poll_async),
 *    with no backend thread in between.
 *  - Several devices: a backend with more than one (device_count) places tiles as
 *    tile_alloc_placed is asked (ta_place.h) and reports it (tile_where); one without those
 *    entries has one device, 0, and every tile lives wholly on it. */
#ifndef TA_BACKEND_H
#define TA_BACKEND_H

#include "ta_place.h"
#include "ta_plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ta_backend ta_backend;

/* Bytes of a CUDA IPC memory handle (cudaIpcMemHandle_t), opaque outside the CUDA backend. */
#define TA_IPC_HANDLE_BYTES 64
/* Bytes of a GPU's UUID (cuDeviceGetUuid), the name of a device buffer's GPU (ipc_open). */
#define TA_GPU_UUID_BYTES 16

/* Descriptive facts a backend reports for stats. */
typedef struct ta_backend_info {
	char name[16];               /* "cpu" or "cuda" */
	char device[128];            /* device name or CPU description */
	uint64_t device_memory;      /* bytes of device memory, 0 for cpu */
	char compute_capability[16]; /* "9.0", "" for cpu */
	int workers;                 /* worker threads (cpu) or streams (cuda) */
} ta_backend_info;

/* One device's figures (stats, metrics). */
typedef struct ta_device_stats {
	uint64_t memory_used;  /* bytes in use (CUDA: total - free; CPU: tile bytes placed) */
	uint64_t memory_total; /* bytes of its memory (0: unknown, a CPU pool) */
	uint64_t tiles;        /* tiles with a part there */
	uint64_t tile_bytes;   /* bytes of those parts */
	uint64_t requests;     /* requests (or parts of requests) it has run */
	bool failed;           /* the device can no longer serve (a sticky error; a drill) */
	char cause[160];       /* why, when failed (else empty) */
} ta_device_stats;

/* One plan of an apply_many call and what became of it. */
typedef struct ta_apply_call {
	void *mem;           /* tile memory */
	size_t tile_bytes;   /* its size */
	const ta_plan *plan; /* the plan (old_out set when want_old) */
	ta_result *result;   /* filled on success */
	ta_error *err;       /* filled on failure */
	ta_status status;    /* outcome, set by apply_many */
} ta_apply_call;

/* The operations every backend implements. */
typedef struct ta_backend_vtbl {
	/* Releases the backend and everything it holds (tiles must be freed first). */
	void (*destroy)(ta_backend *be);
	/* Allocates bytes of zeroed tile memory into *mem. */
	ta_status (*tile_alloc)(ta_backend *be, size_t bytes, void **mem, ta_error *err);
	/* Frees tile memory from tile_alloc (NULL is a no-op). */
	void (*tile_free)(ta_backend *be, void *mem);
	/* Applies plan to the tile at mem (tile_bytes long); fills *result. */
	ta_status (*apply)(ta_backend *be, void *mem, size_t tile_bytes, const ta_plan *plan,
	                   ta_result *result, ta_error *err);
	/* Applies n plans in order, as n successive apply calls of the calling thread would
	 * (each sees the ones before it), and sets each call's status; NULL for a backend
	 * with nothing better than that loop. */
	void (*apply_many)(ta_backend *be, ta_apply_call *calls, size_t n);
	/* Fills *info. */
	void (*info)(ta_backend *be, ta_backend_info *info);
	/* Sets how long (microseconds) a batch of small requests waits for more before it
	 * runs; NULL for a backend that does not batch (the CPU backend). */
	void (*set_batch_window)(ta_backend *be, unsigned usec);
	/* Optional (NULL: nothing to do): registers host memory [ptr, ptr + bytes) that plans
	 * will point into many times (a client's shared buffer), so that the backend can read
	 * it with DMA (CUDA: cudaHostRegister). A failure is not fatal: plans work without. */
	ta_status (*host_register)(ta_backend *be, void *ptr, size_t bytes, ta_error *err);
	/* Optional: undoes host_register before the memory goes away. */
	void (*host_unregister)(ta_backend *be, void *ptr);
	/* Optional (NULL: device buffers are refused): opens a client's device allocation from
	 * its CUDA IPC memory handle (handle_len bytes, TA_IPC_HANDLE_BYTES) and checks that
	 * bytes do not exceed it; *dptr gets its device address, which plans then name as
	 * device operands (ta_operand.device). gpu_uuid (TA_GPU_UUID_BYTES, or NULL) names the
	 * GPU that holds the allocation, as the client saw it. INVALID_ARGUMENT for a handle
	 * that does not open or a size over the allocation. */
	ta_status (*ipc_open)(ta_backend *be, const void *handle, size_t handle_len,
	                      const uint8_t *gpu_uuid, size_t bytes, void **dptr, ta_error *err);
	/* Optional: closes what ipc_open opened (no plan uses it any more). */
	void (*ipc_close)(ta_backend *be, void *dptr);
	/* Optional (NULL: one device): allocates a zeroed tile of shape (bytes long) where
	 * place says (TA_PLACE_DEFAULT: the backend's default placement). INVALID_ARGUMENT for
	 * a device that does not exist; RESOURCE_EXHAUSTED as tile_alloc. */
	ta_status (*tile_alloc_placed)(ta_backend *be, const ta_tile_shape *shape, size_t bytes,
	                               const ta_placement *place, void **mem, ta_error *err);
	/* Optional (NULL: wholly on device 0): fills *where for the tile at mem, whose shape is
	 * shape. */
	void (*tile_where)(ta_backend *be, void *mem, const ta_tile_shape *shape,
	                   ta_tile_where *where);
	/* Optional (NULL: 1): the number of devices the backend serves. */
	int (*device_count)(ta_backend *be);
	/* Optional (NULL: unknown): free and total bytes of the device's memory (CUDA), what
	 * placement `auto` compares. */
	ta_status (*mem_info)(ta_backend *be, uint64_t *free_bytes, uint64_t *total_bytes);
	/* Optional (NULL: bytes): the bytes of memory the allocation mem of tile_alloc(bytes)
	 * really takes, the allocator's own overhead included. */
	uint64_t (*tile_footprint)(ta_backend *be, void *mem, size_t bytes);
	/* Optional (NULL: none): applies n plans in order as apply_many does, without waiting
	 * for them: every plan satisfies ta_plan_async_ok; calls, their plans, results, errors
	 * and the plans' host arrays stay valid and untouched by the caller until done(arg),
	 * which the backend calls exactly once, from any thread (its own, or the caller's
	 * inside this call), after every call's status, result and old values are set. A
	 * composing backend may rewrite calls' mem (the multi-device layer hands a group on a
	 * single device on as that device's calls): after done the caller reads only
	 * status. */
	void (*apply_async)(ta_backend *be, ta_apply_call *calls, size_t n, void (*done)(void *arg),
	                    void *arg);
	/* Optional (NULL: unknown): the device ordinal (CUDA's numbering) whose memory the
	 * device address p is (a client's buffer opened by ipc_open), -1 when unknown. */
	int (*ptr_device)(ta_backend *be, const void *p);
	/* Optional (NULL: one device, figures unknown but its memory's): fills *out for device
	 * d (0..device_count - 1); false for a device that does not exist. */
	bool (*device_stats)(ta_backend *be, int d, ta_device_stats *out);
	/* Optional (NULL: never fails): true when the device can no longer serve (a sticky
	 * error made its context unusable), with the cause copied into cause[cap]. Called on
	 * every request by the multi-device layer: must be cheap when not failed. */
	bool (*failed)(ta_backend *be, char *cause, size_t cap);
	/* Optional (NULL: none, and poll_async NULL too): the calling thread (an event loop)
	 * promises to call poll_async on every turn while any of its apply_async calls is
	 * out. True when the backend takes it up: from then on that thread's apply_async
	 * calls may run and complete (their done functions called) only inside its
	 * poll_async (the CUDA backend's lanes, kernels/ta_cuda_lanes.cu); false: nothing
	 * changes. Once per thread, before its apply_async calls. */
	bool (*async_attach)(ta_backend *be);
	/* Optional (with async_attach): drives the calling thread's apply_async calls after its
	 * async_attach: starts what it queued, completes what has run (done functions called
	 * here). True while any of them is still out. */
	bool (*poll_async)(ta_backend *be);
} ta_backend_vtbl;

/* Most elements of a plan that apply_async takes (the CUDA batcher's request size). */
#define TA_BACKEND_ASYNC_PLAN_MAX 1024

/* Base of every backend object: implementations embed it first. */
struct ta_backend {
	const ta_backend_vtbl *vt; /* the implementation */
	int allocs_cancelled;      /* set by ta_backend_cancel_allocs (read with __atomic) */
	ta_backend *parent;        /* the composing backend (ta_multi) whose cancellation this
	                              one follows too; NULL: none */
};

/* Bytes an allocation zeroes between two looks at ta_backend_allocs_cancelled. */
#define TA_BACKEND_ZERO_CHUNK ((size_t)64 << 20)

/* Bytes a CPU-backend tile of bytes bytes takes from the heap: its size rounded up to 64
 * (the alignment) plus 128, measured with glibc (posix_memalign(64, n) in a row lands every
 * n + 128 bytes: the chunk header and the alignment slack; malloc_usable_size is n + 8).
 * The backend's tile_footprint computes the exact figure from malloc_usable_size, equal to
 * this below the mmap threshold and within a page of it above. */
#define TA_CPU_TILE_FOOTPRINT(bytes) (((uint64_t)(bytes) + 63) / 64 * 64 + 128)

/* Creates the CPU backend with nthreads workers (< 2 means 2; 0 means one per core, at
 * least 2). Returns NULL with err set on failure. */
ta_backend *ta_cpu_backend_new(int nthreads, ta_error *err);

/* Creates the CUDA backend on device (an ordinal). Returns NULL with err set
 * (UNAVAILABLE when the build has no CUDA or no usable GPU is present). */
ta_backend *ta_cuda_backend_new(int device, ta_error *err);

/* The number of CUDA devices this process can see (0 without CUDA or without a GPU). */
int ta_cuda_device_count(void);

/* Enables peer access between every ordered pair of the n CUDA devices ords[] that allows
 * it (cudaDeviceCanAccessPeer, cudaDeviceEnablePeerAccess), so that a kernel on one reads
 * the other's memory (a client's keys opened there); peer[i * n + j] gets 1 where device
 * ords[i] reads ords[j]'s memory (1 on the diagonal). Returns the pairs enabled (0 without
 * CUDA). Failures are logged to stderr and cleared. */
int ta_cuda_enable_peer_access(const int *ords, int n, unsigned char *peer);

/* Composes n backends (one per device, ordinals 0..n-1 in the order given; 1 <= n <=
 * TA_MAX_DEVICES) into one (kernels/ta_multi.c) that places tiles on them (default_place
 * for TA_PLACE_DEFAULT; TA_PLACE_DEFAULT there means device 0) and routes every element of
 * a plan to the device that holds it. Takes ownership of devices[0..n-1] (destroyed with
 * it, or at once when this fails). Returns NULL with err set on failure. */
ta_backend *ta_multi_backend_new(ta_backend *const *devices, int n,
                                 const ta_placement *default_place, ta_error *err);

/* Tells the multi-device layer be (from ta_multi_backend_new) which CUDA ordinal each of
 * its devices is (ords[0..n)) and which may read which one's memory (peer[i * n + j]: its
 * device i reads device j's; ta_cuda_enable_peer_access fills it), so that a client's
 * device buffer is only handed to a device that can read it. Without it every device is
 * taken to read every other's. */
void ta_multi_set_peers(ta_backend *be, const int *ords, int n, const unsigned char *peer);

/* Convenience wrappers over the vtable. */
static inline void ta_backend_destroy(ta_backend *be)
{
	if (be)
		be->vt->destroy(be);
}
static inline ta_status ta_backend_tile_alloc(ta_backend *be, size_t bytes, void **mem,
                                              ta_error *err)
{
	return be->vt->tile_alloc(be, bytes, mem, err);
}
static inline void ta_backend_tile_free(ta_backend *be, void *mem)
{
	be->vt->tile_free(be, mem);
}
static inline uint64_t ta_backend_tile_footprint(ta_backend *be, void *mem, size_t bytes)
{
	return be->vt->tile_footprint ? be->vt->tile_footprint(be, mem, bytes) : (uint64_t)bytes;
}
/* Makes every tile_alloc from now on (and any still zeroing) fail with UNAVAILABLE: the
 * daemon is shutting down. Any thread, at any time. */
static inline void ta_backend_cancel_allocs(ta_backend *be)
{
	__atomic_store_n(&be->allocs_cancelled, 1, __ATOMIC_RELEASE);
}
/* True after ta_backend_cancel_allocs on be or on the backend composing it. */
static inline bool ta_backend_allocs_cancelled(ta_backend *be)
{
	return __atomic_load_n(&be->allocs_cancelled, __ATOMIC_ACQUIRE) != 0 ||
	       (be->parent &&
	        __atomic_load_n(&be->parent->allocs_cancelled, __ATOMIC_ACQUIRE) != 0);
}
static inline ta_status ta_backend_apply(ta_backend *be, void *mem, size_t tile_bytes,
                                         const ta_plan *plan, ta_result *result, ta_error *err)
{
	return be->vt->apply(be, mem, tile_bytes, plan, result, err);
}
static inline void ta_backend_apply_many(ta_backend *be, ta_apply_call *calls, size_t n)
{
	if (be->vt->apply_many) {
		be->vt->apply_many(be, calls, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		calls[i].status = be->vt->apply(be, calls[i].mem, calls[i].tile_bytes,
		                                calls[i].plan, calls[i].result, calls[i].err);
}
static inline void ta_backend_info_get(ta_backend *be, ta_backend_info *info)
{
	be->vt->info(be, info);
}
static inline void ta_backend_set_batch_window(ta_backend *be, unsigned usec)
{
	if (be->vt->set_batch_window)
		be->vt->set_batch_window(be, usec);
}
static inline ta_status ta_backend_host_register(ta_backend *be, void *ptr, size_t bytes,
                                                 ta_error *err)
{
	return be && be->vt->host_register ? be->vt->host_register(be, ptr, bytes, err) : TA_OK;
}
static inline void ta_backend_host_unregister(ta_backend *be, void *ptr)
{
	if (be && be->vt->host_unregister)
		be->vt->host_unregister(be, ptr);
}

/* Allocates a tile where place says: tile_alloc_placed, or for a one-device backend
 * tile_alloc after checking that place names nothing but device 0 (TA_PLACE_PARTS: one
 * part, there). */
static inline ta_status ta_backend_tile_alloc_placed(ta_backend *be, const ta_tile_shape *shape,
                                                     size_t bytes, const ta_placement *place,
                                                     void **mem, ta_error *err)
{
	if (be->vt->tile_alloc_placed)
		return be->vt->tile_alloc_placed(be, shape, bytes, place, mem, err);
	if (place && place->kind == TA_PLACE_DEVICE && place->device != 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "placement: device %d does not exist (the backend serves one "
		                    "device, 0)",
		                    place->device);
	if (place && place->kind == TA_PLACE_SHARD && place->shards > 1)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "placement: cannot shard over %d devices (the backend serves "
		                    "one device)",
		                    place->shards);
	if (place && place->kind == TA_PLACE_PARTS) {
		for (int i = 0; i < place->parts->nparts; i++)
			if (place->parts->part[i].device != 0)
				return ta_error_set(
				    err, TA_INVALID_ARGUMENT,
				    "placement: device %d does not exist (the backend "
				    "serves one device, 0)",
				    place->parts->part[i].device);
		if (place->parts->nparts != 1)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "placement: %d parts on device 0 (the backend serves one "
			    "device: a tile has one part)",
			    place->parts->nparts);
	}
	return be->vt->tile_alloc(be, bytes, mem, err);
}
/* Fills *where for the tile at mem (one part on device 0 for a one-device backend). */
static inline void ta_backend_tile_where(ta_backend *be, void *mem, const ta_tile_shape *shape,
                                         ta_tile_where *where)
{
	if (be->vt->tile_where) {
		be->vt->tile_where(be, mem, shape, where);
		return;
	}
	where->nparts = 1;
	where->part[0].device = 0;
	where->part[0].first = 0;
	where->part[0].end = shape->rank > 0 ? shape->shape[0] : 1;
}
/* The number of devices the backend serves (1 without device_count). */
static inline int ta_backend_device_count(ta_backend *be)
{
	return be->vt->device_count ? be->vt->device_count(be) : 1;
}

/* True when the backend offers apply_async. */
static inline bool ta_backend_has_apply_async(const ta_backend *be)
{
	return be && be->vt->apply_async;
}
/* True when plan may go to apply_async: at most TA_BACKEND_ASYNC_PLAN_MAX elements, global
 * space, every operand and the old values in host memory, no merge-out. */
static inline bool ta_plan_async_ok(const ta_plan *p)
{
	bool on_device =
	    p->old_out_device || p->values.device || p->compare.device || p->mask.device;
	for (int i = 0; i < TA_MAX_RANK; i++)
		on_device = on_device || p->index[i].device;
	return p->count <= TA_BACKEND_ASYNC_PLAN_MAX && p->space == TA_SPACE_GLOBAL && !on_device &&
	       !p->merge_out;
}
/* Starts calls[0, n) (see apply_async); the backend calls done(arg) once they ran. */
static inline void ta_backend_apply_async(ta_backend *be, ta_apply_call *calls, size_t n,
                                          void (*done)(void *arg), void *arg)
{
	be->vt->apply_async(be, calls, n, done, arg);
}

/* Reads an environment variable's value as a count (a non-negative decimal integer; one
 * too large for a long reads as LONG_MAX) into *out: false when it is not one. For the
 * backends' settings (TILEATOM_CUDA_*, TILEATOM_CPU_LANES). */
static inline bool ta_env_count(const char *value, long *out)
{
	char *end = NULL;
	long v = strtol(value, &end, 10);
	if (end == value || *end || v < 0)
		return false;
	*out = v;
	return true;
}

/* The calling thread's number, for a backend that keeps something per attached thread (a
 * loop's lane): given on first use from a counter and never reused, as a thread's id may
 * be. Each translation unit that calls it numbers the threads on its own. */
static inline uint64_t ta_thread_no(void)
{
	static __thread uint64_t mine;
	static uint64_t last;
	if (!mine)
		mine = __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
	return mine;
}

/* The calling thread will poll (async_attach): true when it must, with
 * ta_backend_poll_async on every turn while any of its apply_async calls is out. */
static inline bool ta_backend_async_attach(ta_backend *be)
{
	return be->vt->async_attach && be->vt->apply_async && be->vt->async_attach(be);
}
/* Drives the calling thread's apply_async calls (poll_async): true while any is out. */
static inline bool ta_backend_poll_async(ta_backend *be)
{
	return be->vt->poll_async && be->vt->poll_async(be);
}

/* Fills *out for device d: device_stats, or for a one-device backend its memory
 * (mem_info) with the counts left 0 for the caller to fill. False: no such device. */
static inline bool ta_backend_device_stats(ta_backend *be, int d, ta_device_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (be->vt->device_stats)
		return be->vt->device_stats(be, d, out);
	if (d != 0)
		return false;
	uint64_t freeb = 0, total = 0;
	if (be->vt->mem_info && be->vt->mem_info(be, &freeb, &total) == TA_OK) {
		out->memory_total = total;
		out->memory_used = total - freeb;
	}
	return true;
}

/* True when the backend can open CUDA IPC device buffers (ipc_open). */
static inline bool ta_backend_has_ipc(const ta_backend *be)
{
	return be && be->vt->ipc_open && be->vt->ipc_close;
}
static inline ta_status ta_backend_ipc_open(ta_backend *be, const void *handle, size_t handle_len,
                                            const uint8_t *gpu_uuid, size_t bytes, void **dptr,
                                            ta_error *err)
{
	return be->vt->ipc_open(be, handle, handle_len, gpu_uuid, bytes, dptr, err);
}
static inline void ta_backend_ipc_close(ta_backend *be, void *dptr)
{
	if (ta_backend_has_ipc(be))
		be->vt->ipc_close(be, dptr);
}

#ifdef __cplusplus
}
#endif
#endif /* TA_BACKEND_H */
