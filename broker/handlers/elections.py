"""ElectLeaders: preferred leader elections on demand (`tributary leaders elect`).

How it works: partitions whose preferred replica (the first of their replicas) already
leads are answered ELECTION_NOT_NEEDED; the others are written, together, to
/admin/preferred_replica_election, which the controller watches and acts on
(controller/handlers/elections.py). The answer waits, up to the request's timeout, until
this broker's metadata shows the preferred replicas leading (`MetadataChanges`); one that
does not by then is PREFERRED_LEADER_NOT_AVAILABLE (it is not alive, or not in the ISR).
Unclean elections are not served on demand: they happen on their own where
unclean.leader.election.enable=true.
"""

from __future__ import annotations

import trio

from broker.core.metadata_cache import MetadataCache
from broker.handlers.metadata_changes import MetadataChanges
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from server_common.network import error_answer


class ElectionHandlers:
    def __init__(
        self,
        gateway: BrokerZkGateway,
        metadata_cache: MetadataCache,
        metadata_changes: MetadataChanges,
    ) -> None:
        self.gateway = gateway
        self.cache = metadata_cache
        self.metadata_changes = metadata_changes

    async def elect_leaders(self, request: m.ElectLeadersRequest):
        if request.election_type != m.PREFERRED_ELECTION:
            return error_answer(
                ErrorCode.INVALID_REQUEST,
                "only preferred leader election is available on demand; unclean election "
                "happens automatically where unclean.leader.election.enable=true",
            )
        cache = self.cache
        if request.topic_partitions is None:
            wanted = [tp for tp, _ in cache.all_partitions()]
        else:
            wanted = [
                TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions
            ]
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        to_elect = []
        for tp in wanted:
            state = cache.partition(tp)
            if state is None:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            elif state.replicas and state.leader == state.replicas[0]:
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica leads")
            else:
                to_elect.append(tp)
        if to_elect:
            await self._write_preferred_election(to_elect, request.timeout_ms / 1000)

            def elected() -> bool:
                for tp in to_elect:
                    state = cache.partition(tp)
                    if state is None or not state.replicas or state.leader != state.replicas[0]:
                        return False
                return True

            await self.metadata_changes.wait_for(elected, request.timeout_ms / 1000)
            for tp in to_elect:
                state = cache.partition(tp)
                if state is not None and state.replicas and state.leader == state.replicas[0]:
                    results[tp] = (ErrorCode.NONE, None)
                else:
                    results[tp] = (
                        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                        "the preferred replica is not alive and in the ISR",
                    )
        by_topic: dict[str, list[m.ElectLeadersPartitionResult]] = {}
        for tp, (code, message) in results.items():
            by_topic.setdefault(tp.topic, []).append(
                m.ElectLeadersPartitionResult(
                    partition_id=tp.partition, error_code=code, error_message=message
                )
            )
        return m.ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            replica_election_results=[
                m.ElectLeadersResponseTopic(topic=t, partition_result=r)
                for t, r in by_topic.items()
            ],
        )

    async def _write_preferred_election(self, partitions: list[TopicPartition], timeout_s: float):
        with trio.move_on_after(timeout_s):
            await self.gateway.request_preferred_election(partitions)
