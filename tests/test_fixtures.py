"""The test infrastructure itself: cluster files, commands, the off/external/local/install/error
decision, loading the binding, the local-cluster life cycle (against fake fdbserver/fdbcli
scripts) and the conftest wiring.

None of this needs FoundationDB installed.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import fdb_cluster
import pytest
from fdb_cluster import Plan, decide

TESTS_DIR = Path(__file__).resolve().parent
SRC_DIR = TESTS_DIR.parent / "src"


# -- cluster file ----------------------------------------------------------------------------


def test_cluster_file_content_is_description_id_at_address():
    assert fdb_cluster.cluster_file_content(4500) == "fdbqueue:test@127.0.0.1:4500\n"
    content = fdb_cluster.cluster_file_content(
        12345, host="127.0.0.2", description="my_db", cluster_id="Ab3"
    )
    assert content == "my_db:Ab3@127.0.0.2:12345\n"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"description": "fdb-queue"},
        {"description": ""},
        {"cluster_id": "te_st"},
        {"cluster_id": "tést"},
        {"port": 0},
        {"port": 65536},
    ],
)
def test_cluster_file_content_rejects_what_the_format_forbids(kwargs):
    port = kwargs.pop("port", 4500)
    with pytest.raises(ValueError):
        fdb_cluster.cluster_file_content(port, **kwargs)


def test_write_cluster_file(tmp_path):
    path = fdb_cluster.write_cluster_file(tmp_path / "fdb.cluster", 4567, cluster_id="xyz1")
    assert path.read_text() == "fdbqueue:xyz1@127.0.0.1:4567\n"


def test_random_cluster_ids_are_eight_letters_or_digits_and_differ():
    ids = {fdb_cluster.random_cluster_id() for _ in range(20)}
    assert len(ids) == 20
    assert all(re.fullmatch(r"[A-Za-z0-9]{8}", i) for i in ids)


def test_free_port_can_be_bound_on_localhost():
    port = fdb_cluster.free_port()
    assert 0 < port < 65536
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


# -- commands and output parsing -------------------------------------------------------------


def test_server_command_uses_only_options_every_release_accepts():
    command = fdb_cluster.server_command("/opt/fdbserver", "/t/fdb.cluster", 4711, "/t/d", "/t/l")
    assert command == [
        "/opt/fdbserver",
        "-p",
        "127.0.0.1:4711",
        "-C",
        "/t/fdb.cluster",
        "-d",
        "/t/d",
        "-L",
        "/t/l",
        "--knob_disable_posix_kernel_aio",
        "1",
    ]
    # 6.3 and 7.0 know neither the dashed long options nor "--knob-..." (see server_command)
    assert not any(arg.startswith(("--public", "--cluster", "--data", "--log")) for arg in command)
    assert not any(arg.startswith("--knob-") or "=" in arg for arg in command)


def test_cli_command_bounds_every_call():
    assert fdb_cluster.cli_command("fdbcli", "/t/fdb.cluster", "status minimal", 7) == [
        "fdbcli",
        "-C",
        "/t/fdb.cluster",
        "--exec",
        "status minimal",
        "--timeout",
        "7",
    ]


@pytest.mark.parametrize(
    ("output", "done"),
    [
        ("Database created\n", True),
        ("ERROR: Database already exists! To change configuration, don't say `new'\n", True),
        ("ERROR: The database is unavailable\nType `configure FORCE <TOKEN...>' ...\n", False),
        ("", False),
    ],
)
def test_configure_done(output, done):
    assert fdb_cluster.configure_done(output) is done


@pytest.mark.parametrize(
    ("output", "available"),
    [
        ("The database is available.\n", True),
        ("Using cluster file `/tmp/x/fdb.cluster'.\n\nThe database is available.\n", True),
        ("The database is available, but has issues (type 'status' for more information).\n", True),
        ("The database is unavailable; type `status' for more information.\n", False),
        ("WARNING: Long delay (Ctrl-C to interrupt)\n", False),
        ("", False),
    ],
)
def test_database_available(output, available):
    assert fdb_cluster.database_available(output) is available


def test_log_tail_shows_console_and_newest_trace(tmp_path):
    (tmp_path / "trace.old.xml").write_text("old\n")
    newest = tmp_path / "trace.new.xml"
    newest.write_text("\n".join(f"line {i}" for i in range(100)))
    os.utime(tmp_path / "trace.old.xml", (1, 1))
    console = tmp_path / "console.log"
    console.write_text("bind failed\n")
    text = fdb_cluster.log_tail(tmp_path, console, lines=5)
    assert "bind failed" in text
    assert "line 99" in text and "line 95" in text and "line 94" not in text
    assert "old" not in text.split(str(newest))[-1]
    assert "no trace files" in fdb_cluster.log_tail(tmp_path / "empty", None)


# -- the decision: off, external, local, install or error ------------------------------------


def fake_which(available: dict[str, str]):
    return lambda name: available.get(name)


def run_decide(backend, env=None, on_path=None, files=(), executables=(), extra_dirs=()):
    return decide(
        backend,
        env or {},
        which=fake_which(on_path or {}),
        is_file=lambda p: p in files,
        is_executable=lambda p: p in executables,
        extra_dirs=extra_dirs,
    )


BOTH_ON_PATH = {"fdbserver": "/usr/bin/fdbserver", "fdbcli": "/usr/bin/fdbcli"}


@pytest.mark.parametrize("option", ["all", "fdb"])
def test_cluster_file_env_selects_that_cluster_and_starts_nothing(option):
    plan = run_decide(
        option, {"FDB_CLUSTER_FILE": "/etc/fdb.cluster"}, BOTH_ON_PATH, files={"/etc/fdb.cluster"}
    )
    assert plan == Plan("external", plan.reason, cluster_file="/etc/fdb.cluster")


@pytest.mark.parametrize("option", ["all", "fdb"])
def test_cluster_file_env_naming_no_file_is_an_error(option):
    plan = run_decide(option, {"FDB_CLUSTER_FILE": "/nope/fdb.cluster"}, BOTH_ON_PATH)
    assert plan.action == "error"
    assert "/nope/fdb.cluster" in plan.reason


@pytest.mark.parametrize("option", ["all", "fdb"])
def test_binaries_on_path_start_a_local_server(option):
    plan = run_decide(option, {}, BOTH_ON_PATH)
    assert plan.action == "local"
    assert (plan.fdbserver, plan.fdbcli) == ("/usr/bin/fdbserver", "/usr/bin/fdbcli")


def test_env_binaries_win_over_path():
    env = {"FDBSERVER": "/opt/fdb/fdbserver", "FDBCLI": "/opt/fdb/fdbcli"}
    plan = run_decide("all", env, BOTH_ON_PATH, executables=set(env.values()))
    assert (plan.action, plan.fdbserver, plan.fdbcli) == (
        "local",
        "/opt/fdb/fdbserver",
        "/opt/fdb/fdbcli",
    )


def test_server_package_directory_is_searched_when_not_on_path():
    plan = run_decide(
        "all",
        {},
        {"fdbcli": "/usr/bin/fdbcli"},
        executables={"/usr/sbin/fdbserver"},
        extra_dirs=("/usr/sbin",),
    )
    assert (plan.action, plan.fdbserver) == ("local", "/usr/sbin/fdbserver")


def test_env_binaries_may_name_commands_on_path():
    env = {"FDBSERVER": "fdbserver-7.3", "FDBCLI": "fdbcli-7.3"}
    on_path = {"fdbserver-7.3": "/opt/bin/fdbserver-7.3", "fdbcli-7.3": "/opt/bin/fdbcli-7.3"}
    plan = run_decide("all", env, on_path)
    assert (plan.action, plan.fdbserver, plan.fdbcli) == (
        "local",
        "/opt/bin/fdbserver-7.3",
        "/opt/bin/fdbcli-7.3",
    )


@pytest.mark.parametrize("variable", ["FDBSERVER", "FDBCLI"])
def test_env_binary_that_is_not_executable_is_an_error(variable):
    plan = run_decide("all", {variable: "/nope/bin"}, BOTH_ON_PATH)
    assert plan.action == "error"
    assert variable in plan.reason and "/nope/bin" in plan.reason


def test_cluster_file_env_wins_over_binaries():
    env = {"FDB_CLUSTER_FILE": "/c", "FDBSERVER": "/s", "FDBCLI": "/c2"}
    plan = run_decide("all", env, BOTH_ON_PATH, files={"/c"}, executables={"/s", "/c2"})
    assert plan.action == "external"


def test_empty_env_values_count_as_unset():
    env = {"FDB_CLUSTER_FILE": "", "FDBSERVER": " ", "FDBCLI": ""}
    assert run_decide("all", env, BOTH_ON_PATH).action == "local"


@pytest.mark.parametrize("option", ["all", "fdb"])
@pytest.mark.parametrize(
    ("on_path", "missing"),
    [({}, "fdbserver and fdbcli"), ({"fdbcli": "/usr/bin/fdbcli"}, "fdbserver is not")],
)
def test_nothing_available_installs_the_binding_over_memory(option, on_path, missing):
    plan = run_decide(option, {}, on_path)
    assert plan == Plan("install", plan.reason)
    assert plan.reason.startswith(
        "no FoundationDB cluster configured; the fdb backend runs the real fdb binding over "
        "fdbqueue.memory (memory.install())"
    )
    assert missing in plan.reason
    for hint in ("FDB_CLUSTER_FILE", "FDBSERVER", "FDBCLI", "foundationdb-server", "PATH"):
        assert hint in plan.reason, "how to use a real cluster instead"


@pytest.mark.parametrize("env", [{}, {"FDB_CLUSTER_FILE": "/etc/fdb.cluster"}])
def test_backend_memory_turns_fdb_off(env):
    plan = run_decide("memory", env, BOTH_ON_PATH, files={"/etc/fdb.cluster"})
    assert plan.action == "off"


def test_api_version_from_env():
    assert fdb_cluster.api_version_from_env({}) is None, "unset: chosen automatically"
    assert fdb_cluster.api_version_from_env({"FDB_API_VERSION": " "}) is None
    assert fdb_cluster.api_version_from_env({"FDB_API_VERSION": "630"}) == 630
    with pytest.raises(ValueError, match="FDB_API_VERSION"):
        fdb_cluster.api_version_from_env({"FDB_API_VERSION": "seven"})


# -- loading the binding ---------------------------------------------------------------------


@pytest.mark.skipif(
    ctypes.util.find_library("fdb_c") is not None, reason="libfdb_c is installed here"
)
def test_missing_libfdb_c_is_reported_as_binding_unavailable():
    import fdb

    if fdb.is_api_version_selected() or "fdb.impl" in sys.modules:
        pytest.skip("the binding already loaded a client library in this process")
    with pytest.raises(fdb_cluster.BindingUnavailable) as info:
        fdb_cluster.load_binding(None)
    message = str(info.value)
    assert "client library could not be loaded" in message
    assert "foundationdb-clients" in message and "libfdb_c" in message


class FakeCapi:
    """A stand-in for ``fdb.impl._capi``: libfdb_c's maximum API version and version."""

    def __init__(self, maximum: int, version: bytes = b"7.1.67,abc,fdb00b071010000") -> None:
        self.maximum = maximum
        self.fdb_get_client_version = lambda: version

    def fdb_get_max_api_version(self) -> int:
        return self.maximum


