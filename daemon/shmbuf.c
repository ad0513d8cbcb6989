/* shmbuf.c: a connection's shared buffers (see shmbuf.h).
 *
 * Failure modes: an fd that is not a memfd with F_SEAL_SHRINK and F_SEAL_GROW (a client
 * could otherwise shrink it under the mapping and make the daemon fault) is refused with
 * PERMISSION_DENIED and closed; a size that is not the file's, no fd received, or too many
 * buffers give INVALID_ARGUMENT / RESOURCE_EXHAUSTED; a failed mmap gives
 * RESOURCE_EXHAUSTED. A reference outside a buffer gives INVALID_ARGUMENT. A device
 * buffer on a backend without CUDA IPC gives UNIMPLEMENTED; a bad handle or a size over the
 * allocation, the backend's INVALID_ARGUMENT. */
#include "shmbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

bool ta_shm_table_init(ta_shm_table *t, ta_backend *backend)
{
	memset(t, 0, sizeof(*t));
	t->backend = backend;
	t->next_id = 1;
	return pthread_mutex_init(&t->lock, NULL) == 0;
}

void ta_shm_table_free(ta_shm_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		ta_shm_buf *b = &t->bufs[i];
		if (b->device) {
			ta_backend_ipc_close(t->backend, b->map);
			continue;
		}
		if (b->host_registered)
			ta_backend_host_unregister(t->backend, b->map);
		if (munmap(b->map, (size_t)b->size) != 0)
			ta_log(TA_LOG_WARNING, "cannot unmap shared buffer %" PRIu64 ": %s", b->id,
			       strerror(errno));
		close(b->fd);
	}
	for (size_t i = 0; i < t->npending; i++)
		close(t->pending[i]);
	t->n = t->npending = 0;
	pthread_mutex_destroy(&t->lock);
}

void ta_shm_push_fd(ta_shm_table *t, int fd)
{
	pthread_mutex_lock(&t->lock);
	if (t->npending < TA_SHM_PENDING_MAX) {
		t->pending[t->npending++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&t->lock);
	if (fd >= 0)
		close(fd);
}

/* Appends a buffer to the table (its lock held, room checked); *id is its new id. */
static ta_shm_buf *table_add(ta_shm_table *t, int fd, void *map, uint64_t size, bool device,
                             uint64_t *id)
{
	ta_shm_buf *b = &t->bufs[t->n++];
	*b = (ta_shm_buf){.id = t->next_id++, .fd = fd, .map = map, .size = size, .device = device};
	*id = b->id;
	return b;
}

/* The error of a table holding TA_SHM_BUFFERS_MAX buffers: RESOURCE_EXHAUSTED. */
static ta_status table_full(ta_error *err)
{
	return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
	                    "register_buffer: this connection has %d buffers, the most allowed",
	                    TA_SHM_BUFFERS_MAX);
}

