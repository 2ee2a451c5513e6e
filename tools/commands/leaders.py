"""`tributary leaders elect-preferred [--topic T]`: move leadership back to preferred replicas.

How it works: one ElectLeaders request (preferred election) for every partition of the
topic, or of the cluster; the results are printed in the words of
kafka-leader-election.sh. A partition whose preferred replica already leads is not a
failure; any other per-partition error makes the command exit 1.
"""

from __future__ import annotations

import argparse

from client.admin import open_admin
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.errors import CliError


def register(subparsers) -> None:
    leaders = subparsers.add_parser("leaders", help="leader elections")
    actions = leaders.add_subparsers(dest="action", metavar="ACTION", required=True)
    elect = actions.add_parser(
        "elect-preferred", help="make each partition's first replica its leader again"
    )
    elect.add_argument("--topic", metavar="T", help="only this topic (default: every topic)")
    elect.add_argument(
        "--timeout-ms", type=int, default=30_000, metavar="MS", help="wait this long for it"
    )
    add_bootstrap_option(elect)
    elect.set_defaults(handler=_elect_preferred)


def _elect_preferred(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def elect() -> dict[TopicPartition, TributaryError | None]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.elect_preferred_leaders(args.topic, timeout_ms=args.timeout_ms)

    results = run_async(elect)
    elected = sorted(tp for tp, error in results.items() if error is None)
    not_needed = sorted(
        tp
        for tp, error in results.items()
        if error is not None and error.code is ErrorCode.ELECTION_NOT_NEEDED
    )
    failed = sorted(
        (tp, error)
        for tp, error in results.items()
        if error is not None and error.code is not ErrorCode.ELECTION_NOT_NEEDED
    )
    if elected:
        names = ", ".join(map(str, elected))
        print(f"Successfully completed leader election (PREFERRED) for partitions {names}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(map(str, not_needed))}")
    if not results:
        print("No partitions to elect leaders for")
    for tp, error in failed:
        print(f"Error completing leader election (PREFERRED) for partition: {tp}: {error}")
    if failed:
        raise CliError(f"leader election failed for {len(failed)} partition(s)")
    return 0
