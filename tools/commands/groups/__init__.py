"""`tributary groups list|describe|reset-offsets|delete`, in the manner of
kafka-consumer-groups.sh.

How it works: `register` adds the `groups` parser and its actions; each action opens an
admin client (client/admin) and asks the group coordinators through it. Every failure is
one line (`CliError`, printed by tools/cli.py) and a non-zero exit.

- `describe.py`: `list` (every group, with its state) and `describe` (offsets and lag
  per partition, members, or state of groups);
- `reset.py`: `reset-offsets` (new offsets planned, clamped, printed, committed only with
  `--execute` while the group is inactive);
- `delete.py`: `delete` (groups without members);
- `report.py`: the tables and rows, pure functions over the admin client's results;
- `log_offsets.py`: the partitions' earliest, latest and by-time offsets, from their
  leaders.
"""

from __future__ import annotations

from tools.commands.common import add_bootstrap_option
from tools.commands.groups.delete import delete_command
from tools.commands.groups.describe import describe_command, list_command
from tools.commands.groups.reset import reset_offsets_command


def register(subparsers) -> None:
    groups = subparsers.add_parser(
        "groups", help="list, describe, reset the offsets of and delete consumer groups"
    )
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="every consumer group, with its state")
    listing.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap_option(listing)
    listing.set_defaults(handler=list_command)

    describe = actions.add_parser(
        "describe", help="offsets and lag per partition, members, or state of groups"
    )
    describe.add_argument("groups", metavar="GROUP", nargs="*")
    describe.add_argument("--all-groups", action="store_true", help="every group")
    what = describe.add_mutually_exclusive_group()
    what.add_argument(
        "--offsets",
        action="store_true",
        help="committed offset, log end offset and lag per partition (the default)",
    )
    what.add_argument("--members", action="store_true", help="the members and their partitions")
    what.add_argument(
        "--state", action="store_true", help="coordinator, assignor, state, generation, members"
    )
    describe.add_argument("--json", action="store_true", help="print everything as JSON")
    add_bootstrap_option(describe)
    describe.set_defaults(handler=describe_command)

    reset = actions.add_parser(
        "reset-offsets", help="move a group's committed offsets (dry run unless --execute)"
    )
    reset.add_argument("group", metavar="GROUP")
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P1,P2]",
        help="a topic, or some of its partitions (repeatable)",
    )
    which.add_argument(
        "--all-topics", action="store_true", help="every partition the group has offsets for"
    )
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the oldest offset")
    to.add_argument("--to-latest", action="store_true", help="the log end (high watermark)")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped)")
    to.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (may be < 0)"
    )
    to.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="the first offset at or after a time, e.g. 2024-05-01T12:00:00 (local time "
        "unless it names a zone)",
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only print them (the default)")
    add_bootstrap_option(reset)
    reset.set_defaults(handler=reset_offsets_command)

    delete = actions.add_parser("delete", help="delete groups (they must have no members)")
    delete.add_argument("groups", metavar="GROUP", nargs="+")
    add_bootstrap_option(delete)
    delete.set_defaults(handler=delete_command)
