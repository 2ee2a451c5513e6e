"""`tributary groups list` and `tributary groups describe`: the read-only actions.

How it works: each opens an admin client (client/admin) and asks the group coordinators
through it: `list_groups` (every broker's groups, merged) for `list`; for `describe`,
`describe_groups` (state, generation, chosen assignor, members and their assignments),
`list_group_offsets` (the committed offsets, every group at once) and the latest log
offsets (`log_offsets.LogOffsets`) of every partition committed or assigned, then prints
`report.py`'s tables (or, with `--json`, one JSON document). An unknown group (the
coordinator answers "Dead") is an error; a group without members says so, as Kafka
does, then prints its committed offsets.
"""

from __future__ import annotations

import argparse
import json
import sys

import trio

from client.admin import open_admin
from client.protocol.types import TopicPartition
from tools.commands.common import bootstrap_of, client_options, run_async, security_options
from tools.commands.groups.log_offsets import LogOffsets, open_log_offsets
from tools.commands.groups.report import (
    DEAD,
    GroupReport,
    as_tp,
    coordinator_id_of,
    format_table,
    listing_rows,
    render_report,
)
from tools.errors import CliError


def list_command(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)

    async def groups() -> list:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return list(await admin.list_groups())

    listings = run_async(groups)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "group": g.group_id,
                        "state": g.state or None,
                        "protocol_type": g.protocol_type or None,
                        "coordinator": coordinator_id_of(g),
                    }
                    for g in sorted(listings, key=lambda g: g.group_id)
                ],
                indent=2,
            )
        )
        return 0
    if listings:
        for line in format_table(
            ("GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"), listing_rows(listings)
        ):
            print(line)
    return 0


# --- describe ------------------------------------------------------------------------------


def describe_command(args: argparse.Namespace) -> int:
    if args.all_groups and args.groups:
        raise CliError("give group names or --all-groups, not both", exit_code=2)
    if not args.all_groups and not args.groups:
        raise CliError("name at least one GROUP (or --all-groups)", exit_code=2)
    what = "members" if args.members else "state" if args.state else "offsets"
    bootstrap = bootstrap_of(args)

    async def describe() -> list[GroupReport]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            names = list(dict.fromkeys(args.groups))
            if args.all_groups:
                names = sorted({g.group_id for g in await admin.list_groups()})
                if not names:
                    return []
            descriptions = list(await admin.describe_groups(names))
            for d in descriptions:
                if d.state == DEAD:
                    raise CliError(f"consumer group '{d.group_id}' does not exist")
            committed: dict[str, dict[TopicPartition, int]] = {}

            async def fetch(group: str) -> None:
                found = await admin.list_group_offsets(group)
                committed[group] = {as_tp(tp): o for tp, o in found.items()}

            need_offsets = what == "offsets" or args.json
            if need_offsets:
                async with trio.open_nursery() as nursery:
                    for d in descriptions:
                        nursery.start_soon(fetch, d.group_id)
            log_end: dict[TopicPartition, int] = {}
            wanted = {tp for found in committed.values() for tp in found}
            if need_offsets:
                wanted |= {
                    as_tp(tp) for d in descriptions for m in d.members for tp in m.assignment
                }
            if wanted:
                async with open_log_offsets(
                    bootstrap, **security_options(getattr(args, "command_config", None))
                ) as consumer:
                    log_end = await LogOffsets(consumer).latest(wanted)
            brokers = admin.metadata.cluster.brokers
            reports = []
            for d in descriptions:
                broker = brokers.get(d.coordinator_id)
                reports.append(
                    GroupReport(
                        d,
                        committed.get(d.group_id, {}),
                        log_end,
                        broker.address if broker is not None else None,
                    )
                )
            return reports

    reports = run_async(describe)
    if args.json:
        print(json.dumps([r.as_json() for r in reports], indent=2))
        return 0
    out = sys.stdout
    for i, report in enumerate(reports):
        if i:
            out.write("\n")
        for line in render_report(report, what):
            out.write(line + "\n")
    return 0


# --- reset-offsets -------------------------------------------------------------------------
