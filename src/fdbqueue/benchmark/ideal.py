"""The side-by-side ideal: C consumers each taking from a private queue of its own.

What a perfectly partitioned queue would reach on this machine, under the same latency model,
interpreter and threads: no two consumers share a key, so none conflicts or reads what
another wrote. For every phase and consumer count C the benchmark runs :data:`PRIVATE` right
before the modes of that C (so conditions are alike): C plain ``Queue`` s in subspaces of
their own, each drained by one consumer with plain dequeues; in the drain phase the N items
are preloaded spread evenly over the C queues, in the steady phase the producers enqueue
their batches to the C queues in turn. Every row then shows the private run's items/s at its
C as ``ideal/s``, its items/s over that as ``of ideal``, and its CPU per item over the
private run's as ``cpu vs ideal`` (:func:`compare_with_ideal`).
"""

from __future__ import annotations

from fdbqueue import Queue
from fdbqueue.benchmark.measurement import Result
from fdbqueue.benchmark.workload import Mode, calls, dequeue, enqueue_batch

__all__ = ["PRIVATE", "compare_with_ideal"]

#: The private run's mode: plain dequeues; :func:`fdbqueue.benchmark.measurement.run` with
#: ``private=True`` gives each consumer a queue of its own.
PRIVATE = Mode("private", Queue, enqueue_batch, calls(dequeue), None)


def compare_with_ideal(results: list[Result]) -> None:
    """Set every result's ``ideal_per_second``, ``of_ideal`` and ``cpu_vs_ideal`` from the
    :data:`PRIVATE` result of the same phase, load shape and C in ``results`` (the private results
    included: 1.0 each); left None where there is no private result, or where it took no
    time or no CPU.

    Cost: O(len(results)).
    """
    ideals = {(r.phase, r.load, r.consumers): r for r in results if r.mode == PRIVATE.name}
    for result in results:
        ideal = ideals.get((result.phase, result.load, result.consumers))
        if ideal is None:
            continue
        result.ideal_per_second = ideal.items_per_second
        if ideal.items_per_second > 0:
            result.of_ideal = result.items_per_second / ideal.items_per_second
        if ideal.cpu_ms_per_item > 0:
            result.cpu_vs_ideal = result.cpu_ms_per_item / ideal.cpu_ms_per_item
