"""Versionstamped writes: their checks, the keys they make unreadable in their transaction,
their write conflict ranges, and the transaction's versionstamp and commit version.

Upstream rules: ``ReadYourWritesTransaction::atomicOp`` (``fdbclient/ReadYourWrites.cpp``):
the key's length limit counts its 4-byte offset, an invalid offset defers 2000, a
versionstamped key sends no write conflict range, and reading the keys whose stamp would be
at or above ``(read version + 1, 0)`` raises 1036 (``getVersionstampKeyRange``; every stamp
when there is no read version yet); the commit proxy adds the final key's write conflict
range (``ResolutionRequestBuilder::addTransaction``, :func:`stamped_write_ranges`);
``getVersionstamp`` (2021 for a read-only commit, 2020 when the commit failed, from
``commitAndWatch``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fdbqueue.memory._access import KeyAccess
from fdbqueue.memory._atomic import versionstamp_bytes, versionstamp_offset_valid, with_versionstamp
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._futures import Key
from fdbqueue.memory._keys import key_after, to_key, to_value
from fdbqueue.memory._lifecycle import Lifecycle
from fdbqueue.memory._mutations import Mutation, Mutations
from fdbqueue.memory._storage import Range
from fdbqueue.memory._watches import PendingWatches
from fdbqueue.memory._writes import WriteMap

__all__ = ["Versionstamps", "stamped_write_ranges"]


def stamped_write_ranges(
    write_ranges: list[Range], mutations: list[Mutation], versionstamp: bytes
) -> list[Range]:
    """The write conflict ranges a commit at ``versionstamp`` resolves: ``write_ranges`` plus
    each versionstamped key's final key, known only now (the commit proxy's
    ``ResolutionRequestBuilder::addTransaction`` adds it)."""
    stamped = [
        with_versionstamp(mutation[1], versionstamp)
        for mutation in mutations
        if mutation[0] == "versionstamped_key"
    ]
    if stamped:
        return [*write_ranges, *((key, key + b"\x00") for key in stamped)]
    return write_ranges


class Versionstamps:
    """The versionstamped writes of one attempt of a transaction, and its versionstamp."""

    def __init__(
        self,
        access: KeyAccess,
        lifecycle: Lifecycle,
        mutations: Mutations,
        writes: WriteMap,
        watches: PendingWatches,
        read_version: Callable[[], int | None],
    ) -> None:
        self._access = access
        self._lifecycle = lifecycle
        self._mutations = mutations
        self._writes = writes
        self._watches = watches
        self._read_version = read_version
        self.committed_version = -1
        self.future = Key()  # the versionstamp, ready after a successful commit

    def _error(self, key: bytes, param: bytes, stamped: bytes) -> FDBError | None:
        error = self._access.write_error(key, param)
        if error is None and not versionstamp_offset_valid(stamped):
            error = FDBError(2000)
        return error

    def set_key(self, key: Any, param: Any) -> None:
        """``set_versionstamped_key`` (see the module docstring)."""
        key, param = to_key(key), to_value(param)
        if self._lifecycle.dropped_write():
            return
        error = self._error(key, param, key)
        if error is not None:
            self._lifecycle.defer(error)
            return
        offset = int.from_bytes(key[-4:], "little")
        body = key[:-4]
        read_version = self._read_version()
        lowest = versionstamp_bytes(read_version + 1) if read_version is not None else bytes(10)
        begin = body[:offset] + lowest + body[offset + 10 :]
        end = key_after(body[:offset] + b"\xff" * 10 + body[offset + 10 :])
        self._writes.mark_unreadable(begin, min(end, self._access.read_top()))
        self._mutations.stamped(("versionstamped_key", key, param), None)

    def set_value(self, key: Any, param: Any) -> None:
        """``set_versionstamped_value``: the key becomes unreadable in this transaction."""
        key, param = to_key(key), to_value(param)
        if self._lifecycle.dropped_write():
            return
        error = self._error(key, param, param)  # the offset counts (RYW atomicOp)
        if error is not None:
            self._lifecycle.defer(error)
            return
        self._writes.mark_unreadable(key, key_after(key))
        self._mutations.stamped(("versionstamped_value", key, param), (key, key_after(key)))
        self._watches.changed(key, key_after(key), known=False)

    def committed(self, version: int, versionstamp: bytes | None) -> None:
        """The commit succeeded at ``version`` (-1 and no versionstamp when read-only)."""
        self.committed_version = version
        if versionstamp is None:
            self.future.set_error(FDBError(2021))
        else:
            self.future.set_result(versionstamp)

    def fail(self, error: FDBError) -> None:
        """The versionstamp will never come: its future fails with ``error``."""
        self.future.set_error(error)
