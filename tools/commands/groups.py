"""`tributary groups list|describe|reset-offsets|delete`, in the manner of
kafka-consumer-groups.sh.

How it works: each action opens an admin client (client/admin.py) and asks the group
coordinators through it: `list_groups` (every broker's groups, merged), `describe_groups`
(state, generation, chosen assignor, members and their assignments), `list_group_offsets`
(the committed offsets), `alter_group_offsets` and `delete_groups`. Log offsets (the
earliest, the latest = the high watermark, the first at a time) come from ListOffsets to
each partition's leader, sent by a plain consumer without a group (`LogOffsets`).

- `describe` prints Kafka's tables: per partition GROUP TOPIC PARTITION CURRENT-OFFSET
  LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID (the default, `--offsets`), one row per
  partition assigned to a member and one per partition with a committed offset that no
  member holds; lag = log end offset - committed offset, "-" where either is unknown.
  `--members` lists the members, `--state` the coordinator, assignor, state, generation
  and member count; `--json` prints all of it as one JSON document. An unknown group (the
  coordinator answers "Dead") is an error; a group without members says so, as Kafka
  does, then prints its committed offsets.
- `reset-offsets` computes new offsets for the chosen partitions (`--to-earliest`,
  `--to-latest`, `--to-offset`, `--shift-by`, `--to-datetime`), clamped to each
  partition's [earliest, latest] as Kafka's `checkOffsetsRange` does, and prints them.
  Only `--execute` commits them (admin OffsetCommit, which the coordinator accepts only
  while the group has no members), and only if the group is inactive (Empty or unknown).
- `delete` deletes groups and reports each one; a group with members is refused by the
  coordinator (NON_EMPTY_GROUP) and reported as an error.

Every failure is one line (`CliError`, printed by tools/cli.py) and a non-zero exit. The
table and row builders are pure functions over the admin client's results, so the unit
tests check the layout without a broker.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import trio

from client.admin import open_admin
from client.consumer import open_consumer
from client.metadata import UnknownTopicError
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition
from tools.commands.common import add_bootstrap_option, bootstrap_of, client_options, run_async
from tools.errors import CliError

MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE
DEAD = "Dead"
EMPTY = "Empty"
INACTIVE_STATES = (EMPTY, DEAD)  # where Kafka lets offsets be reset
LOOKUP_TIMEOUT_MS = 15_000  # ListOffsets retries (no leader yet) for at most this long


def register(subparsers) -> None:
    groups = subparsers.add_parser(
        "groups", help="list, describe, reset the offsets of and delete consumer groups"
    )
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="every consumer group, with its state")
    listing.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap_option(listing)
    listing.set_defaults(handler=_list)

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
    describe.set_defaults(handler=_describe)

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
    reset.set_defaults(handler=_reset_offsets)

    delete = actions.add_parser("delete", help="delete groups (they must have no members)")
    delete.add_argument("groups", metavar="GROUP", nargs="+")
    add_bootstrap_option(delete)
    delete.set_defaults(handler=_delete)


# --- tables --------------------------------------------------------------------------------


def format_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    min_widths: Mapping[str, int] | None = None,
) -> list[str]:
    """Left-aligned columns one space apart, each as wide as its widest cell (Kafka's
    ConsumerGroupCommand layout; `min_widths` per header, e.g. PARTITION 10)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [
        max([len(h), (min_widths or {}).get(h, 0)] + [len(r[i]) for r in cells])
        for i, h in enumerate(headers)
    ]

    def line(values: Sequence[str]) -> str:
        return " ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    return [line(list(headers))] + [line(r) for r in cells]


def _cell(value: int | str | None) -> str:
    return MISSING if value is None or value == "" else str(value)


