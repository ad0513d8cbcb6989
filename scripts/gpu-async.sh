#!/bin/sh
# scripts/gpu-async.sh: on the GPU machine, after scripts/gpu-run.sh pack (from the
# repository root): issue 23's small-request figures in one call, cases alternating over
# ROUNDS rounds, each with a fresh daemon:
#   cuda-async    the CUDA backend at its defaults (several event loops handing small plans
#                 to the batcher without waiting, --async-apply auto)
#   cuda-workers  the CUDA backend with --async-apply 0 (one loop, small requests on the
#                 64 workers: the path before issue 23)
#   cuda-pre      CARRY/tileatomd-pre at its defaults, when present (an older build)
#   cpu           the CPU backend at its defaults
# at 50x16 and 200x16 single-element adds (tileatom-bench -t add, 8 generator threads),
# then one client's add at 1x1 (p50) for cuda-async, cuda-async with busy polling on both
# sides (--busy-poll USEC, TILEATOM_BUSY_POLL_US=USEC), cuda-workers and cpu, and torch's
# in-process one-element add_ + synchronize (p50) when python3 has torch with CUDA.
#   scripts/gpu-async.sh [CARRY]   ROUNDS (3), USEC (50), BENCH_SECONDS (3); logs and the
#                                  CSV lines under $OUT (default /tmp/gpu-out); every
#                                  round's line, then a summary (medians over the rounds,
#                                  the lower middle of an even count) are printed last
set -u
carry=${1:-gpu-carry}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$here/$carry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
usec=${USEC:-50}
secs=${BENCH_SECONDS:-3}
csv="$OUT/async.csv"
: >"$csv"
echo "machine: $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
nvidia-smi -L 2>/dev/null | head -2

# one LABEL DAEMON BACKEND SHAPES CLIENT_POLL [daemon options...]: a fresh daemon, the bench
# at each shape (CxP), one line per shape appended to $csv: label,shape,<bench csv row>
one() {
	label=$1 daemon=$2 backend=$3 shapes=$4 cpoll=$5
	shift 5
	sock="$OUT/async-$label.sock"
	rm -f "$sock"
	timeout 120 "$daemon" --socket "$sock" --backend "$backend" --log-level notice "$@" \
		2>>"$OUT/async-daemon-$label.log" &
	pid=$!
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	for shape in $shapes; do
		c=${shape%x*}
		p=${shape#*x}
		row=$(TILEATOM_BUSY_POLL_US=$cpoll timeout $((secs + 60)) "$carry/tileatom-bench" \
			-s "$sock" -t add -r 10000 -c "$c" -P "$p" -d "$secs" --threads 8 --csv \
			2>>"$OUT/async-bench-$label.log" | tail -1)
		[ -n "$row" ] || row="failed"
		echo "$label,$shape,$row" | tee -a "$csv"
	done
	kill -TERM $pid 2>/dev/null
	wait $pid
	echo "# $label: daemon exit $?" >>"$OUT/async-daemon-$label.log"
}

pre="$carry/tileatomd-pre"
for round in $(seq "${ROUNDS:-3}"); do
	echo "# round $round"
	one cuda-async "$carry/tileatomd" cuda "50x16 200x16" 0
	one cuda-workers "$carry/tileatomd" cuda "50x16 200x16" 0 --async-apply 0
	[ -x "$pre" ] && one cuda-pre "$pre" cuda "50x16 200x16" 0
	[ -x "$pre" ] && one cuda-pre-1 "$pre" cuda 1x1 0
	one cpu "$carry/tileatomd" cpu "50x16 200x16" 0
	one cuda-async-1 "$carry/tileatomd" cuda 1x1 0
	one cuda-async-poll-1 "$carry/tileatomd" cuda 1x1 "$usec" --busy-poll "$usec"
	one cuda-workers-1 "$carry/tileatomd" cuda 1x1 0 --async-apply 0
	one cpu-1 "$carry/tileatomd" cpu 1x1 0
done

# torch's one-element add + synchronize in-process, p50 over 20000 after 2000 warm-up
torch_rc=0
timeout 120 python3 - >"$OUT/async-torch.txt" 2>"$OUT/async-torch.log" <<'PY' || torch_rc=$?
import time
import torch
if not torch.cuda.is_available():
    raise SystemExit("no CUDA device for torch")
t = torch.zeros(1024, dtype=torch.int32, device="cuda")
one = torch.ones(1, dtype=torch.int32, device="cuda")
lat = []
for i in range(22000):
    t0 = time.perf_counter_ns()
    t[5:6].add_(one)
    torch.cuda.synchronize()
    if i >= 2000:
        lat.append(time.perf_counter_ns() - t0)
lat.sort()
print("torch-add-sync-1 p50_us %.1f p99_us %.1f" % (lat[len(lat) // 2] / 1e3,
                                                    lat[len(lat) * 99 // 100] / 1e3))
PY
echo "torch: $(cat "$OUT/async-torch.txt" 2>/dev/null) (exit $torch_rc; log $OUT/async-torch.log)"

# every round's line (label,shape,<bench csv row>), then medians over the rounds: rps
# (column 9) and p50 (column 11); of an even count of rounds, the lower middle one
echo "== every round"
cat "$csv"
echo "== summary (median over rounds, the lower middle of an even count; adds/s, p50 us)"
awk -F, '$3 != "failed" && NF > 10 { k = $1 " " $2; n[k]++; r[k, n[k]] = $9; l[k, n[k]] = $11 }
function med(a, k, c,   i, j, t, v) {
	for (i = 1; i <= c; i++) v[i] = a[k, i]
	for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++)
		if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
	return v[int((c + 1) / 2)]
}
END { for (k in n) printf "%-24s rounds %d  rps %.0f  p50_us %.1f\n", k, n[k], med(r, k, n[k]), med(l, k, n[k]) }' \
	"$csv" | sort
grep -h "torch-add-sync-1" "$OUT/async-torch.txt" 2>/dev/null
