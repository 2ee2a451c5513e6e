"""The core's one exception type: a Kafka error code plus a message.

Core methods raise `PartitionError` for expected, per-partition failures (not leader,
fenced epoch, not enough replicas...). The replica manager turns it into that
partition's error code in the response; it never escapes to the network layer.
"""

from __future__ import annotations

from client.protocol.errors import ErrorCode


class PartitionError(Exception):
    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(message or code.name)
        self.code = code
        self.message = message or code.name
