"""``fdbqueue --memory dashboard --demo``: a small live workload in the dashboard's process, so
that one command shows a moving dashboard (:func:`start_demo`)."""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Any

from fdbqueue.dashboard._figures import AnyQueue
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue

__all__ = ["Demo", "start_demo"]

#: The customers whose jobs go in message groups, one group each.
CUSTOMERS = ("acme", "globex", "initech")


class Demo:
    """A running demo workload: its queues (display names to queues) and its threads.

    Args:
        queues: the demo's queues by display name.
        threads: the producer and worker threads.
        stopping: set to stop them.
    """

    def __init__(
        self,
        queues: dict[str, AnyQueue],
        threads: list[threading.Thread],
        stopping: threading.Event,
    ) -> None:
        self.queues = queues
        self.threads = threads
        self.stopping = stopping

    def stop(self) -> None:
        """Stop the producers and workers and wait for them (at most a few seconds)."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=5)


def start_demo(database: Any, *, seed: int | None = None) -> Demo:
    """Start a small workload on ``database``, in daemon threads of this process.

    Three queues under the prefix ``("demo", ...)``: ``demo/jobs`` (a JSON Queue whose jobs
    go in message groups, one per customer; its three workers take 0.2 to 0.8 s a job, so
    the queue grows and shrinks with the producers' pace, and fail about one job in six into
    the dead letters, one of them a value holding ``<script>``, to show escaping), ``demo/emails``
    (a Queue of two shards, filled in bursts faster than its worker drains them) and
    ``demo/tasks`` (a PriorityQueue). The producers' pace rises and falls over a minute, so
    the depth plots move.

    Args:
        database: where the queues live (the in-memory database, usually).
        seed: seeds the workload's choices (None: a random one).

    Returns:
        The running :class:`Demo`; its ``queues`` go to :func:`create_app`.
    """
    jobs: Queue[Any] = Queue(("demo", "jobs"), codec="json", max_deliveries=3)
    emails: Queue[Any] = Queue(("demo", "emails"), shards=2)
    tasks: PriorityQueue[Any] = PriorityQueue(("demo", "tasks"))
    queues: dict[str, AnyQueue] = {"demo/jobs": jobs, "demo/emails": emails, "demo/tasks": tasks}
    stopping = threading.Event()
    chance = random.Random(seed)
    started = time.monotonic()

    def pace() -> float:
        """Seconds between two items: 0.05 to 0.35, over a minute's wave."""
        phase = math.sin((time.monotonic() - started) / 60 * 2 * math.pi)
        return 0.2 + 0.15 * phase

    def produce() -> None:
        number = 0
        while not stopping.wait(pace()):
            number += 1
            customer = chance.choice(CUSTOMERS)
            job = {"job": number, "customer": customer, "kind": chance.choice(["resize", "mail"])}
            if number % 25 == 0:
                job["note"] = "<script>alert(1)</script>"
            jobs.enqueue(database, job, group=customer)
            emails.enqueue(database, f"mail {number} to {customer}@example.com")
            if number % 2 == 0:
                tasks.push(database, f"task {number}", chance.randint(1, 5))

    def work_jobs() -> None:
        while not stopping.is_set():
            lease = jobs.claim(database, 5.0)
            if lease is None:
                stopping.wait(0.1)
                continue
            stopping.wait(chance.uniform(0.2, 0.8))  # the job's work
            if chance.random() < 1 / 6 or "note" in lease.value:
                jobs.dead_letter(database, lease, f"ValueError: job {lease.value['job']} failed")
            else:
                jobs.ack(database, lease)

    def work_emails() -> None:
        while not stopping.is_set():
            taken = emails.dequeue_many(database, 3)
            stopping.wait(0.5 if taken else 0.2)

    def work_tasks() -> None:
        while not stopping.is_set():
            if tasks.pop_min(database) is None:
                stopping.wait(0.3)
            else:
                stopping.wait(0.25)

    bodies = (produce, work_jobs, work_jobs, work_jobs, work_emails, work_tasks)
    threads = [
        threading.Thread(target=body, name=f"fdbqueue-demo-{body.__name__}-{n}", daemon=True)
        for n, body in enumerate(bodies)
    ]
    for thread in threads:
        thread.start()
    return Demo(queues, threads, stopping)
