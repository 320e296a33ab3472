"""The hot-range figure (``--hot-ranges``): how much of a queue's writes one shard would take.

While a run measures, every committed transaction's mutations are recorded by key
(:class:`MutationRecorder`); afterwards the keys under the queue's subspace committed during
the measured window are cut as a cluster cuts shards (:func:`hottest_range_share`): the
distinct keys, sorted, into :data:`RANGES` ranges of equal key count, and the largest range's
share of all the mutations is the figure. An even spread is ``1 / RANGES`` (0.06); 1.0 means
one range took every write.

What is recorded, per mutation, is one key: a set's, a clear's, an atomic operation's and a
``set_versionstamped_value``'s key; a clear range's begin key (``clear_range``,
``clear_range_startswith``, ``del tr[begin:end]``); a ``set_versionstamped_key``'s key once
the commit has resolved it (its 10 bytes at the offset become the transaction's versionstamp,
from ``get_versionstamp``). Mutations of a transaction that did not commit (a conflict, an
error, a retry through ``on_error`` or ``reset``) are dropped. Keys given as something other
than bytes (a key selector, an object with ``as_foundationdb_key``) are recorded as the bytes
that object gives, or not at all when it gives none (a selector: the benchmark's queues use
none).

Recording costs a measured thread little: each thread appends to a list of its own (no lock
after its first commit), and the lists are merged when the figure is computed.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = [
    "RANGES",
    "MutationRecorder",
    "RecordingTransaction",
    "hottest_range_share",
]

#: Ranges the distinct keys are cut into, as a cluster of that many shards would cut them.
RANGES = 16

#: The binding's atomic operations (the memory database's and ``fdb``'s names): each writes
#: one key.
ATOMIC_OPERATIONS = (
    "add",
    "and_",
    "bit_and",
    "or_",
    "bit_or",
    "xor",
    "bit_xor",
    "max",
    "min",
    "byte_max",
    "byte_min",
    "compare_and_clear",
    "append_if_fits",
    "set_versionstamped_value",
)

Record = tuple[float, list[bytes]]
"""When a transaction's commit was seen to succeed (``time.perf_counter()``) and its keys."""


