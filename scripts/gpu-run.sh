#!/bin/sh
# scripts/gpu-run.sh: builds the CUDA backend's tests for the GPU machine and runs them
# there: the GPU machine has no toolchain for the project, so everything is built here,
# carried over as binaries and run there.
#
#   scripts/gpu-run.sh pack [BUILD]   here: build check_cuda and bench_gpu in BUILD (default
#                                     build-gpu, configured --with-cuda --disable-shared) and
#                                     copy them with the shared libraries they need
#                                     (all but the C/C++ runtimes) into gpu-carry/ (git-ignored via
#                                     .git/info/exclude), with the scripts/gpu-*.sh that run
#                                     from there (bash gpu-carry/gpu-multi.sh: several GPUs)
#   scripts/gpu-run.sh run [CARRY]    there, from the repository root: device facts, the Check
#                                     suite check_cuda, a compute-sanitizer memcheck pass over
#                                     the differential test, the torch peers
#                                     (tests/bench_torch.py), bench_gpu, then the service:
#                                     the end-to-end suites against tileatomd --backend cuda
#                                     and a CLI session, single-element adds through the
#                                     service on both backends (tileatom-bench;
#                                     SERVICE_BENCH=0 skips them); logs under $OUT
#                                     (default /tmp/gpu-out); bulk histograms through the
#                                     service and tileatom-cli hist (HIST_BENCH=0 skips them);
#                                     then the CUDA IPC part below; a summary is printed last.
#   scripts/gpu-run.sh ipc [CARRY]    there: only the CUDA IPC operands: check_cuda_ipc (device
#                                     buffers end to end against tileatomd --backend cuda),
#                                     check_integration's load case on the CUDA backend (a
#                                     handle that does not open), and 2^24 keys from GPU memory
#                                     through the daemon (tileatom-histbench --from device;
#                                     shm and one from host memory) against torch
#                                     (benchmarks/torch-hist-peer.py) in the same run.
# The Python client's GPU check (torch CUDA tensors from several processes, and its bulk
# histogram beside tileatom-histbench) is scripts/gpu-python.sh: after `pack` here, run
# `scripts/gpu-python.sh pack` to add gpu-carry/python/, then there
# `scripts/gpu-python.sh run` (it compiles the extension for that machine's python3).
set -u
mode=${1:-run}
here=$(cd "$(dirname "$0")/.." && pwd)

