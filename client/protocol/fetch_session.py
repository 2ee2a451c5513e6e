"""Fetch sessions (KIP-227), the fetcher's side: Kafka's `FetchMetadata` and
`FetchSessionHandler`.

How it works: a fetcher keeps one `FetchSessionHandler` per broker it fetches from. Each
round it gives `build()` every partition it wants now, each with what it asks of that
partition (any value that compares equal while nothing changed: the fetch offset, the
leader epoch, the log start offset, the size limit). `build` answers with the
`FetchRequestData` to send:

- a full fetch (session epoch 0): every partition. The broker answers every partition
  and, when it created a session, its id (0: none was created; the next fetch is full
  again);
- an incremental fetch (session id, epoch >= 1): only the partitions that are new or
  whose request changed, and the ones no longer wanted to forget. The broker answers
  only the partitions whose state changed; the others stand as last answered.

`handle_response(error_code, session_id, partitions)` then says whether the answer may be
applied, and moves on to the next epoch, or back to a full fetch: a fresh one (epoch 0,
no id) after FETCH_SESSION_ID_NOT_FOUND, after a full answer that leaves a partition out
or names one not asked for, or after the broker closed the session (id 0 in an
incremental answer); one that closes the old session (its id, epoch 0) after any other
top-level error or an incremental answer naming a partition outside the session.
`handle_error()` after a failed round trip does the latter. Nothing here does I/O.

The epochs (Kafka's `FetchMetadata`): 0 asks for a new session, -1 asks for none (a
sessionless full fetch: what clients without sessions send, with id 0), 1 and up number
the incremental fetches of a session, wrapping from 2^31-1 to 1.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch asking for a new session
FINAL_EPOCH = -1  # a full fetch asking for no session (and closing the one named)
_INT32_MAX = 2**31 - 1

T = TypeVar("T")


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: FINAL stays FINAL, 2^31-1 wraps to 1 (0 means full)."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _INT32_MAX:
        return 1
    return epoch + 1


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """The session id and epoch a fetch request carries."""

    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def next_close_existing(self) -> FetchMetadata:
        """A full fetch that closes this session and asks for a new one."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def next_incremental(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    @staticmethod
    def new_incremental(session_id: int) -> FetchMetadata:
        return FetchMetadata(session_id, next_epoch(INITIAL_EPOCH))


INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)


@dataclass(frozen=True)
class FetchRequestData(Generic[T]):
    """What one fetch request carries: the partitions to send (all of them for a full
    fetch), the partitions to forget, every partition of the session after this request
    (what the answer is about), and the session id and epoch."""

    to_send: dict[TopicPartition, T]
    to_forget: list[TopicPartition]
    session_partitions: dict[TopicPartition, T]
    metadata: FetchMetadata

    def forgotten_by_topic(self) -> dict[str, list[int]]:
        by_topic: dict[str, list[int]] = {}
        for tp in self.to_forget:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return by_topic


@dataclass
class FetchSessionHandler(Generic[T]):
    """One fetcher's session with one broker (`node` names it in log lines)."""

    node: object = ""
    next_metadata: FetchMetadata = INITIAL
    session_partitions: dict[TopicPartition, T] = field(default_factory=dict)

    def build(self, wanted: Mapping[TopicPartition, T]) -> FetchRequestData[T]:
        """The next request for `wanted` (every partition to fetch now, in order)."""
        metadata = self.next_metadata
        if metadata.is_full:
            self.session_partitions = dict(wanted)
            return FetchRequestData(dict(wanted), [], dict(wanted), metadata)
        session = self.session_partitions
        to_forget: list[TopicPartition] = []
        altered: dict[TopicPartition, T] = {}
        for tp, previous in list(session.items()):
            now = wanted.get(tp)
            if now is None:
                del session[tp]
                to_forget.append(tp)
            elif now != previous:
                session[tp] = now
                altered[tp] = now
        added: dict[TopicPartition, T] = {}
        if len(session) < len(wanted):
            for tp, data in wanted.items():
                if tp not in session:
                    session[tp] = data
                    added[tp] = data
        added.update(altered)
        return FetchRequestData(added, to_forget, dict(session), metadata)

    def handle_response(
        self, error_code: int, session_id: int, partitions: Collection[TopicPartition]
    ) -> bool:
        """True if the answer to the last `build` may be applied (`partitions`: the ones it
        names); moves the session on either way."""
        metadata = self.next_metadata
        if error_code != ErrorCode.NONE:
            log.info(
                "node %s could not serve fetch session %d epoch %d: %s",
                self.node,
                metadata.session_id,
                metadata.epoch,
                ErrorCode.from_code(error_code).name,
            )
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.next_metadata = INITIAL
            else:
                self.next_metadata = metadata.next_close_existing()
            return False
        session = self.session_partitions
        extra = [tp for tp in partitions if tp not in session]
        if metadata.is_full:
            if extra or len(partitions) != len(session):
                log.info(
                    "node %s sent an invalid full fetch response (%d partitions for %d asked)",
                    self.node,
                    len(partitions),
                    len(session),
                )
                self.next_metadata = INITIAL
                return False
            self.next_metadata = (
                INITIAL
                if session_id == INVALID_SESSION_ID
                else FetchMetadata.new_incremental(session_id)
            )
            return True
        if extra:
            log.info(
                "node %s sent an incremental fetch response naming %d partitions outside "
                "session %d, e.g. %s",
                self.node,
                len(extra),
                metadata.session_id,
                extra[0],
            )
            self.next_metadata = metadata.next_close_existing()
            return False
        if session_id == INVALID_SESSION_ID:  # the broker closed the session
            self.next_metadata = INITIAL
        else:
            self.next_metadata = metadata.next_incremental()
        return True

    def handle_error(self) -> None:
        """The request failed (no answer): the next fetch is full and closes the session."""
        self.next_metadata = self.next_metadata.next_close_existing()
