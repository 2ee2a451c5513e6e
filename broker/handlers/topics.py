"""Admin requests that brokers turn into ZooKeeper writes, as Kafka 2.x's admin did.

How it works: CreateTopics validates each topic (name, partitions, replication factor
against the live brokers in /brokers/ids, configs against the topic config names, or a
given assignment), computes the assignment (`core/assignment.py`), writes
/config/topics/<t> and then /brokers/topics/<t>; the controller does the rest. The
response waits (up to the request's timeout) until this broker's metadata cache shows
every partition with a leader, so a client can produce right after. CreatePartitions
extends /brokers/topics/<t> with a conditional set (the controller watches each topic
znode and brings new partitions online) and waits the same way. Partition counts and
replication factors are checked against the limits (`core/partition_limits.py`) before
any assignment is built. DeleteTopics marks
/admin/delete_topics/<t> and waits for the topic to leave the metadata. ElectLeaders
and AlterPartitionReassignments write the /admin znodes the controller watches. All of
it goes through the broker's ZooKeeper gateway; the waits watch the metadata cache.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from broker.core.assignment import AssignmentError, assign_replicas, validate_assignment
from broker.core.log.config import LogConfig
from broker.core.log.errors import ConfigError
from broker.core.metadata_cache import MetadataCache
from broker.core.partition_limits import LimitProblem, PartitionBudget, PartitionLimits
from broker.handlers.metadata_changes import MetadataChanges
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition, topic_name_problem
from server_common import zkdata
from server_common.network import error_answer

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
    max_partitions_per_request: int = 10_000  # max.partitions.per.request
    max_broker_partitions: int = 4_000  # max.broker.partitions (KIP-578)
    max_partitions: int = 200_000  # max.partitions (KIP-578)

    @classmethod
    def from_config(cls, config) -> TopicDefaults:
        return cls(
            num_partitions=config["num.partitions"],
            replication_factor=config["default.replication.factor"],
            delete_topic_enable=config["delete.topic.enable"],
            max_partitions_per_request=config["max.partitions.per.request"],
            max_broker_partitions=config["max.broker.partitions"],
            max_partitions=config["max.partitions"],
        )


class AdminHandlers:
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

    # -- CreateTopics -------------------------------------------------------------------
    async def create_topics(self, request: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
        live = await self.gateway.live_broker_ids()
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
                assignment, config = await self._plan_topic(topic, live, budget)
                budget.take(assignment)
                if not request.validate_only:
                    await self._write_topic(topic.name, assignment, config)
                    created[topic.name] = len(assignment)
                rf = len(next(iter(assignment.values())))
                results[topic.name] = m.CreateTopicsResponseTopic(
                    name=topic.name,
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    num_partitions=len(assignment),
                    replication_factor=rf,
                )
                if not request.validate_only:
                    log.info(
                        "created topic %s: %d partitions, RF %d, config %s",
                        topic.name,
                        len(assignment),
                        rf,
                        config,
                    )
            except TopicProblem as problem:
                results[topic.name] = _create_result(topic.name, problem.code, problem.message)
        if created:
            done = await self.metadata_changes.wait_for(
                lambda: all(self.cache.has_leaders(t, n) for t, n in created.items()),
                request.timeout_ms / 1000,
            )
            if not done:
                for name in created:
                    if not self.cache.has_leaders(name, created[name]):
                        old = results[name]
                        results[name] = _create_result(
                            name,
                            ErrorCode.REQUEST_TIMED_OUT,
                            "topic created, but its leaders were not elected within the timeout",
                            old.num_partitions,
                            old.replication_factor,
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
        self, topic: m.CreateTopicsTopic, live: set[int], budget: PartitionBudget
    ) -> tuple[dict[int, list[int]], dict[str, str]]:
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
        assignment, config = self._assign(topic, live, config, budget)
        if "min.insync.replicas" in config:
            rf = min(len(replicas) for replicas in assignment.values())
            if (problem := min_isr_problem(log_config.min_insync_replicas, rf)) is not None:
                raise TopicProblem(ErrorCode.INVALID_CONFIG, problem)
        return assignment, config

    def _assign(
        self,
        topic: m.CreateTopicsTopic,
        live: set[int],
        config: dict[str, str],
        budget: PartitionBudget,
    ) -> tuple[dict[int, list[int]], dict[str, str]]:
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise TopicProblem(
                    ErrorCode.INVALID_REQUEST,
                    "give either an assignment or partitions and replication factor",
                )
            assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
            _raise_limit(budget.problem_before_assignment(len(assignment), 0, ()))
            if (problem := validate_assignment(assignment, live)) is not None:
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
            assignment = assign_replicas(partitions, rf, sorted(live))
        except AssignmentError as exc:
            raise TopicProblem(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None
        _raise_limit(budget.problem_after_assignment(assignment))
        return assignment, config

    async def _write_topic(
        self, name: str, assignment: dict[int, list[int]], config: dict[str, str]
    ) -> None:
        if not await self.gateway.create_topic(name, assignment, config):
            raise TopicProblem(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")

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
        live = await self.gateway.live_broker_ids()
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
        live: set[int],
        budget: PartitionBudget,
        validate_only: bool,
    ) -> int:
        name = topic.name
        found = await self.gateway.topic_assignment_and_version(name)
        if found is None:
            raise TopicProblem(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        current, version = found
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
                unknown = sorted(set(replicas) - live)
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
                new = assign_replicas(
                    adding, rf, brokers, start_index=start, first_partition_id=old
                )
            except AssignmentError as exc:
                raise TopicProblem(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None
        _raise_limit(budget.problem_after_assignment(new))
        budget.take(new)
        if not validate_only:
            extended = zkdata.TopicAssignment(
                name, {**current.partitions, **{p: tuple(r) for p, r in new.items()}}
            )
            if not await self.gateway.add_partitions(extended, version):
                raise TopicProblem(
                    ErrorCode.INVALID_PARTITIONS,
                    "the topic's assignment changed while partitions were being added (another "
                    "CreatePartitions or a reassignment): describe it and retry",
                )
            log.info("topic %s: partitions %d..%d added: %s", name, old, topic.count - 1, new)
        return topic.count

    # -- DeleteTopics -------------------------------------------------------------------
    async def delete_topics(self, request: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
        responses: dict[str, m.DeleteTopicsResponseTopic] = {}
        marked: list[str] = []
        for name in request.topic_names:
            if not self.topic_defaults.delete_topic_enable:
                responses[name] = _delete_result(
                    name, ErrorCode.POLICY_VIOLATION, "topic deletion is disabled on this broker"
                )
                continue
            # What this broker's metadata shows, as Kafka does: a topic on its way out (no
            # longer in the metadata, its znodes not yet removed) is unknown, not deleted twice.
            if not self.cache.contains_topic(name):
                responses[name] = _delete_result(
                    name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
                )
                continue
            await self.gateway.mark_topic_for_deletion(name)
            marked.append(name)
            responses[name] = _delete_result(name, ErrorCode.NONE, None)
        if marked:
            cache = self.cache

            def gone() -> bool:
                return not any(cache.contains_topic(n) for n in marked)

            if not await self.metadata_changes.wait_for(gone, request.timeout_ms / 1000):
                for name in marked:
                    if cache.contains_topic(name):
                        responses[name] = _delete_result(
                            name,
                            ErrorCode.REQUEST_TIMED_OUT,
                            "marked for deletion; not yet deleted within the timeout",
                        )
        return m.DeleteTopicsResponse(throttle_time_ms=0, responses=list(responses.values()))

    # -- ElectLeaders (preferred) -----------------------------------------------------------
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

    # -- IncrementalAlterConfigs ----------------------------------------------------------
    async def incremental_alter_configs(
        self, request: m.IncrementalAlterConfigsRequest
    ) -> m.IncrementalAlterConfigsResponse:
        """Topic config changes: SET and DELETE on the topic's overrides, validated like
        CreateTopics' (names, values, min.insync.replicas against the replication
        factor), written to /config/topics/<t> and announced under /config/changes."""
        responses = []
        for resource in request.resources:
            code, message = ErrorCode.NONE, None
            try:
                config = await self._altered_config(resource)
                if not request.validate_only:
                    await self.gateway.set_topic_config(resource.resource_name, config)
                    log.info("topic %s: config set to %s", resource.resource_name, config)
            except TopicProblem as problem:
                code, message = problem.code, problem.message
            responses.append(
                m.AlterConfigsResourceResponse(
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        return m.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)

    async def _altered_config(self, resource: m.AlterConfigsResource) -> dict[str, str]:
        name = resource.resource_name
        if resource.resource_type != m.TOPIC_RESOURCE:
            raise TopicProblem(ErrorCode.INVALID_REQUEST, "only topic configs can be altered")
        assignment = await self.gateway.topic_assignment(name)
        if assignment is None:
            raise TopicProblem(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        config = (await self.gateway.topic_configs([name]))[name]
        for entry in resource.configs:
            if entry.config_operation == m.CONFIG_SET and entry.value is not None:
                config[entry.name] = entry.value
            elif entry.config_operation == m.CONFIG_DELETE:
                config.pop(entry.name, None)
            else:
                raise TopicProblem(
                    ErrorCode.INVALID_REQUEST,
                    f"{entry.name}: only SET (with a value) and DELETE are supported",
                )
        try:
            log_config = LogConfig.from_properties(config, self.default_log_config)
        except ConfigError as exc:
            raise TopicProblem(ErrorCode.INVALID_CONFIG, str(exc)) from None
        rf = min((len(r) for r in assignment.partitions.values()), default=0)
        if "min.insync.replicas" in config:
            if (problem := min_isr_problem(log_config.min_insync_replicas, rf)) is not None:
                raise TopicProblem(ErrorCode.INVALID_CONFIG, problem)
        return config

    # -- DescribeConfigs --------------------------------------------------------------------
    async def describe_configs(self, request: m.DescribeConfigsRequest):
        defaults = self.default_log_config.to_properties()
        results = []
        for resource in request.resources:
            name = resource.resource_name
            if resource.resource_type != m.TOPIC_RESOURCE:
                results.append(
                    _configs_result(resource, ErrorCode.INVALID_REQUEST, "only topic configs")
                )
                continue
            if not await self.gateway.topic_exists(name):
                results.append(
                    _configs_result(
                        resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}"
                    )
                )
                continue
            overrides = (await self.gateway.topic_configs([name]))[name]
            keys = resource.configuration_keys or sorted(set(defaults) | set(overrides))
            configs = [
                m.DescribeConfigsResult(
                    name=key,
                    value=overrides.get(key, defaults.get(key)),
                    read_only=False,
                    is_default=key not in overrides,
                )
                for key in keys
                if key in overrides or key in defaults
            ]
            results.append(_configs_result(resource, ErrorCode.NONE, None, configs))
        return m.DescribeConfigsResponse(throttle_time_ms=0, results=results)

    # -- reassignments ------------------------------------------------------------------
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


def _raise_limit(problem: LimitProblem | None) -> None:
    if problem is not None:
        code = ErrorCode.INVALID_PARTITIONS if problem.per_request else ErrorCode.POLICY_VIOLATION
        raise TopicProblem(code, problem.message)


def _create_result(
    name: str, code: ErrorCode, message: str | None, partitions: int = -1, rf: int = -1
) -> m.CreateTopicsResponseTopic:
    return m.CreateTopicsResponseTopic(
        name=name,
        error_code=code,
        error_message=message,
        num_partitions=partitions,
        replication_factor=rf,
    )


def _configs_result(
    resource: m.DescribeConfigsResource,
    code: ErrorCode,
    message: str | None,
    configs: list[m.DescribeConfigsResult] | None = None,
) -> m.DescribeConfigsResponseResource:
    return m.DescribeConfigsResponseResource(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs or [],
    )


def _delete_result(name: str, code: ErrorCode, message: str | None) -> m.DeleteTopicsResponseTopic:
    return m.DeleteTopicsResponseTopic(name=name, error_code=code, error_message=message)
