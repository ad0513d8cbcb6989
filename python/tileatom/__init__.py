"""tileatom: a Python client of tileatomd, the GPU atomics service.

A daemon holds named, typed n-d arrays ("tiles") in GPU (or CPU) memory and applies atomic
operations to them for many clients at once. This package is a thin layer over the C
library libtileatom-client (its extension ``tileatom._core``): numpy arrays go in and come
out through the buffer protocol, never through Python lists.

    import numpy as np, tileatom
    with tileatom.connect() as c:               # or connect("/path/sock")
        h = c.create("hist", np.int64, (256,))
        h.scatter_add_(0, keys, np.ones(keys.shape, np.int64))
        counts = h.read()

See docs/PYTHON.md for the whole API; ``help(tileatom.Tile)`` lists the operations.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Iterable, Sequence

import numpy as np

from . import _core
from ._errors import (BY_CODE, AlreadyExists, ConnectionLost, InternalError,
                      InvalidArgument, NotFound, OutOfMemory, OutOfRange, PermissionDenied,
                      ProtocolError, ResourceExhausted, StateError, Timeout, TileatomError,
                      Unavailable, Unimplemented)

OpResult = _core.OpResult

__all__ = [
    "connect", "Client", "Tile", "Pipeline", "OpResult", "SharedBuffer", "bfloat16",
    "default_socket", "library_version", "TileatomError", "InvalidArgument", "NotFound",
    "AlreadyExists", "OutOfRange", "ResourceExhausted", "Unimplemented", "Unavailable",
    "PermissionDenied", "InternalError", "ConnectionLost", "Timeout", "ProtocolError",
    "OutOfMemory", "StateError",
]

__version__ = "0.1.0"

_core.set_errors(TileatomError, dict(BY_CODE))

SharedBuffer = _core.SharedBuffer

try:  # a numpy bfloat16 dtype, where one is installed
    from ml_dtypes import bfloat16  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the machine
    bfloat16 = None

#: The connect timeout without ``timeout=``: tileatom-cli's default (5000 ms).
DEFAULT_CONNECT_TIMEOUT = 5.0

# tileatom dtype codes (tileatom.h's tileatom_dtype)
_INT32, _UINT32, _INT64, _UINT64, _FLOAT32, _FLOAT64, _FLOAT16, _BFLOAT16 = range(1, 9)
_CODE_OF = {
    np.dtype(np.int32): _INT32, np.dtype(np.uint32): _UINT32,
    np.dtype(np.int64): _INT64, np.dtype(np.uint64): _UINT64,
    np.dtype(np.float32): _FLOAT32, np.dtype(np.float64): _FLOAT64,
    np.dtype(np.float16): _FLOAT16,
}
if bfloat16 is not None:  # pragma: no cover - depends on the machine
    _CODE_OF[np.dtype(bfloat16)] = _BFLOAT16
# the numpy dtype a tile's elements are held in (bfloat16 without ml_dtypes: uint16 bits)
_STORAGE = {code: dt for dt, code in _CODE_OF.items()}
_STORAGE.setdefault(_BFLOAT16, np.dtype(np.uint16))
_NAME_OF = {_INT32: "int32", _UINT32: "uint32", _INT64: "int64", _UINT64: "uint64",
            _FLOAT32: "float32", _FLOAT64: "float64", _FLOAT16: "float16",
            _BFLOAT16: "bfloat16"}

# op codes (tileatom_op) and request kinds (tileatom_request_kind)
_ADD, _SUB, _MIN, _MAX, _EXCH, _CAS, _AND, _OR, _XOR = range(1, 10)
_ELEMENTWISE, _SCATTER, _INDEXED, _GATHER, _SCATTER_STORE, _LOAD, _STORE = range(10, 17)
_SCALAR_TYPES = (int, float)


def default_socket() -> str:
    """The socket ``connect()`` uses without an address: $TILEATOM_SOCKET when set, else
    the per-user daemon's ($XDG_RUNTIME_DIR/tileatom/tileatomd.sock) or the system
    daemon's (/run/tileatom/tileatomd.sock), as tileatom-cli."""
    return _core.default_socket()


def library_version() -> str:
    """The version of the libtileatom-client this package runs on."""
    return _core.library_version()


def _dtype_code(dtype: Any) -> int:
    """The tileatom code of a dtype given as a numpy dtype, a type, a name or a torch
    dtype."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        return _BFLOAT16
    name = str(dtype)
    if name.startswith("torch."):
        name = name[6:]
        if name == "bfloat16":
            return _BFLOAT16
    try:
        return _CODE_OF[np.dtype(name if name != str(dtype) else dtype)]
    except (KeyError, TypeError) as exc:
        raise TypeError(f"tileatom has no dtype {dtype!r} (int32, uint32, int64, uint64, "
                        "float32, float64, float16, bfloat16)") from exc


def _bf16_bits(a: np.ndarray) -> np.ndarray:
    """float values rounded to bfloat16 bits (nearest even, via float32), as uint16."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


# DLPack device types (DLDeviceType) and element types (DLDataTypeCode, bits) -> dtype code
_KDLCPU, _KDLCUDA, _KDLCUDAHOST = 1, 2, 3
_MASK_BYTES = 9  # the extension's code for a bool/uint8 mask operand
_DL_CODE_OF = {
    (0, 32): _INT32, (1, 32): _UINT32, (0, 64): _INT64, (1, 64): _UINT64,
    (2, 32): _FLOAT32, (2, 64): _FLOAT64, (2, 16): _FLOAT16, (4, 16): _BFLOAT16,
    (0, 16): _BFLOAT16, (1, 16): _BFLOAT16,  # 16-bit integers carry bfloat16 bits
    (6, 8): _MASK_BYTES, (1, 8): _MASK_BYTES,
}


