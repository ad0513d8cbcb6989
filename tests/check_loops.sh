#!/usr/bin/env bash
# tests/check_loops.sh: the suites that run a real tileatomd, again with three event loops
# that busy-poll (TA_TEST_LOOPS=3, TA_TEST_BUSY_POLL=200: their daemon launchers add
# --loops 3 --busy-poll 200) and clients that busy-poll too (TILEATOM_BUSY_POLL_US=200),
# so that connections spread over loop threads, and loops and clients that spin before they
# sleep, see the same responses, limits, timeouts, shutdown and durability as with the
# default (one loop on a machine with fewer than 4 CPUs, nobody spinning). Run from the top
# build folder (as `make check` does). Exit 0 when every suite passed (or skipped with 77).
set -u
export TA_TEST_LOOPS=3
export TA_TEST_BUSY_POLL=200
export TILEATOM_BUSY_POLL_US=200
rc=0
for t in check_integration check_daemon_server check_persist_crash; do
	./tests/$t
	r=$?
	echo "tests/$t with --loops $TA_TEST_LOOPS --busy-poll $TA_TEST_BUSY_POLL: exit $r"
	if [ "$r" -ne 0 ] && [ "$r" -ne 77 ]; then
		rc=1
	fi
done
exit $rc
