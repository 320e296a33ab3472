"""The ``fdb_transaction_*`` functions of the in-memory client library.

Each call is served by the engine's :class:`fdbqueue.memory.Transaction` behind the handle.
Rules kept from libfdb_c (``bindings/c/fdb_c.cpp``):

* reads are issued by the call and computed then; the future they return is ready once the
  simulated read latency has run from the call (``fdb_future_is_ready`` is 0 until then,
  blocking sleeps what is left, a callback is called then from the network thread), so reads
  the binding issues together overlap, as on a cluster;
* range reads are served one batch per call, sized by the row limit, the caller's byte target
  and the streaming mode as libfdb_c's ``validate_and_update_parameters`` sizes them (the
  engine's :func:`fdbqueue.memory._ranges.batch_limits`); each batch says whether more may
  follow and adds a read conflict range for what it covered only, so an abandoned iteration
  conflicts on the batches it fetched;
* options arrive as codes with a little-endian 64-bit integer, bytes or nothing, and are
  applied by the name the binding's ``fdboptions.py`` gives them to the engine's
  ``tr.options.set_<name>``; options the engine does not model have no effect;
* ``set``, ``clear`` and atomic operations return nothing: the engine reports their errors at
  the next read or commit.
"""

from __future__ import annotations

import struct
from typing import Any

from fdbqueue.memory._client_handles import Handle, Handles, buffer_bytes, set_out
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._keys import KeySelector

__all__ = ["TransactionFunctions", "apply_option", "decode_option"]

CLIENT_INVALID_OPERATION = 2000

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
        return self.handles.future(
            lambda: reader.get_range_batch(
                begin, end, limit, target_bytes, mode, iteration, bool(reverse)
            ),
            _encoded_batch,
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
            transaction.defer_error(FDBError(CLIENT_INVALID_OPERATION))
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


def _encoded_batch(batch: tuple[list[Any], bool]) -> tuple[list[tuple[bytes, bytes]], bool]:
    """A batch of KeyValue rows as the key-value array ``fdb_future_get_keyvalue_array``
    hands out, with its "more" flag."""
    rows, more = batch
    return [(bytes(row.key), bytes(row.value)) for row in rows], more
