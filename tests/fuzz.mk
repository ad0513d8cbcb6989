# tests/fuzz.mk: `make fuzz`, a libFuzzer harness of the daemon's request path
# (tests/fuzz_dispatch.c). Not part of `make check` and not built by default: it needs
# clang with libFuzzer. The harness and everything it calls (daemon/ but main.c, the core,
# the CPU backend, the framing and the generated protobuf code) are compiled together with
# -fsanitize=fuzzer,address,undefined; tests/fuzz_seeds.c writes the seed corpus. The run
# lasts FUZZ_SECONDS (make fuzz FUZZ_SECONDS=600) and keeps its state in the build folder:
# fuzz/seeds (rewritten each run), fuzz/corpus (grows across runs) and fuzz/artifacts
# (crash-*, leak-*, timeout-* inputs; rerun one with `tests/fuzz_dispatch FILE`).
# tests/fuzz_dispatch.dict gives the mutator protobuf varints at the integer edges.
# Each source compiles to its own object (tests/fuzzobj/), so that make -j builds them in
# parallel.
#
# `make check-fuzz` is the fuzz run of the test command (README.md, .ci/run): `make fuzz`
# for CHECK_FUZZ_SECONDS, then one line with the number of runs; it fails when clang (or
# its libFuzzer runtime) is missing (it says so: no silent skip) and when the run finds a
# crash, a leak, a timeout or a bad reply (the input is named).
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
# The harness's sources in the source tree (all but the generated protobuf code).
FUZZ_SRC_NAMES = tests/fuzz_dispatch.c \
	daemon/arena.c daemon/conf.c daemon/conn.c daemon/service.c \
	daemon/handlers.c daemon/logged.c daemon/pipeline.c daemon/reply.c \
	daemon/executor.c daemon/log.c daemon/notify.c \
	daemon/netaddr.c daemon/persist.c daemon/persist_log.c daemon/persist_snapshot.c daemon/persist_load.c \
	daemon/persist_mark.c daemon/recpool.c daemon/registry.c \
	daemon/metrics.c daemon/server.c daemon/shmbuf.c \
	daemon/wirecheck.c daemon/codec.c \
	tacore/ta_plan.c tacore/ta_place.c kernels/ta_lower.c kernels/ta_hostmem.c kernels/ta_cuda_none.c \
	kernels/ta_async_thread.c \
	proto/ta_frame.c proto/ta_auth.c proto/ta_wireschema.c
FUZZ_OBJS = $(patsubst %.c,tests/fuzzobj/%.o,$(FUZZ_SRC_NAMES)) tests/fuzzobj/tileatom.pb-c.o
FUZZ_NOCOV_OBJS = tests/fuzz_ta_cpu.o tests/fuzz_ta_types.o
FUZZ_DEPS = $(srcdir)/daemon/*.h $(srcdir)/tacore/*.h $(srcdir)/kernels/*.h $(srcdir)/tacore/ta_ops.def $(srcdir)/daemon/ta_conf.def \
	$(srcdir)/proto/ta_frame.h $(srcdir)/proto/ta_auth.h $(srcdir)/proto/ta_wireschema.h $(srcdir)/tests/codec_check.h $(PROTO_GEN)
EXTRA_DIST += tests/fuzz_dispatch.c tests/fuzz_dispatch.dict tests/fuzz_seeds.c
CLEANFILES += tests/fuzz_dispatch tests/fuzz_seeds $(FUZZ_NOCOV_OBJS) $(FUZZ_OBJS)

tests/fuzzobj/%.o: $(srcdir)/%.c $(FUZZ_DEPS)
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_SANITIZE) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -c -o $@ $<

tests/fuzzobj/tileatom.pb-c.o: proto/tileatom.pb-c.c $(FUZZ_DEPS)
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_SANITIZE) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -c -o $@ \
		proto/tileatom.pb-c.c

# ta_cpu.c's generated per-op x dtype x sem loops are the longest compile of the harness and
# of the CI fuzz step (clang, ASan + UBSan, measured alone on the loaded 2-core machine:
# user 83 s at -O0 -g1, 159 s at -O1 -g1; the whole harness with it at -O2 -g took 177 s).
# -O2 stays the default for the run's speed: a 60 s run with -O0 -g1 made 13,241 runs
# (217/s) at load 8, but its cost against -O2 on the same harness and load is unmeasured.
# `make check-fuzz FUZZ_CPU_OPT='-O0 -g1'` builds faster.
FUZZ_CPU_OPT = -O2
tests/fuzz_ta_cpu.o: $(srcdir)/kernels/ta_cpu.c $(FUZZ_DEPS)
	@$(MKDIR_P) tests
	$(AM_V_CC)$(FUZZ_CC) -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-fno-omit-frame-pointer $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) $(FUZZ_CPU_OPT) -c -o $@ \
		$(srcdir)/kernels/ta_cpu.c

tests/fuzz_ta_types.o: $(srcdir)/tacore/ta_types.c $(FUZZ_DEPS)
	@$(MKDIR_P) tests
	$(AM_V_CC)$(FUZZ_CC) -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-fno-omit-frame-pointer $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -O2 -c -o $@ \
		$(srcdir)/tacore/ta_types.c

tests/fuzz_dispatch: $(FUZZ_OBJS) $(FUZZ_NOCOV_OBJS)
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_SANITIZE) $(FUZZ_CFLAGS) -o $@ $(FUZZ_OBJS) \
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

# Seconds of the fuzz run in the test command.
CHECK_FUZZ_SECONDS = 60
.PHONY: check-fuzz
check-fuzz:
	@if ! command -v $(FUZZ_CC) >/dev/null 2>&1; then \
	  echo "check-fuzz: FAILED: $(FUZZ_CC) not found; the fuzz run of the test command needs" \
	    "clang with libFuzzer (Debian 12: apt-get install clang libclang-rt-dev, as" \
	    "scripts/install-deps.sh does); not skipped" >&2; \
	  exit 1; fi
	@if ! $(MAKE) $(AM_MAKEFLAGS) tests/fuzz_dispatch tests/fuzz_seeds; then \
	  echo "check-fuzz: FAILED: the harness did not build with $(FUZZ_CC) (is libFuzzer's" \
	    "runtime there? Debian 12: libclang-rt-dev)" >&2; \
	  exit 1; fi
	@echo "check-fuzz: fuzzing the request path for $(CHECK_FUZZ_SECONDS) s (log: fuzz/check-fuzz.log)"
	@$(MKDIR_P) fuzz; \
	$(MAKE) $(AM_MAKEFLAGS) fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS) >fuzz/check-fuzz.log 2>&1; \
	rc=$$?; \
	runs=$$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' fuzz/check-fuzz.log); \
	if test $$rc -ne 0 || test -z "$$runs"; then \
	  tail -n 60 fuzz/check-fuzz.log >&2; \
	  echo "check-fuzz: FAILED (exit status $$rc); inputs that failed:" \
	    $$(ls fuzz/artifacts 2>/dev/null) "(in fuzz/artifacts; rerun one with" \
	    "tests/fuzz_dispatch FILE)" >&2; \
	  exit 1; \
	fi; \
	echo "check-fuzz: $$runs, no crash, leak, timeout or bad reply"
