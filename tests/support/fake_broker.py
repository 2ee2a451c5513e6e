"""An in-process fake cluster speaking the real protocol, for client tests and benchmarks.

How it works: `FakeCluster` holds topics in memory, each partition a list of real record
batches (offsets assigned with `records.assign_offsets`, HW = LEO: every append is
committed at once). It plays one or several brokers; each broker serves connections with
the broker's own `server_common.network.serve_connection` and a handler of ours, so framing,
pipelining and error answers are the real ones. Leadership is per partition: only the
leader accepts Produce/Fetch/ListOffsets, the others answer NOT_LEADER_OR_FOLLOWER, and
a fetch naming another leader epoch gets FENCED/UNKNOWN_LEADER_EPOCH (KIP-320). A fetch
with too little data long-polls until data arrives, the leader moves or `max_wait_ms`.

Two transports:
- "tcp": each broker listens on 127.0.0.1, port 0 (CLI tests, benchmarks);
- "memory": while the cluster runs, `trio.open_tcp_stream` is patched so connections to
  its brokers' addresses are in-memory stream pairs. Nothing waits on the kernel, so
  `trio.testing.MockClock(autojump_threshold=0)` tests are deterministic.

Knobs to inject trouble: `fail()` (an error code for the next N requests of an API,
per partition or per request), `drop()` (close the connection instead of answering,
optionally after appending), `delay()` (answer later), `move_leader()`,
`stop_broker()` / `start_broker()`, `delete_records()` (moves the log start: the way to
provoke OFFSET_OUT_OF_RANGE), `complete_reassignments()`.

Use: `async with open_fake_cluster(3, transport="memory") as cluster:` in a Trio test,
`with FakeClusterThread(...) as cluster:` from synchronous code (a thread runs Trio),
or `python -m tests.support.fake_broker` for a separate process (prints its bootstrap
address on stdout, serves until stdin closes).
"""

from __future__ import annotations

import argparse
import bisect
import errno
import logging
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from client.protocol import messages as m
from client.protocol import records as rec
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition, topic_name_problem
from server_common.network import NO_RESPONSE, Reply, error_answer, serve_connection

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 100 * 1024 * 1024
MAX_QUEUED = 500
KNOWN_TOPIC_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "max.message.bytes",
        "min.insync.replicas",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.ms",
        "unclean.leader.election.enable",
    }
)


@dataclass
class FakePartition:
    topic: str
    partition: int
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    bases: list[int] = field(default_factory=list)  # base offset of each batch
    batches: list[bytes] = field(default_factory=list)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.batches)

    def append(self, data: bytes) -> int:
        """Assign offsets to the (validated) batches in `data`; their base offset."""
        base = self.log_end_offset
        patched, last, _ = rec.assign_offsets(data, base, self.leader_epoch)
        for pos, header in rec.iter_batches(patched):
            self.bases.append(header.base_offset)
            self.batches.append(bytes(patched[pos : pos + header.size]))
        self.log_end_offset = last + 1
        return base

    def read(self, offset: int, max_bytes: int, min_one_batch: bool) -> bytes:
        """Whole batches from the one holding `offset`, at most `max_bytes` (but at least
        one batch with `min_one_batch`)."""
        if offset >= self.log_end_offset:
            return b""
        index = max(0, bisect.bisect_right(self.bases, offset) - 1)
        out: list[bytes] = []
        total = 0
        for batch in self.batches[index:]:
            if total + len(batch) > max_bytes and (out or not min_one_batch):
                break
            out.append(batch)
            total += len(batch)
        return b"".join(out)

    def records(self) -> list[rec.DecodedRecord]:
        out = []
        for batch in self.batches:
            out.extend(r for r in rec.decode_batches(batch) if r.offset >= self.log_start_offset)
        return out

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        for record in self.records():
            if record.timestamp >= timestamp:
                return record.offset, record.timestamp
        return None


