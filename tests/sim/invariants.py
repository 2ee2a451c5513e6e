"""Replication invariants checked against a SimCluster after every step.

Each check raises AssertionError with a message that names the partition, replicas and
offsets involved, so a shrunk hypothesis failure reads as a story.
"""

from __future__ import annotations

from tests.sim.harness import SimCluster


class InvariantTracker:
    """Remembers what must never go backwards between checks."""

    def __init__(self, cluster: SimCluster):
        self.cluster = cluster
        self.leader_hw: dict[tuple, int] = {}  # (tp, leader, epoch) -> highest HW seen

    def check(self) -> None:
        for tp in self.cluster.controller.partitions():
            self._hw_within_isr(tp)
            self._hw_monotonic(tp)
            self._no_divergence_below_hw(tp)
            self._acked_writes_present(tp)
        self._consumers_below_hw()

    def _leader_partition(self, tp):
        leader = self.cluster.leader_of(tp)
        if leader is None:
            return None, None
        partition = leader.partition(tp)
        if partition is None or not partition.is_leader:
            return None, None
        return leader, partition

    def _hw_within_isr(self, tp) -> None:
        leader, partition = self._leader_partition(tp)
        if partition is None:
            return
        hw = partition.high_watermark
        assert hw <= partition.log_end_offset, f"{tp}: leader HW {hw} > its LEO"
        for r in partition.isr:
            replica = self.cluster.brokers[r]
            rp = replica.partition(tp)
            if rp is None:
                continue
            assert rp.log_end_offset >= hw, (
                f"{tp}: ISR member {r} has LEO {rp.log_end_offset} below leader "
                f"{leader.broker_id}'s HW {hw}"
            )

    def _hw_monotonic(self, tp) -> None:
        leader, partition = self._leader_partition(tp)
        if partition is None:
            return
        key = (tp, leader.broker_id, partition.leader_epoch)
        previous = self.leader_hw.get(key, -1)
        assert partition.high_watermark >= previous, (
            f"{tp}: leader {leader.broker_id} HW went back from {previous} to "
            f"{partition.high_watermark} at epoch {partition.leader_epoch}"
        )
        self.leader_hw[key] = partition.high_watermark

    def _no_divergence_below_hw(self, tp) -> None:
        replicas = [b for b in self.cluster.live() if b.partition(tp) is not None]
        contents = {}
        for b in replicas:
            hw = b.partition(tp).high_watermark
            contents[b.broker_id] = (hw, dict(b.read_all(tp, hw)))
        ids = sorted(contents)
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                hw = min(contents[a][0], contents[b][0])
                for offset in range(hw):
                    va, vb = contents[a][1].get(offset), contents[b][1].get(offset)
                    if va is None or vb is None:
                        continue  # below a log start offset
                    assert va == vb, (
                        f"{tp}: replicas {a} and {b} diverge at offset {offset} below HW {hw}: "
                        f"{va!r} != {vb!r}"
                    )

    def _acked_writes_present(self, tp) -> None:
        state = self.cluster.zk.get(tp)
        holders = [state.leader, *state.isr]
        logs = {}
        for r in dict.fromkeys(holders):
            broker = self.cluster.brokers.get(r)
            if broker is None or not broker.alive or broker.partition(tp) is None:
                continue
            logs[r] = dict(broker.read_all(tp))
        for write in self.cluster.history.acked:
            if write.tp != tp:
                continue
            for r, records in logs.items():
                assert records.get(write.offset) == write.value, (
                    f"{tp}: acked write {write.value!r} at offset {write.offset} is missing on "
                    f"replica {r} (in ISR {list(state.isr)}, leader {state.leader}); it holds "
                    f"{records.get(write.offset)!r}"
                )

    def _consumers_below_hw(self) -> None:
        for tp, offset, hw in self.cluster.history.consumer_reads:
            assert offset < hw, f"{tp}: a consumer read offset {offset} at or above HW {hw}"
