"""`tributary log-dirs verify [--broker ID] [--topic T]`: an on-demand scrub of the logs.

How it works: one VerifyLogDirs request (Tributary's own API) to each live broker, or to
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
`log-dirs describe` will live here too.
"""

from __future__ import annotations

import argparse

from client.admin import open_admin
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from tools.commands.common import add_bootstrap_option, bootstrap_of, run_async
from tools.errors import CliError

DEFAULT_TIMEOUT_MS = 60_000
_SETTLED = (m.RANGE_REPAIRED, m.RANGE_DROPPED)


def register(subparsers) -> None:
    log_dirs = subparsers.add_parser("log-dirs", help="brokers' log directories")
    actions = log_dirs.add_subparsers(dest="action", metavar="ACTION", required=True)
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


def _verify(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def verify():
        async with open_admin(bootstrap) as admin:
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
