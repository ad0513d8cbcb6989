/* check_cuda_ipc.c: device buffers (CUDA IPC operands) end to end. This process allocates
 * GPU memory, fills it with 2^24 int32 keys and more operands, registers it with a
 * tileatomd --backend cuda (another process) by its CUDA IPC handle, and checks exact
 * results: a 256-bin histogram (space shared and global) read in place, an element-wise add
 * whose values come from the buffer and whose old values go back into it, a second
 * connection sharing the same handle, keys on every GPU into a tile on every GPU and a
 * sharded one; and the refusals: a size over the allocation, a
 * handle that does not open, references outside the buffer (raw protocol and library),
 * check_bounds off over device indices. Then raw device pointers (no registration by the
 * caller; the library finds the allocations): a histogram from a cudaMalloc'd key array,
 * old values into a raw device pointer, a pointer into the middle of an allocation, two
 * allocations in one request, a freed-and-reallocated allocation, bytes past the
 * allocation, a pipelined submit, managed memory (host), a threshold of 1, a thread with
 * no CUDA context (the library pushes the allocation's) and tileatom_write from a raw
 * device pointer. Exits 77 (skip) in a
 * build without CUDA or without a usable GPU. The suite runs without fork (CUDA does not survive
 * one). */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TA_HAVE_CUDA_TEST
#include <cuda_runtime_api.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check_client_util.h"
#include "raw_ref_add.h"
#include "tileatom.h"
#include "tileatom.pb-c.h"

/* Keys of the histogram. */
#define NKEYS (1 << 24)
/* Bins of the histogram. */
#define NBINS 256
/* Elements of the element-wise add. */
#define NEW (1 << 20)
/* Byte offsets in the device allocation: keys, values, old values; its size (a multiple of
 * 2 MiB, so that one byte more is over the allocation whatever its granularity). */
#define OFF_KEYS    0
#define OFF_VALS    ((size_t)NKEYS * 4)
#define OFF_OLDS    (OFF_VALS + (size_t)NEW * 4)
#define ALLOC_BYTES (OFF_OLDS + (size_t)NEW * 4)

/* The daemon (CUDA backend). */
static tcu_daemon D;
/* The device allocation and its IPC handle. */
static uint8_t *dev;
static cudaIpcMemHandle_t handle;
/* The keys (host copy) and their bins. */
static int32_t *keys;
static int32_t expect_bins[NBINS];

/* Connects to the daemon. */
static tileatom_client *conn(void)
{
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(D.socket, 20000, &c, &e), e);
	return c;
}

/* Registers the whole allocation on c. */
static tileatom_buffer *register_all(tileatom_client *c)
{
	tileatom_buffer *b = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_device_buffer_register(c, &handle, ALLOC_BYTES, dev, &b, &e), e);
	ck_assert(tileatom_buffer_is_device(b));
	ck_assert_ptr_null(tileatom_buffer_data(b));
	ck_assert_uint_eq(tileatom_buffer_size(b), ALLOC_BYTES);
	return b;
}

/* Histograms the device keys of b into a fresh tile name placed by placement (NULL: the
 * daemon's default) in space and checks every bin. */
static void histogram_placed(tileatom_client *c, tileatom_buffer *b, const char *name,
                             const char *placement, tileatom_space space)
{
	tileatom_error e = {0, ""};
	int64_t nbins = NBINS, n = NKEYS;
	CK(tileatom_create_placed(c, name, TILEATOM_INT32, 1, &nbins, NULL, 0, placement, NULL, &e),
	   e);
	tileatom_array idx = tileatom_buffer_array(b, TILEATOM_INT32, 1, &n, OFF_KEYS);
	int32_t one = 1;
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.space = space;
	tileatom_op_result res;
	CK(tileatom_indexed(c, name, TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL, &opts, &res,
	                    &e),
	   e);
	ck_assert_uint_eq(res.applied, NKEYS);
	ck_assert_uint_eq(res.skipped, 0);
	int32_t bins[NBINS];
	CK(tileatom_read(c, name, NULL, bins, sizeof(bins), NULL, &e), e);
	for (int i = 0; i < NBINS; i++)
		ck_assert_msg(bins[i] == expect_bins[i], "%s: bin %d is %d, not %d", name, i,
		              bins[i], expect_bins[i]);
	CK(tileatom_destroy(c, name, &e), e);
}

/* histogram_placed with the daemon's default placement. */
static void histogram(tileatom_client *c, tileatom_buffer *b, const char *name,
                      tileatom_space space)
{
	histogram_placed(c, b, name, NULL, space);
}

