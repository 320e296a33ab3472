"""Fixtures shared by the whole suite.

``db`` runs each test on every selected backend:

- ``memory``: a fresh ``fdbqueue.memory.open()`` database per test (fdbqueue's own imitation
  of the binding's objects); always available.
- ``fdb``: the real ``fdb`` binding's Database, shared by the session. With
  ``FDB_CLUSTER_FILE`` set, the cluster it names (nothing is started). Otherwise, when
  ``fdbserver`` and ``fdbcli`` are on PATH (or named by ``FDBSERVER`` / ``FDBCLI``), a
  throwaway single-process ``fdbserver`` on 127.0.0.1 (free port, temporary data dir, log dir
  and cluster file, memory engine), stopped and deleted at the end of the session. With
  neither, the binding runs over ``fdbqueue.memory.install()``: its own code, an in-memory
  cluster. ``FDB_API_VERSION`` picks the API version; unset, the newest that both the binding
  and the client library support (``fdbqueue.binding.choose_api_version``).

``pytest --backend=all`` (default) runs both; ``--backend=memory`` runs memory only;
``--backend=fdb`` runs fdb only. Tests marked ``memory_only`` (faults, ``advance_time``...)
are skipped on ``fdb``. ``cluster_file`` is the ``fdb`` backend's cluster file (None on
``memory``), for the command line. ``engine`` is the in-memory engine under ``db`` when there
is one (``db`` itself on ``memory``; ``memory.cluster(cluster_file)`` when the binding runs
over ``memory.install()``), None on a real cluster: a test lets time pass on it instead of
sleeping.

Tests marked ``slow(reason)`` take seconds each (a stress run, a long state machine, every
cancellation offset on every event loop...): they are skipped unless ``pytest --run-slow`` or
``FDBQUEUE_SLOW=1``, which CI sets (``.ci/run``), so that every test runs in CI and the
README's command stays quick. ``slow(reason, backend="fdb")`` makes only the test's ``fdb``
cells slow; ``slow(reason, cluster=True)`` only its cells on a real cluster (where it waits in
real time what the in-memory engine lets pass at once).

``subspace`` gives each test its own ``Subspace(("fdbqueue-test", <uuid hex>))`` and clears
every key under its raw prefix afterwards, so tests leave nothing behind.

The decision logic and the cluster start-up live in ``tests/fdb_cluster.py``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import fdb_cluster
import pytest
from helpers import run

from fdbqueue import Subspace

BACKENDS = ("memory", "fdb")
PLAN = pytest.StashKey[fdb_cluster.Plan]()
CLUSTER_FILE = pytest.StashKey[str]()
#: The environment variable that runs the slow tests, like ``--run-slow``.
SLOW_VARIABLE = "FDBQUEUE_SLOW"
SLOW_HINT = f"--run-slow or {SLOW_VARIABLE}=1 runs it (CI does)"
#: The environment variable that runs the in-memory database through a server, like
#: ``--memory-server``.
MEMORY_SERVER_VARIABLE = "FDBQUEUE_MEMORY_SERVER"


def run_slow_from_env(environ: Mapping[str, str]) -> bool:
    """Whether ``FDBQUEUE_SLOW`` asks for the slow tests: 1, true, yes or on (any case)."""
    return environ.get(SLOW_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fdbqueue")
    group.addoption(
        "--backend",
        choices=fdb_cluster.BACKEND_CHOICES,
        default="all",
        help=(
            "backends for the `db` fixture: all (default: memory, plus fdb when a cluster is "
            "available, skipped otherwise), memory, or fdb (an unavailable cluster is an error)"
        ),
    )
    group.addoption(
        "--memory-server",
        action="store_true",
        default=os.environ.get(MEMORY_SERVER_VARIABLE, "") not in ("", "0"),
        help=(
            "run the in-memory database through a server: every fdbqueue.memory.open() (the "
            "memory backend's db included) returns a database connected with memory.connect "
            "to a fresh memory.serve() in a thread of this process; tests marked "
            f"memory_internals are skipped; {MEMORY_SERVER_VARIABLE}=1 does the same"
        ),
    )
    group.addoption(
        "--run-slow",
        action="store_true",
        default=run_slow_from_env(os.environ),
        help=(
            f"also run the tests marked slow (seconds each; CI runs them); {SLOW_VARIABLE}=1 "
            "does the same"
        ),
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "memory_only(reason): the test needs fdbqueue.memory features; skipped on the fdb backend",
    )
    config.addinivalue_line(
        "markers",
        "memory_internals(reason): the test reads the in-process engine's internals; skipped "
        "under --memory-server",
    )
    config.addinivalue_line(
        "markers",
        "slow(reason, backend=None, cluster=False): takes seconds; skipped unless --run-slow "
        f"or {SLOW_VARIABLE}=1 (CI runs it); backend='fdb': only the fdb cells are slow; "
        "cluster=True: only the cells on a real cluster",
    )
    backend = config.getoption("backend")
    plan = fdb_cluster.decide(backend, os.environ)
    config.stash[PLAN] = plan
    if backend == "fdb" and plan.action == "error":
        raise pytest.UsageError(plan.reason)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (addopts) with ``-s``: no workers, so that what the tests print shows as it
    comes (xdist's workers would keep it); otherwise xdist's own choice, one per core."""
    if config.getoption("capture") == "no":
        return 0
    return None


