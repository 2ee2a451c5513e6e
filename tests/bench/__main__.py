"""`make bench`: run every benchmark module in tests/bench and print its figures."""

import importlib
import pkgutil
import sys

import tests.bench as package


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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
