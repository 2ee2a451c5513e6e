"""The pure client quota core: Kafka's sampled rate and throttle time, and which entity's
quota applies to a (user, client-id) (broker/core/quota_rate.py, quota_entities.py,
client_quotas.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.client_quotas import ClientQuotaManager, ClientQuotas, QuotaSettings
from broker.core.quota_entities import (
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaConfigs,
    QuotaEntity,
    precedence,
)
from broker.core.quota_rate import SampledRate, throttle_time_ms

MIB = 1024 * 1024


def test_a_first_burst_is_measured_over_ten_windows_not_its_own_milliseconds():
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(10 * MIB, 0)
    assert rate.window_size_ms(5) == 10_005  # 5 ms elapsed, padded to 10 full windows
    assert rate.rate(5) == pytest.approx(10 * MIB / 10.005)


def test_throttle_time_is_kafkas_formula():
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(20 * MIB, 0)  # 2 MiB/s over the 10 s window: twice the bound
    assert throttle_time_ms(rate, MIB, 0) == 10_000  # (2 - 1) / 1 * 10 s
    within = SampledRate(samples=11, window_ms=1000)
    within.record(MIB, 0)
    assert throttle_time_ms(within, MIB, 0) == 0


def test_old_windows_are_forgotten():
    rate = SampledRate(samples=3, window_ms=100)
    rate.record(1000, 0)
    assert rate.rate(50) == pytest.approx(1000 / 0.25)
    assert rate.rate(300) == 0  # every window older than 3 x 100 ms was reset


@settings(max_examples=40, deadline=None)
@given(
    bound=st.integers(min_value=64 * 1024, max_value=5 * MIB),
    share=st.floats(min_value=0.005, max_value=0.25),
    gap_ms=st.integers(min_value=0, max_value=20),
)
def test_a_client_that_waits_its_throttle_times_gets_its_quota(bound, share, gap_ms):
    """A producer sending as fast as it may (waiting out each throttle time) is held to
    about its byte rate over a long run, as the issue's 0.8-1.2 MiB/s asks (requests
    of at most a quarter second's worth of the quota)."""
    size = max(1024, int(bound * share))
    configs = QuotaConfigs()
    configs.set(QuotaEntity(client_id="c"), {PRODUCER_BYTE_RATE: str(bound)})
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, configs)
    now, sent, duration_ms = 0, 0, 60_000
    while now < duration_ms:
        throttle = manager.record("ANONYMOUS", "c", size, now)
        sent += size
        now += max(throttle, 1) + gap_ms
    seconds = now / 1000
    unthrottled = size * 1000 / (1 + gap_ms)  # what it would send without a quota
    assert sent >= 0.8 * min(bound, unthrottled) * seconds
    # Kafka's allowance: a first burst of up to the 10 padded windows' worth, one
    # request over, then the quota.
    assert sent <= 1.05 * bound * seconds + 10 * bound + size


def test_request_throttle_is_capped_at_one_window_and_byte_rate_throttle_is_not():
    quotas = ClientQuotas(QuotaSettings(samples=11, window_ms=1000))
    quotas.configs.set(
        QuotaEntity(user=DEFAULT), {REQUEST_PERCENTAGE: "1", PRODUCER_BYTE_RATE: "1000"}
    )
    # 50 thread-seconds as percent-seconds: far over 1 %
    assert quotas.request.record("alice", "c", 5000.0, 0) == 1000
    assert quotas.produce.record("alice", "c", 1_000_000, 0) > 100_000


def test_no_quota_means_no_throttle():
    quotas = ClientQuotas()
    assert quotas.produce.record("alice", "c", 10**12, 0) == 0
    assert not quotas.produce.quota_applies("alice", "c")


# -- which entity applies ------------------------------------------------------------------
ALL_ENTITIES = precedence("alice", "app")


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from(range(8)), min_size=1))
def test_the_most_specific_entity_applies(configured):
    configs = QuotaConfigs()
    for index in configured:
        configs.set(ALL_ENTITIES[index], {PRODUCER_BYTE_RATE: str(1000 + index)})
    match = configs.find(PRODUCER_BYTE_RATE, "alice", "app")
    best = min(configured)
    assert match.bound == 1000 + best
    assert match.entity == ALL_ENTITIES[best]


def test_the_precedence_is_kafkas():
    assert [e.path() for e in precedence("u", "c")] == [
        "users/u/clients/c",
        "users/u/clients/<default>",
        "users/u",
        "users/<default>/clients/c",
        "users/<default>/clients/<default>",
        "users/<default>",
        "clients/c",
        "clients/<default>",
    ]


