"""Handlers in child processes: ``work(..., processes=N)`` (rq forks a work horse per job;
Celery's prefork pool enforces hard time limits).

Each of the worker loop's N threads keeps one child process of its own (started with the
``spawn`` method when the thread first needs it: a child never inherits the parent's threads
or locks) and hands it one job at a time over a pipe: the function to call, by its module and
qualified name (so it must be importable: a function at a module's top level, not a lambda or
a nested function), and its arguments, pickled. The child answers when the call starts (the
time limit runs from then, not from the child's start-up) and with what the call returned or
raised. Everything else stays in the parent: the claim, the lease and its heartbeat, the
acknowledgement, the job's record.

* **Time limit.** Past it the parent kills the child (SIGKILL): a pure-Python busy loop, a
  blocking C call and a stuck socket all stop, and the CPU is freed. The job fails with
  :class:`~fdbqueue.errors.TimeLimitExceeded` (released with the backoff, or a dead letter on
  its last delivery), and the thread starts a new child for its next job.
* **A child that dies** (``os._exit``, a signal, memory exhausted) fails that delivery only,
  with :class:`ChildProcessError` naming its exit code or signal; a new child takes the
  next job.
* **Children get the parent's** ``sys.path`` and current directory (``spawn`` passes both),
  so a handler the parent imported by a path it added is found. The program's main module is
  imported again in each child, as ``multiprocessing`` does: guard a script's own start with
  ``if __name__ == "__main__":``.
* When the loop ends, every child is stopped and joined: none is left.

Cost per job: two pickles each way and a pipe round trip (about 0.5 ms of the parent's time
here), on top of the thread loop's claim and acknowledgement; a child's start-up (an
interpreter and the handler's imports, about 0.2 to 0.4 s) once per thread, and again after
a child was killed or died.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import multiprocessing.connection
import signal
import threading
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

from fdbqueue._wording import describe_failure
from fdbqueue.errors import HandlerError, TimeLimitExceeded

__all__ = ["ChildCall", "ChildProcesses", "FunctionReference"]

#: Seconds a child may take to answer that a call started (it is idle, so at once, but its
#: first call may first import the handler's module).
START_SECONDS = 60.0
#: Seconds a child is given to end after it was asked to stop, before it is killed.
STOP_SECONDS = 5.0


class FunctionReference(NamedTuple):
    """A function as a child process finds it: its module and its qualified name."""

    module: str
    qualname: str

    @classmethod
    def of(cls, function: Any) -> FunctionReference:
        """The reference of ``function``, checked to lead back to it (or to a task whose
        function it is).

        Raises:
            TypeError: the function cannot be found by its module and name (a lambda, a
                nested function, a bound method of an object, a callable object).
        """
        module = getattr(function, "__module__", None)
        qualname = getattr(function, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
            raise TypeError(
                f"{function!r} cannot run in a child process: give a function defined at a "
                "module's top level (the child imports it by its module and name)"
            )
        reference = cls(module, qualname)
        try:
            found = reference.load()
        except (ImportError, AttributeError) as error:
            raise TypeError(
                f"{module}.{qualname} cannot run in a child process: it cannot be imported "
                f"by its name ({error})"
            ) from None
        if found is not function and getattr(found, "function", None) is not function:
            raise TypeError(
                f"{module}.{qualname} cannot run in a child process: that name is another "
                "object in its module"
            )
        return reference

    def load(self) -> Callable[..., Any]:
        """Import the module and find the function (a task's own function for a task)."""
        found: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            found = getattr(found, part)
        function = getattr(found, "function", found)  # a Task: its function
        if not callable(function):
            raise TypeError(f"{self.module}.{self.qualname} is not callable")
        return function  # type: ignore[no-any-return]


class ChildCall(NamedTuple):
    """One call for a child: ``function(*args, **kwargs)``."""

    function: FunctionReference
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def _child_main(connection: multiprocessing.connection.Connection) -> None:
    """A child's loop: run each call it receives, answer ``("started",)`` then ``("returned",
    result)`` or ``("raised", exception)``, until it receives None or its pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it, not Ctrl-C
    while True:
        try:
            call = connection.recv()
        except EOFError:
            return
        if call is None:
            return
        connection.send(("started",))
        try:
            answer: tuple[Any, ...] = ("returned", call.function.load()(*call.args, **call.kwargs))
        except BaseException as error:  # sent back: the parent fails the job with it
            answer = ("raised", error, traceback.format_exc())
        try:
            connection.send(answer)
        except Exception as error:  # the result or the exception does not pickle
            kind, message, trace = describe_failure(error)
            connection.send(("unsent", kind, message, trace, answer[0]))


class _Child:
    """One child process and the parent's end of its pipe."""

    def __init__(self, context: Any) -> None:
        parent_end, child_end = context.Pipe()
        self.connection = parent_end
        self.process = context.Process(
            target=_child_main, args=(child_end,), name="fdbqueue-handler", daemon=True
        )
        self.process.start()
        child_end.close()

    def stop(self) -> None:
        """Ask it to end, and kill it if it does not within :data:`STOP_SECONDS`."""
        with contextlib.suppress(OSError, ValueError):  # it died already: its pipe is closed
            self.connection.send(None)
        self.process.join(STOP_SECONDS)
        self.kill()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.connection.close()

    def ended(self) -> ChildProcessError:
        """The failure of a call whose child died."""
        self.process.join(STOP_SECONDS)
        code = self.process.exitcode
        how = (
            f"was killed by {signal.Signals(-code).name}"
            if code is not None and code < 0
            else f"exited with code {code}"
        )
        return ChildProcessError(f"the handler's child process {how} during the job")


class ChildProcesses:
    """The child processes of one worker loop: one per thread that runs jobs, started when
    the thread first needs it (see the module docstring)."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._children: set[_Child] = set()
        self._closed = False

    def run(self, call: ChildCall, time_limit: float | None) -> Any:
        """Run ``call`` in this thread's child; what it returned.

        Raises:
            TimeLimitExceeded: it ran past ``time_limit`` seconds from its start in the
                child; the child was killed.
            ChildProcessError: the child died during the call.
            BaseException: what the call raised in the child (:class:`HandlerError` when
                that could not be sent back).
        """
        child = self._child()
        in_time = False
        try:
            child.connection.send(call)
            started = child.connection.poll(START_SECONDS)
            if started:
                child.connection.recv()  # ("started",): the time limit runs from here
                in_time = child.connection.poll(time_limit)
            answer = child.connection.recv() if in_time else None
        except (EOFError, OSError):  # (its pipe closed: it died)
            self._discard(child)
            raise child.ended() from None
        if not started:
            self._discard(child)
            raise ChildProcessError("the handler's child process did not start the call")
        if answer is None:
            self._discard(child)
            raise TimeLimitExceeded(
                f"time limit exceeded: the handler ran past {time_limit:g}s in its child "
                "process, which was killed"
            )
        if answer[0] == "returned":
            return answer[1]
        if answer[0] == "raised":
            raise answer[1]
        _unsent, kind, message, trace, what = answer
        if what == "returned":
            raise TypeError(f"the handler's result cannot be sent back from its process: {kind}")
        raise HandlerError(kind, message, trace)

    def _child(self) -> _Child:
        child: _Child | None = getattr(self._local, "child", None)
        if child is None or not child.process.is_alive():
            if child is not None:
                self._discard(child)
            with self._lock:
                if self._closed:
                    raise RuntimeError("the worker's child processes are closed")
                child = _Child(self._context)
                self._children.add(child)
            self._local.child = child
        return child

    def _discard(self, child: _Child) -> None:
        child.kill()
        with self._lock:
            self._children.discard(child)
        if getattr(self._local, "child", None) is child:
            self._local.child = None

    def close(self) -> None:
        """Stop every child and wait for it: none is left."""
        with self._lock:
            self._closed = True
            children = list(self._children)
            self._children.clear()
        for child in children:
            child.stop()
