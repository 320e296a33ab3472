"""The worker loop: claim, run a handler, acknowledge; retry with backoff; dead letters.

``queue.work(db, handler, lease=30)`` runs ``concurrency`` threads, each of which, until
``stop`` is set (or SIGINT/SIGTERM arrives, in the main thread):

1. claims an item under a lease of ``lease`` seconds, blocking on a watch
   (:meth:`~fdbqueue.Queue.claim` with ``block=True``);
2. calls ``handler(value)``, while a shared heartbeat thread extends the lease of every job
   still running every ``lease / 3`` seconds, so a long job keeps its item;
3. on success, acknowledges the lease (:meth:`~fdbqueue.Queue.ack`);
4. on an exception, logs it and either releases the item with a delay that doubles with
   each delivery (:meth:`~fdbqueue.Queue.release` with ``delay=``: :func:`retry_delay`,
   jittered, at most ``max_backoff`` seconds), or, once the item was delivered
   ``max_deliveries`` times (the queue's setting), moves it to the dead letters with the
   error, told bounded, as the reason (:meth:`~fdbqueue.Queue.dead_letter`).

Steps 3 and 4 settle the job, as both loops do (:mod:`fdbqueue._delivery.settling`).

A coroutine function as ``handler`` is refused before anything is claimed (TypeError: the
threads cannot await it; :mod:`fdbqueue.asyncio` can), and a call that returns an awaitable
anyway fails its job (:func:`awaiting_refused`).

Time limit (``time_limit``, or the queue's): once a handler has run that many seconds, the
heartbeat thread takes its job back (:mod:`fdbqueue._delivery.time_limits`): it no longer
extends the lease and settles the job as in 4. with
:class:`~fdbqueue.errors.TimeLimitExceeded`, so its message group goes on. The handler's
thread cannot be killed: it is abandoned, a new thread takes its slot (at most
``concurrency`` abandoned threads at once; past that the slot waits for one to return:
:class:`Loop`), and its late return is logged and discarded (with ``transactional``, it
raises before the commit: nothing of it commits). Each abandoned handler is logged
(WARNING) and listed in the loop's worker record while it runs, and a loop whose every slot
waits for one (it runs nothing) says so at once and at each beat of its record
(:class:`~fdbqueue._delivery.time_limits.Abandoned`).

Periodic jobs: while it runs, one more thread enqueues the runs of the queue's schedules
that fell due, looking about once a second (:mod:`fdbqueue._delivery.schedules`; each due
time is enqueued once however many loops run).

With ``until_empty=True`` (a batch run, as rq's burst mode) each thread returns once a claim
finds nothing claimable and every item this run released for a retry has fallen due and
been claimed again (by this run, or by another consumer): so a run ends with each item it
failed retried to an end, acknowledged or dead-lettered. Waiting for them takes at most the
longest backoff of the run (``max_backoff``) plus
:data:`~fdbqueue._delivery.settling.RETRY_MARGIN`; ``stop`` ends it sooner. Every backoff is
capped at 12 hours, the longest delay a release takes. On a paused queue
(:meth:`~fdbqueue.Queue.pause`) its claims find nothing, so it ends at once: its summary
then has ``paused`` set, and a WARNING says the queue is paused (:func:`ended_paused`).

Shutting down: once ``stop`` is set, no new item is claimed; a job already running finishes
and is acknowledged (or released, if it failed); an item claimed after ``stop`` was set is
released at once. ``work`` returns a :class:`WorkSummary` when every thread has finished. A
second SIGINT while it waits interrupts the handlers as Python usually does
(KeyboardInterrupt); their leases then expire and the items are delivered again.

What it guarantees is the leases': at least once. A job that raised, or whose worker died,
runs again; make handlers idempotent. A lease lost while its job ran (the heartbeat could
not extend it, e.g. the cluster was unavailable for longer than the lease) is logged, and the
job's result is not acknowledged: another worker may run it again.

While it runs, the loop keeps a record of itself in the queue's metadata (host, pid, jobs done
and running), written when it starts, rewritten every 5 seconds by a thread of its own and
cleared when it stops, which :meth:`~fdbqueue.Queue.workers` lists
(:mod:`fdbqueue._delivery.workers`; :func:`registration`). Those writes never fail a job:
one that fails is logged and done again at the next beat.

Errors from FoundationDB while claiming (a cluster that cannot be reached, a timeout) are
logged and the worker tries again after a backoff, so a worker survives a cluster's
unavailability. Everything is logged to the ``fdbqueue.worker`` logger: starts and stops at
INFO, each job at DEBUG, failures at WARNING (with the traceback), dead letters at ERROR.

The asynchronous twin is :func:`fdbqueue.asyncio._worker.work` (``fdbqueue.asyncio.Queue.work``);
both take the same keywords (:class:`WorkOptions`, checked by :func:`check_work_options`) and
end their jobs with one :class:`~fdbqueue._delivery.settling.Settler`
(:mod:`fdbqueue._delivery.settling`).

Source followed: the worker loops of rq and Celery (warm shutdown on SIGTERM; their
acknowledging late and retrying with exponential backoff: :mod:`fdbqueue._delivery.settling`);
Amazon SQS's visibility timeout extension (``ChangeMessageVisibility``) for the heartbeat.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from fdbqueue import metrics
from fdbqueue._checks import check_flag, check_keywords, check_seconds, spell_out
from fdbqueue._delivery.heartbeat import Heartbeat, Job
from fdbqueue._delivery.leases import Lease, check_lease_seconds
from fdbqueue._delivery.processes import ChildCall, ChildProcesses, FunctionReference
from fdbqueue._delivery.rate_limit import IDLE_POLL_SECONDS, RateLimit
from fdbqueue._delivery.schedules import check_until_stopped
from fdbqueue._delivery.settling import (
    Settler,
    WorkSummary,
    describe,
    describe_queue,
    own_setting,
    retry_delay,  # public here too: fdbqueue.worker.retry_delay (docs/api.rst)
)
from fdbqueue._delivery.time_limits import Abandoned, check_time_limit, in_time
from fdbqueue._delivery.workers import Registration, RegistrationThread, WorkerRegistry, job_id
from fdbqueue._queues.tasks import check_codec_holds_tasks, child_call, task_runner
from fdbqueue._storage.store import metadata_subspace
from fdbqueue._transactions.transactional import is_database
from fdbqueue.errors import QueueTypeError

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "QUEUE_TIME_LIMIT",
    "WorkSummary",
    "check_handler",
    "check_work_arguments",
    "is_coroutine_handler",
    "registration",
    "retry_delay",
    "spelt_out",
    "work",
]

logger = logging.getLogger("fdbqueue.worker")

#: Seconds a blocked claim waits before it looks at ``stop`` again (its watch is renewed).
STOP_CHECK_SECONDS = 1.0
#: Seconds before the first retry of a failed job, and the longest retry delay.
DEFAULT_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 300.0
#: Seconds a worker waits after FoundationDB refused a claim (doubling, at most 30).
CLAIM_ERROR_BACKOFF = (0.5, 30.0)

#: Held while a worker thread keeps its BaseException in :attr:`Loop.failures`.
_FAILURES_LOCK = threading.Lock()


class OptionalWorkOptions(TypedDict, total=False):
    """The worker loop's keyword arguments that may be left out (:data:`WORK_DEFAULTS`)."""

    concurrency: int
    backoff: float
    max_backoff: float
    handle_signals: bool
    until_empty: bool
    transactional: bool
    time_limit: float | None
    processes: int | None


