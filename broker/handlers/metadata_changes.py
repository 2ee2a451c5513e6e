"""Waiting for the broker's metadata to reach a state (CreateTopics waits for leaders,
DeleteTopics for the topic to go, ElectLeaders for the new leaders).

How it works: the UpdateMetadata handler calls `notify()` after every change to the
metadata cache; `wait_for(predicate, timeout_s)` re-checks the predicate on each change
until it holds or the time is up. One `trio.Event`, replaced on every notification.
"""

from __future__ import annotations

from collections.abc import Callable

import trio


class MetadataChanges:
    def __init__(self) -> None:
        self._changed = trio.Event()

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """True as soon as `predicate()` holds; False if it still does not after
        `timeout_s`."""
        with trio.move_on_after(max(timeout_s, 0)):
            while not predicate():
                await self._changed.wait()
        return predicate()
