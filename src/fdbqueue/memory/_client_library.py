"""A stand-in for libfdb_c, FoundationDB's C client library, over the in-memory database.

The ``fdb`` Python binding (``fdb/impl.py``) talks to the cluster only through the C API of
libfdb_c, loaded with ``ctypes.CDLL``: it creates databases, transactions and futures as opaque
pointers, passes keys as byte buffers, reads results through out-parameters and is told of
ready futures through callbacks. :class:`ClientLibrary` answers those same calls (the names,
arguments and error codes of ``bindings/c/foundationdb/fdb_c.h``), serving them from
:class:`fdbqueue.memory.Database` engines, one per cluster file. So the binding's own code
(``Database``, ``Transaction``, ``FDBRange``, ``Value``, futures, ``fdb.transactional``,
options, the directory layer) runs for real with no server; see :func:`fdbqueue.memory.install`.

The C API's rules it keeps (upstream ``bindings/c/fdb_c.cpp`` and ``fdb_c.h``: handles,
futures and their callbacks, range reads and their byte targets, options, errors) and what it
does not serve are listed in docs/memory.rst ("The real ``fdb`` binding on the in-memory
engine"): the module is private, so the user documentation holds them.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

from fdbqueue.memory._client_futures import FutureFunctions
from fdbqueue.memory._client_handles import Handles, set_out
from fdbqueue.memory._client_transactions import (
    TransactionFunctions,
    apply_option,
    decode_option,
)
from fdbqueue.memory._database import Database, Latency
from fdbqueue.memory._errors import FDBError, describe, is_retryable
from fdbqueue.memory._faults import Faults
from fdbqueue.memory._remote import connect

__all__ = ["ClientLibrary"]

#: ``fdb_error_predicate`` codes (``fdb_c_options.g.h``: FDBErrorPredicate).
RETRYABLE_PREDICATE = 50000
MAYBE_COMMITTED_PREDICATE = 50001
RETRYABLE_NOT_COMMITTED_PREDICATE = 50002

#: Error codes the C API returns for bad calls (``error_definitions.h``).
CLIENT_INVALID_OPERATION = 2000
NETWORK_ALREADY_SETUP = 2009
TENANTS_DISABLED = 2136  # 7.x; 8.0 has no tenants
API_VERSION_NOT_SUPPORTED = 2203
API_VERSION_ALREADY_SET = 2201


class _Function:
    """One C function: carries ``argtypes``/``restype``/``errcheck`` as ctypes' do."""

    def __init__(self, name: str, implementation: Callable[..., Any] | None) -> None:
        self.__name__ = name
        self.implementation = implementation
        self.argtypes: Any = None
        self.restype: Any = None
        self.errcheck: Any = None

    def __call__(self, *arguments: Any) -> Any:
        if self.implementation is None:  # not served: the binding's own error, 2000
            from fdb.impl import FDBError as BindingError

            raise BindingError(CLIENT_INVALID_OPERATION)
        result = self.implementation(*arguments)
        if self.errcheck is not None:
            return self.errcheck(result, self, arguments)
        return result


class NetworkFunctions:
    """API version, errors and the network thread: ``fdb_select_api_version_impl``,
    ``fdb_get_error``, ``fdb_error_predicate``, ``fdb_setup_network``, ``fdb_run_network``
    (runs the callbacks of futures that became ready) and ``fdb_stop_network``."""

    def __init__(self) -> None:
        self.callbacks: queue.SimpleQueue[Callable[[], Any] | None] = queue.SimpleQueue()
        self._network_setup = False
        self._api_version = 0
        self._header_version = 0

    def fdb_get_max_api_version(self) -> int:
        """The loading binding's own header version: every version it knows is served."""
        if self._header_version:
            return self._header_version
        import fdb

        header = getattr(fdb, "LATEST_API_VERSION", None)
        if header is None:
            header = getattr(sys.modules.get("fdb.apiversion"), "LATEST_API_VERSION", None)
        return int(header) if header else 10_000

    def fdb_select_api_version_impl(self, runtime_version: int, header_version: int) -> int:
        if self._api_version:
            return 0 if runtime_version == self._api_version else API_VERSION_ALREADY_SET
        if runtime_version > header_version or runtime_version < 13:
            return API_VERSION_NOT_SUPPORTED
        self._api_version, self._header_version = runtime_version, header_version
        return 0

    def fdb_get_client_version(self) -> bytes:
        return b"fdbqueue.memory"

    def fdb_get_error(self, code: int) -> bytes:
        return describe(code).encode()

    def fdb_error_predicate(self, predicate: int, code: int) -> int:
        if predicate == RETRYABLE_PREDICATE:
            return int(is_retryable(code))
        if predicate == MAYBE_COMMITTED_PREDICATE:
            return int(code in (1021, 1039))
        if predicate == RETRYABLE_NOT_COMMITTED_PREDICATE:
            return int(is_retryable(code) and code not in (1021, 1039))
        return 0

    def fdb_network_set_option(self, option: int, value: Any, length: int) -> int:
        return 0

    def fdb_setup_network(self) -> int:
        if self._network_setup:
            return NETWORK_ALREADY_SETUP
        self._network_setup = True
        return 0

    def fdb_run_network(self) -> int:
        """Run callbacks of futures that became ready, until ``fdb_stop_network``."""
        while True:
            callback = self.callbacks.get()
            if callback is None:
                return 0
            try:
                callback()
            except Exception:  # a callback's own error must not stop the network
                sys.excepthook(*sys.exc_info())

    def fdb_stop_network(self) -> int:
        self.callbacks.put(None)
        return 0


