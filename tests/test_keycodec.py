"""fdbqueue._keycodec against FoundationDB's tuple layer, its reference (issue 44, decision 2).

The hot path's fixed key shapes are packed and unpacked by fdbqueue._keycodec; these
properties prove it byte-identical to ``fdb.tuple.pack`` and element-identical to
``Subspace.unpack``, errors included, over ints up to +-2**2040 (past 2**64, where the tuple
layer switches to the 0x1d/0x0b codes), bytes with ``\\x00``, ``\\xff`` and ``\\x00\\xff``,
every shape under random prefixes (ending in ``\\x00`` or ``\\xff`` too), arbitrary and
damaged keys, and tuples of other shapes. Each property runs quickly in the README's command
and with many more examples in the slow run (CI).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import fdb.tuple
import pytest
from fdb.subspace_impl import Subspace
from hypothesis import given, settings
from hypothesis import strategies as st

from fdbqueue import _keycodec

QUICK = settings(max_examples=100, deadline=None)
THOROUGH = settings(max_examples=2_500, deadline=None)
PROFILES = [
    pytest.param(QUICK, id="quick"),
    pytest.param(THOROUGH, id="thorough", marks=pytest.mark.slow("2,500 examples a property")),
]

#: Where the tuple layer changes encodings (one byte more, or the long codes), and its ends.
EDGES = [
    0,
    1,
    255,
    256,
    2**56 - 1,
    2**56,
    2**64 - 2,
    2**64 - 1,
    2**64,
    2**64 + 1,
    2**2000,
    2**2039,
    2**2040 - 1,
]
ints = st.one_of(
    st.integers(),
    st.integers(-(2**80), 2**80),
    st.integers(-(2**2040) + 1, 2**2040 - 1),
    st.sampled_from(EDGES + [-edge for edge in EDGES]),
)
#: Ints the codec packs itself (at most 63 bits).
small_ints = st.integers(-(2**63) + 1, 2**63 - 1)
data = st.one_of(
    st.binary(max_size=40),
    st.lists(st.sampled_from([b"\x00", b"\xff", b"\x00\xff", b"\xff\x00", b"a", b"\x01"])).map(
        b"".join
    ),
)
prefixes = st.one_of(
    st.builds(
        lambda head, tail: head + tail,
        st.binary(max_size=12),
        st.sampled_from([b"", b"\x00", b"\xff", b"\x00\xff", b"\x01"]),
    ),
    st.sampled_from(
        [Subspace(("fdbqueue", 3)).key(), Subspace(("q",)).key() + b"\xff", b"\x15\x01"]
    ),
)
#: Each shape: its pack and unpack functions, and its elements with any int the tuple
#: layer takes, and with ints of the codec's own.
SHAPES = {
    "(int, bytes)": (_keycodec.pack_int_bytes, _keycodec.unpack_int_bytes, (ints, data)),
    "(int, int, bytes)": (
        _keycodec.pack_int_int_bytes,
        _keycodec.unpack_int_int_bytes,
        (ints, ints, data),
    ),
    "(int,)": (_keycodec.pack_int, _keycodec.unpack_int, (ints,)),
    "(bytes,)": (_keycodec.pack_bytes, _keycodec.unpack_bytes, (data,)),
}


def elements(shape: str, fast: bool = False) -> st.SearchStrategy[tuple[Any, ...]]:
    """Tuples of ``shape``: with any int the tuple layer packs, or (``fast``) only the
    codec's own."""
    strategies = SHAPES[shape][2]
    if fast:
        strategies = tuple(small_ints if s is ints else s for s in strategies)
    return st.tuples(*strategies)


def shaped(
    values: Callable[[str], st.SearchStrategy[Any]],
) -> st.SearchStrategy[tuple[str, Any]]:
    """A shape drawn at random, and ``values(shape)`` drawn for it."""
    return st.sampled_from(list(SHAPES)).flatmap(
        lambda shape: st.tuples(st.just(shape), values(shape))
    )


shapes = st.one_of([elements(shape) for shape in SHAPES])
#: Ints too long for the tuple layer (it raises).
huge = st.integers(2**2040, 2**2041) | st.integers(-(2**2041), -(2**2040))
#: Anything else the tuple layer packs, or refuses: other types, lengths, nesting.
others = st.lists(
    st.one_of(
        ints,
        data,
        st.text(max_size=5),
        st.booleans(),
        st.none(),
        st.floats(allow_nan=False),
        st.tuples(ints, data),
        huge,
    ),
    max_size=4,
).map(tuple)


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """What ``function`` returns, or the type and message of what it raises."""
    try:
        return "returned", function(*args, **kwargs)
    except Exception as error:
        return "raised", (type(error), str(error))


def same(left: tuple[Any, ...], right: tuple[Any, ...]) -> bool:
    """Equal element by element, and of the same types (True is not 1; by their reprs, as a
    damaged key can hold a float NaN, which equals nothing)."""
    return repr(left) == repr(right) and [type(e) for e in left] == [type(e) for e in right]


