#!/usr/bin/python3
"""bench_python.py: the Python client's benchmark, with its peers in the same run.

Starts a private tileatomd (CPU backend) and a private redis-server (no persistence, Unix
socket only) in a temporary folder, then for --rounds rounds, alternately:

  adds    pipelined single-element adds returning the old value, from this Python process
          in the issue's form (``p.tile(name).add(1, at=k, return_old=True)``, executed
          every --depth requests) at random keys of a --keyspace int64 tile;
  redis   the same count of pipelined INCRs through redis-py (hiredis parser when
          installed), ``pipeline(transaction=False)``, executed every --depth;
  c-adds  tileatom-bench -c 1 -P DEPTH -t add -e 1 (the C library, one client);
  hist    2^24 (--keys) int32 keys into a 256-bin int32 tile from a numpy array with one
          ``Tile.hist`` call (the library's default path), and from a ``shared_array``,
          the best of --hist-reps calls (default 3) each into a fresh tile;
  c-hist  tileatom-histbench --modes one,shm --reps R (the C library's same two paths,
          the best of as many).

It prints the median of each figure over the rounds, the ratios against the goals of
issue 22, and the CPU time of this process per pipelined add next to tileatom-bench's
(getrusage; their difference is what Python itself costs per request). Every run is
checked: the tile's sum equals the adds, the bins equal numpy.bincount.

Usage: python/bench/bench_python.py [--build DIR] [--rounds R] [--requests N]
         [--depth P] [--keyspace K] [--keys N]
Run from the top build folder (or give --build): it uses daemon/tileatomd,
benchmarks/tileatom-bench, benchmarks/tileatom-histbench and python/ (the staged
package) there; redis-server from PATH.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def cpu_seconds() -> float:
    """User + system CPU time of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def wait_for(path: str, proc: subprocess.Popen, what: str) -> None:
    """Waits (10 s at most) for a server's socket to appear."""
    deadline = time.monotonic() + 10
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"bench_python: {what} did not start")
        time.sleep(0.02)


def bench_adds(tileatom, sock: str, keys: list[int], depth: int, keyspace: int,
               name: str) -> tuple[float, float]:
    """Pipelined adds from Python: (requests/s, CPU seconds per request)."""
    with tileatom.connect(sock) as c:
        t = c.create(name, "int64", keyspace)
        n = len(keys)
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        with c.pipeline() as p:
            for start in range(0, n, depth):
                for k in keys[start:start + depth]:
                    p.tile(name).add(1, at=k, return_old=True)
                p.execute()
        dt, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
        total = int(t.read().sum())
        t.destroy()
    if total != n:
        sys.exit(f"bench_python: the tile sums to {total}, not {n}")
    return n / dt, cpu / n


def bench_redis(redis, rsock: str, names: list[str], depth: int) -> tuple[float, float]:
    """Pipelined INCRs through redis-py: (requests/s, CPU seconds per request)."""
    r = redis.Redis(unix_socket_path=rsock)
    r.flushall()
    n = len(names)
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    for start in range(0, n, depth):
        pipe = r.pipeline(transaction=False)
        for k in names[start:start + depth]:
            pipe.incr(k)
        pipe.execute()
    dt, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    total = sum(int(v) for v in r.mget(sorted(set(names))))
    r.close()
    if total != n:
        sys.exit(f"bench_python: redis counted {total}, not {n}")
    return n / dt, cpu / n


def bench_c_adds(bench: str, sock: str, n: int, depth: int,
                 keyspace: int) -> tuple[float, float]:
    """tileatom-bench with one client: (requests/s, its CPU seconds per request)."""
    out = subprocess.run([bench, "-s", sock, "-c", "1", "-P", str(depth), "-t", "add",
                          "-e", "1", "-r", str(keyspace), "-n", str(n), "--csv"],
                         check=True, capture_output=True, text=True).stdout
    row = next(csv.DictReader(io.StringIO(out)))
    return float(row["rps"]), float(row["gen_cpu_us_per_req"]) * 1e-6


def bench_hist(tileatom, np, sock: str, keys, name: str, reps: int) -> tuple[float, float]:
    """2^24 keys into 256 bins from Python, the best of reps calls, each into a fresh tile:
    (G keys/s default call, from a shared array)."""
    expect = np.bincount(keys, minlength=256)
    figures = []
    with tileatom.connect(sock) as c:
        shared = c.shared_array(keys.shape, np.int32)
        shared[:] = keys
        for source in (keys, shared):
            best = 0.0
            for _ in range(reps):
                h = c.create(name, np.int32, 256)
                t0 = time.perf_counter()
                res = h.hist(source)
                dt = time.perf_counter() - t0
                if res.applied != len(keys) or not (h.read() == expect).all():
                    sys.exit("bench_python: the histogram's bins are wrong")
                h.destroy()
                best = max(best, len(keys) / dt / 1e9)
            figures.append(best)
    return figures[0], figures[1]


