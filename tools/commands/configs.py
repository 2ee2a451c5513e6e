"""`tributary configs describe|alter`, in the manner of kafka-configs.sh: topic configs
(`--topic T`, or `--entity-type topics --entity-name T`) and broker configs
(`--entity-type brokers` with `--entity-name <id>` or `--entity-default`).

How it works: `describe` asks a broker (DescribeConfigs; a broker's own configs are
asked of that broker) and prints, as kafka-configs does, `Dynamic configs for topic T
are:` and one `  name=value` line per override, or for a broker `Dynamic configs for
broker 1 are:` (`Default configs for brokers in the cluster are:`) and one
`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` line per dynamic
config; with `--all`, every effective value (marked `(default)` for topics where no
override applies). `alter` sends one IncrementalAlterConfigs: `--add-config
k=v[,k=v]` sets, `--delete-config k[,k]` removes. The broker validates (names, values,
read-only broker configs, min.insync.replicas against the replication factor), writes
/config/topics/<t> or /config/brokers/<id|<default>> and announces the change under
/config/changes, which every broker watches and applies without a restart.
`--entity-type users` (users' SCRAM credentials) is user_configs.py's; client quotas
(`--entity-type clients|users` with quota configs, `--user`, `--client`) are
quota_configs.py's.
"""

from __future__ import annotations

import argparse

from client.admin import ConfigEntry, open_admin
from tools.commands import quota_configs, user_configs
from tools.commands.common import (
    add_bootstrap_option,
    bootstrap_of,
    client_options,
    parse_config_pairs,
    run_async,
)
from tools.errors import CliError


def _add_entity_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", metavar="T", help="the topic (same as --entity-type topics)")
    parser.add_argument(
        "--entity-type",
        choices=("topics", "brokers", "users", "clients"),
        help="topics, brokers, users or clients",
    )
    parser.add_argument(
        "--entity-name", metavar="NAME", help="a topic name, a broker id or a user name"
    )
    parser.add_argument(
        "--entity-default",
        action="store_true",
        help="the cluster-wide broker defaults (with --entity-type brokers), the default "
        "user's or client-id's quotas (with users, clients)",
    )
    quota_configs.add_quota_entity_options(parser)


def register(subparsers) -> None:
    configs = subparsers.add_parser(
        "configs", help="describe and alter topic, broker and user (SCRAM) configs"
    )
    actions = configs.add_subparsers(dest="action", metavar="ACTION", required=True)

    describe = actions.add_parser("describe", help="a topic's or broker's dynamic configs")
    _add_entity_options(describe)
    describe.add_argument("--all", action="store_true", help="every effective value")
    add_bootstrap_option(describe)
    describe.set_defaults(handler=_describe)

    alter = actions.add_parser("alter", help="set or delete a topic's or broker's configs")
    _add_entity_options(alter)
    alter.add_argument(
        "--add-config", action="append", default=[], metavar="K=V[,K=V]", help="set configs"
    )
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="K[,K]", help="remove configs"
    )
    add_bootstrap_option(alter)
    alter.set_defaults(handler=_alter)


def _entity(args: argparse.Namespace) -> tuple[str | None, int | None, str]:
    """(topic, broker id, how to name it in messages); broker id None with no topic is
    the cluster default."""
    if args.topic is not None:
        if args.entity_type not in (None, "topics") or args.entity_default:
            raise CliError("--topic cannot be used with broker options", exit_code=2)
        if args.entity_name is not None and args.entity_name != args.topic:
            raise CliError("--topic and --entity-name name different topics", exit_code=2)
        return args.topic, None, f"topic {args.topic}"
    if args.entity_type is None:
        raise CliError("give --topic T or --entity-type topics|brokers|users", exit_code=2)
    if args.entity_type == "topics":
        if args.entity_default or not args.entity_name:
            raise CliError("--entity-type topics needs --entity-name T", exit_code=2)
        return args.entity_name, None, f"topic {args.entity_name}"
    if args.entity_default:
        if args.entity_name is not None:
            raise CliError("give --entity-name or --entity-default, not both", exit_code=2)
        return None, None, "brokers in the cluster"
    if args.entity_name is None:
        raise CliError(
            "--entity-type brokers needs --entity-name ID or --entity-default", exit_code=2
        )
    try:
        broker_id = int(args.entity_name)
    except ValueError:
        raise CliError(
            f"--entity-name: broker id must be an integer, not {args.entity_name!r}", exit_code=2
        ) from None
    return None, broker_id, f"broker {broker_id}"


