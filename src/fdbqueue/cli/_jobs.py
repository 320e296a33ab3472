"""The job commands: ``submit`` a value as a job, look at one (``job``, which can wait for its
result) or list them (``jobs``), and ``cancel`` one (:meth:`fdbqueue.Queue.submit`)::

    fdbqueue submit VALUE [--int] [--delay S] [--group G] [--dedup-id ID] [--priority P]
    fdbqueue job ID [--wait [--wait-timeout S]]
    fdbqueue jobs [--state STATE] [-n N]
    fdbqueue cancel ID

A job id is the 32 hexadecimal digits ``submit`` prints. A malformed id, or the id of
another queue's job, is a usage error (exit status 2); an id the queue does not know (never
submitted, or cleared ``result_ttl`` seconds after it finished) is exit status 1.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TypeVar

import click

from fdbqueue import _clock
from fdbqueue._queues.tasks import task_call
from fdbqueue._storage.job_records import STATES, JobOptions
from fdbqueue._storage.jobs import JobInfo
from fdbqueue.cli._arguments import Count, NumberArguments, Seconds
from fdbqueue.cli._changing import (
    check_priority_option,
    checked_item,
    checked_write,
    write_options,
)
from fdbqueue.cli._context import EVERYTHING, TAIL_WAIT, Context, first_line, guarded
from fdbqueue.cli._group import cli, shared_options
from fdbqueue.cli._looking import note_more
from fdbqueue.errors import JobFailedError, ResultNotKeptError
from fdbqueue.priority import PriorityQueue

T = TypeVar("T")


def with_job_id(call: Callable[[], T]) -> T:
    """``call()`` (a library call given the ID argument): a bad id (not 32 hexadecimal
    digits, or another queue's job) is a one-line usage error (exit status 2), a database
    error one line too (:func:`guarded`)."""

    def checked() -> T:
        try:
            return call()
        except (TypeError, ValueError) as error:
            raise click.BadParameter(first_line(error), param_hint="ID") from None

    result: T = guarded(checked)
    return result


def unknown_job(context: Context, job_id: str) -> click.ClickException:
    """The error for an id the queue does not know (exit status 1)."""
    return click.ClickException(
        f"{context.queue_name()} has no job {job_id}: never submitted, or cleared result_ttl "
        "seconds (a day by default) after it finished"
    )


# -- how a job is shown --------------------------------------------------------------------


def moment(seconds: float | None, now: float) -> str:
    """Wall-clock seconds since the epoch as ISO-8601 in UTC, to the millisecond, and how
    long ago (or how far ahead) that is: ``2025-05-01T12:00:00.123+00:00 (3.2 s ago)``;
    ``-`` for None."""
    if seconds is None:
        return "-"
    stamp = datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="milliseconds")
    return f"{stamp} ({relative(seconds, now)})"


def relative(seconds: float | None, now: float) -> str:
    """``3.2 s ago``, ``in 5.0 s``, or ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds > now:
        return f"in {seconds - now:.1f} s"
    return f"{now - seconds:.1f} s ago"


def as_json_text(value: Any) -> str:
    """``value`` as JSON when it is JSON (tuples as lists), else as Python shows it (bytes,
    an undecodable result, NaN...)."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)


def error_line(error: tuple[str, str, str] | None) -> str:
    """A job's error in one line, ``Type: first line of the message`` (``-``: none)."""
    if error is None:
        return "-"
    kind, message, _trace = error
    lines = message.splitlines()
    text = lines[0] if lines else ""
    return f"{kind}: {text}" if kind else text or "-"


def job_document(info: JobInfo) -> dict[str, Any]:
    """A job as ``--json`` gives it: every field of :class:`~fdbqueue.JobInfo`, times in
    seconds since the epoch, the error as ``{type, message, traceback}`` (or null)."""
    kind, message, trace = info.error or (None, None, None)
    return {
        "id": info.id,
        "state": info.state,
        "deliveries": info.deliveries,
        "enqueued_at": info.enqueued_at,
        "started_at": info.started_at,
        "finished_at": info.finished_at,
        "due_at": info.due_at,
        "error": None
        if info.error is None
        else {
            "type": kind,
            "message": message,
            "traceback": trace,
        },
        "result": info.result,
        "has_result": info.has_result,
        "result_error": info.result_error,
        "group": info.group,
        "priority": info.priority,
        "cancel_requested": info.cancel_requested,
        "options": None if info.options is None else dataclasses.asdict(info.options),
        "waiting_for": list(info.waiting_for),
    }


def options_text(options: JobOptions | None) -> str:
    """A job's own options as ``job`` prints them: ``max_deliveries=1, time_limit=30s``."""
    if options is None:
        return "-"
    given = [
        f"{name}={value:g}s" if isinstance(value, float) else f"{name}={value}"
        for name, value in dataclasses.asdict(options).items()
        if value is not None
    ]
    return ", ".join(given)


def job_lines(info: JobInfo, now: float) -> list[str]:
    """A job as ``job`` prints it: one field a line, the traceback's lines under the error."""
    facts = [
        ("id", info.id),
        ("state", info.state + (" (cancel requested)" if info.cancel_requested else "")),
        ("deliveries", str(info.deliveries)),
        ("enqueued", moment(info.enqueued_at, now)),
        ("started", moment(info.started_at, now)),
        ("finished", moment(info.finished_at, now)),
        ("due", moment(info.due_at, now)),
        ("group", "-" if info.group is None else repr(info.group)),
        ("priority", "-" if info.priority is None else str(info.priority)),
        ("options", options_text(info.options)),
        ("waits for", " ".join(info.waiting_for) or "-"),
        ("result", as_json_text(info.result) if info.has_result else info.result_error or "-"),
        ("error", error_line(info.error)),
    ]
    width = max(len(name) for name, _ in facts)
    lines = [f"{name:<{width}}  {text}" for name, text in facts]
    if info.error is not None and info.error[2]:
        lines += [f"{'':<{width}}  {line}" for line in info.error[2].splitlines()]
    return lines


def job_row(info: JobInfo, now: float) -> str:
    """A job as a line of ``jobs``' table."""
    return (
        f"{info.id}  {info.state:<9}  {info.deliveries:>3}  "
        f"{relative(info.enqueued_at, now):>12}  {relative(info.finished_at, now):>12}  "
        f"{error_line(info.error)}"
    )


# -- the commands ----------------------------------------------------------------------------


def task_call_of(queue: Any, task: str, args: str | None, kwargs: str | None) -> Any:
    """The task call of ``--task``, ``--args`` (a JSON array) and ``--kwargs`` (a JSON
    object), in the form the queue's codec holds (:func:`fdbqueue._queues.tasks.task_call`).

    Raises:
        click.BadParameter: not JSON of that kind, or a codec that holds bytes.
    """
    given: dict[str, Any] = {}
    for name, text, kind in (("--args", args, list), ("--kwargs", kwargs, dict)):
        try:
            given[name] = kind() if text is None else json.loads(text)
        except ValueError as error:
            raise click.BadParameter(f"not JSON: {error}", param_hint=name) from None
        if not isinstance(given[name], kind):
            wanted = "array" if kind is list else "object"
            raise click.BadParameter(f"must be a JSON {wanted}", param_hint=name)
    try:
        return task_call(queue, task, given["--args"], given["--kwargs"])
    except (TypeError, ValueError) as error:
        raise click.BadParameter(first_line(error), param_hint="--task") from None


@cli.command(cls=NumberArguments, short_help="Add a value, or a task call, as a job.")
@write_options("submit", "workers")
@click.option("--task", default=None, help="Submit a call of the task NAME (no VALUE).")
@click.option("--args", "task_args", default=None, help="The task's arguments: a JSON array.")
@click.option(
    "--kwargs", "task_kwargs", default=None, help="The task's keyword arguments: a JSON object."
)
@shared_options()
@click.pass_obj
def submit(
    context: Context,
    value: str | None,
    priority: int | None,
    as_int: bool,
    delay: float | None,
    dedup_id: str | None,
    group: str | None,
    task: str | None,
    task_args: str | None,
    task_kwargs: str | None,
) -> None:
    """Add VALUE as a job (VALUE, --int, --priority, --delay, --dedup-id and --group as
    push reads them), or with --task NAME a call of that task (--args, --kwargs: JSON; run by
    a worker with --tasks), and print its id, for job, cancel and a program's
    queue.result(). Creates the queue. With --dedup-id, a submit whose id was seen within the
    window submits nothing and says so (exit status 0; with --json, {"id": null,
    "submitted": false})."""
    if (value is None) == (task is None):
        raise click.UsageError("give a VALUE or --task NAME, not both")
    if task is None and (task_args is not None or task_kwargs is not None):
        raise click.UsageError("--args and --kwargs go with --task")
    queue = context.existing_queue(context.queue(), must_exist=False)
    if value is not None:
        item = checked_item(queue, value, as_int, context.codec, delay, dedup_id, group)
    else:
        assert task is not None  # (one of the two)
        call = task_call_of(queue, task, task_args, task_kwargs)
        item = checked_write(queue, call, "--task", delay, dedup_id, group)
    check_priority_option(queue, priority)
    database = context.database()
    if isinstance(queue, PriorityQueue):
        assert priority is not None  # check_priority_option
        level = priority
        job = guarded(
            lambda: queue.submit(
                database, item, priority=level, delay=delay, group=group, dedup_id=dedup_id
            )
        )
    else:
        job = guarded(
            lambda: queue.submit(database, item, delay=delay, group=group, dedup_id=dedup_id)
        )
    if job is None:
        context.emit(
            {"id": None, "submitted": False},
            f"nothing submitted: dedup id {dedup_id!r} was accepted within the window",
        )
        return
    context.emit({"id": job.id, "submitted": True}, job.id)


def wait_option_checks(wait: bool, wait_timeout: float | None) -> None:
    if wait_timeout is not None and not wait:
        raise click.UsageError("--wait-timeout applies to --wait")
    if wait_timeout is not None and wait_timeout < 0:
        raise click.BadParameter(
            f"must be a number of seconds >= 0, not {wait_timeout:g}", param_hint="--wait-timeout"
        )


@cli.command(short_help="Show a job: state, times, error, result.")
@click.argument("job_id", metavar="ID")
@click.option(
    "--wait",
    is_flag=True,
    help="Wait until the job ends and print its result; exit status 1 when it ended dead or "
    "cancelled, its result was not kept, or --wait-timeout passed first.",
)
@click.option(
    "--wait-timeout",
    type=Seconds("from 0"),
    default=None,
    show_default="wait without limit",
    help="With --wait: seconds to wait at most.",
)
@shared_options()
@click.pass_obj
def job(context: Context, job_id: str, wait: bool, wait_timeout: float | None) -> None:
    """Show the job ID: its state, deliveries, times (UTC, and how long ago), group,
    priority, result (as JSON when it is JSON) and last error with its traceback's last
    lines. With --json: {id, state, deliveries, enqueued_at, started_at, finished_at,
    due_at, error: {type, message, traceback} or null, result, has_result, result_error
    (why a result was not kept, or null), group, priority, cancel_requested, options,
    waiting_for}, times in seconds since the epoch.

    With --wait, wait until the job ends (a watch, no polling) and print its result (with
    --json: {id, state, result}); a job that ended dead or cancelled is one line on stderr,
    its error's, and exit status 1, as are a job whose result was not kept and a
    --wait-timeout that passes first."""
    wait_option_checks(wait, wait_timeout)
    queue = context.existing_queue(context.queue())
    database = context.database()
    if not wait:
        info = with_job_id(lambda: queue.job(database, job_id))
        if info is None:
            raise unknown_job(context, job_id)
        context.emit(job_document(info), "\n".join(job_lines(info, _clock.now())))
        return
    deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
    while True:  # a second at a time, so that Ctrl-C is seen
        left = math.inf if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            result = with_job_id(
                functools.partial(queue.result, database, job_id, timeout=min(TAIL_WAIT, left))
            )
        except KeyError:
            raise unknown_job(context, job_id) from None
        except (JobFailedError, ResultNotKeptError) as error:
            raise click.ClickException(first_line(error)) from None
        except TimeoutError:
            if left > TAIL_WAIT:
                continue
            raise click.ClickException(
                f"job {job_id} did not finish within {wait_timeout:g} s"
            ) from None
        break
    context.emit({"id": job_id, "state": "succeeded", "result": result}, as_json_text(result))


@cli.command(short_help="List jobs: id, state, deliveries, times, error.")
@click.option(
    "--state",
    type=click.Choice(STATES),
    default=None,
    help="Only the jobs in this state.",
)
@click.option(
    "-n",
    "--limit",
    type=Count(0),
    default=100,
    show_default=True,
    help="At most N jobs.",
)
@shared_options()
@click.pass_obj
def jobs(context: Context, state: str | None, limit: int) -> None:
    """List the queue's jobs, in id order (those submitted and not yet cleared, a day after
    they finished by default): id, state, deliveries, when enqueued and finished (seconds
    ago), the first line of the last error. With --json: a list of the documents "job
    --json" prints."""
    queue = context.existing_queue(context.queue())
    database = context.database()
    found: list[JobInfo] = guarded(
        lambda: queue.jobs(database, state=state, limit=min(limit + 1, EVERYTHING))
    )
    shown, more = found[:limit], len(found) > limit
    now = _clock.now()
    header = f"{'id':<32}  {'state':<9}  del  {'enqueued':>12}  {'finished':>12}  error"
    context.emit(
        [job_document(info) for info in shown],
        "\n".join([header, *(job_row(info, now) for info in shown)]) if shown else "(no jobs)",
    )
    if more:
        note_more(len(shown), "job")


@cli.command(short_help="Cancel a job that has not finished.")
@click.argument("job_id", metavar="ID")
@shared_options()
@click.pass_obj
def cancel(context: Context, job_id: str) -> None:
    """Cancel the job ID: one waiting, delayed or retrying never reaches a handler; one
    running is not retried once it ends. Prints "cancelled" (exit status 0), or "not
    cancelled: finished or unknown" (exit status 1). With --json: {"cancelled": true or
    false}."""
    queue = context.existing_queue(context.queue())
    database = context.database()
    cancelled = with_job_id(lambda: queue.cancel(database, job_id))
    context.emit(
        {"cancelled": cancelled},
        "cancelled" if cancelled else "not cancelled: finished or unknown",
    )
    if not cancelled:
        click.get_current_context().exit(1)
