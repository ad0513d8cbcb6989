"""test_torch.py: torch tensors (Debian's CPU build) as operands, and the torch-named ops
against torch's own in-place ops on a CPU tensor, exactly. Skipped without torch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (apt install "
                            "python3-torch)")


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64,
                                   torch.float16])
def test_scatter_add_matches_torch(client, name, dtype):
    g = torch.Generator().manual_seed(5)
    index = torch.randint(0, 6, (5, 4), generator=g)
    src = torch.randint(1, 9, (5, 4), generator=g).to(dtype)
    ref = torch.zeros((6, 4), dtype=dtype)
    ref.scatter_add_(0, index, src)
    t = client.create(name, dtype, (6, 4))
    t.scatter_add_(0, index, src)
    assert torch.equal(torch.from_numpy(t.read()), ref)


def test_index_add_and_index_put_match_torch(client, name):
    ref = torch.zeros((5, 3), dtype=torch.float64)
    index = torch.tensor([0, 4, 4, 2])
    source = torch.arange(12, dtype=torch.float64).reshape(4, 3)
    ref.index_add_(0, index, source, alpha=3)
    t = client.create(name, torch.float64, (5, 3))
    t.index_add_(0, index, source, alpha=3)
    assert torch.equal(torch.from_numpy(t.read()), ref)
    rows, cols = torch.tensor([1, 1, 3]), torch.tensor([2, 2, 0])
    vals = torch.tensor([1.0, 4.0, 9.0], dtype=torch.float64)
    ref.index_put_((rows, cols), vals, accumulate=True)
    t.index_put_((rows, cols), vals, accumulate=True)
    assert torch.equal(torch.from_numpy(t.read()), ref)


def test_hist_from_torch_and_a_cas_lock(client, name):
    keys = torch.randint(0, 16, (1000,), generator=torch.Generator().manual_seed(1))
    h = client.create(name, torch.int64, 16)
    h.hist(keys)
    assert torch.equal(torch.from_numpy(h.read()), torch.bincount(keys, minlength=16))
    lock = client.create(name + "lock", torch.int32, 1)
    assert lock.cas(0, expected=0, desired=1, sem="acquire") == 0  # taken
    assert lock.cas(0, expected=0, desired=1, sem="acquire") == 1  # already held
    lock.store(0, at=0, sem="release")  # released
    assert lock.cas(0, expected=0, desired=1, sem="acquire") == 0


def test_bfloat16_from_torch(client, name):
    vals = torch.tensor([1.0, -2.5, 0.125, 300.0], dtype=torch.bfloat16)
    t = client.create(name, torch.bfloat16, 4)
    t.add(vals)
    t.add(vals)
    bits = t.read()
    got = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    assert torch.equal(got, vals * 2)


def test_float_tensor_into_int_tile_is_refused(client, name):
    t = client.create(name, torch.int32, 4)
    with pytest.raises(TypeError):
        t.add(torch.ones(4))
