"""`tributary acls --add|--remove|--list`, in the manner of kafka-acls.sh.

How it works: the resources come from `--topic T`, `--group G`, `--cluster` and
`--transactional-id ID` (each may repeat), named as `--resource-pattern-type` says:
literal (the default; "*" is every resource of the type) or prefixed; `--list` and
`--remove` also take match (every ACL that applies to the named resource) and any.
`--add` grants each `--allow-principal` from each `--allow-host` (default "*") and
denies each `--deny-principal` from each `--deny-host`, for each `--operation` (default
All), through CreateAcls; `--remove` deletes what those options select (every ACL of
the resource when no principal is given) through DeleteAcls; `--list` prints the ACLs
of the resources (all of them with no resource), optionally only a `--principal`'s.
`--producer` stands for Write, Describe and Create on the topics (Write and Describe on
a `--transactional-id`, IdempotentWrite on the cluster with `--idempotent`),
`--consumer` for Read and Describe on the topics and Read on the `--group`s, as in
kafka-acls. Output follows kafka-acls: "Current ACLs for resource `ResourcePattern(resourceType=
TOPIC, name=T, patternType=LITERAL)`:" then one tab-indented line per ACL. Bad
arguments are one line and exit 2, as in every command.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from client.admin import Acl, AclFilter, open_admin
from client.protocol.acl_types import AclOperation, PatternType, PermissionType, ResourceType
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.errors import CliError

CLUSTER_NAME = "kafka-cluster"
OPERATIONS = [op.title for op in AclOperation if op >= AclOperation.ALL]
PATTERN_TYPES = ("literal", "prefixed", "match", "any")


def register(subparsers) -> None:
    acls = subparsers.add_parser("acls", help="add, remove and list ACLs (kafka-acls.sh)")
    action = acls.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    acls.add_argument("--topic", action="append", default=[], metavar="T", help="a topic")
    acls.add_argument("--group", action="append", default=[], metavar="G", help="a group")
    acls.add_argument("--cluster", action="store_true", help="the cluster")
    acls.add_argument(
        "--transactional-id", action="append", default=[], metavar="ID", help="a transactional id"
    )
    acls.add_argument(
        "--resource-pattern-type",
        default="literal",
        type=str.lower,
        choices=PATTERN_TYPES,
        help="how resource names match (default literal; match and any for --list/--remove)",
    )
    for kind in ("allow", "deny"):
        acls.add_argument(
            f"--{kind}-principal",
            action="append",
            default=[],
            metavar="TYPE:NAME",
            help=f"principal to {kind} (User:bob, User:*)",
        )
        acls.add_argument(
            f"--{kind}-host",
            action="append",
            default=[],
            metavar="HOST",
            help=f"host the {kind} applies from (default: *)",
        )
    acls.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP",
        help=f"operation: {', '.join(OPERATIONS)} (default All)",
    )
    convenience = acls.add_mutually_exclusive_group()
    convenience.add_argument(
        "--producer",
        action="store_true",
        help="a producer's ACLs: Write, Describe, Create on the topics (Write, Describe on "
        "--transactional-id; IdempotentWrite on the cluster with --idempotent)",
    )
    convenience.add_argument(
        "--consumer",
        action="store_true",
        help="a consumer's ACLs: Read, Describe on the topics, Read on the groups",
    )
    acls.add_argument("--idempotent", action="store_true", help="with --producer")
    acls.add_argument("--principal", action="append", default=[], help="--list: only these")
    acls.add_argument("--force", action="store_true", help="accepted (no prompt is asked)")
    add_bootstrap_option(acls)
    acls.set_defaults(handler=_run)


# The option naming each resource type (for errors).
RESOURCE_OPTIONS = {
    ResourceType.TOPIC: "--topic",
    ResourceType.GROUP: "--group",
    ResourceType.TRANSACTIONAL_ID: "--transactional-id",
    ResourceType.CLUSTER: "--cluster",
}


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    for rtype, name in found:
        if not name:
            raise CliError(f"{RESOURCE_OPTIONS[rtype]}: the name is empty", exit_code=2)
    return found


def _principals(values: Iterable[str], option: str) -> list[str]:
    for value in values:
        kind, sep, name = value.partition(":")
        if not sep or not kind or not name:
            raise CliError(f"{option}: expected TYPE:NAME (User:bob), got {value!r}", exit_code=2)
    return list(values)


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    ops = []
    for text in args.operation or ["All"]:
        try:
            op = AclOperation.parse(text)
        except ValueError:
            raise CliError(
                f"--operation: unknown {text!r} (one of {', '.join(OPERATIONS)})", exit_code=2
            ) from None
        if op < AclOperation.ALL:
            raise CliError(f"--operation: {text!r} cannot be granted", exit_code=2)
        ops.append(op)
    return ops


def _pattern_type(args: argparse.Namespace) -> PatternType:
    return PatternType.parse(args.resource_pattern_type)


def _describe_pattern(rtype: ResourceType, name: str, ptype: PatternType) -> str:
    return f"ResourcePattern(resourceType={rtype.name}, name={name}, patternType={ptype.name})"


def _run(args: argparse.Namespace) -> int:
    resources = _resources(args)
    pattern_type = _pattern_type(args)
    allow = _principals(args.allow_principal, "--allow-principal")
    deny = _principals(args.deny_principal, "--deny-principal")
    _principals(args.principal, "--principal")
    if args.producer or args.consumer:
        resources = _convenience_resources(args, resources)
    elif args.idempotent:
        raise CliError("--idempotent goes with --producer", exit_code=2)
    if args.add:
        return _add(args, resources, pattern_type, allow, deny)
    if args.remove:
        return _remove(args, resources, pattern_type, allow, deny)
    return _list(args, resources, pattern_type)


def _convenience_resources(args, resources):
    """--producer/--consumer: Kafka's AclCommand checks, and the cluster for --idempotent."""
    if args.list:
        raise CliError("--producer and --consumer go with --add or --remove", exit_code=2)
    if args.operation:
        raise CliError("--operation cannot be used with --producer or --consumer", exit_code=2)
    if not args.topic:
        raise CliError("--producer and --consumer need --topic", exit_code=2)
    if args.consumer and not args.group:
        raise CliError("--consumer needs --group", exit_code=2)
    if args.producer and args.group:
        raise CliError("--group cannot be used with --producer", exit_code=2)
    if args.cluster:
        raise CliError("--cluster cannot be used with --producer or --consumer", exit_code=2)
    if args.producer and args.idempotent:
        return [*resources, (ResourceType.CLUSTER, CLUSTER_NAME)]
    return resources


