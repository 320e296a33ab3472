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
    return [" | ".join(part.strip() for part in layer.split("|")) for layer in layers["layers"]]


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
    layered = {name.strip() for layer in declared_layers() for name in layer.split("|")}
    assert names == layered