START_TEST(test_histogram)
{
	tileatom_client *c = conn();
	tileatom_buffer *b = register_all(c);
	histogram(c, b, "ipc-hist-shared", TILEATOM_SPACE_SHARED);
	histogram(c, b, "ipc-hist-global", TILEATOM_SPACE_GLOBAL);
	/* a second connection registers the same handle (the daemon shares the mapping),
	 * uses it and closes: the first one's mapping stays */
	tileatom_client *c2 = conn();
	tileatom_buffer *b2 = register_all(c2);
	histogram(c2, b2, "ipc-hist-second", TILEATOM_SPACE_SHARED);
	tileatom_close(c2);
	histogram(c, b, "ipc-hist-after", TILEATOM_SPACE_SHARED);
	tileatom_close(c);
	/* and a new connection opens it again after every registration was closed */
	c = conn();
	b = register_all(c);
	histogram(c, b, "ipc-hist-reopened", TILEATOM_SPACE_SHARED);
	tileatom_close(c);
}
END_TEST

START_TEST(test_every_device)
{
	/* keys on each GPU of this host into a tile on each device the daemon serves (and one
	 * sharded over them; gpu-run.sh runs the suite again with TA_TEST_DEVICES=all on a host
	 * of several GPUs): a CUDA IPC mapping serves only the GPU whose context opened
	 * it, so each device the request runs on must map the buffer itself (on one GPU: the
	 * same histogram as test_histogram) */
	int ndev = 0;
	ck_assert_int_eq(cudaGetDeviceCount(&ndev), cudaSuccess);
	tileatom_client *q = conn();
	tileatom_device_stats *ds = NULL;
	size_t served = 0;
	tileatom_error qe = {0, ""};
	CK(tileatom_stats_devices(q, &ds, &served, &qe), qe);
	tileatom_free(ds);
	tileatom_close(q);
	ck_assert_uint_ge(served, 1);
	for (int kd = 0; kd < ndev && kd < 4; kd++) {
		/* closed (the daemon's mappings with it) before the free */
		tileatom_client *c = conn();
		void *p = NULL;
		cudaIpcMemHandle_t h;
		ck_assert_int_eq(cudaSetDevice(kd), cudaSuccess);
		ck_assert_int_eq(cudaMalloc(&p, (size_t)NKEYS * 4), cudaSuccess);
		ck_assert_int_eq(cudaMemcpy(p, keys, (size_t)NKEYS * 4, cudaMemcpyHostToDevice),
		                 cudaSuccess);
		ck_assert_int_eq(cudaIpcGetMemHandle(&h, p), cudaSuccess);
		tileatom_buffer *b = NULL;
		tileatom_error e = {0, ""};
		CK(tileatom_device_buffer_register(c, &h, (size_t)NKEYS * 4, p, &b, &e), e);
		char name[64], where[16];
		for (int td = 0; td <= (int)served && td < 5; td++) {
			if (td < (int)served)
				snprintf(where, sizeof(where), "%d", td);
			else
				snprintf(where, sizeof(where), "shard");
			snprintf(name, sizeof(name), "ipc-keys-%d-tile-%s", kd, where);
			histogram_placed(c, b, name, where, TILEATOM_SPACE_SHARED);
		}
		tileatom_close(c);
		ck_assert_int_eq(cudaFree(p), cudaSuccess);
	}
	ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
}
END_TEST

START_TEST(test_elementwise_old_values_into_device)
{
	/* tile[i] = 3i; values (device) v[i] = i - 7; add with old values written into the
	 * device buffer: tile 4i - 7, old values 3i */
	tileatom_client *c = conn();
	tileatom_buffer *b = register_all(c);
	tileatom_error e = {0, ""};
	int64_t n = NEW;
	int32_t *host = malloc((size_t)NEW * 4);
	ck_assert_ptr_nonnull(host);
	for (int i = 0; i < NEW; i++)
		host[i] = 3 * i;
	CK(tileatom_create(c, "ipc-ew", TILEATOM_INT32, 1, &n, NULL, NULL, &e), e);
	CK(tileatom_write(c, "ipc-ew", NULL, &(tileatom_array){TILEATOM_INT32, 1, {NEW}, host}, &e),
	   e);
	for (int i = 0; i < NEW; i++)
		host[i] = i - 7;
	ck_assert_int_eq(cudaMemcpy(dev + OFF_VALS, host, (size_t)NEW * 4, cudaMemcpyHostToDevice),
	                 cudaSuccess);
	ck_assert_int_eq(cudaMemset(dev + OFF_OLDS, 0xff, (size_t)NEW * 4), cudaSuccess);
	ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
	tileatom_array vals = tileatom_buffer_array(b, TILEATOM_INT32, 1, &n, OFF_VALS);
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.want_old = true;
	opts.old_out = dev + OFF_OLDS;
	opts.old_out_size = (size_t)NEW * 4;
	tileatom_op_result res;
	CK(tileatom_elementwise(c, "ipc-ew", TILEATOM_OP_ADD, NULL, &vals, NULL, &opts, &res, &e),
	   e);
	ck_assert_uint_eq(res.applied, NEW);
	ck_assert_uint_eq(res.old_bytes, (size_t)NEW * 4);
	CK(tileatom_read(c, "ipc-ew", NULL, host, (size_t)NEW * 4, NULL, &e), e);
	for (int i = 0; i < NEW; i++)
		ck_assert_msg(host[i] == 4 * i - 7, "tile[%d] = %d, not %d", i, host[i], 4 * i - 7);
	ck_assert_int_eq(cudaMemcpy(host, dev + OFF_OLDS, (size_t)NEW * 4, cudaMemcpyDeviceToHost),
	                 cudaSuccess);
	for (int i = 0; i < NEW; i++)
		ck_assert_msg(host[i] == 3 * i, "old[%d] = %d, not %d", i, host[i], 3 * i);
	/* the keys were not touched */
	ck_assert_int_eq(cudaMemcpy(host, dev + OFF_KEYS, (size_t)NEW * 4, cudaMemcpyDeviceToHost),
	                 cudaSuccess);
	ck_assert_int_eq(memcmp(host, keys, (size_t)NEW * 4), 0);
	CK(tileatom_destroy(c, "ipc-ew", &e), e);
	free(host);
	tileatom_close(c);
}
END_TEST

