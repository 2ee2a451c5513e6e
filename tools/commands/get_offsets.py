"""`tributary get-offsets --topic T [--partitions 0,1] [--time earliest|latest|max-timestamp|TS]`,
as kafka-get-offsets.sh prints it: one `topic:partition:offset` line per partition.

How it works: one admin client asks each partition's leader (ListOffsets, retried while
leaders move): `latest` (-1, the default) is the high watermark, `earliest` (-2) the log
start offset, `max-timestamp` (-3) the offset of the record with the largest timestamp,
a timestamp in ms the first offset whose record is at or after it (empty when there is
none, as Kafka prints it).
"""

from __future__ import annotations

import argparse

from client.admin import open_admin
from client.protocol.types import TopicPartition
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.errors import CliError

_NAMED_TIMES = {
    "latest": "latest",
    "-1": "latest",
    "earliest": "earliest",
    "-2": "earliest",
    "max-timestamp": "max-timestamp",
    "-3": "max-timestamp",
}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "get-offsets", help="offsets of partitions: earliest, latest or at a time"
    )
    parser.add_argument("--topic", required=True, metavar="T")
    parser.add_argument("--partitions", metavar="P,P", help="only these (default: every one)")
    parser.add_argument(
        "--time",
        default="latest",
        metavar="earliest|latest|max-timestamp|TS",
        help="earliest (-2), latest (-1, the default), max-timestamp (-3: the record with "
        "the largest timestamp) or a timestamp in ms",
    )
    add_bootstrap_option(parser)
    parser.set_defaults(handler=_get_offsets)


def parse_time(text: str) -> str | int:
    if text.lower() in _NAMED_TIMES:
        return _NAMED_TIMES[text.lower()]
    try:
        value = int(text)
    except ValueError:
        value = -3
    if value < 0:
        raise CliError(
            f"--time must be earliest, latest, max-timestamp or a timestamp in ms, not {text!r}",
            2,
        )
    return value


def parse_partitions(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        partitions = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise CliError(f"--partitions expects numbers like 0,1,2, not {text!r}", 2) from None
    if not partitions or partitions[0] < 0:
        raise CliError(f"--partitions expects numbers like 0,1,2, not {text!r}", 2)
    return partitions


def _get_offsets(args: argparse.Namespace) -> int:
    spec = parse_time(args.time)
    wanted = parse_partitions(args.partitions)
    bootstrap = bootstrap_of(args)

    async def look() -> dict[TopicPartition, int]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            partitions = await admin.metadata.partitions_or_error(args.topic)
            if wanted is not None:
                missing = [p for p in wanted if p not in partitions]
                if missing:
                    raise CliError(
                        f"topic '{args.topic}' has no partition {missing[0]} "
                        f"(it has {len(partitions)})"
                    )
            chosen = partitions if wanted is None else wanted
            return await admin.list_offsets([TopicPartition(args.topic, p) for p in chosen], spec)

    for tp, offset in sorted(run_async(look).items()):
        print(f"{tp.topic}:{tp.partition}:{'' if offset < 0 else offset}")
    return 0
