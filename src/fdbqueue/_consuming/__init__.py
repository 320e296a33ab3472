"""How consumers take: from each end of a queue, plainly, in line, or in a session.

* :mod:`~fdbqueue._consuming.ends`: one end of a queue, every way of taking from it.
* :mod:`~fdbqueue._consuming.line`: the line of requests at an end, written with
  versionstamped keys.
* :mod:`~fdbqueue._consuming.sessions`: consumer sessions (``Queue.consumer``) that take in
  line without conflicting, with prefetch.

It builds on :mod:`fdbqueue._delivery` (a take promotes due delayed items; a session can
claim under a lease) and below it.
"""
