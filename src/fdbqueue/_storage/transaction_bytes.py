"""How many bytes a transaction's writes cost, counted the way FoundationDB counts them.

FoundationDB refuses a commit whose size exceeds 10,000,000 bytes (error 2101
``transaction_too_large``). The size is not just keys and values: the client adds up its
mutations, its read conflict ranges and its write conflict ranges, and each of those carries a
fixed overhead (the size of the structure that holds it). A ``set`` therefore costs its key and
value, about 40 bytes for the mutation, and a write conflict range ``[key, key + b"\\x00")`` of
about 32 bytes plus twice the key.

fdbqueue uses these figures to keep the transactions it builds itself (batches, serving
transactions, requeues of dead letters) inside the limit, and to refuse with a ValueError, before
anything is written, a batch that one transaction cannot hold.

Source followed: ``fdbclient/NativeAPI.actor.cpp`` (``Transaction::getSize``: mutations plus
read and write conflict ranges, each ``VectorRef`` element counting ``sizeof`` its type) and
FoundationDB's "Known limitations" (large transactions: conflict ranges count as affected data).
"""

from __future__ import annotations

__all__ = [
    "CONFLICT_RANGE_OVERHEAD",
    "LIBRARY_TRANSACTION_BUDGET",
    "MAX_TRANSACTION_BYTES",
    "MUTATION_OVERHEAD",
    "atomic_bytes",
    "clear_bytes",
    "read_conflict_bytes",
    "set_bytes",
]

#: FoundationDB's limit on one transaction's size, in bytes (2101 ``transaction_too_large``).
MAX_TRANSACTION_BYTES = 10_000_000
#: What one mutation costs beyond its parameters (``sizeof(MutationRef)``, 40 bytes in 7.x).
MUTATION_OVERHEAD = 40
#: What one conflict range costs beyond its two keys (``sizeof(KeyRangeRef)``, 32 bytes).
CONFLICT_RANGE_OVERHEAD = 32
#: The most bytes a transaction fdbqueue builds by itself (a serving transaction, a requeue of
#: dead letters, a batch of quarantined items) lets its own writes reach before it stops and
#: leaves the rest to the next transaction: half the limit, so that receipts, counters and
#: conflict ranges always fit beside them.
LIBRARY_TRANSACTION_BUDGET = MAX_TRANSACTION_BYTES // 2


def set_bytes(key_length: int, value_length: int) -> int:
    """Bytes a ``set`` of a key and value of these lengths adds to a transaction.

    The mutation (overhead, key, value) plus its write conflict range ``[key, key + b"\\x00")``.
    """
    return MUTATION_OVERHEAD + key_length + value_length + read_conflict_bytes(key_length)


def clear_bytes(key_length: int) -> int:
    """Bytes a ``clear`` of one key of this length adds to a transaction.

    Upstream turns a single-key clear into a range clear ``[key, key + b"\\x00")``, so both the
    mutation and its write conflict range hold the key twice.
    """
    return MUTATION_OVERHEAD + 2 * key_length + 1 + read_conflict_bytes(key_length)


def atomic_bytes(key_length: int, parameter_length: int) -> int:
    """Bytes an atomic operation adds (repeats of one kind on one key are counted once
    upstream; count it once per key)."""
    return set_bytes(key_length, parameter_length)


def read_conflict_bytes(key_length: int) -> int:
    """Bytes a conflict range on one key (``[key, key + b"\\x00")``) adds to a transaction."""
    return CONFLICT_RANGE_OVERHEAD + 2 * key_length + 1
