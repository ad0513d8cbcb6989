/* tileatom-bench.c: a load generator for tileatomd in the spirit of redis-benchmark, built on
 * the public libtileatom-client alone. It opens -c connections (spread over --threads
 * threads; each thread submits and flushes a batch of -P requests on every client, then
 * goes round its clients in order, collecting a client's batch and at once submitting and
 * flushing its next one, as redis-benchmark writes a connection's next pipeline once its
 * replies are in), creates its own tiles (named
 * with its pid), runs the tests named by -t for -n requests or -d seconds each, and prints
 * per test the requests and elements per second, the latency percentiles (each request
 * from the submit of its batch to the collect of the batch's first response: a batch's
 * requests are submitted back to back and share one clock reading, taken before the first,
 * and its responses arrive together and share one, taken after the first is collected, as
 * redis-benchmark times a pipeline from its write to its first reply) and its own
 * CPU time per request
 * (getrusage of the whole process over the test, divided by the requests), so that the
 * generator's cost is not mistaken for the server's. Mutating integer tests are verified
 * afterwards: the tile's sum must equal the elements added.
 *
 * Failure modes: any failed call or response that does not fit its request stops the run
 * with a message naming the test and the cause; the tiles are destroyed and the exit
 * status is 1 (2 for usage errors, 130 after SIGINT/SIGTERM). */
#include "tileatom.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Exit status after a failed run. */
#define BENCH_EXIT_FAIL 1
/* Exit status after a usage error. */
#define BENCH_EXIT_USAGE 2
/* Exit status after SIGINT / SIGTERM. */
#define BENCH_EXIT_SIGNAL 130
/* Bins of the hist test's tile. */
#define BENCH_HIST_BINS 256
/* Default elements per hist request (other tests: 1). */
#define BENCH_HIST_ELEMENTS 1024
/* Connect timeout in milliseconds. */
#define BENCH_CONNECT_MS 5000
/* Tiles larger than this are not read back for verification. */
#define BENCH_VERIFY_MAX_BYTES (32u << 20)
/* Sub-buckets per power of two in the latency histogram (2^6: about 1.6% wide). */
#define LAT_SUB_BITS 6
/* Sub-buckets per power of two. */
#define LAT_SUB (1 << LAT_SUB_BITS)
/* Buckets covering every uint64_t nanosecond count. */
#define LAT_BUCKETS ((64 - LAT_SUB_BITS + 1) * LAT_SUB)

/* The tests. */
typedef enum bench_kind {
	T_PING,  /* round trip with no effect */
	T_ADD,   /* indexed add of 1 returning the old values (Redis INCR) */
	T_ADDNW, /* the same without old values (red on the GPU) */
	T_CAS,   /* indexed compare-and-swap 0 -> 1 returning the old values */
	T_GET,   /* atomic load of indexed elements */
	T_HIST,  /* flat indexed add of 1 in space shared into a 256-bin int32 tile */
	T_FILL,  /* element-wise add of the scalar 1 to the whole keys tile: small on the wire,
	            large in work (-r elements) */
	T_COUNT  /* number of tests */
} bench_kind;

/* Names of the tests, as -t takes them. */
static const char *const test_names[T_COUNT] = {"ping", "add",  "addnw", "cas",
                                                "get",  "hist", "fill"};

/* Output formats. */
typedef enum bench_format {
	OUT_TEXT, /* redis-benchmark-like paragraphs (or one line per test with -q) */
	OUT_CSV,  /* a header and one row per test */
	OUT_JSON  /* one JSON object */
} bench_format;

/* Command-line settings. */
typedef struct bench_opts {
	const char *address;   /* daemon address; NULL: the library's default socket */
	char address_buf[300]; /* storage for HOST:PORT built from -h and -p */
	int clients;           /* connections */
	int threads;           /* threads driving them */
	uint64_t requests;     /* requests per test (-n) */
	double duration;       /* seconds per test (-d); 0: use requests */
	int depth;             /* requests in flight per client (-P) */
	int order[T_COUNT];    /* tests to run, in order */
	int ntests;            /* entries used in order */
	int64_t elements;      /* elements per request (-e) */
	bool elements_set;     /* -e was given */
	tileatom_dtype dtype;  /* dtype of the keyspace tile */
	int64_t keyspace;      /* elements of the keyspace tile (-r) */
	int tiles;             /* keyspace tiles (--tiles): client k uses tile k % tiles */
	const char *placement; /* --placement: where every keyspace tile goes (NULL: see --tiles) */
	bench_format format;   /* output format */
	bool quiet;            /* -q: one line per test */
	int timeout_ms;        /* I/O timeout of every call */
	uint64_t seed;         /* seed of the key generators */
} bench_opts;

/* Most keyspace tiles (--tiles). */
#define BENCH_MAX_TILES 64

/* Latency histogram: log-linear buckets of nanoseconds. */
typedef struct lat_hist {
	uint64_t count[LAT_BUCKETS]; /* samples per bucket */
	uint64_t n;                  /* samples */
	uint64_t max_ns;             /* largest sample */
	double sum_ns;               /* sum of the samples */
} lat_hist;

/* One connection and what its current batch needs. */
typedef struct bench_client {
	tileatom_client *conn; /* the connection */
	uint64_t rng;          /* key generator state */
	uint64_t quota;        /* requests left in this test (-n mode) */
	int batch;             /* requests submitted and not collected yet */
	uint64_t sent_ns;      /* submit time of the current batch (one reading before its
	                          first request: its requests go back to back) */
	int64_t *keys;         /* element indices of one request (changed in place) */
	const char *keys_tile; /* the keyspace tile this client addresses */
	tileatom_array idx;    /* the operand descriptors of the test, built once per test */
	tileatom_array one;    /* (run_test): the keys, the scalar 1 and the scalar 0 of */
	tileatom_array zero;   /* the test's dtype */
	tileatom_addr addr;    /* get: flat addressing by idx */
} bench_client;

