/* shmbuf.h: the shared buffers of one connection. A Unix-socket client passes a sealed
 * memfd (SCM_RIGHTS, with the frame of a RegisterBufferRequest); the connection queues
 * every fd it receives (ta_shm_push_fd), the register request takes the oldest one, checks
 * its seals and size and maps it (MAP_SHARED); requests then name (buffer id, offset,
 * length) instead of carrying bytes (the Array.shared and Options.old_into fields), which
 * ta_shm_resolve turns into a pointer after checking the range. Everything is unmapped and
 * closed by ta_shm_table_free, when the connection is freed (after its last request).
 *
 * Device buffers share the table and its ids: a RegisterBufferRequest with a CUDA IPC
 * handle (no fd) is opened by the backend (ta_backend_ipc_open, which checks the size
 * against the allocation); ta_shm_resolve then gives a device address and says so, and the
 * table closes the handle (ta_backend_ipc_close) when it is freed. A backend without IPC
 * (the CPU backend) refuses with UNIMPLEMENTED.
 *
 * Threads: the loop thread pushes fds and registers; worker threads resolve (a lock guards
 * the table; mappings never move or go away before ta_shm_table_free). Dispatch finds the
 * table of the connection whose request it runs in the connection's session
 * (ta_session.shm, dispatch.h). */
#ifndef TA_DAEMON_SHMBUF_H
#define TA_DAEMON_SHMBUF_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ta_backend.h"
#include "ta_types.h"

/* Most fds a connection may have received but not yet registered; more close the
 * connection's extra fds at once. */
#define TA_SHM_PENDING_MAX 8
/* Most buffers one connection may register. */
#define TA_SHM_BUFFERS_MAX 64

/* One registered buffer. */
typedef struct ta_shm_buf {
	uint64_t id;          /* the id answered to the client (1, 2, ...) */
	int fd;               /* the memfd (-1 for a device buffer) */
	void *map;            /* its MAP_SHARED mapping, or the device address (device) */
	uint64_t size;        /* bytes mapped (device: bytes the client registered) */
	bool device;          /* a client's device allocation opened from a CUDA IPC handle */
	bool host_registered; /* the backend registered the mapping (ta_backend_host_register) */
} ta_shm_buf;

/* The buffers of one connection. */
typedef struct ta_shm_table {
	pthread_mutex_t lock;                /* guards everything below */
	ta_backend *backend;                 /* registers mappings (CUDA: pinned for DMA) */
	ta_shm_buf bufs[TA_SHM_BUFFERS_MAX]; /* registered buffers, n of them */
	size_t n;                            /* buffers registered */
	uint64_t next_id;                    /* id of the next buffer */
	int pending[TA_SHM_PENDING_MAX];     /* received fds not yet registered, oldest first */
	size_t npending;                     /* entries in pending */
} ta_shm_table;

/* Initialises an empty table whose mappings backend registers; false when the lock cannot
 * be created. */
bool ta_shm_table_init(ta_shm_table *t, ta_backend *backend);

/* Unmaps and closes every buffer and pending fd, and destroys the lock. */
void ta_shm_table_free(ta_shm_table *t);

/* Queues an fd received on the connection (takes ownership: closes it when the queue is
 * full). */
void ta_shm_push_fd(ta_shm_table *t, int fd);

/* Registers the oldest received fd as a buffer of size bytes: requires F_SEAL_SHRINK and
 * F_SEAL_GROW and a size equal to the file's; maps it read-write, shared. Sets *id. */
ta_status ta_shm_register(ta_shm_table *t, uint64_t size, uint64_t *id, ta_error *err);

/* Registers a device buffer of size bytes from a CUDA IPC memory handle (handle_len bytes)
 * of the GPU gpu_uuid names (TA_GPU_UUID_BYTES, or NULL: not said): UNIMPLEMENTED when the
 * backend cannot open one, INVALID_ARGUMENT for a handle of the wrong length, one that does
 * not open, or a size over the allocation. Sets *id. */
ta_status ta_shm_register_device(ta_shm_table *t, const void *handle, size_t handle_len,
                                 const uint8_t *gpu_uuid, uint64_t size, uint64_t *id,
                                 ta_error *err);

/* The address of bytes [offset, offset + length) of buffer id; INVALID_ARGUMENT naming
 * the problem when there is no such buffer or the range leaves it. what names the operand
 * in messages. *device (may be NULL) says whether the address is device memory. */
ta_status ta_shm_resolve(ta_shm_table *t, uint64_t id, uint64_t offset, uint64_t length,
                         const char *what, void **ptr, bool *device, ta_error *err);

#endif /* TA_DAEMON_SHMBUF_H */
