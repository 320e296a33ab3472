"""The route a plain call takes through fdbqueue's modules (issue 44: pay only for what you use).

A queue that never used a feature calls nothing for it: the modules a call's Python frames run
in are counted with ``sys.setprofile`` (every frame outside ``fdbqueue/memory/``, the
stand-in for the database), over many calls, so a step that runs on one call in many shows
too. Each test fails when a step the plain route leaves out comes back on it.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

import fdbqueue
from fdbqueue import Subspace, memory, metrics
from fdbqueue._storage.ages import BUCKET
from fdbqueue._transactions import suspension

PACKAGE = os.path.dirname(fdbqueue.__file__)
MEMORY = os.path.join(PACKAGE, "memory")
#: Where a future's wait goes once the process imported :mod:`fdbqueue.asyncio` (which other
#: tests of this process may have): it installs its wait, for every future, for good.
ASYNCIO_WAIT = "_transactions/suspension.py"


def modules_of(call: Callable[[], Any]) -> tuple[set[str], Any]:
    """The fdbqueue modules (outside ``memory/``) whose functions ``call`` ran, and what it
    returned."""
    seen: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(PACKAGE) and not name.startswith(MEMORY):
                seen.add(os.path.relpath(name, PACKAGE))

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    seen.discard(ASYNCIO_WAIT)
    return seen, result


@pytest.fixture
def nothing_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenTelemetry's provider looked at, and found not to record (no SDK's); in a process
    that never ran :mod:`fdbqueue.asyncio` (whose first call makes every commit look for the
    operation it runs in: ``_transactions.suspension``)."""
    monkeypatch.setattr(suspension, "operations_started", False)
    monkeypatch.setattr(metrics, "_recording", False)
    monkeypatch.setattr(metrics, "_look_again", False)
    monkeypatch.setattr(metrics, "may_record", False)


def filled(n: int) -> tuple[Any, fdbqueue.Queue[bytes]]:
    db = memory.open(seed=1)
    queue: fdbqueue.Queue[bytes] = fdbqueue.Queue(Subspace(("route",)), codec="raw")
    for _ in range(n):
        queue.enqueue(db, b"x")
    return db, queue


PLAIN_DEQUEUE = {
    "queue.py",
    "_consuming/ends.py",
    "_transactions/transactional.py",
    "_transactions/receipts.py",
    "_storage/features.py",
    "_storage/store.py",
    "_keycodec.py",
    "_clock.py",
}


@pytest.mark.usefixtures("nothing_records")
def test_a_plain_dequeue_crosses_eight_modules_and_ages_once_a_bucket() -> None:
    calls = 3 * BUCKET
    db, queue = filled(calls + 3)
    queue.dequeue(db)  # the object's first call reads its feature record
    routes = collections.Counter()
    for _ in range(calls):
        seen, value = modules_of(lambda: queue.dequeue(db))
        assert value == b"x"
        routes[frozenset(seen)] += 1
    assert routes == {
        frozenset(PLAIN_DEQUEUE): calls - 3,
        frozenset(PLAIN_DEQUEUE | {"_storage/ages.py"}): 3,  # a take that begins a bucket
    }


@pytest.mark.usefixtures("nothing_records")
def test_a_plain_dequeue_given_a_transaction_crosses_six_modules() -> None:
    db, queue = filled(20)
    tr = db.create_transaction()
    queue.dequeue(tr)
    seen, value = modules_of(lambda: queue.dequeue(tr))
    assert value == b"x"
    inside = PLAIN_DEQUEUE - {"_transactions/receipts.py", "_clock.py"}
    assert seen == inside


@pytest.mark.usefixtures("nothing_records")
def test_a_claim_crosses_at_most_twelve_modules_with_leases_in_flight() -> None:
    """The first lease is probed with the front: a claim made while leases are in flight
    notes when that lease expires, without asking which group its item is of."""
    calls = 2 * BUCKET
    db, queue = filled(calls + 5)
    for _ in range(3):
        assert queue.claim(db, 600) is not None
    widest: set[str] = set()
    for _ in range(calls):
        seen, lease = modules_of(lambda: queue.claim(db, 600))
        assert lease is not None
        assert "_storage/groups.py" not in seen
        assert "metrics.py" not in seen
        widest |= seen
    assert len(widest) <= 12, " ".join(sorted(widest))


def test_metrics_are_called_on_the_hot_path_only_while_they_may_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db, queue = filled(4)
    monkeypatch.setattr(suspension, "operations_started", False)
    monkeypatch.setattr(metrics, "_look_again", False)
    monkeypatch.setattr(metrics, "_recording", False)
    monkeypatch.setattr(metrics, "may_record", False)
    seen, _ = modules_of(lambda: queue.dequeue(db))
    assert "metrics.py" not in seen
    monkeypatch.setattr(metrics, "may_record", True)  # a provider was set since: look again
    monkeypatch.setattr(metrics, "_look_again", True)
    seen, _ = modules_of(lambda: queue.dequeue(db))
    assert "metrics.py" in seen
