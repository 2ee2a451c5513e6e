"""`tributary cluster watch`, the pure half: snapshots, the events between them, rendering.

How it works: the shell (tools/commands/watch.py) reads ZooKeeper (registered brokers,
the active controller, every partition's leader/epoch/ISR) and asks every registered
broker for DescribeLogDirs (HW and LEO of each replica it hosts). `build_snapshot` turns
those answers into a `ClusterSnapshot`: plain values, stamped with the `taken_at_ms` the
shell passes in. `diff_events(old, new)` compares two snapshots and lists what a person
watching wants to notice: ISR shrink/expand, leader changes (with the new leader epoch),
partitions going offline, brokers up/down, controller changes, topics created or deleted.
Many partitions changing the same way in one step (a broker dies) collapse into one line.
`WatchHistory` keeps the previous snapshot and the last few events for the live view.
`render(snapshot, events)` builds the frame as a rich renderable (header, partition table,
groups table, event lines); `render_to_string` prints it to a string without colours
(tests, `--once`).

Consumer groups: the shell also asks the group coordinators (through the admin client)
for every group's state, generation, members and committed offsets; `group_snapshot`
keeps them as a `GroupSnapshot`. A group's total lag is computed here, from what the
snapshot already holds: the sum over its committed partitions of the partition leader's
high watermark (DescribeLogDirs) minus the committed offset. Anything unknown (the group
query failed, the leader did not answer) shows as "?", never as an error; committed
offsets of a topic that no longer exists are left out. Groups appearing, disappearing
and changing generation (a rebalance) are events too.

Nothing here touches the network, ZooKeeper or a clock.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from client.protocol import messages as m
from tools.cluster.inspect import ClusterView

# What a broker id can be in a snapshot.
BROKER_UP = "up"  # registered in ZooKeeper and answering requests
BROKER_NOT_ANSWERING = "not answering"  # registered, but silent (paused, overloaded, cut off)
BROKER_DOWN = "down"  # not registered in ZooKeeper

# Severities of events (and the colours they are shown in).
INFO, WARNING, ERROR = "info", "warning", "error"
_STYLE = {INFO: "green", WARNING: "yellow", ERROR: "red"}

# Event lines the live view keeps (the brief: "the last ~8 events").
DEFAULT_MAX_EVENTS = 8
# Up to this many partitions changing the same way in one step get one line each; more
# collapse into one line (a broker with 200 leaderships dying is one event, not 400).
MAX_DETAILED_PER_GROUP = 3
# Partition names listed in a collapsed line before "+N more".
MAX_NAMES_LISTED = 4


@dataclass(frozen=True)
class ReplicaOffsets:
    """One replica's log as its broker reported it (DescribeLogDirs)."""

    high_watermark: int
    log_end_offset: int
    is_leader: bool = False
    leader_epoch: int = -1


@dataclass(frozen=True)
class PartitionSnapshot:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int  # -1: offline
    leader_epoch: int
    isr: tuple[int, ...]
    # Replica broker id -> its offsets; absent when that broker did not answer or does
    # not host the partition.
    offsets: Mapping[int, ReplicaOffsets] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def is_offline(self) -> bool:
        return self.leader < 0

    @property
    def is_under_replicated(self) -> bool:
        return not self.is_offline and len(set(self.isr)) < len(set(self.replicas))


@dataclass(frozen=True)
class GroupSnapshot:
    """One consumer group as its coordinator described it; None where not known."""

    group_id: str
    state: str | None = None
    generation: int | None = None
    members: int | None = None
    coordinator: int | None = None
    # (topic, partition) -> committed offset; None when the offsets could not be read.
    committed: Mapping[tuple[str, int], int] | None = None


