"""KIP-392 on real replica managers: a leader with the rack-aware selector sends a
rack-b consumer to the rack-b follower; the follower serves it up to its own high
watermark (never past it, OFFSET_OUT_OF_RANGE past its log end), a waiting fetch there
completes when its replication brings a new HW, and consumer reads are counted by role.

Three brokers (1 leads, on rack a; 2 on rack b; 3 on rack c), real logs in a temp dir;
replication is driven by hand (each follower's fetch request goes to the leader's
`fetch_messages` and the answer back to the follower), time is what the test says.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.core.delayed_fetch import FetchParams, FetchPartitionRequest
from broker.core.fetch_sessions import FetchManager, FetchSessionCache, FetchSessionConfig
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.partition import PartitionStateUpdate
from broker.core.replica_manager import FetchedPartition, ReplicaManager, ReplicationConfig
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition

TP = TopicPartition("orders", 0)
T0 = 1_000_000
RACKS = {1: "a", 2: "b", 3: "c"}
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def batch(*values: bytes) -> bytes:
    return build_batch([Record(key=None, value=v, timestamp_ms=T0) for v in values])


@pytest.fixture
def brokers(tmp_path) -> Iterator[dict[int, ReplicaManager]]:
    config = LogConfig(min_insync_replicas=1)
    rms: dict[int, ReplicaManager] = {}
    managers = []
    for broker in (1, 2, 3):
        manager = LogManager.open(tmp_path / f"b{broker}", config, now_ms=T0)
        managers.append(manager)
        rm = ReplicaManager(
            broker,
            manager,
            ReplicationConfig(replica_selector="rack-aware"),
            log_config_for=lambda topic: config,
            now_ms=T0,
        )
        rm.consumer_reads.live_rack = lambda b: (b in RACKS, RACKS.get(b))
        state = PartitionStateUpdate("orders", 0, 1, 1, 0, (1, 2, 3), 0, (1, 2, 3))
        assert rm.become_leader_or_follower(T0, 1, [state]).partition_errors[TP] == 0
        rms[broker] = rm
    yield rms
    for manager in managers:
        manager.close()


def replicate(leader: ReplicaManager, follower: ReplicaManager, now: int) -> None:
    """One fetch round of `follower` from broker 1."""
    follower.followers.truncation_requests(1, now)  # empty logs: straight to FETCHING
    sent = follower.followers.fetch_request(1, now)
    answers: list[dict[TopicPartition, FetchedPartition]] = []
    leader.fetch_messages(
        now,
        FetchParams(replica_id=follower.broker_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20),
        {
            p.topic_partition: FetchPartitionRequest(
                p.fetch_offset, p.current_leader_epoch, p.partition_max_bytes, p.log_start_offset
            )
            for p in sent
        },
        answers.append,
    )
    follower.followers.apply_fetch(1, sent, answers[0], now)


def produce(leader: ReplicaManager, *values: bytes) -> None:
    leader.append_records(T0, acks=1, timeout_ms=0, entries={TP: batch(*values)}, respond=print)


def consumer_fetch(
    rm: ReplicaManager, offset: int, rack: str, now: int = T0, max_wait_ms: int = 0
) -> list[FetchedPartition]:
    """A consumer's fetch of `TP` at `offset` (leader epoch 0): the answers so far."""
    answers: list[FetchedPartition] = []
    rm.fetch_messages(
        now,
        FetchParams(-1, max_wait_ms, 1, 1 << 20, client_rack=rack),
        {TP: FetchPartitionRequest(offset, 0, 1 << 20)},
        lambda results: answers.append(results[TP]),
    )
    return answers


def replicated_cluster(brokers: dict[int, ReplicaManager], *values: bytes) -> None:
    """`values` produced and replicated to both followers, every HW at the end."""
    produce(brokers[1], *values)
    for _ in range(2):  # the second round brings the followers the HW the first made
        replicate(brokers[1], brokers[2], T0 + 10)
        replicate(brokers[1], brokers[3], T0 + 10)


def test_the_leader_sends_a_rack_b_consumer_to_the_rack_b_follower(brokers) -> None:
    replicated_cluster(brokers, b"x", b"y")
    [answer] = consumer_fetch(brokers[1], 0, "b", T0 + 20)
    assert answer.error_code is ErrorCode.NONE
    assert answer.preferred_read_replica == 2
    assert answer.records == b""  # no records: read them there
    assert answer.high_watermark == 2
    assert brokers[1].consumer_reads.preferred_replica_answers == 1
    assert brokers[1].consumer_reads.bytes_as_leader == 0
    # A consumer in the leader's rack, of no rack, or of a rack without a replica reads here.
    for rack in ("a", "", "z"):
        [answer] = consumer_fetch(brokers[1], 0, rack, T0 + 20)
        assert answer.preferred_read_replica == -1 and answer.records
    assert brokers[1].consumer_reads.reads_as_leader == 3


