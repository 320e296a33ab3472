"""A job's bytes: the element of its item's key that names it, the header its value carries
elsewhere, and the layout of its record.

:meth:`fdbqueue.Queue.submit` (and :meth:`fdbqueue.PriorityQueue.submit`) enqueue an item
and write its *job record* in the same transaction (:mod:`fdbqueue._storage.jobs`: the
records' keys and every state change). The item is an item like any other, where the recipes
put it, and its value is the codec's bytes alone: the job is named by the last element of its
key, where the recipes put random bytes (:func:`job_element`)::

    job element = b"\\xfe" + 16 id bytes   (the id: 32 hexadecimal digits)

Where a job's value is kept in fdbqueue's own records (a lease's held value, a delayed
item's record, a dead letter) and on the way to them, it starts with a *job header* that
carries the id, followed by the codec's bytes (:func:`wrap`; the item's write moves the id
into the key, :meth:`~fdbqueue._storage.store.ItemStore.write`, and a take puts the header
back, :meth:`~fdbqueue._storage.store.ItemStore.item_bytes`)::

    job header = b"\\xfe\\x00fdbqueue.job\\x00" + 16 id bytes

Every decode strips it (:meth:`~fdbqueue._storage.store.ItemStore.decode`: the one decode of
every take, claim and peek), so consumers see the value submitted. A value whose stored bytes
start with that header is read as a job's: no built-in codec writes it (a tuple never starts
with ``0xfe``, JSON never does, and a ``raw`` value would have to start with those 14 bytes).
So is an item's value written by an fdbqueue from before jobs moved to the key.

The job record, byte for byte (version 3, :data:`RECORD_VERSION`; integers little-endian;
:class:`JobRecord` is the one place that packs and reads it)::

    offset  bytes  field
    0       1      0x03: the version
    1       1      the state: 0 waiting, 1 delayed, 2 running, 3 retrying, 4 succeeded,
                   5 dead, 6 cancelled, 7 deferred
    2       1      flags: 0x01 cancel requested; the optional fields present: 0x02 the
                   group, 0x04 the priority, 0x08 the error, 0x10 the job's options;
                   0x20 jobs wait for it (``job_after`` edges)
    3       8      deliveries, unsigned
    11      8      enqueued_at  (the times: signed wall-clock microseconds, 0: none)
    19      8      started_at
    27      8      finished_at
    35      8      due_at
    43      28     only with the flag 0x10, the job's options: max_deliveries (unsigned,
                   4 bytes), time_limit, backoff and result_ttl (doubles, 8 bytes each);
                   0 (-1 for result_ttl): not given
    43/71   rest   only with a flag 0x02, 0x04 or 0x08: pack((the optional fields present,
                   in this order: group, priority, error type, error message, error
                   traceback))

So a plain job's record (no group, no priority, no error yet) is its 43 fixed bytes, packed
without the tuple layer. A record of versions 1 and 2 (an older fdbqueue's) is a tuple::

    pack((version, state, deliveries, enqueued_at, started_at, finished_at, due_at,
          cancel_requested, group, priority, error type, error message, error traceback))

It starts with ``0x15`` (the tuple layer's one-byte int), never with ``0x03`` (no tuple-layer
type code), so the first byte tells the layouts apart: such a record is read as it is, and
its next state change writes version 3. An fdbqueue from before version 3 cannot read a
version-3 record (it takes the job for one that is gone): stop the programs of an older
fdbqueue that use a queue's jobs before programs of this one submit, claim or finish its
jobs.

The record's version also says how its job's result is stored. Versions 2 and 3: the
result's first byte says whether it was kept (:data:`RESULT_KEPT`, the result codec's bytes
follow: :class:`~fdbqueue._storage.jobs.ResultFormat`) or not (:data:`RESULT_NOT_KEPT`, why
follows). Version 1 (an fdbqueue before results had a codec of their own): the result is the
bytes of the queue's ``result_codec`` if it named one, else of the queue's codec, unchanged.
Every finish rewrites the record with the result, in one transaction, so a record's version
always tells how its result was written, whichever fdbqueue wrote it.

This module holds the bytes alone: no key, no database access (the records' keys, where
they are written and read, are :class:`~fdbqueue._storage.jobs.Jobs`'s).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import fdb.tuple

from fdbqueue import _keycodec
from fdbqueue.codecs import MAX_VALUE_BYTES

__all__ = [
    "FINISHED",
    "JOB_ELEMENT_MARK",
    "JOB_HEADER",
    "JOB_ID_BYTES",
    "JOB_PREFIX_BYTES",
    "RECORD_VERSION",
    "RESULT_KEPT",
    "RESULT_NOT_KEPT",
    "STATES",
    "JobOptions",
    "JobRecord",
    "job_element",
    "job_header",
    "job_hint",
    "job_of",
    "job_of_element",
    "strip_job_header",
    "wrap",
]

#: What starts a job's stored value, before its 16 id bytes and the codec's bytes.
JOB_HEADER = b"\xfe\x00fdbqueue.job\x00"
_HEADER_LENGTH = len(JOB_HEADER)
JOB_ID_BYTES = 16
#: The bytes of a job's header and id before the codec's bytes (31).
JOB_PREFIX_BYTES = _HEADER_LENGTH + JOB_ID_BYTES
_PREFIX_LENGTH = JOB_PREFIX_BYTES
#: Every state :attr:`~fdbqueue._storage.jobs.JobInfo.state` takes.
STATES = (
    "waiting",
    "delayed",
    "running",
    "retrying",
    "succeeded",
    "dead",
    "cancelled",
    "deferred",
)
#: The states of a job that ended.
FINISHED = frozenset({"succeeded", "dead", "cancelled"})
#: The version a job record is written with (its first byte; see the module docstring).
RECORD_VERSION = 3
#: The first byte of a result kept with a record of version 2 or later: the result codec's
#: bytes follow.
RESULT_KEPT = b"\x00"
#: The first byte of what the result key of a record of version 2 or later holds when the
#: result was not kept: UTF-8 text follows, ``result not kept: `` and why (at most
#: :data:`~fdbqueue._wording.FAILURE_MESSAGE_CHARACTERS`).
RESULT_NOT_KEPT = b"\x01"
#: A job record's fixed fields (version 3, see the module docstring): the version, the state's
#: code, the flags, deliveries (unsigned) and four times (signed microseconds), little-endian:
#: 43 bytes.
_RECORD = struct.Struct("<BBBQqqqq")
#: The first byte of a version-3 record; no tuple-layer value starts with it (the tuple layer
#: has no type code 0x03), and a record of versions 1 and 2 starts with 0x15 (a small int).
_RECORD_FIRST_BYTE = bytes((RECORD_VERSION,))
#: Each state's code in a version-3 record (stored: never renumber one).
_STATE_CODES = {
    "waiting": 0,
    "delayed": 1,
    "running": 2,
    "retrying": 3,
    "succeeded": 4,
    "dead": 5,
    "cancelled": 6,
    "deferred": 7,
}
_STATE_NAMES = tuple(sorted(_STATE_CODES, key=_STATE_CODES.__getitem__))
#: The flags of a version-3 record: cancel requested, and which optional fields follow.
_CANCEL_REQUESTED = 0x01
_HAS_GROUP = 0x02
_HAS_PRIORITY = 0x04
_HAS_ERROR = 0x08
_HAS_OPTIONS = 0x10
#: A flag of a version-3 record: jobs submitted ``after=`` it wait for it (``job_after``).
_HAS_DEPENDENTS = 0x20
_HAS_TUPLE_FIELDS = _HAS_GROUP | _HAS_PRIORITY | _HAS_ERROR
#: A job's options after the fixed fields (flag 0x10): max_deliveries (unsigned 32 bits; 0:
#: none), time_limit and backoff (doubles; 0: none), result_ttl (a double; -1: none),
#: little-endian: 28 bytes.
_OPTIONS = struct.Struct("<Iddd")
#: A record's error when it has none.
_NO_ERROR = ("", "", "")
_END = object()


#: What starts the last element of a job's item key (its "random" element), before the job's
#: 16 id bytes: 17 bytes in all, where a plain item's random element has
#: :data:`~fdbqueue._storage.store.RANDOM_BYTES` (20, as the recipe's ``os.urandom(20)``).
JOB_ELEMENT_MARK = b"\xfe"
_JOB_ELEMENT_BYTES = len(JOB_ELEMENT_MARK) + JOB_ID_BYTES
#: The packed tail of a job's item key whose id holds no ``\x00`` byte (the tuple layer's
#: bytes code, the mark; then the 16 id bytes and the final ``\x00``): see :func:`job_hint`.
_PACKED_MARK = b"\x01" + JOB_ELEMENT_MARK
_PACKED_TAIL = len(_PACKED_MARK) + JOB_ID_BYTES + 1


def job_element(job_id: bytes) -> bytes:
    """The last element of the key of ``job_id``'s item: the mark and the id."""
    return JOB_ELEMENT_MARK + job_id


