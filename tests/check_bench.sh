#!/usr/bin/env bash
# tests/check_bench.sh: tileatom-bench against a private daemon. Every test runs at a shape
# whose requests do not divide evenly over the clients (-c 7 -P 5 -n 1003): each CSV line
# must count exactly 1003 requests (the mutating integer tests also check the tile's sum
# themselves and exit 1 when it is off); with --threads and with -d the runs must finish
# and count requests; --json names every test asked for; an unknown test is a usage error
# (exit 2) that lists the tests, and a missing daemon exit 1. Run from the top build folder
# (as `make check` does).
set -u
build=$(pwd)
daemon="$build/daemon/tileatomd"
bench="$build/benchmarks/tileatom-bench"
for f in "$daemon" "$bench"; do
	[ -x "$f" ] || { echo "check_bench: $f is missing" >&2; exit 1; }
done
tmp=$(mktemp -d)
sock="$tmp/ta.sock"
"$daemon" --socket "$sock" --backend "${TA_TEST_BACKEND:-cpu}" --foreground 2>"$tmp/tileatomd.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "check_bench: tileatomd did not start" >&2; cat "$tmp/tileatomd.log" >&2; exit 1; }

fails=0
fail() {
	echo "check_bench: FAIL: $*" >&2
	fails=$((fails + 1))
}

# Every test, 1003 requests over 7 clients of depth 5.
tests="ping add addnw cas get hist fill"
if ! "$bench" -s "$sock" -c 7 -P 5 -n 1003 -t "${tests// /,}" --csv >"$tmp/all.csv" 2>"$tmp/all.err"; then
	fail "the run of every test failed: $(cat "$tmp/all.err")"
fi
header=$(head -n 1 "$tmp/all.csv")
[ "$header" = "test,clients,pipeline,elements,requests,seconds,rps,eps,p50_us,p99_us,p999_us,max_us,gen_cpu_us_per_req" ] ||
	fail "unexpected CSV header: $header"
for t in $tests; do
	line=$(grep "^$t," "$tmp/all.csv")
	[ -n "$line" ] || { fail "no CSV line for $t"; continue; }
	IFS=, read -r name clients depth elements requests _ <<<"$line"
	[ "$clients,$depth,$requests" = "7,5,1003" ] || fail "$t: clients,pipeline,requests = $clients,$depth,$requests, want 7,5,1003"
done

# Two threads; a timed run.
line=$("$bench" -s "$sock" --threads 2 -c 5 -P 3 -n 999 -t add --csv 2>"$tmp/thr.err" | tail -n 1)
[ "$(echo "$line" | cut -d, -f1,5)" = "add,999" ] || fail "--threads 2: $line $(cat "$tmp/thr.err")"
line=$("$bench" -s "$sock" -c 3 -P 4 -d 1 -t cas --csv 2>"$tmp/dur.err" | tail -n 1)
n=$(echo "$line" | cut -d, -f5)
case "$line" in cas,3,4,1,*) ;; *) fail "-d 1: $line $(cat "$tmp/dur.err")" ;; esac
[ "${n:-0}" -gt 0 ] 2>/dev/null || fail "-d 1 counted no requests: $line"

# JSON names each test.
"$bench" -s "$sock" -c 2 -P 2 -n 10 -t ping,add --json >"$tmp/out.json" 2>/dev/null || fail "--json run failed"
for t in ping add; do
	grep -q "\"test\": \"$t\", .*\"requests\": 10," "$tmp/out.json" || fail "--json: no result for $t with 10 requests"
done

# Usage error and a missing daemon.
"$bench" -s "$sock" -t nosuch >/dev/null 2>"$tmp/usage.err"
r=$?
[ "$r" -eq 2 ] || fail "unknown test: exit $r, want 2"
grep -q "unknown test 'nosuch' (tests: ping,add,addnw,cas,get,hist,fill)" "$tmp/usage.err" ||
	fail "unknown test: message $(cat "$tmp/usage.err")"
"$bench" -s "$tmp/none.sock" -t add >/dev/null 2>&1
r=$?
[ "$r" -eq 1 ] || fail "no daemon: exit $r, want 1"

if [ "$fails" -ne 0 ]; then
	echo "check_bench: $fails failure(s)" >&2
	exit 1
fi
echo "check_bench: every test counted its requests; usage and connection errors exit 2 and 1"
