"""Logging and metrics: what fdbqueue tells an operator (fdbqueue.metrics, logger fdbqueue)."""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import fdbqueue
import fdbqueue.asyncio as fa
from fdbqueue import Queue, Subspace, memory, metrics

otel_sdk = pytest.importorskip("opentelemetry.sdk.metrics")
from helpers import pass_time  # noqa: E402
from opentelemetry import metrics as otel_metrics  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.metrics.view import View  # noqa: E402

READER = InMemoryMetricReader()
# Every test's queue is its own ``fdbqueue.queue`` attribute, so a whole run records thousands
# of attribute sets: above the SDK's default cardinality limit (2,000 per metric in recent
# versions) later ones would fold into one overflow point and read as 0 here.
try:
    VIEWS = [View(instrument_name="*", aggregation_cardinality_limit=1_000_000)]
except TypeError:  # an SDK from before cardinality limits: nothing to raise
    VIEWS = []
PROVIDER: list[Any] = []  # the SDK's meter provider, once this module's first test set it


@pytest.fixture(scope="module", autouse=True)
def reading_metrics() -> Iterator[None]:
    """The SDK records fdbqueue's metrics into READER while this module's tests run. The
    global provider is set at the first of them, not at import (collection imports every
    module), and where the SDK can (``remove_metric_reader``) READER is detached afterwards:
    otherwise every later test of the session pays for recording, and each read here goes
    through the attribute sets of all the queues the session made."""
    if not PROVIDER:
        provider = otel_sdk.MeterProvider(views=VIEWS)
        if not hasattr(provider, "add_metric_reader"):  # an SDK before 1.39: READER for good
            provider = otel_sdk.MeterProvider(metric_readers=[READER], views=VIEWS)
        otel_metrics.set_meter_provider(provider)
        PROVIDER.append(provider)
    assert metrics.recording()  # looks at once: counts of this module's tests are recorded
    provider = PROVIDER[0]
    if hasattr(provider, "add_metric_reader"):
        provider.add_metric_reader(READER)
        yield
        provider.remove_metric_reader(READER)
    else:
        yield


def totals() -> dict[tuple[str, tuple[tuple[str, Any], ...]], float]:
    """Every counter's cumulative value by (name, attributes); histograms by their count."""
    found: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
    data = READER.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted(point.attributes.items())))
                    found[key] = getattr(point, "value", None) or getattr(point, "count", 0)
    return found


class Counting:
    """The change of every metric between its creation and :meth:`of`."""

    def __init__(self) -> None:
        self.before = totals()

    def of(self, name: str, **attributes: Any) -> float:
        after = totals()
        wanted = {f"fdbqueue.{k.replace('_', '.')}": v for k, v in attributes.items()}

        def matches(key: tuple[str, tuple[tuple[str, Any], ...]]) -> bool:
            return key[0] == name and wanted.items() <= dict(key[1]).items()

        return sum(v for k, v in after.items() if matches(k)) - sum(
            v for k, v in self.before.items() if matches(k)
        )


def test_counters_of_a_queue_life(db, subspace):
    queue = Queue(subspace, max_deliveries=1)
    name = metrics.queue_name(subspace.key())
    counting = Counting()
    queue.enqueue_many(db, ["a", "b", "c", "d"])
    queue.enqueue(db, "later", delay=30)
    assert queue.dequeue(db) == "a"
    lease = queue.claim(db, lease=10)
    queue.ack(db, lease)
    lease = queue.claim(db, lease=10)
    queue.dead_letter(db, lease, "failed")
    assert queue.dequeue(db, block=True, timeout=5) == "d"
    assert counting.of("fdbqueue.items.enqueued", queue=name) == 4
    assert counting.of("fdbqueue.items.delayed", queue=name) == 1
    assert counting.of("fdbqueue.items.dequeued", queue=name) == 2
    assert counting.of("fdbqueue.items.claimed", queue=name) == 2
    assert counting.of("fdbqueue.items.acknowledged", queue=name) == 1
    assert counting.of("fdbqueue.items.dead_lettered", queue=name) == 1
    assert counting.of("fdbqueue.wait.duration", queue=name) == 1


