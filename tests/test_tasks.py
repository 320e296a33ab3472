"""Tasks by name (docs/jobs.rst, "Tasks"): a function registered with ``@queue.task``,
submitted as a job by its name, run by a worker given no handler; on Queue and PriorityQueue,
1 and 4 shards, sync and asyncio.

Every test uses a subspace of its own: the tasks are registered in the process by the
queue's subspace.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import uuid
from typing import Any

import fdb.tuple
import pytest
from click.testing import CliRunner
from helpers import all_keys

import fdbqueue
import fdbqueue.asyncio as fa
from fdbqueue import PriorityQueue, Queue, Subspace, UnknownTaskError, memory
from fdbqueue.cli import cli

KINDS = [(False, 1), (False, 4), (True, 1), (True, 4)]
KIND_IDS = ["Queue-1", "Queue-4", "PriorityQueue-1", "PriorityQueue-4"]


def fresh(priority: bool, shards: int, api: str = "sync", codec: str = "json") -> Any:
    """A queue of the shape on a subspace of its own (its sync queue for asyncio shapes too:
    the shape's ``api`` decides which object the test registers and works with)."""
    subspace = Subspace(("tasks", uuid.uuid4().hex))
    if api == "asyncio":
        kind: Any = fa.PriorityQueue if priority else fa.Queue
    else:
        kind = PriorityQueue if priority else Queue
    return kind(subspace, codec=codec, shards=shards)


def work(queue: Any, db: Any, **options: Any) -> Any:
    """Run ``queue``'s worker with no handler until it is empty (awaited for asyncio)."""
    options = {"lease": 30, "until_empty": True, "handle_signals": False, **options}
    if isinstance(queue, (fa.Queue, fa.PriorityQueue)):
        return asyncio.run(queue.work(db, **options))
    return queue.work(db, **options)


def call(result: Any) -> Any:
    """``result``, awaited when it is a coroutine (an asyncio queue's call)."""
    if asyncio.iscoroutine(result):

        async def awaited() -> Any:
            return await result

        return asyncio.run(awaited())
    return result


def submit_by_name(queue: Any, db: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    priority = {"priority": 0} if isinstance(queue, (PriorityQueue, fa.PriorityQueue)) else {}
    return call(queue.submit_task(db, name, args, kwargs, **priority))


@pytest.mark.parametrize("api", ["sync", "asyncio"])
@pytest.mark.parametrize(("priority", "shards"), KINDS, ids=KIND_IDS)
def test_a_task_runs_by_its_name_and_keeps_its_result(priority: bool, shards: int, api: str):
    """``@queue.task`` registers the function; calling it runs it here; ``submit`` makes a
    job that a worker without a handler runs by the task's name, its result kept."""
    db = memory.open()
    queue = fresh(priority, shards, api)
    ran: list[Any] = []

    @queue.task
    def add(a: int, b: int, *, c: int = 0) -> int:
        ran.append((a, b, c))
        return a + b + c

    assert isinstance(add, fdbqueue.Task) and add.name == "add"
    assert add(1, 2) == 3 and ran == [(1, 2, 0)]  # a plain call: no job
    job = call(add.submit(db, 1, 2, c=3))
    other = submit_by_name(queue, db, "add", 10, 20)
    summary = work(queue, db)
    assert summary.succeeded == 2
    assert sorted(ran[1:]) == [(1, 2, 3), (10, 20, 0)]
    assert call(queue.result(db, job.id)) == 6
    assert call(queue.result(db, other.id)) == 30


@pytest.mark.parametrize("api", ["sync", "asyncio"])
@pytest.mark.parametrize(("priority", "shards"), KINDS, ids=KIND_IDS)
def test_a_job_whose_task_this_worker_lacks_ends_dead_at_once_naming_it(
    priority: bool, shards: int, api: str
):
    """Never dropped silently, never retried for ever: one delivery, then ``dead``, its
    error naming the task and saying which ones the worker has."""
    db = memory.open()
    queue = fresh(priority, shards, api)

    @queue.task
    def known() -> None: ...

    job = submit_by_name(queue, db, "emails.send", "ada@example.com")
    summary = work(queue, db)
    assert summary.dead_lettered == 1 and summary.retried == 0
    info = call(queue.job(db, job.id))
    assert info.state == "dead" and info.deliveries == 1
    assert info.error[0] == "UnknownTaskError"
    assert "'emails.send'" in info.error[1] and "'known'" in info.error[1]
    with pytest.raises(fdbqueue.JobFailedError):
        call(queue.result(db, job.id, timeout=1))


@pytest.mark.parametrize("api", ["sync", "asyncio"])
def test_a_value_that_is_not_a_task_call_ends_dead_at_once(api: str):
    db = memory.open()
    queue = fresh(False, 1, api)
    job = call(queue.submit(db, {"not": "a task"}))
    summary = work(queue, db)
    assert summary.dead_lettered == 1
    info = call(queue.job(db, job.id))
    assert info.state == "dead" and info.deliveries == 1
    assert "not a task call" in info.error[1]


def test_the_task_call_is_a_documented_value_another_program_can_write():
    """JSON: ``{"task", "args", "kwargs"}``; the tuple codec: ``("fdbqueue.task", name, args,
    kwargs pairs)``. A job whose value another program wrote in that form runs."""
    db = memory.open()
    as_json = fresh(False, 1)
    as_json.submit_task(db, "send", ["ada@example.com"], {"subject": "hi"})
    ((_key, stored),) = [kv for kv in all_keys(db, as_json.subspace) if b"ada@ex" in kv[1]]
    assert json.loads(stored) == {  # the value alone: the job's id is in the key (docs/jobs.rst)
        "task": "send",
        "args": ["ada@example.com"],
        "kwargs": {"subject": "hi"},
    }
    as_tuple = fresh(False, 1, codec="tuple")
    as_tuple.submit_task(db, "send", ("ada@example.com",), {"subject": "hi"})
    ((_key, stored),) = [
        kv for kv in all_keys(db, as_tuple.subspace) if b"ada@example.com" in kv[1]
    ]
    call_tuple = ("fdbqueue.task", "send", ("ada@example.com",), (("subject", "hi"),))
    assert stored.endswith(fdb.tuple.pack((call_tuple,)))  # the tuple codec's one element

    # another program, which knows only the documented form (a plain submit of it)
    sent: list[Any] = []
    for queue, value in (
        (as_json, {"task": "send", "args": ["bob@example.com"], "kwargs": {"subject": "yo"}}),
        (as_tuple, ("fdbqueue.task", "send", ("bob@example.com",), (("subject", "yo"),))),
    ):
        queue.task(lambda to, *, subject: sent.append((to, subject)), name="send")
        queue.submit(db, value)
        work(queue, db)
    assert sent.count(("ada@example.com", "hi")) == 2
    assert sent.count(("bob@example.com", "yo")) == 2


def test_a_raw_queue_refuses_tasks_before_anything_is_written():
    db = memory.open()
    queue = fresh(False, 1, codec="raw")
    with pytest.raises(TypeError, match="codec='json'"):

        @queue.task
        def task() -> None: ...

    with pytest.raises(TypeError, match="codec='json'"):
        queue.submit_task(db, "task")
    with pytest.raises(TypeError, match="codec='json'"):
        queue.work(db, lease=30, until_empty=True, handle_signals=False)
    assert all_keys(db, queue.subspace) == []


def test_names_are_checked_and_one_name_is_one_function():
    queue = fresh(False, 1)

    @queue.task(name="emails.send")
    def send() -> str:
        return "sent"

    assert send.name == "emails.send" and send() == "sent" and send.__name__ == "send"
    assert queue.task(send.function, name="emails.send").function is send.function  # again
    with pytest.raises(ValueError, match="taken"):
        queue.task(lambda: None, name="emails.send")
    with pytest.raises(ValueError, match="empty"):
        queue.task(lambda: None, name="")
    with pytest.raises(TypeError):
        queue.task(lambda: None, name=3)
    with pytest.raises(TypeError):
        queue.task(42)
    with pytest.raises(TypeError, match="args"):
        queue.submit_task(memory.open(), "emails.send", args="ab")
    with pytest.raises(TypeError, match="kwargs"):
        queue.submit_task(memory.open(), "emails.send", kwargs={1: 2})


def test_another_queue_object_of_the_subspace_finds_the_tasks():
    """The registry is the process's, by subspace: a worker made elsewhere (the command
    line's) runs the tasks a module registered on its own queue object."""
    db = memory.open()
    defined = fresh(False, 1)
    ran = []
    defined.task(lambda x: ran.append(x), name="note")
    elsewhere = Queue(defined.subspace, codec="json")
    elsewhere.submit_task(db, "note", [7])
    elsewhere.work(db, lease=30, until_empty=True, handle_signals=False)
    assert ran == [7]


def test_a_transactional_worker_calls_the_task_with_the_transaction():
    """With ``transactional=True`` a task is called ``function(tr, *args, **kwargs)`` in the
    transaction that acknowledges its job: its writes commit with the acknowledgement."""
    db = memory.open()
    queue = fresh(False, 1)
    marks = Subspace(("marks", uuid.uuid4().hex))

    @queue.task
    def mark(tr: Any, name: str) -> None:
        tr[marks.pack((name,))] = b"done"

    mark.submit(db, "a")
    summary = work(queue, db, transactional=True)
    assert summary.succeeded == 1
    assert [key for key, _value in all_keys(db, marks)] == [marks.pack(("a",))]


def test_the_asyncio_worker_awaits_coroutine_tasks_and_threads_plain_ones():
    db = memory.open()
    queue = fresh(False, 1, "asyncio")
    where: list[Any] = []

    @queue.task
    async def waits(x: int) -> int:
        await asyncio.sleep(0)
        where.append(("coroutine", x))
        return x

    @queue.task
    def blocks(x: int) -> int:
        where.append(("thread", threading.current_thread() is not threading.main_thread()))
        return x

    first = call(waits.submit(db, 1))
    second = call(blocks.submit(db, 2))
    assert work(queue, db).succeeded == 2
    assert sorted(where) == [("coroutine", 1), ("thread", True)]
    assert call(queue.result(db, first.id)) == 1 and call(queue.result(db, second.id)) == 2


def test_an_unknown_task_is_an_error_the_worker_does_not_retry():
    """:class:`UnknownTaskError` is public, a LookupError, and final for the worker even
    with many deliveries left."""
    assert issubclass(UnknownTaskError, LookupError)
    db = memory.open()
    queue = Queue(Subspace(("tasks", uuid.uuid4().hex)), codec="json", max_deliveries=None)
    job = queue.submit_task(db, "missing")
    summary = queue.work(db, lease=30, until_empty=True, handle_signals=False)
    assert summary.dead_lettered == 1
    assert queue.job(db, job.id).state == "dead"


# -- the command line --------------------------------------------------------------------------


def write_tasks_module(tmp_path: Any, monkeypatch: Any, subspace: Subspace, name: str) -> None:
    """A module of tasks, as an application keeps them: its queue and its @queue.task."""
    prefix = fdb.tuple.unpack(subspace.key())
    (tmp_path / f"{name}.py").write_text(
        "from fdbqueue import Queue, Subspace\n\n"
        f"emails = Queue(Subspace({prefix!r}), codec='json')\nsent = []\n\n"
        "@emails.task(name='emails.send')\n"
        "def send(to, *, subject):\n    sent.append((to, subject))\n    return len(sent)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_the_command_line_submits_a_task_by_name_and_works_the_tasks_of_a_module(
    tmp_path: Any, monkeypatch: Any
):
    db = memory.open()
    subspace = Subspace(("cli-tasks", uuid.uuid4().hex))
    module = f"tasks_for_test_{uuid.uuid4().hex[:8]}"
    write_tasks_module(tmp_path, monkeypatch, subspace, module)
    where = ",".join(fdb.tuple.unpack(subspace.key()))
    runner = CliRunner()

    def ok(*args: str) -> str:
        result = runner.invoke(cli, list(args), obj={"database": db})
        assert result.exit_code == 0, result.output
        return result.output

    job_id = ok(
        "--queue", where, "--codec", "json", "submit", "--task", "emails.send",
        "--args", '["ada@example.com"]', "--kwargs", '{"subject": "hi"}',
    ).strip()  # fmt: skip
    ok("--queue", where, "submit", "--task", "emails.unknown")
    summary = json.loads(
        ok("--json", "--queue", where, "work", "--tasks", module, "--until-empty").splitlines()[-1]
    )
    assert (summary["succeeded"], summary["dead_lettered"]) == (1, 1)
    assert sys.modules[module].sent == [("ada@example.com", "hi")]
    assert Queue(subspace, codec="json").result(db, job_id) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["work"], "give a HANDLER (module:function) or --tasks MODULE"),
        (["work", "json:loads", "--tasks", "json"], "not both"),
        (["work", "--tasks", "no_such_module_here"], "cannot import 'no_such_module_here'"),
        (["work", "--tasks", "json"], "json registered no task on"),
        (["submit"], "give a VALUE or --task NAME"),
        (["submit", "x", "--task", "t"], "not both"),
        (["submit", "x", "--args", "[]"], "--args and --kwargs go with --task"),
        (["submit", "--task", "t", "--args", "{}"], "must be a JSON array"),
        (["submit", "--task", "t", "--kwargs", "[1]"], "must be a JSON object"),
        (["submit", "--task", "t", "--args", "[1,"], "not JSON"),
        (["--codec", "raw", "submit", "--task", "t"], "codec='json'"),
    ],
)
def test_the_command_line_refuses_a_bad_task_command_and_writes_nothing(
    args: list[str], message: str
):
    db = memory.open()
    subspace = Subspace(("cli-tasks", uuid.uuid4().hex))
    where = ",".join(fdb.tuple.unpack(subspace.key()))
    result = CliRunner().invoke(cli, ["--queue", where, *args], obj={"database": db})
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert all_keys(db, subspace) == []


