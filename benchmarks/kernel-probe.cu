/* kernel-probe.cu: a standalone probe of histogram and element-wise kernel variants on an
 * sm_90 GPU (not built by make; issue 10 item 7). Every variant's result is checked
 * exactly against a host reference (histograms) or against the scalar instruction's
 * result bit for bit (vector float forms) before it is timed; timings are CUDA events
 * around one launch, median of --reps (default 15) runs over 2^26 elements, taken two
 * ways: on an idle stream (the first event is stamped at once: the window holds the host's
 * launch call too) and "held" (the launch queued behind a one-thread kernel spinning on a
 * word of mapped host memory, released after the second event is recorded: the window is
 * the kernel alone, nvbench's blocking-kernel method). The 256-bin part also runs
 * one-copy variants of the backend's loop shape (h1: the merge's red.global tail against
 * per-block rows without atomics, 1024- against 512-thread blocks, a cluster combine
 * through distributed shared memory, per-key counting, a kargs-sized parameter block) and
 * the backend's counting kernel (k_shared count32, block_count at 512 threads) beside
 * its FLAT32 kernel. The
 * element-wise part also times TMA bulk reductions (cp.reduce.async.bulk: operands staged
 * in shared memory by cp.async.bulk or by the threads, one reduction per chunk; with the
 * tile chunk prefetched into L2 and evict_first operand loads) and a non-atomic
 * ld + add + st for the memory ceiling; the float32 bulk add is reported WRONG against the
 * scalar red.add.f32 (it keeps the subnormals that red.add.f32 flushes).
 *
 * Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -cudart static \
 *        -o kernel-probe benchmarks/kernel-probe.cu
 * Usage: kernel-probe [--reps N] [--log2n K] [--only ew|hist] (ew: element-wise only)
 * Output: one line per variant: name, distribution, median ms, G elements/s, check. */
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

/* Exits with a message when a CUDA call failed. */
#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "probe: %s: %s\n", #call, cudaGetErrorString(e_));         \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static int g_reps = 15;
static int g_sms;
static int g_fail;
/* Blocks per SM of the next histogram runs (0: as many as are resident). */
static int g_bps;

