"""test_ops.py: every atomic and memory op of tileatom.Tile, for every dtype, against the
same computation done by numpy (exact: operands are small integers, which every dtype,
float16 and bfloat16 included, holds exactly, so the order of atomic adds cannot matter)."""

from __future__ import annotations

import numpy as np
import pytest

import tileatom

DTYPES = [np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64, np.float16]
INT_DTYPES = [np.int32, np.uint32, np.int64, np.uint64]


def start(client, name, dtype, shape=(4, 6)):
    """A tile holding 10 + row-major position, and the numpy copy of it."""
    ref = (np.arange(int(np.prod(shape))).reshape(shape) + 10).astype(dtype)
    t = client.create(name, dtype, shape)
    t.write(ref)
    return t, ref


@pytest.mark.parametrize("dtype", DTYPES)
def test_create_read_write(client, name, dtype):
    t, ref = start(client, name, dtype)
    assert t.dtype == np.dtype(dtype) and t.shape == (4, 6) and t.name == name
    got = t.read()
    assert got.dtype == np.dtype(dtype) and got.shape == (4, 6)
    np.testing.assert_array_equal(got, ref)
    t[1:3, 2:5].write(7)
    ref[1:3, 2:5] = 7
    np.testing.assert_array_equal(t.read(), ref)
    np.testing.assert_array_equal(t[1:3, 2:5].read(), ref[1:3, 2:5])
    np.testing.assert_array_equal(np.asarray(t), ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opname", ["add", "sub", "min", "max", "exch"])
def test_elementwise_ops(client, name, dtype, opname):
    t, ref = start(client, name, dtype)
    vals = ((np.arange(24).reshape(4, 6) * 7) % 13 + 1).astype(dtype)
    res = getattr(t, opname)(vals)
    assert res == (24, 0) and res.applied == 24 and res.skipped == 0
    expect = {"add": ref + vals, "sub": ref - vals, "min": np.minimum(ref, vals),
              "max": np.maximum(ref, vals), "exch": vals}[opname]
    np.testing.assert_array_equal(t.read(), expect.astype(dtype))
    # over a box, a scalar broadcast, with the old values back
    old = getattr(t[1:3, 1:4], opname)(5, return_old=True)
    np.testing.assert_array_equal(old, expect[1:3, 1:4])
    box = expect[1:3, 1:4]
    expect[1:3, 1:4] = {"add": box + 5, "sub": box - 5, "min": np.minimum(box, 5),
                        "max": np.maximum(box, 5), "exch": np.full_like(box, 5)}[opname]
    np.testing.assert_array_equal(t.read(), expect)


@pytest.mark.parametrize("dtype", DTYPES)
def test_indexed_flat_and_coordinates(client, name, dtype):
    t, ref = start(client, name, dtype)
    at = np.array([0, 5, 5, 23, 5, 7])
    old = t.add(np.arange(1, 7).astype(dtype), at=at, return_old=True)
    assert old.shape == (6,) and old.dtype == np.dtype(dtype)
    flat = ref.reshape(-1)
    np.add.at(flat, at, np.arange(1, 7).astype(dtype))
    np.testing.assert_array_equal(t.read(), ref)
    # old values of the duplicates are some order of the partial sums: check the first
    assert old[0] == np.dtype(dtype).type(10)
    # per-axis coordinates, broadcast together: rows (2, 1) x columns (3,)
    rows, cols = np.array([[0], [3]]), np.array([1, 2, 5])
    res = t.add(2, at=(rows, cols))
    assert res == (6, 0)
    ref[rows, cols] += 2
    np.testing.assert_array_equal(t.read(), ref)
    # a single element: the fast path returns a numpy scalar
    before = t.add(3, at=4, return_old=True)
    assert isinstance(before, np.generic) and before == ref.reshape(-1)[4]
    ref.reshape(-1)[4] += 3
    np.testing.assert_array_equal(t.read(), ref)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("opname", ["and_", "or_", "xor"])
def test_bitwise_ops(client, name, dtype, opname):
    t, ref = start(client, name, dtype)
    vals = (np.arange(24).reshape(4, 6) * 5 % 16).astype(dtype)
    getattr(t, opname)(vals)
    fn = {"and_": np.bitwise_and, "or_": np.bitwise_or, "xor": np.bitwise_xor}[opname]
    ref = fn(ref, vals)
    np.testing.assert_array_equal(t.read(), ref)
    old = getattr(t, opname)(6, at=[1, 2], return_old=True)
    np.testing.assert_array_equal(old, ref.reshape(-1)[[1, 2]])
    flat = ref.reshape(-1)
    flat[[1, 2]] = fn(flat[[1, 2]], dtype(6))
    np.testing.assert_array_equal(t.read(), ref)
    assert getattr(t, opname)(1, at=0, return_old=True) == flat[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_cas(client, name, dtype):
    t, ref = start(client, name, dtype, (8,))
    # element-wise: swaps where the expected value matches
    expected = ref.copy()
    expected[::2] += 1  # wrong at even positions
    old = t.cas(None, expected=expected, desired=np.full(8, 3, dtype))
    np.testing.assert_array_equal(old, ref)
    ref[1::2] = 3
    np.testing.assert_array_equal(t.read(), ref)
    # one element, the lock: the old value tells who won
    lock = t  # reuse: element 1 holds 3
    assert lock.cas(1, expected=3, desired=1, sem="acquire") == 3
    assert lock.cas(1, expected=3, desired=2, sem="acquire") == 1
    assert t.read()[1] == 1
    # at indices
    old = t.cas([0, 2], expected=[ref[0], 99], desired=[5, 5])
    np.testing.assert_array_equal(old, [ref[0], ref[2]])
    assert t.read()[0] == 5 and t.read()[2] == ref[2]


def test_mask_and_bounds(client, name):
    t, ref = start(client, name, np.int64, (8,))
    mask = np.array([True, False] * 4)
    res = t.add(np.ones(8, np.int64), mask=mask)
    assert res == (4, 0)
    ref[mask] += 1
    np.testing.assert_array_equal(t.read(), ref)
    # out-of-range indices are skipped and counted, or fail the whole request
    res = t.add(1, at=[1, 8, 100, 2])
    assert res == (2, 2)
    ref[[1, 2]] += 1
    with pytest.raises(tileatom.OutOfRange) as e:
        t.add(1, at=[3, 9], check_bounds=False)
    assert e.value.code == 4 and "9" in str(e.value)
    with pytest.raises(tileatom.OutOfRange):
        t.add(1, at=8)  # a single element outside the tile always raises
    np.testing.assert_array_equal(t.read(), ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_load_store(client, name, dtype):
    t, ref = start(client, name, dtype)
    np.testing.assert_array_equal(t.gather(), ref)
    np.testing.assert_array_equal(t[2:4, 1:3].gather(), ref[2:4, 1:3])
    np.testing.assert_array_equal(t.gather([0, 7, 23]), ref.reshape(-1)[[0, 7, 23]])
    rows, cols = np.array([3, 0]), np.array([5, 1])
    np.testing.assert_array_equal(t.gather((rows, cols)), ref[rows, cols])
    # torch.gather's rule with dim
    idx = np.array([[0, 3, 1, 2, 0, 1]])
    np.testing.assert_array_equal(t.gather(idx, dim=0),
                                  np.take_along_axis(ref, idx, axis=0))
    got = t.gather([1, 500], padding=9)
    np.testing.assert_array_equal(got, np.array([ref.reshape(-1)[1], 9], dtype))
    assert t.load(5, sem="acquire") == ref.reshape(-1)[5]
    np.testing.assert_array_equal(t.load([2, 3]), ref.reshape(-1)[[2, 3]])
    assert t.store(4, at=[0, 1], sem="release") == (2, 0)
    assert t.store(np.array([6, 7], dtype), at=(np.array([1, 2]), np.array([0, 0])),
                   atomic=False) == (2, 0)
    ref.reshape(-1)[[0, 1]] = 4
    ref[[1, 2], [0, 0]] = [6, 7]
    np.testing.assert_array_equal(t.read(), ref)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float16])
def test_hist_and_scatter_add(client, name, dtype):
    keys = np.random.default_rng(7).integers(0, 256, 5000).astype(np.int32)
    h = client.create(name, dtype, (256,))
    assert h.hist(keys) == (5000, 0)
    expect = np.bincount(keys, minlength=256)
    np.testing.assert_array_equal(h.read(), expect.astype(dtype))
    # the form
    assert h.scatter_add_(0, keys, np.ones(keys.shape, dtype)) is h
    np.testing.assert_array_equal(h.read(), (2 * expect).astype(dtype))
    res = h.hist(np.array([1, 300, -1]), weights=np.array([2, 2, 2], dtype))
    assert res == (1, 2)


def test_scatter_add_2d_and_reduce(client, name):
    t = client.create(name, np.int64, (3, 5))
    index = np.array([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]])
    src = np.arange(1, 16).reshape(3, 5)  # larger than index: torch uses the first rows
    t.scatter_add_(0, index, src)
    ref = np.zeros((3, 5), np.int64)
    for i in range(2):
        for j in range(5):
            ref[index[i, j], j] += src[i, j]
    np.testing.assert_array_equal(t.read(), ref)
    t.scatter_reduce_(1, np.array([[4, 4], [0, 1], [2, 2]]), np.array([[50, 60]] * 3),
                      "amax")
    ref[0, 4] = max(ref[0, 4], 60)
    ref[1, 0], ref[1, 1] = max(ref[1, 0], 50), max(ref[1, 1], 60)
    ref[2, 2] = max(ref[2, 2], 60)
    np.testing.assert_array_equal(t.read(), ref)
    with pytest.raises(ValueError):
        t.scatter_reduce_(0, index, src, "prod")


