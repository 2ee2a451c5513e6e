"""Small column helpers shared by the analytics, safe under Spark 4's ANSI mode.

How it works: ANSI mode turns an overflowing conversion into a failed job. Timestamps in
logs and events come from producers and other processes, so they are converted only
when they fit a Spark timestamp (year 1970 to 9999); anything else becomes null.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["MAX_TIMESTAMP_MS", "millis_to_time"]

MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def millis_to_time(column: str | Column) -> Column:
    """Milliseconds since the epoch as a timestamp; null when negative or out of range."""
    millis = F.col(column) if isinstance(column, str) else column
    return F.when(millis.between(0, MAX_TIMESTAMP_MS), F.timestamp_millis(millis))
