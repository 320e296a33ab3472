"""The dashboard's ASGI application (:func:`create_app`): the pages, the fragments htmx polls,
the actions on dead letters, and the checks every request passes (the host it names, the
token, and for an action the origin, the CSRF token and read-only)."""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import secrets
import threading
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from fdbqueue import DeadLetter, Lease, PriorityQueue
from fdbqueue._transactions.transactional import run_in_retry_loop
from fdbqueue.dashboard._figures import AnyQueue, Sampler, depth_svg, shortened
from fdbqueue.dashboard._jobs import (
    SCANNED,
    ago,
    full_text,
    job_lists,
    job_value,
    look_up,
    moment,
)

__all__ = ["DEAD_LETTERS_PAGE", "LOOPBACK_HOSTS", "TOKEN_COOKIE", "create_app"]

#: Dead letters per page of a queue's page.
DEAD_LETTERS_PAGE = 50
#: Leases and next items a queue's page shows.
SHOWN = 20
#: The cookie that carries ``--token`` once a browser gave it as ``?token=``.
TOKEN_COOKIE = "fdbqueue_dashboard_token"
#: The form field and header that carry the CSRF token.
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
#: The host names the dashboard answers to by default (any port): this machine's loopback
#: names. An IPv6 address is written in brackets, as a ``Host`` header carries it.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
#: The icon browsers ask for as ``/favicon.ico``: an inline SVG (three bars, a queue).
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect width="16" height="16" rx="3" fill="#24323f"/>'
    '<rect x="3" y="3" width="10" height="2.5" fill="#fff"/>'
    '<rect x="3" y="7" width="10" height="2.5" fill="#fff"/>'
    '<rect x="3" y="11" width="6" height="2.5" fill="#f90"/></svg>'
)

PACKAGE = "fdbqueue.dashboard"


def create_app(
    database: Any,
    queues: Mapping[str, AnyQueue],
    *,
    read_only: bool = False,
    token: str | None = None,
    sample_every: float = 2.0,
    allowed_hosts: Iterable[str] = LOOPBACK_HOSTS,
) -> Starlette:
    """Build the dashboard's ASGI application.

    Args:
        database: the database the queues live in (a ``fdb`` Database or
            :func:`fdbqueue.memory.open`'s).
        queues: display names to :class:`~fdbqueue.Queue` or :class:`~fdbqueue.PriorityQueue`
            objects; the overview lists them in name order.
        read_only: refuse every action that changes a queue (HTTP 403) and show no buttons.
        token: when given, every request must carry it: as ``Authorization: Bearer TOKEN``,
            or once as ``?token=TOKEN`` (the answer sets a cookie that carries it after).
        sample_every: seconds between the samples of every queue's figures taken in the
            background while the application runs (the rates and the depth plot use them;
            the rates span at least half of it).
        allowed_hosts: the host names requests may name (their ``Host`` header, any port;
            else HTTP 400, so a page of another site rebound to this address by DNS reads
            nothing), and the only origins an action is accepted from (an ``Origin`` header
            naming another host, or ``null``: HTTP 403). Names as Starlette's
            ``TrustedHostMiddleware`` takes them: ``dash.example.com``, ``*.example.com``,
            an IP address (an IPv6 one with or without brackets), or ``*`` for any (which
            turns both checks off). Default: :data:`LOOPBACK_HOSTS`.

    Returns:
        The Starlette application; serve it with uvicorn (``uvicorn.run(app)``) or any ASGI
        server. Its lifespan starts and stops the background sampling.

    Raises:
        TypeError: a value of ``queues`` is not a Queue or PriorityQueue, or
            ``allowed_hosts`` is a single string or holds something else.
        ValueError: ``sample_every`` is not > 0, ``token`` is empty, ``allowed_hosts`` is
            empty, or a name in it is empty or has a ``*`` other than a leading ``*.``.
    """
    from fdbqueue.queue import Queue

    for name, queue in queues.items():
        if not isinstance(queue, (Queue, PriorityQueue)):
            raise TypeError(f"queue {name!r} is a {type(queue).__name__}, not a Queue")
    if not sample_every > 0:
        raise ValueError(f"sample_every must be > 0, not {sample_every!r}")
    if token is not None and not token:
        raise ValueError("token must not be empty")
    hosts = AllowedHosts(allowed_hosts)
    dashboard = Dashboard(database, queues, read_only=read_only, sample_every=sample_every)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        dashboard.start()
        try:
            yield
        finally:
            dashboard.stop()

    static = StaticFiles(packages=[(PACKAGE, "static")])
    app = Starlette(
        routes=[
            Route("/", dashboard.overview),
            Route("/favicon.ico", favicon),
            Route("/fragments/overview", dashboard.overview_rows),
            Route("/queue", dashboard.queue_page),
            Route("/fragments/queue", dashboard.queue_live),
            Route("/fragments/dead-letters", dashboard.dead_letters_fragment),
            Route("/actions/requeue", dashboard.requeue, methods=["POST"]),
            Route("/actions/purge", dashboard.purge, methods=["POST"]),
            Route("/actions/pause", dashboard.pause, methods=["POST"]),
            Route("/actions/resume", dashboard.resume, methods=["POST"]),
            Route("/fragments/jobs", dashboard.jobs_fragment),
            Route("/job", dashboard.job_page),
            Route("/fragments/job", dashboard.job_fragment),
            Route("/actions/cancel", dashboard.cancel, methods=["POST"]),
            Mount("/static", static, name="static"),
        ],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts.names, www_redirect=False),
            Middleware(Guard, token=token, hosts=hosts, read_only=read_only),
        ],
        lifespan=lifespan,
    )
    app.state.dashboard = dashboard
    return app


