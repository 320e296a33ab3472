"""The web dashboard without a browser: Starlette's TestClient over the in-memory database
(tests/test_dashboard_browser.py drives it in Chromium)."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip(
    "starlette", reason="the dashboard extra is not installed: pip install -e '.[dashboard-test]'"
)
pytest.importorskip(
    "httpx", reason="Starlette's TestClient needs httpx: pip install -e '.[dashboard-test]'"
)

import warnings

from click.testing import CliRunner

with warnings.catch_warnings():  # Starlette 1.x suggests httpx2 over httpx, which still works
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from fdbqueue import PriorityQueue, Queue, QueueInfo, Subspace, memory
from fdbqueue._delivery.workers import Registration
from fdbqueue.cli import cli
from fdbqueue.cli._dashboard import is_loopback
from fdbqueue.dashboard import DEAD_LETTERS_PAGE, Demo, create_app, start_demo
from fdbqueue.dashboard._demo import DEMO_BACKLOG, DEMO_DEAD_LETTERS, DEMO_TICK
from fdbqueue.dashboard._figures import Sample, Sampler, depth_svg, sample_of, shortened
from fdbqueue.dashboard._jobs import ago, moment

SCRIPT = "<script>alert(1)</script>"


def dead(queue: Queue[Any], db: Any, values: list[Any], reason: str = "failed") -> None:
    queue.enqueue_many(db, values)
    for _ in values:
        lease = queue.claim(db, 30)
        assert lease is not None
        queue.dead_letter(db, lease, reason)


@pytest.fixture
def db() -> memory.Database:
    return memory.open()


@pytest.fixture
def jobs(db: memory.Database) -> Queue[Any]:
    queue: Queue[Any] = Queue(Subspace(("jobs",)), max_deliveries=3)
    queue.enqueue_many(db, ["a", SCRIPT])
    dead(queue, db, ["x" * 5000], reason=f"ValueError: {SCRIPT}")
    return queue


@pytest.fixture
def client(db: memory.Database, jobs: Queue[Any]) -> Iterator[TestClient]:
    tasks: PriorityQueue[Any] = PriorityQueue(Subspace(("tasks",)))
    tasks.push(db, "t", 1)
    with local(create_app(db, {"jobs": jobs, "tasks": tasks})) as client:
        yield client


def local(app: Any) -> TestClient:
    """A test client whose requests name ``localhost``, a host the dashboard allows by
    default (Starlette's own ``testserver`` is refused, as any name not allowed)."""
    return TestClient(app, base_url="http://localhost")


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def letter_fields(page: str) -> dict[str, str]:
    key = re.search(r'name="key" value="([^"]+)"', page)
    ident = re.search(r'name="id" value="([^"]+)"', page)
    assert key is not None and ident is not None
    return {"key": key.group(1), "id": ident.group(1), "csrf": csrf_of(page), "name": "jobs"}


def test_the_overview_lists_every_queue_with_its_figures(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    rows = re.findall(r'<tr data-queue="([^"]+)">', page.text)
    assert rows == ["jobs", "tasks"]
    jobs_row = page.text.split('data-queue="jobs"')[1].split("</tr>")[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", jobs_row, re.S)
    assert cells[1:10] == ["Queue", "tuple", "1", "no", "2", "0", "0", "1", "0"]
    assert "PriorityQueue" in page.text
    assert 'hx-trigger="every 2s"' in page.text  # updated live
    assert page.headers["content-security-policy"].startswith("default-src 'self'")


def test_the_overview_has_a_paused_column(db: Any, jobs: Queue[Any]) -> None:
    """Issue 43 item 20: a paused queue could only be seen on its own page."""
    tasks: PriorityQueue[Any] = PriorityQueue(Subspace(("tasks",)))
    tasks.push(db, "t", 1)
    jobs.pause(db)
    with local(create_app(db, {"jobs": jobs, "tasks": tasks})) as client:
        page = client.get("/").text
        headers = re.findall(r"<th[^>]*>([^<]*)</th>", page.split('id="overview"')[1])
        assert headers[headers.index("shards") + 1] == "paused"

        def paused(name: str, text: str) -> list[str]:
            row = text.split(f'data-queue="{name}"')[1].split("</tr>")[0]
            return re.findall(r'<td class="paused (?:yes|no)">(.*?)</td>', row)

        assert (paused("jobs", page), paused("tasks", page)) == (["yes"], ["no"])
        assert "td.paused.yes" in client.get("/static/dashboard.css").text  # in red


def test_the_overview_keeps_size_in_flight_and_dead_letters_on_a_narrow_screen(
    client: TestClient,
) -> None:
    """Issue 43 item 20: at 420 px, size, in flight and dead letters were off screen, behind
    a sideways scroll. Below the stylesheet's breakpoint (which is above 420 px), the columns
    marked ``wide`` hide, in the header and in every row alike, and those figures stay;
    tests/test_dashboard_browser.py measures it in Chromium."""
    page = client.get("/").text
    table = page.split('id="overview"')[1].split("</table>")[0]
    header = re.findall(r'<th( class="wide")?[^>]*>([^<]*)</th>', table)
    kept = [name for wide, name in header if not wide]
    assert kept == ["queue", "paused", "size", "in flight", "dead letters"]
    row = table.split('data-queue="jobs"')[1].split("</tr>")[0]
    cells = re.findall(r'<td class="([^"]*)"', row)
    assert len(cells) == len(header)
    assert [(" wide" in f" {classes}") for classes in cells] == [bool(w) for w, _ in header]
    css = client.get("/static/dashboard.css").text
    query = re.search(r"@media \(max-width: (\d+)px\) \{(.*?)\n\}", css, re.S)
    assert query is not None and int(query.group(1)) >= 420
    assert "#overview .wide { display: none; }" in query.group(2)
    assert "#overview td.name { overflow-wrap: anywhere; }" in query.group(2)  # long names wrap
    for kept_class in ("name", "paused", "size", "in-flight", "dead"):  # no rule hides these
        assert not re.search(rf"\.{kept_class}\b[^{{}}]*\{{[^}}]*display: none", css), kept_class
    assert 'class="note narrow"' in page  # it says where the other figures are


def test_the_overview_fragment_and_the_static_files_are_served(client: TestClient) -> None:
    assert client.get("/fragments/overview").text.startswith("<tbody")
    htmx = client.get("/static/htmx.min.js")
    assert htmx.status_code == 200 and "Zero-Clause BSD" in htmx.text[:400]
    assert client.get("/static/htmx.LICENSE").status_code == 200


def test_values_and_reasons_are_escaped_and_long_values_shortened(client: TestClient) -> None:
    page = client.get("/queue", params={"name": "jobs"}).text
    assert SCRIPT not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "ValueError: &lt;script&gt;" in page
    assert "x" * 5000 not in page and "(5,000 characters)" in page


def test_a_queue_page_shows_shards_plot_items_and_leases(db: Any, client: TestClient) -> None:
    sharded: Queue[str] = Queue(Subspace(("sharded",)), shards=3)
    sharded.enqueue_many(db, [f"v{n}" for n in range(9)])
    lease = sharded.claim(db, 60)
    assert lease is not None
    with local(create_app(db, {"sharded": sharded})) as other:
        other.get("/queue", params={"name": "sharded"})
        page = other.get("/queue", params={"name": "sharded"}).text
    assert page.count("<th>shard ") == 3
    assert "<svg" in page and "<polyline" in page  # two samples: a line
    assert "s left" in page and lease.id[:8] in page
    assert page.count("<li><code>v") == 8


def test_requeue_one_dead_letter_changes_the_database(
    db: Any, jobs: Queue[Any], client: TestClient
) -> None:
    fields = letter_fields(client.get("/queue", params={"name": "jobs"}).text)
    answer = client.post("/actions/requeue", data=fields)
    assert answer.status_code == 200 and "requeued 1 dead letter" in answer.text
    assert jobs.info(db).dead_letters == 0 and jobs.size(db) == 3
    again = client.post("/actions/requeue", data=fields)  # gone already: nothing happens
    assert "requeued 0 dead letters" in again.text


def test_delete_one_purge_all_and_requeue_all(
    db: Any, jobs: Queue[Any], client: TestClient
) -> None:
    dead(jobs, db, ["y", "z"])
    fields = letter_fields(client.get("/queue", params={"name": "jobs"}).text)
    assert "purged 1 dead letter" in client.post("/actions/purge", data=fields).text
    assert jobs.info(db).dead_letters == 2
    everything = {"name": "jobs", "all": "1", "csrf": fields["csrf"]}
    assert "requeued 2 dead letters" in client.post("/actions/requeue", data=everything).text
    dead(jobs, db, ["w"])
    assert "purged 1 dead letter" in client.post("/actions/purge", data=everything).text
    assert jobs.info(db).dead_letters == 0


def test_a_post_without_the_csrf_token_changes_nothing(
    db: Any, jobs: Queue[Any], client: TestClient
) -> None:
    fields = letter_fields(client.get("/queue", params={"name": "jobs"}).text)
    for wrong in ({**fields, "csrf": "guess"}, {k: v for k, v in fields.items() if k != "csrf"}):
        answer = client.post("/actions/purge", data=wrong)
        assert answer.status_code == 403 and "CSRF" in answer.text
    cross = client.post("/actions/purge", data=fields, headers={"origin": "http://evil.test"})
    assert cross.status_code == 403 and "cross-origin" in cross.text
    assert client.get("/actions/purge").status_code == 405  # never a GET
    assert jobs.info(db).dead_letters == 1


def test_read_only_refuses_actions_and_shows_no_buttons(db: Any, jobs: Queue[Any]) -> None:
    with local(create_app(db, {"jobs": jobs}, read_only=True)) as client:
        page = client.get("/queue", params={"name": "jobs"}).text
        assert "read-only" in page and 'method="post"' not in page
        assert page.count("<button") == 1 and 'id="find-job"' in page  # a search, no action
        token = re.search(r'"x-csrf-token": "([^"]+)"', page)
        assert token is not None
        answer = client.post(
            "/actions/purge", data={"name": "jobs", "all": "1", "csrf": token.group(1)}
        )
    assert answer.status_code == 403 and "read-only" in answer.text
    assert jobs.info(db).dead_letters == 1


def test_a_token_is_checked_on_every_request(db: Any, jobs: Queue[Any]) -> None:
    with local(create_app(db, {"jobs": jobs}, token="s3cret")) as client:
        for path in ("/", "/queue?name=jobs", "/static/htmx.min.js", "/fragments/overview"):
            assert client.get(path).status_code == 401
        assert client.get("/?token=wrong").status_code == 401
        bearer = client.get("/", headers={"authorization": "Bearer s3cret"})
        assert bearer.status_code == 200
        first = client.get("/queue?name=jobs&token=s3cret", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/queue?name=jobs"
        assert client.get("/queue?name=jobs").status_code == 200  # the cookie carries it


def test_dead_letters_are_paged(db: Any) -> None:
    queue: Queue[Any] = Queue(Subspace(("many",)))
    dead(queue, db, [f"d{n}" for n in range(DEAD_LETTERS_PAGE * 2 + 7)])

    def next_page(page: str) -> str:
        found = re.search(r'hx-get="(/fragments/dead-letters\?[^"]+)"[^>]*id="next-page"', page)
        assert found is not None
        return found.group(1).replace("&amp;", "&")

    with local(create_app(db, {"many": queue})) as client:
        first = client.get("/queue", params={"name": "many"}).text
        second = client.get(next_page(first)).text
        last = client.get(next_page(second)).text
        wrong = client.get("/fragments/dead-letters?name=many&after=00ff&first=51").text
    assert (
        first.count('class="dead-letter"') == DEAD_LETTERS_PAGE and 'id="first-page"' not in first
    )
    assert "<code>d50</code>" in second and 'id="first-page"' in second
    assert last.count('class="dead-letter"') == 7 and 'id="next-page"' not in last
    assert f"dead letters {2 * DEAD_LETTERS_PAGE + 1} to {2 * DEAD_LETTERS_PAGE + 7}" in last
    assert "<code>d0</code>" in wrong and "dead letters 1 to 50" in wrong  # back to the first


def test_an_unknown_queue_is_a_page_saying_so(client: TestClient) -> None:
    page = client.get("/queue", params={"name": SCRIPT}).text
    assert "No such queue" in page and SCRIPT not in page


def test_create_app_checks_its_arguments(db: Any) -> None:
    with pytest.raises(TypeError):
        create_app(db, {"x": object()})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        create_app(db, {}, sample_every=0)
    with pytest.raises(ValueError):
        create_app(db, {}, token="")
    for hosts in ([], [""], ["a*.example"], ["*example.com"], ["x.*"]):
        with pytest.raises(ValueError):
            create_app(db, {}, allowed_hosts=hosts)
    for wrong in ("localhost", [b"localhost"]):
        with pytest.raises(TypeError):
            create_app(db, {}, allowed_hosts=wrong)  # type: ignore[arg-type]
    refused = CliRunner().invoke(
        cli, ["dashboard", "--queue", "jobs", "--allowed-host", "x*"], obj={"database": db}
    )
    assert refused.exit_code == 2 and "allowed host 'x*'" in refused.output


def test_the_net_rate_comes_from_successive_samples(db: Any) -> None:
    queue: Queue[int] = Queue(Subspace(("rate",)))
    now = [100.0]
    sampler = Sampler(db, {"rate": queue}, clock=lambda: now[0])
    sampler.sample_all()
    assert sampler.row("rate").growth is None
    queue.enqueue_many(db, list(range(10)))
    now[0] += 2
    sampler.sample_all()
    assert sampler.row("rate").growth == pytest.approx(5.0)


def overview(sampler: Sampler) -> str:
    """The overview's rows as the dashboard renders them from ``sampler``'s rows."""
    dashboard = create_app(sampler.database, sampler.queues).state.dashboard
    return bytes(dashboard.render("overview_rows.html", rows=sampler.rows()).body).decode()


@pytest.mark.parametrize("shards", [1, 4])
def test_the_enqueue_and_take_rates_come_from_the_enqueue_counter(db: Any, shards: int) -> None:
    queue: Queue[str] = Queue(Subspace(("rates",)), shards=shards)
    now = [100.0]
    sampler = Sampler(db, {"rates": queue}, clock=lambda: now[0])
    queue.enqueue_many(db, [f"old-{n}" for n in range(10)])
    sampler.sample_all()
    first = sampler.row("rates")
    assert first.enqueue_rate is first.take_rate is first.growth is None  # one sample
    queue.enqueue_many(db, ["new-1", "new-2", "new-3", "new-4"])
    queue.enqueue(db, "later", delay=600)  # delayed: enqueued, and held
    assert len(queue.dequeue_many(db, 2)) == 2  # taken
    lease = queue.claim(db, 30)
    assert lease is not None
    queue.ack(db, lease)  # taken
    queue.dead_letter(db, queue.claim(db, 30), "failed")  # taken
    assert queue.claim(db, 30) is not None  # in flight: still held, not taken
    now[0] += 2
    sampler.sample_all()
    row = sampler.row("rates")
    assert row.enqueue_rate == pytest.approx(5 / 2)  # four, and the delayed one
    assert row.take_rate == pytest.approx(4 / 2)  # two dequeued, one acknowledged, one dead
    assert row.growth == pytest.approx(1 / 2)
    cells = re.findall(r'<td class="n (enqueue|take|net)-rate[^"]*">(.*?)</td>', overview(sampler))
    assert cells == [("enqueue", "2.5/s"), ("take", "2.0/s"), ("net", "+0.5/s")]
    queue.requeue_dead_letters(db)  # enqueued again, and held again: no take
    now[0] += 1
    sampler.sample_all()
    row = sampler.row("rates")
    assert (row.enqueue_rate, row.take_rate, row.growth) == (1.0, 0.0, 1.0)
    queue.clear(db)  # the counter goes back to 0: no enqueue or take rate over the clear
    queue.enqueue(db, "after")
    now[0] += 1
    sampler.sample_all()
    row = sampler.row("rates")
    assert row.enqueue_rate is None and row.take_rate is None
    assert row.growth == pytest.approx(1 - 12)  # the net rate still shows: items held
    rates = r'<td class="n (?:enqueue|take)-rate[^"]*">(.*?)</td>'
    assert re.findall(rates, overview(sampler)) == [
        "-",
        "-",
    ]


def test_oldest_age_is_shown_when_queue_info_has_it() -> None:
    """Issue 32 part 1 adds QueueInfo.oldest_age; the sample takes it when it exists."""
    info = QueueInfo(size=1, oldest="a", requests_in_line=0, leases_in_flight=0,
                     expired_leases=0, dead_letters=0, delayed=0, read_version=1)  # fmt: skip
    assert sample_of(info, 0.0).oldest_age == getattr(info, "oldest_age", None)

    class ShardWithAge:
        size, leases_in_flight, delayed, dead_letters, groups, shards = 1, 0, 0, 0, 0, ()
        paused = rate_limited = False
        oldest_age, enqueued = 3.0, 1

    class WithAge(ShardWithAge):
        shards = (ShardWithAge(), ShardWithAge())
        oldest_age = 12.5

    taken = sample_of(WithAge(), 0.0)
    assert taken.oldest_age == 12.5 and [s["oldest_age"] for s in taken.shards] == [3.0, 3.0]


def test_shortened_and_the_plot() -> None:
    assert shortened("short") == "short"
    assert shortened(b"\x00") == "b'\\x00'"
    assert shortened("y" * 500).endswith("… (500 characters)")
    assert "collecting" in depth_svg([])
    samples = [Sample(float(t), t, 0, 0, 0, 0, None, (), t) for t in range(3)]
    assert depth_svg(samples).count("<polyline") == 3


def test_the_demo_workload_moves(db: Any) -> None:
    demo = Demo(db, seed=1)
    jobs = demo.queues["demo/jobs"]
    for _ in range(300):  # 30 s of the workload, no real time
        db.pass_time(DEMO_TICK)
        demo.step()
    info = jobs.info(db)
    assert info.dead_letters > 0 and info.groups > 0 and info.enqueued > 50
    assert all(queue.info(db).enqueued > 0 for queue in demo.queues.values())
    states = {job.state for job in jobs.jobs(db, limit=1000)}  # submitted as jobs
    assert {"succeeded", "dead", "running"} <= states
    assert len(demo.queues["demo/reports"].jobs(db)) == 5  # no loop runs: five wait


@pytest.mark.slow("five minutes of the demo's steps")
def test_the_demo_reaches_a_steady_state(db: Any) -> None:
    """Five minutes of the demo in steps, no real time (issue 36 saw 914 items and 665 dead
    letters after ten, growing): its backlogs and dead letters stay bounded, and are no
    larger in the second half than in the first."""
    demo = Demo(db, seed=3)
    most: dict[str, list[int]] = {name: [0, 0] for name in demo.queues}
    steps = int(300 / DEMO_TICK)
    for step in range(steps):
        db.pass_time(DEMO_TICK)
        demo.step()
        if step % 50 == 0:
            half = 0 if step < steps // 2 else 1
            for name, queue in demo.queues.items():
                info = queue.info(db)
                held = info.size + info.leases_in_flight + info.delayed
                most[name][half] = max(most[name][half], held + info.dead_letters)
                assert held <= DEMO_BACKLOG + 10 and info.dead_letters <= DEMO_DEAD_LETTERS
    for name, (first, second) in most.items():
        assert 0 < second <= max(first, 20) + 20, (name, first, second)


def test_the_demo_runs_in_a_thread_until_stopped(db: Any) -> None:
    demo = start_demo(db, seed=1)
    reports = demo.queues["demo/reports"]
    try:
        for _ in range(200):
            if demo.queues["demo/jobs"].info(db).enqueued and reports.workers(db):
                break
            time.sleep(0.05)
        assert len(reports.workers(db)) == 1  # its worker loop shows
    finally:
        demo.stop()
    assert demo.queues["demo/jobs"].info(db).enqueued > 0
    assert all(not thread.is_alive() for thread in demo.threads)
    assert reports.workers(db) == []  # the loop cleared its record as it stopped


# -- the command ------------------------------------------------------------------------------


def test_a_host_other_than_loopback_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **options: None)  # never serve here
    result = CliRunner().invoke(cli, ["--memory", "dashboard", "--demo", "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "--token" in result.output
    short = ["--memory", "dashboard", "--demo", "--host", "0.0.0.0", "--token", "x" * 15]
    result = CliRunner().invoke(cli, short)
    assert result.exit_code == 2 and "at least 16 characters" in result.output
    assert len(result.output.strip().splitlines()[-1]) < 200
    result = CliRunner().invoke(cli, [*short[:-1], "x" * 16])
    assert result.exit_code == 0, result.output
    assert "at http://localhost:8400/" in result.output and "--allowed-host" in result.output
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")


def test_the_command_needs_queues() -> None:
    result = CliRunner().invoke(cli, ["--memory", "dashboard"])
    assert result.exit_code == 2 and "--queue" in result.output


def test_the_command_serves_the_named_queues(
    db: Any, jobs: Queue[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    PriorityQueue(Subspace(("tasks",))).push(db, "t", 1)
    served: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(app=app, **options))
    result = CliRunner().invoke(
        cli,
        ["dashboard", "--queue", "jobs", "--queue", "tasks", "--port", "8411", "--read-only"],
        obj={"database": db},
    )
    assert result.exit_code == 0, result.output
    assert "2 queue(s) at http://localhost:8411/" in result.output
    assert served["port"] == 8411 and served["host"] == "127.0.0.1"
    with local(served["app"]) as client:
        page = client.get("/").text
    assert "PriorityQueue" in page and "read-only" in page  # opened as its record says


def test_queues_in_directories_with_the_fdbqueue_layer_are_found(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """On the ``fdb`` binding (over memory.install()), the command lists the queues whose
    directories carry the layer b"fdbqueue", without naming them."""
    import uvicorn
    from helpers import installed_fdb

    from fdbqueue.cli._dashboard import discovered_directories

    fdb = installed_fdb()
    database = fdb.open(str(tmp_path / "discovery.cluster"))
    found = Queue(fdb.directory.create_or_open(database, ("app", "jobs"), layer=b"fdbqueue"))
    found.enqueue(database, "a")
    deep = fdb.directory.create_or_open(database, ("app", "teams", "red"), layer=b"fdbqueue")
    PriorityQueue(deep).push(database, "p", 1)
    Queue(fdb.directory.create_or_open(database, ("app", "other"))).enqueue(database, "x")
    assert discovered_directories(database) == ["app/jobs", "app/teams/red"]
    assert discovered_directories(memory.open()) == []
    served: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(app=app))
    result = CliRunner().invoke(cli, ["dashboard"], obj={"database": database})
    assert result.exit_code == 0, result.output
    with local(served["app"]) as client:
        page = client.get("/").text
    assert re.findall(r'<tr data-queue="([^"]+)">', page) == ["app/jobs", "app/teams/red"]
    assert "PriorityQueue" in page
    refused = CliRunner().invoke(cli, ["dashboard", "--demo"], obj={"database": database})
    assert refused.exit_code == 2 and "--memory" in refused.output  # no demo on a cluster


# -- issue 36: DNS rebinding, live dead letters, missing queues, rates, values ---------------


def test_a_request_naming_a_host_not_allowed_is_refused(db: Any, jobs: Queue[Any]) -> None:
    """A page rebound to 127.0.0.1 (DNS rebinding) names its own host: refused, so it never
    reads the CSRF token."""
    with local(create_app(db, {"jobs": jobs})) as client:
        for host in ("evil.example", "evil.example:8400", "127.0.0.1.evil.example"):
            refused = client.get("/queue?name=jobs", headers={"host": host})
            assert refused.status_code == 400 and 'name="csrf"' not in refused.text
        for host in ("localhost", "localhost:8400", "127.0.0.1:8400", "[::1]:8400"):
            assert client.get("/", headers={"host": host}).status_code == 200, host
    allowed = create_app(db, {"jobs": jobs}, allowed_hosts=["dash.example"])
    with TestClient(allowed, base_url="http://dash.example") as client:
        assert client.get("/").status_code == 200
        assert client.get("/", headers={"host": "localhost"}).status_code == 400


def test_an_action_from_an_origin_not_allowed_or_null_purges_nothing(
    db: Any, jobs: Queue[Any], client: TestClient
) -> None:
    fields = letter_fields(client.get("/queue", params={"name": "jobs"}).text)
    everything = {"name": "jobs", "all": "1", "csrf": fields["csrf"]}
    for origin in ("http://evil.example", "http://evil.example:8400", "null", "file://"):
        answer = client.post("/actions/purge", data=everything, headers={"origin": origin})
        assert answer.status_code == 403 and "nothing was changed" in answer.text, origin
    assert jobs.info(db).dead_letters == 1  # nothing purged
    allowed = client.post(
        "/actions/purge", data=everything, headers={"origin": "http://localhost:8400"}
    )
    assert allowed.status_code == 200 and "purged 1 dead letter" in allowed.text


def test_the_dead_letter_list_refreshes_and_says_how_many_exist(
    db: Any, jobs: Queue[Any], client: TestClient
) -> None:
    page = client.get("/queue", params={"name": "jobs"}).text
    listing = page.split('<div id="dead-letters"')[1].split(">")[0]
    assert 'hx-trigger="every 2s"' in listing and "/fragments/dead-letters?" in listing
    dead(jobs, db, [f"late {n}" for n in range(3)])
    client.get("/fragments/queue", params={"name": "jobs"})  # the live figures: 4
    fragment = client.get("/fragments/dead-letters", params={"name": "jobs"}).text
    assert fragment.count('class="dead-letter"') == 4 and "<code>a</code>" in fragment
    assert "dead letters 1 to 4 of 4" in fragment


def test_the_dead_letter_pages_say_more_exist(db: Any) -> None:
    queue: Queue[Any] = Queue(Subspace(("more",)))
    dead(queue, db, [f"d{n}" for n in range(DEAD_LETTERS_PAGE + 2)])
    with local(create_app(db, {"more": queue})) as client:
        page = client.get("/queue", params={"name": "more"}).text
    assert f"dead letters 1 to {DEAD_LETTERS_PAGE} of {DEAD_LETTERS_PAGE + 2}" in page


def test_a_queue_that_does_not_exist_shows_as_missing(db: Any, jobs: Queue[Any]) -> None:
    nope: Queue[Any] = Queue(Subspace(("nope",)))
    with local(create_app(db, {"jobs": jobs, "nope": nope})) as client:
        overview = client.get("/").text
        page = client.get("/queue", params={"name": "nope"}).text
        nope.enqueue(db, "now it exists")
        assert "does not exist" not in client.get("/fragments/queue?name=nope").text
        later = client.get("/fragments/overview").text  # from that fresh sample
    row = overview.split('data-queue="nope"')[1].split("</tr>")[0]
    assert "does not exist" in row and 'class="n size"' not in row
    assert "does not exist" not in overview.split('data-queue="jobs"')[1].split("</tr>")[0]
    assert "does not exist" in page
    assert "does not exist" not in later.split('data-queue="nope"')[1].split("</tr>")[0]


def test_the_command_shows_a_queue_that_does_not_exist_as_missing(
    db: Any, jobs: Queue[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    served: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(app=app))
    result = CliRunner().invoke(
        cli, ["dashboard", "--queue", "jobs", "--queue", "nope"], obj={"database": db}
    )
    assert result.exit_code == 0, result.output
    with local(served["app"]) as client:
        page = client.get("/").text
    assert "does not exist" in page.split('data-queue="nope"')[1].split("</tr>")[0]


def test_rates_stay_meaningful_right_after_an_action(db: Any) -> None:
    """An action samples the queue, and the page it leads to samples it again at once: the
    rates span at least ``rate_seconds``, not the milliseconds between those two."""
    queue: Queue[int] = Queue(Subspace(("acted",)))
    now = [100.0]
    sampler = Sampler(db, {"acted": queue}, clock=lambda: now[0], rate_seconds=1.0)
    sampler.sample_all()
    queue.enqueue_many(db, list(range(10)))
    now[0] += 2
    sampler.sample_all()
    queue.enqueue_many(db, list(range(4)))
    now[0] += 0.01  # the action's sample, then the page's
    sampler.sample("acted")
    now[0] += 0.01
    sampler.sample("acted")
    row = sampler.row("acted")
    assert row.enqueue_rate == pytest.approx(14 / 2.02)
    assert row.growth == pytest.approx(14 / 2.02) and row.take_rate == pytest.approx(0)
    now[0] += 1.5  # later samples: the newest one at least rate_seconds older
    sampler.sample("acted")
    assert sampler.row("acted").enqueue_rate == pytest.approx(0)


def test_values_of_a_json_queue_show_as_json(db: Any) -> None:
    queue: Queue[Any] = Queue(Subspace(("json",)), codec="json")
    queue.enqueue_many(db, [{"job": 1, "ok": True, "note": None}, ["a", 2], "text"])
    lease = queue.claim(db, 60)
    assert lease is not None
    dead(queue, db, [{"failed": False}])
    with local(create_app(db, {"json": queue})) as client:
        page = client.get("/queue", params={"name": "json"}).text
    assert "{&#34;job&#34;: 1, &#34;ok&#34;: true, &#34;note&#34;: null}" in page  # the lease
    assert "[&#34;a&#34;, 2]" in page and "&#34;text&#34;" in page  # the next items
    assert "{&#34;failed&#34;: false}" in page  # the dead letter
    assert "True" not in page and "None" not in page and "&#39;" not in page
    assert shortened({"a": "é"}, "json") == '{"a": "é"}'
    assert shortened({"a": 1}) == "{'a': 1}"  # a tuple codec's value, as Python shows it


def test_a_priority_queue_page_shows_each_items_priority(db: Any) -> None:
    tasks: PriorityQueue[Any] = PriorityQueue(Subspace(("prio",)), shards=2)
    for value, priority in (("low", 9), ("urgent", -3), ("middle", 4), ("grouped", 1)):
        tasks.push(db, value, priority, group="g" if value == "grouped" else None)
    assert tasks.peek_many_with_priorities(db, None) == [
        (-3, "urgent"),
        (4, "middle"),
        (9, "low"),
        (1, "grouped"),
    ]
    assert [v for _p, v in tasks.peek_many_with_priorities(db, 2)] == tasks.peek_many(db, 2)
    with local(create_app(db, {"prio": tasks})) as client:
        page = client.get("/queue", params={"name": "prio"}).text
    items = re.findall(r'<li><span class="priority">(-?\d+)</span> <code>(\w+)</code>', page)
    assert items == [("-3", "urgent"), ("4", "middle"), ("9", "low"), ("1", "grouped")]


def test_a_favicon_is_served(client: TestClient) -> None:
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.startswith("<svg") and len(icon.content) < 1000
    assert '<link rel="icon" href="/favicon.ico"' in client.get("/").text


def test_the_dashboard_imports_the_public_names() -> None:
    import inspect

    import fdbqueue.dashboard._app as app_module

    source = inspect.getsource(app_module)
    assert "fdbqueue._delivery" not in source and "fdbqueue._storage.dead_letters" not in source


@pytest.mark.parametrize(
    ("options", "hosts", "refused"),
    [
        ([], ["localhost", "127.0.0.1:8400", "[::1]"], ["10.0.0.5", "dash.example"]),
        (["--allowed-host", "dash.example", "--allowed-host", "other.example"],
         ["localhost", "dash.example:8400", "other.example"], ["evil.example"]),
        (["--host", "10.0.0.5", "--token", "t" * 16], ["10.0.0.5:8400", "localhost"],
         ["dash.example"]),
    ],
)  # fmt: skip
def test_the_command_allows_the_hosts_it_is_given(
    db: Any,
    jobs: Queue[Any],
    monkeypatch: pytest.MonkeyPatch,
    options: list[str],
    hosts: list[str],
    refused: list[str],
) -> None:
    import uvicorn

    served: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **given: served.update(app=app))
    result = CliRunner().invoke(
        cli, ["dashboard", "--queue", "jobs", *options], obj={"database": db}
    )
    assert result.exit_code == 0, result.output
    bearer = {"authorization": "Bearer " + "t" * 16}
    with local(served["app"]) as client:
        for host in hosts:
            assert client.get("/", headers={"host": host, **bearer}).status_code == 200, host
        for host in refused:
            assert client.get("/", headers={"host": host, **bearer}).status_code == 400, host


# -- issue 38: jobs ---------------------------------------------------------------------------


def failed(error: Exception) -> Exception:
    """``error`` raised and caught, so that it carries a traceback."""
    try:
        raise error
    except Exception as caught:
        return caught


@pytest.fixture
def work(db: memory.Database) -> dict[str, Any]:
    """A JSON queue of jobs in every state the queue's page lists, and a PriorityQueue's."""
    queue: Queue[Any] = Queue(Subspace(("work",)), codec="json", max_deliveries=3)
    tasks: PriorityQueue[Any] = PriorityQueue(Subspace(("prio",)))
    made = {name: queue.submit(db, {"n": name}) for name in ("done", "retry", "running")}
    leases = {name: queue.claim(db, 60) for name in ("done", "retry", "running")}
    made["value"] = queue.submit(db, {"text": SCRIPT}, group="acme")
    made["later"] = queue.submit(db, "later", delay=600)
    assert all(
        lease is not None and lease.job_id == made[name].id for name, lease in leases.items()
    )
    queue.ack(db, leases["done"], result={"html": SCRIPT})
    queue.release(db, leases["retry"], delay=300, error=failed(ValueError(f"bad {SCRIPT}")))
    priority = tasks.submit(db, "p", priority=3)
    assert all(job is not None for job in (*made.values(), priority))
    return {"queue": queue, "tasks": tasks, "jobs": made, "priority": priority}


@pytest.fixture
def jobs_client(db: memory.Database, work: dict[str, Any]) -> Iterator[TestClient]:
    with local(create_app(db, {"work": work["queue"], "prio": work["tasks"]})) as client:
        yield client


def job_page(client: TestClient, ident: str, name: str = "work") -> Any:
    return client.get("/job", params={"name": name, "id": ident})


def test_a_queue_page_lists_running_retrying_delayed_and_finished_jobs(
    work: dict[str, Any], jobs_client: TestClient
) -> None:
    made = work["jobs"]
    page = jobs_client.get("/queue", params={"name": "work"}).text
    fragment = jobs_client.get("/fragments/jobs", params={"name": "work"}).text
    assert fragment.startswith('<div id="jobs"') and 'hx-trigger="every 2s"' in fragment

    def listed(table: str, text: str = page) -> list[str]:
        body = text.split(f'id="{table}"')[1].split("</table>")[0]
        return re.findall(r'<tr class="job" data-id="([0-9a-f]+)">', body)

    for text in (page, fragment):
        assert listed("running-jobs", text) == [made["running"].id]
        assert sorted(listed("waiting-jobs", text)) == sorted([made["retry"].id, made["later"].id])
        assert listed("finished-jobs", text) == [made["done"].id]
    waiting = page.split('id="waiting-jobs"')[1].split("</table>")[0]
    assert ">retrying<" in waiting and ">delayed<" in waiting and "in 5." in waiting
    assert f"ValueError: bad {SCRIPT}" not in page and "ValueError: bad &lt;script&gt;" in waiting
    finished = page.split('id="finished-jobs"')[1].split("</table>")[0]
    assert "succeeded" in finished and "&#34;html&#34;: &#34;&lt;script&gt;" in finished
    link = f'href="/job?name=work&amp;id={made["running"].id}"'
    assert link in page  # each id opens its job's page
    assert 'id="job-search"' in page and 'action="/job"' in page
    assert "(no worker online)" in page


def test_a_job_that_succeeded_after_a_failure_shows_its_result_not_its_old_error(
    db: Any,
) -> None:
    """Issue 43 item 20: "Recently finished" showed a succeeded job's last error, in red, as
    its outcome. A dead job still shows its error."""
    queue: Queue[Any] = Queue(Subspace(("retried",)), codec="json", max_deliveries=3)
    error = failed(ConnectionError("the warehouse did not answer"))
    recovered = queue.submit(db, {"n": 1})
    assert recovered is not None
    for outcome in ("released", "acknowledged"):
        lease = queue.claim(db, 60)
        assert lease is not None and lease.job_id == recovered.id
        if outcome == "released":
            queue.release(db, lease, error=error)
        else:
            queue.ack(db, lease, result={"rows": 13})
    failing = queue.submit(db, {"n": 2})
    lease = queue.claim(db, 60)
    assert failing is not None and lease is not None and lease.job_id == failing.id
    queue.dead_letter(db, lease, "gave up", error=error)
    assert queue.job(db, recovered.id).error is not None  # the record keeps the old error
    with local(create_app(db, {"retried": queue})) as client:
        page = client.get("/fragments/jobs", params={"name": "retried"}).text
    finished = page.split('id="finished-jobs"')[1].split("</table>")[0]

    def outcome(job_id: str) -> str:
        row = finished.split(f'data-id="{job_id}"')[1].split("</tr>")[0]
        found = re.search(r'<td class="outcome">(.*?)</td>', row)
        assert found is not None
        return found.group(1)

    assert outcome(recovered.id) == "<code>{&#34;rows&#34;: 13}</code>"
    assert 'class="error-text"' in outcome(failing.id)
    assert "ConnectionError: the warehouse did not answer" in outcome(failing.id)
    # its own page: the old failure as what it was, not in red as the job's error
    with local(create_app(db, {"retried": queue})) as client:
        recovered_page = client.get("/job", params={"name": "retried", "id": recovered.id}).text
        failing_page = client.get("/job", params={"name": "retried", "id": failing.id}).text
    assert "Last failure (retried, then succeeded)" in recovered_page
    assert '<strong class="retried">ConnectionError</strong>' in recovered_page
    assert '<strong class="error">ConnectionError</strong>' in failing_page


def test_a_job_whose_result_was_not_kept_says_why_on_its_page(db: Any) -> None:
    queue: Queue[Any] = Queue(Subspace(("unkept",)), codec="json")
    job = queue.submit(db, "v")
    lease = queue.claim(db, 60)
    assert job is not None and lease is not None
    queue.ack(db, lease, result={1, 2})  # a set: the result codec cannot keep it
    with local(create_app(db, {"unkept": queue})) as client:
        page = client.get("/job", params={"name": "unkept", "id": job.id}).text
    assert '<p class="error-text" id="job-result">result not kept' in page


def test_workers_online_show_with_their_running_jobs(db: Any) -> None:
    queue: Queue[Any] = Queue(Subspace(("worked",)), codec="json")
    job = queue.submit(db, {"slow": True})
    assert job is not None
    started, release, stop = threading.Event(), threading.Event(), threading.Event()

    def handler(value: Any) -> str:
        started.set()
        release.wait(10)
        return "done"

    loop = threading.Thread(
        target=queue.work,
        args=(db, handler),
        kwargs={"stop": stop, "lease": 30, "handle_signals": False},
    )
    loop.start()
    try:
        assert started.wait(10)
        with local(create_app(db, {"worked": queue})) as client:
            for _ in range(100):  # the loop's record lists the job at its next beat
                page = client.get("/fragments/jobs", params={"name": "worked"}).text
                if job.id in page.split('id="workers"')[1]:
                    break
                time.sleep(0.1)
        workers = page.split('id="workers"')[1].split("</table>")[0]
        assert workers.count('<tr class="worker"') == 1 and str(os.getpid()) in workers
        assert f"id={job.id}" in workers  # its running job, a link to the job's page
        assert job.id in page.split('id="running-jobs"')[1].split("</table>")[0]
    finally:
        release.set()
        stop.set()
        loop.join(10)
    assert queue.job(db, job.id).state == "succeeded"


def test_a_workers_abandoned_handlers_show_on_the_queue_page(db: Any) -> None:
    queue: Queue[Any] = Queue(Subspace(("abandoning",)))
    hung = [queue.submit(db, "hung").id, "ab" * 16]
    registration = Registration(queue._worker_registry, db, lambda: (4, []), lambda: hung)
    assert registration.register()
    with local(create_app(db, {"abandoning": queue})) as client:
        for path in ("/queue", "/fragments/jobs"):
            page = client.get(path, params={"name": "abandoning"}).text
            workers = page.split('id="workers"')[1].split("</table>")[0]
            assert "<th>abandoned</th>" in workers
            assert "2 past the time limit, still running:" in workers
            for job in hung:  # each a link to the job's page
                assert f'href="/job?name=abandoning&amp;id={job}"' in workers
    registration.deregister()
    Registration(queue._worker_registry, db, lambda: (0, [])).register()
    with local(create_app(db, {"abandoning": queue})) as client:
        page = client.get("/fragments/jobs", params={"name": "abandoning"}).text
    workers = page.split('id="workers"')[1].split("</table>")[0]
    assert "past the time limit" not in workers and hung[0] not in workers


def test_a_job_page_shows_value_state_times_error_and_result_as_text(
    work: dict[str, Any], jobs_client: TestClient
) -> None:
    made = work["jobs"]
    retry = job_page(jobs_client, made["retry"].id)
    assert retry.status_code == 200
    text = retry.text
    assert 'id="job-state">retrying<' in text and 'id="job-deliveries">1<' in text
    assert " UTC (" in text and 'id="job-due"' in text
    assert "ValueError</strong>: bad &lt;script&gt;alert(1)&lt;/script&gt;" in text
    traceback = text.split('id="job-traceback">')[1].split("</pre>")[0]
    lines = re.findall(r'<span class="line">(.*?)</span>', traceback)
    assert lines[0] == "Traceback (most recent call last):" and "test_dashboard.py" in lines[1]
    assert lines[-1] == "ValueError: bad &lt;script&gt;alert(1)&lt;/script&gt;"
    assert '<pre id="job-value"><code>{\n  &#34;n&#34;: &#34;retry&#34;\n}' in text  # held
    assert 'id="cancel-job"' in text and 'hx-trigger="every 2s"' in text  # live until it ends
    done = job_page(jobs_client, made["done"].id).text
    assert 'id="job-state">succeeded<' in done and "(none)" in done
    assert '<pre id="job-result"><code>{\n  &#34;html&#34;: &#34;&lt;script&gt;' in done
    assert 'id="no-value">(gone' in done and 'id="cancel-job"' not in done
    assert "hx-trigger" not in done.split('<div id="job"')[1].split(">")[0]  # finished: still
    value = job_page(jobs_client, made["value"].id).text
    assert 'id="job-state">waiting<' in value and 'id="job-group">acme<' in value
    assert "&#34;text&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in value  # ready
    assert SCRIPT not in value
    later = job_page(jobs_client, made["later"].id).text
    assert 'id="job-state">delayed<' in later and "&#34;later&#34;" in later  # delayed
    assert "&#34;running&#34;" in job_page(jobs_client, made["running"].id).text  # leased
    prio = job_page(jobs_client, work["priority"].id, "prio").text
    assert 'id="job-priority">3<' in prio and "<code>p</code>" in prio  # a tuple codec's value
    fragment = jobs_client.get("/fragments/job", params={"name": "work", "id": made["done"].id})
    assert fragment.text.startswith('<div id="job"') and "<html" not in fragment.text


def test_a_dead_job_shows_its_reason_and_its_value(db: Any) -> None:
    queue: Queue[Any] = Queue(Subspace(("dying",)), codec="json")
    job = queue.submit(db, ["<b>", 1])
    lease = queue.claim(db, 30)
    assert job is not None and lease is not None
    queue.dead_letter(db, lease, f"gave up: {SCRIPT}")
    with local(create_app(db, {"dying": queue})) as client:
        page = job_page(client, job.id, "dying").text
    assert 'id="job-state">dead<' in page and "gave up: &lt;script&gt;" in page
    assert '<pre id="job-value"><code>[\n  &#34;&lt;b&gt;&#34;,\n  1\n]' in page  # dead letter
    assert SCRIPT not in page and 'id="cancel-job"' not in page


def test_searching_a_job_id_answers_clearly(work: dict[str, Any], jobs_client: TestClient) -> None:
    made = work["jobs"]
    found = job_page(jobs_client, f"  {made['done'].id} ")  # pasted with spaces
    assert found.status_code == 200 and made["done"].id in found.text
    for wrong in ("nope", SCRIPT, "0" * 31, "z" * 32, ""):
        answer = job_page(jobs_client, wrong)
        assert answer.status_code == 400, wrong
        assert "Not a job id" in answer.text and SCRIPT not in answer.text
        assert 'id="job-search"' in answer.text  # search again
    other = job_page(jobs_client, work["priority"].id)  # a job of the dashboard's other queue
    assert other.status_code == 404 and "is a job of queue prio" in other.text
    assert f'href="/job?name=prio&amp;id={work["priority"].id}"' in other.text
    foreign: Queue[Any] = Queue(Subspace(("elsewhere",)))
    stranger = foreign.submit(jobs_client.app.state.dashboard.database, "x")
    assert stranger is not None
    unseen = job_page(jobs_client, stranger.id)  # a queue the dashboard does not show
    assert unseen.status_code == 404 and "a job of another queue, not of work" in unseen.text
    missing = made["done"].id[:8] + "0" * 24  # this queue's, never submitted
    gone = job_page(jobs_client, missing)
    assert gone.status_code == 404 and "No job" in gone.text and "result_ttl" in gone.text
    assert "No such queue" in job_page(jobs_client, made["done"].id, "nope").text
    live = jobs_client.get("/fragments/job", params={"name": "work", "id": missing})
    assert live.status_code == 404 and "No job" in live.text


def test_cancel_needs_the_csrf_token_and_cancels(
    db: Any, work: dict[str, Any], jobs_client: TestClient
) -> None:
    queue, made = work["queue"], work["jobs"]
    page = job_page(jobs_client, made["value"].id).text
    fields = {"name": "work", "id": made["value"].id, "csrf": csrf_of(page)}
    for wrong in ({**fields, "csrf": "guess"}, {k: v for k, v in fields.items() if k != "csrf"}):
        answer = jobs_client.post("/actions/cancel", data=wrong)
        assert answer.status_code == 403 and "CSRF" in answer.text
    cross = jobs_client.post("/actions/cancel", data=fields, headers={"origin": "http://evil.test"})
    assert cross.status_code == 403 and "cross-origin" in cross.text
    assert jobs_client.get("/actions/cancel").status_code == 405  # never a GET
    assert queue.job(db, made["value"].id).state == "waiting"  # nothing changed
    answer = jobs_client.post("/actions/cancel", data=fields, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"].startswith("/job?name=work")
    shown = jobs_client.get(answer.headers["location"]).text
    assert 'id="done">cancel requested' in shown and 'id="job-state">cancelled<' in shown
    assert 'id="cancel-job"' not in shown
    assert queue.job(db, made["value"].id).state == "cancelled"
    again = jobs_client.post("/actions/cancel", data=fields)
    assert "nothing cancelled" in again.text
    running = {**fields, "id": made["running"].id}  # running: not retried once it ends
    shown = jobs_client.post("/actions/cancel", data=running).text
    assert 'id="cancel-requested"' in shown and 'id="job-state">running<' in shown
    assert queue.job(db, made["running"].id).cancel_requested
    for bad in ("nope", work["priority"].id):
        refused = jobs_client.post("/actions/cancel", data={**fields, "id": bad})
        assert refused.status_code == 400 and "nothing was changed" in refused.text
    assert jobs_client.post("/actions/cancel", data={**fields, "name": "x"}).status_code == 400


def test_read_only_refuses_cancel_and_shows_no_cancel_button(db: Any, work: dict[str, Any]) -> None:
    queue, made = work["queue"], work["jobs"]
    with local(create_app(db, {"work": queue}, read_only=True)) as client:
        page = job_page(client, made["value"].id).text
        assert 'id="job-state">waiting<' in page and "<button" not in page
        token = re.search(r'"x-csrf-token": "([^"]+)"', page)
        assert token is not None
        answer = client.post(
            "/actions/cancel", data={"name": "work", "id": made["value"].id, "csrf": token.group(1)}
        )
    assert answer.status_code == 403 and "read-only" in answer.text
    assert queue.job(db, made["value"].id).state == "waiting"


def test_job_times_are_told_by_fdbqueues_clock(db: Any) -> None:
    """The job records' times come from fdbqueue's clock, which the in-memory database's
    pass_time moves on: the page tells "ago" by the same clock."""
    queue: Queue[Any] = Queue(Subspace(("clocked",)))
    db.pass_time(3600)
    job = queue.submit(db, "x")
    assert job is not None
    with local(create_app(db, {"clocked": queue})) as client:
        page = job_page(client, job.id, "clocked").text
    enqueued = page.split("<th>enqueued</th><td>")[1].split("</td>")[0]
    assert enqueued.endswith(" s ago)") and "in " not in enqueued
    assert moment(None) == ago(None) == "-"
    assert ago(100.0, now=400.0) == "5.0 min ago" and ago(100.0, now=40.0) == "in 60.0 s"
    assert moment(0.0, now=259_200.0) == "1970-01-01 00:00:00 UTC (3.0 days ago)"


def test_a_queue_page_shows_its_schedules_with_next_due_last_run_and_runs(db: Any) -> None:
    """Issue 45: the schedules view: each schedule, its timing, its next due time (ahead),
    its last run (none before the first) and how many runs were enqueued."""
    queue: Queue[Any] = Queue(Subspace(("scheduled",)), codec="json")
    queue.schedule(db, "hourly", {"report": "sales"}, every=3600)
    queue.schedule(db, "nightly", {"report": "backup"}, cron="0 3 * * *")
    with local(create_app(db, {"scheduled": queue})) as client:
        page = client.get("/queue", params={"name": "scheduled"}).text
        fragment = client.get("/fragments/jobs", params={"name": "scheduled"}).text
    for shown in (page, fragment):
        table = shown.split('id="schedules"')[1].split("</table>")[0]
        rows = table.split('<tr class="schedule"')[1:]
        assert [row.split('data-name="')[1].split('"')[0] for row in rows] == ["hourly", "nightly"]
        assert "3600 s" in rows[0] and "<code>0 3 * * *</code> (UTC)" in rows[1]
        assert all('<td class="when">in ' in row for row in rows)  # due ahead
        assert all('<td class="when">-</td><td class="n">0</td>' in row for row in rows)
        assert "sales" in rows[0] and "backup" in rows[1]
    empty: Queue[Any] = Queue(Subspace(("unscheduled",)), codec="json")
    with local(create_app(db, {"unscheduled": empty})) as client:
        assert "(no schedule)" in client.get("/fragments/jobs", params={"name": "unscheduled"}).text


def test_a_deferred_job_shows_what_it_waits_for(db: Any) -> None:
    """Issue 45: a job submitted ``after=`` another is listed as deferred, with the job it
    waits for, on the queue's page and on its own."""
    queue: Queue[Any] = Queue(Subspace(("chained",)), codec="json")
    first = queue.submit(db, {"n": 1})
    assert first is not None
    child = queue.submit(db, {"n": 2}, after=[first])
    assert child is not None
    with local(create_app(db, {"chained": queue})) as client:
        fragment = client.get("/fragments/jobs", params={"name": "chained"}).text
        job_page = client.get("/job", params={"name": "chained", "id": child.id}).text
    waiting = fragment.split('id="waiting-jobs"')[1].split("</table>")[0]
    row = waiting.split(f'data-id="{child.id}"')[1].split("</tr>")[0]
    assert "deferred" in row and "waits for" in row and f"id={first.id}" in row
    facts = job_page.split('id="job-waiting-for"')[1].split("</td>")[0]
    assert f"id={first.id}" in facts


def test_a_queue_page_says_when_its_rate_limit_holds_jobs_back(db: Any) -> None:
    """Issue 45: the rate-limited state, on a queue the dashboard opened without the limit."""
    from test_rate_limit import hold_back

    subspace = Subspace(("limited",))
    hold_back(db, subspace)
    viewer: Queue[Any] = Queue(subspace, codec="json")
    with local(create_app(db, {"limited": viewer})) as client:
        page = client.get("/queue", params={"name": "limited"}).text
    assert 'id="rate-limited"' in page
    free: Queue[Any] = Queue(Subspace(("free",)), codec="json")
    free.enqueue(db, {"n": 1})
    with local(create_app(db, {"free": free})) as client:
        assert 'id="rate-limited"' not in client.get("/queue", params={"name": "free"}).text