@dataclass
class _Fault:
    api: ApiKey
    action: str  # "error", "drop", "delay"
    code: ErrorCode = ErrorCode.NONE
    tp: TopicPartition | None = None
    broker: int | None = None
    times: float = 1  # math.inf: forever
    delay_s: float = 0.0
    after_append: bool = False

    def matches(self, api: ApiKey, broker: int, tp: TopicPartition | None = None) -> bool:
        return (
            self.times > 0
            and self.api == api
            and (self.broker is None or self.broker == broker)
            and (self.tp is None or tp is None or self.tp == tp)
        )


class _Connection:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.scope = trio.CancelScope()

    def drop(self) -> None:
        self.scope.cancel()


class FakeBroker:
    """One broker of the fake cluster: an id, an address, its open connections."""

    def __init__(self, cluster: FakeCluster, broker_id: int) -> None:
        self.cluster = cluster
        self.id = broker_id
        self.host = "127.0.0.1"
        self.port = 0
        self.alive = True
        self.connections: set[_Connection] = set()
        self._listener_scope: trio.CancelScope | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def serve_stream(self, stream: trio.abc.Stream) -> None:
        connection = _Connection(self)
        self.connections.add(connection)
        try:
            with connection.scope:

                async def handle(header: RequestHeader, request: Any) -> Any:
                    return await self.cluster.handle(self, connection, header, request)

                await serve_connection(
                    stream, handle, max_frame_bytes=MAX_FRAME_BYTES, max_queued=MAX_QUEUED
                )
        finally:
            self.connections.discard(connection)
            await trio.aclose_forcefully(stream)

    async def listen(self, *, task_status: trio.TaskStatus[int]) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        with trio.CancelScope() as self._listener_scope:
            task_status.started(self.port)
            await trio.serve_listeners(self.serve_stream, listeners)

    def drop_connections(self) -> None:
        for connection in list(self.connections):
            connection.drop()