class DatabaseFunctions:
    """``fdb_create_database`` and ``fdb_database_*``: one engine per cluster file name. The
    binding keeps one ``Database`` per cluster file, so its options are set on the engine's
    ``options`` (``transaction_*`` ones become defaults of new transactions)."""

    def __init__(self, handles: Handles, library: ClientLibrary) -> None:
        self.handles = handles
        self.library = library

    def fdb_create_database(self, cluster_file: bytes | None, out: Any) -> int:
        set_out(out, self.handles.new(self.library.cluster(cluster_file)))
        return 0

    def fdb_database_destroy(self, handle: Any) -> None:
        self.handles.drop(handle)

    def fdb_database_set_option(self, handle: Any, code: int, value: Any, length: int) -> int:
        name, argument = decode_option("DatabaseOption", code, value, length)
        try:
            apply_option(self.handles.get(handle), name, argument)
        except FDBError as error:
            return error.code
        return 0

    def fdb_database_create_transaction(self, handle: Any, out: Any) -> int:
        try:
            transaction = self.handles.get(handle).create_transaction()
        except FDBError as error:  # an out-of-range default option
            return error.code
        set_out(out, self.handles.new(transaction))
        return 0

    def fdb_database_open_tenant(self, handle: Any, name: Any, length: int, out: Any) -> int:
        return TENANTS_DISABLED

    def fdb_database_get_client_status(self, handle: Any) -> Any:
        """A future of the client's status report, a JSON document
        (:meth:`fdbqueue.memory.Database.get_client_status`, naming the cluster file)."""
        database = self.handles.get(handle)
        record = self.library.cluster_file_of(database)
        return self.handles.future(lambda: database.get_client_status(record), bytes)


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
        #: a server's address (``memory.install(address=...)``): clusters connect to it
        self.address: str | None = None
        self.token: str | None = None
        self._functions: dict[str, _Function] = {}
        self._lock = threading.Lock()
        self._clusters: dict[str, Database] = {}
        handles = Handles()
        network = NetworkFunctions()
        self._parts = (
            network,
            DatabaseFunctions(handles, self),
            TransactionFunctions(handles),
            FutureFunctions(handles, network.callbacks),
        )

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
            if database is None and self.address is not None:
                database = connect(self.address, token=self.token)
            if database is None:
                database = Database(latency=self.latency, faults=self.faults, seed=self.seed)
                self._clusters[name] = database
            return database

    def cluster_file_of(self, database: Database) -> str:
        """The cluster file name :meth:`cluster` made ``database`` for."""
        with self._lock:
            return next(name for name, known in self._clusters.items() if known is database)

    # -- the C functions ----------------------------------------------------------------------

    def __getattr__(self, name: str) -> _Function:
        if not name.startswith("fdb_"):
            raise AttributeError(name)
        functions: dict[str, _Function] = self.__dict__["_functions"]
        function = functions.get(name)
        if function is None:
            parts = self.__dict__["_parts"]
            implementation = next(
                (getattr(part, name) for part in parts if hasattr(part, name)), None
            )
            function = _Function(name, implementation)
            functions[name] = function
        return function
