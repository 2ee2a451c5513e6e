"""The cores stay sans-IO: no module under broker/core, controller/core or
client/protocol imports trio, kazoo, socket or another event loop, nor `time`,
`datetime` or `threading` (directly or through another project module): time comes in
as `now_ms` arguments from the shell, and nothing runs on a thread of its own. The log
store does use `os` for its files: it is synchronous file I/O driven by the core's
calls, which is what Kafka's log layer is too."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "trio",
    "kazoo",
    "socket",
    "asyncio",
    "selectors",
    "time",
    "datetime",
    "threading",
}
CORE_PACKAGES = ["broker/core", "controller/core", "client/protocol"]


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _module_file(name: str) -> pathlib.Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _core_files():
    for package in CORE_PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", list(_core_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_does_not_reach_io(path):
    seen: set[pathlib.Path] = set()
    stack = [path]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for name in _imports(current):
            top = name.split(".")[0]
            assert top not in FORBIDDEN, f"{current.relative_to(ROOT)} imports {name}"
            target = _module_file(name)
            if target is not None:
                stack.append(target)
