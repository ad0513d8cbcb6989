/* check_cuptr.c: raw device pointers (client/tac_cuptr.c) without a GPU, against a real
 * tileatomd on the CPU backend. First the path is inert: the process has not loaded
 * libcuda.so.1, so requests with large host operands give exact results, nothing is
 * registered, and the driver is looked for once, not per request (again only after the
 * process loads another shared object). Then a fake driver defined in this program (the
 * entry points the library uses, handed over with tac_cuptr_load_from) reports chosen host
 * ranges as device memory, and every decision is checked: such operands are registered
 * (the CPU backend refuses: UNIMPLEMENTED, nothing applied) instead of being read, bytes
 * past the allocation, an allocation without an IPC handle, a failed cuIpcGetMemHandle, a
 * driver error and a TCP connection are INVALID_ARGUMENT, a pipelined registration with a
 * response outstanding is STATE, a read and a gather's output into device memory are
 * refused, an uninitialised
 * driver means host memory, and the threshold (its default, 1, 0 and
 * $TILEATOM_DEVICE_POINTERS) decides which arrays are looked up. The suite compiles the
 * library's sources to reach the hidden functions. */
#include <check.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_client_util.h"
#include "tac_internal.h"
#include "tileatom.h"

/* Bins of the histograms. */
#define NBINS 64
/* Keys of a large request (1 MiB of int32, over the default threshold). */
#define NKEYS (1 << 18)

/* The daemon (CPU backend, also on TCP). */
static tcu_daemon D;
/* Its TCP port. */
static int tcp_port;

/* ---- the fake driver ------------------------------------------------------------------ */

/* A host range the fake driver calls device memory. */
typedef struct fake_range {
	uintptr_t base;  /* its start */
	size_t size;     /* its bytes */
	uint64_t id;     /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
	unsigned ipc_ok; /* CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE */
} fake_range;

/* The fake's state. */
static fake_range fake[4];
/* Ranges in use. */
static int nfake;
/* What cuPointerGetAttributes returns (0, 3 = not initialised, or an error). */
static int fake_attr_result;
/* What cuIpcGetMemHandle returns. */
static int fake_ipc_result;
/* Calls of cuPointerGetAttributes and of cuIpcGetMemHandle. */
static unsigned long fake_queries, fake_handles;
/* What cuStreamSynchronize returns, and the stream it was last given. */
static int fake_sync_result;
static void *fake_synced;
/* What cuStreamQuery returns (600, CUDA_ERROR_NOT_READY: work queued), and its calls. */
static int fake_query_result;
static unsigned long fake_stream_queries;

/* The fake driver's entry points (the driver API's signatures with plain types). */
int cuPointerGetAttributes(unsigned n, int *attrs, void **data, unsigned long long ptr);
int cuIpcGetMemHandle(void *h, unsigned long long p);
int cuCtxGetCurrent(void **ctx);
int cuCtxPushCurrent_v2(void *ctx);
int cuCtxPopCurrent_v2(void **ctx);
int cuGetErrorName(int e, const char **s);
int cuStreamSynchronize(void *stream);
int cuStreamQuery(void *stream);

