"""Subcommands of the `tributary` CLI, one module per command group.

Each module exposes `register(subparsers)` which adds its parsers and sets
`handler=<function(args) -> int>` on them. `tools.cli` imports the modules listed in
`COMMAND_MODULES`; a module that fails to import is reported as one line, not a crash.
"""

COMMAND_MODULES: list[str] = [
    "servers",
    "cluster",
    "topics",
    "produce",
    "consume",
    "groups",
    "leaders",
    "partitions",
    "analytics",
    "get_offsets",
    "dump_log",
    "log_dirs",
    "configs",
    "delete_records",
    "perf",
    "verifiable",
]