def bench_c_hist(histbench: str, sock: str, n: int, reps: int) -> tuple[float, float]:
    """tileatom-histbench modes one and shm, the best of reps each: (G keys/s, G keys/s)."""
    out = subprocess.run([histbench, "-s", sock, "-n", str(n), "-b", "256", "--reps", str(reps),
                          "--modes", "one,shm"], check=True, capture_output=True,
                         text=True).stdout
    got = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] in ("one", "shm"):
            got[f[0]] = float(f[3])
    return got["one"], got["shm"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=".", help="top build folder (default .)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--keyspace", type=int, default=10000)
    ap.add_argument("--keys", type=int, default=1 << 24)
    ap.add_argument("--hist-reps", type=int, default=3,
                    help="histogram calls per path and round, the best counted (default 3)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(build, "python"))
    os.environ["LD_LIBRARY_PATH"] = os.path.join(build, "client", ".libs")
    try:
        import numpy as np
        import redis
        import tileatom
    except ImportError as exc:
        sys.exit(f"bench_python: {exc} (run from the build folder; apt install "
                 "python3-numpy python3-redis python3-hiredis)")
    daemon = os.path.join(build, "daemon", "tileatomd")
    bench = os.path.join(build, "benchmarks", "tileatom-bench")
    histbench = os.path.join(build, "benchmarks", "tileatom-histbench")
    redis_server = shutil.which("redis-server")
    if not redis_server:
        sys.exit("bench_python: redis-server is not installed (apt install redis-server)")

    tmp = tempfile.mkdtemp(prefix="bench-python-")
    sock, rsock = os.path.join(tmp, "ta.sock"), os.path.join(tmp, "redis.sock")
    procs = [
        subprocess.Popen([daemon, "--socket", sock, "--backend", "cpu"],
                         stderr=subprocess.DEVNULL),
        subprocess.Popen([redis_server, "--port", "0", "--unixsocket", rsock, "--save", "",
                          "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL),
    ]
    try:
        wait_for(sock, procs[0], "tileatomd")
        wait_for(rsock, procs[1], "redis-server")
        rng = np.random.default_rng(1)
        keys = rng.integers(0, a.keyspace, a.requests).tolist()
        names = [f"k{k}" for k in keys]
        hkeys = rng.integers(0, 256, a.keys).astype(np.int32)
        rows: dict[str, list[float]] = {}
        for rnd in range(a.rounds):
            figures = {}
            figures["py_adds"], figures["py_cpu"] = bench_adds(
                tileatom, sock, keys, a.depth, a.keyspace, f"bench{rnd}")
            figures["redis_incr"], figures["redis_cpu"] = bench_redis(redis, rsock, names,
                                                                      a.depth)
            figures["c_adds"], figures["c_cpu"] = bench_c_adds(bench, sock, a.requests,
                                                               a.depth, a.keyspace)
            figures["py_hist"], figures["py_hist_shm"] = bench_hist(tileatom, np, sock, hkeys,
                                                                    f"hist{rnd}", a.hist_reps)
            figures["c_hist"], figures["c_hist_shm"] = bench_c_hist(histbench, sock, a.keys,
                                                                   a.hist_reps)
            for k, v in figures.items():
                rows.setdefault(k, []).append(v)
            print(f"round {rnd + 1}: " + ", ".join(
                f"{k} {v * 1e6:.2f} us" if k.endswith("cpu") else f"{k} {v:,.3g}"
                for k, v in figures.items()), flush=True)
        m = {k: statistics.median(v) for k, v in rows.items()}
        print(f"\nmedians of {a.rounds} rounds ({a.requests} adds, depth {a.depth}, "
              f"keyspace {a.keyspace}; {a.keys} hist keys):")
        print(f"  pipelined adds, Python   {m['py_adds']:>12,.0f} req/s  "
              f"(CPU {m['py_cpu'] * 1e6:.2f} us/req)")
        print(f"  redis-py INCR pipelined  {m['redis_incr']:>12,.0f} req/s  "
              f"(CPU {m['redis_cpu'] * 1e6:.2f} us/req)")
        print(f"  tileatom-bench -c 1      {m['c_adds']:>12,.0f} req/s  "
              f"(CPU {m['c_cpu'] * 1e6:.2f} us/req)")
        print(f"  hist from numpy          {m['py_hist']:>12.3f} G keys/s   "
              f"C one: {m['c_hist']:.3f}")
        print(f"  hist from shared_array   {m['py_hist_shm']:>12.3f} G keys/s   "
              f"C shm: {m['c_hist_shm']:.3f}")
        print("goals (issue 22):")
        print(f"  Python / redis-py        {m['py_adds'] / m['redis_incr']:.2f}x  (>= 3)")
        print(f"  Python / tileatom-bench  {m['py_adds'] / m['c_adds']:.2f}x  (>= 0.5)")
        print(f"  hist numpy / C one       {m['py_hist'] / m['c_hist']:.2f}x  (>= 0.9)")
        print(f"  hist shared / C shm      {m['py_hist_shm'] / m['c_hist_shm']:.2f}x  (>= 0.9)")
        print(f"  Python's own CPU per add {(m['py_cpu'] - m['c_cpu']) * 1e6:.2f} us  "
              "(<= 1; this process's minus tileatom-bench's)")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
