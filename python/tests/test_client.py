"""test_client.py: connections (the CLI's defaults), tile management, statuses as exception
classes carrying the daemon's message, and shared arrays."""

from __future__ import annotations

import numpy as np
import pytest

import tileatom


def test_connect_defaults_from_environment(daemon, monkeypatch, name):
    monkeypatch.setenv("TILEATOM_SOCKET", daemon)
    assert tileatom.default_socket() == daemon
    with tileatom.connect() as c:
        assert c.address == daemon and c.backend == "cpu" and not c.closed
        assert c.server_version and c.max_frame > 0
        c.ping()
        c.create(name, np.int32, 3)
    assert c.closed
    with pytest.raises(tileatom.StateError, match="closed"):
        c.ping()


def test_connect_failure_names_the_socket(tmp_path):
    missing = str(tmp_path / "none.sock")
    with pytest.raises(tileatom.ConnectionLost) as e:
        tileatom.connect(missing, timeout=5)
    assert e.value.code == 100 and missing in str(e.value)
    assert isinstance(e.value, ConnectionError)


def test_tile_management(client, name):
    t = client.create(name, "float32", (2, 3), fill=1.5)
    assert repr(t) == f"<tileatom.Tile '{name}' float32[2, 3]>"
    np.testing.assert_array_equal(t.read(), np.full((2, 3), 1.5, np.float32))
    u = client.tile(name)
    assert (u.name, u.dtype, u.shape, u.private) == (name, np.dtype(np.float32), (2, 3), False)
    assert name in client and name + "x" not in client
    assert name in [x.name for x in client.tiles()]
    p = client.create(name + "p", np.int64, 4, private=True)
    assert p.private and client.tile(name + "p").private
    t.destroy()
    assert name not in client
    st = client.stats()
    assert st["backend"] == "cpu" and st["tiles"] >= 1 and st["requests"] > 0


def test_statuses_are_exception_classes(client, name):
    f = client.create(name, np.float32, (4,))
    with pytest.raises(tileatom.AlreadyExists, match=f"tile '{name}' already exists"):
        client.create(name, np.float32, (4,))
    with pytest.raises(tileatom.NotFound, match="no tile named 'no-such'") as e:
        client.tile("no-such")
    assert e.value.code == 2 and isinstance(e.value, LookupError)
    with pytest.raises(tileatom.InvalidArgument, match="needs an integer dtype") as e:
        f.and_(np.ones(4, np.float32))
    assert e.value.code == 1 and isinstance(e.value, ValueError)
    with pytest.raises(tileatom.InvalidArgument, match="sem release is not valid for load"):
        f.load(1, sem="release")
    with pytest.raises(tileatom.ResourceExhausted, match="max_tile_bytes"):
        client.create(name + "huge", np.int64, (2**40,))
    with pytest.raises(tileatom.NotFound):
        client.destroy("no-such")
    assert all(issubclass(c, tileatom.TileatomError)
               for c in (tileatom.PermissionDenied, tileatom.Unavailable,
                         tileatom.Timeout, tileatom.ProtocolError))
    # the connection stays usable after daemon errors
    f.add(2, at=1)
    np.testing.assert_array_equal(f.read(), [0, 2, 0, 0])


def test_unknown_names_and_dtypes(client, name):
    with pytest.raises(TypeError, match="no dtype"):
        client.create(name, np.int8, 4)
    t = client.create(name, np.int32, 4)
    with pytest.raises(ValueError, match="unknown sem"):
        t.add(1, at=0, sem="sequential")
    with pytest.raises(ValueError, match="unknown scope"):
        t.add(np.ones(4, np.int32), scope="galaxy")


def test_shared_arrays(client, name):
    keys = client.shared_array(1000, np.int32)
    assert keys.shape == (1000,) and not keys.any()
    keys[:] = np.arange(1000) % 10
    h = client.create(name, np.int32, 10)
    assert h.hist(keys) == (1000, 0)
    counts = client.shared_array((10,), np.int32)
    assert h.read(out=counts) is counts
    np.testing.assert_array_equal(counts, np.full(10, 100))
    old = client.shared_array(3, np.int32)
    res = h.add(np.ones(3, np.int32), at=keys[:3], return_old=True, out=old)
    assert res is old
    np.testing.assert_array_equal(old, [100, 100, 100])
    np.testing.assert_array_equal(h.gather([0, 1, 2]), [101, 101, 101])


def test_shared_array_outlives_close(daemon, name):
    c = tileatom.connect(daemon)
    a = c.shared_array((2, 2), np.float64)
    a[:] = 3.0
    c.close()
    assert c.closed
    np.testing.assert_array_equal(a, np.full((2, 2), 3.0))  # still mapped
    with pytest.raises(tileatom.StateError):
        c.shared_array(4, np.int32)
    del a  # the last one: the socket closes now


def test_timeout_on_a_silent_daemon(tmp_path):
    import socket
    path = str(tmp_path / "silent.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)  # accepts into the backlog, never answers the handshake
    try:
        with pytest.raises(tileatom.Timeout) as e:
            tileatom.connect(path, timeout=0.2)
        assert e.value.code == 101 and isinstance(e.value, TimeoutError)
    finally:
        srv.close()


def test_one_client_shared_by_threads(client, name):
    import threading
    t = client.create(name, np.int64, (4,))

    def work(k):
        for _ in range(500):
            t.add(1, at=k % 4)
        t.add(np.ones(4, np.int64))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    np.testing.assert_array_equal(t.read(), np.full(4, 1000 + 8))


def test_cuda_stream_sync_without_a_driver() -> None:
    """Without the CUDA driver in the process the library cannot wait for a stream: the
    extension says so (False) and the package then waits torch's way."""
    with open("/proc/self/maps") as maps:
        if any("libcuda.so" in line for line in maps):
            pytest.skip("this process has loaded the CUDA driver")
    assert tileatom._core.cuda_stream_sync(0) is False
    assert tileatom._core.cuda_stream_sync(0x5000) is False
    with pytest.raises(TypeError):
        tileatom._core.cuda_stream_sync("stream")  # type: ignore[arg-type]
