"""Topic config change notifications (/config/changes) are applied by every broker and
deleted once older than the expiry (Kafka's changeExpirationMs, 15 minutes; short here),
on trio's MockClock over the in-memory ZooKeeper."""

from __future__ import annotations

import trio
import trio.testing

from broker.core.log.config import LogConfig
from broker.zookeeper.gateway import BrokerZkGateway
from broker.zookeeper.topic_configs import CHANGE_EXPIRATION_MS, TopicConfigs
from server_common import zkdata
from tests.support.memory_zk import MemoryZooKeeperServer

EXPIRY_MS = 60_000


async def _scenario():
    server = MemoryZooKeeperServer()
    zk = server.client()
    await zk.start()
    await zk.ensure_path(zkdata.CONFIG_CHANGES)
    gateway = BrokerZkGateway(zk)
    applied: list[tuple[str, int]] = []
    configs = TopicConfigs(
        gateway,
        LogConfig(),
        on_loaded=lambda topic, config: applied.append((topic, config.retention_ms)),
        change_expiration_ms=EXPIRY_MS,
    )

    async def children() -> list[str]:
        return sorted(await zk.get_children(zkdata.CONFIG_CHANGES))

    async with trio.open_nursery() as nursery:
        await nursery.start(configs.watch_changes)
        await gateway.set_topic_config("t", {"retention.ms": "1000"})
        await trio.sleep(1)
        assert applied == [("t", 1000)]
        (first,) = await children()
        await trio.sleep(EXPIRY_MS / 2000)
        await gateway.set_topic_config("t", {"retention.ms": "2000"})
        await trio.sleep(1)
        assert applied[-1] == ("t", 2000)
        assert len(await children()) == 2
        await trio.sleep(EXPIRY_MS / 2000)  # the first is now older than the expiry
        remaining = await children()
        assert first not in remaining and len(remaining) == 1
        await trio.sleep(EXPIRY_MS / 1000)  # no new notification: the timer purges
        assert await children() == []
        nursery.cancel_scope.cancel()
    await zk.stop()


def test_notifications_are_deleted_after_the_expiry():
    trio.run(_scenario, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_default_expiry_is_kafkas():
    assert CHANGE_EXPIRATION_MS == 15 * 60 * 1000
