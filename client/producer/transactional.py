"""The transactional producer's API (KIP-98), with confluent-kafka's and aiokafka's names:
`init_transactions`, `begin_transaction`, `send_offsets_to_transaction`,
`commit_transaction`, `abort_transaction`.

How it works: `TransactionsApi` is a mixin of the `Producer` (client/producer/producer.py);
a producer built with `transactional_id=...` (which implies idempotence and acks=all)
has a `TransactionManager` (the sans-IO state, client/producer/transactions.py) and a
`TxnRequests` (its coordinator requests, client/producer/txn_requests.py) that the
sender also uses. A producer without one raises `TransactionError(INVALID_TXN_STATE)`
from these methods.

- `await init_transactions()`: finds the transaction coordinator and gets the producer
  id and epoch for the transactional id (InitProducerId), which fences any older
  producer with the same id and makes the coordinator finish (abort) its open
  transaction.
- `begin_transaction()`: records may be sent from now on (`send()` raises outside a
  transaction). Each partition a record goes to is added to the transaction
  (AddPartitionsToTxn) by the sender before its first batch goes out.
- `await send_offsets_to_transaction(offsets, group)`: consumed offsets committed as
  part of the transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group's
  coordinator, with the generation and member id of a `ConsumerGroupMetadata`).
- `await commit_transaction()`: flushes, then, if every record was written, EndTxn
  commit; if a record failed, raises the abortable error instead.
- `await abort_transaction()`: fails the records not sent yet, waits for those in
  flight, then EndTxn abort; if a record of the transaction failed (its sequence may
  have left a gap), then InitProducerId with the current id and epoch (KIP-360): the
  next epoch, sequences from 0.
A call that times out (`max_block_ms`, `ProducerTimeoutError`) may be called again; a
`TransactionError` with `txn_requires_abort` asks for `abort_transaction()`, one that is
`fatal` (`ProducerFencedError`: a newer producer has the same transactional id) for
closing the producer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from client.producer.transactions import (
    ConsumerGroupMetadata,
    TransactionError,
    TransactionManager,
    TxnState,
)
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

if TYPE_CHECKING:
    from client.producer.accumulator import RecordAccumulator
    from client.producer.sender import Sender
    from client.producer.txn_requests import TxnRequests


class TransactionsApi:
    """The transactional methods of `Producer`; see the module docstring."""

    transactions: TxnRequests | None
    accumulator: RecordAccumulator
    sender: Sender

    async def flush(self) -> None:  # Producer's
        raise NotImplementedError

    @property
    def transaction_manager(self) -> TransactionManager:
        if self.transactions is None:
            raise TransactionError(
                ErrorCode.INVALID_TXN_STATE,
                "Transactional method invoked on a non-transactional producer "
                "(build it with transactional_id=...)",
            )
        return self.transactions.manager

    def _txn(self) -> tuple[TransactionManager, TxnRequests]:
        manager = self.transaction_manager
        assert self.transactions is not None
        return manager, self.transactions

    async def init_transactions(self) -> None:
        """Get the producer id and epoch of the transactional id (fencing older
        producers with it); once, before the first transaction."""
        manager, requests = self._txn()
        if manager.state is not TxnState.INITIALIZING:  # else: a retry after a timeout
            manager.init_transactions()
        await requests.init_producer_id()
        manager.on_initialized()

    def begin_transaction(self) -> None:
        """Start a transaction: `send()` may be called until it is committed or aborted."""
        self.transaction_manager.begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition | tuple[str, int], Any],
        group_metadata: ConsumerGroupMetadata | str | Any,
    ) -> None:
        """Commit consumed `offsets` (partition -> the next offset to consume: an int or
        anything with an `offset`) for the group as part of the transaction.
        `group_metadata` is a group id or a consumer's group metadata (anything with
        `group_id`, `generation_id`, `member_id`, `group_instance_id`)."""
        manager, requests = self._txn()
        group = _group_of(group_metadata)
        wanted = {
            TopicPartition(*tp): value if isinstance(value, int) else int(value.offset)
            for tp, value in offsets.items()
        }
        manager.add_offsets(wanted, group)
        await requests.send_offsets(wanted, group)

    async def commit_transaction(self) -> None:
        """Flush, then commit the transaction; raises the abortable error instead when a
        record of it failed (then call `abort_transaction()`)."""
        manager, requests = self._txn()
        if manager.state is not TxnState.COMMITTING_TRANSACTION:  # else: a retry
            manager.begin_commit()
        self.sender.wake()
        await self.flush()
        manager.raise_if_error()
        if manager.transaction_started:
            await requests.end_txn(commit=True)
        manager.complete()

    async def abort_transaction(self) -> None:
        """Drop the records not sent yet, wait for those in flight, abort; after a
        failed record, bump the epoch (sequences start over, KIP-360)."""
        manager, requests = self._txn()
        if manager.state is TxnState.INITIALIZING and manager.epoch_bump_required:
            await self._bump_epoch(requests)  # a retry after the bump timed out
            return
        if manager.state is not TxnState.ABORTING_TRANSACTION:  # else: a retry
            manager.begin_abort()
        self.sender.wake()  # it fails the batches not sent yet (TxnRequests.prepare_drain)
        for batch in list(self.accumulator.incomplete):
            await batch.done.wait()
        if manager.has_fatal_error:
            manager.raise_if_error()
        if manager.transaction_started:
            await requests.end_txn(commit=False)
        manager.complete()
        if manager.state is TxnState.INITIALIZING:
            await self._bump_epoch(requests)

    async def _bump_epoch(self, requests: TxnRequests) -> None:
        await requests.init_producer_id(bump=True)
        requests.manager.on_initialized()


def _group_of(group: ConsumerGroupMetadata | str | Any) -> ConsumerGroupMetadata:
    if isinstance(group, ConsumerGroupMetadata):
        return group
    if isinstance(group, str):
        return ConsumerGroupMetadata(group)
    return ConsumerGroupMetadata(
        group.group_id,
        getattr(group, "generation_id", -1),
        getattr(group, "member_id", "") or "",
        getattr(group, "group_instance_id", None),
    )
