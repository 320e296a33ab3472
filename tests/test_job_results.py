"""Job results (docs/jobs.rst, "Results"): a codec of their own, whatever the queue's codec,
so that what handlers return most comes back as it was; a result that cannot be kept says so
(``ResultNotKeptError``), never reads as None; results an older fdbqueue kept still read."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import fdb.tuple
import pytest
from helpers import old_job_record

import fdbqueue
import fdbqueue.asyncio as fa
from fdbqueue import (
    JobFailedError,
    PriorityQueue,
    Queue,
    ResultNotKeptError,
    Subspace,
    TaggedCodec,
    memory,
)
from fdbqueue._storage.job_records import JobRecord
from fdbqueue.codecs import MAX_VALUE_BYTES, TAGGED_DEPTH

KINDS = pytest.mark.parametrize("kind", [Queue, PriorityQueue])
CODECS = pytest.mark.parametrize("codec", ["tuple", "raw", "json"])

#: What handlers return most, alone and nested.
VALUES = {
    "dict": {"name": "ada", "age": 36, "tags": ["a", "b"]},
    "list": [1, "two", 3.5],
    "str": "résumé",
    "empty str": "",
    "int": 42,
    "large int": -(2**70),
    "float": 2.5,
    "True": True,
    "False": False,
    "None": None,
    "bytes": b"\x00\xfe\xff",
    "tuple": (1, "a"),
    "nested": {"rows": [{"id": 1, "blob": b"\x01", "note": None}, (2, [3.0])], "empty": {}},
    "empty list": [],
}
#: What no result codec built in keeps, and one too large for a value.
UNKEEPABLE = {
    "set": {1, 2},
    "object": object(),
    "set inside": {"ok": [1], "not": {3}},
    "int past the tuple layer": 2**3000,
    "too large": "x" * (MAX_VALUE_BYTES + 1),
}


def queue_of(kind: type[Any], name: str, **options: Any) -> Any:
    return kind(Subspace(("results", name)), **options)


def submit(queue: Any, db: Any, value: Any) -> Any:
    if isinstance(queue, PriorityQueue):
        return queue.submit(db, value, priority=1)
    return queue.submit(db, value)


def item_for(codec: str) -> Any:
    return b"job" if codec == "raw" else "job"


def run_job(queue: Any, db: Any, item: Any, returned: Any, **options: Any) -> str:
    """Submit a job of ``item`` and run it by ``work`` with a handler that returns
    ``returned``; its id."""
    job = submit(queue, db, item)
    if options.get("transactional"):

        def handler(tr: Any, value: Any) -> Any:
            return returned
    else:

        def handler(value: Any) -> Any:
            return returned

    summary = queue.work(db, handler, lease=30, until_empty=True, handle_signals=False, **options)
    assert summary.succeeded == 1
    job_id: str = job.id
    return job_id


def stored_under(db: Any, queue: Any, name: str, job_id: str) -> bytes | None:
    """The value at the documented key ``P + b"\\xff" + pack((name, id))``."""
    key = queue.subspace.key() + b"\xff" + fdb.tuple.pack((name, bytes.fromhex(job_id)))

    @fdbqueue.transactional
    def read(tr: Any) -> bytes | None:
        value = tr[key]
        return bytes(value) if value.present() else None

    return read(db)


def overwrite(db: Any, queue: Any, name: str, job_id: str, value: bytes) -> None:
    key = queue.subspace.key() + b"\xff" + fdb.tuple.pack((name, bytes.fromhex(job_id)))

    @fdbqueue.transactional
    def write(tr: Any) -> None:
        tr[key] = value

    write(db)


@KINDS
@CODECS
@pytest.mark.parametrize("name", list(VALUES))
def test_a_result_round_trips_whatever_the_queue_codec(kind, codec, name):
    db = memory.open()
    queue = queue_of(kind, "round-trip", codec=codec)
    value = VALUES[name]
    job_id = run_job(queue, db, item_for(codec), value)
    result = queue.result(db, job_id, timeout=1)
    assert result == value and type(result) is type(value)
    info = queue.job(db, job_id)
    assert info.result == value and info.result_error is None
    assert info.has_result is (value is not None)  # a handler that returns None keeps none


@KINDS
def test_results_round_trip_through_transactional_work_and_asyncio(kind):
    db = memory.open()
    queue = queue_of(kind, "transactional", codec="json")
    value = VALUES["nested"]
    assert queue.result(db, run_job(queue, db, "x", value, transactional=True)) == value

    async def main() -> None:
        twin = queue_of(getattr(fa, kind.__name__), "asyncio", codec="tuple")
        extra = {"priority": 1} if kind is PriorityQueue else {}
        options = {"lease": 30, "until_empty": True, "handle_signals": False}
        job = await twin.submit(db, "x", **extra)
        await twin.work(db, lambda v: [b"\x00", {"k": (1,)}], **options)
        assert await twin.result(db, job.id, timeout=1) == [b"\x00", {"k": (1,)}]
        kept_not = await twin.submit(db, "y", **extra)
        await twin.work(db, lambda v: {1, 2}, **options)
        with pytest.raises(ResultNotKeptError, match="result not kept"):
            await twin.result(db, kept_not.id, timeout=1)

    asyncio.run(main())


@KINDS
@pytest.mark.parametrize("transactional", [False, True])
@pytest.mark.parametrize("name", list(UNKEEPABLE))
def test_a_result_that_cannot_be_kept_raises_its_own_error(kind, transactional, name, caplog):
    db = memory.open()
    queue = queue_of(kind, "unkeepable", codec="json")
    job_id = run_job(queue, db, "x", UNKEEPABLE[name], transactional=transactional)
    info = queue.job(db, job_id)
    assert info.state == "succeeded"  # the work was done
    assert (info.has_result, info.result) == (False, None)
    assert info.result_error.startswith("result not kept: ")
    with pytest.raises(ResultNotKeptError) as raised:
        queue.result(db, job_id, timeout=1)
    error = raised.value
    assert not isinstance(error, (KeyError, TimeoutError, JobFailedError))
    assert error.reason == info.result_error and error.info.id == job_id
    assert job_id in str(error) and "result not kept" in str(error)
    assert f"job {job_id} succeeded, but result not kept" in caplog.text
    why = "bytes encoded" if name == "too large" else "the result codec raised"
    assert why in info.result_error
    listed = queue.jobs(db, state="succeeded")
    assert [job.result_error for job in listed] == [info.result_error]


def test_an_ack_whose_result_cannot_be_kept_records_why():
    db = memory.open()
    queue = queue_of(Queue, "ack", codec="json")
    job = queue.submit(db, {"a": 1})
    queue.ack(db, queue.claim(db, 30), result={"when": object()})
    with pytest.raises(ResultNotKeptError, match="the tagged codec cannot store a value of type"):
        queue.result(db, job.id)
    plain = queue.submit(db, {"a": 2})
    queue.ack(db, queue.claim(db, 30))  # no result: None, as before
    assert queue.result(db, plain.id) is None
    assert queue.job(db, plain.id).result_error is None


def test_a_result_that_fits_a_value_exactly_is_kept():
    db = memory.open()
    queue = queue_of(Queue, "limit", codec="raw", result_codec="raw")
    fits = b"x" * (MAX_VALUE_BYTES - 1)  # one byte says it was kept
    assert queue.result(db, run_job(queue, db, b"a", fits)) == fits
    with pytest.raises(ResultNotKeptError, match="100,000 bytes encoded, more than the 99,999"):
        queue.result(db, run_job(queue, db, b"b", fits + b"x"))


def test_the_result_codec_is_chosen_with_result_codec():
    db = memory.open()
    default = queue_of(Queue, "default")
    assert isinstance(default.result_codec, TaggedCodec)
    assert isinstance(queue_of(Queue, "named", result_codec="tagged").result_codec, TaggedCodec)
    twin = queue_of(fa.PriorityQueue, "twin", result_codec="json")
    assert twin.result_codec is twin.sync.result_codec and twin.result_codec.name == "json"
    as_json = queue_of(Queue, "as-json", codec="raw", result_codec="json")
    assert as_json.result_codec.name == "json"
    job_id = run_job(as_json, db, b"x", {"a": [1, None]})
    assert as_json.result(db, job_id) == {"a": [1, None]}
    assert stored_under(db, as_json, "job_results", job_id) == b'\x00{"a":[1,null]}'
    refused = run_job(as_json, db, b"y", (1, 2))  # JSON has no tuple: not kept, and says so
    with pytest.raises(ResultNotKeptError, match="the json codec cannot store a tuple"):
        as_json.result(db, refused)

    class Upper:
        name = "upper"

        def encode(self, value: str) -> bytes:
            return value.upper().encode()

        def decode(self, data: bytes) -> str:
            return data.decode()

    own = queue_of(PriorityQueue, "own", codec="json", result_codec=Upper())
    assert own.result(db, run_job(own, db, "x", "shout")) == "SHOUT"
    for bad, error in [("no such codec", ValueError), (42, TypeError)]:
        with pytest.raises(error, match="result_codec"):
            queue_of(Queue, "bad", result_codec=bad)
        with pytest.raises(error, match="result_codec"):
            queue_of(fa.Queue, "bad", result_codec=bad)


@KINDS
def test_a_result_is_stored_as_documented_byte_for_byte(kind):
    db = memory.open()
    queue = queue_of(kind, "layout", codec="json")
    job_id = run_job(queue, db, "x", {"a": [1, b"x"], "t": (None,)})
    record = stored_under(db, queue, "jobs", job_id)
    assert record is not None and record[:2] == b"\x03\x04"  # version 3 (which tells the
    # results' layout: as version 2's), succeeded (the job record's layout: tests/test_records.py)
    assert stored_under(db, queue, "job_results", job_id) == b"\x00" + fdb.tuple.pack(
        (("d", "a", ("l", 1, b"x"), "t", ("t", None)),)
    )
    not_kept = run_job(queue, db, "y", {1})
    stored = stored_under(db, queue, "job_results", not_kept)
    assert stored is not None and stored[:1] == b"\x01"
    assert stored[1:].decode() == queue.job(db, not_kept).result_error


@pytest.mark.parametrize(
    ("codec", "result_codec", "old_bytes", "value"),
    [
        ("tuple", None, fdb.tuple.pack(((1, 2),)), (1, 2)),  # a list came back a tuple
        ("json", None, b'{"a":[1,2]}', {"a": [1, 2]}),
        ("raw", None, b"\x00\x01 raw", b"\x00\x01 raw"),
        ("json", "raw", b"\x01 given", b"\x01 given"),  # the result_codec given, as before
        ("tuple", "tagged", fdb.tuple.pack(("old",)), "old"),  # tagged was not: the queue's
    ],
)
def test_a_result_an_older_fdbqueue_kept_still_reads(codec, result_codec, old_bytes, value):
    db = memory.open()
    queue = queue_of(Queue, "old", codec=codec, result_codec=result_codec)
    job_id = run_job(queue, db, item_for(codec), "replaced below")
    stored = stored_under(db, queue, "jobs", job_id)
    assert stored is not None
    # as an fdbqueue before result codecs wrote it (version 1), with the result unchanged
    overwrite(db, queue, "jobs", job_id, old_job_record(JobRecord.parse(stored), version=1))
    overwrite(db, queue, "job_results", job_id, old_bytes)
    assert queue.result(db, job_id) == value
    info = queue.job(db, job_id)
    assert (info.has_result, info.result, info.result_error) == (True, value, None)


def test_a_result_its_codec_cannot_decode_is_undecodable():
    db = memory.open()
    queue = queue_of(Queue, "undecodable")
    job_id = run_job(queue, db, "x", "fine")
    overwrite(db, queue, "job_results", job_id, b"\x00\x05\x02z\x00\x00")  # an unknown tag
    result = queue.result(db, job_id)
    assert isinstance(result, fdbqueue.Undecodable) and "'z'" in result.error


def test_the_tagged_codec_round_trips_and_refuses():
    codec = TaggedCodec()
    assert codec.encode(42) == fdb.tuple.pack((42,)) == b"\x15\x2a"  # a scalar as TupleCodec
    assert codec.encode({"a": [1, b"x"]}) == fdb.tuple.pack((("d", "a", ("l", 1, b"x")),))
    for value in [*VALUES.values(), uuid.UUID(int=7), {(1, "k"): {b"k": None}, 3: [()]}]:
        decoded = codec.decode(codec.encode(value))
        assert decoded == value and type(decoded) is type(value)
    nan = codec.decode(codec.encode(float("nan")))
    assert nan != nan
    assert codec.decode(codec.encode(bytearray(b"ab"))) == b"ab"
    nested: list[Any] = []
    for _ in range(TAGGED_DEPTH - 1):
        nested = [nested]
    assert codec.decode(codec.encode(nested)) == nested
    itself: list[Any] = []
    itself.append(itself)
    for bad, error in [
        ({1}, TypeError),
        (object(), TypeError),
        ([nested], ValueError),
        (itself, ValueError),
        (2**3000, ValueError),
        ("\ud800", ValueError),
    ]:
        with pytest.raises(error, match="tagged codec"):
            codec.encode(bad)
    for data in [
        b"",
        fdb.tuple.pack((1, 2)),
        fdb.tuple.pack((("x", 1),)),
        b"\x05\x02d\x00\x14\x00",
    ]:
        with pytest.raises(ValueError):
            codec.decode(data)
    assert json.loads(json.dumps(codec.decode(codec.encode(VALUES["dict"])))) == VALUES["dict"]
