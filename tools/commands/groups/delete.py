"""`tributary groups delete`: delete groups and report each one.

How it works: one admin client deletes every group named (DeleteGroups to each group's
coordinator); a group with members is refused by the coordinator (NON_EMPTY_GROUP) and
reported as an error line, as is an unknown group; the exit code is 1 if any failed.
"""

from __future__ import annotations

import argparse
import sys

from client.admin import open_admin
from client.protocol.errors import ErrorCode
from tools.commands.common import bootstrap_of, client_options, run_async
from tools.errors import CliError


def delete_message(group: str, error: BaseException | None) -> str:
    """The line for one group's deletion result."""
    if error is None:
        return f"Deletion of consumer group '{group}' was successful."
    code = getattr(error, "code", None)
    if code is ErrorCode.NON_EMPTY_GROUP:
        return (
            f"consumer group '{group}' could not be deleted: it has active members "
            "(stop its consumers first)"
        )
    if code is ErrorCode.GROUP_ID_NOT_FOUND:
        return f"consumer group '{group}' could not be deleted: it does not exist"
    return f"consumer group '{group}' could not be deleted: {error}"


def delete_command(args: argparse.Namespace) -> int:
    bootstrap = bootstrap_of(args)
    names = list(dict.fromkeys(args.groups))

    async def delete() -> dict[str, BaseException | None]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return dict(await admin.delete_groups(names))

    results = run_async(delete)
    failed = 0
    for group in names:
        error = results.get(group)
        if error is None and group not in results:
            error = CliError("no answer from its coordinator")
        if error is None:
            print(delete_message(group, None))
        else:
            failed += 1
            print(f"error: {delete_message(group, error)}", file=sys.stderr)
    return 1 if failed else 0