@dataclass(frozen=True)
class ClusterSnapshot:
    taken_at_ms: int
    zookeeper: str
    brokers: Mapping[int, str] = field(default_factory=dict)  # id -> BROKER_* state
    controller_id: int | None = None
    controller_epoch: int | None = None
    partitions: tuple[PartitionSnapshot, ...] = ()
    error: str | None = None  # ZooKeeper could not be read: nothing else is known
    # Consumer groups: None when not asked for (no groups section); `groups_error` says
    # why the groups could not be listed this time (the section shows "?").
    groups: tuple[GroupSnapshot, ...] | None = None
    groups_error: str | None = None
    racks: Mapping[int, str] = field(default_factory=dict)  # registered broker id -> rack

    def brokers_in(self, state: str) -> list[int]:
        return sorted(b for b, s in self.brokers.items() if s == state)

    def partition(self, topic: str, partition: int) -> PartitionSnapshot | None:
        return next(
            (p for p in self.partitions if p.topic == topic and p.partition == partition), None
        )

    def topics(self) -> dict[str, int]:
        """Topic -> partition count."""
        counts: dict[str, int] = {}
        for p in self.partitions:
            counts[p.topic] = counts.get(p.topic, 0) + 1
        return counts


@dataclass(frozen=True)
class WatchEvent:
    at_ms: int
    kind: str  # isr_shrink, isr_expand, leader_change, offline, online, broker_up, ...
    message: str
    severity: str = INFO


# -- building snapshots -------------------------------------------------------------------
def offsets_from_log_dirs(
    response: m.DescribeLogDirsResponse,
) -> dict[tuple[str, int], ReplicaOffsets]:
    """(topic, partition) -> offsets, from one broker's DescribeLogDirs answer."""
    found: dict[tuple[str, int], ReplicaOffsets] = {}
    for result in response.results:
        if result.error_code != 0:
            continue
        for topic in result.topics:
            for p in topic.partitions:
                if p.is_future_key:
                    continue
                found[(topic.name, p.partition_index)] = ReplicaOffsets(
                    high_watermark=p.high_watermark,
                    log_end_offset=p.log_end_offset,
                    is_leader=p.is_leader,
                    leader_epoch=p.leader_epoch,
                )
    return found


def build_snapshot(
    view: ClusterView,
    log_dirs: Mapping[int, Mapping[tuple[str, int], ReplicaOffsets] | None],
    *,
    taken_at_ms: int,
    zookeeper: str,
    known_brokers: Iterable[int] = (),
    groups: Iterable[GroupSnapshot] | None = None,
    groups_error: str | None = None,
) -> ClusterSnapshot:
    """A snapshot from ZooKeeper's view and the DescribeLogDirs answers (and the consumer
    groups, when they were asked for).

    `log_dirs[b]` is broker b's answer, or None if it did not answer; brokers not asked
    (not registered) may be missing. `known_brokers` are ids expected to exist (the local
    cluster's brokers), so a broker that never registered still shows as down.
    """
    registered = set(view.brokers)
    ids = set(registered) | set(known_brokers)
    for p in view.partitions:
        ids.update(p.replicas)
    brokers: dict[int, str] = {}
    for broker_id in sorted(ids):
        if broker_id not in registered:
            brokers[broker_id] = BROKER_DOWN
        elif log_dirs.get(broker_id) is None:
            brokers[broker_id] = BROKER_NOT_ANSWERING
        else:
            brokers[broker_id] = BROKER_UP
    partitions = []
    for p in sorted(view.partitions, key=lambda p: (p.topic, p.partition)):
        offsets = {}
        for replica in p.replicas:
            answer = log_dirs.get(replica)
            if answer is not None and (p.topic, p.partition) in answer:
                offsets[replica] = answer[(p.topic, p.partition)]
        partitions.append(
            PartitionSnapshot(
                topic=p.topic,
                partition=p.partition,
                replicas=tuple(p.replicas),
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                isr=tuple(p.isr),
                offsets=offsets,
            )
        )
    return ClusterSnapshot(
        taken_at_ms=taken_at_ms,
        zookeeper=zookeeper,
        brokers=brokers,
        controller_id=view.controller_id,
        controller_epoch=view.controller_epoch,
        partitions=tuple(partitions),
        groups=None if groups is None else tuple(groups),
        groups_error=groups_error,
        racks={b: r.rack for b, r in view.brokers.items() if r.rack},
    )


