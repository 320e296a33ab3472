"""Producers and consumers in one asyncio event loop, with ``fdbqueue.asyncio``.

An asyncio service (the kind FastAPI, aiohttp or Starlette run) enqueues and consumes jobs
without a thread per call: ``await queue.enqueue(db, job)`` and ``await queue.dequeue(db,
block=True)`` hand FoundationDB's futures to the event loop. In one loop this example runs:

* ``--producers`` tasks that enqueue orders (a few of them delayed with ``delay=``);
* ``--consumers`` tasks that take them with blocking dequeues, in line
  (``high_contention=True``), and record each order's total with an ``async def`` function
  decorated with :func:`fdbqueue.asyncio.transactional`;
* a ticker that shows the loop stays responsive while consumers wait on watches;
* at the end, a consumer blocked on an empty queue is cancelled, as a service shutting down
  would, and the example checks that nothing was lost or taken twice and that no consumer
  was left in line.

Run it with ``python examples/async_service.py`` (in-memory database), or add
``--cluster-file PATH`` for a real cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import Any

from _database import add_database_arguments, describe, open_database, positive

import fdbqueue.asyncio as aq
from fdbqueue import Subspace, memory


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--producers", type=positive, default=3)
    parser.add_argument("--consumers", type=positive, default=4)
    parser.add_argument("--orders", type=int, default=60, help="per producer")
    arguments = parser.parse_args()
    db = open_database(arguments, latency=memory.Latency(grv=0.0005, read=0.0002, commit=0.001))
    print(f"Using {describe(db)}")

    root = Subspace(("async-service",))
    orders = aq.Queue(root["orders"], codec="json", high_contention=True)
    totals = root["totals"]
    await orders.clear(db)
    db.clear_range_startswith(totals.key())

    @aq.transactional
    async def record(tr: Any, order: dict[str, Any]) -> None:
        """Store an order's total (several awaits in one transaction, retried as a whole)."""
        key = totals.pack((order["id"],))
        if (await aq.wait_future(tr.get(key))).present():
            raise AssertionError(f"order {order['id']} taken twice")
        tr[key] = str(order["quantity"] * order["price"]).encode()

    async def produce(producer: int) -> None:
        for number in range(arguments.orders):
            order = {"id": f"{producer}-{number}", "quantity": number % 5 + 1, "price": 3}
            delay = 0.05 if number % 10 == 0 else None  # a few orders are scheduled
            await orders.enqueue(db, order, delay=delay)

    taken: list[str] = []
    expected = arguments.producers * arguments.orders

    async def consume() -> None:
        while len(taken) < expected:
            # waits on a watch without blocking the loop; in line with the other consumers
            order = await orders.dequeue(db, block=True, timeout=0.5)
            if order is not None:
                taken.append(order["id"])
                await record(db, order)

    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    started = time.monotonic()
    await asyncio.gather(
        *(produce(p) for p in range(arguments.producers)),
        *(consume() for _ in range(arguments.consumers)),
    )
    elapsed = time.monotonic() - started

    # A service shutting down cancels a consumer blocked on the empty queue: nothing is lost.
    waiting = asyncio.ensure_future(orders.dequeue(db, block=True))
    await asyncio.sleep(0.1)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    ticker.cancel()

    assert sorted(taken) == sorted(
        f"{p}-{n}" for p in range(arguments.producers) for n in range(arguments.orders)
    ), "an order was lost or taken twice"
    stored = await aq.transactional(_count_totals)(db, totals)
    assert stored == expected, (stored, expected)
    assert await orders.size(db) == 0 and await orders.requests_in_line(db) == 0
    print(
        f"OK: {expected} orders from {arguments.producers} producers taken once each by "
        f"{arguments.consumers} consumers in {elapsed:.2f}s; the loop ticked {ticks} times "
        "meanwhile; a cancelled blocked consumer left nothing behind"
    )


async def _count_totals(tr: Any, totals: Subspace) -> int:
    return len(list(tr.get_range_startswith(totals.key())))


if __name__ == "__main__":
    asyncio.run(main())
