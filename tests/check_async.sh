#!/usr/bin/env bash
# tests/check_async.sh: the suites that run a real tileatomd through the library and over raw
# sockets (check_integration, check_daemon_server) again with three event loops that run
# pipelined small requests themselves and hand their plans to the backend without waiting
# (TA_TEST_ASYNC=1, TA_TEST_LOOPS=3: their daemon launchers add --async-apply 1 --loops 3),
# with the loops polling for their completions (TA_TEST_ASYNC_POLL=1000: --async-poll 1000,
# what auto is on a host with CPUs to spare); the sharded run below with it off, as auto is
# on a small host.
# On the CPU backend the loops attach and each runs its groups in its own polls (its lane,
# kernels/ta_async_thread.c, as each CUDA loop drives its own resident kernel); the sharded
# run below sets TILEATOM_CPU_LANES=0, so its groups go through the completion thread and
# come back through the port's wake-up. The loops, the groups, the completions through each
# loop's executor port (its pump) and the order of the answers are the code CUDA runs by
# default (daemon/pipeline.c ta_async_run, conn.c, executor.c), so this is that path
# without a GPU: the same responses, limits, timeouts and shutdown as the default. Run from the top build folder (as `make check` does). Exit 0 when every
# suite passed (or skipped with 77).
set -u
export TA_TEST_ASYNC=1
export TA_TEST_LOOPS=3
export TA_TEST_ASYNC_POLL=1000
rc=0
for t in check_integration check_daemon_server; do
	./tests/$t
	r=$?
	echo "tests/$t with --async-apply $TA_TEST_ASYNC --loops $TA_TEST_LOOPS --async-poll $TA_TEST_ASYNC_POLL: exit $r"
	if [ "$r" -ne 0 ] && [ "$r" -ne 77 ]; then
		rc=1
	fi
done
# the multi-device layer's apply_async: every tile sharded over 2 pools (one-element
# requests split by pool into each pool's own apply_async, larger ones run in place),
# without lanes (the completion thread and the wake-ups)
TILEATOM_CPU_LANES=0 TA_TEST_ASYNC_POLL=0 TA_TEST_DEVICES=2 TA_TEST_PLACEMENT=shard \
	./tests/check_integration
r=$?
echo "tests/check_integration with TILEATOM_CPU_LANES=0 --async-apply 1 --loops 3 --async-poll 0 --devices 2 --placement shard: exit $r"
if [ "$r" -ne 0 ] && [ "$r" -ne 77 ]; then
	rc=1
fi
exit $rc
