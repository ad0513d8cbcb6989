"""Where a bulk Tile.hist's time goes on the GPU machine, call by call.

Run there against a CUDA tileatomd, with the package built by scripts/gpu-python.sh on
PYTHONPATH (``python3 python/tests/gpu_percall.py SOCKET``). For 2^10, 2^20 and 2^24 int32
keys in a torch CUDA tensor, 300 rounds of these steps, interleaved on one connection and
a kept 256-bin tile: the library's own tileatom_indexed through ctypes (its own connection
and tile), the extension's op with its operands made once, the whole Tile.hist, and, each
right after a Tile.hist, the Python steps before the op (the key operand, the weight), the
two parts of the key operand (the tensor's attributes, the wait on its stream), that
wait's two parts (torch's raw stream getter, the library's driver query) and, for
comparison, the tensor's DLPack capsule (torch._C._to_dlpack) alone and read by the
extension. Prints the median wall time, the median CPU time of the thread and the best
wall time of each, in microseconds. Each step runs right after the one before it, as in a
program's loop, so the Python steps are timed cold, after the wait of a call.
"""
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
import torch

import tileatom
from gpu_multiproc import ctypes_op


def measure(sock: str, nkeys: int) -> str:
    """One line of figures for nkeys keys."""
    keys = torch.randint(0, 256, (nkeys,), dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    with tileatom.connect(sock, timeout=120) as c:
        for name in ("percall-py", "percall-c"):
            if name in c:
                c.destroy(name)
        h = c.create("percall-py", np.int32, 256)
        _, lib_op = ctypes_op(sock, keys, "percall-c")
        i = tileatom._index(keys, "keys")
        vals = h._values(1, "weights")

        def op() -> Any:
            return h._conn.op(tileatom._INDEXED, h.name, tileatom._ADD, h._region, -1, (i,),
                              True, vals, None, None, None, "relaxed", "gpu", "shared",
                              True, False, None, None)
        dev = keys.get_device()
        raw_of = torch._C._cuda_getCurrentRawStream
        hist = lambda: h.hist(keys)  # noqa: E731
        # each step of the key operand's reading runs just after a Tile.hist (cold)
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("ctypes", lib_op),
            ("op", op),
            ("hist", hist),
            ("index", lambda: tileatom._index(keys, "keys")),
            ("hist", hist),
            ("values", lambda: h._values(1, "weights")),
            ("hist", hist),
            ("attrs", lambda: (keys.is_cuda, keys.dtype, keys.is_contiguous(),
                               keys.get_device(), keys.data_ptr(), keys.shape)),
            ("hist", hist),
            ("stream_wait", lambda: tileatom._core.torch_sync(dev)),
            ("hist", hist),
            ("raw_stream", lambda: raw_of(dev)),
            ("hist", hist),
            ("driver_wait", lambda: tileatom._core.cuda_stream_sync(raw_of(dev))),
            ("hist", hist),
            ("to_dlpack", lambda: torch._C._to_dlpack(keys)),
            ("hist", hist),
            ("dlpack_view", lambda: tileatom._core.dlpack_view(torch._C._to_dlpack(keys))),
        ]
        wall: dict[str, list[float]] = {k: [] for k, _ in steps}
        cpu: dict[str, list[float]] = {k: [] for k, _ in steps}
        for _ in range(300):
            for k, fn in steps:
                t0, c0 = time.perf_counter(), time.thread_time()
                fn()
                cpu[k].append(time.thread_time() - c0)
                wall[k].append(time.perf_counter() - t0)
        h.destroy()
        c.destroy("percall-c")
    return f"{nkeys} keys (us, median wall / median CPU / best wall): " + ", ".join(
        f"{k} {statistics.median(wall[k]) * 1e6:.1f} / {statistics.median(cpu[k]) * 1e6:.1f}"
        f" / {min(wall[k]) * 1e6:.1f}" for k in wall)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: gpu_percall.py SOCKET")
        return 2
    for n in (1 << 10, 1 << 20, 1 << 24):
        print(measure(sys.argv[1], n), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
