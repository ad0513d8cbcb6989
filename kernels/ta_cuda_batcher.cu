/* ta_cuda_batcher.cu: the CUDA backend's batcher and the host side of its persistent kernel:
 * small requests from many callers queued, resolved on the host into descriptors and run as
 * one launch of ta_cuda_batch.cuh's batch kernel, or handed to the resident kernel through
 * its mailbox. Asynchronous callers' batches are led by the lead thread; while it has a
 * next batch to run, it hands a finished batch's completions (event-loop wake-ups) to the
 * completion thread. Host code only: the kernels are launched through ta_cuda_private.h.
 * The backend (ta_cuda.cu) calls batchable/batch_submit and holds the resident kernel off
 * (pk_hold/pk_release) around calls that may synchronise the whole device. */
#include <cuda_runtime.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ta_cuda_backend.h"

/* True when plan goes through the batcher rather than its own launch. */
bool batchable(const ta_cuda_backend *be, const ta_plan *plan)
{
	/* the batcher resolves elements on the host: device operands launch on their own; so
	 * does a merge-out (zeroing and adds around the kernel, on the slot's stream) */
	bool on_device = plan->old_out_device || plan->values.device || plan->compare.device ||
	                 plan->mask.device;
	for (int i = 0; i < TA_MAX_RANK; i++)
		on_device = on_device || plan->index[i].device;
	return be->batch_ready && plan->space == TA_SPACE_GLOBAL &&
	       plan->count <= TA_CUDA_BATCH_ITEM_MAX && !on_device && !plan->merge_out;
}

/* The output bits of an element that is masked off or skipped (as the kernels' fill_value). */
static uint64_t batch_fill_bits(const ta_plan *plan, int64_t k)
{
	if (plan->op == TA_OP_CAS)
		return ta_operand_bits(plan, &plan->compare, k);
	if (plan->op == TA_OP_LOAD)
		return plan->padding_bits;
	return 0;
}

/* Resolves the elements of call c (ta_plan_resolve) into descriptors at d, in order,
 * numbering old-value slots from out0; masked and skipped elements get no descriptor, and
 * their old value (the fill) goes to olds[out0 + k]. With olds NULL it stops at the first
 * such element that wants an old value and returns -1 (resolve it later, with olds).
 * Returns the descriptors written; adds to *skipped and *outside (elements resolved
 * outside the tile: an inconsistent plan, not applied). */
static int64_t resolve_call(const ta_apply_call *c, ta_batch_elem *d, uint32_t out0, uint64_t *olds,
                            uint64_t *skipped, uint64_t *outside)
{
	const ta_plan *p = c->plan;
	size_t es = ta_dtype_size(p->dtype);
	int64_t tile_elems = (int64_t)(c->tile_bytes / es), n = 0;
	uint32_t code = ta_batch_code(p->dtype, p->op, p->sem, p->scope, p->want_old);
	for (int64_t k = 0; k < p->count; k++) {
		int64_t off = 0;
		int how = ta_plan_resolve(p, k, &off);
		if (how == 1 && (off < 0 || off >= tile_elems)) {
			++*outside;
			how = 0;
		}
		if (how != 1) {
			if (p->want_old && !olds)
				return -1;
			if (how < 0)
				++*skipped;
			if (p->want_old)
				olds[out0 + (uint32_t)k] = batch_fill_bits(p, k);
			continue;
		}
		ta_batch_elem *e = &d[n++];
		e->addr = (uint64_t)(uintptr_t)((unsigned char *)c->mem + off * (int64_t)es);
		e->value = p->values.data ? ta_operand_bits(p, &p->values, k) : 0;
		e->compare = p->compare.data ? ta_operand_bits(p, &p->compare, k) : 0;
		e->code = code;
		e->out = p->want_old ? out0 + (uint32_t)k : TA_BATCH_NO_OUT;
	}
	return n;
}

bool batch_pre_resolve(const ta_apply_call *c, batch_pre *pre)
{
	pre->count = c->plan->count;
	pre->want_old = c->plan->want_old;
	pre->sem = c->plan->sem;
	pre->scope = c->plan->scope;
	uint64_t skipped = 0, outside = 0;
	int64_t n = resolve_call(c, pre->elems, 0, NULL, &skipped, &outside);
	pre->ok = n >= 0 && outside == 0;
	pre->n = pre->ok ? (uint32_t)n : 0;
	pre->skipped = skipped;
	return pre->ok;
}

/* The facts of call i of w the leader needs: from the block its loop filled (pre) when w is
 * asynchronous, so that the leader reads no plan; else from the call's plan. */
static int64_t wait_count(const batch_wait *w, int i)
{
	return w->pre ? w->pre[i].count : w->calls[i].plan->count;
}
static bool wait_want_old(const batch_wait *w, int i)
{
	return w->pre ? w->pre[i].want_old : w->calls[i].plan->want_old;
}
static ta_sem wait_sem(const batch_wait *w, int i)
{
	return w->pre ? w->pre[i].sem : w->calls[i].plan->sem;
}
static ta_scope wait_scope(const batch_wait *w, int i)
{
	return w->pre ? w->pre[i].scope : w->calls[i].plan->scope;
}

/* Bytes of the batch buffer for the given counts (16-byte aligned sections). */
static size_t batch_bytes(size_t chains, size_t items, size_t elems, size_t olds)
{
	return align_up(chains * sizeof(ta_batch_chain)) + align_up(items * sizeof(ta_batch_item)) +
	       align_up(elems * sizeof(ta_batch_elem)) + align_up(olds * sizeof(uint64_t));
}

static void pk_stop(ta_cuda_backend *be);
static void pk_set_on(cuda_batcher *b, bool on);

/* Grows the batch buffer (mapped pinned host memory, read in place by the kernel) to at
 * least bytes. Leader only. */
static ta_status batch_reserve(ta_cuda_backend *be, size_t bytes, ta_error *err)
{
	cuda_batcher *b = &be->batch;
	if (b->cap >= bytes)
		return TA_OK;
	if (b->buf && be->pk_ready) {
		/* cudaFreeHost may wait for the whole device: the leader stops its kernel */
		pthread_mutex_lock(&b->mu);
		bool on = b->pk_on;
		pthread_mutex_unlock(&b->mu);
		if (on) {
			pk_stop(be);
			pk_set_on(b, false);
		}
	}
	if (b->buf)
		cudaFreeHost(b->buf);
	b->buf = NULL;
	b->cap = 0;
	size_t want = bytes < (1u << 20) ? (1u << 20) : bytes;
	cudaError_t e = cudaHostAlloc((void **)&b->buf, want, cudaHostAllocMapped);
	if (e != cudaSuccess)
		return be_fail(be, e, "allocating the batch buffer (mapped pinned memory)", err);
	b->cap = want;
	return TA_OK;
}

