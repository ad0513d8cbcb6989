/* bench_gpu.c: timings of the CUDA backend's kernels (CUDA builds only; run on a GPU).
 *
 * Each case builds its request through ta_plan_build (the real validation path), copies
 * the operands to the device once, and times ta_cuda_launch_plan alone with CUDA events
 * (no staging, no copies): 3 warm-up launches, then the median of --reps (default 20)
 * timed launches, two ways:
 *  - G elem/s: an event, the ta_cuda_launch_plan call, an event, on an idle stream: the
 *    first event is stamped at once, so the window holds the host's time inside the call
 *    (path choice, launch) as well as the kernel;
 *  - kernel G/s: the same call enqueued behind a hold (ta_cuda_hold_stream: a one-thread
 *    kernel spinning on a word of mapped host memory), the events recorded around it,
 *    then the hold released by the host: the first event is stamped when the hold ends,
 *    with the launch already queued behind it, so the window is the GPU's time for the
 *    kernel alone (the blocking-kernel method of nvbench). A hold that gave up waiting
 *    (1 s) is counted and printed.
 * Each case's result is checked once against a host reference before it is timed. With
 * --torch FILE (written by tests/bench_torch.py in the same run) the table shows the torch
 * peer's figure and the ratio (to the first column).
 *
 * Usage: bench_gpu [--torch FILE] [--reps N] [--log2n K] [--device D]
 * Output: one table (G elements/s = elements of the request / median time; host us = the
 * median host time spent inside ta_cuda_launch_plan, which lies within the first column's
 * window); the performance floors of issue 4 are checked last, on the first column (exit
 * status 2 when one is missed, 1 on an error). */
#include "config.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ta_backend.h"
#include "ta_cuda_private.h"

/* Exits with a message when a CUDA call failed. */
#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "bench_gpu: %s: %s\n", #call, cudaGetErrorString(e_));     \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* One torch figure read from --torch. */
typedef struct torch_fig {
	char key[64]; /* e.g. "bincount_256" */
	double gps;   /* G elements/s */
} torch_fig;

/* Torch figures. */
static torch_fig g_torch[32];
static int g_ntorch;

/* Reads "key gps" lines (# comments ignored). */
static void read_torch(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "bench_gpu: cannot read torch figures %s\n", path);
		return;
	}
	char line[256];
	while (fgets(line, sizeof line, f) && g_ntorch < 32) {
		if (line[0] == '#')
			continue;
		torch_fig *t = &g_torch[g_ntorch];
		if (sscanf(line, "%63s %lf", t->key, &t->gps) == 2)
			g_ntorch++;
	}
	fclose(f);
}

/* The torch figure for key, or 0. */
static double torch_gps(const char *key)
{
	for (int i = 0; i < g_ntorch; i++)
		if (!strcmp(g_torch[i].key, key))
			return g_torch[i].gps;
	return 0;
}

/* Median of n doubles (sorts them). */
static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Copies n bytes to a new device buffer. */
static void *dev_copy(const void *src, size_t n)
{
	void *d;
	CK(cudaMalloc(&d, n));
	CK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
	return d;
}

/* Options. */
static int g_reps = 20;
/* Counters for every launch. */
static unsigned long long *g_dcnt;
/* The hold's two words (ta_cuda_hold_stream): mapped pinned host memory and its device
 * pointer. */
static volatile unsigned int *g_hold;
static unsigned int *g_dhold;

/* Result of one timed case. */
typedef struct bench_row {
	char name[64];     /* what */
	const char *path;  /* kernel path taken */
	double ms;         /* median milliseconds, the launch call inside the window */
	double host_us;    /* median microseconds of host time inside ta_cuda_launch_plan */
	double gps;        /* G elements/s from ms */
	double kernel_ms;  /* median milliseconds with the launch queued behind a hold */
	double kernel_gps; /* G elements/s from kernel_ms */
	int hold_timeouts; /* holds that gave up waiting (their runs timed the launch too) */
	const char *peer;  /* torch peer's name */
	double peer_gps;   /* its G elements/s (0: none) */
} bench_row;

static bench_row g_rows[32];
static int g_nrows;

