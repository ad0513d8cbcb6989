/* tac_cuptr.c: raw CUDA device pointers as operands. Before a request is staged, split or
 * sent, tac_cuptr_prepare asks the driver (cuPointerGetAttributes) about each operand array
 * and old-values buffer of at least the connection's threshold, and about any array in an
 * allocation it registered before: device memory (not managed) has its whole allocation
 * registered once per connection as a device buffer (its CUDA IPC handle), which
 * tac_shm_rewrite then names. The cache, keyed by the allocation's base, drops an entry
 * whose allocation changed (size, buffer id, or no longer device memory). The library does
 * not link against CUDA: it uses libcuda.so.1 only when the process has loaded it (dlopen
 * RTLD_NOLOAD), asking again only after the process loads another shared object.
 * tileatom_device_buffer_register (explicit registrations and these) lives here too: it
 * names the buffer's GPU by its UUID when the driver can tell, for a daemon over several
 * GPUs, and registers the buffer through tac_shm.c; so does tileatom_cuda_stream_sync.
 *
 * Failure modes: device memory that cannot travel by reference (a TCP connection, no CUDA
 * IPC handle, an array past its allocation, pipelined responses not collected before a
 * registration) fails the call before anything is sent; a daemon refusal (the CPU backend:
 * TILEATOM_E_UNIMPLEMENTED) is returned as is; a driver error is reported with its name.
 * Host, pinned and managed memory, and processes without the driver, go inline. */
#include "tac_internal.h"

#include <dlfcn.h> /* RTLD_NOLOAD, dl_iterate_phdr: _GNU_SOURCE (AM_CPPFLAGS) */
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the few driver API declarations used (cuda.h, CUDA driver API reference) ---------- */

/* CUresult: 0 is CUDA_SUCCESS. */
typedef int tac_cu_result;
/* CUdeviceptr (64-bit in the _v2 API). */
typedef unsigned long long tac_cu_ptr;
/* CUcontext. */
typedef void *tac_cu_context;
/* CUDA_ERROR_NOT_INITIALIZED and CUDA_ERROR_DEINITIALIZED: no device memory to find. */
#define TAC_CU_NOT_INITIALIZED 3
#define TAC_CU_DEINITIALIZED   4
/* CUDA_ERROR_NOT_READY: a stream still has work queued (cuStreamQuery). */
#define TAC_CU_NOT_READY 600
/* CUmemorytype CU_MEMORYTYPE_DEVICE. */
#define TAC_CU_MEMORYTYPE_DEVICE 2
/* CUpointer_attribute values asked for. */
enum {
	TAC_CU_ATTR_CONTEXT = 1,      /* CUcontext */
	TAC_CU_ATTR_MEMORY_TYPE = 2,  /* CUmemorytype (unsigned int) */
	TAC_CU_ATTR_BUFFER_ID = 7,    /* unsigned long long, unique within the process */
	TAC_CU_ATTR_IS_MANAGED = 8,   /* boolean */
	TAC_CU_ATTR_ORDINAL = 9,      /* int: the device ordinal (gpu_uuid) */
	TAC_CU_ATTR_IPC_CAPABLE = 10, /* boolean: cuIpcGetMemHandle works on it */
	TAC_CU_ATTR_RANGE_START = 11, /* CUdeviceptr: the allocation's base */
	TAC_CU_ATTR_RANGE_SIZE = 12   /* size_t: the allocation's bytes */
};
/* Attributes asked for in one cuPointerGetAttributes call. */
#define TAC_CU_NATTRS 7

/* The driver entry points, looked up once. */
typedef struct tac_cu_driver {
	tac_cu_result (*pointer_get_attributes)(unsigned n, int *attrs, void **data,
	                                        tac_cu_ptr p); /* cuPointerGetAttributes */
	tac_cu_result (*ipc_get_mem_handle)(void *handle, tac_cu_ptr p); /* cuIpcGetMemHandle */
	tac_cu_result (*ctx_get_current)(tac_cu_context *ctx);           /* cuCtxGetCurrent */
	tac_cu_result (*ctx_push)(tac_cu_context ctx);                   /* cuCtxPushCurrent_v2 */
	tac_cu_result (*ctx_pop)(tac_cu_context *ctx);                   /* cuCtxPopCurrent_v2 */
	tac_cu_result (*error_name)(tac_cu_result e, const char **s);    /* cuGetErrorName */
	tac_cu_result (*device_get)(int *dev, int ordinal); /* cuDeviceGet (optional: NULL) */
	tac_cu_result (*device_uuid)(void *uuid, int dev);  /* cuDeviceGetUuid (optional) */
	tac_cu_result (*stream_sync)(void *stream);         /* cuStreamSynchronize (optional) */
	tac_cu_result (*stream_query)(void *stream);        /* cuStreamQuery (optional) */
} tac_cu_driver;