/* Rounds n up to 16 bytes (the persistent kernel's descriptor area). */
static size_t align16(size_t n)
{
	return (n + 15u) & ~(size_t)15u;
}

/* Bytes of the persistent kernel's area a batch of these counts takes: its head, chains,
 * items and elements (16-byte sections). */
static size_t pk_area_bytes(size_t chains, size_t items, size_t elems)
{
	return align16(sizeof(ta_pk_head) + chains * sizeof(ta_batch_chain)) +
	       align16(items * sizeof(ta_batch_item)) + elems * sizeof(ta_batch_elem);
}

/* ---- the persistent kernel ---------------------------------------------------------------
 *
 * A launch and its synchronisation cost a lone request most of its GPU time, so small
 * batches (up to TA_PK_CHAINS chains whose descriptors fit the mailbox) go to a kernel
 * that stays resident (k_persistent, ta_cuda_batch.cuh): the leader writes the batch into
 * the mailbox's area, rings the bell and spins on the done word the kernel writes; no
 * launch, no copy, no driver call. The next batch, written into the other area meanwhile,
 * is rung as soon as the kernel has noted the current bell in taken, so that the kernel
 * finds it on finishing the current one. The leader launches the kernel on demand (on its own
 * stream) and it returns by itself after TA_CUDA_PK_IDLE_NS without a batch, so an idle
 * daemon burns no SM; it also returns TA_CUDA_PK_LIFE_NS after its launch (between
 * batches), so anything that waits for the device as a whole (a tool that serialises
 * kernels) waits a bounded time. Every other use of the device holds it off (pk_hold:
 * large requests, tile allocation and free, host and IPC registrations, destroy): those
 * calls may synchronise the whole device, which would wait for a resident kernel, so the
 * hold stops it (after the batch in flight) and no batch uses it until the hold ends.
 * Order is unchanged: one leader at a time, and each batch has finished before the next
 * one runs, whichever way it ran (the kernel runs the bells it reads one after another; a
 * launch waits until the last bell's done is seen or the kernel reaped). */

/* A persistent kernel returns after this long without a batch. */
#define TA_CUDA_PK_IDLE_NS 5000000ull
/* ... and this long after its launch (at the first moment without a batch). */
#define TA_CUDA_PK_LIFE_NS 100000000ull

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One pause of a spin-wait. */
static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Gives the lead to the oldest caller queued other than self (posting it; the lead thread
 * when that caller is asynchronous), or ends the running batch role. Under batch.mu. */
static void batch_pass_lead(cuda_batcher *b, batch_wait *self)
{
	if (!b->head) {
		b->running = false;
		return;
	}
	if (b->head->done_fn) {
		b->lead_thread_up = true;
		pthread_cond_signal(&b->lead_cv);
		return;
	}
	b->head->lead = true;
	if (b->head != self)
		sem_post(&b->head->wake);
}

/* Sets pk_on under batch.mu (broadcasting pk_cv when it turns false). */
static void pk_set_on(cuda_batcher *b, bool on)
{
	pthread_mutex_lock(&b->mu);
	b->pk_on = on;
	if (!on)
		pthread_cond_broadcast(&b->pk_cv);
	pthread_mutex_unlock(&b->mu);
}

/* ---- one resident kernel's mailbox (pk_box): the lead's and every lane's ---- */

/* The descriptor area of slot in box. */
static unsigned char *box_area(const pk_box *box, int slot)
{
	return box->mem + sizeof(ta_pk_mailbox) + (size_t)slot * TA_PK_DESC_BYTES;
}

/* The old-value array of slot in box. */
static uint64_t *box_olds(const pk_box *box, int slot)
{
	return (uint64_t *)(box->mem + sizeof(ta_pk_mailbox) + 2 * TA_PK_DESC_BYTES) +
	       (size_t)slot * TA_PK_OLDS;
}

cudaError_t box_init(pk_box *box, unsigned char *mem)
{
	memset(box, 0, sizeof(*box));
	memset(mem, 0, TA_PK_BOX_BYTES);
	box->mem = mem;
	box->mb = (ta_pk_mailbox *)mem;
	return cudaStreamCreateWithFlags(&box->stream, cudaStreamNonBlocking);
}

ta_status box_launch(ta_cuda_backend *be, pk_box *box, uint64_t prev, ta_error *err)
{
	box->epoch++;
	ta_status st =
	    ta_cuda_launch_persistent(box->mb, box_area(box, 0), box_olds(box, 0), prev, box->epoch,
	                              TA_CUDA_PK_IDLE_NS, TA_CUDA_PK_LIFE_NS, box->stream, err);
	if (st != TA_OK) {
		cudaError_t e = cudaStreamSynchronize(box->stream);
		if (e != cudaSuccess)
			be_fail(be, e, "finishing a failed persistent kernel launch", NULL);
	}
	return st;
}

uint64_t box_ring(pk_box *box, uint32_t units, int slot, uint64_t *prev)
{
	*prev = box->last_bell;
	uint64_t bell = TA_PK_BELL(++box->seq, slot, units);
	/* the descriptors were written before: a release store publishes them */
	__atomic_store_n(&box->mb->bell, bell, __ATOMIC_RELEASE);
	box->last_bell = bell;
	return bell;
}

void box_stop(ta_cuda_backend *be, pk_box *box)
{
	__atomic_store_n(&box->mb->bell, TA_PK_STOP, __ATOMIC_RELEASE);
	box->last_bell = TA_PK_STOP;
	cudaError_t e = cudaStreamSynchronize(box->stream);
	if (e != cudaSuccess) {
		ta_error err;
		be_fail(be, e, "stopping the persistent batch kernel", &err);
		fprintf(stderr, "tileatom cuda: %s\n", err.msg);
	}
}

