"""The admin client's topic requests: create, grow, delete, list and describe topics, and
their configs.

How it works: CreateTopics, CreatePartitions, DeleteTopics, DescribeConfigs and
IncrementalAlterConfigs are one request each to any live broker (`_request_any`); the
broker that gets it writes ZooKeeper and answers once the change is done (new topics'
and partitions' leaders exist) or its timeout passed. Listing and describing topics read
the cluster's metadata fresh; `describe_topics` gives each topic's id and adds its
config overrides.
Results are per topic: None (success) or a `TributaryError`; the single-topic helpers
(`create_topic`, `delete_topic`) raise it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from client.admin.base import AdminBase, error_or_none, topic_error_or_none
from client.admin.results import NewTopic, PartitionDescription, TopicDescription
from client.metadata import UnknownTopicError
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError


class TopicAdmin(AdminBase):
    """Topics and their configs (a mixin of `client.admin.Admin`)."""

    async def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        timeout_ms: float | None = None,
        validate_only: bool = False,
        disable_rack_aware: bool = False,
    ) -> dict[str, TributaryError | None]:
        """Create topics; the broker answers once their leaders exist (or the timeout).
        `disable_rack_aware` assigns replicas ignoring the brokers' racks."""
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
            disable_rack_aware=disable_rack_aware,
        )
        response = await self._request_any(request, timeout_ms)
        self.metadata.request_update()
        return {t.name: error_or_none(t.error_code, t.error_message) for t in response.topics}

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
            r.name: topic_error_or_none(r.name, r.error_code, r.error_message)
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
            t.name: topic_error_or_none(t.name, t.error_code, t.error_message)
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
            out.append(TopicDescription(name, info.is_internal, partitions, None, info.topic_id))
        if out:
            overrides = await self.describe_configs([t.name for t in out], overrides_only=True)
            out = [dataclasses.replace(t, configs=overrides.get(t.name)) for t in out]
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
                if c.value is not None
                and not (overrides_only and c.config_source != m.SOURCE_DYNAMIC_TOPIC_CONFIG)
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
            r.resource_name: topic_error_or_none(r.resource_name, r.error_code, r.error_message)
            for r in response.responses
        }
