"""`tributary produce TOPIC`: one record per stdin line, like kafka-console-producer.sh.

How it works: stdin is read in chunks on a worker thread (so the producer's sender keeps
running while we wait for input) and split into lines; each line becomes a record
(`key<SEP>value` with `--key-separator`). A reporter task awaits the delivery handles in
the order the lines came and, with `--report`, prints one JSON line per acknowledged
record. At the end a summary goes to stderr; if any record failed the command exits 1
with the first reason. Retries are reported on stderr as they happen, one line per
distinct reason (the first time it occurs), so a stuck produce says why.

Ctrl-C (SIGINT) stops reading at once, even while stdin (a terminal or an open pipe)
has nothing to read: the read runs on a worker thread that is abandoned; after the input
ended, it stops the wait for deliveries (a partition without a leader) the same way. What was read
gets up to `INTERRUPT_FLUSH_S` to be delivered; whatever is still unacknowledged then
is abandoned and counted as "not delivered", and the command exits 130. A second Ctrl-C
abandons at once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import trio

from client.producer import DeliveryHandle, ProducerClosedError, open_producer
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
from tools.commands.produce_txn import produce_transactional
from tools.commands.producer_props import add_producer_props, producer_props
from tools.commands.record_format import unescape
from tools.errors import CliError

# Bytes read from stdin per call: big enough that piping a file costs few thread hops.
READ_CHUNK = 64 * 1024
# Records sent but not yet reported: bounds memory if acks lag behind reading.
MAX_UNREPORTED = 10_000
# After Ctrl-C: how long records already read may take to be acknowledged before they are
# abandoned (the whole command must be gone within 2 s of the signal).
INTERRUPT_FLUSH_S = 1.0
DEFAULT_DELIVERY_TIMEOUT_MS = 120_000  # Kafka's delivery.timeout.ms
DEFAULT_REQUEST_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "produce", help="send stdin lines as records (one record per line)"
    )
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument(
        "--acks",
        choices=["0", "1", "all", "-1"],
        help="0, 1 or all (default 1; all with --transactional-id)",
    )
    parser.add_argument("--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE")
    parser.add_argument("--partition", type=non_negative_int, metavar="P")
    parser.add_argument("--compression", choices=["none", "gzip", "lz4", "zstd"], default="none")
    parser.add_argument("--batch-size", type=positive_int, default=16_384, metavar="BYTES")
    parser.add_argument("--linger-ms", type=non_negative_int, default=0, metavar="MS")
    add_producer_props(parser)
    parser.add_argument(
        "--separator",
        metavar="SEP",
        help="records are separated by SEP instead of lines, taken byte for byte "
        "(escapes \\n \\t \\0 work: '\\0' for binary values)",
    )
    parser.add_argument(
        "--delivery-timeout-ms",
        type=positive_int,
        metavar="MS",
        help="give up on a record this long after it was read, retries included "
        f"(Kafka's delivery.timeout.ms; default {DEFAULT_DELIVERY_TIMEOUT_MS})",
    )
    parser.add_argument(
        "--report", action="store_true", help="print one JSON line per acknowledged record"
    )
    parser.add_argument(
        "--enable-idempotence",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="idempotent producer: retries are never written twice (Kafka's "
        "enable.idempotence; on by default with --acks all, and requires it)",
    )
    parser.add_argument(
        "--transactional-id",
        metavar="ID",
        help="write in transactions with this transactional id (tools/commands/produce_txn.py)",
    )
    parser.add_argument(
        "--transaction-size",
        type=positive_int,
        metavar="N",
        help="with --transactional-id: commit every N records (default: all in one)",
    )
    parser.add_argument(
        "--abort",
        action="store_true",
        help="with --transactional-id: abort each transaction instead of committing it",
    )
    add_bootstrap_option(parser)
    parser.set_defaults(handler=_produce)


def _stdin() -> BinaryIO:
    stream: Any = sys.stdin
    return getattr(stream, "buffer", stream)


async def read_lines(stream: BinaryIO, separator: bytes | None = None) -> AsyncIterator[bytes]:
    """Lines of `stream` without their line ending (`\n` or `\r\n`), read on a worker
    thread; with `separator`, the pieces between separators, byte for byte."""
    read = getattr(stream, "read1", stream.read)
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is not None:
        # The file descriptor itself, not the buffered reader: a read abandoned on Ctrl-C
        # would hold the reader's lock, and the interpreter aborts at exit waiting for it.
        def read(size: int, fd: int = fd) -> bytes:
            return os.read(fd, size)

    pending = b""
    while True:
        # Abandoned on cancellation (Ctrl-C): a blocked read cannot be interrupted, and the
        # worker thread must not keep the command alive.
        chunk = await trio.to_thread.run_sync(read, READ_CHUNK, abandon_on_cancel=True)
        if isinstance(chunk, str):
            chunk = chunk.encode()
        if not chunk:
            break
        lines = (pending + chunk).split(separator or b"\n")
        pending = lines.pop()
        for line in lines:
            yield line[:-1] if separator is None and line.endswith(b"\r") else line
    if pending:
        yield pending[:-1] if separator is None and pending.endswith(b"\r") else pending


class _Outcome:
    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.first_failure: str | None = None
        self.interrupted = False
        self.abandoned = 0  # records read but not delivered because of Ctrl-C

    def fail(self, reason: str) -> None:
        self.failed += 1
        if self.first_failure is None:
            self.first_failure = reason


class RetryReporter:
    """Prints a retry to stderr the first time its reason (error type and code) occurs."""

    def __init__(self, out=None) -> None:
        self.out = out
        self.seen: set[tuple[str, str]] = set()

    def __call__(self, tp: TopicPartition, error: BaseException) -> None:
        reason = (type(error).__name__, str(getattr(error, "code", "")))
        if reason in self.seen:
            return
        self.seen.add(reason)
        out = self.out or sys.stderr
        print(f"retrying {tp.topic}-{tp.partition}: {error}", file=out, flush=True)


# The console producer's `partitioner.availability.timeout.ms` (Kafka's default is 0,
# off): a keyless produce whose sticky partition's leader stops answering moves its
# records to other partitions after this long instead of waiting for a failover. A
# `--producer-props` value overrides it.
CLI_AVAILABILITY_TIMEOUT_MS = 500


def producer_config(args: argparse.Namespace) -> dict:
    if args.acks is None:
        args.acks = "all" if getattr(args, "transactional_id", None) else "1"
    config = {
        "acks": args.acks,
        "compression_type": args.compression,
        "batch_size": args.batch_size,
        "linger_ms": args.linger_ms,
        "partitioner_availability_timeout_ms": CLI_AVAILABILITY_TIMEOUT_MS,
        **client_options(args),
        **producer_props(args),
    }
    if args.enable_idempotence is not None:
        config["enable_idempotence"] = args.enable_idempotence
    if args.enable_idempotence and args.acks not in ("all", "-1"):
        raise CliError("--enable-idempotence requires --acks all", exit_code=2)
    config["delivery_timeout_ms"] = delivery_timeout_ms(args, config)
    return config


def delivery_timeout_ms(args: argparse.Namespace, config: dict[str, Any]) -> int:
    """`--delivery-timeout-ms`, or Kafka's default raised to cover linger + request
    timeout; `CliError` if given below that, as Kafka refuses it."""
    request_timeout = config.get("request_timeout_ms", DEFAULT_REQUEST_TIMEOUT_MS)
    delivery_timeout = args.delivery_timeout_ms
    if delivery_timeout is None:
        return max(DEFAULT_DELIVERY_TIMEOUT_MS, request_timeout + args.linger_ms)
    if delivery_timeout < request_timeout + args.linger_ms:
        raise CliError(
            f"--delivery-timeout-ms ({delivery_timeout}) must be at least --linger-ms + "
            f"--request-timeout-ms ({args.linger_ms} + {request_timeout}), as Kafka requires",
            exit_code=2,
        )
    return delivery_timeout


def _produce(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)
    config = producer_config(args)
    separator = args.key_separator.encode() if args.key_separator else None
    record_separator = None
    if args.separator is not None:
        record_separator = unescape(args.separator).encode()
        if not record_separator:
            raise CliError("--separator must not be empty", exit_code=2)
    if args.transactional_id is not None:
        lines = read_lines(_stdin(), record_separator)
        return produce_transactional(args, bootstrap, config, separator, lines, RetryReporter())
    if args.transaction_size is not None or args.abort:
        raise CliError("--transaction-size and --abort need --transactional-id", exit_code=2)
    outcome = _Outcome()
    started = time.monotonic()

    async def produce() -> None:
        async with open_producer(bootstrap, on_retry=RetryReporter(), **config) as producer:
            partitions = await producer.metadata.partitions_or_error(args.topic)
            if args.partition is not None and args.partition not in partitions:
                raise CliError(
                    f"topic '{args.topic}' has no partition {args.partition} "
                    f"(it has {len(partitions)})"
                )
            sender, receiver = trio.open_memory_channel[
                tuple[DeliveryHandle | None, bytes | None, bytes | None, str | None]
            ](MAX_UNREPORTED)
            reading = trio.CancelScope()
            flushing = trio.CancelScope()

            async def send_lines() -> None:
                number = 0
                async for line in read_lines(_stdin(), record_separator):
                    number += 1
                    key, value = None, line
                    if separator is not None:
                        key, found, value = line.partition(separator)
                        if not found:
                            reason = f"line {number} has no key separator {args.key_separator!r}"
                            with trio.CancelScope(shield=True):
                                await sender.send((None, None, line, reason))
                            continue
                    handle = await producer.send(
                        args.topic, value, key=key, partition=args.partition
                    )
                    with trio.CancelScope(shield=True):  # every handle sent gets reported
                        await sender.send((handle, key, value, None))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(_report, receiver, args, outcome)
                watcher = trio.CancelScope()
                if threading.current_thread() is threading.main_thread():
                    await nursery.start(_on_ctrl_c, watcher, outcome, reading, flushing)
                async with sender:
                    with reading:
                        await send_lines()
                        # Input ended: wait for the deliveries, still interruptible.
                        await producer.flush()
                    if outcome.interrupted:
                        with flushing, trio.move_on_after(INTERRUPT_FLUSH_S):
                            await producer.flush()
                        producer.abort("not delivered: interrupted")
                watcher.cancel()

    run_async(produce)
    sys.stdout.flush()
    elapsed = time.monotonic() - started
    if outcome.interrupted:
        print(
            f"interrupted: produced {outcome.acked} record(s) to {args.topic}, "
            f"{outcome.abandoned} read but not delivered, {outcome.failed} failed, "
            f"in {elapsed:.2f} s",
            file=sys.stderr,
        )
        return 130
    print(
        f"produced {outcome.acked} record(s) to {args.topic}, {outcome.failed} failed, "
        f"in {elapsed:.2f} s",
        file=sys.stderr,
    )
    if outcome.failed:
        raise CliError(f"{outcome.failed} record(s) failed: {outcome.first_failure}")
    return 0


async def _on_ctrl_c(
    watcher: trio.CancelScope,
    outcome: _Outcome,
    reading: trio.CancelScope,
    flushing: trio.CancelScope,
    *,
    task_status=trio.TASK_STATUS_IGNORED,
) -> None:
    """First SIGINT: stop reading (then flush briefly); second: stop flushing too."""
    with watcher, trio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            if outcome.interrupted:
                flushing.cancel()
                continue
            outcome.interrupted = True
            reading.cancel()


async def _report(receiver, args: argparse.Namespace, outcome: _Outcome) -> None:
    out = sys.stdout
    async with receiver:
        async for handle, key, value, problem in receiver:
            if handle is None:
                outcome.fail(problem or "not sent")
                continue
            try:
                metadata = await handle
            except ProducerClosedError:  # abandoned after Ctrl-C
                outcome.abandoned += 1
                continue
            except Exception as exc:  # the record's own failure: count it, carry on
                outcome.fail(str(exc))
                continue
            outcome.acked += 1
            if args.report:
                out.write(
                    json.dumps(
                        {
                            "topic": metadata.topic,
                            "partition": metadata.partition,
                            "offset": metadata.offset,
                            "key": text_or_none(key),
                            "value": text_or_none(value),
                        }
                    )
                    + "\n"
                )
