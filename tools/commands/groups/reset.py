"""`tributary groups reset-offsets`: move a group's committed offsets.

How it works: the new offsets of the chosen partitions (`--topic T[:P,...]` or
`--all-topics`) are computed by `plan_reset` for the scenario (`--to-earliest`,
`--to-latest`, `--to-offset`, `--shift-by`, `--to-datetime`), clamped to each
partition's [earliest, latest] as Kafka's `checkOffsetsRange` does (`clamp`), and
printed. Only `--execute` commits them (the admin client's OffsetCommit, which the
coordinator accepts only while the group has no members), and only if the group is
inactive (Empty or unknown); members arriving meanwhile make the same error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime

from client.admin import open_admin
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition
from tools.commands.common import bootstrap_of, client_options, run_async, security_options
from tools.commands.groups.log_offsets import LogOffsets, open_log_offsets
from tools.commands.groups.report import INACTIVE_STATES, as_tp, format_table
from tools.errors import CliError

RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


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


def reset_offsets_command(args: argparse.Namespace) -> int:
    scenario, value = _scenario(args)
    specs = [parse_topic_spec(t) for t in args.topic or ()]
    bootstrap = bootstrap_of(args)
    group = args.group

    async def reset() -> dict[TopicPartition, int]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            (description,) = await admin.describe_groups([group])
            if description.state not in INACTIVE_STATES:
                raise inactive_error(group, description.state)
            committed = {as_tp(tp): o for tp, o in (await admin.list_group_offsets(group)).items()}
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
            async with open_log_offsets(
                bootstrap, **security_options(getattr(args, "command_config", None))
            ) as consumer:
                lookup = LogOffsets(consumer)
                earliest = await lookup.earliest(partitions)
                latest = await lookup.latest(partitions)
                at_time = None
                if scenario == "to-datetime" and value is not None:  # value: the time
                    at_time = await lookup.at_time(partitions, value)
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
