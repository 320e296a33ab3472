"""What every queue type shares, composed from the layers below.

* :mod:`~fdbqueue._queues.stored_queue`: :class:`~fdbqueue._queues.stored_queue.StoredQueue`,
  what looks at or acts on the whole subspace (``size``, ``peek_many``, ``info``, ``clear``).
* :mod:`~fdbqueue._queues.dead_lettered_queue`: listing, purging and requeueing dead letters.
* :mod:`~fdbqueue._queues.enqueueing`: a Queue's writing methods, down to the append at the
  back (with delays and idempotent enqueue).
* :mod:`~fdbqueue._queues.shards`, :mod:`~fdbqueue._queues.sharded_end`,
  :mod:`~fdbqueue._queues.shard_homes`, :mod:`~fdbqueue._queues.sharded_consumer`,
  :mod:`~fdbqueue._queues.sharded_views`: a queue of several shards, each a queue object of
  its own (a *part*): choosing the part each operation acts on, taking from every shard's
  end as one, each consumer's home shard, sessions that move between the shards' lines, and
  the figures and listings gathered from the shards.
* :mod:`~fdbqueue._queues.leased_queue`: :class:`~fdbqueue._queues.leased_queue.LeasedQueue`,
  what a lease holder does (``ack``, ``release``, dead letters, ``work``).

:class:`fdbqueue.Queue` and :class:`fdbqueue.PriorityQueue` derive from them.
"""
