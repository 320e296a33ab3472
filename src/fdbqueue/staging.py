"""High-contention consumption: the staging technique of FoundationDB's queue recipes.

With plain dequeues, every consumer reads the same first item, so only one commit per round
succeeds and the others fail with 1020 and back off. Staging replaces that race with a line:

1. **Fast path.** When no requests are waiting, take the first item directly, as a plain
   dequeue does (one extra snapshot read checks for waiting requests). If that commit
   conflicts, or requests are waiting, register instead; this client then skips the fast path
   for the next half second (:data:`CONTENDED_FOR`), since under load it would only conflict.
2. **Register.** Write a request key ``requests[end][(index, random)]``, its index one past the
   last request's (snapshot read, so registering never conflicts), and watch the request's
   result key.
3. **Serve.** The requester whose request is first in line serves a batch: one transaction
   reads up to ``batch_size`` oldest requests and as many items from the queue's end, clears
   both, and moves each item (its key and value) into the result slot of its request; if the
   queue runs out, the remaining requests get an "empty" result. Its read conflict ranges cover
   only the requests and items it read, so it conflicts only with another server or a fast
   path taking the same items. If requests remain after the batch, it bumps a *turn* key so
   that the requester now first in line wakes up and serves the next batch.
4. **Collect.** Each requester waits on watches of its result key and of the turn key (no
   polling; a bounded backoff of 10 ms to 1 s only if a watch fails or nothing fires), then
   takes its result in a transaction that clears it.

Nothing is lost when a requester dies. If it dies first in line, before leading, the line
stops moving; a waiter whose watches stay quiet for :data:`STALLED_AFTER` seconds serves in
its place. A result not collected within ``abandon_after``
seconds (measured with read versions, a clock all clients share: about 1,000,000 versions per
second) is put back by whichever client serves next, at the item's original key, so it keeps
its place at the front of the queue. A request whose requester died is served like any other,
and its result is given back the same way. A requester whose result was given back (it was
too slow to collect) finds its request gone and registers again.

Key layout, under the queue's metadata prefix ``P + b"\\xff"``::

    pack(("requests", end, index, random))  -> b""
    pack(("results", end, index, random))   -> pack((item key or None, value, served version))
    pack(("turn", end))                     -> int64 LE, bumped with atomic adds

Source followed: FoundationDB's "Queues" and "Priority Queues" recipes, "High-Contention
Dequeue/Pop Operations" (the staging technique), and the history of FoundationDB's
``layers/containers/highcontention/queue.py`` (which polled with sleeps and lost items whose
requester died; this module watches instead and gives abandoned results back).
"""

from __future__ import annotations

import functools
import struct
import time
from collections.abc import Callable
from typing import Any

import fdb.tuple

from fdbqueue.store import ItemStore, random_element
from fdbqueue.transactional import is_fdb_error
from fdbqueue.waiting import wait_for_any

__all__ = ["DEFAULT_ABANDON_AFTER", "DEFAULT_BATCH_SIZE", "Staging"]

#: Seconds after which an uncollected result is given back to the queue.
DEFAULT_ABANDON_AFTER = 10.0
#: Most requests one serving transaction fulfils.
DEFAULT_BATCH_SIZE = 64
#: Most batches a leader serves before handing over to the next requester in line.
LEADER_ROUNDS = 8
#: Results examined for abandonment per serving transaction.
ABANDONED_SCAN = 8
#: Seconds this client skips the fast path after it found contention (a conflict or a line
#: of waiting requests), so that under load it registers at once instead of conflicting first.
CONTENDED_FOR = 0.5
#: Seconds a waiting requester lets pass without its watches firing before it serves even
#: though it is not first in line (the requester first in line may have died before leading).
STALLED_AFTER = 1.0
VERSIONS_PER_SECOND = 1_000_000
NOT_COMMITTED = 1020

_ONE = struct.pack("<q", 1)
_REGISTER = object()  # the fast path's answer when the caller should register

#: Takes up to ``n`` items from one end of a queue inside a transaction: returns their
#: KeyValues, oldest first, already cleared.
TakeItems = Callable[[Any, int], list[Any]]


