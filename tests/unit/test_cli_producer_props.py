"""`--producer-props NAME=VALUE ...` on `tributary produce` and `perf produce`: Kafka's
partitioner settings reach the producer as its keyword arguments; an unknown name or a
bad value is a usage error (exit 2) that names what is accepted."""

from __future__ import annotations

import pytest

from tools.cli import build_parser
from tools.commands.producer_props import producer_props
from tools.errors import CliError


def _props(*argv: str) -> dict:
    return producer_props(build_parser().parse_args(list(argv)))


def test_the_partitioner_settings_become_producer_keywords():
    assert _props(
        "produce", "t", "--producer-props", "partitioner.availability.timeout.ms=500",
        "partitioner.adaptive.partitioning.enable=false", "partitioner.ignore.keys=TRUE",
    ) == {
        "partitioner_availability_timeout_ms": 500,
        "partitioner_adaptive_partitioning_enable": False,
        "partitioner_ignore_keys": True,
    }  # fmt: skip
    assert _props(
        "perf", "produce", "--topic", "t", "--num-records", "1", "--throughput", "-1",
        "--producer-props", "partitioner.availability.timeout.ms=0",
    ) == {"partitioner_availability_timeout_ms": 0}  # fmt: skip
    assert _props("produce", "t") == {}


@pytest.mark.parametrize(
    "item, named",
    [
        ("linger.ms=5", "partitioner.availability.timeout.ms"),
        ("partitioner.ignore.keys", "NAME=VALUE"),
        ("partitioner.availability.timeout.ms=-1", "0 or more"),
        ("partitioner.availability.timeout.ms=soon", "a number"),
        ("partitioner.ignore.keys=yes", "true or false"),
    ],
)
def test_bad_settings_are_usage_errors(item, named):
    with pytest.raises(CliError) as caught:
        _props("produce", "t", "--producer-props", item)
    assert caught.value.exit_code == 2 and named in str(caught.value)