/* What every thread of one test shares (read-only while it runs, but stop). */
typedef struct bench_run {
	const bench_opts *o;                  /* settings */
	bench_kind kind;                      /* the test */
	const char *tile;                     /* tile the test addresses (NULL for ping) */
	char (*tiles)[TILEATOM_NAME_MAX + 1]; /* the keyspace tiles (--tiles) */
	int ntiles;                           /* how many */
	int64_t range;                        /* keys are drawn from [0, range) */
	int64_t elements;                     /* elements per request (0 for ping) */
	tileatom_dtype dtype;                 /* dtype of the tile */
	uint64_t one[2];                      /* the value 1 in dtype */
	uint64_t zero[2];                     /* the value 0 in dtype */
	tileatom_op_options opts;             /* options of the requests */
	bool want_data;                       /* responses carry elements * dtype-size bytes */
	size_t want_bytes;                    /* those bytes (0 without want_data) */
	tileatom_request_kind want_kind;      /* the kind of the test's responses */
	uint64_t end_ns;                      /* -d mode: when to stop starting batches */
	int stop;                             /* set (atomically) when a thread failed */
} bench_run;

/* One thread of a test and what it measured. */
typedef struct bench_thread {
	pthread_t tid;          /* the thread */
	bench_run *run;         /* the test */
	bench_client **clients; /* its clients */
	int nclients;           /* how many */
	lat_hist *lat;          /* its latencies */
	uint64_t requests;      /* requests completed */
	uint64_t elements;      /* elements completed */
	bool failed;            /* a call or response failed */
	char error[600];        /* what failed */
} bench_thread;

/* The figures of one test. */
typedef struct bench_result {
	bench_kind kind;   /* the test */
	int64_t elements;  /* elements per request */
	uint64_t requests; /* requests completed */
	double seconds;    /* wall time */
	double rps;        /* requests per second */
	double eps;        /* elements per second */
	double p50_us;     /* latency percentiles, microseconds */
	double p99_us;     /* 99th */
	double p999_us;    /* 99.9th */
	double max_us;     /* largest */
	double mean_us;    /* mean */
	double gen_cpu_us; /* generator CPU time per request, microseconds */
} bench_result;

/* Set by SIGINT / SIGTERM. */
static volatile sig_atomic_t interrupted;

