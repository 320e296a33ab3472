"""The queue's feature record: its type, its codec, and the features it ever used.

One key per queue (a sharded queue's own, shared by its shards), under its metadata prefix
``P + b"\\xff"``::

    pack(("features",))  -> FORMAT (1 byte) + bits (2 bytes, LE) + type + b"\\x00" + codec

``type`` is :func:`~fdbqueue._storage.type_records.type_name`'s (``b"Queue"``,
``b"PriorityQueue/4"``), ``codec`` the codec's name (empty for a codec without one). The bits
say which features the queue ever used: :data:`PAUSE`, :data:`DELAYS`, :data:`GROUPS`,
:data:`LEASES`, :data:`JOBS`. A feature's first use sets its bit with an atomic ``bit_or`` in
the same transaction as the feature's first key (:meth:`FeatureRecord.use`), so a take that
reads the record sees the bit whenever it could see the feature's keys: a snapshot read at
the take's read version sees both or neither (no read conflict is needed, and none is added:
the record changes on such transitions only, never per operation).

Every take and claim reads the record with its own first reads and sends the reads of the
features its *plan* holds (:meth:`FeatureRecord.planned`: the bits this object last read),
never of the others: a queue that never used a feature never reads or checks anything for it.
When the record shows a bit the plan lacked (a feature used for the first time since), the
attempt plans again before it writes anything, and reads that feature too.

The bits are sticky: nothing clears them but :meth:`FeatureRecord.forget_type` (a clear of
the queue keeps them, as its paused key stays), since a bit cleared by a snapshot read of an
empty feature racing that feature's first use would leave the feature's keys unseen.
``bit_or`` resizes the stored value to its parameter's length, so every write passes the
whole record: the format byte and the type and codec OR into themselves. A record of the
header alone (after a clear) has no type: the next write records its own.

A queue written before this record (type and codec records only,
:mod:`fdbqueue._storage.type_records`) has none until its next write, which records every bit
(:data:`ALL`: what it used is unknown); until then, and while no record exists, takes plan
every feature.

Source followed: FoundationDB's atomic operations (``bit_or``, ``bit_and`` and their
resizing rule, ``fdbclient/Atomic.h``); the feature bits follow the design review in
``shared/research/pay-for-use-2026-11-28.md`` (decision 1 of issue 44).
"""

from __future__ import annotations

from typing import Any

from fdbqueue._transactions.transactional import AnyContext

__all__ = [
    "ALL",
    "DELAYS",
    "FORMAT",
    "GROUPS",
    "JOBS",
    "KEY",
    "LEASES",
    "PAUSE",
    "RATE",
    "FeatureRecord",
    "recorded_type",
]

#: The record's format: its first byte.
FORMAT = 1
#: Bits: the queue was paused once (takes read the paused key, :mod:`fdbqueue._storage.pause`).
PAUSE = 1
#: Delayed items were enqueued (takes read the next-due hint, :mod:`fdbqueue._delivery.delays`).
DELAYS = 2
#: Items of message groups were enqueued (takes read the groups' count,
#: :mod:`fdbqueue._storage.groups`).
GROUPS = 4
#: Items were claimed under leases (takes probe the first lease, :mod:`fdbqueue._delivery.claims`).
LEASES = 8
#: Jobs were submitted (takes read a job's record, :mod:`fdbqueue._storage.jobs`).
JOBS = 16
#: A worker loop took start slots of a rate limit (``info`` reads the last ones,
#: :mod:`fdbqueue._delivery.rate_limit`).
RATE = 32
#: Every bit: what a queue without a record (or written before records existed) may use.
ALL = 0xFFFF
#: The record's key under a queue's metadata subspace: ``metadata.pack(KEY)``.
KEY = ("features",)
#: The header's length: the format byte and the bits.
HEADER_BYTES = 3


