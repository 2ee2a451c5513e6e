"""Topic deletion (Kafka's TopicDeletionManager, ZooKeeper era).

How it works: /admin/delete_topics/<t> queues topic t (a marker for an unknown topic is
just removed). For a queued topic: UpdateMetadata with leader -2 for its partitions to
every broker (they drop it from their metadata), StopReplica(delete_partition=True) to
every replica whose broker is registered; each answer comes back as an event. When every
replica has answered success, delete /brokers/topics/<t> (with its partitions),
/config/topics/<t> and finally the admin marker, all fenced. A replica whose broker is
down waits until it registers again (broker startup resumes deletion). Reassignments of
a topic being deleted are dropped.
"""

from __future__ import annotations

import logging

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from controller.active import ActiveController
from controller.events import StopReplicaAnswered
from controller.handlers import reassignment
from server_common import zkdata

log = logging.getLogger(__name__)

# A broker that answers "I don't host it" has nothing left to delete.
_DELETED = {ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


async def on_topic_deletion(active: ActiveController, event: object = None) -> None:
    ctx = active.ctx
    topics = sorted(await active.zk.get_children_or_empty(zkdata.ADMIN_DELETE_TOPICS))
    unknown = [t for t in topics if not ctx.has_topic(t)]
    if unknown:
        log.info("ignoring deletion of unknown topics %s", unknown)
        await active.store.delete_paths([zkdata.delete_topic_path(t) for t in unknown])
    queued = [t for t in topics if ctx.has_topic(t) and active.deletions.enqueue(ctx, t)]
    if queued:
        log.info("deleting topics %s", queued)
        moving = [tp for tp in ctx.reassignments if tp.topic in queued]
        if moving:
            await reassignment.drop_reassignments(active, moving)
    active.deletions.make_eligible()
    await try_deletion(active)


async def try_deletion(active: ActiveController) -> None:
    """Announce newly queued topics, send StopReplica where possible, finish done ones."""
    ctx = active.ctx
    batch = active.batch()
    for topic in active.deletions.take_unannounced():
        batch.add_update_metadata_to_all(ctx.partitions_of(topic))
    for tp, broker in active.deletions.take_sendable(ctx.live_or_shutting_down_ids):
        batch.add_stop_replica(broker, tp, delete=True)
    epoch = ctx.epoch
    queue = active.queue

    def on_response(broker: int, request, response) -> None:
        if isinstance(request, m.StopReplicaRequest):
            queue.put(StopReplicaAnswered(epoch, broker, request, response))

    active.send(batch, on_response)
    for topic in active.deletions.completed_topics():
        await active.store.delete_topic(topic)
        active.deletions.forget(topic)
        ctx.remove_topic(topic)
        active.events.record("topic_deleted", topic=topic)
        log.info("topic %s deleted", topic)


async def on_stop_replica_answered(active: ActiveController, event: StopReplicaAnswered) -> None:
    response = event.response
    request_ok = response is not None and response.error_code == ErrorCode.NONE
    errors = {}
    if response is not None:
        errors = {(e.topic, e.partition): e.error_code for e in response.partition_errors}
    for part in event.request.partitions:
        if not part.delete_partition:
            continue
        code = ErrorCode.from_code(errors.get((part.topic, part.partition), ErrorCode.NONE))
        deleted = request_ok and code in _DELETED
        if not deleted and response is not None:
            log.warning(
                "broker %d could not delete %s-%d: %s",
                event.broker_id,
                part.topic,
                part.partition,
                code.name if request_ok else ErrorCode.from_code(response.error_code).name,
            )
        active.deletions.on_stop_replica_result(
            TopicPartition(part.topic, part.partition), event.broker_id, deleted
        )
    await try_deletion(active)
