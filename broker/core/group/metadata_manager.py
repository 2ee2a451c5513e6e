"""Loading and storing consumer groups and their committed offsets (Kafka 2.8's
`GroupMetadataManager`), for the group coordinator (sans-IO).

How it works:
- The cache: `groups` (group id -> `Group`; its committed offsets are `Group.offsets`)
  holds the groups of every `__consumer_offsets` partition this broker leads (`owned`).
  A group id maps to its partition with `offsets_topic.partition_for`; `status` says
  whether this broker may answer for a group (NOT_COORDINATOR, or
  COORDINATOR_LOAD_IN_PROGRESS while its partition loads).
- Loading: `begin_loading(p)` marks the partition loading; the shell reads it and feeds
  the records to a `GroupLoader` (the latest value of every key wins; a transactional
  offset commit counts once its producer's COMMIT marker is read, `PendingLoader`);
  `finish_loading`
  installs what it found (a group with members comes back Stable) and hands each group
  to the coordinator's `on_loaded` (which gives its members a fresh session).
  `unload(p)` drops the partition's groups, each through `on_unloaded` first.
- Storing: every write is one call of `append`, the shell's acks=all append to the
  group's partition, of records built from `offsets_topic.py`'s keys and values: a
  group's metadata (`store_group`, after a generation's assignment or when it empties),
  offset commits (`store_offsets`; the cache is updated only once the write is
  acknowledged), and tombstones for deleted groups (`delete_groups`) and expired offsets.
  `append_error` maps a failed write's error to what a group client is told (Kafka 2.8).
- Expiration: `expire_offsets(now)` drops the offsets of groups empty for longer than
  `offsets.retention.minutes` (KIP-211; per commit for groups that only store offsets),
  writes their tombstones, and removes groups left with none.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

from broker.core.group import offsets_topic as ot
from broker.core.group.config import CoordinatorStats, GroupConfig
from broker.core.group.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from client.protocol.errors import ErrorCode

__all__ = [
    "Append",
    "Done",
    "GroupLoader",
    "GroupMetadataManager",
    "PendingLoader",
    "Records",
    "append_error",
]

log = logging.getLogger(__name__)

Records = list[tuple[bytes, bytes | None]]
# done(error_code, now_ms): how the write ended, and when (the shell's clock).
Done = Callable[[ErrorCode, int], None]
# append(partition, [(key, value)], now_ms, done): acks=all to the partition.
Append = Callable[[int, Records, int, Done], None]
OffsetsAnswer = Callable[[dict[tuple[str, int], ErrorCode]], None]
PendingOffsets = dict[tuple[str, int], ot.OffsetValue]

# How a failed write to __consumer_offsets is reported to a group client (Kafka 2.8).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def append_error(code: ErrorCode) -> ErrorCode:
    return _APPEND_ERRORS.get(code, code)


class PendingLoader:
    """One partition's transactional offset commits, as the loader reads them in order."""

    def __init__(self) -> None:
        self.open: dict[int, list[tuple[bytes | None, bytes | None]]] = {}

    def add(self, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        self.open.setdefault(producer_id, []).append((key, value))

    def marker(self, producer_id: int, committed: bool) -> list[tuple[bytes | None, bytes | None]]:
        """The producer's records to apply now (COMMIT), or none (ABORT)."""
        records = self.open.pop(producer_id, [])
        return records if committed else []

    def still_open(self) -> dict[int, dict[str, PendingOffsets]]:
        """producer id -> group -> offsets, for transactions without a marker yet."""
        out: dict[int, dict[str, PendingOffsets]] = {}
        for pid, records in self.open.items():
            for key, value in records:
                try:
                    record = ot.decode_record(key, value)
                except ot.BadOffsetsRecord as exc:
                    log.warning("skipping an unreadable transactional offset record: %s", exc)
                    continue
                if isinstance(record, ot.OffsetRecord) and record.value is not None:
                    by_group = out.setdefault(pid, {}).setdefault(record.group_id, {})
                    by_group[(record.topic, record.partition)] = record.value
        return out


class GroupLoader:
    """Replays one `__consumer_offsets` partition: the latest value of every key wins."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], ot.OffsetValue]] = {}
        self.groups: dict[str, ot.GroupValue | None] = {}
        self.bad_records = 0
        self.txn = PendingLoader()  # transactional offset commits until their marker

    def add_transactional(self, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        """A record of a transactional batch: held until the producer's marker."""
        self.txn.add(producer_id, key, value)

    def marker(self, producer_id: int, committed: bool) -> None:
        """The producer's COMMIT/ABORT marker: its held records apply now, or never."""
        for key, value in self.txn.marker(producer_id, committed):
            self.add(key, value)

    def add(self, key: bytes | None, value: bytes | None) -> None:
        try:
            record = ot.decode_record(key, value)
        except ot.BadOffsetsRecord as exc:
            self.bad_records += 1
            log.warning("skipping an unreadable __consumer_offsets record: %s", exc)
            return
        if isinstance(record, ot.OffsetRecord):
            offsets = self.offsets.setdefault(record.group_id, {})
            if record.value is None:
                offsets.pop((record.topic, record.partition), None)
            else:
                offsets[(record.topic, record.partition)] = record.value
        else:
            self.groups[record.group_id] = record.value


def _group_from(group_id: str, value: ot.GroupValue | None, now_ms: int) -> Group:
    """A loaded group as its last metadata record left it (Stable if it had members)."""
    group = Group(group_id, state_timestamp_ms=now_ms)
    if value is None:
        return group
    group.protocol_type = value.protocol_type or None
    group.generation = value.generation
    group.protocol = value.protocol
    group.state_timestamp_ms = value.state_timestamp_ms
    for mv in value.members:
        member = Member(
            member_id=mv.member_id,
            group_instance_id=mv.group_instance_id,
            client_id=mv.client_id,
            client_host=mv.client_host,
            rebalance_timeout_ms=mv.rebalance_timeout_ms,
            session_timeout_ms=mv.session_timeout_ms,
            protocol_type=value.protocol_type,
            protocols=[(value.protocol or "", mv.subscription)],
            assignment=mv.assignment,
        )
        group.add(member)
    group.leader = value.leader if value.leader in group.members else group.leader
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    return group


class GroupMetadataManager:
    """The groups this broker coordinates, and their reads and writes of
    `__consumer_offsets`."""

    def __init__(
        self,
        config: GroupConfig,
        append: Append,
        stats: CoordinatorStats,
        events: Callable[[str, dict], None],
    ) -> None:
        self.config = config
        self._append = append
        self._stats = stats
        self._events = events
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, int] = {}  # partition -> load token
        self._tokens = itertools.count(1)

    # -- ownership ---------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return ot.partition_for(group_id, self.config.offsets_partitions)

    def status(self, group_id: str) -> ErrorCode:
        """Whether this broker answers for `group_id` now (NONE), or the error to give."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def begin_loading(self, partition: int) -> int:
        """Mark `partition` loading (the coordinator unloaded it first); the token that
        `finish_loading` wants."""
        token = next(self._tokens)
        self.loading[partition] = token
        return token

    def is_loading(self, partition: int, token: int) -> bool:
        return self.loading.get(partition) == token

    def finish_loading(
        self,
        partition: int,
        token: int,
        loader: GroupLoader,
        now_ms: int,
        on_loaded: Callable[[Group], None],
    ) -> int | None:
        """Install what `loader` read, each group through `on_loaded`; the number of
        groups, or None if `partition` was unloaded (or reloaded) meanwhile."""
        if self.loading.get(partition) != token:
            return None
        del self.loading[partition]
        self.owned.add(partition)
        names = {g for g, offsets in loader.offsets.items() if offsets} | {
            g for g, v in loader.groups.items() if v is not None
        }
        for group_id in names:
            if self.partition_for(group_id) != partition:
                continue
            group = _group_from(group_id, loader.groups.get(group_id), now_ms)
            group.offsets = loader.offsets.get(group_id, {})
            self.groups[group_id] = group
            on_loaded(group)
        loaded = sum(1 for g in self.groups if self.partition_for(g) == partition)
        self._events("groups_loaded", {"partition": partition, "groups": loaded})
        return loaded

    def unload(self, partition: int, on_unloaded: Callable[[Group], None]) -> int:
        """Stop coordinating `partition`'s groups, each through `on_unloaded` first."""
        self.loading.pop(partition, None)
        self.owned.discard(partition)
        gone = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in gone:
            on_unloaded(group)
            del self.groups[group.group_id]
        return len(gone)

    # -- group metadata ------------------------------------------------------------------
    def store_group(
        self,
        group: Group,
        assignment: dict[str, bytes],
        now_ms: int,
        done: Done,
    ) -> None:
        """Write `group`'s metadata with `assignment` (member id -> bytes)."""
        value = ot.GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol,
            leader=group.leader,
            state_timestamp_ms=now_ms,
            members=tuple(
                ot.MemberValue(
                    member_id=mem.member_id,
                    group_instance_id=mem.group_instance_id,
                    client_id=mem.client_id,
                    client_host=mem.client_host,
                    rebalance_timeout_ms=mem.rebalance_timeout_ms,
                    session_timeout_ms=mem.session_timeout_ms,
                    subscription=mem.metadata_for(group.protocol),
                    assignment=assignment.get(mem.member_id, b""),
                )
                for mem in group.members.values()
            ),
        )
        records: Records = [(ot.group_key(group.group_id), ot.encode_group(value))]
        self._append(self.partition_for(group.group_id), records, now_ms, done)

    def store_group_quietly(self, group: Group, now_ms: int) -> None:
        """`store_group` with the members' current assignments; a failure is logged."""
        assignment = {mid: mem.assignment for mid, mem in group.members.items()}

        def done(code: ErrorCode, now_ms: int) -> None:
            if code is not ErrorCode.NONE:
                log.warning("group %s: metadata not stored: %s", group.group_id, code.name)

        self.store_group(group, assignment, now_ms, done)

    def delete_groups(
        self,
        group_ids: list[str],
        now_ms: int,
        respond: Callable[[dict[str, ErrorCode]], None],
    ) -> None:
        """DeleteGroups: each Empty group goes (Dead) with tombstones for its metadata and
        offsets; answers once every tombstone write is done."""
        results: dict[str, ErrorCode] = {}
        writes: dict[int, Records] = {}
        for group_id in group_ids:
            status = self.status(group_id)
            group = self.groups.get(group_id)
            if status is not ErrorCode.NONE:
                results[group_id] = status
            elif group is None or group.is_state(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_state(GroupState.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                group.transition_to(GroupState.DEAD, now_ms)
                del self.groups[group_id]
                records = writes.setdefault(self.partition_for(group_id), [])
                records.extend((ot.offset_key(group_id, t, p), None) for t, p in group.offsets)
                records.append((ot.group_key(group_id), None))
                results[group_id] = ErrorCode.NONE
                self._events("group_deleted", {"group": group_id})
        pending = len(writes)
        if not pending:
            respond(results)
            return

        def written(code: ErrorCode, now_ms: int) -> None:
            nonlocal pending
            pending -= 1
            if code is not ErrorCode.NONE:
                log.warning("deleting groups: tombstones not written: %s", code.name)
            if pending == 0:
                respond(results)

        for partition, records in writes.items():
            self._append(partition, records, now_ms, written)

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]],
        now_ms: int,
        respond: Callable[[ErrorCode, dict[tuple[str, int], ErrorCode]], None],
    ) -> None:
        """OffsetDelete (KIP-496, Kafka's `handleDeleteOffsets`): an Empty group's offsets
        go; a consumer group with members keeps those of topics a member subscribes to
        (GROUP_SUBSCRIBED_TO_TOPIC) and loses the others; any other group with members
        is NON_EMPTY_GROUP. Tombstones are written; answers once they are."""
        status = self.status(group_id)
        group = self.groups.get(group_id)
        if status is not ErrorCode.NONE:
            respond(status, {})
            return
        if group is None or group.is_state(GroupState.DEAD):
            respond(ErrorCode.GROUP_ID_NOT_FOUND, {})
            return
        results: dict[tuple[str, int], ErrorCode] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
            results.update(
                {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible}
            )
        else:
            respond(ErrorCode.NON_EMPTY_GROUP, {})
            return
        records: Records = [
            (ot.offset_key(group_id, t, p), None) for t, p in eligible if (t, p) in group.offsets
        ]
        for tp in eligible:
            group.offsets.pop(tp, None)
            results[tp] = ErrorCode.NONE
        if group.is_state(GroupState.EMPTY) and not group.offsets and not group.members:
            group.transition_to(GroupState.DEAD, now_ms)
            del self.groups[group_id]
            records.append((ot.group_key(group_id), None))
        if not records:
            respond(ErrorCode.NONE, results)
            return

        def written(code: ErrorCode, now_ms: int) -> None:
            if code is not ErrorCode.NONE:
                log.warning("group %s: offset tombstones not written: %s", group_id, code.name)
            respond(ErrorCode.NONE, results)

        self._append(self.partition_for(group_id), records, now_ms, written)

    # -- offsets -------------------------------------------------------------------------
    def store_offsets(
        self,
        group: Group,
        offsets: dict[tuple[str, int], ot.OffsetValue],
        now_ms: int,
        respond: OffsetsAnswer,
    ) -> None:
        """Write a commit (the coordinator checked who sent it); the cache takes it once
        the write is acknowledged. Metadata over `offset.metadata.max.bytes` is refused."""
        results: dict[tuple[str, int], ErrorCode] = {}
        valid: dict[tuple[str, int], ot.OffsetValue] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > self.config.metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = value
        if not valid:
            respond(results)
            return
        records: Records = [
            (ot.offset_key(group.group_id, t, p), ot.encode_offset(v))
            for (t, p), v in valid.items()
        ]

        def stored(code: ErrorCode, now_ms: int) -> None:
            code = append_error(code)
            if code is ErrorCode.NONE and self.groups.get(group.group_id) is group:
                group.offsets.update(valid)
                self._stats.commits += len(valid)
            results.update({tp: code for tp in valid})
            respond(results)

        self._append(self.partition_for(group.group_id), records, now_ms, stored)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, dict[tuple[str, int], ot.OffsetValue | None]]:
        """Committed offsets of `partitions` (None: all the group has); None: none."""
        status = self.status(group_id)
        if status is not ErrorCode.NONE:
            return status, {}
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(offsets)
        return ErrorCode.NONE, {tp: offsets.get(tp) for tp in partitions}

    def expire_offsets(self, now_ms: int) -> int:
        """KIP-211: drop the offsets of groups empty for `offsets.retention.minutes`
        (per commit for groups that only store offsets); remove groups left with none."""
        retention = self.config.offsets_retention_ms
        expired = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) not in self.owned:
                continue
            if not group.is_state(GroupState.EMPTY):
                continue
            if group.protocol_type:
                gone = list(group.offsets) if now_ms - group.state_timestamp_ms >= retention else []
            else:
                gone = [
                    tp
                    for tp, v in group.offsets.items()
                    if now_ms - v.commit_timestamp_ms >= retention
                ]
            records: Records = [(ot.offset_key(group.group_id, t, p), None) for t, p in gone]
            for tp in gone:
                del group.offsets[tp]
            expired += len(gone)
            if not group.offsets:
                group.transition_to(GroupState.DEAD, now_ms)
                del self.groups[group.group_id]
                records.append((ot.group_key(group.group_id), None))
            if records:
                self._append(
                    self.partition_for(group.group_id), records, now_ms, lambda code, now: None
                )
        return expired
