"""The watches of a transaction before its commit hands them to the database.

Upstream's read-your-writes layer (``fdbclient/ReadYourWrites.cpp``) keeps a transaction's
watches in its ``watchMap`` until the commit:

* a watch is made when ``watch`` is called: it reads the key (through the transaction's own
  writes) and is then counted against the database's limit of outstanding watches
  (``RYWImpl::watch`` calling ``Transaction::watch``, whose
  ``DatabaseContext::increaseWatchCounter`` raises 1032 ``too_many_watches``);
* ``set``, ``clear``, ``clear_range`` and atomic operations of the same transaction fire its
  watches of the keys they change at once, successfully (``RYWImpl::triggerWatches``): a set
  or clear when the new value differs from the one the watch read, an atomic operation always
  (its result is not known before the commit);
* when the transaction is reset, retried by ``on_error``, cancelled or destroyed before it
  commits, its pending watches fail with 1025 ``transaction_cancelled``
  (``resetRyow``, ``~ReadYourWritesTransaction`` and ``Transaction::cancelWatches``).

Destroying may happen inside a garbage collector's finalizer (``Transaction.__del__``, or the
binding's ``TransactionRead.__del__`` calling ``fdb_transaction_destroy`` through the
in-memory C API): completing a future there could take a lock the interrupted code holds. So
:func:`bury` only puts the futures on a queue (``queue.SimpleQueue.put`` is safe in
finalizers) and a daemon thread fails them with 1025 shortly after.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator

from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._futures import Future

__all__ = ["PendingWatches", "Watch", "bury", "start_reaper"]

Watch = tuple[bytes, bytes | None, Future]  # key, the value read, the future

_GRAVEYARD: queue.SimpleQueue[list[Future]] = queue.SimpleQueue()
_REAPER_LOCK = threading.Lock()
_reaper: list[threading.Thread] = []


def _reap() -> None:
    while True:
        for future in _GRAVEYARD.get():
            with contextlib.suppress(Exception):  # a callback's error must not stop it
                future.set_error(FDBError(1025))


def start_reaper() -> None:
    """Start the thread that fails buried watches, once per process (called when a watch is
    made, never from a finalizer)."""
    if _reaper:
        return
    with _REAPER_LOCK:
        if not _reaper:
            thread = threading.Thread(target=_reap, name="fdbqueue.memory-watches", daemon=True)
            thread.start()
            _reaper.append(thread)


def bury(futures: list[Future]) -> None:
    """Have ``futures`` fail with 1025 from the reaper thread; safe in a finalizer."""
    if futures:
        _GRAVEYARD.put(futures)


class PendingWatches:
    """A transaction's watches not yet handed to the database."""

    __slots__ = ("_watches",)

    def __init__(self) -> None:
        self._watches: list[Watch] = []

    def __iter__(self) -> Iterator[Watch]:
        return iter(self._watches)

    def __bool__(self) -> bool:
        return bool(self._watches)

    def add(self, key: bytes, expected: bytes | None, future: Future) -> None:
        """Keep a watch of ``key`` that read ``expected``."""
        self._watches.append((key, expected, future))

    def changed(
        self, begin: bytes, end: bytes, value: bytes | None = None, known: bool = True
    ) -> None:
        """The transaction wrote ``[begin, end)``: ``value`` (None for a clear) when
        ``known``, else an atomic operation's unknown result. Fire, successfully, the watches
        there whose value this changes."""
        if not self._watches:
            return
        keep: list[Watch] = []
        fire: list[Future] = []
        for watch in self._watches:
            key, expected, future = watch
            if begin <= key < end and (not known or value != expected):
                fire.append(future)
            elif not future.is_ready():
                keep.append(watch)
        self._watches = keep
        for future in fire:
            future.set_result(None)

    def take(self) -> list[Future]:
        """Remove every watch; return their futures."""
        watches, self._watches = self._watches, []
        return [future for _key, _expected, future in watches]

    def take_all(self) -> list[Watch]:
        """Remove every watch; return them (for the commit to register)."""
        watches, self._watches = self._watches, []
        return watches

    def fail(self, error: FDBError) -> None:
        """Fail every watch with ``error`` (from the calling thread)."""
        for future in self.take():
            future.set_error(error)
