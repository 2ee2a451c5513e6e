"""The admin client: topics, cluster description, leader elections, reassignments, log dirs,
consumer groups and their offsets.

How it works: an `Admin` keeps a `Metadata` of the whole cluster (`all_topics=True`).
Describing is reading that metadata fresh. Changing (CreateTopics, DeleteTopics,
ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments) is one request to
any live broker (the broker that gets it writes ZooKeeper, as Kafka 2.x's did), tried
on the next broker if the connection fails. DescribeLogDirs goes to every broker at once.
ListOffsets goes to each partition's leader, retried after a metadata refresh when the
leader moved.

Groups: ListGroups goes to every live broker (each answers for the groups it
coordinates) and the answers are merged. Everything else about a group goes to its
coordinator (FindCoordinator, client/group_channel.py `find_coordinator`), one
request per group, looked up again and retried while the answer is NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (or the connection fails), for
up to the request timeout. DescribeGroups' member assignments are decoded with Kafka's
ConsumerProtocol for groups of protocol type "consumer". Offsets are altered with an
OffsetCommit of generation -1 and member id "", which the coordinator takes only while
the group is Empty (`GroupOffsetsError` otherwise).

Results are per item: `create_topics` / `delete_topics` / `elect_preferred_leaders` /
`alter_partition_reassignments` map each topic or partition to None (success) or a
`TributaryError`; the single-topic helpers (`create_topic`, `delete_topic`) raise it.
`async with open_admin("host:port") as admin:` builds one.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import trio

from client.connection import BrokerConnectionError, ConnectionPool, Connector, open_connection_pool
from client.consumer.group.channel import find_coordinator
from client.consumer.group.offsets import (
    committed_offsets,
    offset_commit_errors,
    offset_commit_request,
    offset_fetch_request,
)
from client.list_offsets import list_offsets_from
from client.metadata import (
    BrokerInfo,
    ClusterView,
    Metadata,
    NoBrokersAvailableError,
    UnknownTopicError,
    connection_failure_reason,
    format_addresses,
)
from client.protocol import messages as m
from client.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
)
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

DEFAULT_ADMIN_TIMEOUT_MS = 30_000  # Kafka's default.api.timeout.ms is 60 s; requests 30 s


@dataclass(frozen=True)
class NewTopic:
    """A topic to create: partitions and replication factor (-1: the broker's defaults),
    or an explicit `assignment` (partition -> replica broker ids; then leave both -1)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    assignment: Mapping[int, Sequence[int]] | None = None


class PartitionDescription(NamedTuple):
    partition: int
    leader: int  # -1: no leader (offline)
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True)
class TopicDescription:
    name: str
    is_internal: bool
    partitions: list[PartitionDescription]
    configs: dict[str, str] | None = None  # the topic's overrides (None: not asked for)

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


class Reassignment(NamedTuple):
    replicas: tuple[int, ...]  # target and current replicas while moving
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


class ReplicaLogInfo(NamedTuple):
    size: int
    offset_lag: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    is_leader: bool
    leader_epoch: int


@dataclass(frozen=True)
class LogDirDescription:
    log_dir: str
    error: TributaryError | None
    partitions: dict[TopicPartition, ReplicaLogInfo]


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str  # "consumer" for consumer groups; "" for offsets-only groups
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    coordinator_id: int


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: set[TopicPartition]  # empty unless the protocol type is "consumer"


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # "Dead" for a group the coordinator does not know
    protocol_type: str
    protocol: str  # the assignor chosen (when Stable)
    generation: int
    coordinator_id: int
    members: list[MemberDescription]


