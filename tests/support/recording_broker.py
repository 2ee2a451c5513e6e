"""A recording broker for controller tests and benchmarks: registers, records, answers.

How it works: `RecordingBroker.run` serves the broker protocol on port 0 with
`server_common.network.serve_connection`; it answers LeaderAndIsr, UpdateMetadata and
StopReplica with success (or STALE_CONTROLLER_EPOCH for a request from an older
controller epoch than one it has seen, as real brokers do) and records every request in
`received`. `register()` creates its ephemeral /brokers/ids/<id> znode (the broker epoch
is the znode's czxid) through a `KazooZooKeeper` the test owns, `unregister()` deletes it (the
controller sees the broker die). `leaders` and `metadata` hold the newest partition
states it was told, by leader epoch, like a broker would apply them. `wait_for(pred)`
polls until the recorded state satisfies a predicate (integration tests use real
ZooKeeper and real time; they never sleep blindly).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import trio

from client.protocol import messages as m
from client.protocol.codec import RequestHeader
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from server_common import zkdata
from server_common.network import error_answer, serve_connection
from server_common.zk import ZooKeeper


class RecordingBroker:
    def __init__(self, broker_id: int, zk: ZooKeeper, *, host: str = "127.0.0.1"):
        self.broker_id = broker_id
        self.zk = zk
        self.host = host
        self.port: int | None = None
        self.broker_epoch = -1
        self.controller_epoch = 0
        self.received: list[tuple[float, Any]] = []  # (trio time, request)
        self.leaders: dict[TopicPartition, m.LeaderAndIsrPartitionState] = {}
        self.metadata: dict[TopicPartition, m.UpdateMetadataPartitionState] = {}
        self.deleted: set[TopicPartition] = set()
        self.changed = trio.Event()

    # -- lifecycle ----------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)

        async def serve(stream: trio.SocketStream) -> None:
            await serve_connection(stream, self._handle, max_frame_bytes=1 << 28, max_queued=16)

        await trio.serve_listeners(serve, listeners)

    async def register(self) -> int:
        assert self.port is not None, "run() the broker first"
        registration = zkdata.BrokerRegistration(self.broker_id, self.host, self.port)
        _, stat = await self.zk.create_with_stat(
            zkdata.broker_path(self.broker_id), registration.encode(), ephemeral=True, makepath=True
        )
        self.broker_epoch = stat.czxid
        return self.broker_epoch

    async def unregister(self) -> None:
        await self.zk.delete(zkdata.broker_path(self.broker_id))

    # -- what it was told -------------------------------------------------------------------
    def requests(self, kind: type) -> list[Any]:
        return [r for _, r in self.received if isinstance(r, kind)]

    def leader_of(self, tp: TopicPartition) -> int | None:
        state = self.leaders.get(tp)
        return state.leader if state is not None else None

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        with trio.fail_after(timeout_s):
            while not predicate():
                event = self.changed
                await event.wait()

    # -- the protocol -----------------------------------------------------------------------
    async def _handle(self, header: RequestHeader, request: Any) -> Any:
        self.received.append((trio.current_time(), request))
        self.changed.set()
        self.changed = trio.Event()
        epoch = getattr(request, "controller_epoch", math.inf)
        if isinstance(request, m.ApiVersionsRequest):
            return m.api_versions_response()
        if epoch < self.controller_epoch:
            return self._stale(request)
        if isinstance(request, m.LeaderAndIsrRequest):
            self.controller_epoch = request.controller_epoch
            for state in request.partition_states:
                tp = TopicPartition(state.topic, state.partition)
                current = self.leaders.get(tp)
                if current is None or state.leader_epoch > current.leader_epoch:
                    self.leaders[tp] = state
                    self.deleted.discard(tp)
            return m.LeaderAndIsrResponse(error_code=ErrorCode.NONE, partition_errors=[])
        if isinstance(request, m.UpdateMetadataRequest):
            self.controller_epoch = request.controller_epoch
            for state in request.partition_states:
                tp = TopicPartition(state.topic, state.partition)
                if state.leader == zkdata.LEADER_DURING_DELETE:
                    self.metadata.pop(tp, None)
                else:
                    self.metadata[tp] = state
            return m.UpdateMetadataResponse(error_code=ErrorCode.NONE)
        if isinstance(request, m.StopReplicaRequest):
            self.controller_epoch = request.controller_epoch
            for part in request.partitions:
                tp = TopicPartition(part.topic, part.partition)
                if part.delete_partition:
                    self.leaders.pop(tp, None)
                    self.deleted.add(tp)
            return m.StopReplicaResponse(
                error_code=ErrorCode.NONE,
                partition_errors=[
                    m.StopReplicaPartitionError(
                        topic=p.topic, partition=p.partition, error_code=ErrorCode.NONE
                    )
                    for p in request.partitions
                ],
            )
        return error_answer(ErrorCode.UNSUPPORTED_VERSION, "not served by this fake broker")

    def _stale(self, request: Any) -> Any:
        code = ErrorCode.STALE_CONTROLLER_EPOCH
        if isinstance(request, m.LeaderAndIsrRequest):
            return m.LeaderAndIsrResponse(error_code=code, partition_errors=[])
        if isinstance(request, m.StopReplicaRequest):
            return m.StopReplicaResponse(error_code=code, partition_errors=[])
        return m.UpdateMetadataResponse(error_code=code)