def job_of_element(element: Any) -> bytes | None:
    """The job id an item key's last element names (:func:`job_element`), or None (a plain
    item's random element, or another program's)."""
    if (
        type(element) is bytes
        and len(element) == _JOB_ELEMENT_BYTES
        and element[:1] == JOB_ELEMENT_MARK
    ):
        return element[1:]
    return None


def job_hint(key: bytes, value: bytes) -> bytes | None:
    """A guess, without unpacking ``key``, at the job of the item ``key`` holding ``value``:
    the id in its key's last element (:func:`job_element`), else the header of an item
    stored before jobs moved to the key. A guess only (a plain item's random bytes may look
    like a job's): :meth:`~fdbqueue._consuming.ends.End._front_ahead` reads ahead the record
    it names, and a wrong guess costs a read.

    An id without a ``\x00`` byte sits at a fixed place in the packed key. The tuple layer
    escapes each ``\x00`` as ``\x00\xff``, so an id holding ``k`` of them ends a key whose
    packed last element is ``k`` bytes longer (:func:`_escaped_job_hint`: about 1 id in 22,
    whose 12 random bytes hold a ``\x00``, and every id of a queue whose 4-byte tag holds
    one)."""
    if key[-_PACKED_TAIL : -_PACKED_TAIL + len(_PACKED_MARK)] == _PACKED_MARK:
        job_id = key[-1 - JOB_ID_BYTES : -1]
        if b"\x00" not in job_id:  # (else the mark's bytes were inside an escaped id)
            return job_id
    return _escaped_job_hint(key) or job_of(value)


