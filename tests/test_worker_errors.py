"""A worker never dies of a handler (issue 43 items 4 and 5).

Item 4: a handler's exception whose ``str()`` raises, whose message is 200,000 characters
(FoundationDB's value limit is 100,000 bytes: 2103 when written whole into a dead letter's
reason or a job's record) or cannot be encoded as UTF-8, made ``work()`` itself raise, in the
thread, transactional and asyncio loops, for plain items and jobs, and left the item leased.
The error is now recorded bounded (``fdbqueue._wording.describe_failure``) and the loop goes
on.

Item 5: an ``async def`` handler given to the synchronous ``Queue.work`` ended its jobs
``succeeded`` without running them. It is refused before anything is taken; a plain function
that returns a coroutine fails its job instead of succeeding unrun.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import threading
import warnings
from typing import Any

import pytest
from helpers import all_keys

import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue
from fdbqueue._wording import (
    FAILURE_MESSAGE_CHARACTERS,
    FAILURE_TRACEBACK_CHARACTERS,
    describe_error,
    describe_failure,
)

#: What a bounded message may add to its cut: "... [cut: 200,000 characters]".
CUT_MARK = 40


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for this one")


def failure_of(kind: str) -> Exception:
    if kind == "unprintable":
        return Unprintable()
    if kind == "long":
        return ValueError("x" * 200_000)
    return ValueError("bad bytes: \udc80\udcff")  # a lone surrogate: no UTF-8 for it


FAILURES = ["unprintable", "long", "unencodable"]
LOOPS = ["thread", "transactional", "asyncio", "asyncio-transactional"]


def shown(kind: str) -> tuple[str, str]:
    """The type name and the start of the message the records must show."""
    if kind == "unprintable":
        return "Unprintable", "<unprintable Unprintable>"
    if kind == "long":
        return "ValueError", "x" * 100
    return "ValueError", "bad bytes: \\udc80\\udcff"


def run_loop(db: Any, queue: Queue[Any], loop: str, kind: str, once: bool) -> Any:
    """Run ``loop`` on ``queue`` with a handler that raises ``failure_of(kind)``: until
    empty, or (``once``) stopped by the handler's first call."""
    transactional = loop.endswith("transactional")
    options: dict[str, Any] = {"lease": 30, "transactional": transactional}
    options.update(until_empty=not once, handle_signals=False)
    if loop in ("thread", "transactional"):
        stop = threading.Event()

        def handler(*args: Any) -> None:
            if once:
                stop.set()
            raise failure_of(kind)

        return queue.work(db, handler, stop=stop, **options)

    async def main() -> Any:
        stop = asyncio.Event()
        twin = fa.Queue.from_sync(queue)
        if transactional:  # a plain function, on the loop

            def handler(tr: Any, value: Any) -> None:
                if once:
                    stop.set()
                raise failure_of(kind)

            return await twin.work(db, handler, stop=stop, **options)

        async def coroutine(value: Any) -> None:
            if once:
                stop.set()
            raise failure_of(kind)

        return await twin.work(db, coroutine, stop=stop, **options)

    return asyncio.run(main())


def assert_bounded_error(error: tuple[str, str, str] | None, kind: str) -> None:
    assert error is not None
    name, message = shown(kind)
    assert error[0] == name and error[1].startswith(message), error[:2]
    assert len(error[1]) <= FAILURE_MESSAGE_CHARACTERS + CUT_MARK
    assert 0 < len(error[2]) <= FAILURE_TRACEBACK_CHARACTERS
    assert name in error[2].splitlines()[-1]  # the traceback's last line


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("item", ["plain", "job"])
@pytest.mark.parametrize("kind", FAILURES)
def test_a_failure_on_the_last_delivery_is_a_dead_letter_with_a_bounded_reason(
    db, subspace, caplog, loop, item, kind
):
    queue: Queue[Any] = Queue(subspace, max_deliveries=1)
    job = queue.submit(db, "v") if item == "job" else queue.enqueue(db, "v")
    with caplog.at_level(logging.WARNING, logger="fdbqueue.worker"):
        summary = run_loop(db, queue, loop, kind, once=False)  # returns: the loop goes on
    assert (summary.dead_lettered, summary.succeeded, summary.lost) == (1, 0, 0)
    info = queue.info(db)
    assert (info.size, info.leases_in_flight, info.dead_letters) == (0, 0, 1)
    [letter] = queue.dead_letters(db)
    name, message = shown(kind)
    assert letter.reason.startswith(f"{name}: {message}")
    assert letter.reason.endswith("(delivery 1 of 1)")
    assert len(letter.reason) <= FAILURE_MESSAGE_CHARACTERS + CUT_MARK + 40
    if item == "job":
        found = queue.job(db, job.id)
        assert found.state == "dead"
        assert_bounded_error(found.error, kind)
    [logged] = [r.getMessage() for r in caplog.records if "dead letter" in r.getMessage()]
    assert f"{name}: {message}" in logged
    assert len(logged) < FAILURE_MESSAGE_CHARACTERS + FAILURE_TRACEBACK_CHARACTERS + 400


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("item", ["plain", "job"])
@pytest.mark.parametrize("kind", FAILURES)
def test_a_failure_retried_keeps_a_bounded_error(db, subspace, caplog, loop, item, kind):
    queue: Queue[Any] = Queue(subspace, max_deliveries=5)
    job = queue.submit(db, "v") if item == "job" else queue.enqueue(db, "v")
    with caplog.at_level(logging.WARNING, logger="fdbqueue.worker"):
        summary = run_loop(db, queue, loop, kind, once=True)
    assert (summary.retried, summary.succeeded, summary.lost) == (1, 0, 0)
    info = queue.info(db)
    assert (info.leases_in_flight, info.dead_letters, info.delayed) == (0, 0, 1)  # its backoff
    if item == "job":
        found = queue.job(db, job.id)
        assert found.state == "retrying" and found.deliveries == 1
        assert_bounded_error(found.error, kind)
    name, message = shown(kind)
    [logged] = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert f"{name}: {message}" in logged
    assert len(logged) < FAILURE_MESSAGE_CHARACTERS + FAILURE_TRACEBACK_CHARACTERS + 400


