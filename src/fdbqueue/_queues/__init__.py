"""The shard, the router and the base of both queue types.

* :mod:`~fdbqueue._queues.shard`: :class:`~fdbqueue._queues.shard.Shard`, everything one key
  range of a queue holds (items, counters, leases, dead letters, delayed items, groups,
  receipts, the ends), with :class:`~fdbqueue._queues.shard.FifoShard` and
  :class:`~fdbqueue._queues.shard.PriorityShard` overriding only what differs.
* :mod:`~fdbqueue._queues.router`: :class:`~fdbqueue._queues.router.Router`, a queue's shards
  and the shard each write, group, lease and take goes to.
* :mod:`~fdbqueue._queues.shard_homes`: each consumer's home shard, and when it moves.
* :mod:`~fdbqueue._queues.sharded_end`: taking from every shard's end as one end.
* :mod:`~fdbqueue._queues.sharded_consumer`: consumer sessions that move between the shards'
  lines.
* :mod:`~fdbqueue._queues.base`: :class:`~fdbqueue._queues.base.QueueBase`, what
  :class:`fdbqueue.Queue` and :class:`fdbqueue.PriorityQueue` share.
"""
