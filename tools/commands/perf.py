"""`tributary perf produce|consume|e2e`: Kafka's perf tools, to measure a cluster.

- `perf produce` is kafka-producer-perf-test: sends `--num-records` records of
  `--record-size` bytes at `--throughput` records/s (-1: as fast as possible), prints a
  line every `--reporting-interval` ms and a final "N records sent, X records/sec
  (Y MB/sec), A ms avg latency, M ms max latency, p50/p95/p99/p99.9". Records are
  handed to the producer with `send_many`, a batch's worth at a time (`--batch-size`
  over `--record-size`), or as many as `--throughput` lets go at that moment; a record's
  latency runs from its hand-over to its acknowledgement, as from Kafka's `send()` to
  its callback. Acknowledgements are collected per partition: a partition's batches
  complete in order (the producer keeps one in flight per partition), so one task per
  partition awaits the oldest run of records (`DeliveryHandles.runs`: those sharing a
  batch, and so their outcome) and then takes every run already done behind it.
- `perf consume` is kafka-consumer-perf-test: reads `--messages` records from the
  beginning (or `--from-latest`) with a group (`--group`, subscribing) or without one
  (assigning every partition), taking the records as column batches
  (`Consumer.poll_batches`: no object per record), and prints Kafka's CSV header and
  line (start/end time, MB, MB/s, records, records/s, rebalance time, fetch time and
  the rates over it).
- `perf e2e` is Kafka's EndToEndLatency, rate-driven: an acks=all producer sends at
  `--throughput` records/s, each value starting with its send time, and a consumer in the
  same process reads them back; each record's latency is receive time minus send time.
  One uncounted record per partition goes end to end first (producer id, connections,
  a new topic's first leader and ISR), so the figures are the steady state's.

All three print one JSON object per line instead with `--json`. The arithmetic
(percentiles, windows, the rate limiter, which sleeps as Kafka's ThroughputThrottler does:
never less than 2 ms) is `tools/perf_stats.py`.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import string
import struct
import sys
import time
from collections import deque
from datetime import datetime

import trio

from client.admin import open_admin
from client.consumer import open_consumer
from client.metadata import UnknownTopicError
from client.producer import open_producer
from client.protocol.types import TopicPartition
from tools.commands.common import (
    add_bootstrap_option,
    bootstrap_of,
    client_options,
    positive_int,
    run_async,
)
from tools.commands.producer_props import add_producer_props, producer_props
from tools.errors import CliError
from tools.perf_stats import LatencyStats, Summary, Throttler, percentiles

E2E_STAMP = struct.Struct(">q")  # the send time, perf_counter_ns, at the head of each value
DEFAULT_CONSUME_TIMEOUT_MS = 10_000  # kafka-consumer-perf-test's --timeout


def register(subparsers) -> None:
    perf = subparsers.add_parser("perf", help="measure a cluster (Kafka's perf tools)")
    sub = perf.add_subparsers(dest="perf_command", metavar="TOOL", required=True)

    produce = sub.add_parser("produce", help="producer throughput and latency")
    _topic_and_count(produce, "--num-records")
    produce.add_argument("--record-size", type=positive_int, default=100, metavar="BYTES")
    produce.add_argument(
        "--throughput",
        type=float,
        required=True,
        metavar="RECORDS/S",
        help="records per second to send (-1: as fast as possible)",
    )
    produce.add_argument("--acks", choices=["0", "1", "all", "-1"], default="all")
    produce.add_argument("--batch-size", type=positive_int, default=16_384, metavar="BYTES")
    produce.add_argument("--linger-ms", type=int, default=5, metavar="MS")
    produce.add_argument("--compression", choices=["none", "gzip", "lz4", "zstd"], default="none")
    add_producer_props(produce)
    _partitions_option(produce)
    _common_options(produce)
    produce.set_defaults(handler=lambda args: _run_measured(_perf_produce, args))

    consume = sub.add_parser("consume", help="consumer throughput")
    _topic_and_count(consume, "--messages")
    consume.add_argument("--group", metavar="GROUP", help="consume in this group (subscribing)")
    consume.add_argument("--from-latest", action="store_true", help="start at the end")
    consume.add_argument(
        "--timeout",
        type=positive_int,
        default=DEFAULT_CONSUME_TIMEOUT_MS,
        metavar="MS",
        help="give up after this long without a record (default 10000)",
    )
    consume.add_argument("--fetch-size", type=positive_int, default=1_048_576, metavar="BYTES")
    _common_options(consume)
    consume.set_defaults(handler=lambda args: _run_measured(_perf_consume, args))

    e2e = sub.add_parser("e2e", help="end-to-end latency (acks=all producer to consumer)")
    _topic_and_count(e2e, "--num-records")
    e2e.add_argument("--throughput", type=float, default=1000, metavar="RECORDS/S")
    e2e.add_argument("--record-size", type=positive_int, default=100, metavar="BYTES")
    e2e.add_argument("--acks", choices=["0", "1", "all", "-1"], default="all")
    e2e.add_argument(
        "--timeout",
        type=positive_int,
        default=DEFAULT_CONSUME_TIMEOUT_MS,
        metavar="MS",
        help="give up after this long without a record (default 10000)",
    )
    _partitions_option(e2e)
    _common_options(e2e)
    e2e.set_defaults(handler=lambda args: _run_measured(_perf_e2e, args))


def _run_measured(main, args) -> int:
    """Run a perf tool with the objects of start-up frozen out of the garbage collector's
    sight (`gc.freeze`): its collections then walk only what the run allocates, and the
    tool's own pauses stay out of the latencies it reports."""
    gc.collect()
    gc.freeze()
    return run_async(main, args)


