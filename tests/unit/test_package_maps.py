"""Every package's `__init__.py` docstring is a map naming everything directly under it.

The rule, for each package under broker/, controller/, client/, server_common/, tools/ and
spark/ (a directory holding an `__init__.py`, or any `.py` file: a directory of modules
without `__init__.py` is still importable, as a namespace package, and needs a map all
the more):

- its `__init__.py` exists and has a docstring;
- the docstring names each module directly under it (`x.py`, `__main__.py` included)
  as its file name, "x.py", or as its name in backquotes, "`x`";
- and each subpackage directly under it (a directory holding `.py` files) as "x/" or
  "`x`".

A name counts only as a whole word: "log.py" inside "changelog.py" or "core/log.py" does
not name `log.py`. Saying what each one is for is the docstring's job; this test checks
that nothing is left out of the map (ARCHITECTURE.md starts from these maps).
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ["broker", "controller", "client", "server_common", "tools", "spark"]


def is_package(directory: pathlib.Path) -> bool:
    return directory.name != "__pycache__" and any(directory.glob("*.py"))


def packages() -> list[pathlib.Path]:
    found = []
    for top in PACKAGES:
        for directory in [ROOT / top, *sorted((ROOT / top).rglob("*"))]:
            if directory.is_dir() and is_package(directory):
                found.append(directory)
    return found


def members(package: pathlib.Path) -> list[tuple[str, str]]:
    """(kind, name) of every module and subpackage directly under `package`."""
    found = [("module", p.name) for p in sorted(package.glob("*.py")) if p.name != "__init__.py"]
    found += [
        ("package", d.name) for d in sorted(package.iterdir()) if d.is_dir() and is_package(d)
    ]
    return found


def names(docstring: str, kind: str, name: str) -> bool:
    """Does `docstring` name this module (`x.py`) or subpackage (`x`) by the rule above?"""
    stem = name.removesuffix(".py")
    if f"`{stem}`" in docstring:
        return True
    written = re.escape(name) if kind == "module" else re.escape(name) + "/"
    return re.search(rf"(?<![\w./]){written}(?!\w)", docstring) is not None


def missing_from_map(package: pathlib.Path) -> list[str]:
    init = package / "__init__.py"
    if not init.is_file():
        return ["(no __init__.py)"]
    docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
    if not docstring:
        return ["(no docstring)"]
    return [
        name + ("/" if kind == "package" else "")
        for kind, name in members(package)
        if not names(docstring, kind, name)
    ]


@pytest.mark.parametrize(
    "package", [pytest.param(p, id=p.relative_to(ROOT).as_posix()) for p in packages()]
)
def test_package_docstring_names_every_module_and_subpackage(package):
    missing = missing_from_map(package)
    assert not missing, f"{package.relative_to(ROOT)}/__init__.py does not name: {missing}"


def test_the_rule_reads_names_as_whole_words():
    doc = "- `wire.py`: framing; `versions`: tables; tasks/ and `core/log.py`; changelog.py"
    assert names(doc, "module", "wire.py")
    assert names(doc, "module", "versions.py")
    assert names(doc, "package", "tasks")
    assert not names(doc, "module", "log.py")  # core/log.py is another package's module
    assert not names(doc, "package", "core")  # "core/log.py" names a module, not core/
    assert not names(doc, "package", "log")
