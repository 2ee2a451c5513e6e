"""Subcommands of the `tributary` CLI, one module per command group.

Each module exposes `register(subparsers)` which adds its parsers and sets
`handler=<function(args) -> int>` on them. `tools.cli` imports the modules listed in
`COMMAND_MODULES`; a module that fails to import is reported as one line, not a crash.

- `servers.py`: `tributary broker|controller`, a server in the foreground;
- `cluster.py`: `tributary cluster ...`, a local cluster of real processes; `watch.py`:
  `tributary cluster watch`, its live view;
- `topics.py`, `configs.py`, `partitions.py` (reassignments), `leaders.py` (preferred
  elections), `groups.py`, `delete_records.py`, `log_dirs.py`: the admin commands, in
  the manner of Kafka's scripts;
- `produce.py`, `consume.py` (with `record_format.py`, how a record is printed),
  `get_offsets.py`: the data commands;
- `perf.py`: the perf tools; `verifiable.py`: Kafka's verifiable producer and consumer;
- `dump_log.py`: a segment file's batches and records; `analytics.py`: the Spark job;
- `common.py`: helpers the data and admin commands share (running a command with
  one-line errors, the `--bootstrap-server` option).
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
