"""Futures and values with the ``fdb`` binding's shapes.

The in-memory database completes most futures before returning them; watches complete later,
from the thread whose commit changed the key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fdbqueue.memory.errors import FDBError

__all__ = ["Future", "Value"]


_STATE_LOCK = threading.Lock()  # guards every Future's state; held only briefly


class Future:
    """The result of an asynchronous operation: ``wait()`` returns it or raises its error.

    A future that is ready when it is made (most of them, in memory) costs no thread event;
    one is made only for a caller that waits on a future not yet ready (a watch).
    """

    __slots__ = ("_callbacks", "_done", "_error", "_event", "_result")

    def __init__(self) -> None:
        self._done = False
        self._event: threading.Event | None = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future], None]] | None = None

    @classmethod
    def completed(cls, result: Any = None) -> Future:
        """A future that is already ready with ``result``."""
        future = cls()
        future._result, future._done = result, True
        return future

    @classmethod
    def failed(cls, error: BaseException) -> Future:
        """A future that is already ready with ``error``."""
        future = cls()
        future._error, future._done = error, True
        return future

    def _complete(self, result: Any, error: BaseException | None) -> bool:
        with _STATE_LOCK:
            if self._done:
                return False
            self._result, self._error, self._done = result, error, True
            callbacks, self._callbacks = self._callbacks, None
            event = self._event
        if event is not None:
            event.set()
        for callback in callbacks or ():
            callback(self)
        return True

    def set_result(self, result: Any = None) -> bool:
        """Make the future ready with ``result``; False if it already was."""
        return self._complete(result, None)

    def set_error(self, error: BaseException) -> bool:
        """Make the future ready with ``error``; False if it already was."""
        return self._complete(None, error)

    def is_ready(self) -> bool:
        """True once the future has a result or an error."""
        return self._done

    def block_until_ready(self) -> None:
        """Wait until the future is ready, without raising its error."""
        if self._done:
            return
        with _STATE_LOCK:
            if self._done:
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        event.wait()

    def wait(self) -> Any:
        """Wait until ready, then return the result or raise the error."""
        self.block_until_ready()
        if self._error is not None:
            raise self._error
        return self._result

    def on_ready(self, callback: Callable[[Future], None]) -> None:
        """Call ``callback(self)`` once ready: now if it already is, else from the thread that
        completes it."""
        with _STATE_LOCK:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        callback(self)

    def cancel(self) -> None:
        """Cancel the future: if not yet ready, it becomes ready with error 1101."""
        self.set_error(FDBError(1101))


class Value:
    """What a point read returns, like the binding's ``Value``: bytes-like, ``== None`` when
    the key is absent, with ``present()``."""

    __slots__ = ("value",)

    def __init__(self, value: bytes | None) -> None:
        self.value = value

    def wait(self) -> Value:
        """Return self (the value is already known)."""
        return self

    def present(self) -> bool:
        """True when the key exists."""
        return self.value is not None

    def is_ready(self) -> bool:
        """Always True."""
        return True

    def _bytes(self) -> bytes:
        if self.value is None:
            raise TypeError("the key is absent: the value is None")
        return self.value

    def as_foundationdb_key(self) -> bytes:
        return self._bytes()

    def as_foundationdb_value(self) -> bytes:
        return self._bytes()

    def __bytes__(self) -> bytes:
        return self._bytes()

    def __len__(self) -> int:
        return len(self._bytes())

    def __getitem__(self, index: Any) -> Any:
        return self._bytes()[index]

    def __iter__(self) -> Any:
        return iter(self._bytes())

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Value):
            other = other.value
        return self.value == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __lt__(self, other: Any) -> bool:
        return self._bytes() < (other._bytes() if isinstance(other, Value) else other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __add__(self, other: Any) -> bytes:
        return self._bytes() + (other._bytes() if isinstance(other, Value) else other)

    def __repr__(self) -> str:
        return repr(self.value)

    def __str__(self) -> str:
        return str(self.value)

    def decode(self, *args: Any) -> str:
        return self._bytes().decode(*args)

    def startswith(self, prefix: Any) -> bool:
        return self._bytes().startswith(prefix)