# -- options per job ----------------------------------------------------------------------------


def options_queue(priority: bool, shards: int, api: str) -> Any:
    return fresh(priority, shards, api)


def submit_with(queue: Any, db: Any, value: Any, **options: Any) -> Any:
    if isinstance(queue, (PriorityQueue, fa.PriorityQueue)):
        options.setdefault("priority", 0)
    return call(queue.submit(db, value, **options))


@pytest.mark.parametrize("api", ["sync", "asyncio"])
@pytest.mark.parametrize(("priority", "shards"), KINDS, ids=KIND_IDS)
def test_a_jobs_own_max_deliveries_and_time_limit_beat_the_queues_and_the_workers(
    priority: bool, shards: int, api: str
):
    """``submit(..., max_deliveries=1)`` makes that job dead at its first failure on a queue
    that allows 5; ``time_limit=`` takes back that job's hung handler while the worker has
    none; the record and the lease carry the options."""
    db = memory.open()
    queue = options_queue(priority, shards, api)
    release = threading.Event()
    seen: dict[str, Any] = {}

    def handle(value: dict[str, Any]) -> None:
        seen.setdefault(value["name"], 0)
        seen[value["name"]] += 1
        if value["name"] == "hangs":
            release.wait(5)
        elif seen[value["name"]] == 1:  # every other job fails its first delivery
            raise RuntimeError(f"{value['name']} failed")

    strict = submit_with(queue, db, {"name": "strict"}, max_deliveries=1)
    lenient = submit_with(queue, db, {"name": "lenient"})
    hangs = submit_with(queue, db, {"name": "hangs"}, time_limit=0.2, max_deliveries=1)
    options = {"lease": 30, "until_empty": True, "handle_signals": False, "backoff": 0.01}
    try:
        if api == "asyncio":
            summary = asyncio.run(queue.work(db, handle, **options))
        else:
            summary = queue.work(db, handle, **options)
    finally:
        release.set()
    info = call(queue.job(db, strict.id))
    assert (info.state, info.deliveries) == ("dead", 1)
    assert info.options == fdbqueue.JobOptions(max_deliveries=1)
    info = call(queue.job(db, lenient.id))
    assert (info.state, info.deliveries, info.options) == ("succeeded", 2, None)
    info = call(queue.job(db, hangs.id))
    assert (info.state, info.error[0]) == ("dead", "TimeLimitExceeded")
    assert summary.timed_out == 1


