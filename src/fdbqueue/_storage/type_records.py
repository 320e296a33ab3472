"""The type and codec a queue records in its metadata, and the checks every operation makes
against them: :class:`TypeRecords`, a base of :class:`~fdbqueue._storage.store.ItemStore`.

The type and codec live in the queue's feature record (:mod:`fdbqueue._storage.features`),
written by the first write into the queue (into any of its shards) and read by every write
and take with their own reads, so a queue opened as another type, with another codec or
another number of shards raises QueueTypeError before it changes anything.

Queues written before that record kept the type and codec in two records of their own, which
are read (never written now) while a queue has no feature record, under the queue's (and each
shard's) metadata prefix ``P + b"\\xff"``::

    pack(("type",))   -> b"Queue" or b"PriorityQueue", followed by b"/N" for N > 1 shards
    pack(("codec",))  -> the codec's name (absent for a codec without one)

The first write into such a queue records the feature record with every bit.
"""

from __future__ import annotations

from typing import Any

from fdbqueue._storage.features import ALL, FeatureRecord
from fdbqueue._transactions.transactional import AnyContext
from fdbqueue.errors import QueueTypeError

__all__ = ["QUEUE_TYPES", "TypeRecords", "constructor", "describe_type", "parse_type", "type_name"]

#: The queue type recorded in a queue's metadata, by the number of integers its item keys
#: start with (a Queue's ``(index, random)``, a PriorityQueue's ``(priority, count, random)``).
QUEUE_TYPES = {1: b"Queue", 2: b"PriorityQueue"}
#: Separates a sharded queue's type from its number of shards in the type record.
SHARDS_SEPARATOR = b"/"


def type_name(leading_integers: int, shards: int = 1) -> bytes:
    """The type recorded for a queue: ``b"Queue"`` or ``b"PriorityQueue"``, followed by
    ``b"/N"`` for a queue of N > 1 shards (``b"Queue/16"``), so that a queue opened with
    another number of shards is refused like a queue of another type."""
    name = QUEUE_TYPES[leading_integers]
    return name if shards == 1 else name + SHARDS_SEPARATOR + str(shards).encode()


def parse_type(recorded: bytes) -> tuple[str, int]:
    """The queue type's name and number of shards in a type record (:func:`type_name`); the
    name as recorded and 1 shard for a record this version does not know."""
    name, _, shards = recorded.partition(SHARDS_SEPARATOR)
    text = name.decode(errors="replace")
    return (text, int(shards)) if shards.isdigit() and int(shards) > 1 else (text, 1)


def describe_type(recorded: bytes) -> str:
    """A type record in words: ``a Queue``, ``a Queue of 16 shards``."""
    name, shards = parse_type(recorded)
    return f"a {name}" if shards == 1 else f"a {name} of {shards} shards"


def constructor(recorded: bytes) -> str:
    """How to open the queue a type record describes: ``fdbqueue.Queue(..., shards=16)``."""
    name, shards = parse_type(recorded)
    return f"fdbqueue.{name}" if shards == 1 else f"fdbqueue.{name}(..., shards={shards})"


