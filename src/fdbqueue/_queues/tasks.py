"""Tasks by name: a function registered on a queue, submitted as a job by its name and run by
a worker that has it (rq enqueues a function; Celery has ``@app.task``, dramatiq ``@actor``).

A task call is the value of the job's item, encoded by the queue's codec, so that any program
can submit one, in any language, by writing the value below:

* with the tuple codec, the tuple ``("fdbqueue.task", name, args, kwargs)``: ``args`` a tuple
  of the positional arguments, ``kwargs`` a tuple of ``(name, value)`` pairs;
* with any other codec (JSON above all), the mapping ``{"task": name, "args": [...],
  "kwargs": {...}}``.

A queue whose values are bytes (``codec="raw"``) cannot hold a task call: its ``task`` and
``submit_task`` raise TypeError.

The tasks of a queue are registered in the process, by the queue's subspace: every queue
object of that subspace in the process sees them (a worker started by ``fdbqueue work --tasks
MODULE`` finds those the module's decorators registered). A worker given no handler runs each
job's task by its name, looked up when the job runs; a job whose task is not registered there,
or whose value is not a task call, fails at once with :class:`~fdbqueue.errors.UnknownTaskError`
and ends ``dead`` on that delivery, the name in its error: never dropped silently, never
retried for ever.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar

from fdbqueue._delivery.processes import ChildCall, FunctionReference
from fdbqueue.errors import UnknownTaskError

__all__ = [
    "TUPLE_MARKER",
    "Task",
    "child_call",
    "parse_task_call",
    "registered_tasks",
    "task_call",
    "task_runner",
]

P = ParamSpec("P")
R = TypeVar("R")

#: The first element of a task call in the tuple codec's form.
TUPLE_MARKER = "fdbqueue.task"
#: The codecs whose values cannot hold a task call (bytes only).
_BYTES_CODECS = {"raw"}

_lock = threading.Lock()
#: The process's tasks: per queue (its subspace's key), per name.
_TASKS: dict[bytes, dict[str, Task[Any, Any]]] = {}


class Task(Generic[P, R]):
    """A function registered as a task of a queue (``@queue.task``): called, it runs the
    function here; :meth:`submit` submits a job that a worker runs by the task's ``name``.

    Attributes:
        name: the task's name, as jobs carry it (the function's ``__name__`` unless given).
        function: the function a worker calls with the job's arguments.
        queue: the queue it was registered on.
    """

    def __init__(
        self, queue: Any, function: Callable[P, R], name: str, submit_options: dict[str, Any]
    ) -> None:
        self.queue = queue
        self.function = function
        self.name = name
        self._submit_options = submit_options
        functools.update_wrapper(self, function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here and now, as it was written (no job)."""
        return self.function(*args, **kwargs)

    def submit(self, tr: Any, /, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Submit a job that runs this task with ``args`` and ``kwargs`` (encoded with the
        queue's codec: they must be values it can encode), in ``tr`` (a Database, Tenant or
        Transaction, as :meth:`fdbqueue.Queue.submit`); the decorator's options (a
        PriorityQueue's ``priority``) apply. Returns the :class:`~fdbqueue.Job`.

        Raises:
            TypeError, ValueError: arguments the codec cannot encode, or as
                :meth:`fdbqueue.Queue.submit` (nothing is written).

        Cost: :meth:`fdbqueue.Queue.submit`'s, with the task call's encoding."""
        return self.queue.submit_task(tr, self.name, args, kwargs, **self._submit_options)

    def __repr__(self) -> str:
        return f"<Task {self.name!r} of {self.queue!r}>"


def check_task_name(name: Any) -> str:
    """``name`` if it is a non-empty str; TypeError or ValueError otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"a task's name must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError("a task's name must not be empty")
    return name


def check_codec_holds_tasks(queue: Any) -> None:
    """Raise TypeError when ``queue``'s codec cannot hold a task call (its values are
    bytes)."""
    if getattr(queue.codec, "name", None) in _BYTES_CODECS:
        raise TypeError(
            f"a queue whose codec is {queue.codec.name!r} holds bytes, not task calls: make "
            "the queue with codec='json' (or 'tuple') to use tasks"
        )


def register(
    queue: Any,
    function: Callable[P, R],
    name: str | None,
    submit_options: dict[str, Any],
) -> Task[P, R]:
    """Register ``function`` as the task ``name`` (its ``__name__`` when None) of ``queue``
    in this process, and return it.

    Raises:
        TypeError: ``function`` is not callable, the name is not a str, or the queue's codec
            holds bytes.
        ValueError: the name is empty, or another function is registered under it already
            (the same function, by module and qualified name, registered again replaces it:
            a module imported twice).
    """
    if not callable(function):
        raise TypeError(f"a task must be a function, not {type(function).__name__}")
    check_codec_holds_tasks(queue)
    task_name = check_task_name(getattr(function, "__name__", None) if name is None else name)
    task = Task(queue, function, task_name, submit_options)
    with _lock:
        tasks = _TASKS.setdefault(queue.subspace.key(), {})
        earlier = tasks.get(task_name)
        if earlier is not None and _origin(earlier.function) != _origin(function):
            raise ValueError(
                f"the task name {task_name!r} is taken on this queue by "
                f"{_origin(earlier.function)}: give {_origin(function)} another (name=...)"
            )
        tasks[task_name] = task
    return task


def decorate(queue: Any, function: Any, name: str | None, submit_options: dict[str, Any]) -> Any:
    """``queue.task``: the Task of ``function`` registered (:func:`register`), or, with no
    ``function`` (``@queue.task(name=...)``), the decorator that registers it."""
    if function is None:
        return lambda given: register(queue, given, name, submit_options)
    return register(queue, function, name, submit_options)


def _origin(function: Any) -> str:
    module = getattr(function, "__module__", None) or "?"
    return f"{module}.{getattr(function, '__qualname__', type(function).__name__)}"


def registered_tasks(queue: Any) -> Mapping[str, Task[Any, Any]]:
    """The tasks registered on ``queue``'s subspace in this process, by name (a copy)."""
    with _lock:
        return dict(_TASKS.get(queue.subspace.key(), {}))


def task_call(
    queue: Any, name: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None
) -> Any:
    """The value of a job that runs the task ``name`` with ``args`` and ``kwargs``, in the
    form ``queue``'s codec holds (see the module docstring).

    Raises:
        TypeError: the codec holds bytes, ``args`` is not a list or tuple, ``kwargs`` not a
            mapping with str keys, or the name not a str.
        ValueError: an empty name.
    """
    check_codec_holds_tasks(queue)
    check_task_name(name)
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"a task's args must be a list or tuple, not {type(args).__name__}")
    given: Mapping[str, Any] = {} if kwargs is None else kwargs
    if not isinstance(given, Mapping) or not all(isinstance(key, str) for key in given):
        raise TypeError("a task's kwargs must be a mapping of str keys")
    if getattr(queue.codec, "name", None) == "tuple":
        return (TUPLE_MARKER, name, tuple(args), tuple(given.items()))
    return {"task": name, "args": list(args), "kwargs": dict(given)}