def group_snapshot(listing, description=None, committed: Mapping | None = None) -> GroupSnapshot:
    """A `GroupSnapshot` from the admin client's answers: the group's listing (id, state,
    coordinator), its description (None: describing failed) and its committed offsets
    (`TopicPartition -> offset`; None: fetching them failed)."""
    state = getattr(listing, "state", None) or None
    coordinator = getattr(listing, "coordinator_id", None)
    generation = members = None
    if description is not None:
        state = description.state or state
        generation = description.generation
        members = len(description.members)
        if description.coordinator_id is not None and description.coordinator_id >= 0:
            coordinator = description.coordinator_id
    return GroupSnapshot(
        group_id=listing.group_id,
        state=state,
        generation=generation if generation is not None and generation >= 0 else None,
        members=members,
        coordinator=coordinator if coordinator is not None and coordinator >= 0 else None,
        committed=None
        if committed is None
        else {(tp[0], tp[1]): o for tp, o in committed.items() if o is not None and o >= 0},
    )


def group_lag(snapshot: ClusterSnapshot, group: GroupSnapshot) -> int | None:
    """Sum over the group's committed partitions of (leader's HW - committed offset);
    None if the offsets or any existing partition's leader HW are unknown."""
    if group.committed is None:
        return None
    partitions = {(p.topic, p.partition): p for p in snapshot.partitions}
    total = 0
    for key, committed in group.committed.items():
        p = partitions.get(key)
        if p is None:
            continue  # the topic is gone: no lag to speak of
        leader = p.offsets.get(p.leader)
        if leader is None:
            return None
        total += leader.high_watermark - committed
    return total


def unavailable_snapshot(error: str, *, taken_at_ms: int, zookeeper: str) -> ClusterSnapshot:
    """What is known when ZooKeeper cannot be read: nothing but the error."""
    return ClusterSnapshot(taken_at_ms=taken_at_ms, zookeeper=zookeeper, error=error)


# -- events ---------------------------------------------------------------------------------
def _racked(ids: Iterable[int], racks: Mapping[int, str]) -> str:
    """Broker ids with their racks when they have one: `1(a),2(b)`."""
    return ",".join(f"{b}({racks[b]})" if b in racks else str(b) for b in ids)


def _ids(ids: Iterable[int]) -> str:
    ids = list(ids)
    return ",".join(str(i) for i in ids) if ids else "none"


def _leader(leader: int) -> str:
    return "none" if leader < 0 else str(leader)


def diff_events(old: ClusterSnapshot | None, new: ClusterSnapshot) -> list[WatchEvent]:
    """What changed from `old` to `new`, in a stable order: ZooKeeper, controller,
    brokers, topics, then partitions. No events without an `old` to compare with."""
    if old is None:
        return []
    at = new.taken_at_ms
    if new.error is not None:
        if old.error is None:
            return [WatchEvent(at, "zookeeper_lost", f"ZooKeeper unreachable: {new.error}", ERROR)]
        return []
    if old.error is not None:
        return [WatchEvent(at, "zookeeper_back", "ZooKeeper reachable again", INFO)]
    events = _controller_events(old, new, at)
    events += _broker_events(old, new, at)
    events += _topic_events(old, new, at)
    events += _partition_events(old, new, at)
    events += _group_events(old, new, at)
    return events


