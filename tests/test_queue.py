"""Queue: FIFO behaviour, key layout, recipe compatibility, composition and bad input."""

from __future__ import annotations

import os
import struct
import uuid

import fdb.tuple
import pytest
from helpers import all_keys

from fdbqueue import Queue, Subspace, transactional


def test_dequeue_returns_items_in_enqueue_order(db, subspace):
    queue = Queue(subspace)
    for value in ["a", "b", "c"]:
        queue.enqueue(db, value)
    assert [queue.dequeue(db) for _ in range(3)] == ["a", "b", "c"]


def test_empty_queue_dequeue_and_peek_return_none(db, subspace):
    queue = Queue(subspace)
    assert queue.dequeue(db) is None
    assert queue.peek(db) is None
    assert queue.empty(db) is True
    assert queue.size(db) == 0
    assert queue.dequeue_many(db, 5) == []


def test_peek_returns_front_without_removing(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "first")
    queue.enqueue(db, "second")
    assert queue.peek(db) == "first"
    assert queue.peek(db) == "first"
    assert queue.size(db) == 2
    assert queue.dequeue(db) == "first"
    assert queue.peek(db) == "second"


def test_size_and_empty_follow_enqueues_and_dequeues(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, range(5))
    assert queue.size(db) == 5
    assert queue.empty(db) is False
    queue.dequeue_many(db, 2)
    assert queue.size(db) == 3
    queue.dequeue_many(db, 10)
    assert queue.size(db) == 0
    assert queue.empty(db) is True


def test_enqueue_many_and_dequeue_many_keep_order(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, [1, 2, 3])
    queue.enqueue_many(db, (x for x in [4, 5]))
    assert queue.dequeue_many(db, 2) == [1, 2]
    assert queue.dequeue_many(db, 0) == []
    assert queue.dequeue_many(db, 100) == [3, 4, 5]


def test_clear_removes_items_and_counter_and_keeps_only_receipts(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["x", "y"])
    queue.clear(db)
    assert queue.empty(db)
    assert queue.size(db) == 0
    receipts = subspace.key() + b"\xff" + fdb.tuple.pack(("receipts",))
    features = subspace.key() + b"\xff" + fdb.tuple.pack(("features",))
    left = [(key, value) for key, value in all_keys(db, subspace) if not key.startswith(receipts)]
    assert left == [(features, b"\x01\x00\x00")]  # its bits (none used) stay, the type goes


def test_indexes_restart_at_one_when_empty(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "a")
    queue.dequeue(db)
    queue.enqueue(db, "b")
    (key, _value), *_metadata = all_keys(db, subspace)
    assert subspace.unpack(key)[0] == 1


def test_tuple_prefix_is_accepted(db, subspace):
    queue = Queue(fdb.tuple.unpack(subspace.key()))
    queue.enqueue(db, "v")
    assert Queue(subspace).dequeue(db) == "v"


# -- key layout ---------------------------------------------------------------------------


def test_items_use_the_recipe_key_layout_and_tuple_values(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "job-1")
    queue.enqueue(db, 42)
    items = [(k, v) for k, v in all_keys(db, subspace) if k < subspace.range().stop]
    assert len(items) == 2
    for position, (key, _value) in enumerate(items, start=1):
        index, random_part = subspace.unpack(key)
        assert index == position
        assert isinstance(random_part, bytes) and len(random_part) == 20
    assert [fdb.tuple.unpack(v)[0] for _, v in items] == ["job-1", 42]


def test_metadata_lies_outside_the_item_range(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "x")
    outside = [k for k, _ in all_keys(db, subspace) if k >= subspace.range().stop]
    metadata = subspace.key() + b"\xff"
    assert all(key.startswith(metadata) for key in outside)
    names = [fdb.tuple.unpack(key[len(metadata) :])[0] for key in outside]
    # when it began, the enqueue counter, the feature record (type, codec, features used), ...
    assert names == ["began", "enqueued", "features", "receipts", "signal", "size"]


# -- codecs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [0, -5, 2**100, "text", "ünïcode", b"\x00bytes", 1.5, True, uuid.uuid4(), ("nested", 1)],
)
def test_tuple_codec_round_trips_tuple_layer_values(db, subspace, value):
    queue = Queue(subspace)
    queue.enqueue(db, value)
    assert queue.dequeue(db) == value