class WorkOptions(OptionalWorkOptions):
    """The worker loop's keyword arguments but ``stop`` (a ``threading.Event`` for threads, an
    ``asyncio.Event`` for tasks), written once: ``lease`` (required) and those of
    :class:`OptionalWorkOptions`. :meth:`fdbqueue.Queue.work`, :func:`work` and their asyncio
    twins take them as ``**options: Unpack[WorkOptions]``; :meth:`fdbqueue.Queue.work`
    documents them."""

    lease: float


class _QueueSetting:
    """What ``time_limit`` is when a ``work`` call leaves it out: the queue's own
    ``time_limit`` (None unless the queue was given one), read when ``work`` is called."""

    def __repr__(self) -> str:
        return "<the queue's time_limit>"


#: ``time_limit``'s default, as ``help()`` shows it: the queue's ``time_limit``.
QUEUE_TIME_LIMIT: Any = _QueueSetting()

#: What each keyword of :class:`OptionalWorkOptions` is when left out (``time_limit``: the
#: queue's, :data:`QUEUE_TIME_LIMIT`). The one home of these defaults: :func:`spelt_out`
#: shows them in each queue's ``work`` signature.
WORK_DEFAULTS: OptionalWorkOptions = {
    "concurrency": 1,
    "backoff": DEFAULT_BACKOFF,
    "max_backoff": DEFAULT_MAX_BACKOFF,
    "handle_signals": True,
    "until_empty": False,
    "transactional": False,
    "time_limit": QUEUE_TIME_LIMIT,
    "processes": None,
}

