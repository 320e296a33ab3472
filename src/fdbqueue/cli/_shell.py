"""``fdbqueue shell``: every command of the command line at a prompt, on one database.

Like ``fdbcli`` and ``redis-cli``: the shell opens the database once (with ``--memory``, one
in-memory database for the whole session, so what ``push`` wrote, ``pop``, ``info`` and
``peek`` see), then runs each line as the command line would (``push a --queue demo``, with
or without a leading ``fdbqueue``), with the same output and the same one-line errors, and
goes on after an error. The shared options given to ``shell`` (``--queue demo``, ``--json``,
...) are every line's defaults; a line's own win.

At a terminal it prompts with line editing, a history kept in ``~/.fdbqueue_history`` (or
``$FDBQUEUE_HISTORY``) and completion of commands, options and their choices with Tab
(prompt_toolkit). Otherwise it reads the lines of standard input, without a prompt, so a
script can pipe commands in; it then exits with status 1 when a command failed, else 0.

A line names the queue and the output as the command line does (``--queue``, ``--json``,
...), but not the database, opened once for the session: ``--cluster-file``,
``--api-version``, ``--memory`` and ``--timeout`` on a line are a usage error (give them to
``shell``).

``work`` and ``dashboard`` run in the background (``work``'s summary is printed when it
ends), so a piped script never blocks on them; the shell's own commands: ``background``
lists what runs in the background, ``stop [N]`` stops number N (all without N; a worker after its
running jobs finish), ``help`` lists the commands, ``exit`` (or Ctrl-D, or the end of the
input) leaves, stopping them first (a worker started with ``--until-empty`` is left to
finish by itself). Blank lines and ``#`` comments are skipped.
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.patch_stdout import patch_stdout

from fdbqueue.cli._arguments import PROGRAM
from fdbqueue.cli._context import Context, first_line, guarded
from fdbqueue.cli._group import QUEUE_NAMES, cli, shared_options

__all__ = ["SHELL_COMMANDS", "CommandCompleter", "Shell", "Worker"]

#: The shell's own commands, with what each does (``help`` lists them).
SHELL_COMMANDS = {
    "background": "list the workers and dashboards running in the background of this shell",
    "stop": "stop N: stop worker or dashboard N (all without N); a worker after its jobs",
    "help": "list the commands (COMMAND --help: one command's options)",
    "exit": "leave the shell (also quit, Ctrl-D), stopping the workers",
}
#: The commands the shell runs in the background, with what its messages call each.
BACKGROUND = {"work": "worker", "dashboard": "dashboard"}
#: Seconds the shell waits for a new worker to refuse its options or handler.
START_WAIT = 0.5
#: Seconds the shell waits for a stopped worker's running jobs before it goes on.
STOP_WAIT = 60.0


@dataclass
class Worker:
    """A ``work`` or ``dashboard`` command running in the background of a shell."""

    number: int
    line: str
    until_empty: bool
    kind: str = "worker"  # what messages call it: worker, dashboard
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    status: int | None = None  # its exit status once it ended

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


class Shell:
    """One session of ``fdbqueue shell`` over one database.

    Args:
        context: the ``shell`` command's context: its shared options are every line's
            defaults; its database is opened once, here.

    Raises:
        click.ClickException: the database cannot be opened.
    """

    def __init__(self, context: Context) -> None:
        self.database = guarded(context.database)
        self.defaults = default_arguments(context.options)
        self.queue = context.options.get("queue") or context.options.get("directory")
        self.workers: dict[int, Worker] = {}
        self.failed = False
        self._numbers = iter(range(1, sys.maxsize))

    # -- running lines ----------------------------------------------------------------------

    def run_line(self, line: str) -> bool:
        """Run one line; False when it asks to leave (``exit``). An error prints one line on
        stderr and sets :attr:`failed`."""
        try:
            words = shlex.split(line, comments=True)
        except ValueError as error:  # an unclosed quote
            return self._error(f"{first_line(error)}: {line.strip()}")
        if words[:1] == [PROGRAM]:
            words = words[1:]
        if not words:
            return True
        command, arguments = words[0], words[1:]
        if command in ("exit", "quit"):
            return False
        if command in ("help", "?"):
            self.help()
        elif command == "background":
            self.list_background()
        elif command == "stop":
            self.stop(arguments)
        elif command == "shell":
            self._error("already in the shell")
        elif command in BACKGROUND and not ({"-h", "--help"} & set(arguments)):
            self.start_worker(words, line.strip())
        elif self.invoke(words) != 0:
            self.failed = True
        return True

    def invoke(self, words: list[str], stop: threading.Event | None = None) -> int:
        """Run one command of the command line on the session's database; its exit status.
        Its output and one-line errors are the command line's."""
        obj = {"database": self.database, "stop": stop, "in_shell": True}
        try:
            cli.main([*self.defaults, *words], prog_name=PROGRAM, obj=obj, standalone_mode=True)
        except SystemExit as exit:
            code = exit.code
            return code if isinstance(code, int) else (0 if code is None else 1)
        except KeyboardInterrupt:
            click.echo(f"{PROGRAM}: error: interrupted", err=True)
            return 1
        except Exception as error:  # as the command line's main: still one line
            click.echo(f"{PROGRAM}: error: {type(error).__name__}: {first_line(error)}", err=True)
            return 1
        return 0

    def _error(self, message: str) -> bool:
        click.echo(f"{PROGRAM}: error: {message}", err=True)
        self.failed = True
        return True

    # -- the shell's own commands -----------------------------------------------------------

    def help(self) -> None:
        """Print the command line's commands and the shell's own."""
        context = click.Context(cli, info_name=PROGRAM)
        rows = [
            (name, command.get_short_help_str(70))
            for name in cli.list_commands(context)
            if name != "shell" and (command := cli.get_command(context, name)) is not None
        ]
        rows += list(SHELL_COMMANDS.items())
        width = max(len(name) for name, _ in rows)
        click.echo("\n".join(f"  {name:<{width}}  {text}" for name, text in rows))

    def start_worker(self, words: list[str], line: str) -> None:
        """Run ``work`` or ``dashboard`` (``words[0]``) in a thread; ``stop`` ends it. One
        that ends within :data:`START_WAIT` seconds (a bad option or handler; ``--until-empty``
        on an empty queue; a port in use) prints only what it printed."""
        worker = Worker(
            next(self._numbers),
            line,
            until_empty=words[0] == "work" and "--until-empty" in words,
            kind=BACKGROUND[words[0]],
        )

        def run() -> None:
            worker.status = self.invoke(words, worker.stop)
            if worker.status != 0:
                self.failed = True

        worker.thread = threading.Thread(target=run, name=f"fdbqueue-shell-worker-{worker.number}")
        worker.thread.daemon = True
        self.workers[worker.number] = worker
        worker.thread.start()
        worker.thread.join(START_WAIT)  # a bad option or handler: its error, not "started"
        if worker.running:
            click.echo(
                f"{worker.kind} {worker.number} started: {line} (stop {worker.number} stops it)"
            )

    def list_background(self) -> None:
        """Print the workers and dashboards running in the background (``(none)`` when
        none). (``workers``, the command line's, lists a queue's worker loops, from any
        process.)"""
        running = [worker for worker in self.workers.values() if worker.running]
        lines = [f"{worker.number}  {worker.line}" for worker in running]
        click.echo("\n".join(lines) or "(none)")

    def stop(self, arguments: list[str]) -> None:
        """``stop [N]``: stop worker N (every worker without N) and wait for its jobs."""
        if len(arguments) > 1 or (arguments and not arguments[0].isdigit()):
            self._error("stop takes one worker number (background lists them), or none for all")
            return
        if arguments:
            worker = self.workers.get(int(arguments[0]))
            if worker is None or not worker.running:
                self._error(
                    f"no worker or dashboard {arguments[0]} is running (background lists them)"
                )
                return
            chosen = [worker]
        else:
            chosen = [worker for worker in self.workers.values() if worker.running]
        self._stop_all(chosen)

    def _stop_all(self, chosen: Iterable[Worker]) -> None:
        chosen = list(chosen)
        for worker in chosen:
            worker.stop.set()
        for worker in chosen:
            if worker.thread is not None:
                worker.thread.join(STOP_WAIT)
            click.echo(f"{worker.kind} {worker.number} stopped")

    def finish(self) -> None:
        """Leaving: wait for the workers started with ``--until-empty``, stop the others."""
        running = [worker for worker in self.workers.values() if worker.running]
        for worker in running:
            if worker.until_empty and worker.thread is not None:
                worker.thread.join()
        self._stop_all(worker for worker in running if worker.running)

    # -- reading lines ----------------------------------------------------------------------

    def run_lines(self, lines: Iterable[str]) -> int:
        """Run each line (a script on standard input); 1 when a command failed, else 0."""
        try:
            for line in lines:
                if not self.run_line(line):
                    break
        finally:
            self.finish()
        return 1 if self.failed else 0

    def run_prompt(self, session: PromptSession[str]) -> int:
        """Prompt for lines until ``exit`` or Ctrl-D (Ctrl-C drops the line); 0."""
        prompt = f"{PROGRAM} ({self.queue})> " if self.queue else f"{PROGRAM}> "
        with patch_stdout(raw=True):
            try:
                while True:
                    try:
                        line = session.prompt(prompt)
                    except KeyboardInterrupt:
                        continue
                    except EOFError:
                        break
                    if not self.run_line(line):
                        break
            finally:
                self.finish()
        return 0