class FakeCluster:
    """Brokers, topics and faults. Build with `open_fake_cluster` or `FakeClusterThread`."""

    def __init__(
        self,
        num_brokers: int = 1,
        *,
        transport: str = "tcp",
        message_max_bytes: int = 1_048_588,
        record_requests: bool = True,
        cluster_id: str = "fake-cluster",
    ) -> None:
        if transport not in ("tcp", "memory"):
            raise ValueError(f"unknown transport {transport!r}")
        self.transport = transport
        self.brokers: dict[int, FakeBroker] = {
            i: FakeBroker(self, i) for i in range(1, num_brokers + 1)
        }
        self.controller_id = 1
        self.cluster_id = cluster_id
        self.message_max_bytes = message_max_bytes
        self.topics: dict[str, dict[int, FakePartition]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.reassignments: dict[TopicPartition, list[int]] = {}
        self.faults: list[_Fault] = []
        self.record_requests = record_requests
        self.requests: list[tuple[int, Any]] = []  # (broker id, request), in arrival order
        self._changed = trio.Event()
        self._nursery: trio.Nursery | None = None
        if transport == "memory":
            for broker in self.brokers.values():
                broker.host, broker.port = f"broker{broker.id}.fake", 9092

    # --- setup -----------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        *,
        assignment: dict[int, list[int]] | None = None,
        configs: dict[str, str] | None = None,
    ) -> None:
        if assignment is None:
            ids = sorted(self.brokers)
            assignment = {
                p: [ids[(p + r) % len(ids)] for r in range(replication_factor)]
                for p in range(partitions)
            }
        self.topics[name] = {
            p: FakePartition(name, p, list(replicas), replicas[0], isr=list(replicas))
            for p, replicas in assignment.items()
        }
        self.configs[name] = dict(configs or {})
        self._notify()

    def partition(self, tp: TopicPartition | tuple[str, int]) -> FakePartition:
        return self.topics[tp[0]][tp[1]]

    def records(self, tp: TopicPartition | tuple[str, int]) -> list[rec.DecodedRecord]:
        return self.partition(tp).records()

    def values(self, tp: TopicPartition | tuple[str, int]) -> list[bytes | None]:
        return [r.value for r in self.records(tp)]

    def append(self, tp: TopicPartition | tuple[str, int], *values: bytes, key=None) -> int:
        """Append records directly (as if produced); the base offset."""
        batch = rec.build_batch([rec.Record(key, v, 1_000 + i) for i, v in enumerate(values)])
        base = self.partition(tp).append(batch)
        self._notify()
        return base

    def requests_of(self, kind: type, broker: int | None = None) -> list[Any]:
        return [r for b, r in self.requests if isinstance(r, kind) and broker in (None, b)]

    # --- knobs -----------------------------------------------------------------------

    def fail(
        self,
        api: ApiKey,
        code: ErrorCode,
        *,
        tp: TopicPartition | None = None,
        broker: int | None = None,
        times: float = 1,
    ) -> None:
        """Answer the next `times` matching requests with `code` (per partition for
        Produce/Fetch/ListOffsets, the whole request for other APIs)."""
        self.faults.append(_Fault(api, "error", code, tp, broker, times))

    def drop(
        self,
        api: ApiKey,
        *,
        broker: int | None = None,
        times: float = 1,
        after_append: bool = False,
    ) -> None:
        """Close the connection on the next `times` requests of `api` without answering.
        `after_append` (Produce): append first, so the client cannot know it worked."""
        self.faults.append(
            _Fault(api, "drop", broker=broker, times=times, after_append=after_append)
        )

    def delay(
        self, api: ApiKey, seconds: float, *, broker: int | None = None, times: float = 1
    ) -> None:
        """Answer the next `times` requests of `api` `seconds` late."""
        self.faults.append(_Fault(api, "delay", broker=broker, times=times, delay_s=seconds))

    def clear_faults(self) -> None:
        self.faults.clear()

    def move_leader(self, tp: TopicPartition | tuple[str, int], new_leader: int) -> None:
        """Make `new_leader` the leader, with a new leader epoch (the data is shared)."""
        part = self.partition(tp)
        if new_leader not in part.replicas:
            part.replicas.append(new_leader)
        part.leader = new_leader
        part.leader_epoch += 1
        self._notify()

    def stop_broker(self, broker_id: int) -> None:
        """The broker stops answering: connections closed, new ones refused, partitions it
        led get no leader (the metadata says LEADER_NOT_AVAILABLE) unless moved."""
        broker = self.brokers[broker_id]
        broker.alive = False
        broker.drop_connections()
        if broker._listener_scope is not None:
            broker._listener_scope.cancel()
        for parts in self.topics.values():
            for part in parts.values():
                if part.leader == broker_id:
                    part.leader = -1
                    part.leader_epoch += 1
        self._notify()

    async def start_broker(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        broker.alive = True
        if self.transport == "tcp":
            assert self._nursery is not None
            await self._nursery.start(broker.listen)

    def delete_records(self, tp: TopicPartition | tuple[str, int], before: int) -> None:
        """Move the log start offset to `before` (Kafka's DeleteRecords)."""
        part = self.partition(tp)
        part.log_start_offset = min(max(before, part.log_start_offset), part.log_end_offset)
        self._notify()

    def complete_reassignments(self) -> None:
        for tp, target in self.reassignments.items():
            part = self.partition(tp)
            part.replicas = list(target)
            part.isr = list(target)
            if part.leader not in target:
                part.leader = target[0]
                part.leader_epoch += 1
        self.reassignments.clear()
        self._notify()

    # --- running ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[FakeCluster]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self.transport == "tcp":
                for broker in self.brokers.values():
                    await nursery.start(broker.listen)
                task_status.started(self)
                await trio.sleep_forever()
            else:
                original = trio.open_tcp_stream
                trio.open_tcp_stream = self._memory_connect(original)  # type: ignore[assignment]
                try:
                    task_status.started(self)
                    await trio.sleep_forever()
                finally:
                    trio.open_tcp_stream = original  # type: ignore[assignment]

    def _memory_connect(self, original: Callable[..., Any]) -> Callable[..., Any]:
        by_address = {(b.host, b.port): b for b in self.brokers.values()}

        async def open_tcp_stream(host: str, port: int, **kwargs: Any) -> trio.abc.Stream:
            broker = by_address.get((host, port))
            if broker is None:
                return await original(host, port, **kwargs)
            await trio.lowlevel.checkpoint()
            if not broker.alive:
                raise OSError(errno.ECONNREFUSED, f"Connection refused ({host}:{port})")
            client, server = trio.testing.memory_stream_pair()
            assert self._nursery is not None
            self._nursery.start_soon(broker.serve_stream, server)
            return client

        return open_tcp_stream

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # --- request handling ------------------------------------------------------------

    def _take_fault(
        self, api: ApiKey, broker: FakeBroker, tp: TopicPartition | None = None, action=None
    ) -> _Fault | None:
        for fault in self.faults:
            if (action is None or fault.action == action) and fault.matches(api, broker.id, tp):
                fault.times -= 1
                return fault
        return None

    async def handle(
        self, broker: FakeBroker, connection: _Connection, header: RequestHeader, request: Any
    ) -> Any:
        if not broker.alive:
            connection.drop()
            return NO_RESPONSE
        if self.record_requests:
            self.requests.append((broker.id, request))
        api = ApiKey(header.api_key)
        drop = self._take_fault(api, broker, action="drop")
        if drop is not None:
            if drop.after_append and api == ApiKey.PRODUCE:
                self._api_produce(broker, request)
            connection.drop()
            return NO_RESPONSE
        if api not in _PARTITIONED:
            fault = self._take_fault(api, broker, action="error")
            if fault is not None:
                return error_answer(fault.code, "injected by the fake broker")
        handler = getattr(self, f"_api_{api.name.lower()}", None)
        if handler is None:
            return error_answer(ErrorCode.UNSUPPORTED_VERSION, f"{api.name} is not faked")
        delay = self._take_fault(api, broker, action="delay")
        outcome = handler(broker, request)  # a produce appends now, answers maybe later
        if delay is None or outcome is NO_RESPONSE:
            return outcome
        reply = Reply()

        async def later() -> None:
            await trio.sleep(delay.delay_s)
            value = outcome
            if isinstance(value, Reply):
                value = await value.wait()
            reply.set(value)

        assert self._nursery is not None
        self._nursery.start_soon(later)
        return reply

    def _api_api_versions(self, broker: FakeBroker, request: m.ApiVersionsRequest) -> Any:
        return m.api_versions_response()

    def _api_metadata(self, broker: FakeBroker, request: m.MetadataRequest) -> Any:
        names = sorted(self.topics) if request.topics is None else list(request.topics)
        live = {b.id for b in self.brokers.values() if b.alive}
        topics = []
        for name in names:
            parts = self.topics.get(name)
            if parts is None:
                topics.append(
                    m.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        name=name,
                        is_internal=False,
                        partitions=[],
                    )
                )
                continue
            topics.append(
                m.MetadataResponseTopic(
                    error_code=ErrorCode.NONE,
                    name=name,
                    is_internal=name.startswith("__"),
                    partitions=[
                        m.MetadataResponsePartition(
                            error_code=(
                                ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                            ),
                            partition=p.partition,
                            leader=p.leader,
                            leader_epoch=p.leader_epoch,
                            replicas=list(p.replicas),
                            isr=[r for r in p.isr if r in live] or p.isr[:1],
                            offline_replicas=[r for r in p.replicas if r not in live],
                        )
                        for p in sorted(parts.values(), key=lambda p: p.partition)
                    ],
                )
            )
        return m.MetadataResponse(
            brokers=[
                m.MetadataResponseBroker(node_id=b.id, host=b.host, port=b.port, rack=None)
                for b in self.brokers.values()
                if b.alive
            ],
            cluster_id=self.cluster_id,
            controller_id=self.controller_id,
            topics=topics,
        )

    # --- produce ---------------------------------------------------------------------

    def _api_produce(self, broker: FakeBroker, request: m.ProduceRequest) -> Any:
        results: dict[str, list[m.ProduceResponsePartition]] = {}
        for topic in request.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition)
                code, base, message = self._append(broker, tp, part.records)
                results.setdefault(topic.name, []).append(
                    m.ProduceResponsePartition(
                        partition=part.partition,
                        error_code=code,
                        base_offset=base,
                        log_append_time_ms=-1,
                        log_start_offset=0,
                        error_message=message,
                    )
                )
        if request.acks == 0:
            return NO_RESPONSE
        return m.ProduceResponse(
            topics=[m.ProduceResponseTopic(name=n, partitions=p) for n, p in results.items()],
            throttle_time_ms=0,
        )

    def _leader_or_error(
        self, broker: FakeBroker, tp: TopicPartition, current_epoch: int = -1
    ) -> tuple[FakePartition | None, ErrorCode]:
        part = self.topics.get(tp.topic, {}).get(tp.partition)
        if part is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if part.leader != broker.id:
            return part, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if current_epoch >= 0 and current_epoch < part.leader_epoch:
            return part, ErrorCode.FENCED_LEADER_EPOCH
        if current_epoch > part.leader_epoch:
            return part, ErrorCode.UNKNOWN_LEADER_EPOCH
        return part, ErrorCode.NONE

    def _append(
        self, broker: FakeBroker, tp: TopicPartition, data: bytes
    ) -> tuple[ErrorCode, int, str | None]:
        fault = self._take_fault(ApiKey.PRODUCE, broker, tp, action="error")
        if fault is not None:
            return fault.code, -1, "injected by the fake broker"
        part, code = self._leader_or_error(broker, tp)
        if code is not ErrorCode.NONE or part is None:
            return code, -1, None
        if len(data) > self.message_max_bytes:
            return ErrorCode.MESSAGE_TOO_LARGE, -1, f"{len(data)} bytes"
        try:
            rec.validate_batches(data)
        except rec.RecordError as exc:
            return ErrorCode.CORRUPT_MESSAGE, -1, str(exc)
        base = part.append(data)
        self._notify()
        return ErrorCode.NONE, base, None

    # --- fetch -----------------------------------------------------------------------

    def _api_fetch(self, broker: FakeBroker, request: m.FetchRequest) -> Any:
        results, total, errors = self._read(broker, request)
        if request.max_wait_ms <= 0 or total >= request.min_bytes or errors:
            return self._fetch_response(results)
        reply = Reply()

        async def long_poll() -> None:
            with trio.move_on_after(request.max_wait_ms / 1000):
                while True:
                    await self._changed.wait()
                    results, total, errors = self._read(broker, request)
                    if total >= request.min_bytes or errors:
                        break
            reply.set(self._fetch_response(self._read(broker, request)[0]))

        assert self._nursery is not None
        self._nursery.start_soon(long_poll)
        return reply

    def _read(
        self, broker: FakeBroker, request: m.FetchRequest
    ) -> tuple[dict[str, list[m.FetchResponsePartition]], int, bool]:
        results: dict[str, list[m.FetchResponsePartition]] = {}
        budget = request.max_bytes
        total = 0
        errors = False
        for topic in request.topics:
            for fp in topic.partitions:
                tp = TopicPartition(topic.topic, fp.partition)
                code, hw, start, data = self._read_one(broker, tp, fp, budget, total == 0)
                if code is not ErrorCode.NONE:
                    errors = True
                total += len(data)
                budget -= len(data)
                results.setdefault(topic.topic, []).append(
                    m.FetchResponsePartition(
                        partition=fp.partition,
                        error_code=code,
                        high_watermark=hw,
                        last_stable_offset=hw,
                        log_start_offset=start,
                        records=data,
                    )
                )
        return results, total, errors

    def _read_one(
        self,
        broker: FakeBroker,
        tp: TopicPartition,
        fp: m.FetchPartition,
        budget: int,
        first: bool,
    ) -> tuple[ErrorCode, int, int, bytes]:
        fault = self._take_fault(ApiKey.FETCH, broker, tp, action="error")
        if fault is not None:
            return fault.code, -1, -1, b""
        part, code = self._leader_or_error(broker, tp, fp.current_leader_epoch)
        if code is not ErrorCode.NONE or part is None:
            return code, -1, -1, b""
        hw, start = part.log_end_offset, part.log_start_offset
        if not start <= fp.fetch_offset <= hw:
            return ErrorCode.OFFSET_OUT_OF_RANGE, hw, start, b""
        limit = max(0, min(fp.partition_max_bytes, budget))
        return ErrorCode.NONE, hw, start, part.read(fp.fetch_offset, limit, first)

    @staticmethod
    def _fetch_response(results: dict[str, list[m.FetchResponsePartition]]) -> m.FetchResponse:
        return m.FetchResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            topics=[m.FetchResponseTopic(topic=t, partitions=p) for t, p in results.items()],
        )

    # --- offsets ---------------------------------------------------------------------

    def _api_list_offsets(self, broker: FakeBroker, request: m.ListOffsetsRequest) -> Any:
        topics = []
        for topic in request.topics:
            parts = []
            for lp in topic.partitions:
                tp = TopicPartition(topic.name, lp.partition)
                fault = self._take_fault(ApiKey.LIST_OFFSETS, broker, tp, action="error")
                part, code = self._leader_or_error(broker, tp, lp.current_leader_epoch)
                if fault is not None:
                    code = fault.code
                timestamp, offset, epoch = -1, -1, -1
                if code is ErrorCode.NONE and part is not None:
                    epoch = part.leader_epoch
                    if lp.timestamp == m.EARLIEST_TIMESTAMP:
                        offset = part.log_start_offset
                    elif lp.timestamp == m.LATEST_TIMESTAMP:
                        offset = part.log_end_offset
                    else:
                        found = part.offset_for_timestamp(lp.timestamp)
                        if found is not None:
                            offset, timestamp = found
                parts.append(
                    m.ListOffsetsResponsePartition(
                        partition=lp.partition,
                        error_code=code,
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                )
            topics.append(m.ListOffsetsResponseTopic(name=topic.name, partitions=parts))
        return m.ListOffsetsResponse(topics=topics)

    # --- admin -----------------------------------------------------------------------

    def _api_create_topics(self, broker: FakeBroker, request: m.CreateTopicsRequest) -> Any:
        results = []
        live = [b.id for b in self.brokers.values() if b.alive]
        for topic in request.topics:
            code, message = ErrorCode.NONE, None
            partitions, rf = topic.num_partitions, topic.replication_factor
            partitions = 1 if partitions == -1 else partitions
            rf = 1 if rf == -1 else rf
            bad_configs = [c.name for c in topic.configs if c.name not in KNOWN_TOPIC_CONFIGS]
            if (problem := topic_name_problem(topic.name)) is not None:
                code, message = ErrorCode.INVALID_TOPIC_EXCEPTION, problem
            elif topic.name in self.topics:
                code, message = ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{topic.name}' exists"
            elif bad_configs:
                code, message = ErrorCode.INVALID_CONFIG, f"unknown config {bad_configs[0]!r}"
            elif topic.assignments:
                assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
                if any(b not in live for r in assignment.values() for b in r):
                    code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "unknown broker"
                else:
                    partitions, rf = len(assignment), len(next(iter(assignment.values())))
            elif partitions <= 0:
                code, message = ErrorCode.INVALID_PARTITIONS, "partitions must be > 0"
            elif rf <= 0 or rf > len(live):
                code, message = (
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"replication factor {rf} is larger than the {len(live)} live broker(s)",
                )
            if code is ErrorCode.NONE and not request.validate_only:
                configs = {c.name: c.value for c in topic.configs if c.value is not None}
                if topic.assignments:
                    self.create_topic(topic.name, assignment=assignment, configs=configs)
                else:
                    self.create_topic(topic.name, partitions, rf, configs=configs)
            results.append(
                m.CreateTopicsResponseTopic(
                    name=topic.name,
                    error_code=code,
                    error_message=message,
                    num_partitions=partitions if code is ErrorCode.NONE else -1,
                    replication_factor=rf if code is ErrorCode.NONE else -1,
                )
            )
        return m.CreateTopicsResponse(throttle_time_ms=0, topics=results)

    def _api_delete_topics(self, broker: FakeBroker, request: m.DeleteTopicsRequest) -> Any:
        responses = []
        for name in request.topic_names:
            if self.topics.pop(name, None) is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}"
            else:
                self.configs.pop(name, None)
                code, message = ErrorCode.NONE, None
            responses.append(
                m.DeleteTopicsResponseTopic(name=name, error_code=code, error_message=message)
            )
        self._notify()
        return m.DeleteTopicsResponse(throttle_time_ms=0, responses=responses)

    def _api_describe_configs(self, broker: FakeBroker, request: m.DescribeConfigsRequest) -> Any:
        results = []
        for resource in request.resources:
            configs = self.configs.get(resource.resource_name)
            results.append(
                m.DescribeConfigsResponseResource(
                    error_code=ErrorCode.NONE
                    if configs is not None
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=None,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[
                        m.DescribeConfigsResult(name=k, value=v, read_only=False, is_default=False)
                        for k, v in sorted((configs or {}).items())
                    ],
                )
            )
        return m.DescribeConfigsResponse(throttle_time_ms=0, results=results)

    def _api_elect_leaders(self, broker: FakeBroker, request: m.ElectLeadersRequest) -> Any:
        if request.topic_partitions is None:
            wanted = [(t, p) for t, parts in self.topics.items() for p in parts]
        else:
            wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
        live = {b.id for b in self.brokers.values() if b.alive}
        by_topic: dict[str, list[m.ElectLeadersPartitionResult]] = {}
        for topic, p in wanted:
            part = self.topics.get(topic, {}).get(p)
            code, message = ErrorCode.NONE, None
            if part is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif part.leader == part.replicas[0]:
                code, message = ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica leads"
            elif part.replicas[0] not in live:
                code, message = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "preferred is down"
            else:
                part.leader = part.replicas[0]
                part.leader_epoch += 1
                self._notify()
            by_topic.setdefault(topic, []).append(
                m.ElectLeadersPartitionResult(
                    partition_id=p, error_code=code, error_message=message
                )
            )
        return m.ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            replica_election_results=[
                m.ElectLeadersResponseTopic(topic=t, partition_result=r)
                for t, r in by_topic.items()
            ],
        )

    def _api_alter_partition_reassignments(
        self, broker: FakeBroker, request: m.AlterPartitionReassignmentsRequest
    ) -> Any:
        live = {b.id for b in self.brokers.values() if b.alive}
        responses = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                code, message = ErrorCode.NONE, None
                if self.topics.get(tp.topic, {}).get(tp.partition) is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.replicas is None:
                    if self.reassignments.pop(tp, None) is None:
                        code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                elif not p.replicas or any(r not in live for r in p.replicas):
                    code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "brokers not live"
                else:
                    self.reassignments[tp] = list(p.replicas)
                parts.append(
                    m.AlterPartitionReassignmentsResponsePartition(
                        partition_index=p.partition_index, error_code=code, error_message=message
                    )
                )
            responses.append(
                m.AlterPartitionReassignmentsResponseTopic(name=topic.name, partitions=parts)
            )
        return m.AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=0, error_message=None, responses=responses
        )

    def _api_list_partition_reassignments(
        self, broker: FakeBroker, request: m.ListPartitionReassignmentsRequest
    ) -> Any:
        topics: dict[str, list[m.ListPartitionReassignmentsResponsePartition]] = {}
        for tp, target in sorted(self.reassignments.items()):
            current = self.partition(tp).replicas
            topics.setdefault(tp.topic, []).append(
                m.ListPartitionReassignmentsResponsePartition(
                    partition_index=tp.partition,
                    replicas=list(dict.fromkeys(target + current)),
                    adding_replicas=[r for r in target if r not in current],
                    removing_replicas=[r for r in current if r not in target],
                )
            )
        return m.ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            topics=[
                m.ListPartitionReassignmentsResponseTopic(name=n, partitions=p)
                for n, p in topics.items()
            ],
        )

    def _api_describe_log_dirs(self, broker: FakeBroker, request: m.DescribeLogDirsRequest) -> Any:
        by_topic: dict[str, list[m.DescribeLogDirsResponsePartition]] = {}
        for name, parts in sorted(self.topics.items()):
            for part in sorted(parts.values(), key=lambda p: p.partition):
                if broker.id not in part.replicas:
                    continue
                by_topic.setdefault(name, []).append(
                    m.DescribeLogDirsResponsePartition(
                        partition_index=part.partition,
                        partition_size=part.size,
                        offset_lag=0,
                        log_start_offset=part.log_start_offset,
                        log_end_offset=part.log_end_offset,
                        high_watermark=part.log_end_offset,
                        is_leader=part.leader == broker.id,
                        leader_epoch=part.leader_epoch,
                    )
                )
        return m.DescribeLogDirsResponse(
            throttle_time_ms=0,
            results=[
                m.DescribeLogDirsResult(
                    error_code=0,
                    log_dir=f"/fake/broker-{broker.id}",
                    topics=[
                        m.DescribeLogDirsResponseTopic(name=n, partitions=p)
                        for n, p in by_topic.items()
                    ],
                )
            ],
        )


