"""The commands that change a queue's items: ``push``, ``pop``, ``tail`` and ``clear``; and
``pause`` and ``resume``, which stop and restart its consumers."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from fdbqueue._checks import check_packable_int
from fdbqueue._delivery.deduplication import check_dedup_id
from fdbqueue._delivery.delays import MAX_DELAY_SECONDS, check_delay
from fdbqueue._storage.groups import check_group
from fdbqueue.cli._arguments import (
    TUPLE_INTS,
    Count,
    NumberArguments,
    Seconds,
    TupleInt,
    typed,
)
from fdbqueue.cli._context import (
    TAIL_WAIT,
    Context,
    first_line,
    guarded,
    jsonable,
)
from fdbqueue.cli._group import cli, positive_seconds, shared_options
from fdbqueue.codecs import encode_value
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue

F = TypeVar("F", bound=Callable[..., Any])


def write_options(verb: str, takers: str) -> Callable[[F], F]:
    """The options of a command that writes VALUE (``push``, ``submit``), written once:
    VALUE itself, ``--priority``, ``--int``, ``--delay``, ``--dedup-id`` and ``--group``,
    their help naming the command's ``verb`` and who takes what it writes (``takers``)."""
    options = [
        click.argument("value", required=verb != "submit"),
        click.option(
            "--priority",
            type=TupleInt(),
            help="The priority, an integer (priority queues only; required there).",
        ),
        click.option(
            "--int",
            "as_int",
            is_flag=True,
            help=f"{verb.capitalize()} VALUE as an integer (-5 too).",
        ),
        click.option(
            "--delay",
            type=Seconds(f"from 0 to {MAX_DELAY_SECONDS:,}"),
            default=None,
            show_default="none",
            help=f"Seconds before {takers} may take it.",
        ),
        click.option(
            "--dedup-id",
            default=None,
            help=f"{verb.capitalize()} only if no push or submit with this id was accepted within "
            "the queue's dedup window (300 s).",
        ),
        click.option(
            "--group",
            default=None,
            help="The message group (a string): one group's items are taken in the order "
            "written, one at a time under leases, and groups take turns.",
        ),
    ]

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


# -- changing --------------------------------------------------------------------------------


@cli.command(cls=NumberArguments, short_help="Add a value to the queue.")
@write_options("push", "consumers")
@shared_options()
@click.pass_obj
def push(
    context: Context,
    value: str,
    priority: int | None,
    as_int: bool,
    delay: float | None,
    dedup_id: str | None,
    group: str | None,
) -> None:
    """Add VALUE to the queue (a string; bytes with --codec raw; --int for an integer;
    with --codec json, VALUE is parsed as JSON; a negative number needs no "--"). Creates
    the queue. With --dedup-id, a push whose id was seen within the window pushes nothing
    and says so (exit status 0)."""
    queue = context.existing_queue(context.queue(), must_exist=False)
    item = checked_item(queue, value, as_int, context.codec, delay, dedup_id, group)
    check_priority_option(queue, priority)
    if isinstance(queue, PriorityQueue):
        assert priority is not None  # check_priority_option
        pushed = guarded(
            lambda: queue.push(
                context.database(),
                item,
                priority=priority,
                delay=delay,
                dedup_id=dedup_id,
                group=group,
            )
        )
    else:
        pushed = guarded(
            lambda: queue.enqueue(
                context.database(), item, delay=delay, dedup_id=dedup_id, group=group
            )
        )
    if not pushed:
        context.emit(
            {"pushed": None, "seen": item, "dedup_id": dedup_id},
            f"nothing pushed: dedup id {dedup_id!r} was accepted within the window",
        )
        return
    context.emit(
        {"pushed": item, "priority": priority, "delay": delay, "group": group},
        f"pushed {item!r}"
        + (f" to group {group!r}" if group is not None else "")
        + (f", due in {delay:g}s" if delay else ""),
    )