def _controller_events(old: ClusterSnapshot, new: ClusterSnapshot, at: int) -> list[WatchEvent]:
    if (old.controller_id, old.controller_epoch) == (new.controller_id, new.controller_epoch):
        return []
    epoch = f"epoch {new.controller_epoch}" if new.controller_epoch is not None else "no epoch"
    if new.controller_id is None:
        was = f" (was {old.controller_id})" if old.controller_id is not None else ""
        return [WatchEvent(at, "controller_change", f"no active controller{was}", ERROR)]
    if old.controller_id is None:
        message = f"controller {new.controller_id} elected ({epoch})"
    elif old.controller_id == new.controller_id:
        message = f"controller {new.controller_id} re-elected ({epoch})"
    else:
        message = f"controller {old.controller_id} -> {new.controller_id} ({epoch})"
    return [WatchEvent(at, "controller_change", message, WARNING)]


_BROKER_EVENT = {
    BROKER_UP: ("broker_up", "up", INFO),
    BROKER_DOWN: ("broker_down", "down", ERROR),
    BROKER_NOT_ANSWERING: ("broker_not_answering", "not answering (still registered)", WARNING),
}


def _broker_events(old: ClusterSnapshot, new: ClusterSnapshot, at: int) -> list[WatchEvent]:
    events = []
    for broker_id in sorted(set(old.brokers) | set(new.brokers)):
        before, after = old.brokers.get(broker_id), new.brokers.get(broker_id)
        if after is None or before == after or (before is None and after == BROKER_DOWN):
            continue
        kind, words, severity = _BROKER_EVENT[after]
        events.append(WatchEvent(at, kind, f"broker {broker_id} {words}", severity))
    return events


def _topic_events(old: ClusterSnapshot, new: ClusterSnapshot, at: int) -> list[WatchEvent]:
    before, after = old.topics(), new.topics()
    events = []
    for topic in sorted(set(after) - set(before)):
        events.append(
            WatchEvent(at, "topic_created", f"topic {topic} created ({after[topic]} partitions)")
        )
    for topic in sorted(set(before) - set(after)):
        events.append(WatchEvent(at, "topic_deleted", f"topic {topic} deleted", WARNING))
    return events


def _partition_events(old: ClusterSnapshot, new: ClusterSnapshot, at: int) -> list[WatchEvent]:
    # (kind, severity, headline) -> [(partition name, detail)]: partitions that changed the
    # same way are listed under one headline when there are many.
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}

    def add(kind: str, severity: str, headline: str, name: str, detail: str) -> None:
        groups.setdefault((kind, severity, headline), []).append((name, detail))

    before = {(p.topic, p.partition): p for p in old.partitions}
    for p in new.partitions:
        o = before.get((p.topic, p.partition))
        if o is None:
            continue  # a new topic: reported as created
        epoch = f"epoch {p.leader_epoch}"
        if p.leader != o.leader:
            if p.is_offline:
                add(
                    "offline",
                    ERROR,
                    f"offline (leader {o.leader} gone)",
                    p.name,
                    f"offline, no leader (was {_leader(o.leader)}; {epoch})",
                )
            elif o.is_offline:
                add(
                    "online",
                    INFO,
                    f"back online (leader {p.leader})",
                    p.name,
                    f"back online, leader {p.leader} ({epoch})",
                )
            else:
                add(
                    "leader_change",
                    WARNING,
                    f"leader {o.leader} -> {p.leader}",
                    p.name,
                    f"leader {o.leader} -> {p.leader} ({epoch})",
                )
        elif p.leader_epoch != o.leader_epoch and set(p.isr) == set(o.isr):
            add(
                "leader_epoch",
                INFO,
                f"leader epoch bump (leader {_leader(p.leader)})",
                p.name,
                f"leader epoch {o.leader_epoch} -> {p.leader_epoch} (leader {_leader(p.leader)})",
            )
        gone = [b for b in o.isr if b not in p.isr]
        joined = [b for b in p.isr if b not in o.isr]
        if gone:
            add(
                "isr_shrink",
                WARNING,
                f"ISR shrink ({_ids(gone)} out)",
                p.name,
                f"ISR shrink {_ids(o.isr)} -> {_ids(p.isr)} ({_ids(gone)} out)",
            )
        if joined:
            add(
                "isr_expand",
                INFO,
                f"ISR expand ({_ids(joined)} in)",
                p.name,
                f"ISR expand {_ids(o.isr)} -> {_ids(p.isr)} ({_ids(joined)} in)",
            )
    events: list[WatchEvent] = []
    for (kind, severity, headline), items in groups.items():
        if len(items) <= MAX_DETAILED_PER_GROUP:
            events.extend(
                WatchEvent(at, kind, f"{name}: {detail}", severity) for name, detail in items
            )
            continue
        names = [name for name, _ in items]
        listed = ", ".join(names[:MAX_NAMES_LISTED])
        more = f" +{len(names) - MAX_NAMES_LISTED} more" if len(names) > MAX_NAMES_LISTED else ""
        message = f"{headline} on {len(items)} partitions: {listed}{more}"
        events.append(WatchEvent(at, kind, message, severity))
    return events


