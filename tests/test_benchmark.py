"""The consumer-scaling benchmark (``fdbqueue.benchmark``, ``fdbqueue bench``,
``examples/contention_benchmark.py``): argument checks, and tiny runs of every mode."""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import multiprocessing
import os
import pstats
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import fdb.subspace_impl
import fdb.tuple
import pytest
from click.testing import CliRunner

from fdbqueue import Queue, QueueTypeError, Subspace, benchmark, memory
from fdbqueue.benchmark import (
    counting,
    cpu,
    hot_ranges,
    ideal,
    instructions,
    loading,
    measurement,
    processes,
    recipe,
    report,
    workload,
)
from fdbqueue.cli import cli

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "contention_benchmark.py"
ZERO = memory.Latency()
COLUMNS = [
    "mode",
    "C",
    "items/s",
    "ratio",
    "ideal/s",
    "of ideal",
    "p50 ms",
    "p99 ms",
    "p99/p50",
    "confl/item",
    "tx/item",
    "tx-times/item",
    "keys/item",
    "cpu ms/item",
    "cpu vs ideal",
    "cpu s/s",
    "enq confl",
    "once",
]


def bench(*args, database=None):
    database = memory.open() if database is None else database
    return CliRunner().invoke(cli, ["bench", *args], obj={"database": database})


BAD_ARGUMENTS = {
    "negative items": (["--items", "-5"], "--items: must be a whole number from 1 to 10,000,000"),
    "zero items": (["--items", "0"], "--items: must be a whole number from 1 to 10,000,000"),
    "items not a number": (
        ["--items", "many"],
        "--items: must be a whole number from 1 to 10,000,000",
    ),
    "zero consumers": (["--consumers", "0"], "--consumers: must be comma-separated integers"),
    "negative consumers": (["--consumers", "1,-2"], "--consumers: must be comma-separated"),
    "empty consumer": (["--consumers", "1,,4"], "--consumers: must be comma-separated"),
    "consumers not numbers": (["--consumers", "a,b"], "--consumers: must be comma-separated"),
    "too many consumers": (["--consumers", "100000"], "integers from 1 to 1024"),
    "zero producers": (["--producers", "0"], "--producers: must be a whole number from 1 to 1,024"),
    "unknown mode": (["--modes", "plain,bogus"], "--modes: unknown mode 'bogus'"),
    "unknown phase": (["--phases", "fill"], "--phases: unknown phase 'fill'"),
    "negative latency": (["--grv", "-0.001"], "--grv: must be a number of seconds >= 0"),
    "latency not a number": (["--read", "slow"], "--read: must be a number of seconds >= 0"),
    "infinite latency": (["--commit", "inf"], "--commit: must be a number of seconds >= 0"),
    "negative warm-up": (
        ["--warmup", "-1"],
        "--warmup: must be a whole number from 0 to 10,000,000",
    ),
    "unknown load shape": (["--loads", "single,heap"], "--loads: unknown load shape 'heap'"),
    "zero cpu items": (
        ["--cpu", "--cpu-items", "0"],
        "--cpu-items: must be a whole number from 1 to 10,000,000",
    ),
    "zero cpu runs": (
        ["--cpu", "--cpu-runs", "0"],
        "--cpu-runs: must be a whole number from 1 to 10,000,000",
    ),
    "zero cpu counted items": (
        ["--cpu", "--cpu-counted-items", "0"],
        "--cpu-counted-items: must be a whole number from 1 to 10,000,000",
    ),
    "unknown cpu subject": (
        ["--cpu", "--cpu-subjects", "plain,bogus"],
        "--cpu-subjects: unknown subject 'bogus'",
    ),
    "zero processes": (["--processes", "1,0"], "--processes: must be comma-separated integers"),
    "processes not numbers": (["--processes", "1,x"], "--processes: must be comma-separated"),
    "too many processes": (["--processes", "65"], "integers from 1 to 64, not '65'"),
    "zero process consumers": (
        ["--processes", "--process-consumers", "0"],
        "--process-consumers: must be a whole number from 1 to 1,024",
    ),
    "zero process items": (
        ["--processes", "--process-items", "0"],
        "--process-items: must be a whole number from 1 to 10,000,000",
    ),
    "unknown process mode": (
        ["--processes", "--process-mode", "high-contention-prefetch"],
        "--process-mode: invalid choice: 'high-contention-prefetch'",
    ),
    "unknown server place": (
        ["--processes", "--process-server", "cloud"],
        "--process-server: must be process, thread or both, not 'cloud'",
    ),
    "negative process work": (
        ["--processes", "--process-work", "-1"],
        "--process-work: must be a number of milliseconds from 0 to 60,000, not '-1'",
    ),
    "process work not a number": (
        ["--processes", "--process-work", "nan"],
        "--process-work: must be a number of milliseconds",
    ),
    "too many threads in one process": (
        ["--processes", "2,64", "--process-consumers", "32"],
        "--processes 64 x --process-consumers 32 is 2,048 threads in the one-process run",
    ),
    "processes and cpu": (
        ["--processes", "--cpu"],
        "--cpu and --processes are different measurements: give one",
    ),
    # huge numbers (issue 36): one line saying what was typed and what is allowed, no
    # OverflowError, no run for good
    "huge items": (["--items", "9" * 20], "--items: must be a whole number from 1 to 10,000,000"),
    "thousands of digits": (["--repeat", "9" * 5000], "(5,000 characters)"),
    "huge producers": (["--producers", "100000"], "--producers: must be a whole number from 1"),
    "huge warm-up": (["--warmup", "9" * 30], "--warmup: must be a whole number from 0"),
}


