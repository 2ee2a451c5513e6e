"""The transactional checker: a history of Kafka transactions against what consumers read,
in the style of Jepsen's Kafka workload and Elle (Kingsbury & Alvaro, "Elle: Inferring
Isolation Anomalies from Experimental Observations"). Pure: no I/O, no clock.

Input, a `History`:
- `txns`: every transaction a client ran (`Txn`: id, writer, the (topic, partition,
  value) writes it sent, its outcome as the client saw it — COMMITTED, ABORTED or
  UNKNOWN (a crash, a timeout, an error on commit) —, for consume-transform-produce the
  records it read (`Read`), and when the client asked to commit, if it did);
- `committed_reads`: a final read_committed read of every partition after healing;
- optionally `uncommitted_reads` (a final read_uncommitted read) and `observed_reads`
  (what read_committed consumers read during the run, with the time they read it).
Values are unique across the history: each names the one transaction that wrote it.

Which transactions count as committed: COMMITTED ones; an UNKNOWN one only if any of its
values was read with read_committed and its client asked to commit (then all of its
values must be there, like any committed transaction's); ABORTED ones never.

What `check(history)` reports (`TxnVerdict`), each with the transaction ids involved:
- aborted reads (Elle's G1a): read_committed returned a value of an ABORTED transaction;
- uncommitted reads: read_committed returned a value of a transaction that its client
  never asked to commit, or returned it before the client asked (a read past the last
  stable offset: the reader's time `Read.at` is earlier than `Txn.commit_requested_at`);
- lost writes: a value of a committed transaction missing from the final read_committed
  read (its transaction is also non-atomic if some of its other values are there);
- non-atomic transactions: committed ones only part of which is visible at the end;
- duplicates: a value read at more than one position (topic, partition, offset), by any
  reader, committed or not; inconsistent offsets: one position read with two values;
- unexpected values: read but written by no transaction of the history;
- reprocessed: an input value read by more than one committed consume-transform-produce
  transaction (exactly-once processing consumes each record once);
- cycles among committed transactions, as Elle defines them, each reported with the
  cycle found in it (one per strongly connected component, Tarjan's algorithm):
  G0 (write cycle): only ww edges; G1c (circular information flow): ww and wr edges, at
  least one wr. Edges: `Ti -ww-> Tj` when, in a partition's read_committed offset order,
  a value of Ti is directly followed by a value of Tj (the partition's version order, as
  Jepsen infers it from the offsets consumers observe: all read_committed reads, final,
  observed and consume-transform-produce, merged by offset); `Ti -wr-> Tj` when Tj read
  a value Ti wrote. Kafka isolates no writes: two transactions writing one partition at
  once interleave their records there, which is a G0 cycle by this definition and
  allowed by Kafka's model; a workload that wants G0 to mean a bug gives each partition
  one writer at a time (tests/chaos/txn_workload.py does), so a cycle can then only come
  from a write landing outside its transaction (KAFKA-17754, which KIP-890 prevents).

Elle's G1b (intermediate reads) has no counterpart here: a Kafka record is never
overwritten, so every value is its transaction's final write to its own position.
Linear in the history's size plus the edges: 100k values take about a second here (a
few on a loaded machine; tests/unit/test_txn_checker.py checks such a history).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

COMMITTED = "committed"
ABORTED = "aborted"
UNKNOWN = "unknown"
OUTCOMES = (COMMITTED, ABORTED, UNKNOWN)

Position = tuple[str, int, int]  # topic, partition, offset


@dataclass(frozen=True)
class Read:
    """One record a read_committed (or read_uncommitted) consumer returned; `at`: the
    reader's clock when it got it (the same clock as `Txn.commit_requested_at`)."""

    topic: str
    partition: int
    offset: int
    value: str
    at: float | None = None

    @property
    def position(self) -> Position:
        return (self.topic, self.partition, self.offset)


@dataclass(frozen=True)
class Txn:
    id: str
    writer: str
    writes: tuple[tuple[str, int, str], ...]  # (topic, partition, value) in send order
    outcome: str  # COMMITTED / ABORTED / UNKNOWN, as the client saw it
    reads: tuple[Read, ...] = ()  # consume-transform-produce: what it read (read_committed)
    commit_requested_at: float | None = None  # when commit was asked for (None: never)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"transaction {self.id}: outcome {self.outcome!r}")


