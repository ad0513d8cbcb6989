"""tileatom.aio: the asyncio client.

Each AsyncClient holds one ordinary connection. A pipeline (``await p.execute()``, the way
to send many small requests) runs in the event loop itself: its requests are submitted
and written out, the loop waits on the connection's socket (``loop.add_reader`` on
``tileatom_fd``) until ``tileatom_poll`` says every response is in, and they are then
collected without blocking. Single calls (``await tile.add(...)``, create, read, ...) are
handed to the client's one worker thread (``loop.run_in_executor``; the extension releases
the GIL while the library waits). Calls and pipelines of one client run one after the
other, in the order they were awaited; open several clients for parallel requests.

    async with await tileatom.aio.connect() as c:
        h = await c.create("hist", "int64", 256)
        await h.add(1, at=3)
        counts = await h.read()
        p = c.pipeline()
        for k in range(100):
            p.tile("hist").add(1, at=k)
        results = await p.execute()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
from typing import Any, Callable, Iterable

import numpy as np

from . import Client, Tile

__all__ = ["connect", "AsyncClient", "AsyncTile", "AsyncPipeline"]

# the Tile methods an AsyncTile offers as coroutines
_TILE_METHODS = ("add", "sub", "min", "max", "exch", "cas", "and_", "or_", "xor",
                 "scatter_add_", "scatter_reduce_", "index_add_", "index_put_", "gather",
                 "load", "store", "hist", "read", "write", "destroy")


class AsyncTile:
    """A Tile whose operations are coroutines (run on the client's worker thread). The
    in-place torch-style ops (scatter_add_, ...) return this AsyncTile instead of a
    Tile."""

    def __init__(self, client: "AsyncClient", tile: Tile) -> None:
        self._client = client
        self._tile = tile
        #: the tile's name, dtype and shape (as Tile)
        self.name, self.dtype, self.shape = tile.name, tile.dtype, tile.shape

    def __getitem__(self, key: Any) -> "AsyncTile":
        """A view of a box of the tile, as Tile.__getitem__."""
        return AsyncTile(self._client, self._tile[key])

    def __repr__(self) -> str:
        return f"<tileatom.aio.AsyncTile {self._tile!r}>"

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in _TILE_METHODS:
            raise AttributeError(name)
        method = getattr(self._tile, name)

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            r = await self._client._run(method, *args, **kwargs)
            return self if r is self._tile else r

        return call


class AsyncPipeline:
    """Requests queued in Python (``p.tile(name).add(...)`` returns at once) and sent,
    then collected, in one go by ``await p.execute()`` on the worker thread, through the
    synchronous Pipeline. Results as Pipeline.execute()."""

    def __init__(self, client: "AsyncClient") -> None:
        self._client = client
        self._queued: list[tuple[str, str, tuple, dict]] = []

    def tile(self, name: str) -> "_QueuedTile":
        """The queuing view of tile ``name``."""
        return _QueuedTile(self, name)

    def __len__(self) -> int:
        return len(self._queued)

    async def __aenter__(self) -> "AsyncPipeline":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._queued = []

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Sends every queued request, waits in the event loop (on the socket) until all
        are answered, then returns their results in order (as Pipeline.execute)."""
        queued, self._queued = self._queued, []
        c = self._client
        sync = c._sync
        async with c._lock:
            # names this client has not described: one round trip each, on the worker
            for name in dict.fromkeys(q[0] for q in queued):
                if name not in sync._known:
                    await c._in_worker(sync.tile, name)
            p = sync.pipeline()
            try:
                for name, method, args, kwargs in queued:
                    getattr(p.tile(name), method)(*args, **kwargs)
                sync._conn.flush()
                await c._wait_ready(sync._conn.pending)
                return p.execute(raise_on_error)
            finally:
                p.__exit__(None, None, None)  # collects what an exception left behind


class _QueuedTile:
    """What AsyncPipeline.tile returns: each op call records itself for execute()."""

    def __init__(self, pipeline: AsyncPipeline, name: str) -> None:
        self._pipeline = pipeline
        self._name = name

    def __getattr__(self, method: str) -> Callable[..., None]:
        if method not in _TILE_METHODS or method == "destroy":
            raise AttributeError(method)

        def record(*args: Any, **kwargs: Any) -> None:
            self._pipeline._queued.append((self._name, method, args, kwargs))

        return record


class AsyncClient:
    """An asyncio connection to tileatomd: the methods of Client as coroutines."""

    def __init__(self, sync: Client, executor: concurrent.futures.ThreadPoolExecutor) -> None:
        self._sync = sync
        self._executor = executor
        # one call or pipeline at a time: the worker's calls and the loop's pipelines share
        # the connection, which takes no synchronous call while responses are outstanding
        self._lock = asyncio.Lock()

    async def _in_worker(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """fn(*args, **kwargs) on the worker thread (the caller holds _lock)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor,
                                          functools.partial(fn, *args, **kwargs))

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async with self._lock:
            return await self._in_worker(fn, *args, **kwargs)

    async def _wait_ready(self, n: int) -> None:
        """Waits in the event loop until the oldest n pending responses are in (the
        socket readable, then Conn.poll), without blocking it."""
        conn = self._sync._conn
        if conn.poll() >= n:
            return
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def readable() -> None:
            if not done.done() and conn.poll() >= n:
                done.set_result(None)

        fd = conn.fileno()
        loop.add_reader(fd, readable)
        try:
            await done
        finally:
            loop.remove_reader(fd)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection and stops the worker thread."""
        try:
            await self._run(self._sync.close)
        finally:
            self._executor.shutdown(wait=False)

    @property
    def sync(self) -> Client:
        """The underlying synchronous Client (use it only from the worker's calls)."""
        return self._sync

    async def create(self, name: str, dtype: Any, shape: int | Iterable[int], *,
                     private: bool = False, fill: Any = None) -> AsyncTile:
        """As Client.create."""
        t = await self._run(self._sync.create, name, dtype, shape, private=private,
                            fill=fill)
        return AsyncTile(self, t)

    async def tile(self, name: str) -> AsyncTile:
        """As Client.tile."""
        return AsyncTile(self, await self._run(self._sync.tile, name))

    async def tiles(self) -> list[AsyncTile]:
        """As Client.tiles."""
        return [AsyncTile(self, t) for t in await self._run(self._sync.tiles)]

    async def destroy(self, name: str) -> None:
        """As Client.destroy."""
        await self._run(self._sync.destroy, name)

    async def ping(self) -> None:
        """As Client.ping."""
        await self._run(self._sync.ping)

    async def stats(self) -> dict[str, Any]:
        """As Client.stats."""
        return await self._run(self._sync.stats)

    async def shared_array(self, shape: int | Iterable[int], dtype: Any) -> np.ndarray:
        """As Client.shared_array."""
        return await self._run(self._sync.shared_array, shape, dtype)

    def pipeline(self) -> AsyncPipeline:
        """An AsyncPipeline on this connection."""
        return AsyncPipeline(self)


async def connect(address: str | os.PathLike | None = None, *,
                  auth_file: str | os.PathLike | None = None,
                  timeout: float | None = None) -> AsyncClient:
    """Connects (on a new worker thread) with tileatom.connect's arguments and defaults."""
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                     thread_name_prefix="tileatom-aio")
    loop = asyncio.get_running_loop()
    try:
        sync = await loop.run_in_executor(
            executor, functools.partial(Client, address, auth_file=auth_file,
                                        timeout=timeout))
    except BaseException:
        executor.shutdown(wait=False)
        raise
    return AsyncClient(sync, executor)
