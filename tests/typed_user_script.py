"""A user's script, written for ``mypy --strict``: checked by ``tests/test_typing.py``.

It is type-checked, not run by the test suite (it runs, too: ``python
tests/typed_user_script.py``). It uses what a user of fdbqueue writes: a ``Queue[str]`` made
with a codec of the user's own, a ``PriorityQueue[bytes]`` with ``codec="raw"``, a function
decorated with ``@transactional`` whose ``tr`` is annotated as a Transaction and that is called
with a Database, leases, and the same with :mod:`fdbqueue.asyncio`.
"""

from __future__ import annotations

import asyncio

import fdbqueue.asyncio
from fdbqueue import (
    DeadLetter,
    Lease,
    PriorityQueue,
    Queue,
    Subspace,
    TransactionContext,
    Undecodable,
    memory,
    transactional,
)


class TextCodec:
    """Stores ``str`` values as UTF-8: a ``Codec[str]``."""

    def encode(self, value: str) -> bytes:
        """Return ``value`` as UTF-8."""
        return value.encode()

    def decode(self, data: bytes) -> str:
        """Return the text ``data`` holds."""
        return data.decode()


jobs: Queue[str] = Queue(Subspace(("typed", "jobs")), codec=TextCodec())
blobs = PriorityQueue(Subspace(("typed", "blobs")), codec="raw", dedup_window=60)
anything = Queue(Subspace(("typed", "anything")))  # the tuple codec: Queue[Any]


@transactional
def move(tr: memory.Transaction) -> str | None:
    """Move one job into ``blobs`` as bytes, in one transaction; return it."""
    job = jobs.dequeue(tr)
    if job is None:
        return None
    pushed: bool = blobs.push(tr, job.encode(), priority=len(job), dedup_id=job)
    return job if pushed else None


@transactional
def count(tr: TransactionContext, *, extra: int = 0) -> int:
    """Return the items in both queues, plus ``extra``."""
    return jobs.size(tr) + blobs.size(tr) + extra


def lengths(db: memory.Database) -> list[int]:
    """Claim every job under a lease and acknowledge it; return the jobs' lengths."""
    found: list[int] = []
    while (lease := jobs.claim(db, lease=30)) is not None:
        held: Lease[str] = lease
        renewed = jobs.extend(db, held, 60)
        found.append(len(renewed.value))
        jobs.ack(db, renewed)
    return found


def dead_names(db: memory.Database) -> list[str]:
    """The values of the dead letters of ``jobs``, with undecodable ones described."""
    letters: list[DeadLetter[str | Undecodable]] = jobs.dead_letters(db)
    return [
        letter.value if isinstance(letter.value, str) else letter.value.error for letter in letters
    ]


async_jobs = fdbqueue.asyncio.Queue(Subspace(("typed", "async")), codec=TextCodec())
async_tasks = fdbqueue.asyncio.PriorityQueue(
    Subspace(("typed", "async-tasks")), codec="raw", dedup_window=60
)


@fdbqueue.asyncio.transactional
async def take_two(tr: memory.Transaction) -> list[str]:
    """Dequeue up to two jobs of ``async_jobs`` in one transaction."""
    first = await async_jobs.dequeue(tr)
    second = await async_jobs.dequeue(tr)
    return [job for job in (first, second) if job is not None]


async def serve(db: memory.Database) -> list[str]:
    """Enqueue three jobs, take two in one transaction and claim the third; push a task
    once."""
    await async_jobs.enqueue_many(db, ["one", "two", "three"])
    first: bool = await async_tasks.push(db, b"task", 1, dedup_id="task-1")
    again: bool = await async_tasks.push(db, b"task", 2, dedup_id="task-1")
    assert first and not again
    taken = await take_two(db)
    lease = await async_jobs.claim(db, lease=30)
    if lease is not None:
        await async_jobs.ack(db, lease)
        taken.append(lease.value)
    return taken


def main() -> None:
    """Run the script on a fresh in-memory database."""
    db = memory.open()
    jobs.enqueue(db, "resize photo")
    jobs.enqueue_many(db, ["send email", "update index", "archive"])
    moved: str | None = move(db)
    with_transaction: str | None = move(db.create_transaction())  # composes; not committed
    print(moved, with_transaction, count(db, extra=1))

    top: bytes | None = blobs.pop_max(db)
    rest: list[bytes] = blobs.peek_many(db, 10)
    head: str | None = jobs.peek(db)
    print(top, rest, head, lengths(db), dead_names(db))

    anything.enqueue(db, ("a tuple", 1))
    print(anything.dequeue(db))
    print(asyncio.run(serve(db)))


if __name__ == "__main__":
    main()