box_state box_poll(pk_box *box, uint64_t seq, cudaError_t *e)
{
	/* done may be past seq already: the next bell may have been rung early */
	if (__atomic_load_n(&box->mb->done, __ATOMIC_ACQUIRE) >= seq)
		return BOX_DONE;
	bool exited = __atomic_load_n(&box->mb->exited, __ATOMIC_ACQUIRE) == box->epoch;
	if (!exited && ++box->polls % 4096 == 0) {
		/* a kernel that failed never writes done: ask the stream now and then */
		*e = cudaStreamQuery(box->stream);
		if (*e == cudaErrorNotReady)
			(void)cudaGetLastError();
		else if (*e != cudaSuccess)
			return BOX_FAILED;
		else
			exited = true;
	}
	if (!exited)
		return BOX_RUNNING;
	*e = cudaStreamSynchronize(box->stream);
	if (*e != cudaSuccess)
		return BOX_FAILED;
	return __atomic_load_n(&box->mb->done, __ATOMIC_ACQUIRE) >= seq ? BOX_DONE : BOX_GONE;
}

/* Spins until box's kernel has read bell (it writes the sequence number of each bell it
 * reads to taken): true; false once it has finished that batch or returned, or after a long
 * spin (a slow device: the caller then waits for done as usual). */
static bool box_until_taken(pk_box *box, uint64_t bell)
{
	uint64_t seq = TA_PK_BELL_SEQ(bell);
	for (unsigned long spin = 0; spin < (1ul << 16); spin++) {
		if (__atomic_load_n(&box->mb->taken, __ATOMIC_ACQUIRE) >= seq)
			return true;
		if (__atomic_load_n(&box->mb->done, __ATOMIC_ACQUIRE) >= seq ||
		    __atomic_load_n(&box->mb->exited, __ATOMIC_ACQUIRE) == box->epoch)
			return false;
		spin_pause();
	}
	return false;
}

/* ---- the lead's resident kernel ---- */

/* Stops the lead's running persistent kernel and waits until it has returned. The caller
 * has the batch role (the leader, or a holder that took the role) and saw pk_on; without
 * batch.mu. */
static void pk_stop(ta_cuda_backend *be)
{
	box_stop(be, &be->batch.box);
}

/* Holds the persistent kernels off (the lead's and the lanes'): returns once none runs
 * (stopping each after its batch in flight, if any), and no batch launches one until
 * pk_release. */
void pk_hold(ta_cuda_backend *be)
{
	cuda_batcher *b = &be->batch;
	if (!be->pk_ready)
		return;
	pthread_mutex_lock(&b->mu);
	b->holds++;
	while (b->pk_on) {
		if (!b->running) {
			/* no leader: take the batch role, stop the kernel, hand the role on */
			b->running = true;
			pthread_mutex_unlock(&b->mu);
			pk_stop(be);
			pthread_mutex_lock(&b->mu);
			b->pk_on = false;
			pthread_cond_broadcast(&b->pk_cv);
			batch_pass_lead(b, NULL);
			break;
		}
		/* the leader stops it after its batch (it sees holds) */
		pthread_cond_wait(&b->pk_cv, &b->mu);
	}
	pthread_mutex_unlock(&b->mu);
	lanes_hold(be);
}

/* Ends a pk_hold. */
void pk_release(ta_cuda_backend *be)
{
	cuda_batcher *b = &be->batch;
	if (!be->pk_ready)
		return;
	lanes_release(be);
	pthread_mutex_lock(&b->mu);
	b->holds--;
	pthread_mutex_unlock(&b->mu);
}

/* Waits for the lead's persistent kernel to report batch seq done. Sets *gone when the
 * kernel returned without taking it (idle or life time over). Returns the CUDA error of a
 * kernel that failed. */
static cudaError_t pk_wait(ta_cuda_backend *be, uint64_t seq, bool *gone)
{
	*gone = false;
	for (unsigned long spin = 1;; spin++) {
		cudaError_t e = cudaSuccess;
		switch (box_poll(&be->batch.box, seq, &e)) {
		case BOX_DONE:
			return cudaSuccess;
		case BOX_GONE:
			*gone = true;
			return cudaSuccess;
		case BOX_FAILED:
			return e;
		case BOX_RUNNING:
			break;
		}
		if (spin > (1ul << 16)) /* long: a slow device (a tool), give the CPU away */
			sched_yield();
		else
			spin_pause();
	}
}

/* Launches the lead's persistent kernel, to take every bell but prev. Leader only. */
static ta_status pk_launch(ta_cuda_backend *be, uint64_t prev, ta_error *err)
{
	cuda_batcher *b = &be->batch;
	ta_status st = box_launch(be, &b->box, prev, err);
	if (st == TA_OK)
		pk_set_on(b, true);
	return st;
}

/* Rings the lead's bell for the batch written into area slot (units 16-byte units),
 * launching the kernel when none runs; sets *bell and *prev (the bell before it). Leader
 * only, without batch.mu. */
static ta_status pk_ring(ta_cuda_backend *be, uint32_t units, int slot, uint64_t *bell,
                         uint64_t *prev, ta_error *err)
{
	cuda_batcher *b = &be->batch;
	*bell = box_ring(&b->box, units, slot, prev);
	pthread_mutex_lock(&b->mu);
	bool on = b->pk_on;
	pthread_mutex_unlock(&b->mu);
	return on ? TA_OK : pk_launch(be, *prev, err);
}

/* Waits until the persistent kernel has run the batch of bell (rung after prev),
 * launching another when the one running returned without taking it. Leader only,
 * without batch.mu. */
static ta_status pk_await(ta_cuda_backend *be, uint64_t bell, uint64_t prev, ta_error *err)
{
	cuda_batcher *b = &be->batch;
	for (int tries = 0; tries < 3; tries++) {
		bool gone = false;
		cudaError_t e = pk_wait(be, TA_PK_BELL_SEQ(bell), &gone);
		if (e != cudaSuccess) {
			pk_set_on(b, false);
			return be_fail(be, e, "running the persistent batch kernel", err);
		}
		if (!gone) {
			pthread_mutex_lock(&b->mu);
			b->pk_batches++;
			pthread_mutex_unlock(&b->mu);
			return TA_OK;
		}
		pk_set_on(b, false); /* it returned before our bell: launch another */
		ta_status st = pk_launch(be, prev, err);
		if (st != TA_OK)
			return st;
	}
	return ta_error_set(err, TA_INTERNAL,
	                    "cuda backend: the persistent batch kernel returned three times "
	                    "without taking a batch");
}

