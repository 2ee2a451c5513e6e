"""Faults injected around a broker's real request handler, for in-process test clusters.

How it works: a `FaultPlan` holds the faults the test asked for and records every
request each broker received; `FaultInjector(plan, broker_id, handler)` wraps one
broker's real `RequestHandlers.handle` (through `BrokerServer`'s `interceptor` seam).
For each request the injector records it, then:

- `drop`: answers `CLOSE_CONNECTION` (the connection is cut, nothing is answered), after
  letting the broker append first if asked (`after_append`: the client cannot know);
- `fail`: for Produce, Fetch and ListOffsets, per partition: the faulted partitions are
  taken out of the request and answered with the error code, the others go to the real
  handler (a fetch with a partition in error is answered at once, as Kafka does); for
  other APIs, the whole request is answered with the error;
- `delay`: the answer, whatever the broker said, leaves `seconds` after the request came;
- `script`: a function of the test answers requests of an API the branch's brokers do
  not serve yet (`fn(broker_id, request)` returns the response, or None to let the
  broker answer).

Everything else is the broker's own answer. Faults concern the clients' requests; the
cluster's own (a follower's fetch, the controller's LeaderAndIsr, UpdateMetadata and
StopReplica) only with `inter_broker=True`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader
from client.protocol.errors import ErrorCode
from client.protocol.records import BatchHeader, iter_batches
from client.protocol.types import TopicPartition
from server_common.network import CLOSE_CONNECTION, NO_RESPONSE, Handler, Reply, error_answer

INJECTED = "injected by the test cluster"

_PARTITIONED = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS})
_CONTROLLER_REQUESTS = frozenset(
    {ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA}
)


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
    inter_broker: bool = False  # the cluster's own requests instead of the clients'

    def matches(
        self, api: ApiKey, broker: int, inter_broker: bool, tp: TopicPartition | None = None
    ) -> bool:
        return (
            self.times > 0
            and self.api == api
            and self.inter_broker == inter_broker
            and (self.broker is None or self.broker == broker)
            and (self.tp is None or tp is None or self.tp == tp)
        )


class FaultPlan:
    """The faults a test asked for, and the requests the brokers received."""

    def __init__(self, *, record_requests: bool = True) -> None:
        self.record_requests = record_requests
        self.faults: list[_Fault] = []
        self.scripts: dict[ApiKey, Callable[[int, Any], Any]] = {}
        # (broker id, sent by the cluster itself, request), in arrival order
        self.requests: list[tuple[int, bool, Any]] = []

    def fail(
        self,
        api: ApiKey,
        code: ErrorCode,
        *,
        tp: TopicPartition | None = None,
        broker: int | None = None,
        times: float = 1,
        inter_broker: bool = False,
    ) -> None:
        """Answer the next `times` matching requests with `code` (per partition for
        Produce/Fetch/ListOffsets, the whole request for other APIs)."""
        self.faults.append(_Fault(api, "error", code, tp, broker, times, inter_broker=inter_broker))

    def drop(
        self,
        api: ApiKey,
        *,
        broker: int | None = None,
        times: float = 1,
        after_append: bool = False,
        inter_broker: bool = False,
    ) -> None:
        """Close the connection on the next `times` requests of `api` without answering.
        `after_append` (Produce): let the broker append first, so the client cannot know
        it worked."""
        self.faults.append(
            _Fault(
                api,
                "drop",
                broker=broker,
                times=times,
                after_append=after_append,
                inter_broker=inter_broker,
            )
        )

    def delay(
        self,
        api: ApiKey,
        seconds: float,
        *,
        broker: int | None = None,
        times: float = 1,
        inter_broker: bool = False,
    ) -> None:
        """Answer the next `times` requests of `api` `seconds` late."""
        self.faults.append(
            _Fault(
                api, "delay", broker=broker, times=times, delay_s=seconds, inter_broker=inter_broker
            )
        )

    def script(self, api: ApiKey, answer: Callable[[int, Any], Any] | None) -> None:
        """Answer clients' requests of `api` with `answer(broker_id, request)` (None from
        it: the broker answers); `answer=None` removes the script."""
        if answer is None:
            self.scripts.pop(api, None)
        else:
            self.scripts[api] = answer

    def clear_faults(self) -> None:
        self.faults.clear()
        self.scripts.clear()

    def requests_of(
        self, kind: type, broker: int | None = None, *, inter_broker: bool = False
    ) -> list[Any]:
        """The requests of type `kind` the brokers (or `broker`) received from clients, in
        arrival order; with `inter_broker`, those the cluster sent itself instead."""
        return [
            r
            for b, sent_by_cluster, r in self.requests
            if isinstance(r, kind) and broker in (None, b) and sent_by_cluster == inter_broker
        ]

    def produced_batches(self, topic: str) -> list[tuple[int, BatchHeader]]:
        """(partition, header) of every batch of `topic` in the Produce requests the brokers
        received from clients, in arrival order."""
        return [
            (part.partition, header)
            for request in self.requests_of(m.ProduceRequest)
            for t in request.topics
            if t.name == topic
            for part in t.partitions
            for _, header in iter_batches(part.records)
        ]

    def take(
        self,
        action: str,
        api: ApiKey,
        broker: int,
        inter_broker: bool,
        tp: TopicPartition | None = None,
    ) -> _Fault | None:
        """The first matching fault of `action`, used up once; None if there is none."""
        for fault in self.faults:
            if fault.action == action and fault.matches(api, broker, inter_broker, tp):
                fault.times -= 1
                return fault
        return None


class _Later(Reply):
    """An answer built from another once it is ready (a `Reply` or a value), no earlier
    than `not_before` (Trio time)."""

    __slots__ = ("_inner", "_not_before", "_build")

    def __init__(self, inner: Any, not_before: float, build: Callable[[Any], Any]):
        super().__init__()
        self._inner, self._not_before, self._build = inner, not_before, build

    async def wait(self) -> Any:
        value = await self._inner.wait() if isinstance(self._inner, Reply) else self._inner
        await trio.sleep_until(self._not_before)
        return self._build(value)


class FaultInjector:
    """Wraps one broker's real request handler: records requests, applies the plan."""

    def __init__(self, plan: FaultPlan, broker_id: int, handler: Handler):
        self.plan = plan
        self.broker_id = broker_id
        self.handler = handler

    async def __call__(self, header: RequestHeader, request: Any) -> Any:
        plan, arrived = self.plan, trio.current_time()
        api = ApiKey(header.api_key)
        inter_broker = _sent_by_cluster(api, request)
        if plan.record_requests:
            plan.requests.append((self.broker_id, inter_broker, request))
        drop = plan.take("drop", api, self.broker_id, inter_broker)
        if drop is not None:
            if drop.after_append and api == ApiKey.PRODUCE:
                await self.handler(header, request)
            return CLOSE_CONNECTION
        errors: dict[TopicPartition, ErrorCode] = {}
        script = None if inter_broker else plan.scripts.get(api)
        scripted = script(self.broker_id, request) if script is not None else None
        if scripted is not None:
            outcome = scripted
        elif api in _PARTITIONED:
            stripped, errors = self._take_partition_faults(api, request, inter_broker)
            if stripped is not None:
                outcome = await self.handler(header, stripped)
            elif api == ApiKey.PRODUCE and request.acks == 0:
                outcome = NO_RESPONSE
            else:
                outcome = _empty_response(api)
        elif (fault := plan.take("error", api, self.broker_id, inter_broker)) is not None:
            outcome = error_answer(fault.code, INJECTED)
        else:
            outcome = await self.handler(header, request)
        delay = plan.take("delay", api, self.broker_id, inter_broker)
        if outcome is NO_RESPONSE or (delay is None and not errors):
            return outcome
        not_before = arrived + (delay.delay_s if delay is not None else 0.0)
        return _Later(outcome, not_before, lambda value: _with_errors(api, value, errors))

    def _take_partition_faults(
        self, api: ApiKey, request: Any, inter_broker: bool
    ) -> tuple[Any | None, dict[TopicPartition, ErrorCode]]:
        """`request` without its faulted partitions (None if none is left), and their
        error codes."""
        errors: dict[TopicPartition, ErrorCode] = {}
        kept_topics = []
        for topic in request.topics:
            name = _topic_name(topic)
            kept = []
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition)
                fault = self.plan.take("error", api, self.broker_id, inter_broker, tp)
                if fault is None:
                    kept.append(part)
                else:
                    errors[tp] = fault.code
            if kept:
                kept_topics.append(dataclasses.replace(topic, partitions=kept))
        if not errors:
            return request, errors
        if not kept_topics:
            return None, errors
        stripped = dataclasses.replace(request, topics=kept_topics)
        if api == ApiKey.FETCH:  # a partition in error answers the fetch at once, as in Kafka
            stripped = dataclasses.replace(stripped, max_wait_ms=0)
        return stripped, errors


