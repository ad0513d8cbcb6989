# tacore/local.mk: the core library: the legality table (ta_ops.def), the vocabulary
# (ta_types), the plan builder (ta_plan), the backend interface (ta_backend.h) and the
# inline rules that both backends share:
#  - ta_addr.h: element addressing;
#  - ta_float.h: float arithmetic (also compiled as CUDA device code);
#  - ta_c11.h: the C11 memory order of each sem and kind of access;
#  - ta_place.h: placements and where a tile lives (several devices).
#  - ta_copy: large host-memory copies over several threads (client staging, CUDA staging).
# (The folder is tacore/, not core/: configure's exit trap removes core dumps with
# `rm -f core', which fails on a folder of that name and leaves confdefs.h behind.)
# Built once, as a libtool convenience library that the backends, the daemon, the client
# library and the tests link. Plain C with no dependencies (no CUDA, no protobuf, no libuv;
# pthreads for ta_copy).
noinst_LTLIBRARIES += tacore/libtacore.la
tacore_libtacore_la_SOURCES = \
	tacore/ta_ops.def tacore/ta_types.h tacore/ta_types.c \
	tacore/ta_plan.h tacore/ta_plan.c tacore/ta_backend.h \
	tacore/ta_place.h tacore/ta_place.c \
	tacore/ta_addr.h tacore/ta_float.h tacore/ta_c11.h \
	tacore/ta_copy.h tacore/ta_copy.c
tacore_libtacore_la_LIBADD = -lm
