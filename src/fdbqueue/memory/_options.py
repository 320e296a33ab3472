"""``tr.options`` and ``db.options`` of the in-memory database, with the binding's setters.

The binding generates one ``set_<name>`` method per option of its ``fdboptions.py``
(``TransactionOption`` and ``DatabaseOption`` of upstream ``fdbclient/vexillographer/
fdb.options``); this module has each of them, with the same parameters: none, an int (packed
as a signed 64-bit integer, so a non-integer raises ``struct.error`` as in the binding), a
string (str or bytes, optional) or bytes (optional).

Transaction options with an effect (upstream ``ReadYourWrites.cpp``/``NativeAPI.actor.cpp``):

* ``timeout``, ``retry_limit``, ``max_retry_delay``: as upstream, they survive ``on_error``
  (persistent options) and ``reset()`` drops them;
* ``size_limit``: the byte limit of error 2101 (32 to 10,000,000); not persistent, so
  ``on_error`` and ``reset()`` bring back the database's ``transaction_size_limit`` or
  10,000,000;
* ``next_write_no_write_conflict_range``: the next ``set``, ``clear``, ``clear_range`` or
  atomic operation adds no write conflict range (a versionstamped key still gets its key's,
  as upstream's commit proxy adds it);
* ``access_system_keys``, ``read_system_keys``;
* ``debug_transaction_identifier`` (1 to 100 bytes, else 2006; a different one later: 2000),
  ``log_transaction`` (2000 without an identifier), ``transaction_logging_enable`` (both),
  ``transaction_logging_max_field_length`` (-1 or 1 to 2**31-1): validated, nothing is logged.

Every other transaction option is accepted and has no effect in memory, notably:
``read_your_writes_disable`` and ``snapshot_ryw_disable`` (reads still see the transaction's
own writes), ``bypass_unreadable`` (versionstamped writes stay unreadable), ``lock_aware``
and ``read_lock_aware`` (a memory database is never locked), ``causal_read_risky``,
``causal_write_risky``, ``priority_batch``, ``priority_system_immediate``, the read priority
and server cache options, ``report_conflicting_keys`` (no conflicting keys are reported),
``used_during_commit_protection_disable``, ``tag``, ``auto_throttle_tag``,
``automatic_idempotency``, ``span_parent``, ``use_grv_cache``, ``authorization_token``.

Database options: the ``transaction_*`` ones set defaults of every transaction the database
creates afterwards, applied again by ``reset()`` (upstream ``transactionDefaults``), and the
non-persistent ones (``size_limit``) also by ``on_error``; ``max_watches`` sets the limit of
outstanding watches (error 1032; 0 to 1,000,000, default 10,000). The others
(``location_cache_size``, ``machine_id``, ``datacenter_id``, ``snapshot_ryw_enable``/
``disable``, ``test_causal_read_risky``) are accepted and have no effect.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from fdbqueue.memory._access import KeyAccess
from fdbqueue.memory._errors import FDBError
from fdbqueue.memory._futures import FutureString
from fdbqueue.memory._lifecycle import Lifecycle

__all__ = ["DatabaseOptions", "TransactionOptions"]

INT_MAX = 2**31 - 1
MAX_TRANSACTION_BYTES = 10_000_000  # upstream CLIENT_KNOBS->TRANSACTION_SIZE_LIMIT
MIN_SIZE_LIMIT = 32
DEFAULT_MAX_WATCHES = 10_000  # upstream CLIENT_KNOBS->DEFAULT_MAX_OUTSTANDING_WATCHES
ABSOLUTE_MAX_WATCHES = 1_000_000  # upstream CLIENT_KNOBS->ABSOLUTE_MAX_WATCHES
INVALID_OPTION_VALUE = 2006
CLIENT_INVALID_OPERATION = 2000
_INT64 = struct.Struct("<q")


def int_option(value: Any, low: int, high: int) -> int:
    """``value`` checked as upstream's ``extractIntOption``.

    Raises:
        struct.error: not an integer (the binding packs it with ``struct.pack("<q", ...)``).
        FDBError: 2006 (``invalid_option_value``) outside ``[low, high]``.
    """
    _INT64.pack(value)
    if not low <= value <= high:
        raise FDBError(INVALID_OPTION_VALUE)
    return int(value)


def string_option(value: Any) -> bytes | None:
    """A string option's parameter as the binding's ``optionalParamToBytes`` makes it.

    Raises:
        TypeError: neither None, bytes, a str nor a bytes future.
    """
    if value is None:
        return None
    if isinstance(value, FutureString):
        value = value.value
    if not isinstance(value, bytes) and hasattr(value, "encode"):
        value = value.encode("utf8")
    if not isinstance(value, bytes):
        raise TypeError("Parameter must be a string")
    return value


def bytes_option(value: Any) -> bytes | None:
    """A bytes option's parameter, checked as the binding's ``option_wrap_bytes``.

    Raises:
        TypeError: neither None nor bytes.
    """
    if value is not None and not isinstance(value, bytes):
        raise TypeError("Value must be of type bytes")
    return value


def _accept_flag(self: Any) -> None:
    """Accepted, as the binding's setter without a parameter; no effect in memory."""


