#!/usr/bin/env bash
# tests/check_sharded.sh: the suites that run a real tileatomd through the library
# (check_integration and check_daemon_server; check_persist_crash on 3 pools only) again on
# the CPU backend split into 1, 2 and 3 memory pools with every tile sharded over them (TA_TEST_DEVICES,
# TA_TEST_PLACEMENT=shard: their daemon launcher adds --devices N --placement shard), so
# that every request they make runs through the multi-device layer's routing, on tiles of
# uneven splits, and must give exactly what one device gives (issue 24). Then check_multi
# again with TA_MULTI_PARTIALS set, so that its differential test sends every integer add
# and sub into a sharded tile through the partial-tile path that a client's GPU keys take
# (kernels/ta_multi.c, apply_partials): a scratch on every part's device, and (=single) one
# scratch on the first part's device, as for keys on one GPU: one apply there with a
# merge-out (zero the scratch, run, add each part's rows into the part). Run from the top
# build folder (as `make check` does). Exit 0 when every suite passed (or skipped with 77).
set -u
export TA_TEST_PLACEMENT=shard
rc=0
for n in 1 2 3; do
	export TA_TEST_DEVICES=$n
	suites="check_integration check_daemon_server"
	[ "$n" -eq 3 ] && suites="$suites check_persist_crash" # the slow one: once
	for t in $suites; do
		./tests/$t
		r=$?
		echo "tests/$t with --devices $n --placement shard: exit $r"
		if [ "$r" -ne 0 ] && [ "$r" -ne 77 ]; then
			rc=1
		fi
	done
done
for mode in 1 single; do
	TA_MULTI_PARTIALS=$mode ./tests/check_multi
	r=$?
	echo "tests/check_multi with TA_MULTI_PARTIALS=$mode: exit $r"
	[ "$r" -eq 0 ] || rc=1
done
exit $rc
