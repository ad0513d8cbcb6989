/* ta_cuda_lanes.cu: the CUDA backend's lanes. A lane is an event loop's own resident kernel,
 * so that the small requests a loop starts (apply_async) go from the loop to the GPU and
 * back with no other thread in between: the loop queues them (lane_submit), and in its polls
 * (poll_async, on every turn while any is out) writes what it queued into its lane's
 * mailbox and rings it, and sees the batch done, copies its old values out and completes
 * its calls (their done functions run on the loop). A thread takes a lane with
 * async_attach (the daemon's loops, when they start) and keeps it until the backend goes.
 * Other threads, calls too large for a mailbox area, and calls queued while a hold keeps
 * the resident kernels off go through the lead (ta_cuda_batcher.cu); pk_hold stops the
 * lanes' kernels as it stops the lead's (lanes_hold). Host code only. */
#include <cuda_runtime.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ta_cuda_backend.h"

ta_status lanes_init(ta_cuda_backend *be, int n, ta_error *err)
{
	cuda_batcher *b = &be->batch;
	b->lanes = NULL;
	b->n_lanes = 0;
	if (n == 0)
		return TA_OK;
	pk_lane *lanes = (pk_lane *)calloc((size_t)n, sizeof(pk_lane));
	if (!lanes)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "CUDA device %d: out of memory for the lanes", be->device);
	int rc = pthread_mutex_init(&b->lanes_mu, NULL);
	if (rc != 0) {
		free(lanes);
		return ta_error_set(err, TA_INTERNAL, "pthread_mutex_init: %s", strerror(rc));
	}
	int made = 0;
	for (; made < n; made++)
		if ((rc = pthread_mutex_init(&lanes[made].mu, NULL)) != 0)
			break;
	unsigned char *mem = NULL;
	cudaError_t e = cudaSuccess;
	if (rc == 0)
		e = cudaHostAlloc((void **)&mem, (size_t)n * TA_PK_BOX_BYTES, cudaHostAllocMapped);
	if (rc != 0 || e != cudaSuccess) {
		for (int i = 0; i < made; i++)
			pthread_mutex_destroy(&lanes[i].mu);
		pthread_mutex_destroy(&b->lanes_mu);
		free(lanes);
		if (rc != 0)
			return ta_error_set(err, TA_INTERNAL, "pthread_mutex_init: %s",
			                    strerror(rc));
		return ta_error_set(err, TA_UNAVAILABLE,
		                    "CUDA device %d: cannot set up the lanes' mailboxes: %s",
		                    be->device, cudaGetErrorString(e));
	}
	b->lanes = lanes;
	b->n_lanes = n;
	b->lanes_mem = mem;
	b->lanes_claimed = 0;
	b->lane_holds = 0;
	return TA_OK;
}

void lanes_destroy(ta_cuda_backend *be)
{
	cuda_batcher *b = &be->batch;
	if (!b->lanes)
		return;
	for (int i = 0; i < b->lanes_claimed; i++) {
		pk_lane *lane = &b->lanes[i];
		if (lane->on) /* nothing rung is left: the backend's calls are over */
			box_stop(be, &lane->box);
		if (lane->stream_ok)
			cudaStreamDestroy(lane->box.stream);
	}
	if (b->trace && b->tr_lane_batches > 0)
		fprintf(stderr,
		        "tileatom cuda trace: lanes: %llu batches of %.1f chains; mean us: rung to "
		        "done seen %.2f\n",
		        b->tr_lane_batches, (double)b->tr_lane_chains / (double)b->tr_lane_batches,
		        (double)b->tr_lane_flight_ns / ((double)b->tr_lane_batches * 1000.0));
	for (int i = 0; i < b->n_lanes; i++)
		pthread_mutex_destroy(&b->lanes[i].mu);
	pthread_mutex_destroy(&b->lanes_mu);
	cudaFreeHost(b->lanes_mem);
	free(b->lanes);
	b->lanes = NULL;
	b->lanes_mem = NULL;
}

pk_lane *lane_mine(ta_cuda_backend *be)
{
	cuda_batcher *b = &be->batch;
	int n = __atomic_load_n(&b->lanes_claimed, __ATOMIC_ACQUIRE);
	if (n == 0)
		return NULL;
	uint64_t me = ta_thread_no();
	for (int i = 0; i < n; i++)
		if (b->lanes[i].owner == me)
			return &b->lanes[i];
	return NULL;
}

