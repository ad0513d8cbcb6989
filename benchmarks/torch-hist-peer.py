#!/usr/bin/env python3
"""benchmarks/torch-hist-peer.py: the in-process peer of tileatom-histbench on a GPU machine.

Histograms N uniform int32 keys into BINS bins with torch.bincount, the keys starting in
pageable host memory, in pinned host memory, or already on the GPU; times the copy and the
bincount together (the best of REPS, CUDA synchronised) and prints one line per case:
"case keys seconds Gkeys/s". Needs torch with CUDA; exits 77 without."""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1 << 24, help="keys (default 2^24)")
    ap.add_argument("-b", type=int, default=256, help="bins (default 256)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch-hist-peer: no torch", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("torch-hist-peer: no CUDA device", file=sys.stderr)
        return 77
    g = torch.Generator().manual_seed(7)
    keys = torch.randint(0, a.b, (a.n,), dtype=torch.int32, generator=g)
    pinned = keys.pin_memory()
    on_gpu = keys.cuda()
    want = torch.bincount(keys.long(), minlength=a.b)
    cases = {
        "pageable": lambda: torch.bincount(keys.cuda(), minlength=a.b),
        "pinned": lambda: torch.bincount(pinned.cuda(non_blocking=True), minlength=a.b),
        "on-gpu": lambda: torch.bincount(on_gpu, minlength=a.b),
    }
    for name, fn in cases.items():
        best = None
        for _ in range(a.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        if not torch.equal(out.cpu(), want):
            print(f"torch-hist-peer: {name}: wrong bins", file=sys.stderr)
            return 1
        print(f"{name} {a.n} {best:.6f} {a.n / best / 1e9:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
