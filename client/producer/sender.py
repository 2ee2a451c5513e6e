"""The sender (Trio): the task that turns ready batches into Produce requests, and their
answers into delivered, retried or failed records. Kafka's Sender.

How it works:
- One sender task loops: expire batches older than `delivery_timeout_ms`; an idempotent
  producer without a producer id gets one first (client/producer/idempotence.py); ask
  the accumulator (client/producer/accumulator.py) which leaders are ready, drain them
  into one Produce request per broker (at most `max_in_flight_requests_per_connection`
  outstanding per broker; idempotent batches are stamped as they are drained), each
  sent by a task of its own; sleep until the next batch can be ready or something wakes
  it (an append, a response, fresh metadata).
- Each response completes its batches (offsets = base offset + index), or re-queues a
  batch at the *front* of its partition's queue after a retriable error (after asking
  for fresh metadata when the error means our leader is stale), or fails its records.
  A batch's partition stays muted while it is in flight, so a retry keeps the order.
  Answers about an idempotent batch's sequence or epoch are the idempotence manager's
  to interpret (`IdempotenceManager.on_error`).
- acks=0 writes the request and completes the records with offset -1.
- Leaders that stop answering: every request in flight is recorded in an
  `InFlightRequests` (client/inflight.py). One waiting longer than `STALLED_REQUEST_MS`
  makes the producer ask for fresh metadata; when a fresh view shows that a partition of
  a request in flight is now led by another broker (or by the same one at a newer
  leader epoch), that request is abandoned and its batches are re-queued at once, as
  after NOT_LEADER, instead of waiting out the request timeout for a paused or
  partitioned old leader. (Without idempotence a batch the old leader did append may
  then be written twice.)
- KIP-794, with `partitioner_availability_timeout_ms` > 0: batches are drained only to
  a leader with a connection ready (handshake answered; the sender connects in the
  background meanwhile), as Kafka's `client.ready(node)`; each ready leader's
  readiness goes to the accumulator (`update_node_latency`), so that a paused leader is
  left out by the partitioner after the timeout instead of holding records.
- `on_retry(tp, error)`, if given, hears about every retry as it is decided (the CLI
  prints one line per distinct reason).
- Finishing a batch (`finish`) frees its buffer memory in the accumulator and sets
  `memory_freed`, on which a `send()` waiting for buffer memory waits. If the task stops
  (a bug, or a cancellation), every unfinished record fails: nobody waits forever.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import trio

from client.connection import BrokerConnectionError, ConnectionPool
from client.inflight import InFlightRequest, InFlightRequests
from client.metadata import Metadata, current_ms, sleep_seconds
from client.producer.accumulator import RecordAccumulator
from client.producer.batch import BatchState, ProducerBatch
from client.producer.errors import DeliveryTimeoutError, ProducerClosedError
from client.producer.idempotence import IDEMPOTENCE_ERRORS, IdempotenceManager, IdempotenceOutcome
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import Codec
from client.protocol.types import TopicPartition

if TYPE_CHECKING:
    from client.producer.txn_requests import TxnRequests

log = logging.getLogger(__name__)

# Errors that mean our view of the leader is stale: refresh metadata before retrying
# (Kafka's InvalidMetadataException family, plus a lost connection).
_STALE_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)
# The broker answers an acks=all Produce with REQUEST_TIMED_OUT after the request's
# `timeout_ms` (= request_timeout_ms); we wait this much longer for that answer before
# giving up on the connection, which would also fail every other request in flight on it.
REQUEST_TIMEOUT_MARGIN_MS = 500

RetryCallback = Callable[[TopicPartition, BaseException], None]


@dataclass(frozen=True)
class SenderConfig:
    acks: int = -1
    codec: Codec = Codec.NONE
    retries: int = 2_147_483_647
    request_timeout_ms: float = 30_000
    max_in_flight: int = 5  # max_in_flight_requests_per_connection
    max_request_size: int = 1_048_576
    transactional_id: str | None = None  # a transactional producer's (Produce carries it)


class Sender:
    """The sender task and what it does with answers; see the module docstring."""

    def __init__(
        self,
        config: SenderConfig,
        accumulator: RecordAccumulator,
        metadata: Metadata,
        pool: ConnectionPool,
        idempotence: IdempotenceManager,
        on_retry: RetryCallback | None = None,
    ) -> None:
        self.config = config
        self.accumulator = accumulator
        self.metadata = metadata
        self.idempotence = idempotence
        self.on_retry = on_retry
        self._pool = pool
        self._nursery: trio.Nursery | None = None
        self._requests = InFlightRequests("produce request")
        self._connecting: set[tuple[str, int]] = set()
        self._wakeup = trio.Event()
        self.memory_freed = trio.Event()  # set (and replaced) whenever a batch finishes
        self.done = trio.Event()  # the sender task has stopped
        # A transactional producer's coordinator requests (client/producer/txn_requests.py).
        self.transactions: TxnRequests | None = None

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        nursery.start_soon(self._requests.abandon_on_metadata, self.metadata, self.wake)
        nursery.start_soon(self._requests.refresh_while_stalled, self.metadata)
        nursery.start_soon(self._sender_loop)

    def wake(self) -> None:
        """Something may be sendable now (or the producer is closing): look again."""
        self._wakeup.set()

    def fail_all(self, error: Callable[[], BaseException]) -> None:
        """Fail every unfinished record now (with a fresh `error()` per batch)."""
        for batch in self.accumulator.abandon_all():
            self.finish(batch, error=error())

    # --- the loop --------------------------------------------------------------------

    async def _sender_loop(self) -> None:
        try:
            await self._run_sender()
        except BaseException as exc:
            # A bug or a cancellation: nobody may wait forever for a record's outcome.
            if not isinstance(exc, trio.Cancelled):
                log.exception("the producer's sender failed")
            self.fail_all(partial(ProducerClosedError, f"the sender stopped: {exc!r}"))
            raise
        finally:
            self.done.set()

    async def _run_sender(self) -> None:
        acc = self.accumulator
        idempotence = self.idempotence
        assert self._nursery is not None
        while True:
            self._wakeup = trio.Event()
            now = current_ms()
            for batch in acc.expired(now):
                self._expire(batch, now)
            if acc.closing and not acc.incomplete:
                return
            if idempotence.needs_producer_id and acc.has_undrained():
                if not await self._init_producer_id():
                    self.metadata.request_update()
                    await trio.sleep(acc.config.retry_backoff_ms / 1000)
                continue  # expire what waited too long, then try again
            txn = self.transactions
            if txn is not None and not await txn.prepare_drain(acc, self._fail_batch):
                await trio.sleep(txn.drain_backoff_s)
                continue
            cluster = self.metadata.cluster
            check = acc.ready(cluster, now)
            if check.unknown_leaders:
                self.metadata.add_topics(*check.unknown_leaders)
                self.metadata.request_update()
            gated = acc.config.availability_timeout_ms > 0
            waiting = False  # a leader has sendable batches it cannot take yet
            for node in sorted(check.nodes):
                broker = cluster.broker(node)
                if broker is None:
                    continue
                if self._requests.count(node) >= self.config.max_in_flight or (
                    gated and not self._pool.connected(*broker.address)
                ):
                    # KIP-794: only to a connected leader (as Kafka's client.ready);
                    # one that stays out of reach is left out by the partitioner.
                    if gated:
                        acc.update_node_latency(node, now, can_drain=False)
                        self._connect_soon(broker.address)
                        waiting = True
                    continue
                acc.update_node_latency(node, now, can_drain=True)
                allowed = txn.manager.may_send if txn is not None else None
                batches = acc.drain(cluster, node, self.config.max_request_size, now, allowed)
                if batches and idempotence.enabled:
                    idempotence.stamp(batches)
                if batches:
                    in_flight = self._requests.add(node, [b.tp for b in batches], cluster)
                    self._nursery.start_soon(self._send_request, in_flight, batches, broker.address)
            if gated:
                for node in check.blocked:
                    acc.update_node_latency(node, now, can_drain=False)
                waiting = waiting or bool(check.blocked)
            wake_at = min(check.next_check_ms, acc.next_expiry_ms())
            if txn is not None and any(map(txn.manager.needs_adding, acc.queued_partitions())):
                wake_at = now  # batches moved to a partition not in the transaction yet
            if waiting:  # look again soon: the leader may come back, or be left out
                recheck = min(max(acc.config.availability_timeout_ms / 4, 10), 100)
                wake_at = min(wake_at, now + recheck)
            if wake_at == math.inf:
                await self._wakeup.wait()
            else:
                with trio.move_on_after(sleep_seconds(wake_at - current_ms())):
                    await self._wakeup.wait()

    def _connect_soon(self, address: tuple[str, int]) -> None:
        """Connect to a leader in the background (once at a time), then look again."""
        if address in self._connecting or self._nursery is None:
            return
        self._connecting.add(address)
        self._nursery.start_soon(self._connect, address)

    async def _connect(self, address: tuple[str, int]) -> None:
        try:
            await self._pool.get(*address)
        except TributaryError as exc:
            log.info("connecting to %s:%d failed: %s", *address, exc)
            self.metadata.request_update()
            await trio.sleep(self.accumulator.config.retry_backoff_ms / 1000)
        finally:
            self._connecting.discard(address)
            self.wake()

    async def _init_producer_id(self) -> bool:
        """A producer id from any known broker; False if none gave one. A broker's
        refusal fails every record (nothing could be sent)."""
        try:
            return await self.idempotence.init_producer_id(
                self._pool,
                self.metadata.cluster.brokers.values(),
                self.config.request_timeout_ms / 1000,
            )
        except TributaryError as error:
            refusal = error
        self.fail_all(lambda: refusal)  # one error for all, as the broker gave one answer
        return False

    # --- one request -----------------------------------------------------------------

    def _build_request(self, batches: list[ProducerBatch]) -> m.ProduceRequest:
        codec = self.config.codec
        by_topic: dict[str, list[m.ProducePartition]] = {}
        for batch in batches:
            by_topic.setdefault(batch.tp.topic, []).append(
                m.ProducePartition(partition=batch.tp.partition, records=batch.encode(codec))
            )
        return m.ProduceRequest(
            transactional_id=self.config.transactional_id,
            acks=self.config.acks,
            timeout_ms=int(self.config.request_timeout_ms),
            topics=[
                m.ProduceTopic(name=name, partitions=parts) for name, parts in by_topic.items()
            ],
        )

    async def _send_request(
        self, in_flight: InFlightRequest, batches: list[ProducerBatch], address: tuple[str, int]
    ) -> None:
        node = in_flight.node
        try:
            request = self._build_request(batches)
            if self.config.acks == 0:
                connection = await self._pool.get(*address)
                await connection.send_no_response(request)
                for batch in batches:
                    self.finish(batch, base_offset=-1)
                return
            timeout_s = (self.config.request_timeout_ms + REQUEST_TIMEOUT_MARGIN_MS) / 1000
            response = None
            with in_flight.scope:
                response = await self._pool.request(*address, request, timeout_s=timeout_s)
            if response is None:  # abandoned: the leader moved
                raise in_flight.error()
            self._handle_response(batches, response)
        except TributaryError as exc:  # connection failure or a request-level error
            if isinstance(exc, BrokerConnectionError):
                log.info("produce to broker %d failed: %s", node, exc)
                self.metadata.request_update()
            for batch in batches:
                self._retry_or_fail(batch, exc.code, exc)
        except Exception as exc:  # a bug: fail these records rather than hang them
            log.exception("producing to broker %d failed", node)
            for batch in batches:
                self.finish(batch, error=exc)
        finally:
            self._requests.remove(in_flight)
            self.wake()

    def _handle_response(self, batches: list[ProducerBatch], response: m.ProduceResponse) -> None:
        answers = {
            (topic.name, part.partition): part
            for topic in response.topics
            for part in topic.partitions
        }
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                error = TributaryError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"the response did not mention {batch.tp}"
                )
                self.finish(batch, error=error)
                continue
            code = ErrorCode.from_code(answer.error_code)
            if code is ErrorCode.NONE:
                self.finish(
                    batch, base_offset=answer.base_offset, log_append_time=answer.log_append_time_ms
                )
            elif batch.base_sequence >= 0 and code in IDEMPOTENCE_ERRORS:
                self._idempotence_error(batch, code, answer.error_message)
            else:
                self._retry_or_fail(batch, code, TributaryError(code, answer.error_message))

    # --- a batch's outcome -----------------------------------------------------------

    def _idempotence_error(self, batch: ProducerBatch, code: ErrorCode, message: str | None):
        if batch.state is BatchState.DONE:  # expired while in flight
            self.accumulator.release(batch)
            return
        outcome = self.idempotence.on_error(batch, code)
        if outcome is IdempotenceOutcome.WRITTEN:
            self.finish(batch, base_offset=-1)
            return
        error = TributaryError(code, message)
        if outcome is IdempotenceOutcome.RETRY:
            self._retry_or_fail(batch, code, error, retriable=True)  # restamped when drained
            return
        log.warning("failed to deliver %d record(s) to %s: %s", batch.record_count, batch.tp, error)
        self.finish(batch, error=error)

    def _retry_or_fail(
        self,
        batch: ProducerBatch,
        code: ErrorCode,
        error: TributaryError,
        *,
        retriable: bool | None = None,
    ) -> None:
        now = current_ms()
        if batch.state is BatchState.DONE:  # expired while in flight
            self.accumulator.release(batch)
            return
        if retriable is None:
            retriable = error.retriable
        in_time = now - batch.created_ms < self.accumulator.config.delivery_timeout_ms
        if retriable and batch.attempts < self.config.retries and in_time:
            log.info(
                "retrying %d record(s) for %s (attempt %d) after %s",
                batch.record_count,
                batch.tp,
                batch.attempts + 1,
                error,
            )
            if code in _STALE_METADATA_ERRORS:
                self.metadata.request_update()
            if self.on_retry is not None:
                self.on_retry(batch.tp, error)
            batch.last_error = error
            self.accumulator.reenqueue(batch, now)
            return
        if retriable and not in_time:
            self._expire(batch, now, cause=error)
            return
        log.warning("failed to deliver %d record(s) to %s: %s", batch.record_count, batch.tp, error)
        self.finish(batch, error=error)

    def _expire(self, batch: ProducerBatch, now: float, cause: BaseException | None = None) -> None:
        self.idempotence.maybe_bump_epoch_on_expiry(batch)
        waited = now - batch.created_ms
        cause = cause or batch.last_error
        error = DeliveryTimeoutError(
            f"Expiring {batch.record_count} record(s) for {batch.tp}: {waited:.0f} ms has "
            "passed since batch creation" + (f" (last error: {cause})" if cause is not None else "")
        )
        if batch.state is BatchState.IN_FLIGHT:
            batch.fail(error)  # released (and unmuted) when its response arrives
            return
        self.finish(batch, error=error)

    def _fail_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        self.finish(batch, error=error)

    def finish(
        self,
        batch: ProducerBatch,
        *,
        base_offset: int = -1,
        log_append_time: int = -1,
        error: BaseException | None = None,
    ) -> None:
        """The batch's outcome: complete it (or fail it with `error`), free its memory."""
        if error is None:
            batch.complete(base_offset, log_append_time)
        elif batch.fail(error) and self.transactions is not None:
            self.transactions.on_batch_failed(error)
        self.accumulator.release(batch)
        self.memory_freed.set()
        self.memory_freed = trio.Event()
