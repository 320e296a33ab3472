"""Small helpers shared by the test modules; they work on both backends.

``fdb.impl`` (the real binding) is only looked at when something already imported it, which
happens when the ``fdb`` backend is in use: importing it needs libfdb_c.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from unittest import mock

import pytest
from hypothesis.stateful import RuleBasedStateMachine

from fdbqueue import memory
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue.memory._client_library import ClientLibrary
from fdbqueue.memory._injection import FaultInjector

T = TypeVar("T")


def fdb_error_types() -> tuple[type[BaseException], ...]:
    """The FDBError classes of the backends loaded in this process."""
    from fdbqueue import memory

    types: list[type[BaseException]] = [memory.FDBError]
    impl = sys.modules.get("fdb.impl")
    if impl is not None and getattr(impl, "FDBError", None) is not None:
        types.append(impl.FDBError)
    return tuple(types)


def is_fdb_error(exc: BaseException) -> bool:
    return isinstance(exc, fdb_error_types())


@contextlib.contextmanager
def raises_fdb_error(code: int) -> Iterator[pytest.ExceptionInfo[BaseException]]:
    """Like ``pytest.raises``, for an FDBError of either backend whose ``code`` is ``code``."""
    with pytest.raises(fdb_error_types()) as info:
        yield info
    assert info.value.code == code, f"expected FDBError {code}, got {info.value!r}"


def run(db: Any, body: Callable[[Any], T]) -> T:
    """``body(tr)`` in a new transaction, committed, retried through ``on_error``."""
    return run_in_retry_loop(db, body)


def value(v: Any) -> bytes | None:
    """The bytes of a ``get`` result, or None when the key is absent."""
    if v is None:
        return None
    return bytes(v) if v.present() else None


def read(db: Any, key: bytes) -> bytes | None:
    """The committed value of ``key`` (None when absent), read in a fresh transaction."""
    return run(db, lambda tr: value(tr.get(key)))


def items(results: Any) -> list[tuple[bytes, bytes]]:
    """A range read as a list of ``(key, value)`` bytes pairs."""
    return [(bytes(k), bytes(v)) for k, v in results]


def read_range(db: Any, begin: Any, end: Any, **kwargs: Any) -> list[tuple[bytes, bytes]]:
    """Committed key-value pairs in ``[begin, end)``, read in a fresh transaction."""
    return run(db, lambda tr: items(tr.get_range(begin, end, **kwargs)))


def write(db: Any, pairs: dict[bytes, bytes]) -> None:
    """Set every pair in one committed transaction."""

    def body(tr: Any) -> None:
        for k, v in pairs.items():
            tr.set(k, v)

    run(db, body)


class Waiter:
    """Waits on a future in a daemon thread, so a test can bound the wait (watches)."""

    def __init__(self, future: Any) -> None:
        self.future = future
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        try:
            self.future.wait()
        except BaseException as exc:
            self.error = exc
        finally:
            self._done.set()

    def done(self, timeout: float) -> bool:
        """Whether the future became ready (value or error) within ``timeout`` seconds."""
        return self._done.wait(timeout)


def all_keys(db: Any, subspace: Any) -> list[tuple[bytes, bytes]]:
    """Every committed key-value pair under the subspace's raw prefix (items and metadata)."""
    return run(
        db,
        lambda tr: [(kv.key, bytes(kv.value)) for kv in tr.get_range_startswith(subspace.key())],
    )


#: What :func:`or_timed_out` returns for a call that raised 1031 (and so took no effect).
TIMED_OUT = object()


def or_timed_out(call: Callable[[], T]) -> T | object:
    """``call()``, or :data:`TIMED_OUT` when it raised 1031 ``transaction_timed_out``: an
    fdbqueue call that raises 1031 took no effect."""
    try:
        return call()
    except fdb_error_types() as error:
        if getattr(error, "code", None) != 1031:
            raise
        return TIMED_OUT


def despite_timeouts(call: Callable[[], T], timeouts: list[int] | None = None) -> T:
    """``call()``, made again after each 1031 (counted in ``timeouts`` when given)."""
    while True:
        result = or_timed_out(call)
        if result is not TIMED_OUT:
            return result  # type: ignore[return-value]
        if timeouts is not None:
            timeouts.append(1031)


class BytesDescriptionError(Exception):
    """Like the real binding's FDBError: ``description`` is bytes (read through
    ``ctypes.c_char_p``), so its ``str`` shows ``b'...'``."""

    def __init__(self, code: int, description: bytes) -> None:
        super().__init__(code)
        self.code = code
        self.description = description

    def __str__(self) -> str:
        return f"{self.description!r} ({self.code})"


class PoisonCodec:
    """A raw codec whose values starting with b"!" cannot be decoded (poison items)."""

    def encode(self, value: bytes) -> bytes:
        return value

    def decode(self, raw: bytes) -> bytes:
        if raw.startswith(b"!"):
            raise ValueError("poison")
        return raw


def run_threads(target: Callable[[], object], count: int, timeout: float = 60) -> None:
    """Run ``target`` in ``count`` threads at once and join them (``timeout`` s each)."""
    threads = [threading.Thread(target=target) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)


