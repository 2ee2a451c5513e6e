"""The transaction coordinator's sans-IO core (Kafka 2.8's TransactionCoordinator,
TransactionStateManager and TransactionMetadata; KIP-98, KIP-664, KIP-890's verification).

Time comes in as `now_ms`; writes to `__transaction_state` leave through the `append`
callable and marker work through `send_markers`, both given by the shell
(`broker/tasks/txn_service.py`), which feeds back the records it reads when this broker
becomes leader of a `__transaction_state` partition and the markers it wrote.

Modules:
- `coordinator.py`: `TransactionCoordinator`, the entry point: InitProducerId with a
  transactional id, AddPartitionsToTxn (and KIP-890's `verify`), EndTxn, the marker jobs
  (`MarkerJob`), timeouts, expiration, Describe/ListTransactions;
- `manager.py`: `TxnStateManager`, the ids this broker coordinates, their loading and
  their writes (`StateLoader`);
- `metadata.py`: one id's `TransactionMetadata`, Kafka's states (`TxnState`) and the
  transitions allowed;
- `state_log.py`: the records of `__transaction_state` in Kafka's TransactionLog format,
  and which partition holds an id;
- `config.py`: the settings (`TxnConfig`) and their broker config keys.
"""
