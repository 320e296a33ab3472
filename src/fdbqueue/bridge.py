"""Run a synchronous fdbqueue call from a coroutine, on the event loop's thread, in a greenlet.

:func:`run` starts the call in an :class:`fdbqueue.suspension.OperationGreenlet`. The call
runs on the event loop's thread until it would block (:mod:`fdbqueue.suspension`): then the
greenlet switches back to :func:`run` with a :class:`~fdbqueue.suspension.WaitRequest`, which
awaits the futures through ``future.on_ready`` and ``loop.call_soon_threadsafe`` (the loop
serves other tasks meanwhile) and switches back in. No thread per call; the synchronous
core's retry loops, receipts and watches are the ones every caller uses.

Cancellation of the awaiting task:

* during an *interruptible* wait (between transactions: the watch wait and the backoff
  sleep of a blocking take), ``asyncio.CancelledError`` is thrown into the greenlet at once,
  so its ``finally`` blocks run (the watch is cancelled, a consumer session withdraws its
  requests); the waits it makes on the way out are still served, and :func:`run` raises
  CancelledError once the greenlet has finished;
* during a wait on a *future* (a read, a commit, an ``on_error`` backoff), the cancellation
  is remembered and the future still awaited: a commit in flight must end, or an item taken
  could be lost. The call goes on; at its next interruptible wait CancelledError is thrown in
  instead of waiting. If it finishes first with a result (a dequeue whose commit landed),
  :func:`run` returns that result and declines the cancellation
  (``asyncio.current_task().uncancel()``, Python 3.11 on): ``task.cancel(); await task``
  then gives the value, and nothing taken is lost. If it fails instead, :func:`run` raises
  CancelledError (the failure chained as its cause).

A call given a Transaction only reads and writes in it (no commit, no interruptible wait), so
it always runs to its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from fdbqueue import suspension
from fdbqueue.suspension import OperationGreenlet, WaitRequest

__all__ = ["run", "wait_future"]

P = ParamSpec("P")
R = TypeVar("R")


def _readiness(
    loop: asyncio.AbstractEventLoop, futures: Sequence[Any], timeout: float | None
) -> asyncio.Future[bool]:
    """An asyncio future of the loop that becomes True when one of ``futures`` (of either
    backend) is ready, False after ``timeout`` seconds (None: never)."""
    waiter: asyncio.Future[bool] = loop.create_future()

    def settle(ready: bool) -> None:
        if not waiter.done():
            waiter.set_result(ready)

    def from_any_thread(_future: Any) -> None:  # the future's callback, on any thread
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(settle, True)

    for future in futures:
        future.on_ready(from_any_thread)
    if timeout is not None:
        timer = loop.call_later(timeout, settle, False)
        waiter.add_done_callback(lambda _waiter: timer.cancel())
    return waiter


def _decline_cancellation() -> None:
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)  # Python 3.11 on
    if uncancel is not None:
        uncancel()


async def run(function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``function(*args, **kwargs)`` in an operation greenlet and return its result.

    Args:
        function: a synchronous call of fdbqueue (or any code that blocks only through
            :mod:`fdbqueue.suspension` and ``block_until_ready`` of either backend's futures;
            other blocking calls block the event loop).

    Returns:
        What the call returned.

    Raises:
        Exception: what the call raised.
        asyncio.CancelledError: the task was cancelled (see the module docstring for when a
            result is returned instead).
        RuntimeError: called from inside an operation greenlet (nesting is not supported), or
            without a running event loop.

    Cost: a greenlet, plus per wait two switches and one ``call_soon_threadsafe``.
    """
    if suspension.current_operation() is not None:
        raise RuntimeError(
            "fdbqueue.bridge.run cannot be nested: it was called from inside a synchronous "
            "call that fdbqueue.asyncio runs (call the synchronous API there)"
        )
    loop = asyncio.get_running_loop()
    suspension.install()  # the binding may have loaded since fdbqueue.asyncio was imported
    operation = OperationGreenlet(run=functools.partial(function, *args, **kwargs))
    operation.gr_context = contextvars.copy_context()
    received = 0  # cancellations of the task seen by this driver
    pending = False  # one arrived during a wait on a future and is not thrown in yet
    try:
        step = operation.switch()
        while not operation.dead:
            request: WaitRequest = step
            interrupt = request.interruptible and pending
            if not interrupt:
                waiter = _readiness(loop, request.futures, request.timeout)
                while True:
                    try:
                        ready = await asyncio.shield(waiter)
                        break
                    except asyncio.CancelledError:
                        received += 1
                        if request.interruptible:
                            interrupt = True
                            waiter.cancel()
                            break
                        pending = True  # the future is in flight: keep waiting on it
            if interrupt:
                pending = False
                step = operation.throw(asyncio.CancelledError())
            else:
                step = operation.switch(ready)
    except Exception as error:
        if pending:
            raise asyncio.CancelledError() from error
        raise
    for _ in range(received):  # the call finished with its result: nothing may be lost
        _decline_cancellation()
    result: R = step
    return result


async def wait_future(future: Any) -> Any:
    """Wait for a future of either backend without blocking the event loop, then return
    what its ``wait()`` returns (for a ``tr.get`` Value, the Value itself: use ``.value``,
    ``.present()`` or ``bytes()`` on it, which no longer wait).

    Raises:
        FDBError: the future's error (either backend).
        asyncio.CancelledError: the awaiting task was cancelled (the future is left alone).

    Cost: nothing when it is ready; else one ``on_ready`` callback and one
    ``call_soon_threadsafe``.
    """
    if not future.is_ready():
        await _readiness(asyncio.get_running_loop(), (future,), None)
    return future.wait()
