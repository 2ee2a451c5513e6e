"""Length-prefixed frames: a 4-byte big-endian unsigned length, then that many bytes.

How it works: `encode_frame` prefixes a payload. `FrameDecoder` is a receive buffer in
the style of h11's: `feed()` appends bytes to one bytearray, `next_frame()` reads a length
at a read cursor and, once the whole frame is there, copies it out once and moves the
cursor. The consumed prefix is dropped only when it is large relative to the buffer, so
many small frames cost O(total bytes) and a huge frame arriving in small pieces is
appended, not re-copied, on every `feed()` (no quadratic behaviour either way). A length
over the limit raises `FrameTooLargeError` as soon as its 4 bytes are in, before any body
is buffered for it. `incomplete_frame()` tells a server the size of a frame whose body is
still coming, so it can reserve that much memory before reading more of it.

With `assemble_large=True` (the native protocol's connections) a frame of at least
`LARGE_FRAME_BYTES` is assembled apart: once its length is known and more of it arrives,
what the buffer holds of it is taken out, later pieces are kept as the bytes objects
they arrived in, and `next_frame()` joins them once. A 1 MiB fetch response is then
copied once on its way in instead of twice (into the buffer, then out of it), and never
zero-filled. This starts on the `feed()` after the one that brought the length, so a
server has reserved the frame's memory by then.
"""

from __future__ import annotations

import struct
from typing import final

from client.protocol.errors import FrameTooLargeError

# Kafka's `socket.request.max.bytes` default (104857600): the largest request a broker
# accepts. Big enough for a Produce carrying several MiB-sized batches, small enough that
# a garbage length prefix cannot make us buffer gigabytes.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024

LENGTH_PREFIX = struct.Struct(">I")
PREFIX_BYTES = LENGTH_PREFIX.size
MAX_ENCODABLE_FRAME_BYTES = (1 << 32) - 1

# Drop the consumed prefix of the buffer once it is at least this big and at least half
# of the buffer: amortised O(1) per byte, without shifting the buffer on every frame.
_COMPACT_MIN_BYTES = 64 * 1024
# Below this size slicing the bytearray (copying twice) is cheaper than a memoryview.
_SMALL_FRAME_BYTES = 4096
# Frames at least this big are assembled in place (`assemble_large`).
LARGE_FRAME_BYTES = 256 * 1024


@final
class FrameParts(list[bytes | bytearray | memoryview]):
    """A frame as the buffers to send one after the other (its length prefix first), so
    that big record batches go to the socket as they are instead of being copied into
    one contiguous frame. (Final: code tells it from a plain frame by `type(x) is`.)"""

    @property
    def nbytes(self) -> int:
        return sum(len(part) for part in self)


def encode_frame(payload: bytes) -> bytes:
    """The frame for `payload` (length prefix + payload)."""
    if len(payload) > MAX_ENCODABLE_FRAME_BYTES:
        raise FrameTooLargeError(len(payload), MAX_ENCODABLE_FRAME_BYTES)
    return LENGTH_PREFIX.pack(len(payload)) + payload