def test_no_selector_means_the_leader_serves_every_rack(brokers, tmp_path) -> None:
    config = LogConfig()
    manager = LogManager.open(tmp_path / "plain", config, now_ms=T0)
    plain = ReplicaManager(
        1, manager, ReplicationConfig(), log_config_for=lambda t: config, now_ms=T0
    )
    plain.consumer_reads.live_rack = lambda b: (True, RACKS[b])
    state = PartitionStateUpdate("orders", 0, 1, 1, 0, (1, 2), 0, (1, 2))
    plain.become_leader_or_follower(T0, 1, [state])
    produce(plain, b"x")
    replicate(plain, brokers[2], T0)
    [answer] = consumer_fetch(plain, 0, "b", T0)
    assert answer.preferred_read_replica == -1
    manager.close()


def test_a_follower_whose_log_does_not_cover_the_offset_is_not_chosen(brokers) -> None:
    produce(brokers[1], b"x", b"y")
    replicate(brokers[1], brokers[3], T0 + 10)  # broker 2 never fetched: its LEO is unknown
    [answer] = consumer_fetch(brokers[1], 0, "b", T0 + 20)
    assert answer.preferred_read_replica == -1  # the leader serves it
    # A dead broker is never chosen either.
    replicate(brokers[1], brokers[2], T0 + 30)
    brokers[1].consumer_reads.live_rack = lambda b: (b != 2, RACKS.get(b))
    [answer] = consumer_fetch(brokers[1], 0, "b", T0 + 40)
    assert answer.preferred_read_replica == -1


def test_a_follower_serves_a_consumer_up_to_its_own_high_watermark(brokers) -> None:
    follower = brokers[2]
    produce(brokers[1], b"x", b"y")
    replicate(brokers[1], follower, T0 + 10)  # has both records, but HW still 0
    partition = follower.get_partition(TP)
    assert partition is not None
    assert (partition.log_end_offset, partition.high_watermark) == (2, 0)
    [answer] = consumer_fetch(follower, 0, "b", T0 + 10)
    assert answer.error_code is ErrorCode.NONE and answer.records == b""
    for _ in range(2):  # broker 3 gets both records and then reports having them
        replicate(brokers[1], brokers[3], T0 + 10)
    replicate(brokers[1], follower, T0 + 11)  # learns HW 2
    assert partition.high_watermark == 2
    [answer] = consumer_fetch(follower, 0, "b", T0 + 12)
    assert answer.records and answer.high_watermark == 2
    assert follower.consumer_reads.reads_as_follower == 2
    assert follower.consumer_reads.bytes_as_follower == len(answer.records)
    assert follower.consumer_reads.bytes_as_leader == 0


def test_past_the_followers_log_end_is_out_of_range(brokers) -> None:
    replicated_cluster(brokers, b"x")
    [answer] = consumer_fetch(brokers[2], 5, "b", T0 + 20)
    assert answer.error_code is ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_consumer_without_a_rack_is_refused_by_a_follower(brokers) -> None:
    replicated_cluster(brokers, b"x")
    [answer] = consumer_fetch(brokers[2], 0, "", T0 + 20)
    assert answer.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_follower_checks_the_consumers_leader_epoch(brokers) -> None:
    replicated_cluster(brokers, b"x")
    answers: list[FetchedPartition] = []
    brokers[2].fetch_messages(
        T0 + 20,
        FetchParams(-1, 0, 1, 1 << 20, client_rack="b"),
        {TP: FetchPartitionRequest(0, 5, 1 << 20)},
        lambda results: answers.append(results[TP]),
    )
    assert answers[0].error_code is ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_waiting_fetch_on_a_follower_completes_when_its_high_watermark_moves(brokers) -> None:
    replicated_cluster(brokers, b"x")
    follower = brokers[2]
    answers = consumer_fetch(follower, 1, "b", T0 + 20, max_wait_ms=5_000)
    assert answers == [] and follower.fetch_purgatory.pending == 1
    produce(brokers[1], b"y")
    replicate(brokers[1], follower, T0 + 30)  # the record arrives, the HW is still 1
    assert answers == []
    for _ in range(2):
        replicate(brokers[1], brokers[3], T0 + 30)
    replicate(brokers[1], follower, T0 + 31)  # HW 2: the consumer's fetch completes
    assert len(answers) == 1 and answers[0].records and answers[0].high_watermark == 2
    assert follower.fetch_purgatory.pending == 0


def test_an_incremental_session_answers_the_preferred_replica(brokers) -> None:
    replicated_cluster(brokers, b"x")
    sessions = FetchManager(FetchSessionCache(FetchSessionConfig(max_slots=10, eviction_ms=1000)))
    request = {TP: FetchPartitionRequest(1, 0, 1 << 20)}
    full = sessions.new_context(T0, 0, 0, request, [], from_follower=False)
    answers: list = []
    params = FetchParams(-1, 0, 1, 1 << 20, client_rack="a")  # the leader's rack: served
    brokers[1].fetch_messages(T0, params, full.partitions, answers.append)
    session_id = full.respond(answers[-1], T0).session_id
    assert session_id
    # The same session, now from rack b: the partition's only news is where to read.
    incremental = sessions.new_context(T0, session_id, 1, {}, [], from_follower=False)
    params = FetchParams(-1, 0, 1, 1 << 20, client_rack="b")
    brokers[1].fetch_messages(T0, params, incremental.partitions, answers.append)
    answer = incremental.respond(answers[-1], T0)
    assert answer.partitions[TP].preferred_read_replica == 2
