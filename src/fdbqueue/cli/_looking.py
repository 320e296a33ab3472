"""The commands that look inside a queue: ``info``, ``peek``, ``leases``, ``dead-letters``
(which also requeues or purges them) and ``workers``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from fdbqueue import _clock
from fdbqueue._delivery.leases import Lease
from fdbqueue._delivery.workers import WorkerInfo
from fdbqueue._storage.dead_letters import DeadLetter
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue._wording import plural
from fdbqueue.cli._arguments import Count
from fdbqueue.cli._context import (
    EVERYTHING,
    Context,
    guarded,
)
from fdbqueue.cli._group import cli, shared_options

# -- looking ---------------------------------------------------------------------------------


def given(name: str) -> bool:
    """Whether the current command's option ``name`` was given on its command line."""
    return click.get_current_context().get_parameter_source(name) not in (
        None,
        ParameterSource.DEFAULT,
    )


def chosen_limit(limit: int | None, everything: bool, default: int) -> int | None:
    """The limit a listing uses: None with ``--all``, else ``-n`` (``default`` when absent).

    Raises:
        click.UsageError: both ``-n`` and ``--all``.
    """
    if everything:
        if limit is not None:
            raise click.UsageError("give -n/--limit or --all, not both")
        return None
    return default if limit is None else limit


def listed(read: Callable[[int | None], list[Any]], limit: int | None) -> tuple[list[Any], bool]:
    """Up to ``limit`` results of ``read`` (None: all), and whether more exist (it reads
    one more than ``limit`` to tell, up to :data:`EVERYTHING`)."""
    if limit is None:
        return guarded(lambda: read(None)), False
    found = guarded(lambda: read(min(limit + 1, EVERYTHING)))
    return found[:limit], len(found) > limit


def note_more(shown: int, what: str) -> None:
    """Say on stderr that a listing stopped at its limit (stdout keeps one JSON document)."""
    click.echo(
        f"(the first {plural(shown, what)}; more exist: -n N for more, --all for all)", err=True
    )


def limit_option(default: str) -> Callable[[Any], Any]:
    return click.option(
        "-n",
        "--limit",
        type=Count(0),
        default=None,
        help=f"At most N. Default: {default}.",
    )


ALL_OPTION = click.option(
    "--all",
    "everything",
    is_flag=True,
    help="All of them, without a limit (read a page of 1,000 per transaction).",
)


def shown(fact: Any) -> str:
    """A fact of ``info`` as text: numbers and names as they are, ``-`` for none, other
    values (an oldest item) as Python shows them."""
    if fact is None:
        return "-"
    if isinstance(fact, (int, str)) and not isinstance(fact, bool):
        return str(fact)
    return repr(fact)


@cli.command(short_help="Size, oldest item and age, leases, dead letters, delayed items.")
@shared_options()
@click.pass_obj
def info(context: Context) -> None:
    """Size, oldest item and its age, requests in line, leases (in flight, expired), dead
    letters, delayed items and items enqueued (since the queue was created or cleared), and
    whether its consumers are paused ("pause", "resume"), read at one read version.

    The oldest age is in seconds, an upper bound: too large by at most the time the queue
    (each shard) took to receive 64 items, plus clock skew between clients.

    The counts are exact: info reads every lease, dead letter, delayed and request record
    (not their values), so it takes longer on a queue with millions of them.
    """
    queue = context.existing_queue(context.queue())
    facts = dataclasses.asdict(guarded(lambda: queue.info(context.database())))
    shards = facts.pop("shards")  # empty for a queue of one shard
    facts["codec"] = context.record(queue.subspace).codec  # None: none recorded
    width = max(len(name) for name in facts)
    lines = [
        f"{name.replace('_', ' '):<{width}}  {shown_fact(name, facts[name])}" for name in facts
    ]
    for number, shard in enumerate(shards):  # each shard's figures, one line each
        figures = (
            f"{name.replace('_', ' ')} {shown_fact(name, shard[name])}" for name in SHARD_FIGURES
        )
        lines.append(f"{f'shard {number}':<{width}}  {', '.join(figures)}")
    if shards:
        facts["shards"] = [{name: shard[name] for name in SHARD_FIGURES} for shard in shards]
    context.emit(facts, "\n".join(lines))


