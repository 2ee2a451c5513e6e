"""Failed authentications and authorization denials over time, from a recorded
`events.jsonl` per broker (tests/spark/data/security: the lines as broker/server.py and
broker/handlers/authorization_check.py write them, among other events, with a torn last
line): the per-minute table by principal and address, and its report section and plot."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from spark.events import read_broker_events
from spark.incidents import failure_timeline
from spark.report import SECURITY_LANE, ReportData, Table, render_report
from spark.security import UNAUTHENTICATED, security_per_minute

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

RECORDED = Path(__file__).parent / "data" / "security"
T0 = 1_764_249_960_000  # the recording's first minute


@pytest.fixture(scope="module")
def per_minute(spark) -> pd.DataFrame:
    frame = security_per_minute(read_broker_events(spark, str(RECORDED))).toPandas()
    return frame.sort_values(["minute_ts", "kind", "principal"]).reset_index(drop=True)


def test_failures_and_denials_are_counted_per_minute_principal_and_address(per_minute):
    rows = [
        (r.minute_ts - T0, r.kind, r.principal, r.address, r.count, r.events)
        for r in per_minute.itertuples()
    ]
    assert rows == [
        # Two failed logins (no principal: the login did not succeed), one per connection.
        (0, "authentication_failed", UNAUTHENTICATED, "10.0.0.9:51000", 1, 1),
        (0, "authentication_failed", UNAUTHENTICATED, "10.0.0.9:51002", 1, 1),
        # Two events written, 41 more suppressed by the broker's rate limit.
        (0, "authorization_denied", "User:bob", "10.0.0.7", 43, 2),
        (60_000, "authentication_failed", UNAUTHENTICATED, "10.0.0.9:51010", 1, 1),
        (60_000, "authorization_denied", "User:bob", "10.0.0.7", 1, 1),
        (60_000, "authorization_denied", "User:eve", "10.0.0.66", 6, 1),  # other_suppressed
        (120_000, "authentication_failed", UNAUTHENTICATED, "10.0.0.9:51011", 1, 1),
    ]
    resources = {(r.minute_ts - T0, r.principal): r.resources for r in per_minute.itertuples()}
    assert resources[(0, "User:bob")] == "Topic:secret Write"
    assert resources[(60_000, "User:eve")] == "Cluster:kafka-cluster Alter"
    assert resources[(0, UNAUTHENTICATED)] == ""
    # Every minute is a timestamp for the plot's axis.
    assert per_minute.minute.notna().all()


def test_the_report_shows_them_as_a_table_and_per_minute_on_the_time_axis(per_minute, tmp_path):
    timeline = failure_timeline([], [], T0 + 131_000)
    data = ReportData(
        data_dir=str(RECORDED),
        summary={},
        security=Table(per_minute, len(per_minute)),
        timeline=timeline,
    )
    path, plots = render_report(tmp_path, data)
    assert plots["security"].time_axis and plots["security"].png
    # On the failure timeline too: a lane of the minutes with failures or denials.
    assert plots["timeline"].lanes == [SECURITY_LANE]
    page = path.read_text()
    assert "Security: failed authentications and authorization denials" in page
    assert "User:eve" in page and "10.0.0.66" in page and "Topic:secret Write" in page
    assert "10.0.0.9:51011" in page  # the last minute's failed login


def test_no_security_events_no_plot(spark, tmp_path):
    empty = security_per_minute(read_broker_events(spark, str(tmp_path))).toPandas()
    assert empty.empty
    plots = render_report(tmp_path, ReportData(data_dir="x", summary={}))[1]
    assert "security" not in plots
