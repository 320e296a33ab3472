"""The code blocks of ``README.md`` and ``docs/*.rst``, and how ``tests/test_docs.py`` runs them.

What is collected:

- ``README.md``: fenced blocks. ```` ```python ```` is Python; ```` ```sh ````, ``shell``,
  ``console`` and ``bash`` are shell. Other fences (output, plain text) are not code.
- ``docs/*.rst``: ``.. code-block:: python`` is Python; ``.. code-block:: sh`` (``shell``,
  ``console``, ``bash``) is shell. Literal blocks introduced by ``::`` are text (commands to
  type that cannot run here, program output, messages) and are not run; Python in the docs
  is written with ``.. code-block:: python``, which ``test_docs.py`` enforces by failing on
  a literal block that compiles as Python.

A block preceded by a comment ``<!-- not run: <reason> -->`` (Markdown) or ``.. not run:
<reason>`` (reStructuredText), on the line just before its fence or directive (blank lines
between are allowed), is not run; the test is skipped with the reason. The marker is a
comment, so neither GitHub nor Sphinx renders it. Keep such blocks few: a block that needs
context should be rewritten to create it. (A ``# not run:`` first line inside the block, the
old form, would be rendered with the code: ``test_docs.py`` refuses it.)

Python blocks: one page's blocks run in order, in one namespace (a later block uses the names
an earlier one defined), in a fresh Python process per page (``python tests/doc_blocks.py``
reads the page's blocks as JSON on stdin), so each page starts with nothing: no database, no
``fdb.api_version()`` selected, no ``memory.install()``. A block that uses ``await`` at top
level (the asyncio snippets) is compiled with ``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT`` and run with
``asyncio.run(eval(code, namespace))``. Each block runs under
``faulthandler.dump_traceback_later(BLOCK_TIMEOUT, exit=True)``: a block that hangs dumps
every thread's stack and ends the process, and its test fails with the dump.
"""

from __future__ import annotations

import ast
import asyncio
import faulthandler
import inspect
import json
import re
import sys
import textwrap
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.rst"))]
PYTHON_LANGUAGES = {"python", "py", "python3"}
SHELL_LANGUAGES = {"sh", "shell", "console", "bash"}
NOT_RUN_INSIDE = re.compile(r"#\s*not run:\s*(?P<reason>.+)")  # the old, rendered form
NOT_RUN_MARKDOWN = re.compile(r"<!--\s*not run:\s*(?P<reason>.+?)\s*-->")
NOT_RUN_RST = re.compile(r"\.\.\s+not run:\s*(?P<reason>.+)")
BLOCK_TIMEOUT = 30.0  # seconds; a block that takes longer hangs

# Python blocks' results, one JSON line per block on the runner's stdout.
RESULT_PREFIX = "doc-block-result: "


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository: README.md, docs/memory.rst
    line: int  # the line of the block's first line of code, counted from 1
    language: str  # "python", "shell" or "literal" (an rst ``::`` block)
    source: str  # the code, dedented, ending with a newline
    not_run: str | None = None  # the reason of a "not run" comment before the block

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def not_run_reason(self) -> str | None:
        return self.not_run

    @property
    def marked_inside(self) -> bool:
        """True when the block's first line is the old ``# not run:`` marker (rendered)."""
        first = self.source.lstrip().split("\n", 1)[0]
        return NOT_RUN_INSIDE.fullmatch(first.strip()) is not None


def marker_before(lines: list[str], index: int, pattern: re.Pattern[str]) -> str | None:
    """The reason of a "not run" comment on the last non-blank line before ``lines[index]``."""
    before = index - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    match = pattern.fullmatch(lines[before].strip()) if before >= 0 else None
    return match["reason"] if match else None


def kind_of(language: str) -> str | None:
    language = language.strip().lower()
    if language in PYTHON_LANGUAGES:
        return "python"
    if language in SHELL_LANGUAGES:
        return "shell"
    return None


def markdown_blocks(page: str, text: str) -> list[Block]:
    blocks = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        fence = re.fullmatch(r"```(\w*)\s*", lines[index])
        if fence is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        kind = kind_of(fence[1])
        if kind is not None:
            source = "\n".join(lines[index + 1 : end]) + "\n"
            reason = marker_before(lines, index, NOT_RUN_MARKDOWN)
            blocks.append(Block(page, index + 2, kind, textwrap.dedent(source), reason))
        index = end + 1
    return blocks


def indented_body(lines: list[str], start: int) -> tuple[int, int]:
    """The lines ``[begin, end)`` of the indented body after line ``start - 1`` (blank lines
    and directive options skipped)."""
    begin = start
    while begin < len(lines) and (
        not lines[begin].strip() or re.match(r"\s+:[\w-]+:", lines[begin])
    ):
        begin += 1
    end = begin
    while end < len(lines) and (not lines[end].strip() or lines[end][:1].isspace()):
        end += 1
    while end > begin and not lines[end - 1].strip():
        end -= 1
    return begin, end


def rst_blocks(page: str, text: str) -> list[Block]:
    blocks = []
    lines = text.split("\n")
    for index, line in enumerate(lines):
        directive = re.fullmatch(r"\.\. code-block::\s*(\S*)\s*", line)
        literal = not line.lstrip().startswith("..") and re.search(r"::\s*$", line)
        if directive is None and not literal:
            continue
        begin, end = indented_body(lines, index + 1)
        if begin == end or not lines[begin][:1].isspace():
            continue
        source = textwrap.dedent("\n".join(lines[begin:end]) + "\n")
        if directive is not None:
            kind = kind_of(directive[1])
            if kind is not None:
                reason = marker_before(lines, index, NOT_RUN_RST)
                blocks.append(Block(page, begin + 1, kind, source, reason))
        else:
            blocks.append(Block(page, begin + 1, "literal", source))
    return blocks


def page_blocks(page: str) -> list[Block]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return markdown_blocks(page, text) if page.endswith(".md") else rst_blocks(page, text)


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in page_blocks(page)]


def run_python_blocks(blocks: list[Block], timeout: float = BLOCK_TIMEOUT) -> None:
    """Run ``blocks`` in order in one namespace, printing a result line per block; stop at
    the first that raises. Run in a fresh process per page (see the module docstring)."""
    namespace: dict[str, object] = {"__name__": "__doc_block__"}
    for block in blocks:
        print(RESULT_PREFIX + json.dumps({"line": block.line, "status": "started"}), flush=True)
        faulthandler.dump_traceback_later(timeout, exit=True)
        try:
            code = compile(block.source, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            if code.co_flags & inspect.CO_COROUTINE:
                asyncio.run(eval(code, namespace))  # top-level await: run it as a coroutine
            else:
                exec(code, namespace)
        except BaseException:
            faulthandler.cancel_dump_traceback_later()
            failure = {"line": block.line, "status": "failed", "error": traceback.format_exc()}
            print(RESULT_PREFIX + json.dumps(failure), flush=True)
            return
        faulthandler.cancel_dump_traceback_later()
        print(RESULT_PREFIX + json.dumps({"line": block.line, "status": "passed"}), flush=True)


def blocks_as_json(blocks: list[Block]) -> str:
    return json.dumps([asdict(block) for block in blocks])


if __name__ == "__main__":  # python tests/doc_blocks.py [TIMEOUT] < blocks.json
    block_timeout = float(sys.argv[1]) if len(sys.argv) > 1 else BLOCK_TIMEOUT
    run_python_blocks([Block(**fields) for fields in json.load(sys.stdin)], block_timeout)
