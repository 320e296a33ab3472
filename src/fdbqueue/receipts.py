"""Exactly-once operations when a commit's result is unknown (error 1021): receipts.

A commit that fails with ``commit_unknown_result`` (1021) may or may not have been applied,
and the standard retry loop runs the body again. For FoundationDB's queue recipes that means a
retried enqueue can write its item twice, and a retried dequeue can remove one item without
returning it and then remove and return the next one.

fdbqueue makes every operation that runs in its own transaction (given a Database or Tenant)
take effect exactly once. Each call chooses a *call id* (16 random bytes) once. Each attempt
that writes also writes a *receipt*, in the same transaction as its effect::

    P + b"\\xff" + pack(("receipts", read version of the attempt, call id))  ->  b""

and remembers, in memory, what it would return (for a dequeue: the value it removed). When an
attempt fails and the body runs again, the new attempt first reads the receipts of the call's
earlier attempts (snapshot point reads). If one exists, that attempt committed: the call
returns what that attempt returned and writes nothing. Otherwise no earlier attempt committed,
and the body runs again. (An attempt that failed with 1020 or 1007 was surely not applied:
the retry does not look for its receipt.) So an enqueue writes its item once, and a dequeue
returns exactly the item it removed: nothing is removed without being returned.

This relies on what the client does before it reports 1021: FoundationDB's client makes sure
the unknown commit can no longer be applied later (it commits a conflicting dummy transaction
over the same conflict ranges), so a later read version sees its final outcome. The in-memory
database decides the outcome before it raises 1021.

Receipts expire: every transaction that writes one also clears the receipts older than
:data:`RECEIPT_LIFETIME` seconds of read versions, with one range clear (no read, so no
conflict). A retry whose earlier attempt is older than half that lifetime cannot tell any
more, and raises :class:`UnknownResultError` instead of guessing.

Cost, per operation and in the same transaction: one set of a key of about 40 bytes and one
range clear; no extra transaction, no extra read. After an error, each retry makes one
snapshot point read per earlier attempt. Operations given a Transaction run inside it and write
no receipt: the owner of the transaction owns its retry loop and its idempotence.

Source followed: FoundationDB's developer guide, "Transactions with unknown results" (make
transactions idempotent, for example with a unique key written in the transaction and checked
on retry), and NativeAPI's handling of ``commit_unknown_result``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

from fdb.subspace_impl import Subspace

from fdbqueue.transactional import is_database, is_fdb_error, transactional

__all__ = ["RECEIPT_LIFETIME", "Receipts", "UnknownResultError", "exactly_once"]

P = ParamSpec("P")
R = TypeVar("R")

#: Seconds (of read versions, about 1,000,000 per second) a receipt is kept.
RECEIPT_LIFETIME = 60.0
VERSIONS_PER_SECOND = 1_000_000
CALL_ID_BYTES = 16
NOT_COMMITTED = 1020
#: Commit errors after which the attempt surely was not applied (conflict, too old), so a
#: retry need not look for its receipt; after any other error (1021 above all) it looks.
NOT_APPLIED = frozenset({NOT_COMMITTED, 1007})


class UnknownResultError(Exception):
    """An operation's commit result is unknown and can no longer be found out: its earlier
    attempt is older than half of :data:`RECEIPT_LIFETIME`. The operation may or may not
    have taken effect."""


def _always(_result: Any) -> bool:
    return True


class Receipts:
    """The receipts of one queue, under its metadata subspace (see the module docstring).

    Args:
        metadata: the queue's metadata Subspace; receipts live in ``metadata["receipts"]``.
        lifetime: seconds a receipt is kept (default :data:`RECEIPT_LIFETIME`).
        enabled: False turns receipts off: :meth:`run` is then the standard retry loop, and a
            commit with an unknown result can apply an operation twice (the recipes' behaviour).
    """

    def __init__(
        self, metadata: Subspace, lifetime: float = RECEIPT_LIFETIME, *, enabled: bool = True
    ) -> None:
        self.enabled = enabled
        self.subspace = metadata["receipts"]
        self.begin: bytes = self.subspace.range().start
        self.lifetime_versions = int(lifetime * VERSIONS_PER_SECOND)

    def run(
        self,
        database: Any,
        body: Callable[[Any], R],
        *,
        wrote: Callable[[R], bool] = _always,
        on_conflict: Any = None,
    ) -> R:
        """Run ``body(tr)`` in a retry loop so that its effect commits exactly once.

        Args:
            database: a Database or Tenant.
            body: the operation; it may run several times, and what the committed run
                returned is returned.
            wrote: tells from an attempt's result whether the attempt wrote anything (a
                receipt is written only then; a read-only attempt cannot have an unknown
                result).
            on_conflict: when not None, a conflict (1020) is not retried: this value is
                returned instead.

        Returns:
            What the attempt that committed returned.

        Raises:
            UnknownResultError: an earlier attempt's result can no longer be found out.
            Any error of ``body``, and FoundationDB errors that are not retryable.
        """
        call_id = os.urandom(CALL_ID_BYTES)
        attempts: list[tuple[bytes, int, R]] = []
        tr = database.create_transaction()
        while True:
            recorded = len(attempts)
            try:
                result = self._attempt(tr, body, wrote, call_id, attempts)
                tr.commit().wait()
                return result
            except Exception as error:
                if not is_fdb_error(error):
                    raise
                code = error.code  # type: ignore[attr-defined]
                if code in NOT_APPLIED:  # this attempt surely did not commit: no need to look
                    del attempts[recorded:]
                if on_conflict is not None and code == NOT_COMMITTED:
                    return on_conflict  # type: ignore[no-any-return]
                tr.on_error(error).wait()

    def _attempt(
        self,
        tr: Any,
        body: Callable[[Any], R],
        wrote: Callable[[R], bool],
        call_id: bytes,
        attempts: list[tuple[bytes, int, R]],
    ) -> R:
        if not self.enabled:
            return body(tr)
        for key, version, result in attempts:  # only after an error: none the first time
            if tr.get_read_version().wait() - version > self.lifetime_versions // 2:
                raise UnknownResultError(
                    "an earlier attempt of this operation ended with an unknown commit result "
                    "too long ago to find out whether it took effect"
                )
            if tr.snapshot.get(key).present():
                return result  # that attempt committed: return what it returned
        result = body(tr)
        if wrote(result):
            # The body's reads fetched the read version already: no extra round trip.
            read_version: int = tr.get_read_version().wait()
            receipt: bytes = self.subspace.pack((read_version, call_id))
            tr[receipt] = b""
            tr.clear_range(self.begin, self.subspace.pack((read_version - self.lifetime_versions,)))
            attempts.append((receipt, read_version, result))
        return result


@overload
def exactly_once(function: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def exactly_once(
    *, wrote: Callable[[Any], bool] = _always
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def exactly_once(
    function: Callable[P, R] | None = None, /, *, wrote: Callable[[Any], bool] = _always
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a queue method ``method(self, tr, ...)`` to take effect exactly once.

    Given a Database or Tenant as ``tr`` (by position or keyword), the method runs in
    :meth:`Receipts.run` with the queue's receipts (``self._store.receipts``). Given a
    Transaction, it behaves as with :func:`fdbqueue.transactional`: it runs inside the caller's
    transaction and commits nothing.

    Args:
        wrote: tells from the method's result whether it wrote anything (see
            :meth:`Receipts.run`).
    """

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        inside = transactional(method)

        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            queue, rest = args[0], args[1:]
            by_keyword = not rest
            context = kwargs.get("tr") if by_keyword else rest[0]
            if not is_database(context):
                return inside(*args, **kwargs)
            receipts: Receipts = queue._store.receipts  # type: ignore[attr-defined]

            def body(tr: Any) -> R:
                if by_keyword:
                    return method(queue, **{**kwargs, "tr": tr})  # type: ignore[arg-type]
                return method(queue, tr, *rest[1:], **kwargs)  # type: ignore[arg-type]

            result: R = receipts.run(context, body, wrote=wrote)
            return result

        return wrapper

    if function is not None:
        return decorate(function)
    return decorate
