"""`tributary log-dirs describe|verify`: the brokers' log directories.

`describe [--broker-list 1,2] [--topic-list t1,t2]` prints them as kafka-log-dirs.sh
--describe does; `verify [--broker ID] [--topic T]` is an on-demand scrub of the logs.

How it works (`describe`): one DescribeLogDirs to every broker asked (all the live ones
by default), concurrently, through the admin client; the answer is Kafka's layout: two
lines saying which brokers were asked and which answered, then one JSON document with,
per broker and log dir, each replica's `size`, `offsetLag` (the leader's high watermark
minus this replica's log end offset, 0 on the leader) and `isFuture` (always false: no
replica moves between log dirs here), plus Tributary's `logEndOffset`, `highWatermark`
and `isLeader`. A broker that does not answer gets an `error` instead of `logDirs`.

How it works (`verify`): one VerifyLogDirs request (Tributary's own API) to each live broker, or to
the one given, all at once. Each broker checks every batch of its logs (of the topic)
against its CRC-32C, repairs damaged ranges from an in-sync replica (the scrubber's
repair: a follower refetches them from its leader, a leader first hands its leadership
over) and answers, within `--timeout-ms`, what it checked and each damaged range's fate.

Why the brokers and not the files: only the broker that owns a log dir may change it
(it holds the dir's lock, and appends, retention, compaction and truncation move its
segments under any outside reader), only it knows the partition's leader, ISR and high
watermark that a repair needs, and it works the same for a cluster in Docker or on other
hosts as for the local one.

Output: one line per partition with damage (`BROKER TOPIC-PARTITION OFFSETS SEGMENT
STATUS DETAIL`), then a summary per broker (`broker 2: 14 partition(s), 5210 batch(es),
12.3 MiB checked, 1 damaged range(s): 1 repaired`). Exit code 0 when nothing damaged is
left (none found, or all repaired), 1 otherwise or when a broker could not be asked.
"""

from __future__ import annotations

import argparse
import json

from client.admin import LogDirDescription, open_admin
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.errors import CliError

DEFAULT_TIMEOUT_MS = 60_000
_SETTLED = (m.RANGE_REPAIRED, m.RANGE_DROPPED)


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
    verify = actions.add_parser(
        "verify", help="check every batch's CRC now, repair damaged ranges, report"
    )
    verify.add_argument("--broker", type=int, metavar="ID", help="only this broker")
    verify.add_argument("--topic", metavar="T", help="only this topic")
    verify.add_argument(
        "--timeout-ms",
        type=int,
        default=DEFAULT_TIMEOUT_MS,
        metavar="MS",
        help=f"wait this long for repairs (default {DEFAULT_TIMEOUT_MS})",
    )
    add_bootstrap_option(verify)
    verify.set_defaults(handler=_verify)


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


def _verify(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def verify():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.verify_log_dirs(
                None if args.broker is None else [args.broker],
                None if args.topic is None else [args.topic],
                repair_timeout_ms=args.timeout_ms,
            )

    answers = run_async(verify)
    failures = 0
    for broker_id, answer in sorted(answers.items()):
        if isinstance(answer, TributaryError):
            print(f"broker {broker_id}: not verified: {answer}")
            failures += 1
            continue
        if answer.error_code != ErrorCode.NONE:
            code = ErrorCode.from_code(answer.error_code)
            print(f"broker {broker_id}: not verified: {code.name}: {answer.error_message}")
            failures += 1
            continue
        failures += _print_broker(answer)
    if failures:
        raise CliError(f"{failures} damaged range(s) or broker(s) not settled")
    return 0


def _print_broker(answer: m.VerifyLogDirsResponse) -> int:
    """Lines for one broker's answer; how many ranges are still damaged."""
    ranges = [(p, r) for p in answer.partitions for r in p.ranges]
    for p, r in ranges:
        print(
            f"broker {answer.broker_id}  {p.topic}-{p.partition}  offsets "
            f"{r.first_offset}..{r.last_offset}  segment {r.segment_base_offset}  "
            f"{r.status}  {r.detail}"
        )
    by_status: dict[str, int] = {}
    for _, r in ranges:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    fates = ", ".join(f"{n} {status}" for status, n in sorted(by_status.items()))
    mib = sum(p.bytes for p in answer.partitions) / (1024 * 1024)
    print(
        f"broker {answer.broker_id}: {len(answer.partitions)} partition(s), "
        f"{sum(p.batches for p in answer.partitions)} batch(es), {mib:.1f} MiB checked, "
        f"{len(ranges)} damaged range(s)" + (f": {fates}" if fates else "")
    )
    return sum(1 for _, r in ranges if r.status not in _SETTLED)
