"""Threaded soak: producers, consumers and lease workers under 5% injected faults of each kind.

Sixteen threads share one high-contention queue on the in-memory database: 4 producers
enqueue, 6 consumers dequeue, and 6 lease workers claim, then acknowledge, release, or
"crash" (let the lease expire). 5% of writing commits fail with each of 1020, 1021 (applied or
not) and 1007. The check: every item was acknowledged or dequeued exactly once (none lost,
none twice), and an item was delivered again only after its previous lease expired or was
released. CI runs a short soak; ``FDBQUEUE_SOAK_ITEMS=20000 pytest tests/test_soak.py`` runs
a long one.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from collections import Counter

from fdbqueue import LeaseError, Queue, Subspace, memory

ITEMS = int(os.environ.get("FDBQUEUE_SOAK_ITEMS", "400"))
FAULTS = memory.Faults(not_committed=0.05, commit_unknown_result=0.05, transaction_too_old=0.05)
LATENCY = memory.Latency(grv=0.0002, read=0.0001, commit=0.0005)
LEASE_SECONDS = 0.2
VERSIONS_PER_SECOND = 1_000_000


def test_nothing_is_lost_or_duplicated_under_faults():
    db = memory.open(latency=LATENCY, faults=FAULTS, seed=1)
    queue = Queue(Subspace(("soak",)), high_contention=True, max_deliveries=None)
    lock = threading.Lock()
    finished: Counter[int] = Counter()  # value -> times acknowledged or dequeued
    claims: dict[int, list[tuple[int, int, str]]] = {}  # value -> (claimed at, expiry, how)
    errors: list[BaseException] = []
    done = threading.Event()

    def record_finished(value: int) -> None:
        with lock:
            finished[value] += 1
            if sum(finished.values()) >= ITEMS:
                done.set()

    def produce(values: range) -> None:
        for value in values:
            queue.enqueue(db, value)

    def consume() -> None:
        while not done.is_set():
            value = queue.dequeue(db, block=True, timeout=0.05)
            if value is not None:
                record_finished(value)

    def work(seed: int) -> None:
        chance = random.Random(seed)
        while not done.is_set():
            lease = queue.claim(db, lease=LEASE_SECONDS)
            if lease is None:
                time.sleep(0.01)
                continue
            claimed_at = lease.expiry_version - int(LEASE_SECONDS * VERSIONS_PER_SECOND)
            roll = chance.random()
            how = "ack" if roll < 0.8 else "release" if roll < 0.9 else "crash"
            with lock:
                claims.setdefault(lease.value, []).append((claimed_at, lease.expiry_version, how))
            if how == "crash":
                continue  # the lease expires; the item is delivered again
            try:
                if how == "ack":
                    queue.ack(db, lease)
                    record_finished(lease.value)
                else:
                    queue.release(db, lease)
            except LeaseError:  # too slow: expired; the item is delivered again
                with lock:
                    history = claims[lease.value]
                    mine = history.index((claimed_at, lease.expiry_version, how))
                    history[mine] = (claimed_at, lease.expiry_version, "expired")

    def guarded(target, *args):
        def run():
            try:
                target(*args)
            except BaseException as error:
                errors.append(error)
                done.set()

        return threading.Thread(target=run)

    share = ITEMS // 4
    threads = [
        guarded(produce, range(n * share, ITEMS if n == 3 else (n + 1) * share)) for n in range(4)
    ]
    threads += [guarded(consume) for _ in range(6)]
    threads += [guarded(work, n) for n in range(6)]
    for thread in threads:
        thread.start()
    done.wait(timeout=120 + ITEMS / 20)
    done.set()
    for thread in threads:
        thread.join(30)
    assert not errors, errors

    assert sorted(finished) == list(range(ITEMS)), "an item was lost"
    assert max(finished.values()) == 1, "an item was acknowledged or dequeued twice"
    stats = db.stats()
    for kind in ("not_committed", "commit_unknown_result", "transaction_too_old"):
        assert stats[f"injected_{kind}"] > 0
    for value, history in claims.items():
        history.sort()  # by claim version: threads record their claims in any order
        for (_, expiry, how), (claimed_at, _, _) in itertools.pairwise(history):
            # Delivered again only once the previous lease was over: released, or expired.
            assert how == "release" or claimed_at > expiry, (value, history)
