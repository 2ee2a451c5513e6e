"""The idempotent producer's state on a partition (broker/core/log/producer_state.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from broker.core.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    SEQUENCE_MODULUS,
    ProducerStateError,
    ProducerStateManager,
    SnapshotError,
)
from client.protocol.errors import ErrorCode
from client.protocol.records import BatchHeader


def header(pid: int, epoch: int, seq: int, count: int, base_offset: int = 0, ts: int = 1000):
    return BatchHeader(base_offset, 100, 0, 2, 0, 0, count - 1, ts, ts, pid, epoch, seq, count)


def append(state: ProducerStateManager, log: list, h: BatchHeader):
    """What the log does: check, then write and record; returns the first offset."""
    duplicate = state.check_append([h])
    if duplicate is not None:
        return duplicate.first_offset, True
    first = state.map_end_offset
    state.update(h, first)
    log.append((h.producer_id, h.producer_epoch, h.base_sequence))
    return first, False


def test_in_sequence_batches_are_accepted_and_a_retry_gets_the_original_offsets():
    state, log = ProducerStateManager(), []
    assert append(state, log, header(7, 0, 0, 3)) == (0, False)
    assert append(state, log, header(7, 0, 3, 2)) == (3, False)
    assert append(state, log, header(7, 0, 0, 3)) == (0, True)
    assert append(state, log, header(7, 0, 3, 2)) == (3, True)
    assert len(log) == 2


def test_gap_is_out_of_order_and_old_epoch_is_fenced():
    state, log = ProducerStateManager(), []
    append(state, log, header(7, 3, 0, 1))
    with pytest.raises(ProducerStateError) as gap:
        state.check_append([header(7, 3, 5, 1)])
    assert gap.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(ProducerStateError) as old:
        state.check_append([header(7, 2, 1, 1)])
    assert old.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerStateError) as new_epoch:
        state.check_append([header(7, 4, 1, 1)])
    assert new_epoch.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check_append([header(7, 4, 0, 1)]) is None


def test_an_old_duplicate_outside_the_cache_is_duplicate_sequence():
    state, log = ProducerStateManager(), []
    for seq in range(NUM_BATCHES_TO_RETAIN + 2):
        append(state, log, header(1, 0, seq, 1))
    with pytest.raises(ProducerStateError) as old:
        state.check_append([header(1, 0, 0, 1)])
    assert old.value.code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER


def test_unknown_producer_is_accepted_at_any_sequence_as_kafka_2_8():
    assert ProducerStateManager().check_append([header(5, 0, 42, 1)]) is None


def test_sequences_wrap_after_int32_max():
    state, log = ProducerStateManager(), []
    append(state, log, header(1, 0, SEQUENCE_MODULUS - 2, 2))  # ends at 2^31-1
    assert append(state, log, header(1, 0, 0, 1)) == (2, False)
    assert append(state, log, header(1, 0, SEQUENCE_MODULUS - 2, 2)) == (0, True)


def test_expiry_and_snapshot_round_trip():
    state, log = ProducerStateManager(), []
    append(state, log, header(1, 0, 0, 2, ts=1000))
    append(state, log, header(2, 1, 0, 1, ts=5000))
    copy = ProducerStateManager.from_bytes(state.to_bytes())
    assert copy == state
    assert copy.remove_expired(now_ms=6000, expiration_ms=4000) == 1
    assert copy.entry(1) is None and copy.entry(2) is not None
    damaged = bytearray(state.to_bytes())
    damaged[3] ^= 0xFF
    with pytest.raises(SnapshotError):
        ProducerStateManager.from_bytes(bytes(damaged))


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=12),
    arrivals=st.lists(st.tuples(st.integers(0, 4), st.booleans()), max_size=60),
    start_seq=st.sampled_from([0, SEQUENCE_MODULUS - 5]),
)
def test_any_interleaving_of_retries_appends_each_batch_once_in_order(sizes, arrivals, start_seq):
    """A producer with up to five batches in flight; the network reorders, drops and
    duplicates them (`arrivals`: which in-flight batch arrives next, and whether its
    answer is lost so it stays in flight); then it retries whatever is unacked, in order.
    Whatever happens, the log holds every batch exactly once, in sequence order, and a
    duplicate is answered with the offsets of its first write.

    The first batch is written before the interleaving starts: a producer id the broker
    does not know is accepted at any sequence (Case E, as Kafka 2.8), so order is only
    checked once the broker knows the producer."""
    pid, epoch = 11, 0
    seqs, seq = [], start_seq
    for size in sizes:
        seqs.append(seq)
        seq = (seq + size) % SEQUENCE_MODULUS
    batches = [header(pid, epoch, s, n) for s, n in zip(seqs, sizes, strict=True)]
    state, log = ProducerStateManager(), []
    written: dict[int, int] = {}  # batch index -> first offset
    acked: set[int] = set()
    written[0], _ = append(state, log, batches[0])

    def deliver(index: int) -> bool:
        try:
            first, duplicate = append(state, log, batches[index])
        except ProducerStateError as exc:
            note(f"batch {index}: {exc.code.name}")
            if exc.code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                assert index in written
                return True
            assert exc.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert index not in written
            return False
        if duplicate:
            assert written[index] == first
        else:
            assert index not in written
            written[index] = first
        return True

    for pick, answer_lost in arrivals:
        unacked = [i for i in range(len(batches)) if i not in acked]
        window = unacked[:NUM_BATCHES_TO_RETAIN]
        if not window:
            break
        index = window[pick % len(window)]
        if deliver(index) and not answer_lost:
            acked.add(index)
    for index in range(len(batches)):  # retries, in order, until acked
        if index not in acked:
            assert deliver(index)
    assert log == [(pid, epoch, s) for s in seqs]
