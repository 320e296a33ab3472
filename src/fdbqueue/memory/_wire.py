"""The wire between a connected client (:mod:`fdbqueue.memory._remote`) and a server process
(:mod:`fdbqueue.memory._serving`): addresses, the hello, and frames.

A connection starts with the client's hello: the 16 bytes :data:`MAGIC`, then one frame of
``("hello", PROTOCOL, token or None)``; the server answers ``("ok", PROTOCOL)`` or
``("refused", reason)`` and closes. Anything else (an HTTP request, a wrong token, another
protocol) is refused before anything more is read: the server reads the magic, then at most
:data:`HELLO_BYTES` of hello.

Frames are a 4-byte big-endian length then the payload, a tuple in MessagePack (the
``msgpack`` library: nested arrays, read back as tuples, of bytes, str, int, float, bool and
None; 20 times cheaper to pack and read than the tuple layer, which the first protocol used),
which decodes data only, never objects (no pickle, no marshal): a hostile peer can send
bytes, not code. Frames over :data:`MAX_FRAME_BYTES` close the connection.

After the hello, the client sends requests ``(id, operation, counts, arguments)`` (``counts``:
the statistics the client counted since its last request, ``((name, amount), ...)``) and the
server answers ``(id, status, result)``: status 0 with the result, 1 with an FDBError code, 2
with ``(exception type name, message)``. A watch that fires or fails is told with
``(0, "watch", watch id, code)`` (0: it fired).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any

import msgpack

__all__ = [
    "DEFAULT_PORT",
    "HELLO_BYTES",
    "MAGIC",
    "MAX_FRAME_BYTES",
    "PROTOCOL",
    "FrameReader",
    "encode",
    "format_address",
    "is_loopback",
    "parse_address",
    "receive_exactly",
]

#: What every connection starts with.
MAGIC = b"fdbqueue.memory\n"
#: The protocol version the hello carries; a server refuses other versions (1: frames in
#: the tuple layer's encoding; 2: in MessagePack).
PROTOCOL = 2
#: The server's default port.
DEFAULT_PORT = 4690
#: The most bytes a hello frame may have.
HELLO_BYTES = 4096
#: The most bytes a frame may have (a transaction is at most 10,000,000 bytes).
MAX_FRAME_BYTES = 64 * 1024 * 1024
SCHEME = "memory://"

_ADDRESS = re.compile(
    r"memory://(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9.\-_]+)):(?P<port>\d{1,5})"
)


def parse_address(address: str) -> tuple[str, int]:
    """The host and port of ``memory://HOST:PORT`` (an IPv6 host in brackets:
    ``memory://[::1]:4690``).

    Raises:
        ValueError: anything else, in one line naming the expected form.
    """
    match = _ADDRESS.fullmatch(address) if isinstance(address, str) else None
    port = int(match.group("port")) if match else 0
    if match is None or not 0 < port < 65536:
        raise ValueError(
            f"not an fdbqueue.memory server address: {address!r}; expected memory://HOST:PORT "
            "(for example memory://127.0.0.1:4690), as `fdbqueue memory serve` prints it"
        )
    return match.group("ipv6") or match.group("host"), port


def format_address(host: str, port: int) -> str:
    """``memory://HOST:PORT`` (IPv6 hosts in brackets)."""
    return f"{SCHEME}[{host}]:{port}" if ":" in host else f"{SCHEME}{host}:{port}"


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback address (no other machine
    can reach a server bound there). Cost: one name resolution for a name."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos
    )


def encode(message: tuple[Any, ...]) -> bytes:
    """A frame of ``message``: its length, then its MessagePack encoding.

    Raises:
        TypeError: ``message`` holds a value of another type than the frames carry.
    """
    payload: bytes = msgpack.packb(message, use_bin_type=True)  # (a Packer is one thread's)
    return len(payload).to_bytes(4, "big") + payload


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes from ``sock`` (its timeout applies to each ``recv``).

    Raises:
        ConnectionError: the peer closed the connection first.
        OSError: the socket's error (``TimeoutError`` when its timeout ran out).
    """
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks += chunk
    return bytes(chunks)


class FrameReader:
    """Splits received bytes into decoded messages."""

    def __init__(self, limit: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._limit = limit

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        """The messages completed by ``data``.

        Raises:
            ValueError: a frame over the limit, or one that does not decode to a tuple.
        """
        buffer = self._buffer
        buffer += data
        messages: list[tuple[Any, ...]] = []
        start = 0
        while len(buffer) - start >= 4:
            size = int.from_bytes(buffer[start : start + 4], "big")
            if size > self._limit:
                raise ValueError(f"a frame of {size} bytes, over the limit of {self._limit}")
            if len(buffer) - start - 4 < size:
                break
            messages.append(decode(bytes(buffer[start + 4 : start + 4 + size])))
            start += 4 + size
        del buffer[:start]
        return messages


def decode(payload: bytes) -> tuple[Any, ...]:
    """The message of one frame's payload.

    Raises:
        ValueError: it does not decode to a tuple (a malformed or hostile frame).
    """
    try:
        message = msgpack.unpackb(payload, use_list=False, raw=False, strict_map_key=True)
    except Exception as error:  # msgpack raises several types on bad input
        raise ValueError(f"a malformed frame ({type(error).__name__})") from None
    if not isinstance(message, tuple):
        raise ValueError(f"a malformed frame (a {type(message).__name__}, not an array)")
    return message
