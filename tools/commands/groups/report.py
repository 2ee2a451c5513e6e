"""The tables of `tributary groups`: pure functions from the admin client's results to
the lines Kafka's kafka-consumer-groups.sh prints.

How it works: `format_table` lays out left-aligned columns one space apart, each as wide
as its widest cell (Kafka's ConsumerGroupCommand layout). `describe` prints per partition
GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID (the
default, `--offsets`; `offset_rows`): one row per partition assigned to a member and one
per partition with a committed offset that no member holds; lag = log end offset -
committed offset, "-" where either is unknown. `--members` lists the members
(`member_rows`), `--state` the coordinator, assignor, state, generation and member count
(`state_row`); a `GroupReport` holds what `describe` learned about one group and gives
its lines (`render_report`, with Kafka's note for a group without members or mid-
rebalance) or its JSON. `listing_rows` are `list`'s rows. Nothing here does I/O, so the
unit tests check the layout without a broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from client.protocol.types import TopicPartition

MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE
# Group states as the coordinator names them.
DEAD = "Dead"
EMPTY = "Empty"
INACTIVE_STATES = (EMPTY, DEAD)  # where Kafka lets offsets be reset


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


def cell(value: int | str | None) -> str:
    return MISSING if value is None or value == "" else str(value)


def as_tp(tp: Any) -> TopicPartition:
    return tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)


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
            cell(self.current_offset),
            cell(self.log_end_offset),
            cell(self.lag),
            cell(self.consumer_id),
            cell(self.host),
            cell(self.client_id),
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
            held[as_tp(tp)] = member
    committed = {as_tp(tp): o for tp, o in committed.items() if o is not None and o >= 0}
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
        tp = as_tp(tp)
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
            cell(m.member_id),
            cell(m.group_instance_id),
            cell(m.host),
            cell(m.client_id),
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
        cell(description.protocol),
        description.state,
        cell(generation if generation is None or generation >= 0 else None),
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
                        for tp in sorted(as_tp(t) for t in m.assignment or ())
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


def listing_rows(listings: Iterable[Any]) -> list[list[str]]:
    return [
        [g.group_id, cell(g.state), cell(g.protocol_type), cell(coordinator_id_of(g))]
        for g in sorted(listings, key=lambda g: g.group_id)
    ]


def coordinator_id_of(listing: Any) -> int | None:
    value = getattr(listing, "coordinator_id", None)
    return value if value is not None and value >= 0 else None
