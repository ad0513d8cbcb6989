/* ta_cuda_private.h: internal entry points of the CUDA backend (kernels/ta_cuda.cu) for
 * its tests and benchmark; not part of the backend interface (ta_backend.h). Plain C.
 *
 * ta_cuda_launch_plan runs the kernel of a plan whose every pointer (operands, old_out)
 * already lives in device memory: the benchmark times it with CUDA events around it, and
 * the backend's apply calls it after staging a request. */
#ifndef TA_CUDA_PRIVATE_H
#define TA_CUDA_PRIVATE_H

#include "ta_backend.h"
#include "ta_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How ta_cuda_launch_plan runs a plan. */
typedef enum ta_cuda_path {
	TA_CUDA_PATH_NONE = 0,         /* nothing to launch (no elements) */
	TA_CUDA_PATH_GLOBAL = 1,       /* general loop, global space */
	TA_CUDA_PATH_GLOBAL_FAST = 2,  /* contiguous fast loop, global space */
	TA_CUDA_PATH_SHARED = 3,       /* general loop, block-private shared copy */
	TA_CUDA_PATH_SHARED_FAST = 4,  /* contiguous fast loop, block-private shared copy */
	TA_CUDA_PATH_CLUSTER = 5,      /* general loop, cluster-private distributed shared copy */
	TA_CUDA_PATH_CLUSTER_FAST = 6, /* contiguous fast loop, cluster-private copy */
	TA_CUDA_PATH_BULK = 7          /* contiguous region, TMA bulk reductions (sm_90) */
} ta_cuda_path;

/* Name of a path ("global", "global-fast", "shared", "shared-fast", "cluster",
 * "cluster-fast", "bulk", "none"). */
const char *ta_cuda_path_name(ta_cuda_path path);

/* Launches the kernel for dev_plan (all its pointers device memory, 16-byte aligned for
 * the fast loop) on the tile dev_tile (tile_bytes long) on stream (a cudaStream_t; NULL
 * for the default stream), on the current device. The kernel adds the skipped and applied
 * element counts to dev_counters[0] and [1], and the count of elements that resolved
 * outside the tile (never applied; nonzero only for an inconsistent plan) to [2] (device
 * memory, 3 counters zeroed by the caller). Does not synchronize. *path (when not NULL) receives
 * the path taken. Returns TA_OK, TA_INVALID_ARGUMENT for a plan that does not fit the tile or names
 * no kernel, or TA_INTERNAL with the CUDA error text when the launch fails. */
ta_status ta_cuda_launch_plan(const ta_plan *dev_plan, void *dev_tile, size_t tile_bytes,
                              unsigned long long *dev_counters, void *stream, ta_cuda_path *path,
                              ta_error *err);

/* Holds stream (a cudaStream_t; NULL for the default stream) until the host writes a
 * nonzero word to flag[0]: a one-thread kernel spins on it, for timeout_ms at most, and
 * writes 1 to flag[1] when it gave up waiting. flag is 2 words of mapped pinned host
 * memory (cudaHostAlloc with cudaHostAllocMapped), dev_flag its device pointer, both
 * words zeroed by the caller. The benchmark enqueues a launch behind the hold, records
 * its events around it, then releases the hold: the events then time the kernel alone,
 * without the host's launch call in between (the blocking-kernel method of nvbench).
 * Returns TA_OK, or TA_INTERNAL with the CUDA error text when the launch fails. */
ta_status ta_cuda_hold_stream(void *stream, unsigned int *dev_flag, unsigned int timeout_ms,
                              ta_error *err);

/* Turns the automatic choice of a private window (one block's or a cluster's) for
 * space-global requests on (nonzero, the default) or off, process-wide: the benchmark
 * compares the paths with it. Explicit space-shared requests are not affected. */
void ta_cuda_set_auto_window(int enabled);

/* 1 when element-wise requests can take TMA bulk reductions (TA_CUDA_PATH_BULK) on the
 * current device (kernels built for sm_90 or later and a device of compute capability 9 or
 * later), else 0. */
int ta_cuda_bulk_reductions(void);

/* 1 when windows too large for one block can go to a thread-block cluster on the current
 * device (kernels built for sm_90 or later and a device that launches clusters), else 0. */
int ta_cuda_cluster_windows(void);

/* ---- batches of small requests (one launch for many requests) ------------------------
 * The host resolves every element of a small global-space plan (ta_plan_resolve) and
 * passes the applied ones as descriptors; the batch kernel gives each chain (one caller's
 * requests, in order) to one warp, which runs a request's elements on its lanes and puts a
 * fence and a warp barrier between requests. Masked and skipped elements never reach the
 * device. These structs live in mapped pinned host memory that the kernel reads directly. */

