/* ta_cuda.cu: the CUDA backend (ta_backend.h): tiles in device memory, requests applied by
 * the prebuilt kernels of ta_cuda_kernels.cuh.
 *
 * Happy path of apply: take a free staging slot (a stream, a pinned host buffer and a
 * device buffer; a small pool guarded by a mutex, one slot per concurrent caller), copy
 * the plan's host operands into the pinned buffer, one cudaMemcpyAsync to the device,
 * launch the kernel with a copy of the plan whose pointers are rewritten to the device
 * buffer, copy the counters and old values back, synchronize that stream, release the
 * slot. Large pageable operands (TA_CUDA_PIPE_MIN bytes or more) are copied into the pinned
 * buffer in chunks on several threads (tacore/ta_copy.h), each chunk's DMA queued as soon
 * as it is there, so that the transfer overlaps the copy. Each slot's counters live in
 * device memory that is zeroed once: a call reads them back after its kernel and reports
 * the difference (no copy before the launch). The resident kernel is held off only while
 * a slot's buffers grow (cudaMalloc, cudaFree may wait for the whole device). Large
 * operands (and old values) that already lie in page-locked memory (a
 * client's shared buffer, registered by host_register) skip the pinned buffer: one DMA
 * each, straight from (to) where they are. Operands (and old values) in a client's device
 * buffer (ta_operand.device, opened by ipc_open from a CUDA IPC handle) are not copied at
 * all: the kernel reads (writes) them in place.
 *
 * A plan with a merge-out (ta_plan.h, ta_merge_out: the multi-device layer's partial tile
 * of a histogram into a sharded tile) always takes this path, never the batcher: on the
 * slot's stream, a cudaMemsetAsync of the scratch (zero_first), the plan's kernel, then
 * ta_cuda_kernels.cuh's k_merge_out adding each target's rows of the scratch into it
 * (red/atom at the plan's sem and scope, scope sys for another GPU's memory written over
 * peer access), and the one synchronisation.
 *
 * Small requests (global space, up to TA_CUDA_BATCH_ITEM_MAX elements) take the batch
 * path instead (ta_cuda_batcher.cu): the caller queues its request with the batcher; the first
 * caller to find no batch running leads: it takes every request queued (after the optional batch
 * window), resolves their elements on the host into descriptors in mapped pinned memory,
 * launches ta_cuda_batch.cuh's kernel once (or, for a batch that fits its mailbox, rings
 * the resident kernel: "the persistent kernel" below), waits for it, hands each caller
 * its counts and old values and wakes them. Requests queued while a batch runs go in the
 * next one, so a busy GPU takes many requests per launch and an idle one answers a lone
 * request with no launch and no copies.
 *
 * Failure modes: every CUDA call is checked. Allocation failures (cudaMalloc,
 * cudaHostAlloc) give RESOURCE_EXHAUSTED and clear the error; a sticky device error (an
 * illegal address, a launch failure: the context is lost) is logged to stderr once and
 * every later call reports it as INTERNAL with the CUDA error text; other CUDA errors give
 * INTERNAL for that call only. */
#include <cuda.h> /* CUdeviceptr and CUresult only: the driver call is looked up at run time */
#include <cuda_runtime.h>

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <sched.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utility>

#include "ta_backend.h"
#include "ta_copy.h"
#include "ta_cuda_backend.h"
#include "ta_cuda_private.h"
#include "ta_cuda_kernels.cuh"
#include "ta_lower.h"

using ta::kargs;

/* The architecture the kernels were built for (configure passes it; 0: unknown). Cluster
 * launches exist from 90 on: below, the host never launches the cluster kernels. */
#ifndef TA_CUDA_CC
#define TA_CUDA_CC 0
#endif

/* ---- the kernel table, generated from ta_ops.def ---------------------------------------*/

/* Signature of every kernel. */
typedef void (*ta_kfn)(const kargs);

/* Values of the dtypes column of TA_OP (the kind column of TA_DTYPE: ta::dt_kind). */
enum { TA_OPD_ANY = 0, TA_OPD_INT = 1 };

/* Per op: which dtypes it accepts (from ta_ops.def). */
static constexpr int op_dtypes[TA_OP_COUNT] = {
    TA_OPD_ANY,
#define TA_OP(id, name, kind, dtypes, ...) TA_OPD_##dtypes,
#include "ta_ops.def"
#undef TA_OP
};
/* Per op: 1 when space shared is defined for it (from ta_ops.def). */
static constexpr int op_shared[TA_OP_COUNT] = {
    0,
#define TA_OP(id, name, kind, dtypes, families, shared, ...) shared,
#include "ta_ops.def"
#undef TA_OP
};
/* Per dtype: INT, FLOAT or MASK (from ta_ops.def); NONE is MASK (no tile). */
static constexpr int dtype_kind[TA_DTYPE_COUNT] = {
    ta::DK_MASK,
#define TA_DTYPE(id, wire, name, size, kind, ...) ta::DK_##kind,
#include "ta_ops.def"
#undef TA_DTYPE
};

/* True when a global-space kernel exists for (dtype, op). */
static constexpr bool legal_global(int dt, int op)
{
	return op > TA_OP_NONE && op < TA_OP_COUNT && dt > TA_DTYPE_NONE && dt < TA_DTYPE_COUNT &&
	       dtype_kind[dt] != ta::DK_MASK &&
	       (op_dtypes[op] == TA_OPD_ANY || dtype_kind[dt] == ta::DK_INT);
}
/* True when a shared-space kernel exists for (dtype, op). */
static constexpr bool legal_shared(int dt, int op)
{
	return legal_global(dt, op) && op_shared[op];
}
/* The kernel op of a table op: SUB runs the ADD kernels with the operand negated. */
static constexpr int kernel_op(int op)
{
	return op == TA_OP_SUB ? TA_OP_ADD : op;
}

#include "ta_cuda_batch.cuh"

/* Number of loop modes (ta::kmode). */
#define TA_MODES 6
/* Kernel tables, indexed [mode][dtype][op]; NULL where the table has no variant. */
static ta_kfn g_global[TA_MODES][TA_DTYPE_COUNT][TA_OP_COUNT];
static ta_kfn g_shared[TA_MODES][TA_DTYPE_COUNT][TA_OP_COUNT];
/* Cluster kernels (sm_90): every mode but REGION (a region touches each slot once). */
static ta_kfn g_cluster[TA_MODES][TA_DTYPE_COUNT][TA_OP_COUNT];
/* Bulk-reduction kernels (sm_90), indexed [dtype][op]; NULL where the table has no
 * TA_BULK form (ta_op_bulk_ok). */
static ta_kfn g_bulk[TA_DTYPE_COUNT][TA_OP_COUNT];
/* Resident blocks per SM of each global kernel (0: not computed yet). */
static int g_global_occ[TA_MODES][TA_DTYPE_COUNT][TA_OP_COUNT];
/* Resident blocks per SM of each block-window kernel for the window size it last ran
 * with: (shared-memory bytes << 32) | blocks (0: not computed yet). The occupancy query
 * costs microseconds of host time before every launch otherwise. */
static uint64_t g_shared_occ[TA_MODES][TA_DTYPE_COUNT][TA_OP_COUNT];
/* Fills the tables once. */
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

/* Fills the table entries of dtype DT for every op in OPS. */
template <int DT, int... OPS> static void fill_dtype(std::integer_sequence<int, OPS...>)
{
	(
	    [] {
		    constexpr int OP = OPS;
		    if constexpr (legal_global(DT, OP)) {
			    g_global[0][DT][OP] = &ta::k_global<DT, kernel_op(OP), ta::M_GENERAL>;
			    g_global[1][DT][OP] = &ta::k_global<DT, kernel_op(OP), ta::M_REGION>;
			    g_global[2][DT][OP] = &ta::k_global<DT, kernel_op(OP), ta::M_FLAT32>;
			    g_global[3][DT][OP] = &ta::k_global<DT, kernel_op(OP), ta::M_FLAT64>;
		    }
		    if constexpr (legal_global(DT, OP)) {
			    if constexpr (ta::bulk_ok<DT, OP>())
				    g_bulk[DT][OP] = &ta::k_bulk<DT, OP>;
		    }
		    if constexpr (legal_shared(DT, OP)) {
			    g_shared[0][DT][OP] = &ta::k_shared<DT, kernel_op(OP), ta::M_GENERAL>;
			    g_shared[1][DT][OP] = &ta::k_shared<DT, kernel_op(OP), ta::M_REGION>;
			    g_shared[2][DT][OP] = &ta::k_shared<DT, kernel_op(OP), ta::M_FLAT32>;
			    g_shared[3][DT][OP] = &ta::k_shared<DT, kernel_op(OP), ta::M_FLAT64>;
			    if constexpr (dtype_kind[DT] == ta::DK_INT) {
				    g_shared[ta::M_COUNT32][DT][OP] =
				        &ta::k_shared<DT, kernel_op(OP), ta::M_COUNT32>;
				    g_shared[ta::M_COUNT64][DT][OP] =
				        &ta::k_shared<DT, kernel_op(OP), ta::M_COUNT64>;
			    }
			    g_cluster[0][DT][OP] = &ta::k_cluster<DT, kernel_op(OP), ta::M_GENERAL>;
			    g_cluster[2][DT][OP] = &ta::k_cluster<DT, kernel_op(OP), ta::M_FLAT32>;
			    g_cluster[3][DT][OP] = &ta::k_cluster<DT, kernel_op(OP), ta::M_FLAT64>;
		    }
	    }(),
	    ...);
}
/* Fills the tables for every dtype in DTS. */
template <int... DTS> static void fill_all(std::integer_sequence<int, DTS...>)
{
	(fill_dtype<DTS>(std::make_integer_sequence<int, TA_OP_COUNT>{}), ...);
}
/* pthread_once routine of the tables. */
static void fill_tables(void)
{
	fill_all(std::make_integer_sequence<int, TA_DTYPE_COUNT>{});
}

extern "C" int ta_cuda_kernel_count(void)
{
	pthread_once(&g_tables_once, fill_tables);
	int n = 0;
	for (int f = 0; f < TA_MODES; f++)
		for (int d = 0; d < TA_DTYPE_COUNT; d++)
			for (int o = 0; o < TA_OP_COUNT; o++)
				n += (g_global[f][d][o] && o != TA_OP_SUB) +
				     (g_shared[f][d][o] && o != TA_OP_SUB) +
				     (g_cluster[f][d][o] && o != TA_OP_SUB);
	for (int d = 0; d < TA_DTYPE_COUNT; d++)
		for (int o = 0; o < TA_OP_COUNT; o++)
			n += g_bulk[d][o] != NULL;
	return n;
}