@pytest.fixture
def unselected_fdb(monkeypatch):
    """The real ``fdb`` module with no API version selected and a fake libfdb_c.

    Returns a list that records the versions passed to ``fdb.api_version``.
    """
    import fdb

    calls = []
    monkeypatch.setattr(fdb, "is_api_version_selected", lambda: False)
    monkeypatch.setattr(fdb, "api_version", lambda version: calls.append(version))
    monkeypatch.setattr(fdb, "LATEST_API_VERSION", 730, raising=False)
    impl = type(sys)("fdb.impl")
    impl._capi = FakeCapi(730)
    monkeypatch.setitem(sys.modules, "fdb.impl", impl)
    return impl, calls


def test_load_binding_chooses_the_newest_version_both_sides_support(unselected_fdb):
    _, calls = unselected_fdb
    fdb_cluster.load_binding(None)
    assert calls == [730]
    fdb_cluster.load_binding(630)
    assert calls == [730, 630], "FDB_API_VERSION wins"


def test_binding_newer_than_libfdb_c_is_binding_unavailable_with_the_pip_command(unselected_fdb):
    impl, calls = unselected_fdb
    impl._capi = FakeCapi(710)
    with pytest.raises(fdb_cluster.BindingUnavailable) as info:
        fdb_cluster.load_binding(None)
    message = str(info.value)
    assert "libfdb_c 7.1.67" in message and "730" in message and "710" in message
    assert 'pip install "fdbqueue[fdb71]"' in message
    assert calls == [], "fdb.api_version would fail with 2203: it is not called"


