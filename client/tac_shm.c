/* tac_shm.c: shared-memory and device buffers (Unix-socket connections). A shared buffer
 * (tileatom_buffer_create) is a memfd with its size sealed, mapped here and passed once to
 * the daemon (a RegisterBufferRequest carrying the fd as SCM_RIGHTS), which maps the same
 * pages; a device buffer (tac_shm_register_device, under tac_cuptr.c's
 * tileatom_device_buffer_register) sends the caller's CUDA IPC handle instead, and the library
 * never dereferences its address. From then on an operand array inside a registered buffer travels
 * as (buffer id, offset, length) (tac_shm_rewrite), and a synchronous call's old_out inside one is
 * written there by the daemon. Synchronous calls stage large inline operands (TAC_SHM_STAGE_MIN
 * bytes or more in all) in a buffer of the library's own (tac_shm_stage; large arrays copied on
 * several threads, ta_copy.h); a pipelined request over the frame limit may use it while it is
 * free, and holds it until its response is collected.
 *
 * Failure modes: no memfd support, a TCP connection, or a daemon refusal give an error
 * and no buffer; staging that fails leaves the request inline (it still works). */
#include "tac_internal.h"
#include "ta_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* A registered shared buffer. */
struct tileatom_buffer {
	tileatom_client *client; /* the connection it is registered on */
	int fd;                  /* the memfd (-1 for a device buffer) */
	void *map;               /* its mapping in this process (device: the device address) */
	size_t size;             /* bytes */
	uint64_t id;             /* the daemon's id for it */
	bool device;             /* a device buffer: map is never dereferenced here */
};

bool tac_shm_unix(tileatom_client *c)
{
	if (c->unix_socket < 0) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		c->unix_socket = getsockname(c->fd, (struct sockaddr *)&ss, &len) == 0 &&
		                 ss.ss_family == AF_UNIX;
	}
	return c->unix_socket == 1;
}

/* True when buffer s (NULL: none) holds [p, p + len). */
static bool holds(const struct tileatom_buffer *s, const uint8_t *p, size_t len)
{
	const uint8_t *lo = s ? s->map : NULL;
	return s && p >= lo && p <= lo + s->size && len <= (size_t)(lo + s->size - p);
}

/* (A device buffer holding only an array's first byte makes its reference name bytes past
 * the buffer's end, which the daemon refuses: the library never reads device memory.) */
struct tileatom_buffer *tac_shm_ref_buffer(const tileatom_client *c, const void *p, size_t len)
{
	for (size_t i = 0; i < c->nbufs; i++)
		if (holds(c->bufs[i], p, len))
			return c->bufs[i];
	if (holds(c->staging, p, len))
		return c->staging;
	for (size_t i = 0; i < c->nbufs; i++)
		if (c->bufs[i]->device && holds(c->bufs[i], p, 1))
			return c->bufs[i];
	return NULL;
}

/* Unmaps and closes b and frees it (not its registration in the daemon). */
static void shm_release(struct tileatom_buffer *b)
{
	if (!b)
		return;
	if (!b->device) {
		(void)munmap(b->map, b->size);
		close(b->fd);
	}
	free(b);
}

/* Creates a buffer on c and registers it with the daemon (a RegisterBufferRequest carrying
 * its memfd or ipc_handle), listed in c->bufs when listed is set (it has room): ipc_handle
 * NULL, a memfd of size bytes mapped here; else the device memory [device_ptr, + size)
 * of the GPU gpu_uuid names (NULL: not said).
 * Needs a Unix socket and no pipelined response waiting. */
