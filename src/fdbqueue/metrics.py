"""Metrics: per-queue counters and timings through OpenTelemetry's metrics API.

fdbqueue records its metrics with the ``opentelemetry-api`` package when it is installed
(``pip install "fdbqueue[metrics]"``), as instrumented Python libraries do: it asks the
global meter provider for a meter named ``fdbqueue`` and records to it; the application
chooses the SDK, the exporter (Prometheus, OTLP, ...) and the meter provider. Without the
package, or without a configured SDK, every call here does nothing.

Instruments (each counter carries the attribute ``fdbqueue.queue``, the queue's subspace as
printable text, and for a sharded queue ``fdbqueue.shard``, the shard's number (0 to N - 1),
so that a sum over ``fdbqueue.shard`` is the queue's figure; the transaction counters carry
``fdbqueue.error.code`` instead):

* ``fdbqueue.items.enqueued``: items written into a queue (enqueues, pushes, delayed
  items falling due, requeued dead letters);
* ``fdbqueue.items.delayed``: items enqueued with a delay;
* ``fdbqueue.items.dequeued``: items dequeued or popped;
* ``fdbqueue.items.claimed``: leases granted (redeliveries included);
* ``fdbqueue.items.acknowledged``: leases acknowledged;
* ``fdbqueue.leases.expired``: expired or released leases delivered again;
* ``fdbqueue.items.dead_lettered``: items moved to the dead letters;
* ``fdbqueue.transactions.conflicts``: attempts that failed with 1020 (not committed);
* ``fdbqueue.transactions.retries``: attempts retried, by error code;
* ``fdbqueue.transactions.unknown_results``: commits with an unknown result (1021),
  resolved by receipts;
* ``fdbqueue.wait.duration`` (a histogram, seconds): how long blocking takes and claims
  waited;
* ``fdbqueue.groups.active`` (an up-down counter): message groups made active (a first
  item enqueued) minus those made inactive (no item left, none in a lease): summed over every
  process since the queue was new, the groups with items;
* ``fdbqueue.groups.in_flight`` (an up-down counter): groups whose item went into a lease
  minus those whose lease ended for good: summed likewise, the groups with an item in flight.
* ``fdbqueue.queue.oldest_age`` (an observable gauge, seconds): how long the oldest item of
  each queue registered with :func:`observe_oldest_age` has waited (0 when none waits), read
  when the SDK collects (``Queue.oldest_age``: an upper bound, too large by at most the
  time the queue took to receive 64 items, plus the clock skew between clients). It carries
  ``fdbqueue.queue`` only.

When counted: an operation's counts are kept while its transaction runs and recorded once it
committed (a retried attempt's counts are dropped), when fdbqueue runs the transaction (given
a Database). Given your Transaction, they are recorded when the call returns, since fdbqueue
does not see your commit.

Cost while nothing records: counting is on while OpenTelemetry's global meter provider is an
SDK's (:func:`recording`), off without the ``opentelemetry-api`` package, or while the global
provider is still the API's default (its proxy, which hands out instruments that record
nothing until a provider is set) or its no-op one. While it is off, :func:`add` and
:meth:`Count.add` return at once, keep nothing for the attempt and record nothing: each reads
a module flag, and looks at the global provider (the API's public ``get_meter_provider``)
only when the flag says it may have changed. The hot paths (an enqueue's, a take's, a
claim's and an ack's count) read :data:`may_record` first and make no call at all while it
is False (:func:`record_wait`, after a wait, looks each
time: :func:`recording`). A provider set later is
seen at the next count, without a restart: while the API's proxy is the global provider,
fdbqueue holds one proxy instrument of its own (the oldest-age gauge, made at that look), and
``set_meter_provider`` has the new provider make its real instrument, which starts its
callback (:func:`_provider_set`, the API's generator form) and so sets the flag. Instruments
made before then (the API's proxies) record through the new provider. Once an SDK's provider
was seen, counting stays on (the API lets a process set its provider once). What stays per
attempt either way is :class:`pending`, for :func:`on_commit`'s actions.

Source followed: the OpenTelemetry metrics API for instrumented libraries (a named meter from
the global provider; counters and a histogram; no SDK dependency).
"""

from __future__ import annotations

import contextvars
import importlib.metadata
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fdbqueue._keys import describe_key

__all__ = [
    "COUNTERS",
    "OLDEST_AGE",
    "UP_DOWN_COUNTERS",
    "add",
    "committed",
    "observe_oldest_age",
    "pending",
    "queue_name",
    "record_wait",
    "recording",
]