def _describe(args: argparse.Namespace) -> int:
    if quota_configs.wants_quotas(args):
        return quota_configs.describe_quotas(args)
    if args.entity_type == "users":
        if args.entity_name is not None or args.entity_default:
            quota_configs.describe_quotas(args)
        if args.entity_default:
            return 0
        return user_configs.describe_users(args)
    topic, broker_id, label = _entity(args)
    bootstrap = bootstrap_of(args)
    if topic is not None:
        return _describe_topic(args, topic, bootstrap)

    async def describe() -> list[ConfigEntry]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.describe_config_entries(broker_id=broker_id)

    entries = run_async(describe)
    default = broker_id is None
    wanted = "DYNAMIC_DEFAULT_BROKER_CONFIG" if default else "DYNAMIC_BROKER_CONFIG"
    if args.all:
        print(f"All configs for {label} are:")
    else:
        print(f"{'Default' if default else 'Dynamic'} configs for {label} are:")
        entries = [e for e in entries if e.source == wanted]
    for entry in sorted(entries, key=lambda e: e.name):
        synonyms = ", ".join(f"{source}:{name}={value}" for source, name, value in entry.synonyms)
        sensitive = "true" if entry.sensitive else "false"
        print(f"  {entry.name}={entry.value} sensitive={sensitive} synonyms={{{synonyms}}}")
    return 0


def _describe_topic(args: argparse.Namespace, topic: str, bootstrap: str) -> int:
    async def describe() -> tuple[dict[str, str], dict[str, str]]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            await admin.metadata.partitions_or_error(topic)  # "does not exist", one line
            everything = await admin.describe_configs([topic])
            overrides = await admin.describe_configs([topic], overrides_only=True)
            return everything.get(topic, {}), overrides.get(topic, {})

    everything, overrides = run_async(describe)
    print(f"{'All' if args.all else 'Dynamic'} configs for topic {topic} are:")
    shown = everything if args.all else overrides
    for name in sorted(shown):
        default = " (default)" if args.all and name not in overrides else ""
        print(f"  {name}={shown[name]}{default}")
    return 0


def _split(items: list[str]) -> list[str]:
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def _alter(args: argparse.Namespace) -> int:
    if quota_configs.wants_quotas(args) or (
        args.entity_type == "users" and quota_configs.is_quota_change(args)
    ):
        return quota_configs.alter_quotas(args)
    if args.entity_type == "users":
        return user_configs.alter_users(args)
    topic, broker_id, label = _entity(args)
    to_set = parse_config_pairs(_split(args.add_config), "--add-config")
    to_delete = _split(args.delete_config)
    if not to_set and not to_delete:
        raise CliError("configs alter needs --add-config or --delete-config", exit_code=2)
    if both := sorted(set(to_set) & set(to_delete)):
        raise CliError(f"{both[0]} is both added and deleted", exit_code=2)
    bootstrap = bootstrap_of(args)

    async def alter():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.alter_configs_incrementally(
                topic=topic, broker_id=broker_id, set_configs=to_set, delete_configs=to_delete
            )

    error = run_async(alter)
    if error is not None:
        raise CliError(str(error))
    if topic is not None:
        print(f"Completed updating config for topic {topic}.")
    elif broker_id is None:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for broker {broker_id}.")
    return 0
