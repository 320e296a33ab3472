"""Delivery beyond a plain take: leases (claim, acknowledge, release, expire into the dead
letters) and delayed delivery.

* :mod:`~fdbqueue._delivery.leases`: claims and the lease records.
* :mod:`~fdbqueue._delivery.delays`: items that fall due later, promoted by consumers.

It builds on :mod:`fdbqueue._storage`.
"""
