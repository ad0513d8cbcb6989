# tests/service.mk

# --- daemon tests begin
# Daemon unit tests: framing/codec (check_frame), settings, registry, dispatch, notify and
# executor in-process (check_daemon), the settings table against its docs (check_conf),
# and the real tileatomd process over raw sockets (check_daemon_server).
if HAVE_CHECK
check_PROGRAMS += tests/check_frame tests/check_daemon tests/check_conf tests/check_daemon_server
TESTS += tests/check_frame tests/check_daemon tests/check_conf tests/check_daemon_server

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

tests_check_conf_SOURCES = tests/check_conf.c
tests_check_conf_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon \
	-DTA_SRCDIR='"$(abs_top_srcdir)"'
tests_check_conf_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(UV_CFLAGS)
tests_check_conf_LDADD = $(TADAEMON_LIBS) $(CHECK_LIBS)

# Tile memory and listings (check_tilemem): bookkeeping, records given back, paged lists,
# the host memory check from fake /proc and /sys files.
check_PROGRAMS += tests/check_tilemem
TESTS += tests/check_tilemem
tests_check_tilemem_SOURCES = tests/check_tilemem.c
tests_check_tilemem_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon -I$(top_srcdir)/kernels
tests_check_tilemem_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(UV_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_tilemem_LDADD = $(TADAEMON_LIBS) $(CHECK_LIBS)

tests_check_daemon_server_SOURCES = tests/check_daemon_server.c
tests_check_daemon_server_CPPFLAGS = $(AM_CPPFLAGS) \
	-DTA_TEST_DAEMON='"$(abs_top_builddir)/daemon/tileatomd"'
tests_check_daemon_server_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_daemon_server_LDADD = daemon/libtadaemon.a $(CHECK_LIBS) $(PROTOBUF_C_LIBS) \
	$(LIBCRYPTO_LIBS)
# The server test starts the daemon binary.
EXTRA_tests_check_daemon_server_DEPENDENCIES = daemon/tileatomd$(EXEEXT)

# The daemon's data-plane codec (daemon/codec.c) against protobuf-c (check_codec): every
# fuzz seed and thousands of random and mutated requests decoded both ways, run one by one
# and grouped, random responses encoded both ways.
check_PROGRAMS += tests/check_codec
TESTS += tests/check_codec
tests_check_codec_SOURCES = tests/check_codec.c tests/codec_check.h
tests_check_codec_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon \
	-DTA_SRCDIR='"$(abs_top_srcdir)"'
tests_check_codec_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(UV_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_codec_LDADD = $(TADAEMON_LIBS) $(CHECK_LIBS)
endif
# Access control and bounds without sockets (strings, sessions, Auth, private tiles, the
# secret file, max_tiles, the commit check, the new settings, the rate-limited log).
if HAVE_CHECK
check_PROGRAMS += tests/check_access
TESTS += tests/check_access
tests_check_access_SOURCES = tests/check_access.c
tests_check_access_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon \
	-DTA_SRCDIR='"$(abs_top_srcdir)"'
tests_check_access_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(UV_CFLAGS) $(PROTOBUF_C_CFLAGS) \
	$(INIH_CFLAGS) $(LIBCRYPTO_CFLAGS)
tests_check_access_LDADD = $(TADAEMON_LIBS) $(CHECK_LIBS)
endif
# --- daemon tests end

# --- client tests begin
# Client tests: the library's codec, connection and pipelining against an in-process fake
# daemon (check_client_codec, compiled from the library sources so that it reaches the
# internals); the library against a real tileatomd (check_integration); tileatom-cli as a
# subprocess against a real tileatomd (check_client_cli).
if HAVE_CHECK
check_PROGRAMS += tests/check_client_codec tests/check_integration tests/check_client_cli
TESTS += tests/check_client_codec tests/check_integration tests/check_client_cli

# Where the end-to-end suites find the binaries ($TILEATOMD / $TILEATOM_CLI override).
CLIENT_TEST_CPPFLAGS = $(AM_CPPFLAGS) \
	-DTILEATOMD_PATH='"$(abs_top_builddir)/daemon/tileatomd"' \
	-DTILEATOM_CLI_PATH='"$(abs_top_builddir)/client/tileatom-cli"' \
	-DTILEATOM_CLIENT_VERSION='"$(PACKAGE_VERSION)"'

tests_check_client_codec_SOURCES = tests/check_client_codec.c $(CLIENT_LIB_SOURCES)
nodist_tests_check_client_codec_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_client_codec_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS)
tests_check_client_codec_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_client_codec_LDADD = tacore/libtacore.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS) $(LIBCRYPTO_LIBS) -lm