def selected_backends(config: pytest.Config) -> list[str]:
    backend = config.getoption("backend")
    return list(BACKENDS) if backend == "all" else [backend]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        names = selected_backends(metafunc.config)
        metafunc.parametrize("backend", names, ids=names, indirect=True)


def pytest_report_header(config: pytest.Config) -> list[str]:
    plan = config.stash[PLAN]
    backends = ", ".join(selected_backends(config))
    slow = "run" if config.getoption("run_slow") else f"skipped (--run-slow or {SLOW_VARIABLE}=1)"
    return [
        f"fdbqueue backends: {backends}; fdb: {plan.action} ({plan.reason})",
        f"fdbqueue slow tests: {slow}",
    ]


def is_slow(item: pytest.Item, plan: fdb_cluster.Plan) -> str | None:
    """The reason ``item`` is slow (its ``slow`` marker's), or None when it is not, or its
    marker names other cells than this one (``backend=``, ``cluster=``)."""
    marker = item.get_closest_marker("slow")
    if marker is None:
        return None
    callspec = getattr(item, "callspec", None)
    backend = callspec.params.get("backend") if callspec is not None else None
    wanted = marker.kwargs.get("backend")
    if wanted is not None and backend != wanted:
        return None
    on_a_cluster = backend == "fdb" and plan.action in ("external", "local")
    if marker.kwargs.get("cluster", False) and not on_a_cluster:
        return None
    return str(marker.args[0] if marker.args else marker.kwargs.get("reason", ""))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    plan = config.stash[PLAN]
    run_slow = config.getoption("run_slow")
    for item in items:
        internals = item.get_closest_marker("memory_internals")
        if internals is not None and config.getoption("memory_server"):
            why = internals.args[0] if internals.args else ""
            item.add_marker(pytest.mark.skip(reason=f"in-process engine only: {why}"))
            continue
        if not run_slow:
            why = is_slow(item, plan)
            if why is not None:
                item.add_marker(pytest.mark.skip(reason=f"slow ({why}): {SLOW_HINT}"))
                continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("backend") != "fdb":
            continue
        if plan.action == "skip":
            item.add_marker(pytest.mark.skip(reason=plan.reason))
            continue
        marker = item.get_closest_marker("memory_only")
        if marker is not None:
            why = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"memory backend only: {why}".rstrip(": ")))


@pytest.fixture(autouse=True)
def memory_through_a_server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Under ``--memory-server``: ``fdbqueue.memory.open()`` returns a database connected to
    a fresh server in a thread of this process (closed after the test), so the tests of the
    in-memory database run through the wire."""
    if not request.config.getoption("memory_server"):
        yield
        return
    from fdbqueue import memory

    servers: list[Any] = []

    def open_connected(**settings: Any) -> memory.Database:
        server = memory.serve(port=0, **settings).start()
        servers.append(server)
        return memory.connect(server.address)

    monkeypatch.setattr(memory, "open", open_connected)
    yield
    for server in servers:
        server.close()


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test: "memory" or "fdb" (parametrized by pytest_generate_tests)."""
    return str(request.param)


