"""AlterPartitionReassignments and ListPartitionReassignments: moving replicas.

How it works: AlterPartitionReassignments checks each partition's target replicas
(the partition exists, the list is non-empty without duplicates, every broker is live)
and writes the accepted ones, together, to /admin/reassign_partitions; the controller
watches it and moves the replicas (controller/handlers/reassignment.py). Only one
reassignment runs at a time (REASSIGNMENT_IN_PROGRESS otherwise), and cancelling one is
not supported. ListPartitionReassignments reads the plan back with each partition's
replicas, adding and removing replicas (from the topic znode while it moves, as Kafka
2.4+ writes it).
"""

from __future__ import annotations

from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode


class ReassignmentHandlers:
    def __init__(self, gateway: BrokerZkGateway) -> None:
        self.gateway = gateway

    async def alter_partition_reassignments(self, request: m.AlterPartitionReassignmentsRequest):
        plan: dict[tuple[str, int], tuple[int, ...]] = {}
        results: dict[str, list[m.AlterPartitionReassignmentsResponsePartition]] = {}
        live = await self.gateway.live_broker_ids()
        for topic in request.topics:
            current = await self.gateway.topic_assignment(topic.name)
            for part in topic.partitions:
                code, message = ErrorCode.NONE, None
                if current is None or part.partition_index not in current.partitions:
                    code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
                elif part.replicas is None:
                    code, message = (
                        ErrorCode.INVALID_REQUEST,
                        "cancelling a reassignment is not supported",
                    )
                elif not part.replicas or len(set(part.replicas)) != len(part.replicas):
                    code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "empty or duplicate"
                elif any(r not in live for r in part.replicas):
                    code, message = (
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"brokers not live: {sorted(set(part.replicas) - live)}",
                    )
                else:
                    plan[(topic.name, part.partition_index)] = tuple(part.replicas)
                results.setdefault(topic.name, []).append(
                    m.AlterPartitionReassignmentsResponsePartition(
                        partition_index=part.partition_index, error_code=code, error_message=message
                    )
                )
        top_code, top_message = ErrorCode.NONE, None
        if plan:
            if not await self.gateway.start_reassignment(plan):
                top_code, top_message = (
                    ErrorCode.REASSIGNMENT_IN_PROGRESS,
                    "a reassignment is already in progress",
                )
        return m.AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=top_code,
            error_message=top_message,
            responses=[
                m.AlterPartitionReassignmentsResponseTopic(name=name, partitions=parts)
                for name, parts in results.items()
            ],
        )

    async def list_partition_reassignments(self, request: m.ListPartitionReassignmentsRequest):
        plan = await self.gateway.reassignment_plan()
        topics: dict[str, list[m.ListPartitionReassignmentsResponsePartition]] = {}
        for (topic, partition), target in sorted(plan.items()):
            if request.topics is not None and not any(
                t.name == topic and partition in t.partition_indexes for t in request.topics
            ):
                continue
            assignment = await self.gateway.topic_assignment(topic)
            if assignment is None:
                continue
            # While moving, the topic znode holds the full set (target plus replicas being
            # removed) with adding/removing lists, as Kafka 2.4+ writes it.
            current = assignment.partitions.get(partition, ())
            adding = assignment.adding_replicas.get(partition)
            removing = assignment.removing_replicas.get(partition)
            topics.setdefault(topic, []).append(
                m.ListPartitionReassignmentsResponsePartition(
                    partition_index=partition,
                    replicas=list(dict.fromkeys(list(current) + list(target))),
                    adding_replicas=list(
                        adding if adding is not None else [r for r in target if r not in current]
                    ),
                    removing_replicas=list(
                        removing
                        if removing is not None
                        else [r for r in current if r not in target]
                    ),
                )
            )
        return m.ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            error_message=None,
            topics=[
                m.ListPartitionReassignmentsResponseTopic(name=name, partitions=parts)
                for name, parts in topics.items()
            ],
        )