/* The fake's cuPointerGetAttributes: the documented types per attribute. */
__attribute__((visibility("default"))) int
cuPointerGetAttributes(unsigned n, int *attrs, void **data, unsigned long long ptr)
{
	fake_queries++;
	if (fake_attr_result != 0)
		return fake_attr_result;
	const fake_range *r = NULL;
	for (int i = 0; i < nfake; i++)
		if (ptr >= fake[i].base && ptr < fake[i].base + fake[i].size)
			r = &fake[i];
	for (unsigned i = 0; i < n; i++) {
		switch (attrs[i]) {
		case 1: /* CONTEXT */
			*(void **)data[i] = r ? (void *)(uintptr_t)0x1000 : NULL;
			break;
		case 2: /* MEMORY_TYPE: unsigned int, 2 = device, 0 when unknown */
			*(unsigned *)data[i] = r ? 2u : 0u;
			break;
		case 7: /* BUFFER_ID */
			*(unsigned long long *)data[i] = r ? r->id : 0;
			break;
		case 8: /* IS_MANAGED */
			*(unsigned *)data[i] = 0;
			break;
		case 10: /* IS_LEGACY_CUDA_IPC_CAPABLE */
			*(unsigned *)data[i] = r ? r->ipc_ok : 0;
			break;
		case 11: /* RANGE_START_ADDR */
			*(unsigned long long *)data[i] = r ? r->base : 0;
			break;
		case 12: /* RANGE_SIZE */
			*(size_t *)data[i] = r ? r->size : 0;
			break;
		default:
			return 1; /* CUDA_ERROR_INVALID_VALUE: an attribute not expected */
		}
	}
	return 0;
}

/* The fake's cuIpcGetMemHandle: 64 bytes of 0x5a. */
__attribute__((visibility("default"))) int cuIpcGetMemHandle(void *h, unsigned long long p)
{
	(void)p;
	fake_handles++;
	memset(h, 0x5a, 64);
	return fake_ipc_result;
}

/* The fake's cuCtxGetCurrent: the context of every fake range is current. */
__attribute__((visibility("default"))) int cuCtxGetCurrent(void **ctx)
{
	*ctx = (void *)(uintptr_t)0x1000;
	return 0;
}

/* The fake's cuCtxPushCurrent_v2 (not needed: the context is current). */
__attribute__((visibility("default"))) int cuCtxPushCurrent_v2(void *ctx)
{
	(void)ctx;
	return 201; /* CUDA_ERROR_INVALID_CONTEXT: a push would fail the test */
}

/* The fake's cuCtxPopCurrent_v2. */
__attribute__((visibility("default"))) int cuCtxPopCurrent_v2(void **ctx)
{
	*ctx = NULL;
	return 201;
}

/* The fake's cuStreamSynchronize: notes the stream. */
__attribute__((visibility("default"))) int cuStreamSynchronize(void *stream)
{
	fake_synced = stream;
	return fake_sync_result;
}

/* The fake's cuStreamQuery: counts its calls. */
__attribute__((visibility("default"))) int cuStreamQuery(void *stream)
{
	(void)stream;
	fake_stream_queries++;
	return fake_query_result;
}

/* The fake's cuGetErrorName. */
__attribute__((visibility("default"))) int cuGetErrorName(int e, const char **s)
{
	*s = e == 999 ? "CUDA_ERROR_FAKE" : "CUDA_ERROR_OTHER";
	return 0;
}

/* ---- helpers -------------------------------------------------------------------------- */

/* Connects over the Unix socket (tcp: over TCP). */
static tileatom_client *conn(bool tcp)
{
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", tcp_port);
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(tcp ? addr : D.socket, 20000, &c, &e), e);
	return c;
}

/* Keys (i * 7 % NBINS) at p, n of them; their bins into bins. */
static void fill_keys(int32_t *p, int64_t n, int32_t *bins)
{
	memset(bins, 0, NBINS * sizeof(int32_t));
	for (int64_t i = 0; i < n; i++) {
		p[i] = (int32_t)(i * 7 % NBINS);
		bins[p[i]]++;
	}
}

/* Histograms n keys at p into a fresh tile; returns the call's status (err filled) and
 * checks the bins: want when it succeeded, all zero when it failed. */