extern "C" ta_status ta_cuda_check_tables(ta_error *err)
{
	pthread_once(&g_tables_once, fill_tables);
	for (int d = 0; d < TA_DTYPE_COUNT; d++)
		for (int o = 0; o < TA_OP_COUNT; o++) {
			bool global = ta_op_accepts_dtype((ta_op)o, (ta_dtype)d);
			bool shared = global && ta_op_shared_ok((ta_op)o);
			if ((g_bulk[d][o] != NULL) != ta_op_bulk_ok((ta_op)o, (ta_dtype)d))
				return ta_error_set(err, TA_INTERNAL,
				                    "the CUDA bulk kernel table disagrees with the "
				                    "table's TA_BULK rows on %s %s",
				                    ta_op_name((ta_op)o),
				                    ta_dtype_name((ta_dtype)d));
			for (int f = 0; f < TA_MODES; f++) {
				/* the counting modes: block windows of integer dtypes only */
				bool cm = ta::count_mode(f);
				bool sh = shared && (!cm || ta_dtype_is_int((ta_dtype)d));
				if ((g_global[f][d][o] != NULL) != (global && !cm) ||
				    (g_shared[f][d][o] != NULL) != sh ||
				    (f != ta::M_REGION &&
				     (g_cluster[f][d][o] != NULL) != (shared && !cm)))
					return ta_error_set(err, TA_INTERNAL,
					                    "the CUDA kernel table disagrees with "
					                    "the legality table "
					                    "on %s %s (mode %d)",
					                    ta_op_name((ta_op)o),
					                    ta_dtype_name((ta_dtype)d), f);
			}
		}
	return TA_OK;
}

extern "C" const char *ta_cuda_path_name(ta_cuda_path path)
{
	switch (path) {
	case TA_CUDA_PATH_GLOBAL:
		return "global";
	case TA_CUDA_PATH_GLOBAL_FAST:
		return "global-fast";
	case TA_CUDA_PATH_SHARED:
		return "shared";
	case TA_CUDA_PATH_SHARED_FAST:
		return "shared-fast";
	case TA_CUDA_PATH_CLUSTER:
		return "cluster";
	case TA_CUDA_PATH_CLUSTER_FAST:
		return "cluster-fast";
	case TA_CUDA_PATH_BULK:
		return "bulk";
	default:
		return "none";
	}
}

/* ---- plan analysis and launch -----------------------------------------------------------*/

/* Largest private window (bytes) a space-global request gets with only 4 elements a slot. */
#define TA_AUTO_SHARED_MAX (16u * 1024u)
/* Largest private window (bytes) one block holds for an explicit space-shared request;
 * larger windows go to a cluster (sm_90) or else run the global path (same result). */
#define TA_SHARED_MAX (96u * 1024u)
/* log2 of the largest cluster (blocks) a window is split over: 2 blocks, each reading every
 * operand of the cluster (the second read from L2). Measured on an H200 (doc/GPU-RESULTS.md):
 * a 65536-bin histogram over 2 blocks runs at about 490 G elements/s against 91 on the
 * global path; splits over 4 or 8 blocks (4 or 8 reads of each key) were not measured, so
 * larger windows take the global path. */
#define TA_CLUSTER_MAX_SHIFT 1
/* Elements per window slot from which a space-global request gets a private window of
 * any size that fits (one block's up to TA_SHARED_MAX, else a cluster's). Measured on an
 * H200 with 2^26 keys (64 or more a slot): 4096 bins 682 against 35 G elements/s global,
 * 16384 bins 413 against 51, 65536 bins (cluster) about 490 against 91. */
#define TA_AUTO_WINDOW_PER_SLOT 64
/* Whether space-global requests may get a private window (ta_cuda_set_auto_window). */
static int g_auto_window = 1;

extern "C" void ta_cuda_set_auto_window(int enabled)
{
	__atomic_store_n(&g_auto_window, enabled != 0, __ATOMIC_RELAXED);
}

/* Elements of an operand's data reachable from the plan's iteration shape (0 when the
 * operand is absent); ta_plan_check has made sure it fits in int64. */
static int64_t operand_span(const ta_plan *p, const ta_operand *op)
{
	if (!op->data)
		return 0;
	int64_t span = 1;
	for (int a = 0; a < p->rank; a++)
		span += (p->shape[a] - 1) * op->stride[a];
	return span;
}

/* 1 when op is contiguous over the iteration shape, 0 when scalar (all strides 0), -1
 * otherwise. */
static int operand_layout(const ta_plan *p, const ta_operand *op)
{
	bool scalar = true, contig = true;
	int64_t want = 1;
	for (int a = p->rank - 1; a >= 0; a--) {
		if (op->stride[a] != 0)
			scalar = false;
		if (p->shape[a] > 1 && op->stride[a] != want)
			contig = false;
		want *= p->shape[a];
	}
	return scalar ? 0 : contig ? 1 : -1;
}

/* True when pointer q is 16-byte aligned. */
static bool aligned16(const void *q)
{
	return ((uintptr_t)q & 15u) == 0;
}

/* Checks the plan against the tile (ta_plan_check) and fills the launch arguments
 * (everything but the path choice). */
static ta_status check_plan(const ta_plan *p, size_t tile_bytes, kargs *a, ta_error *err)
{
	int64_t tile_elems = 0;
	ta_status st = ta_plan_check(p, tile_bytes, &tile_elems, err);
	if (st != TA_OK)
		return st;
	memset(a, 0, sizeof(*a));
	a->p = *p;
	a->tile_elems = tile_elems;
	a->ss = ta::ss_of(p->sem, p->scope);
	a->negate = p->op == TA_OP_SUB;
	return TA_OK;
}

/* What the device offers the shared-memory and bulk paths. */
struct smem_limits {
	size_t optin;  /* largest dynamic shared memory of one block, bytes */
	bool clusters; /* thread-block clusters can be launched (sm_90 and later) */
	bool bulk;     /* TMA bulk copies and reductions (sm_90 and later) */
};

/* log2 of the smallest cluster (2^1 up to 2^TA_CLUSTER_MAX_SHIFT blocks) whose blocks each
 * hold at most part_max bytes of a window of win elements of es bytes; -1 when none does. */
static int cluster_shift_for(int64_t win, size_t es, size_t part_max)
{
	for (int shift = 1; shift <= TA_CLUSTER_MAX_SHIFT; shift++) {
		int64_t part = (win + ((int64_t)1 << shift) - 1) >> shift;
		if (part * (int64_t)es <= (int64_t)part_max)
			return shift;
	}
	return -1;
}

/* Decides fast loop and private window (one block's or a cluster's) for a checked plan;
 * fills a and returns the path. */
static ta_cuda_path choose_path(const ta_plan *p, kargs *a, const smem_limits *lim)
{
	size_t es = ta_dtype_size(p->dtype);
	/* the region's offset range and contiguity */
	int64_t lo = 0, hi = 0;
	for (int t = 0; t < p->tile_rank; t++) {
		lo += p->origin[t] * p->tile_stride[t];
		hi += (p->origin[t] + p->extent[t] - 1) * p->tile_stride[t];
	}
	bool contiguous = hi - lo + 1 == p->region_count;
	/* the fast loop: REGION or FLAT over a contiguous region, operands contiguous or
	 * scalar and aligned */
	bool fast = contiguous && (p->addr == TA_ADDR_REGION || p->addr == TA_ADDR_FLAT);
	const ta_operand *ops[3] = {&p->values, &p->compare, &p->mask};
	int *vec[3] = {&a->vals_vec, &a->cmp_vec, &a->mask_vec};
	for (int i = 0; i < 3 && fast; i++) {
		if (!ops[i]->data)
			continue;
		int lay = operand_layout(p, ops[i]);
		if (lay < 0 || !aligned16(ops[i]->data))
			fast = false;
		*vec[i] = lay == 1;
	}
	if (fast && p->addr == TA_ADDR_FLAT) /* flat offsets are 32-bit in the fast loop */
		fast = operand_layout(p, &p->index[0]) == 1 && aligned16(p->index[0].data) &&
		       p->region_count < ((int64_t)1 << 31);
	if (fast && p->want_old)
		fast = aligned16(p->old_out);
	a->mode = !fast                               ? ta::M_GENERAL
	          : p->addr != TA_ADDR_FLAT           ? ta::M_REGION
	          : p->index[0].dtype == TA_DTYPE_I64 ? ta::M_FLAT64
	                                              : ta::M_FLAT32;
	a->base = lo;

	/* the private window: explicit for space shared; automatic when the result is the
	 * same bit for bit (integer add/sub/and/or/xor, min/max of any dtype; relaxed, no
	 * output) and many elements land on each slot of the window. One block's window
	 * when it fits, else a cluster's (not for REGION: a region touches each slot once) */
	int64_t win = hi - lo + 1, win_bytes = win * (int64_t)es;
	size_t block_max = lim->optin < TA_SHARED_MAX ? lim->optin : TA_SHARED_MAX;
	int shift = -1;
	if (lim->clusters && p->addr != TA_ADDR_REGION)
		shift = cluster_shift_for(win, es, lim->optin);
	bool block = false, cluster = false;
	if (ta_op_shared_ok(p->op) && !p->want_old) {
		if (p->space == TA_SPACE_SHARED) {
			block = win_bytes <= (int64_t)block_max;
			cluster = !block && shift > 0;
		} else {
			bool exact = ta_op_order_independent(p->op, p->dtype);
			bool eligible = exact && p->sem == TA_SEM_RELAXED &&
			                p->addr != TA_ADDR_REGION &&
			                __atomic_load_n(&g_auto_window, __ATOMIC_RELAXED);
			bool dense = p->count >= TA_AUTO_WINDOW_PER_SLOT * win;
			block =
			    eligible &&
			    ((win_bytes <= (int64_t)TA_AUTO_SHARED_MAX && p->count >= 4 * win) ||
			     (win_bytes <= (int64_t)block_max && dense));
			cluster = eligible && !block && win_bytes > (int64_t)block_max &&
			          shift > 0 && dense;
		}
	}
	if (block || cluster) {
		a->lo = lo;
		a->win = win;
		a->cl_shift = cluster ? shift : 0;
	}
	if (cluster)
		return fast ? TA_CUDA_PATH_CLUSTER_FAST : TA_CUDA_PATH_CLUSTER;
	/* a histogram-like plan of an integer dtype in one block's window: the same scalar
	 * operand for every key, no mask or a scalar one (its value is read on the device),
	 * no output: the counting loop, compiled apart (ta::block_count) */
	if (block && fast && (a->mode == ta::M_FLAT32 || a->mode == ta::M_FLAT64) &&
	    ta_dtype_is_int(p->dtype) && p->values.data && !a->vals_vec &&
	    (!p->mask.data || !a->mask_vec))
		a->mode = a->mode == ta::M_FLAT32 ? ta::M_COUNT32 : ta::M_COUNT64;
	if (block)
		return fast ? TA_CUDA_PATH_SHARED_FAST : TA_CUDA_PATH_SHARED;
	return fast ? TA_CUDA_PATH_GLOBAL_FAST : TA_CUDA_PATH_GLOBAL;
}