# --- describe: the rows --------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetRow:
    """One line of `groups describe --offsets`."""

    group: str
    topic: str
    partition: int
    current_offset: int | None  # None: nothing committed
    log_end_offset: int | None  # None: unknown (no leader, deleted topic)
    consumer_id: str | None = None  # None: no member holds the partition
    host: str | None = None
    client_id: str | None = None

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset

    def cells(self) -> list[str]:
        return [
            self.group,
            self.topic,
            str(self.partition),
            _cell(self.current_offset),
            _cell(self.log_end_offset),
            _cell(self.lag),
            _cell(self.consumer_id),
            _cell(self.host),
            _cell(self.client_id),
        ]

    def as_json(self) -> dict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "current_offset": self.current_offset,
            "log_end_offset": self.log_end_offset,
            "lag": self.lag,
            "consumer_id": self.consumer_id,
            "host": self.host,
            "client_id": self.client_id,
        }


OFFSET_HEADERS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
OFFSET_MIN_WIDTHS = {"PARTITION": 10, "CURRENT-OFFSET": 15, "LOG-END-OFFSET": 15, "LAG": 15}
MEMBER_HEADERS = (
    "GROUP",
    "CONSUMER-ID",
    "GROUP-INSTANCE-ID",
    "HOST",
    "CLIENT-ID",
    "#PARTITIONS",
    "ASSIGNMENT",
)
STATE_HEADERS = (
    "GROUP",
    "COORDINATOR (ID)",
    "ASSIGNMENT-STRATEGY",
    "STATE",
    "GENERATION",
    "#MEMBERS",
)
RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


def _tp(tp: Any) -> TopicPartition:
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)


def offset_rows(
    description: Any,
    committed: Mapping[TopicPartition, int],
    log_end: Mapping[TopicPartition, int],
) -> list[OffsetRow]:
    """Kafka's describe rows: every partition a member holds (with its committed offset,
    or "-"), then every committed partition no member holds (consumer "-"), by topic and
    partition. Negative committed offsets (-1: none) count as nothing committed."""
    group = description.group_id
    held: dict[TopicPartition, Any] = {}
    for member in description.members:
        for tp in member.assignment or ():
            held[_tp(tp)] = member
    committed = {_tp(tp): o for tp, o in committed.items() if o is not None and o >= 0}
    rows = []
    for tp in sorted(set(held) | set(committed)):
        member = held.get(tp)
        rows.append(
            OffsetRow(
                group=group,
                topic=tp.topic,
                partition=tp.partition,
                current_offset=committed.get(tp),
                log_end_offset=log_end.get(tp),
                consumer_id=member.member_id if member is not None else None,
                host=member.host if member is not None else None,
                client_id=member.client_id if member is not None else None,
            )
        )
    return rows


def format_assignment(partitions: Iterable[Any]) -> str:
    """Kafka's ASSIGNMENT cell: `orders(0,1,2),audit(3)` by topic; "-" for none."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        tp = _tp(tp)
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ",".join(
        f"{topic}({','.join(str(p) for p in sorted(ps))})" for topic, ps in sorted(by_topic.items())
    )


def member_rows(description: Any) -> list[list[str]]:
    """One line per member (most partitions first, as Kafka sorts them)."""
    members = sorted(
        description.members,
        key=lambda m: (-len(m.assignment or ()), m.client_id or "", m.member_id),
    )
    return [
        [
            description.group_id,
            _cell(m.member_id),
            _cell(m.group_instance_id),
            _cell(m.host),
            _cell(m.client_id),
            str(len(m.assignment or ())),
            format_assignment(m.assignment or ()),
        ]
        for m in members
    ]


def coordinator_cell(coordinator_id: int | None, address: tuple[str, int] | None) -> str:
    """Kafka's COORDINATOR (ID) cell: `host:port  (id)`."""
    if coordinator_id is None or coordinator_id < 0:
        return MISSING
    if address is None:
        return f"-  ({coordinator_id})"
    return f"{address[0]}:{address[1]}  ({coordinator_id})"


def state_row(description: Any, address: tuple[str, int] | None) -> list[str]:
    generation = getattr(description, "generation", None)
    return [
        description.group_id,
        coordinator_cell(description.coordinator_id, address),
        _cell(description.protocol),
        description.state,
        _cell(generation if generation is None or generation >= 0 else None),
        str(len(description.members)),
    ]


