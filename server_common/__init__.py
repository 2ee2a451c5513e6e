"""What the broker and controller processes share: the server plumbing around their cores.

- `network`: the framed-request server loop (one reader and one in-order writer per
  connection), `Reply` for answers that come later, error answers;
  `connection_limits`: the client listeners' connection counts, in all and per client
  address (`max.connections`, `max.connections.per.ip`); `memory_pool`: the budget of
  request bytes in flight (`queued.max.request.bytes`);
- `metrics`, `metrics_http`: the metrics registry and its Prometheus endpoint;
- `properties`: typed configuration in Kafka's style (properties files, overrides);
- `zk`: the ZooKeeper seam (an interface with its own errors and values),
  `zk_kazoo`: its implementation on kazoo (the only module that imports kazoo), and
  `zkdata`: the JSON layout of every znode, as Kafka 2.x writes it, and `zkdata_acls`:
  the ACL znodes and their change notifications (Kafka 2.8's AclAuthorizer layout);
- `server_main`, `logging_setup`: the edges of a server process (command line, logging,
  signals); `malloc_tuning`: glibc malloc settings so a server's RSS falls after a
  burst; `jsonl`: the append-only, rotated JSON-lines files (events, metrics) servers
  leave for the Spark analytics;
- `security/`: who a connection is (`principal`: Kafka's principals, and the principal
  of the request being served) and what it may do (`acls`: the authorizer's rules).

It depends on `client.protocol`, and on `client.connection` for `TcpTransport.connect`
(network.py); `broker`, `controller` and `tools` depend on it.
Importing this package imports none of its modules, so a sans-IO core may use the pure
ones (`zkdata`) without pulling in trio or kazoo.
"""