#: counter key -> (instrument name, unit, description)
COUNTERS: dict[str, tuple[str, str, str]] = {
    "enqueued": ("fdbqueue.items.enqueued", "{item}", "Items written into a queue"),
    "delayed": ("fdbqueue.items.delayed", "{item}", "Items enqueued with a delay"),
    "dequeued": ("fdbqueue.items.dequeued", "{item}", "Items dequeued or popped"),
    "claimed": ("fdbqueue.items.claimed", "{item}", "Leases granted"),
    "acknowledged": ("fdbqueue.items.acknowledged", "{item}", "Leases acknowledged"),
    "expired": (
        "fdbqueue.leases.expired",
        "{lease}",
        "Expired or released leases delivered",
    ),
    "dead_lettered": ("fdbqueue.items.dead_lettered", "{item}", "Items moved to dead letters"),
    "conflicts": ("fdbqueue.transactions.conflicts", "{transaction}", "Attempts that conflicted"),
    "retries": ("fdbqueue.transactions.retries", "{transaction}", "Attempts retried"),
    "unknown_results": (
        "fdbqueue.transactions.unknown_results",
        "{transaction}",
        "Commits with an unknown result, resolved",
    ),
}
WAIT = ("fdbqueue.wait.duration", "s", "Seconds blocking takes and claims waited")
#: up-down counter key -> (instrument name, unit, description): these also count down
UP_DOWN_COUNTERS: dict[str, tuple[str, str, str]] = {
    "groups_active": ("fdbqueue.groups.active", "{group}", "Message groups with items"),
    "groups_in_flight": (
        "fdbqueue.groups.in_flight",
        "{group}",
        "Message groups with an item in a lease",
    ),
}

#: the observable gauge of :func:`observe_oldest_age`: (instrument name, unit, description)
OLDEST_AGE = ("fdbqueue.queue.oldest_age", "s", "Seconds the oldest item of a queue has waited")

_instruments: dict[str, Any] = {}
#: Makes the oldest-age gauge once (:func:`_oldest_age_gauge`).
_gauge_lock = threading.Lock()
#: what the gauge observes: a token -> (database, queue); the gauge is made at the first
#: registration and reads them all at each collection
_observed: dict[int, tuple[Any, Any]] = {}
_tokens = iter(range(1, 1 << 62))
#: counts of the attempt running in this context, recorded once it commits (None: no attempt)
#: What an attempt keeps for its commit: counts ``(key, amount, attributes)``, and actions
#: (log records) to run then (:func:`on_commit`).
Pending = list[tuple[str, int, dict[str, Any]] | Callable[[], None]]

#: The attributes of :func:`add` by the keywords given (a queue's are the same each time),
#: at most :data:`_NAMED_MOST` of them. Shared, never changed: OpenTelemetry copies them.
_NAMED: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
_NAMED_MOST = 4096

#: The counts of the attempt in progress (None outside one): set by :class:`pending`, or by a
#: retry loop itself on its hot path (``counts = []; token = ATTEMPT_COUNTS.set(counts)``,
#: then ``ATTEMPT_COUNTS.reset(token)`` once the attempt ended, committed or not).
ATTEMPT_COUNTS: contextvars.ContextVar[Pending | None] = contextvars.ContextVar(
    "fdbqueue_pending_metrics", default=None
)


#: Whether counts are recorded (:func:`recording`): what :func:`_look` last found.
_recording = False
#: Whether the next count looks at the provider (:func:`_look`): True before the first look,
#: and again once a provider was set since (:func:`_provider_set`).
_look_again = True
#: False once ``opentelemetry-api`` was found missing: then nothing ever records.
_api = True
#: Whether a count may be recorded: :data:`_recording` or :data:`_look_again` (kept equal to
#: that by every change of either). A hot path reads it before it calls :func:`add`, so that
#: while nothing records it calls nothing of this module (pay for what you use).
may_record = True


def _look() -> bool:
    """Look at OpenTelemetry's global meter provider (``get_meter_provider``, public) and set
    :data:`_recording`: True for a provider that records (an SDK's: defined outside the API's
    package), False for the API's default proxy and its no-op provider; without the API,
    False for good. While it is False, the oldest-age gauge is made (once) so that a provider
    set later sets :data:`_look_again` (:func:`_provider_set`). Returns :data:`_recording`."""
    global _recording, _look_again, _api, may_record
    _look_again = False  # first: a provider set from here on sets it again
    try:
        from opentelemetry import metrics
    except ImportError:
        _api = False
        may_record = _recording or _look_again
        return False
    provider = metrics.get_meter_provider()
    # the API's own providers (its default proxy, its no-op one) are defined in its package
    _recording = not type(provider).__module__.startswith(metrics.__name__)
    may_record = _recording or _look_again
    if not _recording:
        _oldest_age_gauge()
    return _recording


