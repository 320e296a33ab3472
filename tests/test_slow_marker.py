"""The suite's own speed switches (tests/conftest.py): the ``slow`` marker, skipped unless
``--run-slow`` or ``FDBQUEUE_SLOW=1``, with its ``backend=`` and ``cluster=`` cells; the
``engine`` fixture; and ``-s``, which runs without xdist's workers so that output shows.

The conftest is checked in child pytest runs of a few tests written here
(``test_fixtures.run_child_pytest``: a copy of the conftest in a temporary directory).
"""

from __future__ import annotations

from pathlib import Path

import fdb_cluster
import pytest
from conftest import run_slow_from_env
from test_fixtures import run_child_pytest

CHILD_TESTS = """\
import pytest


@pytest.mark.slow("takes long")
def test_slow():
    pass


def test_quick():
    pass


@pytest.mark.slow("pages through the binding", backend="fdb")
def test_slow_on_fdb(db):
    pass


@pytest.mark.slow("waits in real time", cluster=True)
def test_slow_on_a_cluster(db, engine):
    assert engine is not None  # memory, or the binding over memory.install(): an engine
"""

PRINTING_TEST = """\
def test_prints():
    print("shown as it comes")
"""


@pytest.fixture
def no_installed_fdb() -> None:
    for name in ("fdbserver", "fdbcli"):
        if fdb_cluster.find_binary(name, which=lambda _: None):
            pytest.skip(f"{name} is installed; the child run would start it")


def test_slow_tests_and_cells_are_skipped_by_default_saying_how_to_run_them(
    tmp_path: Path, no_installed_fdb: None
) -> None:
    done = run_child_pytest(tmp_path, {"FDBQUEUE_SLOW": ""}, "-vv", tests=CHILD_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed, 2 skipped" in done.stdout, done.stdout
    assert "test_slow_on_fdb[memory] PASSED" in done.stdout
    assert "test_slow_on_fdb[fdb] SKIPPED" in done.stdout
    assert "slow (takes long): --run-slow or FDBQUEUE_SLOW=1 runs it" in done.stdout
    assert "fdbqueue slow tests: skipped (--run-slow or FDBQUEUE_SLOW=1)" in done.stdout


@pytest.mark.slow("a child pytest run")
def test_run_slow_runs_every_test(tmp_path: Path, no_installed_fdb: None) -> None:
    done = run_child_pytest(tmp_path, {"FDBQUEUE_SLOW": ""}, "--run-slow", tests=CHILD_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed" in done.stdout and "skipped" not in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("value", "runs"),
    [("1", True), ("yes", True), ("TRUE", True), (" on ", True), ("", False), ("0", False)],
)
def test_fdbqueue_slow_turns_on_the_slow_tests(value: str, runs: bool) -> None:
    assert run_slow_from_env({"FDBQUEUE_SLOW": value}) is runs
    assert run_slow_from_env({}) is False


def test_dash_s_runs_without_workers_so_that_output_shows(tmp_path: Path) -> None:
    done = run_child_pytest(
        tmp_path, {}, "-n", "auto", "-s", "--backend=memory", tests=PRINTING_TEST
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "shown as it comes" in done.stdout, done.stdout
    assert "workers" not in done.stdout and "bringing up nodes" not in done.stdout
