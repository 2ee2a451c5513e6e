"""The producer package (being split by responsibility; for now the whole producer).

- `producer.py`: the producer (batching, sending, retries, idempotence, the public API);
- `partitioner.py`: which partition a record goes to (Kafka's murmur2 key hash, sticky
  partitions for keyless records);
- `record_columns.py`: records converted to bytes and sized, and `send_many`'s columns.
"""

from client.producer.producer import (
    DeliveryHandle,
    DeliveryHandles,
    DeliveryTimeoutError,
    InvalidPartitionError,
    Producer,
    ProducerClosedError,
    ProducerTimeoutError,
    RecordMetadata,
    RecordTooLargeError,
    idempotence_enabled,
    open_producer,
    parse_acks,
    parse_compression,
)

__all__ = [
    "DeliveryHandle",
    "DeliveryHandles",
    "DeliveryTimeoutError",
    "InvalidPartitionError",
    "Producer",
    "ProducerClosedError",
    "ProducerTimeoutError",
    "RecordMetadata",
    "RecordTooLargeError",
    "idempotence_enabled",
    "open_producer",
    "parse_acks",
    "parse_compression",
]