@pytest.mark.parametrize("name", list(BAD_ARGUMENTS))
def test_a_bad_argument_is_a_usage_error_with_a_clear_message(name):
    args, message = BAD_ARGUMENTS[name]
    result = bench(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert "done:" not in result.output  # refused before running anything


def test_the_example_refuses_a_bad_argument_without_a_traceback_or_a_hang():
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--items", "-5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--items: must be a whole number from 1 to 10,000,000, not '-5'" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def arguments(**changes):
    parser = argparse.ArgumentParser()
    benchmark.add_arguments(parser)
    return argparse.Namespace(**{**vars(parser.parse_args([])), **changes})


@pytest.mark.parametrize(
    "changes",
    [
        {"items": -5},
        {"items": 0},
        {"producers": 0},
        {"consumers": []},
        {"consumers": [1, 0]},
        {"modes": ["bogus"]},
        {"phases": ["fill"]},
        {"grv": -1.0},
        {"warmup": -1},
        {"loads": ["heap"]},
        {"loads": []},
        {"cpu": True, "cpu_items": 0},
        {"cpu": True, "cpu_counted_items": 0},
        {"cpu": True, "fairness": True},
        {"cpu": True, "cpu_subjects": []},
        {"cpu": True, "cpu_subjects": ["bogus"]},
        {"processes": []},
        {"processes": [0]},
        {"processes": [1], "process_consumers": 0},
        {"processes": [1], "process_items": 0},
        {"processes": [1], "process_mode": "bogus"},
        {"processes": [1], "process_server": ["cloud"]},
        {"processes": [1], "process_work": -1.0},
        {"processes": [1], "fairness": True},
    ],
)
def test_run_all_checks_arguments_given_without_the_parser(changes):
    with pytest.raises(benchmark.BenchmarkError):
        benchmark.run_all(arguments(**changes), lambda latency: memory.open(), "memory")


def test_defaults():
    given = arguments()
    assert given.consumers == [1, 2, 4, 8, 16, 32]
    assert given.phases == ["drain", "steady"]
    assert given.modes == [
        "plain",
        "high-contention",
        "high-contention-prefetch",
        "claims",
        "claims-high-contention",
        "claims-high-contention-prefetch",
    ]
    assert (given.grv, given.read, given.commit) == (0.001, 0.0005, 0.003)
    assert given.loads is None  # the drain preloads in batches of 10, no load column
    assert (given.cpu, given.cpu_items, given.cpu_runs) == (False, 5000, 3)
    assert given.cpu_subjects == list(cpu.SUBJECTS)
    assert given.cpu_counted_items == instructions.ITEMS == 200
    assert given.processes is None  # the phases run, not the processes
    assert (given.process_consumers, given.process_items) == (4, 600)
    assert (given.process_mode, given.process_server, given.process_work) == (
        "sharded",
        ["process"],
        0.0,
    )
    parser = argparse.ArgumentParser()
    benchmark.add_arguments(parser)
    assert parser.parse_args(["--processes"]).processes == [1, 2, 4]
    assert parser.parse_args(["--processes", "2,1,2"]).processes == [2, 1]
    assert parser.parse_args(["--process-server", "both"]).process_server == ["process", "thread"]


def test_plot_without_matplotlib_is_a_clear_error_before_running(tmp_path):
    if importlib.util.find_spec("matplotlib") is not None:
        result = bench("--plot", str(tmp_path / "p.png"), "--consumers", "1", "--items", "3")
        assert result.exit_code == 0, result.output
        assert (tmp_path / "p.png").exists()
        return
    result = bench("--plot", str(tmp_path / "p.png"), "--items", "3")
    assert result.exit_code == 1
    assert "--plot needs matplotlib" in result.output
    assert "Traceback" not in result.output
    assert "done:" not in result.output


def test_a_tiny_run_of_every_mode_delivers_exactly_once_and_prints_every_column():
    result = bench("--consumers", "1,2", "--items", "10", "--modes", "all")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for phase in benchmark.PHASES:
        header = lines[lines.index(f"{phase} phase") + 1]
        for column in COLUMNS + (["empty"] if phase == "steady" else []):
            assert column in header
    rows = [
        line.split() for line in lines if line.split()[:1] in [[m.name] for m in benchmark.MODES]
    ]
    assert len(rows) == len(benchmark.MODES) * 2 * len(benchmark.PHASES)
    private = [line.split() for line in lines if line.startswith("private ")]
    assert len(private) == 2 * len(benchmark.PHASES)  # C = 1 and 2, each phase
    assert all(row[-1] == "yes" for row in rows + private), result.output
    assert "drain: high-contention / plain,  2 consumers = " in result.output
    assert "steady: claims-high-contention / claims,  1 consumer = " in result.output


def test_json_reports_every_figure_per_phase_mode_and_consumer_count():
    output = CliRunner().invoke(
        cli,
        ["--json", "bench", "--consumers", "1,2", "--items", "10", "--modes", "plain,claims"],
        obj={"database": memory.open()},
    )
    assert output.exit_code == 0, output.output
    document = json.loads(output.stdout)
    assert document["settings"]["latency"] == {"grv": 0.001, "read": 0.0005, "commit": 0.003}
    results = document["results"]
    assert {(r["phase"], r["mode"], r["consumers"]) for r in results} == {
        (phase, mode, c)
        for phase in ("drain", "steady")
        for mode in ("private", "plain", "claims")
        for c in (1, 2)
    }
    ideals = {(r["phase"], r["consumers"]): r for r in results if r["mode"] == "private"}
    for r in results:
        assert r["exactly_once"] is True
        assert r["items"] == 10
        assert r["producer_conflicts"] == 0
        private = ideals[r["phase"], r["consumers"]]
        assert r["ideal_per_second"] == private["items_per_second"]
        assert r["of_ideal"] == pytest.approx(r["items_per_second"] / r["ideal_per_second"])
        assert r["cpu_vs_ideal"] == pytest.approx(r["cpu_ms_per_item"] / private["cpu_ms_per_item"])
        assert r["keys_read_per_item"] > 0
        assert r["p99_over_p50"] == pytest.approx(r["p99_ms"] / r["p50_ms"])
        assert r["hot_range_share"] is None  # not asked for
        assert r["p50_ms"] is not None and r["p99_ms"] >= r["p50_ms"]
        if r["mode"] == "private":
            assert r["ratio"] is None and r["of_ideal"] == 1.0
            continue
        assert r["ratio"] == 1.0  # each is its own baseline
        # one consumer takes one item per transaction (claims: claim + ack), no conflicts
        if r["consumers"] == 1:
            assert r["conflicts_per_item"] == 0
            expected = 1 if r["mode"] == "plain" else 2
            assert r["transactions_per_item"] == expected
            # the take's three hint reads (delayed items, message groups, the paused key)
            # overlap its read of the front, but the figure counts every read as a round
            # trip of its own
            assert expected - 1e-9 <= r["transaction_times_per_item"] <= expected + 0.5


def test_transaction_times_count_the_consumers_only_from_the_database_counters():
    [plain] = [m for m in benchmark.MODES if m.name == "plain"]
    database = memory.open()
    result = benchmark.run(
        plain,
        "drain",
        1,
        items=20,
        producers=2,
        warmup=0,
        latency=memory.Latency(0.001, 0.0005, 0.003),
        open_db=lambda: database,
    )
    # a plain dequeue: one read version, the head (with the hints: delayed items, message
    # groups, the paused key, issued with it but each counted as a read of its own here),
    # the receipts, one commit
    stats = database.stats()
    assert result.transactions_per_item == 1
    assert 1.0 - 1e-9 <= result.transaction_times_per_item < 1.5
    assert stats["read_versions"] > 20  # the loaders' transactions too, not counted above
    assert type(database._stats) is not counting._RoleStats  # put back after the run


def test_a_consumer_that_never_gets_an_item_ends_the_run_as_not_exactly_once(monkeypatch):
    monkeypatch.setattr(measurement, "STALL_SECONDS", 0.2)
    monkeypatch.setattr(measurement, "WAIT_SECONDS", 0.01)
    broken = benchmark.Mode(
        "broken", Queue, workload.enqueue_batch, benchmark.calls(lambda q, db, wait: None), None
    )
    result = benchmark.run(
        broken, "drain", 2, items=5, producers=1, warmup=0, latency=ZERO, open_db=memory.open
    )
    assert not result.exactly_once
    assert result.notes and "stalled" in result.notes[0]


class Session:
    """A stand-in for a consumer session (``queue.consumer(db, prefetch=1)``)."""

    opened = 0

    def __init__(self, queue, db):
        self.queue, self.db = queue, db

    def __enter__(self):
        Session.opened += 1
        return self

    def __exit__(self, *exc_info):
        return None

    def dequeue(self, block=False, timeout=None):
        return self.queue.dequeue(self.db, block=block, timeout=timeout)


def test_a_mode_with_a_consumer_session_is_one_entry():
    Session.opened = 0
    mode = benchmark.Mode(
        "session",
        Queue,
        workload.enqueue_batch,
        benchmark.session(Session, workload.dequeue),
        "plain",
    )
    result = benchmark.run(
        mode, "steady", 3, items=10, producers=2, warmup=2, latency=ZERO, open_db=memory.open
    )
    assert result.exactly_once
    assert Session.opened == 3  # one session per consumer thread


def test_a_mode_the_queue_does_not_support_is_skipped_with_its_reason(monkeypatch, capsys):
    def refuse(subspace):
        raise NotImplementedError("no such thing yet")

    unsupported = benchmark.Mode(
        "unsupported", refuse, workload.enqueue_batch, benchmark.calls(workload.dequeue), "plain"
    )
    monkeypatch.setattr(workload, "MODES", [*workload.MODES, unsupported])
    given = arguments(modes=["plain", "unsupported"], consumers=[1], items=3, phases=["drain"])
    results = benchmark.run_all(given, lambda latency: memory.open(), "memory")
    assert [r.mode for r in results] == ["private", "plain"]
    output = capsys.readouterr()
    assert "skipped unsupported: NotImplementedError: no such thing yet" in output.out


def test_a_consumer_that_raises_ends_the_run_as_not_exactly_once_without_hanging():
    def explode(queue, db, wait):
        raise RuntimeError("boom")

    broken = benchmark.Mode("broken", Queue, workload.enqueue_batch, benchmark.calls(explode), None)
    for phase in benchmark.PHASES:
        result = benchmark.run(
            broken, phase, 2, items=5, producers=1, warmup=0, latency=ZERO, open_db=memory.open
        )
        assert not result.exactly_once
        assert "a consumer failed: RuntimeError: boom" in result.notes


def test_repeat_runs_each_mode_that_many_times_and_shows_the_median():
    result = bench(
        "--phases", "drain", "--consumers", "1", "--items", "5", "--modes", "plain", "--repeat", "3"
    )
    assert result.exit_code == 0, result.output
    assert "median of 3 runs" in result.output
    assert result.output.count("drain, plain, 1 consumer (run ") == 3
    assert result.output.count("drain, private, 1 consumer (run ") == 3  # the ideal too


def test_the_median_run_is_the_middle_one_and_any_failed_repetition_shows():
    def result(rate, once=True):
        return benchmark.Result(
            phase="drain", mode="plain", consumers=1, items=10, seconds=1.0,
            items_per_second=rate, p50_ms=None, p99_ms=None, conflicts_per_item=0.0,
            transactions_per_item=1.0, transaction_times_per_item=None, cpu_ms_per_item=0.1,
            ideal_per_second=None, producer_conflicts=0, empty_takes=0, exactly_once=once,
        )  # fmt: skip

    assert report.median_run([result(3), result(1), result(2)]).items_per_second == 2
    assert report.median_run([result(4), result(1), result(2), result(3)]).items_per_second == 2
    chosen = report.median_run([result(3), result(1, once=False), result(2)])
    assert chosen.items_per_second == 2 and not chosen.exactly_once


# -- the side-by-side ideal, keys read, and the hot-range figure -------------------------------


def test_a_tiny_run_sets_every_mode_against_its_private_ideal_and_records_hot_ranges():
    given = arguments(
        modes=["plain", "high-contention-prefetch"],
        consumers=[1, 2],
        items=30,
        producers=2,
        hot_ranges=True,
    )
    results = benchmark.run_all(given, lambda latency: memory.open(latency=latency), "memory")
    assert [(r.phase, r.consumers, r.mode) for r in results] == [
        (phase, c, mode)
        for phase in ("drain", "steady")
        for c in (1, 2)
        for mode in ("private", "plain", "high-contention-prefetch")
    ]
    for r in results:
        assert r.exactly_once, r.notes
        [private] = [
            p
            for p in results
            if p.mode == "private" and (p.phase, p.consumers) == (r.phase, r.consumers)
        ]
        assert r.ideal_per_second == private.items_per_second > 0
        assert r.of_ideal > 0
        assert r.cpu_vs_ideal > 0
        assert r.keys_read_per_item > 0  # counted by the in-memory database
        assert r.p99_over_p50 >= 1
        if r.phase == "steady":
            assert 0 < r.hot_range_share <= 1
        else:
            assert r.hot_range_share is None  # steady only
    # one consumer: the private queue is a plain queue with its one consumer
    [private_one] = [
        r for r in results if (r.phase, r.mode, r.consumers) == ("drain", "private", 1)
    ]
    assert private_one.of_ideal == 1.0 and private_one.cpu_vs_ideal == 1.0
    assert private_one.conflicts_per_item == 0


def test_the_tables_show_the_hot_range_column_only_when_recorded(capsys):
    given = arguments(modes=["plain"], consumers=[1], items=20, phases=["steady"], hot_ranges=True)
    benchmark.run_all(given, lambda latency: memory.open(), "memory")
    header = capsys.readouterr().out.splitlines()
    header = header[header.index("steady phase") + 1]
    assert "hot range" in header and "of ideal" in header
    given = arguments(modes=["plain"], consumers=[1], items=20, phases=["steady"])
    benchmark.run_all(given, lambda latency: memory.open(), "memory")
    header = capsys.readouterr().out.splitlines()
    assert "hot range" not in header[header.index("steady phase") + 1]


@pytest.mark.parametrize("phase", benchmark.PHASES)
def test_the_private_run_gives_each_consumer_a_queue_of_its_own(phase):
    made = []

    def make(subspace):
        made.append(subspace.key())
        return Queue(subspace)

    private = benchmark.Mode("private", make, workload.enqueue_batch, ideal.PRIVATE.consumer, None)
    result = benchmark.run(
        private, phase, 3, items=30, producers=2, warmup=5, latency=ZERO, open_db=memory.open,
        private=True,
    )  # fmt: skip
    assert result.exactly_once, result.notes
    assert len(made) == len(set(made)) == 3
    assert result.conflicts_per_item == 0  # no two consumers share a key


def test_hottest_range_share_cuts_the_distinct_keys_into_ranges_of_equal_key_count():
    # 32 distinct keys: 16 ranges of 2 keys each; keys 0 and 1 share the first range
    keys = [bytes([n]) for n in range(32)]
    writes = keys + [b"\x00"] * 5 + [b"\x01"] * 3 + [b"\x1f"] * 2
    # 42 mutations: range 0 has keys 0 and 1 with 6 + 4 = 10, range 15 has 1 + 3 = 4
    assert hot_ranges.hottest_range_share(writes) == pytest.approx(10 / 42)
    # an even spread: 1/16
    assert hot_ranges.hottest_range_share(keys) == pytest.approx(1 / 16)
    # every write on one key
    assert hot_ranges.hottest_range_share([b"k"] * 7) == 1.0
    # fewer distinct keys than ranges: each key is a range of its own
    assert hot_ranges.hottest_range_share([b"a", b"b", b"b", b"c"]) == pytest.approx(2 / 4)
    # 20 distinct keys in 4 ranges: 5 keys each
    assert hot_ranges.hottest_range_share(
        [bytes([n]) for n in range(20)] + [bytes([19])] * 5, ranges=4
    ) == pytest.approx(10 / 25)
    assert hot_ranges.hottest_range_share([]) is None


def test_the_recorder_keeps_the_keys_of_committed_mutations_only():
    database = memory.open()
    recorder = hot_ranges.MutationRecorder()
    tr = recorder.wrap(database.create_transaction())
    tr.set(b"p/set", b"1")
    tr[b"p/item"] = b"2"
    tr.clear(b"p/clear")
    del tr[b"p/range-begin":b"p/range-end"]
    tr.clear_range_startswith(b"p/prefix")
    tr.add(b"p/counter", (1).to_bytes(8, "little"))
    tr.set_versionstamped_key(b"p/line/" + b"\x00" * 10 + (7).to_bytes(4, "little"), b"")
    tr.set(b"elsewhere", b"")
    versionstamp = tr.get_versionstamp()  # the recorder asks for it too
    tr.commit().wait()
    versionstamp = versionstamp.wait()
    keys = recorder.keys(b"p/", 0, float("inf"))
    assert sorted(keys) == sorted(
        [
            b"p/set",
            b"p/item",
            b"p/clear",
            b"p/range-begin",
            b"p/prefix",
            b"p/counter",
            b"p/line/" + bytes(versionstamp),  # resolved, as the database stored it
        ]
    )
    assert database.get(b"p/line/" + bytes(versionstamp)) == b""
    # a transaction that conflicts, or is retried, records nothing of that attempt
    first = recorder.wrap(database.create_transaction())
    second = database.create_transaction()
    first.get(b"p/set").wait()
    second.set(b"p/set", b"3")
    second.commit().wait()
    first.set(b"p/lost", b"")
    with pytest.raises(memory.FDBError):
        first.commit().wait()
    retried = recorder.wrap(database.create_transaction())
    retried.set(b"p/before-retry", b"")
    retried.on_error(memory.FDBError(1020)).wait()
    retried.set(b"p/after-retry", b"")
    retried.commit().wait()
    later = recorder.keys(b"p/", 0, float("inf"))
    assert b"p/lost" not in later and b"p/before-retry" not in later
    assert b"p/after-retry" in later
    assert recorder.keys(b"p/", 0, 0) == []  # outside the window


class OtherDatabase:
    """A database the benchmark does not know as the in-memory one (as a real cluster)."""

    def __init__(self, database):
        self._database = database

    def create_transaction(self):
        return self._database.create_transaction()


def test_on_another_database_counting_wraps_transactions_and_keys_read_are_not_known():
    result = benchmark.run(
        workload.MODES[[m.name for m in workload.MODES].index("high-contention-prefetch")],
        "steady", 2, items=20, producers=2, warmup=5, latency=ZERO,
        open_db=lambda: OtherDatabase(memory.open()), hot_ranges=True,
    )  # fmt: skip
    assert result.exactly_once, result.notes
    assert result.keys_read_per_item is None and result.transaction_times_per_item is None
    assert 0 < result.hot_range_share <= 1


def test_fairness_serves_every_quiet_group_within_its_round_robin_share():
    result = bench(
        "--fairness",
        "--consumers",
        "1,2",
        "--noisy-items",
        "300",
        "--quiet-groups",
        "5",
        "--quiet-items",
        "3",
    )
    assert result.exit_code == 0, result.output
    rows = [
        line.split()
        for line in result.output.splitlines()
        if line.split()[1:2] in (["dequeue"], ["claim"])
    ]
    assert [(row[0], row[1]) for row in rows] == [
        ("1", "dequeue"),
        ("1", "claim"),
        ("2", "dequeue"),
        ("2", "claim"),
    ]
    for row in rows:
        last_quiet, round_robin = int(row[3]), int(row[4])
        assert round_robin == 18  # (5 quiet groups + the noisy one) x 3 items
        # served in turn: the quiet items end within the round robin (the takes counted in
        # commit order), far before the 300 noisy ones, where unfair service would put the last
        # quiet item. Two consumers may each hold a turn at once: a take or two of slack.
        assert last_quiet <= round_robin + int(row[0])
        assert row[-1] == "yes"


def test_fairness_in_json_gives_every_groups_dwell_percentiles():
    result = bench(
        "--json",
        "--fairness",
        "--consumers",
        "1",
        "--noisy-items",
        "50",
        "--quiet-groups",
        "2",
        "--quiet-items",
        "2",
    )
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)["fairness"]
    assert [run["mode"] for run in runs] == ["dequeue", "claim"]
    for run in runs:
        assert run["last_quiet"] == 6 and run["exactly_once"] is True
        names = {group["group"]: group for group in run["groups"]}
        assert set(names) == {"noisy", "quiet-0", "quiet-1"}
        assert names["quiet-1"]["items"] == 2 and names["noisy"]["items"] == 2
        assert all(g["p50_ms"] <= g["p99_ms"] <= g["max_ms"] for g in run["groups"])