/* ---- device helpers ----------------------------------------------------------------------*/

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void red_sh(uint32_t sa, uint32_t v)
{
	asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(sa), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t atom_sh(uint32_t sa, uint32_t v)
{
	uint32_t old;
	asm volatile("atom.shared.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(sa), "r"(v) : "memory");
	return old;
}
__device__ __forceinline__ void red_gl(uint32_t *p, uint32_t v)
{
	asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* ---- 256-bin style: private copies in shared memory, COPIES per block ---------------------
 * slot of bin b for lane l: b * COPIES + l % COPIES (COPIES 1: one copy). */
template <int THREADS, int MINB, int U, int COPIES>
__global__ void __launch_bounds__(THREADS, MINB)
    h_copies(const int32_t *keys, int64_t n, uint32_t *out, int bins)
{
	extern __shared__ __align__(16) uint32_t sh[];
	for (int i = threadIdx.x; i < bins * COPIES; i += THREADS)
		sh[i] = 0;
	__syncthreads();
	const uint32_t sbase = smem_addr(sh) + (uint32_t)(threadIdx.x % COPIES) * 4u;
	const int64_t n4 = n >> 2, T = (int64_t)gridDim.x * THREADS;
	const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
	const int4 *k4 = (const int4 *)keys;
	for (int64_t c0 = tid; c0 < n4; c0 += U * T) {
		int4 k[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			k[u] = c0 + u * T < n4 ? __ldg(k4 + c0 + u * T) : make_int4(-1, -1, -1, -1);
#pragma unroll
		for (int u = 0; u < U; u++) {
			int kk[4] = {k[u].x, k[u].y, k[u].z, k[u].w};
#pragma unroll
			for (int j = 0; j < 4; j++)
				if ((uint32_t)kk[j] < (uint32_t)bins)
					red_sh(sbase + (uint32_t)kk[j] * (COPIES * 4u), 1u);
		}
	}
	for (int64_t k = (n4 << 2) + tid; k < n; k += T)
		if ((uint32_t)keys[k] < (uint32_t)bins)
			red_sh(sbase + (uint32_t)keys[k] * (COPIES * 4u), 1u);
	__syncthreads();
	for (int b = threadIdx.x; b < bins; b += THREADS) {
		uint32_t s = 0;
#pragma unroll
		for (int c = 0; c < COPIES; c++)
			s += sh[b * COPIES + c];
		if (s)
			red_gl(out + b, s);
	}
}

/* ---- 16-bit sub-counters, two bins a 32-bit word, exact wrap accounting -------------------
 * Adds d (count << 16 * (bin & 1), count < 2^16) to the word of bins 2w, 2w+1 at shared
 * address sa. Every crossing of a half through 0xffff -> 0 (or back, for the correction
 * of a carry out of the low half) is accounted in the global bins at once, so that the
 * counts are exact whatever the distribution: global bin = 65536 * net crossings + final
 * half. */
__device__ __forceinline__ void c16_add(uint32_t sa, uint32_t d, uint32_t *out, int w, int bins)
{
	uint32_t old = atom_sh(sa, d);
	uint32_t lo = old & 0xffffu, hi = old >> 16, dlo = d & 0xffffu, dhi = d >> 16;
	bool lowcross = lo + dlo > 0xffffu;
	bool hicross = hi + dhi + (lowcross ? 1u : 0u) > 0xffffu;
	if (__builtin_expect(lowcross | hicross, 0)) {
		int b0 = 2 * w, b1 = 2 * w + 1;
		if (lowcross)
			red_gl(out + b0, 0x10000u);
		if (hicross && b1 < bins)
			red_gl(out + b1, 0x10000u);
		if (lowcross) { /* take the carry back out of the high half */
			uint32_t o2 = atom_sh(sa, 0xffff0000u);
			if ((o2 >> 16) == 0 && b1 < bins)
				red_gl(out + b1, 0xffff0000u); /* -65536 */
		}
	}
}

/* One key into the 16-bit counters (AGG: warp-aggregated: lanes with equal keys add once). */
template <bool AGG>
__device__ __forceinline__ void c16_key(uint32_t sbase, int key, uint32_t *out, int bins)
{
	bool ok = (uint32_t)key < (uint32_t)bins;
	if constexpr (AGG) {
		uint32_t act = __activemask();
		uint32_t m = __match_any_sync(act, ok ? key : -1);
		int lane = threadIdx.x & 31;
		if (!ok || (__ffs(m) - 1) != lane)
			return;
		uint32_t cnt = __popc(m);
		c16_add(sbase + (uint32_t)(key >> 1) * 4u, cnt << (16 * (key & 1)), out, key >> 1,
		        bins);
	} else {
		if (ok)
			c16_add(sbase + (uint32_t)(key >> 1) * 4u, 1u << (16 * (key & 1)), out,
			        key >> 1, bins);
	}
}

template <int THREADS, int MINB, int U, bool AGG>
__global__ void __launch_bounds__(THREADS, MINB)
    h_c16(const int32_t *keys, int64_t n, uint32_t *out, int bins)
{
	extern __shared__ __align__(16) uint32_t sh[];
	const int words = (bins + 1) >> 1;
	for (int i = threadIdx.x; i < words; i += THREADS)
		sh[i] = 0;
	__syncthreads();
	const uint32_t sbase = smem_addr(sh);
	const int64_t n4 = n >> 2, T = (int64_t)gridDim.x * THREADS;
	const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
	const int4 *k4 = (const int4 *)keys;
	/* every thread of a warp runs the same number of steps (AGG needs whole warps) */
	const int64_t wbase = tid - (threadIdx.x & 31);
	for (int64_t c0 = wbase; c0 < n4; c0 += U * T) {
		int4 k[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			int64_t ch = c0 + (threadIdx.x & 31) + u * T;
			k[u] = ch < n4 ? __ldg(k4 + ch) : make_int4(-1, -1, -1, -1);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			c16_key<AGG>(sbase, k[u].x, out, bins);
			c16_key<AGG>(sbase, k[u].y, out, bins);
			c16_key<AGG>(sbase, k[u].z, out, bins);
			c16_key<AGG>(sbase, k[u].w, out, bins);
		}
	}
	for (int64_t k = (n4 << 2) + tid; k < n; k += T)
		c16_key<false>(sbase, keys[k], out, bins);
	__syncthreads();
	for (int i = threadIdx.x; i < words; i += THREADS) {
		uint32_t v = sh[i];
		if (v & 0xffffu)
			red_gl(out + 2 * i, v & 0xffffu);
		if ((v >> 16) && 2 * i + 1 < bins)
			red_gl(out + 2 * i + 1, v >> 16);
	}
}

/* Bin-range split: pairs of blocks read the same keys; block 2p+r counts the keys of
 * half r of the bins in a 32-bit private copy (L2 serves the second read). */
template <int THREADS, int U>
__global__ void __launch_bounds__(THREADS, 1)
    h_pair(const int32_t *keys, int64_t n, uint32_t *out, int bins)
{
	extern __shared__ __align__(16) uint32_t sh[];
	const int half = (bins + 1) >> 1;
	const int r = blockIdx.x & 1;
	const int lo = r * half;
	const int cnt = r ? bins - half : half;
	for (int i = threadIdx.x; i < cnt; i += THREADS)
		sh[i] = 0;
	__syncthreads();
	const uint32_t sbase = smem_addr(sh);
	const int64_t n4 = n >> 2, T = (int64_t)(gridDim.x >> 1) * THREADS;
	const int64_t tid = (int64_t)(blockIdx.x >> 1) * THREADS + threadIdx.x;
	const int4 *k4 = (const int4 *)keys;
	for (int64_t c0 = tid; c0 < n4; c0 += U * T) {
		int4 k[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			k[u] = c0 + u * T < n4 ? __ldg(k4 + c0 + u * T) : make_int4(-1, -1, -1, -1);
#pragma unroll
		for (int u = 0; u < U; u++) {
			int kk[4] = {k[u].x, k[u].y, k[u].z, k[u].w};
#pragma unroll
			for (int j = 0; j < 4; j++) {
				uint32_t s = (uint32_t)(kk[j] - lo);
				if (s < (uint32_t)cnt)
					red_sh(sbase + s * 4u, 1u);
			}
		}
	}
	for (int64_t k = (n4 << 2) + tid; k < n; k += T) {
		uint32_t s = (uint32_t)(keys[k] - lo);
		if (s < (uint32_t)cnt)
			red_sh(sbase + s * 4u, 1u);
	}
	__syncthreads();
	for (int i = threadIdx.x; i < cnt; i += THREADS)
		if (sh[i])
			red_gl(out + lo + i, sh[i]);
}

/* ---- 256 bins, one private copy: what the backend's kernel differs in -------------------
 * hand_keys: the loop of h_copies<.., 1> with full chunks apart (no padding keys), CNT:
 * keys out of range counted (as the backend counts them). */
template <int THREADS, int U, bool CNT>
__device__ __forceinline__ uint32_t hand_keys(const int32_t *keys, int64_t n, uint32_t sbase,
                                              uint32_t bins)
{
	const int64_t n4 = n >> 2, T = (int64_t)gridDim.x * THREADS;
	const int4 *k4 = (const int4 *)keys;
	uint32_t skipped = 0;
	auto one = [&](int32_t x) {
		if ((uint32_t)x < bins)
			red_sh(sbase + (uint32_t)x * 4u, 1u);
		else if (CNT)
			skipped++;
	};
	int64_t c0 = (int64_t)blockIdx.x * THREADS + threadIdx.x;
	for (; c0 + (U - 1) * T < n4; c0 += U * T) {
		int4 k[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			k[u] = __ldg(k4 + c0 + u * T);
#pragma unroll
		for (int u = 0; u < U; u++) {
			one(k[u].x);
			one(k[u].y);
			one(k[u].z);
			one(k[u].w);
		}
	}
	for (; c0 < n4; c0 += T) {
		int4 k = __ldg(k4 + c0);
		one(k.x);
		one(k.y);
		one(k.z);
		one(k.w);
	}
	for (int64_t k = (n4 << 2) + (int64_t)blockIdx.x * THREADS + threadIdx.x; k < n; k += T)
		one(keys[k]);
	return skipped;
}

/* The arguments of h_one with a parameter block as large as the backend's kargs (BIG). */
template <bool BIG> struct h1_args {
	const int32_t *keys; /* keys */
	int64_t n;           /* key count */
	uint32_t *out;       /* bins (TAIL 1: one row of bins per block) */
	int bins;            /* bin count */
};
template <> struct h1_args<true> {
	const int32_t *keys;
	int64_t n;
	uint32_t *out;
	int bins;
	char pad[720 - 28];
};

/* One private copy, THREADS x MINB a SM, U chunks in flight. CNT: out-of-range keys
 * counted, one atomic per warp with any (into out[bins]; out[bins + 1] gets the key count
 * once). TAIL 0: red.global of every nonzero slot (as the backend); 1: the block's copy
 * stored to its own row out[(blockIdx + 1) * bins ...] without atomics (the host sums the
 * rows: the cost of the same-address tail, measured by its absence). */
template <int THREADS, int MINB, int U, bool CNT, bool BIG, int TAIL>
__global__ void __launch_bounds__(THREADS, MINB) h_one(const h1_args<BIG> a)
{
	extern __shared__ __align__(16) uint32_t sh[];
	for (int i = threadIdx.x; i < a.bins; i += THREADS)
		sh[i] = 0;
	__syncthreads();
	uint32_t skipped = hand_keys<THREADS, U, CNT>(a.keys, a.n, smem_addr(sh), a.bins);
	__syncthreads();
	for (int b = threadIdx.x; b < a.bins; b += THREADS) {
		uint32_t v = sh[b];
		if (TAIL == 0 && v)
			red_gl(a.out + b, v);
		else if (TAIL == 1)
			a.out[(size_t)(blockIdx.x + 1) * a.bins + b] = v;
	}
	if (CNT) {
		if (blockIdx.x == 0 && threadIdx.x == 0)
			atomicAdd(a.out + a.bins + 1, (uint32_t)a.n);
		if (__any_sync(0xffffffffu, skipped != 0)) {
			for (int d = 16; d > 0; d >>= 1)
				skipped += __shfl_down_sync(0xffffffffu, skipped, d);
			if ((threadIdx.x & 31) == 0)
				atomicAdd(a.out + a.bins, skipped);
		}
	}
}

/* The same with the tail combined over a cluster of CL blocks first: block r of the
 * cluster sums its share of the bins over the CL copies (distributed shared memory) and
 * adds it with red.global: CL times fewer global atomics on the same addresses. */
template <int THREADS, int MINB, int U, int CL>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(THREADS, MINB)
    h_one_cl(const h1_args<false> a)
{
	namespace cg = cooperative_groups;
	extern __shared__ __align__(16) uint32_t sh[];
	for (int i = threadIdx.x; i < a.bins; i += THREADS)
		sh[i] = 0;
	__syncthreads();
	hand_keys<THREADS, U, false>(a.keys, a.n, smem_addr(sh), a.bins);
	cg::cluster_group cl = cg::this_cluster();
	cl.sync();
	const int r = (int)cl.block_rank(), share = (a.bins + CL - 1) / CL;
	const int lo = r * share, hi = min(a.bins, lo + share);
	for (int b = lo + threadIdx.x; b < hi; b += THREADS) {
		uint32_t v = 0;
#pragma unroll
		for (int q = 0; q < CL; q++)
			v += cl.map_shared_rank(sh, q)[b];
		if (v)
			red_gl(a.out + b, v);
	}
	cl.sync(); /* the other blocks' copies are read until here */
}

/* Plain global red per key. */
__global__ void __launch_bounds__(256)
    h_global(const int32_t *keys, int64_t n, uint32_t *out, int bins)
{
	const int64_t n4 = n >> 2, T = (int64_t)gridDim.x * blockDim.x;
	const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	const int4 *k4 = (const int4 *)keys;
	for (int64_t c = tid; c < n4; c += T) {
		int4 k = __ldg(k4 + c);
		int kk[4] = {k.x, k.y, k.z, k.w};
#pragma unroll
		for (int j = 0; j < 4; j++)
			if ((uint32_t)kk[j] < (uint32_t)bins)
				red_gl(out + kk[j], 1u);
	}
	for (int64_t k = (n4 << 2) + tid; k < n; k += T)
		if ((uint32_t)keys[k] < (uint32_t)bins)
			red_gl(out + keys[k], 1u);
}

/* ---- element-wise add, contiguous region, no output --------------------------------------*/

/* Element k to thread k mod T, R per thread (the landed REGION loop's layout). */
template <int R>
__global__ void __launch_bounds__(256)
    ew_i32_strided(uint32_t *tile, const uint32_t *vals, int64_t n)
{
	const int64_t T = (int64_t)gridDim.x * blockDim.x;
	for (int64_t k0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k0 < n; k0 += R * T) {
		uint32_t v[R];
#pragma unroll
		for (int q = 0; q < R; q++)
			v[q] = k0 + q * T < n ? vals[k0 + q * T] : 0;
#pragma unroll
		for (int q = 0; q < R; q++)
			if (k0 + q * T < n)
				red_gl(tile + k0 + q * T, v[q]);
	}
}

/* Chunks of 4 consecutive elements a thread (16-byte value loads), U chunks a step; the
 * add of one chunk: OP 0 four scalar red.u32, 1 four scalar red.f32, 2 two red.v2.f32,
 * 3 one red.v4.f32. */
template <int U, int OP>
__global__ void __launch_bounds__(256) ew_chunk32(uint32_t *tile, const uint32_t *vals, int64_t n)
{
	const int64_t n4 = n >> 2, T = (int64_t)gridDim.x * blockDim.x;
	for (int64_t c0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c0 < n4; c0 += U * T) {
		uint4 v[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			v[u] = c0 + u * T < n4 ? ((const uint4 *)vals)[c0 + u * T]
			                       : make_uint4(0, 0, 0, 0);
#pragma unroll
		for (int u = 0; u < U; u++) {
			int64_t c = c0 + u * T;
			if (c >= n4)
				break;
			uint32_t *p = tile + 4 * c;
			if constexpr (OP == 0) {
				red_gl(p, v[u].x);
				red_gl(p + 1, v[u].y);
				red_gl(p + 2, v[u].z);
				red_gl(p + 3, v[u].w);
			} else if constexpr (OP == 1) {
				uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
				for (int j = 0; j < 4; j++)
					asm volatile(
					    "red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(p + j),
					    "r"(w[j])
					    : "memory");
			} else if constexpr (OP == 2) {
				asm volatile(
				    "red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p),
				    "f"(__uint_as_float(v[u].x)), "f"(__uint_as_float(v[u].y))
				    : "memory");
				asm volatile(
				    "red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p +
				                                                              2),
				    "f"(__uint_as_float(v[u].z)), "f"(__uint_as_float(v[u].w))
				    : "memory");
			} else {
				asm volatile(
				    "red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::
				        "l"(p),
				    "f"(__uint_as_float(v[u].x)), "f"(__uint_as_float(v[u].y)),
				    "f"(__uint_as_float(v[u].z)), "f"(__uint_as_float(v[u].w))
				    : "memory");
			}
		}
	}
	for (int64_t k = (n4 << 2) + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += T)
		red_gl(tile + k, vals[k]); /* (the probe uses n % 4 == 0) */
}

/* 16-bit element-wise add (BF: bf16, else f16): 8 elements a 16-byte chunk, U chunks a
 * step; OP 0 eight scalar red.f16, 1 four red.f16x2, 2 one red.v4.f16x2, 3 one red.v8.f16. */
template <int U, int OP, bool BF>
__global__ void __launch_bounds__(256)
    ew_chunk16(unsigned short *tile, const unsigned short *vals, int64_t n)
{
	const int64_t n8 = n >> 3, T = (int64_t)gridDim.x * blockDim.x;
	for (int64_t c0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c0 < n8; c0 += U * T) {
		uint4 v[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			v[u] = c0 + u * T < n8 ? ((const uint4 *)vals)[c0 + u * T]
			                       : make_uint4(0, 0, 0, 0);
#pragma unroll
		for (int u = 0; u < U; u++) {
			int64_t c = c0 + u * T;
			if (c >= n8)
				break;
			unsigned short *p = tile + 8 * c;
			uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
			if constexpr (OP == 0) {
#pragma unroll
				for (int j = 0; j < 8; j++) {
					unsigned short h =
					    (unsigned short)(w[j / 2] >> (16 * (j % 2)));
					if constexpr (BF)
						asm volatile("red.relaxed.gpu.global.add.noftz."
						             "bf16 [%0], %1;" ::"l"(p + j),
						             "h"(h)
						             : "memory");
					else
						asm volatile("red.relaxed.gpu.global.add.noftz.f16 "
						             "[%0], %1;" ::"l"(p + j),
						             "h"(h)
						             : "memory");
				}
			} else if constexpr (OP == 1) {
#pragma unroll
				for (int j = 0; j < 4; j++) {
					if constexpr (BF)
						asm volatile("red.relaxed.gpu.global.add.noftz."
						             "bf16x2 [%0], %1;" ::"l"(p + 2 * j),
						             "r"(w[j])
						             : "memory");
					else
						asm volatile("red.relaxed.gpu.global.add.noftz."
						             "f16x2 [%0], %1;" ::"l"(p + 2 * j),
						             "r"(w[j])
						             : "memory");
				}
			} else if constexpr (OP == 2) {
				if constexpr (BF)
					asm volatile("red.relaxed.gpu.global.add.noftz.v4.bf16x2 "
					             "[%0], {%1, %2, %3, %4};" ::"l"(p),
					             "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
					             : "memory");
				else
					asm volatile("red.relaxed.gpu.global.add.noftz.v4.f16x2 "
					             "[%0], {%1, %2, %3, %4};" ::"l"(p),
					             "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
					             : "memory");
			} else {
				unsigned short h[8];
#pragma unroll
				for (int j = 0; j < 8; j++)
					h[j] = (unsigned short)(w[j / 2] >> (16 * (j % 2)));
				if constexpr (BF)
					asm volatile(
					    "red.relaxed.gpu.global.add.noftz.v8.bf16 [%0], {%1, "
					    "%2, %3, %4, %5, %6, %7, %8};" ::"l"(p),
					    "h"(h[0]), "h"(h[1]), "h"(h[2]), "h"(h[3]), "h"(h[4]),
					    "h"(h[5]), "h"(h[6]), "h"(h[7])
					    : "memory");
				else
					asm volatile(
					    "red.relaxed.gpu.global.add.noftz.v8.f16 [%0], {%1, "
					    "%2, %3, %4, %5, %6, %7, %8};" ::"l"(p),
					    "h"(h[0]), "h"(h[1]), "h"(h[2]), "h"(h[3]), "h"(h[4]),
					    "h"(h[5]), "h"(h[6]), "h"(h[7])
					    : "memory");
			}
		}
	}
}

/* ---- element-wise add by TMA bulk reduction (cp.reduce.async.bulk) ------------------------
 * A block stages CH bytes of operands at a time in shared memory and adds them to the tile
 * with one cp.reduce.async.bulk per chunk (each element's reduction is atomic, .relaxed.gpu,
 * PTX ISA 8.0). OP: 0 add.u32, 1 add.f32, 2 add.noftz.f16, 3 add.noftz.bf16. */
__device__ __forceinline__ void mbar_init(uint32_t mb, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mb), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t mb, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mb), "r"(bytes)
	             : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t mb, uint32_t parity)
{
	asm volatile("{\n\t.reg .pred p;\n"
	             "W_%=:\n\t"
	             "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
	             "@!p bra W_%=;\n}" ::"r"(mb),
	             "r"(parity)
	             : "memory");
}
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, uint32_t bytes,
                                          uint32_t mb)
{
	asm volatile(
	    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
	    "%2, [%3];" ::"r"(dst),
	    "l"(src), "r"(bytes), "r"(mb)
	    : "memory");
}
template <int OP> __device__ __forceinline__ void bulk_red(void *dst, uint32_t src, uint32_t bytes)
{
	if constexpr (OP == 0)
		asm volatile(
		    "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%0], [%1], "
		    "%2;" ::"l"(dst),
		    "r"(src), "r"(bytes)
		    : "memory");
	else if constexpr (OP == 1)
		asm volatile(
		    "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], "
		    "%2;" ::"l"(dst),
		    "r"(src), "r"(bytes)
		    : "memory");
	else if constexpr (OP == 2)
		asm volatile(
		    "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 [%0], "
		    "[%1], %2;" ::"l"(dst),
		    "r"(src), "r"(bytes)
		    : "memory");
	else
		asm volatile(
		    "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%0], "
		    "[%1], %2;" ::"l"(dst),
		    "r"(src), "r"(bytes)
		    : "memory");
	asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int K> __device__ __forceinline__ void bulk_wait_read()
{
	asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(K) : "memory");
}

/* One thread of each block drives a pipeline of S buffers of CH bytes: loads run up to
 * S - 1 chunks ahead of the reduce. Chunk c of the block: blockIdx.x + c * gridDim.x.
 * The last n_bytes % CH bytes (a multiple of 16) go as one smaller chunk. */
template <int CH, int S, int OP, int FL = 0>
__global__ void __launch_bounds__(32) ew_bulk(void *tile, const void *vals, int64_t nbytes)
{
	/* FL bits: 1 prefetch the tile chunk into L2 with the operand load; 2 operand loads
	 * evict_first; 4 reduces evict_first; 8 reduces evict_last */
	uint64_t pol_first, pol_last;
	asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol_first));
	asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol_last));
	extern __shared__ __align__(128) unsigned char bsm[];
	__shared__ __align__(8) uint64_t mbar[S];
	if (threadIdx.x != 0)
		return;
	const uint32_t sb = smem_addr(bsm), mb0 = smem_addr(mbar);
	for (int s = 0; s < S; s++)
		mbar_init(mb0 + 8 * s, 1);
	asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
	const int64_t chunks = (nbytes + CH - 1) / CH;
	const int64_t mine =
	    chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
	auto issue = [&](int64_t i) {
		int64_t c = blockIdx.x + i * gridDim.x;
		uint32_t bytes = (uint32_t)min((int64_t)CH, nbytes - c * CH);
		int s = (int)(i % S);
		mbar_expect(mb0 + 8 * s, bytes);
		if constexpr (FL & 2)
			asm volatile(
			    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
			    "bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(sb + s * CH),
			    "l"((const char *)vals + c * CH), "r"(bytes), "r"(mb0 + 8 * s),
			    "l"(pol_first)
			    : "memory");
		else
			bulk_load(sb + s * CH, (const char *)vals + c * CH, bytes, mb0 + 8 * s);
		if constexpr (FL & 1)
			asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(
			                 (const char *)tile + c * CH),
			             "r"(bytes)
			             : "memory");
	};
	for (int64_t i = 0; i < S - 1 && i < mine; i++)
		issue(i);
	for (int64_t i = 0; i < mine; i++) {
		int s = (int)(i % S);
		mbar_wait(mb0 + 8 * s, (uint32_t)((i / S) & 1));
		int64_t c = blockIdx.x + i * gridDim.x;
		uint32_t bytes = (uint32_t)min((int64_t)CH, nbytes - c * CH);
		if constexpr ((FL & 12) != 0 && OP == 0) {
			asm volatile(
			    "cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint"
			    ".add.u32 [%0], [%1], %2, %3;" ::"l"((char *)tile + c * CH),
			    "r"(sb + s * CH), "r"(bytes), "l"((FL & 4) ? pol_first : pol_last)
			    : "memory");
			asm volatile("cp.async.bulk.commit_group;" ::: "memory");
		} else {
			bulk_red<OP>((char *)tile + c * CH, sb + s * CH, bytes);
		}
		/* the buffer of chunk i + S - 1 held chunk i - 1: its reduce must have read it */
		if (i + S - 1 < mine) {
			bulk_wait_read<1>();
			issue(i + S - 1);
		}
	}
	asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