def test_groups_with_items_and_in_flight_count_up_and_down(db, subspace):
    queue = Queue(subspace)
    name = metrics.queue_name(subspace.key())
    counting = Counting()
    queue.enqueue_many(db, ["a1", "a2"], group="a")
    queue.enqueue(db, "b1", group="b")
    assert counting.of("fdbqueue.groups.active", queue=name) == 2
    first = queue.claim(db, lease=10)
    assert counting.of("fdbqueue.groups.in_flight", queue=name) == 1
    queue.ack(db, first)
    assert counting.of("fdbqueue.groups.in_flight", queue=name) == 0
    while queue.dequeue(db) is not None:
        pass
    assert counting.of("fdbqueue.groups.active", queue=name) == 0


def test_a_sharded_queue_counts_under_its_own_name_with_each_shard_number(db, subspace):
    queue = Queue(subspace, shards=4)
    name = metrics.queue_name(subspace.key())
    counting = Counting()
    for value in range(8):
        queue.enqueue(db, value)  # the shards in turn: two each
    for _ in range(3):
        assert queue.dequeue(db) is not None
    queue.ack(db, queue.claim(db, lease=10))
    assert queue.dequeue(db, block=True, timeout=5) is not None
    assert counting.of("fdbqueue.items.enqueued", queue=name) == 8
    assert [counting.of("fdbqueue.items.enqueued", queue=name, shard=k) for k in range(4)] == [
        2,
        2,
        2,
        2,
    ]
    assert counting.of("fdbqueue.items.dequeued", queue=name) == 4
    assert sum(counting.of("fdbqueue.items.dequeued", shard=k) for k in range(4)) == 4
    assert counting.of("fdbqueue.items.claimed", queue=name) == 1
    assert counting.of("fdbqueue.items.acknowledged", queue=name) == 1
    assert counting.of("fdbqueue.wait.duration", queue=name) == 1  # a wait is the queue's
    shard_names = {metrics.queue_name(subspace.subspace((k,)).key()) for k in range(4)}
    assert not any(counting.of("fdbqueue.items.enqueued", queue=n) for n in shard_names)


def test_expired_leases_are_counted_and_logged(caplog):
    db = memory.open(seed=1)
    queue = Queue(Subspace(("expired-metrics",)))
    name = metrics.queue_name(queue.subspace.key())
    queue.enqueue(db, "x")
    queue.claim(db, lease=1)
    pass_time(db, 2)
    counting = Counting()
    with caplog.at_level(logging.DEBUG, logger="fdbqueue"):
        lease = queue.claim(db, lease=1)
    assert lease is not None and lease.deliveries == 2
    assert counting.of("fdbqueue.leases.expired", queue=name) == 1
    assert any("delivered again" in r.getMessage() for r in caplog.records)


def test_a_retried_attempt_is_counted_once_and_its_retry_and_conflict_are_counted(caplog):
    db = memory.open(seed=7, faults=memory.Faults(not_committed=0.5))
    queue = Queue(Subspace(("retried-metrics",)))
    name = metrics.queue_name(queue.subspace.key())
    counting = Counting()
    with caplog.at_level(logging.DEBUG, logger="fdbqueue"):
        for value in range(20):
            queue.enqueue(db, value)
    retries = db.stats()["retries"]
    assert retries > 0
    assert counting.of("fdbqueue.items.enqueued", queue=name) == 20  # not once per attempt
    assert counting.of("fdbqueue.transactions.conflicts", error_code=1020) == retries
    assert counting.of("fdbqueue.transactions.retries") == retries
    debug = [
        r for r in caplog.records if r.levelno == logging.DEBUG and "error 1020" in r.getMessage()
    ]
    assert len(debug) == retries


def test_unknown_results_are_resolved_counted_and_logged(caplog):
    db = memory.open(seed=3, faults=memory.Faults(commit_unknown_result=0.5))
    queue = Queue(Subspace(("unknown-metrics",)))
    counting = Counting()
    with caplog.at_level(logging.INFO, logger="fdbqueue"):
        for value in range(20):
            queue.enqueue(db, value)
    assert db.stats()["injected_commit_unknown_result"] > 0
    assert counting.of("fdbqueue.transactions.unknown_results", error_code=1021) > 0
    assert any("result was unknown" in r.getMessage() for r in caplog.records)
    db.faults = memory.Faults()
    assert queue.dequeue_many(db, 100) == list(range(20))


