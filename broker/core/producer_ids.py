"""Producer ids for idempotent producers, from blocks claimed in ZooKeeper (Kafka 2.8's
ZooKeeper-based ProducerIdManager).

How it works: `/latest_producer_id_block` holds the last block any broker claimed, as
Kafka writes it: `{"version":1,"broker":B,"block_start":"S","block_end":"E"}` (the bounds
as strings, as Kafka writes them). A broker that needs ids reads the node and its
version, computes the next block (`next_block`: the `BLOCK_SIZE` ids after the last
block's end, or 0..999 when there is none) and writes it with a conditional set on that
version (a create when the node is missing); losing the race to another broker means
reading again. `ProducerIdGenerator` hands out the ids of the block it holds, one per
InitProducerId, and says when it needs a new block. The shell does the I/O:
`broker/zookeeper/gateway.py` `claim_producer_id_block` (the read and conditional write) and
`broker/handlers/producer_ids.py` `init_producer_id` (one claim at a time, under a lock).
"""

from __future__ import annotations

import json
from typing import NamedTuple

__all__ = [
    "BLOCK_SIZE",
    "ProducerIdBlock",
    "ProducerIdGenerator",
    "ProducerIdBlockError",
    "decode_block",
    "encode_block",
    "next_block",
]

# Kafka's ProducerIdManager.PidBlockSize.
BLOCK_SIZE = 1000
_INT64_MAX = (1 << 63) - 1
_VERSION = 1


class ProducerIdBlockError(ValueError):
    """The znode does not hold a block, or the id space is exhausted."""


class ProducerIdBlock(NamedTuple):
    broker_id: int
    start: int  # first id of the block
    end: int  # last id of the block (inclusive)


def encode_block(block: ProducerIdBlock) -> bytes:
    return json.dumps(
        {
            "version": _VERSION,
            "broker": block.broker_id,
            "block_start": str(block.start),
            "block_end": str(block.end),
        }
    ).encode()


def decode_block(data: bytes) -> ProducerIdBlock:
    try:
        node = json.loads(data)
        return ProducerIdBlock(
            int(node["broker"]), int(node["block_start"]), int(node["block_end"])
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ProducerIdBlockError(f"/latest_producer_id_block is malformed: {exc}") from None


def next_block(
    current: bytes | None, broker_id: int, block_size: int = BLOCK_SIZE
) -> ProducerIdBlock:
    """The block after the one in `current` (the znode's data; None or empty: the first)."""
    if not current:
        return ProducerIdBlock(broker_id, 0, block_size - 1)
    last = decode_block(current)
    if last.end > _INT64_MAX - block_size:
        raise ProducerIdBlockError("the producer id space is exhausted")
    return ProducerIdBlock(broker_id, last.end + 1, last.end + block_size)


class ProducerIdGenerator:
    """The ids of the block this broker holds, in order."""

    def __init__(self) -> None:
        self._block: ProducerIdBlock | None = None
        self._next = 0

    @property
    def needs_block(self) -> bool:
        return self._block is None or self._next > self._block.end

    def use_block(self, block: ProducerIdBlock) -> None:
        self._block = block
        self._next = block.start

    def next_id(self) -> int:
        """The next id; `needs_block` must be False."""
        if self.needs_block:
            raise ProducerIdBlockError("no producer id block: claim one first")
        pid = self._next
        self._next += 1
        return pid
