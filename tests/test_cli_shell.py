"""``fdbqueue shell``: the command line's commands at a prompt or from standard input, on one
database for the session (fdbqueue.cli._shell)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prompt_toolkit import PromptSession
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from fdbqueue import PriorityQueue, Queue, Subspace, memory
from fdbqueue.cli import Context, cli
from fdbqueue.cli._shell import CommandCompleter, Shell

PIPED = "push a --queue demo\npush b --queue demo\npop --queue demo\n"

SHAPES = [
    pytest.param(priority, shards, id=f"{'PriorityQueue' if priority else 'Queue'}-{shards}shard")
    for priority in (False, True)
    for shards in (1, 4)
]


def shell(lines: str, *options: str, obj: dict[str, Any] | None = None) -> Any:
    """Run ``fdbqueue [options] shell`` with ``lines`` on standard input (not a terminal)."""
    return CliRunner().invoke(cli, [*options, "shell"], input=lines, obj={} if obj is None else obj)


def test_the_readme_example_prints_a_through_a_pipe():
    """New users tried --memory command by command and found every queue missing: the
    shell keeps one in-memory database for the session."""
    completed = subprocess.run(
        [sys.executable, "-m", "fdbqueue", "--memory", "shell"],
        input=PIPED,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["pushed 'a'", "pushed 'b'", "'a'"]
    assert completed.stderr == ""


@pytest.mark.parametrize(("priority", "shards"), SHAPES)
def test_one_in_memory_database_serves_every_command_of_the_session(priority, shards):
    kind = ["--priority-queue"] if priority else []
    priority_of = " --priority 1" if priority else ""
    lines = f"""
        # the shell's options are every line's defaults
        push a{priority_of} --shards {shards}
        push b{priority_of}
        info --json
        peek
        pop
        leases
        dead-letters
        tail --idle-timeout 0.1
        info
    """
    result = shell(textwrap.dedent(lines), "--memory", "--queue", "demo", *kind)
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert out[:2] == ["pushed 'a'", "pushed 'b'"]
    facts = json.loads(out[2])
    assert facts["size"] == 2 and facts["oldest_age"] is not None
    assert len(facts.get("shards", ())) == (shards if shards > 1 else 0)
    assert sorted(out[3:5]) == ["'a'", "'b'"]
    assert out[5] in ("'a'", "'b'")  # pop
    assert out[6:8] == ["(no leases)", "(no dead letters)"]
    assert out[8] in ("'a'", "'b'") and out[8] != out[5]  # tail took the other one
    assert "size              0" in result.output


def test_an_error_is_one_line_and_the_shell_goes_on():
    lines = "pop --queue nope\nbogus\npush 'open\npush x --queue q --priority 3\npush y --queue q\n"
    runner = CliRunner(mix_stderr=False) if _mixes() else CliRunner()  # type: ignore[call-arg]
    result = runner.invoke(cli, ["--memory", "shell"], input=lines, obj={})
    assert result.exit_code == 1  # a command failed: the script's status says so
    errors = result.stderr.splitlines()
    assert len(errors) == 4 and all(line.startswith("fdbqueue: error: ") for line in errors)
    assert "queue ('nope',) does not exist (nothing stored under its prefix)" in errors[0]
    assert "--memory shell" not in errors[0]  # inside the shell the database lives on
    assert "bogus" in errors[1] and "quotation" in errors[2] and "--priority" in errors[3]
    assert result.stdout.splitlines() == ["pushed 'y'"]


def _mixes() -> bool:
    """Whether this click's CliRunner takes ``mix_stderr`` (click < 8.2)."""
    import inspect

    return "mix_stderr" in inspect.signature(CliRunner.__init__).parameters


def test_memory_help_and_the_missing_queue_error_point_to_the_shell():
    help_text = " ".join(CliRunner().invoke(cli, ["--help"], obj={}).output.split())
    assert "fdbqueue --memory shell" in help_text
    result = CliRunner().invoke(cli, ["--memory", "--queue", "jobs", "pop"], obj={})
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert "does not exist" in line and "`fdbqueue --memory shell`" in line


