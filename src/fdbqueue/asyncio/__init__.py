"""Coroutine twins of the queues, for asyncio: ``await queue.dequeue(db, block=True)``.

>>> import asyncio, fdbqueue.asyncio
>>> from fdbqueue import Subspace, memory
>>> async def main():
...     db = memory.open()
...     queue = fdbqueue.asyncio.Queue(Subspace(("Q",)))
...     await queue.enqueue(db, "job-1")
...     return await queue.dequeue(db)
>>> asyncio.run(main())
'job-1'

:class:`Queue` and :class:`PriorityQueue` take the arguments of :class:`fdbqueue.Queue` and
:class:`fdbqueue.PriorityQueue` and wrap one such synchronous queue (``.sync``); every
operation is a coroutine with the synchronous method's signature and contract, run by
:func:`fdbqueue.asyncio._bridge.run`: in a greenlet on the event loop's thread, which hands every
wait (reads, commits, retries' backoffs, watches) to the event loop instead of blocking the thread.
No thread per call, and the very code of the synchronous queues, so both APIs share a subspace.

Cancelling a task ends the call it awaits with ``CancelledError`` within about one commit's
time: at once before the call sends a commit (nothing took effect) and in a blocked take
(``block=True``: its watch cancelled, its place in line withdrawn); a cancellation that arrives
while a commit is in flight waits for it, and a call whose commit landed returns its value
(nothing taken is lost) while the task is cancelled again at its next suspension. The
guarantees page states the contract; :mod:`fdbqueue.asyncio._bridge` has the mechanics.

Inside your own coroutines, :func:`transactional` is ``fdb.transactional`` for ``async def``
functions and :func:`wait_future` awaits a raw future of either backend.

Types: :class:`Queue` and :class:`PriorityQueue` are generic in their values as the
synchronous queues are (``Queue(subspace, codec=my_codec)`` with a ``Codec[str]`` is a
``Queue[str]``, whose ``await queue.dequeue(db)`` is a ``str | None``). Their operations are
class attributes made from the synchronous methods, so a type checker sees them through an
instance (``queue.dequeue``), not through the class (``Queue.dequeue`` is ambiguous to mypy).
:class:`Consumer`'s values are ``Any``.

Importing this module replaces ``block_until_ready`` of the futures of
:mod:`fdbqueue.memory` and (once loaded) of the ``fdb`` binding by a greenlet-aware one
(:func:`fdbqueue._transactions.suspension.install`); outside fdbqueue's greenlets it calls the
original unchanged. This is why ``import fdbqueue`` does not import this module.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    TypeVar,
    overload,
)

import fdbqueue.priority
import fdbqueue.queue
from fdbqueue import worker
from fdbqueue._consuming.sessions import Consumer as SyncConsumer
from fdbqueue._delivery.settling import WorkSummary
from fdbqueue._queues.base import QueueBase, QueueOptions, T
from fdbqueue._transactions import suspension
from fdbqueue._transactions.transactional import (
    ContextParameter,
    First,
    TransactionContext,
    commit,
    is_fdb_error,
    is_transaction,
)
from fdbqueue._wording import name_methods_after
from fdbqueue.asyncio import _bridge as bridge
from fdbqueue.asyncio import _worker as async_worker
from fdbqueue.asyncio._bridge import wait_future
from fdbqueue.codecs import Codec

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Consumer", "PriorityQueue", "Queue", "transactional", "wait_future"]

suspension.install()

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=QueueBase[Any])
Twin = TypeVar("Twin", bound="_StoredQueue[Any, Any]")


def _twin(
    method: Callable[Concatenate[Any, P], R], owner: str
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The coroutine twin of a synchronous ``method``: it calls ``method`` of ``self.sync``
    (looked up by name, so overrides count) through :func:`fdbqueue.asyncio._bridge.run`, with every
    argument forwarded; ``owner`` is the public class named in its docstring."""
    name = method.__name__

    async def twin(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = await bridge.run(getattr(self.sync, name), *args, **kwargs)
        return result

    functools.update_wrapper(twin, method)
    twin.__doc__ = f"Coroutine twin of :meth:`fdbqueue.{owner}.{name}`.\n\n" + (
        inspect.getdoc(method) or ""
    )
    return twin


class Consumer:
    """A consumer session with coroutine calls (:class:`fdbqueue.Consumer` underneath, as
    ``.sync``). Use it with ``async with``: leaving closes it, withdrawing its requests."""

    def __init__(self, session: SyncConsumer) -> None:
        self._session = session

    @property
    def sync(self) -> SyncConsumer:
        """The synchronous session this one runs."""
        return self._session

    take = _twin(SyncConsumer.take, "Consumer")
    dequeue = take
    pop = take
    claim = _twin(SyncConsumer.claim, "Consumer")

    async def close(self) -> None:
        """Coroutine twin of :meth:`fdbqueue.Consumer.close`, run to its end: a cancellation
        that arrives meanwhile waits for the session to close and is delivered at the task's
        next suspension (so ``async with`` never loses the value its block returns)."""
        await bridge.run_to_end(self._session.close)

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


#: The first argument with which :meth:`_StoredQueue.from_sync` makes a twin around an
#: existing synchronous queue (no user passes it: it is private to this module).
_SHARING = object()


class _StoredQueue(Generic[S, T]):
    """What both async queues share: the synchronous queue, its properties and the coroutine
    twins of the operations of :class:`~fdbqueue._queues.base.QueueBase`, and the worker
    loop. ``S`` is the
    synchronous queue's class, ``T`` the type of its values (as for :class:`fdbqueue.Queue`:
    ``fdbqueue.asyncio.Queue[str]`` for a ``Codec[str]``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Name the inherited public methods after the queue type (``Queue.work``)
        (:func:`~fdbqueue._wording.name_methods_after`)."""
        super().__init_subclass__(**kwargs)
        name_methods_after(cls)

    _sync: S
    _sync_class: type[Any]  # S's class (a type variable cannot type a class variable)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) == 2 and args[0] is _SHARING and not kwargs:  # from_sync's
            self._sync = args[1]
        else:
            self._sync = self._sync_class(*args, **kwargs)

    @classmethod
    def from_sync(cls: type[Twin], queue: Any) -> Twin:
        """The async twin of an existing synchronous ``queue`` (sharing it, not copying).

        Raises:
            TypeError: ``queue`` is not of the synchronous class this one wraps.
        """
        expected = cls._sync_class
        if not isinstance(queue, expected):
            raise TypeError(f"from_sync needs a {expected.__name__}, not {queue!r}")
        return cls(_SHARING, queue)

    @property
    def high_contention(self) -> bool:
        """Whether takes and claims given a Database take in line."""
        return self._sync.high_contention

    @property
    def max_deliveries(self) -> int | None:
        """Deliveries after which an item becomes a dead letter (None: no limit)."""
        return self._sync.max_deliveries

    @property
    def rate_limit(self) -> tuple[int, float] | None:
        """``(jobs, seconds)``: at most so many jobs start in any such window (None: none)."""
        return self._sync.rate_limit

    @property
    def time_limit(self) -> float | None:
        """Seconds a handler of :meth:`work` may run on a job (None: no limit) when ``work``
        is given no ``time_limit``."""
        return self._sync.time_limit

    @property
    def sync(self) -> S:
        """The synchronous queue this one runs (same subspace, same items)."""
        return self._sync

    @property
    def subspace(self) -> Any:
        """The Subspace whose ``range()`` holds the items."""
        return self._sync.subspace

    @property
    def shards(self) -> int:
        """The number of shards the queue was opened with (1: unsharded)."""
        return self._sync.shards

    @property
    def codec(self) -> Codec[T]:
        """The codec that encodes and decodes values."""
        return self._sync.codec

    @property
    def result_codec(self) -> Codec[Any]:
        """The codec that encodes and decodes job results (``result_codec=``)."""
        return self._sync.result_codec

    def __repr__(self) -> str:
        return f"fdbqueue.asyncio.{self._sync!r}"

    empty = _twin(QueueBase[T].empty, "Queue")
    size = _twin(QueueBase[T].size, "Queue")
    peek_many = _twin(QueueBase[T].peek_many, "Queue")
    requests_in_line = _twin(QueueBase[T].requests_in_line, "Queue")
    clear = _twin(QueueBase[T].clear, "Queue")
    pause = _twin(QueueBase[T].pause, "Queue")
    resume = _twin(QueueBase[T].resume, "Queue")
    is_paused = _twin(QueueBase[T].is_paused, "Queue")
    ack = _twin(QueueBase[T].ack, "Queue")
    ack_many = _twin(QueueBase[T].ack_many, "Queue")
    ack_with = _twin(QueueBase[T].ack_with, "Queue")
    release = _twin(QueueBase[T].release, "Queue")
    dead_letter = _twin(QueueBase[T].dead_letter, "Queue")
    extend = _twin(QueueBase[T].extend, "Queue")
    leases = _twin(QueueBase[T].leases, "Queue")
    dead_letters = _twin(QueueBase[T].dead_letters, "Queue")
    requeue_dead_letters = _twin(QueueBase[T].requeue_dead_letters, "Queue")
    purge_dead_letters = _twin(QueueBase[T].purge_dead_letters, "Queue")
    requeue_dead_letter = _twin(QueueBase[T].requeue_dead_letter, "Queue")
    purge_dead_letter = _twin(QueueBase[T].purge_dead_letter, "Queue")
    info = _twin(QueueBase[T].info, "Queue")
    oldest_age = _twin(QueueBase[T].oldest_age, "Queue")
    set_group_weight = _twin(QueueBase[T].set_group_weight, "Queue")
    group_weight = _twin(QueueBase[T].group_weight, "Queue")
    unschedule = _twin(QueueBase[T].unschedule, "Queue")
    schedules = _twin(QueueBase[T].schedules, "Queue")
    enqueue_due_runs = _twin(QueueBase[T].enqueue_due_runs, "Queue")
    job = _twin(QueueBase[T].job, "Queue")
    jobs = _twin(QueueBase[T].jobs, "Queue")
    result = _twin(QueueBase[T].result, "Queue")
    cancel = _twin(QueueBase[T].cancel, "Queue")
    clear_finished_jobs = _twin(QueueBase[T].clear_finished_jobs, "Queue")
    maintain = _twin(QueueBase[T].maintain, "Queue")
    workers = _twin(QueueBase[T].workers, "Queue")

    @worker.spelt_out
    async def work(
        self,
        database: Any,
        handler: Callable[[Any], Any] | None = None,
        *,
        stop: asyncio.Event | None = None,
        **options: Unpack[worker.WorkOptions],
    ) -> WorkSummary:
        """The worker loop with tasks (:mod:`fdbqueue.asyncio._worker`):
        :meth:`fdbqueue.Queue.work`'s arguments and contract, with ``stop`` an ``asyncio.Event``,
        ``concurrency`` tasks, and ``handler`` a coroutine function (awaited) or a plain function
        (run in a daemon thread of the loop's own, never joined: an abandoned one does not
        hold up the program's exit). Cancelling the awaiting task cancels running jobs;
        their items are released. With ``transactional=True``, ``handler(tr, value)`` must be a
        plain function: it runs inside the acknowledging transaction, on the loop.

        Raises:
            TypeError, ValueError: a bad argument (nothing is read or written).
        """
        return await async_worker.work(self, database, handler, stop=stop, **options)


class Queue(_StoredQueue[fdbqueue.queue.Queue[T], T]):
    """A shared FIFO queue with coroutine operations: :class:`fdbqueue.Queue`'s arguments,
    methods and contracts (see there), each method a coroutine run without blocking the loop.

    Args:
        args, kwargs: those of :class:`fdbqueue.Queue` (forwarded as they are).

    Raises:
        TypeError, ValueError: as :class:`fdbqueue.Queue`.
    """

    _sync_class = fdbqueue.queue.Queue

    @overload
    def __init__(
        self: Queue[bytes], subspace: Any, *, codec: Literal["raw"], **options: Unpack[QueueOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: Queue[T], subspace: Any, *, codec: Codec[T], **options: Unpack[QueueOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: Queue[Any], subspace: Any, *, codec: str = "tuple", **options: Unpack[QueueOptions]
    ) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

    @classmethod
    def from_sync(cls, queue: fdbqueue.queue.Queue[T]) -> Queue[T]:
        """The async twin of an existing synchronous ``queue`` (sharing it, not copying), with
        its value type.

        Raises:
            TypeError: ``queue`` is not a :class:`fdbqueue.Queue`.
        """
        twin: Queue[T] = super().from_sync(queue)
        return twin

    enqueue = _twin(fdbqueue.queue.Queue[T].enqueue, "Queue")
    enqueue_many = _twin(fdbqueue.queue.Queue[T].enqueue_many, "Queue")
    dequeue = _twin(fdbqueue.queue.Queue[T].dequeue, "Queue")
    dequeue_many = _twin(fdbqueue.queue.Queue[T].dequeue_many, "Queue")
    claim = _twin(fdbqueue.queue.Queue[T].claim, "Queue")
    claim_many = _twin(fdbqueue.queue.Queue[T].claim_many, "Queue")
    peek = _twin(fdbqueue.queue.Queue[T].peek, "Queue")
    schedule = _twin(fdbqueue.queue.Queue[T].schedule, "Queue")
    submit = _twin(fdbqueue.queue.Queue[T].submit, "Queue")
    submit_task = _twin(fdbqueue.queue.Queue[T].submit_task, "Queue")

    #: :meth:`fdbqueue.Queue.task` itself, on this queue: the same registry (the subspace's),
    #: ``await task.submit(tr, *args, **kwargs)``. The asyncio worker awaits a coroutine
    #: function's task on the loop, and runs a plain one in a thread (``asyncio.to_thread``).
    task = fdbqueue.queue.Queue.task

    def consumer(self, *args: Any, **kwargs: Any) -> Consumer:
        """Open a consumer session with coroutine calls: the arguments and errors of
        :meth:`fdbqueue.Queue.consumer` (opening one reads and writes nothing); use it with
        ``async with queue.consumer(db) as consumer: await consumer.dequeue(block=True)``."""
        return Consumer(self._sync.consumer(*args, **kwargs))


class PriorityQueue(_StoredQueue[fdbqueue.priority.PriorityQueue[T], T]):
    """A shared priority queue with coroutine operations: :class:`fdbqueue.PriorityQueue`'s
    arguments, methods and contracts (see there), each method a coroutine.

    Args:
        args, kwargs: those of :class:`fdbqueue.PriorityQueue` (forwarded as they are).

    Raises:
        TypeError, ValueError: as :class:`fdbqueue.PriorityQueue`.
    """

    _sync_class = fdbqueue.priority.PriorityQueue

    @overload
    def __init__(
        self: PriorityQueue[bytes],
        subspace: Any,
        *,
        codec: Literal["raw"],
        **options: Unpack[QueueOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: PriorityQueue[T], subspace: Any, *, codec: Codec[T], **options: Unpack[QueueOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: PriorityQueue[Any],
        subspace: Any,
        *,
        codec: str = "tuple",
        **options: Unpack[QueueOptions],
    ) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

    @classmethod
    def from_sync(cls, queue: fdbqueue.priority.PriorityQueue[T]) -> PriorityQueue[T]:
        """The async twin of an existing synchronous ``queue`` (sharing it, not copying), with
        its value type.

        Raises:
            TypeError: ``queue`` is not a :class:`fdbqueue.PriorityQueue`.
        """
        twin: PriorityQueue[T] = super().from_sync(queue)
        return twin

    push = _twin(fdbqueue.priority.PriorityQueue[T].push, "PriorityQueue")
    pop = _twin(fdbqueue.priority.PriorityQueue[T].pop, "PriorityQueue")
    pop_min = _twin(fdbqueue.priority.PriorityQueue[T].pop_min, "PriorityQueue")
    pop_max = _twin(fdbqueue.priority.PriorityQueue[T].pop_max, "PriorityQueue")
    pop_many = _twin(fdbqueue.priority.PriorityQueue[T].pop_many, "PriorityQueue")
    claim = _twin(fdbqueue.priority.PriorityQueue[T].claim, "PriorityQueue")
    claim_many = _twin(fdbqueue.priority.PriorityQueue[T].claim_many, "PriorityQueue")
    peek = _twin(fdbqueue.priority.PriorityQueue[T].peek, "PriorityQueue")
    peek_min = _twin(fdbqueue.priority.PriorityQueue[T].peek_min, "PriorityQueue")
    peek_max = _twin(fdbqueue.priority.PriorityQueue[T].peek_max, "PriorityQueue")
    schedule = _twin(fdbqueue.priority.PriorityQueue[T].schedule, "PriorityQueue")
    submit = _twin(fdbqueue.priority.PriorityQueue[T].submit, "PriorityQueue")
    submit_task = _twin(fdbqueue.priority.PriorityQueue[T].submit_task, "PriorityQueue")

    #: :meth:`fdbqueue.PriorityQueue.task` itself, on this queue (see :attr:`Queue.task`).
    task = fdbqueue.priority.PriorityQueue.task

    peek_many_with_priorities = _twin(
        fdbqueue.priority.PriorityQueue[T].peek_many_with_priorities, "PriorityQueue"
    )

    def consumer(self, *args: Any, **kwargs: Any) -> Consumer:
        """Open a consumer session with coroutine calls at one end: the arguments and errors
        of :meth:`fdbqueue.PriorityQueue.consumer` (opening one reads and writes nothing)."""
        return Consumer(self._sync.consumer(*args, **kwargs))


#: An ``async def`` function whose first parameter (or ``self``) is of type ``First``.
AsyncFunction = Callable[Concatenate[First, P], Coroutine[Any, Any, R]]
#: The same function once decorated: its first parameter takes any
#: :class:`~fdbqueue.TransactionContext` too (see :func:`fdbqueue.transactional`).
AsyncTransactional = Callable[Concatenate[First | TransactionContext, P], Coroutine[Any, Any, R]]


class AsyncTransactionalDecorator(Protocol):
    """The type of ``transactional(parameter=...)``: a decorator typed as :func:`transactional`
    used bare."""

    def __call__(self, function: AsyncFunction[First, P, R], /) -> AsyncTransactional[First, P, R]:
        """Return ``function`` decorated (see :func:`transactional`)."""
        ...


@overload
def transactional(func: AsyncFunction[First, P, R], /) -> AsyncTransactional[First, P, R]: ...


@overload
def transactional(*, parameter: str = "tr") -> AsyncTransactionalDecorator: ...


def transactional(
    func: Callable[..., Coroutine[Any, Any, Any]] | None = None, /, *, parameter: str = "tr"
) -> Callable[..., Coroutine[Any, Any, Any]] | AsyncTransactionalDecorator:
    """Decorate an ``async def`` function so that its ``tr`` parameter takes a Database or a
    Transaction: :func:`fdbqueue.transactional`'s contract, awaited.

    Given a Database or Tenant, the wrapper creates a transaction, awaits the body with it,
    awaits the commit and returns the body's result; on a FoundationDB error (of the body or
    the commit) it awaits ``tr.on_error(error)``, which backs off and lets the body run again
    for a retryable error or raises the error as the binding does (any other exception
    propagates at once, nothing committed). Given a Transaction (or a snapshot view), it only
    awaits the body: nothing is committed, so such functions compose. Inside, await the queue
    operations of this module with ``tr`` and raw futures with :func:`wait_future`.

    The wrapper never blocks the event loop: it fetches the read version, commits and backs
    off through futures awaited on the loop (:func:`fdbqueue.asyncio._bridge.run`). Cancellation: a
    cancellation of the task before the commit is sent ends the call with CancelledError and
    nothing committed; one that arrives while the commit is in flight waits for it: if it
    landed, the body's result is returned and the task is cancelled again at its next
    suspension; if it failed, CancelledError is raised (after an error that may have been
    applied, 1021 say, the body's effects may then have been committed, as with 1021 itself).

    Types: as for :func:`fdbqueue.transactional`, the first parameter of the decorated
    function also takes any :class:`~fdbqueue.TransactionContext` (positionally), so ``async
    def move(tr: fdbqueue.memory.Transaction)`` may be awaited with a Database.

    Raises:
        TypeError: at decoration, for a function that is not a coroutine function or has no
            such parameter; at call time, when the argument is neither a database nor a
            transaction.
    """

    def decorate(
        function: Callable[..., Coroutine[Any, Any, Any]],
    ) -> Callable[..., Coroutine[Any, Any, Any]]:
        if not inspect.iscoroutinefunction(inspect.unwrap(function)):
            raise TypeError(
                f"fdbqueue.asyncio.transactional decorates async def functions; "
                f"{getattr(function, '__qualname__', function)!r} is not one "
                f"(use fdbqueue.transactional for plain functions)"
            )
        where = ContextParameter(function, parameter)

        @functools.wraps(function)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            context = where.context(args, kwargs)
            if is_transaction(context):
                return await function(*args, **kwargs)
            tr = context.create_transaction()
            call_args, call_kwargs = where.replaced(args, kwargs, tr)
            while True:
                try:
                    await bridge.run(_fetch_read_version, tr)
                    result = await function(*call_args, **call_kwargs)
                    await bridge.run(commit, tr)
                    return result
                except Exception as error:
                    if not is_fdb_error(error):
                        raise
                    await bridge.run(_on_error, tr, error)

        return wrapper

    if func is not None:
        return decorate(func)
    decorator: AsyncTransactionalDecorator = decorate
    return decorator


def _fetch_read_version(tr: Any) -> None:
    """Fetch ``tr``'s read version (a future, awaited by :func:`fdbqueue.asyncio._bridge.run`), so
    that the body's reads, issued on the loop's thread, need not fetch it: the in-memory database
    decides a read version when the first read is issued, after half a GRV latency."""
    tr.get_read_version().wait()


def _on_error(tr: Any, error: Exception) -> None:
    """``tr.on_error(error)`` waited for: resets and backs off, or raises ``error``."""
    tr.on_error(error).wait()
