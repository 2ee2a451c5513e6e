"""`tributary delete-records --offset-json-file F`, as kafka-delete-records.sh does it.

How it works: the file is Kafka's JSON,
`{"partitions":[{"topic":"t","partition":0,"offset":5}],"version":1}` (offset -1: up to
the high watermark). One admin client sends DeleteRecords to each partition's leader,
which moves the partition's log start offset and answers once its in-sync followers have
too; the output is Kafka's: "Executing records delete operation", "Records delete
operation completed:", then `partition: t-0<TAB>low_watermark: 5` or
`partition: t-0<TAB>error: ...` per partition. Unlike Kafka, the exit code is 1 when any
partition failed, so a script can tell.
"""

from __future__ import annotations

import argparse
import json

from client.admin import open_admin
from client.protocol.types import TopicPartition
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.errors import CliError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "delete-records", help="delete records below an offset (moves the log start offset)"
    )
    parser.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help='{"partitions":[{"topic":"t","partition":0,"offset":5}],"version":1}',
    )
    add_bootstrap_option(parser)
    parser.set_defaults(handler=_delete_records)


def parse_offset_json(text: str) -> dict[TopicPartition, int]:
    """Kafka's offset JSON -> {partition: offset}; `CliError` naming what is wrong."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise CliError(f"--offset-json-file: not valid JSON: {exc}", 2) from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise CliError('--offset-json-file: expected {"partitions": [...], "version": 1}', 2)
    offsets: dict[TopicPartition, int] = {}
    duplicates: list[str] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise CliError(f"--offset-json-file: partitions[{index}] is not an object", 2)
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            raise CliError(f'--offset-json-file: partitions[{index}] needs a "topic" string', 2)
        partition = _integer(entry, "partition", index)
        offset = _integer(entry, "offset", index)
        if partition < 0 or offset < -1:
            raise CliError(
                f"--offset-json-file: partitions[{index}]: partition must be >= 0 and offset "
                ">= -1 (-1: the high watermark)",
                2,
            )
        tp = TopicPartition(topic, partition)
        if tp in offsets:
            duplicates.append(f"{topic}-{partition}")
        offsets[tp] = offset
    if duplicates:
        raise CliError(
            "Offset json file contains duplicate topic partitions: " + ",".join(duplicates), 2
        )
    if not offsets:
        raise CliError("--offset-json-file: no partitions listed", 2)
    return offsets


def _integer(entry: dict, name: str, index: int) -> int:
    value = entry.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise CliError(f"--offset-json-file: partitions[{index}] needs an integer {name!r}", 2)
    return value


def _delete_records(args: argparse.Namespace) -> int:
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CliError(f"--offset-json-file: {exc.strerror}: {args.offset_json_file}", 2) from None
    offsets = parse_offset_json(text)
    bootstrap = bootstrap_of(args)
    print("Executing records delete operation", flush=True)

    async def delete():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.delete_records(offsets)

    results = run_async(delete)
    print("Records delete operation completed:")
    failed = False
    for tp in offsets:
        result = results[tp]
        if isinstance(result, int):
            print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {result}")
        else:
            failed = True
            print(f"partition: {tp.topic}-{tp.partition}\terror: {result}")
    return 1 if failed else 0