# What --producer and --consumer grant on each resource type (Kafka's AclCommand).
PRODUCER_OPERATIONS = {
    ResourceType.TOPIC: [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE],
    ResourceType.TRANSACTIONAL_ID: [AclOperation.WRITE, AclOperation.DESCRIBE],
    ResourceType.CLUSTER: [AclOperation.IDEMPOTENT_WRITE],
}
CONSUMER_OPERATIONS = {
    ResourceType.TOPIC: [AclOperation.READ, AclOperation.DESCRIBE],
    ResourceType.GROUP: [AclOperation.READ],
}


# The operations each resource type supports (Kafka's AclEntry.supportedOperations; All too).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    },
    ResourceType.GROUP: {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE},
    ResourceType.CLUSTER: {
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    },
    ResourceType.TRANSACTIONAL_ID: {AclOperation.DESCRIBE, AclOperation.WRITE},
}


def _operations_for(args: argparse.Namespace, rtype: ResourceType) -> list[AclOperation]:
    if args.producer:
        return PRODUCER_OPERATIONS.get(rtype, [])
    if args.consumer:
        return CONSUMER_OPERATIONS.get(rtype, [])
    operations = _operations(args)
    valid = SUPPORTED_OPERATIONS[rtype] | {AclOperation.ALL}
    if set(operations) - valid:
        names = ",".join(op.name for op in sorted(valid))
        raise CliError(f"ResourceType {rtype.name} only supports operations {names}", exit_code=2)
    return operations


