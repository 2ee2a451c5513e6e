"""A simulated cluster: real ReplicaManagers and logs, fake time, fake ZooKeeper, fake network.

How it works: every broker is the real sans-IO core (`ReplicaManager` over a real
`LogManager` in a temp dir). What the Trio shell would do is done here by hand, on one
`FakeClock`:

- `FakeZooKeeper` keeps the partition state znodes with versions, answers conditional
  sets the way ZooKeeper does, and calls watchers on changes.
- `FakeNetwork` carries follower fetches, OffsetForLeaderEpoch requests and their
  answers as timed messages: each message is delivered after a seeded random delay, or
  dropped when its link is cut (the sender then times out and backs off, as the real
  fetcher does).
- `SimBroker.tick()` is one turn of the broker's shell: expire delayed operations, run
  the ISR-shrink check when due, carry out ISR updates against the fake ZooKeeper (and
  notify the controller of them when the broker's throttle lets it), and let each
  fetcher send its next request when it has none in flight.
- `ControllerStandIn` is the controller's shell around the real `controller.core`: it
  keeps a `ControllerContext` (live brokers, assignments, partition states; unclean
  elections only if the cluster is built with `unclean=True`) and asks
  `controller.core.decisions` what to write on partition creation, broker failure and
  broker startup (a test's leader move is `election.elect_preferred` over an order that
  puts the target first). Each `StateChange` (a new leader epoch) is written to the fake
  ZooKeeper with a conditional set (a create for a new partition); on a version conflict
  (a leader changed the ISR since the context last read it) it re-reads the znode and
  decides again. Accepted changes go into the context and, as LeaderAndIsr, to the live
  replicas. ISR change notifications re-read the notified partitions into the context.

A broker `crash()` drops its core without any shutdown (no HW checkpoint, no flush;
files stay as a killed process leaves them); `restart()` reopens the log dir. The
`History` records every acknowledged acks=all write and every consumer read so tests
can check the replication invariants.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.core.delayed_fetch import FetchParams, FetchPartitionRequest
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.partition import (
    IsrUpdateConflict,
    IsrUpdateSucceeded,
    PartitionStateUpdate,
)
from broker.core.replica_manager import FetchedPartition, ReplicaManager, ReplicationConfig
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch, decode_batches
from client.protocol.types import TopicPartition
from controller.core.context import BrokerInfo, ControllerContext
from controller.core.decisions import on_broker_failure as decide_failure
from controller.core.decisions import on_broker_startup as decide_startup
from controller.core.decisions import on_new_partitions, repair_partitions
from controller.core.election import elect_preferred
from controller.core.state_change import Reason, StateChange, next_state
from server_common.zkdata import LeaderAndIsr, TopicAssignment


class FakeClock:
    def __init__(self, start_ms: int = 1_000_000):
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


class BadVersion(Exception):
    pass


class FakeZooKeeper:
    """Partition state znodes with versions and data watches."""

    def __init__(self) -> None:
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.watchers: list[Callable[[TopicPartition, LeaderAndIsr], None]] = []
        self.writes = 0

    def create(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr:
        stored = LeaderAndIsr(
            state.leader, state.leader_epoch, state.isr, state.controller_epoch, 0
        )
        self.states[tp] = stored
        self._notify(tp, stored)
        return stored

    def get(self, tp: TopicPartition) -> LeaderAndIsr:
        return self.states[tp]

    def conditional_set(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr:
        current = self.states[tp]
        if current.zk_version != state.zk_version:
            raise BadVersion(f"{tp}: version {state.zk_version} != {current.zk_version}")
        stored = LeaderAndIsr(
            state.leader,
            state.leader_epoch,
            state.isr,
            state.controller_epoch,
            state.zk_version + 1,
        )
        self.states[tp] = stored
        self.writes += 1
        self._notify(tp, stored)
        return stored

    def _notify(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        for watcher in list(self.watchers):
            watcher(tp, state)


@dataclass(order=True)
class _Message:
    deliver_at: int
    sequence: int
    deliver: Callable[[], None] = field(compare=False)


class FakeNetwork:
    """Timed delivery between brokers with seeded delays, drops and cut links."""

    def __init__(self, rng: random.Random, clock: FakeClock, max_delay_ms: int = 20):
        self.rng = rng
        self.clock = clock
        self.max_delay_ms = max_delay_ms
        self.cut: set[frozenset[int]] = set()
        self.drop_probability = 0.0
        self._queue: list[_Message] = []
        self._sequence = 0

    def link_up(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.cut

    def cut_link(self, a: int, b: int) -> None:
        self.cut.add(frozenset((a, b)))

    def heal_link(self, a: int, b: int) -> None:
        self.cut.discard(frozenset((a, b)))

    def heal_all(self) -> None:
        self.cut.clear()

    def send(self, source: int, target: int, deliver: Callable[[], None]) -> None:
        """Deliver later unless the link is cut (then or at delivery time) or it drops."""
        if not self.link_up(source, target) or self.rng.random() < self.drop_probability:
            return
        delay = self.rng.randint(0, self.max_delay_ms)

        def checked() -> None:
            if self.link_up(source, target):
                deliver()

        self._sequence += 1
        self._queue.append(_Message(self.clock.now_ms + delay, self._sequence, checked))

    def deliver_due(self) -> int:
        due = sorted(m for m in self._queue if m.deliver_at <= self.clock.now_ms)
        self._queue = [m for m in self._queue if m.deliver_at > self.clock.now_ms]
        for message in due:
            message.deliver()
        return len(due)


@dataclass
class AckedWrite:
    tp: TopicPartition
    offset: int
    value: bytes


@dataclass
class History:
    acked: list[AckedWrite] = field(default_factory=list)
    failed: int = 0
    consumer_reads: list[tuple[TopicPartition, int, int]] = field(default_factory=list)


SIM_REPLICATION = ReplicationConfig(
    replica_lag_time_max_ms=1_000,
    replica_fetch_max_bytes=64 * 1024,
    replica_fetch_response_max_bytes=256 * 1024,
    replica_fetch_wait_max_ms=100,
    replica_fetch_backoff_ms=50,
    isr_change_propagation_blackout_ms=100,
    isr_change_propagation_interval_ms=1_000,
)
SIM_LOG_CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, min_insync_replicas=1)
FETCH_TIMEOUT_MS = 500
MAX_WRITE_ROUNDS = 5  # a synchronous sim conflicts at most once per write
HW_CHECKPOINT_INTERVAL_MS = 200


class SimBroker:
    def __init__(self, cluster: SimCluster, broker_id: int):
        self.cluster = cluster
        self.broker_id = broker_id
        self.log_dir = cluster.root / f"broker-{broker_id}"
        self.alive = False
        self.stalled = False  # a stalled broker's fetchers send nothing (a GC pause, SIGSTOP)
        self.rm: ReplicaManager | None = None
        self.log_manager: LogManager | None = None
        self._in_flight: dict[int, tuple[int, int]] = {}  # leader -> (sequence, deadline)
        self._sequence = 0
        self._next_shrink_ms = 0
        self._next_checkpoint_ms = 0
        self.start()

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        now = self.cluster.clock()
        self.log_manager = LogManager.open(
            self.log_dir,
            self.cluster.log_config,
            now_ms=now,
            topic_configs=lambda topic: self.cluster.log_config,
        )
        self.rm = ReplicaManager(
            self.broker_id,
            self.log_manager,
            self.cluster.replication,
            log_config_for=lambda topic: self.cluster.log_config,
            now_ms=now,
            truncation=self.cluster.truncation,
        )
        self.alive = True
        self.stalled = False
        self._in_flight.clear()
        self._next_shrink_ms = now + self.cluster.replication.replica_lag_time_max_ms // 2
        self._next_checkpoint_ms = now + self.cluster.hw_checkpoint_interval_ms

    def crash(self) -> None:
        """Die like SIGKILL: no checkpoints, no flush; the lock goes with the process."""
        self.alive = False
        for log_ in self.log_manager.all_logs().values():
            log_.close()
        self.log_manager._unlock()
        self.rm = None
        self.log_manager = None

    def shutdown(self) -> None:
        """A clean stop: answer what waits, checkpoint, close."""
        self.rm.shutdown(self.cluster.clock())
        self.log_manager.close()
        self.alive = False
        self.rm = None
        self.log_manager = None

    # -- one turn of the shell -----------------------------------------------------------
    def tick(self) -> None:
        if not self.alive:
            return
        now = self.cluster.clock()
        rm = self.rm
        rm.expire_delayed(now)
        if now >= self._next_shrink_ms:
            rm.maybe_shrink_isrs(now)
            self._next_shrink_ms = now + self.cluster.replication.replica_lag_time_max_ms // 2
        self._apply_isr_updates()
        changed = rm.maybe_propagate_isr_changes(now)
        if changed:  # /isr_change_notification, and the controller's watch fires
            self.cluster.controller.on_isr_change_notification(changed)
        if now >= self._next_checkpoint_ms:
            rm.checkpoint_high_watermarks()
            self._next_checkpoint_ms = now + self.cluster.hw_checkpoint_interval_ms
        if self.stalled:
            return
        for leader_id in sorted(rm.followers.leaders()):
            in_flight = self._in_flight.get(leader_id)
            if in_flight is not None:
                if now < in_flight[1]:
                    continue
                # The request timed out (dropped or cut): back off like the real fetcher.
                del self._in_flight[leader_id]
                rm.followers.fetch_failed(
                    leader_id, list(rm.followers.leaders().get(leader_id, ())), now
                )
                continue
            self._send_fetch(leader_id, now)

    def _apply_isr_updates(self) -> None:
        rm = self.rm
        for update in rm.take_effects():
            zk = self.cluster.zk
            try:
                stored = zk.conditional_set(update.topic_partition, update.new_state)
                outcome = IsrUpdateSucceeded(stored.zk_version)
            except BadVersion:
                outcome = IsrUpdateConflict(zk.get(update.topic_partition))
            rm.complete_isr_update(
                update.topic_partition, outcome, self.cluster.clock(), update.new_state
            )

    def _send_fetch(self, leader_id: int, now: int) -> None:
        rm = self.rm
        leader = self.cluster.brokers.get(leader_id)
        truncating = rm.followers.truncation_requests(leader_id, now)
        fetching = [] if truncating else rm.followers.fetch_request(leader_id, now)
        if not truncating and not fetching:
            return
        self._sequence += 1
        sequence = self._sequence
        self._in_flight[leader_id] = (sequence, now + FETCH_TIMEOUT_MS)
        network = self.cluster.network
        me = self.broker_id

        def answer(apply: Callable[[], None]) -> None:
            def deliver() -> None:
                current = self._in_flight.get(leader_id)
                if not self.alive or current is None or current[0] != sequence:
                    return  # we crashed, or gave up on this request already
                del self._in_flight[leader_id]
                apply()

            network.send(leader_id, me, deliver)

        if truncating:

            def at_leader() -> None:
                if leader is None or not leader.alive:
                    return
                answers = {
                    tp: leader.rm.last_offset_for_leader_epoch(tp, current, epoch)
                    for tp, (current, epoch) in truncating.items()
                }
                answer(
                    lambda: self.rm.followers.apply_truncation(
                        leader_id, answers, self.cluster.clock()
                    )
                )

            network.send(me, leader_id, at_leader)
            return

        def at_leader_fetch() -> None:
            if leader is None or not leader.alive:
                return
            params = FetchParams(
                replica_id=me,
                max_wait_ms=self.cluster.replication.replica_fetch_wait_max_ms,
                min_bytes=1,
                max_bytes=self.cluster.replication.replica_fetch_response_max_bytes,
            )
            partitions = {
                p.topic_partition: FetchPartitionRequest(
                    p.fetch_offset,
                    p.current_leader_epoch,
                    p.partition_max_bytes,
                    p.log_start_offset,
                )
                for p in fetching
            }

            def respond(results: dict[TopicPartition, FetchedPartition]) -> None:
                answer(
                    lambda: self.rm.followers.apply_fetch(
                        leader_id, fetching, results, self.cluster.clock()
                    )
                )

            leader.rm.fetch_messages(self.cluster.clock(), params, partitions, respond)

        network.send(me, leader_id, at_leader_fetch)

    # -- views ---------------------------------------------------------------------------
    def partition(self, tp: TopicPartition):
        return self.rm.get_partition(tp) if self.alive else None

    def read_all(self, tp: TopicPartition, upper: int | None = None) -> list[tuple[int, bytes]]:
        """(offset, value) of every record this replica holds below `upper`."""
        partition = self.partition(tp)
        if partition is None:
            return []
        log_ = partition.log
        end = log_.log_end_offset if upper is None else min(upper, log_.log_end_offset)
        out: list[tuple[int, bytes]] = []
        offset = log_.log_start_offset
        while offset < end:
            data = log_.read(offset, 1 << 20, end, True)
            records = [r for r in decode_batches(data.records) if offset <= r.offset < end]
            if not records:
                break
            out.extend((r.offset, r.value) for r in records)
            offset = records[-1].offset + 1
        return out


class ControllerStandIn:
    """The controller's shell around the real `controller.core`: a `ControllerContext`,
    the core's decisions written to the fake ZooKeeper, LeaderAndIsr to live replicas."""

    def __init__(self, cluster: SimCluster, controller_epoch: int = 1):
        self.cluster = cluster
        self.ctx = ControllerContext(
            controller_id=0,
            epoch=controller_epoch,
            epoch_zk_version=0,
            default_unclean=cluster.unclean,
        )
        for broker_id, broker in cluster.brokers.items():
            if broker.alive:
                self._register(broker_id)

    def partitions(self) -> list[TopicPartition]:
        return self.ctx.all_partitions()

    def _register(self, broker_id: int) -> None:
        self.ctx.add_live_broker(BrokerInfo(broker_id, f"broker-{broker_id}", 9092))

    # -- events ----------------------------------------------------------------------
    def create_partition(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        """A new partition of `tp.topic` (the topic's other partitions keep their state)."""
        ctx = self.ctx
        known = ctx.topic_assignment(tp.topic).partitions if ctx.has_topic(tp.topic) else {}
        states = {p: s for p, s in ctx.states.items() if p.topic == tp.topic}
        config = ctx.topic_configs.get(tp.topic)
        ctx.add_topic(TopicAssignment(tp.topic, {**known, tp.partition: replicas}), config)
        ctx.states.update(states)
        self._apply(on_new_partitions(ctx, [tp]), lambda tps: repair_partitions(ctx, tps))

    def on_broker_failure(self, *dead: int) -> None:
        """The brokers' registrations vanished (one BrokerChange event for all of them)."""
        ctx = self.ctx
        for broker_id in dead:
            ctx.remove_live_broker(broker_id)
        self._apply(decide_failure(ctx, dead), lambda tps: repair_partitions(ctx, tps))

    def on_broker_startup(self, *started: int) -> None:
        """The brokers registered: elections they make possible, then their current
        state for every partition they host."""
        ctx = self.ctx
        for broker_id in started:
            self._register(broker_id)
        applied = self._apply(decide_startup(ctx, started), lambda tps: repair_partitions(ctx, tps))
        changed = {c.tp for c in applied}
        for tp in ctx.partitions_on_brokers(started):
            if tp not in changed and tp in ctx.states:
                for broker_id in started:
                    self.send_state(tp, ctx.states[tp], only=broker_id)

    def on_isr_change_notification(self, tps: list[TopicPartition]) -> None:
        """A leader published ISR changes: re-read those state znodes into the context."""
        self._refresh(tps)

    def move_leader(self, tp: TopicPartition, target: int) -> bool:
        """A preferred replica election over an order that puts `target` first: it leads
        if it is alive, in the ISR and not leading already (the ISR stays). Decided on a
        fresh read of the state, as the real preferred-election handler does."""
        self._refresh([tp])

        def decide(tps: list[TopicPartition]) -> list[StateChange]:
            return [c for p in tps if (c := self._leadership_to(p, target)) is not None]

        return bool(self._apply(decide([tp]), decide))

    def _leadership_to(self, tp: TopicPartition, target: int) -> StateChange | None:
        state = self.ctx.states[tp]
        order = (target, *(r for r in self.ctx.replicas[tp] if r != target))
        election = elect_preferred(order, state.isr, self.ctx.live_ids)
        if election is None or election.leader == state.leader:
            return None
        new = next_state(
            state, leader=election.leader, isr=election.isr, controller_epoch=self.ctx.epoch
        )
        return StateChange(tp, state, new, Reason.PREFERRED_ELECTION)

    # -- ZooKeeper and LeaderAndIsr --------------------------------------------------
    def _refresh(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            if tp in self.cluster.zk.states:
                self.ctx.states[tp] = self.cluster.zk.get(tp)

    def _apply(
        self,
        changes: list[StateChange],
        redo: Callable[[list[TopicPartition]], list[StateChange]],
    ) -> list[StateChange]:
        """Write the changes (a create for a new partition, else a conditional set on the
        version they were decided from); record the accepted ones in the context and send
        them to the live replicas. A version conflict (a leader changed the ISR since the
        context last read it) means: re-read those znodes and decide again with `redo`."""
        zk = self.cluster.zk
        applied: list[StateChange] = []
        for _ in range(MAX_WRITE_ROUNDS):
            conflicts = []
            for change in changes:
                try:
                    stored = (zk.create if change.creates else zk.conditional_set)(
                        change.tp, change.new
                    )
                except BadVersion:
                    conflicts.append(change.tp)
                    continue
                state = self.ctx.apply(change, stored.zk_version)
                self.send_state(change.tp, state, is_new=change.creates)
                applied.append(change)
            if not conflicts:
                return applied
            self._refresh(conflicts)
            changes = redo(conflicts)
        raise AssertionError(f"still conflicting after {MAX_WRITE_ROUNDS} rounds: {changes}")

    def send_state(
        self,
        tp: TopicPartition,
        state: LeaderAndIsr,
        *,
        is_new: bool = False,
        only: int | None = None,
    ) -> None:
        replicas = self.ctx.replicas[tp]
        update = PartitionStateUpdate(
            topic=tp.topic,
            partition=tp.partition,
            controller_epoch=self.ctx.epoch,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            zk_version=state.zk_version,
            replicas=replicas,
            is_new=is_new,
        )
        for r in replicas:
            broker = self.cluster.brokers[r]
            if broker.alive and (only is None or r == only):
                broker.rm.become_leader_or_follower(self.cluster.clock(), self.ctx.epoch, [update])


class SimCluster:
    def __init__(
        self,
        root: Path,
        broker_ids: tuple[int, ...] = (1, 2, 3),
        *,
        seed: int = 0,
        replication: ReplicationConfig = SIM_REPLICATION,
        log_config: LogConfig = SIM_LOG_CONFIG,
        truncation: str = "leader_epoch",
        unclean: bool = False,
        max_delay_ms: int = 20,
        hw_checkpoint_interval_ms: int = HW_CHECKPOINT_INTERVAL_MS,
    ):
        self.root = Path(root)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.rng = random.Random(seed)
        self.clock = FakeClock()
        self.zk = FakeZooKeeper()
        self.network = FakeNetwork(self.rng, self.clock, max_delay_ms)
        self.replication = replication
        self.log_config = log_config
        self.truncation = truncation
        self.unclean = unclean
        self.hw_checkpoint_interval_ms = hw_checkpoint_interval_ms
        self.history = History()
        self.brokers: dict[int, SimBroker] = {}
        for b in broker_ids:
            self.brokers[b] = SimBroker(self, b)
        self.controller = ControllerStandIn(self)
        self._value_counter = 0

    # -- driving -----------------------------------------------------------------------
    def step(self, ms: int = 10) -> None:
        self.clock.advance(ms)
        self.network.deliver_due()
        for broker in self.brokers.values():
            broker.tick()
        self.network.deliver_due()

    def run_for(self, ms: int, step_ms: int = 10) -> None:
        for _ in range(max(1, ms // step_ms)):
            self.step(step_ms)

    def run_until(
        self, condition: Callable[[], bool], timeout_ms: int = 20_000, step_ms: int = 10
    ) -> bool:
        waited = 0
        while not condition():
            if waited >= timeout_ms:
                return False
            self.step(step_ms)
            waited += step_ms
        return True

    def create_partition(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        self.controller.create_partition(tp, replicas)

    def leader_of(self, tp: TopicPartition) -> SimBroker | None:
        state = self.zk.get(tp)
        broker = self.brokers.get(state.leader)
        return broker if broker is not None and broker.alive else None

    def produce(
        self,
        tp: TopicPartition,
        value: bytes | None = None,
        *,
        acks: int = -1,
        timeout_ms: int = 2_000,
        via: int | None = None,
    ) -> None:
        """Send one record to the leader (or to broker `via`); the ack is recorded later."""
        if value is None:
            self._value_counter += 1
            value = f"v{self._value_counter}".encode()
        target = self.brokers[via] if via is not None else self.leader_of(tp)
        if target is None or not target.alive:
            self.history.failed += 1
            return
        batch = build_batch([Record(key=None, value=value, timestamp_ms=self.clock())])

        def respond(results) -> None:
            result = results[tp]
            if result.error_code == ErrorCode.NONE and acks == -1:
                self.history.acked.append(AckedWrite(tp, result.base_offset, value))
            elif result.error_code != ErrorCode.NONE:
                self.history.failed += 1

        target.rm.append_records(
            self.clock(), acks=acks, timeout_ms=timeout_ms, entries={tp: batch}, respond=respond
        )

    def consume(self, tp: TopicPartition, offset: int = 0) -> list[tuple[int, bytes]]:
        """A consumer fetch from the current leader: what it returns, checked against HW."""
        leader = self.leader_of(tp)
        if leader is None:
            return []
        partition = leader.partition(tp)
        got: list[tuple[int, bytes]] = []
        params = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20)
        hw = partition.high_watermark

        def respond(results) -> None:
            result = results[tp]
            if result.error_code == ErrorCode.NONE and result.records:
                for record in decode_batches(result.records):
                    if record.offset >= offset:
                        got.append((record.offset, record.value))

        leader.rm.fetch_messages(
            self.clock(), params, {tp: FetchPartitionRequest(offset, -1, 1 << 20)}, respond
        )
        for record_offset, _ in got:
            self.history.consumer_reads.append((tp, record_offset, hw))
        return got

    def crash(self, broker_id: int) -> None:
        self.brokers[broker_id].crash()
        self.controller.on_broker_failure(broker_id)

    def restart(self, broker_id: int) -> None:
        self.brokers[broker_id].start()
        self.controller.on_broker_startup(broker_id)

    def crash_together(self, *broker_ids: int) -> None:
        """Several brokers die at once (a power cut) before the controller reacts; their
        sessions then expire one by one, in the order given (each failure is handled
        while the controller still counts the later ones alive)."""
        for b in broker_ids:
            self.brokers[b].crash()
        for b in broker_ids:
            self.controller.on_broker_failure(b)

    def bounce(self, broker_id: int) -> None:
        """Kill and restart a broker faster than the controller notices: it stays in the
        ISR and just gets its current state again (the KIP-101 setting)."""
        broker = self.brokers[broker_id]
        broker.crash()
        broker.start()
        for tp in self.controller.ctx.partitions_on_brokers([broker_id]):
            self.controller.send_state(tp, self.zk.get(tp), only=broker_id)

    # -- checks ---------------------------------------------------------------------------
    def live(self) -> list[SimBroker]:
        return [b for b in self.brokers.values() if b.alive]