bool batch_prepare(ta_cuda_backend *be, pk_box *box, batch_job *job, bool pk_ok, bool launch_ok)
{
	cuda_batcher *b = &be->batch;
	size_t n_waits = job->n_waits, n_items = 0, max_elems = 0, n_olds = 0;
	for (batch_wait *w = job->waits; w; w = w->next)
		for (int i = 0; i < w->n; i++) {
			n_items++;
			max_elems += (size_t)wait_count(w, i);
			if (wait_want_old(w, i))
				n_olds += (size_t)wait_count(w, i);
		}
	/* the persistent kernel's area: head, chains, items, elements (16-byte sections) */
	size_t pk_items_off = align16(sizeof(ta_pk_head) + n_waits * sizeof(ta_batch_chain));
	size_t pk_elems_off = pk_items_off + align16(n_items * sizeof(ta_batch_item));
	job->t[0] = b->trace ? now_ns() : 0;
	job->pk = pk_ok && n_waits <= TA_PK_CHAINS && n_olds <= TA_PK_OLDS &&
	          pk_area_bytes(n_waits, n_items, max_elems) <= TA_PK_DESC_BYTES;
	if (!job->pk && !launch_ok)
		return false; /* nothing done: prepared later, when no batch runs */
	job->failed_early = false;
	job->n_elems = 0;
	job->st = be_enter(be, &job->err);
	if (job->st == TA_OK && !job->pk)
		job->st =
		    batch_reserve(be, batch_bytes(n_waits, n_items, max_elems, n_olds), &job->err);
	if (job->st != TA_OK) {
		for (batch_wait *w = job->waits; w; w = w->next)
			for (int i = 0; i < w->n; i++) {
				w->calls[i].status = job->st;
				*w->calls[i].err = job->err;
			}
		job->failed_early = true;
		return true;
	}
	ta_batch_chain *chains;
	ta_batch_item *items;
	ta_batch_elem *elems;
	uint64_t *olds;
	unsigned char *area = NULL;
	if (job->pk) {
		job->slot = box->slot;
		box->slot ^= 1;
		area = box_area(box, job->slot);
		chains = (ta_batch_chain *)(area + sizeof(ta_pk_head));
		items = (ta_batch_item *)(area + pk_items_off);
		elems = (ta_batch_elem *)(area + pk_elems_off);
		olds = box_olds(box, job->slot);
	} else {
		chains = (ta_batch_chain *)b->buf;
		items = (ta_batch_item *)(b->buf + align_up(n_waits * sizeof *chains));
		elems =
		    (ta_batch_elem *)((unsigned char *)items + align_up(n_items * sizeof *items));
		olds = (uint64_t *)((unsigned char *)elems + align_up(max_elems * sizeof *elems));
	}
	job->chains = chains;
	job->items = items;
	job->elems = elems;
	job->olds = olds;
	uint32_t ci = 0, ii = 0, ei = 0, oi = 0;
	for (batch_wait *w = job->waits; w; w = w->next, ci++) {
		chains[ci].first_item = ii;
		chains[ci].n_items = 0;
		if (w->next) /* the next caller's block, fetched while this one is copied */
			__builtin_prefetch(w->next);
		for (int i = 0; i < w->n; i++) {
			ta_apply_call *c = &w->calls[i];
			const batch_pre *pre = w->pre ? &w->pre[i] : NULL;
			bool want_old = wait_want_old(w, i);
			uint64_t skipped = 0, applied = 0, outside = 0;
			items[ii].first = ei;
			/* a fence orders this request before the next one for other observers;
			 * two relaxed requests promise no such order (their warp barrier still
			 * orders them for the chain itself), so none between those */
			bool next_relaxed = i + 1 < w->n && wait_sem(w, i + 1) == TA_SEM_RELAXED;
			items[ii].fence = wait_sem(w, i) == TA_SEM_RELAXED && next_relaxed ? 0u
			                  : wait_scope(w, i) == TA_SCOPE_SYS               ? 2u
			                                                                   : 1u;
			items[ii].pad = 0;
			if (pre && pre->ok) { /* resolved by its loop (apply_async) */
				memcpy(&elems[ei], pre->elems, pre->n * sizeof(*elems));
				for (uint32_t e = 0; want_old && e < pre->n; e++)
					elems[ei + e].out += oi;
				ei += pre->n;
				skipped = pre->skipped;
				applied = pre->n;
			} else {
				int64_t n =
				    resolve_call(c, &elems[ei], oi, olds, &skipped, &outside);
				ei += (uint32_t)n;
				applied = (uint64_t)n;
			}
			items[ii].count = ei - items[ii].first;
			ii++;
			chains[ci].n_items++;
			c->result->skipped = skipped;
			c->result->applied = applied;
			c->status = TA_OK;
			if (outside)
				c->status =
				    ta_error_set(c->err, TA_INTERNAL,
				                 "cuda backend: %llu elements resolved outside the "
				                 "tile and were not applied (inconsistent plan)",
				                 (unsigned long long)outside);
			if (want_old)
				oi += (uint32_t)wait_count(w, i);
		}
	}
	job->n_elems = ei;
	if (job->pk) {
		ta_pk_head *head = (ta_pk_head *)area;
		head->n_chains = (uint32_t)n_waits;
		head->items_off = (uint32_t)pk_items_off;
		head->elems_off = (uint32_t)pk_elems_off;
		head->pad = 0;
		job->units = (uint32_t)((pk_elems_off + ei * sizeof *elems + 15u) / 16u);
	}
	if (b->trace)
		job->t[1] = job->t[2] = now_ns();
	return true;
}

/* Starts a prepared batch: rings the persistent kernel's bell, or launches the batch
 * kernel. Leader only, without batch.mu. */
static void batch_start(ta_cuda_backend *be, batch_job *job)
{
	cuda_batcher *b = &be->batch;
	if (job->failed_early || job->n_elems == 0)
		return;
	if (job->pk) {
		job->st = pk_ring(be, job->units, job->slot, &job->bell, &job->prev, &job->err);
		if (b->trace)
			job->t[2] = now_ns();
		return;
	}
	job->st = ta_cuda_launch_batch(job->chains, (uint32_t)job->n_waits, job->items, job->elems,
	                               job->olds, b->stream, &job->err);
	if (b->trace)
		job->t[2] = now_ns();
}

/* Waits for a started batch to finish. Leader only, without batch.mu. */
static void batch_await(ta_cuda_backend *be, batch_job *job)
{
	cuda_batcher *b = &be->batch;
	if (job->failed_early || job->n_elems == 0)
		return;
	if (job->pk) {
		if (job->st == TA_OK)
			job->st = pk_await(be, job->bell, job->prev, &job->err);
	} else {
		cudaError_t e = cudaStreamSynchronize(b->stream);
		if (job->st == TA_OK && e != cudaSuccess)
			job->st = be_fail(be, e, "running the batch kernel", &job->err);
		else if (e != cudaSuccess)
			be_fail(be, e, "finishing a failed batch launch", NULL);
	}
	if (b->trace)
		job->t[3] = now_ns();
}

