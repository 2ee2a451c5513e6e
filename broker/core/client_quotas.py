"""Client quotas: what each (user, client-id) used, and how long it must wait.

How it works (Kafka 2.8's ClientQuotaManager and ClientRequestQuotaManager): one
`ClientQuotaManager` per quota type: `producer_byte_rate` (bytes of Produce requests),
`consumer_byte_rate` (bytes of consumer Fetch responses) and `request_percentage`
(handler time, as a percentage of one thread). `record(user, client_id, value, now_ms)`
finds the quota that applies (quota_entities.py: Kafka's precedence, read from the
shared `QuotaConfigs` on every call, so a change applies at the next request), adds
the value to the sensor of that quota's metric tags (a `SampledRate`, quota_rate.py)
and answers the throttle time: 0 within the quota, else Kafka's formula; request
throttles are capped at one window (Kafka's `boundedThrottleTime`), byte-rate ones
are not. `ClientQuotas` holds the three, with `quota.window.num` and
`quota.window.size.seconds`.

Sensors are bounded: one not recorded for `expire_ms` (an hour, Kafka's inactive sensor
expiration) is dropped, and past `max_sensors` the least recently recorded goes first,
so no stream of new client-ids grows the broker's memory without bound. Each sensor
also keeps the throttle time it handed out (Kafka's `throttle-time` metric) for the
broker's metrics (`snapshot`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from broker.core.quota_entities import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaConfigs,
)
from broker.core.quota_rate import SampledRate, throttle_time_ms

INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000
MAX_SENSORS = 10_000
# Kafka's ClientRequestQuotaManager: request time in nanoseconds as percent-seconds.
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    samples: int = 11  # quota.window.num
    window_ms: int = 1000  # quota.window.size.seconds, in ms


@dataclass(slots=True)
class _Sensor:
    rate: SampledRate
    bound: float = math.inf
    throttle_ms_total: int = 0
    throttled: int = 0
    max_throttle_ms: int = 0


@dataclass(frozen=True, slots=True)
class SensorSnapshot:
    """One quota sensor for the metrics: its tags, rate, quota and throttles so far."""

    user: str
    client_id: str
    rate: float
    bound: float
    throttle_ms_total: int
    throttled: int
    max_throttle_ms: int


class ClientQuotaManager:
    """Sensors and throttle times of one quota type."""

    def __init__(
        self,
        quota: str,
        configs: QuotaConfigs,
        settings: QuotaSettings = QuotaSettings(),
        *,
        bounded: bool = False,
        max_sensors: int = MAX_SENSORS,
        expire_ms: int = INACTIVE_SENSOR_EXPIRATION_MS,
    ) -> None:
        self.quota = quota
        self.configs = configs
        self.settings = settings
        self.max_throttle_ms = settings.window_ms if bounded else None
        self.max_sensors = max_sensors
        self.expire_ms = expire_ms
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self._next_expiry_ms = 0

    def quota_applies(self, user: str, client_id: str) -> bool:
        return not math.isinf(self.configs.find(self.quota, user, client_id).bound)

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Add `value` for (user, client_id) at `now_ms`; the throttle time in ms."""
        match = self.configs.find(self.quota, user, client_id)
        key = (match.user_tag, match.client_tag)
        sensor = self._sensors.pop(key, None)  # re-inserted last: most recently recorded
        if sensor is None:
            self._expire(now_ms)
            sensor = _Sensor(SampledRate(self.settings.samples, self.settings.window_ms))
        self._sensors[key] = sensor
        sensor.rate.record(value, now_ms)
        sensor.bound = match.bound
        if math.isinf(match.bound):
            return 0
        throttle = throttle_time_ms(sensor.rate, match.bound, now_ms)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        if throttle > 0:
            sensor.throttle_ms_total += throttle
            sensor.throttled += 1
            sensor.max_throttle_ms = max(sensor.max_throttle_ms, throttle)
        return throttle

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (Kafka's `unrecordQuotaSensor`)."""
        match = self.configs.find(self.quota, user, client_id)
        sensor = self._sensors.get((match.user_tag, match.client_tag))
        if sensor is not None:
            sensor.rate.record(-value, now_ms)

    def snapshot(self, now_ms: int) -> list[SensorSnapshot]:
        out = []
        for (user, client_id), sensor in self._sensors.items():
            out.append(
                SensorSnapshot(
                    user,
                    client_id,
                    sensor.rate.rate(now_ms),
                    sensor.bound,
                    sensor.throttle_ms_total,
                    sensor.throttled,
                    sensor.max_throttle_ms,
                )
            )
        return out

    def __len__(self) -> int:
        return len(self._sensors)

    def _expire(self, now_ms: int) -> None:
        if now_ms >= self._next_expiry_ms:
            self._next_expiry_ms = now_ms + min(self.expire_ms, 60_000)
            expired = [
                key
                for key, sensor in self._sensors.items()
                if now_ms - sensor.rate.last_record_ms >= self.expire_ms
            ]
            for key in expired:
                del self._sensors[key]
        while len(self._sensors) >= self.max_sensors:
            del self._sensors[next(iter(self._sensors))]  # the least recently recorded


class ClientQuotas:
    """The broker's three client quota managers over one `QuotaConfigs`."""

    def __init__(self, settings: QuotaSettings = QuotaSettings()) -> None:
        self.configs = QuotaConfigs()
        self.settings = settings
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, self.configs, settings)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, self.configs, settings)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, self.configs, settings, bounded=True)

    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request)


def nanos_to_percentage(nanos: float) -> float:
    return nanos * NANOS_TO_PERCENTAGE_PER_SECOND
