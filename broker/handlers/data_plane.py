"""The data plane: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords.

How it works: each handler turns the request into one call on the sans-IO
`ReplicaManager`, made synchronously before any `await`, so requests of one connection
reach the core in the order they arrived. A response that has to wait (an acks=all
produce, a fetch waiting for bytes, a DeleteRecords waiting for the followers) comes
back as a `Reply` that the core's callback fills; an acks=0 produce answers nothing
(`NO_RESPONSE`). A partition this broker does not host but the cluster has is answered
NOT_LEADER_OR_FOLLOWER (stale metadata, retriable), as Kafka does. These are the
broker's tuned paths: no work per record here, only per partition. A transactional
batch is first checked by `txn_verify.py` (KIP-890: a transaction's first write to a
partition is verified with its coordinator before it is appended).

A Fetch goes through the fetch sessions first (KIP-227, core/fetch_sessions.py): its
session id and epoch pick the context that says which partitions to read (for an
incremental fetch, the whole session) and which to answer, with what session id.
A fetch may name topics by id (Kafka's Fetch v13+): each partition's request keeps the
id (so does the session), and the answer names every topic as it was asked; an id no
topic has, or that its name's topic no longer has, is answered UNKNOWN_TOPIC_ID.
A consumer's `rack_id` (KIP-392) goes to the core as `FetchParams.client_rack`; a
partition the leader sends elsewhere is answered with its `preferred_read_replica`. A
fetch with client metadata but no rack (a Kafka Fetch v11+ with rack_id "") is served
by the leader itself, or by a follower it is sent to, as Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.core.delayed_fetch import FetchParams, FetchPartitionRequest
from broker.core.fetch_sessions import FetchAnswer, FetchManager
from broker.core.metadata_cache import MetadataCache
from broker.core.replica_manager import ReplicaManager
from broker.handlers.txn_verify import verify_transactional_writes
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.topic_ids import ZERO_TOPIC_ID_BYTES, topic_id_of_bytes
from client.protocol.types import TopicPartition
from server_common.network import NO_RESPONSE, Reply, error_answer

# Longest a fetch may wait in purgatory, whatever the client asks (Kafka has no cap but
# the client's request timeout; a cap keeps a confused client from pinning memory).
MAX_FETCH_WAIT_MS = 60_000


class DataPlaneHandlers:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        clock: Callable[[], int],
        fetch_sessions: FetchManager,
    ) -> None:
        self.rm = replica_manager
        self.cache = metadata_cache
        self.now_ms = clock
        self.fetch_sessions = fetch_sessions

    # -- produce --------------------------------------------------------------------
    async def produce(self, request: m.ProduceRequest) -> Any:
        entries: dict[TopicPartition, bytes] = {}
        for topic in request.topics:
            for part in topic.partitions:
                entries[TopicPartition(topic.name, part.partition)] = part.records
        refused = await verify_transactional_writes(self.rm, request.transactional_id, entries)
        now = self.now_ms()
        if request.acks == 0:
            self.rm.append_records(
                now, acks=0, timeout_ms=0, entries=entries, respond=lambda results: None
            )
            return NO_RESPONSE
        reply = Reply()

        def respond(results) -> None:
            reply.set(self._produce_response({**refused, **results}))

        self.rm.append_records(
            now,
            acks=request.acks,
            timeout_ms=request.timeout_ms,
            entries=entries,
            respond=respond,
        )
        return reply

    # -- DeleteRecords ----------------------------------------------------------------
    async def delete_records(self, request: m.DeleteRecordsRequest) -> Any:
        """The leader moves each partition's log start offset; the answer waits until the
        in-sync followers have too (core/delayed_delete_records.py)."""
        offsets: dict[TopicPartition, int] = {}
        for topic in request.topics:
            for part in topic.partitions:
                offsets[TopicPartition(topic.name, part.partition_index)] = part.offset
        reply = Reply()

        def respond(results) -> None:
            by_topic: dict[str, list[m.DeleteRecordsResponsePartition]] = {}
            for tp, result in results.items():
                by_topic.setdefault(tp.topic, []).append(
                    m.DeleteRecordsResponsePartition(
                        partition_index=tp.partition,
                        low_watermark=result.low_watermark,
                        error_code=self._not_hosted_code(tp, result.error_code),
                    )
                )
            reply.set(
                m.DeleteRecordsResponse(
                    throttle_time_ms=0,
                    topics=[
                        m.DeleteRecordsResponseTopic(name=name, partitions=parts)
                        for name, parts in by_topic.items()
                    ],
                )
            )

        self.rm.delete_records(
            self.now_ms(), timeout_ms=request.timeout_ms, offsets=offsets, respond=respond
        )
        return reply

    def _produce_response(self, results) -> m.ProduceResponse:
        by_topic: dict[str, list[m.ProduceResponsePartition]] = {}
        for tp, result in results.items():
            code = self._not_hosted_code(tp, result.error_code)
            by_topic.setdefault(tp.topic, []).append(
                m.ProduceResponsePartition(
                    partition=tp.partition,
                    error_code=code,
                    base_offset=result.base_offset,
                    log_append_time_ms=result.log_append_time_ms,
                    log_start_offset=result.log_start_offset,
                    error_message=result.error_message if code else None,
                )
            )
        return m.ProduceResponse(
            topics=[
                m.ProduceResponseTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()
            ],
            throttle_time_ms=0,
        )

    def _not_hosted_code(self, tp: TopicPartition, code: int) -> ErrorCode:
        """A partition we don't host but the cluster has is a stale-metadata problem
        (retriable NOT_LEADER_OR_FOLLOWER), not an unknown partition (Kafka does this)."""
        code = ErrorCode.from_code(code)
        if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self.cache.contains_partition(tp):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return code

    # -- fetch ----------------------------------------------------------------------
    async def fetch(self, request: m.FetchRequest) -> Any:
        if request.max_wait_ms < 0 or request.min_bytes < 0 or request.max_bytes < 0:
            return error_answer(ErrorCode.INVALID_REQUEST, "negative wait or size")
        params = FetchParams(
            replica_id=request.replica_id,
            max_wait_ms=min(request.max_wait_ms, MAX_FETCH_WAIT_MS),
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            client_rack=request.rack_id if request.replica_id < 0 else "",
            client_metadata=request.replica_id < 0 and request.client_metadata,
            isolation_level=request.isolation_level,
        )
        partitions: dict[TopicPartition, FetchPartitionRequest] = {}
        unknown_ids: dict[bytes, list[int]] = {}  # topics named by an id nobody has
        for topic in request.topics:
            name = self._topic_name(topic.topic, topic.topic_id)
            if name is None:
                unknown_ids.setdefault(topic.topic_id, []).extend(
                    part.partition for part in topic.partitions
                )
                continue
            topic_id = b"" if topic.topic_id == ZERO_TOPIC_ID_BYTES else topic.topic_id
            for part in topic.partitions:
                if part.partition_max_bytes < 0:
                    return error_answer(ErrorCode.INVALID_REQUEST, "negative partition_max_bytes")
                partitions[TopicPartition(name, part.partition)] = FetchPartitionRequest(
                    fetch_offset=part.fetch_offset,
                    current_leader_epoch=part.current_leader_epoch,
                    partition_max_bytes=part.partition_max_bytes,
                    log_start_offset=part.log_start_offset,
                    topic_id=topic_id,
                )
        forgotten = [
            TopicPartition(name, partition)
            for topic in request.forgotten_topics_data
            if (name := self._topic_name(topic.topic, topic.topic_id)) is not None
            for partition in topic.partitions
        ]
        now = self.now_ms()
        context = self.fetch_sessions.new_context(
            now,
            request.session_id,
            request.session_epoch,
            partitions,
            forgotten,
            from_follower=params.from_follower,
        )
        reply = Reply()

        def respond(results) -> None:
            answer = context.respond(results, self.now_ms())
            reply.set(self._fetch_response(answer, context.partitions, unknown_ids))

        self.rm.fetch_messages(now, params, context.partitions, respond)
        return reply

    def _topic_name(self, name: str, topic_id: bytes) -> str | None:
        """The topic a fetch names, by name or (Kafka's Fetch v13+) by id; None for an
        id this broker does not know."""
        if topic_id == ZERO_TOPIC_ID_BYTES:
            return name
        return self.cache.topic_name(topic_id_of_bytes(topic_id))

    def _fetch_response(
        self,
        answer: FetchAnswer,
        requests: dict[TopicPartition, FetchPartitionRequest],
        unknown_ids: dict[bytes, list[int]],
    ) -> m.FetchResponse:
        """The answer, each topic named as the fetcher named it. A partition asked by a
        topic id that now belongs to no topic, or to another topic of the same name
        (deleted and created again since), is answered UNKNOWN_TOPIC_ID without data:
        the fetcher refreshes its metadata."""
        by_topic: dict[tuple[str, bytes], list[m.FetchResponsePartition]] = {}
        for tp, result in answer.partitions.items():
            asked = requests.get(tp)
            topic_id = asked.topic_id if asked is not None else b""
            code = self._not_hosted_code(tp, result.error_code)
            records = result.records
            if topic_id and self.cache.topic_id(tp.topic).bytes != topic_id:
                code, records = ErrorCode.UNKNOWN_TOPIC_ID, b""
            by_topic.setdefault((tp.topic, topic_id), []).append(
                m.FetchResponsePartition(
                    partition=tp.partition,
                    error_code=code,
                    high_watermark=result.high_watermark,
                    last_stable_offset=result.last_stable_offset
                    if result.last_stable_offset >= 0
                    else result.high_watermark,
                    log_start_offset=result.log_start_offset,
                    records=records,
                    preferred_read_replica=result.preferred_read_replica,
                    aborted_transactions=[
                        m.AbortedTransaction(producer_id=pid, first_offset=first)
                        for pid, first in result.aborted_transactions
                    ],
                )
            )
        topics = [
            m.FetchResponseTopic(
                topic=name, partitions=parts, topic_id=topic_id or ZERO_TOPIC_ID_BYTES
            )
            for (name, topic_id), parts in by_topic.items()
        ]
        for topic_id, partition_ids in unknown_ids.items():
            topics.append(
                m.FetchResponseTopic(
                    topic="",
                    topic_id=topic_id,
                    partitions=[
                        m.FetchResponsePartition(
                            partition=partition,
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                            high_watermark=-1,
                            last_stable_offset=-1,
                            log_start_offset=-1,
                            records=b"",
                        )
                        for partition in partition_ids
                    ],
                )
            )
        return m.FetchResponse(
            throttle_time_ms=0,
            error_code=answer.error_code,
            topics=topics,
            session_id=answer.session_id,
        )

    # -- offsets --------------------------------------------------------------------
    async def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        topics = []
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition)
                code, timestamp, offset, epoch = self.rm.list_offset(
                    tp,
                    part.timestamp,
                    part.current_leader_epoch,
                    from_consumer=request.replica_id < 0,
                    read_committed=request.isolation_level == 1,
                )
                parts.append(
                    m.ListOffsetsResponsePartition(
                        partition=part.partition,
                        error_code=self._not_hosted_code(tp, code),
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                )
            topics.append(m.ListOffsetsResponseTopic(name=topic.name, partitions=parts))
        return m.ListOffsetsResponse(topics=topics)

    async def offset_for_leader_epoch(
        self, request: m.OffsetForLeaderEpochRequest
    ) -> m.OffsetForLeaderEpochResponse:
        topics = []
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                code, epoch, end = self.rm.last_offset_for_leader_epoch(
                    tp, part.current_leader_epoch, part.leader_epoch
                )
                parts.append(
                    m.OffsetForLeaderEpochResponsePartition(
                        error_code=self._not_hosted_code(tp, code),
                        partition=part.partition,
                        leader_epoch=epoch,
                        end_offset=end,
                    )
                )
            topics.append(m.OffsetForLeaderEpochResponseTopic(topic=topic.topic, partitions=parts))
        return m.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
