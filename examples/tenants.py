"""Tenants sharing one queue fairly: message groups, ``enqueue(..., group=tenant)``.

One *noisy* tenant enqueues a large backlog (``--noisy-jobs``), then ``--tenants`` quiet
tenants enqueue a few jobs each (``--jobs``). A worker loop with ``--concurrency`` threads
processes them. Because each tenant is a message group:

* the quiet tenants do not wait behind the noisy backlog: groups take turns, so every quiet
  job is done after about (tenants + 1) x jobs jobs, not after the whole backlog;
* each tenant's jobs run in the order they were enqueued, one at a time (the worker's
  threads spread across tenants, never two jobs of one tenant at once).

The example prints when the last quiet job finished (its place among all jobs done, and the
same place a FIFO queue would give it) and checks both promises.

Run it with ``python examples/tenants.py`` (in-memory database), or add ``--cluster-file
PATH`` for a real cluster.
"""

from __future__ import annotations

import argparse
import threading
import time

from _database import add_database_arguments, describe, open_database, positive

from fdbqueue import Queue, Subspace, memory

NOISY = "noisy"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--noisy-jobs", type=positive, default=2_000)
    parser.add_argument("--tenants", type=positive, default=20, help="quiet tenants")
    parser.add_argument("--jobs", type=positive, default=5, help="jobs per quiet tenant")
    parser.add_argument("--concurrency", type=positive, default=4)
    arguments = parser.parse_args()

    db = open_database(arguments, latency=memory.Latency(grv=0.0005, read=0.0002, commit=0.001))
    print(f"Using {describe(db)}")
    jobs = Queue(Subspace(("tenants-example",)), codec="json")
    jobs.clear(db)
    for start in range(0, arguments.noisy_jobs, 500):
        batch = range(start, min(start + 500, arguments.noisy_jobs))
        jobs.enqueue_many(db, [[NOISY, n] for n in batch], group=NOISY)
    quiet = [f"tenant-{t}" for t in range(arguments.tenants)]
    for tenant in quiet:
        jobs.enqueue_many(db, [[tenant, n] for n in range(arguments.jobs)], group=tenant)

    done: list[tuple[str, int]] = []
    running: set[str] = set()
    overlapping: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    quiet_left = [arguments.tenants * arguments.jobs]

    def handle(job: list[object]) -> None:
        tenant, number = str(job[0]), int(str(job[1]))
        with lock:
            if tenant in running:
                overlapping.append(tenant)
            running.add(tenant)
        time.sleep(0.001)  # the job's work
        with lock:
            running.discard(tenant)
            done.append((tenant, number))
            if tenant != NOISY:
                quiet_left[0] -= 1
                if quiet_left[0] == 0:
                    stop.set()  # the rest is the noisy backlog: enough for this example

    started = time.monotonic()
    summary = jobs.work(db, handle, lease=30, concurrency=arguments.concurrency, stop=stop)
    elapsed = time.monotonic() - started
    last_quiet = max(place for place, (tenant, _) in enumerate(done, 1) if tenant != NOISY)
    fair_share = (arguments.tenants + 1) * arguments.jobs
    print(f"{summary} in {elapsed:.1f}s")
    print(
        f"the last quiet job finished as job {last_quiet:,} of those done "
        f"(groups in turn: about {fair_share:,}; a FIFO queue: "
        f"{arguments.noisy_jobs + arguments.tenants * arguments.jobs:,})"
    )
    for tenant in [NOISY, *quiet]:
        numbers = [number for name, number in done if name == tenant]
        assert numbers == sorted(numbers), f"{tenant}'s jobs ran out of order: {numbers}"
    assert not overlapping, f"two jobs of one tenant ran at once: {overlapping}"
    assert last_quiet <= fair_share + arguments.concurrency * arguments.jobs, last_quiet
    print("OK: every quiet tenant served in its turn; each tenant's jobs in order, one at a time")


if __name__ == "__main__":
    main()
