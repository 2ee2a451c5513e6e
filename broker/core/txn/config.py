"""The transaction coordinator's settings: Kafka's names, defaults and bounds.

How it works: `TXN_CONFIG_KEYS` are the broker config keys (broker/config.py includes
them); `txn_config(config)` builds the `TxnConfig` the sans-IO coordinator reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from server_common.properties import ConfigKey, at_least

__all__ = ["TXN_CONFIG_KEYS", "TxnConfig", "txn_config"]

TXN_CONFIG_KEYS = [
    ConfigKey(
        "transaction.state.log.num.partitions",
        "int",
        50,
        "partitions of __transaction_state",
        at_least(1),
    ),
    ConfigKey(
        "transaction.state.log.replication.factor",
        "int",
        3,
        "RF of __transaction_state (capped at the live brokers)",
        at_least(1),
    ),
    ConfigKey(
        "transaction.state.log.min.isr",
        "int",
        2,
        "min.insync.replicas of __transaction_state (capped at its RF)",
        at_least(1),
    ),
    ConfigKey(
        "transaction.state.log.segment.bytes",
        "int",
        100 * 1024 * 1024,
        "segment size of __transaction_state",
        at_least(14),
    ),
    ConfigKey(
        "transaction.max.timeout.ms",
        "int",
        900_000,
        "the largest transaction.timeout.ms a producer may ask for",
        at_least(1),
    ),
    ConfigKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10_000,
        "how often to abort transactions that ran past their timeout",
        at_least(1),
    ),
    ConfigKey(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3_600_000,
        "how often to remove transactional ids past transactional.id.expiration.ms",
        at_least(1),
    ),
    ConfigKey(
        "transaction.partition.verification.enable",
        "bool",
        True,
        "KIP-890: partition leaders verify a producer's first transactional batch with the "
        "transaction coordinator before appending it (Kafka 3.6+'s name and default)",
    ),
    ConfigKey(
        "transaction.state.log.load.buffer.size",
        "int",
        5 * 1024 * 1024,
        "bytes read at a time when loading __transaction_state",
        at_least(1),
    ),
]


@dataclass(frozen=True)
class TxnConfig:
    state_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    write_timeout_ms: int = 5000  # the acks=all wait of a __transaction_state write


def txn_config(config: Mapping[str, Any]) -> TxnConfig:
    """The coordinator's settings from a BrokerConfig."""
    return TxnConfig(
        state_partitions=config["transaction.state.log.num.partitions"],
        max_timeout_ms=config["transaction.max.timeout.ms"],
        id_expiration_ms=config["transactional.id.expiration.ms"],
        write_timeout_ms=config["offsets.commit.timeout.ms"],
    )