/* Signal handler: asks the threads to stop after their batch. */
static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* Monotonic nanoseconds. */
static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* User + system CPU seconds of the whole process (every thread); -1 on failure. */
static double process_cpu_seconds(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* splitmix64: the next pseudo-random number of state *s. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/* A key in [0, range) from the random x: the high word of x * range (a multiplication
 * instead of a division; as uniform as x % range for ranges far below 2^64). */
static inline int64_t key_in(uint64_t x, int64_t range)
{
	return (int64_t)(((unsigned __int128)x * (uint64_t)range) >> 64);
}

/* Bucket of a latency of ns nanoseconds. */
static int lat_bucket(uint64_t ns)
{
	if (ns < LAT_SUB)
		return (int)ns;
	int e = 63 - __builtin_clzll(ns);
	int shift = e - LAT_SUB_BITS;
	return (shift + 1) * LAT_SUB + (int)((ns >> shift) & (LAT_SUB - 1));
}

/* Middle of bucket b in nanoseconds. */
static double lat_value(int b)
{
	if (b < LAT_SUB)
		return b;
	int shift = b / LAT_SUB - 1;
	uint64_t lo = (uint64_t)(LAT_SUB + b % LAT_SUB) << shift;
	return (double)lo + (double)((uint64_t)1 << shift) / 2.0;
}

/* Records one latency. */
static void lat_add(lat_hist *h, uint64_t ns)
{
	h->count[lat_bucket(ns)]++;
	h->n++;
	h->sum_ns += (double)ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

/* Adds the samples of src to dst. */
static void lat_merge(lat_hist *dst, const lat_hist *src)
{
	for (int b = 0; b < LAT_BUCKETS; b++)
		dst->count[b] += src->count[b];
	dst->n += src->n;
	dst->sum_ns += src->sum_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

/* The q-quantile (0 < q <= 1) in nanoseconds; 0 without samples. */
static double lat_quantile(const lat_hist *h, double q)
{
	if (h->n == 0)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)h->n);
	if ((double)rank < q * (double)h->n)
		rank++;
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (int b = 0; b < LAT_BUCKETS; b++) {
		seen += h->count[b];
		if (seen >= rank) {
			double v = lat_value(b);
			return v > (double)h->max_ns ? (double)h->max_ns : v;
		}
	}
	return (double)h->max_ns;
}

/* Writes a formatted message into the thread's error and marks it (and the run) failed. */
static void thread_fail(bench_thread *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void thread_fail(bench_thread *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->error, sizeof(t->error), fmt, ap);
	va_end(ap);
	t->failed = true;
	__atomic_store_n(&t->run->stop, 1, __ATOMIC_RELAXED);
}

/* Builds cl's operand descriptors for test r once (submit_one only changes the keys in
 * place). */
static void client_operands(const bench_run *r, bench_client *cl)
{
	cl->idx = r->elements > 1 && r->kind != T_FILL /* fill draws no keys */
	              ? tileatom_vector(TILEATOM_INT64, r->elements, cl->keys)
	              : tileatom_scalar(TILEATOM_INT64, cl->keys);
	cl->one = tileatom_scalar(r->dtype, r->one);
	cl->zero = tileatom_scalar(r->dtype, r->zero);
	cl->addr = (tileatom_addr){TILEATOM_ADDR_FLAT, NULL, 0, 1, &cl->idx};
}

/* Submits one request of the run's test on cl; returns a tileatom_status. */
static int submit_one(const bench_run *r, bench_client *cl, tileatom_error *err)
{
	if (r->kind == T_PING)
		return tileatom_submit_ping(cl->conn, NULL, err);
	const char *tile = r->kind == T_HIST || !cl->keys_tile ? r->tile : cl->keys_tile;
	if (r->kind == T_FILL)
		return tileatom_submit_elementwise(cl->conn, tile, TILEATOM_OP_ADD, NULL, &cl->one,
		                                   NULL, &r->opts, NULL, err);
	for (int64_t i = 0; i < r->elements; i++)
		cl->keys[i] = key_in(rng_next(&cl->rng), r->range);
	switch (r->kind) {
	case T_ADD:
	case T_ADDNW:
	case T_HIST:
		return tileatom_submit_indexed(cl->conn, tile, TILEATOM_OP_ADD, NULL, 1, &cl->idx,
		                               true, &cl->one, NULL, &r->opts, NULL, err);
	case T_CAS:
		return tileatom_submit_indexed(cl->conn, tile, TILEATOM_OP_CAS, NULL, 1, &cl->idx,
		                               true, &cl->one, &cl->zero, &r->opts, NULL, err);
	case T_GET:
		return tileatom_submit_atomic_load(cl->conn, tile, NULL, &cl->addr, &r->opts, NULL,
		                                   err);
	default:
		return TILEATOM_E_INVALID_ARGUMENT;
	}
}

/* Checks that a collected response fits the run's test; false with a message in msg. */
static bool response_fits(const bench_run *r, const tileatom_response *resp, char *msg, size_t n)
{
	tileatom_request_kind want = r->want_kind;
	if (resp->kind != want) {
		snprintf(msg, n, "response of kind %d to a request of kind %d", (int)resp->kind,
		         (int)want);
		return false;
	}
	if (r->kind == T_PING)
		return true;
	if (r->kind != T_GET && resp->applied != (uint64_t)r->elements) {
		snprintf(msg, n,
		         "%" PRIu64 " of %" PRId64 " elements applied (%" PRIu64 " skipped)",
		         resp->applied, r->elements, resp->skipped);
		return false;
	}
	size_t want_bytes = r->want_bytes;
	if (r->want_data && resp->data_bytes != want_bytes) {
		snprintf(msg, n, "%zu bytes of values returned, %zu expected", resp->data_bytes,
		         want_bytes);
		return false;
	}
	return true;
}

/* Submits client k's next batch (at most -P requests, fewer when its quota ends) and, with
 * several clients on the thread, flushes it. Returns 1 when a batch went out, 0 when the
 * client's quota is used up, -1 after a failure. */
static int client_submit(bench_thread *t, int k)
{
	const bench_run *r = t->run;
	bench_client *cl = t->clients[k];
	int b = r->o->depth;
	if (r->o->duration <= 0) {
		if (cl->quota == 0)
			return 0;
		if (cl->quota < (uint64_t)b)
			b = (int)cl->quota;
	}
	tileatom_error err = {0, ""};
	cl->sent_ns = now_ns(); /* the batch's requests leave back to back */
	for (int i = 0; i < b; i++) {
		int rc = submit_one(r, cl, &err);
		if (rc != TILEATOM_OK) {
			thread_fail(t, "%s: submit failed: %s (%s)", test_names[r->kind],
			            err.message, tileatom_strerror(rc));
			return -1;
		}
		cl->batch = i + 1;
	}
	/* Several clients per thread: the batch must leave before this thread blocks
	 * collecting another client's. */
	if (t->nclients > 1) {
		int rc = tileatom_flush(cl->conn, &err);
		if (rc != TILEATOM_OK) {
			thread_fail(t, "%s: flush failed: %s (%s)", test_names[r->kind],
			            err.message, tileatom_strerror(rc));
			return -1;
		}
	}
	return 1;
}

/* Collects client k's outstanding batch, recording latencies; false after a failure. */
static bool client_collect(bench_thread *t, int k)
{
	const bench_run *r = t->run;
	bench_client *cl = t->clients[k];
	tileatom_error err = {0, ""}; /* once: the loop stops at the first error */
	uint64_t done = 0;
	for (int i = 0; i < cl->batch; i++) {
		tileatom_response resp;
		int rc = tileatom_collect(cl->conn, &resp, &err);
		if (i == 0) /* the batch's responses arrive together: one clock reading */
			done = now_ns();
		if (rc != TILEATOM_OK) {
			thread_fail(t, "%s: request failed: %s (%s)", test_names[r->kind],
			            err.message, tileatom_strerror(rc));
			return false;
		}
		char msg[200];
		if (!response_fits(r, &resp, msg, sizeof(msg))) {
			thread_fail(t, "%s: bad response: %s", test_names[r->kind], msg);
			return false;
		}
		lat_add(t->lat, done - cl->sent_ns);
		t->requests++;
		t->elements += (uint64_t)r->elements;
	}
	if (r->o->duration <= 0)
		cl->quota -= (uint64_t)cl->batch;
	cl->batch = 0;
	return true;
}

/* Thread body: every client's first batch, then round the clients in order, each one's
 * next batch submitted as soon as its last one is collected (as redis-benchmark writes a
 * connection's next pipeline once its replies are in), so that the other clients'
 * batches stay in flight meanwhile; until the quota or the time is used up, a failure or
 * a signal, after which the batches in flight are collected and no new ones go out. */
static void *thread_main(void *arg)
{
	bench_thread *t = arg;
	bench_run *r = t->run;
	bool submitting = true;
	for (int k = 0; k < t->nclients; k++)
		if (client_submit(t, k) < 0)
			return NULL;
	for (;;) {
		int in_flight = 0;
		for (int k = 0; k < t->nclients; k++) {
			if (t->clients[k]->batch == 0)
				continue;
			if (!client_collect(t, k))
				return NULL;
			if (interrupted || __atomic_load_n(&r->stop, __ATOMIC_RELAXED) ||
			    (r->o->duration > 0 && now_ns() >= r->end_ns))
				submitting = false;
			if (submitting) {
				int sent = client_submit(t, k);
				if (sent < 0)
					return NULL;
				in_flight += sent;
			}
		}
		if (in_flight == 0)
			break;
	}
	return NULL;
}

/* Prints a usage error and exits. */
static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("tileatom-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see tileatom-bench --help)\n", stderr);
	exit(BENCH_EXIT_USAGE);
}

