"""The web dashboard in a real browser: Playwright driving Debian's Chromium
(``apt-get install chromium``; Playwright's own browser download is not used), over uvicorn
serving :func:`fdbqueue.dashboard.create_app` on the in-memory database in this process.

Skipped, saying why, when the dashboard extra, Playwright or Chromium is missing. The
screenshots in docs/_static/ (shown in docs/dashboard.rst) are made by these tests: written
there when ``FDBQUEUE_SCREENSHOTS=1`` is set, else into the test's temporary directory (so a
test run leaves the checkout as it was).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest


def unavailable(reason: str) -> None:
    """Skip this module, saying why; fail it instead under FDBQUEUE_REQUIRE_BROWSER=1 (CI)."""
    if os.environ.get("FDBQUEUE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"FDBQUEUE_REQUIRE_BROWSER=1, but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


EXTRA = "pip install -e '.[dashboard-test]'"
for needed in ("starlette", "uvicorn", "jinja2"):
    if importlib.util.find_spec(needed) is None:
        unavailable(f"the dashboard extra is not installed ({needed} is missing): {EXTRA}")
if importlib.util.find_spec("playwright") is None:
    unavailable(
        f"Playwright is not installed: {EXTRA} (the browser is Debian's chromium, apt-get "
        "install chromium; no 'playwright install')"
    )
CHROMIUM = os.environ.get("FDBQUEUE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    unavailable(
        f"no Chromium at {CHROMIUM}: apt-get install chromium (or set FDBQUEUE_CHROMIUM) to run "
        "the dashboard's browser tests"
    )

import uvicorn  # noqa: E402 - after the checks above, which say what is missing
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright  # noqa: E402

from fdbqueue import PriorityQueue, Queue, Subspace, memory  # noqa: E402
from fdbqueue.dashboard import create_app, start_demo  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "docs" / "_static"
SCRIPT = "<script>alert(1)</script>"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # evil.example is 127.0.0.1, as a DNS rebinding attacker makes it (issue 36)
    "--host-resolver-rules=MAP evil.example 127.0.0.1",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Served:
    """An ASGI application served by uvicorn in a thread of this process."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    running: list[Served] = []

    def start(database: Any, queues: dict[str, Any], **options: Any) -> Served:
        served = Served(create_app(database, queues, sample_every=0.5, **options))
        running.append(served)
        return served

    yield start
    for served in running:
        served.stop()


def with_dead_letters(db: Any) -> Queue[Any]:
    jobs: Queue[Any] = Queue(Subspace(("jobs",)), max_deliveries=3)
    jobs.enqueue_many(db, ["first job", SCRIPT])
    jobs.enqueue_many(db, ["broken 1", "broken 2"])
    for _ in range(2):
        lease = jobs.claim(db, 30)
        assert lease is not None
        jobs.ack(db, lease)
    for _ in range(2):
        lease = jobs.claim(db, 30)
        assert lease is not None
        jobs.dead_letter(db, lease, f"ValueError: {lease.value} failed {SCRIPT}")
    jobs.enqueue(db, "waiting")
    return jobs


class Dialogs:
    """Every dialog the page opens, answered ``accept`` (True: OK), its message kept."""

    def __init__(self, page: Page, accept: bool = True) -> None:
        self.accept = accept
        self.seen: list[str] = []
        page.on("dialog", self.answer)

    def answer(self, dialog: Dialog) -> None:
        self.seen.append(dialog.message)
        if self.accept:
            dialog.accept()
        else:
            dialog.dismiss()


