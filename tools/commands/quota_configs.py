"""`tributary configs describe|alter` for client quotas, in the manner of kafka-configs.sh
with --bootstrap-server (KIP-546): `--entity-type clients|users` with `--entity-name X`
or `--entity-default`, or Kafka's `--user U` / `--user-defaults` and `--client C` /
`--client-defaults` (both together name a (user, client-id) entity).

How it works: `alter --entity-type clients --entity-name app --add-config
producer_byte_rate=1048576,consumer_byte_rate=2097152` sets the entity's quotas and
`--delete-config request_percentage` removes one, in one AlterClientQuotas request
(client/admin/quotas.py); the broker writes /config/clients/app (or /config/users/...)
and announces it, and every broker applies it at its next request. `describe` prints,
as kafka-configs does, `Quota configs for client-id 'app' are
producer_byte_rate=1048576.0` per matching entity (every entity of the type when no
name is given). `--entity-type users` with SCRAM mechanisms is user_configs.py's.
"""

from __future__ import annotations

import argparse

from client.admin import open_admin
from client.admin.quotas import ANY
from tools.commands.common import bootstrap_of, client_options, parse_config_pairs, run_async
from tools.errors import CliError

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
USER, CLIENT_ID = "user", "client-id"


def add_quota_entity_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", metavar="U", help="a user's quotas (with --client: both)")
    parser.add_argument("--user-defaults", action="store_true", help="the default user's")
    parser.add_argument("--client", metavar="C", help="a client-id's quotas")
    parser.add_argument("--client-defaults", action="store_true", help="the default client-id's")


def wants_quotas(args: argparse.Namespace) -> bool:
    return bool(
        args.entity_type == "clients"
        or args.user is not None
        or args.client is not None
        or args.user_defaults
        or args.client_defaults
    )


def is_quota_change(args: argparse.Namespace) -> bool:
    """True when every config an alter names is a quota (users' SCRAM ones are not)."""
    names = [
        part.split("=", 1)[0].strip()
        for item in [*args.add_config, *args.delete_config]
        for part in item.split(",")
        if part.strip()
    ]
    return bool(names) and all(name in QUOTA_KEYS for name in names)


def _usage(message: str) -> CliError:
    return CliError(message, exit_code=2)


def _entity(args: argparse.Namespace, *, for_alter: bool) -> dict[str, object]:
    """Entity type -> name (None: the default, ANY: every name, describe only)."""
    entity: dict[str, object] = {}

    def add(entity_type: str, name: str | None, default: bool, flag: str) -> None:
        if name is not None and default:
            raise _usage(f"give {flag} or its default, not both")
        if entity_type in entity:
            raise _usage(f"the {entity_type} is named twice")
        if default:
            entity[entity_type] = None
        elif name is not None:
            if not name:
                raise _usage(f"{flag} needs a non-empty name")
            entity[entity_type] = name
        elif for_alter:
            raise _usage(f"{flag} needs a name or its default")
        else:
            entity[entity_type] = ANY

    if args.topic is not None:
        raise _usage("--topic cannot be used with client quotas")
    if args.entity_type in ("users", "clients"):
        kind = USER if args.entity_type == "users" else CLIENT_ID
        add(kind, args.entity_name, args.entity_default, "--entity-name")
    elif args.entity_type is not None:
        raise _usage(f"--entity-type {args.entity_type} has no client quotas")
    if args.user is not None or args.user_defaults:
        add(USER, args.user, args.user_defaults, "--user")
    if args.client is not None or args.client_defaults:
        add(CLIENT_ID, args.client, args.client_defaults, "--client")
    if not entity:
        raise _usage("name a client quota entity: --entity-type clients|users, --user, --client")
    return entity


def _label(entity: dict[str, str | None]) -> str:
    parts = []
    for entity_type, noun in ((USER, "user-principal"), (CLIENT_ID, "client-id")):
        if entity_type in entity:
            name = entity[entity_type]
            parts.append(f"the default {noun}" if name is None else f"{noun} '{name}'")
    return ", ".join(parts)


def alter_quotas(args: argparse.Namespace) -> int:
    entity = _entity(args, for_alter=True)
    texts = parse_config_pairs(
        [p.strip() for item in args.add_config for p in item.split(",") if p.strip()],
        "--add-config",
    )
    remove = [p.strip() for item in args.delete_config for p in item.split(",") if p.strip()]
    if not texts and not remove:
        raise _usage("configs alter needs --add-config or --delete-config")
    values: dict[str, float] = {}
    for key, text in texts.items():
        if key not in QUOTA_KEYS:
            raise _usage(f"--add-config: {key[:50]!r} is not a quota ({', '.join(QUOTA_KEYS)})")
        try:
            values[key] = float(text)
        except ValueError:
            raise _usage(f"--add-config: {key} must be a number, not {text[:50]!r}") from None
    for key in remove:
        if key not in QUOTA_KEYS:
            raise _usage(f"--delete-config: {key[:50]!r} is not a quota")
    if both := sorted(set(values) & set(remove)):
        raise _usage(f"{both[0]} is both added and deleted")
    bootstrap = bootstrap_of(args)
    names: dict[str, str | None] = {k: v for k, v in entity.items() if isinstance(v, str | None)}

    async def alter():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.alter_client_quotas(names, values, remove)

    error = run_async(alter)
    if error is not None:
        raise CliError(str(error))
    print(f"Completed updating config for {_label(names)}.")
    return 0


def describe_quotas(args: argparse.Namespace) -> int:
    entity = _entity(args, for_alter=False)
    bootstrap = bootstrap_of(args)

    async def describe():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.describe_client_quotas(entity.items(), strict=True)

    for key, values in sorted(run_async(describe).items(), key=lambda kv: repr(kv[0])):
        shown = ",".join(f"{k}={v}" for k, v in sorted(values.items()))
        print(f"Quota configs for {_label(dict(key))} are {shown}")
    return 0
