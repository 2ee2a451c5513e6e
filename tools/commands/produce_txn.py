"""`tributary produce TOPIC --transactional-id ID`: stdin lines written in transactions.

How it works: the producer is built with the transactional id (which implies
idempotence and acks=all) and calls `init_transactions()` (fencing an older producer
with the same id). Lines are sent inside a transaction that is committed every
`--transaction-size` records (default: all of stdin in one transaction), or aborted
instead with `--abort` (for demos and tests: a read_committed consumer sees none of
them). Ctrl-C or an error aborts the open transaction (its records are counted as
aborted) and the command exits 130 or 1. The summary on stderr says how many records
were committed and aborted in how many transactions; `--report` prints one JSON line
per committed record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from client.producer import DeliveryHandle, TransactionError, open_producer
from client.protocol.types import TopicPartition
from tools.commands.common import run_async, text_or_none
from tools.errors import CliError

# After an error or Ctrl-C, how long the abort of the open transaction may take.
ABORT_TIMEOUT_S = 10.0


class _Counts:
    def __init__(self) -> None:
        self.committed = 0
        self.aborted = 0
        self.transactions = 0
        self.interrupted = False


def produce_transactional(
    args: argparse.Namespace,
    bootstrap: str,
    config: dict[str, Any],
    key_separator: bytes | None,
    lines: AsyncIterator[bytes],
    on_retry: Callable[[TopicPartition, BaseException], None],
) -> int:
    """Run the command (`lines`: stdin's records; `on_retry`: the retry reporter)."""
    if config.get("enable_idempotence") is False:
        raise CliError("--transactional-id requires idempotence", exit_code=2)
    if str(config.get("acks")) not in ("all", "-1"):
        raise CliError("--transactional-id requires --acks all", exit_code=2)
    config = {**config, "transactional_id": args.transactional_id}
    counts = _Counts()
    started = time.monotonic()

    async def produce() -> None:
        async with open_producer(bootstrap, on_retry=on_retry, **config) as producer:
            await producer.metadata.partitions_or_error(args.topic)
            await producer.init_transactions()
            pending: list[tuple[DeliveryHandle, bytes | None, bytes | None]] = []

            async def finish() -> None:
                if args.abort:
                    await producer.abort_transaction()
                    counts.aborted += len(pending)
                else:
                    await producer.commit_transaction()
                    counts.committed += len(pending)
                    if args.report:
                        _report(pending)
                counts.transactions += 1
                pending.clear()

            open_txn = False
            try:
                number = 0
                async for line in lines:
                    number += 1
                    key, value = None, line
                    if key_separator is not None:
                        key, found, value = line.partition(key_separator)
                        if not found:
                            raise CliError(
                                f"line {number} has no key separator {args.key_separator!r}"
                            )
                    if not open_txn:
                        producer.begin_transaction()
                        open_txn = True
                    handle = await producer.send(
                        args.topic, value, key=key, partition=args.partition
                    )
                    pending.append((handle, key, value))
                    if args.transaction_size and len(pending) >= args.transaction_size:
                        open_txn = False
                        await finish()
                if open_txn:
                    open_txn = False
                    await finish()
            except BaseException as exc:
                counts.interrupted = isinstance(exc, KeyboardInterrupt)
                fatal = isinstance(exc, TransactionError) and exc.fatal
                if (open_txn or pending) and not fatal:
                    with trio.CancelScope(shield=True), trio.move_on_after(ABORT_TIMEOUT_S):
                        await producer.abort_transaction()
                        counts.aborted += len(pending)
                raise

    try:
        run_async(produce)
    finally:
        elapsed = time.monotonic() - started
        print(
            f"{'interrupted: ' if counts.interrupted else ''}committed {counts.committed} "
            f"record(s) to {args.topic}, aborted {counts.aborted}, in {counts.transactions} "
            f"transaction(s), in {elapsed:.2f} s",
            file=sys.stderr,
        )
    return 0


def _report(pending: list[tuple[DeliveryHandle, bytes | None, bytes | None]]) -> None:
    for handle, key, value in pending:
        metadata = handle.result()
        sys.stdout.write(
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
    sys.stdout.flush()
