"""Topic-level log configs: Kafka names, defaults and validation."""

from __future__ import annotations

import pytest

from broker.core.log import TOPIC_CONFIG_NAMES, ConfigError, LogConfig


def test_defaults_are_kafkas():
    props = LogConfig().to_properties()
    assert props == {
        "segment.bytes": "1073741824",
        "segment.ms": "604800000",
        "segment.index.bytes": "10485760",
        "index.interval.bytes": "4096",
        "retention.ms": "604800000",
        "retention.bytes": "-1",
        "max.message.bytes": "1048588",
        "flush.messages": str(2**63 - 1),
        "flush.ms": str(2**63 - 1),
        "message.timestamp.type": "CreateTime",
        "cleanup.policy": "delete",
        "delete.retention.ms": "86400000",
        "min.cleanable.dirty.ratio": "0.5",
        "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": str(2**63 - 1),
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "false",
        "segment.jitter.ms": "0",
        "file.delete.delay.ms": "60000",
        "compression.type": "producer",
        "preallocate": "false",
        "message.format.version": "2.8-IV1",
        "message.timestamp.difference.max.ms": str(2**63 - 1),
        "leader.replication.throttled.replicas": "",
        "follower.replication.throttled.replicas": "",
        "message.downconversion.enable": "true",
    }
    assert set(props) == TOPIC_CONFIG_NAMES


def test_from_properties_parses_and_round_trips():
    config = LogConfig.from_properties(
        {
            "segment.bytes": "1048576",
            "retention.ms": "-1",
            "cleanup.policy": "Compact, delete",
            "unclean.leader.election.enable": "TRUE",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert config.segment_bytes == 1048576 and config.retention_ms == -1
    assert config.compact_enabled and config.delete_enabled and config.log_append_time
    assert config.unclean_leader_election_enable is True
    assert LogConfig.from_properties(config.to_properties()) == config


def test_defaults_and_merging():
    base = LogConfig.from_properties({"retention.bytes": "100"})
    topic = LogConfig.from_properties({"segment.ms": "10"}, defaults=base)
    assert (topic.retention_bytes, topic.segment_ms) == (100, 10)
    merged = topic.merged({"retention.bytes": "5"}, min_insync_replicas=2)
    assert (merged.retention_bytes, merged.min_insync_replicas, merged.segment_ms) == (5, 2, 10)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"segment.byte": "1"}, "unknown topic config 'segment.byte'"),
        ({"segment.bytes": "lots"}, "segment.bytes: 'lots' is not an integer"),
        ({"segment.bytes": "10"}, r"segment.bytes: 10 is out of range \[14, 2147483647\]"),
        ({"segment.bytes": str(2**31)}, "segment.bytes: 2147483648 is out of range"),
        ({"retention.ms": "-2"}, "retention.ms: -2 is out of range"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas: 0 is out of range"),
        ({"unclean.leader.election.enable": "yes"}, "not true or false"),
        ({"message.timestamp.type": "WallClock"}, "not one of CreateTime, LogAppendTime"),
        ({"cleanup.policy": "delete,shred"}, "comma-separated list of compact and delete"),
        ({"min.cleanable.dirty.ratio": "1.5"}, r"min.cleanable.dirty.ratio: 1.5 is out of range"),
        ({"min.cleanable.dirty.ratio": "half"}, "min.cleanable.dirty.ratio: 'half' is not a"),
        ({"delete.retention.ms": "-1"}, "delete.retention.ms: -1 is out of range"),
        ({"min.compaction.lag.ms": "-1"}, "min.compaction.lag.ms: -1 is out of range"),
        ({"max.compaction.lag.ms": "0"}, "max.compaction.lag.ms: 0 is out of range"),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "min.compaction.lag.ms 10 is above max.compaction.lag.ms 5",
        ),
        ({"segment.bytes": "1_000"}, "not an integer"),
        ({"segment.jitter.ms": "-1"}, "segment.jitter.ms: -1 is out of range"),
        ({"file.delete.delay.ms": "-5"}, "file.delete.delay.ms: -5 is out of range"),
        ({"compression.type": "brotli"}, "not one of uncompressed, zstd, lz4, snappy, gzip"),
        ({"compression.type": "GZIP"}, "not one of"),  # Kafka's ValidString is exact
        ({"preallocate": "1"}, "preallocate: '1' is not true or false"),
        ({"message.format.version": "3.9"}, "version '3.9' is not a valid version"),
        ({"message.format.version": "0.10"}, "is not a valid version"),
        ({"message.timestamp.difference.max.ms": "-1"}, "out of range"),
        ({"leader.replication.throttled.replicas": "0:1,x"}, "literal '\\*' or a list"),
        ({"follower.replication.throttled.replicas": "*,0:1"}, "literal '\\*' or a list"),
        ({"message.downconversion.enable": "maybe"}, "not true or false"),
    ],
)
def test_bad_properties_raise_config_error_naming_the_key(props, message):
    with pytest.raises(ConfigError, match=message):
        LogConfig.from_properties(props)


