"""The `tributary` data source returns exactly what the log store wrote, and survives
damaged or changing files."""

from __future__ import annotations

import logging
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.log import LogConfig
from client.protocol.records import Codec, Record, build_batch, build_kafka_batch
from client.protocol.types import TopicPartition
from spark.datasource import plan_input_partitions
from spark.decode import SegmentSlice, plan_slices, read_slice_batches, read_slice_records
from tests.spark import synthetic

pytestmark = [
    pytest.mark.spark,
    # PySpark 4.3's own pandas conversions warn under pandas 3: noise, not our code.
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

ORDERS0 = TopicPartition("orders", 0)
ORDERS1 = TopicPartition("orders", 1)


def _rows(spark, path, **options):
    reader = spark.read.format("tributary")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load(str(path))


def _as_tuples(records):
    return sorted((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers, two partitions of 12 batches x 5 records over every codec, several
    segments each; broker 2's log dir has no meta.properties (its dir name says it)."""
    root = tmp_path_factory.mktemp("cluster")
    batches = {
        ORDERS0: synthetic.make_batches(ORDERS0, 12, 5),
        ORDERS1: synthetic.make_batches(ORDERS1, 12, 5, start_ts=synthetic.T0 + 500),
    }
    replicas = synthetic.write_replicas(root, batches)
    (synthetic.log_dir_of(root, 2) / "meta.properties").unlink()
    return replicas


def test_records_are_exactly_those_the_log_store_holds(spark, cluster):
    tp_dir = synthetic.log_dir_of(cluster.root, 1) / "orders-0"
    assert len(list(tp_dir.glob("*.log"))) > 1, "the test wants several segments"

    rows = _rows(spark, synthetic.log_dir_of(cluster.root, 1)).collect()

    for tp in (ORDERS0, ORDERS1):
        mine = [r for r in rows if (r.topic, r.partition) == tp]
        got = sorted(
            (
                r.offset,
                r.timestamp,
                r.key,
                r.value,
                tuple((h.key, h.value) for h in r.headers),
            )
            for r in mine
        )
        assert got == _as_tuples(cluster.records[tp])
        assert {r.broker for r in mine} == {1}
        assert all(r.time.timestamp() * 1000 == pytest.approx(r.timestamp) for r in mine)
        assert all(r.batch_base_offset <= r.offset <= r.batch_last_offset for r in mine)
        assert all(r.segment_base_offset <= r.batch_base_offset for r in mine)
        assert sum(r.record_size for r in mine) == cluster.log_bytes[tp]
    assert any(r.key is None for r in rows) and any(r.headers for r in rows)


def test_header_mode_agrees_with_record_mode_on_counts_and_bytes(spark, cluster):
    from pyspark.sql import functions as F

    records = (
        _rows(spark, cluster.root)
        .groupBy("broker", "topic", "partition")
        .agg(F.count("*").alias("n"), F.sum("record_size").alias("bytes"))
        .collect()
    )
    batches = _rows(spark, cluster.root, headers_only="true").collect()

    by_replica = {}
    for b in batches:
        n, size = by_replica.get((b.broker, b.topic, b.partition), (0, 0))
        by_replica[(b.broker, b.topic, b.partition)] = (n + b.record_count, size + b.batch_size)
    assert {(r.broker, r.topic, r.partition): (r.n, r.bytes) for r in records} == by_replica
    assert set(by_replica) == {
        (b, tp.topic, tp.partition) for b in (1, 2, 3) for tp in cluster.records
    }
    for (_, topic, partition), (n, size) in by_replica.items():
        tp = TopicPartition(topic, partition)
        assert (n, size) == (len(cluster.records[tp]), cluster.log_bytes[tp])
    assert {b.codec for b in batches} == {"none", "gzip", "lz4", "zstd"}
    assert all(b.crc_valid for b in batches)
    assert all(b.last_offset - b.base_offset + 1 == b.record_count for b in batches)


def test_broker_ids_come_from_meta_properties_else_the_directory_name_else_null(
    spark, cluster, tmp_path
):
    import shutil

    anonymous = tmp_path / "disk-a" / "orders-0"
    shutil.copytree(synthetic.log_dir_of(cluster.root, 3) / "orders-0", anonymous)
    shutil.copytree(cluster.root, tmp_path / "cluster")

    rows = _rows(spark, tmp_path, headers_only="true").select("broker", "log_dir").distinct()
    found = {(r.broker, os.path.relpath(r.log_dir, tmp_path)) for r in rows.collect()}

    assert found == {
        (1, "cluster/broker-1/data"),
        (2, "cluster/broker-2/data"),  # no meta.properties: named by its broker-2 parent
        (3, "cluster/broker-3/data"),
        (None, "disk-a"),
    }


def test_torn_and_corrupt_tails_end_their_segment_and_nothing_else(spark, tmp_path, caplog):
    batches = {ORDERS0: synthetic.make_batches(ORDERS0, 6, 5)}
    replicas = synthetic.write_replicas(tmp_path, batches, brokers=(1, 2))
    good = len(replicas.records[ORDERS0])
    # Broker 1 was killed mid-write: half a batch at the end of its last segment.
    segment1 = sorted((synthetic.log_dir_of(tmp_path, 1) / "orders-0").glob("*.log"))[-1]
    extra = build_batch([Record(b"k", b"lost" * 20, synthetic.T0)])
    with segment1.open("ab") as out:
        out.write(extra[: len(extra) // 2])
    # Broker 2's last batch has a flipped bit in its payload (CRC mismatch).
    segment2 = sorted((synthetic.log_dir_of(tmp_path, 2) / "orders-0").glob("*.log"))[-1]
    data = bytearray(segment2.read_bytes())
    data[-3] ^= 0xFF
    segment2.write_bytes(bytes(data))

    counts = dict(_rows(spark, tmp_path).groupBy("broker").count().collect())
    headers = _rows(spark, tmp_path, headers_only="true").where("broker = 2").collect()

    assert counts[1] == good
    last_batch = max(h.base_offset for h in headers)
    assert counts[2] == good - sum(h.record_count for h in headers if h.base_offset == last_batch)
    assert [h.crc_valid for h in sorted(headers, key=lambda h: h.base_offset)][-1] is False
    assert all(h.crc_valid for h in headers if h.base_offset != last_batch)


def test_big_segments_are_read_in_byte_ranges_with_the_same_result(spark, cluster):
    path = synthetic.log_dir_of(cluster.root, 1)
    whole = _rows(spark, path)
    split = _rows(spark, path, split_bytes=300)

    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    assert sorted(split.select("topic", "partition", "offset").collect()) == sorted(
        whole.select("topic", "partition", "offset").collect()
    )


# ----------------------------------------------------------------- no Spark needed


def _whole_segments(root) -> list[SegmentSlice]:
    return [piece for group in plan_input_partitions(str(root)) for piece in group]


def _offsets(pieces) -> list[int]:
    out = []
    for piece in pieces:
        for batch in read_slice_records(piece):
            out.extend(batch.column("offset").to_pylist())
    return out


def test_byte_ranges_split_at_batch_boundaries_and_cover_every_record(cluster):
    for segment in _whole_segments(synthetic.log_dir_of(cluster.root, 1)):
        pieces = plan_slices(segment, 200)
        assert pieces[0].start == 0 and pieces[-1].end == segment.end
        assert all(a.end == b.start for a, b in zip(pieces, pieces[1:], strict=False))
        assert _offsets(pieces) == _offsets([segment])


def test_small_segments_are_packed_together_by_log_dir(cluster):
    groups = plan_input_partitions(str(cluster.root), pack_bytes=1 << 20)
    assert len(groups) == 3  # one per log dir: every segment is tiny
    assert {len({p.log_dir for p in group}) for group in groups} == {1}


def test_a_file_truncated_or_deleted_after_planning_does_not_fail_the_read(tmp_path, caplog):
    synthetic.write_replicas(
        tmp_path, {ORDERS0: synthetic.make_batches(ORDERS0, 4, 5)}, brokers=(1,)
    )
    (segment,) = _whole_segments(tmp_path)
    with caplog.at_level(logging.WARNING, logger="spark.decode"):
        os.truncate(segment.path, segment.end // 2)
        truncated = _offsets([segment])
        os.unlink(segment.path)
        gone = _offsets([segment])

    assert 0 < len(truncated) < 20 and truncated == list(range(len(truncated)))
    assert gone == []
    assert "torn tail" in caplog.text and "vanished" in caplog.text


_records = st.lists(
    st.builds(
        Record,
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=200),
        st.integers(synthetic.T0, synthetic.T0 + 10**6),  # inside one segment.ms
        st.lists(
            st.tuples(
                st.text(st.characters(blacklist_categories=("Cs",)), max_size=5),
                st.none() | st.binary(max_size=5),  # a Kafka header's value may be null
            ),
            max_size=2,
        ),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=st.lists(
        st.tuples(_records, st.sampled_from(list(Codec)), st.booleans()), min_size=1, max_size=6
    ),
    torn=st.integers(0, 60),
)
def test_slice_reader_matches_the_record_decoder_on_any_log(tmp_path_factory, batches, torn):
    from client.protocol.records import decode_batches

    root = tmp_path_factory.mktemp("prop")
    built = [  # either payload format: Tributary's producer's or a Kafka client's
        (build_kafka_batch if kafka else build_batch)(records, codec=codec)
        for records, codec, kafka in batches
    ]
    replicas = synthetic.write_replicas(root, {ORDERS0: built}, brokers=(1,), config=LogConfig())
    (segment,) = _whole_segments(root)
    data = open(segment.path, "rb").read()
    expected = decode_batches(data)
    assert [r.value for r in expected] == [r.value for r in replicas.records[ORDERS0]]
    if torn:  # a torn tail: only whole batches before it come back
        with open(segment.path, "ab") as out:
            out.write(built[-1][: min(torn, len(built[-1]) - 1)])
        segment = segment._replace(end=os.path.getsize(segment.path))

    rows = [row for batch in read_slice_records(segment) for row in batch.to_pylist()]
    headers = [row for batch in read_slice_batches(segment) for row in batch.to_pylist()]
    unchecked = [
        row for batch in read_slice_batches(segment, verify_crc=False) for row in batch.to_pylist()
    ]  # reads only headers

    assert [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in rows] == [
        (r.offset, r.timestamp, r.key, r.value) for r in expected
    ]
    assert [[(h["key"], h["value"]) for h in r["headers"]] for r in rows] == [
        list(r.headers) for r in expected
    ]
    assert sum(r["record_size"] for r in rows) == len(data)
    assert sum(h["batch_size"] for h in headers) == len(data)
    assert sum(h["record_count"] for h in headers) == len(rows)
    assert [(h["base_offset"], h["batch_size"]) for h in unchecked] == [
        (h["base_offset"], h["batch_size"]) for h in headers
    ]


def test_pushed_down_filters_give_the_same_rows_and_narrow_the_plan(spark, cluster):
    import datetime as dt

    from pyspark.sql import functions as F

    from spark.datasource import PushdownReader, TributaryReader

    everything = _rows(spark, cluster.root)
    middle = sorted(r.offset for r in cluster.records[ORDERS0])[len(cluster.records[ORDERS0]) // 2]
    since = dt.datetime.fromtimestamp((synthetic.T0 + 6_000) / 1000, dt.UTC)
    cases = [
        (F.col("topic") == "orders") & (F.col("partition") == 1),
        F.col("partition").isin(0) & (F.col("offset") >= middle) & (F.col("broker") == 2),
        (F.col("offset") > 3) & (F.col("offset") <= middle),
        (F.col("time") >= F.lit(since)) & (F.col("timestamp") < synthetic.T0 + 9_000),
        F.col("topic") == "nope",
        F.col("partition") != 1,  # reaches the reader as Not(EqualTo(...))
    ]
    columns = ["broker", "topic", "partition", "offset", "timestamp", "key", "value"]
    for condition in cases:
        pushing = _rows(spark, cluster.root, pushdown="true")  # one DataFrame per query
        pushed = sorted(map(tuple, pushing.where(condition).select(*columns).collect()))
        plain = sorted(map(tuple, everything.where(condition).select(*columns).collect()))
        assert pushed == plain, condition
    # Without the option the DataFrame is reused across filtered and unfiltered queries.
    assert everything.count() == 3 * sum(len(r) for r in cluster.records.values())

    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In

    segments = sorted((synthetic.log_dir_of(cluster.root, 1) / "orders-0").glob("*.log"))
    last_base = int(segments[-1].stem)
    reader = PushdownReader({"path": str(cluster.root), "pushdown": "true"})
    left = list(
        reader.pushFilters(
            [
                EqualTo(("partition",), 0),
                In(("broker",), (1,)),
                GreaterThanOrEqual(("offset",), last_base),
            ]
        )
    )
    assert [type(f).__name__ for f in left] == ["GreaterThanOrEqual"]  # re-checked by Spark
    planned = [piece for group in reader.partitions() for piece in group.slices]
    whole = [
        piece
        for group in TributaryReader({"path": str(cluster.root)}).partitions()
        for piece in group.slices
    ]
    assert {(p.broker, p.topic, p.partition) for p in planned} == {(1, "orders", 0)}
    assert [p.segment_base_offset for p in planned] == [last_base]  # earlier ones left out
    assert len(planned) < len([p for p in whole if (p.broker, p.partition) == (1, 0)])


def test_a_negated_filter_is_left_to_spark(tmp_path):
    """`partition <> 1` reaches the reader as `Not(EqualTo(...))`, a filter with no
    `attribute` (mypy found `_push` reading one from every filter): it narrows nothing
    and is handed back for Spark to apply."""
    from pyspark.sql.datasource import EqualTo, Not

    from spark.datasource import PushdownReader

    reader = PushdownReader({"path": str(tmp_path), "pushdown": "true"})
    not_one = Not(EqualTo(("partition",), 1))
    assert list(reader.pushFilters([not_one])) == [not_one]
    assert reader.partition_ids is None
