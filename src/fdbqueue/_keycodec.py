"""The hot path's fixed key shapes, packed and unpacked without the generic tuple layer.

FoundationDB's tuple layer (``fdb.tuple``) is the reference, and the encoder of every other
key and value: each function here returns exactly what ``fdb.tuple.pack(t, prefix=prefix)``
(which is ``Subspace.pack``) or ``Subspace(rawPrefix=prefix).unpack(key)`` returns, byte for
byte and element for element, and raises what they raise. It only does so in a quarter to
a half of the tuple layer's bytecode instructions (an item key: 60 to pack instead of 217,
87 to read instead of 201), for the shapes the hot path packs on every call:

* ``(int, bytes)``: a Queue's item key ``(index, random)``, a lease key ``(expiry version,
  lease id)``, a receipt key ``(read version, call id)``;
* ``(int, int, bytes)``: a PriorityQueue's item key ``(priority, count, random)``;
* ``(int,)``: a receipt's value ``(microseconds,)``, the end of the lease keys expired by a
  read version ``(version,)``;
* ``(bytes,)``: a held value's key ``(held id,)``.

One function a shape and direction (:func:`pack_int_bytes`, :func:`unpack_int_bytes`, ...).
This module packs ints of at most 63 bits (``abs(n) < 2**63``) and values of exactly the
types ``int`` and ``bytes``; it hands anything else to the tuple layer (a bool, a subclass, a
longer int: past ``2**64 - 1`` the tuple layer switches to its codes 0x1d and 0x0b), and
any key that is not exactly its shape under the prefix, so a foreign key gets the tuple
layer's own answer or error. ``tests/test_keycodec.py`` proves all of this against
``fdb.tuple`` (Hypothesis: ints up to +-2**2040, bytes with ``\\x00`` and ``\\xff``, every
shape under random prefixes, damaged keys) in every test run.

Which key has which shape is written once, where the key is made
(:meth:`fdbqueue._storage.store.ItemStore.item_key`,
:meth:`fdbqueue._delivery.leases.LeaseHolds.key`,
:meth:`fdbqueue._transactions.receipts.Receipts.write_receipt`,
:meth:`fdbqueue._storage.held.HeldValues.key`): this module is only how it is packed.

Source followed: ``fdb/tuple.py`` of the foundationdb binding (``_encode``, ``_decode``,
``_find_terminator``) and FoundationDB's tuple layer specification (design/tuple.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fdb.tuple
from fdb.subspace_impl import Subspace

__all__ = [
    "pack_bytes",
    "pack_int",
    "pack_int_bytes",
    "pack_int_int_bytes",
    "unpack_bytes",
    "unpack_int",
    "unpack_int_bytes",
    "unpack_int_int_bytes",
    "unpack_last_bytes",
]

#: The bytes after the type code of an int of b bits (b < 64), by b: a longer int (from
#: 2**63 in magnitude) finds no entry, and goes to the tuple layer (which packs ints from
#: 2**64 - 1 in magnitude with the length-prefixed codes 0x1d and 0x0b).
_LENGTH = tuple((bits + 7) >> 3 for bits in range(64))
#: The type code of a positive int of n bytes, by n (0x14 + n; 0x14 is zero).
_POSITIVE = tuple(bytes([0x14 + n]) for n in range(9))
#: The type code of a negative int of n bytes, by n (0x14 - n).
_NEGATIVE = tuple(bytes([0x14 - n]) for n in range(9))
#: 256**n - 1 by n: a negative int of n bytes is stored as this plus the int.
_OFFSET = tuple((1 << (8 * n)) - 1 for n in range(9))
#: The type code of bytes.
_BYTES = 0x01


# The helpers below say "leave this to the tuple layer" by raising IndexError, as their
# lookups do on their own for an int past _LENGTH or a key that ends too soon: every
# function catches it, and calls the tuple layer.

# -- packing -------------------------------------------------------------------------------


def _int(number: Any) -> bytes:
    """The tuple layer's encoding of ``number``, an int with ``abs(number) < 2**63``.

    Raises:
        IndexError: anything else (a bool, an int subclass, a longer int, another type)."""
    if type(number) is not int:
        raise IndexError
    if number >= 0:
        length = _LENGTH[number.bit_length()]
        return _POSITIVE[length] + number.to_bytes(length, "big")
    length = _LENGTH[number.bit_length()]
    return _NEGATIVE[length] + (number + _OFFSET[length]).to_bytes(length, "big")


def _bytes(data: Any) -> bytes:
    """The tuple layer's encoding of ``data``, exactly ``bytes``: the type code, the bytes
    with each ``\\x00`` escaped as ``\\x00\\xff``, a final ``\\x00``.

    Raises:
        IndexError: anything else (a bytes subclass, another type)."""
    if type(data) is not bytes:
        raise IndexError
    return b"\x01" + data.replace(b"\x00", b"\x00\xff") + b"\x00"


def pack_int_bytes(prefix: bytes, number: int, data: bytes) -> bytes:
    """``fdb.tuple.pack((number, data), prefix=prefix)``. Raises what the tuple layer raises
    (ValueError for an unsupported type, OverflowError or struct.error for an int of more
    than 255 bytes). Cost: about 45 bytecode instructions for a positive int (the tuple
    layer's: 217)."""
    if type(number) is int and number >= 0 and type(data) is bytes:
        # the hot path's case (an index, a version): _int and _bytes without their calls
        try:
            length = _LENGTH[number.bit_length()]
        except IndexError:  # an int of 2**63 or more: the general path's
            pass
        else:
            return b"".join(
                (
                    prefix,
                    _POSITIVE[length],
                    number.to_bytes(length, "big"),
                    b"\x01",
                    data.replace(b"\x00", b"\x00\xff"),
                    b"\x00",
                )
            )
    try:
        return prefix + _int(number) + _bytes(data)
    except IndexError:
        packed: bytes = fdb.tuple.pack((number, data), prefix=prefix)
        return packed


def pack_int_int_bytes(prefix: bytes, first: int, second: int, data: bytes) -> bytes:
    """``fdb.tuple.pack((first, second, data), prefix=prefix)`` (see :func:`pack_int_bytes`)."""
    try:
        return prefix + _int(first) + _int(second) + _bytes(data)
    except IndexError:
        packed: bytes = fdb.tuple.pack((first, second, data), prefix=prefix)
        return packed


def pack_int(prefix: bytes, number: int) -> bytes:
    """``fdb.tuple.pack((number,), prefix=prefix)`` (see :func:`pack_int_bytes`)."""
    try:
        return prefix + _int(number)
    except IndexError:
        packed: bytes = fdb.tuple.pack((number,), prefix=prefix)
        return packed


def pack_bytes(prefix: bytes, data: bytes) -> bytes:
    """``fdb.tuple.pack((data,), prefix=prefix)`` (see :func:`pack_int_bytes`)."""
    if type(data) is bytes:  # _bytes without its call: the hot path's case
        return prefix + b"\x01" + data.replace(b"\x00", b"\x00\xff") + b"\x00"
    try:
        return prefix + _bytes(data)
    except IndexError:
        packed: bytes = fdb.tuple.pack((data,), prefix=prefix)
        return packed


# -- unpacking -----------------------------------------------------------------------------


def _int_at(key: bytes, position: int) -> tuple[int, int]:
    """The int the tuple layer stored at ``position`` of ``key``, and the position after it:
    past the end of ``key`` when ``key`` ends inside the int (every caller reads on there,
    or compares it with the key's length).

    Raises:
        IndexError: anything else there (another type, a long int), or ``key`` ends at
            ``position``."""
    code = key[position]
    if 0x14 <= code < 0x1D:
        after = position + code - 0x13
        return int.from_bytes(key[position + 1 : after], "big"), after
    if 0x0B < code < 0x14:
        length = 0x14 - code
        after = position + 1 + length
        return int.from_bytes(key[position + 1 : after], "big") - _OFFSET[length], after
    raise IndexError


def _bytes_at(key: bytes, position: int) -> bytes:
    """The bytes the tuple layer stored from ``position`` to the end of ``key``.

    Raises:
        IndexError: anything else from there (another type, more elements after them), or
            ``key`` ends at ``position``."""
    if key[position] != _BYTES or key[-1] != 0:  # (so the final NUL is not the code)
        raise IndexError
    data = key[position + 1 : -1]
    if b"\x00" in data:
        if b"\x00" in data.replace(b"\x00\xff", b""):  # a terminator: more elements follow
            raise IndexError
        return data.replace(b"\x00\xff", b"\x00")
    return data


def _reference(key: bytes, prefix: bytes) -> tuple[Any, ...]:
    """``Subspace.unpack``: what the tuple layer reads in ``key`` after ``prefix``, or its
    errors (ValueError for a key outside the prefix)."""
    unpacked: tuple[Any, ...] = Subspace(rawPrefix=prefix).unpack(key)
    return unpacked


#: ``other(key, prefix)``: what an unpacking function returns for a key of another shape
#: than its own (by default the tuple layer's reading, :func:`_reference`).
Other = Callable[[bytes, bytes], tuple[Any, ...]]


def unpack_int_bytes(key: bytes, prefix: bytes, other: Other | None = None) -> tuple[Any, ...]:
    """``Subspace(rawPrefix=prefix).unpack(key)``: read by this module when it is an
    ``(int, bytes)`` key, by the tuple layer otherwise (whatever it holds, or its errors:
    ValueError for a key outside the prefix, others on bytes the tuple layer cannot read);
    ``other``, when given, reads a key of another shape instead (a caller that refuses such
    keys, or checks what they hold, does it there, off the hot path). Cost: about 90 bytecode
    instructions for an ``(int, bytes)`` key (the tuple layer's: 201)."""
    try:
        if key.startswith(prefix):
            position = len(prefix)
            code = key[position]
            if 0x14 <= code < 0x1D and key[-1] == 0:  # a positive int, then (maybe) bytes
                # _int_at and _bytes_at without their calls: the hot path's case
                after = position + code - 0x13
                if key[after] == _BYTES:
                    data = key[after + 1 : -1]
                    if b"\x00" not in data:
                        return int.from_bytes(key[position + 1 : after], "big"), data
            number, after = _int_at(key, position)
            return number, _bytes_at(key, after)
    except IndexError:
        pass
    return (other or _reference)(key, prefix)


def unpack_int_int_bytes(key: bytes, prefix: bytes, other: Other | None = None) -> tuple[Any, ...]:
    """``Subspace(rawPrefix=prefix).unpack(key)``, read by this module when it is an
    ``(int, int, bytes)`` key (see :func:`unpack_int_bytes`)."""
    try:
        if key.startswith(prefix):
            first, after = _int_at(key, len(prefix))
            second, after = _int_at(key, after)
            return first, second, _bytes_at(key, after)
    except IndexError:
        pass
    return (other or _reference)(key, prefix)


def unpack_int(key: bytes, prefix: bytes) -> tuple[Any, ...]:
    """``Subspace(rawPrefix=prefix).unpack(key)``, read by this module when it is an
    ``(int,)`` key (see :func:`unpack_int_bytes`)."""
    try:
        if key.startswith(prefix):
            number, after = _int_at(key, len(prefix))
            if after == len(key):
                return (number,)
    except IndexError:
        pass
    return _reference(key, prefix)


def unpack_bytes(key: bytes, prefix: bytes) -> tuple[Any, ...]:
    """``Subspace(rawPrefix=prefix).unpack(key)``, read by this module when it is a
    ``(bytes,)`` key (see :func:`unpack_int_bytes`)."""
    try:
        if key.startswith(prefix):
            return (_bytes_at(key, len(prefix)),)
    except IndexError:
        pass
    return _reference(key, prefix)


def unpack_last_bytes(key: bytes, position: int) -> bytes | None:
    """The bytes the tuple layer stored as the last element of ``key``, whose type code is at
    ``position``; None when something else is there (another type, more elements after it)
    or ``key`` ends at ``position``. Finds the element of a key read from its end
    (:func:`fdbqueue._storage.job_records.job_hint`), where no prefix is known."""
    try:
        return _bytes_at(key, position)
    except IndexError:
        return None
