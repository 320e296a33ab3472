"""The lease record and the job record: fixed layouts (issue 44, decision 3).

Both records are packed with ``struct`` behind a first byte that no tuple-layer value starts
with (0x03), the variable parts last; records of the older tuple layouts (an older
fdbqueue's) are still read, and a queue holding them still claims, acknowledges, releases,
redelivers and finishes their items and jobs. The layouts are the modules' docstrings'
(fdbqueue._delivery.leases, fdbqueue._storage.job_records), checked here byte for byte.
"""

from __future__ import annotations

import struct
from typing import Any

import fdb.tuple
import pytest
from helpers import old_job_record, old_lease_record, pass_time
from hypothesis import given, settings
from hypothesis import strategies as st

import fdbqueue
from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue._delivery.leases import LeaseRecord
from fdbqueue._storage.job_records import RECORD_VERSION, STATES, JobRecord

QUICK = settings(max_examples=150, deadline=None)

int64 = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, 2**63 - 1, -(2**63), 1_764_000_000_000_000]),
)
uint64 = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**64 - 1]))
keys = st.one_of(
    st.binary(max_size=60),
    st.lists(st.sampled_from([b"\x00", b"\xff", b"\x00\xff", b"\x01", b"\x03"])).map(b"".join),
)
#: What a group can be (fdbqueue._storage.groups.check_group): str, bytes, an int of the
#: tuple layer, or tuples of those.
group_scalars = st.one_of(
    st.text(max_size=12),
    st.binary(max_size=12),
    st.integers(),
    st.integers(-(2**2040) + 1, 2**2040 - 1),
)
groups = st.one_of(
    st.none(),
    st.recursive(
        group_scalars, lambda inner: st.tuples(inner) | st.tuples(inner, inner), max_leaves=6
    ),
)
priorities = st.one_of(
    st.none(),
    st.integers(),
    st.integers(-(2**2040) + 1, 2**2040 - 1),
    st.sampled_from([0, -1, 2**64, -(2**64), 2**2040 - 1, -(2**2040) + 1]),
)
texts = st.one_of(st.text(max_size=30), st.sampled_from(["", "é\u2603\U0001f600", "a\x00b"]))
errors = st.one_of(st.just(("", "", "")), st.tuples(texts, texts, texts))

lease_records = st.builds(
    lambda item_key, deliveries, held_id, expiry, released: LeaseRecord(
        item_key, deliveries, held_id, expiry, released
    ),
    keys,
    uint64,
    st.binary(max_size=255),
    st.none() | int64,
    st.none() | int64,
)
job_records = st.builds(
    JobRecord,
    st.sampled_from(STATES),
    uint64,
    int64,
    int64,
    int64,
    int64,
    st.booleans(),
    groups,
    priorities,
    errors,
)


# -- the lease record -------------------------------------------------------------------------


@QUICK
@given(lease_records)
def test_a_lease_record_round_trips_in_the_fixed_layout(record):
    packed = record.pack()
    assert packed[0] == 0x03 and len(packed) == record.stored_bytes()
    assert LeaseRecord.parse(packed) == record


@QUICK
@given(lease_records)
def test_a_lease_record_of_the_old_tuple_layout_still_parses(record):
    if record.expiry_time is None:
        record = record._replace(released_at=None)  # the old layout had no release time then
    old = old_lease_record(record)
    assert old[0] == 0x01  # its item key's type code: never the fixed layout's 0x03
    assert LeaseRecord.parse(old) == record


def test_a_lease_record_is_laid_out_as_documented_byte_for_byte():
    item_key, held_id = b"P\x15\x01\x00\xff", bytes(range(16))
    record = LeaseRecord(item_key, 3, held_id, 1_764_000_000_123_456, 1_764_000_000_000_001)
    assert record.pack() == (
        b"\x03"  # the fixed layout
        + b"\x03"  # flags: an expiry time (0x01), released (0x02)
        + (3).to_bytes(8, "little")
        + (1_764_000_000_123_456).to_bytes(8, "little", signed=True)
        + (1_764_000_000_000_001).to_bytes(8, "little", signed=True)
        + b"\x10"  # the held id's length
        + held_id
        + item_key  # the rest, unescaped
    )
    held = LeaseRecord(item_key, 1, held_id, 5).pack()
    assert held[:2] == b"\x03\x01" and held[18:26] == bytes(8)  # no release time: 0


@pytest.mark.parametrize(
    "value",
    [b"", b"\x03", b"\x03" + bytes(25), b"\x03" + bytes(25) + b"\x10" + bytes(15), b"\x7f"],
    ids=["empty", "format byte alone", "fixed fields cut", "held id cut", "no record"],
)
def test_what_is_no_lease_record_is_refused_with_a_value_error(value):
    with pytest.raises(ValueError, match="not a lease record"):
        LeaseRecord.parse(value)