def test_poison_items_are_logged_as_warnings_and_counted(caplog):
    db = memory.open()
    tuple_queue = Queue(Subspace(("poison-metrics",)))
    name = metrics.queue_name(tuple_queue.subspace.key())
    db[tuple_queue.subspace.pack((0, b"r" * 20))] = b"ok"  # bytes another writer stored
    counting = Counting()
    with caplog.at_level(logging.WARNING, logger="fdbqueue"):
        assert tuple_queue.dequeue(db) is None  # raw bytes the tuple codec cannot decode
    assert counting.of("fdbqueue.items.dead_lettered", queue=name) == 1
    assert any(
        r.levelno == logging.WARNING and "dead letters" in r.getMessage() for r in caplog.records
    )


def test_a_cleared_abandoned_request_is_logged(caplog):
    db = memory.open(seed=2)
    queue = Queue(Subspace(("abandoned-log",)))
    dead = queue.consumer(db, prefetch=1, abandon_after=1)
    queue.enqueue(db, "x")
    dead.take(block=True, timeout=0.01)  # registers, and is never closed: it "dies"
    pass_time(db, 2)
    with (
        caplog.at_level(logging.INFO, logger="fdbqueue"),
        queue.consumer(db, abandon_after=1) as session,
    ):
        session.take()
    assert any("abandoned" in r.getMessage() for r in caplog.records)
    assert queue.requests_in_line(db) == 0


def test_the_oldest_age_gauge_reports_each_registered_queue_until_stopped(monkeypatch, db):
    from fdbqueue import _clock

    now = [5_000.0]
    monkeypatch.setattr(_clock, "now", lambda: now[0])
    queue = Queue(Subspace(("gauged", uuid.uuid4().hex)))
    priority = fa.PriorityQueue(Subspace(("gauged", uuid.uuid4().hex)), shards=4)
    stops = [metrics.observe_oldest_age(db, queue), metrics.observe_oldest_age(db, priority)]
    queue.enqueue(db, "a")
    now[0] += 12

    def gauge(of: Any) -> float | None:
        attributes = (("fdbqueue.queue", metrics.queue_name(of.subspace.key())),)
        return totals().get(("fdbqueue.queue.oldest_age", attributes))

    assert gauge(queue) == 12
    assert gauge(priority) == 0  # nothing waits: 0
    priority.sync.push(db, "p", 3)
    now[0] += 1
    assert (gauge(queue), gauge(priority)) == (13, 1)
    for stop in stops:
        stop()
        stop()  # twice: nothing more
    now[0] += 100
    assert gauge(queue) in (None, 13)  # no longer read
    with pytest.raises(TypeError):
        metrics.observe_oldest_age(db, "not a queue")


def test_the_library_installs_no_log_handler():
    assert logging.getLogger("fdbqueue").handlers == []


def looked_at_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """fdbqueue.metrics looks at OpenTelemetry's global provider again at the next count, as in
    a new process, and looks as it did before once the test ends."""
    monkeypatch.setattr(metrics, "_recording", False)
    monkeypatch.setattr(metrics, "_look_again", True)
    monkeypatch.setattr(metrics, "_api", True)
    monkeypatch.setattr(metrics, "may_record", True)


def kept_by_an_attempt(db: Any, queue: Queue) -> list[Any]:
    """What the attempt of an enqueue and a dequeue of ``queue`` kept for its commit."""

    @fdbqueue.transactional
    def both(tr: Any) -> list[Any]:
        queue.enqueue(tr, "kept?")
        assert queue.dequeue(tr) == "kept?"
        return list(metrics.ATTEMPT_COUNTS.get() or ())

    return both(db)


def test_without_opentelemetry_every_metric_call_does_nothing(monkeypatch, db, subspace):
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails as if not installed
    monkeypatch.setattr(metrics, "_instruments", {})
    looked_at_afresh(monkeypatch)
    queue = Queue(subspace)
    counting = Counting()
    queue.enqueue(db, "x")
    assert queue.dequeue(db) == "x"
    metrics.record_wait(0.5, "q")
    assert not metrics.recording()
    assert kept_by_an_attempt(db, queue) == []
    assert metrics.Count("enqueued").instrument is None
    assert set(metrics._instruments.values()) == {None}
    assert counting.of("fdbqueue.items.enqueued", queue=metrics.queue_name(subspace.key())) == 0


