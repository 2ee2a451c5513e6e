"""`python -m controller --config FILE [--override key=value ...]`: run one controller."""

from __future__ import annotations

import argparse
import logging
import sys

import trio

from client.logging_setup import configure_logging
from client.properties import ConfigError, parse_overrides
from controller.config import ControllerConfig
from controller.server import run_controller


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="a controller properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one property (repeatable), e.g. --override controller.id=1",
    )
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING...")


def run(args: argparse.Namespace) -> int:
    try:
        config = ControllerConfig.load(args.config, parse_overrides(args.override))
    except ConfigError as exc:
        print(f"error: bad controller configuration: {exc}", file=sys.stderr)
        return 2
    configure_logging(f"controller-{config.controller_id}", args.log_level)
    try:
        trio.run(run_controller, config)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # e.g. ZooKeeper unreachable at start: one line, not a trace
        while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        logging.getLogger("controller").error("controller stopped: %r", exc)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
