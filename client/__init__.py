"""Tributary client side: the wire protocol, producer, consumer, admin and the CLI.

The broker and controller depend on `client.protocol`; nothing here depends on them
(Kafka keeps the same direction between its clients and core modules).
"""

__version__ = "0.1.0"
