"""Tributary's client side: the wire protocol and the client library.

- `protocol/`: frames, request/response messages, error codes and record batches: the
  wire contract that brokers, controllers, tools and the Spark job all share (its own
  docstring names its modules);
- `connection.py`: pipelined Trio connections to a broker, and a pool of them;
- `metadata.py`: the client's view of the cluster (brokers, controller, partition
  leaders) that every request is routed by;
- `producer.py`: records in, per-partition batches out, retried in order until acked;
  `partitioner.py` picks each record's partition and `record_columns.py` holds records
  as the producer takes them in (bytes, sizes, columns);
- `consumer.py`: assigned partitions, positions, long-poll fetches, records out of
  `poll()`; `list_offsets.py` sends one ListOffsets to one broker (consumer and admin);
- the group consumer: `group_coordinator.py` (joining, syncing, heartbeats, leaving, in
  Trio) over the sans-IO `group_membership.py`, `group_channel.py` (finding the
  coordinator and talking to it), `group_commits.py` (commits and starting positions),
  `group_offsets.py` (OffsetCommit/OffsetFetch on the wire) and `assignors.py` (range,
  roundrobin, sticky);
- `admin/`: the admin client (`Admin`, `open_admin`), one module per family of requests
  (its own docstring names them);
- `sync.py`: blocking wrappers (`SyncProducer`, `SyncConsumer`, `SyncAdmin`) for code that
  is not on Trio.

Nothing here imports the broker, the controller, the shared server plumbing
(`server_common`), the tools or the Spark job; they depend on this package, never the
reverse (Kafka keeps the same direction between its clients and core modules).
A test enforces it (`tests/unit/test_layering.py`).
"""

__version__ = "0.1.0"
