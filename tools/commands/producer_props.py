"""`--producer-props k=v ...` (Kafka's flag of kafka-producer-perf-test.sh): producer
settings by their Kafka names, for the settings that have no flag of their own.

How it works: each `name=value` is checked against the settings known here (`client.id`, the
client-id the brokers see in every request header and apply client quotas to, and the
KIP-794 partitioner's) and converted to `open_producer`'s keyword (Kafka's name in snake_case)
and type; an unknown name or a bad value is a usage error (exit 2) naming what is
accepted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tools.errors import CliError


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("true or false")
    return lowered == "true"


def _milliseconds(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("a number of milliseconds, 0 or more")
    return value


def _client_id(text: str) -> str:
    if len(text) > 255:
        raise ValueError("at most 255 characters")
    return text


SETTINGS: dict[str, Callable[[str], Any]] = {
    "client.id": _client_id,  # the request header's client-id (client quotas)
    "partitioner.adaptive.partitioning.enable": _boolean,
    "partitioner.availability.timeout.ms": _milliseconds,
    "partitioner.ignore.keys": _boolean,
}


def add_producer_props(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--producer-props",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="producer settings by their Kafka names: " + ", ".join(SETTINGS),
    )


def producer_props(args: argparse.Namespace) -> dict[str, Any]:
    """`--producer-props` as `open_producer` keyword arguments; `CliError` if bad."""
    return parse_props("--producer-props", getattr(args, "producer_props", None), SETTINGS)


def parse_props(
    flag: str, items: list[str] | None, settings: dict[str, Callable[[str], Any]]
) -> dict[str, Any]:
    """`NAME=VALUE` items as keyword arguments (Kafka's name in snake_case) for the
    `settings` known; `CliError` (exit 2) naming `flag` if one is bad."""
    options: dict[str, Any] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in settings:
            raise CliError(
                f"{flag}: {item!r} is not NAME=VALUE with a NAME among " + ", ".join(settings),
                exit_code=2,
            )
        try:
            value = settings[name](text.strip())
        except ValueError as exc:
            reason = str(exc) if not str(exc).startswith("invalid literal") else "a number"
            raise CliError(f"{flag}: {name} must be {reason}, not {text!r}", exit_code=2) from None
        options[name.replace(".", "_")] = value
    return options
