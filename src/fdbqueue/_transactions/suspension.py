"""The blocking primitives of the synchronous core, which an event loop can take over.

The queues' code waits in three ways: on a FoundationDB future (``wait()``, ``value``,
iterating a range read: all go through ``Future.block_until_ready``), on the first of several
futures with a timeout (:func:`wait_for_any`, the watch wait of a blocking take) and by
sleeping (:func:`sleep`, the backoff after a watch that failed). Each of them blocks the thread,
except inside an :class:`OperationGreenlet`, the greenlet in which
:func:`fdbqueue.asyncio._bridge.run`
runs one synchronous operation for a coroutine: there the wait becomes a :class:`WaitRequest`
handed to the greenlet's parent (the coroutine driving it on the event loop's thread), which
awaits it and switches back with the answer. No thread per call.

A wait is *interruptible* when the driver may throw ``asyncio.CancelledError`` into the
greenlet there: always between transactions (:func:`wait_for_any`, :func:`sleep`), and on a
future (a read, an ``on_error`` backoff) as long as no commit of the operation may have taken
effect. The core marks its commits (:func:`fdbqueue._transactions.transactional.commit` sets
:attr:`OperationGreenlet.may_have_committed` before it sends one): from then on the operation's
waits on futures are no longer interruptible, so that it finishes and reports what it did (see
:mod:`fdbqueue.asyncio._bridge`).

:func:`install` replaces ``block_until_ready`` on :class:`fdbqueue.memory.Future` (registered
by the package ``fdbqueue`` with :func:`recognise_future_type`: the core imports nothing of
the test double) and, once the binding is loaded, on ``fdb.impl.Future``, as the binding's own
``fdb.init(event_model="gevent")`` does: outside an operation greenlet the replacement calls the
original method unchanged. Importing :mod:`fdbqueue.asyncio` installs it; it is idempotent.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import greenlet

__all__ = [
    "OperationGreenlet",
    "WaitRequest",
    "current_operation",
    "install",
    "recognise_future_type",
    "sleep",
    "wait_for_any",
]


@dataclass(frozen=True)
class WaitRequest:
    """What an operation greenlet hands its driver when it would block.

    Attributes:
        futures: the futures of either backend to wait for (any one ready ends the wait); none
            for a sleep.
        timeout: seconds to wait at most; None waits without limit.
        interruptible: True when a cancellation may be thrown into the greenlet at this wait
            (between transactions); False for a future in flight, always waited for.

    The driver switches back with True when a future became ready, False when the timeout ran
    out (or throws ``asyncio.CancelledError`` in, at an interruptible wait).
    """

    futures: tuple[Any, ...]
    timeout: float | None
    interruptible: bool


class OperationGreenlet(greenlet.greenlet):  # type: ignore[misc]
    """A greenlet running one synchronous fdbqueue call on behalf of a coroutine; its parent
    is the driver, which serves its :class:`WaitRequest` switches.

    Attributes:
        may_have_committed: True once a commit of the operation was sent and did not fail
            with an error that means "not applied" (set by
            :func:`fdbqueue._transactions.transactional.commit`); from then on its waits on futures
            are not interruptible.
    """

    may_have_committed = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        global operations_started
        operations_started = True
        super().__init__(*args, **kwargs)


#: Whether an :class:`OperationGreenlet` was ever made in this process (:mod:`fdbqueue.asyncio`
#: ran a call): until then none is running, and :func:`current_operation` is None without
#: asking greenlet (hot paths, :func:`fdbqueue._transactions.transactional.commit`, read it).
operations_started = False


def current_operation() -> OperationGreenlet | None:
    """The operation greenlet the caller runs in, or None (a plain thread or greenlet).
    Cost: a module attribute read until :mod:`fdbqueue.asyncio` ran a call, then a
    ``greenlet.getcurrent()``."""
    if not operations_started:
        return None
    current = greenlet.getcurrent()
    return current if isinstance(current, OperationGreenlet) else None


def _suspend(operation: OperationGreenlet, request: WaitRequest) -> bool:
    answer: bool = operation.parent.switch(request)
    return answer


def wait_for_any(futures: Sequence[Any], timeout: float | None) -> bool:
    """Wait until one of ``futures`` is ready, at most ``timeout`` seconds (None: no limit).

    Returns:
        True when a future became ready, False when the time ran out.

    Raises:
        asyncio.CancelledError: inside an operation greenlet, when its coroutine is cancelled
            (an interruptible wait). Errors of the futures are not raised.
    """
    operation = current_operation()
    if operation is not None:
        return _suspend(operation, WaitRequest(tuple(futures), timeout, interruptible=True))
    ready = threading.Event()
    for future in futures:
        future.on_ready(lambda _future: ready.set())
    if timeout is not None:
        timeout = min(timeout, threading.TIMEOUT_MAX)
    return ready.wait(timeout)


def sleep(seconds: float) -> None:
    """Sleep ``seconds`` (an interruptible wait inside an operation greenlet: raises
    ``asyncio.CancelledError`` there when its coroutine is cancelled)."""
    operation = current_operation()
    if operation is not None:
        _suspend(operation, WaitRequest((), max(0.0, seconds), interruptible=True))
        return
    time.sleep(seconds)


def _greenlet_aware(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def block_until_ready(self: Any) -> None:
        operation = current_operation()
        if operation is not None and not self.is_ready():
            interruptible = not operation.may_have_committed
            _suspend(operation, WaitRequest((self,), None, interruptible))
        original(self)  # returns at once when ready; keeps the class's own bookkeeping

    block_until_ready.fdbqueue_original = original  # type: ignore[attr-defined]
    return block_until_ready


def _patch(future_class: type) -> None:
    method = future_class.__dict__.get("block_until_ready")
    if method is None or hasattr(method, "fdbqueue_original"):
        return
    future_class.block_until_ready = _greenlet_aware(method)  # type: ignore[attr-defined]


#: The future classes of backends besides the ``fdb`` binding, registered with
#: :func:`recognise_future_type` (the package ``fdbqueue`` registers the in-memory database's).
_future_types: tuple[type, ...] = ()


def recognise_future_type(future_type: type) -> None:
    """Have :func:`install` patch ``future_type`` too, for a backend the core does not
    import: ``fdbqueue/__init__.py`` registers :class:`fdbqueue.memory.Future` (the core
    imports nothing of the test double; see :mod:`fdbqueue._clock`). Registering a class
    twice changes nothing."""
    global _future_types
    if future_type not in _future_types:
        _future_types = (*_future_types, future_type)


def install() -> None:
    """Make ``block_until_ready`` of both backends' futures greenlet-aware (idempotent).

    Patches the classes registered with :func:`recognise_future_type`
    (:class:`fdbqueue.memory.Future`) and, when ``fdb.impl`` is loaded (it is once
    ``fdb.api_version()`` ran), ``fdb.impl.Future``; call it again after loading the
    binding (:func:`fdbqueue.asyncio._bridge.run` does, on every call). Cost: a dictionary
    lookup per class once done.
    """
    for future_type in _future_types:
        _patch(future_type)
    impl = sys.modules.get("fdb.impl")
    binding_future = getattr(impl, "Future", None)
    if isinstance(binding_future, type):
        _patch(binding_future)
