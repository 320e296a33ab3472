"""The worker loop for asyncio: ``await queue.work(db, handler, lease=30)`` with a
:class:`fdbqueue.asyncio.Queue` or :class:`fdbqueue.asyncio.PriorityQueue`.

It does what :mod:`fdbqueue.worker` does, with tasks instead of threads: ``concurrency``
tasks each claim an item (a blocking claim awaiting a watch), await ``handler(value)``,
acknowledge on success, release with a backoff delay on an exception or move the item to the
dead letters on its last delivery, while a heartbeat task per job extends its lease every
``lease / 3`` seconds. It takes the same keywords (:class:`fdbqueue.worker.WorkOptions`,
checked by :func:`fdbqueue.worker.check_work_options`) and ends its jobs with the same
:class:`fdbqueue._delivery.settling.Settler`, whose synchronous calls run on the event loop
in a greenlet (:func:`fdbqueue.asyncio._bridge.run`), as every operation of
:mod:`fdbqueue.asyncio` does.

A task besides enqueues the due runs of the queue's schedules, about once a second, as the
thread loop's thread does (:mod:`fdbqueue._delivery.schedules`).

``handler`` may be a coroutine function (awaited on the loop) or a plain function (run in a
thread, so that it cannot block the loop: a daemon thread of the loop's own,
:class:`HandlerThreads`, not the event loop's default executor, whose threads ``asyncio.run``
waits for at its end).

Time limit: measured from the handler's own start (its coroutine's first step, or its
thread's start; in a transactional loop, the first attempt of its transaction), so that time
it spent scheduled (behind a coroutine that blocks the event loop, say) never counts against
it, and a handler that returned within its limit is never failed by it, however late this
task looks. Past ``time_limit`` seconds a coroutine handler is cancelled, a plain one's
thread abandoned (its late return logged and discarded), and the job settled as failed with
:class:`~fdbqueue.errors.TimeLimitExceeded` at once, as the thread loop does; a
transactional handler (on the loop) is cancelled while it waits on FoundationDB, and refused
at its return when it blocked the loop: nothing of it commits
(:mod:`fdbqueue._delivery.time_limits`). Abandoned handlers follow the thread loop's rule
(:class:`fdbqueue._delivery.time_limits.Abandoned`): a task goes on with a new job while at most
``concurrency`` handlers are abandoned, else waits for one to return; a coroutine that did
not end when cancelled is abandoned too, and its task waits for it.

Stopping: ``stop`` is an ``asyncio.Event``. Once set, a claim still waiting is cancelled
(its watch cancelled; an item it took meanwhile is released), running jobs finish and are
acknowledged or released, and ``work`` returns its :class:`~fdbqueue.worker.WorkSummary`. In
the main thread of a Unix process, SIGINT and SIGTERM set ``stop`` (the first one; the loop's
handlers are removed then, so a second one acts as usual). Cancelling the task that awaits
``work`` cancels its tasks: a claim in progress is cancelled (an item it took meanwhile is
released), running handlers see CancelledError and their items are released, a job being
acknowledged is acknowledged; ``work`` raises CancelledError once every one of its tasks
has ended, holding no lease.

Source followed: as :mod:`fdbqueue.worker` and :mod:`fdbqueue._delivery.settling` (rq's and
Celery's worker loops, SQS visibility timeouts); asyncio's ``loop.add_signal_handler`` for
the signals.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import queue as queues
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from fdbqueue import metrics
from fdbqueue._delivery import schedules
from fdbqueue._delivery import workers as registry
from fdbqueue._delivery.leases import Lease
from fdbqueue._delivery.rate_limit import IDLE_POLL_SECONDS
from fdbqueue._delivery.settling import Settler, WorkSummary, own_setting
from fdbqueue._delivery.time_limits import Abandoned, Timing, in_time
from fdbqueue._queues.tasks import coroutine_task_runner
from fdbqueue.asyncio import _bridge as bridge
from fdbqueue.errors import LeaseError, QueueTypeError
from fdbqueue.worker import (
    CLAIM_ERROR_BACKOFF,
    STOP_CHECK_SECONDS,
    WorkOptions,
    awaiting_refused,
    check_work_options,
    ended_paused,
    is_coroutine_handler,
    rate_limit_of,
    registration,
    tasks_handler,
    unused_slot,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["work"]

logger = logging.getLogger("fdbqueue.worker")

R = TypeVar("R")


class AsyncJob:
    """A claimed item being processed; the heartbeat replaces ``lease`` when it extends it
    (the job is settled or released only once the heartbeat has ended); its time limit
    (``time_limit`` seconds from its handler's start, None: none), and who settles it
    (:class:`Timing`, started by the handler's side)."""

    def __init__(self, lease: Lease[Any], time_limit: float | None = None) -> None:
        self.lease = lease
        self.lost = False
        self.timing = Timing(time_limit, start=False)


class HandlerThreads:
    """The threads a loop runs its plain handler in: daemon threads of its own, started when
    none is idle and reused (an idle one waits for the next call), never joined. So a
    handler abandoned past its time limit that never returns holds up neither ``work``'s end
    nor the program's exit (the event loop's default executor would: ``asyncio.run`` waits
    for its threads, and Python for a ThreadPoolExecutor's at exit). Thread-safe; one per
    call of :func:`work`, which :meth:`close` s it."""

    def __init__(self) -> None:
        self._calls: queues.SimpleQueue[
            tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop] | None
        ] = queues.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._closed = False
        self._started = 0

    async def run(self, function: Callable[[], R]) -> R:
        """``function()`` in one of the threads; what it returned (or raises what it raised).
        Cancelled, the awaiting task no longer waits; the thread runs on."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the handler threads are closed")
            if self._idle:
                self._idle -= 1
            else:
                self._started += 1
                name = f"fdbqueue-handler-{self._started}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
        self._calls.put((function, future, loop))
        return await future

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            function, future, loop = call
            try:
                outcome: tuple[Any, BaseException | None] = (function(), None)
            except BaseException as error:
                outcome = (None, error)
            with self._lock:  # idle before its caller can see the outcome and call again
                closed = self._closed
                if not closed:
                    self._idle += 1
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_deliver, future, *outcome)
            if closed:
                return

    def close(self) -> None:
        """Let the idle threads end (and each busy one once its call returns)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._calls.put(None)


def _deliver(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Set ``future``'s outcome, unless it was cancelled (its handler was abandoned)."""
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark ``task``'s outcome as seen (a task left to end on its own is not reported as
    "exception never retrieved"; what it raised after its time limit was logged or is moot)."""
    if not task.cancelled():
        task.exception()


async def finish(awaitable: Awaitable[R]) -> R:
    """Await ``awaitable`` to its end even if the current task is cancelled meanwhile, then
    raise CancelledError if it was (a release or an acknowledgement is never cut short);
    else return its result."""
    future = asyncio.ensure_future(awaitable)
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait({future})
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not future.cancelled():
            future.exception()  # retrieved: CancelledError is what the caller sees
        raise asyncio.CancelledError()
    return future.result()


async def past_limit(future: asyncio.Future[Any], timing: Timing) -> bool:
    """Wait until ``future`` (running a handler) is done: False; or until its handler ran
    past its time limit, by ``timing`` (from the handler's own start), and the worker took it
    back (:meth:`Timing.take_back`): True. A handler that finished, however late this task
    looks (the event loop was blocked), is never taken back."""
    while not future.done():
        now = time.monotonic()
        if timing.past(now) and timing.take_back():
            return True
        await asyncio.wait({future}, timeout=timing.remaining(now))
    return False


class AsyncLoop:
    """One call of :func:`work`: what its tasks share."""

    def __init__(
        self,
        queue: Any,
        database: Any,
        handler: Callable[..., Any],
        options: WorkOptions,
        stop: asyncio.Event,
        plain: bool = False,
    ) -> None:
        self.queue = queue
        self.database = database
        self.handler = handler
        #: Whether ``handler`` is a plain function, run in :attr:`threads`.
        self.plain = plain
        self.threads = HandlerThreads()
        self.loop = asyncio.get_running_loop()
        self.seconds = options["lease"]
        self.time_limit = options["time_limit"]
        self.stop = stop
        self.until_empty = options["until_empty"]
        self.transactional = options["transactional"]
        #: Ends the jobs, with the synchronous queue, in greenlets (:meth:`give_back`,
        #: :meth:`settle`).
        self.settler = Settler(queue.sync, database, options)
        self.summary: WorkSummary = self.settler.summary
        #: The jobs running, for the loop's worker record (:meth:`keep_registered`).
        self.running: set[AsyncJob] = set()
        #: The handlers abandoned past their time limit, and the slots they keep vacant.
        self.abandoned = Abandoned(queue, options["concurrency"], logger)
        #: Slots given back by abandoned handlers that returned, not taken yet
        #: (:meth:`vacant_slot`), and its wake-up.
        self.freed = 0
        self.slot_freed = asyncio.Event()
        #: The queue's start slots when it has a ``rate_limit`` (None: none).
        self.rate = rate_limit_of(queue.sync)

    async def run_worker(self) -> None:
        """Claim and process items until ``stop`` is set."""
        pause = CLAIM_ERROR_BACKOFF[0]
        rate = self.rate
        while not self.stop.is_set():
            due_in = self.settler.retries.seconds_left() if self.until_empty else 0.0
            slot = None
            try:
                if rate is not None:  # a start slot first (fdbqueue._delivery.rate_limit)
                    slot, held_for = await bridge.run(rate.take, self.database)
                    if slot is None:
                        await self.pause(min(held_for, STOP_CHECK_SECONDS))  # (a clock may jump)
                        continue
                    lease = await self.queue.claim(self.database, self.seconds)
                else:
                    lease = await self.claim(due_in)
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
                await self.pause(pause)
                pause = min(pause * 2, CLAIM_ERROR_BACKOFF[1])
                continue
            if lease is None:
                if slot is not None:
                    await bridge.run(unused_slot, rate, self.database, slot)
                if self.until_empty and not due_in:
                    return
                if rate is not None:  # no watch while holding no slot: look again soon
                    await self.pause(min(due_in or IDLE_POLL_SECONDS, IDLE_POLL_SECONDS))
                continue
            if self.stop.is_set():
                await self.give_back(lease)
                return
            job = AsyncJob(lease, own_setting(lease, "time_limit", self.time_limit))
            self.running.add(job)
            try:
                goes_on = await self.process(job)
            finally:
                self.running.discard(job)
            if not goes_on and not await self.vacant_slot():
                return

    async def pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less once ``stop`` is set."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)

    async def vacant_slot(self) -> bool:
        """Wait, this task's slot vacant (its handler abandoned, past ``concurrency``
        abandoned ones), until an abandoned handler returns and gives a slot back
        (:meth:`handler_returned`): True; or until ``stop`` is set: False."""
        while not self.freed:
            if self.stop.is_set():
                return False
            self.slot_freed.clear()
            waits = {
                asyncio.ensure_future(self.slot_freed.wait()),
                asyncio.ensure_future(self.stop.wait()),
            }
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
        self.freed -= 1
        return True

    def handler_returned(self, job: AsyncJob) -> None:
        """On the event loop: the abandoned handler of ``job`` returned in its thread. It
        is no longer listed, and a vacant slot, if any, goes on (:meth:`vacant_slot`)."""
        if self.abandoned.returned(job):
            self.freed += 1
            self.slot_freed.set()

    async def claim(self, due_in: float = 0.0) -> Lease[Any] | None:
        """A claim that gives up when ``stop`` is set: blocking, unless ``until_empty`` (then
        blocking for at most ``due_in`` seconds, while items this run released fall due). A
        claim given up on, or cut short by a cancellation of this task, is waited for to its
        end, and an item it took meanwhile (its commit landed) is released."""
        if self.until_empty and not due_in:
            lease: Lease[Any] | None = await self.queue.claim(self.database, self.seconds)
            return lease
        timeout = due_in or None
        claiming = asyncio.ensure_future(
            self.queue.claim(self.database, self.seconds, block=True, timeout=timeout)
        )
        stopping = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({claiming, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # this task was cancelled
            await finish(self.abandon(claiming))
            raise
        finally:
            stopping.cancel()
        if not claiming.done():  # stop was set
            await finish(self.abandon(claiming))
            return None
        lease = claiming.result()
        return lease

    async def abandon(self, claiming: asyncio.Future[Lease[Any] | None]) -> None:
        """Cancel a claim, wait for its end and release the item it took if it took one."""
        claiming.cancel()
        await asyncio.wait({claiming})
        if claiming.cancelled() or claiming.exception() is not None:
            return
        lease = claiming.result()
        if lease is not None:
            await self.give_back(lease)

    async def check_schedules(self) -> None:
        """Enqueue the due runs of the queue's schedules now and then every
        :data:`~fdbqueue._delivery.schedules.CHECK_SECONDS` until ``stop`` is set (the
        thread loop's :func:`~fdbqueue._delivery.schedules.check_until_stopped`, as a task);
        a failure is logged and the next check tries again."""
        while not self.stop.is_set():
            try:
                await bridge.run(self.queue.sync.maintain, self.database)
            except Exception:
                logger.warning(
                    "enqueuing the due runs of %s failed",
                    metrics.queue_name(self.queue.subspace.key()),
                    exc_info=True,
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop.wait(), schedules.CHECK_SECONDS)

    async def give_back(self, lease: Lease[Any]) -> None:
        """Release ``lease`` at once, unprocessed
        (:meth:`fdbqueue._delivery.settling.Settler.give_back`)."""
        await bridge.run(self.settler.give_back, lease)

    async def process(self, job: AsyncJob) -> bool:
        """Run the handler on one job with its heartbeat, then settle it. Cancelled (or
        stopped by SystemExit) meanwhile, it releases the item and raises; a cancellation
        that arrives while the job is settled waits for the settlement, then is raised.
        Returns whether this task's slot goes on (False: it waits, :meth:`vacant_slot`).

        Past the time limit (:func:`past_limit`), the heartbeat stops, the handler is
        cancelled (a plain function's thread cannot be: it is abandoned at once, and what it
        returns is discarded), the job is settled as failed with
        :class:`~fdbqueue.errors.TimeLimitExceeded` at once, and this task then waits for the
        cancelled coroutine to end (:meth:`outlive`)."""
        if self.transactional:
            await self.process_in_transaction(job)
            return True
        beating = asyncio.ensure_future(self.heartbeat(job))
        call = asyncio.ensure_future(self.call_handler(job))
        try:
            taken = await past_limit(call, job.timing)
        except BaseException:  # this task was cancelled: so is the handler, then its item
            beating.cancel()
            call.cancel()
            await finish(self.drop(job, beating, call))
            raise
        beating.cancel()
        if taken:  # past the time limit
            goes_on = True
            if self.plain:  # now, before its thread's return can be seen (handler_returned)
                self.running.discard(job)
                goes_on = self.abandoned.abandon(job, job.lease, job.timing.limit)
            call.cancel()
            await finish(self.end(job, beating, job.timing.exceeded(), give_back=False))
            await finish(self.outlive(job, call))
            return goes_on
        job.timing.finish()
        failure = asyncio.CancelledError() if call.cancelled() else call.exception()
        if failure is not None and not isinstance(failure, Exception):
            await finish(self.end(job, beating, None, give_back=True))
            raise failure
        if job.timing.late:  # returned past the limit, before this task saw it pass
            failure = job.timing.exceeded()
        result = None if failure is not None else call.result()
        await finish(self.end(job, beating, failure, give_back=False, result=result))
        return True

    async def outlive(self, job: AsyncJob, call: asyncio.Future[Any]) -> None:
        """Once a job taken back at its time limit is settled, wait for its cancelled
        coroutine to end (its cleanup, before the next job). One that still runs then did
        not end when cancelled: it is abandoned (logged, listed), this task's slot held
        until it ends, and its end logged as a late return. A plain function's thread is not
        waited for (abandoned already)."""
        if not call.done() and not self.plain:
            self.running.discard(job)
            self.abandoned.abandon(job, job.lease, job.timing.limit, hold=True)
            await asyncio.wait({call})
            self.abandoned.returned(job)
            failure = asyncio.CancelledError() if call.cancelled() else call.exception()
            self.settler.returned_late(job.lease, job.timing, failure)
        await asyncio.wait({call})
        _retrieve(call)

    async def call_handler(self, job: AsyncJob) -> Any:
        """Await the handler on ``job``'s value: a coroutine on the loop, a plain function in
        one of the loop's threads (:meth:`run_plain`); what it returned. The handler's time
        starts with its first step (:meth:`Timing.start`) and ends with its return."""
        if self.plain:
            return await self.threads.run(functools.partial(self.run_plain, job))
        job.timing.start()
        try:
            result = self.handler(job.lease.value)
            if inspect.isawaitable(result):
                result = await result
        finally:
            job.timing.finish()
        return result

    def run_plain(self, job: AsyncJob) -> Any:
        """Call a plain handler on ``job``'s value (in a thread of :attr:`threads`), its time
        from its start; once it returns or raises after its job was taken back at its time
        limit, log it as the thread loop does
        (:meth:`fdbqueue._delivery.settling.Settler.returned_late`) and tell the event loop
        (:meth:`handler_returned`)."""
        job.timing.start()
        try:
            result = self.handler(job.lease.value)
        except BaseException as error:
            if not job.timing.finish():
                self.returned_late(job, error)
            raise
        if not job.timing.finish():
            self.returned_late(job, None)
        return result

    def returned_late(self, job: AsyncJob, failure: BaseException | None) -> None:
        """In the thread of an abandoned plain handler that returned (or raised
        ``failure``): log it, and tell the event loop (if it still runs)."""
        self.settler.returned_late(job.lease, job.timing, failure)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(self.handler_returned, job)

    async def drop(self, job: AsyncJob, beating: asyncio.Future[None], call: Any) -> None:
        """Wait for the cancelled handler's end, then release the job's item."""
        await asyncio.wait({call})
        _retrieve(call)
        await self.end(job, beating, None, give_back=True)

    async def process_in_transaction(self, job: AsyncJob) -> None:
        """Run ``handler(tr, value)`` and acknowledge the job in one transaction, exactly
        once (the ``transactional`` mode; no heartbeat: the transaction lasts at most five
        seconds); when it raises, nothing of it committed: release or dead-letter the job.
        Past the time limit (or cancelled) before its handler returned, the transaction is
        cancelled and nothing of it commits
        (:func:`~fdbqueue._delivery.time_limits.in_time`); the job is then settled as failed
        with :class:`~fdbqueue.errors.TimeLimitExceeded` (or released, when cancelled)."""
        lease = job.lease
        body = in_time(job.timing, self.handler, lease.value)
        acking = asyncio.ensure_future(bridge.run(self.settler.ack_with, lease, body))
        cancelled = False
        try:
            taken = await past_limit(acking, job.timing)
        except BaseException:  # this task was cancelled
            cancelled = True
            taken = not acking.done() and job.timing.take_back()
        if taken:  # the handler runs still: nothing of it can commit now
            acking.cancel()
        await finish(self.conclude(job, acking, taken, cancelled))
        if cancelled:
            raise asyncio.CancelledError()

    async def conclude(
        self, job: AsyncJob, acking: asyncio.Future[Any], taken: bool, cancelled: bool
    ) -> None:
        """Once ``acking`` (the transaction of :meth:`process_in_transaction`) has ended,
        settle the job: taken back, as failed with the time limit (released unprocessed when
        ``cancelled``); else by the transaction's outcome."""
        lease = job.lease
        await asyncio.wait({acking})
        if taken:
            _retrieve(acking)
            if cancelled:
                await self.give_back(lease)
            else:
                await self.settle(lease, job.timing.exceeded())
            return
        try:
            acking.result()  # counted the job, succeeded or lost (Settler.ack_with)
        except Exception as error:
            await self.settle(lease, error)
        except BaseException:  # cancelled before its commit: nothing applied, give it back
            await self.give_back(lease)
            if not cancelled:
                raise

    async def end(
        self,
        job: AsyncJob,
        beating: asyncio.Future[None],
        failure: BaseException | None,
        give_back: bool,
        result: Any = None,
    ) -> None:
        """Once the (cancelled) heartbeat has ended, release the job's item (``give_back``) or
        settle it (a job keeps ``result``); a job whose lease was lost is only counted."""
        await asyncio.wait({beating})
        if job.lost:
            self.summary.count("lost")
        elif give_back:
            await self.give_back(job.lease)
        else:
            await self.settle(job.lease, failure, result)

    async def heartbeat(self, job: AsyncJob) -> None:
        """Extend the job's lease every ``lease / 3`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.seconds / 3)
            try:
                job.lease = await self.queue.extend(self.database, job.lease, self.seconds)
            except LeaseError as error:
                job.lost = True
                logger.warning("lost the lease of a running job: %s", error)
                return
            except Exception as error:  # the cluster; try again at the next beat
                logger.warning("could not extend a job's lease: %s", error)

    async def keep_registered(self, record: registry.Registration) -> None:
        """Beat the loop's worker record (registered already) every
        :data:`~fdbqueue._delivery.workers.HEARTBEAT_SECONDS` until cancelled (each write
        on the loop, in a greenlet; a failed one is logged and left to the next beat)."""
        while True:
            await asyncio.sleep(registry.HEARTBEAT_SECONDS)
            await bridge.run(record.beat)

    def running_leases(self) -> list[Lease[Any]]:
        """The current lease of every job running."""
        return [job.lease for job in self.running]

    async def settle(
        self, lease: Lease[Any], failure: BaseException | None, result: Any = None
    ) -> None:
        """Acknowledge a job that succeeded (keeping ``result``); release or dead-letter one
        that failed (:meth:`fdbqueue._delivery.settling.Settler.settle`)."""
        await bridge.run(self.settler.settle, lease, failure, result)


@contextlib.asynccontextmanager
async def stop_on_signals(stop: asyncio.Event, enabled: bool) -> AsyncIterator[None]:
    """Set ``stop`` on the first SIGINT or SIGTERM, through the running loop's signal
    handlers (main thread, Unix); nothing changes elsewhere or when not ``enabled``."""
    loop = asyncio.get_running_loop()
    installed: list[int] = []

    def on_signal(number: int) -> None:
        logger.info("%s received: finishing running jobs", signal.Signals(number).name)
        stop.set()
        for known in installed:
            loop.remove_signal_handler(known)
        installed.clear()

    if enabled and threading.current_thread() is threading.main_thread():
        for wanted in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(wanted, on_signal, int(wanted))
                installed.append(int(wanted))
            except (NotImplementedError, RuntimeError):  # not on this platform or loop
                break
    try:
        yield
    finally:
        for number in installed:
            loop.remove_signal_handler(number)


async def work(
    queue: Any,
    database: Any,
    handler: Callable[..., Any] | None = None,
    *,
    stop: asyncio.Event | None = None,
    **options: Unpack[WorkOptions],
) -> WorkSummary:
    """Run the worker loop on the asynchronous ``queue`` until ``stop`` is set (see the
    module docstring); arguments as :meth:`fdbqueue.Queue.work`, with ``stop`` an
    ``asyncio.Event``; no ``handler``: each job's task by its name, a coroutine function's
    awaited, a plain one's run in a thread (``asyncio.to_thread``; with ``transactional``,
    every task is called inside the acknowledging transaction, as a plain handler is).

    Raises:
        TypeError, ValueError: a bad argument, before anything is read or written.
    """
    if handler is None:
        handler = (
            tasks_handler(queue, options)
            if options.get("transactional", False) is True
            else coroutine_task_runner(queue)
        )
    given = check_work_options(queue, database, handler, options)
    if given["processes"] is not None:
        raise TypeError(
            "processes= runs handlers in child processes from the thread worker: use "
            f"fdbqueue.{type(queue).__name__}.work (the synchronous queue's)"
        )
    if stop is not None and not isinstance(stop, asyncio.Event):
        raise TypeError(f"stop must be an asyncio.Event or None, not {type(stop).__name__}")
    transactional = given["transactional"]
    coroutine = is_coroutine_handler(handler)
    if transactional and coroutine:
        raise TypeError(
            "a transactional handler must be a plain function handler(tr, value): it runs "
            "inside the transaction that acknowledges the item"
        )
    if not coroutine:  # in the executor or the transaction: what it returns is not awaited
        handler = awaiting_refused(queue, handler)
    plain = not coroutine and not transactional
    event = stop if stop is not None else asyncio.Event()
    loop = AsyncLoop(queue, database, handler, given, event, plain)
    concurrency, seconds = given["concurrency"], given["lease"]
    logger.info(
        "worker started on %s: %d task%s, leases of %.1fs",
        metrics.queue_name(queue.subspace.key()),
        concurrency,
        "" if concurrency == 1 else "s",
        seconds,
    )
    record = registration(queue.sync, database, loop.settler, loop.running_leases, loop.abandoned)
    tasks: list[asyncio.Future[None]] = []
    async with stop_on_signals(loop.stop, given["handle_signals"]):
        try:
            await bridge.run(record.register)  # before the first claim
            tasks.append(asyncio.ensure_future(loop.keep_registered(record)))
            tasks.append(asyncio.ensure_future(loop.check_schedules()))  # the periodic jobs
            workers = [asyncio.ensure_future(loop.run_worker()) for _ in range(concurrency)]
            tasks += workers
            await asyncio.gather(*workers)
            if given["until_empty"] and not event.is_set() and await queue.is_paused(database):
                ended_paused(queue, loop.summary)
        finally:
            for task in tasks:
                task.cancel()
            try:
                await finish(asyncio.gather(*tasks, return_exceptions=True))
            finally:
                loop.threads.close()
                await finish(bridge.run(record.deregister))
    logger.info("worker stopped on %s: %s", metrics.queue_name(queue.subspace.key()), loop.summary)
    loop.abandoned.at_stop()
    return loop.summary