class TypeRecords:
    """The queue's type and codec, read and checked (see the module docstring)."""

    subspace: Any
    parent: Any  # the sharded queue's own store, for one shard's; else None
    metric_name: str  # the queue as people wrote it, ('app', 'jobs'): a shard's is its queue's
    type_name: bytes
    type_key: bytes
    codec_key: bytes
    codec_name: bytes | None
    features: FeatureRecord
    _codec_verified: bool

    def recorded_type(self, tr: AnyContext) -> tuple[Any, Any]:
        """Start reading the feature record (a snapshot point read, no conflict), and the
        older type and codec records with it while no feature record was found; pass the
        futures to :meth:`check_type` once the other reads are issued."""
        try:
            reader: Any = tr.snapshot
        except AttributeError:  # tr is a snapshot view already
            reader = tr
        features = self.features
        if features.known is not None:
            return reader.get(features.key), None
        # none found last time: perhaps an older queue's
        return reader.get(features.key), (reader.get(self.type_key), reader.get(self.codec_key))

    def check_type(
        self,
        tr: AnyContext,
        recorded: tuple[Any, Any] | None,
        record: bool = True,
        uses: int = 0,
    ) -> int:
        """Raise :class:`QueueTypeError` when ``recorded`` (:meth:`recorded_type`; None: no
        check, for a write of items already checked) names another queue type or another
        codec; record this type and codec when the queue has none yet (the first write; not
        when ``record`` is False), and the features ``uses`` (:mod:`fdbqueue._storage.features`
        bits) the write uses first. Call it before the first write of an operation, so that
        nothing changes when it raises. Returns the features the queue has used, this write's
        included (:data:`~fdbqueue._storage.features.ALL` when unknown: no ``recorded``, or a
        queue of the older records), which the write goes by: only on a queue that used jobs
        is a value carrying a job's header a job's
        (:meth:`~fdbqueue._storage.store.ItemStore.write`).

        A queue whose type was recorded before codecs were (fdbqueue 0.x before issue 21) has
        no codec record: it is never checked, and none is recorded later (a wrong codec's
        write would otherwise lock the right one out).

        Cost: nothing more while the type is recorded and the features were used before; a
        feature's first use, one atomic ``bit_or``; on the first write (or the first after a
        clear), two snapshot point reads (the older records, unless read already) and a
        blind ``bit_or``, so that concurrent first enqueues still never conflict (two first
        writes of different types racing each other could both commit).
        """
        if recorded is None:  # nothing to check (a move of items already checked)
            return ALL
        record_future, legacy = recorded
        bits = self.features.check(record_future)
        if bits is not None:
            self._codec_verified = True
            if uses & ~bits and record:
                self.features.use(tr, uses, bits)
            return bits | uses
        found = self.features.found(record_future)
        if found is not None and found[1] is not None:
            self._check_tag(found[1], "nothing was written")
            if record:
                self.features.use(tr, uses, found[0])
            return found[0] | uses
        if legacy is None:
            reader: Any = getattr(tr, "snapshot", tr)
            legacy = reader.get(self.type_key), reader.get(self.codec_key)
        older = self.check_older_type(tr, legacy)
        bits = found[0] if found is not None else ALL if older else 0
        if record:  # a queue of older records may have used anything
            codec_unchecked = older and not legacy[1].present()  # and keeps no codec
            untagged = self.features.untagged if codec_unchecked else None
            self.features.use(tr, bits | uses, tag=untagged)
        return bits | uses

    def check_older_type(self, tr: AnyContext, recorded: tuple[Any, Any]) -> bool:
        """:meth:`check_type` by the older type and codec records (never written now):
        whether they were there."""
        type_record, codec_record = recorded
        if type_record.present():
            found = bytes(type_record)
            if found != self.type_name:
                raise QueueTypeError(
                    f"queue {self.metric_name} holds {describe_type(found)}, not "
                    f"{describe_type(self.type_name)}: open it as {constructor(found)} (nothing "
                    "was written)"
                )
            self._check_recorded_codec(codec_record)
            return True
        if self.parent is None:
            return False
        parent = self.parent  # a shard without them: the queue's
        reader: Any = getattr(tr, "snapshot", tr)
        older: bool = parent.check_older_type(
            tr, (reader.get(parent.type_key), reader.get(parent.codec_key))
        )
        return older

    def _check_tag(self, tag: bytes, unchanged: str) -> None:
        """Raise :class:`QueueTypeError` when the feature record's ``tag`` (not this queue's
        own) names another type, number of shards or codec than this queue's (``unchanged``:
        what the error says of the operation)."""
        found_type, _, found_codec = tag.partition(b"\x00")
        own_type, _, own_codec = self.features.tag.partition(b"\x00")
        if found_type != own_type:
            raise QueueTypeError(
                f"queue {self.metric_name} holds {describe_type(found_type)}, not "
                f"{describe_type(own_type)}: open it as {constructor(found_type)} ({unchanged})"
            )
        if own_codec and found_codec and own_codec != found_codec:
            written_with = found_codec.decode(errors="replace")
            raise QueueTypeError(
                f"queue {self.metric_name} was written with codec {written_with!r} and opened with "
                f"{own_codec.decode()!r}: open it with codec={written_with!r} ({unchanged})"
            )
        self._codec_verified = True

    @property
    def verified(self) -> bool:
        """Whether this store found its own type and codec on record (a check of the type
        alone reads nothing again)."""
        return self._codec_verified

    def recorded_codec(self, tr: AnyContext, *, again: bool = False) -> Any:
        """Start reading the feature record (a snapshot point read, no conflict) for
        :meth:`check_codec`, with the older type and codec records while no feature record was
        found and they were not found right (``again``: read them anyway: a value that does
        not decode, is the record another codec's now?)."""
        reader: Any = getattr(tr, "snapshot", tr)  # tr may be a snapshot view already
        features = self.features
        if features.known is not None and not again:
            return reader, reader.get(features.key), None
        legacy = None
        if again or not self._codec_verified:
            legacy = reader.get(self.type_key), reader.get(self.codec_key)
        return reader, reader.get(features.key), legacy

    def check_codec(self, recorded: Any) -> int:
        """Raise :class:`QueueTypeError` when the records name another codec, queue type or
        number of shards than this queue's, so that a queue opened as another type or with
        the wrong codec changes nothing (a take would otherwise move every item to the dead
        letters as undecodable, or take another shard's items); else return the features
        the queue used (:mod:`fdbqueue._storage.features` bits; all of them without a feature
        record). ``recorded`` is :meth:`recorded_codec`'s. No codec recorded (a queue nothing
        was written to yet, or written before codecs were recorded, or by a codec without a
        name) is not checked; a shard without the older records checks its queue's instead.
        Cost: waits for ``recorded``; without a feature record, the older records' snapshot
        point reads (unless read with it), until they were found right."""
        if recorded is None:
            return ALL
        reader, record_future, legacy = recorded
        bits = self.features.check(record_future)
        if bits is not None:
            self._codec_verified = True
            return bits
        found = self.features.found(record_future)
        if found is not None and found[1] is not None:
            self._check_tag(found[1], "nothing was changed")
            return found[0]
        if legacy is not None or not self._codec_verified:
            self.check_older_codec(reader, legacy)
        return ALL if found is None else found[0]

    def check_older_codec(self, reader: Any, legacy: Any) -> None:
        """:meth:`check_codec` by the older type and codec records (read now if ``legacy``,
        their futures, is None)."""
        if legacy is None:
            legacy = reader.get(self.type_key), reader.get(self.codec_key)
        type_record, codec_record = legacy
        if not codec_record.present():
            if self.parent is not None:  # a shard never written to: the queue's records
                parent = self.parent
                parent.check_older_codec(reader, None)
            return
        if type_record.present() and bytes(type_record) != self.type_name:
            found_type = bytes(type_record)
            raise QueueTypeError(
                f"queue {self.metric_name} holds {describe_type(found_type)}, not "
                f"{describe_type(self.type_name)}: open it as {constructor(found_type)} "
                "(nothing was changed)"
            )
        self._check_recorded_codec(codec_record)

    def _check_recorded_codec(self, codec_record: Any) -> None:
        """Raise :class:`QueueTypeError` when ``codec_record`` (read) names another codec."""
        if self.codec_name is None or not codec_record.present():
            return
        found = bytes(codec_record)
        self._codec_verified = found == self.codec_name
        if not self._codec_verified:
            written_with = found.decode(errors="replace")
            raise QueueTypeError(
                f"queue {self.metric_name} was written with codec {written_with!r} and opened with "
                f"{self.codec_name.decode()!r}: open it with codec={written_with!r} (nothing "
                "was changed)"
            )