void batch_finish(ta_cuda_backend *be, batch_job *job, bool lead)
{
	cuda_batcher *b = &be->batch;
	if (job->failed_early)
		return;
	uint32_t oi = 0;
	for (batch_wait *w = job->waits; w; w = w->next)
		for (int i = 0; i < w->n; i++) {
			ta_apply_call *c = &w->calls[i];
			const ta_plan *p = c->plan;
			if (job->st != TA_OK) {
				c->status = job->st;
				*c->err = job->err;
				c->result->skipped = 0;
				c->result->applied = 0;
			} else if (wait_want_old(w, i)) {
				size_t es = ta_dtype_size(p->dtype);
				for (int64_t k = 0; k < p->count;
				     k++) /* little-endian: low bytes */
					memcpy((unsigned char *)p->old_out + k * (int64_t)es,
					       &job->olds[oi + k], es);
			}
			if (wait_want_old(w, i))
				oi += (uint32_t)wait_count(w, i);
		}
	if (lead && b->trace && job->n_elems > 0) {
		int way = job->pk ? 1 : 0;
		b->tr_batches[way]++;
		b->tr_chains[way] += job->n_waits;
		b->tr_elems[way] += job->n_elems;
		b->tr_resolve_ns[way] += job->t[1] - job->t[0];
		b->tr_start_ns[way] += job->t[2] - job->t[1];
		b->tr_wait_ns[way] += job->t[3] - job->t[2];
		b->tr_finish_ns[way] += now_ns() - job->t[3];
	}
}

void async_complete(cuda_batcher *b, batch_wait *x)
{
	if (b->trace && x->tr_t[0] != 0) {
		uint64_t now = now_ns();
		__atomic_fetch_add(&b->tr_async_chains, 1ull, __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->tr_queue_ns, x->tr_t[1] - x->tr_t[0], __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->tr_flight_ns, x->tr_t[2] - x->tr_t[1], __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->tr_hand_ns, now - x->tr_t[2], __ATOMIC_RELAXED);
	}
	for (int i = 0; i < x->n; i++)
		x->orig[i]->status = x->calls[i].status;
	x->done_fn(x->done_arg);
	free(x);
}

void take_waits(batch_wait **head, batch_wait **tail, batch_job *job, bool fit_pk, int pk_max)
{
	batch_wait *first = *head, *last = NULL;
	size_t n_waits = 0, items = 0, elems = 0, olds = 0;
	size_t max_chains = fit_pk ? (size_t)pk_max : (size_t)TA_CUDA_BATCH_CHAINS;
	for (batch_wait *x = *head; x; x = x->next) {
		size_t ne = 0, no = 0;
		for (int i = 0; i < x->n; i++) {
			ne += (size_t)wait_count(x, i);
			if (wait_want_old(x, i))
				no += (size_t)wait_count(x, i);
		}
		if (n_waits > 0 && (n_waits >= max_chains || elems + ne > TA_CUDA_BATCH_ELEMS ||
		                    (fit_pk && (olds + no > TA_PK_OLDS ||
		                                pk_area_bytes(n_waits + 1, items + (size_t)x->n,
		                                              elems + ne) > TA_PK_DESC_BYTES))))
			break;
		n_waits++;
		items += (size_t)x->n;
		elems += ne;
		olds += no;
		last = x;
	}
	*head = last->next;
	if (!*head)
		*tail = NULL;
	last->next = NULL;
	job->waits = first;
	job->n_waits = n_waits;
}

/* Takes the next batch's waits off the queue into job (take_waits; the persistent kernel's
 * limits when it may be used: it exists and nothing holds it off, and is on). Under
 * batch.mu; the queue is not empty. */
static void batch_take(cuda_batcher *b, batch_job *job, bool pk_usable)
{
	take_waits(&b->head, &b->tail, job, pk_usable && b->pk_max > 0, b->pk_max);
}

/* Marks a finished batch's callers done: posts the waiting ones (but self) and returns the
 * asynchronous ones as a list for async_complete. Under batch.mu. */
static batch_wait *batch_done(cuda_batcher *b, batch_job *job, batch_wait *self)
{
	b->batches++;
	batch_wait *async_head = NULL, **async_tail = &async_head;
	for (batch_wait *x = job->waits; x;) {
		batch_wait *nx = x->next; /* x may return (and vanish) once posted */
		b->batched += (unsigned long long)x->n;
		x->done = true;
		if (x->done_fn) {
			if (b->trace) { /* taken when its batch was prepared; done seen */
				x->tr_t[1] = job->t[0];
				x->tr_t[2] = job->t[3];
			}
			x->done_next = NULL;
			*async_tail = x;
			async_tail = &x->done_next;
		} else if (x != self) {
			sem_post(&x->wake);
		}
		x = nx;
	}
	return async_head;
}

/* Completes a list from batch_done. Without batch.mu. */
static void batch_complete_async(cuda_batcher *b, batch_wait *async_head)
{
	for (batch_wait *x = async_head; x;) {
		batch_wait *nx = x->done_next; /* x is freed below */
		async_complete(b, x);
		x = nx;
	}
}

/* Hands a list from batch_done to the completion thread (which completes lists in the order
 * handed); false when it does not run. Without batch.mu. */
static bool batch_hand_over(cuda_batcher *b, batch_wait *async_head)
{
	if (!b->done_started)
		return false;
	batch_wait *last = async_head;
	while (last->done_next)
		last = last->done_next;
	pthread_mutex_lock(&b->done_mu);
	if (b->done_tail)
		b->done_tail->done_next = async_head;
	else
		__atomic_store_n(&b->done_head, async_head, __ATOMIC_RELEASE);
	b->done_tail = last;
	bool wake = b->done_idle; /* a system call only when it sleeps */
	pthread_mutex_unlock(&b->done_mu);
	if (wake)
		pthread_cond_signal(&b->done_cv);
	return true;
}

/* How long the completion thread spins for the next list before it sleeps, unless
 * TILEATOM_CUDA_DONE_SPIN_US says otherwise: under load the next list comes within a
 * batch's time (about 10 us), and a sleeping thread costs the lead thread a system call and
 * the batch's callers the wake-up (one H200, 50x16: done seen to completed 20.4 -> 11.6 us
 * a chain, doc/GPU-RESULTS.md). */
#define TA_CUDA_DONE_SPIN_US_DEFAULT 30

