"""Rotated `events.jsonl` / `metrics.jsonl` files are read too, oldest first."""

from __future__ import annotations

import pytest

from server_common.jsonl import JsonLinesFile
from spark.events import read_broker_events
from spark.layout import EVENTS_FILE, find_files

pytestmark = [pytest.mark.spark]


def _write_rotating(path, count: int) -> None:
    log = JsonLinesFile(path, max_bytes=200, keep=5)  # the broker's own writer, tiny files
    for i in range(count):
        log.append({"ts": 1_700_000_000_000 + i, "broker": 1, "event": "isr_shrink", "n": i})
    log.close()


def test_rotated_files_are_found_oldest_first(tmp_path):
    broker = tmp_path / "broker-1" / "data"
    _write_rotating(broker / EVENTS_FILE, 12)
    (broker / "events.jsonl.x").write_text("not a rotation\n")
    (broker / "other.jsonl.1").write_text("{}\n")
    found = find_files(tmp_path, EVENTS_FILE)
    names = [p.rsplit("/", 1)[1] for p in found]
    assert len(names) > 2, "the test wants several rotations"
    assert names[-1] == EVENTS_FILE
    numbers = [int(n.rsplit(".", 1)[1]) for n in names[:-1]]
    assert numbers == sorted(numbers, reverse=True)  # .3, .2, .1, then the live file
    # Reading them in that order gives the records in the order they were written.
    lines = [line for p in found for line in open(p).read().splitlines()]
    written = [int(line.split('"n":')[1].rstrip("}")) for line in lines]
    assert written == sorted(written) and written[-1] == 11


def test_the_job_reads_every_rotated_event(spark, tmp_path):
    _write_rotating(tmp_path / "broker-1" / "data" / EVENTS_FILE, 12)
    rows = read_broker_events(spark, str(tmp_path)).orderBy("ts").collect()
    assert [r.ts - 1_700_000_000_000 for r in rows] == list(range(12))
    assert any(r.source_file.endswith(".1") for r in rows)
