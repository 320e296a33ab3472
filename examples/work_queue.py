"""Producers and consumers sharing one queue, with a network-like latency model.

N producer threads enqueue items while M consumer threads dequeue them. At the end it checks
that every item was processed exactly once and prints the wall time and, on the in-memory
database, the transactions, conflicts and retries from ``db.stats()``: enqueues never
conflict, while consumers contend for the front of the queue.

Run it with ``python examples/work_queue.py --producers 4 --consumers 4 --items 500`` or add
``--cluster-file PATH`` for a real cluster.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter

from _database import add_database_arguments, describe, open_database, positive

from fdbqueue import Queue, Subspace, memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--producers", type=positive, default=4)
    parser.add_argument("--consumers", type=positive, default=4)
    parser.add_argument("--items", type=int, default=400, help="items per producer")
    parser.add_argument("--grv", type=float, default=0.001, help="read version latency, s")
    parser.add_argument("--read", type=float, default=0.0005, help="read latency, s")
    parser.add_argument("--commit", type=float, default=0.003, help="commit latency, s")
    arguments = parser.parse_args()
    latency = memory.Latency(grv=arguments.grv, read=arguments.read, commit=arguments.commit)
    db = open_database(arguments, latency=latency)
    print(f"Using {describe(db)}")

    queue = Queue(Subspace(("work_queue", "jobs")))
    queue.clear(db)
    processed: Counter[tuple[int, int]] = Counter()
    lock = threading.Lock()
    producers_done = threading.Event()

    def produce(producer: int) -> None:
        for sequence in range(arguments.items):
            queue.enqueue(db, (producer, sequence))

    def consume() -> None:
        while True:
            item = queue.dequeue(db)
            if item is None:
                if producers_done.is_set() and queue.empty(db):
                    return
                time.sleep(0.001)
                continue
            with lock:
                processed[tuple(item)] += 1

    started = time.perf_counter()
    producers = [threading.Thread(target=produce, args=(n,)) for n in range(arguments.producers)]
    consumers = [threading.Thread(target=consume) for _ in range(arguments.consumers)]
    for thread in producers + consumers:
        thread.start()
    for thread in producers:
        thread.join()
    producers_done.set()
    for thread in consumers:
        thread.join()
    elapsed = time.perf_counter() - started

    expected = arguments.producers * arguments.items
    duplicated = sum(1 for count in processed.values() if count > 1)
    print(
        f"items processed: {sum(processed.values())} of {expected} "
        f"({len(processed)} distinct, {duplicated} duplicated)"
    )
    print(f"wall time: {elapsed:.2f} s ({expected / elapsed:.0f} items/s)")
    if isinstance(db, memory.Database):
        stats = db.stats()
        print(
            f"transactions: {stats['transactions']}, commits: {stats['commits']}, "
            f"conflicts: {stats['conflicts']}, retries: {stats['retries']}"
        )
    if len(processed) != expected or duplicated:
        raise SystemExit("an item was lost or duplicated")


if __name__ == "__main__":
    main()
