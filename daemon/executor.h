/* executor.h: a small pool of worker threads that runs jobs off the event loops. A job's
 * work function runs on a worker; its done function then runs on the thread of the loop
 * that submitted it, handed back through that loop's port (a uv_async_t and a queue: the
 * executor's own port for the loop it was started on, ta_executor_port_init for every
 * other loop), so completions never race a loop. Jobs run in parallel and in no
 * particular order: callers that need an order (one connection's requests) submit the
 * next job only after the previous one is done. A port may also poll: while jobs worked
 * outside the executor (a backend's apply_async) are out, its loop checks the done queue on
 * every turn without sleeping, so their completions need no wake-up (ta_executor_port_poll);
 * a port with a pump (ta_executor_port_pump) always polls then, and drives that work. */
#ifndef TA_DAEMON_EXECUTOR_H
#define TA_DAEMON_EXECUTOR_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct ta_job ta_job;
typedef struct ta_executor_port ta_executor_port;

/* A unit of work; embed it in a larger struct. */
struct ta_job {
	ta_job *next;           /* queue link (owned by the executor while submitted) */
	void (*work)(ta_job *); /* runs on a worker thread */
	void (*done)(ta_job *); /* runs on the submitting loop's thread after work */
	ta_executor_port *port; /* where done runs (set by the submit) */
	bool expected;          /* worked outside the executor (ta_executor_expect) */
};

typedef struct ta_executor ta_executor;

/* Where the done callbacks of one loop's jobs come back: workers queue finished jobs here
 * and wake the loop. */
struct ta_executor_port {
	uv_async_t async;              /* wakes the loop when jobs are done */
	uv_idle_t poll_idle;           /* active while the loop polls the done queue */
	pthread_mutex_t lock;          /* guards the done queue, polling and the async's life */
	ta_job *done_head, *done_tail; /* worked, done callback still to run */
	_Atomic bool has_done;         /* done_head is set (read without the lock by the poll) */
	bool polling;                  /* the loop polls: completers need not wake it (lock) */
	int running;                   /* jobs submitted here and not yet done (loop thread) */
	int expected;                  /* of those, worked outside the executor (loop thread) */
	uint64_t poll_ns;              /* polling ends this long after the last completion */
	uint64_t poll_last_ns;         /* uv_hrtime() of the poll's start or last completion */
	bool (*pump)(void *arg);       /* drives a backend's work for the loop, or NULL
	                                  (ta_executor_port_pump) */
	void *pump_arg;                /* pump's argument */
	int open_handles;              /* async and poll_idle, until both are closed */
	ta_executor *owner;            /* the executor whose own port it is (NULL: none) */
};

/* Called on the loop thread once the executor has fully stopped. */
typedef void (*ta_executor_closed_cb)(ta_executor *ex);

/* The pool. */
struct ta_executor {
	ta_executor_port main;           /* port of the loop the executor was started on */
	pthread_mutex_t lock;            /* guards the todo queue and the flags below */
	pthread_cond_t cond;             /* signals workers: new job or stop */
	ta_job *todo_head, *todo_tail;   /* submitted, not yet picked up */
	pthread_t *threads;              /* the workers */
	int nthreads;                    /* number of workers started */
	bool stopping;                   /* workers exit once the todo queue is empty */
	ta_executor_closed_cb closed_cb; /* set by ta_executor_stop */
};

/* Blocks, in the calling thread, the signals the main loop handles (SIGTERM, SIGINT,
 * SIGHUP, SIGPIPE), saving the mask before in *old: threads started next inherit the
 * block, so those signals reach the main loop only. */
void ta_block_loop_signals(sigset_t *old);

/* Starts nthreads workers (at least 1) with loop's port. Returns 0 or a negative libuv /
 * errno-style error code (the executor is then unusable and needs no cleanup). */
int ta_executor_init(ta_executor *ex, uv_loop_t *loop, int nthreads);
/* Queues job (work and done set) with the executor's own port. That loop's thread only. */
void ta_executor_submit(ta_executor *ex, ta_job *job);
/* Number of jobs submitted with the own port whose done callback has not run yet. */
int ta_executor_running(const ta_executor *ex);
/* Prepares a port for another loop (its thread runs the done callbacks). Call on that
 * loop's thread, or before it runs. Returns 0 or a negative error code (nothing to undo). */
int ta_executor_port_init(ta_executor_port *port, uv_loop_t *loop);
/* With usec > 0, while jobs worked outside the executor (ta_executor_expect) are out,
 * port's loop polls its done queue on every turn without sleeping, until none is out or
 * usec pass without a completion; their completions then wake nothing. port's loop thread,
 * or before it runs. */
void ta_executor_port_poll(ta_executor_port *port, unsigned usec);
/* Makes port's loop drive the work of jobs worked outside the executor itself (a backend
 * whose asynchronous calls run in the caller's polls, ta_backend_async_attach): while such
 * jobs are out the loop polls, whatever ta_executor_port_poll says, and calls pump(arg) on
 * every turn, which returns true while that work is still out (the loop never stops
 * polling then). port's loop thread, or before it runs. */
void ta_executor_port_pump(ta_executor_port *port, bool (*pump)(void *arg), void *arg);
/* Queues job; its done callback runs on port's loop. port's loop thread only. */
void ta_executor_submit_to(ta_executor *ex, ta_executor_port *port, ta_job *job);
/* A job worked outside the executor (a backend's completion, apply_async): marks job as
 * running with port (its done callback will run on port's loop; the loop polls for it when
 * the port polls). port's loop thread, before the done callback can run. */
void ta_executor_expect(ta_executor_port *port, ta_job *job);
/* The work of job (submitted, or expected) is finished: queues its done callback on its
 * port's loop and wakes that loop unless it polls. Any thread. */
void ta_executor_complete(ta_job *job);
/* Closes a port (not the own one) once none of its jobs is running. port's loop thread. */
void ta_executor_port_close(ta_executor_port *port);
/* Stops the workers after the queued jobs are worked (their done callbacks still run),
 * joins them, closes the async handle and then calls cb (may be NULL). Loop thread. */
void ta_executor_stop(ta_executor *ex, ta_executor_closed_cb cb);

#endif /* TA_DAEMON_EXECUTOR_H */