def test_a_jobs_own_backoff_sets_its_retry_delay():
    """The worker's backoff is 0.01 s; a job submitted with ``backoff=30`` waits 15 to 30 s
    (jittered) before its second delivery."""
    db = memory.open()
    queue = options_queue(False, 1, "sync")
    slow = queue.submit(db, {"n": 1}, backoff=30)
    quick = queue.submit(db, {"n": 2})
    stop = threading.Event()
    failed = threading.Semaphore(0)

    def handle(value: Any) -> None:
        failed.release()
        raise RuntimeError("fails")

    worker = threading.Thread(
        target=queue.work,
        args=(db, handle),
        kwargs={"lease": 30, "backoff": 0.01, "max_backoff": 60, "stop": stop,
                "handle_signals": False},
    )  # fmt: skip
    worker.start()
    try:
        assert failed.acquire(timeout=10) and failed.acquire(timeout=10)
    finally:
        stop.set()
        worker.join(10)
    now = fdbqueue._clock.now()
    slow_due = queue.job(db, slow.id).due_at
    assert slow_due is not None and 14 < slow_due - now <= 30
    quick_info = queue.job(db, quick.id)
    assert quick_info.due_at is None or quick_info.due_at - now < 1


def test_options_per_job_are_checked_before_anything_is_written():
    db = memory.open()
    queue = options_queue(False, 1, "sync")
    for bad, error in [
        ({"max_deliveries": 0}, ValueError),
        ({"max_deliveries": True}, TypeError),
        ({"time_limit": -1}, ValueError),
        ({"time_limit": "1"}, TypeError),
        ({"backoff": float("nan")}, ValueError),
    ]:
        with pytest.raises(error):
            queue.submit(db, {"x": 1}, **bad)
        with pytest.raises(error):
            queue.task(lambda: None, name="t", **bad)
    assert all_keys(db, queue.subspace) == []