class GroupOffsetsError(TributaryError):
    """Altering a group's offsets failed; `errors` has each failed partition's code. The
    usual cause: the group has members (UNKNOWN_MEMBER_ID from the coordinator, as
    Kafka's), and offsets can only be altered while it is Empty."""

    def __init__(self, group_id: str, errors: Mapping[TopicPartition, ErrorCode]) -> None:
        self.group_id = group_id
        self.errors = dict(errors)
        code = next(iter(sorted(self.errors.items())))[1]
        if code in (
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.ILLEGAL_GENERATION,
            ErrorCode.REBALANCE_IN_PROGRESS,
        ):
            detail = (
                f"group {group_id!r} is not empty: stop its consumers before altering its offsets"
            )
        else:
            failed = ", ".join(f"{tp} ({c.name})" for tp, c in sorted(self.errors.items()))
            detail = f"altering the offsets of group {group_id!r} failed for {failed}"
        super().__init__(code, detail)


# Answers after which the group's coordinator must be looked up again (or is loading).
_COORDINATOR_RETRY = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
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
_LIST_OFFSETS_SPECS = {"earliest": m.EARLIEST_TIMESTAMP, "latest": m.LATEST_TIMESTAMP}


def _error_or_none(code: int, message: str | None = None) -> TributaryError | None:
    error = ErrorCode.from_code(code)
    return None if error is ErrorCode.NONE else TributaryError(error, message)


def _topic_error_or_none(topic: str, code: int, message: str | None) -> TributaryError | None:
    """A topic's result: None, `UnknownTopicError` ("topic 'x' does not exist") or the error."""
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return UnknownTopicError(topic)
    return _error_or_none(code, message)


