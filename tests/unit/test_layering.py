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

