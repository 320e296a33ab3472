"""A user's script with mistakes ``mypy --strict`` must report: checked by
``tests/test_typing.py``, which expects an error on each line marked ``# error: <code>``
(and no other error). Never run.
"""

from __future__ import annotations

import fdbqueue.asyncio
from fdbqueue import PriorityQueue, Queue, Subspace, memory, transactional


class TextCodec:
    """Stores ``str`` values as UTF-8: a ``Codec[str]``."""

    def encode(self, value: str) -> bytes:
        """Return ``value`` as UTF-8."""
        return value.encode()

    def decode(self, data: bytes) -> str:
        """Return the text ``data`` holds."""
        return data.decode()


db = memory.open()
words = Queue(Subspace(("mistakes", "words")), codec=TextCodec())
numbers = Queue(Subspace(("mistakes", "numbers")))
blobs = PriorityQueue(Subspace(("mistakes", "blobs")), codec="raw")

numbers.enqueue(42, "wrong")  # error: arg-type
blobs.push(db, b"x", priority="hi")  # error: arg-type
blobs.push(db, "text", priority=1)  # error: arg-type
blobs.push(db, b"x", priority=1, dedup_id=1.5)  # error: arg-type
PriorityQueue(Subspace(("mistakes", "window")), dedup_window="300")  # error: call-overload
words.enqueue(db, 7)  # error: arg-type
Queue(Subspace(("mistakes", "typo")), high_contension=True)  # error: call-overload
Queue(Subspace(("mistakes", "shards")), shards="2")  # error: call-overload
fdbqueue.asyncio.PriorityQueue(Subspace(("a",)), exactly_one=True)  # error: call-overload
numbers.work(db, print, lease=30, concurency=2)  # error: call-arg
numbers.work(db, print, lease="30")  # error: arg-type
numbers.work(db, print)  # error: call-arg


def length(queue: Queue[str]) -> int:
    """Return the next word (a mistake: it is a str, or None)."""
    return queue.dequeue(db)  # error: return-value


@transactional
def take(tr: memory.Transaction) -> bytes | None:
    """Pop the lowest blob."""
    return blobs.pop(tr)


take("not a database")  # error: arg-type


async def pop_text(queue: fdbqueue.asyncio.PriorityQueue[bytes]) -> str | None:
    """Pop the lowest blob (a mistake: it is bytes, or None)."""
    return await queue.pop(db)  # error: return-value


async def work_blobs(queue: fdbqueue.asyncio.PriorityQueue[bytes]) -> None:
    """Run the worker loop (a mistake: a misspelt keyword)."""
    await queue.work(db, print, lease=30, until_emtpy=True)  # error: call-arg
