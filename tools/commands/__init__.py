"""Subcommands of the `tributary` CLI, one module (or package) per command group.

Each module exposes `register(subparsers)` which adds its parsers and sets
`handler=<function(args) -> int>` on them. `tools.cli` imports the modules listed in
`COMMAND_MODULES`; a module that fails to import is reported as one line, not a crash.

- `servers.py`: `broker` and `controller`, a server in the foreground;
- `cluster.py`: `cluster ...`, a local cluster of real processes; `watch.py` its live
  view (`cluster watch`), whose command line is `watch_args.py` (so that `watch.py`
  loads only when the command runs);
- `topics.py`, `configs.py`, `partitions.py`, `leaders.py`: topics, their configs,
  reassignments and preferred leader elections (kafka-topics.sh, kafka-configs.sh,
  kafka-reassign-partitions.sh, kafka-leader-election.sh); `user_configs.py`:
  `configs ... --entity-type users`, users' SCRAM credentials; `quota_configs.py`:
  `configs ... --entity-type clients|users`, client quotas;
- `produce.py`, `consume.py` (with `record_format.py`, how a record is printed):
  the console producer and consumer; `producer_props.py`: their `--producer-props`
  (also perf produce's); `consumer_props.py`: consume's `--consumer-props`
  (`client.rack`); `produce_txn.py`: `produce --transactional-id` (records written in
  transactions, committed or `--abort`ed);
- `groups/`: `groups list|describe|reset-offsets|delete` (kafka-consumer-groups.sh; its
  own docstring names its modules);
- `acls.py`: `acls --add|--remove|--list` (kafka-acls.sh);
- `transactions.py`: `transactions list|describe` (kafka-transactions.sh, KIP-664);
- `get_offsets.py`, `delete_records.py`, `dump_log.py`, `log_dirs.py`: offsets, record
  deletion, a segment's contents, the brokers' log dirs;
- `perf.py`, `verifiable.py`: Kafka's perf tools and verifiable producer/consumer;
- `analytics.py`: the Spark analytics job;
- `common.py`: helpers shared by the commands (bootstrap option, client options,
  running a coroutine).
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
    "acls",
    "delete_records",
    "perf",
    "verifiable",
    "transactions",
]