class FrameDecoder:
    """Collects bytes and hands out complete frame bodies in order."""

    def __init__(
        self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, *, assemble_large: bool = False
    ) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        self._assemble_large = assemble_large
        self._buffer = bytearray()
        self._start = 0  # read cursor: bytes before it are consumed
        # A large frame's body as received pieces (then `_buffer` holds only bytes after
        # it), its length and how much of it is still to come.
        self._large: list[bytes] | None = None
        self._large_length = 0
        self._large_missing = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet handed out (a partial frame, or whole unread ones)."""
        pending = len(self._buffer) - self._start
        if self._large is not None:
            pending += PREFIX_BYTES + self._large_length - self._large_missing
        return pending

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._assemble_large and self._large is None:
            self._start_large_frame()
        large = self._large
        if large is not None and self._large_missing:
            take = min(len(data), self._large_missing)
            self._large_missing -= take
            if take == len(data):
                large.append(data if type(data) is bytes else bytes(data))
                return
            with memoryview(data) as view:
                large.append(view[:take].tobytes())
                self._buffer += view[take:]
            return
        self._buffer += data

    def _start_large_frame(self) -> None:
        """Move the incomplete large frame at the read cursor, if any, out of the buffer:
        its pieces are kept as received and joined once when the last one is in."""
        buffer = self._buffer
        start = self._start
        available = len(buffer) - start
        if available < PREFIX_BYTES:
            return
        (length,) = LENGTH_PREFIX.unpack_from(buffer, start)
        if length < LARGE_FRAME_BYTES or length > self.max_frame_bytes:
            return  # small, or next_frame() raises FrameTooLargeError
        if available >= PREFIX_BYTES + length:
            return  # already complete
        with memoryview(buffer) as view:
            head = view[start + PREFIX_BYTES :].tobytes()
        self._large = [head]
        self._large_length = length
        self._large_missing = length - len(head)
        self._buffer = bytearray()
        self._start = 0

    def incomplete_frame(self) -> tuple[int, int] | None:
        """(frame size with its prefix, bytes of it buffered) for the next frame when its
        length is known but its body is not all in; None otherwise. A server reserves
        that size (a memory pool) before it reads more, and reads no further than the
        frame's end."""
        if self._large is not None:
            if self._large_missing:
                total = PREFIX_BYTES + self._large_length
                return total, total - self._large_missing
            return None
        available = len(self._buffer) - self._start
        if available < PREFIX_BYTES:
            return None
        (length,) = LENGTH_PREFIX.unpack_from(self._buffer, self._start)
        total = PREFIX_BYTES + length
        return (total, available) if available < total else None

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or None until more bytes arrive.

        Raises `FrameTooLargeError` (and keeps raising) if the next length is over the limit.
        """
        if self._large is not None:
            if self._large_missing:
                return None
            frame = b"".join(self._large)  # the one copy of a large frame
            self._large = None
            return frame
        buffer = self._buffer
        start = self._start
        available = len(buffer) - start
        if available < PREFIX_BYTES:
            return None
        (length,) = LENGTH_PREFIX.unpack_from(buffer, start)
        if length > self.max_frame_bytes:
            raise FrameTooLargeError(length, self.max_frame_bytes)
        end = start + PREFIX_BYTES + length
        if len(buffer) < end:
            return None
        if length <= _SMALL_FRAME_BYTES:
            frame = bytes(buffer[start + PREFIX_BYTES : end])  # two tiny copies beat a view
        else:
            with memoryview(buffer) as view:  # one copy, and the view is released at once
                frame = view[start + PREFIX_BYTES : end].tobytes()
        self._consume_to(end)
        return frame

    def _consume_to(self, position: int) -> None:
        if position == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        elif position >= _COMPACT_MIN_BYTES and position * 2 >= len(self._buffer):
            del self._buffer[:position]
            self._start = 0
        else:
            self._start = position


# What some well-known servers say first (or answer to a line), for telling a user which
# kind of server they reached instead of a Tributary broker.
_FOREIGN_GREETINGS = (
    (b"HTTP/", "an HTTP server"),
    (b"SSH-", "an SSH server"),
    (b"220 ", "an SMTP or FTP server"),
    (b"-ERR", "a Redis server"),
    (b"+OK", "a POP3 or Redis server"),
    (b"\x15\x03", "a TLS server"),
    (b"\x16\x03", "a TLS server"),
)
# Bytes of the peer's first answer quoted in the message.
_QUOTED_BYTES = 40


def describe_foreign_peer(first_bytes: bytes) -> str:
    """What a peer whose first bytes are not a Tributary frame looks like: "it answered
    like an HTTP server ('HTTP/1.1 404 Not Found')" or "its first bytes were b'...'"."""
    head = bytes(first_bytes[:_QUOTED_BYTES])
    first_line = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0]
    for prefix, kind in _FOREIGN_GREETINGS:
        if head.startswith(prefix):
            if first_line.isascii() and first_line.decode("ascii").isprintable():
                return f"it answered like {kind} ({first_line.decode('ascii')!r})"
            return f"it answered like {kind}"
    return f"its first bytes were {head!r}"
