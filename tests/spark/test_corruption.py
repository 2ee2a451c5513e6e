"""The data source's error table (`corrupt_batches=true`): a damaged batch is a row, never
decoded records (no Spark session needed: the reader's arrow output is checked)."""

from __future__ import annotations

from client.protocol.records import Record, assign_offsets, build_batch
from spark.corruption import ARROW_CORRUPT_BATCH_SCHEMA, read_slice_corruption
from spark.datasource import TributaryDataSource
from spark.decode import SegmentSlice, read_slice_records


def test_a_flipped_value_is_an_error_row_and_no_record(tmp_path):
    data = bytearray()
    for i in range(3):
        batch, _, _ = assign_offsets(build_batch([Record(None, b"value-%d" % i, 1)]), i, 0)
        data += batch
    position = data.index(b"value-1")
    data[position] ^= 0x01
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    piece = SegmentSlice(str(path), str(tmp_path), 1, "t", 0, 0, 0, len(data))
    [table] = list(read_slice_corruption(piece))
    assert table.schema == ARROW_CORRUPT_BATCH_SCHEMA
    row = table.to_pylist()[0]
    assert (row["broker"], row["topic"], row["base_offset"], row["last_offset"]) == (1, "t", 1, 1)
    assert row["stored_crc"] != row["computed_crc"] and row["skipped_bytes"] > 0
    values = [v for t in read_slice_records(piece) for v in t.column("value").to_pylist()]
    assert values == [b"value-0"]  # the damaged value never comes out
    source = TributaryDataSource({"corrupt_batches": "true"})
    assert source.schema().fieldNames()[-1] == "error"