def _dlpack_only(obj: Any) -> bool:
    """Whether obj is reached through DLPack alone: it has ``__dlpack__`` but is no numpy
    array and offers neither the array interface nor the buffer protocol."""
    if isinstance(obj, np.ndarray) or not hasattr(obj, "__dlpack__"):
        return False
    if hasattr(obj, "__array__") or hasattr(obj, "__array_interface__"):
        return False
    try:
        memoryview(obj).release()
    except TypeError:
        return True
    return False


def _dlpack_device(obj: Any) -> tuple[int, int]:
    """(device type, device id) of a DLPack producer: its ``__dlpack_device__()``, asked
    before the capsule (the spec's order); a producer without it is taken as a CPU one."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None:
        return (_KDLCPU, 0)
    kind, ordinal = dev()
    return (int(kind), int(ordinal))


def _dlpack_view(obj: Any, stream: Any) -> Any:
    """obj's tensor consumed from its ``__dlpack__(stream=...)`` capsule (a
    _core.DLPackView, whose freeing calls the producer's deleter)."""
    try:
        capsule = obj.__dlpack__(stream=stream)
    except TypeError:  # producers predating the stream keyword
        if stream is not None:
            raise
        capsule = obj.__dlpack__()
    return _core.dlpack_view(capsule)


def _torch_numpy(obj: Any) -> Any:
    """A host operand as a numpy array without a copy: a CPU torch tensor (bfloat16: its
    int16 bits), or an object offering only ``__dlpack__`` in host memory (through
    _core.dlpack_view and the buffer protocol); anything else unchanged."""
    if type(obj).__module__.startswith("torch") and hasattr(obj, "numpy"):
        t = obj.detach()
        if str(t.dtype) == "torch.bfloat16":
            t = t.view(__import__("torch").int16)
        return t.numpy()
    if _dlpack_only(obj):
        kind, _ = _dlpack_device(obj)
        if kind not in (_KDLCPU, _KDLCUDAHOST):
            raise TypeError(f"a DLPack tensor on device type {kind} where host memory "
                            "(kDLCPU, kDLCUDAHost) is needed")
        return np.asarray(_dlpack_view(obj, None))
    return obj


# torch.cuda.Stream objects by (device index, raw cudaStream_t): making one is most of the
# cost of torch.cuda.current_stream(), so a stream seen before is reused (a few per device);
# only for _torch_stream_wait, the wait when the CUDA driver cannot be asked
_TORCH_STREAMS: dict[tuple[int, int], Any] = {}
_TORCH_STREAMS_MAX = 64


def _torch_stream_wait(index: int) -> None:
    """Waits through torch for the work queued on CUDA device index's current stream (the
    extension's torch_sync asks the driver itself, and calls this when it cannot)."""
    torch = sys.modules["torch"]
    raw_of = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw_of is None:  # no raw stream to key the kept Stream objects by
        torch.cuda.current_stream(index).synchronize()
        return
    key = (index, raw_of(index))
    stream = _TORCH_STREAMS.get(key)
    if stream is None:
        stream = torch.cuda.current_stream(index)
        if len(_TORCH_STREAMS) >= _TORCH_STREAMS_MAX:
            _TORCH_STREAMS.clear()
        _TORCH_STREAMS[key] = stream
    stream.synchronize()


def _sync_torch(obj: Any) -> None:
    """Waits for the work queued on a torch CUDA tensor's current stream (of its device):
    the daemon reads device operands from another process, which no stream order covers.
    (Tensors read by _core.torch_operand wait there; this is for torch objects reached
    through ``__cuda_array_interface__`` or ``__dlpack__``.)"""
    if not type(obj).__module__.startswith("torch") or not _torch_bound():
        return
    _core.torch_sync(obj.get_device())


# Python ints as operand arrays of a tile dtype, by (numpy dtype, int): made (and range
# checked) once, read-only; most calls pass a few values again and again (hist's weight 1,
# add(1)), and making a 0-d array is most of what such an operand costs
_INT_OPERANDS: dict[tuple[Any, int], Any] = {}
_INT_OPERANDS_MAX = 1024

# (lowest, highest) of each integer dtype seen (np.iinfo is slow to make)
_INT_RANGES: dict[Any, tuple[int, int]] = {}


def _int_range(dt: Any) -> tuple[int, int]:
    """The lowest and highest value of the integer numpy dtype dt."""
    got = _INT_RANGES.get(dt)
    if got is None:
        info = np.iinfo(dt)
        got = _INT_RANGES[dt] = (int(info.min), int(info.max))
    return got


def _checked_device(code: int | None, got: int | None, dt: Any, shape: tuple[int, ...],
                    strides: Any, itemsize: int, what: str) -> None:
    """Raises unless a device array's dtype fits and its strides (in bytes, or None) are
    C-contiguous."""
    if got is None or (code is not None and got != code):
        raise TypeError(f"{what}: a CUDA array of dtype {dt} where tileatom needs "
                        f"{_NAME_OF.get(code, 'an index or mask dtype')}")
    if strides is not None:
        expect = []
        step = itemsize
        for n in reversed(shape):
            expect.append(step)
            step *= n
        if tuple(reversed(expect)) != tuple(strides) and math.prod(shape) > 1:
            raise ValueError(f"{what}: a CUDA array must be C-contiguous")


# torch dtype names -> codes, as __cuda_array_interface__ would map them (16-bit integers
# carry bfloat16 bits; bool and uint8 are mask bytes)
_TORCH_DTYPE_CODES = {"int32": _INT32, "uint32": _UINT32, "int64": _INT64, "uint64": _UINT64,
                      "float32": _FLOAT32, "float64": _FLOAT64, "float16": _FLOAT16,
                      "bfloat16": _BFLOAT16, "int16": _BFLOAT16, "uint16": _BFLOAT16,
                      "bool": _MASK_BYTES, "uint8": _MASK_BYTES}
