#!/usr/bin/env python3
"""gpu_multiproc.py: the Python client's GPU check, for a machine with CUDA, torch and a
tileatomd --backend cuda (run by scripts/gpu-python.sh; pytest does not collect it: its
name does not start with test_).

1. Several processes at once (--procs, default 4) each make torch CUDA tensors of keys and
   add them into one shared int64 histogram tile through the Python client, with device
   operands only (the CUDA IPC path): Tile.hist(keys), Tile.add(ones, at=keys) with a
   CUDA value array, Tile.scatter_add_(0, keys, ones), and hist() through an object that
   offers only __dlpack__ (kDLCUDA). Each process returns torch.bincount of its own keys;
   the tile must equal their sum exactly (= torch.bincount of all keys, counted once per
   op that added them).
2. A pipeline of fresh CUDA tensors: one process queues hist() and a write of tensors it
   allocates one after the other, each in an allocation new to the connection (which the
   library registers by a round trip, with the earlier responses set aside), and the
   results must come back in order, exact against torch.bincount.
3. With --probe: where a bulk call's time goes (torch's side, the stream wait, a kept or
   new tile, the extension's op alone, and the C library's own call through ctypes from
   this process), the steps also interleaved.
4. A bulk figure: 2^24 (--bulk-keys) int32 keys from one torch CUDA tensor into 256 bins,
   one Tile.hist call on a new tile, --reps times, alternating rep by rep with the C
   library's own tileatom_indexed call on the same tensor (ctypes, from this process, on a
   new tile each time), each checked against torch.bincount; medians and bests of both;
   round by round (--rounds, default 3) beside tileatom-histbench --from device (the C
   library's devptr and device modes: a raw device pointer, and a registered device
   buffer, best of --reps) against the same daemon.

Prints "SKIP: <what is missing>" and exits 0 when torch with CUDA or tileatom cannot be
imported; exits 1 on a wrong count or a failed call; 0 otherwise.

Usage: gpu_multiproc.py --socket SOCK [--procs N] [--batches B] [--batch-keys K]
         [--bins NB] [--bulk-keys N] [--reps R] [--rounds N] [--histbench PATH]
         [--probe]
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import subprocess
import sys
import time
from typing import Any

TILE = "gpu-mp-hist"


class DLPackOnly:
    """A tensor reached only through the DLPack protocol (no __cuda_array_interface__)."""

    def __init__(self, t: Any) -> None:
        self._t = t

    def __dlpack__(self, stream: Any = None) -> Any:
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._t.__dlpack_device__()


def worker(rank: int, a: argparse.Namespace, barrier: Any, results: Any) -> None:
    """One process: its keys into the shared tile; puts (rank, counts list, error)."""
    try:
        import numpy as np
        import torch

        import tileatom
        torch.manual_seed(1000 + rank)
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        counts = torch.zeros(a.bins, dtype=torch.int64, device=dev)
        with tileatom.connect(a.socket, timeout=120) as c:
            t = c.tile(TILE)
            assert t.dtype == np.int64 and t.shape == (a.bins,)
            barrier.wait(timeout=120)
            for b in range(a.batches):
                dtype = torch.int32 if b % 2 else torch.int64
                keys = torch.randint(0, a.bins, (a.batch_keys,), dtype=dtype, device=dev)
                ones = torch.ones(a.batch_keys, dtype=torch.int64, device=dev)
                # the daemon reads them from another process: finish the writes (the
                # package does so itself for torch tensors, not for the __dlpack__ wrapper)
                torch.cuda.synchronize(dev)
                how = b % 4
                if how == 0:
                    res = t.hist(keys)
                    assert res.applied == a.batch_keys and res.skipped == 0, res
                elif how == 1:
                    res = t.add(ones, at=keys)
                    assert res.applied == a.batch_keys and res.skipped == 0, res
                elif how == 2:
                    t.scatter_add_(0, keys.to(torch.int64), ones)
                else:
                    res = t.hist(DLPackOnly(keys))
                    assert res.applied == a.batch_keys and res.skipped == 0, res
                counts += torch.bincount(keys.to(torch.int64), minlength=a.bins)
        results.put((rank, counts.cpu().tolist(), None))
    except BaseException as exc:  # reported by the parent
        results.put((rank, None, f"{type(exc).__name__}: {exc}"))


def multiproc(a: argparse.Namespace, tileatom: Any, np: Any) -> bool:
    """Part 1; True when the tile holds exactly the sum of every process's bincount."""
    with tileatom.connect(a.socket, timeout=120) as c:
        if c.backend != "cuda":
            print(f"gpu_multiproc: the daemon's backend is {c.backend}, not cuda")
            return False
        if TILE in c:
            c.destroy(TILE)
        c.create(TILE, np.int64, (a.bins,))
    ctx = mp.get_context("spawn")  # CUDA in children needs spawn
    barrier = ctx.Barrier(a.procs)
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, a, barrier, results))
             for r in range(a.procs)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    got = []
    for _ in procs:
        try:
            got.append(results.get(timeout=400))
        except Exception:
            print("gpu_multiproc: a process did not report within 400 s")
            break
    for p in procs:
        p.join(timeout=60)
        if p.is_alive():
            p.kill()
    dt = time.perf_counter() - t0
    ok = len(got) == a.procs
    expect = np.zeros(a.bins, np.int64)
    for rank, counts, err in sorted(got, key=lambda g: g[0]):
        if err:
            print(f"gpu_multiproc: process {rank} failed: {err}")
            ok = False
        else:
            expect += np.asarray(counts, np.int64)
    with tileatom.connect(a.socket, timeout=120) as c:
        tile = c.tile(TILE).read()
        c.destroy(TILE)
    total = a.procs * a.batches * a.batch_keys
    if ok and int(expect.sum()) != total:
        print(f"gpu_multiproc: the processes counted {int(expect.sum())} keys, not {total}")
        ok = False
    if ok and not (tile == expect).all():
        bad = np.nonzero(tile != expect)[0]
        print(f"gpu_multiproc: {len(bad)} bins differ, first bin {bad[0]}: tile "
              f"{tile[bad[0]]}, torch.bincount {expect[bad[0]]}")
        ok = False
    print(f"multiproc: {a.procs} processes x {a.batches} batches x {a.batch_keys} keys "
          f"(hist, add at=, scatter_add_, hist via __dlpack__; int32 and int64 keys) into "
          f"{a.bins} int64 bins: {'exact' if ok else 'WRONG'} ({total} keys, {dt:.2f} s "
          "with process start)")
    return ok


