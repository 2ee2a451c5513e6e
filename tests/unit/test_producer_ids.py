"""Producer id blocks claimed in ZooKeeper (broker/core/producer_ids.py and
BrokerZkGateway.claim_producer_id_block), on the in-memory ZooKeeper."""

from __future__ import annotations

import json

import pytest
import trio

from broker.core.producer_ids import (
    ProducerIdBlock,
    ProducerIdBlockError,
    ProducerIdGenerator,
    encode_block,
    next_block,
)
from broker.zookeeper.gateway import BrokerZkGateway
from server_common import zkdata
from tests.support.memory_zk import MemoryZooKeeperServer


def test_blocks_follow_each_other_in_kafkas_format():
    first = next_block(None, broker_id=1)
    assert first == ProducerIdBlock(1, 0, 999)
    data = encode_block(first)
    assert json.loads(data) == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    assert next_block(data, broker_id=2) == ProducerIdBlock(2, 1000, 1999)
    with pytest.raises(ProducerIdBlockError):
        next_block(b"{not json", broker_id=2)


def test_the_generator_asks_for_a_new_block_when_one_is_used_up():
    generator = ProducerIdGenerator()
    assert generator.needs_block
    generator.use_block(ProducerIdBlock(0, 10, 11))
    assert [generator.next_id(), generator.next_id()] == [10, 11]
    assert generator.needs_block


async def test_brokers_racing_for_blocks_never_share_an_id():
    server = MemoryZooKeeperServer()
    gateways = [BrokerZkGateway(server.client()) for _ in range(3)]
    for gateway in gateways:
        await gateway.zk.start()
    blocks: list[ProducerIdBlock] = []

    async def claim(gateway: BrokerZkGateway, broker_id: int) -> None:
        for _ in range(5):
            blocks.append(await gateway.claim_producer_id_block(broker_id, block_size=10))

    async with trio.open_nursery() as nursery:
        for broker_id, gateway in enumerate(gateways):
            nursery.start_soon(claim, gateway, broker_id)
    ids = [pid for block in blocks for pid in range(block.start, block.end + 1)]
    assert sorted(ids) == list(range(150))
    data, _ = await gateways[0].zk.get(zkdata.LATEST_PRODUCER_ID_BLOCK)
    assert json.loads(data)["block_end"] == "149"
    for gateway in gateways:
        await gateway.zk.stop()
