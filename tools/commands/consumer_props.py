"""`--consumer-props k=v ...` (as `--producer-props`): consumer settings by their Kafka
names, for the settings that have no flag of their own.

How it works: each `name=value` is checked against the settings known here (KIP-392's
`client.rack`) and becomes `open_consumer`'s keyword (Kafka's name in snake_case); an
unknown name is a usage error (exit 2) naming what is accepted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tools.commands.producer_props import parse_props


def _rack(text: str) -> str:
    if len(text) > 255:
        raise ValueError("a rack id of at most 255 characters")
    return text


SETTINGS: dict[str, Callable[[str], Any]] = {"client.rack": _rack}


def add_consumer_props(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--consumer-props",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="consumer settings by their Kafka names: " + ", ".join(SETTINGS),
    )


def consumer_props(args: argparse.Namespace) -> dict[str, Any]:
    """`--consumer-props` as `open_consumer` keyword arguments; `CliError` if bad."""
    return parse_props("--consumer-props", getattr(args, "consumer_props", None), SETTINGS)
