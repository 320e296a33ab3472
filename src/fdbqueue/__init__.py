"""fdbqueue: shared, transactional FIFO and priority queues stored in FoundationDB.

>>> from fdbqueue import Queue, PriorityQueue, Subspace, memory
>>> db = memory.open()                      # or: db = fdbqueue.binding.open_database()
>>> q = Queue(Subspace(("Q",)))
>>> q.enqueue(db, "job-1")
>>> q.dequeue(db)
'job-1'

Every operation takes a Database (its own transaction, committed and retried) or a
Transaction (runs inside it, commits nothing), like any ``fdb.transactional`` function.
The queues never call ``fdb.api_version()``: your application does, before ``fdb.open()``, or
lets :func:`fdbqueue.binding.open_database` choose the version both the binding and
``libfdb_c`` support.
Importing fdbqueue needs no ``libfdb_c``.
"""

from __future__ import annotations

from fdb.subspace_impl import Subspace

from fdbqueue import _clock, memory
from fdbqueue._consuming.sessions import Consumer
from fdbqueue._delivery.leases import Lease
from fdbqueue._delivery.schedules import ScheduleInfo
from fdbqueue._delivery.workers import WorkerInfo
from fdbqueue._queues.tasks import Task
from fdbqueue._storage.dead_letters import DeadLetter
from fdbqueue._storage.job_records import JobOptions
from fdbqueue._storage.jobs import Job, JobInfo
from fdbqueue._storage.queue_info import QueueInfo
from fdbqueue._transactions import suspension as _suspension
from fdbqueue._transactions import transactional as _transactional
from fdbqueue._transactions.transactional import TransactionContext, transactional
from fdbqueue.codecs import Codec, JsonCodec, RawCodec, TaggedCodec, TupleCodec, Undecodable
from fdbqueue.errors import (
    JobFailedError,
    LeaseError,
    LeaseExpiredError,
    LeaseNotHeldError,
    QueueTypeError,
    ResultNotKeptError,
    TimeLimitExceeded,
    UnknownResultError,
    UnknownTaskError,
)
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue

# The in-memory database imports nothing of fdbqueue outside it, and the core nothing of the
# in-memory database: here, where both are imported, the core learns of its time let pass
# (Database.pass_time), its errors and its futures (docs/memory.rst, "Time").
_clock.follow(memory.time_passed)
_transactional.recognise_error_type(memory.FDBError)
_suspension.recognise_future_type(memory.Future)

__version__ = "0.1.0"

__all__ = [
    "Codec",
    "Consumer",
    "DeadLetter",
    "Job",
    "JobFailedError",
    "JobInfo",
    "JobOptions",
    "JsonCodec",
    "Lease",
    "LeaseError",
    "LeaseExpiredError",
    "LeaseNotHeldError",
    "PriorityQueue",
    "Queue",
    "QueueInfo",
    "QueueTypeError",
    "RawCodec",
    "ResultNotKeptError",
    "ScheduleInfo",
    "Subspace",
    "TaggedCodec",
    "Task",
    "TimeLimitExceeded",
    "TransactionContext",
    "TupleCodec",
    "Undecodable",
    "UnknownResultError",
    "UnknownTaskError",
    "WorkerInfo",
    "__version__",
    "memory",
    "transactional",
]