@dataclass
class History:
    txns: list[Txn]
    committed_reads: list[Read]  # the final read_committed read of every partition
    uncommitted_reads: list[Read] = field(default_factory=list)
    observed_reads: list[Read] = field(default_factory=list)  # read_committed, during the run


@dataclass(frozen=True)
class Anomaly:
    txns: tuple[str, ...]  # the transaction ids involved (in cycle order for cycles)
    detail: str

    def __str__(self) -> str:
        return self.detail


@dataclass
class TxnVerdict:
    txns: int = 0
    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    values_read: int = 0
    aborted_reads: list[Anomaly] = field(default_factory=list)
    uncommitted_reads: list[Anomaly] = field(default_factory=list)
    lost_writes: list[Anomaly] = field(default_factory=list)
    non_atomic: list[Anomaly] = field(default_factory=list)
    duplicates: list[Anomaly] = field(default_factory=list)
    inconsistent_offsets: list[Anomaly] = field(default_factory=list)
    unexpected_values: list[Anomaly] = field(default_factory=list)
    reprocessed: list[Anomaly] = field(default_factory=list)
    g0: list[Anomaly] = field(default_factory=list)
    g1c: list[Anomaly] = field(default_factory=list)

    ANOMALIES = (
        "aborted_reads",
        "uncommitted_reads",
        "lost_writes",
        "non_atomic",
        "duplicates",
        "inconsistent_offsets",
        "unexpected_values",
        "reprocessed",
        "g0",
        "g1c",
    )

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in self.ANOMALIES}

    def ok(self) -> bool:
        return not any(self.counts().values())

    def problems(self, examples: int = 5) -> str:
        parts = []
        for name, count in self.counts().items():
            if count:
                shown = "; ".join(str(a) for a in getattr(self, name)[:examples])
                parts.append(f"{name} {count}: {shown}")
        return " | ".join(parts) or "none"

    def table(self, title: str) -> str:
        """One header and one row: the summary a chaos run prints."""
        counts = self.counts()
        names = ["txns", "commit", "abort", "unknown", "read", *counts]
        values = [self.txns, self.committed, self.aborted, self.unknown, self.values_read]
        values += list(counts.values())
        widths = [max(len(n), len(str(v))) + 1 for n, v in zip(names, values, strict=True)]
        header = "".join(f"{n:>{w}}" for n, w in zip(names, widths, strict=True))
        row = "".join(f"{v:>{w}}" for v, w in zip(values, widths, strict=True))
        return "\n".join([f"== {title} ==", header, "-" * len(header), row])


def check(history: History) -> TxnVerdict:
    verdict = TxnVerdict(txns=len(history.txns))
    by_id = {txn.id: txn for txn in history.txns}
    if len(by_id) != len(history.txns):
        raise ValueError("transaction ids must be unique")
    writer_of: dict[str, str] = {}  # value -> transaction id
    for txn in history.txns:
        for _, _, value in txn.writes:
            if writer_of.setdefault(value, txn.id) != txn.id:
                raise ValueError(f"value {value!r} written by {writer_of[value]} and {txn.id}")
    rc_reads = _read_committed(history)
    verdict.values_read = len({r.value for r in history.committed_reads})
    committed = _committed(history.txns, rc_reads, writer_of)
    for txn in history.txns:
        if txn.id in committed:
            verdict.committed += 1
        elif txn.outcome == ABORTED:
            verdict.aborted += 1
        else:
            verdict.unknown += 1
    _dirty_reads(verdict, rc_reads, by_id, writer_of)
    _lost_and_torn(verdict, history, committed)
    _positions(verdict, history, rc_reads)
    _reprocessed(verdict, history.txns, committed)
    _cycles(verdict, history, rc_reads, committed, writer_of)
    return verdict


# -- which transactions committed ----------------------------------------------------


def _read_committed(history: History) -> list[Read]:
    """Every read_committed read: the final one, during the run, and transactions' own."""
    reads = list(history.committed_reads) + list(history.observed_reads)
    for txn in history.txns:
        reads += txn.reads
    return reads


