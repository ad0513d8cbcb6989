/* executor.h: a small pool of worker threads that runs jobs off the event loop. A job's
 * work function runs on a worker; its done function then runs on the loop thread, handed
 * back through a uv_async_t (so completions never race the loop). Jobs run in parallel
 * and in no particular order: callers that need an order (one connection's requests)
 * submit the next job only after the previous one is done. */
#ifndef TA_DAEMON_EXECUTOR_H
#define TA_DAEMON_EXECUTOR_H

#include <pthread.h>
#include <stdbool.h>
#include <uv.h>

typedef struct ta_job ta_job;

/* A unit of work; embed it in a larger struct. */
struct ta_job {
	ta_job *next;           /* queue link (owned by the executor while submitted) */
	void (*work)(ta_job *); /* runs on a worker thread */
	void (*done)(ta_job *); /* runs on the loop thread after work */
};

typedef struct ta_executor ta_executor;

/* Called on the loop thread once the executor has fully stopped. */
typedef void (*ta_executor_closed_cb)(ta_executor *ex);

/* The pool. */
struct ta_executor {
	uv_loop_t *loop;                 /* loop the done callbacks run on */
	uv_async_t async;                /* wakes the loop when jobs are done */
	pthread_mutex_t lock;            /* guards the queues and flags below */
	pthread_cond_t cond;             /* signals workers: new job or stop */
	ta_job *todo_head, *todo_tail;   /* submitted, not yet picked up */
	ta_job *done_head, *done_tail;   /* worked, done callback still to run */
	pthread_t *threads;              /* the workers */
	int nthreads;                    /* number of workers started */
	int running;                     /* jobs submitted and not yet done (loop thread) */
	bool stopping;                   /* workers exit once the todo queue is empty */
	ta_executor_closed_cb closed_cb; /* set by ta_executor_stop */
};

/* Starts nthreads workers (at least 1) bound to loop. Returns 0 or a negative libuv /
 * errno-style error code (the executor is then unusable and needs no cleanup). */
int ta_executor_init(ta_executor *ex, uv_loop_t *loop, int nthreads);
/* Queues job (work and done set). Loop thread only. */
void ta_executor_submit(ta_executor *ex, ta_job *job);
/* Number of jobs submitted whose done callback has not run yet. */
int ta_executor_running(const ta_executor *ex);
/* Stops the workers after the queued jobs are worked (their done callbacks still run),
 * joins them, closes the async handle and then calls cb (may be NULL). Loop thread. */
void ta_executor_stop(ta_executor *ex, ta_executor_closed_cb cb);

#endif /* TA_DAEMON_EXECUTOR_H */
