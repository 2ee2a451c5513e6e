"""The producer, split by responsibility as Kafka's (KafkaProducer, RecordAccumulator,
Sender, TransactionManager) and aiokafka's producer package are.

- `producer.py`: the public `Producer` (`send`, `send_many`, `flush`, `aclose`, `abort`),
  which finds each record its partition, batch and buffer memory and wires the parts
  below, and `open_producer`;
- `batch.py`: a `ProducerBatch` (records for one partition as columns, encoded once),
  the `DeliveryHandle`/`DeliveryHandles` callers await and the `RecordMetadata` they give;
- `accumulator.py`: the sans-IO `RecordAccumulator`: per-partition batch queues, buffer
  memory, readiness, draining per leader with partition muting, and expiry;
- `sender.py`: the `Sender` task: drains ready batches into Produce requests, handles
  the answers (complete, retry, expire or fail) and abandons requests to a moved leader
  (client/inflight.py);
- `idempotence.py`: the `IdempotenceManager`: producer id and epoch (InitProducerId),
  sequence stamping, epoch bumps and what the broker's idempotence errors mean;
- `transactions.py`: the sans-IO `TransactionManager` (KIP-98): Kafka's transaction
  states and transitions, the partitions to add to the transaction, pending offsets, and
  what each coordinator answer means (`classify`: retry, find the coordinator again,
  abortable, fatal);
- `txn_requests.py`: `TxnRequests` (Trio): FindCoordinator, InitProducerId,
  AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn to the coordinators,
  and the sender's step that adds partitions before their batches are drained;
- `transactional.py`: the transactional API of `Producer` (`init_transactions`,
  `begin_transaction`, `send_offsets_to_transaction`, `commit_transaction`,
  `abort_transaction`), confluent-kafka's and aiokafka's names;
- `partitioner.py`: Kafka 2.8's default partitioner (murmur2 key hash, sticky
  partitions for keyless records), kept for callers that pass it;
- `builtin_partitioner.py`: Kafka 3.3's built-in partitioner (KIP-794), the default:
  sticky keyless partitions switched after `batch_size` bytes, the next one weighted
  away from leaders with long queues and leaving out those that cannot be drained for
  `partitioner_availability_timeout_ms`;
- `record_columns.py`: records converted to bytes and sized, and `send_many`'s columns;
- `config.py`: reading the acks and compression settings, and Kafka 3.x's rule for when
  idempotence is on;
- `errors.py`: the errors `send()` raises and handles fail with.

The names callers use are importable from here (`from client.producer import
open_producer, DeliveryHandle, RecordMetadata`).
"""

from client.inflight import LeaderMovedError
from client.producer.accumulator import AccumulatorConfig, ReadyCheck, RecordAccumulator
from client.producer.batch import (
    BatchState,
    DeliveryHandle,
    DeliveryHandles,
    ProducerBatch,
    RecordMetadata,
)
from client.producer.config import (
    MAX_IN_FLIGHT_FOR_IDEMPOTENCE,
    idempotence_enabled,
    parse_acks,
    parse_compression,
)
from client.producer.errors import (
    DeliveryTimeoutError,
    InvalidPartitionError,
    ProducerClosedError,
    ProducerTimeoutError,
    RecordTooLargeError,
)
from client.producer.producer import Producer, open_producer
from client.producer.transactions import (
    ConsumerGroupMetadata,
    ProducerFencedError,
    TransactionError,
    TransactionManager,
    TxnState,
)

__all__ = [
    "MAX_IN_FLIGHT_FOR_IDEMPOTENCE",
    "AccumulatorConfig",
    "BatchState",
    "ConsumerGroupMetadata",
    "DeliveryHandle",
    "DeliveryHandles",
    "DeliveryTimeoutError",
    "InvalidPartitionError",
    "LeaderMovedError",
    "Producer",
    "ProducerBatch",
    "ProducerClosedError",
    "ProducerFencedError",
    "ProducerTimeoutError",
    "ReadyCheck",
    "RecordAccumulator",
    "RecordMetadata",
    "RecordTooLargeError",
    "TransactionError",
    "TransactionManager",
    "TxnState",
    "idempotence_enabled",
    "open_producer",
    "parse_acks",
    "parse_compression",
]
