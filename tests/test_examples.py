"""The example scripts refuse bad input in one line: counts below one, and a cluster file on
a machine without libfdb_c (the one-line ClientLibraryMissingError, not a traceback)."""

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
