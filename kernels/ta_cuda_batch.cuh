/* ta_cuda_batch.cuh: the batch kernel of the CUDA backend (included once, by ta_cuda.cu,
 * after ta_cuda_kernels.cuh and the legality tables). Many small requests, from many
 * callers, in one launch: the host has resolved their elements into descriptors
 * (ta_cuda_private.h); each warp runs one chain (one caller's requests in their order),
 * spreading a request's elements over its lanes, with a fence and a warp barrier between
 * one request and the next so that the chain's later requests see its earlier ones. Every
 * element goes through apply_global_rt, the same instruction the per-request kernels use
 * for that (dtype, op, sem, scope), so a batched request means exactly what it means alone.
 * k_persistent runs the same chains from a block that stays resident between batches. */

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

/* Applies element d on the calling lane, its old value to olds when asked. */
__device__ __forceinline__ void batch_elem(const ta_batch_elem &d, uint64_t *olds)
{
	uint64_t old = batch_apply(d.code, d.addr, d.value, d.compare);
	if (d.out != TA_BATCH_NO_OUT)
		olds[d.out] = old;
}

/* Runs one chain (ch) on the calling warp, in the chain's order. A request of several
 * elements spreads them over the lanes. A run of one-element requests with no fence between
 * them (relaxed ones: they promise other observers no order) takes 32 requests at a time,
 * one a lane, and applies them in rounds: each round every address's earliest pending
 * request, so the run waits for the most requests to one address rather than for every
 * request in turn, and requests to one address apply in order. Between one request (or run)
 * and the next: the fence the first asks for and a warp barrier, so that the chain's later
 * requests see its earlier ones. Returns true when this lane applied an element or wrote an
 * old value. */
__device__ __forceinline__ bool batch_chain(ta_batch_chain ch, const ta_batch_item *items,
                                            const ta_batch_elem *elems, uint64_t *olds,
                                            uint32_t lane)
{
	bool did = false;
	const ta_batch_item *its = items + ch.first_item;
	for (uint32_t i = 0; i < ch.n_items;) {
		uint32_t last = i; /* the run's last request */
		if (its[i].count == 1)
			while (last + 1 < ch.n_items && its[last].fence == 0 &&
			       its[last + 1].count == 1)
				last++;
		if (last > i) {
			/* 32 requests of the run at a time, request base + lane on this lane;
			 * round after round, the lowest lane still pending of each address applies
			 * its request (__match_any_sync groups the lanes by address; a lane done
			 * or without a request offers a key no address has), so that requests to
			 * one address apply in the run's order and all others at once */
			for (uint32_t base = i; base <= last; base += 32u) {
				uint32_t k = base + lane;
				bool pending = k <= last;
				const ta_batch_elem *d = pending ? &elems[its[k].first] : NULL;
				uint64_t addr = pending ? d->addr : 0;
				while (__any_sync(0xffffffffu, pending)) {
					unsigned same = __match_any_sync(
					    0xffffffffu, pending ? addr : ~(uint64_t)lane);
					if (pending && (uint32_t)(__ffs(same) - 1) == lane) {
						batch_elem(*d, olds);
						did = true;
						pending = false;
					}
					__syncwarp(); /* this round's before the next's */
				}
			}
		} else {
			ta_batch_item it = its[i];
			for (uint32_t e = lane; e < it.count; e += 32u) {
				batch_elem(elems[it.first + e], olds);
				did = true;
			}
		}
		if (last + 1 < ch.n_items) {
			/* the next request of this chain sees everything this one did */
			if (its[last].fence == 2)
				__threadfence_system();
			else if (its[last].fence == 1)
				__threadfence();
			__syncwarp();
		}
		i = last + 1;
	}
	return did;
}

/* The batch kernel: warp w runs chain w. */
__global__ void __launch_bounds__(TA_BATCH_BLOCK)
    k_batch(const ta_batch_chain *chains, uint32_t n_chains, const ta_batch_item *items,
            const ta_batch_elem *elems, uint64_t *olds)
{
	uint32_t warp = (blockIdx.x * (uint32_t)blockDim.x + threadIdx.x) / 32u;
	uint32_t lane = threadIdx.x & 31u;
	if (warp >= n_chains)
		return; /* the whole warp */
	(void)batch_chain(chains[warp], items, elems, olds, lane);
}

