"""test_pipeline.py: pipelines (results in order, errors in place, the issue's example),
the asyncio client, and a client killed in the middle of a pipeline."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tileatom
import tileatom.aio


def test_issue_example(daemon):
    keys = np.random.default_rng(3).integers(0, 256, 10000)
    os.environ["TILEATOM_SOCKET"] = daemon
    try:
        with tileatom.connect() as c:
            h = c.create("hist", np.int64, (256,))
            h.scatter_add_(0, keys, np.ones(keys.shape, np.int64))
            counts = h.read()
            lock = c.create("lock", np.int32, (1,))
            old = lock.cas(0, expected=0, desired=1, sem="acquire")
            c.create("ctr", np.int64, (4,))
            with c.pipeline() as p:
                for _ in range(100):
                    p.tile("ctr").add(1, at=3, return_old=True)
                olds = p.execute()
            np.testing.assert_array_equal(counts, np.bincount(keys, minlength=256))
            assert old == 0 and lock.read()[0] == 1
            assert [int(x) for x in olds] == list(range(100))
            assert all(isinstance(x, np.int64) for x in olds)
            np.testing.assert_array_equal(c.tile("ctr").read(), [0, 0, 0, 100])
            for n in ("hist", "lock", "ctr"):
                c.destroy(n)
    finally:
        del os.environ["TILEATOM_SOCKET"]


def test_pipeline_results_in_order(client, name):
    t = client.create(name, np.int32, (8,))
    with client.pipeline() as p:
        pt = p.tile(name)
        pt.write(np.arange(8, dtype=np.int32))
        pt.add(5, at=2)
        pt.add(np.ones(8, np.int32), return_old=True)
        pt.cas(0, expected=1, desired=40)
        pt.gather([2, 7])
        pt[4:6].read()
        pt.hist(np.array([0, 0, 9]))
        assert len(p) == 7
        r = p.execute()
    assert r[0] is None
    assert r[1] == (1, 0) and isinstance(r[1], tileatom.OpResult)
    np.testing.assert_array_equal(r[2], [0, 1, 7, 3, 4, 5, 6, 7])
    assert r[3] == 1 and isinstance(r[3], np.int32)
    np.testing.assert_array_equal(r[4], [8, 8])
    np.testing.assert_array_equal(r[5], [5, 6])
    assert r[6] == (2, 1)
    np.testing.assert_array_equal(t.read(), [42, 2, 8, 4, 5, 6, 7, 8])


def test_pipeline_errors(client, name):
    t = client.create(name, np.int64, (4,))
    with client.pipeline() as p:
        p.tile(name).add(1, at=0)
        p.tile(name).add(1, at=9)  # out of range
        p.tile(name).add(1, at=1)
        with pytest.raises(tileatom.OutOfRange):
            p.execute()
        p.tile(name).add(1, at=2)
        p.tile(name).add(1, at=-5)
        r = p.execute(raise_on_error=False)
    assert r[0] == (1, 0) and isinstance(r[1], tileatom.OutOfRange) and str(r[1])
    np.testing.assert_array_equal(t.read(), [1, 1, 1, 0])


def test_pipeline_tile_view_is_cached(client, name):
    client.create(name, np.int32, (8,))
    with client.pipeline() as p:
        v = p.tile(name)
        assert p.tile(name) is v and v.name == name and v.shape == (8,)
        with pytest.raises(TypeError):
            p.tile(5)
        with pytest.raises(tileatom.NotFound):
            p.tile(name + "-missing")
        v.add(7, at=2, return_old=True)
        p.tile(name).add(5, at=2, return_old=True)
        olds = p.execute()
    assert [int(x) for x in olds] == [0, 7]
    with client.pipeline() as q:  # a new pipeline makes its own view
        assert q.tile(name) is not v


def test_pipeline_describes_new_tiles_midway(client, name):
    a = client.create(name, np.int64, (2,))
    other = tileatom.connect(client.address)
    other.create(name + "b", np.float32, (2,))  # unknown to `client`
    with client.pipeline() as p:
        p.tile(name).add(1, at=0, return_old=True)
        p.tile(name + "b").add(2.5, at=1, return_old=True)  # describes after a drain
        with pytest.raises(tileatom.NotFound):
            p.tile("no-such")
        p.tile(name).add(1, at=0, return_old=True)
        r = p.execute()
    assert [float(x) for x in r] == [0.0, 0.0, 1.0]
    np.testing.assert_array_equal(a.read(), [2, 0])
    np.testing.assert_array_equal(other.tile(name + "b").read(), [0, 2.5])
    other.close()


def test_results_set_aside_come_first(client, name):
    # what a pipeline does before a round trip in its middle (a new tile's description, a
    # CUDA allocation's registration): the responses in flight are collected and kept
    client.create(name, np.int64, (4,))
    conn = client._conn
    with client.pipeline() as p:
        v = p.tile(name)
        v.add(1, at=0, return_old=True)
        v.add(1, at=9)  # out of range: its error is set aside with the rest
        v.add(1, at=0, return_old=True)
        conn.set_aside()
        assert (conn.aside, conn.pending, len(p)) == (3, 0, 3)
        conn.set_aside()  # nothing in flight: nothing changes
        assert (conn.aside, conn.pending) == (3, 0)
        v.add(1, at=0, return_old=True)
        v.add(1, at=1, return_old=True)
        assert (conn.aside, conn.pending, len(p)) == (3, 2, 5)
        first = conn.collect(2)  # from the set-aside results alone
        assert int(first[0]) == 0 and isinstance(first[1], tileatom.OutOfRange)
        assert (conn.aside, conn.pending) == (1, 2)
        with pytest.raises(tileatom.OutOfRange):  # an error set aside is raised too
            v.add(1, at=9)
            conn.set_aside()
            p.execute()
        assert (conn.aside, conn.pending, len(p)) == (0, 0, 0)
        v.add(1, at=2, return_old=True)
        conn.set_aside()
        v.add(1, at=2, return_old=True)
        r = p.execute()
    assert [int(x) for x in r] == [0, 1]
    np.testing.assert_array_equal(client.tile(name).read(), [3, 1, 2, 0])


def test_set_aside_results_are_dropped_with_the_pipeline(client, name):
    t = client.create(name, np.int64, (2,))
    with client.pipeline() as p:
        p.tile(name).add(5, at=1)
        client._conn.set_aside()
    assert (client._conn.aside, client._conn.pending) == (0, 0)
    np.testing.assert_array_equal(t.read(), [0, 5])  # applied all the same


def test_synchronous_call_inside_a_pipeline(client, name):
    t = client.create(name, np.int64, (2,))
    with client.pipeline() as p:
        p.tile(name).add(1, at=0)
        with pytest.raises(tileatom.StateError):
            t.read()
    # leaving the block collected the response: the client works again
    np.testing.assert_array_equal(t.read(), [1, 0])


def test_many_pipelined_adds(client, name):
    t = client.create(name, np.int64, (16,))
    n = 20000
    with client.pipeline() as p:
        pt = p.tile(name)
        for i in range(n):
            pt.add(1, at=i % 16)
        r = p.execute()
    assert len(r) == n and all(x == (1, 0) for x in r)
    np.testing.assert_array_equal(t.read(), np.full(16, n // 16))


@pytest.mark.asyncio
async def test_asyncio_client(daemon, name):
    async with await tileatom.aio.connect(daemon) as c:
        h = await c.create(name, "int64", 8)
        assert await h.add(1, at=3) == (1, 0)
        assert await h.scatter_add_(0, np.array([1, 1, 2]), np.ones(3, np.int64)) is h
        p = c.pipeline()
        for k in range(8):
            p.tile(name).add(k, at=k, return_old=True)
        olds = await p.execute()
        assert [int(x) for x in olds] == [0, 2, 1, 1, 0, 0, 0, 0]
        # several coroutines at once on one client: serialised, all applied
        await asyncio.gather(*(h.add(1, at=0) for _ in range(50)))
        np.testing.assert_array_equal(await h.read(), [50, 3, 3, 4, 4, 5, 6, 7])
        with pytest.raises(tileatom.NotFound):
            await c.tile("no-such")


def test_poll_and_fileno(client, name):
    t = client.create(name, np.int64, (4,))
    conn = client._conn
    fd = conn.fileno()
    assert fd >= 0 and conn.poll() == 0  # nothing pending
    with client.pipeline() as p:
        for k in range(300):
            p.tile(name).add(1, at=k % 4, return_old=True)
        conn.flush()
        ready = conn.poll()
        for _ in range(1000):  # each wait bounded: 10 s at most in all
            if ready == 300:
                break
            select.select([fd], [], [], 0.01)
            ready = conn.poll()
        assert ready == 300 and conn.pending == 300
        olds = p.execute()
    assert [int(x) for x in olds] == [k // 4 for k in range(300)]
    np.testing.assert_array_equal(t.read(), [75, 75, 75, 75])


@pytest.mark.asyncio
async def test_asyncio_pipeline_runs_in_the_loop(daemon, name):
    async with await tileatom.aio.connect(daemon, timeout=30) as c:
        h = await c.create(name, "int64", 16)
        worker_calls = []
        real = c._in_worker

        async def spy(fn, *args, **kwargs):
            worker_calls.append(getattr(fn, "__name__", fn))
            return await real(fn, *args, **kwargs)

        c._in_worker = spy
        p = c.pipeline()
        for k in range(3000):
            p.tile(name).add(1, at=k % 16, return_old=True)
        q = c.pipeline()
        q.tile(name).add(1, at=0, return_old=True)
        # a single call and two pipelines at once: serialised in the order awaited
        olds, pong, last = await asyncio.gather(p.execute(), c.ping(), q.execute())
        assert [int(x) for x in olds] == [k // 16 for k in range(3000)]
        assert pong is None and [int(x) for x in last] == [188]  # bins 0-7 had 188 adds
        assert worker_calls == ["ping"]  # the pipelines never went to the worker
        np.testing.assert_array_equal(await h.read(), [189] + [188] * 7 + [187] * 8)
        # an error inside a pipeline: raised after all are collected; the client goes on
        r = c.pipeline()
        r.tile(name).add(1, at=99)
        r.tile(name).add(1, at=1)
        with pytest.raises(tileatom.OutOfRange):
            await r.execute()
        np.testing.assert_array_equal((await h.read())[:2], [189, 189])


def test_client_killed_mid_pipeline(client, name, daemon):
    mine = client.create(name, np.int64, (64,))
    mine.write(np.arange(64))
    shared = client.create(name + "s", np.int64, (1,))
    # the victim queues 200,000 adds to the shared counter, collects none, and is killed
    # (SIGKILL) with requests still buffered and responses unread
    script = textwrap.dedent(f"""
        import os, signal, sys, tileatom
        c = tileatom.connect({daemon!r})
        p = c.pipeline()
        t = p.tile({name + 's'!r})
        for i in range(200000):
            t.add(1, at=0)
        sys.stdout.write("queued\\n"); sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=os.environ)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout == "queued\n"
    # the daemon lives; this client's data is exact; the counter holds whole adds only
    client.ping()
    np.testing.assert_array_equal(mine.read(), np.arange(64))
    mine.add(1)
    np.testing.assert_array_equal(mine.read(), np.arange(64) + 1)
    got = int(shared.read()[0])
    assert 0 <= got <= 200000
    with tileatom.connect(daemon) as c2:
        assert c2.tile(name).read()[5] == 6