/* Times plan (device pointers) on the tile: warm-up, then g_reps launches between events. */
static void time_plan(const char *name, const ta_plan *plan, void *dtile, size_t tile_bytes,
                      const char *peer, const char *peer_key)
{
	ta_error err;
	ta_cuda_path path = TA_CUDA_PATH_NONE;
	for (int i = 0; i < 3; i++)
		if (ta_cuda_launch_plan(plan, dtile, tile_bytes, g_dcnt, NULL, &path, &err) !=
		    TA_OK) {
			fprintf(stderr, "bench_gpu: %s: %s\n", name, err.msg);
			exit(1);
		}
	CK(cudaDeviceSynchronize());
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	double *ms = malloc(sizeof(double) * (size_t)g_reps);
	double *us = malloc(sizeof(double) * (size_t)g_reps);
	if (!ms || !us)
		exit(1);
	for (int r = 0; r < g_reps; r++) {
		struct timespec h0, h1;
		CK(cudaEventRecord(a, NULL));
		clock_gettime(CLOCK_MONOTONIC, &h0);
		if (ta_cuda_launch_plan(plan, dtile, tile_bytes, g_dcnt, NULL, &path, &err) !=
		    TA_OK) {
			fprintf(stderr, "bench_gpu: %s: %s\n", name, err.msg);
			exit(1);
		}
		clock_gettime(CLOCK_MONOTONIC, &h1);
		us[r] =
		    (double)(h1.tv_sec - h0.tv_sec) * 1e6 + (double)(h1.tv_nsec - h0.tv_nsec) / 1e3;
		CK(cudaEventRecord(b, NULL));
		CK(cudaEventSynchronize(b));
		float t;
		CK(cudaEventElapsedTime(&t, a, b));
		ms[r] = t;
	}
	bench_row *row = &g_rows[g_nrows++];
	snprintf(row->name, sizeof row->name, "%s", name);
	row->path = ta_cuda_path_name(path);
	row->ms = median(ms, g_reps);
	row->host_us = median(us, g_reps);
	row->gps = (double)plan->count / (row->ms * 1e-3) / 1e9;
	/* the kernel alone: the launch queued behind a hold, the events around it */
	row->hold_timeouts = 0;
	for (int r = 0; r < g_reps; r++) {
		g_hold[0] = 0;
		g_hold[1] = 0;
		if (ta_cuda_hold_stream(NULL, g_dhold, 1000, &err) != TA_OK) {
			fprintf(stderr, "bench_gpu: %s: %s\n", name, err.msg);
			exit(1);
		}
		CK(cudaEventRecord(a, NULL));
		if (ta_cuda_launch_plan(plan, dtile, tile_bytes, g_dcnt, NULL, &path, &err) !=
		    TA_OK) {
			fprintf(stderr, "bench_gpu: %s: %s\n", name, err.msg);
			exit(1);
		}
		CK(cudaEventRecord(b, NULL));
		__atomic_store_n(&g_hold[0], 1u, __ATOMIC_RELEASE);
		CK(cudaEventSynchronize(b));
		float t;
		CK(cudaEventElapsedTime(&t, a, b));
		ms[r] = t;
		row->hold_timeouts += g_hold[1] != 0;
	}
	row->kernel_ms = median(ms, g_reps);
	row->kernel_gps = (double)plan->count / (row->kernel_ms * 1e-3) / 1e9;
	row->peer = peer;
	row->peer_gps = peer_key ? torch_gps(peer_key) : 0;
	free(ms);
	free(us);
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
}

/* Runs plan once on a zeroed tile and returns the tile (host copy, malloc'd). */
static void *run_once(const ta_plan *plan, void *dtile, size_t tile_bytes)
{
	ta_error err;
	CK(cudaMemset(dtile, 0, tile_bytes));
	if (ta_cuda_launch_plan(plan, dtile, tile_bytes, g_dcnt, NULL, NULL, &err) != TA_OK) {
		fprintf(stderr, "bench_gpu: %s\n", err.msg);
		exit(1);
	}
	CK(cudaDeviceSynchronize());
	void *h = malloc(tile_bytes);
	if (!h)
		exit(1);
	CK(cudaMemcpy(h, dtile, tile_bytes, cudaMemcpyDeviceToHost));
	return h;
}

