#!/bin/bash
# scripts/gpu-multi.sh: one tileatomd over every GPU of a 2- or 4-GPU host (issue 24),
# measured against the same daemon on one GPU and against one daemon per GPU, in one call.
# Run there as `bash gpu-carry/gpu-multi.sh` from the repository root, gpu-carry/ being the
# folder of `sh scripts/gpu-run.sh pack` (which copies this script in). Every step runs
# under `timeout`; logs under $OUT/multi (OUT default /tmp/gpu-out); one summary block last.
#
#  0. nvidia-smi -L and the peer-access matrix (nvidia-smi topo -p2p r); the daemon logs
#     which pairs it enabled (daemon-*.log, "peer access:").
#  a. single-element adds, tileatom-bench -t add -r 10000 -d $BENCH_SECONDS --threads 8 at
#     50x16 and 200x16 with --tiles 2*GPUS (tiles placed round-robin over the daemon's
#     devices): one daemon over all GPUs (all), the same daemon with --devices 0 (one), and
#     one daemon per GPU (--device N) each driven at the same shape at the same time (sep,
#     the sum of their rates); all and one also driven as sep is, by one generator per GPU
#     at once (the same clients and generator threads as sep), and all so driven with
#     generator g's tiles all on GPU g (--placement g: as sep, in one daemon); also one tile
#     sharded over all GPUs (--placement shard, --tiles 1: shard).
#  b. 2^24 int32 keys from GPU 0's memory (CUDA IPC, tileatom-histbench mode device) into 256
#     and 65,536 bins: a tile on GPU 0 against a tile sharded over all GPUs; then the keys
#     split over all GPUs (mode devsplit, one connection per GPU at once) into the sharded
#     tile and into a tile on GPU 0.
#  c. an int32 tile of $BIG_FACTOR (default 1.2) x one GPU's memory sharded over all GPUs:
#     created, filled by one element-wise add, read back in chunks and checked exactly
#     (tileatom-bigtile).
#  d. the end-to-end suites that tests/check_sharded.sh runs on CPU pools (check_integration,
#     check_daemon_server) against tileatomd --devices ALL --placement shard, and
#     check_litmus_multi (message passing between a tile on GPU 0 and one on GPU 1).
#
# PARTS (default abcd) picks the parts to run. Each (a) run also writes the daemon's CPU
# ticks (10 ms) per thread name over the run to $L/ticks.txt. Set TA_MULTI_TRACE=1 and
# TILEATOM_CUDA_TRACE=1 in the environment for the daemons' step timings (in daemon-*.log).
#
# BACKEND=cpu dry-runs everything without a GPU against the CPU backend's --devices
# $CPU_POOLS (default 2) pools: (b) then uses host keys in shared memory (mode shm) and
# skips devsplit, (c) uses $BIG_MB (default 256) MiB. GPUS overrides the GPU count.
set -u
C=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$C/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/gpu-out}
L="$OUT/multi"
mkdir -p "$L"
BACKEND=${BACKEND:-cuda}
SECS=${BENCH_SECONDS:-3}
REPS=${HIST_REPS:-10}
S="/tmp/ta-multi-$$"
mkdir -p "$S"

