"""Jobs: submit work, wait for its result, see a failure, and run a periodic job.

A worker loop (``queue.work``) runs in a thread while the main thread:

* submits a job (``queue.submit``) and waits for its result (``queue.result``, which waits
  on a FoundationDB watch of the job's record: it returns as soon as the ack commits);
* submits a job that fails every time: the loop retries it once (``retrying``), then moves it
  to the dead letters on its last delivery (``dead``), and ``result`` raises
  ``JobFailedError`` with its error;
* cancels a delayed job before it runs;
* has scheduled a periodic job every second (``queue.schedule``) first, and waits for the
  loop to enqueue and run ``--runs`` of its runs (each run is a job too).

It ends with a summary: the worker loop's counts and the jobs by state. Run it with
``python examples/jobs.py`` (in-memory database; about three seconds), or add
``--cluster-file PATH`` for a real cluster.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections import Counter
from typing import Any

from _database import add_database_arguments, describe, open_database, positive

from fdbqueue import JobFailedError, Queue, Subspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--runs", type=positive, default=2, help="periodic runs to wait for")
    arguments = parser.parse_args()
    # The worker logs each failure with its traceback; this example prints what it needs.
    logging.getLogger("fdbqueue").addHandler(logging.NullHandler())
    logging.getLogger("fdbqueue").propagate = False

    db = open_database(arguments)
    print(f"Using {describe(db)}")
    queue: Queue[Any] = Queue(Subspace(("jobs-example",)), codec="json", max_deliveries=2)
    queue.clear(db)
    queue.unschedule(db, "tick")

    ticks: list[float] = []

    def handle(task: dict[str, Any]) -> object:
        """The handler: what it returns is the job's result; what it raises, its error."""
        if task["kind"] == "square":
            return task["n"] * task["n"]
        if task["kind"] == "tick":  # a run of the periodic schedule (a job of its own)
            ticks.append(time.monotonic())
            return None
        raise ValueError(f"cannot handle {task['kind']!r}")

    stop = threading.Event()
    summaries = []
    loop = threading.Thread(
        target=lambda: summaries.append(
            queue.work(db, handle, lease=30, concurrency=2, stop=stop, backoff=0.05)
        ),
        name="worker-loop",
    )
    loop.start()
    started = time.monotonic()
    try:
        # a periodic job, every second: every running worker loop enqueues its due runs (each
        # a job, as submit makes), once each; its runs come while the jobs below run
        queue.schedule(db, "tick", {"kind": "tick"}, every=1)
        scheduled = time.monotonic()

        # 1. a job that succeeds: its id is known before the commit
        job = queue.submit(db, {"kind": "square", "n": 12})
        assert job is not None
        waited = time.monotonic()
        result = queue.result(db, job.id, timeout=10)
        elapsed_ms = (time.monotonic() - waited) * 1000
        info = queue.job(db, job.id)
        assert result == 144 and info is not None and info.state == "succeeded"
        print(f"job {job.id}: result {result!r} after {elapsed_ms:.0f} ms ({info.state})")

        # 2. a job that fails on each of its 2 deliveries: retried once, then dead
        broken = queue.submit(db, {"kind": "unknown"})
        assert broken is not None
        try:
            queue.result(db, broken.id, timeout=10)
            raise AssertionError("a broken job has no result")
        except JobFailedError as error:
            kind, message, _traceback = error.error or ("", "", "")
            failed = queue.job(db, broken.id)
            assert failed is not None and failed.state == "dead" and failed.deliveries == 2
            print(
                f"job {broken.id}: JobFailedError, {failed.state} after "
                f"{failed.deliveries} deliveries: {kind}: {message}"
            )

        # 3. a delayed job cancelled before it runs
        later = queue.submit(db, {"kind": "square", "n": 3}, delay=60)
        assert later is not None
        before = queue.job(db, later.id)
        assert before is not None and queue.cancel(db, later.id)
        after = queue.job(db, later.id)
        assert after is not None and after.state == "cancelled"
        print(f"job {later.id}: {before.state} -> cancel -> {after.state}")

        # 4. the periodic job's runs
        deadline = scheduled + arguments.runs + 3
        while len(ticks) < arguments.runs and time.monotonic() < deadline:
            time.sleep(0.05)
        offsets = ", ".join(f"{tick - scheduled:.1f} s" for tick in ticks)
        print(f"schedule 'tick' every 1 s: {len(ticks)} runs, at {offsets} after scheduling")
        assert len(ticks) >= arguments.runs, "the periodic job did not run"
        schedule = queue.schedules(db)[0]
        assert schedule.runs >= arguments.runs
    finally:
        queue.unschedule(db, "tick")
        stop.set()
        loop.join()

    states = Counter(each.state for each in queue.jobs(db))
    print(
        f"summary: {summaries[0]}; jobs by state: {dict(sorted(states.items()))}; "
        f"{time.monotonic() - started:.1f} s"
    )
    # each run of the schedule is a job too: the one submitted and every tick succeeded
    assert states == {"succeeded": 1 + len(ticks), "dead": 1, "cancelled": 1}, states
    print("OK")


if __name__ == "__main__":
    main()
