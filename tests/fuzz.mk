# tests/fuzz.mk: `make fuzz`, a libFuzzer harness of the daemon's request path
# (tests/fuzz_dispatch.c). Not part of `make check` and not built by default: it needs
# clang with libFuzzer. The harness and everything it calls (daemon/ but main.c, the core,
# the CPU backend, the framing and the generated protobuf code) are compiled together with
# -fsanitize=fuzzer,address,undefined; tests/fuzz_seeds.c writes the seed corpus. The run
# lasts FUZZ_SECONDS (make fuzz FUZZ_SECONDS=600) and keeps its state in the build folder:
# fuzz/seeds (rewritten each run), fuzz/corpus (grows across runs) and fuzz/artifacts
# (crash-*, leak-*, timeout-* inputs; rerun one with `tests/fuzz_dispatch FILE`).
# tests/fuzz_dispatch.dict gives the mutator protobuf varints at the integer edges.
FUZZ_CC = clang
FUZZ_SECONDS = 60
# Seconds one input may run before libFuzzer reports a timeout.
FUZZ_TIMEOUT = 25
FUZZ_ARGS = -max_len=4096 -rss_limit_mb=2048 -entropic_scale_per_exec_time=1
FUZZ_SANITIZE = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
FUZZ_CPPFLAGS = $(DEFS) -I$(top_builddir) $(AM_CPPFLAGS) -I$(top_srcdir)/daemon -I$(top_srcdir)/tests
FUZZ_CFLAGS = -std=gnu11 -g -O1 -pthread $(UV_CFLAGS) $(PROTOBUF_C_CFLAGS) $(INIH_CFLAGS) \
	$(LIBCRYPTO_CFLAGS)
FUZZ_LIBS = $(UV_LIBS) $(PROTOBUF_C_LIBS) $(INIH_LIBS) $(LIBCRYPTO_LIBS) $(XXHASH_LIBS) -lm
# The per-element code (the CPU backend's loops in ta_cpu.c and the dtype helpers of
# ta_types.c they call) is built with the sanitizers but without coverage counters: the
# backend's worker threads all bumping the same counters made requests large enough for
# the worker pool about 15x slower. Everything else has full libFuzzer instrumentation.
FUZZ_SRCS = $(srcdir)/tests/fuzz_dispatch.c \
	$(srcdir)/daemon/arena.c $(srcdir)/daemon/conf.c $(srcdir)/daemon/conn.c $(srcdir)/daemon/dispatch.c \
	$(srcdir)/daemon/executor.c $(srcdir)/daemon/log.c $(srcdir)/daemon/notify.c \
	$(srcdir)/daemon/netaddr.c $(srcdir)/daemon/persist.c $(srcdir)/daemon/registry.c \
	$(srcdir)/daemon/metrics.c $(srcdir)/daemon/server.c $(srcdir)/daemon/shmbuf.c \
	$(srcdir)/daemon/wirecheck.c $(srcdir)/daemon/fastwire.c \
	$(srcdir)/tacore/ta_plan.c $(srcdir)/kernels/ta_lower.c $(srcdir)/kernels/ta_cuda_none.c \
	$(srcdir)/proto/ta_frame.c $(srcdir)/proto/ta_auth.c proto/tileatom.pb-c.c
FUZZ_NOCOV_OBJS = tests/fuzz_ta_cpu.o tests/fuzz_ta_types.o
FUZZ_DEPS = $(srcdir)/daemon/*.h $(srcdir)/tacore/*.h $(srcdir)/kernels/*.h $(srcdir)/tacore/ta_ops.def \
	$(srcdir)/proto/ta_frame.h $(srcdir)/proto/ta_auth.h $(srcdir)/tests/fastwire_diff.h $(PROTO_GEN)
EXTRA_DIST += tests/fuzz_dispatch.c tests/fuzz_dispatch.dict tests/fuzz_seeds.c
CLEANFILES += tests/fuzz_dispatch tests/fuzz_seeds $(FUZZ_NOCOV_OBJS)

tests/fuzz_ta_cpu.o: $(srcdir)/kernels/ta_cpu.c $(FUZZ_DEPS)
	@$(MKDIR_P) tests
	$(AM_V_CC)$(FUZZ_CC) -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-fno-omit-frame-pointer $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -O2 -c -o $@ \
		$(srcdir)/kernels/ta_cpu.c

tests/fuzz_ta_types.o: $(srcdir)/tacore/ta_types.c $(FUZZ_DEPS)
	@$(MKDIR_P) tests
	$(AM_V_CC)$(FUZZ_CC) -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-fno-omit-frame-pointer $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -O2 -c -o $@ \
		$(srcdir)/tacore/ta_types.c

tests/fuzz_dispatch: $(FUZZ_SRCS) $(FUZZ_NOCOV_OBJS) $(FUZZ_DEPS)
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_SANITIZE) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -o $@ $(FUZZ_SRCS) \
		$(FUZZ_NOCOV_OBJS) $(FUZZ_LIBS)

tests/fuzz_seeds: $(srcdir)/tests/fuzz_seeds.c $(PROTO_GEN)
	@$(MKDIR_P) tests
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -o $@ $(srcdir)/tests/fuzz_seeds.c \
		proto/tileatom.pb-c.c $(PROTOBUF_C_LIBS)

.PHONY: fuzz
fuzz: tests/fuzz_dispatch tests/fuzz_seeds
	rm -rf fuzz/seeds
	$(MKDIR_P) fuzz/seeds fuzz/corpus fuzz/artifacts
	tests/fuzz_seeds fuzz/seeds
	tests/fuzz_dispatch -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) \
		-dict=$(srcdir)/tests/fuzz_dispatch.dict -artifact_prefix=fuzz/artifacts/ \
		$(FUZZ_ARGS) fuzz/corpus fuzz/seeds
