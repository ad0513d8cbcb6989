# core/local.mk: the core library: the legality table (ta_ops.def), the vocabulary
# (ta_types), the plan builder (ta_plan), the backend interface (ta_backend.h) and the
# inline rules that both backends share:
#  - ta_addr.h: element addressing;
#  - ta_float.h: float arithmetic (also compiled as CUDA device code);
#  - ta_c11.h: the C11 memory order of each sem and kind of access.
# Built once, as a libtool convenience library that the backends, the daemon, the client
# library and the tests link. Plain C with no dependencies (no CUDA, no protobuf, no libuv).
noinst_LTLIBRARIES += core/libtacore.la
core_libtacore_la_SOURCES = \
	core/ta_ops.def core/ta_types.h core/ta_types.c \
	core/ta_plan.h core/ta_plan.c core/ta_backend.h \
	core/ta_addr.h core/ta_float.h core/ta_c11.h
core_libtacore_la_LIBADD = -lm
