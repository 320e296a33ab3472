"""FoundationDB error codes and the FDBError exception of the in-memory database.

Codes and descriptions are upstream's (``flow/include/flow/error_definitions.h``,
documentation ``api-error-codes.rst``).
"""

from __future__ import annotations

__all__ = ["RETRYABLE", "FDBError", "is_retryable"]

DESCRIPTIONS: dict[int, str] = {
    1007: "Transaction is too old to perform reads or be committed",
    1009: "Request for future version",
    1020: "Transaction not committed due to conflict with another transaction",
    1021: "Transaction may or may not have committed",
    1025: "Operation aborted because the transaction was cancelled",
    1031: "Operation aborted because the transaction timed out",
    1032: "Too many watches currently set",
    1036: "Read or wrote an unreadable key",
    1037: "Storage process does not have recent mutations",
    1101: "Asynchronous operation cancelled",
    1213: "Transaction tag is being throttled",
    2000: "Invalid API call",
    2004: "Key outside legal range",
    2005: "Range begin key larger than end key",
    2006: "Option set with an invalid value",
    2017: "Operation issued while a commit was outstanding",
    2021: "Transaction does not have a valid commit version",
    2101: "Transaction exceeds byte limit",
    2102: "Key length exceeds limit",
    2103: "Value length exceeds limit",
    4000: "An unknown error occurred",
}

#: Error codes that ``on_error`` retries (fdb-semantics.md, "Errors and retry loops").
RETRYABLE = frozenset({1007, 1009, 1020, 1021, 1037, 1213})


def is_retryable(code: int) -> bool:
    """Return True when ``on_error`` retries the error ``code``."""
    return code in RETRYABLE


class FDBError(Exception):
    """A FoundationDB error: ``code`` (int) and ``description`` (str), as ``fdb.FDBError``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    @property
    def description(self) -> str:
        """Upstream's description of the code."""
        return DESCRIPTIONS.get(self.code, "An unknown error occurred")

    def __str__(self) -> str:
        return f"{self.description} ({self.code})"

    def __repr__(self) -> str:
        return f"FDBError({self.code})"
