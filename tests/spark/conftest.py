"""One SparkSession for every Spark test of the run (a JVM takes seconds to start).

Local mode with two cores and four shuffle partitions: the test data is small, and
Spark's default of 200 shuffle partitions would spend most of the time on empty tasks.
Tests that need Spark take the `spark` fixture and are marked `spark`.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark():
    from spark.session import build_session

    session = build_session(
        "local[2]",
        app_name="tributary-tests",
        shuffle_partitions=4,
        conf={"spark.default.parallelism": "4", "spark.driver.memory": "1g"},
    )
    try:
        yield session
    finally:
        session.stop()
