"""The admin client's requests to partition leaders: offsets, and deleting records.

How it works: ListOffsets and DeleteRecords go to each partition's leader, one request
per leader for its partitions, in rounds: after a round, the partitions whose leader
could not be reached or answered that it no longer leads (`_STALE_LEADER`) are asked
again after a metadata refresh, until the timeout. `list_offsets` raises for a topic
that does not exist and for any other error; `delete_records` maps each partition to its
new low watermark or its error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import trio

from client.admin.base import AdminBase
from client.connection import BrokerConnectionError
from client.list_offsets import list_offsets_from
from client.metadata import ClusterView, UnknownTopicError
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import PartitionKey, TopicPartition

# ListOffsets answers that mean "the leader we asked is stale: refresh and retry".
_STALE_LEADER = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)
_LIST_OFFSETS_SPECS = {
    "earliest": m.EARLIEST_TIMESTAMP,
    "latest": m.LATEST_TIMESTAMP,
    "max-timestamp": m.MAX_TIMESTAMP,
}


class OffsetAdmin(AdminBase):
    """Partitions' offsets and record deletion (a mixin of `client.admin.Admin`)."""

    async def list_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], spec: str | int = "latest"
    ) -> dict[TopicPartition, int]:
        """Each partition's "earliest" (log start) or "latest" (high watermark) offset, the
        offset of its record with the largest timestamp ("max-timestamp", KIP-734), or
        with an int timestamp (ms) the first offset at or after it (-1: none). Asks each
        partition's leader; retries after a metadata refresh while leaders move, for up to
        the request timeout. Raises `UnknownTopicError`, or the broker's error."""
        if isinstance(spec, str):
            if spec not in _LIST_OFFSETS_SPECS:
                raise ValueError(
                    f"spec must be 'earliest', 'latest', 'max-timestamp' or a timestamp, "
                    f"not {spec!r}"
                )
            timestamp = _LIST_OFFSETS_SPECS[spec]
        else:
            timestamp = int(spec)
        remaining = {TopicPartition(*tp) for tp in partitions}
        found: dict[TopicPartition, int] = {}
        last: BaseException | None = None
        cluster = await self._fresh_cluster()
        with trio.move_on_after(self.request_timeout_ms / 1000):
            while remaining:
                for topic in {tp.topic for tp in remaining}:
                    if cluster.partitions_for(topic) is None and cluster.topic_error(topic) in (
                        None,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ):
                        raise UnknownTopicError(topic)
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in sorted(remaining):
                    info = cluster.leader_for(tp)
                    if info is not None:
                        by_leader.setdefault(info.leader, []).append(tp)
                for leader, tps in by_leader.items():
                    try:
                        answers = await self._list_offsets_from(cluster, leader, tps, timestamp)
                    except BrokerConnectionError as exc:
                        last = exc
                        continue
                    for tp, (code, offset) in answers.items():
                        if tp not in remaining:
                            continue
                        if code is ErrorCode.NONE:
                            found[tp] = offset
                            remaining.discard(tp)
                        elif code in _STALE_LEADER or code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                            last = TributaryError(code, f"listing offsets of {tp}")
                        else:
                            raise TributaryError(code, f"listing offsets of {tp}")
                if remaining:
                    await trio.sleep(self.retry_backoff_ms / 1000)
                    cluster = await self._fresh_cluster()
            return found
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"no offsets for {', '.join(map(str, sorted(remaining)))} within "
            f"{self.request_timeout_ms:g} ms" + (f" (last error: {last})" if last else ""),
        )

    async def delete_records(
        self,
        offsets: Mapping[PartitionKey, int],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, int | TributaryError]:
        """Delete every record below `offsets[tp]` (-1: below the high watermark), as
        Kafka's deleteRecords: one DeleteRecords per leader; retried after a metadata
        refresh while leaders move, for up to the timeout. Each partition maps to its new
        low watermark (log start offset) or the error it got."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        remaining = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        out: dict[TopicPartition, int | TributaryError] = {}
        cluster = await self._fresh_cluster()
        with trio.move_on_after(timeout_ms / 1000 + 5):
            while remaining:
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in sorted(remaining):
                    if cluster.partitions_for(tp.topic) is None and cluster.topic_error(
                        tp.topic
                    ) in (None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        out[tp] = UnknownTopicError(tp.topic)
                        del remaining[tp]
                        continue
                    info = cluster.leader_for(tp)
                    if info is not None:
                        by_leader.setdefault(info.leader, []).append(tp)
                for leader, tps in by_leader.items():
                    broker = cluster.broker(leader)
                    if broker is None:
                        continue
                    request = m.DeleteRecordsRequest(
                        topics=[
                            m.DeleteRecordsTopic(
                                name=topic,
                                partitions=[
                                    m.DeleteRecordsPartition(
                                        partition_index=tp.partition, offset=remaining[tp]
                                    )
                                    for tp in tps
                                    if tp.topic == topic
                                ],
                            )
                            for topic in sorted({tp.topic for tp in tps})
                        ],
                        timeout_ms=int(timeout_ms),
                    )
                    try:
                        response = await self._pool.request(
                            *broker.address, request, timeout_s=timeout_ms / 1000 + 5
                        )
                    except BrokerConnectionError:
                        continue
                    for topic in response.topics:
                        for part in topic.partitions:
                            tp = TopicPartition(topic.name, part.partition_index)
                            if tp not in remaining:
                                continue
                            code = ErrorCode.from_code(part.error_code)
                            if code in _STALE_LEADER:
                                continue
                            del remaining[tp]
                            if code is ErrorCode.NONE:
                                out[tp] = part.low_watermark
                            else:
                                out[tp] = TributaryError(code, f"deleting records of {tp}")
                if remaining:
                    await trio.sleep(self.retry_backoff_ms / 1000)
                    cluster = await self._fresh_cluster()
        for tp in remaining:
            out[tp] = TributaryError(
                ErrorCode.REQUEST_TIMED_OUT, f"no leader of {tp} answered within the timeout"
            )
        return out

    async def _list_offsets_from(
        self, cluster: ClusterView, leader: int, tps: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        broker = cluster.broker(leader)
        assert broker is not None
        found = await list_offsets_from(
            self._pool,
            broker.address,
            cluster,
            dict.fromkeys(tps, timestamp),
            self.request_timeout_ms / 1000,
        )
        return {tp: (code, offset) for tp, (code, offset, _) in found.items()}
