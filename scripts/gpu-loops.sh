#!/bin/bash
# scripts/gpu-loops.sh: tileatomd's event loops (--loops) on the GPU machine. Run there as
# `bash CARRY/gpu-loops.sh` where CARRY is the gpu-carry/ folder of `scripts/gpu-run.sh pack`
# (tileatomd, tileatom-bench and rt/) with this script copied in. Each case starts a fresh
# daemon, runs `tileatom-bench -t add -r 10000 -d 3 --threads 8 -c C -P P --csv` against
# it, and prints one CSV line: case, backend, shape, the daemon's exit status, its CPU
# ticks (10 ms) over the run, the bench's CSV row, and the ticks per thread name (ta-loopN:
# the event loops; ta-worker: the executor; tileatomd: the main loop and the backend's
# threads). ROUNDS (default 2) repeats the whole list, alternating the cases; logs under
# $OUT (default /tmp/gpu-out). With CARRY/tileatomd-pre present (an earlier build), each
# round also runs three 50x16 cases with it (cases named pre-...), for an A/B in one call.
# CASES=multi runs instead, on a host of 2 or more GPUs, the CUDA daemon over one GPU and
# over 2 (and 4 where there are 4) with 4, 8, 16 or 32 loops, one generator with --tiles 8
# (tiles round-robin over the daemon's GPUs), at 50x16 and 200x16. CASES=one runs the CUDA
# daemon over GPU 0 with 8 (the auto of one GPU), 12 and 16 loops beside the CPU backend at
# its auto, at 50x16 and 200x16 (whether one GPU's loops or the GPU bound the rate);
# CASES=pk the CUDA daemon over GPU 0 at its defaults with the resident kernel taking
# batches of up to 64 (the default), 128, 256 and 512 chains (TILEATOM_CUDA_PERSISTENT;
# with TILEATOM_CUDA_TRACE=1 the daemon logs show each way's batches and phases);
# CASES=ab the CUDA daemon over GPU 0 at its defaults against CARRY/tileatomd-pre (an
# earlier build), alternating, with adds that return the old value (-t add) and adds that
# do not (-t addnw), at 50x16 and 200x16; CASES=poll the CPU backend, tileatomd-pre, and
# this build with --async-poll 0 and at its defaults (the CUDA daemons over GPU 0).
# BENCH_TEST (default add) sets the other cases' -t; DAEMON_ARGS is added to every
# daemon's arguments.
set -u
C=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$C/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/gpu-out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
S=/tmp/ta-loops-$$.sock
echo "machine: $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket|NUMA node\(s\))' | tr -s ' ' | paste -sd';' -
nvidia-smi -L 2>/dev/null | head -2

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
thread_ticks() {
	for t in /proc/"$1"/task/*; do
		echo "$(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat")"
	done | awk '{a[$1] += $2} END {for (k in a) printf "%s=%d ", k, a[k]}'
}
header_done=0
one() { # label backend clients depth [daemon args...]
	local label=$1 be=$2 c=$3 p=$4
	shift 4
	rm -f "$S"
	"${DAEMON:-$C/tileatomd}" --socket "$S" --backend "$be" --foreground --log-level notice "$@" ${DAEMON_ARGS:-} \
		2>>"$OUT/daemon-$label.log" &
	local pid=$!
	for _ in $(seq 200); do [ -S "$S" ] && break; sleep 0.05; done
	local t0 out t1 th rc
	t0=$(ticks "$pid")
	out=$(timeout 60 "$C/tileatom-bench" -s "$S" -t "${BENCH_TEST:-add}" -r 10000 -c "$c" -P "$p" -d 3 --threads 8 \
		${BENCH_ARGS:-} --csv)
	t1=$(ticks "$pid")
	th=$(thread_ticks "$pid")
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	if [ $header_done = 0 ]; then
		echo "case,backend,shape,rc,ticks,$(echo "$out" | head -1),threads"
		header_done=1
	fi
	echo "$label,$be,${c}x$p,$rc,$((t1 - t0)),$(echo "$out" | tail -1),$th"
}

# The case lists, each called with CLIENTS DEPTH for 50x16 and for 200x16 (shapes_cases:
# the default list, per round).
multi_cases() { # the daemon over 1, 2 (and 4) GPUs with 4-32 loops, --tiles 8
	one d0-L8 cuda "$1" "$2" --devices 0 --loops 8
	one d2-L4 cuda "$1" "$2" --devices 0,1 --loops 4
	one d2-L8 cuda "$1" "$2" --devices 0,1 --loops 8
	one d2-L16 cuda "$1" "$2" --devices 0,1 --loops 16
	if [ "$gpus" -ge 4 ]; then
		one d4-L8 cuda "$1" "$2" --devices 0,1,2,3 --loops 8
		one d4-L16 cuda "$1" "$2" --devices 0,1,2,3 --loops 16
		one d4-L32 cuda "$1" "$2" --devices 0,1,2,3 --loops 32
	fi
}
one_cases() { # one GPU's loops beside the CPU backend
	one cpu-auto cpu "$1" "$2"
	one d0-L8 cuda "$1" "$2" --devices 0 --loops 8
	one d0-L12 cuda "$1" "$2" --devices 0 --loops 12
	one d0-L16 cuda "$1" "$2" --devices 0 --loops 16
}
ab_cases() { # this build against tileatomd-pre, adds with and without old values
	for t in add addnw; do
		BENCH_TEST=$t DAEMON="$C/tileatomd-pre" one "pre-$t" cuda "$1" "$2"
		BENCH_TEST=$t one "new-$t" cuda "$1" "$2"
	done
}
poll_cases() { # loops polling for their completions (--async-poll), against tileatomd-pre
	one cpu-auto cpu "$1" "$2"
	DAEMON="$C/tileatomd-pre" one pre cuda "$1" "$2" --devices 0
	one poll0 cuda "$1" "$2" --devices 0 --async-poll 0
	one poll cuda "$1" "$2" --devices 0
}
pk_cases() { # the resident kernel's largest batch, beside the CPU backend
	one cpu-auto cpu "$1" "$2"
	for pk in 64 128 256 512; do
		TILEATOM_CUDA_PERSISTENT=$pk one "pk$pk" cuda "$1" "$2" --devices 0
	done
}
shapes_cases() { # the CPU backend's loops
	one L1-batch cpu "$1" "$2" --loops 1
	one L1-inline cpu "$1" "$2" --loops 1 --batch-min 0
	one L2 cpu "$1" "$2" --loops 2
	one L4 cpu "$1" "$2" --loops 4
	one L8 cpu "$1" "$2" --loops 8
	one auto cpu "$1" "$2"
}
round_cases() { # the default list's cases outside the two shapes
	one L1-batch cpu 1 1 --loops 1
	one L8 cpu 1 1 --loops 8
	if [ -x "$C/tileatomd-pre" ]; then
		DAEMON="$C/tileatomd-pre" one pre-L1-batch cpu 50 16 --loops 1
		DAEMON="$C/tileatomd-pre" one pre-L4 cpu 50 16 --loops 4
		DAEMON="$C/tileatomd-pre" one pre-L8 cpu 50 16 --loops 8
	fi
	one cuda-L1 cuda 50 16 --loops 1
	one cuda-L4 cuda 50 16 --loops 4
	one cuda-auto cuda 50 16
}

case "${CASES:-}" in
multi)
	export BENCH_ARGS="--tiles 8"
	gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
	list=multi_cases extra=: ;;
one | ab | pk | poll) list=${CASES}_cases extra=: ;;
"") list=shapes_cases extra=round_cases ;;
*)
	echo "gpu-loops.sh: CASES='$CASES' is not multi, one, ab, pk or poll" >&2
	exit 2
	;;
esac
for r in $(seq "$ROUNDS"); do
	echo "# round $r"
	for shape in "50 16" "200 16"; do
		set -- $shape
		$list "$1" "$2"
	done
	$extra
done
