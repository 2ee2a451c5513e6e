"""The group coordinator's sans-IO core: consumer groups' membership, rebalances and
committed offsets (Kafka 2.8's GroupCoordinator and GroupMetadataManager).

Time comes in as `now_ms`; writes to `__consumer_offsets` leave through the `append`
callable the shell (`broker/tasks/group_service.py`) gives, and the shell feeds the records it
reads back when this broker becomes leader of an offsets partition.

Modules:
- `coordinator.py`: `GroupCoordinator`, the entry point: checks each group request
  (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit/Fetch, List/Describe/
  DeleteGroups) and hands it to the two parts below;
- `membership.py`: `GroupMembership`, the state machine of joins, rebalances, syncs,
  static and pending members, and member liveness;
- `metadata_manager.py`: `GroupMetadataManager`, the groups this broker coordinates:
  loading them from the offsets partitions it leads (`GroupLoader`), writing group
  metadata, offset commits and tombstones, and expiring offsets;
- `txn_offsets.py`: `TxnOffsets`, transactional offset commits (TxnOffsetCommit) pending
  until their producer's COMMIT or ABORT marker;
- `delayed.py`: the delayed joins, syncs and heartbeats the membership waits on in
  purgatories;
- `group.py`: a group and its members, with the state transitions Kafka allows;
- `offsets_topic.py`: the keys and values of `__consumer_offsets`, and which partition
  holds a group;
- `config.py`: the coordinator's settings (`GroupConfig`) and counters.
"""
