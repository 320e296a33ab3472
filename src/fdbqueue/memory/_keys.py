"""Keys, key selectors and key-value pairs, with the ``fdb`` binding's shapes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["KeySelector", "KeyValue", "key_after", "strinc", "to_key", "to_value"]


def to_key(key: Any) -> bytes:
    """Return ``key`` as bytes: bytes, or an object with ``as_foundationdb_key()``.

    Raises:
        TypeError: anything else, as the binding does.
    """
    if hasattr(key, "as_foundationdb_key"):
        key = key.as_foundationdb_key()
    if not isinstance(key, bytes):
        raise TypeError("Key must be of type bytes")
    return key


def to_value(value: Any) -> bytes:
    """Return ``value`` as bytes: bytes, or an object with ``as_foundationdb_value()``."""
    if hasattr(value, "as_foundationdb_value"):
        value = value.as_foundationdb_value()
    if not isinstance(value, bytes):
        raise TypeError("Value must be of type bytes")
    return value


def key_after(key: bytes) -> bytes:
    """The first key after ``key`` in the key order: ``key + b"\\x00"``."""
    return key + b"\x00"


def strinc(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix``.

    Raises:
        ValueError: ``prefix`` is empty or all ``0xff`` bytes.
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        raise ValueError("Key must contain at least one byte not equal to 0xFF.")
    return stripped[:-1] + bytes([stripped[-1] + 1])


class KeySelector:
    """A key described by a reference key, ``or_equal`` and an ``offset``, as in the binding.

    ``last_less_than(k)`` is ``(k, False, 0)``; ``last_less_or_equal(k)`` ``(k, True, 0)``;
    ``first_greater_than(k)`` ``(k, True, 1)``; ``first_greater_or_equal(k)``
    ``(k, False, 1)``. It resolves to the key ``offset`` places after the last key less than
    ``key`` (or less than or equal, with ``or_equal``).
    """

    def __init__(self, key: Any, or_equal: bool, offset: int) -> None:
        self.key = key
        self.or_equal = or_equal
        self.offset = offset

    def __add__(self, offset: int) -> KeySelector:
        return KeySelector(self.key, self.or_equal, self.offset + offset)

    def __sub__(self, offset: int) -> KeySelector:
        return KeySelector(self.key, self.or_equal, self.offset - offset)

    @classmethod
    def last_less_than(cls, key: Any) -> KeySelector:
        """The last key strictly before ``key``."""
        return cls(key, False, 0)

    @classmethod
    def last_less_or_equal(cls, key: Any) -> KeySelector:
        """The last key at or before ``key``."""
        return cls(key, True, 0)

    @classmethod
    def first_greater_than(cls, key: Any) -> KeySelector:
        """The first key strictly after ``key``."""
        return cls(key, True, 1)

    @classmethod
    def first_greater_or_equal(cls, key: Any) -> KeySelector:
        """The first key at or after ``key``."""
        return cls(key, False, 1)

    def __repr__(self) -> str:
        return f"KeySelector({self.key!r}, {self.or_equal!r}, {self.offset!r})"


class KeyValue:
    """One result of a range read, as the binding's ``KeyValue``: ``.key`` and ``.value``
    (bytes); unpacks as a pair (``key, value = kv``).

    Like the binding's, it defines no ``__eq__`` nor ``__hash__``: two KeyValues are equal
    only when they are the same object, so compare ``(kv.key, kv.value)`` or ``tuple(kv)``.
    It is not subscriptable either (``kv[0]`` raises TypeError, as upstream).
    """

    __slots__ = ("key", "value")

    def __init__(self, key: bytes, value: bytes) -> None:
        self.key = key
        self.value = value

    def __iter__(self) -> Iterator[bytes]:
        return iter((self.key, self.value))

    def __repr__(self) -> str:
        return f"{self.key!r}: {self.value!r}"
