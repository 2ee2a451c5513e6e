"""Tributary broker: the sans-IO core (`broker.core`) and its thin Trio shell.

Map (ARCHITECTURE.md walks a produce request and an ISR shrink through it):
- `core/`: the log store (`core/log/`), partitions, replicas, ISR states, purgatories,
  delayed produce and fetch, follower fetch state, the replica manager, the metadata
  cache, the group and transaction coordinators: pure, driven by `now_ms` and callbacks;
- `handlers/`: the request handlers, one module per family of requests (data plane,
  metadata, controller requests, log dirs, topics, configs, elections, reassignments,
  groups) and `RequestHandlers`, the one dispatch every connection calls;
- `kafka/`: Kafka's wire protocol on a listener, translated to and from the native
  requests the same handlers serve;
- `tasks/`: the Trio tasks beside the handlers: the core's timers and queues, the
  follower fetchers, the log cleaner, the scrubber, the group coordinator's service;
- `zookeeper/`: the ZooKeeper gateway (every broker-side read and write), the broker's
  registration, the topic and dynamic broker configs kept in step with ZooKeeper,
  controlled shutdown;
- `server.py`: `BrokerServer` wires the parts and runs the process; `config.py`: the
  broker's settings (Kafka's names and defaults); `dynamic_config.py`: its four layers
  (dynamic per-broker and cluster default, static, default), which of them change at
  run time and how DescribeConfigs shows them; `__main__.py`: `python -m broker`;
  `broker_metrics.py`: the broker's metrics, registered in one place;
  `listener_sasl.py`: the SASL listeners' mechanisms and the broker's own credentials,
  from their JAAS configs; `client_bounds.py`: the connection counts, connection
  creation rate and request memory pools that bound the listeners; `txn_wiring.py`: the
  transaction coordinator wired into a broker (service, handlers, KIP-890 verifier);
  `quota_gate.py`: the client quotas applied to each request (recorded, throttled).

The broker imports `server_common` and `client`; never `controller`, `tools` or `spark`.
"""
