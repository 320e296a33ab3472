"""Settling a job: what a worker does with a job that finished, on the lease holder's side.

Both worker loops, :func:`fdbqueue.worker.work` and its asynchronous twin
:func:`fdbqueue.asyncio._worker.work`, end their jobs with one :class:`Settler`:

* a job whose handler returned is acknowledged (:meth:`~fdbqueue.Queue.ack`; a submitted
  job keeps what its handler returned), or, in the ``transactional`` mode, runs its handler
  in the acknowledging transaction (:meth:`Settler.ack_with`);
* a job whose handler raised is logged and either released with a delay that doubles with
  each delivery (:meth:`~fdbqueue.Queue.release` with ``delay=``; jittered, at most
  ``max_backoff`` seconds: :func:`retry_delay`), or moved to the dead letters with the
  error as the reason (:meth:`~fdbqueue.Queue.dead_letter`): once the item was delivered
  ``max_deliveries`` times (the queue's setting, or the job's own: :func:`own_setting`),
  or at once when the worker does not have its task
  (:class:`~fdbqueue.errors.UnknownTaskError`). The error is told bounded wherever it is
  recorded (:func:`~fdbqueue._wording.describe_failure`: its message cut, an unprintable
  one said so), so that no handler's exception can make the release or dead letter fail.
  A handler past its time limit is settled so, with
  :class:`~fdbqueue.errors.TimeLimitExceeded`, and its late return only logged
  (:meth:`Settler.returned_late`);
* an item claimed after ``stop`` was set, or whose handler was interrupted, is given back
  at once, unprocessed (:meth:`Settler.give_back`).

:func:`settlement` decides which (a :class:`Settlement`: the lease holder's call, what to
count, what to log). Each call is tried again after a timeout or an unknown result
(:func:`holder_call`, :func:`outcome_unknown`); a lease no longer held counts its job as
lost, and its item is delivered again. What came of the jobs is counted, by the outcomes
the settlements name, in the :class:`WorkSummary` that ``work`` returns; the releases for
a retry are noted in :class:`Retries`, which an ``until_empty`` run waits for (plus
:data:`RETRY_MARGIN`). Logged to the worker loops' logger, ``fdbqueue.worker``: each job
done at DEBUG, failures at WARNING (with the traceback), dead letters at ERROR, each job
named by :func:`describe`.

Source followed: the worker loops of rq and Celery (acknowledge late, retry with exponential
backoff).
"""

from __future__ import annotations

import functools
import logging
import random
import reprlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from fdbqueue import metrics
from fdbqueue._delivery.leases import MAX_LEASE_SECONDS, Lease
from fdbqueue._delivery.time_limits import Timing
from fdbqueue._delivery.workers import job_id
from fdbqueue._wording import describe_error, describe_failure
from fdbqueue.errors import LeaseError, TimeLimitExceeded, UnknownResultError, UnknownTaskError

__all__ = [
    "HOLDER_CALL_ATTEMPTS",
    "RETRY_MARGIN",
    "Retries",
    "Settlement",
    "Settler",
    "WorkSummary",
    "describe",
    "describe_queue",
    "holder_call",
    "logged_traceback",
    "outcome_unknown",
    "own_setting",
    "retry_delay",
    "settlement",
]

# the worker loops' logger, as heartbeat.py's and workers.py's (docs/observability.rst)
logger = logging.getLogger("fdbqueue.worker")

#: Seconds added to a retry's delay before ``until_empty`` counts it as due: a lease expires
#: by versions (about 1,000,000 a second), not by this machine's clock.
RETRY_MARGIN = 0.25
#: Attempts of an ack or release that times out (1031) before the worker gives up on it.
HOLDER_CALL_ATTEMPTS = 5


