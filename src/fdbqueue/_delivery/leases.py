"""Leases: at-least-once processing with a visibility timeout, acknowledgements and dead letters.

``claim`` takes an item out of the queue into a *lease* that expires after a number of
seconds. The consumer processes the value, then ``ack`` removes the item for good. If the
consumer crashes or is too slow, the lease expires and the next ``claim`` delivers the item
again, with its delivery count raised; ``release`` hands an item back before that. An item
whose lease expires ``max_deliveries`` times moves to the queue's *dead letters*, where it can
be inspected and requeued.

Clock: a lease of ``s`` seconds expires when both clocks say ``s`` seconds have passed:

* read versions, a clock all clients of a cluster share: ``s * 1,000,000`` versions after the
  read version of the claiming transaction (versions advance about 1,000,000 per second;
  precision about a GRV round trip);
* the wall clock: ``s`` seconds after the claiming client's ``time.time()``, by the clock of
  the client that looks.

Read versions alone are no clock across recoveries: a cluster recovery moves them on by up to
about 100 seconds' worth in a moment (upstream's ``MAX_VERSIONS_IN_FLIGHT``), which would
expire every lease in flight at once and deliver its item again while its holder still works
on it. The wall clock alone would trust every client's clock. Bound by both, a lease never
ends before its versions (a client's clock running fast cannot shorten it below that) nor,
across recoveries, before its seconds by the clocks, less the skew between the claiming and
the looking client's clocks. Leases are found in the order of their expiry versions: a claim
stops at the first whose wall-clock expiry has not come, so after a recovery a lease granted
later with a shorter lifetime is delivered again when the one before it expires (at most the
longer lease's seconds late). A lease record written before the wall clock was recorded (a
tuple of three elements, below) expires by its versions alone.

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("leases", expiry version, lease id)) -> the lease record (below)
    pack(("held", held id))                    -> the encoded value (fdbqueue._storage.held)

The lease record, byte for byte (integers little-endian; :class:`LeaseRecord` is the one
place that packs and reads it)::

    offset   bytes  field
    0        1      0x03: the fixed layout
    1        1      flags: 0x01 an expiry time is recorded, 0x02 released (a release time is)
    2        8      deliveries, unsigned
    10       8      expiry time: wall-clock microseconds since the epoch, signed (0: none)
    18       8      release time: the releasing client's wall-clock microseconds (0: none)
    26       1      n: the held id's length (16)
    27       n      the held id: where the value is held
    27 + n   rest   the item key the value came from (its length is the rest: no escaping)

A record written by an older fdbqueue is a tuple, ``pack((item key, deliveries, held id[,
expiry time[, release time]]))``. It starts with ``0x01`` (the tuple layer's type code of
bytes), never with ``0x03`` (no tuple-layer type code), so the first byte tells the layouts
apart: such a record is read as it is, and its next write (a release, an extension, a
redelivery) is of the fixed layout. An fdbqueue from before the fixed layout cannot read a
record of it (its tuple layer raises ``ValueError: Unknown data type in DB``): stop the
programs of an older fdbqueue that use a queue's leases (claims, the worker loop, lease
listings) before programs of this one claim from it.

The value moves once, unchanged, from the item to its held key, and stays there while the
small lease record is re-keyed (release, extend, redelivery) or becomes a dead letter
(:mod:`fdbqueue._storage.dead_letters`); so every value the queue accepted can be leased, whatever
its size or bytes. Requeued dead letters are enqueued again as new items (at the back; for a
priority queue, at the back of their priority): the recipes' indexes start again at 1 when a
queue empties, so an item's original key says nothing reliable about its place any more.

Claiming (the lease records' other side: ``claim``, ``claim_many``, redelivery and the
moves to the dead letters) is :mod:`fdbqueue._delivery.claims`; this module has the
:class:`Lease` a claim returns and :class:`LeaseHolds`, what its holder does with it
(``ack_many`` acknowledges several leases in one transaction, all of them or none).

Source followed: FoundationDB's developer guide on versions (``get_read_version``) for the
clock; message queues' visibility timeouts (Amazon SQS's ``ChangeMessageVisibility`` for
``release`` and ``extend``, ``DeleteMessage`` for ``ack``) for the semantics.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

import fdb.tuple
from fdb.subspace_impl import Subspace

from fdbqueue import _clock, _keycodec, metrics
from fdbqueue._checks import check_seconds
from fdbqueue._storage.job_records import JobOptions
from fdbqueue._storage.store import RESERVED_TRANSACTION_BYTES, ItemStore
from fdbqueue._storage.transaction_bytes import (
    MAX_TRANSACTION_BYTES,
    clear_bytes,
    read_conflict_bytes,
)
from fdbqueue._transactions.transactional import (
    AnyContext,
    require_writable,
)
from fdbqueue.errors import LeaseExpiredError, LeaseNotHeldError

__all__ = [
    "DEFAULT_MAX_DELIVERIES",
    "MAX_LEASE_SECONDS",
    "Lease",
    "LeaseHolds",
    "LeaseRecord",
    "check_lease_seconds",
    "check_max_deliveries",
    "lease_versions",
    "wall_clock",
    "wall_microseconds",
]


VERSIONS_PER_SECOND = 1_000_000
MICROSECONDS_PER_SECOND = 1_000_000
#: Deliveries after which an item whose leases keep expiring becomes a dead letter.
DEFAULT_MAX_DELIVERIES = 5
#: The longest lease, in seconds (12 hours, as Amazon SQS's longest visibility timeout).
MAX_LEASE_SECONDS = 12 * 60 * 60
LEASE_ID_BYTES = 16
#: The first byte of a lease record of the fixed layout (see the module docstring). No
#: tuple-layer value starts with it (the tuple layer has no type code 0x03); a record of the
#: older tuple layout starts with 0x01, its item key's type code.
LEASE_FORMAT = 0x03
#: A lease record's fixed fields: the format byte, the flags, deliveries (unsigned), the
#: expiry time and the release time (signed wall-clock microseconds, 0 when absent) and the
#: held id's length, little-endian: 27 bytes.
_LEASE = struct.Struct("<BBQqqB")
_LEASE_FIXED_BYTES = _LEASE.size
#: Flags: an expiry time is recorded; the lease was released (a release time is recorded).
_LEASE_EXPIRES = 0x01
_LEASE_RELEASED = 0x02

#: The type of a lease's value (covariant: a ``Lease[str]`` is a ``Lease[object]``).
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, init=False)
class Lease(Generic[T_co]):
    """An item claimed for processing.

    Attributes:
        value: the item's value.
        id: the lease's id (32 hexadecimal digits), unique per claim.
        deliveries: how many times this item has been claimed, this claim included (1 the
            first time).
        expiry_version: the read version after which the lease has expired (about
            1,000,000 versions per second).
        key: where the lease is stored (internal; ``ack`` and ``release`` use it).
        group: the item's message group, or None for an item without one
            (:doc:`groups`).
        expiry_time: the wall-clock time (seconds since the epoch, as ``time.time()``) after
            which the lease has expired, once its expiry version has passed too; None for a
            lease recorded before the wall clock was (its versions alone count).
        released: True for an item given back by :meth:`~fdbqueue.Queue.release` (or by the
            worker loop, to retry it after a backoff): nobody holds it; with a delay it is
            *delayed* until its expiry (``info().delayed`` counts it), then it *waits* as an
            expired lease's item does (``info().expired_leases``).
        job_id: the id of the job the item is (:meth:`~fdbqueue.Queue.submit`), or None for
            an item enqueued as a plain item.
        job_options: the job's own settings (``submit``'s ``max_deliveries``,
            ``time_limit``, ``backoff``: :class:`~fdbqueue.JobOptions`), which the worker
            loop honours instead of the queue's and its own; None for none.
    """

    value: T_co
    id: str
    deliveries: int
    expiry_version: int
    key: bytes = field(repr=False)
    group: Any = None
    expiry_time: float | None = None
    released: bool = False
    job_id: str | None = None
    job_options: JobOptions | None = field(default=None, repr=False)

    def __init__(
        self,
        value: T_co,
        id: str,
        deliveries: int,
        expiry_version: int,
        key: bytes,
        group: Any = None,
        expiry_time: float | None = None,
        released: bool = False,
        job_id: str | None = None,
        job_options: JobOptions | None = None,
    ) -> None:
        # Frozen: the fields are set through the instance's dict in one call (a claim makes
        # one Lease per item; the generated ``__init__`` sets each field by a call of its own).
        self.__dict__.update(
            value=value,
            id=id,
            deliveries=deliveries,
            expiry_version=expiry_version,
            key=key,
            group=group,
            expiry_time=expiry_time,
            released=released,
            job_id=job_id,
            job_options=job_options,
        )

    def expired(self, read_version: int, now: float | None = None) -> bool:
        """Whether the lease has expired for a transaction at ``read_version`` on a client
        whose wall clock reads ``now`` (seconds; None: :func:`wall_clock`): its expiry version
        is below ``read_version`` and its expiry time has come. No database access."""
        if self.expiry_version >= read_version:
            return False
        if self.expiry_time is None:
            return True
        return (wall_clock() if now is None else now) >= self.expiry_time

    def state(self, read_version: int, now: float | None = None) -> str:
        """Where its item stands for a transaction at ``read_version`` on a client whose
        wall clock reads ``now`` (None: :func:`wall_clock`): ``"held"`` (a holder has it),
        ``"delayed"`` (released with a delay not over: a retry waiting out its backoff), or
        ``"waiting"`` (expired, or released and due: the next take or claim takes it first;
        :ref:`waiting items <waiting-items>`). No database access."""
        if self.expired(read_version, now):
            return "waiting"
        return "delayed" if self.released else "held"

    def describe(self, read_version: int, now: float | None = None) -> str:
        """:meth:`state` in words, with its seconds: ``"12.5 s left"``, ``"delayed, due in
        4.0 s"``, ``"waiting since its release"``, ``"waiting, expired 3.2 s ago"`` (what the
        command line and the dashboard show). No database access."""
        seconds = self.seconds_left(read_version, now)
        state = self.state(read_version, now)
        if state == "held":
            return f"{seconds:.1f} s left"
        if state == "delayed":
            return f"delayed, due in {seconds:.1f} s"
        if self.released and self.expiry_version == 0:
            return "waiting since its release"
        return f"waiting, expired {-seconds:.1f} s ago"

    def seconds_left(self, read_version: int, now: float | None = None) -> float:
        """Seconds until the lease expires, as :meth:`expired` tells, for a transaction at
        ``read_version`` on a client whose wall clock reads ``now`` (None:
        :func:`wall_clock`): the later of its versions' and its wall clock's ends; negative
        once it has expired (seconds since). No database access."""
        seconds = (self.expiry_version - read_version) / VERSIONS_PER_SECOND
        if self.expiry_time is not None:
            clock = wall_clock() if now is None else now
            seconds = max(seconds, self.expiry_time - clock)
        return seconds


def wall_clock() -> float:
    """The wall clock that leases and deduplication windows are measured by besides read
    versions, in seconds since the epoch: fdbqueue's one wall clock,
    :func:`fdbqueue._clock.now` (``time.time()``; tests move it with the versions,
    ``tests/helpers.py``'s ``pass_time``)."""
    return _clock.now()


def wall_microseconds() -> int:
    """:func:`wall_clock` in whole microseconds, as the records store it."""
    return round(_clock.now() * MICROSECONDS_PER_SECOND)  # (wall_clock, without its call)


class LeaseRecord(NamedTuple):
    """A lease record's value: where its item came from, its deliveries, where its value is
    held, its wall-clock expiry (microseconds since the epoch; None in a record written
    before the wall clock was recorded, which expires by its versions alone), and when it
    was released (nobody holds it then: the releasing client's wall clock in microseconds,
    present only in a released lease's record).

    The one home of the record's layout (see the module docstring): :meth:`pack` writes the
    fixed layout, :meth:`parse` reads it and the tuple layout of an older fdbqueue.
    """

    item_key: bytes
    deliveries: int
    held_id: bytes
    expiry_time: int | None
    released_at: int | None = None

    @classmethod
    def parse(cls, value: bytes) -> LeaseRecord:
        """The record stored as ``value``: the fixed layout, or the tuple layout of an older
        fdbqueue (three to five tuple elements). Cost: a ``struct`` unpack and two slices (a
        tuple-layer unpack for an old record); no database access.

        Raises:
            ValueError: ``value`` is neither (empty, truncated, or not a lease record).
        """
        try:
            if value[0] == LEASE_FORMAT:
                _format, flags, deliveries, expiry, released, held_bytes = _LEASE.unpack_from(value)
                end = _LEASE_FIXED_BYTES + held_bytes
                if len(value) < end:
                    raise ValueError("its held id is cut short")
                # (the named tuple's ``__new__``, without its call: every field is given)
                return tuple.__new__(
                    cls,
                    (
                        value[end:],
                        deliveries,
                        value[_LEASE_FIXED_BYTES:end],
                        expiry if flags & _LEASE_EXPIRES else None,
                        released if flags & _LEASE_RELEASED else None,
                    ),
                )
            parts = fdb.tuple.unpack(value)  # an older fdbqueue's tuple layout
            return cls(
                parts[0],
                parts[1],
                parts[2],
                parts[3] if len(parts) > 3 else None,
                parts[4] if len(parts) > 4 else None,
            )
        except (IndexError, ValueError, struct.error) as error:
            raise ValueError(f"not a lease record ({error}): {value[:40]!r}") from None

    def pack(self) -> bytes:
        """The record's value, as it is stored: always the fixed layout (see the module
        docstring). Cost: a ``struct`` pack and two concatenations; no database access."""
        item_key, deliveries, held_id, expiry, released = self
        flags = (0 if expiry is None else _LEASE_EXPIRES) | (
            0 if released is None else _LEASE_RELEASED
        )
        fixed = _LEASE.pack(
            LEASE_FORMAT, flags, deliveries, expiry or 0, released or 0, len(held_id)
        )
        return fixed + held_id + item_key

    def stored_bytes(self) -> int:
        """The length of :meth:`pack`'s value, without packing it."""
        return _LEASE_FIXED_BYTES + len(self.held_id) + len(self.item_key)

    def expires_at(self, expiry_time: int) -> LeaseRecord:
        """The same record, expiring at wall-clock microseconds ``expiry_time``."""
        return self._replace(expiry_time=expiry_time)

    def has_expired(self, now: int) -> bool:
        """Whether its wall-clock expiry has come at ``now`` (microseconds); its versions are
        the key's to tell."""
        return self.expiry_time is None or self.expiry_time <= now

    def released(self, expiry_time: int, at: int) -> LeaseRecord:
        """The same record, released at wall-clock microseconds ``at`` and due at
        ``expiry_time`` (0: at once)."""
        return self._replace(expiry_time=expiry_time, released_at=at)

    def waiting_since(self) -> int:
        """When its item began to wait again, in wall-clock microseconds, once the lease
        expired (its expiry time) or, released without a delay, was released."""
        if self.released_at is not None and not self.expiry_time:
            return self.released_at
        return self.expiry_time or 0

    def expiry_seconds(self) -> float | None:
        """Its wall-clock expiry in seconds since the epoch (as :attr:`Lease.expiry_time`)."""
        return None if self.expiry_time is None else self.expiry_time / MICROSECONDS_PER_SECOND


def lease_microseconds(seconds: float) -> int:
    """Microseconds of wall clock a lease of ``seconds`` lasts (at least 1)."""
    return max(1, math.ceil(seconds * MICROSECONDS_PER_SECOND))


#: The types of the usual lease seconds (exactly these: a bool, or a subclass, is checked by
#: :func:`~fdbqueue._checks.check_seconds`).
_PLAIN_NUMBERS = (int, float)


def check_lease_seconds(seconds: Any) -> float:
    """Return ``seconds`` as a float, or raise before anything is read or written.

    Raises:
        TypeError: not a number (bool included).
        ValueError: NaN, or not in ``(0, MAX_LEASE_SECONDS]``.
    """
    if type(seconds) in _PLAIN_NUMBERS and 0 < seconds <= MAX_LEASE_SECONDS:
        return float(seconds)  # (the usual call: check_seconds's answer, without its call)
    number = check_seconds(seconds, "lease", allow_infinity=True)
    if number > MAX_LEASE_SECONDS:
        raise ValueError(f"lease must be > 0 and <= {MAX_LEASE_SECONDS} seconds, not {number}")
    return number


def lease_versions(seconds: float) -> int:
    """Versions a lease of ``seconds`` lasts: at least 1, so a lease is never born expired."""
    return max(1, math.ceil(seconds * VERSIONS_PER_SECOND))


def check_max_deliveries(max_deliveries: Any) -> int | None:
    """Return ``max_deliveries`` (an int >= 1, or None for no limit).

    Raises:
        TypeError: not an int or None (bool included).
        ValueError: less than 1.
    """
    if max_deliveries is None:
        return None
    if isinstance(max_deliveries, bool) or not isinstance(max_deliveries, int):
        raise TypeError(f"max_deliveries must be an int >= 1 or None, not {max_deliveries!r}")
    if max_deliveries < 1:
        raise ValueError(f"max_deliveries must be >= 1, not {max_deliveries}")
    return max_deliveries


class LeaseHolds:
    """What a lease holder does with a held lease: acknowledge it (alone or several at
    once), release it or extend it; each first checks that the lease is still held.

    Args:
        store: the queue's items and metadata.
        leases: the subspace of the lease records (:class:`Leases`).
    """

    def __init__(self, store: ItemStore, leases: Subspace) -> None:
        self.store = store
        self.leases = leases
        self.prefix: bytes = leases.key()

    # -- the lease keys: ``leases.pack((expiry version, lease id))``, packed and read by the
    # key codec (fdbqueue._keycodec: the tuple layer's bytes and tuples)

    def key(self, expiry_version: int, lease_id: bytes) -> bytes:
        """The key of the lease ``lease_id`` (bytes) expiring at ``expiry_version``."""
        return _keycodec.pack_int_bytes(self.prefix, expiry_version, lease_id)

    def key_fields(self, key: bytes) -> tuple[Any, ...]:
        """``(expiry version, lease id)`` of a lease key, as ``leases.unpack(key)`` reads it."""
        return _keycodec.unpack_int_bytes(key, self.prefix)

    def expired_end(self, version: int) -> bytes:
        """The end of the lease keys expiring before ``version``: ``leases.pack((version,))``."""
        return _keycodec.pack_int(self.prefix, version)

    def check(
        self, lease: Any, action: str, belongs: Callable[[bytes], bool] | None = None
    ) -> None:
        """Check that ``lease`` is a Lease of this queue (no database access).

        Raises:
            TypeError: ``lease`` is not a Lease.
            ValueError: it is a lease of another queue.
        """
        if not isinstance(lease, Lease):
            raise TypeError(f"{action} needs a Lease from claim(), not {type(lease).__name__}")
        # (Subspace.contains of the leases, without its call)
        if not (lease.key.startswith(self.prefix) if belongs is None else belongs(lease.key)):
            raise ValueError(f"lease {lease.id} belongs to another queue")

    def check_many(
        self, leases: Any, action: str, belongs: Callable[[bytes], bool] | None = None
    ) -> list[Lease[Any]]:
        """``leases`` as a list, each a Lease of this queue (of the queue whose lease keys
        ``belongs`` accepts, when given: a sharded queue's), none twice, small enough for one
        transaction (no database access).

        Raises:
            TypeError: ``leases`` is not an iterable of Leases.
            ValueError: a lease of another queue, a lease given twice, or more leases than
                one transaction can acknowledge.
        """
        if isinstance(leases, (Lease, str, bytes)):
            raise TypeError(f"{action} needs an iterable of Leases, not {type(leases).__name__}")
        try:
            batch = list(leases)
        except TypeError:
            raise TypeError(
                f"{action} needs an iterable of Leases, not {type(leases).__name__}"
            ) from None
        seen: set[bytes] = set()
        size = 0
        for lease in batch:
            self.check(lease, action, belongs)
            if lease.key in seen:
                raise ValueError(f"{action}: lease {lease.id} is given twice")
            seen.add(lease.key)
            size += read_conflict_bytes(len(lease.key)) + 2 * clear_bytes(len(lease.key))
        limit = MAX_TRANSACTION_BYTES - RESERVED_TRANSACTION_BYTES
        if size > limit:
            raise ValueError(
                f"{action}: {len(batch):,} leases are about {size:,} bytes as FoundationDB counts "
                f"a transaction, more than the {limit:,} one transaction can hold: acknowledge "
                "them in smaller batches"
            )
        return batch

    def _held(self, tr: AnyContext, lease: Lease[Any], action: str) -> bytes:
        """Check that ``lease`` (which passed :meth:`check`) is still held; return its record.

        Raises:
            TypeError: ``tr`` is a snapshot view.
            LeaseNotHeldError, LeaseExpiredError: see :meth:`ack`.
        """
        stored = self._look(tr, lease, action)
        return self._still_held(lease, stored, tr.get_read_version().wait())

    def _look(self, tr: AnyContext, lease: Lease[Any], action: str) -> Any:
        """Check that ``tr`` can write; start reading the record of ``lease`` (a Lease of
        this queue: :meth:`check`ed by the caller, as
        :meth:`~fdbqueue._queues.router.Router.for_lease` checks every lease given to a
        queue) for :meth:`_still_held` (a point read, with a read conflict).

        Raises:
            TypeError: ``tr`` is a snapshot view.
        """
        require_writable(tr, action)
        return tr.get(lease.key)

    def _job_read(self, tr: AnyContext, lease: Lease[Any]) -> Any:
        """Start reading the record of ``lease``'s job (a point read, with a read conflict),
        None for a lease of an item that is no job: the job id is on the Lease, so the read
        goes with the lease's own, not after it."""
        if lease.job_id is None:
            return None
        return self.store.jobs.read(tr, bytes.fromhex(lease.job_id))

    def _still_held(
        self, lease: Lease[Any], stored: Any, read_version: int, where: str = ""
    ) -> bytes:
        """The record ``stored`` (a point read of ``lease.key``), or raise when the lease is
        no longer held at ``read_version``; ``where`` is put before the message."""
        if not stored.present():
            raise LeaseNotHeldError(
                f"{where}lease {lease.id} is not held: it was acknowledged, released or extended "
                "already (extend returns the lease to use from then on), or it expired and its "
                "item was claimed again or moved to the dead letters"
            )
        if lease.expired(read_version):
            raise LeaseExpiredError(
                f"{where}lease {lease.id} expired; its item goes to the next claim (delivery "
                f"{lease.deliveries + 1})"
            )
        return bytes(stored)

    def ack(self, tr: AnyContext, lease: Lease[Any], result: bytes | None = None) -> None:
        """Remove a leased item for good; a job's (:attr:`Lease.job_id`) succeeded, with
        ``result`` (encoded) kept (:mod:`fdbqueue._storage.jobs`).

        ``lease`` must have passed :meth:`check` (as
        :meth:`~fdbqueue._queues.router.Router.for_lease` checks every lease given to a
        queue), as for :meth:`release`, :meth:`dead_letter` and :meth:`extend`.

        Raises:
            TypeError: ``tr`` is a snapshot view.
            LeaseNotHeldError: acknowledged or released already, or expired and claimed again.
            LeaseExpiredError: the lease expired (the item will be delivered again).

        Nothing changes when it raises. Cost: one point read (a read conflict on the lease,
        so an ack and a claim of the same expired lease never both win) and two clears; a
        job's also a point read of its record, issued with the lease's (one round trip), and
        its state change (:meth:`~fdbqueue._storage.jobs.Jobs.finish`).
        """
        stored = self._look(tr, lease, "ack")
        job_read = self._job_read(tr, lease)
        record = LeaseRecord.parse(self._still_held(lease, stored, tr.get_read_version().wait()))
        del tr[lease.key]
        self.store.held.drop(tr, record.held_id)
        self.store.groups.finished(tr, record.item_key)
        if lease.job_id is not None:
            jobs = self.store.jobs
            job_record = jobs.parsed(job_read)
            jobs.finish(tr, bytes.fromhex(lease.job_id), "succeeded", job_record, result=result)
        if metrics.may_record:  # (no call while nothing records)
            metrics.add("acknowledged", **self.store.metric_attributes)

    def ack_many(self, tr: AnyContext, leases: list[Lease[Any]]) -> None:
        """Remove every leased item of ``leases`` for good, or none of them.

        ``leases`` must have passed :meth:`check`. Every lease is read first (the point
        reads issued together) and checked, in the order given; the first that is not
        held raises, before anything is written in ``tr``.

        Raises:
            LeaseNotHeldError, LeaseExpiredError: as :meth:`ack`, naming the lease and its
                place in ``leases``.

        Cost: one point read per lease (each a read conflict on its lease) and one per
        job's record, all issued together (one round trip), and two clears per lease (and
        per job its state change).
        """
        require_writable(tr, "ack_many")
        stored = [tr.get(lease.key) for lease in leases]
        job_reads = [self._job_read(tr, lease) for lease in leases]
        read_version: int = tr.get_read_version().wait()
        records = [
            self._still_held(lease, value, read_version, f"ack_many: leases[{index}]: ")
            for index, (lease, value) in enumerate(zip(leases, stored, strict=True))
        ]
        for lease, stored_record, job_read in zip(leases, records, job_reads, strict=True):
            del tr[lease.key]
            record = LeaseRecord.parse(stored_record)
            self.store.held.drop(tr, record.held_id)
            self.store.groups.finished(tr, record.item_key)
            if lease.job_id is not None:
                jobs = self.store.jobs
                jobs.finish(tr, bytes.fromhex(lease.job_id), "succeeded", jobs.parsed(job_read))
        metrics.add("acknowledged", len(leases), **self.store.metric_attributes)

    def release(
        self,
        tr: AnyContext,
        lease: Lease[Any],
        seconds: float = 0.0,
        error: BaseException | str | None = None,
    ) -> None:
        """Give a leased item back unprocessed: the next claim takes it, ahead of the queue;
        with ``seconds`` > 0, not before that many seconds after ``tr``'s read version (its
        record is re-keyed to expire then, so a claim sees it as expired from then on). A
        job's record says ``retrying`` (after ``error``, which it keeps) or ``waiting``; a job
        cancelled while it ran is not given back: its item is dropped, the job
        ``cancelled``.

        Its delivery count is kept (the next claim raises it). Raises as :meth:`ack`; nothing
        changes when it raises. Cost: one point read (a job's record read with it: one round
        trip), one clear and one set of the small record (the value stays where it is held),
        a job's state change, and an atomic add to the signal key that
        wakes blocked claims (:mod:`fdbqueue._transactions.waiting`; no conflict), which then sleep
        until the record expires.
        """
        stored = self._look(tr, lease, "release")
        job_read = self._job_read(tr, lease)
        record = LeaseRecord.parse(self._still_held(lease, stored, tr.get_read_version().wait()))
        del tr[lease.key]
        jobs = self.store.jobs
        if lease.job_id is not None and not jobs.released(
            tr, bytes.fromhex(lease.job_id), seconds, error, jobs.parsed(job_read)
        ):
            self.store.held.drop(tr, record.held_id)  # cancelled: it goes no further
            self.store.groups.finished(tr, record.item_key)
            return
        expiry_version = expiry_time = 0
        now = wall_microseconds()
        if seconds:
            expiry_version = tr.get_read_version().wait() + lease_versions(seconds)
            expiry_time = now + lease_microseconds(seconds)
        key = self.key(expiry_version, bytes.fromhex(lease.id))
        tr[key] = record.released(expiry_time, now).pack()
        if lease.job_id is not None:  # where its cancel finds it, while it waits here
            jobs.located(tr, bytes.fromhex(lease.job_id), key)
        self.store.signal(tr)  # the item is claimable now (or its wait changed): wake claims

    def dead_letter(
        self, tr: AnyContext, lease: Lease[Any], reason: str, error: BaseException | None = None
    ) -> None:
        """Move a leased item to the dead letters with ``reason``, its deliveries kept (the
        caller logs why, as the worker loop does); a job is ``dead``, with ``error`` (or
        ``reason``) as its last failure.

        Raises as :meth:`ack`; nothing changes when it raises. Cost: one point read (a job's
        record read with it: one round trip), a clear and a set, and a job's state change.
        """
        stored = self._look(tr, lease, "dead_letter")
        job_read = self._job_read(tr, lease)
        record = LeaseRecord.parse(self._still_held(lease, stored, tr.get_read_version().wait()))
        del tr[lease.key]
        self.store.dead_letters.add(
            tr, record.item_key, record.deliveries, reason, held_id=record.held_id
        )
        self.store.groups.finished(tr, record.item_key)
        if lease.job_id is not None:
            failure = reason if error is None else error
            jobs = self.store.jobs
            job = bytes.fromhex(lease.job_id)
            jobs.finish(tr, job, "dead", jobs.parsed(job_read), error=failure)
        metrics.add("dead_lettered", **self.store.metric_attributes)

    def extend(self, tr: AnyContext, lease: Lease[Any], seconds: float) -> Lease[Any]:
        """Move a held lease's expiry to ``seconds`` after this transaction's read version;
        return the new Lease (same id and deliveries; the old object is no longer held).

        Raises as :meth:`ack`; nothing changes when it raises. Cost: one point read, one
        clear and one set of the small record.
        """
        record = LeaseRecord.parse(self._held(tr, lease, "extend"))
        del tr[lease.key]
        expiry_version = tr.get_read_version().wait() + lease_versions(seconds)
        expiry_time = wall_microseconds() + lease_microseconds(seconds)
        key = self.key(expiry_version, bytes.fromhex(lease.id))
        extended = record.expires_at(expiry_time)
        tr[key] = extended.pack()
        return Lease(
            lease.value,
            lease.id,
            lease.deliveries,
            expiry_version,
            key,
            lease.group,
            extended.expiry_seconds(),
            job_id=lease.job_id,
            job_options=lease.job_options,
        )