@pytest.mark.parametrize("profile", PROFILES)
def test_pack_is_the_tuple_layers_pack(profile: settings) -> None:
    """Each shape, with any int the tuple layer takes, and other values in its places
    (another type, a bool, an int too long even for the tuple layer): the same bytes, or
    the same error."""
    anything = st.one_of(ints, data, st.text(max_size=3), st.booleans(), st.none(), huge)

    def tuples(shape: str) -> st.SearchStrategy[tuple[Any, ...]]:
        return elements(shape) | st.tuples(*[anything for _ in SHAPES[shape][2]])

    @profile
    @given(shaped(tuples), prefixes)
    def check(case: tuple[str, tuple[Any, ...]], prefix: bytes) -> None:
        shape, t = case
        pack = SHAPES[shape][0]
        assert outcome(pack, prefix, *t) == outcome(fdb.tuple.pack, t, prefix=prefix)

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_unpack_inverts_pack_as_the_tuple_layer_does(profile: settings) -> None:
    @profile
    @given(shaped(elements), prefixes)
    def check(case: tuple[str, tuple[Any, ...]], prefix: bytes) -> None:
        shape, t = case
        pack, unpack, _ = SHAPES[shape]
        key = pack(prefix, *t)
        unpacked = unpack(key, prefix)
        assert same(unpacked, t)
        assert same(unpacked, fdb.tuple.unpack(key, prefix_len=len(prefix)))
        assert same(unpacked, Subspace(rawPrefix=prefix).unpack(key))

    check()


def damaged(key: bytes, cut: int, at: int, byte: int, extra: bytes) -> list[bytes]:
    """``key`` cut short, with one byte changed, and with bytes added."""
    at = at % (len(key) or 1)
    changed = key[:at] + bytes([byte]) + key[at + 1 :]
    return [key[: max(0, len(key) - cut)], changed, key + extra]


@pytest.mark.parametrize("profile", PROFILES)
def test_unpack_of_any_key_is_the_tuple_layers(profile: settings) -> None:
    """Each shape's unpack of keys of every shape and others, damaged keys, keys outside
    the prefix: the same tuple or the same error as ``Subspace.unpack``."""

    @profile
    @given(
        st.sampled_from(list(SHAPES)),
        st.one_of(shapes, others),
        prefixes,
        st.binary(max_size=30),
        st.integers(0, 12),
        st.integers(0, 200),
        st.integers(0, 255),
        st.binary(min_size=1, max_size=4),
    )
    def check(
        shape: str,
        t: tuple[Any, ...],
        prefix: bytes,
        noise: bytes,
        cut: int,
        at: int,
        byte: int,
        extra: bytes,
    ) -> None:
        packed = outcome(fdb.tuple.pack, t)
        body = packed[1] if packed[0] == "returned" else noise
        keys = [prefix + noise, noise, *damaged(prefix + body, cut, at, byte, extra)]
        for key in keys:
            mine = outcome(SHAPES[shape][1], key, prefix)
            reference = outcome(Subspace(rawPrefix=prefix).unpack, key)
            assert mine[0] == reference[0]
            if mine[0] == "returned":
                assert same(mine[1], reference[1])
            else:
                assert mine[1] == reference[1]

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_the_codec_packs_its_shapes_without_the_tuple_layer(profile: settings) -> None:
    """The codec reads and writes its shapes itself (an identity proved only through its
    fallback would prove nothing): with the tuple layer's pack and Subspace.unpack made to
    fail, every key of its shape within its ints still packs and unpacks to the reference's
    bytes and tuple."""

    @profile
    @given(shaped(lambda shape: elements(shape, fast=True)), prefixes)
    def check(case: tuple[str, tuple[Any, ...]], prefix: bytes) -> None:
        shape, t = case
        pack, unpack, _ = SHAPES[shape]
        key = fdb.tuple.pack(t, prefix=prefix)
        unusable = AssertionError("the tuple layer was called")
        with (
            mock.patch.object(fdb.tuple, "pack", side_effect=unusable),
            mock.patch.object(Subspace, "unpack", side_effect=unusable),
        ):
            assert pack(prefix, *t) == key
            assert same(unpack(key, prefix), t)

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_byte_order_follows_tuple_order(profile: settings) -> None:
    @profile
    @given(shaped(lambda shape: st.tuples(elements(shape), elements(shape))), prefixes)
    def check(case: tuple[str, tuple[tuple[Any, ...], tuple[Any, ...]]], prefix: bytes) -> None:
        shape, (first, second) = case
        pack = SHAPES[shape][0]
        a, b = pack(prefix, *first), pack(prefix, *second)
        assert (a < b) == (first < second)
        assert (a == b) == (first == second)

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_unpack_last_bytes_reads_the_tuple_layers_last_element(profile: settings) -> None:
    """From the type code of a key's last element, the bytes the tuple layer packed there;
    None from any other place and for a key whose last element is no bytes."""

    @profile
    @given(prefixes, st.lists(st.one_of(ints, data), max_size=3), data, st.integers(0, 60))
    def check(prefix: bytes, before: list[Any], last: bytes, other: int) -> None:
        start = len(fdb.tuple.pack(tuple(before), prefix=prefix))
        key = fdb.tuple.pack((*before, last), prefix=prefix)
        assert _keycodec.unpack_last_bytes(key, start) == last
        if other < len(key) and other != start:
            found = _keycodec.unpack_last_bytes(key, other)
            assert found is None or fdb.tuple.pack((found,)) == key[other:]
        followed = fdb.tuple.pack((*before, last, 1), prefix=prefix)
        assert _keycodec.unpack_last_bytes(followed, start) is None

    check()
