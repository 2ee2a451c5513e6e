"""`tributary analytics --data DIR --out OUT [--master URL]`: the Spark analytics job.

Reads broker segment logs, events and metrics under DIR (a broker's log dir, or a folder
holding several, such as the local cluster's directory) and writes Parquet tables and
`OUT/report.html` (see `spark/job.py`). Needs the `spark` extra (PySpark and Java).
A missing data dir, no logs found or a missing PySpark is one line and a non-zero exit.
"""

from __future__ import annotations

import importlib.util
import logging

from tools.errors import CliError

__all__ = ["register"]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "analytics",
        help="Spark analytics over broker logs, events and metrics (Parquet + HTML report)",
        description="Spark analytics over broker segment logs, events and metrics: Parquet "
        "tables and an HTML report with plots, including a replica consistency audit.",
    )
    from spark.job import add_arguments  # stdlib-only at import: cheap, no PySpark

    add_arguments(parser)
    parser.set_defaults(handler=_run)


def _run(args) -> int:
    if importlib.util.find_spec("pyspark") is None:
        raise CliError("analytics needs PySpark: pip install 'tributary[spark]'")
    from spark.job import JobError, run_from_args

    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("spark").setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        return run_from_args(args)
    except JobError as exc:
        raise CliError(str(exc)) from None