# client/tac_wire.c's conformance to protobuf-c (random requests from the builders, the
# template cache, random and mutated responses).
check_PROGRAMS += tests/check_client_wire
TESTS += tests/check_client_wire
tests_check_client_wire_SOURCES = tests/check_client_wire.c $(CLIENT_LIB_SOURCES)
nodist_tests_check_client_wire_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_client_wire_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS)
tests_check_client_wire_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_client_wire_LDADD = tacore/libtacore.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS) $(LIBCRYPTO_LIBS) -lm

tests_check_integration_SOURCES = tests/check_integration.c tests/raw_ref_add.h \
	tests/check_client_util.c tests/check_client_util.h $(PROTO_SOURCES)
nodist_tests_check_integration_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_integration_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS)
tests_check_integration_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_integration_LDADD = client/libtileatom-client.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS)
EXTRA_tests_check_integration_DEPENDENCIES = daemon/tileatomd$(EXEEXT)

# Message passing across two devices of one daemon (--devices 2 CPU pools): a release
# store to a flag tile on device 1 after a write to a data tile on device 0, an acquire
# load on the reader's side (issue 24).
check_PROGRAMS += tests/check_litmus_multi
TESTS += tests/check_litmus_multi
tests_check_litmus_multi_SOURCES = tests/check_litmus_multi.c \
	tests/check_client_util.c tests/check_client_util.h $(PROTO_SOURCES)
nodist_tests_check_litmus_multi_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_litmus_multi_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS)
tests_check_litmus_multi_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_litmus_multi_LDADD = client/libtileatom-client.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS)
EXTRA_tests_check_litmus_multi_DEPENDENCIES = daemon/tileatomd$(EXEEXT)

# The split of atomic requests over the frame limit against a real tileatomd.
check_PROGRAMS += tests/check_split
TESTS += tests/check_split
tests_check_split_SOURCES = tests/check_split.c \
	tests/check_client_util.c tests/check_client_util.h $(PROTO_SOURCES)
nodist_tests_check_split_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_split_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS)
tests_check_split_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_split_LDADD = client/libtileatom-client.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS)
EXTRA_tests_check_split_DEPENDENCIES = daemon/tileatomd$(EXEEXT)

# Raw device pointers without a GPU: inert without the driver, and a fake driver in the
# test program (compiled from the library sources to reach the hidden functions; its fake
# entry points are exported so that the library can dlsym them).
check_PROGRAMS += tests/check_cuptr
TESTS += tests/check_cuptr
tests_check_cuptr_SOURCES = tests/check_cuptr.c tests/check_client_util.c \
	tests/check_client_util.h $(CLIENT_LIB_SOURCES)
nodist_tests_check_cuptr_SOURCES = $(nodist_PROTO_SOURCES)
tests_check_cuptr_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS)
tests_check_cuptr_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_check_cuptr_LDFLAGS = -export-dynamic
tests_check_cuptr_LDADD = tacore/libtacore.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS) $(LIBCRYPTO_LIBS) -lm
EXTRA_tests_check_cuptr_DEPENDENCIES = daemon/tileatomd$(EXEEXT)

tests_check_client_cli_SOURCES = tests/check_client_cli.c \
	tests/check_client_util.c tests/check_client_util.h
tests_check_client_cli_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS)
tests_check_client_cli_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_client_cli_LDADD = client/libtileatom-client.la $(CHECK_LIBS) -lm
EXTRA_tests_check_client_cli_DEPENDENCIES = daemon/tileatomd$(EXEEXT) \
	client/tileatom-cli$(EXEEXT)
endif
# --- client tests end
