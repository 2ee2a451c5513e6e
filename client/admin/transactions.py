"""The admin client's transaction requests (KIP-664): list and describe transactions.

How it works: ListTransactions goes to every live broker (each answers for the
transactional ids it coordinates) and the answers are merged; a broker still loading its
`__transaction_state` partitions is asked again. DescribeTransactions goes to the
coordinator of each id (FindCoordinator key type 1), looked up again while it moves or
loads, for up to the request timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import trio

from client.admin.base import AdminBase
from client.connection import BrokerConnectionError
from client.consumer.group.channel import find_coordinator
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_KEY_TYPE = 1
_RETRY = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


@dataclass(frozen=True, order=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1: no transaction ongoing
    partitions: tuple[TopicPartition, ...]


class TransactionAdmin(AdminBase):
    """Transactions (a mixin of `client.admin.Admin`)."""

    async def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster (in `states`, of `producer_ids`, if
        given), sorted. Raises `TributaryError(INVALID_REQUEST)` naming unknown states."""
        request = m.ListTransactionsRequest(
            state_filters=list(states), producer_id_filters=list(producer_ids)
        )
        found: list[TransactionListing] = []
        unknown: set[str] = set()
        for broker, response in await self._ask_every_broker(request, "ListTransactions"):
            unknown.update(response.unknown_state_filters)
            found.extend(
                TransactionListing(
                    t.transactional_id, t.producer_id, t.transaction_state, broker.node_id
                )
                for t in response.transaction_states
            )
        if unknown:
            raise TributaryError(
                ErrorCode.INVALID_REQUEST,
                f"unknown transaction states: {', '.join(sorted(unknown))}",
            )
        return sorted(found)

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The id's transaction as its coordinator describes it; raises `TributaryError`
        (TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know)."""
        deadline = trio.current_time() + self.request_timeout_ms / 1000
        last: TributaryError | None = None
        request = m.DescribeTransactionsRequest(transactional_ids=[transactional_id])
        with trio.move_on_at(deadline):
            while True:
                coordinator = await find_coordinator(
                    self._pool,
                    self.metadata,
                    transactional_id,
                    timeout_s=max(deadline - trio.current_time(), 0.001),
                    retry_backoff_ms=self.retry_backoff_ms,
                    key_type=TRANSACTION_KEY_TYPE,
                )
                try:
                    response = await self._pool.request(
                        *coordinator.address, request, timeout_s=self.request_timeout_ms / 1000
                    )
                    (state,) = response.transaction_states
                    code = ErrorCode.from_code(state.error_code)
                except (BrokerConnectionError, TributaryError) as exc:
                    code, state = exc.code, None
                if code is ErrorCode.NONE and state is not None:
                    return TransactionDescription(
                        transactional_id=state.transactional_id,
                        coordinator_id=coordinator.node_id,
                        state=state.transaction_state,
                        producer_id=state.producer_id,
                        producer_epoch=state.producer_epoch,
                        timeout_ms=state.transaction_timeout_ms,
                        start_time_ms=state.transaction_start_time_ms,
                        partitions=tuple(
                            TopicPartition(t.topic, p) for t in state.topics for p in t.partitions
                        ),
                    )
                if code not in _RETRY:
                    raise TributaryError(code, f"describing transactional id {transactional_id!r}")
                last = TributaryError(code, f"from broker {coordinator.node_id}")
                await trio.sleep(self.retry_backoff_ms / 1000)
        raise TributaryError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"the coordinator of {transactional_id!r} did not answer within "
            f"{self.request_timeout_ms:g} ms" + (f" (last error: {last})" if last else ""),
        )
