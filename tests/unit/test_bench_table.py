"""The benchmark table: history, the delta against the last run, the README's table."""

from __future__ import annotations

from dataclasses import asdict

from tests.bench.table import (
    BEGIN_MARKER,
    END_MARKER,
    Row,
    append_run,
    previous_values,
    render,
    update_readme,
)


def test_the_readme_table_shows_each_rows_latest_figure_and_is_rewritten_in_place(tmp_path):
    history = tmp_path / "history.jsonl"
    append_run(
        [Row("produce", 100.0, "records/s"), Row("ingest", 50.0, "MiB/s", "disk", 100.0, ">= 0.5")],
        history,
    )
    append_run([Row("produce", 250.0, "records/s")], history)  # a partial run
    assert previous_values(history) == {"produce": 250.0, "ingest": 50.0}
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\n{BEGIN_MARKER}\nold table\n{END_MARKER}\n\nafter\n")
    assert update_readme(readme, history)
    text = readme.read_text()
    assert "old table" not in text and text.endswith(f"{END_MARKER}\n\nafter\n")
    assert "| produce | 250.0 records/s |" in text
    assert "| ingest | 50.0 MiB/s | disk 100.0 | 0.50 | >= 0.5 ok |" in text
    assert "Machine 1: " in text
    assert update_readme(readme, history) and readme.read_text() == text  # idempotent


def test_a_readme_without_markers_is_left_alone(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("no table here\n")
    assert not update_readme(readme, tmp_path / "history.jsonl")
    assert readme.read_text() == "no table here\n"


def test_the_printed_table_says_missed_targets_and_the_change_since_last_run():
    rows = [Row("e2e p99", 20.0, "ms", target="<= 10"), Row("consume", 1.2e6, "records/s")]
    text = render(rows, {"consume": 1.0e6})
    assert "<= 10 MISSED" in text and "+20%" in text
    assert asdict(rows[0])["target"] == "<= 10"