def _members(n: int | None) -> str:
    return "? members" if n is None else f"{n} member{'' if n == 1 else 's'}"


def _group_events(old: ClusterSnapshot, new: ClusterSnapshot, at: int) -> list[WatchEvent]:
    """Groups created, gone, or in a new generation (a rebalance). Only between two
    snapshots that both listed the groups."""
    if old.groups is None or new.groups is None or old.groups_error or new.groups_error:
        return []
    before = {g.group_id: g for g in old.groups}
    after = {g.group_id: g for g in new.groups}
    events = []
    for group_id in sorted(set(after) - set(before)):
        g = after[group_id]
        events.append(
            WatchEvent(
                at,
                "group_created",
                f"group {group_id} appeared ({g.state or '?'}, {_members(g.members)})",
            )
        )
    for group_id in sorted(set(before) - set(after)):
        events.append(
            WatchEvent(
                at,
                "group_gone",
                f"group {group_id} gone (deleted, or its coordinator is not answering)",
                WARNING,
            )
        )
    for group_id in sorted(set(before) & set(after)):
        o, g = before[group_id], after[group_id]
        if o.generation is None or g.generation is None or o.generation == g.generation:
            continue
        events.append(
            WatchEvent(
                at,
                "group_rebalance",
                f"group {group_id}: generation {o.generation} -> {g.generation} "
                f"({g.state or '?'}, {_members(g.members)})",
                WARNING if g.members == 0 else INFO,
            )
        )
    return events


class WatchHistory:
    """The live view's memory: the previous snapshot, the last good one, recent events.

    `observe(snapshot)` returns the new events and keeps the last `max_events`. When
    ZooKeeper comes back after an outage, the new snapshot is also compared with the last
    one read before it, so what changed meanwhile is not lost.
    """

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS):
        self.previous: ClusterSnapshot | None = None
        self.last_good: ClusterSnapshot | None = None
        self.recent: deque[WatchEvent] = deque(maxlen=max_events)

    def observe(self, snapshot: ClusterSnapshot) -> list[WatchEvent]:
        events = diff_events(self.previous, snapshot)
        previous_failed = self.previous is not None and self.previous.error is not None
        if previous_failed and snapshot.error is None and self.last_good is not None:
            events += diff_events(self.last_good, snapshot)
        self.previous = snapshot
        if snapshot.error is None:
            self.last_good = snapshot
        self.recent.extend(events)
        return events


# -- rendering --------------------------------------------------------------------------------
def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S")


def is_internal_topic(topic: str) -> bool:
    return topic.startswith("__")


def partition_status(snapshot: ClusterSnapshot, p: PartitionSnapshot) -> tuple[str, str]:
    """(status word, row style) of one partition."""
    if p.is_offline:
        return "offline", "red"
    leader_state = snapshot.brokers.get(p.leader)
    if leader_state == BROKER_DOWN:
        return "leader down", "red"
    if p.is_under_replicated:
        return "under-replicated", "yellow"
    if leader_state == BROKER_NOT_ANSWERING:
        return "leader not answering", "yellow"
    return "ok", ""