def test_binding_version_mismatch_carries_the_runtime_error_text(unselected_fdb, monkeypatch):
    import fdb

    def refuse(version):
        raise RuntimeError("API version 710 is not supported by the installed C library.")

    monkeypatch.setattr(fdb, "api_version", refuse)
    with pytest.raises(fdb_cluster.BindingUnavailable) as info:
        fdb_cluster.load_binding(710)
    message = str(info.value)
    assert "fdb.api_version(710)" in message
    assert "is not supported by the installed C library" in message
    assert "pip package, version " in message


def test_api_version_beyond_the_binding_is_a_value_error_naming_fdb_api_version(unselected_fdb):
    with pytest.raises(ValueError, match=r"FDB_API_VERSION=900: .*900.* up to 730"):
        fdb_cluster.load_binding(900)


def test_installed_binding_version_never_reads_fdb_version_directly(monkeypatch):
    import importlib.metadata

    import fdb

    monkeypatch.delattr(fdb, "__version__", raising=False)  # as in bindings before 7.4
    assert fdb_cluster.installed_binding_version() == importlib.metadata.version("foundationdb")

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert fdb_cluster.installed_binding_version() == "unknown"
    monkeypatch.setattr(fdb, "__version__", "7.4.8", raising=False)
    assert fdb_cluster.installed_binding_version() == "7.4.8"


