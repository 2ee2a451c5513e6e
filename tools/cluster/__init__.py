"""Local clusters as child processes: ZooKeeper, controllers and brokers, by pid."""