def test_metric_tags_follow_the_entity_that_applies():
    configs = QuotaConfigs()
    configs.set(QuotaEntity(user=DEFAULT), {PRODUCER_BYTE_RATE: "100"})
    configs.set(QuotaEntity(client_id="app"), {PRODUCER_BYTE_RATE: "200"})
    user_match = configs.find(PRODUCER_BYTE_RATE, "alice", "app")
    assert (user_match.bound, user_match.user_tag, user_match.client_tag) == (100, "alice", "")
    configs.set(QuotaEntity(user=DEFAULT), {})  # the user default removed
    client_match = configs.find(PRODUCER_BYTE_RATE, "alice", "app")
    assert (client_match.bound, client_match.user_tag, client_match.client_tag) == (200, "", "app")
    none = configs.find(PRODUCER_BYTE_RATE, "alice", "other")
    assert math.isinf(none.bound) and (none.user_tag, none.client_tag) == ("", "other")


def test_quotas_are_per_type_and_other_keys_are_ignored():
    configs = QuotaConfigs()
    configs.set(
        QuotaEntity(user="alice"),
        {"SCRAM-SHA-512": "salt=...", PRODUCER_BYTE_RATE: "1048576", REQUEST_PERCENTAGE: "x"},
    )
    assert configs.entities() == {QuotaEntity(user="alice"): {PRODUCER_BYTE_RATE: 1048576.0}}
    assert math.isinf(configs.find(REQUEST_PERCENTAGE, "alice", "c").bound)


def test_names_are_matched_sanitized():
    configs = QuotaConfigs()
    configs.set(QuotaEntity(user="CN%3Dbob"), {PRODUCER_BYTE_RATE: "5"})
    assert configs.find(PRODUCER_BYTE_RATE, "CN=bob", "c").bound == 5


@pytest.mark.parametrize(
    "path, entity",
    [
        ("users/a", QuotaEntity(user="a")),
        ("users/<default>/clients/c", QuotaEntity(DEFAULT, "c")),
        ("clients/<default>", QuotaEntity(client_id=DEFAULT)),
        ("topics/t", None),
        ("users/a/clients", None),
        ("users//clients/c", None),
    ],
)
def test_entity_paths(path, entity):
    assert QuotaEntity.from_path(path) == entity
    if entity is not None:
        assert entity.path() == path


def test_sensors_are_bounded_and_expire():
    configs = QuotaConfigs()
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, configs, max_sensors=100, expire_ms=1000)
    for i in range(1000):
        manager.record("u", f"client-{i}", 1, 0)
    assert len(manager) == 100
    manager.record("u", "late", 1, 120_000)
    assert len(manager) == 1  # the others were idle for longer than expire_ms


def measured_mib_per_s(samples: int, total_mib: int) -> tuple[float, float | None]:
    """A producer of 256 KiB requests against producer_byte_rate=1 MiB/s that waits each
    throttle time (its muted connection), 2 ms a round trip, on the core's own clock:
    the MiB/s it measures over the run, and the MiB sent when it was first throttled."""
    size = 256 * 1024
    configs = QuotaConfigs()
    configs.set(QuotaEntity(client_id="c"), {PRODUCER_BYTE_RATE: str(MIB)})
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, configs, QuotaSettings(samples=samples))
    now, sent, first_throttled = 0, 0, None
    while sent < total_mib * MIB:
        throttle = manager.record("ANONYMOUS", "c", size, now)
        sent += size
        if throttle and first_throttled is None:
            first_throttled = sent / MIB
        now += throttle + 2
    return sent / MIB / (now / 1000), first_throttled


def test_why_the_quota_integration_test_measures_over_two_windows():
    # tests/integration/test_client_quotas.py sends 8 MiB at 1 MiB/s and expects 0.8-1.2
    # MiB/s. With Kafka's 11 windows a new client's first ten seconds' worth (10 MiB)
    # goes unthrottled: 8 MiB are never throttled at all, and a run lands within 20 %
    # only from about 60 MiB (a minute per run).
    rate, first = measured_mib_per_s(11, 8)
    assert first is None and rate > 10
    rate, first = measured_mib_per_s(11, 16)
    assert first is not None and first > 10 and rate > 1.2
    rate, _ = measured_mib_per_s(11, 60)
    assert 0.8 <= rate <= 1.2
    # With 2 windows the burst is about one window's worth: 8 MiB measure within 20 %.
    rate, first = measured_mib_per_s(2, 8)
    assert first is not None and first <= 1.5 and 0.8 <= rate <= 1.2