class AllowedHosts:
    """The host names the dashboard answers to (see :func:`create_app`'s ``allowed_hosts``),
    checked by Starlette's ``TrustedHostMiddleware``: for the ``Host`` header of every
    request (it runs first), and by :meth:`allows` for the ``Origin`` of an action, so both
    follow one rule.

    Raises:
        TypeError, ValueError: as :func:`create_app` says of ``allowed_hosts``.
    """

    def __init__(self, names: Iterable[str]) -> None:
        if isinstance(names, (str, bytes)):
            raise TypeError("allowed_hosts must be a list of host names, not one string")
        self.names: list[str] = []
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"allowed_hosts holds a {type(name).__name__}, not a str")
            if (
                not name
                or "*" in name[1:]
                or (name.startswith("*") and name[:2] != "*." and name != "*")
            ):
                raise ValueError(
                    f"allowed host {name!r}: give a host name, an IP address, *.domain or *"
                )
            self.names.append(bracketed(name))
        if not self.names:
            raise ValueError("allowed_hosts must name at least one host")

    async def allows(self, netloc: str) -> bool:
        """Whether a request naming the host (and port) ``netloc`` would pass the ``Host``
        check: the check itself, run on a request that names ``netloc``."""
        passed = False

        async def through(scope: Any, receive: Any, send: Any) -> None:
            nonlocal passed
            passed = True

        async def refused(message: Any) -> None:
            return None

        async def nothing() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        check = TrustedHostMiddleware(through, allowed_hosts=self.names, www_redirect=False)
        scope = {"type": "http", "headers": [(b"host", netloc.encode("latin-1"))]}
        await check(scope, nothing, refused)
        return passed


def bracketed(name: str) -> str:
    """``name`` as a ``Host`` header carries it: an IPv6 address in brackets."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return name.lower()
    return f"[{address}]" if address.version == 6 else str(address)


async def favicon(request: Request) -> Response:
    """The dashboard's icon (:data:`FAVICON`)."""
    headers = {"cache-control": "max-age=86400"}
    return Response(FAVICON, media_type="image/svg+xml", headers=headers)


