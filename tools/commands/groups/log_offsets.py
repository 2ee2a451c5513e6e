"""Log offsets for `tributary groups`: the earliest, the latest (the high watermark) and
the first at a time, of partitions.

How it works: `LogOffsets` sends ListOffsets to each partition's leader through a plain
consumer (`open_log_offsets`: no group, nothing assigned), one topic at a time
concurrently; a topic that does not exist gets no answer (its partitions show "-").
`describe` asks for the latest offsets (lag), `reset-offsets` for the bounds it clamps
new offsets to and, with `--to-datetime`, the offsets at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from client.consumer import open_consumer
from client.metadata import UnknownTopicError
from client.protocol.types import TopicPartition

LOOKUP_TIMEOUT_MS = 15_000  # ListOffsets retries (no leader yet) for at most this long


class LogOffsets:
    """Earliest, latest and by-time offsets of partitions, from their leaders (ListOffsets
    through a plain consumer: no group, nothing assigned). A topic that does not exist
    gets no answer (its partitions show "-")."""

    def __init__(self, consumer) -> None:
        self.consumer = consumer

    async def _per_topic(self, tps: Iterable[TopicPartition], ask) -> dict[TopicPartition, Any]:
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp)
        found: dict[TopicPartition, Any] = {}

        async def one(topic: str, wanted: list[TopicPartition]) -> None:
            try:
                known = set(await self.consumer.partitions_for(topic))
            except UnknownTopicError:
                return
            wanted = [tp for tp in wanted if tp.partition in known]
            if wanted:
                found.update(await ask(wanted))

        async with trio.open_nursery() as nursery:
            for topic, wanted in by_topic.items():
                nursery.start_soon(one, topic, wanted)
        return found

    async def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._per_topic(tps, self.consumer.end_offsets)

    async def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._per_topic(tps, self.consumer.beginning_offsets)

    async def at_time(
        self, tps: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        """The first offset at or after the time; None when every record is older."""

        async def ask(wanted):
            found = await self.consumer.offsets_for_times({tp: timestamp_ms for tp in wanted})
            return {tp: (None if v is None else v[0]) for tp, v in found.items()}

        return await self._per_topic(tps, ask)


def open_log_offsets(bootstrap: str, **options: Any):
    """A consumer for offset lookups; `options`: the command's client options (its
    --command-config security settings)."""
    settings = {"request_timeout_ms": LOOKUP_TIMEOUT_MS, **options}
    return open_consumer(bootstrap, client_id="tributary-groups", **settings)
