# tests/service.mk

# --- daemon tests begin
# Daemon unit tests: framing/codec (check_frame), settings, registry, dispatch, notify and
# executor in-process (check_daemon), and the real tileatomd process over raw sockets
# (check_daemon_server).
if HAVE_CHECK
check_PROGRAMS += tests/check_frame tests/check_daemon tests/check_daemon_server
TESTS += tests/check_frame tests/check_daemon tests/check_daemon_server

tests_check_frame_SOURCES = tests/check_frame.c $(PROTO_SOURCES)
nodist_tests_check_frame_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_frame_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_frame_LDADD = $(CHECK_LIBS) $(PROTOBUF_C_LIBS)

tests_check_daemon_SOURCES = tests/check_daemon.c
tests_check_daemon_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon \
	-DTA_SRCDIR='"$(abs_top_srcdir)"'
tests_check_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(UV_CFLAGS) $(PROTOBUF_C_CFLAGS) \
	$(INIH_CFLAGS)
tests_check_daemon_LDADD = $(TADAEMON_LIBS) $(CHECK_LIBS)

tests_check_daemon_server_SOURCES = tests/check_daemon_server.c
tests_check_daemon_server_CPPFLAGS = $(AM_CPPFLAGS) \
	-DTA_TEST_DAEMON='"$(abs_top_builddir)/daemon/tileatomd"'
tests_check_daemon_server_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_daemon_server_LDADD = daemon/libtadaemon.a $(CHECK_LIBS) $(PROTOBUF_C_LIBS)
# The server test starts the daemon binary.
EXTRA_tests_check_daemon_server_DEPENDENCIES = daemon/tileatomd$(EXEEXT)
endif
# --- daemon tests end
