"""The package's shape: a small public surface, every exception in fdbqueue.errors, one base
class under both queue types, state that each object keeps to itself, and a library import
path free of the command line and asyncio.

The layers themselves are import-linter's to check (``lint-imports``, run by ``.ci/run``);
docs/architecture.rst draws them.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pathlib
import pkgutil
import re
import subprocess
import sys

import pytest

import fdbqueue
import fdbqueue.errors

PACKAGE = pathlib.Path(fdbqueue.__file__).parent
DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"

#: The public modules and packages at the top of fdbqueue: everything else there is private.
PUBLIC = {
    "asyncio",
    "benchmark",
    "binding",
    "cli",
    "codecs",
    "dashboard",
    "errors",
    "memory",
    "metrics",
    "priority",
    "queue",
    "worker",
}


def top_level_names() -> set[str]:
    """Module and package names directly inside fdbqueue, dunder modules left out."""
    return {
        info.name
        for info in pkgutil.iter_modules([str(PACKAGE)])
        if not (info.name.startswith("__") and info.name.endswith("__"))
    }


def test_the_top_level_holds_at_most_fourteen_public_names() -> None:
    public = {name for name in top_level_names() if not name.startswith("_")}
    assert public == PUBLIC
    assert len(public) <= 14


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_module_is_in_the_api_reference(name: str) -> None:
    reference = (DOCS / "api.rst").read_text()
    assert re.search(rf"fdbqueue\.{name}\b", reference), f"fdbqueue.{name} is not in docs/api.rst"


def test_the_api_reference_documents_no_private_module() -> None:
    for page in DOCS.glob("*.rst"):
        directives = re.findall(r"^\.\. auto\w+:: (\S+)", page.read_text(), re.MULTILINE)
        private = [name for name in directives if "._" in name]
        assert private == [], f"{page.name} documents private names: {private}"


def test_the_in_memory_database_is_its_package_alone() -> None:
    """fdbqueue.memory's modules are private (``_database.py``, ...), as httpx's are: the
    package's ``__all__`` is the surface, and the rest of fdbqueue imports nothing from the
    modules behind it."""
    import fdbqueue.memory

    memory = PACKAGE / "memory"
    modules = [info.name for info in pkgutil.iter_modules([str(memory)])]
    assert modules and [name for name in modules if not name.startswith("_")] == []
    assert [name for name in fdbqueue.memory.__all__ if not hasattr(fdbqueue.memory, name)] == []
    reaching = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if memory in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "fdbqueue.memory":
                names = [f"fdbqueue.memory.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            reaching += [
                f"{path.relative_to(PACKAGE)}: {name}"
                for name in names
                if name.startswith("fdbqueue.memory._")
            ]
    assert reaching == []


#: Whether the dashboard extra is installed (``pip install -e '.[dashboard]'``): the README's
#: test command installs only ``[test]``.
DASHBOARD_EXTRA = all(
    importlib.util.find_spec(name) is not None for name in ("starlette", "jinja2", "uvicorn")
)


def all_modules() -> list[str]:
    names = ["fdbqueue"]
    for info in pkgutil.walk_packages([str(PACKAGE)], "fdbqueue."):
        if not info.name.endswith("__main__"):
            names.append(info.name)
    return names


def test_every_exception_of_fdbqueue_lives_in_fdbqueue_errors() -> None:
    found = {}
    for name in all_modules():
        if name.startswith("fdbqueue.memory"):  # FoundationDB's own errors, imitated there
            continue
        if name.startswith("fdbqueue.dashboard") and not DASHBOARD_EXTRA:
            continue  # needs the dashboard extra (its modules import Starlette and Jinja2)
        module = importlib.import_module(name)
        for _attribute, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("fdbqueue"):
                found[value.__name__] = value.__module__
    assert found and set(found.values()) == {"fdbqueue.errors"}
    assert set(found) == set(fdbqueue.errors.__all__)


def test_the_exceptions_fdbqueue_exported_are_still_there() -> None:
    for name in [
        "LeaseError",
        "LeaseExpiredError",
        "LeaseNotHeldError",
        "QueueTypeError",
        "UnknownResultError",
    ]:
        assert getattr(fdbqueue, name) is getattr(fdbqueue.errors, name)
        assert name in fdbqueue.__all__


def private_reads(*, commented: bool) -> list[str]:
    """Reads of another object's private attribute (``other._name``, not ``self._name``) in
    fdbqueue outside memory/ and benchmark/, each ``path:line expression``: those whose line
    carries a comment saying why (``commented``), or the others."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if {"memory", "benchmark"} & set(path.relative_to(PACKAGE).parts):
            continue
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__") or (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            ):
                continue
            if ("#" in lines[node.lineno - 1]) == commented:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_code_reads_no_other_objects_private_attributes() -> None:
    """A class's state is its own: another object asks through a public method or
    attribute. The few exceptions (at most 5) say why in a comment on their line."""
    assert private_reads(commented=False) == []
    assert len(private_reads(commented=True)) <= 5


def test_no_object_is_built_around_its_constructor() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        assert "object.__new__" not in path.read_text(), path


def test_the_queue_types_share_one_base_class() -> None:
    """Queue and PriorityQueue are facades over one base (no tower of mixins): their MRO
    holds two classes of fdbqueue each."""
    for queue_type in (fdbqueue.Queue, fdbqueue.PriorityQueue):
        ours = [cls for cls in queue_type.__mro__ if cls.__module__.startswith("fdbqueue")]
        assert len(ours) == 2, ours
    assert fdbqueue.Queue.__mro__[1] is fdbqueue.PriorityQueue.__mro__[1]


def test_import_fdbqueue_loads_neither_the_command_line_nor_the_benchmark_nor_asyncio() -> None:
    """asyncio patches the futures' block_until_ready when imported; the command line and
    the benchmark bring click and argparse machinery a library user does not need."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, fdbqueue; print(' '.join(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in [
        "fdbqueue.cli",
        "fdbqueue.benchmark",
        "fdbqueue.asyncio",
        "fdbqueue.dashboard",
        "click",
        "starlette",
    ]:
        assert name not in loaded
    assert "matplotlib" not in loaded


def test_every_logger_name_is_documented() -> None:
    """Logger names are public (applications configure them): each one fdbqueue logs to is
    listed in docs/observability.rst, whatever module logs to it."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        names |= set(re.findall(r'getLogger\("([\w.]+)"\)', path.read_text()))
    page = (DOCS / "observability.rst").read_text()
    assert names and {name for name in names if f"``{name}``" not in page} == set()
    assert not any(
        re.search(r"getLogger\(__name__\)", path.read_text())
        for path in PACKAGE.rglob("*.py")
        if "memory" not in path.parts
    )
