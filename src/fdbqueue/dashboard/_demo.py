"""``fdbqueue --memory dashboard --demo``: a small live workload in the dashboard's process, so
that one command shows a moving dashboard (:class:`Demo`, :func:`start_demo`): items, jobs
(:meth:`~fdbqueue.Queue.submit`) and a real worker loop (:meth:`~fdbqueue.Queue.work`).

The workload moves in steps of :data:`DEMO_TICK` seconds of its own time (:meth:`Demo.step`):
:func:`start_demo` runs them in a thread at the wall clock's pace, and a test runs minutes of
them without waiting. It reaches a steady state: on average its workers take more than its
producers make, the producers pause while a queue holds :data:`DEMO_BACKLOG` ready items, and
an operator of the demo purges the oldest dead letters once there are more than
:data:`DEMO_DEAD_LETTERS`. The worker loop of ``demo/reports`` runs in a thread of its own,
at the wall clock's pace, only once :meth:`Demo.start` started it (a test's steps submit
reports that nothing takes, up to five).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from typing import Any

from fdbqueue import Lease, LeaseError
from fdbqueue.dashboard._figures import AnyQueue
from fdbqueue.priority import PriorityQueue
from fdbqueue.queue import Queue

__all__ = ["DEMO_BACKLOG", "DEMO_DEAD_LETTERS", "DEMO_TICK", "Demo", "start_demo"]

#: Seconds of the workload's time one :meth:`Demo.step` makes.
DEMO_TICK = 0.1
#: Ready items at which the producers stop adding to a queue until its workers took some.
DEMO_BACKLOG = 100
#: Dead letters above which the demo purges the oldest, down to :data:`DEAD_LETTERS_KEPT`.
DEMO_DEAD_LETTERS = 30
DEAD_LETTERS_KEPT = 20
#: The customers whose jobs go in message groups, one group each.
CUSTOMERS = ("acme", "globex", "initech")
#: Workers of ``demo/jobs``, and the seconds one job takes them (uniform between the two).
WORKERS = 3
WORK_SECONDS = (0.3, 0.9)
#: Seconds a worker's lease lasts (longer than any job: the demo's leases do not expire).
LEASE_SECONDS = 30.0
#: Seconds of the producers' wave: their pace rises and falls over it.
WAVE_SECONDS = 60.0
#: Every this many seconds a burst of :data:`BURST` emails arrives.
BURST_EVERY, BURST = 20.0, 30
#: Items per second the workers of ``demo/emails`` and ``demo/tasks`` take.
EMAILS_TAKEN, TASKS_TAKEN = 6.0, 2.5
#: Every this many seconds a report job is submitted to ``demo/reports``, unless as many as
#: :data:`REPORT_BACKLOG` wait (none do while its worker loop runs; a test's steps, which run
#: no loop, stop there).
REPORT_EVERY, REPORT_BACKLOG = 2.0, 5
#: Seconds one report takes its worker loop (uniform between the two), and the chance that
#: one attempt fails (retried after a backoff, dead after three deliveries).
REPORT_SECONDS = (0.5, 2.5)
REPORT_FAILS = 0.25
#: Every this many-th report has a title holding ``<script>`` and always fails.
REPORT_POISON = 10
#: Seconds the records of the demo's finished jobs are kept (``result_ttl``).
DEMO_RESULT_TTL = 300.0


class QuietReports(logging.Filter):
    """Drops the worker loop's warnings about ``demo/reports`` (its failures are the demo's
    own, shown on the jobs' pages; logged, they would fill the dashboard's terminal)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "('demo', 'reports')" not in record.getMessage()


#: The logger of the worker loop (docs/observability.rst).
WORKER_LOGGER = logging.getLogger("fdbqueue.worker")


