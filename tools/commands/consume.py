"""`tributary consume TOPIC`: print records, like kafka-console-consumer.sh.

How it works: without `--group` it assigns every partition of the topic (or the one
given), starts at the end (the default, as Kafka's console consumer), at the beginning
(`--from-beginning`) or at `--offset` of `--partition`, then polls and prints each record
as text (the value, or key, tab, value with `--print-key`), as the bytes stored
(`--format raw`), or as one JSON object per line (`json`; `base64` for binary data);
`--property print.key=true` and the other kafka-console-consumer formatter properties
choose the fields (tools/commands/record_format.py). `--consumer-props client.rack=R`
(tools/commands/consumer_props.py) names the consumer's rack, so brokers running a
rack-aware `replica.selector.class` let it fetch from a replica in rack R (KIP-392).
It stops after `--max-messages` records, or once `--timeout-ms` passes without a new
record, and then reports "Processed a total of N messages" on stderr; otherwise it runs
until Ctrl-C.

With `--group G` it subscribes as a member of consumer group G (the coordinator assigns
the partitions; `--from-beginning` sets auto.offset.reset=earliest, which only matters
where the group has no committed offset, as in Kafka) and commits what it printed:
automatic commits are off and the command commits, per partition, the offset after the
last record it printed (`PrintedOffsets`), every `--commit-interval-ms`, when a rebalance
takes partitions away, and before it leaves the group (after `--max-messages`, the idle
timeout, a closed pipe or Ctrl-C). Records the consumer fetched but did not print are
not committed, so the next run of the group starts exactly at the next record. An
assigned partition it printed nothing from gets its current position committed (where
that was a reset to earliest/latest), so the next run does not reset it differently.
Ctrl-C exits 130 after that last commit.

`--isolation-level read_committed` (Kafka's isolation.level) prints only committed
transactions' records (and records written outside transactions), up to the last
stable offset; transaction markers are never printed.

A batch that fails its CRC check (the consumer checks every batch, as Kafka's
check.crcs) ends the command with one line naming the topic, partition, offsets and
broker, exit code 1, after the records before it were printed (and, with a group,
committed): a damaged value is never printed.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Iterable

import trio

from client.consumer import EARLIEST, LATEST, Consumer, ConsumerBatch, open_consumer
from client.protocol.errors import TributaryError
from client.protocol.records import CorruptRecordError
from client.protocol.types import TopicPartition
from tools.commands.common import (
    add_bootstrap_option,
    bootstrap_of,
    client_options,
    non_negative_int,
    positive_int,
    run_async,
)
from tools.commands.consumer_props import add_consumer_props, consumer_props
from tools.commands.record_format import FORMATS, RecordFormatter, parse_properties, unescape
from tools.errors import CliError

log = logging.getLogger(__name__)

DEFAULT_COMMIT_INTERVAL_MS = 5000  # Kafka's auto.commit.interval.ms
GROUP_CLIENT_ID = "tributary-console-consumer"
# Before leaving: how long to wait for the positions of the assigned partitions nothing
# was printed from (they may still be resolving their reset), all together.
POSITION_WAIT_MS = 2000


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
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text; raw (the bytes stored); json; base64 (json with base64 key/value)",
    )
    parser.add_argument("--print-key", action="store_true", help="text format: key TAB value")
    parser.add_argument(
        "--key-separator", default=None, metavar="SEP", help="text format (default: tab)"
    )
    parser.add_argument(
        "--separator",
        metavar="SEP",
        help="text and raw formats: written after each record (default: newline; "
        "escapes \\n \\t \\0 work)",
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="as kafka-console-consumer: print.key, print.partition, print.offset, "
        "print.timestamp, print.headers, print.value, key.separator, line.separator, "
        "headers.separator, null.literal",
    )
    parser.add_argument(
        "--group",
        metavar="G",
        help="consume as a member of consumer group G, committing what was printed",
    )
    parser.add_argument(
        "--commit-interval-ms",
        type=positive_int,
        default=DEFAULT_COMMIT_INTERVAL_MS,
        metavar="T",
        help=f"with --group: commit every T ms (default {DEFAULT_COMMIT_INTERVAL_MS})",
    )
    add_consumer_props(parser)
    parser.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed: only committed transactions' records (default read_uncommitted)",
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


def record_formatter(args: argparse.Namespace) -> RecordFormatter:
    """The formatter for --format, --property and the shortcuts --print-key,
    --key-separator and --separator (which win over the properties they stand for)."""
    props = parse_properties(args.property)
    if args.print_key:
        props["print.key"] = "true"
    if args.key_separator is not None:
        props["key.separator"] = unescape(args.key_separator)
    if args.separator is not None:
        props["line.separator"] = unescape(args.separator)
    return RecordFormatter(args.format, props)


class RecordWriter:
    """Writes rendered records to stdout's byte stream (text written before is flushed
    first), so that raw bytes are never re-encoded: a poll's batches in one write."""

    def __init__(self, formatter: RecordFormatter, out=None) -> None:
        self.formatter = formatter
        self.text = out or sys.stdout
        self.text.flush()
        self.binary = getattr(self.text, "buffer", None)

    def write(self, batches: Iterable[ConsumerBatch]) -> None:
        data = self.formatter.render_batches(batches)
        if self.binary is not None:
            self.binary.write(data)
        else:
            self.text.write(data.decode("utf-8", errors="replace"))

    def flush(self) -> None:
        (self.binary or self.text).flush()


