"""The types a user of ``mypy --strict`` relies on: a typed user script passes, and one with
mistakes fails on each of them (so the annotations are not ``Any`` where it matters)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")
pytestmark = pytest.mark.slow("runs mypy --strict")

TESTS = Path(__file__).parent
ROOT = TESTS.parent


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mypy cache shared by this module's runs (the second run reuses fdbqueue's types)."""
    return tmp_path_factory.mktemp("mypy_cache")


def run_mypy(cache: Path, *paths: Path) -> tuple[str, int]:
    """Run ``mypy --strict`` with the project's configuration; return its report and status."""
    report, errors, status = api.run(
        [
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(cache),
            *map(str, paths),
        ]
    )
    return report + errors, status


def test_typed_user_script_passes(cache: Path) -> None:
    report, status = run_mypy(cache, TESTS / "typed_user_script.py")
    assert status == 0, report


def test_mistakes_are_reported(cache: Path) -> None:
    script = TESTS / "typed_user_mistakes.py"
    expected = {
        number: match.group(1)
        for number, line in enumerate(script.read_text().splitlines(), start=1)
        if (match := re.search(r"# error: ([a-z-]+)$", line))
    }
    assert len(expected) >= 6
    report, status = run_mypy(cache, script)
    assert status == 1, report
    found = {
        int(match.group(1)): match.group(2)
        for match in re.finditer(
            r"typed_user_mistakes\.py:(\d+): error: .*\[([a-z-]+)\]$", report, re.MULTILINE
        )
    }
    assert found == expected, report