def fresh_pipeline(a: argparse.Namespace, tileatom: Any, np: Any, torch: Any) -> bool:
    """Part 2: a pipeline whose CUDA operands are all new allocations (see the top)."""
    n, keys_n = 12, (1 << 20) + 12345  # > 1 MiB: torch gives each its own allocation
    with tileatom.connect(a.socket, timeout=120) as c:
        name = "gpu-fresh-pipeline"
        for n_ in (name, name + "-w"):
            if n_ in c:
                c.destroy(n_)
        h = c.create(name, np.int64, a.bins)
        c.create(name + "-w", np.int64, keys_n)
        held, expect = [], np.zeros(a.bins, np.int64)
        try:
            with c.pipeline() as p:
                for i in range(n):
                    keys = torch.randint(0, a.bins, (keys_n + i,), dtype=torch.int32,
                                         device="cuda")
                    held.append(keys)
                    expect += torch.bincount(keys, minlength=a.bins).cpu().numpy()
                    p.tile(name).hist(keys)
                w = torch.arange(keys_n, dtype=torch.int64, device="cuda")
                held.append(w)
                p.tile(name + "-w").write(w)
                r = p.execute()
        except tileatom.TileatomError as exc:
            print(f"fresh pipeline: FAILED: {type(exc).__name__}: {exc}")
            return False
        got, wrote = h.read(), c.tile(name + "-w").read()
        c.destroy(name)
        c.destroy(name + "-w")
    ok = ([x.applied for x in r[:n]] == [keys_n + i for i in range(n)] and r[n] is None and
          bool((got == expect).all()) and bool((wrote == np.arange(keys_n)).all()))
    print(f"fresh pipeline: {n} hist calls and a write from new CUDA allocations in one "
          f"pipeline: {'exact' if ok else 'WRONG'}")
    return ok