/* Threads load the operands (16 bytes each, TPB threads, CH = 16 * TPB * U bytes a chunk)
 * into one of two buffers, fence the async proxy, and thread 0 reduces the chunk. */
template <int TPB, int U, int OP>
__global__ void __launch_bounds__(TPB) ew_bulk_ld(void *tile, const void *vals, int64_t nbytes)
{
	constexpr int CH = 16 * TPB * U;
	extern __shared__ __align__(128) unsigned char bsm[];
	const uint32_t sb = smem_addr(bsm);
	const int64_t chunks = nbytes / CH; /* (the probe: nbytes % CH == 0) */
	int64_t i = 0;
	for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x, i++) {
		int s = (int)(i & 1);
		uint4 q[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			q[u] =
			    ((const uint4 *)((const char *)vals + c * CH))[u * TPB + threadIdx.x];
		if (threadIdx.x == 0)
			bulk_wait_read<1>(); /* the reduce of chunk i - 2 has read buffer s */
		__syncthreads();
#pragma unroll
		for (int u = 0; u < U; u++)
			((uint4 *)(bsm + s * CH))[u * TPB + threadIdx.x] = q[u];
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		__syncthreads();
		if (threadIdx.x == 0)
			bulk_red<OP>((char *)tile + c * CH, sb + s * CH, CH);
	}
	if (threadIdx.x == 0)
		asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

/* Not atomic: tile[k] += vals[k] with 16-byte loads and stores (the memory ceiling of an
 * element-wise add that reads values and tile and writes the tile). */
__global__ void __launch_bounds__(256) ew_plain_u32(void *tp, const void *vp, int64_t n)
{
	uint32_t *tile = (uint32_t *)tp;
	const uint32_t *vals = (const uint32_t *)vp;
	const int64_t n4 = n >> 2, T = (int64_t)gridDim.x * blockDim.x;
	for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < n4; c += T) {
		uint4 v = ((const uint4 *)vals)[c], t = ((uint4 *)tile)[c];
		t.x += v.x;
		t.y += v.y;
		t.z += v.z;
		t.w += v.w;
		((uint4 *)tile)[c] = t;
	}
}

