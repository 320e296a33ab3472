"""``memory.install()``: the real ``fdb`` binding, served by in-memory clusters.

After :func:`install`, ``fdb.api_version(N)`` and ``fdb.open()`` work with no libfdb_c and no
server: the binding loads :class:`~fdbqueue.memory._client_library.ClientLibrary` where it
would load libfdb_c, and ``fdb.open(cluster_file)`` returns the binding's own ``Database``
over an in-memory cluster, the same one for the same cluster file within the process. This is
how an application tests its own ``@fdb.transactional`` code, its directory layer use and
fdbqueue together, the way fakeredis serves redis-py.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

from fdbqueue.memory._client_library import ClientLibrary
from fdbqueue.memory._database import Database, Latency, check_settings
from fdbqueue.memory._faults import Faults
from fdbqueue.memory._wire import parse_address

__all__ = ["cluster", "install", "installed"]

_LOCK = threading.Lock()
_LIBRARY: ClientLibrary | None = None


def install(
    *,
    latency: Latency | None = None,
    faults: Faults | None = None,
    seed: int | None = None,
    address: str | None = None,
    token: str | None = None,
) -> None:
    """Make the ``fdb`` binding load the in-memory client library instead of libfdb_c.

    Call it before the process's first ``fdb.api_version()`` (which is what loads the C
    library); calling it again is harmless and changes the settings of clusters opened later.
    Any API version the installed binding supports (630 and up) can then be selected, and
    ``fdb.open(cluster_file)`` (any name, no file needed) returns the binding's ``Database``
    over the in-memory cluster of that name; :func:`cluster` gives that cluster's
    :class:`~fdbqueue.memory.Database` for faults, latency, ``stats()`` and ``advance_time()``.

    Args:
        latency: simulated latency of clusters opened from now on; None for none.
        faults: fault probabilities of clusters opened from now on; None for none.
        seed: seeds the random choices of clusters opened from now on.
        address: ``memory://HOST:PORT`` of a server (``fdbqueue memory serve``): clusters
            opened from now on are connected to it (:func:`fdbqueue.memory.connect`), so the
            binding's code in several processes shares one database; None: in-process
            clusters. ``latency``, ``faults`` and ``seed`` are then the server's own.
        token: the server's token, with ``address``.

    Raises:
        RuntimeError: the binding already loaded the real libfdb_c in this process.
        TypeError: ``latency`` or ``faults`` has the wrong type.
        ValueError: ``address`` is not ``memory://HOST:PORT``.

    Cost: loads ``fdb.impl`` (no I/O); nothing per call afterwards beyond the engine's own.
    """
    check_settings(latency, faults)
    if address is not None:
        parse_address(address)
    global _LIBRARY
    with _LOCK:
        impl = sys.modules.get("fdb.impl")
        if impl is not None and not isinstance(getattr(impl, "_capi", None), ClientLibrary):
            raise RuntimeError(
                "fdb.impl already loaded the FoundationDB client library (libfdb_c) in this "
                "process; call fdbqueue.memory.install() before fdb.api_version()"
            )
        if _LIBRARY is None:
            _LIBRARY = ClientLibrary()
            _load_binding(_LIBRARY)
        _LIBRARY.latency, _LIBRARY.faults, _LIBRARY.seed = latency, faults, seed
        _LIBRARY.address, _LIBRARY.token = address, token


def _load_binding(library: ClientLibrary) -> None:
    """Import ``fdb.impl`` with ``ctypes.CDLL`` answering ``library`` for libfdb_c only."""
    real_cdll = ctypes.CDLL

    def cdll(name: Any, *args: Any, **kwargs: Any) -> Any:
        if name is not None and "fdb_c" in str(name):
            return library
        return real_cdll(name, *args, **kwargs)

    ctypes.CDLL = cdll  # type: ignore[misc, assignment]
    try:
        import fdb.impl  # noqa: F401 - the binding loads its C library on import
    finally:
        ctypes.CDLL = real_cdll  # type: ignore[misc]


def installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return _LIBRARY is not None


def cluster(cluster_file: str | None = None) -> Database:
    """The in-memory cluster behind ``fdb.open(cluster_file)`` (created on first use).

    ``None`` is the default cluster file (``FDB_CLUSTER_FILE``, else ``fdb.cluster`` in the
    working directory), as ``fdb.open()`` uses it.

    Raises:
        RuntimeError: :func:`install` has not run.
    """
    if _LIBRARY is None:
        raise RuntimeError("call fdbqueue.memory.install() first")
    return _LIBRARY.cluster(cluster_file)
