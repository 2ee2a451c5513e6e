"""What the Kafka listener's bounds check (broker/kafka/bounds.py) costs per request.

Three requests as Kafka clients send them, each framed as the listener receives it:
a Produce v9 carrying one 1 MiB records field, a Fetch v12 of 1,000 partitions (10
topics of 100) and a Metadata v12 of 100 topics. For each: microseconds per request of
`check_bounds` (the walk over counts and lengths, plan cached), of kio's decode of the
same body, and of the listener's whole `next_request` (framing, header, check, decode),
best of ROUNDS runs of N requests, in one Python thread. Prints figures only (no table
row): `python -m tests.bench kafka_bounds`.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader
from kio.static.primitive import Records

from broker.kafka import versions
from broker.kafka.bounds import check_bounds
from broker.kafka.wire import KafkaRequest, KafkaServerConnection
from tests.unit.test_kafka_wire import encode_request

ROUNDS = 5
CLIENT_ID = "bench"


def _produce() -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            TopicProduceData(
                name="bench",
                partition_data=(PartitionProduceData(index=0, records=Records(b"r" * (1 << 20))),),
            ),
        ),
    )


def _fetch() -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=tuple(
            FetchTopic(
                topic=f"topic-{t}",
                partitions=tuple(
                    FetchPartition(
                        partition=p,
                        current_leader_epoch=3,
                        fetch_offset=123_456,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for p in range(100)
                ),
            )
            for t in range(10)
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _metadata() -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(
            MetadataRequestTopic(topic_id=uuid.UUID(int=t + 1), name=f"topic-{t}")
            for t in range(100)
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def _per_request_us(run: Callable[[], object], n: int) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(n):
            run()
        best = min(best, time.perf_counter() - started)
    return best / n * 1e6


def _measure(label: str, request: Any, n: int) -> None:
    cls = type(request)
    frame = encode_request(request, client_id=CLIENT_ID)
    body = 4 + 8 + 2 + len(CLIENT_ID) + (1 if cls.__flexible__ else 0)
    reader = entity_reader(cls)
    assert reader(frame, body)[0] == request
    assert check_bounds(cls, frame, body) == len(frame)

    def listener() -> None:
        conn = KafkaServerConnection(supported=versions.supported())
        conn.receive_data(frame)
        assert isinstance(conn.next_request(), KafkaRequest)

    check = _per_request_us(lambda: check_bounds(cls, frame, body), n)
    decode = _per_request_us(lambda: reader(frame, body), n)
    whole = _per_request_us(listener, n)
    print(
        f"{label} ({len(frame):,} bytes): check_bounds {check:.1f} us, kio decode "
        f"{decode:.1f} us, listener next_request {whole:.1f} us "
        f"(check = {check / decode:.2f} x decode)",
        flush=True,
    )


def main() -> None:
    _measure("Produce v9, one 1 MiB records", _produce(), 2000)
    _measure("Fetch v12, 1,000 partitions", _fetch(), 100)
    _measure("Metadata v12, 100 topics", _metadata(), 500)


if __name__ == "__main__":
    main()