#: What ``info`` shows of each shard of a sharded queue.
SHARD_FIGURES = (
    "size",
    "oldest_age",
    "leases_in_flight",
    "dead_letters",
    "delayed",
    "requests_in_line",
    "enqueued",
)


def shown_fact(name: str, fact: Any) -> str:
    """A fact of ``info`` as text (:func:`shown`); the age of the oldest item in seconds,
    to a tenth (``12.3 s``); whether the queue is paused, or rate-limited, as ``yes`` or
    ``no``."""
    if name == "oldest_age" and isinstance(fact, float):
        return f"{fact:.1f} s"
    if name in ("paused", "rate_limited"):
        return "yes" if fact else "no"
    return shown(fact)


@cli.command(short_help="Show the next items without removing them.")
@limit_option("10")
@ALL_OPTION
@shared_options()
@click.pass_obj
def peek(context: Context, limit: int | None, everything: bool) -> None:
    """Show the next items without removing them (for a priority queue, in pop_min order)."""
    wanted = chosen_limit(limit, everything, 10)
    queue = context.existing_queue(context.queue())
    values, more = listed(lambda n: queue.peek_many(context.database(), n), wanted)
    context.emit(values, "\n".join(repr(value) for value in values) or "(empty)")
    if more:
        note_more(len(values), "item")


def lease_document(lease: Lease[Any], read_version: int) -> dict[str, Any]:
    return {
        "id": lease.id,
        "deliveries": lease.deliveries,
        "expiry_version": lease.expiry_version,
        "expiry_time": lease.expiry_time,
        "released": lease.released,
        "expired": lease.expired(read_version),
        "state": lease.state(read_version),
        "described": lease.describe(read_version),
        "seconds_left": round(lease.seconds_left(read_version), 3),
        "value": lease.value,
        "group": lease.group,
    }


def lease_line(document: dict[str, Any]) -> str:
    state = document["described"]
    group = "" if document["group"] is None else f"  (group {document['group']!r})"
    return (
        f"{document['id']}  {document['deliveries']:>3}  {state:<20}  {document['value']!r}{group}"
    )


@cli.command(short_help="List leases in flight, with seconds left.")
@limit_option("100")
@ALL_OPTION
@shared_options()
@click.pass_obj
def leases(context: Context, limit: int | None, everything: bool) -> None:
    """List leases in flight, soonest expiry first: id, deliveries, seconds left (from a
    read version taken just before), value. Leases whose items wait (expired, or released)
    are listed too, as "waiting": the next takes and claims take them first; items released
    with a delay (a worker's retry) as "delayed" until it is over."""
    wanted = chosen_limit(limit, everything, 100)
    queue = context.existing_queue(context.queue())
    database = context.database()
    version = guarded(lambda: run_in_retry_loop(database, lambda tr: tr.get_read_version().wait()))
    found, more = listed(lambda n: queue.leases(database, n), wanted)
    documents = [lease_document(lease, version) for lease in found]
    header = f"{'id':<32}  {'del':>3}  {'expiry':<20}  value"
    context.emit(
        {"read_version": version, "leases": documents},
        "\n".join([header, *map(lease_line, documents)]) if documents else "(no leases)",
    )
    if more:
        note_more(len(found), "lease")


def dead_letter_document(letter: DeadLetter[Any]) -> dict[str, Any]:
    return {
        "id": letter.id,
        "deliveries": letter.deliveries,
        "reason": letter.reason,
        "value": letter.value,
    }