/* Histogram of n int32 keys into bins int32 bins (flat indexed add of a scalar 1). */
static void bench_hist(const int32_t *keys, int64_t n, int64_t bins, ta_space space, ta_sem sem,
                       const char *name, const char *peer, const char *peer_key)
{
	ta_tile_shape t = {TA_DTYPE_I32, 1, {bins}};
	size_t tile_bytes = (size_t)bins * 4;
	int32_t one = 1;
	ta_request req;
	ta_request_init(&req);
	req.family = TA_FAMILY_INDEXED;
	req.op = TA_OP_ADD;
	req.addr = TA_ADDR_FLAT;
	req.n_index = 1;
	req.index[0] = (ta_array_view){true, TA_DTYPE_I32, 1, {n}, keys, (size_t)n * 4, false};
	req.values = (ta_array_view){true, TA_DTYPE_I32, 0, {0}, &one, 4, false};
	req.space = space;
	req.sem = sem;
	ta_plan plan;
	ta_error err;
	if (ta_plan_build(&plan, &t, &req, &err) != TA_OK) {
		fprintf(stderr, "bench_gpu: %s: %s\n", name, err.msg);
		exit(1);
	}
	void *dkeys = dev_copy(keys, (size_t)n * 4);
	void *done = dev_copy(&one, 4);
	void *dtile;
	CK(cudaMalloc(&dtile, tile_bytes));
	plan.index[0].data = dkeys;
	plan.values.data = done;
	/* check once */
	int32_t *h = run_once(&plan, dtile, tile_bytes);
	int64_t *want = calloc((size_t)bins, sizeof(int64_t));
	if (!want)
		exit(1);
	for (int64_t i = 0; i < n; i++)
		if (keys[i] >= 0 && keys[i] < bins)
			want[keys[i]]++;
	for (int64_t b = 0; b < bins; b++)
		if (h[b] != (int32_t)want[b]) {
			fprintf(stderr, "bench_gpu: %s: bin %lld is %d, expected %lld\n", name,
			        (long long)b, h[b], (long long)want[b]);
			exit(1);
		}
	free(h);
	free(want);
	time_plan(name, &plan, dtile, tile_bytes, peer, peer_key);
	CK(cudaFree(dkeys));
	CK(cudaFree(done));
	CK(cudaFree(dtile));
}

/* Scatter add (torch.scatter_add_ rules, dim 0) of n int32 ones at int64 index keys into
 * bins int32 bins. */
static void bench_scatter(const int64_t *idx, int64_t n, int64_t bins, const char *name,
                          const char *peer, const char *peer_key)
{
	ta_tile_shape t = {TA_DTYPE_I32, 1, {bins}};
	size_t tile_bytes = (size_t)bins * 4;
	int32_t *ones = malloc((size_t)n * 4);
	if (!ones)
		exit(1);
	for (int64_t i = 0; i < n; i++)
		ones[i] = 1;
	ta_request req;
	ta_request_init(&req);
	req.family = TA_FAMILY_SCATTER;
	req.op = TA_OP_ADD;
	req.addr = TA_ADDR_SCATTER;
	req.scatter_dim = 0;
	req.n_index = 1;
	req.index[0] = (ta_array_view){true, TA_DTYPE_I64, 1, {n}, idx, (size_t)n * 8, false};
	req.values = (ta_array_view){true, TA_DTYPE_I32, 1, {n}, ones, (size_t)n * 4, false};
	ta_plan plan;
	ta_error err;
	if (ta_plan_build(&plan, &t, &req, &err) != TA_OK) {
		fprintf(stderr, "bench_gpu: %s: %s\n", name, err.msg);
		exit(1);
	}
	void *didx = dev_copy(idx, (size_t)n * 8);
	void *dvals = dev_copy(ones, (size_t)n * 4);
	void *dtile;
	CK(cudaMalloc(&dtile, tile_bytes));
	plan.index[0].data = didx;
	plan.values.data = dvals;
	int32_t *h = run_once(&plan, dtile, tile_bytes);
	int64_t total = 0;
	for (int64_t b = 0; b < bins; b++)
		total += h[b];
	if (total != n) {
		fprintf(stderr, "bench_gpu: %s: total %lld, expected %lld\n", name,
		        (long long)total, (long long)n);
		exit(1);
	}
	free(h);
	time_plan(name, &plan, dtile, tile_bytes, peer, peer_key);
	CK(cudaFree(didx));
	CK(cudaFree(dvals));
	CK(cudaFree(dtile));
	free(ones);
}

