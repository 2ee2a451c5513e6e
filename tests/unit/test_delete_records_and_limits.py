"""DeleteRecords in the replica manager (the leader moves its log start offset; the answer
waits for every in-sync follower to report one at least as high) and the partition
limits CreateTopics/CreatePartitions check before building an assignment.

Real logs in a temp dir; time is whatever the test says it is.
"""

from __future__ import annotations

import pytest

from broker.core.delayed_fetch import FetchParams, FetchPartitionRequest
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.partition import IsrUpdateSucceeded, PartitionStateUpdate
from broker.core.partition_limits import PartitionBudget, PartitionLimits
from broker.core.replica_manager import ReplicaManager, ReplicationConfig
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition

TP = TopicPartition("orders", 0)
T0 = 1_000_000


@pytest.fixture
def leader(tmp_path):
    """Broker 1 leading `orders-0` (replicas 1, 2, 3, all in the ISR) with 10 records
    replicated everywhere (HW 10)."""
    config = LogConfig(min_insync_replicas=1)
    manager = LogManager.open(tmp_path / "b1", config, now_ms=T0)
    rm = ReplicaManager(
        1, manager, ReplicationConfig(), log_config_for=lambda topic: config, now_ms=T0
    )
    state = PartitionStateUpdate("orders", 0, 1, 1, 0, (1, 2, 3), 0, (1, 2, 3))
    rm.become_leader_or_follower(T0, 1, [state])
    records = build_batch([Record(None, b"v%d" % i, T0) for i in range(10)])
    rm.append_records(T0, acks=1, timeout_ms=0, entries={TP: records}, respond=lambda r: None)
    for follower in (2, 3):
        fetch(rm, follower, 10, 0, T0)
    assert rm.get_partition(TP).high_watermark == 10
    yield rm
    manager.close()


def fetch(rm, replica: int, offset: int, log_start: int, now: int):
    answers = []
    rm.fetch_messages(
        now,
        FetchParams(replica_id=replica, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20),
        {TP: FetchPartitionRequest(offset, 0, 1 << 20, log_start)},
        answers.append,
    )
    return answers[0][TP]


def delete(rm, offset: int, now: int = T0, timeout_ms: int = 5_000):
    results = []
    rm.delete_records(now, timeout_ms=timeout_ms, offsets={TP: offset}, respond=results.append)
    return results


def test_delete_records_waits_for_every_isr_member_to_follow(leader):
    results = delete(leader, 4)
    assert results == []  # the leader moved; the followers have not yet
    partition = leader.get_partition(TP)
    assert partition.log_start_offset == 4
    answer = fetch(leader, 2, 10, 0, T0 + 1)
    assert answer.log_start_offset == 4  # followers learn it from the fetch response
    fetch(leader, 2, 10, 4, T0 + 2)
    assert results == []  # broker 3 still reports 0
    fetch(leader, 3, 10, 4, T0 + 3)
    assert results[0][TP].error_code == ErrorCode.NONE
    assert results[0][TP].low_watermark == 4
    # Earliest offsets and consumer fetches follow the new start.
    assert leader.list_offset(TP, -2, -1, from_consumer=True)[2] == 4
    consumer = []
    leader.fetch_messages(
        T0 + 4,
        FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20),
        {TP: FetchPartitionRequest(2, -1, 1 << 20)},
        consumer.append,
    )
    assert consumer[0][TP].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_an_isr_shrink_lets_the_wait_complete(leader):
    results = delete(leader, -1)  # -1: the high watermark
    more = build_batch([Record(None, b"late", T0)])
    leader.append_records(T0, acks=1, timeout_ms=0, entries={TP: more}, respond=lambda r: None)
    fetch(leader, 2, 11, 10, T0 + 1)
    assert results == []  # broker 3 neither follows nor catches up
    partition = leader.get_partition(TP)
    update = partition.maybe_shrink_isr(T0 + 60_000, 1_000)
    assert update is not None and 3 not in update.new_state.isr
    leader.complete_isr_update(TP, IsrUpdateSucceeded(update.new_state.zk_version + 1), T0 + 60_000)
    assert results[0][TP].error_code == ErrorCode.NONE
    assert results[0][TP].low_watermark == 10


def test_delete_records_errors_and_timeout(leader):
    (above,) = delete(leader, 11)
    assert above[TP].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert leader.get_partition(TP).log_start_offset == 0
    results = delete(leader, 3, timeout_ms=1_000)
    leader.expire_delayed(T0 + 1_000)
    assert results[0][TP].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert leader.get_partition(TP).log_start_offset == 3  # moved all the same
    unknown = []
    leader.delete_records(
        T0,
        timeout_ms=0,
        offsets={TopicPartition("nope", 0): 1},
        respond=unknown.append,
    )
    assert unknown[0][TopicPartition("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_compacted_topics_refuse_delete_records(tmp_path):
    config = LogConfig(cleanup_policy="compact")
    manager = LogManager.open(tmp_path / "b1", config, now_ms=T0)
    rm = ReplicaManager(1, manager, ReplicationConfig(), log_config_for=lambda t: config, now_ms=T0)
    rm.become_leader_or_follower(T0, 1, [PartitionStateUpdate("orders", 0, 1, 1, 0, (1,), 0, (1,))])
    (result,) = delete(rm, -1)
    assert result[TP].error_code == ErrorCode.POLICY_VIOLATION
    manager.close()


# --- partition limits --------------------------------------------------------------------

LIMITS = PartitionLimits(
    max_partitions_per_request=100, max_partitions=1_000, max_broker_partitions=50
)


def test_a_huge_request_is_refused_by_arithmetic_alone():
    budget = PartitionBudget.of_cluster(LIMITS, [])
    problem = budget.problem_before_assignment(2**31 - 1, 1, [1, 2, 3])
    assert problem is not None and problem.per_request
    assert "max.partitions.per.request=100" in problem.message


def test_broker_room_counts_what_the_brokers_hold_and_earlier_topics_of_the_request():
    budget = PartitionBudget.of_cluster(LIMITS, [(1, 2)] * 40)  # brokers 1, 2: 40 each
    # 3 brokers with room 10 + 10 + 50 = 70 replicas.
    assert budget.problem_before_assignment(35, 2, [1, 2, 3]) is None
    problem = budget.problem_before_assignment(36, 2, [1, 2, 3])
    assert problem is not None and not problem.per_request
    # A layout that piles more than 10 more onto broker 1 is refused after assignment.
    crowded = {p: [1, 3] for p in range(11)}
    problem = budget.problem_after_assignment(crowded)
    assert problem is not None and "broker 1 would hold 51" in problem.message
    budget.take({p: [3] for p in range(50)})
    problem = budget.problem_before_assignment(1, 1, [3])
    assert problem is not None and "max.broker.partitions=50" in problem.message
    # The request's own total counts against the per-request limit.
    assert budget.problem_before_assignment(51, 1, [1, 2, 3]).per_request
