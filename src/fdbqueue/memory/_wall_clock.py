"""The wall clock of the process, as tests of in-memory databases move it.

A real cluster's clients measure some durations by their wall clocks besides read versions
(fdbqueue's lease expiry times, deduplication windows and the age of the oldest item). A test
on the in-memory database that lets time pass without sleeping must move both clocks:
:meth:`~fdbqueue.memory.Database.pass_time` moves the database's version clock and this one,
where :meth:`~fdbqueue.memory.Database.advance_time` moves versions alone, as a recovery does.
The clock is the process's (as a wall clock is): seconds let pass on one database pass for
every client of the process.

The hook: :func:`time_passed` is the seconds let pass so far. ``fdbqueue.memory`` imports
nothing of fdbqueue outside it, so it does not move fdbqueue's own clock itself: fdbqueue's
clock (``fdbqueue._clock.now``) adds :func:`time_passed` to ``time.time()``, registered by
the package ``fdbqueue`` when it is imported (see docs/memory.rst, "Time").
"""

from __future__ import annotations

import threading
import time

__all__ = ["let_pass", "time_passed", "wall_clock"]

_lock = threading.Lock()
_passed = [0.0]


def time_passed() -> float:
    """Seconds that :meth:`~fdbqueue.memory.Database.pass_time` let pass in this process, on
    any database (0.0 unless a test called it): what fdbqueue's wall clock adds to
    ``time.time()``."""
    return _passed[0]


def wall_clock() -> float:
    """Seconds since the epoch: ``time.time()`` plus :func:`time_passed`, the clock fdbqueue
    reads (lease expiry times, deduplication windows, the age of the oldest item)."""
    return time.time() + _passed[0]


def let_pass(seconds: float) -> None:
    """Move :func:`wall_clock` (and :func:`time_passed`) ``seconds`` forward."""
    with _lock:
        _passed[0] += seconds
