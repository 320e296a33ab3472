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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from fdbqueue.transactional import TransactionContext, is_database, run_in_retry_loop

__all__ = ["check_blocking_arguments", "take_blocking", "wait_for_any"]

#: Backoff between attempts when a watch fails instead of firing (e.g. too many watches).
FALLBACK_BACKOFF = (0.01, 1.0)


def check_blocking_arguments(tr: TransactionContext, block: bool, timeout: float | None) -> None:
    """Validate ``block`` and ``timeout`` before anything is read or written.

    Raises:
        TypeError: ``block=True`` with something other than a Database (a transaction cannot
            wait for other transactions' commits), or ``timeout`` is not a number.
        ValueError: ``timeout`` is negative, or given without ``block=True``.
    """
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}")
        if timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds, not {timeout}")
        if not block:
            raise ValueError("timeout only applies with block=True")
    if block and not is_database(tr):
        raise TypeError(
            "block=True needs a Database: inside a transaction, waiting for other "
            "transactions' enqueues is impossible (the transaction would never see them)"
        )


def wait_for_any(futures: Sequence[Any], timeout: float | None) -> bool:
    """Wait until one of ``futures`` is ready, at most ``timeout`` seconds (None: no limit).

    Returns:
        True when a future became ready, False when the time ran out.
    """
    ready = threading.Event()
    for future in futures:
        future.on_ready(lambda _future: ready.set())
    return ready.wait(timeout)


def _watch(database: Any, key: bytes) -> Any:
    return run_in_retry_loop(database, lambda tr: tr.watch(key))


def take_blocking(
    database: Any, take: Callable[[Any], Any], signal_key: bytes, timeout: float | None
) -> Any:
    """Call ``take(database)`` until it returns a value or ``timeout`` seconds pass.

    Args:
        database: a Database or Tenant.
        take: one non-blocking attempt, returning a value or None.
        signal_key: the key every enqueue changes with an atomic add.
        timeout: seconds to wait at most; None waits without limit.

    Returns:
        The value taken, or None when the timeout ran out first.

    Cost: per attempt, one read-only transaction creating the watch (a read version and one
    point read) plus the attempt; while waiting, nothing.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    backoff = FALLBACK_BACKOFF[0]
    while True:
        watch = _watch(database, signal_key)
        value = take(database)
        if value is not None:
            watch.cancel()
            return value
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            watch.cancel()
            return None
        fired = wait_for_any([watch], remaining)
        watch.cancel()
        if not fired:
            return None
        try:
            watch.wait()
            backoff = FALLBACK_BACKOFF[0]
        except Exception:  # the watch failed rather than fired: back off, bounded
            pause = backoff if remaining is None else min(backoff, max(0.0, remaining))
            time.sleep(pause)
            backoff = min(backoff * 2, FALLBACK_BACKOFF[1])