@dataclass
class WorkSummary:
    """What a worker loop did until it returned.

    Attributes:
        succeeded: jobs whose handler returned and whose lease was acknowledged.
        retried: jobs whose handler raised and whose item was released for a later retry.
        dead_lettered: jobs whose handler raised on their last delivery (moved to the dead
            letters).
        lost: jobs whose lease was lost while they ran (expired, or the holder call failed);
            their items are delivered again.
        released: items claimed after ``stop`` was set, released unprocessed.
        timed_out: jobs whose handler ran past ``time_limit`` (each also counted as retried
            or dead-lettered, as a handler that raised).
        paused: with ``until_empty``, whether the run ended on a paused queue
            (:meth:`~fdbqueue.Queue.pause`: its claims found nothing because of it); a
            WARNING says so too (:func:`~fdbqueue.worker.ended_paused`).
    """

    succeeded: int = 0
    retried: int = 0
    dead_lettered: int = 0
    lost: int = 0
    released: int = 0
    timed_out: int = 0
    paused: bool = False

    def count(self, outcome: str) -> None:
        """Add one to the attribute named ``outcome`` (thread-safe enough: under a lock)."""
        with _SUMMARY_LOCK:
            setattr(self, outcome, getattr(self, outcome) + 1)

    @property
    def jobs_done(self) -> int:
        """The jobs ended so far: succeeded, retried, dead-lettered or lost (not the items
        released unprocessed); what the loop's worker record reports
        (:class:`~fdbqueue.WorkerInfo`)."""
        return self.succeeded + self.retried + self.dead_lettered + self.lost


_SUMMARY_LOCK = threading.Lock()


def own_setting(lease: Lease[Any], name: str, default: Any) -> Any:
    """The job's own setting ``name`` (``max_deliveries``, ``time_limit`` or ``backoff``, of
    its :attr:`Lease.job_options <fdbqueue.Lease>`, given to ``submit``), else ``default``
    (the queue's or the loop's). No database access."""
    options = lease.job_options
    value = None if options is None else getattr(options, name)
    return default if value is None else value


def retry_delay(deliveries: int, backoff: float, max_backoff: float) -> float:
    """Seconds to wait before the next delivery of an item that failed on its
    ``deliveries``-th: ``backoff * 2 ** (deliveries - 1)``, at most ``max_backoff`` and at
    most ``MAX_LEASE_SECONDS`` (12 hours, the longest delay a release
    takes), times a random factor in [0.5, 1] so that items failing together do not retry
    together."""
    exponent = min(deliveries - 1, 64)
    longest = min(max_backoff, MAX_LEASE_SECONDS)
    return min(longest, backoff * 2.0**exponent) * random.uniform(0.5, 1.0)