def test_overview_to_queue_to_dead_letters_then_requeue_changes_the_database(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs = with_dead_letters(db)
    served = serve(db, {"jobs": jobs, "tasks": PriorityQueue(Subspace(("tasks",)))})
    dialogs = Dialogs(page, accept=False)
    page.goto(served.url + "/")
    row = page.locator('tr[data-queue="jobs"]')
    expect(row.locator("td.dead")).to_have_text("2")
    row.get_by_role("link", name="jobs").click()
    expect(page.get_by_role("heading", name="jobs", exact=True)).to_be_visible()
    letters = page.locator("#dead-letter-list tr.dead-letter")
    expect(letters).to_have_count(2)
    first = letters.first
    expect(first.locator("td.value")).to_have_text("broken 1")
    # dismissed: the confirmation keeps the database as it was
    first.get_by_role("button", name="Requeue").click()
    assert dialogs.seen == ["Requeue this dead letter?"]
    assert jobs.info(db).dead_letters == 2
    dialogs.accept = True
    first.get_by_role("button", name="Requeue").click()
    expect(page.locator("#done")).to_have_text("requeued 1 dead letter")
    assert dialogs.seen == ["Requeue this dead letter?"] * 2
    assert jobs.info(db).dead_letters == 1
    assert jobs.peek_many(db, None) == ["waiting", "broken 1"]
    expect(page.locator("#dead-letter-list tr.dead-letter")).to_have_count(1)
    # then purge all, confirmed
    page.get_by_role("button", name="Purge all").click()
    expect(page.locator("#done")).to_have_text("purged 1 dead letter")
    assert dialogs.seen[-1] == "Purge ALL dead letters of jobs, for good?"
    assert jobs.info(db).dead_letters == 0


def test_the_overview_and_a_queue_page_update_live_without_a_reload(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs: Queue[str] = Queue(Subspace(("live",)))
    served = serve(db, {"live": jobs})
    page.goto(served.url + "/")
    size = page.locator('tr[data-queue="live"] td.size')
    missing = page.locator('tr[data-queue="live"] td.missing')
    expect(missing).to_contain_text("does not exist")  # nothing written yet
    page.evaluate("window.notReloaded = true")
    jobs.enqueue_many(db, [f"item {n}" for n in range(7)])
    expect(size).to_have_text("7", timeout=10_000)
    expect(missing).to_have_count(0)
    assert page.evaluate("window.notReloaded") is True  # the same page, updated in place
    page.goto(served.url + "/queue?name=live")
    page.evaluate("window.notReloaded = true")
    lease = jobs.claim(db, 60)
    assert lease is not None
    expect(page.locator("#leases")).to_contain_text("s left", timeout=10_000)
    expect(page.locator("#items li")).to_have_count(6)
    expect(page.locator("svg.depth polyline").first).to_be_attached()
    assert page.evaluate("window.notReloaded") is True


def test_a_script_in_a_value_or_reason_shows_as_text(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs = with_dead_letters(db)
    jobs.enqueue(db, SCRIPT)
    served = serve(db, {SCRIPT: jobs})
    dialogs = Dialogs(page)
    page.goto(served.url + "/")
    expect(page.get_by_role("link", name=SCRIPT)).to_be_visible()  # the queue's name
    page.get_by_role("link", name=SCRIPT).click()
    expect(page.locator("#items")).to_contain_text(SCRIPT)
    expect(page.locator("#dead-letter-list td.reason").first).to_contain_text(SCRIPT)
    time.sleep(2.5)  # a live update or two
    assert dialogs.seen == []  # no alert ever ran
    assert page.locator("main script").count() == 0


def test_a_post_without_the_csrf_token_or_from_another_site_is_refused(
    page: Page, serve: Callable[..., Served], tmp_path: pathlib.Path
) -> None:
    db = memory.open()
    jobs = with_dead_letters(db)
    served = serve(db, {"jobs": jobs})
    page.goto(served.url + "/queue?name=jobs")
    status = page.evaluate(
        """async () => {
            const form = new FormData();
            form.append("name", "jobs"); form.append("all", "1");
            const answer = await fetch("/actions/purge", {method: "POST", body: form});
            return [answer.status, await answer.text()];
        }"""
    )
    assert status[0] == 403 and "CSRF" in status[1]
    # another site's page that posts a form to the dashboard, as a CSRF attack would
    (tmp_path / "attack.html").write_text(
        f'<form id="f" method="post" action="{served.url}/actions/purge">'
        '<input name="name" value="jobs"><input name="all" value="1">'
        '<input name="csrf" value="guessed"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )
    attacker = Served(StaticSite(tmp_path))
    try:
        page.goto(f"{attacker.url}/attack.html")
        expect(page.locator("body")).to_contain_text("403")
    finally:
        attacker.stop()
    assert jobs.info(db).dead_letters == 2  # nothing purged


class StaticSite:
    """A minimal ASGI application serving one folder's files (the attacker's site)."""

    def __init__(self, folder: pathlib.Path) -> None:
        self.folder = folder

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = self.folder / scope["path"].lstrip("/")
        body = path.read_bytes() if path.is_file() else b"not found"
        await send(
            {
                "type": "http.response.start",
                "status": 200 if path.is_file() else 404,
                "headers": [(b"content-type", b"text/html")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def test_read_only_shows_no_buttons_and_refuses_posts(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs = with_dead_letters(db)
    served = serve(db, {"jobs": jobs}, read_only=True)
    page.goto(served.url + "/queue?name=jobs")
    expect(page.locator("#read-only")).to_be_visible()
    expect(page.locator("#dead-letter-list tr.dead-letter")).to_have_count(2)
    assert page.locator("button:not(#find-job)").count() == 0  # a search, no action
    status = page.evaluate(
        """async () => {
            const token = JSON.parse(document.body.getAttribute("hx-headers"))["x-csrf-token"];
            const form = new FormData();
            form.append("name", "jobs"); form.append("all", "1"); form.append("csrf", token);
            const answer = await fetch("/actions/purge", {method: "POST", body: form});
            return [answer.status, await answer.text()];
        }"""
    )
    assert status[0] == 403 and "read-only" in status[1]
    assert jobs.info(db).dead_letters == 2


def test_screenshots_of_the_demo_for_the_docs(
    page: Page, serve: Callable[..., Served], tmp_path: pathlib.Path
) -> None:
    """docs/dashboard.rst shows these: the demo workload's overview and its jobs queue."""
    shots = SCREENSHOTS if os.environ.get("FDBQUEUE_SCREENSHOTS") == "1" else tmp_path
    db = memory.open()
    demo = start_demo(db, seed=7)
    try:
        served = serve(db, demo.queues)
        page.goto(served.url + "/")
        dead = page.locator('tr[data-queue="demo/jobs"] td.dead')
        expect(dead).not_to_have_text("0", timeout=15_000)
        time.sleep(5)  # a few samples for the rates and the plot
        shots.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1160, "height": 300})  # the table, not blank space
        page.screenshot(path=str(shots / "dashboard-overview.png"))
        page.set_viewport_size({"width": 1280, "height": 900})
        page.get_by_role("link", name="demo/jobs").click()
        time.sleep(5)
        expect(page.locator("#dead-letter-list tr.dead-letter").first).to_be_visible()
        page.screenshot(path=str(shots / "dashboard-queue.png"), full_page=True)
        # a report job that failed at least once: its error, traceback and value
        reports = demo.queues["demo/reports"]
        failed: list[Any] = []
        deadline = time.monotonic() + 60
        while not failed and time.monotonic() < deadline:
            failed = [job for job in reports.jobs(db, limit=1000) if job.error and job.result]
            failed = failed or [job for job in reports.jobs(db, state="retrying")]
            time.sleep(0.5)
        assert failed, "no report failed within a minute"
        page.goto(served.url + "/queue?name=demo/reports")
        expect(page.locator("#workers tr.worker")).to_have_count(1)
        page.locator(f'a.job-link[title="{failed[0].id}"]').first.click()
        expect(page.locator("#job-traceback")).to_contain_text("Error")
        page.screenshot(path=str(shots / "dashboard-job.png"), full_page=True)
    finally:
        demo.stop()
    assert (shots / "dashboard-overview.png").stat().st_size > 10_000
    assert (shots / "dashboard-queue.png").stat().st_size > 10_000
    assert (shots / "dashboard-job.png").stat().st_size > 10_000


def test_with_a_token_the_page_needs_it_once_then_updates_live(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs: Queue[str] = Queue(Subspace(("guarded",)))
    jobs.enqueue(db, "taken")
    assert jobs.dequeue(db) == "taken"  # the queue exists, and is empty
    served = serve(db, {"guarded": jobs}, token="s3cret")
    answer = page.goto(served.url + "/")
    assert answer is not None and answer.status == 401
    page.goto(served.url + "/?token=s3cret")
    assert page.url == served.url + "/"  # the token left the address bar for a cookie
    size = page.locator('tr[data-queue="guarded"] td.size')
    expect(size).to_have_text("0")
    jobs.enqueue(db, "x")
    expect(size).to_have_text("1", timeout=10_000)  # htmx's polls carry the cookie


# -- issue 36 ---------------------------------------------------------------------------------


def test_a_page_rebound_to_the_dashboard_reads_nothing_and_changes_nothing(
    page: Page, serve: Callable[..., Served], tmp_path: pathlib.Path
) -> None:
    """DNS rebinding: Chromium resolves evil.example to 127.0.0.1 (``ARGS``), as a rebinding
    attacker's DNS would. A page of evil.example on the dashboard's port is refused (400),
    so it never reads the CSRF token; and a form carrying the real token (as if it had
    leaked) is refused from evil.example's origin and from a sandboxed frame's (``Origin:
    null``)."""
    db = memory.open()
    jobs = with_dead_letters(db)
    served = serve(db, {"jobs": jobs})
    rebound = page.goto(f"http://evil.example:{served.port}/queue?name=jobs")
    assert rebound is not None and rebound.status == 400
    assert 'name="csrf"' not in page.content()
    page.goto(served.url + "/queue?name=jobs")
    token = page.locator('input[name="csrf"]').first.get_attribute("value")
    form = (
        f'<form method="post" action="{served.url}/actions/purge">'
        '<input name="name" value="jobs"><input name="all" value="1">'
        f'<input name="csrf" value="{token}"><button id="go">go</button></form>'
    )
    (tmp_path / "attack.html").write_text(
        f'{form}<iframe id="sandboxed" sandbox="allow-forms" srcdoc=\'{form}\'></iframe>'
    )
    attacker = Served(StaticSite(tmp_path))
    try:
        page.goto(f"http://evil.example:{attacker.port}/attack.html")
        for button, origin in (
            (page.frame_locator("#sandboxed").locator("#go"), "null"),
            (page.locator("#go"), f"http://evil.example:{attacker.port}"),
        ):
            with page.expect_response(lambda answer: "/actions/purge" in answer.url) as sent:
                button.click()
            assert sent.value.request.headers["origin"] == origin
            assert sent.value.status == 403  # (the frame shows no answer: framing is denied)
        expect(page.locator("body")).to_contain_text("403: cross-origin request refused")
    finally:
        attacker.stop()
    assert jobs.info(db).dead_letters == 2  # nothing purged


def test_the_dead_letter_list_follows_the_count_without_a_reload(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs = with_dead_letters(db)
    served = serve(db, {"jobs": jobs})
    page.goto(served.url + "/queue?name=jobs")
    letters = page.locator("#dead-letter-list tr.dead-letter")
    expect(letters).to_have_count(2)
    page.evaluate("window.notReloaded = true")
    jobs.enqueue_many(db, [f"late {n}" for n in range(3)])
    for _ in range(3):
        lease = jobs.claim(db, 30)
        assert lease is not None
        jobs.dead_letter(db, lease, "failed late")
    expect(page.locator("#figures td.dead")).to_have_text("5", timeout=10_000)
    expect(letters).to_have_count(5, timeout=10_000)
    expect(page.locator("#dead-letters p.pages")).to_contain_text("dead letters 1 to 5 of 5")
    assert page.evaluate("window.notReloaded") is True


def test_the_pages_fit_a_narrow_screen(page: Page, serve: Callable[..., Served]) -> None:
    """At 420 px wide, the page itself never scrolls sideways: wide tables scroll inside
    their own box, the depth plot shrinks."""
    db = memory.open()
    jobs = with_dead_letters(db)
    jobs.enqueue(db, "a-long-value-without-spaces-" * 20)
    lease = jobs.claim(db, 60)
    assert lease is not None
    tasks: PriorityQueue[str] = PriorityQueue(Subspace(("tasks",)))
    tasks.push(db, "t" * 300, 2)
    work: Queue[Any] = Queue(Subspace(("work",)), codec="json")
    job = work.submit(db, {"text": "a-long-value-without-spaces-" * 20})
    assert job is not None
    leased = work.claim(db, 60)
    assert leased is not None
    try:
        raise ValueError("a-long-message-without-spaces-" * 10)
    except ValueError as error:
        work.release(db, leased, delay=60, error=error)
    served = serve(
        db, {"jobs": jobs, "tasks": tasks, "a-rather-long-queue-name": jobs, "work": work}
    )
    page.set_viewport_size({"width": 420, "height": 800})
    overflow = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    for path in ("/", "/queue?name=jobs", "/queue?name=tasks", f"/job?name=work&id={job.id}"):
        page.goto(served.url + path)
        expect(page.locator("main table").first).to_be_visible()
        assert page.evaluate(overflow) <= 0, path


def test_at_420_px_the_overview_keeps_size_in_flight_and_dead_letters_in_view(
    page: Page, serve: Callable[..., Served]
) -> None:
    """Issue 43 item 20: at 420 px the overview showed queue, type and codec, and size, in
    flight and dead letters were off screen behind a sideways scroll with no hint. Now the
    other columns hide there (a note says where they are), a long queue name wraps, and
    nothing scrolls sideways; at 1280 px every column is back."""
    db = memory.open()
    jobs = with_dead_letters(db)  # 1 waiting, 2 dead letters
    assert jobs.claim(db, 60) is not None  # 1 in flight
    jobs.enqueue(db, "ready")
    jobs.pause(db)
    served = serve(db, {"jobs": jobs, "a-rather-long-queue-name-without-any-spaces-in-it": jobs})
    page.set_viewport_size({"width": 420, "height": 800})
    page.goto(served.url + "/")
    row = page.locator('tr[data-queue="jobs"]')
    expected = {"td.paused": "yes", "td.size": "1", "td.in-flight": "1", "td.dead": "2"}
    for cell, text in expected.items():
        expect(row.locator(cell)).to_have_text(text)
        box = row.locator(cell).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 420, cell
    for hidden in ("th.wide", "td.wide", "td.enqueue-rate", "td.net-rate"):
        expect(page.locator(f"#overview {hidden}").first).to_be_hidden()
    expect(page.locator("#narrow-note")).to_be_visible()
    sideways = "box => box.scrollWidth - box.clientWidth"
    assert page.locator("main div.scroll").first.evaluate(sideways) <= 0
    assert page.evaluate("document.documentElement.scrollWidth - innerWidth") <= 0
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(row.locator("td.enqueue-rate")).to_be_visible()
    expect(page.locator("#narrow-note")).to_be_hidden()


def test_no_request_of_a_page_is_a_404_and_the_icon_is_served(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs = with_dead_letters(db)
    served = serve(db, {"jobs": jobs})
    answers: list[tuple[int, str]] = []
    page.on("response", lambda response: answers.append((response.status, response.url)))
    page.goto(served.url + "/queue?name=jobs")
    expect(page.locator("#dead-letter-list tr.dead-letter")).to_have_count(2)
    icon = page.request.get(served.url + "/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert [url for status, url in answers if status >= 400] == []


# -- issue 38: jobs ---------------------------------------------------------------------------


def with_jobs(db: Any) -> tuple[Queue[Any], dict[str, str]]:
    """A JSON queue of jobs: one succeeded (a result holding a script), one retrying after
    an error holding a script, one waiting (a value holding a script)."""
    jobs: Queue[Any] = Queue(Subspace(("work",)), codec="json")
    made = {name: jobs.submit(db, {"job": name}) for name in ("done", "retry")}
    done, retry = jobs.claim(db, 30), jobs.claim(db, 30)
    assert done is not None and retry is not None
    jobs.ack(db, done, result={"html": SCRIPT})
    try:
        raise ValueError(f"failed {SCRIPT}")
    except ValueError as error:
        jobs.release(db, retry, delay=600, error=error)
    made["waiting"] = jobs.submit(db, {"note": SCRIPT})
    ids = {name: job.id for name, job in made.items() if job is not None}
    assert len(ids) == 3
    return jobs, ids


def test_a_job_opens_from_the_queue_page_and_cancels_after_a_confirmation(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs, ids = with_jobs(db)
    served = serve(db, {"work": jobs})
    dialogs = Dialogs(page, accept=False)
    page.goto(served.url + "/queue?name=work")
    finished = page.locator("#finished-jobs tr.job")
    expect(finished).to_have_count(1)
    expect(finished.locator("td.outcome")).to_contain_text(SCRIPT)  # the result, as text
    retrying = page.locator(f'#waiting-jobs tr.job[data-id="{ids["retry"]}"]')
    expect(retrying.locator("td.error-text")).to_contain_text(f"ValueError: failed {SCRIPT}")
    retrying.locator("a.job-link").click()
    expect(page.locator("#job-heading")).to_have_text(ids["retry"])
    expect(page.locator("#job-state")).to_have_text("retrying")
    expect(page.locator("#job-traceback")).to_contain_text("Traceback (most recent call last)")
    expect(page.locator("#job-traceback")).to_contain_text(f"ValueError: failed {SCRIPT}")
    expect(page.locator("#job-value")).to_contain_text('"job": "retry"')
    # dismissed: the confirmation keeps the job as it was
    page.get_by_role("button", name="Cancel job").click()
    assert dialogs.seen == [f"Cancel job {ids['retry']}?"]
    assert jobs.job(db, ids["retry"]).state == "retrying"
    dialogs.accept = True
    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#done")).to_contain_text("cancel requested")
    expect(page.locator("#job-state")).to_have_text("cancelled")
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    assert jobs.job(db, ids["retry"]).state == "cancelled"
    assert dialogs.seen == [f"Cancel job {ids['retry']}?"] * 2  # and no alert ran
    page.locator("#back-to-queue").click()
    expect(page.locator(f'#finished-jobs tr.job[data-id="{ids["retry"]}"]')).to_be_visible()


def test_a_job_page_follows_its_job_and_shows_scripts_as_text(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs, ids = with_jobs(db)
    served = serve(db, {"work": jobs})
    dialogs = Dialogs(page)
    page.goto(served.url + f"/job?name=work&id={ids['waiting']}")
    expect(page.locator("#job-value")).to_contain_text(SCRIPT)
    expect(page.locator("#job-state")).to_have_text("waiting")
    page.evaluate("window.notReloaded = true")
    lease = jobs.claim(db, 30)
    assert lease is not None and lease.job_id == ids["waiting"]
    expect(page.locator("#job-state")).to_have_text("running", timeout=10_000)
    try:
        raise RuntimeError(SCRIPT)
    except RuntimeError as error:
        jobs.release(db, lease, error=error)
    jobs.ack(db, jobs.claim(db, 30), result=[SCRIPT])
    expect(page.locator("#job-state")).to_have_text("succeeded", timeout=10_000)
    expect(page.locator("#job-result")).to_contain_text(SCRIPT)
    expect(page.locator("#job-error")).to_contain_text(f"RuntimeError: {SCRIPT}")
    assert page.evaluate("window.notReloaded") is True
    page.goto(served.url + f"/job?name=work&id={ids['done']}")
    expect(page.locator("#job-result")).to_contain_text(SCRIPT)
    time.sleep(1)
    assert dialogs.seen == [] and page.locator("main script").count() == 0


def test_search_by_job_id_opens_the_job_or_says_why_not(
    page: Page, serve: Callable[..., Served]
) -> None:
    db = memory.open()
    jobs, ids = with_jobs(db)
    tasks: PriorityQueue[str] = PriorityQueue(Subspace(("tasks",)))
    other = tasks.submit(db, "t", priority=1)
    assert other is not None
    served = serve(db, {"work": jobs, "tasks": tasks})
    page.goto(served.url + "/queue?name=work")
    page.locator("#job-id").fill(ids["done"])
    page.get_by_role("button", name="Open job").click()
    expect(page.locator("#job-heading")).to_have_text(ids["done"])
    expect(page.locator("#job-state")).to_have_text("succeeded")
    page.goto(served.url + "/queue?name=work")
    page.locator("#job-id").fill("not-a-job")
    with page.expect_response(lambda answer: "/job?" in answer.url) as sent:
        page.get_by_role("button", name="Open job").click()
    assert sent.value.status == 400
    expect(page.get_by_role("heading", name="Not a job id")).to_be_visible()
    expect(page.locator("#job-problem")).to_contain_text("32 hexadecimal digits")
    page.locator("#job-id").fill(other.id)  # the search form again, on the answer
    page.get_by_role("button", name="Open job").click()
    expect(page.locator("#job-problem")).to_contain_text("is a job of queue tasks")
    page.locator("#owner-job").click()
    expect(page.locator("#job-heading")).to_have_text(other.id)
    expect(page.locator("#job-priority")).to_have_text("1")