def _offsets_cell(snapshot: ClusterSnapshot, p: PartitionSnapshot) -> Text:
    """`1*:42/42 2:42/42 3:down`: per replica HW/LEO; * marks the leader."""
    leader_offsets = p.offsets.get(p.leader)
    cell = Text()
    for i, replica in enumerate(p.replicas):
        if i:
            cell.append(" ")
        label = f"{replica}{'*' if replica == p.leader else ''}:"
        offsets = p.offsets.get(replica)
        state = snapshot.brokers.get(replica)
        if offsets is not None:
            lagging = leader_offsets is not None and (
                offsets.log_end_offset < leader_offsets.log_end_offset
            )
            value = f"{offsets.high_watermark}/{offsets.log_end_offset}"
            cell.append(label + value, style="yellow" if lagging else "")
        elif state == BROKER_DOWN:
            cell.append(label + "down", style="red")
        elif state == BROKER_NOT_ANSWERING:
            cell.append(label + "?", style="yellow")
        else:
            cell.append(label + "-", style="dim")  # up, but it hosts no log for this
    return cell


def _header(snapshot: ClusterSnapshot, shown: Sequence[PartitionSnapshot], hidden: int) -> Text:
    text = Text()
    text.append("Tributary cluster", style="bold")
    text.append(f"   zookeeper {snapshot.zookeeper}   {_clock(snapshot.taken_at_ms)}\n")
    if snapshot.error is not None:
        text.append(f"ZooKeeper unreachable: {snapshot.error}", style="bold red")
        return text
    up = snapshot.brokers_in(BROKER_UP)
    silent = snapshot.brokers_in(BROKER_NOT_ANSWERING)
    down = snapshot.brokers_in(BROKER_DOWN)
    text.append("brokers up: ")
    text.append(_racked(up, snapshot.racks) if up else "none", style="green" if up else "red")
    text.append("   down: ")
    text.append(_ids(down) if down else "none", style="red" if down else "")
    if silent:
        text.append("   not answering: ")
        text.append(_racked(silent, snapshot.racks), style="yellow")
    text.append("\n")
    if snapshot.controller_id is None:
        text.append("controller: none", style="red")
    else:
        text.append(f"controller: {snapshot.controller_id}")
    text.append(
        f" (epoch {snapshot.controller_epoch if snapshot.controller_epoch is not None else '-'})\n"
    )
    under = sum(1 for p in shown if p.is_under_replicated)
    offline = sum(1 for p in shown if p.is_offline)
    text.append(f"partitions: {len(shown)}   under-replicated: ")
    text.append(str(under), style="yellow" if under else "")
    text.append("   offline: ")
    text.append(str(offline), style="red" if offline else "")
    if hidden:
        text.append(f"   ({hidden} internal partitions hidden)", style="dim")
    return text