static const char usage_text[] =
    "Usage: tileatom-bench [-s SOCKET | -h HOST -p PORT] [-c CLIENTS] [-n REQUESTS | -d SECONDS]\n"
    "                      [-P DEPTH] [-t TESTS] [-e ELEMENTS] [-r KEYSPACE] [--dtype DTYPE]\n"
    "                      [--threads N] [--tiles N] [--placement P] [--csv | --json] [-q]\n"
    "\n"
    "Load generator for tileatomd (in the spirit of redis-benchmark).\n"
    "\n"
    "  -s SOCKET        daemon Unix socket (default: $TILEATOM_SOCKET or the daemon's\n"
    "                   default path); HOST:PORT is taken too\n"
    "  -h HOST          daemon host (TCP), or HOST:PORT\n"
    "  -p PORT          daemon port (with -h; default host 127.0.0.1)\n"
    "  -c CLIENTS       parallel connections (default 50)\n"
    "  -n REQUESTS      requests per test, over all clients (default 100000)\n"
    "  -d SECONDS       run each test this long instead of -n requests\n"
    "  -P DEPTH         requests in flight per client, pipelined (default 1)\n"
    "  -t TESTS         comma-separated: ping,add,addnw,cas,get,hist,fill (default all\n"
    "                   but fill)\n"
    "  -e ELEMENTS      elements per request (default 1; hist 1024)\n"
    "  -r KEYSPACE      elements of the tile the keys address (default 10000)\n"
    "  --dtype DTYPE    dtype of that tile (default int64; hist always uses int32)\n"
    "  --threads N      threads driving the clients (default 1)\n"
    "  --tiles N        keyspace tiles (default 1): client k addresses tile k %% N;\n"
    "                   with N > 1, tile t is placed on device t %% D of a daemon\n"
    "                   serving D devices (tileatomd --devices), so all are hit\n"
    "  --placement P    place every keyspace tile at P instead (a device, auto, shard;\n"
    "                   as tileatom-cli create --device)\n"
    "  --timeout MS     I/O timeout of every call (default 30000; 0: none)\n"
    "  --seed N         seed of the random keys (default 1)\n"
    "  --csv            one CSV header and one row per test\n"
    "  --json           one JSON object\n"
    "  -q               quiet: one line per test\n"
    "  --help           show this help\n"
    "\n"
    "Tests: ping (round trip), add (indexed add of 1 at random elements returning the old\n"
    "values, like INCR), addnw (the same without old values), cas (compare-and-swap 0->1\n"
    "at random elements), get (atomic load of random elements), hist (flat indexed add of\n"
    "1 in space shared of E random keys into a 256-bin int32 tile), fill (element-wise add\n"
    "of 1 to all -r elements: small on the wire, large in work; not in the default set).\n"
    "Latency is measured per request from the submit of its batch (the -P requests of a\n"
    "client are submitted back to back and share one clock reading, taken before the\n"
    "first) to the collect of the batch's first response (its responses arrive together\n"
    "and share one reading, as redis-benchmark times a pipeline to its first reply);\n"
    "generator CPU is this process's CPU time per request. See tileatom-bench(1).\n";

/* Parses a positive integer option into *out (at most max); exits on a bad value. */
static void parse_count(const char *opt, const char *text, int64_t max, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text || *end || v < 1 || v > max)
		usage_error("%s wants an integer from 1 to %lld, not '%s'", opt, (long long)max,
		            text);
	*out = v;
}

/* Parses the -t list into o->order. */
static void parse_tests(bench_opts *o, const char *list)
{
	char *copy = strdup(list);
	if (!copy) {
		fputs("tileatom-bench: out of memory\n", stderr);
		exit(BENCH_EXIT_FAIL);
	}
	o->ntests = 0;
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int k = 0;
		while (k < T_COUNT && strcmp(tok, test_names[k]) != 0)
			k++;
		if (k == T_COUNT) {
			char names[128] = "";
			for (int i = 0; i < T_COUNT; i++)
				snprintf(names + strlen(names), sizeof(names) - strlen(names),
				         "%s%s", i ? "," : "", test_names[i]);
			usage_error("unknown test '%s' (tests: %s)", tok, names);
		}
		bool dup = false;
		for (int i = 0; i < o->ntests; i++)
			dup = dup || o->order[i] == k;
		if (!dup)
			o->order[o->ntests++] = k;
	}
	free(copy);
	if (o->ntests == 0)
		usage_error("-t names no test");
}