# torch dtype -> code, made when torch is bound (None before)
_TORCH_CODES: dict[Any, int] | None = None


def _torch_bound() -> bool:
    """Whether torch is bound into the extension's reader of its CUDA tensors
    (_core.torch_operand); binds it when torch has been imported since. tileatom never
    imports torch itself, so that it imports and works without it."""
    global _TORCH_CODES
    if _TORCH_CODES is not None:
        return True
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "Tensor") or not hasattr(torch, "_C"):
        return False  # not imported (or still importing)
    codes = {getattr(torch, n): c for n, c in _TORCH_DTYPE_CODES.items() if hasattr(torch, n)}
    # torch's C-level getters of a device's current raw stream (absent in some builds: the
    # wait then goes through torch) and of the thread's current device
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    current = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    _core.torch_bind(torch.Tensor, codes, raw, current, _torch_check, _torch_stream_wait)
    _TORCH_CODES = codes
    return True


def _torch_check(obj: Any, code: int | None, what: str) -> None:
    """Raises, naming what, unless torch CUDA tensor obj fits an operand of dtype code (any
    when None): a tileatom dtype, C-contiguous (or of one element). Called by
    _core.torch_operand when its quick test fails."""
    itemsize = obj.element_size()
    strides = tuple(n * itemsize for n in obj.stride())
    _checked_device(code, (_TORCH_CODES or {}).get(obj.dtype), obj.dtype, tuple(obj.shape),
                    strides, itemsize, what)


def _device_array(obj: Any, code: int | None, what: str) -> tuple | None:
    """An object on a CUDA device as the extension's (pointer, dtype code, shape[, owner])
    tuple: a torch CUDA tensor through the extension's reader (_core.torch_operand), else
    through ``__cuda_array_interface__``, else through ``__dlpack__`` when
    ``__dlpack_device__`` says kDLCUDA (the owner then keeps the consumed tensor alive);
    None for anything else (at once for a numpy array)."""
    if type(obj) is np.ndarray:
        return None
    if _TORCH_CODES is not None or _torch_bound():
        dev = _core.torch_operand(obj, code, what)
        if dev is not None:
            return dev
    try:
        cai = obj.__cuda_array_interface__
    except (AttributeError, RuntimeError):
        cai = None
    if cai is not None:
        shape = tuple(int(n) for n in cai["shape"])
        dt = np.dtype(cai["typestr"])
        got = _CODE_OF.get(dt)
        if dt == np.dtype(np.uint16) or dt == np.dtype(np.int16):
            got = _BFLOAT16
        if dt.kind == "b" or dt == np.dtype(np.uint8):
            got = _MASK_BYTES
        _checked_device(code, got, dt, shape, cai.get("strides"), dt.itemsize, what)
        _sync_torch(obj)
        return (int(cai["data"][0]), got, shape, obj)
    if isinstance(obj, np.ndarray) or not hasattr(obj, "__dlpack__"):
        return None
    kind, ordinal = _dlpack_device(obj)
    if kind != _KDLCUDA:
        return None
    _sync_torch(obj)
    # stream=None: the producer makes the data safe on the legacy default stream (the
    # spec's CUDA default); the caller finishes other streams' writes before the request.
    # Some producers (torch) export only while their device is the current one: with torch
    # loaded, the capsule is asked for with the producer's device made current.
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        with torch.cuda.device(ordinal):
            view = _dlpack_view(obj, None)
    else:
        view = _dlpack_view(obj, None)
    shape = tuple(view.shape)
    dcode, bits, _ = view.dtype
    strides = view.strides
    itemsize = bits // 8
    _checked_device(code, _DL_CODE_OF.get((dcode, bits)), f"DLPack type {dcode}/{bits}",
                    shape, None if strides is None else tuple(x * itemsize for x in strides),
                    itemsize, what)
    return (view.data, _DL_CODE_OF[(dcode, bits)], shape, view)


def _index(obj: Any, what: str = "index") -> Any:
    """An index operand: an int32 or int64 C-contiguous array (or a CUDA array)."""
    dev = _device_array(obj, None, what)
    if dev is not None:
        if dev[1] not in (_INT32, _INT64):
            raise TypeError(f"{what} must hold int32 or int64 indices")
        return dev
    a = np.asarray(_torch_numpy(obj))
    if a.dtype.kind not in "iu":
        if a.size == 0:
            a = a.astype(np.int64)
        else:
            raise TypeError(f"{what} must hold integers, not {a.dtype}")
    if a.dtype != np.int32 and a.dtype != np.int64:
        a = a.astype(np.int64)
    return np.ascontiguousarray(a)


def _mask(obj: Any) -> Any:
    """A mask operand: a bool C-contiguous array (or a CUDA array), or None."""
    if obj is None:
        return None
    dev = _device_array(obj, None, "mask")
    if dev is not None:
        return dev
    return np.ascontiguousarray(np.asarray(_torch_numpy(obj)).astype(np.bool_, copy=False))


