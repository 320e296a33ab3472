"""High-contention consumption: the staging technique of FoundationDB's queue recipes.

With plain dequeues, every consumer reads the same first item, so only one commit per round
succeeds and the others fail with 1020 and back off. Staging replaces that race with a line:

1. **Fast path.** When no requests are waiting, take the first item directly, as a plain
   dequeue does (one extra snapshot read checks for waiting requests). If that commit
   conflicts, or requests are waiting, register instead; this client then skips the fast path
   for the next half second (:data:`CONTENDED_FOR`), since under load it would only conflict.
2. **Register.** Write a request key ``requests[end][(read version, random)]``: a blind write
   (no read, so registering never conflicts), ordered by the read version at which it was made.
3. **Serve.** The requester whose request is first in line serves a batch: one transaction
   reads up to ``batch_size`` oldest requests and as many items from the queue's end, clears
   both, and moves each item into the result slot of its request (:mod:`fdbqueue.results`);
   if the queue runs out, the remaining requests get an "empty" result. A batch also stops
   once its values reach about 5,000,000 bytes, so a serving transaction always fits
   FoundationDB's 10,000,000-byte limit. Its read conflict ranges cover only the requests and
   items it read, so it conflicts only with another server or a fast path taking the same
   items. If requests remain after the batch, it bumps a *turn* key so that the requester now
   first in line wakes up and serves the next batch.
4. **Collect.** Each requester waits on watches of its result key and of the turn key (no
   polling; a bounded backoff of 10 ms to 1 s only if a watch fails or nothing fires), then
   takes its result in a transaction that clears it.

Nothing is lost and nothing jams when a requester dies. If the request first in line is more
than :data:`STALLED_AFTER` seconds old (of versions) and still unserved, its requester died
before leading, and any waiter serves in its place. A result not collected within
``abandon_after`` seconds goes back to its item's original key through the next operation that
takes from the queue, of any kind (:mod:`fdbqueue.results`). A requester whose wait runs past
its deadline (``dequeue(block=True, timeout=...)``), or whose transactions fail for good (a
1031 timeout), withdraws its request, or collects its result if it was served meanwhile: no
item stays reserved for a consumer outside its call.
A requester whose result was given back (it was too slow to collect) finds its request gone
and registers again; one whose served value cannot be decoded moves it to the dead letters and
registers again.

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("requests", end, registered version, random)) -> b""
    pack(("results", registered version, random, end))  -> see fdbqueue.results
    pack(("turn", end))                                  -> int64 LE, bumped with atomic adds

Source followed: FoundationDB's "Queues" and "Priority Queues" recipes, "High-Contention
Dequeue/Pop Operations" (the staging technique), and the history of FoundationDB's
``layers/containers/highcontention/queue.py`` (which polled with sleeps and lost items whose
requester died; this module watches instead and gives abandoned results back).
"""

from __future__ import annotations

import functools
import math
import struct
import time
from typing import Any

from fdbqueue.receipts import RESOLVE_ATTEMPTS, surely_not_applied
from fdbqueue.results import ServedResults, TakeItems
from fdbqueue.store import ItemStore, check_seconds, random_element
from fdbqueue.taking import MOVED_ASIDE
from fdbqueue.transaction_bytes import LIBRARY_TRANSACTION_BUDGET
from fdbqueue.transactional import is_fdb_error
from fdbqueue.waiting import wait_for_any

__all__ = ["DEFAULT_ABANDON_AFTER", "DEFAULT_BATCH_SIZE", "Staging", "check_staging_arguments"]

#: Seconds after which an uncollected result is given back to the queue.
DEFAULT_ABANDON_AFTER = 10.0
#: Most requests one serving transaction fulfils.
DEFAULT_BATCH_SIZE = 64
#: The largest batch_size accepted.
MAX_BATCH_SIZE = 10_000
#: The longest abandon_after accepted, in seconds (a day).
MAX_ABANDON_AFTER = 24 * 60 * 60
#: Most batches a leader serves before handing over to the next requester in line.
LEADER_ROUNDS = 8
#: Seconds this client skips the fast path after it found contention (a conflict or a line
#: of waiting requests), so that under load it registers at once instead of conflicting first.
CONTENDED_FOR = 0.5
#: Seconds of versions after which an unserved request first in line counts as abandoned
#: (its requester died before leading): any waiter then serves in its place.
STALLED_AFTER = 1.0
VERSIONS_PER_SECOND = 1_000_000
NOT_COMMITTED = 1020
TIMED_OUT = 1031

_ONE = struct.pack("<q", 1)
_REGISTER = object()  # the fast path's answer when the caller should register