@cli.command("dead-letters", short_help="List, requeue or purge dead letters.")
@limit_option("list 100; --requeue and --purge: all")
@ALL_OPTION
@click.option(
    "--requeue", is_flag=True, help="Enqueue them again at the back of the queue, oldest first."
)
@click.option(
    "--purge", is_flag=True, help="Remove them for good, with their values (needs --yes)."
)
@click.option("--yes", is_flag=True, help="Confirm --purge.")
@shared_options()
@click.pass_obj
def dead_letters(
    context: Context,
    limit: int | None,
    everything: bool,
    requeue: bool,
    purge: bool,
    yes: bool,
) -> None:
    """List dead letters, oldest first (id, deliveries, reason, value); or requeue them, or
    purge them. Each requeue or purge transaction takes effect exactly once."""
    if requeue and purge:
        raise click.UsageError("give --requeue or --purge, not both")
    if yes and not purge:
        raise click.UsageError("--yes confirms --purge")
    acting = requeue or purge
    wanted = chosen_limit(limit, everything, EVERYTHING if acting else 100)
    queue = context.existing_queue(context.queue())
    database = context.database()
    if purge:
        if not yes:
            raise click.ClickException("--purge removes dead letters for good: add --yes to do it")
        purged = guarded(lambda: queue.purge_dead_letters(database, wanted))
        context.emit({"purged": purged}, f"purged {plural(purged, 'dead letter')}")
        return
    if requeue:
        count = EVERYTHING if wanted is None else wanted
        requeued = guarded(lambda: queue.requeue_dead_letters(database, count))
        context.emit({"requeued": requeued}, f"requeued {plural(requeued, 'dead letter')}")
        return
    found, more = listed(lambda n: queue.dead_letters(database, n), wanted)
    documents = [dead_letter_document(letter) for letter in found]
    lines = [f"{d['id']}  {d['deliveries']:>3}  {d['reason']}  {d['value']!r}" for d in documents]
    header = f"{'id':<32}  {'del':>3}  reason  value"
    context.emit(documents, "\n".join([header, *lines]) if lines else "(no dead letters)")
    if more:
        note_more(len(found), "dead letter")


def worker_line(info: WorkerInfo, now: float, host_width: int) -> str:
    """One worker of ``workers`` as a line: id, host, pid, seconds since it started and since
    its last beat, jobs done, the ids of its jobs running (``-``: none); then, if it has
    abandoned handlers, a second line, indented: ``abandoned past the time limit, still
    running:`` and their job ids."""
    up, seen = f"{now - info.started_at:.1f} s", f"{now - info.last_seen:.1f} s"
    running = " ".join(info.running) or "-"
    line = (
        f"{info.id}  {info.host:<{host_width}}  {info.pid:>7}  {up:>9}  {seen:>7}  "
        f"{info.jobs_done:>6}  {running}"
    )
    if info.abandoned:
        line += "\n  abandoned past the time limit, still running: " + " ".join(info.abandoned)
    return line


@cli.command(short_help="List the worker loops working on the queue now.")
@shared_options()
@click.pass_obj
def workers(context: Context) -> None:
    """List the worker loops working on the queue now, from any host (fdbqueue work, and
    Queue.work in applications): id, host, pid, seconds since it started ("up") and since
    its last heartbeat ("seen"), jobs done, and the ids of the jobs it is running (as of its
    last heartbeat, every 5 seconds). A loop with handlers abandoned past their time limit
    and still running gets a second line listing their job ids (while they hold every one of
    its slots it runs nothing). A loop whose heartbeat lapsed (15 seconds: its process died)
    is not listed. With --json: a list of {id, host, pid, started_at, jobs_done, running,
    last_seen, abandoned}, times in seconds since the epoch."""
    queue = context.existing_queue(context.queue())
    found = guarded(lambda: queue.workers(context.database()))
    now = _clock.now()
    width = max([len("host"), *(len(info.host) for info in found)])
    header = (
        f"{'id':<32}  {'host':<{width}}  {'pid':>7}  {'up':>9}  {'seen':>7}  {'done':>6}  running"
    )
    lines = [header, *(worker_line(info, now, width) for info in found)]
    context.emit(
        [dataclasses.asdict(info) for info in found],
        "\n".join(lines) if found else "(no workers)",
    )