/* ---- host ---------------------------------------------------------------------------------*/

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	size_t m = v.size();
	return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

/* The hold: two words of mapped host memory ([0] release, [1] the hold gave up) and their
 * device pointer. */
static volatile unsigned int *g_hold;
static unsigned int *g_dhold;
/* Median ms of the last time_it with the launch queued behind the hold. */
static double g_held_ms;

/* Spins until flag[0] is nonzero (1 s at most; then flag[1] = 1). */
__global__ void k_hold(volatile unsigned int *flag)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	while (flag[0] == 0) {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
		if (t - t0 > 1000000000ull) {
			flag[1] = 1;
			return;
		}
	}
}

/* Times launch() (one kernel launch): 2 warm-ups, then g_reps timed on an idle stream
 * (returned: median ms) and g_reps timed behind the hold (g_held_ms). */
template <typename L> static double time_it(L launch)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int i = 0; i < 2; i++)
		launch();
	CK(cudaDeviceSynchronize());
	std::vector<double> ms, held;
	for (int r = 0; r < g_reps; r++) {
		CK(cudaEventRecord(a));
		launch();
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		float t;
		CK(cudaEventElapsedTime(&t, a, b));
		ms.push_back(t);
	}
	for (int r = 0; r < g_reps; r++) {
		g_hold[0] = 0;
		g_hold[1] = 0;
		k_hold<<<1, 1>>>(g_dhold);
		CK(cudaEventRecord(a));
		launch();
		CK(cudaEventRecord(b));
		__atomic_store_n(&g_hold[0], 1u, __ATOMIC_RELEASE);
		CK(cudaEventSynchronize(b));
		if (g_hold[1])
			printf("  (a hold gave up waiting)\n");
		float t;
		CK(cudaEventElapsedTime(&t, a, b));
		held.push_back(t);
	}
	CK(cudaGetLastError());
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	g_held_ms = median(held);
	return median(ms);
}

/* One row: plain ms and G/s, then G/s of the held runs (g_held_ms of the last time_it). */
static void report(const char *name, const char *dist, double ms, int64_t n, bool ok)
{
	printf("%-34s %-10s %9.4f ms %8.1f G el/s  held %8.1f  %s\n", name, dist, ms,
	       n / (ms * 1e-3) / 1e9, n / (g_held_ms * 1e-3) / 1e9, ok ? "exact" : "WRONG");
	fflush(stdout);
	if (!ok)
		g_fail++;
}

/* Runs an element-wise kernel fn<<<blocks, threads, smem>>>(tile, vals, arg) on a tile
 * starting as t0 (host), checks the result against want, times it. */
