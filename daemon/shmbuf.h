/* shmbuf.h: the shared buffers of one connection. A Unix-socket client passes a sealed
 * memfd (SCM_RIGHTS, with the frame of a RegisterBufferRequest); the connection queues
 * every fd it receives (ta_shm_push_fd), the register request takes the oldest one, checks
 * its seals and size and maps it (MAP_SHARED); requests then name (buffer id, offset,
 * length) instead of carrying bytes (the Array.shared and Options.old_into fields), which
 * ta_shm_resolve turns into a pointer after checking the range. Everything is unmapped and
 * closed by ta_shm_table_free, when the connection is freed (after its last request).
 *
 * Threads: the loop thread pushes fds and registers; worker threads resolve (a lock guards
 * the table; mappings never move or go away before ta_shm_table_free). Dispatch finds the
 * table of the connection whose request it runs through ta_shm_current (a thread-local the
 * connection sets around each dispatch call), so that the dispatch interface stays as it
 * is. */
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
	int fd;               /* the memfd */
	void *map;            /* its MAP_SHARED mapping */
	uint64_t size;        /* bytes mapped */
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

/* The address of bytes [offset, offset + length) of buffer id; INVALID_ARGUMENT naming
 * the problem when there is no such buffer or the range leaves it. what names the operand
 * in messages. */
ta_status ta_shm_resolve(ta_shm_table *t, uint64_t id, uint64_t offset, uint64_t length,
                         const char *what, void **ptr, ta_error *err);

/* Buffers registered (for stats and tests). */
size_t ta_shm_count(ta_shm_table *t);

/* The table of the connection whose request this thread is dispatching (NULL: none, e.g.
 * a TCP connection or a test calling dispatch directly). */
ta_shm_table *ta_shm_current(void);

/* Sets ta_shm_current for this thread (NULL clears it). */
void ta_shm_set_current(ta_shm_table *t);

#endif /* TA_DAEMON_SHMBUF_H */
