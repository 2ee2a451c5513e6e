"""Brokers coming and going (Kafka's BrokerChange, onBrokerFailure, onBrokerStartup).

How it works: re-read /brokers/ids (children and data, with each znode's czxid = broker
epoch) and diff it against the context: new ids started, missing ids died, and an id whose
epoch changed bounced (it lost its session and registered again, maybe after a restart):
that is handled as a failure followed by a startup, as Kafka does.

- Failure: stop sending to it; elect new leaders for the partitions it led and remove it
  from the ISRs it was in (`decisions.on_broker_failure`, each a new leader epoch,
  conditional sets); LeaderAndIsr to the replicas of changed partitions; UpdateMetadata
  to every broker for every partition it hosts (its replicas are now offline). Topic
  deletions waiting on it keep waiting.
- Startup: start sending to it; UpdateMetadata with every partition to it and with the new
  broker list to the others; LeaderAndIsr for every partition it hosts (it becomes a
  follower, truncates and catches up by itself; the leader adds it back to the ISR); then
  elect leaders for offline partitions it can lead and initialize partitions that had no
  live replica; resume topic deletions and reassignments that were waiting for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from controller.active import ActiveController
from controller.core.decisions import on_broker_failure as decide_failure
from controller.core.decisions import on_broker_startup as decide_startup
from controller.core.decisions import repair_partitions
from controller.core.requests import ALL_PARTITIONS
from controller.handlers import deletion, reassignment
from controller.handlers.common import add_changes

log = logging.getLogger(__name__)


async def on_broker_change(active: ActiveController, event: object = None) -> None:
    ctx = active.ctx
    registered = await active.store.read_brokers()
    known = ctx.live_brokers
    started = sorted(b for b in registered if b not in known)
    dead = sorted(b for b in known if b not in registered)
    bounced = sorted(b for b in registered if b in known and registered[b].epoch != known[b].epoch)
    for broker_id in registered:
        if (
            broker_id in known
            and broker_id not in bounced
            and registered[broker_id] != known[broker_id]
        ):
            log.info("broker %d updated its registration", broker_id)
            ctx.add_live_broker(registered[broker_id])
            active.channel.add_broker(registered[broker_id])
    if not (started or dead or bounced):
        return
    log.info("brokers started %s, died %s, bounced %s", started, dead, bounced)
    if dead or bounced:
        await on_broker_failure(active, dead + bounced)
    for broker_id in bounced:
        active.events.record("broker_bounced", broker=broker_id)
    if started or bounced:
        for broker_id in started + bounced:
            info = registered[broker_id]
            ctx.add_live_broker(info)
            active.channel.add_broker(info)
            active.events.record("broker_up", broker=broker_id, broker_epoch=info.epoch)
        await on_broker_startup(active, started + bounced)


async def on_broker_failure(active: ActiveController, dead: Sequence[int]) -> None:
    ctx = active.ctx
    for broker_id in dead:
        ctx.remove_live_broker(broker_id)
        active.channel.remove_broker(broker_id)
        active.events.record("broker_down", broker=broker_id)
    active.deletions.on_broker_failure(dead)
    hosted = ctx.partitions_on_brokers(dead)
    await active.refresh_configs_for_offline(hosted)
    applied = await active.apply_changes(
        decide_failure(ctx, dead), redo=lambda tps: repair_partitions(ctx, tps)
    )
    batch = active.batch()
    add_changes(batch, applied)
    batch.add_update_metadata_to_all(hosted)
    active.send(batch)


async def on_broker_startup(active: ActiveController, started: Sequence[int]) -> None:
    ctx = active.ctx
    batch = active.batch()
    batch.add_update_metadata(started, ALL_PARTITIONS)
    batch.add_update_metadata(ctx.live_or_shutting_down_ids.difference(started))
    hosted = ctx.partitions_on_brokers(started)
    for tp in hosted:
        batch.add_leader_and_isr([r for r in ctx.replicas[tp] if r in started], tp)
    await active.refresh_configs_for_offline(hosted)
    applied = await active.apply_changes(
        decide_startup(ctx, started), redo=lambda tps: repair_partitions(ctx, tps)
    )
    add_changes(batch, applied)
    active.send(batch)
    active.deletions.make_eligible(started)
    await deletion.try_deletion(active)
    await reassignment.check_reassignments(active, [tp for tp in hosted if tp in ctx.reassignments])