def recorded_type(value: bytes) -> tuple[str | None, str | None]:
    """The type and codec a feature record's ``value`` holds, as text (None: not recorded,
    after a clear; a codec without a name)."""
    tag = value[HEADER_BYTES:]
    if not tag:
        return None, None
    name, _, codec = tag.partition(b"\x00")
    return name.decode(errors="replace"), codec.decode(errors="replace") or None


def _header(bits: int) -> bytes:
    return bytes((FORMAT, bits & 0xFF, bits >> 8))


class FeatureRecord:
    """One queue's feature record (see the module docstring).

    Args:
        metadata: the queue's metadata subspace (a sharded queue's own).
        tag: the type and codec the record holds: ``type + b"\\x00" + codec``.
    """

    def __init__(self, metadata: Any, tag: bytes) -> None:
        #: the record's key
        self.key: bytes = metadata.pack(KEY)
        self.tag = tag
        #: the tag without the codec: what an older queue without a codec record records
        self.untagged: bytes = tag.partition(b"\x00")[0] + b"\x00"
        #: The bits this object last read (None: no record was found), which every take and
        #: claim plans by. A hint only: an attempt whose record shows more plans again.
        self.known: int | None = None
        # The last value check() found this queue's own, with its bits (one tuple: threads
        # replace it whole).
        self._checked: tuple[bytes | None, int] = (None, 0)

    def planned(self) -> int:
        """The features a take or claim reads for, sent before the record is known: the bits
        last read, or every feature while no record was found."""
        known = self.known
        return ALL if known is None else known

    def read(self, tr: AnyContext) -> Any:
        """Start reading the record (a snapshot point read: no conflict)."""
        try:
            reader: Any = tr.snapshot
        except AttributeError:  # tr is a snapshot view already
            reader = tr
        return reader.get(self.key)

    def check(self, record: Any) -> int | None:
        """The bits of ``record`` (a read, :meth:`read`) when it holds this queue's own type
        and codec, which this object then plans by; None otherwise (no record, none
        recorded, or another tag: see :meth:`found`). Waits for ``record``. The hot path:
        a take's and an enqueue's check."""
        if record.present():
            value = bytes(record)
            checked = self._checked
            if value == checked[0]:  # the value checked last (the usual case): its bits
                self.known = checked[1]
                return checked[1]
            if value[HEADER_BYTES:] == self.tag:
                bits: int = value[1] | value[2] << 8
                self.known = bits
                self._checked = (value, bits)
                return bits
        return None

    def found(self, record: Any) -> tuple[int, bytes | None] | None:
        """The bits and the tag (None: none recorded, after a clear) of ``record``, a read
        (:meth:`read`) that this object then plans by; None when there is no record. Waits
        for ``record``."""
        if not record.present():
            self.known = None
            return None
        value = bytes(record)
        bits = value[1] | value[2] << 8
        self.known = bits
        return bits, value[HEADER_BYTES:] or None

    def use(
        self, tr: AnyContext, bits: int, seen: int | None = None, *, tag: bytes | None = None
    ) -> None:
        """Record in ``tr`` that the queue uses the features ``bits``, unless ``seen`` (the
        bits ``tr`` read in the record) holds them all; with the queue's type and codec
        (``tag``: another tag, :attr:`untagged`). Call it in the transaction that writes the
        features' first keys. Cost: nothing when ``seen`` holds them, else one atomic
        ``bit_or`` (no read, no conflict)."""
        if seen is None or bits & ~seen:
            tr.bit_or(self.key, _header(bits) + (self.tag if tag is None else tag))
            known = self.known  # plan by them from now on (more reads if it never commits)
            if known is not None:
                self.known = known | bits

    def forget_type(self, tr: AnyContext) -> None:
        """Drop the type and codec from the record in ``tr`` (a clear of the queue: the next
        write may record another), keeping the bits; a queue without a record gets every
        bit. Cost: one atomic ``bit_and`` (its 3-byte parameter cuts the value to the
        header); no read, no conflict."""
        tr.bit_and(self.key, _header(ALL))
