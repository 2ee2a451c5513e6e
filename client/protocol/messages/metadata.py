"""What a client asks a broker first: ApiVersions (the handshake) and Metadata.

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring). Every connection of a pool opens with ApiVersions, its last field ending in a
blank line (`PROBE_LINE_END`) so that a text server answers at once and is recognised;
Metadata then gives the brokers, the controller and each topic's id and partitions,
which clients route every other request by.
"""

from __future__ import annotations

from client.protocol.schema import empty_list, struct
from client.protocol.topic_ids import ZERO_TOPIC_ID_BYTES

# --- ApiVersions (18) ----------------------------------------------------------------------


@struct
class ApiVersionsRequest:
    # Kafka's v3 fields: who is asking (brokers may log it).
    client_software_name: str = ""
    client_software_version: str = ""
    # Clients set this to PROBE_LINE_END on the first request of a connection and brokers
    # ignore it: a line-based text server (HTTP, such as a metrics port; SMTP; Redis)
    # answers a line at once, so the client can tell from the first bytes back that the
    # peer is not a Tributary broker instead of waiting for a timeout.
    line_end: str = ""


# The bytes that end a request head for HTTP/1.x and a command for other text protocols.
PROBE_LINE_END = "\r\n\r\n"


@struct
class ApiVersionsResponseKey:
    api_key: int
    min_version: int
    max_version: int


@struct
class ApiVersionsResponse:
    error_code: int
    api_keys: list[ApiVersionsResponseKey]


# --- Metadata (3) --------------------------------------------------------------------------


@struct
class MetadataRequest:
    topics: list[str] | None  # None = all topics
    allow_auto_topic_creation: bool = False
    # Topics asked for by id (16 bytes each; Kafka's Metadata v12), besides `topics`: each
    # is answered under its name, or with UNKNOWN_TOPIC_ID, an empty name and the id.
    topic_ids: list[bytes] = empty_list()


@struct
class MetadataResponseBroker:
    node_id: int
    host: str
    port: int
    rack: str | None


@struct
class MetadataResponsePartition:
    error_code: int
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]


@struct
class MetadataResponseTopic:
    error_code: int
    name: str
    is_internal: bool
    partitions: list[MetadataResponsePartition]
    # The topic id (16 bytes, client/protocol/topic_ids.py); zeros when it has none, or
    # from a broker older than topic ids.
    topic_id: bytes = ZERO_TOPIC_ID_BYTES


@struct
class MetadataResponse:
    brokers: list[MetadataResponseBroker]
    cluster_id: str | None
    controller_id: int
    topics: list[MetadataResponseTopic]