def _accept_int(self: Any, value: Any) -> None:
    """Accepted, as the binding's setter of an int; no effect in memory."""
    _INT64.pack(value)


def _accept_string(self: Any, value: Any = None) -> None:
    """Accepted, as the binding's setter of a string; no effect in memory."""
    string_option(value)


def _accept_bytes(self: Any, value: Any = None) -> None:
    """Accepted, as the binding's setter of bytes; no effect in memory."""
    bytes_option(value)


_ACCEPT: dict[str, Callable[..., None]] = {
    "flag": _accept_flag,
    "int": _accept_int,
    "str": _accept_string,
    "bytes": _accept_bytes,
}


def _add_accepted(cls: type, options: dict[str, str]) -> None:
    """Give ``cls`` a ``set_<name>`` that accepts and ignores each of ``options``
    (name -> parameter kind), keeping the methods it defines itself."""
    for name, kind in options.items():
        if not hasattr(cls, "set_" + name):
            setattr(cls, "set_" + name, _ACCEPT[kind])


#: The binding's transaction options (fdboptions.py, 8.0) and their parameter kinds.
TRANSACTION_OPTIONS: dict[str, str] = {
    "causal_write_risky": "flag",
    "causal_read_risky": "flag",
    "causal_read_disable": "flag",
    "include_port_in_address": "flag",
    "next_write_no_write_conflict_range": "flag",
    "read_your_writes_disable": "flag",
    "read_ahead_disable": "flag",
    "read_server_side_cache_enable": "flag",
    "read_server_side_cache_disable": "flag",
    "read_priority_normal": "flag",
    "read_priority_low": "flag",
    "read_priority_high": "flag",
    "durability_datacenter": "flag",
    "durability_risky": "flag",
    "durability_dev_null_is_web_scale": "flag",
    "priority_system_immediate": "flag",
    "priority_batch": "flag",
    "initialize_new_database": "flag",
    "access_system_keys": "flag",
    "read_system_keys": "flag",
    "raw_access": "flag",
    "bypass_storage_quota": "flag",
    "debug_retry_logging": "str",
    "transaction_logging_enable": "str",
    "debug_transaction_identifier": "str",
    "log_transaction": "flag",
    "transaction_logging_max_field_length": "int",
    "server_request_tracing": "flag",
    "timeout": "int",
    "retry_limit": "int",
    "max_retry_delay": "int",
    "size_limit": "int",
    "automatic_idempotency": "flag",
    "snapshot_ryw_enable": "flag",
    "snapshot_ryw_disable": "flag",
    "lock_aware": "flag",
    "used_during_commit_protection_disable": "flag",
    "read_lock_aware": "flag",
    "use_provisional_proxies": "flag",
    "report_conflicting_keys": "flag",
    "special_key_space_relaxed": "flag",
    "special_key_space_enable_writes": "flag",
    "tag": "str",
    "auto_throttle_tag": "str",
    "span_parent": "bytes",
    "expensive_clear_cost_estimation_enable": "flag",
    "bypass_unreadable": "flag",
    "use_grv_cache": "flag",
    "max_grv_queue_delay": "int",
    "authorization_token": "str",
    "enable_replica_consistency_check": "flag",
    "consistency_check_required_replicas": "int",
}