class Admin:
    """Build with `open_admin()`; see the module docstring."""

    def __init__(
        self,
        pool: ConnectionPool,
        bootstrap: str | Iterable[str],
        *,
        request_timeout_ms: float = DEFAULT_ADMIN_TIMEOUT_MS,
        retry_backoff_ms: float = 100,
    ) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata = Metadata(
            pool,
            bootstrap,
            all_topics=True,
            retry_backoff_ms=int(retry_backoff_ms),
            request_timeout_ms=int(request_timeout_ms),
        )
        self._pool = pool

    async def start(self) -> None:
        """Bootstrap; raises `NoBrokersAvailableError` if no broker answers."""
        await self.metadata.refresh()

    # --- plumbing --------------------------------------------------------------------

    async def _request_any(self, request: Any, timeout_ms: float | None = None) -> Any:
        """Send to a live broker (the one that last answered Metadata first), trying the
        next one when a connection fails."""
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        cluster = self.metadata.cluster
        preferred = self.metadata.preferred_address
        addresses = [] if preferred is None else [preferred]
        addresses += [
            b.address for b in sorted(cluster.brokers.values()) if b.address not in addresses
        ]
        addresses += [a for a in self.metadata.bootstrap if a not in addresses]
        last: BrokerConnectionError | None = None
        for address in addresses:
            try:
                # Leave the broker time to finish (it waits up to the request's timeout).
                return await self._pool.request(*address, request, timeout_s=timeout_s + 5)
            except BrokerConnectionError as exc:
                last = exc
                continue
        raise NoBrokersAvailableError(
            f"cannot reach any broker at {format_addresses(self.metadata.bootstrap)}"
            + (f" ({connection_failure_reason(last)})" if last is not None else "")
        )

    async def _fresh_cluster(self) -> ClusterView:
        self.metadata.request_update()
        return await self.metadata.refresh()

    # --- topics ----------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        timeout_ms: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, TributaryError | None]:
        """Create topics; the broker answers once their leaders exist (or the timeout)."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        request = m.CreateTopicsRequest(
            topics=[
                m.CreateTopicsTopic(
                    name=t.name,
                    num_partitions=-1 if t.assignment else t.num_partitions,
                    replication_factor=-1 if t.assignment else t.replication_factor,
                    assignments=[
                        m.CreateTopicsAssignment(partition_index=p, broker_ids=list(r))
                        for p, r in sorted((t.assignment or {}).items())
                    ],
                    configs=[
                        m.CreateTopicsConfig(name=k, value=v) for k, v in sorted(t.configs.items())
                    ],
                )
                for t in topics
            ],
            timeout_ms=int(timeout_ms),
            validate_only=validate_only,
        )
        response = await self._request_any(request, timeout_ms)
        self.metadata.request_update()
        return {t.name: _error_or_none(t.error_code, t.error_message) for t in response.topics}

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        *,
        configs: Mapping[str, str] | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Create one topic; raises its `TributaryError` (e.g. TOPIC_ALREADY_EXISTS)."""
        topic = NewTopic(name, num_partitions, replication_factor, dict(configs or {}), assignment)
        results = await self.create_topics([topic], timeout_ms=timeout_ms)
        error = results.get(name)
        if error is not None:
            raise error

    async def create_partitions(
        self,
        new_counts: Mapping[str, int],
        *,
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
        timeout_ms: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, TributaryError | None]:
        """Raise each topic's partition count to `new_counts[topic]` (Kafka's
        createPartitions); `assignments[topic]` optionally gives the replicas of each added
        partition. The broker answers once the new partitions have leaders."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        assignments = assignments or {}
        request = m.CreatePartitionsRequest(
            topics=[
                m.CreatePartitionsTopic(
                    name=name,
                    count=count,
                    assignments=None
                    if name not in assignments
                    else [
                        m.CreatePartitionsAssignment(broker_ids=list(r)) for r in assignments[name]
                    ],
                )
                for name, count in new_counts.items()
            ],
            timeout_ms=int(timeout_ms),
            validate_only=validate_only,
        )
        response = await self._request_any(request, timeout_ms)
        self.metadata.request_update()
        return {
            r.name: _topic_error_or_none(r.name, r.error_code, r.error_message)
            for r in response.results
        }

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: float | None = None
    ) -> dict[str, TributaryError | None]:
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        request = m.DeleteTopicsRequest(topic_names=list(names), timeout_ms=int(timeout_ms))
        response = await self._request_any(request, timeout_ms)
        self.metadata.request_update()
        return {
            t.name: _topic_error_or_none(t.name, t.error_code, t.error_message)
            for t in response.responses
        }

    async def delete_topic(self, name: str, *, timeout_ms: float | None = None) -> None:
        """Delete one topic; raises `UnknownTopicError` or the broker's error."""
        error = (await self.delete_topics([name], timeout_ms=timeout_ms)).get(name)
        if error is not None:
            raise error

    async def list_topics(self, *, include_internal: bool = True) -> list[str]:
        cluster = await self._fresh_cluster()
        return sorted(
            name
            for name, info in cluster.topics.items()
            if info.error in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
            and (include_internal or not info.is_internal)
        )

    async def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        """Every topic (or the named ones, in that order); `UnknownTopicError` for a
        named topic that does not exist."""
        cluster = await self._fresh_cluster()
        wanted = sorted(cluster.topics) if names is None else list(names)
        out = []
        for name in wanted:
            info = cluster.topics.get(name)
            if info is None or info.error in (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.INVALID_TOPIC_EXCEPTION,
            ):
                raise UnknownTopicError(name)
            partitions = [
                PartitionDescription(
                    p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, p.offline_replicas
                )
                for _, p in sorted(info.partitions.items())
            ]
            out.append(TopicDescription(name, info.is_internal, partitions))
        if out:
            overrides = await self.describe_configs([t.name for t in out], overrides_only=True)
            out = [
                TopicDescription(t.name, t.is_internal, t.partitions, overrides.get(t.name))
                for t in out
            ]
        return out

    async def describe_configs(
        self, topics: Iterable[str], *, overrides_only: bool = False
    ) -> dict[str, dict[str, str]]:
        """Topic configs by topic: every effective value, or only the topic's overrides
        (as `kafka-topics --describe` prints them). Unknown topics are left out."""
        request = m.DescribeConfigsRequest(
            resources=[
                m.DescribeConfigsResource(resource_type=m.TOPIC_RESOURCE, resource_name=t)
                for t in topics
            ]
        )
        response = await self._request_any(request)
        return {
            r.resource_name: {
                c.name: c.value
                for c in r.configs
                if c.value is not None and not (overrides_only and c.is_default)
            }
            for r in response.results
            if r.error_code == ErrorCode.NONE
        }

    async def alter_topic_configs(
        self,
        topics: Iterable[str],
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        validate_only: bool = False,
    ) -> dict[str, TributaryError | None]:
        """IncrementalAlterConfigs on each topic: set these overrides, delete those (the
        broker default applies again). Brokers apply the change without a restart."""
        changes = [
            m.AlterableConfig(name=k, config_operation=m.CONFIG_SET, value=v)
            for k, v in sorted((set_configs or {}).items())
        ] + [m.AlterableConfig(name=k, config_operation=m.CONFIG_DELETE) for k in delete_configs]
        request = m.IncrementalAlterConfigsRequest(
            resources=[
                m.AlterConfigsResource(
                    resource_type=m.TOPIC_RESOURCE, resource_name=t, configs=changes
                )
                for t in topics
            ],
            validate_only=validate_only,
        )
        response = await self._request_any(request)
        return {
            r.resource_name: _topic_error_or_none(r.resource_name, r.error_code, r.error_message)
            for r in response.responses
        }

    async def describe_cluster(self) -> ClusterDescription:
        cluster = await self._fresh_cluster()
        return ClusterDescription(
            cluster.cluster_id,
            cluster.controller_id,
            sorted(cluster.brokers.values()),
        )

    # --- leaders and replicas -----------------------------------------------------------

    async def elect_preferred_leaders(
        self,
        topic: str | None = None,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, TributaryError | None]:
        """Preferred leader election for `partitions`, or every partition of `topic`, or
        every partition of the cluster. ELECTION_NOT_NEEDED comes back as an error value
        (the preferred replica already leads); callers usually treat it as success."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        if partitions is not None:
            wanted: list[TopicPartition] | None = [TopicPartition(*tp) for tp in partitions]
        elif topic is not None:
            cluster = await self._fresh_cluster()
            parts = cluster.partitions_for(topic)
            if parts is None:
                raise UnknownTopicError(topic)
            wanted = [TopicPartition(topic, p) for p in parts]
        else:
            wanted = None
        by_topic: dict[str, list[int]] = {}
        for tp in wanted or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = m.ElectLeadersRequest(
            election_type=m.PREFERRED_ELECTION,
            topic_partitions=None
            if wanted is None
            else [m.ElectLeadersTopic(topic=t, partitions=p) for t, p in by_topic.items()],
            timeout_ms=int(timeout_ms),
        )
        response = await self._request_any(request, timeout_ms)
        if response.error_code:
            raise TributaryError(response.error_code, "leader election failed")
        self.metadata.request_update()
        return {
            TopicPartition(t.topic, r.partition_id): _error_or_none(r.error_code, r.error_message)
            for t in response.replica_election_results
            for r in t.partition_result
        }

    async def alter_partition_reassignments(
        self,
        plan: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, TributaryError | None]:
        """Move partitions to new replica lists (None cancels). A request-level failure
        (e.g. REASSIGNMENT_IN_PROGRESS) raises."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        by_topic: dict[str, list[m.AlterPartitionReassignmentsPartition]] = {}
        for tp, replicas in plan.items():
            tp = TopicPartition(*tp)
            by_topic.setdefault(tp.topic, []).append(
                m.AlterPartitionReassignmentsPartition(
                    partition_index=tp.partition,
                    replicas=None if replicas is None else list(replicas),
                )
            )
        request = m.AlterPartitionReassignmentsRequest(
            timeout_ms=int(timeout_ms),
            topics=[
                m.AlterPartitionReassignmentsTopic(name=t, partitions=p)
                for t, p in by_topic.items()
            ],
        )
        response = await self._request_any(request, timeout_ms)
        if response.error_code:
            raise TributaryError(response.error_code, response.error_message)
        return {
            TopicPartition(t.name, p.partition_index): _error_or_none(p.error_code, p.error_message)
            for t in response.responses
            for p in t.partitions
        }

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, Reassignment]:
        """Reassignments in progress (of `partitions`, or all)."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [
                m.ListPartitionReassignmentsTopic(name=t, partition_indexes=p)
                for t, p in by_topic.items()
            ]
        request = m.ListPartitionReassignmentsRequest(timeout_ms=int(timeout_ms), topics=topics)
        response = await self._request_any(request, timeout_ms)
        if response.error_code:
            raise TributaryError(response.error_code, response.error_message)
        return {
            TopicPartition(t.name, p.partition_index): Reassignment(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        }

    async def describe_log_dirs(
        self, broker_ids: Iterable[int] | None = None
    ) -> dict[int, list[LogDirDescription] | TributaryError]:
        """Each broker's log dirs with per-partition size, LEO, HW, leadership. A broker
        that cannot be reached maps to its connection error."""
        answers = await self._ask_each_broker(
            broker_ids, m.DescribeLogDirsRequest(topics=None), self.request_timeout_ms / 1000
        )
        out: dict[int, list[LogDirDescription] | TributaryError] = {}
        for broker_id, response in answers.items():
            if isinstance(response, TributaryError):
                out[broker_id] = response
                continue
            out[broker_id] = [
                LogDirDescription(
                    result.log_dir,
                    _error_or_none(result.error_code),
                    {
                        TopicPartition(t.name, p.partition_index): ReplicaLogInfo(
                            p.partition_size,
                            p.offset_lag,
                            p.log_start_offset,
                            p.log_end_offset,
                            p.high_watermark,
                            p.is_leader,
                            p.leader_epoch,
                        )
                        for t in result.topics
                        for p in t.partitions
                    },
                )
                for result in response.results
            ]
        return out

    async def verify_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        topics: Iterable[str] | None = None,
        *,
        repair_timeout_ms: float = 60_000,
    ) -> dict[int, m.VerifyLogDirsResponse | TributaryError]:
        """An on-demand scrub on each broker (Tributary's VerifyLogDirs): every batch of
        its logs (of `topics`) CRC-checked, damaged ranges repaired from an in-sync
        replica, waiting up to `repair_timeout_ms`. A broker that cannot be reached maps
        to its error."""
        request = m.VerifyLogDirsRequest(
            topics=None if topics is None else sorted(set(topics)),
            timeout_ms=int(repair_timeout_ms),
        )
        # The scan of a big log dir takes a while: no request timeout beyond the repairs'.
        timeout_s = self.request_timeout_ms / 1000 + repair_timeout_ms / 1000 + 3600
        return await self._ask_each_broker(broker_ids, request, timeout_s)

    async def _ask_each_broker(
        self, broker_ids: Iterable[int] | None, request, timeout_s: float
    ) -> dict[int, Any]:
        """`request` to each broker (all live ones by default), concurrently: broker id ->
        its response, or the TributaryError that stood in the way."""
        cluster = await self._fresh_cluster()
        ids = sorted(cluster.brokers) if broker_ids is None else list(broker_ids)
        out: dict[int, Any] = {}

        async def ask(broker_id: int) -> None:
            broker = cluster.broker(broker_id)
            if broker is None:
                out[broker_id] = TributaryError(
                    ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not alive"
                )
                return
            try:
                out[broker_id] = await self._pool.request(
                    *broker.address, request, timeout_s=timeout_s
                )
            except TributaryError as exc:
                out[broker_id] = exc

        async with trio.open_nursery() as nursery:
            for broker_id in ids:
                nursery.start_soon(ask, broker_id)
        return {broker_id: out[broker_id] for broker_id in ids}

    # --- offsets of partitions -------------------------------------------------------

    async def list_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], spec: str | int = "latest"
    ) -> dict[TopicPartition, int]:
        """Each partition's "earliest" (log start) or "latest" (high watermark) offset, or
        with an int timestamp (ms) the first offset at or after it (-1: none). Asks each
        partition's leader; retries after a metadata refresh while leaders move, for up to
        the request timeout. Raises `UnknownTopicError`, or the broker's error."""
        if isinstance(spec, str):
            if spec not in _LIST_OFFSETS_SPECS:
                raise ValueError(f"spec must be 'earliest', 'latest' or a timestamp, not {spec!r}")
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
        offsets: Mapping[TopicPartition | tuple[str, int], int],
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

    # --- consumer groups -------------------------------------------------------------

    async def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """Every group of the cluster (only those in `states`, if given), sorted by id:
        ListGroups to every live broker, merged. A broker that cannot be reached is
        skipped (logged); if none answers, `NoBrokersAvailableError`."""
        cluster = await self._fresh_cluster()
        request = m.ListGroupsRequest(states_filter=list(states))
        found: dict[str, GroupListing] = {}
        failures: list[BaseException] = []

        async def ask(broker: BrokerInfo) -> None:
            with trio.move_on_after(self.request_timeout_ms / 1000):
                while True:
                    try:
                        response = await self._pool.request(
                            *broker.address, request, timeout_s=self.request_timeout_ms / 1000
                        )
                        code = ErrorCode.from_code(response.error_code)
                    except BrokerConnectionError as exc:
                        failures.append(exc)
                        log.warning("ListGroups to broker %d failed: %s", broker.node_id, exc)
                        return
                    if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                        await trio.sleep(self.retry_backoff_ms / 1000)
                        continue
                    if code is not ErrorCode.NONE:
                        raise TributaryError(code, f"listing the groups of broker {broker.node_id}")
                    for g in response.groups:
                        found[g.group_id] = GroupListing(
                            g.group_id, g.protocol_type, g.group_state, broker.node_id
                        )
                    return
            failures.append(TributaryError(ErrorCode.REQUEST_TIMED_OUT, "ListGroups"))

        brokers = sorted(cluster.brokers.values())
        async with trio.open_nursery() as nursery:
            for broker in brokers:
                nursery.start_soon(ask, broker)
        if brokers and len(failures) == len(brokers):
            raise NoBrokersAvailableError(f"no broker answered ListGroups ({failures[-1]})")
        return sorted(found.values())

    async def _group_request(
        self, group_id: str, request: Any, error_of: Callable[[Any], ErrorCode]
    ) -> tuple[Any, int]:
        """Send `request` to the group's coordinator: (its answer, the coordinator's id).
        Retries while the coordinator moves or loads (`error_of(answer)` says); raises
        `TributaryError` with the last error after the request timeout."""
        deadline = trio.current_time() + self.request_timeout_ms / 1000
        last: TributaryError | None = None
        with trio.move_on_at(deadline):
            while True:
                coordinator = await find_coordinator(
                    self._pool,
                    self.metadata,
                    group_id,
                    timeout_s=max(deadline - trio.current_time(), 0.001),
                    retry_backoff_ms=self.retry_backoff_ms,
                )
                try:
                    response = await self._pool.request(
                        *coordinator.address, request, timeout_s=self.request_timeout_ms / 1000
                    )
                    code = error_of(response)
                except BrokerConnectionError as exc:
                    response, code = None, exc.code
                except TributaryError as exc:  # a request-level error answer
                    response, code = None, exc.code
                if code not in _COORDINATOR_RETRY:
                    if response is None:
                        raise TributaryError(code, f"asking the coordinator of {group_id!r}")
                    return response, coordinator.node_id
                last = TributaryError(code, f"from broker {coordinator.node_id}")
                await trio.sleep(self.retry_backoff_ms / 1000)
        raise TributaryError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"the coordinator of group {group_id!r} did not answer within "
            f"{self.request_timeout_ms:g} ms" + (f" (last error: {last})" if last else ""),
        )

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """Each group as its coordinator describes it, in the order asked (an unknown group
        comes back with state "Dead" and no members). Raises the first group's error."""
        ids = list(group_ids)
        out: dict[str, GroupDescription] = {}

        async def describe(group_id: str) -> None:
            response, node = await self._group_request(
                group_id,
                m.DescribeGroupsRequest(groups=[group_id]),
                lambda r: ErrorCode.from_code(r.groups[0].error_code if r.groups else 0),
            )
            (group,) = response.groups
            if group.error_code:
                raise TributaryError(group.error_code, f"describing group {group_id!r}")
            out[group_id] = _group_description(group, node)

        async with trio.open_nursery() as nursery:
            for group_id in dict.fromkeys(ids):
                nursery.start_soon(describe, group_id)
        return [out[g] for g in ids]

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (of `partitions`, or all it has); partitions
        without a committed offset are left out."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        response, _ = await self._group_request(
            group_id,
            offset_fetch_request(group_id, wanted),
            lambda r: ErrorCode.from_code(r.error_code),
        )
        if response.error_code:
            raise TributaryError(response.error_code, f"offsets of group {group_id!r}")
        out: dict[TopicPartition, int] = {}
        for tp, committed in sorted(committed_offsets(response).items()):
            if committed.error is not ErrorCode.NONE:
                raise TributaryError(committed.error, f"the offset of {tp} in {group_id!r}")
            if committed.offset is not None:
                out[tp] = committed.offset
        return out

    async def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition | tuple[str, int], int]
    ) -> None:
        """Set the group's committed offsets (the group must be Empty: no members);
        raises `GroupOffsetsError` naming the failed partitions."""
        wanted = {TopicPartition(*tp): int(o) for tp, o in offsets.items()}
        if not wanted:
            return
        for tp, offset in wanted.items():
            if offset < 0:
                raise ValueError(f"cannot commit a negative offset ({offset}) for {tp}")

        def coordinator_error(response: m.OffsetCommitResponse) -> ErrorCode:
            codes = set(offset_commit_errors(response).values())
            return next((c for c in codes if c in _COORDINATOR_RETRY), ErrorCode.NONE)

        response, _ = await self._group_request(
            group_id, offset_commit_request(group_id, wanted), coordinator_error
        )
        errors = {
            tp: code
            for tp, code in offset_commit_errors(response).items()
            if code is not ErrorCode.NONE
        }
        if errors:
            raise GroupOffsetsError(group_id, errors)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, TributaryError | None]:
        """Delete groups (and their offsets): None for each deleted, else its error
        (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND...)."""
        out: dict[str, TributaryError | None] = {}

        async def delete(group_id: str) -> None:
            try:
                response, _ = await self._group_request(
                    group_id,
                    m.DeleteGroupsRequest(groups_names=[group_id]),
                    lambda r: ErrorCode.from_code(r.results[0].error_code if r.results else 0),
                )
            except TributaryError as exc:
                out[group_id] = exc
                return
            codes = [r.error_code for r in response.results if r.group_id == group_id]
            code = ErrorCode.from_code(codes[0]) if codes else ErrorCode.UNKNOWN_SERVER_ERROR
            out[group_id] = _error_or_none(code, f"deleting group {group_id!r}")

        ids = list(dict.fromkeys(group_ids))
        async with trio.open_nursery() as nursery:
            for group_id in ids:
                nursery.start_soon(delete, group_id)
        return {g: out[g] for g in ids}


