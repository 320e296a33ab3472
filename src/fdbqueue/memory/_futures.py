"""Futures, values and keys with the ``fdb`` binding's shapes (``fdb/impl.py``).

The in-memory database computes a read's result when the read is issued, but the future is
*ready* only once the read's simulated latency has run from that moment (``ready_at``, a
``time.monotonic()`` instant): ``wait``/``value`` sleep what is left of it, ``is_ready`` is
False until then and ``on_ready`` callbacks run then (from a timer thread). So reads issued
together overlap their latencies, as the binding's futures do. Watches and versionstamps
complete later, from the thread whose commit completes them.

* :class:`Future` is the binding's ``Future``: ``wait``, ``is_ready``, ``block_until_ready``,
  ``on_ready``, ``cancel``, the static ``wait_for_any`` and the asyncio-style ``done``,
  ``result``, ``exception``, ``cancelled``.
* :class:`FutureString` is the binding's ``FutureString``, a future of bytes that behaves as
  the bytes themselves: :class:`Value` (what ``tr.get``/``tr[key]`` return, ``None`` inside
  for a missing key) and :class:`Key` (``tr.get_key``, ``tr.get_versionstamp``).

Every wait of the in-memory database goes through :meth:`Future.block_until_ready`: ``wait``,
``value``, the static ``wait_for_any``, a range read's batches and the engine's simulated
latencies (:func:`sleep_until`). So replacing that one method (as :mod:`fdbqueue.asyncio`
does, like the binding's ``fdb.init(event_model="gevent")``) takes over every wait.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fdbqueue.memory._errors import FDBError

__all__ = ["Future", "FutureString", "Key", "Value"]


_STATE_LOCK = threading.Lock()  # guards every Future's state; held only briefly


def sleep_until(instant: float) -> None:
    """Wait until ``time.monotonic()`` reaches ``instant`` (at once if it has).

    The wait goes through :meth:`Future.block_until_ready` of a future ready at ``instant``,
    so that every simulated wait of the engine (read, GRV and commit latencies, a commit
    waiting for its reads) is a wait on a future: whoever replaces ``block_until_ready``
    (:mod:`fdbqueue.asyncio` does, as the binding's ``fdb.init(event_model="gevent")`` does)
    sees them all.
    """
    if instant and instant > time.monotonic():
        Future.completed(None, instant).block_until_ready()


def _sleep_until(instant: float) -> None:
    """Sleep the thread until ``time.monotonic()`` reaches ``instant``."""
    delay = instant - time.monotonic()
    if delay > 0:
        time.sleep(delay)


class _Timer:
    """One daemon thread that calls functions at given ``time.monotonic()`` instants: the
    ``on_ready`` callbacks of futures whose result is known but whose latency has not run."""

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def call_at(self, instant: float, function: Callable[[], None]) -> None:
        """Call ``function()`` from the timer thread once ``instant`` has come."""
        with self._condition:
            heapq.heappush(self._queue, (instant, next(self._order), function))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="fdbqueue.memory-timer", daemon=True
                )
                self._thread.start()
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._queue or self._queue[0][0] > time.monotonic():
                    timeout = self._queue[0][0] - time.monotonic() if self._queue else None
                    self._condition.wait(timeout)
                _, _, function = heapq.heappop(self._queue)
            try:
                function()
            except Exception:  # a callback's own error must not stop the timer
                sys.excepthook(*sys.exc_info())


_TIMER = _Timer()


class Future:
    """The result of an asynchronous operation: ``wait()`` returns it or raises its error.

    A future whose result is known when it is made (most of them, in memory) costs no thread
    event; one is made only for a caller that waits on a future not yet completed (a watch).
    A future made with a ``ready_at`` instant (a read and its simulated latency) has its
    result already but is ready only from that instant (see the module docstring).
    """

    __slots__ = ("_callbacks", "_done", "_error", "_event", "_ready_at", "_result")

    def __init__(self) -> None:
        self._done = False
        self._ready_at = 0.0  # a time.monotonic() instant; 0: ready once done
        self._event: threading.Event | None = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future], None]] | None = None

    @classmethod
    def completed(cls, result: Any = None, ready_at: float = 0.0) -> Future:
        """A future of ``result``, ready now or from the ``time.monotonic()`` instant
        ``ready_at``."""
        future = cls()
        future._result, future._done, future._ready_at = result, True, ready_at
        return future

    @classmethod
    def failed(cls, error: BaseException, ready_at: float = 0.0) -> Future:
        """A future of ``error``, ready now or from the instant ``ready_at``."""
        future = cls()
        future._error, future._done, future._ready_at = error, True, ready_at
        return future

    @property
    def ready_at(self) -> float:
        """The ``time.monotonic()`` instant from which a completed future is ready (0: as soon
        as it completes)."""
        return self._ready_at

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
        """True once the future has a result or an error (and its latency has run)."""
        if not self._done:
            return False
        if self._ready_at:
            if time.monotonic() < self._ready_at:
                return False
            self._ready_at = 0.0
        return True

    def block_until_ready(self) -> None:
        """Wait until the future is ready, without raising its error."""
        if self._done:
            if self._ready_at:
                _sleep_until(self._ready_at)
                self._ready_at = 0.0
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
        completes it (or, for a result waiting out its latency, from a timer thread then)."""
        with _STATE_LOCK:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        if not self.is_ready():
            _TIMER.call_at(self._ready_at, functools.partial(callback, self))
            return
        callback(self)

    def cancel(self) -> None:
        """Cancel the future: if not yet ready, it becomes ready with error 1101."""
        self.set_error(FDBError(1101))

    @staticmethod
    def wait_for_any(*futures: Future) -> int:
        """Wait until at least one of ``futures`` is ready; return the index of one that is.

        As the binding's static ``Future.wait_for_any``: the index is that of the first future
        whose ``on_ready`` callback runs, so of the first ready one in argument order when some
        already are; it does not raise a ready future's error.

        Raises:
            ValueError: no future given (the binding's message).
        """
        if not futures:
            raise ValueError("wait_for_any requires at least one future")
        first = Future()  # its result: the index of the first future ready

        def note(index: int, _future: Future) -> None:
            first.set_result(index)  # False, changing nothing, for every later one

        for index, future in enumerate(futures):
            future.on_ready(functools.partial(note, index))
            if first._done:
                break
        first.block_until_ready()  # the one blocking path of futures (see sleep_until)
        index_ready: int = first._result
        return index_ready

    # The asyncio future protocol, as the binding's Future has it.

    def done(self) -> bool:
        """True once the future is ready (the binding's ``done``, an alias of ``is_ready``)."""
        return self.is_ready()

    def result(self) -> Any:
        """What ``wait()`` returns (or raises), without waiting.

        Raises:
            Exception: ``"Future result not available"`` when not yet ready, as the binding.
        """
        if not self.done():
            raise Exception("Future result not available")
        return self.wait()

    def exception(self) -> BaseException | None:
        """The error ``wait()`` would raise, or None for a success, without waiting.

        Raises:
            Exception: ``"Future result not available"`` when not yet ready, as the binding.
        """
        if not self.done():
            raise Exception("Future result not available")
        try:
            self.wait()
        except BaseException as error:
            return error
        return None

    def cancelled(self) -> bool:
        """True when the future is ready with error 1101 (``operation_cancelled``), as the
        binding decides it; False while it is not ready."""
        if not self.done():
            return False
        return getattr(self.exception(), "code", 0) == 1101


_PENDING: Any = object()  # FutureString's "no value yet" marker


class FutureString(Future):
    """A future of bytes that stands for the bytes, as the binding's ``FutureString``.

    ``value`` is the bytes (``None`` for a :class:`Value` of a missing key); reading it waits
    for the future and raises its error. Everything else forwards to ``value`` as upstream's
    class does:

    * ``isinstance(x, bytes)`` is True, through the binding's ``__class__`` property that
      answers ``bytes`` (``type(x)`` stays the real class);
    * every public method of ``bytes`` (``decode``, ``startswith``, ``split``, ...) plus
      ``__getitem__``, ``__len__`` and ``__hash__`` call the bytes method on ``value``, with
      positional arguments only (upstream's wrappers take no keyword arguments); so
      ``len()``, ``hash()`` and ``bool()`` of a missing value raise ``TypeError``, and so does
      ``if tr[key]:`` on a missing key;
    * ``==``/``!=`` compare ``value`` (a missing value ``== None``); ``<``, ``<=``, ``>``,
      ``>=``, ``+`` (both sides), ``*`` (both sides), ``int()``, ``str()``, ``repr()`` and
      ``bytes()`` use ``value``;
    * there is no ``__iter__`` nor ``__contains__``: iteration falls back to ``__getitem__``
      and yields ints, so ``b"a" in x`` is False, as upstream (use ``bytes(x)``).

    ``wait()`` returns the future itself (as upstream's ``LazyFuture.wait``), after raising
    its error if it failed.
    """

    __slots__ = ()

    def __init__(self, value: Any = _PENDING, ready_at: float = 0.0) -> None:
        """Make a future of ``value`` (bytes, or None for a missing value), ready now or
        from the ``time.monotonic()`` instant ``ready_at``; or a pending one without an
        argument (completed later with ``set_result``)."""
        Future.__init__(self)
        if value is not _PENDING:
            self._result, self._done, self._ready_at = value, True, ready_at

    # The binding's trick: isinstance(x, bytes) is True. Neither this class nor its
    # subclasses may use the zero-argument super() (https://bugs.python.org/issue12370).
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return bytes

    @property
    def value(self) -> Any:
        """The bytes (None for a missing value): waits until ready and raises the error of a
        failed future, as the binding's ``value``."""
        self.block_until_ready()
        if self._error is not None:
            raise self._error
        return self._result

    def wait(self) -> Any:
        """Wait until ready; return this future itself, or raise its error."""
        self.value  # noqa: B018 -- waits and raises, as upstream's LazyFuture.wait
        return self

    def as_foundationdb_key(self) -> Any:
        """``value``, so that the future can be passed as a key."""
        return self.value

    def as_foundationdb_value(self) -> Any:
        """``value``, so that the future can be passed as a value."""
        return self.value

    def __str__(self) -> str:
        return str(self.value)

    def __bytes__(self) -> bytes:
        value: bytes = self.value  # None makes bytes() raise TypeError, as upstream
        return value

    def __repr__(self) -> str:
        return repr(self.value)

    @staticmethod
    def _plain(other: Any) -> Any:
        return other.value if isinstance(other, FutureString) else other

    def __add__(self, other: Any) -> Any:
        return self.value + self._plain(other)

    def __radd__(self, other: Any) -> Any:
        return self._plain(other) + self.value

    def __mul__(self, times: Any) -> Any:
        return self.value * times

    def __rmul__(self, times: Any) -> Any:
        return times * self.value

    def __lt__(self, other: Any) -> bool:
        return bool(self.value < self._plain(other))

    def __le__(self, other: Any) -> bool:
        return bool(self.value <= self._plain(other))

    def __gt__(self, other: Any) -> bool:
        return bool(self.value > self._plain(other))

    def __ge__(self, other: Any) -> bool:
        return bool(self.value >= self._plain(other))

    def __eq__(self, other: object) -> bool:
        return bool(self.value == self._plain(other))

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __int__(self) -> int:
        return int(self.value)

    def __hash__(self) -> int:
        return bytes.__hash__(self.value)

    def __len__(self) -> int:
        return bytes.__len__(self.value)

    def __getitem__(self, index: Any) -> Any:
        return bytes.__getitem__(self.value, index)

    if TYPE_CHECKING:  # the bytes methods added below

        def __getattr__(self, name: str) -> Any: ...


def _forward(name: str) -> Callable[..., Any]:
    method = getattr(bytes, name)

    def forwarded(self: FutureString, *args: Any) -> Any:
        return method(self.value, *args)

    forwarded.__name__ = name
    forwarded.__doc__ = f"``bytes.{name}`` of ``value`` (positional arguments only)."
    return forwarded


for _name in dir(bytes):
    if not _name.startswith("_"):
        setattr(FutureString, _name, _forward(_name))
del _name


class Value(FutureString):
    """What ``tr.get(key)`` and ``tr[key]`` return, as the binding's ``Value``: a
    :class:`FutureString` whose ``value`` is the bytes, or None when the key is absent."""

    __slots__ = ()

    def present(self) -> bool:
        """True when the key exists (``value`` is not None); waits for the read."""
        return self.value is not None


class Key(FutureString):
    """A key future, as the binding's ``Key``: what ``tr.get_key`` returns, and
    ``tr.get_versionstamp`` (whose ``value``, the 10-byte versionstamp, is known after a
    successful commit). ``value`` is bytes."""

    __slots__ = ()
