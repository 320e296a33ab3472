"""The command line's one-line errors and help layout (used by :mod:`fdbqueue.cli`).

Every error, usage or not, is one line on stderr: ``fdbqueue: error: ...`` (exit status 2 for
a usage error, 1 otherwise), without click's usage block.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

import click

__all__ = ["PROGRAM", "CommandLine", "argparse_help"]

PROGRAM = "fdbqueue"


class CommandLine(click.Group):
    """A click group whose errors are one line on stderr, ``fdbqueue: error: MESSAGE``, with
    click's exit status (2 for a usage error, 1 otherwise), instead of click's usage block."""

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


def argparse_help(parser: argparse.ArgumentParser) -> str:
    """``parser``'s help in click's layout (``Usage:``, the description, ``Options:``), so a
    command that parses its options with argparse reads like the others."""
    formatter = click.HelpFormatter()
    formatter.write_usage(parser.prog, "[OPTIONS]")
    if parser.description:
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(parser.description)
    rows = []
    for action in parser._actions:  # argparse lists its options nowhere public
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
