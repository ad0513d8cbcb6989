/* ta_async_thread.h: apply_async (ta_backend.h) for a backend whose apply runs on the
 * calling thread (the CPU backend): one completion thread, started on the first call, takes
 * the queued calls in order, runs them with ta_backend_apply_many and calls their done
 * functions. Used when the daemon runs with --async-apply 1 on the CPU backend (the same
 * event-loop path the CUDA backend takes by default), so that path runs everywhere. */
#ifndef TA_ASYNC_THREAD_H
#define TA_ASYNC_THREAD_H

#include <pthread.h>
#include <stdbool.h>

#include "ta_backend.h"

typedef struct ta_async_job ta_async_job;

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
} ta_async_thread;

/* Prepares t for backend be (no thread yet). Returns 0 or an errno value. */
int ta_async_thread_init(ta_async_thread *t, ta_backend *be);
/* apply_async through t: queues the calls (the thread starts on the first one) and returns;
 * the thread runs them in order and calls done(arg). When the thread cannot be started or
 * memory is short, runs them on the calling thread and calls done(arg) before returning. */
void ta_async_thread_submit(ta_async_thread *t, ta_apply_call *calls, size_t n,
                            void (*done)(void *arg), void *arg);
/* Runs what is still queued, stops and joins the thread, and releases t. */
void ta_async_thread_destroy(ta_async_thread *t);

#endif /* TA_ASYNC_THREAD_H */
