"""The real-cluster side of the test suite: decide what the ``fdb`` backend runs on, load the
binding, and start, probe and stop a throwaway local ``fdbserver``.

The ``fdb`` backend always runs the real ``fdb`` Python binding. It talks to the cluster named by
``FDB_CLUSTER_FILE`` (``external``), to a throwaway ``fdbserver`` when ``fdbserver`` and
``fdbcli`` are installed (``local``), and otherwise to in-memory clusters through
``fdbqueue.memory.install()`` (``install``), which stands in for libfdb_c. Only a
misconfiguration (a variable naming nothing) is an ``error``. :func:`decide` makes that choice.

The API version is ``FDB_API_VERSION`` when set, else chosen by
:func:`fdbqueue.binding.choose_api_version`: the newest one both the installed binding and
libfdb_c support.

Everything here except :class:`LocalCluster`, :func:`load_binding` and
:func:`installed_binding_version` is a pure function, so ``tests/test_fixtures.py`` checks it on
machines without FoundationDB.

Facts this module relies on (FoundationDB documentation and source, apple/foundationdb):

- Cluster file format ``description:ID@IP:PORT,...``; description is letters, digits and
  underscores, ID letters and digits, a fresh random ID per cluster
  (documentation/sphinx/source/administration.rst, "Cluster file format").
- ``fdbserver -p IP:PORT -C FILE -d DATADIR -L LOGDIR --knob_disable_posix_kernel_aio 1``: the
  short options exist in every release from 6.3 on (the dashed long forms such as
  ``--public-address`` only from 7.1), and the knob makes the memory engine work on tmpfs (no
  O_DIRECT for kernel AIO). See :func:`server_command` for the source lines.
- ``fdbcli -C FILE --exec CMDS --timeout SECONDS``: ``--timeout`` is only accepted together
  with ``--exec`` and makes fdbcli exit after that many seconds (fdbcli/fdbcli.cpp).
- ``configure new single memory`` prints ``Database created``, or
  ``ERROR: Database already exists! ...`` when a previous attempt got through
  (fdbcli/ConfigureCommand.cpp).
- ``status minimal`` prints ``The database is available.`` (or ``...available, but has
  issues...``) once the database serves transactions; otherwise ``The database is
  unavailable; ...`` (fdbcli/StatusCommand.cpp). Note that "unavailable" contains "available".
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BACKEND_CHOICES = ("all", "memory", "fdb")
HOST = "127.0.0.1"
CLUSTER_DESCRIPTION = "fdbqueue"
CONFIGURE_COMMAND = "configure new single memory"
STATUS_COMMAND = "status minimal"

STARTUP_TIMEOUT = 60.0  # seconds, server start to database available
CLI_TIMEOUT = 10  # seconds, for each fdbcli --exec call (fdbcli's own --timeout)
STOP_TIMEOUT = 10.0  # seconds between SIGTERM and SIGKILL at teardown
REACHABLE_TIMEOUT = 15.0  # seconds, first read version from an existing cluster
#: fdbserver's knob to skip kernel AIO (memory engine on tmpfs), in the form 6.3 to 8.0 accept.
AIO_KNOB = ("--knob_disable_posix_kernel_aio", "1")
START_ATTEMPTS = 3  # fresh port each time: the free port may be taken before fdbserver binds

# Where the FoundationDB packages put the binaries when they are not on PATH: the Linux
# server package installs fdbserver in /usr/sbin; the macOS installer in /usr/local/libexec.
EXTRA_BINARY_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/local/libexec")

INSTALL_REASON = (
    "no FoundationDB cluster configured; the fdb backend runs the real fdb binding over "
    "fdbqueue.memory (memory.install())"
)

ENABLE_HINT = (
    "To test against a real cluster, install the FoundationDB server and clients packages "
    "(foundationdb-server, foundationdb-clients) so that fdbserver and fdbcli are on PATH, "
    "or set FDBSERVER and FDBCLI to the binaries, or set FDB_CLUSTER_FILE to the cluster "
    "file of a running cluster; the pip package 'foundationdb' must not be newer than "
    'libfdb_c (pip install "fdbqueue[fdb71]" for a 7.1 cluster). FDB_API_VERSION selects '
    "the API version (default: the newest both support)."
)


class ClusterStartError(RuntimeError):
    """The local fdbserver did not come up; the message carries the logs."""


class BindingUnavailable(RuntimeError):
    """The ``fdb`` binding cannot be used here (no libfdb_c, or a version mismatch)."""


@dataclass(frozen=True)
class Plan:
    """What the ``fdb`` backend does in this session.

    ``action`` is one of:
    ``off`` (not selected: ``--backend=memory``), ``external`` (use ``cluster_file``),
    ``local`` (start ``fdbserver`` with ``fdbcli``), ``install`` (no cluster configured: the
    real binding over ``fdbqueue.memory`` after ``memory.install()``; ``reason`` also says how
    to use a real cluster), ``error`` (misconfigured: a variable names nothing usable).
    """

    action: str
    reason: str = ""
    cluster_file: str | None = None
    fdbserver: str | None = None
    fdbcli: str | None = None


def _default_is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binary(
    name: str,
    which: Callable[[str], str | None] = shutil.which,
    is_executable: Callable[[str], bool] = _default_is_executable,
    extra_dirs: Sequence[str] = EXTRA_BINARY_DIRS,
) -> str | None:
    """``name`` on PATH, else in the directories the FoundationDB packages install to."""
    found = which(name)
    if found:
        return found
    for directory in extra_dirs:
        candidate = os.path.join(directory, name)
        if is_executable(candidate):
            return candidate
    return None


def decide(
    backend: str,
    env: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    is_file: Callable[[str], bool] = os.path.isfile,
    is_executable: Callable[[str], bool] = _default_is_executable,
    extra_dirs: Sequence[str] = EXTRA_BINARY_DIRS,
) -> Plan:
    """Decide from ``--backend`` and the environment what the ``fdb`` backend does.

    - ``--backend=memory``: ``off``.
    - ``FDB_CLUSTER_FILE`` set: ``external`` when it names a file, else ``error``.
    - ``FDBSERVER`` / ``FDBCLI`` set: they must name executables or commands on PATH (else
      ``error``); unset, the binaries are looked up on PATH (then in the packages' install
      directories).
      Both found: ``local``.
    - Nothing found: ``install`` (under ``--backend=all`` and ``--backend=fdb`` alike), with
      :data:`INSTALL_REASON` and :data:`ENABLE_HINT`.
    """
    if backend not in BACKEND_CHOICES:
        return Plan(
            "error", f"--backend must be one of {', '.join(BACKEND_CHOICES)}, not {backend!r}"
        )
    if backend == "memory":
        return Plan("off", "--backend=memory selects the in-memory backend only")

    cluster_file = env.get("FDB_CLUSTER_FILE", "").strip()
    if cluster_file:
        if not is_file(cluster_file):
            return Plan(
                "error",
                f"FDB_CLUSTER_FILE={cluster_file!r} does not name a file. Point it at the "
                "cluster file of a running cluster, or unset it to let the tests start a "
                "local fdbserver.",
            )
        return Plan(
            "external", f"using the cluster in FDB_CLUSTER_FILE={cluster_file!r}", cluster_file
        )

    found: dict[str, str] = {}
    missing: list[str] = []
    for name, variable in (("fdbserver", "FDBSERVER"), ("fdbcli", "FDBCLI")):
        named = env.get(variable, "").strip()
        if named:
            resolved = named if is_executable(named) else which(named)
            if not resolved:
                return Plan(
                    "error",
                    f"{variable}={named!r} is neither an executable file nor a command on "
                    f"PATH. Point it at the {name} binary, or unset it to look {name} up on "
                    "PATH.",
                )
            found[name] = resolved
            continue
        path = find_binary(name, which, is_executable, extra_dirs)
        if path is None:
            missing.append(name)
        else:
            found[name] = path

    if not missing:
        return Plan(
            "local",
            f"starting a throwaway {found['fdbserver']} on {HOST}",
            fdbserver=found["fdbserver"],
            fdbcli=found["fdbcli"],
        )

    return Plan(
        "install",
        f"{INSTALL_REASON} (FDB_CLUSTER_FILE is unset; {' and '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not on PATH). {ENABLE_HINT}",
    )


def api_version_from_env(env: Mapping[str, str]) -> int | None:
    """``FDB_API_VERSION`` as an int; None when unset (then the API version is chosen by
    :func:`fdbqueue.binding.choose_api_version`); ValueError if malformed."""
    raw = env.get("FDB_API_VERSION", "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(
            f"FDB_API_VERSION={raw!r} is not an integer API version such as 710"
        ) from None


def random_cluster_id(length: int = 8) -> str:
    """A random ID of letters and digits, as the cluster file format asks."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def cluster_file_content(
    port: int, host: str = HOST, description: str = CLUSTER_DESCRIPTION, cluster_id: str = "test"
) -> str:
    """One line ``description:ID@host:port``, newline-terminated."""
    if not description or not all(c.isascii() and (c.isalnum() or c == "_") for c in description):
        raise ValueError(f"cluster description must be letters, digits or '_': {description!r}")
    if not cluster_id or not all(c.isascii() and c.isalnum() for c in cluster_id):
        raise ValueError(f"cluster ID must be letters or digits: {cluster_id!r}")
    if not 0 < port < 65536:
        raise ValueError(f"port out of range: {port}")
    return f"{description}:{cluster_id}@{host}:{port}\n"