def _partition_table(snapshot: ClusterSnapshot, shown: Sequence[PartitionSnapshot]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("Topic", overflow="fold")
    table.add_column("Part", justify="right")
    table.add_column("Leader", justify="right")
    table.add_column("Epoch", justify="right")
    table.add_column("Replicas")
    table.add_column("ISR")
    table.add_column("HW/LEO per replica (*leader)", overflow="fold")
    table.add_column("Status")
    for p in shown:
        status, style = partition_status(snapshot, p)
        table.add_row(
            p.topic,
            str(p.partition),
            _leader(p.leader),
            str(p.leader_epoch),
            _ids(p.replicas),
            _ids(p.isr),
            _offsets_cell(snapshot, p),
            status,
            style=style or None,
        )
    return table


_GROUP_STYLE = {
    "Stable": "",
    "Empty": "dim",
    "PreparingRebalance": "yellow",
    "CompletingRebalance": "yellow",
    "Dead": "red",
}


def _groups_section(snapshot: ClusterSnapshot) -> RenderableType:
    if snapshot.groups_error is not None:
        return Text(f"consumer groups: ? ({snapshot.groups_error})", style="yellow")
    groups = snapshot.groups or ()
    if not groups:
        return Text("no consumer groups", style="dim")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("Group", overflow="fold")
    table.add_column("State")
    table.add_column("Generation", justify="right")
    table.add_column("Members", justify="right")
    table.add_column("Coordinator", justify="right")
    table.add_column("Lag", justify="right")
    for g in sorted(groups, key=lambda g: g.group_id):
        lag = group_lag(snapshot, g)
        table.add_row(
            g.group_id,
            g.state or "?",
            "?" if g.generation is None else str(g.generation),
            "?" if g.members is None else str(g.members),
            "?" if g.coordinator is None else str(g.coordinator),
            "?" if lag is None else str(lag),
            style=_GROUP_STYLE.get(g.state or "", "") or None,
        )
    return table


def _event_lines(events: Sequence[WatchEvent], max_events: int) -> Text:
    text = Text()
    text.append("events", style="bold")
    recent = list(events)[-max_events:] if max_events > 0 else []
    if not recent:
        text.append("\n  (no changes seen yet)", style="dim")
    for event in recent:
        text.append(f"\n  {_clock(event.at_ms)}  ")
        text.append(event.message, style=_STYLE.get(event.severity, ""))
    return text


def event_line(event: WatchEvent) -> str:
    """One event as one plain line (the watch's output off a terminal)."""
    return f"{_clock(event.at_ms)}  {event.message}"


def snapshot_summary(snapshot: ClusterSnapshot) -> str:
    """The cluster's state in one plain line (the first line off a terminal)."""
    at = _clock(snapshot.taken_at_ms)
    if snapshot.error is not None:
        return f"{at}  zookeeper {snapshot.zookeeper}: ZooKeeper unreachable: {snapshot.error}"
    up = snapshot.brokers_in(BROKER_UP)
    down = snapshot.brokers_in(BROKER_DOWN)
    silent = snapshot.brokers_in(BROKER_NOT_ANSWERING)
    shown = [p for p in snapshot.partitions if not is_internal_topic(p.topic)]
    under = sum(1 for p in shown if p.is_under_replicated)
    offline = sum(1 for p in shown if p.is_offline)
    controller = "none" if snapshot.controller_id is None else snapshot.controller_id
    return (
        f"{at}  zookeeper {snapshot.zookeeper}: brokers up {_ids(up) if up else 'none'}, "
        f"down {_ids(down) if down else 'none'}"
        + (f", not answering {_ids(silent)}" if silent else "")
        + f"; controller {controller}; partitions {len(shown)}, under-replicated {under}, "
        f"offline {offline}"
    )


def render(
    snapshot: ClusterSnapshot,
    events: Sequence[WatchEvent] = (),
    *,
    show_internal: bool = False,
    show_events: bool = True,
    max_events: int = DEFAULT_MAX_EVENTS,
) -> RenderableType:
    """One frame: the header, the partition table, the consumer groups (when the
    snapshot has them) and the last `max_events` events."""
    shown = [p for p in snapshot.partitions if show_internal or not is_internal_topic(p.topic)]
    hidden = len(snapshot.partitions) - len(shown)
    parts: list[RenderableType] = [_header(snapshot, shown, hidden)]
    if snapshot.error is None:
        if shown:
            parts.append(Text(""))
            parts.append(_partition_table(snapshot, shown))
        else:
            parts.append(Text("\nno topics yet", style="dim"))
        if snapshot.groups is not None or snapshot.groups_error is not None:
            parts.append(Text(""))
            parts.append(_groups_section(snapshot))
    if show_events:
        parts.append(Text(""))
        parts.append(_event_lines(events, max_events))
    return Group(*parts)


def render_to_string(
    snapshot: ClusterSnapshot,
    events: Sequence[WatchEvent] = (),
    *,
    width: int = 120,
    **options,
) -> str:
    """The frame as plain text (no colours, no terminal codes)."""
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, force_terminal=False)
    console.print(render(snapshot, events, **options))
    return out.getvalue()
