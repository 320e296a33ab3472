"""Run a function in a transaction, with ``fdb.transactional``'s contract, on both backends.

FoundationDB's Python binding ships ``fdb.transactional``: a decorator whose wrapped function
receives either a Database (then it creates a transaction, runs the body, commits, and retries
through ``Transaction.on_error``) or a Transaction (then it runs the body inside that
transaction and commits nothing, so transactional functions compose). The binding's version
recognises only its own classes and refuses to run before ``fdb.api_version()``;
:func:`transactional` here follows the same contract by duck typing, so it accepts the real
binding's ``Database``, ``Tenant`` and ``Transaction`` as well as their
:mod:`fdbqueue.memory` counterparts.

Source followed: ``bindings/python/fdb/impl.py`` (``transactional``) and the retry loop
described in FoundationDB's developer guide ("Transaction retry loops").
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeAlias, TypeVar, overload

from fdbqueue import metrics

logger = logging.getLogger(__name__)

__all__ = [
    "ContextParameter",
    "TransactionContext",
    "is_database",
    "is_fdb_error",
    "is_transaction",
    "require_writable",
    "run_in_retry_loop",
    "transactional",
]

#: A Database, Tenant or Transaction of the ``fdb`` binding or of :mod:`fdbqueue.memory`:
#: what every fdbqueue operation takes as ``tr`` (FoundationDB's Java binding calls the same
#: idea a ``TransactionContext``). The binding is untyped, so this is ``Any`` to the type checker.
TransactionContext: TypeAlias = Any

P = ParamSpec("P")
R = TypeVar("R")


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


def _fdb_error_types() -> tuple[type[BaseException], ...]:
    from fdbqueue.memory import FDBError as MemoryFDBError

    types: list[type[BaseException]] = [MemoryFDBError]
    real_impl = sys.modules.get("fdb.impl")  # loaded only once fdb.api_version() ran
    if real_impl is not None:
        types.append(real_impl.FDBError)
    return tuple(types)


def is_fdb_error(error: BaseException) -> bool:
    """Return True when ``error`` is a FoundationDB error of either backend.

    Both ``fdb.FDBError`` (real binding, when it is loaded) and
    :class:`fdbqueue.memory.FDBError` count. Only these are handed to ``on_error``; any other
    exception leaves a retry loop at once.
    """
    return isinstance(error, _fdb_error_types())


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
            raise TypeError(
                f"{self.function.__qualname__}() missing required argument {self.name!r}"
            )
        if not is_transaction(context) and not is_database(context):
            raise TypeError(
                f"{self.function.__qualname__}(): {self.name!r} must be a Database, Tenant or "
                f"Transaction (fdb or fdbqueue.memory), not {_describe(context)}"
            )
        return context

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
                tr.commit().wait()
            except Exception as error:
                if not is_fdb_error(error):
                    raise
                tr.on_error(error).wait()  # retryable: reset and back off; else raises
                note_retry(error)
                continue
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
def transactional(func: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def transactional(*, parameter: str = "tr") -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def transactional(
    func: Callable[P, R] | None = None, /, *, parameter: str = "tr"
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
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

    Raises:
        TypeError: at call time, when the argument is neither a database nor a transaction; at
            decoration time, when the function has no such parameter.
        ValueError: at decoration time, for a generator function (as ``fdb.transactional``
            refuses them: a generator would escape the retry loop).
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        if inspect.isgeneratorfunction(inspect.unwrap(function)):
            raise ValueError("generators can not be wrapped with @transactional")
        where = ContextParameter(function, parameter)

        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            context = where.context(args, kwargs)
            if is_transaction(context):
                return function(*args, **kwargs)

            def body(tr: Any) -> R:
                call_args, call_kwargs = where.replaced(args, kwargs, tr)
                return function(*call_args, **call_kwargs)

            return run_in_retry_loop(context, body)

        return wrapper

    if func is not None:
        return decorate(func)
    return decorate