def write_cluster_file(path: str | os.PathLike[str], port: int, **kwargs: Any) -> Path:
    """Write :func:`cluster_file_content` to ``path``; returns the path."""
    target = Path(path)
    target.write_text(cluster_file_content(port, **kwargs), encoding="ascii")
    return target


def free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def server_command(
    fdbserver: str, cluster_file: str, port: int, data_dir: str, log_dir: str, host: str = HOST
) -> list[str]:
    """The fdbserver command line: one process, public (and listen) address host:port.

    Only spellings every fdbserver from 6.3 to 8.0 accepts (apple/foundationdb,
    fdbserver/fdbserver.actor.cpp at tags 6.3.25, 7.0.0, 7.1.67, 7.3.79, 7.4.6;
    fdbserver/fdbserver.cpp at HEAD c0c44752, as no 8.0 tag is in the mirror used):

    - ``-C``, ``-p``, ``-d``, ``-L`` are in the option table of each (6.3.25:90,96,104,106;
      7.0.0:98,104,112,114; 7.1.67:114,120,128,130; 7.3.79:126,132,140,142; HEAD:142,148,157,
      160; 7.4.6:148,154,162,164). ``--public-address``/``--cluster-file`` exist only from
      7.1; 6.3 and 7.0 exit on them as unknown options.
    - The knob as ``--knob_disable_posix_kernel_aio 1`` (two arguments). 6.3 and 7.0 list the
      wildcard ``--knob_`` with a separate argument (``SO_REQ_SEP``, 6.3.25:155, 7.0.0:165;
      a table entry ending in ``_`` matches any longer option, flow/SimpleOpt.h 6.3.25:916)
      and strip that 7-character prefix (6.3.25:1066-1071, 7.0.0:1048-1053); ``--knob-...``
      does not match there. 7.1 and later list ``--knob-`` (7.1.67:182, 7.3.79:195,
      7.4.6:217, HEAD:214) but parse with ``SO_O_HYPHEN_TO_UNDERSCORE`` (7.1.67:1100,
      7.3.79:1162, 7.4.6:1215, HEAD:1102), which compares ``-`` and ``_`` as equal
      (flow/SimpleOpt.h 7.1.67:949-956), and ``extractPrefixedArgument("--knob", ...)``
      accepts ``_`` or ``-`` after the prefix and
      turns hyphens into underscores (flow/ArgParseUtil.h 7.1.67:29-37; HEAD
      flow/include/flow/ArgParseUtil.h:29-37). The knob itself exists in all of them
      (flow/Knobs.cpp 6.3.25:131, 7.1.67:159, 7.3.79:188, HEAD:199).
    - The knob turns off kernel AIO, which the memory engine's unbuffered files need and
      tmpfs (no O_DIRECT) cannot give; upstream's contrib/Joshua/scripts/localClusterStart.sh
      (7.3.79:245) passes it (in its 7.1+ dashed form) for the same reason.
    """
    return [
        fdbserver,
        "-p",
        f"{host}:{port}",
        "-C",
        str(cluster_file),
        "-d",
        str(data_dir),
        "-L",
        str(log_dir),
        *AIO_KNOB,
    ]


