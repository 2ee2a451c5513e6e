"""The checker: what the producer was told against what the consumer and the replicas
hold, and the summary table every chaos run prints.

How it works: `check(producer, consumer, replicas)` takes the verifiable producer's
acknowledgements (value -> partition, offset), the records (partition, offset, value) of
a verifiable consumer that read the whole log after healing, those a consumer read while
the faults went on, and, optionally, each partition's replicas read from disk
after healing (broker -> {offset: value}), and counts:
- lost: acknowledged values not in the healed log (must be 0);
- offset disagreements: acknowledged values not read at the offset they were
  acknowledged at, plus offsets read with two different values by either consumer (a
  consumer saw the log change under it);
- duplicates: values read at more than one offset (retries without idempotence write a
  record twice: reported, allowed unless the run is idempotent);
- divergent: offsets below the replicas' common end at which two replicas of a partition
  hold different values (must be 0 once the cluster has healed).
`Summary` accumulates verdicts and fault counts over a run and prints them as a table,
with the p99 of the acknowledgement latency (all acks, and those during a fault).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class Verdict:
    acked: int = 0
    failed: int = 0
    consumed: int = 0
    lost: list[str] = field(default_factory=list)
    offset_disagreements: list[str] = field(default_factory=list)
    duplicates: int = 0
    divergent: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    fault_latencies_ms: list[float] = field(default_factory=list)
    lost_in_fault_window: list[str] = field(default_factory=list)  # acked during a fault

    def ok(self, *, idempotent: bool = False) -> bool:
        clean = not (self.lost or self.offset_disagreements or self.divergent)
        return clean and (not idempotent or self.duplicates == 0)

    def problems(self) -> str:
        parts = []
        if self.lost:
            parts.append(f"lost {len(self.lost)} acknowledged: {self.lost[:10]}")
        if self.offset_disagreements:
            parts.append(
                f"{len(self.offset_disagreements)} offset disagreements: "
                f"{self.offset_disagreements[:5]}"
            )
        if self.divergent:
            parts.append(f"{len(self.divergent)} divergent offsets: {self.divergent[:5]}")
        if self.duplicates:
            parts.append(f"{self.duplicates} duplicates")
        return "; ".join(parts) or "none"


def check(
    acked: dict[str, tuple[int, int]],
    consumed: list[tuple[int, int, str]],
    *,
    observed: list[tuple[int, int, str]] = (),
    failed: int = 0,
    replicas: dict[int, dict[int, dict[int, bytes | None]]] | None = None,
) -> Verdict:
    """`consumed`: a full read of the healed log (what is there now); `observed`: what
    consumers read while the faults went on (only checked for offsets read with two
    different values)."""
    verdict = Verdict(acked=len(acked), failed=failed, consumed=len(consumed))
    at: dict[tuple[int, int], set[str]] = defaultdict(set)  # (partition, offset) -> values
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)  # value -> positions read
    for partition, offset, value in consumed:
        at[(partition, offset)].add(value)
        where[value].add((partition, offset))
    for partition, offset, value in observed:
        at[(partition, offset)].add(value)
    for value, position in acked.items():
        if value not in where:
            verdict.lost.append(value)
        elif position not in where[value]:
            verdict.offset_disagreements.append(
                f"{value} acked at {position}, read at {sorted(where[value])}"
            )
    for position, values in at.items():
        if len(values) > 1:
            verdict.offset_disagreements.append(f"{position} read as {sorted(values)}")
    verdict.duplicates = sum(len(positions) - 1 for positions in where.values())
    for partition, by_broker in (replicas or {}).items():
        verdict.divergent += divergence(partition, by_broker)
    return verdict


def divergence(partition: int, by_broker: dict[int, dict[int, bytes | None]]) -> list[str]:
    """Offsets below the replicas' common end where two replicas disagree."""
    if len(by_broker) < 2:
        return []
    end = min((max(log) + 1 if log else 0) for log in by_broker.values())
    out = []
    for offset in range(end):
        values = {broker: log.get(offset, b"<missing>") for broker, log in by_broker.items()}
        if len(set(values.values())) > 1:
            out.append(f"partition {partition} offset {offset}: {values}")
    return out


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@dataclass
class Summary:
    title: str
    faults: Counter = field(default_factory=Counter)
    rows: list[tuple[str, Verdict]] = field(default_factory=list)

    def add(self, name: str, verdict: Verdict) -> None:
        self.rows.append((name, verdict))

    def total(self) -> Verdict:
        total = Verdict()
        for _, v in self.rows:
            total.acked += v.acked
            total.failed += v.failed
            total.consumed += v.consumed
            total.lost += v.lost
            total.offset_disagreements += v.offset_disagreements
            total.duplicates += v.duplicates
            total.divergent += v.divergent
            total.latencies_ms += v.latencies_ms
            total.fault_latencies_ms += v.fault_latencies_ms
        return total

    def table(self) -> str:
        header = (
            f"{'run':<34}{'acked':>8}{'failed':>8}{'consumed':>10}{'lost':>6}{'dups':>7}"
            f"{'offset!=':>9}{'diverg':>8}{'p99 ms':>9}{'p99 flt':>9}"
        )
        lines = [f"== {self.title} ==", header, "-" * len(header)]

        def row(name: str, v: Verdict) -> str:
            all_p99, fault_p99 = p99(v.latencies_ms), p99(v.fault_latencies_ms)
            return (
                f"{name[:33]:<34}{v.acked:>8}{v.failed:>8}{v.consumed:>10}{len(v.lost):>6}"
                f"{v.duplicates:>7}{len(v.offset_disagreements):>9}{len(v.divergent):>8}"
                f"{_ms(all_p99):>9}{_ms(fault_p99):>9}"
            )

        for name, v in self.rows:
            lines.append(row(name, v))
        if len(self.rows) > 1:
            lines.append("-" * len(header))
            lines.append(row("total", self.total()))
        if self.faults:
            lines.append(
                "faults: " + ", ".join(f"{kind}={n}" for kind, n in sorted(self.faults.items()))
            )
        return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
