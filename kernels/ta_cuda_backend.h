/* ta_cuda_backend.h: the CUDA backend's internal state (kernels/ta_cuda.cu) shared with its
 * batcher (kernels/ta_cuda_batcher.cu): the staging slots, the batcher and its persistent
 * kernel, the backend object, and the few functions each side calls of the other. C++,
 * included by those two files only. */
#ifndef TA_CUDA_BACKEND_H
#define TA_CUDA_BACKEND_H

#include <cuda_runtime.h>

#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>

#include "ta_backend.h"
#include "ta_cuda_private.h"

/* Staging slots, one per concurrent apply. */
#define TA_CUDA_SLOTS 4
/* Pinned staging buffers over this size are released after the call that grew them. */
#define TA_CUDA_KEEP_BYTES (64u << 20)
/* Device staging buffers over this size are released after the call that grew them (a
 * 2^24-key histogram, 64 MiB of keys, keeps its buffer from one request to the next). */
#define TA_CUDA_KEEP_DEV_BYTES (256u << 20)
/* Operands (and old values) of at least this many bytes that lie in pinned or registered
 * host memory (a client's shared buffer, daemon/shmbuf.c) are copied by DMA straight
 * from (to) there instead of through the pinned staging buffer. */
#define TA_CUDA_DIRECT_MIN (256u << 10)
/* Alignment of each array in a staging buffer. */
#define TA_CUDA_ALIGN 256u
/* Pageable operands of at least this many bytes are staged chunk by chunk, each chunk's
 * DMA queued as soon as it is in the pinned buffer (ta_cuda.cu, stage_operand). */
#define TA_CUDA_PIPE_MIN (1u << 20)
/* ... in chunks of this many bytes. */
#define TA_CUDA_PIPE_CHUNK (2u << 20)
/* Counters a kernel keeps: skipped, applied, resolved outside the tile. */
#define TA_CUDA_COUNTERS 3
/* Stages of an apply the trace times (ta_cuda_backend's tr_*_ns). */
#define TA_CUDA_TRACE_STAGES 5

/* One staging slot: a stream and its buffers. */
struct cuda_slot {
	cudaStream_t stream;          /* non-blocking stream of this slot */
	unsigned char *host;          /* pinned host staging buffer */
	size_t host_cap;              /* bytes at host */
	unsigned char *dev;           /* device staging buffer */
	size_t dev_cap;               /* bytes at dev */
	bool busy;                    /* taken by an apply in progress */
	unsigned long long *dev_cnt;  /* the kernels' counters in device memory: zeroed when
	                                 the slot is made (and after a failed call), never
	                                 before a launch; a call's counts are the difference */
	unsigned long long *host_cnt; /* pinned: where a call copies them back */
	unsigned long long cnt_seen[TA_CUDA_COUNTERS]; /* their values after the last call */
};

/* Requests of one element each at most this many go to the batcher (larger ones launch
 * their own kernel, which spreads them over the whole GPU). */
#define TA_CUDA_BATCH_ITEM_MAX 1024
/* A batch takes callers until it holds this many elements (at least one caller). */
#define TA_CUDA_BATCH_ELEMS (1u << 16)
/* ... or this many callers (chains: one warp each). */
#define TA_CUDA_BATCH_CHAINS (1u << 13)

/* A call's elements resolved ahead of its batch by the thread that queues it (an event
 * loop, in parallel with the others), so that the leader, the one serial step, only copies
 * them into the batch. */
typedef struct batch_pre {
	ta_batch_elem *elems; /* its descriptors (old-value slots numbered from 0) */
	uint32_t n;           /* how many */
	bool ok;              /* resolved: else the leader resolves the call itself */
	uint64_t skipped;     /* elements skipped (bounds checking) */
	/* the plan's facts the leader needs, copied here by the submitting thread so that the
	 * leader reads one block per caller rather than each plan */
	int64_t count;  /* plan->count */
	bool want_old;  /* plan->want_old */
	ta_sem sem;     /* plan->sem */
	ta_scope scope; /* plan->scope */
} batch_pre;