def checked_item(
    queue: Queue[Any] | PriorityQueue[Any],
    value: str,
    as_int: bool,
    codec: str,
    delay: float | None,
    dedup_id: str | None,
    group: str | None,
) -> Any:
    """VALUE as the queue stores it (:func:`parsed_value`), checked with ``--delay``,
    ``--dedup-id`` and ``--group`` before anything is read or written (``push``, ``submit``).

    Raises:
        click.BadParameter, click.UsageError: one of them is refused (exit status 2).
    """
    item = parsed_value(value, as_int, codec)
    if item is None:  # JSON's null: the codec's rule (encode_value) in the user's words
        raise click.BadParameter(
            f"{typed(value)} is JSON null, which a queue cannot store (taking from an empty "
            "queue gives null): give another value",
            param_hint="VALUE",
        )
    return checked_write(queue, item, "VALUE", delay, dedup_id, group)


def checked_write(
    queue: Queue[Any] | PriorityQueue[Any],
    item: Any,
    item_hint: str,
    delay: float | None,
    dedup_id: str | None,
    group: str | None,
) -> Any:
    """``item``, checked as :func:`checked_item` checks VALUE's (``item_hint``: the option
    that gave it), with ``--delay``, ``--dedup-id`` and ``--group``.

    Raises:
        click.BadParameter: one of them is refused (exit status 2).
    """
    for check, what in (
        (lambda: encode_value(queue.codec, item), item_hint),
        (lambda: check_delay(delay), "--delay"),
        (lambda: dedup_id is None or check_dedup_id(dedup_id), "--dedup-id"),
        (lambda: group is None or check_group(group), "--group"),
    ):
        try:
            check()
        except (TypeError, ValueError) as error:
            raise click.BadParameter(first_line(error), param_hint=what) from None
    return item


def check_priority_option(queue: Queue[Any] | PriorityQueue[Any], priority: int | None) -> None:
    """``--priority`` is given for a priority queue, and only for one.

    Raises:
        click.UsageError: it is missing, or given for a Queue (exit status 2).
    """
    if isinstance(queue, PriorityQueue) and priority is None:
        raise click.UsageError("a priority queue needs --priority")
    if not isinstance(queue, PriorityQueue) and priority is not None:
        raise click.UsageError("--priority applies to priority queues (--priority-queue)")


def parsed_value(value: str, as_int: bool, codec: str) -> Any:
    """VALUE as the codec stores it: an int with ``--int``; bytes with the raw codec (the
    argument's bytes as given, UTF-8 or not); a JSON document with the json codec (strict:
    no NaN or Infinity); else the string.

    Raises:
        click.BadParameter, click.UsageError: VALUE is none of those (exit status 2).
    """
    if as_int:
        if codec == "raw":
            raise click.UsageError("--int does not apply to --codec raw (values are bytes)")
        try:
            number = int(value.strip())
        except ValueError:  # not a number, or past Python's 4,300 digits
            raise click.BadParameter(
                f"{typed(value)} is not an integer", param_hint="VALUE"
            ) from None
        if codec == "tuple":
            try:
                check_packable_int(number, "VALUE")
            except ValueError:
                raise click.BadParameter(
                    f"{typed(value)} is out of range for the tuple codec: give {TUPLE_INTS} "
                    "(--codec json stores any)",
                    param_hint="VALUE",
                ) from None
        return number
    if codec == "raw":
        return os.fsencode(value)  # the bytes given, even when they are not UTF-8
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise click.BadParameter(
            f"is not valid UTF-8, which the {codec} codec stores strings as: use --codec raw "
            "for bytes (when creating the queue)",
            param_hint="VALUE",
        ) from None
    if codec != "json":
        return value
    try:
        return json.loads(value, parse_constant=_refuse_constant)
    except ValueError as error:
        raise click.BadParameter(
            f"{typed(value)} is not JSON ({error})", param_hint="VALUE"
        ) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON: JSON has no NaN or infinity")


MAX_OPTION = click.option(
    "--max", "max_end", is_flag=True, help="From the highest priority (priority queues only)."
)


def check_max(queue: Queue[Any] | PriorityQueue[Any], max_end: bool) -> None:
    if max_end and not isinstance(queue, PriorityQueue):
        raise click.UsageError("--max applies to priority queues (--priority-queue)")