static int hist(tileatom_client *c, const int32_t *p, int64_t n, const int32_t *want,
                tileatom_error *e)
{
	tileatom_error e2 = {0, ""};
	int64_t nbins = NBINS;
	(void)tileatom_destroy(c, "cuptr", &e2);
	CK(tileatom_create(c, "cuptr", TILEATOM_INT32, 1, &nbins, NULL, NULL, &e2), e2);
	tileatom_array idx = tileatom_vector(TILEATOM_INT32, n, p);
	int32_t one = 1;
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_op_result res;
	int rc = tileatom_indexed(c, "cuptr", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL,
	                          NULL, &res, e);
	int32_t bins[NBINS];
	CK(tileatom_read(c, "cuptr", NULL, bins, sizeof(bins), NULL, &e2), e2);
	for (int i = 0; i < NBINS; i++) {
		int32_t w = rc == TILEATOM_OK ? want[i] : 0;
		ck_assert_msg(bins[i] == w, "bin %d is %d, not %d (%s)", i, bins[i], w,
		              tileatom_strerror(rc));
	}
	return rc;
}

/* Expects rc to be code with a message containing sub. */
static void expect(int rc, int code, const tileatom_error *e, const char *sub)
{
	ck_assert_msg(rc == code, "%s, not %s: %s", tileatom_strerror(rc), tileatom_strerror(code),
	              e->message);
	ck_assert_msg(strstr(e->message, sub), "message \"%s\" lacks \"%s\"", e->message, sub);
}

/* ---- without a driver: inert ---------------------------------------------------------- */

