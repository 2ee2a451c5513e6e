"""The broker's sans-IO core: log store, partitions, replicas, purgatories.

Nothing under this package imports trio, kazoo, socket, time or threading (a test checks
it): time comes in as `now_ms` arguments and decisions go out as values (`IsrUpdate`
effects) or through the callbacks the shell gives it (`wake_at`, `followers_changed`).
The log store does synchronous file I/O with `os`, driven by those calls.

Map:
- `log/`: the segmented log store (Log, LocalLog, LogLoader, segments, indexes, leader
  epochs, producer state, LogManager, the cleaner);
- `group/`: the group coordinator (membership, rebalances, committed offsets);
- `txn/`: the transaction coordinator (transactional ids, their states, markers to write);
- `replica_manager.py`: `ReplicaManager`, every hosted partition and the purgatories:
  produce, fetch, DeleteRecords, ListOffsets, ISR maintenance; `leader_queries.py`:
  its answers to OffsetForLeaderEpoch, ListOffsets and DescribeProducers;
- `role_changes.py`: LeaderAndIsr and StopReplica applied to the replicas;
- `replication.py`: replication's settings, counters and fetched-partition value;
- `partition.py`: one partition replica: leader or follower, its ISR and HW;
- `replica.py`: what a leader knows about one follower;
- `isr.py`: the ISR with one change waiting for ZooKeeper; `isr_propagation.py`: the
  throttled publication of ISR changes;
- `follower_fetch.py`: the follower side of replication (what to fetch from each
  leader, what its answers mean); `truncation.py`: where a new follower truncates;
- `fetch_sessions.py`: fetch sessions (KIP-227), the leader's cache of what each fetcher
  asks, so incremental fetches carry and answer only what changed;
- `purgatory.py`: delayed operations and their purgatory; `delayed_produce.py`,
  `delayed_fetch.py`, `delayed_delete_records.py`: the three the replica manager parks;
- `txn_verification.py`: KIP-890's seam, the leader's check with the transaction
  coordinator before a transaction's first write to a partition (`ALLOW_ALL` until set);
- `metadata_cache.py`: the cluster as the controller's UpdateMetadata describes it;
- `assignment.py`: replica assignment for new topics and partitions;
  `partition_limits.py`: the partition-count limits CreateTopics/CreatePartitions check;
- `rack_assignment.py`: rack-aware replica assignment (alternating racks) and the
  choice between it and the rack-unaware one; `replica_selector.py`: KIP-392's
  selectors, which replica a consumer in a given rack should fetch from;
  `consumer_reads.py`: KIP-392 in the replica manager (the preferred read replica
  answer, consumer reads counted by role, followers' HW moves waking waiting fetches);
- `scram_users.py`: users' SCRAM credentials as the KIP-554 admin APIs check, change
  and describe them;
- `quota_rate.py`: Kafka's sampled rate and throttle time; `quota_entities.py`: client
  quota entities and which one applies to a (user, client-id); `client_quotas.py`: the
  produce, fetch and request quota managers; `quota_admin.py`: the client quota admin
  APIs' checks (KIP-546);
- `producer_ids.py`: idempotent producers' ids, from blocks claimed in ZooKeeper;
- `scrub.py`: the scrubber's decisions (what to check next, how to repair);
- `errors.py`: `PartitionError`, a Kafka error code with a message.
"""