# -- the job record ---------------------------------------------------------------------------


@QUICK
@given(job_records)
def test_a_job_record_round_trips_in_the_fixed_layout(record):
    packed = record.pack()
    assert packed[0] == RECORD_VERSION == 3
    assert JobRecord.parse(packed) == record  # version 3: its results stored as version 2's
    plain = record.group is None and record.priority is None and record.error == ("", "", "")
    assert (len(packed) == 43) == plain


@QUICK
@given(job_records, st.sampled_from([1, 2]))
def test_a_job_record_of_the_old_tuple_layout_still_parses(record, version):
    old = old_job_record(record, version)
    assert old[0] == 0x15  # its version, a one-byte int: never the fixed layout's 0x03
    record.version = version  # which tells how its result is stored
    assert JobRecord.parse(old) == record


def test_a_plain_job_record_packs_and_parses_without_the_tuple_layer(monkeypatch):
    record = JobRecord("running", 2, 10, 20, 0, 0, True)

    def refused(*args: Any) -> Any:
        raise AssertionError("the tuple layer was used")

    monkeypatch.setattr(fdb.tuple, "pack", refused)
    monkeypatch.setattr(fdb.tuple, "unpack", refused)
    assert JobRecord.parse(record.pack()) == record


def test_a_job_record_is_laid_out_as_documented_byte_for_byte():
    times = (1_764_000_000_000_000, 1_764_000_001_000_000, 0, 1_764_000_009_000_000)
    fixed = struct.pack("<BBBQqqqq", 3, 3, 0x01 | 0x02 | 0x08, 2, *times)
    record = JobRecord("retrying", 2, *times, True, ("g", 7), None, ("KeyError", "'k'", "tb"))
    assert record.pack() == fixed + fdb.tuple.pack((("g", 7), "KeyError", "'k'", "tb"))
    assert JobRecord("waiting", priority=-5).pack() == struct.pack(
        "<BBBQqqqq", 3, 0, 0x04, 0, 0, 0, 0, 0
    ) + fdb.tuple.pack((-5,))
    codes = {state: JobRecord(state).pack()[1] for state in STATES}
    assert codes == {
        "waiting": 0,
        "delayed": 1,
        "running": 2,
        "retrying": 3,
        "succeeded": 4,
        "dead": 5,
        "cancelled": 6,
        "deferred": 7,
    }


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"\x03",
        struct.pack("<BBBQqqqq", 3, 8, 0, 0, 0, 0, 0, 0),  # no state 8
        struct.pack("<BBBQqqqq", 3, 0, 0x02, 0, 0, 0, 0, 0),  # a group said, none follows
        struct.pack("<BBBQqqqq", 3, 0, 0x02, 0, 0, 0, 0, 0) + fdb.tuple.pack(("g", 1)),
        struct.pack("<BBBQqqqq", 3, 0, 0, 0, 0, 0, 0, 0) + b"\x00",  # bytes after, no flag
        fdb.tuple.pack((2, "waiting")),  # a tuple record cut short
        b"\x7f",
    ],
    ids=[
        "empty",
        "version alone",
        "unknown state",
        "optional field missing",
        "optional field extra",
        "trailing bytes",
        "short tuple",
        "no record",
    ],
)
def test_what_is_no_job_record_is_refused_with_a_value_error(value):
    with pytest.raises(ValueError, match="not a job record"):
        JobRecord.parse(value)


# -- a queue holding records of the old layouts -------------------------------------------------


def stored_key(queue: Any, name: str, job_id: str) -> bytes:
    """The documented key ``P + b"\\xff" + pack((name, id))`` of a job's record."""
    key: bytes = queue.subspace.key() + b"\xff" + fdb.tuple.pack((name, bytes.fromhex(job_id)))
    return key


def make_old(db: Any, queue: Any, lease: Any = None, job_id: str | None = None) -> None:
    """Rewrite ``lease``'s record and the record of the job ``job_id`` in the tuple layouts
    of an older fdbqueue (version 2 for the job's)."""

    @fdbqueue.transactional
    def rewrite(tr: Any) -> None:
        if lease is not None:
            tr[lease.key] = old_lease_record(LeaseRecord.parse(bytes(tr[lease.key])))
        if job_id is not None:
            key = stored_key(queue, "jobs", job_id)
            tr[key] = old_job_record(JobRecord.parse(bytes(tr[key])))

    rewrite(db)