def _consume(args: argparse.Namespace) -> int:
    if args.group is not None:
        return _consume_group(args)
    bootstrap = bootstrap_of(args)
    start = _start_offset(args)
    formatter = record_formatter(args)
    props = consumer_props(args)  # bad --consumer-props: one line, before connecting
    count = 0

    async def consume() -> None:
        nonlocal count
        reset = start if isinstance(start, str) else LATEST
        options = {**client_options(args), **props}
        # Polls of up to 5,000 records, taken as columns (poll_batches): one write and
        # flush each (a poll returns what is there, so a record typed into a producer
        # still shows at once).
        async with open_consumer(
            bootstrap,
            auto_offset_reset=reset,
            max_poll_records=5_000,
            isolation_level=args.isolation_level,
            **options,
        ) as consumer:
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
            out = RecordWriter(formatter)
            idle_s = math.inf if args.timeout_ms is None else args.timeout_ms / 1000
            last_record_at = trio.current_time()
            while args.max_messages is None or count < args.max_messages:
                left = last_record_at + idle_s - trio.current_time()
                if left <= 0:
                    break
                batches = await _poll_or_fail(consumer, min(left, 1.0) * 1000)
                if not batches:
                    continue
                last_record_at = trio.current_time()
                if args.max_messages is not None:
                    batches = first_records(batches, args.max_messages - count)
                out.write(batches)
                count += sum(map(len, batches))
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


# --- with a group --------------------------------------------------------------------------


class PrintedOffsets:
    """Per partition, the offset after the last record printed, and what of it has been
    committed: `pending()` is what a commit still has to carry."""

    def __init__(self) -> None:
        self.next: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}

    def printed(self, batches: Iterable[ConsumerBatch]) -> None:
        for batch in batches:
            tp = batch.topic_partition
            self.next[tp] = max(self.next.get(tp, 0), batch.offsets[-1] + 1)

    def pending(self, partitions: Iterable[TopicPartition] | None = None) -> dict:
        wanted = None if partitions is None else set(partitions)
        return {
            tp: offset
            for tp, offset in self.next.items()
            if (wanted is None or tp in wanted) and self.committed.get(tp) != offset
        }

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        self.committed.update(offsets)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.next.pop(tp, None)
            self.committed.pop(tp, None)


class _Run:
    """What one group run did: records printed, and how it ended."""

    def __init__(self) -> None:
        self.count = 0
        self.interrupted = False
        self.pipe_closed = False
        self.commit_error: BaseException | None = None


def _consume_group(args: argparse.Namespace) -> int:
    if args.partition is not None or args.offset is not None:
        raise CliError(
            "--group cannot be used with --partition or --offset (the group assigns partitions)",
            exit_code=2,
        )
    bootstrap = bootstrap_of(args)
    record_formatter(args)  # bad --property or --format: one line, before connecting
    consumer_props(args)
    run = _Run()
    try:
        run_async(_run_group, args, bootstrap, run)
    except KeyboardInterrupt:  # a second Ctrl-C while committing
        _finish(run.count)
        raise
    if run.pipe_closed:
        silence_stdout()
        return 0
    _finish(run.count)
    if run.commit_error is not None:
        raise CliError(f"could not commit the printed records' offsets: {run.commit_error}")
    return 130 if run.interrupted else 0