def _group_description(group: m.DescribeGroupsResponseGroup, node: int) -> GroupDescription:
    members = []
    for member in group.members:
        assignment: set[TopicPartition] = set()
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE and member.member_assignment:
            try:
                assignment = set(decode_assignment(member.member_assignment).partitions)
            except ConsumerProtocolError as exc:
                log.warning(
                    "group %s: member %s has an unreadable assignment: %s",
                    group.group_id,
                    member.member_id,
                    exc,
                )
        members.append(
            MemberDescription(
                member.member_id,
                member.group_instance_id,
                member.client_id,
                member.client_host,
                assignment,
            )
        )
    return GroupDescription(
        group.group_id,
        group.group_state,
        group.protocol_type,
        group.protocol_data,
        group.generation_id,
        group.coordinator_id if group.coordinator_id >= 0 else node,
        members,
    )


@asynccontextmanager
async def open_admin(
    bootstrap: str | Iterable[str],
    *,
    client_id: str | None = "tributary-admin",
    connector: Connector | None = None,
    **config: Any,
) -> AsyncIterator[Admin]:
    """A connected admin client. Raises `NoBrokersAvailableError` when nobody answers."""
    async with open_connection_pool(client_id=client_id, connector=connector) as pool:
        admin = Admin(pool, bootstrap, **config)
        await admin.start()
        yield admin