def cli_command(
    fdbcli: str, cluster_file: str, command: str, timeout: int = CLI_TIMEOUT
) -> list[str]:
    """An ``fdbcli --exec`` command line that gives up after ``timeout`` seconds."""
    return [fdbcli, "-C", str(cluster_file), "--exec", command, "--timeout", str(int(timeout))]


def configure_done(output: str) -> bool:
    """Whether ``configure new ...`` output says the database exists now."""
    return "Database created" in output or "Database already exists" in output


def database_available(output: str) -> bool:
    """Whether ``status minimal`` output says the database is available."""
    return any(line.strip().startswith("The database is available") for line in output.splitlines())


def tail(path: str | os.PathLike[str], lines: int = 30) -> str:
    """The last ``lines`` lines of a text file, or a note that it is missing."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"<{path}: {exc.strerror or exc}>"
    return "\n".join(text.splitlines()[-lines:])


def log_tail(
    log_dir: str | os.PathLike[str], console: str | os.PathLike[str] | None, lines: int = 30
) -> str:
    """The server's console output and the end of its newest trace file, for error messages."""
    parts = []
    if console is not None:
        parts.append(f"--- fdbserver stdout/stderr ({console}) ---\n{tail(console, lines)}")
    traces = sorted(
        (p for p in Path(log_dir).glob("trace*") if p.is_file()),
        key=lambda p: p.stat().st_mtime,
    )
    if traces:
        parts.append(f"--- end of {traces[-1]} ---\n{tail(traces[-1], lines)}")
    else:
        parts.append(f"--- no trace files in {log_dir} ---")
    return "\n".join(parts)


