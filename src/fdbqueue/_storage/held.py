"""Values held outside the queue: the encoded values of leased and dead-lettered items.

When an item leaves the queue without leaving fdbqueue (claimed under a lease, or moved to the
dead letters), its encoded value moves, unchanged, to a key of its own::

    P + b"\\xff" + pack(("held", id))  ->  the encoded value, exactly as it was stored

and the small record that says what the item is (a lease, a dead letter) points to
it by ``id`` (bytes). The value is never re-packed together with other fields, so every value
the queue accepted (up to FoundationDB's 100,000-byte value limit, whatever bytes it holds)
fits wherever it goes, and moving a lease to the dead letters moves only its record.

Source followed: FoundationDB's developer guide on data modeling (large values are split from
their metadata; keys stay short).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fdb.subspace_impl import Subspace

from fdbqueue import _keycodec

__all__ = ["HeldValues"]


class HeldValues:
    """The held values of one queue, in ``metadata["held"]``.

    Args:
        metadata: the queue's metadata subspace.
    """

    def __init__(self, metadata: Subspace) -> None:
        self.subspace = metadata["held"]
        self.prefix: bytes = self.subspace.key()
        # :meth:`key`'s packing, its prefix bound (the methods below call it without
        # :meth:`key`'s own call)
        self._key: Callable[[bytes], bytes] = functools.partial(_keycodec.pack_bytes, self.prefix)

    def key(self, held_id: bytes) -> bytes:
        """The key of the value held under ``held_id``: ``subspace.pack((held_id,))``, packed
        by the key codec (:mod:`fdbqueue._keycodec`)."""
        return self._key(held_id)

    def put(self, tr: Any, held_id: bytes, encoded: bytes) -> None:
        """Hold ``encoded`` under ``held_id``. Cost: one set."""
        tr[self._key(held_id)] = encoded

    def get(self, tr: Any, held_id: bytes) -> Any:
        """Start reading the value held under ``held_id``: the binding's future-like Value
        (use ``.present()`` and ``bytes(...)``). Cost: one point read, through ``tr`` (pass
        ``tr.snapshot`` for no read conflict)."""
        return tr.get(self._key(held_id))

    def drop(self, tr: Any, held_id: bytes) -> None:
        """Remove the value held under ``held_id``. Cost: one clear."""
        del tr[self._key(held_id)]