/* Nanoseconds of the GPU's global timer. */
__device__ __forceinline__ uint64_t pk_now(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Reads a word the host writes (mapped host memory), with acquire semantics at system
 * scope: what the host wrote before it is seen after. */
__device__ __forceinline__ uint64_t pk_load_acquire(const uint64_t *p)
{
	uint64_t v;
	asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

/* Writes a word the host reads (mapped host memory), with release semantics at system
 * scope: what this thread did (and saw, through a barrier) before is seen by then. */
__device__ __forceinline__ void pk_store_release(uint64_t *p, uint64_t v)
{
	asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Writes a word the host reads (mapped host memory) with no ordering: a notice only. */
__device__ __forceinline__ void pk_store_relaxed(uint64_t *p, uint64_t v)
{
	asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* The persistent batch kernel (ta_cuda.cu, "persistent kernel"): one block that waits on
 * the mailbox's bell for batches instead of being launched for each. Thread 0 polls the
 * bell; a new value (TA_PK_BELL) carries the batch's area slot and size in 16-byte units:
 * the block copies that many bytes of that descriptor area (a ta_pk_head, then chains,
 * items, elements) into shared memory in one pass, warp w runs chains w, w + 32, ... each
 * exactly as k_batch runs one (old values into the slot's olds), the lanes that did
 * anything fence at system scope, and thread 0 writes the batch's sequence number to
 * done (and, on reading the bell, to taken: the host may then ring the next one). It returns,
 * writing epoch to exited, when the bell reads TA_PK_STOP, or after idle_ns without a batch, or
 * once life_ns have passed since its launch (between batches). */
__global__ void __launch_bounds__(TA_PK_THREADS)
    k_persistent(ta_pk_mailbox *mb, const uint4 *area, uint64_t *olds, uint64_t last,
                 uint64_t epoch, uint64_t idle_ns, uint64_t life_ns)
{
	__shared__ uint4 desc[TA_PK_DESC_BYTES / 16];
	__shared__ uint64_t s_bell;
	uint32_t warp = threadIdx.x / 32u, lane = threadIdx.x & 31u;
	uint64_t born = pk_now(), idle_since = born;
	/* the trace (thread 0 only): sums carried over from earlier launches, the phases' start */
	bool trace = threadIdx.x == 0 && pk_load_acquire(&mb->trace) != 0;
	uint64_t tr[TA_PK_TR_COUNT] = {0}, t_seen = 0, t_copied = 0, t_chain0 = 0, t_end = 0;
	for (int i = 0; trace && i < TA_PK_TR_COUNT; i++)
		tr[i] = pk_load_acquire(&mb->tr_ns[i]);
	for (;;) {
		if (threadIdx.x == 0) {
			uint64_t bell;
			for (;;) {
				bell = pk_load_acquire(&mb->bell);
				if (bell != last)
					break;
				uint64_t now = pk_now();
				if (now - idle_since > idle_ns || now - born > life_ns) {
					bell = TA_PK_STOP;
					break;
				}
			}
			s_bell = bell;
			if (bell != TA_PK_STOP) /* the host may ring the next bell now */
				pk_store_relaxed(&mb->taken, TA_PK_BELL_SEQ(bell));
			if (trace)
				t_seen = pk_now();
		}
		__syncthreads();
		uint64_t bell = s_bell;
		if (bell == TA_PK_STOP)
			break; /* the whole block */
		uint32_t units = TA_PK_BELL_UNITS(bell), slot = TA_PK_BELL_SLOT(bell);
		const uint4 *from = area + (size_t)slot * (TA_PK_DESC_BYTES / 16);
		uint64_t *out = olds + (size_t)slot * TA_PK_OLDS;
		for (uint32_t i = threadIdx.x; i < units; i += blockDim.x)
			desc[i] = __ldcv(&from[i]);
		__syncthreads();
		if (trace)
			t_copied = pk_now();
		const ta_pk_head *h = (const ta_pk_head *)desc;
		const unsigned char *base = (const unsigned char *)desc;
		bool did = false;
		for (uint32_t c = warp; c < h->n_chains; c += TA_PK_THREADS / 32u)
			did |= batch_chain(((const ta_batch_chain *)(base + sizeof(ta_pk_head)))[c],
			                   (const ta_batch_item *)(base + h->items_off),
			                   (const ta_batch_elem *)(base + h->elems_off), out, lane);
		if (trace)
			t_chain0 = pk_now();
		if (did)
			__threadfence_system(); /* its atomics and old values before done */
		__syncthreads();
		if (threadIdx.x == 0) {
			if (trace)
				t_end = pk_now();
			pk_store_release(&mb->done, TA_PK_BELL_SEQ(bell));
			uint64_t gap_from = idle_since;
			idle_since = pk_now();
			if (trace) { /* sums written as they grow: the host reads them at its end */
				tr[TA_PK_TR_N]++;
				tr[TA_PK_TR_GAP] += t_seen - gap_from;
				tr[TA_PK_TR_COPY] += t_copied - t_seen;
				tr[TA_PK_TR_CHAIN0] += t_chain0 - t_copied;
				tr[TA_PK_TR_REST] += t_end - t_chain0;
				tr[TA_PK_TR_DONE] += idle_since - t_end;
				for (int i = 0; i < TA_PK_TR_COUNT; i++)
					((volatile uint64_t *)mb->tr_ns)[i] = tr[i];
			}
		}
		last = bell;
	}
	if (threadIdx.x == 0)
		pk_store_release(&mb->exited, epoch);
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

extern "C" ta_status ta_cuda_launch_persistent(ta_pk_mailbox *mb, const void *area, uint64_t *olds,
                                               uint64_t last, uint64_t epoch, uint64_t idle_ns,
                                               uint64_t life_ns, void *stream, ta_error *err)
{
	ta::k_persistent<<<1, TA_PK_THREADS, 0, (cudaStream_t)stream>>>(
	    mb, (const uint4 *)area, olds, last, epoch, idle_ns, life_ns);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return ta_error_set(err, TA_INTERNAL,
		                    "launching the persistent batch kernel: %s (%s)",
		                    cudaGetErrorName(e), cudaGetErrorString(e));
	return TA_OK;
}