/* Formats a CUDA error into err as INTERNAL: what failed, the error name and text. Clears
 * the runtime's last error so that the next launch on this thread does not report it again
 * (a sticky error stays: later calls see it from the call itself). */
static ta_status cuda_error(ta_error *err, cudaError_t e, const char *what)
{
	(void)cudaGetLastError();
	return ta_error_set(err, TA_INTERNAL, "%s: %s (%s)", what, cudaGetErrorName(e),
	                    cudaGetErrorString(e));
}

/* Devices whose facts query_limits keeps. */
#define TA_CUDA_MAX_DEVICES 64
/* The facts of one device, read once: the four attribute queries cost host time inside
 * every launch otherwise (bench_gpu times ta_cuda_launch_plan as a whole). */
struct limits_cache {
	smem_limits lim; /* its limits */
	int sms;         /* its SMs */
	int ready;       /* 1 once lim and sms hold the device's values (then never written) */
};
static limits_cache g_limits[TA_CUDA_MAX_DEVICES];
/* Serialises the filling of g_limits. */
static pthread_mutex_t g_limits_mu = PTHREAD_MUTEX_INITIALIZER;

/* Fills lim for the current device: shared memory per block, cluster and bulk support. */
static cudaError_t query_limits(smem_limits *lim, int *sms)
{
	int dev = 0, optin = 0, clusters = 0, major = 0;
	cudaError_t e = cudaGetDevice(&dev);
	if (e != cudaSuccess)
		return e;
	limits_cache *c = dev >= 0 && dev < TA_CUDA_MAX_DEVICES ? &g_limits[dev] : NULL;
	if (c && __atomic_load_n(&c->ready, __ATOMIC_ACQUIRE)) {
		*lim = c->lim;
		*sms = c->sms;
		return cudaSuccess;
	}
	e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, dev);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
	lim->optin = (size_t)optin;
	lim->clusters = e == cudaSuccess && clusters != 0 && TA_CUDA_CC >= 90;
	lim->bulk = e == cudaSuccess && major >= 9 && TA_CUDA_CC >= 90;
	if (e == cudaSuccess && c) {
		int lock = pthread_mutex_lock(&g_limits_mu);
		if (lock == 0 && !__atomic_load_n(&c->ready, __ATOMIC_RELAXED)) {
			c->lim = *lim;
			c->sms = *sms;
			__atomic_store_n(&c->ready, 1, __ATOMIC_RELEASE);
		}
		if (lock == 0)
			pthread_mutex_unlock(&g_limits_mu);
	}
	return e;
}

extern "C" int ta_cuda_bulk_reductions(void)
{
	smem_limits lim;
	int sms = 0;
	if (query_limits(&lim, &sms) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return lim.bulk ? 1 : 0;
}

extern "C" int ta_cuda_cluster_windows(void)
{
	smem_limits lim;
	int sms = 0;
	if (query_limits(&lim, &sms) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return lim.clusters ? 1 : 0;
}

/* Fewest blocks such that no thread handles 2^30 elements or more (the kernels count in
 * 32 bits), for blocks of threads threads. */
static int64_t floor_blocks(int64_t count, int threads)
{
	return count / ((int64_t)threads << 30) + 1;
}

/* Allows fn smem bytes of dynamic shared memory (beyond the default 48 KB). */
static cudaError_t allow_smem(ta_kfn fn, size_t smem)
{
	if (smem <= 48u * 1024u)
		return cudaSuccess;
	return cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
	                            (int)smem);
}

/* Launches a global-space or block-window kernel (ta::block_threads threads a block) with enough
 * blocks to fill the device (sms SMs). */
static ta_status launch_grid(ta_kfn fn, const kargs *a, bool shared, size_t es, int sms,
                             cudaStream_t stream, ta_error *err)
{
	size_t smem = 0;
	int occ = 0;
	cudaError_t e;
	if (shared) {
		smem = ((size_t)a->win * es + 15u) & ~(size_t)15u;
		e = allow_smem(fn, smem);
		if (e != cudaSuccess)
			return cuda_error(err, e, "raising the shared-memory limit");
		uint64_t *cached = &g_shared_occ[a->mode][a->p.dtype][a->p.op];
		uint64_t c = __atomic_load_n(cached, __ATOMIC_RELAXED);
		if (c != 0 && (c >> 32) == smem) {
			occ = (int)(uint32_t)c;
		} else {
			e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
			    &occ, (const void *)fn, ta::block_threads(ta::S_BLOCK, a->mode), smem);
			if (e != cudaSuccess)
				return cuda_error(err, e, "computing the occupancy");
			__atomic_store_n(cached, ((uint64_t)smem << 32) | (uint32_t)occ,
			                 __ATOMIC_RELAXED);
		}
	} else {
		int *cached = &g_global_occ[a->mode][a->p.dtype][a->p.op];
		occ = __atomic_load_n(cached, __ATOMIC_RELAXED);
		if (occ == 0) {
			e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, (const void *)fn,
			                                                  TA_BLOCK, 0);
			if (e != cudaSuccess)
				return cuda_error(err, e, "computing the occupancy");
			__atomic_store_n(cached, occ, __ATOMIC_RELAXED);
		}
	}
	if (occ < 1)
		occ = 1;
	const int threads = ta::block_threads(shared ? ta::S_BLOCK : ta::S_GLOBAL, a->mode);
	/* elements a block takes per step of its loop */
	int64_t per_thread = 4;
	if (a->mode == ta::M_REGION)
		per_thread =
		    es == 8 ? ta::region_per_thread<uint64_t>() : ta::region_per_thread<uint32_t>();
	else if (a->mode == ta::M_FLAT32 || a->mode == ta::M_FLAT64 || ta::count_mode(a->mode))
		per_thread =
		    4 * (shared ? ta::flat_unroll<ta::S_BLOCK>() : ta::flat_unroll<ta::S_GLOBAL>());
	int64_t per_block = (int64_t)threads * per_thread;
	int64_t blocks = (a->p.count + per_block - 1) / per_block;
	if (shared) {
		/* each block pays the window twice (init, merge): give it enough elements */
		int64_t per = a->win > 1024 ? a->win : 1024;
		int64_t cap = a->p.count / per;
		blocks = cap < 1 ? 1 : cap;
	}
	if (blocks > (int64_t)occ * sms)
		blocks = (int64_t)occ * sms;
	if (blocks < floor_blocks(a->p.count, threads))
		blocks = floor_blocks(a->p.count, threads);
	/* the counting modes count a block's keys in 32 bits: fewer than 2^31 a block */
	if (ta::count_mode(a->mode) && blocks < (a->p.count >> 31) + 1)
		blocks = (a->p.count >> 31) + 1;
	if (blocks > INT32_MAX)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "plan of %lld elements is too large",
		                    (long long)a->p.count);
	fn<<<(unsigned)blocks, threads, smem, stream>>>(*a);
	e = cudaGetLastError();
	return e == cudaSuccess ? TA_OK : cuda_error(err, e, "launching the kernel");
}

/* Launches a cluster kernel: clusters of 2^a->cl_shift blocks of TA_CLUSTER_BLOCK
 * threads, each block holding its part of the window, as many clusters as are resident
 * at once (fewer when there are few elements per window slot). *launched is false (and
 * TA_OK returned) when the device cannot hold even one such cluster: the caller then
 * runs the global path. */
static ta_status launch_cluster(ta_kfn fn, const kargs *a, size_t es, cudaStream_t stream,
                                bool *launched, ta_error *err)
{
	*launched = false;
	int64_t csize = (int64_t)1 << a->cl_shift;
	int64_t part = (a->win + csize - 1) >> a->cl_shift;
	size_t smem = ((size_t)part * es + 15u) & ~(size_t)15u;
	cudaError_t e = allow_smem(fn, smem);
	if (e != cudaSuccess)
		return cuda_error(err, e, "raising the shared-memory limit");
	cudaLaunchAttribute attr;
	memset(&attr, 0, sizeof attr);
	attr.id = cudaLaunchAttributeClusterDimension;
	attr.val.clusterDim.x = (unsigned)csize;
	attr.val.clusterDim.y = 1;
	attr.val.clusterDim.z = 1;
	cudaLaunchConfig_t cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.blockDim = dim3(TA_CLUSTER_BLOCK, 1, 1);
	cfg.dynamicSmemBytes = smem;
	cfg.stream = stream;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	cfg.gridDim = dim3((unsigned)csize, 1, 1);
	int resident = 0;
	e = cudaOccupancyMaxActiveClusters(&resident, (const void *)fn, &cfg);
	if (e != cudaSuccess)
		return cuda_error(err, e, "computing the cluster occupancy");
	if (resident < 1)
		return TA_OK;
	/* each cluster pays the window twice (init, merge): give it enough elements */
	int64_t per = a->win > 4096 ? a->win : 4096;
	int64_t n = a->p.count / per;
	if (n > resident)
		n = resident;
	if (n < 1)
		n = 1;
	/* (every block of a cluster runs over the cluster's elements) */
	int64_t need = floor_blocks(a->p.count, TA_CLUSTER_BLOCK);
	if (n < need)
		n = need;
	if (n * csize > INT32_MAX)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "plan of %lld elements is too large",
		                    (long long)a->p.count);
	cfg.gridDim = dim3((unsigned)(n * csize), 1, 1);
	e = cudaLaunchKernelEx(&cfg, fn, *a);
	if (e == cudaSuccess)
		e = cudaGetLastError();
	if (e != cudaSuccess)
		return cuda_error(err, e, "launching the cluster kernel");
	*launched = true;
	return TA_OK;
}

/* Smallest region (bytes) that takes the bulk path: below it the REGION loop runs (the bulk
 * path was measured on 2^26 elements only; a chunk is TA_BULK_CHUNK bytes). */
#define TA_BULK_MIN_BYTES (64u * 1024u)

/* True when the checked plan a (chosen path GLOBAL_FAST, REGION loop) may run as TMA bulk
 * reductions on the tile at dev_tile: the lowering names the bulk form for its (op, dtype,
 * sem, scope, output), the device has it, values present (contiguous or scalar, aligned:
 * the fast loop's conditions), no mask (a scalar mask's value lies in device memory), the
 * region 16-byte aligned in the tile and at least TA_BULK_MIN_BYTES long. */
static bool bulk_fits(const ta_plan *p, const kargs *a, const void *dev_tile,
                      const smem_limits *lim)
{
	size_t es = ta_dtype_size(p->dtype);
	return lim->bulk && a->mode == ta::M_REGION &&
	       ta_lower_uses_bulk(p->op, p->dtype, p->sem, p->scope, p->want_old) &&
	       g_bulk[p->dtype][p->op] && p->values.data && !p->mask.data &&
	       aligned16((const char *)dev_tile + a->base * (int64_t)es) &&
	       p->count * (int64_t)es >= (int64_t)TA_BULK_MIN_BYTES;
}

