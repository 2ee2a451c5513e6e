"""The broker's sans-IO core: log store, partitions, replicas, purgatories.

Nothing under this package imports trio, kazoo or socket (a test checks it): time comes
in as `now_ms` arguments and decisions go out as values for the shell to carry out.
"""
