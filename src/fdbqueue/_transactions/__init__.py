"""Running transactions and waiting: the lowest layer above FoundationDB itself.

* :mod:`~fdbqueue._transactions.transactional`: the retry loop every operation given a
  Database runs in (``fdb.transactional``'s contract, on the binding and on
  :mod:`fdbqueue.memory`), and the one place fdbqueue commits.
* :mod:`~fdbqueue._transactions.receipts`: exactly once when a commit's outcome is unknown.
* :mod:`~fdbqueue._transactions.suspension`: the ways the core blocks (on a future, on the
  first of several, asleep), which an event loop can take over.
* :mod:`~fdbqueue._transactions.waiting`: blocking takes on a watch.

Nothing here knows a queue's key layout beyond the keys it is handed.
"""
