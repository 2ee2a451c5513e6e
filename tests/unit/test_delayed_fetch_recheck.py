"""A fetch waiting on many partitions is re-checked one partition at a time.

A follower's fetch waits in its leader's purgatory on every partition it follows there
(thousands at scale). Each append, HW move or ISR change of one of them re-checks the
fetch: that re-check looks at the changed partition alone, so a burst of changes over
all of them (a restarted follower's ISR expansions) costs linear, not quadratic, work,
and the fetch still completes as Kafka's DelayedFetch does (bytes reaching min_bytes,
a leadership change). Real replica managers and logs in a temp dir; time is given.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.core.delayed_fetch import FetchParams, FetchPartitionRequest
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.partition import PartitionStateUpdate
from broker.core.replica_manager import FetchedPartition, ReplicaManager, ReplicationConfig
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition

TOPIC = "wide"
PARTITIONS = 200
T0 = 1_000_000
TPS = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]


def batch(value: bytes) -> bytes:
    return build_batch([Record(key=None, value=value, timestamp_ms=T0)])


@pytest.fixture
def leader(tmp_path) -> Iterator[ReplicaManager]:
    config = LogConfig(min_insync_replicas=1)
    manager = LogManager.open(tmp_path / "b1", config, now_ms=T0)
    rm = ReplicaManager(1, manager, ReplicationConfig(), log_config_for=lambda t: config, now_ms=T0)
    states = [PartitionStateUpdate(TOPIC, p, 1, 1, 0, (1, 2), 0, (1, 2)) for p in range(PARTITIONS)]
    assert not any(rm.become_leader_or_follower(T0, 1, states).partition_errors.values())
    yield rm
    manager.close()


def wait_fetch(
    rm: ReplicaManager, replica_id: int = 2, min_bytes: int = 1
) -> list[dict[TopicPartition, FetchedPartition]]:
    """A fetch of every partition at offset 0 that has nothing to read yet: it waits."""
    answers: list[dict[TopicPartition, FetchedPartition]] = []
    rm.fetch_messages(
        T0,
        FetchParams(replica_id, max_wait_ms=5_000, min_bytes=min_bytes, max_bytes=1 << 20),
        {tp: FetchPartitionRequest(0, 0, 1 << 20, 0) for tp in TPS},
        answers.append,
    )
    assert answers == [] and rm.fetch_purgatory.pending == 1
    return answers


def produce(rm: ReplicaManager, tp: TopicPartition, value: bytes) -> None:
    rm.append_records(T0 + 1, acks=1, timeout_ms=0, entries={tp: batch(value)}, respond=print)


def test_an_append_to_one_partition_completes_the_waiting_follower_fetch(leader) -> None:
    answers = wait_fetch(leader)
    produce(leader, TPS[137], b"news")
    assert len(answers) == 1 and leader.fetch_purgatory.pending == 0
    with_records = [tp for tp, result in answers[0].items() if result.records]
    assert with_records == [TPS[137]]


def test_changes_re_check_only_the_changed_partition(leader) -> None:
    lookups = 0
    real = leader.get_partition

    def counting(tp: TopicPartition):
        nonlocal lookups
        lookups += 1
        return real(tp)

    leader.get_partition = counting  # type: ignore[method-assign]
    wait_fetch(leader)  # read every partition once, then wait
    lookups = 0
    for tp in TPS:  # e.g. every partition's ISR expansion completing, nothing to read
        leader.fetch_purgatory.check_and_complete(tp, T0 + 2)
    assert leader.fetch_purgatory.pending == 1
    assert lookups == PARTITIONS  # one per change, not the whole fetch per change


def test_bytes_of_several_partitions_add_up_to_min_bytes(leader) -> None:
    one = len(batch(b"x" * 100))
    answers = wait_fetch(leader, replica_id=-1, min_bytes=2 * one)  # a consumer's
    produce(leader, TPS[3], b"x" * 100)
    produce(leader, TPS[150], b"x" * 100)  # acks=1: both below the HW until it moves
    assert answers == []
    # The follower fetches both: the HW moves on each, and each re-check adds its bytes.
    leader.fetch_messages(
        T0 + 3,
        FetchParams(2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20),
        {tp: FetchPartitionRequest(1, 0, 1 << 20, 0) for tp in (TPS[3], TPS[150])},
        lambda results: None,
    )
    assert len(answers) == 1
    assert {tp for tp, r in answers[0].items() if r.records} == {TPS[3], TPS[150]}


def test_a_leadership_change_of_one_partition_completes_the_fetch(leader) -> None:
    answers = wait_fetch(leader)
    moved = PartitionStateUpdate(TOPIC, 42, 1, 2, 1, (2, 1), 1, (1, 2))
    leader.become_leader_or_follower(T0 + 4, 1, [moved])
    assert len(answers) == 1 and leader.fetch_purgatory.pending == 0


def test_an_expiry_with_no_change_answers_without_re_reading(leader) -> None:
    reads = 0
    real = leader._read

    def counting(*args, **kwargs):
        nonlocal reads
        reads += 1
        return real(*args, **kwargs)

    leader._read = counting  # type: ignore[method-assign]
    answers = wait_fetch(leader)
    assert reads == 1  # the read at arrival
    leader.expire_delayed(T0 + 5_000)
    assert len(answers) == 1 and reads == 1  # nothing changed: that read is the answer
    assert not any(r.records for r in answers[0].values())
    assert all(r.high_watermark == 0 for r in answers[0].values())

    answers = wait_fetch(leader)
    produce(leader, TPS[7], b"late")  # a change: the fetch is re-read and answered
    assert len(answers) == 1 and reads == 3 and answers[0][TPS[7]].records
