"""An in-memory FoundationDB with FoundationDB's transaction semantics: a test double.

``memory.open()`` returns a thread-safe :class:`Database` whose objects have the ``fdb``
binding's shapes (``create_transaction``, ``get``/``get_range``/``get_key``, ``set``/``clear``/
``clear_range``, atomic operations, versionstamps, ``watch``, ``snapshot``, conflict ranges,
``commit``/``on_error``/``reset``/``cancel``, ``options``), so fdbqueue and ordinary layer code
run on it unchanged. It is the default of fdbqueue's examples and the backend CI tests on.
Nothing is persisted; it is not a storage engine.

What it models, as ``shared/fdb-semantics.md`` states FoundationDB's behaviour:

* one ordered key space of bytes (memcmp order); system keys (``b"\\xff"`` on) need the
  ``access_system_keys`` / ``read_system_keys`` options, else 2004;
* versions that advance about 1,000,000 per second; a read version taken lazily at the first
  read; MVCC reads at that version; the five-second window (1007 for reads, and for commits
  that have read conflict ranges, once the read version is more than 5,000,000 versions old;
  blind writes commit whatever their read version's age, as upstream's resolver decides in
  ``ConflictBatch::addTransaction``, where ``shared/fdb-semantics.md`` says "a commit with
  writes");
* read-your-writes, snapshot reads included; reads served entirely from the transaction's own
  sets and clears reach no database and add no read conflict range;
* read conflict ranges from non-snapshot reads (limited range reads add only what they read),
  write conflict ranges from every write; 1020 at commit when a newer commit wrote inside a
  read conflict range; blind writes never conflict; read-only commits do no check;
* atomic operations, versionstamped keys and values (reading them in the writing transaction
  raises 1036), ``get_versionstamp``;
* limits: keys over 10,000 bytes (2102), values over 100,000 bytes (2103), transactions over
  10,000,000 bytes (2101), the size counted as upstream's client counts it (each mutation 40
  bytes plus its parameters, each read and write conflict range 32 bytes plus its keys, after
  the read-your-writes layer's merging; ``get_approximate_size`` returns that figure); like
  the binding, write errors surface at the next read or commit;
* ``on_error``: retryable codes (1007, 1009, 1020, 1021, 1037, 1213) reset the transaction and
  back off (10 ms doubling, with upstream's random jitter, capped by ``max_retry_delay``, 1 s by
  default); options ``timeout`` (1031), ``retry_limit``, ``max_retry_delay`` survive retries;
* watches that fire when the value changes from what the transaction read, active after the
  commit, failing with the commit's error, at most 10,000 outstanding (1032);
* ``Latency(grv, read, commit)``: each read version, read and commit sleeps that long (outside
  the database lock), so contention behaves as on a networked cluster;
* ``Faults(not_committed, commit_unknown_result, transaction_too_old, timed_out, recovery)``:
  per-commit probabilities, drawn from the seeded generator, that a writing commit fails with
  1020, 1021 (applied or not, half the time each, final before the error), 1007, 1031 (not
  applied, or left in flight to land or be dropped later, as a resolver would decide then;
  :meth:`Database.settle` resolves those at once) or 1021 with a cluster recovery (versions
  jump 100,000,000 ahead, commits in flight die, outstanding watches fire);
  ``db.stats()`` counts each.

Known differences from a real cluster:

* single process, no network, no durability, no tenants, no locality or management APIs, no
  ``get_estimated_range_size_bytes`` / ``get_range_split_points``;
* range reads are eager (the binding's ``FDBRange`` fetches lazily in batches), so a range is
  read when ``get_range`` is called, not when it is iterated;
* reads are synchronous: each read's latency is slept when it is issued, so reads issued
  together do not overlap as the binding's futures do; a transaction's first read sleeps the
  GRV and read latencies at once and takes its read version at the end of both (upstream,
  between them), so that read sees data a read latency fresher;
* conflict detection is exact per key range (a real resolver may also report conflicts for
  transactions whose read version fell out of its window, and keeps no more than ~5 s);
* versionstamps' 2-byte batch order is always 0 (every commit is its own batch);
* ``get_key`` and KeySelector range endpoints add a read conflict range spanning the reference
  key and the key found, a slight superset of upstream's;
* the read version is never served from a cache and ``causal_read_risky`` and similar
  options have no effect;
* :meth:`Database.advance_time` (a test hook) moves the version clock forward, so tests of the
  five-second window need not sleep.
"""

from __future__ import annotations

from fdbqueue.memory.database import Database, Latency
from fdbqueue.memory.errors import FDBError, is_retryable
from fdbqueue.memory.faults import Faults
from fdbqueue.memory.futures import Future, Value
from fdbqueue.memory.keys import KeySelector, KeyValue
from fdbqueue.memory.transaction import RangeResult, Snapshot, Transaction

__all__ = [
    "Database",
    "FDBError",
    "Faults",
    "Future",
    "KeySelector",
    "KeyValue",
    "Latency",
    "RangeResult",
    "Snapshot",
    "Transaction",
    "Value",
    "is_retryable",
    "open",
]


def open(
    *, latency: Latency | None = None, faults: Faults | None = None, seed: int | None = None
) -> Database:
    """Open a new, empty in-memory database.

    Args:
        latency: simulated latency of read versions, reads and commits (seconds); None for
            none.
        faults: probabilities that writing commits fail on purpose with 1020, 1021 or 1007
            (:class:`Faults`); None for none. Settable later as ``db.faults``.
        seed: seeds the database's random choices (retry backoff jitter and injected
            faults), so that a single-threaded run is reproducible.

    Returns:
        A thread-safe :class:`Database`.

    Raises:
        TypeError: ``latency`` is not a :class:`Latency`, or ``faults`` not a :class:`Faults`.
    """
    if faults is not None and not isinstance(faults, Faults):
        raise TypeError(f"faults must be a memory.Faults, not {type(faults).__name__}")
    if latency is not None and not isinstance(latency, Latency):
        raise TypeError(f"latency must be a memory.Latency, not {type(latency).__name__}")
    return Database(latency=latency, seed=seed, faults=faults)