def _committed(txns: list[Txn], rc_reads: list[Read], writer_of: dict[str, str]) -> set[str]:
    seen_writers = {writer_of[r.value] for r in rc_reads if r.value in writer_of}
    out = set()
    for txn in txns:
        if txn.outcome == COMMITTED:
            out.add(txn.id)
        elif (
            txn.outcome == UNKNOWN
            and txn.commit_requested_at is not None
            and txn.id in seen_writers
        ):
            out.add(txn.id)
    return out


# -- reads of data that was not (yet) committed --------------------------------------


def _dirty_reads(
    verdict: TxnVerdict, reads: list[Read], by_id: dict[str, Txn], writer_of: dict[str, str]
) -> None:
    aborted: dict[str, list[Read]] = defaultdict(list)
    uncommitted: dict[str, list[Read]] = defaultdict(list)
    unexpected: dict[str, Read] = {}
    for read in reads:
        tid = writer_of.get(read.value)
        if tid is None:
            unexpected.setdefault(read.value, read)
            continue
        txn = by_id[tid]
        if txn.outcome == ABORTED:
            aborted[tid].append(read)
        elif txn.commit_requested_at is None:
            if txn.outcome == UNKNOWN:  # never asked to commit: can only be aborted
                uncommitted[tid].append(read)
        elif read.at is not None and read.at < txn.commit_requested_at:
            uncommitted[tid].append(read)  # read before its commit was asked for
    for tid in sorted(aborted):
        read = aborted[tid][0]
        verdict.aborted_reads.append(
            Anomaly((tid,), f"{tid} aborted, its {read.value!r} read at {_pos(read)}")
        )
    for tid in sorted(uncommitted):
        read = uncommitted[tid][0]
        txn = by_id[tid]
        when = (
            "never asked to commit"
            if txn.commit_requested_at is None
            else f"commit asked at {txn.commit_requested_at:.3f}, read at {read.at:.3f}"
        )
        verdict.uncommitted_reads.append(
            Anomaly((tid,), f"{tid} ({when}): {read.value!r} read at {_pos(read)}")
        )
    for value in sorted(unexpected):
        read = unexpected[value]
        verdict.unexpected_values.append(
            Anomaly((), f"{value!r} at {_pos(read)} written by no transaction")
        )


def _lost_and_torn(verdict: TxnVerdict, history: History, committed: set[str]) -> None:
    final = {r.value for r in history.committed_reads}
    for txn in history.txns:
        if txn.id not in committed or not txn.writes:
            continue
        missing = [value for _, _, value in txn.writes if value not in final]
        if not missing:
            continue
        verdict.lost_writes += [
            Anomaly((txn.id,), f"{value!r} of committed {txn.id} not read") for value in missing
        ]
        if len(missing) < len(txn.writes):
            verdict.non_atomic.append(
                Anomaly(
                    (txn.id,),
                    f"{txn.id}: {len(txn.writes) - len(missing)} of {len(txn.writes)} "
                    f"values visible, missing {missing[:3]}",
                )
            )


# -- positions: duplicates and inconsistent offsets ----------------------------------


def _positions(verdict: TxnVerdict, history: History, rc_reads: list[Read]) -> None:
    first_at: dict[str, Position] = {}  # value -> the first position it was read at
    first_value: dict[Position, str] = {}  # position -> the first value read there
    where: dict[str, set[Position]] = defaultdict(set)  # only values read at two
    at: dict[Position, set[str]] = defaultdict(set)  # only positions read as two
    for read in [*rc_reads, *history.uncommitted_reads]:
        value, position = read.value, (read.topic, read.partition, read.offset)
        if first_at.setdefault(value, position) != position:
            where[value].update((first_at[value], position))
        if first_value.setdefault(position, value) != value:
            at[position].update((first_value[position], value))
    for value in sorted(where):
        verdict.duplicates.append(Anomaly((), f"{value!r} read at {sorted(where[value])}"))
    for position in sorted(at):
        verdict.inconsistent_offsets.append(
            Anomaly((), f"{_fmt(position)} read as {sorted(at[position])}")
        )


def _reprocessed(verdict: TxnVerdict, txns: list[Txn], committed: set[str]) -> None:
    readers: dict[str, list[str]] = defaultdict(list)
    for txn in txns:
        if txn.id in committed:
            for value in dict.fromkeys(r.value for r in txn.reads):
                readers[value].append(txn.id)
    for value in sorted(v for v, ids in readers.items() if len(ids) > 1):
        verdict.reprocessed.append(
            Anomaly(tuple(readers[value]), f"{value!r} consumed by {readers[value]}")
        )


