#!/bin/sh
# scripts/gpu-ab-latency.sh: on the GPU machine, one-client latency of two or more tileatomd
# builds (or settings) on the CUDA backend, alternating in rounds so that all see the same
# machine: for each round and each daemon, a fresh daemon and tileatom-bench -t add -c 1 -P 1.
#   scripts/gpu-ab-latency.sh CARRY NAME=DAEMON [NAME=DAEMON ...]
# CARRY holds tileatom-bench and rt/ (scripts/gpu-run.sh pack); DAEMON is a tileatomd path,
# or a command of words without spaces inside them (e.g. "env TILEATOM_CUDA_PERSISTENT=0
# gpu-carry/tileatomd"). ROUNDS (default 3) and BENCH_SECONDS (default 3) set the size;
# SHAPES (default 1x1) lists clients x depth shapes to run per daemon (shapes with more
# than one client drive them from BENCH_THREADS threads, default 8); logs under $OUT
# (default /tmp/gpu-out). Prints one CSV line per (round, daemon, shape).
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
		# shellcheck disable=SC2086
		$daemon --socket "$sock" --backend cuda --log-level err 2>"$OUT/ab-$name.log" &
		pid=$!
		for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
		for shape in ${SHAPES:-1x1}; do
			c=${shape%x*}
			p=${shape#*x}
			threads=
			[ "$c" -gt 1 ] && threads="--threads ${BENCH_THREADS:-8}"
			# shellcheck disable=SC2086
			line=$("$carry/tileatom-bench" -s "$sock" -t add -r 10000 -c "$c" -P "$p" \
				-d "${BENCH_SECONDS:-3}" $threads --csv | tail -1)
			if [ "$shape" = 1x1 ]; then
				echo "round=$round daemon=$name $line"
			else
				echo "round=$round daemon=$name shape=$shape $line"
			fi
		done
		kill -TERM $pid
		wait $pid
	done
done