def _escaped_job_hint(key: bytes) -> bytes | None:
    """The id in a job's item key whose id holds ``k`` (1 to 16) ``\x00`` bytes, each
    escaped by the tuple layer: the packed element starts ``k`` bytes before an unescaped
    id's (:func:`~fdbqueue._keycodec.unpack_last_bytes` reads it). None for any other key."""
    if _PACKED_MARK not in key[-_PACKED_TAIL - JOB_ID_BYTES :]:
        return None
    for escapes in range(1, JOB_ID_BYTES + 1):
        start = len(key) - _PACKED_TAIL - escapes
        if start >= 0 and key[start : start + len(_PACKED_MARK)] == _PACKED_MARK:
            job_id = job_of_element(_keycodec.unpack_last_bytes(key, start))
            if job_id is not None:
                return job_id
    return None


def job_header(job_id: bytes) -> bytes:
    """The header a job's stored value starts with (see the module docstring)."""
    return JOB_HEADER + job_id


def job_of(encoded: bytes) -> bytes | None:
    """The job id (16 bytes) a stored value carries, or None for an item that is no job."""
    if encoded[:_HEADER_LENGTH] == JOB_HEADER and len(encoded) >= _PREFIX_LENGTH:
        return encoded[_HEADER_LENGTH:_PREFIX_LENGTH]
    return None


def strip_job_header(encoded: bytes) -> bytes:
    """A stored value without its job header (the codec's bytes); unchanged for an item
    that is no job."""
    if encoded[:_HEADER_LENGTH] == JOB_HEADER and len(encoded) >= _PREFIX_LENGTH:
        return encoded[_PREFIX_LENGTH:]
    return encoded


def wrap(job_id: bytes, encoded: bytes) -> bytes:
    """A job's stored value: its header and the codec's bytes ``encoded``.

    Raises:
        ValueError: the whole is larger than FoundationDB's 100,000-byte value limit.
    """
    stored = job_header(job_id) + encoded
    if len(stored) > MAX_VALUE_BYTES:
        raise ValueError(
            f"a job's encoded value is at most {MAX_VALUE_BYTES - _PREFIX_LENGTH:,} bytes (its "
            f"header takes {_PREFIX_LENGTH}), not {len(encoded):,}"
        )
    return stored


@dataclass(frozen=True)
class JobOptions:
    """A job's own settings, given to ``submit`` (or a task's decorator) for that job: each
    overrides the setting of the queue or of the worker loop that runs it; None leaves that
    one's.

    Attributes:
        max_deliveries: deliveries after which a failing job becomes a dead letter (>= 1).
        time_limit: seconds its handler may run per delivery (> 0, at most 12 hours).
        backoff: seconds before its first retry, doubled per delivery (jittered) up to the
            worker's ``max_backoff`` (> 0).
        result_ttl: seconds its record and result are kept once it finished (>= 0; 0: no
            result is kept), instead of the queue's ``result_ttl``.
    """

    max_deliveries: int | None = None
    time_limit: float | None = None
    backoff: float | None = None
    result_ttl: float | None = None

    def pack(self) -> bytes:
        """The 28 bytes a job record keeps them in (flag ``0x10``; 0 for none, -1 for a
        ``result_ttl`` of none)."""
        ttl = -1.0 if self.result_ttl is None else self.result_ttl
        return _OPTIONS.pack(
            self.max_deliveries or 0, self.time_limit or 0.0, self.backoff or 0.0, ttl
        )

    @classmethod
    def unpack_from(cls, value: bytes, offset: int) -> JobOptions:
        """The options :meth:`pack` wrote at ``offset`` of ``value``."""
        deliveries, time_limit, backoff, ttl = _OPTIONS.unpack_from(value, offset)
        return cls(
            deliveries or None, time_limit or None, backoff or None, None if ttl < 0 else ttl
        )


