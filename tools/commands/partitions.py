"""`tributary partitions reassign --plan FILE [--verify]`: move partition replicas.

How it works: the plan is Kafka's reassignment JSON,
`{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3]}, ...]}`.
Without `--verify` it is sent as one AlterPartitionReassignments request and each
partition's outcome is printed. With `--verify` nothing changes: given a plan, each of
its partitions is reported complete (its replicas are the target and no move is under
way) or still in progress; without a plan, every ongoing reassignment is listed.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from client.admin import Admin, Reassignment, open_admin
from client.protocol.errors import TributaryError
from client.protocol.types import TopicPartition
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.errors import CliError

Plan = dict[TopicPartition, list[int]]


def register(subparsers) -> None:
    partitions = subparsers.add_parser("partitions", help="partition reassignment")
    actions = partitions.add_subparsers(dest="action", metavar="ACTION", required=True)
    reassign = actions.add_parser(
        "reassign", help="start a reassignment from a plan, or --verify one"
    )
    reassign.add_argument("--plan", metavar="FILE", help="reassignment JSON (Kafka's format)")
    reassign.add_argument(
        "--verify", action="store_true", help="report progress instead of starting"
    )
    reassign.add_argument("--timeout-ms", type=int, default=30_000, metavar="MS")
    add_bootstrap_option(reassign)
    reassign.set_defaults(handler=_reassign)


def load_plan(path: str) -> Plan:
    """Read and check a plan file; `CliError` naming the problem otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            raw: Any = json.load(f)
    except OSError as exc:
        raise CliError(f"cannot read plan {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"plan {path} is not valid JSON: {exc}") from None
    entries = raw.get("partitions") if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CliError(f'plan {path} needs a non-empty "partitions" list')
    plan: Plan = {}
    for index, entry in enumerate(entries):
        where = f"plan {path}: partitions[{index}]"
        if not isinstance(entry, dict):
            raise CliError(f"{where} is not an object")
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        if not isinstance(topic, str) or not topic:
            raise CliError(f'{where} needs a "topic" name')
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise CliError(f'{where} needs a "partition" number >= 0')
        if (
            not isinstance(replicas, list)
            or not replicas
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas)
        ):
            raise CliError(f'{where} needs a non-empty "replicas" list of broker ids')
        if len(set(replicas)) != len(replicas):
            raise CliError(f"{where} lists a broker twice")
        tp = TopicPartition(topic, partition)
        if tp in plan:
            raise CliError(f"{where}: {tp} appears twice in the plan")
        plan[tp] = list(replicas)
    return plan


def _reassign(args: argparse.Namespace) -> int:
    if args.plan is None and not args.verify:
        raise CliError("partitions reassign needs --plan FILE (or --verify)", exit_code=2)
    plan = load_plan(args.plan) if args.plan is not None else None
    bootstrap = bootstrap_of(args)
    if args.verify:
        return _verify(bootstrap, plan, args.timeout_ms, client_options(args))
    assert plan is not None

    async def execute() -> dict[TopicPartition, TributaryError | None]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.alter_partition_reassignments(plan, timeout_ms=args.timeout_ms)

    results = run_async(execute)
    started = sorted(tp for tp, error in results.items() if error is None)
    failed = sorted((tp, e) for tp, e in results.items() if e is not None)
    if started:
        print(f"Successfully started partition reassignments for {','.join(map(str, started))}")
    for tp, error in failed:
        print(f"Error reassigning partition {tp}: {error}")
    if failed:
        raise CliError(f"{len(failed)} partition reassignment(s) could not be started")
    return 0


def _verify(bootstrap: str, plan: Plan | None, timeout_ms: int, options: dict) -> int:
    async def look() -> tuple[dict[TopicPartition, Reassignment], dict[TopicPartition, list]]:
        async with open_admin(bootstrap, **options) as admin:
            ongoing = await admin.list_partition_reassignments(timeout_ms=timeout_ms)
            current = await _current_replicas(admin, plan) if plan else {}
            return ongoing, current

    ongoing, current = run_async(look)
    if plan is None:
        if not ongoing:
            print("No partition reassignments in progress.")
        for tp, moving in sorted(ongoing.items()):
            print(
                f"Reassignment of partition {tp} is in progress: replicas "
                f"{_ids(moving.replicas)}, adding {_ids(moving.adding_replicas) or '-'}, "
                f"removing {_ids(moving.removing_replicas) or '-'}"
            )
        return 0
    print("Status of partition reassignment:")
    for tp, target in plan.items():
        if tp in ongoing:
            print(f"Reassignment of partition {tp} is still in progress.")
        elif tp not in current:
            print(f"Reassignment of partition {tp} failed: the partition does not exist.")
        elif list(current[tp]) == target:
            print(f"Reassignment of partition {tp} is complete.")
        else:
            print(
                f"There is no active reassignment of partition {tp}, but its replicas are "
                f"{_ids(current[tp])}, not {_ids(target)}."
            )
    return 0


async def _current_replicas(admin: Admin, plan: Plan) -> dict[TopicPartition, list]:
    cluster = await admin.metadata.refresh()
    out: dict[TopicPartition, list] = {}
    for tp in plan:
        info = cluster.partition(tp)
        if info is not None:
            out[tp] = list(info.replicas)
    return out


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids)