/* Launches the bulk kernel fn for a (bulk_fits): TA_BULK_THREADS threads a block,
 * TA_BULK_STAGES chunk buffers of shared memory each, a block per chunk up to
 * TA_BULK_PER_SM blocks an SM. */
static ta_status launch_bulk(ta_kfn fn, const kargs *a, size_t es, int sms, cudaStream_t stream,
                             ta_error *err)
{
	int64_t chunks = (a->p.count * (int64_t)es + TA_BULK_CHUNK - 1) / TA_BULK_CHUNK;
	int64_t blocks = (int64_t)TA_BULK_PER_SM * sms;
	if (blocks > chunks)
		blocks = chunks;
	if (blocks < 1)
		blocks = 1;
	size_t smem = (size_t)TA_BULK_STAGES * TA_BULK_CHUNK;
	static_assert(TA_BULK_STAGES * TA_BULK_CHUNK <= 48 * 1024,
	              "the bulk buffers fit the default dynamic shared memory");
	fn<<<(unsigned)blocks, TA_BULK_THREADS, smem, stream>>>(*a);
	cudaError_t e = cudaGetLastError();
	return e == cudaSuccess ? TA_OK : cuda_error(err, e, "launching the bulk kernel");
}

/* The hold of ta_cuda_hold_stream: spins until flag[0] is nonzero or limit_ns have passed
 * (then writes 1 to flag[1]). */
__global__ void k_hold(volatile unsigned int *flag, unsigned long long limit_ns)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	while (flag[0] == 0) {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
		if (t - t0 > limit_ns) {
			flag[1] = 1;
			return;
		}
	}
}

extern "C" ta_status ta_cuda_hold_stream(void *stream, unsigned int *dev_flag,
                                         unsigned int timeout_ms, ta_error *err)
{
	k_hold<<<1, 1, 0, (cudaStream_t)stream>>>(dev_flag,
	                                          (unsigned long long)timeout_ms * 1000000ull);
	cudaError_t e = cudaGetLastError();
	return e == cudaSuccess ? TA_OK : cuda_error(err, e, "launching the stream hold");
}

extern "C" ta_status ta_cuda_launch_plan(const ta_plan *dp, void *dev_tile, size_t tile_bytes,
                                         unsigned long long *dev_counters, void *stream,
                                         ta_cuda_path *path, ta_error *err)
{
	pthread_once(&g_tables_once, fill_tables);
	if (path)
		*path = TA_CUDA_PATH_NONE;
	kargs a;
	ta_status st = check_plan(dp, tile_bytes, &a, err);
	if (st != TA_OK)
		return st;
	if (dp->count == 0)
		return TA_OK;
	if (!dev_tile || !dev_counters)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "no tile or counters to launch on");
	smem_limits lim;
	int sms = 0;
	cudaError_t e = query_limits(&lim, &sms);
	if (e != cudaSuccess)
		return cuda_error(err, e, "querying the device");
	ta_cuda_path chosen = choose_path(dp, &a, &lim);
	a.tile = dev_tile;
	a.counters = dev_counters;
	bool cluster = chosen == TA_CUDA_PATH_CLUSTER || chosen == TA_CUDA_PATH_CLUSTER_FAST;
	bool shared =
	    cluster || chosen == TA_CUDA_PATH_SHARED || chosen == TA_CUDA_PATH_SHARED_FAST;
	ta_kfn fn = cluster  ? g_cluster[a.mode][dp->dtype][dp->op]
	            : shared ? g_shared[a.mode][dp->dtype][dp->op]
	                     : g_global[a.mode][dp->dtype][dp->op];
	if (!fn)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "no %s kernel for op %s on dtype %s",
		                    ta_cuda_path_name(chosen), ta_op_name(dp->op),
		                    ta_dtype_name(dp->dtype));
	size_t es = ta_dtype_size(dp->dtype);
	if (chosen == TA_CUDA_PATH_GLOBAL_FAST && bulk_fits(dp, &a, dev_tile, &lim)) {
		st = launch_bulk(g_bulk[dp->dtype][dp->op], &a, es, sms, (cudaStream_t)stream, err);
		if (st == TA_OK && path)
			*path = TA_CUDA_PATH_BULK;
		return st;
	}
	if (cluster) {
		bool launched = false;
		st = launch_cluster(fn, &a, es, (cudaStream_t)stream, &launched, err);
		if (st != TA_OK)
			return st;
		if (!launched) { /* no cluster fits the device: the global path, same result */
			chosen = a.mode == ta::M_GENERAL ? TA_CUDA_PATH_GLOBAL
			                                 : TA_CUDA_PATH_GLOBAL_FAST;
			cluster = shared = false;
			fn = g_global[a.mode][dp->dtype][dp->op];
		}
	}
	if (!cluster) {
		st = launch_grid(fn, &a, shared, es, sms, (cudaStream_t)stream, err);
		if (st != TA_OK)
			return st;
	}
	if (path)
		*path = chosen;
	return TA_OK;
}

/* Queues the adds of plan's merge-out (ta_plan.h, ta_merge_out) from the scratch dev_tile on
 * stream, behind the plan's kernel: k_merge_out, TA_MERGE_LAUNCH_TARGETS targets a launch,
 * each target's adds at the plan's sem and scope (sys for a remote one: peer memory). */
static ta_status launch_merge_out(const ta_plan *p, const void *dev_tile, cudaStream_t stream,
                                  ta_error *err)
{
	const ta_merge_out *mo = p->merge_out;
	smem_limits lim;
	int sms = 0;
	cudaError_t e = query_limits(&lim, &sms);
	if (e != cudaSuccess)
		return cuda_error(err, e, "querying the device for the merge-out adds");
	if (sms < 1)
		sms = 1;
	bool wide = ta_dtype_size(p->dtype) == 8;
	for (int first = 0; first < mo->n; first += TA_MERGE_LAUNCH_TARGETS) {
		ta::merge_args m;
		memset(&m, 0, sizeof(m));
		m.src = dev_tile;
		int k = 0;
		int64_t most = 0;
		for (; k < TA_MERGE_LAUNCH_TARGETS && first + k < mo->n; k++) {
			const ta_merge_target *tg = &mo->target[first + k];
			m.mem[k] = tg->mem;
			m.elem0[k] = tg->elem0;
			m.elems[k] = tg->elems;
			m.ss[k] = ta::ss_of(p->sem, tg->remote ? TA_SCOPE_SYS : p->scope);
			if (tg->elems > most)
				most = tg->elems;
		}
		if (most == 0)
			continue;
		/* enough blocks to cover the largest target, at most 4 per SM (grid-stride) */
		int64_t blocks = (most + TA_BLOCK - 1) / TA_BLOCK;
		if (blocks > (int64_t)sms * 4)
			blocks = (int64_t)sms * 4;
		dim3 grid((unsigned)blocks, (unsigned)k);
		if (wide)
			ta::k_merge_out<uint64_t><<<grid, TA_BLOCK, 0, stream>>>(m);
		else
			ta::k_merge_out<uint32_t><<<grid, TA_BLOCK, 0, stream>>>(m);
		e = cudaGetLastError();
		if (e != cudaSuccess)
			return cuda_error(err, e, "launching the merge-out adds");
	}
	return TA_OK;
}

/* ---- the backend ------------------------------------------------------------------------*/

static bool cuda_sticky(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorAssert:
	case cudaErrorECCUncorrectable:
	case cudaErrorLaunchTimeout:
	case cudaErrorUnknown:
		return true;
	default:
		return false;
	}
}

/* Reports a failed CUDA call: RESOURCE_EXHAUSTED for allocation failures (cleared),
 * INTERNAL otherwise; a sticky error marks the backend broken and is logged. */
ta_status be_fail(ta_cuda_backend *be, cudaError_t e, const char *what, ta_error *err)
{
	if (e == cudaErrorMemoryAllocation) {
		(void)cudaGetLastError();
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "%s: out of memory (%s)", what,
		                    cudaGetErrorString(e));
	}
	ta_status st = cuda_error(err, e, what);
	if (cuda_sticky(e)) {
		pthread_mutex_lock(&be->mu);
		if (!be->broken) {
			snprintf(be->broken_msg, sizeof be->broken_msg, "%s: %s (%s)", what,
			         cudaGetErrorName(e), cudaGetErrorString(e));
			/* stored last: cuda_failed reads it without the lock */
			__atomic_store_n(&be->broken, true, __ATOMIC_RELEASE);
			fprintf(stderr,
			        "tileatom cuda: device %d: sticky error, the CUDA context is "
			        "unusable: %s\n",
			        be->device, be->broken_msg);
		}
		pthread_mutex_unlock(&be->mu);
	}
	return st;
}

/* Returns INTERNAL when an earlier sticky error broke the backend, else TA_OK. */
ta_status be_check_broken(ta_cuda_backend *be, ta_error *err)
{
	pthread_mutex_lock(&be->mu);
	bool broken = be->broken;
	char msg[sizeof be->broken_msg];
	memcpy(msg, be->broken_msg, sizeof msg);
	pthread_mutex_unlock(&be->mu);
	if (broken)
		return ta_error_set(err, TA_INTERNAL,
		                    "CUDA device %d is unusable after an earlier error: %s",
		                    be->device, msg);
	return TA_OK;
}

/* vtable failed: a sticky error has made the context unusable (cause: that error). The
 * flag is read without the lock first, so that a healthy device costs one load. */
static bool cuda_failed(ta_backend *base, char *cause, size_t cap)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	if (!__atomic_load_n(&be->broken, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&be->mu);
	snprintf(cause, cap, "%s", be->broken_msg);
	pthread_mutex_unlock(&be->mu);
	return true;
}

/* Makes the backend's device current on the calling thread. */
ta_status be_enter(ta_cuda_backend *be, ta_error *err)
{
	ta_status st = be_check_broken(be, err);
	if (st != TA_OK)
		return st;
	cudaError_t e = cudaSetDevice(be->device);
	if (e != cudaSuccess)
		return be_fail(be, e, "cudaSetDevice", err);
	return TA_OK;
}

/* Waits for a free slot and takes it. */
static cuda_slot *slot_take(ta_cuda_backend *be)
{
	pthread_mutex_lock(&be->mu);
	for (;;) {
		for (int i = 0; i < TA_CUDA_SLOTS; i++)
			if (!be->slots[i].busy) {
				be->slots[i].busy = true;
				pthread_mutex_unlock(&be->mu);
				return &be->slots[i];
			}
		pthread_cond_wait(&be->cv, &be->mu);
	}
}

/* Releases buffers over TA_CUDA_KEEP_BYTES and gives the slot back. */
static void slot_give(ta_cuda_backend *be, cuda_slot *s)
{
	if (s->host_cap > TA_CUDA_KEEP_BYTES) {
		cudaFreeHost(s->host);
		s->host = NULL;
		s->host_cap = 0;
	}
	if (s->dev_cap > TA_CUDA_KEEP_DEV_BYTES) {
		cudaFree(s->dev);
		s->dev = NULL;
		s->dev_cap = 0;
	}
	pthread_mutex_lock(&be->mu);
	s->busy = false;
	pthread_cond_signal(&be->cv);
	pthread_mutex_unlock(&be->mu);
}