@dataclass
class JobRecord:
    """A job record's fields (see the module docstring); times in microseconds, 0: none.

    The one home of the record's layout: :meth:`pack` writes the fixed layout (version
    :data:`RECORD_VERSION`), :meth:`parse` reads it and the tuple layout of versions 1 and 2.
    """

    state: str
    deliveries: int = 0
    enqueued_at: int = 0
    started_at: int = 0
    finished_at: int = 0
    due_at: int = 0
    cancel_requested: bool = False
    group: Any = None
    priority: int | None = None
    error: tuple[str, str, str] = _NO_ERROR
    #: its own settings (``submit``'s), None: the queue's and the worker's
    options: JobOptions | None = None
    #: whether jobs submitted ``after=`` it wait for it (read their edges when it ends)
    has_dependents: bool = False
    #: the version it was read with (:data:`RECORD_VERSION` when made here): tells how its
    #: result is stored (see the module docstring); :meth:`pack` writes RECORD_VERSION
    version: int = RECORD_VERSION

    def pack(self) -> bytes:
        """The record's value, of version :data:`RECORD_VERSION` (the fixed layout; see the
        module docstring). Cost: a ``struct`` pack, and a tuple-layer pack of the optional
        fields only when one is present (a group, a priority, an error); no database access.

        Raises:
            KeyError: its state is none of :data:`STATES`.
        """
        group, priority, error = self.group, self.priority, self.error
        flags = _CANCEL_REQUESTED if self.cancel_requested else 0
        if self.has_dependents:
            flags |= _HAS_DEPENDENTS
        optional: list[Any] = []
        if group is not None:
            flags |= _HAS_GROUP
            optional.append(group)
        if priority is not None:
            flags |= _HAS_PRIORITY
            optional.append(priority)
        if error != _NO_ERROR:
            flags |= _HAS_ERROR
            optional += error
        options = b""
        if self.options is not None:
            flags |= _HAS_OPTIONS
            options = self.options.pack()
        fixed = _RECORD.pack(
            RECORD_VERSION,
            _STATE_CODES[self.state],
            flags,
            self.deliveries,
            self.enqueued_at,
            self.started_at,
            self.finished_at,
            self.due_at,
        )
        if optional:
            packed: bytes = fdb.tuple.pack(tuple(optional))
            return fixed + options + packed
        return fixed + options

    @classmethod
    def parse(cls, value: bytes) -> JobRecord:
        """The record a value packs: the fixed layout (version 3), or the tuple layout of
        versions 1 and 2. Cost: a ``struct`` unpack, and a tuple-layer unpack of the optional
        fields when the flags say one is present (the whole record for versions 1 and 2); no
        database access.

        Raises:
            ValueError: not a job record of either layout.
        """
        if value[:1] != _RECORD_FIRST_BYTE:
            return cls._parse_tuple(value)
        try:
            (_version, state, flags, deliveries, enqueued, started, finished,
             due) = _RECORD.unpack_from(value)  # fmt: skip
            record = cls(
                _STATE_NAMES[state],
                deliveries,
                enqueued,
                started,
                finished,
                due,
                bool(flags & _CANCEL_REQUESTED),
                has_dependents=bool(flags & _HAS_DEPENDENTS),
            )
            start = _RECORD.size
            if flags & _HAS_OPTIONS:
                record.options = JobOptions.unpack_from(value, start)
                start += _OPTIONS.size
            if flags & _HAS_TUPLE_FIELDS:
                optional = iter(fdb.tuple.unpack(value, start))
                if flags & _HAS_GROUP:
                    record.group = next(optional)
                if flags & _HAS_PRIORITY:
                    record.priority = next(optional)
                if flags & _HAS_ERROR:
                    record.error = (str(next(optional)), str(next(optional)), str(next(optional)))
                if next(optional, _END) is not _END:
                    raise ValueError("more optional fields than its flags say")
            elif len(value) != start:
                raise ValueError("bytes after its fixed fields, and no optional field")
        except (IndexError, ValueError, StopIteration, struct.error) as error:
            raise ValueError(f"not a job record ({error})") from None
        return record

    @classmethod
    def _parse_tuple(cls, value: bytes) -> JobRecord:
        """A record of the tuple layout (versions 1 and 2: see the module docstring)."""
        try:
            fields = fdb.tuple.unpack(value)
            (version, state, deliveries, enqueued, started, finished, due, cancel, group,
             priority, error_type, message, trace) = fields  # fmt: skip
            version = int(version)
        except Exception as error:
            raise ValueError(f"not a job record ({error})") from None
        return cls(
            str(state),
            int(deliveries),
            int(enqueued),
            int(started),
            int(finished),
            int(due),
            bool(cancel),
            group,
            priority,
            (str(error_type), str(message), str(trace)),
            version=version,
        )
