/* bench_metrics.c: what tileatomd's per-request counting costs (daemon/metrics.c): the
 * two clock readings and ta_metrics_record that dispatch adds to every request, timed on
 * 1 thread and on N threads that all count the same request kind (each thread in its own
 * shard of the counters, as the daemon's loop and workers are), each part alone and both
 * together.
 * Prints nanoseconds per request as each thread sees it; not part of make check.
 *
 * Usage: bench_metrics [THREADS [MILLIONS]]   (defaults: 4 threads, 20 million calls in all) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "metrics.h"

/* What a timing loop does per iteration. */
enum {
	BENCH_LOOP = 0,  /* nothing (the loop itself) */
	BENCH_CLOCK = 1, /* the two clock readings only */
	BENCH_COUNT = 2, /* ta_metrics_record only */
	BENCH_BOTH = 3   /* both: what dispatch adds to a request */
};

/* What one timing thread does. */
typedef struct bench_arg {
	ta_metrics *m; /* the shared counters */
	long calls;    /* calls to make */
	int what;      /* BENCH_LOOP, BENCH_CLOCK, BENCH_COUNT or BENCH_BOTH */
	uint64_t sink; /* keeps the empty loop from being optimised away */
} bench_arg;

/* Runs arg->calls iterations of the per-request counting (or an empty loop). */
static void *bench_thread(void *p)
{
	bench_arg *a = p;
	uint64_t sink = 0;
	for (long i = 0; i < a->calls; i++) {
		if (a->what == BENCH_LOOP) {
			sink += (uint64_t)i;
			__asm__ volatile("" : : "r"(sink) : "memory");
			continue;
		}
		struct timespec t0 = {0, 0}, t1 = {0, 1000};
		if (a->what & BENCH_CLOCK) {
			clock_gettime(CLOCK_MONOTONIC, &t0);
			clock_gettime(CLOCK_MONOTONIC, &t1);
		}
		if (a->what & BENCH_COUNT)
			ta_metrics_record(a->m, TA_REQ_INDEXED, false, 1, 40, 20,
			                  ta_elapsed_ns(&t0, &t1));
		else
			sink += (uint64_t)t1.tv_nsec;
	}
	a->sink = sink;
	return NULL;
}

/* Seconds of the monotonic clock. */
static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Wall nanoseconds per call, as each thread sees it, of nthreads threads making calls
 * calls each. */
static double run(ta_metrics *m, int nthreads, long calls, int what)
{
	pthread_t th[256];
	bench_arg args[256];
	double t0 = now_s();
	for (int i = 0; i < nthreads; i++) {
		args[i] = (bench_arg){m, calls, what, 0};
		if (pthread_create(&th[i], NULL, bench_thread, &args[i]) != 0) {
			fprintf(stderr, "bench_metrics: cannot start a thread\n");
			exit(1);
		}
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	return (now_s() - t0) * 1e9 / (double)calls;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	long millions = argc > 2 ? atol(argv[2]) : 20;
	if (threads < 1 || threads > 256 || millions < 1) {
		fprintf(stderr, "usage: bench_metrics [THREADS (1..256) [MILLIONS]]\n");
		return 2;
	}
	ta_metrics *m = calloc(1, sizeof(*m)); /* lock-free atomics: zero bytes are 0 */
	if (!m)
		return 1;
	long calls = millions * 1000000L;
	int counts[2] = {1, threads};
	for (int k = 0; k < (threads > 1 ? 2 : 1); k++) {
		int n = counts[k];
		double loop = run(m, n, calls / n, BENCH_LOOP);
		double clock = run(m, n, calls / n, BENCH_CLOCK);
		double count = run(m, n, calls / n, BENCH_COUNT);
		double both = run(m, n, calls / n, BENCH_BOTH);
		printf("%d thread%s: %.1f ns per request counted (%.1f ns the two clock readings, "
		       "%.1f ns the counters; %.1f ns the bare loop)\n",
		       n, n > 1 ? "s on one request kind" : "", both, clock, count, loop);
	}
	ta_kind_snapshot s;
	ta_metrics_read(m, TA_REQ_INDEXED, &s);
	printf("counted %llu requests\n", (unsigned long long)s.requests);
	free(m);
	return 0;
}
