/* ta_cuda_batch.cuh: the batch kernel of the CUDA backend (included once, by ta_cuda.cu,
 * after ta_cuda_kernels.cuh and the legality tables). Many small requests, from many
 * callers, in one launch: the host has resolved their elements into descriptors
 * (ta_cuda_private.h); each warp runs one chain (one caller's requests in their order),
 * spreading a request's elements over its lanes, with a fence and a warp barrier between
 * one request and the next so that the chain's later requests see its earlier ones. Every
 * element goes through apply_global_rt, the same instruction the per-request kernels use
 * for that (dtype, op, sem, scope), so a batched request means exactly what it means alone. */

namespace ta
{

/* The host-side legality tables of ta_cuda.cu as compile-time constants that device code
 * may use: a global kernel for (DT, OP), the kernel op, and whether DT is a tile dtype. */
template <int DT, int OP> struct batch_legal {
	static constexpr bool value = legal_global(DT, OP);
	static constexpr int kop = kernel_op(OP);
};
template <int DT> struct batch_tile_dtype {
	static constexpr bool value = dtype_kind[DT] != DK_MASK;
};

/* Applies one element of dtype DT: op (a table op; SUB adds the negated operand) with
 * sem/scope ss; returns the bits seen before (see apply_global). */
template <int DT>
__device__ __forceinline__ uint64_t batch_apply_dt(int op, uint64_t addr, uint64_t v, uint64_t cmp,
                                                   int ss, bool want_old)
{
	typedef typename dt_traits<DT>::B B;
	B *p = (B *)(uintptr_t)addr;
	switch (op) {
#define TA_OP(id, ...)                                                                             \
	case TA_OP_##id:                                                                           \
		if constexpr (batch_legal<DT, TA_OP_##id>::value) {                                \
			constexpr int KOP = batch_legal<DT, TA_OP_##id>::kop;                      \
			B val = TA_OP_##id == TA_OP_SUB ? negate<DT>((B)v) : (B)v;                 \
			return (uint64_t)apply_global_rt<DT, KOP>(p, val, (B)cmp, ss, want_old);   \
		}                                                                                  \
		break;
#include "ta_ops.def"
#undef TA_OP
	default:
		break;
	}
	return 0;
}

/* Applies the element whose packed code (ta_batch_code) is code. */
__device__ __forceinline__ uint64_t batch_apply(uint32_t code, uint64_t addr, uint64_t v,
                                                uint64_t cmp)
{
	int dt = (int)(code & 0xffu), op = (int)((code >> 8) & 0xffu);
	int ss = ss_of((int)((code >> 16) & 0xfu), (int)((code >> 20) & 0xfu));
	bool want_old = (code >> 24) & 1u;
	switch (dt) {
#define TA_DTYPE(id, ...)                                                                          \
	case TA_DTYPE_##id:                                                                        \
		if constexpr (batch_tile_dtype<TA_DTYPE_##id>::value)                              \
			return batch_apply_dt<TA_DTYPE_##id>(op, addr, v, cmp, ss, want_old);      \
		break;
#include "ta_ops.def"
#undef TA_DTYPE
	default:
		break;
	}
	return 0;
}

/* Threads per block of the batch kernel (TA_BATCH_BLOCK / 32 chains a block). */
#define TA_BATCH_BLOCK 128

/* The batch kernel: warp w runs chain w. */
__global__ void __launch_bounds__(TA_BATCH_BLOCK)
    k_batch(const ta_batch_chain *chains, uint32_t n_chains, const ta_batch_item *items,
            const ta_batch_elem *elems, uint64_t *olds)
{
	uint32_t warp = (blockIdx.x * (uint32_t)blockDim.x + threadIdx.x) / 32u;
	uint32_t lane = threadIdx.x & 31u;
	if (warp >= n_chains)
		return; /* the whole warp */
	ta_batch_chain ch = chains[warp];
	for (uint32_t i = 0; i < ch.n_items; i++) {
		ta_batch_item it = items[ch.first_item + i];
		for (uint32_t e = lane; e < it.count; e += 32u) {
			ta_batch_elem d = elems[it.first + e];
			uint64_t old = batch_apply(d.code, d.addr, d.value, d.compare);
			if (d.out != TA_BATCH_NO_OUT)
				olds[d.out] = old;
		}
		if (i + 1 < ch.n_items) {
			/* the next request of this chain sees everything this one did */
			if (it.fence == 2)
				__threadfence_system();
			else
				__threadfence();
			__syncwarp();
		}
	}
}

} /* namespace ta */

extern "C" ta_status ta_cuda_launch_batch(const ta_batch_chain *chains, uint32_t n_chains,
                                          const ta_batch_item *items, const ta_batch_elem *elems,
                                          uint64_t *olds, void *stream, ta_error *err)
{
	if (n_chains == 0)
		return TA_OK;
	const uint32_t per_block = TA_BATCH_BLOCK / 32u;
	uint32_t blocks = (n_chains + per_block - 1) / per_block;
	ta::k_batch<<<blocks, TA_BATCH_BLOCK, 0, (cudaStream_t)stream>>>(chains, n_chains, items,
	                                                                 elems, olds);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return ta_error_set(err, TA_INTERNAL, "launching the batch kernel: %s (%s)",
		                    cudaGetErrorName(e), cudaGetErrorString(e));
	return TA_OK;
}
