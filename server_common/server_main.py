"""What the server processes (broker, controller) share at their edges: the command
line (`--config FILE`, repeatable `--override key=value`, `--log-level`), turning a bad
configuration or a fatal start-up error into one line and an exit code, and running a
callback when SIGTERM or SIGINT arrives.

`keep_test_libraries_out()` runs first in a server process: kio (the Kafka listener's
schema library) imports hypothesis, and through it pytest, whenever they are installed
(as in development and CI), which cost a server process 15 MB of memory and a second of
start-up for nothing. Marking hypothesis absent makes kio skip it, as it does where
hypothesis is not installed. Only server entry points call it: a test process that
imports the broker in-process keeps its hypothesis. `run_server` also freezes the objects
of start-up before serving (`freeze_startup_objects`), so that garbage collections walk
only what serving allocates.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from server_common.logging_setup import configure_logging
from server_common.properties import ConfigError, load_properties, parse_overrides


def add_server_arguments(parser: argparse.ArgumentParser, what: str, example: str) -> None:
    parser.add_argument("--config", help=f"a {what} properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"set one property (repeatable), e.g. --override {example}",
    )
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING...")


def keep_test_libraries_out() -> None:
    """Make `import hypothesis` fail in this (server) process unless already imported."""
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def freeze_startup_objects() -> None:
    """Move everything allocated so far (modules, classes, functions: most of a server's
    objects) out of the garbage collector's sight (`gc.freeze`): a full collection then
    walks only what the server allocated since, which cut its pauses, and so the
    worst-case request latency, on a busy broker."""
    gc.collect()
    gc.freeze()


def run_server(
    args: argparse.Namespace,
    *,
    what: str,
    make_config: Callable[[dict[str, str]], Any],
    log_name: Callable[[Any], str],
    serve: Callable[[Any], Awaitable[None]],
) -> int:
    """Load the configuration, set up logging and run `serve(config)` until it returns."""
    try:
        config = make_config(load_properties(args.config, parse_overrides(args.override)))
    except ConfigError as exc:
        print(f"error: bad {what} configuration: {exc}", file=sys.stderr)
        return 2
    configure_logging(log_name(config), args.log_level)
    freeze_startup_objects()
    try:
        trio.run(serve, config)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # e.g. ZooKeeper unreachable at start: one line, not a trace
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
            cause = cause.exceptions[0]
        logging.getLogger(what).error("%s stopped: %r", what, cause)
        return 1
    return 0


async def call_on_termination(callback: Callable[[], None], action: str) -> None:
    """Wait for SIGTERM or SIGINT, log it, call `callback` once."""
    log = logging.getLogger(__name__)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("received %s: %s", signal.Signals(signum).name, action)
            callback()
            return
