"""The topic configs the log honours beyond the basics: compression.type recompression,
message.timestamp.difference.max.ms, segment.jitter.ms and file.delete.delay.ms (real
logs in a temporary directory, real batches of both payload formats)."""

from __future__ import annotations

import pytest

from broker.core.log import Log, LogConfig
from broker.core.log.errors import InvalidTimestampError
from broker.core.log.validator import recompress
from client.protocol.records import (
    Codec,
    Record,
    build_batch,
    decode_records,
    iter_batches,
    validate_batches,
)
from client.protocol.records.kafka_format import build_kafka_batch

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=64)
NOW = 1_700_000_000_000


def records(n: int = 5, ts: int = NOW) -> list[Record]:
    return [Record(f"k{i}".encode(), b"value-" * 20 + str(i).encode(), ts + i) for i in range(n)]


def open_log(tmp_path, config: LogConfig = SMALL) -> Log:
    return Log.open(tmp_path / "topic-0", config, now_ms=0)


def stored(log: Log) -> list[tuple[Codec, list[tuple[bytes | None, bytes | None]]]]:
    """Each stored batch's codec and its (key, value)s."""
    data = log.read(log.log_start_offset, 10**9, min_one_batch=True).records
    out = []
    for position, header in iter_batches(data):
        batch = data[position : position + header.size]
        out.append((header.codec, [(r.key, r.value) for r in decode_records(batch)]))
    return out


@pytest.mark.parametrize("builder", [build_batch, build_kafka_batch], ids=["native", "kafka"])
@pytest.mark.parametrize(
    ("sent", "topic_codec", "kept"),
    [
        (Codec.NONE, "gzip", Codec.GZIP),
        (Codec.LZ4, "zstd", Codec.ZSTD),
        (Codec.SNAPPY, "uncompressed", Codec.NONE),
        (Codec.GZIP, "producer", Codec.GZIP),
        (Codec.ZSTD, "zstd", Codec.ZSTD),
    ],
)
def test_compression_type_recompresses_to_the_topic_codec(
    tmp_path, builder, sent, topic_codec, kept
):
    log = open_log(tmp_path, SMALL.merged({"compression.type": topic_codec}))
    original = records()
    log.append_as_leader(builder(original, codec=sent), leader_epoch=3, now_ms=NOW)
    ((codec, kvs),) = stored(log)
    assert codec == kept
    assert kvs == [(r.key, r.value) for r in original]
    data = log.read(0, 10**9).records
    (header,) = validate_batches(data, strict=False)  # a valid CRC after recompression
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 4, 5)
    assert header.partition_leader_epoch == 3 and header.max_timestamp == NOW + 4


def test_recompression_keeps_the_idempotent_producer_state(tmp_path):
    log = open_log(tmp_path, SMALL.merged({"compression.type": "gzip"}))
    first = build_batch(records(3), producer_id=7, producer_epoch=1, base_sequence=0)
    second = build_batch(records(2), producer_id=7, producer_epoch=1, base_sequence=3)
    assert log.append_as_leader(first, 0, NOW).first_offset == 0
    retry = log.append_as_leader(first, 0, NOW)  # a retry of the same batch
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 2)
    assert log.append_as_leader(second, 0, NOW).first_offset == 3
    headers = [h for _, h in iter_batches(log.read(0, 10**9).records)]
    assert [(h.producer_id, h.base_sequence, h.codec) for h in headers] == [
        (7, 0, Codec.GZIP),
        (7, 3, Codec.GZIP),
    ]
    # A follower stores what the leader wrote, recompressed bytes and all.
    follower = Log.open(tmp_path / "follower" / "topic-0", SMALL, now_ms=0)
    follower.append_as_follower(log.read(0, 10**9).records, NOW)
    entry = follower.producer_state.entry(7)
    assert entry is not None and entry.last_seq == 4


def test_recompress_leaves_batches_already_in_the_codec_alone():
    data = build_batch(records(), codec=Codec.LZ4)
    headers = validate_batches(data)
    same, same_headers = recompress(data, headers, "lz4")
    assert same is data and same_headers == headers