# -- LocalCluster against fake binaries ------------------------------------------------------

FAKE_SERVER = """\
import json, os, signal, sys, time
state = os.environ["FAKE_FDB_STATE"]
args = sys.argv[1:]
with open(os.path.join(state, "server_args.json"), "w") as f:
    json.dump(args, f)
logdir = args[args.index("-L") + 1]
with open(os.path.join(logdir, "trace.fake.xml"), "w") as f:
    f.write("<Event Type='FakeTrace'/>\\n")
print("fake fdbserver starting", flush=True)
mode = open(os.path.join(state, "server_mode")).read().strip()
if mode == "exit":
    print("fake bind failure", flush=True)
    sys.exit(1)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(0.05)
"""

FAKE_CLI = """\
import json, os, sys
state = os.environ["FAKE_FDB_STATE"]
args = sys.argv[1:]
with open(os.path.join(state, "cli_calls.jsonl"), "a") as f:
    f.write(json.dumps(args) + "\\n")
command = args[args.index("--exec") + 1]
mode = open(os.path.join(state, "cli_mode")).read().strip()
if command.startswith("configure new"):
    if mode == "exists":
        sys.stderr.write("ERROR: Database already exists! To change configuration, ")
        sys.stderr.write("don't say `new'\\n")
        sys.exit(1)
    print("Database created")
elif command == "status minimal":
    counter = os.path.join(state, "status_calls")
    calls = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
    open(counter, "w").write(str(calls))
    if mode == "never" or calls < 3:
        print("The database is unavailable; type `status' for more information.")
    else:
        print("The database is available.")
"""


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    """Fake fdbserver/fdbcli executables whose behaviour is set through files in ``state``."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("FAKE_FDB_STATE", str(state))
    paths = {}
    for name, body in (("fdbserver", FAKE_SERVER), ("fdbcli", FAKE_CLI)):
        path = tmp_path / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        paths[name] = str(path)

    class Fakes:
        server = paths["fdbserver"]
        cli = paths["fdbcli"]

        @staticmethod
        def modes(server: str = "run", cli: str = "ok") -> None:
            (state / "server_mode").write_text(server)
            (state / "cli_mode").write_text(cli)

        @staticmethod
        def server_args() -> list[str]:
            return json.loads((state / "server_args.json").read_text())

        @staticmethod
        def cli_calls() -> list[list[str]]:
            lines = (state / "cli_calls.jsonl").read_text().splitlines()
            return [json.loads(line) for line in lines]

    Fakes.modes()
    return Fakes


def make_cluster(fakes, **kwargs):
    options = {"startup_timeout": 20.0, "cli_timeout": 5, "poll_interval": 0.05}
    options.update(kwargs)
    return fdb_cluster.LocalCluster(fakes.server, fakes.cli, **options)


def test_local_cluster_start_configure_wait_and_teardown(fakes):
    cluster = make_cluster(fakes)
    cluster_file = cluster.start()
    try:
        process, root = cluster.process, cluster.root
        assert process is not None and process.poll() is None, "the server keeps running"
        content = Path(cluster_file).read_text()
        match = re.fullmatch(r"fdbqueue:test[A-Za-z0-9]{8}@127\.0\.0\.1:(\d+)\n", content)
        assert match, content
        port = int(match.group(1))

        args = fakes.server_args()
        assert args[args.index("-p") + 1] == f"127.0.0.1:{port}"
        assert args[args.index("-C") + 1] == cluster_file
        for flag in ("-d", "-L"):
            directory = Path(args[args.index(flag) + 1])
            assert directory.is_dir() and root in directory.parents
        assert args[args.index("--knob_disable_posix_kernel_aio") + 1] == "1"

        calls = fakes.cli_calls()
        assert [c[c.index("--exec") + 1] for c in calls] == [
            "configure new single memory",
            "status minimal",
            "status minimal",
            "status minimal",
        ]
        for call in calls:
            assert call[call.index("-C") + 1] == cluster_file
            assert call[call.index("--timeout") + 1] == "5"
    finally:
        cluster.stop()
    assert process.poll() is not None, "stop() ends the server"
    assert not root.exists(), "stop() deletes the temporary directory"
    cluster.stop()  # idempotent


def test_existing_database_counts_as_configured(fakes):
    fakes.modes(cli="exists")
    with make_cluster(fakes) as cluster_file:
        assert Path(cluster_file).exists()


def test_database_never_available_is_a_clear_error_with_the_server_log(fakes):
    fakes.modes(cli="never")
    cluster = make_cluster(fakes, startup_timeout=1.0)
    with pytest.raises(fdb_cluster.ClusterStartError) as info:
        cluster.start()
    message = str(info.value)
    assert "was not available within 1 s" in message
    assert "The database is unavailable" in message, "the last fdbcli output"
    assert "fake fdbserver starting" in message, "the server's console output"
    assert "FakeTrace" in message, "the end of the server's trace file"
    assert message.count("attempt ") == 1, "a live server that never came up is not retried"
    assert cluster.process is None and cluster.root is None


def test_server_that_exits_is_retried_on_a_new_port_then_reported(fakes):
    fakes.modes(server="exit", cli="never")
    cluster = make_cluster(fakes, attempts=2)
    with pytest.raises(fdb_cluster.ClusterStartError) as info:
        cluster.start()
    message = str(info.value)
    assert "attempt 1" in message and "attempt 2" in message
    assert "exited with status 1" in message
    assert "fake bind failure" in message
    assert cluster.root is None


def test_stop_kills_a_server_that_ignores_sigterm(fakes):
    fakes.modes(server="stubborn")
    cluster = make_cluster(fakes, stop_timeout=0.5)
    cluster.start()
    process = cluster.process
    assert process is not None
    cluster.stop()
    assert process.returncode == -9


def test_unrunnable_server_binary_is_reported(fakes, tmp_path):
    cluster = fdb_cluster.LocalCluster(str(tmp_path / "missing-fdbserver"), fakes.cli)
    with pytest.raises(fdb_cluster.ClusterStartError, match="cannot run"):
        cluster.start()
    assert cluster.root is None


# -- conftest wiring, in a child pytest ------------------------------------------------------

CHILD_TESTS = """\
import pytest

