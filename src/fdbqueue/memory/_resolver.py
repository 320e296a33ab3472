"""The resolver and the commit's application: a writing commit is checked for conflicts and
age, then applied at a new version, and the watches of the keys it changed fire.

Upstream rules: the resolver's ``ConflictBatch::addTransaction`` (``fdbserver/
ConflictSet``): a transaction with read conflict ranges fails with 1007
``transaction_too_old`` when its read version is more than five seconds old, and with 1020
``not_committed`` when a commit since its read version wrote into them; blind writes commit
whatever their age. The commit proxy then applies the mutations at the commit version, with
versionstamps filled in (:mod:`fdbqueue.memory._versionstamps`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from fdbqueue.memory._atomic import apply_atomic, versionstamp_bytes, with_versionstamp
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._futures import Future
from fdbqueue.memory._mutations import Mutation
from fdbqueue.memory._storage import Range, Storage
from fdbqueue.memory._versions import VersionClock
from fdbqueue.memory._versionstamps import stamped_write_ranges
from fdbqueue.memory._watch_registry import WatchRegistry

__all__ = ["CommitRequest", "Resolver"]


@dataclass(frozen=True)
class CommitRequest:
    """What a commit hands to the resolver: kept as is while a timed-out commit is in flight.
    ``keys_written`` and ``bytes_written``: the mutations as upstream's client sends them
    (merged) and their bytes, counted in the stats once the commit succeeds."""

    read_version: int | None
    read_ranges: list[Range]
    write_ranges: list[Range]
    mutations: list[Mutation]
    keys_written: int = 0
    bytes_written: int = 0

    @property
    def read_only(self) -> bool:
        """True when it writes nothing: upstream, such a commit never reaches the resolver."""
        return not self.mutations and not self.write_ranges

    def copy(self) -> CommitRequest:
        """A request the transaction's later use cannot change."""
        return CommitRequest(
            self.read_version,
            list(self.read_ranges),
            list(self.write_ranges),
            list(self.mutations),
            self.keys_written,
            self.bytes_written,
        )


class Resolver:
    """Checks and applies writing commits; the caller holds the database's lock."""

    def __init__(
        self, storage: Storage, clock: VersionClock, watches: WatchRegistry, stats: Counter[str]
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._watches = watches
        self._stats = stats

    def apply(self, request: CommitRequest, fired: list[Future], genuine: bool = True) -> int:
        """Check ``request`` as the resolver does and apply it at a new version (returned),
        or raise 1007 or 1020. ``genuine``: count those in the stats. The watches it fires
        are added to ``fired``."""
        read_version = request.read_version
        if read_version is not None and request.read_ranges:
            # Upstream's resolver refuses only transactions with read conflict ranges as too
            # old (ConflictBatch::addTransaction); blind writes commit whatever their age.
            if self._clock.too_old(read_version):
                self._stats["too_old"] += int(genuine)
                raise FDBError(1007)
            if self._storage.conflicts(read_version, request.read_ranges):
                self._stats["conflicts"] += int(genuine)
                raise FDBError(1020)
        version = self._clock.commit_version()
        versionstamp = versionstamp_bytes(version)
        storage = self._storage
        write_ranges = stamped_write_ranges(request.write_ranges, request.mutations, versionstamp)
        commit = storage.begin_commit(version, write_ranges)
        for mutation in request.mutations:
            kind = mutation[0]
            if kind == "set":
                storage.write(commit, mutation[1], mutation[2])
            elif kind == "clear":
                for key in storage.keys_in(mutation[1], mutation[2]):
                    storage.write(commit, key, None)
            elif kind == "atomic":
                _, operation, key, param = mutation
                storage.write(commit, key, apply_atomic(operation, storage.current.get(key), param))
            elif kind == "versionstamped_key":
                storage.write(commit, with_versionstamp(mutation[1], versionstamp), mutation[2])
            else:  # versionstamped_value
                storage.write(commit, mutation[1], with_versionstamp(mutation[2], versionstamp))
        storage.prune(self._clock.oldest_kept())
        self._stats["commits"] += 1
        for key in commit.undo:
            self._watches.changed(key, fired)
        return version