/* One caller's requests (a chain, run in order) going through a batch: a thread that waits
 * for them (done_fn NULL), or an asynchronous call (apply_async) that nobody waits for:
 * whichever thread runs its batch calls done_fn(done_arg) and frees it. Calls that come with
 * a status other than TA_OK (they failed their checks) are left as they are. */
struct batch_wait {
	ta_apply_call *calls;       /* the requests, in order */
	int n;                      /* number of calls */
	bool done;                  /* every call has its outcome */
	bool lead;                  /* this caller runs the next batch (waiting callers) */
	sem_t wake;                 /* posted when done or made the leader (waiting callers) */
	batch_wait *next;           /* pending queue link */
	void (*done_fn)(void *arg); /* asynchronous: called once every call has its outcome */
	void *done_arg;             /* done_fn's argument */
	ta_apply_call **orig;       /* asynchronous: the caller's call of each of calls (calls
	                               are copies of those that passed their checks), where
	                               each status goes back */
	batch_wait *done_next;      /* asynchronous: link of the list a leader completes */
	batch_pre *pre;             /* asynchronous: each call's elements resolved by the
	                               submitting thread (batch_pre_resolve), or NULL */
	uint64_t tr_t[3];           /* trace, asynchronous: queued, taken by a leader, its
	                               batch's done seen (CLOCK_MONOTONIC ns) */
};

/* Bytes of one resident kernel's mapped pinned memory: its mailbox, then two descriptor
 * areas (TA_PK_DESC_BYTES each), then two old-value arrays (TA_PK_OLDS slots each). */
#define TA_PK_BOX_BYTES (sizeof(ta_pk_mailbox) + 2 * (TA_PK_DESC_BYTES + TA_PK_OLDS * 8))
/* Threads (event loops) with a lane of their own on one device unless TILEATOM_CUDA_LANES
 * says otherwise (0 to TA_CUDA_LANES_MAX); more share the lead. */
#define TA_CUDA_LANES_DEFAULT 16
/* ... at most. */
#define TA_CUDA_LANES_MAX 64

/* The host side of one resident kernel (k_persistent, ta_cuda_batch.cuh): the lead's
 * (cuda_batcher.box) or an event loop's (pk_lane.box). Only its owner rings it. */
typedef struct pk_box {
	cudaStream_t stream; /* its stream (non-blocking; never one a launch waits on) */
	unsigned char *mem;  /* mapped pinned memory of TA_PK_BOX_BYTES (see there) */
	ta_pk_mailbox *mb;   /* the mailbox (at mem) */
	int slot;            /* the area and olds the next batch uses */
	uint64_t seq;        /* sequence number of the latest bell */
	uint64_t last_bell;  /* the bell the mailbox holds */
	uint64_t epoch;      /* its launches so far: the current one's epoch */
	unsigned long polls; /* box_poll calls (the stream is asked for errors now and then) */
} pk_box;

/* One batch from its descriptors to its outcomes (batch_prepare, batch_start, batch_await,
 * batch_finish): the lead thread prepares the next batch while the persistent kernel runs
 * this one; a lane (pk_lane) runs one at a time. */
typedef struct batch_job {
	batch_wait *waits;      /* its callers' chains (linked through next) */
	size_t n_waits;         /* how many */
	bool pk;                /* through the persistent kernel (else one launch) */
	int slot;               /* pk: the mailbox area and olds it uses (0 or 1) */
	uint32_t units;         /* pk: 16-byte units of its descriptors */
	uint32_t n_elems;       /* descriptors (0: nothing reaches the device) */
	uint64_t bell;          /* pk: its bell, once rung */
	uint64_t prev;          /* pk: the bell before it */
	ta_batch_chain *chains; /* launch: its chains, items and elements in the buffer */
	ta_batch_item *items;   /* (see chains) */
	ta_batch_elem *elems;   /* (see chains) */
	uint64_t *olds;         /* where its old values arrive */
	ta_status st;           /* the batch's outcome so far */
	ta_error err;           /* its error */
	bool failed_early;      /* st failed before any descriptor: the calls have it already */
	uint64_t t[4];          /* trace: start, resolved, started, finished waiting */
} batch_job;

