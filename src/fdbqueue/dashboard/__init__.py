"""A web dashboard for fdbqueue queues: ``fdbqueue dashboard`` or :func:`create_app`.

Install it with ``pip install 'fdbqueue[dashboard]'`` (Starlette, uvicorn and Jinja2; htmx is
served from the package, never from a CDN). The overview lists every queue's figures and
updates itself every two seconds; a queue's page shows them per shard, a plot of its depth over
the last minutes, the next items (with their priorities), the leases with their expiry, the
jobs running, retrying and finished, the workers online, a search by job id, and the dead
letters (a page at a time, updated live too), which it requeues or deletes, one or all,
each after a confirmation; a job's page shows its value, state, times, error (with its
traceback) and result, and cancels it after a confirmation. It answers only requests naming
an allowed host (loopback names by default) and takes actions only from those hosts' pages.
See :doc:`dashboard`.

>>> from fdbqueue import Queue, Subspace, memory
>>> from fdbqueue.dashboard import create_app
>>> db = memory.open()
>>> app = create_app(db, {"jobs": Queue(Subspace(("jobs",)))})
>>> # uvicorn.run(app, host="127.0.0.1", port=8400)
"""

from __future__ import annotations

from fdbqueue.dashboard._app import DEAD_LETTERS_PAGE, create_app
from fdbqueue.dashboard._demo import Demo, start_demo

__all__ = ["DEAD_LETTERS_PAGE", "Demo", "create_app", "start_demo"]