if [ "$mode" = pack ]; then
	build=${2:-build-gpu}
	cd "$here" || exit 1
	mkdir -p "$build"
	if [ ! -f "$build/Makefile" ]; then
		(cd "$build" && ../configure --with-cuda --disable-shared) || exit 1
	fi
	(cd "$build" && make -j2 tests/check_cuda tests/bench_gpu tests/check_ptx \
		daemon/tileatomd client/tileatom-cli tests/check_integration tests/check_client_cli \
		tests/check_daemon_server benchmarks/tileatom-bench benchmarks/tileatom-histbench \
		tests/check_cuda_ipc tests/check_litmus_multi benchmarks/tileatom-bigtile) || exit 1
	rm -rf gpu-carry
	mkdir -p gpu-carry/rt
	for b in tests/check_cuda tests/bench_gpu daemon/tileatomd client/tileatom-cli \
		tests/check_integration tests/check_client_cli tests/check_daemon_server \
		benchmarks/tileatom-bench benchmarks/tileatom-histbench tests/check_cuda_ipc \
		tests/check_litmus_multi benchmarks/tileatom-bigtile; do
		# a libtool wrapper script would point at this machine: refuse it
		if [ "$(head -c 4 "$build/$b" | od -An -c | tr -d ' ')" != '177ELF' ]; then
			echo "gpu-run.sh: $build/$b is not an ELF binary (libtool wrapper?)" >&2
			exit 1
		fi
		cp "$build/$b" gpu-carry/
	done
	# every shared library the binaries need beyond the C and C++ runtimes (the GPU
	# machine has newer ones of those, and none of the others: libuv, protobuf-c, inih,
	# json-c, libmicrohttpd and what it pulls in, libcrypto, libsubunit)
	for b in gpu-carry/*; do
		[ -f "$b" ] && ldd "$b"
	done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
		grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
		while read -r lib; do
			cp -L "$lib" gpu-carry/rt/ || exit 1
		done || exit 1
	# the scripts that run from the carry (gpu-multi.sh, gpu-loops.sh, ...)
	cp scripts/gpu-*.sh gpu-carry/ || exit 1
	exclude=$(git rev-parse --git-path info/exclude)
	mkdir -p "$(dirname "$exclude")"
	grep -qx '/gpu-carry/' "$exclude" 2>/dev/null || echo '/gpu-carry/' >>"$exclude"
	du -sh gpu-carry
	exit 0
fi

carry=${2:-gpu-carry}
cd "$here" || exit 1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$here/$carry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1

# The CUDA IPC operands: device buffers end to end, then the histogram from GPU memory
# through the daemon against torch in the same run. Sets ipc_rc.
ipc_part() {
	echo "== CUDA IPC operands"
	TILEATOMD="$here/$carry/tileatomd" timeout 240 "$carry/check_cuda_ipc" \
		>"$OUT/check_cuda_ipc.log" 2>&1
	ipc_rc=$?
	echo "check_cuda_ipc: exit $ipc_rc; $(grep -E '^[0-9]+%' "$OUT/check_cuda_ipc.log")"
	grep -E ':[EF]:|skipped' "$OUT/check_cuda_ipc.log" | head -10
	# on a host of several GPUs, again against one daemon serving them all (keys on each GPU
	# into tiles on each)
	if [ "$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -ge 2 ]; then
		TA_TEST_DEVICES=all TILEATOMD="$here/$carry/tileatomd" timeout 300 \
			"$carry/check_cuda_ipc" >"$OUT/check_cuda_ipc-all.log" 2>&1
		rc=$?
		[ $rc -eq 0 ] || ipc_rc=$rc
		echo "check_cuda_ipc (--devices all): exit $rc; $(grep -E '^[0-9]+%' "$OUT/check_cuda_ipc-all.log")"
		grep -E ':[EF]:' "$OUT/check_cuda_ipc-all.log" | head -10
	fi
	isock="$OUT/ipc.sock"
	"$carry/tileatomd" --socket "$isock" --backend cuda --log-level err \
		2>"$OUT/ipc-daemon.log" &
	ipid=$!
	for _ in $(seq 200); do [ -S "$isock" ] && break; sleep 0.05; done
	echo "tileatom-histbench, 2^24 int32 keys, 256 bins (mode keys seconds Gkeys/s; best of ${IPC_REPS:-20}):"
	"$carry/tileatom-histbench" -s "$isock" -n 16777216 -b 256 --reps "${IPC_REPS:-20}" \
		--from device >"$OUT/histbench-device.txt" 2>&1 || ipc_rc=1
	cat "$OUT/histbench-device.txt"
	"$carry/tileatom-histbench" -s "$isock" -n 16777216 -b 256 --reps 5 \
		--modes shm,one >"$OUT/histbench-host.txt" 2>&1 || ipc_rc=1
	cat "$OUT/histbench-host.txt"
	kill -TERM $ipid
	wait $ipid
	echo "tileatomd (ipc bench) exit $?"
	echo "torch in-process (case keys seconds Gkeys/s):"
	python3 benchmarks/torch-hist-peer.py -n 16777216 -b 256 --reps 20 2>&1 |
		tee "$OUT/torch-hist.txt"
}

if [ "$mode" = ipc ]; then
	ipc_part
	echo "== check_integration, case load (device-buffer refusals), backend cuda"
	TA_TEST_BACKEND=cuda TILEATOMD="$here/$carry/tileatomd" TA_TEST_DAEMON="$here/$carry/tileatomd" \
		CK_RUN_CASE=load timeout 240 "$carry/check_integration" >"$OUT/check_integration-load.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || ipc_rc=$rc
	echo "check_integration (load, cuda): exit $rc; $(grep -E '^[0-9]+%' "$OUT/check_integration-load.log")"
	grep -E ':[EF]:' "$OUT/check_integration-load.log" | head -10
	echo "== summary: ipc $ipc_rc"
	exit 0
fi

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv 2>&1 |
	tee "$OUT/device.txt"

echo "== check_cuda (full suite)"
start=$(date +%s)
timeout 300 "$carry/check_cuda" >"$OUT/check_cuda.log" 2>&1
check_rc=$?
echo "check_cuda exit $check_rc in $(($(date +%s) - start)) s"
grep -E '^[0-9]+%|^check_cuda:|^cuda backend:|vectors:|sweep seed|shared large|^diff:|large |cluster windows|huge|sticky' \
	"$OUT/check_cuda.log" | head -40
grep -E ':[EF]:' "$OUT/check_cuda.log" | head -20

echo "== compute-sanitizer memcheck (differential test, 300 requests)"
if command -v compute-sanitizer >/dev/null 2>&1; then
	CK_RUN_CASE=diff TA_DIFF_CASES=300 timeout 120 compute-sanitizer --tool memcheck \
		--error-exitcode 3 "$carry/check_cuda" >"$OUT/memcheck.log" 2>&1
	mc_rc=$?
	echo "memcheck exit $mc_rc"
	tail -4 "$OUT/memcheck.log"
	echo "== compute-sanitizer memcheck (cluster windows)"
	CK_RUN_CASE=cluster timeout 200 compute-sanitizer --tool memcheck \
		--error-exitcode 3 "$carry/check_cuda" >"$OUT/memcheck-cluster.log" 2>&1
	mcc_rc=$?
	echo "memcheck (cluster) exit $mcc_rc"
	tail -4 "$OUT/memcheck-cluster.log"
	[ "$mcc_rc" = 0 ] || mc_rc=$mcc_rc
else
	mc_rc=na
	echo "compute-sanitizer not found"
fi

echo "== torch peers"
python3 tests/bench_torch.py --out "$OUT/torch.txt" 2>&1 | tee "$OUT/torch.log"

echo "== bench_gpu"
timeout 150 "$carry/bench_gpu" --torch "$OUT/torch.txt" >"$OUT/bench.log" 2>&1
bench_rc=$?
cat "$OUT/bench.log"

echo "== the service on the CUDA backend (tileatomd --backend cuda, end-to-end suites)"
# The end-to-end suites start the carried tileatomd with --backend cuda and drive it through
# the client library and the carried tileatom-cli.
export TA_TEST_BACKEND=cuda TILEATOMD="$here/$carry/tileatomd" TA_TEST_DAEMON="$here/$carry/tileatomd"
export TILEATOM_CLI="$here/$carry/tileatom-cli"
"$carry/tileatomd" --list-kernels >"$OUT/kernels.txt" 2>&1
echo "tileatomd --list-kernels: $(($(wc -l <"$OUT/kernels.txt") - 1)) variants"
service_rc=0
for t in check_daemon_server check_integration check_client_cli; do
	timeout 240 "$carry/$t" >"$OUT/$t.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || service_rc=$rc
	echo "$t (backend cuda): exit $rc; $(grep -E '^[0-9]+%' "$OUT/$t.log")"
	grep -E ':[EF]:' "$OUT/$t.log" | head -10
done
sock="$OUT/demo.sock"
"$carry/tileatomd" --socket "$sock" --backend auto --foreground 2>"$OUT/demo-daemon.log" &
dpid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
cli() { "$carry/tileatom-cli" -s "$sock" "$@"; }
{
	cli stats
	cli create hist --dtype int32 --shape 10
	awk 'BEGIN { srand(7); for (i = 0; i < 100000; i++) printf "%.6f\n", rand() }' | cli hist hist --range 0:1
	cli get hist --json
	cli create lock --dtype int32 --shape 1
	cli cas lock 0 0 1 --sem acquire; echo "cas exit $?"
	cli cas lock 0 0 1; echo "cas exit $?"
	cli xchg lock 0 0 --sem release
} 2>&1 | tee "$OUT/demo.txt"
kill -TERM $dpid; wait $dpid; echo "tileatomd exit $?"; head -5 "$OUT/demo-daemon.log"
unset TA_TEST_BACKEND TILEATOMD TA_TEST_DAEMON TILEATOM_CLI

if [ "${SERVICE_BENCH:-1}" = 1 ]; then
	# single-element adds through the service (tileatom-bench -t add, like Redis INCR) on
	# both backends, for the request-path figures of docs/PERFORMANCE.md
	echo "== service throughput (tileatom-bench -t add -r 10000, ${BENCH_SECONDS:-3} s a shape)"
	# the default workers (auto: 4 on cpu, 64 on cuda); cuda also
	# with a batch window of 20 us
	for run in cpu cuda cuda-w20; do
		case $run in
		cpu) be=cpu opts="--workers ${BENCH_WORKERS_CPU:-auto}" ;;
		cuda) be=cuda opts="--workers ${BENCH_WORKERS_CUDA:-auto}" ;;
		*) be=cuda opts="--workers ${BENCH_WORKERS_CUDA:-auto} --batch-window 20" ;;
		esac
		bsock="$OUT/bench-$run.sock"
		# shellcheck disable=SC2086
		"$carry/tileatomd" --socket "$bsock" --backend $be $opts \
			--log-level err 2>"$OUT/bench-daemon-$run.log" &
		bpid=$!
		for _ in $(seq 100); do [ -S "$bsock" ] && break; sleep 0.05; done
		for shape in 1x1 50x1 50x16 200x16; do
			c=${shape%x*}
			p=${shape#*x}
			t0=$(awk '{print $14 + $15}' "/proc/$bpid/stat")
			line=$("$carry/tileatom-bench" -s "$bsock" -t add -r 10000 -c "$c" -P "$p" \
				-d "${BENCH_SECONDS:-3}" --threads "${BENCH_THREADS:-8}" --csv | tail -1)
			t1=$(awk '{print $14 + $15}' "/proc/$bpid/stat")
			echo "backend=$run shape=$shape daemon_cpu_ticks=$((t1 - t0)) $line"
		done
		kill -TERM $bpid
		wait $bpid
	done 2>&1 | tee "$OUT/service-bench.txt"
fi

if [ "${HIST_BENCH:-1}" = 1 ]; then
	# bulk histograms through the service (issue 10): 2^24 int32 keys into 256 bins from the
	# client's shared buffer and from one library call, on both backends; tileatom-cli hist
	# from text and from raw int32 files; the torch peers in the same run
	echo "== bulk histograms (tileatom-histbench -n 16777216 -b 256, tileatom-cli hist)"
	python3 -c 'import numpy as np; k = np.random.default_rng(7).integers(0, 256, 1 << 24, dtype=np.int32); k.tofile("'"$OUT"'/keys.i32"); open("'"$OUT"'/keys.text", "w").write("\n".join(map(str, k.tolist())) + "\n")' ||
		echo "hist bench: making the key files failed (numpy?)"
	for be in cuda cpu; do
		hsock="$OUT/hist-$be.sock"
		"$carry/tileatomd" --socket "$hsock" --backend $be --log-level err \
			2>"$OUT/hist-daemon-$be.log" &
		hpid=$!
		for _ in $(seq 100); do [ -S "$hsock" ] && break; sleep 0.05; done
		"$carry/tileatom-histbench" -s "$hsock" -n 16777216 -b 256 --reps 3 --modes shm,one |
			sed "s/^/backend=$be /"
		"$carry/tileatom-cli" -s "$hsock" create hb --dtype int32 --shape 256 >/dev/null
		for fmt in text i32; do
			f="$OUT/keys.$fmt"
			for rep in 1 2 3; do
				t0=$(date +%s.%N)
				if ! "$carry/tileatom-cli" -s "$hsock" hist hb "$f" --format "$fmt" >/dev/null; then
					echo "backend=$be cli hist --format $fmt run $rep: FAILED"
					continue
				fi
				t1=$(date +%s.%N)
				awk -v a="$t0" -v b="$t1" -v be=$be -v fmt=$fmt -v r=$rep 'BEGIN {
					printf "backend=%s cli hist --format %s run %d: %.3f s, %.1fM numbers/s\n",
						be, fmt, r, b - a, 16777216 / (b - a) / 1e6 }'
			done
		done
		"$carry/tileatom-cli" -s "$hsock" get hb --json | python3 -c 'import json, sys; b = json.load(sys.stdin)["values"]; print("bins after 6 cli runs: sum", sum(b), "expected", 6 * 16777216)'
		kill -TERM $hpid
		wait $hpid
	done 2>&1 | tee "$OUT/hist-bench.txt"
	python3 benchmarks/torch-hist-peer.py 2>&1 | tee -a "$OUT/hist-bench.txt"
	rm -f "$OUT/keys.i32" "$OUT/keys.text"
fi

if [ "${PROFILE:-0}" = 1 ]; then
	# where the time of the two floor kernels goes: their SASS and an Nsight Compute pass
	hist=_ZN2ta8k_sharedILi1ELi1ELi2EEEvNS_5kargsE
	elem=_ZN2ta8k_globalILi1ELi1ELi1EEEvNS_5kargsE
	echo "== SASS (cuobjdump) of the histogram and element-wise kernels"
	for k in $hist $elem; do
		cuobjdump -sass -fun "$k" "$carry/bench_gpu" >"$OUT/sass.tmp" 2>&1
		cat "$OUT/sass.tmp" >>"$OUT/sass.txt"
		echo "$k: $(grep -cE '^ +/\*[0-9a-f]+\*/' "$OUT/sass.tmp") instructions;" \
			"$(grep -oE '(ATOMS|ATOMG|REDG|RED|ATOM)\.[A-Z0-9.]+' "$OUT/sass.tmp" | sort | uniq -c | tr '\n' ' ')"
		rm -f "$OUT/sass.tmp"
	done
	echo "== ncu"
	for k in $hist $elem; do
		timeout 120 ncu --kernel-name-base mangled --kernel-name "$k" --launch-count 1 \
			--section SpeedOfLight --section Occupancy --section WarpStateStats \
			--section MemoryWorkloadAnalysis "$carry/bench_gpu" --reps 1 --log2n 25 \
			>"$OUT/ncu.tmp" 2>&1
		cat "$OUT/ncu.tmp" >>"$OUT/ncu.txt"
		grep -E 'Duration|Throughput|Achieved Occupancy|Registers Per|Stall|Bank|One or More|L2 Hit' \
			"$OUT/ncu.tmp" | head -24
		rm -f "$OUT/ncu.tmp"
	done
fi

ipc_part
echo "== summary: check_cuda $check_rc, memcheck $mc_rc, bench_gpu $bench_rc, service $service_rc, ipc $ipc_rc"
