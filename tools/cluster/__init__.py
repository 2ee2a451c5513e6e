"""Local clusters as child processes: ZooKeeper, controllers and brokers, by pid.

- `launcher.py`: `LocalCluster`, which lays out a cluster directory and starts, stops,
  kills and restarts its processes (`tributary cluster up|down|kill|restart`);
- `state.py`: the cluster's state file (`cluster.json`: pids, ports, log paths), how
  every other command finds the cluster;
- `secure.py`: `cluster up --secure`: every listener SASL_SSL, the authorizer on, the
  passwords and `admin.properties`, and the properties every command then uses;
- `pki.py`: that cluster's CA and certificate (the `cryptography` library);
- `zookeeper.py`: a real ZooKeeper server (Debian's jar) as a child process, alone or
  as a member of an ensemble;
- `ensemble.py`: a ZooKeeper ensemble (3 or 5 servers) and waiting for its quorum;
- `zk_processes.py`: the launcher's ZooKeeper processes (`zookeeper` or `zookeeper-1`..N):
  their saved ports, starting one, waiting for the quorum;
- `inspect.py`: the cluster's state read straight from ZooKeeper (`cluster status`,
  `watch`, tests);
- `watch_view.py`: `tributary cluster watch`'s pure half: snapshots, the events between
  them, rendering.
"""
