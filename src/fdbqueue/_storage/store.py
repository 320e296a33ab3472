"""The key-value mechanics that :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` share.

Key layout of a queue whose subspace has the prefix ``P`` (bytes)::

    P + pack(item key tuple)            -> encoded value   items: inside subspace.range()
    P + b"\\xff" + pack(("size",))       -> int64 LE        the size counter (atomic add)
    P + b"\\xff" + pack(("enqueued",))   -> int64 LE        items enqueued (atomic add)
    P + b"\\xff" + pack(("signal",))     -> int64 LE        bumped by every enqueue, for waiters
    P + b"\\xff" + pack(("held", ...))   leased and dead-lettered values (fdbqueue._storage.held)
    P + b"\\xff" + pack(("leases"|"dead", ...))              leases, dead letters
    P + b"\\xff" + pack(("line", end)) + stamp ...       consumer sessions' requests
    P + b"\\xff" + pack(("receipts", ...))                   exactly-once receipts
    P + b"\\xff" + pack(("deduplication", ...))              ids of idempotent enqueues
    P + b"\\xff" + pack(("grouped"|"group"|"turns"|"groups", ...))  message groups
    P + b"\\xff" + pack(("began", ...))     -> float64 LE    when position buckets began
    P + b"\\xff" + pack(("schedules", name))                periodic jobs (_delivery.schedules)
    P + b"\\xff" + pack(("workers", id))    the live worker loops (fdbqueue._delivery.workers)
    P + b"\\xff" + pack(("paused",))      -> b""           present while paused (_storage.pause)

Items live exactly where FoundationDB's recipes put them, so ``subspace.range()`` holds items
and nothing else. Everything else the library keeps lives under ``P + b"\\xff"``: that byte
never starts a tuple-layer element, so it sorts after every item and lies outside
``subspace.range()`` (which ends at ``P + b"\\xff"``, exclusive), yet still inside the queue's
prefix.

The enqueue counter counts the items enqueued (and pushed) since the queue was created or
last cleared: every enqueue adds the number of its items with one atomic add per shard
written (:meth:`ItemStore.add_to_enqueued`), delayed ones when enqueued, requeued dead
letters when requeued (as dead letters they had left the queue); a delayed item falling due,
and items moved between shards, are not counted again. Taking items does not change it.
With the items still held it gives the rate of items taken (the dashboard's rates,
:mod:`fdbqueue.dashboard`).

:meth:`ItemStore.clear` removes all of it but the receipts, which operations still in
flight may need (:mod:`fdbqueue._transactions.receipts`), the deduplication records, which
producers retrying an enqueue may (:mod:`fdbqueue._delivery.deduplication`), the
schedules, which say what to enqueue rather than what is queued
(:mod:`fdbqueue._delivery.schedules`), and the paused key, which says what consumers may do
(:mod:`fdbqueue._storage.pause`).

Taking items from an end, with its checks of keys and values, is :mod:`fdbqueue._storage.taking`;
what a shard builds on this store is :mod:`fdbqueue._queues.shard`.

Source followed: FoundationDB's "Queues" and "Priority Queues" recipes (key layout, first/last
item by ``limit=1`` range reads), and ``fdb/subspace_impl.py`` (subspaces).
"""

from __future__ import annotations

import functools
import logging
import os
import struct
from collections.abc import Callable
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue import _keycodec, metrics
from fdbqueue._checks import check_flag
from fdbqueue._keys import MAX_KEY_BYTES, describe_key
from fdbqueue._storage.ages import ItemAges
from fdbqueue._storage.dead_letters import DeadLetters
from fdbqueue._storage.features import ALL, JOBS, FeatureRecord
from fdbqueue._storage.groups import Groups
from fdbqueue._storage.held import HeldValues
from fdbqueue._storage.job_records import (
    JOB_PREFIX_BYTES,
    job_element,
    job_header,
    job_of,
    job_of_element,
    strip_job_header,
)
from fdbqueue._storage.jobs import RESULT_TTL, Jobs
from fdbqueue._storage.pause import Pause
from fdbqueue._storage.transaction_bytes import MAX_TRANSACTION_BYTES, set_bytes
from fdbqueue._storage.type_records import TypeRecords, type_name
from fdbqueue._transactions.receipts import Receipts
from fdbqueue._transactions.transactional import AnyContext, require_writable
from fdbqueue._wording import describe_error
from fdbqueue.codecs import MAX_VALUE_BYTES, Codec, RawCodec, encode_value, resolve_codec