/* Grows a slot's buffers to at least host_bytes (pinned) and dev_bytes (device). */
static ta_status slot_reserve(ta_cuda_backend *be, cuda_slot *s, size_t host_bytes,
                              size_t dev_bytes, ta_error *err)
{
	cudaError_t e;
	size_t bytes = host_bytes;
	if (s->host_cap < bytes) {
		if (s->host)
			cudaFreeHost(s->host);
		s->host = NULL;
		s->host_cap = 0;
		e = cudaHostAlloc((void **)&s->host, bytes, cudaHostAllocDefault);
		if (e != cudaSuccess)
			return be_fail(be, e, "allocating pinned staging memory", err);
		s->host_cap = bytes;
	}
	bytes = dev_bytes;
	if (s->dev_cap < bytes) {
		if (s->dev)
			cudaFree(s->dev);
		s->dev = NULL;
		s->dev_cap = 0;
		e = cudaMalloc((void **)&s->dev, bytes);
		if (e != cudaSuccess)
			return be_fail(be, e, "allocating device staging memory", err);
		s->dev_cap = bytes;
	}
	return TA_OK;
}

/* One host operand array to stage: where it is, its size, where it goes. */
struct stage_item {
	const void *src;  /* host data */
	size_t bytes;     /* bytes to copy */
	size_t off;       /* offset in the device staging buffer */
	size_t hoff;      /* offset in the pinned staging buffer (unless direct) */
	bool direct;      /* src is pinned or registered: DMA from it, no staging copy */
	const void **dst; /* the device plan's pointer to rewrite */
};

/* True when p (bytes long) is worth a direct DMA: large, and in page-locked host memory
 * that CUDA knows (cudaHostAlloc, or cudaHostRegister of a client's shared buffer). */
static bool host_direct(const void *p, size_t bytes)
{
	if (!p || bytes < TA_CUDA_DIRECT_MIN)
		return false;
	cudaPointerAttributes attr;
	cudaError_t e = cudaPointerGetAttributes(&attr, p);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return attr.type == cudaMemoryTypeHost;
}

/* CLOCK_MONOTONIC in nanoseconds (the apply trace). */
static uint64_t trace_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Adds one apply's stage times (ns) and staged bytes to the trace (TILEATOM_CUDA_TRACE). */
static void apply_trace_add(ta_cuda_backend *be, uint64_t prep, uint64_t stage, uint64_t launch,
                            uint64_t wait, uint64_t finish, size_t staged)
{
	uint64_t ns[TA_CUDA_TRACE_STAGES] = {prep, stage, launch, wait, finish};
	pthread_mutex_lock(&be->mu);
	be->tr_applies++;
	be->tr_prep_ns += prep;
	be->tr_stage_ns += stage;
	be->tr_launch_ns += launch;
	be->tr_wait_ns += wait;
	be->tr_finish_ns += finish;
	be->tr_staged_bytes += staged;
	for (int i = 0; i < TA_CUDA_TRACE_STAGES; i++)
		if (be->tr_applies == 1 || ns[i] < be->tr_min_ns[i])
			be->tr_min_ns[i] = ns[i];
	pthread_mutex_unlock(&be->mu);
}

/* Where stage_chunk queues the DMA of a staged operand's chunks. */
struct stage_dma {
	ta_cuda_backend *be;       /* the backend (its device) */
	cuda_slot *s;              /* the slot (its stream) */
	unsigned char *dev, *host; /* the operand's place in the device and pinned buffers */
};

/* ta_copy_parallel callback: queues the DMA of a chunk just copied into the pinned buffer
 * on the slot's stream (from whichever copying thread; the kernel is queued after every
 * copy has returned). Returns the cudaError_t. */
static int stage_chunk(void *ctx, size_t off, size_t len)
{
	stage_dma *d = (stage_dma *)ctx;
	cudaError_t e = cudaSetDevice(d->be->device); /* a helper thread starts on device 0 */
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(d->dev + off, d->host + off, len, cudaMemcpyHostToDevice,
		                    d->s->stream);
	return (int)e;
}

/* Queues one operand's copy to the device: by DMA straight from a direct operand; else
 * through the pinned buffer, chunk by chunk (TA_CUDA_PIPE_CHUNK) on ta_copy_threads threads,
 * each chunk's DMA queued as soon as it is copied, so that the transfer overlaps the copy. */
static cudaError_t stage_operand(ta_cuda_backend *be, cuda_slot *s, const stage_item *it)
{
	if (it->direct)
		return cudaMemcpyAsync(s->dev + it->off, it->src, it->bytes, cudaMemcpyHostToDevice,
		                       s->stream);
	stage_dma d = {be, s, s->dev + it->off, s->host + it->hoff};
	int threads = ta_copy_threads(it->bytes);
	size_t chunk = it->bytes >= TA_CUDA_PIPE_MIN ? TA_CUDA_PIPE_CHUNK : 0;
	return (cudaError_t)ta_copy_parallel(d.host, it->src, it->bytes, threads, chunk,
	                                     stage_chunk, &d);
}

/* vtable destroy: releases the slots (streams, staging buffers) and the object. */
/* The live backends by device ordinal (one per GPU in a daemon serving several), so that
 * a call that touches another GPU (an IPC buffer opened where its memory is) holds that
 * GPU's resident kernel off too. Guarded by g_live_mu. */
static ta_cuda_backend *g_live[TA_CUDA_MAX_DEVICES];
static pthread_mutex_t g_live_mu = PTHREAD_MUTEX_INITIALIZER;

/* Records be as its device's live backend (or forgets it: on false). */
static void live_set(ta_cuda_backend *be, bool on)
{
	if (be->device < 0 || be->device >= TA_CUDA_MAX_DEVICES)
		return;
	pthread_mutex_lock(&g_live_mu);
	if (on)
		g_live[be->device] = be;
	else if (g_live[be->device] == be)
		g_live[be->device] = NULL;
	pthread_mutex_unlock(&g_live_mu);
}

/* Holds off the resident kernel of device dev's live backend, if any; returns it (for
 * live_release) or NULL. g_live_mu stays held in between, so the backend cannot go. */
static ta_cuda_backend *live_hold(int dev)
{
	pthread_mutex_lock(&g_live_mu);
	ta_cuda_backend *o = dev >= 0 && dev < TA_CUDA_MAX_DEVICES ? g_live[dev] : NULL;
	if (o)
		pk_hold(o);
	return o;
}

/* Ends live_hold. */
static void live_release(ta_cuda_backend *o)
{
	if (o)
		pk_release(o);
	pthread_mutex_unlock(&g_live_mu);
}

static void cuda_destroy(ta_backend *base)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	live_set(be, false);
	cudaSetDevice(be->device);
	if (be->batch.trace && be->tr_applies > 0) {
		double n = (double)be->tr_applies * 1000.0;
		fprintf(stderr,
		        "tileatom cuda trace: applies (own launch): %llu; mean us: set-up %.2f, "
		        "operands staged and queued %.2f (%.1f MiB staged a call), launch and "
		        "copy-back queued %.2f, wait %.2f, finish %.2f\n",
		        be->tr_applies, (double)be->tr_prep_ns / n, (double)be->tr_stage_ns / n,
		        (double)be->tr_staged_bytes / (double)be->tr_applies / 1048576.0,
		        (double)be->tr_launch_ns / n, (double)be->tr_wait_ns / n,
		        (double)be->tr_finish_ns / n);
		fprintf(stderr,
		        "tileatom cuda trace: applies (own launch): least us: set-up %.2f, staged "
		        "%.2f, launch %.2f, wait %.2f, finish %.2f\n",
		        be->tr_min_ns[0] / 1000.0, be->tr_min_ns[1] / 1000.0,
		        be->tr_min_ns[2] / 1000.0, be->tr_min_ns[3] / 1000.0,
		        be->tr_min_ns[4] / 1000.0);
	}
	batcher_destroy(be);
	for (int i = 0; i < TA_CUDA_SLOTS; i++) {
		cuda_slot *s = &be->slots[i];
		if (s->host)
			cudaFreeHost(s->host);
		if (s->dev)
			cudaFree(s->dev);
		if (s->host_cnt)
			cudaFreeHost(s->host_cnt);
		if (s->dev_cnt)
			cudaFree(s->dev_cnt);
		if (s->stream)
			cudaStreamDestroy(s->stream);
	}
	pthread_cond_destroy(&be->cv);
	pthread_mutex_destroy(&be->mu);
	free(be);
}

/* vtable tile_alloc: cudaMalloc + zero fill; RESOURCE_EXHAUSTED when the device is full. */
static ta_status cuda_tile_alloc(ta_backend *base, size_t bytes, void **mem, ta_error *err)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	*mem = NULL;
	if (bytes == 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "a tile needs at least one byte");
	ta_status st = be_enter(be, err);
	if (st != TA_OK)
		return st;
	void *p = NULL;
	pk_hold(be);
	cudaError_t e = cudaMalloc(&p, bytes);
	if (e == cudaSuccess) {
		e = cudaMemsetAsync(p, 0, bytes, 0);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(0);
		if (e != cudaSuccess) {
			cudaFree(p);
			pk_release(be);
			return be_fail(be, e, "zeroing a new tile", err);
		}
	}
	pk_release(be);
	if (e == cudaErrorMemoryAllocation) {
		(void)cudaGetLastError();
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "cannot allocate a %zu-byte tile on CUDA device %d: out of "
		                    "device memory",
		                    bytes, be->device);
	}
	if (e != cudaSuccess)
		return be_fail(be, e, "cudaMalloc of a tile", err);
	*mem = p;
	return TA_OK;
}

/* vtable tile_free: cudaFree (a failure is logged and recorded). */
static void cuda_tile_free(ta_backend *base, void *mem)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	if (!mem)
		return;
	cudaError_t e = cudaSetDevice(be->device);
	if (e == cudaSuccess) {
		pk_hold(be); /* cudaFree waits for the whole device */
		e = cudaFree(mem);
		pk_release(be);
	}
	if (e != cudaSuccess) {
		ta_error err;
		be_fail(be, e, "cudaFree of a tile", &err);
		fprintf(stderr, "tileatom cuda: %s\n", err.msg);
	}
}

static ta_status device_operands_here(ta_cuda_backend *be, ta_plan *dp, ta_error *err);