/* The driver once found (never unloaded); NULL until then. */
static _Atomic(const tac_cu_driver *) cu_found;
/* Serialises the look-ups. */
static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;
/* dlpi_adds when the driver was last looked for and not found (0: never looked). */
static unsigned long long cu_missed_at;
/* Look-ups that called dlopen (for the tests: the cached answer costs none). */
static atomic_ulong cu_lookups;

/* dl_iterate_phdr callback: the process's count of shared-object loads into *arg. */
static int loads_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1; /* the first object is enough */
}

/* With cu_lock held and no driver found yet: takes the driver's entry points from handle h
 * and publishes them; false when h is NULL or a required one is missing. */
static bool cu_install(void *h)
{
	static tac_cu_driver drv;
	struct {
		void **slot;      /* where the address goes */
		const char *name; /* the driver's symbol */
		bool optional;    /* not needed for device operands (gpu_uuid, stream sync) */
	} syms[] = {
	    {(void **)&drv.pointer_get_attributes, "cuPointerGetAttributes", false},
	    {(void **)&drv.ipc_get_mem_handle, "cuIpcGetMemHandle", false},
	    {(void **)&drv.ctx_get_current, "cuCtxGetCurrent", false},
	    {(void **)&drv.ctx_push, "cuCtxPushCurrent_v2", false},
	    {(void **)&drv.ctx_pop, "cuCtxPopCurrent_v2", false},
	    {(void **)&drv.error_name, "cuGetErrorName", false},
	    {(void **)&drv.device_get, "cuDeviceGet", true},
	    {(void **)&drv.device_uuid, "cuDeviceGetUuid", true},
	    {(void **)&drv.stream_sync, "cuStreamSynchronize", true},
	    {(void **)&drv.stream_query, "cuStreamQuery", true},
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = h ? dlsym(h, syms[i].name) : NULL;
		if (!f && !syms[i].optional)
			return false;
		memcpy(syms[i].slot, &f, sizeof(f));
	}
	atomic_store_explicit(&cu_found, &drv, memory_order_release);
	return true;
}

/* The driver when the process has loaded libcuda.so.1, else NULL (cached until the process
 * loads another shared object). */
static const tac_cu_driver *cu_driver(void)
{
	const tac_cu_driver *d = atomic_load_explicit(&cu_found, memory_order_acquire);
	if (d)
		return d;
	unsigned long long adds = 0;
	dl_iterate_phdr(loads_cb, &adds);
	pthread_mutex_lock(&cu_lock);
	if (!atomic_load(&cu_found) && adds != cu_missed_at) {
		atomic_fetch_add(&cu_lookups, 1);
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		if (!cu_install(h)) {
			if (h)
				(void)dlclose(h);
			cu_missed_at = adds;
		}
	}
	d = atomic_load_explicit(&cu_found, memory_order_acquire);
	pthread_mutex_unlock(&cu_lock);
	return d;
}

bool tac_cuptr_load_from(void *handle)
{
	pthread_mutex_lock(&cu_lock);
	bool ok = !atomic_load(&cu_found) && cu_install(handle);
	pthread_mutex_unlock(&cu_lock);
	return ok;
}

unsigned long tac_cuptr_lookups(void)
{
	return atomic_load(&cu_lookups);
}

bool tac_cuptr_driver_loaded(void)
{
	return cu_driver() != NULL;
}

/* The UUID of the GPU holding device memory p, as the driver says (false when it cannot:
 * no driver loaded, an old one, not device memory). */
static bool gpu_uuid(const void *p, uint8_t uuid[TAC_GPU_UUID_SIZE])
{
	const tac_cu_driver *d = cu_driver();
	int ordinal = -1, dev = -1, attr = TAC_CU_ATTR_ORDINAL;
	void *data = &ordinal;
	return d && d->device_get && d->device_uuid &&
	       d->pointer_get_attributes(1, &attr, &data, (tac_cu_ptr)(uintptr_t)p) == 0 &&
	       ordinal >= 0 && d->device_get(&dev, ordinal) == 0 && d->device_uuid(uuid, dev) == 0;
}

