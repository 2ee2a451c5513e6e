"""Small steps several handlers share: tell brokers about changed partitions."""

from __future__ import annotations

from collections.abc import Sequence

from controller.active import ActiveController
from controller.core.requests import RequestBatch
from controller.core.state_change import StateChange


def add_changes(batch: RequestBatch, changes: Sequence[StateChange]) -> None:
    """LeaderAndIsr for each changed partition to its registered replicas (is_new for
    created ones) and UpdateMetadata for all of them to every broker."""
    for change in changes:
        batch.add_leader_and_isr_to_replicas([change.tp], is_new=change.creates)
    batch.add_update_metadata_to_all([c.tp for c in changes])


def send_changes(active: ActiveController, changes: Sequence[StateChange]) -> None:
    if changes:
        batch = active.batch()
        add_changes(batch, changes)
        active.send(batch)
