"""Dynamic broker configs and the config APIs: the four layers and what DescribeConfigs
says of them (pure), then DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of
topics and brokers against an in-process cluster of real brokers (tests/support/
cluster.py): ZooKeeper's znodes and notifications as Kafka 2.8 writes them, changes
applied live, Kafka's error codes."""

from __future__ import annotations

import json

import pytest

from broker.config import BrokerConfig
from broker.dynamic_config import BrokerConfigLayers, DynamicConfigError
from client.admin import open_admin
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.support.cluster import open_test_cluster

# --- the layers, pure ------------------------------------------------------------------------


def layers(**static: str) -> BrokerConfigLayers:
    return BrokerConfigLayers(BrokerConfig({"broker.id": "1", **static}))


def entry(entries: list[m.DescribeConfigsResult], name: str) -> m.DescribeConfigsResult:
    (found,) = [e for e in entries if e.name == name]
    return found


def synonyms(e: m.DescribeConfigsResult) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in e.synonyms]


def test_precedence_is_broker_then_default_then_static_then_kafkas():
    config = layers(**{"log.retention.hours": "24", "log.segment.bytes": "1000000"})
    assert config.current.default_log_config().retention_ms == 24 * 3_600_000
    config.update(default={"log.retention.ms": "5000", "log.segment.bytes": "2000000"})
    assert config.current.default_log_config().retention_ms == 5000  # .ms wins over .hours
    config.update(broker={"log.segment.bytes": "3000000"})
    assert config.current.default_log_config().segment_bytes == 3_000_000
    described = config.describe_broker(None, per_broker=True, include_synonyms=True)
    segment = entry(described, "log.segment.bytes")
    assert (segment.value, segment.config_source, segment.read_only) == ("3000000", 2, False)
    assert synonyms(segment) == [
        ("log.segment.bytes", "3000000", m.SOURCE_DYNAMIC_BROKER_CONFIG),
        ("log.segment.bytes", "2000000", m.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.segment.bytes", "1000000", m.SOURCE_STATIC_BROKER_CONFIG),
        ("log.segment.bytes", str(1 << 30), m.SOURCE_DEFAULT_CONFIG),
    ]
    retention = entry(described, "log.retention.ms")
    assert synonyms(retention) == [
        ("log.retention.ms", "5000", m.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "24", m.SOURCE_STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", m.SOURCE_DEFAULT_CONFIG),
    ]
    num = entry(described, "num.partitions")
    assert (num.read_only, num.config_source, num.config_type) == (True, 5, 3)
    defaults = config.describe_broker(None, per_broker=False, include_synonyms=True)
    assert [(e.name, e.value) for e in defaults] == [
        ("log.retention.ms", "5000"),
        ("log.segment.bytes", "2000000"),
    ]
    assert all(s.source == 3 for e in defaults for s in e.synonyms)


def test_topic_entries_list_the_override_then_the_broker_synonyms():
    config = layers(**{"compression.type": "lz4"})
    config.update(default={"log.retention.ms": "7000"})
    overrides = {"retention.ms": "100"}
    log_config = config.current.default_log_config().merged(overrides)
    entries = config.describe_topic(overrides, log_config, None, include_synonyms=True)
    assert len(entries) == 26
    retention = entry(entries, "retention.ms")
    assert (retention.value, retention.config_source, retention.config_type) == ("100", 1, 5)
    assert synonyms(retention)[:2] == [
        ("retention.ms", "100", m.SOURCE_DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "7000", m.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
    compression = entry(entries, "compression.type")
    assert (compression.value, compression.config_source) == ("lz4", 4)
    throttled = entry(entries, "leader.replication.throttled.replicas")
    assert (throttled.value, throttled.config_source, throttled.synonyms) == ("", 5, [])
    assert entry(entries, "cleanup.policy").config_type == 7  # LIST


def test_read_only_and_bad_values_are_refused_unknown_names_kept():
    config = layers()
    with pytest.raises(DynamicConfigError, match="Cannot update these configs dynamically"):
        config.validate({"num.partitions": "3", "log.retention.ms": "1"}, per_broker=True)
    with pytest.raises(DynamicConfigError, match="log.retention.ms"):
        config.validate({"log.retention.ms": "soon"}, per_broker=False)
    with pytest.raises(DynamicConfigError, match="cleanup.policy"):
        config.validate({"log.cleanup.policy": "shred"}, per_broker=False)
    with pytest.raises(DynamicConfigError, match="follower.replication.throttled.rate"):
        config.validate({"follower.replication.throttled.rate": "-1"}, per_broker=True)
    accepted = config.validate({"my.custom.setting": "x", "max.connections": "5"}, per_broker=True)
    assert accepted["max.connections"] == 5
    config.update(broker={"my.custom.setting": "x"})
    custom = entry(
        config.describe_broker(["my.custom.setting"], per_broker=True, include_synonyms=True),
        "my.custom.setting",
    )
    assert (custom.value, custom.is_sensitive, custom.config_type) == (None, True, 0)
    kept, dropped = BrokerConfigLayers.sanitize(
        {"num.partitions": "3", "log.retention.ms": "x", "log.segment.bytes": "2000000"}
    )
    assert kept == {"log.segment.bytes": "2000000"}
    assert sorted(dropped) == ["log.retention.ms", "num.partitions"]


# --- the APIs against real brokers ---------------------------------------------------------


async def read_znode(cluster, path: str):
    data, _ = await cluster.live()[0].server.gateway.zk.get(path)
    return json.loads(data)


def log_config(cluster, broker_id: int, topic: str):
    server = cluster.live()[broker_id - 1].server
    return server.log_manager.get_log(TopicPartition(topic, 0)).config


async def test_dynamic_default_retention_applies_live_to_topics_without_override(autojump_clock):
    async with (
        open_test_cluster(2, topics={"plain": 1, "own": 1}) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        assert (
            await admin.alter_configs_incrementally(
                topic="own", set_configs={"retention.ms": "123"}
            )
            is None
        )
        error = await admin.alter_configs_incrementally(
            set_configs={"log.retention.ms": "4242", "compression.type": "gzip"}
        )
        assert error is None
        node = await read_znode(cluster, "/config/brokers/<default>")
        assert node == {
            "version": 1,
            "config": {"log.retention.ms": "4242", "compression.type": "gzip"},
        }
        changes = await cluster.live()[0].server.gateway.zk.get_children("/config/changes")
        entities = [(await read_znode(cluster, f"/config/changes/{c}")) for c in sorted(changes)]
        assert {"version": 2, "entity_path": "brokers/<default>"} in entities

        def applied() -> bool:
            return all(
                log_config(cluster, b.id, "plain").retention_ms == 4242
                for b in cluster.live()
                if b.server.log_manager.get_log(TopicPartition("plain", 0))
            )

        await cluster.until(applied, "the new default on every broker")
        for broker in cluster.live():
            if broker.server.log_manager.get_log(TopicPartition("own", 0)) is not None:
                own = log_config(cluster, broker.id, "own")
                assert (own.retention_ms, own.compression_type) == (123, "gzip")
        entries = await admin.describe_config_entries(topic="plain")
        retention = next(e for e in entries if e.name == "retention.ms")
        assert (retention.value, retention.source) == ("4242", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        # A per-broker value beats the default, on that broker only.
        assert (
            await admin.alter_configs_incrementally(
                broker_id=2, set_configs={"log.retention.ms": "99"}
            )
            is None
        )
        described = await admin.describe_config_entries(broker_id=2)
        retention = next(e for e in described if e.name == "log.retention.ms")
        assert retention.source == "DYNAMIC_BROKER_CONFIG"
        assert retention.synonyms[:2] == [
            ("DYNAMIC_BROKER_CONFIG", "log.retention.ms", "99"),
            ("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms", "4242"),
        ]
        assert cluster.live()[1].server.topic_configs.default.retention_ms == 99
        assert cluster.live()[0].server.topic_configs.default.retention_ms == 4242
        # Deleting the default puts the static/Kafka default back.
        assert (
            await admin.alter_configs_incrementally(
                delete_configs=["log.retention.ms", "compression.type"]
            )
            is None
        )
        await cluster.until(
            lambda: cluster.live()[0].server.topic_configs.default.retention_ms == 604_800_000
        )


async def raw(cluster, broker_id: int, request):
    from client.connection import open_connection

    broker = cluster.live()[broker_id - 1]
    async with open_connection(broker.host, broker.port, connector=cluster.connector()) as conn:
        return await conn.request(request, timeout_s=30)


async def test_error_codes_and_validate_only(autojump_clock):
    async with open_test_cluster(2, topics={"t": 1}) as cluster:
        bad = m.IncrementalAlterConfigsRequest(
            resources=[
                m.AlterConfigsResource(
                    resource_type=m.BROKER_RESOURCE,
                    resource_name="",
                    configs=[
                        m.AlterableConfig(name="num.partitions", config_operation=0, value="3")
                    ],
                ),
                m.AlterConfigsResource(
                    resource_type=m.BROKER_RESOURCE,
                    resource_name="2",  # asked of broker 1
                    configs=[
                        m.AlterableConfig(name="log.retention.ms", config_operation=0, value="3")
                    ],
                ),
                m.AlterConfigsResource(
                    resource_type=m.TOPIC_RESOURCE,
                    resource_name="t",
                    configs=[
                        m.AlterableConfig(name="retention.msx", config_operation=0, value="3")
                    ],
                ),
                m.AlterConfigsResource(
                    resource_type=m.TOPIC_RESOURCE,
                    resource_name="t",
                    configs=[m.AlterableConfig(name="retention.ms", config_operation=0, value="x")],
                ),
                m.AlterConfigsResource(
                    resource_type=m.TOPIC_RESOURCE,
                    resource_name="t",
                    configs=[m.AlterableConfig(name="retention.ms", config_operation=2, value="5")],
                ),
                m.AlterConfigsResource(
                    resource_type=m.TOPIC_RESOURCE,
                    resource_name="nope",
                    configs=[m.AlterableConfig(name="retention.ms", config_operation=0, value="5")],
                ),
            ]
        )
        response = await raw(cluster, 1, bad)
        assert [r.error_code for r in response.responses] == [
            ErrorCode.INVALID_REQUEST,  # read-only
            ErrorCode.INVALID_REQUEST,  # another broker's configs
            ErrorCode.INVALID_CONFIG,  # unknown topic config
            ErrorCode.INVALID_REQUEST,  # a bad value
            ErrorCode.INVALID_REQUEST,  # APPEND to a non-list config
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ]
        assert "Cannot update these configs dynamically: num.partitions" in (
            response.responses[0].error_message
        )
        validate = m.IncrementalAlterConfigsRequest(
            resources=[
                m.AlterConfigsResource(
                    resource_type=m.TOPIC_RESOURCE,
                    resource_name="t",
                    configs=[m.AlterableConfig(name="retention.ms", config_operation=0, value="7")],
                )
            ],
            validate_only=True,
        )
        assert (await raw(cluster, 1, validate)).responses[0].error_code == 0
        assert await cluster.topic_config("t") == {}
        describe = m.DescribeConfigsRequest(
            resources=[
                m.DescribeConfigsResource(resource_type=m.BROKER_RESOURCE, resource_name="2"),
                m.DescribeConfigsResource(resource_type=m.BROKER_RESOURCE, resource_name="x"),
                m.DescribeConfigsResource(resource_type=3, resource_name="g"),
            ]
        )
        results = (await raw(cluster, 1, describe)).results
        assert [r.error_code for r in results] == [ErrorCode.INVALID_REQUEST] * 3
        assert results[0].error_message.startswith("Unexpected broker id, expected 1")


async def test_legacy_alter_configs_replaces_and_incremental_appends(autojump_clock):
    async with (
        open_test_cluster(1, topics={"t": 1}) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        assert (
            await admin.alter_configs_incrementally(
                topic="t", set_configs={"retention.ms": "1", "segment.ms": "5000"}
            )
            is None
        )
        assert await admin.replace_configs({"max.message.bytes": "2000"}, topic="t") is None
        assert await cluster.topic_config("t") == {"max.message.bytes": "2000"}
        assert (
            await admin.alter_configs_incrementally(
                topic="t", append_configs={"cleanup.policy": "compact"}
            )
            is None
        )
        assert (await cluster.topic_config("t"))["cleanup.policy"] == "delete,compact"
        assert (
            await admin.alter_configs_incrementally(
                topic="t", subtract_configs={"cleanup.policy": "delete"}
            )
            is None
        )
        assert (await cluster.topic_config("t"))["cleanup.policy"] == "compact"
        await cluster.until(lambda: log_config(cluster, 1, "t").compact_enabled)
        assert log_config(cluster, 1, "t").max_message_bytes == 2000
        # Legacy AlterConfigs of the broker default: the whole set replaced.
        assert await admin.replace_configs({"log.retention.bytes": "10"}) is None
        assert await admin.replace_configs({"min.insync.replicas": "1"}) is None
        layers = cluster.live()[0].server.broker_configs.layers
        assert layers.dynamic_default == {"min.insync.replicas": "1"}
        error = await admin.replace_configs({"broker.id": "7"}, broker_id=1)
        assert error is not None and error.code is ErrorCode.INVALID_REQUEST


async def test_every_kafka_topic_config_on_create_and_describe(autojump_clock):
    every = {
        "segment.jitter.ms": "10",
        "file.delete.delay.ms": "1000",
        "compression.type": "snappy",
        "preallocate": "true",
        "message.format.version": "2.8-IV1",
        "message.timestamp.difference.max.ms": "3600000",
        "leader.replication.throttled.replicas": "*",
        "follower.replication.throttled.replicas": "0:1",
        "message.downconversion.enable": "false",
    }
    async with (
        open_test_cluster(1) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        await admin.create_topic("all", 1, 1, configs=every)
        entries = {e.name: e for e in await admin.describe_config_entries(topic="all")}
        assert len(entries) == 26
        for name, value in every.items():
            assert (entries[name].value, entries[name].source) == (value, "DYNAMIC_TOPIC_CONFIG")
        assert entries["segment.bytes"].source in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")


def test_the_controller_takes_the_dynamic_cluster_default_for_unclean_elections():
    from controller.core.context import ControllerContext

    ctx = ControllerContext(1000, 1, 0, default_unclean=False)
    ctx.topic_configs = {"own": {"unclean.leader.election.enable": "false"}}
    assert not ctx.unclean_enabled("plain")
    ctx.dynamic_default_unclean = True  # /config/brokers/<default> says so
    assert ctx.unclean_enabled("plain") and not ctx.unclean_enabled("own")


async def test_a_restarted_broker_starts_with_its_dynamic_configs(autojump_clock):
    async with (
        open_test_cluster(2, topics={"t": 1}) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        assert (
            await admin.alter_configs_incrementally(
                broker_id=1, set_configs={"log.segment.bytes": "2000000"}
            )
            is None
        )
        assert await admin.replace_configs({"min.insync.replicas": "2"}) is None
        await cluster.stop_broker(1)
        await cluster.start_broker(1)
        server = cluster.live()[0].server
        assert server.broker_id == 1
        assert server.broker_configs.layers.dynamic_broker == {"log.segment.bytes": "2000000"}
        default = server.topic_configs.default
        assert (default.segment_bytes, default.min_insync_replicas) == (2_000_000, 2)


async def test_connection_limits_and_cleaner_settings_change_live(autojump_clock):
    async with (
        open_test_cluster(1) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        server = cluster.live()[0].server
        error = await admin.alter_configs_incrementally(
            broker_id=1,
            set_configs={
                "max.connections": "500",
                "max.connections.per.ip": "50",
                "log.cleaner.backoff.ms": "1234",
                "leader.replication.throttled.rate": "1048576",  # accepted, no effect
            },
        )
        assert error is None
        limits = server.bounds.limits
        assert (limits.max_connections, limits.max_per_ip) == (500, 50)
        cleaner = server.background.log_cleaner
        if cleaner is not None:
            assert cleaner.settings.backoff_s == 1.234
        described = {e.name: e for e in await admin.describe_config_entries(broker_id=1)}
        rate = described["leader.replication.throttled.rate"]
        assert (rate.value, rate.source, rate.read_only) == (
            "1048576",
            "DYNAMIC_BROKER_CONFIG",
            False,
        )


def test_documentation_only_when_asked_for():
    config = layers()
    plain = config.describe_broker(["log.retention.ms"], per_broker=True, include_synonyms=False)
    assert plain[0].documentation is None and plain[0].synonyms == []
    (documented,) = config.describe_broker(
        ["log.retention.ms"], per_broker=True, include_synonyms=False, include_documentation=True
    )
    assert documented.documentation and "delete segments older" in documented.documentation
    (topic,) = config.describe_topic(
        {}, config.current.default_log_config(), ["retention.ms"], include_synonyms=False,
        include_documentation=True,
    )  # fmt: skip
    assert topic.documentation == documented.documentation
