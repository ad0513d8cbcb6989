# client/local.mk: libtileatom-client (shared library, one public header, a pkg-config
# file) and tileatom-cli, which is built on the library alone.
lib_LTLIBRARIES += client/libtileatom-client.la
include_HEADERS += client/tileatom.h
pkgconfig_DATA = client/tileatom-client.pc
DISTCLEANFILES += client/tileatom-client.pc
EXTRA_DIST += client/tileatom-client.pc.in

# Library sources other than the generated protocol code and the core; the unit tests
# compile them too.
CLIENT_LIB_SOURCES = \
	client/tileatom.h client/tac_internal.h \
	client/tac_conn.c client/tac_codec.c client/tac_api.c client/tac_util.c \
	client/tac_text.c client/tac_split.c client/tac_shm.c client/tac_cuptr.c \
	client/tac_call.c \
	client/tac_wire.c client/tac_wire.h $(PROTO_SOURCES) $(AUTH_SOURCES)

client_libtileatom_client_la_SOURCES = $(CLIENT_LIB_SOURCES)
nodist_client_libtileatom_client_la_SOURCES = $(nodist_PROTO_SOURCES)
client_libtileatom_client_la_CPPFLAGS = $(AM_CPPFLAGS) -DTILEATOM_BUILDING_LIBRARY \
	-DTILEATOM_CLIENT_VERSION='"$(PACKAGE_VERSION)"'
client_libtileatom_client_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) $(LIBCRYPTO_CFLAGS) \
	-fvisibility=hidden
# The core is linked in whole; only the public tileatom_* names are exported. Version 1:0:1:
# interfaces added (tileatom_stats_kinds, tileatom_connect_opts, ...) to those of 0:0:0;
# 2:0:2: tileatom_set_device_ptr_threshold added; 3:0:3: tileatom_set_busy_poll added;
# 4:0:4: tileatom_create_placed, tileatom_tile_placement, tileatom_list_placements added;
# 5:0:5: tileatom_fd, tileatom_poll added; 6:0:6: tileatom_cuda_stream_sync added; 6:1:6:
# it asks cuStreamQuery first (same interface). The soname stays .so.0.
client_libtileatom_client_la_LDFLAGS = $(AM_LDFLAGS) -version-info 6:1:6 -no-undefined \
	-export-symbols-regex '^tileatom_'
client_libtileatom_client_la_LIBADD = tacore/libtacore.la $(PROTOBUF_C_LIBS) $(LIBCRYPTO_LIBS) -lm

bin_PROGRAMS += client/tileatom-cli
client_tileatom_cli_SOURCES = client/cli_main.c client/cli_common.c client/cli_hist.c \
	client/cli_json.c client/cli.h client/tileatom.h
client_tileatom_cli_CFLAGS = $(AM_CFLAGS) $(JSON_C_CFLAGS)
client_tileatom_cli_LDADD = client/libtileatom-client.la $(JSON_C_LIBS) -lm

dist_man_MANS += doc/tileatom-cli.1