/* An event loop's own resident kernel (ta_cuda_lanes.cu): the thread that took it (owner,
 * ta_backend async_attach) queues its asynchronous calls here, writes them into the box,
 * rings it and sees them done in its own polls (poll_async), with no other thread in
 * between; pk_hold stops its kernel too. */
typedef struct pk_lane {
	pk_box box;              /* its resident kernel */
	uint64_t owner;          /* the number of the thread it belongs to (ta_cuda_lanes.cu:
	                            set before cuda_batcher.lanes_claimed counts it) */
	bool stream_ok;          /* box.stream exists */
	pthread_mutex_t mu;      /* guards on and holds (the owner rings under it) */
	bool on;                 /* its kernel launched and not yet reaped (under mu) */
	int holds;               /* pk_holds in effect: no bell rung, kernel stopped (mu) */
	batch_wait *head, *tail; /* queued by the owner, not yet in a batch (owner only) */
	batch_job job;           /* the batch rung (owner only) */
	bool busy;               /* job is rung and not yet finished (owner only) */
	uint64_t tr_rung;        /* trace: when job was rung (owner only) */
} pk_lane;

/* The batcher: callers queue their small requests; one that finds no batch running becomes
 * the leader, takes everything queued (after the batch window), runs it as one launch,
 * wakes each of its callers and hands the lead to the oldest caller queued meanwhile,
 * whose requests go in the next batch. An asynchronous caller (apply_async) has no thread
 * to lead with: the batcher's own lead thread takes the lead in its place. */
