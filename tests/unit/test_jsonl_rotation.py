"""`JsonLinesFile` rotates by size and keeps a bounded number of old files (issue 15)."""

from __future__ import annotations

import json

from server_common.jsonl import JsonLinesFile


def test_rotates_by_size_and_keeps_the_newest(tmp_path):
    path = tmp_path / "metrics.jsonl"
    out = JsonLinesFile(path, max_bytes=100, keep=2)
    for i in range(40):
        out.append({"n": i, "pad": "x" * 20})  # about 35 bytes a line: a file per 3 lines
    out.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["metrics.jsonl", "metrics.jsonl.1", "metrics.jsonl.2"]
    numbers = []
    for name in ["metrics.jsonl.2", "metrics.jsonl.1", "metrics.jsonl"]:
        numbers += [json.loads(line)["n"] for line in (tmp_path / name).read_text().splitlines()]
    assert numbers == list(range(40 - len(numbers), 40))  # oldest dropped, order kept
    assert all((tmp_path / n).stat().st_size <= 100 + 40 for n in names)


def test_a_reopened_file_counts_what_it_holds(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("x" * 90 + "\n")
    out = JsonLinesFile(path, max_bytes=100, keep=1)
    out.append({"a": 1, "b": "yy"})
    out.close()
    assert (tmp_path / "events.jsonl.1").exists() and path.read_text() == ""
