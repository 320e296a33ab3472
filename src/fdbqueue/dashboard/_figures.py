"""What the dashboard shows and how: samples of each queue's figures (:class:`Sampler`), the
rates (enqueues, takes, net) and the depth history taken from successive samples, values
shown in a table cell (:func:`shortened`: a JSON queue's as JSON) and the depth plot drawn as
inline SVG (:func:`depth_svg`)."""

from __future__ import annotations

import collections
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from fdbqueue._storage.store import anything_stored
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue.codecs import Undecodable, codec_name
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue

__all__ = [
    "HISTORY_SECONDS",
    "Row",
    "Sample",
    "Sampler",
    "depth_svg",
    "shortened",
]

#: How far back the depth history (and its plot) reaches, in seconds.
HISTORY_SECONDS = 300.0
#: The longest text a table cell shows of a value or reason; longer ones end with an ellipsis.
SHORTENED = 120
#: The shortest span, in seconds, the rates are measured over by default (see
#: :meth:`Sampler.row`).
RATE_SECONDS = 1.0

AnyQueue = Queue[Any] | PriorityQueue[Any]


@dataclasses.dataclass(frozen=True)
class Sample:
    """One queue's figures at one moment (from :meth:`~fdbqueue.Queue.info`)."""

    at: float
    size: int
    in_flight: int
    delayed: int
    dead_letters: int
    groups: int
    oldest_age: float | None
    shards: tuple[dict[str, Any], ...]
    #: the enqueue counter (:attr:`fdbqueue.QueueInfo.enqueued`)
    enqueued: int
    #: whether anything is stored under the queue's prefix (False: the queue does not
    #: exist, a mistyped name usually; its figures are then all 0)
    exists: bool = True
    #: whether the queue's consumers are paused (:attr:`fdbqueue.QueueInfo.paused`)
    paused: bool = False
    #: whether its rate limit holds jobs back (:attr:`fdbqueue.QueueInfo.rate_limited`)
    rate_limited: bool = False


@dataclasses.dataclass(frozen=True)
class Row:
    """What the overview shows of one queue: its last sample and the rates since the one
    before, in items per second (None until there are two samples, and the enqueue and take
    rates None over an interval in which the queue was cleared; ``error`` when reading it
    failed). See :meth:`Sampler.row`."""

    name: str
    kind: str
    codec: str
    shard_count: int
    sample: Sample | None
    growth: float | None
    enqueue_rate: float | None = None
    take_rate: float | None = None
    error: str | None = None

    @property
    def missing(self) -> bool:
        """Whether the last sample found nothing stored under the queue's prefix."""
        return self.sample is not None and not self.sample.exists


def sample_of(info: Any, at: float, exists: bool = True) -> Sample:
    """A :class:`Sample` of ``info`` (a :class:`~fdbqueue.QueueInfo`) read at ``at``, of a
    queue that ``exists`` (:func:`~fdbqueue._storage.store.anything_stored`).

    ``oldest_age`` (the queue's and each shard's) is QueueInfo's ``oldest_age``."""
    per_shard = tuple(
        {
            "size": shard.size,
            "in_flight": shard.leases_in_flight,
            "delayed": shard.delayed,
            "dead_letters": shard.dead_letters,
            "groups": shard.groups,
            "oldest_age": shard.oldest_age,
            "enqueued": shard.enqueued,
        }
        for shard in info.shards
    )
    return Sample(
        at=at,
        size=info.size,
        in_flight=info.leases_in_flight,
        delayed=info.delayed,
        dead_letters=info.dead_letters,
        groups=info.groups,
        oldest_age=info.oldest_age,
        shards=per_shard,
        enqueued=info.enqueued,
        exists=exists,
        paused=info.paused,
        rate_limited=info.rate_limited,
    )


