"""Which keys a transaction may read and write: the key and value size limits and the system
keys (the ``access_system_keys`` and ``read_system_keys`` options).

Upstream rules: ``CLIENT_KNOBS->KEY_SIZE_LIMIT`` and ``SYSTEM_KEY_SIZE_LIMIT`` through
``getMaxWriteKeySize`` (``fdbclient/ReadYourWrites.cpp``), the 100,000-byte value limit, and
2004 ``key_outside_legal_range`` for keys from ``b"\\xff"`` on without those options, except
``\\xff/metadataVersion`` (upstream ``metadataVersionKey``), readable and watchable by all.
"""

from __future__ import annotations

from fdbqueue.memory._errors import FDBError

__all__ = ["KeyAccess", "max_key_bytes"]

MAX_KEY_BYTES = 10_000  # upstream CLIENT_KNOBS->KEY_SIZE_LIMIT
MAX_SYSTEM_KEY_BYTES = 30_000  # upstream CLIENT_KNOBS->SYSTEM_KEY_SIZE_LIMIT
MAX_VALUE_BYTES = 100_000
SYSTEM_KEYS = b"\xff"
MAX_SYSTEM_KEY = b"\xff\xff"
#: Readable and watchable without the system-key options (upstream ``metadataVersionKey``).
METADATA_VERSION_KEY = b"\xff/metadataVersion"


def max_key_bytes(key: bytes) -> int:
    """Upstream's ``getMaxWriteKeySize``: system keys may be longer."""
    return MAX_SYSTEM_KEY_BYTES if key.startswith(SYSTEM_KEYS) else MAX_KEY_BYTES


class KeyAccess:
    """A transaction's access to the system keys: none, ``"read"`` or ``"write"``. Not a
    persistent option: upstream ``resetRyow`` drops it, so ``on_error`` and ``reset()`` do."""

    __slots__ = ("level",)

    def __init__(self) -> None:
        self.level: str | None = None

    def reset(self) -> None:
        """Back to no access to the system keys."""
        self.level = None

    def allow_write(self) -> None:
        """``access_system_keys``: read and write keys from ``b"\\xff"`` on."""
        self.level = "write"

    def allow_read(self) -> None:
        """``read_system_keys``: read keys from ``b"\\xff"`` on (no change after write)."""
        if self.level is None:
            self.level = "read"

    @property
    def writes_system(self) -> bool:
        """True when keys from ``b"\\xff"`` on may be written."""
        return self.level == "write"

    def read_top(self) -> bytes:
        """The end of the readable keys."""
        return MAX_SYSTEM_KEY if self.level else SYSTEM_KEYS

    def write_top(self) -> bytes:
        """The end of the writable keys (clear ranges, write conflict ranges)."""
        return MAX_SYSTEM_KEY if self.level == "write" else SYSTEM_KEYS

    def unreadable(self, key: bytes) -> bool:
        """True when reading or watching ``key`` raises 2004."""
        return key >= self.read_top() and key != METADATA_VERSION_KEY

    def write_error(self, key: bytes, param: bytes) -> FDBError | None:
        """The error a write of ``key`` with value (or parameter) ``param`` defers: 2004 for a
        system key without ``access_system_keys``, 2102 for a key too long, 2103 for a value
        over 100,000 bytes; None when the write may go ahead."""
        if key >= SYSTEM_KEYS and not self.writes_system:
            return FDBError(2004)
        if len(key) > max_key_bytes(key):
            return FDBError(2102)
        if len(param) > MAX_VALUE_BYTES:
            return FDBError(2103)
        return None