def test_a_tasks_options_are_its_jobs_own():
    db = memory.open()
    queue = options_queue(True, 1, "sync")

    @queue.task(priority=3, max_deliveries=2, time_limit=60.0)
    def ping() -> str:
        return "pong"

    job = ping.submit(db)
    info = queue.job(db, job.id)
    assert (info.priority, info.options) == (3, fdbqueue.JobOptions(2, 60.0, None))
    assert queue.work(db, lease=30, until_empty=True, handle_signals=False).succeeded == 1
    assert queue.result(db, job.id) == "pong"


def test_a_jobs_own_result_ttl_outlives_or_undercuts_the_queues():
    """``result_ttl`` per job: a job kept 10 s is swept 10 s after it finished, while one
    kept the queue's day stays; one kept 0 s keeps no result (its record goes at the first
    sweep, as for a queue whose ``result_ttl`` is 0)."""
    from helpers import pass_time

    db = memory.open()
    queue = options_queue(False, 1, "sync")
    short = queue.submit(db, {"n": 1}, result_ttl=10.0)
    none = queue.submit(db, {"n": 2}, result_ttl=0)
    usual = queue.submit(db, {"n": 3})
    assert queue.work(db, lambda value: value["n"], **RUN_ONCE).succeeded == 3
    assert queue.result(db, short.id) == 1 and queue.result(db, usual.id) == 3
    kept = queue.job(db, none.id)  # gone at the first sweep after its finish, or kept bare
    assert kept is None or not kept.has_result
    pass_time(db, 11)
    queue.clear_finished_jobs(db)
    assert queue.job(db, short.id) is None and queue.job(db, none.id) is None
    assert queue.job(db, usual.id).state == "succeeded"
    assert queue.job(db, usual.id).options is None


RUN_ONCE = {"lease": 30, "until_empty": True, "handle_signals": False}
