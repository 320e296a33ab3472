"""fdbqueue's wall clock: the one place the core reads the time of day.

Some durations are measured in wall-clock seconds, besides read versions or instead of them:
lease expiry times and deduplication windows (:mod:`fdbqueue._delivery.leases`, bound by
both clocks, so that a cluster recovery, which makes versions jump, ends no lease), and the
age of the oldest item (:mod:`fdbqueue._storage.ages`). They all read :func:`now`:
``time.time()`` plus the seconds of every offset that :func:`follow` registered (none but
the in-memory database's, below).

The in-memory database lets time pass without sleeping
(:meth:`fdbqueue.memory.Database.pass_time`): it moves its versions, and the wall clock must
move with them. ``fdbqueue.memory`` stands for FoundationDB itself and imports nothing of
fdbqueue outside it, and the core imports nothing of the test double (the import contracts
of ``pyproject.toml`` and ``tests/test_core_clock.py`` check both ways), so neither calls the
other: the package ``fdbqueue`` itself, which imports both, registers
:func:`fdbqueue.memory.time_passed` here (``follow(memory.time_passed)`` in
``fdbqueue/__init__.py``). Every process that imports fdbqueue (the only way to reach
``fdbqueue.memory`` or the core) has it registered; until a test calls ``pass_time`` it
adds 0.

Tests that want a clock of their own (a producer's clock running ahead, an exact age)
replace :func:`now` with ``monkeypatch.setattr(fdbqueue._clock, "now", ...)``: the core
always calls it through this module (``_clock.now()``), so the replacement is what it reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["follow", "now"]

_lock = threading.Lock()
#: The registered offsets, each a function giving seconds to add to ``time.time()``.
_offsets: tuple[Callable[[], float], ...] = ()


def _no_offset() -> float:
    return 0.0


#: The seconds :func:`now` adds to ``time.time()``: the one registered offset itself (the
#: usual case: a call, no loop), or their sum (:func:`follow` sets it).
_offset: Callable[[], float] = _no_offset


def now() -> float:
    """Wall-clock seconds since the epoch: ``time.time()`` plus the registered offsets
    (:func:`follow`). Cost: one ``time.time()`` and one call per offset; no database access."""
    return time.time() + _offset()


def _sum_of(offsets: tuple[Callable[[], float], ...]) -> Callable[[], float]:
    """One function giving the sum of ``offsets``' seconds."""
    if len(offsets) == 1:
        return offsets[0]
    return lambda: sum(offset() for offset in offsets)


def follow(offset: Callable[[], float]) -> None:
    """Add ``offset()`` (seconds, read at each :func:`now`) to the clock from now on; an
    offset registered already is not added twice. ``fdbqueue/__init__.py`` registers
    :func:`fdbqueue.memory.time_passed`, the seconds the in-memory database's ``pass_time``
    let pass in this process."""
    global _offsets, _offset
    with _lock:
        if offset not in _offsets:
            _offsets = (*_offsets, offset)
            _offset = _sum_of(_offsets)
