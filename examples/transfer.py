"""Composition: move a job from a queue into a priority queue in one transaction.

Both operations take the caller's transaction, so they commit together or not at all. The
second run raises inside the transaction and shows that nothing moved.

Run it with ``python examples/transfer.py`` or add ``--cluster-file PATH``.
"""

from __future__ import annotations

import argparse

from _database import add_database_arguments, describe, open_database

from fdbqueue import PriorityQueue, Queue, Subspace, TransactionContext, transactional

incoming = Queue(Subspace(("transfer", "incoming")))
scheduled = PriorityQueue(Subspace(("transfer", "scheduled")))


@transactional
def schedule_next(tr: TransactionContext, priority: int, fail: bool = False) -> str | None:
    """Dequeue one job and push it with ``priority``, atomically."""
    job: str | None = incoming.dequeue(tr)  # the tuple codec's values are Any
    if job is None:
        return None
    scheduled.push(tr, job, priority=priority)
    if fail:
        raise RuntimeError(f"failed after moving {job!r}: the transaction is not committed")
    return job


def show(db: TransactionContext, label: str) -> None:
    print(f"  {label}: incoming size={incoming.size(db)}, scheduled size={scheduled.size(db)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    db = open_database(parser.parse_args())
    print(f"Using {describe(db)}")
    incoming.clear(db)
    scheduled.clear(db)
    incoming.enqueue_many(db, ["job-1", "job-2"])
    show(db, "start")

    print(f"schedule_next -> {schedule_next(db, priority=1)!r}")
    show(db, "after a committed move")

    try:
        schedule_next(db, priority=2, fail=True)
    except RuntimeError as error:
        print(f"schedule_next raised: {error}")
    show(db, "after a failed move (rolled back)")
    assert incoming.peek(db) == "job-2", "the failed move must leave job-2 in place"
    print(
        f"incoming still starts with {incoming.peek(db)!r}; scheduled: {scheduled.peek_max(db)!r}"
    )


if __name__ == "__main__":
    main()