def first_byte(db: Any, key: bytes) -> int:
    @fdbqueue.transactional
    def read(tr: Any) -> int:
        return bytes(tr[key])[0]

    return read(db)


def submit(queue: Any, db: Any, value: Any, **options: Any) -> Any:
    if isinstance(queue, PriorityQueue):
        return queue.submit(db, value, priority=-(2**70), **options)
    return queue.submit(db, value, **options)


@pytest.mark.parametrize("kind", [Queue, PriorityQueue])
def test_a_queue_holding_old_layout_records_still_claims_acks_and_finishes_them(kind):
    db = memory.open()
    queue = kind(Subspace(("records", kind.__name__)), max_deliveries=3)
    acked = submit(queue, db, "acked", group="g")
    lease = queue.claim(db, lease=30)
    redelivered = submit(queue, db, "redelivered")
    waiting = submit(queue, db, "waiting")
    make_old(db, queue, job_id=waiting.id)  # submitted by an older fdbqueue
    make_old(db, queue, lease, acked.id)  # claimed by an older fdbqueue
    assert [held.value for held in queue.leases(db)] == ["acked"]
    extended = queue.extend(db, lease, 60)
    assert first_byte(db, extended.key) == 0x03  # its next write: the fixed layout
    make_old(db, queue, extended)
    queue.ack(db, extended, result="done")
    assert queue.result(db, acked.id) == "done"
    info = queue.job(db, acked.id)
    assert (info.state, info.deliveries, info.group) == ("succeeded", 1, "g")
    assert first_byte(db, stored_key(queue, "jobs", acked.id)) == 0x03

    lease = queue.claim(db, lease=30)
    assert lease.job_id == redelivered.id
    make_old(db, queue, lease, redelivered.id)
    pass_time(db, 31)  # the old lease expires: delivered again, its deliveries counted
    again = queue.claim(db, lease=30)
    assert (again.job_id, again.deliveries) == (redelivered.id, 2)
    assert first_byte(db, again.key) == 0x03
    make_old(db, queue, again, redelivered.id)
    queue.release(db, again, error=RuntimeError("once more"))
    make_old(db, queue, job_id=redelivered.id)
    info = queue.job(db, redelivered.id)
    assert (info.state, info.error[:2]) == ("retrying", ("RuntimeError", "once more"))
    third = queue.claim(db, lease=30)
    make_old(db, queue, third, redelivered.id)
    queue.dead_letter(db, third, "given up")
    info = queue.job(db, redelivered.id)
    assert (info.state, info.deliveries, info.error[1]) == ("dead", 3, "given up")

    summary = queue.work(
        db, lambda value: value + "!", lease=30, until_empty=True, handle_signals=False
    )
    assert summary.succeeded == 1
    assert queue.result(db, waiting.id) == "waiting!"
    assert queue.job(db, waiting.id).priority == (-(2**70) if kind is PriorityQueue else None)
    assert queue.size(db) == 0 and queue.leases(db) == []


def test_a_damaged_job_record_reads_as_no_job():
    db = memory.open()
    queue = Queue(Subspace(("records", "garbage")))
    job = queue.submit(db, "x")

    @fdbqueue.transactional
    def damage(tr: Any) -> None:
        tr[stored_key(queue, "jobs", job.id)] = b"\x03\x00"

    damage(db)
    assert queue.job(db, job.id) is None  # as an unknown job's: Jobs.parsed gives None


def test_a_jobs_options_and_its_dependents_flag_are_laid_out_as_documented():
    """Flag 0x10: the options' 28 fixed bytes after the 43 (0 for none), before the tuple
    layer's optional fields; flag 0x20: jobs wait for it. Both read back as written."""
    from fdbqueue._storage.job_records import JobOptions

    record = JobRecord("waiting", group="g", options=JobOptions(3, 30.0, None))
    record.has_dependents = True
    fixed = struct.pack("<BBBQqqqq", 3, 0, 0x02 | 0x10 | 0x20, 0, 0, 0, 0, 0)
    options = struct.pack("<Iddd", 3, 30.0, 0.0, -1.0)
    assert record.pack() == fixed + options + fdb.tuple.pack(("g",))
    back = JobRecord.parse(record.pack())
    assert (back.options, back.group, back.has_dependents) == (JobOptions(3, 30.0), "g", True)
    alone = JobRecord("deferred", options=JobOptions(backoff=2.5)).pack()
    assert alone[1] == 7 and len(alone) == 43 + 28
    assert JobRecord.parse(alone).options == JobOptions(None, None, 2.5)
    kept = JobRecord("waiting", options=JobOptions(result_ttl=0.0)).pack()
    assert JobRecord.parse(kept).options == JobOptions(result_ttl=0.0)  # 0 is not "none"
