#!/bin/sh
# scripts/gpu-devptr.sh: raw device pointers on the GPU machine (issue 10, doc/GPU-RESULTS.md
# "Raw device pointers"), run there from the repository root as
#   sh CARRY/gpu-devptr.sh CARRY
# with CARRY holding tileatomd, check_cuda_ipc, tileatom-histbench, check_integration and
# rt/ (scripts/gpu-run.sh pack), gpu-run.sh itself, cuptr-probe (benchmarks/cuptr-probe.c)
# and this script: the IPC part of gpu-run.sh (check_cuda_ipc with the raw-pointer cases,
# histbench --from device = modes device and devptr, the torch peers, check_integration
# case load), then 3 more histbench --from device runs against one daemon, then
# cuptr-probe. Logs under $OUT (default /tmp/gpu-out).
c=${1:-gpu-carry}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$c/rt"
OUT=$OUT IPC_REPS=20 timeout 300 sh "$c/gpu-run.sh" ipc "$c" >"$OUT/ipc.txt" 2>&1
echo "gpu-run.sh ipc: exit $?"
sock="$OUT/d2.sock"
"$c/tileatomd" --socket "$sock" --backend cuda --log-level err 2>"$OUT/d2.log" &
pid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
for i in 1 2 3; do
	"$c/tileatom-histbench" -s "$sock" -n 16777216 -b 256 --reps 20 --from device \
		>"$OUT/hb-$i.txt" 2>&1
	echo "histbench run $i: exit $?"
done
kill -TERM $pid
wait $pid
echo "tileatomd exit $?"
"$c/cuptr-probe" >"$OUT/probe.txt" 2>&1
echo "cuptr-probe: exit $?"
