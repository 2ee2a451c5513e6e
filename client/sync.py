"""Synchronous facades for scripts: `SyncProducer`, `SyncConsumer`, `SyncAdmin`.

How it works: each facade starts a background thread running a Trio event loop (a
`_Portal`). The async client is opened *inside* that loop by a task that holds its
`async with` open until the facade is closed, so the client's background tasks keep
running between calls. Every method is one `trio.from_thread.run(..., trio_token=...)`
into that loop; exceptions come back to the caller as themselves. `close()` (or leaving
the `with` block) exits the client's context (the producer flushes, a group consumer
commits and leaves its group) and joins the thread. Not for use from inside a Trio loop
(that would block it). A group consumer's rebalance and commit callbacks run on a worker
thread while the loop waits for them, so they may call the facade's methods (commit()
in on_revoked, say).

    with SyncProducer("localhost:9092", acks="all") as producer:
        producer.send("events", b"hello").get(timeout=10)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import trio

from client.admin import Admin, open_admin
from client.consumer import Consumer, ConsumerBatch, ConsumerRecord, open_consumer
from client.consumer.group.offsets import OffsetAndEpoch
from client.producer import (
    DeliveryHandle,
    DeliveryHandles,
    Producer,
    RecordMetadata,
    open_producer,
)
from client.protocol.types import TopicPartition

T = TypeVar("T")

# How long close() waits for the loop thread to finish after the client closed.
_JOIN_TIMEOUT_S = 30.0


class _Portal:
    """A Trio loop in a daemon thread holding one async context manager open."""

    def __init__(self, open_client: Callable[[], AbstractAsyncContextManager[T]], name: str):
        self._open_client = open_client
        self._token: trio.lowlevel.TrioToken | None = None
        self._client: Any = None
        self._error: BaseException | None = None
        self._started = threading.Event()
        self._stop: trio.Event | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join(_JOIN_TIMEOUT_S)
            error, self._error = self._error, None
            raise error

    @property
    def client(self) -> Any:
        return self._client

    def _main(self) -> None:
        async def hold() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            try:
                async with self._open_client() as client:
                    self._client = client
                    self._started.set()
                    await self._stop.wait()
            except BaseException as exc:  # handed to the constructor or to close()
                self._error = exc
            finally:
                self._started.set()

        try:
            trio.run(hold)
        except BaseException as exc:
            self._error = self._error or exc
            self._started.set()

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run async `fn(*args)` on the loop and return (or raise) its outcome."""
        if self._closed:
            raise RuntimeError("this client is closed")
        try:
            return trio.from_thread.run(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise RuntimeError("this client's event loop has stopped") from self._error

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise RuntimeError("this client is closed")
        try:
            return trio.from_thread.run_sync(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise RuntimeError("this client's event loop has stopped") from self._error

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(_JOIN_TIMEOUT_S)
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class _Facade:
    _portal: _Portal

    def close(self) -> None:
        self._portal.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SyncDeliveryHandle:
    """The outcome of one `SyncProducer.send()`."""

    def __init__(self, portal: _Portal, handle: DeliveryHandle) -> None:
        self._portal = portal
        self._handle = handle

    def done(self) -> bool:
        return self._handle.done()  # set once, on the loop thread: safe to read from here

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for the acknowledgement; `TimeoutError` after `timeout` seconds. Works
        after the producer is closed too (its outcome is known by then)."""
        if self._handle.done():
            return self._handle.result()
        return _wait_on_loop(self._portal, self._handle, timeout, "no acknowledgement")


def _wait_on_loop(portal: _Portal, awaitable: Any, timeout: float | None, what: str) -> Any:
    """Await `awaitable` (a handle: awaitable again each time) on the portal's loop;
    `TimeoutError` saying `what` after `timeout` seconds."""

    async def wait() -> Any:
        if timeout is None:
            return await awaitable
        with trio.move_on_after(timeout):
            return await awaitable
        raise TimeoutError(f"{what} within {timeout} s")

    return portal.run(wait)


class SyncDeliveryHandles:
    """The outcome of one `SyncProducer.send_many()`: `len()`, `done()`, and `get()`
    for every record's `RecordMetadata` in the order given (the first failure raised)."""

    def __init__(self, portal: _Portal, handles: DeliveryHandles) -> None:
        self._portal = portal
        self._handles = handles

    def __len__(self) -> int:
        return len(self._handles)

    def done(self) -> bool:
        return self._handles.done()

    def get(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Wait for every acknowledgement; `TimeoutError` after `timeout` seconds."""
        if self._handles.done():
            return self._handles.results()
        return _wait_on_loop(self._portal, self._handles, timeout, "not every acknowledgement")


class SyncProducer(_Facade):
    """`Producer` for synchronous code; keyword arguments as `open_producer`."""

    def __init__(self, bootstrap: str | Iterable[str], **config: Any) -> None:
        self._portal = _Portal(lambda: open_producer(bootstrap, **config), "tributary-producer")
        self.producer: Producer = self._portal.client

    def send(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | str]] = (),
        timestamp_ms: int | None = None,
    ) -> SyncDeliveryHandle:
        async def send() -> DeliveryHandle:
            return await self.producer.send(
                topic, value, key, partition, tuple(headers), timestamp_ms
            )

        return SyncDeliveryHandle(self._portal, self._portal.run(send))

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | str | None],
        keys: Sequence[bytes | str | None] | None = None,
        partition: int | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | str]]] | None = None,
        timestamp_ms: int | Sequence[int] | None = None,
    ) -> SyncDeliveryHandles:
        """`Producer.send_many()`: many records in one call into the loop."""

        async def send_many() -> DeliveryHandles:
            return await self.producer.send_many(
                topic, values, keys, partition, headers, timestamp_ms
            )

        return SyncDeliveryHandles(self._portal, self._portal.run(send_many))

    def flush(self) -> None:
        self._portal.run(self.producer.flush)


class SyncConsumer(_Facade):
    """`Consumer` for synchronous code; keyword arguments as `open_consumer`."""

    def __init__(self, bootstrap: str | Iterable[str], **config: Any) -> None:
        self._portal = _Portal(lambda: open_consumer(bootstrap, **config), "tributary-consumer")
        self.consumer: Consumer = self._portal.client

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._portal.run_sync(self.consumer.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._portal.run_sync(self.consumer.assignment)

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        self._portal.run_sync(self.consumer.seek, tp, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._portal.run_sync(self.consumer.seek_to_beginning, partitions)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._portal.run_sync(self.consumer.seek_to_end, partitions)

    def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        return self._portal.run(self.consumer.position, tp)

    def poll(self, timeout_ms: float = 0) -> list[ConsumerRecord]:
        return self._portal.run(self.consumer.poll, timeout_ms)

    def poll_batches(self, timeout_ms: float = 0) -> list[ConsumerBatch]:
        return self._portal.run(self.consumer.poll_batches, timeout_ms)

    def partitions_for(self, topic: str) -> list[int]:
        return self._portal.run(self.consumer.partitions_for, topic)

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._portal.run(self.consumer.beginning_offsets, list(partitions))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._portal.run(self.consumer.end_offsets, list(partitions))

    # --- consumer groups (a group_id is needed) ---------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str,
        *,
        on_revoked: Callable[[set[TopicPartition]], Any] | None = None,
        on_assigned: Callable[[set[TopicPartition]], Any] | None = None,
        on_lost: Callable[[set[TopicPartition]], Any] | None = None,
    ) -> None:
        """As `Consumer.subscribe`; the callbacks are plain functions, run on a worker
        thread (they may call this consumer's methods)."""
        topics = [topics] if isinstance(topics, str) else list(topics)

        def subscribe() -> None:
            self.consumer.subscribe(
                topics,
                on_revoked=_in_thread(on_revoked),
                on_assigned=_in_thread(on_assigned),
                on_lost=_in_thread(on_lost),
            )

        self._portal.run_sync(subscribe)

    def unsubscribe(self) -> None:
        self._portal.run(self.consumer.unsubscribe)

    def subscription(self) -> set[str]:
        return self._portal.run_sync(self.consumer.subscription)

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """As `Consumer.commit`: waits; raises `CommitFailedError` and the like."""
        self._portal.run(self.consumer.commit, offsets)

    def commit_async(
        self,
        offsets: dict[TopicPartition, int] | None = None,
        callback: Callable[[dict[TopicPartition, OffsetAndEpoch], BaseException | None], Any]
        | None = None,
    ) -> None:
        """As `Consumer.commit_async`; `callback` runs on a worker thread."""
        self._portal.run_sync(self.consumer.commit_async, offsets, _in_thread(callback))

    def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int | None]:
        return self._portal.run(self.consumer.committed, list(partitions))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records forever (polling with a 1 s timeout); stop by breaking out."""
        while True:
            yield from self.poll(1000)


def _in_thread(callback: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """`callback` as a coroutine function that runs it on a worker thread."""
    if callback is None:
        return None

    async def run(*args: Any) -> Any:
        return await trio.to_thread.run_sync(callback, *args)

    return run


class SyncAdmin(_Facade):
    """`Admin` for synchronous code: every `Admin` coroutine method as a plain method."""

    def __init__(self, bootstrap: str | Iterable[str], **config: Any) -> None:
        self._portal = _Portal(lambda: open_admin(bootstrap, **config), "tributary-admin")
        self.admin: Admin = self._portal.client

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.admin, name)
        if not callable(method) or name.startswith("_"):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            async def run() -> Any:
                return await method(*args, **kwargs)

            return self._portal.run(run)

        call.__name__ = name
        call.__doc__ = method.__doc__
        return call
