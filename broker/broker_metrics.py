"""The broker's metrics, registered in one place (Kafka's JMX names in Prometheus form).

Gauges read the replica manager and purgatories when scraped; counters come from the
core's stats; request rates and latency histograms are fed by the network layer's
observer returned from `register_broker_metrics`. `register_quota_metrics` adds the
client quota managers' per entity rates and throttle times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.core.client_quotas import ClientQuotas, SensorSnapshot
from broker.core.fetch_sessions import FetchManager
from broker.core.group.coordinator import GroupCoordinator
from broker.core.metadata_cache import MetadataCache
from broker.core.replica_manager import ReplicaManager
from client.protocol.api import ApiKey
from server_common.metrics import MetricsRegistry
from server_common.network import Observer


class _PartitionLabels:
    """The replica manager's partitions in (topic, partition) order, each with its
    metric labels. Order and labels are rebuilt only when the set of partitions changed
    (sorting thousands of TopicPartitions and making their label dicts at every snapshot
    cost seconds of a 10,000-partition broker's loop); the partitions are looked up at
    each read (a partition may be replaced under the same name)."""

    def __init__(self, rm: ReplicaManager) -> None:
        self._rm = rm
        self._keys: frozenset = frozenset()
        self._order: list[tuple[dict[str, str], Any]] = []

    def sorted(self) -> list[tuple[dict[str, str], Any]]:
        partitions = self._rm.partitions
        if len(partitions) != len(self._keys) or partitions.keys() != self._keys:
            self._keys = frozenset(partitions)
            self._order = [
                ({"topic": tp.topic, "partition": str(tp.partition)}, tp)
                for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition))
            ]
        return [(labels, partitions[tp]) for labels, tp in self._order if tp in partitions]


def register_broker_metrics(
    reg: MetricsRegistry,
    rm: ReplicaManager,
    metadata_cache: MetadataCache,
    groups: GroupCoordinator | None = None,
    fetch_sessions: FetchManager | None = None,
) -> Observer:
    stats = rm.stats
    if groups is not None:
        _register_group_metrics(reg, groups)
    if fetch_sessions is not None:
        _register_fetch_session_metrics(reg, fetch_sessions)

    reg.gauge(
        "under_replicated_partitions",
        "UnderReplicatedPartitions: led partitions whose ISR is smaller than the replica set",
        rm.under_replicated_count,
    )
    reg.gauge(
        "under_min_isr_partitions",
        "UnderMinIsrPartitionCount: led partitions whose ISR is below min.insync.replicas",
        rm.under_min_isr_count,
    )
    reg.gauge(
        "offline_partitions_count",
        "OfflinePartitionsCount as this broker's metadata shows it (leader -1)",
        lambda: sum(
            1 for parts in metadata_cache.topics.values() for s in parts.values() if s.leader < 0
        ),
    )
    reg.gauge("leader_count", "LeaderCount: partitions led by this broker", rm.leader_count)
    reg.gauge(
        "partition_count", "PartitionCount: partitions hosted here", lambda: len(rm.partitions)
    )
    reg.counter_of(
        "isr_shrinks_total", "IsrShrinksPerSec as a running total", lambda: stats.isr_shrinks
    )
    reg.counter_of(
        "isr_expands_total", "IsrExpandsPerSec as a running total", lambda: stats.isr_expands
    )
    reg.counter_of(
        "failed_isr_updates_total",
        "FailedIsrUpdatesPerSec as a running total",
        lambda: stats.failed_isr_updates,
    )
    reg.counter_of("truncations_total", "log truncations as a follower", lambda: stats.truncations)
    reg.counter_of(
        "corrupt_fetch_responses_total",
        "follower fetch responses not appended because a batch failed its CRC check",
        lambda: stats.corrupt_fetches,
    )
    reg.counter_of("bytes_in_total", "BytesInPerSec as a running total", lambda: stats.bytes_in)
    reg.counter_of("bytes_out_total", "BytesOutPerSec as a running total", lambda: stats.bytes_out)
    reg.counter_of(
        "messages_in_total", "MessagesInPerSec as a running total", lambda: stats.messages_in
    )
    reg.counter_of(
        "duplicate_batches_total",
        "idempotent producers' retried batches answered with their first write's offsets",
        lambda: stats.duplicate_batches,
    )
    reg.counter_of(
        "consumer_fetch_partitions_total",
        "partitions of consumer fetches read without error, per role this broker read them "
        "as: leader, or follower (KIP-392 fetch from the closest replica)",
        lambda: [
            ({"role": "leader"}, rm.consumer_reads.reads_as_leader),
            ({"role": "follower"}, rm.consumer_reads.reads_as_follower),
        ],
    )
    reg.counter_of(
        "consumer_fetch_bytes_total",
        "record bytes sent to consumers, per role this broker read them as: leader, or "
        "follower (KIP-392)",
        lambda: [
            ({"role": "leader"}, rm.consumer_reads.bytes_as_leader),
            ({"role": "follower"}, rm.consumer_reads.bytes_as_follower),
        ],
    )
    reg.counter_of(
        "preferred_read_replica_answers_total",
        "consumer fetch partitions this leader answered with another replica to read from "
        "(KIP-392 preferred_read_replica) instead of records",
        lambda: rm.consumer_reads.preferred_replica_answers,
    )
    reg.gauge(
        "purgatory_size",
        "PurgatorySize: delayed operations waiting, per purgatory",
        lambda: [
            ({"delayed_operation": "Produce"}, rm.produce_purgatory.pending),
            ({"delayed_operation": "Fetch"}, rm.fetch_purgatory.pending),
        ],
    )
    reg.counter_of(
        "purgatory_expired_total",
        "delayed operations that expired, per purgatory",
        lambda: [
            ({"delayed_operation": "Produce"}, rm.produce_purgatory.expired_count),
            ({"delayed_operation": "Fetch"}, rm.fetch_purgatory.expired_count),
        ],
    )
    # Per partition: one sample each (thousands on a large broker, in every JSON-lines
    # snapshot): labels and order are built once per set of partitions, not per read.
    by_partition = _PartitionLabels(rm)
    reg.gauge(
        "log_end_offset",
        "LogEndOffset per partition",
        lambda: [(labels, p.log_end_offset) for labels, p in by_partition.sorted()],
    )
    reg.gauge(
        "high_watermark",
        "HighWatermark per partition",
        lambda: [(labels, p.high_watermark) for labels, p in by_partition.sorted()],
    )
    reg.gauge(
        "isr_size",
        "ISR size per led partition",
        lambda: [(labels, len(p.isr)) for labels, p in by_partition.sorted() if p.is_leader],
    )
    fetch_wait = reg.histogram(
        "fetch_wait_seconds",
        "time a fetch waited in the fetch purgatory (long poll) before it was answered; "
        "request_latency_seconds{request=Fetch} minus this is the processing time",
    )
    waited = {
        True: fetch_wait.labelled({"request": "Fetch", "fetcher": "follower"}),
        False: fetch_wait.labelled({"request": "Fetch", "fetcher": "consumer"}),
    }
    rm.fetch_waited = lambda from_follower, ms: waited[from_follower](ms / 1000.0)
    requests = reg.counter("requests_total", "RequestsPerSec as a running total, per API")
    latency = reg.histogram("request_latency_seconds", "TotalTimeMs per API, in seconds")
    sent = reg.counter("response_bytes_total", "bytes of responses sent, per API")
    # Per API: (count one, observe the latency, add response bytes), made at first use.
    updaters: dict[int, tuple] = {}

    def observe(api_key: int, seconds: float, bytes_in: int, bytes_out: int) -> None:
        update = updaters.get(api_key)
        if update is None:
            try:
                name = ApiKey(api_key).name.title().replace("_", "")
            except ValueError:
                name = str(api_key)
            labels = {"request": name}
            update = updaters[api_key] = (
                requests.labelled(labels),
                latency.labelled(labels),
                sent.labelled(labels),
            )
        count, record_latency, add_sent = update
        count(1)
        record_latency(seconds)
        if bytes_out:
            add_sent(bytes_out)

    return observe


def _register_group_metrics(reg: MetricsRegistry, groups: GroupCoordinator) -> None:
    reg.gauge(
        "group_count",
        "consumer groups this broker coordinates, per state (Kafka's NumGroups<State>)",
        lambda: [({"state": state}, n) for state, n in groups.counts_by_state().items()],
    )
    reg.counter_of(
        "group_rebalances_total",
        "generations completed by this coordinator (Kafka's rebalance rate, as a total)",
        lambda: groups.stats.rebalances,
    )
    reg.counter_of(
        "group_offset_commits_total",
        "partition offsets committed through this coordinator (OffsetCommits, as a total)",
        lambda: groups.stats.commits,
    )
    reg.counter_of(
        "group_members_expired_total",
        "members removed after their session timed out",
        lambda: groups.stats.expired_members,
    )
    reg.gauge(
        "purgatory_size_group",
        "delayed joins and heartbeats waiting",
        lambda: [
            ({"delayed_operation": "Rebalance"}, groups.join_purgatory.pending),
            ({"delayed_operation": "Heartbeat"}, groups.heartbeat_purgatory.pending),
        ],
    )


def _register_fetch_session_metrics(reg: MetricsRegistry, manager: FetchManager) -> None:
    """Kafka's FetchSessionCache gauges and eviction meter, and the fetches served per
    kind of context (Tributary's: shows the incremental fetches)."""
    cache = manager.cache
    reg.gauge(
        "incremental_fetch_sessions",
        "NumIncrementalFetchSessions: fetch sessions in the cache",
        lambda: len(cache),
    )
    reg.gauge(
        "incremental_fetch_partitions_cached",
        "NumIncrementalFetchPartitionsCached: partitions over all fetch sessions",
        lambda: cache.total_partitions,
    )
    reg.counter_of(
        "incremental_fetch_session_evictions_total",
        "IncrementalFetchSessionEvictionsPerSec as a running total",
        lambda: cache.evictions,
    )
    reg.counter_of(
        "fetch_requests_by_session_total",
        "fetch requests per kind of fetch session context: sessionless, full (may create "
        "a session), incremental, error (unknown session or wrong epoch)",
        lambda: [({"kind": kind}, count) for kind, count in manager.served.items()],
    )


QUOTA_TYPES = (("Produce", "produce"), ("Fetch", "fetch"), ("Request", "request"))


def register_quota_metrics(
    reg: MetricsRegistry, quotas: ClientQuotas, clock: Callable[[], int]
) -> None:
    """Kafka's per quota entity metrics (type Produce, Fetch, Request; tags user and
    client-id as the quota that applies groups them): the rate (byte-rate, bytes/s;
    request-time, % of one thread) and the throttle time handed out."""

    def per_sensor(read: Callable[[SensorSnapshot], float]) -> Callable[[], list]:
        def samples() -> list:
            now = clock()
            return [
                (
                    {"quota_type": quota_type, "user": s.user, "client_id": s.client_id},
                    read(s),
                )
                for quota_type, attribute in QUOTA_TYPES
                for s in getattr(quotas, attribute).snapshot(now)
            ]

        return samples

    reg.gauge(
        "client_quota_rate",
        "byte-rate (Produce, Fetch: bytes/s) or request-time (Request: % of one thread) "
        "per quota entity, over the quota windows",
        per_sensor(lambda s: s.rate),
    )
    reg.counter_of(
        "client_quota_throttle_time_ms_total",
        "throttle-time handed out per quota entity, ms as a running total",
        per_sensor(lambda s: s.throttle_ms_total),
    )
    reg.counter_of(
        "client_quota_throttled_responses_total",
        "responses throttled per quota entity",
        per_sensor(lambda s: s.throttled),
    )
