"""Periodic jobs: schedules that every running worker loop turns into enqueued runs.

``queue.schedule(db, "report", value, every=3600)`` (or ``cron="0 6 * * 1-5"``) records a
schedule with the queue; every worker loop working on the queue (``queue.work``, threads or
asyncio tasks) looks at the schedules about once a second (:data:`CHECK_SECONDS`) and
enqueues ``value`` once per due time (:meth:`Schedules.enqueue_due`), however many loops run.

Key layout (``P`` the queue's prefix; the records live in the queue's own metadata, one per
schedule, whatever the number of shards)::

    P + b"\\xff" + pack(("schedules", name))  ->  pack((2, every, cron, next_due, last_run,
                                                      runs, priority, group, value,
                                                      due_version))

``2`` is the record's format (records of format 1, without ``due_version``, are read too);
``every`` (float seconds) or ``cron`` (the 5-field expression) is set, the other None;
``next_due`` and ``last_run`` are wall-clock seconds since the epoch (``last_run`` None before
the first run): the due time of the next run and of the last run enqueued; ``runs`` counts
the runs enqueued; ``priority`` (a PriorityQueue's) and ``group`` (the runs' message group)
are None when not given; ``value`` is the value encoded by the queue's codec when it was
scheduled (its bytes are enqueued as they are); ``due_version`` is the read version at which
``next_due`` arrives by the clock of the client that wrote the record (its read version plus
the seconds it had left to wait, in versions). A record is at most 100,000 bytes,
FoundationDB's value limit. :meth:`fdbqueue.Queue.clear` keeps the schedules.

Due times: ``every`` schedules fall due ``every`` seconds apart from the moment they were
scheduled (the first one ``every`` seconds after it; a fixed rate that does not drift with the
time runs take); ``cron`` schedules at the minutes their expression matches, in UTC (parsed
and stepped by the ``cronsim`` library). Time is fdbqueue's wall clock
(:func:`fdbqueue._clock.now`) on the worker that enqueues the run: clients' clocks should
agree (a worker whose clock runs ahead enqueues runs early).

Clocks that disagree: a loop whose clock runs ahead fires each due time early and moves the
next due time on by its own clock, out of reach of the others' clocks. While it runs it keeps
the schedule going (one run per due time, early); once it stops, the others would wait until
their clocks reach that due time. So a loop also fires a schedule whose next due time is more
than :data:`MAX_CLOCK_LEAD` beyond where its own clock would put it (:meth:`Timing.next_after`
of its clock plus that much) once the record's ``due_version`` is more than
:data:`MAX_CLOCK_LEAD` seconds of versions behind the loop's read version: the loop that set
it would have fired it by then, had it gone on. It then *re-bases* the schedule on its own
clock (:meth:`Timing.rebased`): one run, for its latest due time at or before that clock, and
the next due time after it. A clock ahead by more than that bound thus holds a schedule back
by at most :data:`MAX_CLOCK_LEAD` seconds past the due time it set, once it stops (a clock
ahead by less holds it back by that much at most), and never makes the other loops fire
while it runs and fires in time (no burst). Versions measure the time since the last firing
without anyone's wall clock; a cluster recovery moves them about 100 seconds on at once, so
while a loop whose clock is that far ahead runs, a recovery can add one run.

Missed due times: when no loop ran (or none could reach the cluster) while several due times
passed, the next check enqueues one run, for the latest of them, and the schedule goes on
from there (as cron and Celery beat do: no burst of catch-up runs). A loop checks every
:data:`CHECK_SECONDS`, so a schedule of ``every`` below that is run about once per check.

Exactly once per due time: one transaction reads the schedule's record (a point read, with
its read conflict), finds its ``next_due`` passed, enqueues the run through the queue's own
write path in that same transaction, and writes the record with ``next_due`` moved past the
clock (or re-based on it, above) and ``last_run`` set (:meth:`Schedules.enqueue_due`). Two
loops that both find a due time read the same record and both write it: serializable
transactions let one commit and the other conflict (it is not retried: the record moved on).
A retried attempt reads the record again, so after a commit with an unknown result (1021) it
finds ``next_due`` moved and enqueues nothing more; and the transaction runs with the queue's
exactly-once receipts (:meth:`fdbqueue._transactions.receipts.Receipts.run`), which settle an
unknown result (and a 1031) by the attempt's receipt before anything runs again. Each due
time is thus enqueued in at most one committed transaction, and (while some loop runs) in
one: at least once too.

Source followed: cron's and Celery beat's handling of missed runs (run once, not a burst);
FoundationDB's developer guide on transactions with unknown results; ``cronsim``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import cronsim
import fdb.tuple

from fdbqueue import _clock
from fdbqueue._checks import check_seconds
from fdbqueue._delivery.leases import VERSIONS_PER_SECOND
from fdbqueue._storage.groups import Group
from fdbqueue._storage.store import ItemStore
from fdbqueue._transactions.transactional import (
    AnyContext,
    is_database,
    require_writable,
    run_in_retry_loop,
)
from fdbqueue.codecs import decode_or_undecodable

__all__ = [
    "CHECK_SECONDS",
    "MAX_CLOCK_LEAD",
    "MAX_NAME_BYTES",
    "ScheduleInfo",
    "Schedules",
    "Timing",
    "check_name",
    "check_timing",
    "check_until_stopped",
]

#: The logger of the worker loops, which enqueue the runs.
logger = logging.getLogger("fdbqueue.worker")

#: Seconds between a worker loop's looks at its queue's schedules (each loop its own).
CHECK_SECONDS = 1.0
#: The longest name of a schedule, in bytes of UTF-8.
MAX_NAME_BYTES = 100
#: The longest cron expression, in characters.
MAX_CRON_CHARACTERS = 200
#: The shortest ``every``, in seconds (a shorter one is run about once per check anyway).
MIN_EVERY = 0.001
#: FoundationDB's value limit: the most bytes a schedule's record holds.
MAX_RECORD_BYTES = 100_000
#: Seconds a schedule's next due time may lie beyond where a loop's clock would put it, and
#: seconds of versions past its ``due_version``, before the loop re-bases the schedule on its
#: own clock (see the module docstring, "Clocks that disagree"): what a clock that ran ahead
#: holds a schedule back by at most, once its loop stopped.
MAX_CLOCK_LEAD = 60.0
#: The format of the records this module writes (the first element of each); records of
#: format 1 (without ``due_version``) are read too.
RECORD_FORMAT = 2
#: What a firing attempt returns when it lost the record to another loop (a conflict).
_CONFLICT = "conflict"


@dataclass(frozen=True)
class Timing:
    """When a schedule falls due: ``every`` seconds apart, or at ``cron``'s minutes (UTC);
    exactly one of them is set (:func:`check_timing`)."""

    every: float | None = None
    cron: str | None = None

    def next_after(self, seconds: float) -> float:
        """The first due time strictly after ``seconds`` (wall-clock seconds since the
        epoch), for a schedule starting then: ``seconds + every``, or the next minute ``cron``
        matches. No database access."""
        if self.every is not None:
            return seconds + self.every
        assert self.cron is not None
        return next(cronsim.CronSim(self.cron, _utc(seconds))).timestamp()

    def following(self, due: float, now: float) -> tuple[float, float]:
        """For a schedule whose next due time ``due`` is at or before ``now``: the due time
        to run (the latest one at or before ``now``: the missed ones are skipped) and the
        next due time after it (after ``now``). No database access."""
        if self.every is not None:
            every = self.every
            latest = due + math.floor((now - due) / every) * every
            latest = min(max(latest, due), now)  # rounding never goes before due or past now
            following = latest + every
            while following <= now:  # rounding
                latest, following = following, following + every
            return latest, following
        assert self.cron is not None
        before = self._before(now)
        after = self.next_after(before)
        latest = max(due, after if after <= now else before)
        following = self.next_after(latest)
        while following <= now:  # ``due`` was not one of the expression's minutes
            latest, following = following, self.next_after(following)
        return latest, following

    def rebased(self, due: float, now: float) -> tuple[float, float]:
        """For a schedule whose next due time ``due`` is after ``now``, set by a clock that
        ran ahead: :meth:`following` on the clock that reads ``now``, from the latest due time
        at or before ``now`` (``every``: ``due`` less whole intervals; ``cron``: its latest
        minute). No database access."""
        if self.every is not None:
            back = math.ceil((due - now) / self.every) * self.every
            return self.following(min(due - back, now), now)
        return self.following(self._before(now), now)

    def _before(self, now: float) -> float:
        """The latest of ``cron``'s minutes before ``now``."""
        assert self.cron is not None
        return next(cronsim.CronSim(self.cron, _utc(now), reverse=True)).timestamp()


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