/* A raw Unix-socket connection to the daemon, past Hello. */
static int raw_connect(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(s, 0);
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(D.socket), sizeof(a.sun_path)); /* never cut silently */
	memcpy(a.sun_path, D.socket, strlen(D.socket) + 1);
	ck_assert_int_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	struct timeval tv = {20, 0};
	ck_assert_int_eq(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	return s;
}

/* Sends one request frame. */
static void raw_request(int s, Tileatom__Request *req)
{
	size_t len = tileatom__request__get_packed_size(req);
	uint8_t *frame = malloc(len + 4);
	ck_assert_ptr_nonnull(frame);
	for (int i = 0; i < 4; i++)
		frame[i] = (uint8_t)(len >> (8 * i));
	tileatom__request__pack(req, frame + 4);
	ck_assert_int_eq(send(s, frame, len + 4, MSG_NOSIGNAL), (ssize_t)(len + 4));
	free(frame);
}

/* Reads one response frame (free with tileatom__response__free_unpacked). */
static Tileatom__Response *raw_response(int s)
{
	uint8_t hdr[4];
	for (size_t have = 0; have < 4;) {
		ssize_t n = recv(s, hdr + have, 4 - have, 0);
		ck_assert_msg(n > 0, "no response frame");
		have += (size_t)n;
	}
	size_t len = hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
	uint8_t *p = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(p);
	for (size_t have = 0; have < len;) {
		ssize_t n = recv(s, p + have, len - have, 0);
		ck_assert_msg(n > 0, "truncated response frame");
		have += (size_t)n;
	}
	Tileatom__Response *r = tileatom__response__unpack(NULL, len, p);
	free(p);
	ck_assert_ptr_nonnull(r);
	return r;
}

/* Sends a RegisterBufferRequest with handle h (len bytes) and size; returns the response. */
static Tileatom__Response *raw_register_on(int s, const void *h, size_t len, uint64_t size,
                                           const uint8_t *uuid, size_t uuid_len)
{
	Tileatom__Request req;
	Tileatom__RegisterBufferRequest reg;
	tileatom__request__init(&req);
	tileatom__register_buffer_request__init(&reg);
	reg.size = size;
	reg.cuda_ipc_handle.data = (uint8_t *)(uintptr_t)h;
	reg.cuda_ipc_handle.len = len;
	reg.cuda_device_uuid.data = (uint8_t *)(uintptr_t)uuid;
	reg.cuda_device_uuid.len = uuid_len;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_REGISTER_BUFFER;
	req.register_buffer = &reg;
	raw_request(s, &req);
	return raw_response(s);
}

/* raw_register_on naming no GPU. */
static Tileatom__Response *raw_register(int s, const void *h, size_t len, uint64_t size)
{
	return raw_register_on(s, h, len, size, NULL, 0);
}

/* Expects status and a message containing sub; frees r. */
static void expect(Tileatom__Response *r, Tileatom__Status status, const char *sub)
{
	ck_assert_msg(r->status == status, "status %d, not %d: %s", (int)r->status, (int)status,
	              r->message);
	ck_assert_msg(strstr(r->message, sub), "message \"%s\" lacks \"%s\"", r->message, sub);
	tileatom__response__free_unpacked(r, NULL);
}