static int buffer_new(tileatom_client *c, size_t size, const void *ipc_handle,
                      const uint8_t *gpu_uuid, const void *device_ptr, bool listed,
                      struct tileatom_buffer **out, tileatom_error *err)
{
	if (!tac_shm_unix(c))
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "%s need a Unix-socket connection (%s is not one)",
		               ipc_handle ? "device buffers" : "shared buffers", c->address);
	int rc = tac_none_pending(c, err);
	if (rc != TILEATOM_OK)
		return rc;
	struct tileatom_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return tac_err(err, TILEATOM_E_NOMEM, "out of memory");
	*b = (struct tileatom_buffer){.client = c,
	                              .fd = -1,
	                              .map = (void *)(uintptr_t)device_ptr,
	                              .size = size,
	                              .device = ipc_handle != NULL};
	if (!ipc_handle) {
		b->fd = memfd_create("tileatom-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		/* the step that failed (errno says why), NULL when none did */
		const char *step = b->fd < 0                            ? "memfd_create"
		                   : ftruncate(b->fd, (off_t)size) != 0 ? "ftruncate"
		                   : fcntl(b->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0
		                       ? "sealing it (F_ADD_SEALS)"
		                   : (b->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
		                                    b->fd, 0)) == MAP_FAILED
		                       ? "mmap"
		                       : NULL;
		if (step) {
			int e = errno;
			if (b->fd >= 0)
				close(b->fd);
			free(b);
			return tac_err(err, e == ENOMEM ? TILEATOM_E_NOMEM : TILEATOM_E_IO,
			               "creating a %zu-byte shared buffer: %s: %s", size, step,
			               strerror(e));
		}
	}
	tac_msg m;
	tac_build_empty(&m, TILEATOM_REQ_REGISTER_BUFFER);
	m.body.register_buffer.size = size;
	if (ipc_handle) {
		m.body.register_buffer.cuda_ipc_handle.data = (uint8_t *)(uintptr_t)ipc_handle;
		m.body.register_buffer.cuda_ipc_handle.len = TILEATOM_IPC_HANDLE_SIZE;
	}
	if (gpu_uuid) { /* the GPU holding a device buffer, for a daemon over several */
		m.body.register_buffer.cuda_device_uuid.data = (uint8_t *)(uintptr_t)gpu_uuid;
		m.body.register_buffer.cuda_device_uuid.len = TAC_GPU_UUID_SIZE;
	}
	rc = tac_conn_submit(c, &m, true, b->fd, NULL, err);
	tileatom_request_kind kind;
	if (rc == TILEATOM_OK)
		rc = tac_conn_receive(c, &kind, err);
	if (rc == TILEATOM_OK)
		rc = tac_check_response(c->last, kind, err);
	if (rc != TILEATOM_OK) {
		shm_release(b);
		return rc;
	}
	b->id = c->last->buffer->buffer_id;
	if (listed)
		c->bufs[c->nbufs++] = b;
	*out = b;
	return TILEATOM_OK;
}

/* Checks the arguments of a buffer-creating call and makes room for one more buffer in
 * client's list. */
static int buffer_prepare(tileatom_client *client, tileatom_buffer **out, tileatom_error *err)
{
	if (!out)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "no output pointer given");
	*out = NULL;
	if (!client)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "no client given");
	if (client->broken)
		return tac_err(err, TILEATOM_E_IO, "connection to %s is broken: %s",
		               client->address, client->broken_err.message);
	if (client->nbufs == client->capbufs) {
		size_t cap = client->capbufs ? client->capbufs * 2 : 8;
		struct tileatom_buffer **p = realloc(client->bufs, cap * sizeof(*p));
		if (!p)
			return tac_err(err, TILEATOM_E_NOMEM, "out of memory");
		client->bufs = p;
		client->capbufs = cap;
	}
	return TILEATOM_OK;
}

int tac_shm_register_device(tileatom_client *client, const void *ipc_handle,
                            const uint8_t *gpu_uuid, size_t size, const void *device_ptr,
                            tileatom_buffer **out, tileatom_error *err)
{
	int rc = buffer_prepare(client, out, err);
	if (rc != TILEATOM_OK)
		return rc;
	if (!ipc_handle || !device_ptr || size == 0)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "a device buffer needs an IPC handle, its device address and a "
		               "size of at least one byte");
	if ((uintptr_t)device_ptr > UINTPTR_MAX - size)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "the device buffer [%p, +%zu) wraps around the address space",
		               device_ptr, size);
	return buffer_new(client, size, ipc_handle, gpu_uuid, device_ptr, true, out, err);
}

int tileatom_buffer_is_device(const tileatom_buffer *buffer)
{
	return buffer && buffer->device;
}

int tileatom_buffer_create(tileatom_client *client, size_t size, tileatom_buffer **out,
                           tileatom_error *err)
{
	int rc = buffer_prepare(client, out, err);
	if (rc == TILEATOM_OK && size == 0)
		rc = tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		             "a shared buffer needs at least one byte");
	return rc == TILEATOM_OK ? buffer_new(client, size, NULL, NULL, NULL, true, out, err) : rc;
}

void *tileatom_buffer_data(const tileatom_buffer *buffer)
{
	return buffer && !buffer->device ? buffer->map : NULL;
}

size_t tileatom_buffer_size(const tileatom_buffer *buffer)
{
	return buffer ? buffer->size : 0;
}

