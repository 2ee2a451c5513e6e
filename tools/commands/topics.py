"""`tributary topics create|list|describe|alter|delete`, in the manner of kafka-topics.sh.

How it works: each action opens an admin client (client/admin/) on the bootstrap
servers, does one thing and prints the result: `list` the topic names, without internal
topics such as `__consumer_offsets` unless `--include-internal`/`--all` asks (they can
still be described by name); `describe` as `kafka-topics --describe` does (a topic line
with its `TopicId:`, then one tab-separated line per partition, with `Leader: none` for
an offline partition and `Offline:` / `UnderReplicated: true` markers), or as JSON;
`alter --partitions N` adds partitions (CreatePartitions), printing kafka-topics'
warning about keyed records first.
"""

from __future__ import annotations

import argparse
import json
import sys

from client.admin import NewTopic, TopicDescription, open_admin
from client.protocol.errors import ErrorCode, TributaryError
from tools.commands.common import (
    add_bootstrap_option,
    bootstrap_of,
    client_options,
    parse_config_pairs,
    positive_int,
    run_async,
)
from tools.errors import CliError


def register(subparsers) -> None:
    topics = subparsers.add_parser("topics", help="create, list, describe and delete topics")
    actions = topics.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("name", metavar="NAME")
    create.add_argument(
        "--partitions", type=positive_int, default=None, help="default: the broker's"
    )
    create.add_argument(
        "--replication-factor", type=positive_int, default=None, help="default: the broker's"
    )
    create.add_argument(
        "--config", action="append", default=[], metavar="NAME=VALUE", help="a topic config"
    )
    create.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B1:B2,...",
        help="replicas per partition (partition 0 first), instead of the two options above",
    )
    create.add_argument("--if-not-exists", action="store_true", help="no error if it exists")
    create.add_argument(
        "--disable-rack-aware",
        action="store_true",
        help="assign replicas without regard to the brokers' racks",
    )
    add_bootstrap_option(create)
    create.set_defaults(handler=_create)

    listing = actions.add_parser(
        "list", help="list topic names (internal ones such as __consumer_offsets with --all)"
    )
    shown = listing.add_mutually_exclusive_group()
    shown.add_argument(
        "--include-internal",
        "--all",
        dest="include_internal",
        action="store_true",
        help="also list internal topics (__consumer_offsets)",
    )
    shown.add_argument(
        "--exclude-internal", action="store_true", help="hide internal topics (the default)"
    )
    add_bootstrap_option(listing)
    listing.set_defaults(handler=_list)

    describe = actions.add_parser("describe", help="leaders, replicas and ISR per partition")
    describe.add_argument("name", metavar="NAME", nargs="?", help="default: every topic")
    describe.add_argument("--json", action="store_true", help="print JSON")
    describe.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replica list",
    )
    describe.add_argument(
        "--unavailable-partitions", action="store_true", help="only partitions with no leader"
    )
    add_bootstrap_option(describe)
    describe.set_defaults(handler=_describe)

    alter = actions.add_parser(
        "alter", help="add partitions to a topic (kafka-topics --alter --partitions)"
    )
    alter.add_argument("name", metavar="NAME", nargs="?", help="the topic (or --topic)")
    alter.add_argument("--topic", dest="topic_option", metavar="NAME", help="the topic")
    alter.add_argument(
        "--partitions",
        type=positive_int,
        required=True,
        help="the new total number of partitions (more than now)",
    )
    alter.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B1:B2,...",
        help="replicas of every partition, partition 0 first (only the added ones are used)",
    )
    add_bootstrap_option(alter)
    alter.set_defaults(handler=_alter)

    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--if-exists", action="store_true", help="no error if it is missing")
    add_bootstrap_option(delete)
    delete.set_defaults(handler=_delete)


INTERNAL_TOPICS = ("__consumer_offsets",)


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's `--replica-assignment 1:2,2:3`: partition i gets the i-th group."""
    assignment: dict[int, list[int]] = {}
    for index, group in enumerate(text.split(",")):
        try:
            replicas = [int(b) for b in group.split(":")]
        except ValueError:
            raise CliError(
                f"--replica-assignment: {group!r} is not a list of broker ids like 1:2:3",
                exit_code=2,
            ) from None
        if len(set(replicas)) != len(replicas):
            raise CliError(
                f"--replica-assignment: partition {index} lists a broker twice", exit_code=2
            )
        assignment[index] = replicas
    if len({len(r) for r in assignment.values()}) > 1:
        raise CliError(
            "--replica-assignment: every partition needs the same number of replicas",
            exit_code=2,
        )
    return assignment


# --- create ----------------------------------------------------------------------------


def _create(args: argparse.Namespace) -> int:
    configs = parse_config_pairs(args.config)
    assignment = None
    if args.replica_assignment is not None:
        if args.partitions is not None or args.replication_factor is not None:
            raise CliError(
                "--replica-assignment cannot be used with --partitions or --replication-factor",
                exit_code=2,
            )
        assignment = parse_replica_assignment(args.replica_assignment)
    bootstrap = bootstrap_of(args)

    async def create() -> TributaryError | None:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            topic = NewTopic(
                args.name,
                args.partitions or -1,
                args.replication_factor or -1,
                configs,
                assignment,
            )
            created = await admin.create_topics([topic], disable_rack_aware=args.disable_rack_aware)
            return created.get(args.name)

    error = run_async(create)
    if error is not None:
        if error.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
            raise CliError(str(error))
        if not args.if_not_exists:
            raise CliError(f"topic '{args.name}' already exists")
        return 0
    print(f"Created topic {args.name}.")
    return 0


