"""The worker loop with slow, failing and scheduled jobs: ``queue.work(db, handler, ...)``.

A producer enqueues jobs of four kinds, some of them delayed with ``enqueue(..., delay=s)``:

* ``quick`` jobs succeed at once;
* ``slow`` jobs take longer than the lease, which the worker's heartbeat extends meanwhile;
* ``flaky`` jobs fail on their first delivery: the worker releases them with a backoff delay,
  and they succeed on a later delivery;
* ``broken`` jobs fail every time: after ``--max-deliveries`` deliveries they become dead
  letters, with the error as the reason.

The worker runs ``--concurrency`` threads and logs what it does (one line per retry and dead
letter). A watcher sets ``stop`` once every job is accounted for, and the worker returns after
its running jobs finish. At the end the example checks that every job that can succeed has a
result, that no delayed job ran before it was due, and that the broken jobs are dead letters.

Run it with ``python examples/worker.py`` (in-memory database), or add ``--cluster-file
PATH`` for a real cluster.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time

from _database import add_database_arguments, describe, open_database, positive

from fdbqueue import Queue, Subspace, memory


class WithoutTracebacks(logging.Formatter):
    """One line per record: the worker logs failures with their tracebacks, which this
    example's failures do not need."""

    def formatException(self, ei: object) -> str:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--jobs", type=int, default=40, help="jobs of each kind")
    parser.add_argument("--concurrency", type=positive, default=4)
    parser.add_argument("--lease", type=float, default=0.3, help="seconds")
    parser.add_argument("--max-deliveries", type=int, default=3)
    arguments = parser.parse_args()
    handler = logging.StreamHandler()
    handler.setFormatter(WithoutTracebacks("%(threadName)s %(levelname)s %(message)s"))
    logging.getLogger("fdbqueue").addHandler(handler)
    logging.getLogger("fdbqueue").setLevel(logging.INFO)

    db = open_database(arguments, latency=memory.Latency(grv=0.0005, read=0.0002, commit=0.001))
    print(f"Using {describe(db)}")
    jobs = Queue(
        Subspace(("worker-example",)), codec="json", max_deliveries=arguments.max_deliveries
    )
    jobs.clear(db)

    kinds = ["quick", "slow", "flaky", "broken"]
    due: dict[str, float] = {}
    for number in range(arguments.jobs):
        for kind in kinds:
            name = f"{kind}-{number}"
            delay = 0.2 if number % 5 == 0 else None  # every fifth job is scheduled
            if delay:
                due[name] = time.monotonic() + delay
            jobs.enqueue(db, {"name": name, "kind": kind}, delay=delay)

    results: dict[str, int] = {}
    failed_once: set[str] = set()
    early: list[str] = []
    lock = threading.Lock()

    def handle(job: dict[str, str]) -> None:
        name, kind = job["name"], job["kind"]
        if name in due and time.monotonic() < due[name] - 0.01:
            early.append(name)
        if kind == "slow":
            time.sleep(arguments.lease * 1.5)  # longer than the lease: the heartbeat extends it
        with lock:
            if kind == "broken" or (kind == "flaky" and name not in failed_once):
                failed_once.add(name)
                raise RuntimeError(f"{name} failed")
            results[name] = results.get(name, 0) + 1

    expected_results = arguments.jobs * 3
    expected_dead = arguments.jobs
    stop = threading.Event()

    def watch() -> None:
        while len(results) < expected_results or len(jobs.dead_letters(db, 1000)) < expected_dead:
            time.sleep(0.05)
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    started = time.monotonic()
    summary = jobs.work(
        db,
        handle,
        lease=arguments.lease,
        concurrency=arguments.concurrency,
        stop=stop,
        backoff=0.05,
        max_backoff=0.2,
    )
    elapsed = time.monotonic() - started
    print(f"{summary} in {elapsed:.1f}s")
    dead = jobs.dead_letters(db, 1000)
    assert sorted(results) == sorted(f"{k}-{n}" for n in range(arguments.jobs) for k in kinds[:3])
    assert not early, f"delayed jobs ran early: {early}"
    names = [letter.value["name"] for letter in dead if isinstance(letter.value, dict)]
    assert len(names) == len(dead), "a dead letter could not be decoded"
    assert sorted(names) == sorted(f"broken-{n}" for n in range(arguments.jobs))
    assert all("RuntimeError" in letter.reason for letter in dead)
    assert jobs.leases(db) == [] and jobs.size(db) == 0
    print(
        f"OK: {len(results)} jobs done (slow ones kept their leases, flaky ones retried), "
        f"{len(dead)} broken jobs are dead letters, no scheduled job ran early"
    )


if __name__ == "__main__":
    main()
