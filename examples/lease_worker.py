"""Workers that claim jobs under leases, acknowledge them with their results, and sometimes crash.

Each job is claimed with ``claim(db, lease=..., block=True, timeout=...)``: an idle worker
waits on a watch (woken by an enqueue or a release, or when a lease expires) instead of
polling with ``sleep``. A worker "processes" the job, then acknowledges it in the same
transaction that stores the job's result, so a job's result is stored exactly when the job is
acknowledged. Some first deliveries crash (the worker never acknowledges): the
lease expires and another worker gets the job again, with its delivery count raised. A few
"poison" jobs always crash their worker; after ``--max-deliveries`` deliveries they become
dead letters. At the end it checks that every good job has exactly one result and that every
poison job is a dead letter, and prints the counts.

Run it with ``python examples/lease_worker.py`` (in-memory database, with injected faults:
``--faults 0.05`` makes 5% of commits fail with each of 1020, 1021 and 1007), or add
``--cluster-file PATH`` for a real cluster (where faults are real, not injected).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import threading
import time
from typing import Any

from _database import add_database_arguments, describe, open_database, positive

from fdbqueue import Lease, LeaseError, Queue, Subspace, memory, transactional


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--poison", type=int, default=3, help="jobs that always crash")
    parser.add_argument("--workers", type=positive, default=6)
    parser.add_argument("--lease", type=float, default=0.2, help="lease, seconds")
    parser.add_argument(
        "--crash", type=float, default=0.1, help="chance a job's first delivery crashes"
    )
    parser.add_argument("--max-deliveries", type=int, default=3)
    parser.add_argument("--faults", type=float, default=0.05, help="in-memory only, per kind")
    arguments = parser.parse_args()
    db = open_database(arguments, latency=memory.Latency(grv=0.0005, read=0.0002, commit=0.001))
    print(f"Using {describe(db)}")

    root = Subspace(("lease_worker",))
    jobs = Queue(root["jobs"], max_deliveries=arguments.max_deliveries)
    results = root["results"]
    jobs.clear(db)
    db.clear_range_startswith(results.key())
    poison = set(range(arguments.poison))
    jobs.enqueue_many(db, range(arguments.jobs))
    if isinstance(db, memory.Database) and arguments.faults:
        chance = arguments.faults
        db.faults = memory.Faults(
            not_committed=chance, commit_unknown_result=chance, transaction_too_old=chance
        )

    @transactional
    def finish(tr: Any, lease: Lease[int], result: bytes) -> None:
        # tr: a Transaction of either backend (Any: the fdb binding is untyped)
        jobs.ack(tr, lease)  # acknowledged together with the result, or neither
        tr[results.pack((lease.value,))] = result

    crashes = 0
    lock = threading.Lock()
    stop = threading.Event()

    def work(seed: int) -> None:
        nonlocal crashes
        chance = random.Random(seed)
        while not stop.is_set():
            # Blocks on a watch until a job is enqueued or released, or a lease expires (no
            # polling); the timeout only lets the worker notice `stop` now and then.
            lease = jobs.claim(db, lease=arguments.lease, block=True, timeout=0.5)
            if lease is None:
                continue
            crash = lease.deliveries == 1 and chance.random() < arguments.crash
            if lease.value in poison or crash:
                with lock:
                    crashes += 1
                continue  # "crash": never acknowledge; the lease expires
            with contextlib.suppress(LeaseError):  # too slow: the job is delivered again
                finish(db, lease, b"done by worker %d" % seed)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(arguments.workers)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    good = arguments.jobs - len(poison)
    deadline = time.monotonic() + 30 + arguments.jobs * arguments.lease / 10
    while time.monotonic() < deadline:
        finished = len(list(db.get_range_startswith(results.key())))
        dead = len(jobs.dead_letters(db, limit=arguments.jobs))
        if finished == good and dead == len(poison):
            break
        time.sleep(0.05)
    stop.set()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started

    stored = sorted(results.unpack(kv.key)[0] for kv in db.get_range_startswith(results.key()))
    dead_letters = jobs.dead_letters(db, limit=arguments.jobs)
    print(f"jobs with a result: {len(stored)} of {good} in {elapsed:.2f} s; crashes: {crashes}")
    print(
        "dead letters: "
        + ", ".join(f"job {d.value} after {d.deliveries} deliveries" for d in dead_letters)
    )
    if isinstance(db, memory.Database):
        stats = db.stats()
        print(
            "injected faults: "
            f"{stats['injected_not_committed']} not committed, "
            f"{stats['injected_commit_unknown_result']} unknown results "
            f"({stats['injected_commit_unknown_result_applied']} applied), "
            f"{stats['injected_transaction_too_old']} too old"
        )
    expected = sorted(set(range(arguments.jobs)) - poison)
    dead_jobs = [d.value for d in dead_letters if isinstance(d.value, int)]
    if (
        stored != expected
        or len(dead_jobs) != len(dead_letters)
        or sorted(dead_jobs) != sorted(poison)
    ):
        raise SystemExit("FAILED: a job has no result, or a poison job is not a dead letter")


if __name__ == "__main__":
    main()
