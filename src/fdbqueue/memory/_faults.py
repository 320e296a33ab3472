"""Fault injection for the in-memory database: commits that fail as they can on a cluster.

Source followed: FoundationDB's error codes (``api-error-codes.rst``), its developer guide on
transactions with unknown results, and the client's commit path (``fdbclient/NativeAPI.actor.cpp``
``tryCommit`` and ``commitDummyTransaction``; ``fdbclient/ReadYourWrites.cpp``
``simulateTimeoutInFlightCommit``) and cluster recovery (``ClusterRecovery.cpp``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "COMMIT_UNKNOWN_RESULT",
    "NOT_COMMITTED",
    "TIMED_OUT",
    "TRANSACTION_TOO_OLD",
    "Faults",
]

NOT_COMMITTED = 1020
COMMIT_UNKNOWN_RESULT = 1021
TRANSACTION_TOO_OLD = 1007
TIMED_OUT = 1031

#: The fields of :class:`Faults`, in the order a draw selects them, with the error each
#: reports (``recovery`` reports 1021 too).
_KINDS = (
    ("not_committed", NOT_COMMITTED),
    ("commit_unknown_result", COMMIT_UNKNOWN_RESULT),
    ("transaction_too_old", TRANSACTION_TOO_OLD),
    ("timed_out", TIMED_OUT),
    ("recovery", COMMIT_UNKNOWN_RESULT),
)


@dataclass(frozen=True)
class Faults:
    """Probabilities (each in ``[0, 1]``, together at most 1) that a commit fails on purpose.

    Only commits that write (mutations or write conflict ranges) can fail: upstream, a
    read-only commit never reaches the resolver, so it never fails. One random draw per
    writing commit, from the database's seeded random generator, picks at most one fault:

    Args:
        not_committed: the commit fails with 1020 ``not_committed`` and is not applied, as if
            it had conflicted.
        commit_unknown_result: the commit fails with 1021 ``commit_unknown_result``; a second
            draw applies it or not, each half the time, and the caller cannot tell which (as
            when a proxy fails mid-commit). Either way the outcome is final before the error
            is raised, as upstream's client ensures before it reports 1021.
        transaction_too_old: the commit fails with 1007 ``transaction_too_old`` and is not
            applied.
        timed_out: the commit fails with 1031 ``transaction_timed_out`` (not retryable). A
            second draw decides: half the time it is not applied; the other half it stays *in
            flight*, as upstream's client leaves a commit it stopped waiting for, and lands
            later unless something makes it fail first. Each later writing commit first
            resolves each commit in flight with probability 1/2, exactly as a commit arriving
            then would be resolved: dropped if a commit since its read version wrote into its
            read conflict ranges (1020), or if it has read conflict ranges and its read
            version is more than five seconds old (1007); else applied at a new version.
            :meth:`Database.settle` resolves them all at once.
        recovery: a cluster recovery during the commit. It fails with 1021; a second draw
            applies it or not, each half the time, final before the error is raised. The
            version clock then jumps 100 seconds (100,000,000 versions, upstream's
            ``MAX_VERSIONS_IN_FLIGHT``), so every transaction holding an older read version
            gets 1007 at its next read or at a commit with read conflict ranges; every commit
            in flight is dropped; every outstanding watch fires (a spurious wake-up).
        recovery_seconds: how long a recovery makes the database unavailable, as a cluster
            is while a new generation is recruited (seconds on a real cluster): read version
            requests and commits issued meanwhile wait until it ends, so recoveries come at
            most once per ``recovery_seconds`` whatever the rate, and versions advance at
            most ``100 / recovery_seconds`` seconds' worth per second. Default 0.02, short
            for tests; 0 makes recoveries instant (and a high rate can then advance versions
            past any limit measured in versions, such as a receipt's lifetime).

    Raises:
        ValueError: a probability is not a number in ``[0, 1]``, they sum to more than 1, or
            ``recovery_seconds`` is not a number of seconds in ``[0, 3600]``.
    """

    not_committed: float = 0.0
    commit_unknown_result: float = 0.0
    transaction_too_old: float = 0.0
    timed_out: float = 0.0
    recovery: float = 0.0
    recovery_seconds: float = 0.02

    def __post_init__(self) -> None:
        duration = self.recovery_seconds
        if isinstance(duration, bool) or not isinstance(duration, (int, float)):
            raise ValueError(f"Faults.recovery_seconds must be a number, not {duration!r}")
        if not 0.0 <= duration <= 3600.0:  # NaN fails this too
            raise ValueError(f"Faults.recovery_seconds must be in [0, 3600], not {duration}")
        for name, _code in _KINDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"Faults.{name} must be a probability, not {value!r}")
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"Faults.{name} must be between 0 and 1, not {value}")
        if self.total > 1.0 + 1e-12:
            raise ValueError(f"the fault probabilities sum to {self.total}, more than 1")

    @property
    def total(self) -> float:
        """The probability that a writing commit fails on purpose."""
        return (
            self.not_committed
            + self.commit_unknown_result
            + self.transaction_too_old
            + self.timed_out
            + self.recovery
        )

    def choose(self, draw: float) -> str | None:
        """The fault (a field name) that a uniform ``draw`` in ``[0, 1)`` selects, or None."""
        for name, _code in _KINDS:
            probability: float = getattr(self, name)
            if draw < probability:
                return name
            draw -= probability
        return None

    def pick(self, draw: float) -> int | None:
        """The error code of the fault that a uniform ``draw`` in ``[0, 1)`` selects, or
        None (``recovery`` reports 1021, as ``commit_unknown_result`` does)."""
        name = self.choose(draw)
        return None if name is None else dict(_KINDS)[name]