class Retries:
    """When the items a worker loop released with a delay fall due: the loop waits for them
    before it ends with ``until_empty`` (thread-safe; one per call of ``work``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due_by = 0.0  # time.monotonic() instant

    def released(self, delay: float) -> None:
        """Note an item released with ``delay`` seconds (plus :data:`RETRY_MARGIN`, for the
        versions by which the lease's expiry is measured)."""
        with self._lock:
            self._due_by = max(self._due_by, time.monotonic() + delay + RETRY_MARGIN)

    def seconds_left(self) -> float:
        """Seconds until every item noted has fallen due (0.0: all have)."""
        return max(0.0, self._due_by - time.monotonic())


class Settlement(NamedTuple):
    """What a worker does with a job that finished: the lease holder's call to make
    (``"ack"``, ``"release"`` or ``"dead_letter"``) with its arguments after the lease, what
    to count once it is done, and what to log. Both worker loops follow it. (A named tuple:
    one is made per job.)"""

    call: str
    arguments: tuple[Any, ...]
    keywords: dict[str, Any]
    outcome: str
    level: int
    message: str

    def log(self, queue: Any, lease: Lease[Any], failure: BaseException | None) -> None:
        """Log the settlement of ``lease``, a job of ``queue``: the job (:func:`describe`),
        what became of it, and its value (shortened); with the failure's traceback, if any,
        bounded as a job's record keeps it (:func:`~fdbqueue._wording.describe_failure`: a
        handler's 200,000-character message or lone surrogates never reach a log handler).
        Nothing is formatted when the logger drops records of this level."""
        if not logger.isEnabledFor(self.level):
            return
        logger.log(
            self.level,
            self.message + "; value %s%s",
            describe(queue, lease),
            reprlib.repr(lease.value),
            logged_traceback(failure),
        )


def logged_traceback(failure: BaseException | None) -> str:
    """``failure``'s traceback for a log line (its last lines, bounded:
    :func:`~fdbqueue._wording.describe_failure`), on lines of its own after the message; ""
    for none."""
    if failure is None:
        return ""
    trace = describe_failure(failure)[2]
    return "\n" + trace if trace else ""


def settlement(
    lease: Lease[Any],
    failure: BaseException | None,
    max_deliveries: int | None,
    backoff: float,
    max_backoff: float,
    result: Any = None,
) -> Settlement:
    """What to do with ``lease`` once its handler returned ``result`` (``failure`` None) or
    raised: acknowledge it (a job keeps ``result``); on its last delivery
    (``max_deliveries``), move it to the dead letters with ``"Type: message (delivery n of
    max)"`` as the reason, and at once for a job whose task it does not have
    (:class:`~fdbqueue.errors.UnknownTaskError`: ``"... (delivery n not retried)"``)
    (``"Type: message"`` bounded:
    :func:`~fdbqueue._wording.describe_error`); else release it with :func:`retry_delay`.
    Never raises for what ``failure``'s ``__str__`` does."""
    if failure is None:
        message = f"%s done (delivery {lease.deliveries})"
        kept = {} if lease.job_id is None else {"result": result}  # a plain item keeps none
        return Settlement("ack", (), kept, "succeeded", logging.DEBUG, message)
    error = describe_error(failure)  # bounded, and never raising (docs/worker.rst)
    final = isinstance(failure, UnknownTaskError)  # no retry can find the task
    if final or (max_deliveries is not None and lease.deliveries >= max_deliveries):
        of = "not retried" if final else f"of {max_deliveries}"
        reason = f"{error} (delivery {lease.deliveries} {of})"
        ended = "cannot run" if final else "failed on its last delivery"
        message = f"%s {ended}, now a dead letter: "
        message += reason.replace("%", "%%")
        return Settlement(
            "dead_letter", (reason,), {"error": failure}, "dead_lettered", logging.ERROR, message
        )
    delay = retry_delay(lease.deliveries, backoff, max_backoff)
    message = f"%s failed (delivery {lease.deliveries}), retrying in {delay:.2f}s: "
    message += error.replace("%", "%%")
    return Settlement(
        "release", (), {"delay": delay, "error": failure}, "retried", logging.WARNING, message
    )


def describe_queue(queue: Any) -> str:
    """A queue for the log: its name as metrics name it (the prefix's tuple)."""
    return metrics.queue_name(queue.subspace.key())


def describe(queue: Any, lease: Lease[Any]) -> str:
    """A job for the log: ``job`` and its job id (32 hexadecimal digits, as
    :meth:`~fdbqueue.Queue.job`, ``fdbqueue job`` and :meth:`~fdbqueue.Queue.workers` show
    it), or, for an item enqueued plainly, ``item`` and its lease id (32 digits, new at each
    delivery, as ``fdbqueue leases`` shows it): :func:`~fdbqueue._delivery.workers.job_id`;
    then ``of`` and its queue's name (as metrics name it: the prefix's tuple)."""
    kind = "item" if lease.job_id is None else "job"
    return f"{kind} {job_id(lease)} of {describe_queue(queue)}"


def outcome_unknown(error: BaseException) -> bool:
    """Whether ``error``, raised by a lease holder's call, leaves its job's fate to a later
    attempt rather than to its handler: a timeout (1031; with receipts, resolved as not
    applied) or :class:`~fdbqueue.errors.UnknownResultError` (its receipt could not be
    found out). No database access."""
    return getattr(error, "code", None) == 1031 or isinstance(error, UnknownResultError)


def holder_call(call: Callable[[], Any], what: str) -> bool:
    """``call()`` (an ack, release or dead_letter, or the transactional mode's ``ack_with``),
    tried again after a timeout or an unknown result (:func:`outcome_unknown`) up to
    :data:`HOLDER_CALL_ATTEMPTS` times. Returns False when the lease was not held: after such
    an attempt that means the attempt did land."""
    timed_out = False
    for attempt in range(HOLDER_CALL_ATTEMPTS):
        try:
            call()
            return True
        except LeaseError as error:
            if timed_out:
                return True  # the timed-out attempt landed
            logger.warning("%s refused: %s", what, error)
            return False
        except Exception as error:
            if not outcome_unknown(error) or attempt == HOLDER_CALL_ATTEMPTS - 1:
                raise
            timed_out = True
    return False  # pragma: no cover - the loop returns or raises


class Settler:
    """How both worker loops end a job, on the lease holder's side: give an item back, or
    settle a job that finished (:func:`settlement`, each call through :func:`holder_call`),
    and count what came of it. The thread loop calls it from its threads; the asyncio loop
    runs its calls on the event loop in a greenlet (:func:`fdbqueue.asyncio._bridge.run`).

    Args:
        queue: the synchronous queue (:class:`~fdbqueue.Queue` or
            :class:`~fdbqueue.PriorityQueue`).
        database: the Database or Tenant the loop works on.
        options: the loop's options, checked (:func:`fdbqueue.worker.check_work_options`):
            the backoffs.
    """

    def __init__(self, queue: Any, database: Any, options: Mapping[str, Any]) -> None:
        self.queue = queue
        self.database = database
        self.backoff = (options["backoff"], options["max_backoff"])
        #: The queue's ``max_deliveries`` (fixed when it was opened).
        self.max_deliveries: int | None = queue.max_deliveries
        self.summary = WorkSummary()
        #: The items released for a retry, which ``until_empty`` waits for.
        self.retries = Retries()

    def give_back(self, lease: Lease[Any]) -> None:
        """Release ``lease`` at once, unprocessed (claimed after ``stop``, or interrupted).
        Cost: a release (:meth:`~fdbqueue.Queue.release`), tried again after a timeout."""
        if holder_call(lambda: self.queue.release(self.database, lease), "release"):
            self.summary.count("released")

    def settle(self, lease: Lease[Any], failure: BaseException | None, result: Any = None) -> None:
        """Acknowledge a job that succeeded (``failure`` None; a submitted job keeps
        ``result``, what its handler returned); release or dead-letter one that failed
        (:func:`settlement`); log it, and count it (as lost when the lease was not held).
        Cost: one ack, release or dead_letter, tried again after a timeout."""
        max_deliveries, (backoff, max_backoff) = self.max_deliveries, self.backoff
        if lease.job_options is not None:  # the job's own settings first
            max_deliveries = own_setting(lease, "max_deliveries", max_deliveries)
            backoff = own_setting(lease, "backoff", backoff)
        plan = settlement(lease, failure, max_deliveries, backoff, max_backoff, result)
        call = getattr(self.queue, plan.call)
        done = holder_call(
            functools.partial(call, self.database, lease, *plan.arguments, **plan.keywords),
            plan.call,
        )
        plan.log(self.queue, lease, failure)
        self.summary.count(plan.outcome if done else "lost")
        if done and failure is not None:  # a success neither timed out nor was released
            if isinstance(failure, TimeLimitExceeded):
                self.summary.count("timed_out")
            if plan.call == "release":
                self.retries.released(plan.keywords["delay"])

    def ack_with(self, lease: Lease[Any], body: Callable[[Any], object]) -> None:
        """Run ``body(tr)`` (the transactional mode's handler, :func:`~fdbqueue._delivery.
        time_limits.in_time`) and acknowledge ``lease`` in one transaction
        (:meth:`~fdbqueue.Queue.ack_with`, exactly once by the queue's receipts), tried again
        after a timeout or an unknown result (:func:`holder_call`): only ``body``'s own
        exception fails the job. Logs and counts the job: succeeded; lost when the lease was
        not held, or when the outcome was still unknown after :data:`HOLDER_CALL_ATTEMPTS`
        attempts (its lease expires and its item is delivered again).

        Raises:
            Exception: what ``body`` raised (nothing of it committed), or a FoundationDB
                error that is neither a timeout nor an unknown result.

        Cost: ``body``'s reads and writes and an ack's, in one transaction per attempt.
        """
        try:
            done = holder_call(
                lambda: self.queue.ack_with(self.database, lease, body),
                f"ack of {describe(self.queue, lease)}",
            )
        except Exception as error:
            if not outcome_unknown(error):
                raise
            logger.warning(
                "%s: its acknowledging transaction's outcome is still unknown after %d "
                "attempts; its lease will expire and its item be delivered again",
                describe(self.queue, lease),
                HOLDER_CALL_ATTEMPTS,
                exc_info=error,
            )
            done = False
        if not done:
            self.summary.count("lost")
            return
        settlement(lease, None, None, 0, 0).log(self.queue, lease, None)
        self.summary.count("succeeded")

    def returned_late(
        self, lease: Lease[Any], timing: Timing, failure: BaseException | None
    ) -> None:
        """Log (WARNING) a handler that returned, or raised ``failure``, after its job was
        taken back at its time limit: its result is discarded, nothing is acknowledged (the
        job was settled already, :func:`settlement`). No database access."""
        logger.warning(
            "%s: its handler %s %.1fs after its start, past its time limit of %gs; "
            "the job was settled without it, its result is discarded%s",
            describe(self.queue, lease),
            "returned" if failure is None else "raised",
            timing.elapsed(time.monotonic()),
            timing.limit,
            logged_traceback(failure),
        )
