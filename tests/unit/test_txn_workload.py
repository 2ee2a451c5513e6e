"""The transactional workload's client settings (tests/chaos/txn_workload.py): its
transactional producers close idle connections well within one transactional call's
timeout, the workaround that keeps librdkafka's send_offsets_to_transaction from hanging
for good once the group coordinator's broker was killed (librdkafka #5511, #5456: the
coordinator is looked up again only when one of the client's connections changes state;
seen as 5-10 minute stalls, or no end, in tests/chaos/test_exactly_once.py)."""

from __future__ import annotations

from tests.chaos.txn_workload import OP_TIMEOUT_S, producer_config


def test_transactional_producers_close_idle_connections_within_a_call_timeout():
    config = producer_config("127.0.0.1:9092", "txn-x")
    idle_ms = config["connections.max.idle.ms"]
    assert 0 < idle_ms < OP_TIMEOUT_S * 1000 / 2
    # librdkafka closes up to 2 s early (jitter) from 4 s on: still above the
    # transaction's own round trips, so a busy producer keeps its connections.
    assert idle_ms >= 4_000
    assert config["transactional.id"] == "txn-x"
