"""One in-memory database shared by several processes: ``memory.serve`` and ``memory.connect``.

The engine's own suites also run through a server (``pytest --memory-server``, see
tests/conftest.py; :func:`test_the_memory_suites_pass_through_a_server` runs them so).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fdbqueue import memory

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def server() -> Iterator[memory.MemoryServer]:
    with memory.serve(port=0) as running:
        yield running.start()


def python(code: str, *args: str) -> subprocess.Popen[str]:
    """A separate interpreter running ``code`` (with this tree's fdbqueue)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


INCREMENT = """
    import sys
    from fdbqueue import memory
    db = memory.connect(sys.argv[1])
    for _ in range(100):
        tr = db.create_transaction()
        while True:
            try:
                count = int(tr[b"count"].value or b"0")
                tr[b"count"] = str(count + 1).encode()
                tr.commit().wait()
                break
            except memory.FDBError as error:
                tr.on_error(error).wait()
    print("done")
"""


@pytest.mark.slow("three interpreters start")
def test_three_processes_increment_one_key_serializably(server: memory.MemoryServer) -> None:
    children = [python(INCREMENT, server.address) for _ in range(3)]
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert out.strip() == "done"
    db = memory.connect(server.address)
    assert db[b"count"] == b"300"
    assert db.stats()["commits"] == 300


WATCHER = """
    import sys, time
    from fdbqueue import memory
    db = memory.connect(sys.argv[1])
    _value, watch = db.get_and_watch(b"bell")
    print("ready", flush=True)
    watch.wait()
    print(time.time(), flush=True)
"""


def test_a_watch_in_another_process_wakes_within_a_second(server: memory.MemoryServer) -> None:
    child = python(WATCHER, server.address)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    db = memory.connect(server.address)
    written = time.time()
    db[b"bell"] = b"ring"
    out, err = child.communicate(timeout=10)
    assert child.returncode == 0, err
    assert float(out.strip()) - written < 1.0


def test_a_watch_wakes_on_a_write_of_another_connection(server: memory.MemoryServer) -> None:
    watcher, writer = memory.connect(server.address), memory.connect(server.address)
    _value, watch = watcher.get_and_watch(b"bell")
    assert not watch.is_ready()
    writer[b"bell"] = b"ring"
    started = time.monotonic()
    watch.wait()
    assert time.monotonic() - started < 1.0


def test_transactions_of_two_connections_conflict(server: memory.MemoryServer) -> None:
    one, two = memory.connect(server.address), memory.connect(server.address)
    tr = one.create_transaction()
    assert tr[b"k"] == None  # noqa: E711 - a Value compares with None
    two[b"k"] = b"other"
    tr[b"k"] = b"mine"
    with pytest.raises(memory.FDBError) as caught:
        tr.commit().wait()
    assert caught.value.code == 1020
    assert one[b"k"] == b"other"


def test_a_stopped_server_gives_a_clear_error_not_a_hang() -> None:
    server = memory.serve(port=0).start()
    db = memory.connect(server.address, timeout=2.0)
    db[b"k"] = b"v"
    server.close()
    started = time.monotonic()
    with pytest.raises(memory.ServerUnavailable, match=server.address.split("//")[1]):
        db.get(b"k")
    with pytest.raises(memory.ServerUnavailable, match="cannot reach"):
        db.get(b"k")  # and again: the next call tries to connect, and cannot
    assert time.monotonic() - started < 2.0
    with pytest.raises(memory.ServerUnavailable, match="cannot reach"):
        memory.connect(server.address)


def test_a_server_that_never_answers_gives_an_error_within_the_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(memory.ServerUnavailable, match=f"127.0.0.1:{port}"):
            memory.connect(f"memory://127.0.0.1:{port}", timeout=0.3)
        assert time.monotonic() - started < 2.0


def test_a_commit_in_flight_when_the_server_stops_ends_with_1021() -> None:
    server = memory.serve(port=0, latency=memory.Latency(commit=0.5)).start()
    db = memory.connect(server.address)
    outcome: list[BaseException] = []

    def commit() -> None:
        tr = db.create_transaction()
        tr[b"k"] = b"v"
        try:
            tr.commit().wait()
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=commit)
    thread.start()
    time.sleep(0.15)
    server.close()
    thread.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], memory.FDBError)
    assert outcome[0].code == 1021


def test_a_token_is_required_and_checked() -> None:
    with memory.serve(port=0, token="s3cret") as server:
        server.start()
        with pytest.raises(memory.ServerRefused, match="token"):
            memory.connect(server.address)
        with pytest.raises(memory.ServerRefused, match="token"):
            memory.connect(server.address, token="guess")
        db = memory.connect(server.address, token="s3cret")
        db[b"k"] = b"v"
        assert db[b"k"] == b"v"


def test_a_server_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(ValueError, match="without a token"):
        memory.serve(host="0.0.0.0", port=0)
    memory.serve(host="0.0.0.0", port=0, token="s3cret").close()


def test_an_http_request_is_refused_and_changes_nothing(server: memory.MemoryServer) -> None:
    body = b'\x00\x00\x00\x10("commit",)' * 4
    request = (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
    )
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(request)
        assert sock.recv(1024) == b""  # closed without a word
    db = memory.connect(server.address)
    assert db.get_range(b"", b"\xff") == []
    assert db.stats()["commits"] == 0