tileatom_array tileatom_buffer_array(const tileatom_buffer *buffer, tileatom_dtype dtype, int rank,
                                     const int64_t *shape, size_t offset)
{
	tileatom_array a = {.dtype = dtype, .rank = rank};
	for (int i = 0; i < rank && i < TILEATOM_MAX_RANK; i++)
		a.shape[i] = shape[i];
	a.data = buffer && offset <= buffer->size ? (const uint8_t *)buffer->map + offset : NULL;
	return a;
}

void tileatom_buffer_free(tileatom_buffer *buffer)
{
	if (!buffer)
		return;
	tileatom_client *c = buffer->client;
	for (size_t i = 0; i < c->nbufs; i++)
		if (c->bufs[i] == buffer) {
			c->bufs[i] = c->bufs[--c->nbufs];
			break;
		}
	shm_release(buffer);
}

/* Fills *ref with a reference to [p, p + len) when a buffer of c holds it; false when none
 * does. */
static bool shm_ref(tileatom_client *c, const void *p, size_t len, Tileatom__BufferRef *ref)
{
	struct tileatom_buffer *b = tac_shm_ref_buffer(c, p, len);
	if (!b)
		return false;
	tileatom__buffer_ref__init(ref);
	ref->buffer_id = b->id;
	ref->offset = (uint64_t)((const uint8_t *)p - (const uint8_t *)b->map);
	ref->length = len;
	return true;
}

void tac_shm_rewrite(tileatom_client *c, tac_msg *m)
{
	c->old_from = NULL;
	if (c->nbufs == 0 && !c->staging)
		return;
	Tileatom__Array *arrays[TAC_MSG_NARRAYS] = TAC_MSG_ARRAYS(m);
	for (size_t i = 0; i < TAC_MSG_NARRAYS; i++) {
		Tileatom__Array *a = arrays[i];
		if (a->data.len > 0 && !a->shared &&
		    shm_ref(c, a->data.data, a->data.len, &m->refs[i])) {
			a->shared = &m->refs[i];
			a->data.data = NULL;
			a->data.len = 0;
		}
	}
	if (m->old_out && m->old_out_size > 0 && m->options.want_old &&
	    shm_ref(c, m->old_out, m->old_out_size, &m->old_ref)) {
		m->options.old_into = &m->old_ref;
		c->old_from = m->old_out;
	}
}

bool tac_shm_stage(tileatom_client *c, tac_msg *m, bool pipelined)
{
	Tileatom__Array *arrays[TAC_MSG_NARRAYS] = TAC_MSG_ARRAYS(m);
	size_t need = 0;
	for (size_t i = 0; i < TAC_MSG_NARRAYS; i++)
		if (arrays[i]->data.len > 0 &&
		    !tac_shm_ref_buffer(c, arrays[i]->data.data, arrays[i]->data.len))
			need += (arrays[i]->data.len + 63) & ~(size_t)63;
	/* (staged_id: a pipelined request still reads the staging buffer) */
	if (c->stage_min == 0 || need < c->stage_min || c->staged_id != 0 || !tac_shm_unix(c))
		return false;
	if (pipelined && c->pending_count > 0 && (!c->staging || c->staging->size < need))
		return false; /* registering a larger one is a round trip */
	if (!c->staging || c->staging->size < need) {
		size_t size = (size_t)TAC_SHM_STAGE_MIN;
		while (size < need)
			size *= 2;
		/* the daemon keeps the old staging buffer mapped until the connection closes */
		shm_release(c->staging);
		c->staging = NULL;
		if (buffer_new(c, size, NULL, NULL, NULL, false, &c->staging, NULL) != TILEATOM_OK)
			return false;
	}
	uint8_t *at = c->staging->map;
	for (size_t i = 0; i < TAC_MSG_NARRAYS; i++) {
		Tileatom__Array *a = arrays[i];
		if (a->data.len == 0 || tac_shm_ref_buffer(c, a->data.data, a->data.len))
			continue;
		/* large arrays on several threads: one thread copies at a fraction of the
		 * memory system's rate */
		(void)ta_copy_parallel(at, a->data.data, a->data.len, ta_copy_threads(a->data.len),
		                       0, NULL, NULL);
		a->data.data = at;
		at += (a->data.len + 63) & ~(size_t)63;
	}
	return true;
}

void tileatom_set_shm_threshold(tileatom_client *client, size_t bytes)
{
	if (client)
		client->stage_min = bytes;
}

void tac_shm_client_free(tileatom_client *c)
{
	for (size_t i = 0; i < c->nbufs; i++)
		shm_release(c->bufs[i]);
	free(c->bufs);
	shm_release(c->staging);
}
