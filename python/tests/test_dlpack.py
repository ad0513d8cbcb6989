"""test_dlpack.py: operands offered only through DLPack (``__dlpack__``): the capsule is
parsed and consumed by tileatom._core.dlpack_view (numpy's own ``__dlpack__`` is the
producer), host tensors go through the buffer path, and a kDLCUDA tensor (a capsule built
here by ctypes over host memory, never sent) is routed to the device-pointer path."""

from __future__ import annotations

import ctypes
import gc
import sys

import numpy as np
import pytest

import tileatom
from tileatom import _core


class OnlyDLPack:
    """Offers numpy's own __dlpack__ and __dlpack_device__ and nothing else (no buffer
    protocol, no __array__)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_only_dlpack_has_no_other_way_in():
    o = OnlyDLPack(np.arange(3))
    with pytest.raises(TypeError):
        memoryview(o)
    assert not hasattr(o, "__array__")


def test_dlpack_view_of_a_strided_int32_array():
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    a = base[:, 1:4]
    refs = sys.getrefcount(a)
    cap = a.__dlpack__()
    v = _core.dlpack_view(cap)
    assert v.device == (1, 0)
    assert v.dtype == (0, 32, 1)
    assert v.shape == (4, 3)
    assert v.strides == (6, 1)
    assert v.data == a.ctypes.data == base.ctypes.data + 4
    assert sys.getrefcount(a) == refs + 1  # numpy's export holds the array
    with pytest.raises(ValueError, match="used_dltensor"):
        _core.dlpack_view(cap)  # consumed once
    h = np.asarray(v)
    assert h.shape == (4, 3) and h.dtype == np.int32 and h.strides == (24, 4)
    np.testing.assert_array_equal(h, [[1, 2, 3], [7, 8, 9], [13, 14, 15], [19, 20, 21]])
    h[0, 0] = -5  # the same memory
    assert base[0, 1] == -5
    del cap, h, v
    gc.collect()
    assert sys.getrefcount(a) == refs  # the deleter released numpy's reference


@pytest.mark.parametrize("dtype, expect", [
    (np.int64, (0, 64, 1)), (np.uint32, (1, 32, 1)), (np.uint64, (1, 64, 1)),
    (np.float16, (2, 16, 1)), (np.float32, (2, 32, 1)), (np.float64, (2, 64, 1)),
])
def test_dlpack_view_dtypes(dtype, expect):
    a = np.array([3, 1, 2], dtype=dtype)
    v = _core.dlpack_view(a.__dlpack__())
    assert v.dtype == expect and v.shape == (3,) and v.byte_offset == 0
    assert v.strides in (None, (1,))
    np.testing.assert_array_equal(np.asarray(v), a)
    assert np.asarray(v).dtype == a.dtype


def test_dlpack_view_refuses_what_is_no_capsule():
    with pytest.raises(TypeError, match="not a capsule"):
        _core.dlpack_view(b"dltensor")


def test_host_dlpack_operands(client, name):
    t = client.create(name, np.int64, (8,))
    old = t.add(OnlyDLPack(np.array([1, 2, 3], np.int64)),
                at=OnlyDLPack(np.array([0, 2, 5], np.int64)), return_old=True)
    np.testing.assert_array_equal(old, [0, 0, 0])
    t.add(OnlyDLPack(np.array(10, np.int64)), at=7,
          mask=OnlyDLPack(np.array(1, np.uint8)))  # numpy 1.24 exports no bool
    np.testing.assert_array_equal(t.read(), [1, 0, 2, 0, 0, 3, 0, 10])
    keys = np.random.default_rng(5).integers(0, 8, 1000).astype(np.int32)
    h = client.create(name + "-h", np.int32, (8,))
    res = h.hist(OnlyDLPack(keys))
    assert res == (1000, 0)
    np.testing.assert_array_equal(h.read(), np.bincount(keys, minlength=8))
    # a float operand for an integer tile is refused as for numpy arrays
    with pytest.raises(TypeError):
        t.add(OnlyDLPack(np.array([1.5])), at=OnlyDLPack(np.array([0])))
    client.destroy(name + "-h")


# ---- a kDLCUDA capsule, built by ctypes (DLPack's ABI) over host memory --------------------

class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


_CAPSULE_NAME = ctypes.c_char_p(b"dltensor")  # must outlive the capsules
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCuda:
    """A producer claiming kDLCUDA device 1 for host memory: enough to test the routing
    (the tuple handed to the extension), never sent to a daemon."""

    def __init__(self, values: np.ndarray, dl_code: int, strides=None, offset=0) -> None:
        self.values = values
        self.deleted = 0
        self.streams = []
        self._shape = (ctypes.c_int64 * values.ndim)(*values.shape)
        self._strides = None if strides is None else (ctypes.c_int64 * values.ndim)(*strides)
        self._deleter = _DELETER(self._delete)
        self._managed = _Managed()
        t = self._managed.dl_tensor
        t.data = values.ctypes.data - offset
        t.device = _Device(2, 1)
        t.ndim = values.ndim
        t.dtype = _DType(dl_code, values.dtype.itemsize * 8, 1)
        t.shape = self._shape
        t.strides = self._strides
        t.byte_offset = offset
        self._managed.deleter = self._deleter

    def _delete(self, ptr) -> None:
        assert ptr == ctypes.addressof(self._managed)
        self.deleted += 1

    def __dlpack_device__(self):
        return (2, 1)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _new_capsule(ctypes.addressof(self._managed), _CAPSULE_NAME, None)


def test_cuda_dlpack_goes_to_the_device_path():
    vals = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    f = FakeCuda(vals, 0, offset=16)
    dev = tileatom._device_array(f, tileatom._INT64, "value")
    assert f.streams == [None]
    assert dev[:3] == (vals.ctypes.data, tileatom._INT64, (2, 3))
    assert isinstance(dev[3], _core.DLPackView) and dev[3].device == (2, 1)
    assert dev[3].byte_offset == 16 and f.deleted == 0
    del dev
    gc.collect()
    assert f.deleted == 1
    # index dtypes and C-contiguous strides given explicitly
    g = FakeCuda(np.zeros(4, np.int32), 0, strides=(1,))
    assert tileatom._device_array(g, None, "at")[1:3] == (tileatom._INT32, (4,))
    # bfloat16 (kDLBfloat) and a bool mask (kDLBool)
    assert tileatom._device_array(FakeCuda(np.zeros(2, np.uint16), 4), None, "v")[1] == \
        tileatom._BFLOAT16
    assert tileatom._device_array(FakeCuda(np.zeros(2, np.bool_), 6), None, "mask")[1] == 9


def test_cuda_dlpack_refusals():
    f = FakeCuda(np.zeros(3, np.float32), 2)
    with pytest.raises(TypeError, match="int64"):
        tileatom._device_array(f, tileatom._INT64, "value")
    gc.collect()
    assert f.deleted == 1  # consumed and released all the same
    s = FakeCuda(np.zeros((2, 3), np.int64), 0, strides=(1, 2))
    with pytest.raises(ValueError, match="C-contiguous"):
        tileatom._device_array(s, tileatom._INT64, "value")
    gc.collect()
    assert s.deleted == 1
    # a kDLCUDA object is never read as host memory
    with pytest.raises(TypeError, match="device type 2 where host memory"):
        tileatom._torch_numpy(FakeCuda(np.zeros(2, np.int64), 0))


def test_pipelined_device_operands_live_until_collected(client, name):
    # without libcuda in this process the library reads the "device" array as host
    # memory: enough to see that the pipeline holds the consumed tensor until execute()
    t = client.create(name, np.int64, (4,))
    f = FakeCuda(np.array([5, 6], np.int64), 0)
    with client.pipeline() as p:
        p.tile(name).add(f, at=np.array([1, 3]))
        gc.collect()
        assert f.deleted == 0
        r = p.execute()
    gc.collect()
    assert f.deleted == 1 and r == [(2, 0)]
    np.testing.assert_array_equal(t.read(), [0, 5, 0, 6])


def test_pipelined_device_write_lives_until_collected(client, name):
    # a write's device values too: the daemon reads them after the submit returns
    t = client.create(name, np.int64, (2,))
    f = FakeCuda(np.array([7, 8], np.int64), 0)
    with client.pipeline() as p:
        p.tile(name).write(f)
        gc.collect()
        assert f.deleted == 0
        r = p.execute()
    gc.collect()
    assert f.deleted == 1 and r == [None]
    np.testing.assert_array_equal(t.read(), [7, 8])
