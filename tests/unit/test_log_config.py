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
