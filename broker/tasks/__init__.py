"""The broker's Trio tasks: what runs beside the request handlers, driving the core.

Each task calls the sans-IO core (broker/core) and carries out what comes back; none
holds replication state of its own. broker/server.py starts them all in its nursery.

- `background.py`: `BackgroundTasks`, the timers and queues of the replica manager and
  the logs: ISR writes to ZooKeeper, ISR shrink and propagation, delayed-operation
  expiry, checkpoints, retention, flushes, metrics snapshots; it also runs the cleaner
  and the scrubber below;
- `fetcher.py`: `FetcherManager`, one follower fetcher task (`ReplicaFetcher`) per
  leader this broker follows;
- `log_cleaner.py`: `LogCleanerTask`, compaction of `compact` logs in throttled steps;
- `log_scrubber.py`: `LogScrubber`, CRC checks of closed segments in throttled steps and
  the repair of damaged batches (also on demand, for VerifyLogDirs);
- `group_service.py`: `GroupService`, the group coordinator's shell: loading the
  `__consumer_offsets` partitions this broker leads, its timers, its acks=all writes, and
  creating the offsets topic on first use;
- `txn_service.py`: `TxnService`, the transaction coordinator's shell: loading the
  `__transaction_state` partitions this broker leads, its timers, its acks=all writes,
  creating the topic on first use; `txn_markers.py`: `MarkerSender`, WriteTxnMarkers to
  partition leaders, batched per leader and retried until written; `txn_verifier.py`:
  `CoordinatorVerifier`, KIP-890's check of a first transactional batch with the
  coordinator.
"""
