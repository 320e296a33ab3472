"""A stand-in for libfdb_c, FoundationDB's C client library, over the in-memory database.

The ``fdb`` Python binding (``fdb/impl.py``) talks to the cluster only through the C API of
libfdb_c, loaded with ``ctypes.CDLL``: it creates databases, transactions and futures as opaque
pointers, passes keys as byte buffers, reads results through out-parameters and is told of
ready futures through callbacks. :class:`ClientLibrary` answers those same calls (the names,
arguments and error codes of ``bindings/c/foundationdb/fdb_c.h``), serving them from
:class:`fdbqueue.memory.Database` engines, one per cluster file. So the binding's own code
(``Database``, ``Transaction``, ``FDBRange``, ``Value``, futures, ``fdb.transactional``,
options, the directory layer) runs for real with no server; see :func:`fdbqueue.memory.install`.

How the C API's rules are kept (upstream ``bindings/c/fdb_c.cpp`` and ``fdb_c.h``):

* pointers are handles: every database, transaction and future is a non-zero integer that
  stays valid until its ``*_destroy`` call;
* futures: each call that returns ``FDBFuture*`` gets a handle whose result or error code is
  read by ``fdb_future_get_*``; destroying a future that is not ready cancels it (a pending
  watch stops); ``fdb_future_set_callback`` calls the callback at once, on the calling thread,
  when the future is ready, and otherwise later from the network thread (the thread running
  ``fdb_run_network``), as libfdb_c does;
* range reads: ``fdb_transaction_get_range`` honours the row limit and a byte target chosen by
  the streaming mode (``validate_and_update_parameters``: iterator mode grows from 4,096 bytes
  by half again per iteration up to 120,000), returns at least one row when there is one, and
  says whether more rows remain; the engine adds a read conflict range only for the rows
  returned, so an abandoned iteration conflicts only on the batches it fetched;
* options arrive as codes with a little-endian 64-bit integer, bytes or nothing, and are
  applied by name (the binding's ``fdboptions.py`` names them) to the engine's
  ``tr.options.set_<name>``; a database's ``transaction_*`` options become defaults of the
  transactions it creates; options the engine does not model are accepted and have no effect;
* errors: calls that return ``fdb_error_t`` return the code; void calls (``set``, ``clear``,
  atomic operations, conflict ranges of writes) never fail, the engine reports their errors at
  the next read or commit.

Not served: tenants (``fdb_database_open_tenant`` fails with 2130, ``tenant_not_found``; the
in-memory database has none), ``get_estimated_range_size_bytes``, ``get_range_split_points``,
``get_addresses_for_key``, client status and change feeds: each fails with 2000
(``client_invalid_operation``) naming itself. The cluster file is only a name: no file needs to
exist, and the same name (after ``os.path.abspath``) is the same in-memory cluster.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import queue
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any

from fdbqueue.memory.database import Database, Latency
from fdbqueue.memory.errors import DESCRIPTIONS, FDBError, is_retryable
from fdbqueue.memory.faults import Faults
from fdbqueue.memory.futures import Future
from fdbqueue.memory.keys import KeySelector

__all__ = ["ClientLibrary", "Handle"]

#: ``fdb_error_predicate`` codes (``fdb_c_options.g.h``: FDBErrorPredicate).
RETRYABLE_PREDICATE = 50000
MAYBE_COMMITTED_PREDICATE = 50001
RETRYABLE_NOT_COMMITTED_PREDICATE = 50002

#: Streaming modes (``FDBStreamingMode``) and their byte targets (``fdb_c.cpp``).
WANT_ALL, ITERATOR, EXACT, SMALL, MEDIUM, LARGE, SERIAL = -2, -1, 0, 1, 2, 3, 4
MODE_BYTES = {EXACT: 0, SMALL: 256, MEDIUM: 1000, LARGE: 4096, SERIAL: 120_000}
ITERATION_BYTES = (4096, 6144, 9216, 13824, 20736, 31104, 46656, 69984, 80000, 120000)

#: Error codes the C API returns for bad calls (``error_definitions.h``).
CLIENT_INVALID_OPERATION = 2000
NETWORK_ALREADY_SETUP = 2009
EXACT_MODE_WITHOUT_LIMITS = 2210
TENANT_NOT_FOUND = 2131
API_VERSION_NOT_SUPPORTED = 2203
API_VERSION_ALREADY_SET = 2201

Handle = int

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


def _buffer(data: Any, length: int) -> bytes:
    """The ``length`` bytes a C buffer argument holds (the binding passes ``bytes``)."""
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data[:length]
    return ctypes.string_at(data, length)


def _set_out(argument: Any, value: Any) -> None:
    """Store ``value`` in an out-parameter passed as ``ctypes.byref(obj)`` or a pointer."""
    target = getattr(argument, "_obj", None)
    if target is None:
        target = argument.contents
    target.value = value


def _point_out(argument: Any, address: int) -> None:
    """Make the pointer an out-parameter refers to point at ``address``."""
    target = getattr(argument, "_obj", None)
    if target is None:
        target = argument.contents
    ctypes.c_void_p.from_address(ctypes.addressof(target)).value = address


class _Future:
    """What a ``FDBFuture*`` handle refers to: an engine future plus buffers handed out."""

    __slots__ = ("buffers", "convert", "engine_future")

    def __init__(self, engine_future: Future, convert: Callable[[Any], Any] | None = None):
        self.engine_future = engine_future
        self.convert = convert
        self.buffers: list[Any] = []  # kept alive until fdb_future_destroy

    def outcome(self) -> tuple[Any, int]:
        """Wait until ready; (result, 0) or (None, error code)."""
        try:
            result = self.engine_future.wait()
        except FDBError as error:
            return None, error.code
        return (self.convert(result) if self.convert else result), 0


class _Function:
    """One C function: carries ``argtypes``/``restype``/``errcheck`` as ctypes' do."""

    def __init__(self, name: str, implementation: Callable[..., Any] | None) -> None:
        self.__name__ = name
        self.implementation = implementation
        self.argtypes: Any = None
        self.restype: Any = None
        self.errcheck: Any = None

    def __call__(self, *arguments: Any) -> Any:
        if self.implementation is None:
            raise FDBError(CLIENT_INVALID_OPERATION)
        result = self.implementation(*arguments)
        if self.errcheck is not None:
            return self.errcheck(result, self, arguments)
        return result


