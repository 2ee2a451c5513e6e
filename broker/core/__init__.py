"""The broker's sans-IO core: log store, partitions, replicas, purgatories.

Nothing under this package imports trio, kazoo, socket, time or threading (a test checks
it): time comes in as `now_ms` arguments and decisions go out as values (`IsrUpdate`
effects) or through the callbacks the shell gives it (`wake_at`, `followers_changed`).
The log store does synchronous file I/O with `os`, driven by those calls.
"""