def _region_of(key: Any, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(origin, shape) of a numpy-style key of slices (step 1) and ints within shape; an int
    selects an extent-1 box (the axis stays)."""
    if not isinstance(key, tuple):
        key = (key,)
    if len(key) > len(shape):
        raise IndexError(f"{len(key)} indices for a tile of rank {len(shape)}")
    origin, extent = [], []
    for axis, n in enumerate(shape):
        k = key[axis] if axis < len(key) else slice(None)
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step != 1:
                raise IndexError("tile regions take slices of step 1")
            origin.append(start)
            extent.append(max(0, stop - start))
        else:
            i = int(k)
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError(f"index {int(k)} is out of range for axis {axis} of size {n}")
            origin.append(i)
            extent.append(1)
    return tuple(origin), tuple(extent)


class Tile(_core.TileBase):
    """A tile of the daemon (or a box of one: ``tile[2:5, :]``), as seen by one client;
    ``name`` is its name.

    Obtained from ``Client.create()`` or ``Client.tile()``; inside a pipeline from
    ``Pipeline.tile()`` (whose operations are queued: their results come from
    ``Pipeline.execute()``).

    Atomic operations take, besides their operands:

    * ``at``: where. None: every element of the tile (or of the box), element-wise with
      ``value`` (a scalar broadcasts). An int or an integer array: row-major flat offsets.
      A tuple of one integer array per axis: coordinates, broadcast together. Duplicates
      all apply, atomically.
    * ``mask``: a bool array broadcast to the elements; masked-off elements are not touched.
    * ``sem``: "relaxed" (default), "acquire", "release" or "acq_rel".
    * ``scope``: "gpu" (default), "cta", "cluster" or "sys".
    * ``space``: "global" (default) or "shared" (per-block accumulation first).
    * ``check_bounds``: True (default) skips and counts out-of-range elements; False fails
      the whole request with OutOfRange. (A single element given as an int ``at`` outside
      the tile always raises OutOfRange.)
    * ``return_old``: return the values before the operation (a numpy array of the
      elements' shape; a numpy scalar for an int ``at``) instead of ``OpResult(applied,
      skipped)``. ``out`` may name the array to fill (e.g. a ``Client.shared_array``).

    Values are converted to the tile's dtype as torch does: ints into float tiles, but
    never floats into integer tiles (TypeError).
    """

    # name, _conn, _code, _region and _submit are the C fields of _core.TileBase
    __slots__ = ("_client", "dtype", "shape", "private")

    def __init__(self, client: "Client", info: tuple, region: tuple | None = None,
                 submit: bool = False) -> None:
        self._client = client
        self._conn = client._conn
        self.name = info[0]
        self._code = info[1]
        #: the numpy dtype of its elements (bfloat16 without ml_dtypes: uint16 bits)
        self.dtype: np.dtype = _STORAGE[info[1]]
        self._region = region
        #: the shape of the tile, or of the box for a view ``tile[...]``
        self.shape: tuple[int, ...] = tuple(region[1]) if region else tuple(info[2])
        #: whether the tile is private to its creator
        self.private: bool = bool(info[4])
        self._submit = submit

    # ---- description -----------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        """The rank."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Elements in the tile (or the box)."""
        return math.prod(self.shape)

    @property
    def dtype_name(self) -> str:
        """The tileatom dtype name ("int32", ..., "bfloat16")."""
        return _NAME_OF[self._code]

    @property
    def region(self) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """(origin, shape) of the box this view covers; None for the whole tile."""
        return self._region

    def __repr__(self) -> str:
        box = f", region={self._region}" if self._region else ""
        return f"<tileatom.Tile {self.name!r} {self.dtype_name}{list(self.shape)}{box}>"

    def __getitem__(self, key: Any) -> "Tile":
        """A view of a box of the tile: ``tile[2:5]``, ``tile[0, 1:3]`` (slices of step
        1; an int keeps its axis with extent 1). Operations on the view address the box:
        element-wise over it, or with ``at`` relative to its origin."""
        origin, extent = _region_of(key, self.shape)
        if self._region:
            origin = tuple(o + b for o, b in zip(origin, self._region[0]))
        view = Tile.__new__(Tile)
        for field in Tile.__slots__ + ("_conn", "name", "_code", "_submit"):
            setattr(view, field, getattr(self, field))
        view._region = (origin, extent)
        view.shape = extent
        return view

    def __array__(self, dtype: Any = None) -> np.ndarray:
        a = self.read()
        return a if dtype is None else a.astype(dtype)

    # ---- operand helpers -------------------------------------------------------------------

    def _values(self, value: Any, what: str = "value") -> Any:
        """value as an operand of the tile's dtype (a C-contiguous array or a CUDA array)."""
        dt = self.dtype
        if isinstance(value, _SCALAR_TYPES) or isinstance(value, bool):
            # an int met before for this dtype: its array, made and checked then (floats
            # are not kept: -0.0 and 0.0 are one key)
            key = (dt, value) if type(value) is int else None
            if key is not None:
                kept = _INT_OPERANDS.get(key)
                if kept is not None:
                    return kept
            if isinstance(value, float) and dt.kind in "iu":
                raise TypeError(f"a float {what} for a {self.dtype_name} tile (tileatom, "
                                "as torch, does not truncate)")
            if self._code == _BFLOAT16 and bfloat16 is None:
                arr = _bf16_bits(np.asarray(float(value)))
            else:
                if dt.kind in "iu":
                    low, high = _int_range(dt)
                    if not low <= value <= high:
                        raise OverflowError(f"{what} {value} is out of range for a "
                                            f"{self.dtype_name} tile")
                arr = np.array(value, dtype=dt)
            if key is not None:
                arr.flags.writeable = False  # shared by every later use
                if len(_INT_OPERANDS) >= _INT_OPERANDS_MAX:
                    _INT_OPERANDS.clear()
                _INT_OPERANDS[key] = arr
            return arr
        dev = _device_array(value, self._code, what)
        if dev is not None:
            return dev
        a = np.asarray(_torch_numpy(value))
        if a.dtype != dt:
            if self._code == _BFLOAT16 and bfloat16 is None:
                if a.dtype.kind in "fiu" and a.dtype not in (np.uint16, np.int16):
                    return _bf16_bits(a)
                return np.ascontiguousarray(a.view(np.uint16))
            if a.dtype.kind == "f" and dt.kind in "iu":
                if isinstance(value, (list, tuple)):  # e.g. [np.uint64(1), 2] is float64
                    exact = np.asarray(value, dtype=dt)
                    if np.array_equal(exact, a):
                        return np.ascontiguousarray(exact)
                raise TypeError(f"{what} of dtype {a.dtype} for a {self.dtype_name} tile "
                                "(tileatom, as torch, does not truncate floats)")
            a = a.astype(dt)
        return np.ascontiguousarray(a)

    def _out(self, out: Any, shape: tuple[int, ...], what: str = "out") -> Any:
        """The array receiving values of shape: out checked, or a new one."""
        if out is None:
            return np.empty(shape, dtype=self.dtype)
        dev = _device_array(out, self._code, what)
        if dev is not None:
            if tuple(dev[2]) != tuple(shape):
                raise ValueError(f"{what} has shape {tuple(dev[2])}, expected {shape}")
            return dev
        if not isinstance(out, np.ndarray):
            out = _torch_numpy(out)
            if not isinstance(out, np.ndarray):
                raise TypeError(f"{what} must be a numpy array")
        if out.shape != tuple(shape) or out.dtype != self.dtype:
            raise ValueError(f"{what} must be a {self.dtype}{list(shape)} array, not "
                             f"{out.dtype}{list(out.shape)}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError(f"{what} must be C-contiguous and writeable")
        return out

    def _where(self, at: Any) -> tuple[tuple | None, bool, tuple[int, ...]]:
        """(indices, flat, element shape) of an ``at``."""
        if at is None:
            return None, False, self.shape
        if isinstance(at, tuple):
            if len(at) != self.ndim:
                raise ValueError(f"at= has {len(at)} index arrays for a tile of rank "
                                 f"{self.ndim}")
            idx = tuple(_index(a, "at") for a in at)
            shape = np.broadcast_shapes(*(i[2] if isinstance(i, tuple) else i.shape
                                          for i in idx))
            return idx, False, tuple(shape)
        i = _index(at, "at")
        return (i,), True, tuple(i[2] if isinstance(i, tuple) else i.shape)

    def _finish(self, res: Any, old: Any, return_old: bool, scalar: bool) -> Any:
        """What a synchronous op returns: the old values or the OpResult."""
        if self._submit:
            return None
        if return_old:
            if scalar and isinstance(old, np.ndarray) and old.ndim == 0:
                return old[()]
            return old
        return res

    def _rmw(self, op: int, value: Any, at: Any, expected: Any, mask: Any, sem: Any,
             scope: Any, space: Any, check_bounds: bool, return_old: bool, out: Any) -> Any:
        """The general path of the read-modify-write ops."""
        if op == _CAS:
            return_old = True
        idx, flat, elem = self._where(at)
        vals = self._values(value)
        cmp = self._values(expected, "expected") if op == _CAS else None
        old = self._out(out, elem) if return_old else None
        kind = _ELEMENTWISE if idx is None else _INDEXED
        res = self._conn.op(kind, self.name, op, self._region, -1, idx, flat, vals, cmp, None,
                            _mask(mask), sem, scope, space, check_bounds, return_old, old,
                            self._submit)
        return self._finish(res, old, return_old, isinstance(at, int))

    # ---- atomic read-modify-write ops ------------------------------------------------------
    # add, sub, min, max, exch, and_, or_, xor and cas are methods of _core.TileBase (C):
    # their single-element calls go straight to the library, the rest come to _rmw above.

    # ---- torch's in-place scatter family ---------------------------------------------------

    def _scatter(self, op: int, dim: int, index: Any, src: Any, mask: Any, sem: Any,
                 scope: Any, space: Any, check_bounds: bool, return_old: bool,
                 out: Any) -> Any:
        if not -self.ndim <= dim < self.ndim:
            raise IndexError(f"dim {dim} is out of range for a tile of rank {self.ndim}")
        dim %= self.ndim
        idx = _index(index)
        ishape = tuple(idx[2] if isinstance(idx, tuple) else idx.shape)
        vals = self._values(src, "src")
        if isinstance(vals, np.ndarray) and vals.ndim == len(ishape) and vals.shape != ishape:
            # torch uses the first index.shape elements of a larger src
            if any(v < i for v, i in zip(vals.shape, ishape)):
                raise ValueError(f"src of shape {vals.shape} is smaller than index "
                                 f"{ishape}")
            vals = np.ascontiguousarray(vals[tuple(slice(0, n) for n in ishape)])
        old = self._out(out, ishape) if return_old else None
        self._conn.op(_SCATTER, self.name, op, self._region, dim, (idx,), False, vals,
                      None, None, _mask(mask), sem, scope, space, check_bounds,
                      return_old, old, self._submit)
        if self._submit:
            return None
        return old if return_old else self

    def scatter_add_(self, dim: int, index: Any, src: Any, *, mask: Any = None,
                     sem: str = "relaxed", scope: str = "gpu", space: str = "global",
                     check_bounds: bool = True, return_old: bool = False,
                     out: Any = None) -> Any:
        """torch.Tensor.scatter_add_: for each element e of index, the tile element whose
        coordinate along ``dim`` is index[e] (and e's own along the other axes) += src[e],
        atomically. Returns self (torch's rule), or the old values with return_old=True."""
        return self._scatter(_ADD, dim, index, src, mask, sem, scope, space, check_bounds,
                             return_old, out)

    def scatter_reduce_(self, dim: int, index: Any, src: Any, reduce: str, *,
                        include_self: bool = True, mask: Any = None, sem: str = "relaxed",
                        scope: str = "gpu", space: str = "global", check_bounds: bool = True,
                        return_old: bool = False, out: Any = None) -> Any:
        """torch.Tensor.scatter_reduce_ with reduce "sum", "amax" or "amin" (and
        include_self=True, the only form an atomic can do). Returns self."""
        ops = {"sum": _ADD, "amax": _MAX, "amin": _MIN}
        if reduce not in ops:
            raise ValueError(f"reduce must be one of {sorted(ops)}, not {reduce!r}")
        if not include_self:
            raise ValueError("include_self=False cannot be done atomically in place")
        return self._scatter(ops[reduce], dim, index, src, mask, sem, scope, space,
                             check_bounds, return_old, out)

    def index_add_(self, dim: int, index: Any, source: Any, *, alpha: Any = 1,
                   mask: Any = None, sem: str = "relaxed", scope: str = "gpu",
                   space: str = "global", check_bounds: bool = True,
                   return_old: bool = False, out: Any = None) -> Any:
        """torch.Tensor.index_add_: the slice index[i] of the tile along ``dim`` +=
        alpha * source's slice i (source has the tile's shape with index's length along
        dim), atomically. Returns self, or the old values (source's shape)."""
        if not -self.ndim <= dim < self.ndim:
            raise IndexError(f"dim {dim} is out of range for a tile of rank {self.ndim}")
        dim %= self.ndim
        idx = _index(index)
        if isinstance(idx, tuple) or idx.ndim != 1:
            raise ValueError("index_add_ takes a 1-D host index")
        coords = []
        for axis, n in enumerate(self.shape):
            shape = [1] * self.ndim
            if axis == dim:
                shape[axis] = idx.shape[0]
                coords.append(np.ascontiguousarray(idx.reshape(shape)))
            else:
                shape[axis] = n
                coords.append(np.arange(n, dtype=np.int64).reshape(shape))
        elem = tuple(idx.shape[0] if a == dim else n for a, n in enumerate(self.shape))
        if isinstance(alpha, bool) or alpha != 1:
            source = np.asarray(_torch_numpy(source)) * alpha
        vals = self._values(source, "source")
        old = self._out(out, elem) if return_old else None
        self._conn.op(_INDEXED, self.name, _ADD, self._region, -1, tuple(coords), False, vals,
                      None, None, _mask(mask), sem, scope, space, check_bounds, return_old,
                      old, self._submit)
        if self._submit:
            return None
        return old if return_old else self

    def _index_tuple(self, indices: Sequence[Any]) -> tuple[tuple, tuple[int, ...]]:
        """torch advanced indexing by a tuple of index arrays for the leading axes: the
        index arrays of every axis (the rest spanned whole) and the element shape."""
        if not isinstance(indices, (tuple, list)):
            indices = (indices,)
        if not 1 <= len(indices) <= self.ndim:
            raise ValueError(f"{len(indices)} index arrays for a tile of rank {self.ndim}")
        idx = [_index(i, "indices") for i in indices]
        if any(isinstance(i, tuple) for i in idx):
            raise ValueError("index_put_ takes host index arrays")
        lead = np.broadcast_shapes(*(i.shape for i in idx))
        tail = self.shape[len(idx):]
        coords = [np.ascontiguousarray(i.reshape(i.shape + (1,) * len(tail))) for i in idx]
        for k, n in enumerate(tail):
            shape = [1] * (len(lead) + len(tail))
            shape[len(lead) + k] = n
            coords.append(np.arange(n, dtype=np.int64).reshape(shape))
        if len(lead) + len(tail) > _core.MAX_RANK:
            raise ValueError("the indexed elements have a rank above 4")
        return tuple(coords), tuple(lead) + tuple(tail)

    def index_put_(self, indices: Sequence[Any], values: Any, accumulate: bool = False, *,
                   mask: Any = None, sem: str = "relaxed", scope: str = "gpu",
                   space: str = "global", check_bounds: bool = True,
                   return_old: bool = False, out: Any = None) -> Any:
        """torch.Tensor.index_put_: tile[indices] = values, or += with accumulate=True
        (atomic; duplicates all add). indices: a tuple of integer arrays for the leading
        axes, broadcast together. Without accumulate the store is not atomic (one of
        duplicate writes wins) and return_old is not available. Returns self, or the old
        values with return_old=True."""
        coords, elem = self._index_tuple(indices)
        vals = self._values(values, "values")
        if accumulate:
            old = self._out(out, elem) if return_old else None
            self._conn.op(_INDEXED, self.name, _ADD, self._region, -1, coords, False, vals,
                          None, None, _mask(mask), sem, scope, space, check_bounds,
                          return_old, old, self._submit)
        else:
            if return_old:
                raise ValueError("index_put_ without accumulate returns no old values "
                                 "(use exch())")
            old = None
            self._conn.op(_SCATTER_STORE, self.name, 0, self._region, -1, coords, False,
                          vals, None, None, _mask(mask), sem, scope, space, check_bounds,
                          False, None, self._submit)
        if self._submit:
            return None
        return old if return_old else self

    # ---- loads, stores and histograms ------------------------------------------------------

    def _memory(self, kind: int, at: Any, dim: int | None, values: Any, padding: Any,
                mask: Any, sem: Any, scope: Any, space: Any, check_bounds: bool,
                out: Any) -> Any:
        if dim is not None:
            if at is None:
                raise ValueError("dim= needs at= (the index array)")
            if not -self.ndim <= dim < self.ndim:
                raise IndexError(f"dim {dim} is out of range for a tile of rank {self.ndim}")
            i = _index(at, "at")
            idx, flat, elem = (i,), False, tuple(i[2] if isinstance(i, tuple) else i.shape)
            dim %= self.ndim
        else:
            idx, flat, elem = self._where(at)
            dim = -1
        loads = kind in (_GATHER, _LOAD)
        dest = self._out(out, elem) if loads else None
        vals = self._values(values) if values is not None else None
        pad = self._values(padding, "padding") if padding is not None else None
        res = self._conn.op(kind, self.name, 0, self._region, dim, idx, flat, vals, None, pad,
                            _mask(mask), sem, scope, space, check_bounds, False, dest,
                            self._submit)
        if self._submit:
            return None
        if loads:
            return dest[()] if isinstance(at, int) and isinstance(dest, np.ndarray) else dest
        return res

    def gather(self, at: Any = None, *, dim: int | None = None, padding: Any = None,
               mask: Any = None, sem: str = "relaxed", scope: str = "gpu",
               space: str = "global", check_bounds: bool = True, out: Any = None) -> Any:
        """Reads the elements at ``at`` (as add(); None: the whole tile or box) into a
        numpy array of the elements' shape (not atomic per element: use load() for
        acquire loads). With dim=, ``at`` follows torch.gather: out[e] = the element whose
        coordinate along dim is at[e]. Masked-off and skipped elements get ``padding``
        (default 0)."""
        return self._memory(_GATHER, at, dim, None, padding, mask, sem, scope, space,
                            check_bounds, out)

    def load(self, at: Any = None, *, dim: int | None = None, mask: Any = None,
             sem: str = "relaxed", scope: str = "gpu", space: str = "global",
             check_bounds: bool = True, out: Any = None) -> Any:
        """Atomic load (sem "relaxed" or "acquire") of the elements at ``at``, as
        gather()."""
        return self._memory(_LOAD, at, dim, None, None, mask, sem, scope, space,
                            check_bounds, out)

    def store(self, value: Any, at: Any = None, *, dim: int | None = None,
              atomic: bool = True, mask: Any = None, sem: str = "relaxed",
              scope: str = "gpu", space: str = "global",
              check_bounds: bool = True) -> Any:
        """Stores value (broadcast) at ``at`` (as add(); with dim=, torch.scatter_'s
        rule). atomic=True: an atomic store (sem "relaxed" or "release"); False: a plain
        scatter store (one of duplicate writes wins). Returns OpResult."""
        return self._memory(_STORE if atomic else _SCATTER_STORE, at, dim, value, None, mask,
                            sem, scope, space, check_bounds, None)

    def hist(self, keys: Any, weights: Any = 1, *, mask: Any = None, sem: str = "relaxed",
             scope: str = "gpu", space: str = "shared", check_bounds: bool = True) -> Any:
        """Histogram: adds weights (default 1) to the element at each key (a row-major flat
        offset), atomically, in one request: numpy.bincount into a tile. Keys out of range
        are skipped and counted (check_bounds=True). space defaults to "shared" (per-block
        counts first, the fast path for few bins). Returns OpResult(applied, skipped)."""
        i = _index(keys, "keys")
        vals = self._values(weights, "weights")
        return self._conn.op(_INDEXED, self.name, _ADD, self._region, -1, (i,), True, vals,
                             None, None, _mask(mask), sem, scope, space, check_bounds, False,
                             None, self._submit)

    # ---- plain reads and writes ------------------------------------------------------------

    def read(self, *, out: Any = None) -> Any:
        """The tile's (or the box's) elements as a new numpy array (or into ``out``, e.g. a
        ``Client.shared_array``). Not atomic with respect to concurrent ops."""
        dest = self._out(out, self.shape)
        self._conn.read(self.name, self._region, dest, self._submit)
        return None if self._submit else dest

    def write(self, values: Any) -> None:
        """Writes values (the tile's or box's shape, or a scalar broadcast to it). Not
        atomic with respect to concurrent ops."""
        self._conn.write(self.name, self._region, self._values(values, "values"),
                         self._submit)

    def destroy(self) -> None:
        """Destroys the tile on the daemon."""
        self._client.destroy(self.name)


class Pipeline(_core.PipelineBase):
    """Requests queued without waiting, as redis-py's pipeline: ``p.tile(name)`` gives a
    Tile whose operations are sent at once but answered later (the first use of a name the
    client has not seen describes the tile: a round trip, after the responses in flight are
    set aside for execute(); so does a CUDA operand whose allocation is new to the
    connection, which is registered by a round trip); ``p.execute()`` returns every result
    in order (old values as numpy arrays, OpResult without them, None for writes).
    Requests go to the daemon as they are queued (written out every 256 requests or 64
    KiB), so the daemon works while Python queues more.

    Leaving the ``with`` block collects and drops what execute() did not (the requests were
    applied all the same). Synchronous calls on the client while results are outstanding
    raise StateError: call execute() first.

    ``tile(name)`` (a method of the C base class) returns the same view for a name every
    time, so ``p.tile(name).add(...)`` in a loop builds no object per call."""

    def __init__(self, client: "Client") -> None:
        self._client = client
        self._conn = client._conn
        self._tiles: dict[str, Tile] = {}

    def _new_tile(self, name: str) -> Tile:
        """tile(name) for a name this pipeline has no view of yet (called by the C base)."""
        if not isinstance(name, str):
            raise TypeError(f"a tile name is a str, not {type(name).__name__}")
        info = self._client._known.get(name)
        if info is None:
            if self._conn.pending:
                self._conn.set_aside()  # collect() returns them first
            info = self._conn.describe(name)
            self._client._known[name] = info
        t = self._tiles[name] = Tile(self._client, info, submit=True)
        return t

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._conn.closed and (self._conn.pending or self._conn.aside):
            try:
                self._conn.collect()
            except TileatomError:
                pass

    def __len__(self) -> int:
        """Requests queued and not returned by execute() yet."""
        return self._conn.aside + self._conn.pending

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Collects every queued request's result, in order. A failed request's exception
        is raised after all are collected (raise_on_error=True, the first one), or left in
        its place in the list (False)."""
        return self._conn.collect(-1, raise_on_error)


class Client:
    """A connection to tileatomd. Use ``tileatom.connect()``; a context manager that
    closes the connection on exit. One client may be used from several threads (calls are
    serialised) or from asyncio through ``tileatom.aio``."""

    def __init__(self, address: str | os.PathLike | None = None, *,
                 auth_file: str | os.PathLike | None = None,
                 timeout: float | None = None) -> None:
        connect_ms = int((DEFAULT_CONNECT_TIMEOUT if timeout is None else timeout) * 1000)
        io_ms = 0 if timeout is None else max(1, int(timeout * 1000))
        self._conn = _core.Conn(None if address is None else os.fspath(address),
                                max(1, connect_ms), io_ms,
                                None if auth_file is None else os.fspath(auth_file))
        # tiles whose description this client has seen: name -> info tuple
        self._known: dict[str, tuple] = {}

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection (idempotent). Shared arrays keep the socket open until
        they are freed, but the client accepts no call after close()."""
        self._conn.close()

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._conn.closed

    @property
    def address(self) -> str:
        """The daemon's address (socket path or host:port)."""
        return self._conn.address

    @property
    def server_version(self) -> str:
        """The daemon's version, from the handshake."""
        return self._conn.server_version

    @property
    def backend(self) -> str:
        """The daemon's backend, "cpu" or "cuda"."""
        return self._conn.backend

    @property
    def max_frame(self) -> int:
        """The daemon's frame limit in bytes (larger requests go by shared memory or in
        parts, transparently)."""
        return self._conn.max_frame

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.address
        return f"<tileatom.Client {state}>"

    # ---- tiles -----------------------------------------------------------------------------

    def create(self, name: str, dtype: Any, shape: int | Iterable[int], *,
               private: bool = False, fill: Any = None) -> Tile:
        """Creates tile ``name`` of dtype (numpy dtype or name: int32, uint32, int64,
        uint64, float32, float64, float16, bfloat16) and shape (rank 1 to 4), all zero (or
        ``fill``). private=True: only this client's identity (its uid over a Unix socket)
        may use it. Raises AlreadyExists when the name is taken."""
        code = _dtype_code(dtype)
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(
            int(n) for n in shape)
        fill_arr = None
        if fill is not None:
            fill_arr = Tile(self, (name, code, shape, 0, False))._values(fill, "fill")
            if fill_arr.ndim != 0:
                raise ValueError("fill must be a scalar")
        info = self._conn.create(name, code, shape, fill_arr, 1 if private else 0)
        self._known[name] = info
        return Tile(self, info)

    def tile(self, name: str) -> Tile:
        """Opens the existing tile ``name`` (one round trip: its dtype and shape). Raises
        NotFound."""
        info = self._conn.describe(name)
        self._known[name] = info
        return Tile(self, info)

    def tiles(self) -> list[Tile]:
        """Every tile this client may see."""
        out = []
        for info in self._conn.list():
            self._known[info[0]] = info
            out.append(Tile(self, info))
        return out

    def destroy(self, name: str) -> None:
        """Destroys tile ``name``. Raises NotFound."""
        self._known.pop(name, None)
        self._conn.destroy(name)

    def __contains__(self, name: str) -> bool:
        try:
            self._conn.describe(name)
        except NotFound:
            return False
        return True

    # ---- the rest --------------------------------------------------------------------------

    def ping(self) -> None:
        """A round trip with no effect."""
        self._conn.ping()

    def stats(self) -> dict[str, Any]:
        """The daemon's statistics: backend, device, tiles, requests, errors, ..."""
        return self._conn.stats()

    def pipeline(self) -> Pipeline:
        """A Pipeline on this connection (``with c.pipeline() as p:``)."""
        return Pipeline(self)

    def shared_array(self, shape: int | Iterable[int], dtype: Any) -> np.ndarray:
        """A zero-filled numpy array in memory shared with the daemon (a sealed memfd
        registered on this connection; Unix sockets only). Operands taken from it travel
        by reference, and old values written into it (``out=``) by the daemon, without a
        copy. Keep it for the life of the connection (each one takes one of the daemon's
        64 buffer slots of a connection)."""
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(
            int(n) for n in shape)
        dt = np.dtype(dtype)
        n = math.prod(shape)
        buf = self._conn.buffer(max(1, n * dt.itemsize))
        return np.frombuffer(buf, dtype=dt, count=n).reshape(shape)


def connect(address: str | os.PathLike | None = None, *,
            auth_file: str | os.PathLike | None = None,
            timeout: float | None = None) -> Client:
    """Connects to tileatomd and returns a Client (a context manager).

    address: a Unix socket path, or "host:port" / "[v6]:port" for TCP; None: as
    tileatom-cli, $TILEATOM_SOCKET, else the per-user daemon's socket
    ($XDG_RUNTIME_DIR/tileatom/tileatomd.sock), else the system daemon's.
    auth_file: the daemon's secret for a TCP daemon with --auth-file (None:
    $TILEATOM_AUTH_FILE when set).
    timeout: seconds bounding the connect and every later send or receive (an expired
    one raises Timeout and breaks the connection); None: tileatom-cli's 5 s for the
    connect, no limit afterwards.
    """
    return Client(address, auth_file=auth_file, timeout=timeout)