/* One element to apply. */
typedef struct ta_batch_elem {
	uint64_t addr;    /* device address of the tile element */
	uint64_t value;   /* operand bits (zero-extended; negated on the device for SUB) */
	uint64_t compare; /* CAS: expected bits */
	uint32_t code;    /* ta_batch_code(dtype, op, sem, scope, want_old) */
	uint32_t out;     /* slot in the old-value array, TA_BATCH_NO_OUT when not wanted */
} ta_batch_elem;

/* One request: a run of elements, then a fence before the chain's next request. */
typedef struct ta_batch_item {
	uint32_t first; /* index of its first element */
	uint32_t count; /* its elements */
	uint32_t fence; /* after it: 1 fence at gpu scope, 2 at sys scope (scope sys), 0 none
	                   (it and the next are relaxed: the warp barrier alone) */
	uint32_t pad;   /* (keeps the struct 16 bytes) */
} ta_batch_item;

/* One caller's requests, run in order by one warp. */
typedef struct ta_batch_chain {
	uint32_t first_item; /* index of its first item */
	uint32_t n_items;    /* its items */
} ta_batch_chain;

/* ta_batch_elem.out of an element whose old value nobody reads. */
#define TA_BATCH_NO_OUT 0xffffffffu

/* Packs an element's op code: dtype in bits 0-7, op 8-15, sem 16-19, scope 20-23,
 * want_old bit 24 (the ta_dtype, ta_op, ta_sem, ta_scope values). */
static inline uint32_t ta_batch_code(int dtype, int op, int sem, int scope, int want_old)
{
	return (uint32_t)dtype | (uint32_t)op << 8 | (uint32_t)sem << 16 | (uint32_t)scope << 20 |
	       (uint32_t)(want_old != 0) << 24;
}

/* Launches the batch kernel over n_chains chains on stream (a cudaStream_t) of the current
 * device: chains, items and elems are device-accessible pointers (mapped host memory),
 * olds (device-accessible, 8 bytes a slot) receives the old value of every element whose
 * out is a slot. Does not synchronize. Returns TA_OK or TA_INTERNAL with the CUDA error. */
ta_status ta_cuda_launch_batch(const ta_batch_chain *chains, uint32_t n_chains,
                               const ta_batch_item *items, const ta_batch_elem *elems,
                               uint64_t *olds, void *stream, ta_error *err);

/* ---- the persistent batch kernel (small batches without a launch) -------------------
 * One block that stays resident and polls a mailbox in mapped pinned host memory: the
 * host writes a batch's descriptors into one of the mailbox's two areas (a ta_pk_head, the
 * chains at offset sizeof(ta_pk_head), items at items_off, elements at elems_off) and rings
 * the bell with TA_PK_BELL(seq, the area's slot, 16-byte units of it to read); the kernel
 * runs it as k_batch would, writes old values to that slot's olds, and writes seq to done.
 * It writes seq to taken as soon as it has read a bell, so that the host, which prepares
 * the next batch in the other area while this one runs, may ring the next bell before
 * this batch is done: the kernel then finds it waiting when it polls again. */
/* Threads of the persistent kernel's one block: warp w runs chains w, w + 32, ... */
#define TA_PK_THREADS 1024
/* Most chains in a batch the persistent kernel can take (a warp runs every 32nd). */
#define TA_PK_CHAINS 512
/* Most chains in a batch it takes unless told otherwise (TILEATOM_CUDA_PERSISTENT). */
#define TA_PK_CHAINS_DEFAULT 64
/* Bytes of the descriptor area (copied into the kernel's shared memory per batch). */
#define TA_PK_DESC_BYTES 40960
/* Old-value slots of the mailbox. */
#define TA_PK_OLDS 2048
/* The bell value that stops the persistent kernel. */
#define TA_PK_STOP UINT64_MAX
/* The bell of batch seq whose descriptors are units 16-byte units long in area slot (0 or
 * 1: the host writes the next batch into one area while the kernel runs the other). */
#define TA_PK_BELL(seq, slot, units)                                                               \
	((uint64_t)(seq) << 16 | (uint64_t)(slot) << 15 | (uint64_t)(units))
