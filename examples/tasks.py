"""A task chain, with options per job and a shared rate limit, run in child processes.

The module registers two tasks on its queue (``@queue.task``): ``word_count`` and ``spin``, a
pure-Python busy loop whose jobs may run 1 second at most (``time_limit=1``, the task's own
option). The queue starts at most 4 jobs in any second (``rate_limit=(4, 1.0)``), over every
worker: the last jobs wait for the window. The main program submits jobs of both, by the
function (``task.submit``) and by name (``queue.submit_task``, as another program would),
and a ``report`` job to run after every ``word_count`` job (``after=``: a chain),
then runs the worker loop with no handler in ``--processes`` child processes
(``work(processes=N)``): each job's task runs in a child, and the child running the endless
``spin`` is killed at its time limit, its job ``dead`` (``max_deliveries=1``) with
``TimeLimitExceeded``, while the other jobs go on.

Run it with ``python examples/tasks.py`` (in-memory database; about two seconds), or add
``--cluster-file PATH`` for a real cluster. The children import this module again to find
the tasks (``multiprocessing``'s ``spawn``): the ``if __name__ == "__main__":`` guard below
keeps them from running the program.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections import Counter
from typing import Any

from _database import add_database_arguments, describe, open_database, positive

from fdbqueue import Queue, Subspace

queue: Queue[Any] = Queue(Subspace(("tasks-example",)), codec="json", rate_limit=(4, 1.0))


@queue.task
def word_count(text: str) -> dict[str, int]:
    """A task: what it returns is its job's result (with the child's process id)."""
    return {"words": len(text.split()), "pid": os.getpid()}


@queue.task
def report(texts: int) -> str:
    """A task that runs once every job it was submitted after succeeded."""
    return f"report after {texts} counts"


@queue.task(max_deliveries=1, time_limit=1.0)
def spin(seconds: float) -> None:
    """A task that never ends in time: its child is killed at the task's 1-second limit."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--processes", type=positive, default=2, help="child processes")
    arguments = parser.parse_args()
    logging.getLogger("fdbqueue").addHandler(logging.NullHandler())  # this prints what counts
    logging.getLogger("fdbqueue").propagate = False

    db = open_database(arguments)
    print(f"Using {describe(db)}")
    queue.clear(db)
    texts = ["the quick brown fox", "jumps over", "the lazy dog", "fdbqueue runs tasks"]
    jobs = [word_count.submit(db, text) for text in texts[:-1]]
    jobs.append(queue.submit_task(db, "word_count", [texts[-1]]))  # by name: from anywhere
    chained = queue.submit_task(db, "report", [len(jobs)], after=[job for job in jobs if job])
    assert chained is not None
    stuck = spin.submit(db, 3600.0)
    started = time.monotonic()
    summary = queue.work(db, lease=30, processes=arguments.processes, until_empty=True)
    print(f"worker: {summary} in {time.monotonic() - started:.1f}s")

    print(f"rate limit {queue.rate_limit}: at most 4 of the 6 jobs started in any second")
    pids = set()
    for text, job in zip(texts, jobs, strict=True):
        assert job is not None
        result = queue.result(db, job.id, timeout=10)
        pids.add(result["pid"])
        print(f"word_count({text!r}) -> {result['words']}")
    assert stuck is not None
    info = queue.job(db, stuck.id)
    assert info is not None and info.error is not None
    print(f"spin: {info.state}, {info.error[0]}: {info.error[1]}")
    print(f"ran in child processes {sorted(pids)} (this one: {os.getpid()})")
    print(f"report (after the counts): {queue.result(db, chained.id, timeout=10)!r}")
    assert info.state == "dead" and info.error[0] == "TimeLimitExceeded"
    assert os.getpid() not in pids and summary.timed_out == 1
    states: Counter[str] = Counter()
    for job in jobs:
        assert job is not None
        done = queue.job(db, job.id)
        states[done.state if done is not None else "gone"] += 1
    print(f"jobs by state: {dict(states)}")


if __name__ == "__main__":
    main()
