"""Codecs: how a queue turns the values you give it into the bytes stored in FoundationDB.

Every queue has one codec, chosen with ``codec=`` when the queue is made:

``"tuple"`` (the default)
    Any value FoundationDB's tuple layer packs (int, str, bytes, float, bool, UUID, nested
    tuples, ...), stored as ``fdb.tuple.pack((value,))``: the layout FoundationDB's Java
    recipes (``MicroQueue``, ``MicroPriority``) use for values.
``"raw"``
    ``bytes`` in, ``bytes`` out, stored unchanged: the layout FoundationDB's Python queue
    recipe uses (``tr[key] = value``).
``"json"``
    dicts, lists, str, int, float, bool (and None inside a container), stored as compact
    UTF-8 JSON (:class:`JsonCodec`), readable by any language's JSON library; what JSON would
    change (a tuple, a dict key that is not a str, NaN) is refused.
any object with ``encode(value) -> bytes`` and ``decode(data: bytes) -> value``
    Your own format (JSON, msgpack, protobuf, ...).

Whatever the codec, ``None`` cannot be stored: ``dequeue`` and ``peek`` return ``None`` for an
empty queue, so a stored ``None`` could not be told apart from "no item". And an encoded value
must fit FoundationDB's value size limit of 100,000 bytes. Both are checked before anything is
written (:func:`encode_value`).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import fdb.tuple

from fdbqueue._wording import describe_error

__all__ = [
    "MAX_VALUE_BYTES",
    "Codec",
    "JsonCodec",
    "RawCodec",
    "TupleCodec",
    "Undecodable",
    "decode_or_undecodable",
    "encode_value",
    "resolve_codec",
]

#: FoundationDB's limit on the size of a value, in bytes (error 2103 ``value_too_large``).
MAX_VALUE_BYTES = 100_000

#: The type of the values a codec encodes and decodes.
T = TypeVar("T")


@runtime_checkable
class Codec(Protocol[T]):
    """What a codec provides: ``encode(value) -> bytes`` and ``decode(bytes) -> value``.

    ``decode(encode(v))`` must give back a value equal to ``v``. ``encode`` should raise
    TypeError or ValueError for values it cannot represent.

    A codec should also declare ``name``, a str that says how its bytes are to be read (the
    built-in codecs are ``"tuple"``, ``"raw"`` and ``"json"``): a queue records it at its first
    write, and a queue object opened later with a codec of another name raises
    :class:`~fdbqueue.QueueTypeError` before anything changes. A codec without a ``name``
    is neither recorded nor checked.

    Generic in the value type for type checkers: a codec whose ``decode`` returns ``str``
    (and whose ``encode`` takes one) is a ``Codec[str]``, and a queue made with it is a
    ``Queue[str]``: its takes return ``str | None`` and its enqueues take a ``str``.
    :class:`RawCodec` is a ``Codec[bytes]``; :class:`TupleCodec` and :class:`JsonCodec` are
    ``Codec[Any]`` (their values are too varied for one type).
    """

    def encode(self, value: T) -> bytes:
        """Return the bytes to store for ``value``."""
        ...

    def decode(self, data: bytes) -> T:
        """Return the value that ``data`` (bytes produced by :meth:`encode`) stands for."""
        ...


class TupleCodec:
    """Stores a value as the one-element tuple ``fdb.tuple.pack((value,))``.

    Accepts whatever the tuple layer packs; anything else raises TypeError on encode. This is
    the Java recipes' value layout (``Tuple.from(value).pack()``).
    """

    name = "tuple"

    def encode(self, value: Any) -> bytes:
        """Pack ``value`` as a one-element tuple.

        Raises:
            TypeError: the tuple layer cannot pack ``value``.
        """
        try:
            return bytes(fdb.tuple.pack((value,)))
        except (TypeError, ValueError, OverflowError, struct.error) as error:
            # struct.error: an int beyond the tuple layer's 255 bytes
            raise TypeError(
                f"the tuple codec cannot store a {type(value).__name__} ({error}); it takes "
                "what fdb.tuple packs: int, str, bytes, float, bool, uuid.UUID, tuples of these"
            ) from None

    def decode(self, data: bytes) -> Any:
        """Unpack a one-element tuple and return its element."""
        return fdb.tuple.unpack(data)[0]

    def __repr__(self) -> str:
        return "TupleCodec()"


class RawCodec:
    """Stores bytes unchanged; values must be ``bytes``, ``bytearray`` or ``memoryview``.

    This is the Python recipe's value layout. Decoding returns ``bytes``.
    """

    name = "raw"

    def encode(self, value: Any) -> bytes:
        """Return ``value`` as bytes.

        Raises:
            TypeError: ``value`` is not bytes-like.
        """
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"the raw codec stores bytes, not {type(value).__name__}")

    def decode(self, data: bytes) -> bytes:
        """Return ``data`` unchanged."""
        return bytes(data)

    def __repr__(self) -> str:
        return "RawCodec()"


class JsonCodec:
    """Stores JSON: ``dict`` (with ``str`` keys), ``list``, ``str``, ``int``, ``float`` and
    ``bool``, nested freely, and ``None`` inside them; as compact UTF-8 text (no spaces,
    non-ASCII characters as they are). What is taken out equals what was put in.

    The standard library's :mod:`json` does the work: it is always there, and for queue items
    (at most 100,000 bytes) its speed is small next to a transaction; a faster library
    (``orjson``) would add a compiled dependency for no gain a queue can measure.

    Refused with TypeError, before anything is written, rather than changed silently: a
    ``tuple`` (JSON would give it back as a list: pass a list), a ``dict`` key that is not a
    ``str`` (JSON would turn ``1`` into ``"1"``), NaN and infinities (not JSON), and any other
    type (``bytes``, ``set``, ...).

    Cost: no database access; the checks walk the value once before :mod:`json` does.
    """

    name = "json"

    def encode(self, value: Any) -> bytes:
        """Return ``value`` as compact UTF-8 JSON.

        Raises:
            TypeError: ``value`` holds something JSON cannot carry unchanged (see above).
        """
        _check_json(value)
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    def decode(self, data: bytes) -> Any:
        """Return the value the JSON ``data`` holds.

        Raises:
            ValueError: ``data`` is not UTF-8 JSON (a queue moves such an item to the dead
                letters).
        """
        return json.loads(bytes(data).decode())

    def __repr__(self) -> str:
        return "JsonCodec()"


def _check_json(value: Any) -> None:
    """Raise TypeError where :class:`JsonCodec` cannot carry ``value`` unchanged."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"the json codec cannot store {value!r}: JSON has no NaN or infinity")
        return
    if isinstance(value, tuple):
        raise TypeError(
            "the json codec cannot store a tuple: JSON has none, it would come back as a list "
            "(unequal to the tuple); pass a list"
        )
    if isinstance(value, list):
        for element in value:
            _check_json(element)
        return
    if isinstance(value, dict):
        for key, element in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"the json codec stores dict keys that are str, not {type(key).__name__} "
                    f"({key!r}): JSON would turn it into a string"
                )
            _check_json(element)
        return
    raise TypeError(f"the json codec cannot store {type(value).__name__}")


