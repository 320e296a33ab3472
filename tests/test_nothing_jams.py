"""Nothing jams: legal values travel every path, poison values go aside, limits are respected.

Each test reproduces a way the adversarial review (``shared/research/adversary-findings.md``)
jammed a queue or lost an item, and asserts the behaviour users rely on instead.
"""

from __future__ import annotations

import json
import time

import pytest
from helpers import all_keys

from fdbqueue import PriorityQueue, Queue, Subspace, Undecodable, memory, transactional
from fdbqueue.staging import Staging

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
    db.advance_time(3)  # expired twice: max_deliveries reached, a dead letter
    assert queue.claim(db, lease=1).value == b"behind"
    (letter,) = queue.dead_letters(db)
    assert letter.value == value and letter.reason.startswith("max_deliveries")
    assert queue.requeue_dead_letters(db) == 1
    assert queue.dequeue(db) == value


@pytest.mark.parametrize("name", list(BIG_VALUES))
@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_a_value_enqueue_accepts_can_be_served_and_collected(db, subspace, name, kind):
    """Serving and collecting, on both backends (giving back after abandon_after: below)."""
    value = BIG_VALUES[name]
    if kind == "queue":
        queue = Queue(subspace, codec="raw", high_contention=True)
        queue.enqueue_many(db, [value, value])
        staging: Staging = queue._staging  # type: ignore[attr-defined]
    else:
        queue = PriorityQueue(subspace, codec="raw", high_contention=True)
        queue.push(db, value, priority=1)
        queue.push(db, value, priority=1)
        staging = queue._staging[True]  # type: ignore[attr-defined]
    live = staging._register(db)
    assert staging.serve(db) == 1  # one request: one value moves to its result slot
    assert queue.size(db) == 2  # counted while served and not collected
    tr = db.create_transaction()
    assert staging._collect_or_watch(tr, live) == ("done", value)
    tr.commit().wait()
    assert queue.size(db) == 1
    take = queue.dequeue if kind == "queue" else queue.pop_max
    assert take(db) == value
    assert queue.size(db) == 0


@pytest.mark.parametrize("name", list(BIG_VALUES))
@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_a_value_enqueue_accepts_can_be_served_collected_and_given_back(name, kind):
    """Memory only: the dead consumer's result falls due through db.advance_time()."""
    value = BIG_VALUES[name]
    db = memory.open()
    subspace = Subspace(("big-staged",))
    if kind == "queue":
        queue = Queue(subspace, codec="raw", high_contention=True, abandon_after=1)
        queue.enqueue_many(db, [value, value])
        staging: Staging = queue._staging  # type: ignore[attr-defined]
    else:
        queue = PriorityQueue(subspace, codec="raw", high_contention=True, abandon_after=1)
        queue.push(db, value, priority=1)
        queue.push(db, value, priority=1)
        staging = queue._staging[True]  # type: ignore[attr-defined]
    dead = staging._register(db)  # a consumer that will die
    live = staging._register(db)
    assert staging.serve(db) == 2  # both values move to result slots
    tr = db.create_transaction()
    assert staging._collect_or_watch(tr, live) == ("done", value)
    tr.commit().wait()
    db.advance_time(2)  # the dead consumer's result falls due
    take = queue.dequeue if kind == "queue" else queue.pop_max
    assert take(db) == value  # given back and taken by an ordinary call
    assert queue.size(db) == 0
    assert staging._collect_or_watch(db.create_transaction(), dead)[0] == "lost"


def test_a_serving_transaction_caps_itself_by_bytes(db, subspace):
    """batch_size=200 and 90 KB items would be an 18 MB transaction; it serves in parts."""
    queue = Queue(subspace, codec="raw", high_contention=True, batch_size=200)
    values = [bytes([n]) * 90_000 for n in range(120)]
    for start in range(0, 120, 40):
        queue.enqueue_many(db, values[start : start + 40])
    staging: Staging = queue._staging  # type: ignore[attr-defined]
    requests = [staging._register(db) for _ in range(120)]
    first = staging.serve(db)
    assert 0 < first < 120  # capped by bytes, not by batch_size
    served = first
    while served < 120:
        progress = staging.serve(db)
        assert progress > 0
        served += progress
    collected = []
    for request in requests:
        tr = db.create_transaction()
        state, value = staging._collect_or_watch(tr, request)
        tr.commit().wait()
        assert state == "done"
        collected.append(value)
    assert collected == values


def test_requeue_dead_letters_with_its_default_limit_splits_into_transactions():
    db = memory.open()
    queue = Queue(Subspace(("requeue",)), codec="raw", max_deliveries=1)
    values = [bytes([n % 256]) * 20_000 for n in range(600)]
    for start in range(0, 600, 100):
        queue.enqueue_many(db, values[start : start + 100])
    while queue.claim(db, lease=1) is not None:
        pass
    db.advance_time(2)
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


def test_a_poison_item_served_to_a_high_contention_consumer_goes_aside(db, subspace):
    queue, codec = poisoned(db, subspace, high_contention=True)
    codec.refused = set()
    staging: Staging = queue._staging  # type: ignore[attr-defined]
    request = staging._register(db)
    staging.serve(db)  # the first item moves to the request's result slot
    codec.refused = {1}  # and only then becomes undecodable
    tr = db.create_transaction()
    state, _value = staging._collect_or_watch(tr, request)
    tr.commit().wait()
    assert state == "poison"  # the consumer asks again; the item is a dead letter
    assert len(queue.dead_letters(db)) == 1
    assert queue.dequeue(db) == {"version": 2, "n": 1}


@pytest.mark.memory_only("expires the lease with db.advance_time()")
def test_an_expired_poison_lease_goes_aside_and_leases_show_it(db, subspace):
    queue, codec = poisoned(db, subspace, max_deliveries=5)
    codec.refused = set()
    lease = queue.claim(db, lease=1)
    assert lease.value == {"version": 1, "n": 0}
    codec.refused = {1}  # the codec changed while the item was leased
    (shown,) = queue.leases(db)
    assert isinstance(shown.value, Undecodable)
    db.advance_time(2)
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
        assert "\\x02b\\x00" in str(raised.value)  # the message names the key
    assert all_keys(db, outer.subspace) == before
    assert inner.dequeue_many(db, 5) == ["inner-1", "inner-2"]


def test_a_staged_dequeue_with_a_short_timeout_does_not_wait_behind_a_dead_requester(db, subspace):
    queue = Queue(subspace, high_contention=True)
    staging: Staging = queue._staging  # type: ignore[attr-defined]
    staging._register(db)  # first in line, then dies
    started = time.monotonic()
    assert queue.dequeue(db, block=True, timeout=0.05) is None
    assert time.monotonic() - started < 0.5
    assert queue.pending_requests(db) == 1  # its own request was withdrawn
