# proto/local.mk: protoc-c code generation (never committed) and the framing helpers
# shared by the daemon and the client library.
PROTO_GEN = proto/tileatom.pb-c.c proto/tileatom.pb-c.h
BUILT_SOURCES += $(PROTO_GEN)
CLEANFILES += $(PROTO_GEN)
EXTRA_DIST += proto/tileatom.proto

proto/tileatom.pb-c.c proto/tileatom.pb-c.h: $(srcdir)/proto/tileatom.proto
	$(AM_V_GEN)$(MKDIR_P) proto && \
	$(PROTOC_C) --proto_path=$(srcdir)/proto --c_out=proto $(srcdir)/proto/tileatom.proto

# Sources every protocol speaker compiles in (daemon, client library, tests).
PROTO_SOURCES = proto/ta_frame.c proto/ta_frame.h proto/ta_wire_enums.h \
	proto/ta_wireschema.c proto/ta_wireschema.h
nodist_PROTO_SOURCES = $(PROTO_GEN)
# The Auth challenge-response (libcrypto), compiled by the daemon and the client library.
AUTH_SOURCES = proto/ta_auth.c proto/ta_auth.h