#: The binding's database options (fdboptions.py, 8.0) and their parameter kinds.
DATABASE_OPTIONS: dict[str, str] = {
    "location_cache_size": "int",
    "max_watches": "int",
    "machine_id": "str",
    "datacenter_id": "str",
    "snapshot_ryw_enable": "flag",
    "snapshot_ryw_disable": "flag",
    "transaction_logging_max_field_length": "int",
    "transaction_timeout": "int",
    "transaction_retry_limit": "int",
    "transaction_max_retry_delay": "int",
    "transaction_size_limit": "int",
    "transaction_causal_read_risky": "flag",
    "transaction_include_port_in_address": "flag",
    "transaction_automatic_idempotency": "flag",
    "transaction_bypass_unreadable": "flag",
    "transaction_used_during_commit_protection_disable": "flag",
    "transaction_report_conflicting_keys": "flag",
    "test_causal_read_risky": "int",
}

#: Database option -> the transaction option it is the default of (``defaultFor``).
TRANSACTION_DEFAULTS: dict[str, str] = {
    "transaction_logging_max_field_length": "transaction_logging_max_field_length",
    "transaction_timeout": "timeout",
    "transaction_retry_limit": "retry_limit",
    "transaction_max_retry_delay": "max_retry_delay",
    "transaction_size_limit": "size_limit",
    "transaction_causal_read_risky": "causal_read_risky",
    "transaction_include_port_in_address": "include_port_in_address",
    "transaction_automatic_idempotency": "automatic_idempotency",
    "transaction_bypass_unreadable": "bypass_unreadable",
    "transaction_used_during_commit_protection_disable": "used_during_commit_protection_disable",
    "transaction_report_conflicting_keys": "report_conflicting_keys",
}

#: Transaction options that survive ``on_error`` (``persistent`` in fdb.options).
PERSISTENT = frozenset({"timeout", "retry_limit", "max_retry_delay", "authorization_token"})