class Staging:
    """High-contention taking from one end of a queue (see the module docstring).

    Args:
        store: the queue's items and metadata.
        end: the end's name: ``"front"`` for a Queue, ``"min"`` or ``"max"`` for a
            PriorityQueue; each end has its own line of requests.
        take_items: removes up to ``n`` items from that end in a transaction.
        batch_size: most requests one serving transaction fulfils (>= 1).
        abandon_after: seconds after which an uncollected result goes back to the queue.

    Raises:
        ValueError: ``batch_size`` < 1 or ``abandon_after`` <= 0.
    """

    def __init__(
        self,
        store: ItemStore,
        end: str,
        take_items: TakeItems,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        abandon_after: float = DEFAULT_ABANDON_AFTER,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, not {batch_size!r}")
        if isinstance(abandon_after, bool) or not isinstance(abandon_after, (int, float)):
            raise ValueError(f"abandon_after must be a number of seconds, not {abandon_after!r}")
        if abandon_after <= 0:
            raise ValueError(f"abandon_after must be > 0 seconds, not {abandon_after}")
        self.store = store
        self.end = end
        self.take_items = take_items
        self.batch_size = batch_size
        self.abandon_after_versions = int(abandon_after * VERSIONS_PER_SECOND)
        self._skip_fast_path_until = 0.0  # monotonic time; see CONTENDED_FOR
        self.requests = store.metadata["requests"][end]
        self.results = store.metadata["results"][end]
        self.turn_key: bytes = store.metadata.pack(("turn", end))
        requests = self.requests.range()
        results = self.results.range()
        self.requests_begin: bytes = requests.start
        self.requests_end: bytes = requests.stop
        self.results_begin: bytes = results.start
        self.results_end: bytes = results.stop

    # -- the requester's side ---------------------------------------------------------------

    def take(self, database: Any) -> Any:
        """Take one item's value from this end, or None when the queue is empty.

        Cost without contention: one transaction (the fast path: a snapshot read of the
        requests, the plain dequeue's read, clear and atomic add). Under contention: a
        registration transaction, a collecting transaction, and a share of a serving
        transaction, whose cost is spread over up to ``batch_size`` requests.
        """
        if time.monotonic() >= self._skip_fast_path_until:
            outcome = self._fast_path(database)
            if outcome is not _REGISTER:
                return outcome
            self._skip_fast_path_until = time.monotonic() + CONTENDED_FOR
        request_key = self._register(database)
        backoff = 0.01
        quiet_since = time.monotonic()  # when this requester last saw the line move
        while True:
            state, detail = self.store.receipts.run(
                database,
                functools.partial(self._collect_or_watch, request_key=request_key),
                wrote=lambda outcome: outcome[0] == "done",
            )
            if state == "done":
                return detail
            if state == "lost":
                request_key = self._register(database)
                continue
            if state == "first" or time.monotonic() - quiet_since > STALLED_AFTER:
                # First in line: lead. Or nothing moved for STALLED_AFTER seconds: the
                # requester first in line died before leading, so serve in its place.
                self._cancel(detail)
                self._lead(database)
                quiet_since = time.monotonic()
                continue
            woken = wait_for_any(detail, backoff)
            if woken:
                backoff, quiet_since = 0.01, time.monotonic()
            else:
                backoff = min(backoff * 2, 1.0)  # the fallback, bounded
            self._cancel(detail)

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
            items = self.take_items(tr, 1)
            if not items:
                return None
            self.store.add_to_size(tr, -1)
            return self.store.decode(items[0].value)

        return self.store.receipts.run(
            database,
            body,
            wrote=lambda outcome: outcome is not None and outcome is not _REGISTER,
            on_conflict=_REGISTER,
        )

    def _register(self, database: Any) -> bytes:
        def body(tr: Any) -> bytes:
            last = list(
                tr.snapshot.get_range(self.requests_begin, self.requests_end, limit=1, reverse=True)
            )
            index = self.requests.unpack(last[0].key)[0] + 1 if last else 1
            key: bytes = self.requests.pack((index, random_element()))
            tr[key] = b""
            return key

        return self.store.receipts.run(database, body)

    def _result_key(self, request_key: bytes) -> bytes:
        key: bytes = self.results.pack(self.requests.unpack(request_key))
        return key

    def _collect_or_watch(self, tr: Any, request_key: bytes) -> tuple[str, Any]:
        """One read-only look (or one collecting write) at the request's state."""
        result_key = self._result_key(request_key)
        result = tr.get(result_key)
        if result.present():
            del tr[result_key]
            item_key, value, _served = fdb.tuple.unpack(bytes(result))
            return "done", None if item_key is None else self.store.decode(value)
        if not tr.snapshot.get(request_key).present():
            return "lost", None
        first = list(tr.snapshot.get_range(self.requests_begin, self.requests_end, limit=1))
        if first and first[0].key == request_key:
            return "first", [tr.watch(result_key)]
        return "wait", [tr.watch(result_key), tr.watch(self.turn_key)]

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
        """Try once to fulfil the oldest ``batch_size`` requests; return how many it served.

        A conflict with another server or a fast-path consumer is not retried (someone else
        made progress); other retryable errors are retried. Cost: one transaction with a read
        version, a range read of the requests, the reads that take the items, a snapshot read
        of the oldest results (to give abandoned ones back), and per request one clear and
        one set.
        """
        tr = database.create_transaction()
        while True:
            try:
                served = self._serve_batch(tr, hand_over)
                tr.commit().wait()
                return served
            except Exception as error:
                if not is_fdb_error(error):
                    raise
                if error.code == NOT_COMMITTED:  # type: ignore[attr-defined]
                    return 0
                tr.on_error(error).wait()

    def _serve_batch(self, tr: Any, hand_over: bool) -> int:
        read_version: int = tr.get_read_version().wait()
        self._give_back_abandoned(tr, read_version)
        requests = list(tr.get_range(self.requests_begin, self.requests_end, limit=self.batch_size))
        if not requests:
            return 0
        items = self.take_items(tr, len(requests))
        for position, request in enumerate(requests):
            del tr[request.key]
            if position < len(items):
                item = items[position]
                result = fdb.tuple.pack((item.key, bytes(item.value), read_version))
            else:  # the queue ran out: this request's answer is "empty"
                result = fdb.tuple.pack((None, b"", read_version))
            tr[self._result_key(request.key)] = result
        if items:
            self.store.add_to_size(tr, -len(items))
        if hand_over:  # wake waiters: whoever is now first in line leads next
            tr.add(self.turn_key, _ONE)
        return len(requests)

    def _give_back_abandoned(self, tr: Any, read_version: int) -> None:
        """Put results older than ``abandon_after`` back at their items' original keys."""
        oldest = tr.snapshot.get_range(self.results_begin, self.results_end, limit=ABANDONED_SCAN)
        for result in oldest:
            item_key, value, served = fdb.tuple.unpack(bytes(result.value))
            if read_version - served <= self.abandon_after_versions:
                continue
            tr.add_read_conflict_key(result.key)  # the collector and we must not both win
            del tr[result.key]
            if item_key is not None:
                self.store.restore(tr, item_key, value)
