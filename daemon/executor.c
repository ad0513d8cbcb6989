/* executor.c: worker threads + one uv_async completion queue per loop (see executor.h).
 * Happy path: submit appends to todo and signals; a worker pops, runs work, appends to
 * the job's port's done queue and calls uv_async_send under that port's lock (so a port
 * whose jobs are all done can be closed without racing a worker's send); the loop's async
 * callback drains done and runs each done callback. A polling port (expected jobs out)
 * keeps an idle handle active, whose callback drains done on every loop turn; completers
 * skip the send while polling is set, and the loop clears it under the lock before it
 * drains once more and may sleep. Stop: set stopping, wake everyone, join (workers finish
 * the todo queue first), drain the last completions of the own port, close its handles. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include "executor.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Appends job to the queue (*head, *tail); the lock is held. */
static void job_append(ta_job **head, ta_job **tail, ta_job *job)
{
	job->next = NULL;
	if (*tail)
		(*tail)->next = job;
	else
		*head = job;
	*tail = job;
}

/* Worker thread: runs jobs until stopping and the queue is empty. */
static void *worker_main(void *arg)
{
	ta_executor *ex = arg;
	(void)pthread_setname_np(pthread_self(), "ta-worker"); /* top -H; a convenience only */
	pthread_mutex_lock(&ex->lock);
	for (;;) {
		while (!ex->todo_head && !ex->stopping)
			pthread_cond_wait(&ex->cond, &ex->lock);
		ta_job *job = ex->todo_head;
		if (!job)
			break; /* stopping and nothing left */
		ex->todo_head = job->next;
		if (!ex->todo_head)
			ex->todo_tail = NULL;
		pthread_mutex_unlock(&ex->lock);

		job->work(job);

		ta_executor_complete(job);
		pthread_mutex_lock(&ex->lock);
	}
	pthread_mutex_unlock(&ex->lock);
	return NULL;
}

void ta_executor_complete(ta_job *job)
{
	ta_executor_port *port = job->port;
	pthread_mutex_lock(&port->lock);
	job_append(&port->done_head, &port->done_tail, job);
	atomic_store_explicit(&port->has_done, true, memory_order_release);
	int rc = port->polling ? 0 : uv_async_send(&port->async);
	pthread_mutex_unlock(&port->lock);
	if (rc != 0)
		ta_log(TA_LOG_ERR, "executor: uv_async_send failed: %s", uv_strerror(rc));
}

/* Loop thread (the uv_async callback): runs the done callbacks of every finished job of the
 * port. */
static void drain_done(uv_async_t *async)
{
	ta_executor_port *port = async->data;
	pthread_mutex_lock(&port->lock);
	ta_job *job = port->done_head;
	port->done_head = port->done_tail = NULL;
	atomic_store_explicit(&port->has_done, false, memory_order_relaxed);
	pthread_mutex_unlock(&port->lock);
	while (job) {
		ta_job *next = job->next;
		job->next = NULL;
		port->running--;
		if (job->expected) {
			job->expected = false;
			port->expected--;
		}
		job->done(job);
		job = next;
	}
}

/* Ends the port's polling: completers wake the loop again; what they queued meanwhile runs
 * now. Loop thread. */
static void poll_stop(ta_executor_port *port)
{
	pthread_mutex_lock(&port->lock);
	port->polling = false;
	pthread_mutex_unlock(&port->lock);
	int rc = uv_idle_stop(&port->poll_idle);
	if (rc != 0) /* libuv's idle stop cannot fail; checked all the same */
		ta_log(TA_LOG_ERR, "executor: uv_idle_stop failed: %s", uv_strerror(rc));
	drain_done(&port->async);
}

/* poll_idle's callback, every loop turn while the port polls: the pump's turn, then the done
 * callbacks of what finished; the poll ends once nothing expected is out, or after poll_ns
 * without a completion, unless the pump still has work out. */
static void on_poll_idle(uv_idle_t *idle)
{
	ta_executor_port *port = idle->data;
	bool out = port->pump && port->pump(port->pump_arg); /* may complete jobs */
	uint64_t now = uv_hrtime();
	if (atomic_load_explicit(&port->has_done, memory_order_acquire)) {
		drain_done(&port->async);
		port->poll_last_ns = now;
	}
	if (port->polling && !out &&
	    (port->expected == 0 || now - port->poll_last_ns > port->poll_ns))
		poll_stop(port);
}

void ta_executor_expect(ta_executor_port *port, ta_job *job)
{
	port->running++;
	port->expected++;
	job->port = port;
	job->expected = true;
	if ((port->poll_ns == 0 && !port->pump) || port->polling)
		return;
	pthread_mutex_lock(&port->lock);
	port->polling = true;
	pthread_mutex_unlock(&port->lock);
	port->poll_last_ns = uv_hrtime();
	int rc = uv_idle_start(&port->poll_idle, on_poll_idle);
	if (rc != 0) { /* cannot happen (the callback is set); the wake-ups still work */
		ta_log(TA_LOG_ERR, "executor: uv_idle_start failed: %s", uv_strerror(rc));
		pthread_mutex_lock(&port->lock);
		port->polling = false;
		pthread_mutex_unlock(&port->lock);
		drain_done(&port->async);
	}
}