def parse_task_call(value: Any) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """The task's name, args and kwargs of a task call (either form).

    Raises:
        UnknownTaskError: ``value`` is not a task call.
    """
    try:
        if isinstance(value, tuple) and value[:1] == (TUPLE_MARKER,):
            _marker, name, args, pairs = value
            kwargs = {str(key): item for key, item in pairs}
            if not all(isinstance(key, str) for key, _item in pairs):
                raise TypeError("kwargs' names")
        elif isinstance(value, Mapping) and set(value) == {"task", "args", "kwargs"}:
            name, args, kwargs = value["task"], value["args"], value["kwargs"]
            if not isinstance(kwargs, Mapping):
                raise TypeError("kwargs")
            kwargs = dict(kwargs)
        else:
            raise TypeError("its shape")
        if not isinstance(name, str) or not isinstance(args, (list, tuple)):
            raise TypeError("its name or args")
    except (TypeError, ValueError) as error:
        raise UnknownTaskError(
            f"the job's value is not a task call ({error}): a worker without a handler runs "
            "jobs submitted as tasks (submit_task, or a task's submit)"
        ) from None
    return name, tuple(args), kwargs


def find_task(queue: Any, name: str) -> Task[Any, Any]:
    """The task ``name`` of ``queue`` in this process.

    Raises:
        UnknownTaskError: none is registered under that name (the error names it, and the
            names that are).
    """
    with _lock:
        task = _TASKS.get(queue.subspace.key(), {}).get(name)
        known = sorted(_TASKS.get(queue.subspace.key(), {}))
    if task is None:
        listed = ", ".join(repr(known_name) for known_name in known) or "none"
        raise UnknownTaskError(
            f"no task named {name!r} is registered in this worker's process (registered: "
            f"{listed}); import the module that defines it (fdbqueue work --tasks MODULE)"
        )
    return task


def child_call(queue: Any, value: Any) -> ChildCall:
    """The call a child process makes for a job whose value is ``value`` (``work(...,
    processes=N)`` without a handler): its task's function, by module and name, with the
    task call's arguments.

    Raises:
        UnknownTaskError: the value is not a task call, or its task is not registered here.
        TypeError: the task's function cannot be imported by a child (a nested function).
    """
    name, args, kwargs = parse_task_call(value)
    return ChildCall(FunctionReference.of(find_task(queue, name).function), args, kwargs)


def task_runner(queue: Any, transactional: bool) -> Callable[..., Any]:
    """The handler of a worker given none: it runs each job's task by name, looked up when
    the job runs (``function(*args, **kwargs)``; with ``transactional``,
    ``function(tr, *args, **kwargs)`` inside the acknowledging transaction), and returns
    what the function returned.

    Raises (in the handler):
        UnknownTaskError: the value is not a task call, or its task is not registered.
    """
    if transactional:

        def run_in(tr: Any, value: Any) -> Any:
            name, args, kwargs = parse_task_call(value)
            return find_task(queue, name).function(tr, *args, **kwargs)

        return run_in

    def run(value: Any) -> Any:
        name, args, kwargs = parse_task_call(value)
        return find_task(queue, name).function(*args, **kwargs)

    return run


def coroutine_task_runner(queue: Any) -> Callable[..., Any]:
    """The asyncio worker's handler when it is given none: as :func:`task_runner`, awaiting
    a task that is a coroutine function; a plain task runs in a thread
    (``asyncio.to_thread``).

    Raises:
        TypeError: ``queue``'s codec holds bytes, not task calls."""
    import asyncio

    check_codec_holds_tasks(queue)

    async def run(value: Any) -> Any:
        name, args, kwargs = parse_task_call(value)
        function = find_task(queue, name).function
        if inspect.iscoroutinefunction(function):
            return await function(*args, **kwargs)
        return await asyncio.to_thread(function, *args, **kwargs)

    return run
