"""`python -m controller --config FILE [--override key=value ...]`: run one controller."""

from __future__ import annotations

import argparse
import sys

from server_common.malloc_tuning import tune_malloc
from server_common.server_main import add_server_arguments, keep_test_libraries_out, run_server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser, "controller", "controller.id=1001")


def run(args: argparse.Namespace) -> int:
    keep_test_libraries_out()  # before the imports below
    tune_malloc()  # before the server allocates anything sizeable
    from controller.config import ControllerConfig
    from controller.server import run_controller

    return run_server(
        args,
        what="controller",
        make_config=ControllerConfig,
        log_name=lambda config: f"controller-{config.controller_id}",
        serve=run_controller,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