START_TEST(test_refusals)
{
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int64_t nbins = NBINS;
	CK(tileatom_create(c, "ipc-ref", TILEATOM_INT32, 1, &nbins, NULL, NULL, &e), e);
	int s = raw_connect();
	Tileatom__Request req;
	Tileatom__HelloRequest hello;
	tileatom__request__init(&req);
	tileatom__hello_request__init(&hello);
	hello.protocol_version = TILEATOM_PROTOCOL_VERSION;
	req.body_case = TILEATOM__REQUEST__BODY_HELLO;
	req.hello = &hello;
	raw_request(s, &req);
	expect(raw_response(s), TILEATOM__STATUS__OK, "");
	/* sizes over the allocation: one byte, and 64 MiB */
	expect(raw_register(s, &handle, sizeof(handle), ALLOC_BYTES + 1),
	       TILEATOM__STATUS__INVALID_ARGUMENT, "device allocation behind the handle has");
	expect(raw_register(s, &handle, sizeof(handle), ALLOC_BYTES + (64u << 20)),
	       TILEATOM__STATUS__INVALID_ARGUMENT, "device allocation behind the handle has");
	/* a handle that does not open, one of the wrong length */
	uint8_t junk[sizeof(handle)];
	memset(junk, 0xa5, sizeof(junk));
	expect(raw_register(s, junk, sizeof(junk), 4096), TILEATOM__STATUS__INVALID_ARGUMENT,
	       "does not open");
	expect(raw_register(s, &handle, 63, 4096), TILEATOM__STATUS__INVALID_ARGUMENT,
	       "has 64 bytes, not 63");
	/* a GPU UUID of the wrong length; one no GPU of the daemon has is ignored */
	uint8_t uuid[16];
	memset(uuid, 0xee, sizeof(uuid));
	expect(raw_register_on(s, &handle, sizeof(handle), 4096, uuid, 5),
	       TILEATOM__STATUS__INVALID_ARGUMENT, "GPU UUID has 16 bytes, not 5");
	expect(raw_register_on(s, &handle, sizeof(handle), 4096, uuid, sizeof(uuid)),
	       TILEATOM__STATUS__OK, "");
	/* the real one */
	Tileatom__Response *r = raw_register(s, &handle, sizeof(handle), ALLOC_BYTES);
	ck_assert_int_eq(r->status, TILEATOM__STATUS__OK);
	uint64_t id = r->buffer->buffer_id;
	tileatom__response__free_unpacked(r, NULL);
	/* a reference past the end of the buffer, one at an offset past it */
	raw_ref_add a;
	raw_ref_add_init(&a, "ipc-ref", 2, id, ALLOC_BYTES - 16, 32);
	raw_request(s, &a.req);
	expect(raw_response(s), TILEATOM__STATUS__INVALID_ARGUMENT, "outside device buffer");
	a.ref.offset = ALLOC_BYTES + 4096;
	a.ref.length = 32;
	raw_request(s, &a.req);
	expect(raw_response(s), TILEATOM__STATUS__INVALID_ARGUMENT, "outside device buffer");
	/* old values into bytes past the end */
	a.ref.offset = 0;
	Tileatom__Options opt;
	Tileatom__BufferRef oref;
	tileatom__options__init(&opt);
	tileatom__buffer_ref__init(&oref);
	opt.want_old = true;
	opt.old_into = &oref;
	oref.buffer_id = id;
	oref.offset = ALLOC_BYTES - 8;
	oref.length = 32;
	a.ix.options = &opt;
	raw_request(s, &a.req);
	expect(raw_response(s), TILEATOM__STATUS__INVALID_ARGUMENT, "outside device buffer");
	close(s);

	/* through the library: an array running past the buffer's end goes by reference and is
	 * refused; check_bounds off over device indices is refused; nothing was applied */
	tileatom_buffer *b = register_all(c);
	int64_t n = 32;
	tileatom_array idx = tileatom_buffer_array(b, TILEATOM_INT32, 1, &n, ALLOC_BYTES - 64);
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &a.one);
	tileatom_op_result res;
	int rc = tileatom_indexed(c, "ipc-ref", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL,
	                          NULL, &res, &e);
	ck_assert_msg(rc == TILEATOM_E_INVALID_ARGUMENT, "%s: %s", tileatom_strerror(rc),
	              e.message);
	ck_assert_msg(strstr(e.message, "outside device buffer"), "message: %s", e.message);
	idx = tileatom_buffer_array(b, TILEATOM_INT32, 1, &n, OFF_KEYS);
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.check_bounds = false;
	rc = tileatom_indexed(c, "ipc-ref", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL, &opts,
	                      &res, &e);
	ck_assert_msg(rc == TILEATOM_E_INVALID_ARGUMENT, "%s: %s", tileatom_strerror(rc),
	              e.message);
	ck_assert_msg(strstr(e.message, "check_bounds off"), "message: %s", e.message);
	int32_t bins[NBINS];
	CK(tileatom_read(c, "ipc-ref", NULL, bins, sizeof(bins), NULL, &e), e);
	for (int i = 0; i < NBINS; i++)
		ck_assert_int_eq(bins[i], 0);
	/* the connection still works with the buffer */
	opts.check_bounds = true;
	CK(tileatom_indexed(c, "ipc-ref", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL, &opts,
	                    &res, &e),
	   e);
	ck_assert_uint_eq(res.applied, 32);
	CK(tileatom_destroy(c, "ipc-ref", &e), e);
	tileatom_close(c);
}
END_TEST

/* Histograms n int32 keys at the raw device address p (no registration by the caller)
 * into a fresh tile name and checks every bin against want (each count times scale). */