def status_note(description: Any) -> str | None:
    """Kafka's line before the table for a group without members or mid-rebalance."""
    group = description.group_id
    if description.state in ("PreparingRebalance", "CompletingRebalance"):
        return f"Warning: Consumer group '{group}' is rebalancing."
    if not description.members:
        return f"Consumer group '{group}' has no active members."
    return None


@dataclass
class GroupReport:
    """What `describe` learned about one group."""

    description: Any
    committed: dict[TopicPartition, int]
    log_end: dict[TopicPartition, int]
    coordinator_address: tuple[str, int] | None = None

    def rows(self) -> list[OffsetRow]:
        return offset_rows(self.description, self.committed, self.log_end)

    def as_json(self) -> dict:
        d = self.description
        generation = getattr(d, "generation", None)
        return {
            "group": d.group_id,
            "state": d.state,
            "protocol_type": d.protocol_type or None,
            "assignment_strategy": d.protocol or None,
            "generation": generation if generation is not None and generation >= 0 else None,
            "coordinator": None
            if d.coordinator_id is None or d.coordinator_id < 0
            else {
                "id": d.coordinator_id,
                "host": self.coordinator_address[0] if self.coordinator_address else None,
                "port": self.coordinator_address[1] if self.coordinator_address else None,
            },
            "members": [
                {
                    "consumer_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "assignment": [
                        {"topic": tp.topic, "partition": tp.partition}
                        for tp in sorted(_tp(t) for t in m.assignment or ())
                    ],
                }
                for m in d.members
            ],
            "offsets": [row.as_json() for row in self.rows()],
        }


def render_report(report: GroupReport, what: str) -> list[str]:
    """The lines `describe` prints for one group: `what` is offsets, members or state."""
    d = report.description
    if what == "state":
        return format_table(STATE_HEADERS, [state_row(d, report.coordinator_address)])
    lines = []
    note = status_note(d)
    if note is not None:
        lines.append(note)
    if what == "members":
        if d.members:
            lines += format_table(MEMBER_HEADERS, member_rows(d))
        return lines
    rows = report.rows()
    if rows or note is None:
        lines += format_table(OFFSET_HEADERS, [r.cells() for r in rows], OFFSET_MIN_WIDTHS)
    return lines


# --- log offsets ---------------------------------------------------------------------------