bool cuda_async_attach(ta_backend *base)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	cuda_batcher *b = &be->batch;
	if (!be->pk_ready || !b->lanes || !batch_async_ready(be))
		return false;
	if (lane_mine(be))
		return true;
	ta_error err;
	if (be_enter(be, &err) != TA_OK) /* the stream below is made on this device */
		return false;
	bool took = false;
	pthread_mutex_lock(&b->lanes_mu);
	int i = b->lanes_claimed;
	if (i < b->n_lanes) {
		pk_lane *lane = &b->lanes[i];
		cudaError_t e = box_init(&lane->box, b->lanes_mem + (size_t)i * TA_PK_BOX_BYTES);
		if (e == cudaSuccess) {
			lane->stream_ok = true;
			lane->owner = ta_thread_no();
			lane->holds = b->lane_holds; /* a hold in effect now keeps it off too */
			__atomic_store_n(&b->lanes_claimed, i + 1, __ATOMIC_RELEASE);
			took = true;
		} else {
			(void)cudaGetLastError();
			fprintf(stderr, "tileatom cuda: no lane for a loop (its stream: %s)\n",
			        cudaGetErrorString(e));
		}
	}
	pthread_mutex_unlock(&b->lanes_mu);
	return took;
}

void lane_submit(ta_cuda_backend *be, pk_lane *lane, batch_wait *w)
{
	w->next = NULL;
	w->done_next = NULL;
	w->done = false;
	w->lead = false;
	w->tr_t[0] = be->batch.trace ? now_ns() : 0;
	if (lane->tail)
		lane->tail->next = w;
	else
		lane->head = w;
	lane->tail = w;
}

/* Hands the waits of the list at head to the lead (a batch the lane cannot run). */
static void lane_to_lead(ta_cuda_backend *be, batch_wait *head)
{
	for (batch_wait *x = head; x;) {
		batch_wait *nx = x->next; /* x may run (and vanish) once queued */
		batch_submit_async(be, x);
		x = nx;
	}
}

/* Completes lane's finished (or failed) job: old values copied out, each call's outcome
 * and done function. The owner. */
static void lane_complete(ta_cuda_backend *be, pk_lane *lane)
{
	cuda_batcher *b = &be->batch;
	batch_job *job = &lane->job;
	batch_finish(be, job, false);
	uint64_t seen = b->trace ? now_ns() : 0;
	if (b->trace && job->n_elems > 0) {
		__atomic_fetch_add(&b->tr_lane_batches, 1ull, __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->tr_lane_chains, (unsigned long long)job->n_waits,
		                   __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->tr_lane_flight_ns, seen - lane->tr_rung, __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&b->mu);
	b->batches++;
	if (!job->failed_early && job->n_elems > 0 && job->st == TA_OK)
		b->pk_batches++;
	for (batch_wait *x = job->waits; x; x = x->next)
		b->batched += (unsigned long long)x->n;
	pthread_mutex_unlock(&b->mu);
	for (batch_wait *x = job->waits; x;) {
		batch_wait *nx = x->next; /* x is freed below */
		if (b->trace) {           /* rung (or not: its outcome is set), done seen */
			x->tr_t[1] = lane->tr_rung ? lane->tr_rung : seen;
			x->tr_t[2] = seen;
		}
		async_complete(b, x);
		x = nx;
	}
	job->waits = NULL;
	lane->busy = false;
}

/* Starts the next batch of what lane's owner queued: written into its box and rung, or
 * handed to the lead when the lane cannot run it (too large, the persistent kernel off or
 * held off), or completed at once (nothing reaches the device, or it failed). The owner,
 * with no batch of the lane in flight. */
static void lane_start(ta_cuda_backend *be, pk_lane *lane)
{
	cuda_batcher *b = &be->batch;
	batch_job *job = &lane->job;
	int pk_max = __atomic_load_n(&b->pk_max, __ATOMIC_RELAXED);
	if (pk_max == 0) { /* the persistent kernel is switched off: launches, from the lead */
		batch_wait *all = lane->head;
		lane->head = lane->tail = NULL;
		lane_to_lead(be, all);
		return;
	}
	take_waits(&lane->head, &lane->tail, job, true, pk_max);
	lane->tr_rung = 0;
	if (!batch_prepare(be, &lane->box, job, true, false)) {
		lane_to_lead(be, job->waits); /* larger than an area: one launch */
		job->waits = NULL;
		return;
	}
	if (job->failed_early || job->n_elems == 0) {
		lane_complete(be, lane);
		return;
	}
	pthread_mutex_lock(&lane->mu);
	if (lane->holds > 0) { /* the device is held: the lead runs it, without the kernel */
		pthread_mutex_unlock(&lane->mu);
		lane_to_lead(be, job->waits);
		job->waits = NULL;
		return;
	}
	job->bell = box_ring(&lane->box, job->units, job->slot, &job->prev);
	ta_status st = TA_OK;
	if (!lane->on) {
		st = box_launch(be, &lane->box, job->prev, &job->err);
		lane->on = st == TA_OK;
	}
	pthread_mutex_unlock(&lane->mu);
	if (b->trace)
		lane->tr_rung = now_ns();
	lane->busy = true;
	if (st != TA_OK) {
		job->st = st;
		lane_complete(be, lane);
	}
}

/* Looks at lane's batch in flight: true once it is finished and completed. A kernel that
 * returned without taking its bell (its idle or life time over, or stopped by a hold) is
 * launched again with the bell rung again, once no hold keeps it off. The owner. */
static bool lane_reap(ta_cuda_backend *be, pk_lane *lane)
{
	batch_job *job = &lane->job;
	cudaError_t e = cudaSuccess;
	switch (box_poll(&lane->box, TA_PK_BELL_SEQ(job->bell), &e)) {
	case BOX_RUNNING:
		return false;
	case BOX_DONE:
		break;
	case BOX_GONE: {
		ta_status st = TA_OK;
		pthread_mutex_lock(&lane->mu);
		lane->on = false;
		if (lane->holds == 0) {
			/* a hold's stop may have overwritten the bell: ring it again */
			__atomic_store_n(&lane->box.mb->bell, job->bell, __ATOMIC_RELEASE);
			lane->box.last_bell = job->bell;
			st = box_launch(be, &lane->box, job->prev, &job->err);
			lane->on = st == TA_OK;
		}
		pthread_mutex_unlock(&lane->mu);
		if (st == TA_OK)
			return false; /* (or, held: tried again on a later poll) */
		job->st = st;
		break;
	}
	case BOX_FAILED:
		pthread_mutex_lock(&lane->mu);
		lane->on = false;
		pthread_mutex_unlock(&lane->mu);
		job->st = be_fail(be, e, "running a loop's persistent batch kernel", &job->err);
		break;
	}
	lane_complete(be, lane);
	return true;
}

bool cuda_poll_async(ta_backend *base)
{
	ta_cuda_backend *be = (ta_cuda_backend *)base;
	pk_lane *lane = lane_mine(be);
	if (!lane)
		return false;
	if (lane->busy && !lane_reap(be, lane))
		return true;
	if (lane->head)
		lane_start(be, lane);
	return lane->busy || lane->head;
}

/* One pause of a spin-wait. */
static inline void lane_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Spins until lane's kernel has taken its last bell, finished it or returned (a hold's
 * stop must not overwrite a bell not yet read). Under lane->mu, its kernel on. Not
 * box_poll or the lead's box_until_taken: this runs on the holder's thread while the owner
 * may poll the same box (box_poll's count is the owner's), and it must not give up. */