/* The completion thread: completes what batch_hand_over queues, until stopped with nothing
 * left. */
static void *done_main(void *arg)
{
	cuda_batcher *b = (cuda_batcher *)arg;
	(void)pthread_setname_np(pthread_self(), "ta-cuda-done"); /* top -H; a convenience */
	pthread_mutex_lock(&b->done_mu);
	for (;;) {
		if (!b->done_head && !b->done_stopping && b->done_spin_ns > 0) {
			/* a while without a system call on either side: the next batch's list
			 * usually comes within a batch's time */
			pthread_mutex_unlock(&b->done_mu);
			uint64_t until = now_ns() + b->done_spin_ns;
			for (unsigned i = 1; !__atomic_load_n(&b->done_head, __ATOMIC_ACQUIRE);
			     i++) {
				spin_pause();
				if (i % 64 == 0 && now_ns() > until)
					break;
			}
			pthread_mutex_lock(&b->done_mu);
		}
		while (!b->done_head && !b->done_stopping) {
			b->done_idle = true;
			pthread_cond_wait(&b->done_cv, &b->done_mu);
			b->done_idle = false;
		}
		batch_wait *list = b->done_head;
		if (!list)
			break; /* stopping, nothing left */
		b->done_head = b->done_tail = NULL;
		pthread_mutex_unlock(&b->done_mu);
		batch_complete_async(b, list);
		pthread_mutex_lock(&b->done_mu);
	}
	pthread_mutex_unlock(&b->done_mu);
	return NULL;
}

/* Runs one batch as the leader (self: the calling waiting caller; NULL for the lead thread):
 * gathers the queue (after the batch window), runs it, completes each of its callers (posts
 * the waiting ones, calls the asynchronous ones' done functions) and passes the lead on.
 * The lead thread goes on while more is queued and the batches go to the persistent
 * kernel: it prepares the next batch (in the other area) while the kernel runs the current
 * one, rings it as soon as the kernel has read the current one's bell (else once the
 * current one is done), and only then completes the current one's callers; order is
 * unchanged (the kernel starts a batch only once the one before has finished).
 * Under batch.mu, which it releases meanwhile. */
static void batch_lead(ta_cuda_backend *be, batch_wait *self)
{
	cuda_batcher *b = &be->batch;
	if (b->window_us > 0) {
		pthread_mutex_unlock(&b->mu);
		struct timespec ts = {(time_t)(b->window_us / 1000000u),
		                      (long)(b->window_us % 1000000u) * 1000L};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
		}
		pthread_mutex_lock(&b->mu);
	}
	batch_job jobs[2], *cur = &jobs[0], *next = &jobs[1];
	batch_take(b, cur, be->pk_ready && b->holds == 0);
	bool pk_ok = b->holds == 0 && cur->n_waits <= (size_t)b->pk_max;
	pthread_mutex_unlock(&b->mu);
	(void)batch_prepare(be, &b->box, cur, pk_ok, true);
	batch_start(be, cur);
	for (;;) {
		/* the lead thread: the next batch, prepared while this one runs (only into the
		 * other mailbox area: the launch buffer may move, which stops the kernel) */
		bool more = false, ready = false;
		if (!self && cur->pk && cur->st == TA_OK && !cur->failed_early) {
			pthread_mutex_lock(&b->mu);
			if (b->head && b->holds == 0) {
				batch_take(b, next, be->pk_ready); /* (no hold, above) */
				more = true;
				pk_ok = next->n_waits <= (size_t)b->pk_max;
			}
			pthread_mutex_unlock(&b->mu);
			if (more)
				ready = batch_prepare(be, &b->box, next, pk_ok, false);
		}
		/* once the kernel has read this batch's bell, the next one's may be rung before
		 * this batch is done: the kernel finds it when it polls again, without waiting
		 * for this thread to see done and ring (the batches still run in order); the
		 * wait for that read is part of the wait for done */
		bool early = ready && cur->st == TA_OK && cur->n_elems > 0 &&
		             box_until_taken(&b->box, cur->bell);
		if (early)
			batch_start(be, next);
		batch_await(be, cur);
		if (ready && !early)
			batch_start(be, next); /* runs while this one's outcomes are handed out */
		batch_finish(be, cur, true);
		pthread_mutex_lock(&b->mu);
		batch_wait *async_head = batch_done(b, cur, self);
		pthread_mutex_unlock(&b->mu);
		/* with the next batch waiting, its start does not wait for these wake-ups */
		if (async_head && !(more && batch_hand_over(b, async_head)))
			batch_complete_async(b, async_head);
		if (!more)
			break;
		if (!ready) { /* a launch, now that nothing runs */
			(void)batch_prepare(be, &b->box, next, false, true);
			batch_start(be, next);
		}
		batch_job *t = cur;
		cur = next;
		next = t;
	}
	pthread_mutex_lock(&b->mu);
	if (b->holds > 0 && b->pk_on) {
		/* a caller waits to use the device without the persistent kernel */
		pthread_mutex_unlock(&b->mu);
		pk_stop(be);
		pthread_mutex_lock(&b->mu);
		b->pk_on = false;
		pthread_cond_broadcast(&b->pk_cv);
	}
	/* hand the lead to the oldest caller still queued (perhaps self, when its requests did
	 * not fit this batch) */
	if (self)
		self->lead = false;
	batch_pass_lead(b, self);
}

/* Appends w to the queue. Under batch.mu. */
static void batch_enqueue(cuda_batcher *b, batch_wait *w)
{
	if (b->tail)
		b->tail->next = w;
	else
		b->head = w;
	b->tail = w;
}

/* Queues the calls of w (one caller's requests, in order) and returns once all have run
 * in some batch: as the leader of one or several, or woken by another leader. */
void batch_submit(ta_cuda_backend *be, batch_wait *w)
{
	cuda_batcher *b = &be->batch;
	w->done = false;
	w->lead = false;
	w->next = NULL;
	w->done_fn = NULL;
	w->done_arg = NULL;
	w->orig = NULL;
	w->pre = NULL;                       /* the leader resolves a waiting caller's calls */
	if (sem_init(&w->wake, 0, 0) != 0) { /* cannot happen (pshared 0, value 0) */
		for (int i = 0; i < w->n; i++)
			w->calls[i].status = ta_error_set(w->calls[i].err, TA_INTERNAL,
			                                  "sem_init failed: %s", strerror(errno));
		return;
	}
	pthread_mutex_lock(&b->mu);
	batch_enqueue(b, w);
	if (!b->running) {
		b->running = true;
		w->lead = true;
	}
	for (;;) {
		while (!w->done && !w->lead) {
			pthread_mutex_unlock(&b->mu);
			while (sem_wait(&w->wake) != 0 && errno == EINTR) {
			}
			pthread_mutex_lock(&b->mu);
		}
		if (w->done)
			break;
		batch_lead(be, w);
	}
	pthread_mutex_unlock(&b->mu);
	sem_destroy(&w->wake);
}