/* Element-wise op over a whole tile of n elements of dtype with contiguous values (CAS:
 * compare = values, so that every CAS after the first run fails). */
static void bench_elementwise(ta_op op, ta_dtype dt, int64_t n, bool want_old, ta_sem sem,
                              const char *name, const char *peer, const char *peer_key)
{
	size_t es = ta_dtype_size(dt);
	ta_tile_shape t = {dt, 1, {n}};
	size_t bytes = (size_t)n * es;
	unsigned char *vals = malloc(bytes);
	if (!vals)
		exit(1);
	for (size_t i = 0; i < bytes; i++) /* small positive integers of either width */
		vals[i] = (i % es == 0) ? (unsigned char)(1 + i % 5) : 0;
	if (dt == TA_DTYPE_F32)
		for (int64_t i = 0; i < n; i++) {
			float f = (float)(1 + i % 5);
			memcpy(vals + i * 4, &f, 4);
		}
	/* 1.0 .. 5.0 as float16 / bfloat16 bits */
	static const uint16_t f16_1to5[] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500};
	static const uint16_t bf16_1to5[] = {0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0};
	if (dt == TA_DTYPE_F16 || dt == TA_DTYPE_BF16)
		for (int64_t i = 0; i < n; i++)
			memcpy(vals + i * 2,
			       dt == TA_DTYPE_F16 ? &f16_1to5[i % 5] : &bf16_1to5[i % 5], 2);
	ta_request req;
	ta_request_region(&req, TA_FAMILY_ELEMENTWISE, op);
	req.values = (ta_array_view){true, dt, 1, {n}, vals, bytes, false};
	if (op == TA_OP_CAS)
		req.compare = req.values;
	req.want_old = want_old;
	req.sem = sem;
	ta_plan plan;
	ta_error err;
	if (ta_plan_build(&plan, &t, &req, &err) != TA_OK) {
		fprintf(stderr, "bench_gpu: %s: %s\n", name, err.msg);
		exit(1);
	}
	void *dvals = dev_copy(vals, bytes);
	void *dtile, *dold = NULL;
	CK(cudaMalloc(&dtile, bytes));
	if (want_old)
		CK(cudaMalloc(&dold, bytes));
	plan.values.data = dvals;
	if (op == TA_OP_CAS)
		plan.compare.data = dvals;
	plan.old_out = dold;
	unsigned char *h = run_once(&plan, dtile, bytes);
	/* add/max/cas on a zero tile: add and max (positive values) give the values; cas
	 * (compare = values) changes only elements whose value is 0 (none here), so the tile
	 * stays zero */
	for (size_t i = 0; i < bytes; i++) {
		unsigned char want = op == TA_OP_ADD || op == TA_OP_MAX ? vals[i] : 0;
		if (h[i] != want) {
			fprintf(stderr, "bench_gpu: %s: byte %zu is %u, expected %u\n", name, i,
			        h[i], want);
			exit(1);
		}
	}
	free(h);
	time_plan(name, &plan, dtile, bytes, peer, peer_key);
	CK(cudaFree(dvals));
	CK(cudaFree(dtile));
	if (dold)
		CK(cudaFree(dold));
	free(vals);
}

