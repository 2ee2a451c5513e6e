"""The benchmark table: every headline figure of `make bench` in one place, next to the
reference it is judged against, with the ratio, the target and the change since the
previous run.

How it works: benchmark modules call `report(Row(...))` as they measure; `tests.bench`
prints the rows collected by all modules as one table at the end (`render`), appends the
run to `bench-results/history.jsonl` (`append_run`) and shows, per row, the change from
the last run that had the same row (`previous_values`). A row's reference is measured in
the same run (loopback TCP, file writes, another row), never copied from elsewhere, so
the ratio says how close we are to this machine's own limits today.

`update_readme` then rewrites the README's benchmark table (between the
`<!-- bench-table:begin -->` and `<!-- bench-table:end -->` markers) from the history:
each row's latest figure, with its reference, ratio, target, the machine and the day it
was measured, so the README always shows what `make bench` last measured.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HISTORY = Path(__file__).resolve().parents[2] / "bench-results" / "history.jsonl"
README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN_MARKER = "<!-- bench-table:begin -->"
END_MARKER = "<!-- bench-table:end -->"


@dataclass(frozen=True)
class Row:
    name: str  # what was measured, e.g. "produce 100 B, acks=all, RF 3"
    value: float
    unit: str  # "records/s", "MiB/s", "ms", "MB", "s"
    reference_name: str = ""  # what the value is compared with
    reference: float | None = None  # its figure, measured in the same run
    target: str = ""  # the goal for the ratio (or the value), e.g. ">= 0.5"
    ratio: float | None = None  # value / reference unless given

    def ratio_value(self) -> float | None:
        if self.ratio is not None:
            return self.ratio
        if self.reference:
            return self.value / self.reference
        return None

    def met(self) -> bool | None:
        """Whether the target holds (None when the row has none)."""
        if not self.target:
            return None
        op, _, number = self.target.partition(" ")
        limit = float(number)
        subject = self.ratio_value() if self.reference is not None or self.ratio else self.value
        if subject is None:
            return None
        return subject >= limit if op == ">=" else subject <= limit


_rows: list[Row] = []


def report(row: Row) -> None:
    """Add a row to this run's table (and print it at once, for long runs)."""
    _rows.append(row)
    print(f"  [table] {row.name}: {_number(row.value)} {row.unit}", flush=True)


def collected() -> list[Row]:
    return list(_rows)


def _number(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def render(rows: list[Row], previous: dict[str, float]) -> str:
    """The table as fixed-width text: figure, reference, ratio, target, change."""
    header = ("what", "figure", "reference (same run)", "ratio", "target", "vs last run")
    lines = []
    for row in rows:
        ratio = row.ratio_value()
        met = row.met()
        target = f"{row.target} {'ok' if met else 'MISSED'}" if met is not None else ""
        reference = (
            f"{row.reference_name} {_number(row.reference)}"
            if row.reference is not None
            else row.reference_name
        )
        before = previous.get(row.name)
        change = f"{(row.value - before) / before:+.0%}" if before else ""
        lines.append(
            (
                row.name,
                f"{_number(row.value)} {row.unit}",
                reference,
                f"{ratio:.2f}" if ratio is not None else "",
                target,
                change,
            )
        )
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines, strict=True)]
    out = []
    for i, cells in enumerate([header, *lines]):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _runs(path: Path) -> list[dict]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    runs = []
    for line in lines:
        try:
            runs.append(json.loads(line))
        except ValueError:
            continue
    return runs


def previous_values(path: Path = HISTORY) -> dict[str, float]:
    """Each row's value in the latest earlier run that had it."""
    return {name: row.value for name, (row, _run) in latest_rows(path).items()}


def latest_rows(path: Path = HISTORY) -> dict[str, tuple[Row, dict]]:
    """Each row's latest measurement and the run (time, machine) it came from, in the
    order rows first appeared."""
    latest: dict[str, tuple[Row, dict]] = {}
    for run in _runs(path):
        for fields in run.get("rows", []):
            known = {name: fields[name] for name in Row.__dataclass_fields__ if name in fields}
            latest[fields["name"]] = (Row(**known), run)
    return latest


def render_markdown(latest: dict[str, tuple[Row, dict]]) -> str:
    """The README's table: one line per row, with where and when it was measured."""
    lines = [
        "| row | figure | same-run reference | ratio | target | measured |",
        "|---|---|---|---|---|---|",
    ]
    machines = []
    for row, run in latest.values():
        ratio = row.ratio_value()
        met = row.met()
        reference = (
            f"{row.reference_name} {_number(row.reference)}"
            if row.reference is not None
            else row.reference_name
        )
        target = f"{row.target} {'ok' if met else 'missed'}" if met is not None else ""
        machine_name = run.get("machine", "?")
        if machine_name not in machines:
            machines.append(machine_name)
        lines.append(
            f"| {row.name} | {_number(row.value)} {row.unit} | {reference} | "
            f"{f'{ratio:.2f}' if ratio is not None else ''} | {target} | "
            f"{run.get('time', '?')[:10]}, machine {machines.index(machine_name) + 1} |"
        )
    lines.append("")
    lines += [f"Machine {i}: {name}." for i, name in enumerate(machines, start=1)]
    return "\n".join(lines)


def update_readme(readme: Path = README, history: Path = HISTORY) -> bool:
    """Replace the table between the README's markers; False if it has no markers."""
    try:
        text = readme.read_text()
    except OSError:
        return False
    begin, end = text.find(BEGIN_MARKER), text.find(END_MARKER)
    if begin < 0 or end < begin:
        return False
    table = render_markdown(latest_rows(history))
    updated = text[: begin + len(BEGIN_MARKER)] + "\n" + table + "\n" + text[end:]
    if updated != text:
        readme.write_text(updated)
    return True


def append_run(rows: list[Row], path: Path = HISTORY) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    run = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "rows": [asdict(row) for row in rows],
    }
    with path.open("a") as f:
        f.write(json.dumps(run) + "\n")


def machine() -> str:
    """The machine the run was on, for the README's benchmark section."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{mem_kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        memory = "?"
    return f"{os.cpu_count()} cores ({cpu}), {memory}, Python {platform.python_version()}"