def test_index_add_and_index_put(client, name):
    t = client.create(name, np.float64, (4, 3))
    ref = np.zeros((4, 3))
    idx = np.array([0, 2, 2])
    src = np.arange(9, dtype=np.float64).reshape(3, 3)
    assert t.index_add_(0, idx, src) is t
    np.add.at(ref, idx, src)
    np.testing.assert_array_equal(t.read(), ref)
    t.index_add_(1, np.array([1]), np.ones((4, 1)), alpha=2)
    ref[:, 1] += 2
    np.testing.assert_array_equal(t.read(), ref)
    # index_put_: full coordinates, accumulate (duplicates add)
    rows, cols = np.array([1, 1, 3]), np.array([0, 0, 2])
    t.index_put_((rows, cols), np.array([1.0, 2.0, 3.0]), accumulate=True)
    np.add.at(ref, (rows, cols), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.read(), ref)
    # leading axis only, a plain store of whole rows
    t.index_put_((np.array([3]),), np.array([7.0, 8.0, 9.0]))
    ref[3] = [7.0, 8.0, 9.0]
    np.testing.assert_array_equal(t.read(), ref)


def test_value_conversion_rules(client, name):
    t = client.create(name, np.int32, (4,))
    with pytest.raises(TypeError):
        t.add(1.5)
    with pytest.raises(TypeError):
        t.add(1.5, at=0)
    with pytest.raises(TypeError):
        t.add(np.array([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(OverflowError):
        t.add(2**40, at=0)
    with pytest.raises(OverflowError):
        t.add(2**40)
    f = client.create(name + "f", np.float32, (2,))
    f.add(3, at=1)  # ints into float tiles are fine
    np.testing.assert_array_equal(f.read(), [0, 3])
    u = client.create(name + "u", np.uint64, (1,))
    u.add(2**64 - 1, at=0)
    assert u.read()[0] == np.uint64(2**64 - 1)


def test_bfloat16_bits(client, name):
    t = client.create(name, "bfloat16", (4,))
    assert t.dtype_name == "bfloat16"
    t.add(np.array([1.0, 2.0, 0.5, -3.0]))
    t.add(1.0, at=0)
    bits = t.read()
    if tileatom.bfloat16 is None:
        assert bits.dtype == np.uint16
        as_f32 = (bits.astype(np.uint32) << 16).view(np.float32)
    else:  # pragma: no cover - with ml_dtypes
        as_f32 = bits.astype(np.float32)
    np.testing.assert_array_equal(as_f32, [2.0, 2.0, 0.5, -3.0])


class FakeCudaArray:
    """An object offering __cuda_array_interface__ over host memory: without CUDA in the
    process the library reads such a pointer as host memory, which exercises the package's
    device-array path (dtype, shape and layout checks, the pointer handed to the library)
    on a machine without a GPU."""

    def __init__(self, a: np.ndarray, strides=None) -> None:
        self.a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str,
                                         "data": (a.ctypes.data, False),
                                         "strides": strides, "version": 3}


def test_cuda_array_interface_path(client, name):
    t, ref = start(client, name, np.int64, (6,))
    assert t.add(FakeCudaArray(np.arange(6, dtype=np.int64))) == (6, 0)
    ref += np.arange(6)
    keys = FakeCudaArray(np.array([0, 2, 2], dtype=np.int32))
    old = FakeCudaArray(np.zeros(3, np.int64))
    t.add(1, at=keys, return_old=True, out=old)
    np.testing.assert_array_equal(np.sort(old.a), np.sort([ref[0], ref[2], ref[2] + 1]))
    ref[0] += 1
    ref[2] += 2
    np.testing.assert_array_equal(t.read(), ref)
    with pytest.raises(TypeError, match="CUDA array of dtype"):
        t.add(FakeCudaArray(np.ones(6, np.float32)))
    with pytest.raises(ValueError, match="C-contiguous"):
        t.add(FakeCudaArray(np.ones(6, np.int64), strides=(16,)))
