"""The values the admin client takes and returns, and its one error of its own.

How it works: plain frozen dataclasses and `NamedTuple`s, built from the brokers'
answers by the family modules of `client.admin`: `NewTopic` (a topic to create),
`TopicDescription` and `PartitionDescription` (a topic as the metadata shows it, with its
id and config overrides), `ClusterDescription`, `Reassignment`, `LogDirDescription` and
`ReplicaLogInfo` (a broker's log dirs), `GroupListing`, `GroupDescription` and
`MemberDescription` (consumer groups), `ConfigEntry` (a described config, with its
source and synonyms). `GroupOffsetsError` says why altering a group's offsets failed,
per partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from client.metadata import BrokerInfo
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.topic_ids import topic_id_str
from client.protocol.types import TopicPartition


@dataclass(frozen=True)
class NewTopic:
    """A topic to create: partitions and replication factor (-1: the broker's defaults),
    or an explicit `assignment` (partition -> replica broker ids; then leave both -1)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    assignment: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a topic or broker as DescribeConfigs describes it: its value (None
    when unset or sensitive), where it comes from (Kafka's ConfigSource name:
    DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and every layer that sets it, highest
    precedence first, as (source, name, value)."""

    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str, str | None]] = field(default_factory=list)


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
    topic_id: uuid.UUID | None = None  # KIP-516; None from a broker that gives none

    @property
    def topic_id_text(self) -> str | None:
        """The id as Kafka prints it (base64, 22 characters), None without one."""
        return None if self.topic_id is None else topic_id_str(self.topic_id)

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