def test_readme_python_examples(daemon, monkeypatch):
    """README.md's "From Python" section runs as shown."""
    import re
    readme = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
    with open(readme) as f:
        text = f.read()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    monkeypatch.setenv("TILEATOM_SOCKET", daemon)
    exec(compile(blocks[0], "README.md (histogram)", "exec"), {})
    try:
        import torch  # noqa: F401
    except ImportError:
        torch = None
    if torch is not None:
        exec(compile(blocks[1], "README.md (lock)", "exec"), {})
    with tileatom.connect(daemon) as c:
        if torch is not None:
            assert c.tile("lock").read()[0] == 0
            c.destroy("lock")
        c.destroy("hist")


def test_daemon_killed_mid_pipeline(tmp_path):
    """A daemon that dies with responses outstanding: those get ConnectionLost, in place,
    and the client reports it on every later call."""
    binary = os.environ.get("TILEATOM_TEST_DAEMON")
    if not binary:
        pytest.skip("TILEATOM_TEST_DAEMON is not set")
    sock = str(tmp_path / "d.sock")
    proc = subprocess.Popen([binary, "--socket", sock, "--backend", "cpu"],
                            stderr=subprocess.DEVNULL)
    try:
        import time
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        c = tileatom.connect(sock, timeout=30)
        c.create("x", np.int64, (4,))
        p = c.pipeline()
        p.tile("x").add(1, at=0)
        c._conn.flush()
        proc.kill()
        proc.wait()
        with pytest.raises(tileatom.ConnectionLost, match="Broken pipe|Connection reset"):
            for _ in range(1000):  # a write-out every 256 requests meets the dead socket
                p.tile("x").add(1, at=1)
        n = len(p)
        assert n >= 2
        r = p.execute(raise_on_error=False)
        assert len(r) == n
        lost = [i for i, x in enumerate(r) if isinstance(x, tileatom.ConnectionLost)]
        assert lost and lost == list(range(lost[0], n))
        assert all(x == (1, 0) for x in r[:lost[0]])
        with pytest.raises(tileatom.ConnectionLost):
            c.ping()
        c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
