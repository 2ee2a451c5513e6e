"""`controller-events.jsonl`: one JSON line per thing a cluster operator would ask about.

How it works: `EventLog.record(kind, **fields)` appends
`{"ts": <wall-clock ms>, "controller": <id>, "epoch": <controller epoch>, "event": kind, ...}`
to `<log.dir>/controller-events.jsonl`, line-buffered, for the Spark job. Kinds:

- `controller_elected` / `controller_resigned` (`reason`);
- `broker_up` (`broker`, `broker_epoch`), `broker_down` (`broker`), `broker_bounced`;
- `leader_change` (`topic`, `partition`, `old_leader`, `new_leader`, `leader_epoch`,
  `isr`, `reason`, `unclean`): every state change that moved the leader, including to -1
  (the partition went offline) and the first leader of a new partition;
- `isr_change` (same fields): a controller-made ISR change without a leader change;
- `controlled_shutdown` (`broker`, `remaining`), `topic_created`, `topic_deleted`,
  `reassignment_started` / `reassignment_completed` (`topic`, `partition`, `target`).

A failing disk never stops the controller: a line that cannot be written is logged and
dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.core.state_change import StateChange
from server_common.jsonl import Rotation, wall_clock_ms

FILE_NAME = "controller-events.jsonl"


class EventLog:
    def __init__(
        self,
        log_dir: Path,
        controller_id: int,
        clock: Callable[[], int] = wall_clock_ms,
        rotation: Rotation | None = None,
    ):
        self.controller_id = controller_id
        self.epoch = 0
        self.clock = clock
        self.path = log_dir / FILE_NAME
        self._file = (rotation or Rotation()).open(self.path)

    def record(self, kind: str, **fields: Any) -> None:
        self._file.append(
            {
                "ts": self.clock(),
                "controller": self.controller_id,
                "epoch": self.epoch,
                "event": kind,
                **fields,
            }
        )

    def record_state_change(self, change: StateChange) -> None:
        old = change.old
        self.record(
            "leader_change" if change.leader_changed else "isr_change",
            topic=change.tp.topic,
            partition=change.tp.partition,
            old_leader=old.leader if old is not None else None,
            new_leader=change.new.leader,
            leader_epoch=change.new.leader_epoch,
            old_isr=list(old.isr) if old is not None else None,
            isr=list(change.new.isr),
            reason=str(change.reason),
            unclean=change.unclean,
        )

    def close(self) -> None:
        self._file.close()
