/* ta_async_thread.c: one completion thread that runs a backend's queued apply_async calls
 * in order, and the lanes of the threads that attach (see ta_async_thread.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include "ta_async_thread.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One queued apply_async call. */
struct ta_async_job {
	ta_apply_call *calls;    /* the calls, in order */
	size_t n;                /* how many */
	void (*done)(void *arg); /* called once they ran */
	void *arg;               /* done's argument */
	ta_async_job *next;      /* queue link */
};

int ta_async_thread_init(ta_async_thread *t, ta_backend *be, int max_lanes)
{
	memset(t, 0, sizeof(*t));
	t->be = be;
	t->max_lanes = max_lanes < TA_ASYNC_LANES ? max_lanes : TA_ASYNC_LANES;
	int rc = pthread_mutex_init(&t->mu, NULL);
	if (rc != 0)
		return rc;
	rc = pthread_cond_init(&t->cv, NULL);
	if (rc != 0)
		pthread_mutex_destroy(&t->mu);
	return rc;
}

/* The thread: runs jobs in order until stopping and nothing is queued. */
static void *async_main(void *arg)
{
	ta_async_thread *t = arg;
	(void)pthread_setname_np(pthread_self(), "ta-async"); /* top -H; a convenience only */
	pthread_mutex_lock(&t->mu);
	for (;;) {
		while (!t->head && !t->stopping)
			pthread_cond_wait(&t->cv, &t->mu);
		ta_async_job *job = t->head;
		if (!job)
			break;
		t->head = job->next;
		if (!t->head)
			t->tail = NULL;
		pthread_mutex_unlock(&t->mu);
		ta_backend_apply_many(t->be, job->calls, job->n);
		job->done(job->arg);
		free(job);
		pthread_mutex_lock(&t->mu);
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

/* Starts the thread with every signal blocked (they belong to the daemon's main loop).
 * Under t->mu. Returns 0 or an errno value. */
static int async_start(ta_async_thread *t)
{
	sigset_t all, old;
	sigfillset(&all);
	int rc = pthread_sigmask(SIG_SETMASK, &all, &old);
	if (rc != 0)
		return rc;
	rc = pthread_create(&t->thread, NULL, async_main, t);
	int rc2 = pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		t->started = true;
	return rc != 0 ? rc : rc2;
}

/* The calling thread's lane, or NULL. */
static ta_async_lane *lane_mine(ta_async_thread *t)
{
	int n = __atomic_load_n(&t->n_lanes, __ATOMIC_ACQUIRE);
	if (n == 0)
		return NULL;
	uint64_t me = ta_thread_no();
	for (int i = 0; i < n; i++)
		if (t->lanes[i].owner == me)
			return &t->lanes[i];
	return NULL;
}

bool ta_async_thread_attach(ta_async_thread *t)
{
	if (lane_mine(t))
		return true;
	pthread_mutex_lock(&t->mu);
	bool took = t->n_lanes < t->max_lanes;
	if (took) {
		t->lanes[t->n_lanes] = (ta_async_lane){ta_thread_no(), NULL, NULL};
		__atomic_store_n(&t->n_lanes, t->n_lanes + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&t->mu);
	return took;
}

bool ta_async_thread_poll(ta_async_thread *t)
{
	ta_async_lane *lane = lane_mine(t);
	while (lane && lane->head) {
		ta_async_job *job = lane->head;
		lane->head = job->next;
		if (!lane->head)
			lane->tail = NULL;
		ta_backend_apply_many(t->be, job->calls, job->n);
		job->done(job->arg);
		free(job);
	}
	return false;
}

void ta_async_thread_submit(ta_async_thread *t, ta_apply_call *calls, size_t n,
                            void (*done)(void *arg), void *arg)
{
	ta_async_job *job = malloc(sizeof(*job));
	ta_async_lane *lane = job ? lane_mine(t) : NULL;
	if (lane) { /* the caller's own: its next poll runs it */
		*job = (ta_async_job){calls, n, done, arg, NULL};
		if (lane->tail)
			lane->tail->next = job;
		else
			lane->head = job;
		lane->tail = job;
		return;
	}
	pthread_mutex_lock(&t->mu);
	if (job && !t->started && !t->failed && !t->stopping) {
		int rc = async_start(t);
		if (rc != 0 && !t->started) {
			t->failed = true;
			fprintf(stderr,
			        "tileatom: cannot start the completion thread (%s); "
			        "asynchronous applies run on their caller\n",
			        strerror(rc));
		}
	}
	if (!job || !t->started || t->stopping) {
		pthread_mutex_unlock(&t->mu);
		free(job);
		ta_backend_apply_many(t->be, calls, n); /* correct, only not asynchronous */
		done(arg);
		return;
	}
	*job = (ta_async_job){calls, n, done, arg, NULL};
	if (t->tail)
		t->tail->next = job;
	else
		t->head = job;
	t->tail = job;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

void ta_async_thread_destroy(ta_async_thread *t)
{
	pthread_mutex_lock(&t->mu);
	t->stopping = true;
	pthread_cond_signal(&t->cv);
	bool started = t->started;
	pthread_mutex_unlock(&t->mu);
	if (started) {
		int rc = pthread_join(t->thread, NULL);
		if (rc != 0)
			fprintf(stderr, "tileatom: cannot join the completion thread: %s\n",
			        strerror(rc));
	}
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
}
