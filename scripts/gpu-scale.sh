#!/bin/bash
# scripts/gpu-scale.sh: why one tileatomd over many cores does less than two daemons (issue
# 24). Run on the GPU machine as `bash CARRY/gpu-scale.sh` from the repository root, CARRY
# being the gpu-carry/ folder of `scripts/gpu-run.sh pack` (which copies this script in).
# Every case drives the same load, GENS (default 2) tileatom-bench generators at once
# (-t add -r 10000 -c 50 -P 16 --threads 8 -d $BENCH_SECONDS), against one daemon or against
# one daemon per generator, and prints one line: the case, the summed adds/s, and over the
# run the daemons' user and system CPU ticks (10 ms), their minor page faults, voluntary
# and involuntary context switches, and the host's TLB shootdown interrupts
# (/proc/interrupts). Cases (ROUNDS, default 2, alternating):
#   one-LOOPS   one daemon, --backend BACKEND (default cpu) --loops LOOPS, for LOOPS in $LOOPS
#               (default "4 8 16")
#   sep         one daemon per generator, --loops SEP_LOOPS (default 8) each
#   one-16-tun  one daemon, --loops 16, with GLIBC_TUNABLES raising malloc's trim and mmap
#               thresholds (no memory handed back to the kernel while it runs)
# Daemon options for every case: $DAEMON_ARGS (e.g. "--devices 2" or "--devices 0,1");
# DAEMON (default CARRY/tileatomd) picks the binary, for an A/B of two builds.
# Logs under $OUT/scale (OUT default /tmp/gpu-out).
set -u
C=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$C/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/gpu-out}
L="$OUT/scale"
mkdir -p "$L"
BACKEND=${BACKEND:-cpu}
SECS=${BENCH_SECONDS:-3}
GENS=${GENS:-2}
DAEMON_ARGS=${DAEMON_ARGS:-}
DAEMON=${DAEMON:-$C/tileatomd}
S=/tmp/ta-scale-$$
mkdir -p "$S"
echo "machine: $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket|NUMA node\(s\))' | tr -s ' ' | paste -sd';' -

tlb() { awk '/TLB/ {for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i} END {print s + 0}' /proc/interrupts; }
# counters PID: "utime stime minflt voluntary involuntary", summed over the threads
counters() {
	local u=0 s=0 f=0 v=0 n=0 t a b
	for t in /proc/"$1"/task/*; do
		read -r a b <<<"$(awk '{print $14, $15}' "$t/stat" 2>/dev/null)"
		u=$((u + ${a:-0}))
		s=$((s + ${b:-0}))
		f=$((f + $(awk '{print $10}' "$t/stat" 2>/dev/null || echo 0)))
		v=$((v + $(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null || echo 0)))
		n=$((n + $(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null || echo 0)))
	done
	echo "$u $s $f $v $n"
}
# start SOCK LOOPS [env...]: a daemon in the background, waited for; sets started
started=
start() {
	local sock=$1 loops=$2
	shift 2
	rm -f "$sock"
	env "$@" "$DAEMON" --socket "$sock" --backend "$BACKEND" --foreground \
		--log-level notice --loops "$loops" $DAEMON_ARGS >>"$L/daemon.log" 2>&1 &
	started=$!
	for _ in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
}
# case LABEL NDAEMONS LOOPS [env...]
one_case() {
	local label=$1 nd=$2 loops=$3
	shift 3
	local pids=() socks=() g
	for g in $(seq 0 $((nd - 1))); do
		socks[g]="$S/$label-$g.sock"
		start "${socks[g]}" "$loops" "$@"
		pids[g]=$started
	done
	local before=() after=() t0 t1
	for g in $(seq 0 $((nd - 1))); do before[g]=$(counters "${pids[g]}"); done
	t0=$(tlb)
	local bp=""
	for g in $(seq 0 $((GENS - 1))); do
		timeout $((SECS + 60)) "$C/tileatom-bench" -s "${socks[$((g % nd))]}" -t add -r 10000 \
			-c 50 -P 16 -d "$SECS" --threads 8 --csv -q >"$L/$label-gen$g.csv" 2>&1 &
		bp="$bp $!"
	done
	wait $bp
	t1=$(tlb)
	for g in $(seq 0 $((nd - 1))); do after[g]=$(counters "${pids[g]}"); done
	for g in $(seq 0 $((nd - 1))); do
		kill -TERM "${pids[g]}" 2>/dev/null
		wait "${pids[g]}" 2>/dev/null
	done
	local rps
	rps=$(for g in $(seq 0 $((GENS - 1))); do tail -1 "$L/$label-gen$g.csv"; done |
		awk -F, '{s += $7} END {printf "%.0f", s}')
	local d
	d=$(for g in $(seq 0 $((nd - 1))); do echo "${before[g]} ${after[g]}"; done |
		awk '{for (i = 1; i <= 5; i++) s[i] += $(i + 5) - $i}
		     END {printf "utime %d stime %d minflt %d vcsw %d ivcsw %d", s[1], s[2], s[3], s[4], s[5]}')
	echo "${TAG:-}$label adds/s $rps $d tlb $((t1 - t0))" | tee -a "$L/scale.txt"
}

for round in $(seq "${ROUNDS:-2}"); do
	echo "# round $round"
	for loops in ${LOOPS:-4 8 16}; do
		one_case "one-$loops" 1 "$loops"
	done
	one_case sep "$GENS" "${SEP_LOOPS:-8}"
	one_case one-16-tun 1 16 \
		GLIBC_TUNABLES=glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432
done
rm -rf "$S"
