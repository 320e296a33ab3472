"""Wording shared by the command line and the benchmark's report, the names Python's own
errors give the public classes' methods, and how a failure is told where it is recorded
(:func:`describe_failure`, :func:`describe_error`)."""

from __future__ import annotations

import traceback
import types
from typing import Any

__all__ = [
    "FAILURE_MESSAGE_CHARACTERS",
    "FAILURE_TRACEBACK_CHARACTERS",
    "FAILURE_TRACEBACK_LINES",
    "describe_error",
    "describe_failure",
    "name_methods_after",
    "plural",
]

#: Characters of a failure's message (and of its type's name) kept where the failure is
#: recorded: a dead letter's reason, a job's last error, the worker's log line. A longer
#: one is cut there and ends with ``"... [cut: n characters]"``.
FAILURE_MESSAGE_CHARACTERS = 2_000
#: Lines of a failure's traceback a job's last error keeps (the last ones), each cut as a
#: message is, and at most :data:`FAILURE_TRACEBACK_CHARACTERS` characters of them in all.
FAILURE_TRACEBACK_LINES = 20
FAILURE_TRACEBACK_CHARACTERS = 10_000


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


def _bounded(text: str, limit: int = FAILURE_MESSAGE_CHARACTERS) -> str:
    """``text`` cut to ``limit`` characters (saying so and how long it was), with what UTF-8
    cannot encode (a lone surrogate) written as a backslash escape: what FoundationDB's tuple
    layer can pack, at most about four bytes a character."""
    if len(text) > limit:
        text = f"{text[:limit]}... [cut: {len(text):,} characters]"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _named(error: BaseException) -> tuple[str, str]:
    """The type's name and the message of ``error``, bounded (:func:`_bounded`); the message
    ``"<unprintable TypeName>"`` when ``str(error)`` raises."""
    name = type(error).__name__
    try:
        message = str(error)
    except Exception:
        message = f"<unprintable {name}>"
    return _bounded(name), _bounded(message)


def _traceback(error: BaseException) -> str:
    """The last lines of ``error``'s traceback, bounded (see :func:`describe_failure`); ""
    when the traceback module cannot format it."""
    try:
        lines = traceback.format_exception(type(error), error, error.__traceback__)
    except Exception:
        return ""
    kept: list[str] = []
    left = FAILURE_TRACEBACK_CHARACTERS
    for line in reversed("".join(lines).rstrip("\n").splitlines()[-FAILURE_TRACEBACK_LINES:]):
        line = _bounded(line)
        if len(line) > left:
            break
        kept.insert(0, line)
        left -= len(line) + 1
    return "\n".join(kept)


def describe_failure(error: BaseException | str | None) -> tuple[str, str, str]:
    """``(type name, message, traceback)`` of a failure, bounded, as a job's record keeps it
    (and :func:`describe_error` words it): the message cut to
    :data:`FAILURE_MESSAGE_CHARACTERS` characters (``"<unprintable TypeName>"`` when
    ``str()`` of the exception raises), the traceback's last :data:`FAILURE_TRACEBACK_LINES`
    lines, each cut as a message is, at most :data:`FAILURE_TRACEBACK_CHARACTERS` characters
    of them (the last lines kept). A str is a message with no type and no traceback; None:
    ``("", "", "")``. Whatever the exception's ``__str__`` does, it does not raise; no
    database access."""
    if error is None:
        return ("", "", "")
    if isinstance(error, str):
        return ("", _bounded(error), "")
    return (*_named(error), _traceback(error))


def describe_error(error: BaseException) -> str:
    """``"TypeName: message"`` for an exception, bounded as :func:`describe_failure` bounds
    it: how a dead letter's reason (the worker's, an undecodable value's) and the worker's log
    tell a failure."""
    name, message = _named(error)
    return f"{name}: {message}"
