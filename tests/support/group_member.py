"""A group consumer as a process, for real-process tests: the real client, one member.

`python -m tests.support.group_member BOOTSTRAP GROUP TOPIC NAME [SESSION_MS]` subscribes
to TOPIC in GROUP and prints one JSON line per event to stdout, flushed at once:
`{"event": "assigned"|"revoked", "generation": g, "partitions": [...]}` and
`{"event": "record", "generation": g, "partition": p, "offset": o, "value": "..."}`.
After printing each poll's records it commits them synchronously (auto-commit off), so
a SIGKILL at any moment loses nothing: at worst the next owner re-reads what was printed
but not yet committed (counted as duplicates by the tests). SIGTERM leaves the group
cleanly (commit, LeaveGroup) and exits 0.
"""

from __future__ import annotations

import json
import signal
import sys

import trio

from client.consumer import open_consumer


def emit(line: dict) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def run(bootstrap: str, group: str, topic: str, name: str, session_ms: int) -> None:
    async with open_consumer(
        bootstrap,
        group_id=group,
        client_id=name,
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=max(100, session_ms // 6),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as consumer:

        def generation() -> int:
            return consumer.group.membership.generation.generation_id

        def assigned(partitions) -> None:
            emit(
                {
                    "event": "assigned",
                    "generation": generation(),
                    "partitions": sorted(tp.partition for tp in partitions),
                }
            )

        def revoked(partitions) -> None:
            emit(
                {
                    "event": "revoked",
                    "generation": generation(),
                    "partitions": sorted(tp.partition for tp in partitions),
                }
            )

        consumer.subscribe([topic], on_assigned=assigned, on_revoked=revoked)
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            stop = trio.Event()

            async def watch() -> None:
                async for _ in signals:
                    stop.set()
                    return

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                while not stop.is_set():
                    records = await consumer.poll(200)
                    for r in records:
                        emit(
                            {
                                "event": "record",
                                "generation": generation(),
                                "partition": r.partition,
                                "offset": r.offset,
                                "value": r.value.decode(),
                            }
                        )
                    if records:
                        try:
                            await consumer.commit()
                        except Exception as exc:  # a rebalance: the next owner re-reads
                            emit({"event": "commit_failed", "error": str(exc)})
                nursery.cancel_scope.cancel()


def main(argv: list[str]) -> int:
    bootstrap, group, topic, name = argv[:4]
    session_ms = int(argv[4]) if len(argv) > 4 else 3000
    trio.run(run, bootstrap, group, topic, name, session_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
