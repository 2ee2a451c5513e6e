"""A LeaderAndIsr that creates many partitions makes their log directories durable with
one fsync of the log directory (broker/core/log/manager.py `sync_log_dir`), before it is
answered, rather than one per partition: each stalled the event loop for milliseconds,
and thousands of new partitions kept followers from fetching until they fell out of
the ISRs. The logs are there, usable and reopened by a new LogManager."""

from __future__ import annotations

from broker.core.log import manager as manager_module
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.partition import PartitionStateUpdate
from broker.core.replica_manager import ReplicaManager, ReplicationConfig
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition

T0 = 1_700_000_000_000
PARTITIONS = 40


def test_one_directory_fsync_for_a_leader_and_isr_creating_many_partitions(tmp_path, monkeypatch):
    synced = []
    real_fsync_dir = manager_module.fsync_dir

    def counting_fsync_dir(directory):
        synced.append(directory)
        real_fsync_dir(directory)

    config = LogConfig()
    manager = LogManager.open(tmp_path / "b1", config, now_ms=T0)
    rm = ReplicaManager(1, manager, ReplicationConfig(), log_config_for=lambda t: config, now_ms=T0)
    monkeypatch.setattr(manager_module, "fsync_dir", counting_fsync_dir)
    states = [PartitionStateUpdate("many", p, 1, 1, 0, (1,), 0, (1,)) for p in range(PARTITIONS)]
    result = rm.become_leader_or_follower(T0, 1, states)
    assert result.error_code == ErrorCode.NONE
    assert set(result.partition_errors.values()) == {ErrorCode.NONE}
    assert synced == [manager.log_dir]

    # Nothing new: no fsync at all.
    rm.become_leader_or_follower(T0, 1, states)
    assert synced == [manager.log_dir]

    batch = build_batch([Record(None, b"v", T0)])
    answers = []
    rm.append_records(
        T0,
        acks=1,
        timeout_ms=0,
        entries={TopicPartition("many", p): batch for p in range(PARTITIONS)},
        respond=answers.append,
    )
    assert all(r.error_code == ErrorCode.NONE for r in answers[0].values())
    manager.close()

    reopened = LogManager.open(tmp_path / "b1", config, now_ms=T0)
    assert len(reopened.all_logs()) == PARTITIONS
    assert all(log.log_end_offset == 1 for log in reopened.all_logs().values())
    reopened.close()
