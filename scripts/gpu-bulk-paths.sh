#!/bin/sh
# scripts/gpu-bulk-paths.sh: the CUDA backend's bulk paths (issue 23, items 3-5) on the GPU
# machine, a baseline build and a new one side by side in the same call, with the torch
# peers. Run there from the repository root:
#
#   OUT=/tmp/out sh scripts/gpu-bulk-paths.sh CARRY
#
# CARRY holds base/ and new/ (each: tileatomd, tileatom-histbench, bench_gpu; new/ also
# check_cuda, check_cuda_ipc, check_integration, and rt/: the shared libraries the binaries
# need, as scripts/gpu-run.sh pack copies them); scripts/gpu-run.sh is taken from the
# checkout. In order: check_cuda and the CUDA IPC part of gpu-run.sh (check_cuda_ipc,
# check_integration's load case) on the new build; bench_torch.py and bench_gpu of both
# builds (the element-wise float32 add against torch add_); 2^24 keys -> 256 bins from
# host memory (tileatom-histbench modes one, split, shm) on each daemon with each client,
# TILEATOM_CUDA_TRACE=1 on the new daemon (its stage times go to its log), and once with
# TILEATOM_COPY_THREADS=1 (the new code on one copying thread); the same from GPU memory
# (--from device) at 2^24 and 2^27 keys, DEVICE_ROUNDS (default 1) rounds of base then new;
# torch-hist-peer.py at both sizes. BENCH_BUILDS (default "base new") names the builds
# whose bench_gpu runs. The logs go to
# $OUT/logs.tgz (the device tool returns few files), the summary to stdout.
set -u
carry=${1:-gpu-carry-bulk}
OUT=${OUT:-/tmp/gpu-out}
L=/tmp/bulk-logs
rm -rf "$L"
mkdir -p "$L" "$OUT"
export LD_LIBRARY_PATH="$PWD/$carry/new/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv | tee "$L/device.txt"
echo "cpus: $(nproc)"

# starts DAEMON (base or new) on socket $L/$2.sock with the environment in $3; sets dpid
start_daemon() {
	rm -f "$L/$2.sock"
	env $3 "$carry/$1/tileatomd" --socket "$L/$2.sock" --backend cuda --log-level err \
		2>"$L/daemon-$2.log" &
	dpid=$!
	for _ in $(seq 200); do [ -S "$L/$2.sock" ] && break; sleep 0.05; done
}
stop_daemon() {
	kill -TERM "$dpid"
	wait "$dpid"
	grep -h 'trace' "$L/daemon-$1.log" | sed "s/^/  [$1] /"
}

echo "== correctness (new build)"
timeout 200 "$carry/new/check_cuda" >"$L/check_cuda.log" 2>&1
echo "check_cuda exit $?; $(grep -E '^[0-9]+%' "$L/check_cuda.log")"
grep -E ':[EF]:|large |^diff:' "$L/check_cuda.log" | head -12
OUT="$L/ipc" IPC_REPS=20 timeout 300 sh scripts/gpu-run.sh ipc "$carry/new" 2>&1 | tee "$L/ipc.txt"

echo "== kernels: bench_gpu (2^26 elements), torch peers"
timeout 120 python3 tests/bench_torch.py --out "$L/torch.txt" >"$L/torch.log" 2>&1
grep -E 'add_|bincount_256' "$L/torch.txt"
for b in ${BENCH_BUILDS:-base new}; do
	timeout 150 "$carry/$b/bench_gpu" --torch "$L/torch.txt" >"$L/bench-$b.log" 2>&1
	echo "bench_gpu $b exit $?"
	grep -E 'elementwise add (float32|int32 \(relaxed|float16)|hist 256 bins|floor' \
		"$L/bench-$b.log" | sed "s/^/  [$b] /"
done

echo "== 2^24 keys -> 256 bins from host memory (mode keys seconds Gkeys/s, best of 5)"
for combo in "base base -" "new base TILEATOM_CUDA_TRACE=1" "new new TILEATOM_CUDA_TRACE=1" \
	"new new TILEATOM_COPY_THREADS=1" "base base -" "new new -"; do
	set -- $combo
	env=$3
	[ "$env" = - ] && env=
	name="d$1-c$2$( [ -n "$env" ] && echo "-${env%%=*}")"
	start_daemon "$1" "$name" "$env"
	echo "daemon $1, client $2, env '${env}':"
	env $env timeout 120 "$carry/$2/tileatom-histbench" -s "$L/$name.sock" -n 16777216 -b 256 \
		--reps 5 --modes one,split,shm 2>&1 | sed 's/^/  /'
	stop_daemon "$name"
done

echo "== from GPU memory (CUDA IPC; best of 20 at 2^24, 10 at 2^27; ${DEVICE_ROUNDS:-1} rounds)"
for b in $(for _ in $(seq "${DEVICE_ROUNDS:-1}"); do echo base new; done); do
	start_daemon "$b" "dev-$b" "TILEATOM_CUDA_TRACE=1"
	for n in 16777216 134217728; do
		r=20
		[ $n -gt 16777216 ] && r=10
		echo "daemon+client $b, $n keys:"
		timeout 120 "$carry/$b/tileatom-histbench" -s "$L/dev-$b.sock" -n $n -b 256 \
			--reps $r --from device 2>&1 | sed 's/^/  /'
	done
	stop_daemon "dev-$b"
done

echo "== torch.bincount peers (case keys seconds Gkeys/s)"
timeout 120 python3 benchmarks/torch-hist-peer.py -n 16777216 -b 256 --reps 20 2>&1 | tee "$L/torch-hist-24.txt"
timeout 120 python3 benchmarks/torch-hist-peer.py -n 134217728 -b 256 --reps 10 2>&1 | tee "$L/torch-hist-27.txt"

tar czf "$OUT/logs.tgz" -C /tmp bulk-logs
