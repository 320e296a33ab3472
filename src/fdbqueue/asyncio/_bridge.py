"""Run a synchronous fdbqueue call from a coroutine, on the event loop's thread, in a greenlet.

:func:`run` starts the call in an :class:`fdbqueue._transactions.suspension.OperationGreenlet`. The
call runs on the event loop's thread until it would block
(:mod:`fdbqueue._transactions.suspension`): then the greenlet switches back to :func:`run` with a
:class:`~fdbqueue._transactions.suspension.WaitRequest`, which awaits the futures through
``future.on_ready`` and ``loop.call_soon_threadsafe`` (the loop serves other tasks meanwhile) and
switches back in. No thread per call; the synchronous core's retry loops, receipts and watches are
the ones every caller uses.

Cancellation of the awaiting task (the contract is stated in the guarantees page):

* during an *interruptible* wait, ``asyncio.CancelledError`` is thrown into the greenlet at
  once, so its ``finally`` blocks run (a watch is cancelled, a consumer session withdraws its
  requests); the waits it makes on the way out are still served, and :func:`run` raises
  CancelledError once the greenlet has finished. Interruptible are the waits between
  transactions (the watch wait and the backoff sleep of a blocking take) and every wait on a
  future (a read, an ``on_error`` backoff) until the operation sends a commit: nothing has
  taken effect then, and nothing does;
* once a commit of the operation was sent (:func:`fdbqueue._transactions.transactional.commit`),
  its waits on futures are no longer interrupted: the cancellation is remembered and the call
  goes on (an item it took must reach the caller). At its next interruptible wait CancelledError is
  thrown in instead of waiting. If the call fails, :func:`run` raises CancelledError (the
  failure chained as its cause). If it finishes with its result, :func:`run` returns it and
  delivers the cancellation at the task's next suspension instead (a callback scheduled with
  ``loop.call_soon`` cancels the task again, unless it has ended by then or, Python 3.11 on,
  the canceller took the cancellation back with ``uncancel()``, as ``asyncio.timeout`` does
  when its block ends): so ``task.cancel(); await task`` on a dequeue whose commit landed
  gives the value, a loop of calls ends at its next await, and nothing taken is lost.

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

from fdbqueue._transactions import suspension
from fdbqueue._transactions.suspension import OperationGreenlet, WaitRequest

__all__ = ["run", "run_to_end", "wait_future"]

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


def _cancel_again_soon(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the current task again once it next suspends (see the module docstring): the
    cancellation it received while a commit was in flight, delivered late. Nothing happens if
    the task has ended by then or, Python 3.11 on, no cancellation is requested any more."""
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - run() always runs in a task
        return

    def cancel() -> None:
        if task.done():
            return
        cancelling = getattr(task, "cancelling", None)  # Python 3.11 on
        if cancelling is not None:
            if cancelling() == 0:
                return  # taken back (an asyncio.timeout block that ended)
            task.uncancel()  # type: ignore[attr-defined]  # the count stays as the canceller left it
        task.cancel()

    loop.call_soon(cancel)


async def run(function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``function(*args, **kwargs)`` in an operation greenlet and return its result.

    Args:
        function: a synchronous call of fdbqueue (or any code that blocks only through
            :mod:`fdbqueue._transactions.suspension` and ``block_until_ready`` of either backend's
            futures; other blocking calls block the event loop).

    Returns:
        What the call returned.

    Raises:
        Exception: what the call raised.
        asyncio.CancelledError: the task was cancelled before the call sent a commit, or
            the call failed after a cancellation (see the module docstring: a call that
            finishes with its result once a commit was sent returns it, and the task is
            cancelled again at its next suspension).
        RuntimeError: called from inside an operation greenlet (nesting is not supported), or
            without a running event loop.

    Cost: a greenlet, plus per wait two switches and one ``call_soon_threadsafe``.
    """
    return await _drive(functools.partial(function, *args, **kwargs), interruptible=True)


async def run_to_end(function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``function(*args, **kwargs)`` as :func:`run` does, but to its end: a cancellation of
    the task never interrupts its waits on futures (as after a commit, see the module
    docstring), so that a call that ends something (a consumer session's ``close``, which
    ``async with`` awaits on the way out) always ends it; if it finishes with its result, the
    cancellation is delivered at the task's next suspension.

    Returns, raises and costs what :func:`run` does.
    """
    return await _drive(functools.partial(function, *args, **kwargs), interruptible=False)


async def _drive(call: Callable[[], R], interruptible: bool) -> R:
    """Run ``call`` in an operation greenlet, serving its waits (see the module docstring)."""
    if suspension.current_operation() is not None:
        raise RuntimeError(
            "fdbqueue.asyncio calls cannot be nested: this one was made from inside a synchronous "
            "call that fdbqueue.asyncio runs (call the synchronous API there)"
        )
    loop = asyncio.get_running_loop()
    suspension.install()  # the binding may have loaded since fdbqueue.asyncio was imported
    operation = OperationGreenlet(run=call)
    operation.gr_context = contextvars.copy_context()
    operation.may_have_committed = not interruptible
    owed = False  # the task was cancelled and CancelledError has not been raised for it
    pending = False  # a cancellation came during a wait that could not be interrupted
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
                        owed = True
                        if request.interruptible:
                            interrupt = True
                            waiter.cancel()
                            break
                        pending = True  # a commit was sent: keep waiting on the future
            if interrupt:
                pending = False
                step = operation.throw(asyncio.CancelledError())
            else:
                step = operation.switch(ready)
    except Exception as error:
        if owed:
            raise asyncio.CancelledError() from error
        raise
    if owed:  # the call finished with its result: return it, cancel at the next suspension
        _cancel_again_soon(loop)
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
