"""An in-memory FoundationDB with FoundationDB's transaction semantics: a test double.

``memory.open()`` returns a thread-safe :class:`Database` whose objects have the ``fdb``
binding's shapes (``create_transaction``, ``get``/``get_range``/``get_key``, ``set``/``clear``/
``clear_range``, atomic operations, versionstamps, ``watch``, ``snapshot``, conflict ranges,
``commit``/``on_error``/``reset``/``cancel``, ``options``), so fdbqueue and ordinary layer code
run on it unchanged. It is the default of fdbqueue's examples and the backend CI tests on.
Nothing is persisted; it is not a storage engine.

What it models, as ``shared/fdb-semantics.md`` states FoundationDB's behaviour:

* one ordered key space of bytes (memcmp order); system keys (``b"\\xff"`` on) need the
  ``access_system_keys`` / ``read_system_keys`` options, else 2004 (``b"\\xff/metadataVersion"``
  is readable and watchable without them; ``get_key`` of a reference past the readable keys
  raises 2004); like upstream's, those two options do not survive ``on_error``;
* versions that advance about 1,000,000 per second; a read version taken lazily at the first
  read; MVCC reads at that version; the five-second window (1007 for reads, and for commits
  that have read conflict ranges, once the read version is more than 5,000,000 versions old;
  blind writes commit whatever their read version's age, as upstream's resolver decides in
  ``ConflictBatch::addTransaction``, where ``shared/fdb-semantics.md`` says "a commit with
  writes");
* read-your-writes, snapshot reads included; reads served entirely from the transaction's own
  sets and clears reach no database and add no read conflict range; a key the transaction
  already read with a point read is answered from its cache (upstream's ``SnapshotCache``),
  so that re-read never raises 1007;
* range reads are lazy, as the binding's ``FDBRange``: ``get_range`` reads the first batch
  (its errors, and its arguments', are raised where the result is first iterated) and the
  rest as the result is iterated, in batches sized by the streaming mode (``iterator``:
  4 KB growing to 120 KB; ``exact`` needs a limit, else 2210; ``limit=-1`` is no limit);
  iterating again reads again; ``tr[a:b:-1]`` reads in reverse;
* read conflict ranges from non-snapshot reads (each range batch adds only what it covered,
  so an abandoned iteration conflicts only on the batches fetched), write conflict ranges
  from every write; ``add_read_conflict_range``/``_key`` add nothing for the keys the
  transaction set or cleared (upstream ``updateConflictMap``), raise 2005 at once for an
  inverted range and defer 2004 for a range past the readable keys; 1020 at commit when a
  newer commit wrote inside a read conflict range; blind writes never conflict; read-only
  commits do no check;
* atomic operations, versionstamped keys and values, ``get_versionstamp`` (call it before the
  commit; it fails with 2020 when the commit fails); a versionstamped key's write conflict
  range is its final key, added at commit; the writing transaction cannot read its
  versionstamped values nor the keys its versionstamped keys may become (from stamp
  ``(read version + 1, 0)`` up): a read that reaches one raises 1036, a read that stops
  before succeeds;
* a transaction is spent once ``commit`` is called, whether it succeeded or failed: later
  reads, writes, commits and ``get_versionstamp`` fail with 2017 until ``reset()`` or
  ``on_error()``; a second commit applies nothing;
* limits: keys over 10,000 bytes (2102; system keys 30,000; ``clear`` of a longer key does
  nothing; a versionstamped key or value counts its 4-byte offset), values over 100,000 bytes
  (2103), transactions over
  10,000,000 bytes (2101), the size counted as upstream's client counts it (each mutation 40
  bytes plus its parameters, each read and write conflict range 32 bytes plus its keys, after
  the read-your-writes layer's merging; ``get_approximate_size`` returns that figure); like
  the binding, writes (and conflict-range calls) never raise FDBError: their errors surface at
  the next read, ``get_read_version`` or commit, and a cancelled or timed-out transaction
  takes writes and reports at commit; ``set_read_version`` once a read version is set defers
  2010;
* ``on_error``: retryable codes (1007, 1009, 1020, 1021, 1037, 1038, 1042, 1051, 1078, 1213)
  reset the transaction and back off (1007 and 1009: a fixed ``min(10 ms, max_retry_delay)``;
  the others 10 ms doubling, with upstream's random jitter, capped by ``max_retry_delay``, 1 s
  by default); options ``timeout`` (1031), ``retry_limit``, ``max_retry_delay`` survive
  retries; a cancelled, timed-out (1031 whatever the error) or spent transaction raises that;
  when ``on_error`` raises, it cancels the transaction;
* watches that fire when the value changes from what the transaction read, at once when the
  transaction itself changes the key, active after the commit, failing with the commit's
  error; counted from their creation, at most 10,000 outstanding (1032 when made); a watch
  of a key over 10,000 bytes fails with 2102; the pending watches of a transaction reset,
  retried, cancelled or destroyed (``Transaction.destroy``, also on garbage collection)
  before it commits fail with 1025;
* ``Latency(grv, read, commit)``: each read version, read and commit takes that long (outside
  the database lock), so contention behaves as on a networked cluster. As with the binding's
  futures, a read's latency runs from its issue: ``get``, ``get_key`` and ``get_range`` (its
  first batch; each later batch when the iteration hands out the previous batch's last row,
  as ``FDBRange``) are computed at once, at the read version and through the transaction's
  writes made before the call (upstream's write-map snapshot), and their future or range is
  ready once the latency has run: waiting (``wait``, ``value``, ``bytes()``, iterating) sleeps
  only what is left, ``is_ready`` is False until then, ``on_ready`` callbacks (and, under
  :func:`install`, the network thread's) run then. So reads issued together overlap; a
  transaction's first read fetches the read version too (GRV latency, then read latency, for
  every read waiting on it); a commit first waits for the reads still running;
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
* a read at a version the database has not reached (``set_read_version`` ahead of it) fails
  with 1009 after upstream's ``FUTURE_VERSION_DELAY`` (one second), whatever the version: a
  storage server would answer it once the version arrives if that is within the second
  (modelling that would need reads that wait for the version clock);
* ``Database.get_client_status()`` (:meth:`Database.get_client_status`, and the binding's
  under :func:`install`) reports a healthy, initialized client (``"Healthy": true``) with
  empty ``Coordinators`` and ``Connections``: an in-memory database has none to report on,
  nor upstream's other fields (protocol version, available clients, errors);
* the cache of reads holds point reads only: re-reading a range goes to the database (and may
  raise 1007) where upstream's ``SnapshotCache`` may answer it;
* a read is computed when it is issued, not when its request reaches a storage server: the
  read version is the newest committed half a GRV latency after the first read's issue (the
  call that fetches it sleeps that half; upstream's depends on where the proxy's answer
  falls), and 1007 is decided at issue; a second read of a key whose first read is still running is
  answered from the cache, ready with the first (upstream sends a second request);
* ``keys_read`` and ``bytes_read`` (:meth:`Database.stats`) count what upstream's
  ``NativeAPI`` reads return, except that a range read over keys the transaction itself wrote
  counts the pairs it returns (its own writes among them, not the database pairs they hide)
  where upstream counts the database pairs its read-your-writes layer fetched around them, and
  a range read again counts again (see the cache of reads above); ``bytes_written`` counts 40
  bytes a mutation, ``sizeof(MutationRef)`` in 7.1 and 7.3.0 (releases that add checksum
  fields to the structure count a few bytes more a mutation);
* conflict detection is exact per key range (a real resolver may also report conflicts for
  transactions whose read version fell out of its window, and keeps no more than ~5 s);
* versionstamps' 2-byte batch order is always 0 (every commit is its own batch);
* ``get_key`` and KeySelector range endpoints add a read conflict range spanning the reference
  key and the key found, a slight superset of upstream's;
* options: ``timeout``, ``retry_limit``, ``max_retry_delay``, ``size_limit``,
  ``next_write_no_write_conflict_range``, the system-key options and the database's
  ``transaction_*`` defaults and ``max_watches`` take effect; the others are accepted and have
  no effect (the read version is never served from a cache, ``causal_read_risky``,
  ``read_your_writes_disable``, ``snapshot_ryw_disable``, ``bypass_unreadable``, priorities,
  tags, ``report_conflicting_keys``, ... : the docstring of ``fdbqueue/memory/_options.py``
  lists them);
* :class:`FDBError` has the binding's ``code``, ``description`` (bytes, as the binding reads
  it through ``ctypes.c_char_p``) and ``str()`` (``"b'...' (1020)"``), but it is not a
  subclass of ``fdb.FDBError``: that class exists only once ``fdb.api_version()`` has loaded
  libfdb_c (:func:`install` runs the real binding, whose errors are the real class);
* :meth:`Database.advance_time` (a test hook) moves the version clock forward, as a recovery
  does, so tests of the five-second window need not sleep; :meth:`Database.pass_time` lets
  time pass for the versions and for :func:`wall_clock`, the process's wall clock as fdbqueue
  reads it (lease expiry times, deduplication windows, the age of the oldest item), which
  is ``time.time()`` until a test moves it: fdbqueue's own clock adds :func:`time_passed`
  (a hook the package ``fdbqueue`` registers; this package imports nothing of fdbqueue).
* under :func:`install`: a cluster file is only a name (a missing or malformed file is not an
  error, where a real client fails with 2104 or 2105 at the first transaction); network
  options are accepted and ignored; tenants are disabled (2136); the client version is
  ``fdbqueue.memory``;
* the pending watches of a destroyed, uncommitted transaction fail with 1025 a moment later,
  from a helper thread (a finalizer must not complete futures itself), not at once.
"""

