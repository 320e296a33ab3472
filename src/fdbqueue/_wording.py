"""Wording shared by the command line and the benchmark's report, and the names Python's
own errors give the public classes' methods."""

from __future__ import annotations

import types
from typing import Any

__all__ = ["name_methods_after", "plural"]


def name_methods_after(cls: type) -> None:
    """Give ``cls`` its own copy of each public plain function it inherits from a base class
    (one that ``cls`` does not define itself), named ``cls.name``: Python names the function
    in a ``TypeError`` for missing or extra arguments by its code's qualified name, and a
    user calling ``Queue.ack`` must read ``Queue.ack()``, not an internal base class's name.
    Wrappers (decorated methods, whose code is named elsewhere) are left as they are; they
    word their own errors."""
    for base in cls.__mro__[1:]:
        for name, function in vars(base).items():
            if name.startswith("_") or not isinstance(function, types.FunctionType):
                continue
            if any(name in vars(klass) for klass in cls.__mro__[: cls.__mro__.index(base)]):
                continue  # cls, or a class between, defines it
            code = function.__code__
            # Python 3.11 on (3.10's messages give the bare name, and its code no co_qualname)
            if getattr(code, "co_qualname", None) != f"{base.__name__}.{name}":
                continue  # a wrapper
            qualname = f"{cls.__name__}.{name}"
            renamed: dict[str, Any] = {"co_qualname": qualname}
            copy = types.FunctionType(
                code.replace(**renamed),
                function.__globals__,
                name,
                function.__defaults__,
                function.__closure__,
            )
            copy.__kwdefaults__ = function.__kwdefaults__
            copy.__dict__.update(function.__dict__)
            copy.__doc__ = function.__doc__
            copy.__annotations__ = function.__annotations__
            copy.__module__ = function.__module__
            copy.__qualname__ = qualname
            setattr(cls, name, copy)


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless ``count`` is 1: ``1 dead letter``, ``2 items``."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"