@cli.command(short_help="Remove and show up to N items.")
@click.option("-n", "--limit", "count", type=Count(1), default=1, help="At most N items.")
@MAX_OPTION
@shared_options()
@click.pass_obj
def pop(context: Context, count: int, max_end: bool) -> None:
    """Remove and show up to N items ("(empty)" when there is none: exit status 0)."""
    queue = context.queue()
    check_max(queue, max_end)
    context.existing_queue(queue)

    def take() -> list[Any]:
        db = context.database()
        if isinstance(queue, Queue):
            return queue.dequeue_many(db, count)
        taken = []
        for _ in range(count):
            value = queue.pop(db, max=max_end)
            if value is None:
                break
            taken.append(value)
        return taken

    values = guarded(take)
    context.emit(values, "\n".join(repr(value) for value in values) or "(empty)")


@cli.command(short_help="Remove and print items as they arrive.")
@click.option(
    "-n",
    "--limit",
    "count",
    type=Count(1),
    default=None,
    show_default="no limit",
    help="Stop after N items.",
)
@click.option(
    "--idle-timeout",
    type=Seconds("above 0"),
    default=None,
    callback=positive_seconds,
    show_default="wait forever",
    help="Stop after S seconds without an item.",
)
@MAX_OPTION
@shared_options()
@click.pass_obj
def tail(context: Context, count: int | None, idle_timeout: float | None, max_end: bool) -> None:
    """Remove items as they arrive and print each (a blocking dequeue: a watch, no
    polling), until Ctrl-C (exit status 0), -n items or --idle-timeout. A queue not created
    yet is waited on, as work does. With --json, one JSON document per line. An item taken
    as Ctrl-C arrives may be lost; use "work" for at-least-once processing."""
    queue = context.queue()
    check_max(queue, max_end)
    context.existing_queue(queue, must_exist=False)
    database = context.database()

    def take(wait: float) -> Any:
        if isinstance(queue, Queue):
            return queue.dequeue(database, block=True, timeout=wait)
        return queue.pop(database, max=max_end, block=True, timeout=wait)

    taken = 0
    try:
        idle_until = None if idle_timeout is None else time.monotonic() + idle_timeout
        while count is None or taken < count:
            wait = (
                TAIL_WAIT if idle_until is None else min(TAIL_WAIT, idle_until - time.monotonic())
            )
            if wait <= 0:
                break
            value = guarded(functools.partial(take, wait))
            if value is None:
                continue
            taken += 1
            click.echo(json.dumps(jsonable(value)) if context.as_json else repr(value))
            if idle_timeout is not None:
                idle_until = time.monotonic() + idle_timeout
    except KeyboardInterrupt:
        pass  # Ctrl-C: the way to stop; exit status 0


@cli.command(short_help="Remove everything in the queue (needs --yes).")
@click.option("--yes", is_flag=True, help="Confirm: really remove every item and all metadata.")
@shared_options()
@click.pass_obj
def clear(context: Context, yes: bool) -> None:
    """Remove every item, lease, dead letter and counter of the queue."""
    queue = context.existing_queue(context.queue(), must_exist=False)
    if not yes:
        raise click.ClickException("clear removes everything in the queue: add --yes to do it")
    guarded(lambda: queue.clear(context.database()))
    context.emit({"cleared": True}, "cleared")


@cli.command(short_help="Pause the queue's consumers: takes and claims find nothing.")
@shared_options()
@click.pass_obj
def pause(context: Context) -> None:
    """Pause the queue's consumers: until "resume", every take and claim (pop, tail, work,
    and every program's dequeue, pop, claim and consumer session) finds nothing, and blocked
    ones wait; pushes go on. Says whether it changed anything (a paused queue stays so)."""
    queue = context.existing_queue(context.queue())
    changed = guarded(lambda: queue.pause(context.database()))
    context.emit({"paused": True, "changed": changed}, "paused" if changed else "paused already")


@cli.command(short_help="Resume a paused queue's consumers.")
@shared_options()
@click.pass_obj
def resume(context: Context) -> None:
    """Let the consumers of a paused queue take again, and wake the blocked ones. Says
    whether it changed anything (a queue not paused stays so)."""
    queue = context.existing_queue(context.queue())
    changed = guarded(lambda: queue.resume(context.database()))
    context.emit({"paused": False, "changed": changed}, "resumed" if changed else "not paused")
