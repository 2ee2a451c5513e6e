"""`tributary configs describe|alter --topic T`, in the manner of kafka-configs.sh.

How it works: `describe` asks any broker (DescribeConfigs) and prints, as kafka-configs
does, `Dynamic configs for topic T are:` and one `  name=value` line per override (with
`--all`, every effective value, marked `(default)` where no override applies). `alter`
sends one IncrementalAlterConfigs: `--add-config k=v[,k=v]` sets overrides,
`--delete-config k[,k]` removes them; the broker validates (names, values,
min.insync.replicas against the replication factor), writes /config/topics/<t> and
announces the change under /config/changes, which every broker watches and applies to
its running logs without a restart.
"""

from __future__ import annotations

import argparse

from client.admin import open_admin
from tools.commands.common import (
    add_bootstrap_option,
    bootstrap_of,
    client_options,
    parse_config_pairs,
    run_async,
)
from tools.errors import CliError


def register(subparsers) -> None:
    configs = subparsers.add_parser("configs", help="describe and alter topic configs")
    actions = configs.add_subparsers(dest="action", metavar="ACTION", required=True)

    describe = actions.add_parser("describe", help="a topic's config overrides")
    describe.add_argument("--topic", required=True, metavar="T")
    describe.add_argument("--all", action="store_true", help="every effective value")
    add_bootstrap_option(describe)
    describe.set_defaults(handler=_describe)

    alter = actions.add_parser("alter", help="set or delete a topic's config overrides")
    alter.add_argument("--topic", required=True, metavar="T")
    alter.add_argument(
        "--add-config", action="append", default=[], metavar="K=V[,K=V]", help="set overrides"
    )
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="K[,K]", help="remove overrides"
    )
    add_bootstrap_option(alter)
    alter.set_defaults(handler=_alter)


def _describe(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def describe() -> tuple[dict[str, str], dict[str, str]]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            await admin.metadata.partitions_or_error(args.topic)  # "does not exist", one line
            everything = await admin.describe_configs([args.topic])
            overrides = await admin.describe_configs([args.topic], overrides_only=True)
            return everything.get(args.topic, {}), overrides.get(args.topic, {})

    everything, overrides = run_async(describe)
    print(f"{'All' if args.all else 'Dynamic'} configs for topic {args.topic} are:")
    shown = everything if args.all else overrides
    for name in sorted(shown):
        default = " (default)" if args.all and name not in overrides else ""
        print(f"  {name}={shown[name]}{default}")
    return 0


def _split(items: list[str]) -> list[str]:
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def _alter(args: argparse.Namespace) -> int:
    to_set = parse_config_pairs(_split(args.add_config), "--add-config")
    to_delete = _split(args.delete_config)
    if not to_set and not to_delete:
        raise CliError("configs alter needs --add-config or --delete-config", exit_code=2)
    if both := sorted(set(to_set) & set(to_delete)):
        raise CliError(f"{both[0]} is both added and deleted", exit_code=2)
    bootstrap = bootstrap_of(args)

    async def alter():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            results = await admin.alter_topic_configs(
                [args.topic], set_configs=to_set, delete_configs=to_delete
            )
            return results.get(args.topic)

    error = run_async(alter)
    if error is not None:
        raise CliError(str(error))
    print(f"Completed updating config for topic {args.topic}.")
    return 0
