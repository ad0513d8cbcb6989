#!/bin/bash
# scripts/gpu-ab-adds.sh: single-element adds through two builds of tileatomd on a 2-GPU host,
# alternating, in one call. Run there as `bash CARRY/gpu-ab-adds.sh` from the repository
# root, CARRY being the gpu-carry/ folder of `scripts/gpu-run.sh pack` with the "before"
# daemon copied in as CARRY/tileatomd-pre. For ROUNDS (default 2) rounds, for each build:
#   one     --devices 0, two generators (tileatom-bench -t add -r 10000 -c 50 -P 16
#           --threads 8 --tiles 4 -d $BENCH_SECONDS) at once: their summed adds/s
#   both    --devices 0,1, the same two generators
#   sep     one daemon per GPU (--devices 0 / --devices 1), one generator each (the sum)
#   lone    --devices 0, one client, one add at a time (-c 1 -P 1): p50 in us
# Every step runs under `timeout`; logs under $OUT/ab-adds (OUT default /tmp/gpu-out).
set -u
C=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$C/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/gpu-out}
L="$OUT/ab-adds"
mkdir -p "$L"
SECS=${BENCH_SECONDS:-3}
S=/tmp/ta-ab-$$
mkdir -p "$S"
echo "machine: $(nproc) CPUs"
# start BIN SOCK ARGS...: a daemon in the background; prints its pid once it listens
start() {
	local bin=$1 sock=$2
	shift 2
	rm -f "$sock"
	timeout 300 "$bin" --socket "$sock" --backend cuda --foreground --log-level notice \
		--max-connections 1024 "$@" \
		>>"$L/daemon.log" 2>&1 &
	local pid=$!
	for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.05; done
	echo "$pid"
}
# gens SHAPE SOCK...: one generator per socket at once; prints the summed adds/s
gens() {
	local c=${1%x*} p=${1#*x} i=0 pids=""
	shift
	for s in "$@"; do
		timeout $((SECS + 60)) "$C/tileatom-bench" -s "$s" -t add -r 10000 -c "$c" -P "$p" \
			--threads 8 --tiles 4 -d "$SECS" --csv -q >"$S/g$i.csv" 2>>"$L/bench.err" &
		pids="$pids $!"
		i=$((i + 1))
	done
	wait $pids
	cat "$S"/g*.csv | awk -F, '$1 == "add" {s += $7} END {printf "%.0f\n", s}'
	rm -f "$S"/g*.csv
}
stop() { kill -TERM "$@" 2>/dev/null; for p in "$@"; do wait "$p" 2>/dev/null; done; }
for r in $(seq "${ROUNDS:-2}"); do
	for b in pre new; do
		bin=$C/tileatomd
		[ $b = pre ] && bin=$C/tileatomd-pre
		p=$(start "$bin" "$S/a.sock" --devices 0)
		one=$(gens 50x16 "$S/a.sock" "$S/a.sock")
		lone=$(timeout 60 "$C/tileatom-bench" -s "$S/a.sock" -t add -c 1 -P 1 -d "$SECS" --csv -q |
			awk -F, '$1 == "add" {print $9}')
		stop "$p"
		p=$(start "$bin" "$S/a.sock" --devices 0,1)
		both=$(gens 50x16 "$S/a.sock" "$S/a.sock")
		both200=$(gens 200x16 "$S/a.sock" "$S/a.sock")
		stop "$p"
		p=$(start "$bin" "$S/a.sock" --devices 0)
		q=$(start "$bin" "$S/b.sock" --devices 1)
		sep=$(gens 50x16 "$S/a.sock" "$S/b.sock")
		sep200=$(gens 200x16 "$S/a.sock" "$S/b.sock")
		stop "$p" "$q"
		echo "round $r $b: 50x16 one $one both $both sep $sep (both/one $(awk -v a="$both" -v b="$one" 'BEGIN {printf "%.2f", a / b}'), both/sep $(awk -v a="$both" -v b="$sep" 'BEGIN {printf "%.2f", a / b}')); 200x16 both $both200 sep $sep200; lone p50 $lone us"
	done
done
rm -rf "$S"
