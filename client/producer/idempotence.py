"""The idempotent producer's state (KIP-98, KIP-360): producer id, epoch and sequences.

This is the part of Kafka's TransactionManager an idempotent producer uses; transactions
will extend it.

How it works: with `enable_idempotence` (on by default, see client/producer/config.py)
the sender, before its first batch, asks the known brokers in turn for a producer id
(`init_producer_id`: InitProducerId; sequences start over). Each batch is stamped when
first drained (`stamp`) with the producer id, epoch and the partition's next sequence
(wrapping at 2^31), and a retry resends the same bytes: the leader, or a new leader that
replicated the state, answers a retry of a batch it already has with the original
offsets instead of writing it twice. So re-queueing requests in flight to a moved
leader creates no duplicates. A batch stamped under an older id or epoch is restamped
before it is sent again.

What an answer about a batch's sequence or epoch means (`on_error`, Kafka's Sender):
DUPLICATE_SEQUENCE_NUMBER (an old retry the broker no longer caches) counts as written,
with offset -1; INVALID_PRODUCER_EPOCH for a batch of an older epoch is retried (it is
restamped); anything else (OUT_OF_ORDER_SEQUENCE_NUMBER: the broker lost state it should
have) fails the batch and, when the batch was of the current epoch, bumps the epoch
locally (`bump_epoch`, KIP-360): the next epoch of the same id, or no id (a new one is
asked for) when the epoch is exhausted; sequences restart at 0. A batch that expires
after being sent, its fate unknown, bumps it too (`maybe_bump_epoch_on_expiry`): later
sequences could otherwise be out of order.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable

from client.connection import ConnectionPool
from client.metadata import BrokerInfo
from client.producer.batch import BatchState, ProducerBatch
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

# Answers about an idempotent batch's sequence or epoch (module docstring).
IDEMPOTENCE_ERRORS = frozenset(
    {
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.UNKNOWN_PRODUCER_ID,
    }
)
SEQUENCE_MODULUS = 1 << 31
_INT16_MAX = (1 << 15) - 1


class IdempotenceOutcome(enum.Enum):
    """What to do with a batch answered with one of `IDEMPOTENCE_ERRORS`."""

    WRITTEN = "written"  # a success with an unknown offset (-1)
    RETRY = "retry"  # restamped when drained again
    FAIL = "fail"


class IdempotenceManager:
    """This producer's id, epoch and each partition's next sequence; see the module
    docstring. `enabled` is False for a producer without idempotence (it then stamps
    nothing and never asks for an id)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        # A transactional producer's id and epoch come from its coordinator
        # (client/producer/txn_requests.py): no InitProducerId of its own, no local bumps.
        self.transactional = False
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._next_sequence: dict[TopicPartition, int] = {}

    @property
    def needs_producer_id(self) -> bool:
        return self.enabled and self.producer_id < 0 and not self.transactional

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A producer id and epoch given by InitProducerId: sequences start over."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._next_sequence.clear()

    async def init_producer_id(
        self, pool: ConnectionPool, brokers: Iterable[BrokerInfo], timeout_s: float
    ) -> bool:
        """Ask `brokers` in turn for a producer id (InitProducerId) until one gives it
        (sequences start over); False when none did (the sender retries after the
        backoff, expiring batches meanwhile). Raises `TributaryError` when a broker
        answers with an error retrying cannot cure."""
        request = m.InitProducerIdRequest()
        for broker in list(brokers):
            try:
                response = await pool.request(
                    broker.host, broker.port, request, timeout_s=timeout_s
                )
            except TributaryError as exc:
                log.info("InitProducerId to broker %d failed: %s", broker.node_id, exc)
                continue
            code = ErrorCode.from_code(response.error_code)
            if code is ErrorCode.NONE:
                self.producer_id = response.producer_id
                self.producer_epoch = response.producer_epoch
                self._next_sequence.clear()
                log.info(
                    "idempotent producer id %d, epoch %d", self.producer_id, self.producer_epoch
                )
                return True
            if not code.is_retriable and code is not ErrorCode.COORDINATOR_NOT_AVAILABLE:
                raise TributaryError(code, "InitProducerId failed")
            log.info("InitProducerId: broker %d answered %s", broker.node_id, code.name)
        return False

    def stamp(self, batches: list[ProducerBatch]) -> None:
        """Give fresh batches (and retries stamped under an older producer id or epoch)
        this producer's id, epoch and their partition's next sequences."""
        for batch in batches:
            if batch.base_sequence >= 0 and self.is_current(batch):
                continue  # a retry: the same bytes, the same sequence
            sequence = self._next_sequence.get(batch.tp, 0)
            batch.transactional = self.transactional
            batch.stamp(self.producer_id, self.producer_epoch, sequence)
            self._next_sequence[batch.tp] = (sequence + batch.record_count) % SEQUENCE_MODULUS

    def is_current(self, batch: ProducerBatch) -> bool:
        """Was `batch` stamped with this producer's id and epoch?"""
        return (batch.producer_id, batch.producer_epoch) == (self.producer_id, self.producer_epoch)

    def bump_epoch(self, why: str) -> None:
        """Start a new sequence space (Kafka's idempotent epoch bump, KIP-360): the next
        epoch of the same id, or a new id when the epoch is exhausted."""
        if self.producer_id < 0:
            return
        if self.transactional:  # the failed batch aborts the transaction instead
            log.warning("transactional producer %d: %s", self.producer_id, why)
            return
        log.warning(
            "idempotent producer %d: bumping epoch %d after %s",
            self.producer_id,
            self.producer_epoch,
            why,
        )
        if self.producer_epoch >= _INT16_MAX:
            self.producer_id = NO_PRODUCER_ID
            self.producer_epoch = NO_PRODUCER_EPOCH
        else:
            self.producer_epoch += 1
        self._next_sequence.clear()

    def on_error(self, batch: ProducerBatch, code: ErrorCode) -> IdempotenceOutcome:
        """What an answer of `IDEMPOTENCE_ERRORS` means for a stamped `batch` (bumping
        the epoch when the batch was of the current one and fails)."""
        if code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            # Written before, but too long ago for the broker to say where: success with
            # an unknown offset (Kafka's Sender does the same).
            return IdempotenceOutcome.WRITTEN
        stale = not self.is_current(batch)
        if code is ErrorCode.INVALID_PRODUCER_EPOCH and stale:
            return IdempotenceOutcome.RETRY
        if not stale:
            self.bump_epoch(f"{code.name} on {batch.tp}")
        return IdempotenceOutcome.FAIL

    def maybe_bump_epoch_on_expiry(self, batch: ProducerBatch) -> bool:
        """`batch` expires: if it was sent under the current epoch, its fate is unknown
        and later sequences could be out of order, so start over (True)."""
        if (
            batch.base_sequence >= 0
            and batch.attempts + (batch.state is BatchState.IN_FLIGHT) > 0
            and self.is_current(batch)
        ):
            self.bump_epoch(f"a batch for {batch.tp} expired")
            return True
        return False
