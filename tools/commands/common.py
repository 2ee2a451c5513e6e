"""Helpers shared by the data and admin CLI commands (topics, produce, consume, ...).

How it works: a command's handler builds its work as one coroutine and runs it with
`run_async()`, which starts Trio and turns every failure a user can cause into a
`CliError` with one clear line: an unreachable cluster ("cannot reach any broker at
HOST:PORT (...)"), a missing topic ("topic 'x' does not exist"), a broker error code,
a malformed address. Trio's exception groups are unwrapped first, so the user never
sees one, and the client libraries' log warnings stay off stderr (set
TRIBUTARY_LOG_LEVEL=INFO to see them). `add_bootstrap_option()` lets
`--bootstrap-server` also follow the command, as in Kafka's tools
(`tributary topics list --bootstrap-server host:9092`), and so can `--command-config
FILE`, Kafka's client properties file whose security settings `client_options()` passes
to the client library.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import trio

from client.metadata import NoBrokersAvailableError, UnknownTopicError, parse_bootstrap
from client.protocol.errors import TributaryError
from client.security.secure_connector import SecurityConfig
from server_common.logging_setup import configure_logging
from server_common.properties import ConfigError, read_properties
from tools.cluster.state import default_bootstrap
from tools.errors import CliError

T = TypeVar("T")


def add_bootstrap_option(parser: argparse.ArgumentParser) -> None:
    """`--bootstrap-server` (and `--request-timeout-ms`) after the command too; unset
    unless given (so that it never overrides the global option with a default)."""
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        default=argparse.SUPPRESS,
        help="brokers to bootstrap from (default: the running local cluster, else localhost:9092)",
    )
    add_request_timeout_option(parser, default=argparse.SUPPRESS)
    add_command_config_option(parser, default=argparse.SUPPRESS)


def add_command_config_option(parser: argparse.ArgumentParser, default=None) -> None:
    """Kafka's tools' `--command-config FILE`: client properties (security.protocol,
    sasl.mechanism, sasl.jaas.config, ssl.truststore.location...)."""
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        default=default,
        help="Kafka client properties for connecting (security.protocol, sasl.mechanism, "
        "sasl.jaas.config, ssl.truststore.location, ssl.keystore.location: PEM files)",
    )


def security_options(path: str | None) -> dict[str, Any]:
    """The client library's security keyword arguments from a `--command-config` file;
    `CliError` (exit 2) with one line when it is unreadable or wrong. Without one, a
    secure local cluster's `admin.properties` (`tributary cluster up --secure`)."""
    if not path:
        from tools.cluster.secure import default_command_config

        path = default_command_config()
    if not path:
        return {}
    try:
        security = SecurityConfig.from_properties(read_properties(path))
    except (ConfigError, ValueError) as exc:
        raise CliError(f"--command-config {path}: {exc}", exit_code=2) from None
    if security.security_protocol == "PLAINTEXT":
        return {}
    return {
        field.name: getattr(security, field.name)
        for field in dataclasses.fields(security)
        if getattr(security, field.name) != field.default
    }


def add_request_timeout_option(parser: argparse.ArgumentParser, default=None) -> None:
    """Kafka's `request.timeout.ms` as `--request-timeout-ms` (every client command)."""
    parser.add_argument(
        "--request-timeout-ms",
        type=positive_int,
        metavar="MS",
        default=default,
        help="how long to wait for each broker answer (Kafka's request.timeout.ms; default 30000)",
    )


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """Client settings given on the command line, as `open_*` keyword arguments."""
    timeout = getattr(args, "request_timeout_ms", None)
    options = security_options(getattr(args, "command_config", None))
    if timeout is not None:
        options["request_timeout_ms"] = timeout
    return options


def bootstrap_of(args: argparse.Namespace) -> str:
    """The bootstrap servers for this invocation; `CliError` if malformed."""
    servers = default_bootstrap(getattr(args, "bootstrap_server", None))
    try:
        parse_bootstrap(servers)
    except ValueError as exc:
        raise CliError(f"--bootstrap-server: {exc}", exit_code=2) from None
    return servers


def quiet_logging() -> None:
    """Commands report failures themselves, one line each: keep the clients' warnings
    (retries, refresh failures) off stderr unless TRIBUTARY_LOG_LEVEL asks for logs or
    logging is already configured."""
    root = logging.getLogger()
    if root.handlers:
        return
    level = os.environ.get("TRIBUTARY_LOG_LEVEL")
    if level:
        configure_logging("cli", level)
    else:
        root.addHandler(logging.NullHandler())


def run_async(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`trio.run(fn, *args)`, with failures turned into one-line `CliError`s."""
    quiet_logging()
    try:
        return trio.run(fn, *args)
    except BaseException as exc:
        leaf = _interesting_leaf(exc)
        translated = translate_error(leaf)
        if translated is leaf:
            raise leaf from None
        raise translated from None


def translate_error(exc: BaseException) -> BaseException:
    """The `CliError` a user should see for `exc` (or `exc` itself if it is not ours)."""
    if isinstance(exc, CliError | KeyboardInterrupt | BrokenPipeError):
        return exc
    if isinstance(exc, NoBrokersAvailableError | UnknownTopicError):
        return CliError(str(exc))
    if isinstance(exc, TributaryError):
        return CliError(str(exc))
    return exc


def _interesting_leaf(exc: BaseException) -> BaseException:
    """The exception that matters inside (possibly nested) exception groups: a
    KeyboardInterrupt first, then the first one that is not a cancellation."""
    leaves = list(_leaves(exc))
    for leaf in leaves:
        if isinstance(leaf, KeyboardInterrupt):
            return leaf
    for leaf in leaves:
        if not isinstance(leaf, trio.Cancelled):
            return leaf
    return leaves[0] if leaves else exc


def _leaves(exc: BaseException) -> Iterable[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def parse_config_pairs(pairs: Iterable[str], option: str = "--config") -> dict[str, str]:
    """`["k=v", ...]` as a dict; `CliError` (exit 2) for an item without `=`."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise CliError(f"{option} expects NAME=VALUE, got {pair!r}", exit_code=2)
        out[name.strip()] = value.strip()
    return out


def text_or_none(data: bytes | None) -> str | None:
    """Bytes shown as UTF-8 text (undecodable bytes replaced); None stays None."""
    return None if data is None else data.decode("utf-8", errors="replace")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value
