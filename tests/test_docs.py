"""Every code block of ``README.md`` and ``docs/*.rst`` runs, on the in-memory database.

How blocks are found and what counts as code: ``tests/doc_blocks.py``. In short:

- **Python blocks** (```` ```python ````, ``.. code-block:: python``): one test per block. A
  page's blocks run in order, in one namespace, in a fresh process per page, and each block
  creates what it uses (``db = memory.open()`` where the page starts). Top-level ``await``
  runs inside ``asyncio.run``. A block that raises fails its test with the traceback; a block
  that runs longer than ``doc_blocks.BLOCK_TIMEOUT`` fails with every thread's stack; the
  blocks after a failed one fail too, naming it.
- **Shell blocks** (```` ```sh ````, ``.. code-block:: sh``/``console``): one test per block;
  each ``fdbqueue ...`` line runs through click's ``CliRunner`` with
  ``obj={"database": db}``, one in-memory database per block, so ``--memory`` and
  ``--cluster-file`` name the same database here. A command that exits non-zero fails the
  test with its output. Lines that are not ``fdbqueue`` commands (``pip install``,
  ``python examples/...``, ``tox``, ``git``, ``pytest``) are not run, nor the commands
  ``UNRUNNABLE_COMMANDS`` lists (each with the reason).
- A block preceded by a ``not run: <reason>`` comment (``<!-- ... -->`` in Markdown, ``..`` in
  reStructuredText) is skipped with the reason; the rendered ``# not run:`` first line is
  refused (``test_not_run_markers_are_not_rendered``).
  ``SHELL_BLOCKS_NOT_RUN`` skips the shell blocks of a page (``"docs/cli.rst"``) or one block
  (``"README.md:231"``, its first line); to enable them, remove the entry.
- rst literal blocks (``::``) are text and are not run; a literal block that compiles as
  Python fails ``test_python_is_in_code_blocks``, so that no Python escapes the collector.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import threading
from functools import cache
from typing import Any

import doc_blocks
import pytest
from click.testing import CliRunner
from doc_blocks import Block

from fdbqueue import memory
from fdbqueue.cli import cli

BLOCKS = doc_blocks.all_blocks()
PYTHON_BLOCKS = [block for block in BLOCKS if block.language == "python"]
SHELL_BLOCKS = [block for block in BLOCKS if block.language == "shell"]
LITERAL_BLOCKS = [block for block in BLOCKS if block.language == "literal"]

# Commands that cannot run in a test, as a pattern searched in the line, and why.
UNRUNNABLE_COMMANDS = [
    (r"\s--directory\b", "--directory needs the directory layer on a real cluster"),
    (r"\bbench\b", "the benchmark runs for minutes (tests/test_benchmark.py covers it)"),
    (r"\swork\s", "the worker loop runs until SIGINT and imports the reader's handler"),
    (r"\stail\b", "tail follows the queue until Ctrl-C"),
    (
        r"\smemory serve\b",
        "the server runs until SIGINT (tests/test_cli_memory_server.py runs it, and the "
        "schedules page's block against it)",
    ),
    (
        r"\sdashboard\b",
        "the dashboard serves until Ctrl-C (tests/test_dashboard.py runs the command with "
        "uvicorn.run replaced, tests/test_dashboard_browser.py serves it to Chromium)",
    ),
    (
        r"--cluster-file\s",
        "a cluster file names a real cluster (one that does not exist is refused)",
    ),
]

# Shell blocks not run yet, and why: a page ("docs/cli.rst") or a block ("README.md:231").
# Remove an entry to enable its blocks.
SHELL_BLOCKS_NOT_RUN: dict[str, str] = {}

COMMAND_TIMEOUT = 30.0  # seconds per fdbqueue command


def block_id(block: Block) -> str:
    return block.name


@cache
def page_results(page: str) -> dict[int, dict[str, Any]]:
    """Run ``page``'s Python blocks in a fresh process; each block's result by its line."""
    return run_blocks(
        [block for block in PYTHON_BLOCKS if block.page == page and block.not_run_reason is None]
    )


def run_blocks(
    blocks: list[Block], block_timeout: float = doc_blocks.BLOCK_TIMEOUT
) -> dict[int, dict[str, Any]]:
    """Run ``blocks`` in order in a fresh process; each block's result by its line."""
    completed = subprocess.run(
        [sys.executable, str(doc_blocks.ROOT / "tests" / "doc_blocks.py"), str(block_timeout)],
        input=doc_blocks.blocks_as_json(blocks),
        capture_output=True,
        text=True,
        timeout=block_timeout * len(blocks) + 60,
        cwd=doc_blocks.ROOT,
        check=False,
    )
    results: dict[int, dict[str, Any]] = {}
    for line in completed.stdout.splitlines():
        if line.startswith(doc_blocks.RESULT_PREFIX):
            result = json.loads(line.removeprefix(doc_blocks.RESULT_PREFIX))
            results[result["line"]] = result
    for result in results.values():
        if result["status"] == "started":  # the process ended inside this block
            result["status"] = "failed"
            result["error"] = (
                f"the block did not finish (exit status {completed.returncode}; a hang "
                f"dumps every thread's stack after {block_timeout} s):\n"
                f"{completed.stdout}\n{completed.stderr}"
            )
    return results