/* The driver's name for e ("CUDA_ERROR_..."), or its number. */
static const char *cu_error(const tac_cu_driver *d, tac_cu_result e, char *buf, size_t size)
{
	const char *s = NULL;
	if (d->error_name(e, &s) == 0 && s)
		return s;
	snprintf(buf, size, "CUDA error %d", e);
	return buf;
}

int tileatom_cuda_stream_sync(void *stream, tileatom_error *err)
{
	const tac_cu_driver *d = cu_driver();
	if (!d || !d->stream_sync)
		return tac_err(err, TILEATOM_E_UNIMPLEMENTED,
		               "the process has not loaded the CUDA driver (libcuda.so.1)");
	/* a stream with nothing queued (the common case: the caller's kernels have finished)
	 * needs no wait: the query answers without the synchronisation's set-up */
	const char *call = "cuStreamQuery";
	tac_cu_result e = d->stream_query ? d->stream_query(stream) : TAC_CU_NOT_READY;
	if (e == TAC_CU_NOT_READY) {
		call = "cuStreamSynchronize";
		e = d->stream_sync(stream);
	}
	char buf[32];
	return e == 0 ? TILEATOM_OK
	              : tac_err(err, TILEATOM_E_INTERNAL, "%s: %s", call,
	                        cu_error(d, e, buf, sizeof(buf)));
}

/* ---- the per-connection cache ---------------------------------------------------------- */

/* One allocation registered on the connection by this file (c->cuptr). */
struct tac_cuptr_entry {
	uint64_t base;        /* the allocation's device address */
	uint64_t size;        /* its bytes */
	uint64_t alloc_id;    /* CU_POINTER_ATTRIBUTE_BUFFER_ID when registered */
	tileatom_buffer *buf; /* the device buffer (listed in the client's buffers) */
};

/* Forgets entry e of c: its buffer is freed here (the daemon keeps its mapping until the
 * connection closes; it has no unregistering). */
static void entry_drop(tileatom_client *c, struct tac_cuptr_entry *e)
{
	tileatom_buffer_free(e->buf);
	*e = c->cuptr[--c->ncuptr];
}

/* What the driver says about one address. */
typedef struct cu_facts {
	const tac_cu_driver *d; /* the driver (NULL: not loaded, so no device memory) */
	bool device;            /* device memory (not managed) */
	bool ipc_capable;       /* cuIpcGetMemHandle works on its allocation */
	uint64_t base;          /* the allocation's base */
	uint64_t size;          /* its bytes */
	uint64_t alloc_id;      /* its process-unique id */
	tac_cu_context ctx;     /* its context */
} cu_facts;

/* Asks the driver, when the process has loaded it, about p; what names it in messages. */
static int cu_ask(const void *p, const char *what, cu_facts *f, tileatom_error *err)
{
	memset(f, 0, sizeof(*f));
	const tac_cu_driver *d = f->d = cu_driver();
	if (!d)
		return TILEATOM_OK;
	int attrs[TAC_CU_NATTRS] = {TAC_CU_ATTR_MEMORY_TYPE, TAC_CU_ATTR_IS_MANAGED,
	                            TAC_CU_ATTR_RANGE_START, TAC_CU_ATTR_RANGE_SIZE,
	                            TAC_CU_ATTR_BUFFER_ID,   TAC_CU_ATTR_CONTEXT,
	                            TAC_CU_ATTR_IPC_CAPABLE};
	/* 8 zeroed bytes each: the driver writes an unsigned int, a bool, a pointer, a size_t
	 * or an unsigned long long, little-endian */
	uint64_t val[TAC_CU_NATTRS] = {0};
	void *data[TAC_CU_NATTRS];
	for (int i = 0; i < TAC_CU_NATTRS; i++)
		data[i] = &val[i];
	tac_cu_result r =
	    d->pointer_get_attributes(TAC_CU_NATTRS, attrs, data, (tac_cu_ptr)(uintptr_t)p);
	if (r == TAC_CU_NOT_INITIALIZED || r == TAC_CU_DEINITIALIZED)
		return TILEATOM_OK; /* no CUDA in use: host memory */
	if (r != 0) {
		char buf[32];
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "cannot tell whether %s at %p is device memory: "
		               "cuPointerGetAttributes: %s",
		               what, p, cu_error(d, r, buf, sizeof(buf)));
	}
	f->device = val[0] == TAC_CU_MEMORYTYPE_DEVICE && val[1] == 0 && val[3] > 0;
	f->base = val[2];
	f->size = val[3];
	f->alloc_id = val[4];
	memcpy(&f->ctx, &val[5], sizeof(f->ctx));
	f->ipc_capable = val[6] != 0;
	return TILEATOM_OK;
}

