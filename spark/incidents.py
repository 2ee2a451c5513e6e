"""The failure timeline: incidents, lanes and event markers, as plain data from event rows.

How it works: `failure_timeline(broker_rows, controller_rows, end_ts)` takes the rows of
the brokers' `events.jsonl` and the controllers' `controller-events.jsonl` (dicts with the
columns of `spark.schemas`; the job collects only the kinds listed in `BROKER_KINDS` and
`CONTROLLER_KINDS`: one row per state change, never per record) and replays them in time
order. Pure Python, no Spark: the same rows always give the same timeline.

- Brokers (lane `broker N`): `down` from the controller's `broker_down` to its next
  `broker_up` (`broker_bounced`: down and up at once); a broker that wrote `session_lost`
  itself while down was alive all along (paused, or cut off from ZooKeeper), so that span
  is `paused`; `not_answering` from the first ISR shrink (by a leader or the controller)
  that drops a broker the controller still thinks alive until it is back in every ISR it
  left, or until it is declared down.
- Controller (lane `controller`): one `active` span per term, from `controller_elected` to
  the next election or its own `controller_resigned`. A change of active controller (or a
  resignation) is a `controller failover` incident; a killed controller writes nothing, so
  then the failover is known only from its successor's election (start = end).
- Partitions (lanes `ISR <topic>-<p>`): `under_replicated` while the ISR is smaller than
  the replication factor (the largest replica list, else ISR, seen), `offline` while the
  leader is -1. Observations from an older leader epoch than one already applied are
  ignored, as in `spark.timeline`.
- Markers: one per broker down/up/bounce/not answering, controller change, leader change
  (not a new partition's first leader) and ISR shrink/expand; the report draws them as
  vertical lines on every time plot.
- Incidents: a broker's consecutive not-answering/down/paused spans are one incident
  (kind `killed` when the broker never noticed, `paused` when it wrote `session_lost`,
  `stopped` when it went down after asking for a controlled shutdown, `not answering`
  when it was only dropped from ISRs); controller failovers are
  incidents too. Recovery time is from the incident's first failure event to the first
  moment at or after its end when no partition is under-replicated or offline; None
  when that never happens in the data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BROKER_KINDS",
    "CONTROLLER_KINDS",
    "FailureTimeline",
    "Incident",
    "Marker",
    "Span",
    "failure_timeline",
    "format_duration",
    "leader_counts",
    "partition_counts",
    "partition_states",
]

# An event row: a dict of the event table's columns (`spark.schemas`: ints, strings,
# arrays of ints, or None), as `Row.asDict()` gives it (typed `Dict[str, Any]` by pyspark)
# or a parsed JSON line.
EventRow = Mapping[str, Any]

BROKER_KINDS = ("became_leader", "isr_shrink", "isr_expand", "session_lost")
CONTROLLER_KINDS = (
    "controller_elected",
    "controller_resigned",
    "broker_up",
    "broker_down",
    "broker_bounced",
    "controlled_shutdown",
    "leader_change",
    "isr_change",
)
NO_LEADER = -1


@dataclass(frozen=True)
class Span:
    """A condition that held on one lane from `start_ts` to `end_ts` (None: still open)."""

    lane: str
    kind: str  # down | paused | not_answering | active | under_replicated | offline
    start_ts: int
    end_ts: int | None
    label: str = ""


@dataclass(frozen=True)
class Marker:
    """A moment worth a vertical line on every time plot."""

    ts: int
    kind: str  # broker_down | broker_up | broker_bounced | not_answering | controller_change
    #            | leader_change | isr_shrink | isr_expand
    label: str


@dataclass(frozen=True)
class Incident:
    kind: str  # killed | paused | not answering | controller failover
    subject: str  # "broker 2", "controller"
    start_ts: int  # the first failure event
    end_ts: int | None  # back up and answering / new controller elected; None: not yet
    recovered_ts: int | None  # first moment >= end_ts with every partition's ISR full
    detail: str = ""

    @property
    def recovery_ms(self) -> int | None:
        return None if self.recovered_ts is None else self.recovered_ts - self.start_ts


@dataclass
class FailureTimeline:
    start_ts: int | None
    end_ts: int | None
    spans: list[Span] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    under_replicated_ms: int = 0  # time with at least one partition under-replicated
    offline_ms: int = 0  # time with at least one partition offline
    # (ts, (topic, partition), leader) each time a partition's leader changed (-1: none)
    leaders: list[tuple[int, tuple[str, int], int]] = field(default_factory=list)
    partitions: list[tuple[str, int]] = field(default_factory=list)  # every one seen

    def lanes(self) -> list[str]:
        """Lane names in drawing order: controller, brokers, then partitions."""

        def order(lane: str) -> tuple[int, object]:
            if lane == "controller":
                return (0, 0)
            if lane.startswith("broker "):
                return (1, int(lane.split()[1]))
            return (2, lane)

        return sorted({s.lane for s in self.spans}, key=order)


def leader_counts(timeline: FailureTimeline) -> dict[int, list[tuple[int, int]]]:
    """Per broker, (ts, partitions it leads) at the start and at every change, up to the
    end of the timeline (a step function); a broker that never led anything is absent."""
    if timeline.start_ts is None:
        return {}
    current: dict[tuple[str, int], int] = {}
    counts: dict[int, int] = {}
    series: dict[int, list[tuple[int, int]]] = {}
    for ts, tp, leader in sorted(timeline.leaders, key=lambda e: e[0]):
        old = current.get(tp)
        current[tp] = leader
        for broker, step in ((old, -1), (leader, 1)):
            if broker is None or broker == NO_LEADER:
                continue
            counts[broker] = counts.get(broker, 0) + step
            points = series.setdefault(broker, [(timeline.start_ts, 0)])
            if points[-1][0] == ts:
                points[-1] = (ts, counts[broker])
            else:
                points.append((ts, counts[broker]))
    end = timeline.end_ts if timeline.end_ts is not None else timeline.start_ts
    for broker, points in series.items():
        points.append((end, counts[broker]))
    return series


# Partition states in `partition_states`' matrix.
STATE_FULL, STATE_UNDER_REPLICATED, STATE_OFFLINE = 0, 1, 2


def partition_states(
    timeline: FailureTimeline, bins: int = 200
) -> tuple[list[str], list[int], list[list[int]]]:
    """The ISR heatmap's data: partition names, the start ts of each of `bins` equal time
    bins, and per partition per bin its worst state in that bin (STATE_FULL,
    STATE_UNDER_REPLICATED, STATE_OFFLINE)."""
    if timeline.start_ts is None or not timeline.partitions:
        return [], [], []
    start = timeline.start_ts
    end = max(timeline.end_ts if timeline.end_ts is not None else start, start + 1)
    width = (end - start) / bins
    edges = [start + int(i * width) for i in range(bins)]
    names = [f"{t}-{p}" for t, p in timeline.partitions]
    index = {name: i for i, name in enumerate(names)}
    matrix = [[STATE_FULL] * bins for _ in names]
    for span in timeline.spans:
        state = {"under_replicated": STATE_UNDER_REPLICATED, "offline": STATE_OFFLINE}.get(
            span.kind
        )
        row = index.get(span.lane.removeprefix("ISR "))
        if state is None or row is None:
            continue
        stop = span.end_ts if span.end_ts is not None else end
        first = max(0, min(bins - 1, int((span.start_ts - start) / width)))
        last = max(first, min(bins - 1, int((max(stop - 1, span.start_ts) - start) / width)))
        for b in range(first, last + 1):
            matrix[row][b] = max(matrix[row][b], state)
    return names, edges, matrix


def partition_counts(timeline: FailureTimeline) -> list[tuple[int, int, int]]:
    """(ts, under-replicated partitions, offline partitions) at every change, from the
    start to the end of the timeline (a step function: each value holds until the next)."""
    if timeline.start_ts is None:
        return []
    end = timeline.end_ts if timeline.end_ts is not None else timeline.start_ts
    deltas: dict[int, list[int]] = {timeline.start_ts: [0, 0], end: [0, 0]}
    for span in timeline.spans:
        column = {"under_replicated": 0, "offline": 1}.get(span.kind)
        if column is None:
            continue
        deltas.setdefault(span.start_ts, [0, 0])[column] += 1
        if span.end_ts is not None:
            deltas.setdefault(span.end_ts, [0, 0])[column] -= 1
    counts, under, offline = [], 0, 0
    for ts in sorted(deltas):
        under += deltas[ts][0]
        offline += deltas[ts][1]
        counts.append((ts, under, offline))
    return counts


def _incident_kind(phases: list[str]) -> str:
    if "paused" in phases:
        return "paused"
    if "down" in phases:
        return "killed"
    if "stopped" in phases:
        return "stopped"  # a controlled shutdown: planned, but the replicas were away
    return "not answering"


def format_duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _int(value: int | None) -> int | None:
    return None if value is None else int(value)


def _ints(value: Iterable[int] | None) -> list[int]:
    return [int(v) for v in value] if value is not None else []


class _Replay:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.markers: list[Marker] = []
        self.incidents: list[Incident] = []
        # brokers
        self.down: dict[int, tuple[int, bool]] = {}  # broker -> (since, wrote session_lost)
        self.out_of_isr: dict[int, tuple[int, set[tuple[str, int]]]] = {}  # since, partitions
        self.incident_start: dict[int, int] = {}
        self.incident_phases: dict[int, list[str]] = {}
        self.stopping: set[int] = set()  # asked for a controlled shutdown, not yet back
        # controller
        self.controller: tuple[int, int] | None = None  # (id, since)
        self.failover_start: int | None = None
        # partitions: (topic, p) -> state
        self.epoch: dict[tuple[str, int], int] = {}
        self.isr: dict[tuple[str, int], list[int]] = {}
        self.leader: dict[tuple[str, int], int | None] = {}
        self.leader_history: list[tuple[int, tuple[str, int], int]] = []
        self.rf: dict[tuple[str, int], int] = {}
        self.under_since: dict[tuple[str, int], int] = {}
        self.offline_since: dict[tuple[str, int], int] = {}
        # cluster-wide health, for recovery times and totals
        self.unhealthy_since: int | None = None
        self.pending: list[tuple[str, str, int, int, str]] = []  # kind, subject, start, end
        self.under_ms = 0
        self.offline_ms = 0
        self.any_under_since: int | None = None
        self.any_offline_since: int | None = None

    # -- brokers -----------------------------------------------------------------------
    def _begin_incident(self, broker: int, ts: int, phase: str) -> None:
        self.incident_start.setdefault(broker, ts)
        phases = self.incident_phases.setdefault(broker, [])
        if not phases or phases[-1] != phase:
            phases.append(phase)

    def _end_incident(self, broker: int, ts: int) -> None:
        if broker in self.down or broker in self.out_of_isr:
            return
        start = self.incident_start.pop(broker, None)
        phases = self.incident_phases.pop(broker, [])
        if start is None:
            return
        kind = _incident_kind(phases)
        self.pending.append((kind, f"broker {broker}", start, ts, " -> ".join(phases)))

    def controlled_shutdown(self, broker: int) -> None:
        self.stopping.add(broker)

    def broker_down(self, broker: int, ts: int) -> None:
        if broker in self.down:
            return
        self._close_out_of_isr(broker, ts, "declared down")
        self.down[broker] = (ts, False)
        stopped = broker in self.stopping
        self._begin_incident(broker, ts, "stopped" if stopped else "down")
        what = "stopped (controlled shutdown)" if stopped else "down"
        self.markers.append(Marker(ts, "broker_down", f"broker {broker} {what}"))

    def _down_span(self, broker: int, since: int, alive: bool, end: int | None) -> Span:
        if alive:
            return Span(f"broker {broker}", "paused", since, end, "paused (session expired)")
        if broker in self.stopping:
            return Span(f"broker {broker}", "stopped", since, end, "stopped (controlled)")
        return Span(f"broker {broker}", "down", since, end, "down")

    def broker_up(self, broker: int, ts: int) -> None:
        if broker not in self.down:
            return
        since, alive = self.down.pop(broker)
        self.spans.append(self._down_span(broker, since, alive, ts))
        self.stopping.discard(broker)
        self.markers.append(Marker(ts, "broker_up", f"broker {broker} up"))
        self._end_incident(broker, ts)

    def session_lost(self, broker: int, ts: int) -> None:
        if broker in self.down:
            self.down[broker] = (self.down[broker][0], True)
            phases = self.incident_phases.get(broker, [])
            if phases and phases[-1] == "down":
                phases[-1] = "paused"

    def dropped_from_isr(self, broker: int, tp: tuple[str, int], ts: int) -> None:
        if broker in self.down:
            return
        if broker not in self.out_of_isr:
            self.out_of_isr[broker] = (ts, set())
            self._begin_incident(broker, ts, "not answering")
            self.markers.append(Marker(ts, "not_answering", f"broker {broker} dropped from ISR"))
        self.out_of_isr[broker][1].add(tp)

    def back_in_isr(self, broker: int, tp: tuple[str, int], ts: int) -> None:
        if broker not in self.out_of_isr:
            return
        self.out_of_isr[broker][1].discard(tp)
        if not self.out_of_isr[broker][1]:
            self._close_out_of_isr(broker, ts, "back in ISR")
            self._end_incident(broker, ts)

    def _close_out_of_isr(self, broker: int, ts: int, why: str) -> None:
        entry = self.out_of_isr.pop(broker, None)
        if entry is not None:
            since, tps = entry
            names = ", ".join(sorted(f"{t}-{p}" for t, p in tps))
            label = f"not answering ({names})" if names else "not answering"
            self.spans.append(Span(f"broker {broker}", "not_answering", since, ts, label))

    # -- controller --------------------------------------------------------------------
    def controller_elected(self, controller: int, ts: int) -> None:
        previous = self.controller
        if previous is not None and previous[0] == controller:
            return
        if previous is not None:
            self.spans.append(
                Span("controller", "active", previous[1], ts, f"controller {previous[0]}")
            )
        if previous is not None or self.failover_start is not None:
            start = self.failover_start if self.failover_start is not None else ts
            old = f"controller {previous[0]}" if previous is not None else "no controller"
            self.pending.append(
                ("controller failover", "controller", start, ts, f"{old} -> {controller}")
            )
            self.markers.append(Marker(ts, "controller_change", f"controller {controller} elected"))
        self.failover_start = None
        self.controller = (controller, ts)

    def controller_resigned(self, controller: int, ts: int) -> None:
        if self.controller is None or self.controller[0] != controller:
            return
        self.spans.append(
            Span("controller", "active", self.controller[1], ts, f"controller {controller}")
        )
        self.controller = None
        self.failover_start = ts

    # -- partitions --------------------------------------------------------------------
    def observe(
        self,
        tp: tuple[str, int],
        ts: int,
        epoch: int | None,
        leader: int | None,
        isr: list[int] | None,
        replicas: list[int],
    ) -> None:
        if epoch is not None:
            if epoch < self.epoch.get(tp, -1):
                return
            self.epoch[tp] = epoch
        if replicas:
            self.rf[tp] = max(self.rf.get(tp, 0), len(replicas))
        if leader is not None:
            if self.leader.get(tp) != leader:
                self.leader_history.append((ts, tp, leader))
            self.leader[tp] = leader
        if isr is not None:
            old = self.isr.get(tp)
            self.isr[tp] = isr
            self.rf[tp] = max(self.rf.get(tp, 0), len(isr))
            if old is not None:
                for broker in set(old) - set(isr):
                    self.dropped_from_isr(broker, tp, ts)
            for broker in isr:
                self.back_in_isr(broker, tp, ts)
        name = f"ISR {tp[0]}-{tp[1]}"
        size = len(self.isr.get(tp, []))
        under = tp in self.isr and size < self.rf.get(tp, 0)
        if under and tp not in self.under_since:
            self.under_since[tp] = ts
        elif not under and tp in self.under_since:
            since = self.under_since.pop(tp)
            self.spans.append(Span(name, "under_replicated", since, ts, "under-replicated"))
        offline = self.leader.get(tp) == NO_LEADER
        if offline and tp not in self.offline_since:
            self.offline_since[tp] = ts
        elif not offline and tp in self.offline_since:
            since = self.offline_since.pop(tp)
            self.spans.append(Span(name, "offline", since, ts, "offline (no leader)"))

    def health(self, ts: int) -> None:
        """After all events at `ts`: account cluster-wide time and settle recoveries."""
        if self.under_since and self.any_under_since is None:
            self.any_under_since = ts
        elif not self.under_since and self.any_under_since is not None:
            self.under_ms += ts - self.any_under_since
            self.any_under_since = None
        if self.offline_since and self.any_offline_since is None:
            self.any_offline_since = ts
        elif not self.offline_since and self.any_offline_since is not None:
            self.offline_ms += ts - self.any_offline_since
            self.any_offline_since = None
        if not self.under_since and not self.offline_since:
            for kind, subject, start, end, detail in self.pending:
                self.incidents.append(Incident(kind, subject, start, end, ts, detail))
            self.pending.clear()

    def finish(self, end_ts: int) -> None:
        for broker, (since, alive) in sorted(self.down.items()):
            self.spans.append(self._down_span(broker, since, alive, None))
        for broker in sorted(self.out_of_isr):
            since, tps = self.out_of_isr[broker]
            names = ", ".join(sorted(f"{t}-{p}" for t, p in tps))
            self.spans.append(
                Span(f"broker {broker}", "not_answering", since, None, f"not answering ({names})")
            )
        for broker, start in sorted(self.incident_start.items()):
            phases = self.incident_phases.get(broker, [])
            self.incidents.append(
                Incident(
                    _incident_kind(phases),
                    f"broker {broker}",
                    start,
                    None,
                    None,
                    " -> ".join(phases),
                )
            )
        for kind, subject, start, end, detail in self.pending:
            self.incidents.append(Incident(kind, subject, start, end, None, detail))
        if self.controller is not None:
            controller, since = self.controller
            self.spans.append(Span("controller", "active", since, None, f"controller {controller}"))
        elif self.failover_start is not None:
            self.incidents.append(
                Incident("controller failover", "controller", self.failover_start, None, None)
            )
        for tp, since in sorted(self.under_since.items()):
            name = f"ISR {tp[0]}-{tp[1]}"
            self.spans.append(Span(name, "under_replicated", since, None, "under-replicated"))
        for tp, since in sorted(self.offline_since.items()):
            name = f"ISR {tp[0]}-{tp[1]}"
            self.spans.append(Span(name, "offline", since, None, "offline (no leader)"))
        if self.any_under_since is not None:
            self.under_ms += max(0, end_ts - self.any_under_since)
        if self.any_offline_since is not None:
            self.offline_ms += max(0, end_ts - self.any_offline_since)


# Order of events with the same timestamp: who is alive first, then leadership, then ISR.
_RANK = {
    "controlled_shutdown": 0,
    "controller_resigned": 0,
    "controller_elected": 1,
    "broker_down": 2,
    "broker_bounced": 2,
    "session_lost": 3,
    "broker_up": 4,
    "leader_change": 5,
    "isr_change": 5,
    "became_leader": 6,
    "isr_shrink": 7,
    "isr_expand": 7,
}


def failure_timeline(
    broker_rows: Iterable[EventRow],
    controller_rows: Iterable[EventRow],
    end_ts: int | None = None,
) -> FailureTimeline:
    """Replay the event rows into spans, markers and incidents (see the module doc).

    `end_ts` (the last moment anything was observed, e.g. a metrics snapshot) closes
    what is still open; by default the last event's time.
    """
    rows: list[tuple[int, int, str, EventRow]] = []
    for source, kinds in (("broker", BROKER_KINDS), ("controller", CONTROLLER_KINDS)):
        for row in broker_rows if source == "broker" else controller_rows:
            kind = row.get("event")
            if isinstance(kind, str) and kind in kinds and row.get("ts") is not None:
                rows.append((int(row["ts"]), _RANK[kind], f"{source}:{kind}", row))
    rows.sort(key=lambda r: (r[0], r[1]))
    if not rows:
        return FailureTimeline(None, end_ts)
    replay = _Replay()
    previous_ts: int | None = None
    for ts, _, tag, row in rows:
        if previous_ts is not None and ts != previous_ts:
            replay.health(previous_ts)
        previous_ts = ts
        _apply(replay, ts, tag, row)
    assert previous_ts is not None
    replay.health(previous_ts)
    last = max(previous_ts, end_ts if end_ts is not None else previous_ts)
    replay.finish(last)
    spans = sorted(replay.spans, key=lambda s: (s.start_ts, s.lane))
    markers = sorted(replay.markers, key=lambda m: (m.ts, m.kind))
    incidents = sorted(replay.incidents, key=lambda i: (i.start_ts, i.subject))
    known = set(replay.isr) | set(replay.leader)
    return FailureTimeline(
        rows[0][0],
        last,
        spans,
        markers,
        incidents,
        replay.under_ms,
        replay.offline_ms,
        replay.leader_history,
        sorted(known),
    )


def _apply(replay: _Replay, ts: int, tag: str, row: EventRow) -> None:
    source, kind = tag.split(":")
    if source == "controller":
        controller = _int(row.get("controller"))
        broker = _int(row.get("broker"))
        if kind == "controller_elected" and controller is not None:
            replay.controller_elected(controller, ts)
        elif kind == "controller_resigned" and controller is not None:
            replay.controller_resigned(controller, ts)
        elif kind == "broker_down" and broker is not None:
            replay.broker_down(broker, ts)
        elif kind == "broker_up" and broker is not None:
            replay.broker_up(broker, ts)
        elif kind == "controlled_shutdown" and broker is not None:
            replay.controlled_shutdown(broker)
        elif kind == "broker_bounced" and broker is not None:
            replay.markers.append(Marker(ts, "broker_bounced", f"broker {broker} bounced"))
        elif kind in ("leader_change", "isr_change") and row.get("topic") is not None:
            tp = (str(row["topic"]), int(row["partition"]))
            leader = _int(row.get("new_leader"))
            if kind == "leader_change" and row.get("old_leader") is not None:
                label = f"{tp[0]}-{tp[1]} leader {row.get('old_leader')} -> {leader}"
                replay.markers.append(Marker(ts, "leader_change", label))
            isr = _ints(row.get("isr")) if row.get("isr") is not None else None
            old = _ints(row.get("old_isr"))
            if isr is not None and row.get("old_isr") is not None and set(isr) != set(old):
                what = "isr_shrink" if len(isr) < len(old) else "isr_expand"
                replay.markers.append(Marker(ts, what, f"{tp[0]}-{tp[1]} ISR {isr}"))
            replay.observe(tp, ts, _int(row.get("leader_epoch")), leader, isr, [])
        return
    broker = _int(row.get("broker"))
    if kind == "session_lost":
        if broker is not None:
            replay.session_lost(broker, ts)
        return
    if row.get("topic") is None or row.get("partition") is None:
        return
    tp = (str(row["topic"]), int(row["partition"]))
    replicas = _ints(row.get("replicas"))
    if kind == "became_leader":
        isr = _ints(row.get("isr")) if row.get("isr") is not None else None
        replay.observe(tp, ts, _int(row.get("leader_epoch")), broker, isr, replicas)
    else:
        isr = _ints(row.get("new_isr")) if row.get("new_isr") is not None else None
        replay.markers.append(Marker(ts, kind, f"{tp[0]}-{tp[1]} ISR {isr}"))
        replay.observe(tp, ts, _int(row.get("leader_epoch")), broker, isr, replicas)
