"""FoundationDB error codes and the FDBError exception of the in-memory database.

Codes and descriptions are upstream's (``flow/include/flow/error_definitions.h``,
documentation ``api-error-codes.rst``): every code the in-memory database or its client
library raises, and the other codes ``on_error`` handles.
"""

from __future__ import annotations

__all__ = ["RETRYABLE", "FDBError", "describe", "is_retryable"]

DESCRIPTIONS: dict[int, str] = {
    0: "Success",
    1007: "Transaction is too old to perform reads or be committed",
    1009: "Request for future version",
    1020: "Transaction not committed due to conflict with another transaction",
    1021: "Transaction may or may not have committed",
    1025: "Operation aborted because the transaction was cancelled",
    1031: "Operation aborted because the transaction timed out",
    1032: "Too many watches currently set",
    1036: "Read or wrote an unreadable key",
    1037: "Storage process does not have recent mutations",
    1038: "Database is locked",
    1042: "CommitProxy commit memory limit exceeded",
    1051: "Batch GRV request rate limit exceeded",
    1078: "GetReadVersion proxy memory limit exceeded",
    1101: "Asynchronous operation cancelled",
    1102: "Future has been released",
    1213: "Transaction tag is being throttled",
    2000: "Invalid API call",
    2004: "Key outside legal range",
    2005: "Range begin key larger than end key",
    2006: "Option set with an invalid value",
    2007: "Option not valid in this context",
    2009: "Network can be configured only once",
    2010: "Transaction already has a read version set",
    2017: "Operation issued while a commit was outstanding",
    2020: "Transaction does not have a valid commit version",
    2021: "Transaction is read-only and therefore does not have a commit version",
    2101: "Transaction exceeds byte limit",
    2102: "Key length exceeds limit",
    2103: "Value length exceeds limit",
    2108: "Operation is not supported",
    2201: "API version may be set only once",
    2203: "API version not supported",
    2210: "EXACT streaming mode requires limits, but none were given",
    4000: "An unknown error occurred",
}

#: Error codes that ``on_error`` retries: those upstream's ``Transaction::onError``
#: (``fdbclient/NativeAPI.actor.cpp``) resets and retries, 7.1 and later: 1020, 1021, 1037,
#: 1038, 1042, 1051, 1078 and 1213 with the growing backoff, 1007 and 1009 with a fixed delay.
RETRYABLE = frozenset({1007, 1009, 1020, 1021, 1037, 1038, 1042, 1051, 1078, 1213})


def is_retryable(code: int) -> bool:
    """Return True when ``on_error`` retries the error ``code``."""
    return code in RETRYABLE


def describe(code: int) -> str:
    """Upstream's description of ``code``, as libfdb_c's ``fdb_get_error`` gives it: the
    table's text; ``"UNKNOWN_ERROR"`` for a code in [0, 30000] it lacks; for a code outside
    that range, that of 4000 (``Error::fromUnvalidatedCode`` then ``Error::what``)."""
    if code < 0 or code > 30000:
        code = 4000
    return DESCRIPTIONS.get(code, "UNKNOWN_ERROR")


class FDBError(Exception):
    """A FoundationDB error, shaped as the binding's ``fdb.FDBError``: ``code`` (int),
    ``description`` and ``str(error) == "%s (%d)" % (error.description, error.code)``.

    As in the binding, ``description`` is *bytes*: the binding reads ``fdb_get_error``
    through ``ctypes.c_char_p``, which returns bytes, so ``str()`` of a real error is
    ``"b'Transaction not committed due to conflict with another transaction' (1020)"``.

    It is not a subclass of ``fdb.FDBError``: that class exists only once
    ``fdb.api_version()`` has loaded libfdb_c (``memory.install()`` serves the real binding,
    whose errors are the real class).
    """

    #: For a read's error: the ``time.monotonic()`` instant at which the read's future
    #: reports it (its latency run; :mod:`fdbqueue.memory._reads`). 0: at once.
    ready_at = 0.0

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    @property
    def description(self) -> bytes:
        """Upstream's description of the code, as bytes (see the class docstring)."""
        return describe(self.code).encode()

    def __str__(self) -> str:
        return f"{self.description!r} ({self.code})"

    def __repr__(self) -> str:
        return f"FDBError({self.code})"
