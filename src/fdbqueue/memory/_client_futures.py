"""The ``fdb_future_*`` functions of the in-memory client library.

As libfdb_c (``bindings/c/fdb_c.cpp``, ``fdb_c.h``): destroying a future that is not ready
cancels it (so a pending watch whose binding object is collected stops); a callback is called
at once, on the calling thread, when the future is ready, and otherwise later from the network
thread; results are copied into buffers that live until the future is destroyed.
"""

from __future__ import annotations

import ctypes
import queue
from collections.abc import Callable
from typing import Any

from fdbqueue.memory._client_handles import Handles, PendingFuture, point_out, set_out

__all__ = ["FutureFunctions"]


class FutureFunctions:
    """``fdb_future_*``: results, errors, readiness and callbacks of future handles."""

    def __init__(self, handles: Handles, callbacks: queue.SimpleQueue[Callable[[], Any] | None]):
        self.handles = handles
        self.callbacks = callbacks  # run by the network thread

    def fdb_future_destroy(self, handle: Any) -> None:
        future: PendingFuture | None = self.handles.drop(handle)
        if future is not None and not future.engine_future.is_ready():
            future.engine_future.cancel()  # libfdb_c: destroying a future cancels it

    def fdb_future_cancel(self, handle: Any) -> None:
        self.handles.future_at(handle).engine_future.cancel()

    def fdb_future_release_memory(self, handle: Any) -> None:
        self.handles.future_at(handle).buffers.clear()

    def fdb_future_is_ready(self, handle: Any) -> int:
        return int(self.handles.future_at(handle).engine_future.is_ready())

    def fdb_future_block_until_ready(self, handle: Any) -> int:
        self.handles.future_at(handle).engine_future.block_until_ready()
        return 0

    def fdb_future_set_callback(self, handle: Any, callback: Any, parameter: Any) -> int:
        engine_future = self.handles.future_at(handle).engine_future
        pointer = self.handles.number(handle)

        def call() -> None:
            callback(pointer)

        if engine_future.is_ready():
            call()
        else:
            engine_future.on_ready(lambda _: self.callbacks.put(call))
        return 0

    def fdb_future_get_error(self, handle: Any) -> int:
        return self.handles.future_at(handle).outcome()[1]

    def fdb_future_get_int64(self, handle: Any, out: Any) -> int:
        result, code = self.handles.future_at(handle).outcome()
        if not code:
            set_out(out, int(result))
        return code

    fdb_future_get_uint64 = fdb_future_get_int64

    def fdb_future_get_value(self, handle: Any, present: Any, out: Any, length: Any) -> int:
        future = self.handles.future_at(handle)
        result, code = future.outcome()
        if code:
            return code
        set_out(present, int(result is not None))
        if result is not None:
            self._hand_out(future, result, out, length)
        return 0

    def fdb_future_get_key(self, handle: Any, out: Any, length: Any) -> int:
        future = self.handles.future_at(handle)
        result, code = future.outcome()
        if not code:
            self._hand_out(future, result, out, length)
        return code

    @staticmethod
    def _hand_out(future: PendingFuture, data: bytes, out: Any, length: Any) -> None:
        buffer = ctypes.create_string_buffer(data, max(1, len(data)))
        future.buffers.append(buffer)
        point_out(out, ctypes.addressof(buffer))
        set_out(length, len(data))

    def fdb_future_get_keyvalue_array(self, handle: Any, out: Any, count: Any, more: Any) -> int:
        from fdb.impl import KeyValueStruct  # the binding's own layout (packing differs)

        future = self.handles.future_at(handle)
        result, code = future.outcome()
        if code:
            return code
        rows, has_more = result
        array = (KeyValueStruct * max(1, len(rows)))()
        future.buffers.append(array)
        for index, (key, value) in enumerate(rows):
            key_buffer = ctypes.create_string_buffer(key, max(1, len(key)))
            value_buffer = ctypes.create_string_buffer(value, max(1, len(value)))
            future.buffers += (key_buffer, value_buffer)
            entry = array[index]
            entry.key = ctypes.cast(key_buffer, ctypes.POINTER(ctypes.c_byte))
            entry.key_length = len(key)
            entry.value = ctypes.cast(value_buffer, ctypes.POINTER(ctypes.c_byte))
            entry.value_length = len(value)
        point_out(out, ctypes.addressof(array))
        set_out(count, len(rows))
        set_out(more, int(has_more))
        return 0