def _topic_and_count(parser: argparse.ArgumentParser, count_flag: str) -> None:
    parser.add_argument("--topic", required=True, metavar="TOPIC")
    parser.add_argument(count_flag, type=positive_int, required=True, metavar="N", dest="count")


def _partitions_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--partitions",
        type=positive_int,
        metavar="P",
        help="create the topic with P partitions if it does not exist",
    )
    parser.add_argument(
        "--replication-factor",
        type=positive_int,
        metavar="RF",
        help="replication factor of a topic created by --partitions (default: the broker's)",
    )


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reporting-interval",
        type=positive_int,
        default=5_000,
        metavar="MS",
        help="print progress this often (default 5000)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    add_bootstrap_option(parser)


def _emit(args, text: str, record: dict) -> None:
    print(json.dumps(record) if args.json else text, flush=True)


async def _ensure_topic(args, bootstrap: str) -> None:
    """With --partitions: create the topic unless it exists; without: it must exist."""
    async with open_admin(bootstrap, **client_options(args)) as admin:
        if args.topic in await admin.list_topics():
            return
        if getattr(args, "partitions", None) is None:
            raise CliError(f"topic {args.topic!r} does not exist (create it, or give --partitions)")
        await admin.create_topic(args.topic, args.partitions, args.replication_factor or -1)


def _payload(size: int) -> bytes:
    """Random uppercase letters, as kafka-producer-perf-test sends without a payload file."""
    rng = random.Random(size)
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(size)).encode()


def _acks(text: str) -> int | str:
    return "all" if text in ("all", "-1") else int(text)


# --- perf produce -----------------------------------------------------------------------


class _Acks:
    """Records awaiting acknowledgement, per partition, in send order, as runs of records
    that share a batch (and so their outcome)."""

    def __init__(self, stats: LatencyStats, size: int) -> None:
        self.stats = stats
        self.size = size
        self.queues: dict[TopicPartition, deque] = {}
        self.arrived: dict[TopicPartition, trio.Event] = {}
        self.failed = 0
        self.first_error: str | None = None
        self.outstanding = 0
        self.all_done = trio.Event()
        self.sending_finished = False

    def add(self, nursery: trio.Nursery, sent_at: float, handle, count: int = 1) -> None:
        """`count` records handed over at `sent_at`, all in `handle`'s batch."""
        tp = handle.topic_partition
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
            self.arrived[tp] = trio.Event()
            nursery.start_soon(self._collect, tp)
        queue.append((sent_at, handle, count))
        self.outstanding += count
        self.arrived[tp].set()

    async def _collect(self, tp: TopicPartition) -> None:
        queue = self.queues[tp]
        while True:
            if not queue:
                self.arrived[tp] = event = trio.Event()
                await event.wait()
                continue
            _, head, _ = queue[0]
            try:
                await head.wait()
            except Exception:  # noqa: BLE001 - counted below, by record
                pass
            now = time.perf_counter()
            while queue and queue[0][1].done():
                sent_at, handle, count = queue.popleft()
                error = handle.exception()
                if error is None:
                    self.stats.record_many((now - sent_at) * 1000.0, count, self.size)
                else:
                    self.failed += count
                    if self.first_error is None:
                        self.first_error = f"{type(error).__name__}: {error}"
                self.outstanding -= count
            if self.sending_finished and self.outstanding == 0:
                self.all_done.set()

    def finish(self) -> None:
        self.sending_finished = True
        if self.outstanding == 0:
            self.all_done.set()


