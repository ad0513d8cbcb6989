"""test_torch_reader.py: the extension's reader of torch CUDA tensors (_core.torch_operand)
on a machine without CUDA: a stand-in tensor class bound in torch's place, whose "device"
memory is host memory (which the library, with no CUDA driver loaded, reads as such), so
that the pointer, dtype, shape, stream wait and refusals are checked here and a request
from it reaches the daemon. Needs no torch."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import tileatom
from tileatom import _core


class FakeTensor:
    """What the reader asks of a torch tensor, over a numpy array; is_cuda as given."""

    def __init__(self, values: np.ndarray, dtype: str, cuda: bool = True,
                 device: int = 0) -> None:
        self.values = values
        self.dtype = dtype  # stands for a torch dtype (a key of the bound codes)
        self.is_cuda = cuda
        self.device = device
        self.shape = tuple(values.shape)

    def is_contiguous(self) -> bool:
        return bool(self.values.flags.c_contiguous)

    def get_device(self) -> int:
        return self.device if self.is_cuda else -1

    def data_ptr(self) -> int:
        return self.values.ctypes.data


class Binding:
    """The callbacks bound with FakeTensor, recording how they are called."""

    def __init__(self, raw: int, current: int) -> None:
        self.raw, self.current = raw, current
        self.raw_asked: list[int] = []
        self.waits: list[int] = []
        self.checks: list[tuple[Any, Any, str]] = []

    def raw_stream(self, index: int) -> int:
        self.raw_asked.append(index)
        return self.raw

    def current_device(self) -> int:
        return self.current

    def check(self, obj: Any, code: Any, what: str) -> None:
        self.checks.append((obj, code, what))
        if obj.values.size > 1:
            raise ValueError(f"{what}: refused by the checker")

    def stream_wait(self, index: int) -> None:
        self.waits.append(index)


CODES = {"int32": tileatom._INT32, "int64": tileatom._INT64, "bool": 9}


@pytest.fixture
def bind(monkeypatch) -> Iterator[Any]:
    """bind(raw, current) binds FakeTensor with a new Binding and returns it; torch's own
    binding is made again (when torch is imported) after the test."""

    def do(raw: int = 0, current: int = 1) -> Binding:
        b = Binding(raw, current)
        _core.torch_bind(FakeTensor, CODES, b.raw_stream, b.current_device, b.check,
                         b.stream_wait)
        monkeypatch.setattr(tileatom, "_TORCH_CODES", CODES)
        return b

    yield do
    monkeypatch.undo()
    tileatom._TORCH_CODES = None  # the next device operand binds torch again, if imported


def test_a_fitting_tensor_is_read_and_its_stream_waited_for(bind):
    b = bind(raw=0, current=1)  # the legacy stream of a device not current: torch's wait
    vals = np.arange(6, dtype=np.int64).reshape(2, 3)
    t = FakeTensor(vals, "int64", device=0)
    dev = _core.torch_operand(t, tileatom._INT64, "value")
    assert dev == (vals.ctypes.data, tileatom._INT64, (2, 3), t)
    assert b.raw_asked == [0] and b.waits == [0] and b.checks == []
    # any dtype the reader knows when no code is asked (an index, a mask)
    assert _core.torch_operand(FakeTensor(vals, "int64"), None, "at")[1] == tileatom._INT64


def test_the_driver_is_asked_first_and_torch_waits_when_it_cannot(bind):
    # a raw stream of its own: the library asks the CUDA driver, which this process has
    # not loaded, so the wait falls back to the bound torch wait, for that device
    b = bind(raw=0x5000, current=0)
    t = FakeTensor(np.zeros(4, np.int32), "int32", device=3)
    assert _core.torch_operand(t, tileatom._INT32, "keys")[1:3] == (tileatom._INT32, (4,))
    assert b.raw_asked == [3] and b.waits == [3]
    _core.torch_sync(2)
    assert b.waits == [3, 2]


def test_other_objects_are_left_to_the_other_readers(bind):
    b = bind()
    assert _core.torch_operand(FakeTensor(np.zeros(2, np.int64), "int64", cuda=False),
                               tileatom._INT64, "value") is None
    assert _core.torch_operand(np.zeros(2, np.int64), tileatom._INT64, "value") is None
    assert _core.torch_operand(7, None, "value") is None
    assert b.waits == [] and b.checks == []


def test_misfits_go_to_the_checker(bind):
    b = bind()
    wrong = FakeTensor(np.zeros(3, np.int32), "int32")
    with pytest.raises(ValueError, match="value: refused by the checker"):
        _core.torch_operand(wrong, tileatom._INT64, "value")
    unknown = FakeTensor(np.zeros(3, np.float32), "complex64")
    with pytest.raises(ValueError, match="keys: refused"):
        _core.torch_operand(unknown, None, "keys")
    strided = FakeTensor(np.zeros((3, 4), np.int64)[:, ::2], "int64")
    with pytest.raises(ValueError, match="refused"):
        _core.torch_operand(strided, tileatom._INT64, "value")
    assert [c[1:] for c in b.checks] == [(tileatom._INT64, "value"), (None, "keys"),
                                        (tileatom._INT64, "value")]
    assert b.waits == []  # nothing refused is waited for
    # one element fits whatever its strides (the checker passes it)
    one = FakeTensor(np.zeros((4, 4), np.int64)[1:2, 2:3], "int64")
    assert _core.torch_operand(one, tileatom._INT64, "value")[1:3] == (tileatom._INT64, (1, 1))
    # a dtype it lacks, or another than asked, though the checker let them through
    with pytest.raises(TypeError, match="w: a CUDA tensor of a dtype that does not fit"):
        _core.torch_operand(FakeTensor(np.zeros(1, np.float32), "complex64"), None, "w")
    with pytest.raises(TypeError, match="v: a CUDA tensor of a dtype that does not fit"):
        _core.torch_operand(FakeTensor(np.zeros(1, np.int32), "int32"), tileatom._INT64, "v")
    assert b.waits == [0]  # the one that fitted alone


def test_the_checker_raising_for_the_real_torch_names_the_operand(bind):
    # tileatom's own checker, as bound with torch: its message names the role and dtype
    class Checked(FakeTensor):
        def element_size(self) -> int:
            return self.values.itemsize

        def stride(self) -> tuple[int, ...]:
            return tuple(s // self.values.itemsize for s in self.values.strides)

    bind()
    _core.torch_bind(FakeTensor, CODES, None, lambda: 0, tileatom._torch_check,
                     lambda i: None)
    with pytest.raises(TypeError, match="weights: a CUDA array of dtype int32 where "
                                        "tileatom needs int64"):
        _core.torch_operand(Checked(np.zeros(2, np.int32), "int32"), tileatom._INT64,
                            "weights")
    with pytest.raises(ValueError, match="keys: a CUDA array must be C-contiguous"):
        _core.torch_operand(Checked(np.zeros((2, 4), np.int32)[:, ::2], "int32"), None,
                            "keys")


def test_a_request_from_the_reader_reaches_the_daemon(client, name, bind):
    b = bind()
    h = client.create(name, np.int64, 8)
    keys = np.array([1, 7, 7, 3, 9, -1, 1, 1], np.int32)
    r = h.hist(FakeTensor(keys, "int32"), FakeTensor(np.full(8, 2, np.int64), "int64"))
    assert r == (6, 2)  # 9 and -1 out of range
    np.testing.assert_array_equal(h.read(), [0, 6, 0, 2, 0, 0, 0, 4])
    assert b.waits == [0, 0]  # each operand waited for
    with pytest.raises(ValueError, match="weights: refused"):
        h.hist(FakeTensor(keys, "int32"), FakeTensor(np.ones(8, np.int32), "int32"))
    np.testing.assert_array_equal(h.read(), [0, 6, 0, 2, 0, 0, 0, 4])  # nothing sent
