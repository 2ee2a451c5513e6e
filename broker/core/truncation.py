"""Where a new follower truncates its log: leader-epoch based (KIP-101, KIP-279).

How it works (SPEC.md "Truncation when becoming a follower"): the follower asks the
leader for the end offset of the follower's latest epoch E (OffsetForLeaderEpoch). The
leader answers (epoch L <= E it knows, end offset O): the first offset after its last
batch of epoch L. Then:

- the leader knows no epochs at all (O undefined): fall back to the follower's HW;
- L == the epoch we asked about: truncate to min(O, own LEO);
- L < E: the follower may hold epochs the leader never had. It looks up its own end of
  epoch L: if it also knows L, truncate to min(O, own end of L, LEO) and stop;
  otherwise (it has no L) truncate to its own end for the largest epoch <= L and ask
  again with that epoch (another round).

Truncating to the HW instead (the pre-KIP-101 rule) loses acknowledged data after a
restart and lets replicas diverge after a double crash; tests/unit/test_kip101.py shows
both cases.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.core.log.leader_epoch import LeaderEpochCache

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class TruncationDecision:
    offset: int
    completed: bool
    # When not completed: the epoch to ask the leader about in the next round.
    next_epoch: int = UNDEFINED_EPOCH


def decide_truncation(
    epoch_cache: LeaderEpochCache,
    log_end_offset: int,
    high_watermark: int,
    leader_epoch: int,
    leader_end_offset: int,
) -> TruncationDecision:
    """Apply the leader's OffsetForLeaderEpoch answer to this follower's log."""
    if leader_end_offset == UNDEFINED_OFFSET or leader_epoch == UNDEFINED_EPOCH:
        return TruncationDecision(min(high_watermark, log_end_offset), True)
    own_epoch, own_end = epoch_cache.end_offset_for(leader_epoch, log_end_offset)
    if own_epoch == UNDEFINED_EPOCH:
        # We know no epoch <= the leader's: nothing of ours can be trusted past the HW.
        return TruncationDecision(min(high_watermark, leader_end_offset, log_end_offset), True)
    if own_epoch != leader_epoch:
        return TruncationDecision(min(own_end, log_end_offset), False, own_epoch)
    return TruncationDecision(min(leader_end_offset, own_end, log_end_offset), True)
