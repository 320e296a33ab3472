"""Exactly-once operations when a commit's outcome is unknown: receipts.

A commit can fail in ways that leave its outcome unknown: ``commit_unknown_result`` (1021, the
most common cause being a cluster recovery) and ``transaction_timed_out`` (1031, when the
transaction's timeout ran out while the commit was on its way). The standard retry loop runs
the body again after a 1021; for FoundationDB's queue recipes that means a retried enqueue can
write its item twice, and a retried dequeue can remove one item without returning it and then
remove and return the next one. After a 1031 the loop gives up, although the commit may still
be applied.

fdbqueue makes every operation that runs in its own transaction (given a Database or Tenant)
take effect exactly once. Each call chooses a *call id* (16 random bytes) once. Each attempt
that writes also writes a *receipt*, in the same transaction as its effect::

    P + b"\\xff" + pack(("receipts", read version of the attempt, call id))
        ->  pack((wall-clock time of the attempt, in microseconds,))

adds a read conflict range on that receipt key (the attempt's *self-conflicting key*), and
remembers, in memory, what it would return (for a dequeue: the value it removed).

When an attempt's commit fails with any error other than ``not_committed`` (1020),
``transaction_too_old`` (1007) or a client-side usage error (2000-2999), which all mean "not
applied", the call *resolves* the attempt before doing anything else, in a transaction of its
own: it reads the receipt key (a read conflict) and, if the receipt is absent, adds a write
conflict range on it and commits. If the receipt is there, the attempt committed: the call
returns what that attempt returned. If the resolving transaction commits with the receipt
absent, the attempt can never commit any more (its read conflict on its own receipt key now
overlaps a newer write), so it surely was not applied; the call then goes on as the error says:
after a 1021 the body runs again, after a 1031 the call raises the 1031 (nothing was applied).
If the attempt lands while the resolving transaction runs, the resolving transaction conflicts,
retries, and finds the receipt. This is what FoundationDB's own client does before it reports a
1021 (``commitDummyTransaction`` over a key in both of the failed commit's conflict ranges);
fdbqueue does it itself so that it holds for 1031 too, where the client does not.

Receipts expire, by both clocks. Every transaction that writes one also clears, with blind
clears (no read, no conflict), the receipts of calls that have already returned (they will
never be looked up again): the bookkeeping of those is the process's, one per database (or
tenant) object and receipts subspace, shared by every queue object of that queue, so a queue
object built per call (a web handler's) leaves nothing behind it. And at most once a second
of versions per process and queue, it *sweeps* the receipts of clients that stopped: a
snapshot range read of the receipts older than :data:`RECEIPT_LIFETIME` seconds of read
versions (at most :data:`SWEEP_LIMIT`), and clears those whose wall-clock time is also more
than :data:`RECEIPT_LIFETIME` plus :data:`CLOCK_SKEW` seconds before this client's clock (a
receipt written without its time, by an older fdbqueue, by its versions alone).

A resolution trusts an absent receipt while *either* clock says the attempt is younger than
:data:`RECEIPT_LIFETIME`: its read version ``R`` is at most that many seconds of versions
after the attempt's (a sweep committed before ``R`` read at a version below ``R``, so it
cleared only receipts older than that), or this client's wall clock (the attempt's own, which
recorded the time) says so (a sweep also needs the sweeping client's clock to say
:data:`RECEIPT_LIFETIME` plus :data:`CLOCK_SKEW` passed, so a clock up to an hour fast cannot
clear a receipt early). A recovery moves versions on by about 100 s in a moment
(``MAX_VERSIONS_IN_FLIGHT``) but not the wall clock, so however many recoveries follow each
other while a call retries (``Faults(recovery=0.2)``: one in every five writing commits),
the 1021s they cause are resolved, not reported as unknown. Only an attempt older than
:data:`RECEIPT_LIFETIME` by both clocks raises :class:`UnknownResultError`, as does a
resolution that keeps failing (:data:`RESOLVE_ATTEMPTS` transactions in a row).

Storage bound: a queue holds one receipt per call in flight; plus, per process (per database
object) using the queue, the receipts of its calls that returned since its last writing
operation on the queue (cleared by that operation, up to :data:`FINISHED_PER_ATTEMPT` at a
time; about one per thread of the process, whatever the number of queue objects); plus the
last receipts of processes that stopped without clearing them, for :data:`RECEIPT_LIFETIME`
(by versions) and :data:`RECEIPT_LIFETIME` plus :data:`CLOCK_SKEW` (by the wall clock): at
most one per thread of each. A program that makes a call or two and exits (the command
line's one-shot commands, ``fdbqueue push``) clears its own with
:func:`clear_finished_receipts` before it ends, so processes started per call leave
nothing either. Each receipt is one key of about ``len(prefix) + 35`` bytes with an 8-byte
value.

Cost, per operation and in the same transaction: one set of the receipt, one read conflict
range on it, one clear per finished receipt of this process and queue; and at most once a
second of versions per process and queue, the sweep: a snapshot range read (at most
:data:`SWEEP_LIMIT` receipts, usually none) and a range clear (plus a clear per expired
receipt past one that is not). No extra transaction. After an error that may have been
applied, one resolving transaction. Operations given a Transaction run inside it and write
no receipt: the owner of the transaction owns its retry loop and its idempotence.

Source followed: FoundationDB's developer guide, "Transactions with unknown results" (make
transactions idempotent, for example with a unique key written in the transaction and checked
on retry), and ``fdbclient/NativeAPI.actor.cpp`` (``tryCommit``, ``commitDummyTransaction``)
and ``fdbclient/ReadYourWrites.cpp`` (a timed-out commit may still be in flight); for the
two clocks, FoundationDB's ``MAX_VERSIONS_IN_FLIGHT`` (a recovery's jump of versions).
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, ParamSpec, TypeVar, cast, overload

from fdb.subspace_impl import Subspace

from fdbqueue import _clock, _keycodec, metrics
from fdbqueue._transactions.transactional import (
    NOT_COMMITTED,
    commit,
    is_database,
    is_fdb_error,
    note_retry,
    run_in_retry_loop,
    surely_not_applied,
    transactional,
)
from fdbqueue.errors import UnknownResultError

__all__ = [
    "CLOCK_SKEW",
    "RECEIPT_LIFETIME",
    "Receipts",
    "UnknownResultError",
    "clear_finished_receipts",
    "exactly_once",
    "surely_not_applied",
]

P = ParamSpec("P")
R = TypeVar("R")

#: Seconds a receipt whose call never returned is kept, by read versions (about 1,000,000 per
#: second) and by the wall clock: a day.
RECEIPT_LIFETIME = 86_400.0
#: Seconds by which clients' wall clocks may disagree: a sweep clears a receipt once its
#: lifetime plus this much passed by the sweeping client's clock, so a clock up to this far
#: ahead of the writer's does not shorten the writer's window.
CLOCK_SKEW = 3_600.0
VERSIONS_PER_SECOND = 1_000_000
MICROSECONDS_PER_SECOND = 1_000_000
#: Receipts past their lifetime in versions one sweep reads (and clears) at most.
SWEEP_LIMIT = 100
CALL_ID_BYTES = 16
#: Resolving transactions tried in a row before a call gives up with UnknownResultError.
RESOLVE_ATTEMPTS = 10
#: Finished receipts one writing attempt clears at most.
FINISHED_PER_ATTEMPT = 64
#: Times a call whose commit succeeded runs again because its result was already stale
#: (``still_good``) when the commit landed, before it returns that result anyway.
STALE_RERUNS = 2


def _always(_result: Any) -> bool:
    return True


class Attempt(NamedTuple):
    """An attempt that wrote a receipt (:meth:`Receipts.write_receipt`)."""

    #: its receipt key
    receipt: bytes
    #: its read version
    version: int
    #: what the call returns if this attempt is the one applied
    result: Any
    #: the finished receipts it cleared (kept again if it is not applied)
    finished: Sequence[bytes]
    #: the process's bookkeeping its receipt goes to once its call returns
    books: Books
    #: this client's wall clock at the attempt, in seconds since the epoch
    wall_time: float = 0.0


#: What :meth:`Receipts.write_receipt` wrote, as the fields of an :class:`Attempt` without its
#: result and books: the receipt key, the read version, the finished receipts cleared, the
#: wall-clock seconds. (A plain tuple: one is made per writing call, on the hot path.)
Written = tuple[bytes, int, Sequence[bytes], float]
#: The finished receipts of an attempt that cleared none.
_NONE_FINISHED: tuple[bytes, ...] = ()


def _attempt(written: Written, result: Any, books: Books) -> Attempt:
    """The :class:`Attempt` of a receipt written (:meth:`Receipts.write_receipt`)."""
    receipt, version, finished, wall_time = written
    return Attempt(receipt, version, result, finished, books, wall_time)


#: What :meth:`Receipts.settle` returns when the attempt is to run again.
RETRY: Any = object()


class Books:
    """What one process keeps of one queue's receipts in one database: the receipts of its
    calls that returned (its next writing attempt on the queue clears them; deque appends and
    pops are thread-safe) and the read version from which it sweeps again."""

    __slots__ = ("finished", "next_sweep")

    def __init__(self) -> None:
        self.finished: collections.deque[bytes] = collections.deque()
        self.next_sweep = 0


_BOOKS_LOCK = threading.Lock()
#: The process's :class:`Books`, per database (or tenant) object, per receipts subspace (the
#: first key of its range). Weak: a database object the program dropped drops its books.
_BOOKS: weakref.WeakKeyDictionary[Any, dict[bytes, Books]] = weakref.WeakKeyDictionary()


def _books_of(database: Any, begin: bytes) -> Books | None:
    """The process's books of the receipts starting at ``begin`` in ``database``; None when
    ``database`` cannot be referenced weakly (the caller keeps books of its own then)."""
    registry = _BOOKS
    try:
        per_database = registry.get(database)
    except TypeError:
        return None
    books = None if per_database is None else per_database.get(begin)
    if books is None:
        with _BOOKS_LOCK:
            books = registry.setdefault(database, {}).setdefault(begin, Books())
    return books


def clear_finished_receipts(database: Any) -> int:
    """Clear the receipts of this process's calls through ``database`` (a Database or Tenant
    object) that returned, of every queue, in transactions of their own; return how many.

    For a program about to exit (the command line's one-shot commands): nothing else would
    clear them before they expire (:data:`RECEIPT_LIFETIME`). Threads still calling may add
    more meanwhile; those stay. Nothing happens (no transaction) when there are none.

    Raises:
        FDBError: a FoundationDB error that is not retryable (a timeout, 1031): the receipts
            not cleared stay, to expire or to be cleared by a later call.

    Cost: one transaction per 10,000 receipts, one blind clear each (no read, no conflict).
    """
    try:
        per_database = dict(_BOOKS.get(database) or {})
    except TypeError:
        return 0
    cleared = 0
    for books in per_database.values():
        keys: list[bytes] = []
        try:
            while True:
                keys.append(books.finished.popleft())
        except IndexError:
            pass
        for start in range(0, len(keys), _CLEARS_PER_TRANSACTION):
            chunk = keys[start : start + _CLEARS_PER_TRANSACTION]
            try:
                run_in_retry_loop(database, functools.partial(_clear_keys, chunk))
            except BaseException:
                books.finished.extend(keys[start:])
                raise
            cleared += len(chunk)
    return cleared


#: Receipts :func:`clear_finished_receipts` clears in one transaction at most.
_CLEARS_PER_TRANSACTION = 10_000


def _clear_keys(keys: list[bytes], tr: Any) -> None:
    for key in keys:
        del tr[key]


#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.receipts")


def _note_unknown_result(code: int, applied: bool) -> None:
    """Log (INFO) and count a commit whose result was unknown, now resolved by its receipt."""
    logger.info(
        "fdbqueue: a commit's result was unknown (FoundationDB error %d); its receipt shows it "
        "was %s",
        code,
        "applied" if applied else "not applied (it is retried)",
    )
    metrics.add("unknown_results", at_once=True, code=code)


def _note_stale(code: int | None) -> None:
    """Log (INFO) an applied attempt whose result was stale when the call learned of it."""
    logger.info(
        "fdbqueue: an applied attempt's result was stale when its outcome was known (%s): "
        "running it again",
        "a commit that landed late" if code is None else f"FoundationDB error {code} resolved",
    )


class Receipts:
    """The receipts of one queue, under its metadata subspace (see the module docstring).

    Args:
        metadata: the queue's metadata Subspace; receipts live in ``metadata["receipts"]``.
        lifetime: seconds a receipt is kept, by both clocks (default
            :data:`RECEIPT_LIFETIME`).
        enabled: False turns receipts off: :meth:`run` is then the standard retry loop, and a
            commit with an unknown outcome can apply an operation twice (the recipes'
            behaviour), or apply it although the call raised 1031.
    """

    def __init__(
        self, metadata: Subspace, lifetime: float = RECEIPT_LIFETIME, *, enabled: bool = True
    ) -> None:
        self.enabled = enabled
        self.subspace = metadata["receipts"]
        self.prefix: bytes = self.subspace.key()
        receipts = self.subspace.range()
        self.begin: bytes = receipts.start
        self.end: bytes = receipts.stop
        self.lifetime = lifetime
        self.lifetime_versions = int(lifetime * VERSIONS_PER_SECOND)
        self.lifetime_microseconds = int(lifetime * MICROSECONDS_PER_SECOND)
        # Books of this object's own, for a database object that cannot be referenced weakly
        # (the process's books are kept per database object: :func:`_books_of`).
        self._own_books = Books()
        # The database object :meth:`books` was last given (weakly), the registry it looked
        # in (tests replace :data:`_BOOKS`) and the books it found there.
        self._last_books: tuple[weakref.ref[Any], Any, Books] | None = None
        # The value the receipts written within one wall-clock second share: (that second,
        # in whole seconds since the epoch; its value, the second in microseconds packed as
        # the tuple layer packs it).
        self._second_value: tuple[int, bytes] = (-1, b"")

    def books(self, database: Any) -> Books:
        """The process's bookkeeping of these receipts in ``database`` (:class:`Books`).
        Cost: a weak reference's call when ``database`` is the object of the last call (a
        queue object mostly sees one), else :func:`_books_of`'s lookups."""
        last = self._last_books
        if last is not None and last[0]() is database and last[1] is _BOOKS:
            return last[2]
        registry = _BOOKS
        books = _books_of(database, self.begin)
        if books is None:
            return self._own_books
        self._last_books = (weakref.ref(database), registry, books)
        return books

    def run(
        self,
        database: Any,
        body: Callable[[Any], R],
        *,
        wrote: Callable[[R], bool] = _always,
        on_conflict: Any = None,
        still_good: Callable[[R, int], bool] | None = None,
    ) -> R:
        """Run ``body(tr)`` in a retry loop so that its effect commits exactly once.

        Args:
            database: a Database or Tenant.
            body: the operation; it may run several times, and what the committed run
                returned is returned.
            wrote: tells from an attempt's result whether the attempt wrote anything (a
                receipt is written only then; a read-only attempt has no outcome to lose).
            on_conflict: when not None, a conflict (1020) is not retried: this value is
                returned instead.
            still_good: ``still_good(result, version)`` tells whether what an applied
                attempt returned is still good at ``version``, the version at which the
                call learns that it was applied: the resolving transaction's read version
                after an unknown result (a recovery moves versions about 100 s on
                meanwhile), else the commit version. When it is not, the call runs the
                body again (a claim whose lease expired meanwhile claims again; the lease
                it granted has expired, and the next claim redelivers its item): always
                after an unknown result, at most :data:`STALE_RERUNS` times after a
                commit that succeeded (a lease shorter than a commit), then it returns
                the result.

        Returns:
            What the attempt that committed returned.

        Raises:
            UnknownResultError: an attempt's outcome can no longer be found out.
            FDBError: a FoundationDB error that is not retryable (1031 among them); the
                operation then surely did not take effect.
            Any error of ``body``; nothing took effect then either.
        """
        receipted = self.enabled
        if receipted:
            call_id = os.urandom(CALL_ID_BYTES)
            books = self.books(database)
        else:
            call_id, books = b"", self._own_books  # (no receipt: never used)
        tr = database.create_transaction()
        stale_commits = 0
        attempt_counts = metrics.ATTEMPT_COUNTS
        while True:
            written: Written | None = None
            counts: metrics.Pending = []
            token = attempt_counts.set(counts)
            try:
                result = body(tr)
                if receipted and (wrote is _always or wrote(result)):
                    written = self.write_receipt(tr, call_id, books)
                commit(tr)
            except Exception as error:
                attempt_counts.reset(token)
                attempt = None if written is None else _attempt(written, result, books)
                settled = self.settle(database, tr, error, attempt, counts, on_conflict, still_good)
                if settled is RETRY:
                    continue
                return settled  # type: ignore[no-any-return]
            except BaseException:  # cancelled (asyncio) before its commit was sent
                attempt_counts.reset(token)
                if written is not None:
                    self.unfinish(_attempt(written, None, books))
                raise
            attempt_counts.reset(token)
            if written is None:
                if counts:  # empty while nothing records and no action waits
                    metrics.committed(counts)
                return result
            books.finished.append(written[0])  # (finish, without its call)
            if counts:
                metrics.committed(counts)
            if (
                still_good is not None
                and stale_commits < STALE_RERUNS
                and not still_good(result, tr.get_committed_version())
            ):
                stale_commits += 1
                _note_stale(None)
                tr.reset()
                continue
            return result

    def write_receipt(self, tr: Any, call_id: bytes, books: Books) -> Written:
        """Write the receipt of an attempt of the call ``call_id`` that wrote, and clear the
        receipts of calls that returned (``books``', up to :data:`FINISHED_PER_ATTEMPT`) and,
        once a second of versions per ``books``, sweep those past their lifetime
        (:meth:`sweep`); what :class:`Attempt` holds of it (:data:`Written`: the
        :class:`Attempt` is made only for :meth:`settle`, when the commit fails). The receipt
        key is ``self.subspace.pack((read_version, call_id))``, packed by the key codec
        (:mod:`fdbqueue._keycodec`: the tuple layer's bytes) under the subspace's prefix. Its
        value is the tuple ``(microseconds,)``
        of this client's wall clock, floored to the whole second: the receipts of one second
        share one packed value (a sweep waits :data:`CLOCK_SKEW` beyond the lifetime, so a
        time up to a second early never lets one clear a receipt a resolution still trusts,
        which goes by the attempt's exact time). Cost: a set, a read conflict key, a clear
        per finished receipt; at most once a second the sweep's snapshot range read and
        clears; the read version, fetched already by the body's reads."""
        read_version: int = tr.get_read_version().wait()
        seconds = _clock.now()
        receipt = _keycodec.pack_int_bytes(self.prefix, read_version, call_id)
        # Self-conflicting, so that a resolution can fence it off. The read conflict must come
        # before the write: FoundationDB adds none for a key the transaction already wrote.
        tr.add_read_conflict_key(receipt)
        shared = self._second_value
        if shared[0] != int(seconds):
            second = int(seconds)
            shared = self._second_value = (
                second,
                _keycodec.pack_int(b"", second * MICROSECONDS_PER_SECOND),
            )
        tr[receipt] = shared[1]
        if read_version >= books.next_sweep:  # at most once a second of versions
            books.next_sweep = read_version + VERSIONS_PER_SECOND
            self.sweep(tr, read_version, round(seconds * MICROSECONDS_PER_SECOND))
        waiting = books.finished
        try:  # usually this process's last call on the queue: one receipt
            key = waiting.popleft()
        except IndexError:  # none (or another thread took the last one)
            return receipt, read_version, _NONE_FINISHED, seconds
        del tr[key]
        if not waiting:
            return receipt, read_version, (key,), seconds
        finished = [key]
        try:
            while len(finished) < FINISHED_PER_ATTEMPT:
                key = waiting.popleft()
                finished.append(key)
                del tr[key]
        except IndexError:  # another thread took the last one
            pass
        return receipt, read_version, finished, seconds

    def sweep(self, tr: Any, read_version: int, now: int) -> None:
        """Clear, in ``tr``, the receipts past their lifetime by both clocks at
        ``read_version`` and this client's wall clock ``now`` (microseconds): of those more
        than the lifetime in versions before ``read_version`` (the first
        :data:`SWEEP_LIMIT`), the ones written more than the lifetime plus
        :data:`CLOCK_SKEW` before ``now`` by their writers' clocks, or without a time.
        Cost: nothing before versions pass the lifetime; then a snapshot range read (no
        conflict), a range clear up to the first receipt kept and a clear per receipt
        cleared after it."""
        horizon = read_version - self.lifetime_versions
        if horizon <= 0:
            return
        end: bytes = self.subspace.pack((horizon,))
        old = list(tr.snapshot.get_range(self.begin, end, limit=SWEEP_LIMIT))
        if not old:
            return
        skew = int(CLOCK_SKEW * MICROSECONDS_PER_SECOND)
        written_before = now - self.lifetime_microseconds - skew
        kept: bytes | None = None  # the first receipt kept: the range clear stops there
        for record in old:
            expired = _written_at(bytes(record.value)) < written_before
            if kept is None and not expired:
                kept = bytes(record.key)
            elif kept is not None and expired:
                del tr[record.key]
        if kept is None and len(old) == SWEEP_LIMIT:
            kept = bytes(old[-1].key) + b"\x00"  # more may follow: the next sweep's
        tr.clear_range(self.begin, end if kept is None else kept)

    def finish(self, attempt: Attempt | None) -> None:
        """The call returned with ``attempt``'s result (None: it wrote no receipt): its
        receipt can go, cleared by the next writing attempt of this process on this queue."""
        if attempt is not None:
            attempt.books.finished.append(attempt.receipt)

    def unfinish(self, attempt: Attempt | None) -> None:
        """``attempt`` was not applied: the finished receipts it would have cleared remain
        for the next attempt to clear."""
        if attempt is not None:
            attempt.books.finished.extend(attempt.finished)

    def settle(
        self,
        database: Any,
        tr: Any,
        error: Exception,
        attempt: Attempt | None,
        counts: metrics.Pending,
        on_conflict: Any = None,
        still_good: Callable[[Any, int], bool] | None = None,
    ) -> Any:
        """What a call does after its attempt in ``tr`` raised ``error`` (``attempt``: the
        receipt it wrote, or None; ``counts``: its metrics, :func:`fdbqueue.metrics.pending`):
        :data:`RETRY` (``tr`` was reset and backed off: run the body again), or what the call
        returns: ``attempt.result`` when its commit turned out applied (:meth:`_resolve`;
        ``counts`` are recorded then) and the result is ``still_good`` at the version that was
        found at (else :data:`RETRY`: ``tr`` was reset, run the body again; see :meth:`run`),
        ``on_conflict`` after a conflict when that is not None.

        Raises:
            ``error`` itself when it is not a FoundationDB error (nothing was applied), a
            FoundationDB error that is not retryable, or UnknownResultError (:meth:`run`).
        """
        if not is_fdb_error(error):
            self.unfinish(attempt)
            raise error
        code: int = error.code  # type: ignore[attr-defined]
        if attempt is not None and not surely_not_applied(code):
            applied, version = self._resolve(database, attempt)
            _note_unknown_result(code, applied)
            if applied:
                self.finish(attempt)
                metrics.committed(counts)
                if still_good is None or still_good(attempt.result, version):
                    return attempt.result  # it was applied: what it returned
                _note_stale(code)
                tr.reset()
                return RETRY
        self.unfinish(attempt)
        if on_conflict is not None and code == NOT_COMMITTED:
            return on_conflict
        tr.on_error(error).wait()  # retryable: reset and back off; else raises
        note_retry(error)
        return RETRY

    def _resolve(self, database: Any, attempt: Attempt) -> tuple[bool, int]:
        """Find out for good whether ``attempt`` committed (see the module docstring).

        Returns True when it did, False when it did not and never will; and the read
        version at which that was found.

        Raises:
            UnknownResultError: the attempt is too old to tell (its lifetime passed by both
                clocks), or :data:`RESOLVE_ATTEMPTS` resolving transactions in a row failed
                with errors that are not retryable.
        """
        failures = 0
        tr = database.create_transaction()
        while True:
            try:
                read_version: int = tr.get_read_version().wait()
                if (
                    read_version - attempt.version > self.lifetime_versions
                    and _clock.now() - attempt.wall_time > self.lifetime
                ):
                    raise UnknownResultError(
                        "an earlier attempt of this operation ended with an unknown commit "
                        f"outcome more than {self.lifetime_versions // VERSIONS_PER_SECOND} s "
                        "ago (by read versions and by the wall clock): whether it took effect "
                        "cannot be found out"
                    )
                if tr.get(attempt.receipt).present():
                    return True, read_version
                tr.add_write_conflict_key(attempt.receipt)  # fence the attempt off
                tr.commit().wait()
                return False, read_version
            except Exception as error:
                if not is_fdb_error(error):
                    raise
                try:
                    tr.on_error(error).wait()
                except Exception as final:
                    # Not retryable (a timeout, say): a new transaction may still get through.
                    failures += 1
                    if failures >= RESOLVE_ATTEMPTS:
                        raise UnknownResultError(
                            "the outcome of a commit that failed is unknown, and "
                            f"{failures} transactions trying to find it out failed ({final})"
                        ) from final
                    tr = database.create_transaction()


