#!/usr/bin/env bash
# tests/check_loops.sh: the suites that run a real tileatomd, again with three event loops
# (TA_TEST_LOOPS=3: their daemon launchers add --loops 3), so that connections spread over
# loop threads see the same responses, limits, timeouts, shutdown and durability as with
# the default (one loop on a machine with fewer than 4 CPUs). Run from the top build
# folder (as `make check` does). Exit 0 when every suite passed (or skipped with 77).
set -u
export TA_TEST_LOOPS=3
rc=0
for t in check_integration check_daemon_server check_persist_crash; do
	./tests/$t
	r=$?
	echo "tests/$t with --loops $TA_TEST_LOOPS: exit $r"
	if [ "$r" -ne 0 ] && [ "$r" -ne 77 ]; then
		rc=1
	fi
done
exit $rc
