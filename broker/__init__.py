"""Tributary broker: the sans-IO core (`broker.core`) and its thin Trio shell.

Map (ARCHITECTURE.md walks a produce request and an ISR shrink through it):
- `core/`: the log store (`core/log/`), partitions, replicas, ISR states, purgatories,
  delayed produce and fetch, follower fetch state, the replica manager, the metadata
  cache: pure, driven by `now_ms` and callbacks;
- `server.py`: wires the parts and runs the process; `config.py`, `__main__.py`;
- `handlers.py`, `admin.py`: one method per API, over the replica manager, the metadata
  cache and the ZooKeeper gateway;
- `zk_gateway.py`: every broker-side ZooKeeper read and write; `registration.py`,
  `topic_configs.py`, `controlled_shutdown.py`: what the broker keeps in step with it;
- `fetcher.py`: one follower fetcher task per leader; `background.py`: the timers and
  queues that drive the core; `metadata_changes.py`, `broker_metrics.py`.

The broker imports `server_common` and `client`; never `controller`, `tools` or `spark`.
"""
