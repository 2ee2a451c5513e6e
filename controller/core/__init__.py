"""The controller's decision core: pure, sans-IO (no trio, kazoo, sockets, clocks or
threads; a test checks it).

`context` holds the cluster picture, `election` the four leader election strategies,
`decisions` / `shutdown` / `reassignment` / `rebalance` / `deletion` turn events into
`StateChange` values (`state_change`: new partition state znodes to write, before
ZooKeeper has accepted them), and `requests` builds the LeaderAndIsr / UpdateMetadata /
StopReplica requests to send. The shell (controller/*.py)
carries those out against ZooKeeper and the brokers.
"""
