"""The example scripts refuse bad input in one line: counts below one, and a cluster file on
a machine without libfdb_c (the one-line ClientLibraryMissingError, not a traceback); and
``examples/jobs.py`` runs to its end (``.ci/run`` runs every example)."""

from __future__ import annotations

import ctypes.util
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("example", "option"),
    [
        ("work_queue.py", "--consumers"),
        ("work_queue.py", "--producers"),
        ("async_service.py", "--consumers"),
        ("async_service.py", "--producers"),
        ("lease_worker.py", "--workers"),
        ("worker.py", "--concurrency"),
        ("tenants.py", "--tenants"),
        ("jobs.py", "--runs"),
        ("tasks.py", "--processes"),
    ],
)
@pytest.mark.parametrize(
    "count", ["0", pytest.param("-2", marks=pytest.mark.slow("a process per example"))]
)
def test_a_count_below_one_is_a_usage_error(example, option, count):
    """New-user finding 9: ``--consumers 0`` / ``--workers 0`` were accepted, then hung."""
    result = run_example(example, option, count)
    assert result.returncode == 2
    assert f"argument {option}: must be at least 1, not {count}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(
    ctypes.util.find_library("fdb_c") is not None, reason="libfdb_c is installed here"
)
@pytest.mark.parametrize("example", ["quickstart.py", "work_queue.py", "async_service.py"])
def test_a_cluster_file_without_the_client_library_is_one_line(example, tmp_path):
    """New-user finding 5: a 53-line traceback, where ClientLibraryMissingError already has
    the one-line message."""
    result = run_example(example, "--cluster-file", str(tmp_path / "fdb.cluster"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "libfdb_c" in lines[0] and "Traceback" not in result.stderr


@pytest.mark.slow("a few seconds: waits for the runs of a schedule of every second")
def test_the_jobs_example_runs():
    """examples/jobs.py: a result, a JobFailedError with its error, a cancel, a periodic
    job's runs, and its summary."""
    result = run_example("jobs.py")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.endswith("(succeeded)") and "result 144" in line for line in lines)
    assert any(
        "JobFailedError, dead after 2 deliveries: ValueError: cannot handle 'unknown'" in line
        for line in lines
    )
    assert any(line.endswith("delayed -> cancel -> cancelled") for line in lines)
    assert any(line.startswith("schedule 'tick' every 1 s: ") for line in lines)
    assert (
        "jobs by state: {'cancelled': 1, 'dead': 1, 'succeeded': " in result.stdout
    )  # and the ticks
    assert lines[-1] == "OK"
    assert result.stderr == ""


@pytest.mark.slow("a few seconds: two child processes, and a task killed at its 1 s limit")
def test_the_tasks_example_runs():
    """examples/tasks.py: tasks by function and by name run in child processes; the endless
    one is killed at its own time limit."""
    result = run_example("tasks.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "word_count('the quick brown fox') -> 4" in result.stdout
    assert "spin: dead, TimeLimitExceeded: time limit exceeded" in result.stdout
    assert "jobs by state: {'succeeded': 4}" in result.stdout
    assert "report (after the counts): 'report after 4 counts'" in result.stdout
    assert result.stderr == ""