if [ "$BACKEND" = cuda ]; then
	GPUS=${GPUS:-$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
	ALL=$(seq -s, 0 $((GPUS - 1)))
	ONE="--devices 0"
else
	GPUS=${GPUS:-${CPU_POOLS:-2}}
	ALL=$GPUS
	ONE="--devices 1"
fi
if [ "$GPUS" -lt 2 ]; then
	echo "gpu-multi.sh: $GPUS GPU(s): this needs at least 2" >&2
	exit 1
fi
echo "== devices ($BACKEND, $GPUS, --devices $ALL)"
if [ "$BACKEND" = cuda ]; then
	timeout 30 nvidia-smi -L 2>&1 | tee "$L/devices.txt"
	echo "-- peer access (nvidia-smi topo -p2p r)"
	timeout 30 nvidia-smi topo -p2p r 2>&1 | tee "$L/p2p.txt"
	timeout 30 nvidia-smi topo -m >"$L/topo.txt" 2>&1
fi
echo "machine: $(nproc) CPUs"

# start NAME SOCKET ARGS...: a daemon in the background, waited for; sets pid_NAME.
start() {
	local name=$1 sock=$2
	shift 2
	rm -f "$sock"
	timeout 2400 "$C/tileatomd" --socket "$sock" --backend "$BACKEND" --foreground \
		--log-level notice "$@" 2>>"$L/daemon-$name.log" &
	eval "pid_$name=$!"
	for _ in $(seq 600); do [ -S "$sock" ] && return 0; sleep 0.05; done
	echo "tileatomd $name did not come up (log: $L/daemon-$name.log)" >&2
	tail -5 "$L/daemon-$name.log" >&2
	return 1
}
# stop NAME: SIGTERM and the exit status.
stop() {
	local p
	eval "p=\${pid_$1:-}"
	[ -n "$p" ] || return 0
	eval "pid_$1="
	kill -TERM "$p" 2>/dev/null
	wait "$p"
	echo "tileatomd $1 exit $?" >>"$L/exits.txt"
}
# bench SOCKET CLIENTS DEPTH [TILES]: one CSV row of tileatom-bench -t add (TILES default
# 2 x GPUS, placed round-robin over the daemon's devices).
bench() {
	local sock=$1 c=$2 p=$3 tiles=${4:-$((2 * GPUS))}
	shift 3
	[ $# -gt 0 ] && shift
	timeout $((SECS + 120)) "$C/tileatom-bench" -s "$sock" -t add -r 10000 -d "$SECS" \
		--threads 8 -c "$c" -P "$p" --tiles "$tiles" "$@" --csv -q 2>&1 | tail -1
}
rps() { echo "$1" | awk -F, '{printf "%.0f\n", $7 + 0}'; }
PARTS=${PARTS:-abcd}
# thread_ticks PID: "name=ticks ..." summed per thread name (utime + stime, 10 ms ticks).
thread_ticks() {
	for t in /proc/"$1"/task/*; do
		echo "$(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat")"
	done 2>/dev/null | awk '{a[$1] += $2} END {for (k in a) printf "%s=%d ", k, a[k]}'
}
# bench_ticks NAME SOCKET CLIENTS DEPTH [TILES]: bench, with daemon NAME's ticks per thread
# name before and after appended to $L/ticks.txt.
bench_ticks() {
	local name=$1 p
	shift
	eval "p=\${pid_$name:-}"
	p=$(pgrep -P "$p" tileatomd | head -1) # the daemon under timeout
	local before after
	before=$(thread_ticks "$p")
	bench "$@"
	after=$(thread_ticks "$p")
	echo "$name $2x$3: before: $before; after: $after" >>"$L/ticks.txt"
}

declare -A R
# gens SOCKET CLIENTS DEPTH LABEL [placed]: GPUS generators at once against one daemon
# (each with its own 2 x GPUS tiles, placed round-robin; with "placed", generator g's all
# on GPU g, as against separate daemons); prints the sum of their rates; rows in
# $L/LABEL-N.csv and adds.txt.
gens() {
	local sock=$1 c=$2 p=$3 label=$4 placed=${5:-} pids="" sum=0 g row
	for g in $(seq 0 $((GPUS - 1))); do
		if [ -n "$placed" ]; then
			bench "$sock" "$c" "$p" "" --placement "$g" >"$L/$label-$g.csv" &
		else
			bench "$sock" "$c" "$p" >"$L/$label-$g.csv" &
		fi
		pids="$pids $!"
	done
	wait $pids
	for g in $(seq 0 $((GPUS - 1))); do
		row=$(tail -1 "$L/$label-$g.csv" 2>/dev/null)
		echo "$label-$g: $row" >>"$L/adds.txt"
		sum=$(awk -v a="$sum" -v b="$(rps "$row")" 'BEGIN {printf "%.0f\n", a + b}')
	done
	echo "$sum"
}
SHAPES=("50 16" "200 16")
CONNS="--max-connections 1024" # room for one generator per GPU at 200 clients each
case $PARTS in *a*) ;; *) SHAPES=() ;; esac
echo "== (a) single-element adds (tileatom-bench -t add -r 10000 -d $SECS --threads 8 --tiles $((2 * GPUS)))"
for shape in "${SHAPES[@]}"; do
	set -- $shape
	tag="${1}x$2"
	if start all "$S/all.sock" $CONNS --devices "$ALL"; then
		row=$(bench_ticks all "$S/all.sock" "$1" "$2")
		echo "all $tag: $row" | tee -a "$L/adds.txt"
		R[all_$tag]=$(rps "$row")
		timeout 30 "$C/tileatom-cli" -s "$S/all.sock" stats >"$L/stats-all-$tag.txt" 2>&1
		grep '^device ' "$L/stats-all-$tag.txt"
		stop all
	fi
	# the same daemon driven as the separate daemons are below: one generator per GPU at
	# the shape, all at once (the sum of their rates), so that all three cases have the
	# same clients and generator threads
	if start all "$S/all.sock" $CONNS --devices "$ALL"; then
		R[allg_$tag]=$(gens "$S/all.sock" "$1" "$2" all-gens-$tag)
		stop all
	fi
	if start all "$S/all.sock" $CONNS --devices "$ALL"; then
		R[allp_$tag]=$(gens "$S/all.sock" "$1" "$2" all-placed-$tag placed)
		stop all
	fi
	if start one "$S/one.sock" $CONNS $ONE; then
		R[oneg_$tag]=$(gens "$S/one.sock" "$1" "$2" one-gens-$tag)
		stop one
	fi
	# one tile sharded over every GPU (its keys on all of them)
	if start shard "$S/shard.sock" $CONNS --devices "$ALL" --placement shard; then
		row=$(bench_ticks shard "$S/shard.sock" "$1" "$2" 1)
		echo "shard $tag: $row" | tee -a "$L/adds.txt"
		R[shard_$tag]=$(rps "$row")
		stop shard
	fi
	if start one "$S/one.sock" $CONNS $ONE; then
		row=$(bench_ticks one "$S/one.sock" "$1" "$2")
		echo "one $tag: $row" | tee -a "$L/adds.txt"
		R[one_$tag]=$(rps "$row")
		stop one
	fi
	ok=1
	for g in $(seq 0 $((GPUS - 1))); do
		if [ "$BACKEND" = cuda ]; then
			start "sep$g" "$S/sep$g.sock" $CONNS --device "$g" || ok=0
		else
			start "sep$g" "$S/sep$g.sock" $CONNS || ok=0
		fi
	done
	if [ $ok = 1 ]; then
		bpids=""
		for g in $(seq 0 $((GPUS - 1))); do
			bench "$S/sep$g.sock" "$1" "$2" >"$L/sep$g-$tag.csv" &
			bpids="$bpids $!"
		done
		wait $bpids
	fi
	sum=0
	for g in $(seq 0 $((GPUS - 1))); do
		row=$(tail -1 "$L/sep$g-$tag.csv" 2>/dev/null)
		echo "sep$g $tag: $row" | tee -a "$L/adds.txt"
		sum=$(awk -v a="$sum" -v b="$(rps "$row")" 'BEGIN {printf "%.0f\n", a + b}')
		stop "sep$g"
	done
	R[sep_$tag]=$sum
done

case $PARTS in *b*) ;; *) RUN_B=0 ;; esac
echo "== (b) histograms, 2^24 int32 keys (tileatom-histbench, best of $REPS)"
hist() { # LABEL ARGS...: one histbench line into R[LABEL] (Gkeys/s)
	local label=$1
	shift
	local out
	out=$(timeout 600 "$C/tileatom-histbench" -s "$S/h.sock" -n 16777216 --reps "$REPS" "$@" 2>>"$L/histbench.err")
	local rc=$?
	echo "$label: $out (exit $rc)" | tee -a "$L/hist.txt"
	R[$label]=$(echo "$out" | awk 'NF == 4 {print $4}' | tail -1)
	[ -n "${R[$label]}" ] || R[$label]="failed(rc=$rc)"
}
if [ "${RUN_B:-1}" = 1 ] && start h "$S/h.sock" --devices "$ALL"; then
	for bins in 256 65536; do
		if [ "$BACKEND" = cuda ]; then
			hist "gpu0_keys_tile_on_0_$bins" -b "$bins" --modes device --key-device 0 --placement 0
			hist "gpu0_keys_tile_sharded_$bins" -b "$bins" --modes device --key-device 0 --placement shard
			hist "split_keys_tile_sharded_$bins" -b "$bins" --modes devsplit --split-devices "$ALL" --placement shard
			hist "split_keys_tile_on_0_$bins" -b "$bins" --modes devsplit --split-devices "$ALL" --placement 0
		else
			hist "gpu0_keys_tile_on_0_$bins" -b "$bins" --modes shm --placement 0
			hist "gpu0_keys_tile_sharded_$bins" -b "$bins" --modes shm --placement shard
		fi
	done
	timeout 30 "$C/tileatom-cli" -s "$S/h.sock" stats >"$L/stats-hist.txt" 2>&1
	stop h
fi

echo "== (c) a tile larger than one GPU's memory, sharded over $GPUS"
if [ "$BACKEND" = cuda ]; then
	mib=$(timeout 30 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | head -1)
	big=$(awk -v m="$mib" -v f="${BIG_FACTOR:-1.2}" 'BEGIN {printf "%.0f", m * 1048576 * f}')
else
	big=$((${BIG_MB:-256} << 20))
fi
echo "one device: ${mib:-n/a} MiB; tile: $big bytes"
big_rc=na
# the daemon's limits (max_tile_bytes 1 GiB and max_total_bytes 8 GiB by default) raised above
# the tile
case $PARTS in *c*) ;; *) big_rc=skipped ;; esac
if [ "$big_rc" = na ] && start big "$S/big.sock" --devices "$ALL" --max-tile-bytes $((big + (1 << 30))) \
	--max-total-bytes $((big + (2 << 30))); then
	timeout 1800 "$C/tileatom-bigtile" -s "$S/big.sock" --bytes "$big" --placement shard 2>&1 |
		tee "$L/bigtile.txt"
	big_rc=${PIPESTATUS[0]}
	stop big
fi

echo "== (d) end-to-end suites with --devices $ALL --placement shard"
suites_rc=0
suite_lines=""
SUITES="check_integration check_daemon_server check_litmus_multi"
case $PARTS in *d*) ;; *) SUITES="" ;; esac
for t in $SUITES; do
	if [ ! -x "$C/$t" ]; then
		suite_lines="$suite_lines $t=missing"
		continue
	fi
	TA_TEST_BACKEND=$BACKEND TILEATOMD="$C/tileatomd" TA_TEST_DAEMON="$C/tileatomd" \
		TILEATOM_CLI="$C/tileatom-cli" TA_TEST_DEVICES="$ALL" TA_TEST_PLACEMENT=shard \
		TA_LITMUS_DEVICES=$([ "$BACKEND" = cuda ] && echo 0,1) \
		timeout 600 "$C/$t" >"$L/$t.log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || suites_rc=$rc
	suite_lines="$suite_lines $t=$rc"
	echo "$t: exit $rc; $(grep -E '^[0-9]+%' "$L/$t.log")"
	grep -E ':[EF]:|litmus:' "$L/$t.log" | head -10
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 > 0 && a + 0 > 0) printf "%.2fx", a / b; else print "n/a"}'; }
echo
echo "================ gpu-multi.sh summary ($BACKEND, $GPUS devices: $ALL) ================"
for tag in 50x16 200x16; do
	printf 'adds %-6s all %10s  one %10s  sep(sum) %10s  all/one %s  all/sep %s  (one sharded tile: %s, %s of one)\n' \
		"$tag" "${R[all_$tag]:-n/a}" "${R[one_$tag]:-n/a}" "${R[sep_$tag]:-n/a}" \
		"$(ratio "${R[all_$tag]:-0}" "${R[one_$tag]:-0}")" \
		"$(ratio "${R[all_$tag]:-0}" "${R[sep_$tag]:-0}")" "${R[shard_$tag]:-n/a}" \
		"$(ratio "${R[shard_$tag]:-0}" "${R[one_$tag]:-0}")"
	printf 'adds %-6s with %s generators (as sep): all %10s  one %10s  all/one %s  all/sep %s; each generator on its own GPU: %s (%s of sep)\n' \
		"$tag" "$GPUS" "${R[allg_$tag]:-n/a}" "${R[oneg_$tag]:-n/a}" \
		"$(ratio "${R[allg_$tag]:-0}" "${R[oneg_$tag]:-0}")" \
		"$(ratio "${R[allg_$tag]:-0}" "${R[sep_$tag]:-0}")" "${R[allp_$tag]:-n/a}" \
		"$(ratio "${R[allp_$tag]:-0}" "${R[sep_$tag]:-0}")"
done
for bins in 256 65536; do
	a=${R[gpu0_keys_tile_on_0_$bins]:-n/a} b=${R[gpu0_keys_tile_sharded_$bins]:-n/a}
	c=${R[split_keys_tile_sharded_$bins]:-n/a} d=${R[split_keys_tile_on_0_$bins]:-n/a}
	printf 'hist %5s bins Gkeys/s: gpu0 keys->tile on 0 %s, ->sharded %s (%s); split keys->sharded %s (%s vs tile on 0), ->tile on 0 %s\n' \
		"$bins" "$a" "$b" "$(ratio "$b" "$a")" "$c" "$(ratio "$c" "$a")" "$d"
done
echo "big tile ($big bytes over $GPUS): $(grep -E '^(ok|add|verify)' "$L/bigtile.txt" 2>/dev/null | tr '\n' ';') exit $big_rc"
echo "suites (--placement shard):$suite_lines (last failure: ${suites_rc})"
echo "daemon exits: $(tr '\n' ' ' 2>/dev/null <"$L/exits.txt")"
echo "peer access: $(grep -h 'peer access' "$L"/daemon-all.log 2>/dev/null | head -1)"
echo "logs: $L"
rm -rf "$S"
