"""Keys as people read them (how log records, metrics and the command line name a key), and
FoundationDB's limit on their size."""

from __future__ import annotations

import fdb.tuple

__all__ = ["MAX_KEY_BYTES", "describe_key"]

#: FoundationDB's limit on the size of a key, in bytes (error 2102 ``key_too_large``).
MAX_KEY_BYTES = 10_000


def describe_key(key: bytes) -> str:
    """A key as people read it: the tuple it packs (``('app', 'jobs', 3, b'...')``); a queue's
    metadata key as its prefix's tuple, ``0xff`` and the tuple after it (``('app', 'jobs') +
    0xff + ('type',)``: the tuple layer would read the prefix's final NUL and the 0xff as an
    escaped NUL inside its last string); or its bytes when it is not a packed tuple."""
    marker = key.find(b"\x00\xff")
    while marker >= 0:
        try:
            head, tail = fdb.tuple.unpack(key[: marker + 1]), fdb.tuple.unpack(key[marker + 2 :])
        except Exception:  # an escaped NUL inside a string after all: look further
            marker = key.find(b"\x00\xff", marker + 2)
            continue
        return f"{head!r} + 0xff + {tail!r}"
    try:
        return repr(fdb.tuple.unpack(key))
    except Exception:  # the tuple layer raises several types on bytes it cannot read
        return repr(key)
