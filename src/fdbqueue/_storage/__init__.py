"""How items are stored and counted: the key layout, values in and out, sizes, groups, ages.

* :mod:`~fdbqueue._storage.store`: :class:`~fdbqueue._storage.store.ItemStore`, a queue's
  subspace: item keys, the metadata keys, the size counter, the signal key, codec and type
  records, ``clear``.
* :mod:`~fdbqueue._storage.type_records`: the type, shard count and codec a queue records,
  and the checks every operation makes against them (a base of the store).
* :mod:`~fdbqueue._storage.taking`: taking the first items at an end, poison items set aside.
* :mod:`~fdbqueue._storage.priority_ends`: reading a priority queue's two ends.
* :mod:`~fdbqueue._storage.groups`: message groups, their items in order and their turns.
* :mod:`~fdbqueue._storage.ages`: when ranges of item positions began (the oldest item's age).
* :mod:`~fdbqueue._storage.held`: values kept outside the queue (leased, dead-lettered).
* :mod:`~fdbqueue._storage.dead_letters`: items taken out of circulation, with the reason.
* :mod:`~fdbqueue._storage.transaction_bytes`: a transaction's size as FoundationDB counts it.
* :mod:`~fdbqueue._storage.queue_info`: what ``info`` reports.

It builds on :mod:`fdbqueue._transactions` and imports nothing of the layers above it: it
knows nothing of leases, lines or sessions.
"""
