/* ta_copy.h: large host-memory copies over several threads, optionally handing each chunk
 * to a callback as soon as it is copied (the CUDA backend queues its DMA there, so that the
 * transfer overlaps the rest of the copy). Used by the client library's shared-memory
 * staging and the CUDA backend's pinned staging: one thread reads and writes memory at a
 * fraction of what the machine's memory system does. */
#ifndef TA_COPY_H
#define TA_COPY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Copies of fewer bytes than this go on the calling thread alone. */
#define TA_COPY_PARALLEL_MIN (4u << 20)
/* Each copying thread takes at least this many bytes. */
#define TA_COPY_PER_THREAD_MIN (2u << 20)
/* Most copying threads of one copy (the caller included). */
#define TA_COPY_THREADS_MAX 8

/* Called for each copied chunk [off, off + len) of the destination (offsets from dst), on
 * the thread that copied it, as soon as it is copied; a nonzero return stops that thread's
 * remaining chunks and is returned by ta_copy_parallel. */
typedef int (*ta_copy_chunk_fn)(void *ctx, size_t off, size_t len);

/* Threads a copy of bytes should use: 1 below TA_COPY_PARALLEL_MIN, else half the online
 * CPUs (the other half serve the caller's peers), at most TA_COPY_THREADS_MAX and at most
 * one per TA_COPY_PER_THREAD_MIN bytes. $TILEATOM_COPY_THREADS (1..TA_COPY_THREADS_MAX)
 * replaces the CPU-based count; 1 turns the threads off. */
int ta_copy_threads(size_t bytes);

/* Copies bytes from src to dst (not overlapping) on `threads` threads (the caller is one of
 * them; a helper that cannot be started leaves its part to the caller), each taking one
 * contiguous part in chunks of `chunk` bytes (0: the whole part at once) and calling fn
 * (when not NULL) after each. Returns 0, or the first nonzero value fn returned. */
int ta_copy_parallel(void *dst, const void *src, size_t bytes, int threads, size_t chunk,
                     ta_copy_chunk_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