def bulk(a: argparse.Namespace, tileatom: Any, np: Any,
         torch: Any) -> tuple[bool, dict[str, list[float]]]:
    """Part 3: (checked, seconds by side) of --reps rounds of one Tile.hist from a torch
    CUDA tensor on a new tile ("python"), alternating with the C library's own
    tileatom_indexed call ("c": ctypes, from this process, on a connection and a new tile
    of its own: what tileatom-histbench's devptr mode calls) and with the extension's op
    alone, its operands made once before the reps ("op": Tile.hist less its Python steps,
    on the package's connection), all checked against torch.bincount. Each side runs the
    same steps (create, the timed call, read, destroy), and which side goes first rotates
    from rep to rep: the first call on a new tile costs more, and what ran just before (a
    destroy waits for the device) changes it."""
    keys = torch.randint(0, 256, (a.bulk_keys,), dtype=torch.int32, device="cuda")
    expect = torch.bincount(keys.to(torch.int64), minlength=256).cpu().numpy()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {"python": [], "c": [], "op": []}
    with tileatom.connect(a.socket, timeout=120) as c:
        name, lib_name = "gpu-bulk-hist", "gpu-bulk-ctypes"
        for n in (name, lib_name):
            if n in c:
                c.destroy(n)
        lib_new, lib_op = ctypes_op(a.socket, keys, lib_name)
        c.destroy(lib_name)  # (ctypes_op made it)
        index = tileatom._index(keys, "keys")

        def python() -> bool:
            h = c.create(name, np.int32, 256)
            t0 = time.perf_counter()
            res = h.hist(keys)
            times["python"].append(time.perf_counter() - t0)
            got = h.read()
            h.destroy()
            return res.applied == a.bulk_keys and bool((got == expect).all())

        def op() -> bool:
            h = c.create(name, np.int32, 256)
            vals = h._values(1, "weights")
            t0 = time.perf_counter()
            res = h._conn.op(tileatom._INDEXED, h.name, tileatom._ADD, h._region, -1,
                             (index,), True, vals, None, None, None, "relaxed", "gpu",
                             "shared", True, False, None, None)
            times["op"].append(time.perf_counter() - t0)
            got = h.read()
            h.destroy()
            return res.applied == a.bulk_keys and bool((got == expect).all())

        def c_side() -> bool:
            lib_new()
            t0 = time.perf_counter()
            lib_op()
            times["c"].append(time.perf_counter() - t0)
            got = c.tile(lib_name).read()
            c.destroy(lib_name)
            return bool((got == expect).all())

        sides = (python, c_side, op)
        for rep in range(a.reps):
            for side in sides[rep % 3:] + sides[:rep % 3]:
                if not side():
                    print(f"gpu_multiproc: bulk hist wrong ({side.__name__}, rep {rep})")
                    return False, times
    return True, times


class _Array(ctypes.Structure):
    """tileatom_array (client/tileatom.h)."""
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * 4), ("data", ctypes.c_void_p)]


class _Options(ctypes.Structure):
    """tileatom_op_options (client/tileatom.h)."""
    _fields_ = [("sem", ctypes.c_int), ("scope", ctypes.c_int), ("space", ctypes.c_int),
                ("mask", ctypes.c_void_p), ("check_bounds", ctypes.c_bool),
                ("want_old", ctypes.c_bool), ("old_out", ctypes.c_void_p),
                ("old_out_size", ctypes.c_size_t)]


