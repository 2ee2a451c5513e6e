"""PLANTED BUG skip_kip890, for tests/chaos/test_txn_planted_bug.py only: the partition
leader's KIP-890 check answers "verified" for every transactional batch, so a write to a
partition its producer never added to a transaction is appended (KAFKA-17754: a late
Produce lands outside its transaction, opens one no coordinator knows of and holds the
last stable offset for ever). The test proves the transactional checker catches it
(the committed writes after it are never read with read_committed: lost writes).

Where it is planted: the produce path (leader side, both listeners) asks
`ReplicaManager.txn_verifier.verify(transactional_id, producer_id, producer_epoch,
partitions)` (the contract's `TransactionVerifier`, broker/core/txn_verification.py;
the coordinator-backed verifier the transaction coordinator's wiring sets there sends
AddPartitionsToTxn with verify_only) before appending the first transactional batch of
a producer on a partition, and refuses the partitions answered with an error. This
module replaces every such `verify` defined in a `broker.*` module (a coroutine method
with `transactional_id` and `partitions` parameters) by one answering NONE for every
partition, as the contract's ALLOW_ALL does, and logs the warning below the first time
it answers. Until the transaction code exists there is no verifier and nothing is
planted.

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
WARNING = "PLANTED BUG skip_kip890: transactional writes appended unverified (tests only)"
_warned: set[str] = set()


def _allow_all(where: str):
    async def verify(self, transactional_id, producer_id, producer_epoch, partitions):
        from client.protocol.errors import ErrorCode

        if where not in _warned:
            _warned.add(where)
            logging.getLogger(where).warning(WARNING)
        return dict.fromkeys(partitions, ErrorCode.NONE)

    return verify


def plant(module) -> None:
    for cls in list(vars(module).values()):
        if not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        verify = cls.__dict__.get("verify")
        if not inspect.iscoroutinefunction(verify):
            continue
        parameters = inspect.signature(verify).parameters
        if "transactional_id" in parameters and "partitions" in parameters:
            cls.verify = _allow_all(f"{module.__name__}.{cls.__name__}")


# The shared hook (../plant_on_import.py) runs `plant` on each target module once it ran.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from plant_on_import import install  # noqa: E402

install(lambda name: name.startswith(PREFIX), plant)