from __future__ import annotations

from fdbqueue.memory._database import Database, Latency, check_settings
from fdbqueue.memory._errors import FDBError, is_retryable
from fdbqueue.memory._faults import Faults
from fdbqueue.memory._futures import Future, Key, Value
from fdbqueue.memory._installation import cluster, install, installed
from fdbqueue.memory._keys import KeySelector, KeyValue
from fdbqueue.memory._remote import ServerRefused, ServerUnavailable, connect
from fdbqueue.memory._serving import MemoryServer
from fdbqueue.memory._transaction import RangeResult, Snapshot, Transaction
from fdbqueue.memory._wall_clock import time_passed, wall_clock
from fdbqueue.memory._wire import DEFAULT_PORT

__all__ = [
    "DEFAULT_PORT",
    "Database",
    "FDBError",
    "Faults",
    "Future",
    "Key",
    "KeySelector",
    "KeyValue",
    "Latency",
    "MemoryServer",
    "RangeResult",
    "ServerRefused",
    "ServerUnavailable",
    "Snapshot",
    "Transaction",
    "Value",
    "cluster",
    "connect",
    "install",
    "installed",
    "is_retryable",
    "open",
    "serve",
    "time_passed",
    "wall_clock",
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
    check_settings(latency, faults)
    return Database(latency=latency, seed=seed, faults=faults)


def serve(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    *,
    latency: Latency | None = None,
    faults: Faults | None = None,
    seed: int | None = None,
) -> MemoryServer:
    """A new, empty in-memory database served over TCP to :func:`connect` clients: a
    :class:`MemoryServer`, bound and listening; run its ``serve_forever()`` (or ``start()``,
    in a thread) and ``close()`` it at the end (it is a context manager). Its ``address``
    (``memory://HOST:PORT``) is what clients connect to.

    Args:
        host: the address to listen on (default loopback); any other needs ``token``.
        port: the TCP port (default 4690); 0 picks a free one.
        token: a secret clients must give (compared in constant time), or None.
        latency, faults, seed: as :func:`open`'s (settable later from any client).

    Raises:
        ValueError: ``host`` is not loopback and there is no ``token``.
        OSError: the address cannot be bound (the port is in use, say).
    """
    return MemoryServer(host, port, token, latency=latency, faults=faults, seed=seed)