void batch_submit_async(ta_cuda_backend *be, batch_wait *w)
{
	cuda_batcher *b = &be->batch;
	w->done = false;
	w->lead = false;
	w->next = NULL;
	w->done_next = NULL;
	w->tr_t[0] = b->trace ? now_ns() : 0;
	pthread_mutex_lock(&b->mu);
	batch_enqueue(b, w);
	if (!b->running) { /* nobody leads: the lead thread does */
		b->running = true;
		b->lead_thread_up = true;
		pthread_cond_signal(&b->lead_cv);
	}
	pthread_mutex_unlock(&b->mu);
}

/* The lead thread: leads a batch whenever the lead comes to an asynchronous caller. */
static void *lead_main(void *arg)
{
	ta_cuda_backend *be = (ta_cuda_backend *)arg;
	cuda_batcher *b = &be->batch;
	(void)pthread_setname_np(pthread_self(), "ta-cuda-lead"); /* top -H; a convenience */
	pthread_mutex_lock(&b->mu);
	for (;;) {
		while (!b->lead_thread_up && !b->lead_stopping)
			pthread_cond_wait(&b->lead_cv, &b->mu);
		if (!b->lead_thread_up)
			break; /* stopping, nothing to lead */
		b->lead_thread_up = false;
		batch_lead(be, NULL);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

/* Starts the lead thread with every signal blocked (they belong to the daemon's main
 * loop). Returns 0 or an errno value. */
static int lead_start(ta_cuda_backend *be)
{
	cuda_batcher *b = &be->batch;
	int rc = pthread_cond_init(&b->lead_cv, NULL);
	if (rc != 0)
		return rc;
	sigset_t all, old;
	sigfillset(&all);
	rc = pthread_sigmask(SIG_SETMASK, &all, &old);
	if (rc == 0) {
		rc = pthread_create(&b->lead_thread, NULL, lead_main, be);
		/* the completion thread: without it the lead thread completes every batch itself */
		int rd = rc != 0 ? rc : pthread_mutex_init(&b->done_mu, NULL);
		if (rd == 0 && (rd = pthread_cond_init(&b->done_cv, NULL)) != 0)
			pthread_mutex_destroy(&b->done_mu);
		if (rd == 0 && (rd = pthread_create(&b->done_thread, NULL, done_main, b)) != 0) {
			pthread_cond_destroy(&b->done_cv);
			pthread_mutex_destroy(&b->done_mu);
		}
		b->done_started = rd == 0;
		if (rc == 0 && rd != 0)
			fprintf(stderr,
			        "tileatom cuda: no completion thread (%s): the lead thread "
			        "completes every batch\n",
			        strerror(rd));
		int rc2 = pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc2 != 0)
			fprintf(stderr, "tileatom cuda: cannot restore the signal mask: %s\n",
			        strerror(rc2));
	}
	if (rc != 0) {
		pthread_cond_destroy(&b->lead_cv);
		return rc;
	}
	b->lead_started = true;
	return 0;
}

bool batch_async_ready(const ta_cuda_backend *be)
{
	return be->batch_ready && be->batch.lead_started;
}

extern "C" void ta_cuda_batch_counts(ta_backend *base, unsigned long long *batches,
                                     unsigned long long *batched)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	pthread_mutex_lock(&be->batch.mu);
	*batches = be->batch.batches;
	*batched = be->batch.batched;
	pthread_mutex_unlock(&be->batch.mu);
}

extern "C" void ta_cuda_set_persistent(ta_backend *base, int max_chains)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	if (!be->pk_ready)
		return;
	if (max_chains < 0)
		max_chains = 0;
	pthread_mutex_lock(&be->batch.mu); /* (the lanes read it without: atomic) */
	__atomic_store_n(&be->batch.pk_max, max_chains < TA_PK_CHAINS ? max_chains : TA_PK_CHAINS,
	                 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&be->batch.mu);
	if (max_chains == 0) { /* stop a running one */
		pk_hold(be);
		pk_release(be);
	}
}

extern "C" void ta_cuda_persistent_counts(ta_backend *base, unsigned long long *batches,
                                          unsigned long long *launches)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	pthread_mutex_lock(&be->batch.mu);
	*batches = be->batch.pk_batches;
	*launches = be->batch.box.epoch;
	pthread_mutex_unlock(&be->batch.mu);
}

/* vtable set_batch_window: how long a leader waits for more requests before a launch. */

void cuda_set_batch_window(ta_backend *base, unsigned usec)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	if (!be->batch_ready)
		return;
	pthread_mutex_lock(&be->batch.mu);
	be->batch.window_us = usec;
	pthread_mutex_unlock(&be->batch.mu);
}

