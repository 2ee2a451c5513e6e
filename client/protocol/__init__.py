"""The wire protocol and record format shared by brokers, controllers and clients.

Sans-IO: nothing here touches sockets or trio. Framing is a 4-byte big-endian length
followed by a msgpack body; record batches travel inside Produce/Fetch as opaque bytes.

- `framing.py`: length-prefixed frames (a frame buffer that consumes whole frames);
- `schema.py`: `@struct`, declarative message schemas compiled into msgpack encoders and
  validating decoders;
- `messages/`: every request and response, one module per family of APIs, and the
  registry of (api key, version) -> classes (its own docstring names its modules);
- `api.py`: `ApiKey` (Kafka's numbers) and `ApiRegistry`;
- `codec.py`: request and response envelopes, message objects <-> frame bytes;
- `connection.py`: sans-IO connection state machines for the client and server ends;
- `errors.py`: the error codes carried on the wire and the protocol's exceptions;
- `fetch_session.py`: fetch sessions (KIP-227), the fetcher's side: the session id and
  epoch of each fetch, which partitions to send and forget, what an answer means;
- `acl_types.py`: the ACL enums (resource and pattern types, operations, permissions);
- `types.py`: small value types (`TopicPartition`...) shared by every package;
- `topic_ids.py`: topic ids (KIP-516): new random ids, their base64 text and wire bytes;
- `records/`: record batches, Kafka's v2 header with Tributary's msgpack payload or
  Kafka's varint records (its own docstring names its modules);
- `consumer_protocol.py`: Kafka's ConsumerProtocol bytes (a group member's subscription
  and assignment) and the sticky assignor's user data.
"""
