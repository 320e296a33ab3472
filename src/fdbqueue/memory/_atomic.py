"""Atomic operations: how each combines the stored value with its parameter.

Each function takes the existing value (``None`` when the key is absent) and the parameter,
and returns the new value (``None`` clears the key). Semantics are upstream's
(documentation ``api-python.rst``, "Atomic operations"; ``fdbclient/Atomic.h``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "OPERATIONS",
    "AtomicOperations",
    "apply_atomic",
    "versionstamp_bytes",
    "with_versionstamp",
]

MAX_VALUE_BYTES = 100_000


def _fit(existing: bytes | None, width: int) -> bytes:
    """``existing`` zero-padded or truncated to ``width`` bytes (absent = zeros)."""
    data = existing or b""
    return data[:width].ljust(width, b"\x00")


def _add(existing: bytes | None, param: bytes) -> bytes:
    width = len(param)
    if width == 0:
        return b""
    total = int.from_bytes(_fit(existing, width), "little") + int.from_bytes(param, "little")
    return (total % (1 << (8 * width))).to_bytes(width, "little")


def _bit(combine: Callable[[int, int], int]) -> Callable[[bytes | None, bytes], bytes]:
    def operation(existing: bytes | None, param: bytes) -> bytes:
        return bytes(combine(a, b) for a, b in zip(_fit(existing, len(param)), param, strict=False))

    return operation


def _bit_and(existing: bytes | None, param: bytes) -> bytes:
    if existing is None:
        return param
    return _bit(lambda a, b: a & b)(existing, param)


def _compare(pick_larger: bool) -> Callable[[bytes | None, bytes], bytes]:
    def operation(existing: bytes | None, param: bytes) -> bytes:
        if existing is None:
            return param
        current = _fit(existing, len(param))
        current_int = int.from_bytes(current, "little")
        param_int = int.from_bytes(param, "little")
        larger = param_int > current_int
        return param if larger == pick_larger else current

    return operation


def _byte_max(existing: bytes | None, param: bytes) -> bytes:
    return param if existing is None or param > existing else existing


def _byte_min(existing: bytes | None, param: bytes) -> bytes:
    return param if existing is None or param < existing else existing


def _compare_and_clear(existing: bytes | None, param: bytes) -> bytes | None:
    return None if existing == param else existing


def _append_if_fits(existing: bytes | None, param: bytes) -> bytes:
    combined = (existing or b"") + param
    return combined if len(combined) <= MAX_VALUE_BYTES else (existing or b"")


OPERATIONS: dict[str, Callable[[bytes | None, bytes], bytes | None]] = {
    "add": _add,
    "bit_and": _bit_and,
    "bit_or": _bit(lambda a, b: a | b),
    "bit_xor": _bit(lambda a, b: a ^ b),
    "max": _compare(pick_larger=True),
    "min": _compare(pick_larger=False),
    "byte_max": _byte_max,
    "byte_min": _byte_min,
    "compare_and_clear": _compare_and_clear,
    "append_if_fits": _append_if_fits,
}


def apply_atomic(operation: str, existing: bytes | None, param: bytes) -> bytes | None:
    """Return the value after atomic ``operation`` with ``param`` on ``existing``."""
    return OPERATIONS[operation](existing, param)


def versionstamp_bytes(commit_version: int, batch_order: int = 0) -> bytes:
    """The 10-byte versionstamp: 8-byte big-endian commit version, 2-byte batch order."""
    return commit_version.to_bytes(8, "big") + batch_order.to_bytes(2, "big")


def with_versionstamp(param: bytes, versionstamp: bytes) -> bytes:
    """Apply a versionstamped operation's parameter: its last 4 bytes are a little-endian
    offset; the 10 bytes there become ``versionstamp`` and the 4 bytes are dropped."""
    offset = int.from_bytes(param[-4:], "little")
    body = param[:-4]
    return body[:offset] + versionstamp + body[offset + 10 :]


def versionstamp_offset_valid(param: bytes) -> bool:
    """True when ``param`` has a 4-byte offset that leaves room for 10 bytes."""
    if len(param) < 4:
        return False
    offset = int.from_bytes(param[-4:], "little")
    return offset + 10 <= len(param) - 4


class AtomicOperations:
    """The binding's atomic-operation methods, for any class that defines ``_atomic``.

    :class:`~fdbqueue.memory.Transaction` records the operation; the
    :class:`~fdbqueue.memory.Database` runs it in a transaction of its own. No operation reads,
    so none adds a read conflict range.
    """

    def _atomic(self, operation: str, key: Any, param: Any) -> None:
        raise NotImplementedError

    def add(self, key: Any, param: Any) -> None:
        """Little-endian integer addition; a missing value counts as zeros."""
        self._atomic("add", key, param)

    def bit_and(self, key: Any, param: Any) -> None:
        """Bitwise AND (a missing value becomes ``param``)."""
        self._atomic("bit_and", key, param)

    def bit_or(self, key: Any, param: Any) -> None:
        """Bitwise OR."""
        self._atomic("bit_or", key, param)

    def bit_xor(self, key: Any, param: Any) -> None:
        """Bitwise XOR."""
        self._atomic("bit_xor", key, param)

    def max(self, key: Any, param: Any) -> None:
        """The larger, as little-endian unsigned integers."""
        self._atomic("max", key, param)

    def min(self, key: Any, param: Any) -> None:
        """The smaller, as little-endian unsigned integers (a missing value becomes ``param``)."""
        self._atomic("min", key, param)

    def byte_max(self, key: Any, param: Any) -> None:
        """The larger, as byte strings."""
        self._atomic("byte_max", key, param)

    def byte_min(self, key: Any, param: Any) -> None:
        """The smaller, as byte strings."""
        self._atomic("byte_min", key, param)

    def compare_and_clear(self, key: Any, param: Any) -> None:
        """Clear ``key`` if its value equals ``param``."""
        self._atomic("compare_and_clear", key, param)

    def append_if_fits(self, key: Any, param: Any) -> None:
        """Append ``param`` if the result fits in 100,000 bytes."""
        self._atomic("append_if_fits", key, param)
