"""How a worker ends a job on the lease holder's side, shared by the thread and asyncio loops:
:func:`fdbqueue._delivery.settling.holder_call` (an ack, release or dead_letter tried again after a
timeout) and :class:`fdbqueue._delivery.settling.Settler`."""

from __future__ import annotations

import asyncio

import pytest

import fdbqueue.asyncio as fa
from fdbqueue import LeaseNotHeldError, Queue
from fdbqueue._delivery.settling import HOLDER_CALL_ATTEMPTS, holder_call


class TimedOut(Exception):
    """A FoundationDB error 1031 (transaction_timed_out): the result is unknown."""

    code = 1031


def calls(*outcomes: BaseException | None) -> tuple[list[int], object]:
    """A call that raises each of ``outcomes`` in turn (None: returns), and its count."""
    made: list[int] = []

    def call() -> None:
        made.append(1)
        outcome = outcomes[len(made) - 1]
        if outcome is not None:
            raise outcome

    return made, call


def test_a_held_lease_is_settled_at_once():
    made, call = calls(None)
    assert holder_call(call, "ack") is True and len(made) == 1


def test_a_lease_not_held_is_refused_and_logged(caplog):
    made, call = calls(LeaseNotHeldError("gone"))
    assert holder_call(call, "release") is False and len(made) == 1
    assert "release refused: gone" in caplog.text


def test_a_timed_out_call_is_made_again_and_a_refusal_then_means_it_landed():
    made, call = calls(TimedOut(), LeaseNotHeldError("acknowledged already"))
    assert holder_call(call, "ack") is True and len(made) == 2
    made, call = calls(TimedOut(), TimedOut(), None)
    assert holder_call(call, "ack") is True and len(made) == 3


def test_timeouts_past_the_attempts_and_other_errors_are_raised():
    made, call = calls(*[TimedOut()] * HOLDER_CALL_ATTEMPTS)
    with pytest.raises(TimedOut):
        holder_call(call, "ack")
    assert len(made) == HOLDER_CALL_ATTEMPTS
    made, call = calls(ValueError("no"))
    with pytest.raises(ValueError):
        holder_call(call, "ack")
    assert len(made) == 1


def test_both_loops_end_a_failing_job_alike(db, subspace):
    """A job that fails on its only delivery becomes a dead letter with the same reason,
    counted the same, whichever loop ran it."""
    reasons = []
    for n, run in enumerate(["threads", "tasks"]):
        queue = Queue(subspace, max_deliveries=1)
        queue.enqueue(db, f"job-{n}")

        def fail(value: str) -> None:
            raise RuntimeError(f"{value} failed")

        options = {"lease": 10, "until_empty": True, "handle_signals": False}
        if run == "threads":
            summary = queue.work(db, fail, **options)
        else:
            summary = asyncio.run(fa.Queue.from_sync(queue).work(db, fail, **options))
        assert (summary.dead_lettered, summary.succeeded, summary.lost) == (1, 0, 0)
        (letter,) = queue.dead_letters(db)
        reasons.append(letter.reason)
        queue.purge_dead_letters(db)
    assert reasons == [
        "RuntimeError: job-0 failed (delivery 1 of 1)",
        "RuntimeError: job-1 failed (delivery 1 of 1)",
    ]