def ctypes_op(address: str, keys: Any, tile: str = "gpu-probe-ctypes") -> tuple[Any, Any]:
    """(new, op): new() makes tile a new 256-bin int32 tile, op() adds keys (a torch CUDA
    tensor of int32) into it with one tileatom_indexed call of libtileatom-client through
    ctypes (space shared: as tileatom-histbench's devptr mode), on a connection of its
    own."""
    lib = ctypes.CDLL("libtileatom-client.so.0")
    err = ctypes.create_string_buffer(512)
    client = ctypes.c_void_p()
    if lib.tileatom_connect(address.encode(), 5000, ctypes.byref(client), err) != 0:
        raise RuntimeError(err.raw[4:].split(b"\0")[0].decode())
    # the driver is asked about operands of the keys' size (as the package and
    # tileatom-histbench do), not about the scalar
    lib.tileatom_set_device_ptr_threshold(client, ctypes.c_size_t(keys.numel() * 4))
    name = tile.encode()
    bins = (ctypes.c_int64 * 1)(256)

    def new() -> None:
        lib.tileatom_destroy(client, name, err)  # (it may not exist)
        if lib.tileatom_create(client, name, 1, 1, bins, None, None, err) != 0:
            raise RuntimeError(err.raw[4:].split(b"\0")[0].decode())
    new()
    one = ctypes.c_int32(1)
    idx = _Array(1, 1, (ctypes.c_int64 * 4)(keys.numel()), keys.data_ptr())
    val = _Array(1, 0, (ctypes.c_int64 * 4)(), ctypes.addressof(one))
    opts = _Options(0, 0, 1, None, True, False, None, 0)
    res = ctypes.create_string_buffer(256)

    def op() -> None:
        if lib.tileatom_indexed(client, name, 1, None, 1, ctypes.byref(idx), True,
                                ctypes.byref(val), None, ctypes.byref(opts), res, err) != 0:
            raise RuntimeError(err.raw[4:].split(b"\0")[0].decode())
    op.keep = (lib, client, one, idx, val, opts, res, err)  # type: ignore[attr-defined]
    return new, op


