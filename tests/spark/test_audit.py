"""The replica consistency audit finds divergence and missing acknowledged ranges, and
nothing on identical replicas."""

from __future__ import annotations

import pandas as pd
import pytest

from broker.core.log import LogConfig
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition
from spark.audit import MISSING_SCHEMA, missing_ranges
from tests.spark import synthetic

pytestmark = [
    pytest.mark.spark,
    # PySpark 4.3's own pandas conversions warn under pandas 3: noise, not our code.
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

SAME = TopicPartition("same", 0)
DIVERGED = TopicPartition("diverged", 0)
SHORT = TopicPartition("short", 0)
HW = 50  # 10 batches of 5 records
SEGMENTS = LogConfig(segment_bytes=600, index_interval_bytes=128)  # about 2 batches each


@pytest.fixture(scope="module")
def audited(tmp_path_factory, spark):
    """Three replicas of three partitions: `same` identical; `diverged` where broker 3
    wrote a different batch at offsets 35-39; `short` where broker 2 was truncated to 30
    (a lagging follower) and broker 3 lost a middle segment (a hole)."""
    from spark.audit import audit, replica_inventory, with_record_hash
    from spark.layout import find_log_dirs, read_checkpoints

    root = tmp_path_factory.mktemp("audit")
    synthetic.write_replicas(
        root,
        {tp: synthetic.make_batches(tp, 10, 5) for tp in (SAME, DIVERGED, SHORT)},
        config=SEGMENTS,
    )
    log = synthetic.open_log(root, 3, DIVERGED, SEGMENTS)
    assert log.truncate_to(35)
    other = [Record(b"other", b"a different value", synthetic.T0 + 7_000 + j) for j in range(5)]
    log.append_as_leader(build_batch(other), 1, now_ms=0)
    for batch in synthetic.make_batches(DIVERGED, 10, 5)[8:]:
        log.append_as_leader(batch, 1, now_ms=0)
    assert log.log_end_offset == HW
    log.close()

    log = synthetic.open_log(root, 2, SHORT, SEGMENTS)
    log.truncate_to(30)
    log.close()
    hws = {SAME: HW, DIVERGED: HW, SHORT: 30}
    synthetic.write_checkpoints(synthetic.log_dir_of(root, 2), high_watermarks=hws)
    short3 = synthetic.log_dir_of(root, 3) / "short-0"
    segments = sorted(short3.glob("*.log"))
    assert len(segments) >= 3
    lost = segments[1]
    hole = (int(lost.stem), int(segments[2].stem))
    for suffix in (".log", ".index", ".timeindex"):
        lost.with_suffix(suffix).unlink(missing_ok=True)

    log_dirs = find_log_dirs(root)
    records = with_record_hash(spark.read.format("tributary").load(str(root))).cache()
    result = audit(records, replica_inventory(spark, log_dirs, read_checkpoints(log_dirs)))
    frames = {
        "partitions": result.partitions.toPandas().set_index("topic"),
        "replicas": result.replicas.toPandas(),
        "divergence": result.divergence.toPandas(),
        "missing": result.missing.toPandas(),
    }
    result.unpersist()
    records.unpersist()
    frames["hole"] = hole
    return frames


def test_identical_replicas_are_reported_consistent(audited):
    same = audited["partitions"].loc["same"]
    assert same.status == "ok"
    assert (same.hw, same.offsets_below_hw, same.offsets_on_all_replicas) == (HW, HW, HW)
    assert same.divergent_offsets == 0 and same.hole_offsets == 0 and same.lagging_offsets == 0
    assert not (audited["missing"]["topic"] == "same").any()
    assert not (audited["divergence"]["topic"] == "same").any()


def test_a_rewritten_record_is_found_at_exactly_its_offsets(audited):
    diverged = audited["partitions"].loc["diverged"]
    assert diverged.status == "divergent"
    assert diverged.divergent_offsets == 5 and diverged.first_divergent_offset == 35
    assert diverged.offsets_on_all_replicas == HW  # every replica has every offset...
    rows = audited["divergence"][audited["divergence"]["topic"] == "diverged"]
    assert sorted(rows["offset"]) == [35, 36, 37, 38, 39]  # ...but not the same records there
    for copies in rows["replicas"]:
        by_broker = {c["broker"]: c["record_hash"] for c in copies}
        assert set(by_broker) == {1, 2, 3}
        assert by_broker[1] == by_broker[2] != by_broker[3]
        assert {c["leader_epoch"] for c in copies if c["broker"] == 3} == {1}
        assert {c["replica_hw"] for c in copies} == {HW}  # each replica took it as committed
    assert set(rows["distinct_values"]) == {2}


def test_a_truncated_replica_and_a_lost_segment_are_missing_ranges(audited):
    short = audited["partitions"].loc["short"]
    assert short.status == "missing"
    missing = audited["missing"][audited["missing"]["topic"] == "short"]
    ranges = {(r.broker, r.start_offset, r.end_offset, r.kind) for r in missing.itertuples()}
    start, end = audited["hole"]
    assert ranges == {(2, 30, HW, "lagging"), (3, start, end, "hole")}
    assert short.lagging_offsets == HW - 30 and short.hole_offsets == end - start

    replicas = audited["replicas"]
    replicas = replicas[replicas["topic"] == "short"].set_index("broker")
    assert replicas.loc[2, "log_end_offset"] == 30 and replicas.loc[2, "lag_to_max_leo"] == 20
    assert replicas.loc[1, "log_end_offset"] == HW and replicas.loc[1, "missing_offsets"] == 0
    assert replicas.loc[3, "hole_offsets"] == end - start
    assert set(replicas["partition_hw"]) == {HW}  # the highest checkpointed HW


# ----------------------------------------------------------------- missing_ranges alone


def _replica(log_dir, log_start, leo, hw, broker=None):
    return dict(topic="t", partition=0, log_dir=log_dir, broker=broker, log_start=log_start,
                leo=leo, hw=hw, base_offset=None, last_offset=None)  # fmt: skip


def _batch(log_dir, base, last):
    return dict(topic="t", partition=0, log_dir=log_dir, broker=None, log_start=None, leo=None,
                hw=None, base_offset=base, last_offset=last)  # fmt: skip


def _ranges(rows) -> set[tuple]:
    frame = missing_ranges(pd.DataFrame(rows))
    assert list(frame.columns) == [c.split()[0] for c in MISSING_SCHEMA.split(", ")]
    return {(r.log_dir, r.start_offset, r.end_offset, r.kind) for r in frame.itertuples()}


def test_offsets_below_a_replicas_log_start_are_not_missing():
    rows = [
        _replica("a", 0, 30, 30),
        _replica("b", 20, 30, None),  # retention deleted [0, 20) here: fine
        _batch("a", 0, 9), _batch("a", 10, 19), _batch("a", 20, 29),
        _batch("b", 20, 29),
    ]  # fmt: skip
    assert _ranges(rows) == set()


def test_offsets_no_replica_holds_are_absent_everywhere():
    rows = [
        _replica("a", 0, 40, 40),
        _replica("b", 0, 40, 40),
        _batch("a", 0, 9), _batch("a", 30, 39),
        _batch("b", 0, 9), _batch("b", 30, 39),
    ]  # fmt: skip
    assert _ranges(rows) == {(None, 10, 30, "absent_everywhere")}


def test_without_a_checkpointed_hw_nothing_is_called_missing():
    rows = [_replica("a", 0, 10, None), _replica("b", 0, 0, None), _batch("a", 0, 9)]
    assert _ranges(rows) == set()


def test_a_replica_with_no_data_at_all_lags_by_everything_acknowledged():
    rows = [_replica("a", 0, 10, 10), _replica("b", 0, 0, None), _batch("a", 0, 9)]
    assert _ranges(rows) == {("b", 0, 10, "lagging")}