/* The 16-byte units of a bell. */
#define TA_PK_BELL_UNITS(bell) ((uint32_t)((bell)&0x7fffu))
/* The area slot of a bell. */
#define TA_PK_BELL_SLOT(bell) ((uint32_t)((bell) >> 15) & 1u)
/* The sequence number of a bell. */
#define TA_PK_BELL_SEQ(bell) ((bell) >> 16)
/* The head of the descriptor area. */
typedef struct ta_pk_head {
	uint32_t n_chains;  /* chains, at offset sizeof(ta_pk_head) */
	uint32_t items_off; /* byte offset of the items */
	uint32_t elems_off; /* byte offset of the elements */
	uint32_t pad;       /* (keeps the head 16 bytes) */
} ta_pk_head;
/* The persistent kernel's trace sums (ta_pk_mailbox.tr_ns): batches timed; from the last
 * batch's done to the next bell seen; copying a batch's descriptors; warp 0's own chains;
 * the other warps' chains and the fences after warp 0's; writing done. */
enum {
	TA_PK_TR_N,
	TA_PK_TR_GAP,
	TA_PK_TR_COPY,
	TA_PK_TR_CHAIN0,
	TA_PK_TR_REST,
	TA_PK_TR_DONE,
	TA_PK_TR_COUNT /* (how many: the length of tr_ns) */
};
/* The control words shared by the host and the persistent kernel (mapped pinned memory;
 * the host's word and the kernel's on separate 128-byte lines). */
typedef struct ta_pk_mailbox {
	uint64_t bell;     /* host: TA_PK_BELL of the latest batch, or TA_PK_STOP */
	uint64_t pad0[15]; /* (its own line) */
	uint64_t done;     /* kernel: sequence number of the latest batch run */
	uint64_t exited;   /* kernel: the epoch of a kernel that has returned */
	uint64_t taken;    /* kernel: sequence number of the latest bell it has read */
	uint64_t pad1[13]; /* (its own line) */
	uint64_t trace;    /* host: nonzero when the kernel times its batches (below) */
	uint64_t pad2[15]; /* (its own line) */
	uint64_t tr_ns[TA_PK_TR_COUNT];     /* kernel, when tracing: the batches timed and the
	                                     * nanoseconds each phase took, summed over every
	                                     * launch (TA_PK_TR_*) */
	uint64_t pad3[16 - TA_PK_TR_COUNT]; /* (its own line) */
} ta_pk_mailbox;
/* Launches the persistent kernel (one block) on stream: area (two of TA_PK_DESC_BYTES) and
 * olds (two of TA_PK_OLDS slots; a bell's slot picks one of each) are device-accessible
 * mapped memory; it takes bells other than last;
 * it writes epoch to mb->exited when it returns: on TA_PK_STOP, after idle_ns without a
 * batch, or after life_ns since its launch. Returns TA_OK or TA_INTERNAL. */
ta_status ta_cuda_launch_persistent(ta_pk_mailbox *mb, const void *area, uint64_t *olds,
                                    uint64_t last, uint64_t epoch, uint64_t idle_ns,
                                    uint64_t life_ns, void *stream, ta_error *err);
/* Sets the most chains (callers) a batch may have to go to the persistent kernel of a
 * CUDA backend: 0 turns it off (every batch is a launch, a running kernel is stopped);
 * values over TA_PK_CHAINS mean TA_PK_CHAINS. The default is TA_PK_CHAINS_DEFAULT, or the
 * value of the environment variable TILEATOM_CUDA_PERSISTENT when the backend is created. */
void ta_cuda_set_persistent(ta_backend *be, int max_chains);
/* Batches that went through the persistent kernel, and its launches (be: CUDA backend). */
void ta_cuda_persistent_counts(ta_backend *be, unsigned long long *batches,
                               unsigned long long *launches);
/* The batcher's counts so far: batches launched and requests they carried (be is a CUDA
 * backend). */
void ta_cuda_batch_counts(ta_backend *be, unsigned long long *batches, unsigned long long *batched);

/* Number of kernels in the kernel table (global + shared + cluster), for tests. */
int ta_cuda_kernel_count(void);

/* Checks the compile-time kernel table against the core's legality rules: a global kernel
 * exactly for the (dtype, op) pairs ta_op_accepts_dtype allows, a shared and a cluster
 * kernel exactly where ta_op_shared_ok holds too (the shared kernels of the counting modes
 * for integer dtypes only). Returns TA_OK, or TA_INTERNAL naming the
 * first pair that disagrees (the backend refuses to start then). */
ta_status ta_cuda_check_tables(ta_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TA_CUDA_PRIVATE_H */