struct cuda_batcher {
	pthread_mutex_t mu;      /* guards the fields up to window_us, and the counts */
	batch_wait *head, *tail; /* queued, not yet taken by a leader */
	bool running;            /* a leader is building or running a batch */
	pthread_cond_t lead_cv;  /* signals the lead thread: lead_thread_up or stopping */
	bool lead_thread_up;     /* the lead thread is to lead the next batch */
	bool lead_stopping;      /* batcher_destroy asked the lead thread to exit */
	bool lead_started;       /* the lead thread runs (lead_cv exists) */
	pthread_t lead_thread;   /* leads for asynchronous callers */
	/* the completion thread: while the lead thread has another batch to run, it hands a
	 * finished batch's asynchronous callers here (their done functions wake event loops: a
	 * system call each) instead of completing them itself */
	pthread_mutex_t done_mu;    /* guards the fields up to done_started */
	pthread_cond_t done_cv;     /* signals the completion thread: work or stopping */
	batch_wait *done_head;      /* handed over, not yet completed (done_next links) */
	batch_wait *done_tail;      /* the last of them */
	bool done_idle;             /* the completion thread waits on done_cv */
	bool done_stopping;         /* batcher_destroy asked it to finish and exit */
	bool done_started;          /* it runs (done_mu and done_cv exist) */
	uint64_t done_spin_ns;      /* it spins this long for more before it sleeps
	                               (TILEATOM_CUDA_DONE_SPIN_US, default 30; 0: it
	                               sleeps at once) */
	pthread_t done_thread;      /* the completion thread */
	unsigned window_us;         /* batch window (ta_backend_set_batch_window) */
	cudaStream_t stream;        /* stream of the batch kernel */
	unsigned char *buf;         /* mapped pinned memory: chains, items, elems, olds */
	size_t cap;                 /* bytes at buf */
	unsigned long long batches; /* batches run */
	unsigned long long batched; /* requests that went through a batch */
	/* the persistent kernel (see "the persistent kernel" below) */
	pk_box box;                    /* the lead's resident kernel (lead only;
	                                  ta_cuda_persistent_counts reads box.epoch) */
	int pk_max;                    /* most chains of a batch it takes; 0: off (written
	                                  under mu, atomically: the lanes read it without) */
	bool pk_on;                    /* launched and not yet reaped (under mu) */
	int holds;                     /* callers needing the device without it (under mu) */
	pthread_cond_t pk_cv;          /* broadcast when pk_on turns false */
	unsigned long long pk_batches; /* batches it ran (under mu) */
	pk_lane *lanes;                /* n_lanes lanes (their boxes in one block of mapped
	                                  memory at lanes_mem), or NULL: none */
	int n_lanes;                   /* how many */
	unsigned char *lanes_mem;      /* that block */
	int lanes_claimed;             /* lanes[0, lanes_claimed) have an owner (written under
	                                  lanes_mu; read elsewhere with an acquire load) */
	pthread_mutex_t lanes_mu;      /* guards lanes_claimed's growth and lane_holds */
	int lane_holds;                /* pk_holds in effect (a lane taken now starts held) */
	/* TILEATOM_CUDA_TRACE=1: the time of each stage of a batch, summed per way (0 a
	 * launch, 1 the persistent kernel) and printed to stderr when the backend goes */
	bool trace;                          /* on */
	unsigned long long tr_batches[2];    /* batches */
	unsigned long long tr_chains[2];     /* the chains (callers) they held */
	unsigned long long tr_elems[2];      /* the element descriptors they held */
	unsigned long long tr_resolve_ns[2]; /* resolving the elements into descriptors */
	unsigned long long tr_start_ns[2];   /* the launch call (a launch of the persistent
	                                        kernel is in wait); for the persistent kernel,
	                                        from prepared to rung */
	unsigned long long tr_wait_ns[2];    /* until the batch has run */
	unsigned long long tr_finish_ns[2];  /* copying the old values out */
	/* ... and per asynchronous chain (atomics: the lead and completion threads add) */
	unsigned long long tr_async_chains; /* chains completed */
	unsigned long long tr_queue_ns;     /* from queued to taken by the lead thread */
	unsigned long long tr_flight_ns;    /* from taken to its batch's done seen */
	unsigned long long tr_hand_ns;      /* from done seen to its done function called */
	/* ... and per lane batch (atomics: the lanes' owners add) */
	unsigned long long tr_lane_batches;   /* lane batches */
	unsigned long long tr_lane_chains;    /* the chains they held */
	unsigned long long tr_lane_queue_ns;  /* from queued (each chain) to its batch rung */
	unsigned long long tr_lane_flight_ns; /* from rung to done seen (each batch) */
};

/* The CUDA backend object. */
struct ta_cuda_backend {
	ta_backend base;                /* vtable: must be first */
	int device;                     /* device ordinal */
	unsigned char uuid[16];         /* the GPU's UUID (cudaDeviceProp.uuid) */
	ta_backend_info info;           /* what info reports */
	pthread_mutex_t mu;             /* guards slots[].busy and broken */
	pthread_cond_t cv;              /* signalled when a slot is released */
	cuda_slot slots[TA_CUDA_SLOTS]; /* staging slots */
	bool broken;                    /* a sticky error has made the context unusable */
	char broken_msg[200];           /* that error, for later calls */
	cuda_batcher batch;             /* small requests, many to a launch */
	bool batch_ready;               /* batch.mu and batch.stream exist */
	bool pk_ready;                  /* batch.box (stream, mem) and pk_cv exist */
	/* TILEATOM_CUDA_TRACE=1 (batch.trace): the stages of each apply with its own launch,
	 * summed (under mu) and printed to stderr when the backend goes */
	unsigned long long tr_applies;      /* applies traced */
	unsigned long long tr_prep_ns;      /* staging layout, slot, buffers grown */
	unsigned long long tr_stage_ns;     /* host copies and the operands' DMA queued */
	unsigned long long tr_launch_ns;    /* the launch and the copies back queued */
	unsigned long long tr_wait_ns;      /* the stream synchronised */
	unsigned long long tr_finish_ns;    /* counts and old values handed over */
	unsigned long long tr_staged_bytes; /* bytes staged through the pinned buffer */
	unsigned long long tr_min_ns[TA_CUDA_TRACE_STAGES]; /* the least of each stage above */
};

