#!/usr/bin/env python3
"""bench_torch.py: the torch peers of tests/bench_gpu.c, timed the same way (CUDA events,
3 warm-up runs, median of --reps runs, data already on the device), written as
"key G-elements-per-second" lines for bench_gpu --torch.

Cases (2^log2n uniform keys, as bench_gpu draws them):
  bincount_256, bincount_65536: torch.bincount(keys, minlength=bins) of int32 keys
  scatter_add_256: int32 tile.scatter_add_(0, int64 index, int32 ones)
  add_int32, add_float32: tile.add_(values) over 2^log2n elements (not atomic: a peer only)
"""
import argparse
import sys

import torch


def time_ms(fn, reps):
    """Median milliseconds of fn() over reps runs after 3 warm-up runs (CUDA events)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    n = len(times)
    return times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="file for the 'key gps' lines")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--log2n", type=int, default=26)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_torch: no CUDA device", file=sys.stderr)
        return 1
    n = 1 << args.log2n
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    rows = []

    keys = torch.randint(0, 256, (n,), device=dev, dtype=torch.int32, generator=gen)
    keys64k = torch.randint(0, 65536, (n,), device=dev, dtype=torch.int32, generator=gen)
    # check the peers once
    assert int(torch.bincount(keys, minlength=256).sum()) == n
    ms = time_ms(lambda: torch.bincount(keys, minlength=256), args.reps)
    rows.append(("bincount_256", n / (ms * 1e-3) / 1e9, ms))
    ms = time_ms(lambda: torch.bincount(keys64k, minlength=65536), args.reps)
    rows.append(("bincount_65536", n / (ms * 1e-3) / 1e9, ms))

    idx = keys.long()
    ones = torch.ones(n, device=dev, dtype=torch.int32)
    tile = torch.zeros(256, device=dev, dtype=torch.int32)
    tile.scatter_add_(0, idx, ones)
    assert int(tile.sum()) == n
    ms = time_ms(lambda: tile.scatter_add_(0, idx, ones), args.reps)
    rows.append(("scatter_add_256", n / (ms * 1e-3) / 1e9, ms))
    del idx

    for name, dt in (("add_int32", torch.int32), ("add_float32", torch.float32)):
        t = torch.zeros(n, device=dev, dtype=dt)
        v = torch.ones(n, device=dev, dtype=dt)
        ms = time_ms(lambda: t.add_(v), args.reps)
        rows.append((name, n / (ms * 1e-3) / 1e9, ms))
        del t, v

    with open(args.out, "w") as f:
        f.write("# torch %s on %s, 2^%d elements, median of %d runs\n"
                % (torch.__version__, torch.cuda.get_device_name(), args.log2n, args.reps))
        for key, gps, ms in rows:
            f.write("%s %.3f\n" % (key, gps))
    print("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name()))
    for key, gps, ms in rows:
        print("  %-18s %10.1f G elem/s  (%.4f ms)" % (key, gps, ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
