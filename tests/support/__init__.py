"""Test-only fakes and harnesses: an in-memory ZooKeeper (`memory_zk`) and network
(`memory_network`), the in-process cluster of real brokers and controller (`cluster`)
with its fault-injecting wrapper (`faults`) and the principal-per-client-id seam
(`principals`), a recording broker for controller tests
(`recording_broker`), a real ZooKeeper session's expiry on demand (`zk_sessions`), hostile
connections and a process's memory cap (`hostile`), hostile SASL clients
(`sasl_hostile`) and a burst of large requests with its RSS figures (`memory_burst`).
Nothing outside `tests/` imports them."""
