"""Record batches: Kafka's v2 batch header in front of one of two payload formats.

How it works: a batch is a 61-byte big-endian header (Kafka's `DefaultRecordBatch`,
magic 2) followed by the records payload, compressed as a whole by the codec in
attributes bits 0-2. The payload comes in two formats, told apart by attributes bit 7
(`ATTR_MSGPACK_PAYLOAD`):

- **Tributary format** (bit 7 set; what `build_batch` and so Tributary's producer write):
  one msgpack array of `[offset_delta, timestamp_delta, key, value, headers]` records.
- **Kafka format** (bit 7 clear; what Kafka clients send): Kafka's varint records.

Why two: batches from Kafka clients are stored verbatim, so the CRC their producer
computed stays valid all the way to their consumers and nothing re-encodes them on the
produce path (the leader only patches base offset and leader epoch, which lie outside
the CRC); a fetch for a Kafka client converts Tributary-format batches
(`to_kafka_format`).

The modules, each depending only on those above it in this list:
- `types.py`: `Record`, `DecodedRecord`, `RecordColumns` and the errors (`RecordError`,
  `CorruptRecordError` for damaged bytes, `InvalidRecordError` for unacceptable ones);
- `header.py`: the v2 header's layout, attribute bits and CRC-32C: `pack_batch`,
  `read_header`, `iter_batches`, `validate_batch(es)`, `assign_offsets`,
  `stamped_header` (all a broker's produce path needs: no record is read);
- `compression.py`: the codecs (none, gzip, snappy raw or xerial-framed, lz4, zstd);
- `native.py`: Tributary's msgpack format: `build_batch`, `build_column_batch` (the
  producer), its decoders;
- `kafka_format.py`: Kafka's varint records (aiokafka's codec, loaded on first use):
  their decoders, `build_kafka_batch`, `to_kafka_format`;
- `batches.py`: readers of either format, dispatching on bit 7: `decode_records`,
  `decode_batches`, `decode_columns`, `record_entries`, `record_keys`, `filter_batch`;
- `control.py`: transaction markers (COMMIT/ABORT control batches, Kafka's format):
  `build_control_batch`, `read_control_marker`, `is_control`.

Who uses what: the client calls `build_batch`/`build_column_batch`; the broker
`validate_batches` and `assign_offsets`/`stamped_header`, then stores the bytes
untouched; readers of the log (consumer, Spark) `iter_batches`/`decode_records`/
`decode_columns`; the log cleaner `record_keys` and `filter_batch`; the Kafka listener
`to_kafka_format`. Everything is importable from this package.
"""

from client.protocol.records.batches import (
    decode_batches,
    decode_columns,
    decode_records,
    filter_batch,
    record_entries,
    record_keys,
)
from client.protocol.records.compression import snappy_raw
from client.protocol.records.control import (
    build_control_batch,
    is_control,
    read_control_marker,
)
from client.protocol.records.header import (
    ATTR_CONTROL,
    ATTR_MSGPACK_PAYLOAD,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    Codec,
    TimestampType,
    assign_offsets,
    iter_batches,
    pack_batch,
    read_header,
    stamped_header,
    validate_batch,
    validate_batches,
)
from client.protocol.records.kafka_format import (
    build_kafka_batch,
    decode_kafka_records,
    encode_kafka_payload,
    kafka_entries,
    to_kafka_format,
)
from client.protocol.records.native import (
    build_batch,
    build_column_batch,
    msgpack_entries,
    msgpack_entry_tuples,
)
from client.protocol.records.types import (
    CorruptRecordError,
    DecodedRecord,
    InvalidRecordError,
    Record,
    RecordColumns,
    RecordError,
)

__all__ = [
    "ATTR_CONTROL",
    "ATTR_MSGPACK_PAYLOAD",
    "ATTR_TRANSACTIONAL",
    "BATCH_OVERHEAD",
    "CURRENT_MAGIC",
    "LOG_OVERHEAD",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Codec",
    "CorruptRecordError",
    "DecodedRecord",
    "InvalidRecordError",
    "Record",
    "RecordColumns",
    "RecordError",
    "TimestampType",
    "assign_offsets",
    "build_batch",
    "build_column_batch",
    "build_control_batch",
    "build_kafka_batch",
    "decode_batches",
    "decode_columns",
    "decode_kafka_records",
    "decode_records",
    "encode_kafka_payload",
    "filter_batch",
    "is_control",
    "iter_batches",
    "kafka_entries",
    "msgpack_entries",
    "msgpack_entry_tuples",
    "pack_batch",
    "read_control_marker",
    "read_header",
    "record_entries",
    "record_keys",
    "snappy_raw",
    "stamped_header",
    "to_kafka_format",
    "validate_batch",
    "validate_batches",
]
