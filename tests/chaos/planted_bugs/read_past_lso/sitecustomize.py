"""PLANTED BUG read_past_lso, for tests/chaos/test_txn_planted_bug.py only: a
read_committed fetch is served up to the high watermark instead of the last stable
offset, so consumers that asked for committed data get records of transactions still
open (and of ones that will abort). The test proves the transactional checker catches
it (reads earlier than their transaction's commit request, aborted reads).

Where it is planted: the LSO of a partition is `Partition.last_stable_offset`
(broker/core/partition.py, a property: `Log.last_stable_offset(high_watermark)`, which
asks the producer state, broker/core/log/producer_state.py, for the first offset of
its oldest open transaction, bounded by the HW); the fetch path reads it to bound a
read_committed fetch (the partition's fetch bound, DelayedFetch's completion, the
`last_stable_offset` of the response). This module makes every `last_stable_offset`
defined in a `broker.*` module answer the high watermark: a method taking the HW
returns it, a property returns the object's `high_watermark`. Each logs the warning
below the first time it serves an answer. Until the transaction code exists there is
no `last_stable_offset` and nothing is planted.

How it is planted: Python imports `sitecustomize` at start-up from its path, and the
test puts this directory first on the PYTHONPATH of the broker processes it starts, and
of nothing else (tests/chaos/test_planted_bug.py's `planted_bug_env`). An import hook
patches each `broker.*` module right after it has run; nothing under broker/ knows.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys

PREFIX = "broker."
NAME = "last_stable_offset"
WARNING = "PLANTED BUG read_past_lso: read_committed served up to the high watermark (tests only)"
_warned: set[str] = set()


def _warn(where: str) -> None:
    if where not in _warned:
        _warned.add(where)
        logging.getLogger(where).warning(WARNING)


def _method(where: str):
    def last_stable_offset(self, high_watermark, *args, **kwargs):
        _warn(where)
        return high_watermark

    return last_stable_offset


def _property(where: str):
    def last_stable_offset(self):
        _warn(where)
        return self.high_watermark

    return property(last_stable_offset)


def plant(module) -> None:
    for cls in list(vars(module).values()):
        if not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        attribute = cls.__dict__.get(NAME)
        where = f"{module.__name__}.{cls.__name__}"
        if isinstance(attribute, property):
            setattr(cls, NAME, _property(where))
        elif inspect.isfunction(attribute) and len(inspect.signature(attribute).parameters) >= 2:
            setattr(cls, NAME, _method(where))


# The shared hook (../plant_on_import.py) runs `plant` on each target module once it ran.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from plant_on_import import install  # noqa: E402

install(lambda name: name.startswith(PREFIX), plant)
