"""InitProducerId: producer ids for idempotent producers, from blocks claimed in ZooKeeper.

How it works: `ProducerIdGenerator` (broker/core/producer_ids.py) hands out the ids of
the block this broker holds; when it runs out, the handler claims the next block of
1000 from /latest_producer_id_block with a conditional set
(`BrokerZkGateway.claim_producer_id_block`), one claim at a time under a lock, so two
requests never claim two blocks. ZooKeeper being unreachable is answered
COORDINATOR_NOT_AVAILABLE (the producer retries). A request with a transactional id goes
to `transactional` (the transaction coordinator's handler, set when it is wired), which
takes its new producer ids from `next_producer_id`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from broker.core.producer_ids import ProducerIdBlockError, ProducerIdGenerator
from broker.zookeeper.gateway import BrokerZkGateway
from broker.zookeeper.registration import BrokerIdentity
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from server_common.zk import ZkError

log = logging.getLogger(__name__)


class ProducerIdHandlers:
    def __init__(self, gateway: BrokerZkGateway, identity: BrokerIdentity) -> None:
        self._producer_id_gateway = gateway
        self.identity = identity
        self._producer_ids = ProducerIdGenerator()
        self._producer_id_lock = trio.Lock()
        self.transactional: (
            Callable[[m.InitProducerIdRequest], Awaitable[m.InitProducerIdResponse]] | None
        ) = None

    async def init_producer_id(self, request: m.InitProducerIdRequest) -> m.InitProducerIdResponse:
        """A new producer id at epoch 0 (Kafka 2.8 without a transactional id: a producer
        asking to bump its epoch also gets a fresh id); with a transactional id, the
        transaction coordinator's answer."""

        def answer(code: ErrorCode, pid: int = -1, epoch: int = -1) -> m.InitProducerIdResponse:
            return m.InitProducerIdResponse(
                throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch
            )

        if request.transactional_id is not None:
            if self.transactional is None:
                return answer(ErrorCode.INVALID_REQUEST)
            return await self.transactional(request)
        code, pid = await self.next_producer_id()
        return answer(code, pid, 0 if code == ErrorCode.NONE else -1)

    async def next_producer_id(self) -> tuple[ErrorCode, int]:
        """(NONE, a new producer id), or the error to answer and -1."""
        async with self._producer_id_lock:
            if self._producer_ids.needs_block:
                try:
                    block = await self._producer_id_gateway.claim_producer_id_block(
                        self.identity.broker_id
                    )
                except ZkError as exc:
                    log.warning("could not claim a producer id block: %s", exc)
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
                except ProducerIdBlockError as exc:
                    log.error("could not claim a producer id block: %s", exc)
                    return ErrorCode.UNKNOWN_SERVER_ERROR, -1
                self._producer_ids.use_block(block)
            return ErrorCode.NONE, self._producer_ids.next_id()