static void lane_until_taken(pk_lane *lane)
{
	pk_box *box = &lane->box;
	uint64_t seq = box->seq;
	for (unsigned long spin = 1;; spin++) {
		if (__atomic_load_n(&box->mb->taken, __ATOMIC_ACQUIRE) >= seq ||
		    __atomic_load_n(&box->mb->done, __ATOMIC_ACQUIRE) >= seq ||
		    __atomic_load_n(&box->mb->exited, __ATOMIC_ACQUIRE) == box->epoch)
			return;
		if (spin % 4096 == 0) { /* a kernel that failed reads nothing: ask its stream */
			cudaError_t e = cudaStreamQuery(box->stream);
			if (e != cudaErrorNotReady)
				return; /* finished or failed: box_stop's synchronisation reports it
				         */
			(void)cudaGetLastError();
		}
		if (spin > (1ul << 16))
			sched_yield();
		else
			lane_pause();
	}
}

void lanes_hold(ta_cuda_backend *be)
{
	cuda_batcher *b = &be->batch;
	if (!b->lanes)
		return;
	pthread_mutex_lock(&b->lanes_mu);
	b->lane_holds++;
	for (int i = 0; i < b->lanes_claimed; i++) {
		pk_lane *lane = &b->lanes[i];
		pthread_mutex_lock(&lane->mu);
		lane->holds++;
		if (lane->on) {
			lane_until_taken(lane);
			box_stop(be, &lane->box);
			lane->on = false;
		}
		pthread_mutex_unlock(&lane->mu);
	}
	pthread_mutex_unlock(&b->lanes_mu);
}

void lanes_release(ta_cuda_backend *be)
{
	cuda_batcher *b = &be->batch;
	if (!b->lanes)
		return;
	pthread_mutex_lock(&b->lanes_mu);
	b->lane_holds--;
	for (int i = 0; i < b->lanes_claimed; i++) {
		pk_lane *lane = &b->lanes[i];
		pthread_mutex_lock(&lane->mu);
		lane->holds--;
		pthread_mutex_unlock(&lane->mu);
	}
	pthread_mutex_unlock(&b->lanes_mu);
}