static void raw_histogram(tileatom_client *c, const void *p, int64_t n, const char *name,
                          const int32_t *want, int32_t scale)
{
	tileatom_error e = {0, ""};
	int64_t nbins = NBINS;
	CK(tileatom_create(c, name, TILEATOM_INT32, 1, &nbins, NULL, NULL, &e), e);
	tileatom_array idx = tileatom_vector(TILEATOM_INT32, n, p);
	int32_t one = 1;
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.space = TILEATOM_SPACE_SHARED;
	tileatom_op_result res;
	CK(tileatom_indexed(c, name, TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL, &opts, &res,
	                    &e),
	   e);
	ck_assert_uint_eq(res.applied, (uint64_t)n);
	int32_t bins[NBINS];
	CK(tileatom_read(c, name, NULL, bins, sizeof(bins), NULL, &e), e);
	for (int i = 0; i < NBINS; i++)
		ck_assert_msg(bins[i] == want[i] * scale, "%s: bin %d is %d, not %d", name, i,
		              bins[i], want[i] * scale);
	CK(tileatom_destroy(c, name, &e), e);
}

/* The bins of keys[from, from + n). */
static void count_keys(int64_t from, int64_t n, int32_t *bins)
{
	memset(bins, 0, NBINS * sizeof(int32_t));
	for (int64_t i = from; i < from + n; i++)
		bins[keys[i]]++;
}

START_TEST(test_raw_histogram)
{
	/* the keys at the raw cudaMalloc'd address: twice on one connection (registered once),
	 * then from the middle of the allocation (1000 keys in, 2^20 keys) */
	tileatom_client *c = conn();
	raw_histogram(c, dev + OFF_KEYS, NKEYS, "raw-hist", expect_bins, 1);
	raw_histogram(c, dev + OFF_KEYS, NKEYS, "raw-hist-again", expect_bins, 1);
	int32_t want[NBINS];
	count_keys(1000, 1 << 20, want);
	raw_histogram(c, dev + OFF_KEYS + 4000, 1 << 20, "raw-hist-middle", want, 1);
	/* a small array inside the allocation seen before is looked up too (under the
	 * threshold) */
	count_keys(77, 100, want);
	raw_histogram(c, dev + OFF_KEYS + 77 * 4, 100, "raw-hist-small", want, 1);
	tileatom_close(c);
}
END_TEST

START_TEST(test_raw_old_values_into_device)
{
	/* tile[i] = 5i; values v[i] = 2i + 1 read from a raw device pointer; old values
	 * written to another raw device pointer: tile 7i + 1, old values 5i */
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int64_t n = NEW;
	int32_t *host = malloc((size_t)NEW * 4);
	ck_assert_ptr_nonnull(host);
	for (int i = 0; i < NEW; i++)
		host[i] = 5 * i;
	CK(tileatom_create(c, "raw-ew", TILEATOM_INT32, 1, &n, NULL, NULL, &e), e);
	CK(tileatom_write(c, "raw-ew", NULL, &(tileatom_array){TILEATOM_INT32, 1, {NEW}, host}, &e),
	   e);
	for (int i = 0; i < NEW; i++)
		host[i] = 2 * i + 1;
	ck_assert_int_eq(cudaMemcpy(dev + OFF_VALS, host, (size_t)NEW * 4, cudaMemcpyHostToDevice),
	                 cudaSuccess);
	ck_assert_int_eq(cudaMemset(dev + OFF_OLDS, 0xff, (size_t)NEW * 4), cudaSuccess);
	ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
	tileatom_array vals = tileatom_vector(TILEATOM_INT32, NEW, dev + OFF_VALS);
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.want_old = true;
	opts.old_out = dev + OFF_OLDS;
	opts.old_out_size = (size_t)NEW * 4;
	tileatom_op_result res;
	CK(tileatom_elementwise(c, "raw-ew", TILEATOM_OP_ADD, NULL, &vals, NULL, &opts, &res, &e),
	   e);
	ck_assert_uint_eq(res.applied, NEW);
	ck_assert_uint_eq(res.old_bytes, (size_t)NEW * 4);
	CK(tileatom_read(c, "raw-ew", NULL, host, (size_t)NEW * 4, NULL, &e), e);
	for (int i = 0; i < NEW; i++)
		ck_assert_msg(host[i] == 7 * i + 1, "tile[%d] = %d, not %d", i, host[i], 7 * i + 1);
	ck_assert_int_eq(cudaMemcpy(host, dev + OFF_OLDS, (size_t)NEW * 4, cudaMemcpyDeviceToHost),
	                 cudaSuccess);
	for (int i = 0; i < NEW; i++)
		ck_assert_msg(host[i] == 5 * i, "old[%d] = %d, not %d", i, host[i], 5 * i);
	/* reading a tile into device memory is refused, not a crash */
	int rc = tileatom_read(c, "raw-ew", NULL, dev + OFF_OLDS, (size_t)NEW * 4, NULL, &e);
	ck_assert_msg(rc == TILEATOM_E_INVALID_ARGUMENT, "%s: %s", tileatom_strerror(rc),
	              e.message);
	ck_assert_msg(strstr(e.message, "give a host buffer"), "message: %s", e.message);
	CK(tileatom_destroy(c, "raw-ew", &e), e);
	free(host);
	tileatom_close(c);
}
END_TEST

