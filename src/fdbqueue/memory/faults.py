"""Fault injection for the in-memory database: commits that fail as they can on a cluster.

Source followed: FoundationDB's error codes (``api-error-codes.rst``) and its developer guide
on transactions with unknown results.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COMMIT_UNKNOWN_RESULT", "NOT_COMMITTED", "TRANSACTION_TOO_OLD", "Faults"]

NOT_COMMITTED = 1020
COMMIT_UNKNOWN_RESULT = 1021
TRANSACTION_TOO_OLD = 1007


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

    Raises:
        ValueError: a probability is not a number in ``[0, 1]``, or they sum to more than 1.
    """

    not_committed: float = 0.0
    commit_unknown_result: float = 0.0
    transaction_too_old: float = 0.0

    def __post_init__(self) -> None:
        for name in ("not_committed", "commit_unknown_result", "transaction_too_old"):
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
        return self.not_committed + self.commit_unknown_result + self.transaction_too_old

    def pick(self, draw: float) -> int | None:
        """The fault (an error code) that a uniform ``draw`` in ``[0, 1)`` selects, or None."""
        for code, probability in (
            (NOT_COMMITTED, self.not_committed),
            (COMMIT_UNKNOWN_RESULT, self.commit_unknown_result),
            (TRANSACTION_TOO_OLD, self.transaction_too_old),
        ):
            if draw < probability:
                return code
            draw -= probability
        return None