def _sent_by_cluster(api: ApiKey, request: Any) -> bool:
    """Whether the cluster itself sent `request`: a follower's fetch or the controller's."""
    if api == ApiKey.FETCH:
        return request.replica_id >= 0
    return api in _CONTROLLER_REQUESTS


def _topic_name(topic: Any) -> str:
    return topic.topic if isinstance(topic, m.FetchTopic | m.FetchResponseTopic) else topic.name


def _error_partition(api: ApiKey, partition: int, code: ErrorCode) -> Any:
    if api == ApiKey.PRODUCE:
        return m.ProduceResponsePartition(
            partition=partition,
            error_code=code,
            base_offset=-1,
            log_append_time_ms=-1,
            log_start_offset=-1,
            error_message=INJECTED,
        )
    if api == ApiKey.FETCH:
        return m.FetchResponsePartition(
            partition=partition,
            error_code=code,
            high_watermark=-1,
            last_stable_offset=-1,
            log_start_offset=-1,
            records=b"",
        )
    return m.ListOffsetsResponsePartition(
        partition=partition, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1
    )


def _empty_response(api: ApiKey) -> Any:
    if api == ApiKey.PRODUCE:
        return m.ProduceResponse(topics=[], throttle_time_ms=0)
    if api == ApiKey.FETCH:
        return m.FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=[])
    return m.ListOffsetsResponse(topics=[])


_TOPIC_TYPES: dict[ApiKey, Callable[[str, list], Any]] = {
    ApiKey.PRODUCE: lambda name, parts: m.ProduceResponseTopic(name=name, partitions=parts),
    ApiKey.FETCH: lambda name, parts: m.FetchResponseTopic(topic=name, partitions=parts),
    ApiKey.LIST_OFFSETS: lambda name, parts: m.ListOffsetsResponseTopic(
        name=name, partitions=parts
    ),
}


def _with_errors(api: ApiKey, response: Any, errors: dict[TopicPartition, ErrorCode]) -> Any:
    """`response` with an error partition added for each of `errors`."""
    if not errors or not hasattr(response, "topics"):
        return response
    topics = {_topic_name(t): list(t.partitions) for t in response.topics}
    for tp, code in errors.items():
        topics.setdefault(tp.topic, []).append(_error_partition(api, tp.partition, code))
    make = _TOPIC_TYPES[api]
    return dataclasses.replace(response, topics=[make(n, ps) for n, ps in topics.items()])