@pytest.mark.parametrize("provider", ["none set", "no-op"])
def test_without_an_sdk_provider_nothing_is_kept_or_recorded_until_one_is_set(
    monkeypatch, db, subspace, provider
):
    """The API's default provider (a proxy, before any is set) or its no-op one: counts are
    neither kept for the commit nor recorded; once an SDK's is set, :func:`metrics.recording`
    sees it at once and counts are recorded. (``set_meter_provider`` itself, which also tells
    the next count, in a new process below.)"""
    from opentelemetry.metrics import NoOpMeterProvider, _internal

    sdk = _internal._METER_PROVIDER
    assert sdk is PROVIDER[0]
    looked_at_afresh(monkeypatch)
    monkeypatch.setattr(
        _internal, "_METER_PROVIDER", None if provider == "none set" else NoOpMeterProvider()
    )
    queue = Queue(subspace)
    name = metrics.queue_name(subspace.key())
    counting = Counting()
    queue.enqueue(db, "a")
    assert queue.dequeue(db) == "a"
    assert kept_by_an_attempt(db, queue) == []
    assert not metrics.recording()
    assert counting.of("fdbqueue.items.enqueued", queue=name) == 0
    assert counting.of("fdbqueue.items.dequeued", queue=name) == 0

    monkeypatch.setattr(_internal, "_METER_PROVIDER", sdk)  # what set_meter_provider sets
    assert metrics.recording()  # it looks at once
    kept = kept_by_an_attempt(db, queue)
    assert len(kept) == 2  # the enqueue's and the dequeue's counts, for the commit
    queue.enqueue(db, "b")
    assert queue.dequeue(db) == "b"
    assert metrics.recording()
    assert counting.of("fdbqueue.items.enqueued", queue=name) == 2
    assert counting.of("fdbqueue.items.dequeued", queue=name) == 2


def test_in_a_new_process_counting_starts_when_the_application_sets_an_sdk_provider():
    """No monkeypatching: the API's own default provider, then ``set_meter_provider``: the very
    next count is recorded (not a second later), with no call of ``metrics.recording()``."""
    script = """
from opentelemetry import metrics as api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from fdbqueue import Queue, Subspace, memory, metrics

db = memory.open()
queue = Queue(Subspace(("q",)))
queue.enqueue(db, "a")
assert queue.dequeue(db) == "a"
reader = InMemoryMetricReader()
api.set_meter_provider(MeterProvider(metric_readers=[reader]))
queue.enqueue(db, "b")
queue.enqueue(db, "c")
assert queue.dequeue(db) == "b"
assert metrics.recording()
found = {
    metric.name: sum(point.value for point in metric.data.data_points)
    for resource in reader.get_metrics_data().resource_metrics
    for scope in resource.scope_metrics
    for metric in scope.metrics
}
assert found["fdbqueue.items.enqueued"] == 2, found
assert found["fdbqueue.items.dequeued"] == 1, found
print("counted")
"""
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "counted"


def test_a_redelivery_is_logged_once_readably_at_debug_however_often_its_claim_retries(caplog):
    """New-user finding 6: redelivery INFO logs repeated (one per attempt of the claim's
    transaction), with raw key bytes. Issue 36: one line per redelivery at INFO was noise, and
    the item key's random bytes unreadable: at DEBUG, the queue and the leases' short ids."""
    db = memory.open(seed=3)
    queue = Queue(Subspace(("redelivery-log",)))
    queue.enqueue(db, "job")
    first = queue.claim(db, lease=30)
    queue.release(db, first)  # released: the next claim delivers it again
    db.faults = memory.Faults(not_committed=0.6)  # most attempts fail and are retried
    with caplog.at_level(logging.DEBUG, logger="fdbqueue"):
        lease = queue.claim(db, lease=30)
    db.faults = memory.Faults()
    assert lease.deliveries == 2
    assert db.stats()["injected_not_committed"] > 0
    records = [r for r in caplog.records if "again" in r.getMessage()]
    assert len(records) == 1, records
    assert (records[0].name, records[0].levelno) == ("fdbqueue.leases", logging.DEBUG)
    assert records[0].getMessage() == (
        f"item of ('redelivery-log',) delivered again as lease {lease.id} (delivery 2): "
        f"lease {first.id} expired or was released"
    )


