"""A broker-wide budget for request bytes in flight (Kafka's KIP-72 memory pool,
`queued.max.request.bytes`).

How it works: a connection that has read a frame's size prefix reserves the whole
frame from the pool before it reads (and buffers) more of it, and gives the bytes back
once the request has been handled or the connection closes. `try_reserve(n)` takes `n`
bytes if they are free; `reserve(n)` waits until they are. Waiters are served
first-fit in arrival order on every `release()`: a waiting 100 MiB frame does not hold
up a 1 KiB request behind it, so a few huge frames cannot stop everyone else (the price
is that a huge frame can wait while small ones keep the pool busy). A request larger
than the whole pool could never be served: the shell refuses it (its frame limit is
at most the capacity), so `reserve` rejects it too rather than wait forever.

A capacity of -1 (Kafka's default) means no limit: every reservation succeeds at once.
"""

from __future__ import annotations

import trio

UNBOUNDED = -1


class _Waiter:
    __slots__ = ("event", "granted", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.granted = False
        self.event = trio.Event()


class MemoryPool:
    def __init__(self, capacity: int) -> None:
        if capacity < 0 and capacity != UNBOUNDED:
            raise ValueError("capacity must be >= 0, or -1 for no limit")
        self.capacity = capacity
        self.used = 0
        self._waiters: list[_Waiter] = []

    @property
    def bounded(self) -> bool:
        return self.capacity != UNBOUNDED

    @property
    def available(self) -> int | None:
        """Free bytes (None without a limit)."""
        return self.capacity - self.used if self.bounded else None

    @property
    def waiting(self) -> int:
        """Reservations waiting for memory."""
        return len(self._waiters)

    def _fits(self, size: int) -> bool:
        return not self.bounded or self.used + size <= self.capacity

    def try_reserve(self, size: int) -> bool:
        """Take `size` bytes if they are free now (first-fit: waiters for more do not block it)."""
        if size < 0:
            raise ValueError("size must be >= 0")
        if self._fits(size):
            self.used += size
            return True
        return False

    async def reserve(self, size: int) -> None:
        """Take `size` bytes, waiting until they are free. Cancellation-safe: a
        cancelled reservation holds nothing."""
        if self.bounded and size > self.capacity:
            raise ValueError(f"{size} bytes can never fit a pool of {self.capacity}")
        if self.try_reserve(size):
            await trio.lowlevel.checkpoint()
            return
        waiter = _Waiter(size)
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self.release(size)
            else:
                self._waiters.remove(waiter)
            raise

    def release(self, size: int) -> None:
        """Give back `size` bytes and wake the waiters that now fit, first-fit in order."""
        self.used -= size
        if self.used < 0:
            raise AssertionError("released more than was reserved")
        if not self._waiters:
            return
        still_waiting = []
        for waiter in self._waiters:
            if self._fits(waiter.size):
                self.used += waiter.size
                waiter.granted = True
                waiter.event.set()
            else:
                still_waiting.append(waiter)
        self._waiters = still_waiting