def test_a_hello_of_another_protocol_is_refused(server: memory.MemoryServer) -> None:
    from fdbqueue.memory import _wire

    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(_wire.MAGIC + _wire.encode(("hello", 99, None)))
        size = int.from_bytes(_wire.receive_exactly(sock, 4), "big")
        answer = _wire.decode(_wire.receive_exactly(sock, size))
        assert answer[0] == "refused" and "protocol" in answer[1]
        assert sock.recv(1024) == b""


@pytest.mark.parametrize(
    "frame",
    [
        b"\x81\xa1a\x01",  # a map, not an array
        b"\xc1garbage",  # no MessagePack at all
        b"\x94\x01\xa3get\x90\x91\xc0",  # a request whose arguments are of the wrong types
        b"\x94\x01\xa6commit\x90\x96\xc0\x90\x90\x91\x93\x00\xc0\xc0\x00\x00",
        b"\x94\x01\xa3get\x91\x01\x90",  # statistics that are not (name, amount) pairs
    ],
    ids=["map", "garbage", "bad-get", "bad-commit", "bad-counts"],
)
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_hostile_frame_after_the_hello_changes_nothing_and_the_server_serves_on(
    server: memory.MemoryServer, frame: bytes
) -> None:
    """A peer that passed the hello and then sends a frame that is not a well-formed
    request gets an error answer or a closed connection: nothing is written, and other
    clients are served as before."""
    from fdbqueue.memory import _wire

    db = memory.connect(server.address)
    db[b"k"] = b"before"
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(_wire.MAGIC + _wire.encode(("hello", _wire.PROTOCOL, None)))
        size = int.from_bytes(_wire.receive_exactly(sock, 4), "big")
        assert _wire.decode(_wire.receive_exactly(sock, size))[0] == "ok"
        sock.sendall(len(frame).to_bytes(4, "big") + frame)
        try:
            answer = sock.recv(65536)
        except OSError:
            answer = b""
        if answer:  # an error answer, not a result
            message = _wire.decode(answer[4:])
            assert message[1] != 0, message
    assert db[b"k"] == b"before"
    assert [item.key for item in db.get_range(b"", b"\xff")] == [b"k"]
    db[b"k"] = b"after"
    assert memory.connect(server.address)[b"k"] == b"after"


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1:4690",
        "memory://",
        "memory://127.0.0.1",
        "memory://127.0.0.1:0",
        "memory://127.0.0.1:99999",
        "http://127.0.0.1:4690",
        "memory://a b:4690",
        "memory://127.0.0.1:4690/db",
    ],
)
def test_a_malformed_address_gets_a_one_line_error(address: str) -> None:
    with pytest.raises(ValueError, match="memory://HOST:PORT") as caught:
        memory.connect(address)
    assert "\n" not in str(caught.value)


def test_ipv6_addresses_are_bracketed() -> None:
    from fdbqueue.memory._wire import format_address, parse_address

    assert parse_address("memory://[::1]:4690") == ("::1", 4690)
    assert format_address("::1", 4690) == "memory://[::1]:4690"


def test_faults_time_and_stats_set_from_one_client_apply_to_all(
    server: memory.MemoryServer,
) -> None:
    one, two = memory.connect(server.address), memory.connect(server.address)
    one.faults = memory.Faults(not_committed=1.0)
    assert two.faults == memory.Faults(not_committed=1.0)
    tr = two.create_transaction()
    tr[b"k"] = b"v"
    with pytest.raises(memory.FDBError) as caught:
        tr.commit().wait()
    assert caught.value.code == 1020
    assert one.stats()["injected_not_committed"] == 1
    one.faults = memory.Faults()
    one.reset_stats()
    assert two.stats()["injected_not_committed"] == 0

    before = memory.time_passed()
    one.pass_time(30)
    two.get(b"k")  # its read version brings the time passed
    assert memory.time_passed() == before + 30  # moved once in this process, not twice

    tr = two.create_transaction()
    tr.get_read_version().wait()
    one.advance_time(6)
    with pytest.raises(memory.FDBError) as caught:
        tr.get(b"k").wait()
    assert caught.value.code == 1007  # the five-second window, decided at the server


def test_a_bad_setting_is_refused_clearly(server: memory.MemoryServer) -> None:
    db = memory.connect(server.address)
    with pytest.raises(TypeError):
        db.faults = 0.5  # type: ignore[assignment]
    with pytest.raises(ValueError):
        db.pass_time(-1)


def test_install_runs_the_binding_over_a_server(server: memory.MemoryServer) -> None:
    code = """
        import sys
        from fdbqueue import memory
        memory.install(address=sys.argv[1])
        import fdb
        fdb.api_version(630)  # every binding fdbqueue supports (6.3 on) knows it
        db = fdb.open()

        @fdb.transactional
        def bump(tr):
            tr.add(b"hits", (1).to_bytes(8, "little"))

        bump(db)
        print(int.from_bytes(db[b"hits"], "little"))
    """
    child = python(code, server.address)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.strip() == "1"
    db = memory.connect(server.address)
    assert db[b"hits"] == (1).to_bytes(8, "little")


@pytest.mark.slow("runs the engine's suites through a server (a minute or two)")
def test_the_memory_suites_pass_through_a_server() -> None:
    suites = sorted(str(path) for path in (ROOT / "tests").glob("test_memory*.py"))
    suites = [suite for suite in suites if not suite.endswith("test_memory_server.py")]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n0",
            "-p",
            "no:cacheprovider",
            "--memory-server",
            "--backend=memory",
            *suites,
            str(ROOT / "tests" / "test_conformance.py"),
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:]
