#!/usr/bin/env bash
# scripts/demo.sh: the "main job" on a fresh machine. Installs what is missing for building
# and running only (install-deps.sh --demo: no test or fuzzing tools), builds
# tileatom, starts tileatomd on its embedded default (the CPU backend unless a GPU is
# usable) on a private socket, and exercises it with tileatom-cli: a tile, a histogram, a
# compare-and-swap lock word, reading tiles back. Stops the daemon at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --demo
[ -x configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)"

dir=$(mktemp -d)
sock="$dir/tileatomd.sock"
cli() { ./client/tileatom-cli -s "$sock" "$@"; }
./daemon/tileatomd --socket "$sock" --foreground 2>"$dir/tileatomd.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

set -x
cli ping
cli create hist --dtype int32 --shape 10
# 10,000 numbers in [0, 1) from a small generator in integer arithmetic (the same in every
# awk): a histogram with 10 bins over [0, 1].
awk 'BEGIN { x = 7; for (i = 0; i < 10000; i++) { x = (x * 75 + 74) % 65537; printf "%.6f\n", x / 65537 } }' >"$dir/numbers"
cli hist hist "$dir/numbers" --range 0:1
cli get hist
cli create lock --dtype int32 --shape 1
cli cas lock 0 0 1          # take the lock: prints the old value 0, exit 0
cli cas lock 0 0 1 || echo "lock is busy (exit status $?)"
cli xchg lock 0 0           # release it
cli ls
cli info hist
cli get hist --json
cli stats
set +x
echo "tileatomd log:"; cat "$dir/tileatomd.log"
