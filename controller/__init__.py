"""Tributary controller: pure election and cluster-state logic plus a Trio/ZooKeeper shell.

Map:
- `core/`: the sans-IO decisions (context, election strategies, state changes, controlled
  shutdown, reassignment, rebalance, deletion bookkeeping, request batches);
- `server.py`: the process: watches in, one serial event loop, election/resignation;
- `leadership.py`: the /controller + /controller_epoch election multi;
- `active.py`: one term as active controller (context + fenced store + channels);
- `handlers/`: one module per kind of event (failover, brokers, topics, isr, deletion,
  elections, reassignment, shutdown);
- `zk_store.py`: batched reads and epoch-fenced writes; `channel.py`: per-broker request
  queues; `listener.py`: ControlledShutdown; `events.py`, `event_log.py`, `metrics.py`,
  `config.py`, `__main__.py`.

The controller is not a broker: it imports `server_common` (network loop, metrics,
ZooKeeper seam) and `client` (protocol, connections), never `broker`.
"""