ta_status batcher_init(ta_cuda_backend *be, ta_error *err)
{
	cudaError_t e;
	if (pthread_mutex_init(&be->batch.mu, NULL) == 0) {
		if ((e = cudaStreamCreateWithFlags(&be->batch.stream, cudaStreamNonBlocking)) !=
		    cudaSuccess)
			pthread_mutex_destroy(&be->batch.mu);
		else
			be->batch_ready = true;
	}
	if (!be->batch_ready) {
		return ta_error_set(err, TA_UNAVAILABLE,
		                    "CUDA device %d: cannot set up the batcher", be->device);
	}
	/* before the completion thread starts, which reads it */
	be->batch.done_spin_ns = TA_CUDA_DONE_SPIN_US_DEFAULT * 1000ull;
	const char *spin = getenv("TILEATOM_CUDA_DONE_SPIN_US");
	long spin_us = 0;
	if (spin && *spin) {
		if (!ta_env_count(spin, &spin_us) || spin_us > 1000000)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "TILEATOM_CUDA_DONE_SPIN_US='%s' is not a number of "
			                    "microseconds from 0 to 1000000",
			                    spin);
		be->batch.done_spin_ns = (uint64_t)spin_us * 1000ull;
	}
	int rc = lead_start(be);
	if (rc != 0)
		return ta_error_set(err, TA_UNAVAILABLE,
		                    "CUDA device %d: cannot start the batcher's lead thread: %s",
		                    be->device, strerror(rc));
	/* the persistent kernel's stream and mailbox (mailbox line, area, olds) */
	if (pthread_cond_init(&be->batch.pk_cv, NULL) == 0) {
		unsigned char *mem = NULL;
		e = cudaHostAlloc((void **)&mem, TA_PK_BOX_BYTES, cudaHostAllocMapped);
		if (e == cudaSuccess && (e = box_init(&be->batch.box, mem)) != cudaSuccess)
			cudaFreeHost(mem);
		if (e != cudaSuccess) {
			pthread_cond_destroy(&be->batch.pk_cv);
			return ta_error_set(
			    err, TA_UNAVAILABLE,
			    "CUDA device %d: cannot set up the persistent batch kernel: %s",
			    be->device, cudaGetErrorString(e));
		}
		be->pk_ready = true;
		const char *env = getenv("TILEATOM_CUDA_PERSISTENT");
		be->batch.pk_max = TA_PK_CHAINS_DEFAULT;
		long v = 0;
		if (env && *env) {
			if (!ta_env_count(env, &v)) {
				return ta_error_set(
				    err, TA_INVALID_ARGUMENT,
				    "TILEATOM_CUDA_PERSISTENT='%s' is not a count of chains "
				    "(0 turns the persistent kernel off)",
				    env);
			}
			be->batch.pk_max = v < TA_PK_CHAINS ? (int)v : TA_PK_CHAINS;
		}
		env = getenv("TILEATOM_CUDA_TRACE");
		be->batch.trace = env && strcmp(env, "1") == 0;
		be->batch.box.mb->trace = be->batch.trace;
	} else {
		return ta_error_set(err, TA_INTERNAL, "pthread_cond_init failed");
	}
	const char *lanes = getenv("TILEATOM_CUDA_LANES");
	long n_lanes = TA_CUDA_LANES_DEFAULT;
	if (lanes && *lanes && (!ta_env_count(lanes, &n_lanes) || n_lanes > TA_CUDA_LANES_MAX))
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "TILEATOM_CUDA_LANES='%s' is not a count of lanes from 0 to %d "
		                    "(0: every loop's requests go through the lead thread)",
		                    lanes, TA_CUDA_LANES_MAX);
	return lanes_init(be, (int)n_lanes, err);
}

void batcher_destroy(ta_cuda_backend *be)
{
	if (be->batch.lead_started) { /* nothing is queued: the backend's calls are over */
		pthread_mutex_lock(&be->batch.mu);
		be->batch.lead_stopping = true;
		pthread_cond_signal(&be->batch.lead_cv);
		pthread_mutex_unlock(&be->batch.mu);
		int rc = pthread_join(be->batch.lead_thread, NULL);
		if (rc != 0)
			fprintf(stderr,
			        "tileatom cuda: cannot join the batcher's lead thread: %s\n",
			        strerror(rc));
		pthread_cond_destroy(&be->batch.lead_cv);
		be->batch.lead_started = false;
	}
	if (be->batch.done_started) { /* after the lead thread: nothing more is handed over */
		cuda_batcher *b = &be->batch;
		pthread_mutex_lock(&b->done_mu);
		b->done_stopping = true;
		pthread_cond_signal(&b->done_cv);
		pthread_mutex_unlock(&b->done_mu);
		int rc = pthread_join(b->done_thread, NULL);
		if (rc != 0)
			fprintf(stderr,
			        "tileatom cuda: cannot join the batcher's completion thread: %s\n",
			        strerror(rc));
		pthread_cond_destroy(&b->done_cv);
		pthread_mutex_destroy(&b->done_mu);
		b->done_started = false;
	}
	if (be->pk_ready) {
		cuda_batcher *b = &be->batch;
		lanes_destroy(be);
		for (int way = 0; b->trace && way < 2; way++)
			if (b->tr_batches[way] > 0) {
				double n = (double)b->tr_batches[way] * 1000.0;
				fprintf(stderr,
				        "tileatom cuda trace: %s: %llu batches of %.1f chains and "
				        "%.1f elements; mean us: resolve %.2f, %s %.2f, wait "
				        "%.2f, copy out %.2f\n",
				        way ? "persistent kernel" : "launches", b->tr_batches[way],
				        (double)b->tr_chains[way] / (double)b->tr_batches[way],
				        (double)b->tr_elems[way] / (double)b->tr_batches[way],
				        (double)b->tr_resolve_ns[way] / n,
				        way ? "until rung" : "launch call",
				        (double)b->tr_start_ns[way] / n,
				        (double)b->tr_wait_ns[way] / n,
				        (double)b->tr_finish_ns[way] / n);
			}
		if (b->trace && b->tr_async_chains > 0) {
			double n = (double)b->tr_async_chains * 1000.0;
			fprintf(
			    stderr,
			    "tileatom cuda trace: %llu asynchronous chains; mean us: queued to "
			    "taken %.2f, taken to done seen %.2f, done seen to completed %.2f\n",
			    b->tr_async_chains, (double)b->tr_queue_ns / n,
			    (double)b->tr_flight_ns / n, (double)b->tr_hand_ns / n);
		}
		if (be->batch.pk_on)
			pk_stop(be);
		const volatile uint64_t *g = b->box.mb->tr_ns; /* the kernel has returned */
		if (b->trace && g[TA_PK_TR_N] > 0) {
			double n = (double)g[TA_PK_TR_N] * 1000.0;
			fprintf(
			    stderr,
			    "tileatom cuda trace: persistent kernel on the GPU: %llu batches; mean "
			    "us: done to next bell %.2f, copy %.2f, warp 0's chains %.2f, other "
			    "chains and fences %.2f, done write %.2f\n",
			    (unsigned long long)g[TA_PK_TR_N], (double)g[TA_PK_TR_GAP] / n,
			    (double)g[TA_PK_TR_COPY] / n, (double)g[TA_PK_TR_CHAIN0] / n,
			    (double)g[TA_PK_TR_REST] / n, (double)g[TA_PK_TR_DONE] / n);
		}
		cudaFreeHost(be->batch.box.mem);
		cudaStreamDestroy(be->batch.box.stream);
		pthread_cond_destroy(&be->batch.pk_cv);
	}
	if (be->batch_ready) {
		if (be->batch.buf)
			cudaFreeHost(be->batch.buf);
		cudaStreamDestroy(be->batch.stream);
		pthread_mutex_destroy(&be->batch.mu);
	}
}