/* vtable apply: stages the plan through a slot and runs its kernel (see the file comment). */
static ta_status cuda_apply(ta_backend *base, void *mem, size_t tile_bytes, const ta_plan *plan,
                            ta_result *result, ta_error *err)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	result->skipped = 0;
	result->applied = 0;
	kargs check;
	ta_status st = check_plan(plan, tile_bytes, &check, err);
	if (st != TA_OK)
		return st;
	if (plan->count == 0)
		return TA_OK;
	if (!mem)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "no tile memory");
	if ((st = be_enter(be, err)) != TA_OK)
		return st;
	if (batchable(be, plan)) {
		ta_apply_call call = {mem, tile_bytes, plan, result, err, TA_OK};
		batch_wait wait;
		wait.calls = &call;
		wait.n = 1;
		batch_submit(be, &wait);
		return call.status;
	}

	/* staging layout: operands, then old values */
	uint64_t t0 = be->batch.trace ? trace_ns() : 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0;
	ta_plan dp = *plan;
	if ((st = device_operands_here(be, &dp, err)) != TA_OK)
		return st;
	size_t es = ta_dtype_size(plan->dtype);
	stage_item items[TA_MAX_RANK + 3];
	int n_items = 0, n_direct = 0;
	size_t end = 0, staged = 0;
	for (int i = 0; i < TA_MAX_RANK + 3; i++) {
		const ta_operand *op;
		ta_operand *dop;
		if (i < TA_MAX_RANK) {
			if (plan->addr == TA_ADDR_REGION || i >= plan->n_index)
				continue;
			op = &plan->index[i];
			dop = &dp.index[i];
		} else if (i == TA_MAX_RANK) {
			op = &plan->values;
			dop = &dp.values;
		} else if (i == TA_MAX_RANK + 1) {
			op = &plan->compare;
			dop = &dp.compare;
		} else {
			op = &plan->mask;
			dop = &dp.mask;
		}
		int64_t span = operand_span(plan, op);
		if (span <= 0) {
			dop->data = NULL;
			continue;
		}
		if (op->device) /* a client's device buffer: the kernel reads it in place */
			continue;
		size_t ebytes = ta_dtype_size(op->dtype);
		stage_item *it = &items[n_items++];
		it->src = op->data;
		it->bytes = (size_t)span * ebytes;
		it->off = end;
		it->dst = &dop->data;
		it->direct = host_direct(it->src, it->bytes);
		if (it->direct)
			n_direct++;
		else
			staged += it->bytes;
		end = align_up(end + it->bytes);
	}
	/* the pinned buffer holds the staged operands (at their device offsets when none is
	 * direct, so that one copy moves them all) and the old values */
	size_t hend = 0;
	for (int i = 0; i < n_items; i++) {
		if (items[i].direct)
			continue;
		items[i].hoff = n_direct ? hend : items[i].off;
		hend = align_up(items[i].hoff + items[i].bytes);
	}
	size_t ops_end = end;
	size_t out_off = end, hout_off = hend;
	/* old values into a client's device buffer are written there by the kernel */
	bool out_dev = plan->want_old && plan->old_out_device;
	size_t out_bytes = plan->want_old && !out_dev ? (size_t)plan->count * es : 0;
	bool out_direct = plan->want_old && host_direct(plan->old_out, out_bytes);
	end = align_up(end + out_bytes);
	if (!out_direct)
		hend = align_up(hend + out_bytes);

	cuda_slot *s = slot_take(be);
	/* growing a buffer (and freeing one over the keep size, which only a call that grew
	 * it has) may wait for the whole device: the resident kernel must be off meanwhile;
	 * the copies and the launch below (pinned or registered memory, the slot's own
	 * non-blocking stream) wait for nothing else */
	bool held = s->host_cap < hend || s->dev_cap < end;
	if (held)
		pk_hold(be);
	cudaError_t e = cudaSuccess;
	st = slot_reserve(be, s, hend, end, err);
	if (st != TA_OK) {
		slot_give(be, s);
		if (held)
			pk_release(be);
		return st;
	}
	dp.old_out = out_dev ? dp.old_out : plan->want_old ? (void *)(s->dev + out_off) : NULL;
	if (be->batch.trace)
		t1 = trace_ns();
	if (n_direct == 0 && staged < TA_CUDA_PIPE_MIN) {
		/* small: one copy moves every operand */
		for (int i = 0; i < n_items; i++)
			memcpy(s->host + items[i].hoff, items[i].src, items[i].bytes);
		if (ops_end > 0)
			e = cudaMemcpyAsync(s->dev, s->host, ops_end, cudaMemcpyHostToDevice,
			                    s->stream);
	} else {
		for (int i = 0; i < n_items && e == cudaSuccess; i++)
			e = stage_operand(be, s, &items[i]);
	}
	for (int i = 0; i < n_items; i++)
		*items[i].dst = s->dev + items[i].off;
	if (e != cudaSuccess) {
		st = be_fail(be, e, "copying operands to the device", err);
		goto out;
	}
	if (be->batch.trace)
		t2 = trace_ns();
	if (plan->merge_out && plan->merge_out->zero_first) {
		e = cudaMemsetAsync(mem, 0, tile_bytes, s->stream);
		if (e != cudaSuccess) {
			st = be_fail(be, e, "zeroing the scratch of a merge-out plan", err);
			goto out;
		}
	}
	st = ta_cuda_launch_plan(&dp, mem, tile_bytes, s->dev_cnt, s->stream, NULL, err);
	if (st == TA_OK && plan->merge_out)
		st = launch_merge_out(plan, mem, s->stream, err);
	if (st != TA_OK) /* a launch failure may be sticky: out classifies it */
		goto out;
	e = cudaMemcpyAsync(s->host_cnt, s->dev_cnt, TA_CUDA_COUNTERS * sizeof(unsigned long long),
	                    cudaMemcpyDeviceToHost, s->stream);
	if (e == cudaSuccess && out_bytes > 0)
		e = cudaMemcpyAsync(out_direct ? plan->old_out : (void *)(s->host + hout_off),
		                    s->dev + out_off, out_bytes, cudaMemcpyDeviceToHost, s->stream);
	if (e != cudaSuccess) {
		st = be_fail(be, e, "copying results from the device", err);
		goto out;
	}
	if (be->batch.trace)
		t3 = trace_ns();
	e = cudaStreamSynchronize(s->stream);
	if (e != cudaSuccess) {
		st = be_fail(be, e,
		             plan->merge_out ? "running the kernel and its merge-out adds"
		                             : "running the kernel",
		             err);
		goto out;
	}
	if (be->batch.trace)
		t4 = trace_ns();
	{
		/* the slot's counters only grow: this call's counts are the difference */
		unsigned long long counts[TA_CUDA_COUNTERS];
		for (int i = 0; i < TA_CUDA_COUNTERS; i++) {
			counts[i] = s->host_cnt[i] - s->cnt_seen[i];
			s->cnt_seen[i] = s->host_cnt[i];
		}
		result->skipped = counts[0];
		result->applied = counts[1];
		if (plan->want_old && !out_direct && !out_dev)
			memcpy(plan->old_out, s->host + hout_off, out_bytes);
		if (counts[2]) {
			st = ta_error_set(
			    err, TA_INTERNAL,
			    "cuda backend: %llu elements resolved outside the tile and "
			    "were not applied (inconsistent plan)",
			    counts[2]);
			goto out;
		}
	}
	st = TA_OK;
	if (be->batch.trace) {
		uint64_t t5 = trace_ns();
		apply_trace_add(be, t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, staged);
	}
out:
	/* an error path may leave copies or the kernel in flight on the slot's stream: they
	 * must be done before the next caller reuses its buffers; the counters then start
	 * again from zero (a failed kernel may have counted part of its elements) */
	if (st != TA_OK) {
		e = cudaStreamSynchronize(s->stream);
		if (e == cudaSuccess)
			e = cudaMemsetAsync(s->dev_cnt, 0,
			                    TA_CUDA_COUNTERS * sizeof(unsigned long long),
			                    s->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s->stream);
		if (e == cudaSuccess)
			memset(s->cnt_seen, 0, sizeof s->cnt_seen);
		else
			be_fail(be, e, "finishing a failed request (launch or copy)", NULL);
	}
	slot_give(be, s);
	if (held)
		pk_release(be);
	return st;
}

/* Resets call c's counts and checks its plan against its tile (apply_many, apply_async);
 * returns (and sets) c->status. */
static ta_status call_check(ta_apply_call *c)
{
	c->result->skipped = 0;
	c->result->applied = 0;
	c->status = ta_plan_check(c->plan, c->tile_bytes, NULL, c->err);
	if (c->status == TA_OK && c->plan->count > 0 && !c->mem)
		c->status = ta_error_set(c->err, TA_INVALID_ARGUMENT, "no tile memory");
	return c->status;
}

/* vtable apply_many: runs of consecutive small plans go through the batcher as one chain
 * (one warp, in order); any other plan runs alone between them, in its place. */
static void cuda_apply_many(ta_backend *base, ta_apply_call *calls, size_t n)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	size_t i = 0;
	while (i < n) {
		/* calls[i] that needs nothing from the GPU, or fails its checks, is done here */
		ta_apply_call *c = &calls[i];
		if (call_check(c) == TA_OK && c->plan->count > 0)
			c->status = be_enter(be, c->err);
		if (c->status != TA_OK || c->plan->count == 0) {
			i++;
			continue;
		}
		if (!batchable(be, c->plan)) {
			c->status =
			    cuda_apply(base, c->mem, c->tile_bytes, c->plan, c->result, c->err);
			i++;
			continue;
		}
		/* the longest run of checked small plans from i */
		size_t j = i + 1;
		while (j < n) {
			ta_apply_call *d = &calls[j];
			if (!d->mem || d->plan->count == 0 || !batchable(be, d->plan))
				break;
			d->status = ta_plan_check(d->plan, d->tile_bytes, NULL, d->err);
			if (d->status != TA_OK)
				break;
			j++;
		}
		batch_wait wait;
		wait.calls = &calls[i];
		wait.n = (int)(j - i);
		batch_submit(be, &wait);
		i = j;
	}
}

/* vtable apply_async: the calls that pass their checks go to the batcher as one chain
 * (one warp, in order) that the calling loop's lane (ta_cuda_lanes.cu) runs in its polls,
 * or, for a thread without one, the batcher's lead thread (or whichever caller leads); the
 * loop that called returns at once. A plan the batcher cannot take (not one of
 * ta_plan_async_ok's, or no batcher) runs as apply_many would, here, before done. */