def test_any(backend):
    assert backend in ("memory", "fdb")

@pytest.mark.memory_only("needs the memory hook")
def test_memory_only(backend):
    assert backend == "memory"
"""


CHILD_DB_TESTS = """\
def test_db(db, subspace):
    tr = db.create_transaction()
    tr.set(subspace.pack(("k",)), b"v")
    tr.commit().wait()
"""


def run_child_pytest(
    tmp_path: Path, env: dict[str, str], *args: str, tests: str = CHILD_TESTS
) -> subprocess.CompletedProcess:
    for name in ("conftest.py", "fdb_cluster.py", "helpers.py"):
        shutil.copy(TESTS_DIR / name, tmp_path / name)
    (tmp_path / "test_child.py").write_text(textwrap.dedent(tests))
    child_env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("FDB_CLUSTER_FILE", "FDBSERVER", "FDBCLI", "PYTEST_ADDOPTS")
    }
    child_env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    child_env["PATH"] = str(tmp_path / "empty-bin")
    child_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsE", "-q", *args],
        cwd=tmp_path,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def no_installed_fdb():
    for name in ("fdbserver", "fdbcli"):
        found = fdb_cluster.find_binary(name, which=lambda _: None)
        if found:
            pytest.skip(f"{found} is installed; the child run would start it")


def test_child_default_runs_fdb_on_the_binding_over_memory(tmp_path, no_installed_fdb):
    done = run_child_pytest(tmp_path, {}, "-v")  # -q -v: the report header is shown
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed, 1 skipped" in done.stdout, "only the memory_only test's fdb variant skips"
    assert "fdb: install (no FoundationDB cluster configured" in done.stdout
    assert "FDB_CLUSTER_FILE" in done.stdout and "fdbserver and fdbcli" in done.stdout


@pytest.mark.slow("a child pytest run")
def test_child_backend_memory_runs_memory_only(tmp_path, no_installed_fdb):
    done = run_child_pytest(tmp_path, {}, "--backend=memory")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout and "skipped" not in done.stdout


@pytest.mark.slow("a child pytest run")
def test_child_backend_fdb_without_a_cluster_runs_the_binding_over_memory(
    tmp_path, no_installed_fdb
):
    done = run_child_pytest(tmp_path, {}, "--backend=fdb", tests=CHILD_DB_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "error" not in done.stdout.lower()


def test_child_memory_only_marker_skips_the_fdb_variant(tmp_path):
    cluster_file = tmp_path / "fdb.cluster"
    cluster_file.write_text("fdbqueue:test@127.0.0.1:1\n")
    done = run_child_pytest(tmp_path, {"FDB_CLUSTER_FILE": str(cluster_file)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed, 1 skipped" in done.stdout
    assert "memory backend only: needs the memory hook" in done.stdout


@pytest.mark.slow("a child pytest run")
def test_child_bad_cluster_file_env_errors_the_fdb_variants_only(tmp_path):
    env = {"FDB_CLUSTER_FILE": str(tmp_path / "missing.cluster")}
    done = run_child_pytest(tmp_path, env, tests=CHILD_DB_TESTS)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "1 passed, 1 error" in done.stdout
    assert "missing.cluster" in done.stdout and "does not name a file" in done.stdout


@pytest.mark.slow("a child pytest run")
@pytest.mark.skipif(
    ctypes.util.find_library("fdb_c") is not None, reason="libfdb_c is installed here"
)
@pytest.mark.parametrize(
    ("option", "outcome"), [("all", "1 passed, 1 skipped"), ("fdb", "1 error")]
)
def test_child_without_libfdb_c_skips_or_errors_the_fdb_variants(tmp_path, option, outcome):
    cluster_file = tmp_path / "fdb.cluster"
    cluster_file.write_text("fdbqueue:test@127.0.0.1:1\n")
    env = {"FDB_CLUSTER_FILE": str(cluster_file)}
    done = run_child_pytest(tmp_path, env, f"--backend={option}", tests=CHILD_DB_TESTS)
    assert outcome in done.stdout, done.stdout + done.stderr
    assert "client library could not be loaded" in done.stdout
    assert "foundationdb-clients" in done.stdout
