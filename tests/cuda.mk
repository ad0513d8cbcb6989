# tests/cuda.mk: tests and benchmark of the CUDA backend.
#  - check_cuda: the backend-neutral vectors, the reference sweep and the large shared-space
#    cases (tests/ta_vectors.h) on the CUDA backend, a differential test against the CPU
#    backend, and runtime checks (info, allocation failure, concurrency, sticky errors).
#    Built with or without CUDA; exits 77 (skip) with the reason when no GPU is usable.
#  - check_ptx: checks the lowering of every legal variant (kernels/ta_lower.c) against the
#    PTX of the built kernels (nvcc -ptx of kernels/ta_cuda.cu); needs nvcc, not a GPU.
#  - check_cuda_ipc: device buffers (CUDA IPC operands) end to end against tileatomd
#    --backend cuda; built with or without CUDA, exits 77 (skip) without a GPU.
#  - bench_gpu (CUDA builds, not run by make check): kernel timings with CUDA events
#    against torch figures (tests/bench_torch.py); see scripts/gpu-run.sh.
if HAVE_CHECK
check_PROGRAMS += tests/check_cuda
TESTS += tests/check_cuda
check_PROGRAMS += tests/check_cuda_ipc
TESTS += tests/check_cuda_ipc
tests_check_cuda_ipc_SOURCES = tests/check_cuda_ipc.c tests/raw_ref_add.h \
	tests/check_client_util.c tests/check_client_util.h $(PROTO_SOURCES)
nodist_tests_check_cuda_ipc_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_cuda_ipc_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS)
tests_check_cuda_ipc_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_cuda_ipc_LDADD = client/libtileatom-client.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS)
EXTRA_tests_check_cuda_ipc_DEPENDENCIES = daemon/tileatomd$(EXEEXT)
if USE_CUDA
tests_check_cuda_ipc_CPPFLAGS += -DTA_HAVE_CUDA_TEST $(CUDA_CPPFLAGS)
tests_check_cuda_ipc_LDADD += $(CUDA_LIBS)
endif
endif
check_PROGRAMS += tests/check_ptx
TESTS += tests/check_ptx

tests_check_cuda_SOURCES = tests/check_cuda.c $(TA_VECTORS_SOURCES)
tests_check_cuda_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests $(CUDA_CPPFLAGS)
tests_check_cuda_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_cuda_LDADD = $(TABACKEND_LIBS) $(CHECK_LIBS)

tests_check_ptx_SOURCES = tests/check_ptx.c
tests_check_ptx_LDADD = $(TABACKEND_LIBS)
EXTRA_DIST += tests/bench_torch.py scripts/gpu-run.sh scripts/gpu-latency.sh scripts/gpu-ab-latency.sh \
	scripts/gpu-loops.sh scripts/gpu-async.sh scripts/gpu-vs-redis.sh scripts/gpu-devptr.sh scripts/gpu-busy-poll.sh \
	scripts/gpu-bulk-paths.sh scripts/gpu-ipc-cost.sh scripts/gpu-multi.sh scripts/gpu-python.sh \
	doc/GPU-RESULTS.md

if USE_CUDA
# The PTX of the kernels, for check_ptx (device compilation only).
TA_PTX_ARCH = $(patsubst sm_%,compute_%,$(CUDA_ARCH))
tests/ta_cuda.ptx: $(top_srcdir)/kernels/ta_cuda.cu $(TA_CUDA_DEPS)
	@$(MKDIR_P) tests
	$(AM_V_GEN)$(NVCC) -std=c++17 -O3 -arch=$(TA_PTX_ARCH) $(DEFS) -I$(top_builddir) \
		-I$(top_srcdir)/tacore -I$(top_srcdir)/kernels -ptx -o $@ $(top_srcdir)/kernels/ta_cuda.cu
EXTRA_tests_check_ptx_DEPENDENCIES = tests/ta_cuda.ptx
tests_check_ptx_CPPFLAGS = $(AM_CPPFLAGS) -DTA_PTX_FILE='"$(abs_top_builddir)/tests/ta_cuda.ptx"'
CLEANFILES += tests/ta_cuda.ptx

noinst_PROGRAMS += tests/bench_gpu
tests_bench_gpu_SOURCES = tests/bench_gpu.c
tests_bench_gpu_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_bench_gpu_LDADD = $(TABACKEND_LIBS)
else
tests_check_ptx_CPPFLAGS = $(AM_CPPFLAGS)
endif