class ClientLibrary:
    """The object ``ctypes.CDLL("libfdb_c...")`` returns once :func:`memory.install` ran.

    Attribute access gives the C functions (``library.fdb_transaction_get``, ...); the clusters
    are :class:`fdbqueue.memory.Database` engines, one per cluster file (:meth:`cluster`).
    Thread-safe.
    """

    def __init__(
        self,
        *,
        latency: Latency | None = None,
        faults: Faults | None = None,
        seed: int | None = None,
    ) -> None:
        self.latency = latency
        self.faults = faults
        self.seed = seed
        self._functions: dict[str, _Function] = {}
        self._objects: dict[Handle, Any] = {}
        self._handles = itertools.count(0x1000, 0x10)
        self._lock = threading.Lock()
        self._clusters: dict[str, Database] = {}
        self._database_defaults: dict[Handle, dict[str, Any]] = {}
        self._callbacks: queue.SimpleQueue[Callable[[], Any] | None] = queue.SimpleQueue()
        self._network_setup = False
        self._api_version = 0
        self._header_version = 0

    # -- clusters -----------------------------------------------------------------------------

    @staticmethod
    def cluster_name(cluster_file: str | bytes | None) -> str:
        """The name a cluster file stands for: its absolute path, or the default's."""
        if isinstance(cluster_file, bytes):
            cluster_file = cluster_file.decode()
        if not cluster_file:
            cluster_file = os.environ.get("FDB_CLUSTER_FILE") or "fdb.cluster"
        return os.path.abspath(cluster_file)

    def cluster(self, cluster_file: str | bytes | None = None) -> Database:
        """The in-memory database behind ``fdb.open(cluster_file)``, created on first use."""
        name = self.cluster_name(cluster_file)
        with self._lock:
            database = self._clusters.get(name)
            if database is None:
                database = Database(latency=self.latency, faults=self.faults, seed=self.seed)
                self._clusters[name] = database
            return database

    # -- the C functions ----------------------------------------------------------------------

    def __getattr__(self, name: str) -> _Function:
        if not name.startswith("fdb_"):
            raise AttributeError(name)
        functions: dict[str, _Function] = self.__dict__["_functions"]
        function = functions.get(name)
        if function is None:
            function = _Function(name, getattr(self, "_" + name, None))
            functions[name] = function
        return function

    def _new(self, thing: Any) -> Handle:
        with self._lock:
            handle = next(self._handles)
            self._objects[handle] = thing
        return handle

    @staticmethod
    def _number(handle: Any) -> Handle:
        """A handle as an int: the binding passes ``c_void_p`` objects or ints."""
        number = handle.value if isinstance(handle, ctypes.c_void_p) else handle
        return int(number or 0)

    def _get(self, handle: Any) -> Any:
        return self._objects[self._number(handle)]

    def _future_at(self, handle: Any) -> _Future:
        future: _Future = self._objects[self._number(handle)]
        return future

    def _drop(self, handle: Any) -> Any:
        with self._lock:
            return self._objects.pop(self._number(handle), None)

    def _future(
        self, call: Callable[[], Any], convert: Callable[[Any], Any] | None = None
    ) -> Handle:
        """A future handle for ``call()``: its engine future, or its FDBError as a failed one."""
        try:
            engine_future = call()
        except FDBError as error:
            engine_future = Future.failed(error)
        if not isinstance(engine_future, Future):
            engine_future = Future.completed(engine_future)
        return self._new(_Future(engine_future, convert))

    # api and network

    def _fdb_get_max_api_version(self) -> int:
        """The loading binding's own header version: every version it knows is served."""
        if self._header_version:
            return self._header_version
        import fdb

        header = getattr(fdb, "LATEST_API_VERSION", None)
        if header is None:
            header = getattr(sys.modules.get("fdb.apiversion"), "LATEST_API_VERSION", None)
        return int(header) if header else 10_000

    def _fdb_select_api_version_impl(self, runtime_version: int, header_version: int) -> int:
        if self._api_version:
            return 0 if runtime_version == self._api_version else API_VERSION_ALREADY_SET
        if runtime_version > header_version or runtime_version < 13:
            return API_VERSION_NOT_SUPPORTED
        self._api_version, self._header_version = runtime_version, header_version
        return 0

    def _fdb_get_client_version(self) -> bytes:
        return b"fdbqueue.memory"

    def _fdb_get_error(self, code: int) -> bytes:
        if code == 0:
            return b"Success"
        return DESCRIPTIONS.get(code, "An unknown error occurred").encode()

    def _fdb_error_predicate(self, predicate: int, code: int) -> int:
        if predicate == RETRYABLE_PREDICATE:
            return int(is_retryable(code))
        if predicate == MAYBE_COMMITTED_PREDICATE:
            return int(code in (1021, 1039))
        if predicate == RETRYABLE_NOT_COMMITTED_PREDICATE:
            return int(is_retryable(code) and code not in (1021, 1039))
        return 0

    def _fdb_network_set_option(self, option: int, value: Any, length: int) -> int:
        return 0

    def _fdb_setup_network(self) -> int:
        if self._network_setup:
            return NETWORK_ALREADY_SETUP
        self._network_setup = True
        return 0

    def _fdb_run_network(self) -> int:
        """Run callbacks of futures that became ready, until ``fdb_stop_network``."""
        while True:
            callback = self._callbacks.get()
            if callback is None:
                return 0
            try:
                callback()
            except Exception:  # a callback's own error must not stop the network
                sys.excepthook(*sys.exc_info())

    def _fdb_stop_network(self) -> int:
        self._callbacks.put(None)
        return 0

    # databases and transactions

    def _fdb_create_database(self, cluster_file: bytes | None, out: Any) -> int:
        database = self.cluster(cluster_file)
        handle = self._new(database)
        self._database_defaults[handle] = {}
        _set_out(out, handle)
        return 0

    def _fdb_database_destroy(self, handle: Any) -> None:
        self._drop(handle)

    def _fdb_database_set_option(self, handle: Any, code: int, value: Any, length: int) -> int:
        name, argument = self._option("DatabaseOption", code, value, length)
        if name.startswith("transaction_"):
            self._database_defaults[self._number(handle)][name[len("transaction_") :]] = argument
        return 0

    def _fdb_database_create_transaction(self, handle: Any, out: Any) -> int:
        database = self._get(handle)
        transaction = database.create_transaction()
        for name, argument in self._database_defaults.get(self._number(handle), {}).items():
            self._apply_option(transaction, name, argument)
        _set_out(out, self._new(transaction))
        return 0

    def _fdb_database_open_tenant(self, handle: Any, name: Any, length: int, out: Any) -> int:
        return TENANT_NOT_FOUND

    def _option(self, scope: str, code: int, value: Any, length: int) -> tuple[str, Any]:
        """The option's name in the binding's ``fdboptions`` and its decoded argument."""
        from fdb import fdboptions  # the binding's generated option table

        found = [
            (name, kind)
            for name, (option_code, _, kind, _) in getattr(fdboptions, scope).items()
            if option_code == code
        ]
        if not found:
            return "", None
        name, kind = found[0]
        data = _buffer(value, length)
        if kind is type(None):
            return name, None
        if kind is int:
            return name, struct.unpack("<q", data)[0]
        return name, data

    @staticmethod
    def _apply_option(transaction: Any, name: str, argument: Any) -> None:
        setter = getattr(transaction.options, "set_" + name, None)
        if setter is None:
            return  # not modelled by the engine: accepted, no effect
        if argument is None:
            setter()
        else:
            setter(argument)

    def _fdb_transaction_set_option(self, handle: Any, code: int, value: Any, length: int) -> int:
        name, argument = self._option("TransactionOption", code, value, length)
        if name:
            try:
                self._apply_option(self._get(handle), name, argument)
            except FDBError as error:
                return error.code
        return 0

    def _fdb_transaction_destroy(self, handle: Any) -> None:
        transaction = self._drop(handle)
        destroy = getattr(transaction, "destroy", None)
        if destroy is not None:
            destroy()

    def _fdb_transaction_cancel(self, handle: Any) -> None:
        self._get(handle).cancel()

    def _fdb_transaction_reset(self, handle: Any) -> None:
        self._get(handle).reset()

    def _fdb_transaction_set_read_version(self, handle: Any, version: int) -> None:
        self._get(handle).set_read_version(version)

    def _fdb_transaction_get_read_version(self, handle: Any) -> Handle:
        return self._future(lambda: self._get(handle).get_read_version())

    def _reader(self, handle: Any, snapshot: int) -> Any:
        transaction = self._get(handle)
        return transaction.snapshot if snapshot else transaction

    def _fdb_transaction_get(self, handle: Any, key: Any, length: int, snapshot: int) -> Handle:
        reader = self._reader(handle, snapshot)
        data = _buffer(key, length)
        return self._future(lambda: reader.get(data), _value_or_none)

    def _fdb_transaction_get_key(
        self, handle: Any, key: Any, length: int, or_equal: int, offset: int, snapshot: int
    ) -> Handle:
        reader = self._reader(handle, snapshot)
        selector = KeySelector(_buffer(key, length), bool(or_equal), offset)
        return self._future(lambda: reader.get_key(selector), bytes)

    def _fdb_transaction_get_range(
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
        begin = KeySelector(_buffer(begin_key, begin_length), bool(begin_or_equal), begin_offset)
        end = KeySelector(_buffer(end_key, end_length), bool(end_or_equal), end_offset)
        limits = _range_limits(limit, target_bytes, mode, iteration)
        if isinstance(limits, int):
            return self._future(lambda: Future.failed(FDBError(limits)))
        rows, byte_target = limits
        return self._future(
            lambda: _read_batch(reader, begin, end, rows, byte_target, bool(reverse))
        )

    def _fdb_transaction_set(self, handle: Any, key: Any, kl: int, value: Any, vl: int) -> None:
        self._get(handle).set(_buffer(key, kl), _buffer(value, vl))

    def _fdb_transaction_clear(self, handle: Any, key: Any, length: int) -> None:
        self._get(handle).clear(_buffer(key, length))

    def _fdb_transaction_clear_range(
        self, handle: Any, begin: Any, begin_length: int, end: Any, end_length: int
    ) -> None:
        self._get(handle).clear_range(_buffer(begin, begin_length), _buffer(end, end_length))

    def _fdb_transaction_atomic_op(
        self, handle: Any, key: Any, kl: int, param: Any, pl: int, operation: int
    ) -> None:
        method = ATOMIC_OPERATIONS.get(operation)
        transaction = self._get(handle)
        if method is None:
            transaction._defer(FDBError(CLIENT_INVALID_OPERATION))
            return
        getattr(transaction, method)(_buffer(key, kl), _buffer(param, pl))

    def _fdb_transaction_add_conflict_range(
        self, handle: Any, begin: Any, begin_length: int, end: Any, end_length: int, kind: int
    ) -> int:
        transaction = self._get(handle)
        add = (
            transaction.add_read_conflict_range
            if kind == 0
            else transaction.add_write_conflict_range
        )
        try:
            add(_buffer(begin, begin_length), _buffer(end, end_length))
        except FDBError as error:
            return error.code
        return 0

    def _fdb_transaction_watch(self, handle: Any, key: Any, length: int) -> Handle:
        transaction = self._get(handle)
        data = _buffer(key, length)
        return self._future(lambda: transaction.watch(data))

    def _fdb_transaction_commit(self, handle: Any) -> Handle:
        return self._future(self._get(handle).commit)

    def _fdb_transaction_get_committed_version(self, handle: Any, out: Any) -> int:
        try:
            version = self._get(handle).get_committed_version()
        except FDBError as error:
            return error.code
        _set_out(out, version)
        return 0

    def _fdb_transaction_get_approximate_size(self, handle: Any) -> Handle:
        return self._future(self._get(handle).get_approximate_size)

    def _fdb_transaction_get_versionstamp(self, handle: Any) -> Handle:
        return self._future(self._get(handle).get_versionstamp, _key_bytes)

    def _fdb_transaction_on_error(self, handle: Any, code: int) -> Handle:
        transaction = self._get(handle)
        return self._future(lambda: transaction.on_error(FDBError(code)))

    # futures

    def _fdb_future_destroy(self, handle: Any) -> None:
        future: _Future | None = self._drop(handle)
        if future is not None and not future.engine_future.is_ready():
            future.engine_future.cancel()  # libfdb_c: destroying a future cancels it

    def _fdb_future_cancel(self, handle: Any) -> None:
        self._future_at(handle).engine_future.cancel()

    def _fdb_future_release_memory(self, handle: Any) -> None:
        self._future_at(handle).buffers.clear()

    def _fdb_future_is_ready(self, handle: Any) -> int:
        return int(self._future_at(handle).engine_future.is_ready())

    def _fdb_future_block_until_ready(self, handle: Any) -> int:
        self._future_at(handle).engine_future.block_until_ready()
        return 0

    def _fdb_future_set_callback(self, handle: Any, callback: Any, parameter: Any) -> int:
        engine_future = self._future_at(handle).engine_future
        pointer = self._number(handle)

        def call() -> None:
            callback(pointer)

        if engine_future.is_ready():
            call()
        else:
            engine_future.on_ready(lambda _: self._callbacks.put(call))
        return 0

    def _fdb_future_get_error(self, handle: Any) -> int:
        return self._future_at(handle).outcome()[1]

    def _fdb_future_get_int64(self, handle: Any, out: Any) -> int:
        result, code = self._future_at(handle).outcome()
        if not code:
            _set_out(out, int(result))
        return code

    _fdb_future_get_uint64 = _fdb_future_get_int64

    def _fdb_future_get_value(self, handle: Any, present: Any, out: Any, length: Any) -> int:
        future = self._future_at(handle)
        result, code = future.outcome()
        if code:
            return code
        _set_out(present, int(result is not None))
        if result is not None:
            self._hand_out(future, result, out, length)
        return 0

    def _fdb_future_get_key(self, handle: Any, out: Any, length: Any) -> int:
        future = self._future_at(handle)
        result, code = future.outcome()
        if not code:
            self._hand_out(future, result, out, length)
        return code

    @staticmethod
    def _hand_out(future: _Future, data: bytes, out: Any, length: Any) -> None:
        buffer = ctypes.create_string_buffer(data, max(1, len(data)))
        future.buffers.append(buffer)
        _point_out(out, ctypes.addressof(buffer))
        _set_out(length, len(data))

    def _fdb_future_get_keyvalue_array(self, handle: Any, out: Any, count: Any, more: Any) -> int:
        from fdb.impl import KeyValueStruct  # the binding's own layout (packing differs)

        future = self._future_at(handle)
        result, code = future.outcome()
        if code:
            return code
        rows, has_more = result
        array = (KeyValueStruct * max(1, len(rows)))()
        future.buffers.append(array)
        for index, (key, value) in enumerate(rows):
            key_buffer = ctypes.create_string_buffer(key, max(1, len(key)))
            value_buffer = ctypes.create_string_buffer(value, max(1, len(value)))
            future.buffers += (key_buffer, value_buffer)
            entry = array[index]
            entry.key = ctypes.cast(key_buffer, ctypes.POINTER(ctypes.c_byte))
            entry.key_length = len(key)
            entry.value = ctypes.cast(value_buffer, ctypes.POINTER(ctypes.c_byte))
            entry.value_length = len(value)
        _point_out(out, ctypes.addressof(array))
        _set_out(count, len(rows))
        _set_out(more, int(has_more))
        return 0


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
