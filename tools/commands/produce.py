"""`tributary produce TOPIC`: one record per stdin line, like kafka-console-producer.sh.

How it works: stdin is read in chunks on a worker thread (so the producer's sender keeps
running while we wait for input) and split into lines; each line becomes a record
(`key<SEP>value` with `--key-separator`). A reporter task awaits the delivery handles in
the order the lines came and, with `--report`, prints one JSON line per acknowledged
record. At the end a summary goes to stderr; if any record failed the command exits 1
with the first reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import trio

from client.producer import DeliveryHandle, open_producer
from tools.commands.common import (
    add_bootstrap_option,
    bootstrap_of,
    non_negative_int,
    positive_int,
    run_async,
    text_or_none,
)
from tools.errors import CliError

# Bytes read from stdin per call: big enough that piping a file costs few thread hops.
READ_CHUNK = 64 * 1024
# Records sent but not yet reported: bounds memory if acks lag behind reading.
MAX_UNREPORTED = 10_000


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "produce", help="send stdin lines as records (one record per line)"
    )
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument("--acks", choices=["0", "1", "all", "-1"], default="1")
    parser.add_argument("--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE")
    parser.add_argument("--partition", type=non_negative_int, metavar="P")
    parser.add_argument("--compression", choices=["none", "gzip", "lz4", "zstd"], default="none")
    parser.add_argument("--batch-size", type=positive_int, default=16_384, metavar="BYTES")
    parser.add_argument("--linger-ms", type=non_negative_int, default=0, metavar="MS")
    parser.add_argument(
        "--report", action="store_true", help="print one JSON line per acknowledged record"
    )
    add_bootstrap_option(parser)
    parser.set_defaults(handler=_produce)


def _stdin() -> BinaryIO:
    stream: Any = sys.stdin
    return getattr(stream, "buffer", stream)


async def read_lines(stream: BinaryIO) -> AsyncIterator[bytes]:
    """Lines of `stream` without their line ending, read on a worker thread."""
    read = getattr(stream, "read1", stream.read)
    pending = b""
    while True:
        chunk = await trio.to_thread.run_sync(read, READ_CHUNK)
        if isinstance(chunk, str):
            chunk = chunk.encode()
        if not chunk:
            break
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if pending:
        yield pending[:-1] if pending.endswith(b"\r") else pending


class _Outcome:
    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.first_failure: str | None = None

    def fail(self, reason: str) -> None:
        self.failed += 1
        if self.first_failure is None:
            self.first_failure = reason


def _produce(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)
    separator = args.key_separator.encode() if args.key_separator else None
    outcome = _Outcome()
    started = time.monotonic()

    async def produce() -> None:
        config = {
            "acks": args.acks,
            "compression_type": args.compression,
            "batch_size": args.batch_size,
            "linger_ms": args.linger_ms,
        }
        async with open_producer(bootstrap, **config) as producer:
            partitions = await producer.metadata.partitions_or_error(args.topic)
            if args.partition is not None and args.partition not in partitions:
                raise CliError(
                    f"topic '{args.topic}' has no partition {args.partition} "
                    f"(it has {len(partitions)})"
                )
            sender, receiver = trio.open_memory_channel[
                tuple[DeliveryHandle | None, bytes | None, bytes | None, str | None]
            ](MAX_UNREPORTED)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_report, receiver, args, outcome)
                async with sender:
                    number = 0
                    async for line in read_lines(_stdin()):
                        number += 1
                        key, value = None, line
                        if separator is not None:
                            key, found, value = line.partition(separator)
                            if not found:
                                reason = (
                                    f"line {number} has no key separator {args.key_separator!r}"
                                )
                                await sender.send((None, None, line, reason))
                                continue
                        handle = await producer.send(
                            args.topic, value, key=key, partition=args.partition
                        )
                        await sender.send((handle, key, value, None))

    run_async(produce)
    sys.stdout.flush()
    elapsed = time.monotonic() - started
    print(
        f"produced {outcome.acked} record(s) to {args.topic}, {outcome.failed} failed, "
        f"in {elapsed:.2f} s",
        file=sys.stderr,
    )
    if outcome.failed:
        raise CliError(f"{outcome.failed} record(s) failed: {outcome.first_failure}")
    return 0


async def _report(receiver, args: argparse.Namespace, outcome: _Outcome) -> None:
    out = sys.stdout
    async with receiver:
        async for handle, key, value, problem in receiver:
            if handle is None:
                outcome.fail(problem or "not sent")
                continue
            try:
                metadata = await handle
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