/* Parses the command line into *o. */
static void parse_args(bench_opts *o, int argc, char **argv)
{
	enum {
		OPT_DTYPE = 256,
		OPT_CSV,
		OPT_JSON,
		OPT_THREADS,
		OPT_TIMEOUT,
		OPT_SEED,
		OPT_HELP,
		OPT_TILES,
		OPT_PLACEMENT
	};
	static const struct option longs[] = {{"dtype", required_argument, NULL, OPT_DTYPE},
	                                      {"csv", no_argument, NULL, OPT_CSV},
	                                      {"json", no_argument, NULL, OPT_JSON},
	                                      {"threads", required_argument, NULL, OPT_THREADS},
	                                      {"tiles", required_argument, NULL, OPT_TILES},
	                                      {"placement", required_argument, NULL, OPT_PLACEMENT},
	                                      {"timeout", required_argument, NULL, OPT_TIMEOUT},
	                                      {"seed", required_argument, NULL, OPT_SEED},
	                                      {"help", no_argument, NULL, OPT_HELP},
	                                      {NULL, 0, NULL, 0}};
	memset(o, 0, sizeof(*o));
	o->clients = 50;
	o->threads = 1;
	o->requests = 100000;
	o->depth = 1;
	o->elements = 1;
	o->dtype = TILEATOM_INT64;
	o->keyspace = 10000;
	o->tiles = 1;
	o->timeout_ms = 30000;
	o->seed = 1;
	/* the default set: every test but fill (whose work is the whole keyspace) */
	o->ntests = 0;
	for (int k = 0; k < T_COUNT; k++)
		if (k != T_FILL)
			o->order[o->ntests++] = k;
	const char *socket = NULL, *host = NULL, *port = NULL;
	int64_t v;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:h:p:c:n:d:P:t:e:r:q", longs, NULL)) != -1) {
		switch (c) {
		case 's':
			socket = optarg;
			break;
		case 'h':
			host = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'c':
			parse_count("-c", optarg, 100000, &v);
			o->clients = (int)v;
			break;
		case 'n':
			parse_count("-n", optarg, INT64_MAX, &v);
			o->requests = (uint64_t)v;
			break;
		case 'd': {
			char *end;
			errno = 0;
			o->duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->duration > 0) ||
			    o->duration > 86400)
				usage_error("-d wants seconds (up to 86400), not '%s'", optarg);
			break;
		}
		case 'P':
			parse_count("-P", optarg, 1 << 20, &v);
			o->depth = (int)v;
			break;
		case 't':
			parse_tests(o, optarg);
			break;
		case 'e':
			parse_count("-e", optarg, 1 << 24, &o->elements);
			o->elements_set = true;
			break;
		case 'r':
			parse_count("-r", optarg, INT64_C(1) << 40, &o->keyspace);
			break;
		case 'q':
			o->quiet = true;
			break;
		case OPT_DTYPE:
			o->dtype = tileatom_dtype_parse(optarg);
			if (o->dtype == TILEATOM_DTYPE_NONE || o->dtype == TILEATOM_BOOL)
				usage_error("unknown dtype '%s'", optarg);
			break;
		case OPT_CSV:
			o->format = OUT_CSV;
			break;
		case OPT_JSON:
			o->format = OUT_JSON;
			break;
		case OPT_TILES:
			parse_count("--tiles", optarg, BENCH_MAX_TILES, &v);
			o->tiles = (int)v;
			break;
		case OPT_PLACEMENT:
			o->placement = optarg; /* the daemon checks it at the first create */
			break;
		case OPT_THREADS:
			parse_count("--threads", optarg, 4096, &v);
			o->threads = (int)v;
			break;
		case OPT_TIMEOUT: {
			char *end;
			errno = 0;
			long t = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || t < 0 || t > INT_MAX)
				usage_error("--timeout wants milliseconds, not '%s'", optarg);
			o->timeout_ms = (int)t;
			break;
		}
		case OPT_SEED:
			parse_count("--seed", optarg, INT64_MAX, &v);
			o->seed = (uint64_t)v;
			break;
		case OPT_HELP:
			fputs(usage_text, stdout);
			exit(0);
		case ':':
			usage_error("option %s wants a value", argv[optind - 1]);
		default:
			usage_error("unknown option %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (socket && (host || port))
		usage_error("-s and -h/-p exclude each other");
	if (socket) {
		o->address = socket;
	} else if (host && !port) {
		if (!strchr(host, ':'))
			usage_error("-h %s wants -p PORT (or -h HOST:PORT)", host);
		o->address = host;
	} else if (port) {
		if (!host)
			host = "127.0.0.1";
		bool v6 = strchr(host, ':') != NULL && host[0] != '[';
		snprintf(o->address_buf, sizeof(o->address_buf), v6 ? "[%s]:%s" : "%s:%s", host,
		         port);
		o->address = o->address_buf;
	}
	if (o->threads > o->clients)
		o->threads = o->clients;
}

/* Connects every client; false (message printed) on failure. */
static bool connect_clients(const bench_opts *o, bench_client *cl, int64_t max_elements)
{
	for (int k = 0; k < o->clients; k++) {
		tileatom_error err = {0, ""};
		cl[k].rng = o->seed * 0x100000001b3u + (uint64_t)k;
		cl[k].keys = calloc((size_t)max_elements, sizeof(int64_t));
		if (!cl[k].keys) {
			fputs("tileatom-bench: out of memory\n", stderr);
			return false;
		}
		int rc = tileatom_connect(o->address, BENCH_CONNECT_MS, &cl[k].conn, &err);
		if (rc != TILEATOM_OK) {
			fprintf(stderr, "tileatom-bench: client %d: %s\n", k + 1, err.message);
			return false;
		}
		tileatom_set_timeout(cl[k].conn, o->timeout_ms);
	}
	return true;
}

/* Sets every element of tile to zero through the control connection. */
static bool reset_tile(tileatom_client *ctl, const char *tile, tileatom_dtype dtype)
{
	uint64_t zero[2] = {0, 0};
	tileatom_array z = tileatom_scalar(dtype, zero);
	tileatom_error err = {0, ""};
	if (tileatom_write(ctl, tile, NULL, &z, &err) != TILEATOM_OK) {
		fprintf(stderr, "tileatom-bench: resetting %s: %s\n", tile, err.message);
		return false;
	}
	return true;
}

static bool add_tile_sum(tileatom_client *ctl, const bench_run *r, const char *name, size_t esize,
                         uint64_t *total);

