"""The controller's events and its single event queue (Kafka's ControllerEventManager).

How it works: everything that can change the controller's mind becomes an event on one
queue: ZooKeeper watches (forwarded by small watcher tasks), the ZooKeeper session,
ControlledShutdown requests from the listener, StopReplica answers, timers. One task takes
them off one at a time, so handlers never race each other and the context needs no locks.
Watch events carry nothing but "look again": handlers re-read ZooKeeper, so a burst of
watch notifications costs a few cheap re-reads and nothing is lost by coalescing.

The queue is unbounded like Kafka's: producers are watches, timers and one request per
broker connection, all naturally rate-limited, and a bounded queue could make a watch
callback drop an event. Each item records when it was queued, for the queue-time metric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import trio

from client.protocol import messages as m
from client.protocol.types import TopicPartition


# -- leadership and session ---------------------------------------------------------
@dataclass(frozen=True)
class Elect:
    """Try to become the active controller (at start, and when /controller disappears)."""


@dataclass(frozen=True)
class ControllerZnodeChanged:
    """/controller changed: `owner_session` is its ephemeral owner (None: it is gone)."""

    owner_session: int | None
    data: bytes | None


@dataclass(frozen=True)
class SessionLost:
    """The ZooKeeper session expired: the /controller znode went with it."""


@dataclass(frozen=True)
class SessionConnected:
    """Connected to ZooKeeper (possibly with a new session)."""


# -- ZooKeeper watches ------------------------------------------------------------------
@dataclass(frozen=True)
class BrokerChange:
    """/brokers/ids children changed."""


@dataclass(frozen=True)
class TopicChange:
    """/brokers/topics children changed."""


@dataclass(frozen=True)
class IsrChangeNotification:
    """/isr_change_notification children changed."""


@dataclass(frozen=True)
class TopicDeletion:
    """/admin/delete_topics children changed."""


@dataclass(frozen=True)
class PreferredReplicaElection:
    """/admin/preferred_replica_election changed."""


@dataclass(frozen=True)
class LeaderStepDown:
    """/admin/leader_step_down children changed (a broker found damaged bytes)."""


@dataclass(frozen=True)
class PartitionReassignment:
    """/admin/reassign_partitions changed."""


@dataclass(frozen=True)
class PartitionModifications:
    """A topic's /brokers/topics/<t> znode changed (one-shot watch): partitions may have
    been added (Kafka's PartitionModifications)."""

    topic: str
    controller_epoch: int


@dataclass(frozen=True)
class ReassigningPartitionChanged:
    """The state znode of a partition being reassigned changed (one-shot watch)."""

    tp: TopicPartition
    controller_epoch: int


# -- requests, answers, timers --------------------------------------------------------------
@dataclass
class ControlledShutdown:
    """A broker asks to shut down; `reply(response)` answers it (exactly once)."""

    request: m.ControlledShutdownRequest
    reply: Any  # server_common.network.Reply


@dataclass(frozen=True)
class StopReplicaAnswered:
    """A StopReplica(delete) got its answer (None: the broker went away first)."""

    controller_epoch: int
    broker_id: int
    request: m.StopReplicaRequest
    response: m.StopReplicaResponse | None


@dataclass(frozen=True)
class AutoRebalance:
    """The leader imbalance check timer fired."""

    controller_epoch: int


@dataclass
class Queued:
    event: Any
    # trio.current_time() when queued; None for items built ahead of time (one-shot
    # watches), whose queue time is unknown.
    enqueued_at: float | None = field(default_factory=trio.current_time)


class EventQueue:
    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[Queued](math.inf)

    def put(self, event: Any) -> None:
        """Queue an event (never blocks; callable from any Trio task)."""
        self._send.send_nowait(Queued(event))

    @property
    def sender(self) -> trio.MemorySendChannel:
        """For `ZooKeeper.get_and_watch_once`: items sent here must be `Queued`."""
        return self._send

    def __len__(self) -> int:
        return self._send.statistics().current_buffer_used

    async def get(self) -> Queued:
        return await self._receive.receive()
