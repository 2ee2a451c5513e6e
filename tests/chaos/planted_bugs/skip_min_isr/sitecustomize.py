"""PLANTED BUG skip_min_isr, for tests/chaos/test_planted_bug.py only: every topic behaves
as if min.insync.replicas were 1, so acks=all records are acknowledged by a leader alone.
The test proves the chaos checker catches the loss this causes.

How it is planted: Python imports `sitecustomize` at start-up from its path, and the test
puts this directory first on the PYTHONPATH of the broker processes it starts, and of
nothing else (`planted_bug_env`; ChaosCluster passes `env` to brokers only). This module
then waits, with an import hook, for the broker to import
`broker.zookeeper.topic_configs` (so nothing is imported earlier than in a real broker)
and patches `TopicConfigs` there: the broker default and every topic config it loads
get min.insync.replicas=1, which is what the partitions' min-ISR check reads. Nothing
under broker/ knows about it.
"""

from __future__ import annotations

import logging
import os
import sys

TARGET = "broker.zookeeper.topic_configs"
WARNING = "PLANTED BUG skip_min_isr: min.insync.replicas ignored (tests only)"


def plant(module) -> None:
    """Patch `module.TopicConfigs` so every config it holds has min.insync.replicas=1."""
    log = logging.getLogger(TARGET)
    cls = module.TopicConfigs
    original_init, original_set, original_default = cls.__init__, cls.set, cls.set_default

    def skip_min_isr(config):
        log.warning(WARNING)
        return config.merged(min_insync_replicas=1)

    def __init__(self, gateway, default, *args, **kwargs):
        original_init(self, gateway, skip_min_isr(default), *args, **kwargs)

    def set(self, topic, config, *args, **kwargs):
        original_set(self, topic, skip_min_isr(config), *args, **kwargs)

    def set_default(self, default):
        original_default(self, skip_min_isr(default))

    cls.__init__, cls.set, cls.set_default = __init__, set, set_default


# The shared hook (../plant_on_import.py) runs `plant` on each target module once it ran.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from plant_on_import import install  # noqa: E402

install(lambda name: name == TARGET, plant)