class LogOffsets:
    """Earliest, latest and by-time offsets of partitions, from their leaders (ListOffsets
    through a plain consumer: no group, nothing assigned). A topic that does not exist
    gets no answer (its partitions show "-")."""

    def __init__(self, consumer) -> None:
        self.consumer = consumer

    async def _per_topic(self, tps: Iterable[TopicPartition], ask) -> dict[TopicPartition, Any]:
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp)
        found: dict[TopicPartition, Any] = {}

        async def one(topic: str, wanted: list[TopicPartition]) -> None:
            try:
                known = set(await self.consumer.partitions_for(topic))
            except UnknownTopicError:
                return
            wanted = [tp for tp in wanted if tp.partition in known]
            if wanted:
                found.update(await ask(wanted))

        async with trio.open_nursery() as nursery:
            for topic, wanted in by_topic.items():
                nursery.start_soon(one, topic, wanted)
        return found

    async def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._per_topic(tps, self.consumer.end_offsets)

    async def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._per_topic(tps, self.consumer.beginning_offsets)

    async def at_time(
        self, tps: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        """The first offset at or after the time; None when every record is older."""

        async def ask(wanted):
            found = await self.consumer.offsets_for_times({tp: timestamp_ms for tp in wanted})
            return {tp: (None if v is None else v[0]) for tp, v in found.items()}

        return await self._per_topic(tps, ask)


def _open_log_offsets(bootstrap: str):
    return open_consumer(
        bootstrap, client_id="tributary-groups", request_timeout_ms=LOOKUP_TIMEOUT_MS
    )


# --- list ----------------------------------------------------------------------------------


def listing_rows(listings: Iterable[Any]) -> list[list[str]]:
    return [
        [g.group_id, _cell(g.state), _cell(g.protocol_type), _cell(_coordinator_id(g))]
        for g in sorted(listings, key=lambda g: g.group_id)
    ]


def _coordinator_id(listing: Any) -> int | None:
    value = getattr(listing, "coordinator_id", None)
    return value if value is not None and value >= 0 else None


def _list(args: argparse.Namespace) -> int:
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
                        "coordinator": _coordinator_id(g),
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


def _describe(args: argparse.Namespace) -> int:
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
                committed[group] = {_tp(tp): o for tp, o in found.items()}

            need_offsets = what == "offsets" or args.json
            if need_offsets:
                async with trio.open_nursery() as nursery:
                    for d in descriptions:
                        nursery.start_soon(fetch, d.group_id)
            log_end: dict[TopicPartition, int] = {}
            wanted = {tp for found in committed.values() for tp in found}
            if need_offsets:
                wanted |= {_tp(tp) for d in descriptions for m in d.members for tp in m.assignment}
            if wanted:
                async with _open_log_offsets(bootstrap) as consumer:
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


def parse_topic_spec(text: str) -> tuple[str, list[int] | None]:
    """`orders` (every partition) or `orders:0,2` (those partitions)."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise CliError(f"--topic: {text!r} names no topic", exit_code=2)
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in rest.split(",")})
    except ValueError:
        raise CliError(
            f"--topic: expected TOPIC or TOPIC:P1,P2 with partition numbers, got {text!r}",
            exit_code=2,
        ) from None
    if not partitions or partitions[0] < 0:
        raise CliError(f"--topic: partitions must be >= 0, got {text!r}", exit_code=2)
    return topic, partitions


def parse_datetime_ms(text: str) -> int:
    """An ISO-8601 time (`2024-05-01T12:00:00`, `...Z`, `...+02:00`; local time when it
    names no zone) as epoch milliseconds."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CliError(
            f"--to-datetime: expected an ISO time like 2024-05-01T12:00:00, got {text!r}",
            exit_code=2,
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's tool reads it
    return int(moment.timestamp() * 1000)


def clamp(offset: int, earliest: int | None, latest: int | None) -> int:
    """Kafka's checkOffsetsRange: above the log end -> the log end; below the log start ->
    the log start."""
    if latest is not None and offset > latest:
        return latest
    if earliest is not None and offset < earliest:
        return earliest
    return offset


def plan_reset(
    scenario: str,
    partitions: Iterable[TopicPartition],
    *,
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    committed: Mapping[TopicPartition, int] | None = None,
    value: int | None = None,
    at_time: Mapping[TopicPartition, int | None] | None = None,
) -> dict[TopicPartition, int]:
    """The new offset of each partition. `scenario` is to-earliest, to-latest, to-offset
    (`value`), shift-by (`value`, from `committed`) or to-datetime (`at_time`: the first
    offset at/after the time, None -> the log end, as Kafka falls back to). Raises
    `CliError` for a partition whose offsets are unknown or that has nothing to shift."""
    out: dict[TopicPartition, int] = {}
    for tp in sorted(partitions):
        low, high = earliest.get(tp), latest.get(tp)
        if low is None or high is None:
            raise CliError(f"cannot look up the offsets of {tp.topic}-{tp.partition}")
        if scenario == "to-earliest":
            out[tp] = low
        elif scenario == "to-latest":
            out[tp] = high
        elif scenario == "to-offset":
            assert value is not None
            out[tp] = clamp(value, low, high)
        elif scenario == "shift-by":
            assert value is not None
            current = (committed or {}).get(tp)
            if current is None or current < 0:
                raise CliError(
                    f"cannot shift the offset of {tp.topic}-{tp.partition}: "
                    "the group has no committed offset there"
                )
            out[tp] = clamp(current + value, low, high)
        elif scenario == "to-datetime":
            found = (at_time or {}).get(tp)
            out[tp] = high if found is None else clamp(found, low, high)
        else:  # pragma: no cover - argparse allows nothing else
            raise ValueError(scenario)
    return out


def _scenario(args: argparse.Namespace) -> tuple[str, int | None]:
    if args.to_earliest:
        return "to-earliest", None
    if args.to_latest:
        return "to-latest", None
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise CliError(f"--to-offset must be >= 0, not {args.to_offset}", exit_code=2)
        return "to-offset", args.to_offset
    if args.shift_by is not None:
        return "shift-by", args.shift_by
    return "to-datetime", parse_datetime_ms(args.to_datetime)


def inactive_error(group: str, state: str) -> CliError:
    return CliError(
        f"Assignments can only be reset if the group '{group}' is inactive, but the "
        f"current state is {state}."
    )


# Codes the coordinator answers an admin commit with when members came meanwhile.
_GROUP_BUSY = {
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.REBALANCE_IN_PROGRESS,
}


def _reset_offsets(args: argparse.Namespace) -> int:
    scenario, value = _scenario(args)
    specs = [parse_topic_spec(t) for t in args.topic or ()]
    bootstrap = bootstrap_of(args)
    group = args.group

    async def reset() -> dict[TopicPartition, int]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            (description,) = await admin.describe_groups([group])
            if description.state not in INACTIVE_STATES:
                raise inactive_error(group, description.state)
            committed = {_tp(tp): o for tp, o in (await admin.list_group_offsets(group)).items()}
            committed = {tp: o for tp, o in committed.items() if o is not None and o >= 0}
            if args.all_topics:
                partitions = set(committed)
                if not partitions:
                    raise CliError(
                        f"consumer group '{group}' has no committed offsets: "
                        "name the partitions with --topic"
                    )
            else:
                partitions = set()
                for topic, wanted in specs:
                    (described,) = await admin.describe_topics([topic])
                    existing = {p.partition for p in described.partitions}
                    for p in wanted if wanted is not None else sorted(existing):
                        if p not in existing:
                            raise CliError(
                                f"topic '{topic}' has no partition {p} (it has {len(existing)})"
                            )
                        partitions.add(TopicPartition(topic, p))
            async with _open_log_offsets(bootstrap) as consumer:
                lookup = LogOffsets(consumer)
                earliest = await lookup.earliest(partitions)
                latest = await lookup.latest(partitions)
                at_time = (
                    await lookup.at_time(partitions, value) if scenario == "to-datetime" else None
                )
            if at_time is not None:
                for tp in sorted(tp for tp in partitions if at_time.get(tp) is None):
                    print(
                        f"Warn: Partition {tp.partition} from topic {tp.topic} has no record "
                        "at or after that time. Falling back to latest known offset.",
                        file=sys.stderr,
                    )
            plan = plan_reset(
                scenario,
                partitions,
                earliest=earliest,
                latest=latest,
                committed=committed,
                value=value,
                at_time=at_time,
            )
            if args.execute:
                try:
                    await admin.alter_group_offsets(group, plan)
                except TributaryError as exc:
                    if exc.code in _GROUP_BUSY or exc.code is ErrorCode.NON_EMPTY_GROUP:
                        (now,) = await admin.describe_groups([group])
                        raise inactive_error(group, now.state) from None
                    raise
            return plan

    plan = run_async(reset)
    if not args.execute and not args.dry_run:
        print(
            "WARN: No action will be performed as the --execute option is missing. "
            "Add --dry-run to say so explicitly.",
            file=sys.stderr,
        )
    rows = [[group, tp.topic, str(tp.partition), str(o)] for tp, o in sorted(plan.items())]
    for line in format_table(RESET_HEADERS, rows, {"PARTITION": 10}):
        print(line)
    return 0


# --- delete --------------------------------------------------------------------------------


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


def _delete(args: argparse.Namespace) -> int:
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