/* After an add-like test on an integer tile: the sum of the tile (wrapping like the dtype)
 * must equal the elements added. Larger tiles and float dtypes are not checked. */
static bool verify_sum(tileatom_client *ctl, const bench_run *r, uint64_t added)
{
	if (!tileatom_dtype_is_int(r->dtype))
		return true;
	size_t esize = tileatom_dtype_size(r->dtype);
	if ((uint64_t)r->range * esize > BENCH_VERIFY_MAX_BYTES)
		return true;
	uint64_t sum = 0;
	int ntiles = r->kind == T_HIST ? 1 : r->ntiles;
	for (int t = 0; t < ntiles; t++) {
		const char *name = r->kind == T_HIST ? r->tile : r->tiles[t];
		if (!add_tile_sum(ctl, r, name, esize, &sum))
			return false;
	}
	uint64_t mask = esize == 4 ? 0xffffffffu : UINT64_MAX;
	if ((sum & mask) != (added & mask)) {
		fprintf(stderr,
		        "tileatom-bench: %s: verification failed: the tile%s sum%s to %" PRIu64
		        ", %" PRIu64 " elements were added\n",
		        test_names[r->kind], ntiles > 1 ? "s" : "", ntiles > 1 ? "" : "s",
		        sum & mask, added & mask);
		return false;
	}
	return true;
}

/* Adds the elements of tile name (esize bytes each) to *sum; false (message printed) when
 * it cannot be read. */
static bool add_tile_sum(tileatom_client *ctl, const bench_run *r, const char *name, size_t esize,
                         uint64_t *total)
{
	void *data = NULL;
	size_t nbytes = 0;
	tileatom_error err = {0, ""};
	if (tileatom_read_alloc(ctl, name, NULL, &data, &nbytes, &err) != TILEATOM_OK) {
		fprintf(stderr, "tileatom-bench: %s: reading %s back: %s\n", test_names[r->kind],
		        name, err.message);
		return false;
	}
	uint64_t sum = *total;
	for (size_t i = 0; i + esize <= nbytes; i += esize) {
		if (esize == 4) {
			uint32_t x;
			memcpy(&x, (const uint8_t *)data + i, 4);
			sum += x;
		} else {
			uint64_t x;
			memcpy(&x, (const uint8_t *)data + i, 8);
			sum += x;
		}
	}
	tileatom_free(data);
	*total = sum;
	return true;
}

/* Runs one test over all clients; false (message printed) on failure. */
static bool run_test(const bench_opts *o, bench_client *cl, tileatom_client *ctl, bench_kind kind,
                     char (*keys_tiles)[TILEATOM_NAME_MAX + 1], const char *hist_tile,
                     bench_result *res)
{
	bench_run r;
	memset(&r, 0, sizeof(r));
	const char *keys_tile = keys_tiles[0];
	r.tiles = keys_tiles;
	r.ntiles = o->tiles;
	r.o = o;
	r.kind = kind;
	tileatom_op_options_init(&r.opts);
	r.dtype = kind == T_HIST ? TILEATOM_INT32 : o->dtype;
	r.tile = kind == T_PING ? NULL : kind == T_HIST ? hist_tile : keys_tile;
	r.range = kind == T_HIST ? BENCH_HIST_BINS : o->keyspace;
	r.elements = kind == T_PING                       ? 0
	             : kind == T_FILL                     ? o->keyspace
	             : kind == T_HIST && !o->elements_set ? BENCH_HIST_ELEMENTS
	                                                  : o->elements;
	tileatom_error err = {0, ""};
	if (tileatom_value_parse(r.dtype, "1", r.one, &err) != TILEATOM_OK ||
	    tileatom_value_parse(r.dtype, "0", r.zero, &err) != TILEATOM_OK) {
		fprintf(stderr, "tileatom-bench: %s\n", err.message);
		return false;
	}
	r.opts.want_old = kind == T_ADD || kind == T_CAS;
	r.want_data = kind == T_ADD || kind == T_CAS || kind == T_GET;
	r.want_bytes = r.want_data ? (size_t)r.elements * tileatom_dtype_size(r.dtype) : 0;
	r.want_kind = kind == T_PING   ? TILEATOM_REQ_PING
	              : kind == T_GET  ? TILEATOM_REQ_ATOMIC_LOAD
	              : kind == T_FILL ? TILEATOM_REQ_ELEMENTWISE
	                               : TILEATOM_REQ_INDEXED;
	if (kind == T_HIST)
		r.opts.space = TILEATOM_SPACE_SHARED;
	bool mutates =
	    kind == T_ADD || kind == T_ADDNW || kind == T_CAS || kind == T_HIST || kind == T_FILL;
	for (int t = 0; mutates && t < (kind == T_HIST ? 1 : o->tiles); t++)
		if (!reset_tile(ctl, kind == T_HIST ? r.tile : keys_tiles[t], r.dtype))
			return false;

	/* The -n requests are shared out over the clients. */
	for (int k = 0; k < o->clients; k++) {
		cl[k].quota = o->requests / (uint64_t)o->clients +
		              ((uint64_t)k < o->requests % (uint64_t)o->clients ? 1 : 0);
		client_operands(&r, &cl[k]);
		cl[k].keys_tile =
		    kind == T_PING || kind == T_HIST ? NULL : keys_tiles[k % o->tiles];
	}
	bench_thread *th = calloc((size_t)o->threads, sizeof(*th));
	bench_client **order = calloc((size_t)o->clients, sizeof(*order));
	if (!th || !order) {
		fputs("tileatom-bench: out of memory\n", stderr);
		free(th);
		free(order);
		return false;
	}
	/* Client k goes to thread k % threads. */
	int used = 0;
	for (int t = 0; t < o->threads; t++) {
		th[t].run = &r;
		th[t].clients = order + used;
		for (int k = t; k < o->clients; k += o->threads)
			order[used++] = &cl[k];
		th[t].nclients = (int)(order + used - th[t].clients);
		th[t].lat = calloc(1, sizeof(lat_hist));
		if (!th[t].lat) {
			fputs("tileatom-bench: out of memory\n", stderr);
			for (int i = 0; i <= t; i++)
				free(th[i].lat);
			free(th);
			free(order);
			return false;
		}
	}

	double cpu0 = process_cpu_seconds();
	uint64_t t0 = now_ns();
	r.end_ns = t0 + (uint64_t)(o->duration * 1e9);
	int started = 0;
	bool ok = true;
	for (int t = 0; t < o->threads; t++) {
		int e = pthread_create(&th[t].tid, NULL, thread_main, &th[t]);
		if (e != 0) {
			fprintf(stderr, "tileatom-bench: cannot start a thread: %s\n", strerror(e));
			__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
			ok = false;
			break;
		}
		started++;
	}
	for (int t = 0; t < started; t++)
		pthread_join(th[t].tid, NULL);
	uint64_t t1 = now_ns();
	double cpu1 = process_cpu_seconds();

	lat_hist *all = calloc(1, sizeof(*all));
	uint64_t requests = 0, elements = 0;
	for (int t = 0; t < o->threads; t++) {
		if (th[t].failed) {
			fprintf(stderr, "tileatom-bench: %s\n", th[t].error);
			ok = false;
		}
		if (all)
			lat_merge(all, th[t].lat);
		requests += th[t].requests;
		elements += th[t].elements;
		free(th[t].lat);
	}
	free(th);
	free(order);
	if (!all) {
		fputs("tileatom-bench: out of memory\n", stderr);
		return false;
	}
	memset(res, 0, sizeof(*res));
	res->kind = kind;
	res->elements = r.elements;
	res->requests = requests;
	res->seconds = (double)(t1 - t0) / 1e9;
	res->rps = res->seconds > 0 ? (double)requests / res->seconds : 0;
	res->eps = res->seconds > 0 ? (double)elements / res->seconds : 0;
	res->p50_us = lat_quantile(all, 0.50) / 1e3;
	res->p99_us = lat_quantile(all, 0.99) / 1e3;
	res->p999_us = lat_quantile(all, 0.999) / 1e3;
	res->max_us = (double)all->max_ns / 1e3;
	res->mean_us = all->n ? all->sum_ns / (double)all->n / 1e3 : 0;
	res->gen_cpu_us =
	    requests && cpu0 >= 0 && cpu1 >= 0 ? (cpu1 - cpu0) / (double)requests * 1e6 : 0;
	free(all);
	if (ok && !interrupted &&
	    (kind == T_ADD || kind == T_ADDNW || kind == T_HIST || kind == T_FILL))
		ok = verify_sum(ctl, &r, elements);
	return ok;
}