# -- the dependency graph and its cycles ---------------------------------------------

Edges = dict[str, dict[str, str]]  # from -> to -> why (the first reason found)


def _cycles(
    verdict: TxnVerdict,
    history: History,
    rc_reads: list[Read],
    committed: set[str],
    writer_of: dict[str, str],
) -> None:
    ww: Edges = defaultdict(dict)
    wr: Edges = defaultdict(dict)
    for (topic, partition), by_offset in sorted(_partition_orders(rc_reads).items()):
        previous: tuple[int, str] | None = None
        for offset in sorted(by_offset):
            tid = writer_of.get(by_offset[offset])
            if tid is None or tid not in committed:
                continue
            if previous is not None and previous[1] != tid:
                ww[previous[1]].setdefault(
                    tid, f"ww {topic}/{partition}: @{previous[0]} then @{offset}"
                )
            previous = (offset, tid)
    for txn in history.txns:
        if txn.id not in committed:
            continue
        for read in txn.reads:
            source = writer_of.get(read.value)
            if source is not None and source in committed and source != txn.id:
                wr[source].setdefault(txn.id, f"wr {read.value!r}")
    for component in strongly_connected(ww):
        cycle = _cycle_in(ww, component)
        verdict.g0.append(_cycle_anomaly("G0", cycle, ww, {}))
    both: Edges = defaultdict(dict)
    for edges in (ww, wr):
        for a, targets in edges.items():
            for b, why in targets.items():
                both[a].setdefault(b, why)
    for component in strongly_connected(both):
        flow = _cycle_with_wr(both, wr, component)
        if flow is not None:
            verdict.g1c.append(_cycle_anomaly("G1c", flow, ww, wr))


def _partition_orders(reads: Iterable[Read]) -> dict[tuple[str, int], dict[int, str]]:
    """Per partition, offset -> value (the first value read there)."""
    orders: dict[tuple[str, int], dict[int, str]] = defaultdict(dict)
    for read in reads:
        orders[(read.topic, read.partition)].setdefault(read.offset, read.value)
    return orders


def strongly_connected(edges: Edges) -> list[list[str]]:
    """Tarjan's algorithm, iterative; the components with more than one node (no self
    edges are ever added), each sorted, in a deterministic order."""
    nodes = sorted(set(edges) | {b for targets in edges.values() for b in targets})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def _path(edges: Edges, start: str, goal: str, inside: set[str]) -> list[str] | None:
    """A shortest path start -> ... -> goal within `inside` (BFS), as a node list."""
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while (prev := parent[path[-1]]) is not None:
                path.append(prev)
            return path[::-1]
        for child in sorted(edges.get(node, ())):
            if child in inside and child not in parent:
                parent[child] = node
                queue.append(child)
    return None


def _cycle_in(edges: Edges, component: list[str]) -> list[str]:
    """A cycle through the component's first node: [a, b, ..., a]."""
    inside = set(component)
    start = component[0]
    best = None
    for child in sorted(edges[start]):
        if child in inside:
            path = _path(edges, child, start, inside)
            if path is not None and (best is None or len(path) < len(best)):
                best = path
    assert best is not None, "a strongly connected component always has a cycle"
    return [start, *best]


def _cycle_with_wr(both: Edges, wr: Edges, component: list[str]) -> list[str] | None:
    """A cycle of the component using at least one wr edge (None: only ww cycles)."""
    inside = set(component)
    for a in component:
        for b in sorted(wr.get(a, ())):
            if b in inside:
                path = _path(both, b, a, inside)
                if path is not None:
                    return [a, *path]
    return None


def _cycle_anomaly(kind: str, cycle: list[str], ww: Edges, wr: Edges) -> Anomaly:
    steps = [cycle[0]]
    for a, b in zip(cycle, cycle[1:], strict=False):
        why = wr.get(a, {}).get(b) or ww[a][b]
        steps.append(f"-({why})-> {b}")
    return Anomaly(tuple(cycle[:-1]), f"{kind}: " + " ".join(steps))


def _pos(read: Read) -> str:
    return _fmt(read.position)


def _fmt(position: Position) -> str:
    topic, partition, offset = position
    return f"{topic}/{partition}@{offset}"