def test_raw_codec_stores_bytes_unchanged(db, subspace):
    queue = Queue(subspace, codec="raw")
    queue.enqueue(db, b"\x00\xffraw")
    queue.enqueue(db, bytearray(b"ba"))
    (_key, stored), *_ = all_keys(db, subspace)
    assert stored == b"\x00\xffraw"
    assert queue.dequeue_many(db, 2) == [b"\x00\xffraw", b"ba"]


def test_custom_codec(db, subspace):
    import json

    class JSONCodec:
        def encode(self, value):
            return json.dumps(value).encode()

        def decode(self, data):
            return json.loads(data)

    queue = Queue(subspace, codec=JSONCodec())
    queue.enqueue(db, {"job": [1, 2]})
    assert queue.dequeue(db) == {"job": [1, 2]}


# -- bad input: a clear error and nothing changes -----------------------------------------


def assert_rejected(db, subspace, error, call, match=None):
    before = all_keys(db, subspace)
    with pytest.raises(error, match=match):
        call()
    assert all_keys(db, subspace) == before


def test_none_is_rejected(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, "keep")
    assert_rejected(db, subspace, ValueError, lambda: queue.enqueue(db, None), "None")
    assert_rejected(db, subspace, ValueError, lambda: queue.enqueue_many(db, ["a", None]))


def test_unencodable_value_is_rejected(db, subspace):
    queue = Queue(subspace)
    assert_rejected(db, subspace, TypeError, lambda: queue.enqueue(db, object()))
    assert_rejected(db, subspace, TypeError, lambda: queue.enqueue_many(db, [1, {2}]))
    raw = Queue(subspace, codec="raw")
    assert_rejected(db, subspace, TypeError, lambda: raw.enqueue(db, "not bytes"))


def test_value_over_the_limit_is_rejected_before_any_write(db, subspace):
    queue = Queue(subspace, codec="raw")
    queue.enqueue(db, b"x" * 100_000)  # exactly the limit is fine
    assert_rejected(
        db, subspace, ValueError, lambda: queue.enqueue(db, b"x" * 100_001), "100,000 bytes"
    )
    assert_rejected(
        db, subspace, ValueError, lambda: queue.enqueue_many(db, [b"a", b"x" * 100_001])
    )


def test_enqueue_many_rejects_a_single_string(db, subspace):
    queue = Queue(subspace)
    assert_rejected(db, subspace, TypeError, lambda: queue.enqueue_many(db, "abc"))
    assert_rejected(db, subspace, TypeError, lambda: queue.enqueue_many(db, 5))


def test_dequeue_many_checks_n(db, subspace):
    queue = Queue(subspace)
    queue.enqueue(db, 1)
    assert_rejected(db, subspace, ValueError, lambda: queue.dequeue_many(db, -1))
    assert_rejected(db, subspace, TypeError, lambda: queue.dequeue_many(db, 1.0))
    assert_rejected(db, subspace, TypeError, lambda: queue.dequeue_many(db, True))


@pytest.mark.parametrize("not_a_context", [None, "db", 3, object()])
def test_tr_must_be_a_database_or_transaction(subspace, not_a_context):
    queue = Queue(subspace)
    with pytest.raises(TypeError, match="Database, Tenant or Transaction"):
        queue.enqueue(not_a_context, "x")
    with pytest.raises(TypeError):
        queue.dequeue(not_a_context)


def test_bad_constructor_arguments():
    with pytest.raises(TypeError):
        Queue("Q")
    with pytest.raises(ValueError, match="non-empty"):
        Queue(Subspace(()))
    with pytest.raises(ValueError, match="unknown codec"):
        Queue(("Q",), codec="yaml")
    with pytest.raises(TypeError):
        Queue(("Q",), codec=42)


def test_a_foreign_key_in_the_subspace_gives_a_clear_error(db, subspace):
    @transactional
    def write_foreign(tr):
        tr[subspace.pack(("not-an-index",))] = b"?"

    write_foreign(db)
    with pytest.raises(ValueError, match="not one of its items"):
        Queue(subspace).enqueue(db, "x")


# -- transactions and composition ---------------------------------------------------------


def test_operations_compose_in_one_transaction(db, subspace):
    source = Queue(subspace["source"])
    target = Queue(subspace["target"])
    source.enqueue_many(db, ["a", "b"])

    @transactional
    def move_one(tr):
        value = source.dequeue(tr)
        target.enqueue(tr, value.upper())
        return value

    assert move_one(db) == "a"
    assert source.dequeue_many(db, 10) == ["b"]
    assert target.dequeue_many(db, 10) == ["A"]