template <typename F>
static void run_ew_k(const char *name, const char *dt_name, F fn, int blocks, int threads,
                     size_t smem, void *dt, const void *dv, int64_t arg, const void *t0,
                     const void *want, size_t bytes, int64_t n)
{
	if (smem >= 47 * 1024)
		CK(cudaFuncSetAttribute((const void *)fn,
		                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	CK(cudaMemcpy(dt, t0, bytes, cudaMemcpyHostToDevice));
	fn<<<blocks, threads, smem>>>(dt, dv, arg);
	CK(cudaGetLastError());
	std::vector<unsigned char> got(bytes);
	CK(cudaMemcpy(got.data(), dt, bytes, cudaMemcpyDeviceToHost));
	bool ok = !memcmp(got.data(), want, bytes);
	if (!ok) { /* the first differences, as bits of es = bytes / n */
		size_t es = bytes / (size_t)n, shown = 0, diff = 0;
		for (size_t i = 0; i < (size_t)n; i++) {
			uint64_t g = 0, w = 0, t = 0, v = 0;
			memcpy(&g, got.data() + i * es, es);
			memcpy(&w, (const char *)want + i * es, es);
			if (g == w)
				continue;
			diff++;
			if (shown++ < 4) {
				memcpy(&t, (const char *)t0 + i * es, es);
				CK(cudaMemcpy(&v, (const char *)dv + i * es, es,
				              cudaMemcpyDeviceToHost));
				printf("  %s: element %zu: tile %#llx + %#llx gives %#llx, "
				       "expected %#llx\n",
				       name, i, (unsigned long long)t, (unsigned long long)v,
				       (unsigned long long)g, (unsigned long long)w);
			}
		}
		printf("  %s: %zu elements differ\n", name, diff);
	}
	double ms = time_it([&] { fn<<<blocks, threads, smem>>>(dt, dv, arg); });
	report(name, dt_name, ms, n, ok);
}

/* The bulk-reduction variants of OP on n elements of es bytes. */
template <int OP>
static void bulk_rows(const char *dt_name, void *dt, const void *dv, const void *t0,
                      const void *want, int64_t n, size_t es)
{
	size_t bytes = (size_t)n * es;
	int64_t nb = (int64_t)bytes;
	char nm[64];
#define TA_BULK_ROW(CH, S, BPS)                                                                    \
	snprintf(nm, sizeof nm, "bulk tma ch%d s%d %d/SM", CH, S, BPS);                            \
	run_ew_k(nm, dt_name, ew_bulk<CH, S, OP>, (BPS)*g_sms, 32, (size_t)(CH) * (S), dt, dv, nb, \
	         t0, want, bytes, n)
	TA_BULK_ROW(4096, 4, 8);
	TA_BULK_ROW(4096, 4, 12);
	TA_BULK_ROW(8192, 2, 12);
	TA_BULK_ROW(8192, 3, 8);
	TA_BULK_ROW(8192, 4, 6);
	TA_BULK_ROW(16384, 2, 6);
	TA_BULK_ROW(16384, 3, 4);
	TA_BULK_ROW(16384, 4, 3);
	TA_BULK_ROW(32768, 3, 2);
	TA_BULK_ROW(2048, 4, 24);
	TA_BULK_ROW(4096, 8, 6);
	TA_BULK_ROW(8192, 6, 4);
	TA_BULK_ROW(8192, 8, 3);
#undef TA_BULK_ROW
#define TA_BULK_FL(CH, S, BPS, FL)                                                                 \
	snprintf(nm, sizeof nm, "bulk tma ch%d s%d %d/SM fl%d", CH, S, BPS, FL);                   \
	run_ew_k(nm, dt_name, ew_bulk<CH, S, OP, FL>, (BPS)*g_sms, 32, (size_t)(CH) * (S), dt, dv, \
	         nb, t0, want, bytes, n)
	TA_BULK_FL(4096, 4, 8, 1);
	TA_BULK_FL(8192, 3, 8, 1);
	TA_BULK_FL(16384, 2, 6, 1);
	TA_BULK_FL(8192, 3, 8, 2);
	TA_BULK_FL(8192, 3, 8, 3);
	if (OP == 0) {
		TA_BULK_FL(8192, 3, 8, 4);
		TA_BULK_FL(8192, 3, 8, 8);
		TA_BULK_FL(8192, 3, 8, 7);
		TA_BULK_FL(8192, 3, 8, 11);
	}
#undef TA_BULK_FL
#define TA_BULK_LD(TPB, U, BPS)                                                                    \
	snprintf(nm, sizeof nm, "bulk ld %dx%d %d/SM", TPB, U, BPS);                               \
	run_ew_k(nm, dt_name, ew_bulk_ld<TPB, U, OP>, (BPS)*g_sms, TPB,                            \
	         (size_t)2 * 16 * (TPB) * (U), dt, dv, nb, t0, want, bytes, n)
	TA_BULK_LD(256, 2, 8);
	TA_BULK_LD(256, 4, 6);
	TA_BULK_LD(512, 2, 4);
	TA_BULK_LD(1024, 1, 2);
#undef TA_BULK_LD
}

/* A histogram kernel: its launch shape. */
typedef void (*hist_fn)(const int32_t *, int64_t, uint32_t *, int);

/* Runs fn (threads a block, smem bytes, blocks: 0 = occupancy x SMs) on keys, checks it
 * against want, times it. */
static void run_hist(const char *name, const char *dist, hist_fn fn, int threads, size_t smem,
                     int pair, const int32_t *dkeys, int64_t n, int bins,
                     const std::vector<uint32_t> &want, uint32_t *dout)
{
	if (smem >= 47 * 1024)
		CK(cudaFuncSetAttribute((const void *)fn,
		                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	int occ = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, (const void *)fn, threads, smem));
	if (occ < 1) {
		printf("%-34s %-10s does not fit\n", name, dist);
		return;
	}
	if (g_bps && g_bps < occ)
		occ = g_bps;
	int blocks = occ * g_sms;
	if (pair)
		blocks &= ~1;
	CK(cudaMemset(dout, 0, (size_t)bins * 4));
	fn<<<blocks, threads, smem>>>(dkeys, n, dout, bins);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	std::vector<uint32_t> got(bins);
	CK(cudaMemcpy(got.data(), dout, (size_t)bins * 4, cudaMemcpyDeviceToHost));
	bool ok = got == want;
	double ms = time_it([&] { fn<<<blocks, threads, smem>>>(dkeys, n, dout, bins); });
	char nm[96];
	snprintf(nm, sizeof nm, "%s occ%d", name, occ);
	report(nm, dist, ms, n, ok);
}

/* Key distributions. */
static void make_keys(std::vector<int32_t> &k, int bins, int kind, uint64_t seed)
{
	uint64_t s = seed;
	for (size_t i = 0; i < k.size(); i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t r = (uint32_t)(s >> 32);
		if (kind == 0) { /* uniform */
			k[i] = (int32_t)(((uint64_t)r * (uint32_t)bins) >> 32);
		} else if (kind == 1) { /* skewed: u^4 (bin 0 gets ~1/sqrt-ish share) */
			double u = r / 4294967296.0;
			k[i] = (int32_t)(u * u * u * u * bins);
		} else if (kind == 2) { /* hot: half the keys on bin 7, the rest uniform */
			k[i] = (r & 1) ? 7 : (int32_t)(((uint64_t)(r >> 1) * (uint32_t)bins) >> 31);
		} else { /* all on one bin */
			k[i] = bins / 3;
		}
		if (kind != 3 && i % 1000003 == 17)
			k[i] = (i & 1) ? -5 : bins + 3; /* a few out of range */
	}
}

#ifdef TA_PROBE_REAL
static void h1_suite(int64_t n, const char *dist, const int32_t *dkeys, int bins, uint64_t bad,
                     const std::vector<uint32_t> &want);

/* ---- the backend's own kernels (kernels/ta_cuda_kernels.cuh), launched as ta_cuda.cu
 * launches them, on the same data ---------------------------------------------------------*/
#include "ta_cuda_kernels.cuh"

/* A plan over a 1-D tile of bins elements: flat int32 keys with a scalar operand (hist) or
 * a contiguous region with contiguous values (element-wise). */
static ta::kargs real_args(ta_dtype dt, int64_t bins, int64_t n, const void *keys, const void *vals,
                           bool vals_vec, void *tile, unsigned long long *cnt)
{
	ta::kargs a;
	memset(&a, 0, sizeof a);
	ta_plan &p = a.p;
	p.op = TA_OP_ADD;
	p.dtype = dt;
	p.sem = TA_SEM_RELAXED;
	p.scope = TA_SCOPE_GPU;
	p.space = keys ? TA_SPACE_SHARED : TA_SPACE_GLOBAL;
	p.addr = keys ? TA_ADDR_FLAT : TA_ADDR_REGION;
	p.check_bounds = true;
	p.rank = 1;
	p.shape[0] = n;
	p.count = n;
	p.tile_rank = 1;
	p.tile_shape[0] = bins;
	p.tile_stride[0] = 1;
	p.extent[0] = bins;
	p.region_count = bins;
	if (keys) {
		p.n_index = 1;
		p.index[0].data = keys;
		p.index[0].dtype = TA_DTYPE_I32;
		p.index[0].stride[0] = 1;
	}
	p.values.data = vals;
	p.values.dtype = dt;
	p.values.stride[0] = vals_vec ? 1 : 0;
	a.tile = tile;
	a.counters = cnt;
	a.tile_elems = bins;
	a.ss = ta::ss_of(TA_SEM_RELAXED, TA_SCOPE_GPU);
	a.vals_vec = vals_vec;
	return a;
}

static unsigned long long *g_cnt;

/* The backend's counting body (block_count) at TH threads a block instead of its own
 * block_threads: the block shape compared in one run. */
template <int TH> __global__ void __launch_bounds__(TH, 2048 / TH) k_count_th(const ta::kargs a)
{
	extern __shared__ __align__(16) unsigned char count_smem[];
	ta::block_count<TA_DTYPE_I32, ta::K_ADD, ta::M_COUNT32, TH>(a, count_smem);
}

/* Checks the counters of one launch: applied and skipped. */
static bool counters_are(unsigned long long applied, unsigned long long skipped)
{
	unsigned long long h[3];
	CK(cudaMemcpy(h, g_cnt, sizeof h, cudaMemcpyDeviceToHost));
	CK(cudaMemset(g_cnt, 0, sizeof h));
	if (h[0] != skipped || h[1] != applied || h[2] != 0)
		printf("  counters: skipped %llu applied %llu outside %llu, expected %llu %llu 0\n",
		       h[0], h[1], h[2], skipped, applied);
	return h[0] == skipped && h[1] == applied && h[2] == 0;
}

static void real_hist(int64_t n)
{
	int32_t *dkeys;
	uint32_t *dout, *done;
	CK(cudaMalloc(&dkeys, (size_t)n * 4));
	CK(cudaMalloc(&dout, (size_t)65536 * 4));
	CK(cudaMalloc(&done, 4));
	uint32_t one = 1;
	CK(cudaMemcpy(done, &one, 4, cudaMemcpyHostToDevice));
	std::vector<int32_t> k(n);
	static const char *dn[] = {"uniform", "pow4", "hot50%", "one-bin"};
	for (int bins : {256, 65536})
		for (int kind = 0; kind < 4; kind++) {
			make_keys(k, bins, kind, 0x9e3779b97f4a7c15ull + bins + kind);
			std::vector<uint32_t> want(bins, 0);
			unsigned long long bad = 0;
			for (int64_t i = 0; i < n; i++)
				if (k[i] >= 0 && k[i] < bins)
					want[k[i]]++;
				else
					bad++;
			CK(cudaMemcpy(dkeys, k.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
			ta::kargs a =
			    real_args(TA_DTYPE_I32, bins, n, dkeys, done, false, dout, g_cnt);
			a.mode = ta::M_FLAT32;
			a.win = bins;
			std::vector<uint32_t> got(bins);
			if (bins == 256) {
				/* the counting kernel (what the backend launches for this plan),
				 * then the FLAT32 kernel (before: its counting loop shares the
				 * kernel with the general FLAT loop) at 512 and 256 threads */
				struct {
					ta::kmode mode;
					int threads;
					const char *name;
					void (*fn)(const ta::kargs);
				} rows[] = {
				    {ta::M_COUNT32, ta::block_threads(ta::S_BLOCK, ta::M_COUNT32),
				     "REAL k_shared count32",
				     ta::k_shared<TA_DTYPE_I32, ta::K_ADD, ta::M_COUNT32>},
				    {ta::M_COUNT32, 512, "REAL block_count at", k_count_th<512>},
				    {ta::M_FLAT32, 512, "REAL k_shared flat32",
				     ta::k_shared<TA_DTYPE_I32, ta::K_ADD, ta::M_FLAT32>},
				    {ta::M_FLAT32, 256, "REAL k_shared flat32",
				     ta::k_shared<TA_DTYPE_I32, ta::K_ADD, ta::M_FLAT32>}};
				for (auto &row : rows) {
					auto fn = row.fn;
					const int threads = row.threads;
					a.mode = row.mode;
					if (kind && threads == 256)
						break;
					int occ = 0;
					CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
					    &occ, (const void *)fn, threads, 1024));
					int64_t blocks =
					    std::min<int64_t>(n / 1024, (int64_t)occ * g_sms);
					CK(cudaMemset(dout, 0, (size_t)bins * 4));
					fn<<<(unsigned)blocks, threads, 1024>>>(a);
					CK(cudaGetLastError());
					CK(cudaMemcpy(got.data(), dout, (size_t)bins * 4,
					              cudaMemcpyDeviceToHost));
					bool ok = got == want && counters_are(n - bad, bad);
					double ms = time_it(
					    [&] { fn<<<(unsigned)blocks, threads, 1024>>>(a); });
					char nm[64];
					snprintf(nm, sizeof nm, "%s t%d occ%d", row.name, threads,
					         occ);
					report(nm, dn[kind], ms, n, ok);
					CK(cudaMemset(g_cnt, 0, 24));
				}
				if (kind == 0 || kind == 2)
					h1_suite(n, dn[kind], dkeys, bins, bad, want);
			} else {
				auto fn = ta::k_cluster<TA_DTYPE_I32, ta::K_ADD, ta::M_FLAT32>;
				a.cl_shift = 1;
				size_t smem = 32768 * 4;
				CK(cudaFuncSetAttribute((const void *)fn,
				                        cudaFuncAttributeMaxDynamicSharedMemorySize,
				                        (int)smem));
				cudaLaunchAttribute attr;
				memset(&attr, 0, sizeof attr);
				attr.id = cudaLaunchAttributeClusterDimension;
				attr.val.clusterDim.x = 2;
				attr.val.clusterDim.y = 1;
				attr.val.clusterDim.z = 1;
				cudaLaunchConfig_t cfg;
				memset(&cfg, 0, sizeof cfg);
				cfg.blockDim = dim3(1024, 1, 1);
				cfg.dynamicSmemBytes = smem;
				cfg.attrs = &attr;
				cfg.numAttrs = 1;
				cfg.gridDim = dim3(2, 1, 1);
				int resident = 0;
				CK(cudaOccupancyMaxActiveClusters(&resident, (const void *)fn,
				                                  &cfg));
				int64_t nc = std::min<int64_t>(resident, n / 65536);
				cfg.gridDim = dim3((unsigned)(2 * nc), 1, 1);
				CK(cudaMemset(dout, 0, (size_t)bins * 4));
				CK(cudaLaunchKernelEx(&cfg, fn, a));
				CK(cudaGetLastError());
				CK(cudaMemcpy(got.data(), dout, (size_t)bins * 4,
				              cudaMemcpyDeviceToHost));
				bool ok = got == want && counters_are(n - bad, bad);
				double ms = time_it([&] { CK(cudaLaunchKernelEx(&cfg, fn, a)); });
				char nm[64];
				snprintf(nm, sizeof nm, "REAL k_cluster flat32 C2 x%lld",
				         (long long)nc);
				report(nm, dn[kind], ms, n, ok);
				CK(cudaMemset(g_cnt, 0, 24));
			}
		}
	CK(cudaFree(dkeys));
	CK(cudaFree(dout));
	CK(cudaFree(done));
}

/* Element-wise add through k_global REGION: dtype dt (es bytes) against the reference
 * tile ref (int32: exact sum; floats: the scalar red's result), from tile t0. */
template <int DT>
static void real_ew(const char *name, int64_t n, size_t es, const void *t0, const void *v,
                    const void *ref, int64_t offset)
{
	void *dt, *dv;
	size_t bytes = (size_t)n * es;
	CK(cudaMalloc(&dt, bytes + 64));
	CK(cudaMalloc(&dv, bytes + 64));
	/* offset: elements the tile and the values start after a 16-byte boundary */
	char *tile = (char *)dt + offset * es, *vals = (char *)dv;
	CK(cudaMemcpy(vals, v, bytes, cudaMemcpyHostToDevice));
	ta::kargs a = real_args((ta_dtype)DT, n, n, NULL, vals, true, tile, g_cnt);
	a.mode = ta::M_REGION;
	auto fn = ta::k_global<DT, ta::K_ADD, ta::M_REGION>;
	int occ = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, (const void *)fn, 256, 0));
	int64_t per = 256 * (es == 8 ? 4 : 8);
	int64_t blocks = std::min<int64_t>((n + per - 1) / per, (int64_t)occ * g_sms);
	CK(cudaMemcpy(tile, t0, bytes, cudaMemcpyHostToDevice));
	fn<<<(unsigned)blocks, 256>>>(a);
	CK(cudaGetLastError());
	std::vector<unsigned char> got(bytes);
	CK(cudaMemcpy(got.data(), tile, bytes, cudaMemcpyDeviceToHost));
	bool ok = !memcmp(got.data(), ref, bytes) && counters_are(n, 0);
	double ms = time_it([&] { fn<<<(unsigned)blocks, 256>>>(a); });
	char nm[64];
	snprintf(nm, sizeof nm, "REAL region %s n%%%d=%d%s occ%d", name, (int)(16 / es),
	         (int)(n % (16 / es)), offset ? " unaligned" : "", occ);
	report(nm, name, ms, n, ok);
	CK(cudaMemset(g_cnt, 0, 24));
	CK(cudaFree(dt));
	CK(cudaFree(dv));
}
#endif