class Demo:
    """The demo workload on ``database``, under the prefix ``("demo", ...)``; nothing runs
    until :meth:`step` or :meth:`start`.

    Four queues (:attr:`queues`): ``demo/jobs`` (a JSON Queue of jobs,
    :meth:`~fdbqueue.Queue.submit`, in message groups, one per customer; its three workers
    take 0.3 to 0.9 s a job and fail about one in six into the dead letters, and every 25th
    job, a value holding ``<script>`` to show escaping, always), ``demo/emails`` (a Queue of
    two shards, with a burst of 30 emails every 20 s), ``demo/tasks`` (a PriorityQueue,
    priorities 1 to 5) and ``demo/reports`` (a JSON Queue of jobs, one every 2 s while
    fewer than 5 wait, run by a real worker loop, :meth:`~fdbqueue.Queue.work`, of two
    threads once :meth:`start` ran: 0.5 to 2.5 s a report, a result kept, one attempt in
    four failing with a traceback and retried after a backoff, every 10th report, whose
    title holds ``<script>``, always failing, dead after three deliveries). The producers
    make 2 to 6 jobs and emails a second (half as many tasks), rising and falling over a
    minute; the workers take about 6 jobs, 6 emails and 2.5 tasks a second. Finished jobs'
    records are kept 5 minutes.

    Args:
        database: where the queues live (the in-memory database, usually).
        seed: seeds the workload's choices (None: a random one).
    """

    def __init__(self, database: Any, *, seed: int | None = None) -> None:
        self.database = database
        self.jobs: Queue[Any] = Queue(
            ("demo", "jobs"), codec="json", max_deliveries=3, result_ttl=DEMO_RESULT_TTL
        )
        self.emails: Queue[Any] = Queue(("demo", "emails"), shards=2)
        self.tasks: PriorityQueue[Any] = PriorityQueue(("demo", "tasks"))
        self.reports: Queue[Any] = Queue(
            ("demo", "reports"), codec="json", max_deliveries=3, result_ttl=DEMO_RESULT_TTL
        )
        #: the demo's queues by display name, for :func:`~fdbqueue.dashboard.create_app`
        self.queues: dict[str, AnyQueue] = {
            "demo/jobs": self.jobs,
            "demo/emails": self.emails,
            "demo/tasks": self.tasks,
            "demo/reports": self.reports,
        }
        #: the thread :meth:`start` runs the steps in
        self.threads: list[threading.Thread] = []
        self.stopping = threading.Event()
        self.chance = random.Random(seed)
        #: the worker loop's choices (its own: it runs in other threads)
        self.luck = random.Random(None if seed is None else seed + 1)
        self.reported = 0  # reports submitted, which number them
        self.steps = 0
        self.made = 0  # jobs made, which number them
        #: items owed (producers) and takes owed (workers), in fractions of one
        self.owed = {"made": 0.0, "emails": 0.0, "tasks": 0.0}
        #: the jobs the workers hold: each lease, when its work ends, and whether it fails
        self.working: list[tuple[Lease[Any], float, bool]] = []

    @property
    def seconds(self) -> float:
        """The workload's time: seconds of the steps made so far."""
        return self.steps * DEMO_TICK

    def pace(self) -> float:
        """Jobs and emails the producers make per second now: 2 to 6 over a minute's wave."""
        return 4.0 + 2.5 * math.sin(self.seconds / WAVE_SECONDS * 2 * math.pi)

    def step(self) -> None:
        """Make :data:`DEMO_TICK` seconds of the workload: the producers' items, the workers'
        takes, acknowledgements and failures, and (every second) the purge of old dead
        letters. A few transactions of each kind, each on its own."""
        self.steps += 1
        self.produce()
        self.work_jobs()
        self.work_emails_and_tasks()
        if self.steps % round(1 / DEMO_TICK) == 0:
            self.tidy()

    def produce(self) -> None:
        database = self.database
        self.owed["made"] += self.pace() * DEMO_TICK
        count, self.owed["made"] = divmod(self.owed["made"], 1.0)
        burst = self.steps % round(BURST_EVERY / DEMO_TICK) == 0
        if burst and self.emails.size(database) < DEMO_BACKLOG:
            self.emails.enqueue_many(database, [f"newsletter {n}" for n in range(BURST)])
        for _ in range(int(count)):
            self.made += 1
            number = self.made
            customer = self.chance.choice(CUSTOMERS)
            job: dict[str, Any] = {
                "job": number,
                "customer": customer,
                "kind": self.chance.choice(["resize", "mail"]),
            }
            if number % 25 == 0:
                job["note"] = "<script>alert(1)</script>"
            if self.jobs.size(database) < DEMO_BACKLOG:
                self.jobs.submit(database, job, group=customer)
            if self.emails.size(database) < DEMO_BACKLOG:
                self.emails.enqueue(database, f"mail {number} to {customer}@example.com")
            if number % 2 == 0 and self.tasks.size(database) < DEMO_BACKLOG:
                self.tasks.push(database, f"task {number}", self.chance.randint(1, 5))
        report_due = self.steps % round(REPORT_EVERY / DEMO_TICK) == 0
        if report_due and self.reports.size(database) < REPORT_BACKLOG:
            self.reported += 1
            number = self.reported
            title = f"sales of {self.chance.choice(CUSTOMERS)}, week {number % 52 + 1}"
            if number % REPORT_POISON == 0:
                title = "<script>alert(1)</script>"
            self.reports.submit(database, {"report": number, "title": title})

    def report(self, value: Any) -> dict[str, Any]:
        """The worker loop's handler of ``demo/reports``: a while of work, then a result, or
        a failure (a ``ConnectionError``, as a report's backend would raise: retried after a
        backoff)."""
        time.sleep(self.luck.uniform(*REPORT_SECONDS))
        if value["report"] % REPORT_POISON == 0:
            raise ValueError(f"cannot render the title {value['title']}")
        if self.luck.random() < REPORT_FAILS:
            raise ConnectionError(f"report {value['report']}: the warehouse did not answer")
        return {"report": value["report"], "rows": self.luck.randint(10, 5000), "ok": True}

    def work_reports(self) -> None:
        """Run the worker loop of ``demo/reports`` until :meth:`stop` (its warnings about the
        reports' failures dropped: :class:`QuietReports`)."""
        quiet = QuietReports()
        WORKER_LOGGER.addFilter(quiet)
        try:
            self.reports.work(
                self.database,
                self.report,
                stop=self.stopping,
                lease=LEASE_SECONDS,
                concurrency=2,
                backoff=1.0,
                max_backoff=4.0,
                handle_signals=False,
            )
        finally:
            WORKER_LOGGER.removeFilter(quiet)

    def work_jobs(self) -> None:
        database, now = self.database, self.seconds
        still = []
        for lease, done_at, fails in self.working:
            if done_at > now:
                still.append((lease, done_at, fails))
                continue
            try:
                if fails:
                    number = lease.value["job"]
                    self.jobs.dead_letter(database, lease, f"ValueError: job {number} failed")
                else:
                    self.jobs.ack(database, lease)
            except LeaseError:  # it expired (the process stalled): its item is back
                pass
        self.working = still
        while len(self.working) < WORKERS:
            claimed = self.jobs.claim(database, LEASE_SECONDS)
            if claimed is None:
                break
            fails = self.chance.random() < 1 / 6 or "note" in claimed.value
            self.working.append((claimed, now + self.chance.uniform(*WORK_SECONDS), fails))

    def work_emails_and_tasks(self) -> None:
        database = self.database
        self.owed["emails"] += EMAILS_TAKEN * DEMO_TICK
        self.owed["tasks"] += TASKS_TAKEN * DEMO_TICK
        emails, self.owed["emails"] = divmod(self.owed["emails"], 1.0)
        if emails:
            self.emails.dequeue_many(database, int(emails))
        tasks, self.owed["tasks"] = divmod(self.owed["tasks"], 1.0)
        for _ in range(int(tasks)):
            if self.tasks.pop_min(database) is None:
                break

    def tidy(self) -> None:
        """Purge the oldest dead letters of ``demo/jobs`` and ``demo/reports`` down to
        :data:`DEAD_LETTERS_KEPT` once there are more than :data:`DEMO_DEAD_LETTERS`."""
        database = self.database
        for queue in (self.jobs, self.reports):
            count = len(queue.dead_letters(database, DEMO_DEAD_LETTERS + 1))
            if count > DEMO_DEAD_LETTERS:  # (more than counted, if any: at the next tidy)
                queue.purge_dead_letters(database, count - DEAD_LETTERS_KEPT)

    def start(self) -> None:
        """Run the steps in a daemon thread, one every :data:`DEMO_TICK` seconds of the wall
        clock (catching up when one was late, by at most a second), and the worker loop of
        ``demo/reports`` in another, until :meth:`stop`."""
        for target, name in ((self.run, "fdbqueue-demo"), (self.work_reports, "fdbqueue-demo-w")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self.threads.append(thread)
            thread.start()

    def run(self) -> None:
        due = time.monotonic()
        while not self.stopping.is_set():
            self.step()
            due = max(due + DEMO_TICK, time.monotonic() - 1.0)
            self.stopping.wait(max(0.0, due - time.monotonic()))

    def stop(self) -> None:
        """Stop the steps and the worker loop (after its running reports) and wait for their
        threads (at most a few seconds each)."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=5)


def start_demo(database: Any, *, seed: int | None = None) -> Demo:
    """Start the demo workload (:class:`Demo`) on ``database``, in a daemon thread of this
    process.

    Args:
        database: where the queues live (the in-memory database, usually).
        seed: seeds the workload's choices (None: a random one).

    Returns:
        The running :class:`Demo`; its ``queues`` go to :func:`create_app`, its ``stop``
        ends it.
    """
    demo = Demo(database, seed=seed)
    demo.start()
    return demo
