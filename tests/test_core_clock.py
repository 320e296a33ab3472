"""The core's wall clock and the test double (issue 37 item 4): the core reads its clock from
``fdbqueue._clock`` and imports nothing of ``fdbqueue.memory``, not even lazily;
``memory.Database.pass_time`` moves the core's clock through ``memory.time_passed``, which the
package ``fdbqueue`` registers with the clock (as it registers memory's FDBError and Future
with the retry loop and the asyncio bridge).

``fdbqueue.memory`` imports nothing of fdbqueue outside it (import-linter's contract in
``pyproject.toml``); the other way, here.
"""

from __future__ import annotations

import ast
import pathlib
import time

import pytest

import fdbqueue
from fdbqueue import memory

PACKAGE = pathlib.Path(fdbqueue.__file__).parent

#: What is not the core: the in-memory database itself, the package's ``__init__`` (which
#: joins the two), and the tools on top of the queues, which may use the in-memory database.
NOT_THE_CORE = {"memory", "cli", "benchmark", "asyncio", "dashboard", "__init__.py", "__main__.py"}


def core_modules() -> list[pathlib.Path]:
    """Every module of the core: queue.py, priority.py, worker.py, the private packages
    (``_queues``, ``_consuming``, ``_delivery``, ``_storage``, ``_transactions``) and the
    layer below them (``_clock``, ``_checks``, ``_keys``, ``_wording``, metrics, codecs,
    binding, errors)."""
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in NOT_THE_CORE
    ]


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_memory(name: str) -> bool:
    return name == "fdbqueue.memory" or name.startswith("fdbqueue.memory.")


def memory_imports(source: str, module: str = "fdbqueue.core") -> list[str]:
    """Where ``source`` (the code of ``module``) reaches ``fdbqueue.memory``: an import of it
    or of a module inside it, anywhere (inside a function too), absolute or relative, and
    its name in a string (``sys.modules.get(...)``, ``importlib.import_module(...)``) but in
    prose (a docstring naming it among other words)."""
    found = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        found += [f"line {node.lineno}: {name}" for name in names if _is_memory(name)]
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from fdbqueue import memory",
        "import fdbqueue.memory",
        "from fdbqueue.memory import FDBError",
        "from fdbqueue.memory._wall_clock import wall_clock",
        "def lazily():\n    from fdbqueue import memory as m\n    return m",
        "from .. import memory",
        "import sys\nsys.modules.get('fdbqueue.memory')",
        "import importlib\nimportlib.import_module('fdbqueue.memory')",
    ],
)
def test_the_check_finds_every_way_to_reach_the_in_memory_database(source: str) -> None:
    assert memory_imports(source, "fdbqueue._storage.ages") != []


def test_the_check_leaves_prose_and_other_modules_alone() -> None:
    source = '"""Runs on fdbqueue.memory too."""\nfrom fdbqueue import metrics\nfrom . import x\n'
    assert memory_imports(source, "fdbqueue._storage.ages") == []


def test_no_core_module_imports_the_in_memory_database() -> None:
    """Before: _storage/ages.py read its clock from fdbqueue.memory, transactional.py and
    suspension.py imported memory's FDBError and Future inside functions."""
    modules = core_modules()
    assert {path.name for path in modules} >= {"queue.py", "priority.py", "ages.py", "shard.py"}
    reaching = [
        f"{path.relative_to(PACKAGE)} {where}"
        for path in modules
        for where in memory_imports(path.read_text(), _module_name(path))
    ]
    assert reaching == []


def test_pass_time_moves_the_core_clock() -> None:
    """The core's clock is ``time.time()`` plus what ``pass_time`` let pass: the wall clock
    ``fdbqueue.memory.wall_clock`` shows, read by the core without importing memory."""
    from fdbqueue import _clock

    db = memory.open()
    start, before_passed, before = time.time(), memory.time_passed(), _clock.now()
    db.pass_time(30)
    after, end = _clock.now(), time.time()
    assert memory.time_passed() == before_passed + 30
    assert 30 <= after - before <= 30 + (end - start) + 1e-3
    db.advance_time(100)  # versions alone, as a recovery: not the wall clock
    assert memory.time_passed() == before_passed + 30
    start = time.time()
    core, wall = _clock.now(), memory.wall_clock()
    end = time.time()
    assert abs(core - wall) <= (end - start) + 1e-3


def test_registering_the_offset_again_counts_it_once() -> None:
    from fdbqueue import _clock

    _clock.follow(memory.time_passed)  # as fdbqueue/__init__.py did already
    memory.open().pass_time(10)
    start = time.time()
    core, wall = _clock.now(), memory.wall_clock()
    end = time.time()
    assert abs(core - wall) <= (end - start) + 1e-3


def test_the_core_recognises_the_in_memory_errors_and_futures_it_does_not_import() -> None:
    from fdbqueue._transactions import suspension
    from fdbqueue._transactions.transactional import is_fdb_error

    assert is_fdb_error(memory.FDBError(1020))
    assert not is_fdb_error(ValueError("not a database error"))
    suspension.install()
    assert hasattr(memory.Future.block_until_ready, "fdbqueue_original")
