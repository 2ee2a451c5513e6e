"""A rate over sampled windows and its throttle time, as Kafka's metrics compute them.

How it works (Kafka's `SampledStat` + `Rate` + `QuotaUtils`): a `SampledRate` keeps up to
`samples` windows (`quota.window.num`, 11) of `window_ms` (`quota.window.size.seconds`,
1 s). A recorded value goes into the current window, or, once that window is
`window_ms` old, into the next one (the oldest reused). The rate is the sum of every
window not older than `samples * window_ms` divided by the elapsed time since the
oldest window started, counted as at least `samples - 1` whole windows (so a first burst
is measured over ten seconds, not over its own few milliseconds). When a recorded value
takes the rate over its bound, the throttle time is Kafka's
`(rate - bound) / bound * window size` in ms: how long the client must stay quiet for
the rate to come back to the bound. Times are `now_ms` from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms, self.value = now_ms, 0.0


class SampledRate:
    """A rate per second over `samples` windows of `window_ms` (Kafka's `Rate`)."""

    __slots__ = ("samples", "window_ms", "_windows", "_current", "last_record_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        if samples < 2 or window_ms < 1:
            raise ValueError("a rate needs at least 2 samples of at least 1 ms")
        self.samples, self.window_ms = samples, window_ms
        self._windows: list[_Sample] = []
        self._current = 0
        self.last_record_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        self.last_record_ms = now_ms

    def rate(self, now_ms: int) -> float:
        """The rate per second at `now_ms`."""
        self._purge(now_ms)
        total = sum(s.value for s in self._windows)
        return total / (self.window_size_ms(now_ms) / 1000)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's `Rate.windowSize`)."""
        self._purge(now_ms)
        oldest = min(self._windows, key=lambda s: s.start_ms, default=None)
        if oldest is None:
            oldest = self._current_sample(now_ms)
        elapsed = now_ms - oldest.start_ms
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._windows:
            self._windows.append(_Sample(now_ms))
        return self._windows[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._windows):
            self._windows.append(_Sample(now_ms))
        else:
            self._windows[self._current].reset(now_ms)
        return self._windows[self._current]

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples * self.window_ms
        for sample in self._windows:
            if now_ms - sample.start_ms >= expire_ms:
                sample.reset(now_ms)


def throttle_time_ms(rate: SampledRate, bound: float, now_ms: int) -> int:
    """Kafka's `QuotaUtils.throttleTime`: 0 while the rate is within `bound` (Kafka's
    `Quota.acceptable`, rate <= bound), else `(rate - bound) / bound * window size`."""
    value = rate.rate(now_ms)
    if value <= bound:
        return 0
    if bound <= 0:
        return rate.samples * rate.window_ms  # nothing is allowed: the longest wait
    return round((value - bound) / bound * rate.window_size_ms(now_ms))
