"""Counting per thread role (:class:`CountingDatabase`): transactions and conflicts, and on
the in-memory database its own counters, per role (consumer, producer, loader); and, with
``--hot-ranges``, the mutations of every transaction (:mod:`~fdbqueue.benchmark.hot_ranges`)."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from fdbqueue import memory
from fdbqueue.benchmark.hot_ranges import MutationRecorder
from fdbqueue.benchmark.workload import CONFLICT


class CountingDatabase:
    """Wraps a database to count transactions and conflicts per role (the thread's
    ``local.role``: consumer, producer, loader), and, on the in-memory database, its counters
    (read versions, reads, commits, conflicts) per role as ``<role>_db_<counter>``.

    Counting must cost the measured threads little: each thread counts into a Counter of its
    own (no lock), and on the in-memory database, whose own counters include conflicts,
    transactions are not wrapped at all, unless a ``recorder`` records their mutations.

    Args:
        database: the database of the run.
        recorder: records every transaction's mutations (``--hot-ranges``); None: none.
    """

    def __init__(self, database: Any, recorder: MutationRecorder | None = None) -> None:
        self.database = database
        self.recorder = recorder
        self.local = threading.local()
        self.lock = threading.Lock()
        self._counters: list[Counter[str]] = []  # one per thread that counted
        self.direct = False  # the in-memory database counts conflicts: no wrapping

    def role(self) -> str:
        return getattr(self.local, "role", "other")

    def count(self, name: str, amount: int = 1) -> None:
        counts: Counter[str] | None = getattr(self.local, "counts", None)
        if counts is None:
            counts = self.local.counts = Counter()
            with self.lock:
                self._counters.append(counts)
        counts[f"{self.role()}_{name}"] += amount

    def snapshot(self) -> Counter[str]:
        with self.lock:
            counters = list(self._counters)
        total: Counter[str] = Counter()
        for counts in counters:
            total.update(dict(counts))  # a dict copy is one step under the GIL
        return total

    def create_transaction(self) -> Any:
        self.count("transactions")
        transaction = self.database.create_transaction()
        if self.recorder is not None:
            transaction = self.recorder.wrap(transaction)
        if self.direct:
            return transaction
        return CountingTransaction(self, transaction)

    @contextlib.contextmanager
    def database_counters(self) -> Iterator[bool]:
        """While open, the in-memory database's counters also count per role here (and
        conflicts are taken from them). Yields whether they do (False for any other
        database)."""
        stats = getattr(self.database, "_stats", None)
        if not isinstance(self.database, memory.Database) or type(stats) is not Counter:
            yield False
            return
        stats.__class__ = _RoleStats  # same layout: a Counter whose increments we see
        stats.__dict__["_benchmark_sink"] = self
        self.direct = True
        try:
            yield True
        finally:
            self.direct = False
            stats.__dict__.pop("_benchmark_sink", None)
            stats.__class__ = Counter


class _RoleStats(Counter[str]):
    """The in-memory database's counters, also reporting each increment to the benchmark."""

    def __setitem__(self, key: str, value: int) -> None:
        old = self.get(key, 0)
        super().__setitem__(key, value)
        sink = self.__dict__.get("_benchmark_sink")
        if sink is not None and value > old:
            sink.count(f"db_{key}", value - old)


class CountingTransaction:
    """Forwards everything to the real transaction; counts conflicts seen by ``on_error``."""

    def __init__(self, owner: CountingDatabase, transaction: Any) -> None:
        self._owner = owner
        self._transaction = transaction

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transaction, name)

    def __getitem__(self, key: Any) -> Any:
        return self._transaction[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._transaction[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._transaction[key]

    def commit(self) -> Any:
        return CountedCommit(self._owner, self._transaction.commit())


class CountedCommit:
    """A commit future whose ``wait`` counts a conflict against the committing role."""

    def __init__(self, owner: CountingDatabase, future: Any) -> None:
        self._owner = owner
        self._future = future

    def wait(self) -> Any:
        try:
            return self._future.wait()
        except Exception as error:
            if getattr(error, "code", None) == CONFLICT:
                self._owner.count("conflicts")
            raise