/* A thread that has made no CUDA call (no current context): connects and histograms the
 * raw keys, so that the library pushes the allocation's context to get its IPC handle.
 * Returns NULL when every bin was right, else a message (static). */
static void *other_thread(void *arg)
{
	(void)arg;
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	if (tileatom_connect(D.socket, 20000, &c, &e) != TILEATOM_OK)
		return (void *)"connect failed";
	int64_t nbins = NBINS;
	int32_t one = 1, bins[NBINS];
	tileatom_array idx = tileatom_vector(TILEATOM_INT32, NKEYS, dev + OFF_KEYS);
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_op_result res;
	const char *bad = NULL;
	if (tileatom_create(c, "raw-thread", TILEATOM_INT32, 1, &nbins, NULL, NULL, &e) !=
	        TILEATOM_OK ||
	    tileatom_indexed(c, "raw-thread", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL,
	                     NULL, &res, &e) != TILEATOM_OK ||
	    tileatom_read(c, "raw-thread", NULL, bins, sizeof(bins), NULL, &e) != TILEATOM_OK)
		bad = "a call failed";
	for (int i = 0; !bad && i < NBINS; i++)
		if (bins[i] != expect_bins[i])
			bad = "a bin differs";
	if (bad)
		fprintf(stderr, "other thread: %s (%s)\n", bad, e.message);
	(void)tileatom_destroy(c, "raw-thread", &e);
	tileatom_close(c);
	return (void *)(uintptr_t)bad;
}

START_TEST(test_raw_other_thread_and_write)
{
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
	void *bad = NULL;
	ck_assert_int_eq(pthread_join(t, &bad), 0);
	ck_assert_msg(bad == NULL, "the thread without a CUDA context: %s", (const char *)bad);
	/* tileatom_write from a raw device pointer: the tile gets the device bytes */
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int64_t n = 1 << 20;
	CK(tileatom_create(c, "raw-write", TILEATOM_INT32, 1, &n, NULL, NULL, &e), e);
	tileatom_array src = tileatom_vector(TILEATOM_INT32, n, dev + OFF_KEYS);
	CK(tileatom_write(c, "raw-write", NULL, &src, &e), e);
	int32_t *host = malloc((size_t)n * 4);
	ck_assert_ptr_nonnull(host);
	CK(tileatom_read(c, "raw-write", NULL, host, (size_t)n * 4, NULL, &e), e);
	ck_assert_int_eq(memcmp(host, keys, (size_t)n * 4), 0);
	free(host);
	CK(tileatom_destroy(c, "raw-write", &e), e);
	tileatom_close(c);
}
END_TEST

/* cudaMalloc of bytes, asserted. */
static uint8_t *dalloc(size_t bytes)
{
	void *p = NULL;
	ck_assert_int_eq(cudaMalloc(&p, bytes), cudaSuccess);
	return p;
}

START_TEST(test_raw_two_allocations)
{
	/* keys in allocation A, values (all 3) in allocation B, in one request: bins are 3x
	 * the counts; then the second half of the keys from a third allocation */
	enum { HALF = NKEYS / 2 };
	uint8_t *a = dalloc((size_t)HALF * 4), *b = dalloc((size_t)HALF * 4);
	uint8_t *k2 = dalloc((size_t)HALF * 4);
	ck_assert_int_eq(cudaMemcpy(a, keys, (size_t)HALF * 4, cudaMemcpyHostToDevice),
	                 cudaSuccess);
	ck_assert_int_eq(cudaMemcpy(k2, keys + HALF, (size_t)HALF * 4, cudaMemcpyHostToDevice),
	                 cudaSuccess);
	int32_t *three = malloc((size_t)HALF * 4);
	ck_assert_ptr_nonnull(three);
	for (int i = 0; i < HALF; i++)
		three[i] = 3;
	ck_assert_int_eq(cudaMemcpy(b, three, (size_t)HALF * 4, cudaMemcpyHostToDevice),
	                 cudaSuccess);
	free(three);
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int64_t nbins = NBINS;
	CK(tileatom_create(c, "raw-two", TILEATOM_INT32, 1, &nbins, NULL, NULL, &e), e);
	tileatom_array idx = tileatom_vector(TILEATOM_INT32, HALF, a);
	tileatom_array val = tileatom_vector(TILEATOM_INT32, HALF, b);
	tileatom_op_result res;
	CK(tileatom_indexed(c, "raw-two", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL, NULL,
	                    &res, &e),
	   e);
	ck_assert_uint_eq(res.applied, HALF);
	int32_t bins[NBINS], want[NBINS];
	count_keys(0, HALF, want);
	CK(tileatom_read(c, "raw-two", NULL, bins, sizeof(bins), NULL, &e), e);
	for (int i = 0; i < NBINS; i++)
		ck_assert_msg(bins[i] == 3 * want[i], "bin %d is %d, not %d", i, bins[i],
		              3 * want[i]);
	CK(tileatom_destroy(c, "raw-two", &e), e);
	count_keys(HALF, HALF, want);
	raw_histogram(c, k2, HALF, "raw-two-second", want, 1);
	tileatom_close(c);
	cudaFree(a);
	cudaFree(b);
	cudaFree(k2);
}
END_TEST

