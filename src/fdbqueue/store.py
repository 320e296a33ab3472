"""The key-value mechanics that :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` share.

Key layout of a queue whose subspace has the prefix ``P`` (bytes)::

    P + pack(item key tuple)   -> encoded value     items: inside subspace.range()
    P + b"\\xff" + pack(("size",)) -> int64 LE      the size counter (atomic add)
    P + b"\\xff" + pack(("signal",)) -> int64 LE    bumped by every enqueue, for blocked consumers
    P + b"\\xff" + pack(("requests"|"results"|"turn", ...))  high-contention staging
    P + b"\\xff" + pack(("receipts", ...))   exactly-once receipts (fdbqueue.receipts)

Items live exactly where FoundationDB's recipes put them, so ``subspace.range()`` holds items
and nothing else. Everything else the library keeps lives under ``P + b"\\xff"``: that byte
never starts a tuple-layer element, so it sorts after every item and lies outside
``subspace.range()`` (which ends at ``P + b"\\xff"``, exclusive), yet still inside the queue's
prefix, so ``clear_range_startswith(P)`` removes a queue completely.

Source followed: FoundationDB's "Queues" and "Priority Queues" recipes (key layout, first/last
item by ``limit=1`` range reads), and ``fdb/subspace_impl.py`` (subspaces).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue.codecs import Codec, encode_value, resolve_codec
from fdbqueue.receipts import Receipts
from fdbqueue.transactional import TransactionContext, require_writable, transactional

__all__ = [
    "MAX_KEY_BYTES",
    "RANDOM_BYTES",
    "ItemStore",
    "StoredQueue",
    "as_subspace",
    "check_count",
]

#: FoundationDB's limit on the size of a key, in bytes (error 2102 ``key_too_large``).
MAX_KEY_BYTES = 10_000
#: FoundationDB's limit on the bytes one transaction may write and read-conflict on (2101).
MAX_TRANSACTION_BYTES = 10_000_000
#: Length of the random element that makes concurrently written item keys unique, as in the
#: recipes (``os.urandom(20)``).
RANDOM_BYTES = 20
#: The byte that separates a queue's metadata from its items (see the module docstring).
METADATA_MARKER = b"\xff"

_COUNTER = struct.Struct("<q")


def as_subspace(subspace: Any) -> Subspace:
    """Return ``subspace`` as a Subspace: a Subspace (or DirectorySubspace) or a tuple prefix.

    Raises:
        TypeError: neither a Subspace nor a tuple.
        ValueError: the prefix is empty (the queue would claim the whole database, and its
            metadata would fall into FoundationDB's system keys), or the tuple cannot be packed.
    """
    if isinstance(subspace, tuple):
        try:
            subspace = Subspace(subspace)
        except (TypeError, ValueError) as error:
            raise ValueError(f"cannot pack the subspace prefix {subspace!r}: {error}") from None
    elif not (
        callable(getattr(subspace, "key", None)) and callable(getattr(subspace, "pack", None))
    ):
        raise TypeError(
            f"a queue needs a Subspace, a DirectorySubspace or a tuple prefix, "
            f"not {type(subspace).__name__}"
        )
    if not subspace.key():
        raise ValueError("a queue needs a subspace with a non-empty prefix")
    return subspace


def check_count(n: Any, name: str = "n") -> None:
    """Raise TypeError unless ``n`` is an int (not a bool), ValueError if it is negative."""
    if type(n) is bool or not isinstance(n, int):
        raise TypeError(f"{name} must be an int, not {type(n).__name__}")
    if n < 0:
        raise ValueError(f"{name} must be >= 0, not {n}")


def random_element() -> bytes:
    """Return the random element of a new item key: :data:`RANDOM_BYTES` bytes from os.urandom."""
    return os.urandom(RANDOM_BYTES)


class ItemStore:
    """Items, their values and the size counter of one queue, in one subspace.

    Args:
        subspace: where the items live (see :func:`as_subspace`).
        codec: ``"tuple"``, ``"raw"`` or a codec object (see :mod:`fdbqueue.codecs`).
        exactly_once: write receipts so that operations given a Database take effect once
            even when a commit's result is unknown (:mod:`fdbqueue.receipts`).

    Raises:
        TypeError: ``exactly_once`` is not a bool (and see :func:`as_subspace`).
    """

    def __init__(self, subspace: Any, codec: str | Codec, exactly_once: bool = True) -> None:
        self.subspace: Subspace = as_subspace(subspace)
        self.codec: Codec = resolve_codec(codec)
        items = self.subspace.range()
        self.begin: bytes = items.start
        self.end: bytes = items.stop
        self.metadata = Subspace((), self.subspace.key() + METADATA_MARKER)
        self.size_key: bytes = self.metadata.pack(("size",))
        self.signal_key: bytes = self.metadata.pack(("signal",))
        if not isinstance(exactly_once, bool):
            raise TypeError(f"exactly_once must be a bool, not {type(exactly_once).__name__}")
        self.receipts = Receipts(self.metadata, enabled=exactly_once)

    # -- values -----------------------------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        """Encode and check one value (see :func:`fdbqueue.codecs.encode_value`)."""
        return encode_value(self.codec, value)

    def encode_many(self, values: Any) -> list[bytes]:
        """Encode and check every value of an iterable before anything is written.

        Raises:
            TypeError: ``values`` is not iterable (a str or bytes counts as one value, and is
                refused here to avoid enqueuing it character by character), or a value cannot
                be encoded.
            ValueError: a value is None or too large, or the batch alone exceeds
                FoundationDB's transaction size limit (10,000,000 bytes).
        """
        if isinstance(values, (str, bytes, bytearray, memoryview)):
            raise TypeError("values must be an iterable of values, not a single str or bytes")
        try:
            iterator = iter(values)
        except TypeError:
            raise TypeError(f"values must be iterable, not {type(values).__name__}") from None
        encoded = [self.encode(value) for value in iterator]
        total = sum(len(value) + len(self.begin) + 32 for value in encoded)
        if total > MAX_TRANSACTION_BYTES:
            raise ValueError(
                f"the batch is about {total:,} bytes; one FoundationDB transaction holds at most "
                f"{MAX_TRANSACTION_BYTES:,} bytes: enqueue it in smaller batches"
            )
        return encoded

    def decode(self, data: Any) -> Any:
        """Decode a stored value (bytes, or the binding's bytes-like Value)."""
        return self.codec.decode(bytes(data))

    # -- keys -------------------------------------------------------------------------------

    def item_key(self, position: tuple[Any, ...]) -> bytes:
        """Return the key ``subspace.pack(position + (random element,))`` for a new item.

        Raises:
            ValueError: the key would exceed FoundationDB's 10,000-byte key limit, or an
                element of ``position`` is out of the tuple layer's range.
        """
        try:
            key: bytes = self.subspace.pack((*position, random_element()))
        except (ValueError, struct.error) as error:  # struct.error: int beyond 255 bytes
            raise ValueError(f"cannot make an item key from {position!r}: {error}") from None
        if len(key) > MAX_KEY_BYTES:
            raise ValueError(
                f"item key would be {len(key):,} bytes; FoundationDB's key size limit is "
                f"{MAX_KEY_BYTES:,} bytes (shorten the subspace prefix)"
            )
        return key

    def unpack_position(self, key: bytes) -> tuple[Any, ...]:
        """Return the tuple an item key packs, without the subspace prefix.

        Raises:
            ValueError: the key is not a well-formed item key of this queue, i.e. the subspace
                holds data that is not a queue's.
        """
        try:
            position: tuple[Any, ...] = self.subspace.unpack(key)
        except Exception as error:  # the tuple layer raises several types on bad input
            raise ValueError(
                f"key {key!r} in the queue's subspace is not an item: {error}"
            ) from None
        if not position or type(position[0]) is not int:
            raise ValueError(
                f"key {key!r} in the queue's subspace is not an item (it should start "
                "with an integer)"
            )
        return position

    # -- reads and writes -------------------------------------------------------------------

    def read(
        self,
        tr: TransactionContext,
        begin: bytes | None = None,
        end: bytes | None = None,
        *,
        limit: int = 1,
        reverse: bool = False,
        snapshot: bool = False,
    ) -> list[Any]:
        """Return up to ``limit`` items of ``[begin, end)`` (default: all items) as KeyValues.

        Cost: one range read. A non-snapshot read adds a read conflict range covering only
        what it read: up to just past the last item returned (forward) or from the first
        item returned (reverse), or the whole range when fewer than ``limit`` items exist.
        """
        reader: Any = getattr(tr, "snapshot", tr) if snapshot else tr
        return list(
            reader.get_range(
                self.begin if begin is None else begin,
                self.end if end is None else end,
                limit=limit,
                reverse=reverse,
            )
        )

    def add_read_conflict_range(self, tr: TransactionContext, begin: bytes, end: bytes) -> None:
        """Add ``[begin, end)`` as a read conflict range; nothing for a snapshot view.

        A snapshot view (``tr.snapshot``) has no conflict ranges to add to: reading through
        one means the caller chose not to conflict.
        """
        add = getattr(tr, "add_read_conflict_range", None)
        if add is not None:
            add(begin, end)

    def write(self, tr: TransactionContext, key: bytes, encoded: bytes) -> None:
        """Write one item, count it and signal blocked consumers.

        Cost: one set and two atomic adds (size counter, signal key); no reads.
        """
        tr[key] = encoded
        self.add_to_size(tr, 1)
        tr.add(self.signal_key, _COUNTER.pack(1))

    def restore(self, tr: TransactionContext, key: bytes, encoded: bytes) -> None:
        """Put an item back at its original key (see :mod:`fdbqueue.staging`)."""
        self.write(tr, key, encoded)

    def take(self, tr: TransactionContext, limit: int) -> list[Any]:
        """Read and clear up to ``limit`` items from the front; return their KeyValues.

        The size counter is not changed (the caller decides where the items go). Cost: one
        range read (conflict range up to just past the last item taken), one clear per item.
        """
        items = self.read(tr, limit=limit)
        for item in items:
            del tr[item.key]
        return items

    def remove(self, tr: TransactionContext, items: Sequence[Any]) -> list[Any]:
        """Clear ``items`` (KeyValues read in this transaction) and return their decoded values.

        Cost: one clear per item and one atomic add; no reads.
        """
        if items:
            require_writable(tr, "removing items")
        for item in items:
            del tr[item.key]
        if items:
            self.add_to_size(tr, -len(items))
        return [self.decode(item.value) for item in items]

    def add_to_size(self, tr: TransactionContext, delta: int) -> None:
        """Add ``delta`` to the size counter with an atomic add (no read, no read conflict)."""
        tr.add(self.size_key, _COUNTER.pack(delta))

    def size(self, tr: TransactionContext) -> int:
        """Return the size counter, never below zero. Cost: one point read of one key."""
        raw = tr.get(self.size_key)
        if not raw.present():
            return 0
        return max(0, int(_COUNTER.unpack(bytes(raw))[0]))

    def clear(self, tr: TransactionContext) -> None:
        """Remove every item and all metadata. Cost: one range clear, no reads."""
        require_writable(tr, "clear")
        tr.clear_range_startswith(self.subspace.key())


class StoredQueue:
    """What every queue type shares: its store, and ``subspace``, ``codec``, ``size``,
    ``empty`` and ``clear``, which act on the whole subspace whatever the item layout."""

    _store: ItemStore

    @property
    def subspace(self) -> Subspace:
        """The Subspace whose ``range()`` holds the items."""
        return self._store.subspace

    @property
    def codec(self) -> Codec:
        """The codec that encodes and decodes values."""
        return self._store.codec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store.subspace!r}, codec={self._store.codec!r})"

    @transactional
    def empty(self, tr: TransactionContext) -> bool:
        """Return True when the queue holds no item.

        Exact, whatever wrote the items. Cost: one range read (``limit=1``) whose read
        conflict range covers the start of the queue up to just past its first item (the whole
        item range when empty).
        """
        return not self._store.read(tr, limit=1)

    @transactional
    def size(self, tr: TransactionContext) -> int:
        """Return the number of items, from a counter that enqueue/push and dequeue/pop keep.

        The counter changes by atomic adds, so keeping it adds no conflicts. It is exact for
        items that fdbqueue wrote and removed; items written or removed by other code (such as
        FoundationDB's recipes) are not counted, and the result is never below 0. Use
        :meth:`empty` for an exact emptiness test.

        Cost: one point read. Inside your own transaction that read adds a read conflict on
        the counter, so your transaction conflicts with any enqueue or dequeue that commits
        first; pass ``tr.snapshot`` to read the size without that conflict.
        """
        return self._store.size(tr)

    @transactional
    def peek_many(self, tr: TransactionContext, n: int) -> list[Any]:
        """Return up to ``n`` values from the front, in key order, without removing them: a
        Queue's next ``n`` items, a PriorityQueue's next ``n`` of :meth:`pop_min`.

        Raises:
            TypeError, ValueError: ``n`` is not an int >= 0.

        Cost: one range read (``limit=n``); as a snapshot read it adds no conflict range.
        """
        check_count(n)
        items = self._store.read(tr, limit=n, snapshot=True) if n else []
        return [self._store.decode(item.value) for item in items]

    @transactional
    def pending_requests(self, tr: TransactionContext, limit: int = 10_000) -> int:
        """Return how many high-contention requests wait to be served (at most ``limit``;
        0 for a queue without ``high_contention``).

        Cost: one snapshot range read of up to ``limit`` keys; no conflicts.
        """
        check_count(limit, "limit")
        requests = self._store.metadata.range(("requests",))
        reader: Any = getattr(tr, "snapshot", tr)  # a snapshot view has no .snapshot
        return len(list(reader.get_range(requests.start, requests.stop, limit=limit)))

    @transactional
    def clear(self, tr: TransactionContext) -> None:
        """Remove every item, the counters and any high-contention requests and results.

        Cost: one range clear (``clear_range_startswith`` of the subspace prefix); no reads,
        so it never conflicts, but concurrent consumers that read the cleared items do.
        """
        self._store.clear(tr)