#ifdef TA_PROBE_REAL /* (run from real_hist) */
/* Runs launch(out) of a one-copy variant (blocks x threads, 1 KB of shared memory) on
 * keys into bins: checks the bins (rows: summed over 1 + blocks rows when the variant
 * stores per-block rows; cnt: out[bins] = bad, out[bins + 1] = n), times it. */
template <typename L>
static void run_h1(const char *name, const char *dist, L launch, unsigned blocks, bool rows,
                   bool cnt, int64_t n, int bins, uint64_t bad, const std::vector<uint32_t> &want,
                   uint32_t *dout)
{
	size_t words = rows ? (size_t)(blocks + 1) * bins : (size_t)bins + 2;
	CK(cudaMemset(dout, 0, words * 4));
	launch();
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	std::vector<uint32_t> got(words);
	CK(cudaMemcpy(got.data(), dout, words * 4, cudaMemcpyDeviceToHost));
	std::vector<uint32_t> sum(got.begin(), got.begin() + bins);
	if (rows)
		for (size_t r = 1; r <= blocks; r++)
			for (int b = 0; b < bins; b++)
				sum[b] += got[r * bins + b];
	bool ok = sum == want;
	if (cnt && (got[bins] != (uint32_t)bad || got[bins + 1] != (uint32_t)n)) {
		printf("  %s: counted %u skipped of %u, expected %llu of %lld\n", name, got[bins],
		       got[bins + 1], (unsigned long long)bad, (long long)n);
		ok = false;
	}
	double ms = time_it(launch);
	char nm[96];
	snprintf(nm, sizeof nm, "%s x%u", name, blocks);
	report(nm, dist, ms, n, ok);
}

