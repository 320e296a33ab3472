"""The ``fdb_transaction_*`` functions of the in-memory client library.

Each call is served by the engine's :class:`fdbqueue.memory.Transaction` behind the handle.
Rules kept from libfdb_c (``bindings/c/fdb_c.cpp``):

* range reads honour the row limit and a byte target chosen by the streaming mode
  (``validate_and_update_parameters``: ``exact`` needs a limit, ``want_all`` reads as
  ``serial``, ``iterator`` grows from 4,096 bytes by half again per iteration up to 120,000;
  each row counts 8 bytes plus its key and value, as ``GetRangeLimits::decrement``), return
  at least one row when there is one, and say whether more remain; the read conflict range
  covers only the rows returned, so an abandoned iteration conflicts on the batches fetched;
* options arrive as codes with a little-endian 64-bit integer, bytes or nothing, and are
  applied by the name the binding's ``fdboptions.py`` gives them to the engine's
  ``tr.options.set_<name>``; options the engine does not model have no effect;
* ``set``, ``clear`` and atomic operations return nothing: the engine reports their errors at
  the next read or commit.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

from fdbqueue.memory.client_handles import Handle, Handles, buffer_bytes, set_out
from fdbqueue.memory.errors import FDBError
from fdbqueue.memory.futures import Future
from fdbqueue.memory.keys import KeySelector

__all__ = ["TransactionFunctions", "apply_option", "decode_option"]

#: Streaming modes (``FDBStreamingMode``) and their byte targets (``fdb_c.cpp``).
WANT_ALL, ITERATOR, EXACT, SMALL, MEDIUM, LARGE, SERIAL = -2, -1, 0, 1, 2, 3, 4
MODE_BYTES = {EXACT: 0, SMALL: 256, MEDIUM: 1000, LARGE: 4096, SERIAL: 120_000}
ITERATION_BYTES = (4096, 6144, 9216, 13824, 20736, 31104, 46656, 69984, 80000, 120000)
CLIENT_INVALID_OPERATION = 2000
EXACT_MODE_WITHOUT_LIMITS = 2210

#: The atomic operation codes (``FDBMutationType``) and the engine's method for each.
ATOMIC_OPERATIONS = {
    2: "add",
    6: "bit_and",
    7: "bit_or",
    8: "bit_xor",
    9: "append_if_fits",
    12: "max",
    13: "min",
    14: "set_versionstamped_key",
    15: "set_versionstamped_value",
    16: "byte_min",
    17: "byte_max",
    20: "compare_and_clear",
}


def decode_option(scope: str, code: int, value: Any, length: int) -> tuple[str, Any]:
    """The option's name in the binding's ``fdboptions`` table ``scope`` and its argument."""
    from fdb import fdboptions  # the binding's generated option table

    found = [
        (name, kind)
        for name, (option_code, _, kind, _) in getattr(fdboptions, scope).items()
        if option_code == code
    ]
    if not found:
        return "", None
    name, kind = found[0]
    data = buffer_bytes(value, length)
    if kind is type(None):
        return name, None
    if kind is int:
        return name, struct.unpack("<q", data)[0]
    return name, data


def apply_option(owner: Any, name: str, argument: Any) -> None:
    """``owner.options.set_<name>(argument)`` on an engine Transaction or Database; nothing
    when the engine lacks the option."""
    setter = getattr(owner.options, "set_" + name, None)
    if setter is None:
        return  # not modelled by the engine: accepted, no effect
    if argument is None:
        setter()
    else:
        setter(argument)


class TransactionFunctions:
    """``fdb_transaction_*``: reads, writes, conflict ranges, commit and retry."""

    def __init__(self, handles: Handles) -> None:
        self.handles = handles

    def fdb_transaction_set_option(self, handle: Any, code: int, value: Any, length: int) -> int:
        name, argument = decode_option("TransactionOption", code, value, length)
        if name:
            try:
                apply_option(self.handles.get(handle), name, argument)
            except FDBError as error:
                return error.code
        return 0

    def fdb_transaction_destroy(self, handle: Any) -> None:
        transaction = self.handles.drop(handle)
        destroy = getattr(transaction, "destroy", None)
        if destroy is not None:
            destroy()

    def fdb_transaction_cancel(self, handle: Any) -> None:
        self.handles.get(handle).cancel()

    def fdb_transaction_reset(self, handle: Any) -> None:
        self.handles.get(handle).reset()

    def fdb_transaction_set_read_version(self, handle: Any, version: int) -> None:
        self.handles.get(handle).set_read_version(version)

    def fdb_transaction_get_read_version(self, handle: Any) -> Handle:
        return self.handles.future(lambda: self.handles.get(handle).get_read_version())

    def _reader(self, handle: Any, snapshot: int) -> Any:
        transaction = self.handles.get(handle)
        return transaction.snapshot if snapshot else transaction

    def fdb_transaction_get(self, handle: Any, key: Any, length: int, snapshot: int) -> Handle:
        reader = self._reader(handle, snapshot)
        data = buffer_bytes(key, length)
        return self.handles.future(lambda: reader.get(data), _value_or_none)

    def fdb_transaction_get_key(
        self, handle: Any, key: Any, length: int, or_equal: int, offset: int, snapshot: int
    ) -> Handle:
        reader = self._reader(handle, snapshot)
        selector = KeySelector(buffer_bytes(key, length), bool(or_equal), offset)
        return self.handles.future(lambda: reader.get_key(selector), bytes)

    def fdb_transaction_get_range(
        self,
        handle: Any,
        begin_key: Any,
        begin_length: int,
        begin_or_equal: int,
        begin_offset: int,
        end_key: Any,
        end_length: int,
        end_or_equal: int,
        end_offset: int,
        limit: int,
        target_bytes: int,
        mode: int,
        iteration: int,
        snapshot: int,
        reverse: int,
    ) -> Handle:
        reader = self._reader(handle, snapshot)
        begin = KeySelector(
            buffer_bytes(begin_key, begin_length), bool(begin_or_equal), begin_offset
        )
        end = KeySelector(buffer_bytes(end_key, end_length), bool(end_or_equal), end_offset)
        limits = _range_limits(limit, target_bytes, mode, iteration)
        if isinstance(limits, int):
            return self.handles.future(lambda: Future.failed(FDBError(limits)))
        rows, byte_target = limits
        return self.handles.future(
            lambda: _read_batch(reader, begin, end, rows, byte_target, bool(reverse))
        )

    def fdb_transaction_set(self, handle: Any, key: Any, kl: int, value: Any, vl: int) -> None:
        self.handles.get(handle).set(buffer_bytes(key, kl), buffer_bytes(value, vl))

    def fdb_transaction_clear(self, handle: Any, key: Any, length: int) -> None:
        self.handles.get(handle).clear(buffer_bytes(key, length))

    def fdb_transaction_clear_range(
        self, handle: Any, begin: Any, begin_length: int, end: Any, end_length: int
    ) -> None:
        self.handles.get(handle).clear_range(
            buffer_bytes(begin, begin_length), buffer_bytes(end, end_length)
        )

    def fdb_transaction_atomic_op(
        self, handle: Any, key: Any, kl: int, param: Any, pl: int, operation: int
    ) -> None:
        method = ATOMIC_OPERATIONS.get(operation)
        transaction = self.handles.get(handle)
        if method is None:
            transaction._defer(FDBError(CLIENT_INVALID_OPERATION))
            return
        getattr(transaction, method)(buffer_bytes(key, kl), buffer_bytes(param, pl))

    def fdb_transaction_add_conflict_range(
        self, handle: Any, begin: Any, begin_length: int, end: Any, end_length: int, kind: int
    ) -> int:
        transaction = self.handles.get(handle)
        add = (
            transaction.add_read_conflict_range
            if kind == 0
            else transaction.add_write_conflict_range
        )
        try:
            add(buffer_bytes(begin, begin_length), buffer_bytes(end, end_length))
        except FDBError as error:
            return error.code
        return 0

    def fdb_transaction_watch(self, handle: Any, key: Any, length: int) -> Handle:
        transaction = self.handles.get(handle)
        data = buffer_bytes(key, length)
        return self.handles.future(lambda: transaction.watch(data))

    def fdb_transaction_commit(self, handle: Any) -> Handle:
        return self.handles.future(self.handles.get(handle).commit)

    def fdb_transaction_get_committed_version(self, handle: Any, out: Any) -> int:
        try:
            version = self.handles.get(handle).get_committed_version()
        except FDBError as error:
            return error.code
        set_out(out, version)
        return 0

    def fdb_transaction_get_approximate_size(self, handle: Any) -> Handle:
        return self.handles.future(self.handles.get(handle).get_approximate_size)

    def fdb_transaction_get_versionstamp(self, handle: Any) -> Handle:
        return self.handles.future(self.handles.get(handle).get_versionstamp, _key_bytes)

    def fdb_transaction_on_error(self, handle: Any, code: int) -> Handle:
        transaction = self.handles.get(handle)
        return self.handles.future(lambda: transaction.on_error(FDBError(code)))


def _value_or_none(value: Any) -> bytes | None:
    """An engine ``get`` result as the C API hands it: bytes, or None when absent."""
    return bytes(value) if value.present() else None


def _key_bytes(key: Any) -> bytes:
    return bytes(getattr(key, "value", key))


def _range_limits(
    limit: int, target_bytes: int, mode: int, iteration: int
) -> tuple[int, int] | int:
    """(row limit, byte target) for a range read, 0 meaning unlimited; or an error code.

    As libfdb_c's ``validate_and_update_parameters``: ``exact`` needs a row or byte limit,
    ``want_all`` reads as ``serial``, ``iterator`` grows its byte target per iteration.
    """
    if limit < 0:
        limit = 0
    if limit == 0 and target_bytes == 0 and mode == EXACT:
        return EXACT_MODE_WITHOUT_LIMITS
    if mode == WANT_ALL:
        mode = SERIAL
    if mode == ITERATOR:
        if iteration <= 0:
            return CLIENT_INVALID_OPERATION
        mode_bytes = ITERATION_BYTES[min(iteration, len(ITERATION_BYTES)) - 1]
    elif mode in MODE_BYTES:
        mode_bytes = MODE_BYTES[mode]
    else:
        return CLIENT_INVALID_OPERATION
    if target_bytes == 0:
        target_bytes = mode_bytes
    elif mode_bytes:
        target_bytes = min(target_bytes, mode_bytes)
    return limit, target_bytes


def _read_batch(
    reader: Any, begin: KeySelector, end: KeySelector, limit: int, target_bytes: int, reverse: bool
) -> tuple[list[tuple[bytes, bytes]], bool]:
    """One batch of a range read: rows until ``limit`` rows or ``target_bytes`` bytes (each row
    counting 8 bytes plus its key and value, as ``GetRangeLimits::decrement``), and whether
    rows remain.

    A snapshot read finds the batch; a reader that is not a snapshot then reads exactly that
    batch again, so the engine adds the read conflict range upstream adds: up to the last row
    returned when more remain, the whole range when the batch reached its end.
    """
    snapshot = getattr(reader, "snapshot", reader)
    wanted = min(limit or sys.maxsize, target_bytes or sys.maxsize)
    probe = 0 if wanted == sys.maxsize else wanted + 1
    found = [
        (bytes(kv.key), bytes(kv.value))
        for kv in snapshot.get_range(begin, end, limit=probe, reverse=reverse)
    ]
    rows: list[tuple[bytes, bytes]] = []
    spent = 0
    for key, value in found:
        if (limit and len(rows) >= limit) or (target_bytes and spent >= target_bytes):
            break
        rows.append((key, value))
        spent += 8 + len(key) + len(value)
    more = len(rows) < len(found)
    if reader is not snapshot:
        list(reader.get_range(begin, end, limit=len(rows) if more else limit, reverse=reverse))
    return rows, more
