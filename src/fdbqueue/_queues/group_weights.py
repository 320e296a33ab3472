"""Weights of message groups: ``set_group_weight`` and ``group_weight`` on every queue type.

:class:`GroupWeights` holds the two methods (:class:`~fdbqueue.Queue` and
:class:`~fdbqueue.PriorityQueue` inherit them). A group of weight ``w`` is served up to ``w``
items in a row each turn, where a group of weight 1 (the default) is served one
(:mod:`fdbqueue._storage.groups`). The weight is recorded in the group's shard, so every
consumer of the queue, in any process, serves the group the same way.

Source followed: weighted round robin (a group's share of the takes is its weight over the
sum of the weights of the groups waiting), as SQS fair queues and QuiCK leave to the
application.
"""

from __future__ import annotations

from typing import Any

from fdbqueue._queues.shards import Parts
from fdbqueue._storage.groups import Group
from fdbqueue._transactions.transactional import TransactionContext, require_writable, transactional

__all__ = ["MAX_GROUP_WEIGHT", "GroupWeights", "check_weight"]

#: The largest weight a group may have.
MAX_GROUP_WEIGHT = 1_000


def check_weight(weight: Any) -> int:
    """Return ``weight`` when it is an int from 1 to :data:`MAX_GROUP_WEIGHT`.

    Raises:
        TypeError: not an int (a bool is refused).
        ValueError: out of that range.
    """
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise TypeError(f"weight must be an int, not {type(weight).__name__}")
    if not 1 <= weight <= MAX_GROUP_WEIGHT:
        raise ValueError(f"weight must be from 1 to {MAX_GROUP_WEIGHT:,}, not {weight}")
    return weight


class GroupWeights:
    """The weights of a queue's message groups (see the module docstring)."""

    _parts: Parts[Any]

    @transactional
    def set_group_weight(self, tr: TransactionContext, group: Group, weight: int) -> None:
        """Serve ``group`` up to ``weight`` items in a row each turn (1, the default: one),
        from its next turn on; recorded with the queue, it holds for every consumer.

        Args:
            tr: a Database, Tenant or Transaction.
            group: the group (a str, bytes, int or tuple), with items or not yet.
            weight: an int from 1 to :data:`MAX_GROUP_WEIGHT`.

        Raises:
            TypeError, ValueError: a bad ``group`` or ``weight``; nothing is written.

        Cost: one set (a clear for 1), no read: no conflicts. Under leases a group still has
        one item in flight; its weight keeps its place in the turns while that item is
        processed, so it is served ``weight`` items in a row all the same.
        """
        checked = check_weight(weight)
        part = self._parts.for_group(group)
        require_writable(tr, "set_group_weight")
        part._store.groups.set_weight(tr, group, checked)

    @transactional
    def group_weight(self, tr: TransactionContext, group: Group) -> int:
        """Return ``group``'s weight (1 unless set). Raises TypeError or ValueError for a bad
        ``group``. Cost: a snapshot point read."""
        part = self._parts.for_group(group)
        weight: int = part._store.groups.weight(tr, group)
        return weight