def _written_at(value: bytes) -> int:
    """The wall-clock time (microseconds) a receipt's value records; 0 for a receipt written
    without one (by its versions alone, it has expired)."""
    try:
        recorded = _keycodec.unpack_int(value, b"")
    except Exception:  # an empty value (an older fdbqueue's), or anything else
        return 0
    return recorded[0] if recorded and isinstance(recorded[0], int) else 0


def _call_at(
    method: Callable[..., R], queue: Any, rest: tuple[Any, ...], kwargs: dict[str, Any], tr: Any
) -> R:
    """``method(queue, tr, *rest, **kwargs)``: an attempt of a call given ``tr`` by position."""
    return method(queue, tr, *rest, **kwargs)


def _call_with(method: Callable[..., R], queue: Any, kwargs: dict[str, Any], tr: Any) -> R:
    """``method(queue, **kwargs)`` with ``tr`` as the keyword ``tr``: an attempt of a call
    given ``tr`` by keyword."""
    return method(queue, **{**kwargs, "tr": tr})


@overload
def exactly_once(function: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def exactly_once(
    *,
    wrote: Callable[[Any], bool] = _always,
    still_good: Callable[[Any, int], bool] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def exactly_once(
    function: Callable[P, R] | None = None,
    /,
    *,
    wrote: Callable[[Any], bool] = _always,
    still_good: Callable[[Any, int], bool] | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a queue method ``method(self, tr, ...)`` to take effect exactly once.

    Given a Database or Tenant as ``tr`` (by position or keyword), the method runs in
    :meth:`Receipts.run` with the object's receipts (``self.receipts``: a shard's, an end's
    or a router's). Given a Transaction, it behaves as with :func:`fdbqueue.transactional`: it
    runs inside the caller's transaction and commits nothing.

    Args:
        wrote: tells from the method's result whether it wrote anything (see
            :meth:`Receipts.run`).
        still_good: whether an applied result is still good (see :meth:`Receipts.run`).
    """

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        inside: Callable[..., Any] = transactional(cast(Callable[..., Any], method))

        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if len(args) > 1:  # ``tr`` by position: the usual call
                context = args[1]
                if not is_database(context):
                    returned: R = inside(*args, **kwargs)
                    return returned
                queue, rest = args[0], args[2:]
                body: Callable[[Any], R] = functools.partial(_call_at, method, queue, rest, kwargs)
            else:
                context = kwargs.get("tr")
                if not is_database(context):
                    returned = inside(*args, **kwargs)
                    return returned
                queue = args[0]
                body = functools.partial(_call_with, method, queue, kwargs)
            receipts: Receipts = queue.receipts  # type: ignore[attr-defined]
            result: R = receipts.run(context, body, wrote=wrote, still_good=still_good)
            return result

        return wrapper

    if function is not None:
        return decorate(function)
    return decorate