def test_compaction_settings_parse_and_round_trip():
    config = LogConfig.from_properties(
        {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.25",
            "delete.retention.ms": "1000",
            "min.compaction.lag.ms": "5",
            "max.compaction.lag.ms": "60000",
        }
    )
    assert config.compact_enabled and not config.delete_enabled
    assert (config.min_cleanable_dirty_ratio, config.delete_retention_ms) == (0.25, 1000)
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (5, 60000)
    assert LogConfig.from_properties(config.to_properties()) == config
    assert LogConfig(min_cleanable_dirty_ratio=1).min_cleanable_dirty_ratio == 1.0


def test_broker_defaults_reach_the_topic_configs():
    from broker.config import BrokerConfig

    broker = BrokerConfig(
        {
            "broker.id": "1",
            "listeners": "PLAINTEXT://localhost:9092",
            "log.dirs": "/tmp/unused",
            "log.cleanup.policy": "compact,delete",
            "log.cleaner.min.cleanable.ratio": "0.1",
            "log.cleaner.delete.retention.ms": "7",
            "log.cleaner.min.compaction.lag.ms": "3",
        }
    )
    config = LogConfig.from_properties(broker.default_topic_properties())
    assert config.compact_enabled and config.delete_enabled
    assert (config.min_cleanable_dirty_ratio, config.delete_retention_ms) == (0.1, 7)
    assert config.min_compaction_lag_ms == 3


def test_direct_construction_is_validated_too():
    with pytest.raises(ConfigError, match="index.interval.bytes"):
        LogConfig(index_interval_bytes=-1)
    with pytest.raises(ConfigError, match="unknown LogConfig field"):
        LogConfig().merged(segment_byte=5)
    assert isinstance(ConfigError("x"), ValueError)


def test_every_kafka_28_topic_config_is_accepted_with_a_valid_value():
    """The 26 names of Kafka 2.8's LogConfig, each with a value Kafka accepts."""
    props = {
        "segment.bytes": "1048576",
        "segment.ms": "3600000",
        "segment.jitter.ms": "1000",
        "segment.index.bytes": "4096",
        "flush.messages": "1000",
        "flush.ms": "1000",
        "retention.bytes": "-5",  # Kafka sets no lower bound
        "retention.ms": "-1",
        "max.message.bytes": "2000000",
        "index.interval.bytes": "1024",
        "delete.retention.ms": "1000",
        "min.compaction.lag.ms": "1",
        "max.compaction.lag.ms": "100000",
        "file.delete.delay.ms": "0",
        "min.cleanable.dirty.ratio": "0.1",
        "cleanup.policy": "compact,delete",
        "unclean.leader.election.enable": "True",
        "min.insync.replicas": "2",
        "compression.type": "zstd",
        "preallocate": "true",
        "message.format.version": "2.8",
        "message.timestamp.type": "LogAppendTime",
        "message.timestamp.difference.max.ms": "60000",
        "leader.replication.throttled.replicas": "0:1, 1:2",
        "follower.replication.throttled.replicas": "*",
        "message.downconversion.enable": "false",
    }
    assert set(props) == TOPIC_CONFIG_NAMES and len(props) == 26
    config = LogConfig.from_properties(props)
    assert config.compression_type == "zstd" and config.recompression_codec == "zstd"
    assert config.leader_replication_throttled_replicas == "0:1,1:2"
    assert config.preallocate and not config.message_downconversion_enable
    assert LogConfig.from_properties(config.to_properties()) == config
    for version in ("0.8.2", "0.10.0-IV1", "0.10.0.1", "1.0", "2.8-IV1", "2.8.1"):
        assert LogConfig.from_properties({"message.format.version": version})


def test_unknown_names_and_conflicts_are_invalid_config_errors():
    from broker.core.log.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties({"retention.msx": "1"})
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties({"min.compaction.lag.ms": "9", "max.compaction.lag.ms": "8"})
    with pytest.raises(ConfigError) as bad_value:
        LogConfig.from_properties({"retention.ms": "x"})
    assert not isinstance(bad_value.value, InvalidConfigError)


def test_segment_jitter_and_max_segment_ms_follow_kafka():
    assert LogConfig().random_segment_jitter(lambda: 12345) == 0
    config = LogConfig(segment_ms=1000, segment_jitter_ms=5000)
    assert config.random_segment_jitter(lambda: 2500) == 2500 % 1000  # min(jitter, segment.ms)
    assert LogConfig(segment_jitter_ms=300).random_segment_jitter(lambda: -1000) == 100
    compacted = LogConfig(cleanup_policy="compact", max_compaction_lag_ms=50, segment_ms=1000)
    assert compacted.max_segment_ms == 50 and LogConfig(segment_ms=70).max_segment_ms == 70
