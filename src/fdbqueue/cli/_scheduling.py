"""The ``schedule`` commands: periodic jobs that running worker loops enqueue
(:mod:`fdbqueue._delivery.schedules`)::

    fdbqueue schedule add NAME VALUE (--every S | --cron EXPR) [--group G] [--priority P]
    fdbqueue schedule list [--json]
    fdbqueue schedule remove NAME
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import click

from fdbqueue._delivery.schedules import ScheduleInfo, check_name, check_timing
from fdbqueue._storage.groups import check_group
from fdbqueue._wording import plural
from fdbqueue.cli._arguments import NumberArguments, Seconds, TupleInt
from fdbqueue.cli._changing import parsed_value
from fdbqueue.cli._context import Context, first_line, guarded
from fdbqueue.cli._group import cli, shared_options
from fdbqueue.codecs import encode_value
from fdbqueue.priority import PriorityQueue


@cli.group(short_help="Periodic jobs: add, list or remove schedules.")
def schedule() -> None:
    """Periodic jobs: a schedule enqueues its VALUE every S seconds or at the times of a cron
    expression (UTC), each due time once, while any worker loop ("fdbqueue work", or
    queue.work in a program) works on the queue."""


@schedule.command(cls=NumberArguments, short_help="Add (or replace) a schedule.")
@click.argument("name")
@click.argument("value")
@click.option(
    "--every",
    type=Seconds("of at least 0.001"),
    default=None,
    help="Seconds between runs (the first one that long from now).",
)
@click.option(
    "--cron",
    default=None,
    help='A 5-field cron expression, in UTC: "minute hour day-of-month month day-of-week".',
)
@click.option("--group", default=None, help="The runs' message group (a string).")
@click.option(
    "--priority",
    type=TupleInt(),
    help="The runs' priority, an integer (priority queues only; required there).",
)
@click.option("--int", "as_int", is_flag=True, help="VALUE is an integer (-5 too).")
@shared_options()
@click.pass_obj
def add(
    context: Context,
    name: str,
    value: str,
    every: float | None,
    cron: str | None,
    group: str | None,
    priority: int | None,
    as_int: bool,
) -> None:
    """Schedule VALUE (as "push" reads it) under NAME: every --every seconds or at the
    times of --cron (exactly one). A NAME scheduled already is replaced (its next due time
    kept when its timing is the same). Creates the queue."""
    queue = context.existing_queue(context.queue(), must_exist=False)
    item = parsed_value(value, as_int, context.codec)
    checks: list[tuple[Callable[[], object], str]] = [
        (lambda: check_name(name), "NAME"),
        (lambda: encode_value(queue.codec, item), "VALUE"),
        (lambda: group is None or check_group(group), "--group"),
    ]
    for check, what in checks:
        try:  # checked before anything is read or written
            check()
        except (TypeError, ValueError) as error:
            raise click.BadParameter(first_line(error), param_hint=what) from None
    try:
        check_timing(every, cron)
    except (TypeError, ValueError) as error:
        message = first_line(error).replace("every= or cron=", "--every or --cron")
        raise click.UsageError(message) from None
    database = context.database()
    if isinstance(queue, PriorityQueue):
        if priority is None:
            raise click.UsageError("a priority queue needs --priority")
        due = guarded(
            lambda: queue.schedule(
                database, name, item, priority=priority, every=every, cron=cron, group=group
            )
        )
    else:
        if priority is not None:
            raise click.UsageError("--priority applies to priority queues (--priority-queue)")
        due = guarded(
            lambda: queue.schedule(database, name, item, every=every, cron=cron, group=group)
        )
    timing = f"every {every:g}s" if every is not None else f"at {cron!r} (UTC)"
    context.emit(
        {"scheduled": name, "value": item, "every": every, "cron": cron, "next_due": due},
        f"scheduled {name!r}: {item!r} {timing}, next due {moment(due)}",
    )


@schedule.command("list", short_help="List the schedules.")
@shared_options()
@click.pass_obj
def list_schedules(context: Context) -> None:
    """List the schedules, by name: timing, next due time and last run (UTC), runs
    enqueued, group, priority and value."""
    queue = context.existing_queue(context.queue())
    found: list[ScheduleInfo] = guarded(lambda: queue.schedules(context.database()))
    documents = [dataclasses.asdict(info) for info in found]
    lines = [
        f"{info.name}  "
        + (f"every {info.every:g}s" if info.every is not None else f"cron {info.cron!r}")
        + f"  next {moment(info.next_due)}  last {moment(info.last_run)}"
        + f"  {plural(info.runs, 'run')}"
        + (f"  group {info.group!r}" if info.group is not None else "")
        + (f"  priority {info.priority}" if info.priority is not None else "")
        + f"  value {info.value!r}"
        for info in found
    ]
    context.emit(documents, "\n".join(lines) or "(no schedules)")


@schedule.command(short_help="Remove a schedule.")
@click.argument("name")
@shared_options()
@click.pass_obj
def remove(context: Context, name: str) -> None:
    """Remove the schedule NAME (runs enqueued already stay); an error when there is none."""
    try:
        check_name(name)
    except (TypeError, ValueError) as error:
        raise click.BadParameter(first_line(error), param_hint="NAME") from None
    queue = context.existing_queue(context.queue())
    if not guarded(lambda: queue.unschedule(context.database(), name)):
        raise click.ClickException(f"{context.queue_name()} has no schedule named {name!r}")
    context.emit({"removed": name}, f"removed schedule {name!r}")


def moment(seconds: Any) -> str:
    """Wall-clock seconds since the epoch as a UTC time to the second (``-`` for None)."""
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
