"""`tributary verifiable-producer` and `tributary verifiable-consumer`: Kafka's
VerifiableProducer and VerifiableConsumer, for system tests and chaos runs.

How it works: each command prints one JSON object per line on stdout, one per event, each
starting with `timestamp` (wall-clock ms) and `name`, with Kafka's field names, so a test
harness runs the command as a real process and reads what happened from its output:

verifiable-producer sends the values "0", "1", "2", ... (or "P.0", "P.1", ... with
`--value-prefix P`; keys "0".."N-1" in turn with `--repeating-keys N`, else none) at up
to `--throughput` records/s (-1: as fast as it can) until `--max-messages` (-1: until
SIGTERM/SIGINT). Events: `startup_complete`; `producer_send_success` (key, value, topic,
partition, offset, and `latency_ms`, the time from send to acknowledgement: Tributary's
addition); `producer_send_error` (key, value, topic, exception, message); at the end
`shutdown_complete` then `tool_data` (sent, acked, target_throughput, avg_throughput).
Unlike Kafka's tool (which sets retries=0) the producer keeps its own retry default
(retry until `--delivery-timeout-ms`); `--retries 0` gives Kafka's behaviour. On SIGTERM or
SIGINT it stops sending, waits up to `--delivery-timeout-ms` for what is in flight, and
reports the rest as `producer_send_error` (ProducerClosedError).

verifiable-consumer consumes `--topic`: with `--group-id` as a group member (events
`partitions_revoked` / `partitions_assigned` from the rebalance callbacks, and, unless
`--enable-autocommit`, a synchronous commit after every poll reported as
`offsets_committed` with offsets, success and error), without one by assigning itself
every partition (one `partitions_assigned`). Every poll that returns records prints
`records_consumed` (count, and per partition topic, partition, count, minOffset,
maxOffset); `--verbose` adds one `record_data` (key, value, topic, partition, offset) per
record. It stops after `--max-messages` records or on SIGTERM/SIGINT, then prints
`shutdown_complete`.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
from typing import Any

import trio

from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol.types import TopicPartition
from tools.commands.common import (
    add_bootstrap_option,
    bootstrap_of,
    client_options,
    non_negative_int,
    positive_int,
    run_async,
    text_or_none,
)
from tools.commands.produce import DEFAULT_DELIVERY_TIMEOUT_MS, delivery_timeout_ms
from tools.errors import CliError

# Records sent and not yet acknowledged: a producer far ahead of its acks waits (bounds
# the memory of the reporting tasks when the cluster stalls).
MAX_UNACKED = 20_000
# The consumer's poll timeout: also how soon it notices SIGTERM.
POLL_MS = 200


def register(subparsers) -> None:
    producer = subparsers.add_parser(
        "verifiable-producer",
        help="send numbered records, one JSON line per event (Kafka's VerifiableProducer)",
    )
    producer.add_argument("--topic", required=True, metavar="TOPIC")
    producer.add_argument(
        "--max-messages",
        type=int,
        default=-1,
        metavar="N",
        help="send this many records (-1, the default: until SIGTERM/SIGINT)",
    )
    producer.add_argument(
        "--throughput",
        type=int,
        default=-1,
        metavar="R",
        help="at most R records per second (-1, the default: no limit)",
    )
    producer.add_argument("--acks", choices=["0", "1", "all", "-1"], default="-1")
    producer.add_argument(
        "--value-prefix", type=int, metavar="P", help='values "P.0", "P.1", ... instead of "0", ...'
    )
    producer.add_argument(
        "--repeating-keys",
        type=positive_int,
        metavar="N",
        help='keys "0", "1", ..., "N-1", then "0" again (default: no keys)',
    )
    producer.add_argument(
        "--enable-idempotence",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Kafka's enable.idempotence (default: the producer's own default)",
    )
    producer.add_argument("--linger-ms", type=non_negative_int, default=0, metavar="MS")
    producer.add_argument("--retries", type=non_negative_int, metavar="N")
    producer.add_argument(
        "--delivery-timeout-ms",
        type=positive_int,
        metavar="MS",
        help=f"Kafka's delivery.timeout.ms (default {DEFAULT_DELIVERY_TIMEOUT_MS})",
    )
    add_bootstrap_option(producer)
    producer.set_defaults(handler=_verifiable_producer)

    consumer = subparsers.add_parser(
        "verifiable-consumer",
        help="consume a topic, one JSON line per event (Kafka's VerifiableConsumer)",
    )
    consumer.add_argument("--topic", required=True, metavar="TOPIC")
    consumer.add_argument(
        "--group-id", metavar="GROUP", help="consume as a member of this group (default: assign)"
    )
    consumer.add_argument(
        "--max-messages",
        type=int,
        default=-1,
        metavar="N",
        help="stop after N records (-1, the default: until SIGTERM/SIGINT)",
    )
    consumer.add_argument(
        "--session-timeout", type=positive_int, default=30_000, metavar="MS", dest="session_ms"
    )
    consumer.add_argument(
        "--enable-autocommit", action="store_true", help="auto-commit instead of a commit per poll"
    )
    consumer.add_argument(
        "--reset-policy", choices=["earliest", "latest", "none"], default="earliest"
    )
    consumer.add_argument(
        "--assignment-strategy", choices=["range", "roundrobin", "sticky"], default="range"
    )
    consumer.add_argument("--verbose", action="store_true", help="one record_data line per record")
    add_bootstrap_option(consumer)
    consumer.set_defaults(handler=_verifiable_consumer)


# --- output -----------------------------------------------------------------------------


def emit(name: str, **fields: Any) -> None:
    """One event line: timestamp and name first, as Kafka's tools print them."""
    line = json.dumps({"timestamp": int(time.time() * 1000), "name": name, **fields})
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _stop_on_signal(stop: trio.Event, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
        task_status.started()
        async for _ in received:
            stop.set()


# --- producer ---------------------------------------------------------------------------


def producer_options(args: argparse.Namespace) -> dict[str, Any]:
    """The producer's keyword arguments for these command-line options (the one place
    that maps them, `enable_idempotence` included)."""
    options: dict[str, Any] = {
        "acks": args.acks,
        "linger_ms": args.linger_ms,
        **client_options(args),
    }
    if args.retries is not None:
        options["retries"] = args.retries
    options["delivery_timeout_ms"] = delivery_timeout_ms(args, options)
    if args.enable_idempotence is not None:
        # Only when asked: the producer's own default applies otherwise.
        options["enable_idempotence"] = args.enable_idempotence
    return options


class _ProducerStats:
    def __init__(self) -> None:
        self.sent = 0
        self.acked = 0


def _value(args: argparse.Namespace, n: int) -> str:
    return f"{args.value_prefix}.{n}" if args.value_prefix is not None else str(n)


def _verifiable_producer(args: argparse.Namespace) -> int:
    if args.throughput == 0 or args.throughput < -1:
        raise CliError("--throughput must be a positive rate or -1 (no limit)", exit_code=2)
    bootstrap = bootstrap_of(args)
    options = producer_options(args)
    stats = _ProducerStats()
    limit = math.inf if args.max_messages < 0 else args.max_messages
    started = time.monotonic()

    async def await_ack(handle, key: str | None, value: str, sent_at: float, slots) -> None:
        try:
            metadata = await handle
        except Exception as exc:  # noqa: BLE001 - a failed delivery is an event to print
            emit(
                "producer_send_error",
                key=key,
                value=value,
                topic=args.topic,
                exception=type(exc).__name__,
                message=str(exc),
            )
        else:
            stats.acked += 1
            emit(
                "producer_send_success",
                key=key,
                value=value,
                topic=metadata.topic,
                partition=metadata.partition,
                offset=metadata.offset,
                latency_ms=round((time.monotonic() - sent_at) * 1000, 3),
            )
        finally:
            slots.release()

    async def send_all(producer, stop: trio.Event, acks: trio.Nursery) -> None:
        slots = trio.Semaphore(MAX_UNACKED)
        n = 0
        first_send = time.monotonic()  # the rate counts from here, not from bootstrap
        while n < limit and not stop.is_set():
            key = None if args.repeating_keys is None else str(n % args.repeating_keys)
            value = _value(args, n)
            await slots.acquire()
            sent_at = time.monotonic()
            try:
                handle = await producer.send(args.topic, value, key=key)
            except Exception as exc:  # noqa: BLE001 - reported like Kafka's tool
                slots.release()
                emit(
                    "producer_send_error",
                    key=key,
                    value=value,
                    topic=args.topic,
                    exception=type(exc).__name__,
                    message=str(exc),
                )
            else:
                acks.start_soon(await_ack, handle, key, value, sent_at, slots)
            n += 1
            stats.sent = n
            if args.throughput > 0:
                delay = first_send + n / args.throughput - time.monotonic()
                if delay > 0:
                    with trio.move_on_after(delay):
                        await stop.wait()
            else:
                await trio.lowlevel.checkpoint()

    async def produce() -> None:
        signals = _Signals()
        async with trio.open_nursery() as outer:
            await outer.start(signals.watch)
            async with open_producer(bootstrap, **options) as producer:
                emit("startup_complete")
                async with trio.open_nursery() as acks:
                    await send_all(producer, signals.first, acks)
                    # What is in flight gets the delivery timeout (a second signal: none).
                    with trio.move_on_after(options["delivery_timeout_ms"] / 1000 + 1) as flush:
                        signals.on_second = flush
                        await producer.flush()
                    producer.abort("not delivered: the verifiable producer stopped")
            outer.cancel_scope.cancel()
        emit("shutdown_complete")
        elapsed = max(time.monotonic() - started, 1e-9)
        emit(
            "tool_data",
            sent=stats.sent,
            acked=stats.acked,
            target_throughput=args.throughput,
            avg_throughput=stats.acked / elapsed,
        )

    run_async(produce)
    return 0


class _Signals:
    """SIGTERM/SIGINT: the first sets `first` (stop sending), the second cancels
    `on_second` (stop waiting for acknowledgements)."""

    def __init__(self) -> None:
        self.first = trio.Event()
        self.on_second: trio.CancelScope | None = None

    async def watch(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
            task_status.started()
            async for _ in received:
                if self.first.is_set() and self.on_second is not None:
                    self.on_second.cancel()
                self.first.set()


# --- consumer ---------------------------------------------------------------------------


def _partitions_json(partitions) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic, "partition": tp.partition}
        for tp in sorted(partitions, key=lambda t: (t.topic, t.partition))
    ]


