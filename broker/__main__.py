"""`python -m broker --config FILE [--override key=value ...]`: run one broker."""

from __future__ import annotations

import argparse
import sys

from server_common.malloc_tuning import tune_malloc
from server_common.server_main import add_server_arguments, keep_test_libraries_out, run_server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser, "broker", "broker.id=1")


def run(args: argparse.Namespace) -> int:
    keep_test_libraries_out()  # before the imports below
    tune_malloc()  # before the server allocates anything sizeable
    from broker.config import BrokerConfig
    from broker.server import run_broker

    return run_server(
        args,
        what="broker",
        make_config=BrokerConfig,
        log_name=lambda config: f"broker-{config.broker_id}",
        serve=run_broker,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