class TransactionOptions:
    """``tr.options``: the binding's ``set_<option>`` methods (see the module docstring for
    those with an effect; the others are accepted and ignored).

    It sets the transaction's :class:`Lifecycle` (timeout, retry limit, maximum retry delay)
    and :class:`KeyAccess` (system keys), takes the defaults of ``database_options``, and holds
    the option state the transaction consults: :attr:`size_limit` (commit's 2101 limit) and
    the ``next_write_no_write_conflict_range`` flag.
    """

    def __init__(
        self, lifecycle: Lifecycle, access: KeyAccess, database_options: DatabaseOptions | None
    ) -> None:
        self._lifecycle = lifecycle
        self._access = access
        self._database_options = database_options
        self._defaults: list[tuple[str, tuple[Any, ...]]] = []
        self._size_limit = MAX_TRANSACTION_BYTES
        self._no_write_conflict = False
        self._identifier: bytes | None = None

    # -- hooks of the transaction ----------------------------------------------------------

    @property
    def size_limit(self) -> int:
        """The size over which the commit fails with 2101 (``set_size_limit``)."""
        return self._size_limit

    def reset_options(self) -> None:
        """At creation and ``reset()``, after the transaction reset its own option fields:
        take the database's transaction defaults now and apply the persistent ones."""
        options = self._database_options
        self._defaults = options._transaction_defaults() if options is not None else []
        for name, args in self._defaults:
            if name in PERSISTENT:
                getattr(self, "set_" + name)(*args)

    def reset_state(self) -> None:
        """At creation, ``on_error`` and ``reset()``: drop the non-persistent options and apply
        the database's defaults of those again."""
        self._size_limit = MAX_TRANSACTION_BYTES
        self._no_write_conflict = False
        self._identifier = None
        for name, args in self._defaults:
            if name not in PERSISTENT:
                getattr(self, "set_" + name)(*args)

    def take_no_write_conflict(self) -> bool:
        """For the transaction's next write: True when it must add no write conflict range
        (``next_write_no_write_conflict_range``, which this clears)."""
        flag, self._no_write_conflict = self._no_write_conflict, False
        return flag

    # -- options with an effect ------------------------------------------------------------

    def set_timeout(self, milliseconds: int) -> None:
        """Cancel the transaction with 1031 this long after it started (or was reset); 0
        disables it. Survives ``on_error``.

        Raises:
            FDBError: 2006 outside ``[0, 2**31-1]``.
        """
        self._lifecycle.set_timeout(int_option(milliseconds, 0, INT_MAX))

    def set_retry_limit(self, retries: int) -> None:
        """After this many retries, ``on_error`` raises the error; -1 means no limit.
        Survives ``on_error``.

        Raises:
            FDBError: 2006 outside ``[-1, 2**31-1]``.
        """
        self._lifecycle.retry_limit = int_option(retries, -1, INT_MAX)

    def set_max_retry_delay(self, milliseconds: int) -> None:
        """Cap the backoff ``on_error`` waits (default 1000 ms). Survives ``on_error``.

        Raises:
            FDBError: 2006 outside ``[0, 2**31-1]``.
        """
        self._lifecycle.max_retry_delay = int_option(milliseconds, 0, INT_MAX) / 1000.0

    def set_size_limit(self, size: int) -> None:
        """Fail the commit with 2101 when the transaction's size (``get_approximate_size``)
        exceeds ``size`` bytes instead of 10,000,000. As upstream, it is not persistent:
        ``on_error`` and ``reset()`` restore the database's default.

        Raises:
            FDBError: 2006 outside ``[32, 10,000,000]``.
        """
        self._size_limit = int_option(size, MIN_SIZE_LIMIT, MAX_TRANSACTION_BYTES)

    def set_next_write_no_write_conflict_range(self) -> None:
        """The transaction's next write (``set``, ``clear``, ``clear_range`` or an atomic
        operation) adds no write conflict range, so it makes no reader of its keys fail with
        1020."""
        self._no_write_conflict = True

    def set_access_system_keys(self) -> None:
        """Allow reading and writing keys from ``b"\\xff"`` on."""
        self._access.allow_write()

    def set_read_system_keys(self) -> None:
        """Allow reading keys from ``b"\\xff"`` on."""
        self._access.allow_read()

    def set_debug_transaction_identifier(self, identifier: Any = None) -> None:
        """Name the transaction for tracing (nothing is traced in memory).

        Raises:
            FDBError: 2006 without an identifier or with one over 100 bytes; 2000 when a
                different identifier was set before (upstream ``Transaction::setOption``).
        """
        value = string_option(identifier)
        if value is None or not 0 < len(value) <= 100:
            raise FDBError(INVALID_OPTION_VALUE)
        if self._identifier is not None and self._identifier != value:
            raise FDBError(CLIENT_INVALID_OPERATION)
        self._identifier = value

    def set_log_transaction(self) -> None:
        """Log the transaction (nothing is logged in memory).

        Raises:
            FDBError: 2000 when no ``debug_transaction_identifier`` was set, as upstream.
        """
        if self._identifier is None:
            raise FDBError(CLIENT_INVALID_OPERATION)

    def set_transaction_logging_enable(self, identifier: Any = None) -> None:
        """Deprecated upstream: ``debug_transaction_identifier`` then ``log_transaction``."""
        self.set_debug_transaction_identifier(identifier)
        self.set_log_transaction()

    def set_transaction_logging_max_field_length(self, length: int) -> None:
        """The longest key or value logged (nothing is logged in memory).

        Raises:
            FDBError: 2006 for 0 or outside ``[-1, 2**31-1]``.
        """
        if int_option(length, -1, INT_MAX) == 0:
            raise FDBError(INVALID_OPTION_VALUE)


