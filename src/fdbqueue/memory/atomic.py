"""Atomic operations: how each combines the stored value with its parameter.

Each function takes the existing value (``None`` when the key is absent) and the parameter,
and returns the new value (``None`` clears the key). Semantics are upstream's
(documentation ``api-python.rst``, "Atomic operations"; ``fdbclient/Atomic.h``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["OPERATIONS", "apply_atomic", "versionstamp_bytes", "with_versionstamp"]

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