/* Registers the allocation f describes on c (its IPC handle taken with its context
 * current) and caches it. */
static int entry_add(tileatom_client *c, const cu_facts *f, const char *what, const void *p,
                     tileatom_error *err)
{
	if (!tac_shm_unix(c))
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s at %p is CUDA device memory, which travels only by reference on "
		               "a Unix-socket connection (%s is not one): copy it to host memory",
		               what, p, c->address);
	if (!f->ipc_capable)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s at %p is device memory that cannot be shared by CUDA IPC (not a "
		               "cudaMalloc / cuMemAlloc allocation, e.g. a memory pool's): copy "
		               "it to host memory or to a cudaMalloc'd buffer",
		               what, p);
	if (c->pending_count > 0)
		return tac_err(err, TILEATOM_E_STATE,
		               "%s at %p is device memory not yet registered on this connection, "
		               "and registering it needs the %zu pipelined responses collected "
		               "first (tileatom_collect)",
		               what, p, c->pending_count);
	if (c->ncuptr == c->capcuptr) {
		size_t cap = c->capcuptr ? c->capcuptr * 2 : 4;
		struct tac_cuptr_entry *e = realloc(c->cuptr, cap * sizeof(*e));
		if (!e)
			return tac_err(err, TILEATOM_E_NOMEM, "out of memory");
		c->cuptr = e;
		c->capcuptr = cap;
	}
	const tac_cu_driver *d = f->d;
	uint8_t handle[TILEATOM_IPC_HANDLE_SIZE];
	tac_cu_context cur = NULL;
	tac_cu_result r = d->ctx_get_current(&cur);
	bool pushed = false;
	if (r == 0 && cur != f->ctx && f->ctx) {
		r = d->ctx_push(f->ctx);
		pushed = r == 0;
	}
	if (r == 0)
		r = d->ipc_get_mem_handle(handle, (tac_cu_ptr)f->base);
	if (pushed) {
		tac_cu_context popped = NULL;
		tac_cu_result pr = d->ctx_pop(&popped);
		if (r == 0 && pr != 0)
			r = pr;
	}
	char buf[32];
	if (r != 0)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s is device memory, but its allocation [0x%llx, +%llu) has no "
		               "CUDA IPC handle (cuIpcGetMemHandle: %s)",
		               what, (unsigned long long)f->base, (unsigned long long)f->size,
		               cu_error(d, r, buf, sizeof(buf)));
	tileatom_buffer *b = NULL;
	int rc = tileatom_device_buffer_register(c, handle, (size_t)f->size,
	                                         (const void *)(uintptr_t)f->base, &b, err);
	if (rc != TILEATOM_OK)
		return rc;
	c->cuptr[c->ncuptr++] = (struct tac_cuptr_entry){f->base, f->size, f->alloc_id, b};
	return TILEATOM_OK;
}

/* Makes [p, p + len) (what names it) travel by reference when it is device memory. */
static int adopt(tileatom_client *c, const void *p, size_t len, const char *what,
                 tileatom_error *err)
{
	if (!p || len == 0)
		return TILEATOM_OK;
	bool small = c->cuptr_min == 0 || len < c->cuptr_min;
	if (small && c->ncuptr == 0)
		return TILEATOM_OK; /* the common case, without a search */
	tileatom_buffer *held = tac_shm_ref_buffer(c, p, len);
	struct tac_cuptr_entry *e = NULL; /* the entry of the buffer holding it */
	for (size_t i = 0; held && i < c->ncuptr && !e; i++)
		if (c->cuptr[i].buf == held)
			e = &c->cuptr[i];
	if (!e && (held || small)) /* held: the caller's own buffer, or the staging one */
		return TILEATOM_OK;
	cu_facts f; /* (without the driver, no entry can exist) */
	int rc = cu_ask(p, what, &f, err);
	if (rc != TILEATOM_OK)
		return rc;
	if (e &&
	    (!f.device || e->base != f.base || e->size != f.size || e->alloc_id != f.alloc_id)) {
		entry_drop(c, e); /* freed (and perhaps reallocated) since it was registered */
		e = NULL;
	}
	if (!f.device)
		return TILEATOM_OK;
	uintptr_t at = (uintptr_t)p, end = (uintptr_t)(f.base + f.size);
	if (at < f.base || at > end || len > end - at)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s [%p, +%zu bytes) runs past the end of its device allocation "
		               "[0x%llx, +%llu)",
		               what, p, len, (unsigned long long)f.base,
		               (unsigned long long)f.size);
	if (e)
		return TILEATOM_OK;
	/* an entry of the same base outside which p was not found: a stale one */
	for (size_t i = 0; i < c->ncuptr; i++)
		if (c->cuptr[i].base == f.base) {
			entry_drop(c, &c->cuptr[i]);
			break;
		}
	return entry_add(c, &f, what, p, err);
}

