"""`tributary cluster watch`'s command line: its options and their defaults.

The command itself (tools/commands/watch.py: rich, the snapshot reader, the admin client)
is imported only when it runs, so that every other command starts without loading it.
"""

from __future__ import annotations

import argparse

DEFAULT_INTERVAL_S = 1.0
DEFAULT_BROKER_TIMEOUT_S = 1.5  # a broker silent this long is shown as not answering


def register_watch(subparsers) -> None:
    watch = subparsers.add_parser(
        "watch",
        help="live view: leaders, ISR, HW/LEO per replica, events (Ctrl-C to quit)",
    )
    watch.add_argument(
        "--interval", type=float, default=DEFAULT_INTERVAL_S, help="seconds between frames"
    )
    watch.add_argument("--once", action="store_true", help="print one frame and exit")
    watch.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/chroot]",
        default=None,
        help="the cluster's ZooKeeper (default: the local cluster's)",
    )
    watch.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_BROKER_TIMEOUT_S,
        help="seconds to wait for each broker's answer",
    )
    watch.add_argument(
        "--internal", action="store_true", help="also show internal topics (__consumer_offsets)"
    )
    watch.add_argument(
        "--no-groups", action="store_true", help="do not ask the brokers for consumer groups"
    )
    watch.add_argument(
        "--width", type=int, default=None, help="columns to draw in (default: the terminal's)"
    )
    watch.set_defaults(handler=_watch)


def _watch(args: argparse.Namespace) -> int:
    from tools.commands.watch import watch_command

    return watch_command(args)