def default_arguments(options: dict[str, Any]) -> list[str]:
    """The shared options given to ``shell`` as arguments every line starts with (the queue
    options and ``--json``; the connection is the session's database)."""
    arguments: list[str] = []
    for name in QUEUE_NAMES:
        value = options.get(name)
        flag = "--" + name.replace("_", "-")
        if value is True:
            arguments.append(flag)
        elif value not in (None, False):
            arguments += [flag, str(value)]
    if options.get("as_json"):
        arguments.append("--json")
    return arguments


class CommandCompleter(Completer):
    """Completes the command line's commands and the shell's, then the options of the
    command typed, and the choices of an option that takes one (``--codec``: tuple, raw,
    json)."""

    def __init__(self, group: click.Group) -> None:
        self.group = group
        self.context = click.Context(group, info_name=PROGRAM)

    def words(self) -> list[str]:
        """Every command name, the shell's own included."""
        names = [name for name in self.group.list_commands(self.context) if name != "shell"]
        return sorted([*names, *SHELL_COMMANDS, "quit"])

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        before = document.text_before_cursor
        words = before.split()
        if words[:1] == [PROGRAM]:
            words = words[1:]
        current = "" if not words or before[-1:].isspace() else words[-1]
        done = words if not current else words[:-1]
        candidates: list[str] | None
        if not done:
            candidates = self.words()
        else:
            command = self.group.get_command(self.context, done[0])
            params = list(command.params if command is not None else self.group.params)
            candidates = self._choices(params, done[-1]) if len(done) > 1 else None
            if candidates is None:
                candidates = sorted(
                    name
                    for param in params
                    if isinstance(param, click.Option)
                    for name in [*param.opts, *param.secondary_opts]
                    if name.startswith("--")
                )
        for candidate in candidates or []:
            if candidate.startswith(current):
                yield Completion(candidate, start_position=-len(current))

    @staticmethod
    def _choices(params: list[click.Parameter], previous: str) -> list[str] | None:
        for param in params:
            if isinstance(param, click.Option) and previous in param.opts:
                if isinstance(param.type, click.Choice):
                    return [str(choice) for choice in param.type.choices]
                return [] if not param.is_flag else None
        return None


