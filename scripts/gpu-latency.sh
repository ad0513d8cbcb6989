#!/bin/sh
# scripts/gpu-latency.sh: on the GPU machine, after scripts/gpu-run.sh pack: one-client
# latency and small-request throughput of the CUDA backend with the default --inline-max
# (auto: on the loop while one connection is busy, else on the workers) against small
# requests always on the workers (--inline-max 0) and always on the event loop
# (--inline-max 1024), through tileatom-bench; prints one CSV line per (setting, shape).
#   scripts/gpu-latency.sh [CARRY]   logs under $OUT (default /tmp/gpu-out)
set -u
carry=${1:-gpu-carry}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$here/$carry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for setting in default workers loop; do
	case $setting in
	default) opts="" ;;
	workers) opts="--inline-max 0" ;;
	*) opts="--inline-max 1024" ;;
	esac
	sock="$OUT/lat-$setting.sock"
	# shellcheck disable=SC2086
	"$carry/tileatomd" --socket "$sock" --backend cuda $opts --log-level err \
		2>"$OUT/lat-daemon-$setting.log" &
	pid=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
	for shape in 1x1 50x1 50x16; do
		c=${shape%x*}
		p=${shape#*x}
		line=$("$carry/tileatom-bench" -s "$sock" -t add -r 10000 -c "$c" -P "$p" \
			-d "${BENCH_SECONDS:-3}" --threads 8 --csv | tail -1)
		echo "cuda-$setting shape=$shape $line"
	done
	kill -TERM $pid
	wait $pid
done
