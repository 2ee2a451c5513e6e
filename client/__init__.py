"""Tributary's client side: the wire protocol and the client library.

- `protocol/`: frames, request/response messages, error codes and record batches: the
  wire contract that brokers, controllers, tools and the Spark job all share;
- `connection.py`: pipelined connections to brokers, and a pool of them;
- `metadata.py`: the cluster view clients route by, kept fresh in the background;
- `producer/`: the producer (accumulator, sender, idempotence, partitioner);
- `consumer/`: the consumer (subscription state, fetcher) and, in `consumer/group/`,
  the consumer-group client;
- `inflight.py`: requests in flight to partition leaders, abandoned when fresh metadata
  shows the leader moved (shared by the producer's sender and the consumer's fetcher);
- `list_offsets.py`: one ListOffsets request to one broker (consumer and admin);
- `admin/`: the admin client (`Admin`, `open_admin`), one module per family of requests
  (its own docstring names them);
- `sync.py`: blocking wrappers for code that is not on Trio;
- `security/`: authenticating to a broker (the SASL client mechanisms, Kafka's
  `sasl.jaas.config` values).

Nothing here imports the broker, the controller, the shared server plumbing
(`server_common`), the tools or the Spark job; they depend on this package, never the
reverse (Kafka keeps the same direction between its clients and core modules).
A test enforces it (`tests/unit/test_layering.py`).
"""

__version__ = "0.1.0"