def hottest_range_share(keys: Iterable[bytes], ranges: int = RANGES) -> float | None:
    """The largest range's share of the mutations in ``keys`` (one entry per mutation).

    The distinct keys, sorted, are cut into ``ranges`` ranges of equal key count (range ``i``
    holds the distinct keys ``i * D // ranges`` to ``(i + 1) * D // ranges`` of ``D``, so
    with fewer than ``ranges`` distinct keys each key is a range and some ranges are empty);
    each range's mutations are counted, and the largest count over all of them is returned.

    Args:
        keys: the key of every mutation, repeated as often as it was written.
        ranges: how many ranges to cut (a positive integer).

    Returns:
        A fraction in ``(0, 1]``; None when there is no mutation.

    Cost: O(M + D log D) for M mutations on D distinct keys.
    """
    counts = Counter(keys)
    if not counts:
        return None
    distinct = sorted(counts)
    total = sum(counts.values())
    # the first distinct key of each range; a key belongs to the last boundary at or below it
    boundaries = [distinct[(n * len(distinct)) // ranges] for n in range(ranges)]
    per_range: Counter[int] = Counter()
    for key, count in counts.items():
        per_range[bisect_right(boundaries, key) - 1] += count
    return max(per_range.values()) / total


class MutationRecorder:
    """Records the keys of the mutations of every transaction that committed through it.

    :meth:`wrap` a transaction when it is created; :meth:`share` gives the figure for a
    subspace and a window of time once the run is over.
    """

    def __init__(self) -> None:
        self.local = threading.local()
        self.lock = threading.Lock()
        self._lists: list[list[Record]] = []  # one per thread that committed

    def wrap(self, transaction: Any) -> RecordingTransaction:
        """``transaction`` with its mutations recorded here once it commits."""
        return RecordingTransaction(self, transaction)

    def add(self, keys: list[bytes]) -> None:
        """Record ``keys`` as committed now, in the calling thread's list. Cost: O(1)."""
        records: list[Record] | None = getattr(self.local, "records", None)
        if records is None:
            records = self.local.records = []
            with self.lock:
                self._lists.append(records)
        records.append((time.perf_counter(), keys))

    def keys(self, prefix: bytes, start: float, end: float) -> list[bytes]:
        """Every key recorded that starts with ``prefix``, from the commits seen between
        ``start`` and ``end`` (``time.perf_counter()`` instants, both included)."""
        with self.lock:
            lists = [list(records) for records in self._lists]
        return [
            key
            for records in lists
            for seen, keys in records
            if start <= seen <= end
            for key in keys
            if key.startswith(prefix)
        ]

    def share(self, prefix: bytes, start: float, end: float) -> float | None:
        """:func:`hottest_range_share` of the keys under ``prefix`` committed between
        ``start`` and ``end``; None when there were none."""
        return hottest_range_share(self.keys(prefix, start, end))


def _key_bytes(key: Any) -> bytes | None:
    if isinstance(key, bytes):
        return key
    as_key = getattr(key, "as_foundationdb_key", None)
    if callable(as_key):
        return bytes(as_key())
    return None


def _stamped(key: bytes, versionstamp: bytes) -> bytes:
    """A ``set_versionstamped_key``'s key with its versionstamp in place: the last 4 bytes
    are the little-endian offset of the 10 bytes the versionstamp replaces."""
    offset = int.from_bytes(key[-4:], "little")
    body = key[:-4]
    return body[:offset] + versionstamp + body[offset + 10 :]


class RecordingTransaction:
    """Forwards everything to the real transaction, noting the key of each mutation; a
    commit that succeeds hands them to the recorder."""

    def __init__(self, recorder: MutationRecorder, transaction: Any) -> None:
        self._recorder = recorder
        self._transaction = transaction
        self._keys: list[bytes] = []
        self._stamped: list[bytes] = []  # set_versionstamped_key keys, offsets included

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transaction, name)

    def __getitem__(self, key: Any) -> Any:
        return self._transaction[key]

    def _note(self, key: Any) -> None:
        noted = _key_bytes(key)
        if noted is not None:
            self._keys.append(noted)

    def set(self, key: Any, value: Any) -> None:
        self._note(key)
        self._transaction.set(key, value)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._note(key)
        self._transaction[key] = value

    def clear(self, key: Any) -> None:
        self._note(key)
        self._transaction.clear(key)

    def clear_range(self, begin: Any, end: Any) -> None:
        self._note(begin)
        self._transaction.clear_range(begin, end)

    def clear_range_startswith(self, prefix: Any) -> None:
        self._note(prefix)
        self._transaction.clear_range_startswith(prefix)

    def __delitem__(self, key: Any) -> None:
        self._note(key.start if isinstance(key, slice) else key)
        del self._transaction[key]

    def set_versionstamped_key(self, key: Any, param: Any) -> None:
        stamped = _key_bytes(key)
        if stamped is not None:
            self._stamped.append(stamped)
        self._transaction.set_versionstamped_key(key, param)

    def commit(self) -> Any:
        keys, stamped = self._keys, self._stamped
        self._keys, self._stamped = [], []
        versionstamp = self._transaction.get_versionstamp() if stamped else None
        return RecordedCommit(
            self._recorder, self._transaction.commit(), keys, stamped, versionstamp
        )

    def on_error(self, error: Any) -> Any:
        self._keys, self._stamped = [], []
        return self._transaction.on_error(error)

    def reset(self) -> None:
        self._keys, self._stamped = [], []
        self._transaction.reset()


def _atomic_operation(name: str) -> Any:
    def operation(self: RecordingTransaction, key: Any, param: Any) -> None:
        self._note(key)
        getattr(self._transaction, name)(key, param)

    operation.__name__ = name
    operation.__doc__ = f"Note ``key``, then the transaction's ``{name}``."
    return operation


for _name in ATOMIC_OPERATIONS:
    setattr(RecordingTransaction, _name, _atomic_operation(_name))


class RecordedCommit:
    """A commit future whose ``wait``, once the commit succeeded, records its keys (the
    versionstamped ones resolved)."""

    def __init__(
        self,
        recorder: MutationRecorder,
        future: Any,
        keys: list[bytes],
        stamped: list[bytes],
        versionstamp: Any,
    ) -> None:
        self._recorder = recorder
        self._future = future
        self._keys = keys
        self._stamped = stamped
        self._versionstamp = versionstamp
        self._recorded = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._future, name)

    def wait(self) -> Any:
        result = self._future.wait()  # raises when the commit failed: nothing recorded
        if self._recorded or not (self._keys or self._stamped):
            return result
        self._recorded = True
        keys = self._keys
        if self._stamped:
            stamp = bytes(self._versionstamp.wait())
            keys = keys + [_stamped(key, stamp) for key in self._stamped]
        self._recorder.add(keys)
        return result
