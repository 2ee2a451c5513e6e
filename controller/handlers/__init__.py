"""Event handlers of the active controller, one module per concern.

Each handler is `async def handler(active: ActiveController, event) -> None`: it reads
what it needs from ZooKeeper, asks the pure core (controller/core) for decisions, writes
them through `active.apply_changes` and queues requests with `active.send`. Handlers run
one at a time on the event loop (controller/server.py); `HANDLERS` maps event types to
them. A handler that finds the controller moved raises `ControllerMovedError`; any other
exception makes the server resign and compete again with a fresh context.
"""

from __future__ import annotations

from controller import events as ev
from controller.handlers import brokers, deletion, elections, isr, reassignment, topics

HANDLERS = {
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
