#!/bin/sh
# scripts/gpu-busy-poll.sh: on the GPU machine, after scripts/gpu-run.sh pack: what busy
# polling (tileatomd --busy-poll, the library's TILEATOM_BUSY_POLL_US) does to one
# client's latency and to 50 x 16 throughput, per backend, in alternating rounds: for each
# round, backend and setting (off: neither spins; daemon; client; both) a fresh daemon and
# tileatom-bench -t add at 1x1 and 50x16. Prints one CSV line (tileatom-bench --csv) per
# (round, backend, setting, shape).
#   scripts/gpu-busy-poll.sh [CARRY]   ROUNDS (3), USEC (50), BACKENDS ("cpu cuda"),
#   BENCH_SECONDS (3); logs under $OUT (default /tmp/gpu-out)
set -u
carry=${1:-gpu-carry}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$here/$carry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
usec=${USEC:-50}
for round in $(seq "${ROUNDS:-3}"); do
	for backend in ${BACKENDS:-cpu cuda}; do
		for setting in off daemon client both; do
			dpoll=0
			cpoll=0
			case $setting in
			daemon) dpoll=$usec ;;
			client) cpoll=$usec ;;
			both) dpoll=$usec cpoll=$usec ;;
			esac
			sock="$OUT/bp-$backend-$setting.sock"
			"$carry/tileatomd" --socket "$sock" --backend "$backend" --busy-poll "$dpoll" \
				--log-level err 2>"$OUT/bp-$backend-$setting.log" &
			pid=$!
			for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
			for shape in 1x1 50x16; do
				c=${shape%x*}
				p=${shape#*x}
				line=$(TILEATOM_BUSY_POLL_US=$cpoll "$carry/tileatom-bench" -s "$sock" \
					-t add -r 10000 -c "$c" -P "$p" -d "${BENCH_SECONDS:-3}" \
					--threads 8 --csv | tail -1)
				echo "round=$round backend=$backend busy_poll=$setting shape=$shape $line"
			done
			kill -TERM $pid
			wait $pid
		done
	done
done
