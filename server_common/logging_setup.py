"""Logging for the server processes: one line per event, to stderr (the launcher
redirects it to a file per process)."""

from __future__ import annotations

import logging
import os


def configure_logging(name: str, level: str | None = None) -> None:
    level = (level or os.environ.get("TRIBUTARY_LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format=f"%(asctime)s %(levelname)s [{name}] %(name)s: %(message)s",
    )
    # kazoo is chatty at INFO about every reconnect attempt.
    logging.getLogger("kazoo.client").setLevel(logging.WARNING)