def test_a_dead_letter_out_of_deliveries_is_a_warning_naming_its_id(caplog):
    db = memory.open(seed=3)
    queue = Queue(Subspace(("out-of-deliveries-log",)), max_deliveries=1)
    queue.enqueue(db, "job")
    first = queue.claim(db, lease=30)
    queue.release(db, first)
    with caplog.at_level(logging.INFO, logger="fdbqueue"):
        assert queue.claim(db, lease=30) is None
    (letter,) = queue.dead_letters(db)
    (record,) = [r for r in caplog.records if "dead letter" in r.getMessage()]
    assert (record.name, record.levelno) == ("fdbqueue.leases", logging.WARNING)
    assert record.getMessage() == (
        f"item of ('out-of-deliveries-log',) (lease {first.id}) is now dead letter "
        f"{letter.id}: {letter.reason}"
    )


def test_the_worker_start_names_the_queue_as_a_tuple_and_counts_in_words(caplog):
    db = memory.open()
    queue = Queue(Subspace(("worker-log",)))
    queue.enqueue(db, "x")
    with caplog.at_level(logging.INFO, logger="fdbqueue"):
        queue.work(db, print, lease=30, until_empty=True, handle_signals=False)
    started = [r.getMessage() for r in caplog.records if "worker started" in r.getMessage()]
    assert started == ["worker started on ('worker-log',): 1 thread, leases of 30.0s"]


def test_logs_name_the_queue_as_a_tuple_not_a_subspace_repr(caplog):
    db = memory.open()
    queue = Queue(Subspace(("poison-log",)))
    db[queue.subspace.pack((0, b"r" * 20))] = b"ok"  # bytes the tuple codec cannot decode
    with caplog.at_level(logging.WARNING, logger="fdbqueue"):
        assert queue.dequeue(db) is None
    (message,) = [r.getMessage() for r in caplog.records if "dead letters" in r.getMessage()]
    assert message.startswith("fdbqueue: moving item ('poison-log', 0, b'rrrr")
    assert " of ('poison-log',) to the dead letters" in message and "rawPrefix" not in message


def test_a_queue_metadata_key_reads_as_its_prefix_and_the_tuple_after_0xff():
    import fdb.tuple

    from fdbqueue._keys import describe_key

    assert describe_key(fdb.tuple.pack(("app", "jobs", 7))) == "('app', 'jobs', 7)"
    metadata = fdb.tuple.pack(("app", "jobs")) + b"\xff" + fdb.tuple.pack(("type",))
    assert describe_key(metadata) == "('app', 'jobs') + 0xff + ('type',)"
    assert describe_key(fdb.tuple.pack(("a\x00b", 1))) == "('a\\x00b', 1)"
    assert describe_key(b"\x15\x01\xfe") == "b'\\x15\\x01\\xfe'"


def test_the_metrics_extra_installs_what_the_documented_examples_import():
    """docs/observability.rst's examples import OpenTelemetry's SDK: ``pip install
    "fdbqueue[metrics]"`` must bring every distribution they import from (not only the API)."""
    import ast
    import importlib.metadata
    import importlib.util
    import pathlib

    from doc_blocks import page_blocks
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from test_architecture import load_toml

    root = pathlib.Path(__file__).resolve().parent.parent
    extra = load_toml(root / "pyproject.toml")["project"]["optional-dependencies"]["metrics"]
    required = {canonicalize_name(Requirement(line).name) for line in extra}

    def distribution_of(module: str) -> str:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        origin = pathlib.Path(spec.origin).resolve()
        top = module.partition(".")[0]
        for name in importlib.metadata.packages_distributions().get(top, []):
            files = importlib.metadata.distribution(name).files or []
            if any(pathlib.Path(str(file.locate())).resolve() == origin for file in files):
                return canonicalize_name(name)
        raise AssertionError(f"no installed distribution holds {module}")

    def is_module(name: str) -> bool:
        """A module with a file (not a namespace package, which no one distribution holds)."""
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # a name inside a module, not a submodule
            return False
        return spec is not None and spec.origin not in (None, "namespace")

    imported: set[str] = set()
    for block in page_blocks("docs/observability.rst"):
        if block.language != "python":
            continue
        for node in ast.walk(ast.parse(block.source)):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                # `from package import submodule` imports the submodule's distribution too
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
    outside = {
        module
        for module in imported
        if module.partition(".")[0] not in {"fdbqueue", *sys.stdlib_module_names}
        and is_module(module)
    }
    assert {"opentelemetry.sdk.metrics", "opentelemetry.metrics"} <= outside  # what is checked
    missing = {distribution_of(module) for module in outside} - required
    assert not missing, f"the [metrics] extra does not install {sorted(missing)}"
