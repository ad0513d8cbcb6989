#!/bin/sh
# scripts/gpu-ab-latency.sh: on the GPU machine, one-client latency of two or more tileatomd
# builds on the CUDA backend, alternating in rounds so that both see the same machine:
# for each round and each daemon, a fresh daemon and tileatom-bench -t add -c 1 -P 1.
#   scripts/gpu-ab-latency.sh CARRY NAME=DAEMON [NAME=DAEMON ...]
# CARRY holds tileatom-bench and rt/ (scripts/gpu-run.sh pack); ROUNDS (default 3) and
# BENCH_SECONDS (default 3) set the size; logs under $OUT (default /tmp/gpu-out). Prints
# one CSV line per (round, daemon).
set -u
carry=${1:?usage: gpu-ab-latency.sh CARRY NAME=DAEMON...}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$here/$carry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for round in $(seq "${ROUNDS:-3}"); do
	for pair in "$@"; do
		name=${pair%%=*}
		daemon=${pair#*=}
		sock="$OUT/ab-$name.sock"
		"$daemon" --socket "$sock" --backend cuda --log-level err 2>"$OUT/ab-$name.log" &
		pid=$!
		for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
		line=$("$carry/tileatom-bench" -s "$sock" -t add -r 10000 -c 1 -P 1 \
			-d "${BENCH_SECONDS:-3}" --csv | tail -1)
		echo "round=$round daemon=$name $line"
		kill -TERM $pid
		wait $pid
	done
done