def test_not_run_markers_are_not_rendered() -> None:
    """A reader sees no "# not run:" line in the rendered README or docs: the marker is a
    comment before the block, never the block's first line."""
    rendered = [
        block.name for block in BLOCKS if block.language != "literal" and block.marked_inside
    ]
    assert rendered == [], f"move the marker before the block (as a comment): {rendered}"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=block_id)
def test_python_block(block: Block) -> None:
    if block.not_run_reason is not None:
        pytest.skip(f"not run: {block.not_run_reason}")
    results = page_results(block.page)
    result = results.get(block.line)
    if result is None:
        failed = [line for line, each in results.items() if each["status"] == "failed"]
        pytest.fail(
            f"{block.name} did not run: the block at {block.page}:{failed[0]} failed first"
            if failed
            else f"{block.name} did not run (no result from the page's process)"
        )
    if result["status"] != "passed":
        pytest.fail(f"{block.name} failed:\n{block.source}\n{result['error']}", pytrace=False)


def shell_commands(block: Block) -> tuple[list[str], list[str]]:
    """The block's ``fdbqueue`` command lines to run, and notes on the lines not run."""
    commands, notes = [], []
    for line in block.source.replace("\\\n", " ").splitlines():
        line = line.strip().removeprefix("$ ")
        if not line or line.startswith("#"):
            continue
        if not line.startswith("fdbqueue"):
            notes.append(f"not a fdbqueue command: {line}")
            continue
        reason = next(
            (why for pattern, why in UNRUNNABLE_COMMANDS if re.search(pattern, line)), None
        )
        if reason is not None:
            notes.append(f"{line}: {reason}")
            continue
        commands.append(line)
    return commands, notes


def invoke(arguments: list[str], database: Any) -> Any:
    """Run the command in a thread, so that one that hangs fails the test."""
    outcome: list[Any] = []
    thread = threading.Thread(
        target=lambda: outcome.append(
            CliRunner().invoke(cli, arguments, obj={"database": database})
        ),
        daemon=True,
    )
    thread.start()
    thread.join(COMMAND_TIMEOUT)
    if not outcome:
        pytest.fail(f"fdbqueue {shlex.join(arguments)} did not finish in {COMMAND_TIMEOUT} s")
    return outcome[0]


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=block_id)
def test_shell_block(block: Block) -> None:
    if block.not_run_reason is not None:
        pytest.skip(f"not run: {block.not_run_reason}")
    for key in (block.page, block.name):
        if key in SHELL_BLOCKS_NOT_RUN:
            pytest.skip(SHELL_BLOCKS_NOT_RUN[key])
    commands, notes = shell_commands(block)
    if not commands:
        pytest.skip("; ".join(notes) or "no fdbqueue command")
    run_commands(block, commands)