_add_accepted(TransactionOptions, TRANSACTION_OPTIONS)


class DatabaseOptions:
    """``db.options``: the binding's database ``set_<option>`` methods (see the module
    docstring). ``transaction_*`` options become defaults of the transactions created
    afterwards."""

    def __init__(self, set_max_watches: Callable[[int], None]) -> None:
        self._set_max_watches = set_max_watches  # the database's watch registry's
        self._defaults: dict[str, tuple[Any, ...]] = {}

    def _transaction_defaults(self) -> list[tuple[str, tuple[Any, ...]]]:
        """The transaction options to apply to a new or reset transaction, in the order they
        were set: (transaction option name, arguments)."""
        return list(self._defaults.items())

    def _default(self, option: str, *args: Any) -> None:
        self._defaults.pop(option, None)  # upstream's UniqueOrderedOptionList: last set last
        self._defaults[option] = args

    def set_transaction_timeout(self, milliseconds: int) -> None:
        """The ``timeout`` of each transaction created afterwards (0: none)."""
        _INT64.pack(milliseconds)
        self._default("timeout", milliseconds)

    def set_transaction_retry_limit(self, retries: int) -> None:
        """The ``retry_limit`` of each transaction created afterwards (-1: none)."""
        _INT64.pack(retries)
        self._default("retry_limit", retries)

    def set_transaction_max_retry_delay(self, milliseconds: int) -> None:
        """The ``max_retry_delay`` of each transaction created afterwards."""
        _INT64.pack(milliseconds)
        self._default("max_retry_delay", milliseconds)

    def set_transaction_size_limit(self, size: int) -> None:
        """The ``size_limit`` of each transaction created afterwards, restored by its
        ``on_error`` and ``reset()``."""
        _INT64.pack(size)
        self._default("size_limit", size)

    def set_transaction_logging_max_field_length(self, length: int) -> None:
        """The ``transaction_logging_max_field_length`` of each new transaction."""
        _INT64.pack(length)
        self._default("transaction_logging_max_field_length", length)

    def set_max_watches(self, watches: int) -> None:
        """The most watches outstanding at once (default 10,000); more fail with 1032.

        Raises:
            FDBError: 2006 outside ``[0, 1,000,000]``.
        """
        self._set_max_watches(int_option(watches, 0, ABSOLUTE_MAX_WATCHES))

    def set_location_cache_size(self, entries: int) -> None:
        """Accepted (no location cache in memory).

        Raises:
            FDBError: 2006 outside ``[0, 2**31-1]``, as upstream.
        """
        int_option(entries, 0, INT_MAX)

    def set_test_causal_read_risky(self, percent: int) -> None:
        """Accepted (no effect in memory).

        Raises:
            FDBError: 2006 outside ``[0, 100]``, as upstream.
        """
        int_option(percent, 0, 100)


def _make_flag_default(option: str) -> Callable[[DatabaseOptions], None]:
    def setter(self: DatabaseOptions) -> None:
        self._default(option)

    setter.__doc__ = f"The ``{option}`` option of each transaction created afterwards."
    return setter


for _name, _option in TRANSACTION_DEFAULTS.items():
    if DATABASE_OPTIONS[_name] == "flag":
        setattr(DatabaseOptions, "set_" + _name, _make_flag_default(_option))
_add_accepted(DatabaseOptions, DATABASE_OPTIONS)