def _provider_set() -> Iterator[Iterable[Any]]:
    """A callback of the oldest-age gauge that observes nothing, in the API's generator form
    (it receives the collection's options at each ``yield``): the SDK runs it to its first
    ``yield`` when it makes the gauge's real instrument. For the API's proxy gauge, that is
    when ``set_meter_provider`` is called: so the next count looks at the provider again."""
    global _look_again, may_record
    _look_again = True
    may_record = True
    while True:
        yield ()


def recording() -> bool:
    """Whether fdbqueue records metrics now: True once OpenTelemetry's global meter provider
    is an SDK's, whatever was counted before; False without ``opentelemetry-api`` and while
    the API's default (proxy) or no-op provider is the global one. Cost: nothing once on;
    while it is off, a look at the provider (a call of the API's ``get_meter_provider``)."""
    return _recording or (_api and _look())


def _meter() -> Any:
    try:
        from opentelemetry import metrics
    except ImportError:
        return None
    return metrics.get_meter("fdbqueue", _version())


def _version() -> str:
    """fdbqueue's version as installed (``importlib.metadata``; the package root, which holds
    ``__version__``, is above every layer), or "" when it is not installed."""
    try:
        return importlib.metadata.version("fdbqueue")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _instrument(key: str) -> Any:
    """The OpenTelemetry instrument for ``key`` (created once), or None without the API."""
    if key not in _instruments:
        meter = _meter()
        if meter is None:
            _instruments[key] = None
        elif key == "wait":
            _instruments[key] = meter.create_histogram(WAIT[0], unit=WAIT[1], description=WAIT[2])
        elif key in UP_DOWN_COUNTERS:
            name, unit, description = UP_DOWN_COUNTERS[key]
            _instruments[key] = meter.create_up_down_counter(
                name, unit=unit, description=description
            )
        else:
            name, unit, description = COUNTERS[key]
            _instruments[key] = meter.create_counter(name, unit=unit, description=description)
    return _instruments[key]


def queue_name(prefix: bytes) -> str:
    """The ``fdbqueue.queue`` attribute of a queue: its subspace prefix as a tuple when it is
    one (``('app', 'jobs')``), else as bytes (the tuple it packs)."""
    return describe_key(prefix)


def _record(key: str, amount: int, attributes: dict[str, Any]) -> None:
    instrument = _instrument(key)
    if instrument is not None:
        instrument.add(amount, attributes)


def add(key: str, amount: int = 1, *, at_once: bool = False, **attributes: Any) -> None:
    """Count ``amount`` for the counter ``key`` (of :data:`COUNTERS`, or of
    :data:`UP_DOWN_COUNTERS`, the only ones that take a negative ``amount``); inside an attempt
    (:func:`pending`) once it commits, unless ``at_once`` (what happened to the attempt
    itself: a retry, an unknown result), else now. Attributes are given as keywords:
    ``queue`` becomes ``fdbqueue.queue``, ``shard`` ``fdbqueue.shard``, ``code``
    ``fdbqueue.error.code``."""
    if not (_recording or (_look_again and _look())):
        return
    if amount == 0 or (amount < 0 and key not in UP_DOWN_COUNTERS):
        return
    named = attributes_of(**attributes)
    counts = None if at_once else ATTEMPT_COUNTS.get()
    if counts is None:
        _record(key, amount, named)
    else:
        counts.append((key, amount, named))


def attributes_of(**attributes: Any) -> dict[str, Any]:
    """The OpenTelemetry attributes of :func:`add`'s keywords (``queue`` becomes
    ``fdbqueue.queue``, ...), the same dict each time for the same keywords (never change
    it): pass it to :func:`add_named` on a hot path."""
    given = tuple(attributes.items())
    named = _NAMED.get(given)
    if named is None:
        named = {f"fdbqueue.{'error.code' if k == 'code' else k}": v for k, v in given}
        if len(_NAMED) < _NAMED_MOST:
            _NAMED[given] = named
    return named


class Count:
    """One count a hot path adds again and again (``key``, ``amount``, ``attributes`` as for
    :func:`add`, with a positive ``amount``): its instrument looked up and its attributes
    named once. :meth:`add` counts it as :func:`add` does; calling it records it now."""

    __slots__ = ("amount", "attributes", "instrument")

    def __init__(self, key: str, amount: int = 1, **attributes: Any) -> None:
        self.instrument = _instrument(key)
        self.amount = amount
        self.attributes = attributes_of(**attributes)

    def add(self) -> None:
        """Count it once the attempt in progress commits (:func:`pending`); outside one, now.
        Cost while nothing records (:func:`recording`): a flag read, nothing kept."""
        if not (_recording or (_look_again and _look())):
            return
        counts = ATTEMPT_COUNTS.get()
        if counts is None:
            self()
        else:
            counts.append(self)

    def __call__(self) -> None:
        if self.instrument is not None:
            self.instrument.add(self.amount, self.attributes)


