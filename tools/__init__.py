"""Tributary's tools: the `tributary` command line and the local cluster.

- `cli`: the entry point (`tributary`, or `python -m tools`: `__main__.py`);
  `errors.py`: `CliError`, the one error a command reports to the user as one line;
- `perf_stats.py`: the perf tools' measurements (latency samples, reporting windows, a
  rate limiter), free of I/O;
- `commands/`: one module per command group (topics, produce, consume, leaders,
  partitions, cluster, analytics, and `broker`/`controller` to run a server);
- `cluster/`: the local-cluster launcher (processes by pid), the ZooKeeper process
  runner, the cluster inspector and the `cluster watch` view.

The top layer: it may use the client library, the servers and the Spark job; nothing
imports it except tests (Kafka keeps its command-line tools apart the same way).
"""
