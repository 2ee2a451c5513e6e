"""The import hook every planted bug uses: run a bug's `plant(module)` on each module it
targets right after that module has run, so the bug is in place before any code uses
it and nothing under broker/ knows.

How it works: `install(targets, plant)` puts a finder first on `sys.meta_path`. For a
module name `targets(name)` accepts, it asks the other finders for the spec, wraps the
loader's `exec_module` to call `plant(module)` after it, and returns that spec; other
names it leaves to the others. A bug's `sitecustomize.py` (imported by Python at start-up
because the test puts the bug's directory first on the broker processes' PYTHONPATH)
adds this directory to `sys.path` and calls `install`.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from types import ModuleType


class PlantOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, targets: Callable[[str], bool], plant: Callable[[ModuleType], None]):
        self._targets = targets
        self._plant = plant

    def find_spec(self, name, path, target=None):
        if not self._targets(name):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        if not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module
        plant = self._plant

        def exec_and_plant(module: ModuleType) -> None:
            exec_module(module)
            plant(module)

        spec.loader.exec_module = exec_and_plant
        return spec


def install(targets: Callable[[str], bool], plant: Callable[[ModuleType], None]) -> None:
    sys.meta_path.insert(0, PlantOnImport(targets, plant))