def test_lines_may_start_with_fdbqueue_and_exit_ends_the_session():
    result = shell("fdbqueue push a --queue q\nexit\npush never --queue q\n", "--memory")
    assert result.exit_code == 0
    assert result.output.splitlines() == ["pushed 'a'"]


def test_a_session_uses_the_database_given_and_keeps_it(db):
    Queue(Subspace(("shell-db",))).enqueue(db, "there")
    result = shell("pop --queue shell-db\npop --queue shell-db\n", obj={"database": db})
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["'there'", "(empty)"]


@pytest.mark.parametrize(("priority", "shards"), SHAPES)
def test_work_runs_in_the_background_until_stopped(tmp_path, monkeypatch, priority, shards):
    module = f"shell_jobs_{'priority' if priority else 'queue'}_{shards}"
    (tmp_path / f"{module}.py").write_text(
        "DONE = []\ndef handle(value):\n    DONE.append(value)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    db = memory.open()
    space = Subspace(("background",))
    queue: Any = PriorityQueue(space, shards=shards) if priority else Queue(space, shards=shards)
    for value in ("a", "b", "c"):
        queue.push(db, value, 1) if priority else queue.enqueue(db, value)
    context = Context({"queue": "background", "priority_queue": priority, "as_json": False}, db)
    session = Shell(context)
    lines = iter([f"work {module}:handle --lease 5 --log-level WARNING", "background"])
    runner = CliRunner()
    with runner.isolation() as (out, _err, *_rest):
        for line in lines:
            assert session.run_line(line)
        deadline = time.monotonic() + 20
        while queue.size(db) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert queue.size(db) == 0  # the worker took them while the prompt was free
        assert session.run_line("stop 1")
        assert session.run_line("background")
        printed = out.getvalue().decode()
    assert sorted(sys.modules[module].DONE) == ["a", "b", "c"]  # as the worker imported it
    assert f"worker 1 started: work {module}:handle" in printed
    assert f"1  work {module}:handle" in printed
    assert "succeeded 3" in printed and "worker 1 stopped" in printed
    assert printed.rstrip().endswith("(none)")
    assert not session.failed


def test_work_until_empty_finishes_before_the_piped_session_ends(tmp_path, monkeypatch):
    (tmp_path / "shell_until.py").write_text("def handle(value):\n    print('done', value)\n")
    monkeypatch.chdir(tmp_path)
    result = shell(
        "push a\npush b\nwork shell_until:handle --lease 5 --until-empty --log-level ERROR\n",
        "--memory",
        "--queue",
        "q",
    )
    assert result.exit_code == 0, result.output
    assert "succeeded 2" in result.output
    assert result.output.count("done ") == 2


def test_stop_and_background_explain_themselves():
    result = shell("background\nstop 4\nstop x y\nstop\nhelp\n", "--memory")
    lines = result.output.splitlines()
    assert lines[0] == "(none)"
    assert any("no worker or dashboard 4 is running" in line for line in lines)
    assert any("stop takes one worker number" in line for line in lines)
    assert any(line.split()[:1] == ["background"] for line in lines)  # help lists the shell's own
    assert any(line.split()[:1] == ["push"] for line in lines)  # and every command
    assert result.exit_code == 1


def test_completion_of_commands_options_and_choices():
    completer = CommandCompleter(cli)

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), None)]  # type: ignore[arg-type]

    assert complete("pu") == ["push"]
    commands = {"dead-letters", "info", "work", "stop", "background", "workers", "exit"}
    assert commands <= set(complete(""))
    assert "shell" not in complete("")
    assert complete("push x --pri") == ["--priority", "--priority-queue"]
    assert complete("fdbqueue peek --a") == ["--all", "--api-version"]
    assert complete("info --codec ") == ["tuple", "raw", "json"]
    assert complete("info --codec j") == ["json"]