/* True for errors that leave the CUDA context unusable. */
/* Rounds n up to TA_CUDA_ALIGN. */
static inline size_t align_up(size_t n)
{
	return (n + TA_CUDA_ALIGN - 1) & ~(size_t)(TA_CUDA_ALIGN - 1);
}

/* ---- the backend (ta_cuda.cu), for the batcher ---- */

/* Reports a failed CUDA call: RESOURCE_EXHAUSTED for allocation failures (cleared),
 * INTERNAL otherwise; a sticky error marks the backend broken and is logged. */
ta_status be_fail(ta_cuda_backend *be, cudaError_t e, const char *what, ta_error *err);
/* Returns INTERNAL when an earlier sticky error broke the backend, else TA_OK. */
ta_status be_check_broken(ta_cuda_backend *be, ta_error *err);
/* Makes the backend's device current on the calling thread. */
ta_status be_enter(ta_cuda_backend *be, ta_error *err);

/* ---- the batcher (ta_cuda_batcher.cu), for the backend ---- */

/* Sets up be->batch (its lock, stream, and the persistent kernel's stream and mailbox;
 * TILEATOM_CUDA_PERSISTENT and TILEATOM_CUDA_TRACE read here). On failure returns the
 * status with err set; batcher_destroy releases what was made. */
ta_status batcher_init(ta_cuda_backend *be, ta_error *err);
/* Stops the persistent kernel, prints the trace (when on) and releases be->batch. */
void batcher_destroy(ta_cuda_backend *be);
/* True when plan goes through the batcher rather than its own launch. */
bool batchable(const ta_cuda_backend *be, const ta_plan *plan);
/* Queues w's requests and returns when every one has its outcome (see ta_cuda_batcher.cu). */
void batch_submit(ta_cuda_backend *be, batch_wait *w);
/* Queues w's requests (w malloc'd, done_fn and pre set) and returns at once: the thread that runs
 * their batch calls w->done_fn(w->done_arg) and frees w. */
void batch_submit_async(ta_cuda_backend *be, batch_wait *w);
/* Resolves call c's elements into pre (pre->elems: room for plan->count descriptors);
 * false (pre->ok false) when the leader has to (an old value wanted of a masked or
 * skipped element, or an element outside the tile). */
bool batch_pre_resolve(const ta_apply_call *c, batch_pre *pre);
/* True when batch_submit_async may be used (the batcher and its lead thread run). */
bool batch_async_ready(const ta_cuda_backend *be);
/* Holds the persistent kernel off the device (stopping it after its batch in flight) until
 * pk_release: for calls that may synchronise the whole device. */
void pk_hold(ta_cuda_backend *be);
/* Ends a pk_hold. */
void pk_release(ta_cuda_backend *be);
/* vtable set_batch_window: how long a leader waits for more requests before a launch. */
void cuda_set_batch_window(ta_backend *base, unsigned usec);

/* ---- a resident kernel's mailbox and a batch's steps (ta_cuda_batcher.cu), shared by the
 * lead and the lanes (ta_cuda_lanes.cu) ---- */

/* Makes box's memory and stream: mem is TA_PK_BOX_BYTES of mapped pinned memory (zeroed
 * here). Returns the CUDA error of the stream's creation. */
cudaError_t box_init(pk_box *box, unsigned char *mem);
/* Launches box's kernel, to take every bell but prev (the epoch is counted either way).
 * The box's owner; the caller records that it runs. */