START_TEST(test_raw_freed_and_reallocated)
{
	/* an allocation used, freed, and a new one (often at the same address) holding other
	 * keys: the new keys are histogrammed, not the old ones */
	enum { N = 1 << 20 };
	tileatom_client *c = conn();
	uint8_t *p = dalloc((size_t)N * 4);
	ck_assert_int_eq(cudaMemcpy(p, keys, (size_t)N * 4, cudaMemcpyHostToDevice), cudaSuccess);
	int32_t want[NBINS];
	count_keys(0, N, want);
	raw_histogram(c, p, N, "raw-realloc-1", want, 1);
	ck_assert_int_eq(cudaFree(p), cudaSuccess);
	uint8_t *q = dalloc((size_t)N * 4);
	fprintf(stderr, "check_cuda_ipc: reallocated at %s address\n",
	        q == p ? "the same" : "another");
	/* every key 7 now */
	int32_t *sevens = malloc((size_t)N * 4);
	ck_assert_ptr_nonnull(sevens);
	for (int i = 0; i < N; i++)
		sevens[i] = 7;
	ck_assert_int_eq(cudaMemcpy(q, sevens, (size_t)N * 4, cudaMemcpyHostToDevice), cudaSuccess);
	free(sevens);
	memset(want, 0, sizeof(want));
	want[7] = N;
	raw_histogram(c, q, N, "raw-realloc-2", want, 1);
	/* the same again, with a smaller allocation at that address */
	ck_assert_int_eq(cudaFree(q), cudaSuccess);
	uint8_t *r = dalloc((size_t)N * 2);
	ck_assert_int_eq(cudaMemcpy(r, keys, (size_t)N * 2, cudaMemcpyHostToDevice), cudaSuccess);
	count_keys(0, N / 2, want);
	raw_histogram(c, r, N / 2, "raw-realloc-3", want, 1);
	ck_assert_int_eq(cudaFree(r), cudaSuccess);
	tileatom_close(c);
}
END_TEST

START_TEST(test_raw_refusals)
{
	/* bytes past the end of the allocation (2 MiB: a multiple of any granularity): one
	 * array large enough to be looked up, one small one in an allocation used before;
	 * nothing is applied */
	enum { BYTES = 2 << 20 };
	uint8_t *p = dalloc(BYTES);
	ck_assert_int_eq(cudaMemcpy(p, keys, BYTES, cudaMemcpyHostToDevice), cudaSuccess);
	tileatom_client *c = conn();
	tileatom_error e = {0, ""};
	int64_t nbins = NBINS;
	CK(tileatom_create(c, "raw-past", TILEATOM_INT32, 1, &nbins, NULL, NULL, &e), e);
	int32_t one = 1;
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_op_result res;
	tileatom_array idx = tileatom_vector(TILEATOM_INT32, BYTES / 8 + 16, p + BYTES / 2);
	int rc = tileatom_indexed(c, "raw-past", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL,
	                          NULL, &res, &e);
	ck_assert_msg(rc == TILEATOM_E_INVALID_ARGUMENT, "%s: %s", tileatom_strerror(rc),
	              e.message);
	ck_assert_msg(strstr(e.message, "past the end of its device allocation"), "message: %s",
	              e.message);
	int32_t want[NBINS];
	count_keys(0, BYTES / 4, want);
	raw_histogram(c, p, BYTES / 4, "raw-past-ok", want, 1);
	idx = tileatom_vector(TILEATOM_INT32, 32, p + BYTES - 64);
	rc = tileatom_indexed(c, "raw-past", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL, NULL,
	                      &res, &e);
	ck_assert_msg(rc == TILEATOM_E_INVALID_ARGUMENT, "%s: %s", tileatom_strerror(rc),
	              e.message);
	ck_assert_msg(strstr(e.message, "past the end of its device allocation"), "message: %s",
	              e.message);
	int32_t bins[NBINS];
	CK(tileatom_read(c, "raw-past", NULL, bins, sizeof(bins), NULL, &e), e);
	for (int i = 0; i < NBINS; i++)
		ck_assert_int_eq(bins[i], 0);
	/* a pipelined submit finds the allocation registered before; one that needs a new
	 * registration while a response is outstanding is TILEATOM_E_STATE */
	uint64_t id = 0;
	idx = tileatom_vector(TILEATOM_INT32, 1 << 16, p);
	CK(tileatom_submit_indexed(c, "raw-past", TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL,
	                           NULL, &id, &e),
	   e);
	uint8_t *q = dalloc(BYTES);
	ck_assert_int_eq(cudaMemcpy(q, keys, BYTES, cudaMemcpyHostToDevice), cudaSuccess);
	tileatom_array idx2 = tileatom_vector(TILEATOM_INT32, 1 << 16, q);
	rc = tileatom_submit_indexed(c, "raw-past", TILEATOM_OP_ADD, NULL, 1, &idx2, true, &val,
	                             NULL, NULL, &id, &e);
	ck_assert_msg(rc == TILEATOM_E_STATE, "%s: %s", tileatom_strerror(rc), e.message);
	tileatom_response r;
	CK(tileatom_collect(c, &r, &e), e);
	ck_assert_int_eq(r.status, TILEATOM_OK);
	ck_assert_uint_eq(r.applied, 1 << 16);
	CK(tileatom_read(c, "raw-past", NULL, bins, sizeof(bins), NULL, &e), e);
	count_keys(0, 1 << 16, want);
	for (int i = 0; i < NBINS; i++)
		ck_assert_int_eq(bins[i], want[i]);
	CK(tileatom_destroy(c, "raw-past", &e), e);
	/* managed memory is host memory to the library: read by the CPU, exact */
	void *m = NULL;
	ck_assert_int_eq(cudaMallocManaged(&m, (size_t)(1 << 20) * 4, cudaMemAttachGlobal),
	                 cudaSuccess);
	memcpy(m, keys, (size_t)(1 << 20) * 4);
	count_keys(0, 1 << 20, want);
	raw_histogram(c, m, 1 << 20, "raw-managed", want, 1);
	/* a threshold of 1 byte: 8 keys (32 bytes) in an allocation not seen yet are looked
	 * up too */
	tileatom_set_device_ptr_threshold(c, 1);
	count_keys(0, 8, want);
	raw_histogram(c, q, 8, "raw-tiny", want, 1);
	tileatom_close(c);
	cudaFree(m);
	cudaFree(p);
	cudaFree(q);
}
END_TEST