def test_at_a_terminal_it_prompts_with_history(tmp_path, monkeypatch):
    history = tmp_path / "history"
    monkeypatch.setenv("FDBQUEUE_HISTORY", str(history))
    from fdbqueue.cli import _shell

    db = memory.open()
    session = Shell(Context({"queue": "t", "as_json": False}, db))
    with create_pipe_input() as pipe:
        pipe.send_text("push hello\rpop\rbogus\rpeek\r")
        pipe.close()  # then end of input: Ctrl-D
        prompt: PromptSession[str] = PromptSession(
            input=pipe, output=DummyOutput(), history=_shell.history()
        )
        assert session.run_prompt(prompt) == 0  # errors do not end an interactive session
    assert Queue(Subspace(("t",))).size(db) == 0
    recorded = Path(history).read_text()
    assert "push hello" in recorded and "bogus" in recorded


# -- issue 36 item 6: a line's options, and nothing blocks a piped shell -------------------------


@pytest.mark.parametrize(
    ("words", "option"),
    [
        (["push", "x", "--cluster-file", "FILE"], "--cluster-file"),
        (["--cluster-file", "FILE", "push", "x"], "--cluster-file"),
        (["push", "x", "--api-version", "710"], "--api-version"),
        (["--memory", "push", "x"], "--memory"),
        (["push", "x", "--memory"], "--memory"),
        (["push", "x", "--timeout", "3"], "--timeout"),
        (["--timeout", "3", "info"], "--timeout"),
        (["bench", "--memory"], "--memory"),
    ],
)
def test_a_line_refuses_the_options_that_choose_the_database(tmp_path, words, option):
    """They named another database than the session's and were silently ignored."""
    cluster_file = tmp_path / "fdb.cluster"
    cluster_file.write_text("")
    line = " ".join(str(cluster_file) if word == "FILE" else word for word in words)
    db = memory.open()
    runner = CliRunner(mix_stderr=False) if _mixes() else CliRunner()  # type: ignore[call-arg]
    result = runner.invoke(
        cli, ["--queue", "q", "shell"], input=f"{line}\npush y\n", obj={"database": db}
    )
    assert result.exit_code == 1, result.output
    [error] = result.stderr.splitlines()
    assert error == (
        f"fdbqueue: error: {option} chooses the database, which the shell opened once for "
        f"the session: give it to `fdbqueue {option} ... shell` instead"
    )
    assert result.stdout.splitlines() == ["pushed 'y'"]  # the shell went on
    assert Queue(Subspace(("q",))).peek_many(db, 5) == ["y"]  # the refused line wrote nothing


def test_a_line_honours_the_queue_and_output_options():
    result = shell(
        "push a --queue other --json\n--queue other --json pop\npop\n", "--memory", "--queue", "q"
    )
    assert result.exit_code == 1  # the last pop: q itself was never created
    lines = result.output.splitlines()
    assert json.loads(lines[0])["pushed"] == "a" and json.loads(lines[1]) == ["a"]
    assert "queue ('q',) does not exist" in lines[2]


def test_dashboard_runs_in_the_background_so_a_piped_shell_never_blocks():
    """It served until Ctrl-C, so a piped shell blocked for good at a dashboard line."""
    pytest.importorskip("uvicorn")
    lines = (
        "push a\n"
        "dashboard --port 0\n"
        "background\n"
        "stop 1\n"
        "background\n"
        "dashboard --port 0 --read-only\n"  # left running: leaving the shell stops it
        "pop\n"
    )
    result = shell(lines, "--memory", "--queue", "q")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "dashboard 1 started: dashboard --port 0 (stop 1 stops it)" in out
    assert "1  dashboard --port 0" in out and "(none)" in out
    assert "dashboard 1 stopped" in out and "dashboard 2 stopped" in out
    assert "fdbqueue dashboard: 1 queue(s) at http://localhost:0/\n" in out  # no Ctrl-C
    assert "'a'" in out.splitlines()
