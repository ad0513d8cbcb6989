# daemon/local.mk: tileatomd, the daemon. Everything but main.c goes into a private
# library that the daemon's unit tests link as well. Also installs the man page, the
# example configuration and the systemd unit.
noinst_LIBRARIES += daemon/libtadaemon.a
daemon_libtadaemon_a_SOURCES = \
	daemon/arena.c daemon/arena.h \
	daemon/conf.c daemon/conf.h daemon/ta_conf.def \
	daemon/conn.c daemon/conn.h \
	daemon/shmbuf.c daemon/shmbuf.h \
	daemon/dispatch.h daemon/reqctx.h \
	daemon/service.c daemon/handlers.c daemon/logged.c daemon/pipeline.c daemon/reply.c \
	daemon/executor.c daemon/executor.h \
	daemon/codec.c daemon/codec.h \
	daemon/log.c daemon/log.h \
	daemon/metrics.c daemon/metrics.h \
	daemon/metrics_http.c daemon/metrics_http.h \
	daemon/netaddr.c daemon/netaddr.h \
	daemon/notify.c daemon/notify.h \
	daemon/persist.h daemon/persist_int.h daemon/persist.c daemon/persist_log.c daemon/persist_snapshot.c \
	daemon/persist_load.c daemon/persist_mark.c \
	\
	daemon/recpool.c daemon/recpool.h \
	daemon/registry.c daemon/registry.h \
	daemon/server.c daemon/server.h \
	daemon/wirecheck.c daemon/wirecheck.h \
	$(PROTO_SOURCES) $(AUTH_SOURCES)
nodist_daemon_libtadaemon_a_SOURCES = $(nodist_PROTO_SOURCES)
daemon_libtadaemon_a_CFLAGS = $(AM_CFLAGS) $(UV_CFLAGS) $(PROTOBUF_C_CFLAGS) $(INIH_CFLAGS) \
	$(MHD_CFLAGS) $(LIBCRYPTO_CFLAGS) $(XXHASH_CFLAGS)

# Libraries a program linking libtadaemon.a needs (after it on the link line).
TADAEMON_LIBS = daemon/libtadaemon.a $(TABACKEND_LIBS) $(UV_LIBS) $(PROTOBUF_C_LIBS) $(INIH_LIBS) \
	$(MHD_LIBS) $(LIBCRYPTO_LIBS) $(XXHASH_LIBS)

sbin_PROGRAMS += daemon/tileatomd
daemon_tileatomd_SOURCES = daemon/main.c
daemon_tileatomd_CFLAGS = $(AM_CFLAGS) $(UV_CFLAGS) $(PROTOBUF_C_CFLAGS) $(INIH_CFLAGS)
daemon_tileatomd_LDADD = $(TADAEMON_LIBS)

# Documentation: tileatomd(8), an example configuration, the systemd unit.
dist_man_MANS += doc/tileatomd.8
tileatomddocdir = $(docdir)
dist_tileatomddoc_DATA = doc/tileatomd.conf.example

systemdsystemunit_DATA = doc/tileatomd.service
EXTRA_DIST += doc/tileatomd.service.in
CLEANFILES += doc/tileatomd.service
doc/tileatomd.service: $(srcdir)/doc/tileatomd.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) doc && \
	sed -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g' \
	    -e 's|@docdir[@]|$(docdir)|g' $(srcdir)/doc/tileatomd.service.in >$@.tmp && \
	mv $@.tmp $@