START_TEST(test_inert)
{
	ck_assert(!tac_cuptr_driver_loaded());
	unsigned long looked = tac_cuptr_lookups();
	ck_assert_uint_ge(looked, 1);
	tileatom_client *c = conn(false);
	int32_t *keys = malloc((size_t)NKEYS * 4), want[NBINS];
	ck_assert_ptr_nonnull(keys);
	fill_keys(keys, NKEYS, want);
	tileatom_error e = {0, ""};
	CK(hist(c, keys, NKEYS, want, &e), e);
	looked = tac_cuptr_lookups(); /* (connecting may have loaded something) */
	for (int i = 0; i < 20; i++)
		CK(hist(c, keys, NKEYS, want, &e), e);
	/* the cached answer: no dlopen per request, nothing registered */
	ck_assert_uint_eq(tac_cuptr_lookups(), looked);
	ck_assert_uint_eq(tac_cuptr_count(c), 0);
	/* after the process loads a shared object, the driver is looked for once more */
	void *pre = dlopen("libresolv.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	void *h = pre ? NULL : dlopen("libresolv.so.2", RTLD_NOW | RTLD_LOCAL);
	if (pre)
		dlclose(pre);
	CK(hist(c, keys, NKEYS, want, &e), e);
	CK(hist(c, keys, NKEYS, want, &e), e);
	ck_assert_uint_eq(tac_cuptr_lookups(), looked + (h ? 1 : 0));
	ck_assert(!tac_cuptr_driver_loaded());
	if (h)
		dlclose(h);
	/* no driver: a stream cannot be waited for */
	expect(tileatom_cuda_stream_sync(NULL, &e), TILEATOM_E_UNIMPLEMENTED, &e, "libcuda.so.1");
	/* TCP too, and an output buffer in host memory */
	tileatom_client *t = conn(true);
	CK(hist(t, keys, NKEYS, want, &e), e);
	tileatom_close(t);
	tileatom_close(c);
	free(keys);
}
END_TEST

START_TEST(test_threshold_setting)
{
	unsetenv("TILEATOM_DEVICE_POINTERS");
	ck_assert_uint_eq(tac_cuptr_default_min(), TAC_CUPTR_MIN);
	setenv("TILEATOM_DEVICE_POINTERS", "off", 1);
	ck_assert_uint_eq(tac_cuptr_default_min(), 0);
	setenv("TILEATOM_DEVICE_POINTERS", "4096", 1);
	ck_assert_uint_eq(tac_cuptr_default_min(), 4096);
	setenv("TILEATOM_DEVICE_POINTERS", "1", 1);
	ck_assert_uint_eq(tac_cuptr_default_min(), 1);
	setenv("TILEATOM_DEVICE_POINTERS", "12k", 1); /* not a number: the default */
	ck_assert_uint_eq(tac_cuptr_default_min(), TAC_CUPTR_MIN);
	setenv("TILEATOM_DEVICE_POINTERS", "-5", 1);
	ck_assert_uint_eq(tac_cuptr_default_min(), TAC_CUPTR_MIN);
	unsetenv("TILEATOM_DEVICE_POINTERS");
}
END_TEST

/* ---- with the fake driver ------------------------------------------------------------- */

/* Installs the fake driver (once per process) and resets its state. */
static void fake_setup(void)
{
	if (!tac_cuptr_driver_loaded()) {
		void *self = dlopen(NULL, RTLD_NOW);
		ck_assert_ptr_nonnull(self);
		ck_assert(tac_cuptr_load_from(self));
	}
	ck_assert(tac_cuptr_driver_loaded());
	nfake = 0;
	fake_attr_result = fake_ipc_result = 0;
	fake_queries = fake_handles = 0;
	fake_sync_result = 0;
	fake_synced = NULL;
	fake_query_result = 600;
	fake_stream_queries = 0;
}

/* Makes [p, p + size) fake device memory with buffer id id. */
static void fake_add(const void *p, size_t size, uint64_t id, unsigned ipc_ok)
{
	ck_assert_int_lt(nfake, 4);
	fake[nfake++] = (fake_range){(uintptr_t)p, size, id, ipc_ok};
}

START_TEST(test_fake_device_memory)
{
	fake_setup();
	tileatom_client *c = conn(false);
	int32_t *host = malloc((size_t)NKEYS * 4), *dev = malloc((size_t)NKEYS * 4);
	int32_t want[NBINS];
	ck_assert_ptr_nonnull(host);
	ck_assert_ptr_nonnull(dev);
	fill_keys(host, NKEYS, want);
	fill_keys(dev, NKEYS, want);
	tileatom_error e = {0, ""};
	/* host memory with the driver present: one query (the keys; the scalar is under the
	 * threshold), no handle, results exact */
	CK(hist(c, host, NKEYS, want, &e), e);
	ck_assert_uint_eq(fake_queries, 1);
	ck_assert_uint_eq(fake_handles, 0);
	/* "device" keys: the allocation is registered, not read; the CPU backend refuses */
	fake_add(dev, (size_t)NKEYS * 4, 11, 1);
	expect(hist(c, dev, NKEYS, want, &e), TILEATOM_E_UNIMPLEMENTED, &e, "device buffers");
	ck_assert_uint_eq(fake_handles, 1);
	ck_assert_uint_eq(tac_cuptr_count(c), 0);
	/* from the middle of it, past its end: refused before any handle is made */
	fake_queries = fake_handles = 0;
	expect(hist(c, dev + NKEYS / 2, NKEYS / 2 + 4, want, &e), TILEATOM_E_INVALID_ARGUMENT, &e,
	       "runs past the end of its device allocation");
	ck_assert_uint_eq(fake_queries, 1);
	ck_assert_uint_eq(fake_handles, 0);
	/* a small array in it (under the threshold, nothing registered): not looked up, read
	 * as the host memory it really is */
	int32_t small_want[NBINS];
	fill_keys(dev, 256, small_want);
	CK(hist(c, dev, 256, small_want, &e), e);
	ck_assert_uint_eq(fake_queries, 1);
	/* a threshold of 1 byte: looked up and refused; 0: never looked up */
	tileatom_set_device_ptr_threshold(c, 1);
	expect(hist(c, dev, 256, small_want, &e), TILEATOM_E_UNIMPLEMENTED, &e, "device buffers");
	/* the 4-byte scalar, the keys, and the read's 256-byte output buffer */
	ck_assert_uint_eq(fake_queries, 4);
	tileatom_set_device_ptr_threshold(c, 0);
	fill_keys(dev, NKEYS, want);
	CK(hist(c, dev, NKEYS, want, &e), e);
	ck_assert_uint_eq(fake_queries, 4);
	tileatom_set_device_ptr_threshold(c, 64 << 10);
	/* the driver not initialised: host memory */
	fake_attr_result = 3;
	CK(hist(c, dev, NKEYS, want, &e), e);
	/* a driver error is reported with its name */
	fake_attr_result = 999;
	expect(hist(c, dev, NKEYS, want, &e), TILEATOM_E_INVALID_ARGUMENT, &e,
	       "cuPointerGetAttributes: CUDA_ERROR_FAKE");
	fake_attr_result = 0;
	/* cuIpcGetMemHandle failing; an allocation that has no IPC handle at all */
	fake_ipc_result = 999;
	expect(hist(c, dev, NKEYS, want, &e), TILEATOM_E_INVALID_ARGUMENT, &e,
	       "has no CUDA IPC handle (cuIpcGetMemHandle: CUDA_ERROR_FAKE)");
	fake_ipc_result = 0;
	fake[0].ipc_ok = 0;
	expect(hist(c, dev, NKEYS, want, &e), TILEATOM_E_INVALID_ARGUMENT, &e,
	       "cannot be shared by CUDA IPC");
	fake[0].ipc_ok = 1;
	/* old values into device memory: registered (refused), nothing applied */
	int64_t n = NKEYS;
	CK(tileatom_create(c, "cuptr-ew", TILEATOM_INT32, 1, &n, NULL, NULL, &e), e);
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.want_old = true;
	opts.old_out = dev;
	opts.old_out_size = (size_t)NKEYS * 4;
	tileatom_array vals = tileatom_vector(TILEATOM_INT32, NKEYS, host);
	tileatom_op_result res;
	fake_handles = 0;
	expect(tileatom_elementwise(c, "cuptr-ew", TILEATOM_OP_ADD, NULL, &vals, NULL, &opts, &res,
	                            &e),
	       TILEATOM_E_UNIMPLEMENTED, &e, "device buffers");
	ck_assert_uint_eq(fake_handles, 1);
	/* a read into device memory is refused; into host memory it works */
	expect(tileatom_read(c, "cuptr-ew", NULL, dev, (size_t)NKEYS * 4, NULL, &e),
	       TILEATOM_E_INVALID_ARGUMENT, &e,
	       "is CUDA device memory: the library writes it from the host, give a host buffer");
	CK(tileatom_read(c, "cuptr-ew", NULL, host, (size_t)NKEYS * 4, NULL, &e), e);
	for (int i = 0; i < NKEYS; i++)
		ck_assert_int_eq(host[i], 0);
	/* a gather's output into device memory: refused */
	tileatom_addr whole = {TILEATOM_ADDR_REGION, NULL, 0, 0, NULL};
	fill_keys(host, NKEYS, want);
	expect(tileatom_gather(c, "cuptr-ew", NULL, &whole, NULL, NULL, dev, (size_t)NKEYS * 4,
	                       &res, &e),
	       TILEATOM_E_INVALID_ARGUMENT, &e, "the output buffer at");
	CK(tileatom_read(c, "cuptr-ew", NULL, host, (size_t)NKEYS * 4, NULL, &e), e);
	for (int i = 0; i < NKEYS; i++)
		ck_assert_int_eq(host[i], 0);
	/* pipelined: a registration while a response is outstanding is STATE */
	fill_keys(host, NKEYS, want);
	int32_t one = 1;
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_array hidx = tileatom_vector(TILEATOM_INT32, NKEYS, host);
	tileatom_array didx = tileatom_vector(TILEATOM_INT32, NKEYS, dev);
	uint64_t id;
	CK(tileatom_submit_indexed(c, "cuptr", TILEATOM_OP_ADD, NULL, 1, &hidx, true, &val, NULL,
	                           NULL, &id, &e),
	   e);
	expect(tileatom_submit_indexed(c, "cuptr", TILEATOM_OP_ADD, NULL, 1, &didx, true, &val,
	                               NULL, NULL, &id, &e),
	       TILEATOM_E_STATE, &e, "pipelined responses collected first");
	tileatom_response r;
	CK(tileatom_collect(c, &r, &e), e);
	ck_assert_int_eq(r.status, TILEATOM_OK);
	ck_assert_uint_eq(r.applied, NKEYS);
	ck_assert_uint_eq(tileatom_pending(c), 0);
	tileatom_close(c);
	/* TCP: device memory cannot travel */
	c = conn(true);
	expect(hist(c, dev, NKEYS, want, &e), TILEATOM_E_INVALID_ARGUMENT, &e,
	       "travels only by reference on a Unix-socket connection");
	tileatom_close(c);
	/* $TILEATOM_DEVICE_POINTERS=off: a new connection does not look */
	setenv("TILEATOM_DEVICE_POINTERS", "off", 1);
	c = conn(false);
	unsetenv("TILEATOM_DEVICE_POINTERS");
	fake_queries = 0;
	CK(hist(c, dev, NKEYS, want, &e), e);
	ck_assert_uint_eq(fake_queries, 0);
	tileatom_close(c);
	free(host);
	free(dev);
}
END_TEST

/* tileatom_cuda_stream_sync through the fake driver: the stream given, the query first (no
 * synchronisation when it says done), and each call's error named. */
START_TEST(test_stream_sync)
{
	fake_setup();
	tileatom_error e = {0, ""};
	void *stream = (void *)(uintptr_t)0x5000;
	CK(tileatom_cuda_stream_sync(stream, &e), e);
	ck_assert_ptr_eq(fake_synced, stream);
	CK(tileatom_cuda_stream_sync(NULL, &e), e);
	ck_assert_ptr_null(fake_synced);
	ck_assert_uint_eq(fake_stream_queries, 2);
	fake_sync_result = 999;
	expect(tileatom_cuda_stream_sync(stream, &e), TILEATOM_E_INTERNAL, &e,
	       "cuStreamSynchronize: CUDA_ERROR_FAKE");
	/* a stream with nothing queued: answered by the query, no synchronisation */
	fake_synced = NULL;
	fake_query_result = 0;
	CK(tileatom_cuda_stream_sync(stream, &e), e);
	ck_assert_ptr_null(fake_synced);
	ck_assert_uint_eq(fake_stream_queries, 4);
	/* the query's own error is named after it */
	fake_query_result = 999;
	expect(tileatom_cuda_stream_sync(stream, &e), TILEATOM_E_INTERNAL, &e,
	       "cuStreamQuery: CUDA_ERROR_FAKE");
	ck_assert_ptr_null(fake_synced);
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	unsetenv("TILEATOM_DEVICE_POINTERS");
	const char *const extra[] = {"--listen", "127.0.0.1:0", NULL};
	if (!tcu_daemon_start(&D, extra)) {
		fprintf(stderr, "cannot start %s\n", tcu_daemon_path());
		return EXIT_FAILURE;
	}
	tcp_port = tcu_daemon_tcp_port(&D);
	if (tcp_port <= 0) {
		fprintf(stderr, "the daemon did not log its TCP port\n");
		tcu_daemon_dump_log(&D);
		return EXIT_FAILURE;
	}
	Suite *s = suite_create("cuptr");
	TCase *tc = tcase_create("device_pointers");
	tcase_set_timeout(tc, 120);
	/* in this order: once the fake driver is in, it stays (without fork too) */
	tcase_add_test(tc, test_inert);
	tcase_add_test(tc, test_threshold_setting);
	tcase_add_test(tc, test_fake_device_memory);
	tcase_add_test(tc, test_stream_sync);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	bool alive = tcu_daemon_alive(&D);
	int stop = tcu_daemon_stop(&D, 20000);
	if (!alive || stop != 0) {
		fprintf(stderr, "tileatomd: %s, exit status %d\n", alive ? "alive" : "died", stop);
		failed++;
	}
	if (failed)
		tcu_daemon_dump_log(&D);
	tcu_daemon_cleanup(&D);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
