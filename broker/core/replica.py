"""What a leader knows about one follower: an immutable value updated on each fetch.

How it works (SPEC.md "Follower state kept by the leader"; Kafka's `Replica.scala`):
a follower's fetch at `fetch_offset` tells the leader the follower's LEO. The follower
is *caught up* at time t if it had everything the leader had at t. Two rules set
`last_caught_up_ms` on each fetch:

- the fetch reached the leader's current LEO: caught up now;
- else, the fetch reached what the leader's LEO was at the follower's *previous* fetch:
  caught up as of that previous fetch time. Under steady load a healthy follower never
  reaches the moving LEO, but always reaches where it was one fetch ago, so it is not
  dropped from the ISR.

`is_out_of_sync` is the ISR-shrink test: not at the leader's LEO and not caught up for
longer than `replica.lag.time.max.ms`.
"""

from __future__ import annotations

from typing import NamedTuple

UNKNOWN_OFFSET = -1


class FollowerState(NamedTuple):  # immutable; a NamedTuple is built fast (every fetch)
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET

    def after_fetch(
        self, fetch_offset: int, log_start_offset: int, leader_leo: int, now_ms: int
    ) -> FollowerState:
        """The state after a fetch at `fetch_offset` when the leader's LEO is `leader_leo`."""
        if fetch_offset >= leader_leo:
            caught_up = now_ms
        elif fetch_offset >= self.last_fetch_leader_leo:
            caught_up = max(self.last_caught_up_ms, self.last_fetch_ms)
        else:
            caught_up = self.last_caught_up_ms
        # A leader records this for every partition of every follower fetch.
        return FollowerState(
            self.broker_id, fetch_offset, log_start_offset, caught_up, now_ms, leader_leo
        )

    @classmethod
    def for_new_leader_term(
        cls, broker_id: int, leader_epoch_start_offset: int, now_ms: int, in_isr: bool
    ) -> FollowerState:
        """A new leadership term: the follower's LEO is unknown until it fetches.

        ISR members get a fresh grace period, as if they had fetched up to the leader's
        LEO at the start of the term just now (they were in sync as far as the controller
        knows); others start out never caught up.
        """
        if not in_isr:
            return cls(broker_id=broker_id)
        return cls(
            broker_id=broker_id,
            last_caught_up_ms=now_ms,
            last_fetch_ms=now_ms,
            last_fetch_leader_leo=leader_epoch_start_offset,
        )

    def is_out_of_sync(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> bool:
        return self.log_end_offset != leader_leo and now_ms - self.last_caught_up_ms > max_lag_ms

    def is_caught_up(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> bool:
        return not self.is_out_of_sync(leader_leo, now_ms, max_lag_ms)
