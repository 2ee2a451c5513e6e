"""CreateTopics, CreatePartitions and DeleteTopics: brokers turn them into ZooKeeper
writes, as Kafka 2.x's admin did.

How it works: CreateTopics validates each topic (name, partitions, replication factor
against the live brokers in /brokers/ids, configs against the topic config names, or a
given assignment), computes the assignment (`core/rack_assignment.py`: rack-aware when
the live brokers have racks, unless the request disables it), writes
/config/topics/<t> and then /brokers/topics/<t> with a new random topic id (KIP-516);
the controller does the rest. The response waits (up to the request's timeout) until
this broker's metadata cache shows every partition with a leader, so a client can
produce right after; it carries each new topic's id, partition count, replication
factor and every config (override or default), as Kafka's v5+/v7 answers do.
CreatePartitions extends /brokers/topics/<t> with a conditional set, keeping its topic
id (the controller watches each topic znode and brings new partitions online) and waits
the same way. Partition counts and replication factors are checked against the limits
(`core/partition_limits.py`) before any assignment is built. DeleteTopics (by name, or
by topic id as Kafka's v6 allows) marks /admin/delete_topics/<t> and waits for the topic
to leave the metadata. All of it goes through the broker's ZooKeeper gateway; the waits
watch the metadata cache (`MetadataChanges`). `TopicProblem` and `min_isr_problem` are
the validation the config handlers (configs.py) share.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass

from broker.core.assignment import AssignmentError, validate_assignment
from broker.core.log.config import LogConfig
from broker.core.log.errors import ConfigError
from broker.core.metadata_cache import MetadataCache
from broker.core.partition_limits import LimitProblem, PartitionBudget, PartitionLimits
from broker.core.rack_assignment import choose_assignment
from broker.handlers.metadata_changes import MetadataChanges
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.topic_ids import (
    ZERO_TOPIC_ID,
    ZERO_TOPIC_ID_BYTES,
    new_topic_id,
    topic_id_bytes,
    topic_id_of_bytes,
    topic_id_str,
)
from client.protocol.types import topic_name_problem

log = logging.getLogger(__name__)


def min_isr_problem(min_insync_replicas: int, replication_factor: int) -> str | None:
    """Why a topic's min.insync.replicas can never be met, or None: with more required
    in-sync replicas than replicas, every acks=all produce would fail (after waiting)."""
    if min_insync_replicas <= replication_factor:
        return None
    return (
        f"min.insync.replicas ({min_insync_replicas}) is larger than the replication factor "
        f"({replication_factor}): every acks=all produce would fail with NOT_ENOUGH_REPLICAS"
    )


class TopicProblem(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class TopicDefaults:
    """The broker settings CreateTopics, CreatePartitions and DeleteTopics apply (Kafka's
    names; the partition limits are KIP-578's, plus one of Tributary's own)."""

    num_partitions: int = 1  # num.partitions
    replication_factor: int = 1  # default.replication.factor
    delete_topic_enable: bool = True  # delete.topic.enable
    auto_create_topics: bool = True  # auto.create.topics.enable
    max_partitions_per_request: int = 10_000  # max.partitions.per.request
    max_broker_partitions: int = 4_000  # max.broker.partitions (KIP-578)
    max_partitions: int = 200_000  # max.partitions (KIP-578)

    @classmethod
    def from_config(cls, config) -> TopicDefaults:
        return cls(
            num_partitions=config["num.partitions"],
            replication_factor=config["default.replication.factor"],
            delete_topic_enable=config["delete.topic.enable"],
            auto_create_topics=config["auto.create.topics.enable"],
            max_partitions_per_request=config["max.partitions.per.request"],
            max_broker_partitions=config["max.broker.partitions"],
            max_partitions=config["max.partitions"],
        )


class TopicHandlers:
    def __init__(
        self,
        gateway: BrokerZkGateway,
        metadata_cache: MetadataCache,
        metadata_changes: MetadataChanges,
        *,
        topic_defaults: TopicDefaults,
        default_log_config: LogConfig,
    ):
        self.gateway = gateway
        self.cache = metadata_cache
        self.metadata_changes = metadata_changes
        self.topic_defaults = topic_defaults
        self.default_log_config = default_log_config

    # -- auto-creation -----------------------------------------------------------------
    async def auto_create(self, names: list[str]) -> dict[str, ErrorCode]:
        """Create `names` with the broker defaults (num.partitions,
        default.replication.factor), as Kafka's Metadata handler does for a client that
        allows it (`auto.create.topics.enable`): each name's CreateTopics outcome, not
        waiting for leaders (the client asks again)."""
        request = m.CreateTopicsRequest(
            topics=[m.CreateTopicsTopic(name=name) for name in names], timeout_ms=0
        )
        response = await self.create_topics(request)
        for topic in response.topics:
            if topic.error_code == ErrorCode.NONE:
                log.info("auto-created topic %s", topic.name)
        return {t.name: ErrorCode.from_code(t.error_code) for t in response.topics}

    # -- CreateTopics -------------------------------------------------------------------
    async def create_topics(self, request: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
        live = await self.gateway.live_broker_racks()  # broker id -> rack
        rack_aware = not request.disable_rack_aware
        results: dict[str, m.CreateTopicsResponseTopic] = {}
        created: dict[str, int] = {}
        names = [t.name for t in request.topics]
        budget = self._partition_budget()
        for topic in request.topics:
            if names.count(topic.name) > 1:
                results[topic.name] = _create_result(
                    topic.name, ErrorCode.INVALID_REQUEST, "topic listed twice in one request"
                )
                continue
            try:
                assignment, config, log_config = await self._plan_topic(
                    topic, live, budget, rack_aware
                )
                budget.take(assignment)
                topic_id = ZERO_TOPIC_ID
                if not request.validate_only:
                    topic_id = await self._write_topic(topic.name, assignment, config)
                    created[topic.name] = len(assignment)
                rf = len(next(iter(assignment.values())))
                results[topic.name] = m.CreateTopicsResponseTopic(
                    name=topic.name,
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    num_partitions=len(assignment),
                    replication_factor=rf,
                    topic_id=topic_id_bytes(topic_id),
                    configs=[
                        m.CreateTopicsResponseConfig(
                            name=key, value=value, is_default=key not in config
                        )
                        for key, value in sorted(log_config.to_properties().items())
                    ],
                )
                if not request.validate_only:
                    log.info(
                        "created topic %s (id %s): %d partitions, RF %d, config %s",
                        topic.name,
                        topic_id_str(topic_id),
                        len(assignment),
                        rf,
                        config,
                    )
            except TopicProblem as problem:
                results[topic.name] = _create_result(topic.name, problem.code, problem.message)
        if created and request.timeout_ms > 0:  # as Kafka: timeout <= 0 does not wait
            done = await self.metadata_changes.wait_for(
                lambda: all(self.cache.has_leaders(t, n) for t, n in created.items()),
                request.timeout_ms / 1000,
            )
            if not done:
                for name in created:
                    if not self.cache.has_leaders(name, created[name]):
                        # As Kafka: the error, the id kept, the rest reset.
                        results[name] = _create_result(
                            name,
                            ErrorCode.REQUEST_TIMED_OUT,
                            "topic created, but its leaders were not elected within the timeout",
                            topic_id=results[name].topic_id,
                        )
        return m.CreateTopicsResponse(throttle_time_ms=0, topics=list(results.values()))

    def _partition_budget(self) -> PartitionBudget:
        """The partition limits, against what the cluster holds now (this broker's view)."""
        d = self.topic_defaults
        limits = PartitionLimits(
            max_partitions_per_request=d.max_partitions_per_request,
            max_partitions=d.max_partitions,
            max_broker_partitions=d.max_broker_partitions,
        )
        return PartitionBudget.of_cluster(
            limits, (state.replicas for _, state in self.cache.all_partitions())
        )

    async def _plan_topic(
        self,
        topic: m.CreateTopicsTopic,
        live: dict[int, str | None],
        budget: PartitionBudget,
        rack_aware: bool,
    ) -> tuple[dict[int, list[int]], dict[str, str], LogConfig]:
        if (problem := topic_name_problem(topic.name)) is not None:
            raise TopicProblem(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if await self.gateway.topic_exists(topic.name):
            raise TopicProblem(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists"
            )
        if await self.gateway.topic_being_deleted(topic.name):
            raise TopicProblem(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} is marked for deletion"
            )
        config: dict[str, str] = {}
        for entry in topic.configs:
            if entry.value is None:
                continue
            config[entry.name] = entry.value
        defaults = self.default_log_config
        try:
            log_config = LogConfig.from_properties(config, defaults)
        except ConfigError as exc:
            raise TopicProblem(ErrorCode.INVALID_CONFIG, str(exc)) from None
        assignment, config = self._assign(topic, live, config, budget, rack_aware)
        if "min.insync.replicas" in config:
            rf = min(len(replicas) for replicas in assignment.values())
            if (problem := min_isr_problem(log_config.min_insync_replicas, rf)) is not None:
                raise TopicProblem(ErrorCode.INVALID_CONFIG, problem)
        return assignment, config, log_config

    def _assign(
        self,
        topic: m.CreateTopicsTopic,
        live: dict[int, str | None],
        config: dict[str, str],
        budget: PartitionBudget,
        rack_aware: bool,
    ) -> tuple[dict[int, list[int]], dict[str, str]]:
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise TopicProblem(
                    ErrorCode.INVALID_REQUEST,
                    "give either an assignment or partitions and replication factor",
                )
            assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
            _raise_limit(budget.problem_before_assignment(len(assignment), 0, ()))
            if (problem := validate_assignment(assignment, set(live))) is not None:
                raise TopicProblem(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
            _raise_limit(budget.problem_after_assignment(assignment))
            return assignment, config
        partitions = topic.num_partitions
        if partitions == -1:
            partitions = self.topic_defaults.num_partitions
        if partitions <= 0:
            raise TopicProblem(ErrorCode.INVALID_PARTITIONS, "number of partitions must be > 0")
        rf = topic.replication_factor
        if rf == -1:
            rf = self.topic_defaults.replication_factor
        if rf <= 0:
            raise TopicProblem(
                ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be > 0"
            )
        if rf > len(live):
            raise TopicProblem(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {rf} is larger than the {len(live)} live broker(s)",
            )
        # Every bound is checked before the assignment is built (a request may ask for
        # 2^31-1 partitions): see core/partition_limits.py.
        _raise_limit(budget.problem_before_assignment(partitions, rf, sorted(live)))
        try:
            # Kafka's assignReplicasToBrokers: rack-aware when every live broker has a
            # rack (refused when only some have), unless the request disables it.
            assignment = choose_assignment(partitions, rf, live, rack_aware=rack_aware)
        except AssignmentError as exc:
            raise TopicProblem(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None
        _raise_limit(budget.problem_after_assignment(assignment))
        return assignment, config

    async def _write_topic(
        self, name: str, assignment: dict[int, list[int]], config: dict[str, str]
    ) -> uuid.UUID:
        """Create the topic with a new topic id; returns the id."""
        topic_id = await self.gateway.create_topic(name, assignment, config, new_topic_id())
        if topic_id is None:
            raise TopicProblem(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        return topic_id

    # -- CreatePartitions ---------------------------------------------------------------
    async def create_partitions(
        self, request: m.CreatePartitionsRequest
    ) -> m.CreatePartitionsResponse:
        """Add partitions to existing topics, as Kafka 2.8's ZkAdminManager does: check the
        new count against the current one and the limits, assign the new partitions'
        replicas (continuing the existing layout, or as given), write the extended
        assignment to /brokers/topics/<t>; the controller notices the new partitions and
        brings them online. The answer waits until this broker's metadata shows them all
        with leaders (or the timeout)."""
        live = await self.gateway.live_broker_racks()  # broker id -> rack
        budget = self._partition_budget()
        names = [t.name for t in request.topics]
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        added: dict[str, int] = {}
        for topic in request.topics:
            if names.count(topic.name) > 1:
                results[topic.name] = (ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                continue
            try:
                count = await self._add_partitions(topic, live, budget, request.validate_only)
                results[topic.name] = (ErrorCode.NONE, None)
                if not request.validate_only:
                    added[topic.name] = count
            except TopicProblem as problem:
                results[topic.name] = (problem.code, problem.message)
        if added:
            done = await self.metadata_changes.wait_for(
                lambda: all(self.cache.has_leaders(t, n) for t, n in added.items()),
                request.timeout_ms / 1000,
            )
            if not done:
                for name, count in added.items():
                    if not self.cache.has_leaders(name, count):
                        results[name] = (
                            ErrorCode.REQUEST_TIMED_OUT,
                            "partitions added, but their leaders were not elected within the "
                            "timeout",
                        )
        return m.CreatePartitionsResponse(
            throttle_time_ms=0,
            results=[
                m.CreatePartitionsResponseTopic(name=n, error_code=c, error_message=msg)
                for n, (c, msg) in results.items()
            ],
        )

    async def _add_partitions(
        self,
        topic: m.CreatePartitionsTopic,
        live: dict[int, str | None],
        budget: PartitionBudget,
        validate_only: bool,
    ) -> int:
        name = topic.name
        current = await self.gateway.topic_assignment_and_version(name)
        if current is None:
            raise TopicProblem(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        if await self.gateway.topic_being_deleted(name):
            raise TopicProblem(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"The topic '{name}' is queued for deletion."
            )
        if current.adding_replicas or current.removing_replicas:
            raise TopicProblem(
                ErrorCode.REASSIGNMENT_IN_PROGRESS, "A partition reassignment is in progress."
            )
        old = len(current.partitions)
        if topic.count < old:
            raise TopicProblem(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {old} partitions, which is higher than the requested "
                f"{topic.count}.",
            )
        if topic.count == old:
            raise TopicProblem(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
        adding = topic.count - old
        rf = len(current.partitions.get(0) or next(iter(current.partitions.values())))
        if topic.assignments is not None:
            if len(topic.assignments) != adding:
                raise TopicProblem(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Increasing the number of partitions by {adding} but "
                    f"{len(topic.assignments)} assignments provided.",
                )
            _raise_limit(budget.problem_before_assignment(adding, 0, ()))
            new = {old + i: list(a.broker_ids) for i, a in enumerate(topic.assignments)}
            for partition, replicas in new.items():
                if len(replicas) != rf:
                    raise TopicProblem(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Inconsistent replication factor between partitions, partition 0 has "
                        f"{rf} while partition {partition} has {len(replicas)}.",
                    )
                if len(set(replicas)) != len(replicas):
                    raise TopicProblem(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Duplicate brokers not allowed in replica assignment: {replicas} "
                        f"for partition {partition}.",
                    )
                unknown = sorted(set(replicas) - set(live))
                if unknown:
                    raise TopicProblem(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Unknown broker(s) in replica assignment: {unknown}.",
                    )
        else:
            if rf > len(live):
                raise TopicProblem(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Replication factor: {rf} larger than available brokers: {len(live)}.",
                )
            # Checked before the assignment is built (the count may be 2^31-1).
            _raise_limit(budget.problem_before_assignment(adding, rf, sorted(live)))
            brokers = sorted(live)
            first = (current.partitions.get(0) or [brokers[0]])[0]
            # Kafka continues the layout: the start index is where partition 0's first
            # replica sits among the brokers, the partition ids follow the existing ones.
            start = next((i for i, b in enumerate(brokers) if b >= first), 0)
            try:
                new = choose_assignment(adding, rf, live, start_index=start, first_partition_id=old)
            except AssignmentError as exc:
                raise TopicProblem(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None
        _raise_limit(budget.problem_after_assignment(new))
        budget.take(new)
        if not validate_only:
            # The topic id and the version read stay (a conditional set).
            extended = dataclasses.replace(
                current, partitions={**current.partitions, **{p: tuple(r) for p, r in new.items()}}
            )
            if not await self.gateway.add_partitions(extended):
                raise TopicProblem(
                    ErrorCode.INVALID_PARTITIONS,
                    "the topic's assignment changed while partitions were being added (another "
                    "CreatePartitions or a reassignment): describe it and retry",
                )
            log.info("topic %s: partitions %d..%d added: %s", name, old, topic.count - 1, new)
        return topic.count

    # -- DeleteTopics -------------------------------------------------------------------
    async def delete_topics(self, request: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
        """Mark each topic for deletion and wait until it left this broker's metadata.
        Topics named by id are looked up in this broker's metadata (an id no topic has is
        UNKNOWN_TOPIC_ID); each answer carries the id it was asked by."""
        asked = [(name, ZERO_TOPIC_ID_BYTES) for name in request.topic_names]
        for raw in request.topic_ids:
            asked_id = topic_id_of_bytes(raw)
            asked.append((self.cache.topic_name(asked_id) or "", topic_id_bytes(asked_id)))
        responses: dict[tuple[str, bytes], m.DeleteTopicsResponseTopic] = {}
        marked: list[tuple[str, bytes]] = []
        for key in asked:
            name = key[0]
            if not name:
                responses[key] = _delete_result(
                    key, ErrorCode.UNKNOWN_TOPIC_ID, "no topic has this topic id"
                )
                continue
            if not self.topic_defaults.delete_topic_enable:
                responses[key] = _delete_result(
                    key, ErrorCode.POLICY_VIOLATION, "topic deletion is disabled on this broker"
                )
                continue
            # What this broker's metadata shows, as Kafka does: a topic on its way out (no
            # longer in the metadata, its znodes not yet removed) is unknown, not deleted twice.
            if not self.cache.contains_topic(name):
                responses[key] = _delete_result(
                    key, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
                )
                continue
            await self.gateway.mark_topic_for_deletion(name)
            marked.append(key)
            responses[key] = _delete_result(key, ErrorCode.NONE, None)
        if marked:
            cache = self.cache

            def gone() -> bool:
                return not any(cache.contains_topic(n) for n, _ in marked)

            if not await self.metadata_changes.wait_for(gone, request.timeout_ms / 1000):
                for key in marked:
                    if cache.contains_topic(key[0]):
                        responses[key] = _delete_result(
                            key,
                            ErrorCode.REQUEST_TIMED_OUT,
                            "marked for deletion; not yet deleted within the timeout",
                        )
        return m.DeleteTopicsResponse(throttle_time_ms=0, responses=list(responses.values()))


def _raise_limit(problem: LimitProblem | None) -> None:
    if problem is not None:
        code = ErrorCode.INVALID_PARTITIONS if problem.per_request else ErrorCode.POLICY_VIOLATION
        raise TopicProblem(code, problem.message)


def _create_result(
    name: str, code: ErrorCode, message: str | None, *, topic_id: bytes = ZERO_TOPIC_ID_BYTES
) -> m.CreateTopicsResponseTopic:
    return m.CreateTopicsResponseTopic(
        name=name,
        error_code=code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        topic_id=topic_id,
    )


def _delete_result(
    key: tuple[str, bytes], code: ErrorCode, message: str | None
) -> m.DeleteTopicsResponseTopic:
    name, topic_id = key
    return m.DeleteTopicsResponseTopic(
        name=name, error_code=code, error_message=message, topic_id=topic_id
    )
