"""Tributary's client side: the wire protocol and the client library.

- `client.protocol`: frames, request/response messages, error codes and record batches:
  the wire contract that brokers, controllers, tools and the Spark job all share;
- the library: `connection` (pipelined connections and a pool), `metadata` (the cluster
  view clients route by), `producer` (with its partitioner), `consumer`, `admin` and `sync`
  (blocking wrappers for code that is not on Trio).

Nothing here imports the broker, the controller, the shared server plumbing
(`server_common`), the tools or the Spark job; they depend on this package, never the
reverse (Kafka keeps the same direction between its clients and core modules).
A test enforces it (`tests/unit/test_layering.py`).
"""

__version__ = "0.1.0"
