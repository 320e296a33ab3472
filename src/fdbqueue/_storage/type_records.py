"""The type and codec a queue records in its metadata, and the checks every operation makes
against them: :class:`TypeRecords`, a base of :class:`~fdbqueue._storage.store.ItemStore`.

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("type",))   -> b"Queue" or b"PriorityQueue", followed by b"/N" for N > 1 shards
    pack(("codec",))  -> the codec's name (absent for a codec without one)

Both are written by the first write into the queue (into each shard, for a sharded queue, and
into the queue's own metadata by the first write into any of its shards), so a queue opened as
another type, with another codec or another number of shards raises QueueTypeError before
it changes anything.
"""

from __future__ import annotations

from typing import Any

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
    """The queue's type and codec records, read and checked (see the module docstring)."""

    subspace: Any
    parent: Any  # the sharded queue's own store, for one shard's; else None
    metric_name: str  # the queue as people wrote it, ('app', 'jobs'): a shard's is its queue's
    type_name: bytes
    type_key: bytes
    codec_key: bytes
    codec_name: bytes | None
    _codec_verified: bool

    def recorded_type(self, tr: AnyContext) -> tuple[Any, Any]:
        """Start reading the queue type and the codec recorded in the metadata (two snapshot
        point reads, issued together, no conflict); pass the futures to :meth:`check_type`
        once the other reads are issued."""
        return tr.snapshot.get(self.type_key), tr.snapshot.get(self.codec_key)

    def check_type(self, tr: AnyContext, recorded: tuple[Any, Any], record: bool = True) -> None:
        """Raise :class:`QueueTypeError` when ``recorded`` (:meth:`recorded_type`) names
        another queue type or another codec (:meth:`check_codec`); record this type and codec
        when the subspace has no type yet (the first write; not when ``record`` is False). Call
        it before the first write of an operation, so that nothing changes when it raises.

        A queue whose type was recorded before codecs were (fdbqueue 0.x before issue 21) has
        no codec record: it is never checked, and none is recorded later (a wrong codec's
        write would otherwise lock the right one out).

        Cost: nothing more while the type is recorded; on the first write, two sets (blind,
        so that concurrent first enqueues still never conflict: two first writes of
        different types racing each other could both commit, the later type recorded).
        """
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
            return
        if self.parent is not None:  # this shard's first write: the queue's type first
            self.parent.check_type(tr, self.parent.recorded_type(tr), record)
        if record:
            tr[self.type_key] = self.type_name
            if self.codec_name is not None:
                tr[self.codec_key] = self.codec_name

    @property
    def verified(self) -> bool:
        """Whether this store found its own type and codec on record (takes then read
        neither again)."""
        return self._codec_verified

    def recorded_codec(self, tr: AnyContext, *, again: bool = False) -> Any:
        """Start reading the type and codec on record (two snapshot point reads issued
        together, no conflict) for :meth:`check_codec`; None once this store found its own
        type and codec there (only a clear takes a record away, and writes check them every
        time), unless ``again`` (a value that does not decode: is the record another codec's
        now?). Cost: two snapshot point reads until the records were found to match; then
        none."""
        if self._codec_verified and not again:
            return None
        reader: Any = getattr(tr, "snapshot", tr)  # tr may be a snapshot view already
        return reader, reader.get(self.type_key), reader.get(self.codec_key)

    def check_codec(self, recorded: Any) -> None:
        """Raise :class:`QueueTypeError` when the records name another codec, queue type or
        number of shards than this queue's, so that a queue opened as another type or with
        the wrong codec changes nothing (a take would otherwise move every item to the dead
        letters as undecodable, or take another shard's items). ``recorded`` is
        :meth:`recorded_codec`'s. No codec record (a queue nothing was written to yet, or
        written before codecs were recorded, or by a codec without a name) is not checked; a
        shard without one checks its queue's records instead. Cost: waits for ``recorded``;
        for a shard not written to yet, its queue's two snapshot point reads until they were
        found right."""
        if recorded is None:
            return
        reader, type_record, codec_record = recorded
        if not codec_record.present():
            if self.parent is not None:  # a shard never written to: the queue's records
                self.parent.check_codec(self.parent.recorded_codec(reader))
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
        """Raise :class:`QueueTypeError` when ``codec_record`` (read) names another codec;
        once it names this one, neither record is read again by takes (:meth:`recorded_codec`)."""
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