async def _run_group(args: argparse.Namespace, bootstrap: str, run: _Run) -> None:
    offsets = PrintedOffsets()
    config: dict = {}
    if args.max_messages is not None:
        config["max_poll_records"] = min(500, args.max_messages)
    async with open_consumer(
        bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset=EARLIEST if args.from_beginning else LATEST,
        client_id=GROUP_CLIENT_ID,
        isolation_level=args.isolation_level,
        **config,
        **client_options(args),
        **consumer_props(args),
    ) as consumer:
        await consumer.partitions_for(args.topic)  # a missing topic: one line, at once

        async def commit(wanted: dict[TopicPartition, int]) -> None:
            if wanted:
                await consumer.commit(dict(wanted))
                offsets.mark_committed(wanted)

        async def on_revoked(partitions) -> None:
            # Commit what was printed from them while they are still ours (Kafka's
            # onPartitionsRevoked pattern), then forget them.
            try:
                await commit(offsets.pending(partitions))
            except TributaryError as exc:
                log.warning("commit before the rebalance failed: %s", exc)
            offsets.forget(partitions)

        def on_lost(partitions) -> None:  # the generation is gone: nothing can be committed
            offsets.forget(partitions)

        consumer.subscribe([args.topic], on_revoked=on_revoked, on_lost=on_lost)
        async with trio.open_nursery() as nursery:
            if threading.current_thread() is threading.main_thread():
                await nursery.start(_stop_on_ctrl_c, nursery.cancel_scope, run)
            await _group_loop(args, consumer, offsets, commit, run)
            nursery.cancel_scope.cancel()
        # Outside the cancelled scope: commit what was printed, then leave the group.
        final = offsets.pending(consumer.assignment())
        with trio.move_on_after(POSITION_WAIT_MS / 1000):  # for all of them together
            for tp in sorted(consumer.assignment() - set(offsets.next)):
                try:
                    final[tp] = await consumer.position(tp)
                except Exception as exc:  # no position yet: nothing to keep for it
                    log.debug("no position for %s: %s", tp, exc)
        try:
            await commit(final)
        except TributaryError as exc:
            run.commit_error = exc


async def _stop_on_ctrl_c(
    scope: trio.CancelScope, run: _Run, *, task_status=trio.TASK_STATUS_IGNORED
) -> None:
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            run.interrupted = True
            scope.cancel()
            return


async def _group_loop(args, consumer, offsets: PrintedOffsets, commit, run: _Run) -> None:
    out = RecordWriter(record_formatter(args))
    idle_s = math.inf if args.timeout_ms is None else args.timeout_ms / 1000
    interval_s = args.commit_interval_ms / 1000
    last_record_at = last_commit_at = trio.current_time()
    while args.max_messages is None or run.count < args.max_messages:
        now = trio.current_time()
        if now - last_commit_at >= interval_s:
            last_commit_at = now
            try:
                await commit(offsets.pending(consumer.assignment()))
            except TributaryError as exc:  # a rebalance under way: the next one will do
                log.info("periodic commit failed: %s", exc)
        left = last_record_at + idle_s - trio.current_time()
        if left <= 0:
            break
        batches = await _poll_or_fail(consumer, min(left, interval_s, 1.0) * 1000)
        if not batches:
            continue
        last_record_at = trio.current_time()
        if args.max_messages is not None:
            batches = first_records(batches, args.max_messages - run.count)
        try:
            out.write(batches)
            out.flush()
        except BrokenPipeError:  # the reader went away: what it got is not known
            run.pipe_closed = True
            return
        offsets.printed(batches)
        run.count += sum(map(len, batches))


def first_records(batches: list[ConsumerBatch], count: int) -> list[ConsumerBatch]:
    """The first `count` records of `batches` (in the order a poll handed them out)."""
    out = []
    for batch in batches:
        if count <= 0:
            break
        out.append(batch if len(batch) <= count else batch.slice(0, count))
        count -= len(batch)
    return out


async def _poll_or_fail(consumer: Consumer, timeout_ms: float) -> list[ConsumerBatch]:
    """`consumer.poll_batches`, with a damaged batch turned into the command's one-line
    error."""
    try:
        return await consumer.poll_batches(timeout_ms)
    except CorruptRecordError as exc:
        sys.stdout.flush()
        raise CliError(str(exc)) from None


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
