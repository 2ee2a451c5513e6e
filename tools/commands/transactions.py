"""`tributary transactions list|describe`: the cluster's transactions, in the manner of
Kafka's kafka-transactions.sh (KIP-664).

How it works: `list` asks every broker for the transactional ids it coordinates
(ListTransactions, `--state`/`--producer-id` filters) and prints TransactionalId,
Coordinator, ProducerId and TransactionState; `describe --transactional-id ID` asks the
id's coordinator (DescribeTransactions) and prints Kafka's columns: CoordinatorId,
TransactionalId, ProducerId, ProducerEpoch, TransactionState, TransactionTimeoutMs,
CurrentTransactionStartTimeMs, TransactionDurationMs and TopicPartitions ("None" and
"-" where no transaction is ongoing). `--json` prints the results as JSON instead.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from client.admin import open_admin
from client.admin.transactions import TransactionDescription
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.commands.groups.report import format_table

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)


def register(subparsers) -> None:
    transactions = subparsers.add_parser("transactions", help="list and describe transactions")
    actions = transactions.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="every transactional id and its state")
    listing.add_argument(
        "--state", action="append", default=[], metavar="S", help="only this state (repeatable)"
    )
    listing.add_argument(
        "--producer-id",
        action="append",
        type=int,
        default=[],
        metavar="ID",
        help="only this producer id (repeatable)",
    )
    listing.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap_option(listing)
    listing.set_defaults(handler=_list)

    describe = actions.add_parser("describe", help="one transactional id's transaction")
    describe.add_argument("--transactional-id", required=True, metavar="ID")
    describe.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap_option(describe)
    describe.set_defaults(handler=_describe)


def _list(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def listed():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.list_transactions(args.state, args.producer_id)

    found = run_async(listed)
    if args.json:
        print(json.dumps([asdict(t) for t in found], indent=2))
        return 0
    rows = [(t.transactional_id, t.coordinator_id, t.producer_id, t.state) for t in found]
    print("\n".join(format_table(LIST_HEADERS, rows)))
    return 0


def describe_row(d: TransactionDescription, now_ms: int) -> tuple:
    started = d.start_time_ms >= 0
    partitions = ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(d.partitions))
    return (
        d.coordinator_id,
        d.transactional_id,
        d.producer_id,
        d.producer_epoch,
        d.state,
        d.timeout_ms,
        d.start_time_ms if started else "None",
        max(0, now_ms - d.start_time_ms) if started else "None",
        partitions or "None",
    )


def _describe(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def described():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.describe_transaction(args.transactional_id)

    found = run_async(described)
    if args.json:
        print(json.dumps(asdict(found), indent=2))
        return 0
    row = describe_row(found, int(time.time() * 1000))
    print("\n".join(format_table(DESCRIBE_HEADERS, [row])))
    return 0
