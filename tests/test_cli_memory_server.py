"""``fdbqueue memory serve`` and ``--memory=ADDRESS``: commands of separate processes share one
in-memory database through a server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from fdbqueue import memory
from fdbqueue.cli import cli
from fdbqueue.cli._arguments import memory_addresses

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def server() -> Iterator[memory.MemoryServer]:
    with memory.serve(port=0) as running:
        yield running.start()


def invoke(*args: str, env: dict[str, str] | None = None) -> object:
    return CliRunner().invoke(cli, list(args), obj={}, env=env)


def test_commands_share_the_server_s_database(server: memory.MemoryServer) -> None:
    pushed = invoke(f"--memory={server.address}", "--queue", "app,jobs", "push", "hello")
    assert pushed.exit_code == 0, pushed.output  # type: ignore[attr-defined]
    popped = invoke("pop", "--queue", "app,jobs", env={"FDBQUEUE_MEMORY": server.address})
    assert popped.exit_code == 0, popped.output  # type: ignore[attr-defined]
    assert popped.output.strip() == "'hello'"  # type: ignore[attr-defined]


def test_a_bare_memory_flag_keeps_a_private_database(server: memory.MemoryServer) -> None:
    db = memory.connect(server.address)
    invoke(f"--memory={server.address}", "--queue", "app", "push", "x")
    private = invoke("--memory", "--queue", "app", "info", env={"FDBQUEUE_MEMORY": server.address})
    assert private.exit_code == 1 and "does not exist" in private.output  # type: ignore[attr-defined]
    assert db.get_range(b"", b"\xff") != []


def test_a_bad_or_unreachable_address_is_one_line() -> None:
    bad = invoke("--memory=localhost:4690", "--queue", "app", "info")
    assert bad.exit_code == 2  # type: ignore[attr-defined]
    assert "memory://HOST:PORT" in bad.output  # type: ignore[attr-defined]
    gone = invoke("--memory=memory://127.0.0.1:1", "--queue", "app", "info")
    assert gone.exit_code == 1  # type: ignore[attr-defined]
    assert "cannot reach the fdbqueue.memory server at memory://127.0.0.1:1" in gone.output  # type: ignore[attr-defined]


def test_memory_equals_is_read_before_a_double_dash() -> None:
    assert memory_addresses(["--memory=memory://h:1", "push", "--", "--memory=x"]) == [
        "--memory-address",
        "memory://h:1",
        "push",
        "--",
        "--memory=x",
    ]
    assert memory_addresses(["--memory", "shell"]) == ["--memory", "shell"]


def test_serve_refuses_an_open_host_without_a_token() -> None:
    result = invoke("memory", "serve", "--host", "0.0.0.0", "--port", "0")
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert "without a token" in result.output  # type: ignore[attr-defined]


@pytest.mark.slow("three interpreters start")
def test_serve_push_and_pop_in_separate_processes() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("FDBQUEUE_MEMORY", None)
    fdbqueue = [sys.executable, "-m", "fdbqueue"]
    serving = subprocess.Popen(
        [*fdbqueue, "memory", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert serving.stdout is not None
        address = serving.stdout.readline().strip()
        assert address.startswith("memory://127.0.0.1:")
        pushed = subprocess.run(
            [*fdbqueue, f"--memory={address}", "--queue", "app,jobs", "push", "hello"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert pushed.returncode == 0, pushed.stderr
        popped = subprocess.run(
            [*fdbqueue, "--queue", "app,jobs", "pop"],
            capture_output=True,
            text=True,
            env=dict(env, FDBQUEUE_MEMORY=address),
            timeout=60,
        )
        assert popped.returncode == 0, popped.stderr
        assert popped.stdout.strip() == "'hello'"
    finally:
        serving.send_signal(signal.SIGTERM)
        _out, err = serving.communicate(timeout=10)
    assert serving.returncode == 0, err
    assert "stopped" in err


def test_the_schedules_page_block_runs_as_written_against_a_server(
    server: memory.MemoryServer,
) -> None:
    """docs/schedules.rst's command block: each command a separate invocation (no shared
    database object), sharing the server's database through FDBQUEUE_MEMORY as the block
    exports it."""
    import shlex

    from doc_blocks import page_blocks

    blocks = [
        block
        for block in page_blocks("docs/schedules.rst")
        if block.language == "shell" and "memory serve" in block.source
    ]
    assert len(blocks) == 1
    lines = [line.strip() for line in blocks[0].source.splitlines() if line.strip()]
    assert lines[0].startswith("fdbqueue memory serve")
    assert lines[1] == "export FDBQUEUE_MEMORY=memory://127.0.0.1:4690"
    env = {"FDBQUEUE_MEMORY": server.address}  # the port this test's server got
    outputs = []
    for line in lines[2:]:
        result = invoke(*shlex.split(line)[1:], env=env)
        assert result.exit_code == 0, (line, result.output)  # type: ignore[attr-defined]
        outputs.append(result.output)  # type: ignore[attr-defined]
    assert "nightly" in outputs[2] and "ping" in outputs[2]


def test_memory_set_changes_the_server_s_latency_and_faults_for_every_client(
    server: memory.MemoryServer,
) -> None:
    """``memory set`` changes only the settings given, for every client of the server, and
    prints those in effect; a bad value is one line and changes nothing."""
    client = memory.connect(server.address)
    address = f"--memory={server.address}"
    shown = invoke(address, "memory", "set")
    assert shown.exit_code == 0, shown.output  # type: ignore[attr-defined]
    assert "read 0s" in shown.output and "not committed 0" in shown.output  # type: ignore[attr-defined]
    changed = invoke(address, "memory", "set", "--read", "0.001", "--not-committed", "0.25")
    assert changed.exit_code == 0, changed.output  # type: ignore[attr-defined]
    client.get(b"any")  # a client learns the latency with its next read version
    assert client.latency == memory.Latency(read=0.001)
    assert client.faults == memory.Faults(not_committed=0.25)
    refused = invoke(address, "memory", "set", "--timed-out", "0.9")  # sums past 1
    assert refused.exit_code == 2 and "more than 1" in refused.output  # type: ignore[attr-defined]
    assert client.faults == memory.Faults(not_committed=0.25)
    again = invoke(address, "--json", "memory", "set", "--not-committed", "0")
    assert '"not_committed": 0.0' in again.output  # type: ignore[attr-defined]
    assert client.faults == memory.Faults()


def test_memory_pass_time_moves_every_client_s_clock(server: memory.MemoryServer) -> None:
    """``memory pass-time`` lets time pass on the server: a lease another process holds
    expires, with no sleep."""
    import fdbqueue

    client = memory.connect(server.address)
    queue = fdbqueue.Queue(fdbqueue.Subspace(("app", "jobs")))
    queue.enqueue(client, "job")
    assert queue.claim(client, 30) is not None
    assert queue.claim(client, 30) is None  # held for 30 seconds
    passed = invoke(f"--memory={server.address}", "memory", "pass-time", "31")
    assert passed.exit_code == 0, passed.output  # type: ignore[attr-defined]
    redelivered = queue.claim(client, 30)
    assert redelivered is not None and redelivered.deliveries == 2


def test_memory_set_and_pass_time_need_a_server_address() -> None:
    for command in (["memory", "set"], ["memory", "pass-time", "1"]):
        private = invoke("--memory", *command)
        assert private.exit_code == 2, private.output  # type: ignore[attr-defined]
        assert "--memory=memory://HOST:PORT" in private.output  # type: ignore[attr-defined]


def test_memory_serve_refuses_bad_settings_before_it_listens() -> None:
    refused = invoke(
        "memory", "serve", "--port", "0", "--not-committed", "0.7", "--recovery", "0.7"
    )
    assert refused.exit_code == 2 and "more than 1" in refused.output  # type: ignore[attr-defined]
    assert "memory://" not in refused.output  # type: ignore[attr-defined]
