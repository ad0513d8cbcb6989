# tests/persist.mk: durability of tileatomd --data-dir (tests/check_persist_crash.c): kill -9
# under load from several clients, restart, count; damaged logs and snapshots refused. The
# default run is short (about 15 s); `tests/check_persist_crash --rounds 100` gives the
# figures of docs/RELIABILITY.md.
check_PROGRAMS += tests/check_persist_crash
TESTS += tests/check_persist_crash

tests_check_persist_crash_SOURCES = tests/check_persist_crash.c
tests_check_persist_crash_CPPFLAGS = $(AM_CPPFLAGS) \
	-DTILEATOMD_PATH='"$(abs_top_builddir)/daemon/tileatomd"'
tests_check_persist_crash_LDADD = client/libtileatom-client.la
EXTRA_tests_check_persist_crash_DEPENDENCIES = daemon/tileatomd$(EXEEXT)
