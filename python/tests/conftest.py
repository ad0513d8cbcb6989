"""conftest.py: fixtures of the tileatom Python suite: one tileatomd (CPU backend) per test
session on a private Unix socket (the binary named by $TILEATOM_TEST_DAEMON, as
tests/check_python.sh sets it), a connected client, and unique tile names."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
import time

import pytest

import tileatom

_names = itertools.count()


@pytest.fixture(scope="session")
def daemon():
    """The socket path of a tileatomd started for this session (stopped at its end)."""
    binary = os.environ.get("TILEATOM_TEST_DAEMON")
    if not binary or not os.access(binary, os.X_OK):
        pytest.skip("TILEATOM_TEST_DAEMON does not name a tileatomd binary")
    tmp = tempfile.mkdtemp(prefix="tileatom-py-")
    sock = os.path.join(tmp, "ta.sock")
    log = open(os.path.join(tmp, "tileatomd.log"), "wb")
    proc = subprocess.Popen([binary, "--socket", sock, "--backend", "cpu"], stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.close()
            with open(os.path.join(tmp, "tileatomd.log")) as f:
                pytest.fail("tileatomd did not start: " + f.read())
        time.sleep(0.02)
    yield sock
    assert proc.poll() is None, "tileatomd died during the tests"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def client(daemon):
    """A client connected to the session's daemon."""
    with tileatom.connect(daemon, timeout=30) as c:
        yield c


@pytest.fixture
def name():
    """A tile name unique in the session."""
    return f"t{next(_names)}"