def _add(args, resources, pattern_type, allow, deny) -> int:
    if not resources:
        raise CliError(
            "--add needs a resource: --topic, --group, --cluster or --transactional-id",
            exit_code=2,
        )
    if not allow and not deny:
        raise CliError("--add needs --allow-principal or --deny-principal", exit_code=2)
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CliError("--add: --resource-pattern-type must be literal or prefixed", exit_code=2)
    _operations(args)  # checked even where --producer/--consumer choose
    people = [
        (principal, host, PermissionType.ALLOW)
        for principal in allow
        for host in args.allow_host or ["*"]
    ] + [
        (principal, host, PermissionType.DENY)
        for principal in deny
        for host in args.deny_host or ["*"]
    ]
    acls = [
        Acl(rtype, name, principal, op, permission, host, pattern_type)
        for rtype, name in resources
        for op in _operations_for(args, rtype)
        for principal, host, permission in people
    ]
    bootstrap = bootstrap_of(args)

    async def add():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            errors = await admin.create_acls(acls)
            for error in errors:
                if error is not None:
                    raise CliError(f"cannot add the ACLs: {error}")
            return {
                (rtype, name): await admin.describe_acls(AclFilter(rtype, name, pattern_type))
                for rtype, name in resources
            }

    current = run_async(add)
    for rtype, name in resources:
        label = _describe_pattern(rtype, name, pattern_type)
        print(f"Adding ACLs for resource `{label}`: ")
        for acl in acls:
            if (acl.resource_type, acl.name) == (rtype, name):
                print(f" \t{acl} ")
        print()
        print(f"Current ACLs for resource `{label}`: ")
        for acl in current[(rtype, name)]:
            print(f" \t{acl} ")
        print()
    return 0


def _remove(args, resources, pattern_type, allow, deny) -> int:
    if not resources:
        raise CliError(
            "--remove needs a resource: --topic, --group, --cluster or --transactional-id",
            exit_code=2,
        )
    filters: list[AclFilter] = []
    for rtype, name in resources:
        if args.producer or args.consumer:
            operations = _operations_for(args, rtype)
        else:
            operations = [AclOperation.ANY] if not args.operation else _operations(args)
        if not allow and not deny:
            filters.append(AclFilter(rtype, name, pattern_type))
            continue
        for permission, principals, hosts in (
            (PermissionType.ALLOW, allow, args.allow_host),
            (PermissionType.DENY, deny, args.deny_host),
        ):
            for principal in principals:
                for host in hosts or [None]:
                    for op in operations:
                        filters.append(
                            AclFilter(rtype, name, pattern_type, principal, host, op, permission)
                        )
    bootstrap = bootstrap_of(args)

    async def remove():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.delete_acls(filters)

    deleted = [acl for per_filter in run_async(remove) for acl in per_filter]
    for rtype, name in resources:
        print(f"Removing ACLs for resource `{_describe_pattern(rtype, name, pattern_type)}`: ")
        for acl in deleted:
            if (acl.resource_type, acl.name) == (rtype, name) or pattern_type in (
                PatternType.MATCH,
                PatternType.ANY,
            ):
                print(f" \t{acl} ")
        print()
    return 0


def _list(args, resources, pattern_type) -> int:
    principals = args.principal or [None]
    if resources:
        filters = [
            AclFilter(rtype, name, pattern_type, principal)
            for rtype, name in resources
            for principal in principals
        ]
    else:
        any_type = PatternType.ANY if pattern_type == PatternType.LITERAL else pattern_type
        filters = [AclFilter(pattern_type=any_type, principal=p) for p in principals]
    bootstrap = bootstrap_of(args)

    async def list_acls():
        async with open_admin(bootstrap, **client_options(args)) as admin:
            found: list[Acl] = []
            for f in filters:
                found += [a for a in await admin.describe_acls(f) if a not in found]
            return found

    found = run_async(list_acls)
    by_pattern: dict[tuple, list[Acl]] = {}
    for acl in found:
        by_pattern.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(acl)
    for (rtype, name, ptype), acls in sorted(
        by_pattern.items(), key=lambda item: (int(item[0][0]), item[0][1], int(item[0][2]))
    ):
        print(f"Current ACLs for resource `{_describe_pattern(rtype, name, ptype)}`: ")
        for acl in acls:
            print(f" \t{acl} ")
        print()
    return 0