__all__ = [
    "COUNTER",
    "LONGEST_METADATA_SUFFIX",
    "MAX_KEY_BYTES",
    "RANDOM_BYTES",
    "ItemStore",
    "anything_stored",
    "as_subspace",
    "count_keys",
    "metadata_subspace",
]

#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.store")

#: Length of the random element that makes concurrently written item keys unique, as in the
#: recipes (``os.urandom(20)``).
RANDOM_BYTES = 20
#: The byte that separates a queue's metadata from its items (see the module docstring).
METADATA_MARKER = b"\xff"
#: The most bytes fdbqueue appends to a subspace prefix for any key it writes (an item key of
#: a Queue, or a metadata key); a longer prefix is refused when the queue is made. (A priority
#: queue's item keys also hold the priority, checked on each push.)
LONGEST_METADATA_SUFFIX = 128
#: Bytes a worst-case item key adds to the prefix: a 9-byte index, and 20 random bytes that
#: the tuple layer escapes to at most 40.
ITEM_KEY_SUFFIX = 1 + 9 + 1 + 2 * RANDOM_BYTES + 1
#: Bytes fdbqueue's own writes beside a batch can add to a transaction (receipt, the finished
#: receipts it clears, counters, conflict ranges), kept free when a batch is checked.
RESERVED_TRANSACTION_BYTES = 64_000

#: How counters (the size, the enqueue counter, the signal key) are stored: a little-endian
#: 64-bit integer, as FoundationDB's atomic add takes it.
COUNTER = struct.Struct("<q")
_ONE = COUNTER.pack(1)
_MINUS_ONE = COUNTER.pack(-1)

_Unpack = Callable[[bytes, bytes, _keycodec.Other], tuple[Any, ...]]
#: How the item keys of a queue type are packed and read, by its ``leading_integers``: its
#: position's integers, then the random element (a Queue's ``(index, random)``, a
#: PriorityQueue's ``(priority, count, random)``), by the key codec, byte for byte as the tuple
#: layer packs and reads them (:mod:`fdbqueue._keycodec`).
ITEM_KEY_CODEC: dict[int, tuple[Callable[..., bytes], _Unpack]] = {
    1: (_keycodec.pack_int_bytes, _keycodec.unpack_int_bytes),
    2: (_keycodec.pack_int_int_bytes, _keycodec.unpack_int_int_bytes),
}


def as_subspace(subspace: Any) -> Subspace:
    """Return ``subspace`` as a Subspace: a Subspace (or DirectorySubspace) or a tuple prefix.

    Raises:
        TypeError: neither a Subspace nor a tuple.
        ValueError: the prefix is empty (the queue would claim the whole database, and its
            metadata would fall into FoundationDB's system keys), longer than
            ``MAX_KEY_BYTES - LONGEST_METADATA_SUFFIX`` (9,872) bytes (the keys fdbqueue
            derives from it would exceed FoundationDB's 10,000-byte key limit), or the tuple
            cannot be packed.
    """
    if isinstance(subspace, tuple):
        try:
            subspace = Subspace(subspace)
        except (TypeError, ValueError, OverflowError, struct.error) as error:
            raise ValueError(f"cannot pack the subspace prefix {subspace!r}: {error}") from None
    elif not (
        callable(getattr(subspace, "key", None)) and callable(getattr(subspace, "pack", None))
    ):
        raise TypeError(
            f"a queue needs a Subspace, a DirectorySubspace or a tuple prefix, "
            f"not {type(subspace).__name__}"
        )
    prefix = subspace.key()
    if not prefix:
        raise ValueError("a queue needs a subspace with a non-empty prefix")
    if len(prefix) > MAX_KEY_BYTES - LONGEST_METADATA_SUFFIX:
        raise ValueError(
            f"the subspace prefix is {len(prefix):,} bytes; fdbqueue derives keys up to "
            f"{LONGEST_METADATA_SUFFIX} bytes longer, and FoundationDB's key limit is "
            f"{MAX_KEY_BYTES:,} bytes: use a prefix of at most "
            f"{MAX_KEY_BYTES - LONGEST_METADATA_SUFFIX:,} bytes"
        )
    if prefix.startswith(b"\xff"):
        raise ValueError("a queue's subspace prefix cannot start with 0xff (system keys)")
    return subspace


