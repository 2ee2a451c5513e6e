"""A broker's `GET /metrics`, scraped over HTTP as Prometheus would and parsed with
prometheus_client's own parser, after real produce and fetch traffic.

The broker is a real `BrokerServer` in process (`tests.unit.broker_harness`: leader of
`t-0`, with the real controller) serving real loopback TCP and its own metrics endpoint,
so request counts and latency histograms are fed exactly as in production.
"""

from __future__ import annotations

import trio
from prometheus_client.parser import text_string_to_metric_families

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.records import Record, build_batch
from tests.unit.broker_harness import TOPIC, running_broker

WITH_METRICS = {"metrics.port": "0"}

RECORDS_PER_BATCH = 4
BATCHES = 3


async def http_get(port: int, path: str) -> tuple[int, dict[str, str], str]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        data = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body.decode()


async def produce_and_fetch(port: int) -> None:
    async with open_connection("127.0.0.1", port) as conn:
        for b in range(BATCHES):
            batch = build_batch(
                [
                    Record(key=b"k", value=f"record {b}.{i}".encode(), timestamp_ms=0)
                    for i in range(RECORDS_PER_BATCH)
                ]
            )
            response = await conn.request(
                m.ProduceRequest(
                    acks=1,
                    timeout_ms=5000,
                    topics=[
                        m.ProduceTopic(
                            name=TOPIC, partitions=[m.ProducePartition(partition=0, records=batch)]
                        )
                    ],
                )
            )
            assert response.topics[0].partitions[0].error_code == 0
        await conn.request(
            m.FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[
                    m.FetchTopic(
                        topic=TOPIC,
                        partitions=[
                            m.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
            )
        )


def samples_by_family(text: str) -> dict[str, tuple[str, list]]:
    """family name -> (type, samples)."""
    return {f.name: (f.type, f.samples) for f in text_string_to_metric_families(text)}


def value(samples, name: str, **labels) -> float:
    for sample in samples:
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    raise AssertionError(f"no sample {name}{labels} in {samples}")


async def test_metrics_endpoint_serves_prometheus_text_after_traffic():
    async with running_broker(transport="tcp", settings=WITH_METRICS) as (broker, _):
        await produce_and_fetch(broker.port)

        status, headers, body = await http_get(broker.server.metrics_port, "/metrics")
        assert status == 200
        assert headers["content-type"].startswith("text/plain")
        assert int(headers["content-length"]) == len(body.encode())
        families = samples_by_family(body)

        # Replication health: the harness broker leads t-0 alone (RF 1), nothing lags.
        assert families["tributary_under_replicated_partitions"][0] == "gauge"
        under = families["tributary_under_replicated_partitions"][1]
        assert value(under, "tributary_under_replicated_partitions") == 0
        # Running totals are counters (the parser strips `_total` from their families).
        assert families["tributary_isr_shrinks"][0] == "counter"
        isr_shrinks = families["tributary_isr_shrinks"][1]
        assert value(isr_shrinks, "tributary_isr_shrinks_total") == 0
        leaders = families["tributary_leader_count"][1]
        assert value(leaders, "tributary_leader_count") == 1

        # Purgatories, one series per delayed operation type.
        purgatory = families["tributary_purgatory_size"][1]
        assert {s.labels["delayed_operation"] for s in purgatory} >= {"Produce", "Fetch"}

        # Per-partition offsets: every produced record is below LEO and (RF 1) below HW.
        produced = BATCHES * RECORDS_PER_BATCH
        leo = families["tributary_log_end_offset"][1]
        hw = families["tributary_high_watermark"][1]
        assert value(leo, "tributary_log_end_offset", topic=TOPIC, partition="0") == produced
        assert value(hw, "tributary_high_watermark", topic=TOPIC, partition="0") == produced

        # Throughput counters.
        messages_in = families["tributary_messages_in"][1]
        assert value(messages_in, "tributary_messages_in_total") == produced
        assert value(families["tributary_bytes_in"][1], "tributary_bytes_in_total") > 0

        # Request latency: a histogram per request type, counting every request served.
        kind, latency = families["tributary_request_latency_seconds"]
        assert kind == "histogram"
        count = value(latency, "tributary_request_latency_seconds_count", request="Produce")
        assert count == BATCHES
        assert value(latency, "tributary_request_latency_seconds_count", request="Fetch") == 1
        inf = value(
            latency, "tributary_request_latency_seconds_bucket", request="Produce", le="+Inf"
        )
        assert inf == BATCHES
        buckets = [
            s.value
            for s in latency
            if s.name.endswith("_bucket") and s.labels["request"] == "Produce"
        ]
        assert buckets == sorted(buckets)  # cumulative, as Prometheus requires
        # The parser strips `_total` from counter families.
        requests = families["tributary_requests"][1]
        assert value(requests, "tributary_requests_total", request="Produce") == BATCHES


async def test_metrics_endpoint_answers_other_paths_and_garbage_without_dying():
    async with running_broker(transport="tcp", settings=WITH_METRICS) as (broker, _):
        port = broker.server.metrics_port
        status, _, _ = await http_get(port, "/nope")
        assert status == 404
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(b"\r\n\r\n")
            with trio.fail_after(10):
                answer = await stream.receive_some(1024)
        assert answer.startswith(b"HTTP/1.1 400")
        status, _, body = await http_get(port, "/metrics")  # still serving
        assert status == 200 and "tributary_under_replicated_partitions" in body
