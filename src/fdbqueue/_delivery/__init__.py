"""Delivery beyond a plain take: leases (claim, acknowledge, release, expire into the dead
letters), delayed delivery, idempotent enqueue, and the worker loop's heartbeat and
settling.

* :mod:`~fdbqueue._delivery.leases`: the lease records and what their holder does.
* :mod:`~fdbqueue._delivery.claims`: claiming, redelivery, the move to the dead letters.
* :mod:`~fdbqueue._delivery.delays`: items that fall due later, promoted by consumers.
* :mod:`~fdbqueue._delivery.deduplication`: ids of idempotent enqueues, kept for a window.
* :mod:`~fdbqueue._delivery.heartbeat`: extending the leases of the worker loop's jobs.
* :mod:`~fdbqueue._delivery.settling`: what the worker loops do with a job that finished.

It builds on :mod:`fdbqueue._storage`.
"""