def test_describe_failure_is_bounded_whatever_the_exception_does():
    class Strange(Exception):
        def __str__(self) -> Any:
            return 42  # not a str: str() raises TypeError

    assert describe_error(Strange()) == "Strange: <unprintable Strange>"
    assert describe_error(Unprintable()) == "Unprintable: <unprintable Unprintable>"
    long = describe_error(ValueError("é" * 300_000))
    assert long.endswith("... [cut: 300,000 characters]")
    assert len(long) == len("ValueError: ") + FAILURE_MESSAGE_CHARACTERS + len(
        "... [cut: 300,000 characters]"
    )
    try:
        raise ValueError("\n".join(f"line {n} {'y' * 5_000}" for n in range(50)))
    except ValueError as error:
        name, message, trace = describe_failure(error)
    assert name == "ValueError" and len(message) <= FAILURE_MESSAGE_CHARACTERS + CUT_MARK
    assert len(trace) <= FAILURE_TRACEBACK_CHARACTERS and trace.splitlines()
    assert describe_failure("z" * 5_000)[1].endswith("[cut: 5,000 characters]")
    assert describe_failure(None) == ("", "", "")


# -- item 5: a coroutine handler on the synchronous loop ----------------------------------------


async def send(value: Any) -> None:
    raise AssertionError("never awaited here")


class AsyncCallable:
    async def __call__(self, value: Any) -> None:
        raise AssertionError("never awaited here")


class Mailer:
    async def send(self, value: Any) -> None:
        raise AssertionError("never awaited here")


async def send_with(value: Any, server: str) -> None:
    raise AssertionError("never awaited here")


COROUTINE_HANDLERS = {
    "async def": send,
    "partial": functools.partial(send_with, server="smtp"),
    "async __call__": AsyncCallable(),
    "partial of an async __call__": functools.partial(AsyncCallable()),
    "async method": Mailer().send,
}


@pytest.mark.parametrize("queue_type", [Queue, PriorityQueue])
@pytest.mark.parametrize("name", list(COROUTINE_HANDLERS))
def test_a_coroutine_handler_is_refused_before_anything_is_taken(db, subspace, queue_type, name):
    queue: Any = queue_type(subspace)
    if queue_type is Queue:
        queue.submit(db, "e-mail")
    else:
        queue.submit(db, "e-mail", priority=1)
    before = all_keys(db, subspace)
    with pytest.raises(TypeError, match="coroutine function") as raised:
        queue.work(db, COROUTINE_HANDLERS[name], lease=5, until_empty=True, handle_signals=False)
    assert f"fdbqueue.asyncio.{queue_type.__name__}" in str(raised.value)
    assert queue.size(db) == 1 and all_keys(db, subspace) == before  # nothing was taken


@pytest.mark.parametrize("loop", ["thread", "asyncio"])
def test_a_plain_function_that_returns_a_coroutine_fails_its_job(db, subspace, loop):
    """A lambda around a coroutine function cannot be told before the call: the job fails
    (here: a dead letter) instead of succeeding unrun, and the coroutine is closed."""
    queue: Queue[Any] = Queue(subspace, max_deliveries=1)
    job = queue.submit(db, "e-mail")
    options: dict[str, Any] = {"lease": 5, "until_empty": True, "handle_signals": False}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if loop == "thread":
            summary = queue.work(db, lambda value: send(value), **options)
        else:
            twin = fa.Queue.from_sync(queue)
            summary = asyncio.run(twin.work(db, lambda value: send(value), **options))
        gc.collect()
    assert (summary.succeeded, summary.dead_lettered) == (0, 1)
    found = queue.job(db, job.id)
    assert found.state == "dead" and found.error[0] == "TypeError"
    assert "returned a coroutine" in found.error[1] and "fdbqueue.asyncio" in found.error[1]
    assert not [w for w in caught if "never awaited" in str(w.message)]
