# tests/table.mk: check_table and check_table_mutant (tests/check_table.c), which show that
# the table tacore/ta_ops.def decides for the daemon's validation, the client library's
# pre-checks and the PTX lowering together. The mutant build compiles a copy of
# tacore/ta_types.c beside a copy of the table with one row changed (xor loses acq_rel), so
# that the copy includes the changed table (and ta_types.h's inline questions include it
# too, through TA_OPS_DEF); the rule fails when the edit no longer applies.
if HAVE_CHECK
check_PROGRAMS += tests/check_table tests/check_table_mutant
TESTS += tests/check_table tests/check_table_mutant
endif

TABLE_TEST_SOURCES = tests/check_table.c kernels/ta_lower.c kernels/ta_lower.h \
	$(CLIENT_LIB_SOURCES)
TABLE_TEST_CPPFLAGS = $(AM_CPPFLAGS) -DTILEATOM_CLIENT_VERSION='"$(PACKAGE_VERSION)"'

tests_check_table_SOURCES = $(TABLE_TEST_SOURCES)
nodist_tests_check_table_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_table_CPPFLAGS = $(TABLE_TEST_CPPFLAGS)
tests_check_table_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_table_LDADD = tacore/libtacore.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS) $(LIBCRYPTO_LIBS) -lm

tests_check_table_mutant_SOURCES = $(TABLE_TEST_SOURCES) tacore/ta_plan.c tacore/ta_copy.c
nodist_tests_check_table_mutant_SOURCES = $(nodist_PROTO_SOURCES) tests/mutant/ta_types.c
tests_check_table_mutant_CPPFLAGS = $(TABLE_TEST_CPPFLAGS) -DTA_TABLE_MUTANT=1 \
	-DTA_OPS_DEF='"$(abs_top_builddir)/tests/mutant/ta_ops.def"'
tests_check_table_mutant_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_table_mutant_LDADD = $(CHECK_LIBS) $(PROTOBUF_C_LIBS) $(LIBCRYPTO_LIBS) -lm

TABLE_MUTANT = tests/mutant/ta_ops.def tests/mutant/ta_types.c
BUILT_SOURCES += $(TABLE_MUTANT)
CLEANFILES += $(TABLE_MUTANT)
tests/mutant/ta_ops.def: $(top_srcdir)/tacore/ta_ops.def
	$(AM_V_GEN)$(MKDIR_P) tests/mutant && \
	sed '/^TA_OP(XOR,/s/TA_SEMS_ALL/TA_SEM_BIT(RELAXED) | TA_SEM_BIT(ACQUIRE) | TA_SEM_BIT(RELEASE)/' \
	    $(top_srcdir)/tacore/ta_ops.def >$@.tmp && \
	if cmp -s $(top_srcdir)/tacore/ta_ops.def $@.tmp; then \
	  echo "tests/table.mk: the xor row of tacore/ta_ops.def no longer matches the mutation" >&2; \
	  rm -f $@.tmp; exit 1; fi && \
	mv $@.tmp $@
tests/mutant/ta_types.c: $(top_srcdir)/tacore/ta_types.c tests/mutant/ta_ops.def
	$(AM_V_GEN)$(MKDIR_P) tests/mutant && cp $(top_srcdir)/tacore/ta_types.c $@
