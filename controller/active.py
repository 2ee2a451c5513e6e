"""One term as the active controller: the context plus the tools handlers act with.

How it works: `ActiveController` exists from election to resignation. It owns the
`ControllerContext`, the fenced `ZkStore`, the `ControllerChannelManager` (whose sender
tasks live in this term's nursery, so resigning cancels them all), the topic deletion
bookkeeping and the event log. Handlers (controller/handlers/) call its three verbs:

- `apply_changes(changes, redo)`: write decided state changes to ZooKeeper; accepted ones
  go into the context and the event log; for version conflicts, re-read those znodes and
  call `redo(partitions)` for a fresh decision, a few rounds at most (Kafka retries the
  same way in PartitionStateMachine);
- `batch()` / `send(batch)`: build and queue LeaderAndIsr / UpdateMetadata / StopReplica;
- `refresh_configs_for_offline(tps)`: re-read the topic configs that an unclean election
  may depend on, and the cluster-wide dynamic broker default (/config/brokers/<default>),
  so `unclean.leader.election.enable` changes apply without a watch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import trio

from client.connection import Connector
from client.protocol.types import TopicPartition
from controller.channel import ControllerChannelManager
from controller.config import ControllerConfig
from controller.core.context import UNCLEAN_CONFIG, ControllerContext
from controller.core.deletion import TopicDeletions
from controller.core.requests import RequestBatch
from controller.core.state_change import StateChange
from controller.event_log import EventLog
from controller.events import (
    EventQueue,
    PartitionModifications,
    Queued,
    ReassigningPartitionChanged,
)
from controller.zk_store import ZkStore
from server_common import zkdata
from server_common.zk import ZnodeStat, ZooKeeper

log = logging.getLogger(__name__)

# Rounds of "write, re-read the conflicting znodes, decide again" before giving up on a
# partition for this event (a broker's ISR change racing ours needs one more round).
MAX_WRITE_ROUNDS = 5

Redo = Callable[[list[TopicPartition]], list[StateChange]]


class ActiveController:
    def __init__(
        self,
        *,
        ctx: ControllerContext,
        zk: ZooKeeper,
        config: ControllerConfig,
        queue: EventQueue,
        events: EventLog,
        nursery: trio.Nursery,
        connector: Connector | None = None,
    ):
        self.ctx = ctx
        self.zk = zk
        self.store = ZkStore(zk, ctx.epoch_zk_version)
        self.config = config
        self.queue = queue
        self.events = events
        self.nursery = nursery
        self.channel = ControllerChannelManager(
            nursery,
            controller_id=ctx.controller_id,
            request_timeout_s=config["controller.socket.timeout.ms"] / 1000,
            connector=connector,
        )
        self.deletions = TopicDeletions()
        self.loaded = False  # set once the failover (load, repair, send) is done
        # Partitions with a one-shot watch on their state znode (see handlers/reassignment).
        self.watched_reassignments: set[TopicPartition] = set()

    # -- state changes ----------------------------------------------------------------
    async def apply_changes(
        self, changes: Sequence[StateChange], redo: Redo | None = None
    ) -> list[StateChange]:
        """Write `changes`; the ones ZooKeeper accepted (the context now holds them)."""
        applied: list[StateChange] = []
        pending = list(changes)
        for _ in range(MAX_WRITE_ROUNDS):
            if not pending:
                break
            result = await self.store.write_states(pending)
            for change, version in result.written:
                self.ctx.apply(change, version)
                self.events.record_state_change(change)
                applied.append(change)
            if not result.conflicts:
                break
            fresh = await self.store.read_states(result.conflicts)
            retry = []
            for tp, state in fresh.items():
                if state is not None:
                    self.ctx.states[tp] = state
                    retry.append(tp)
                elif tp in self.ctx.states:
                    log.warning("%s: state znode disappeared; leaving it alone", tp)
                else:
                    retry.append(tp)  # a create that raced a delete: decide again
            pending = redo(retry) if redo is not None else []
        else:
            if pending:
                log.error(
                    "gave up writing %d partition state(s) after %d rounds: %s",
                    len(pending),
                    MAX_WRITE_ROUNDS,
                    ", ".join(str(c.tp) for c in pending[:10]),
                )
        for change in applied:
            log.info(
                "%s: %s -> leader %d epoch %d isr %s (%s)",
                change.tp,
                "created" if change.old is None else f"leader {change.old.leader}",
                change.new.leader,
                change.new.leader_epoch,
                list(change.new.isr),
                change.reason,
            )
        return applied

    async def refresh_configs_for_offline(self, tps: Iterable[TopicPartition]) -> None:
        """Re-read configs of topics with a partition that has no live ISR member."""
        ctx = self.ctx
        topics = set()
        for tp in tps:
            state = ctx.states.get(tp)
            if state is None or ctx.is_live(state.leader):
                continue
            if not any(ctx.is_live(r) for r in state.isr):
                topics.add(tp.topic)
        if topics:
            configs = await self.store.read_configs(sorted(topics))
            for topic, config in configs.items():
                if ctx.has_topic(topic):
                    ctx.topic_configs[topic] = config
            default = (await self.store.read_broker_default_config()).get(UNCLEAN_CONFIG)
            ctx.dynamic_default_unclean = (
                None if default is None else default.strip().lower() == "true"
            )

    # -- requests -----------------------------------------------------------------------
    def batch(self) -> RequestBatch:
        return RequestBatch(self.ctx)

    def send(
        self,
        batch: RequestBatch,
        on_response: Callable[[int, Any, Any | None], None] | None = None,
    ) -> int:
        """Queue the batch's requests; `on_response(broker, request, response)` per request.
        Returns how many requests were queued."""
        requests = batch.build()
        for outbound in requests:
            callback = None
            if on_response is not None:

                def callback(response, _o=outbound):
                    on_response(_o.broker_id, _o.request, response)

            self.channel.send(outbound.broker_id, outbound.request, callback)
        return len(requests)

    # -- watches ------------------------------------------------------------------------
    async def watch_reassigning_partition(self, tp: TopicPartition) -> None:
        """A one-shot watch on the state znode of a partition being reassigned: its next
        change (the leader adding a new replica to the ISR) queues a re-check."""
        path = zkdata.partition_state_path(tp.topic, tp.partition)
        event = Queued(ReassigningPartitionChanged(tp, self.ctx.epoch), enqueued_at=None)
        await self.zk.get_and_watch_once(path, self.queue.sender, event)

    async def watch_topic(self, topic: str) -> tuple[bytes, ZnodeStat] | None:
        """Read a topic's assignment znode and leave a one-shot watch on it: its next change
        (partitions added, a reassignment, deletion) queues a `PartitionModifications`."""
        path = zkdata.topic_path(topic)
        event = Queued(PartitionModifications(topic, self.ctx.epoch), enqueued_at=None)
        return await self.zk.get_and_watch_once(path, self.queue.sender, event)

    def close(self) -> None:
        self.channel.close()
