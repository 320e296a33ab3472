"""The command line's one-line errors, argument types and help layout (used by
:mod:`fdbqueue.cli`).

Every error, usage or not, is one line on stderr: ``fdbqueue: error: ...`` (exit status 2 for
a usage error, 1 otherwise), without click's usage block. A bad number repeats what was typed
(:func:`typed`, shortened when long) and says what is allowed (:class:`Count`,
:class:`TupleInt`, :class:`Seconds`); :class:`NumberArguments` takes a negative number as an
argument (``push -5 --int``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import click

from fdbqueue._checks import check_packable_int

__all__ = [
    "PROGRAM",
    "TUPLE_INTS",
    "CommandLine",
    "Count",
    "NumberArguments",
    "Seconds",
    "TupleInt",
    "argparse_help",
    "typed",
]

PROGRAM = "fdbqueue"
#: How many characters of what the user typed an error message repeats.
SHOWN_CHARACTERS = 24
#: The ints FoundationDB's tuple layer stores, in words (the rule is
#: :func:`fdbqueue._checks.check_packable_int`'s).
TUPLE_INTS = (
    "a whole number strictly between -2**2040 and 2**2040 (about 1.26e614), what "
    "FoundationDB's tuple layer stores"
)
#: A word that reads as a negative number: -5, -1.5, -.5, -2e3.
NEGATIVE_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def typed(text: Any) -> str:
    """What the user typed, quoted as error messages repeat it: in full when short, else its
    start and its length (``'99999999999999999999'... (700 characters)``)."""
    text = str(text)
    if len(text) <= SHOWN_CHARACTERS:
        return repr(text)
    return f"{text[: SHOWN_CHARACTERS - 4]!r}... ({len(text):,} characters)"


class Count(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    """An int from ``low`` to ``high`` (default :data:`sys.maxsize`, the most any count
    goes to); a bad one is one line that repeats what was typed (:func:`typed`) and says
    what is allowed."""

    name = "integer"

    def __init__(self, low: int, high: int = sys.maxsize) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = whole_number(self, value, param, ctx)
        if not self.low <= number <= self.high:
            self.fail(
                f"{typed(value)} is out of range: give a whole number from {self.low:,} to "
                f"{self.high:,}",
                param,
                ctx,
            )
        return number


def whole_number(
    kind: click.ParamType,  # type: ignore[type-arg]  # generic from click 8.2 on
    value: Any,
    param: click.Parameter | None,
    ctx: click.Context | None,
) -> int:
    """``value`` (an int, or what was typed) as an int; else ``kind``'s one-line usage error
    that repeats what was typed (not a number, or past Python's 4,300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        kind.fail(f"{typed(value)} is not a whole number", param, ctx)


class TupleInt(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    """Any int FoundationDB's tuple layer packs (``abs(n) < 2**2040``: the rule is
    :func:`fdbqueue._checks.check_packable_int`'s); a bad one is one line that repeats what
    was typed (:func:`typed`) and says what is allowed."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = whole_number(self, value, param, ctx)
        try:
            return check_packable_int(number, "the number")
        except ValueError:
            self.fail(f"{typed(value)} is out of range: give {TUPLE_INTS}", param, ctx)


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    """A finite number of seconds (the option's own check says what range); NaN, infinity
    and numbers past a float's range (``1e999``) are one line that repeats what was typed
    and says what is allowed (``allowed``: ``"from 0 to 2,592,000"``, say)."""

    name = "seconds"

    def __init__(self, allowed: str = "") -> None:
        self.allowed = allowed

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{typed(value)} is not a number of seconds", param, ctx)
        if math.isfinite(number):
            return number
        wanted = f"give a number of seconds {self.allowed or 'that is finite'}"
        if math.isnan(number) or "inf" in str(value).lower():
            self.fail(f"{typed(value)} is not a finite number: {wanted}", param, ctx)
        self.fail(f"{typed(value)} is too large: {wanted}", param, ctx)


class NumberArguments(click.Command):
    """A click command whose arguments may be negative numbers (``push -5 --int``): a word
    that reads as one (:data:`NEGATIVE_NUMBER`) and is not an option's value is taken as an
    argument, as if it came after ``--``, instead of as an unknown option."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.numbers_last(args))

    def numbers_last(self, args: Sequence[str]) -> list[str]:
        """``args`` with the negative numbers that are arguments moved after a ``--``."""
        valued = {
            name
            for param in self.params
            if isinstance(param, click.Option) and not param.is_flag and not param.count
            for name in param.opts
        }
        kept: list[str] = []
        numbers: list[str] = []
        words = list(args)
        while words:
            word = words.pop(0)
            if word == "--":
                break
            if word in valued and words:
                kept += [word, words.pop(0)]  # an option's value, negative or not
            elif NEGATIVE_NUMBER.fullmatch(word):
                numbers.append(word)
            else:
                kept.append(word)
        if not numbers:
            return list(args)
        return [*kept, "--", *numbers, *words]


#: The option ``--memory=ADDRESS`` becomes (``--memory`` alone stays a flag).
MEMORY_ADDRESS_OPTION = "--memory-address"


def memory_addresses(args: list[str]) -> list[str]:
    """``args`` with each ``--memory=ADDRESS`` (before a ``--``) written as
    ``--memory-address ADDRESS``: a bare ``--memory`` is a flag (a private database), so that
    ``fdbqueue --memory shell`` keeps its meaning, and only ``=`` gives it an address."""
    rewritten: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            return rewritten + args[index:]
        if arg.startswith("--memory="):
            rewritten += [MEMORY_ADDRESS_OPTION, arg.removeprefix("--memory=")]
        else:
            rewritten.append(arg)
    return rewritten


class CommandLine(click.Group):
    """A click group whose errors are one line on stderr, ``fdbqueue: error: MESSAGE``, with
    click's exit status (2 for a usage error, 1 otherwise), instead of click's usage block;
    ``--memory=ADDRESS`` is read as :func:`memory_addresses` says."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, memory_addresses(list(args)))

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as error:
            message = " ".join(error.format_message().split())
            click.echo(f"{PROGRAM}: error: {message}", err=True)
            sys.exit(error.exit_code)
        except click.Abort:
            click.echo(f"{PROGRAM}: error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


#: The metavariable an argparse option's type shows in help, as click names its own types.
METAVARIABLES = {
    "int": "INTEGER",
    "positive_int": "INTEGER",
    "non_negative_int": "INTEGER",
    "float": "FLOAT",
    "latency_seconds": "SECONDS",
    "consumer_counts": "N,N,...",
    "mode_names": "MODE,...",
    "phase_names": "PHASE,...",
}


def argparse_help(parser: argparse.ArgumentParser, options: Iterable[argparse.Action]) -> str:
    """``parser``'s help in click's layout (``Usage:``, the description, ``Options:``), its
    ``options`` (the actions its ``add_argument`` returned) in order, so a command that parses
    its options with argparse reads like the others."""
    formatter = click.HelpFormatter()
    formatter.write_usage(parser.prog, "[OPTIONS]")
    if parser.description:
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(parser.description)
    rows = []
    for action in options:
        if not action.option_strings or action.dest == "help":
            continue
        name = ", ".join(action.option_strings)
        if action.nargs != 0:
            kind = getattr(action.type, "__name__", "")
            name += " " + str(action.metavar or METAVARIABLES.get(kind, "TEXT"))
        text = action.help or ""
        rows.append((name, text[:1].upper() + text[1:] + ("." * (not text.endswith(".")))))
    rows.append(("-h, --help", "Show this message and exit."))
    # click's own rows break words at hyphens ("high-" / "contention"): wrap at spaces only
    first = max(len(name) for name, _ in rows) + 2
    formatter.write_paragraph()
    formatter.write_heading("Options")
    for name, text in rows:
        lines = textwrap.wrap(
            text, max(20, formatter.width - first - 2), break_on_hyphens=False
        ) or [""]
        formatter.write(f"  {name:<{first}}{lines[0]}\n")
        for line in lines[1:]:
            formatter.write(f"  {'':<{first}}{line}\n")
    return formatter.getvalue()