@dataclass(frozen=True)
class ScheduleInfo:
    """One schedule, as :meth:`fdbqueue.Queue.schedules` lists it.

    Attributes:
        name: the schedule's name.
        value: what each run enqueues (decoded by the queue's codec; an
            :class:`~fdbqueue.Undecodable` when it cannot be).
        every: seconds between runs, or None for a cron schedule.
        cron: the 5-field cron expression (UTC), or None for an ``every`` schedule.
        group: the runs' message group, or None.
        priority: the runs' priority (a PriorityQueue's), or None.
        next_due: when the next run falls due: wall-clock seconds since the epoch.
        last_run: the due time of the last run enqueued (wall-clock seconds since the
            epoch), or None before the first.
        runs: how many runs were enqueued since the schedule was first recorded.
    """

    name: str
    value: Any
    every: float | None
    cron: str | None
    group: Group | None
    priority: int | None
    next_due: float
    last_run: float | None
    runs: int


def check_name(name: Any) -> str:
    """Return ``name``: a non-empty str of at most :data:`MAX_NAME_BYTES` bytes of UTF-8,
    without NUL characters; raise before anything is read or written.

    Raises:
        TypeError: not a str.
        ValueError: empty, too long, with a NUL character or not encodable as UTF-8.
    """
    if not isinstance(name, str):
        raise TypeError(f"a schedule's name must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError("a schedule's name must not be empty")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"a schedule's name must be valid UTF-8, not {name!r}") from None
    if size > MAX_NAME_BYTES:
        raise ValueError(
            f"a schedule's name must be at most {MAX_NAME_BYTES} bytes of UTF-8, not {size}"
        )
    if "\x00" in name:
        raise ValueError(f"a schedule's name must not hold a NUL character: {name!r}")
    return name


def check_timing(every: Any, cron: Any) -> Timing:
    """Return the :class:`Timing` of exactly one of ``every`` (seconds, a finite number of at
    least :data:`MIN_EVERY`) and ``cron`` (a 5-field cron expression: minute, hour,
    day-of-month, month, day-of-week, as the ``cronsim`` library reads them); raise before
    anything is read or written.

    Raises:
        TypeError: both or neither given, ``every`` not a number (bools refused) or ``cron``
            not a str.
        ValueError: ``every`` NaN, infinite, not > 0 or below :data:`MIN_EVERY`; ``cron``
            not 5 fields, or a field the library refuses (the message names the expression
            and the field).
    """
    if (every is None) == (cron is None):
        given = "both" if every is not None else "neither"
        raise TypeError(f"a schedule needs exactly one of every= or cron=, not {given}")
    if every is not None:
        seconds = check_seconds(every, "every")
        if seconds < MIN_EVERY:
            raise ValueError(f"every must be at least {MIN_EVERY} seconds, not {seconds}")
        return Timing(every=seconds)
    if not isinstance(cron, str):
        raise TypeError(f"cron must be a str (a cron expression), not {type(cron).__name__}")
    fields = cron.split()
    if len(cron) > MAX_CRON_CHARACTERS or len(fields) != 5:
        raise ValueError(
            f"bad cron expression {cron!r}: it needs 5 fields (minute hour day-of-month month "
            f"day-of-week), not {len(fields)}"
            + (f", in at most {MAX_CRON_CHARACTERS} characters" if len(fields) == 5 else "")
        )
    expression = " ".join(fields)
    try:
        next(cronsim.CronSim(expression, _utc(_clock.now())))
    except (cronsim.CronSimError, StopIteration, ValueError, OverflowError) as error:
        reason = str(error) or "it matches no time"
        raise ValueError(f"bad cron expression {cron!r}: {reason}") from None
    return Timing(cron=expression)


@dataclass(frozen=True)
class _Record:
    """A schedule's record, as stored (see the module docstring); ``due_version`` 0 for a
    record of format 1 (always past)."""

    timing: Timing
    next_due: float
    last_run: float | None
    runs: int
    priority: int | None
    group: Group | None
    value: bytes
    due_version: int = 0

    def pack(self) -> bytes:
        packed: bytes = fdb.tuple.pack(
            (
                RECORD_FORMAT,
                self.timing.every,
                self.timing.cron,
                self.next_due,
                self.last_run,
                self.runs,
                self.priority,
                self.group,
                self.value,
                self.due_version,
            )
        )
        return packed

    @staticmethod
    def unpack(data: bytes) -> _Record:
        """Raises ValueError for a record of another format."""
        fields = fdb.tuple.unpack(data)
        if not fields or (fields[0], len(fields)) not in ((1, 9), (RECORD_FORMAT, 10)):
            raise ValueError("a schedule record of a format this fdbqueue does not know")
        _format, every, cron, next_due, last_run, runs, priority, group, value = fields[:9]
        due_version = fields[9] if len(fields) == 10 else 0
        return _Record(
            Timing(every, cron), next_due, last_run, runs, priority, group, value, due_version
        )

    def due(self, now: float, version: int) -> tuple[float, float] | None:
        """For a loop whose clock reads ``now`` at read version ``version``: the due time to
        run and the next due time (:meth:`Timing.following`, or :meth:`Timing.rebased` for
        a due time set by a clock that ran ahead: see the module docstring), or None when
        the schedule is not due. No database access."""
        if self.next_due <= now:
            return self.timing.following(self.next_due, now)
        lead = round(MAX_CLOCK_LEAD * VERSIONS_PER_SECOND)
        if version - self.due_version > lead and self.next_due > self.timing.next_after(
            now + MAX_CLOCK_LEAD
        ):
            return self.timing.rebased(self.next_due, now)
        return None


def due_version(version: int, now: float, next_due: float) -> int:
    """The read version at which ``next_due`` arrives for a client whose clock reads ``now``
    at read version ``version`` (a record's ``due_version``)."""
    return version + round((next_due - now) * VERSIONS_PER_SECOND)


#: How a queue writes one run: ``write(tr, encoded, priority, group)``, in ``tr`` (a
#: Transaction), through its own enqueue path (:meth:`fdbqueue._queues.base.QueueBase._write`).
WriteRun = Callable[[Any, bytes, "int | None", "Group | None"], object]


class Schedules:
    """The schedules of one queue, in its own store's metadata (see the module docstring).

    Args:
        store: the queue's own store (a sharded queue's root): the records live in
            ``store.schedules`` and its receipts make the firing exactly once.
    """

    def __init__(self, store: ItemStore) -> None:
        self.store = store
        self.subspace = store.schedules
        self.receipts = store.receipts

    def key(self, name: str) -> bytes:
        """The record key of the schedule ``name`` (checked by :func:`check_name`)."""
        key: bytes = self.subspace.pack((name,))
        return key

    def record(
        self,
        name: str,
        encoded: bytes,
        timing: Timing,
        priority: int | None,
        group: Group | None,
    ) -> bytes:
        """A new schedule's record (its next due time still to be set), packed to check that
        it fits: the record, for :meth:`put`.

        Raises:
            ValueError: the record would be over :data:`MAX_RECORD_BYTES` (a large value).
        """
        packed = _Record(timing, 0.0, None, 0, priority, group, encoded).pack()
        if len(packed) > MAX_RECORD_BYTES:
            raise ValueError(
                f"schedule {name!r}'s record would be {len(packed):,} bytes, over "
                f"FoundationDB's {MAX_RECORD_BYTES:,}-byte value limit: schedule a smaller value"
            )
        return packed

    def put(self, tr: AnyContext, name: str, packed: bytes) -> float:
        """Write the schedule ``name`` (``packed`` by :meth:`record`) in ``tr``, a
        Transaction; return its next due time. A schedule of that name already recorded
        with the same timing keeps its next due time; else it is computed from now. Its
        ``last_run`` and ``runs`` are kept. Cost: one point read (a read conflict on the
        record) and one set."""
        require_writable(tr, "schedule")
        new = _Record.unpack(packed)
        key = self.key(name)
        found = tr.get(key)
        old = _Record.unpack(bytes(found)) if found.present() else None
        now = _clock.now()
        if old is not None and old.timing == new.timing:
            next_due = old.next_due
        else:
            next_due = new.timing.next_after(now)
        arrives = due_version(tr.get_read_version().wait(), now, next_due)
        if old is not None and old.timing == new.timing and old.due_version:
            arrives = old.due_version
        last_run, runs = (None, 0) if old is None else (old.last_run, old.runs)
        kept = _Record(
            new.timing, next_due, last_run, runs, new.priority, new.group, new.value, arrives
        )
        tr[key] = kept.pack()
        return next_due

    def remove(self, tr: AnyContext, name: str) -> bool:
        """Clear the schedule ``name`` in ``tr``, a Transaction; whether it was there. Cost:
        one point read (a read conflict) and a clear."""
        require_writable(tr, "unschedule")
        key = self.key(name)
        if not tr.get(key).present():
            return False
        del tr[key]
        return True

    def listing(self, tr: AnyContext) -> list[ScheduleInfo]:
        """Every schedule, by name, read in ``tr``, a Transaction. Cost: one snapshot range
        read of the records (no conflicts)."""
        reader: Any = getattr(tr, "snapshot", tr)
        found = []
        for kv in reader.get_range(self.subspace.range().start, self.subspace.range().stop):
            (name,) = self.subspace.unpack(bytes(kv.key))
            record = _Record.unpack(bytes(kv.value))
            found.append(
                ScheduleInfo(
                    name=name,
                    value=decode_or_undecodable(self.store.codec, record.value),
                    every=record.timing.every,
                    cron=record.timing.cron,
                    group=record.group,
                    priority=record.priority,
                    next_due=record.next_due,
                    last_run=record.last_run,
                    runs=record.runs,
                )
            )
        return found

    def due_names(self, tr: AnyContext, now: float) -> list[str]:
        """The names of the schedules due for a loop whose clock reads ``now``
        (:meth:`_Record.due`), read in ``tr``, a Transaction. Cost: one snapshot range read
        of the records (and the read version)."""
        reader: Any = getattr(tr, "snapshot", tr)
        version: int = tr.get_read_version().wait()
        due = []
        for kv in reader.get_range(self.subspace.range().start, self.subspace.range().stop):
            if _Record.unpack(bytes(kv.value)).due(now, version) is not None:
                due.append(self.subspace.unpack(bytes(kv.key))[0])
        return due

    def enqueue_due(self, tr: AnyContext, write: WriteRun) -> int:
        """Enqueue a run of every schedule that fell due (by :func:`fdbqueue._clock.now`),
        each through ``write``; return how many were enqueued.

        Given a Database or Tenant: one read-only transaction finds the due schedules, then
        each runs in a transaction of its own, exactly once by the queue's receipts
        (:meth:`fire`); a schedule another loop fired meanwhile (a conflict) is left to it.
        Given a Transaction, all of it runs there (nothing committed).
        """
        if not is_database(tr):
            now = _clock.now()
            names = self.due_names(tr, now)
            return sum(self.fire(tr, name, write, now) is not None for name in names)
        found = run_in_retry_loop(tr, lambda inner: self.due_names(inner, _clock.now()))
        fired = 0
        for name in found:

            def body(inner: Any, name: str = name) -> Any:
                return self.fire(inner, name, write, _clock.now())

            due = self.receipts.run(
                tr, body, wrote=lambda result: result is not None, on_conflict=_CONFLICT
            )
            if due is not None and due != _CONFLICT:
                fired += 1
                logger.debug(
                    "schedule %r of %s: run due at %.3f enqueued", name, self.store.metric_name, due
                )
        return fired

    def fire(self, tr: AnyContext, name: str, write: WriteRun, now: float) -> float | None:
        """In ``tr`` (a Transaction): when the schedule ``name`` is due at ``now``
        (:meth:`_Record.due`), enqueue its run through ``write`` and move its next due time
        on (missed due times skipped: :meth:`Timing.following`; re-based on this clock:
        :meth:`Timing.rebased`); return the due time run, or None (not due, or gone).
        Cost: one point read (a read conflict on the record), the enqueue's, one set."""
        key = self.key(name)
        found = tr.get(key)
        if not found.present():
            return None
        record = _Record.unpack(bytes(found))
        version: int = tr.get_read_version().wait()
        when = record.due(now, version)
        if when is None:
            return None
        due, following = when
        write(tr, record.value, record.priority, record.group)
        tr[key] = _Record(
            record.timing,
            following,
            due,
            record.runs + 1,
            record.priority,
            record.group,
            record.value,
            due_version(version, now, following),
        ).pack()
        return due


def check_until_stopped(check: Callable[[], object], stop: threading.Event, where: str) -> None:
    """Call ``check()`` (a queue's :meth:`~fdbqueue.Queue.maintain`: its due runs, and
    now and then its finished jobs) now and then
    every :data:`CHECK_SECONDS` until ``stop`` is set: a worker loop's thread for its
    schedules. A failure (the cluster unreachable, say) is logged and the next check tries
    again. ``where`` names the queue in the log."""
    while not stop.is_set():
        try:
            check()
        except Exception:
            logger.warning("enqueuing the due runs of %s failed", where, exc_info=True)
        stop.wait(CHECK_SECONDS)