def history() -> History:
    """The prompt's history: ``$FDBQUEUE_HISTORY`` or ``~/.fdbqueue_history``, kept between
    sessions; in memory only when that file cannot be written."""
    path = os.environ.get("FDBQUEUE_HISTORY") or os.path.expanduser("~/.fdbqueue_history")
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError:
        return InMemoryHistory()
    return FileHistory(path)


def standard_input() -> TextIO:
    """Standard input (a test runner's too: click's CliRunner replaces ``sys.stdin``)."""
    return sys.stdin


@cli.command(short_help="Run commands at a prompt, on one database for the session.")
@shared_options()
@click.pass_obj
def shell(context: Context) -> int:
    """Run every command at a prompt on one database: with --memory, one in-memory database
    for the whole session. History and Tab completion at a terminal; otherwise the lines of
    standard input, one command each (exit status 1 when one failed).

    work and dashboard run in the background; "background" lists them, "stop [N]" stops them,
    "help" lists the commands, "exit" or Ctrl-D leaves. The shared options given here
    (--queue, --json, ...) are every command's defaults; the database's (--cluster-file,
    --api-version, --memory, --timeout) go here only.
    """
    session = Shell(context)
    stream = standard_input()
    if not stream.isatty():
        return session.run_lines(stream)
    prompt: PromptSession[str] = PromptSession(
        history=history(), completer=CommandCompleter(cli), complete_while_typing=False
    )
    return session.run_prompt(prompt)
