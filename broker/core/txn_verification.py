"""KIP-890 part 1: a partition leader verifies a transaction's first write to a partition
with the transaction coordinator before appending it.

The anomaly it prevents (KAFKA-17754, found by Jepsen's Bufstream analysis): a
transactional producer's write can arrive at a partition leader late, after its
transaction was committed or aborted (a retried Produce, or one delayed in the network,
whose AddPartitionsToTxn raced it). Without a check the leader appends it, the batch
opens a *new* transaction on that partition that no coordinator knows of, and no marker
will ever end it: the data lands outside its transaction (read by read_committed
consumers as part of whatever commits next, or hanging the LSO until the producer is
expired). So before appending a transactional batch whose producer has no transaction
open on the partition yet (the first batch of a transaction there), the produce path
asks `ReplicaManager.txn_verifier.verify(...)` (both listeners share the handler,
broker/handlers/data_plane.py) whether the coordinator really has this partition in the
producer's ongoing transaction, at this epoch; a partition answered with an error is not
appended and gets that error in the Produce response.

`TransactionVerifier` is the seam: the transaction coordinator's wiring sets the
broker's verifier (one that sends AddPartitionsToTxn with `verify_only`); until then
`ALLOW_ALL` answers NONE for every partition. No I/O here.
"""

from __future__ import annotations

from typing import Protocol

from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

__all__ = ["ALLOW_ALL", "AllowAll", "TransactionVerifier"]


class TransactionVerifier(Protocol):
    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """The error of each partition (NONE: it is in the ongoing transaction); a
        partition missing from the answer counts as NONE."""
        ...


class AllowAll:
    """The verifier of a broker without a transaction coordinator: every write passes."""

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        return {tp: ErrorCode.NONE for tp in partitions}


ALLOW_ALL: TransactionVerifier = AllowAll()
