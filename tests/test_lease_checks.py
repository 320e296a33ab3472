"""The small checks a claim and an ack go through: what a claim's receipts ask of its result
(``claimed_something``, ``leases_unexpired``), the lease seconds' check, and the refusal of a
lease whose key is not one of the queue's lease keys."""

from __future__ import annotations

import math

import pytest
from helpers import all_keys

from fdbqueue import Lease, Queue
from fdbqueue._delivery.claims import claimed_something, leases_unexpired
from fdbqueue._delivery.leases import MAX_LEASE_SECONDS, check_lease_seconds
from fdbqueue._storage.taking import MOVED_ASIDE

FAR_FUTURE = 1e12  # seconds since the epoch: a wall-clock expiry that has not come

#: held until version 100 (by its versions alone); expired by version 50; expired by its
#: versions at 50 but not by the wall clock
HELD = Lease("a", "0" * 32, 1, 100, b"held")
GONE = Lease("b", "1" * 32, 1, 50, b"gone")
CLOCK_HELD = Lease("c", "2" * 32, 1, 50, b"clock", expiry_time=FAR_FUTURE)


@pytest.mark.parametrize(
    ("claimed", "version", "unexpired"),
    [
        (HELD, 99, True),
        (HELD, 100, False),  # its expiry version is no longer above the version
        (GONE, 99, False),
        (CLOCK_HELD, 99, True),
        ([HELD], 99, True),
        ([HELD, GONE], 99, False),
        ([GONE, HELD], 99, False),
        ((HELD, CLOCK_HELD), 99, True),
        ([(HELD, [GONE])], 99, False),  # at any depth
        ([(HELD, [CLOCK_HELD])], 99, True),
        ([None, HELD, "x"], 99, True),  # what is no Lease says nothing
        ([], 99, True),
        ((), 99, True),
        (MOVED_ASIDE, 99, True),
        (None, 99, True),
        ("text", 99, True),
    ],
)
def test_leases_unexpired_looks_at_every_lease_at_any_depth(claimed, version, unexpired):
    assert leases_unexpired(claimed, version) is unexpired


@pytest.mark.parametrize(
    ("claimed", "wrote"),
    [([], False), ([HELD], True), (MOVED_ASIDE, True), (None, False)],
)
def test_claimed_something_is_a_lease_or_a_move_aside(claimed, wrote):
    assert claimed_something(claimed) is wrote


class _Seconds(int):
    """An int of a type of its own: checked by check_seconds, not by the usual types' test."""


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(30, 30.0), (2.5, 2.5), (MAX_LEASE_SECONDS, float(MAX_LEASE_SECONDS)), (_Seconds(7), 7.0)],
)
def test_check_lease_seconds_returns_a_float(seconds, expected):
    checked = check_lease_seconds(seconds)
    assert type(checked) is float and checked == expected


@pytest.mark.parametrize(
    ("seconds", "error"),
    [
        (True, TypeError),
        ("30", TypeError),
        (None, TypeError),
        (0, ValueError),
        (-1.5, ValueError),
        (MAX_LEASE_SECONDS + 1, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
    ],
)
def test_check_lease_seconds_refuses_what_is_no_lease(seconds, error):
    with pytest.raises(error):
        check_lease_seconds(seconds)


@pytest.mark.parametrize("shards", [1, 3])
def test_a_lease_whose_key_is_no_lease_key_of_the_queue_is_refused(db, subspace, shards):
    queue = Queue(subspace, shards=shards)
    queue.enqueue(db, "x")
    held = queue.claim(db, 30)
    prefix = subspace.key()
    before = all_keys(db, subspace)
    others = (prefix, prefix + b"\x00", prefix + b"\xff", subspace.pack((1, 5)), b"elsewhere")
    for key in others:
        forged = Lease("x", held.id, 1, held.expiry_version, key)
        for call in (queue.ack, queue.release):
            with pytest.raises(ValueError, match="another queue"):
                call(db, forged)
    assert all_keys(db, subspace) == before
    queue.ack(db, held)  # the lease itself was untouched
    assert queue.leases(db) == [] and queue.size(db) == 0
