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

A job's results have a codec of their own, ``result_codec=`` (any of the above, or
``"tagged"``, :class:`TaggedCodec`, the default: the tuple layer with a tag for each list,
tuple and dict, so that what handlers return most comes back as it was, whatever the queue's
codec); :func:`resolve_result_codec` resolves it.

Whatever the codec, ``None`` cannot be stored: ``dequeue`` and ``peek`` return ``None`` for an
empty queue, so a stored ``None`` could not be told apart from "no item". And an encoded value
must fit FoundationDB's value size limit of 100,000 bytes. Both are checked before anything is
written (:func:`encode_value`).
"""

from __future__ import annotations

import json
import math
import struct
import uuid
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
    "TaggedCodec",
    "TupleCodec",
    "Undecodable",
    "decode_or_undecodable",
    "encode_value",
    "resolve_codec",
    "resolve_result_codec",
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
        if type(value) is bytes:
            return value
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


class TaggedCodec:
    """The default result codec (``result_codec="tagged"``): what handlers return most,
    stored so that it comes back as it was, readable by any language's tuple layer.

    It stores ``None``, ``bool``, ``int`` (what the tuple layer packs: up to 255 bytes),
    ``float``, ``str``, ``bytes`` (``bytearray`` and ``memoryview`` come back as
    ``bytes``), ``uuid.UUID``, and ``list``, ``tuple`` and ``dict`` of these nested freely (at
    most :data:`TAGGED_DEPTH` deep; a dict's keys are any of these that Python hashes: str,
    int, bytes, tuples...). Each is given a *term*: a scalar is its own term (the tuple layer
    tells them apart by its type codes), a container a nested tuple that starts with a tag::

        list  [a, b]          -> ("l", term(a), term(b))
        tuple (a, b)          -> ("t", term(a), term(b))
        dict  {k1: v1, ...}   -> ("d", term(k1), term(v1), ...)   (keys in the dict's order)

    and the bytes stored are ``fdb.tuple.pack((term(value),))``: a scalar is stored as
    :class:`TupleCodec` stores it (``42`` is ``b"\\x15\\x2a"``), ``{"a": [1, b"x"]}`` as
    ``pack((("d", "a", ("l", 1, b"x")),))``. A nested tuple is always a container (no scalar
    is one), so a reader in another language unpacks the tuple and maps each nested tuple by
    its first element. ``decode(encode(v)) == v``, types included (a NaN comes back a NaN).

    Refused with TypeError, before anything is written: any other type (a ``set``, an object
    of your own class, a ``datetime``...). ValueError: an int beyond the tuple layer's 255
    bytes, a str that is no valid Unicode (a lone surrogate), nesting deeper than
    :data:`TAGGED_DEPTH` (a list that holds itself). Cost: no database access; one walk of
    the value, then the tuple layer's.

    Source followed: FoundationDB's tuple layer specification (type codes, nested tuples).
    """

    name = "tagged"

    def encode(self, value: Any) -> bytes:
        """Return the bytes that store ``value`` (see above).

        Raises:
            TypeError: ``value`` holds a type the codec does not store.
            ValueError: an int too large for the tuple layer, a str that is no valid Unicode,
                or nesting deeper than :data:`TAGGED_DEPTH`.
        """
        term = _term(value, 0)
        try:
            return bytes(fdb.tuple.pack((term,)))
        except UnicodeError as error:
            raise ValueError(f"the tagged codec stores valid Unicode only ({error})") from None
        except (OverflowError, struct.error):
            raise ValueError(
                "the tagged codec stores ints of at most 255 bytes (the tuple layer's limit)"
            ) from None

    def decode(self, data: bytes) -> Any:
        """Return the value ``data`` (bytes :meth:`encode` wrote) stands for.

        Raises:
            ValueError: ``data`` is no tagged value (not one tuple-layer element, or a nested
                tuple whose tag is unknown).
        """
        unpacked = fdb.tuple.unpack(bytes(data))
        if len(unpacked) != 1:
            raise ValueError(f"a tagged value is one tuple-layer element, not {len(unpacked)}")
        return _value(unpacked[0])

    def __repr__(self) -> str:
        return "TaggedCodec()"


#: How deep :class:`TaggedCodec` nests containers at most.
TAGGED_DEPTH = 100
_SCALARS = (str, bytes, int, float, uuid.UUID)  # bool is an int


def _term(value: Any, depth: int) -> Any:
    """``value``'s term (see :class:`TaggedCodec`), ``depth`` containers down."""
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if depth >= TAGGED_DEPTH:
        raise ValueError(
            f"the tagged codec nests containers {TAGGED_DEPTH} deep at most (a value that "
            "holds itself?)"
        )
    if isinstance(value, list):
        return ("l", *(_term(element, depth + 1) for element in value))
    if isinstance(value, tuple):
        return ("t", *(_term(element, depth + 1) for element in value))
    if isinstance(value, dict):
        terms: list[Any] = ["d"]
        for key, element in value.items():
            terms += (_term(key, depth + 1), _term(element, depth + 1))
        return tuple(terms)
    raise TypeError(
        f"the tagged codec cannot store a value of type {type(value).__name__}: it stores dict, "
        "list, tuple, str, int, float, bool, None, bytes and uuid.UUID, nested"
    )


def _value(term: Any) -> Any:
    """The value a term stands for (the inverse of :func:`_term`)."""
    if not isinstance(term, tuple):
        return term
    tag, elements = (term[0], term[1:]) if term else (None, ())
    if tag == "l":
        return [_value(element) for element in elements]
    if tag == "t":
        return tuple(_value(element) for element in elements)
    if tag == "d":
        if len(elements) % 2:
            raise ValueError("not a tagged value: a dict's term has a key without a value")
        return {_value(k): _value(v) for k, v in zip(elements[::2], elements[1::2], strict=True)}
    raise ValueError(f"not a tagged value: a nested tuple starting with {tag!r}")


_NAMED: dict[str, Callable[[], Codec[Any]]] = {
    "tuple": TupleCodec,
    "raw": RawCodec,
    "json": JsonCodec,
}
#: The names ``result_codec=`` takes (``"tagged"``, its default, besides the codecs').
_RESULT_NAMED: dict[str, Callable[[], Codec[Any]]] = {**_NAMED, "tagged": TaggedCodec}


def resolve_codec(codec: str | Codec[Any]) -> Codec[Any]:
    """Return the codec object for ``codec``: a name (``"tuple"``, ``"raw"``, ``"json"``) or a
    codec.

    Raises:
        ValueError: an unknown codec name.
        TypeError: neither a name nor an object with callable ``encode`` and ``decode``.
    """
    return _resolve(codec, _NAMED, "codec")


def resolve_result_codec(codec: str | Codec[Any] | None) -> Codec[Any]:
    """Return the result codec object for ``result_codec=``: None (the default) or
    ``"tagged"``, a :class:`TaggedCodec`; else what :func:`resolve_codec` takes.

    Raises:
        ValueError: an unknown codec name.
        TypeError: neither None, a name nor an object with callable ``encode`` and ``decode``.
    """
    if codec is None:
        return TaggedCodec()
    return _resolve(codec, _RESULT_NAMED, "result_codec")


def _resolve(
    codec: str | Codec[Any], named: dict[str, Callable[[], Codec[Any]]], option: str
) -> Codec[Any]:
    """The codec object for ``codec``, one of the names ``named`` or a codec object
    (``option``: the argument's name, for the errors)."""
    names = ", ".join(repr(name) for name in named)
    if isinstance(codec, str):
        try:
            return named[codec]()
        except KeyError:
            raise ValueError(
                f"unknown {option} {codec!r}: use {names} or an object with encode/decode"
            ) from None
    if isinstance(codec, Codec):  # runtime_checkable: has encode and decode
        return codec
    raise TypeError(
        f"{option} must be {names} or an object with encode(value) and decode(bytes), "
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
    if type(encoded) is not bytes:  # (bytes itself, the usual answer, needs neither test)
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