/* The one-copy variants on 256 bins (what the backend's kernel differs in). */
static void h1_suite(int64_t n, const char *dist, const int32_t *dkeys, int bins, uint64_t bad,
                     const std::vector<uint32_t> &want)
{
	uint32_t *dout;
	const unsigned b4 = 4 * g_sms, b2 = 2 * g_sms;
	CK(cudaMalloc(&dout, ((size_t)b4 + 1) * bins * 4 + 8));
	h1_args<false> a = {dkeys, n, dout, bins};
	h1_args<true> ab;
	memset(&ab, 0, sizeof ab);
	ab.keys = dkeys;
	ab.n = n;
	ab.out = dout;
	ab.bins = bins;
#define H1(NAME, KERN, BL, TH, ARGS, ROWS, CNT)                                                    \
	run_h1(                                                                                    \
	    NAME, dist, [&] { KERN<<<BL, TH, 1024>>>(ARGS); }, BL, ROWS, CNT, n, bins, bad, want,  \
	    dout)
	H1("h1 t512 U2", (h_one<512, 4, 2, false, false, 0>), b4, 512, a, false, false);
	H1("h1 t512 U2 count", (h_one<512, 4, 2, true, false, 0>), b4, 512, a, false, true);
	H1("h1 t512 U2 720B-param", (h_one<512, 4, 2, false, true, 0>), b4, 512, ab, false, false);
	H1("h1 t512 U2 count 720B", (h_one<512, 4, 2, true, true, 0>), b4, 512, ab, false, true);
	H1("h1 t512 U2 rows (no atomics)", (h_one<512, 4, 2, false, false, 1>), b4, 512, a, true,
	   false);
	H1("h1 t1024 U2", (h_one<1024, 2, 2, false, false, 0>), b2, 1024, a, false, false);
	H1("h1 t512 U4", (h_one<512, 4, 4, false, false, 0>), b4, 512, a, false, false);
	H1("h1 t512 U2 cluster2 tail", (h_one_cl<512, 4, 2, 2>), b4, 512, a, false, false);
	H1("h1 t512 U2 cluster4 tail", (h_one_cl<512, 4, 2, 4>), b4, 512, a, false, false);
#undef H1
	CK(cudaFree(dout));
}

#endif

