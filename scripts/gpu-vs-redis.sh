#!/bin/bash
# scripts/gpu-vs-redis.sh: benchmarks/vs-redis on the GPU machine (16 CPUs), where Redis is
# not installed. Run there from the repository root as
#   bash scripts/gpu-vs-redis.sh CARRY REDIS
# CARRY: the gpu-carry/ folder of `scripts/gpu-run.sh pack` (tileatomd, tileatom-bench, rt/);
# REDIS: a folder holding redis-server and redis-benchmark (Debian 12's binaries, carried
# from the build machine: `cp /usr/bin/redis-check-rdb REDIS/redis-server`, `cp
# /usr/bin/redis-benchmark REDIS/`) and, in REDIS/lib, the shared libraries they need
# that the GPU machine may lack. Both generators get --threads ${THREADS:-8}; each shape runs
# against Redis as shipped (one thread) and then, with IO_THREADS set, against Redis with
# that many I/O threads (--io-threads N --io-threads-do-reads yes). ROUNDS and SHAPES pass
# through. Logs go to $OUT (default /tmp/gpu-out).
set -u
C=$(cd "${1:?usage: gpu-vs-redis.sh CARRY REDIS}" && pwd)
R=$(cd "${2:?usage: gpu-vs-redis.sh CARRY REDIS}" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PATH="$R:$PATH"
export LD_LIBRARY_PATH="$C/rt:$R/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
shapes=${SHAPES:-"1x1:20000 50x1:200000 50x16:2000000 200x16:4000000"}
rounds=${ROUNDS:-2}
threads=${THREADS:-8}
echo "machine: $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
"$here/benchmarks/vs-redis" --rounds "$rounds" --threads "$threads" --shapes "$shapes" \
	--tileatomd "$C/tileatomd" --bench "$C/tileatom-bench" --csv "$OUT/vs-redis.csv" \
	2>&1 | tee "$OUT/vs-redis.txt"
if [ -n "${IO_THREADS:-}" ]; then
	"$here/benchmarks/vs-redis" --rounds "$rounds" --threads "$threads" --shapes "$shapes" \
		--redis-args "--io-threads $IO_THREADS --io-threads-do-reads yes" \
		--tileatomd "$C/tileatomd" --bench "$C/tileatom-bench" \
		--csv "$OUT/vs-redis-io$IO_THREADS.csv" 2>&1 | tee "$OUT/vs-redis-io$IO_THREADS.txt"
fi
