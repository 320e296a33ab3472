"""What every queue type shares, composed from the layers below.

* :mod:`~fdbqueue._queues.stored_queue`: :class:`~fdbqueue._queues.stored_queue.StoredQueue`,
  what looks at or acts on the whole subspace (``size``, ``peek_many``, ``info``, ``clear``).
* :mod:`~fdbqueue._queues.leased_queue`: :class:`~fdbqueue._queues.leased_queue.LeasedQueue`,
  what a lease holder does (``ack``, ``release``, dead letters, ``work``).

:class:`fdbqueue.Queue` and :class:`fdbqueue.PriorityQueue` derive from them.
"""
