"""The one error type of the command line: a failure to report to the user as one line.

Command modules raise `CliError`; `tools.cli.main` prints it as `error: <message>` on
stderr and exits with its code. It lives apart from `tools.cli` so that the command
modules (which `tools.cli` imports) never import the entry point back.
"""

from __future__ import annotations


class CliError(Exception):
    """A failure to report to the user as one line, with the process's exit code."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
