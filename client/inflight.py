"""Requests in flight to partition leaders, and abandoning those whose leader moved.

Shared by the producer's sender (Produce requests) and the consumer's fetcher (Fetch
requests): both send a request per leader broker and wait for its answer, and neither
should wait out the request timeout for a leader that is paused, partitioned or gone.

How it works: `InFlightRequests.add` records, as a request goes out, the broker it went
to (`node`), the leader epoch the client's metadata gave each of its partitions, when it
was sent, and a cancel scope for the task that waits for its answer.
- `refresh_while_stalled` (a task): every `STALLED_REQUEST_MS`, if a request has waited
  longer than it should (`expected_ms`, the fetch's long-poll wait or 0 for a produce,
  plus `STALLED_REQUEST_MS`), it asks for fresh metadata, so that a leader change is
  noticed promptly.
- `abandon_on_metadata` (a task): after each metadata update, `abandon_moved` looks at
  every request not yet abandoned. A request's leader has moved when a partition of it
  now has a known leader that is another broker, or the same broker at a newer leader
  epoch (`InFlightRequest.moved`); a partition with no leader in the fresh view is no
  news (keep waiting). A moved request is marked with the reason and its scope
  cancelled: the waiting task finds no answer, raises `LeaderMovedError` (a
  NOT_LEADER_OR_FOLLOWER, so the caller retries or re-queues as after that error) and
  removes the request. Then the client is woken to send again to the new leaders.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import trio

from client.metadata import ClusterView, Metadata, current_ms
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

# A request without an answer this long after it should have had one makes the client
# check the metadata for a leader change (a healthy round trip takes milliseconds to a
# few hundred; checking costs one small Metadata request per interval while it lasts).
STALLED_REQUEST_MS = 1000


class LeaderMovedError(TributaryError):
    """A request in flight was abandoned because fresh metadata names another leader."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NOT_LEADER_OR_FOLLOWER, message)


class InFlightRequest:
    """One request on its way: where it went, since when, and how to abandon it."""

    __slots__ = ("node", "epochs", "leaders", "sent_ms", "scope", "abandoned")

    def __init__(
        self, node: int, partitions: Iterable[TopicPartition], cluster: ClusterView, sent_ms: float
    ) -> None:
        self.node = node
        self.epochs: dict[TopicPartition, int] = {}
        # The leader of each partition when sent: `node`, unless a consumer fetches from
        # a follower its leader named (KIP-392's preferred read replica).
        self.leaders: dict[TopicPartition, int] = {}
        for tp in partitions:
            info = cluster.partition(tp)
            self.epochs[tp] = -1 if info is None else info.leader_epoch
            self.leaders[tp] = node if info is None or info.leader < 0 else info.leader
        self.sent_ms = sent_ms
        self.scope = trio.CancelScope()
        self.abandoned: str | None = None

    def moved(self, cluster: ClusterView) -> str | None:
        """Why this request's leader is stale in `cluster` (None: it is not)."""
        for tp, epoch in self.epochs.items():
            info = cluster.partition(tp)
            if info is None or info.leader < 0:
                continue  # no news of a new leader yet: keep waiting
            leader = self.leaders.get(tp, self.node)
            if info.leader != leader or info.leader_epoch > epoch:
                return (
                    f"the leader of {tp} moved from broker {leader} to broker "
                    f"{info.leader} (epoch {info.leader_epoch}) while a request was in flight"
                )
        return None

    def error(self) -> LeaderMovedError:
        """What the waiting task raises when it was abandoned (it got no answer)."""
        return LeaderMovedError(self.abandoned or "the leader moved")


class InFlightRequests:
    """The requests a client has out; see the module docstring. `what` names them in the
    log ("produce request", "fetch"); `expected_ms` is how long an answer may take by
    design (a fetch's long-poll wait)."""

    def __init__(self, what: str, expected_ms: float = 0) -> None:
        self.what = what
        self.stalled_after_ms = expected_ms + STALLED_REQUEST_MS
        self._requests: set[InFlightRequest] = set()
        self._per_node: dict[int, int] = {}

    def add(
        self, node: int, partitions: Iterable[TopicPartition], cluster: ClusterView
    ) -> InFlightRequest:
        """Record a request about to go to `node` for `partitions` (their leader epochs as
        `cluster` gives them); remove it with `remove` once its task is done."""
        request = InFlightRequest(node, partitions, cluster, current_ms())
        self._requests.add(request)
        self._per_node[node] = self._per_node.get(node, 0) + 1
        return request

    def remove(self, request: InFlightRequest) -> None:
        self._requests.discard(request)
        self._per_node[request.node] -= 1

    def count(self, node: int) -> int:
        """How many requests to `node` are in flight."""
        return self._per_node.get(node, 0)

    def abandon_moved(self, cluster: ClusterView) -> None:
        """Cancel each request whose leader moved in `cluster` (once)."""
        for request in list(self._requests):
            if request.abandoned is None and (reason := request.moved(cluster)) is not None:
                log.info("abandoning a %s to broker %d: %s", self.what, request.node, reason)
                request.abandoned = reason
                request.scope.cancel()

    def stalled(self, now_ms: float) -> bool:
        """Has a request waited longer than it should?"""
        limit = self.stalled_after_ms
        return any(now_ms - r.sent_ms >= limit for r in self._requests)

    async def abandon_on_metadata(self, metadata: Metadata, wake: Callable[[], None]) -> None:
        """Forever: after each metadata update, abandon the moved requests and `wake`."""
        while True:
            await metadata.wait_for_update()
            self.abandon_moved(metadata.cluster)
            wake()

    async def refresh_while_stalled(self, metadata: Metadata) -> None:
        """Forever: while a request is stalled, keep the metadata fresh so that a leader
        change is noticed (and the request abandoned) promptly."""
        while True:
            await trio.sleep(STALLED_REQUEST_MS / 1000)
            if self.stalled(current_ms()):
                metadata.request_update()