void ta_executor_port_poll(ta_executor_port *port, unsigned usec)
{
	port->poll_ns = (uint64_t)usec * 1000u;
}

void ta_executor_port_pump(ta_executor_port *port, bool (*pump)(void *arg), void *arg)
{
	port->pump = pump;
	port->pump_arg = arg;
}

int ta_executor_port_init(ta_executor_port *port, uv_loop_t *loop)
{
	memset(port, 0, sizeof(*port));
	int rc = pthread_mutex_init(&port->lock, NULL);
	if (rc != 0)
		return -rc;
	if ((rc = uv_idle_init(loop, &port->poll_idle)) != 0) {
		pthread_mutex_destroy(&port->lock);
		return rc;
	}
	uv_unref((uv_handle_t *)&port->poll_idle); /* never keeps the loop alive */
	port->poll_idle.data = port;
	port->open_handles = 1;
	rc = uv_async_init(loop, &port->async, drain_done);
	if (rc != 0) {
		uv_close((uv_handle_t *)&port->poll_idle, NULL);
		pthread_mutex_destroy(&port->lock);
		return rc;
	}
	port->async.data = port;
	port->open_handles = 2;
	return 0;
}

/* Frees what ta_executor_init allocated besides the port. */
static void free_sync(ta_executor *ex)
{
	free(ex->threads);
	ex->threads = NULL;
	pthread_cond_destroy(&ex->cond);
	pthread_mutex_destroy(&ex->lock);
}

/* Close callback of a port's handles; once both are closed the lock goes, and the own
 * port's close ends the executor. */
static void on_port_closed(uv_handle_t *handle)
{
	ta_executor_port *port = handle->data;
	if (--port->open_handles > 0)
		return;
	ta_executor *ex = port->owner;
	pthread_mutex_destroy(&port->lock);
	if (!ex)
		return;
	free_sync(ex);
	if (ex->closed_cb)
		ex->closed_cb(ex);
}

void ta_executor_port_close(ta_executor_port *port)
{
	drain_done(&port->async);
	if (port->running != 0)
		ta_log(TA_LOG_ERR, "executor: a port closes with %d job(s) running (a bug)",
		       port->running);
	pthread_mutex_lock(&port->lock); /* waits out a worker inside uv_async_send */
	pthread_mutex_unlock(&port->lock);
	uv_close((uv_handle_t *)&port->poll_idle, on_port_closed);
	uv_close((uv_handle_t *)&port->async, on_port_closed);
}

void ta_block_loop_signals(sigset_t *old)
{
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &block, old);
}

/* Tells the workers to stop and joins them. */
static void stop_workers(ta_executor *ex)
{
	pthread_mutex_lock(&ex->lock);
	ex->stopping = true;
	pthread_cond_broadcast(&ex->cond);
	pthread_mutex_unlock(&ex->lock);
	for (int i = 0; i < ex->nthreads; i++)
		pthread_join(ex->threads[i], NULL);
	ex->nthreads = 0;
}

int ta_executor_init(ta_executor *ex, uv_loop_t *loop, int nthreads)
{
	memset(ex, 0, sizeof(*ex));
	if (nthreads < 1)
		nthreads = 1;
	int rc = pthread_mutex_init(&ex->lock, NULL);
	if (rc != 0)
		return -rc;
	if ((rc = pthread_cond_init(&ex->cond, NULL)) != 0) {
		pthread_mutex_destroy(&ex->lock);
		return -rc;
	}
	ex->threads = calloc((size_t)nthreads, sizeof(*ex->threads));
	if ((rc = ex->threads ? ta_executor_port_init(&ex->main, loop) : -ENOMEM) != 0)
		goto fail_sync;

	/* Workers inherit this mask: signals go to the loop thread only. */
	sigset_t old;
	ta_block_loop_signals(&old);
	for (int i = 0; i < nthreads; i++) {
		rc = pthread_create(&ex->threads[i], NULL, worker_main, ex);
		if (rc != 0) {
			rc = -rc;
			break;
		}
		ex->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ex->nthreads == nthreads) {
		ex->main.owner = ex; /* its close ends the executor (on_port_closed) */
		return 0;
	}
	stop_workers(ex); /* a thread failed to start: stop the ones that did */
	uv_close((uv_handle_t *)&ex->main.poll_idle, on_port_closed);
	uv_close((uv_handle_t *)&ex->main.async, on_port_closed);
fail_sync:
	free_sync(ex);
	return rc;
}

void ta_executor_submit(ta_executor *ex, ta_job *job)
{
	ta_executor_submit_to(ex, &ex->main, job);
}

void ta_executor_submit_to(ta_executor *ex, ta_executor_port *port, ta_job *job)
{
	ta_executor_expect(port, job);
	pthread_mutex_lock(&ex->lock);
	job_append(&ex->todo_head, &ex->todo_tail, job);
	pthread_cond_signal(&ex->cond);
	pthread_mutex_unlock(&ex->lock);
}

int ta_executor_running(const ta_executor *ex)
{
	return ex->main.running;
}

void ta_executor_stop(ta_executor *ex, ta_executor_closed_cb cb)
{
	ex->closed_cb = cb;
	stop_workers(ex);
	ta_executor_port_close(&ex->main);
}
