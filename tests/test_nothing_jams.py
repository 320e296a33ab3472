"""Nothing jams: legal values travel every path, poison values go aside, limits are respected.

Each test reproduces a way the adversarial review (``shared/research/adversary-findings.md``)
jammed a queue or lost an item, and asserts the behaviour users rely on instead.
"""

from __future__ import annotations

import json
import time

import pytest
from helpers import all_keys, pass_time

from fdbqueue import PriorityQueue, Queue, Subspace, Undecodable, memory, transactional

BIG_VALUES = {
    "100,000 bytes": b"x" * 100_000,
    "60,000 zero bytes": b"\x00" * 60_000,
    "99,950 bytes": b"\x01" * 99_950,
}


@pytest.mark.parametrize("name", list(BIG_VALUES))
def test_a_value_enqueue_accepts_can_be_claimed_released_extended_and_acked(db, subspace, name):
    """The lease paths that need no expiry, on both backends (expiry: the next test)."""
    value = BIG_VALUES[name]
    queue = Queue(subspace, codec="raw", max_deliveries=2)
    queue.enqueue_many(db, [value, b"behind"])
    lease = queue.claim(db, lease=30)
    assert lease.value == value
    queue.release(db, lease)
    lease = queue.claim(db, lease=30)
    assert (lease.value, lease.deliveries) == (value, 2)
    lease = queue.extend(db, lease, 60)
    assert [held.value for held in queue.leases(db)] == [value]
    queue.ack(db, lease)
    assert queue.leases(db) == [] and queue.dead_letters(db) == []
    assert queue.dequeue_many(db, 5) == [b"behind"]


@pytest.mark.parametrize("name", list(BIG_VALUES))
def test_a_value_enqueue_accepts_travels_every_lease_path(name):
    """Memory only: expires the leases with db.advance_time()."""
    value = BIG_VALUES[name]
    db = memory.open()
    queue = Queue(Subspace(("big",)), codec="raw", max_deliveries=2)
    queue.enqueue_many(db, [value, b"behind"])
    lease = queue.claim(db, lease=1)
    assert lease.value == value
    queue.release(db, lease)
    lease = queue.claim(db, lease=1)
    assert (lease.value, lease.deliveries) == (value, 2)
    lease = queue.extend(db, lease, 2)
    assert [held.value for held in queue.leases(db)] == [value]
    pass_time(db, 3)  # expired twice: max_deliveries reached, a dead letter
    assert queue.claim(db, lease=1).value == b"behind"
    (letter,) = queue.dead_letters(db)
    assert letter.value == value and letter.reason.startswith("max_deliveries")
    assert queue.requeue_dead_letters(db) == 1
    assert queue.dequeue(db) == value


def big_line_queue(db, subspace, kind, value, **options):
    """A high-contention queue holding ``value`` twice, and its take (pop_max for a priority
    queue, whose max end reads in batches of its own)."""
    if kind == "queue":
        queue = Queue(subspace, codec="raw", high_contention=True, **options)
        queue.enqueue_many(db, [value, value])
        return queue, queue.dequeue, {}
    queue = PriorityQueue(subspace, codec="raw", high_contention=True, **options)
    queue.push(db, value, priority=1)
    queue.push(db, value, priority=1)
    return queue, queue.pop_max, {"max": True}


@pytest.mark.parametrize("name", list(BIG_VALUES))
@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_a_value_enqueue_accepts_can_be_taken_in_line(db, subspace, name, kind):
    """In line, with and without prefetch, on both backends (a dead session's reservation
    coming back after abandon_after: below)."""
    value = BIG_VALUES[name]
    queue, take, end = big_line_queue(db, subspace, kind, value)
    with queue.consumer(db, prefetch=1, **end) as session:
        assert session.take() == value  # registers, then takes and reserves the next
        assert queue.requests_in_line(db) == 1
    assert queue.requests_in_line(db) == 0  # closing returned the reservation
    assert take(db) == value  # one call in line: nobody else is, so one transaction
    assert queue.size(db) == 0 and take(db) is None