class Guard(BaseHTTPMiddleware):
    """Every request's checks after its host's: the token (when one is set), then for a POST
    the read-only refusal and its ``Origin`` (when the browser gives one: an allowed host;
    the action itself checks the CSRF token); and the headers every answer carries (a
    content security policy allowing only this origin's scripts, no framing, no
    sniffing)."""

    def __init__(
        self, app: Any, *, token: str | None, hosts: AllowedHosts, read_only: bool
    ) -> None:
        super().__init__(app)
        self.token = token
        self.hosts = hosts
        self.read_only = read_only

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        set_cookie = False
        if self.token is not None:
            given = request.query_params.get("token")
            if given is not None and same(given, self.token):
                set_cookie = True
            elif not self.authorised(request):
                return PlainTextResponse(
                    "401: this dashboard needs its token (open it with ?token=...)", 401
                )
        if request.method == "POST":
            refusal = await self.refusal(request)
            if refusal is not None:
                return secured(PlainTextResponse(refusal, 403))
        if set_cookie:  # drop the token from the address bar
            query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + ("?" + urllib.parse.urlencode(query) if query else "")
            response: Response = RedirectResponse(target, 303)
            assert self.token is not None
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            return secured(response)
        return secured(await call_next(request))

    def authorised(self, request: Request) -> bool:
        assert self.token is not None
        header = request.headers.get("authorization", "")
        if header.startswith("Bearer ") and same(header[7:], self.token):
            return True
        cookie = request.cookies.get(TOKEN_COOKIE)
        return cookie is not None and same(cookie, self.token)

    async def refusal(self, request: Request) -> str | None:
        """Why a POST is refused, or None."""
        if self.read_only:
            return "403: this dashboard is read-only (--read-only): nothing was changed"
        origin = request.headers.get("origin")
        if origin is not None:  # "null" (a sandboxed or file page) names no host: refused
            host = urllib.parse.urlsplit(origin).netloc
            if not host or not await self.hosts.allows(host):
                return (
                    f"403: cross-origin request refused (Origin {origin[:100]} is not an "
                    "allowed host): nothing was changed"
                )
        return None


def same(given: str, expected: str) -> bool:
    """Whether two secrets are equal, in a time that does not tell how much of them is."""
    return hmac.compare_digest(given.encode(), expected.encode())


def secured(response: Response) -> Response:
    response.headers["content-security-policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"
    )
    response.headers["x-content-type-options"] = "nosniff"
    response.headers["x-frame-options"] = "DENY"
    response.headers["referrer-policy"] = "same-origin"
    return response


