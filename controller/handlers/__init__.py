"""Event handlers of the active controller, one module per concern.

Each handler is `async def handler(active: ActiveController, event) -> None`: it reads
what it needs from ZooKeeper, asks the pure core (controller/core) for decisions, writes
them through `active.apply_changes` and queues requests with `active.send`. Handlers run
one at a time on the event loop (controller/server.py); `HANDLERS` maps event types to
them. A handler that finds the controller moved raises `ControllerMovedError`; any other
exception makes the server resign and compete again with a fresh context.

- `failover.py`: becoming the active controller (the server calls `on_become_active`):
  read the whole cluster, repair every partition, tell every broker;
- `brokers.py`: brokers coming and going (BrokerChange);
- `topics.py`: new and vanished topics, partitions added to a topic;
- `isr.py`: ISR change notifications from the leaders;
- `deletion.py`: topic deletion, and the StopReplica answers it waits for;
- `elections.py`: preferred replica elections (on request, by the auto-rebalance timer)
  and leader step-downs asked for by a broker's scrubber;
- `reassignment.py`: partition reassignment through /admin/reassign_partitions;
- `shutdown.py`: controlled shutdown requests (the server calls
  `on_controlled_shutdown` with each one the listener receives);
- `common.py`: small steps several handlers share (tell brokers about changed
  partitions).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from controller import events as ev
from controller.active import ActiveController
from controller.handlers import brokers, deletion, elections, isr, reassignment, topics

# A handler takes an event of the type it is registered for (hence Any: one table
# holds handlers of different event types).
Handler = Callable[[ActiveController, Any], Awaitable[None]]

HANDLERS: dict[type, Handler] = {
    ev.BrokerChange: brokers.on_broker_change,
    ev.TopicChange: topics.on_topic_change,
    ev.PartitionModifications: topics.on_partition_modifications,
    ev.IsrChangeNotification: isr.on_isr_change_notification,
    ev.TopicDeletion: deletion.on_topic_deletion,
    ev.StopReplicaAnswered: deletion.on_stop_replica_answered,
    ev.PreferredReplicaElection: elections.on_preferred_replica_election,
    ev.AutoRebalance: elections.on_auto_rebalance,
    ev.LeaderStepDown: elections.on_leader_step_down,
    ev.PartitionReassignment: reassignment.on_partition_reassignment,
    ev.ReassigningPartitionChanged: reassignment.on_reassigning_partition_changed,
}
