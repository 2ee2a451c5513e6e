"""Authorization of the transaction APIs on the in-process cluster (Kafka's rules):
TransactionalId Write for the producer's requests, Describe to find, describe and list,
Write on each topic added (the others OPERATION_NOT_ATTEMPTED), and ClusterAction for
the broker-to-broker WriteTxnMarkers and KIP-890's verify_only."""

from __future__ import annotations

import pytest
import trio

from client.admin import Acl
from client.protocol import messages as m
from client.protocol.acl_types import AclOperation, ResourceType
from client.protocol.errors import ErrorCode, TributaryError
from tests.unit.test_authorization import TOPIC, as_user, secured

TXN = ResourceType.TRANSACTIONAL_ID
Op = AclOperation


def add(tid: str, *topics: str, verify_only: bool = False) -> m.AddPartitionsToTxnRequest:
    return m.AddPartitionsToTxnRequest(
        transactional_id=tid,
        producer_id=1,
        producer_epoch=0,
        topics=[m.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics],
        verify_only=verify_only,
    )


def codes(answer: m.AddPartitionsToTxnResponse) -> dict[str, int]:
    return {t.name: t.results[0].error_code for t in answer.results}


async def init(send, tid: str) -> m.InitProducerIdResponse:
    request = m.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000)
    for _ in range(200):
        await send(m.FindCoordinatorRequest(key=tid, key_type=1))
        answer = await send(request)
        if answer.error_code == ErrorCode.NONE:
            return answer
        await trio.sleep(0.1)
    raise AssertionError(f"InitProducerId {tid}: {answer}")


async def test_transaction_apis_follow_kafkas_rules(autojump_clock):
    async with secured() as (cluster, admin):
        await admin.create_acls(
            [Acl(TXN, "bob-tx", "User:bob", Op.WRITE), Acl(TOPIC, "orders", "User:bob", Op.WRITE)]
        )
        async with as_user(cluster, "User:admin") as root:
            await init(root, "other-tx")
        async with as_user(cluster, "User:bob") as bob:
            mine = await init(bob, "bob-tx")
            found = await bob(m.FindCoordinatorRequest(key="other-tx", key_type=1))
            assert found.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            refused = await bob(
                m.InitProducerIdRequest(transactional_id="other-tx", transaction_timeout_ms=60_000)
            )
            assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert codes(await bob(add("other-tx", "orders"))) == {
                "orders": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            }
            assert codes(await bob(add("bob-tx", "orders", "secret"))) == {
                "orders": ErrorCode.OPERATION_NOT_ATTEMPTED,
                "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            }
            assert codes(await bob(add("bob-tx", "orders", verify_only=True))) == {
                "orders": ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            }
            allowed = await bob(
                m.AddPartitionsToTxnRequest(
                    transactional_id="bob-tx",
                    producer_id=mine.producer_id,
                    producer_epoch=mine.producer_epoch,
                    topics=[m.AddPartitionsToTxnTopic(name="orders", partitions=[0])],
                )
            )
            assert codes(allowed) == {"orders": ErrorCode.NONE}
            ended = await bob(
                m.EndTxnRequest(
                    transactional_id="other-tx", producer_id=1, producer_epoch=0, committed=True
                )
            )
            assert ended.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            offsets = await bob(
                m.AddOffsetsToTxnRequest(
                    transactional_id="bob-tx", producer_id=1, producer_epoch=0, group_id="g"
                )
            )
            assert offsets.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            described = await bob(
                m.DescribeTransactionsRequest(transactional_ids=["bob-tx", "other-tx"])
            )
            by_id = {s.transactional_id: s for s in described.transaction_states}
            assert by_id["bob-tx"].transaction_state == "Ongoing"
            assert by_id["other-tx"].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            listed = await bob(m.ListTransactionsRequest())
            assert [t.transactional_id for t in listed.transaction_states] == ["bob-tx"]
            with pytest.raises(TributaryError) as markers:
                await bob(m.WriteTxnMarkersRequest(markers=[]))
            assert markers.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
