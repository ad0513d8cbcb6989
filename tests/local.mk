# tests/local.mk: Check suites and benchmarks; each part of the project keeps its tests in
# a fragment of its own.
include $(srcdir)/tests/core.mk
include $(srcdir)/tests/service.mk
include $(srcdir)/tests/cuda.mk
include $(srcdir)/tests/fuzz.mk
include $(srcdir)/tests/table.mk
include $(srcdir)/tests/operator.mk
