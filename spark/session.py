"""Building the SparkSession the analytics use, with the settings that make it behave.

How it works: `build_session` sets the environment PySpark reads when it launches the JVM
and the Python workers (`SPARK_LOCAL_IP`, `PYSPARK_PYTHON`/`PYSPARK_DRIVER_PYTHON` =
this interpreter: the Python data source runs in workers that must import this project),
turns the web UI and the console progress bar off, starts a local session's JVM with
`FAST_START_JAVA_OPTIONS`, enables Python data source filter pushdown (the `tributary`
source's `pushdown` option needs it), uses UTC for every timestamp
(time buckets mean the same everywhere), quietens Spark's logging to errors, and
registers the `tributary` data source. A non-local master also gets this project's
Python packages shipped to the executors as a zip (`--py-files` style); the executors
still need the same third-party packages installed (msgpack, crc32c, lz4, zstandard,
pyarrow, pandas) and the data path mounted.

Starting a session takes seconds (a JVM): build one and share it.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from spark.datasource import register

__all__ = ["DEFAULT_MASTER", "FAST_START_JAVA_OPTIONS", "build_session", "ship_project_code"]

logger = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
# A local session's one JVM is short-lived and does little (the Python workers decode):
# the client JIT only and the serial collector start it faster (measured on the shared
# 2-core machine: JVM + SparkContext ~8 s instead of ~12 s, first job ~2.5 s instead of
# ~3-6 s; see README). `--conf spark.driver.extraJavaOptions=...` replaces them.
FAST_START_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
_LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
_REPO_ROOT = Path(__file__).resolve().parent.parent
# What executors import: this package, the record format it decodes with and the
# `__consumer_offsets` format.
_SHIPPED_PACKAGES = ("spark", "client/protocol")
_SHIPPED_FILES = (
    "client/__init__.py",
    "broker/__init__.py",
    "broker/core/__init__.py",
    "broker/core/group/offsets_topic.py",
)


def _prepare_environment() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # PySpark 4.3 warns that pandas 3 is not fully supported; what we use (toPandas,
    # applyInPandas on plain numeric and list columns) works, the warning is only noise.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")


def build_session(
    master: str | None = None,
    *,
    app_name: str = "tributary-analytics",
    shuffle_partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
    quiet: bool = True,
) -> SparkSession:
    """A SparkSession for the analytics (`master` None: keep what spark-submit set, else
    `local[*]`), with the `tributary` data source registered."""
    _prepare_environment()
    builder = SparkSession.builder.appName(app_name)
    under_spark_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if master is not None:
        builder = builder.master(master)
    elif not under_spark_submit:
        builder = builder.master(DEFAULT_MASTER)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        # The `tributary` data source narrows its plan by topic, partition, offset, time.
        "spark.sql.python.filterPushdown.enabled": "true",
    }
    if shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    java_options = []
    if quiet and _LOG4J_CONFIG.exists() and not under_spark_submit:
        java_options.append(f"-Dlog4j2.configurationFile=file:{_LOG4J_CONFIG}")
    local = master is None or master.startswith("local")
    if local and not under_spark_submit:
        java_options.extend(FAST_START_JAVA_OPTIONS)
    if java_options:
        settings["spark.driver.extraJavaOptions"] = " ".join(java_options)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if quiet:
        session.sparkContext.setLogLevel("ERROR")
    effective_master = session.sparkContext.master
    # pyspark types `master` Optional; a running context has one (it refuses to start without).
    if not effective_master.startswith("local"):  # type: ignore[union-attr]
        ship_project_code(session)
    register(session)
    return session


def ship_project_code(session: SparkSession) -> Path:
    """Zip this project's packages that executors import and add them to `session`."""
    fd, name = tempfile.mkstemp(prefix="tributary-analytics-", suffix=".zip")
    os.close(fd)
    path = Path(name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in _SHIPPED_FILES:
            archive.write(_REPO_ROOT / name, name)
        for package in _SHIPPED_PACKAGES:
            for source in sorted((_REPO_ROOT / package).rglob("*.py")):
                archive.write(source, source.relative_to(_REPO_ROOT).as_posix())
    session.sparkContext.addPyFile(str(path))
    logger.info("shipped the project's Python code to the executors as %s", path)
    return path
