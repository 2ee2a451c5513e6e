"""`tributary log-dirs describe [--broker-list 1,2] [--topic-list t1,t2]`, as
kafka-log-dirs.sh --describe prints it.

How it works (`describe`): one DescribeLogDirs to every broker asked (all the live ones
by default), concurrently, through the admin client; the answer is Kafka's layout: two
lines saying which brokers were asked and which answered, then one JSON document with,
per broker and log dir, each replica's `size`, `offsetLag` (the leader's high watermark
minus this replica's log end offset, 0 on the leader) and `isFuture` (always false: no
replica moves between log dirs here), plus Tributary's `logEndOffset`, `highWatermark`
and `isLeader`. A broker that does not answer gets an `error` instead of `logDirs`.
"""

from __future__ import annotations

import argparse
import json

from client.admin import LogDirDescription, open_admin
from client.protocol.errors import TributaryError
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.errors import CliError


def register(subparsers) -> None:
    parser = subparsers.add_parser("log-dirs", help="log directories of brokers")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = actions.add_parser(
        "describe", help="replica sizes and offset lag per log dir (as kafka-log-dirs)"
    )
    describe.add_argument("--broker-list", metavar="B,B", help="default: every live broker")
    describe.add_argument("--topic-list", metavar="T,T", help="default: every topic")
    add_bootstrap_option(describe)
    describe.set_defaults(handler=_describe)


def _ids(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    try:
        ids = sorted({int(b) for b in text.split(",") if b.strip()})
    except ValueError:
        raise CliError(f"{option} expects broker ids like 1,2,3, not {text!r}", 2) from None
    if not ids:
        raise CliError(f"{option} expects broker ids like 1,2,3, not {text!r}", 2)
    return ids


def _describe(args: argparse.Namespace) -> int:
    brokers = _ids(args.broker_list, "--broker-list")
    topics = None if args.topic_list is None else {t.strip() for t in args.topic_list.split(",")}
    bootstrap = bootstrap_of(args)

    async def describe():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.describe_log_dirs(brokers)

    found = run_async(describe)
    asked = ",".join(str(b) for b in found)
    answered = ",".join(str(b) for b, dirs in found.items() if not isinstance(dirs, Exception))
    print("Querying brokers for log directories information")
    print(f"Received log directory information from brokers {answered}")
    document = {
        "version": 1,
        "brokers": [_broker_json(b, dirs, topics) for b, dirs in found.items()],
    }
    print(json.dumps(document, separators=(",", ":")))
    if answered != asked:
        raise CliError(f"not every broker answered (asked {asked}, answered {answered})")
    return 0


def _broker_json(
    broker: int, dirs: list[LogDirDescription] | TributaryError, topics: set[str] | None
) -> dict:
    if isinstance(dirs, Exception):
        return {"broker": broker, "error": str(dirs)}
    return {
        "broker": broker,
        "logDirs": [
            {
                "logDir": d.log_dir,
                "error": None if d.error is None else str(d.error),
                "partitions": [
                    {
                        "partition": f"{tp.topic}-{tp.partition}",
                        "size": info.size,
                        "offsetLag": info.offset_lag,
                        "isFuture": False,
                        "logEndOffset": info.log_end_offset,
                        "highWatermark": info.high_watermark,
                        "isLeader": info.is_leader,
                    }
                    for tp, info in sorted(d.partitions.items())
                    if topics is None or tp.topic in topics
                ],
            }
            for d in dirs
        ],
    }