/* splitmix64: the next pseudo-random value of *state. */
static uint64_t rnd(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	int ndev = 0;
	cudaError_t ce = cudaGetDeviceCount(&ndev);
	if (ce != cudaSuccess || ndev == 0) {
		fprintf(stderr, "check_cuda_ipc: no usable GPU (%s): skipped\n",
		        ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
		return 77;
	}
	/* the daemon is another process: started before this one allocates */
	setenv("TA_TEST_BACKEND", "cuda", 1);
	if (!tcu_daemon_start(&D, NULL)) {
		fprintf(stderr, "cannot start %s --backend cuda\n", tcu_daemon_path());
		return EXIT_FAILURE;
	}
	keys = malloc((size_t)NKEYS * 4);
	if (!keys)
		return EXIT_FAILURE;
	uint64_t st = 2026;
	for (int i = 0; i < NKEYS; i++) {
		keys[i] = (int32_t)(rnd(&st) % NBINS);
		expect_bins[keys[i]]++;
	}
	void *p = NULL;
	ce = cudaMalloc(&p, ALLOC_BYTES);
	if (ce == cudaSuccess)
		ce = cudaMemcpy(p, keys, (size_t)NKEYS * 4, cudaMemcpyHostToDevice);
	if (ce == cudaSuccess)
		ce = cudaIpcGetMemHandle(&handle, p);
	if (ce != cudaSuccess) {
		fprintf(stderr, "check_cuda_ipc: device setup: %s\n", cudaGetErrorString(ce));
		return EXIT_FAILURE;
	}
	dev = p;
	Suite *s = suite_create("cuda_ipc");
	TCase *tc = tcase_create("device_buffers");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_histogram);
	tcase_add_test(tc, test_every_device);
	tcase_add_test(tc, test_elementwise_old_values_into_device);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_raw_histogram);
	tcase_add_test(tc, test_raw_old_values_into_device);
	tcase_add_test(tc, test_raw_two_allocations);
	tcase_add_test(tc, test_raw_freed_and_reallocated);
	tcase_add_test(tc, test_raw_refusals);
	tcase_add_test(tc, test_raw_other_thread_and_write);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	bool alive = tcu_daemon_alive(&D);
	int stop = tcu_daemon_stop(&D, 20000);
	if (!alive || stop != 0) {
		fprintf(stderr, "tileatomd --backend cuda: %s, exit status %d\n",
		        alive ? "alive" : "died", stop);
		failed++;
	}
	if (failed)
		tcu_daemon_dump_log(&D);
	tcu_daemon_cleanup(&D);
	cudaFree(p);
	free(keys);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
#else
int main(void)
{
	fprintf(stderr, "check_cuda_ipc: built without CUDA: skipped\n");
	return 77;
}
#endif