# -- several processes, one server (--processes) ----------------------------------------------


@pytest.fixture
def started_processes(monkeypatch):
    """Every process ``multiprocessing`` starts meanwhile (any start method), recorded."""
    started = []
    start = multiprocessing.process.BaseProcess.start

    def recording_start(self):
        start(self)
        started.append(self)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", recording_start)
    return started


def assert_all_ended(started):
    """Every process started ended and was reaped: none outlives the run."""
    for process in started:
        assert process.exitcode is not None, process
        with pytest.raises(ProcessLookupError):  # reaped: the pid is no child any more
            os.kill(process.pid, 0)
    assert multiprocessing.active_children() == []


@pytest.mark.slow("starts 9 processes")
def test_processes_against_one_server_in_json_give_every_runs_figures(started_processes):
    result = bench(
        "--json",
        "--processes",
        "1,2",
        "--process-consumers",
        "2",
        "--process-items",
        "12",
        "--process-server",
        "both",
        "--grv",
        "0",
        "--read",
        "0",
        "--commit",
        "0",
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["settings"]["processes"] == [1, 2]
    assert document["settings"]["cores"] >= 1
    runs = document["runs"]
    setups = ["one process", "server (process)", "server (thread)"]
    assert [(run["setup"], run["processes"]) for run in runs] == [
        (setup, count) for count in (1, 2) for setup in setups
    ]
    for run in runs:
        assert run["exactly_once"] is True and run["notes"] == []
        assert run["threads"] == 2 * run["processes"] and run["items"] == 12
        assert run["items_per_second"] > 0 and run["client_cpu_ms_per_item"] > 0
        assert run["commits_per_item"] >= 2  # an enqueue and a dequeue, each a commit
        assert run["vs_one_process"] > 0
        served = run["setup"] != "one process"
        assert (run["server_ms_per_commit"] is not None) == served
        assert (run["server_cpu_per_second"] is not None) == served
    assert document["server"][0].startswith("the server's ceiling: ")
    # one server process; P = 1: 1 + 1 + 1 clients, P = 2: 1 + 2 + 2; each stopped by the end
    assert len(started_processes) == 9
    assert_all_ended(started_processes)


@pytest.mark.slow("starts 3 processes")
def test_processes_print_a_table_and_what_bounds_the_runs(started_processes):
    result = bench(
        "--processes", "1", "--process-consumers", "1", "--process-items", "4",
        "--process-work", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "4 items per run" in lines[0] and "1 ms of CPU per item" in lines[0]
    header = lines[1].split("  ")
    assert [title.strip() for title in header if title.strip()] == [
        "setup", "P", "threads", "items/s", "vs one", "client cpu ms/item", "client cpu s/s",
        "server cpu s/s", "server ms/commit", "machine busy", "commits/item", "confl/item",
        "once",
    ]  # fmt: skip
    assert lines[3].startswith("one process ") and lines[3].endswith("yes")
    assert lines[4].startswith("server (process) ") and lines[4].endswith("yes")
    assert any(line.startswith("the server's ceiling: ") for line in lines)
    assert_all_ended(started_processes)


@pytest.mark.slow("starts 2 processes")
def test_an_interrupted_run_stops_the_server_and_every_child(monkeypatch, started_processes):
    gather = processes._gather

    def interrupted(started, what, seconds):
        gather(started, what, seconds)
        raise KeyboardInterrupt  # Ctrl-C once every child is ready

    monkeypatch.setattr(processes, "_gather", interrupted)
    with pytest.raises(KeyboardInterrupt):
        processes.measure_processes([1], 1, 4, "plain", ZERO, ["process"])
    assert len(started_processes) == 2  # the server and a client
    assert_all_ended(started_processes)


def test_sigterm_interrupts_the_processes_runs_and_its_handler_is_put_back():
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), processes._terminated_as_interrupted():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # interrupted at once
    assert signal.getsignal(signal.SIGTERM) is previous


def living_in_group(group):
    """The processes of process group ``group`` that still run (not zombies)."""
    listing = subprocess.run(
        ["ps", "-o", "pid=,stat=", "-g", str(group)], capture_output=True, text=True, check=False
    ).stdout
    return [line.split()[0] for line in listing.splitlines() if not line.split()[1].startswith("Z")]


@pytest.mark.slow("starts the command and its processes, then interrupts them")
@pytest.mark.parametrize("interrupt", ["ctrl-c", "sigterm"])
def test_an_interrupted_command_leaves_no_process_behind(interrupt):
    command = subprocess.Popen(
        [sys.executable, "-m", "fdbqueue", "--memory", "bench", "--processes", "1,2"],
        start_new_session=True,  # a group of its own, as a terminal's command
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        # the command, multiprocessing's resource tracker, the server and a client
        while len(living_in_group(command.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(living_in_group(command.pid)) >= 4
        if interrupt == "ctrl-c":
            os.killpg(command.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole group
        else:
            command.terminate()  # the command only
        _out, err = command.communicate(timeout=30)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
    assert command.returncode == 1 and "aborted" in err
    # a child may still be on its way out (``ps`` shows it as ``[python]``, running, its
    # memory gone): give it a few seconds, as a process left behind would never leave
    deadline = time.monotonic() + 10
    while living_in_group(command.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert living_in_group(command.pid) == []


@pytest.mark.slow("starts a process")
def test_a_child_that_fails_ends_the_run_with_its_reason(started_processes):
    context = multiprocessing.get_context("spawn")
    with pytest.raises(benchmark.BenchmarkError, match="one process, 1 process: KeyError: 'bogus'"):
        processes._run(context, "one process", "bogus", 1, 1, 2, ZERO, None, 0.0)
    assert_all_ended(started_processes)


def run_of(setup, processes_, **figures):
    defaults = {
        "consumers": 4,
        "threads": 4 * processes_,
        "items": 100,
        "seconds": 1.0,
        "items_per_second": 100.0,
        "client_cpu_per_second": 0.5,
        "client_cpu_ms_per_item": 5.0,
        "server_cpu_per_second": None,
        "server_ms_per_commit": None,
        "commits_per_item": 2.0,
        "conflicts_per_item": 0.0,
        "exactly_once": True,
    }
    return processes.ProcessRun(setup=setup, processes=processes_, **{**defaults, **figures})


def test_bound_names_the_servers_ceiling_and_each_bound_reached(monkeypatch):
    monkeypatch.setattr(processes, "cores_here", lambda: 2)
    runs = [
        run_of("one process", 1, items_per_second=300.0, client_cpu_per_second=0.6),
        run_of("server (process)", 1, server_cpu_per_second=0.4, server_ms_per_commit=1.25),
        run_of("one process", 4, items_per_second=700.0, client_cpu_per_second=0.95),
        run_of(
            "server (process)",
            4,
            items_per_second=400.0,
            server_cpu_per_second=0.9,
            server_ms_per_commit=1.0,
            machine_busy=0.97,
            client_cpu_per_second=0.8,
        ),
    ]
    assert processes.bound(runs) == [
        "the server's ceiling: 1.000 ms of its CPU per commit (server (process), P = 4) = "
        "1,000 commits/s on one core = 500 items/s at 2.00 commits/item; one process reached "
        "700 items/s (16 threads)",
        "one interpreter is the bound: one process, P = 4 (16 threads): 0.95 CPU s/s at 700 "
        "items/s",
        "the server is the bound: server (process), P = 4: 0.90 CPU s/s at 400 items/s",
        "the machine is the bound: server (process), P = 4: its 2 cores 97% busy, 1.70 CPU "
        "s/s of it this run's",
    ]
    assert processes.bound(runs[:1]) == []  # no server run: no ceiling


def test_the_machines_busy_share_counts_every_cores_busy_ticks():
    assert processes._busy_share((100, 1000), (190, 1100)) == 0.9
    assert processes._busy_share(None, (190, 1100)) is None
    assert processes._busy_share((100, 1000), (100, 1000)) is None  # no tick passed
    times = processes.machine_times()
    if times is not None:  # Linux
        busy, total = times
        assert 0 <= busy <= total


def test_the_threads_share_the_items_evenly_and_each_value_once():
    shares = processes._shares(10, 4, 0)
    assert [len(share) for share in shares] == [3, 3, 2, 2]
    assert sorted(value for share in shares for value in share) == list(range(10))


# -- load shapes (--loads) ---------------------------------------------------------------------


def test_without_loads_the_tables_and_the_json_have_no_load():
    result = bench("--phases", "drain", "--consumers", "1", "--items", "5", "--modes", "plain")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[lines.index("drain phase") + 1].split()[:2] == ["mode", "C"]
    assert "preloaded as" not in result.output
    output = CliRunner().invoke(
        cli,
        ["--json", "bench", "--phases", "drain", "--consumers", "1", "--items", "5"],
        obj={"database": memory.open()},
    )
    document = json.loads(output.stdout)
    assert "loads" not in document["settings"]
    assert all("load" not in r for r in document["results"])


def test_loads_run_the_drain_once_per_shape_and_show_it_in_a_column():
    result = bench(
        "--consumers", "2", "--items", "24", "--modes", "plain,sharded", "--loads", "all",
        "--producers", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "drain preloaded as batches-10, batches-1000, single, one-shard" in lines[0]
    drain = lines[lines.index("drain phase") + 1 : lines.index("steady phase")]
    assert drain[0].split()[:3] == ["mode", "load", "C"]
    rows = [line.split() for line in drain[2:] if line.strip()]
    assert [(row[0], row[1]) for row in rows] == [
        (mode, shape)
        for shape in ("batches-10", "batches-1000", "single", "one-shard")
        for mode in ("private", "plain", "sharded")
    ]
    assert all(row[-1] == "yes" for row in rows), result.output
    steady = lines[lines.index("steady phase") + 1 :]
    assert steady[0].split()[:3] == ["mode", "load", "C"]
    steady_rows = [line.split() for line in steady[2:] if line.split()[:1] in (["plain"],)]
    assert steady_rows and all(row[1] == "n/a" for row in steady_rows)  # steady: no shapes
    for shape in ("batches-10", "batches-1000", "single", "one-shard"):
        assert f"drain ({shape}): sharded / plain,  2 consumers = " in result.output
    assert "steady: sharded / plain,  2 consumers = " in result.output


def test_loads_in_json_give_each_drain_result_its_shape_and_compare_alike_shapes():
    output = CliRunner().invoke(
        cli,
        [
            "--json", "bench", "--phases", "drain", "--consumers", "1", "--items", "12",
            "--modes", "plain,sharded", "--loads", "single,one-shard",
        ],
        obj={"database": memory.open()},
    )  # fmt: skip
    assert output.exit_code == 0, output.output
    document = json.loads(output.stdout)
    assert document["settings"]["loads"] == ["single", "one-shard"]
    results = document["results"]
    assert [(r["load"], r["mode"]) for r in results] == [
        (shape, mode)
        for shape in ("single", "one-shard")
        for mode in ("private", "plain", "sharded")
    ]
    by = {(r["load"], r["mode"]): r for r in results}
    for shape in ("single", "one-shard"):
        private, plain, sharded = (by[shape, m] for m in ("private", "plain", "sharded"))
        assert sharded["ratio"] == pytest.approx(
            sharded["items_per_second"] / plain["items_per_second"]
        )
        assert sharded["ideal_per_second"] == private["items_per_second"]
        assert all(r["exactly_once"] and r["items"] == 12 for r in (private, plain, sharded))
    # one consumer and every item in one shard, written in order: taken in order
    assert by["one-shard", "sharded"]["overtaken"] == 0


def items_per_shard(database, queue):
    counts = []
    for shard in range(queue.shards):
        items = queue.subspace.subspace((shard,)).range()
        counts.append(len(list(database.create_transaction().get_range(items.start, items.stop))))
    return counts


def test_the_one_shard_load_puts_every_item_into_shard_zero_as_the_library_would():
    [sharded] = [m for m in benchmark.MODES if m.name == "sharded"]
    database = memory.open()
    space = Subspace(("one-shard",))
    queue = sharded.make(space)
    counting_db = counting.CountingDatabase(database)
    loading.load(sharded, [queue], counting_db, range(2500), 2, "one-shard")
    assert items_per_shard(database, queue) == [2500] + [0] * (queue.shards - 1)
    assert queue.size(database) == 2500  # the shard's size counter counts them
    assert queue.peek_many(database, 3) == [0, 1, 2]
    with pytest.raises(QueueTypeError):  # the library recorded the queue's type
        Queue(space).enqueue(database, 1)
    assert queue.dequeue_many(database, 2500) == list(range(2500))
    assert queue.empty(database)
    assert counting_db.snapshot()["loader_transactions"] > 0  # counted as the loader's


@pytest.mark.parametrize("shape", list(loading.LOADS))
def test_every_load_shape_enqueues_every_value_once(shape):
    [sharded] = [m for m in benchmark.MODES if m.name == "sharded"]
    database = memory.open()
    queues = [sharded.make(Subspace(("shapes", shape))), Queue(Subspace(("plain", shape)))]
    loading.load(sharded, queues, counting.CountingDatabase(database), range(40), 3, shape)
    assert sorted(queues[0].peek_many(database, None)) == list(range(0, 40, 2))
    assert sorted(queues[1].peek_many(database, None)) == list(range(1, 40, 2))
    spread = items_per_shard(database, queues[0])
    assert sum(spread) == 20
    if shape == "one-shard":
        assert spread[0] == 20
    if shape == "single":  # one enqueue per value: spread over the shards
        assert sum(1 for count in spread if count) > 1


def test_the_one_shard_loader_refuses_a_queue_of_one_shard():
    [plain] = [m for m in benchmark.MODES if m.name == "plain"]
    with pytest.raises(ValueError, match="sharded Queue only"):
        loading.load_one_shard(plain, Queue(Subspace(("x",))), memory.open(), [1])


# -- CPU per item against the recipe (--cpu) -------------------------------------------------


CPU_COLUMNS = (
    "own us/item", "client us/item", "db us/item", "total us/item", "own share", "vs recipe",
    "client vs recipe", "reads/item", "keys read/item", "keys written/item", "in order",
    "against",
)  # fmt: skip


def table(output, column):
    """The word lists of the rows of the table whose header names ``column``, by subject."""
    lines = output.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("subject") and column in line)
    rows = {}
    for line in lines[start + 2 :]:
        words = line.split()
        if not words or words[0] not in cpu.SUBJECTS:
            break
        rows[words[0]] = words[1:]
    return rows


def cpu_rows(output):
    """The CPU table's rows by subject: the figures as floats, then in order and against."""
    return {
        name: [float(x) if x != "n/a" else None for x in words[:10]] + words[10:]
        for name, words in table(output, "own us/item").items()
    }


def instruction_rows(output):
    """The instruction table's rows by subject: instructions/item and vs recipe as floats,
    against, and the calls counted."""
    return {
        name: [float(words[0]), float(words[1]), words[2], " ".join(words[3:])]
        for name, words in table(output, "instructions/item").items()
    }


@pytest.mark.slow("measures the CPU of the recipe and of fdbqueue")
def test_cpu_prints_the_recipe_and_fdbqueue_per_item_and_their_ratios():
    result = bench("--cpu", "--cpu-items", "30", "--cpu-runs", "1")
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if line.startswith("subject"))
    for column in CPU_COLUMNS:
        assert column in header
    rows = cpu_rows(result.output)
    assert list(rows) == list(cpu.SUBJECTS)
    for name in cpu.REFERENCES:
        assert rows[name][5:7] == [1.0, 1.0]
    for name, row in rows.items():
        own, client, db, total, share, ratio, client_ratio, reads, read, written = row[:10]
        # client: own and the binding's code, which a path may not call at all (a job's,
        # since its id moved into the item key: no tuple layer)
        assert 0 < own <= client < total and 0 < db < total and 0 < share < 1
        assert ratio > 0 and client_ratio > 0
        assert reads >= 1 and read >= 1 and written >= 2
        assert row[10:] == ["yes", cpu.SUBJECTS[name].reference]
    # per item two range reads (the first enqueue's finds the queue empty), a set, a clear
    assert rows["recipe"][7:10] == [2.0, round(2 - 1 / 30, 2), 2.0]
    assert "done: cpu, plain (run 1 of 1)" in result.output


@pytest.mark.slow("counts every subject's instructions under sys.settrace (seconds)")
def test_cpu_prints_every_subjects_instructions_per_item_against_its_recipe_row(monkeypatch):
    monkeypatch.setattr(instructions, "WARMUP", 2)  # fewer items before the counted ones
    result = bench("--cpu", "--cpu-items", "1", "--cpu-runs", "1", "--cpu-counted-items", "2")
    assert result.exit_code == 0, result.output
    assert "Bytecode instructions per item, counted (sys.settrace): 2 items after 2" in (
        result.output
    )
    rows = instruction_rows(result.output)
    assert list(rows) == list(cpu.SUBJECTS) == list(instructions.ROWS)
    for name, (count, ratio, against, counted) in rows.items():
        assert against == cpu.SUBJECTS[name].reference
        assert counted == instructions.ROWS[name].counted
        assert ratio == pytest.approx(count / rows[against][0], abs=0.006)
    assert rows["recipe"][1] == rows["recipe-in-transaction"][1] == 1.0
    assert 500 < rows["recipe"][0] < 2000  # the client's, not the in-memory database's
    # issue 44's four rows: enqueue + dequeue, the same given a Transaction, claim + ack,
    # submit + work() per job; each costs more than the recipe's enqueue + dequeue
    assert rows["plain"][3] == "enqueue + dequeue"
    assert rows["in-transaction"][3] == "enqueue + dequeue, each given a Transaction"
    assert rows["claim-ack"][3] == "enqueue + claim + ack"
    assert rows["work"][3] == "submit + work(), per job, marginal"
    assert 1 < rows["plain"][1] < rows["claim-ack"][1] < rows["work"][1]
    assert rows["in-transaction"][1] > 1
    assert "done: instructions, work" in result.output


@pytest.mark.slow("measures the CPU of every subject")
def test_cpu_in_json_gives_every_subjects_figures():
    output = CliRunner().invoke(
        cli,
        ["--json", "bench", "--cpu", "--cpu-items", "20", "--cpu-runs", "3",
         "--cpu-counted-items", "10"],
        obj={"database": memory.open()},
    )  # fmt: skip
    assert output.exit_code == 0, output.output
    document = json.loads(output.stdout)
    assert document["settings"]["items"] == 20 and document["settings"]["runs"] == 3
    assert document["settings"]["subjects"] == list(cpu.SUBJECTS)
    results = {r["subject"]: r for r in document["cpu"]}
    assert set(results) == set(cpu.SUBJECTS)
    for name in cpu.REFERENCES:
        assert results[name]["vs_recipe"] == results[name]["client_vs_recipe"] == 1.0
    for r in results.values():
        reference = results[r["reference"]]
        assert r["in_order"] is True and r["items"] == 20 and r["runs"] == 3
        assert r["own_us_per_item"] > 0 and r["database_us_per_item"] > 0
        assert r["own_us_per_item"] <= r["client_us_per_item"] < r["total_us_per_item"]
        assert 0 < r["own_share"] <= r["client_share"] < 1  # (as above)
        assert r["vs_recipe"] == pytest.approx(r["own_us_per_item"] / reference["own_us_per_item"])
        assert r["client_vs_recipe"] == pytest.approx(
            r["client_us_per_item"] / reference["client_us_per_item"]
        )
        assert r["reads_per_item"] >= 1 and r["keys_read_per_item"] >= 1
        assert r["keys_written_per_item"] >= 2
    assert results["recipe"]["keys_written_per_item"] == 2.0
    assert document["settings"]["counted_items"] == 10
    counts = {r["subject"]: r for r in document["instructions"]}
    assert list(counts) == list(cpu.SUBJECTS)
    for r in counts.values():
        reference = counts[r["reference"]]
        assert r["items"] == 10 and r["warmup"] == instructions.WARMUP
        assert r["vs_recipe"] == pytest.approx(
            r["instructions_per_item"] / reference["instructions_per_item"]
        )


@pytest.mark.slow("runs the CPU benchmark of several subjects (seconds)")
def test_cpu_subjects_picks_subjects_and_brings_their_recipe_rows():
    output = CliRunner().invoke(
        cli,
        ["--json", "bench", "--cpu", "--cpu-items", "5", "--cpu-runs", "1",
         "--cpu-subjects", "in-transaction,claim-ack", "--cpu-counted-items", "3"],
        obj={"database": memory.open()},
    )  # fmt: skip
    assert output.exit_code == 0, output.output
    document = json.loads(output.stdout)
    expected = ["recipe", "claim-ack", "recipe-in-transaction", "in-transaction"]
    assert document["settings"]["subjects"] == expected
    assert [r["subject"] for r in document["cpu"]] == expected
    assert all(r["in_order"] for r in document["cpu"])
    assert cpu.with_references(["work"]) == ["recipe", "work"]
    settings = document["settings"]
    assert (settings["counted_items"], settings["counted_warmup"]) == (3, instructions.WARMUP)
    counts = {r["subject"]: r for r in document["instructions"]}
    assert list(counts) == expected
    assert counts["recipe"]["vs_recipe"] == counts["recipe-in-transaction"]["vs_recipe"] == 1.0
    for name, against in [("claim-ack", "recipe"), ("in-transaction", "recipe-in-transaction")]:
        assert counts[name]["reference"] == against and counts[name]["items"] == 3
        assert counts[name]["vs_recipe"] == pytest.approx(
            counts[name]["instructions_per_item"] / counts[against]["instructions_per_item"]
        )
        assert counts[name]["vs_recipe"] > 1


@pytest.mark.parametrize("name", ["recipe", "claim-ack", "work", "in-transaction"])
def test_each_subjects_calls_get_their_values_back_in_order_and_are_metered(name):
    database = memory.open()
    subject = cpu.SUBJECTS[name]
    queue = subject.make(Subspace(("cpu", name)))
    values = [b"%08d" % n for n in range(10)]
    meter = cpu.Meter(database, None)
    assert subject.calls(queue, database, values, meter) is True
    assert meter.seconds > 0
    assert meter.counted["reads"] >= 10 and meter.counted["keys_read"] >= 10
    assert meter.counted["keys_written"] >= 2 * 10
    if name == "recipe":  # a range read of one key and a set per enqueue; a clear per dequeue
        assert meter.counted == {"reads": 20, "keys_read": 19, "keys_written": 20}


def test_the_work_subject_measures_its_worker_threads_jobs_under_the_profile():
    database = memory.open()
    subject = cpu.SUBJECTS["work"]
    profile = cProfile.Profile()
    meter = cpu.Meter(database, profile)
    values = [b"%08d" % n for n in range(5)]
    assert subject.calls(subject.make(Subspace(("work",))), database, values, meter) is True
    profiled = {function[2] for function in pstats.Stats(profile).stats}
    assert {"enqueue", "claim", "ack"} <= profiled  # the worker thread's calls were profiled


def test_cpu_refuses_a_database_other_than_the_in_memory_one():
    given = arguments(cpu=True, cpu_items=5, cpu_runs=1)
    with pytest.raises(benchmark.BenchmarkError, match="in-memory database"):
        benchmark.run_all(given, lambda latency: OtherDatabase(memory.open()), "other")


def test_charge_gives_each_layer_its_functions_and_splits_the_others_among_their_callers():
    own, db, helper, deeper, loop = (
        ("own.py", 1, "f"), ("db.py", 1, "g"), ("~", 0, "helper"), ("~", 0, "deeper"),
        ("harness.py", 1, "loop"),
    )  # fmt: skip
    layers = {"own.py": cpu.OWN, "db.py": cpu.DATABASE, "harness.py": cpu.HARNESS}
    stats = {  # function: (cc, nc, own time, cumulative time, {caller: (cc, nc, tt, ct)})
        loop: (1, 1, 0.5, 10.0, {}),
        own: (1, 1, 2.0, 5.0, {loop: (1, 1, 2.0, 5.0)}),
        db: (1, 1, 3.0, 4.0, {loop: (1, 1, 3.0, 4.0)}),
        # helper spent 1.0 for own and 3.0 for the database
        helper: (2, 2, 4.0, 4.5, {own: (1, 1, 1.0, 1.0), db: (1, 1, 3.0, 3.5)}),
        deeper: (1, 1, 0.4, 0.4, {helper: (1, 1, 0.4, 0.4)}),  # charged as helper is
    }
    charged = cpu.charge(stats, lambda filename: layers.get(filename))
    assert charged[cpu.OWN] == pytest.approx(2.0 + 1.0 + 0.1)
    assert charged[cpu.DATABASE] == pytest.approx(3.0 + 3.0 + 0.3)
    assert charged[cpu.HARNESS] == pytest.approx(0.5)


def test_the_layers_are_told_apart_by_file():
    package = Path(benchmark.__file__).resolve().parent.parent
    assert cpu.layer(str(package / "queue.py")) == cpu.OWN
    assert cpu.layer(str(package / "_storage" / "store.py")) == cpu.OWN
    assert cpu.layer(recipe.__file__) == cpu.OWN
    assert cpu.layer(str(package / "memory" / "database.py")) == cpu.DATABASE
    assert cpu.layer(fdb.tuple.__file__) == cpu.DATABASE
    assert cpu.layer(str(package / "benchmark" / "cpu.py")) == cpu.HARNESS
    assert cpu.layer(json.__file__) is None  # the standard library: charged to its callers
    assert cpu.layer("~") is None  # built-in functions too


def test_the_client_layers_charge_memory_to_the_database_and_the_binding_to_the_client():
    package = Path(benchmark.__file__).resolve().parent.parent
    assert cpu.client_layer(str(package / "queue.py")) == cpu.CLIENT
    assert cpu.client_layer(recipe.__file__) == cpu.CLIENT
    assert cpu.client_layer(fdb.tuple.__file__) == cpu.CLIENT
    assert cpu.client_layer(fdb.subspace_impl.__file__) == cpu.CLIENT
    assert cpu.client_layer(str(package / "memory" / "_reads.py")) == cpu.DATABASE
    assert cpu.client_layer(str(package / "benchmark" / "cpu.py")) == cpu.HARNESS
    assert cpu.client_layer(json.__file__) is None
    assert cpu.client_layer("~") is None


def test_charge_names_every_layer_even_one_charged_nothing():
    stats = {("db.py", 1, "g"): (1, 1, 3.0, 3.0, {})}
    charged = cpu.charge(stats, lambda filename: cpu.DATABASE)
    assert charged == {cpu.OWN: 0.0, cpu.CLIENT: 0.0, cpu.DATABASE: 3.0, cpu.HARNESS: 0.0}


# -- the instruction counter (--cpu's second table) ------------------------------------------

LOOP = """
def loop(k):
    total = 0
    for n in range(k):
        total += n
    return total
"""
CALL = """
def call(function, *args):
    return function(*args)
"""
#: Files the counter's tests give a layer (code compiled under those names).
LAYERS = {"client.py": cpu.CLIENT, "db.py": cpu.DATABASE}


def compiled(source, filename):
    """The one function ``source`` defines, its code compiled as the file ``filename``."""
    namespace = {}
    exec(compile(source, filename, "exec"), namespace)
    [function] = [value for name, value in namespace.items() if name != "__builtins__"]
    return function


def counted(function, *args):
    """The instructions counted by an InstructionCounter (layers: LAYERS) around the call."""
    with instructions.InstructionCounter(LAYERS.get) as counter:
        function(*args)
    return counter.instructions


def test_the_counter_counts_a_loop_of_k_iterations_linearly_in_k():
    loop = compiled(LOOP, "client.py")
    counts = {k: counted(loop, k) for k in (0, 1, 10, 20, 40)}
    step = counts[1] - counts[0]  # one iteration: a handful of instructions
    assert 3 <= step <= 20 and counts[0] > 0
    for k in (10, 20, 40):
        assert counts[k] == counts[0] + k * step


def test_the_counter_charges_a_frame_by_its_file_and_one_of_no_layer_to_its_caller():
    loop, loop_in_db = compiled(LOOP, "client.py"), compiled(LOOP, "db.py")
    call, call_in_db = compiled(CALL, "client.py"), compiled(CALL, "db.py")
    assert counted(loop_in_db, 50) == 0  # the database's code is not the client's
    assert counted(call_in_db, loop, 10) == counted(loop, 10)  # the client's, called by it
    # textwrap.dedent is the standard library's (no layer): the caller's cost
    text = "  a\n  b\n"
    assert counted(call, textwrap.dedent, text) > counted(call, len, text) + 20
    assert counted(call_in_db, textwrap.dedent, text) == 0
    assert counted(textwrap.dedent, text) == 0  # called by this file: the harness's


def test_the_counter_counts_the_threads_started_meanwhile_and_puts_back_the_tracers():
    loop = compiled(LOOP, "client.py")
    alone = counted(loop, 30)
    tracers = (sys.gettrace(), threading.gettrace())
    with instructions.InstructionCounter(LAYERS.get) as counter:
        thread = threading.Thread(target=loop, args=(30,))
        thread.start()
        thread.join()
        loop(30)
    assert counter.instructions == 2 * alone
    assert (sys.gettrace(), threading.gettrace()) == tracers


def test_the_instruction_rows_go_with_the_cpu_subjects_and_their_recipe_rows():
    assert list(instructions.ROWS) == list(cpu.SUBJECTS)
    results = instructions.count_instructions(["recipe", "work"], items=2, warmup=2)
    recipe_row, work = results
    assert (work.subject, work.reference, work.items, work.warmup) == ("work", "recipe", 2, 2)
    assert recipe_row.vs_recipe == 1.0
    assert work.vs_recipe == pytest.approx(
        work.instructions_per_item / recipe_row.instructions_per_item
    )
    assert work.instructions_per_item > 5 * recipe_row.instructions_per_item


def test_the_recipe_is_a_fifo_queue_that_fdbqueue_reads_with_the_raw_codec():
    database = memory.open()
    space = Subspace(("recipe",))
    queue = recipe.RecipeQueue(space)
    assert queue.dequeue(database) is None
    for value in (b"a", b"b", b"c"):
        queue.enqueue(database, value)
    assert queue.last_index(database.create_transaction()) == 3
    assert queue.dequeue(database) == b"a"
    assert Queue(space, codec="raw").dequeue_many(database, 5) == [b"b", b"c"]
