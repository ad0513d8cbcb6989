"""tileatom._errors: the exception classes, one per status code of libtileatom-client.

Codes 1..9 are the daemon's statuses (its message is the exception's text); codes from 100
are raised by the library itself (the connection is then broken: every later call on it
raises ConnectionLost). Each class also derives from the closest builtin exception, so
that ``except KeyError`` or ``except TimeoutError`` catch what a Python user expects.
"""

from __future__ import annotations


class TileatomError(Exception):
    """Base class of every error tileatom raises: ``code`` is the status number,
    ``message`` the daemon's (or the library's) text naming the problem."""

    #: the status code this class stands for (the base: any)
    status: int = -1

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = self.status if code is None else code

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # keeps code through pickling (multiprocessing)
        return (type(self), (self.message, self.code))


class InvalidArgument(TileatomError, ValueError):
    """The request is malformed or illegal (status 1, INVALID_ARGUMENT)."""
    status = 1


class NotFound(TileatomError, LookupError):
    """No such tile (status 2, NOT_FOUND)."""
    status = 2


class AlreadyExists(TileatomError):
    """A tile of that name exists (status 3, ALREADY_EXISTS)."""
    status = 3


class OutOfRange(TileatomError, IndexError):
    """An index or region lies outside the tile (status 4, OUT_OF_RANGE)."""
    status = 4


class ResourceExhausted(TileatomError):
    """A daemon limit: memory, frame size, tiles (status 5, RESOURCE_EXHAUSTED)."""
    status = 5


class Unimplemented(TileatomError, NotImplementedError):
    """The daemon's backend does not implement this (status 6, UNIMPLEMENTED)."""
    status = 6


class Unavailable(TileatomError):
    """The daemon is shutting down or busy (status 7, UNAVAILABLE)."""
    status = 7


class PermissionDenied(TileatomError):
    """Not allowed: a private tile, a failed authentication (status 8)."""
    status = 8


class InternalError(TileatomError):
    """A daemon bug or a device failure (status 9, INTERNAL)."""
    status = 9


class ConnectionLost(TileatomError, ConnectionError):
    """A socket error, or the daemon closed the connection (status 100, IO)."""
    status = 100


class Timeout(TileatomError, TimeoutError):
    """The connect or I/O timeout expired (status 101); the connection is broken."""
    status = 101


class ProtocolError(TileatomError):
    """A malformed or unexpected response, or a version mismatch (status 102)."""
    status = 102


class OutOfMemory(TileatomError, MemoryError):
    """The client ran out of memory (status 103)."""
    status = 103


class StateError(TileatomError):
    """Not allowed now (status 104): e.g. a synchronous call while a pipeline's
    responses are uncollected, or a call on a closed connection."""
    status = 104


#: status code -> exception class
BY_CODE: dict[int, type[TileatomError]] = {
    cls.status: cls
    for cls in (InvalidArgument, NotFound, AlreadyExists, OutOfRange, ResourceExhausted,
                Unimplemented, Unavailable, PermissionDenied, InternalError, ConnectionLost,
                Timeout, ProtocolError, OutOfMemory, StateError)
}