/* Prints one result in the chosen format (first: the first result printed). */
static void print_result(const bench_opts *o, const bench_result *res, bool first)
{
	const char *name = test_names[res->kind];
	switch (o->format) {
	case OUT_CSV:
		if (first)
			puts(
			    "test,clients,pipeline,elements,requests,seconds,rps,eps,p50_us,p99_us,"
			    "p999_us,max_us,gen_cpu_us_per_req");
		printf("%s,%d,%d,%" PRId64 ",%" PRIu64 ",%.3f,%.2f,%.2f,%.1f,%.1f,%.1f,%.1f,%.2f\n",
		       name, o->clients, o->depth, res->elements, res->requests, res->seconds,
		       res->rps, res->eps, res->p50_us, res->p99_us, res->p999_us, res->max_us,
		       res->gen_cpu_us);
		break;
	case OUT_JSON:
		printf("%s\n    {\"test\": \"%s\", \"elements\": %" PRId64
		       ", \"requests\": %" PRIu64
		       ", \"seconds\": %.3f, \"rps\": %.2f, \"eps\": %.2f, \"p50_us\": %.1f, "
		       "\"p99_us\": %.1f, \"p999_us\": %.1f, \"max_us\": %.1f, \"mean_us\": %.1f, "
		       "\"gen_cpu_us_per_req\": %.2f}",
		       first ? "" : ",", name, res->elements, res->requests, res->seconds, res->rps,
		       res->eps, res->p50_us, res->p99_us, res->p999_us, res->max_us, res->mean_us,
		       res->gen_cpu_us);
		break;
	default:
		if (o->quiet) {
			printf("%s: %.2f requests per second, %.2f elements per second, p50=%.3f "
			       "msec, generator %.2f usec/request\n",
			       name, res->rps, res->eps, res->p50_us / 1e3, res->gen_cpu_us);
			break;
		}
		printf("====== %s ======\n", name);
		printf("  %" PRIu64 " requests completed in %.2f seconds\n", res->requests,
		       res->seconds);
		printf("  %d parallel clients on %d thread%s, pipeline %d, %" PRId64
		       " element%s per request\n",
		       o->clients, o->threads, o->threads == 1 ? "" : "s", o->depth, res->elements,
		       res->elements == 1 ? "" : "s");
		printf("  throughput: %.2f requests per second, %.2f elements per second\n",
		       res->rps, res->eps);
		printf("  latency (usec): p50 %.1f, p99 %.1f, p99.9 %.1f, max %.1f, mean %.1f\n",
		       res->p50_us, res->p99_us, res->p999_us, res->max_us, res->mean_us);
		printf("  generator CPU: %.2f usec per request\n\n", res->gen_cpu_us);
		break;
	}
	fflush(stdout);
}

/* Prints s as a JSON string literal. */
static void json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

/* Creates a tile through the control connection where place says (NULL: the daemon's
 * default placement); false (message printed) on failure. */