Method = TypeVar("Method", bound=Callable[..., Any])


def spelt_out(method: Method) -> Method:
    """``method`` (a queue's ``work``, taking ``**options: Unpack[WorkOptions]``), its
    signature, as ``help()``, ``inspect.signature`` and the API reference show it, listing
    each option as a keyword-only parameter with its type and default
    (:func:`fdbqueue._checks.spell_out`, from :class:`WorkOptions` and
    :data:`WORK_DEFAULTS`)."""
    return spell_out(method, WorkOptions, WORK_DEFAULTS)


def _handler_name(handler: Any) -> str:
    """A handler as an error names it: its qualified name, else its type's name."""
    return str(getattr(handler, "__qualname__", type(handler).__name__))


def is_coroutine_handler(handler: Any) -> bool:
    """Whether calling ``handler`` makes a coroutine to await, as far as Python tells before
    any call: a coroutine function (``async def``, a method of one, one marked so), a
    ``functools.partial`` of one, or an object whose class's ``__call__`` is one. No
    database access."""
    while isinstance(handler, functools.partial):
        handler = handler.func
    call = getattr(type(handler), "__call__", None)  # noqa: B004 - the method, not a test
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def refuse_coroutine_handler(queue: Any, handler: Any) -> None:
    """Raise TypeError when ``handler`` is a coroutine function
    (:func:`is_coroutine_handler`): the synchronous ``queue.work`` would not await what it
    returns, and the job would end without having run. No database access."""
    if is_coroutine_handler(handler):
        kind = type(queue).__name__
        raise TypeError(
            f"handler {_handler_name(handler)} is a coroutine function: {kind}.work calls it "
            f"in threads and cannot await it; use fdbqueue.asyncio.{kind} and "
            f"`await queue.work(db, handler, ...)`, which awaits it on the event loop"
        )