def _verifiable_consumer(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)
    config: dict[str, Any] = {
        "auto_offset_reset": args.reset_policy,
        **client_options(args),
    }
    if args.group_id is not None:
        config.update(
            group_id=args.group_id,
            enable_auto_commit=args.enable_autocommit,
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=max(100, args.session_ms // 3),
            partition_assignment_strategy=args.assignment_strategy,
        )
    limit = math.inf if args.max_messages < 0 else args.max_messages

    async def consume() -> None:
        stop = trio.Event()
        consumed = 0
        async with trio.open_nursery() as outer:
            await outer.start(_stop_on_signal, stop)
            async with open_consumer(bootstrap, **config) as consumer:
                emit("startup_complete")
                if args.group_id is not None:
                    consumer.subscribe(
                        args.topic,
                        on_assigned=lambda tps: emit(
                            "partitions_assigned", partitions=_partitions_json(tps)
                        ),
                        on_revoked=lambda tps: emit(
                            "partitions_revoked", partitions=_partitions_json(tps)
                        ),
                    )
                else:
                    numbers = await consumer.partitions_for(args.topic)
                    tps = [TopicPartition(args.topic, p) for p in numbers]
                    consumer.assign(tps)
                    emit("partitions_assigned", partitions=_partitions_json(tps))
                while consumed < limit and not stop.is_set():
                    records = await consumer.poll(POLL_MS)
                    if not records:
                        continue
                    records = records[: int(min(len(records), limit - consumed))]
                    consumed += len(records)
                    _report_records(args, records)
                    if args.group_id is not None and not args.enable_autocommit:
                        await _commit(consumer, records)
            outer.cancel_scope.cancel()
        emit("shutdown_complete")

    run_async(consume)
    return 0


def _report_records(args: argparse.Namespace, records) -> None:
    summary: dict[TopicPartition, list[int]] = {}
    for record in records:
        tp = TopicPartition(record.topic, record.partition)
        span = summary.setdefault(tp, [0, record.offset, record.offset])
        span[0] += 1
        span[1] = min(span[1], record.offset)
        span[2] = max(span[2], record.offset)
        if args.verbose:
            emit(
                "record_data",
                key=text_or_none(record.key),
                value=text_or_none(record.value),
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
            )
    emit(
        "records_consumed",
        count=len(records),
        partitions=[
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "count": count,
                "minOffset": low,
                "maxOffset": high,
            }
            for tp, (count, low, high) in summary.items()
        ],
    )


async def _commit(consumer, records) -> None:
    offsets: dict[TopicPartition, int] = {}
    for record in records:
        tp = TopicPartition(record.topic, record.partition)
        offsets[tp] = max(offsets.get(tp, 0), record.offset + 1)
    error = None
    try:
        await consumer.commit(offsets)
    except Exception as exc:  # noqa: BLE001 - a failed commit is an event to print
        error = f"{type(exc).__name__}: {exc}"
    emit(
        "offsets_committed",
        offsets=[
            {"topic": tp.topic, "partition": tp.partition, "offset": offset}
            for tp, offset in offsets.items()
        ],
        success=error is None,
        **({"error": error} if error is not None else {}),
    )


__all__ = ["emit", "producer_options", "register"]
