"""Error codes as clients see them: Kafka's numbers, retriability, unknown codes."""

from __future__ import annotations

import pytest

from client.protocol.errors import ErrorCode, TributaryError, raise_for


@pytest.mark.parametrize(
    ("code", "number", "retriable"),
    [
        (ErrorCode.UNKNOWN_SERVER_ERROR, -1, False),
        (ErrorCode.OFFSET_OUT_OF_RANGE, 1, False),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 3, True),
        (ErrorCode.LEADER_NOT_AVAILABLE, 5, True),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, 6, True),
        (ErrorCode.REQUEST_TIMED_OUT, 7, True),
        (ErrorCode.NETWORK_EXCEPTION, 13, True),
        (ErrorCode.NOT_COORDINATOR, 16, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS, 19, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, True),
        (ErrorCode.REBALANCE_IN_PROGRESS, 27, False),
        (ErrorCode.TOPIC_ALREADY_EXISTS, 36, False),
        (ErrorCode.NOT_CONTROLLER, 41, True),
        (ErrorCode.INVALID_REQUEST, 42, False),
        (ErrorCode.FENCED_LEADER_EPOCH, 74, True),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, 75, True),
        (ErrorCode.STALE_BROKER_EPOCH, 77, False),
        (ErrorCode.ELECTION_NOT_NEEDED, 84, True),
        (ErrorCode.THROTTLING_QUOTA_EXCEEDED, 89, True),
    ],
)
def test_codes_match_kafka_and_know_whether_to_retry(code, number, retriable):
    assert code == number
    assert code.is_retriable is retriable
    assert code.description


def test_unknown_numbers_map_to_unknown_server_error():
    assert ErrorCode.from_code(4242) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.from_code(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_raise_for_raises_only_for_errors():
    raise_for(ErrorCode.NONE)
    raise_for(0)
    with pytest.raises(TributaryError) as caught:
        raise_for(6, "leader moved to broker 2")
    assert caught.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert caught.value.retriable
    assert str(caught.value) == "NOT_LEADER_OR_FOLLOWER: leader moved to broker 2"


def test_error_without_message_describes_its_code():
    error = TributaryError(ErrorCode.REQUEST_TIMED_OUT)
    assert str(error) == "REQUEST_TIMED_OUT: The request timed out."
    assert TributaryError(9999).code is ErrorCode.UNKNOWN_SERVER_ERROR
