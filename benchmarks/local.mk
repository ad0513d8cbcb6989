# benchmarks/local.mk: tileatom-bench, an installed load generator built on the public
# client library alone (its include path holds the public header and nothing private),
# its man page, and the scripts that compare it with Redis and plot the results.
bin_PROGRAMS += benchmarks/tileatom-bench
benchmarks_tileatom_bench_SOURCES = benchmarks/tileatom-bench.c client/tileatom.h
benchmarks_tileatom_bench_CPPFLAGS = -I$(top_srcdir)/client -D_GNU_SOURCE
benchmarks_tileatom_bench_LDADD = client/libtileatom-client.la

dist_man_MANS += doc/tileatom-bench.1
EXTRA_DIST += benchmarks/vs-redis benchmarks/plot-throughput benchmarks/flood benchmarks/create-cancel \
	benchmarks/persist-bench

# bench_metrics: the cost of tileatomd's per-request counting (not installed, not run by
# make check; prints ns per request).
noinst_PROGRAMS += benchmarks/bench_metrics
benchmarks_bench_metrics_SOURCES = benchmarks/bench_metrics.c
benchmarks_bench_metrics_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
benchmarks_bench_metrics_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
benchmarks_bench_metrics_LDADD = $(TADAEMON_LIBS)

# tileatom-histbench: the end-to-end histogram against numpy.bincount (benchmarks/hist-vs-numpy
# runs both); built with the checks, not installed.
noinst_PROGRAMS += benchmarks/tileatom-histbench
benchmarks_tileatom_histbench_SOURCES = benchmarks/tileatom-histbench.c client/tileatom.h
benchmarks_tileatom_histbench_CPPFLAGS = -I$(top_srcdir)/client -D_GNU_SOURCE
benchmarks_tileatom_histbench_LDADD = client/libtileatom-client.la
if USE_CUDA
# mode device: keys in GPU memory, passed by CUDA IPC handle
benchmarks_tileatom_histbench_CPPFLAGS += -DTA_HISTBENCH_CUDA $(CUDA_CPPFLAGS)
benchmarks_tileatom_histbench_LDADD += $(CUDA_LIBS)
endif
EXTRA_DIST += benchmarks/hist-vs-numpy benchmarks/torch-hist-peer.py

# tileatom-bigtile: a tile sharded over the daemon's devices, larger than one device's memory,
# created, filled by one element-wise add and read back exactly (scripts/gpu-multi.sh; not
# installed).
noinst_PROGRAMS += benchmarks/tileatom-bigtile
benchmarks_tileatom_bigtile_SOURCES = benchmarks/tileatom-bigtile.c client/tileatom.h
benchmarks_tileatom_bigtile_CPPFLAGS = -I$(top_srcdir)/client -D_GNU_SOURCE
benchmarks_tileatom_bigtile_LDADD = client/libtileatom-client.la

# kernel-probe.cu: a standalone probe of histogram and element-wise kernel variants on an
# sm_90 GPU (built by hand with nvcc, see its opening comment; not built by make).
EXTRA_DIST += benchmarks/kernel-probe.cu
# cuptr-probe.c: the cost of the library's raw device pointer checks on a GPU machine
# (built by hand with nvcc, see its opening comment; not built by make).
EXTRA_DIST += benchmarks/cuptr-probe.c
# cli-hist-time: the wall/user/sys time of tileatom-cli hist --format i32 on both backends
# (run by hand on the GPU machine, see its opening comment).
EXTRA_DIST += benchmarks/cli-hist-time
# cli-hist-ab: two builds of tileatom-cli hist --format i32 alternating (GPU machine)
EXTRA_DIST += benchmarks/cli-hist-ab