def run_commands(block: Block, commands: list[str]) -> list[str]:
    """Run ``commands`` in order on one fresh in-memory database; fail on the first that
    exits non-zero, with its output. Their outputs."""
    database = memory.open()
    outputs = []
    for command in commands:
        result = invoke(shlex.split(command, comments=True)[1:], database)
        if result.exit_code != 0:
            pytest.fail(
                f"{block.name}: `{command}` exited with {result.exit_code}:\n{result.output}"
                + (f"\n{result.exception!r}" if result.exception else ""),
                pytrace=False,
            )
        outputs.append(result.output)
    return outputs


def test_a_failing_command_fails() -> None:
    block = Block("page.md", 1, "shell", "fdbqueue --queue jobs pop --no-such-option\n")
    commands, notes = shell_commands(block)
    assert commands == ["fdbqueue --queue jobs pop --no-such-option"] and notes == []
    with pytest.raises(pytest.fail.Exception, match="no-such-option"):
        run_commands(block, commands)


def test_commands_share_the_block_database() -> None:
    block = Block("page.md", 1, "shell", "")
    commands = ["fdbqueue --queue jobs push resize", "fdbqueue --json --queue jobs pop"]
    assert json.loads(run_commands(block, commands)[1]) == ["resize"]


def compiles_as_python(source: str) -> bool:
    try:
        compile(source, "<literal block>", "exec")
    except SyntaxError:
        return False
    return True


@pytest.mark.parametrize("block", LITERAL_BLOCKS, ids=block_id)
def test_python_is_in_code_blocks(block: Block) -> None:
    """A literal (``::``) block is not run, so Python there must be a code-block instead."""
    assert not compiles_as_python(block.source), (
        f"{block.name} is Python in a literal block (::), which the collector does not run: "
        "write it as `.. code-block:: python`"
    )


def test_collector_finds_the_blocks() -> None:
    """The collector finds blocks on every page that has some (a regression guard)."""
    pages = {block.page for block in PYTHON_BLOCKS}
    assert {"README.md", "docs/getting-started.rst", "docs/asyncio.rst"} <= pages
    assert any(block.page == "README.md" for block in SHELL_BLOCKS)


def test_a_failing_block_fails() -> None:
    """A block that raises fails; the blocks after it do not run; names carry over."""
    results = run_blocks(
        [
            Block("page.md", 1, "python", "x = 1\n"),
            Block("page.md", 5, "python", "assert x == 2, 'x is 1'\n"),
            Block("page.md", 9, "python", "y = 3\n"),
        ]
    )
    assert [results[line]["status"] for line in sorted(results)] == ["passed", "failed"]
    assert "AssertionError: x is 1" in results[5]["error"]


def test_a_hanging_block_fails() -> None:
    """A block that hangs fails, with the stack of the wait."""
    results = run_blocks(
        [
            Block("page.md", 1, "python", "import threading\n"),
            Block("page.md", 5, "python", "threading.Event().wait()\n"),
        ],
        block_timeout=1,
    )
    assert results[5]["status"] == "failed"
    assert "did not finish" in results[5]["error"]
    assert "Timeout" in results[5]["error"]


def test_top_level_await_runs() -> None:
    """Top-level ``await`` runs in an event loop; its names stay for the next block."""
    results = run_blocks(
        [
            Block("page.md", 1, "python", "import asyncio\nawait asyncio.sleep(0)\nx = 1\n"),
            Block("page.md", 5, "python", "assert x == 1\n"),
        ]
    )
    assert [result["status"] for result in results.values()] == ["passed", "passed"]
