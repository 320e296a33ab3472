"""Blocking consumption: wait on a watch until an item may be there, never poll.

Every enqueue and push adds 1 to the queue's *signal key* with an atomic add (no read, so no
conflict). A blocking consumer first creates a watch on the signal key in a read-only
transaction, then tries to take an item; if there was none, it waits until the watch fires
(some enqueue committed after the watch's read version) or the timeout runs out, and tries
again. Because the watch is created before the attempt, an item enqueued between the attempt
and the wait still fires it: no wake-up is lost. Watches can fire spuriously; the consumer
simply tries again.

Source followed: FoundationDB's developer guide, "Watches" (``tr.watch``; watches fire after
a change from the value the transaction read, are active once it commits, and callers re-read
after they fire).

Blocking claims (:mod:`fdbqueue._delivery.leases`) also wake when the first lease in flight expires:
an expired lease's item is claimable again without any write, so nothing bumps the signal key
then (a ``release`` does bump it). Consumer sessions (:mod:`fdbqueue._consuming.sessions`) also wake
to refresh their requests in line.

The waits themselves (:func:`wait_for_any`, the backoff's sleep) are
:mod:`fdbqueue._transactions.suspension`'s, so that :mod:`fdbqueue.asyncio` can take them over:
there a cancelled coroutine interrupts the watch wait, and the ``finally`` below cancels the watch.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from fdbqueue import metrics
from fdbqueue._checks import check_seconds
from fdbqueue._transactions import suspension
from fdbqueue._transactions.suspension import wait_for_any
from fdbqueue._transactions.transactional import AnyContext, is_database, run_in_retry_loop

__all__ = ["check_blocking_arguments", "take_blocking", "wait_for_any"]

#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.waiting")

#: Backoff between attempts when a watch fails instead of firing (e.g. too many watches).
FALLBACK_BACKOFF = (0.01, 1.0)


def check_blocking_arguments(
    tr: AnyContext,
    block: Any,
    timeout: Any,
    waiter: str = "block=True",
    awaited: str = "other transactions' enqueues",
) -> float | None:
    """Validate ``block`` and ``timeout`` before anything is read or written; return the
    timeout in seconds, or None for no limit (``timeout=None`` or ``math.inf``). ``waiter``
    and ``awaited`` name the call that waits and what it waits for, in the TypeError (a
    take's ``block=True`` waits for enqueues; ``result()`` for a job's end).

    Raises:
        TypeError: ``block`` is not a bool, ``block=True`` with something other than a
            Database (a transaction cannot wait for other transactions' commits), or
            ``timeout`` is not a number.
        ValueError: ``timeout`` is NaN or negative, or given without ``block=True``.
    """
    if not isinstance(block, bool):
        raise TypeError(f"block must be True or False, not {block!r}")
    if timeout is not None:
        timeout = check_seconds(timeout, "timeout", allow_infinity=True, allow_zero=True)
        if not block:
            raise ValueError("timeout only applies with block=True")
        if math.isinf(timeout):
            timeout = None
    if block and not is_database(tr):
        raise TypeError(
            f"{waiter} needs a Database: inside a transaction, waiting for {awaited} is "
            "impossible (a transaction never sees other transactions' commits)"
        )
    return None if timeout is None else float(timeout)


def _watch(database: Any, keys: Sequence[bytes]) -> list[Any]:
    """One watch per key, created in one read-only transaction."""
    return run_in_retry_loop(database, lambda tr: [tr.watch(key) for key in keys])


def take_blocking(
    database: Any,
    take: Callable[[Any, float | None], Any],
    signal_key: bytes | Sequence[bytes],
    timeout: float | None,
    due_in: Callable[[], float | None] = lambda: None,
    queue: str | None = None,
) -> Any:
    """Call ``take(database, deadline)`` until it returns a value or ``timeout`` seconds pass.

    Args:
        database: a Database or Tenant.
        take: one attempt, returning a value or None; ``deadline`` is the
            ``time.monotonic()`` time by which it must give up waiting (None: no limit).
        signal_key: the key every enqueue changes with an atomic add, or several such keys
            (a sharded queue's, one per shard: the wait ends when any of them changes).
        timeout: seconds to wait at most; None waits without limit.
        due_in: seconds until an item away from the queue falls due and an attempt would
            make it takeable (:meth:`fdbqueue._delivery.claims.Leases.seconds_until_expiry`), or
            None.
        queue: the queue's metric name: the seconds this call waited are recorded as
            ``fdbqueue.wait.duration`` (:mod:`fdbqueue.metrics`).

    Returns:
        The value taken, or None when the timeout ran out first.

    Cost: one attempt when an item is there; otherwise, per further attempt, one read-only
    transaction creating the watches (a read version and one point read per key) plus the attempt;
    while waiting, nothing. The watch is cancelled on every way out, exceptions included.
    """
    started = time.monotonic()
    try:
        keys = [signal_key] if isinstance(signal_key, bytes) else list(signal_key)
        return _take_blocking(database, take, keys, timeout, due_in, started)
    finally:
        if queue is not None:
            metrics.record_wait(time.monotonic() - started, queue)


def _take_blocking(
    database: Any,
    take: Callable[[Any, float | None], Any],
    signal_keys: list[bytes],
    timeout: float | None,
    due_in: Callable[[], float | None],
    started: float,
) -> Any:
    deadline = None if timeout is None else started + timeout
    value = take(database, deadline)  # an item already there costs no watch
    if deadline is not None and time.monotonic() >= deadline:
        return value
    backoff = FALLBACK_BACKOFF[0]
    while value is None:
        watches = _watch(database, signal_keys)
        try:  # cancelled on every way out, KeyboardInterrupt included: no watch left behind
            value = take(database, deadline)
            if value is not None:
                return value
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            due = due_in()
            wake_for_due = due is not None and (remaining is None or due < remaining)
            fired = wait_for_any(watches, (due or 0.0) + 0.001 if wake_for_due else remaining)
            ready = [watch for watch in watches if watch.is_ready()]  # before any is cancelled
        finally:
            for watch in watches:
                watch.cancel()
        if not fired:
            if wake_for_due:
                continue  # an item away from the queue fell due: the next attempt gives it back
            return None
        try:
            for watch in ready:
                watch.wait()  # raises when the watch failed rather than fired
            backoff = FALLBACK_BACKOFF[0]
        except Exception as error:  # the watch failed rather than fired: back off, bounded
            pause = backoff if remaining is None else min(backoff, max(0.0, remaining))
            logger.warning(
                "fdbqueue: a watch failed instead of firing (%s); looking again in %.2fs",
                error,
                pause,
            )
            suspension.sleep(pause)
            backoff = min(backoff * 2, FALLBACK_BACKOFF[1])
    return value