def installed_fdb() -> Any:
    """The ``fdb`` module over :func:`fdbqueue.memory.install`, with an API version selected
    (``FDB_API_VERSION`` or 630); skips the test when the binding already runs on a real
    libfdb_c."""
    import os

    import fdb as binding
    import pytest

    from fdbqueue import memory

    memory.install()
    if not binding.is_api_version_selected():
        binding.api_version(int(os.environ.get("FDB_API_VERSION", "0")) or 630)
    if not isinstance(binding.impl._capi, ClientLibrary):
        pytest.skip("this session's fdb binding runs on a real libfdb_c")
    return binding


@contextlib.contextmanager
def fault_on(kind: str, applied: bool, times: int = 1) -> Iterator[list[int]]:
    """Make the next ``times`` writing commits in this block fail with ``kind``
    (``"commit_unknown_result"`` or ``"timed_out"``), applied (or left in flight) when
    ``applied``; every later commit succeeds (with ``times=2`` the second fault hits the
    transaction resolving the first's outcome). Yields a list that gets one entry per fault
    injected (a test checks that the fault really happened)."""
    original = FaultInjector.commit
    numbers = itertools.count()
    injected: list[int] = []

    def commit(self: FaultInjector, request: Any, fired: list[Any]) -> int:
        if next(numbers) >= times:
            return original(self, request, fired)
        faults, draws = self.faults, self._random
        # The draws: the first picks the fault; the second applies it (1021) or leaves it in
        # flight (1031).
        scripted = iter([0.0, 0.0 if applied else 0.99])
        self._random = types.SimpleNamespace(random=lambda: next(scripted, 0.99))  # type: ignore[assignment]
        self.faults = memory.Faults(**{kind: 1.0})
        injected.append(1)
        try:
            return original(self, request, fired)
        finally:
            self.faults, self._random = faults, draws

    FaultInjector.commit = commit  # type: ignore[method-assign]
    try:
        yield injected
    finally:
        FaultInjector.commit = original  # type: ignore[method-assign]


def write_into_shard(
    db: Any, queue: Any, shard: int, value: Any, priority: int | None = None
) -> None:
    """Write ``value`` into shard ``shard`` of ``queue`` (a Queue's, or with ``priority`` a
    PriorityQueue's), where the queue's own turn would not put it: the shard's own write."""
    into = queue._router.shards[shard]
    where = () if priority is None else (priority,)
    into.write(db, [(into, [into.store.encode(value)])], where, 0.0, None)


def pass_time(db: Any, seconds: float) -> None:
    """Let ``seconds`` pass for the in-memory database ``db``: its versions and the wall
    clock that fdbqueue's leases, deduplication windows and ages are also measured by
    (``db.pass_time``; ``db.advance_time`` alone moves versions only, as a recovery does)."""
    db.pass_time(seconds)


class RepeatableMachine(RuleBasedStateMachine):
    """A state machine whose examples repeat exactly: Hypothesis replays an example's
    choices and requires the same steps to follow, so the random bytes fdbqueue draws (item
    keys' random parts, lease, dead letter and call ids) come from a generator seeded per
    example while it runs, not from the system. What a run does then depends on the
    example's choices and the database's seed only."""

    def __init__(self) -> None:
        super().__init__()
        draws = random.Random(0)
        self._seeded_bytes = mock.patch.object(os, "urandom", draws.randbytes)
        self._seeded_bytes.start()

    def teardown(self) -> None:
        self._seeded_bytes.stop()


def old_lease_record(record: Any) -> bytes:
    """``record`` (a :class:`~fdbqueue._delivery.leases.LeaseRecord`) as an fdbqueue before
    the fixed layout wrote it: ``pack((item key, deliveries, held id[, expiry time[, release
    time]]))`` (the release time only after an expiry time)."""
    import fdb.tuple

    fields = tuple(record)
    if record.expiry_time is None:
        fields = fields[:3]
    elif record.released_at is None:
        fields = fields[:4]
    packed: bytes = fdb.tuple.pack(fields)
    return packed


def old_job_record(record: Any, version: int = 2) -> bytes:
    """``record`` (a :class:`~fdbqueue._storage.job_records.JobRecord`) as an fdbqueue before the
    fixed layout wrote it, a tuple of ``version`` (1 or 2): ``pack((version, state,
    deliveries, enqueued_at, started_at, finished_at, due_at, cancel_requested, group,
    priority, error type, error message, error traceback))``."""
    import fdb.tuple

    packed: bytes = fdb.tuple.pack(
        (
            version,
            record.state,
            record.deliveries,
            record.enqueued_at,
            record.started_at,
            record.finished_at,
            record.due_at,
            record.cancel_requested,
            record.group,
            record.priority,
            *record.error,
        )
    )
    return packed


def eventually(condition: Callable[[], Any], what: str, seconds: float = 20.0) -> Any:
    """``condition()``'s first true value, polled every 10 ms for at most ``seconds``; fails
    the test with ``what`` otherwise (for what other threads do in real time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.01)
    pytest.fail(f"never happened: {what}")
