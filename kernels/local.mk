# kernels/local.mk: the backends below the core (tacore/local.mk): the CPU backend always, the
# CUDA backend when configure found nvcc (else a stub that reports UNAVAILABLE), and the PTX
# lowering rules, as a libtool convenience library linked into tileatomd and the tests. The
# CUDA source compiles through libtool too (.cu.lo).
noinst_LTLIBRARIES += kernels/libtabackends.la
# TA_LT_ONE_OBJECT (configure: -shared or -static) is read by libtool's compile mode, not
# the compiler: one object per source instead of a PIC and a non-PIC one.
kernels_libtabackends_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) $(TA_LT_ONE_OBJECT)
kernels_libtabackends_la_SOURCES = \
	kernels/ta_cpu.c kernels/ta_hostmem.h kernels/ta_hostmem.c kernels/ta_lower.h \
	kernels/ta_lower.c kernels/ta_multi.c kernels/ta_async_thread.h kernels/ta_async_thread.c
kernels_libtabackends_la_LIBADD = tacore/libtacore.la
if USE_CUDA
kernels_libtabackends_la_SOURCES += kernels/ta_cuda.cu kernels/ta_cuda_batcher.cu kernels/ta_cuda_lanes.cu \
	kernels/ta_cuda_backend.h kernels/ta_cuda_kernels.cuh kernels/ta_cuda_batch.cuh \
	kernels/ta_cuda_private.h
# Dependencies of the CUDA object beyond its source: the .cu.lo suffix rule tracks none, so
# a changed kernel header, wrapper or compiler command (a new --with-cuda-arch) would
# otherwise leave a stale object.
TA_CUDA_DEPS = $(top_srcdir)/kernels/ta_cuda_kernels.cuh $(top_srcdir)/kernels/ta_cuda_batch.cuh \
	$(top_srcdir)/kernels/ta_cuda_private.h $(top_srcdir)/kernels/ta_cuda_backend.h \
	$(top_srcdir)/tacore/ta_backend.h $(top_srcdir)/tacore/ta_place.h \
	$(top_srcdir)/tacore/ta_copy.h \
	$(top_srcdir)/tacore/ta_plan.h $(top_srcdir)/tacore/ta_types.h \
	$(top_srcdir)/tacore/ta_ops.def $(top_srcdir)/tacore/ta_float.h \
	$(top_srcdir)/kernels/nvcc-libtool.sh \
	kernels/nvcc-command.stamp
kernels/ta_cuda.lo kernels/ta_cuda_batcher.lo kernels/ta_cuda_lanes.lo: $(TA_CUDA_DEPS)
# The nvcc command line; rewritten (and so newer than the objects) only when it changes.
TA_NVCC_COMMAND = $(NVCC) $(NVCCFLAGS) $(NVCC_LTFLAGS) $(DEFS)
kernels/nvcc-command.stamp: FORCE
	@$(MKDIR_P) kernels
	@if test "x$$(cat $@ 2>/dev/null)" != 'x$(TA_NVCC_COMMAND)'; then \
	  echo '$(TA_NVCC_COMMAND)' >$@; fi
CLEANFILES += kernels/nvcc-command.stamp
else
kernels_libtabackends_la_SOURCES += kernels/ta_cuda_none.c
endif
EXTRA_DIST += kernels/ta_cuda.cu kernels/ta_cuda_batcher.cu kernels/ta_cuda_lanes.cu kernels/ta_cuda_backend.h \
	kernels/ta_cuda_kernels.cuh kernels/ta_cuda_batch.cuh \
	kernels/ta_cuda_none.c \
	kernels/ta_cuda_private.h kernels/nvcc-libtool.sh

# A prerequisite that is never up to date: its targets' recipes always run.
.PHONY: FORCE
FORCE:

# Libraries a program running plans on a backend needs (the backends bring the core).
TABACKEND_LIBS = kernels/libtabackends.la $(CUDA_LIBS) -lm

# nvcc under libtool's compile mode: libtool writes the .lo and picks the object names;
# nvcc-libtool.sh hands libtool's PIC flags to the host compiler. NVCC_LTFLAGS (configure)
# makes libtool build one object instead of two, since nvcc is the slow step of the build.
.cu.lo:
	$(AM_V_CC)$(LIBTOOL) $(AM_V_lt) --tag=CC $(AM_LIBTOOLFLAGS) $(LIBTOOLFLAGS) \
		--mode=compile $(SHELL) $(top_srcdir)/kernels/nvcc-libtool.sh $(NVCC) $(NVCCFLAGS) $(DEFS) \
		-I$(top_builddir) -I$(top_srcdir)/tacore -I$(top_srcdir)/kernels $(NVCC_LTFLAGS) -c -o $@ $<
