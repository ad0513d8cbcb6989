# tests/core.mk: the core Check suites (plan builder, CPU backend semantics, contention, the
# multi-device layer over CPU pools, the multi-threaded host copy).
# TA_VECTORS_SOURCES (test helpers + backend-neutral vectors, see tests/ta_vectors.h) can be
# compiled into other suites too, e.g. the CUDA suite in tests/cuda.mk.
TA_VECTORS_SOURCES = tests/ta_test_util.c tests/ta_test_util.h \
	tests/ta_vectors.c tests/ta_vectors.h

if HAVE_CHECK
check_PROGRAMS += tests/check_plan tests/check_semantics tests/check_contention
TESTS += tests/check_plan tests/check_semantics tests/check_contention
check_PROGRAMS += tests/check_fastpath
TESTS += tests/check_fastpath
check_PROGRAMS += tests/check_multi
TESTS += tests/check_multi
check_PROGRAMS += tests/check_copy
TESTS += tests/check_copy
endif

tests_check_plan_SOURCES = tests/check_plan.c $(TA_VECTORS_SOURCES)
tests_check_plan_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_plan_LDADD = $(TABACKEND_LIBS) $(CHECK_LIBS)

tests_check_semantics_SOURCES = tests/check_semantics.c $(TA_VECTORS_SOURCES)
tests_check_semantics_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_semantics_LDADD = $(TABACKEND_LIBS) $(CHECK_LIBS)

tests_check_contention_SOURCES = tests/check_contention.c $(TA_VECTORS_SOURCES)
tests_check_contention_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_contention_LDADD = $(TABACKEND_LIBS) $(CHECK_LIBS)

tests_check_fastpath_SOURCES = tests/check_fastpath.c $(TA_VECTORS_SOURCES)
tests_check_fastpath_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_fastpath_LDADD = $(TABACKEND_LIBS) $(CHECK_LIBS)

tests_check_multi_SOURCES = tests/check_multi.c $(TA_VECTORS_SOURCES)
tests_check_multi_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_multi_LDADD = $(TABACKEND_LIBS) $(CHECK_LIBS)

tests_check_copy_SOURCES = tests/check_copy.c
tests_check_copy_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_copy_LDADD = tacore/libtacore.la $(CHECK_LIBS)