def _parent_death_signal() -> None:  # pragma: no cover - runs in the child before exec
    """On Linux, have the kernel send SIGTERM to fdbserver if pytest dies without teardown."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except Exception:
        pass


class LocalCluster:
    """A throwaway single-process cluster: temporary directory, free port, memory engine.

    ``start()`` returns the cluster file path once ``status minimal`` reports the database
    available; ``stop()`` (idempotent, also registered with atexit) terminates the server
    (SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT`) and deletes the directory.
    """

    def __init__(
        self,
        fdbserver: str,
        fdbcli: str,
        *,
        host: str = HOST,
        startup_timeout: float = STARTUP_TIMEOUT,
        cli_timeout: int = CLI_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
        attempts: int = START_ATTEMPTS,
        poll_interval: float = 0.5,
    ) -> None:
        self.fdbserver = fdbserver
        self.fdbcli = fdbcli
        self.host = host
        self.startup_timeout = startup_timeout
        self.cli_timeout = cli_timeout
        self.stop_timeout = stop_timeout
        self.attempts = attempts
        self.poll_interval = poll_interval
        self.root: Path | None = None
        self.cluster_file: Path | None = None
        self.log_dir: Path | None = None
        self.console: Path | None = None
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._console_handle: Any = None
        self._atexit_registered = False

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> str:
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        errors = []
        for attempt in range(1, self.attempts + 1):
            try:
                self._launch()
                self._wait_until_available()
                assert self.cluster_file is not None
                return str(self.cluster_file)
            except ClusterStartError as exc:
                errors.append(f"attempt {attempt}: {exc}")
                exited_early = self.process is not None and self.process.poll() is not None
                self.stop()
                if not exited_early:  # a live server that never became available: give up
                    break
        raise ClusterStartError("\n\n".join(errors))

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=self.stop_timeout)
        if self._console_handle is not None:
            self._console_handle.close()
            self._console_handle = None
        root, self.root = self.root, None
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- steps ------------------------------------------------------------------------------

    def _launch(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="fdbqueue-fdbserver-"))
        data_dir = self.root / "data"
        self.log_dir = self.root / "logs"
        data_dir.mkdir()
        self.log_dir.mkdir()
        self.port = free_port(self.host)
        self.cluster_file = write_cluster_file(
            self.root / "fdb.cluster",
            self.port,
            host=self.host,
            cluster_id="test" + random_cluster_id(),
        )
        self.console = self.log_dir / "fdbserver.console.log"
        self._console_handle = open(self.console, "wb")  # noqa: SIM115 - closed in stop()
        command = server_command(
            self.fdbserver,
            str(self.cluster_file),
            self.port,
            str(data_dir),
            str(self.log_dir),
            self.host,
        )
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._console_handle,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                preexec_fn=_parent_death_signal if sys.platform.startswith("linux") else None,
            )
        except OSError as exc:
            raise ClusterStartError(f"cannot run {command[0]}: {exc}") from exc

    def _cli(self, command: str) -> tuple[int | None, str]:
        assert self.cluster_file is not None
        args = cli_command(self.fdbcli, str(self.cluster_file), command, self.cli_timeout)
        try:
            done = subprocess.run(
                args,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.cli_timeout + 10,  # fdbcli exits by itself after --timeout
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            output = (exc.stdout or b"") + (exc.stderr or b"")
            return None, output.decode(
                errors="replace"
            ) + f"\n<fdbcli killed after {self.cli_timeout + 10} s>"
        except OSError as exc:
            raise ClusterStartError(f"cannot run {args[0]}: {exc}") from exc
        return done.returncode, (done.stdout + done.stderr).decode(errors="replace")

    def _check_running(self, step: str) -> None:
        assert self.process is not None
        code = self.process.poll()
        if code is not None:
            raise ClusterStartError(
                f"fdbserver exited with status {code} during {step}\n{self._logs()}"
            )

    def _logs(self) -> str:
        assert self.log_dir is not None
        return log_tail(self.log_dir, self.console)

    def _wait_until_available(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last = ""
        configured = False
        while time.monotonic() < deadline:
            self._check_running("start-up")
            if not configured:
                _, last = self._cli(CONFIGURE_COMMAND)
                configured = configure_done(last)
            if configured:
                _, last = self._cli(STATUS_COMMAND)
                if database_available(last):
                    return
            self._check_running("start-up")
            time.sleep(self.poll_interval)
        step = STATUS_COMMAND if configured else CONFIGURE_COMMAND
        raise ClusterStartError(
            f"the database at {self.cluster_file} was not available within "
            f"{self.startup_timeout:g} s; last `fdbcli --exec {step!r}` output:\n"
            f"{last.strip() or '<none>'}\n{self._logs()}"
        )


def installed_binding_version() -> str:
    """The installed ``foundationdb`` package's version for messages, or ``"unknown"``.

    ``fdb.__version__`` exists only in bindings 7.4 and later, so it is never read directly:
    :func:`fdbqueue.binding.binding_version` reads the package metadata first.
    """
    from fdbqueue.binding import binding_version

    return binding_version() or "unknown"


def load_binding(api_version: int | None = None) -> Any:
    """``import fdb`` with an API version selected; the fdb module.

    ``api_version`` (``FDB_API_VERSION``) is used when given; None lets
    :func:`fdbqueue.binding.choose_api_version` pick the newest version both the binding and
    libfdb_c support. An API version already selected in this process is kept.

    Raises:
        BindingUnavailable: libfdb_c is missing, or the binding is newer than libfdb_c (the
            message says which binding version to install), or ``fdb.api_version`` refuses.
        ValueError: ``api_version`` is outside what fdbqueue and the binding support.
    """
    import fdb

    from fdbqueue import binding

    if fdb.is_api_version_selected():
        return fdb
    try:
        binding.select_api_version(api_version)
    except binding.ClientLibraryMissingError as exc:
        raise BindingUnavailable(str(exc)) from exc
    except ValueError as exc:
        raise ValueError(
            f"FDB_API_VERSION={api_version}: {exc} (unset FDB_API_VERSION to choose the API "
            "version automatically)"
        ) from exc
    except RuntimeError as exc:  # BindingMismatchError, or a binding we cannot read
        raise BindingUnavailable(
            f"{exc} (the 'foundationdb' pip package, version {installed_binding_version()}, "
            "must not be newer than the installed libfdb_c; FDB_API_VERSION selects the API "
            "version)"
        ) from exc
    return fdb


def check_reachable(db: Any, timeout: float = REACHABLE_TIMEOUT) -> None:
    """Get one read version within ``timeout`` s, or raise ClusterStartError."""
    tr = db.create_transaction()
    tr.options.set_timeout(int(timeout * 1000))
    try:
        tr.get_read_version().wait()
    except Exception as exc:
        raise ClusterStartError(
            f"no read version from the cluster within {timeout:g} s: {exc}"
        ) from exc