class Sampler:
    """Samples of every queue's figures, kept for :data:`HISTORY_SECONDS`.

    Args:
        database: the database the queues live in.
        queues: display names to queues.
        clock: seconds (``time.monotonic``; tests give their own).
        rate_seconds: the shortest span the rates are measured over (:meth:`row`).
    """

    def __init__(
        self,
        database: Any,
        queues: Mapping[str, AnyQueue],
        clock: Callable[[], float] = time.monotonic,
        rate_seconds: float = RATE_SECONDS,
    ) -> None:
        self.database = database
        self.queues = dict(queues)
        self.clock = clock
        self.rate_seconds = rate_seconds
        self.history: dict[str, collections.deque[Sample]] = {
            name: collections.deque() for name in self.queues
        }
        self.errors: dict[str, str] = {}
        self.lock = threading.Lock()

    def sample(self, name: str) -> Sample | None:
        """Read queue ``name``'s figures now and whether it exists (one transaction:
        :meth:`~fdbqueue.Queue.info` and :func:`~fdbqueue._storage.store.anything_stored`)
        and keep them; None when reading failed (the error is kept for :meth:`rows`).

        Raises:
            KeyError: no queue of that name.
        """
        queue = self.queues[name]
        try:
            info, exists = run_in_retry_loop(
                self.database, lambda tr: (queue.info(tr), anything_stored(tr, queue.subspace))
            )
        except Exception as error:  # a wrong type, a database error: shown in its row
            with self.lock:
                self.errors[name] = f"{type(error).__name__}: {error}"
            return None
        taken = sample_of(info, self.clock(), exists)
        with self.lock:
            self.errors.pop(name, None)
            kept = self.history[name]
            kept.append(taken)
            while kept and kept[0].at < taken.at - HISTORY_SECONDS:
                kept.popleft()
        return taken

    def sample_all(self, fresher_than: float = 0.0) -> None:
        """Sample every queue whose last sample is older than ``fresher_than`` seconds (0:
        every queue)."""
        now = self.clock()
        for name in self.queues:
            last = self.last(name)
            if last is None or now - last.at >= fresher_than:
                self.sample(name)

    def last(self, name: str) -> Sample | None:
        """Queue ``name``'s latest sample, or None."""
        with self.lock:
            kept = self.history[name]
            return kept[-1] if kept else None

    def samples(self, name: str) -> list[Sample]:
        """Queue ``name``'s samples of the last :data:`HISTORY_SECONDS`, oldest first."""
        with self.lock:
            return list(self.history[name])

    def row(self, name: str) -> Row:
        """What the overview shows of queue ``name``: its last sample and three rates in
        items per second between its last sample and the latest one taken at least
        ``rate_seconds`` before it (None before there is such a sample; so two samples
        taken a moment apart, as an action's and the page it leads to, do not make a rate
        of that moment alone):

        * ``enqueue_rate``: items enqueued (pushed, requeued from the dead letters), from the
          enqueue counter (:attr:`~fdbqueue.QueueInfo.enqueued`);
        * ``take_rate``: items that left the queue (dequeued or popped, acknowledged,
          dead-lettered): those enqueued minus the change of the items it holds (ready, in
          flight and delayed, :func:`held`). A claimed item leaves when its lease ends, not
          when claimed; a release or a move between shards is no take;
        * ``growth``: the change of the items it holds, the enqueue rate minus the take rate.

        A clear (:meth:`~fdbqueue.Queue.clear`) sets the enqueue counter back to 0: over an
        interval in which it went back, the enqueue and take rates are None (a clear
        followed by more enqueues than the counter held before goes unseen: its rates count
        the items cleared as taken).
        """
        queue = self.queues[name]
        with self.lock:
            kept = list(self.history[name])
            error = self.errors.get(name)
        last = kept[-1] if kept else None
        before = None
        if last is not None:
            spanned = (s for s in reversed(kept) if last.at - s.at >= self.rate_seconds)
            before = next(spanned, None)
        growth = enqueue_rate = take_rate = None
        if last is not None and before is not None and last.at > before.at:
            seconds = last.at - before.at
            gained = held(last) - held(before)
            growth = gained / seconds
            enqueued = last.enqueued - before.enqueued
            if enqueued >= 0:  # else the queue was cleared in between
                enqueue_rate = enqueued / seconds
                take_rate = (enqueued - gained) / seconds
        return Row(
            name=name,
            kind=type(queue).__name__,
            codec=codec_name(queue.codec),
            shard_count=queue.shards,
            sample=last,
            growth=growth,
            enqueue_rate=enqueue_rate,
            take_rate=take_rate,
            error=error,
        )

    def rows(self) -> list[Row]:
        """:meth:`row` of every queue, in display-name order."""
        return [self.row(name) for name in sorted(self.queues)]