static void cuda_apply_async(ta_backend *base, ta_apply_call *calls, size_t n,
                             void (*done)(void *arg), void *arg)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	size_t ready = 0, n_elems = 0;
	bool here = !batch_async_ready(be);
	for (size_t i = 0; i < n && !here; i++) {
		ta_apply_call *c = &calls[i];
		if (call_check(c) != TA_OK || c->plan->count == 0)
			continue;
		if (!batchable(be, c->plan))
			here = true;
		ready++;
		n_elems += (size_t)c->plan->count;
	}
	if (here) {
		cuda_apply_many(base, calls, n);
		done(arg);
		return;
	}
	if (ready == 0) {
		done(arg);
		return;
	}
	/* the wait, a copy of each call that runs, where each came from, and each one's
	 * elements resolved here: one allocation */
	size_t head =
	    sizeof(batch_wait) + ready * (sizeof(ta_apply_call) + sizeof(ta_apply_call *));
	head = (head + 15u) & ~(size_t)15u;
	size_t pre_bytes = ready * sizeof(batch_pre);
	pre_bytes = (pre_bytes + 15u) & ~(size_t)15u;
	batch_wait *w = (batch_wait *)malloc(head + pre_bytes + n_elems * sizeof(ta_batch_elem));
	if (!w) {
		for (size_t i = 0; i < n; i++)
			if (calls[i].status == TA_OK && calls[i].plan->count > 0)
				calls[i].status =
				    ta_error_set(calls[i].err, TA_RESOURCE_EXHAUSTED,
				                 "cuda backend: out of memory queueing "
				                 "a request");
		done(arg);
		return;
	}
	w->calls = (ta_apply_call *)(w + 1);
	w->orig = (ta_apply_call **)(w->calls + ready);
	w->pre = (batch_pre *)((unsigned char *)w + head);
	w->n = (int)ready;
	ta_batch_elem *room = (ta_batch_elem *)((unsigned char *)w->pre + pre_bytes);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (calls[i].status == TA_OK && calls[i].plan->count > 0) {
			w->calls[k] = calls[i];
			w->orig[k] = &calls[i];
			/* resolved now, on this loop's thread: the leader only copies them */
			w->pre[k].elems = room;
			room += calls[i].plan->count;
			(void)batch_pre_resolve(&w->calls[k], &w->pre[k]);
			k++;
		}
	w->done_fn = done;
	w->done_arg = arg;
	pk_lane *lane = lane_mine(be);
	if (lane) /* the calling loop's own lane: its polls run it */
		lane_submit(be, lane, w);
	else
		batch_submit_async(be, w);
}

/* vtable info: the facts gathered when the backend was created. */
static void cuda_info(ta_backend *base, ta_backend_info *info)
{
	*info = ((ta_cuda_backend *)base)->info;
}

/* vtable host_register: pins a client's shared buffer (daemon/shmbuf.c) for DMA with
 * cudaHostRegister (portable: every context may use it). A failure (e.g. the pinned-memory
 * limit) is reported as RESOURCE_EXHAUSTED and cleared; the buffer still works, staged like
 * any pageable operand. */
static ta_status cuda_host_register(ta_backend *base, void *ptr, size_t bytes, ta_error *err)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	ta_status st = be_enter(be, err);
	if (st != TA_OK)
		return st;
	pk_hold(be);
	cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
	pk_release(be);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "cudaHostRegister of a %zu-byte shared buffer: %s (%s)", bytes,
		                    cudaGetErrorName(e), cudaGetErrorString(e));
	}
	return TA_OK;
}

/* vtable host_unregister: undoes cuda_host_register (errors are logged, then cleared). */
static void cuda_host_unregister(ta_backend *base, void *ptr)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	if (be_enter(be, NULL) != TA_OK)
		return;
	pk_hold(be);
	cudaError_t e = cudaHostUnregister(ptr);
	pk_release(be);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		fprintf(stderr, "tileatom cuda backend: cudaHostUnregister: %s\n",
		        cudaGetErrorString(e));
	}
}

extern "C" int ta_cuda_enable_peer_access(const int *ords, int n, unsigned char *peer)
{
	int enabled = 0;
	int cur = 0;
	if (cudaGetDevice(&cur) != cudaSuccess) {
		(void)cudaGetLastError();
		cur = ords[0];
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			peer[i * n + j] = i == j;
			if (i == j)
				continue;
			int can = 0;
			cudaError_t e = cudaDeviceCanAccessPeer(&can, ords[i], ords[j]);
			if (e != cudaSuccess || !can) {
				(void)cudaGetLastError();
				continue;
			}
			e = cudaSetDevice(ords[i]);
			if (e == cudaSuccess)
				e = cudaDeviceEnablePeerAccess(ords[j], 0);
			if (e == cudaErrorPeerAccessAlreadyEnabled)
				e = cudaSuccess;
			if (e != cudaSuccess) {
				(void)cudaGetLastError();
				fprintf(stderr, "tileatom cuda backend: peer access %d -> %d: %s\n",
				        ords[i], ords[j], cudaGetErrorString(e));
				continue;
			}
			peer[i * n + j] = 1;
			enabled++;
		}
	if (cudaSetDevice(cur) != cudaSuccess)
		(void)cudaGetLastError();
	return enabled;
}

/* vtable mem_info: cudaMemGetInfo on the backend's device. */
static ta_status cuda_mem_info(ta_backend *base, uint64_t *free_bytes, uint64_t *total_bytes)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	ta_status st = be_enter(be, NULL);
	if (st != TA_OK)
		return st;
	size_t f = 0, t = 0;
	cudaError_t e = cudaMemGetInfo(&f, &t);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return TA_INTERNAL;
	}
	*free_bytes = f;
	*total_bytes = t;
	return TA_OK;
}

/* cuMemGetAddressRange (driver API, v2): the base and size of the allocation holding dptr. */
typedef CUresult (*mem_range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr dptr);

/* One handle this process has open: a handle opens once per process and context, so
 * connections that register the same allocation share the mapping, counted. A mapping is
 * usable only by the GPU of the context that opened it (whatever GPU holds the memory, peer
 * access or not; and CUDA reports that context's device as the pointer's), so a request
 * that reads the buffer on another device opens it there too (ipc_here). */
struct ipc_open_entry {
	unsigned char handle[sizeof(cudaIpcMemHandle_t)]; /* the handle's bytes */
	void *ptr;     /* where it opened first: the address clients' requests name */
	int device;    /* the device it was opened on first */
	size_t avail;  /* bytes of the allocation from ptr */
	unsigned refs; /* registrations using it */
	void *alias[TA_CUDA_MAX_DEVICES]; /* its mapping on each other device (NULL: none yet) */
	ipc_open_entry *next;             /* list link */
};
/* The open handles of this process (few: one per client allocation). */
static ipc_open_entry *g_ipc_open;
/* Guards g_ipc_open and the opens and closes themselves. */
static pthread_mutex_t g_ipc_mu = PTHREAD_MUTEX_INITIALIZER;

/* The device of a live backend whose GPU has the UUID uuid (TA_GPU_UUID_BYTES); dflt when
 * uuid is NULL or names no GPU this process serves. */
static int uuid_device(const uint8_t *uuid, int dflt)
{
	int dev = dflt;
	pthread_mutex_lock(&g_live_mu);
	for (int d = 0; uuid && d < TA_CUDA_MAX_DEVICES; d++)
		if (g_live[d] && memcmp(g_live[d]->uuid, uuid, sizeof g_live[d]->uuid) == 0)
			dev = d;
	pthread_mutex_unlock(&g_live_mu);
	return dev;
}

/* vtable ipc_open: opens a client's device allocation from its CUDA IPC handle
 * (cudaIpcOpenMemHandle; a handle already open in this process is shared, counted) and
 * checks that bytes fit in it from the address the handle
 * opens at (cuMemGetAddressRange, looked up through the runtime so that the daemon needs
 * no link to libcuda). A handle that does not open, or a size over the allocation, gives
 * INVALID_ARGUMENT (the handle is closed again); the error is cleared. */
static ta_status cuda_ipc_open(ta_backend *base, const void *handle, size_t handle_len,
                               const uint8_t *gpu_uuid, size_t bytes, void **dptr, ta_error *err)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	*dptr = NULL;
	if (handle_len != sizeof(cudaIpcMemHandle_t))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "a CUDA IPC handle has %zu bytes, not %zu",
		                    sizeof(cudaIpcMemHandle_t), handle_len);
	ta_status st = be_enter(be, err);
	if (st != TA_OK)
		return st;
	static mem_range_fn range_fn; /* looked up once (a benign race: same value) */
	if (!range_fn) {
		void *fn = NULL;
		cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
		cudaError_t e = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
		                                                 cudaEnableDefault, &q);
		if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn) {
			(void)cudaGetLastError();
			return ta_error_set(
			    err, TA_INTERNAL,
			    "cuda backend: the driver has no cuMemGetAddressRange (%s), "
			    "so a device buffer's size cannot be checked",
			    cudaGetErrorString(e));
		}
		__atomic_store_n(&range_fn, (mem_range_fn)fn, __ATOMIC_RELEASE);
	}
	pthread_mutex_lock(&g_ipc_mu);
	for (ipc_open_entry *o = g_ipc_open; o; o = o->next)
		if (memcmp(o->handle, handle, sizeof o->handle) == 0) {
			if (bytes > o->avail)
				st = ta_error_set(
				    err, TA_INVALID_ARGUMENT,
				    "register_buffer: the request states %zu bytes but the "
				    "device allocation behind the handle has %zu",
				    bytes, o->avail);
			else {
				o->refs++;
				*dptr = o->ptr;
			}
			pthread_mutex_unlock(&g_ipc_mu);
			return st;
		}
	ipc_open_entry *entry = (ipc_open_entry *)calloc(1, sizeof(*entry));
	if (!entry) {
		pthread_mutex_unlock(&g_ipc_mu);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	}
	cudaIpcMemHandle_t h;
	memcpy(&h, handle, sizeof h);
	void *p = NULL;
	/* opened first on the GPU that holds it when the client named one this process serves,
	 * its resident kernel held off meanwhile (as this device's) */
	int on = uuid_device(gpu_uuid, be->device);
	ta_cuda_backend *other = on == be->device ? NULL : live_hold(on);
	if (other && cudaSetDevice(on) != cudaSuccess) {
		(void)cudaGetLastError();
		live_release(other);
		other = NULL;
	}
	if (!other) {
		on = be->device;
		pk_hold(be);
	}
	cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
	CUdeviceptr abase = 0;
	size_t asize = 0;
	CUresult r =
	    e != cudaSuccess
	        ? CUDA_SUCCESS
	        : __atomic_load_n(&range_fn, __ATOMIC_ACQUIRE)(&abase, &asize, (CUdeviceptr)p);
	size_t avail =
	    r == CUDA_SUCCESS && (CUdeviceptr)p >= abase && (CUdeviceptr)p - abase <= asize
	        ? asize - (size_t)((CUdeviceptr)p - abase)
	        : 0;
	if (e == cudaSuccess && (r != CUDA_SUCCESS || bytes > avail) &&
	    cudaIpcCloseMemHandle(p) != cudaSuccess)
		(void)cudaGetLastError();
	if (e != cudaSuccess)
		(void)cudaGetLastError();
	if (other) {
		if (cudaSetDevice(be->device) != cudaSuccess)
			(void)cudaGetLastError();
		live_release(other);
	} else {
		pk_release(be);
	}
	if (e != cudaSuccess) {
		pthread_mutex_unlock(&g_ipc_mu);
		free(entry);
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "register_buffer: the CUDA IPC handle does not open on device "
		                    "%d: %s (%s); pass the 64 bytes cudaIpcGetMemHandle gave, of "
		                    "memory that is still allocated, from another process",
		                    on, cudaGetErrorName(e), cudaGetErrorString(e));
	}
	if (r != CUDA_SUCCESS || bytes > avail) {
		pthread_mutex_unlock(&g_ipc_mu);
		free(entry);
		if (r != CUDA_SUCCESS)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "register_buffer: the size of the device allocation cannot "
			    "be found (cuMemGetAddressRange: error %d)",
			    (int)r);
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "register_buffer: the request states %zu bytes but the device "
		                    "allocation behind the handle has %zu",
		                    bytes, avail);
	}
	memcpy(entry->handle, handle, sizeof entry->handle);
	entry->ptr = p;
	entry->device = on;
	entry->avail = avail;
	entry->refs = 1;
	entry->next = g_ipc_open;
	g_ipc_open = entry;
	pthread_mutex_unlock(&g_ipc_mu);
	*dptr = p;
	return TA_OK;
}