def awaiting_refused(queue: Any, handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler``, not a coroutine function, as a loop calls it without awaiting what it
    returns (the thread loop; the asyncio loop's executor and transactional handlers): a
    call that returns an awaitable (a coroutine, which is then closed unrun) raises TypeError
    instead, so its job fails (retried, then a dead letter) and never counts as done without
    having run. No database access."""

    @functools.wraps(handler)
    def call(*args: Any) -> Any:
        result = handler(*args)
        if result is not None and inspect.isawaitable(result):  # (None never is)
            close = getattr(result, "close", None)
            if callable(close):
                close()  # no "never awaited" warning: this error says it
            raise TypeError(
                f"handler {_handler_name(handler)} returned a {type(result).__name__}, which "
                "the worker does not await from a function that is not a coroutine function: "
                "its job did not run; make it one (async def) and give it to "
                f"fdbqueue.asyncio.{type(queue).__name__}.work, which awaits it"
            )
        return result

    return call


def check_handler(handler: Any, transactional: bool) -> None:
    """Raise TypeError unless ``handler`` can be called as the worker loop calls it:
    ``handler(value)``, or ``handler(tr, value)`` when ``transactional`` (no database
    access). A callable whose signature Python cannot tell (some built-ins) passes."""
    if not callable(handler):
        raise TypeError(f"handler must be callable, not {type(handler).__name__}")
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*((None, None) if transactional else (None,)))
    except TypeError:
        wanted = "handler(tr, value)" if transactional else "handler(value)"
        name = _handler_name(handler)
        raise TypeError(
            f"with transactional={transactional}, the worker calls {wanted}, but handler "
            f"{name}{signature} cannot take that"
            + ("" if transactional else " (pass transactional=True for handler(tr, value))")
        ) from None


def check_work_arguments(
    handler: Any,
    lease: Any,
    concurrency: Any,
    backoff: Any,
    max_backoff: Any,
    *,
    transactional: Any = False,
) -> float:
    """Validate the worker loop's arguments before anything is read or written; return the
    lease in seconds.

    Raises:
        TypeError: ``handler`` is not callable, or cannot be called with one argument (two
            with ``transactional``: :func:`check_handler`), or an argument has the wrong
            type.
        ValueError: ``lease`` out of range (see
        ``check_lease_seconds``;
            also refused: infinite), ``concurrency`` < 1, a backoff that is not a finite
            number > 0, or ``max_backoff`` < ``backoff``.
    """
    check_handler(handler, check_flag(transactional, "transactional"))
    seconds = check_lease_seconds(lease)
    if math.isinf(seconds):
        raise ValueError("a worker's lease must be finite: the heartbeat extends it")
    if type(concurrency) is bool or not isinstance(concurrency, int):
        raise TypeError(f"concurrency must be an int, not {type(concurrency).__name__}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, not {concurrency}")
    first = check_seconds(backoff, "backoff")
    most = check_seconds(max_backoff, "max_backoff")
    if most < first:
        raise ValueError(f"max_backoff ({most}) must be >= backoff ({first})")
    return seconds


def check_work_options(
    queue: Any, database: Any, handler: Any, options: WorkOptions
) -> WorkOptions:
    """Check the arguments but ``stop`` (which each loop checks for its kind of event) of a
    worker loop on ``queue`` before anything is read or written, as Python and
    :func:`check_work_arguments` would check them, and return them complete: each left out
    at its :data:`WORK_DEFAULTS` value (``time_limit``: ``queue.time_limit``), ``lease`` in
    seconds, the backoffs floats, ``time_limit`` a float or None. The errors name the call
    as ``"Queue.work"`` (the queue's type).

    Raises:
        TypeError: ``database`` is not a Database or Tenant, a keyword is not one of
            :class:`WorkOptions` or ``lease`` is missing, or as :func:`check_work_arguments`
            (and for a non-bool ``handle_signals`` or ``until_empty``, a ``time_limit`` that
            is not a number or None).
        ValueError: as :func:`check_work_arguments`; a ``time_limit`` that is NaN, infinite,
            not > 0 or over 12 hours.
    """
    if not is_database(database):
        raise TypeError("work needs a Database: it runs its own transactions")
    check_keywords(options, WorkOptions, f"{type(queue).__name__}.work")
    given: WorkOptions = {**WORK_DEFAULTS, **options}
    if given["time_limit"] is QUEUE_TIME_LIMIT:
        given["time_limit"] = queue.time_limit
    given["lease"] = check_work_arguments(
        handler,
        given["lease"],
        given["concurrency"],
        given["backoff"],
        given["max_backoff"],
        transactional=given["transactional"],
    )
    given["backoff"] = float(given["backoff"])
    given["max_backoff"] = float(given["max_backoff"])
    check_flag(given["handle_signals"], "handle_signals")
    check_flag(given["until_empty"], "until_empty")
    given["time_limit"] = check_time_limit(given["time_limit"])
    processes = given["processes"]
    if processes is not None:
        if type(processes) is not int:
            raise TypeError(f"processes must be an int or None, not {type(processes).__name__}")
        if not 1 <= processes <= MAX_PROCESSES:
            raise ValueError(f"processes must be from 1 to {MAX_PROCESSES}, not {processes}")
        if given["transactional"]:
            raise ValueError(
                "a transactional handler runs inside the acknowledging transaction, in this "
                "process: processes= cannot run it"
            )
        if "concurrency" in options and given["concurrency"] != processes:
            raise ValueError("processes=N runs N threads, one per child: leave concurrency out")
        given["concurrency"] = processes
    return given


def tasks_handler(queue: Any, options: Mapping[str, Any]) -> Callable[..., Any]:
    """The handler of a worker loop given none: it runs each job's task by its name
    (:func:`~fdbqueue._queues.tasks.task_runner`; ``handler(tr, value)`` with
    ``transactional=True``).

    Raises:
        TypeError: ``queue``'s codec holds bytes, not task calls."""
    check_codec_holds_tasks(queue)
    return task_runner(queue, options.get("transactional", False) is True)


#: The most child processes ``work(processes=N)`` starts.
MAX_PROCESSES = 256


class HandlerRun:
    """How a worker thread runs its handler on a job's value: here, in the thread (the
    heartbeat enforces the time limit by abandoning the thread: :class:`Job`)."""

    def __init__(self, handler: Callable[..., Any]) -> None:
        self.handler = handler

    def time_limit_of_thread(self, time_limit: float | None) -> float | None:
        """The time limit the heartbeat enforces on the job's thread."""
        return time_limit

    def __call__(self, value: Any, time_limit: float | None) -> Any:
        return self.handler(value)

    def close(self) -> None:
        """Nothing to end."""


class ChildRun(HandlerRun):
    """:class:`HandlerRun` in the thread's child process (``processes=N``): the child is
    killed at the time limit (:mod:`fdbqueue._delivery.processes`)."""

    def __init__(self, make_call: Callable[[Any], ChildCall]) -> None:
        self.make_call = make_call
        self.children = ChildProcesses()

    def time_limit_of_thread(self, time_limit: float | None) -> float | None:
        return None  # the child is killed instead: the thread never runs late

    def __call__(self, value: Any, time_limit: float | None) -> Any:
        return self.children.run(self.make_call(value), time_limit)

    def close(self) -> None:
        """Stop every child: none is left."""
        self.children.close()


def handler_run(queue: Any, handler: Callable[..., Any] | None, processes: int | None) -> Any:
    """The :class:`HandlerRun` of a loop: ``handler`` (None: the queue's tasks) in its
    threads, or in child processes with ``processes``.

    Raises:
        TypeError: with ``processes``, a handler a child cannot import by its name.
    """
    if processes is None:
        return HandlerRun(tasks_handler(queue, {}) if handler is None else handler)
    if handler is None:
        check_codec_holds_tasks(queue)
        return ChildRun(lambda value: child_call(queue, value))
    reference = FunctionReference.of(handler)
    return ChildRun(lambda value: ChildCall(reference, (value,), {}))


def rate_limit_of(queue: Any) -> RateLimit | None:
    """The start slots of ``queue``'s ``rate_limit`` (:mod:`fdbqueue._delivery.rate_limit`),
    which a worker loop takes before each claim; None without a rate limit."""
    slots: RateLimit | None = queue.start_slots
    return slots


def unused_slot(rate: Any, database: Any, slot: bytes) -> None:
    """Give back a start slot whose claim found nothing; one that cannot be cleared now is
    left to the window (it only makes others wait, never start more)."""
    try:
        rate.give_back(database, slot)
    except Exception:
        logger.debug("a start slot could not be given back", exc_info=True)


def ended_paused(queue: Any, summary: WorkSummary) -> None:
    """Mark ``summary`` as that of an ``until_empty`` run that ended on a paused queue, and
    log a WARNING: a batch run on a paused queue ends at once, having taken nothing, and
    says why (the thread and asyncio loops, once their claims found nothing)."""
    summary.paused = True
    logger.warning(
        "queue %s is paused: the until_empty run ends here, its items not taken (resume it: "
        "queue.resume(db), or fdbqueue resume)",
        describe_queue(queue),
    )


@dataclass
class Loop:
    """One call of :func:`work`: what every worker thread shares.

    Slots: ``concurrency`` worker threads run at once (:meth:`start_thread`). A thread whose
    handler runs past ``time_limit`` is abandoned (Python cannot kill a thread): its job is
    settled without it (:meth:`time_out`), and a new thread takes its slot, while at most
    ``concurrency`` abandoned threads still run; past that, the slot stays vacant until an
    abandoned thread's handler returns (:meth:`returned_late`);
    :class:`~fdbqueue._delivery.time_limits.Abandoned` keeps the count, lists them and logs
    it. :meth:`wait` waits for the threads holding a slot, never
    for an abandoned one.
    """

    queue: Any
    database: Any
    handler: Callable[..., Any]  # (value), or (tr, value) when transactional
    options: WorkOptions  # checked: check_work_options
    stop: threading.Event
    heartbeat: Heartbeat
    settler: Settler
    #: How the handler runs: in the threads, or in child processes (:class:`HandlerRun`).
    runs: HandlerRun
    failures: list[BaseException] = field(default_factory=list)
    #: The threads started to hold a slot (an abandoned one leaves the list).
    threads: list[threading.Thread] = field(default_factory=list)
    #: Abandoned threads whose handler has not returned yet, and slots left vacant
    #: (changed under ``slots``).
    abandoned: Abandoned = field(init=False)
    #: The queue's start slots when it has a ``rate_limit`` (None: none).
    rate: RateLimit | None = field(init=False)
    slots: threading.Lock = field(default_factory=threading.Lock)
    started: int = 0  # threads started, to number them

    def __post_init__(self) -> None:
        self.abandoned = Abandoned(self.queue, self.options["concurrency"], logger)
        self.rate = rate_limit_of(self.queue)

    def start_thread(self) -> None:
        """Start a worker thread (:meth:`run_thread`) holding a slot; the caller holds
        ``slots``."""
        thread = threading.Thread(
            target=self.run_thread, name=f"fdbqueue-worker-{self.started}", daemon=True
        )
        self.started += 1
        self.threads.append(thread)
        thread.start()

    def wait(self) -> None:
        """Return once every thread holding a slot has ended, and no vacant slot waits for an
        abandoned thread (unless ``stop`` is set). Short joins: the calling thread stays free
        for signals."""
        while True:
            with self.slots:
                alive = [thread for thread in self.threads if thread.is_alive()]
                vacant = self.abandoned.vacant > 0 and not self.stop.is_set()
            if alive:
                alive[0].join(0.2)
            elif vacant:
                self.stop.wait(0.2)
            else:
                return

    def run_thread(self) -> None:
        """:meth:`run_worker`, keeping a BaseException (SystemExit from a handler, say) for
        :func:`work` to raise once the other threads finished."""
        try:
            self.run_worker()
        except BaseException as error:
            self.stop.set()
            with _FAILURES_LOCK:
                self.failures.append(error)

    def run_worker(self) -> None:
        """Claim and process items until ``stop`` is set (or this thread is abandoned)."""
        pause = CLAIM_ERROR_BACKOFF[0]
        options, rate = self.options, self.rate
        seconds, until_empty = options["lease"], options["until_empty"]
        transactional, loop_limit = options["transactional"], options["time_limit"]
        # the time limit on the thread of a job without one of its own (the loop's)
        loop_limit_on_thread = self.runs.time_limit_of_thread(loop_limit)
        while not self.stop.is_set():
            slot = None
            try:
                due_in = self.settler.retries.seconds_left() if until_empty else 0.0
                if rate is not None:  # a start slot first (fdbqueue._delivery.rate_limit)
                    slot, held_for = rate.take(self.database)
                    if slot is None:
                        self.stop.wait(min(held_for, STOP_CHECK_SECONDS))
                        continue
                if (until_empty and not due_in) or rate is not None:
                    lease = self.queue.claim(self.database, seconds)
                else:  # blocking; with until_empty, for the items this run released
                    wait = min(due_in, STOP_CHECK_SECONDS) if due_in else STOP_CHECK_SECONDS
                    lease = self.queue.claim(self.database, seconds, block=True, timeout=wait)
                pause = CLAIM_ERROR_BACKOFF[0]
            except QueueTypeError:
                raise  # the wrong queue type or codec: no retry can help; work() raises it
            except Exception:
                logger.warning(
                    "claim from %s failed; trying again in %.1fs",
                    metrics.queue_name(self.queue.subspace.key()),
                    pause,
                    exc_info=True,
                )
                self.stop.wait(pause)
                pause = min(pause * 2, CLAIM_ERROR_BACKOFF[1])
                continue
            if lease is None:
                if slot is not None:
                    unused_slot(rate, self.database, slot)
                if until_empty and not due_in:
                    return
                if rate is not None:  # no watch while holding no slot: look again soon
                    self.stop.wait(min(due_in or IDLE_POLL_SECONDS, IDLE_POLL_SECONDS))
                continue
            if self.stop.is_set():
                self.settler.give_back(lease)
                return
            time_limit, on_thread = loop_limit, loop_limit_on_thread
            if lease.job_options is not None:  # the job's own first
                time_limit = own_setting(lease, "time_limit", loop_limit)
                on_thread = self.runs.time_limit_of_thread(time_limit)
            job = Job(lease, on_thread, extend=not transactional)
            if not (
                self.process_in_transaction(job) if transactional else self.process(job, time_limit)
            ):
                return  # abandoned at the time limit: another thread holds the slot now

    def process(self, job: Job, time_limit: float | None) -> bool:
        """Run the handler on one job (:attr:`runs`: ``time_limit`` is the job's), then
        acknowledge, release or dead-letter it. Returns False when the job was taken back at
        its time limit meanwhile (this thread was abandoned: it ends)."""
        result = None
        with self.heartbeat.running(job):
            try:
                result = self.runs(job.lease.value, time_limit)
            except Exception as error:
                failure: BaseException | None = error
            except BaseException as error:  # SystemExit or the like: give the item back
                if not job.timing.finish():
                    self.returned_late(job, error)
                else:
                    with job.lock:
                        if not job.lost:
                            self.settler.give_back(job.lease)
                self.stop.set()
                raise  # work raises it
            else:
                failure = None
            mine = job.timing.finish()
        if not mine:
            self.returned_late(job, failure)
            return False
        if job.timing.late:
            failure = job.timing.exceeded()
        with job.lock:
            if job.lost:
                self.settler.summary.count("lost")
            else:
                self.settler.settle(job.lease, failure, result)
        return True

    def process_in_transaction(self, job: Job) -> bool:
        """Run ``handler(tr, value)`` and acknowledge the job in one transaction, exactly
        once (the ``transactional`` mode); when it raises, nothing of it committed: release
        or dead-letter the job as :meth:`~fdbqueue._delivery.settling.Settler.settle` does.
        Past its time limit nothing of it commits
        (:func:`~fdbqueue._delivery.time_limits.in_time`). Returns as
        :meth:`process`. The heartbeat does not extend the lease (``Job.extend``): the
        transaction lasts at most five seconds."""
        lease = job.lease
        with self.heartbeat.running(job):
            try:
                self.settler.ack_with(lease, in_time(job.timing, self.handler, lease.value))
            except Exception as error:
                if not job.timing.finish():
                    self.returned_late(job, error)
                    return False
                self.settler.settle(lease, error)
            except BaseException as error:  # SystemExit or the like: give the item back
                if job.timing.finish():
                    self.settler.give_back(lease)
                else:
                    self.returned_late(job, error)
                self.stop.set()
                raise  # work raises it
        return True

    def time_out(self, job: Job) -> None:
        """Called by the heartbeat once ``job`` ran past its time limit: unless its handler
        finished meanwhile, take the job back and settle it as failed with
        :class:`~fdbqueue.errors.TimeLimitExceeded` (released with a backoff, or
        dead-lettered on its last delivery:
        :meth:`~fdbqueue._delivery.settling.Settler.settle`), then abandon its thread
        and give its slot to a new thread (see the class docstring), in that order, so that
        the new thread finds the job's message group going on. Cost: one release or
        dead_letter."""
        with self.slots:  # one step for wait() and returned_late()
            if not job.timing.take_back():
                return  # the handler finished first: its own thread settles the job
            with job.lock:
                if job.lost:
                    self.settler.summary.count("lost")
                else:
                    try:
                        self.settler.settle(job.lease, job.timing.exceeded())
                    except Exception:  # the lease expires (no more extensions): redelivered
                        logger.warning(
                            "%s ran past its time limit and could not be released",
                            describe(self.queue, job.lease),
                            exc_info=True,
                        )
            if job.thread in self.threads:
                self.threads.remove(job.thread)
            goes_on = self.abandoned.abandon(job, job.lease, job.timing.limit)
            if goes_on and not self.stop.is_set():  # once stopped, no new job starts
                self.start_thread()

    def returned_late(self, job: Job, failure: BaseException | None) -> None:
        """The handler of ``job``, taken back at its time limit, returned (or raised
        ``failure``) in its abandoned thread: log it
        (:meth:`~fdbqueue._delivery.settling.Settler.returned_late`) and, if a slot is
        vacant, start a thread for it. This thread then ends."""
        self.settler.returned_late(job.lease, job.timing, failure)
        with self.slots:
            if self.abandoned.returned(job) and not self.stop.is_set():
                self.start_thread()


@contextmanager
def stop_on_signals(stop: threading.Event, enabled: bool) -> Iterator[None]:
    """Set ``stop`` on the first SIGINT or SIGTERM (in the main thread only; elsewhere
    nothing changes); the previous handlers come back at once, so a second signal acts as
    usual, and when the block ends."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(number: int, _frame: Any) -> None:
        logger.info("%s received: finishing running jobs", signal.Signals(number).name)
        stop.set()
        for known, handler in previous.items():
            signal.signal(known, handler)

    for number in previous:
        signal.signal(number, on_signal)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def registration(
    queue: Any,
    database: Any,
    settler: Settler,
    running: Callable[[], list[Lease[Any]]],
    abandoned: Abandoned,
) -> Registration:
    """The worker record of a loop on ``queue`` (sync), whose ``settler`` counts its jobs
    done, ``running()`` gives the leases of its jobs running and ``abandoned`` its abandoned
    handlers (:mod:`fdbqueue._delivery.workers`; both loops keep one). At each beat of the
    record, a wedged loop says so again (:meth:`Abandoned.remind`)."""

    def status() -> tuple[int, list[str]]:
        return settler.summary.jobs_done, [job_id(lease) for lease in running()]

    def listed() -> list[str]:
        abandoned.remind()
        return abandoned.ids()

    registry = WorkerRegistry(metadata_subspace(queue.subspace))
    return Registration(registry, database, status, abandoned=listed)


def work(
    queue: Any,
    database: Any,
    handler: Callable[..., Any] | None = None,
    *,
    stop: threading.Event | None = None,
    **options: Unpack[WorkOptions],
) -> WorkSummary:
    """Run the worker loop on ``queue`` (see the module docstring) until ``stop`` is set.

    Arguments are those of :meth:`fdbqueue.Queue.work`, which documents them; no
    ``handler``: each job's task, by its name (:func:`tasks_handler`). Raises TypeError or
    ValueError for a bad argument (a coroutine function as ``handler`` included:
    :func:`refuse_coroutine_handler`), before anything is read or written.
    """
    given_handler = handler
    if handler is None:
        handler = tasks_handler(queue, options)
    given = check_work_options(queue, database, handler, options)
    refuse_coroutine_handler(queue, handler)
    if stop is not None and not isinstance(stop, threading.Event):
        raise TypeError(f"stop must be a threading.Event or None, not {type(stop).__name__}")
    handler = awaiting_refused(queue, handler)
    processes = given["processes"]
    runs = handler_run(queue, given_handler, processes) if processes else HandlerRun(handler)
    stop = stop if stop is not None else threading.Event()
    settler = Settler(queue, database, given)
    heartbeat = Heartbeat(queue, database, given["lease"])
    loop = Loop(queue, database, handler, given, stop, heartbeat, settler, runs)
    registered = RegistrationThread(
        registration(queue, database, settler, heartbeat.leases, loop.abandoned)
    )
    heartbeat.on_time_out = loop.time_out
    concurrency, seconds, summary = given["concurrency"], given["lease"], settler.summary
    logger.info(
        "worker started on %s: %d thread%s%s, leases of %.1fs",
        metrics.queue_name(queue.subspace.key()),
        concurrency,
        "" if concurrency == 1 else "s",
        "" if processes is None else ", each with a child process",
        seconds,
    )
    # the queue's periodic jobs: one more thread enqueues their due runs (docs/schedules.rst)
    schedules = threading.Thread(
        target=check_until_stopped,
        args=(lambda: queue.maintain(database), stop, describe_queue(queue)),
        name="fdbqueue-schedules",
        daemon=True,
    )
    with stop_on_signals(stop, given["handle_signals"]):
        with loop.slots:
            for _ in range(concurrency):
                loop.start_thread()
        schedules.start()
        try:
            loop.wait()
            if given["until_empty"] and not stop.is_set() and queue.is_paused(database):
                ended_paused(queue, summary)
        finally:
            stop.set()
            heartbeat.close()
            schedules.join()
            registered.close()
            runs.close()
    logger.info("worker stopped on %s: %s", metrics.queue_name(queue.subspace.key()), summary)
    loop.abandoned.at_stop()
    if loop.failures:
        raise loop.failures[0]
    return summary
