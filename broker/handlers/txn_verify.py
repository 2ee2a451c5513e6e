"""The produce path's transactional checks, before anything is appended (both listeners
come through broker/handlers/data_plane.py): Kafka's rule that transactional records
name their transactional id, and KIP-890 part 1's verification (the anomaly it prevents
is in broker/core/txn_verification.py's docstring).

How it works: `verify_transactional_writes` reads the batch headers of each partition's
records until the first transactional one (no record is decoded). A transactional batch
in a request without a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (what Kafka 2.8 answers). A transactional batch
whose producer has no transaction open on that partition here (the first batch of a
transaction on it; this broker must lead it) is verified with
`ReplicaManager.txn_verifier.verify(transactional_id, producer_id, producer_epoch,
partitions)`, once per producer id and epoch of the request. Each partition answered
with an error is taken out of the request and answered with that error; the others are
appended as usual. Plain batches cost a header read each.
"""

from __future__ import annotations

from broker.core.delayed_produce import ProduceResult
from broker.core.replica_manager import ReplicaManager
from client.protocol.errors import ErrorCode
from client.protocol.records import ATTR_TRANSACTIONAL, BatchHeader, RecordError, iter_batches
from client.protocol.types import TopicPartition

__all__ = ["verify_transactional_writes"]


async def verify_transactional_writes(
    rm: ReplicaManager, transactional_id: str | None, entries: dict[TopicPartition, bytes]
) -> dict[TopicPartition, ProduceResult]:
    """Check `entries`' transactional batches; remove the refused partitions from
    `entries` and return their results."""
    refused: dict[TopicPartition, ProduceResult] = {}
    first_writes: dict[tuple[int, int], list[TopicPartition]] = {}
    for tp, records in entries.items():
        header = _first_transactional(records)
        if header is None:
            continue
        if transactional_id is None:
            refused[tp] = ProduceResult(
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                error_message="transactional records without a transactional id",
            )
            continue
        partition = rm.get_partition(tp)
        if partition is None or not partition.is_leader or header.producer_id < 0:
            continue  # the append answers the error
        entry = partition.log.producer_state.entry(header.producer_id)
        if entry is None or entry.current_txn_first_offset < 0:
            key = (header.producer_id, header.producer_epoch)
            first_writes.setdefault(key, []).append(tp)
    if transactional_id is not None:
        for (producer_id, epoch), partitions in first_writes.items():
            answers = await rm.txn_verifier.verify(transactional_id, producer_id, epoch, partitions)
            for tp in partitions:
                code = ErrorCode.from_code(int(answers.get(tp, 0)))
                if code is not ErrorCode.NONE:
                    refused[tp] = ProduceResult(
                        code, error_message="the transaction coordinator did not verify it"
                    )
    for tp in refused:
        del entries[tp]
    return refused


def _first_transactional(records: bytes) -> BatchHeader | None:
    """The header of the first transactional batch of `records`; None when there is none
    (or the bytes are damaged: the log refuses them with the right error)."""
    try:
        for _, header in iter_batches(records):
            if header.attributes & ATTR_TRANSACTIONAL:
                return header
    except RecordError:
        return None
    return None
