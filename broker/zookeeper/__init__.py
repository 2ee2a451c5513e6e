"""The broker's side of ZooKeeper (placeholder map)."""