@pytest.mark.parametrize("builder", [build_batch, build_kafka_batch], ids=["native", "kafka"])
def test_timestamps_too_far_from_the_clock_are_refused(tmp_path, builder):
    log = open_log(tmp_path, SMALL.merged({"message.timestamp.difference.max.ms": "60000"}))
    log.append_as_leader(builder(records(ts=NOW - 60_000)), 0, NOW)  # at the bound: fine
    log.append_as_leader(builder(records(ts=NOW + 59_000)), 0, NOW)
    for ts in (NOW - 60_001, NOW + 60_000):  # the last record of the second is NOW + 60_004
        with pytest.raises(InvalidTimestampError, match="out of range"):
            log.append_as_leader(builder(records(ts=ts)), 0, NOW)
    assert log.log_end_offset == 10  # nothing of the refused batches was written
    # LogAppendTime topics stamp their own time: nothing to check.
    log.update_config(log.config.merged({"message.timestamp.type": "LogAppendTime"}))
    log.append_as_leader(builder(records(ts=0)), 0, NOW)
    # Records without a timestamp pass.
    log.update_config(log.config.merged({"message.timestamp.type": "CreateTime"}))
    log.append_as_leader(builder([Record(b"k", b"v", -1)]), 0, NOW)


def test_segment_jitter_rolls_earlier_by_the_drawn_amount(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_ms=1_000, segment_jitter_ms=400))
    log._local.random_int = lambda: 1_300  # 1300 % min(400, 1000): 100 ms of jitter
    log.append_as_leader(build_batch([Record(None, b"a", 10_000)]), 0, 10_000)
    log.roll(now_ms=10_000)  # the new active segment draws its jitter
    assert log.active_segment.roll_jitter_ms == 100
    segments = len(log.segments)
    for ts in (20_000, 20_899, 20_900):  # up to segment.ms - jitter past the first record
        log.append_as_leader(build_batch([Record(None, b"b", ts)]), 0, ts)
    assert len(log.segments) == segments
    log.append_as_leader(build_batch([Record(None, b"c", 20_901)]), 0, 20_901)
    assert len(log.segments) == segments + 1


def test_no_jitter_rolls_by_segment_ms(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_ms=1_000))
    log.append_as_leader(build_batch([Record(None, b"a", 10_000)]), 0, 10_000)
    log.append_as_leader(build_batch([Record(None, b"b", 10_999)]), 0, 10_999)
    log.append_as_leader(build_batch([Record(None, b"c", 11_000)]), 0, 11_000)
    assert len(log.segments) == 1
    log.append_as_leader(build_batch([Record(None, b"d", 11_001)]), 0, 11_001)
    assert len(log.segments) == 2


def segment_files(log: Log) -> set[str]:
    return {p.name for p in log.directory.iterdir() if not p.name.endswith(".snapshot")}


def test_retention_renames_segments_deleted_and_removes_them_after_the_delay(tmp_path):
    log = open_log(tmp_path, SMALL.merged({"file.delete.delay.ms": "5000"}))
    for i in range(20):
        log.append_as_leader(build_batch(records(3, ts=NOW)), 0, NOW + i)
    first = log.segments[0]
    name = first.log_path.name
    log.update_config(log.config.merged({"retention.bytes": "0"}))
    deleted = log.delete_old_segments(now_ms=NOW)
    assert deleted >= 1
    files = segment_files(log)
    assert name not in files and f"{name}.deleted" in files
    assert log.delete_due_files(NOW + 4_999) == 0 and f"{name}.deleted" in segment_files(log)
    assert log.delete_due_files(NOW + 5_000) == deleted
    assert not any(f.endswith(".deleted") for f in segment_files(log))


def test_a_zero_delay_deletes_at_once_and_a_restart_removes_leftovers(tmp_path):
    log = open_log(tmp_path, SMALL.merged({"file.delete.delay.ms": "0"}))
    for i in range(10):
        log.append_as_leader(build_batch(records(3, ts=NOW)), 0, NOW + i)
    log.update_config(log.config.merged({"retention.bytes": "0"}))
    log.delete_old_segments(now_ms=NOW)
    assert not any(f.endswith(".deleted") for f in segment_files(log))
    log.update_config(log.config.merged({"file.delete.delay.ms": "60000"}))
    for i in range(10):
        log.append_as_leader(build_batch(records(3, ts=NOW)), 0, NOW + i)
    log.delete_old_segments(now_ms=NOW)
    assert any(f.endswith(".deleted") for f in segment_files(log))
    log.close()
    reopened = open_log(tmp_path)
    assert not any(f.endswith(".deleted") for f in segment_files(reopened))
