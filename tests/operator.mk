# tests/operator.mk: what a newcomer and an operator meet: tileatom-cli --json parsed back
# with json-c, the ls header, stats on the CPU backend, tileatomd's Prometheus endpoint
# scraped after a known sequence of requests, the messages without XDG_RUNTIME_DIR
# (check_operator); the README's shell and C tours run as written (check_tour.sh);
# install-deps.sh's package sets and a user without sudo (check_install_deps.sh);
# tileatom-bench's tests, output formats and exit statuses (check_bench.sh); the systemd
# unit's sandbox, socket and systemd-analyze's verdict (check_unit.sh).
if HAVE_CHECK
check_PROGRAMS += tests/check_operator
TESTS += tests/check_operator
tests_check_operator_SOURCES = tests/check_operator.c \
	tests/check_client_util.c tests/check_client_util.h
tests_check_operator_CPPFLAGS = $(CLIENT_TEST_CPPFLAGS) -I$(top_srcdir)/daemon -I$(top_srcdir)/tacore
tests_check_operator_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(JSON_C_CFLAGS)
tests_check_operator_LDADD = client/libtileatom-client.la $(CHECK_LIBS) $(JSON_C_LIBS) -lm
EXTRA_tests_check_operator_DEPENDENCIES = daemon/tileatomd$(EXEEXT) \
	client/tileatom-cli$(EXEEXT)
endif
TESTS += tests/check_tour.sh tests/check_install_deps.sh tests/check_bench.sh tests/check_unit.sh
dist_check_SCRIPTS = tests/check_tour.sh tests/check_install_deps.sh tests/check_bench.sh \
	tests/check_unit.sh
