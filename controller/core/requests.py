"""The requests the controller sends, batched per broker (Kafka's ControllerBrokerRequestBatch).

How it works: handlers add what each broker must learn, then `build()` turns it into at
most one LeaderAndIsr, one UpdateMetadata and one StopReplica request per broker, in that
order (a broker must know the leaders before the metadata that points clients at them,
and the metadata before it stops a replica). Partition states are read from the context
when building, so a batch always carries the newest state even if a partition was added
twice. Every request carries the controller id and epoch and the target's broker epoch.

- LeaderAndIsr: leader, leader epoch, ISR, zk_version, replicas (RS during a
  reassignment, with adding/removing), is_new; `live_leaders` lists the endpoints of the
  leaders of the partitions in it.
- UpdateMetadata: partition states (leader -2 for topics being deleted, offline replicas
  = replicas whose broker is not registered) and every registered broker. A broker may get
  the states of every partition (`ALL_PARTITIONS`), some, or none (just the broker list).
- StopReplica: per partition whether to delete the log (then with leader epoch -2).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from client.protocol import messages as m
from client.protocol.types import TopicPartition
from controller.core.context import ControllerContext
from server_common.zkdata import LEADER_DURING_DELETE


class _All(enum.Enum):
    """"Every partition": a singleton a type checker can narrow (`tps is ALL_PARTITIONS`)."""

    ALL_PARTITIONS = "all"

    def __repr__(self) -> str:
        return "ALL_PARTITIONS"


ALL_PARTITIONS: Final = _All.ALL_PARTITIONS

# StopReplica's leader epoch when the log is deleted: brokers then never fence the request
# (Kafka's LeaderAndIsr.EpochDuringDelete).
EPOCH_DURING_DELETE = -2


@dataclass(frozen=True)
class OutboundRequest:
    broker_id: int
    request: m.LeaderAndIsrRequest | m.UpdateMetadataRequest | m.StopReplicaRequest


class RequestBatch:
    def __init__(self, ctx: ControllerContext):
        self.ctx = ctx
        self._leader_and_isr: dict[int, dict[TopicPartition, bool]] = {}
        self._metadata: dict[int, set[TopicPartition] | _All] = {}
        self._stop: dict[int, dict[TopicPartition, bool]] = {}
        # per build(): partition states shared by the requests that carry them
        self._metadata_states: dict[TopicPartition, m.UpdateMetadataPartitionState | None] = {}
        self._leader_states: dict[tuple[TopicPartition, bool], m.LeaderAndIsrPartitionState] = {}

    # -- adding -----------------------------------------------------------------------
    def add_leader_and_isr(
        self, brokers: Iterable[int], tp: TopicPartition, *, is_new: bool = False
    ) -> None:
        """Tell `brokers` (the registered ones) the current state of `tp`."""
        if tp not in self.ctx.states or self.ctx.is_deleting(tp.topic):
            return
        for broker in brokers:
            if self.ctx.is_registered(broker):
                entries = self._leader_and_isr.setdefault(broker, {})
                entries[tp] = entries.get(tp, False) or is_new

    def add_leader_and_isr_to_replicas(
        self, tps: Iterable[TopicPartition], *, is_new: bool = False, exclude: Iterable[int] = ()
    ) -> None:
        """Each partition's state to its registered replicas (but `exclude`)."""
        skip = set(exclude)
        for tp in tps:
            replicas = [r for r in self.ctx.replicas.get(tp, ()) if r not in skip]
            self.add_leader_and_isr(replicas, tp, is_new=is_new)

    def add_update_metadata(
        self, brokers: Iterable[int], tps: Iterable[TopicPartition] | _All = ()
    ) -> None:
        """UpdateMetadata to `brokers` with the states of `tps` (ALL_PARTITIONS, or none:
        just the live broker list)."""
        for broker in brokers:
            if not self.ctx.is_registered(broker):
                continue
            current = self._metadata.get(broker)
            if current is ALL_PARTITIONS:
                continue
            if tps is ALL_PARTITIONS:
                self._metadata[broker] = ALL_PARTITIONS
            elif current is None:
                self._metadata[broker] = set(tps)
            else:
                current.update(tps)

    def add_update_metadata_to_all(self, tps: Iterable[TopicPartition] | _All = ()) -> None:
        if tps is not ALL_PARTITIONS:
            tps = list(tps)
        self.add_update_metadata(self.ctx.live_or_shutting_down_ids, tps)

    def add_stop_replica(self, broker: int, tp: TopicPartition, *, delete: bool) -> None:
        if self.ctx.is_registered(broker):
            entries = self._stop.setdefault(broker, {})
            entries[tp] = entries.get(tp, False) or delete

    @property
    def is_empty(self) -> bool:
        return not (self._leader_and_isr or self._metadata or self._stop)

    # -- building ---------------------------------------------------------------------
    def build(self) -> list[OutboundRequest]:
        """The requests, per broker in order LeaderAndIsr, UpdateMetadata, StopReplica.

        A partition's state is built once and shared by every request carrying it (the
        structs are immutable), which matters when every broker gets every partition.
        """
        self._metadata_states.clear()
        self._leader_states.clear()
        out: list[OutboundRequest] = []
        brokers = sorted(set(self._leader_and_isr) | set(self._metadata) | set(self._stop))
        for broker in brokers:
            if not self.ctx.is_registered(broker):
                continue
            if broker in self._leader_and_isr:
                out.append(OutboundRequest(broker, self._leader_and_isr_request(broker)))
            if broker in self._metadata:
                out.append(OutboundRequest(broker, self._update_metadata_request(broker)))
            if broker in self._stop:
                out.append(OutboundRequest(broker, self._stop_replica_request(broker)))
        return out

    def _leader_and_isr_request(self, broker: int) -> m.LeaderAndIsrRequest:
        ctx = self.ctx
        states = []
        leaders: set[int] = set()
        for tp, is_new in sorted(self._leader_and_isr[broker].items()):
            state = ctx.states.get(tp)
            if state is None:
                continue
            entry = self._leader_states.get((tp, is_new))
            if entry is None:
                moving = ctx.reassignments.get(tp)
                entry = self._leader_states[(tp, is_new)] = m.LeaderAndIsrPartitionState(
                    topic=tp.topic,
                    partition=tp.partition,
                    controller_epoch=state.controller_epoch,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=list(state.isr),
                    zk_version=state.zk_version,
                    replicas=list(ctx.replicas.get(tp, ())),
                    adding_replicas=list(moving.adding) if moving else [],
                    removing_replicas=list(moving.removing) if moving else [],
                    is_new=is_new,
                )
            states.append(entry)
            leaders.add(state.leader)
        live_leaders = [
            m.LeaderAndIsrLiveLeader(broker_id=b.broker_id, host=b.host, port=b.port)
            for leader in sorted(leaders)
            if (b := ctx.live_brokers.get(leader)) is not None
        ]
        return m.LeaderAndIsrRequest(
            controller_id=ctx.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=ctx.broker_epoch(broker),
            partition_states=states,
            live_leaders=live_leaders,
        )

    def _update_metadata_request(self, broker: int) -> m.UpdateMetadataRequest:
        ctx = self.ctx
        wanted = self._metadata[broker]
        tps = ctx.all_partitions() if wanted is ALL_PARTITIONS else sorted(wanted)
        return m.UpdateMetadataRequest(
            controller_id=ctx.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=ctx.broker_epoch(broker),
            partition_states=[s for tp in tps if (s := self._metadata_state(tp)) is not None],
            live_brokers=[
                m.UpdateMetadataBroker(
                    id=b.broker_id,
                    host=b.host,
                    port=b.port,
                    rack=b.rack,
                    endpoints=[
                        m.UpdateMetadataEndpoint(listener=name, host=host, port=port)
                        for name, host, port in b.endpoints
                    ],
                )
                for _, b in sorted(ctx.live_brokers.items())
            ],
        )

    def _metadata_state(self, tp: TopicPartition) -> m.UpdateMetadataPartitionState | None:
        if tp not in self._metadata_states:
            self._metadata_states[tp] = metadata_state(self.ctx, tp)
        return self._metadata_states[tp]

    def _stop_replica_request(self, broker: int) -> m.StopReplicaRequest:
        ctx = self.ctx
        partitions = []
        for tp, delete in sorted(self._stop[broker].items()):
            state = ctx.states.get(tp)
            epoch = state.leader_epoch if state is not None else -1
            partitions.append(
                m.StopReplicaPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    leader_epoch=EPOCH_DURING_DELETE if delete else epoch,
                    delete_partition=delete,
                )
            )
        return m.StopReplicaRequest(
            controller_id=ctx.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=ctx.broker_epoch(broker),
            partitions=partitions,
        )


def metadata_state(
    ctx: ControllerContext, tp: TopicPartition
) -> m.UpdateMetadataPartitionState | None:
    """What brokers' metadata caches should hold for `tp` (None if uninitialized)."""
    state = ctx.states.get(tp)
    if state is None:
        return None
    replicas = ctx.replicas.get(tp, ())
    return m.UpdateMetadataPartitionState(
        topic=tp.topic,
        partition=tp.partition,
        controller_epoch=state.controller_epoch,
        leader=LEADER_DURING_DELETE if ctx.is_deleting(tp.topic) else state.leader,
        leader_epoch=state.leader_epoch,
        isr=list(state.isr),
        zk_version=state.zk_version,
        replicas=list(replicas),
        offline_replicas=[r for r in replicas if not ctx.is_registered(r)],
    )