def record_wait(seconds: float, queue: str) -> None:
    """Record how long a blocking take or claim of ``queue`` waited (seconds)."""
    if not recording():
        return
    instrument = _instrument("wait")
    if instrument is not None:
        instrument.record(seconds, {"fdbqueue.queue": queue})


def observe_oldest_age(database: Any, queue: Any) -> Callable[[], None]:
    """Report ``queue``'s oldest item age in the gauge ``fdbqueue.queue.oldest_age``
    (:data:`OLDEST_AGE`) each time the OpenTelemetry SDK collects, until the returned
    function is called.

    Args:
        database: the Database the gauge reads with (one read-only transaction per queue and
            collection).
        queue: a :class:`~fdbqueue.Queue` or :class:`~fdbqueue.PriorityQueue`, or their
            ``fdbqueue.asyncio`` twin (read through its ``sync`` queue: the SDK's callback
            is not a coroutine).

    Returns:
        A function that stops reporting this queue (calling it twice does nothing).

    Raises:
        TypeError: ``queue`` has no ``oldest_age`` method.

    Cost: nothing now; at each collection, ``queue.oldest_age(database)``'s snapshot reads
    (no writes, no conflicts). A queue whose read fails (an unreachable cluster) is left out
    of that collection. Without ``opentelemetry-api``, nothing is ever read.
    """
    target = getattr(queue, "sync", queue)
    if not callable(getattr(target, "oldest_age", None)):
        raise TypeError(f"observe_oldest_age needs a queue, not {queue!r}")
    token = next(_tokens)
    _observed[token] = (database, target)
    _oldest_age_gauge()
    return lambda: _observed.pop(token, None) and None


def _oldest_age_gauge() -> None:
    """Make the gauge ``fdbqueue.queue.oldest_age`` (once; None without the API): its
    callbacks read the queues of :func:`observe_oldest_age` and, once, tell :func:`_look`
    that a provider was set (:func:`_provider_set`)."""
    with _gauge_lock:  # the first counts of several threads may look at once: one gauge
        if "oldest_age" not in _instruments:
            meter = _meter()
            _instruments["oldest_age"] = (
                None
                if meter is None
                else meter.create_observable_gauge(
                    OLDEST_AGE[0],
                    callbacks=[_observe_oldest_ages, _provider_set()],
                    unit=OLDEST_AGE[1],
                    description=OLDEST_AGE[2],
                )
            )


def _observe_oldest_ages(options: Any) -> list[Any]:
    """The gauge's callback: an Observation per registered queue (0 when none waits)."""
    from opentelemetry.metrics import Observation

    observations = []
    for database, queue in list(_observed.values()):
        try:
            age = queue.oldest_age(database)
        except Exception:  # an unreachable cluster: left out of this collection
            continue
        attributes = {"fdbqueue.queue": queue_name(queue.subspace.key())}
        observations.append(Observation(0.0 if age is None else age, attributes))
    return observations


class pending:
    """Keep the counts added inside the block for :func:`committed` (one transaction
    attempt); counts of an attempt that does not commit are dropped with it. (A class, not a
    generator context manager: it runs twice per operation, and costs a third as much.)

    The list it gives stays empty while nothing records (:func:`recording`) and the attempt
    has no :func:`on_commit` action: :func:`committed` then has nothing to do (its callers
    skip it). Cost: a context variable set and reset, whether or not anything records (the
    actions need it)."""

    __slots__ = ("_counts", "_token")

    def __enter__(self) -> Pending:
        self._counts: Pending = []
        self._token = ATTEMPT_COUNTS.set(self._counts)
        return self._counts

    def __exit__(self, *exc_info: object) -> None:
        ATTEMPT_COUNTS.reset(self._token)


def committed(counts: Pending) -> None:
    """Record the counts of an attempt that committed, and run its actions (an empty
    ``counts``, as while nothing records: nothing to do, and callers may skip the call)."""
    for entry in counts:
        if callable(entry):
            entry()
        else:
            key, amount, attributes = entry
            _record(key, amount, attributes)


def on_commit(action: Callable[[], None]) -> None:
    """Run ``action`` (a log record, say) once the attempt in progress (:func:`pending`)
    commits, so that an event is logged once however often its transaction was retried;
    outside an attempt (a caller's own transaction), now."""
    counts = ATTEMPT_COUNTS.get()
    if counts is None:
        action()
    else:
        counts.append(action)
