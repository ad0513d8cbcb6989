# kernels/local.mk: the core library (types, legality table, plan builder) and the
# backends (CPU always; CUDA when configure found nvcc). Linked into tileatomd and tests.
noinst_LIBRARIES += kernels/libtacore.a
kernels_libtacore_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
kernels_libtacore_a_SOURCES = \
	kernels/ta_ops.def kernels/ta_types.h kernels/ta_types.c \
	kernels/ta_plan.h kernels/ta_plan.c kernels/ta_backend.h \
	kernels/ta_cpu.c kernels/ta_lower.h kernels/ta_lower.c
if USE_CUDA
kernels_libtacore_a_SOURCES += kernels/ta_cuda.cu kernels/ta_cuda_kernels.cuh \
	kernels/ta_cuda_private.h
# Header dependencies of the CUDA object: the .cu.o suffix rule tracks none, so a changed
# kernel header would otherwise leave a stale object.
TA_CUDA_DEPS = $(top_srcdir)/kernels/ta_cuda_kernels.cuh \
	$(top_srcdir)/kernels/ta_cuda_private.h $(top_srcdir)/kernels/ta_backend.h \
	$(top_srcdir)/kernels/ta_plan.h $(top_srcdir)/kernels/ta_types.h \
	$(top_srcdir)/kernels/ta_ops.def
kernels/ta_cuda.$(OBJEXT): $(TA_CUDA_DEPS)
else
kernels_libtacore_a_SOURCES += kernels/ta_cuda_none.c
endif
EXTRA_DIST += kernels/ta_cuda.cu kernels/ta_cuda_kernels.cuh kernels/ta_cuda_none.c \
	kernels/ta_cuda_private.h

# Libraries a program linking libtacore.a needs.
TACORE_LIBS = kernels/libtacore.a $(CUDA_LIBS) -lm

.cu.o:
	$(AM_V_CC)$(NVCC) $(NVCCFLAGS) $(DEFS) -I$(top_builddir) -I$(top_srcdir)/kernels -c -o $@ $<
