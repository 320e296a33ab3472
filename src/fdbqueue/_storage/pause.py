"""Pausing a queue's consumers: the ``("paused",)`` key and the rule every take checks.

Key layout, under the queue's metadata prefix ``P + b"\\xff"`` (for a queue of several
shards, the queue's own metadata, not a shard's: one key for the whole queue)::

    pack(("paused",))   -> b""   present while the queue is paused

The rule, in one place (:meth:`Pause.holds`): while the key is present, every take and claim
finds nothing and writes nothing (no receipt either), whatever its kind: plain, in line, in a
consumer session, sharded, blocking or not. Producers go on; peeks, sizes and ``info`` are not
affected. Each take or claim attempt starts the read (:meth:`Pause.look`, a snapshot point
read: no conflict) with its first other reads and checks it (:meth:`Pause.holds`) before its
first write; a second look in the same transaction (the shards of one queue share the key) is
answered from the transaction's cache of reads. So pausing costs every take one key read, and
takes effect for the transactions whose read version is after the pause's commit: a take that
read before it may still commit (one transaction's worth, which a pause does not conflict
with).

:meth:`Pause.set` pauses or resumes; resuming bumps the queue's signal keys, so that blocked
takes (waiting on watches of them, :mod:`fdbqueue._transactions.waiting`) look again at once.
A blocked take that found the queue paused waits for a signal only (:attr:`Pause.seen`: not for
a lease's expiry or a delayed item's due time, which a paused queue does not deliver).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue._storage.features import PAUSE, FeatureRecord
from fdbqueue._transactions.transactional import AnyContext

__all__ = ["Pause"]

#: What the paused key holds (its presence is what counts).
PAUSED_VALUE = b""


class Pause:
    """The paused key of one queue (see the module docstring).

    Args:
        metadata: the queue's metadata subspace (a sharded queue's own, shared by its shards).
        features: the queue's feature record: the first pause records its bit there, so
            that takes read the paused key from then on (:mod:`fdbqueue._storage.features`).
    """

    def __init__(self, metadata: Subspace, features: FeatureRecord) -> None:
        self.features = features
        #: the key present while the queue is paused
        self.key: bytes = metadata.pack(("paused",))
        #: A hint: whether the last check (:meth:`holds`) of this queue object found it
        #: paused. A blocked take that found it so sleeps until a signal (no lease expiry or
        #: due time wakes it: nothing would be delivered then).
        self.seen = False

    def look(self, tr: AnyContext) -> Any:
        """Start reading the paused key (a snapshot point read: no conflict); pass the future
        to :meth:`holds` once the attempt's other first reads are issued. Cost: one key read
        per transaction (a second look in it is answered from its cache of reads)."""
        reader: Any = getattr(tr, "snapshot", tr)  # tr may be a snapshot view already
        return reader.get(self.key)

    def holds(self, looked: Any) -> bool:
        """Whether ``looked`` (:meth:`look`'s future) found the queue paused: the attempt
        then takes nothing and writes nothing. Waits for ``looked``."""
        paused = bool(looked.present())
        self.seen = paused
        return paused

    def set(self, tr: AnyContext, paused: bool, wake: Callable[[AnyContext], None]) -> bool:
        """Pause (``paused``) or resume the queue in ``tr``; return whether that changed it
        (False: it was paused, or running, already; nothing is written then). Resuming calls
        ``wake(tr)``, which bumps the queue's signal keys (every shard's), so blocked takes
        wake.
        Cost: one point read of the paused key (a read conflict on it: of two concurrent
        pauses, one retries and finds it paused), then, when it changes, a set (pause) or a
        clear and one atomic add per signal key (resume); a pause also sets the feature
        record's bit (an atomic ``bit_or``)."""
        if bool(tr.get(self.key).present()) == paused:
            return False
        if paused:
            tr[self.key] = PAUSED_VALUE
            self.features.use(tr, PAUSE)
            return True
        del tr[self.key]
        wake(tr)
        return True

    def __repr__(self) -> str:
        return f"Pause({self.key!r})"
