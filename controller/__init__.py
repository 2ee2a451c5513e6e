"""Tributary controller: pure election and cluster-state logic plus a Trio/ZooKeeper shell."""
