"""Handles: what the C API's opaque pointers stand for in the in-memory client library.

libfdb_c hands out ``FDBDatabase*``, ``FDBTransaction*`` and ``FDBFuture*`` pointers that stay
valid until their ``*_destroy`` call; here each is a non-zero integer naming a Python object.
This module also reads the C arguments the binding passes (byte buffers) and writes its
out-parameters (``ctypes.byref`` objects), as libfdb_c's functions do.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable
from typing import Any

from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._futures import Future

__all__ = ["Handle", "Handles", "PendingFuture", "buffer_bytes", "point_out", "set_out"]

Handle = int


def buffer_bytes(data: Any, length: int) -> bytes:
    """The ``length`` bytes a C buffer argument holds (the binding passes ``bytes``)."""
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data[:length]
    return ctypes.string_at(data, length)


def set_out(argument: Any, value: Any) -> None:
    """Store ``value`` in an out-parameter passed as ``ctypes.byref(obj)`` or a pointer."""
    target = getattr(argument, "_obj", None)
    if target is None:
        target = argument.contents
    target.value = value


def point_out(argument: Any, address: int) -> None:
    """Make the pointer an out-parameter refers to point at ``address``."""
    target = getattr(argument, "_obj", None)
    if target is None:
        target = argument.contents
    ctypes.c_void_p.from_address(ctypes.addressof(target)).value = address


class PendingFuture:
    """What a ``FDBFuture*`` handle refers to: an engine future, how to convert its result
    for the C API, and the buffers handed out of it (alive until ``fdb_future_destroy``)."""

    __slots__ = ("buffers", "convert", "engine_future")

    def __init__(self, engine_future: Future, convert: Callable[[Any], Any] | None = None) -> None:
        self.engine_future = engine_future
        self.convert = convert
        self.buffers: list[Any] = []

    def outcome(self) -> tuple[Any, int]:
        """Wait until ready; (result, 0) or (None, error code)."""
        try:
            result = self.engine_future.wait()
        except FDBError as error:
            return None, error.code
        return (self.convert(result) if self.convert else result), 0


class Handles:
    """The table from handles to objects. Thread-safe; O(1) per operation."""

    def __init__(self) -> None:
        self._objects: dict[Handle, Any] = {}
        self._numbers = itertools.count(0x1000, 0x10)
        self._lock = threading.Lock()

    @staticmethod
    def number(handle: Any) -> Handle:
        """A handle as an int: the binding passes ``c_void_p`` objects or ints."""
        number = handle.value if isinstance(handle, ctypes.c_void_p) else handle
        return int(number or 0)

    def new(self, thing: Any) -> Handle:
        """A new handle for ``thing``."""
        with self._lock:
            handle = next(self._numbers)
            self._objects[handle] = thing
        return handle

    def get(self, handle: Any) -> Any:
        """The object of a live handle (KeyError for a destroyed one)."""
        return self._objects[self.number(handle)]

    def future_at(self, handle: Any) -> PendingFuture:
        """The future of a live future handle."""
        future: PendingFuture = self._objects[self.number(handle)]
        return future

    def drop(self, handle: Any) -> Any:
        """Forget a handle; its object, or None when it was already gone."""
        with self._lock:
            return self._objects.pop(self.number(handle), None)

    def future(
        self, call: Callable[[], Any], convert: Callable[[Any], Any] | None = None
    ) -> Handle:
        """A future handle for ``call()``: the engine future it returns (a plain result
        becomes a ready future), or its FDBError as a failed future, as a C call that returns
        ``FDBFuture*`` reports errors through the future."""
        try:
            engine_future = call()
        except FDBError as error:
            engine_future = Future.failed(error)
        if not isinstance(engine_future, Future):
            engine_future = Future.completed(engine_future)
        return self.new(PendingFuture(engine_future, convert))
