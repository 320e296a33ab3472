"""Run a function in a transaction, with ``fdb.transactional``'s contract, on both backends.

FoundationDB's Python binding ships ``fdb.transactional``: a decorator whose wrapped function
receives either a Database (then it creates a transaction, runs the body, commits, and retries
through ``Transaction.on_error``) or a Transaction (then it runs the body inside that
transaction and commits nothing, so transactional functions compose). The binding's version
recognises only its own classes and refuses to run before ``fdb.api_version()``;
:func:`transactional` here follows the same contract by duck typing, so it accepts the real
binding's ``Database``, ``Tenant`` and ``Transaction`` as well as their
:mod:`fdbqueue.memory` counterparts.

Types: every fdbqueue operation's ``tr`` is annotated :class:`TransactionContext`, a protocol
that the binding's and :mod:`fdbqueue.memory`'s Databases, Tenants, Transactions and snapshot
views all satisfy (the ``fdb`` binding is untyped, so its objects are ``Any`` to a type checker
and pass). A function decorated with :func:`transactional` whose first parameter is annotated
with a narrower type (``tr: fdbqueue.memory.Transaction``) is seen by the type checker as
taking a :class:`TransactionContext` there, so ``move(db)`` type-checks as it runs.

Source followed: ``bindings/python/fdb/impl.py`` (``transactional``) and the retry loop
described in FoundationDB's developer guide ("Transaction retry loops").
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeAlias, TypeVar, overload

from fdbqueue import metrics
from fdbqueue._transactions import suspension

#: The logger, by its documented name (docs/observability.rst), whatever the module.
logger = logging.getLogger("fdbqueue.transactional")

__all__ = [
    "AnyContext",
    "ContextParameter",
    "TransactionContext",
    "TransactionalDecorator",
    "check_context",
    "commit",
    "is_database",
    "is_fdb_error",
    "is_transaction",
    "recognise_error_type",
    "require_writable",
    "run_in_retry_loop",
    "surely_not_applied",
    "transactional",
]


class TransactionContext(Protocol):
    """What every fdbqueue operation takes as ``tr``: a Database, Tenant or Transaction (or a
    transaction's ``snapshot`` view) of the ``fdb`` binding or of :mod:`fdbqueue.memory`
    (FoundationDB's Java binding calls the same idea a ``TransactionContext``).

    A protocol for type checkers only: anything with ``get`` and ``get_range`` methods
    satisfies it, which every one of those objects has (the ``fdb`` binding is untyped, so its
    objects are ``Any`` and always pass), and an ``int`` or ``str`` given where the database
    goes is an error. Annotate your own functions' ``tr`` with it::

        from fdbqueue import TransactionContext, transactional

        @transactional
        def move(tr: TransactionContext) -> str | None:
            ...

    A function decorated with :func:`transactional` may annotate its first parameter with a
    Transaction type instead (``tr: fdbqueue.memory.Transaction``): the type checker then sees
    the decorated function take any :class:`TransactionContext` there, so ``move(db)``
    type-checks.

    At run time fdbqueue checks ``tr`` by duck typing (:func:`is_database`,
    :func:`is_transaction`) and raises TypeError for anything else; do not use
    ``isinstance`` with this protocol.
    """

    def get(self, *args: Any, **kwargs: Any) -> Any:
        """Read a key (a Database: in its own transaction)."""
        ...

    def get_range(self, *args: Any, **kwargs: Any) -> Any:
        """Read a range of keys (a Database: in its own transaction)."""
        ...


#: ``tr`` inside fdbqueue, past the public signatures (which take a
#: :class:`TransactionContext`): the binding's objects are untyped, so ``Any``, and the
#: internal code calls whatever a Database or Transaction has (``snapshot``, ``add``, ...).
AnyContext: TypeAlias = Any

P = ParamSpec("P")
R = TypeVar("R")
#: The type of the first parameter of a decorated function (or of ``self``).
First = TypeVar("First")


class TransactionalDecorator(Protocol):
    """The type of ``transactional(parameter=...)``: a decorator typed as :func:`transactional`
    used bare."""

    def __call__(
        self, function: Callable[Concatenate[First, P], R], /
    ) -> Callable[Concatenate[First | TransactionContext, P], R]:
        """Return ``function`` decorated (see :func:`transactional`)."""
        ...


def is_database(candidate: object) -> bool:
    """Return True when ``candidate`` can create transactions (a Database or a Tenant).

    This is the binding's own distinction: ``fdb.Database`` and ``fdb.Tenant`` have
    ``create_transaction()``; transactions and snapshot views do not.
    """
    return callable(getattr(candidate, "create_transaction", None))


def is_transaction(candidate: object) -> bool:
    """Return True when ``candidate`` is a transaction or a transaction's snapshot view.

    Anything that reads like a transaction (``get`` and ``get_range``) and is not a database
    counts, as ``fdb.transactional`` accepts any ``TransactionRead``.
    """
    return (
        not is_database(candidate)
        and callable(getattr(candidate, "get", None))
        and callable(getattr(candidate, "get_range", None))
    )


def require_writable(tr: TransactionContext, operation: str) -> None:
    """Raise TypeError when ``tr`` is a read-only view (such as ``tr.snapshot``).

    Args:
        tr: the transaction an operation that writes was given.
        operation: the operation's name, for the message.

    Raises:
        TypeError: ``tr`` has no ``set`` method, so it cannot write.
    """
    if not callable(getattr(tr, "set", None)):
        raise TypeError(
            f"{operation} writes, so it needs a Database or a Transaction; "
            f"got a read-only {type(tr).__name__} (a snapshot view?)"
        )


#: The FoundationDB error classes of backends besides the ``fdb`` binding, registered with
#: :func:`recognise_error_type` (the package ``fdbqueue`` registers the in-memory database's).
_error_types: tuple[type[BaseException], ...] = ()


def recognise_error_type(error_type: type[BaseException]) -> None:
    """Count ``error_type``'s exceptions as FoundationDB errors (:func:`is_fdb_error`), for a
    backend the core does not import: ``fdbqueue/__init__.py`` registers
    :class:`fdbqueue.memory.FDBError` (the core imports nothing of the test double; see
    :mod:`fdbqueue._clock`). Registering a class twice changes nothing."""
    global _error_types
    if error_type not in _error_types:
        _error_types = (*_error_types, error_type)


def _fdb_error_types() -> tuple[type[BaseException], ...]:
    real_impl = sys.modules.get("fdb.impl")  # loaded only once fdb.api_version() ran
    if real_impl is None:
        return _error_types
    return (*_error_types, real_impl.FDBError)


def is_fdb_error(error: BaseException) -> bool:
    """Return True when ``error`` is a FoundationDB error of either backend.

    Both ``fdb.FDBError`` (real binding, when it is loaded) and the classes registered with
    :func:`recognise_error_type` (:class:`fdbqueue.memory.FDBError`) count. Only these are
    handed to ``on_error``; any other exception leaves a retry loop at once.
    """
    return isinstance(error, _fdb_error_types())


def check_context(context: Any, operation: str, name: str = "tr") -> None:
    """Raise TypeError unless ``context`` (the argument ``name`` of ``operation``) is a
    Database, Tenant or Transaction."""
    if not is_transaction(context) and not is_database(context):
        raise TypeError(
            f"{operation}: {name!r} must be a Database, Tenant or Transaction (fdb or "
            f"fdbqueue.memory), not {_describe(context)}"
        )


def check_writable(context: Any, operation: str, verb: str | None = None) -> None:
    """Raise TypeError unless ``context`` is a Database, Tenant or Transaction that can
    write: :func:`check_context`'s test (with ``operation``) and :func:`require_writable`'s
    (with ``verb``, ``operation`` when None), the same answers and messages, in one test for
    the usual call: anything whose ``set``, ``get`` and ``get_range`` are callable passes
    both, and its type is noted then, so that the next context of that type passes at once
    (the binding's and the in-memory database's transactions: their methods are their
    type's). Cost: a set lookup; three attribute lookups the first time a type is seen."""
    kind = type(context)
    if kind in _WRITABLE_TYPES:
        return
    if (
        callable(getattr(context, "set", None))
        and callable(getattr(context, "get_range", None))
        and callable(getattr(context, "get", None))
    ):
        if not is_database(context):
            _WRITABLE_TYPES.add(kind)  # (a set's add is atomic in CPython)
        return
    check_context(context, operation)
    require_writable(context, operation if verb is None else verb)


def runs_own_transaction(context: Any, operation: str) -> bool:
    """Whether an operation that writes, given ``context``, runs in a transaction of its
    own: True for a Database or Tenant (:func:`is_database`), False for a Transaction that
    can write (:func:`check_writable`, whose TypeError it raises for anything else). Cost:
    one or two set lookups for a type seen before (a context's methods are its type's)."""
    kind = type(context)
    if kind in _WRITABLE_TYPES:
        return False
    if kind in _DATABASE_TYPES:
        return True
    if is_database(context):
        _DATABASE_TYPES.add(kind)
        return True
    check_writable(context, operation)
    return False


#: The types of transactions :func:`check_writable` found writable, and of the databases
#: :func:`runs_own_transaction` met (their methods are the types' own).
_WRITABLE_TYPES: set[type] = set()
_DATABASE_TYPES: set[type] = set()


class ContextParameter:
    """Where a transactional function takes its Database or Transaction: found once at
    decoration, then read and replaced at each call (by position or by keyword).

    Args:
        function: the decorated function (unwrapped to find its parameters).
        name: the parameter's name (``"tr"`` by default in the decorators).

    Raises:
        TypeError: ``function`` has no positional parameter called ``name``.
    """

    def __init__(self, function: Callable[..., Any], name: str) -> None:
        names = inspect.getfullargspec(inspect.unwrap(function)).args
        if name not in names:
            raise TypeError(
                f"@transactional: {function.__qualname__} has no positional parameter named "
                f"{name!r}"
            )
        self.function = function
        self.name = name
        self.index = names.index(name)
        self.method = bool(names) and names[0] == "self"

    def context(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The argument given for the parameter, checked.

        Returns:
            The argument; a Database or Tenant, or a Transaction (see :func:`is_transaction`).

        Raises:
            TypeError: the argument is missing, or neither a database nor a transaction.
        """
        if self.index < len(args):
            context = args[self.index]
        elif self.name in kwargs:
            context = kwargs[self.name]
        else:
            raise TypeError(f"{self._called(args)}() missing required argument {self.name!r}")
        check_context(context, f"{self._called(args)}()", self.name)
        return context

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``function(*args, **kwargs)``; a TypeError of the call itself (wrong arguments,
        not one raised inside the function) names the method by the class it was called on,
        as :meth:`context` does."""
        try:
            return self.function(*args, **kwargs)
        except TypeError as error:
            trace = error.__traceback__
            if self.method and args and trace is not None and trace.tb_next is None:
                message = str(error).replace(self.function.__qualname__, self._called(args), 1)
                raise TypeError(message) from None
            raise

    def _called(self, args: tuple[Any, ...]) -> str:
        """The name of what was called: a method by the class of the object it was called
        on (``Queue.size``, not the base class that defines it)."""
        if self.method and args:
            return f"{type(args[0]).__name__}.{self.function.__name__}"
        return str(self.function.__qualname__)

    def replaced(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], tr: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``args`` and ``kwargs`` with the parameter's argument replaced by ``tr``."""
        if self.index < len(args):
            call_args = list(args)
            call_args[self.index] = tr
            return tuple(call_args), kwargs
        return args, {**kwargs, self.name: tr}


def _describe(candidate: object) -> str:
    return f"{type(candidate).__module__}.{type(candidate).__qualname__}"


#: ``not_committed``: the resolver refused the commit (a conflict).
NOT_COMMITTED = 1020
#: ``transaction_too_old``: the read version is more than five seconds old.
TRANSACTION_TOO_OLD = 1007


def surely_not_applied(code: int) -> bool:
    """Whether a commit that failed with ``code`` surely was not applied.

    ``not_committed`` (1020) and ``transaction_too_old`` (1007) come from the resolver, which
    refused the commit; errors 2000-2999 are usage errors the client raises before it sends
    anything (2101 ``transaction_too_large`` among them). Any other error, 1021 and 1031 above
    all, may come after the commit was applied or while it is still in flight.
    """
    return code in (NOT_COMMITTED, TRANSACTION_TOO_OLD) or 2000 <= code < 3000


def commit(tr: Any) -> None:
    """Commit ``tr`` and wait for the outcome: how fdbqueue commits every transaction it runs.

    Inside an operation that :mod:`fdbqueue.asyncio` runs (an
    :class:`~fdbqueue._transactions.suspension.OperationGreenlet`), the operation is marked as one
    whose commit may have taken effect before the commit is sent, so that a cancellation of the
    awaiting task no longer interrupts its waits on futures: the operation finishes and
    returns what it did (see :mod:`fdbqueue.asyncio._bridge`). A commit that fails with an error
    that means "not applied" (:func:`surely_not_applied`) takes the mark back (unless an earlier
    commit of the operation set it). Outside such an operation, just ``tr.commit().wait()``.

    Raises:
        FDBError: the commit's error (either backend).

    Cost: the commit; nothing more (until :mod:`fdbqueue.asyncio` ran a call in this process,
    not even a look for the operation: :data:`~fdbqueue._transactions.suspension.
    operations_started`).
    """
    operation = suspension.current_operation() if suspension.operations_started else None
    if operation is None:
        tr.commit().wait()
        return
    before = operation.may_have_committed
    operation.may_have_committed = True
    try:
        tr.commit().wait()
    except Exception as error:
        if is_fdb_error(error) and surely_not_applied(error.code):  # type: ignore[attr-defined]
            operation.may_have_committed = before
        raise


def run_in_retry_loop(database: Any, body: Callable[[Any], R]) -> R:
    """Run ``body(tr)`` in a new transaction of ``database``, commit, and retry on errors.

    This is the standard FoundationDB retry loop: on an error from the body or the commit that
    is a FoundationDB error, ``tr.on_error(error).wait()`` either resets the transaction and
    waits a backoff (retryable errors: the body runs again) or raises the error again (any
    other error, or the transaction's retry limit or timeout reached). Any other exception
    propagates at once and nothing is committed.

    Args:
        database: a Database or Tenant of either backend.
        body: a function of one argument, the transaction; it may run several times.

    Returns:
        What the last, committed run of ``body`` returned.
    """
    tr = database.create_transaction()
    while True:
        with metrics.pending() as counts:
            try:
                result = body(tr)
                commit(tr)
            except Exception as error:
                if not is_fdb_error(error):
                    raise
                tr.on_error(error).wait()  # retryable: reset and back off; else raises
                note_retry(error)
                continue
        if counts:  # empty while nothing records and no action waits
            metrics.committed(counts)
        return result


def note_retry(error: BaseException) -> None:
    """Log (DEBUG) and count a transaction attempt retried after FoundationDB ``error``
    (:mod:`fdbqueue.metrics`: ``retries`` by code, and ``conflicts`` for 1020)."""
    code = getattr(error, "code", None)
    logger.debug("fdbqueue: retrying a transaction after FoundationDB error %s (%s)", code, error)
    metrics.add("retries", at_once=True, code=code)
    if code == 1020:
        metrics.add("conflicts", at_once=True, code=code)


@overload
def transactional(
    func: Callable[Concatenate[First, P], R], /
) -> Callable[Concatenate[First | TransactionContext, P], R]: ...


@overload
def transactional(*, parameter: str = "tr") -> TransactionalDecorator: ...


def transactional(
    func: Callable[..., Any] | None = None, /, *, parameter: str = "tr"
) -> Callable[..., Any] | TransactionalDecorator:
    """Decorate a function so that its ``tr`` parameter takes a Database or a Transaction.

    A drop-in for ``fdb.transactional`` that also accepts :mod:`fdbqueue.memory` objects and
    needs no ``fdb.api_version()`` call to be defined. Use it bare (``@transactional``) or
    with the parameter's name (``@transactional(parameter="tx")``); it works on functions and
    methods, with the parameter passed by position or by keyword.

    At call time, the argument in that parameter decides:

    * a Database or Tenant (anything with ``create_transaction()``): a new transaction is
      created, the body runs, the transaction is committed, and FoundationDB errors go through
      ``on_error``, which retries retryable ones (the body may run several times, so it must
      not have side effects outside the transaction);
    * a Transaction (or a transaction's ``snapshot`` view): the body runs inside it and nothing
      is committed, so several operations compose into one atomic transaction and an exception
      in the caller's code leaves the database untouched.

    Types (for mypy and other checkers): the decorated function's first parameter also takes
    any :class:`TransactionContext`, whatever its annotation, so a function written for a
    Transaction (``def move(tr: fdbqueue.memory.Transaction)``) type-checks when called with a
    Database, as it runs; that parameter is then positional to the checker (it does not keep
    its name). On a method, the first parameter is ``self``: annotate ``tr`` (or a
    ``parameter`` that is not first) :class:`TransactionContext` there. The other parameters
    and the return type are kept.

    Raises:
        TypeError: at call time, when the argument is neither a database nor a transaction; at
            decoration time, when the function has no such parameter.
        ValueError: at decoration time, for a generator function (as ``fdb.transactional``
            refuses them: a generator would escape the retry loop).
    """

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isgeneratorfunction(inspect.unwrap(function)):
            raise ValueError("generators can not be wrapped with @transactional")
        where = ContextParameter(function, parameter)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            context = where.context(args, kwargs)
            if is_transaction(context):
                return where.call(args, kwargs)

            def body(tr: Any) -> Any:
                call_args, call_kwargs = where.replaced(args, kwargs, tr)
                return where.call(call_args, call_kwargs)

            return run_in_retry_loop(context, body)

        return wrapper

    if func is not None:
        return decorate(func)
    decorator: TransactionalDecorator = decorate
    return decorator