async def _report_windows(args, stats: LatencyStats) -> None:
    while True:
        await trio.sleep(args.reporting_interval / 1000)
        window = stats.close_window(time.perf_counter())
        _emit(args, window.line(), {"type": "window", **window.as_dict()})


async def _perf_produce(args) -> int:
    bootstrap = bootstrap_of(args)
    await _ensure_topic(args, bootstrap)
    value = _payload(args.record_size)
    producer_options = dict(
        acks=_acks(args.acks),
        batch_size=args.batch_size,
        linger_ms=args.linger_ms,
        compression_type=args.compression,
        **client_options(args),
        **producer_props(args),
    )
    # Records are handed over a batch's worth at a time (fewer when the throughput limit
    # says fewer are due): each one's latency still runs from its hand-over to its ack.
    chunk = [value] * max(1, args.batch_size // args.record_size)
    async with open_producer(bootstrap, **producer_options) as producer:
        started = time.perf_counter()
        stats = LatencyStats(args.count, started, args.reporting_interval / 1000)
        acks = _Acks(stats, args.record_size)
        throttler = Throttler(args.throughput, started)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_report_windows, args, stats)
            sent = 0
            while sent < args.count:
                delay = throttler.delay(sent, time.perf_counter())
                if delay > 0:
                    await trio.sleep(delay)
                sent_at = time.perf_counter()
                count = _due(throttler, sent, min(len(chunk), args.count - sent), sent_at)
                values = chunk if count == len(chunk) else chunk[:count]
                for handle, run in (await producer.send_many(args.topic, values)).runs():
                    acks.add(nursery, sent_at, handle, run)
                sent += count
                await trio.lowlevel.checkpoint()  # let the sender and collectors run
            await producer.flush()
            acks.finish()
            await acks.all_done.wait()
            nursery.cancel_scope.cancel()
        total = stats.total(time.perf_counter())
    _emit(args, total.line(), {"type": "total", "failed": acks.failed, **total.as_dict()})
    if acks.failed:
        print(f"{acks.failed} records failed; first: {acks.first_error}", file=sys.stderr)
        return 1
    return 0


def _due(throttler: Throttler, sent: int, limit: int, now: float) -> int:
    """How many records from number `sent` on (at most `limit`, at least one) the
    throughput limit lets go at `now`."""
    if throttler.rate <= 0:
        return limit
    count = 1
    while count < limit and throttler.delay(sent + count, now) <= 0:
        count += 1
    return count


# --- perf consume -----------------------------------------------------------------------


