"""Handlers the tests of ``work(processes=N)`` run in child processes: a child imports them
by module and name (tests/ is on the parent's ``sys.path``, which children get)."""

from __future__ import annotations

import os
import pathlib
import resource
import signal
import socket
import time
from typing import Any

from fdbqueue import Queue, Subspace


def double(value: Any) -> Any:
    """Twice the value's number, with the child's process id."""
    return {"twice": value["n"] * 2, "pid": os.getpid()}


def _note_pid(value: Any) -> None:
    pathlib.Path(value["pid_file"]).write_text(str(os.getpid()))


def behave(value: Any) -> Any:
    """What ``value["how"]`` says: hang in a pure-Python loop, in a C call or on a socket;
    end the process; exhaust its memory; sleep a little, then return; fail."""
    how = value["how"]
    if "pid_file" in value:
        _note_pid(value)
    if how == "busy":
        while True:
            pass
    if how == "sleep":  # a blocking C call
        time.sleep(3600)
    if how == "socket":  # a stuck socket: nobody ever writes to it
        left, _right = socket.socketpair()
        left.recv(1)
    if how == "exit":
        os._exit(3)
    if how == "signal":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "memory":
        resource.setrlimit(resource.RLIMIT_AS, (512 * 2**20, resource.RLIM_INFINITY))
        hoard = bytearray(2**31)
        return len(hoard)
    if how == "nap":
        time.sleep(value["seconds"])
        return "rested"
    if how == "fail":
        raise ValueError("failed in the child")
    return how


#: A queue of tasks, as an application's module keeps them (its subspace: the test's).
tasks_queue = Queue(Subspace(("process-tasks",)), codec="json")


@tasks_queue.task
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b, "pid": os.getpid()}