static bool create_tile_placed(tileatom_client *ctl, const char *name, tileatom_dtype dtype,
                               int64_t n, const char *place)
{
	tileatom_error err = {0, ""};
	if (tileatom_create_placed(ctl, name, dtype, 1, &n, NULL, 0, place, NULL, &err) !=
	    TILEATOM_OK) {
		fprintf(stderr, "tileatom-bench: creating tile %s: %s\n", name, err.message);
		return false;
	}
	return true;
}

/* Creates a tile through the control connection; false (message printed) on failure. */
static bool create_tile(tileatom_client *ctl, const char *name, tileatom_dtype dtype, int64_t n)
{
	return create_tile_placed(ctl, name, dtype, n, NULL);
}

/* The devices the daemon serves (its stats; 1 when it does not say). */
static int device_count(tileatom_client *ctl)
{
	tileatom_device_stats *d = NULL;
	size_t n = 0;
	tileatom_error err = {0, ""};
	if (tileatom_stats_devices(ctl, &d, &n, &err) != TILEATOM_OK || n == 0)
		n = 1;
	tileatom_free(d);
	return (int)n;
}

/* Destroys a tile through the control connection, reporting a failure. */
static bool destroy_tile(tileatom_client *ctl, const char *name)
{
	tileatom_error err = {0, ""};
	if (tileatom_destroy(ctl, name, &err) != TILEATOM_OK) {
		fprintf(stderr, "tileatom-bench: destroying tile %s: %s\n", name, err.message);
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	bench_opts o;
	parse_args(&o, argc, argv);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) {
		perror("tileatom-bench: sigaction");
		return BENCH_EXIT_FAIL;
	}

	bool need_keys = false, need_hist = false;
	int64_t max_elements = 1;
	for (int i = 0; i < o.ntests; i++) {
		bench_kind k = (bench_kind)o.order[i];
		need_keys = need_keys || (k != T_PING && k != T_HIST);
		need_hist = need_hist || k == T_HIST;
		int64_t e = k == T_HIST && !o.elements_set ? BENCH_HIST_ELEMENTS
		            : k == T_FILL                  ? 1 /* no keys are drawn */
		                                           : o.elements;
		if (e > max_elements)
			max_elements = e;
	}

	tileatom_client *ctl = NULL;
	tileatom_error err = {0, ""};
	if (tileatom_connect(o.address, BENCH_CONNECT_MS, &ctl, &err) != TILEATOM_OK) {
		fprintf(stderr, "tileatom-bench: %s\n", err.message);
		return BENCH_EXIT_FAIL;
	}
	tileatom_set_timeout(ctl, o.timeout_ms);
	static char keys_tiles[BENCH_MAX_TILES][TILEATOM_NAME_MAX + 1];
	char hist_tile[TILEATOM_NAME_MAX + 1];
	for (int t = 0; t < o.tiles; t++)
		if (t == 0)
			snprintf(keys_tiles[t], sizeof(keys_tiles[t]), "tileatom-bench-%ld-keys",
			         (long)getpid());
		else
			snprintf(keys_tiles[t], sizeof(keys_tiles[t]), "tileatom-bench-%ld-keys-%d",
			         (long)getpid(), t);
	snprintf(hist_tile, sizeof(hist_tile), "tileatom-bench-%ld-hist", (long)getpid());
	int keys_made = 0; /* keyspace tiles created */
	bool hist_made = false;
	bool ok = true;
	int ndev = o.tiles > 1 && !o.placement ? device_count(ctl) : 1;
	for (int t = 0; need_keys && ok && t < o.tiles; t++) {
		char place[16];
		snprintf(place, sizeof(place), "%d", t % ndev);
		ok = create_tile_placed(ctl, keys_tiles[t], o.dtype, o.keyspace,
		                        o.placement ? o.placement : o.tiles > 1 ? place : NULL);
		keys_made += ok;
	}
	if (ok && need_hist)
		ok = hist_made = create_tile(ctl, hist_tile, TILEATOM_INT32, BENCH_HIST_BINS);

	bench_client *cl = calloc((size_t)o.clients, sizeof(*cl));
	if (!cl) {
		fputs("tileatom-bench: out of memory\n", stderr);
		ok = false;
	}
	if (ok)
		ok = connect_clients(&o, cl, max_elements);

	bool json_open = ok && o.format == OUT_JSON;
	if (json_open) {
		fputs("{\"address\": ", stdout);
		json_string(tileatom_address(ctl));
		printf(", \"clients\": %d, \"threads\": %d, \"pipeline\": %d, \"dtype\": \"%s\", "
		       "\"keyspace\": %" PRId64 ", \"results\": [",
		       o.clients, o.threads, o.depth, tileatom_dtype_name(o.dtype), o.keyspace);
	}
	int printed = 0;
	for (int i = 0; ok && i < o.ntests && !interrupted; i++) {
		bench_result res;
		ok = run_test(&o, cl, ctl, (bench_kind)o.order[i], keys_tiles, hist_tile, &res);
		if (ok && !interrupted)
			print_result(&o, &res, printed++ == 0);
	}
	if (json_open)
		puts(printed > 0 ? "\n]}" : "]}");

	if (cl) {
		for (int k = 0; k < o.clients; k++) {
			tileatom_close(cl[k].conn);
			free(cl[k].keys);
		}
		free(cl);
	}
	for (int t = 0; t < keys_made; t++)
		if (!destroy_tile(ctl, keys_tiles[t]))
			ok = false;
	if (hist_made && !destroy_tile(ctl, hist_tile))
		ok = false;
	tileatom_close(ctl);
	if (interrupted) {
		fputs("tileatom-bench: interrupted\n", stderr);
		return BENCH_EXIT_SIGNAL;
	}
	return ok ? 0 : BENCH_EXIT_FAIL;
}