ta_status ta_shm_register(ta_shm_table *t, uint64_t size, uint64_t *id, ta_error *err)
{
	const int sealed = F_SEAL_SHRINK | F_SEAL_GROW;
	pthread_mutex_lock(&t->lock);
	ta_status st = TA_OK;
	int fd = -1, seals;
	if (t->npending > 0) { /* the oldest fd received */
		fd = t->pending[0];
		memmove(t->pending, t->pending + 1, (t->npending - 1) * sizeof(int));
		t->npending--;
	}
	struct stat sb;
	void *map = MAP_FAILED;
	if (fd < 0)
		st = ta_error_set(err, TA_INVALID_ARGUMENT,
		                  "register_buffer: no file descriptor came with the request (pass "
		                  "a memfd as SCM_RIGHTS on a Unix-socket connection)");
	else if (t->n >= TA_SHM_BUFFERS_MAX)
		st = table_full(err);
	else if ((seals = fcntl(fd, F_GET_SEALS)) < 0 || (seals & sealed) != sealed)
		st = ta_error_set(err, TA_PERMISSION_DENIED,
		                  "register_buffer: the file is %s; create it with memfd_create "
		                  "(MFD_ALLOW_SEALING) and add F_SEAL_SHRINK | F_SEAL_GROW",
		                  seals < 0 ? "not a sealable memfd"
		                            : "not sealed against resizing");
	else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
		st =
		    ta_error_set(err, TA_INVALID_ARGUMENT, "register_buffer: cannot stat the file");
	else if (size == 0 || (uint64_t)sb.st_size != size || size > SIZE_MAX)
		st = ta_error_set(err, TA_INVALID_ARGUMENT,
		                  "register_buffer: the request states %" PRIu64
		                  " bytes but the file has %lld (and must not be empty)",
		                  size, (long long)sb.st_size);
	else if ((map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
	         MAP_FAILED)
		st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                  "register_buffer: cannot map %" PRIu64 " bytes: %s", size,
		                  strerror(errno));
	if (st == TA_OK) {
		ta_shm_buf *b = table_add(t, fd, map, size, false, id);
		fd = -1;
		ta_error herr = {TA_OK, ""};
		bool can = t->backend && t->backend->vt->host_register;
		b->host_registered =
		    can && ta_backend_host_register(t->backend, map, (size_t)size, &herr) == TA_OK;
		if (can && !b->host_registered)
			ta_log(TA_LOG_WARNING,
			       "shared buffer %" PRIu64 " is not registered with the backend "
			       "(it works, copied as pageable memory): %s",
			       b->id, herr.msg);
	}
	pthread_mutex_unlock(&t->lock);
	if (fd >= 0)
		close(fd);
	return st;
}

ta_status ta_shm_register_device(ta_shm_table *t, const void *handle, size_t handle_len,
                                 const uint8_t *gpu_uuid, uint64_t size, uint64_t *id,
                                 ta_error *err)
{
	if (!ta_backend_has_ipc(t->backend)) {
		ta_backend_info info = {0};
		if (t->backend)
			ta_backend_info_get(t->backend, &info);
		return ta_error_set(err, TA_UNIMPLEMENTED,
		                    "register_buffer: device buffers (CUDA IPC handles) need the "
		                    "CUDA backend; this daemon runs the %s backend",
		                    info.name[0] ? info.name : "(no)");
	}
	if (handle_len != TA_IPC_HANDLE_BYTES)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "register_buffer: a CUDA IPC handle has %d bytes, not %zu",
		                    TA_IPC_HANDLE_BYTES, handle_len);
	if (size == 0 || size > SIZE_MAX)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "register_buffer: a device buffer of %" PRIu64
		                    " bytes (it must not be empty)",
		                    size);
	pthread_mutex_lock(&t->lock);
	void *dptr = NULL;
	ta_status st = t->n < TA_SHM_BUFFERS_MAX ? TA_OK : table_full(err);
	if (st == TA_OK)
		st = ta_backend_ipc_open(t->backend, handle, handle_len, gpu_uuid, (size_t)size,
		                         &dptr, err);
	if (st == TA_OK)
		table_add(t, -1, dptr, size, true, id);
	pthread_mutex_unlock(&t->lock);
	return st;
}

ta_status ta_shm_resolve(ta_shm_table *t, uint64_t id, uint64_t offset, uint64_t length,
                         const char *what, void **ptr, bool *device, ta_error *err)
{
	if (device)
		*device = false;
	if (!t)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "%s: names shared buffer %" PRIu64
		                    ", but this connection cannot have any (Unix sockets only)",
		                    what, id);
	pthread_mutex_lock(&t->lock);
	ta_shm_buf *b = NULL;
	for (size_t i = 0; i < t->n; i++)
		if (t->bufs[i].id == id)
			b = &t->bufs[i];
	ta_status st = TA_OK;
	if (!b)
		st = ta_error_set(
		    err, TA_INVALID_ARGUMENT,
		    "%s: no shared buffer %" PRIu64 " is registered on this connection", what, id);
	else if (offset > b->size || length > b->size - offset)
		st = ta_error_set(err, TA_INVALID_ARGUMENT,
		                  "%s: bytes [%" PRIu64 ", %" PRIu64
		                  ") lie outside %s buffer %" PRIu64 " of %" PRIu64 " bytes",
		                  what, offset, offset + length, b->device ? "device" : "shared",
		                  id, b->size);
	else {
		*ptr = (uint8_t *)b->map + offset;
		if (device)
			*device = b->device;
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}
