"""FoundationDB's "Queues" recipe (its Python code), the reference of ``fdbqueue bench --cpu``.

:class:`RecipeQueue` does exactly what the recipe's code does (FoundationDB's documentation,
``queues.rst``, "Code"), as methods of a class over a subspace of the caller's instead of
module functions over ``fdb.Subspace(('Q',))``:

* ``enqueue``: ``last_index`` reads the last key with a snapshot range read (``limit=1``,
  ``reverse=True``) and unpacks its index (0 for an empty queue), then the value is set at
  ``queue[last_index + 1][os.urandom(20)]``;
* ``dequeue``: ``first_item`` reads the first key-value pair with a range read
  (``limit=1``); it is cleared (``del tr[item.key]``) and its value returned (None for an
  empty queue).

Each of ``enqueue`` and ``dequeue`` given a database runs in a retry loop as
``@fdb.transactional`` does (create a transaction, run the body, ``commit().wait()``, on a
FoundationDB error ``on_error(code).wait()`` and run again); given a transaction, inside it.
The loop is written here rather than taken from ``fdb.transactional`` so that it runs on the
in-memory database without ``fdb.api_version()`` and counts as the recipe's own code in
:mod:`~fdbqueue.benchmark.cpu`, as fdbqueue's own retry loop counts as fdbqueue's. Values are
bytes, stored as they are (fdbqueue's ``codec="raw"`` stores the same).

Source followed: FoundationDB's documentation, "Queues" (``queues.rst``), the Python code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["RecipeQueue"]

R = TypeVar("R")


def _transactional(tr: Any, body: Callable[[Any], R]) -> R:
    """``body(tr)`` inside ``tr`` when it is a transaction; with a database, in a new
    transaction, committed, and retried as ``@fdb.transactional`` retries."""
    if not hasattr(tr, "create_transaction"):
        return body(tr)
    transaction = tr.create_transaction()
    while True:
        try:
            result = body(transaction)
            transaction.commit().wait()
            return result
        except Exception as error:
            code = getattr(error, "code", None)
            if not isinstance(code, int):
                raise
            transaction.on_error(code).wait()


class RecipeQueue:
    """FoundationDB's "Queues" recipe (the module docstring) over ``subspace``.

    Args:
        subspace: the binding's ``Subspace`` (``fdbqueue.Subspace``) holding the items.
    """

    def __init__(self, subspace: Any) -> None:
        self.queue = subspace

    def dequeue(self, tr: Any) -> bytes | None:
        return _transactional(tr, self.dequeue_in)

    def enqueue(self, tr: Any, value: bytes) -> None:
        _transactional(tr, lambda transaction: self.enqueue_in(transaction, value))

    def dequeue_in(self, tr: Any) -> bytes | None:
        """The body of ``dequeue`` in ``tr``, a transaction, without the retry loop's check
        of what it was given (the instruction counts set fdbqueue's ``dequeue(tr)`` against
        it: :mod:`~fdbqueue.benchmark.instructions`)."""
        item = self.first_item(tr)
        if item is None:
            return None
        del tr[item.key]
        value: bytes = item.value
        return value

    def enqueue_in(self, tr: Any, value: bytes) -> None:
        """The body of ``enqueue`` in ``tr``, a transaction, as :meth:`dequeue_in`."""
        tr[self.queue[self.last_index(tr) + 1][os.urandom(20)]] = value

    def last_index(self, tr: Any) -> int:
        r = self.queue.range()
        for key, _ in tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True):
            index: int = self.queue.unpack(key)[0]
            return index
        return 0

    def first_item(self, tr: Any) -> Any:
        r = self.queue.range()
        for kv in tr.get_range(r.start, r.stop, limit=1):
            return kv
        return None
