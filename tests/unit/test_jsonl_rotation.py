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


def test_rotation_settings_are_server_configs(tmp_path):
    from broker.config import BrokerConfig
    from controller.config import ControllerConfig
    from server_common.jsonl import DEFAULT_KEEP, DEFAULT_MAX_BYTES, Rotation
    from server_common.properties import ConfigError

    broker = BrokerConfig.load(
        None, {"broker.id": "1", "jsonl.file.max.bytes": "2048", "jsonl.file.backups": "0"}
    )
    assert Rotation.from_config(broker) == Rotation(2048, 0)
    controller = ControllerConfig.load(None, {"controller.id": "1001"})
    assert Rotation.from_config(controller) == Rotation(DEFAULT_MAX_BYTES, DEFAULT_KEEP)
    try:
        BrokerConfig.load(None, {"broker.id": "1", "jsonl.file.max.bytes": "10"})
    except ConfigError as exc:
        assert "jsonl.file.max.bytes" in str(exc)
    else:
        raise AssertionError("a 10-byte rotation size was accepted")
    # keep=0: the full file is dropped, never renamed.
    out = Rotation(1024, 0).open(tmp_path / "events.jsonl")
    for i in range(100):
        out.append({"n": i, "pad": "x" * 40})
    out.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]