@pytest.mark.parametrize("name", list(BIG_VALUES))
@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_a_dead_sessions_reservation_holds_the_line_only_until_abandon_after(name, kind):
    """Memory only: the dead session's requests are abandoned through db.advance_time()."""
    value = BIG_VALUES[name]
    db = memory.open()
    queue, take, end = big_line_queue(db, Subspace(("big-line",)), kind, value, abandon_after=1)
    dead = queue.consumer(db, prefetch=2, abandon_after=1, **end)
    assert dead.take() == value  # then it dies holding two places (never closed)
    assert queue.requests_in_line(db) == 2
    assert take(db) is None  # its reservation holds the only item left
    assert queue.size(db) == 1 and queue.requests_in_line(db) == 2  # it withdrew its own
    pass_time(db, 2)  # the dead session's requests are now abandoned
    assert take(db) == value  # cleared on the way, and the item taken
    assert queue.size(db) == 0 and queue.requests_in_line(db) == 0


def test_requeue_dead_letters_with_its_default_limit_splits_into_transactions():
    db = memory.open()
    queue = Queue(Subspace(("requeue",)), codec="raw", max_deliveries=1)
    values = [bytes([n % 256]) * 20_000 for n in range(600)]
    for start in range(0, 600, 100):
        queue.enqueue_many(db, values[start : start + 100])
    while queue.claim(db, lease=1) is not None:
        pass
    pass_time(db, 2)
    assert queue.claim(db, lease=1) is None  # every lease expired once: all dead letters
    assert queue.leases(db) == []
    assert len(queue.dead_letters(db, limit=1000)) == 600
    assert queue.requeue_dead_letters(db) == 600  # about 12 MB: more than one transaction
    assert queue.size(db) == 600
    assert sorted(queue.dequeue_many(db, 1000)) == sorted(values)


class VersionedJson:
    """A JSON codec that no longer reads messages of the versions in ``refused``."""

    def __init__(self) -> None:
        self.refused: set[int] = {1}

    def encode(self, value: object) -> bytes:
        return json.dumps(value).encode()

    def decode(self, data: bytes) -> object:
        value = json.loads(data)
        if value["version"] in self.refused:
            raise ValueError(f"unsupported message version {value['version']}")
        return value


def poisoned(db, subspace, kind="queue", **options):
    codec = VersionedJson()
    subspace = subspace[kind]
    queue = (
        Queue(subspace, codec=codec, **options)
        if kind == "queue"
        else PriorityQueue(subspace, codec=codec, **options)
    )
    values = [{"version": 1, "n": 0}] + [{"version": 2, "n": n} for n in (1, 2, 3)]
    if kind == "queue":
        queue.enqueue_many(db, values)
    else:
        for value in values:
            queue.push(db, value, priority=5)
    return queue, codec


@pytest.mark.parametrize(
    "take",
    [
        lambda q, db: q.dequeue(db),
        lambda q, db: q.dequeue_many(db, 1)[0],
        lambda q, db: q.claim(db, lease=30).value,
    ],
    ids=["dequeue", "dequeue_many", "claim"],
)
@pytest.mark.parametrize("high_contention", [False, True])
def test_a_poison_item_goes_to_the_dead_letters_and_the_next_item_comes_out(
    db, subspace, take, high_contention
):
    queue, _codec = poisoned(db, subspace, high_contention=high_contention)
    assert queue.peek(db) == {"version": 2, "n": 1}  # peek skips it, as a take would
    assert queue.peek_many(db, 2) == [{"version": 2, "n": 1}, {"version": 2, "n": 2}]
    assert take(queue, db) == {"version": 2, "n": 1}
    (letter,) = queue.dead_letters(db)
    assert isinstance(letter.value, Undecodable)
    assert json.loads(letter.value.raw) == {"version": 1, "n": 0}  # the bytes are kept
    assert "unsupported message version 1" in letter.reason
    assert queue.size(db) == 2


@pytest.mark.parametrize("max_end", [False, True])
def test_a_poison_item_at_either_end_of_a_priority_queue_goes_aside(db, subspace, max_end):
    queue, _codec = poisoned(db, subspace, "priority", high_contention=False)
    assert queue.peek(db, max=max_end) == {"version": 2, "n": 1}
    assert queue.pop(db, max=max_end) == {"version": 2, "n": 1}
    assert len(queue.dead_letters(db)) == 1


