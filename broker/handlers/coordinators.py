"""FindCoordinator's answer for one key, shared by the group APIs (key type 0, over
`__consumer_offsets`) and the transaction APIs (key type 1, over `__transaction_state`).

How it works: a key's coordinator is the leader of the key's partition of the internal
topic (Kafka's partitionFor), looked up in the metadata cache and answered with that
broker's address on the listener the request came in on. While the topic does not exist
yet the request creates it (`create_topic`) and the answer is COORDINATOR_NOT_AVAILABLE,
as is a partition with no leader: clients ask again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.core.metadata_cache import MetadataCache
from client.protocol import messages as m
from client.protocol.errors import ErrorCode


def coordinator_answer(
    listener: str | None, code: ErrorCode, message: str | None = None, node=None
) -> m.FindCoordinatorResponse:
    """A FindCoordinator response: `node` (a cached broker) on `listener`, or none."""
    host, port = node.address_for(listener) if node is not None else ("", -1)
    return m.FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        node_id=node.broker_id if node is not None else -1,
        host=host,
        port=port,
    )


async def locate_coordinator(
    cache: MetadataCache,
    listener: str | None,
    topic: str,
    partition: int,
    create_topic: Callable[[], Awaitable[None]],
) -> m.FindCoordinatorResponse:
    """The leader of `topic`'s `partition` as the coordinator (see the module doc)."""
    partitions = cache.topics.get(topic)
    if not partitions:
        await create_topic()
        return coordinator_answer(
            listener, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {topic}"
        )
    state = partitions.get(partition)
    node = cache.brokers.get(state.leader) if state is not None else None
    if node is None:
        return coordinator_answer(
            listener, ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator has no leader"
        )
    return coordinator_answer(listener, ErrorCode.NONE, None, node)