def test_an_exception_in_the_callers_transaction_rolls_everything_back(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, ["a", "b"])

    @transactional
    def take_then_fail(tr):
        assert queue.dequeue(tr) == "a"
        queue.enqueue(tr, "c")
        raise RuntimeError("caller failed")

    with pytest.raises(RuntimeError):
        take_then_fail(db)
    assert queue.dequeue_many(db, 10) == ["a", "b"]


def test_reads_inside_a_transaction_see_its_own_enqueues(db, subspace):
    queue = Queue(subspace)

    @transactional
    def body(tr):
        queue.enqueue(tr, 1)
        queue.enqueue(tr, 2)
        return queue.peek(tr), queue.size(tr), queue.dequeue_many(tr, 5)

    assert body(db) == (1, 2, [1, 2])
    assert queue.empty(db)


def test_operations_given_a_transaction_do_not_commit(db, subspace):
    queue = Queue(subspace)
    tr = db.create_transaction()
    queue.enqueue(tr, "uncommitted")
    assert queue.peek(db) is None
    tr.commit().wait()
    assert queue.peek(db) == "uncommitted"


def test_size_through_a_snapshot_view(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, [1, 2, 3])
    tr = db.create_transaction()
    assert queue.size(tr.snapshot) == 3
    with pytest.raises(TypeError, match="read-only"):
        queue.dequeue(tr.snapshot)


# -- FoundationDB's Python recipe, over the same subspace ---------------------------------


def recipe_functions(subspace):
    """FoundationDB's Python queue recipe (documentation ``queues.rst``), as written there."""

    @transactional
    def recipe_enqueue(tr, value):
        tr[subspace[recipe_last_index(tr) + 1][os.urandom(20)]] = value

    @transactional
    def recipe_last_index(tr):
        r = subspace.range()
        for key, _ in tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True):
            return subspace.unpack(key)[0]
        return 0

    @transactional
    def recipe_dequeue(tr):
        r = subspace.range()
        for kv in tr.get_range(r.start, r.stop, limit=1):
            del tr[kv.key]
            return kv.value
        return None

    return recipe_enqueue, recipe_dequeue


def test_raw_queue_reads_what_the_python_recipe_wrote(db, subspace):
    recipe_enqueue, _recipe_dequeue = recipe_functions(subspace)
    queue = Queue(subspace, codec="raw")
    recipe_enqueue(db, b"r1")
    queue.enqueue(db, b"q2")
    recipe_enqueue(db, b"r3")
    assert queue.dequeue_many(db, 3) == [b"r1", b"q2", b"r3"]


def test_python_recipe_reads_what_the_raw_queue_wrote(db, subspace):
    _, recipe_dequeue = recipe_functions(subspace)
    queue = Queue(subspace, codec="raw")
    queue.enqueue_many(db, [b"1", b"2"])
    assert bytes(recipe_dequeue(db)) == b"1"
    assert bytes(recipe_dequeue(db)) == b"2"
    assert recipe_dequeue(db) is None
    assert queue.empty(db)


def test_python_recipe_reads_a_jobs_value_as_submitted(db, subspace):
    """A job's item is an item of the recipe's layout holding the value alone: the job's id is
    its key's last element, where the recipe puts random bytes (docs/jobs.rst)."""
    _, recipe_dequeue = recipe_functions(subspace)
    queue = Queue(subspace, codec="raw")
    job = queue.submit(db, b"a job")
    queue.enqueue(db, b"an item")
    assert bytes(recipe_dequeue(db)) == b"a job"
    assert bytes(recipe_dequeue(db)) == b"an item"
    assert queue.job(db, job.id).state == "waiting"  # the recipe knows no jobs


def test_tuple_queue_matches_the_java_recipe_layout(db, subspace):
    """MicroQueue stores (index, 20 random bytes) -> Tuple.from(value).pack()."""

    @transactional
    def java_enqueue(tr, index, value):
        tr[subspace.pack((index, os.urandom(20)))] = fdb.tuple.pack((value,))

    java_enqueue(db, 1, "from-java")
    queue = Queue(subspace)
    queue.enqueue(db, "from-fdbqueue")
    assert queue.dequeue_many(db, 2) == ["from-java", "from-fdbqueue"]


def test_size_counter_is_a_little_endian_int64(db, subspace):
    queue = Queue(subspace)
    queue.enqueue_many(db, range(3))
    counter = dict(all_keys(db, subspace))[subspace.key() + b"\xff" + fdb.tuple.pack(("size",))]
    assert struct.unpack("<q", counter) == (3,)
