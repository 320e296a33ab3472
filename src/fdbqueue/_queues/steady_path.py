"""A Queue's enqueue and dequeue in their steady state, each one function per shard.

Most calls of a queue are its plainest: one value enqueued, or one taken, given a Database,
on a queue that uses no group, delay or deduplication at the moment. The layered path
(:class:`~fdbqueue._queues.shard.FifoShard`, :class:`~fdbqueue._consuming.ends.End`,
:mod:`fdbqueue._storage.taking`, the groups' and delays' hints) does the same work in about
fifty functions over a dozen modules: about 9x the CPU of FoundationDB's recipe, as
``fdbqueue bench --cpu`` measures. Each shard of a Queue
(:class:`~fdbqueue._queues.shard.FifoShard`) has a :class:`SteadyPath` that does those calls
in one function each that reads and writes exactly what the layered path would, the same
keys, receipt and metrics, and hands a call to the layered path, inside the same
transaction and before anything is written, whenever the steady state does not hold:

* an enqueue reads the type and codec records and the last index together (snapshot reads,
  as :meth:`~fdbqueue._queues.shard.FifoShard.append` does), and goes on only when both
  records name this queue and the last key is one of its items; it writes the ``began``
  record of :mod:`fdbqueue._storage.ages`, as the layered append;
* a dequeue goes on only while the groups' and delays' hints are quiet
  (:mod:`fdbqueue._storage.quiet_keys`: found empty lately, so the layered path would not read
  them either), once the codec record was found right, and when the front holds an item
  whose key is one of the queue's and whose value decodes (clearing the ``began`` records
  behind it when it begins a bucket, as :func:`~fdbqueue._storage.taking.take`). An empty
  front, a poison item, a foreign key or a hint to read: the layered take runs in the same
  transaction (its reads of what was read already come from the transaction's
  read-your-writes cache, no extra round trip on FoundationDB), and says what it says.

Both run in the shard's :meth:`~fdbqueue._transactions.receipts.Receipts.run`: exactly once
given a Database, as every operation. Given a Transaction, a call takes the layered path; so
do calls in line (``high_contention``) and those with a ``delay``, ``dedup_id`` or
``group``. On a sharded queue the router still chooses the shard (a write's turn, a
consumer's home: :mod:`fdbqueue._queues.sharded_end`); the shard's steady path then acts.

Source followed: FoundationDB's "Queues" recipe (the reads and writes), and the layered path
it stands in for (which the matrix tests run beside it).
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from fdbqueue._storage.store import COUNTER, RANDOM_BYTES
from fdbqueue._storage.taking import MOVED_ASIDE
from fdbqueue.metrics import Count

if TYPE_CHECKING:
    from fdbqueue._consuming.ends import End
    from fdbqueue._queues.shard import FifoShard

__all__ = ["SteadyPath"]

_ONE = COUNTER.pack(1)
_MINUS_ONE = COUNTER.pack(-1)


def _taken(value: Any) -> bool:
    return value is not None


class SteadyPath:
    """The steady path of one shard of a :class:`~fdbqueue.Queue` (see the module docstring).

    Args:
        shard: the shard.
        end: that shard's front, whose layered take stands in when the steady state does not
            hold.
    """

    def __init__(self, shard: FifoShard, end: End) -> None:
        store = shard.store
        self.shard = shard
        self.end = end
        self.receipts = shard.receipts
        self.subspace = store.subspace
        self.store = store
        self.ages = store.ages
        self.begin = store.begin
        self.stop = store.end
        self.type_key = store.type_key
        self.codec_key = store.codec_key
        self.type_name = store.type_name
        self.codec_name = store.codec_name
        self.size_key = store.size_key
        self.enqueued_key = store.enqueued_key
        self.signal_key = store.signal_key
        # the groups' and delays' hints, and the waiting leases' (an item whose lease
        # expired waits as any item, and comes first)
        self.hints = (shard.groups.count_key, shard.delays.hint_key, shard.leases.leases_begin)
        self.quiet_all = store.quiet.quiet_all
        self.decode = store.decode
        self.enqueued = Count("enqueued", **store.metric_attributes)
        self.dequeued = Count("dequeued", **store.metric_attributes)

    def enqueue(self, database: Any, encoded: bytes) -> bool:
        """Enqueue ``encoded`` (checked already) in a transaction of ``database``, exactly
        once; True. Raises as :meth:`fdbqueue.Queue.enqueue`. Cost: as the layered enqueue."""
        result: bool = self.receipts.run(database, functools.partial(self.append, encoded))
        return result

    def append(self, encoded: bytes, tr: Any) -> bool:
        """One attempt of :meth:`enqueue` in ``tr``: the recipe's append after the last
        index, when the type records name this queue; else the layered one."""
        snapshot = tr.snapshot
        type_record = snapshot.get(self.type_key)
        codec_record = snapshot.get(self.codec_key)
        last = list(snapshot.get_range(self.begin, self.stop, limit=1, reverse=True))
        index: Any = 0
        if last:
            try:
                index = self.subspace.unpack(last[0].key)[0]
            except Exception:  # not an item key: the layered append says what it is
                index = None
        steady = (
            type(index) is int
            and type_record.present()
            and bytes(type_record) == self.type_name
            and (
                self.codec_name is None
                or (codec_record.present() and bytes(codec_record) == self.codec_name)
            )
        )
        if not steady:
            self.shard.put(tr, [encoded], (), 0.0)
            return True
        index += 1
        self.ages.appended(tr, (), index, 1, found_empty=not last)  # when, for the oldest age
        # The prefix's length was checked when the queue was made: the key fits.
        tr[self.subspace.pack((index, os.urandom(RANDOM_BYTES)))] = encoded
        tr.add(self.size_key, _ONE)
        tr.add(self.enqueued_key, _ONE)
        tr.add(self.signal_key, _ONE)
        self.enqueued.add()
        return True

    def dequeue(self, database: Any) -> Any:
        """Take the value at the front in a transaction of ``database``, exactly once; None
        when the queue is empty. Raises as :meth:`fdbqueue.Queue.dequeue`. Cost: as the
        layered dequeue."""
        run = self.receipts.run
        value = run(database, self.take, wrote=_taken)
        while value is MOVED_ASIDE:  # it only moved poison aside (and committed that)
            value = run(database, self.take, wrote=_taken)
        return value

    def take(self, tr: Any) -> Any:
        """One attempt of :meth:`dequeue` in ``tr``: the recipe's take of the first item
        while the steady state holds; else the layered take."""
        if not (self.store.verified and self.quiet_all(self.hints)):
            return self.end.take_in(tr)
        first = list(tr.get_range(self.begin, self.stop, limit=1))
        if not first:
            return self.end.take_in(tr)
        key = first[0].key
        try:
            index = self.subspace.unpack(key)[0]
            value = self.decode(bytes(first[0].value))
        except Exception:  # a foreign key or a poison item: the layered take deals with it
            return self.end.take_in(tr)
        if type(index) is not int:
            return self.end.take_in(tr)
        if self.ages.begins_bucket(index):  # the records behind it can go
            self.ages.taken(tr, (index,), (index,), lower=True, higher=False)
        del tr[key]
        tr.add(self.size_key, _MINUS_ONE)
        self.dequeued.add()
        return value