int tac_cuptr_prepare(tileatom_client *c, tac_msg *m, tileatom_error *err)
{
	if (m->cuptr_done)
		return TILEATOM_OK;
	/* nothing to ask about (the common case): nothing registered before, and no operand
	 * (nor old_out) of the threshold's size, or no threshold */
	if (c->ncuptr == 0) {
		if (c->cuptr_min == 0)
			return TILEATOM_OK;
		/* straight comparisons, no table of the arrays (this runs on every request) */
		size_t min = c->cuptr_min;
		if ((!m->old_out || m->old_out_size < min) && m->values.data.len < min &&
		    m->compare.data.len < min && m->mask.data.len < min &&
		    m->padding.data.len < min && m->index[0].data.len < min &&
		    m->index[1].data.len < min && m->index[2].data.len < min &&
		    m->index[3].data.len < min)
			return TILEATOM_OK;
	}
	static const char *const what[TAC_MSG_NARRAYS] = {
	    "values",    "compare",   "the mask",  "padding",
	    "indices 0", "indices 1", "indices 2", "indices 3"}; /* their names in messages */
	Tileatom__Array *ops[TAC_MSG_NARRAYS] = TAC_MSG_ARRAYS(m);
	for (size_t i = 0; i < TAC_MSG_NARRAYS; i++) {
		if (ops[i]->shared)
			continue;
		int rc = adopt(c, ops[i]->data.data, ops[i]->data.len, what[i], err);
		if (rc != TILEATOM_OK)
			return rc;
	}
	int rc = adopt(c, m->old_out, m->old_out_size, "old_out", err);
	if (rc == TILEATOM_OK)
		m->cuptr_done = true;
	return rc;
}

int tac_cuptr_refuse(tileatom_client *c, const void *p, size_t len, const char *what,
                     tileatom_error *err)
{
	if (!p || len == 0)
		return TILEATOM_OK;
	const tileatom_buffer *held = tac_shm_ref_buffer(c, p, len);
	if (held && tileatom_buffer_is_device(held))
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s at %p lies in a device buffer: the library writes it from the "
		               "host, give a host buffer",
		               what, p);
	if (held || c->cuptr_min == 0 || len < c->cuptr_min)
		return TILEATOM_OK;
	cu_facts f;
	int rc = cu_ask(p, what, &f, err);
	if (rc == TILEATOM_OK && f.device)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s at %p is CUDA device memory: the library writes it from the "
		               "host, give a host buffer",
		               what, p);
	return rc;
}

size_t tac_cuptr_default_min(void)
{
	const char *v = getenv("TILEATOM_DEVICE_POINTERS");
	if (!v || !*v)
		return TAC_CUPTR_MIN;
	if (strcmp(v, "off") == 0 || strcmp(v, "no") == 0)
		return 0;
	char *end = NULL;
	unsigned long long n = strtoull(v, &end, 10);
	if (*end != '\0' || v[0] == '-')
		return TAC_CUPTR_MIN; /* not a number: the default (documented) */
	return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

void tileatom_set_device_ptr_threshold(tileatom_client *client, size_t bytes)
{
	if (client)
		client->cuptr_min = bytes;
}

size_t tac_cuptr_count(const tileatom_client *c)
{
	return c->ncuptr;
}

int tileatom_device_buffer_register(tileatom_client *client, const void *ipc_handle, size_t size,
                                    const void *device_ptr, tileatom_buffer **out,
                                    tileatom_error *err)
{
	uint8_t uuid[TAC_GPU_UUID_SIZE];
	bool named = device_ptr && gpu_uuid(device_ptr, uuid);
	return tac_shm_register_device(client, ipc_handle, named ? uuid : NULL, size, device_ptr,
	                               out, err);
}
