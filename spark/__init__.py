"""Offline analytics over broker segment logs, events and metrics with PySpark.

- `datasource`: `spark.read.format("tributary").load(dir)`, segment logs as a DataFrame
  (one row per record, or per batch with `headers_only`); `register(spark)`.
- `decode`: reading batches out of segment byte ranges (torn tails, live files) into
  pyarrow columns; `layout`: finding log dirs, partitions, checkpoints, JSON-lines files.
- `schemas`: the declared schemas of everything read; `events`: the events/metrics readers.
- `corruption`: corrupt batches as rows (the data source's error table); `lso`: a
  replica's last stable offset from its batch headers (read_committed's bound).
- `throughput`, `timeline`, `latency`, `audit`, `groups` (committed offsets and lag from
  `__consumer_offsets`): the analytics, all in Spark; `columns`: column helpers they
  share, safe under ANSI mode; `security`: failed logins and authorization denials
  per minute, principal and address.
- `incidents`: the failure timeline (incidents, lanes, event markers, recovery times),
  a pure replay of the state-change event rows on the driver.
- `report`: the HTML report and its plots; `session`: the SparkSession; `job`: the job
  (`tributary analytics`, `spark-submit spark/job.py`).

Only `layout`, `decode` (and `schemas`, `datasource`, `lso`) run on executors. It reads the
wire format (`client.protocol.records`) and the log store's checkpoint files
(`broker.core.log`); nothing here is imported by the broker or the controller, and only
the `tributary analytics` command (`tools`) imports it.
"""
