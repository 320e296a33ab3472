"""The write path of a transaction: ``set``, ``clear``, ``clear_range`` and atomic operations,
the mutations and write conflict ranges they record, and the errors they defer.

Upstream rules: ``ReadYourWritesTransaction`` (``fdbclient/ReadYourWrites.cpp``): each write
goes to the write map (:mod:`fdbqueue.memory._writes`) and fires the transaction's own watches
of the keys it changes (``triggerWatches``); ``clear`` ignores keys over
``getMaxClearKeySize``; ``next_write_no_write_conflict_range`` drops the next write's
conflict range. The binding's ``ThreadSafeTransaction`` (``fdbclient/ThreadSafeTransaction.cpp``)
turns the errors of these void calls into a deferred error reported by the next read or commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fdbqueue.memory._access import SYSTEM_KEYS, KeyAccess, max_key_bytes
from fdbqueue.memory._conflicts import ConflictRanges
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._keys import key_after, to_key, to_value
from fdbqueue.memory._lifecycle import Lifecycle
from fdbqueue.memory._size import MUTATION_BYTES
from fdbqueue.memory._storage import Range
from fdbqueue.memory._watches import PendingWatches
from fdbqueue.memory._writes import WriteMap

if TYPE_CHECKING:
    from fdbqueue.memory._options import TransactionOptions

__all__ = ["Mutation", "Mutations"]

Mutation = tuple[Any, ...]  # ("set", key, value), ("clear", begin, end), ("atomic", op, key, p)


class Mutations:
    """The writes of one attempt of a transaction (a retry starts afresh)."""

    def __init__(
        self,
        access: KeyAccess,
        lifecycle: Lifecycle,
        options: TransactionOptions,
        writes: WriteMap,
        conflicts: ConflictRanges,
        watches: PendingWatches,
    ) -> None:
        self._access = access
        self._lifecycle = lifecycle
        self._options = options
        self._writes = writes
        self._conflicts = conflicts
        self._watches = watches
        self.mutations: list[Mutation] = []  # in order, for the commit
        self._stamped_count = 0  # versionstamped operations: never merged, each sent once
        self._stamped_bytes = 0

    def size(self) -> int:
        """What the mutations add to the size: the sets, clears and atomic operations merged
        as upstream's write map merges them (:meth:`WriteMap.mutation_bytes`), and each
        versionstamped operation."""
        return self._writes.mutation_bytes() + self._stamped_bytes

    def written(self) -> tuple[int, int]:
        """The mutations a commit sends and their bytes, as upstream counts a committed
        transaction's ``CommittedMutations`` and ``CommittedMutationBytes``
        (``mutations.expectedSize()``: 40 bytes a mutation plus its two parameters; see
        :mod:`fdbqueue.memory._size`). Cost: O(1) until a clear, then once O(keys written in
        the cleared ranges)."""
        return self._writes.mutation_count() + self._stamped_count, self.size()

    def stamped(self, mutation: Mutation, write_range: Range | None) -> None:
        """Record a versionstamped operation ``(kind, key, param)`` and count its mutation;
        its write conflict range ``write_range`` (None: a versionstamped key's, which the
        commit adds)."""
        self._stamped_count += 1
        self._stamped_bytes += MUTATION_BYTES + len(mutation[1]) + len(mutation[2])
        if write_range is None:
            self.mutations.append(mutation)
        else:
            self.record(mutation, write_range)

    def record(self, mutation: Mutation, write_range: Range) -> None:
        """Record ``mutation`` and its write conflict range, unless
        ``next_write_no_write_conflict_range`` was set for it."""
        self.mutations.append(mutation)
        if self._options.take_no_write_conflict():
            return  # next_write_no_write_conflict_range
        self._conflicts.add_write(*write_range)

    def set(self, key: Any, value: Any) -> None:
        """``set``: errors deferred, nothing raised."""
        key, value = to_key(key), to_value(value)
        if self._lifecycle.dropped_write():
            return
        error = self._access.write_error(key, value)
        if error is not None:
            self._lifecycle.defer(error)
            return
        self._writes.set(key, value)
        self.record(("set", key, value), (key, key_after(key)))
        self._watches.changed(key, key_after(key), value)

    def clear(self, key: Any) -> None:
        """``clear`` of a key (a KeySelector already resolved by the caller)."""
        key = to_key(key)
        if self._lifecycle.dropped_write():
            return
        if key >= SYSTEM_KEYS and not self._access.writes_system:
            self._lifecycle.defer(FDBError(2004))
            return
        if len(key) <= max_key_bytes(key):
            self._clear_keys(key, key_after(key))

    def clear_range(self, begin: Any, end: Any) -> None:
        """``clear_range`` (KeySelectors already resolved by the caller; None: the ends)."""
        begin_key = b"" if begin is None else to_key(begin)
        end_key = SYSTEM_KEYS if end is None else to_key(end)
        if self._lifecycle.dropped_write():
            return
        top = self._access.write_top()
        if begin_key > end_key:
            self._lifecycle.defer(FDBError(2005))
        elif end_key > top or begin_key > top:
            self._lifecycle.defer(FDBError(2004))
        elif begin_key < end_key:
            self._clear_keys(begin_key, end_key)

    def _clear_keys(self, begin: bytes, end: bytes) -> None:
        self._writes.clear_range(begin, end)
        self.record(("clear", begin, end), (begin, end))
        self._watches.changed(begin, end, None)

    def atomic(self, operation: str, key: Any, param: Any) -> None:
        """An atomic operation (``add``, ``bit_or``, ...): errors deferred."""
        key, param = to_key(key), to_value(param)
        if self._lifecycle.dropped_write():
            return
        error = self._access.write_error(key, param)
        if error is not None:
            self._lifecycle.defer(error)
            return
        self._writes.atomic(operation, key, param)
        self.record(("atomic", operation, key, param), (key, key_after(key)))
        self._watches.changed(key, key_after(key), known=False)

    def add_write_conflict_range(self, begin: Any, end: Any) -> None:
        """``add_write_conflict_range``: checked as :meth:`ConflictRanges.requested_span`,
        keys from ``b"\\xff"`` on needing ``access_system_keys``."""
        span = self._conflicts.requested_span(begin, end, self._access.write_top())
        if span is not None:
            self._conflicts.add_write(*span)
