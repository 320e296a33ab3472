"""docs/architecture.rst draws the layers that pyproject.toml declares to import-linter: the
picture and the contract must say the same, layer for layer, in the same order."""

from __future__ import annotations

import pathlib
import re
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_toml(path: pathlib.Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        tomllib = pytest.importorskip("tomli")
    with path.open("rb") as file:
        data: dict[str, Any] = tomllib.load(file)
    return data


def declared_layers() -> list[str]:
    contracts = load_toml(ROOT / "pyproject.toml")["tool"]["importlinter"]["contracts"]
    (layers,) = [contract for contract in contracts if contract.get("containers") == ["fdbqueue"]]
    return [re.sub(r"\s*([|:])\s*", r" \1 ", layer.strip()) for layer in layers["layers"]]


def drawn_layers() -> list[str]:
    """The first column of the code block that follows the page's "layers" comment."""
    page = (ROOT / "docs" / "architecture.rst").read_text()
    block = page.split(".. code-block:: text", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("   "):
            break
        if line.strip() and not line.strip().startswith("imports run"):
            lines.append(re.split(r"\s{2,}", line.strip())[0])
    return lines


def test_the_page_draws_the_declared_layers_in_order() -> None:
    assert drawn_layers() == declared_layers()


def test_every_top_level_module_is_in_a_layer() -> None:
    """A module added at the top of the package must take a place in the layers."""
    package = ROOT / "src" / "fdbqueue"
    names = {
        path.stem if path.suffix == ".py" else path.name
        for path in package.iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").exists())
        and not path.name.startswith("__")
    }
    layered = {name.strip() for layer in declared_layers() for name in re.split(r"[|:]", layer)}
    assert names == layered


def named_in_the_walk() -> list[str]:
    """The dotted names in double backquotes on docs/architecture.rst that start with a
    module or package of fdbqueue (``queue.Queue.enqueue``, ``_queues.shard.Shard.write``)."""
    page = (ROOT / "docs" / "architecture.rst").read_text()
    tops = {
        path.stem if path.suffix == ".py" else path.name
        for path in (ROOT / "src" / "fdbqueue").iterdir()
        if not path.name.startswith("__")
    }
    names = re.findall(r"``([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)``", page)
    return sorted({name for name in names if name.split(".")[0] in tops})


def resolve(name: str) -> object:
    """The module, class or function ``fdbqueue.<name>`` names (the longest importable module
    prefix, then attributes)."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module("fdbqueue." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(name)


def test_every_module_and_function_the_walk_names_exists() -> None:
    """The page walks the path of a value function by function: a name that moved or went
    away fails here, so the page follows the code."""
    names = named_in_the_walk()
    assert len(names) > 30
    missing = []
    for name in names:
        if name.endswith(".py"):  # a file the page names in its folder list
            if not list((ROOT / "src" / "fdbqueue").rglob(name.split("/")[-1])):
                missing.append(name)
            continue
        try:
            resolve(name)
        except (ModuleNotFoundError, AttributeError):
            missing.append(name)
    assert missing == []


def test_every_file_the_folder_list_names_exists() -> None:
    page = (ROOT / "docs" / "architecture.rst").read_text()
    files = set(re.findall(r"``(_?\w+\.py)``", page))
    package = ROOT / "src" / "fdbqueue"
    assert files and {name for name in files if not list(package.rglob(name))} == set()