_NAMED: dict[str, Callable[[], Codec[Any]]] = {
    "tuple": TupleCodec,
    "raw": RawCodec,
    "json": JsonCodec,
}


def resolve_codec(codec: str | Codec[Any]) -> Codec[Any]:
    """Return the codec object for ``codec``: a name (``"tuple"``, ``"raw"``, ``"json"``) or a
    codec.

    Raises:
        ValueError: an unknown codec name.
        TypeError: neither a name nor an object with callable ``encode`` and ``decode``.
    """
    if isinstance(codec, str):
        try:
            return _NAMED[codec]()
        except KeyError:
            raise ValueError(
                f"unknown codec {codec!r}: use 'tuple', 'raw', 'json' or an object with "
                "encode/decode"
            ) from None
    if isinstance(codec, Codec):  # runtime_checkable: has encode and decode
        return codec
    raise TypeError(
        f"codec must be 'tuple', 'raw', 'json' or an object with encode(value) and "
        "decode(bytes), "
        f"not {type(codec).__name__}"
    )


@dataclass(frozen=True)
class Undecodable:
    """Stands for a stored value the queue's codec could not decode, where a listing
    (``leases()``, ``dead_letters()``) would show the value.

    Attributes:
        raw: the stored bytes, unchanged.
        error: why decoding failed (the exception's type and message).
    """

    raw: bytes
    error: str


def decode_or_undecodable(codec: Codec[Any], raw: bytes) -> Any:
    """Return ``codec.decode(raw)``, or an :class:`Undecodable` when decoding raises."""
    try:
        return codec.decode(raw)
    except Exception as error:  # a codec may raise anything on bytes it did not write
        return Undecodable(raw, describe_error(error))


def codec_name(codec: Codec[Any]) -> str:
    """Return a short name for ``codec``: ``"tuple"``, ``"raw"`` or its class name."""
    return str(getattr(codec, "name", type(codec).__name__))


def encode_value(codec: Codec[Any], value: Any) -> bytes:
    """Encode ``value`` with ``codec`` and check it can be stored as a queue item.

    Cost: no database access; call it before the first write of an operation.

    Returns:
        The bytes to store.

    Raises:
        ValueError: ``value`` is None (it would be ambiguous with "empty queue"), or the encoded
            value is larger than :data:`MAX_VALUE_BYTES` (100,000 bytes).
        TypeError: the codec cannot encode ``value``, or a custom codec returned something
            other than bytes.
    """
    if value is None:
        raise ValueError(
            "None cannot be stored in a queue: dequeue and peek return None for an empty queue"
        )
    encoded = codec.encode(value)
    if isinstance(encoded, (bytearray, memoryview)):
        encoded = bytes(encoded)
    if not isinstance(encoded, bytes):
        raise TypeError(
            f"{codec_name(codec)} codec's encode() returned {type(encoded).__name__}, not bytes"
        )
    if len(encoded) > MAX_VALUE_BYTES:
        raise ValueError(
            f"encoded value is {len(encoded):,} bytes; FoundationDB's value size limit is "
            f"{MAX_VALUE_BYTES:,} bytes"
        )
    return encoded