static void hist_suite(int64_t n)
{
	int32_t *dkeys;
	uint32_t *dout;
	CK(cudaMalloc(&dkeys, (size_t)n * 4));
	CK(cudaMalloc(&dout, (size_t)65536 * 4));
	std::vector<int32_t> k(n);
	static const char *dn[] = {"uniform", "pow4", "hot50%", "one-bin"};
	for (int bins : {256, 65536}) {
		for (int kind = 0; kind < 4; kind++) {
			if (bins == 256 && kind == 3)
				continue;
			make_keys(k, bins, kind, 0x9e3779b97f4a7c15ull + bins + kind);
			std::vector<uint32_t> want(bins, 0);
			for (int64_t i = 0; i < n; i++)
				if (k[i] >= 0 && k[i] < bins)
					want[k[i]]++;
			CK(cudaMemcpy(dkeys, k.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
			const char *d = dn[kind];
			if (bins == 256) {
				run_hist("h256 copies1 t256 U2", d, h_copies<256, 8, 2, 1>, 256,
				         1024, 0, dkeys, n, bins, want, dout);
				if (kind == 0) {
					run_hist("h256 copies1 t256 U4", d, h_copies<256, 8, 4, 1>,
					         256, 1024, 0, dkeys, n, bins, want, dout);
					run_hist("h256 copies1 t512 U2", d, h_copies<512, 4, 2, 1>,
					         512, 1024, 0, dkeys, n, bins, want, dout);
					run_hist("h256 copies8 t256 U2", d, h_copies<256, 8, 2, 8>,
					         256, 8192, 0, dkeys, n, bins, want, dout);
					run_hist("h256 copies16 t256 U2", d,
					         h_copies<256, 8, 2, 16>, 256, 16384, 0, dkeys, n,
					         bins, want, dout);
					run_hist("h256 copies32 t256 U2", d,
					         h_copies<256, 6, 2, 32>, 256, 32768, 0, dkeys, n,
					         bins, want, dout);
					run_hist("h256 copies32 t512 U2", d,
					         h_copies<512, 3, 2, 32>, 512, 32768, 0, dkeys, n,
					         bins, want, dout);
					run_hist("h256 copies16 t256 U4", d,
					         h_copies<256, 8, 4, 16>, 256, 16384, 0, dkeys, n,
					         bins, want, dout);
				}
				run_hist("h256 copies32 t256 U4", d, h_copies<256, 6, 4, 32>, 256,
				         32768, 0, dkeys, n, bins, want, dout);
				run_hist("h256 c16 t256 U2", d, h_c16<256, 8, 2, false>, 256, 512,
				         0, dkeys, n, bins, want, dout);
			} else {
				run_hist("h64k global red", d, h_global, 256, 0, 0, dkeys, n, bins,
				         want, dout);
				run_hist("h64k c16 t1024 U2", d, h_c16<1024, 1, 2, false>, 1024,
				         131072, 0, dkeys, n, bins, want, dout);
				run_hist("h64k c16 t1024 U4", d, h_c16<1024, 1, 4, false>, 1024,
				         131072, 0, dkeys, n, bins, want, dout);
				run_hist("h64k c16 t1024 U1", d, h_c16<1024, 1, 1, false>, 1024,
				         131072, 0, dkeys, n, bins, want, dout);
				run_hist("h64k c16agg t1024 U2", d, h_c16<1024, 1, 2, true>, 1024,
				         131072, 0, dkeys, n, bins, want, dout);
				run_hist("h64k pair32 t1024 U2", d, h_pair<1024, 2>, 1024, 131072,
				         1, dkeys, n, bins, want, dout);
			}
		}
	}
	CK(cudaFree(dkeys));
	CK(cudaFree(dout));
}

static uint16_t f2h(float f)
{
	__half h = __float2half_rn(f);
	return *(uint16_t *)&h;
}
static uint16_t f2bf(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

/* Element-wise: int32 (exact host reference), float32 v2/v4 against scalar red.f32 bit
 * for bit (special values included), f16/bf16 packed/vector forms against scalar red. */
static void ew_suite(int64_t n)
{
	uint32_t *dt, *dv;
	CK(cudaMalloc(&dt, (size_t)n * 4));
	CK(cudaMalloc(&dv, (size_t)n * 4));
	std::vector<uint32_t> t0(n), v(n), got(n), ref(n);
	uint64_t s = 12345;
	auto rnd = [&] {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		return (uint32_t)(s >> 32);
	};
	/* int32: random bits, exact */
	for (int64_t i = 0; i < n; i++) {
		t0[i] = rnd();
		v[i] = rnd();
	}
	CK(cudaMemcpy(dv, v.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
	int blocks = 8 * g_sms;
	auto run32 = [&](const char *name, auto fn) {
		CK(cudaMemcpy(dt, t0.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
		fn<<<blocks, 256>>>(dt, dv, n);
		CK(cudaGetLastError());
		CK(cudaMemcpy(got.data(), dt, (size_t)n * 4, cudaMemcpyDeviceToHost));
		bool ok = true;
		for (int64_t i = 0; i < n && ok; i++)
			ok = got[i] == t0[i] + v[i];
		double ms = time_it([&] { fn<<<blocks, 256>>>(dt, dv, n); });
		report(name, "int32", ms, n, ok);
	};
	run32("ew i32 strided R8 (landed)", ew_i32_strided<8>);
#ifdef TA_PROBE_REAL
	{
		std::vector<uint32_t> sum(n);
		for (int64_t i = 0; i < n; i++)
			sum[i] = t0[i] + v[i];
		real_ew<TA_DTYPE_I32>("int32", n, 4, t0.data(), v.data(), sum.data(), 0);
	}
#endif
	run32("ew i32 strided R4", ew_i32_strided<4>);
	run32("ew i32 strided R2", ew_i32_strided<2>);
	run32("ew i32 strided R1", ew_i32_strided<1>);
	blocks = 16 * g_sms;
	run32("ew i32 strided R4 16/SM", ew_i32_strided<4>);
	blocks = 4 * g_sms;
	run32("ew i32 strided R4 4/SM", ew_i32_strided<4>);
	blocks = 8 * g_sms;
	run32("ew i32 chunk4 U1", ew_chunk32<1, 0>);
	run32("ew i32 chunk4 U2", ew_chunk32<2, 0>);
	run32("ew i32 chunk4 U4", ew_chunk32<4, 0>);
	{
		std::vector<uint32_t> sum(n);
		for (int64_t i = 0; i < n; i++)
			sum[i] = t0[i] + v[i];
		bulk_rows<0>("int32", dt, dv, t0.data(), sum.data(), n, 4);
		run_ew_k("plain ld+add+st (not atomic)", "int32", ew_plain_u32, 8 * g_sms, 256, 0,
		         dt, dv, n, t0.data(), sum.data(), (size_t)n * 4, n);
	}
	/* float32: a mix of special values in tile and operand, finite operands */
	static const float sp[] = {0.0f,    -0.0f,    1e-40f,    -1e-40f, 1.17549435e-38f,
	                           3.4e38f, -3.4e38f, 1.0f,      -1.0f,   0.1f,
	                           1e30f,   -2.5f,    5.877e-39f};
	const uint32_t inf = 0x7f800000u, nan = 0x7fc00000u;
	for (int64_t i = 0; i < n; i++) {
		float a, b;
		uint32_t r = rnd();
		if (i < 4096) {
			a = sp[r % 13];
			b = sp[(r >> 8) % 13];
		} else {
			a = (float)(int)(r & 1023) * 0.25f;
			b = (float)(int)((r >> 10) & 1023) * 0.5f;
		}
		memcpy(&t0[i], &a, 4);
		memcpy(&v[i], &b, 4);
		if (i < 4096 && (r >> 20) % 7 == 0)
			t0[i] =
			    (r >> 24) & 1 ? inf : nan; /* tile inf / NaN (operands stay finite) */
	}
	CK(cudaMemcpy(dv, v.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dt, t0.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
	ew_chunk32<1, 1><<<blocks, 256>>>(dt, dv, n);
	CK(cudaMemcpy(ref.data(), dt, (size_t)n * 4, cudaMemcpyDeviceToHost));
	int flushed = 0;
	for (int i = 0; i < 4096; i++) {
		float a, b, r;
		memcpy(&a, &t0[i], 4);
		memcpy(&b, &v[i], 4);
		memcpy(&r, &ref[i], 4);
		flushed += (a == 1e-40f && b == 0.0f && r == 0.0f);
	}
	printf("float32 scalar red: subnormal tile + 0 -> 0 in %d cases (flush)\n", flushed);
	auto runf = [&](const char *name, auto fn) {
		CK(cudaMemcpy(dt, t0.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
		fn<<<blocks, 256>>>(dt, dv, n);
		CK(cudaGetLastError());
		CK(cudaMemcpy(got.data(), dt, (size_t)n * 4, cudaMemcpyDeviceToHost));
		bool ok = got == ref;
		double ms = time_it([&] { fn<<<blocks, 256>>>(dt, dv, n); });
		report(name, "float32", ms, n, ok);
	};
	runf("ew f32 scalar U2", ew_chunk32<2, 1>);
#ifdef TA_PROBE_REAL
	real_ew<TA_DTYPE_F32>("float32", n, 4, t0.data(), v.data(), ref.data(), 0);
	real_ew<TA_DTYPE_F32>("float32", n - 3, 4, t0.data(), v.data(), ref.data(), 0);
	real_ew<TA_DTYPE_F32>("float32", n - 3, 4, t0.data(), v.data(), ref.data(), 1);
#endif
	runf("ew f32 v2 U2", ew_chunk32<2, 2>);
	runf("ew f32 v4 U1", ew_chunk32<1, 3>);
	runf("ew f32 v4 U2", ew_chunk32<2, 3>);
	runf("ew f32 v4 U4", ew_chunk32<4, 3>);
	bulk_rows<1>("float32", dt, dv, t0.data(), ref.data(), n, 4);
	blocks = 16 * g_sms;
	runf("ew f32 v4 U1 16/SM", ew_chunk32<1, 3>);
	blocks = 4 * g_sms;
	runf("ew f32 v4 U1 4/SM", ew_chunk32<1, 3>);
	blocks = 8 * g_sms;
	/* 16-bit: n elements of 2 bytes (half the buffer) */
	for (int bf = 0; bf < 2; bf++) {
		unsigned short *t16 = (unsigned short *)t0.data(),
		               *v16 = (unsigned short *)v.data();
		static const float sp16[] = {0.0f,      -0.0f, 1e-7f, -3e-8f, 65504.0f,
		                             -65504.0f, 1.0f,  0.1f,  3e38f,  1e-39f};
		for (int64_t i = 0; i < n; i++) {
			uint32_t r = rnd();
			float a = i < 4096 ? sp16[r % 10] : (float)(int)(r & 255) * 0.25f;
			float b =
			    i < 4096 ? sp16[(r >> 8) % 10] : (float)(int)((r >> 8) & 255) * 0.5f;
			t16[i] = bf ? f2bf(a) : f2h(a);
			v16[i] = bf ? f2bf(b) : f2h(b);
			if (i < 4096 && (r >> 20) % 7 == 0)
				t16[i] = bf ? 0x7fc0 : 0x7e00;
		}
		unsigned short *dt16 = (unsigned short *)dt, *dv16 = (unsigned short *)dv;
		CK(cudaMemcpy(dv16, v16, (size_t)n * 2, cudaMemcpyHostToDevice));
		CK(cudaMemcpy(dt16, t16, (size_t)n * 2, cudaMemcpyHostToDevice));
		if (bf)
			ew_chunk16<1, 0, true><<<blocks, 256>>>(dt16, dv16, n);
		else
			ew_chunk16<1, 0, false><<<blocks, 256>>>(dt16, dv16, n);
		std::vector<unsigned short> r16(n), g16(n);
		CK(cudaMemcpy(r16.data(), dt16, (size_t)n * 2, cudaMemcpyDeviceToHost));
		auto run16 = [&](const char *name, auto fn) {
			CK(cudaMemcpy(dt16, t16, (size_t)n * 2, cudaMemcpyHostToDevice));
			fn<<<blocks, 256>>>(dt16, dv16, n);
			CK(cudaGetLastError());
			CK(cudaMemcpy(g16.data(), dt16, (size_t)n * 2, cudaMemcpyDeviceToHost));
			bool ok = g16 == r16;
			double ms = time_it([&] { fn<<<blocks, 256>>>(dt16, dv16, n); });
			report(name, bf ? "bfloat16" : "float16", ms, n, ok);
		};
#ifdef TA_PROBE_REAL
		if (bf) {
			real_ew<TA_DTYPE_BF16>("bfloat16", n, 2, t16, v16, r16.data(), 0);
			real_ew<TA_DTYPE_BF16>("bfloat16", n - 5, 2, t16, v16, r16.data(), 0);
			real_ew<TA_DTYPE_BF16>("bfloat16", n - 5, 2, t16, v16, r16.data(), 3);
		} else {
			real_ew<TA_DTYPE_F16>("float16", n, 2, t16, v16, r16.data(), 0);
			real_ew<TA_DTYPE_F16>("float16", n - 5, 2, t16, v16, r16.data(), 0);
			real_ew<TA_DTYPE_F16>("float16", n - 5, 2, t16, v16, r16.data(), 3);
		}
#endif
		if (bf) {
			run16("ew bf16 scalar U2", ew_chunk16<2, 0, true>);
			run16("ew bf16x2 U2", ew_chunk16<2, 1, true>);
			run16("ew bf16 v4.bf16x2 U2", ew_chunk16<2, 2, true>);
			run16("ew bf16 v8.bf16 U1", ew_chunk16<1, 3, true>);
			run16("ew bf16 v8.bf16 U2", ew_chunk16<2, 3, true>);
			bulk_rows<3>("bfloat16", dt, dv, t16, r16.data(), n, 2);
		} else {
			run16("ew f16 scalar U2", ew_chunk16<2, 0, false>);
			run16("ew f16x2 U2", ew_chunk16<2, 1, false>);
			run16("ew f16 v4.f16x2 U2", ew_chunk16<2, 2, false>);
			run16("ew f16 v8.f16 U1", ew_chunk16<1, 3, false>);
			run16("ew f16 v8.f16 U2", ew_chunk16<2, 3, false>);
		}
	}
	/* device copy for scale */
	double ms =
	    time_it([&] { CK(cudaMemcpyAsync(dt, dv, (size_t)n * 4, cudaMemcpyDeviceToDevice)); });
	printf("%-34s %-10s %9.4f ms %8.1f TB/s (read + write)\n", "d2d copy", "bytes", ms,
	       2.0 * n * 4 / (ms * 1e-3) / 1e12);
	CK(cudaFree(dt));
	CK(cudaFree(dv));
}

int main(int argc, char **argv)
{
	int log2n = 26;
	const char *only = "";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			g_reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--log2n") && i + 1 < argc)
			log2n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else {
			fprintf(stderr,
			        "usage: kernel-probe [--reps N] [--log2n K] [--only ew|hist]\n");
			return 1;
		}
	}
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	g_sms = prop.multiProcessorCount;
	void *hold = NULL;
	CK(cudaHostAlloc(&hold, 2 * sizeof(unsigned int), cudaHostAllocMapped));
	g_hold = (volatile unsigned int *)hold;
	CK(cudaHostGetDevicePointer((void **)&g_dhold, hold, 0));
	printf("device: %s, %d SMs; 2^%d elements, median of %d runs (CUDA events)\n", prop.name,
	       g_sms, log2n, g_reps);
	int64_t n = (int64_t)1 << log2n;
#ifdef TA_PROBE_REAL
	CK(cudaMalloc(&g_cnt, 24));
	CK(cudaMemset(g_cnt, 0, 24));
	if (strcmp(only, "ew"))
		real_hist(n);
#endif
	if (strcmp(only, "ew"))
		hist_suite(n);
	if (strcmp(only, "hist"))
		ew_suite(n);
	printf("%s\n", g_fail ? "SOME VARIANTS WRONG" : "all variants exact");
	return g_fail ? 1 : 0;
}
