"""Type stubs of tileatom._core, the extension under the tileatom package (internal: use
tileatom.connect and tileatom.Tile)."""

from typing import Any, Callable, NamedTuple

import numpy as np

MAX_RANK: int
NAME_MAX: int

_Operand = (np.ndarray | tuple[int, int, tuple[int, ...]]
            | tuple[int, int, tuple[int, ...], Any])
_Region = tuple[tuple[int, ...], tuple[int, ...]] | None
_Info = tuple[str, int, tuple[int, ...], int, bool]


class OpResult(NamedTuple):
    """What an atomic op did when it returns no old values."""
    applied: int
    skipped: int


class SharedBuffer:
    """Memory shared with the daemon; numpy.frombuffer() views it without a copy."""
    size: int


class Conn:
    """One connection to tileatomd (the handle under tileatom.Client)."""
    closed: bool
    server_version: str
    backend: str
    address: str
    max_frame: int
    pending: int
    aside: int

    def __init__(self, address: str | None = ..., timeout_ms: int = ...,
                 io_timeout_ms: int = ..., auth_file: str | None = ...) -> None: ...
    def close(self) -> None: ...
    def create(self, name: str, dtype_code: int, shape: tuple[int, ...],
               fill: np.ndarray | None, flags: int) -> _Info: ...
    def describe(self, name: str) -> _Info: ...
    def destroy(self, name: str) -> None: ...
    def list(self) -> list[_Info]: ...
    def ping(self) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    def read(self, name: str, region: _Region, out: _Operand, submit: bool) -> None: ...
    def write(self, name: str, region: _Region, values: _Operand, submit: bool) -> None: ...
    def op(self, kind: int, name: str, op: int, region: _Region, dim: int,
           indices: tuple[_Operand, ...] | None, flat: bool, values: _Operand | None,
           compare: _Operand | None, padding: _Operand | None, mask: _Operand | None,
           sem: str | int, scope: str | int, space: str | int, check_bounds: bool,
           want_old: bool, out: _Operand | None, submit: bool) -> OpResult | None: ...
    def at(self, name: str, op: int, flat_index: int, dtype_code: int, value: Any,
           compare: Any, sem: str | int, scope: str | int, space: str | int,
           want_old: bool, submit: bool) -> Any: ...
    def collect(self, n: int = ..., raise_on_error: bool = ...) -> list[Any]: ...
    def set_aside(self) -> None: ...
    def flush(self) -> None: ...
    def fileno(self) -> int: ...
    def poll(self) -> int: ...
    def buffer(self, size: int) -> SharedBuffer: ...


class TileBase:
    """The C part of tileatom.Tile (its read-modify-write ops)."""
    name: str


class PipelineBase:
    """The C part of tileatom.Pipeline: tile(name) returns the cached view."""
    _tiles: dict[str, Any]

    def tile(self, name: str, /) -> Any: ...


class DLPackView:
    """A DLPack tensor consumed from its capsule; freeing it calls the producer's deleter.
    Host tensors expose their memory through the buffer protocol."""
    data: int
    device: tuple[int, int]
    dtype: tuple[int, int, int]
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    byte_offset: int


def dlpack_view(capsule: Any, /) -> DLPackView: ...
def set_errors(base: type, classes: dict[int, type]) -> None: ...
def default_socket() -> str: ...
def cuda_stream_sync(stream: int) -> bool: ...
def torch_bind(tensor_type: type, codes: dict[Any, int], raw_stream: Callable[[int], int] | None,
               current_device: Callable[[], int], check: Callable[[Any, int | None, str], None],
               stream_wait: Callable[[int], None]) -> None: ...
def torch_sync(device_index: int) -> None: ...
def torch_operand(obj: Any, code: int | None,
                  what: str) -> tuple[int, int, tuple[int, ...], Any] | None: ...
def library_version() -> str: ...
