"""Topic ids (KIP-516): a random 128-bit UUID a topic gets when it is created, so a topic
deleted and created again under the same name is a different topic.

How it works: in memory an id is a `uuid.UUID`; `ZERO_TOPIC_ID` means "no id" (what
Kafka's `Uuid.ZERO_UUID` means on its wire). `new_topic_id` draws a random version-4
UUID, never the zero id nor `METADATA_TOPIC_ID` (0...01, which Kafka reserves), as
Kafka's `Uuid.randomUuid` does. Its text form (`topic_id_str`, in the topic znode and
in `tributary topics describe`) is Kafka's `Uuid.toString`: URL-safe base64 of the 16
big-endian bytes without padding, 22 characters; `parse_topic_id` reads it back and
raises `ValueError` for anything else. On Tributary's own wire an id is its 16 bytes
(`topic_id_bytes`); `topic_id_of_bytes` reads them, taking anything that is not 16
bytes long as "no id".
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable

ZERO_TOPIC_ID = uuid.UUID(int=0)
# Kafka's Uuid.METADATA_TOPIC_ID (its internal metadata topic): never handed out.
METADATA_TOPIC_ID = uuid.UUID(int=1)
_RESERVED = frozenset({ZERO_TOPIC_ID, METADATA_TOPIC_ID})
ZERO_TOPIC_ID_BYTES = ZERO_TOPIC_ID.bytes
_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(==)?")


def new_topic_id(draw: Callable[[], uuid.UUID] = uuid.uuid4) -> uuid.UUID:
    """A random topic id: never the zero id nor the reserved metadata topic id."""
    topic_id = draw()
    while topic_id in _RESERVED:
        topic_id = draw()
    return topic_id


def topic_id_str(topic_id: uuid.UUID) -> str:
    """Kafka's text form: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def parse_topic_id(text: str) -> uuid.UUID:
    """The id written as `topic_id_str` writes it; `ValueError` if `text` is not one."""
    if not isinstance(text, str) or _TEXT.fullmatch(text) is None:
        raise ValueError(f"not a base64 topic id: {str(text)[:40]!r}")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))


def topic_id_bytes(topic_id: uuid.UUID | None) -> bytes:
    """The 16 bytes Tributary's wire carries (zeros for no id)."""
    return (topic_id or ZERO_TOPIC_ID).bytes


def topic_id_of_bytes(raw: bytes) -> uuid.UUID:
    """The id in 16 wire bytes; the zero id for anything else (an older peer sends none)."""
    return uuid.UUID(bytes=raw) if len(raw) == 16 else ZERO_TOPIC_ID
