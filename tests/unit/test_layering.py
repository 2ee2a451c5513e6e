"""The packages depend on each other in one direction only (ARCHITECTURE.md):

    tools  ->  spark, broker, controller  ->  server_common  ->  client (protocol + library)

`client/` is the wire protocol and the client library: it imports none of the others.
The controller is not a broker: it never imports `broker`. The servers never import the
tools or the Spark job, and no production package imports the tests. Every import in
every module counts, including ones inside functions.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ["client", "server_common", "broker", "controller", "spark", "tools"]

# package -> project packages it must not import
FORBIDDEN = {
    "client": {"server_common", "broker", "controller", "spark", "tools", "tests"},
    "server_common": {"broker", "controller", "spark", "tools", "tests"},
    "broker": {"controller", "spark", "tools", "tests"},
    "controller": {"broker", "spark", "tools", "tests"},
    "spark": {"controller", "tools", "tests"},
    "tools": {"tests"},
}


def imported_modules(path: pathlib.Path, root: pathlib.Path = ROOT) -> set[str]:
    """Absolute names of everything `path` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(root).with_suffix("").parts[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if not node.level:
                names.add(node.module or "")
                continue
            base = list(package[: len(package) - node.level + 1])
            if node.module:
                names.add(".".join([*base, node.module]))
            else:  # from . import x: x is a module of the package
                names.update(".".join([*base, alias.name]) for alias in node.names)
    return names


def modules_of(package: str):
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_only_what_lies_below_it(package):
    problems = []
    for path in modules_of(package):
        for name in imported_modules(path):
            if name.split(".")[0] in FORBIDDEN[package]:
                problems.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not problems, "\n".join(problems)


def test_only_the_zookeeper_seam_imports_kazoo():
    """Kazoo's types and errors stay behind `server_common.zk`: one module implements the
    seam on kazoo, nothing else in the product imports it."""
    users = sorted(
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in modules_of(package)
        if any(name.split(".")[0] == "kazoo" for name in imported_modules(path))
    )
    assert users == ["server_common/zk_kazoo.py"]


def test_the_check_sees_imports_in_functions_and_relative_ones(tmp_path):
    module = tmp_path / "client" / "probe.py"
    module.parent.mkdir()
    module.write_text("def f():\n    from broker.core import partition\n\nfrom . import zk\n")
    assert imported_modules(module, tmp_path) == {"broker.core", "client.zk"}


def test_every_top_level_package_is_layered():
    """A new top-level package must be placed in the layering above."""
    found = {
        p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name not in ("tests",)
    }
    assert found == set(PACKAGES)


def test_server_common_uses_only_the_protocol_of_client():
    """`server_common` sits under both servers and over `client.protocol` only: the
    client library (connections, metadata, producer...) is not server plumbing."""
    problems = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules_of("server_common")
        for name in imported_modules(path)
        if name.split(".")[0] == "client"
        and name != "client.protocol"
        and not name.startswith("client.protocol.")
    ]
    assert not problems, "\n".join(problems)


# --- import cycles --------------------------------------------------------------------------


def module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level, in functions and classes,
    but not in the body of an `if TYPE_CHECKING:` (its `else:` can run)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph(root: pathlib.Path = ROOT, packages: list[str] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the product modules it imports at run time (see `runtime_imports`).

    `from pkg import name` is an edge to the module `pkg.name` when there is one, else to
    `pkg` (its `__init__`); `import a.b.c` is an edge to `a.b.c`. The packages Python
    initialises on the way (`a`, `a.b`) are not edges: a package whose `__init__` imports
    its modules would otherwise be in a cycle with each of them, while Python always runs
    that `__init__` to its end first."""
    paths = {
        module_name(path, root): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in runtime_imports(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    while target and target not in paths:
                        target = target.rpartition(".")[0]
                    if target:
                        edges.add(target)
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                if f"{module}.{alias.name}" in paths:
                    edges.add(f"{module}.{alias.name}")
                elif module in paths:
                    edges.add(module)
        edges.discard(name)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


def test_no_import_cycles():
    """No two product modules import each other, directly or around a loop, at run time.

    Imports inside functions count: one only delays the cycle (and hides it from the
    reader); break it at its cause instead. Imports under `if TYPE_CHECKING:` do not
    run, so they do not count. A module that imports a name its own package's `__init__`
    re-exports (`from client.admin import Admin` inside `client.admin.groups`) does count
    as a cycle with that `__init__`: the `__init__` is still running when its modules are
    imported, so such an import sees a half-built package. Modules import their
    siblings directly instead. Every cycle is listed, each as its modules."""
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_resolves_submodules_and_skips_type_checking(tmp_path):
    files = {
        "client/__init__.py": "VALUE = 1\n\ndef g():\n    from client.e import h\n",
        "client/a.py": "def f():\n    from client import b\n",
        "client/b.py": "from .a import f\n",
        "client/c.py": (
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from client import d\n"
            "else:\n    import client.e\n"
        ),
        "client/d.py": "import client.c\n",
        "client/e.py": "from client import VALUE\n\ndef h():\n    pass\n",
        "broker/__init__.py": "",
        "broker/x.py": "import client.a.missing\nfrom client.d import something\nimport trio\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path, ["client", "broker"])
    assert graph["client.a"] == {"client.b"}  # `from client import b`: the module
    assert graph["client.b"] == {"client.a"}  # relative, inside a function or not
    assert graph["client.c"] == {"client.e"}  # the TYPE_CHECKING body is skipped
    assert graph["client.e"] == {"client"}  # `from client import VALUE`: the __init__
    assert graph["broker.x"] == {"client.a", "client.d"}  # nearest module; no trio
    assert import_cycles(graph) == [["client", "client.e"], ["client.a", "client.b"]]
