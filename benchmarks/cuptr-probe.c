/* cuptr-probe.c: the cost of what libtileatom-client does to recognise raw device pointers
 * (client/tac_cuptr.c), on a GPU machine: reading the count of loaded shared objects
 * (dl_iterate_phdr, the cached "no driver" answer), dlopen RTLD_NOLOAD of libcuda.so.1,
 * cuPointerGetAttributes with the library's 7 attributes on host, pinned, managed and
 * device addresses, and cuIpcGetMemHandle (done once per allocation and connection). Each
 * is the mean of many calls after a warm-up; every driver call's result is checked. Not
 * built by make.
 *
 * Build: nvcc -O2 -cudart static -o cuptr-probe benchmarks/cuptr-probe.c -ldl
 * Usage: cuptr-probe [calls] (default 200000)
 * Output: one line per case: name, ns per call. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cuPointerGetAttributes (driver API, plain types). */
typedef int (*attrs_fn)(unsigned n, int *attrs, void **data, unsigned long long p);
/* cuIpcGetMemHandle. */
typedef int (*handle_fn)(void *h, unsigned long long p);

/* Nanoseconds on the monotonic clock. */
static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* dl_iterate_phdr callback: the first object's dlpi_adds. */
static int adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

/* Mean ns of cuPointerGetAttributes on p over calls; exits on an error. */
static double time_attrs(attrs_fn f, const void *p, long calls, unsigned *memtype)
{
	int attrs[7] = {2, 8, 11, 12, 7, 1, 10};
	unsigned long long val[7];
	void *data[7];
	for (int i = 0; i < 7; i++)
		data[i] = &val[i];
	double t0 = 0;
	for (long k = -1000; k < calls; k++) {
		if (k == 0)
			t0 = now_ns();
		memset(val, 0, sizeof(val));
		int r = f(7, attrs, data, (unsigned long long)(uintptr_t)p);
		if (r != 0) {
			fprintf(stderr, "cuPointerGetAttributes(%p): error %d\n", p, r);
			exit(1);
		}
	}
	*memtype = (unsigned)val[0];
	return (now_ns() - t0) / (double)calls;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200000;
	if (calls < 1)
		calls = 1;
	void *dev = NULL, *pinned = NULL, *managed = NULL;
	cudaError_t ce = cudaMalloc(&dev, 64 << 20);
	if (ce == cudaSuccess)
		ce = cudaMallocHost(&pinned, 1 << 20);
	if (ce == cudaSuccess)
		ce = cudaMallocManaged(&managed, 1 << 20, cudaMemAttachGlobal);
	if (ce != cudaSuccess) {
		fprintf(stderr, "cuptr-probe: %s\n", cudaGetErrorString(ce));
		return 1;
	}
	void *host = malloc(1 << 20);
	if (!host)
		return 1;
	memset(host, 1, 1 << 20);
	unsigned long long adds = 0;
	double t0 = now_ns();
	for (long k = 0; k < calls; k++)
		dl_iterate_phdr(adds_cb, &adds);
	printf("dl_iterate_phdr (cached no-driver check) %.1f ns\n", (now_ns() - t0) / calls);
	void *h = NULL;
	t0 = now_ns();
	for (long k = 0; k < calls / 100 + 1; k++) {
		h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		if (h)
			dlclose(h);
	}
	printf("dlopen RTLD_NOLOAD libcuda.so.1 (loaded: %s) %.1f ns\n", h ? "yes" : "no",
	       (now_ns() - t0) / (double)(calls / 100 + 1));
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	attrs_fn attrs = h ? (attrs_fn)dlsym(h, "cuPointerGetAttributes") : NULL;
	handle_fn handle = h ? (handle_fn)dlsym(h, "cuIpcGetMemHandle") : NULL;
	if (!attrs || !handle) {
		fprintf(stderr, "cuptr-probe: no driver entry points\n");
		return 1;
	}
	struct {
		const char *name; /* what the address is */
		const void *p;    /* the address */
	} cases[] = {{"host malloc", host},
	             {"pinned host", pinned},
	             {"managed", managed},
	             {"device, allocation start", dev},
	             {"device, 40 MiB into it", (char *)dev + (40 << 20)}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned mt = 0;
		double ns = time_attrs(attrs, cases[i].p, calls, &mt);
		printf("cuPointerGetAttributes x7, %s (memory type %u) %.1f ns\n", cases[i].name,
		       mt, ns);
	}
	unsigned char hb[64];
	long hcalls = calls / 100 + 1;
	t0 = now_ns();
	for (long k = 0; k < hcalls; k++) {
		int r = handle(hb, (unsigned long long)(uintptr_t)dev);
		if (r != 0) {
			fprintf(stderr, "cuIpcGetMemHandle: error %d\n", r);
			return 1;
		}
	}
	printf("cuIpcGetMemHandle %.1f ns\n", (now_ns() - t0) / (double)hcalls);
	cudaFree(dev);
	cudaFreeHost(pinned);
	cudaFree(managed);
	free(host);
	return 0;
}