def held(sample: Sample) -> int:
    """The items a sample counts in the queue: ready, in flight and delayed."""
    return sample.size + sample.in_flight + sample.delayed


def shortened(value: Any, codec: str | None = None, length: int = SHORTENED) -> str:
    """``value`` as a table cell shows it: a value of a queue whose codec is ``"json"`` as
    JSON (``{"ok": true}``), other strings as they are, bytes and other values as Python shows
    them, an undecodable value as its error; cut to ``length`` characters with an ellipsis
    (the full length said). Not escaped: the templates escape it."""
    if isinstance(value, Undecodable):
        text = f"(undecodable: {value.error}) {value.raw!r}"
    elif codec == "json":
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, str):
        text = value
    else:
        text = repr(value)
    if len(text) <= length:
        return text
    return f"{text[:length]}… ({len(text):,} characters)"


def depth_svg(samples: list[Sample], width: int = 640, height: int = 160) -> str:
    """An inline SVG line plot of the items ready (size), in flight and dead over the
    samples' time span, with the last value labelled; an empty frame with a note for fewer
    than two samples. Built from numbers only, so it needs no escaping."""
    pad_left, pad_bottom, pad_top = 48, 20, 10
    inner_w, inner_h = width - pad_left - 8, height - pad_bottom - pad_top
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="depth" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
        f'<rect x="{pad_left}" y="{pad_top}" width="{inner_w}" height="{inner_h}" '
        'fill="none" stroke="#ccc"/>',
    ]
    if len(samples) < 2:
        parts.append(
            f'<text x="{pad_left + 10}" y="{pad_top + inner_h / 2}" fill="#888">'
            "collecting samples…</text></svg>"
        )
        return "".join(parts)
    start, end = samples[0].at, samples[-1].at
    span = max(end - start, 1e-9)
    series = [
        ("size", "#1f77b4", [s.size for s in samples]),
        ("in flight", "#ff7f0e", [s.in_flight for s in samples]),
        ("dead letters", "#d62728", [s.dead_letters for s in samples]),
    ]
    top = max(1, *(max(values) for _label, _colour, values in series))
    parts.append(f'<text x="{pad_left - 4}" y="{pad_top + 10}" text-anchor="end">{top}</text>')
    parts.append(f'<text x="{pad_left - 4}" y="{pad_top + inner_h}" text-anchor="end">0</text>')
    parts.append(
        f'<text x="{pad_left}" y="{height - 4}">{span:.0f} s ago</text>'
        f'<text x="{pad_left + inner_w}" y="{height - 4}" text-anchor="end">now</text>'
    )
    for number, (label, colour, values) in enumerate(series):
        points = " ".join(
            f"{pad_left + (s.at - start) / span * inner_w:.1f},"
            f"{pad_top + inner_h - value / top * inner_h:.1f}"
            for s, value in zip(samples, values, strict=True)
        )
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>'
        )
        parts.append(
            f'<text x="{pad_left + 8 + number * 150}" y="{pad_top + 14}" fill="{colour}">'
            f"{label} {values[-1]}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
