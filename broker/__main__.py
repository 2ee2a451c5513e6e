"""`python -m broker --config FILE [--override key=value ...]`: run one broker."""

from __future__ import annotations

import argparse
import sys

import trio

from broker.config import BrokerConfig
from broker.server import run_broker
from client.logging_setup import configure_logging
from client.properties import ConfigError, parse_overrides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="a broker properties file (Kafka's server.properties)")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one property (repeatable), e.g. --override broker.id=1",
    )
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING...")


def run(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.config, parse_overrides(args.override))
    except ConfigError as exc:
        print(f"error: bad broker configuration: {exc}", file=sys.stderr)
        return 2
    configure_logging(f"broker-{config.broker_id}", args.log_level)
    try:
        trio.run(run_broker, config)
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
