"""`make bench`: run every benchmark module in tests/bench, then print the table.

Each module prints its own figures as it goes; the headline ones are also reported as
rows (tests/bench/table.py), printed together at the end next to their same-run
references and ratios, appended to bench-results/history.jsonl and compared with the
previous run; README.md's benchmark table is then regenerated from that history.
`make bench BENCH_ARGS="cluster controller"` runs only those modules.
"""

import importlib
import pkgutil
import sys

import tests.bench as package
from tests.bench import table


def main(argv: list[str]) -> int:
    wanted = set(argv)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        if wanted and info.name.removeprefix("bench_") not in wanted:
            continue
        module = importlib.import_module(f"tests.bench.{info.name}")
        print(f"\n== {info.name} ==", flush=True)
        module.main()
    rows = table.collected()
    if rows:
        previous = table.previous_values()
        print(f"\n== the table ({table.machine()}) ==")
        print(table.render(rows, previous))
        table.append_run(rows)
        print(f"(appended to {table.HISTORY.relative_to(table.HISTORY.parents[1])})")
        if table.update_readme():
            print("(README.md's benchmark table regenerated from it)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