def metadata_subspace(subspace: Subspace) -> Subspace:
    """The subspace of the metadata of the queue (or shard) whose items live in ``subspace``:
    its prefix followed by :data:`METADATA_MARKER` (see the module docstring)."""
    return Subspace((), subspace.key() + METADATA_MARKER)


def random_element() -> bytes:
    """Return the random element of a new item key: :data:`RANDOM_BYTES` bytes from os.urandom."""
    return os.urandom(RANDOM_BYTES)


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (``prefix`` does not start
    with 0xff, so this exists)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def anything_stored(tr: Any, subspace: Subspace) -> bool:
    """Whether any key starts with ``subspace``'s prefix: a queue's items or any of its
    records (counters, type records, receipts). False for a queue nothing was ever written
    to, usually a mistyped name: what the command line and the dashboard call a queue that
    does not exist. ``tr``: a Transaction (or a Database's, in a retry loop). Cost: one
    snapshot range read (``limit=1``); no conflicts."""
    prefix: bytes = subspace.key()
    return bool(list(tr.snapshot.get_range(prefix, prefix_end(prefix), limit=1)))


class ItemStore(TypeRecords):
    """Items, their values, the size and enqueue counters, and the held values and dead
    letters of one queue.

    Args:
        subspace: where the items live (see :func:`as_subspace`).
        codec: ``"tuple"``, ``"raw"`` or a codec object (see :mod:`fdbqueue.codecs`).
        exactly_once: write receipts so that operations given a Database take effect once
            even when a commit's outcome is unknown (:mod:`fdbqueue._transactions.receipts`).
        leading_integers: how many integers start every item key of this queue type (1 for a
            Queue: ``(index, random)``; 2 for a PriorityQueue: ``(priority, count, random)``).
        shards: how many shards the queue has; recorded with its type (:func:`type_name`).
        parent: for one shard of a sharded queue, the queue's own store: the first write into
            this shard also checks and records the queue's type there (:meth:`check_type`).
        shard: for one shard of a sharded queue, its number (0 to ``shards - 1``): its metrics
            carry the queue's name and ``fdbqueue.shard``.

    Raises:
        TypeError: ``exactly_once`` is not a bool (and see :func:`as_subspace`).
    """

    def __init__(
        self,
        subspace: Any,
        codec: str | Codec[Any],
        exactly_once: bool = True,
        leading_integers: int = 1,
        shards: int = 1,
        parent: ItemStore | None = None,
        shard: int | None = None,
    ) -> None:
        self.subspace: Subspace = as_subspace(subspace)
        self.codec: Codec[Any] = resolve_codec(codec)
        #: whether a value is its stored bytes (the ``raw`` codec's rule, exactly
        #: :class:`~fdbqueue.codecs.RawCodec`): :meth:`decode` then calls no codec
        self.stores_bytes_as_is = type(self.codec) is RawCodec
        self.leading_integers = leading_integers
        #: the subspace's raw prefix ``P``
        self.prefix: bytes = self.subspace.key()
        self._pack_item, self._unpack_item = ITEM_KEY_CODEC[leading_integers]
        self._leading_types = (int,) * leading_integers  # what an item key starts with
        items = self.subspace.range()
        self.begin: bytes = items.start
        self.end: bytes = items.stop
        self.metadata = metadata_subspace(self.subspace)
        #: the queue's ``fdbqueue.queue`` attribute in metrics (:mod:`fdbqueue.metrics`), and
        #: its name in log records: a shard's is its queue's
        self.metric_name: str = (
            parent.metric_name if parent else metrics.queue_name(self.subspace.key())
        )
        #: the attributes of its counts: ``queue``, and a shard's ``shard`` (its number)
        self.metric_attributes: dict[str, Any] = {"queue": self.metric_name}
        if shard is not None:
            self.metric_attributes["shard"] = shard
        self.type_name = type_name(leading_integers, shards)
        self.parent = parent
        self.type_key: bytes = self.metadata.pack(("type",))
        self.codec_key: bytes = self.metadata.pack(("codec",))
        self._codec_verified = False  # this codec was found on record (see recorded_codec)
        name = getattr(self.codec, "name", None)
        #: the codec's name recorded with the queue (None: a codec without one, unchecked)
        self.codec_name: bytes | None = name.encode() if isinstance(name, str) and name else None
        #: the queue's feature record (fdbqueue._storage.features): its type, codec and the
        #: features it used; one for all the shards of a sharded queue
        self.features: FeatureRecord = (
            parent.features
            if parent is not None
            else FeatureRecord(self.metadata, self.type_name + b"\x00" + (self.codec_name or b""))
        )
        self.size_key: bytes = self.metadata.pack(("size",))
        #: the enqueue counter: items enqueued since the queue was created or last cleared
        self.enqueued_key: bytes = self.metadata.pack(("enqueued",))
        self.signal_key: bytes = self.metadata.pack(("signal",))
        self.receipts = Receipts(self.metadata, enabled=check_flag(exactly_once, "exactly_once"))
        #: where idempotent enqueues record their ids (fdbqueue._delivery.deduplication)
        self.deduplication = self.metadata.subspace(("deduplication",))
        #: where periodic jobs record their schedules (fdbqueue._delivery.schedules)
        self.schedules = self.metadata.subspace(("schedules",))
        self.held = HeldValues(self.metadata)
        self.dead_letters = DeadLetters(self.metadata, self.codec, self.held)
        #: message groups (fdbqueue._storage.groups)
        self.groups = Groups(self)
        self._grouped: bytes = self.groups.items.key()  # the groups' items' prefix
        #: the queue's job records (fdbqueue._storage.jobs): one set for all its shards
        self.jobs: Jobs = parent.jobs if parent is not None else Jobs(self.metadata, RESULT_TTL)
        #: when ranges of positions began: the age of the oldest item (fdbqueue._storage.ages)
        self.ages = ItemAges(self.metadata, self.subspace, leading_integers)
        #: whether consumers are paused (fdbqueue._storage.pause): the queue's own key, one
        #: object for all the shards of a sharded queue
        self.pause: Pause = (
            parent.pause if parent is not None else Pause(self.metadata, self.features)
        )

    # -- values -----------------------------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        """Encode and check one value (see :func:`fdbqueue.codecs.encode_value`). Cost: for a
        ``raw`` queue's ``bytes`` within :data:`~fdbqueue.codecs.MAX_VALUE_BYTES`, which are
        their own encoding, the two checks and no call."""
        if self.stores_bytes_as_is and type(value) is bytes and len(value) <= MAX_VALUE_BYTES:
            return value  # (encode_value's answer, without its calls)
        return encode_value(self.codec, value)

    def encode_many(self, values: Any) -> list[bytes]:
        """Encode and check every value of an iterable before anything is written.

        Raises:
            TypeError: ``values`` is not iterable (a str or bytes counts as one value, and is
                refused here to avoid enqueuing it character by character), or a value cannot
                be encoded.
            ValueError: a value is None or too large.
        """
        if isinstance(values, (str, bytes, bytearray, memoryview)):
            raise TypeError("values must be an iterable of values, not a single str or bytes")
        try:
            iterator = iter(values)
        except TypeError:
            raise TypeError(f"values must be iterable, not {type(values).__name__}") from None
        return [self.encode(value) for value in iterator]

    def check_batch_fits(self, encoded: list[bytes], key_suffix: int | None = None) -> None:
        """Raise ValueError unless one transaction can enqueue all of ``encoded``.

        Counts what FoundationDB will count (:mod:`fdbqueue._storage.transaction_bytes`): per item a
        set of a worst-case item key (the prefix plus ``key_suffix`` bytes; None: a Queue's,
        :data:`ITEM_KEY_SUFFIX`) with its write conflict range, plus the counters and the
        receipt, kept free in :data:`RESERVED_TRANSACTION_BYTES`.
        """
        suffix = ITEM_KEY_SUFFIX if key_suffix is None else key_suffix
        key_length = len(self.subspace.key()) + suffix
        total = sum(set_bytes(key_length, len(value)) for value in encoded)
        limit = MAX_TRANSACTION_BYTES - RESERVED_TRANSACTION_BYTES
        if total > limit:
            raise ValueError(
                f"the batch is {len(encoded):,} items and about {total:,} bytes as FoundationDB "
                f"counts a transaction (each set also costs about 40 bytes and a write conflict "
                f"range); one transaction holds at most {MAX_TRANSACTION_BYTES:,} bytes, of "
                f"which {limit:,} are left for the items: enqueue it in smaller batches"
            )

    def decode(self, data: Any, bits: int = ALL) -> Any:
        """Decode a stored value (bytes, or the binding's bytes-like Value) for delivery:
        every take, claim and peek decodes through here. ``bits``: the features the queue
        used, as its feature record showed them in this transaction
        (:mod:`fdbqueue._storage.features`; :data:`~fdbqueue._storage.features.ALL` when
        not read): only a queue that used jobs has a job's header to strip, so a queue that
        never did delivers every value exactly as it was enqueued, whatever its first bytes.

        Raises:
            ValueError: the value decodes to None (another program's item, such as the Java
                recipes' ``Tuple.from(null)``): None means "no item" to every caller, so
                such an item is undecodable, and moves to the dead letters as any other.
            Exception: whatever the codec raises on bytes it cannot read.
        """
        encoded = bytes(data)
        if bits & JOBS:
            encoded = strip_job_header(encoded)
        if self.stores_bytes_as_is:  # (RawCodec.decode, without its call)
            return encoded
        value = self.codec.decode(encoded)
        if value is None:
            raise ValueError(
                "the stored value decodes to None, which a take cannot return (None means "
                "that the queue is empty)"
            )
        return value

    # -- keys -------------------------------------------------------------------------------

    def item_key(
        self,
        position: tuple[Any, ...],
        subspace: Subspace | None = None,
        element: bytes | None = None,
    ) -> bytes:
        """Return the key ``subspace.pack(position + (element,))`` for a new item
        (``subspace``: the queue's, unless another is given, as a group's items;
        ``element``: a new random element unless given, :func:`random_element`, as a job's
        item's is its id, :func:`~fdbqueue._storage.job_records.job_element`). The queue's
        own item keys, ``position`` being its ``leading_integers`` integers, are packed by
        the key codec (:data:`ITEM_KEY_CODEC`), the same bytes.

        Raises:
            ValueError: the key would exceed FoundationDB's 10,000-byte key limit, or an
                element of ``position`` is out of the tuple layer's range.
        """
        if element is None:
            element = random_element()
        try:
            if subspace is None:
                key: bytes = self._pack_item(self.prefix, *position, element)
            else:
                key = subspace.pack((*position, element))
        except (ValueError, OverflowError, struct.error) as error:  # an int beyond 255 bytes
            raise ValueError(f"cannot make an item key from {position!r}: {error}") from None
        if len(key) > MAX_KEY_BYTES:
            raise ValueError(
                f"item key would be {len(key):,} bytes; FoundationDB's key size limit is "
                f"{MAX_KEY_BYTES:,} bytes (shorten the subspace prefix)"
            )
        return key

    def unpack_position(self, key: bytes) -> tuple[Any, ...]:
        """Return the tuple an item key packs, without the subspace prefix (read by the key
        codec, :data:`ITEM_KEY_CODEC`, as ``subspace.unpack`` reads it).

        Raises:
            ValueError: the key is not an item key of this queue type (it starts with
                ``leading_integers`` integers): the subspace holds data that is not this
                queue's, such as another queue nested in it. The message names the key.
        """
        # the key codec reads the item keys of this queue type (only such keys), and passes
        # any other key to _other_position, which reads a group's and checks the rest (a
        # group's item key, under the metadata's prefix, is never of the queue's shape)
        position: tuple[Any, ...] = self._unpack_item(key, self.prefix, self._other_position)
        return position

    def _other_position(self, key: bytes, prefix: bytes) -> tuple[Any, ...]:
        """:meth:`unpack_position` of a key that is not of this queue type's item shape: a
        group's item (:mod:`fdbqueue._storage.groups`), else read by the tuple layer (an item
        with a huge index, or a foreign key)."""
        if key.startswith(self._grouped):
            grouped: tuple[Any, ...] = self.groups.items.unpack(key)
            return grouped
        try:
            position: tuple[Any, ...] = Subspace(rawPrefix=prefix).unpack(key)
        except Exception as error:  # the tuple layer raises several types on bad input
            raise ValueError(
                f"key {describe_key(key)} in the queue's subspace is not one of its items "
                f"({error}): is another queue or other data stored inside this queue's "
                "subspace?"
            ) from None
        if tuple(map(type, position[: self.leading_integers])) != self._leading_types:
            raise ValueError(
                f"key {describe_key(key)} in the queue's subspace is not one of its items (it "
                f"should start with {self.leading_integers} integer(s) after the queue's "
                f"prefix, it holds {position!r}): is another queue or other data stored inside "
                "this queue's subspace? (name that queue with its longer prefix)"
            )
        return position

    # -- reads and writes -------------------------------------------------------------------

    def read(
        self,
        tr: AnyContext,
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

    def read_first(self, tr: AnyContext, n: int, snapshot: bool) -> list[Any]:
        """The first ``n`` items (:meth:`read` of every item with ``limit=n``): the front of a
        Queue that never had a message group, the min end of such a PriorityQueue. Cost: one
        range read, with :meth:`read`'s read conflict range unless ``snapshot``."""
        reader: Any = getattr(tr, "snapshot", tr) if snapshot else tr
        return list(reader.get_range(self.begin, self.end, limit=n))

    def read_first_ahead(self, tr: AnyContext) -> list[Any]:
        """:meth:`read_first` of one item (not a snapshot: the same read conflict range) and a
        look at the item behind it: up to two items, the second looked at only. One snapshot
        range read (``limit=2``) with the read conflict range that a read of the first item
        adds (to just past it, or every item when there is none), so that a change of the
        item behind conflicts with nothing. Cost: one range read."""
        found = list(tr.snapshot.get_range(self.begin, self.end, limit=2))
        if found:
            tr.add_read_conflict_range(self.begin, found[0].key + b"\x00")
        else:
            tr.add_read_conflict_range(self.begin, self.end)
        return found

    def add_read_conflict_range(self, tr: AnyContext, begin: bytes, end: bytes) -> None:
        """Add ``[begin, end)`` as a read conflict range; nothing for a snapshot view.

        A snapshot view (``tr.snapshot``) has no conflict ranges to add to: reading through
        one means the caller chose not to conflict.
        """
        add = getattr(tr, "add_read_conflict_range", None)
        if add is not None:
            add(begin, end)

    def write(
        self,
        tr: AnyContext,
        position: tuple[Any, ...],
        encoded: bytes,
        bits: int = ALL,
        subspace: Subspace | None = None,
    ) -> bytes:
        """Write one item at ``position`` (of ``subspace``, as :meth:`item_key`), count it and
        signal blocked consumers; return its key. ``encoded``: the value as fdbqueue's
        records carry it (a job's with its header, :func:`~fdbqueue._storage.job_records.
        wrap`). ``bits``: the features the queue used (:mod:`fdbqueue._storage.features`, as
        :meth:`check_type` returned them; :data:`~fdbqueue._storage.features.ALL` when not
        known): a value carrying a job's header is a job's only on a queue that used jobs,
        as :meth:`decode` reads it, so a ``raw`` value of a queue without jobs that happens
        to begin with the header is written as it is, and notes no job's location.

        A job's item keeps its job in its key, not in its value: the key's last element is
        the job's id (:func:`~fdbqueue._storage.job_records.job_element`) where a plain
        item's is random, and the value is the codec's bytes alone, so a consumer of the
        recipe's reads exactly the value submitted. :meth:`item_bytes` puts the header back
        when the item is taken.

        Cost: one set and two atomic adds (size counter, signal key); no reads; a job's item
        one set more, where its cancel finds it
        (:meth:`~fdbqueue._storage.jobs.Jobs.located`). Not the enqueue counter: whoever
        writes new items counts them, once per batch
        (:meth:`add_to_enqueued`), as a delayed item falling due is written here again.
        """
        job = job_of(encoded) if bits & JOBS else None
        if job is None:
            key = self.item_key(position, subspace)
            tr[key] = encoded
        else:  # a job's item: its id in the key; its record's cancel finds it there
            key = self.item_key(position, subspace, job_element(job))
            tr[key] = encoded[JOB_PREFIX_BYTES:]  # (job_of read the header: strip_job_header's)
            self.jobs.located(tr, job, key)
        tr.add(self.size_key, _ONE)  # (add_to_size(tr, 1) and signal(tr), without their calls)
        tr.add(self.signal_key, _ONE)
        if metrics.may_record:  # (no call while nothing records)
            metrics.add("enqueued", **self.metric_attributes)
        return key

    def item_bytes(self, position: tuple[Any, ...], value: bytes) -> bytes:
        """An item's stored ``value`` (its key's ``position``, unpacked) as fdbqueue's other
        records carry it: with its job's header when its key names a job (:meth:`write`),
        else as stored (a plain item's, or a job's item written before jobs moved to the
        key, whose value carries the header itself). Call it on a queue that used jobs; the
        take of an item moves these bytes to a held value or a dead letter."""
        job = job_of_element(position[-1])
        return value if job is None else job_header(job) + value

    def job_of_item(self, position: tuple[Any, ...], value: bytes) -> bytes | None:
        """The job whose item is at ``position`` (its key, unpacked) holding ``value``: the
        id in its key's last element (:meth:`write`), or in its value's header for an item
        written before jobs moved to the key; None for a plain item."""
        job = job_of_element(position[-1])
        return job_of(value) if job is None else job

    def signal(self, tr: AnyContext) -> None:
        """Bump the signal key that blocked consumers watch (an atomic add: no conflict)."""
        tr.add(self.signal_key, _ONE)

    def quarantine(self, tr: AnyContext, key: bytes, encoded: bytes, error: BaseException) -> None:
        """Move an item whose value cannot be decoded (already cleared) to the dead letters,
        count it out of the size, and log a warning; a job's item makes the job ``dead`` with
        that reason. Cost: two sets and an atomic add; a job's, :meth:`Jobs.finish`'s."""
        reason = f"undecodable: {describe_error(error)}"
        self.dead_letters.add(tr, key, 0, reason, encoded=encoded)
        self.add_to_size(tr, -1)
        job = job_of(encoded)
        if job is not None:  # a job's: it is dead, and says why (its result() raises)
            self.jobs.finish(tr, job, "dead", error=reason)
        metrics.add("dead_lettered", **self.metric_attributes)
        metrics.on_commit(
            functools.partial(
                logger.warning,
                "fdbqueue: moving item %s of %s to the dead letters, its value cannot be decoded "
                "(%s)",
                describe_key(key),
                self.metric_name,
                describe_error(error),
            )
        )

    def dequeued(self, tr: AnyContext, n: int) -> None:
        """Count ``n`` items dequeued (already cleared) out of the size, and in the metrics."""
        tr.add(self.size_key, _MINUS_ONE if n == 1 else COUNTER.pack(-n))  # (add_to_size's)
        if metrics.may_record:  # (no call while nothing records)
            metrics.add("dequeued", n, **self.metric_attributes)

    def add_to_size(self, tr: AnyContext, delta: int) -> None:
        """Add ``delta`` to the size counter with an atomic add (no read, no read conflict)."""
        tr.add(self.size_key, COUNTER.pack(delta))

    def add_to_enqueued(self, tr: AnyContext, n: int) -> None:
        """Count ``n`` items enqueued in the enqueue counter: one atomic add (no read, no
        conflict), once per transaction and shard for a batch. Call it where items enter the
        queue for the first time (an enqueue or push, delayed or not, a requeued dead letter),
        never for a move of items already counted (a delayed item falling due, a move between
        shards)."""
        tr.add(self.enqueued_key, _ONE if n == 1 else COUNTER.pack(n))

    def size(self, tr: AnyContext) -> int:
        """Return the size counter, never below zero. Cost: one point read of one key."""
        return self.counter_value(tr.get(self.size_key))

    @staticmethod
    def counter_value(read: Any) -> int:
        """A counter's value (the size, the enqueue counter) from its read (a future of
        ``tr.get``), never below 0; 0 when absent."""
        if not read.present():
            return 0
        return max(0, int(COUNTER.unpack(bytes(read))[0]))

    def clear(self, tr: AnyContext, *, items: bool = True) -> None:
        """Remove every item and all metadata except the receipts, which calls still in flight
        may look up (:mod:`fdbqueue._transactions.receipts`; they expire by themselves), the
        deduplication records (their window ends by itself), the schedules (what to
        enqueue, not what is queued: :meth:`fdbqueue.Queue.unschedule` removes them) and
        the paused key (a paused queue stays paused: :meth:`fdbqueue.Queue.resume`); only
        the metadata with ``items=False`` (a sharded queue's own store, whose shards clear
        theirs). The size and enqueue counters go with the metadata: both count from 0 again
        (a reader of the enqueue counter sees it go back, as the dashboard's rates do). Cost:
        five or six range clears and an atomic ``bit_and`` (the feature record keeps
        its bits, :mod:`fdbqueue._storage.features`), no reads."""
        require_writable(tr, "clear")
        self._codec_verified = False  # the next queue here may record another codec
        prefix: bytes = self.subspace.key()
        kept = [
            (self.receipts.begin, self.receipts.end),
            (self.deduplication.range().start, self.deduplication.range().stop),
            (self.schedules.range().start, self.schedules.range().stop),
        ]
        if self.parent is None:  # a shard's paused key is its queue's, outside its prefix
            kept.append((self.pause.key, self.pause.key + b"\x00"))
            kept.append((self.features.key, self.features.key + b"\x00"))
        kept.sort()
        begin = prefix if items else self.metadata.key()
        for kept_begin, kept_end in kept:
            tr.clear_range(begin, kept_begin)
            begin = kept_end
        tr.clear_range(begin, prefix_end(prefix))
        if self.parent is None:  # the type goes, the features used stay (as the paused key)
            self.features.forget_type(tr)


#: Keys one range read of :func:`count_keys` returns at most.
COUNT_PAGE_SIZE = 10_000


def count_keys(
    reader: Any, begin: bytes, end: bytes, counts: Callable[[Any], bool] | None = None
) -> int:
    """How many keys ``[begin, end)`` holds (those of them whose key-value pair ``counts``
    accepts, when given), through ``reader`` (pass a snapshot view for no conflicts). Cost:
    one range read per :data:`COUNT_PAGE_SIZE` keys, all in ``reader``'s transaction; the
    binding returns each key's value too (no key-only read exists), so count only ranges of
    small records."""
    counted = 0
    while True:
        page = list(reader.get_range(begin, end, limit=COUNT_PAGE_SIZE))
        counted += len(page) if counts is None else sum(map(counts, page))
        if len(page) < COUNT_PAGE_SIZE:
            return counted
        begin = bytes(page[-1].key) + b"\x00"