/* Closes the mapping p of a handle on device dev (current device and resident kernel held
 * off by the caller); errors are logged, then cleared. Under g_ipc_mu. */
static void ipc_unmap(int dev, void *p)
{
	cudaError_t e = cudaIpcCloseMemHandle(p);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		fprintf(stderr, "tileatom cuda backend: cudaIpcCloseMemHandle on device %d: %s\n",
		        dev, cudaGetErrorString(e));
	}
}

/* vtable ipc_close: the last registration of a handle closes its mapping on every device
 * it was opened on. */
static void cuda_ipc_close(ta_backend *base, void *dptr)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	if (!dptr)
		return;
	pthread_mutex_lock(&g_ipc_mu);
	ipc_open_entry **link = &g_ipc_open;
	while (*link && (*link)->ptr != dptr)
		link = &(*link)->next;
	ipc_open_entry *o = *link;
	if (!o || --o->refs > 0) {
		pthread_mutex_unlock(&g_ipc_mu);
		return;
	}
	*link = o->next;
	if (be_enter(be, NULL) == TA_OK) {
		for (int d = 0; d < TA_CUDA_MAX_DEVICES; d++) {
			void *p = d == o->device ? o->ptr : o->alias[d];
			if (!p)
				continue;
			ta_cuda_backend *other = d == be->device ? NULL : live_hold(d);
			if (!other)
				pk_hold(be);
			if (cudaSetDevice(d) == cudaSuccess)
				ipc_unmap(d, p);
			else
				(void)cudaGetLastError();
			if (other)
				live_release(other);
			else
				pk_release(be);
		}
		if (cudaSetDevice(be->device) != cudaSuccess)
			(void)cudaGetLastError();
	}
	free(o);
	pthread_mutex_unlock(&g_ipc_mu);
}

/* The open handle whose first mapping holds p, or NULL. Under g_ipc_mu. */
static ipc_open_entry *ipc_entry_at(const void *p)
{
	ipc_open_entry *o = g_ipc_open;
	while (o && !((const char *)p >= (const char *)o->ptr &&
	              (const char *)p < (const char *)o->ptr + o->avail))
		o = o->next;
	return o;
}

/* Sets *out to where the client's device memory at p (an address ipc_open gave) is mapped
 * in be's context, opening the handle there the first time (see ipc_open_entry); p itself
 * when it is no opened handle's. Under be_enter (be's device current). */
static ta_status ipc_here(ta_cuda_backend *be, const void *p, void **out, ta_error *err)
{
	*out = (void *)p;
	pthread_mutex_lock(&g_ipc_mu);
	ipc_open_entry *o = ipc_entry_at(p);
	ta_status st = TA_OK;
	if (o && o->device != be->device && be->device < TA_CUDA_MAX_DEVICES) {
		if (!o->alias[be->device]) {
			cudaIpcMemHandle_t h;
			memcpy(&h, o->handle, sizeof h);
			pk_hold(be);
			cudaError_t e = cudaIpcOpenMemHandle(&o->alias[be->device], h,
			                                     cudaIpcMemLazyEnablePeerAccess);
			pk_release(be);
			if (e != cudaSuccess) {
				(void)cudaGetLastError();
				o->alias[be->device] = NULL;
				st = ta_error_set(
				    err, TA_UNAVAILABLE,
				    "device %d cannot map the device buffer registered "
				    "on device %d: %s",
				    be->device, o->device, cudaGetErrorString(e));
			}
		}
		if (st == TA_OK)
			*out = (char *)o->alias[be->device] + ((const char *)p - (char *)o->ptr);
	}
	pthread_mutex_unlock(&g_ipc_mu);
	return st;
}

/* The client's device operands of dp (read or written in place) as this device's context
 * maps them (ipc_here). */
static ta_status device_operands_here(ta_cuda_backend *be, ta_plan *dp, ta_error *err)
{
	ta_operand *ops[TA_MAX_RANK + 3] = {&dp->values, &dp->compare, &dp->mask};
	int n = 3;
	for (int i = 0; i < dp->n_index && i < TA_MAX_RANK; i++)
		ops[n++] = &dp->index[i];
	ta_status st = TA_OK;
	void *here = NULL;
	for (int i = 0; i < n && st == TA_OK; i++)
		if (ops[i]->device && ops[i]->data &&
		    (st = ipc_here(be, ops[i]->data, &here, err)) == TA_OK)
			ops[i]->data = here;
	if (st == TA_OK && dp->want_old && dp->old_out_device && dp->old_out &&
	    (st = ipc_here(be, dp->old_out, &here, err)) == TA_OK)
		dp->old_out = here;
	return st;
}

/* vtable ptr_device: the device whose context first opened p (ipc_open; CUDA tells no more
 * of IPC memory); -1 for an address no open handle covers. */
static int cuda_ptr_device(ta_backend *base, const void *p)
{
	(void)base;
	pthread_mutex_lock(&g_ipc_mu);
	const ipc_open_entry *o = ipc_entry_at(p);
	int dev = o ? o->device : -1;
	pthread_mutex_unlock(&g_ipc_mu);
	return dev;
}

/* The CUDA backend's vtable. */
static const ta_backend_vtbl cuda_vtbl = {cuda_destroy,
                                          cuda_tile_alloc,
                                          cuda_tile_free,
                                          cuda_apply,
                                          cuda_apply_many,
                                          cuda_info,
                                          cuda_set_batch_window,
                                          cuda_host_register,
                                          cuda_host_unregister,
                                          cuda_ipc_open,
                                          cuda_ipc_close,
                                          NULL /* tile_alloc_placed */,
                                          NULL /* tile_where */,
                                          NULL /* device_count */,
                                          cuda_mem_info,
                                          NULL /* tile_footprint */,
                                          cuda_apply_async,
                                          cuda_ptr_device,
                                          NULL /* device_stats */,
                                          cuda_failed,
                                          cuda_async_attach,
                                          cuda_poll_async};

extern "C" int ta_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return n;
}

extern "C" ta_backend *ta_cuda_backend_new(int device, ta_error *err)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		ta_error_set(err, TA_UNAVAILABLE, "no usable CUDA device: %s (%s)",
		             cudaGetErrorName(e), cudaGetErrorString(e));
		return NULL;
	}
	if (n < 1 || device < 0 || device >= n) {
		ta_error_set(err, TA_UNAVAILABLE, "CUDA device %d does not exist (%d device%s)",
		             device, n, n == 1 ? "" : "s");
		return NULL;
	}
	cudaDeviceProp prop;
	e = cudaSetDevice(device);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&prop, device);
	if (e != cudaSuccess) {
		ta_error_set(err, TA_UNAVAILABLE, "CUDA device %d: %s (%s)", device,
		             cudaGetErrorName(e), cudaGetErrorString(e));
		return NULL;
	}
	/* the kernel table must match the core's rules (ta_ops.def) */
	if (ta_cuda_check_tables(err) != TA_OK)
		return NULL;
	/* the kernels must load on this device (built for one architecture + its PTX) */
	cudaFuncAttributes fa;
	e = cudaFuncGetAttributes(&fa,
	                          (const void *)g_global[ta::M_REGION][TA_DTYPE_I32][TA_OP_ADD]);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		ta_error_set(err, TA_UNAVAILABLE,
		             "CUDA device %d (%s, compute capability %d.%d) cannot run the "
		             "kernels of this build: %s",
		             device, prop.name, prop.major, prop.minor, cudaGetErrorString(e));
		return NULL;
	}
	ta_cuda_backend *be = (ta_cuda_backend *)calloc(1, sizeof *be);
	if (!be) {
		ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory creating the CUDA backend");
		return NULL;
	}
	be->base.vt = &cuda_vtbl;
	be->device = device;
	if (pthread_mutex_init(&be->mu, NULL) != 0) {
		free(be);
		ta_error_set(err, TA_INTERNAL, "pthread_mutex_init failed");
		return NULL;
	}
	if (pthread_cond_init(&be->cv, NULL) != 0) {
		pthread_mutex_destroy(&be->mu);
		free(be);
		ta_error_set(err, TA_INTERNAL, "pthread_cond_init failed");
		return NULL;
	}
	for (int i = 0; i < TA_CUDA_SLOTS; i++) {
		cuda_slot *s = &be->slots[i];
		e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
		if (e != cudaSuccess) {
			ta_error_set(err, TA_UNAVAILABLE, "CUDA device %d: creating a stream: %s",
			             device, cudaGetErrorString(e));
			cuda_destroy(&be->base);
			return NULL;
		}
		/* the slot's counters: zeroed once, then only read (see cuda_slot) */
		size_t cnt_bytes = TA_CUDA_COUNTERS * sizeof(unsigned long long);
		e = cudaMalloc((void **)&s->dev_cnt, cnt_bytes);
		if (e == cudaSuccess)
			e = cudaHostAlloc((void **)&s->host_cnt, cnt_bytes, cudaHostAllocDefault);
		if (e == cudaSuccess)
			e = cudaMemsetAsync(s->dev_cnt, 0, cnt_bytes, s->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s->stream);
		if (e != cudaSuccess) {
			ta_error_set(err, TA_UNAVAILABLE,
			             "CUDA device %d: setting up a slot's counters: %s", device,
			             cudaGetErrorString(e));
			cuda_destroy(&be->base);
			return NULL;
		}
	}
	if (batcher_init(be, err) != TA_OK) {
		cuda_destroy(&be->base);
		return NULL;
	}
	snprintf(be->info.name, sizeof be->info.name, "cuda");
	snprintf(be->info.device, sizeof be->info.device, "%s", prop.name);
	memcpy(be->uuid, &prop.uuid, sizeof be->uuid);
	be->info.device_memory = prop.totalGlobalMem;
	snprintf(be->info.compute_capability, sizeof be->info.compute_capability, "%d.%d",
	         prop.major, prop.minor);
	be->info.workers = TA_CUDA_SLOTS;
	live_set(be, true);
	return &be->base;
}
