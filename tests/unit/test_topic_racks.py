"""CreateTopics and CreatePartitions read the live brokers' racks from their
registrations in a real ZooKeeper: when only some brokers have a rack the request is
refused with Kafka's message, unless it disables rack-awareness (kafka-topics'
--disable-rack-aware); when all have one, every partition spans the racks."""

from __future__ import annotations

import trio

from broker.core.log.config import LogConfig
from broker.core.metadata_cache import MetadataCache
from broker.core.rack_assignment import MIXED_RACKS
from broker.handlers.metadata_changes import MetadataChanges
from broker.handlers.topics import TopicDefaults, TopicHandlers
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from server_common import zkdata
from server_common.zk_kazoo import KazooZooKeeper


def _create(name: str, partitions: int, rf: int, **kwargs) -> m.CreateTopicsRequest:
    topic = m.CreateTopicsTopic(name=name, num_partitions=partitions, replication_factor=rf)
    return m.CreateTopicsRequest(topics=[topic], timeout_ms=0, **kwargs)


async def _scenario(zk_connect: str) -> None:
    zk = KazooZooKeeper(zk_connect)
    await zk.start()
    try:
        gateway = BrokerZkGateway(zk)
        await zk.ensure_paths(zkdata.PERSISTENT_PATHS)
        racks = {1: "a", 2: "b", 3: "a", 4: "b"}
        for broker_id, rack in racks.items():
            registration = zkdata.BrokerRegistration(broker_id, "127.0.0.1", 1, rack=rack)
            await zk.create(zkdata.broker_path(broker_id), registration.encode())
        handlers = TopicHandlers(
            gateway,
            MetadataCache(),
            MetadataChanges(),
            topic_defaults=TopicDefaults(),
            default_log_config=LogConfig(),
        )

        (result,) = (await handlers.create_topics(_create("spread", 8, 2))).topics
        assert result.error_code == ErrorCode.NONE, result.error_message
        written = await gateway.topic_assignment_and_version("spread")
        assert written is not None
        for replicas in written.partitions.values():
            assert {racks[b] for b in replicas} == {"a", "b"}

        # Broker 5 registers without a rack: Kafka refuses to guess.
        plain = zkdata.BrokerRegistration(5, "127.0.0.1", 1)
        await zk.create(zkdata.broker_path(5), plain.encode())
        (result,) = (await handlers.create_topics(_create("mixed", 3, 2))).topics
        assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert result.error_message == MIXED_RACKS
        (added,) = (
            await handlers.create_partitions(
                m.CreatePartitionsRequest(
                    topics=[m.CreatePartitionsTopic(name="spread", count=10)], timeout_ms=0
                )
            )
        ).results
        assert added.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        request = _create("mixed", 3, 2, disable_rack_aware=True)
        (result,) = (await handlers.create_topics(request)).topics
        assert result.error_code == ErrorCode.NONE, result.error_message
        assert await gateway.topic_assignment_and_version("mixed") is not None
    finally:
        await zk.stop()


def test_racks_from_registrations_decide_the_assignment(zk_connect: str) -> None:
    trio.run(_scenario, zk_connect)
