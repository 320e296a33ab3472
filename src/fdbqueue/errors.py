"""Every exception fdbqueue raises of its own, in one place.

The queue errors (all but the last three below) are also importable from :mod:`fdbqueue`.
Besides these, operations raise the standard ``TypeError`` and ``ValueError`` for bad
arguments (before anything is read or written), and FoundationDB's own ``fdb.FDBError``
(``fdbqueue.memory.FDBError`` on the in-memory database) for database errors that a retry
loop does not absorb.

==================================  ==========================================================
Exception                           Raised when
==================================  ==========================================================
:class:`QueueTypeError`             the subspace holds another queue type, or a queue written
                                    with another codec (its metadata records both). Nothing
                                    changed.
:class:`LeaseError`                 ``ack``, ``release``, ``extend`` or ``dead_letter`` on a
                                    lease that is no longer held; its two subclasses say why.
:class:`UnknownResultError`         a commit's outcome is unknown and can no longer be found
                                    out.
:class:`JobFailedError`             ``result`` of a job that ended dead or cancelled.
:class:`ResultNotKeptError`         ``result`` of a job that succeeded but whose result could
                                    not be kept (the result codec cannot encode it, or it is
                                    larger than a value).
:class:`TimeLimitExceeded`          not raised to you: the failure the worker loop records for a
                                    job whose handler ran past ``time_limit`` (in the log and
                                    in its dead letter's reason).
:class:`HandlerError`               not raised to you: a handler's exception from its child
                                    process that could not be sent back as it was.
:class:`UnknownTaskError`           not raised to you: the failure a worker without a handler
                                    records for a job whose task it does not have, or whose
                                    value is not a task call; the job ends dead at once.
:class:`ClientLibraryMissingError`  opening a real cluster without ``libfdb_c``.
:class:`BindingMismatchError`       the ``foundationdb`` binding is newer than ``libfdb_c``.
:class:`BenchmarkError`             ``fdbqueue bench`` cannot run as asked.
==================================  ==========================================================
"""

from __future__ import annotations

__all__ = [
    "BenchmarkError",
    "BindingMismatchError",
    "ClientLibraryMissingError",
    "HandlerError",
    "JobFailedError",
    "LeaseError",
    "LeaseExpiredError",
    "LeaseNotHeldError",
    "QueueTypeError",
    "ResultNotKeptError",
    "TimeLimitExceeded",
    "UnknownResultError",
    "UnknownTaskError",
]


class QueueTypeError(ValueError):
    """The subspace holds a queue of another type (a PriorityQueue opened as a Queue, or the
    other way round), or one written with another codec: its metadata records the type and the
    codec its first write had. Nothing changed."""


class LeaseError(Exception):
    """An ``ack`` or ``release`` refused: the lease is no longer held. Nothing was changed."""


class LeaseExpiredError(LeaseError):
    """The lease expired: its item is available to the next claim (or already claimed)."""


class LeaseNotHeldError(LeaseError):
    """The lease does not exist any more: it was acknowledged or released already, or it
    expired and its item was claimed again or moved to the dead letters."""


class UnknownResultError(Exception):
    """An operation's commit outcome is unknown and cannot be found out any more: the attempt
    is older than the receipts' lifetime (``RECEIPT_LIFETIME``, 86,400 seconds by read versions
    and by the wall clock), or the transactions that look it up kept failing. The operation may
    or may not have taken effect."""


class JobFailedError(Exception):
    """``result()`` of a job that ended without a result: moved to the dead letters
    (``state == "dead"``) or cancelled. ``info`` is the job's :class:`~fdbqueue.JobInfo`,
    ``error`` its last failure ``(exception type, message, traceback lines)`` or None."""

    def __init__(self, message: str, info: object, error: tuple[str, str, str] | None) -> None:
        super().__init__(message)
        self.info = info
        self.error = error


class ResultNotKeptError(Exception):
    """``result()`` of a job that succeeded (its handler returned) but whose result was not
    kept: the result codec could not encode what the handler returned (a ``set``, an object
    of your own class...), or its encoding is larger than FoundationDB's 100,000-byte value
    limit. The job's record says so (:attr:`JobInfo.result_error <fdbqueue.JobInfo>`, which
    starts ``result not kept:``), so it never reads as a result of None. ``info`` is the
    job's :class:`~fdbqueue.JobInfo`, ``reason`` its ``result_error``.

    Not a :class:`JobFailedError`: the job's work was done, and is not to be done again."""

    def __init__(self, message: str, info: object, reason: str) -> None:
        super().__init__(message)
        self.info = info
        self.reason = reason


class TimeLimitExceeded(TimeoutError):
    """A job's handler ran past the worker loop's ``time_limit``: the worker took the job
    back and released it for a retry, or moved it to the dead letters, as for a handler that
    raised (:mod:`fdbqueue.worker`). Its message starts with ``time limit exceeded``."""


class UnknownTaskError(LookupError):
    """A worker given no handler met a job whose task is not registered in its process, or
    whose value is not a task call (:doc:`jobs`, "Tasks"). Retrying cannot help: the worker
    moves the job to the dead letters on that delivery (its state ``dead``), the message, which
    names the task, as its error."""


class HandlerError(Exception):
    """Not raised to you: what a handler raised in its child process (``work(...,
    processes=N)``) when that exception could not be sent back as it was (it does not
    pickle): its type's name and message (``kind``, the message), with the child's
    traceback (``trace``)."""

    def __init__(self, kind: str, message: str, trace: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.trace = trace


class ClientLibraryMissingError(RuntimeError):
    """The binding cannot load libfdb_c (FoundationDB's C client library) in this process."""


class BindingMismatchError(RuntimeError):
    """The ``foundationdb`` binding is newer than libfdb_c (or libfdb_c is older than 6.3)."""


class BenchmarkError(Exception):
    """The benchmark cannot run as asked (bad arguments, matplotlib missing for ``--plot``)."""