def test_a_poison_item_reserved_in_line_goes_aside(db, subspace):
    """A session reserved the place of an item that became undecodable meanwhile: its next
    take moves the item to the dead letters and goes on behind it (here: none decodable)."""
    queue, codec = poisoned(db, subspace, high_contention=True)
    codec.refused = set()
    with queue.consumer(db, prefetch=2) as session:
        assert session.take() == {"version": 1, "n": 0}  # and reserves the next two places
        codec.refused = {2}  # every item left becomes undecodable
        assert session.take() is None  # all three moved aside, in one take
    assert len(queue.dead_letters(db)) == 3
    assert queue.size(db) == 0 and queue.requests_in_line(db) == 0
    assert queue.requeue_dead_letters(db) == 3
    codec.refused = set()
    assert sorted(value["n"] for value in queue.dequeue_many(db, 5)) == [1, 2, 3]


@pytest.mark.memory_only("expires the lease with db.advance_time()")
def test_an_expired_poison_lease_goes_aside_and_leases_show_it(db, subspace):
    queue, codec = poisoned(db, subspace, max_deliveries=5)
    codec.refused = set()
    lease = queue.claim(db, lease=1)
    assert lease.value == {"version": 1, "n": 0}
    codec.refused = {1}  # the codec changed while the item was leased
    (shown,) = queue.leases(db)
    assert isinstance(shown.value, Undecodable)
    pass_time(db, 2)
    assert queue.claim(db, lease=30).value == {"version": 2, "n": 1}
    (letter,) = queue.dead_letters(db)
    assert letter.deliveries == 1 and "unsupported" in letter.reason


def test_given_a_transaction_a_poison_item_is_moved_not_dropped(db, subspace):
    queue, _codec = poisoned(db, subspace)
    done = subspace.pack(("done",))

    @transactional
    def take_and_record(tr):
        value = queue.dequeue(tr)
        tr[done] = json.dumps(value).encode()
        return value

    assert take_and_record(db) == {"version": 2, "n": 1}
    assert json.loads(bytes(db[done])) == {"version": 2, "n": 1}
    assert len(queue.dead_letters(db)) == 1
    assert [letter.value.raw for letter in queue.dead_letters(db)] == [b'{"version": 1, "n": 0}']


def test_items_of_a_nested_queue_give_a_clear_error_and_change_nothing(db, subspace):
    outer = Queue(subspace["a"])
    inner = Queue(subspace["a"]["b"])
    inner.enqueue_many(db, ["inner-1", "inner-2"])
    before = all_keys(db, outer.subspace)
    for call in (
        lambda: outer.dequeue(db),
        lambda: outer.dequeue_many(db, 5),
        lambda: outer.peek(db),
        lambda: outer.claim(db, lease=5),
        lambda: outer.enqueue(db, "outer-1"),
    ):
        with pytest.raises(ValueError, match="not one of its items") as raised:
            call()
        assert "'a', 'b'" in str(raised.value)  # the message names the key, as a tuple
        assert "\\x02b\\x00" not in str(raised.value)
    assert all_keys(db, outer.subspace) == before
    assert inner.dequeue_many(db, 5) == ["inner-1", "inner-2"]


def test_a_dequeue_in_line_with_a_short_timeout_does_not_wait_behind_a_dead_session(db, subspace):
    queue = Queue(subspace, high_contention=True)
    dead = queue.consumer(db, prefetch=1)
    assert dead.take() is None  # first in line, then dies (never closed)
    started = time.monotonic()
    assert queue.dequeue(db, block=True, timeout=0.05) is None
    assert time.monotonic() - started < 0.5
    assert queue.requests_in_line(db) == 1  # its own request was withdrawn
    queue.enqueue(db, "x")
    assert queue.dequeue(db) is None  # the dead session's place, for abandon_after seconds
    assert dead.take() == "x"  # (it was not dead after all)