def _kafka_time(epoch_s: float) -> str:
    """kafka-consumer-perf-test's date format, yyyy-MM-dd HH:mm:ss:SSS."""
    moment = datetime.fromtimestamp(epoch_s)
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{moment.microsecond // 1000:03d}"


CONSUME_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


async def _perf_consume(args) -> int:
    bootstrap = bootstrap_of(args)
    options = dict(
        auto_offset_reset="latest" if args.from_latest else "earliest",
        max_poll_records=10_000,
        max_partition_fetch_bytes=args.fetch_size,
        **client_options(args),
    )
    if args.group:
        options["group_id"] = args.group
    start_wall = time.time()
    started = time.perf_counter()
    async with open_consumer(bootstrap, **options) as consumer:
        try:
            partitions = await consumer.partitions_for(args.topic)
        except UnknownTopicError:
            raise CliError(f"topic {args.topic!r} does not exist") from None
        if args.group:
            consumer.subscribe([args.topic])
        else:
            consumer.assign([TopicPartition(args.topic, p) for p in partitions])
        records = size = 0
        first_record_at: float | None = None
        last_record_at = time.perf_counter()
        while records < args.count:
            batches = await consumer.poll_batches(200)
            now = time.perf_counter()
            if not batches:
                if (now - last_record_at) * 1000 > args.timeout:
                    print(
                        "WARNING: exiting before consuming the expected number of records: "
                        f"timeout ({args.timeout} ms) exceeded",
                        file=sys.stderr,
                    )
                    break
                continue
            if first_record_at is None:
                first_record_at = now
            last_record_at = now
            for batch in batches:
                records += len(batch)
                size += _column_bytes(batch.values) + _column_bytes(batch.keys)
        ended = time.perf_counter()
    end_wall = start_wall + (ended - started)
    seconds = ended - started
    # Rebalance time: from start until the first record arrived (the join and first fetch).
    rebalance_s = (first_record_at - started) if first_record_at is not None else seconds
    fetch_s = max(seconds - rebalance_s, 1e-9)
    mb = size / (1024 * 1024)
    row = {
        "start.time": _kafka_time(start_wall),
        "end.time": _kafka_time(end_wall),
        "data.consumed.in.MB": round(mb, 4),
        "MB.sec": round(mb / seconds, 4) if seconds else 0.0,
        "data.consumed.in.nMsg": records,
        "nMsg.sec": round(records / seconds, 4) if seconds else 0.0,
        "rebalance.time.ms": round(rebalance_s * 1000),
        "fetch.time.ms": round(fetch_s * 1000),
        "fetch.MB.sec": round(mb / fetch_s, 4),
        "fetch.nMsg.sec": round(records / fetch_s, 4),
    }
    if args.json:
        print(json.dumps({"type": "total", **row}), flush=True)
    else:
        print(CONSUME_HEADER)
        print(", ".join(str(value) for value in row.values()), flush=True)
    return 0 if records >= args.count else 1


def _column_bytes(column: list[bytes | None]) -> int:
    """The bytes of a key or value column (nulls count 0)."""
    try:
        # A null raises TypeError: cheaper than looking for one first.
        return sum(map(len, column))  # type: ignore[arg-type]
    except TypeError:  # a null
        return sum(len(data) for data in column if data is not None)


# --- perf e2e ---------------------------------------------------------------------------


async def _perf_e2e(args) -> int:
    bootstrap = bootstrap_of(args)
    await _ensure_topic(args, bootstrap)
    padding = _payload(max(0, args.record_size - E2E_STAMP.size))
    async with (
        open_consumer(bootstrap, max_poll_records=10_000, **client_options(args)) as consumer,
        open_producer(
            bootstrap, acks=_acks(args.acks), linger_ms=0, **client_options(args)
        ) as producer,
    ):
        partitions = await consumer.partitions_for(args.topic)
        tps = [TopicPartition(args.topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        for tp in tps:  # positions resolved before the first record is sent
            await consumer.position(tp)
        await _warm_up(producer, consumer, tps, args.timeout)
        started = time.perf_counter()
        stats = LatencyStats(args.count, started, args.reporting_interval / 1000)
        done = trio.Event()
        failures: list[str] = []

        async def consume() -> None:
            last = time.perf_counter()
            while stats.count < args.count:
                batch = await consumer.poll(200)
                now = time.perf_counter()
                if not batch:
                    if (now - last) * 1000 > args.timeout:
                        failures.append(f"no record for {args.timeout} ms")
                        break
                    continue
                last = now
                now_ns = time.perf_counter_ns()
                for record in batch:
                    value = record.value or b""
                    if len(value) >= E2E_STAMP.size:
                        (sent_ns,) = E2E_STAMP.unpack_from(value)
                        stats.record((now_ns - sent_ns) / 1e6, len(value))
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            nursery.start_soon(_report_windows, args, stats)
            throttler = Throttler(args.throughput, time.perf_counter())
            for sent in range(args.count):
                delay = throttler.delay(sent, time.perf_counter())
                if delay > 0:
                    await trio.sleep(delay)
                await producer.send(args.topic, E2E_STAMP.pack(time.perf_counter_ns()) + padding)
            await producer.flush()
            await done.wait()
            nursery.cancel_scope.cancel()
    total = stats.total(time.perf_counter())
    _emit_e2e(args, total)
    if failures:
        print(f"error: {failures[0]} ({stats.count} of {args.count} received)", file=sys.stderr)
        return 1
    return 0


async def _warm_up(producer, consumer, tps: list[TopicPartition], timeout_ms: int) -> None:
    """One uncounted record to every partition, end to end, before the clock starts: the
    producer id, the connections and the consumer's first fetch are then behind us, as
    is a new topic's first leader and ISR (they cost the first records tens of ms)."""
    for tp in tps:
        await (await producer.send(tp.topic, b"", partition=tp.partition))
    waiting = set(tps)
    with trio.move_on_after(timeout_ms / 1000):
        while waiting:
            for record in await consumer.poll(200):
                waiting.discard(TopicPartition(record.topic, record.partition))
        return
    raise CliError(f"the warm-up records did not come back within {timeout_ms} ms")


def _emit_e2e(args, total: Summary) -> None:
    points = total.percentiles_ms or percentiles([])
    if args.json:
        print(json.dumps({"type": "total", **total.as_dict()}), flush=True)
        return
    print(total.line(noun="received"))
    print(f"Avg latency: {total.avg_latency_ms:.4f} ms")
    print(
        "Percentiles: "
        + ", ".join(f"{p * 100:g}th = {value:.3f}" for p, value in points.items())
        + " ms"
    )