@pytest.fixture(scope="session")
def fdb_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The real cluster's Database, opened once per session (see the module docstring).

    Failures are reported outside ``except`` blocks so the message is not buried under
    chained tracebacks; pytest caches a session fixture's failure for every later test.
    """
    config = request.config
    plan = config.stash[PLAN]
    strict = config.getoption("backend") == "fdb"
    if plan.action == "error":
        pytest.fail(plan.reason, pytrace=False)
    if plan.action not in ("external", "local", "install"):
        pytest.skip(plan.reason)

    if plan.action == "install":
        from fdbqueue import memory

        memory.install()
    problem = None
    try:
        fdb = fdb_cluster.load_binding(fdb_cluster.api_version_from_env(os.environ))
    except ValueError as exc:  # a malformed FDB_API_VERSION
        problem = str(exc)
    except fdb_cluster.BindingUnavailable as exc:
        if not strict:
            pytest.skip(str(exc))
        problem = str(exc)
    if problem is not None:
        pytest.fail(problem, pytrace=False)

    if plan.action == "install":
        directory = tmp_path_factory.mktemp("memory-cluster")
        cluster_file = str(fdb_cluster.write_cluster_file(directory / "fdb.cluster", 4500))
    elif plan.action == "external":
        assert plan.cluster_file is not None
        cluster_file = plan.cluster_file
    else:
        assert plan.fdbserver is not None and plan.fdbcli is not None
        cluster = fdb_cluster.LocalCluster(plan.fdbserver, plan.fdbcli)
        request.addfinalizer(cluster.stop)
        try:
            cluster_file = cluster.start()
        except fdb_cluster.ClusterStartError as exc:
            problem = f"could not start a local fdbserver: {exc}"
        if problem is not None:
            pytest.fail(problem, pytrace=False)

    config.stash[CLUSTER_FILE] = cluster_file
    database = fdb.open(cluster_file)
    try:
        fdb_cluster.check_reachable(database)
    except fdb_cluster.ClusterStartError as exc:
        problem = f"cluster file {cluster_file}: {exc}"
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    yield database


@pytest.fixture
def db(backend: str, request: pytest.FixtureRequest) -> Any:
    """A Database of the backend under test: fresh in-memory, or the session's real cluster."""
    if backend == "memory":
        from fdbqueue import memory

        return memory.open()
    return request.getfixturevalue("fdb_database")


@pytest.fixture
def cluster_file(backend: str, db: Any, request: pytest.FixtureRequest) -> str | None:
    """On ``fdb``, the session cluster's file (``fdb.open`` of it is ``db``); else None."""
    if backend == "memory":
        return None
    return request.config.stash[CLUSTER_FILE]


@pytest.fixture
def engine(backend: str, db: Any, cluster_file: str | None, request: pytest.FixtureRequest) -> Any:
    """The ``fdbqueue.memory.Database`` under ``db``, where a test lets time pass
    (``advance_time``, ``pass_time``) instead of sleeping: ``db`` itself on ``memory``,
    ``memory.cluster(cluster_file)`` when the ``fdb`` backend runs the binding over
    ``memory.install()``; None on a real cluster, which only real time moves."""
    if backend == "memory":
        return db
    if request.config.stash[PLAN].action != "install":
        return None
    from fdbqueue import memory

    return memory.cluster(cluster_file)


@pytest.fixture
def binding(backend: str, db: Any) -> Any:
    """The backend's module, for ``KeySelector`` and ``FDBError``: fdbqueue.memory or fdb."""
    if backend == "memory":
        from fdbqueue import memory

        return memory
    import fdb

    return fdb


@pytest.fixture
def subspace(db: Any) -> Iterator[Subspace]:
    """A fresh subspace per test; every key under its raw prefix is cleared afterwards."""
    space = Subspace(("fdbqueue-test", uuid.uuid4().hex))
    yield space
    run(db, lambda tr: tr.clear_range_startswith(space.key()))
