"""KIP-890 part 1 on the partition leader's side: before the first transactional batch of
a producer lands on a partition, ask the transaction coordinator whether that partition
was added to the producer's ongoing transaction.

Why: without it, a late write (a producer's retried or delayed Produce arriving after
its transaction was aborted or committed, KAFKA-17754) is appended outside any
transaction the coordinator knows of: it stays open, holds the partition's last stable
offset back, and is later taken into an unrelated transaction (a hanging transaction, an
aborted read). `CoordinatorVerifier.verify` implements the `TransactionVerifier`
protocol the produce path calls (broker/core/txn_verification.py, from the log side):
it finds the coordinator of the transactional id (the leader of its
`__transaction_state` partition in the metadata cache), asks it with AddPartitionsToTxn
`verify_only=True` (directly when this broker is the coordinator, else over the
inter-broker listener) and maps the answer per partition. A coordinator that cannot be
asked now (none known, moving, loading, unreachable) is answered NOT_ENOUGH_REPLICAS, as
Kafka 3.6 does, an error producers retry.
"""

from __future__ import annotations

import logging

import trio

from broker.core.metadata_cache import MetadataCache
from broker.core.txn.coordinator import TransactionCoordinator
from broker.core.txn.state_log import TRANSACTION_STATE_TOPIC
from client.connection import ConnectionPool, Connector
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

RETRIABLE = ErrorCode.NOT_ENOUGH_REPLICAS
_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)


def _mapped(code: ErrorCode) -> ErrorCode:
    return RETRIABLE if code in _COORDINATOR_ERRORS else code


class CoordinatorVerifier:
    def __init__(
        self,
        coordinator: TransactionCoordinator,
        metadata_cache: MetadataCache,
        *,
        broker_id: int,
        connector: Connector | None,
        request_timeout_s: float = 10.0,
    ) -> None:
        self.coordinator = coordinator
        self.cache = metadata_cache
        self.broker_id = broker_id
        self.connector = connector
        self.request_timeout_s = request_timeout_s
        self._pool: ConnectionPool | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._pool = ConnectionPool(
                nursery, client_id=f"txn-verifier-{self.broker_id}", connector=self.connector
            )
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                pool, self._pool = self._pool, None
                with trio.CancelScope(shield=True):
                    await pool.aclose()

    def _coordinator_id(self, transactional_id: str) -> int | None:
        partitions = self.cache.topics.get(TRANSACTION_STATE_TOPIC)
        if not partitions:
            return None
        state = partitions.get(self.coordinator.partition_for(transactional_id))
        if state is None or state.leader is None or state.leader < 0:
            return None
        return state.leader

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        def all_(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return {tp: code for tp in partitions}

        leader = self._coordinator_id(transactional_id)
        if leader is None:
            return all_(RETRIABLE)
        if leader == self.broker_id:
            answer = self.coordinator.verify(
                transactional_id, producer_id, producer_epoch, partitions
            )
            return {tp: _mapped(code) for tp, code in answer.items()}
        endpoint = self.cache.endpoint(leader)
        if endpoint is None or self._pool is None:
            return all_(RETRIABLE)
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = m.AddPartitionsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            topics=[m.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            verify_only=True,
        )
        try:
            response = await self._pool.request(
                endpoint.host, endpoint.port, request, timeout_s=self.request_timeout_s
            )
        except (TributaryError, OSError) as exc:
            log.info("verifying %s with broker %d: %s", transactional_id, leader, exc)
            return all_(RETRIABLE)
        out = all_(RETRIABLE)
        for topic in response.results:
            for part in topic.results:
                tp = TopicPartition(topic.name, part.partition)
                if tp in out:
                    out[tp] = _mapped(ErrorCode.from_code(part.error_code))
        return out