_PARTITIONED = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS})


@asynccontextmanager
async def open_fake_cluster(
    num_brokers: int = 1,
    *,
    transport: str = "memory",
    topics: dict[str, int] | None = None,
    **kwargs: Any,
) -> AsyncIterator[FakeCluster]:
    """A running fake cluster for a Trio test; `topics` maps names to partition counts."""
    cluster = FakeCluster(num_brokers, transport=transport, **kwargs)
    for name, partitions in (topics or {}).items():
        cluster.create_topic(name, partitions)
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        try:
            yield cluster
        finally:
            nursery.cancel_scope.cancel()


class FakeClusterThread:
    """A TCP fake cluster running Trio in a background thread, for synchronous tests.

    Knobs are called on the cluster from the test thread through `call(fn, *args)`,
    which runs `fn` on the cluster's Trio thread.
    """

    def __init__(self, num_brokers: int = 1, topics: dict[str, int] | None = None, **kwargs):
        self.cluster = FakeCluster(num_brokers, transport="tcp", **kwargs)
        for name, partitions in (topics or {}).items():
            self.cluster.create_topic(name, partitions)
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="fake-cluster", daemon=True)

    def _main(self) -> None:
        async def run() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            async with trio.open_nursery() as nursery:
                await nursery.start(self.cluster.run)
                self._ready.set()
                await self._stop.wait()
                nursery.cancel_scope.cancel()

        try:
            trio.run(run)
        except BaseException as exc:  # reported by __enter__/__exit__
            self._error = exc
        finally:
            self._ready.set()

    def __enter__(self) -> FakeCluster:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError("the fake cluster did not start") from self._error
        return self.cluster

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def __exit__(self, *exc_info: object) -> None:
        if self._stop is not None and self._token is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(10)


def main(argv: Iterable[str] | None = None) -> int:
    """Run a TCP fake cluster as a process; print its bootstrap, serve until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.fake_broker")
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument(
        "--topic", action="append", default=[], metavar="NAME:PARTITIONS", help="create a topic"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)

    async def run() -> None:
        cluster = FakeCluster(args.brokers, transport="tcp", record_requests=False)
        for spec in args.topic:
            name, _, partitions = spec.partition(":")
            cluster.create_topic(name, int(partitions or 1))
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            print(cluster.bootstrap, flush=True)
            stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
            while await stdin.receive_some(4096):
                pass
            nursery.cancel_scope.cancel()

    trio.run(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
