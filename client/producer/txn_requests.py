"""The transactional producer's requests to its coordinators (Trio): the shell around the
sans-IO `TransactionManager` (client/producer/transactions.py).

How it works: `TxnRequests` finds the transaction coordinator (FindCoordinator key type
1 with the transactional id, asked of any known broker) and sends it InitProducerId
(with the transactional id and `transaction_timeout_ms`: the producer id and epoch go to
the `IdempotenceManager`), AddPartitionsToTxn, AddOffsetsToTxn and EndTxn; it finds a
group's coordinator (key type 0) for TxnOffsetCommit. One request at a time (a lock),
as Kafka's sender sends them in order. Each answer is classified by `classify`: RETRY
waits `retry_backoff_ms`, FIND_COORDINATOR looks the coordinator up again first (a lost
connection too), ABORTABLE and FATAL put the manager in its error state and raise its
`TransactionError`. The application's calls wait at most `max_block_ms` for an answer
and then raise `ProducerTimeoutError` (they may be called again).

The sender calls `prepare_drain` before draining batches: while the manager is in an
error state, aborting or between transactions, it fails every batch not yet sent;
otherwise it adds the partitions of queued batches that are not in the transaction yet
(one AddPartitionsToTxn for all of them, as Kafka batches them), so that no batch
reaches a partition before the coordinator knows the partition is part of the
transaction. When that AddPartitionsToTxn is refused, `drain_backoff_s` is the sender's
wait before the next look (the manager's `add_partitions_backoff_ms`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from client.connection import BrokerConnectionError, ConnectionPool
from client.metadata import BrokerInfo, Metadata
from client.producer.errors import ProducerTimeoutError
from client.producer.idempotence import IdempotenceManager
from client.producer.transactions import (
    ConsumerGroupMetadata,
    Outcome,
    TransactionError,
    TransactionManager,
    TxnApi,
    TxnState,
    classify,
)
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

if TYPE_CHECKING:
    from client.producer.accumulator import RecordAccumulator
    from client.producer.batch import ProducerBatch

log = logging.getLogger(__name__)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


class TxnRequests:
    """Talks to the transaction and group coordinators; see the module docstring."""

    def __init__(
        self,
        manager: TransactionManager,
        idempotence: IdempotenceManager,
        pool: ConnectionPool,
        metadata: Metadata,
        *,
        request_timeout_ms: float,
        retry_backoff_ms: float,
        max_block_ms: float,
    ) -> None:
        self.manager = manager
        self.idempotence = idempotence
        self._pool = pool
        self._metadata = metadata
        self._request_timeout_s = request_timeout_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self.drain_backoff_s = self._backoff_s  # after prepare_drain returned False
        self._max_block_s = max_block_ms / 1000
        self._lock = trio.Lock()
        self.coordinator: BrokerInfo | None = None
        self._group_coordinators: dict[str, BrokerInfo] = {}

    # --- finding coordinators --------------------------------------------------------

    async def _find(self, key: str, key_type: int) -> BrokerInfo | None:
        """Ask the known brokers in turn who coordinates `key`; None when none could say
        yet (retriable); raises the manager's error for a fatal or abortable answer."""
        request = m.FindCoordinatorRequest(key=key, key_type=key_type)
        addresses = [b.address for b in sorted(self._metadata.cluster.brokers.values())]
        addresses += [a for a in self._metadata.bootstrap if a not in addresses]
        for address in addresses:
            try:
                response = await self._pool.request(
                    *address, request, timeout_s=self._request_timeout_s
                )
                code, detail = ErrorCode.from_code(response.error_code), response.error_message
            except BrokerConnectionError as exc:
                log.info("FindCoordinator(%s) to %s:%d failed: %s", key, *address, exc)
                continue
            except TributaryError as exc:
                code, detail = exc.code, exc.message
            if code is ErrorCode.NONE:
                return BrokerInfo(response.node_id, response.host, response.port)
            if classify(TxnApi.FIND_COORDINATOR, code) is not Outcome.RETRY:
                raise self.manager.on_error(TxnApi.FIND_COORDINATOR, code, detail)
            log.info("FindCoordinator(%s): %s", key, code.name)
            return None
        return None

    # --- one request, retried ---------------------------------------------------------

    async def _call(
        self,
        api: TxnApi,
        build: Callable[[], Any],
        error_of: Callable[[Any], tuple[ErrorCode, str | None]],
        *,
        group: str | None = None,
        deadline: float | None = None,
    ) -> Any:
        """Send `build()` to the transaction coordinator (or `group`'s) until it is
        answered without a retriable error; returns the response. Raises the manager's
        `TransactionError` (abortable, fatal) or `ProducerTimeoutError` at `deadline`
        (default: `max_block_ms` from now)."""
        if deadline is None:
            deadline = trio.current_time() + self._max_block_s
        last: str = "no answer"
        while True:
            coordinator = await self._coordinator_for(group)
            if coordinator is not None:
                try:
                    response = await self._pool.request(
                        *coordinator.address, build(), timeout_s=self._request_timeout_s
                    )
                    code, detail = error_of(response)
                except BrokerConnectionError as exc:
                    code, detail = ErrorCode.NOT_COORDINATOR, str(exc)
                except TributaryError as exc:  # a request-level error
                    code, detail = exc.code, exc.message
                outcome = classify(api, code)
                if outcome is Outcome.OK:
                    return response
                if outcome in (Outcome.ABORTABLE, Outcome.FATAL):
                    raise self.manager.on_error(api, code, detail)
                if outcome is Outcome.FIND_COORDINATOR:
                    self._forget_coordinator(group)
                last = f"{code.name}" + (f" ({detail})" if detail else "")
                log.info("%s: %s, retrying", api.value, last)
            if trio.current_time() + self._backoff_s >= deadline:
                raise ProducerTimeoutError(
                    f"{api.value} for transactional id {self.manager.transactional_id!r} "
                    f"got no answer within {self._max_block_s:g} s (last: {last})"
                )
            await trio.sleep(self._backoff_s)

    async def _coordinator_for(self, group: str | None) -> BrokerInfo | None:
        if group is None:
            if self.coordinator is None:
                self.coordinator = await self._find(
                    self.manager.transactional_id, KEY_TYPE_TRANSACTION
                )
            return self.coordinator
        if group not in self._group_coordinators:
            found = await self._find(group, KEY_TYPE_GROUP)
            if found is None:
                return None
            self._group_coordinators[group] = found
        return self._group_coordinators[group]

    def _forget_coordinator(self, group: str | None) -> None:
        if group is None:
            self.coordinator = None
        else:
            self._group_coordinators.pop(group, None)

    async def _locked(self, work: Callable[[], Awaitable[Any]]) -> Any:
        async with self._lock:
            return await work()

    # --- the requests -----------------------------------------------------------------

    async def init_producer_id(self, bump: bool = False) -> None:
        """InitProducerId with the transactional id: this producer's id and epoch (a
        newer epoch fences older producers of the same transactional id). `bump`: with
        the current id and epoch (KIP-360), for the next epoch of the same id."""
        manager, idem = self.manager, self.idempotence
        current = (idem.producer_id, idem.producer_epoch) if bump else (-1, -1)

        def build() -> m.InitProducerIdRequest:
            return m.InitProducerIdRequest(
                transactional_id=manager.transactional_id,
                transaction_timeout_ms=manager.transaction_timeout_ms,
                producer_id=current[0],
                producer_epoch=current[1],
            )

        response = await self._locked(
            lambda: self._call(TxnApi.INIT_PRODUCER_ID, build, _top_level_error)
        )
        self.idempotence.set_producer_id(response.producer_id, response.producer_epoch)
        log.info(
            "transactional id %r: producer id %d, epoch %d",
            manager.transactional_id,
            response.producer_id,
            response.producer_epoch,
        )

    async def add_partitions(self, partitions: list[TopicPartition]) -> bool:
        """One AddPartitionsToTxn for `partitions` (already pending in the manager);
        True when all were added, False to retry after the backoff (they are new again).
        Raises the manager's error for an abortable or fatal answer."""
        manager, idem = self.manager, self.idempotence
        self.drain_backoff_s = self._backoff_s
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = m.AddPartitionsToTxnRequest(
            transactional_id=manager.transactional_id,
            producer_id=idem.producer_id,
            producer_epoch=idem.producer_epoch,
            topics=[m.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        async with self._lock:
            coordinator = await self._coordinator_for(None)
            if coordinator is None:
                manager.on_partitions_added([], partitions)
                return False
            try:
                response = await self._pool.request(
                    *coordinator.address, request, timeout_s=self._request_timeout_s
                )
            except BrokerConnectionError as exc:
                log.info("AddPartitionsToTxn failed: %s", exc)
                self.coordinator = None
                manager.on_partitions_added([], partitions)
                return False
            except TributaryError as exc:
                codes = {tp: exc.code for tp in partitions}
            else:
                codes = {
                    TopicPartition(topic.name, r.partition): ErrorCode.from_code(r.error_code)
                    for topic in response.results
                    for r in topic.results
                }
        return self._on_partitions_answer(partitions, codes)

    def _on_partitions_answer(
        self, partitions: list[TopicPartition], codes: dict[TopicPartition, ErrorCode]
    ) -> bool:
        manager = self.manager
        added = [tp for tp in partitions if codes.get(tp) is ErrorCode.NONE]
        retry = [tp for tp in partitions if tp not in added]
        worst: tuple[Outcome, ErrorCode] | None = None
        order = [Outcome.FATAL, Outcome.ABORTABLE, Outcome.FIND_COORDINATOR, Outcome.RETRY]
        for tp in retry:
            code = codes.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED)
            if code is ErrorCode.OPERATION_NOT_ATTEMPTED:
                outcome = Outcome.RETRY
            else:
                outcome = classify(TxnApi.ADD_PARTITIONS, code)
            if worst is None or order.index(outcome) < order.index(worst[0]):
                worst = (outcome, code)
        manager.on_partitions_added(added, retry)
        if worst is None:
            return True
        outcome, code = worst
        if outcome in (Outcome.FATAL, Outcome.ABORTABLE):
            failed = ", ".join(f"{tp.topic}-{tp.partition}" for tp in retry)
            raise manager.on_error(TxnApi.ADD_PARTITIONS, code, f"{code.name} for {failed}")
        if outcome is Outcome.FIND_COORDINATOR:
            self.coordinator = None
        log.info("AddPartitionsToTxn: %s, retrying", code.name)
        self.drain_backoff_s = (
            manager.add_partitions_backoff_ms(code, self._backoff_s * 1000) / 1000
        )
        return False

    async def send_offsets(
        self, offsets: dict[TopicPartition, int], group: ConsumerGroupMetadata
    ) -> None:
        """AddOffsetsToTxn (the group's offsets partition joins the transaction), then
        TxnOffsetCommit to the group's coordinator."""
        manager, idem = self.manager, self.idempotence

        def add_offsets() -> m.AddOffsetsToTxnRequest:
            return m.AddOffsetsToTxnRequest(
                transactional_id=manager.transactional_id,
                producer_id=idem.producer_id,
                producer_epoch=idem.producer_epoch,
                group_id=group.group_id,
            )

        by_topic: dict[str, list[m.TxnOffsetCommitRequestPartition]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                m.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=offset
                )
            )

        def commit() -> m.TxnOffsetCommitRequest:
            return m.TxnOffsetCommitRequest(
                transactional_id=manager.transactional_id,
                group_id=group.group_id,
                producer_id=idem.producer_id,
                producer_epoch=idem.producer_epoch,
                generation_id=group.generation_id,
                member_id=group.member_id,
                group_instance_id=group.group_instance_id,
                topics=[
                    m.TxnOffsetCommitRequestTopic(name=name, partitions=parts)
                    for name, parts in by_topic.items()
                ],
            )

        async def both() -> None:
            if not manager.offsets_added:
                await self._call(TxnApi.ADD_OFFSETS, add_offsets, _top_level_error)
                manager.on_offsets_added()
            await self._call(
                TxnApi.TXN_OFFSET_COMMIT, commit, _worst_partition_error, group=group.group_id
            )

        await self._locked(both)
        manager.offsets_done()

    async def end_txn(self, commit: bool) -> None:
        """EndTxn: the coordinator commits or aborts the transaction."""
        manager, idem = self.manager, self.idempotence

        def build() -> m.EndTxnRequest:
            return m.EndTxnRequest(
                transactional_id=manager.transactional_id,
                producer_id=idem.producer_id,
                producer_epoch=idem.producer_epoch,
                committed=commit,
            )

        await self._locked(lambda: self._call(TxnApi.END_TXN, build, _top_level_error))

    # --- the sender's part --------------------------------------------------------------

    async def prepare_drain(
        self, accumulator: RecordAccumulator, fail: Callable[[ProducerBatch, BaseException], None]
    ) -> bool:
        """Before draining: fail unsent batches when the transaction cannot take them
        (an error, an abort, or no transaction: a record queued while it ended), add the
        partitions of queued batches to the transaction. False: back off, then look
        again."""
        manager = self.manager
        if manager.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
            error = manager.last_error if manager.has_error else None
            for batch in accumulator.abandon_undrained():
                fail(batch, error or _aborted())
            return True
        partitions = manager.partitions_to_add(accumulator.queued_partitions())
        if not partitions:
            return True
        try:
            return await self.add_partitions(partitions)
        except TransactionError:
            return True  # in the error state now: the next look fails the batches

    def on_batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed: the transaction must be aborted (or, fenced,
        the producer is done). Errors of the manager's own making change nothing."""
        if isinstance(error, TransactionError):
            return
        code = error.code if isinstance(error, TributaryError) else ErrorCode.UNKNOWN_SERVER_ERROR
        self.manager.on_error(TxnApi.PRODUCE, code, str(error))


def _aborted() -> TransactionError:
    return TransactionError(
        ErrorCode.INVALID_TXN_STATE,
        "the transaction was aborted before the record was sent",
        txn_requires_abort=True,
    )


def _top_level_error(response: Any) -> tuple[ErrorCode, str | None]:
    return ErrorCode.from_code(response.error_code), getattr(response, "error_message", None)


def _worst_partition_error(response: m.TxnOffsetCommitResponse) -> tuple[ErrorCode, str | None]:
    """The first error of a per-partition answer (NONE when all succeeded)."""
    for topic in response.topics:
        for part in topic.partitions:
            code = ErrorCode.from_code(part.error_code)
            if code is not ErrorCode.NONE:
                return code, f"{topic.name}-{part.partition_index}"
    return ErrorCode.NONE, None