class Dashboard:
    """The pages and actions of one application (see :func:`create_app`)."""

    def __init__(
        self,
        database: Any,
        queues: Mapping[str, AnyQueue],
        *,
        read_only: bool,
        sample_every: float,
    ) -> None:
        self.database = database
        self.sampler = Sampler(database, queues, rate_seconds=sample_every / 2)
        self.read_only = read_only
        self.sample_every = sample_every
        self.csrf = secrets.token_urlsafe(32)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader(PACKAGE, "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["short"] = shortened
        self.templates.filters["rate"] = rate
        self.templates.filters["age"] = age
        self.templates.filters["full"] = full_text
        self.templates.filters["moment"] = moment
        self.templates.filters["ago"] = ago

    # -- background sampling ------------------------------------------------------------------

    def start(self) -> None:
        """Start sampling every queue every ``sample_every`` seconds, in a daemon thread."""
        self.stopping.clear()
        self.thread = threading.Thread(target=self.run, name="fdbqueue-dashboard", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop the sampling thread and wait for it."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def run(self) -> None:
        while not self.stopping.is_set():
            self.sampler.sample_all(fresher_than=self.sample_every / 2)
            self.stopping.wait(self.sample_every)

    # -- pages --------------------------------------------------------------------------------

    def render(self, template: str, status_code: int = 200, **values: Any) -> HTMLResponse:
        page = self.templates.get_template(template).render(
            csrf=self.csrf, read_only=self.read_only, **values
        )
        return HTMLResponse(page, status_code)

    def overview(self, request: Request) -> Response:
        self.sampler.sample_all(fresher_than=1.0)
        return self.render("overview.html", rows=self.sampler.rows())

    def overview_rows(self, request: Request) -> Response:
        self.sampler.sample_all(fresher_than=1.0)
        return self.render("overview_rows.html", rows=self.sampler.rows())

    def named(self, request: Request, name: str | None = None) -> tuple[str, AnyQueue] | None:
        name = request.query_params.get("name") if name is None else name
        if name is None or name not in self.sampler.queues:
            return None
        return name, self.sampler.queues[name]

    def queue_page(self, request: Request) -> Response:
        found = self.named(request)
        if found is None:
            return self.unknown(request)
        name, _queue = found
        return self.render(
            "queue.html",
            name=name,
            done=done_message(request),
            **self.live_values(name),
            **self.dead_letter_values(name, *cursor_of(request)),
            **job_lists(self.database, self.sampler.queues[name]),
        )

    def queue_live(self, request: Request) -> Response:
        found = self.named(request)
        if found is None:
            return self.unknown(request)
        return self.render("queue_live.html", name=found[0], **self.live_values(found[0]))

    def dead_letters_fragment(self, request: Request) -> Response:
        found = self.named(request)
        if found is None:
            return self.unknown(request)
        values = self.dead_letter_values(found[0], *cursor_of(request))
        return self.render("dead_letters.html", name=found[0], **values)

    def jobs_fragment(self, request: Request) -> Response:
        found = self.named(request)
        if found is None:
            return self.unknown(request)
        values = job_lists(self.database, found[1])
        codec = self.sampler.row(found[0]).codec
        return self.render("jobs_live.html", name=found[0], codec=codec, **values)

    # -- a job's page -------------------------------------------------------------------------

    def job_page(self, request: Request) -> Response:
        """A job's page (``/job?name=QUEUE&id=JOB``): its value (where its item is), state,
        times, deliveries, group, priority, last error, result, and a Cancel button while it
        is not finished; a page saying why for a bad id, another queue's job or none."""
        found = self.named(request)
        if found is None:
            return self.unknown(request)
        name, queue = found
        ident = request.query_params.get("id", "")
        looked = look_up(self.database, name, self.sampler.queues, ident)
        if looked.job is None:
            return self.render(
                "job_missing.html",
                looked.status,
                status=looked.status,
                name=name,
                ident=ident,
                problem=looked.problem,
                owner=looked.owner,
            )
        value_error = None
        try:
            has_value, value = job_value(self.database, queue, looked.job.id)
        except Exception as error:  # a database error: said where the value would be
            has_value, value = False, None
            value_error = f"{type(error).__name__}: {error}"
        return self.render(
            "job.html",
            name=name,
            job=looked.job,
            has_value=has_value,
            value=value,
            value_error=value_error,
            scanned=SCANNED,
            codec=self.sampler.row(name).codec,
            done=cancel_message(request),
        )

    def job_fragment(self, request: Request) -> Response:
        """The live part of a job's page (what changes: state, times, error, result)."""
        found = self.named(request)
        if found is None:
            return self.unknown(request)
        name = found[0]
        ident = request.query_params.get("id", "")
        looked = look_up(self.database, name, self.sampler.queues, ident)
        if looked.job is None:
            return self.render("job_gone.html", looked.status, problem=looked.problem)
        codec = self.sampler.row(name).codec
        return self.render("job_live.html", name=name, job=looked.job, codec=codec)

    def unknown(self, request: Request) -> Response:
        return self.render(
            "message.html", title="No such queue", text=request.query_params.get("name", "")
        )

    def live_values(self, name: str) -> dict[str, Any]:
        """What a queue's live part shows: its figures, per shard, the depth plot, the next
        items (with their priorities, of a PriorityQueue) and the soonest leases with their
        seconds left."""
        queue = self.sampler.queues[name]
        self.sampler.sample(name)
        row = self.sampler.row(name)
        try:
            version, leases = run_in_retry_loop(
                self.database,
                lambda tr: (tr.get_read_version().wait(), queue.leases(tr, SHOWN)),
            )
            items = next_items(queue, self.database)
        except Exception as error:
            row = self.sampler.row(name)
            return {"row": row, "leases": [], "items": [], "plot": "", "error": str(error)}
        shown_leases = [
            {
                "id": lease.id,
                "deliveries": lease.deliveries,
                "group": lease.group,
                "value": lease.value,
                "left": lease_state(lease, version),
            }
            for lease in leases
        ]
        return {
            "row": row,
            "leases": shown_leases,
            "items": items,
            "plot": depth_svg(self.sampler.samples(name)),
            "error": row.error,
        }

    def dead_letter_values(self, name: str, after: str | None, first: int) -> dict[str, Any]:
        """One page of queue ``name``'s dead letters, oldest first: the first page, or the one
        after the dead letter whose record key is ``after`` (hexadecimal; the library's cursor,
        so a page reads only its own records). ``first`` numbers its first row."""
        queue = self.sampler.queues[name]
        cursor = None
        if after:
            try:
                cursor = letter_at(after, "")
                found = queue.dead_letters(self.database, DEAD_LETTERS_PAGE + 1, after=cursor)
            except Exception:  # not a dead letter key of this queue: the first page
                cursor, first = None, 1
        if cursor is None:
            found = queue.dead_letters(self.database, DEAD_LETTERS_PAGE + 1)
        letters = found[:DEAD_LETTERS_PAGE]
        more = len(found) > DEAD_LETTERS_PAGE
        last = self.sampler.last(name)
        counted = 0 if last is None else last.dead_letters
        return {
            "letters": letters,
            "paged": cursor is not None,
            "after": after if cursor is not None else None,
            "next_after": letters[-1].key.hex() if more else None,
            "first": first,
            # the live figures' count, unless this page shows it is behind
            "total": max(counted, first - 1 + len(letters) + (1 if more else 0)),
            "codec": self.sampler.row(name).codec,
        }

    # -- actions ------------------------------------------------------------------------------

    def csrf_refusal(self, request: Request, form: Any) -> Response | None:
        """The answer refusing an action without the CSRF token (form field ``csrf`` or
        header ``X-CSRF-Token``; 403), or None when it has it."""
        given = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD)
        if not isinstance(given, str) or not same(given, self.csrf):
            return secured(
                PlainTextResponse(
                    "403: missing or wrong CSRF token: nothing was changed (reload the page)", 403
                )
            )
        return None

    async def cancel(self, request: Request) -> Response:
        """Cancel one job (form fields ``name`` and ``id``: :meth:`fdbqueue.Queue.cancel`),
        then go back to its page, saying what was done. Refused (403) without the CSRF token,
        as every action; 400 for an unknown queue or a bad id."""
        checked = await self.checked(request)
        if isinstance(checked, Response):
            return checked
        form, name, queue = checked
        ident = form.get("id")
        if not isinstance(ident, str):
            return PlainTextResponse("400: which job?", 400)
        try:
            cancelled = await run_in_threadpool(queue.cancel, self.database, ident)
        except (TypeError, ValueError) as error:
            return PlainTextResponse(f"400: {error}: nothing was changed", 400)
        self.sampler.sample(name)
        query = {"name": name, "id": ident, "cancelled": "1" if cancelled else "0"}
        return RedirectResponse("/job?" + urllib.parse.urlencode(query), 303)

    async def requeue(self, request: Request) -> Response:
        return await self.act(request, "requeue")

    async def purge(self, request: Request) -> Response:
        return await self.act(request, "purge")

    async def pause(self, request: Request) -> Response:
        return await self.switch(request, "pause")

    async def resume(self, request: Request) -> Response:
        return await self.switch(request, "resume")

    async def switch(self, request: Request, action: str) -> Response:
        """Pause or resume the consumers of the queue named by the form field ``name``
        (:meth:`~fdbqueue.Queue.pause`), then go back to its page, saying what was done.
        Refused as :meth:`act` refuses."""
        checked = await self.checked(request)
        if isinstance(checked, Response):
            return checked
        _form, name, queue = checked
        changed = await run_in_threadpool(getattr(queue, action), self.database)
        self.sampler.sample(name)
        done = {"name": name, "done": action, "count": int(changed)}
        return RedirectResponse("/queue?" + urllib.parse.urlencode(done), 303)

    async def checked(self, request: Request) -> Response | tuple[Any, str, AnyQueue]:
        """An action's form, and the name and queue it names; or the response refusing it:
        403 without the CSRF token (form field ``csrf`` or header ``X-CSRF-Token``), 400 for
        a name that is not one of the dashboard's queues."""
        form = await request.form()
        refusal = self.csrf_refusal(request, form)
        if refusal is not None:
            return refusal
        name = form.get("name")
        found = self.named(request, name if isinstance(name, str) else "")
        if found is None:
            return PlainTextResponse("400: no such queue", 400)
        return form, found[0], found[1]

    async def act(self, request: Request, action: str) -> Response:
        """Requeue or purge one dead letter (form fields ``key`` and ``id``) or all of them
        (``all=1``), then go back to the queue's page, saying what was done. Refused (403)
        without the CSRF token (form field ``csrf`` or header ``X-CSRF-Token``)."""
        checked = await self.checked(request)
        if isinstance(checked, Response):
            return checked
        form, name, queue = checked
        database = self.database
        if form.get("all") == "1":
            if action == "requeue":
                count = await run_in_threadpool(queue.requeue_dead_letters, database, 2**62)
            else:
                count = await run_in_threadpool(queue.purge_dead_letters, database, None)
        else:
            key, ident = form.get("key"), form.get("id")
            if not isinstance(key, str) or not isinstance(ident, str):
                return PlainTextResponse("400: which dead letter?", 400)
            try:
                letter = letter_at(key, ident)
                act = queue.requeue_dead_letter if action == "requeue" else queue.purge_dead_letter
                count = int(await run_in_threadpool(act, database, letter))
            except ValueError:
                return PlainTextResponse("400: not a dead letter of this queue", 400)
        self.sampler.sample(name)
        target = "/queue?" + urllib.parse.urlencode({"name": name, "done": action, "count": count})
        return RedirectResponse(target, 303)


def letter_at(key: str, ident: str) -> DeadLetter[None]:
    """The dead letter stored at ``key`` (hexadecimal), as far as the library's calls that
    take one read it (its record key, and its id for their messages): the cursor of a page
    and the one an action names.

    Raises:
        ValueError: ``key`` is not hexadecimal.
    """
    return DeadLetter(None, 0, "", ident, b"", bytes.fromhex(key))


def next_items(queue: AnyQueue, database: Any) -> list[dict[str, Any]]:
    """The next :data:`SHOWN` items of ``queue``, each ``{"value": ..., "priority": ...}``
    (priority None but in a PriorityQueue)."""
    if isinstance(queue, PriorityQueue):
        pairs = queue.peek_many_with_priorities(database, SHOWN)
        return [{"value": value, "priority": priority} for priority, value in pairs]
    return [{"value": value, "priority": None} for value in queue.peek_many(database, SHOWN)]


def cursor_of(request: Request) -> tuple[str | None, int]:
    """The page of dead letters asked for: the record key it follows (``after``; None: the
    first page) and the number of its first row (``first``; 1 by default)."""
    first = request.query_params.get("first", "1")
    return request.query_params.get("after"), max(1, int(first)) if first.isdigit() else 1


def done_message(request: Request) -> str | None:
    """What the last action did, from the address it redirected to."""
    action = request.query_params.get("done")
    changed = request.query_params.get("count") == "1"
    if action == "pause":
        return "paused the consumers" if changed else "the consumers were paused already"
    if action == "resume":
        return "resumed the consumers" if changed else "the consumers were not paused"
    if action not in ("requeue", "purge"):
        return None
    count = request.query_params.get("count", "0")
    count = count if count.isdigit() else "0"
    letters = "dead letter" if count == "1" else "dead letters"
    return f"{'requeued' if action == 'requeue' else 'purged'} {count} {letters}"


def cancel_message(request: Request) -> str | None:
    """What the last cancel did, from the address it redirected to."""
    cancelled = request.query_params.get("cancelled")
    if cancelled == "1":
        return "cancel requested: the job never runs, or, running now, is not retried"
    if cancelled == "0":
        return "nothing cancelled: the job had finished, or its cancel was requested already"
    return None


def lease_state(lease: Lease[Any], read_version: int) -> str:
    """How a lease stands at ``read_version`` and this client's wall clock, in words
    (:meth:`~fdbqueue.Lease.describe`)."""
    return lease.describe(read_version)


def rate(value: float | None, signed: bool = True) -> str:
    """A rate in items per second as the overview shows it, with its sign when ``signed``
    (a net rate); ``-`` for none (before two samples, or over a clear)."""
    if value is None:
        return "-"
    return f"{value:+.1f}/s" if signed else f"{value:.1f}/s"


def age(value: float | None) -> str:
    """An age in seconds, ``-`` for none (an empty queue, or a QueueInfo without it)."""
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"
