"""The options every queue type takes, and the checks and page reads its verbs share:
:class:`QueueOptions` (with :data:`QUEUE_DEFAULTS`), :func:`check_queue_arguments`,
:func:`check_limit` and :func:`read_pages` (listings read page by page, :data:`PAGE_SIZE`
records at a time).

Source followed: ``fdb/directory_impl.py`` for the layer's conventions (``tr`` first,
``@transactional``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypedDict, TypeVar

from fdbqueue._checks import check_count, check_flag, check_keywords, check_seconds
from fdbqueue._consuming.sessions import DEFAULT_ABANDON_AFTER, check_abandon_after
from fdbqueue._delivery.deduplication import DEFAULT_DEDUP_WINDOW, check_dedup_window
from fdbqueue._delivery.leases import DEFAULT_MAX_DELIVERIES, check_max_deliveries
from fdbqueue._delivery.rate_limit import check_rate_limit
from fdbqueue._delivery.time_limits import check_time_limit
from fdbqueue._storage.job_records import JobOptions
from fdbqueue._storage.jobs import RESULT_TTL
from fdbqueue._transactions.transactional import is_database, is_transaction
from fdbqueue.codecs import Codec, resolve_result_codec

__all__ = [
    "PAGE_SIZE",
    "QUEUE_DEFAULTS",
    "QueueOptions",
    "ReadPage",
    "Settings",
    "check_after",
    "check_limit",
    "check_options",
    "check_queue_arguments",
    "job_options",
    "read_pages",
]

#: Records one page of a listing reads (:func:`read_pages`): given a Database, each page is a
#: transaction of its own.
PAGE_SIZE = 1_000

R = TypeVar("R")


class QueueOptions(TypedDict, total=False):
    """The keyword arguments every queue type takes beside ``subspace`` and ``codec``
    (``Queue(subspace, codec=..., **options)``), written once: the constructors of the queue
    types and of their asyncio twins take them as ``**options: Unpack[QueueOptions]``, and
    :class:`~fdbqueue.Queue`'s docstring documents them. :data:`QUEUE_DEFAULTS` holds what
    each one is when left out."""

    high_contention: bool
    abandon_after: float
    max_deliveries: int | None
    exactly_once: bool
    shards: int
    dedup_window: float
    result_ttl: float
    result_codec: str | Codec[Any] | None
    time_limit: float | None
    rate_limit: tuple[int, float] | None


#: What each of :class:`QueueOptions` is when left out.
QUEUE_DEFAULTS: QueueOptions = {
    "high_contention": False,
    "abandon_after": DEFAULT_ABANDON_AFTER,
    "max_deliveries": DEFAULT_MAX_DELIVERIES,
    "exactly_once": True,
    "shards": 1,
    "dedup_window": DEFAULT_DEDUP_WINDOW,
    "result_ttl": RESULT_TTL,
    "result_codec": None,
    "time_limit": None,
    "rate_limit": None,
}


#: Reads one page: ``(tr, after, count)`` -> (up to ``count`` results, the last key read, or
#: None when nothing was read; whether more may follow). ``after`` None starts at the first.
ReadPage = Callable[[Any, "bytes | None", int], "tuple[list[R], bytes | None, bool]"]


def check_limit(limit: Any, name: str = "limit") -> int | None:
    """Return ``limit``: an int >= 0, or None for no limit.

    Raises:
        TypeError: not an int or None (bool included).
        ValueError: negative.
    """
    if limit is None:
        return None
    check_count(limit, name)
    return int(limit)


def read_pages(
    tr: Any, limit: int | None, read_page: ReadPage[R], start: bytes | None = None
) -> list[R]:
    """Up to ``limit`` results (None: all) of ``read_page``, page after page of at most
    :data:`PAGE_SIZE`, each page going on after the last key the one before read (the first
    after ``start``; None: from the beginning).

    ``read_page`` is :func:`~fdbqueue._transactions.transactional.transactional`: given a
    Database, each page is a transaction of its own (so pages are read at different read
    versions); given a Transaction, every page is read in it.
    """
    if not is_database(tr) and not is_transaction(tr):
        read_page(tr, None, 0)  # raises the TypeError that names what was expected
    found: list[R] = []
    after: bytes | None = start
    while limit is None or len(found) < limit:
        count = PAGE_SIZE if limit is None else min(PAGE_SIZE, limit - len(found))
        results, last, more = read_page(tr, after, count)
        found.extend(results)
        if not more or last is None:
            break
        after = last
    return found


class Settings(NamedTuple):
    """:class:`QueueOptions` checked, each left out at its :data:`QUEUE_DEFAULTS` value
    (:func:`check_options`); ``abandon_after``, ``dedup_window``, ``result_ttl`` and
    ``time_limit`` in seconds."""

    high_contention: bool
    abandon_after: float
    max_deliveries: int | None
    exactly_once: bool
    shards: Any  # checked by the router (fdbqueue._queues.router.check_shards)
    dedup_window: float
    result_ttl: float
    result_codec: Codec[Any]
    time_limit: float | None
    rate_limit: tuple[int, float] | None


def check_options(options: QueueOptions, where: str) -> Settings:
    """The :class:`Settings` of ``options`` (a queue constructor's, named ``where``).

    Raises:
        TypeError, ValueError: an unknown option, or a bad value (see
            :func:`check_queue_arguments`, and each option's check), before anything is
            read or written.
    """
    check_keywords(options, QueueOptions, where)
    given: QueueOptions = {**QUEUE_DEFAULTS, **options}
    window = check_dedup_window(given["dedup_window"])
    max_deliveries = given["max_deliveries"]
    seconds = check_queue_arguments(
        given["high_contention"], given["abandon_after"], max_deliveries
    )
    return Settings(
        high_contention=given["high_contention"],
        abandon_after=seconds,
        max_deliveries=max_deliveries,
        exactly_once=check_flag(given["exactly_once"], "exactly_once"),
        shards=given["shards"],
        dedup_window=window,
        result_ttl=check_seconds(given["result_ttl"], "result_ttl", allow_zero=True),
        result_codec=resolve_result_codec(given["result_codec"]),
        time_limit=check_time_limit(given["time_limit"]),
        rate_limit=check_rate_limit(given["rate_limit"]),
    )


def job_options(
    max_deliveries: Any = None, time_limit: Any = None, backoff: Any = None, result_ttl: Any = None
) -> JobOptions | None:
    """The :class:`~fdbqueue.JobOptions` of ``submit``'s keywords, checked as the queue's and
    the worker's own settings are; None when all are None (theirs apply).

    Raises:
        TypeError: a value of the wrong type (a bool, a str...).
        ValueError: ``max_deliveries`` < 1, a ``time_limit`` that is not > 0 or over 12
            hours, a ``backoff`` that is not a finite number > 0, a ``result_ttl`` < 0.
    """
    if max_deliveries is None and time_limit is None and backoff is None and result_ttl is None:
        return None
    return JobOptions(
        check_max_deliveries(max_deliveries),
        check_time_limit(time_limit),
        None if backoff is None else check_seconds(backoff, "backoff"),
        None if result_ttl is None else check_seconds(result_ttl, "result_ttl", allow_zero=True),
    )


def check_after(after: Any, delay: Any, dedup_id: Any) -> None:
    """Refuse ``submit(..., after=...)`` with a ``delay`` or a ``dedup_id``, which it does
    not take (yet).

    Raises:
        ValueError: either is given.
    """
    if delay is not None or dedup_id is not None:
        raise ValueError("submit(after=...) takes no delay or dedup_id")


def check_queue_arguments(high_contention: Any, abandon_after: Any, max_deliveries: Any) -> float:
    """Check the arguments :class:`~fdbqueue.Queue` and :class:`~fdbqueue.PriorityQueue` take
    beside the subspace, codec, shards and deduplication window (those are checked by
    :func:`fdbqueue._storage.store.as_subspace`, :func:`fdbqueue.codecs.resolve_codec`,
    :func:`~fdbqueue._queues.router.check_shards` and
    :func:`~fdbqueue._delivery.deduplication.check_dedup_window`), before anything is read or
    written.

    Returns:
        ``abandon_after`` as a float.

    Raises:
        TypeError: ``high_contention`` is not a bool, ``max_deliveries`` is not an int or
            None, or ``abandon_after`` is not a number. (``subspace`` or ``codec`` of the
            wrong type, or a non-bool ``exactly_once``, raise TypeError too.)
        ValueError: ``abandon_after`` is NaN, not > 0 or over a day, or ``max_deliveries``
            is below 1. (So does a subspace prefix that is empty, longer than 9,872 bytes or
            in the system keys, or an unknown codec name.)
    """
    check_flag(high_contention, "high_contention")
    check_max_deliveries(max_deliveries)
    return check_abandon_after(abandon_after)
