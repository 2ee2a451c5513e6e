"""Kafka's record format next to Tributary's: decode rates and the conversion cost.

The records: 100,000 of 100-byte values with 12-byte keys, no headers, in batches of 500,
for each codec (none, lz4, zstd), written once in each payload format (`build_batch`:
Tributary's msgpack; `build_kafka_batch`: Kafka's varint records, as a Kafka producer
writes them). One run of each, in one Python thread:

- decode, Tributary format: `decode_records` on every batch (what Tributary's consumer
  and the Spark job do with batches from Tributary's producer);
- decode, Kafka format: the same on the Kafka-format batches (what they do with batches
  from Kafka clients);
- convert Tributary -> Kafka: `to_kafka_format` on fetch-sized buffers (about 1 MiB of
  whole batches), what the broker pays to serve Tributary-produced data to a Kafka
  consumer; MB/s of the input bytes;
- pass Kafka -> Kafka through: `to_kafka_format` on buffers of Kafka-format batches,
  handed in as memoryviews so the figure includes the one copy (a header walk and a
  copy: Kafka-produced data costs the broker nothing per record; a `bytes` buffer comes
  back as it is, not even copied);
- for reference, codec none only: kafka-python's pure-Python `DefaultRecordBatch` reading
  the same Kafka-format batches (the decoder `records.kafka_format` did not choose).

Figures are the best of ROUNDS runs, records/s and MB/s (MB = 10^6) of batch bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from client.protocol.records import (
    Codec,
    Record,
    build_batch,
    build_kafka_batch,
    decode_records,
    to_kafka_format,
)

RECORDS = 100_000
PER_BATCH = 500
VALUE_BYTES = 100
FETCH_BYTES = 1 << 20
CODECS = (Codec.NONE, Codec.LZ4, Codec.ZSTD)
T0 = 1_700_000_000_000
ROUNDS = 5  # best of: the figures are noisy on a shared machine


def _batches(build: Callable, codec: Codec) -> list[bytes]:
    out = []
    for start in range(0, RECORDS, PER_BATCH):
        records = [
            Record(
                b"key-%08d" % (start + i),
                (b"%08d" % (start + i)) * (VALUE_BYTES // 8) + b"x" * (VALUE_BYTES % 8),
                T0 + start + i,
            )
            for i in range(PER_BATCH)
        ]
        out.append(build(records, codec=codec, base_offset=start))
    return out


def _fetches(batches: list[bytes]) -> list[bytes]:
    """The batches grouped into buffers of about FETCH_BYTES, as a fetch returns them."""
    out: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for batch in batches:
        current.append(batch)
        size += len(batch)
        if size >= FETCH_BYTES:
            out.append(b"".join(current))
            current, size = [], 0
    if current:
        out.append(b"".join(current))
    return out


def _best(run: Callable[[], int]) -> tuple[float, int]:
    best = float("inf")
    count = 0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        count = run()
        best = min(best, time.perf_counter() - start)
    return best, count


def _line(label: str, seconds: float, records: int, size: int) -> None:
    print(
        f"  {label:<34} {records / seconds:>11,.0f} records/s  {size / seconds / 1e6:>7.1f} MB/s"
        f"  ({seconds:.3f} s)",
        flush=True,
    )


def _decode_all(batches: list[bytes]) -> Callable[[], int]:
    return lambda: sum(len(decode_records(batch)) for batch in batches)


def _convert_all(fetches: list[bytes] | list[memoryview]) -> Callable[[], int]:
    def run() -> int:
        for fetch in fetches:
            to_kafka_format(fetch)
        return RECORDS

    return run


def _kafka_python_all(batches: list[bytes]) -> Callable[[], int]:
    from kafka.record.default_records import DefaultRecordBatch

    def run() -> int:
        count = 0
        for batch in batches:
            for _ in DefaultRecordBatch(batch):
                count += 1
        return count

    return run


def main() -> None:
    print(f"  {RECORDS:,} records of {VALUE_BYTES} bytes, {PER_BATCH} a batch", flush=True)
    for codec in CODECS:
        native = _batches(build_batch, codec)
        kafka = _batches(build_kafka_batch, codec)
        native_size = sum(map(len, native))
        kafka_size = sum(map(len, kafka))
        converted = b"".join(to_kafka_format(fetch) for fetch in _fetches(native))
        assert converted == b"".join(kafka), "conversion must give what a Kafka producer sends"
        print(
            f" {codec.name.lower()}: {native_size / 1e6:.1f} MB Tributary format, "
            f"{kafka_size / 1e6:.1f} MB Kafka format",
            flush=True,
        )
        _line("decode, Tributary format", *_best(_decode_all(native)), native_size)
        _line("decode, Kafka format", *_best(_decode_all(kafka)), kafka_size)
        _line("convert Tributary -> Kafka", *_best(_convert_all(_fetches(native))), native_size)
        passed = [memoryview(fetch) for fetch in _fetches(kafka)]
        _line("pass Kafka -> Kafka through", *_best(_convert_all(passed)), kafka_size)
        if codec == Codec.NONE:
            _line("decode, kafka-python (reference)", *_best(_kafka_python_all(kafka)), kafka_size)


if __name__ == "__main__":
    main()
