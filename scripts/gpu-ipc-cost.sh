#!/bin/sh
# scripts/gpu-ipc-cost.sh: where a request with keys in GPU memory spends its time, on the GPU
# machine. Run there from the repository root as
#   sh scripts/gpu-ipc-cost.sh CARRY
# with CARRY the folder of `scripts/gpu-run.sh pack` (tileatomd, tileatom-histbench, rt/).
# For each key count (SIZES, default 1024 .. 2^27) it starts a fresh tileatomd --backend cuda
# with TILEATOM_CUDA_TRACE=1, runs `tileatom-histbench --from device -b 256 --reps REPS`
# (the keys in the client's GPU memory, by registered buffer and by raw device pointer),
# stops the daemon (which prints the mean and least time of each stage of its applies:
# prep, stage, launch, wait, finish) and prints both. The fixed cost of a request is the
# best time at the smallest count; the per-key cost the slope between the larger ones; the
# time outside the backend is the best time less the backend's stages. Every step is bounded
# by timeout; logs under $OUT (default /tmp/gpu-out). DAEMON_ARGS adds tileatomd options
# (e.g. "--inline-max 1073741824" to run every request on the event loop) and DAEMON another
# tileatomd (an earlier build), for comparisons in one call.
c=${1:-gpu-carry}
OUT=${OUT:-/tmp/gpu-out}
SIZES=${SIZES:-1024 65536 1048576 16777216 134217728}
REPS=${REPS:-20}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$c/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -L 2>/dev/null | head -4
for n in $SIZES; do
	sock="$OUT/ipc-$n.sock"
	rm -f "$sock"
	TILEATOM_CUDA_TRACE=1 timeout 300 "${DAEMON:-$c/tileatomd}" --socket "$sock" --backend cuda \
		--log-level notice --foreground ${DAEMON_ARGS:-} 2>"$OUT/ipc-daemon-$n.log" &
	pid=$!
	for _ in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
	timeout 240 "$c/tileatom-histbench" -s "$sock" -n "$n" -b 256 --reps "$REPS" \
		--from device >"$OUT/ipc-hb-$n.txt" 2>&1
	echo "keys $n: histbench exit $?"
	sed 's/^/  /' "$OUT/ipc-hb-$n.txt"
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
	echo "  daemon exit $?; its trace:"
	grep -i 'trace\|apply\|batch' "$OUT/ipc-daemon-$n.log" | sed 's/^/  /' | tail -6
done
