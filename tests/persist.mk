# tests/persist.mk: durability of tileatomd --data-dir: tests/check_persist_crash.c (kill -9
# under load from several clients, restart, count; damaged logs and snapshots refused; the
# default run is short, about 20 s, and `tests/check_persist_crash --rounds 100` gives the
# figures of docs/RELIABILITY.md) and tests/check_persist.c (in-process unit tests).
check_PROGRAMS += tests/check_persist_crash
TESTS += tests/check_persist_crash

tests_check_persist_crash_SOURCES = tests/check_persist_crash.c
tests_check_persist_crash_CPPFLAGS = $(AM_CPPFLAGS) \
	-DTILEATOMD_PATH='"$(abs_top_builddir)/daemon/tileatomd"'
tests_check_persist_crash_LDADD = client/libtileatom-client.la
EXTRA_tests_check_persist_crash_DEPENDENCIES = daemon/tileatomd$(EXEEXT)

# In-process unit tests of daemon/persist_*.c (settings, locks, replay, snapshot).
if HAVE_CHECK
check_PROGRAMS += tests/check_persist
TESTS += tests/check_persist
tests_check_persist_SOURCES = tests/check_persist.c
tests_check_persist_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_check_persist_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(UV_CFLAGS) $(PROTOBUF_C_CFLAGS) $(XXHASH_CFLAGS) \
	$(INIH_CFLAGS)
tests_check_persist_LDADD = $(TADAEMON_LIBS) $(CHECK_LIBS)
endif

# The suites that run a real tileatomd (check_integration, check_daemon_server,
# check_persist_crash) again with --loops 3 (tests/check_loops.sh sets TA_TEST_LOOPS).
if HAVE_CHECK
TESTS += tests/check_loops.sh
endif
EXTRA_DIST += tests/check_loops.sh

# The same suites (check_integration, check_daemon_server) again with --async-apply 1
# --loops 3 (tests/check_async.sh sets TA_TEST_ASYNC): the event loops' asynchronous
# applies (issue 23), on the CPU backend's completion thread.
if HAVE_CHECK
TESTS += tests/check_async.sh
endif
EXTRA_DIST += tests/check_async.sh

# The same suites again on 1, 2 and 3 CPU memory pools with every tile sharded
# (tests/check_sharded.sh sets TA_TEST_DEVICES and TA_TEST_PLACEMENT; issue 24).
if HAVE_CHECK
TESTS += tests/check_sharded.sh
endif
EXTRA_DIST += tests/check_sharded.sh
