"""Wiring of the transaction coordinator into a broker: one function, so that
broker/server.py only calls it (and runs the tasks it returns).

How it works: `wire_transactions(server)` builds the `TxnService`
(broker/tasks/txn_service.py) over the broker's replica manager, metadata cache and
ZooKeeper gateway, the `TransactionHandlers` (broker/handlers/transactions.py) added to
the request handlers' table, routes InitProducerId with a transactional id and
FindCoordinator key type 1 to them, and sets the KIP-890 `CoordinatorVerifier`
(broker/tasks/txn_verifier.py) as the replica manager's `txn_verifier` (unless
`transaction.partition.verification.enable` is false), which the produce path asks
before the first transactional batch of a producer on a partition, and registers the
group coordinator's completion of transactional offset commits in the replica manager's
`txn_marker_listeners` (called when a marker is appended as leader).
"""

from __future__ import annotations

from typing import Any

from broker.core.txn.config import txn_config
from broker.handlers.transactions import TransactionHandlers
from broker.tasks.txn_service import TxnService, TxnTopicSettings
from broker.tasks.txn_verifier import CoordinatorVerifier


def wire_transactions(server: Any) -> tuple[TxnService, CoordinatorVerifier]:
    config = server.config
    service = TxnService(
        txn_config(config),
        TxnTopicSettings.from_config(config),
        server.replica_manager,
        server.metadata_cache,
        server.gateway,
        broker_id=server.broker_id,
        connector=server.inter_broker_connect,
        clock=server.now_ms,
        events=server.record_event,
    )
    handlers = server.handlers
    transactions = TransactionHandlers(
        service,
        server.metadata_cache,
        handlers.producer_ids,
        offsets_partitions=config["offsets.topic.num.partitions"],
        clock=server.now_ms,
        groups=server.groups.coordinator,
    )
    handlers.add_handlers(transactions.dispatch())
    handlers.producer_ids.transactional = transactions.init_producer_id
    if handlers.groups is not None:
        handlers.groups.find_transaction_coordinator = transactions.find_coordinator
    verifier = CoordinatorVerifier(
        service.coordinator,
        server.metadata_cache,
        broker_id=server.broker_id,
        connector=server.inter_broker_connect,
    )
    rm = server.replica_manager
    if config["transaction.partition.verification.enable"]:
        rm.txn_verifier = verifier  # else the log side's default (every batch allowed)
    if getattr(rm, "txn_marker_listeners", None) is None:
        rm.txn_marker_listeners = []  # the log side's list, when this runs without it
    rm.txn_marker_listeners.append(server.groups.txn_marker_landed)
    return service, verifier
