"""The `tributary` command line, in the conventions of Kafka's tools.

Every command is a function taking the parsed arguments and returning an exit code.
`main` turns any `CliError` (and any other failure) into one clear line on stderr and a
non-zero exit: users never see a traceback for bad input or an unreachable broker.
The command modules (and the client library they use) are imported inside `main`, so a
Ctrl-C while they load exits with 130 like a Ctrl-C at any later point, not with a
traceback from the middle of an import.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from client import __version__
from tools.commands import COMMAND_MODULES
from tools.errors import CliError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        raise CliError(f"{self.prog}: {message} (see --help)", exit_code=2)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: imports every command module."""
    from tools.commands.common import add_command_config_option, add_request_timeout_option

    parser = _Parser(
        prog="tributary",
        description="Tributary: a replicated, partitioned commit-log broker (Kafka-style).",
    )
    parser.add_argument("--version", action="version", version=f"tributary {__version__}")
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        default=None,
        help="brokers to bootstrap from (default: the running local cluster, else localhost:9092)",
    )
    add_request_timeout_option(parser)
    add_command_config_option(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"tools.commands.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Library chatter (kazoo's reconnect warnings) is not for CLI users.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 0
        return int(handler(args) or 0)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the last line of defence: one line, never a traceback
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
