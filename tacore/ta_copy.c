/* ta_copy.c: large host-memory copies over several threads (see ta_copy.h). Helpers are
 * started per copy (tens of microseconds against the milliseconds of a copy worth them)
 * and joined before it returns; the caller copies the first part itself. */
#include "ta_copy.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One thread's part of a copy. */
struct copy_part {
	unsigned char *dst;       /* the whole copy's destination */
	const unsigned char *src; /* the whole copy's source */
	size_t off, len;          /* this part: [off, off + len) */
	size_t chunk;             /* bytes per chunk (len when 0) */
	ta_copy_chunk_fn fn;      /* called per chunk, or NULL */
	void *ctx;                /* fn's context */
	int rc;                   /* 0, or what fn returned */
	pthread_t thread;         /* the helper running it */
	int started;              /* the helper was started (join it) */
};

/* Copies one part chunk by chunk, calling fn after each. */
static void copy_part_run(struct copy_part *p)
{
	size_t step = p->chunk ? p->chunk : p->len;
	for (size_t at = p->off; at < p->off + p->len; at += step) {
		size_t n = p->off + p->len - at < step ? p->off + p->len - at : step;
		memcpy(p->dst + at, p->src + at, n);
		if (p->fn && (p->rc = p->fn(p->ctx, at, n)) != 0)
			return;
	}
}

/* pthread entry of a helper. */
static void *copy_part_main(void *arg)
{
	copy_part_run((struct copy_part *)arg);
	return NULL;
}

int ta_copy_threads(size_t bytes)
{
	if (bytes < TA_COPY_PARALLEL_MIN)
		return 1;
	int n = 0;
	const char *env = getenv("TILEATOM_COPY_THREADS");
	if (env && *env) {
		char *end = NULL;
		long v = strtol(env, &end, 10);
		if (end && *end == '\0' && v >= 1 && v <= TA_COPY_THREADS_MAX)
			n = (int)v;
	}
	if (n == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus > 1 ? (int)(cpus / 2) : 1;
	}
	if (n > TA_COPY_THREADS_MAX)
		n = TA_COPY_THREADS_MAX;
	size_t by_size = bytes / TA_COPY_PER_THREAD_MIN;
	if ((size_t)n > by_size)
		n = by_size > 0 ? (int)by_size : 1;
	return n;
}

int ta_copy_parallel(void *dst, const void *src, size_t bytes, int threads, size_t chunk,
                     ta_copy_chunk_fn fn, void *ctx)
{
	if (threads < 1)
		threads = 1;
	if (threads > TA_COPY_THREADS_MAX)
		threads = TA_COPY_THREADS_MAX;
	struct copy_part parts[TA_COPY_THREADS_MAX];
	memset(parts, 0, sizeof parts);
	/* parts of whole 4 KiB pages (the last takes the rest) */
	size_t per = (bytes / (size_t)threads) & ~(size_t)4095;
	if (per == 0) {
		threads = 1;
		per = bytes;
	}
	for (int i = 0; i < threads; i++) {
		struct copy_part *p = &parts[i];
		p->dst = (unsigned char *)dst;
		p->src = (const unsigned char *)src;
		p->off = (size_t)i * per;
		p->len = i == threads - 1 ? bytes - p->off : per;
		p->chunk = chunk;
		p->fn = fn;
		p->ctx = ctx;
		p->rc = 0;
		p->started = 0;
	}
	for (int i = 1; i < threads; i++)
		parts[i].started =
		    pthread_create(&parts[i].thread, NULL, copy_part_main, &parts[i]) == 0;
	copy_part_run(&parts[0]);
	/* a helper that did not start: its part on this thread */
	for (int i = 1; i < threads; i++)
		if (!parts[i].started)
			copy_part_run(&parts[i]);
	int rc = parts[0].rc;
	for (int i = 1; i < threads; i++) {
		if (parts[i].started)
			pthread_join(parts[i].thread, NULL);
		if (rc == 0)
			rc = parts[i].rc;
	}
	return rc;
}
