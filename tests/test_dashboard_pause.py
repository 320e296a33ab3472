"""The dashboard's Pause and Resume buttons, over HTTP (Starlette's TestClient, as
tests/test_dashboard.py): CSRF, read-only, and what the queue's page shows."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip(
    "starlette", reason="the dashboard extra is not installed: pip install -e '.[dashboard-test]'"
)
pytest.importorskip(
    "httpx", reason="Starlette's TestClient needs httpx: pip install -e '.[dashboard-test]'"
)

import re
from collections.abc import Iterator

from test_dashboard import csrf_of, local

from fdbqueue import Queue, Subspace, memory
from fdbqueue.dashboard import create_app


@pytest.fixture
def db() -> memory.Database:
    return memory.open()


@pytest.fixture
def jobs(db: memory.Database) -> Queue[Any]:
    queue: Queue[Any] = Queue(Subspace(("jobs",)))
    queue.enqueue_many(db, ["a", "b"])
    return queue


@pytest.fixture
def client(db: memory.Database, jobs: Queue[Any]) -> Iterator[Any]:
    with local(create_app(db, {"jobs": jobs})) as client:
        yield client


def test_pause_then_resume_from_the_queue_page(db: Any, jobs: Queue[Any], client: Any) -> None:
    page = client.get("/queue", params={"name": "jobs"}).text
    assert "Consumers: running" in page and 'id="pause"' in page
    fields = {"name": "jobs", "csrf": csrf_of(page)}
    answer = client.post("/actions/pause", data=fields)
    assert answer.status_code == 200 and "paused the consumers" in answer.text
    assert jobs.info(db).paused is True and jobs.dequeue(db) is None
    assert "Consumers: paused" in answer.text and 'id="resume"' in answer.text
    again = client.post("/actions/pause", data=fields)
    assert "the consumers were paused already" in again.text
    live = client.get("/fragments/queue", params={"name": "jobs"}).text
    assert "Consumers: paused" in live
    answer = client.post("/actions/resume", data=fields)
    assert answer.status_code == 200 and "resumed the consumers" in answer.text
    assert jobs.info(db).paused is False and jobs.dequeue(db) == "a"
    assert "the consumers were not paused" in client.post("/actions/resume", data=fields).text


def test_pause_without_the_csrf_token_or_for_an_unknown_queue_changes_nothing(
    db: Any, jobs: Queue[Any], client: Any
) -> None:
    token = csrf_of(client.get("/queue", params={"name": "jobs"}).text)
    for wrong in ({"name": "jobs", "csrf": "guess"}, {"name": "jobs"}):
        answer = client.post("/actions/pause", data=wrong)
        assert answer.status_code == 403 and "CSRF" in answer.text
    cross = client.post(
        "/actions/pause",
        data={"name": "jobs", "csrf": token},
        headers={"origin": "http://evil.test"},
    )
    assert cross.status_code == 403
    assert client.post("/actions/pause", data={"name": "nope", "csrf": token}).status_code == 400
    assert client.get("/actions/pause").status_code == 405  # never a GET
    assert jobs.info(db).paused is False


def test_read_only_shows_the_state_and_refuses_pause(db: Any, jobs: Queue[Any]) -> None:
    jobs.pause(db)
    with local(create_app(db, {"jobs": jobs}, read_only=True)) as client:
        page = client.get("/queue", params={"name": "jobs"}).text
        assert "Consumers: paused" in page and 'id="resume"' not in page
        token = re.search(r'"x-csrf-token": "([^"]+)"', page)
        assert token is not None
        answer = client.post("/actions/resume", data={"name": "jobs", "csrf": token.group(1)})
    assert answer.status_code == 403 and "read-only" in answer.text
    assert jobs.info(db).paused is True
