"""Checks of the arguments every layer takes (counts, flags, seconds), made before anything is
read or written, with the messages users see."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, ForwardRef, Protocol, TypeVar

import fdb.tuple

__all__ = [
    "Keywords",
    "check_count",
    "check_flag",
    "check_keywords",
    "check_packable_int",
    "check_seconds",
    "spell_out",
]

Function = TypeVar("Function", bound=Callable[..., Any])


def check_packable_int(number: int, name: str) -> int:
    """Return the int ``number`` when FoundationDB's tuple layer can pack it (at most 255
    bytes of magnitude: ``abs(number) < 2**2040``), else raise a short ValueError (the
    tuple layer's own error is a ``struct.error``, and an int's repr may run to hundreds of
    digits). No database access."""
    try:
        fdb.tuple.pack((number,))
    except Exception:  # struct.error, or a ValueError past the length byte
        raise ValueError(
            f"{name} is an int of {number.bit_length():,} bits: the tuple layer packs ints "
            "of at most 255 bytes (abs(n) < 2**2040)"
        ) from None
    return number


def check_count(n: Any, name: str = "n") -> None:
    """Raise TypeError unless ``n`` is an int (not a bool), ValueError if it is negative."""
    if type(n) is bool or not isinstance(n, int):
        raise TypeError(f"{name} must be an int, not {type(n).__name__}")
    if n < 0:
        raise ValueError(f"{name} must be >= 0, not {n}")


def check_flag(flag: Any, name: str) -> bool:
    """Return ``flag`` if it is a bool; raise TypeError otherwise (``"no"`` is truthy, so a
    non-bool flag is refused rather than guessed)."""
    if not isinstance(flag, bool):
        raise TypeError(f"{name} must be True or False, not {flag!r}")
    return flag


_INFINITY = math.inf
#: The largest int below which every int is a float exactly (2**53).
_EXACT_INTS = 2**53


def check_seconds(
    seconds: Any, name: str, *, allow_infinity: bool = False, allow_zero: bool = False
) -> float:
    """Return ``seconds`` as a float > 0 (>= 0 with ``allow_zero``), or raise before anything
    is read or written. Every seconds argument of fdbqueue goes through it.

    Raises:
        TypeError: not a number (bool included).
        ValueError: NaN, not > 0 (negative with ``allow_zero``), infinite when
            ``allow_infinity`` is False, or an int too large for a float (``10**400``).
    """
    kind = type(seconds)
    # The usual cases first, where every check below passes: a positive finite float, or a
    # positive int a float holds exactly.
    if kind is float:
        if 0 < seconds < _INFINITY:
            return seconds  # type: ignore[no-any-return]
    elif kind is int and 0 < seconds <= _EXACT_INTS:
        return float(seconds)
    if kind is bool or not isinstance(seconds, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(seconds).__name__}")
    try:
        number = float(seconds)
    except OverflowError:  # an int past a float's range: as good as infinite, and refused
        raise ValueError(
            f"{name} must be a number of seconds a float can hold, not an int of "
            f"{len(str(abs(seconds)))} digits"
        ) from None
    lowest = "> 0" if not allow_zero else ">= 0"
    if math.isnan(number) or number < 0 or (number == 0 and not allow_zero):
        raise ValueError(f"{name} must be a number of seconds {lowest}, not {number}")
    if math.isinf(number) and not allow_infinity:
        raise ValueError(f"{name} must be finite, not {number}")
    return number


class Keywords(Protocol):
    """A ``TypedDict`` class, as :func:`check_keywords` reads it: its keys' names."""

    __required_keys__: ClassVar[frozenset[str]]
    __optional_keys__: ClassVar[frozenset[str]]


def check_error(error: Any) -> None:
    """Raise TypeError unless ``error`` is None or an exception (what a failed handler
    raised)."""
    if error is not None and not isinstance(error, BaseException):
        raise TypeError(f"error must be an exception, not {type(error).__name__}")


def check_keywords(given: Mapping[str, Any], keywords: type[Keywords], where: str) -> None:
    """Check the keyword arguments a function took as ``**options`` (typed
    ``Unpack[keywords]``, a ``TypedDict``) as Python checks a signature: raise TypeError,
    worded as Python's own, for a keyword that is not one of ``keywords`` or a required one
    left out. ``where`` names the function as its user calls it (``"Queue.__init__"``)."""
    for name in given:
        if name not in keywords.__required_keys__ | keywords.__optional_keys__:
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
    missing = sorted(keywords.__required_keys__ - set(given))
    if missing:
        names = ", ".join(repr(name) for name in missing)
        plural = "s" if len(missing) > 1 else ""
        raise TypeError(
            f"{where}() missing {len(missing)} required keyword-only argument{plural}: {names}"
        )


def spell_out(
    function: Function, keywords: type[Keywords], defaults: Mapping[str, Any]
) -> Function:
    """Give ``function``, which takes ``**options`` typed ``Unpack[keywords]`` (a
    ``TypedDict``), the signature ``help()``, ``inspect.signature`` and the API reference
    show: ``**options`` spelt out as one keyword-only parameter per key of ``keywords``,
    the required ones first, each with the type ``keywords`` declares and, for the others,
    its default from ``defaults``. The call itself is unchanged (:func:`check_keywords`
    checks it). Returns ``function``; no database access."""
    signature = inspect.signature(function)
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    declared = getattr(keywords, "__annotations__", {})
    required = [name for name in declared if name in keywords.__required_keys__]
    spelt = []
    for name in required + [name for name in declared if name not in required]:
        annotation = declared[name]
        if isinstance(annotation, ForwardRef):
            annotation = annotation.__forward_arg__
        default = inspect.Parameter.empty if name in required else defaults[name]
        keyword = inspect.Parameter.KEYWORD_ONLY
        spelt.append(inspect.Parameter(name, keyword, default=default, annotation=annotation))
    function.__signature__ = signature.replace(parameters=kept + spelt)  # type: ignore[attr-defined]
    return function
