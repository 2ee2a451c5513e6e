"""WriteTxnMarkers (27): the transaction coordinator asks partition leaders to end a
producer's transaction with a COMMIT or ABORT marker (Kafka's
KafkaApis.handleWriteTxnMarkersRequest).

How it works: for each marker of the request (one producer id, epoch, result and
coordinator epoch, and its partitions) the handler builds one control batch per
partition (`client.protocol.records.build_control_batch`) and appends them as leader
with `ReplicaManager.append_records(..., acks=-1, origin="coordinator")`: the log checks
the marker against the producer state (an older producer epoch is
INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED), and
the answer waits, as Kafka's, until the ISR has the marker (acks=all). A partition this
broker does not lead is NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION when the
cluster has no such partition). Once a marker is written and replicated, every callable
in `ReplicaManager.txn_marker_listeners` is called with (partition, producer id,
committed): the group coordinator completes transactional offset commits there. The
response comes when every marker of the request is answered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from broker.core.delayed_produce import ProduceResult
from broker.core.metadata_cache import MetadataCache
from broker.core.replica_manager import ReplicaManager
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import build_control_batch
from client.protocol.types import TopicPartition
from server_common.network import Reply

logger = logging.getLogger(__name__)

# How long a marker waits for the ISR (Kafka uses the broker's request.timeout.ms).
MARKER_TIMEOUT_MS = 30_000


class TxnMarkerHandlers:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        clock: Callable[[], int],
    ) -> None:
        self.rm = replica_manager
        self.cache = metadata_cache
        self.now_ms = clock

    async def write_txn_markers(self, request: m.WriteTxnMarkersRequest) -> Any:
        markers = request.markers
        answers: list[dict[TopicPartition, ErrorCode]] = [{} for _ in markers]
        reply = Reply()
        waiting = [len(markers)]

        def answered() -> None:
            waiting[0] -= 1
            if waiting[0] == 0:
                reply.set(self._response(markers, answers))

        for marker, answer in zip(markers, answers, strict=True):
            self._write(marker, answer, answered)
        if not markers:
            return m.WriteTxnMarkersResponse(markers=[])
        return reply

    def _write(
        self,
        marker: m.WritableTxnMarker,
        answer: dict[TopicPartition, ErrorCode],
        answered: Callable[[], None],
    ) -> None:
        now = self.now_ms()
        entries: dict[TopicPartition, bytes] = {}
        for topic in marker.topics:
            for partition in topic.partition_indexes:
                tp = TopicPartition(topic.name, partition)
                if not self.cache.contains_partition(tp):
                    answer[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                entries[tp] = build_control_batch(
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.transaction_result,
                    marker.coordinator_epoch,
                    now,
                )
        if not entries:
            answered()
            return

        def respond(results: dict[TopicPartition, ProduceResult]) -> None:
            for tp, result in results.items():
                code = ErrorCode.from_code(result.error_code)
                if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # the cluster has it: not here
                answer[tp] = code
                if code is ErrorCode.NONE:
                    self._notify(tp, marker.producer_id, marker.transaction_result)
                else:
                    logger.info(
                        "%s: marker of producer %d not written: %s (%s)",
                        tp,
                        marker.producer_id,
                        code.name,
                        result.error_message,
                    )
            answered()

        self.rm.append_records(
            now,
            acks=-1,
            timeout_ms=MARKER_TIMEOUT_MS,
            entries=entries,
            respond=respond,
            origin="coordinator",
        )

    def _notify(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        for listener in list(self.rm.txn_marker_listeners):
            try:
                listener(tp, producer_id, committed)
            except Exception:  # a listener's bug must not fail the marker or the broker
                logger.exception("%s: transaction marker listener failed", tp)

    @staticmethod
    def _response(
        markers: list[m.WritableTxnMarker], answers: list[dict[TopicPartition, ErrorCode]]
    ) -> m.WriteTxnMarkersResponse:
        results = []
        for marker, answer in zip(markers, answers, strict=True):
            by_topic: dict[str, list[m.WritableTxnMarkerPartitionResult]] = {}
            for tp, code in answer.items():
                by_topic.setdefault(tp.topic, []).append(
                    m.WritableTxnMarkerPartitionResult(
                        partition_index=tp.partition, error_code=code
                    )
                )
            results.append(
                m.WritableTxnMarkerResult(
                    producer_id=marker.producer_id,
                    topics=[
                        m.WritableTxnMarkerTopicResult(name=name, partitions=parts)
                        for name, parts in by_topic.items()
                    ],
                )
            )
        return m.WriteTxnMarkersResponse(markers=results)
