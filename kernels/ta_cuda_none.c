/* ta_cuda_none.c: the CUDA backend entry point of a build without CUDA (configure found no
 * nvcc or was given --without-cuda): creating the backend always fails with UNAVAILABLE, and there
 * are no devices. */
#include "ta_backend.h"

int ta_cuda_device_count(void)
{
	return 0;
}

int ta_cuda_enable_peer_access(const int *ords, int n, unsigned char *peer)
{
	(void)ords;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			peer[i * n + j] = i == j;
	return 0;
}

ta_backend *ta_cuda_backend_new(int device, ta_error *err)
{
	ta_error_set(err, TA_UNAVAILABLE,
	             "CUDA backend for device %d: built without CUDA (configure --with-cuda)",
	             device);
	return NULL;
}
