/* ta_async_thread.h: apply_async (ta_backend.h) for a backend whose apply runs on the
 * calling thread (the CPU backend): one completion thread, started on the first call, takes
 * the queued calls in order, runs them with ta_backend_apply_many and calls their done
 * functions. A thread that attaches (async_attach: the daemon's loops) has a lane instead:
 * its calls wait in its own queue and run in its polls (poll_async), on it, as the CUDA
 * backend's lanes run theirs. Used when the daemon runs with --async-apply 1 on the CPU
 * backend (the same event-loop path the CUDA backend takes by default), so that path runs
 * everywhere. */
#ifndef TA_ASYNC_THREAD_H
#define TA_ASYNC_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ta_backend.h"

typedef struct ta_async_job ta_async_job;

/* Most threads that attach to one completion thread (more go through the thread). */
#define TA_ASYNC_LANES 64

/* An attached thread's own queue: its calls wait there for its polls. */
typedef struct ta_async_lane {
	uint64_t owner;            /* the thread's number (ta_thread_no) */
	ta_async_job *head, *tail; /* its calls not yet run (owner only) */
} ta_async_lane;

/* The completion thread of one backend and its queue. */
typedef struct ta_async_thread {
	ta_backend *be;            /* the backend whose apply_many the thread calls */
	pthread_mutex_t mu;        /* guards everything below */
	pthread_cond_t cv;         /* signalled when a job is queued or on stop */
	ta_async_job *head, *tail; /* queued, not yet run */
	pthread_t thread;          /* the thread (when started) */
	bool started;              /* the thread runs */
	bool failed;               /* it could not be started: calls run on the caller */
	bool stopping;             /* ta_async_thread_destroy asked it to exit */
	int max_lanes;             /* threads that may attach (0..TA_ASYNC_LANES) */
	int n_lanes;               /* lanes taken (grows under mu; read with an acquire load) */
	ta_async_lane lanes[TA_ASYNC_LANES]; /* the attached threads' queues */
} ta_async_thread;

/* Prepares t for backend be (no thread yet), with up to max_lanes attached threads.
 * Returns 0 or an errno value. */
int ta_async_thread_init(ta_async_thread *t, ta_backend *be, int max_lanes);
/* The calling thread attaches (async_attach): from now on its calls through t wait in its
 * own lane and run in its ta_async_thread_poll. False when no lane is left (they go
 * through the thread). */
bool ta_async_thread_attach(ta_async_thread *t);
/* poll_async for the calling thread: runs its queued calls in order, calling their done
 * functions; false (nothing of its is out afterwards). */
bool ta_async_thread_poll(ta_async_thread *t);
/* apply_async through t: queues the calls (in the caller's lane when it attached; else for
 * the thread, which starts on the first one) and returns; whoever runs them (the caller's
 * poll, or the thread) runs them in order and calls done(arg). When the thread cannot be started or
 * memory is short, runs them on the calling thread and calls done(arg) before returning. */
void ta_async_thread_submit(ta_async_thread *t, ta_apply_call *calls, size_t n,
                            void (*done)(void *arg), void *arg);
/* Runs what is still queued, stops and joins the thread, and releases t. */
void ta_async_thread_destroy(ta_async_thread *t);

#endif /* TA_ASYNC_THREAD_H */