ta_status box_launch(ta_cuda_backend *be, pk_box *box, uint64_t prev, ta_error *err);
/* Rings box's bell for the batch written into area slot (units 16-byte units): returns the
 * bell and sets *prev (the bell before it). The box's owner. */
uint64_t box_ring(pk_box *box, uint32_t units, int slot, uint64_t *prev);
/* Stops box's kernel (it returns after the batch it runs) and waits until it has. The
 * box's owner or a holder, with no bell rung that the kernel has not taken. A failure is
 * recorded (be_fail) and logged. */
void box_stop(ta_cuda_backend *be, pk_box *box);
/* Where batch seq of a box's kernel (epoch box->epoch) stands (box_poll). */
typedef enum box_state {
	BOX_RUNNING, /* not done yet */
	BOX_DONE,    /* done */
	BOX_GONE,    /* the kernel returned without taking it (idle or life time over) */
	BOX_FAILED   /* the kernel failed */
} box_state;
/* Looks once, without waiting, at batch seq of box; *e is a failed kernel's error. */
box_state box_poll(pk_box *box, uint64_t seq, cudaError_t *e);
/* Writes the descriptors of job's waits (n_waits chains) into box's area of its next slot
 * when pk_ok and they fit it, else (when launch_ok; else it returns false having done
 * nothing) into the launch buffer (the lead only); every element resolved on the host (by
 * the queueing loop ahead of time, see batch_pre, or here); masked and skipped ones get
 * their output now. The box's owner, without batch.mu. */
bool batch_prepare(ta_cuda_backend *be, pk_box *box, batch_job *job, bool pk_ok, bool launch_ok);
/* Fills every call's outcome of a finished batch (old values copied out); lead: the lead's
 * batch (its trace sums). Without batch.mu. */
void batch_finish(ta_cuda_backend *be, batch_job *job, bool lead);
/* Takes the next batch's waits off the list at *head (at least one; up to the batch's
 * limits and, when fit_pk, up to what the persistent kernel takes: pk_max chains whose
 * descriptors fit its area and old values its array, so that a long queue goes to the
 * resident kernel in batches prepared while the one before runs, rather than in one
 * launch). The list is not empty. */
void take_waits(batch_wait **head, batch_wait **tail, batch_job *job, bool fit_pk, int pk_max);
/* Hands an asynchronous caller's outcome over: each status back to the caller's call, then
 * its done function; frees x. Without batch.mu. */
void async_complete(cuda_batcher *b, batch_wait *x);
/* CLOCK_MONOTONIC in nanoseconds (the trace). */
uint64_t now_ns(void);

/* ---- the lanes (ta_cuda_lanes.cu), for the backend and the batcher ---- */

/* Sets up n lanes in be->batch (their memory; a lane's stream is made when a thread takes
 * it; n 0: none). TA_OK, or an error with nothing left to release. */
ta_status lanes_init(ta_cuda_backend *be, int n, ta_error *err);
/* Stops every lane's kernel and releases the lanes (their calls are over). */
void lanes_destroy(ta_cuda_backend *be);
/* vtable async_attach: the calling thread takes a lane (see ta_backend.h). */
bool cuda_async_attach(ta_backend *base);
/* vtable poll_async: drives the calling thread's lane (see ta_backend.h). */
bool cuda_poll_async(ta_backend *base);
/* The calling thread's lane, or NULL. */
pk_lane *lane_mine(ta_cuda_backend *be);
/* Queues w (as batch_submit_async takes it) on lane, the caller's own: its polls run it. */
void lane_submit(ta_cuda_backend *be, pk_lane *lane, batch_wait *w);
/* Stops every lane's kernel (after its batch in flight) and keeps it off until
 * lanes_release: part of pk_hold. */
void lanes_hold(ta_cuda_backend *be);
/* Ends a lanes_hold. */
void lanes_release(ta_cuda_backend *be);

#endif