int main(int argc, char **argv)
{
	int log2n = 26, device = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--torch") && i + 1 < argc)
			read_torch(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			g_reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--log2n") && i + 1 < argc)
			log2n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--device") && i + 1 < argc)
			device = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_gpu [--torch FILE] [--reps N] [--log2n K] "
			                "[--device D]\n");
			return 1;
		}
	}
	if (g_reps < 1 || log2n < 10 || log2n > 30)
		return 1;
	ta_error err;
	ta_backend *be = ta_cuda_backend_new(device, &err);
	if (!be) {
		fprintf(stderr, "bench_gpu: %s\n", err.msg);
		return 1;
	}
	ta_backend_info info;
	ta_backend_info_get(be, &info);
	CK(cudaSetDevice(device));
	CK(cudaMalloc((void **)&g_dcnt, 3 * sizeof(unsigned long long)));
	CK(cudaMemset(g_dcnt, 0, 3 * sizeof(unsigned long long)));
	void *hold = NULL;
	CK(cudaHostAlloc(&hold, 2 * sizeof(unsigned int), cudaHostAllocMapped));
	g_hold = hold;
	CK(cudaHostGetDevicePointer((void **)&g_dhold, hold, 0));
	const int64_t n = (int64_t)1 << log2n;

	/* uniform keys from a fixed LCG */
	int32_t *k256 = malloc((size_t)n * 4), *k64k = malloc((size_t)n * 4);
	int64_t *i256 = malloc((size_t)n * 8);
	if (!k256 || !k64k || !i256)
		return 1;
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (int64_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t r = (uint32_t)(s >> 32);
		k256[i] = (int32_t)(r & 255);
		k64k[i] = (int32_t)(r >> 16);
		i256[i] = k256[i];
	}
	char nm[64];
	snprintf(nm, sizeof nm, "hist 256 bins, space shared");
	bench_hist(k256, n, 256, TA_SPACE_SHARED, TA_SEM_RELAXED, nm, "torch.bincount",
	           "bincount_256");
	bench_hist(k256, n, 256, TA_SPACE_GLOBAL, TA_SEM_RELAXED, "hist 256 bins, space global",
	           "torch.bincount", "bincount_256");
	bench_hist(k256, n, 256, TA_SPACE_GLOBAL, TA_SEM_ACQ_REL, "hist 256 bins, acq_rel atom",
	           "torch.bincount", "bincount_256");
	bench_hist(k64k, n, 65536, TA_SPACE_GLOBAL, TA_SEM_RELAXED, "hist 65536 bins",
	           "torch.bincount", "bincount_65536");
	/* skewed: every other key on bin 7 (same-address atomics on one private slot) */
	for (int64_t i = 0; i < n; i += 2)
		k64k[i] = 7;
	bench_hist(k64k, n, 65536, TA_SPACE_GLOBAL, TA_SEM_RELAXED, "hist 65536 bins, half on one",
	           NULL, NULL);
	bench_scatter(i256, n, 256, "scatter_add 256 bins (int64 idx)", "torch.scatter_add_",
	              "scatter_add_256");
	/* the private-window paths against the plain global path (automatic windows off):
	 * windows one block holds (16 and 64 KB), one over a 2-block cluster (256 KB) and one
	 * too large for it (1 MB: space shared runs the global path) */
	static const int lg_bins[] = {12, 14, 16, 18};
	for (size_t b = 0; b < sizeof lg_bins / sizeof lg_bins[0]; b++) {
		int lg = lg_bins[b];
		uint64_t ks = 0x2545f4914f6cdd1dull + (uint64_t)lg;
		for (int64_t i = 0; i < n; i++) { /* uniform over 2^lg bins */
			ks = ks * 6364136223846793005ull + 1442695040888963407ull;
			k64k[i] = (int32_t)((uint32_t)(ks >> 32) >> (32 - lg));
		}
		ta_cuda_set_auto_window(0);
		snprintf(nm, sizeof nm, "hist %d bins, global only", 1 << lg);
		bench_hist(k64k, n, (int64_t)1 << lg, TA_SPACE_GLOBAL, TA_SEM_RELAXED, nm, NULL,
		           NULL);
		ta_cuda_set_auto_window(1);
		snprintf(nm, sizeof nm, "hist %d bins, space shared", 1 << lg);
		bench_hist(k64k, n, (int64_t)1 << lg, TA_SPACE_SHARED, TA_SEM_RELAXED, nm, NULL,
		           NULL);
	}
	const ta_sem rlx = TA_SEM_RELAXED;
	bench_elementwise(TA_OP_ADD, TA_DTYPE_I32, n, false, rlx, "elementwise add int32 (relaxed)",
	                  "torch add_ (not atomic)", "add_int32");
	bench_elementwise(TA_OP_ADD, TA_DTYPE_I32, n, false, TA_SEM_RELEASE,
	                  "elementwise add int32 release (red)", "torch add_ (not atomic)",
	                  "add_int32");
	bench_elementwise(TA_OP_ADD, TA_DTYPE_U64, n, false, rlx,
	                  "elementwise add uint64 (relaxed)", NULL, NULL);
	bench_elementwise(TA_OP_MAX, TA_DTYPE_I32, n, false, rlx, "elementwise max int32 (relaxed)",
	                  NULL, NULL);
	bench_elementwise(TA_OP_ADD, TA_DTYPE_I32, n, true, rlx,
	                  "elementwise add int32 + old (atom)", "torch add_ (not atomic)",
	                  "add_int32");
	bench_elementwise(TA_OP_CAS, TA_DTYPE_I32, n, true, rlx, "elementwise cas int32 + old",
	                  NULL, NULL);
	bench_elementwise(TA_OP_ADD, TA_DTYPE_F32, n, false, rlx, "elementwise add float32 (red)",
	                  "torch add_ (not atomic)", "add_float32");
	bench_elementwise(TA_OP_ADD, TA_DTYPE_F16, n, false, rlx, "elementwise add float16 (red)",
	                  NULL, NULL);
	bench_elementwise(TA_OP_ADD, TA_DTYPE_BF16, n, false, rlx, "elementwise add bfloat16 (red)",
	                  NULL, NULL);
	free(k256);
	free(k64k);
	free(i256);

	printf("device: %s, compute capability %s, %.0f GiB; %lld elements (2^%d), median of "
	       "%d runs, CUDA events around ta_cuda_launch_plan (G elem/s: launch call "
	       "inside the window; kernel G/s: launch queued behind a hold)\n",
	       info.device, info.compute_capability, info.device_memory / 1073741824.0,
	       (long long)n, log2n, g_reps);
	printf("%-36s %-12s %10s %10s %8s %10s  %-24s %10s %7s\n", "case", "path", "median ms",
	       "G elem/s", "host us", "kernel G/s", "torch peer", "G elem/s", "ratio");
	int timeouts = 0;
	for (int i = 0; i < g_nrows; i++) {
		bench_row *r = &g_rows[i];
		printf("%-36s %-12s %10.4f %10.1f %8.2f %10.1f  %-24s", r->name, r->path, r->ms,
		       r->gps, r->host_us, r->kernel_gps, r->peer ? r->peer : "-");
		if (r->peer_gps > 0)
			printf(" %10.1f %7.2f\n", r->peer_gps, r->gps / r->peer_gps);
		else
			printf(" %10s %7s\n", "-", "-");
		timeouts += r->hold_timeouts;
	}
	if (timeouts)
		printf("warning: %d holds gave up waiting; their kernel runs include the launch\n",
		       timeouts);
	/* the floors of issue 4 */
	int missed = 0;
	double bc = torch_gps("bincount_256");
	if (bc > 0) {
		double ratio = g_rows[0].gps / bc;
		printf("floor: 256-bin histogram >= 5x torch.bincount: %.2fx %s\n", ratio,
		       ratio >= 5 ? "PASS" : "FAIL");
		missed += ratio < 5;
	} else {
		printf("floor: 256-bin histogram vs torch.bincount: no torch figure (--torch)\n");
	}
	double ew = 0;
	for (int i = 0; i < g_nrows; i++)
		if (!strcmp(g_rows[i].name, "elementwise add int32 (relaxed)"))
			ew = g_rows[i].gps;
	printf("floor: element-wise relaxed add >= 250 G elements/s: %.1f %s\n", ew,
	       ew >= 250 ? "PASS" : "FAIL");
	missed += ew < 250;
	CK(cudaFree(g_dcnt));
	CK(cudaFreeHost(hold));
	ta_backend_destroy(be);
	return missed ? 2 : 0;
}