def check_staging_arguments(batch_size: Any, abandon_after: Any) -> tuple[int, float]:
    """Validate ``batch_size`` and ``abandon_after`` when a queue is made.

    Raises:
        TypeError: ``batch_size`` is not an int, or ``abandon_after`` not a number.
        ValueError: ``batch_size`` not in ``[1, 10000]``; ``abandon_after`` NaN, not > 0, or
            over a day.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be an int, not {type(batch_size).__name__}")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be between 1 and {MAX_BATCH_SIZE}, not {batch_size}")
    seconds = check_seconds(abandon_after, "abandon_after", allow_infinity=True)
    if seconds > MAX_ABANDON_AFTER:
        raise ValueError(
            f"abandon_after must be at most {MAX_ABANDON_AFTER} seconds, not {abandon_after}"
        )
    return batch_size, seconds


class Staging:
    """High-contention taking from one end of a queue (see the module docstring).

    Args:
        store: the queue's items and metadata.
        results: the queue's served results (shared by both ends of a priority queue).
        end: the end's name: ``"front"`` for a Queue, ``"min"`` or ``"max"`` for a
            PriorityQueue; each end has its own line of requests.
        take_items: removes up to ``n`` items from that end in a transaction.
        batch_size: most requests one serving transaction fulfils (validated by
            :func:`check_staging_arguments`).
        abandon_after: seconds after which an uncollected result goes back to the queue.
    """

    def __init__(
        self,
        store: ItemStore,
        results: ServedResults,
        end: str,
        take_items: TakeItems,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        abandon_after: float = DEFAULT_ABANDON_AFTER,
    ) -> None:
        self.store = store
        self.results = results
        self.end = end
        self.take_items = take_items
        self.batch_size, abandon_after = check_staging_arguments(batch_size, abandon_after)
        self.abandon_after_versions = math.ceil(abandon_after * VERSIONS_PER_SECOND)
        self._skip_fast_path_until = 0.0  # monotonic time; see CONTENDED_FOR
        self.requests = store.metadata["requests"][end]
        self.turn_key: bytes = store.metadata.pack(("turn", end))
        requests = self.requests.range()
        self.requests_begin: bytes = requests.start
        self.requests_end: bytes = requests.stop

    # -- the requester's side ---------------------------------------------------------------

    def take(self, database: Any, deadline: float | None = None) -> Any:
        """Take one item's value from this end, or None when the queue is empty.

        Args:
            database: a Database or Tenant.
            deadline: a ``time.monotonic()`` time after which a registered request is
                withdrawn and None returned (unless it was served meanwhile); None waits
                until the request is served.

        Cost without contention: one transaction (the fast path: a snapshot read of the
        requests, the plain dequeue's read, clear and atomic add). Under contention: a
        registration transaction, a collecting transaction, and a share of a serving
        transaction, whose cost is spread over up to ``batch_size`` requests.
        """
        if time.monotonic() >= self._skip_fast_path_until:
            outcome = self._fast_path(database)
            while outcome is MOVED_ASIDE:
                outcome = self._fast_path(database)
            if outcome is not _REGISTER:
                return outcome
            self._skip_fast_path_until = time.monotonic() + CONTENDED_FOR
        request_key = self._register(database)
        try:
            return self._wait_for_result(database, request_key, deadline)
        except Exception as error:
            if not is_fdb_error(error):
                raise
            # A transaction failed for good (a timeout, say): take the request back, so that
            # a call that raises leaves nothing reserved; if it was served, return the value.
            withdrawn = self._withdraw_despite_timeouts(database, request_key)
            if withdrawn is not None:
                return withdrawn
            raise

    def _wait_for_result(self, database: Any, request_key: bytes, deadline: float | None) -> Any:
        backoff = 0.01
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                return self._withdraw(database, request_key)
            state, detail = self.store.receipts.run(
                database,
                functools.partial(self._collect_or_watch, request_key=request_key),
                wrote=lambda outcome: outcome[0] in ("done", "poison"),
            )
            if state == "done":
                return detail
            if state in ("lost", "poison"):
                request_key = self._register(database)
                continue
            if state in ("first", "stalled"):
                # First in line: lead. Or the request first in line is old and unserved: its
                # requester died before leading, so serve in its place.
                self._cancel(detail)
                self._lead(database)
                continue
            wait = backoff if deadline is None else min(backoff, deadline - time.monotonic())
            try:
                woken = wait_for_any(detail, max(0.0, wait))
            finally:  # KeyboardInterrupt included: no watch left behind
                self._cancel(detail)
            backoff = 0.01 if woken else min(backoff * 2, 1.0)  # the fallback, bounded

    @staticmethod
    def _cancel(watches: list[Any]) -> None:
        for watch in watches:
            watch.cancel()

    def _fast_path(self, database: Any) -> Any:
        """Take the first item at once, or return ``_REGISTER`` (requests are waiting, or the
        commit conflicted)."""

        def body(tr: Any) -> Any:
            if list(tr.snapshot.get_range(self.requests_begin, self.requests_end, limit=1)):
                return _REGISTER
            taken = self.results.take_with_give_back(tr, self.take_items, 1)
            if not taken.items:
                return MOVED_ASIDE if taken.moved_aside else None
            self.store.add_to_size(tr, -1)
            return taken.items[0].value

        return self.store.receipts.run(
            database,
            body,
            wrote=lambda outcome: outcome is not None and outcome is not _REGISTER,
            on_conflict=_REGISTER,
        )

    def _register(self, database: Any) -> bytes:
        def body(tr: Any) -> bytes:
            registered: int = tr.get_read_version().wait()
            key: bytes = self.requests.pack((registered, random_element()))
            tr[key] = b""
            return key

        return self.store.receipts.run(database, body)

    def _result_key(self, request_key: bytes) -> bytes:
        registered, random = self.requests.unpack(request_key)
        return self.results.key(self.end, registered, random)

    def _collect_or_watch(self, tr: Any, request_key: bytes) -> tuple[str, Any]:
        """One read-only look (or one collecting write) at the request's state."""
        result_key = self._result_key(request_key)
        collected = self.results.collect(tr, result_key)
        if collected.found:
            return ("poison", None) if collected.poison else ("done", collected.value)
        if not tr.snapshot.get(request_key).present():
            return "lost", None
        first = list(tr.snapshot.get_range(self.requests_begin, self.requests_end, limit=1))
        if first and first[0].key == request_key:
            return "first", [tr.watch(result_key)]
        if first:
            registered: int = self.requests.unpack(first[0].key)[0]
            if tr.get_read_version().wait() - registered > STALLED_AFTER * VERSIONS_PER_SECOND:
                return "stalled", []
        return "wait", [tr.watch(result_key), tr.watch(self.turn_key)]

    def _withdraw_despite_timeouts(self, database: Any, request_key: bytes) -> Any:
        """:meth:`_withdraw`, tried again after timeouts (1031) up to
        :data:`~fdbqueue.receipts.RESOLVE_ATTEMPTS` times."""
        for attempt in range(RESOLVE_ATTEMPTS):
            try:
                return self._withdraw(database, request_key)
            except Exception as error:
                timed_out = is_fdb_error(error) and error.code == TIMED_OUT  # type: ignore[attr-defined]
                if not timed_out or attempt == RESOLVE_ATTEMPTS - 1:
                    raise
        return None  # not reached

    def _withdraw(self, database: Any, request_key: bytes) -> Any:
        """The caller's deadline passed: take the request back, or collect its result if it
        was served meanwhile. Returns the value, or None."""

        def body(tr: Any) -> tuple[str, Any]:
            collected = self.results.collect(tr, self._result_key(request_key))
            if collected.found:
                return "done", collected.value
            if tr.get(request_key).present():  # a read conflict: a server and we, not both
                del tr[request_key]
                return "withdrawn", None
            return "lost", None

        _state, value = self.store.receipts.run(
            database, body, wrote=lambda outcome: outcome[0] != "lost"
        )
        return value

    # -- the server's side ------------------------------------------------------------------

    def _lead(self, database: Any) -> None:
        """Serve batches while there are requests, at most :data:`LEADER_ROUNDS` of them.

        The requester first in line leads: its first batch includes its own request, and it
        keeps serving whoever registered meanwhile, so batches stay large and only one client
        serves at a time. When it stops with requests still waiting, its last batch bumps the
        turn key, waking the requester now first in line to lead next.
        """
        for round_number in range(LEADER_ROUNDS):
            last = round_number == LEADER_ROUNDS - 1
            if self.serve(database, hand_over=last) == 0:
                return

    def serve(self, database: Any, hand_over: bool = True) -> int:
        """Try once to fulfil the oldest ``batch_size`` requests; return how many requests it
        served plus how many poison items it moved aside (0: nothing to do, or it lost a race).

        A conflict with another server or a fast-path consumer is not retried (someone else
        made progress); other retryable errors are retried, and an error that may have been
        applied (1031) ends the attempt, as the next look finds out what happened. Cost: one
        transaction with a read version, a range read of the requests, the reads that take
        the items, a snapshot read of the oldest results (to give abandoned ones back), and
        per request one clear and one or two sets.
        """
        tr = database.create_transaction()
        while True:
            try:
                progress = self._serve_batch(tr, hand_over)
                tr.commit().wait()
                return progress
            except Exception as error:
                if not is_fdb_error(error):
                    raise
                code: int = error.code  # type: ignore[attr-defined]
                if code == NOT_COMMITTED:
                    return 0
                try:
                    tr.on_error(error).wait()
                except Exception:
                    if surely_not_applied(code):
                        raise
                    return 0  # e.g. timed out: the requesters' next look sees what happened

    def _serve_batch(self, tr: Any, hand_over: bool) -> int:
        read_version: int = tr.get_read_version().wait()
        self.results.give_back_due(tr, always=True)
        requests = list(tr.get_range(self.requests_begin, self.requests_end, limit=self.batch_size))
        if not requests:
            return 0
        taken = self.take_items(tr, len(requests), LIBRARY_TRANSACTION_BUDGET)
        due_version = read_version + self.abandon_after_versions
        served = len(taken.items) if taken.budget_spent else len(requests)
        for position, request in enumerate(requests[:served]):
            del tr[request.key]
            result_key = self._result_key(request.key)
            if position < len(taken.items):
                item = taken.items[position]
                self.results.serve(tr, result_key, item.key, item.encoded, due_version)
            else:  # the queue ran out: this request's answer is "empty"
                self.results.serve(tr, result_key, None, b"", due_version)
        if hand_over or served < len(requests):  # wake waiters: whoever is first leads next
            tr.add(self.turn_key, _ONE)
        return served + taken.quarantined
