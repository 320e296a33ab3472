"""fdbqueue in one page: a FIFO queue and a priority queue.

Run it with ``python examples/quickstart.py`` (in-memory database) or
``python examples/quickstart.py --cluster-file /etc/foundationdb/fdb.cluster``.
"""

from __future__ import annotations

import argparse

from _database import add_database_arguments, describe, open_database

from fdbqueue import PriorityQueue, Queue, Subspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    db = open_database(parser.parse_args())
    print(f"Using {describe(db)}")

    jobs = Queue(Subspace(("quickstart", "jobs")))
    jobs.clear(db)
    for name in ["resize photo", "send email", "update index"]:
        jobs.enqueue(db, name)
        print(f"enqueue {name!r}")
    print(f"size  -> {jobs.size(db)}")
    print(f"peek  -> {jobs.peek(db)!r}")
    while (job := jobs.dequeue(db)) is not None:
        print(f"dequeue -> {job!r}")
    print(f"dequeue on an empty queue -> {jobs.dequeue(db)!r}")

    tasks = PriorityQueue(Subspace(("quickstart", "tasks")))
    tasks.clear(db)
    for task, priority in [("routine", 5), ("urgent", 1), ("later", 9), ("also urgent", 1)]:
        tasks.push(db, task, priority=priority)
        print(f"push {task!r} with priority {priority}")
    print(f"peek_min -> {tasks.peek_min(db)!r}, peek_max -> {tasks.peek_max(db)!r}")
    print(f"pop_min  -> {tasks.pop_min(db)!r}")
    print(f"pop_min  -> {tasks.pop_min(db)!r}  (same priority: oldest first)")
    print(f"pop_max  -> {tasks.pop_max(db)!r}")
    print(f"pop_min  -> {tasks.pop_min(db)!r}")
    print(f"empty    -> {tasks.empty(db)}")


if __name__ == "__main__":
    main()