# --- list ------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def names() -> list[str]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.list_topics(include_internal=args.include_internal)

    for name in run_async(names):
        print(name)
    return 0


# --- describe --------------------------------------------------------------------------


def _describe(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def describe() -> tuple[list[TopicDescription], dict[int, str | None]]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            topics = await admin.describe_topics(None if args.name is None else [args.name])
            cluster = await admin.describe_cluster()
            return topics, {b.node_id: b.rack for b in cluster.brokers}

    topics, racks = run_async(describe)
    only_filtered = args.under_replicated_partitions or args.unavailable_partitions

    def wanted(p) -> bool:
        if not only_filtered:
            return True
        return (args.under_replicated_partitions and p.under_replicated) or (
            args.unavailable_partitions and p.offline
        )

    if args.json:
        print(json.dumps([_topic_json(t, wanted, racks) for t in topics], indent=2))
        return 0
    out = sys.stdout
    for topic in topics:
        partitions = [p for p in topic.partitions if wanted(p)]
        if only_filtered and not partitions:
            continue
        if not only_filtered:
            out.write(format_topic_line(topic) + "\n")
        for p in partitions:
            out.write(format_partition_line(topic.name, p, racks) + "\n")
    return 0


def format_topic_line(topic: TopicDescription) -> str:
    configs = ",".join(f"{k}={v}" for k, v in sorted((topic.configs or {}).items()))
    topic_id = "" if topic.topic_id is None else f"TopicId: {topic.topic_id_text}\t"
    return (
        f"Topic: {topic.name}\t{topic_id}PartitionCount: {len(topic.partitions)}\t"
        f"ReplicationFactor: {topic.replication_factor}\tConfigs: {configs}"
    )


def format_partition_line(topic: str, p, racks: dict[int, str | None] | None = None) -> str:
    """kafka-topics' partition line; with `racks` (broker id -> rack) of which any is
    set, each replica's rack too (`-`: a broker without a rack or not alive)."""
    leader = str(p.leader) if p.leader >= 0 else "none"
    line = (
        f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\t"
        f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}\tLeaderEpoch: {p.leader_epoch}"
    )
    if p.offline_replicas:
        line += f"\tOffline: {_ids(p.offline_replicas)}"
    if p.under_replicated:
        line += "\tUnderReplicated: true"
    if racks and any(racks.values()):
        line += "\tRacks: " + ",".join(racks.get(b) or "-" for b in p.replicas)
    return line


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids)


def _topic_json(topic: TopicDescription, wanted, racks: dict[int, str | None]) -> dict:
    return {
        "topic": topic.name,
        "topic_id": topic.topic_id_text,
        "internal": topic.is_internal,
        "partition_count": len(topic.partitions),
        "replication_factor": topic.replication_factor,
        "configs": topic.configs or {},
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader if p.leader >= 0 else None,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "replica_racks": [racks.get(b) for b in p.replicas],
                "isr": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
                "under_replicated": p.under_replicated,
            }
            for p in topic.partitions
            if wanted(p)
        ],
    }


# --- alter -----------------------------------------------------------------------------


def _alter(args: argparse.Namespace) -> int:
    if args.name is not None and args.topic_option is not None and args.name != args.topic_option:
        raise CliError("give the topic once: as NAME or with --topic", exit_code=2)
    name = args.name or args.topic_option
    if name is None:
        raise CliError("topics alter: name the topic (NAME or --topic)", exit_code=2)
    if name in INTERNAL_TOPICS:  # as kafka-topics refuses it: groups map onto its partitions
        raise CliError(
            f"The number of partitions for the internal topics {', '.join(INTERNAL_TOPICS)} "
            "cannot be changed.",
            exit_code=2,
        )
    assignment = None
    if args.replica_assignment is not None:
        given = parse_replica_assignment(args.replica_assignment)
        if len(given) != args.partitions:
            raise CliError(
                f"--replica-assignment lists {len(given)} partitions, --partitions asks for "
                f"{args.partitions}",
                exit_code=2,
            )
        assignment = given
    bootstrap = bootstrap_of(args)

    async def alter() -> TributaryError | None:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            assignments = None
            if assignment is not None:
                # As Kafka's TopicCommand: the list covers every partition; the existing
                # partitions' entries are dropped.
                described = await admin.describe_topics([name])
                existing = len(described[0].partitions) if described else 0
                added = [assignment[p] for p in sorted(assignment) if p >= existing]
                assignments = {name: added}
            return (
                await admin.create_partitions({name: args.partitions}, assignments=assignments)
            ).get(name)

    print(
        "WARNING: If partitions are increased for a topic that has a key, the partition logic "
        "or ordering of the messages will be affected"
    )
    error = run_async(alter)
    if error is not None:
        if error.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise CliError(f"topic '{name}' does not exist")
        raise CliError(f"Error while executing topic command : {error.message or error}")
    return 0  # kafka-topics prints nothing more on success


# --- delete ----------------------------------------------------------------------------


def _delete(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def delete() -> TributaryError | None:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return (await admin.delete_topics([args.name])).get(args.name)

    error = run_async(delete)
    if error is not None:
        if error.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            if args.if_exists:
                return 0
            raise CliError(f"topic '{args.name}' does not exist")
        raise CliError(str(error))
    print(f"Deleted topic {args.name}.")
    return 0
