"""`tributary consume TOPIC`: print records, like kafka-console-consumer.sh.

How it works: assigns every partition of the topic (or the one given), starts at the end
(the default, as Kafka's console consumer), at the beginning (`--from-beginning`) or at
`--offset` of `--partition`, then polls and prints each record as text (the value, or
key, tab, value with `--print-key`) or as one JSON object per line. It stops after
`--max-messages` records, or once `--timeout-ms` passes without a new record, and then
reports "Processed a total of N messages" on stderr; otherwise it runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import trio

from client.consumer import EARLIEST, LATEST, ConsumerRecord, open_consumer
from client.protocol.types import TopicPartition
from tools.commands.common import (
    add_bootstrap_option,
    bootstrap_of,
    non_negative_int,
    positive_int,
    run_async,
    text_or_none,
)
from tools.errors import CliError


def register(subparsers) -> None:
    parser = subparsers.add_parser("consume", help="print records of a topic")
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument("--from-beginning", action="store_true", help="start at the oldest record")
    parser.add_argument("--partition", type=non_negative_int, metavar="P")
    parser.add_argument(
        "--offset", metavar="O", help="with --partition: an offset, or earliest / latest"
    )
    parser.add_argument("--max-messages", type=positive_int, metavar="N")
    parser.add_argument(
        "--timeout-ms", type=non_negative_int, metavar="T", help="stop after T ms without records"
    )
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--print-key", action="store_true", help="text format: key TAB value")
    parser.add_argument(
        "--key-separator", default="\t", metavar="SEP", help="text format (default: tab)"
    )
    add_bootstrap_option(parser)
    parser.set_defaults(handler=_consume)


def _start_offset(args: argparse.Namespace) -> int | str:
    if args.offset is None:
        return EARLIEST if args.from_beginning else LATEST
    if args.partition is None:
        raise CliError("--offset needs --partition", exit_code=2)
    if args.offset in (EARLIEST, LATEST):
        return args.offset
    try:
        offset = int(args.offset)
    except ValueError:
        raise CliError(
            f"--offset must be an offset or earliest / latest, not {args.offset!r}", exit_code=2
        ) from None
    if offset < 0:
        raise CliError(f"--offset must be >= 0, not {offset}", exit_code=2)
    return offset


def format_record(record: ConsumerRecord, args: argparse.Namespace) -> str:
    if args.format == "json":
        return json.dumps(
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": text_or_none(record.key),
                "value": text_or_none(record.value),
            }
        )
    value = text_or_none(record.value)
    text = "null" if value is None else value
    if args.print_key:
        key = text_or_none(record.key)
        text = f"{'null' if key is None else key}{args.key_separator}{text}"
    return text


def _consume(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)
    start = _start_offset(args)
    count = 0

    async def consume() -> None:
        nonlocal count
        reset = start if isinstance(start, str) else LATEST
        async with open_consumer(bootstrap, auto_offset_reset=reset) as consumer:
            partitions = await consumer.partitions_for(args.topic)
            if args.partition is not None:
                if args.partition not in partitions:
                    raise CliError(
                        f"topic '{args.topic}' has no partition {args.partition} "
                        f"(it has {len(partitions)})"
                    )
                partitions = [args.partition]
            tps = [TopicPartition(args.topic, p) for p in partitions]
            consumer.assign(tps)
            if isinstance(start, int):
                consumer.seek(tps[0], start)
            out = sys.stdout
            idle_s = math.inf if args.timeout_ms is None else args.timeout_ms / 1000
            last_record_at = trio.current_time()
            while args.max_messages is None or count < args.max_messages:
                left = last_record_at + idle_s - trio.current_time()
                if left <= 0:
                    break
                records = await consumer.poll(min(left, 1.0) * 1000)
                if not records:
                    continue
                last_record_at = trio.current_time()
                if args.max_messages is not None:
                    records = records[: args.max_messages - count]
                for record in records:
                    out.write(format_record(record, args) + "\n")
                count += len(records)
                out.flush()

    try:
        run_async(consume)
    except KeyboardInterrupt:
        _finish(count)
        raise
    except BrokenPipeError:  # `tributary consume t | head`: the reader has had enough
        silence_stdout()
        return 0
    _finish(count)
    return 0


def _finish(count: int) -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
    print(f"Processed a total of {count} messages", file=sys.stderr)


def silence_stdout() -> None:
    """Point stdout at /dev/null after the reader went away, so that the interpreter's
    last flush does not complain about the broken pipe (Python's documented recipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (tests capture stdout): nothing to protect