def probe(a: argparse.Namespace, tileatom: Any, np: Any, torch: Any) -> None:
    """Part 2: where a bulk Tile.hist's time goes, best of --reps in microseconds each:
    torch's __cuda_array_interface__, the stream synchronisation, the whole call on a new
    tile (as part 2) and on a kept one, and the extension's op alone with the operand
    tuple made once (what is left is the C library and the daemon)."""
    keys = torch.randint(0, 256, (a.bulk_keys,), dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    best: dict[str, float] = {}

    def note(name: str, dt: float) -> None:
        best[name] = min(best.get(name, dt), dt)

    with tileatom.connect(a.socket, timeout=120) as c:
        name = "gpu-probe-hist"
        if name in c:
            c.destroy(name)
        h = c.create(name, np.int32, 256)
        for _ in range(a.reps):
            t0 = time.perf_counter()
            _ = keys.__cuda_array_interface__
            t1 = time.perf_counter()
            torch.cuda.current_stream(keys.device).synchronize()
            t2 = time.perf_counter()
            h.hist(keys)
            t3 = time.perf_counter()
            note("cuda_array_interface", t1 - t0)
            note("stream_sync", t2 - t1)
            note("hist_kept_tile", t3 - t2)
        dev = keys.device
        # the driver's own calls on the idle current stream (ctypes: the same overhead for
        # both), beside the library's wait (a query, and a synchronisation if work is queued)
        raw = torch._C._cuda_getCurrentRawStream(dev.index)
        cu = ctypes.CDLL("libcuda.so.1")
        cu.cuStreamQuery.argtypes = [ctypes.c_void_p]
        cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        alternatives = {
            "cu_stream_query": lambda: cu.cuStreamQuery(raw),
            "cu_stream_synchronize": lambda: cu.cuStreamSynchronize(raw),
            "library_stream_sync": lambda: tileatom._core.cuda_stream_sync(raw),
            "attrs": lambda: (keys.data_ptr(), tuple(keys.shape), keys.dtype,
                              keys.is_contiguous()),
            "index_prep": lambda: tileatom._index(keys, "keys"),
            "current_stream_obj": lambda: torch.cuda.current_stream(dev),
            "current_stream_nodev_sync": lambda: torch.cuda.current_stream().synchronize(),
            "device_sync": lambda: torch.cuda.synchronize(dev),
            "device_sync_nodev": lambda: torch.cuda.synchronize(),
        }
        for _ in range(a.reps):
            for k, fn in alternatives.items():
                t0 = time.perf_counter()
                fn()
                note(k, time.perf_counter() - t0)
        i = tileatom._index(keys, "keys")
        vals = h._values(1, "weights")
        for _ in range(a.reps):
            t0 = time.perf_counter()
            h._conn.op(tileatom._INDEXED, h.name, tileatom._ADD, h._region, -1, (i,), True,
                       vals, None, None, None, "relaxed", "gpu", "shared", True, False,
                       None, None)
            note("core_op_alone", time.perf_counter() - t0)
        # the C library's own call from this process through ctypes (no extension), on a
        # connection of its own: is what the extension's op costs over the C figure the
        # extension's, or this process's?
        _, lib_op = ctypes_op(a.socket, keys)
        for _ in range(a.reps):
            t0 = time.perf_counter()
            lib_op()
            note("library_op_ctypes", time.perf_counter() - t0)
        # the same steps interleaved, so that each follows what it follows in a whole call:
        # does a stream synchronisation (or a new operand tuple) make the op after it
        # slower? medians and bests over 5 x reps rounds
        fresh = lambda: (keys.data_ptr(), i[1], tuple(keys.shape), keys)  # noqa: E731
        stream = torch.cuda.current_stream(dev)

        def op(t: Any) -> None:
            h._conn.op(tileatom._INDEXED, h.name, tileatom._ADD, h._region, -1, (t,), True,
                       vals, None, None, None, "relaxed", "gpu", "shared", True, False,
                       None, None)
        steps = {
            "op_same": lambda: op(i),
            "op_fresh_tuple": lambda: op(fresh()),
            "sync_then_op": lambda: (stream.synchronize(), op(i)),
            "index_then_op": lambda: op(tileatom._index(keys, "keys")),
            "library_op_ctypes": lib_op,
            "hist": lambda: h.hist(keys),
        }
        runs: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(5 * a.reps):
            for k, fn in steps.items():
                t0 = time.perf_counter()
                fn()
                runs[k].append(time.perf_counter() - t0)
        print("probe, interleaved (us, median / best of %d): " % (5 * a.reps) +
              ", ".join(f"{k} {sorted(v)[len(v) // 2] * 1e6:.1f} / {min(v) * 1e6:.1f}"
                        for k, v in runs.items()))
        for _ in range(a.reps):
            h2 = c.create(name + "-new", np.int32, 256)
            t0 = time.perf_counter()
            h2.hist(keys)
            note("hist_new_tile", time.perf_counter() - t0)
            h2.destroy()
        h.destroy()
    print("probe (us, best of %d): " % a.reps +
          ", ".join(f"{k} {v * 1e6:.1f}" for k, v in best.items()) +
          f"; {a.bulk_keys} keys")


def histbench(a: argparse.Namespace) -> dict[str, float]:
    """tileatom-histbench --from device against the same daemon: mode -> G keys/s."""
    if not a.histbench:
        return {}
    cmd = [a.histbench, "-s", a.socket, "-n", str(a.bulk_keys), "-b", "256", "--reps",
           str(a.reps), "--from", "device"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(f"gpu_multiproc: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
        return {}
    got = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 4:
            try:
                got[f[0]] = float(f[3])
            except ValueError:
                pass
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True, help="the tileatomd --backend cuda socket")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--batch-keys", type=int, default=1 << 20)
    ap.add_argument("--bins", type=int, default=256)
    ap.add_argument("--bulk-keys", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of the C and the Python bulk figure, alternating")
    ap.add_argument("--probe", action="store_true",
                    help="also time the parts of a bulk Tile.hist (part 3)")
    ap.add_argument("--histbench", help="tileatom-histbench (CUDA build) for the C figure")
    a = ap.parse_args()
    try:
        import numpy as np
        import torch
    except ImportError as exc:
        print(f"SKIP: gpu_multiproc: {exc}")
        return 0
    if not torch.cuda.is_available():
        print("SKIP: gpu_multiproc: torch has no CUDA device here")
        return 0
    try:
        import tileatom
    except ImportError as exc:
        print(f"SKIP: gpu_multiproc: the tileatom package does not import: {exc}")
        return 0
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
          f"tileatom library {tileatom.library_version()}")
    ok = multiproc(a, tileatom, np)
    ok = fresh_pipeline(a, tileatom, np, torch) and ok
    if a.probe:
        probe(a, tileatom, np, torch)
    # the Python and C figures alternate, round after round (calls differ by more than
    # the gap measured): tileatom-histbench (best of --reps), then the bulk part (Python and
    # the library's own call alternating rep by rep)
    gk = a.bulk_keys / 1e9
    runs: dict[str, list[float]] = {"python": [], "c": [], "op": []}
    cs: list[dict[str, float]] = []
    for r in range(a.rounds):
        c = histbench(a)
        bulk_ok, times = bulk(a, tileatom, np, torch)
        ok = ok and bulk_ok and (bool(c) or not a.histbench)
        for k, v in times.items():
            runs[k] += v
        cs.append(c)
        print(f"round {r + 1}: Python best {gk / min(times['python']):.2f} G keys/s; the "
              f"library's call best {gk / min(times['c']):.2f}; the extension's op best "
              f"{gk / min(times['op']):.2f}; tileatom-histbench " +
              ", ".join(f"{m} {v:.2f}" for m, v in c.items() if m in ("devptr", "device")))
    py_all, lib_all, op_all = runs["python"], runs["c"], runs["op"]
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    print(f"bulk: 2^{a.bulk_keys.bit_length() - 1} int32 keys from a torch CUDA tensor into "
          f"256 bins, one Tile.hist on a new tile, {a.rounds} rounds x {a.reps}: median "
          f"{gk / med(py_all):.2f}, best {gk / min(py_all):.2f} G keys/s")
    print(f"  the C library's tileatom_indexed from this process (ctypes), alternating: "
          f"median {gk / med(lib_all):.2f}, best {gk / min(lib_all):.2f} G keys/s; Python / "
          f"C = {med(lib_all) / med(py_all):.2f}x by medians, "
          f"{min(lib_all) / min(py_all):.2f}x by bests")
    print(f"  the extension's op alone (operands made once), alternating: median "
          f"{gk / med(op_all):.2f}, best {gk / min(op_all):.2f} G keys/s; Python / op = "
          f"{med(op_all) / med(py_all):.2f}x, op / C = {med(lib_all) / med(op_all):.2f}x "
          "by medians")
    # each rep's calls ran one after the other: the ratio of each pair (one rate over
    # another) leaves out what the machine did between reps
    for label, num, den in (("Python / C", py_all, lib_all), ("Python / op", py_all, op_all),
                            ("op / C", op_all, lib_all)):
        pairs = sorted(d / n for n, d in zip(num, den))
        q = lambda f: pairs[min(len(pairs) - 1, int(f * len(pairs)))]  # noqa: E731
        print(f"  {label} rep by rep ({len(pairs)} pairs): median {q(0.5):.2f}x, quartiles "
              f"{q(0.25):.2f}x-{q(0.75):.2f}x")
    for mode in ("devptr", "device"):
        got = [c[mode] for c in cs if c.get(mode)]
        if got:
            print(f"  C tileatom-histbench --from device, mode {mode}, best of the rounds: "
                  f"{max(got):.2f} G keys/s; Python's best / C = "
                  f"{gk / min(py_all) / max(got):.2f}x")
    print("gpu_multiproc: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
